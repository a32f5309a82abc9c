//! The loop every packet thread runs: the client, a single-threaded
//! server, each server worker. One wake-up: the daemon's own chores
//! ([`Daemon::prepare`]), the core's timers, the core's events and output
//! ([`Daemon::work`]), then one `ppoll` over the TUN, the daemon's sockets
//! and the signal and ops fds until the earliest deadline, then the input
//! that arrived. Signals and `close` on the control socket start a graceful
//! close; the loop ends when the daemon has nothing left open or after
//! [`CLOSE_GRACE`].
//!
//! Generic over the daemon (monomorphised), not `dyn`: the calls inside
//! run per wake-up and per packet batch, and are inlined into each
//! daemon's own copy of the loop.

use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use mpdccp_proto::Instant;
use tracing::info;

use super::ops::OpsServer;
use super::status_doc::StatusDoc;
use super::{PollSet, SignalPipe};
use crate::clock;

/// How long a graceful close may take before the daemon exits anyway.
pub(super) const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// After [`Daemon::work`]: wait for input, or start the wake-up over at
/// once (the client made a new connection).
pub(super) enum Step {
    Wait,
    Again,
}

/// Where the close requests come from.
pub(super) enum Control<'a> {
    /// The process's own signals and control socket (the client, a
    /// single-threaded server).
    Main {
        signals: &'a SignalPipe,
        ops: &'a OpsServer,
    },
    /// A server worker: the main thread hears them and asks the worker
    /// through its mailbox (the worker's own fd, `Daemon::take_requests`).
    Worker,
}

/// What a packet thread does in the shared loop.
pub(super) trait Daemon {
    /// Logged when a signal starts the graceful close.
    const SIGNAL_CLOSE: &'static str;
    /// Before the timers, every wake-up (the client's path manager).
    fn prepare(&mut self, _now: Instant, _closing: bool) {}
    fn poll_timeout(&self) -> Option<Instant>;
    fn handle_timeout(&mut self, now: Instant);
    /// The core's events (delivery to the TUN) and output (to the sockets).
    fn work(&mut self, now: Instant, closing: bool) -> anyhow::Result<Step>;
    /// While closing: nothing is left open, the loop may end.
    fn drained(&self) -> bool;
    /// The daemon's deadlines besides the core's.
    fn deadline(&self) -> Option<Instant> {
        None
    }
    /// The TUN queue this thread reads.
    fn tun_fd(&self) -> RawFd;
    /// Readable when another thread read TUN frames for this one (the
    /// client's standby reader); `handle_tun` then takes them.
    fn tun_handoff_fd(&self) -> Option<RawFd> {
        None
    }
    /// Adds the daemon's sockets (and other fds) to `poll`.
    fn register(&mut self, poll: &mut PollSet);
    /// A server worker's mailbox (handed-over packets, status requests);
    /// `true`: close.
    fn take_requests(&mut self, _poll: &PollSet, _now: Instant) -> bool {
        false
    }
    /// Reads the daemon's sockets that `poll` found readable.
    fn on_ready(&mut self, poll: &PollSet, now: Instant);
    /// Reads the TUN (the packets to tunnel); not while closing.
    fn handle_tun(&mut self, now: Instant, buf: &mut [u8], seg: &mut [u8]);
    /// Starts the graceful close (MP_CLOSE on every connection).
    fn close(&mut self, now: Instant);
    fn status(&self) -> StatusDoc;
}

/// Runs `d` until closed (and drained, or the grace over).
pub(super) fn drive<D: Daemon>(
    d: &mut D,
    control: Control,
    busy_poll: Duration,
) -> anyhow::Result<()> {
    let mut tunbuf = vec![0u8; 65_536 + crate::offload::VNET_HDR_LEN];
    let mut segbuf = vec![0u8; 65_536];
    let mut poll = PollSet::with_capacity(24).with_busy_poll(busy_poll);
    let mut closing: Option<Instant> = None;
    loop {
        let now = clock::now();
        d.prepare(now, closing.is_some());
        if d.poll_timeout().is_some_and(|t| t <= now) {
            d.handle_timeout(now);
        }
        if let Step::Again = d.work(now, closing.is_some())? {
            continue;
        }
        if closing.is_some_and(|t| d.drained() || now >= t) {
            break;
        }
        poll.clear();
        let i_tun = poll.add(d.tun_fd());
        let i_handoff = d.tun_handoff_fd().map(|fd| poll.add(fd));
        let fds = match control {
            Control::Main { signals, ops } => {
                Some((poll.add(signals.as_raw_fd()), poll.add(ops.wake_fd())))
            }
            Control::Worker => None,
        };
        d.register(&mut poll);
        // The core's deadline is later than the `handle_timeout` above
        // (`Connection::handle_timeout`), so sleeping until it cannot spin.
        let deadline = [d.poll_timeout(), d.deadline(), closing]
            .into_iter()
            .flatten()
            .min();
        poll.wait(clock::now(), deadline)?;
        let now = clock::now();
        if let (Control::Main { signals, ops }, Some((i_sig, i_ops))) = (&control, fds) {
            if poll.readable(i_sig) && signals.take() && closing.is_none() {
                info!("signal: {}", D::SIGNAL_CLOSE);
                super::notify::stopping();
                start_close(d, &mut closing, now);
            }
            if poll.readable(i_ops) && ops.handle_requests(&|| d.status()) {
                start_close(d, &mut closing, now);
            }
        }
        if d.take_requests(&poll, now) {
            start_close(d, &mut closing, now);
        }
        d.on_ready(&poll, now);
        let handed_over = i_handoff.is_some_and(|i| poll.readable(i));
        if (poll.readable(i_tun) || handed_over) && closing.is_none() {
            d.handle_tun(clock::now(), &mut tunbuf, &mut segbuf);
        }
    }
    Ok(())
}

fn start_close<D: Daemon>(d: &mut D, closing: &mut Option<Instant>, now: Instant) {
    if closing.is_none() {
        d.close(now);
        *closing = Some(now + CLOSE_GRACE);
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::fd::{AsRawFd, RawFd};
    use std::os::unix::net::UnixStream;

    use super::*;

    /// A daemon whose "TUN" is a socket that stays readable (never read
    /// empty), asking to close on its third wake-up.
    struct Fake {
        tun: UnixStream,
        _writer: UnixStream,
        timer: Option<Instant>,
        timeouts: u32,
        works: u32,
        tun_reads: u32,
        tun_reads_closing: u32,
        /// `work` calls when `close` came; `None`: not closed.
        closed_at: Option<u32>,
        closes: u32,
        /// Drained this many wake-ups after the close (`None`: never).
        drains_after: Option<u32>,
    }

    impl Fake {
        fn new(drains_after: Option<u32>) -> Fake {
            let (tun, mut writer) = UnixStream::pair().unwrap();
            writer.write_all(b"packet").unwrap();
            tun.set_nonblocking(true).unwrap();
            Fake {
                tun,
                _writer: writer,
                timer: Some(clock::now()),
                timeouts: 0,
                works: 0,
                tun_reads: 0,
                tun_reads_closing: 0,
                closed_at: None,
                closes: 0,
                drains_after,
            }
        }
    }

    impl Daemon for Fake {
        const SIGNAL_CLOSE: &'static str = "test";
        fn poll_timeout(&self) -> Option<Instant> {
            self.timer
        }
        fn handle_timeout(&mut self, _now: Instant) {
            self.timeouts += 1;
            self.timer = None;
        }
        fn work(&mut self, _now: Instant, closing: bool) -> anyhow::Result<Step> {
            assert_eq!(closing, self.closed_at.is_some());
            self.works += 1;
            Ok(Step::Wait)
        }
        fn drained(&self) -> bool {
            match (self.closed_at, self.drains_after) {
                (Some(at), Some(n)) => self.works >= at + n,
                _ => false,
            }
        }
        fn tun_fd(&self) -> RawFd {
            self.tun.as_raw_fd()
        }
        fn register(&mut self, _poll: &mut PollSet) {}
        fn take_requests(&mut self, _poll: &PollSet, _now: Instant) -> bool {
            self.works >= 3
        }
        fn on_ready(&mut self, _poll: &PollSet, _now: Instant) {}
        fn handle_tun(&mut self, _now: Instant, _buf: &mut [u8], _seg: &mut [u8]) {
            self.tun_reads += 1;
            self.tun_reads_closing += u32::from(self.closed_at.is_some());
        }
        fn close(&mut self, _now: Instant) {
            self.closes += 1;
            self.closed_at = Some(self.works);
            if self.drains_after.is_none() {
                // Nothing readable from now on: the loop sleeps to the grace.
                let mut b = [0u8; 16];
                while matches!(self.tun.read(&mut b), Ok(n) if n > 0) {}
            }
        }
        fn status(&self) -> StatusDoc {
            StatusDoc::default()
        }
    }

    /// A due timer is handled once; a close request closes once, the TUN
    /// is not read while closing, and the loop ends as soon as the daemon
    /// is drained (not at the grace's end).
    #[test]
    fn a_close_request_closes_once_and_the_loop_ends_when_drained() {
        let start = clock::now();
        let mut d = Fake::new(Some(2));
        drive(&mut d, Control::Worker, Duration::ZERO).unwrap();
        assert_eq!(d.timeouts, 1);
        assert_eq!(d.closes, 1);
        assert_eq!(d.closed_at, Some(3));
        assert_eq!(d.works, 5);
        assert_eq!(d.tun_reads, 2, "read on the wake-ups before the close");
        assert_eq!(d.tun_reads_closing, 0);
        assert!(clock::now() - start < CLOSE_GRACE);
    }

    /// A daemon that never drains is left after the grace.
    #[test]
    fn a_close_that_never_drains_ends_after_the_grace() {
        let start = clock::now();
        let mut d = Fake::new(None);
        drive(&mut d, Control::Worker, Duration::ZERO).unwrap();
        assert_eq!(d.closes, 1);
        assert_eq!(d.tun_reads_closing, 0);
        assert!(clock::now() - start >= CLOSE_GRACE);
    }
}
