//! Payload protection on one subflow (docs/SECURITY.md §5): the subflow's
//! [`PathProtector`] and what is sealed in a DCCP packet.
//!
//! * Sealed: the application data of DCCP-Data and DCCP-DataAck (the
//!   tunnelled IP packet) becomes `counter ‖ ciphertext ‖ tag`
//!   (`auth::protect::OVERHEAD` = 24 bytes more).
//! * Authenticated in clear (AEAD associated data): the whole DCCP header
//!   as it is on the wire — ports, type, CsCov, sequence and
//!   acknowledgement numbers, every option (Ack Vector, MP_SEQ, MP_RTT,
//!   MP_PRIO, MP_CONFIRM, feature negotiation) and padding — with the
//!   checksum field taken as zero, because the checksum (RFC 4340 §9) is
//!   computed after sealing, over the ciphertext. A forged or altered
//!   header therefore fails like a forged payload.
//! * Not covered: packets without application data (handshake, pure Ack,
//!   Sync/SyncAck, Close/CloseReq/Reset); see `conn/protection.rs`.

use super::{SubState, Subflow};
use crate::auth::protect::{PathProtector, COUNTER_LEN, OVERHEAD};
use crate::auth::{AuthError, SessionKeys};
use crate::wire::Packet;
use std::net::IpAddr;

impl Subflow {
    /// The path binding both ends agree on, once the subflow's handshake
    /// has fixed it (RESPOND at the server, PARTOPEN at the client, and
    /// after): empty for the connection's initial subflow (the session keys
    /// are fresh per Noise handshake, and a connection has one initial
    /// subflow), `RA ‖ RB` for a join (RFC 9897 §3.2.2 nonces: RA the
    /// client's, RB the server's; both ends know both, and fresh random
    /// nonces keep two joins of a session from sharing a key).
    pub(crate) fn protect_binding(&self) -> Option<Vec<u8>> {
        if !self.binding_fixed() {
            return None;
        }
        if !self.join {
            return Some(Vec::new());
        }
        let (ra, rb) = self.mp.ra_rb(self.initiator);
        let mut b = ra.to_be_bytes().to_vec();
        b.extend_from_slice(&rb.to_be_bytes());
        Some(b)
    }

    /// The handshake has fixed the binding, so data may flow (protected).
    pub(crate) fn binding_fixed(&self) -> bool {
        matches!(
            self.state,
            SubState::Respond
                | SubState::PartOpen
                | SubState::Open
                | SubState::CloseReq
                | SubState::Closing
        )
    }

    /// The subflow's protector, built from `keys` on first use (the first
    /// data packet either way after the binding is fixed).
    pub(crate) fn protector(&mut self, keys: &SessionKeys) -> Option<&mut PathProtector> {
        if self.protector.is_none() {
            let binding = self.protect_binding()?;
            self.protector = Some(Box::new(PathProtector::new(keys, &binding)));
        }
        self.protector.as_deref_mut()
    }

    /// Whether this subflow built a protector already.
    pub(crate) fn has_protector(&self) -> bool {
        self.protector.is_some()
    }
}

/// Seals the data packet `buf[..len]` whose last `payload_len` bytes are
/// the plaintext, in place, and fills its checksum for `addrs`; returns the
/// new length (`len + OVERHEAD`), or `None` when `buf` is too small or the
/// path's counter is exhausted.
pub(crate) fn seal_packet(
    p: &mut PathProtector,
    buf: &mut [u8],
    len: usize,
    payload_len: usize,
    addrs: (IpAddr, IpAddr),
) -> Option<usize> {
    let hl = len.checked_sub(payload_len)?;
    let sealed = len + OVERHEAD;
    if buf.len() < sealed {
        return None;
    }
    // counter (8) ‖ plaintext ‖ tag (16): the plaintext moves 8 bytes on,
    // to where `Segment::emit_for_sealing` writes it, and is sealed there.
    buf.copy_within(hl..len, hl + COUNTER_LEN);
    Packet::new_unchecked(&mut buf[..hl]).set_checksum(0);
    seal_framed(p, buf, len, payload_len, addrs)
}

/// Seals the data packet `buf[..len]` written by
/// `Segment::emit_for_sealing` with `gap = COUNTER_LEN`: its header is `buf[..len - payload_len]`, its
/// plaintext already at the frame's place right after the counter, so
/// nothing moves, and the one checksum pass is over the ciphertext. The
/// bytes are those of [`seal_packet`]; returns the sealed length.
pub(crate) fn seal_framed(
    p: &mut PathProtector,
    buf: &mut [u8],
    len: usize,
    payload_len: usize,
    addrs: (IpAddr, IpAddr),
) -> Option<usize> {
    let hl = len.checked_sub(payload_len)?;
    let sealed = len + OVERHEAD;
    if buf.len() < sealed {
        return None;
    }
    let (header, frame) = buf.split_at_mut(hl);
    p.seal_in_place(header, &mut frame[..payload_len + OVERHEAD])
        .ok()?;
    Packet::new_unchecked(&mut buf[..sealed])
        .fill_checksum(addrs)
        .ok()?;
    Some(sealed)
}

/// Scratch space of the receive side (kept between packets).
#[derive(Debug, Default)]
pub(crate) struct OpenScratch {
    aad: Vec<u8>,
    frame: Vec<u8>,
}

impl OpenScratch {
    /// Opens the data packet `data` (`payload` its application data, as
    /// parsed): on success the plaintext is `self.plaintext(n)`.
    pub(crate) fn open(
        &mut self,
        p: &mut PathProtector,
        data: &[u8],
        payload: &[u8],
    ) -> Result<usize, AuthError> {
        let hl = data.len().saturating_sub(payload.len());
        self.aad.clear();
        self.aad.extend_from_slice(&data[..hl]);
        if self.aad.len() >= 8 {
            Packet::new_unchecked(&mut self.aad[..]).set_checksum(0);
        }
        self.frame.clear();
        self.frame.extend_from_slice(payload);
        p.open(&self.aad, &mut self.frame)
    }

    /// The plaintext of the last successful [`open`](Self::open).
    pub(crate) fn plaintext(&self, n: usize) -> &[u8] {
        &self.frame[COUNTER_LEN..COUNTER_LEN + n]
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use crate::auth::protect::{PathProtector, COUNTER_LEN, OVERHEAD};
    use crate::conn::codec::{PacketType, Segment};
    use crate::wire::WireProfile;

    use super::{seal_framed, seal_packet};

    /// A packet written for sealing and sealed where it lies is, byte for
    /// byte, the packet written as usual and sealed by moving its payload:
    /// the data path's shortcut keeps the wire format.
    #[test]
    fn sealing_in_place_gives_the_bytes_of_sealing_by_moving() {
        let (keys, _) = crate::harness::session_keys(5);
        let addrs: (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let payload: Vec<u8> = (0..1400u32).map(|i| (i * 7 + 3) as u8).collect();
        for (ptype, body) in [
            (PacketType::DataAck, &payload[..]),
            (PacketType::Data, &payload[..64]),
            (PacketType::Ack, &[][..]),
        ] {
            let mut moved = PathProtector::new(&keys, &[]);
            let mut framed = PathProtector::new(&keys, &[]);
            for seq in [1u64, 2, 3] {
                let mut seg = Segment::new(ptype, seq);
                (seg.src_port, seg.dst_port) = (4242, 5353);
                if ptype.has_ack() {
                    seg.ack = Some(seq + 100);
                }
                seg.payload = body;
                let (mut a, mut b) = (vec![0u8; 2048], vec![0xEEu8; 2048]);
                let la = seg.emit_in(&mut a, addrs, WireProfile::Rfc9897).unwrap();
                let na = seal_packet(&mut moved, &mut a, la, body.len(), addrs).unwrap();
                let lb = seg
                    .emit_for_sealing(
                        &mut b,
                        WireProfile::Rfc9897,
                        COUNTER_LEN,
                        OVERHEAD - COUNTER_LEN,
                    )
                    .unwrap();
                assert_eq!(la, lb);
                let nb = seal_framed(&mut framed, &mut b, lb, body.len(), addrs).unwrap();
                assert_eq!(a[..na], b[..nb], "{ptype:?} seq {seq}");
                // Too small for the tag: refused, as `seal_packet` does.
                let mut small = vec![0u8; lb + OVERHEAD - 1];
                assert!(seg
                    .emit_for_sealing(
                        &mut small,
                        WireProfile::Rfc9897,
                        COUNTER_LEN,
                        OVERHEAD - COUNTER_LEN
                    )
                    .is_none());
            }
        }
    }
}
