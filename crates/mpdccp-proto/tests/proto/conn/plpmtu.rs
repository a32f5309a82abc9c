//! DPLPMTUD (RFC 8899) per subflow, sans-IO: a path whose
//! middle drops datagrams above N bytes (no ICMP) converges to exactly N
//! in bounded probes and time; a black hole after convergence (N lowered
//! under running traffic) is detected and the PLPMTU falls back to base,
//! then climbs to the new N; probes carry no data and never count as data
//! loss; a SyncAck that matches no probe confirms nothing.

use std::time::Duration;

use mpdccp_proto::conn::{PacketType, PlpmtuState, PlpmtudConfig, DATA_HEADER_MAX};
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::{ConnectionConfig, Event, PathId};

const BASE: u32 = 1000;
const MAX: u32 = 1472;

fn config() -> ConnectionConfig {
    ConnectionConfig {
        mss_bytes: MAX,
        plpmtud: Some(PlpmtudConfig {
            base_bytes: BASE,
            max_bytes: MAX,
            probe_timer: Duration::from_secs(1),
            max_probes: 3,
            raise_timer: Duration::from_secs(600),
        }),
        ..ConnectionConfig::default()
    }
}

fn harness(limit: usize, seed: u64) -> Harness {
    harness_with(limit, seed, config(), None)
}

fn harness_with(
    limit: usize,
    seed: u64,
    cfg: ConnectionConfig,
    tamper: Option<mpdccp_proto::harness::Tamper>,
) -> Harness {
    let mut h = Harness::new(HarnessConfig {
        client: cfg.clone(),
        server: cfg,
        paths: vec![LinkSpec {
            delay: Duration::from_millis(15),
            max_datagram: Some(limit),
            ..LinkSpec::default()
        }],
        seed,
    });
    h.record = true;
    h.tamper = tamper;
    h.open_paths(1, Duration::from_millis(200));
    h
}

/// The PLPMTU of every `PlpmtuChanged` of `side`, in order.
fn changes(h: &Harness, side: Side) -> Vec<u32> {
    let mut out = Vec::new();
    for e in h.events(side) {
        if let Event::PlpmtuChanged { path, plpmtu } = e {
            assert_eq!(*path, PathId(0));
            out.push(*plpmtu);
        }
    }
    out
}

#[test]
fn converges_to_the_largest_size_the_path_carries() {
    let mut table = Vec::new();
    for (k, n) in [1000usize, 1200, 1280, 1372, 1400, 1471, 1472, 1500]
        .into_iter()
        .enumerate()
    {
        let mut h = harness(n, 11 + k as u64);
        let start = h.now;
        let done = h.drive_until_pred(Duration::from_secs(60), |h| {
            h.conn_ref(Side::Client).plpmtu().is_some()
                && h.conn_ref(Side::Server).plpmtu().is_some()
        });
        assert!(done, "limit {n}: no result in 60 s");
        let took = h.now - start;
        let want = (n as u32).min(MAX);
        for side in [Side::Client, Side::Server] {
            let c = h.conn_ref(side);
            assert_eq!(c.plpmtu(), Some(want), "limit {n}, {side:?}");
            assert_eq!(
                c.path_plpmtu(PathId(0)),
                Some((PlpmtuState::SearchComplete, want))
            );
            let s = c.plpmtu_stats();
            // Base, the maximum, then a binary search over 472 bytes (9
            // halvings), a failed size costing MAX_PROBES probes.
            assert!(s.probes_sent <= 2 + 3 + 9 * 3, "limit {n}: {s:?}");
            assert_eq!(changes(&h, side).last(), Some(&want));
        }
        // Bounded time: at most 10 failed sizes x 3 probe timers.
        assert!(took <= Duration::from_secs(31), "limit {n}: {took:?}");
        let s = h.conn_ref(Side::Client).plpmtu_stats();
        // Probes are not data: nothing delivered, nothing counted lost.
        for side in [Side::Client, Side::Server] {
            assert!(h.delivered(side).is_empty());
            let st = h.conn_ref(side).stats();
            assert_eq!(
                (st.loss.lost_pkts, st.loss.rtos, st.traffic.tx_data_pkts),
                (0, 0, 0),
                "{side:?}"
            );
        }
        // Every probe on the wire is a Sync of exactly a probed size; the
        // ones above the limit were dropped.
        let probes: Vec<_> = h
            .wire
            .iter()
            .filter(|r| {
                // RTT probes and keepalives are bare Syncs (24 bytes).
                r.from == Side::Client
                    && r.bytes.len() > 24
                    && inspect::packet_type(&r.bytes) == Some(PacketType::Sync)
            })
            .collect();
        assert_eq!(probes.len() as u64, s.probes_sent);
        assert!(probes.iter().all(|r| r.dropped == (r.bytes.len() > n)));
        table.push((n, want, s.probes_sent, s.probes_lost, took));
    }
    eprintln!("| path limit | PLPMTU | probes | lost | time |");
    for (n, w, p, l, t) in table {
        eprintln!("| {n} | {w} | {p} | {l} | {:.1} s |", t.as_secs_f64());
    }
}

#[test]
fn black_hole_after_convergence_falls_back_and_searches_again() {
    let mut h = harness(1400, 3);
    assert!(h.drive_until_pred(Duration::from_secs(60), |h| h
        .conn_ref(Side::Client)
        .plpmtu()
        == Some(1400)));
    // Tunnelled traffic sized to the PLPMTU, as a daemon sets its TUN MTU
    // from it: 100 packets/s each way.
    let mut sent = 0u64;
    let mut lowered_at = None;
    let mut fell_back_at = None;
    let mut recovered_at = None;
    for step in 0..6000 {
        let now = h.now;
        if step == 500 {
            // The middle's MTU drops: a black hole for the current size.
            h.specs[0].max_datagram = Some(1200);
            lowered_at = Some(now);
        }
        let mtu = h.conn_ref(Side::Client).plpmtu().unwrap();
        let pkt = vec![0x45u8; mtu as usize - DATA_HEADER_MAX];
        if h.conn(Side::Client).send(now, &pkt).is_ok() {
            sent += 1;
        }
        h.drive_for(Duration::from_millis(10));
        let p = h.conn_ref(Side::Client).plpmtu();
        if lowered_at.is_some() && fell_back_at.is_none() && p == Some(BASE) {
            fell_back_at = Some(h.now);
        }
        if fell_back_at.is_some() && p == Some(1200) {
            recovered_at = Some(h.now);
            break;
        }
    }
    let (lowered, fell, rec) = (
        lowered_at.unwrap(),
        fell_back_at.expect("black hole not detected"),
        recovered_at.expect("no new search result"),
    );
    eprintln!(
        "black hole: detected after {:.1} s, new PLPMTU 1200 after {:.1} s more; {sent} packets sent",
        (fell - lowered).as_secs_f64(),
        (rec - fell).as_secs_f64()
    );
    assert!(
        fell - lowered <= Duration::from_secs(15),
        "{:?}",
        fell - lowered
    );
    assert!(rec - fell <= Duration::from_secs(31), "{:?}", rec - fell);
    let s = h.conn_ref(Side::Client).plpmtu_stats();
    assert_eq!(s.black_holes, 1, "{s:?}");
    assert_eq!(changes(&h, Side::Client), vec![1400, BASE, 1200]);
    // The search below the failed size completes at exactly the new limit.
    h.drive_for(Duration::from_secs(30));
    let c = h.conn_ref(Side::Client);
    assert_eq!(
        c.path_plpmtu(PathId(0)),
        Some((PlpmtuState::SearchComplete, 1200))
    );
    assert_eq!(c.plpmtu_stats().black_holes, 1);
    // Queued packets that no longer fit were dropped, not black-holed.
    assert!(c.plpmtu_stats().dropped_oversize > 0);
    // Traffic at the new size flows again, every packet delivered.
    for _ in 0..100 {
        let now = h.now;
        h.conn(Side::Client)
            .send(now, &vec![1u8; 1200 - DATA_HEADER_MAX])
            .unwrap();
        h.drive_for(Duration::from_millis(10));
    }
    h.drive_for(Duration::from_secs(1));
    let got = h
        .delivered(Side::Server)
        .iter()
        .filter(|(_, d)| d.len() == 1200 - DATA_HEADER_MAX && d[0] == 1)
        .count();
    assert_eq!(got, 100);
}

#[test]
fn a_syncack_matching_no_probe_confirms_nothing() {
    // Every SyncAck the server sends is rewritten to acknowledge the
    // number before (a valid one, never a probe's: no other Sync is sent
    // without RTT probes): nothing is confirmed, nothing grows.
    let mut cfg = config();
    cfg.lifetime.rtt_probe_interval = None;
    let mut h = harness_with(
        1472,
        5,
        cfg,
        Some(Box::new(|from, _path, bytes: &mut Vec<u8>| {
            if from == Side::Server && inspect::packet_type(bytes) == Some(PacketType::SyncAck) {
                // Acknowledgement number: bytes 18..24 (the ack sub-header);
                // one less is a valid, older number, not the probe's.
                let mut a = [0u8; 8];
                a[2..].copy_from_slice(&bytes[18..24]);
                let ack = u64::from_be_bytes(a).wrapping_sub(1) & 0xffff_ffff_ffff;
                bytes[18..24].copy_from_slice(&ack.to_be_bytes()[2..]);
                let (c, s) = Harness::path_addrs(0);
                inspect::fix_checksum(bytes, s.ip(), c.ip());
            }
            true
        })),
    );
    h.drive_for(Duration::from_secs(60));
    let c = h.conn_ref(Side::Client);
    assert_eq!(c.plpmtu(), Some(BASE), "base failed: ERROR reports base");
    assert_eq!(
        c.path_plpmtu(PathId(0)).map(|p| p.0),
        Some(PlpmtuState::Error)
    );
    let s = c.plpmtu_stats();
    assert_eq!(s.probes_acked, 0, "{s:?}");
    assert!(s.syncacks_unmatched >= 3, "{s:?}");
    assert!(
        s.probes_sent <= 3 * 7,
        "ERROR retries every 10 probe timers: {s:?}"
    );
}

/// Two paths whose searches end at different times (5 ms and 60 ms of
/// delay, the second a join that opens after the first subflow): the
/// converged PLPMTU the daemons set their TUN MTU from takes the faster
/// path's result, then moves at most once more, down, when the slower
/// one's search ends below it; never back to a base size in between (the
/// TUN MTU flapping it caused). `plpmtu()` (every open path, searching
/// ones at what they confirmed so far) does dip to the base.
#[test]
fn the_converged_plpmtu_never_dips_to_a_searching_paths_base() {
    for (slow_limit, want) in [(1472usize, vec![1472u32]), (1200, vec![1472, 1200])] {
        let cfg = config();
        let mut h = Harness::new(HarnessConfig {
            client: cfg.clone(),
            server: cfg,
            paths: vec![
                LinkSpec {
                    delay: Duration::from_millis(5),
                    max_datagram: Some(1472),
                    ..LinkSpec::default()
                },
                LinkSpec {
                    delay: Duration::from_millis(60),
                    max_datagram: Some(slow_limit),
                    ..LinkSpec::default()
                },
            ],
            seed: 21,
        });
        let seen = std::cell::RefCell::new(([Vec::new(), Vec::new()], Vec::new()));
        let record = |h: &Harness| {
            let mut s = seen.borrow_mut();
            for (k, side) in [Side::Client, Side::Server].into_iter().enumerate() {
                if let Some(v) = h.conn_ref(side).plpmtu_converged() {
                    if s.0[k].last() != Some(&v) {
                        s.0[k].push(v);
                    }
                }
            }
            if let Some(v) = h.conn_ref(Side::Client).plpmtu() {
                s.1.push(v);
            }
        };
        h.open_path(0);
        h.drive_until_pred(Duration::from_millis(300), |h| {
            record(h);
            false
        });
        h.open_path(1);
        let done = h.drive_until_pred(Duration::from_secs(60), |h| {
            record(h);
            [Side::Client, Side::Server].iter().all(|&s| {
                [PathId(0), PathId(1)].iter().all(|&p| {
                    h.conn_ref(s).path_plpmtu(p).map(|x| x.0) == Some(PlpmtuState::SearchComplete)
                })
            })
        });
        assert!(done, "slow path limit {slow_limit}: searches did not end");
        let (converged, all) = seen.into_inner();
        for (k, side) in ["client", "server"].into_iter().enumerate() {
            assert_eq!(converged[k], want, "slow path limit {slow_limit}, {side}");
        }
        // The control: counting the searching path, the minimum dips to
        // the base while the join searches.
        assert!(all.contains(&BASE), "{all:?}");
    }
}
