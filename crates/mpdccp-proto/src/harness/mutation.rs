//! Mutated copies of genuine established-state packets against a live
//! protected session (docs/SECURITY.md §5 and §8): what an
//! on-path attacker does when it flips bytes of packets it sniffed, fixes
//! the checksum and sends them from the victim's address.
//!
//! One property, checked by the `protected_mutations` fuzz target and by
//! a proptest in `cargo test` (`tests/proto/hostile/protected_mutations.rs`): every
//! mutated packet is dropped by some counter of the receiver
//! ([`ConnStats::rejected_input`]), no end closes, both paths stay Active
//! at both ends, and afterwards every packet sent either way arrives
//! exactly once. [`run`] returns the first violation as an error.

use std::time::Duration;

use super::{inspect, Harness, HarnessConfig, LinkSpec, Side};
use crate::auth::SessionKeys;
use crate::conn::ConnStats;
use crate::path::{PathId, PathState};

/// One mutated datagram.
#[derive(Clone, Debug)]
pub struct Mutation {
    /// The receiver (the copy claims to come from its peer).
    pub to: Side,
    /// Path 0 or 1.
    pub path: usize,
    /// Which of the last genuine datagrams on that path and direction
    /// (0 = the latest; taken modulo the 32 newest).
    pub pick: u8,
    /// (position modulo the length, value XORed in; 0 is taken as 1).
    pub edits: Vec<(u16, u8)>,
    /// Cut the copy to this many bytes (modulo its length + 1), if set.
    pub truncate: Option<u16>,
    /// Virtual milliseconds to let pass first (traffic keeps flowing).
    pub wait_ms: u8,
}

/// Mutations from fuzzer bytes: records `[ctrl, pick, n, (pos_hi,
/// pos_lo, xor) × n]`; ctrl bit 0 the receiver (0 server), bit 1 the
/// path, bit 2 a truncation to `pick` × 4 bytes, bits 3–7 the wait (× 2
/// ms). At most 48 records.
pub fn decode(mut data: &[u8]) -> Vec<Mutation> {
    let mut out = Vec::new();
    while data.len() >= 3 && out.len() < 48 {
        let (ctrl, pick, n) = (data[0], data[1], usize::from(data[2] & 7) + 1);
        data = &data[3..];
        let k = n.min(data.len() / 3);
        let edits = data[..k * 3]
            .chunks_exact(3)
            .map(|e| (u16::from_be_bytes([e[0], e[1]]), e[2]))
            .collect();
        data = &data[k * 3..];
        out.push(Mutation {
            to: if ctrl & 1 == 0 {
                Side::Server
            } else {
                Side::Client
            },
            path: usize::from(ctrl >> 1 & 1),
            pick,
            edits,
            truncate: (ctrl & 4 != 0).then_some(u16::from(pick) * 4),
            wait_ms: (ctrl >> 3) * 2,
        });
    }
    out
}

/// What a run saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Mutated datagrams delivered.
    pub injected: u64,
    /// Of those, the ones whose bytes differ from the genuine packet (an
    /// edit of the checksum field is undone by the checksum fix-up).
    pub changed: u64,
    /// Rejections counted by their receivers meanwhile (at least
    /// `changed`; genuine packets the forgeries made stale count too).
    pub counted: u64,
}

/// Whether the session stayed whole — both paths Active at both ends and a
/// fresh numbered batch delivered exactly once each way: `Some(what)` when
/// it did not. Part of the property (the proptest and the fuzz target fail
/// on it); kept apart from the hard errors so that the unprotected control
/// can tell "disturbed" from "closed".
pub type Disturbance = Option<String>;

fn active_paths(h: &Harness, side: Side) -> usize {
    h.conn_ref(side)
        .paths()
        .iter()
        .filter(|p| p.state == PathState::Active)
        .count()
}

fn rejected(s: &ConnStats) -> u64 {
    s.rejected_input()
}

/// A protected two-path session under `keys` (client's, server's; `None`:
/// unprotected, for the control), established, with traffic both ways
/// recorded.
pub fn protected_session(keys: Option<(SessionKeys, SessionKeys)>) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default(), LinkSpec::default()],
        seed: 28,
        ..Default::default()
    });
    h.record = true;
    if let Some((c, s)) = keys {
        h.client.enable_payload_protection(c);
        h.server.enable_payload_protection(s);
    }
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    h.open_path(1);
    h.drive_for(Duration::from_millis(200));
    for k in 0..20u8 {
        let now = h.now;
        let _ = h.client.send(now, &[k; 300]);
        let _ = h.server.send(now, &[k; 120]);
        h.drive_for(Duration::from_millis(3));
    }
    h.drive_for(Duration::from_millis(100));
    h
}

/// Runs `muts` against `h` (from [`protected_session`]) and checks the
/// property in the module documentation.
pub fn run(h: &mut Harness, muts: &[Mutation]) -> Result<(Outcome, Disturbance), String> {
    for side in [Side::Client, Side::Server] {
        if active_paths(h, side) != 2 {
            return Err(format!("{side:?}: the session is not whole before"));
        }
    }
    let mut out = Outcome::default();
    for (n, m) in muts.iter().enumerate() {
        inject(h, n, m, &mut out)?;
    }
    h.drive_for(Duration::from_millis(300));
    let disturbed = disturbance(h, &out)?;
    Ok((out, disturbed))
}

/// Mutation `n`: some traffic each way, then a mutated copy of a recent
/// genuine packet to `m.to`, which must count it as rejected when its
/// bytes changed and stay open.
fn inject(h: &mut Harness, n: usize, m: &Mutation, out: &mut Outcome) -> Result<(), String> {
    let now = h.now;
    let _ = h.client.send(now, &[0xAA; 200]);
    let _ = h.server.send(now, &[0xAB; 100]);
    h.drive_for(Duration::from_millis(u64::from(m.wait_ms)));
    let genuine: Vec<&[u8]> = h
        .wire
        .iter()
        .rev()
        .filter(|w| w.from == m.to.peer() && w.path == PathId(m.path as u32))
        .take(32)
        .map(|w| w.bytes.as_slice())
        .collect();
    let Some(base) = genuine.get(usize::from(m.pick) % genuine.len().max(1)) else {
        return Ok(());
    };
    let original = base.to_vec();
    let mut b = original.clone();
    for &(pos, x) in &m.edits {
        let i = usize::from(pos) % b.len();
        b[i] ^= x.max(1);
    }
    if let Some(t) = m.truncate {
        b.truncate(usize::from(t) % (b.len() + 1));
    }
    let (c, s) = Harness::path_addrs(m.path);
    let (src, dst) = if m.to == Side::Server { (c, s) } else { (s, c) };
    inspect::fix_checksum(&mut b, src.ip(), dst.ip());
    if h.wire.len() > 4096 {
        h.wire.drain(..2048);
    }
    let before = rejected(&h.conn_ref(m.to).stats());
    let now = h.now;
    h.conn(m.to)
        .handle_datagram_from(now, PathId(m.path as u32), dst, src, &b);
    let after = rejected(&h.conn_ref(m.to).stats());
    out.injected += 1;
    out.changed += u64::from(b != original);
    out.counted += after - before;
    // An unmodified copy is not a forgery: a genuine packet still in
    // flight is accepted when its copy arrives first (the original is
    // then the replay), so only changed bytes must be rejected at once.
    // (The fuzzer found this race: no edits, no cut, no wait.)
    if after == before && b != original {
        return Err(format!(
            "mutation {n} ({m:?}) to {:?} was not counted",
            m.to
        ));
    }
    for side in [Side::Client, Side::Server] {
        if h.conn_ref(side).is_closed() {
            return Err(format!("mutation {n} ({m:?}): {side:?} closed"));
        }
    }
    Ok(())
}

/// After the mutations: an error when a side closed; a disturbance when a
/// path is down or numbered packets each way do not all arrive, once.
fn disturbance(h: &mut Harness, out: &Outcome) -> Result<Disturbance, String> {
    for side in [Side::Client, Side::Server] {
        if h.conn_ref(side).is_closed() {
            return Err(format!("{side:?} closed after {} mutations", out.injected));
        }
        if active_paths(h, side) != 2 {
            return Ok(Some(format!(
                "{side:?}: {} Active paths after {} mutations",
                active_paths(h, side),
                out.injected
            )));
        }
    }
    // Nothing was disturbed: numbered packets each way all arrive, once.
    for side in [Side::Client, Side::Server] {
        let before = h.delivered(side.peer()).len();
        for k in 0..30u32 {
            let mut p = vec![0x5c; 150];
            p[..4].copy_from_slice(&k.to_be_bytes());
            let now = h.now;
            h.conn(side)
                .send(now, &p)
                .map_err(|e| format!("{side:?} send: {e:?}"))?;
            h.drive_for(Duration::from_millis(2));
        }
        h.drive_for(Duration::from_millis(300));
        let mut got: Vec<u32> = h.delivered(side.peer())[before..]
            .iter()
            .filter(|(_, p)| p.len() == 150 && p[4] == 0x5c)
            .map(|(_, p)| u32::from_be_bytes([p[0], p[1], p[2], p[3]]))
            .collect();
        got.sort_unstable();
        if got != (0..30).collect::<Vec<_>>() {
            return Ok(Some(format!(
                "{side:?}→{:?} after the mutations: {got:?}",
                side.peer()
            )));
        }
    }
    Ok(None)
}
