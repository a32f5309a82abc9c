//! Active queue management of the send queue, sized in time rather than in
//! packets: CoDel (RFC 8289) and a hard age limit.
//!
//! Why: the send queue in front of the scheduler fills whenever the
//! tunnelled traffic offers more than the paths' congestion windows carry
//! (a bulk TCP flow inside the tunnel always does). A queue bounded only in
//! packets then holds a standing delay that every other flow in the tunnel
//! waits behind; CoDel drops at its head once the sojourn time stayed above
//! `target` for an `interval`, which tells the tunnelled TCP to slow down
//! while the paths' own congestion control still governs the network
//! queues. The age limit drops what waited so long that it is useless (a
//! path that was down, a peer that restarted).

use std::time::Duration;

use crate::time::Instant;

/// CoDel's two parameters (RFC 8289 §4.3, §4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoDelConfig {
    /// Acceptable standing sojourn time (RFC default 5 ms).
    pub target: Duration,
    /// Time the sojourn must stay above `target` before the first drop, and
    /// the base of the drop spacing `interval / sqrt(count)` (RFC default
    /// 100 ms, "on the order of a worst-case RTT").
    pub interval: Duration,
}

impl Default for CoDelConfig {
    /// RFC 8289's defaults.
    fn default() -> Self {
        CoDelConfig {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
        }
    }
}

/// CoDel's state (RFC 8289 §5, variables of its pseudocode).
#[derive(Clone, Debug)]
pub(crate) struct CoDel {
    cfg: CoDelConfig,
    /// When the sojourn time will have been above target for an interval
    /// (`first_above_time`; `None` = 0 in the RFC: below target).
    first_above: Option<Instant>,
    /// In the dropping state.
    dropping: bool,
    /// Next drop while dropping (`drop_next`).
    drop_next: Instant,
    /// Drops in this dropping state (`count`), and at its start (`lastcount`).
    count: u32,
    last_count: u32,
}

impl CoDel {
    pub fn new(cfg: CoDelConfig) -> Self {
        CoDel {
            cfg,
            first_above: None,
            dropping: false,
            drop_next: Instant::ZERO,
            count: 0,
            last_count: 0,
        }
    }

    /// RFC 8289 §5.4 `dodequeue`'s test for the head packet: its sojourn
    /// time and whether more than one packet's worth is queued
    /// (`queue_bytes > mtu`; with one packet queued there is nothing to gain).
    fn ok_to_drop(&mut self, now: Instant, sojourn: Duration, above_one_packet: bool) -> bool {
        if sojourn < self.cfg.target || !above_one_packet {
            self.first_above = None;
            return false;
        }
        match self.first_above {
            None => {
                self.first_above = Some(now + self.cfg.interval);
                false
            }
            Some(t) => now >= t,
        }
    }

    /// `control_law` (RFC 8289 §5.5): `t + interval / sqrt(count)`.
    fn control_law(&self, t: Instant) -> Instant {
        let n = f64::from(self.count.max(1));
        t + self.cfg.interval.div_f64(n.sqrt())
    }

    /// RFC 8289 §5.5 `dequeue`, one decision at a time: whether the head
    /// packet (sojourn `sojourn`) is to be dropped at `now`. The caller
    /// drops it and asks again for the next head, or keeps it.
    pub fn drop_head(&mut self, now: Instant, sojourn: Duration, above_one_packet: bool) -> bool {
        let ok = self.ok_to_drop(now, sojourn, above_one_packet);
        if self.dropping {
            if !ok {
                self.dropping = false;
                return false;
            }
            if now >= self.drop_next {
                self.count += 1;
                self.drop_next = self.control_law(self.drop_next);
                return true;
            }
            return false;
        }
        if !ok {
            return false;
        }
        // Enter the dropping state; resume near the old rate if it ended
        // recently (RFC 8289 §5.5, "delta > 1 && now - drop_next < 16 * interval").
        self.dropping = true;
        let delta = self.count.saturating_sub(self.last_count);
        let recent = now.saturating_duration_since(self.drop_next) < self.cfg.interval * 16;
        self.count = if delta > 1 && recent { delta } else { 1 };
        self.drop_next = self.control_law(now);
        self.last_count = self.count;
        true
    }

    /// The queue emptied: nothing stands above target.
    pub fn on_empty(&mut self) {
        self.first_above = None;
    }

    /// Whether this state decides exactly as a new one would: not dropping,
    /// nothing above target, and no drop rate worth resuming (§5.5 resumes
    /// only when `count - lastcount > 1`). Such a state can be forgotten.
    pub fn is_like_new(&self) -> bool {
        !self.dropping
            && self.first_above.is_none()
            && self.count.saturating_sub(self.last_count) <= 1
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::time::Instant;

    use super::{CoDel, CoDelConfig};

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    /// A standing sojourn above target: no drop during the first interval,
    /// then drops spaced interval / sqrt(count) (RFC 8289 §5.5).
    #[test]
    fn drops_follow_the_control_law() {
        let mut c = CoDel::new(CoDelConfig::default());
        let t0 = Instant::ZERO + ms(1000);
        let mut drops = Vec::new();
        // Ask every millisecond for 400 ms with a sojourn of 20 ms.
        for k in 0..=400u64 {
            let now = t0 + ms(k);
            while c.drop_head(now, ms(20), true) {
                drops.push(k);
            }
        }
        // First drop when the sojourn has been above target for 100 ms.
        assert_eq!(drops[0], 100);
        // Then at 100/sqrt(1), 100/sqrt(2), 100/sqrt(3)… after the previous one.
        let mut next = 100.0;
        for (i, &d) in drops.iter().enumerate().skip(1) {
            next += 100.0 / (i as f64).sqrt();
            assert!(
                (d as f64 - next).abs() <= 1.0,
                "drop {i} at {d} ms, control law says {next:.1}"
            );
        }
        assert!(drops.len() >= 4, "{drops:?}");
    }

    /// Below target, or one packet in the queue: never a drop, and the
    /// dropping state ends.
    #[test]
    fn no_drop_below_target_or_with_one_packet() {
        let mut c = CoDel::new(CoDelConfig::default());
        let t0 = Instant::ZERO;
        for k in 0..500u64 {
            assert!(!c.drop_head(t0 + ms(k), ms(4), true));
            assert!(!c.drop_head(t0 + ms(k), ms(50), false));
        }
        // Into dropping, then the sojourn falls below target: dropping ends.
        let mut dropped = false;
        for k in 500..700u64 {
            dropped |= c.drop_head(t0 + ms(k), ms(50), true);
        }
        assert!(dropped);
        assert!(!c.drop_head(t0 + ms(700), ms(1), true));
        assert!(!c.dropping);
    }
}
