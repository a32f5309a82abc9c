//! The status document for humans, as `mpdccp status` prints it: a table
//! per connection (per path: state, cwnd, srtt, rate, loss, packets) and the
//! counters that are not zero. Here, not in the CLI, so the lab's benchmark
//! prints the same view when a run through the tunnel fails.

use std::fmt::Write as _;

use super::status::{ConfiguredPath, ConnStatus, Count, Counters, PathStatus, Settings, Status};

/// `left` left-aligned first columns, right-aligned numbers, widths from
/// content.
fn table(out: &mut String, indent: &str, left: usize, rows: &[Vec<String>]) {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let mut line = String::from(indent);
        for (c, cell) in r.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            if c < left {
                let _ = write!(line, "{cell:<w$}", w = width[c]);
            } else {
                let _ = write!(line, "{cell:>w$}", w = width[c]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// A value or `-` when there is none.
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("-".into(), |x| x.to_string())
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// `name=value` for every non-zero item, wrapped.
fn nonzero(out: &mut String, title: &str, items: impl IntoIterator<Item = (String, u64)>) {
    let items: Vec<String> = items
        .into_iter()
        .filter(|&(_, n)| n != 0)
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "  {title}:");
    let mut line = String::from("   ");
    for it in items {
        if line.len() + it.len() > 96 {
            let _ = writeln!(out, "{line}");
            line = String::from("   ");
        }
        line.push(' ');
        line.push_str(&it);
    }
    let _ = writeln!(out, "{line}");
}

/// A counter group's own counts (a nested group, e.g. the daemon's
/// `tun_offload`, is left to `--json`).
fn counts(c: &Counters) -> impl Iterator<Item = (String, u64)> + '_ {
    c.0.iter().filter_map(|(k, v)| match v {
        Count::N(n) => Some((k.clone(), *n)),
        _ => None,
    })
}

/// The connection's settings in force, one line: the names as
/// `key=value`, the switches that are on by name.
fn settings_line(out: &mut String, s: &Settings) {
    let auth = s.auth.clone().unwrap_or_default();
    let names = [
        ("auth", &auth),
        ("cc", &s.cc),
        ("scheduler", &s.scheduler),
        ("reorder", &s.reorder),
        ("aqm", &s.aqm),
        ("wire_profile", &s.wire_profile),
    ];
    let mut items: Vec<String> = names
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let switches = [
        ("cwnd_validation", s.cwnd_validation),
        ("payload_protection", s.payload_protection),
        ("plpmtud", s.plpmtud),
        ("retransmit_lost", s.retransmit_lost),
    ];
    items.extend(
        switches
            .iter()
            .filter(|(_, on)| *on)
            .map(|(k, _)| k.to_string()),
    );
    if !items.is_empty() {
        let _ = writeln!(out, "  settings: {}", items.join(" "));
    }
}

fn configured_paths(out: &mut String, ps: &[ConfiguredPath]) {
    let mut rows = vec![[
        "path",
        "interface",
        "remote",
        "usable",
        "subflow",
        "established",
        "lost",
    ]
    .map(String::from)
    .to_vec()];
    for p in ps {
        rows.push(vec![
            p.name.clone(),
            p.interface.clone(),
            p.remote.clone(),
            yes_no(p.usable),
            opt(p.path_id),
            yes_no(p.established),
            p.lost_subflows.to_string(),
        ]);
    }
    table(out, "", 3, &rows);
}

fn path_row(p: &PathStatus) -> Vec<String> {
    vec![
        p.id.to_string(),
        p.name.clone().unwrap_or_else(|| "-".into()),
        p.remote.clone().unwrap_or_else(|| "-".into()),
        p.transport.clone().unwrap_or_else(|| "-".into()),
        p.state.clone(),
        p.priority.to_string(),
        p.cwnd_pkts.to_string(),
        p.in_flight_pkts.to_string(),
        opt(p.srtt_ms.map(|x| format!("{x:.1}"))),
        opt(p
            .delivery_rate_bps
            .map(|r| format!("{:.2}", r as f64 / 1e6))),
        // Loss over the last ~10 s (the per-ack `loss_rate` forgets within
        // ~64 packets); `-` when nothing was sent in that window.
        opt(p
            .loss_window
            .as_ref()
            .and_then(|w| w.ratio)
            .map(|r| format!("{:.2}", r * 100.0))),
        opt(p.stats.as_ref().map(|s| s.get("tx_pkts"))),
        opt(p.stats.as_ref().map(|s| s.get("rx_pkts"))),
    ]
}

fn connection(out: &mut String, c: &ConnStatus) {
    let state = if c.closed {
        "closed"
    } else if c.established {
        "established"
    } else {
        "handshaking"
    };
    // The peer's configured name once its handshake proved it.
    let who = c
        .peer
        .identity
        .as_ref()
        .map_or(String::new(), |n| format!(" ({n})"));
    let _ = writeln!(
        out,
        "\nconnection {}{who}: {state}, {}  ci {} / peer {}  queue {} pkts  delivered {} pkts  lost {}",
        c.handle,
        match c.multipath {
            Some(true) => "multipath",
            Some(false) => "single-path fallback",
            None => "not negotiated",
        },
        c.local_ci,
        opt(c.remote_ci),
        c.send_queue_pkts,
        c.stats.get("delivered_pkts"),
        c.stats.get("lost_pkts"),
    );
    settings_line(out, &c.settings);
    let mut rows = vec![[
        "id",
        "name",
        "remote",
        "via",
        "state",
        "prio",
        "cwnd (pkts)",
        "inflight (pkts)",
        "srtt (ms)",
        "rate (Mbit/s)",
        "loss 10s (%)",
        "tx (pkts)",
        "rx (pkts)",
    ]
    .map(String::from)
    .to_vec()];
    rows.extend(c.paths.iter().map(path_row));
    table(out, "  ", 5, &rows);
    nonzero(out, "counters", counts(&c.stats));
    let held = [
        ("held_bytes".to_string(), c.reorder.held_bytes),
        ("held_pkts".to_string(), c.reorder.held_pkts),
    ];
    let reorder: std::collections::BTreeMap<String, u64> =
        counts(&c.reorder.counters).chain(held).collect();
    nonzero(out, "reordering", reorder);
}

/// The status document for humans.
pub fn render(status: &Status) -> String {
    let v = &status.head;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} up {:.0} s  tun {} mtu {}",
        v.role, v.uptime_s, v.tun.name, v.tun.mtu
    );
    if let Some(ps) = &v.configured_paths {
        configured_paths(&mut out, ps);
    }
    if status.connections.is_empty() {
        let _ = writeln!(out, "no connections");
    }
    for c in &status.connections {
        connection(&mut out, c);
    }
    let _ = writeln!(out);
    nonzero(&mut out, "daemon", counts(&v.daemon));
    if let Some(e) = &v.endpoint {
        nonzero(&mut out, "endpoint", counts(e));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[test]
    fn table_lines_up_and_shows_nonzero_counters() {
        let v = json!({"role": "client", "uptime_s": 12.3, "tun": {"name": "mpd0", "mtu": 1336},
            "configured_paths": [{"name": "wifi", "interface": "wlan0", "remote": "192.0.2.1:6773",
                "usable": true, "path_id": 3, "established": true, "lost_subflows": 1}],
            "daemon": {"udp_rx_truncated": 0, "path_down_events": 2},
            "connections": [{"handle": 0, "established": true, "closed": false, "multipath": true,
                "peer": {"identity": "cpe-berlin"},
                "settings": {"cc": "ccid2", "scheduler": "acpf", "reorder": "per-flow",
                    "aqm": "fq_codel", "wire_profile": "rfc9897", "auth": "authenticated",
                    "retransmit_lost": true, "payload_protection": false, "mss_bytes": 1400},
                "local_ci": 5, "remote_ci": 6, "send_queue_pkts": 0,
                "stats": {"delivered_pkts": 10, "lost_pkts": 0, "removeaddr_sent": 1},
                "reorder": {},
                "paths": [
                    {"id": 0, "name": "lte", "transport": "udp", "state": "Active", "priority": 3, "cwnd_pkts": 10,
                     "in_flight_pkts": 2, "srtt_ms": 31.25, "delivery_rate_bps": 9_500_000,
                     "loss_rate": 0.001, "loss_window": {"ratio": 0.0125},
                     "stats": {"tx_pkts": 1000, "rx_pkts": 500}},
                    {"id": 3, "name": "wifi", "state": "Establishing", "priority": 3, "cwnd_pkts": 4,
                     "in_flight_pkts": 0, "srtt_ms": null, "delivery_rate_bps": null,
                     "loss_rate": 0.0, "stats": {"tx_pkts": 1, "rx_pkts": 0}}]}]});
        let s = render(&Status::deserialize(&v).unwrap());
        let lines: Vec<&str> = s.lines().collect();
        let head = lines
            .iter()
            .position(|l| l.contains("srtt (ms)"))
            .expect("header");
        // Columns line up: every row of the path table has the same width.
        let w = lines[head].len();
        assert_eq!(lines[head + 1].len(), w, "{s}");
        assert_eq!(lines[head + 2].len(), w, "{s}");
        assert!(
            lines[head + 1].contains("31.2")
                && lines[head + 1].contains("9.50")
                && lines[head + 1].contains("1.25"),
            "{s}"
        );
        assert!(
            lines[head + 2].contains("Establishing") && lines[head + 2].contains(" -"),
            "{s}"
        );
        assert!(
            s.contains("connection 0 (cpe-berlin): established, multipath"),
            "{s}"
        );
        assert!(
            s.contains(
                "settings: auth=authenticated cc=ccid2 scheduler=acpf reorder=per-flow \
                 aqm=fq_codel wire_profile=rfc9897 retransmit_lost\n"
            ),
            "{s}"
        );
        assert!(lines[head + 1].contains(" udp "), "{s}");
        assert!(
            s.contains("removeaddr_sent=1") && s.contains("path_down_events=2"),
            "{s}"
        );
        assert!(!s.contains("udp_rx_truncated"), "zero counters hidden: {s}");
        assert!(s.contains("wlan0") && s.contains("192.0.2.1:6773"), "{s}");
    }
}
