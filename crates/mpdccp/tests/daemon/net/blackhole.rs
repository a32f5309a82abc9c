//! Failover without a link event, measured through the real
//! daemons: path A (5 ms one-way, 20 Mbit/s) is blackholed at its router for
//! 10 s — the links stay up, every packet in both directions is dropped by an
//! nftables rule — while 4 Mbit/s of probes flow each way; path B (15 ms)
//! stays up. The goal: a returning path carries data again within
//! one RTT + 0.5 s of its return (1.3–1.5 s before the fix, daemon).
//!
//! Measured on the router's own interfaces with tcpdump (kernel timestamps,
//! the same wall clock as the test's): the first data-sized datagram that
//! leaves the router towards the server (upstream) and towards the client
//! (downstream) after the drop rule is deleted. Also asserted: the subflow
//! survives (the 10 s outage is shorter than `path_idle_timeout_ms`, 15 s),
//! the other path carries the streams during the outage, and nothing sent a
//! second after the return is lost.
//!
//! Needs root, `nft` and `tcpdump`. Without them the test prints a skip
//! notice, or fails when `CI` is set.

use crate::support::exe;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mpdccp_lab::netns::{require_root, require_tool, Netns};
use mpdccp_lab::probe;
use mpdccp_lab::topo::{Topology, TunnelOpts};
use mpdccp_proto::Instant;

const ONE_WAY_A_MS: u64 = 5;
const OUTAGE: Duration = Duration::from_secs(10);
/// A datagram of at least this many bytes carries a 1000-byte probe; the
/// path's probes, acks and keepalives are far smaller.
const DATA_LEN: usize = 900;

fn wall_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64()
}

/// Drops every packet the router would forward (both directions), before
/// the emulator sees it; ARP is untouched, so both links stay up.
fn blackhole(r: &Netns) {
    let rules = "table inet blackhole {\n chain pre {\n  type filter hook prerouting priority -300; policy accept;\n  iifname { \"c\", \"s\" } meta l4proto { udp, dccp } counter drop\n }\n}\n";
    let f = std::env::temp_dir().join(format!("blackhole-{}.nft", std::process::id()));
    std::fs::write(&f, rules).expect("nft file");
    r.output("nft", &["-f", &f.to_string_lossy()])
        .expect("nft blackhole");
    let _ = std::fs::remove_file(&f);
}

/// `(time, from, to, length)` of every UDP datagram tcpdump printed
/// (`-tt -n -q`: "1764270000.123456 IP 10.1.1.2.40000 > 10.1.2.2.6773: UDP, length 1072").
fn parse_capture(text: &str) -> Vec<(f64, String, String, usize)> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let t: f64 = w.next()?.parse().ok()?;
            (w.next()? == "IP").then_some(())?;
            let from = w.next()?.to_string();
            w.next()?; // ">"
            let to = w.next()?.trim_end_matches(':').to_string();
            let len: usize = l.rsplit("length ").next()?.trim().parse().ok()?;
            Some((t, from, to, len))
        })
        .collect()
}

/// Host part of tcpdump's "a.b.c.d.port".
fn host(addr_port: &str) -> &str {
    addr_port.rsplit_once('.').map_or(addr_port, |(h, _)| h)
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn blackholed_path_carries_data_again_within_one_rtt_and_half_a_second() {
    let _serial = crate::support::serial();
    let test = "blackholed_path_carries_data_again_within_one_rtt_and_half_a_second";
    if !require_root(test) || !require_tool(test, "nft") || !require_tool(test, "tcpdump") {
        return;
    }
    let mut t = Topology::build(2).expect("topology");
    for (i, delay) in [(0, ONE_WAY_A_MS), (1, 15)] {
        t.start_emulator(
            exe(),
            i,
            &["--delay-ms", &delay.to_string(), "--rate-mbps", "20"],
        )
        .expect("emulator");
    }
    // The daemons' defaults (cpf scheduler, keepalives, 15 s path idle timeout).
    t.start_tunnel(exe(), &TunnelOpts::default())
        .expect("tunnel");
    let client_a = t.paths[0].client_ip.to_string();

    // Captures on router A: what leaves it towards the server ("s") and
    // towards the client ("c"), i.e. what crossed the path.
    let cap = |iface: &str| t.dir.join(format!("router-a-{iface}.txt"));
    let mut tcpdumps = Vec::new();
    for iface in ["s", "c"] {
        let args = [
            "-i",
            iface,
            "-n",
            "-tt",
            "-q",
            "-l",
            "-Q",
            "out",
            "udp or ip proto 33",
        ];
        tcpdumps.push(
            t.routers[0]
                .spawn_logged("tcpdump", &args, &cap(iface))
                .expect("tcpdump"),
        );
    }
    std::thread::sleep(Duration::from_millis(700));

    let secs = 16.0;
    let rate = 4_000_000;
    let (up, start) = t.start_probe_stream(false, rate, secs, 9101).expect("up");
    let (down, _) = t.start_probe_stream(true, rate, secs, 9102).expect("down");
    std::thread::sleep(Duration::from_secs(3));
    let cut = mpdccp_net::clock::now();
    blackhole(&t.routers[0]);
    std::thread::sleep(OUTAGE);
    let back_wall = wall_secs();
    let back = mpdccp_net::clock::now();
    t.routers[0]
        .output("nft", &["delete", "table", "inet", "blackhole"])
        .expect("nft restore");

    let (up_log, up_arr) = up.finish(Duration::from_millis(500)).expect("up stream");
    let (down_log, down_arr) = down
        .finish(Duration::from_millis(500))
        .expect("down stream");
    std::thread::sleep(Duration::from_millis(200));
    let client = t.status(false).expect("client status");
    let server = t.status(true).expect("server status");
    for mut p in tcpdumps {
        p.stop();
    }

    // First data after the return, per direction.
    let first_after = |iface: &str, upstream: bool| -> Option<f64> {
        let text = std::fs::read_to_string(cap(iface)).unwrap_or_default();
        parse_capture(&text)
            .into_iter()
            .filter(|(ts, from, to, len)| {
                let ours = if upstream { host(from) } else { host(to) };
                *ts >= back_wall && *len >= DATA_LEN && ours == client_a
            })
            .map(|(ts, ..)| ts - back_wall)
            .next()
    };
    let up_gap = first_after("s", true);
    let down_gap = first_after("c", false);

    // Probes sent in a window: how many arrived.
    let window = |log: &probe::SendLog, arr: &[probe::Arrival], from: Instant, to: Instant| {
        let sent: Vec<u64> = log
            .sent
            .iter()
            .enumerate()
            .filter(|(_, (at, _))| *at >= from && *at < to)
            .map(|(i, _)| i as u64)
            .collect();
        let got = arr
            .iter()
            .filter(|a| a.flow == 1 && sent.binary_search(&a.seq).is_ok())
            .count();
        (got, sent.len())
    };
    let end = start + Duration::from_secs_f64(secs);
    let during = |log, arr| window(log, arr, cut + Duration::from_secs(1), back);
    let after = |log, arr| window(log, arr, back + Duration::from_secs(1), end);
    let lost_total = |log: &probe::SendLog, arr: &[probe::Arrival]| {
        probe::tally(arr, 1, log.sent.len() as u64).lost
    };
    let rtt_ms = 2 * ONE_WAY_A_MS;
    eprintln!(
        "blackhole of path A ({rtt_ms} ms RTT) for {} s: first data on A after its return: upstream {}, downstream {}; \
         probes lost in total: up {} / down {} of {} each (4 Mbit/s); during the outage delivered up {:?} down {:?}; after the return up {:?} down {:?}",
        OUTAGE.as_secs(),
        up_gap.map_or("none".into(), |g| format!("{:.0} ms", g * 1e3)),
        down_gap.map_or("none".into(), |g| format!("{:.0} ms", g * 1e3)),
        lost_total(&up_log, &up_arr),
        lost_total(&down_log, &down_arr),
        up_log.sent.len(),
        during(&up_log, &up_arr),
        during(&down_log, &down_arr),
        after(&up_log, &up_arr),
        after(&down_log, &down_arr),
    );

    let goal = rtt_ms as f64 / 1e3 + 0.5;
    for (dir, gap) in [("upstream", up_gap), ("downstream", down_gap)] {
        let g = gap.unwrap_or_else(|| {
            panic!(
                "{dir}: no data crossed path A after its return\n{}",
                t.log_tail(!dir.starts_with('u'))
            )
        });
        assert!(
            g <= goal,
            "{dir}: path A carried data {:.0} ms after its return (goal ≤ {:.0} ms)",
            g * 1e3,
            goal * 1e3
        );
    }
    // Path B carried the streams while A was dark, and nothing sent a second
    // after A's return was lost.
    for (dir, log, arr) in [("up", &up_log, &up_arr), ("down", &down_log, &down_arr)] {
        let (got, sent) = during(log, arr);
        assert!(
            sent > 3000 && got * 100 >= sent * 99,
            "{dir}: {got}/{sent} during the outage"
        );
        let (got, sent) = after(log, arr);
        assert!(
            sent > 500 && got == sent,
            "{dir}: {got}/{sent} after the return"
        );
    }
    // The subflow survived: one connection, path A never lost at the client.
    assert_eq!(
        server["connections"].as_array().map(|c| c.len()),
        Some(1),
        "{server}"
    );
    assert_eq!(
        client["configured_paths"][0]["lost_subflows"].as_u64(),
        Some(0),
        "{client}"
    );
}
