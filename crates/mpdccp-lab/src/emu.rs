//! The userspace link emulator behind `mpdccp netem`.
//!
//! For hosts without the `netem` qdisc. It runs in a router namespace between
//! a client-side and a server-side interface and holds every forwarded packet
//! in the shared link model ([`mpdccp_model::link::Link`]) — the same code,
//! and the same path description (`[[path]]` of a scenario), that the
//! simulator uses: one-way delay (and its schedule), piecewise-constant rate,
//! drop-tail buffer, seeded random loss, outages.
//!
//! Plumbing (done by [`Router::setup`]): one TUN device per direction.
//! Policy routing sends everything that arrives on the client-side interface
//! into the "up" TUN and everything from the server side into the "down" TUN;
//! the emulator reads a packet there, holds it in the direction's `Link`, and
//! writes it back into the same TUN when the model delivers it. A packet
//! written into a TUN is "received" on it, so the main table forwards it on to
//! its real destination — no loop, because the capture rules match only the
//! veth interfaces.
//!
//! Timing: the loop sleeps in `ppoll` with a 1 µs timer slack until just
//! before the next delivery and spins (yielding) for the last few
//! microseconds, so emulated delays are not stretched by wake-up latency.
//! Packets are stored in a preallocated ring (the link is FIFO), read in
//! batches until the TUN is empty; nothing is allocated per packet.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use mpdccp_model::link::{Link, LinkDrop};
use mpdccp_model::scenario::{Direction, PathSpec};
use mpdccp_proto::Instant;
use serde::Serialize;
use tracing::{debug, info};

use mpdccp_net::clock;
use mpdccp_net::tun::Tun;
use rustix::event::{PollFd, PollFlags};

use crate::netns;

/// Settings of one emulated path (both directions).
#[derive(Clone, Debug, Default)]
pub struct EmuConfig {
    pub spec: PathSpec,
    pub seed: u64,
    /// TUN device for client → server packets.
    pub up_tun: String,
    /// TUN device for server → client packets.
    pub down_tun: String,
    /// `CLOCK_MONOTONIC` value that is t = 0 of the path's schedules (rate
    /// points, outages). `None`: the emulator's own start.
    pub epoch: Option<Instant>,
    /// Write one JSON line per direction every `stats_interval` here.
    pub stats_out: Option<PathBuf>,
    pub stats_interval: Duration,
    /// Packets stored per direction (delay × rate + buffer must fit).
    pub ring_pkts: usize,
    /// `SCHED_FIFO` priority of the emulator thread; 0 = normal scheduling.
    pub rt_priority: i32,
}

/// Counters of one direction.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DirStats {
    pub received_pkts: u64,
    pub received_bytes: u64,
    pub delivered_pkts: u64,
    pub delivered_bytes: u64,
    pub dropped_buffer_pkts: u64,
    pub dropped_loss_pkts: u64,
    pub dropped_down_pkts: u64,
    /// Our own ring was full (delay × rate larger than `ring_pkts`).
    pub dropped_ring_pkts: u64,
    pub write_errors: u64,
    /// Largest lateness of a delivery past its due time, µs (timer precision).
    pub max_late_us: u64,
    /// Mean lateness, µs.
    pub mean_late_us: f64,
}

/// Final report of an emulator run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EmuStats {
    pub path: String,
    pub up: DirStats,
    pub down: DirStats,
}

/// One periodic sample of one direction, written as a JSON line (`--stats-out`).
/// Counters are cumulative; queueing delays are of the packets delivered
/// during the interval.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Sample {
    /// Seconds since the emulator's epoch.
    pub t_s: f64,
    pub path: String,
    /// `up` (client → server) or `down`.
    pub dir: String,
    pub queue_bytes: usize,
    pub queue_pkts: usize,
    pub received_pkts: u64,
    pub received_bytes: u64,
    pub delivered_pkts: u64,
    pub delivered_bytes: u64,
    pub dropped_pkts: u64,
    /// Largest / mean time waiting in the buffer (before serialization) of the
    /// packets delivered in the interval, ms.
    pub qdelay_max_ms: f64,
    pub qdelay_mean_ms: f64,
    /// Packets those delays are over.
    pub qdelay_n: u64,
    /// Largest lateness of a delivery against the model's schedule in the
    /// interval, µs (how much the emulator's timers distort delays).
    #[serde(default)]
    pub late_max_us: u64,
}

/// Reads the samples an emulator wrote with `--stats-out` (skipping a line
/// still being written).
pub fn read_samples(path: &std::path::Path) -> Vec<Sample> {
    read_samples_from(path, 0)
}

/// Like [`read_samples`], from byte `offset` of the file on.
pub fn read_samples_from(path: &std::path::Path, offset: u64) -> Vec<Sample> {
    use std::io::{Read, Seek, SeekFrom};
    let mut bytes = Vec::new();
    let Ok(mut f) = File::open(path) else {
        return Vec::new();
    };
    if f.seek(SeekFrom::Start(offset)).is_err() || f.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    // Lossy: an offset inside a line costs that line only.
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// How late the emulator's deliveries were against the model's schedule:
/// percentiles over the per-interval maxima ([`Sample::late_max_us`]). A
/// late emulator is a host that stalled it; delays measured through it
/// then include the stall.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Lateness {
    pub p50_us: u64,
    pub p90_us: u64,
    pub max_us: u64,
    /// Intervals the figures are over.
    pub intervals: usize,
}

impl Lateness {
    pub fn of<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Lateness {
        let mut v: Vec<u64> = samples.into_iter().map(|s| s.late_max_us).collect();
        v.sort_unstable();
        let pct = |q: f64| {
            v.get(((v.len() as f64 - 1.0) * q).round().max(0.0) as usize)
                .copied()
                .unwrap_or(0)
        };
        Lateness {
            p50_us: pct(0.5),
            p90_us: pct(0.9),
            max_us: v.last().copied().unwrap_or(0),
            intervals: v.len(),
        }
    }
}

/// A packet in the link: its ring sequence number.
type Pkt = u64;

/// Fixed-size FIFO packet store; slot = seq mod capacity. Because the link
/// delivers in FIFO order and only ever drops (inside) packets older than the
/// one it delivers, freeing "everything up to the delivered seq" is exact.
struct Ring {
    data: Vec<u8>,
    lens: Vec<u16>,
    head: u64,
    tail: u64,
}

const SLOT: usize = 2048;

/// MTU of the emulator's TUN devices: the emulated link must not be the
/// smallest MTU of a path (the testbed raises the veths' MTU when a
/// scenario's tunnelled packets need it); below the emulator's 2048-byte packet slots.
pub const TUN_MTU: u32 = 2000;

impl Ring {
    fn new(pkts: usize) -> Ring {
        let pkts = pkts.max(64);
        Ring {
            data: vec![0; pkts * SLOT],
            lens: vec![0; pkts],
            head: 0,
            tail: 0,
        }
    }
    fn cap(&self) -> u64 {
        self.lens.len() as u64
    }
    fn is_full(&self) -> bool {
        self.tail - self.head >= self.cap()
    }
    fn slot_mut(&mut self, seq: u64) -> &mut [u8] {
        let i = (seq % self.cap()) as usize;
        &mut self.data[i * SLOT..(i + 1) * SLOT]
    }
    fn packet(&self, seq: u64) -> &[u8] {
        let i = (seq % self.cap()) as usize;
        &self.data[i * SLOT..i * SLOT + self.lens[i] as usize]
    }
}

struct Dir {
    name: &'static str,
    tun: Tun,
    link: Link<Pkt>,
    ring: Ring,
    stats: DirStats,
    late_sum_us: f64,
    // Interval accumulators for samples.
    iv_qdelay_max: Duration,
    iv_qdelay_sum: Duration,
    iv_n: u64,
    iv_late_max_us: u64,
}

impl Dir {
    /// Drains up to `max` packets from the TUN into the link. Each packet is
    /// stamped when it is read (`now`), not once per batch: a packet that
    /// arrives while the loop runs (or while this thread is held up by an
    /// interrupt's network work) must not be stamped before its arrival, or
    /// the model would deliver it early and shorten the emulated delay.
    fn handle_readable(&mut self, now: impl Fn() -> Instant, max: usize) -> io::Result<usize> {
        let mut n = 0;
        while n < max {
            if self.ring.is_full() {
                // Keep reading to drain the kernel queue, but drop.
                let mut scratch = [0u8; SLOT];
                match self.tun.recv(&mut scratch) {
                    Ok(_) => {
                        self.stats.received_pkts += 1;
                        self.stats.dropped_ring_pkts += 1;
                        n += 1;
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            let seq = self.ring.tail;
            let len = match self.tun.recv(self.ring.slot_mut(seq)) {
                Ok(len) => len,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            n += 1;
            self.stats.received_pkts += 1;
            self.stats.received_bytes += len as u64;
            let i = (seq % self.ring.cap()) as usize;
            self.ring.lens[i] = len as u16;
            self.ring.tail += 1;
            match self.link.push(now(), seq, len) {
                Ok(()) => {}
                Err(drop) => {
                    // The refused packet is the newest one: give its slot back.
                    self.ring.tail -= 1;
                    match drop {
                        LinkDrop::BufferFull => self.stats.dropped_buffer_pkts += 1,
                        LinkDrop::RandomLoss => self.stats.dropped_loss_pkts += 1,
                        LinkDrop::Down => self.stats.dropped_down_pkts += 1,
                    }
                }
            }
        }
        Ok(n)
    }

    /// Writes every packet whose time has come back into the TUN.
    fn deliver(&mut self, now: Instant, wall_now: impl Fn() -> Instant) {
        while let Some(d) = self.link.poll_delivery(now) {
            let pkt = self.ring.packet(d.pkt);
            let len = pkt.len();
            if self.tun.send(pkt).is_err() {
                self.stats.write_errors += 1;
            }
            self.ring.head = d.pkt + 1;
            self.stats.delivered_pkts += 1;
            self.stats.delivered_bytes += len as u64;
            let qdelay = d.queue_delay;
            self.iv_qdelay_max = self.iv_qdelay_max.max(qdelay);
            self.iv_qdelay_sum += qdelay;
            self.iv_n += 1;
            // Lateness against the model's schedule is the distortion our timers add.
            let late = wall_now().saturating_duration_since(d.delivered_at);
            let late_us = late.as_micros() as u64;
            self.stats.max_late_us = self.stats.max_late_us.max(late_us);
            self.iv_late_max_us = self.iv_late_max_us.max(late_us);
            self.late_sum_us += late_us as f64;
        }
    }
}

/// Runs the emulator until `stop` is set; returns the counters.
pub fn run(config: &EmuConfig, stop: &AtomicBool) -> anyhow::Result<EmuStats> {
    run_with(config, stop, || Ok(()))
}

/// Like [`run`]; `on_ready` is called once the TUN devices exist (to install
/// routes that name them, or to signal readiness).
pub fn run_with(
    config: &EmuConfig,
    stop: &AtomicBool,
    on_ready: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<EmuStats> {
    clock::set_precise_timers();
    if config.rt_priority > 0 {
        if let Err(e) = clock::set_realtime(config.rt_priority) {
            tracing::warn!(
                "cannot use real-time scheduling ({e}); delays may stretch on a busy host"
            );
        }
    }
    let epoch = config.epoch.unwrap_or_else(clock::now);
    let mut dirs = open_dirs(config)?;
    on_ready()?;
    let mut stats_out = open_stats(config)?;
    let interval = if config.stats_interval.is_zero() {
        Duration::from_millis(100)
    } else {
        config.stats_interval
    };
    let rel = |abs: Instant| Instant::from_nanos(abs.as_nanos().saturating_sub(epoch.as_nanos()));
    let mut next_sample = rel(clock::now()) + interval;
    info!(path = %config.spec.name, up = %config.up_tun, down = %config.down_tun, "emulator running");

    while !stop.load(Ordering::Relaxed) {
        let now = rel(clock::now());
        for d in dirs.iter_mut() {
            d.deliver(now, || rel(clock::now()));
        }
        if now >= next_sample {
            if let Some(w) = stats_out.as_mut() {
                for d in dirs.iter_mut() {
                    w.send(take_sample(now, &config.spec.name, d));
                }
            }
            next_sample = now + interval;
        }
        let mut deadline = next_sample;
        for d in &dirs {
            if let Some(t) = d.link.next_event() {
                deadline = deadline.min(t);
            }
        }
        // None: close to a deadline, just look at the fds and go round again.
        let timeout = clock::sleep_budget(now, deadline).map(|d| d.min(Duration::from_millis(100)));
        let Some((r, readable)) = poll_tuns(&dirs, timeout)? else {
            continue;
        };
        if r == 0 && timeout.is_none() {
            std::thread::yield_now();
            continue;
        }
        for (i, d) in dirs.iter_mut().enumerate() {
            if readable[i] {
                d.handle_readable(|| rel(clock::now()), 256)?;
            }
        }
    }
    finish(config, &mut dirs, stats_out)
}

/// Waits up to `timeout` (None: just looks) for the two TUN devices to
/// become readable. Returns poll's count and which are readable, or None
/// when a signal interrupted the wait.
fn poll_tuns(
    dirs: &[Dir; 2],
    timeout: Option<Duration>,
) -> anyhow::Result<Option<(usize, [bool; 2])>> {
    // Zero: just look at the fds.
    let ts = rustix::event::Timespec::try_from(timeout.unwrap_or(Duration::ZERO)).unwrap_or(
        rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
    );
    let mut fds = [
        PollFd::new(&dirs[0].tun, PollFlags::IN),
        PollFd::new(&dirs[1].tun, PollFlags::IN),
    ];
    match rustix::event::poll(&mut fds, Some(&ts)) {
        Ok(n) => Ok(Some((
            n,
            [0, 1].map(|i| fds[i].revents().contains(PollFlags::IN)),
        ))),
        Err(rustix::io::Errno::INTR) => Ok(None),
        Err(e) => Err(io::Error::from(e).into()),
    }
}

/// The two directions, each with its TUN, link model and ring.
fn open_dirs(config: &EmuConfig) -> anyhow::Result<[Dir; 2]> {
    let ring_pkts = if config.ring_pkts == 0 {
        32_768
    } else {
        config.ring_pkts
    };
    let mk = |name: &'static str, tun: &str, dir: Direction, seed: u64| -> anyhow::Result<Dir> {
        Ok(Dir {
            name,
            tun: Tun::open(tun).with_context(|| format!("cannot open TUN `{tun}`"))?,
            link: Link::with_direction(&config.spec, dir, seed),
            ring: Ring::new(ring_pkts),
            stats: DirStats::default(),
            late_sum_us: 0.0,
            iv_qdelay_max: Duration::ZERO,
            iv_qdelay_sum: Duration::ZERO,
            iv_n: 0,
            iv_late_max_us: 0,
        })
    };
    // Distinct seeds per direction so the two loss processes are independent.
    Ok([
        mk("up", &config.up_tun, Direction::Up, config.seed)?,
        mk(
            "down",
            &config.down_tun,
            Direction::Down,
            config.seed ^ 0x9e37_79b9_7f4a_7c15,
        )?,
    ])
}

/// The writer of `--stats-out`'s samples, if asked for.
fn open_stats(config: &EmuConfig) -> anyhow::Result<Option<StatsWriter>> {
    Ok(match &config.stats_out {
        Some(p) => Some(StatsWriter::spawn(BufWriter::new(
            File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        ))?),
        None => None,
    })
}

/// The counters of a stopped emulator; the sample writer flushed.
fn finish(
    config: &EmuConfig,
    dirs: &mut [Dir; 2],
    stats_out: Option<StatsWriter>,
) -> anyhow::Result<EmuStats> {
    let mut out = EmuStats {
        path: config.spec.name.clone(),
        ..Default::default()
    };
    for d in dirs.iter_mut() {
        if d.stats.delivered_pkts > 0 {
            d.stats.mean_late_us = d.late_sum_us / d.stats.delivered_pkts as f64;
        }
    }
    out.up = dirs[0].stats.clone();
    out.down = dirs[1].stats.clone();
    if let Some(w) = stats_out {
        w.finish()?;
    }
    debug!(?out, "emulator stopped");
    Ok(out)
}

/// Writes the samples from a thread of its own under normal scheduling: a
/// `write` to a file on a busy disk can block for milliseconds (journal,
/// dirty-page throttling), which in the real-time timing loop would hold
/// back every delivery due meanwhile and release them as one burst.
struct StatsWriter {
    tx: Option<std::sync::mpsc::Sender<Sample>>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl StatsWriter {
    fn spawn(mut w: BufWriter<File>) -> anyhow::Result<StatsWriter> {
        let (tx, rx) = std::sync::mpsc::channel::<Sample>();
        let thread = std::thread::Builder::new()
            .name("emu-stats".into())
            .spawn(move || -> io::Result<()> {
                // Failure only leaves the inherited class: harmless.
                clock::set_normal_scheduling();
                while let Ok(s) = rx.recv() {
                    serde_json::to_writer(&mut w, &s)?;
                    w.write_all(b"\n")?;
                    // Samples come in pairs (both directions): flush once
                    // nothing else is waiting.
                    while let Ok(s) = rx.try_recv() {
                        serde_json::to_writer(&mut w, &s)?;
                        w.write_all(b"\n")?;
                    }
                    w.flush()?;
                }
                w.flush()
            })
            .context("cannot start the stats writer thread")?;
        Ok(StatsWriter {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    fn send(&mut self, s: Sample) {
        if let Some(tx) = &self.tx {
            // The writer only stops on an I/O error, which `finish` reports.
            let _ = tx.send(s);
        }
    }

    /// Flushes everything and reports the writer's I/O error, if any.
    fn finish(mut self) -> anyhow::Result<()> {
        self.tx = None;
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r.context("writing emulator samples"),
            Some(Err(_)) => anyhow::bail!("the stats writer thread panicked"),
            None => Ok(()),
        }
    }
}

/// The sample of `d` for the interval ending at `now`; restarts the
/// interval accumulators.
fn take_sample(now: Instant, path: &str, d: &mut Dir) -> Sample {
    let s = Sample {
        t_s: now.as_secs_f64(),
        path: path.to_string(),
        dir: d.name.to_string(),
        queue_bytes: d.link.queue_bytes(),
        queue_pkts: d.link.queue_pkts(),
        received_pkts: d.stats.received_pkts,
        received_bytes: d.stats.received_bytes,
        delivered_pkts: d.stats.delivered_pkts,
        delivered_bytes: d.stats.delivered_bytes,
        dropped_pkts: d.stats.dropped_buffer_pkts
            + d.stats.dropped_loss_pkts
            + d.stats.dropped_down_pkts
            + d.stats.dropped_ring_pkts,
        qdelay_max_ms: d.iv_qdelay_max.as_secs_f64() * 1e3,
        qdelay_mean_ms: if d.iv_n > 0 {
            d.iv_qdelay_sum.as_secs_f64() * 1e3 / d.iv_n as f64
        } else {
            0.0
        },
        qdelay_n: d.iv_n,
        late_max_us: d.iv_late_max_us,
    };
    d.iv_qdelay_max = Duration::ZERO;
    d.iv_qdelay_sum = Duration::ZERO;
    d.iv_n = 0;
    d.iv_late_max_us = 0;
    s
}

/// Routing plumbing of a router namespace: capture each side's traffic into
/// its direction's TUN. Run inside the router namespace, after the TUN
/// devices exist (the emulator creates them; [`Router::setup`] waits for them).
pub struct Router;

impl Router {
    /// `client_if`/`server_if`: the router's interfaces towards client and
    /// server; `table_base`: two free routing table ids are used from here.
    pub fn setup(
        client_if: &str,
        server_if: &str,
        up_tun: &str,
        down_tun: &str,
        table_base: u32,
    ) -> anyhow::Result<()> {
        let set = |k: &str, v: &str| netns::run("sysctl", &["-qw", &format!("{k}={v}")]);
        set("net.ipv4.ip_forward", "1")?;
        set("net.ipv4.conf.all.rp_filter", "0")?;
        set("net.ipv4.conf.default.rp_filter", "0")?;
        for dev in [up_tun, down_tun] {
            set(&format!("net.ipv4.conf.{dev}.rp_filter"), "0")?;
            // Keep IPv6 autoconfiguration chatter out of the emulated link.
            let _ = set(&format!("net.ipv6.conf.{dev}.disable_ipv6"), "1");
            netns::ip(&["link", "set", dev, "mtu", &TUN_MTU.to_string(), "up"])?;
        }
        let (t_up, t_down) = (table_base.to_string(), (table_base + 1).to_string());
        netns::ip(&["route", "replace", "default", "dev", up_tun, "table", &t_up])?;
        netns::ip(&[
            "route", "replace", "default", "dev", down_tun, "table", &t_down,
        ])?;
        netns::ip(&[
            "rule", "add", "iif", client_if, "lookup", &t_up, "pref", "100",
        ])?;
        netns::ip(&[
            "rule", "add", "iif", server_if, "lookup", &t_down, "pref", "101",
        ])?;
        Ok(())
    }

    /// Removes the rules again (the routes go with the TUN devices).
    pub fn teardown(client_if: &str, server_if: &str) {
        let _ = netns::ip(&["rule", "del", "iif", client_if, "pref", "100"]);
        let _ = netns::ip(&["rule", "del", "iif", server_if, "pref", "101"]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(dir: &str, late_max_us: u64) -> Sample {
        Sample {
            t_s: 0.0,
            path: "p".into(),
            dir: dir.into(),
            queue_bytes: 0,
            queue_pkts: 0,
            received_pkts: 0,
            received_bytes: 0,
            delivered_pkts: 0,
            delivered_bytes: 0,
            dropped_pkts: 0,
            qdelay_max_ms: 0.0,
            qdelay_mean_ms: 0.0,
            qdelay_n: 0,
            late_max_us,
        }
    }

    #[test]
    fn lateness_percentiles_are_nearest_rank_over_interval_maxima() {
        // 1..=10 ms in shuffled order: p50 at rank round(9 × 0.5) = 5 → 6 ms
        // (0-based), p90 at rank round(9 × 0.9) = 8 → 9 ms, max 10 ms.
        let s: Vec<Sample> = [7, 3, 10, 1, 9, 2, 8, 4, 6, 5]
            .iter()
            .map(|ms| sample("up", ms * 1000))
            .collect();
        let l = Lateness::of(&s);
        assert_eq!(
            l,
            Lateness {
                p50_us: 6000,
                p90_us: 9000,
                max_us: 10_000,
                intervals: 10
            }
        );
        assert_eq!(Lateness::of(&[]), Lateness::default());
    }

    #[test]
    fn samples_are_read_from_an_offset_and_a_torn_last_line_is_skipped() {
        let dir = std::env::temp_dir().join(format!("mpdccp-emu-samples-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s.jsonl");
        let mut text = String::new();
        for (d, l) in [("up", 100), ("down", 200)] {
            text += &serde_json::to_string(&sample(d, l)).unwrap();
            text.push('\n');
        }
        let mark = text.len() as u64;
        text += &serde_json::to_string(&sample("up", 7000)).unwrap();
        text += "\n{\"t_s\": 1.0, \"pa";
        std::fs::write(&f, &text).unwrap();
        assert_eq!(read_samples(&f).len(), 3);
        let after = read_samples_from(&f, mark);
        assert_eq!(after.len(), 1);
        assert_eq!(Lateness::of(&after).max_us, 7000);
        assert!(read_samples(&dir.join("missing")).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
