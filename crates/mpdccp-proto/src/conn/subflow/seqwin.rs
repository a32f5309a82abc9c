//! The sequence state of one subflow (RFC 4340 §7): our greatest sequence
//! number sent, the peer's greatest received and acknowledged, and the
//! validity windows built from them. All numbers are unwrapped to 64 bits;
//! the wire carries their low 48 (`seq::unwrap48`).

use crate::conn::seq::{unwrap48, SEQ_MASK};

/// Sequence numbers of one subflow, both directions.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SeqWindow {
    /// Initial Sequence Number Sent.
    pub(super) iss: u64,
    /// Greatest Sequence Number Sent.
    pub(super) gss: u64,
    /// Initial Sequence Number Received (valid once `have_isr`).
    pub(super) isr: u64,
    /// Greatest Sequence Number Received.
    pub(super) gsr: u64,
    /// Greatest Acknowledgement Number Received.
    pub(super) gar: u64,
    pub(super) have_isr: bool,
    /// Sequence Window (RFC 4340 §7.5.2), same value both ways.
    pub(super) window: u64,
}

impl SeqWindow {
    /// Fresh state from our ISS; `window` below 32 is raised to it
    /// (RFC 4340 §7.5.2 lower bound).
    pub(super) fn new(iss: u64, window: u64) -> Self {
        let iss = iss & SEQ_MASK;
        SeqWindow {
            iss,
            gss: iss,
            isr: 0,
            gsr: 0,
            gar: iss,
            have_isr: false,
            window: window.max(32),
        }
    }

    /// Consumes and returns the next sequence number to send.
    pub(super) fn next(&mut self) -> u64 {
        self.gss += 1;
        self.gss
    }

    /// Records the peer's initial sequence number.
    pub(super) fn set_isr(&mut self, wire_seq: u64) {
        self.isr = wire_seq;
        self.gsr = wire_seq;
        self.have_isr = true;
    }

    /// Unwraps a received 48-bit sequence number near GSR.
    pub(super) fn unwrap_seq(&self, wire: u64) -> u64 {
        unwrap48(self.gsr, wire)
    }
    /// Unwraps a received 48-bit acknowledgement number near GSS.
    pub(super) fn unwrap_ack(&self, wire: u64) -> u64 {
        unwrap48(self.gss, wire)
    }

    /// RFC 4340 §7.5.1 sequence validity window [SWL, SWH].
    pub(super) fn seq_bounds(&self) -> (u64, u64) {
        let w = self.window;
        let swl = (self.gsr + 1).saturating_sub(w / 4).max(self.isr);
        let swh = self.gsr + (3 * w).div_ceil(4);
        (swl, swh)
    }
    /// RFC 4340 §7.5.1 acknowledgement validity window [AWL, AWH].
    pub(super) fn ack_bounds(&self) -> (u64, u64) {
        let awl = (self.gss + 1).saturating_sub(self.window).max(self.iss);
        (awl, self.gss)
    }
}

#[cfg(test)]
mod tests {
    use crate::conn::seq::SEQ_MASK;

    use super::SeqWindow;

    #[test]
    fn the_windows_follow_rfc4340_section_7_5_1() {
        let mut s = SeqWindow::new(1000, 100);
        s.set_isr(5000);
        for _ in 0..10 {
            s.next();
        }
        // SWL = max(GSR + 1 - W/4, ISR), SWH = GSR + ceil(3W/4).
        assert_eq!(s.seq_bounds(), (5000, 5075));
        s.gsr = 5200;
        assert_eq!(s.seq_bounds(), (5201 - 25, 5275));
        // AWL = max(GSS + 1 - W, ISS), AWH = GSS.
        assert_eq!(s.ack_bounds(), (1000, 1010));
        for _ in 0..200 {
            s.next();
        }
        assert_eq!(s.ack_bounds(), (1211 - 100, 1210));
    }

    #[test]
    fn a_small_window_is_raised_and_iss_is_cut_to_48_bits() {
        let s = SeqWindow::new((1 << 48) + 7, 4);
        assert_eq!(s.window, 32);
        assert_eq!((s.iss, s.gss, s.gar), (7, 7, 7));
        assert!(!s.have_isr);
    }

    #[test]
    fn numbers_unwrap_near_their_own_direction() {
        let mut s = SeqWindow::new(SEQ_MASK - 1, 100);
        s.set_isr(10);
        // Our numbers wrapped past 2^48: an ack of wire 2 is 2^48 + 2.
        s.next();
        s.next();
        s.next();
        assert_eq!(s.gss, SEQ_MASK + 2);
        assert_eq!(s.unwrap_ack(1), SEQ_MASK + 2);
        // The peer's did not: wire 12 stays 12.
        assert_eq!(s.unwrap_seq(12), 12);
    }
}
