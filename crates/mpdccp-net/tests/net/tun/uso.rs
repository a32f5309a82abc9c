//! UDP segmentation offload against the real kernel, in a
//! network namespace of its own (needs root; fails instead of skipping
//! when `CI` is set):
//!
//! * write path: datagrams merged by [`Coalescer`] into one `GSO_UDP_L4`
//!   super-packet and written to the TUN arrive at a UDP socket as the
//!   original datagrams — the kernel accepts our `virtio_net_hdr`;
//! * read path: a `UDP_SEGMENT` send routed into the TUN is read as one
//!   `GSO_UDP_L4` frame, and [`split`] makes the datagrams of it.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use mpdccp_net::offload::{split, Coalescer, OffloadStats, VnetHdr, VNET_HDR_LEN};
use mpdccp_net::tun::Tun;

/// Fails unless root: the tests that call it are `#[ignore]`d and run with
/// `cargo test -- --include-ignored` as root (.ci/run), never skipped.
fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    assert!(
        unsafe { libc::geteuid() } == 0,
        "{test}: needs root (network namespaces)"
    );
    true
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?}");
}

/// A named network namespace, deleted on drop.
struct Ns(String);

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Independent RFC 1071 sum (16-bit big-endian words, end-around carry).
fn sum(parts: &[&[u8]]) -> u16 {
    let b: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        s += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// An IPv4 UDP datagram with valid checksums, DF set.
fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, id: u16, payload: &[u8]) -> Vec<u8> {
    let n = 28 + payload.len();
    let mut p = vec![0u8; n];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(n as u16).to_be_bytes());
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    let c = !sum(&[&p[..20]]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p[24..26].copy_from_slice(&((n - 20) as u16).to_be_bytes());
    p[28..].copy_from_slice(payload);
    let c = !udp_sum(&p);
    p[26..28].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    p
}

/// Sum over the RFC 768 pseudo-header and the UDP datagram of IPv4 `p`.
fn udp_sum(p: &[u8]) -> u16 {
    let ulen = ((p.len() - 20) as u16).to_be_bytes();
    sum(&[&p[12..20], &[0, 17], &ulen, &p[20..]])
}

fn kernel_has_uso() -> bool {
    // TUN_F_USO4/6: Linux 6.2.
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut it = r
        .trim()
        .split(['.', '-'])
        .map(|x| x.parse::<u32>().unwrap_or(0));
    let (a, b) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (a, b) >= (6, 2)
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn tun_uso_write_and_read_with_the_kernel() {
    if !require_root("tun_uso_write_and_read_with_the_kernel") {
        return;
    }
    let ns = Ns(format!("mpduso{}", std::process::id() % 1_000_000));
    ip(&["netns", "add", &ns.0]);
    let name = ns.0.clone();
    let r = std::thread::spawn(move || run_in(&name)).join();
    drop(ns);
    r.expect("test thread panicked");
}

fn run_in(ns: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{ns}")).expect("open netns");
    // SAFETY: a valid namespace fd; moves only this thread.
    assert_eq!(
        unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) },
        0,
        "setns: {}",
        std::io::Error::last_os_error()
    );
    let tun = Tun::open_offload("usot0").expect("TUN with offloads");
    if kernel_has_uso() {
        assert!(tun.uso(), "kernel >= 6.2 must accept TUN_F_USO4|USO6");
    } else {
        eprintln!("SKIP USO part: kernel before 6.2");
        return;
    }
    ip(&["-n", ns, "link", "set", "lo", "up"]);
    ip(&["-n", ns, "addr", "add", "10.77.0.1/24", "dev", "usot0"]);
    ip(&["-n", ns, "link", "set", "usot0", "mtu", "1500", "up"]);
    let local = [10, 77, 0, 1];
    let peer = [10, 77, 0, 2];

    // --- Write path: one super-packet in, the datagrams out of a socket.
    let rx = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::from(local), 5000)).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let payloads: Vec<Vec<u8>> = (0..6u8)
        .map(|i| {
            let n = if i == 5 { 333 } else { 1000 };
            (0..n).map(|k| (k as u8).wrapping_mul(7) ^ i).collect()
        })
        .collect();
    let pkts: Vec<Vec<u8>> = payloads
        .iter()
        .enumerate()
        .map(|(i, d)| udp4(peer, local, 4000, 5000, 77 + i as u16, d))
        .collect();
    let mut co = Coalescer::new();
    co.set_udp_gso(true);
    let mut st = OffloadStats::default();
    let mut frames: Vec<([u8; VNET_HDR_LEN], Vec<u8>)> = Vec::new();
    for p in &pkts {
        co.push(p, &mut st, &mut |h, q| frames.push((*h, q.to_vec())));
    }
    co.flush(&mut st, &mut |h, q| frames.push((*h, q.to_vec())));
    assert_eq!(frames.len(), 1, "one super-packet");
    assert_eq!(VnetHdr::parse(&frames[0].0).unwrap().gso_type, 5);
    let (h, q) = &frames[0];
    let n = tun
        .send_vnet(h, q)
        .expect("kernel accepts the GSO_UDP_L4 frame");
    assert_eq!(n, VNET_HDR_LEN + q.len());
    let mut buf = vec![0u8; 65_536 + VNET_HDR_LEN];
    for (i, want) in payloads.iter().enumerate() {
        let (n, from) = rx
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("datagram {i} not delivered: {e}"));
        assert_eq!(&buf[..n], &want[..], "datagram {i}");
        assert_eq!(from.to_string(), "10.77.0.2:4000");
    }

    // --- Read path: a UDP_SEGMENT send is one GSO_UDP_L4 frame on the TUN.
    let data: Vec<u8> = (0..3500u32).map(|k| (k * 31 + 5) as u8).collect();
    const SOL_UDP: libc::c_int = 17;
    const UDP_SEGMENT: libc::c_int = 103; // include/uapi/linux/udp.h
    let gso: libc::c_int = 1000;
    // SAFETY: setsockopt with a valid int option value.
    let r = unsafe {
        libc::setsockopt(
            rx.as_raw_fd(),
            SOL_UDP,
            UDP_SEGMENT,
            (&gso as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "UDP_SEGMENT: {}", std::io::Error::last_os_error());
    rx.send_to(&data, SocketAddrV4::new(Ipv4Addr::from(peer), 4000))
        .expect("GSO send");
    let deadline = Instant::now() + Duration::from_secs(2);
    let frame = loop {
        match tun.recv(&mut buf[..]) {
            Ok(n) => {
                let f = &buf[..n];
                // Skip anything else the kernel may send (IPv6 RS, …).
                if n > VNET_HDR_LEN + 28
                    && f[VNET_HDR_LEN] == 0x45
                    && f[VNET_HDR_LEN + 9] == 17
                    && f[VNET_HDR_LEN + 22..VNET_HDR_LEN + 24] == 4000u16.to_be_bytes()
                {
                    break f.to_vec();
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "no UDP frame on the TUN");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("tun read: {e}"),
        }
    };
    let h = VnetHdr::parse(&frame).unwrap();
    assert_eq!(h.gso_type, 5, "a GSO_UDP_L4 frame: {h:?}");
    assert_eq!(h.gso_size, 1000);
    assert_eq!(frame.len(), VNET_HDR_LEN + 28 + 3500, "one frame, all data");
    let mut out = vec![0u8; 1500];
    let mut got = Vec::new();
    let mut st = OffloadStats::default();
    let n = split(&frame, &mut out, &mut st, |p| got.push(p.to_vec())).unwrap();
    assert_eq!(n, 4);
    assert_eq!(st.uso_frames, 1);
    let id0 = u16::from_be_bytes([got[0][4], got[0][5]]);
    for (i, p) in got.iter().enumerate() {
        let chunk = &data[i * 1000..((i + 1) * 1000).min(data.len())];
        assert_eq!(&p[28..], chunk, "segment {i} payload");
        assert_eq!(sum(&[&p[..20]]), 0xffff, "IPv4 header checksum {i}");
        assert_eq!(udp_sum(p), 0xffff, "UDP checksum {i}");
        assert_eq!(
            usize::from(u16::from_be_bytes([p[24], p[25]])),
            8 + chunk.len()
        );
        assert_eq!(u16::from_be_bytes([p[4], p[5]]), id0.wrapping_add(i as u16));
    }
}

/// CPU cost of delivering UDP through the TUN, one write per datagram vs
/// coalesced `GSO_UDP_L4` super-packets (the writer thread's user+system
/// time covers the kernel's receive path up to the socket). Not a pass/fail
/// test: `cargo test --release -p mpdccp-net --test net tun::uso -- --ignored
/// --nocapture`.
#[test]
#[ignore]
fn bench_tun_udp_write_plain_vs_coalesced() {
    if !require_root("bench_tun_udp_write_plain_vs_coalesced") {
        return;
    }
    let ns = Ns(format!("mpdusob{}", std::process::id() % 1_000_000));
    ip(&["netns", "add", &ns.0]);
    let name = ns.0.clone();
    let r = std::thread::spawn(move || bench_in(&name)).join();
    drop(ns);
    r.expect("bench thread panicked");
}

fn thread_cpu_s() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn bench_in(ns: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{ns}")).expect("open netns");
    // SAFETY: a valid namespace fd; moves only this thread.
    assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
    let tun = Tun::open_offload("usob0").expect("TUN with offloads");
    assert!(tun.uso());
    ip(&["-n", ns, "addr", "add", "10.77.0.1/24", "dev", "usob0"]);
    ip(&["-n", ns, "link", "set", "usob0", "mtu", "1500", "up"]);
    let (local, peer) = ([10, 77, 0, 1], [10, 77, 0, 2]);
    const BATCH: usize = 44; // datagrams per wake-up, as in the bench
    const BATCHES: usize = 4000;
    let pl = vec![0x5au8; 1200];
    let pkts: Vec<Vec<u8>> = (0..BATCH)
        .map(|i| udp4(peer, local, 4000, 5000, i as u16, &pl))
        .collect();
    for mode in ["plain", "coalesced", "plain", "coalesced"] {
        let rx = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::from(local), 5000)).unwrap();
        let big: libc::c_int = 64 << 20;
        // SAFETY: setsockopt with a valid int.
        unsafe {
            libc::setsockopt(
                rx.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&big as *const libc::c_int).cast(),
                4,
            )
        };
        rx.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let reader = std::thread::spawn(move || {
            let mut b = [0u8; 2000];
            let mut n = 0u64;
            while rx.recv(&mut b).is_ok() {
                n += 1;
            }
            n
        });
        let mut co = Coalescer::new();
        co.set_udp_gso(mode == "coalesced");
        let mut st = OffloadStats::default();
        let (c0, t0) = (thread_cpu_s(), Instant::now());
        let mut writes = 0u64;
        for _ in 0..BATCHES {
            for p in &pkts {
                co.push(p, &mut st, &mut |h, q| {
                    tun.send_vnet(h, q).expect("write");
                    writes += 1;
                });
            }
            co.flush(&mut st, &mut |h, q| {
                tun.send_vnet(h, q).expect("write");
                writes += 1;
            });
        }
        let (cpu, wall) = (thread_cpu_s() - c0, t0.elapsed().as_secs_f64());
        let got = reader.join().unwrap();
        let n = (BATCH * BATCHES) as f64;
        println!(
            "{mode:9}: {n} datagrams in {writes} writes, writer CPU {:.2} s = {:.2} us/datagram, wall {:.2} s, delivered {got} ({:.1} %)",
            cpu,
            cpu / n * 1e6,
            wall,
            got as f64 / n * 100.0
        );
    }
}
