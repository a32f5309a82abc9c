//! Scenario files: the TOML description of an experiment (`docs/SCENARIOS.md`).
//!
//! Contract:
//! * field names are exactly those of docs/SCENARIOS.md; siblings are added, never
//!   renamed. Unknown fields are an error (a typo such as `dealy_ms` must not be
//!   silently ignored);
//! * [`Scenario::from_toml_str`] parses and validates; [`Scenario::load`] also
//!   reads mahimahi trace files named by the scenario, relative to its directory;
//! * [`Scenario::apply_set`] implements `--set key=value` by editing the TOML
//!   value tree and deserializing again, so every field (present or defaulted)
//!   can be overridden with the same checks as the file itself;
//! * all times in a scenario are seconds from the start of the run
//!   ([`Instant::ZERO`] for the simulator; the emulator's start for `netem`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mpdccp_proto::cc::CcKind;
use mpdccp_proto::conn::TunnelSettings;
use mpdccp_proto::Instant;
use serde::{Deserialize, Serialize};

/// Most paths one tunnel joins: the connection's `max_paths` default. A
/// scenario with more paths and a multipath tunnel is refused at load.
pub const MAX_TUNNEL_PATHS: usize = 8;

/// One experiment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub duration_s: f64,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Free text: where the parameters come from, what to expect.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
    #[serde(default)]
    pub path: Vec<PathSpec>,
    #[serde(default)]
    pub tunnel: TunnelSpec,
    #[serde(default)]
    pub flow: Vec<FlowSpec>,
    #[serde(default)]
    pub window: Vec<WindowSpec>,
    /// Directory relative to which trace files are resolved (set by [`Scenario::load`]).
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

fn default_seed() -> u64 {
    1
}

/// One access network. Both directions share rate, delay, buffer and loss,
/// except that trace links may give each direction its own trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PathSpec {
    pub name: String,
    /// One-way propagation delay, each direction, until the first `delay` point.
    pub delay_ms: f64,
    /// Delay schedule: from `at_s` on, the one-way delay is `ms`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub delay: Vec<DelayPoint>,
    /// Drop-tail bottleneck buffer (bytes not yet fully serialized, including
    /// the packet being serialized).
    pub buffer_bytes: usize,
    /// Random loss probability per packet.
    pub loss: f64,
    /// Piecewise-constant rate schedule. Before the first point, the first
    /// point's rate applies.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rate: Vec<RatePoint>,
    /// Shorthand for a constant rate (`rate = [{ at_s = 0, mbps = X }]`); not
    /// together with `rate`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_mbps: Option<f64>,
    /// Outages: every packet arriving in `[from_s, to_s)` is dropped, and every
    /// packet queued or in flight at `from_s` is lost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub down: Vec<Outage>,
    /// RFC 9897 MP_PRIO value, used by CPF and handover.
    pub priority: u8,
    /// mahimahi trace file for the up direction (client to server): one line per
    /// 1500-byte delivery opportunity, in ms, looping. Replaces the rate schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_up: Option<String>,
    /// mahimahi trace file for the down direction (server to client).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_down: Option<String>,
    /// Link time (s) at which the traces' time 0 falls; default 0, the start
    /// of the run. The testbed sets it to its set-up time, like its shift of
    /// the rate and outage schedules, so that the emulator replays the trace
    /// in step with scenario time as the simulator does.
    #[serde(skip_serializing_if = "is_zero")]
    pub trace_start_s: f64,
    /// Loaded `trace_up` (by [`Scenario::load`] or [`PathSpec::set_trace`]).
    #[serde(skip)]
    pub trace_up_data: Option<Arc<Trace>>,
    /// Loaded `trace_down`.
    #[serde(skip)]
    pub trace_down_data: Option<Arc<Trace>>,
    /// How the tunnel's DCCP packets travel on this path: each then costs its outer IPv4 header and encapsulation on the
    /// link ([`PathTransport::outer_bytes`]). Unset: the link carries the
    /// DCCP packet alone, the accounting of every scenario before the key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<PathTransport>,
}

/// A path's transport, as the daemon's `transport` key: DCCP-in-UDP
/// (RFC 6773), native DCCP (IP protocol 33) or U-DCCP
/// (draft-amend-tsvwg-dccp-udp-header-conversion-01: the DCCP header
/// rearranged into the UDP header, no byte added).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PathTransport {
    Udp,
    Dccp,
    #[serde(rename = "udccp")]
    UDccp,
}

impl PathTransport {
    /// Bytes a DCCP packet costs on the link beyond itself: the outer IPv4
    /// header (20, the simulator's paths are IPv4) and the encapsulation
    /// (RFC 6773's UDP header, 8; none for native DCCP and U-DCCP).
    pub fn outer_bytes(self) -> usize {
        20 + match self {
            PathTransport::Udp => 8,
            PathTransport::Dccp | PathTransport::UDccp => 0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PathTransport::Udp => "udp",
            PathTransport::Dccp => "dccp",
            PathTransport::UDccp => "udccp",
        }
    }
}

impl Default for PathSpec {
    fn default() -> Self {
        PathSpec {
            name: String::new(),
            delay_ms: 0.0,
            delay: Vec::new(),
            buffer_bytes: 150_000,
            loss: 0.0,
            rate: Vec::new(),
            rate_mbps: None,
            down: Vec::new(),
            priority: 0,
            trace_up: None,
            trace_down: None,
            trace_start_s: 0.0,
            trace_up_data: None,
            trace_down_data: None,
            transport: None,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatePoint {
    pub at_s: f64,
    pub mbps: f64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelayPoint {
    pub at_s: f64,
    pub ms: f64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outage {
    pub from_s: f64,
    pub to_s: f64,
}

/// Which direction of a path a [`crate::link::Link`] models.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// Client to server (the tunnel's sending side in the experiments).
    #[default]
    Up,
    /// Server to client.
    Down,
}

/// A mahimahi trace: delivery opportunities of 1500 bytes each, at the given
/// millisecond offsets, repeating every `period_ms` (the last timestamp), as in
/// mahimahi's `traces/README`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// Non-decreasing opportunity times within one period, in ms.
    pub opportunities_ms: Vec<u64>,
    /// The trace repeats after this many ms (the last line's value).
    pub period_ms: u64,
}

impl Trace {
    /// Bytes one delivery opportunity can carry (mahimahi's MTU).
    pub const OPPORTUNITY_BYTES: usize = 1500;

    /// Parses mahimahi's format: one non-negative integer (ms) per line,
    /// non-decreasing; blank lines and `#` comments are ignored.
    pub fn parse(text: &str) -> Result<Trace, String> {
        let mut opportunities_ms = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let ms: u64 = line
                .parse()
                .map_err(|_| format!("line {}: `{line}` is not a whole number of ms", i + 1))?;
            if opportunities_ms.last().is_some_and(|&last| ms < last) {
                return Err(format!("line {}: timestamps must not decrease", i + 1));
            }
            opportunities_ms.push(ms);
        }
        let period_ms = *opportunities_ms
            .last()
            .ok_or("trace has no delivery opportunity")?;
        if period_ms == 0 {
            return Err("trace period (last timestamp) must be > 0 ms".into());
        }
        Ok(Trace {
            opportunities_ms,
            period_ms,
        })
    }

    /// Average capacity in bit/s.
    pub fn rate_bps(&self) -> f64 {
        (self.opportunities_ms.len() * Self::OPPORTUNITY_BYTES * 8) as f64
            / (self.period_ms as f64 / 1e3)
    }
}

/// The MP-DCCP tunnel's settings: the core's [`TunnelSettings`], the same
/// table the daemons read (one definition, one set of defaults).
pub type TunnelSpec = TunnelSettings;

/// One traffic source.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlowSpec {
    pub name: String,
    pub kind: FlowKind,
    /// `udp-cbr`: the sending rate; `tcp`: an optional cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_mbps: Option<f64>,
    /// Packet (or TCP segment payload) size in bytes.
    pub packet_bytes: usize,
    /// `"tunnel"`, or the name of a path for a plain single-path flow.
    pub via: String,
    /// `kind = "tcp"`: the end-to-end congestion control (reno | cubic | bbr | …);
    /// a single-path DCCP flow (`via` a path, `kind` udp-cbr/bulk): its CCID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cc: Option<String>,
    pub start_s: f64,
    /// Marks `start_s` as a detail the publication did not give: `mpdccp
    /// reproduce --seeds N` moves the start by a seeded draw within
    /// ± this many ms (never before 0) in every seed but the first. 0: fixed.
    #[serde(skip_serializing_if = "is_zero")]
    pub start_free_ms: f64,
    /// End of sending (default: the end of the run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_s: Option<f64>,
    /// Which way the data flows.
    pub direction: Direction,
    /// `kind = "tcp"`: how the sender declares a segment lost (default
    /// `rack`, as Linux).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_detection: Option<LossDetection>,
    /// `kind = "tcp"` with `cc = "cubic"`: how slow start ends (default
    /// `rfc9406`, HyStart++; `linux`, kernel CUBIC's HyStart).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hystart: Option<HyStartKind>,
}

impl Default for FlowSpec {
    fn default() -> Self {
        FlowSpec {
            name: String::new(),
            kind: FlowKind::UdpCbr,
            rate_mbps: None,
            packet_bytes: 1400,
            via: "tunnel".into(),
            cc: None,
            start_s: 0.0,
            start_free_ms: 0.0,
            stop_s: None,
            direction: Direction::Up,
            loss_detection: None,
            hystart: None,
        }
    }
}

/// Loss detection of an inner TCP sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossDetection {
    /// RACK-TLP (RFC 8985): time-based loss detection with an adaptive
    /// reordering window, and tail loss probes; Linux's default.
    #[default]
    Rack,
    /// RFC 6675: a segment is lost once three segments above it are SACKed.
    Dupthresh,
}

/// How an inner TCP CUBIC sender leaves its initial slow start on a rising
/// RTT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HyStartKind {
    /// HyStart++ (RFC 9406): conservative slow start for up to five
    /// rounds, resumed if the RTT falls back.
    #[default]
    Rfc9406,
    /// Linux's HyStart (`tcp_cubic`'s default): slow start ends at the
    /// first round whose RTT exceeds the smallest ever by the threshold.
    Linux,
}

impl LossDetection {
    pub fn name(self) -> &'static str {
        match self {
            LossDetection::Rack => "rack",
            LossDetection::Dupthresh => "dupthresh",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowKind {
    /// Constant bit rate datagrams.
    #[default]
    UdpCbr,
    /// Always backlogged, no inner congestion control.
    Bulk,
    /// Inner TCP with its own end-to-end congestion control.
    Tcp,
    /// A QUIC-like bulk transfer: RFC 9002 loss detection and congestion
    /// control over unreliable datagrams.
    Quic,
}

/// A report window: results are repeated for events in `[from_s, to_s)`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    pub name: String,
    pub from_s: f64,
    pub to_s: f64,
}

/// The `via` value that sends a flow through the MP-DCCP tunnel.
pub const VIA_TUNNEL: &str = "tunnel";

#[derive(Clone, Debug, PartialEq)]
pub enum ScenarioError {
    Io { path: PathBuf, message: String },
    Parse(String),
    Invalid(String),
    BadSet { key: String, message: String },
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScenarioError::Io { path, message } => write!(f, "{}: {message}", path.display()),
            ScenarioError::Parse(m) => write!(f, "invalid scenario: {m}"),
            ScenarioError::Invalid(m) => write!(f, "invalid scenario: {m}"),
            ScenarioError::BadSet { key, message } => write!(f, "--set {key}: {message}"),
        }
    }
}

impl std::error::Error for ScenarioError {}

fn invalid(msg: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid(msg.into())
}

impl Scenario {
    /// Every path's events as plot markers, in time order (a stable sort:
    /// same-time events keep path order).
    pub fn markers(&self) -> Vec<crate::labels::Marker> {
        let mut m: Vec<crate::labels::Marker> =
            self.path.iter().flat_map(PathSpec::markers).collect();
        m.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        m
    }

    /// Parses and validates a scenario. Trace files are not read (see [`Scenario::load`]).
    pub fn from_toml_str(s: &str) -> Result<Self, ScenarioError> {
        let scenario: Scenario =
            toml::from_str(s).map_err(|e| ScenarioError::Parse(e.to_string()))?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// Reads, parses and validates a scenario file, and loads the trace files it
    /// names (relative to the file's directory).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ScenarioError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let mut scenario: Scenario = toml::from_str(&text)
            .map_err(|e| ScenarioError::Parse(format!("{}: {e}", path.display())))?;
        scenario.base_dir = Some(path.parent().map(Path::to_owned).unwrap_or_default());
        scenario.load_traces()?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// (Re)reads every trace file named by a path, relative to `base_dir`
    /// (the current directory when unset).
    pub fn load_traces(&mut self) -> Result<(), ScenarioError> {
        let base = self.base_dir.clone().unwrap_or_default();
        for p in &mut self.path {
            p.trace_up_data = p
                .trace_up
                .as_deref()
                .map(|f| read_trace(&base, f))
                .transpose()?;
            p.trace_down_data = p
                .trace_down
                .as_deref()
                .map(|f| read_trace(&base, f))
                .transpose()?;
        }
        Ok(())
    }

    /// Applies one `--set key=value` override, e.g. `tunnel.cc=ccid5`,
    /// `path.0.delay_ms=20`, `path.p1.loss=0.01`, `flow.app.rate_mbps=10`,
    /// `duration_s=5`, `path.0.rate=[{at_s=0,mbps=10}]`.
    ///
    /// Array elements are addressed by index, by `name`, or all at once with
    /// `*` (`path.*.loss=1e-6`). Setting `rate_mbps` replaces a `rate` schedule
    /// and vice versa. The value is read as
    /// a TOML value (`20`, `0.5`, `true`, `[1, 2]`, `{ at_s = 1, ms = 3 }`) and
    /// otherwise taken as a string; a field that currently holds a string always
    /// gets the string. The result is deserialized and validated again, so an
    /// unknown field or a bad value is reported exactly as in a file. On error,
    /// `self` is unchanged.
    pub fn apply_set(&mut self, key: &str, value: &str) -> Result<(), ScenarioError> {
        let bad = |message: String| ScenarioError::BadSet {
            key: key.to_owned(),
            message,
        };
        let mut root = toml::Value::try_from(&*self).map_err(|e| bad(e.to_string()))?;
        let parts: Vec<&str> = key.split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(bad("empty path component".into()));
        }
        set_in(&mut root, &parts, 0, value).map_err(bad)?;
        let mut updated: Scenario = root
            .try_into()
            .map_err(|e: toml::de::Error| bad(e.to_string()))?;
        updated.base_dir = self.base_dir.clone();
        if self
            .path
            .iter()
            .any(|p| p.trace_up.is_some() || p.trace_down.is_some())
            || updated
                .path
                .iter()
                .any(|p| p.trace_up.is_some() || p.trace_down.is_some())
        {
            if updated.base_dir.is_some() {
                updated.load_traces()?;
            } else {
                // Parsed from a string: keep traces already attached by the caller.
                for (new, old) in updated.path.iter_mut().zip(&self.path) {
                    if new.trace_up == old.trace_up {
                        new.trace_up_data = old.trace_up_data.clone();
                    }
                    if new.trace_down == old.trace_down {
                        new.trace_down_data = old.trace_down_data.clone();
                    }
                }
            }
        }
        updated.validate().map_err(|e| bad(e.to_string()))?;
        *self = updated;
        Ok(())
    }

    /// Checks everything that can be checked without building the protocol:
    /// numbers in range, schedules ordered, names unique and known, windows
    /// inside the run, `via` naming `tunnel` or a path.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        if self.name.trim().is_empty() {
            return Err(invalid("`name` is empty"));
        }
        let dur = self.duration_s;
        if !(dur.is_finite() && dur > 0.0) {
            return Err(invalid(format!("`duration_s` must be > 0 (got {dur})")));
        }
        self.validate_paths(dur)?;
        self.tunnel
            .validate(Some(self.path.len()))
            .map_err(|e| invalid(format!("tunnel: {e}")))?;
        let tunnel_used = self.flow.iter().any(|f| f.via == VIA_TUNNEL);
        if tunnel_used && self.tunnel.multipath && self.path.len() > MAX_TUNNEL_PATHS {
            // Every path joins the tunnel; the connection refuses joins past
            // its `max_paths` (RFC 9897 §3.2, Reset "Too Busy"), so the extra
            // paths would silently carry nothing.
            return Err(invalid(format!(
                "{} paths, but a tunnel carries at most {MAX_TUNNEL_PATHS} \
                 (docs/SCENARIOS.md, Limits)",
                self.path.len()
            )));
        }
        for (i, f) in self.flow.iter().enumerate() {
            self.validate_flow(i, f, dur)?;
        }
        self.validate_windows(dur)
    }

    /// At least one path, each valid over `dur` s, names unique and not
    /// `tunnel`.
    fn validate_paths(&self, dur: f64) -> Result<(), ScenarioError> {
        if self.path.is_empty() {
            return Err(invalid("at least one [[path]] is required"));
        }
        for (i, p) in self.path.iter().enumerate() {
            p.validate(i, dur)?;
            if p.name == VIA_TUNNEL {
                return Err(invalid(format!(
                    "path {i}: the name `{VIA_TUNNEL}` is reserved"
                )));
            }
            if self.path[..i].iter().any(|q| q.name == p.name) {
                return Err(invalid(format!("path name `{}` is used twice", p.name)));
            }
        }
        Ok(())
    }

    /// Flow `i`: a unique name, a known `via`, rates, sizes and times in
    /// range, and only the keys its kind uses.
    fn validate_flow(&self, i: usize, f: &FlowSpec, dur: f64) -> Result<(), ScenarioError> {
        let what = format!("flow {i} (`{}`)", f.name);
        if f.name.trim().is_empty() {
            return Err(invalid(format!("flow {i}: `name` is empty")));
        }
        if self.flow[..i].iter().any(|g| g.name == f.name) {
            return Err(invalid(format!("flow name `{}` is used twice", f.name)));
        }
        if f.via != VIA_TUNNEL && !self.path.iter().any(|p| p.name == f.via) {
            let names: Vec<&str> = self.path.iter().map(|p| p.name.as_str()).collect();
            return Err(invalid(format!(
                "{what}: unknown `via = \"{}\"` (expected `tunnel` or a path name: {})",
                f.via,
                names.join(", ")
            )));
        }
        if let Some(r) = f.rate_mbps {
            if !(r.is_finite() && r > 0.0) {
                return Err(invalid(format!(
                    "{what}: `rate_mbps` must be > 0 (got {r})"
                )));
            }
        } else if f.kind == FlowKind::UdpCbr {
            return Err(invalid(format!("{what}: kind `udp-cbr` needs `rate_mbps`")));
        }
        if f.packet_bytes == 0 || f.packet_bytes > 65_000 {
            return Err(invalid(format!(
                "{what}: `packet_bytes` must be in 1..=65000 (got {})",
                f.packet_bytes
            )));
        }
        if let Some(cc) = &f.cc {
            cc.parse::<CcKind>()
                .map_err(|e| invalid(format!("{what}: {e}")))?;
        }
        if f.rate_mbps.is_some() && f.kind == FlowKind::Quic {
            return Err(invalid(format!(
                "{what}: `rate_mbps` does not apply to `kind = \"quic\"` (its controller sets the rate)"
            )));
        }
        if f.loss_detection.is_some() && f.kind != FlowKind::Tcp {
            return Err(invalid(format!(
                "{what}: `loss_detection` applies to `kind = \"tcp\"` only"
            )));
        }
        if f.hystart.is_some()
            && (f.kind != FlowKind::Tcp || f.cc.as_deref().unwrap_or("cubic") != "cubic")
        {
            return Err(invalid(format!(
                "{what}: `hystart` applies to `kind = \"tcp\"` with `cc = \"cubic\"` only"
            )));
        }
        check_time(&what, "start_s", f.start_s, dur)?;
        if !(f.start_free_ms.is_finite() && (0.0..=10_000.0).contains(&f.start_free_ms)) {
            return Err(invalid(format!(
                "{what}: `start_free_ms` must be within 0..=10000 (got {})",
                f.start_free_ms
            )));
        }
        if let Some(stop) = f.stop_s {
            if !(stop.is_finite() && stop > f.start_s) {
                return Err(invalid(format!(
                    "{what}: `stop_s` ({stop}) must be after `start_s` ({})",
                    f.start_s
                )));
            }
        }
        Ok(())
    }

    /// Windows: unique names, each inside the run of `dur` s.
    fn validate_windows(&self, dur: f64) -> Result<(), ScenarioError> {
        for (i, w) in self.window.iter().enumerate() {
            let what = format!("window {i} (`{}`)", w.name);
            if w.name.trim().is_empty() {
                return Err(invalid(format!("window {i}: `name` is empty")));
            }
            if self.window[..i].iter().any(|v| v.name == w.name) {
                return Err(invalid(format!("window name `{}` is used twice", w.name)));
            }
            if !(w.from_s.is_finite() && w.to_s.is_finite() && w.from_s >= 0.0 && w.from_s < w.to_s)
            {
                return Err(invalid(format!(
                    "{what}: needs 0 <= from_s < to_s (got {} .. {})",
                    w.from_s, w.to_s
                )));
            }
            if w.to_s > dur + 1e-9 {
                return Err(invalid(format!(
                    "{what}: ends at {} s, after the run ({dur} s)",
                    w.to_s
                )));
            }
        }
        Ok(())
    }

    /// The index of the path called `name`.
    pub fn path_index(&self, name: &str) -> Option<usize> {
        self.path.iter().position(|p| p.name == name)
    }

    /// The end of the run.
    pub fn end(&self) -> Instant {
        Instant::from_secs_f64(self.duration_s)
    }

    /// The effective scenario as TOML (after `--set`), to store beside results.
    pub fn to_toml(&self) -> Result<String, ScenarioError> {
        toml::to_string(self).map_err(|e| ScenarioError::Parse(e.to_string()))
    }

    /// The loss-stream seed of one direction of one path, derived from the
    /// scenario seed, so the simulator and the emulator use the same streams.
    pub fn link_seed(&self, path: usize, dir: Direction) -> u64 {
        let d = match dir {
            Direction::Up => 0,
            Direction::Down => 1,
        };
        splitmix64(self.seed ^ splitmix64(((path as u64) << 1) | d))
    }
}

/// SplitMix64 finalizer (Steele et al., 2014): decorrelates nearby seeds.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fields that are strings even when the value looks like a number (`--set flow.0.name=1`).
const STRING_FIELDS: &[&str] = &[
    "name",
    "cc",
    "scheduler",
    "reorder",
    "via",
    "kind",
    "trace_up",
    "trace_down",
    "notes",
    "direction",
    "loss_detection",
    "hystart",
];

fn parse_set_value(value: &str, force_string: bool) -> toml::Value {
    if force_string {
        return toml::Value::String(value.to_owned());
    }
    match toml::from_str::<toml::Table>(&format!("v = {value}")) {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(value.to_owned())),
        Err(_) => toml::Value::String(value.to_owned()),
    }
}

/// Sets `parts[i..]` below `node` to `value`.
fn set_in(node: &mut toml::Value, parts: &[&str], i: usize, value: &str) -> Result<(), String> {
    let so_far = || parts[..=i].join(".");
    let part = parts[i];
    if i + 1 < parts.len() {
        if part == "*" {
            let toml::Value::Array(a) = node else {
                return Err(format!("`{}` is not an array", parts[..i].join(".")));
            };
            if a.is_empty() {
                return Err(format!("`{}` has no entries", parts[..i].join(".")));
            }
            return a
                .iter_mut()
                .try_for_each(|elem| set_in(elem, parts, i + 1, value));
        }
        let next = descend(node, part, &so_far())?;
        return set_in(next, parts, i + 1, value);
    }
    match node {
        toml::Value::Table(t) => {
            let is_string = matches!(t.get(part), Some(toml::Value::String(_)))
                || (t.get(part).is_none() && STRING_FIELDS.contains(&part));
            t.insert(part.to_owned(), parse_set_value(value, is_string));
            // The two spellings of a path's rate exclude each other.
            match part {
                "rate_mbps" => t.remove("rate"),
                "rate" => t.remove("rate_mbps"),
                _ => None,
            };
        }
        toml::Value::Array(a) => {
            let idxs: Vec<usize> = if part == "*" {
                (0..a.len()).collect()
            } else {
                vec![array_index(a, part)?]
            };
            for idx in idxs {
                let is_string = matches!(a[idx], toml::Value::String(_));
                a[idx] = parse_set_value(value, is_string);
            }
        }
        _ => {
            return Err(format!(
                "`{}` is not a table or an array",
                parts[..i].join(".")
            ))
        }
    }
    Ok(())
}

fn descend<'a>(
    node: &'a mut toml::Value,
    part: &str,
    so_far: &str,
) -> Result<&'a mut toml::Value, String> {
    match node {
        toml::Value::Table(t) => t.get_mut(part).ok_or_else(|| match part {
            "path" | "flow" | "window" => format!("the scenario has no `{part}` entries"),
            _ => format!("no table `{so_far}`"),
        }),
        toml::Value::Array(a) => {
            let idx = array_index(a, part)?;
            Ok(&mut a[idx])
        }
        _ => Err(format!("`{so_far}` is a value, not a table")),
    }
}

/// An array element by index (`0`) or by its `name` field (`p1`).
fn array_index(a: &[toml::Value], part: &str) -> Result<usize, String> {
    if let Ok(i) = part.parse::<usize>() {
        return if i < a.len() {
            Ok(i)
        } else {
            Err(format!("index {i} out of range (there are {})", a.len()))
        };
    }
    let names: Vec<&str> = a
        .iter()
        .filter_map(|v| v.get("name").and_then(toml::Value::as_str))
        .collect();
    a.iter()
        .position(|v| v.get("name").and_then(toml::Value::as_str) == Some(part))
        .ok_or_else(|| format!("no entry named `{part}` (names: {})", names.join(", ")))
}

fn read_trace(base: &Path, file: &str) -> Result<Arc<Trace>, ScenarioError> {
    let path = base.join(file);
    let text = std::fs::read_to_string(&path).map_err(|e| ScenarioError::Io {
        path: path.clone(),
        message: e.to_string(),
    })?;
    Trace::parse(&text)
        .map(Arc::new)
        .map_err(|message| ScenarioError::Io { path, message })
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn check_time(what: &str, field: &str, t: f64, dur: f64) -> Result<(), ScenarioError> {
    if !(t.is_finite() && t >= 0.0) {
        return Err(invalid(format!("{what}: `{field}` must be >= 0 (got {t})")));
    }
    if t > dur {
        return Err(invalid(format!(
            "{what}: `{field}` = {t} is after the end of the run ({dur} s)"
        )));
    }
    Ok(())
}

impl PathSpec {
    fn validate(&self, i: usize, _dur: f64) -> Result<(), ScenarioError> {
        let what = format!("path {i} (`{}`)", self.name);
        if self.name.trim().is_empty() {
            return Err(invalid(format!("path {i}: `name` is empty")));
        }
        if !(self.delay_ms.is_finite() && self.delay_ms >= 0.0) {
            return Err(invalid(format!(
                "{what}: `delay_ms` must be >= 0 (got {})",
                self.delay_ms
            )));
        }
        if self.buffer_bytes == 0 {
            return Err(invalid(format!("{what}: `buffer_bytes` must be > 0")));
        }
        if !(self.trace_start_s.is_finite() && self.trace_start_s >= 0.0) {
            return Err(invalid(format!(
                "{what}: `trace_start_s` must be >= 0 (got {})",
                self.trace_start_s
            )));
        }
        // A probability, not a percentage: `loss = 1` meant as 1 % would
        // drop every packet. Above one half no transport gets anything
        // through; an outage is `down`.
        if !(0.0..=0.5).contains(&self.loss) {
            return Err(invalid(format!(
                "{what}: `loss` must be a probability in [0, 0.5] (got {}; 1 % is 0.01, \
                 an outage is `down = [{{ from_s, to_s }}]`)",
                self.loss
            )));
        }
        self.validate_rate(&what)?;
        self.validate_delay(&what)?;
        self.validate_outages(&what)?;
        if self.priority > 15 {
            return Err(invalid(format!(
                "{what}: `priority` is 4 bits in MP_PRIO (0..=15, got {})",
                self.priority
            )));
        }
        Ok(())
    }

    /// The rate: a schedule in increasing `at_s` order, or one
    /// `rate_mbps`, or traces (one direction's trace needs a rate for the
    /// other).
    fn validate_rate(&self, what: &str) -> Result<(), ScenarioError> {
        let mut prev = f64::NEG_INFINITY;
        for r in &self.rate {
            if !(r.at_s.is_finite() && r.at_s >= 0.0) {
                return Err(invalid(format!(
                    "{what}: rate point `at_s` must be >= 0 (got {})",
                    r.at_s
                )));
            }
            if r.at_s <= prev {
                return Err(invalid(format!(
                    "{what}: rate points must be in increasing `at_s` order"
                )));
            }
            if !(r.mbps.is_finite() && r.mbps >= 0.0) {
                return Err(invalid(format!(
                    "{what}: rate must be >= 0 Mbit/s (got {} at {} s)",
                    r.mbps, r.at_s
                )));
            }
            prev = r.at_s;
        }
        if let Some(m) = self.rate_mbps {
            if !(m.is_finite() && m > 0.0) {
                return Err(invalid(format!(
                    "{what}: `rate_mbps` must be > 0 (got {m})"
                )));
            }
            if !self.rate.is_empty() {
                return Err(invalid(format!(
                    "{what}: give either `rate` or `rate_mbps`, not both"
                )));
            }
        }
        let has_trace = self.trace_up.is_some() || self.trace_down.is_some();
        if self.rate.is_empty() && self.rate_mbps.is_none() && !has_trace {
            return Err(invalid(format!(
                "{what}: needs `rate`, `rate_mbps` or a trace"
            )));
        }
        if has_trace
            && (self.trace_up.is_none() || self.trace_down.is_none())
            && self.rate.is_empty()
            && self.rate_mbps.is_none()
        {
            return Err(invalid(format!(
                "{what}: a trace for one direction only needs `rate` or `rate_mbps` for the other"
            )));
        }
        Ok(())
    }

    /// Delay points in increasing `at_s` order, none negative.
    fn validate_delay(&self, what: &str) -> Result<(), ScenarioError> {
        let mut prev = f64::NEG_INFINITY;
        for d in &self.delay {
            if !(d.at_s.is_finite() && d.at_s >= 0.0 && d.at_s > prev) {
                return Err(invalid(format!(
                    "{what}: delay points need increasing `at_s` >= 0"
                )));
            }
            if !(d.ms.is_finite() && d.ms >= 0.0) {
                return Err(invalid(format!(
                    "{what}: delay must be >= 0 ms (got {} at {} s)",
                    d.ms, d.at_s
                )));
            }
            prev = d.at_s;
        }
        Ok(())
    }

    /// Outages ordered, each non-empty, none overlapping.
    fn validate_outages(&self, what: &str) -> Result<(), ScenarioError> {
        let mut prev_end = f64::NEG_INFINITY;
        for o in &self.down {
            if !(o.from_s.is_finite() && o.to_s.is_finite() && o.from_s >= 0.0 && o.from_s < o.to_s)
            {
                return Err(invalid(format!(
                    "{what}: outage needs 0 <= from_s < to_s (got {} .. {})",
                    o.from_s, o.to_s
                )));
            }
            if o.from_s < prev_end {
                return Err(invalid(format!(
                    "{what}: outages must be ordered and not overlap"
                )));
            }
            prev_end = o.to_s;
        }
        Ok(())
    }

    /// This path's events after time zero as plot markers: rate and delay
    /// changes ("p1 10→5 Mbit/s", "p1 delay 60 ms") and outages ("p1 down",
    /// "p1 up").
    pub fn markers(&self) -> Vec<crate::labels::Marker> {
        let n = &self.name;
        let mut out = Vec::new();
        let mut push = |at_s: f64, label: String| {
            if at_s > 0.0 {
                out.push(crate::labels::Marker { at_s, label });
            }
        };
        for w in self.rate.windows(2) {
            let (a, b) = (w[0].mbps, w[1].mbps);
            let t = crate::labels::tick_label;
            push(w[1].at_s, format!("{n} {}→{} Mbit/s", t(a), t(b)));
        }
        for d in &self.delay {
            push(
                d.at_s,
                format!("{n} delay {} ms", crate::labels::tick_label(d.ms)),
            );
        }
        for o in &self.down {
            push(o.from_s, format!("{n} down"));
            push(o.to_s, format!("{n} up"));
        }
        out
    }

    /// The rate schedule in force as `(at, bit/s)` points, first at time zero.
    pub fn rate_schedule_bps(&self) -> Vec<(Instant, u64)> {
        if let Some(m) = self.rate_mbps {
            return vec![(Instant::ZERO, mbps_to_bps(m))];
        }
        let mut out: Vec<(Instant, u64)> = self
            .rate
            .iter()
            .map(|r| (Instant::from_secs_f64(r.at_s), mbps_to_bps(r.mbps)))
            .collect();
        if let Some(first) = out.first_mut() {
            // Before the first point, the first point's rate applies.
            first.0 = Instant::ZERO;
        }
        out
    }

    /// The delay schedule as `(at, delay)` points, first at time zero.
    pub fn delay_schedule(&self) -> Vec<(Instant, std::time::Duration)> {
        let mut out = vec![(Instant::ZERO, ms_to_duration(self.delay_ms))];
        for d in &self.delay {
            let at = Instant::from_secs_f64(d.at_s);
            if at == Instant::ZERO {
                out[0].1 = ms_to_duration(d.ms);
            } else {
                out.push((at, ms_to_duration(d.ms)));
            }
        }
        out
    }

    /// Attaches a parsed trace for one direction (for callers that build
    /// scenarios in code).
    pub fn set_trace(&mut self, dir: Direction, trace: Trace) {
        match dir {
            Direction::Up => self.trace_up_data = Some(Arc::new(trace)),
            Direction::Down => self.trace_down_data = Some(Arc::new(trace)),
        }
    }

    /// The trace for one direction, if the path is trace-driven in that direction.
    pub fn trace(&self, dir: Direction) -> Option<&Arc<Trace>> {
        match dir {
            Direction::Up => self.trace_up_data.as_ref(),
            Direction::Down => self.trace_down_data.as_ref(),
        }
    }
}

/// Mbit/s to whole bit/s (rounded; negative or NaN gives 0).
pub fn mbps_to_bps(mbps: f64) -> u64 {
    if mbps.is_finite() && mbps > 0.0 {
        (mbps * 1e6).round().min(u64::MAX as f64) as u64
    } else {
        0
    }
}

fn ms_to_duration(ms: f64) -> std::time::Duration {
    if ms.is_finite() && ms > 0.0 {
        std::time::Duration::from_nanos((ms * 1e6).round() as u64)
    } else {
        std::time::Duration::ZERO
    }
}

#[cfg(test)]
mod tests {

    /// The plots' event markers: rate changes, delay changes and outages
    /// after time zero, in time order.
    #[test]
    fn markers_name_each_path_event_in_time_order() {
        let s = Scenario::from_toml_str(
            "name = \"m\"\nduration_s = 60\n\
             [[path]]\nname = \"dsl\"\ndelay_ms = 5\n\
             rate = [{ at_s = 0, mbps = 20 }, { at_s = 30, mbps = 5.5 }]\n\
             [[path]]\nname = \"lte\"\ndelay_ms = 30\nrate_mbps = 10\n\
             delay = [{ at_s = 40, ms = 80 }]\ndown = [{ from_s = 10, to_s = 12 }]\n\
             [[flow]]\nname = \"f\"\nvia = \"dsl\"\nrate_mbps = 1\n",
        )
        .expect("scenario");
        let m: Vec<(f64, String)> = s.markers().into_iter().map(|m| (m.at_s, m.label)).collect();
        assert_eq!(
            m,
            [
                (10.0, "lte down".to_owned()),
                (12.0, "lte up".to_owned()),
                (30.0, "dsl 20→5.5 Mbit/s".to_owned()),
                (40.0, "lte delay 80 ms".to_owned()),
            ]
        );
    }

    use super::*;
    use mpdccp_proto::sched::SchedulerKind;

    const E1: &str = r#"
name = "ccid5-single-path"
duration_s = 15
seed = 1

[[path]]
name = "p1"
delay_ms = 5
buffer_bytes = 150000
loss = 0.0
rate = [{ at_s = 0, mbps = 100 }, { at_s = 5, mbps = 10 }]
priority = 3

[tunnel]
cc = "ccid5"
scheduler = "cpf"
reorder = "active-fixed"
reorder_timeout_ms = 15

[[flow]]
name = "app"
kind = "udp-cbr"
rate_mbps = 15
packet_bytes = 1400
via = "tunnel"
start_s = 0

[[window]]
name = "after_drop"
from_s = 6
to_s = 15
"#;

    fn e1() -> Scenario {
        Scenario::from_toml_str(E1).expect("E1 parses")
    }

    /// `n` copies of E1's path under a multipath tunnel.
    fn with_paths(n: usize) -> Result<Scenario, ScenarioError> {
        let mut text = E1.replace("name = \"p1\"", "name = \"p0\"");
        for i in 1..n {
            text.push_str(&format!(
                "\n[[path]]\nname = \"p{i}\"\ndelay_ms = 5\nrate_mbps = 10\n"
            ));
        }
        Scenario::from_toml_str(&text)
    }

    #[test]
    fn more_paths_than_a_tunnel_joins_are_refused_at_load() {
        // The limit is the connection's: a path past it would be refused
        // at join time and carry nothing (the old silent failure).
        assert_eq!(
            MAX_TUNNEL_PATHS,
            mpdccp_proto::conn::ConnectionConfig::default().mp.max_paths
        );
        assert!(with_paths(MAX_TUNNEL_PATHS).is_ok());
        let err = with_paths(10)
            .expect_err("10 paths must be refused")
            .to_string();
        assert!(
            err.contains("10 paths") && err.contains("at most 8"),
            "{err}"
        );
        // Without a multipath tunnel only the first path is used: allowed.
        let mut s = with_paths(MAX_TUNNEL_PATHS).expect("8 paths load");
        s.apply_set("tunnel.multipath", "false")
            .expect("single path");
        let mut text = toml::to_string(&s).expect("serializes");
        for i in MAX_TUNNEL_PATHS..10 {
            text.push_str(&format!("\n[[path]]\nname = \"x{i}\"\nrate_mbps = 1\n"));
        }
        assert!(Scenario::from_toml_str(&text).is_ok());
    }

    #[test]
    fn parses_the_contract_example() {
        let s = e1();
        assert_eq!(s.name, "ccid5-single-path");
        assert_eq!(s.duration_s, 15.0);
        assert_eq!(s.seed, 1);
        assert_eq!(
            s.path[0].rate,
            vec![
                RatePoint {
                    at_s: 0.0,
                    mbps: 100.0
                },
                RatePoint {
                    at_s: 5.0,
                    mbps: 10.0
                }
            ]
        );
        assert_eq!(s.path[0].priority, 3);
        assert_eq!(s.tunnel.cc, CcKind::Ccid5);
        assert_eq!(s.tunnel.reorder_timeout_ms, Some(15.0));
        assert_eq!(s.flow[0].kind, FlowKind::UdpCbr);
        assert_eq!(s.flow[0].rate_mbps, Some(15.0));
        assert_eq!(s.window[0].from_s, 6.0);
        assert_eq!(
            s.path[0].rate_schedule_bps(),
            vec![
                (Instant::ZERO, 100_000_000),
                (Instant::from_millis(5000), 10_000_000)
            ]
        );
    }

    /// `kind = "quic"` and `loss_detection` (TCP only) parse; the wrong
    /// combinations are refused at load.
    #[test]
    fn inner_flow_kinds_and_loss_detection() {
        let flow = |kind_and_keys: &str| {
            Scenario::from_toml_str(
                &E1.replace("kind = \"udp-cbr\"\nrate_mbps = 15", kind_and_keys),
            )
        };
        let tcp = flow("kind = \"tcp\"\nloss_detection = \"dupthresh\"").expect("tcp");
        assert_eq!(tcp.flow[0].loss_detection, Some(LossDetection::Dupthresh));
        let tcp = flow("kind = \"tcp\"").expect("tcp");
        assert_eq!(
            tcp.flow[0].loss_detection.unwrap_or_default(),
            LossDetection::Rack
        );
        let quic = flow("kind = \"quic\"\ncc = \"cubic\"").expect("quic");
        assert_eq!(quic.flow[0].kind, FlowKind::Quic);
        assert!(flow("kind = \"quic\"\nloss_detection = \"rack\"").is_err());
        assert!(flow("kind = \"quic\"\nrate_mbps = 5").is_err());
        assert!(flow("kind = \"tcp\"\nloss_detection = \"fack\"").is_err());
        // Linux's HyStart: TCP CUBIC only.
        let linux = flow("kind = \"tcp\"\nhystart = \"linux\"").expect("tcp cubic");
        assert_eq!(linux.flow[0].hystart, Some(HyStartKind::Linux));
        assert!(flow("kind = \"tcp\"\ncc = \"bbr\"\nhystart = \"linux\"").is_err());
        assert!(flow("kind = \"quic\"\nhystart = \"rfc9406\"").is_err());
        assert!(flow("kind = \"tcp\"\nhystart = \"ack-train\"").is_err());
    }

    #[test]
    fn round_trips_through_toml_and_derives_distinct_link_seeds() {
        let s = e1();
        let again = Scenario::from_toml_str(&s.to_toml().unwrap()).unwrap();
        assert_eq!(again, s);
        let seeds = [
            s.link_seed(0, Direction::Up),
            s.link_seed(0, Direction::Down),
            s.link_seed(1, Direction::Up),
            s.link_seed(1, Direction::Down),
        ];
        for i in 0..4 {
            for j in 0..i {
                assert_ne!(seeds[i], seeds[j]);
            }
        }
        assert_eq!(seeds[0], e1().link_seed(0, Direction::Up), "deterministic");
    }

    #[test]
    fn parses_siblings() {
        let text = E1
            .replace(
                "priority = 3",
                "priority = 3\ndelay = [{ at_s = 60, ms = 90 }]\ndown = [{ from_s = 2, to_s = 3 }]",
            )
            .replace("start_s = 0", "start_s = 0\nstop_s = 10\ncc = \"cubic\"")
            .replace(
                "duration_s = 15",
                "duration_s = 15\nnotes = \"from the paper\"",
            );
        let s = Scenario::from_toml_str(&text).unwrap();
        assert_eq!(
            s.path[0].down,
            vec![Outage {
                from_s: 2.0,
                to_s: 3.0
            }]
        );
        assert_eq!(
            s.path[0].delay_schedule(),
            vec![
                (Instant::ZERO, std::time::Duration::from_millis(5)),
                (
                    Instant::from_millis(60_000),
                    std::time::Duration::from_millis(90)
                )
            ]
        );
        assert_eq!(s.flow[0].stop_s, Some(10.0));
        assert_eq!(s.flow[0].cc.as_deref(), Some("cubic"));
        assert_eq!(s.notes, "from the paper");
    }

    #[test]
    fn unknown_field_is_an_error() {
        let err = Scenario::from_toml_str(&E1.replace("delay_ms", "dealy_ms")).unwrap_err();
        assert!(err.to_string().contains("dealy_ms"), "{err}");
    }

    #[test]
    fn validation_errors_are_specific() {
        let cases = [
            (
                E1.replace("mbps = 10 }", "mbps = -10 }"),
                "rate must be >= 0",
            ),
            (
                E1.replace("via = \"tunnel\"", "via = \"wifi\""),
                "unknown `via = \"wifi\"`",
            ),
            (E1.replace("to_s = 15", "to_s = 16"), "after the run"),
            (
                E1.replace("cc = \"ccid5\"", "cc = \"ccid9\""),
                "unknown congestion control `ccid9`",
            ),
            (E1.replace("loss = 0.0", "loss = 1.5"), "probability"),
            (E1.replace("loss = 0.0", "loss = 1"), "1 % is 0.01"),
            (
                E1.replace("duration_s = 15", "duration_s = 0"),
                "duration_s",
            ),
            (
                E1.replace("kind = \"udp-cbr\"", "kind = \"udp\""),
                "unknown variant",
            ),
            (E1.replace("from_s = 6", "from_s = 16"), "from_s < to_s"),
        ];
        for (text, needle) in cases {
            let err = Scenario::from_toml_str(&text).unwrap_err().to_string();
            assert!(err.contains(needle), "expected `{needle}` in `{err}`");
        }
    }

    #[test]
    fn apply_set_edits_any_field() {
        let mut s = e1();
        s.apply_set("tunnel.cc", "ccid2").unwrap();
        assert_eq!(s.tunnel.cc, CcKind::Ccid2);
        s.apply_set("path.0.delay_ms", "20").unwrap();
        assert_eq!(s.path[0].delay_ms, 20.0);
        s.apply_set("path.p1.loss", "0.01").unwrap();
        assert_eq!(s.path[0].loss, 0.01);
        s.apply_set("duration_s", "5").unwrap_err(); // the window would end after the run
                                                     // Each --set is validated on its own: from_s first, then to_s.
        s.apply_set("window.after_drop.to_s", "5").unwrap_err();
        s.apply_set("window.0.from_s", "1").unwrap();
        s.apply_set("window.after_drop.to_s", "5").unwrap();
        s.apply_set("duration_s", "5").unwrap();
        assert_eq!(s.duration_s, 5.0);
        // A defaulted field that was not in the file.
        s.apply_set("tunnel.send_queue_pkts", "64").unwrap();
        assert_eq!(s.tunnel.send_queue_pkts, 64);
        s.apply_set("flow.app.stop_s", "4").unwrap();
        assert_eq!(s.flow[0].stop_s, Some(4.0));
        s.apply_set("path.0.rate", "[{at_s=0, mbps=20}]").unwrap();
        assert_eq!(
            s.path[0].rate,
            vec![RatePoint {
                at_s: 0.0,
                mbps: 20.0
            }]
        );
        s.apply_set("path.0.rate.0.mbps", "30").unwrap();
        assert_eq!(s.path[0].rate[0].mbps, 30.0);
        s.apply_set("tunnel.weights", "[4, 1]").unwrap_err(); // 2 weights, 1 path
        s.apply_set("flow.0.name", "123").unwrap();
        assert_eq!(s.flow[0].name, "123");
        s.apply_set("tunnel.scheduler", "rr").unwrap();
        // rate_mbps replaces the schedule, and back.
        s.apply_set("path.p1.rate_mbps", "25").unwrap();
        assert_eq!((s.path[0].rate_mbps, s.path[0].rate.len()), (Some(25.0), 0));
        s.apply_set("path.p1.rate", "[{at_s=0, mbps=5}, {at_s=1, mbps=6}]")
            .unwrap();
        assert_eq!((s.path[0].rate_mbps, s.path[0].rate.len()), (None, 2));
        // `*` sets every entry.
        s.path.push(PathSpec {
            name: "p2".into(),
            rate_mbps: Some(1.0),
            ..PathSpec::default()
        });
        s.apply_set("path.*.loss", "1e-6").unwrap();
        assert!(s.path.iter().all(|p| p.loss == 1e-6));
        s.apply_set("path.p1.rate.*.mbps", "7").unwrap();
        assert!(s.path[0].rate.iter().all(|r| r.mbps == 7.0));
        assert_eq!(s.tunnel.scheduler, SchedulerKind::Rr);
    }

    #[test]
    fn apply_set_rejects_bad_keys_and_values_and_keeps_state() {
        let mut s = e1();
        let before = s.clone();
        for (k, v, needle) in [
            ("path.3.delay_ms", "1", "out of range"),
            ("path.wifi.delay_ms", "1", "no entry named `wifi`"),
            ("tunnel.ccc", "ccid5", "unknown field `ccc`"),
            ("path.0.delay_ms", "fast", "invalid type"),
            ("path.0.delay_ms", "-1", "delay_ms"),
            ("tunnel.cc", "nope", "unknown congestion control"),
            ("duration_s.x", "1", "not a table"),
            ("", "1", "empty"),
        ] {
            let err = s.apply_set(k, v).unwrap_err().to_string();
            assert!(
                err.contains(needle),
                "--set {k}={v}: expected `{needle}` in `{err}`"
            );
            assert_eq!(s, before);
        }
    }

    #[test]
    fn trace_parses_and_loads_relative_to_the_scenario() {
        let t = Trace::parse("# comment\n1\n1\n3\n\n4\n").unwrap();
        assert_eq!(t.opportunities_ms, vec![1, 1, 3, 4]);
        assert_eq!(t.period_ms, 4);
        assert_eq!(t.rate_bps(), 4.0 * 12_000.0 / 0.004);
        assert!(Trace::parse("3\n2\n").is_err());
        assert!(Trace::parse("0\n0\n").is_err());
        assert!(Trace::parse("x\n").is_err());

        let dir = std::env::temp_dir().join(format!("mpdccp-model-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("up.trace"), "1\n2\n").unwrap();
        let text = E1.replace("priority = 3", "priority = 3\ntrace_up = \"up.trace\"");
        std::fs::write(dir.join("s.toml"), &text).unwrap();
        let mut s = Scenario::load(dir.join("s.toml")).unwrap();
        assert_eq!(
            s.path[0].trace(Direction::Up).unwrap().opportunities_ms,
            vec![1, 2]
        );
        assert!(s.path[0].trace(Direction::Down).is_none());
        s.apply_set("path.0.delay_ms", "7").unwrap();
        assert!(
            s.path[0].trace(Direction::Up).is_some(),
            "traces survive --set"
        );
        assert!(matches!(
            s.apply_set("path.0.trace_up", "missing.trace"),
            Err(ScenarioError::Io { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
