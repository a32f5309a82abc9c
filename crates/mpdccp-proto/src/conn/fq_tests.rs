//! Unit tests of `fq.rs` through `SendQueue` (what the connection uses).

use std::time::Duration;

use crate::time::Instant;

use super::super::aqm::CoDelConfig;
use super::super::ecn::tests::fold as checksum;
use super::super::queue::{PushOutcome, SendQueue};
use super::super::queued::Queued;
use super::{FlowQueues, DEFAULT_FLOWS};

const QUANTUM: usize = 1500;

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// An IPv4 packet of `len` bytes (at least 28): protocol `proto`, source
/// port (or ICMP echo id) `port`, a sequence number at bytes 28..32.
fn v4(proto: u8, port: u16, seq: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(32)];
    p[0] = 0x45;
    p[9] = proto;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    if proto == 1 {
        p[20] = 8; // echo request
        p[24..26].copy_from_slice(&port.to_be_bytes());
    } else {
        p[20..22].copy_from_slice(&port.to_be_bytes());
        p[22..24].copy_from_slice(&443u16.to_be_bytes());
    }
    p[28..32].copy_from_slice(&seq.to_be_bytes());
    p
}

fn tcp(port: u16, seq: u32) -> Vec<u8> {
    v4(6, port, seq, 1400)
}

fn ping(seq: u32) -> Vec<u8> {
    v4(1, 77, seq, 84)
}

fn seq_of(p: &[u8]) -> u32 {
    u32::from_be_bytes(p[28..32].try_into().unwrap())
}

fn fq_queue(pkts: usize, bytes: usize, codel: Option<CoDelConfig>) -> SendQueue {
    SendQueue::new(pkts, bytes, Default::default())
        .with_time_limits(None, codel)
        .with_flow_queues(DEFAULT_FLOWS, QUANTUM, 7)
}

/// The flows the tests use land in different buckets with seed 7 (a
/// collision would make them one flow, which FQ cannot separate).
#[test]
fn test_flows_are_in_distinct_buckets() {
    let fq = FlowQueues::new(DEFAULT_FLOWS, QUANTUM, None, 7);
    let buckets = [
        fq.bucket(&tcp(1000, 0)),
        fq.bucket(&tcp(2000, 0)),
        fq.bucket(&ping(0)),
    ];
    assert_ne!(buckets[0], buckets[1]);
    assert_ne!(buckets[0], buckets[2]);
    assert_ne!(buckets[1], buckets[2]);
    // Same 5-tuple, other payload and length: same bucket.
    assert_eq!(fq.bucket(&tcp(1000, 9)), fq.bucket(&v4(6, 1000, 3, 60)));
}

/// RFC 8290 §4.1.2: a ping arriving behind a 500-packet bulk backlog is a
/// new flow and goes out within the bulk flow's current quantum, not after
/// the backlog.
#[test]
fn a_sparse_packet_overtakes_a_bulk_backlog() {
    let t = Instant::ZERO;
    let mut q = fq_queue(1000, 2_000_000, Some(CoDelConfig::default()));
    for k in 0..500 {
        assert_eq!(q.push(t, &tcp(1000, k)), PushOutcome::Queued);
    }
    // The bulk flow is in service (on the old list) when the ping comes.
    for _ in 0..10 {
        q.pop().unwrap();
    }
    assert_eq!(q.push(t + ms(1), &ping(0)), PushOutcome::Queued);
    let mut bulk_bytes_before = 0;
    loop {
        q.shed_head(t + ms(1));
        let p = q.pop().expect("the ping is queued");
        if p.data.len() == 84 {
            break;
        }
        bulk_bytes_before += p.data.len();
    }
    assert!(
        bulk_bytes_before <= QUANTUM,
        "{bulk_bytes_before} bulk bytes went before the ping"
    );
    assert_eq!(q.len(), 490);
}

/// The same ping behind the same backlog in the FIFO waits for all of it.
#[test]
fn the_fifo_makes_the_same_ping_wait() {
    let t = Instant::ZERO;
    let mut q = SendQueue::new(1000, 2_000_000, Default::default());
    for k in 0..500 {
        q.push(t, &tcp(1000, k));
    }
    q.push(t, &ping(0));
    let before = std::iter::from_fn(|| q.pop())
        .take_while(|p| p.data.len() != 84)
        .count();
    assert_eq!(before, 500);
}

/// Deficit round robin (RFC 8290 §4.2): two backlogged flows, one of
/// 1400-byte and one of 200-byte packets, get equal bytes within one
/// quantum at every point.
#[test]
fn drr_gives_two_bulk_flows_equal_bytes() {
    let t = Instant::ZERO;
    let mut q = fq_queue(10_000, 10_000_000, None);
    for k in 0..400 {
        q.push(t, &tcp(1000, k));
    }
    for k in 0..2000 {
        q.push(t, &v4(17, 2000, k, 200));
    }
    let (mut big, mut small) = (0usize, 0usize);
    while big < 400 * 1400 && small < 2000 * 200 {
        let p = q.pop().unwrap();
        if p.data.len() == 1400 {
            big += 1400;
        } else {
            small += 200;
        }
        assert!(
            big.abs_diff(small) <= QUANTUM + 1400,
            "big {big} small {small}"
        );
    }
}

/// RFC 8290 §4.1.1: over the packet bound, the fattest flow loses its
/// oldest packets; the sparse flow loses nothing.
#[test]
fn overflow_drops_the_fattest_flows_head() {
    let t = Instant::ZERO;
    let mut q = fq_queue(100, 10_000_000, None);
    for k in 0..3 {
        q.push(t, &ping(k));
    }
    let mut dropped = 0;
    for k in 0..200 {
        match q.push(t, &tcp(1000, k)) {
            PushOutcome::Queued => {}
            PushOutcome::DroppedFattest {
                dropped: n,
                queued: true,
            } => dropped += n,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(dropped, 103);
    assert_eq!(q.len(), 100);
    let out: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
    let pings: Vec<u32> = out
        .iter()
        .filter(|p| p.data.len() == 84)
        .map(|p| seq_of(&p.data))
        .collect();
    assert_eq!(pings, [0, 1, 2]);
    // The bulk flow kept its newest 97, in order.
    let bulk: Vec<u32> = out
        .iter()
        .filter(|p| p.data.len() == 1400)
        .map(|p| seq_of(&p.data))
        .collect();
    assert_eq!(bulk, (103..200).collect::<Vec<_>>());
    assert_eq!(q.bytes(), 0);
}

/// The byte bound too: a big packet of a new flow pushes out bulk heads,
/// and a packet whose own flow is the fattest with only it is refused.
#[test]
fn overflow_by_bytes_and_refusing_the_newest() {
    let t = Instant::ZERO;
    let mut q = fq_queue(1000, 14_000, None);
    for k in 0..10 {
        q.push(t, &tcp(1000, k));
    }
    assert_eq!(
        q.push(t, &ping(0)),
        PushOutcome::DroppedFattest {
            dropped: 1,
            queued: true
        }
    );
    assert!(q.bytes() <= 14_000);
    // A full-sized packet of a third flow: the bulk flow still pays.
    let r = q.push(t, &tcp(3000, 0));
    assert_eq!(
        r,
        PushOutcome::DroppedFattest {
            dropped: 1,
            queued: true
        }
    );
    // The new packet's flow is the fattest, with only that packet: it is
    // the one dropped, and the sender is told.
    let mut q = fq_queue(2, 1_000_000, None);
    q.push(t, &ping(0));
    q.push(t, &v4(17, 5, 0, 100));
    assert_eq!(
        q.push(t, &v4(17, 6, 0, 1000)),
        PushOutcome::DroppedFattest {
            dropped: 0,
            queued: false
        }
    );
    assert_eq!(q.len(), 2);
}

/// RFC 8290 §4.2, CoDel per flow: a bulk flow with a 20 ms standing queue
/// is dropped from; a sparse flow served at once, sharing the queue, never.
#[test]
fn codel_drops_only_in_the_flow_with_a_standing_queue() {
    let t0 = Instant::ZERO;
    let mut q = fq_queue(10_000, 100_000_000, Some(CoDelConfig::default()));
    for k in 0..20 {
        q.push(t0 + ms(u64::from(k)), &tcp(1000, k));
    }
    let (mut shed, mut pings_out, mut bulk_out) = (0, 0, 0);
    for k in 20..600u32 {
        let now = t0 + ms(u64::from(k));
        q.push(now, &tcp(1000, k));
        if k % 10 == 0 {
            q.push(now, &ping(k));
        }
        // Served one bulk packet's worth a millisecond, plus the ping.
        for _ in 0..1 + usize::from(k % 10 == 0) {
            let s = q.shed_head(now);
            shed += s.codel;
            match q.pop() {
                Some(p) if p.data.len() == 84 => pings_out += 1,
                Some(_) => bulk_out += 1,
                None => {}
            }
        }
    }
    assert!(shed >= 3, "{shed} CoDel drops");
    assert_eq!(pings_out, 58, "every ping delivered");
    assert_eq!(bulk_out + shed as usize + q.len(), 600);
}

/// The same standing queue from an ECN-capable flow (ECT(0)): CoDel marks
/// its heads CE instead of dropping them (RFC 8290 §5.2), so every bulk
/// packet is delivered, the marked ones with a valid IPv4 header checksum.
#[test]
fn codel_marks_an_ecn_capable_flow_instead_of_dropping() {
    let t0 = Instant::ZERO;
    let mut q = fq_queue(10_000, 100_000_000, Some(CoDelConfig::default()));
    let ect = |k: u32| {
        let mut p = tcp(1000, k);
        p[1] = 0b10; // ECT(0)
        let c = checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    };
    for k in 0..20 {
        q.push(t0 + ms(u64::from(k)), &ect(k));
    }
    let (mut dropped, mut marked, mut ce_seen, mut out) = (0, 0, 0, 0);
    for k in 20..600u32 {
        let now = t0 + ms(u64::from(k));
        q.push(now, &ect(k));
        let s = q.shed_head(now);
        dropped += s.codel + s.expired;
        marked += s.ecn_marked;
        if let Some(p) = q.pop() {
            out += 1;
            assert_eq!(checksum(&p.data[..20]), 0, "header checksum after marking");
            if p.data[1] & 0b11 == 0b11 {
                ce_seen += 1;
            }
        }
    }
    assert_eq!(dropped, 0, "an ECN-capable flow loses nothing to CoDel");
    assert!(marked >= 3, "{marked} CE marks");
    assert_eq!(ce_seen, marked, "each mark is on a delivered packet");
    assert_eq!(out + q.len(), 600);
}

/// Hostile input: empty, short, truncated, non-IP and nonsense headers
/// hash to a bucket without panicking; non-IP all to one bucket.
#[test]
fn malformed_packets_hash_without_panic() {
    let fq = FlowQueues::new(DEFAULT_FLOWS, QUANTUM, None, 7);
    let junk_bucket = fq.bucket(&[]);
    for p in [&[][..], &[0x45], &[0x00; 60], &[0xff; 60], &[0x20, 1, 2, 3]] {
        assert_eq!(fq.bucket(p), junk_bucket, "{p:?}");
    }
    // IPv4 with IHL < 5, IHL past the end, truncated before the ports.
    let mut bad_ihl = tcp(1, 0);
    bad_ihl[0] = 0x43;
    assert_eq!(fq.bucket(&bad_ihl), junk_bucket);
    let mut long_ihl = tcp(1, 0);
    long_ihl[0] = 0x4f;
    fq.bucket(&long_ihl[..40]);
    fq.bucket(&tcp(1, 0)[..22]);
    // IPv6: an extension-header chain that runs off the end, a loop of
    // hop-by-hop headers, a fragment header cut short.
    let mut v6 = vec![0u8; 48];
    v6[0] = 0x60;
    v6[6] = 0; // hop-by-hop
    v6[40] = 0;
    v6[41] = 255;
    fq.bucket(&v6);
    for nh in [0u8, 43, 44, 60] {
        let mut p = vec![0u8; 120];
        p[0] = 0x60;
        p[6] = nh;
        for k in (40..120).step_by(8) {
            p[k] = nh;
        }
        fq.bucket(&p);
        fq.bucket(&p[..41]);
    }
    // Every length and many byte patterns, through the whole queue.
    let mut q = fq_queue(64, 1_000_000, Some(CoDelConfig::default()));
    let mut x = 0x1234_5678u32;
    for len in 0..200usize {
        let mut p = vec![0u8; len];
        for b in &mut p {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            *b = (x >> 24) as u8;
        }
        if let Some(b) = p.first_mut() {
            *b = [0x45, 0x60, 0x4f, 0x00][len % 4];
        }
        q.push(Instant::ZERO, &p);
        q.shed_head(Instant::ZERO + ms(len as u64));
        if len % 3 == 0 {
            q.pop();
        }
    }
    let n = q.len();
    assert!(n <= 64);
    assert_eq!(q.drop_longer_than(100) + q.clear(), n);
    assert_eq!((q.len(), q.bytes()), (0, 0));
}

/// Taken back from a path: the packet returns to the head of its own flow
/// and is counted again; drop_longer_than and clear keep the totals.
#[test]
fn push_front_and_the_totals() {
    let t = Instant::ZERO;
    let mut q = fq_queue(1000, 1_000_000, None);
    for k in 0..5 {
        q.push(t, &tcp(1000, k));
    }
    q.push(t, &ping(0));
    let first = q.pop().unwrap();
    assert_eq!(seq_of(&first.data), 0);
    q.push_front(first);
    assert_eq!((q.len(), q.bytes()), (6, 5 * 1400 + 84));
    assert_eq!(seq_of(&q.front().unwrap().data), 0);
    assert_eq!(q.drop_longer_than(1000), 5);
    assert_eq!((q.len(), q.bytes()), (1, 84));
    assert_eq!(q.front().unwrap().data.len(), 84);
    assert_eq!(q.clear(), 1);
    assert!(q.front().is_none());
}

/// Buckets are sparse: 50 flows hold a state per bucket while queued and none once
/// drained (a server keeps no 1024-bucket table per idle client), and a
/// returning flow starts as a new one (full quantum, served first).
#[test]
fn drained_buckets_keep_no_state() {
    let t0 = Instant::ZERO;
    let mut q = fq_queue(10_000, 100_000_000, Some(CoDelConfig::default()));
    assert_eq!(q.flow_states(), 0);
    let hash = FlowQueues::new(DEFAULT_FLOWS, QUANTUM, None, 7);
    let mut buckets = std::collections::BTreeSet::new();
    for port in 0..50u16 {
        q.push(t0, &tcp(2000 + port, u32::from(port)));
        buckets.insert(hash.bucket(&tcp(2000 + port, 0)));
    }
    // One state per occupied bucket (two of the 50 flows may share one).
    assert_eq!(q.flow_states(), buckets.len());
    assert!(buckets.len() >= 45);
    while q.pop().is_some() {}
    assert_eq!(q.flow_states(), 0, "drained flows keep state");
    // Bulk backlog, then the returning flow 2000 overtakes it.
    for k in 0..10 {
        q.push(t0 + ms(1), &tcp(1000, k));
    }
    // Two pops spend the bulk flow's quantum: it moves to the old list.
    q.pop();
    q.pop();
    q.push(t0 + ms(2), &tcp(2000, 99));
    assert_eq!(seq_of(&q.pop().expect("queued").data), 99);
    // Emptied from the new list, flow 2000 waits its turn on the old list
    // (RFC 8290 §4.2) before it is forgotten.
    assert_eq!(q.flow_states(), 2);
    while q.pop().is_some() {}
    assert_eq!(q.flow_states(), 0);
}

/// The scheduler's sparse-flow hint: the head's flow carries at most an
/// eighth of the bytes pushed (a ping beside a bulk flow); an ack-clocked
/// bulk flow alone in the queue is not sparse, though its bucket empties
/// between packets; a FIFO has no flows.
#[test]
fn a_flow_with_a_small_byte_share_is_a_sparse_head() {
    let t = Instant::ZERO;
    let mut q = fq_queue(1000, 10_000_000, None);
    assert!(!q.head_is_sparse(), "empty");
    for k in 0..20 {
        for j in 0..10 {
            q.push(t, &tcp(1000, 10 * k + j));
        }
        q.push(t, &ping(k));
    }
    // Deficit round robin serves the ping bucket between bulk packets.
    let (mut sparse_pings, mut sparse_bulk) = (0, 0);
    while let Some(head) = q.front() {
        let is_ping = head.data.len() == 84;
        if q.head_is_sparse() {
            if is_ping {
                sparse_pings += 1;
            } else {
                sparse_bulk += 1;
            }
        }
        q.pop();
    }
    assert_eq!(sparse_bulk, 0);
    assert!(sparse_pings >= 19, "{sparse_pings} of 20 pings sparse");
    // One flow, one packet at a time (the queue empties between them).
    let mut alone = fq_queue(1000, 10_000_000, None);
    for k in 0..50 {
        alone.push(t, &tcp(1000, k));
        assert!(!alone.head_is_sparse(), "bulk packet {k}");
        alone.pop();
    }
    let mut fifo = SendQueue::new(100, 1_000_000, Default::default());
    fifo.push(t, &ping(0));
    assert!(!fifo.head_is_sparse());
}

/// A real-time flow stays sparse while the bulk flow beside it pauses (a
/// TCP waiting for acks: only the real-time flow pushes for a while), and
/// a flow that turns into a bulk transfer stops being sparse within a
/// bounded number of packets, however long it was quiet before.
#[test]
fn a_sparse_flow_stays_sparse_through_a_pause_of_the_bulk_flow() {
    let mut fq = FlowQueues::new(DEFAULT_FLOWS, QUANTUM, None, 7);
    let bulk = fq.bucket(&tcp(1000, 0));
    let item = |data: Vec<u8>| Queued {
        data,
        enqueued: Instant::ZERO,
        copy: false,
    };
    // A 200-byte real-time datagram per two bulk packets: a share of
    // about 1/13, sparse.
    let rt_pkt = |k: u32| v4(17, 5004, k, 228);
    let rt = fq.bucket(&rt_pkt(0));
    for k in 0..100 {
        fq.push_back(bulk, item(tcp(1000, 2 * k)));
        fq.push_back(bulk, item(tcp(1000, 2 * k + 1)));
        fq.push_back(rt, item(rt_pkt(k)));
    }
    assert!(fq.is_sparse(rt) && !fq.is_sparse(bulk));
    // The bulk flow pauses for 24 datagrams (about 40 ms of this 1 Mbit/s
    // stream): each sample says "all the bytes are mine".
    for k in 0..24 {
        fq.push_back(rt, item(rt_pkt(100 + k)));
        assert!(fq.is_sparse(rt), "datagram {k} of the pause");
    }

    // A flow quiet for 10 MB of the others' traffic turns bulk: "sparse"
    // for a bounded number of its packets only.
    let mut fq = FlowQueues::new(DEFAULT_FLOWS, QUANTUM, None, 7);
    let rt = fq.bucket(&ping(0));
    fq.push_back(rt, item(ping(0)));
    for k in 0..7000 {
        fq.push_back(bulk, item(tcp(1000, k)));
    }
    let sparse_for = (1..=300)
        .take_while(|&k| {
            fq.push_back(rt, item(ping(k)));
            fq.is_sparse(rt)
        })
        .count();
    assert!(
        sparse_for <= 120,
        "sparse for {sparse_for} packets of a bulk transfer"
    );
    assert!(
        sparse_for >= 1,
        "the first packets after a long gap are sparse"
    );
}
