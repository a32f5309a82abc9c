//! The bounded DCCP header of a data packet: what one data
//! packet carries is decided before it is built, so that its header never
//! exceeds [`DATA_HEADER_MAX`] whatever the loss pattern.
//!
//! MP_SEQ is always there (RFC 9897 §3.2.5: every data packet carries
//! one). The acknowledgement (sub-header + Ack Vector) rides along only
//! whole: an Ack Vector is never cut to fit (RFC 4340 §11.4), so when it
//! does not fit and an acknowledgement is owed, a pure DCCP-Ack goes first
//! and the data follows; when none is owed the data goes as DCCP-Data. The
//! optional options (an Ack Ratio change or its Confirm, MP_RTT, MP_PRIO,
//! MP_CONFIRM) come along only where they fit; MP_PRIO and MP_CONFIRM that
//! do not fit are sent first on a pure Ack, the others wait.

use super::Subflow;
use crate::conn::codec::confirm_len;
use crate::conn::DATA_HEADER_MAX;
use crate::time::Instant;
use crate::wire::{FeatureNum, MpOption};

use super::emit::EmitCtx;

/// What one data packet carries besides MP_SEQ and the payload.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DataPlan {
    /// DCCP-DataAck with the Ack Vector; false = DCCP-Data.
    pub ack: bool,
    /// Change L(Ack Ratio) (RFC 4341 §6.1.2).
    pub ratio_change: bool,
    /// Confirm R(Ack Ratio).
    pub ratio_confirm: bool,
    pub rtt: bool,
    pub prio: bool,
    /// MP_CONFIRM items taken from the pending ones.
    pub confirms: usize,
    /// Something owed does not fit: a pure Ack goes before the data.
    pub ack_first: bool,
}

/// Bytes of a one-value feature option (type, length, feature, value).
fn feat_len(f: FeatureNum) -> usize {
    3 + f.nn_len().unwrap_or(1)
}

/// Whether a header of the fixed part plus `opts` bytes of options,
/// padded to 4 (RFC 4340 §5.8), fits the bound.
fn fits(ack: bool, opts: usize) -> bool {
    let fixed = if ack { 24 } else { 16 };
    (fixed + opts).div_ceil(4) * 4 <= DATA_HEADER_MAX
}

impl Subflow {
    /// The Ack Vector the next acknowledgement carries.
    pub(crate) fn next_ack_vector(&mut self, ctx: &EmitCtx) -> crate::wire::AckVector {
        let spare = std::mem::take(&mut self.acks.av_spare);
        self.acks.rx.encode_in(
            self.ack_cover(ctx.ackvec_cover_pkts),
            super::emit::ACKVEC_MAX_CELLS,
            spare,
        )
    }

    /// The cells of an Ack Vector no longer needed: the next one reuses them.
    pub(crate) fn recycle_ack_vector(&mut self, av: crate::wire::AckVector) {
        self.acks.av_spare = av.cells;
    }

    /// Plans the next data packet given the Ack Vector it would carry.
    pub(crate) fn plan_data(&self, now: Instant, ctx: &EmitCtx, av_cells: usize) -> DataPlan {
        let profile = ctx.profile;
        let mp_seq = if ctx.mp_on {
            MpOption::Seq(0).buffer_len_in(profile)
        } else {
            0
        };
        let av = 2 + av_cells;
        let owed = self.wants_ack(now);
        let rtt_due = ctx.mp_on
            && self.tx.rtt.srtt().is_some()
            && self
                .mp
                .last_mp_rtt_sent
                .is_none_or(|t| now - t >= ctx.mp_rtt_interval);
        // Only read when MP_RTT is due (now and then).
        let rtt_len = if rtt_due {
            MpOption::Rtt {
                rtt_type: crate::wire::mp::RttType::from_u8(0),
                rtt_ms: 0,
                age_ms: 0,
            }
            .buffer_len_in(profile)
        } else {
            0
        };
        let mut p = DataPlan {
            ack: fits(true, mp_seq + av),
            ..DataPlan::default()
        };
        // No acknowledgement owed: its Ack Vector gives way to MP_RTT.
        if p.ack && !owed && rtt_due && !fits(true, mp_seq + av + rtt_len) {
            p.ack = false;
        }
        let mut used = mp_seq + if p.ack { av } else { 0 };
        let take = |len: usize, used: &mut usize| {
            let ok = fits(p.ack, *used + len);
            if ok {
                *used += len;
            }
            ok
        };
        // Feature options are not allowed on DCCP-Data (RFC 4340 §5.8).
        let want_ratio = self.desired_ack_ratio(ctx.ack_ratio) != self.acks.ack_ratio_tx
            || self.acks.ack_ratio_unconfirmed;
        p.ratio_change = p.ack && want_ratio && take(feat_len(FeatureNum::AckRatio), &mut used);
        p.ratio_confirm = p.ack
            && self.pend.confirm_ack_ratio.is_some()
            && take(feat_len(FeatureNum::AckRatio), &mut used);
        p.rtt = rtt_due && take(rtt_len, &mut used);
        let prio_due = ctx.mp_on && self.prio_due(now);
        // In the authenticated modes MP_PRIO brings its MP_HMAC.
        let prio_len = MpOption::Prio(0).buffer_len_in(profile)
            + match ctx.keys {
                Some(crate::conn::keys::ConnKeys::Derived { .. }) => {
                    MpOption::Hmac([0; 20]).buffer_len_in(profile)
                }
                _ => 0,
            };
        p.prio = prio_due && take(prio_len, &mut used);
        if ctx.mp_on && !self.pend.confirms.is_empty() {
            let most = self
                .pend
                .confirms
                .len()
                .min(crate::conn::codec::MAX_CONFIRMS);
            for n in (1..=most).rev() {
                if take(confirm_len(&self.pend.confirms[..n], profile), &mut used) {
                    p.confirms = n;
                    break;
                }
            }
        }
        p.ack_first = (owed && !p.ack)
            || (prio_due && !p.prio)
            || (!self.pend.confirms.is_empty() && ctx.mp_on && p.confirms == 0);
        p
    }
}
