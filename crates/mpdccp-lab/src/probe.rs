//! The UDP probe generator of the testbed (`udp-cbr` flows): constant bit
//! rate, each datagram carrying a sequence number and its send time.
//!
//! Send times are `CLOCK_MONOTONIC` ([`mpdccp_net::clock::now`]), which every
//! network namespace of the host shares, so the receiver's one-way delay
//! (receive time minus send time) is exact, whatever namespaces and tunnels
//! lie between. The receiver keeps one record per packet (preallocated for the
//! expected count) and tells duplicates and reordering apart by sequence
//! number.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mpdccp_proto::Instant;

use mpdccp_net::clock;

/// Header of every probe: magic, flow id, sequence number, send time.
pub const HEADER_BYTES: usize = 4 + 4 + 8 + 8;
const MAGIC: u32 = 0x4d50_5052; // "MPPR"

/// One probe stream.
#[derive(Clone, Debug)]
pub struct ProbeConfig {
    pub flow: u32,
    pub dst: SocketAddr,
    /// Bit rate of the UDP payload... of the IP packets, bit/s.
    pub rate_bps: u64,
    /// UDP payload bytes per probe (at least [`HEADER_BYTES`]).
    pub payload_bytes: usize,
    /// `CLOCK_MONOTONIC` instants: start and stop sending.
    pub start: Instant,
    pub stop: Instant,
}

/// What the sender did.
#[derive(Clone, Debug, Default)]
pub struct SendLog {
    /// (send time, bytes) per probe, in sequence order.
    pub sent: Vec<(Instant, usize)>,
    pub send_errors: u64,
}

/// Sends the stream; blocks until `stop` (or `abort`).
pub fn send(cfg: &ProbeConfig, abort: &AtomicBool) -> io::Result<SendLog> {
    clock::set_precise_timers();
    let bind: SocketAddr = if cfg.dst.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .expect("literal");
    let sock = UdpSocket::bind(bind)?;
    let len = cfg.payload_bytes.max(HEADER_BYTES);
    // Rate counts IP packets (payload + UDP + IP headers), as links do.
    let ip_bytes = len + 8 + if cfg.dst.is_ipv4() { 20 } else { 40 };
    let interval_ns =
        (ip_bytes as u128 * 8 * 1_000_000_000 / u128::from(cfg.rate_bps.max(1))) as u64;
    let expected = ((cfg.stop - cfg.start).as_nanos() as u64 / interval_ns.max(1)) as usize + 1;
    let mut log = SendLog {
        sent: Vec::with_capacity(expected),
        send_errors: 0,
    };
    let mut buf = vec![0u8; len];
    let mut seq: u64 = 0;
    let mut next = cfg.start;
    while next < cfg.stop && !abort.load(Ordering::Relaxed) {
        sleep_until(next);
        let now = clock::now();
        buf[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        buf[4..8].copy_from_slice(&cfg.flow.to_be_bytes());
        buf[8..16].copy_from_slice(&seq.to_be_bytes());
        buf[16..24].copy_from_slice(&now.as_nanos().to_be_bytes());
        match sock.send_to(&buf, cfg.dst) {
            Ok(_) => log.sent.push((now, ip_bytes)),
            Err(_) => {
                // Still a sent sequence number (the receiver sees a gap).
                log.send_errors += 1;
                log.sent.push((now, ip_bytes));
            }
        }
        seq += 1;
        next += Duration::from_nanos(interval_ns);
        // Never try to catch up a backlog in a burst after a stall.
        let now = clock::now();
        if now > next + Duration::from_millis(50) {
            next = now;
        }
    }
    Ok(log)
}

/// Sleeps in the kernel until close to `t`, then spins the rest.
pub fn sleep_until(t: Instant) {
    loop {
        let now = clock::now();
        if now >= t {
            return;
        }
        match clock::sleep_budget(now, t) {
            Some(d) => std::thread::sleep(d),
            None => std::hint::spin_loop(),
        }
    }
}

/// One received probe.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub flow: u32,
    pub seq: u64,
    pub sent: Instant,
    pub received: Instant,
    /// IP bytes (payload + headers), as counted by the sender.
    pub ip_bytes: usize,
}

/// Receives probes on `bind` until `abort` is set; returns every arrival in
/// arrival order. Datagrams without the probe header are ignored.
pub fn receive(
    bind: SocketAddr,
    abort: Arc<AtomicBool>,
    ready: Option<Arc<AtomicBool>>,
) -> io::Result<Vec<Arrival>> {
    let sock = UdpSocket::bind(bind)?;
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    let _ = socket2::SockRef::from(&sock).set_recv_buffer_size(8 << 20);
    if let Some(r) = ready {
        r.store(true, Ordering::Release);
    }
    let ip_hdr = if bind.is_ipv4() { 28 } else { 48 };
    let mut out = Vec::with_capacity(1 << 16);
    let mut buf = vec![0u8; 65_536];
    while !abort.load(Ordering::Relaxed) {
        let n = match sock.recv_from(&mut buf) {
            Ok((n, _)) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let received = clock::now();
        if n < HEADER_BYTES || buf[0..4] != MAGIC.to_be_bytes() {
            continue;
        }
        let be64 = |b: &[u8]| u64::from_be_bytes(b.try_into().expect("8-byte slice"));
        out.push(Arrival {
            flow: u32::from_be_bytes(buf[4..8].try_into().expect("4-byte slice")),
            seq: be64(&buf[8..16]),
            sent: Instant::from_nanos(be64(&buf[16..24])),
            received,
            ip_bytes: n + ip_hdr,
        });
    }
    Ok(out)
}

/// Exactly-once accounting of one flow's arrivals against `sent` probes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub sent: u64,
    pub delivered: u64,
    pub duplicates: u64,
    pub lost: u64,
    pub out_of_order: u64,
}

/// Counts delivered / duplicate / lost / out-of-order probes of `flow`.
pub fn tally(arrivals: &[Arrival], flow: u32, sent: u64) -> Tally {
    let mut seen = vec![false; sent as usize];
    let mut t = Tally {
        sent,
        ..Default::default()
    };
    let mut max_seq: Option<u64> = None;
    for a in arrivals.iter().filter(|a| a.flow == flow) {
        let Some(s) = seen.get_mut(a.seq as usize) else {
            continue;
        };
        if *s {
            t.duplicates += 1;
            continue;
        }
        *s = true;
        t.delivered += 1;
        if max_seq.is_some_and(|m| a.seq < m) {
            t.out_of_order += 1;
        }
        max_seq = Some(max_seq.map_or(a.seq, |m| m.max(a.seq)));
    }
    t.lost = sent - t.delivered;
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_stream_counts_exactly_once() {
        let abort = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(AtomicBool::new(false));
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        drop(sock);
        let (a2, r2) = (abort.clone(), ready.clone());
        let rx = std::thread::spawn(move || receive(addr, a2, Some(r2)));
        while !ready.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let start = clock::now();
        let cfg = ProbeConfig {
            flow: 3,
            dst: addr,
            rate_bps: 8_000_000,
            payload_bytes: 972,
            start,
            stop: start + Duration::from_millis(200),
        };
        let log = send(&cfg, &AtomicBool::new(false)).unwrap();
        // 1000-byte IP packets at 8 Mbit/s: one per ms, 200 in 200 ms.
        assert!((199..=201).contains(&log.sent.len()), "{}", log.sent.len());
        std::thread::sleep(Duration::from_millis(50));
        abort.store(true, Ordering::Relaxed);
        let arr = rx.join().unwrap().unwrap();
        let t = tally(&arr, 3, log.sent.len() as u64);
        assert_eq!(t.delivered, log.sent.len() as u64);
        assert_eq!((t.duplicates, t.lost), (0, 0));
        assert!(arr
            .iter()
            .all(|a| a.received >= a.sent && a.ip_bytes == 1000));
    }

    #[test]
    fn tally_finds_duplicates_gaps_and_reordering() {
        let a = |seq| Arrival {
            flow: 1,
            seq,
            sent: Instant::ZERO,
            received: Instant::ZERO,
            ip_bytes: 100,
        };
        let arr = [a(0), a(2), a(1), a(2), a(9)];
        let t = tally(&arr, 1, 4);
        assert_eq!(
            t,
            Tally {
                sent: 4,
                delivered: 3,
                duplicates: 1,
                lost: 1,
                out_of_order: 1
            }
        );
    }
}
