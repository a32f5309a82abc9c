//! Optional payload protection of a connection (issue #11, docs/SECURITY.md
//! §5): ChaCha20-Poly1305 per data packet with a replay window per path,
//! keyed from the authenticated handshake's [`SessionKeys`].
//!
//! * Send: the packet is built as usual, then its application data is
//!   sealed in place with the whole DCCP header as associated data
//!   (`subflow/protect.rs` says exactly what is covered), after the
//!   scheduler picked the path (each path has its own key and counter).
//! * Receive: a data packet is opened right after parsing, before the
//!   subflow sees it. One that does not open — forged, altered header or
//!   payload, replayed, too old — is dropped and counted
//!   (`rx_protect_failed`, `rx_replayed`) and has no effect at all: it does
//!   not move the sequence window (GSR), is not recorded in the Ack Vector,
//!   acknowledges nothing, counts for no liveness and reaches no reorderer.
//!   Otherwise an attacker who sees the sequence numbers could ack data
//!   that was lost, or push GSR ahead so that genuine packets fail the
//!   window check (RFC 4340 §7.5.3).
//! * Packets without application data (handshake, pure Ack, Sync,
//!   SyncAck, Close, CloseReq, Reset) stay as they are: their MP options
//!   that matter are MP_HMAC'd under the derived d-keys already, and the
//!   rest can at worst disturb congestion control or close a path, which an
//!   on-path attacker can do by dropping packets anyway.
//! * Connections without protection are unchanged, byte for byte.

use super::subflow::{seal_packet, OpenScratch};
use super::*;
use crate::auth::protect::OVERHEAD;
use crate::auth::{AuthError, PathProtector, SessionKeys};

/// Bytes payload protection adds to every data packet. A driver takes it
/// off the largest tunnelled packet as well as [`DATA_HEADER_MAX`] (the
/// daemon's TUN MTU); [`Connection::payload_overhead`] is it or 0.
pub const PROTECTION_OVERHEAD: usize = OVERHEAD;

/// Keys and receive scratch space of a protected connection.
pub(super) struct Protection {
    keys: SessionKeys,
    scratch: OpenScratch,
    /// The initial subflow's protector (empty binding) exists: a second
    /// initial subflow would reuse its key and counters, so it gets none.
    initial_bound: bool,
}

/// Subflow `sf`'s protector, built on first use; `None` for a second
/// initial subflow (never reached: `check_initial_request` refuses one).
fn path_protector<'p>(prot: &mut Protection, sf: &'p mut Subflow) -> Option<&'p mut PathProtector> {
    if !sf.has_protector() && !sf.is_join() {
        if prot.initial_bound {
            return None;
        }
        if sf.binding_fixed() {
            prot.initial_bound = true;
        }
    }
    sf.protector(&prot.keys)
}

impl Connection {
    /// Seals every data packet from now on, and accepts only sealed ones,
    /// with keys from the authenticated handshake. Call it once, before the
    /// first data packet (the server when it creates the connection, the
    /// client when the Response gave it the keys); the peer must do the
    /// same with its side's keys.
    pub fn enable_payload_protection(&mut self, keys: SessionKeys) {
        self.protection = Some(Box::new(Protection {
            keys,
            scratch: OpenScratch::default(),
            initial_bound: false,
        }));
    }

    /// Payload protection is on.
    pub fn payload_protected(&self) -> bool {
        self.protection.is_some()
    }

    /// Bytes each data packet carries beyond the tunnelled packet and the
    /// DCCP header: [`PROTECTION_OVERHEAD`] when protected, else 0.
    pub fn payload_overhead(&self) -> usize {
        if self.protection.is_some() {
            PROTECTION_OVERHEAD
        } else {
            0
        }
    }

    /// A parsed packet of subflow `i` (`data` its bytes): a protected data
    /// packet is opened first and goes on only if it authenticates.
    pub(super) fn handle_segment_checked(
        &mut self,
        now: Instant,
        i: usize,
        seg: &Segment<'_>,
        data: &[u8],
    ) {
        let Some(prot) = self.protection.as_deref_mut() else {
            return self.handle_segment(now, i, seg);
        };
        // Data before the handshake fixed the binding is unexpected anyway
        // (REQUEST, CLOSED): the subflow counts it and reads no data.
        if !seg.ptype.carries_data() || !self.paths[i].binding_fixed() {
            return self.handle_segment(now, i, seg);
        }
        let opened = match path_protector(prot, &mut self.paths[i]) {
            Some(p) => prot.scratch.open(p, data, seg.payload),
            None => Err(AuthError::BadPacket),
        };
        match opened {
            Ok(n) => {
                let scratch = std::mem::take(&mut prot.scratch);
                let mut seg: Segment<'_> = seg.clone();
                seg.payload = scratch.plaintext(n);
                self.handle_segment(now, i, &seg);
                if let Some(prot) = self.protection.as_deref_mut() {
                    prot.scratch = scratch;
                }
            }
            Err(AuthError::ReplayedPacket) => self.stats.rx_replayed += 1,
            Err(_) => self.stats.rx_protect_failed += 1,
        }
    }

    /// Seals the data packet just written to `buf[..len]` on subflow `i`
    /// (its last `payload_len` bytes are the tunnelled packet); returns
    /// the length to send. Unprotected: `len` unchanged.
    pub(super) fn seal_data(
        &mut self,
        i: usize,
        buf: &mut [u8],
        len: usize,
        payload_len: usize,
        addrs: (IpAddr, IpAddr),
    ) -> Option<usize> {
        let Some(prot) = self.protection.as_deref_mut() else {
            return Some(len);
        };
        let p = path_protector(prot, &mut self.paths[i])?;
        seal_packet(p, buf, len, payload_len, addrs)
    }
}
