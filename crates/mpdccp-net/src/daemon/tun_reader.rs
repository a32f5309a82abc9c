//! The client's standby TUN reader: a thread that reads the TUN only when
//! the packet thread is late, so the kernel's ring (`txqueuelen` packets,
//! about 5 ms of a local sender at full speed) does not overflow while
//! the packet thread is busy with the protocol or waits for a CPU. The
//! TUN orphans each packet as it enters the ring (`tun_net_xmit`:
//! `skb_orphan`), so a full ring drops instead of slowing the sender down.
//!
//! The packet thread reads the TUN itself whenever it is woken, so a
//! packet costs one wake-up as before (a reader thread that read every
//! packet added a second one: +0.1 ms idle ping on this machine). The
//! standby thread looks every [`TICK`] while traffic flows: when the ring
//! held packets at two looks in a row and the packet thread did not read it
//! in between, it reads the ring empty into batches and hands them over
//! through a channel, signalling an eventfd the packet thread polls. One
//! thread reads at a time (a token both only try to take), and the packet
//! thread takes the handed-over batches before it reads the ring again,
//! so packets keep their order. After [`PARK_AFTER`] without TUN traffic
//! the thread sleeps until the packet thread's next turn wakes it.
//!
//! The batches are allocated once and recycled, so memory is bounded
//! ([`BATCHES`] × [`BATCH_BYTES`], touched only as far as used): a packet
//! thread that falls that far behind makes the reader wait, and the ring
//! takes the excess as before. The core stays on the packet thread; the
//! standby thread only moves bytes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::tun::Tun;

/// The largest frame a TUN read returns: a 64 kB super-packet with its
/// `virtio_net_hdr`.
const FRAME_MAX: usize = 65_536 + crate::offload::VNET_HDR_LEN;
/// One batch's buffer: room for at least four largest frames.
const BATCH_BYTES: usize = 4 * FRAME_MAX;
/// Frames per batch at most, so a steady stream is handed over at least
/// every 64 reads.
const FRAMES_PER_BATCH: usize = 64;
/// Batches in circulation: 64 × 64 datagrams = 4096 beyond the ring's
/// `txqueuelen` for a stream of small datagrams (20 ms at 2 Gbit/s of
/// 1200-byte datagrams; 16 MB at most).
const BATCHES: usize = 64;
/// How often the standby thread looks while traffic flows: a ring with
/// packets at two looks in a row and no read of the ring by the packet thread
/// between them is read by the standby thread (so after 1–2 ticks, well
/// within the 5 ms a 2000-packet ring lasts).
const TICK: Duration = Duration::from_millis(1);
/// Without TUN traffic for this long the standby thread sleeps until the
/// packet thread's next turn (no wake-ups on an idle host).
const PARK_AFTER: Duration = Duration::from_secs(1);

/// Frames read back to back into one buffer.
struct Frames {
    buf: Vec<u8>,
    /// Where each frame ends in `buf` (the next one starts there).
    ends: Vec<usize>,
}

impl Frames {
    fn new() -> Frames {
        Frames {
            // Zeroed by the allocator (fresh pages): only what is read into
            // is ever touched.
            buf: vec![0; BATCH_BYTES],
            ends: Vec::with_capacity(FRAMES_PER_BATCH),
        }
    }

    fn used(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    fn has_room(&self) -> bool {
        self.ends.len() < FRAMES_PER_BATCH && BATCH_BYTES - self.used() >= FRAME_MAX
    }

    /// Frame `i`, writable: the taker completes checksums where they lie.
    fn frame_mut(&mut self, i: usize) -> &mut [u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &mut self.buf[start..self.ends[i]]
    }
}

/// A non-blocking eventfd: one thread signals, the other polls and clears.
struct EventFd(OwnedFd);

impl EventFd {
    fn new() -> io::Result<EventFd> {
        // SAFETY: plain flags; the fd is checked and then owned.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh eventfd we own.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 readable bytes; a full counter (never here) only fails.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    fn clear(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into `v`; EAGAIN when not signalled.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

/// Frames and packets a turn may take (or took).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Budget {
    pub frames: usize,
    pub pkts: usize,
}

impl Budget {
    /// Whether more may be taken after `used`.
    fn allows(self, used: Budget) -> bool {
        used.frames < self.frames && used.pkts < self.pkts
    }

    /// `self` and one frame of `pkts` packets.
    fn add(self, pkts: usize) -> Budget {
        Budget {
            frames: self.frames + 1,
            pkts: self.pkts + pkts,
        }
    }
}

/// What both threads see.
struct Shared {
    /// Held by the thread reading the TUN; both only try to take it.
    token: AtomicBool,
    /// The packet thread's turns at the ring so far (reads of its own).
    turns: AtomicU64,
    /// The standby thread sleeps until `kick` (no traffic for PARK_AFTER).
    parked: AtomicBool,
    /// Frames the standby thread read (it was needed).
    frames: AtomicU64,
    /// Read errors other than an empty ring (the reader then pauses 1 ms).
    errors: AtomicU64,
    stopping: AtomicBool,
    /// Frames are waiting in the channel.
    ready: EventFd,
    /// Wakes a parked standby thread, or one being stopped.
    kick: EventFd,
}

impl Shared {
    fn new() -> io::Result<Self> {
        Ok(Shared {
            token: AtomicBool::new(false),
            turns: AtomicU64::new(0),
            parked: AtomicBool::new(false),
            frames: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            ready: EventFd::new()?,
            kick: EventFd::new()?,
        })
    }

    fn try_token(&self) -> bool {
        self.token
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    fn release_token(&self) {
        self.token.store(false, Ordering::Release);
    }
}

/// The packet thread's side: reads the TUN, and takes what the standby
/// thread read first.
pub struct TunReader {
    tun: Arc<Tun>,
    shared: Arc<Shared>,
    handoff: Handoff,
    thread: Option<JoinHandle<()>>,
}

/// The batches the standby thread handed over, and the way back.
struct Handoff {
    full: Receiver<Frames>,
    /// `None` only while dropping (closing it releases a waiting reader).
    free: Option<SyncSender<Frames>>,
    /// A batch partly taken (the per-wake-up budget ran out inside it) and
    /// the next frame to take from it.
    current: Option<(Frames, usize)>,
}

impl TunReader {
    /// Starts the standby thread for `tun` (non-blocking fd, as opened).
    pub fn spawn(tun: Arc<Tun>) -> io::Result<TunReader> {
        let (full_tx, full) = mpsc::sync_channel(BATCHES);
        let (free, free_rx) = mpsc::sync_channel(BATCHES);
        for _ in 0..BATCHES {
            free.send(Frames::new()).expect("the receiver is alive");
        }
        let shared = Arc::new(Shared::new()?);
        let standby = Standby {
            tun: tun.clone(),
            shared: shared.clone(),
            full: full_tx,
            free: free_rx,
        };
        let thread = std::thread::Builder::new()
            .name("tun-standby".into())
            .spawn(move || standby.run())?;
        Ok(TunReader {
            tun,
            shared,
            handoff: Handoff {
                full,
                free: Some(free),
                current: None,
            },
            thread: Some(thread),
        })
    }

    /// Readable when the standby thread handed frames over (for the
    /// packet thread's poll set, beside the TUN itself).
    pub fn handoff_fd(&self) -> RawFd {
        self.shared.ready.0.as_raw_fd()
    }

    /// Frames the standby thread read, and its read errors, so far.
    pub fn standby_counts(&self) -> (u64, u64) {
        let s = &self.shared;
        (
            s.frames.load(Ordering::Relaxed),
            s.errors.load(Ordering::Relaxed),
        )
    }

    /// One turn of the packet thread: hands the frames waiting (those the
    /// standby thread read first, then the ring's, read into `buf`) to
    /// `take` in order, at most `budget.frames` frames and until `take`
    /// has returned `budget.pkts` packets in sum (a wake-up stays as short
    /// as when the packet thread read alone). What is left makes the next
    /// poll return at once (a readable TUN or handoff fd).
    pub fn take(
        &mut self,
        budget: Budget,
        buf: &mut [u8],
        mut take: impl FnMut(&mut [u8]) -> usize,
    ) {
        let s = &self.shared;
        // With the token no batch can appear behind our reads; without it
        // the standby thread is reading and will hand over and signal.
        let own = s.try_token();
        // Cleared before looking: a batch sent after this signals again.
        s.ready.clear();
        let mut used = self.handoff.take(budget, &mut take);
        if !budget.allows(used) {
            self.shared.ready.signal();
        } else if own {
            // A turn at the ring itself. Only these count: while this
            // thread works through handed-over batches the ring is not
            // read, and the standby thread must go on reading it.
            s.turns.fetch_add(1, Ordering::SeqCst);
            if s.parked.load(Ordering::Relaxed) && s.parked.swap(false, Ordering::SeqCst) {
                s.kick.signal();
            }
            while budget.allows(used) {
                match self.tun.recv(buf) {
                    Ok(n) => used = used.add(take(&mut buf[..n])),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        if own {
            self.shared.release_token();
        }
    }
}

impl Handoff {
    /// The handed-over frames within `budget`; returns what they used.
    fn take(&mut self, budget: Budget, take: &mut impl FnMut(&mut [u8]) -> usize) -> Budget {
        let mut used = Budget::default();
        while budget.allows(used) {
            let (mut batch, mut next) = match self.current.take() {
                Some(c) => c,
                None => match self.full.try_recv() {
                    Ok(b) => (b, 0),
                    Err(_) => break,
                },
            };
            while next < batch.ends.len() && budget.allows(used) {
                used = used.add(take(batch.frame_mut(next)));
                next += 1;
            }
            if next < batch.ends.len() {
                self.current = Some((batch, next));
            } else {
                self.recycle(batch);
            }
        }
        used
    }

    fn recycle(&mut self, mut batch: Frames) {
        batch.ends.clear();
        if let Some(free) = &self.free {
            // Never full: it holds at most the BATCHES that exist.
            let _ = free.try_send(batch);
        }
    }
}

impl Drop for TunReader {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.kick.signal();
        // A reader waiting for a free batch sees the channel close.
        self.handoff.free = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The standby thread.
struct Standby {
    tun: Arc<Tun>,
    shared: Arc<Shared>,
    full: SyncSender<Frames>,
    free: Receiver<Frames>,
}

impl Standby {
    fn run(self) {
        let s = &*self.shared;
        let mut batch: Option<Frames> = None;
        let mut seen_turns = s.turns.load(Ordering::SeqCst);
        // The ring held packets at the last look and no turn came since.
        let mut late = false;
        let mut quiet = Duration::ZERO;
        loop {
            let parked = s.parked.load(Ordering::SeqCst);
            if !wait(&s.kick, (!parked).then_some(TICK)) || s.stopping.load(Ordering::SeqCst) {
                return;
            }
            s.kick.clear();
            let turns = s.turns.load(Ordering::SeqCst);
            let turned = turns != seen_turns;
            seen_turns = turns;
            let backlog = readable(self.tun.as_raw_fd());
            if backlog && !turned && late && s.try_token() {
                let alive = self.read_until_empty(&mut batch);
                s.release_token();
                if !alive {
                    return;
                }
            }
            late = backlog && !turned;
            quiet = if turned || backlog {
                Duration::ZERO
            } else {
                quiet + TICK
            };
            if quiet >= PARK_AFTER {
                quiet = Duration::ZERO;
                s.parked.store(true, Ordering::SeqCst);
                // A turn that did not see `parked` would not kick: look again.
                if s.turns.load(Ordering::SeqCst) != seen_turns {
                    s.parked.store(false, Ordering::SeqCst);
                }
            }
        }
    }

    /// Reads until the ring is empty, handing over each full batch and
    /// the last one; `false` when the packet thread is gone.
    fn read_until_empty(&self, slot: &mut Option<Frames>) -> bool {
        loop {
            let b = match slot {
                Some(b) => b,
                None => match self.free.recv() {
                    Ok(b) => slot.insert(b),
                    Err(_) => return false,
                },
            };
            let start = b.used();
            match self.tun.recv(&mut b.buf[start..start + FRAME_MAX]) {
                Ok(n) => {
                    b.ends.push(start + n);
                    self.shared.frames.fetch_add(1, Ordering::Relaxed);
                    if !b.has_room() && !self.hand_over(slot) {
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if e.kind() != io::ErrorKind::WouldBlock {
                        self.shared.errors.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    return self.hand_over(slot);
                }
            }
        }
    }

    /// Sends the batch in `slot` (if it holds frames) and signals.
    fn hand_over(&self, slot: &mut Option<Frames>) -> bool {
        match slot.take_if(|b| !b.ends.is_empty()) {
            Some(b) => {
                if self.full.send(b).is_err() {
                    return false;
                }
                self.shared.ready.signal();
                true
            }
            None => true,
        }
    }
}

/// Waits for `fd` to be readable, at most `timeout` (`None`: no limit);
/// `false` on a poll error other than EINTR.
fn wait(fd: &EventFd, timeout: Option<Duration>) -> bool {
    let mut p = libc::pollfd {
        fd: fd.0.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.map_or(-1, |t| t.as_millis() as libc::c_int);
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    r >= 0 || io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
}

/// Whether `fd` has something to read now.
fn readable(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch_of(frames: &[&[u8]]) -> Frames {
        let mut b = Frames::new();
        for f in frames {
            let start = b.used();
            b.buf[start..start + f.len()].copy_from_slice(f);
            b.ends.push(start + f.len());
        }
        b
    }

    /// Handed-over frames come out in order across batches; a budget that
    /// runs out inside a batch leaves the rest for the next turn; emptied
    /// batches go back for reuse.
    #[test]
    fn frames_come_in_order_and_a_spent_budget_keeps_the_rest() {
        let (full_tx, full) = mpsc::sync_channel(BATCHES);
        let (free, recycled) = mpsc::sync_channel(BATCHES);
        let mut h = Handoff {
            full,
            free: Some(free),
            current: None,
        };
        full_tx.send(batch_of(&[b"a", b"bb", b"ccc"])).unwrap();
        full_tx.send(batch_of(&[b"dddd"])).unwrap();
        let mut seen = Vec::new();
        let mut take = |f: &mut [u8]| {
            seen.push(f.to_vec());
            1
        };
        let frames = |frames| Budget { frames, pkts: 512 };
        // One packet a frame here: used = (n, n).
        let used = |n| Budget { frames: n, pkts: n };
        assert_eq!(h.take(frames(2), &mut take), used(2));
        assert_eq!(h.take(frames(10), &mut take), used(2));
        assert_eq!(h.take(frames(10), &mut take), used(0));
        assert_eq!(seen, [&b"a"[..], b"bb", b"ccc", b"dddd"]);
        let back: Vec<Frames> = recycled.try_iter().collect();
        assert_eq!(back.len(), 2);
        assert!(back.iter().all(|b| b.ends.is_empty()));
    }

    /// A batch is handed over when it has no room for another largest
    /// frame or holds FRAMES_PER_BATCH frames.
    #[test]
    fn a_batch_is_full_by_bytes_or_by_frames() {
        let mut b = Frames::new();
        for _ in 0..3 {
            b.ends.push(b.used() + FRAME_MAX);
        }
        assert!(b.has_room(), "three largest frames leave room for a fourth");
        b.ends.push(b.used() + FRAME_MAX);
        assert!(!b.has_room());
        let small = batch_of(&vec![&[0u8; 1200][..]; FRAMES_PER_BATCH]);
        assert!(!small.has_room());
    }

    /// The token is held by one thread at a time.
    #[test]
    fn one_reader_at_a_time() {
        let s = Shared::new().unwrap();
        assert!(s.try_token());
        assert!(!s.try_token());
        s.release_token();
        assert!(s.try_token());
        assert!(!readable(s.ready.0.as_raw_fd()));
        s.ready.signal();
        assert!(readable(s.ready.0.as_raw_fd()));
        s.ready.clear();
        assert!(!readable(s.ready.0.as_raw_fd()));
    }

    /// On a real TUN (needs CAP_NET_ADMIN: ignored unless run with
    /// `--include-ignored`, and then it fails without root rather than
    /// passing unrun): an empty ring gives nothing, the standby thread
    /// parks and stops when dropped.
    #[test]
    #[ignore = "needs root (TUN)"]
    fn the_standby_thread_starts_and_stops() {
        let name = format!("tsb{}", std::process::id() % 100_000);
        let tun = Tun::open(&name).expect("open a TUN device (needs root / CAP_NET_ADMIN)");
        let mut r = TunReader::spawn(Arc::new(tun)).unwrap();
        let mut buf = vec![0u8; FRAME_MAX];
        let mut n = 0;
        let budget = Budget {
            frames: 64,
            pkts: 512,
        };
        r.take(budget, &mut buf, |_| {
            n += 1;
            1
        });
        assert_eq!(n, 0);
        assert!(!readable(r.handoff_fd()));
        std::thread::sleep(3 * TICK);
        assert_eq!(r.standby_counts(), (0, 0));
        drop(r);
    }
}
