//! Path life cycle: a path whose interface goes down and comes back as a
//! new subflow, again and again, must not leak path slots at either end
//! (RFC 9897 §3.2.9 MP_REMOVEADDR tells the server; closed subflows are
//! forgotten), a peer that vanishes silently is expired by keepalives and
//! `path_idle_timeout`, and a forged MP_REMOVEADDR closes nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use mpdccp_proto::conn::codec::{MpRemoveAddr, PacketType, Segment};
use mpdccp_proto::conn::{ConnTimer, LifetimeConfig, MpConfig};
use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::{ConnectionConfig, Event, Instant, PathId, PathState};

/// Far future: an outage that never ends (the interface is gone for good).
const NEVER: Instant = Instant::from_millis(1_000_000_000);

/// Upstream and downstream packets: tag byte, then a counter.
fn packet(tag: u8, n: u64) -> Vec<u8> {
    let mut p = vec![tag; 200];
    p[1..9].copy_from_slice(&n.to_le_bytes());
    p
}

/// Counts of each counter delivered to `side` with `tag`.
fn delivered_counts(h: &Harness, side: Side, tag: u8) -> BTreeMap<u64, u32> {
    let mut m = BTreeMap::new();
    for (_, d) in h.delivered(side) {
        if d.len() == 200 && d[0] == tag {
            let n = u64::from_le_bytes(d[1..9].try_into().unwrap());
            *m.entry(n).or_insert(0) += 1;
        }
    }
    m
}

/// Constant-rate traffic both ways (one packet each way every 5 ms).
struct Pump {
    up: u64,
    down: u64,
}

impl Pump {
    fn run(&mut self, h: &mut Harness, d: Duration) {
        let end = h.now + d;
        while h.now < end {
            let now = h.now;
            if h.client.send(now, &packet(0xC1, self.up)).is_ok() {
                self.up += 1;
            }
            if h.server.send(now, &packet(0x5E, self.down)).is_ok() {
                self.down += 1;
            }
            h.drive_for(Duration::from_millis(5));
        }
    }
}

fn live(h: &Harness, side: Side) -> usize {
    h.conn_ref(side)
        .paths()
        .iter()
        .filter(|p| p.state != PathState::Closed)
        .count()
}

fn established_events(h: &Harness, side: Side, id: PathId) -> usize {
    h.events(side)
        .iter()
        .filter(|e| **e == Event::PathEstablished(id))
        .count()
}

/// Fifty down/up cycles of one path of a two-path connection: every rejoin
/// (a new subflow with a fresh PathId, as the daemon does) is accepted, the
/// server closes the old subflow as soon as the client's MP_REMOVEADDR
/// arrives, both path tables stay bounded, and upstream traffic is
/// delivered exactly once throughout (downstream at most once: what the
/// server sent into the dead interface before it knew is lost).
#[test]
fn fifty_down_up_cycles_keep_path_tables_bounded() {
    const CYCLES: u32 = 50;
    let cfg = ConnectionConfig {
        mp: MpConfig {
            max_paths: 4,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        client: cfg.clone(),
        server: cfg,
        paths: vec![LinkSpec::default(); CYCLES as usize + 2],
        seed: 61,
    });
    let mut pump = Pump { up: 0, down: 0 };
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    h.open_path(1);
    pump.run(&mut h, Duration::from_millis(300));
    assert_eq!(live(&h, Side::Server), 2);
    let mut max_tables = (0, 0);
    for k in 1..=CYCLES {
        let down = PathId(k);
        // The interface goes: nothing sent on it from now on arrives.
        let now = h.now;
        h.specs[k as usize].outages.push((now, NEVER));
        h.client.set_path_down(now, down);
        pump.run(&mut h, Duration::from_millis(200));
        assert_eq!(
            live(&h, Side::Server),
            1,
            "cycle {k}: the server closed the withdrawn subflow"
        );
        // It comes back: a new subflow.
        h.open_path(k as usize + 1);
        let up = PathId(k + 1);
        let ok = h.drive_until_pred(Duration::from_secs(2), |h| {
            established_events(h, Side::Client, up) == 1
                && established_events(h, Side::Server, up) == 1
        });
        assert!(ok, "cycle {k}: rejoin as {up} established at both ends");
        pump.run(&mut h, Duration::from_millis(300));
        assert_eq!(live(&h, Side::Client), 2, "cycle {k}");
        assert_eq!(live(&h, Side::Server), 2, "cycle {k}");
        max_tables.0 = max_tables.0.max(h.client.paths().len());
        max_tables.1 = max_tables.1.max(h.server.paths().len());
    }
    pump.run(&mut h, Duration::from_millis(1500));
    h.drive_for(Duration::from_secs(1));
    // Closed subflows linger 1 s, a cycle takes ~0.5 s: at most 2 + 2.
    assert!(max_tables.0 <= 4, "client path table {}", max_tables.0);
    assert!(max_tables.1 <= 4, "server path table {}", max_tables.1);
    assert_eq!(h.client.paths().len(), 2);
    assert_eq!(h.server.paths().len(), 2);
    let (cs, ss) = (h.client.stats(), h.server.stats());
    assert_eq!(cs.paths.removeaddr_sent, u64::from(CYCLES));
    assert_eq!(ss.paths.paths_removed_by_peer, u64::from(CYCLES));
    assert_eq!(ss.auth.join_too_busy, 0);
    assert!(ss.paths.paths_reaped >= u64::from(CYCLES), "{ss:?}");
    assert!(cs.paths.paths_reaped >= u64::from(CYCLES), "{cs:?}");
    // Upstream: every packet exactly once.
    let up = delivered_counts(&h, Side::Server, 0xC1);
    assert_eq!(up.len() as u64, pump.up, "every upstream packet delivered");
    assert!(up.values().all(|&c| c == 1), "no duplicates upstream");
    // Downstream: never twice; only what went into a dead interface is lost.
    let down = delivered_counts(&h, Side::Client, 0x5E);
    assert!(down.values().all(|&c| c == 1), "no duplicates downstream");
    let lost = pump.down - down.len() as u64;
    assert!(
        lost * 20 <= pump.down,
        "downstream lost {lost} of {}",
        pump.down
    );
    eprintln!(
        "{CYCLES} cycles: up {} delivered once; down {} of {} delivered; tables max client {} server {}",
        pump.up,
        down.len(),
        pump.down,
        max_tables.0,
        max_tables.1
    );
}

/// The connection's timer table names what a driver wakes for: an idle,
/// established server with keepalives on (and no RTT probes) sleeps until
/// the keepalive, no longer than `keepalive_interval`.
#[test]
fn an_idle_connection_wakes_for_its_keepalive() {
    let server = ConnectionConfig {
        lifetime: LifetimeConfig {
            keepalive_interval: Some(Duration::from_secs(1)),
            rtt_probe_interval: None,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        server,
        paths: vec![LinkSpec::default()],
        seed: 7,
        ..Default::default()
    });
    h.open_path(0);
    h.drive_for(Duration::from_millis(300));
    assert!(h.server.is_established());
    let (kind, at) = h.server.next_timer().expect("a keepalive is due");
    assert_eq!(kind, ConnTimer::Keepalive);
    assert_eq!(Some(at), h.server.poll_timeout());
    assert!(at > h.now && at <= h.now + Duration::from_secs(1), "{at:?}");
}

/// A client that loses an interface without being able to tell the server
/// (here: MP_REMOVEADDR never arrives) does not leak either: the server's
/// keepalive probes on the silent subflow go unanswered and it expires
/// after `path_idle_timeout`, while the other path stays up.
#[test]
fn silent_subflow_expires_after_path_idle_timeout() {
    let server = ConnectionConfig {
        lifetime: LifetimeConfig {
            keepalive_interval: Some(Duration::from_secs(1)),
            path_idle_timeout: Some(Duration::from_secs(5)),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        server,
        paths: vec![
            LinkSpec::default(),
            LinkSpec::default(),
            LinkSpec::default(),
        ],
        seed: 62,
        ..Default::default()
    });
    // Drop every MP_REMOVEADDR the client sends.
    h.tamper = Some(Box::new(|from, _, bytes| {
        !(from == Side::Client
            && Segment::parse(bytes, None).is_ok_and(|s| s.mp.removeaddr.is_some()))
    }));
    let mut pump = Pump { up: 0, down: 0 };
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    h.open_path(1);
    pump.run(&mut h, Duration::from_millis(500));
    // An idle but working path is kept alive by the keepalives: traffic
    // stops for 8 s (> path_idle_timeout) and nothing expires.
    h.drive_for(Duration::from_secs(8));
    assert_eq!(live(&h, Side::Server), 2, "idle paths answer keepalives");
    assert_eq!(h.server.stats().paths.paths_expired, 0);
    // Both probe kinds keep it: keepalives, and the Syncs that
    // refresh an idle path's RTT, which also prove it alive.
    let st = h.server.stats();
    assert!(
        st.traffic.keepalives_sent + st.traffic.rtt_probes_sent >= 10,
        "{st:?}"
    );
    let now = h.now;
    h.specs[1].outages.push((now, NEVER));
    h.client.set_path_down(now, PathId(1));
    pump.run(&mut h, Duration::from_secs(3));
    assert_eq!(
        live(&h, Side::Server),
        2,
        "not yet: no MP_REMOVEADDR got through"
    );
    pump.run(&mut h, Duration::from_secs(4));
    assert_eq!(live(&h, Side::Server), 1, "expired after 5 s of silence");
    assert_eq!(h.server.stats().paths.paths_expired, 1);
    assert_eq!(h.server.stats().paths.paths_removed_by_peer, 0);
    // Rejoin works and traffic flows on both.
    h.open_path(2);
    pump.run(&mut h, Duration::from_secs(2));
    assert_eq!(live(&h, Side::Server), 2);
    assert_eq!(
        h.server.paths().len(),
        2,
        "the expired subflow is forgotten"
    );
    assert!(h.server.is_established() && h.client.is_established());
}

/// A client whose every path goes silent is closed by `idle_timeout`
/// (a server does not keep a vanished client's connection for ever).
#[test]
fn silent_connection_closes_after_idle_timeout() {
    let server = ConnectionConfig {
        lifetime: LifetimeConfig {
            keepalive_interval: Some(Duration::from_secs(1)),
            path_idle_timeout: Some(Duration::from_secs(5)),
            idle_timeout: Some(Duration::from_secs(10)),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        server,
        seed: 63,
        ..Default::default()
    });
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    h.open_path(1);
    h.drive_for(Duration::from_secs(1));
    assert!(h.server.is_established());
    let t0 = h.now;
    h.specs[0].outages.push((t0, NEVER));
    h.specs[1].outages.push((t0, NEVER));
    h.drive_for(Duration::from_secs(9));
    assert!(!h.server.is_closed(), "not before idle_timeout");
    h.drive_for(Duration::from_secs(3));
    assert!(h.server.is_closed(), "closed after 10 s without a packet");
    assert_eq!(h.server.stats().paths.idle_timeouts, 1);
    assert!(h
        .server_events
        .iter()
        .any(|e| matches!(e, Event::Closed { reason } if reason.contains("idle"))));
    // Nothing left to do: no timer, so an endpoint forgets it.
    h.drive_for(Duration::from_secs(2));
    assert_eq!(h.server.poll_timeout(), None);
}

/// MP_REMOVEADDR with a wrong MP_HMAC, for the address ids of both live
/// subflows, injected inside the sequence window: rejected, counted, and
/// no subflow closed.
#[test]
fn forged_removeaddr_closes_nothing() {
    let mut h = Harness::new(HarnessConfig {
        seed: 64,
        ..Default::default()
    });
    h.record = true;
    h.open_paths(2, Duration::from_millis(300));
    assert_eq!(live(&h, Side::Server), 2);
    let s0 = h.server.stats();
    let mut forged = 0u64;
    for round in 0..200u32 {
        let path = (round % 2) as usize;
        let w = h
            .wire
            .iter()
            .rev()
            .find(|w| w.from == Side::Client && w.path == PathId(path as u32) && !w.dropped)
            .expect("genuine client traffic");
        let genuine = Segment::parse(&w.bytes, None).expect("genuine packet parses");
        let mut seg = Segment::new(PacketType::Ack, genuine.seq);
        seg.ack = genuine.ack;
        // Address ids 0 (the initial subflow) .. 3 cover both subflows.
        seg.mp.removeaddr = Some(MpRemoveAddr {
            addr_id: (round % 4) as u8,
            nonce: round.wrapping_mul(2_654_435_761),
        });
        let mut tag = [0u8; 20];
        tag[..4].copy_from_slice(&round.to_be_bytes());
        seg.mp.removeaddr_hmac = (round % 3 != 0).then_some(tag);
        let (src, dst) = Harness::path_addrs(path);
        seg.src_port = src.port();
        seg.dst_port = dst.port();
        let mut b = vec![0u8; 2048];
        let n = seg.emit(&mut b, (src.ip(), dst.ip())).expect("fits");
        let now = h.now;
        h.server
            .handle_datagram_from(now, PathId(path as u32), dst, src, &b[..n]);
        forged += 1;
        h.drive_for(Duration::from_millis(5));
    }
    let s = h.server.stats();
    assert_eq!(
        s.auth.removeaddr_bad_hmac - s0.auth.removeaddr_bad_hmac,
        forged
    );
    assert_eq!(s.paths.paths_removed_by_peer, 0);
    assert_eq!(live(&h, Side::Server), 2);
    assert!(!h
        .server_events
        .iter()
        .any(|e| matches!(e, Event::PathClosed(_))));
    // The genuine withdrawal still works afterwards.
    let now = h.now;
    h.specs[1].outages.push((now, NEVER));
    h.client.set_path_down(now, PathId(1));
    h.drive_for(Duration::from_millis(500));
    assert_eq!(h.server.stats().paths.paths_removed_by_peer, 1);
    assert_eq!(live(&h, Side::Server), 1);
}

/// Address ids wrap after 255 rejoins; a genuine MP_REMOVEADDR captured on
/// the wire and replayed (its MP_HMAC covers only id and nonce) once a new
/// subflow holds the same address id must not close that subflow: each
/// (id, nonce) is acted on once.
#[test]
fn replayed_removeaddr_does_not_close_a_subflow_reusing_the_id() {
    const MAX_CYCLES: usize = 300;
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default(); MAX_CYCLES + 2],
        seed: 65,
        ..Default::default()
    });
    h.record = true;
    h.open_paths(2, Duration::from_millis(300));
    let mut captured: Option<MpRemoveAddr> = None;
    let mut hmac = [0u8; 20];
    let mut reused_at = None;
    for k in 1..=MAX_CYCLES {
        let now = h.now;
        h.specs[k].outages.push((now, NEVER));
        h.client.set_path_down(now, PathId(k as u32));
        h.drive_for(Duration::from_millis(150));
        if captured.is_none() {
            let seg = h
                .wire
                .iter()
                .filter(|w| w.from == Side::Client && !w.dropped)
                .filter_map(|w| Segment::parse(&w.bytes, None).ok())
                .find(|s| s.mp.removeaddr.is_some())
                .expect("the genuine MP_REMOVEADDR is on the wire");
            captured = seg.mp.removeaddr;
            hmac = seg.mp.removeaddr_hmac.expect("with its MP_HMAC");
        }
        let mark = h.wire.len();
        h.open_path(k + 1);
        h.drive_for(Duration::from_millis(150));
        assert_eq!(live(&h, Side::Server), 2, "cycle {k}");
        let join_id = h.wire[mark..]
            .iter()
            .filter(|w| w.from == Side::Client && w.path == PathId(k as u32 + 1))
            .filter_map(|w| Segment::parse(&w.bytes, None).ok())
            .find_map(|s| s.mp.join.map(|j| j.addr_id));
        if join_id == captured.map(|c| c.addr_id) {
            reused_at = Some(k + 1);
            break;
        }
    }
    let reused_at = reused_at.expect("address ids wrap within 300 rejoins");
    let r = captured.expect("captured");
    // Replay inside the sequence window of path 0 (an on-path observer
    // sees the numbers of genuine packets).
    let genuine = h
        .wire
        .iter()
        .rev()
        .find(|w| w.from == Side::Client && w.path == PathId(0) && !w.dropped)
        .expect("genuine traffic on path 0");
    let g = Segment::parse(&genuine.bytes, None).expect("parses");
    let mut seg = Segment::new(PacketType::Ack, g.seq);
    seg.ack = g.ack;
    seg.mp.removeaddr = Some(r);
    seg.mp.removeaddr_hmac = Some(hmac);
    let (src, dst) = Harness::path_addrs(0);
    seg.src_port = src.port();
    seg.dst_port = dst.port();
    let mut b = vec![0u8; 2048];
    let n = seg.emit(&mut b, (src.ip(), dst.ip())).expect("fits");
    let before = h.server.stats();
    let now = h.now;
    h.server
        .handle_datagram_from(now, PathId(0), dst, src, &b[..n]);
    h.drive_for(Duration::from_millis(300));
    let s = h.server.stats();
    assert_eq!(
        s.auth.removeaddr_bad_hmac, before.auth.removeaddr_bad_hmac,
        "the HMAC is genuine"
    );
    assert_eq!(
        s.paths.removeaddr_duplicate - before.paths.removeaddr_duplicate,
        1
    );
    assert_eq!(
        s.paths.paths_removed_by_peer,
        before.paths.paths_removed_by_peer
    );
    assert_eq!(
        live(&h, Side::Server),
        2,
        "subflow {reused_at} reusing the id survives"
    );
    eprintln!(
        "address id {} reused by subflow {reused_at}; replay ignored",
        r.addr_id
    );
}

/// `probe_paths`: a driver that finds its connection quiet asks for a
/// sign of life; each open subflow sends a Sync and the peer answers each
/// with a SyncAck (RFC 4340 §7.5.4), data or not. A peer that is gone
/// answers nothing, so the driver's silence clock keeps running.
#[test]
fn probe_paths_draws_a_syncack_on_every_open_subflow() {
    let quiet = ConnectionConfig {
        lifetime: LifetimeConfig {
            keepalive_interval: None,
            rtt_probe_interval: None,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig {
        client: quiet.clone(),
        server: quiet,
        paths: vec![LinkSpec::default(), LinkSpec::default()],
        seed: 24,
    });
    let now = h.now;
    assert_eq!(h.client.probe_paths(now), 0, "not established: no probe");
    h.open_path(0);
    h.drive_for(Duration::from_millis(100));
    h.open_path(1);
    h.drive_for(Duration::from_millis(500));
    assert_eq!(live(&h, Side::Client), 2);
    let (rx0, acks0) = (
        h.client.stats().traffic.rx_datagrams,
        h.server.stats().traffic.syncacks_sent,
    );
    // Idle: nothing moves without a probe.
    h.drive_for(Duration::from_millis(300));
    assert_eq!(h.client.stats().traffic.rx_datagrams, rx0);
    let now = h.now;
    assert_eq!(h.client.probe_paths(now), 2);
    h.drive_for(Duration::from_millis(100));
    assert_eq!(h.server.stats().traffic.syncacks_sent, acks0 + 2);
    assert_eq!(
        h.client.stats().traffic.rx_datagrams,
        rx0 + 2,
        "both answered"
    );
    // The server goes silent (a dead host): the probes go unanswered.
    h.tamper = Some(Box::new(|from, _, _| from != Side::Server));
    let (rx1, syncs1) = (
        h.client.stats().traffic.rx_datagrams,
        h.client.stats().traffic.syncs_sent,
    );
    let now = h.now;
    assert_eq!(h.client.probe_paths(now), 2);
    h.drive_for(Duration::from_millis(300));
    assert_eq!(h.client.stats().traffic.syncs_sent, syncs1 + 2);
    assert_eq!(h.client.stats().traffic.rx_datagrams, rx1);
    assert!(h.client.is_established(), "a probe closes nothing");
}
