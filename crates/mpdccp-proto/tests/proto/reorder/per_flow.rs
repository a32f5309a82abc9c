//! `per-flow` reordering: a gap holds only the inner flow it may belong to,
//! the hold is bounded by the paths' latency spread, and the state stays
//! bounded under many flows and hostile packets.

use std::time::Duration;

use crate::common::views;
use mpdccp_proto::reorder::{
    self, Delivered, FastLoss, PathReceiveState, PerFlow, Reorder, ReorderConfig, ReorderItem,
    ReorderKind, MAX_FLOWS, MAX_GAPS,
};
use mpdccp_proto::{Instant, PathId, PathView};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}
fn at(v: u64) -> Instant {
    Instant::from_millis(v)
}

fn config(f: impl FnOnce(&mut ReorderConfig)) -> ReorderConfig {
    let mut c = ReorderConfig::from(ReorderKind::PerFlow);
    c.initial_seq = Some(0);
    // Only deadlines end a gap unless a test says otherwise.
    c.fast_loss = FastLoss::Off;
    f(&mut c);
    c
}

/// An IPv4/UDP packet of the flow `sport -> 5000` (addresses fixed).
fn udp(sport: u16, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(28)];
    p[0] = 0x45;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&5000u16.to_be_bytes());
    p
}

fn push(r: &mut dyn Reorder, now: Instant, seq: u64, path: u32, flow: u16, paths: &[PathView]) {
    let item = ReorderItem {
        seq,
        path: PathId(path),
        arrival: now,
        payload: udp(flow, 100),
    };
    r.push(now, item, paths, &[]);
}

fn drain(r: &mut dyn Reorder, now: Instant) -> Vec<Delivered> {
    std::iter::from_fn(|| r.pop(now)).collect()
}

fn seqs(d: &[Delivered]) -> Vec<u64> {
    d.iter().map(|d| d.seq).collect()
}

const BULK: u16 = 1111;
const RT: u16 = 2222;

#[test]
fn a_gap_in_the_spread_flow_holds_it_but_not_a_one_path_flow() {
    let paths = views(&[8, 12]);
    let mut r = reorder::build(&config(|_| {}));
    // The bulk flow uses both paths: 0 on path 0, 1 on path 1.
    push(r.as_mut(), at(0), 0, 0, BULK, &paths);
    push(r.as_mut(), at(1), 1, 1, BULK, &paths);
    // The real-time flow only ever uses path 0.
    push(r.as_mut(), at(2), 2, 0, RT, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(2))), [0, 1, 2]);
    // 3 (bulk, on the slower path) is missing; 4 (bulk) and 5 (rt) arrive.
    push(r.as_mut(), at(3), 4, 0, BULK, &paths);
    push(r.as_mut(), at(3), 5, 0, RT, &paths);
    // The rt packet passes the bulk flow's gap; the bulk packet waits.
    assert_eq!(seqs(&drain(r.as_mut(), at(3))), [5]);
    assert_eq!(r.stats().held_pkts, 1);
    // More rt traffic keeps flowing while the gap is open.
    push(r.as_mut(), at(4), 6, 0, RT, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(4))), [6]);
    // The gap fills: the bulk flow gets 3 then 4, in order, without a gap.
    push(r.as_mut(), at(6), 3, 1, BULK, &paths);
    let got = drain(r.as_mut(), at(6));
    assert_eq!(seqs(&got), [3, 4]);
    assert!(got.iter().all(|d| !d.after_gap));
    assert_eq!(got[1].held, ms(3));
    assert_eq!(r.stats().held_pkts, 0);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn a_gap_below_a_flows_last_delivery_does_not_hold_it() {
    let paths = views(&[8, 12]);
    let mut r = reorder::build(&config(|_| {}));
    // The bulk flow is spread; the rt flow starts on path 0 only.
    push(r.as_mut(), at(0), 0, 0, BULK, &paths);
    push(r.as_mut(), at(1), 1, 1, BULK, &paths);
    push(r.as_mut(), at(2), 2, 0, RT, &paths);
    drain(r.as_mut(), at(2));
    // 3 is missing. rt's 4 passes (one path); bulk's 5 waits on 3.
    push(r.as_mut(), at(3), 4, 0, RT, &paths);
    push(r.as_mut(), at(3), 5, 1, BULK, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(3))), [4]);
    // rt's 6 arrives on path 1: rt is now spread, but 3 lies below its last
    // delivery (4), so it cannot be rt's in-order packet: no wait.
    push(r.as_mut(), at(4), 6, 1, RT, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(4))), [6]);
    // Another gap (7) above rt's last delivery does hold rt's 8.
    push(r.as_mut(), at(5), 8, 0, RT, &paths);
    assert!(drain(r.as_mut(), at(5)).is_empty());
    assert_eq!(r.stats().held_pkts, 2);
    // At 12 ms (3 + 9) gap 3 is given up: bulk's 5 goes; at 14 gap 7 and rt's 8.
    r.handle_timeout(at(12));
    assert_eq!(seqs(&drain(r.as_mut(), at(12))), [5]);
    r.handle_timeout(at(14));
    assert_eq!(seqs(&drain(r.as_mut(), at(14))), [8]);
    assert_eq!(r.stats().gaps_timed_out, 2);
}

#[test]
fn the_hold_is_bounded_by_the_paths_latency_difference() {
    // One-way 8 and 20 ms: spread 12 ms, + the 5 ms default offset = 17 ms.
    let paths = views(&[8, 20]);
    let r = PerFlow::new(&config(|_| {}));
    assert_eq!(r.hold_bound(at(0), &paths), ms(17));
    let mut r: Box<dyn Reorder> = Box::new(r);
    push(r.as_mut(), at(0), 0, 0, BULK, &paths);
    push(r.as_mut(), at(1), 1, 1, BULK, &paths);
    drain(r.as_mut(), at(1));
    // 2 never arrives; 3 is held 17 ms, not the 50 ms fixed timeout.
    push(r.as_mut(), at(10), 3, 0, BULK, &paths);
    assert_eq!(r.poll_timeout(), Some(at(27)));
    r.handle_timeout(at(26));
    assert!(drain(r.as_mut(), at(26)).is_empty());
    r.handle_timeout(at(27));
    let got = drain(r.as_mut(), at(27));
    assert_eq!(seqs(&got), [3]);
    assert_eq!(got[0].held, ms(17));
    assert!(got[0].after_gap);
    // The bound follows the paths: equal latencies leave only the offset,
    // a huge spread is capped at max_timeout.
    let r = PerFlow::new(&config(|c| c.max_timeout = ms(100)));
    assert_eq!(r.hold_bound(at(0), &views(&[10, 10])), ms(5));
    assert_eq!(r.hold_bound(at(0), &views(&[10, 900])), ms(100));
}

#[test]
fn a_gap_behind_a_path_still_delivering_older_numbers_is_waited_for() {
    // One-way 8 and 20 ms: bound 17 ms. Path 1 carries 1, 2 and 4; its
    // queue grows, so they arrive long after the numbers around them.
    let paths = views(&[8, 20]);
    let mut r = reorder::build(&config(|_| {}));
    push(r.as_mut(), at(0), 0, 1, BULK, &paths);
    // 1 and 2 are missing when 3 arrives (gap opened at 2 ms, due at 19);
    // 4 is missing when 5 arrives (due at 21).
    push(r.as_mut(), at(2), 3, 0, BULK, &paths);
    push(r.as_mut(), at(4), 5, 0, BULK, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(4))), [0]);
    // Path 1 delivers 1 at 15 ms: it is behind the gaps and moving.
    push(r.as_mut(), at(15), 1, 1, BULK, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(15))), [1]);
    // At the bound both gaps are due, but path 1 may still carry them: they
    // are waited for until it has been silent for the bound (15 + 17).
    r.handle_timeout(at(21));
    assert!(drain(r.as_mut(), at(21)).is_empty());
    assert_eq!(r.poll_timeout(), Some(at(32)));
    push(r.as_mut(), at(30), 2, 1, BULK, &paths);
    push(r.as_mut(), at(31), 4, 1, BULK, &paths);
    let got = drain(r.as_mut(), at(31));
    assert_eq!(seqs(&got), [2, 3, 4, 5]);
    assert!(got.iter().all(|d| !d.after_gap));
    let st = r.stats();
    assert_eq!((st.gaps_timed_out, st.late), (0, 0));
    assert!(st.gaps_extended >= 2, "{st:?}");
}

/// A TCP flow does not wait past the bound for such a gap: its RACK
/// reordering window absorbs the late packet (RFC 8985 §6.2), a longer
/// hold would only delay it. A UDP flow beside it still waits.
#[test]
fn a_tcp_flow_does_not_wait_for_a_gap_past_the_bound() {
    let paths = views(&[8, 20]);
    let mut r = reorder::build(&config(|_| {}));
    let tcp = |seq: u64, path: u32, now: u64| {
        let mut payload = udp(BULK, 100);
        payload[9] = 6;
        ReorderItem {
            seq,
            path: PathId(path),
            arrival: at(now),
            payload,
        }
    };
    r.push(at(0), tcp(0, 1, 0), &paths, &[]);
    push(r.as_mut(), at(0), 1, 1, RT, &paths);
    drain(r.as_mut(), at(0));
    // 2 (a third flow's) and 3 (UDP) are missing; 4 (TCP) and 5 (UDP)
    // arrive on path 0 and wait (both flows are spread over the paths).
    r.push(at(2), tcp(4, 0, 2), &paths, &[]);
    push(r.as_mut(), at(2), 5, 0, RT, &paths);
    assert!(drain(r.as_mut(), at(2)).is_empty());
    // Path 1 is behind and moving: it delivers 2 at 15 ms.
    push(r.as_mut(), at(15), 2, 1, 3333, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(15))), [2]);
    // At the bound (2 + 17) the TCP packet goes; the UDP one still waits.
    r.handle_timeout(at(19));
    assert_eq!(seqs(&drain(r.as_mut(), at(19))), [4]);
    push(r.as_mut(), at(25), 3, 1, RT, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(25))), [3, 5]);
}

#[test]
fn a_gap_behind_a_path_that_fell_silent_is_given_up() {
    let paths = views(&[8, 20]);
    let mut r = reorder::build(&config(|_| {}));
    push(r.as_mut(), at(0), 0, 1, BULK, &paths);
    push(r.as_mut(), at(2), 3, 0, BULK, &paths);
    drain(r.as_mut(), at(2));
    // Path 1 delivers 1 at 15 ms, then nothing: 2 is given up 17 ms
    // after that last sign of life, and 3 goes after the gap.
    push(r.as_mut(), at(15), 1, 1, BULK, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(15))), [1]);
    r.handle_timeout(at(31));
    assert!(drain(r.as_mut(), at(31)).is_empty());
    r.handle_timeout(at(32));
    let got = drain(r.as_mut(), at(32));
    assert_eq!(seqs(&got), [3]);
    assert!(got[0].after_gap);
    assert_eq!(r.stats().gaps_timed_out, 1);
    // Waiting never exceeds max_timeout after the gap opened.
    let mut r = reorder::build(&config(|c| c.max_timeout = ms(25)));
    push(r.as_mut(), at(0), 0, 1, BULK, &paths);
    push(r.as_mut(), at(2), 3, 0, BULK, &paths);
    push(r.as_mut(), at(15), 1, 1, BULK, &paths);
    drain(r.as_mut(), at(15));
    r.handle_timeout(at(27));
    assert_eq!(seqs(&drain(r.as_mut(), at(27))), [3]);
}

#[test]
fn fast_loss_detection_releases_a_flow_before_its_deadline() {
    let paths = views(&[8, 12]);
    let mut r = reorder::build(&config(|c| c.fast_loss = FastLoss::Fifo));
    push(r.as_mut(), at(0), 0, 0, BULK, &paths);
    push(r.as_mut(), at(1), 1, 1, BULK, &paths);
    drain(r.as_mut(), at(1));
    // 2 missing; 3 on path 0 waits.
    push(r.as_mut(), at(2), 3, 0, BULK, &paths);
    assert!(drain(r.as_mut(), at(2)).is_empty());
    // Path 1 delivers 4: both FIFO paths are past 2, so 2 is lost.
    push(r.as_mut(), at(3), 4, 1, BULK, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(3))), [3, 4]);
    assert_eq!(r.stats().gaps_fast_lost, 1);
}

#[test]
fn state_stays_bounded_under_many_flows_gaps_and_garbage() {
    let paths = views(&[8, 40]);
    let mut r = PerFlow::new(&config(|c| {
        c.max_hold_pkts = 512;
        c.max_timeout = Duration::from_secs(5);
    }));
    let mut x: u64 = 0x1234_5678;
    let mut rnd = move || {
        // xorshift64: deterministic pseudo-random input.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut delivered = 0usize;
    let mut seq = 0u64;
    for i in 0..60_000u64 {
        let now = at(i / 50);
        // Every third MP_SEQ skipped (a gap), flows from 60 000 source
        // ports, each seen on both paths; some payloads malformed.
        seq += 1 + u64::from(rnd() % 3 == 0);
        let payload = match rnd() % 10 {
            0 => Vec::new(),
            1 => vec![0x45, 0, 0],
            2 => vec![0x60; 41],
            _ => udp((rnd() % 60_000) as u16, 60),
        };
        let item = ReorderItem {
            seq,
            path: PathId((rnd() % 2) as u32),
            arrival: now,
            payload,
        };
        r.push(now, item, &paths, &[]);
        delivered += drain(&mut r, now).len();
        assert!(r.flows_tracked() <= MAX_FLOWS + 1, "{}", r.flows_tracked());
        assert!(r.gaps_tracked() <= MAX_GAPS);
        assert!(r.stats().held_pkts <= 512);
    }
    r.handle_timeout(at(10_000_000));
    delivered += drain(&mut r, at(10_000_000)).len();
    let st = r.stats();
    assert_eq!(st.held_pkts, 0);
    assert_eq!(st.received, 60_000);
    assert_eq!(delivered as u64, st.delivered);
    assert_eq!(st.delivered, 60_000, "{st:?}");
}

#[test]
fn a_wild_mp_seq_jump_is_one_gap_not_a_huge_allocation() {
    let paths = views(&[8, 12]);
    let mut r = PerFlow::new(&config(|_| {}));
    let mut r2: &mut dyn Reorder = &mut r;
    push(r2, at(0), 0, 0, BULK, &paths);
    push(r2, at(1), 1, 1, BULK, &paths);
    push(r2, at(2), 1 << 47, 0, BULK, &paths);
    push(r2, at(2), u64::MAX, 0, BULK, &paths);
    r2 = &mut r;
    assert_eq!(seqs(&drain(r2, at(2))), [0, 1]);
    assert_eq!(r.gaps_tracked(), 1);
    r.handle_timeout(at(1_000));
    assert_eq!(seqs(&drain(&mut r, at(1_000))), [1 << 47]);
    assert_eq!(r.stats().late, 1);
    let _ = PathReceiveState {
        path: PathId(0),
        highest_seq: None,
        in_order: true,
    };
}

/// `asym` with QUIC inside: a flow seen on one path only (40 Mbit/s
/// at 12 ms) has one packet detoured to the slower path (35 ms). The
/// packets behind it on the fast path wait for it — at most the paths'
/// delay spread — so the inner flow sees no reordering (a QUIC packet
/// threshold of 3 would call it lost, RFC 9002 §6.1.1).
#[test]
fn a_lone_detour_of_a_one_path_flow_is_held_for_the_delay_spread() {
    let paths = views(&[12, 35]);
    let mut pf = PerFlow::new(&config(|c| c.one_path_detours = true));
    let r: &mut dyn Reorder = &mut pf;
    for s in 0..10 {
        push(r, at(s), s, 0, BULK, &paths);
    }
    assert_eq!(seqs(&drain(r, at(9))), (0..10).collect::<Vec<_>>());
    // 10 went to path 1; 11..=13 overtake it on path 0 and are held.
    for s in 11..14 {
        push(r, at(s), s, 0, BULK, &paths);
    }
    assert!(drain(r, at(13)).is_empty());
    assert_eq!(r.stats().held_pkts, 3);
    // 10 arrives 23 ms later: the flow gets 10..=13 in order.
    push(r, at(33), 10, 1, BULK, &paths);
    let got = drain(r, at(33));
    assert_eq!(seqs(&got), [10, 11, 12, 13]);
    assert!(got.iter().all(|d| !d.after_gap));
    assert_eq!(got[1].held, ms(22));

    // Later the flow is back on path 0 only for longer than the spread
    // memory; a detour that never arrives holds it the hold bound: the
    // delay spread (35 − 12 ms) or the 22 ms reordering extent just
    // measured × 5/4, + 5 ms offset — 32.5 ms, no longer.
    let t = 2000;
    for s in 14..30 {
        push(r, at(t + s), s, 0, BULK, &paths);
    }
    drain(r, at(t + 30));
    push(r, at(t + 31), 31, 0, BULK, &paths);
    assert!(drain(r, at(t + 31)).is_empty());
    let deadline = at(t + 31) + Duration::from_micros(32_500);
    assert_eq!(r.poll_timeout(), Some(deadline));
    r.handle_timeout(at(t + 63));
    assert!(drain(r, at(t + 63)).is_empty());
    r.handle_timeout(deadline);
    let got = drain(r, deadline);
    assert_eq!(seqs(&got), [31]);
    assert!(got[0].after_gap);
}

/// The same lone detour in a one-path TCP flow is not held: Linux's TCP
/// waits a reordering window (RACK, RFC 8985 §6.2) before it calls the
/// packet lost, so holding would only delay the packets behind the gap.
/// The flow is told apart by the inner IP protocol (6); in IPv6 after an
/// extension header too.
#[test]
fn a_lone_detour_of_a_one_path_tcp_flow_is_not_held() {
    let paths = views(&[12, 35]);
    for ipv6 in [false, true] {
        let mut r = reorder::build(&config(|c| c.one_path_detours = true));
        let tcp = |seq: u64, path: u32, now: u64| {
            let payload = if ipv6 {
                let mut p = vec![0u8; 120];
                p[0] = 0x60;
                p[6] = 0; // hop-by-hop options, then TCP
                p[40] = 6;
                p[48..50].copy_from_slice(&BULK.to_be_bytes());
                p
            } else {
                let mut p = udp(BULK, 100);
                p[9] = 6;
                p
            };
            ReorderItem {
                seq,
                path: PathId(path),
                arrival: at(now),
                payload,
            }
        };
        for s in 0..10 {
            r.push(at(s), tcp(s, 0, s), &paths, &[]);
        }
        assert_eq!(drain(r.as_mut(), at(9)).len(), 10);
        // 10 went to path 1; 11..=13 overtake it on path 0 and pass.
        for s in 11..14 {
            r.push(at(s), tcp(s, 0, s), &paths, &[]);
        }
        assert_eq!(
            seqs(&drain(r.as_mut(), at(13))),
            [11, 12, 13],
            "ipv6 {ipv6}"
        );
        assert_eq!(r.stats().held_pkts, 0);
        r.push(at(33), tcp(10, 1, 33), &paths, &[]);
        assert_eq!(seqs(&drain(r.as_mut(), at(33))), [10]);
    }
}

/// A sparse flow (a 200-byte voice packet per ten 1400-byte packets of a
/// bulk flow: 1.4 % of the bytes) that touched the slower path is, with
/// the bound's receiver rules (`one_path_detours`), delivered at once
/// behind the bulk flow's gap; without them it counts as spread and waits
/// for the gap (the real-time row's delay on `lossy` and `trace`).
#[test]
fn a_sparse_flow_is_not_held_behind_a_bulk_flows_gap() {
    let paths = views(&[5, 25]);
    for bound_rules in [false, true] {
        let mut r = reorder::build(&config(|c| c.one_path_detours = bound_rules));
        let item = |seq: u64, path: u32, flow: u16, len: usize| ReorderItem {
            seq,
            path: PathId(path),
            arrival: at(seq),
            payload: udp(flow, len),
        };
        let mut seq = 0;
        // 30 rounds: ten bulk packets over both paths, one voice packet
        // (the first on the slower path, the rest on the faster one).
        for round in 0..30 {
            for _ in 0..10 {
                r.push(
                    at(seq),
                    item(seq, (seq % 2) as u32, BULK, 1400),
                    &paths,
                    &[],
                );
                seq += 1;
            }
            r.push(
                at(seq),
                item(seq, u32::from(round == 0), RT, 200),
                &paths,
                &[],
            );
            seq += 1;
        }
        assert_eq!(drain(r.as_mut(), at(seq)).len(), 330);
        // A bulk packet is in flight on the slower path; the next voice
        // packet arrives on the faster one.
        let gap = seq;
        for s in seq + 1..seq + 10 {
            r.push(at(s), item(s, 0, BULK, 1400), &paths, &[]);
        }
        let voice = seq + 10;
        r.push(at(voice), item(voice, 0, RT, 200), &paths, &[]);
        let got = seqs(&drain(r.as_mut(), at(voice)));
        assert_eq!(
            got.contains(&voice),
            bound_rules,
            "bound rules {bound_rules}: delivered {got:?} behind the gap at {gap}"
        );
    }
}

/// Two one-path flows interleaved packet by packet (the send queue's
/// round robin): a detour of one flow's packet holds that flow, whose
/// stride is 2 (one missing number is half a packet of it: held).
#[test]
fn a_detour_between_two_interleaved_one_path_flows_holds_them() {
    let paths = views(&[12, 35]);
    let mut r = reorder::build(&config(|c| c.one_path_detours = true));
    for s in 0..20 {
        let flow = if s % 2 == 0 { BULK } else { RT };
        push(r.as_mut(), at(s), s, 0, flow, &paths);
    }
    drain(r.as_mut(), at(20));
    // BULK's 20 is detoured; RT's 21 and BULK's 22 arrive on path 0.
    push(r.as_mut(), at(21), 21, 0, RT, &paths);
    push(r.as_mut(), at(22), 22, 0, BULK, &paths);
    assert!(!seqs(&drain(r.as_mut(), at(22))).contains(&22));
    push(r.as_mut(), at(44), 20, 1, BULK, &paths);
    let got = seqs(&drain(r.as_mut(), at(44)));
    let bulk: Vec<u64> = got.iter().copied().filter(|s| s % 2 == 0).collect();
    assert_eq!(bulk, [20, 22]);
}

/// The other side of the rule: a sparse one-path flow (one packet per 20
/// MP_SEQs beside a bulk flow on both paths) is not held behind a gap of
/// the bulk flow, nor behind a few of them.
#[test]
fn a_sparse_one_path_flow_passes_a_few_gaps_of_another_flow() {
    let paths = views(&[12, 35]);
    let mut r = reorder::build(&config(|c| c.one_path_detours = true));
    let mut seq = 0;
    for i in 0..10 {
        for _ in 0..19 {
            push(r.as_mut(), at(seq), seq, (seq % 2) as u32, BULK, &paths);
            seq += 1;
        }
        push(r.as_mut(), at(seq), seq, 0, RT, &paths);
        seq += 1;
        assert_eq!(drain(r.as_mut(), at(seq)).len(), 20, "round {i}");
    }
    // Three bulk packets are in flight on the slow path; the rt packet
    // after them passes (3 missing of a stride of 20: not its own).
    for s in seq..seq + 19 {
        if s % 6 != 0 {
            push(r.as_mut(), at(s), s, 0, BULK, &paths);
        }
    }
    push(r.as_mut(), at(seq + 19), seq + 19, 0, RT, &paths);
    assert!(seqs(&drain(r.as_mut(), at(seq + 19))).contains(&(seq + 19)));
}

/// Without `one_path_detours` (the window delay bound off) a one-path flow
/// is never held, as before: the same lone detour passes.
#[test]
fn without_the_option_a_one_path_flow_is_not_held() {
    let paths = views(&[12, 35]);
    let mut r = reorder::build(&config(|_| {}));
    for s in 0..10 {
        push(r.as_mut(), at(s), s, 0, BULK, &paths);
    }
    drain(r.as_mut(), at(9));
    push(r.as_mut(), at(11), 11, 0, BULK, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(11))), [11]);
}

/// A gap that is a loss on the fast path, not a detour (`lossy`: 0.3 %
/// random loss), holds a one-path flow until its deadline and gains
/// nothing. After three such futile holds the flow passes gaps again, and
/// a late packet of its own (a detour it was not held for) brings the
/// holds back.
#[test]
fn a_one_path_flow_stops_waiting_behind_gaps_that_never_fill() {
    let paths = views(&[12, 35]);
    let mut r = reorder::build(&config(|c| c.one_path_detours = true));
    let mut t = 0;
    let mut seq = 0;
    let send = |r: &mut dyn Reorder, n: u64, t: &mut u64, seq: &mut u64| {
        for _ in 0..n {
            push(r, at(*t), *seq, 0, BULK, &paths);
            *t += 1;
            *seq += 1;
        }
    };
    send(r.as_mut(), 10, &mut t, &mut seq);
    drain(r.as_mut(), at(t));
    for round in 0..3 {
        // One number lost; the next packet waits until the deadline.
        seq += 1;
        send(r.as_mut(), 1, &mut t, &mut seq);
        assert!(drain(r.as_mut(), at(t)).is_empty(), "round {round}");
        t += 100;
        r.handle_timeout(at(t));
        assert_eq!(drain(r.as_mut(), at(t)).len(), 1);
        send(r.as_mut(), 5, &mut t, &mut seq);
        drain(r.as_mut(), at(t));
    }
    // The fourth loss: not held.
    seq += 1;
    let lost = seq - 1;
    send(r.as_mut(), 1, &mut t, &mut seq);
    assert_eq!(seqs(&drain(r.as_mut(), at(t))), [seq - 1]);
    // That number was a detour after all: it arrives late on path 1.
    push(r.as_mut(), at(t), lost, 1, BULK, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(t))), [lost]);
    // One late packet brings futility under the limit (148 → 111): once
    // the flow is back on one path (the late packet made it spread for a
    // second), the next gap holds it again.
    for _ in 0..2 {
        t += 2000;
        send(r.as_mut(), 5, &mut t, &mut seq);
        drain(r.as_mut(), at(t));
    }
    seq += 1;
    send(r.as_mut(), 1, &mut t, &mut seq);
    assert!(drain(r.as_mut(), at(t)).is_empty());
}

#[test]
fn a_late_packet_waits_behind_its_own_flows_held_packets() {
    let wide = views(&[10, 40]);
    let mut r = reorder::build(&config(|_| {}));
    // A flow spread over both paths.
    push(r.as_mut(), at(0), 0, 0, BULK, &wide);
    push(r.as_mut(), at(0), 1, 1, BULK, &wide);
    assert_eq!(seqs(&drain(r.as_mut(), at(0))), [0, 1]);
    // 2..4 missing: 5 is held for the wide spread.
    push(r.as_mut(), at(1), 5, 0, BULK, &wide);
    // The spread shrinks: the gap 6..8 gets a short deadline and is given
    // up long before the gap 2..4 below it.
    let narrow = views(&[10, 11]);
    push(r.as_mut(), at(1), 9, 0, BULK, &narrow);
    r.handle_timeout(at(15));
    assert_eq!(seqs(&drain(r.as_mut(), at(15))), Vec::<u64>::new());
    // 7 arrives after its gap was given up: late, but 5 of its own flow
    // is still held, so it waits behind 5 instead of overtaking it.
    push(r.as_mut(), at(15), 7, 1, BULK, &narrow);
    assert_eq!(seqs(&drain(r.as_mut(), at(15))), Vec::<u64>::new());
    assert_eq!(r.stats().late, 1);
    r.handle_timeout(at(500));
    assert_eq!(seqs(&drain(r.as_mut(), at(500))), [5, 7, 9]);
}

/// Paths 0 and 1 with base RTTs 16 and 50 ms (one-way 8 and 25).
fn fast_and_slow() -> Vec<PathView> {
    let mut paths = views(&[8, 25]);
    for p in &mut paths {
        p.min_rtt = p.srtt;
    }
    paths
}

fn push_proto(
    r: &mut dyn Reorder,
    now: Instant,
    seq: u64,
    path: u32,
    proto: u8,
    paths: &[PathView],
) {
    let mut payload = udp(BULK, 100);
    payload[9] = proto;
    let item = ReorderItem {
        seq,
        path: PathId(path),
        arrival: now,
        payload,
    };
    r.push(now, item, paths, &[]);
}

/// A loss-free TCP flow spread over a 8 ms and a 25 ms path: its packet on
/// the fast path is delivered 17 ms after it arrived (the slow path's base
/// one-way delay), gap or not; its packets on the slow path at once. Off,
/// or for a UDP flow, the same packet goes at once.
#[test]
fn a_loss_free_spread_tcp_flow_is_delivered_at_its_slowest_paths_base_delay() {
    let paths = fast_and_slow();
    for (equalise, proto, due) in [(true, 6, 18), (false, 6, 1), (true, 17, 1)] {
        let mut r = reorder::build(&config(|c| c.equalise_spread_tcp = equalise));
        push_proto(r.as_mut(), at(0), 0, 1, proto, &paths);
        assert_eq!(seqs(&drain(r.as_mut(), at(0))), [0]);
        // Now spread: the fast path's packet waits for its deficit.
        push_proto(r.as_mut(), at(1), 1, 0, proto, &paths);
        if due > 1 {
            assert!(drain(r.as_mut(), at(due - 1)).is_empty());
            assert_eq!(r.poll_timeout(), Some(at(due)), "woken when due");
        }
        let d = drain(r.as_mut(), at(due));
        assert_eq!(seqs(&d), [1], "equalise {equalise}, protocol {proto}");
        assert_eq!(d[0].held, ms(due - 1));
        assert!(!d[0].after_gap);
        // The slow path's packet: no deficit.
        push_proto(r.as_mut(), at(30), 2, 1, proto, &paths);
        assert_eq!(seqs(&drain(r.as_mut(), at(30))), [2]);
    }
}

/// A TCP flow delivered past a given-up gap is loss-limited: for
/// `EQUALISE_LOSS_MEMORY` its packets are not equalised (a loss-based
/// TCP's rate falls with its RTT), then they are again.
#[test]
fn a_spread_tcp_flow_that_lost_a_packet_is_not_equalised() {
    let paths = fast_and_slow();
    let mut r = reorder::build(&config(|c| c.equalise_spread_tcp = true));
    push_proto(r.as_mut(), at(0), 0, 1, 6, &paths);
    push_proto(r.as_mut(), at(1), 1, 0, 6, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(18))), [0, 1]);
    // 2 never comes: 3 waits for the gap's deadline and goes past it.
    push_proto(r.as_mut(), at(20), 3, 0, 6, &paths);
    let deadline = r.poll_timeout().expect("a gap is held");
    let d = drain(r.as_mut(), deadline);
    assert_eq!(seqs(&d), [3]);
    assert!(d[0].after_gap);
    // Spread still (both paths within a second), but lost lately: at once.
    let t = deadline.as_nanos().div_ceil(1_000_000) + 10;
    push_proto(r.as_mut(), at(t), 4, 1, 6, &paths);
    push_proto(r.as_mut(), at(t + 1), 5, 0, 6, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(t + 1))), [4, 5]);
    // After the loss memory, equalised again.
    let later = t + reorder::EQUALISE_LOSS_MEMORY.as_millis() as u64;
    push_proto(r.as_mut(), at(later), 6, 1, 6, &paths);
    push_proto(r.as_mut(), at(later + 1), 7, 0, 6, &paths);
    assert_eq!(seqs(&drain(r.as_mut(), at(later + 1))), [6]);
    assert_eq!(seqs(&drain(r.as_mut(), at(later + 18))), [7]);
}

/// An IPv4 TCP segment of flow `BULK` with sequence number `tcp_seq` and
/// `data` payload bytes (a 20-byte TCP header; Total Length set).
fn tcp_segment(tcp_seq: u32, data: usize) -> Vec<u8> {
    let mut p = udp(BULK, 40 + data);
    p[2..4].copy_from_slice(&((40 + data) as u16).to_be_bytes());
    p[9] = 6;
    p[24..28].copy_from_slice(&tcp_seq.to_be_bytes());
    p[32] = 5 << 4;
    p
}

fn push_segment(r: &mut dyn Reorder, now: Instant, seq: u64, path: u32, payload: Vec<u8>) {
    let paths = fast_and_slow();
    let item = ReorderItem {
        seq,
        path: PathId(path),
        arrival: now,
        payload,
    };
    r.push(now, item, &paths, &[]);
}

/// The receiver sees no gap when the inner TCP's packet was dropped before
/// the tunnel (the sending daemon's FQ-CoDel): it sees the sender's
/// retransmission, a data segment that does not advance the flow's TCP
/// sequence number, arriving in MP_SEQ order, and counts it. A segment
/// reordered by the paths and put back in order by the hold, or a pure ack
/// repeating a sequence number, is no retransmission. (Equalisation does
/// not read it: an inner BBR retransmits too.)
#[test]
fn an_inner_tcp_retransmission_is_counted() {
    let mut r = reorder::build(&config(|_| {}));
    let mss = 1448;
    push_segment(r.as_mut(), at(0), 0, 1, tcp_segment(1000, mss));
    push_segment(r.as_mut(), at(1), 1, 0, tcp_segment(2448, mss));
    assert_eq!(seqs(&drain(r.as_mut(), at(1))), [0, 1]);
    // Reordered by the paths: MP_SEQ 3 (TCP 5344) before 2 (TCP 3896).
    push_segment(r.as_mut(), at(20), 3, 0, tcp_segment(5344, mss));
    push_segment(r.as_mut(), at(21), 2, 1, tcp_segment(3896, mss));
    // Pure acks repeat the sequence number without data.
    push_segment(r.as_mut(), at(22), 4, 1, tcp_segment(6792, 0));
    push_segment(r.as_mut(), at(23), 5, 1, tcp_segment(6792, 0));
    assert_eq!(seqs(&drain(r.as_mut(), at(23))), [2, 3, 4, 5]);
    assert_eq!(r.stats().inner_tcp_resent, 0);
    // The inner sender resends 3896 (its original was dropped before the
    // tunnel): no gap, but a retransmission.
    push_segment(r.as_mut(), at(50), 6, 1, tcp_segment(3896, mss));
    assert_eq!(seqs(&drain(r.as_mut(), at(50))), [6]);
    assert_eq!(r.stats().inner_tcp_resent, 1);
    // Sequence numbers wrap (RFC 1982): forward in steps below 2^31
    // across 2^32 is progress, a resend from before the wrap is not.
    for (k, tcp_seq) in [
        0x4000_0000,
        0x8000_0000,
        0xc000_0000,
        0xffff_fa00,
        0x0000_0100,
    ]
    .into_iter()
    .enumerate()
    {
        push_segment(
            r.as_mut(),
            at(60),
            7 + k as u64,
            0,
            tcp_segment(tcp_seq, mss),
        );
    }
    assert_eq!(drain(r.as_mut(), at(60)).len(), 5);
    assert_eq!(r.stats().inner_tcp_resent, 1);
    push_segment(r.as_mut(), at(61), 12, 0, tcp_segment(0xffff_fa00, mss));
    assert_eq!(seqs(&drain(r.as_mut(), at(61))), [12]);
    assert_eq!(r.stats().inner_tcp_resent, 2);
}
