//! The Prometheus endpoint's content: the status document (`mpdccp status
//! --json`) as OpenMetrics text, encoded by the `prometheus-client` crate.
//!
//! The kind of each number comes from the document's types (`status.rs`),
//! never from its name or JSON shape: a [`Counters`] group (the core's
//! `ConnStats`, `PathStats`, the reorderer's counts, `EndpointStats`, the
//! daemon's `DaemonStats`) gives counters, `mpdccp_<section>_<name>_total`;
//! an entry's `gauges()` give gauges (windows, RTTs, rates, queue lengths,
//! states as 0/1; the head's: `uptime_s`, `tun_mtu`, ...). Every family
//! has a `# HELP` line; connections and paths are labels (`conn`, and
//! `name`: a path's stable name, see `add_paths`).
//!
//! The listener thread calls [`metrics_text_of`] on the document the loop
//! hands it, so encoding never runs on the packet path. A fresh registry per
//! scrape holds the snapshot: the values are the daemon's own counters, read
//! at one instant, not counters this module increments.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Deserialize;
use serde_json::Value;

use super::status::{ConnStatus, Count, Counters, PathStatus, StatusHead};

#[path = "metrics_help.rs"]
mod metrics_help;

/// Content type of [`metrics_text`] (OpenMetrics 1.0, which Prometheus
/// scrapes natively).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(String, String)>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}

/// One sample: its kind is its field's type in `status.rs` (a count of a
/// [`Counters`] group, or a number an entry's `gauges` lists).
#[derive(Clone, Copy)]
enum Sample {
    Counter(u64),
    Gauge(f64),
}

/// The samples of one family before encoding.
struct Fam {
    kind: Kind,
    help: String,
    samples: Vec<(Labels, f64)>,
}

/// Families by name (sorted: a stable output).
#[derive(Default)]
struct Families(BTreeMap<String, Fam>);

impl Families {
    /// Adds one sample of `value` to the family of `name` in base units
    /// (`metrics_help`: `srtt_ms` becomes `srtt_seconds`, the value
    /// scaled); its HELP is written for it or built from `what` (the
    /// section) and `key`. A name already used by the other kind is
    /// skipped rather than emitting an invalid exposition.
    fn add(&mut self, name: &str, what: &str, key: &str, labels: &Labels, value: Sample) {
        let (name, factor) = metrics_help::base_unit(&metric_name(name));
        let (kind, v) = match value {
            Sample::Counter(n) => (Kind::Counter, (n as f64 * factor).round()),
            // Not a number (JSON has none for it): no sample.
            Sample::Gauge(x) if !x.is_finite() => return,
            Sample::Gauge(x) => (Kind::Gauge, x * factor),
        };
        let fam = self.0.entry(name).or_insert_with_key(|name| Fam {
            kind,
            help: metrics_help::help_for(name, what, key, kind == Kind::Counter),
            samples: Vec::new(),
        });
        if fam.kind == kind {
            fam.samples.push((labels.clone(), v));
        }
    }

    /// A group of counters, as `<prefix>_<key>` (a nested group's as
    /// `<prefix>_<key>_<key2>`).
    fn add_counters(&mut self, prefix: &str, what: &str, labels: &Labels, c: &Counters) {
        for (k, count) in &c.0 {
            match count {
                Count::N(n) => {
                    let name = format!("{prefix}_{k}");
                    self.add(&name, what, k, labels, Sample::Counter(*n));
                }
                Count::Group(g) => {
                    for (k2, n) in g {
                        let name = format!("{prefix}_{k}_{k2}");
                        self.add(&name, what, k2, labels, Sample::Counter(*n));
                    }
                }
                Count::Other(_) => {}
            }
        }
    }

    /// An entry's gauges (its `gauges` method), as `<prefix>_<key>` (the
    /// head's as `<key>`: no prefix); `None` is not a sample.
    fn add_gauges(
        &mut self,
        prefix: &str,
        what: &str,
        labels: &Labels,
        gauges: &[(&str, Option<f64>)],
    ) {
        for (k, v) in gauges {
            if let Some(v) = v {
                let name = match prefix {
                    "" => (*k).to_owned(),
                    p => format!("{p}_{k}"),
                };
                self.add(&name, what, k, labels, Sample::Gauge(*v));
            }
        }
    }

    fn encode(self) -> String {
        let mut registry = Registry::with_prefix("mpdccp");
        for (name, fam) in self.0 {
            // Families without labels are single metrics (no `{}`).
            let unlabelled = match fam.samples.as_slice() {
                [(l, _)] => l.is_empty(),
                _ => false,
            };
            match (fam.kind, unlabelled) {
                (Kind::Counter, true) => {
                    let c = Counter::<u64>::default();
                    c.inc_by(fam.samples[0].1 as u64);
                    registry.register(name, fam.help, c);
                }
                (Kind::Gauge, true) => {
                    let g = Gauge::<f64, AtomicU64>::default();
                    g.set(fam.samples[0].1);
                    registry.register(name, fam.help, g);
                }
                (Kind::Counter, false) => {
                    let f = Family::<Labels, Counter>::default();
                    for (l, v) in &fam.samples {
                        f.get_or_create(l).inc_by(*v as u64);
                    }
                    registry.register(name, fam.help, f);
                }
                (Kind::Gauge, false) => {
                    let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
                    for (l, v) in &fam.samples {
                        f.get_or_create(l).set(*v);
                    }
                    registry.register(name, fam.help, f);
                }
            }
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &registry);
        out
    }
}

/// A metric name from a JSON key: `[a-zA-Z0-9_]`, anything else becomes `_`.
fn metric_name(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// A label value escaped for the exposition format (the encoder writes
/// values verbatim).
fn label_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn label(key: &str, value: &str) -> (String, String) {
    (key.to_owned(), label_value(value))
}

/// The OpenMetrics text of a status document given as JSON (`mpdccp
/// status --json`); a connection entry that is not one is left out.
pub fn metrics_text(status: &Value) -> String {
    let head = StatusHead::deserialize(status).unwrap_or_default();
    let conns = status["connections"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let typed = conns.iter().filter_map(|c| ConnStatus::deserialize(c).ok());
    metrics_text_of(&head, typed)
}

/// The OpenMetrics text of a document given as its head and its
/// connections one at a time, so a caller holding them serialized parses
/// one at a time (`status_doc.rs`).
pub fn metrics_text_of(head: &StatusHead, connections: impl Iterator<Item = ConnStatus>) -> String {
    let mut f = Families::default();
    let none = Labels::new();
    f.add_gauges("", "daemon status", &none, &head.gauges());
    f.add_counters(
        "daemon",
        "daemon counter (DaemonStats)",
        &none,
        &head.daemon,
    );
    if let Some(c) = &head.ops {
        let what = "operations endpoints (status documents the packet loop built)";
        f.add_counters("ops", what, &none, c);
    }
    if let Some(c) = &head.endpoint {
        f.add_counters(
            "endpoint",
            "server endpoint counter (EndpointStats)",
            &none,
            c,
        );
    }
    for p in head.configured_paths.iter().flatten() {
        let l = vec![label("name", &p.name)];
        let what = "configured client path";
        f.add_gauges("configured_path", what, &l, &p.gauges());
    }
    for c in connections {
        add_connection(&mut f, &c);
    }
    f.encode()
}

/// The labels of a connection's series: its handle and, once a handshake
/// proved who it is (authenticated modes), the peer's configured name.
fn conn_labels(c: &ConnStatus) -> Labels {
    let mut l = vec![label("conn", &c.handle.to_string())];
    if let Some(peer) = &c.peer.identity {
        l.push(label("peer", peer));
    }
    l
}

/// An info metric (value 1) whose labels are `labels`: settings as
/// Prometheus shows configuration (`*_info`).
fn add_info(f: &mut Families, name: &str, what: &str, base: &Labels, labels: &[(&str, String)]) {
    if labels.is_empty() {
        return;
    }
    let mut l = base.clone();
    l.extend(labels.iter().map(|(k, v)| label(k, v)));
    f.add(name, what, "info", &l, Sample::Gauge(1.0));
}

fn add_connection(f: &mut Families, c: &ConnStatus) {
    let cl = conn_labels(c);
    f.add_gauges("conn", "connection", &cl, &c.gauges());
    let what = "connection settings in force (labels; value 1)";
    add_info(f, "connection_info", what, &cl, &c.settings.labels());
    f.add_counters("conn", "connection counter (ConnStats)", &cl, &c.stats);
    if let Some(p) = &c.plpmtu_stats {
        f.add_counters("plpmtu", "DPLPMTUD counter (PlpmtuStats, RFC 8899)", &cl, p);
    }
    let what = "receiver reordering (ReorderStats)";
    f.add_counters("reorder", what, &cl, &c.reorder.counters);
    f.add_gauges("reorder", what, &cl, &c.reorder.gauges());
    add_paths(f, &cl, &c.paths);
}

/// Paths are labelled by their stable name, not the subflow id a rejoin
/// changes: the subflows of one name are one series. Counters
/// are summed over them (a closed subflow's counts stay in while the core
/// keeps it); gauges come from the subflow in use (the first Active one,
/// else the newest); `path_subflows` says how many there were. A path
/// without a name (none configured) is labelled `id<N>`.
fn add_paths(f: &mut Families, conn: &Labels, paths: &[PathStatus]) {
    let mut by_name: BTreeMap<String, Vec<&PathStatus>> = BTreeMap::new();
    for p in paths {
        let name = match &p.name {
            Some(n) => n.clone(),
            None => format!("id{}", p.id),
        };
        by_name.entry(name).or_default().push(p);
    }
    for (name, subs) in by_name {
        let mut pl = conn.clone();
        pl.push(label("name", &name));
        let Some(current) = subs.iter().find(|p| p.is_active()).or(subs.last()) else {
            continue;
        };
        let active = Sample::Gauge(f64::from(u8::from(current.is_active())));
        f.add("path_active", "path", "active", &pl, active);
        let n = Sample::Gauge(subs.len() as f64);
        f.add("path_subflows", "path", "subflows", &pl, n);
        let info: Vec<(&str, String)> = current
            .transport
            .iter()
            .map(|t| ("transport", t.clone()))
            .collect();
        let what = "path settings in force (labels; value 1)";
        add_info(f, "path_info", what, &pl, &info);
        f.add_gauges("path", "path", &pl, &current.gauges());
        let mut sums: BTreeMap<String, u64> = BTreeMap::new();
        for p in &subs {
            for (k, n) in p.stats.iter().flat_map(Counters::flat) {
                *sums.entry(k).or_default() += n;
            }
        }
        let what = "path counter (PathStats, summed over the path's subflows)";
        for (k, n) in sums {
            f.add(&format!("path_{k}"), what, &k, &pl, Sample::Counter(n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counters_are_counters_with_help_and_labels() {
        let st = json!({"daemon": {"udp_rx_malformed": 3, "tun_offload": {"tso_frames": 2}},
            "connections": [
            {"handle": 0, "established": true, "send_queue_pkts": 0, "stats": {"rx_bytes": 5},
             "reorder": {"late": 1, "held_pkts": 4},
             "paths": [{"id": 1, "name": "p1", "cwnd_pkts": 10, "stats": {"lost_pkts": 2}}]}]});
        let t = metrics_text(&st);
        for want in [
            "# HELP mpdccp_daemon_udp_rx_malformed Daemon counter (DaemonStats), field udp_rx_malformed: count of UDP received malformed.\n\
             # TYPE mpdccp_daemon_udp_rx_malformed counter\n\
             mpdccp_daemon_udp_rx_malformed_total 3\n",
            "mpdccp_daemon_tun_offload_tso_frames_total 2\n",
            "mpdccp_conn_rx_bytes_total{conn=\"0\"} 5\n",
            "# TYPE mpdccp_reorder_late counter\nmpdccp_reorder_late_total{conn=\"0\"} 1\n",
            "# TYPE mpdccp_reorder_held_pkts gauge\nmpdccp_reorder_held_pkts{conn=\"0\"} 4.0\n",
            "# TYPE mpdccp_path_lost_pkts counter\n\
             mpdccp_path_lost_pkts_total{conn=\"0\",name=\"p1\"} 2\n",
            "# TYPE mpdccp_path_cwnd_pkts gauge\n\
             mpdccp_path_cwnd_pkts{conn=\"0\",name=\"p1\"} 10.0\n",
            "mpdccp_conn_established{conn=\"0\"} 1.0\n",
        ] {
            assert!(t.contains(want), "missing {want:?} in\n{t}");
        }
        assert!(t.ends_with("# EOF\n"), "{t}");
    }

    #[test]
    fn families_are_grouped_labels_escaped_and_nulls_skipped() {
        let st = json!({"uptime_s": 1.5, "connections": [
            {"handle": 0, "established": true, "send_queue_pkts": 0, "stats": {}, "reorder": {},
             "paths": [{"id": 1, "name": "a\"b", "state": "Active", "cwnd_pkts": 10, "srtt_ms": null},
                       {"id": 2, "name": null, "state": "Closed", "cwnd_pkts": 4}]}]});
        let t = metrics_text(&st);
        let types: Vec<&str> = t.lines().filter(|l| l.starts_with("# TYPE")).collect();
        let mut seen = std::collections::BTreeSet::new();
        for ty in &types {
            assert!(seen.insert(*ty), "duplicate {ty}\n{t}");
        }
        assert_eq!(
            types.len(),
            t.lines().filter(|l| l.starts_with("# HELP")).count()
        );
        assert!(
            t.contains("mpdccp_path_cwnd_pkts{conn=\"0\",name=\"a\\\"b\"} 10.0\n"),
            "{t}"
        );
        assert!(
            t.contains("mpdccp_path_active{conn=\"0\",name=\"id2\"} 0.0\n"),
            "{t}"
        );
        assert!(t.contains("mpdccp_uptime_seconds 1.5\n"), "{t}");
        assert!(!t.contains("srtt_ms"), "null is not a sample: {t}");
    }

    /// Gives every value a path without an RTT sample yet lacks 100 (the
    /// test wants every family).
    fn fill_nulls(c: &mut ConnStatus) {
        c.plpmtu.get_or_insert(100);
        c.remote_ci.get_or_insert(100);
        for p in &mut c.paths {
            p.srtt_ms.get_or_insert(100.0);
            p.min_rtt_ms.get_or_insert(100.0);
            p.pacing_rate_bps.get_or_insert(100);
            p.delivery_rate_bps.get_or_insert(100);
            p.pipe_ack_pkts.get_or_insert(100);
            p.plpmtu.get_or_insert(100);
            if let Some(w) = &mut p.loss_window {
                w.ratio.get_or_insert(100.0);
            }
        }
    }

    /// Every family of a real status document (a core connection with a
    /// path, the daemon's and the endpoint's counters): a HELP that says
    /// something (not the former `section: key` placeholder), names in base
    /// units (seconds, bytes; no `_ms`, `_s`, `_bps`, `_kb`), values scaled.
    #[test]
    fn every_family_has_real_help_and_base_units() {
        use mpdccp_proto::conn::TunnelSettings;
        use mpdccp_proto::{Connection, Instant, PathConfig, PathId, Role};
        let now = Instant::ZERO;
        let mut conn = Connection::new(
            Role::Client,
            TunnelSettings::default().connection_config(1280),
            now,
            1,
        );
        conn.add_path(now, PathId(0), PathConfig::default())
            .unwrap();
        let label = |_| super::super::ops::PathLabel {
            name: Some("dsl".into()),
            remote: None,
            transport: Some("udp"),
        };
        let mut c = super::super::ops::conn_status(&conn, 0, &label);
        fill_nulls(&mut c);
        let st = json!({
            "uptime_s": 2.5, "tun_mtu": 1280,
            "daemon": super::super::ops::stats_json(&super::super::DaemonStats::default()),
            "endpoint": super::super::ops::stats_json(&mpdccp_proto::conn::EndpointStats::default()),
            "connections": [c],
        });
        let t = metrics_text(&st);
        let helps: Vec<(&str, &str)> = t
            .lines()
            .filter_map(|l| l.strip_prefix("# HELP mpdccp_"))
            .map(|l| l.split_once(' ').expect("name and text"))
            .collect();
        assert!(helps.len() > 100, "{} families", helps.len());
        for (name, help) in &helps {
            let tail = help.rsplit(": ").next().unwrap_or(help);
            assert!(
                help.split_whitespace().count() >= 4 && tail.contains(' '),
                "placeholder HELP for {name}: {help:?}"
            );
            for bad in metrics_help::NON_BASE_SUFFIXES {
                assert!(!name.ends_with(bad), "{name} is not in base units");
            }
            if help.ends_with(", seconds.") || help.ends_with(", seconds") {
                assert!(name.ends_with("_seconds"), "{name}: {help}");
            }
            if help.contains("bytes per second") {
                assert!(name.ends_with("_bytes_per_second"), "{name}: {help}");
            }
        }
        // The unit keys of the document, converted (nulls became 100).
        for want in [
            "mpdccp_uptime_seconds 2.5\n",
            "mpdccp_path_srtt_seconds{conn=\"0\",name=\"dsl\"} 0.1\n",
            "mpdccp_path_min_rtt_seconds{conn=\"0\",name=\"dsl\"} 0.1\n",
            "mpdccp_path_pacing_rate_bytes_per_second{conn=\"0\",name=\"dsl\"} 12.5\n",
            "mpdccp_path_delivery_rate_bytes_per_second{conn=\"0\",name=\"dsl\"} 12.5\n",
            "mpdccp_path_loss_window_ratio{conn=\"0\",name=\"dsl\"}",
            "mpdccp_path_loss_window_window_seconds{conn=\"0\",name=\"dsl\"} 10.0\n",
            "mpdccp_path_lost_pkts_total{conn=\"0\",name=\"dsl\"} 0\n",
            "mpdccp_path_rto_lost_pkts_total{conn=\"0\",name=\"dsl\"} 0\n",
            "mpdccp_path_tx_data_pkts_total{conn=\"0\",name=\"dsl\"} 0\n",
        ] {
            assert!(t.contains(want), "missing {want:?} in\n{t}");
        }
    }

    /// The settings a connection runs with are in its status
    /// entry and in `mpdccp_connection_info`'s labels; the peer's name labels
    /// every series of the connection; a path's transport is in `path_info`.
    #[test]
    fn effective_settings_are_an_info_metric_labelled_with_the_peer() {
        use mpdccp_proto::conn::TunnelSettings;
        use mpdccp_proto::{Connection, Instant, PathConfig, PathId, Role};
        let now = Instant::ZERO;
        let t = TunnelSettings::default();
        let mut conn = Connection::new(Role::Client, t.connection_config(1280), now, 1);
        conn.add_path(now, PathId(0), PathConfig::default())
            .unwrap();
        let label = |_| super::super::ops::PathLabel {
            name: Some("cpe-1/p0".into()),
            remote: Some("192.0.2.7:40000".into()),
            transport: Some("udp"),
        };
        let mut c = super::super::ops::conn_status(&conn, 4, &label);
        c.peer.identity = Some("cpe-1".into());
        c.settings.auth = Some("authenticated".into());
        let c = serde_json::to_value(&c).unwrap();
        let s = &c["settings"];
        assert_eq!(s["cc"], t.cc.name());
        assert_eq!(s["scheduler"], t.scheduler.name());
        assert_eq!(s["reorder"], t.reorder.name());
        assert_eq!(s["aqm"], t.aqm.name());
        assert_eq!(s["retransmit_lost"], t.retransmit_lost);
        assert_eq!(s["wire_profile"], "rfc9897");
        let text = metrics_text(&json!({"connections": [c]}));
        let info = text
            .lines()
            .find(|l| l.starts_with("mpdccp_connection_info{"))
            .unwrap_or_else(|| panic!("no connection_info in\n{text}"));
        for want in [
            "conn=\"4\"".to_string(),
            "peer=\"cpe-1\"".into(),
            format!("cc=\"{}\"", t.cc.name()),
            format!("scheduler=\"{}\"", t.scheduler.name()),
            format!("reorder=\"{}\"", t.reorder.name()),
            format!("aqm=\"{}\"", t.aqm.name()),
            "auth=\"authenticated\"".into(),
            "wire_profile=\"rfc9897\"".into(),
            "payload_protection=\"false\"".into(),
        ] {
            assert!(info.contains(&want), "{want} not in {info}");
        }
        assert!(info.ends_with("} 1.0"), "{info}");
        assert!(
            text.contains("mpdccp_path_info{conn=\"4\",peer=\"cpe-1\",name=\"cpe-1/p0\",transport=\"udp\"} 1.0\n"),
            "{text}"
        );
        assert!(
            text.contains("mpdccp_path_cwnd_pkts{conn=\"4\",peer=\"cpe-1\",name=\"cpe-1/p0\"}"),
            "{text}"
        );
        // Strings never become samples of their own.
        assert!(!text.contains("mpdccp_path_transport"), "{text}");
    }

    /// Every `mpdccp_*` name in an expression of the Grafana dashboard
    /// (`deploy/grafana/mpdccp-dashboard.json`) is a sample the daemon
    /// exports, taken from a status document as a server builds it (a
    /// connection with a peer, its settings and a path; the daemon's and the
    /// endpoint's counters); every `{{label}}` of a legend is a label of one
    /// of the expression's samples (Prometheus adds `instance` and `job`).
    #[test]
    fn the_grafana_dashboard_names_only_exported_metrics() {
        use mpdccp_proto::conn::TunnelSettings;
        use mpdccp_proto::{Connection, Instant, PathConfig, PathId, Role};
        use std::collections::{BTreeMap, BTreeSet};
        let now = Instant::ZERO;
        let mut conn = Connection::new(
            Role::Client,
            TunnelSettings::default().connection_config(1280),
            now,
            1,
        );
        conn.add_path(now, PathId(0), PathConfig::default())
            .unwrap();
        let label = |_| super::super::ops::PathLabel {
            name: Some("cpe-1/p0".into()),
            remote: Some("192.0.2.7:40000".into()),
            transport: Some("udp"),
        };
        let mut c = super::super::ops::conn_status(&conn, 0, &label);
        fill_nulls(&mut c);
        c.peer.identity = Some("cpe-1".into());
        c.settings.auth = Some("authenticated".into());
        let st = json!({
            "uptime_s": 2.5, "tun_mtu": 1280,
            "daemon": super::super::ops::stats_json(&super::super::DaemonStats::default()),
            "endpoint": super::super::ops::stats_json(&mpdccp_proto::conn::EndpointStats::default()),
            "connections": [c],
        });
        let text = metrics_text(&st);
        // Sample name → the label names it carries.
        let mut exported: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let labels = exported.entry(line[..name_end].to_owned()).or_default();
            if let Some(body) = line[name_end..].strip_prefix('{') {
                for kv in body.split("\",") {
                    if let Some((k, _)) = kv.split_once('=') {
                        labels.insert(k.trim_start_matches(',').to_owned());
                    }
                }
            }
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/grafana/mpdccp-dashboard.json"
        );
        let dash: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("dashboard"))
            .expect("dashboard is JSON");
        let mut targets = Vec::new();
        fn walk<'a>(v: &'a Value, out: &mut Vec<(&'a str, &'a str)>) {
            match v {
                Value::Object(o) => {
                    for key in ["expr", "query"] {
                        if let Some(e) = o.get(key).and_then(Value::as_str) {
                            let legend = o.get("legendFormat").and_then(Value::as_str);
                            out.push((e, legend.unwrap_or("")));
                        }
                    }
                    o.values().for_each(|x| walk(x, out));
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
                _ => {}
            }
        }
        walk(&dash, &mut targets);
        let panels = dash["panels"].as_array().expect("panels");
        assert!(panels.len() >= 10, "{} panels", panels.len());
        let mut names_seen = BTreeSet::new();
        for (expr, legend) in &targets {
            let names: Vec<&str> = expr
                .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                .filter(|w| w.starts_with("mpdccp_"))
                .collect();
            if *expr != "prometheus" {
                assert!(!names.is_empty(), "no mpdccp metric in {expr:?}");
            }
            let mut labels: BTreeSet<String> = ["instance", "job"].map(String::from).into();
            for n in &names {
                let l = exported
                    .get(*n)
                    .unwrap_or_else(|| panic!("{expr:?}: {n} is not exported"));
                labels.extend(l.iter().cloned());
                names_seen.insert(*n);
            }
            for part in legend.split("{{").skip(1) {
                let l = part.split("}}").next().unwrap().trim();
                assert!(
                    labels.contains(l),
                    "{expr:?}: legend label {l} not on {names:?}"
                );
            }
        }
        assert!(names_seen.len() >= 20, "{names_seen:?}");
        for n in [
            "mpdccp_connection_info",
            "mpdccp_path_loss_window_ratio",
            "mpdccp_path_srtt_seconds",
        ] {
            assert!(names_seen.contains(n), "{n} not on the dashboard");
        }
    }

    /// A path that rejoined (a closed subflow and its successor, same
    /// name) is one series: counters summed, gauges of the active subflow.
    #[test]
    fn a_rejoined_path_keeps_its_name_and_its_counts() {
        let st = json!({"connections": [
            {"handle": 3, "stats": {}, "reorder": {}, "paths": [
                {"id": 0, "name": "lte", "state": "Closed", "cwnd_pkts": 2, "stats": {"tx_data_pkts": 40}},
                {"id": 4, "name": "lte", "state": "Active", "cwnd_pkts": 12, "stats": {"tx_data_pkts": 2}},
                {"id": 1, "name": "dsl", "state": "Active", "cwnd_pkts": 9, "stats": {"tx_data_pkts": 7}}]}]});
        let t = metrics_text(&st);
        for want in [
            "mpdccp_path_tx_data_pkts_total{conn=\"3\",name=\"lte\"} 42\n",
            "mpdccp_path_tx_data_pkts_total{conn=\"3\",name=\"dsl\"} 7\n",
            "mpdccp_path_cwnd_pkts{conn=\"3\",name=\"lte\"} 12.0\n",
            "mpdccp_path_subflows{conn=\"3\",name=\"lte\"} 2.0\n",
            "mpdccp_path_active{conn=\"3\",name=\"lte\"} 1.0\n",
        ] {
            assert!(t.contains(want), "missing {want:?} in\n{t}");
        }
        assert!(!t.contains("path=\""), "no subflow-id label: {t}");
    }
}
