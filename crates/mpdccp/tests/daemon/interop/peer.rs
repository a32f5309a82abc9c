//! A scripted MP-DCCP endpoint built only from our wire code (the profile
//! codec, the DCCP header/option encoders) and the native raw-socket
//! transport. It is not a `Connection`: it plays one fixed script (key
//! exchange, data, MP_JOIN, close) packet by packet so that every byte we
//! send to the reference kernel, and every byte it answers, is visible.
//!
//! Feature negotiation (RFC 4340 §6): every Change the peer sends is
//! confirmed with its first (preferred) value, which is what the reference
//! client does; the only Change we send is Change R(Multipath Capable, 0)
//! (RFC 9897 §3.1). With Send Ack Vector on (the server asks for it) every
//! Ack/DataAck carries an Ack Vector saying all packets from the peer's
//! initial sequence number up to the acknowledged one arrived.

use std::io;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use mpdccp_net::raw::RawDccpSocket;
use mpdccp_proto::wire::{DccpKind, DccpRepr, Header, MpOption, Packet, PacketType, WireProfile};

/// Option kinds (RFC 4340 §5.8).
const CHANGE_L: u8 = 32;
const CONFIRM_L: u8 = 33;
const CHANGE_R: u8 = 34;
const CONFIRM_R: u8 = 35;
const ACK_VECTOR_0: u8 = 38;
/// Feature 10: Multipath Capable (RFC 9897 §3.1).
pub const FEAT_MP_CAPABLE: u8 = 10;

/// A packet received on a subflow, decoded.
#[derive(Debug, Clone)]
pub struct Rx {
    pub ty: PacketType,
    pub seq: u64,
    /// Non-MP options as (kind, data).
    pub options: Vec<(u8, Vec<u8>)>,
    /// Option-46 contents parsed under the profile (errors as hex).
    pub mp: Vec<Result<MpOption, String>>,
    pub payload: Vec<u8>,
    pub raw: Vec<u8>,
}

impl Rx {
    pub fn mp_ok(&self) -> impl Iterator<Item = &MpOption> {
        self.mp.iter().filter_map(|m| m.as_ref().ok())
    }

    /// The Change options as (kind, feature, values).
    fn changes(&self) -> impl Iterator<Item = (u8, u8, &[u8])> {
        self.options
            .iter()
            .filter(|(k, d)| matches!(*k, CHANGE_L | CHANGE_R) && !d.is_empty())
            .map(|(k, d)| (*k, d[0], &d[1..]))
    }

    pub fn has_option(&self, kind: u8, data: &[u8]) -> bool {
        self.options.iter().any(|(k, d)| *k == kind && d == data)
    }
}

/// One subflow of the scripted endpoint (client side).
pub struct Subflow {
    pub sock: RawDccpSocket,
    pub profile: WireProfile,
    pub local_port: u16,
    pub peer: IpAddr,
    pub peer_port: u16,
    /// Greatest sequence number sent (§7.1 GSS) and received (GSR); ISR.
    pub gss: u64,
    pub gsr: Option<u64>,
    pub isr: Option<u64>,
    pub ack_vectors: bool,
    /// Every packet sent and received, for the report: (sent?, bytes).
    pub log: Vec<(bool, Vec<u8>)>,
}

impl Subflow {
    pub fn new(
        local: IpAddr,
        local_port: u16,
        peer: IpAddr,
        peer_port: u16,
        iss: u64,
        profile: WireProfile,
    ) -> io::Result<Subflow> {
        Ok(Subflow::from_socket(
            RawDccpSocket::bind(local)?,
            local_port,
            peer,
            peer_port,
            iss,
            profile,
        ))
    }

    /// A subflow on an already open socket.
    pub fn from_socket(
        sock: RawDccpSocket,
        local_port: u16,
        peer: IpAddr,
        peer_port: u16,
        iss: u64,
        profile: WireProfile,
    ) -> Subflow {
        Subflow {
            sock,
            profile,
            local_port,
            peer,
            peer_port,
            gss: iss.wrapping_sub(1),
            gsr: None,
            isr: None,
            ack_vectors: false,
            log: Vec::new(),
        }
    }

    /// Server side: waits on `sock` for a Request to `local_port` that
    /// `want` accepts, then makes it a subflow (ISR/GSR set).
    pub fn accept(
        mut sock: RawDccpSocket,
        local_port: u16,
        iss: u64,
        profile: WireProfile,
        timeout: Duration,
        want: impl Fn(&Rx) -> bool,
    ) -> io::Result<(Subflow, Rx)> {
        let (peer, peer_port, rx) = wait_request(&mut sock, local_port, profile, timeout, want)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "no Request"))?;
        Ok((
            Subflow::accepted(sock, local_port, peer, peer_port, &rx, iss, profile),
            rx,
        ))
    }

    /// The subflow of an accepted Request `req` from `peer`:`peer_port`.
    pub fn accepted(
        sock: RawDccpSocket,
        local_port: u16,
        peer: IpAddr,
        peer_port: u16,
        req: &Rx,
        iss: u64,
        profile: WireProfile,
    ) -> Subflow {
        let mut sf = Subflow::from_socket(sock, local_port, peer, peer_port, iss, profile);
        sf.isr = Some(req.seq);
        sf.gsr = Some(req.seq);
        sf.log.push((false, req.raw.clone()));
        sf
    }

    /// Sends one packet of `kind` (its ack field is taken from `kind`) with
    /// `mp` options encoded under the profile first, then `raw_opts`.
    pub fn send(
        &mut self,
        kind: DccpKind,
        mp: &[MpOption],
        raw_opts: &[(u8, Vec<u8>)],
        payload: &[u8],
    ) -> io::Result<()> {
        self.gss = (self.gss + 1) & ((1 << 48) - 1);
        let mut opts = Vec::new();
        for m in mp {
            opts.extend(m.encode_in(self.profile).map_err(io::Error::other)?);
        }
        for (k, d) in raw_opts {
            opts.push(*k);
            opts.push(2 + d.len() as u8);
            opts.extend_from_slice(d);
        }
        if self.ack_vectors && kind.ack().is_some() {
            opts.extend(self.ack_vector());
        }
        while opts.len() % 4 != 0 {
            opts.push(0); // Padding (§5.8.1)
        }
        let repr = DccpRepr {
            header: Header {
                src_port: self.local_port,
                dst_port: self.peer_port,
                seq: self.gss,
                kind,
                ..Header::default()
            },
            ..Default::default()
        };
        let fixed = repr.header_len();
        let mut buf = vec![0u8; fixed + opts.len() + payload.len()];
        repr.emit(&mut buf[..fixed], &[], None)
            .map_err(io::Error::other)?;
        buf[fixed..fixed + opts.len()].copy_from_slice(&opts);
        buf[fixed + opts.len()..].copy_from_slice(payload);
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_data_offset(((fixed + opts.len()) / 4) as u8);
        self.sock.send_to(&mut buf, self.peer)?;
        self.log.push((true, buf));
        Ok(())
    }

    /// Ack Vector (RFC 4340 §11.4): everything from ISR to GSR received
    /// (runs of at most 64 packets per cell, state 0).
    fn ack_vector(&self) -> Vec<u8> {
        let (Some(isr), Some(gsr)) = (self.isr, self.gsr) else {
            return Vec::new();
        };
        let mut left = gsr.saturating_sub(isr) + 1;
        let mut cells = Vec::new();
        while left > 0 && cells.len() < 16 {
            let run = left.min(64);
            cells.push((run - 1) as u8);
            left -= run;
        }
        let mut o = vec![ACK_VECTOR_0, 2 + cells.len() as u8];
        o.extend(cells);
        o
    }

    /// The ack number for our next packet.
    pub fn ack(&self) -> u64 {
        self.gsr.unwrap_or(0)
    }

    /// Receives the next packet of this subflow (others to the same
    /// address are skipped), up to `timeout`.
    pub fn recv(&mut self, timeout: Duration) -> io::Result<Option<Rx>> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 65536];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.sock.set_read_timeout(Some(left))?;
            let d = match self.sock.recv(&mut buf) {
                Ok(d) => d,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) => return Err(e),
            };
            let bytes = &buf[d.start..d.end];
            let Ok(p) = Packet::new_checked(bytes) else {
                continue;
            };
            if d.src != self.peer
                || p.src_port() != self.peer_port
                || p.dst_port() != self.local_port
            {
                continue;
            }
            let rx = decode(self.profile, &p, bytes);
            if rx.ty != PacketType::Reset {
                self.gsr = Some(self.gsr.map_or(rx.seq, |g| g.max(rx.seq)));
                if self.isr.is_none() {
                    self.isr = Some(rx.seq);
                }
            }
            self.log.push((false, bytes.to_vec()));
            return Ok(Some(rx));
        }
    }

    /// Waits for a packet of type `ty`, answering nothing meanwhile.
    pub fn expect(&mut self, ty: PacketType, timeout: Duration) -> io::Result<Rx> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left)? {
                Some(rx) if rx.ty == ty => return Ok(rx),
                Some(_) => continue,
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no {ty:?} within {timeout:?}"),
                    ))
                }
            }
        }
    }
}

/// The Confirm options answering every Change in `rx` with the first value
/// offered (Change L → Confirm R, Change R → Confirm L; §6.2).
pub fn confirms_for(rx: &Rx) -> Vec<(u8, Vec<u8>)> {
    rx.changes()
        .map(|(k, feat, vals)| {
            let kind = if k == CHANGE_L { CONFIRM_R } else { CONFIRM_L };
            let mut d = vec![feat];
            d.extend_from_slice(&vals[..1.min(vals.len())]);
            d.extend_from_slice(vals);
            (kind, d)
        })
        .collect()
}

/// Change R(Multipath Capable, version 0) of an MP-capable Request.
pub fn mp_capable_change() -> (u8, Vec<u8>) {
    (CHANGE_R, vec![FEAT_MP_CAPABLE, 0])
}

/// Confirm L(Multipath Capable, 0, 0): the server's answer.
pub fn mp_capable_confirm_from_server() -> (u8, Vec<u8>) {
    (CONFIRM_L, vec![FEAT_MP_CAPABLE, 0, 0])
}

/// Decodes a checked packet: option 46 under `profile`, other options raw.
fn decode(profile: WireProfile, p: &Packet<&[u8]>, bytes: &[u8]) -> Rx {
    let mut options = Vec::new();
    let mut mp = Vec::new();
    for o in p.options().flatten() {
        if o.kind == 46 {
            mp.push(MpOption::parse_in(o.data, profile).map_err(|_| super::hex(o.data)));
        } else if o.kind >= 32 {
            options.push((o.kind, o.data.to_vec()));
        }
    }
    Rx {
        ty: p.packet_type(),
        seq: p.seq(),
        options,
        mp,
        payload: p.payload().to_vec(),
        raw: bytes.to_vec(),
    }
}

/// Waits up to `timeout` on `sock` for a Request to `local_port` that
/// `want` accepts: `(peer, peer port, request)`, or `None` on timeout.
pub fn wait_request(
    sock: &mut RawDccpSocket,
    local_port: u16,
    profile: WireProfile,
    timeout: Duration,
    want: impl Fn(&Rx) -> bool,
) -> io::Result<Option<(IpAddr, u16, Rx)>> {
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 65536];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        sock.set_read_timeout(Some(left))?;
        let d = match sock.recv(&mut buf) {
            Ok(d) => d,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let bytes = &buf[d.start..d.end];
        let Ok(p) = Packet::new_checked(bytes) else {
            continue;
        };
        if p.dst_port() != local_port || p.packet_type() != PacketType::Request {
            continue;
        }
        let rx = decode(profile, &p, bytes);
        if want(&rx) {
            return Ok(Some((d.src, p.src_port(), rx)));
        }
    }
}
