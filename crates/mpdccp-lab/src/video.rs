//! `mpdccp testbed --video`: the real-time goal on the real tunnel.
//! An 8 Mbit/s VP8 RTP stream made by GStreamer (the stack real-time
//! applications use) goes up through the tunnel and, in the same run, over
//! each path alone; it plays, pauses (the paths go idle), and plays again,
//! so the first frames after an idle period are measured too.
//!
//! How it is measured. A clip (720p30 moving zone plate, VP8 CBR 8 Mbit/s,
//! a keyframe every 2 s) is encoded once. Per play, `gst-launch-1.0`
//! demuxes it, packetises it (`rtpvp8pay`, 1200-byte RTP packets) and sends
//! it in real time (`udpsink sync=true`) to a relay on the client's
//! loopback. The relay stamps each packet with `CLOCK_MONOTONIC` and
//! forwards it unchanged; the receiver in the server's namespace stamps its
//! arrival. Every namespace shares that clock, so arrival − send is the
//! exact one-way delay. Loss and frames are counted from the RTP headers
//! (SSRC, sequence number, timestamp), not from a capture on the TUN, where
//! the daemon's coalesced writes would show false loss.
//!
//! The goal: through the tunnel no more packets and frames lost
//! than over the best path alone, and the one-way delay p99 within 1.5 ×
//! that path's, also in the seconds right after an idle period.

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::{bail, Context};
use mpdccp_net::clock;
use mpdccp_net::daemon::config::{AuthMode, TunnelConfig};
use mpdccp_proto::Instant;
use serde::Serialize;
use serde_json::{json, Value};

use crate::aggregation::Pair;
use crate::netns::spawn_in_netns;
use crate::topo::{Topology, TunnelOpts, SERVER_TUN_V4};

/// The stream's target bit rate (the 8 Mbit/s VP8 stream).
pub const VIDEO_BPS: u32 = 8_000_000;
/// RTP packet size (`rtpvp8pay mtu`), the 1200 bytes.
pub const RTP_MTU: usize = 1200;
/// Frames per second of the clip.
const FPS: u32 = 30;
/// UDP port of the receiver.
const PORT: u16 = 5004;
/// What counts as "right after an idle period": packets sent within this
/// long after a play resumed.
pub const AFTER_IDLE: Duration = Duration::from_secs(2);
/// The goal's delay factor: OWD p99 within 1.5 × the best path's.
pub const GOAL_P99_FACTOR: f64 = 1.5;

/// How often the tunnel cell samples the sending daemon's paths
/// (`status-tunnel.csv`): as often as the daemon renews its status, no
/// more (a query within that age reads the same snapshot again).
const STATUS_EVERY: Duration = mpdccp_net::daemon::ops::SNAPSHOT_MAX_AGE;

/// What to run.
pub struct Options {
    pub exe: PathBuf,
    pub pair: &'static Pair,
    /// Seconds of video per play.
    pub play_s: f64,
    /// Plays, with `idle_s` of silence between two.
    pub plays: u32,
    pub idle_s: f64,
    pub daemon_rt_priority: u8,
    pub auth: AuthMode,
    /// Write each cell's packets here (`packets-<via>.csv`).
    pub dump_dir: Option<PathBuf>,
}

/// The RTP fields the measurement needs (RFC 3550 §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtpHeader {
    pub marker: bool,
    pub seq: u16,
    pub timestamp: u32,
    pub ssrc: u32,
}

/// Parses the fixed RTP header; `None` for anything that is not RTP
/// version 2 with a whole fixed header.
pub fn rtp_header(b: &[u8]) -> Option<RtpHeader> {
    if b.len() < 12 || b[0] >> 6 != 2 {
        return None;
    }
    Some(RtpHeader {
        marker: b[1] & 0x80 != 0,
        seq: u16::from_be_bytes([b[2], b[3]]),
        timestamp: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        ssrc: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
    })
}

/// One packet as the relay sent it or the receiver got it.
#[derive(Clone, Copy, Debug)]
pub struct Stamped {
    pub rtp: RtpHeader,
    pub at: Instant,
    pub bytes: usize,
}

/// Loss, frames and one-way delay of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VideoStats {
    pub sent: u64,
    pub received: u64,
    pub duplicates: u64,
    pub lost: u64,
    pub loss_pct: f64,
    /// Frames (one RTP timestamp of one SSRC) and those missing a packet.
    pub frames: u64,
    pub frames_incomplete: u64,
    pub frames_incomplete_pct: f64,
    pub owd_p50_ms: f64,
    pub owd_p95_ms: f64,
    pub owd_p99_ms: f64,
    /// OWD p99 of the packets sent within [`AFTER_IDLE`] of a play resuming
    /// after silence (0 with one play).
    pub after_idle_owd_p99_ms: f64,
    /// OWD p99 over every packet sent, a lost one counting as never
    /// arriving: `None` (infinite) when more than 1 % were lost. A path
    /// that drops a burst instead of delaying it looks fast in
    /// `owd_p99_ms`; this one does not.
    pub owd_p99_lost_as_late_ms: Option<f64>,
    /// Complete frames: last packet's arrival − first packet's send, p99.
    pub frame_delay_p99_ms: f64,
    /// Offered rate of the sent RTP packets (UDP payload), Mbit/s.
    pub sent_mbps: f64,
}

/// The nearest-rank `p` quantile of `v` (sorted here; [`crate::bench::quantile`]); 0 when empty.
fn quantile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    crate::bench::quantile(v, p)
}

/// Joins what the relay sent with what arrived. `resumed` are the instants
/// a play started again after silence.
pub fn analyze(sent: &[Stamped], recv: &[Stamped], resumed: &[Instant]) -> VideoStats {
    let key = |s: &Stamped| (s.rtp.ssrc, s.rtp.seq);
    // First arrival per packet; later copies are duplicates.
    let mut arrived: BTreeMap<(u32, u16), Instant> = BTreeMap::new();
    let mut duplicates = 0;
    for r in recv {
        if arrived.insert(key(r), r.at).is_some() {
            duplicates += 1;
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut owd = Vec::with_capacity(sent.len());
    let mut after_idle = Vec::new();
    // Per frame: first send, last arrival, complete so far.
    let mut frames: BTreeMap<(u32, u32), (Instant, Instant, bool)> = BTreeMap::new();
    let mut received = 0;
    for s in sent {
        let got = arrived.get(&key(s)).copied();
        let f = frames
            .entry((s.rtp.ssrc, s.rtp.timestamp))
            .or_insert((s.at, s.at, true));
        f.0 = f.0.min(s.at);
        match got {
            Some(at) => {
                received += 1;
                let d = ms(at.saturating_duration_since(s.at));
                owd.push(d);
                if resumed
                    .iter()
                    .any(|&r| s.at >= r && s.at.saturating_duration_since(r) < AFTER_IDLE)
                {
                    after_idle.push(d);
                }
                f.1 = f.1.max(at);
            }
            None => f.2 = false,
        }
    }
    let mut frame_delay: Vec<f64> = frames
        .values()
        .filter(|f| f.2)
        .map(|f| ms(f.1.saturating_duration_since(f.0)))
        .collect();
    let incomplete = frames.values().filter(|f| !f.2).count() as u64;
    let n = sent.len() as u64;
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    VideoStats {
        sent: n,
        received,
        duplicates,
        lost: n - received,
        loss_pct: pct(n - received, n),
        frames: frames.len() as u64,
        frames_incomplete: incomplete,
        frames_incomplete_pct: pct(incomplete, frames.len() as u64),
        owd_p50_ms: quantile(&mut owd, 0.5),
        owd_p95_ms: quantile(&mut owd, 0.95),
        owd_p99_ms: quantile(&mut owd, 0.99),
        owd_p99_lost_as_late_ms: {
            let mut all = owd.clone();
            all.extend(std::iter::repeat_n(f64::INFINITY, (n - received) as usize));
            Some(quantile(&mut all, 0.99)).filter(|v| v.is_finite())
        },
        after_idle_owd_p99_ms: quantile(&mut after_idle, 0.99),
        frame_delay_p99_ms: quantile(&mut frame_delay, 0.99),
        sent_mbps: offered_mbps(sent),
    }
}

/// The offered rate over the plays only (each play has its own SSRC;
/// the idle gaps between them do not count), Mbit/s.
fn offered_mbps(sent: &[Stamped]) -> f64 {
    let mut plays: BTreeMap<u32, (Instant, Instant, usize)> = BTreeMap::new();
    for s in sent {
        let p = plays.entry(s.rtp.ssrc).or_insert((s.at, s.at, 0));
        p.0 = p.0.min(s.at);
        p.1 = p.1.max(s.at);
        p.2 += s.bytes;
    }
    let span: f64 = plays
        .values()
        .map(|p| p.1.saturating_duration_since(p.0).as_secs_f64())
        .sum();
    let bytes: usize = plays.values().map(|p| p.2).sum();
    if span > 0.0 {
        bytes as f64 * 8.0 / span / 1e6
    } else {
        0.0
    }
}

/// Encodes the clip into `dir` (once per run; a few seconds of CPU).
pub fn encode_clip(dir: &Path, secs: f64) -> anyhow::Result<PathBuf> {
    let out = dir.join("clip.webm");
    let frames = (secs * f64::from(FPS)).round() as u32;
    let pipeline = format!(
        "videotestsrc num-buffers={frames} pattern=zone-plate kx2=20 ky2=20 kt=1 \
         ! video/x-raw,width=1280,height=720,framerate={FPS}/1 \
         ! vp8enc target-bitrate={VIDEO_BPS} end-usage=cbr keyframe-max-dist={} deadline=1 cpu-used=8 \
         ! webmmux ! filesink location={}",
        2 * FPS,
        out.display()
    );
    gst(None, &pipeline).context("encoding the clip")?;
    Ok(out)
}

/// Runs a `gst-launch-1.0` pipeline to its end, in the client's namespace
/// when given.
fn gst(ns: Option<&crate::netns::Netns>, pipeline: &str) -> anyhow::Result<()> {
    let args: Vec<&str> = std::iter::once("-q")
        .chain(pipeline.split_whitespace())
        .collect();
    let mut cmd = match ns {
        Some(ns) => ns.command("gst-launch-1.0"),
        None => std::process::Command::new("gst-launch-1.0"),
    };
    let out = cmd
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .context("cannot run gst-launch-1.0 (Debian: gstreamer1.0-tools, -plugins-good)")?;
    if !out.status.success() {
        bail!(
            "gst-launch-1.0 failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Receives datagrams on `sock` until `abort`, stamping each RTP packet;
/// with `forward`, sends each on unchanged (the relay).
fn stamp_loop(
    sock: &UdpSocket,
    forward: Option<(&UdpSocket, SocketAddr)>,
    abort: &AtomicBool,
) -> io::Result<Vec<Stamped>> {
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    let _ = socket2::SockRef::from(sock).set_recv_buffer_size(8 << 20);
    let mut out = Vec::with_capacity(1 << 16);
    let mut buf = vec![0u8; 65_536];
    while !abort.load(Ordering::Relaxed) {
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        let at = clock::now();
        let Some(rtp) = rtp_header(&buf[..n]) else {
            continue;
        };
        if let Some((tx, dst)) = forward {
            // A send error is a lost packet, counted by the analysis.
            let _ = tx.send_to(&buf[..n], dst);
        }
        out.push(Stamped { rtp, at, bytes: n });
    }
    Ok(out)
}

/// One run: the stream up through the tunnel (`via` = None) or over path
/// `via` alone. With the tunnel, also the sending daemon's per-path state
/// and its refusal and drop counters at the end ([`crate::aggregation::diagnosis`]).
pub fn run_cell(opts: &Options, via: Option<usize>) -> anyhow::Result<(VideoStats, Value)> {
    let total = opts.play_s * f64::from(opts.plays) + opts.idle_s * f64::from(opts.plays) + 10.0;
    let (mut topo, sc) = crate::aggregation::emulated_pair(&opts.exe, opts.pair, total)?;
    let dst_ip = stream_destination(&mut topo, opts, via)?;
    let dst = SocketAddr::new(dst_ip.into(), PORT);
    let abort = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let a = abort.clone();
    let rx = spawn_in_netns(topo.server.name(), move || {
        let sock = UdpSocket::bind(dst)?;
        let _ = ready_tx.send(());
        Ok(stamp_loop(&sock, None, &a)?)
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .context("RTP receiver not ready")?;
    let (port_tx, port_rx) = mpsc::channel::<u16>();
    let a = abort.clone();
    let relay = spawn_in_netns(topo.client.name(), move || {
        clock::set_precise_timers();
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        let tx = UdpSocket::bind("0.0.0.0:0")?;
        let _ = port_tx.send(sock.local_addr()?.port());
        Ok(stamp_loop(&sock, Some((&tx, dst)), &a)?)
    });
    let port = port_rx
        .recv_timeout(Duration::from_secs(5))
        .context("RTP relay not ready")?;
    let clip = encode_clip(&topo.dir, opts.play_s)?;
    // The sending daemon's windows while the stream plays (the tunnel cell,
    // when the packets are kept): which window a keyframe finds.
    let sampler = (via.is_none() && opts.dump_dir.is_some()).then(|| {
        let sock = topo.control_socket(false);
        let a = abort.clone();
        std::thread::spawn(move || sample_paths(&sock, &a))
    });
    let (resumed, result) = play_clip(&topo, opts, &clip, port);
    // The last packets cross the paths (and the reordering timeout).
    std::thread::sleep(Duration::from_millis(500));
    abort.store(true, Ordering::Relaxed);
    let sent = relay
        .join()
        .map_err(|_| anyhow::anyhow!("relay panicked"))??;
    let got = rx
        .join()
        .map_err(|_| anyhow::anyhow!("receiver panicked"))??;
    result?;
    if sent.is_empty() {
        bail!("GStreamer sent no RTP packet");
    }
    let status_csv = sampler.and_then(|h| h.join().ok());
    if let Some(dir) = &opts.dump_dir {
        if let Some(csv) = status_csv {
            std::fs::write(dir.join("status-tunnel.csv"), csv)?;
        }
        let name = via.map_or("tunnel".to_string(), |i| sc.path[i].name.clone());
        std::fs::write(
            dir.join(format!("packets-{name}.csv")),
            packets_csv(&sent, &got),
        )?;
    }
    let diagnosis = match via {
        None => topo
            .status(false)
            .map(|st| crate::aggregation::diagnosis(&st))
            .unwrap_or(Value::Null),
        Some(_) => Value::Null,
    };
    Ok((analyze(&sent, &got, &resumed), diagnosis))
}

/// Samples the daemon at `sock` every [`STATUS_EVERY`] until `abort`: one
/// CSV line per path and sample, `t_ns` on the clock of `packets-*.csv`'s
/// `sent_ns`.
fn sample_paths(sock: &Path, abort: &AtomicBool) -> String {
    let mut out = String::from(
        "t_ns,path,state,cc_state,cwnd_pkts,in_flight_pkts,queued_pkts,srtt_ms,min_rtt_ms\n",
    );
    while !abort.load(Ordering::Relaxed) {
        if let Ok(v) = mpdccp_net::daemon::ops::query(sock, "status") {
            let t = clock::now().as_nanos();
            let paths = v["connections"][0]["paths"].as_array().cloned();
            for p in paths.unwrap_or_default() {
                let n = |k: &str| p[k].as_f64().map_or(String::new(), |x| x.to_string());
                let t_ = |k: &str| p[k].as_str().unwrap_or("").to_string();
                out.push_str(&format!(
                    "{t},{},{},{},{},{},{},{},{}\n",
                    t_("name"),
                    t_("state"),
                    t_("cc_state"),
                    n("cwnd_pkts"),
                    n("in_flight_pkts"),
                    n("queued_pkts"),
                    n("srtt_ms"),
                    n("min_rtt_ms"),
                ));
            }
        }
        std::thread::sleep(STATUS_EVERY);
    }
    out
}

/// Where the stream goes: the server's tunnel address after starting the
/// tunnel (`via` = None, the daemons' own defaults), or path `via`'s
/// server address.
fn stream_destination(
    topo: &mut Topology,
    opts: &Options,
    via: Option<usize>,
) -> anyhow::Result<std::net::Ipv4Addr> {
    Ok(match via {
        None => {
            let tunnel = TunnelOpts {
                // The daemons' own defaults (what an operator runs).
                tunnel: TunnelConfig::default(),
                rt_priority: opts.daemon_rt_priority,
                auth: opts.auth,
                ..TunnelOpts::default()
            };
            topo.start_tunnel(&opts.exe, &tunnel)?;
            SERVER_TUN_V4
        }
        Some(i) => topo.paths[i].server_ip,
    })
}

/// Plays `clip` `opts.plays` times as RTP to the relay on `port`, pausing
/// `opts.idle_s` between plays. Returns when each play after the first
/// resumed, and GStreamer's result (stopping at its first error).
fn play_clip(
    topo: &Topology,
    opts: &Options,
    clip: &Path,
    port: u16,
) -> (Vec<Instant>, anyhow::Result<()>) {
    let play = format!(
        "filesrc location={} ! matroskademux ! rtpvp8pay mtu={RTP_MTU} pt=96 \
         ! udpsink host=127.0.0.1 port={port} sync=true",
        clip.display()
    );
    let mut resumed = Vec::new();
    let mut result = Ok(());
    for k in 0..opts.plays {
        if k > 0 {
            std::thread::sleep(Duration::from_secs_f64(opts.idle_s));
            resumed.push(clock::now());
        }
        result = gst(Some(&topo.client), &play);
        if result.is_err() {
            break;
        }
    }
    (resumed, result)
}

/// One line per sent packet: `ssrc,seq,rtp_ts,marker,bytes,sent_ns,owd_ms`
/// (`owd_ms` empty when lost), for a look at which packets waited.
pub fn packets_csv(sent: &[Stamped], recv: &[Stamped]) -> String {
    let arrived: BTreeMap<(u32, u16), Instant> = recv
        .iter()
        .rev()
        .map(|r| ((r.rtp.ssrc, r.rtp.seq), r.at))
        .collect();
    let mut out = String::from("ssrc,seq,rtp_ts,marker,bytes,sent_ns,owd_ms\n");
    for s in sent {
        let owd = arrived
            .get(&(s.rtp.ssrc, s.rtp.seq))
            .map(|&a| {
                format!(
                    "{:.3}",
                    a.saturating_duration_since(s.at).as_secs_f64() * 1e3
                )
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "{},{},{},{},{},{},{owd}\n",
            s.rtp.ssrc,
            s.rtp.seq,
            s.rtp.timestamp,
            u8::from(s.rtp.marker),
            s.bytes,
            s.at.as_nanos()
        ));
    }
    out
}

/// The cells: the tunnel, then each path alone; with the goal verdict
/// against the best path alone (fewest incomplete frames, then the lowest
/// OWD p99).
pub fn run(opts: &Options, progress: &dyn Fn(&str)) -> anyhow::Result<Value> {
    let mut cells = Vec::new();
    let names: Vec<&str> = opts.pair.paths.iter().map(|p| p.0).collect();
    for via in std::iter::once(None).chain((0..names.len()).map(Some)) {
        let label = via.map_or("tunnel", |i| names[i]);
        progress(&format!("video {} via {label} …", opts.pair.name));
        let (s, diagnosis) = run_cell(opts, via)?;
        progress(&format!(
            "  loss {:.2} %, frames incomplete {:.2} %, OWD p50/p99 {:.1}/{:.1} ms, after idle p99 {:.1} ms",
            s.loss_pct, s.frames_incomplete_pct, s.owd_p50_ms, s.owd_p99_ms, s.after_idle_owd_p99_ms
        ));
        cells.push((label.to_string(), s, diagnosis));
    }
    // Each goal against the best single path *for that metric* (the
    // strictest reading: a path that loses least and one that delays
    // least may differ).
    let singles = &cells[1..];
    if singles.is_empty() {
        bail!("no single-path cell");
    }
    let t = &cells[0].1;
    let goal = |what: &str, metric: fn(&VideoStats) -> f64, factor: f64| -> Value {
        let (via, best) = singles
            .iter()
            .map(|c| (c.0.as_str(), metric(&c.1)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("non-empty");
        let ours = metric(t);
        json!({"goal": what, "tunnel": ours, "best": best, "best_via": via,
               "met": ours <= factor * best})
    };
    let goals = json!([
        goal("packets lost ≤ best path alone", |s| s.lost as f64, 1.0),
        goal(
            "frames incomplete ≤ best path alone",
            |s| s.frames_incomplete as f64,
            1.0
        ),
        goal(
            "OWD p99 ≤ 1.5 × best path alone",
            |s| s.owd_p99_ms,
            GOAL_P99_FACTOR
        ),
        goal(
            "after idle: OWD p99 ≤ 1.5 × best path alone's",
            |s| s.after_idle_owd_p99_ms,
            GOAL_P99_FACTOR
        ),
    ]);
    Ok(json!({
        "pair": opts.pair.name,
        "about": opts.pair.about,
        "play_s": opts.play_s,
        "plays": opts.plays,
        "idle_s": opts.idle_s,
        "stream": format!("VP8 720p{FPS}, CBR {} Mbit/s, RTP packets of {RTP_MTU} bytes, up (client → server)", VIDEO_BPS / 1_000_000),
        "cells": cells.iter().map(|(v, s, d)| json!({"via": v, "stats": s, "sender": d})).collect::<Vec<_>>(),
        "goals": goals,
    }))
}

/// The report as a Markdown table.
pub fn markdown(r: &Value) -> String {
    let mut s = format!(
        "# RTP video on the real tunnel — {} ({})\n\n{}; {} plays of {} s with {} s idle between.\n\n\
         | via | sent | lost | loss % | frames incomplete | OWD p50 / p95 / p99 ms | p99 with losses as late | after idle p99 ms | frame delay p99 ms | Mbit/s |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        r["pair"].as_str().unwrap_or(""),
        r["about"].as_str().unwrap_or(""),
        r["stream"].as_str().unwrap_or(""),
        r["plays"],
        r["play_s"],
        r["idle_s"],
    );
    for c in r["cells"].as_array().into_iter().flatten() {
        let st = &c["stats"];
        let f = |k: &str| st[k].as_f64().unwrap_or(f64::NAN);
        s.push_str(&format!(
            "| {} | {} | {} | {:.2} | {} of {} ({:.2} %) | {:.1} / {:.1} / {:.1} | {} | {:.1} | {:.1} | {:.2} |\n",
            c["via"].as_str().unwrap_or(""),
            st["sent"],
            st["lost"],
            f("loss_pct"),
            st["frames_incomplete"],
            st["frames"],
            f("frames_incomplete_pct"),
            f("owd_p50_ms"),
            f("owd_p95_ms"),
            f("owd_p99_ms"),
            st["owd_p99_lost_as_late_ms"]
                .as_f64()
                .map_or("∞ (> 1 % lost)".to_string(), |v| format!("{v:.1}")),
            f("after_idle_owd_p99_ms"),
            f("frame_delay_p99_ms"),
            f("sent_mbps"),
        ));
    }
    s.push_str("\nGoals, each against the best path alone for its metric:\n\n");
    for g in r["goals"].as_array().into_iter().flatten() {
        let num = |v: &Value| {
            let x = v.as_f64().unwrap_or(f64::NAN);
            if x.fract() == 0.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.1}")
            }
        };
        s.push_str(&format!(
            "- {}: tunnel {}, best path ({}) {} — {}\n",
            g["goal"].as_str().unwrap_or(""),
            num(&g["tunnel"]),
            g["best_via"].as_str().unwrap_or(""),
            num(&g["best"]),
            if g["met"].as_bool() == Some(true) {
                "met"
            } else {
                "**not met**"
            }
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtp(seq: u16, ts: u32, ssrc: u32) -> RtpHeader {
        RtpHeader {
            marker: false,
            seq,
            timestamp: ts,
            ssrc,
        }
    }

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    #[test]
    fn rtp_header_reads_rfc3550_fields_and_refuses_others() {
        // V=2, M=1, PT=96, seq 0x1234, ts 0xdeadbeef, SSRC 7.
        let mut b = [0u8; 20];
        b[0] = 0x80;
        b[1] = 0x80 | 96;
        b[2..4].copy_from_slice(&0x1234u16.to_be_bytes());
        b[4..8].copy_from_slice(&0xdead_beefu32.to_be_bytes());
        b[8..12].copy_from_slice(&7u32.to_be_bytes());
        let h = rtp_header(&b).unwrap();
        assert_eq!(
            h,
            RtpHeader {
                marker: true,
                seq: 0x1234,
                timestamp: 0xdead_beef,
                ssrc: 7
            }
        );
        assert_eq!(rtp_header(&b[..11]), None, "truncated");
        b[0] = 0x40;
        assert_eq!(rtp_header(&b), None, "version 1");
    }

    #[test]
    fn loss_frames_and_delays_follow_the_packets() {
        // Two frames of 3 packets (ts 100, 200) in play 1 (SSRC 1), one
        // frame (ts 5) in play 2 (SSRC 2) resumed at 1000 ms.
        let sent: Vec<Stamped> = [
            (1, 100, 1, 0),
            (2, 100, 1, 1),
            (3, 100, 1, 2),
            (4, 200, 1, 33),
            (5, 200, 1, 34),
            (6, 200, 1, 35),
            (9, 5, 2, 1000),
            (10, 5, 2, 1001),
        ]
        .iter()
        .map(|&(seq, ts, ssrc, t)| Stamped {
            rtp: rtp(seq, ts, ssrc),
            at: at(t),
            bytes: 1000,
        })
        .collect();
        // Packet 5 lost; packet 1 arrives twice; OWDs 10 ms except play 2's
        // 50 and 60 ms.
        let mut recv: Vec<Stamped> = sent
            .iter()
            .filter(|s| s.rtp.seq != 5)
            .map(|s| Stamped {
                at: at(s.at.as_nanos() / 1_000_000
                    + match s.rtp.seq {
                        9 => 50,
                        10 => 60,
                        _ => 10,
                    }),
                ..*s
            })
            .collect();
        recv.push(recv[0]);
        let st = analyze(&sent, &recv, &[at(1000)]);
        assert_eq!((st.sent, st.received, st.lost, st.duplicates), (8, 7, 1, 1));
        assert!((st.loss_pct - 12.5).abs() < 1e-9);
        assert_eq!((st.frames, st.frames_incomplete), (3, 1));
        assert_eq!(st.owd_p50_ms, 10.0);
        assert_eq!(st.owd_p99_ms, 60.0);
        // 1 of 8 lost (> 1 %): the p99 counting it as late is infinite.
        assert_eq!(st.owd_p99_lost_as_late_ms, None);
        // Only play 2's packets are "after idle".
        assert_eq!(st.after_idle_owd_p99_ms, 60.0);
        // Complete frames: ts 100 (first send 0, last arrival 12) and play
        // 2's (1000 → 1061).
        assert_eq!(st.frame_delay_p99_ms, 61.0);
        // Nothing lost: the same p99 either way.
        let all: Vec<Stamped> = sent
            .iter()
            .map(|s| Stamped {
                at: at(s.at.as_nanos() / 1_000_000 + 10),
                ..*s
            })
            .collect();
        let st = analyze(&sent, &all, &[]);
        assert_eq!(st.owd_p99_lost_as_late_ms, Some(st.owd_p99_ms));
        assert_eq!(st.after_idle_owd_p99_ms, 0.0, "no play resumed");
    }
}
