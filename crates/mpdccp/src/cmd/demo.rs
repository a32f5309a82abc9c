//! `mpdccp demo`: a built-in two-path MP-DCCP session in the deterministic
//! harness — handshake, join, data both ways, MP_ADDADDR, graceful close —
//! with an optional pcap of every datagram (LINKTYPE_RAW, IPv4, one address
//! pair per path, valid checksums; native DCCP, DCCP-in-UDP or U-DCCP per
//! `--transport`) and a short summary.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use mpdccp_proto::conn::codec::Segment;
use mpdccp_proto::harness::{Harness, HarnessConfig, LinkSpec, Side, WireRecord};
use mpdccp_proto::wire::pcap::PcapWriter;
use mpdccp_proto::{Event, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write every datagram of the session to this pcap file.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// How the pcap shows the packets on the wire: native DCCP (IP protocol
    /// 33), DCCP-in-UDP (RFC 6773, UDP port 6511 at the server) or U-DCCP
    /// (the DCCP ports, 4242, are the UDP ports).
    #[arg(long, value_enum, default_value_t = PcapTransport::Dccp)]
    pub transport: PcapTransport,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Seed of the session (keys, sequence numbers, loss).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Random loss on both paths, 0.0..1.0.
    #[arg(long, default_value_t = 0.0)]
    pub loss: f64,
    /// Tunnelled packets sent each way.
    #[arg(long, default_value_t = 200)]
    pub packets: u32,
}

/// The encapsulation of the demo's pcap.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PcapTransport {
    Dccp,
    Udp,
    Udccp,
}

/// Writes one harness datagram to the pcap in `transport`'s form.
fn write_wire(
    w: &mut PcapWriter<std::io::BufWriter<std::fs::File>>,
    transport: PcapTransport,
    r: &mpdccp_proto::harness::WireRecord,
) -> anyhow::Result<()> {
    use mpdccp_proto::wire::{udccp, udp_encap};
    let (src, dst) = (r.src.ip(), r.dst.ip());
    match transport {
        PcapTransport::Dccp => w.write_dccp(r.time, src, dst, &r.bytes)?,
        PcapTransport::Udp => {
            // The client's side of RFC 6773 uses the DCCP port, the
            // server's the IANA port 6511.
            let (sp, dp) = match r.from {
                Side::Client => (r.src.port(), udp_encap::DCCP_UDP_PORT),
                Side::Server => (udp_encap::DCCP_UDP_PORT, r.dst.port()),
            };
            let mut d = vec![0u8; udp_encap::UDP_HEADER_LEN + r.bytes.len()];
            d[udp_encap::UDP_HEADER_LEN..].copy_from_slice(&r.bytes);
            let n = udp_encap::frame(&mut d, r.bytes.len(), sp, dp, Some((src, dst)))?;
            w.write_segment(r.time, src, dst, udp_encap::IPPROTO_UDP, &d[..n])?;
        }
        PcapTransport::Udccp => {
            let mut d = vec![0u8; r.bytes.len()];
            let n = udccp::encode(&r.bytes, &mut d, Some((src, dst)))?;
            w.write_segment(r.time, src, dst, udp_encap::IPPROTO_UDP, &d[..n])?;
        }
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        (0.0..1.0).contains(&args.loss),
        "--loss must be in [0, 1), got {}",
        args.loss
    );
    let summary = session(&args)?;
    let text = if args.json {
        serde_json::to_string_pretty(&summary)? + "\n"
    } else {
        human(&summary)
    };
    // A closed pipe (`| head`) is not an error worth a panic.
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(if summary["ok"].as_bool() == Some(true) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn session(args: &Args) -> anyhow::Result<serde_json::Value> {
    let mut h = two_path_harness(args);
    let steps = play(&mut h, args)?;
    if let Some(file) = &args.pcap {
        let mut w =
            PcapWriter::create(file).with_context(|| format!("creating {}", file.display()))?;
        for r in &h.wire {
            write_wire(&mut w, args.transport, r)?;
        }
        w.flush()?;
    }
    Ok(summary(args, &h, &steps))
}

/// Two paths, 10 ms at 20 Mbit/s and 30 ms at 10 Mbit/s, with the
/// session's random loss; every datagram recorded.
fn two_path_harness(args: &Args) -> Harness {
    let paths = vec![
        LinkSpec {
            delay: Duration::from_millis(10),
            rate_bps: Some(20_000_000),
            loss: args.loss,
            ..Default::default()
        },
        LinkSpec {
            delay: Duration::from_millis(30),
            rate_bps: Some(10_000_000),
            loss: args.loss,
            ..Default::default()
        },
    ];
    let mut h = Harness::new(HarnessConfig {
        paths,
        seed: args.seed,
        ..Default::default()
    });
    h.record = true;
    h
}

/// When the session's steps completed, and the address it advertised.
struct Steps {
    connected: Instant,
    joined: Instant,
    extra: SocketAddr,
    addr_id: u8,
}

/// The session: handshake, join, data both ways, MP_ADDADDR, close.
fn play(h: &mut Harness, args: &Args) -> anyhow::Result<Steps> {
    // 1. First subflow: the MP_KEY 4-way handshake.
    h.open_path(0);
    let connected = h.drive_until_pred(Duration::from_secs(10), |h| {
        h.client.is_established() && h.server.is_established()
    });
    anyhow::ensure!(connected, "handshake did not complete");
    let t_connected = h.now;
    // 2. Join a second subflow (MP_JOIN with nonces and MP_HMAC).
    h.open_path(1);
    h.drive_until_pred(Duration::from_secs(10), |h| {
        h.server.paths().len() == 2
            && h.client
                .paths()
                .iter()
                .all(|p| p.state == mpdccp_proto::PathState::Active)
    });
    let t_joined = h.now;
    // 3. Data both ways: small IPv4/UDP packets, one per millisecond.
    for k in 0..args.packets {
        let now = h.now;
        for side in [Side::Client, Side::Server] {
            let pkt = ipv4_udp_packet(side, k, 400);
            let _ = h.conn(side).send(now, &pkt);
        }
        h.drive_for(Duration::from_millis(1));
    }
    // Let both send queues drain before the control phase.
    h.drive_until_pred(Duration::from_secs(10), |h| {
        h.client.send_queue_len() == 0 && h.server.send_queue_len() == 0
    });
    h.drive_for(Duration::from_millis(200));
    // 4. Advertise an extra address (MP_ADDADDR, confirmed by MP_CONFIRM).
    let extra: SocketAddr = "10.0.9.1:4242".parse()?;
    let now = h.now;
    let addr_id = h.client.advertise_address(now, extra)?;
    h.drive_for(Duration::from_millis(500));
    // 5. Graceful close: Close + MP_CLOSE on both subflows.
    let now = h.now;
    h.client.close(now);
    h.drive_until_pred(Duration::from_secs(30), |h| {
        h.client.is_closed() && h.server.is_closed()
    });
    Ok(Steps {
        connected: t_connected,
        joined: t_joined,
        extra,
        addr_id,
    })
}

/// The recorded datagrams counted by packet type, by MP option and by
/// path and direction.
struct WireCounts {
    by_type: BTreeMap<String, u64>,
    mp_opts: BTreeMap<&'static str, u64>,
    per_path: BTreeMap<String, u64>,
}

fn wire_counts(wire: &[WireRecord]) -> WireCounts {
    let mut by_type: BTreeMap<String, u64> = BTreeMap::new();
    let mut mp_opts: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut per_path: BTreeMap<String, u64> = BTreeMap::new();
    for r in wire {
        let Ok(s) = Segment::parse(&r.bytes, None) else {
            continue;
        };
        *by_type.entry(s.ptype.name().to_string()).or_default() += 1;
        let dir = if r.from == Side::Client { "c2s" } else { "s2c" };
        *per_path
            .entry(format!("path{}_{dir}", r.path.0))
            .or_default() += 1;
        let m = &s.mp;
        for (present, name) in [
            (m.key.is_some(), "MP_KEY"),
            (m.join.is_some(), "MP_JOIN"),
            (m.hmac.is_some(), "MP_HMAC"),
            (m.seq.is_some(), "MP_SEQ"),
            (m.rtt.is_some(), "MP_RTT"),
            (m.addaddr.is_some(), "MP_ADDADDR"),
            (m.removeaddr.is_some(), "MP_REMOVEADDR"),
            (m.prio.is_some(), "MP_PRIO"),
            (m.close.is_some(), "MP_CLOSE"),
            (m.fast_close.is_some(), "MP_FAST_CLOSE"),
            (!m.confirms().is_empty(), "MP_CONFIRM"),
        ] {
            if present {
                *mp_opts.entry(name).or_default() += 1;
            }
        }
    }
    WireCounts {
        by_type,
        mp_opts,
        per_path,
    }
}

/// The session's summary (`--json`; `human` prints it).
fn summary(args: &Args, h: &Harness, steps: &Steps) -> serde_json::Value {
    let WireCounts {
        by_type,
        mp_opts,
        per_path,
    } = wire_counts(&h.wire);
    let delivered_c2s = h.delivered(Side::Server).len();
    let delivered_s2c = h.delivered(Side::Client).len();
    let addr_id = steps.addr_id;
    let addr_added = h.server_events.iter().any(|e| {
        *e == Event::AddressAdded {
            id: addr_id,
            addr: steps.extra,
        }
    });
    let reason = |ev: &[Event]| {
        ev.iter().find_map(|e| match e {
            Event::Closed { reason } => Some(reason.clone()),
            _ => None,
        })
    };
    let cs = h.client.stats();
    let ss = h.server.stats();
    let ok = h.client.is_closed()
        && h.server.is_closed()
        && addr_added
        && delivered_c2s > 0
        && delivered_s2c > 0;
    serde_json::json!({
        "ok": ok,
        "seed": args.seed,
        "loss": args.loss,
        "connected_at_s": steps.connected.as_secs_f64(),
        "joined_at_s": steps.joined.as_secs_f64(),
        "closed_at_s": h.now.as_secs_f64(),
        "client_ci": format!("{:08x}", h.client.local_ci()),
        "server_ci": format!("{:08x}", h.server.local_ci()),
        "packets_sent_each_way": args.packets,
        "delivered_client_to_server": delivered_c2s,
        "delivered_server_to_client": delivered_s2c,
        "lost_pkts": cs.loss.lost_pkts + ss.loss.lost_pkts,
        "addaddr_confirmed": h.client_events.contains(&Event::AddressConfirmed { id: addr_id }),
        "client_close_reason": reason(&h.client_events),
        "server_close_reason": reason(&h.server_events),
        "datagrams": h.wire.len(),
        "datagrams_dropped_on_links": h.wire.iter().filter(|w| w.dropped).count(),
        "packet_types": by_type,
        "mp_options": mp_opts,
        "per_path": per_path,
        "pcap": args.pcap.as_ref().map(|p| p.display().to_string()),
    })
}

fn human(s: &serde_json::Value) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "mpdccp demo: two-path MP-DCCP session (seed {})",
        s["seed"]
    );
    let _ = writeln!(
        o,
        "  handshake done at {:.3} s (client CI {}, server CI {}); join at {:.3} s",
        s["connected_at_s"].as_f64().unwrap_or(0.0),
        s["client_ci"].as_str().unwrap_or("?"),
        s["server_ci"].as_str().unwrap_or("?"),
        s["joined_at_s"].as_f64().unwrap_or(0.0),
    );
    let _ = writeln!(
        o,
        "  data: {} packets each way; delivered {} client→server, {} server→client, {} lost",
        s["packets_sent_each_way"],
        s["delivered_client_to_server"],
        s["delivered_server_to_client"],
        s["lost_pkts"],
    );
    let _ = writeln!(o, "  MP_ADDADDR confirmed: {}", s["addaddr_confirmed"]);
    let _ = writeln!(
        o,
        "  closed at {:.3} s (client: {}, server: {})",
        s["closed_at_s"].as_f64().unwrap_or(0.0),
        s["client_close_reason"].as_str().unwrap_or("-"),
        s["server_close_reason"].as_str().unwrap_or("-"),
    );
    let _ = writeln!(o, "  datagrams on the wire: {}", s["datagrams"]);
    if let Some(m) = s["packet_types"].as_object() {
        let v: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(o, "  packet types: {}", v.join(", "));
    }
    if let Some(m) = s["mp_options"].as_object() {
        let v: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(o, "  MP options: {}", v.join(", "));
    }
    if let Some(p) = s["pcap"].as_str() {
        let _ = writeln!(o, "  pcap written to {p}");
    }
    let _ = writeln!(
        o,
        "  result: {}",
        if s["ok"] == true { "ok" } else { "FAILED" }
    );
    o
}

/// A syntactically valid IPv4/UDP packet standing in for tunnelled traffic.
fn ipv4_udp_packet(side: Side, k: u32, len: usize) -> Vec<u8> {
    let len = len.max(28);
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    let (src, dst) = match side {
        Side::Client => ([192, 168, 1, 2], [198, 51, 100, 7]),
        Side::Server => ([198, 51, 100, 7], [192, 168, 1, 2]),
    };
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    let c = ip_checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20..22].copy_from_slice(&5000u16.to_be_bytes());
    p[22..24].copy_from_slice(&5001u16.to_be_bytes());
    p[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    p[28..32.min(len)].copy_from_slice(&k.to_be_bytes()[..4.min(len - 28)]);
    p
}

fn ip_checksum(h: &[u8]) -> u16 {
    let mut s: u32 = h
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32)
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}
