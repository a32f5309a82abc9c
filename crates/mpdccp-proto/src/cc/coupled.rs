//! Coupled multipath congestion control: LIA (RFC 6356), OLIA (Khalili et
//! al., "MPTCP is not Pareto-optimal", IEEE/ACM ToN 2013), BALIA (Peng et
//! al., "Multipath TCP: Analysis, Design and Implementation", IEEE/ACM ToN
//! 2016) and Coupled CUBIC (Lee, Kim, Kwon, Han, CSSE 45(1), 2023).
//!
//! Each path's controller reads the connection's [`CoupledView`]: the
//! [`CcSnapshot`] of every path *including its own* (taken before the event).
//! A controller finds its own entry by its window numbers; if the view lacks
//! it (a transport that passes `&[]`), the controller adds itself. Only
//! established paths with an RTT sample are coupled. With one such path each
//! controller reduces exactly to its single-path parent (Reno for LIA, OLIA
//! and BALIA, CUBIC for Coupled CUBIC), bit for bit: the coupled formula is
//! mathematically the parent's there, and is skipped to avoid rounding.

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
}

/// RFC 6356 §3 eq. (2): α = cwnd_total · max_i(cwnd_i/rtt_i²) /
/// (Σ_i cwnd_i/rtt_i)². Returns 1 for an empty or degenerate set.
pub fn lia_alpha(paths: &[CoupledPath]) -> f64 {
    let total: f64 = paths.iter().map(|p| p.cwnd_pkts).sum();
    let best = paths
        .iter()
        .map(|p| p.cwnd_pkts / (p.rtt_s * p.rtt_s))
        .fold(0.0, f64::max);
    let sum: f64 = paths.iter().map(|p| p.cwnd_pkts / p.rtt_s).sum();
    let alpha = total * best / (sum * sum);
    if alpha.is_finite() && alpha > 0.0 {
        alpha
    } else {
        1.0
    }
}

/// Coupled CUBIC (Lee et al. 2023, §3): the loss rate at which CUBIC's
/// average window (RFC 9438 §5.1) equals `w_cubic`:
/// p̂ = (1.054 · RTT^0.75 / W_CUBIC)^(4/3).
pub fn cubic_equivalent_loss_rate(w_cubic_pkts: f64, rtt_s: f64) -> f64 {
    (1.054 * rtt_s.powf(0.75) / w_cubic_pkts).powf(4.0 / 3.0)
}

/// Coupled CUBIC: the Reno window at that loss rate, W_Reno = √(3/(2p̂)),
/// which stands in for the CUBIC path in LIA's α.
pub fn virtual_reno_window(w_cubic_pkts: f64, rtt_s: f64) -> f64 {
    let p = cubic_equivalent_loss_rate(w_cubic_pkts, rtt_s);
    let w = (1.5 / p).sqrt();
    if w.is_finite() {
        w
    } else {
        w_cubic_pkts
    }
}

/// The coupled set from the view plus this path: returns the set and the
/// index of this path in it. `own` carries this path's current numbers;
/// `matches` recognises its (possibly slightly older) view entry.
fn coupled_set(
    view: CoupledView<'_>,
    own: CoupledPath,
    matches: impl Fn(&CcSnapshot) -> bool,
) -> (Vec<CoupledPath>, usize) {
    let mut set = Vec::with_capacity(view.len() + 1);
    let mut own_idx = None;
    for snap in view {
        if own_idx.is_none() && matches(snap) {
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
            });
        }
    }
    let idx = own_idx.unwrap_or_else(|| {
        set.push(own);
        set.len() - 1
    });
    (set, idx)
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
        }
    }

    fn own(&self, rtt_s: f64) -> CoupledPath {
        CoupledPath {
            cwnd_pkts: self.window.cwnd,
            rtt_s,
            l1_pkts: self.l1_pkts,
            l2_pkts: self.l2_pkts,
        }
    }

    fn set(&self, view: CoupledView<'_>, rtt_s: f64) -> (Vec<CoupledPath>, usize) {
        let (cwnd, l1, l2) = (self.window.cwnd, self.l1_pkts, self.l2_pkts);
        coupled_set(view, self.own(rtt_s), |s| {
            s.cwnd_pkts == cwnd && s.olia_l1_pkts == l1 && s.olia_l2_pkts == l2
        })
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

    fn on_packet_sent(&mut self, _now: Instant, pkt: &SentPacket) {
        self.window.on_packet_sent(pkt);
    }

    fn on_ack(&mut self, _now: Instant, ack: &AckEvent, paths: CoupledView<'_>) {
        // Before any state change, so the view's entry for this path still
        // matches it.
        let (set, me) = self.set(paths, srtt_s(ack));
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
    }

    fn on_loss(&mut self, now: Instant, loss: &LossEvent, paths: CoupledView<'_>) {
        if self
            .window
            .new_congestion_event(now, loss.largest_lost_sent_time)
        {
            let (set, me) = self.set(paths, self.srtt.as_secs_f64());
            let new = self.decrease(&set, me);
            self.window.reduce_to(new);
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

    fn state(&self) -> &'static str {
        self.window.state()
    }

    fn ssthresh_pkts(&self) -> Option<u32> {
        self.window.ssthresh_pkts()
    }

    fn snapshot(&self, path: PathId, srtt: Duration, established: bool) -> CcSnapshot {
        CcSnapshot {
            path,
            cwnd_pkts: self.window.cwnd,
            srtt,
            established,
            olia_l1_pkts: self.l1_pkts,
            olia_l2_pkts: self.l2_pkts,
            virtual_reno_cwnd_pkts: self.window.cwnd,
        }
    }
}

/// Coupled CUBIC (Lee et al. 2023): CUBIC on large-BDP paths, coupled to
/// the other subflows through LIA's α computed over virtual Reno windows;
/// LIA on small-BDP paths.
///
/// On a large-BDP path the CUBIC window W_CUBIC evolves as plain CUBIC
/// (RFC 9438) under the path's losses; its virtual Reno window
/// W_Reno = √(3/(2p̂)) is what a Reno flow would hold at the same loss rate,
/// and stands in for the path in LIA's α (α1, over every path's virtual
/// window). LIA (RFC 6356 §3) gives a Reno flow of window w the per-ack
/// increase min(α/W_total, 1/w) instead of 1/w; an AIMD window in
/// equilibrium scales with the square root of that ratio (w = √(2a·w/p)),
/// so the window in use is W_CUBIC · f with f = √min(1, α1·W_Reno/ΣW_Reno)
/// — the paper's W_coupledCUBIC = VirtualW_Reno·W_CUBIC/W_Reno with
/// VirtualW_Reno the LIA-coupled Reno window. (Two identical paths: α1 = ½,
/// f = ½, so together they take one CUBIC flow's share, as LIA does for
/// Reno.) With one path f ≡ 1 and the controller is CUBIC.
#[derive(Clone, Debug)]
pub struct CoupledCubic {
    core: CubicCore,
    bdp_threshold_pkts: f64,
    /// Smoothed bandwidth-delay product estimate, packets.
    bdp_pkts: Option<f64>,
    cubic_mode: bool,
    pacing: bool,
    mss_bytes: u32,
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
            virtual_reno_window(self.core.cwnd, rtt)
        } else {
            self.window()
        }
    }

    fn window(&self) -> f64 {
        self.core.window_scale * self.core.cwnd
    }

    fn set(&self, view: CoupledView<'_>, rtt_s: f64) -> (Vec<CoupledPath>, usize) {
        let own = CoupledPath {
            cwnd_pkts: self.virtual_reno_cwnd_pkts(),
            rtt_s,
            l1_pkts: 0.0,
            l2_pkts: 0.0,
        };
        let (cwnd, vreno) = (self.window(), self.virtual_reno_cwnd_pkts());
        coupled_set(view, own, |s| {
            s.cwnd_pkts == cwnd && s.virtual_reno_cwnd_pkts == vreno
        })
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
        let rtt_s = srtt_s(ack);
        let (set, me) = self.set(paths, rtt_s);
        self.update_bdp(ack);
        let rule = if set.len() <= 1 {
            // A single subflow is a plain CUBIC flow.
            self.cubic_mode = true;
            self.core.window_scale = 1.0;
            CaRule::Cubic { coupling: 1.0 }
        } else {
            let alpha = lia_alpha(&set);
            let total: f64 = set.iter().map(|p| p.cwnd_pkts).sum();
            let own = set[me].cwnd_pkts;
            // Large- or small-BDP path (until a delivery-rate sample
            // exists the window stands in for the BDP).
            let large = self.bdp_pkts.unwrap_or(self.window()) >= self.bdp_threshold_pkts;
            if large {
                self.cubic_mode = true;
                let f = (alpha * own / total).min(1.0).sqrt();
                if f.is_finite() && f > 0.0 {
                    self.core.window_scale = f;
                }
                CaRule::Cubic { coupling: 1.0 }
            } else {
                if self.cubic_mode {
                    self.fold_scale();
                }
                self.cubic_mode = false;
                // RFC 6356 §3.
                CaRule::Linear {
                    per_pkt: (alpha / total).min(1.0 / self.core.cwnd),
                }
            }
        };
        self.core.on_ack(now, ack, rule);
    }

    fn on_loss(&mut self, now: Instant, loss: &LossEvent, _paths: CoupledView<'_>) {
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
        CcSnapshot {
            path,
            cwnd_pkts: self.window(),
            srtt,
            established,
            olia_l1_pkts: 0.0,
            olia_l2_pkts: 0.0,
            virtual_reno_cwnd_pkts: self.virtual_reno_cwnd_pkts(),
        }
    }
}
