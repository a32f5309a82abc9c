//! A received datagram parsed at most once on its way down: the socket
//! loop (a sharded server's steering), the [`Endpoint`](super::Endpoint)
//! and the [`Connection`](super::Connection) share one parse (smoltcp's
//! `Repr`, parsed once; boringtun's borrowed `Packet<'a>`).

use super::codec::{PacketType, Segment};
use crate::wire::{WireError, WireProfile};

/// The bytes of one datagram and, once someone needed it, their
/// [`Segment`], parsed without checksum verification: the connection
/// verifies checksums itself, with its path's addresses (RFC 4340 §9),
/// and then parses again.
pub struct Incoming<'a> {
    data: &'a [u8],
    parsed: Option<(WireProfile, Result<Segment<'a>, WireError>)>,
}

impl<'a> Incoming<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Incoming { data, parsed: None }
    }

    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The segment, parsed in `profile`'s layout now or by an earlier
    /// caller (in place: a `Segment` is ~1 kB to move).
    pub fn parse(&mut self, profile: WireProfile) -> Result<&Segment<'a>, WireError> {
        let data = self.data;
        let (was, parsed) = self.parsed.get_or_insert_with(|| {
            let mut fresh = (profile, Ok(Segment::new(PacketType::Data, 0)));
            if let (_, Ok(s)) = &mut fresh {
                if let Err(e) = s.parse_from(data, None, profile) {
                    fresh.1 = Err(e);
                }
            }
            fresh
        });
        debug_assert_eq!(*was, profile, "one datagram, one wire profile");
        parsed.as_ref().map_err(|e| *e)
    }
}
