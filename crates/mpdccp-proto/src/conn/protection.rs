//! Optional payload protection of a connection (docs/SECURITY.md
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
//! * Every other packet of a subflow whose handshake fixed its binding —
//!   pure Ack, Sync/SyncAck, Close/CloseReq, Reset, the third handshake
//!   packet, PLPMTUD probes — is sealed the same way, its payload (empty,
//!   or a probe's padding) as the plaintext: 24 bytes more on the wire.
//!   A forged or altered one (an invalid option, a Reset, MP_PRIO 0,
//!   REMOVEADDR, an Ack taking the next sequence numbers, a Sync far ahead)
//!   is dropped and counted like forged data and has no other effect.
//!   Only the Request and Response stay as they are: they carry the key
//!   exchange itself (the Init and Response messages authenticate them,
//!   docs/SECURITY.md §3), and before the Response verified no key exists.
//! * Connections without protection are unchanged, byte for byte.

use super::subflow::{seal_framed, seal_packet, OpenScratch, SubState};
use super::{Connection, PacketType, Segment, Subflow};
use crate::auth::protect::OVERHEAD;
use crate::auth::{AuthError, PathProtector, SessionKeys};
use crate::time::Instant;
use std::net::IpAddr;

/// Bytes payload protection adds to every data packet. A driver takes it
/// off the largest tunnelled packet as well as [`DATA_HEADER_MAX`](super::DATA_HEADER_MAX) (the
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
        self.blocked_none = None;
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
        // A Request or Response (never sealed) on a subflow past its
        // handshake (OPEN, closing): nothing is expected, and the sequence
        // checks must not see it — a mutated copy of an old Response, valid
        // by its numbers, was recorded in the Ack Vector and answered, and
        // the path later paid an RTO. Dropped and counted, no
        // other effect. In RESPOND and PARTOPEN a repeat still gets its
        // answer (RFC 4340 §8.1.5).
        if !sealed_type(seg.ptype)
            && is_bound(&self.paths[i])
            && !matches!(
                self.paths[i].state(),
                SubState::Respond | SubState::PartOpen
            )
        {
            self.stats.rx.rx_unexpected += 1;
            return;
        }
        // Before the handshake fixed the binding nothing is sealed (data
        // then is unexpected anyway: the subflow counts it and reads none).
        if !sealed_type(seg.ptype) || !is_bound(&self.paths[i]) {
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
            Err(AuthError::ReplayedPacket) => self.stats.rx.rx_replayed += 1,
            Err(_) => self.stats.rx.rx_protect_failed += 1,
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

    /// As [`seal_data`](Self::seal_data) for a packet written by
    /// `Segment::emit_for_sealing` (plaintext already after the counter's
    /// room, no checksum yet): the same bytes, without moving the payload
    /// or summing it twice. `None` when unprotected (never called then).
    pub(super) fn seal_emitted(
        &mut self,
        i: usize,
        buf: &mut [u8],
        len: usize,
        payload_len: usize,
        addrs: (IpAddr, IpAddr),
    ) -> Option<usize> {
        let prot = self.protection.as_deref_mut()?;
        let p = path_protector(prot, &mut self.paths[i])?;
        seal_framed(p, buf, len, payload_len, addrs)
    }

    /// Seals the packet of type `ptype` without application data just
    /// written to `buf[..len]` on subflow `i` (its last `payload_len`
    /// bytes, if any, are padding) when the subflow is bound; returns the
    /// length to send (`len` when nothing is sealed).
    pub(super) fn seal_control(
        &mut self,
        i: usize,
        ptype: PacketType,
        buf: &mut [u8],
        len: usize,
        payload_len: usize,
        addrs: (IpAddr, IpAddr),
    ) -> Option<usize> {
        if !self.control_sealed(i, ptype) {
            return Some(len);
        }
        self.seal_data(i, buf, len, payload_len, addrs)
    }

    /// Whether a packet of type `ptype` sent on subflow `i` now is sealed.
    pub(super) fn control_sealed(&self, i: usize, ptype: PacketType) -> bool {
        self.protection.is_some() && sealed_type(ptype) && is_bound(&self.paths[i])
    }
}

/// Packet types sealed once a subflow is bound: all but the handshake's
/// Request and Response (the key exchange authenticates those).
fn sealed_type(t: PacketType) -> bool {
    !matches!(t, PacketType::Request | PacketType::Response)
}

/// A subflow whose handshake fixed its binding, now or before (a subflow
/// that closed after opening still seals its Close and Reset).
fn is_bound(sf: &Subflow) -> bool {
    sf.binding_fixed() || sf.has_protector()
}
