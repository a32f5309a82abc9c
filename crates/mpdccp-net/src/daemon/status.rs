//! The status document's types, one set for the daemon that builds them,
//! `mpdccp status` that prints them and the Prometheus encoder
//! (`metrics.rs`) that exports them. Whether a number is a counter or a
//! gauge is said here, by its type: a [`Counters`] group holds counters
//! (a stats struct of the core or the daemon, every field a count that only
//! grows), every other number of an entry is listed by its `gauges`
//! method. The JSON field names are the document's (`mpdccp status
//! --json`, docs/OPERATIONS.md), so a reader of either sees the same names.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::config::Transport;

/// One field of a [`Counters`] group: a count, or a group of counts one
/// level down (the daemon's `tun_offload`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Count {
    N(u64),
    Group(BTreeMap<String, u64>),
    /// Anything else a document holds there (not a count; not exported).
    Other(serde_json::Value),
}

/// A group of counters by field name: a stats struct through its
/// `Serialize`, so every counter the core gains shows up without a list
/// kept here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Counters(pub BTreeMap<String, Count>);

impl Counters {
    /// The counters of `stats` (a struct of `u64` fields, and of such
    /// structs one level down; anything else is left out: `counts.rs`).
    pub fn of<T: Serialize>(stats: &T) -> Counters {
        let counts = super::counts::counts_of(stats);
        let top = counts.top.into_iter().map(|(k, n)| (k, Count::N(n)));
        let groups = counts.groups.into_iter().map(|(k, g)| (k, Count::Group(g)));
        Counters(top.chain(groups).collect())
    }

    /// A group of the counts `pairs` (counters a struct of the core keeps
    /// under other names, or the daemon's own).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> Counters {
        let counts = pairs.into_iter().map(|(k, n)| (k.to_owned(), Count::N(n)));
        Counters(counts.collect())
    }

    /// Sets the count `name` to `n`.
    pub fn set(&mut self, name: &str, n: u64) {
        self.0.insert(name.to_owned(), Count::N(n));
    }

    /// A count by name (0 when the group has none).
    pub fn get(&self, name: &str) -> u64 {
        match self.0.get(name) {
            Some(Count::N(n)) => *n,
            _ => 0,
        }
    }

    /// Every count as `(name, value)`; a nested group's as `key_key2`.
    pub fn flat(&self) -> Vec<(String, u64)> {
        let mut out = Vec::with_capacity(self.0.len());
        for (k, c) in &self.0 {
            match c {
                Count::N(n) => out.push((k.clone(), *n)),
                Count::Group(g) => out.extend(g.iter().map(|(k2, n)| (format!("{k}_{k2}"), *n))),
                Count::Other(_) => {}
            }
        }
        out
    }
}

/// Counters only grow, so the counts of several workers add up: count by
/// count (a nested group key by key), a count only one side has is kept.
impl std::ops::AddAssign<&Counters> for Counters {
    fn add_assign(&mut self, other: &Counters) {
        for (k, c) in &other.0 {
            match (self.0.get_mut(k), c) {
                (Some(Count::N(a)), Count::N(b)) => *a = a.saturating_add(*b),
                (Some(Count::Group(a)), Count::Group(b)) => {
                    for (k2, n) in b {
                        let e = a.entry(k2.clone()).or_default();
                        *e = e.saturating_add(*n);
                    }
                }
                (Some(_), _) => {}
                (None, c) => {
                    self.0.insert(k.clone(), c.clone());
                }
            }
        }
    }
}

/// `a += b` for optional groups (a group only one side has is kept).
fn add_opt(a: &mut Option<Counters>, b: &Option<Counters>) {
    match (a.as_mut(), b) {
        (Some(a), Some(b)) => *a += b,
        (None, Some(b)) => *a = Some(b.clone()),
        (_, None) => {}
    }
}

/// The settings a connection runs with, as the configuration names them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub cc: String,
    pub scheduler: String,
    pub reorder: String,
    /// The `[tunnel]` table's `aqm`: `fq_codel`, `codel` or `none`.
    pub aqm: String,
    pub wire_profile: String,
    pub payload_protection: bool,
    pub retransmit_lost: bool,
    pub cwnd_validation: bool,
    pub plpmtud: bool,
    pub mss_bytes: u32,
    /// The daemon's mode (`open`, `authenticated`, `protected`); the core
    /// does not know it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
}

impl Settings {
    /// The settings as labels of an info metric (names sorted; the MSS is
    /// a number, not a label).
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let b = |x: bool| x.to_string();
        let mut l = vec![
            ("aqm", self.aqm.clone()),
            ("cc", self.cc.clone()),
            ("cwnd_validation", b(self.cwnd_validation)),
            ("payload_protection", b(self.payload_protection)),
            ("plpmtud", b(self.plpmtud)),
            ("reorder", self.reorder.clone()),
            ("retransmit_lost", b(self.retransmit_lost)),
            ("scheduler", self.scheduler.clone()),
            ("wire_profile", self.wire_profile.clone()),
        ];
        if let Some(a) = &self.auth {
            l.insert(1, ("auth", a.clone()));
        }
        l
    }
}

/// A path's loss over the last ~10 s, from its counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LossWindow {
    pub window_s: u64,
    pub sent_pkts: u64,
    pub lost_pkts: u64,
    /// lost / sent; `None` when nothing was sent in the window.
    pub ratio: Option<f64>,
}

/// One subflow's entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PathStatus {
    pub id: u32,
    /// The path's stable name (the client's configured name; the server's:
    /// the peer's name and path id, or the client's address).
    pub name: Option<String>,
    pub remote: Option<String>,
    /// `udp`, `dccp` or `udccp`.
    pub transport: Option<String>,
    /// `PathState` by its name (`Active`, `Establishing`, ...).
    pub state: String,
    pub priority: u8,
    pub cc_state: String,
    pub cwnd_pkts: u32,
    pub in_flight_pkts: u32,
    pub queued_pkts: u32,
    pub srtt_ms: Option<f64>,
    pub min_rtt_ms: Option<f64>,
    pub rttvar_ms: f64,
    pub pacing_rate_bps: Option<u64>,
    pub delivery_rate_bps: Option<u64>,
    /// Smoothed per acknowledgement (forgets within ~64 packets).
    pub loss_rate: f64,
    pub loss_window: Option<LossWindow>,
    /// RFC 7661 pipeACK, packets per round trip (`None`: none lately).
    pub pipe_ack_pkts: Option<u64>,
    /// RFC 8899: confirmed PLPMTU (DCCP packet bytes) and search state;
    /// `None` with DPLPMTUD off.
    pub plpmtu: Option<u32>,
    pub plpmtu_state: Option<String>,
    pub stats: Option<Counters>,
}

impl PathStatus {
    pub fn is_active(&self) -> bool {
        self.state == "Active"
    }

    /// The entry's gauges by field name (`None`: no value now).
    pub fn gauges(&self) -> Vec<(&'static str, Option<f64>)> {
        let f = |x: Option<u64>| x.map(|n| n as f64);
        let w = self.loss_window.as_ref();
        vec![
            ("cwnd_pkts", Some(f64::from(self.cwnd_pkts))),
            ("delivery_rate_bps", f(self.delivery_rate_bps)),
            ("in_flight_pkts", Some(f64::from(self.in_flight_pkts))),
            ("loss_rate", Some(self.loss_rate)),
            ("loss_window_lost_pkts", f(w.map(|w| w.lost_pkts))),
            ("loss_window_ratio", w.and_then(|w| w.ratio)),
            ("loss_window_sent_pkts", f(w.map(|w| w.sent_pkts))),
            ("loss_window_window_s", f(w.map(|w| w.window_s))),
            ("min_rtt_ms", self.min_rtt_ms),
            ("pacing_rate_bps", f(self.pacing_rate_bps)),
            ("pipe_ack_pkts", f(self.pipe_ack_pkts)),
            ("plpmtu", self.plpmtu.map(f64::from)),
            ("priority", Some(f64::from(self.priority))),
            ("queued_pkts", Some(f64::from(self.queued_pkts))),
            ("rttvar_ms", Some(self.rttvar_ms)),
            ("srtt_ms", self.srtt_ms),
        ]
    }
}

/// Who the other end of a connection is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerStatus {
    /// The configured peer a handshake proved (authenticated modes).
    pub identity: Option<String>,
    /// Its addresses, one per path.
    pub remotes: BTreeSet<String>,
}

/// The receiver's reordering: counters, and the two levels it holds now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReorderStatus {
    pub held_pkts: u64,
    pub held_bytes: u64,
    #[serde(flatten)]
    pub counters: Counters,
}

impl ReorderStatus {
    /// The levels (not counts) by field name.
    pub fn gauges(&self) -> Vec<(&'static str, Option<f64>)> {
        vec![
            ("held_bytes", Some(self.held_bytes as f64)),
            ("held_pkts", Some(self.held_pkts as f64)),
        ]
    }

    pub fn of(s: &mpdccp_proto::reorder::ReorderStats) -> ReorderStatus {
        let mut counters = Counters::of(s);
        counters.0.remove("held_pkts");
        counters.0.remove("held_bytes");
        ReorderStatus {
            held_pkts: s.held_pkts,
            held_bytes: s.held_bytes,
            counters,
        }
    }
}

/// One connection's entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConnStatus {
    /// Unique within the daemon (with workers: handle × N + worker).
    pub handle: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<usize>,
    pub peer: PeerStatus,
    pub established: bool,
    pub closed: bool,
    /// `None`: not negotiated yet; `Some(false)`: single-path fallback.
    pub multipath: Option<bool>,
    pub settings: Settings,
    pub local_ci: u32,
    pub remote_ci: Option<u32>,
    pub send_queue_pkts: usize,
    pub send_queue_flow_states: usize,
    /// The smallest confirmed PLPMTU over the paths (RFC 8899).
    pub plpmtu: Option<u32>,
    /// DPLPMTUD counters; `None` with it off.
    pub plpmtu_stats: Option<Counters>,
    pub stats: Counters,
    pub reorder: ReorderStatus,
    pub paths: Vec<PathStatus>,
}

impl ConnStatus {
    /// The entry's gauges by field name (booleans as 0/1).
    pub fn gauges(&self) -> Vec<(&'static str, Option<f64>)> {
        let b = |x: bool| Some(f64::from(u8::from(x)));
        vec![
            ("established", b(self.established)),
            ("closed", b(self.closed)),
            ("send_queue_pkts", Some(self.send_queue_pkts as f64)),
            ("plpmtu", self.plpmtu.map(f64::from)),
        ]
    }
}

/// A client's configured path (`[[path]]`) and what became of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfiguredPath {
    pub name: String,
    pub interface: String,
    pub remote: String,
    pub transport: Transport,
    pub usable: bool,
    /// The subflow it runs as now.
    pub path_id: Option<u32>,
    pub established: bool,
    pub lost_subflows: u64,
    /// The local address of its socket (`None`: no socket now).
    pub local: Option<String>,
}

impl ConfiguredPath {
    /// The entry's gauges by field name (booleans as 0/1).
    pub fn gauges(&self) -> Vec<(&'static str, Option<f64>)> {
        let b = |x: bool| Some(f64::from(u8::from(x)));
        vec![
            ("established", b(self.established)),
            ("lost_subflows", Some(self.lost_subflows as f64)),
            ("usable", b(self.usable)),
        ]
    }
}

/// The TUN interface.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TunStatus {
    pub name: String,
    pub mtu: u32,
}

/// The server's handshake gate (`auth`): open, or the authenticated
/// modes' counters (docs/SECURITY.md describes the handshake).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum AuthStatus {
    Open,
    Authenticated {
        /// Configured peers.
        peers: u64,
        /// The peers' routing counters (`None`: routes are learned).
        routes: Option<Counters>,
        gate: Counters,
        handshake: Counters,
    },
}

impl AuthStatus {
    /// Adds another worker's counters into these. `peers` is kept: every
    /// worker holds the whole configured peer table.
    fn add(&mut self, other: &AuthStatus) {
        let (
            AuthStatus::Authenticated {
                routes,
                gate,
                handshake,
                ..
            },
            AuthStatus::Authenticated {
                routes: r2,
                gate: g2,
                handshake: h2,
                ..
            },
        ) = (self, other)
        else {
            return;
        };
        add_opt(routes, r2);
        *gate += g2;
        *handshake += h2;
    }
}

/// One worker's line of a sharded server's `per_worker`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerStatus {
    pub worker: u64,
    pub connections: u64,
    pub handoffs: u64,
    pub handoffs_received: u64,
    pub handoff_dropped: u64,
    pub udp_rx_datagrams: u64,
    pub tun_rx_pkts: u64,
}

impl WorkerStatus {
    /// Worker `w`'s line, from its document's head and connection count.
    pub fn of(w: u64, head: &StatusHead, connections: usize) -> WorkerStatus {
        let d = &head.daemon;
        WorkerStatus {
            worker: w,
            connections: connections as u64,
            handoffs: d.get("handoffs"),
            handoffs_received: d.get("handoffs_received"),
            handoff_dropped: d.get("handoff_dropped"),
            udp_rx_datagrams: d.get("udp_rx_datagrams"),
            tun_rx_pkts: d.get("tun_rx_pkts"),
        }
    }
}

/// Everything of a status document but its connections: the daemon's own
/// fields. A client has `configured_paths`; a server `endpoint`, the
/// learned routes and `auth`; a server with workers `workers`,
/// `workers_answered` and `per_worker` (each worker's own document names
/// it by `worker`, `mailbox_capacity`). Counter groups are [`Counters`];
/// the other numbers are gauges ([`StatusHead::gauges`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusHead {
    pub role: String,
    pub uptime_s: f64,
    pub tun: TunStatus,
    pub tun_mtu: u32,
    pub plpmtud: bool,
    pub daemon: Counters,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<Counters>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_paths: Option<Vec<ConfiguredPath>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learned_addresses: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learned_routes: Option<Counters>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mailbox_capacity: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers_answered: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_worker: Option<Vec<WorkerStatus>>,
    /// The operations endpoints' own counters (`snapshots`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ops: Option<Counters>,
}

impl StatusHead {
    /// The head's gauges by field name (`None`: not in this document).
    pub fn gauges(&self) -> Vec<(&'static str, Option<f64>)> {
        let f = |x: Option<u64>| x.map(|n| n as f64);
        vec![
            ("learned_addresses", f(self.learned_addresses)),
            ("mailbox_capacity", f(self.mailbox_capacity)),
            ("tun_mtu", Some(f64::from(self.tun_mtu))),
            ("uptime_s", Some(self.uptime_s)),
            ("worker", f(self.worker)),
            ("workers", f(self.workers)),
            ("workers_answered", f(self.workers_answered)),
        ]
    }

    /// Adds another worker's head into this one: counters and the counts
    /// of learned addresses (each worker learns its own connections')
    /// summed; names, modes, the configured peers and the server-wide
    /// numbers kept from this one.
    pub fn add(&mut self, other: &StatusHead) {
        self.daemon += &other.daemon;
        add_opt(&mut self.endpoint, &other.endpoint);
        add_opt(&mut self.learned_routes, &other.learned_routes);
        if let Some(n) = other.learned_addresses {
            *self.learned_addresses.get_or_insert(0) += n;
        }
        match (&mut self.auth, &other.auth) {
            (Some(a), Some(b)) => a.add(b),
            (a @ None, Some(b)) => *a = Some(b.clone()),
            (_, None) => {}
        }
    }
}

/// A whole status document as `mpdccp status` reads it: the head's
/// fields, then `connections`. The daemon builds the same document with
/// its connections kept serialized (`status_doc.rs`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Status {
    #[serde(flatten)]
    pub head: StatusHead,
    pub connections: Vec<ConnStatus>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::ops::{conn_status, PathLabel};
    use mpdccp_proto::conn::TunnelSettings;
    use mpdccp_proto::{Connection, Instant, PathConfig, PathId, Role};

    /// What a daemon writes is what `mpdccp status` and the encoder read
    /// back: a real connection's entry survives its JSON unchanged, and the
    /// reorderer's levels are gauges, not counters.
    #[test]
    fn an_entry_reads_back_as_written_and_levels_are_not_counters() {
        let now = Instant::ZERO;
        let cfg = TunnelSettings::default().connection_config(1280);
        let mut conn = Connection::new(Role::Client, cfg, now, 1);
        conn.add_path(now, PathId(0), PathConfig::default())
            .unwrap();
        let label = |_| PathLabel {
            name: Some("dsl".into()),
            remote: Some("192.0.2.7:40000".into()),
            transport: Some("udp"),
        };
        let mut c = conn_status(&conn, 7, &label);
        c.settings.auth = Some("open".into());
        c.worker = Some(1);
        let text = serde_json::to_string(&c).unwrap();
        let back: ConnStatus = serde_json::from_str(&text).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.paths.len(), 1);
        assert_eq!(back.paths[0].transport.as_deref(), Some("udp"));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["reorder"]["held_pkts"], 0);
        assert!(v["reorder"]["received"].is_u64());
        assert!(!c.reorder.counters.0.contains_key("held_pkts"));
        assert!(c.stats.0.contains_key("delivered_pkts"));
    }
}
