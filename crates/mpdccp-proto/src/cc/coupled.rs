//! Coupled multipath congestion control: LIA (RFC 6356), OLIA (Khalili et
//! al., "MPTCP is not Pareto-optimal", IEEE/ACM ToN 2013), BALIA (Peng et
//! al., "Multipath TCP: Analysis, Design and Implementation", IEEE/ACM ToN
//! 2016) and Coupled CUBIC (Lee, Kim, Kwon, Han, CSSE 45(1), 2023).
//!
//! Each path's controller reads the connection's [`CoupledView`]: the
//! [`CcSnapshot`] of every path *including its own* (possibly taken before
//! an earlier event of the same datagram). A controller recognises its own
//! entry by the [`PathId`] it was last asked to snapshot under (else by its
//! window numbers) and uses its current state there; if the view lacks it (a
//! transport that passes `&[]`), the controller adds itself. Only
//! established paths with an RTT sample are coupled. With one such path each
//! controller reduces exactly to its single-path parent (Reno for LIA, OLIA
//! and BALIA, CUBIC for Coupled CUBIC), bit for bit: the coupled formula is
//! mathematically the parent's there, and is skipped to avoid rounding.

use std::cell::Cell;
use std::time::Duration;

use super::aimd::Aimd;
use super::cubic::{CaRule, CubicCore};
use super::{
    rfc3390_initial_window_pkts, AckEvent, CcConfig, CcSnapshot, CongestionController, CoupledView,
    LossEvent, SentPacket,
};
use crate::path::PathId;
use crate::time::Instant;

/// One coupled path as a controller sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoupledPath {
    /// Window (for Coupled CUBIC the virtual Reno window), packets.
    pub cwnd_pkts: f64,
    pub rtt_s: f64,
    pub l1_pkts: f64,
    pub l2_pkts: f64,
    /// Coupled CUBIC: `cwnd_pkts` is the virtual Reno window of a CUBIC
    /// window (a large-BDP subflow), not a real Reno-like window.
    pub cubic: bool,
}

/// RFC 6356 §3 eq. (2): α = cwnd_total · max_i(cwnd_i/rtt_i²) /
/// (Σ_i cwnd_i/rtt_i)². Returns 1 for an empty or degenerate set.
pub fn lia_alpha(paths: &[CoupledPath]) -> f64 {
    lia_alpha_of(paths.iter().copied())
}

/// [`lia_alpha`] over any re-iterable set (lets the coupled CUBIC steps
/// evaluate α over transformed windows without collecting them).
fn lia_alpha_of(paths: impl Iterator<Item = CoupledPath> + Clone) -> f64 {
    let total: f64 = paths.clone().map(|p| p.cwnd_pkts).sum();
    let best = paths
        .clone()
        .map(|p| p.cwnd_pkts / (p.rtt_s * p.rtt_s))
        .fold(0.0, f64::max);
    let sum: f64 = paths.map(|p| p.cwnd_pkts / p.rtt_s).sum();
    let alpha = total * best / (sum * sum);
    if alpha.is_finite() && alpha > 0.0 {
        alpha
    } else {
        1.0
    }
}

/// Coupled CUBIC (Lee et al. 2023), step 1: the loss rate at which CUBIC's
/// average window (RFC 9438 §5.1, W = 1.054·RTT^0.75/p^0.75 with C = 0.4,
/// β = 0.7) equals `w_cubic`: p̂ = (1.054 · RTT^0.75 / W_CUBIC)^(4/3).
pub fn cubic_equivalent_loss_rate(w_cubic_pkts: f64, rtt_s: f64) -> f64 {
    (1.054 * rtt_s.powf(0.75) / w_cubic_pkts).powf(4.0 / 3.0)
}

/// Coupled CUBIC, step 2: the Reno window at that loss rate,
/// W_Reno = √(3/(2p̂)) (the Reno response function), which stands in for
/// the CUBIC subflow in LIA's α.
pub fn virtual_reno_window(w_cubic_pkts: f64, rtt_s: f64) -> f64 {
    let p = cubic_equivalent_loss_rate(w_cubic_pkts, rtt_s);
    let w = (1.5 / p).sqrt();
    if w.is_finite() {
        w
    } else {
        w_cubic_pkts
    }
}

/// The window at which CUBIC's average window equals Reno's at round-trip
/// time `rtt_s`: RFC 9438 §5.1 gives CUBIC W = 1.054·RTT^0.75/p^0.75 (C =
/// 0.4, β = 0.7) against Reno's √(3/(2p)); they are equal at p* = (√1.5 /
/// (1.054·RTT^0.75))^-4, i.e. W* = √(3/(2p*)) ≈ 1.654·RTT^-1.5 (52 packets at
/// 100 ms, 207 at 40 ms, 1654 at 10 ms — between RFC 9438 Table 1's and
/// Table 2's last Reno-friendly and first CUBIC-ahead rows). Below W*, CUBIC
/// runs in its Reno-friendly region (§4.3) and *is* Reno; so there a coupled
/// CUBIC subflow must be LIA, the coupled Reno (Lee et al.'s "small-BDP"
/// path). Infinite for a zero RTT.
pub fn cubic_reno_crossover_window_pkts(rtt_s: f64) -> f64 {
    // p* from 1.054·RTT^0.75·p^-0.75 = √1.5·p^-0.5 is
    // (1.054·RTT^0.75/√1.5)^4, so W* = √(1.5/p*) = 1.5^1.5/1.054² · RTT^-1.5:
    // one square root per call (it runs on every ack).
    const K: f64 = 1.837_117_307_087_383_6 / (1.054 * 1.054); // 1.5^1.5 / 1.054²
    let w = K / (rtt_s * rtt_s.sqrt());
    if w.is_finite() {
        w
    } else {
        f64::INFINITY
    }
}

/// Coupled CUBIC, steps 3–5, over a coupled set whose CUBIC subflows
/// (`cubic`) carry their virtual Reno windows W_Reno:
///
/// * α1 = LIA's α (RFC 6356 eq. 2) over the virtual windows;
/// * a CUBIC subflow's window is W_coupledCUBIC = VirtualW_Reno · α1 ·
///   W_CUBIC / W_Reno with VirtualW_Reno = W_Reno, i.e. α1 · W_CUBIC, with
///   α1 capped at 1 as RFC 6356 caps LIA's increase at Reno's (a subflow is
///   never more aggressive than a single-path flow on its path);
/// * α2 = LIA's α with each CUBIC subflow's virtual window replaced by its
///   coupled value W_Reno · min(α1, 1) — the windows the LIA (small-BDP)
///   subflows actually share the connection's aggressiveness with.
///
/// Returns (α1, the CUBIC scale min(α1, 1), α2, Σ of the α2 windows).
pub fn coupled_cubic_alphas(set: &[CoupledPath]) -> (f64, f64, f64, f64) {
    let alpha1 = lia_alpha(set);
    let scale = alpha1.min(1.0);
    // Called per ack: the coupled windows are mapped lazily, not collected.
    let coupled = set.iter().map(|p| CoupledPath {
        cwnd_pkts: if p.cubic {
            p.cwnd_pkts * scale
        } else {
            p.cwnd_pkts
        },
        ..*p
    });
    let alpha2 = lia_alpha_of(coupled.clone());
    let total2 = coupled.map(|p| p.cwnd_pkts).sum();
    (alpha1, scale, alpha2, total2)
}

/// The coupled set from the view plus this path, written into `set` (the
/// controller's reused buffer: no allocation per ack once it has grown to
/// the path count); returns the index of this path in it. `own` carries
/// this path's current numbers; `matches` recognises its (possibly slightly
/// older) view entry.
fn coupled_set(
    set: &mut Vec<CoupledPath>,
    view: CoupledView<'_>,
    own: CoupledPath,
    own_path: Option<PathId>,
    matches: impl Fn(&CcSnapshot) -> bool,
) -> usize {
    set.clear();
    let mut own_idx = None;
    for snap in view {
        let is_own = match own_path {
            Some(id) => snap.path == id,
            None => matches(snap),
        };
        if own_idx.is_none() && is_own {
            own_idx = Some(set.len());
            set.push(own);
            continue;
        }
        let rtt_s = snap.srtt.as_secs_f64();
        let cwnd = snap.virtual_reno_cwnd_pkts;
        if snap.established && rtt_s > 0.0 && cwnd.is_finite() && cwnd > 0.0 {
            set.push(CoupledPath {
                cwnd_pkts: cwnd,
                rtt_s,
                l1_pkts: snap.olia_l1_pkts,
                l2_pkts: snap.olia_l2_pkts,
                cubic: snap.virtual_reno_is_cubic,
            });
        }
    }
    own_idx.unwrap_or_else(|| {
        set.push(own);
        set.len() - 1
    })
}

fn srtt_s(ack: &AckEvent) -> f64 {
    if !ack.srtt.is_zero() {
        ack.srtt.as_secs_f64()
    } else {
        ack.min_rtt.as_secs_f64()
    }
}

fn reno_iw(config: &CcConfig) -> u32 {
    config
        .initial_cwnd_pkts
        .unwrap_or_else(|| rfc3390_initial_window_pkts(config.mss_bytes))
}

/// Which coupled increase a Reno-family controller applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Algo {
    Lia,
    Olia,
    Balia,
}

/// LIA, OLIA or BALIA on the shared AIMD window.
#[derive(Clone, Debug)]
pub struct CoupledReno {
    algo: Algo,
    window: Aimd,
    /// OLIA: packets acked between the last two losses (l1) and since the
    /// last loss (l2).
    l1_pkts: f64,
    l2_pkts: f64,
    srtt: Duration,
    /// The path id this controller's snapshots carry (learnt from
    /// `snapshot`), to find itself in the view.
    own_path: Cell<Option<PathId>>,
    /// Reused buffer for the coupled set (see `coupled_set`).
    scratch: Vec<CoupledPath>,
}

impl CoupledReno {
    pub fn lia(config: &CcConfig) -> Self {
        Self::new(Algo::Lia, config)
    }
    pub fn olia(config: &CcConfig) -> Self {
        Self::new(Algo::Olia, config)
    }
    pub fn balia(config: &CcConfig) -> Self {
        Self::new(Algo::Balia, config)
    }

    fn new(algo: Algo, config: &CcConfig) -> Self {
        CoupledReno {
            algo,
            window: Aimd::new(reno_iw(config), config),
            l1_pkts: 0.0,
            l2_pkts: 0.0,
            srtt: Duration::ZERO,
            own_path: Cell::new(None),
            scratch: Vec::new(),
        }
    }

    fn own(&self, rtt_s: f64) -> CoupledPath {
        CoupledPath {
            cwnd_pkts: self.window.cwnd,
            rtt_s,
            l1_pkts: self.l1_pkts,
            l2_pkts: self.l2_pkts,
            cubic: false,
        }
    }

    /// The coupled set (taken out of `scratch`; hand it back with
    /// `self.scratch = set`) and this path's index in it.
    fn set(&mut self, view: CoupledView<'_>, rtt_s: f64) -> (Vec<CoupledPath>, usize) {
        let (cwnd, l1, l2) = (self.window.cwnd, self.l1_pkts, self.l2_pkts);
        let mut set = std::mem::take(&mut self.scratch);
        let me = coupled_set(&mut set, view, self.own(rtt_s), self.own_path.get(), |s| {
            s.cwnd_pkts == cwnd && s.olia_l1_pkts == l1 && s.olia_l2_pkts == l2
        });
        (set, me)
    }

    /// Congestion-avoidance increase for `acked` packets.
    fn increase(&self, acked: f64, set: &[CoupledPath], me: usize) -> f64 {
        let w = self.window.cwnd;
        if set.len() <= 1 {
            // One path: every algorithm is Reno (RFC 6356 §3 α = 1; OLIA
            // α_r = 0; BALIA α_r = 1).
            return acked / w;
        }
        let own = set[me];
        match self.algo {
            Algo::Lia => {
                // RFC 6356 §3: min(α/cwnd_total, 1/cwnd_i) per packet.
                let total: f64 = set.iter().map(|p| p.cwnd_pkts).sum();
                let alpha = lia_alpha(set);
                acked * (alpha / total).min(1.0 / w)
            }
            Algo::Olia => {
                // Khalili et al. eq. (4): (w_r/rtt_r²)/(Σ w_p/rtt_p)² + α_r/w_r.
                let sum: f64 = set.iter().map(|p| p.cwnd_pkts / p.rtt_s).sum();
                let first = (w / (own.rtt_s * own.rtt_s)) / (sum * sum);
                acked * (first + olia_alpha(set, me) / w)
            }
            Algo::Balia => {
                // Peng et al. §V: x_r/(τ_r (Σ x_k)²) · (1+α_r)/2 · (4+α_r)/5,
                // x = w/τ, α_r = max_k x_k / x_r.
                let x = |p: &CoupledPath| p.cwnd_pkts / p.rtt_s;
                let sum: f64 = set.iter().map(x).sum();
                let max = set.iter().map(x).fold(0.0, f64::max);
                let xr = w / own.rtt_s;
                let a = max / xr;
                acked * xr / (own.rtt_s * sum * sum) * (1.0 + a) / 2.0 * (4.0 + a) / 5.0
            }
        }
    }

    /// The window after a loss.
    fn decrease(&self, set: &[CoupledPath], me: usize) -> f64 {
        let w = self.window.cwnd;
        if set.len() > 1 && self.algo == Algo::Balia {
            // Peng et al. §V: w_r − (w_r/2)·min(α_r, 1.5).
            let x = |p: &CoupledPath| p.cwnd_pkts / p.rtt_s;
            let max = set.iter().map(x).fold(0.0, f64::max);
            let a = max / x(&set[me]);
            return w - w / 2.0 * a.min(1.5);
        }
        // RFC 6356 §3 and OLIA: halve, as Reno.
        w / 2.0
    }
}

/// OLIA α_r (Khalili et al. §III): with M the paths of largest window and B
/// the presumably best paths (largest ℓ/rtt², ℓ = max(l1, l2) the packets
/// between losses), paths in B∖M gain 1/(|P|·|B∖M|) and paths in M lose
/// 1/(|P|·|M|) when B∖M is not empty.
fn olia_alpha(set: &[CoupledPath], me: usize) -> f64 {
    const REL_EPS: f64 = 1e-9;
    let n = set.len() as f64;
    let max_w = set.iter().map(|p| p.cwnd_pkts).fold(0.0, f64::max);
    let quality = |p: &CoupledPath| p.l1_pkts.max(p.l2_pkts) / (p.rtt_s * p.rtt_s);
    let best_q = set.iter().map(quality).fold(0.0, f64::max);
    let in_m = |p: &CoupledPath| p.cwnd_pkts >= max_w * (1.0 - REL_EPS);
    let in_b = |p: &CoupledPath| quality(p) >= best_q * (1.0 - REL_EPS);
    let m = set.iter().filter(|p| in_m(p)).count() as f64;
    let b_not_m = set.iter().filter(|p| in_b(p) && !in_m(p)).count() as f64;
    let me = &set[me];
    if b_not_m == 0.0 {
        0.0
    } else if in_b(me) && !in_m(me) {
        1.0 / (n * b_not_m)
    } else if in_m(me) {
        -1.0 / (n * m)
    } else {
        0.0
    }
}

impl CongestionController for CoupledReno {
    fn name(&self) -> &'static str {
        match self.algo {
            Algo::Lia => "lia",
            Algo::Olia => "olia",
            Algo::Balia => "balia",
        }
    }

    fn on_packet_sent(&mut self, now: Instant, pkt: &SentPacket) {
        self.window.on_packet_sent(now, pkt);
    }

    fn on_ack(&mut self, now: Instant, ack: &AckEvent, paths: CoupledView<'_>) {
        // Before any state change, so the view's entry for this path still
        // matches it.
        let (set, me) = self.set(paths, srtt_s(ack));
        self.window.note_ack(now, ack);
        if !ack.srtt.is_zero() {
            self.srtt = ack.srtt;
        }
        if self.window.is_cwnd_limited() {
            let mut acked = ack.acked_pkts as f64;
            if self.window.in_slow_start() {
                acked = self.window.slow_start(acked);
            }
            if acked > 0.0 {
                let inc = self.increase(acked, &set, me);
                self.window.grow(inc);
            }
        }
        self.l2_pkts += ack.acked_pkts as f64;
        self.scratch = set;
    }

    fn on_loss(&mut self, now: Instant, loss: &LossEvent, paths: CoupledView<'_>) {
        self.window.validation.set_in_flight(loss.in_flight_pkts);
        if self
            .window
            .new_congestion_event(now, loss.largest_lost_sent_time)
        {
            let (set, me) = self.set(paths, self.srtt.as_secs_f64());
            let new = self.decrease(&set, me);
            self.window.reduce_to(new);
            self.scratch = set;
            // OLIA: a new inter-loss interval begins.
            self.l1_pkts = self.l2_pkts;
            self.l2_pkts = 0.0;
        }
    }

    fn on_rto(&mut self, now: Instant) {
        self.window.on_rto(now);
        self.l1_pkts = self.l2_pkts;
        self.l2_pkts = 0.0;
    }

    fn cwnd_pkts(&self) -> u32 {
        self.window.cwnd_pkts()
    }

    fn validate_window(&mut self, now: Instant) {
        self.window.validate_idle(now);
    }

    fn pipe_ack_pkts(&self, now: Instant) -> Option<u64> {
        self.window.validation.pipe_ack_pkts(now)
    }

    fn state(&self) -> &'static str {
        self.window.state()
    }

    fn ssthresh_pkts(&self) -> Option<u32> {
        self.window.ssthresh_pkts()
    }

    fn snapshot(&self, path: PathId, srtt: Duration, established: bool) -> CcSnapshot {
        self.own_path.set(Some(path));
        CcSnapshot {
            path,
            cwnd_pkts: self.window.cwnd,
            srtt,
            established,
            olia_l1_pkts: self.l1_pkts,
            olia_l2_pkts: self.l2_pkts,
            virtual_reno_cwnd_pkts: self.window.cwnd,
            virtual_reno_is_cubic: false,
        }
    }
}

/// Smallest scale applied to a CUBIC window (bounds the per-ack weight
/// 1/scale when a large-BDP subflow is nearly idle next to busy ones).
const MIN_CUBIC_SCALE: f64 = 1e-3;

/// Coupled CUBIC (Lee, Kim, Kwon, Han, "Coupled CUBIC Congestion Control
/// for MPTCP in Broadband Networks", CSSE 45(1), 2023): CUBIC on large-BDP
/// subflows, coupled to the others through LIA's α computed over virtual
/// Reno windows; LIA (RFC 6356) on small-BDP subflows. A subflow is
/// large-BDP while its smoothed BDP estimate (delivery rate × min RTT) is at
/// least CUBIC's Reno crossover window at that min RTT
/// ([`cubic_reno_crossover_window_pkts`], ≈ 1.654·RTT^-1.5) and at least
/// [`CcConfig::coupled_cubic_bdp_threshold_pkts`] (an optional floor, 0 by
/// default). Below the crossover CUBIC is in its Reno-friendly region
/// (RFC 9438 §4.3), i.e. a Reno flow, and the coupled counterpart of Reno
/// is LIA: running CUBIC there would be uncoupled Reno growth (plus CUBIC's
/// β = 0.7 and concave return to W_max after each loss) scaled only by α1
/// ≈ 1, far more aggressive on a shared bottleneck than LIA's α/W_total per
/// ack (scenarios/README.md, E4).
///
/// On a large-BDP subflow the CUBIC window W_CUBIC evolves as plain CUBIC
/// (RFC 9438) under the subflow's losses. The scheme, step by step:
/// 1. p̂ = (1.054·RTT^0.75 / W_CUBIC)^(4/3), the loss rate at which CUBIC
///    averages W_CUBIC ([`cubic_equivalent_loss_rate`]);
/// 2. W_Reno = √(3/(2p̂)), the Reno window at that loss rate
///    ([`virtual_reno_window`]), published as this subflow's virtual window;
/// 3. α1 = LIA's α over every subflow's virtual window (W_Reno for CUBIC
///    subflows, the window itself for LIA subflows);
/// 4. α2 = LIA's α with each CUBIC subflow at its coupled virtual window
///    W_Reno·α1, used by the LIA subflows' increase min(α2/ΣW, 1/w);
/// 5. the window in use is W_coupledCUBIC = VirtualW_Reno·α1·W_CUBIC/W_Reno
///    = α1·W_CUBIC (α1 capped at 1, see [`coupled_cubic_alphas`]).
///
/// Two identical large-BDP subflows get α1 = ½ each and together one CUBIC
/// flow's window, as LIA gives two Reno subflows one Reno flow's. With one
/// subflow α1 ≡ 1 and the controller is CUBIC, bit for bit.
///
/// Known gap: in CUBIC mode the Reno-friendly estimate W_est (RFC 9438
/// §4.3) grows as an uncoupled Reno's (scaled by min(α1, 1)), not by LIA's
/// α/W_total; above the crossover the cubic curve is the larger on
/// average, so it seldom decides the window.
///
/// (The copy of the paper available to this project holds only its
/// abstract; the steps follow a summary of its §3, so no equation numbers
/// are cited here.)
#[derive(Clone, Debug)]
pub struct CoupledCubic {
    core: CubicCore,
    bdp_threshold_pkts: f64,
    /// Smoothed bandwidth-delay product estimate, packets.
    bdp_pkts: Option<f64>,
    cubic_mode: bool,
    pacing: bool,
    mss_bytes: u32,
    own_path: Cell<Option<PathId>>,
    /// Reused buffer for the coupled set (see `coupled_set`).
    scratch: Vec<CoupledPath>,
    /// The last [`virtual_reno_window`] computed: `(W_CUBIC bits, RTT
    /// bits, W_Reno)`. Snapshots and the coupled set ask for it several
    /// times per ack with unchanged inputs; two `powf`s each time were
    /// ~3 % of a simulated E4 run.
    vreno_memo: Cell<(u64, u64, f64)>,
}

impl CoupledCubic {
    pub fn new(config: &CcConfig) -> Self {
        CoupledCubic {
            core: CubicCore::new(config),
            bdp_threshold_pkts: config.coupled_cubic_bdp_threshold_pkts,
            bdp_pkts: None,
            cubic_mode: true,
            pacing: config.pacing,
            mss_bytes: config.mss_bytes.max(1),
            own_path: Cell::new(None),
            scratch: Vec::new(),
            // RTT bits 0 never match: the memo is only used with rtt > 0.
            vreno_memo: Cell::new((0, 0, 0.0)),
        }
    }

    /// True while the path counts as large-BDP and runs coupled CUBIC.
    pub fn is_cubic_mode(&self) -> bool {
        self.cubic_mode
    }

    /// The coupling factor f applied to the CUBIC window (1 in LIA mode).
    pub fn coupling(&self) -> f64 {
        self.core.window_scale
    }

    /// The window standing in for this path in α: the virtual Reno window
    /// of W_CUBIC (CUBIC mode) or the window itself (LIA mode).
    pub fn virtual_reno_cwnd_pkts(&self) -> f64 {
        let rtt = self.core.srtt.as_secs_f64();
        if self.cubic_mode && rtt > 0.0 {
            let key = (self.core.cwnd.to_bits(), rtt.to_bits());
            let (w, r, v) = self.vreno_memo.get();
            if (w, r) == key {
                return v;
            }
            let v = virtual_reno_window(self.core.cwnd, rtt);
            self.vreno_memo.set((key.0, key.1, v));
            v
        } else {
            self.window()
        }
    }

    /// True when this subflow's virtual window is W_Reno of its CUBIC
    /// window (CUBIC mode with an RTT sample).
    fn virtual_reno_is_cubic(&self) -> bool {
        self.cubic_mode && !self.core.srtt.is_zero()
    }

    fn window(&self) -> f64 {
        self.core.window_scale * self.core.cwnd
    }

    /// The coupled set (taken out of `scratch`; hand it back with
    /// `self.scratch = set`) and this path's index in it.
    fn set(&mut self, view: CoupledView<'_>, rtt_s: f64) -> (Vec<CoupledPath>, usize) {
        let own = CoupledPath {
            cwnd_pkts: self.virtual_reno_cwnd_pkts(),
            rtt_s,
            l1_pkts: 0.0,
            l2_pkts: 0.0,
            cubic: self.virtual_reno_is_cubic(),
        };
        let (cwnd, vreno) = (self.window(), self.virtual_reno_cwnd_pkts());
        let mut set = std::mem::take(&mut self.scratch);
        let me = coupled_set(&mut set, view, own, self.own_path.get(), |s| {
            s.cwnd_pkts == cwnd && s.virtual_reno_cwnd_pkts == vreno
        });
        (set, me)
    }

    fn update_bdp(&mut self, ack: &AckEvent) {
        let sample = match ack.rate {
            Some(rs) if !rs.is_app_limited && !ack.min_rtt.is_zero() => {
                rs.delivery_rate_pkts_per_s() * ack.min_rtt.as_secs_f64()
            }
            _ => return,
        };
        if sample.is_finite() && sample > 0.0 {
            // EWMA with gain 1/8, as RFC 6298 smooths RTT.
            self.bdp_pkts = Some(match self.bdp_pkts {
                None => sample,
                Some(b) => b + (sample - b) / 8.0,
            });
        }
    }

    /// The BDP (packets) from which this subflow runs coupled CUBIC: CUBIC's
    /// Reno crossover at the path's base RTT (min RTT, the RTT a BDP is
    /// defined with; srtt until there is one), and the configured floor.
    fn large_bdp_threshold_pkts(&self, ack: &AckEvent) -> f64 {
        let rtt = if !ack.min_rtt.is_zero() {
            ack.min_rtt
        } else {
            self.core.srtt
        };
        let crossover = if rtt.is_zero() {
            0.0
        } else {
            cubic_reno_crossover_window_pkts(rtt.as_secs_f64())
        };
        crossover.max(self.bdp_threshold_pkts)
    }

    /// Moves the scale into the window (entering LIA mode) so the window in
    /// use does not jump.
    fn fold_scale(&mut self) {
        self.core.cwnd = self.window();
        self.core.window_scale = 1.0;
        self.core.clamp();
    }
}

impl CongestionController for CoupledCubic {
    fn name(&self) -> &'static str {
        "coupled-cubic"
    }

    fn on_packet_sent(&mut self, now: Instant, pkt: &SentPacket) {
        self.core.on_packet_sent(now, pkt);
    }

    fn on_ack(&mut self, now: Instant, ack: &AckEvent, paths: CoupledView<'_>) {
        // Large- or small-BDP subflow (until a delivery-rate sample exists
        // the window stands in for the BDP).
        self.update_bdp(ack);
        let large = self.bdp_pkts.unwrap_or(self.window()) >= self.large_bdp_threshold_pkts(ack);
        if !large && self.cubic_mode {
            self.fold_scale();
        }
        self.cubic_mode = large;
        // The set is built after the mode is known, so this subflow's entry
        // is its virtual window in that mode.
        let (set, _) = self.set(paths, srtt_s(ack));
        let rule = if set.len() <= 1 {
            // A single subflow is a plain CUBIC flow (α1 = 1).
            self.cubic_mode = true;
            self.core.window_scale = 1.0;
            CaRule::Cubic { coupling: 1.0 }
        } else {
            let (_alpha1, scale, alpha2, total2) = coupled_cubic_alphas(&set);
            if large {
                // Step 5: the window in use is min(α1, 1) · W_CUBIC.
                if scale.is_finite() && scale > 0.0 {
                    self.core.window_scale = scale.max(MIN_CUBIC_SCALE);
                }
                // W_CUBIC evolves as plain CUBIC's (RFC 9438): a CUBIC flow
                // of window W_CUBIC would see 1/scale acks per ack of this
                // subflow, so each counts 1/scale in W_CUBIC's growth.
                CaRule::Cubic {
                    coupling: 1.0 / self.core.window_scale,
                }
            } else {
                // RFC 6356 §3 with α2 over the coupled virtual windows.
                CaRule::Linear {
                    per_pkt: (alpha2 / total2).min(1.0 / self.core.cwnd),
                }
            }
        };
        self.scratch = set;
        self.core.on_ack(now, ack, rule);
    }

    fn on_loss(&mut self, now: Instant, loss: &LossEvent, _paths: CoupledView<'_>) {
        self.core.validation.set_in_flight(loss.in_flight_pkts);
        if self
            .core
            .new_congestion_event(now, loss.largest_lost_sent_time)
        {
            if self.cubic_mode {
                // RFC 9438 §4.6 on the CUBIC window.
                self.core.reduce();
            } else {
                // RFC 6356 §3: halve, as Reno.
                self.core.halve();
            }
        }
    }

    fn on_rto(&mut self, now: Instant) {
        self.core.on_rto(now);
    }

    fn cwnd_pkts(&self) -> u32 {
        self.core.cwnd_pkts()
    }

    fn validate_window(&mut self, now: Instant) {
        self.core.validate_idle(now);
    }

    fn pipe_ack_pkts(&self, now: Instant) -> Option<u64> {
        self.core.validation.pipe_ack_pkts(now)
    }

    fn pacing_rate_bytes_per_s(&self) -> Option<u64> {
        if self.pacing {
            self.core.pacing_rate(self.mss_bytes)
        } else {
            None
        }
    }

    fn state(&self) -> &'static str {
        self.core.state()
    }

    fn ssthresh_pkts(&self) -> Option<u32> {
        self.core.ssthresh_pkts()
    }

    fn snapshot(&self, path: PathId, srtt: Duration, established: bool) -> CcSnapshot {
        self.own_path.set(Some(path));
        CcSnapshot {
            path,
            cwnd_pkts: self.window(),
            srtt,
            established,
            olia_l1_pkts: 0.0,
            olia_l2_pkts: 0.0,
            virtual_reno_cwnd_pkts: self.virtual_reno_cwnd_pkts(),
            virtual_reno_is_cubic: self.virtual_reno_is_cubic(),
        }
    }
}
