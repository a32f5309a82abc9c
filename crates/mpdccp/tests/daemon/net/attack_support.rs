//! What the namespace attack tests share: a raw IPv4/UDP sender that
//! spoofs any source, an on-path sniffer (a packet socket in a namespace
//! the packets cross), and a ping counter. Used by `net::attacks` and
//! `net::attacks_matrix`.

// Raw sockets and namespaces through libc: an exception to the
// workspace's `unsafe_code = "deny"`.
#![allow(unsafe_code)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant as StdInstant};

use mpdccp_lab::netns::spawn_in_netns;

/// The IPv4 TTL of every packet [`raw_udp_flood`] sends: a sniffer on the
/// same path tells the forgeries from genuine packets by it.
pub const FORGED_TTL: u8 = 77;

/// Sends raw IPv4/UDP packets from namespace `ns` with the sources `src`
/// gives (spoofed), cycling through `payloads`, at most `rate` per second;
/// returns how many went out.
pub fn raw_udp_flood(
    ns: &str,
    dst: (Ipv4Addr, u16),
    count: u32,
    rate: u32,
    src: impl Fn(u32) -> (Ipv4Addr, u16) + Send + 'static,
    payloads: Vec<Vec<u8>>,
) -> std::thread::JoinHandle<anyhow::Result<u32>> {
    spawn_in_netns(ns, move || {
        // SAFETY: plain socket(2); the fd is closed below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
        anyhow::ensure!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        let mut sent = 0;
        let mut pkt = Vec::with_capacity(2048);
        let start = StdInstant::now();
        for i in 0..count {
            if i % 500 == 0 {
                let due = Duration::from_secs_f64(f64::from(i) / f64::from(rate));
                std::thread::sleep(due.saturating_sub(start.elapsed()));
            }
            let (s, sport) = src(i);
            let payload = &payloads[i as usize % payloads.len()];
            pkt.clear();
            let total = (20 + 8 + payload.len()) as u16;
            pkt.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, FORGED_TTL, 17, 0, 0]);
            pkt[2..4].copy_from_slice(&total.to_be_bytes());
            pkt.extend_from_slice(&s.octets());
            pkt.extend_from_slice(&dst.0.octets());
            pkt.extend_from_slice(&sport.to_be_bytes());
            pkt.extend_from_slice(&dst.1.to_be_bytes());
            pkt.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            pkt.extend_from_slice(&[0, 0]); // no UDP checksum (IPv4)
            pkt.extend_from_slice(payload);
            let sa = libc::sockaddr_in {
                sin_family: libc::AF_INET as u16,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(dst.0.octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `pkt` and `sa` outlive the call; lengths are theirs.
            let n = unsafe {
                libc::sendto(
                    fd,
                    pkt.as_ptr().cast(),
                    pkt.len(),
                    0,
                    (&sa as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as u32,
                )
            };
            if n > 0 {
                sent += 1;
            }
        }
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd) };
        Ok(sent)
    })
}

/// One UDP datagram a sniffer saw.
#[derive(Clone, Debug)]
pub struct Sniffed {
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    /// The UDP payload: the DCCP packet.
    pub dccp: Vec<u8>,
}

/// The next `n` UDP datagrams from `src_ip` to `dst_ip` with `port` as
/// their source or destination port, seen by a packet socket in namespace
/// `ns` (an on-path sniffer: every packet crossing it). Fails when fewer
/// came within `timeout`.
pub fn sniff_udp(
    ns: &str,
    src_ip: Ipv4Addr,
    dst_ip: Ipv4Addr,
    port: u16,
    n: usize,
    timeout: Duration,
) -> anyhow::Result<Vec<Sniffed>> {
    spawn_in_netns(ns, move || {
        let proto = (libc::ETH_P_IP as u16).to_be();
        // SAFETY: plain socket(2); the fd is closed below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM, i32::from(proto)) };
        anyhow::ensure!(
            fd >= 0,
            "packet socket: {}",
            std::io::Error::last_os_error()
        );
        let deadline = StdInstant::now() + timeout;
        let mut buf = [0u8; 2048];
        let mut found = Vec::new();
        while found.len() < n && StdInstant::now() < deadline {
            // SAFETY: `buf` outlives the call; MSG_DONTWAIT never blocks.
            let got =
                unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
            if got <= 0 {
                std::thread::sleep(Duration::from_micros(500));
                continue;
            }
            let p = &buf[..got as usize];
            let ihl = usize::from(p[0] & 0x0f) * 4;
            if p.len() <= ihl + 8 || p[9] != 17 {
                continue;
            }
            let (s, d) = (
                Ipv4Addr::new(p[12], p[13], p[14], p[15]),
                Ipv4Addr::new(p[16], p[17], p[18], p[19]),
            );
            let sport = u16::from_be_bytes([p[ihl], p[ihl + 1]]);
            let dport = u16::from_be_bytes([p[ihl + 2], p[ihl + 3]]);
            if s == src_ip && d == dst_ip && (sport == port || dport == port) {
                found.push(Sniffed {
                    src: SocketAddrV4::new(s, sport),
                    dst: SocketAddrV4::new(d, dport),
                    dccp: p[ihl + 8..].to_vec(),
                });
            }
        }
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd) };
        anyhow::ensure!(
            found.len() == n,
            "{} of {n} datagrams {src_ip} → {dst_ip} (port {port}) in {timeout:?}",
            found.len()
        );
        Ok(found)
    })
    .join()
    .expect("sniffer thread")
}

/// Pings from namespace `ns` to `target`, `count` at 100/s; returns how
/// many got no answer within a second.
pub fn pings_lost(ns: &str, target: &str, count: u32) -> u32 {
    let out = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "ping",
            "-c",
            &count.to_string(),
            "-i",
            "0.01",
        ])
        .args(["-W", "1", "-q", target])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let received = out
        .split(',')
        .find_map(|f| f.trim().strip_suffix(" received")?.parse::<u32>().ok())
        .unwrap_or(0);
    count - received
}
