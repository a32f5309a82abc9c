//! The client's TUN reader: a thread that does nothing but read the TUN,
//! so the kernel's ring (`txqueuelen` packets, about 5 ms of a local
//! sender at full speed) does not overflow while the packet thread is busy
//! with the protocol or waits for a CPU. The TUN orphans each packet as it
//! enters the ring (`tun_net_xmit`: `skb_orphan`), so a full ring drops
//! instead of slowing the sender down; only a reader that is never late
//! keeps it from dropping.
//!
//! Frames travel to the packet thread in batches over a channel; the
//! packet thread polls an eventfd the reader signals after each batch.
//! The batches are allocated once and recycled, so memory is bounded
//! ([`BATCHES`] × [`BATCH_BYTES`], touched only as far as used): a packet
//! thread that falls that far behind makes the reader wait, and the ring
//! takes the excess as before. The core stays on the packet thread; the
//! reader only moves bytes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::tun::Tun;

/// The largest frame a TUN read returns: a 64 kB super-packet with its
/// `virtio_net_hdr`.
const FRAME_MAX: usize = 65_536 + crate::offload::VNET_HDR_LEN;
/// One batch's buffer: room for at least four largest frames.
pub const BATCH_BYTES: usize = 4 * FRAME_MAX;
/// Frames per batch at most, so a steady stream is handed over at least
/// every 64 reads (a batch waits for the reader no longer than that).
const FRAMES_PER_BATCH: usize = 64;
/// Batches in circulation: 32 × 64 datagrams = 2048 beyond the ring's
/// `txqueuelen` for a stream of small datagrams (8 MB at most).
pub const BATCHES: usize = 32;

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

    fn frame(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.buf[start..self.ends[i]]
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

/// What the packet thread holds of the reader thread.
pub struct TunReader {
    full: Receiver<Frames>,
    /// `None` only while dropping (closing it releases a waiting reader).
    free: Option<SyncSender<Frames>>,
    /// A batch partly taken (the per-wake-up budget ran out inside it) and
    /// the next frame to take from it.
    current: Option<(Frames, usize)>,
    ready: Arc<EventFd>,
    stop: Arc<EventFd>,
    stopping: Arc<AtomicBool>,
    /// Read errors other than "nothing queued" (the reader then pauses 1 ms).
    errors: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl TunReader {
    /// Starts the reader thread on `tun` (non-blocking fd, as opened).
    pub fn spawn(tun: Arc<Tun>) -> io::Result<TunReader> {
        let (full_tx, full) = mpsc::sync_channel(BATCHES);
        let (free, free_rx) = mpsc::sync_channel(BATCHES);
        for _ in 0..BATCHES {
            free.send(Frames::new()).expect("the receiver is alive");
        }
        let reader = Reader {
            tun,
            ready: Arc::new(EventFd::new()?),
            stop: Arc::new(EventFd::new()?),
            stopping: Arc::new(AtomicBool::new(false)),
            errors: Arc::new(AtomicU64::new(0)),
            full: full_tx,
            free: free_rx,
        };
        let (ready, stop) = (reader.ready.clone(), reader.stop.clone());
        let (stopping, errors) = (reader.stopping.clone(), reader.errors.clone());
        let thread = std::thread::Builder::new()
            .name("tun-reader".into())
            .spawn(move || reader.run())?;
        Ok(TunReader {
            full,
            free: Some(free),
            current: None,
            ready,
            stop,
            stopping,
            errors,
            thread: Some(thread),
        })
    }

    /// Readable when frames are waiting (for the packet thread's poll set).
    pub fn ready_fd(&self) -> RawFd {
        self.ready.0.as_raw_fd()
    }

    /// Read errors so far (other than an empty ring).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Hands the frames read so far to `take` in order, until it has
    /// returned `budget` packets in sum; what is left waits for the next
    /// call, and the ready fd stays readable for it.
    pub fn drain(&mut self, budget: usize, mut take: impl FnMut(&[u8]) -> usize) {
        // Cleared before looking: a batch sent after this signals again.
        self.ready.clear();
        let mut pkts = 0;
        loop {
            let (batch, mut next) = match self.current.take() {
                Some(c) => c,
                None => match self.full.try_recv() {
                    Ok(b) => (b, 0),
                    Err(_) => return,
                },
            };
            while next < batch.ends.len() && pkts < budget {
                pkts += take(batch.frame(next));
                next += 1;
            }
            if next < batch.ends.len() {
                self.current = Some((batch, next));
            } else {
                self.recycle(batch);
            }
            if pkts >= budget {
                self.ready.signal();
                return;
            }
        }
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
        self.stopping.store(true, Ordering::Relaxed);
        self.stop.signal();
        // A reader waiting for a free batch sees the channel close.
        self.free = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reader thread's side.
struct Reader {
    tun: Arc<Tun>,
    ready: Arc<EventFd>,
    stop: Arc<EventFd>,
    stopping: Arc<AtomicBool>,
    errors: Arc<AtomicU64>,
    full: SyncSender<Frames>,
    free: Receiver<Frames>,
}

impl Reader {
    fn run(self) {
        let mut batch: Option<Frames> = None;
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: self.tun.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.stop.0.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if self.stopping.load(Ordering::Relaxed) {
                return;
            }
            if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                self.errors.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            if !self.read_until_empty(&mut batch) {
                return;
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
                    if !b.has_room() && !self.hand_over(slot) {
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if e.kind() != io::ErrorKind::WouldBlock {
                        self.errors.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(std::time::Duration::from_millis(1));
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
                self.ready.signal();
                true
            }
            None => true,
        }
    }
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

    /// A reader whose thread is replaced by the test: batches go straight
    /// into its channel.
    fn fake() -> (TunReader, SyncSender<Frames>, Receiver<Frames>) {
        let (full_tx, full) = mpsc::sync_channel(BATCHES);
        let (free, free_rx) = mpsc::sync_channel(BATCHES);
        let r = TunReader {
            full,
            free: Some(free),
            current: None,
            ready: Arc::new(EventFd::new().unwrap()),
            stop: Arc::new(EventFd::new().unwrap()),
            stopping: Arc::new(AtomicBool::new(false)),
            errors: Arc::new(AtomicU64::new(0)),
            thread: None,
        };
        (r, full_tx, free_rx)
    }

    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    /// Frames come out in order across batches; a budget that runs out
    /// inside a batch leaves the rest for the next call, with the ready fd
    /// still readable so the loop does not sleep on them.
    #[test]
    fn frames_come_in_order_and_a_spent_budget_keeps_the_rest() {
        let (mut r, tx, recycled) = fake();
        tx.send(batch_of(&[b"a", b"bb", b"ccc"])).unwrap();
        tx.send(batch_of(&[b"dddd"])).unwrap();
        r.ready.signal();
        let mut seen = Vec::new();
        r.drain(2, |f| {
            seen.push(f.to_vec());
            1
        });
        assert_eq!(seen, [b"a".to_vec(), b"bb".to_vec()]);
        assert!(readable(r.ready_fd()), "the rest is announced");
        r.drain(10, |f| {
            seen.push(f.to_vec());
            1
        });
        assert_eq!(seen.len(), 4);
        assert_eq!(seen[2], b"ccc");
        assert_eq!(seen[3], b"dddd");
        assert!(!readable(r.ready_fd()), "nothing left, nothing announced");
        assert_eq!(
            recycled.try_iter().count(),
            2,
            "both batches go back, emptied"
        );
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

    /// The thread reads what the kernel queues on a real TUN and stops
    /// when dropped (needs CAP_NET_ADMIN; skipped without it).
    #[test]
    fn the_thread_reads_a_tun_and_stops_when_dropped() {
        let name = format!("trd{}", std::process::id() % 100_000);
        let Ok(tun) = Tun::open(&name) else {
            eprintln!("skipped: no TUN (needs CAP_NET_ADMIN)");
            return;
        };
        let r = TunReader::spawn(Arc::new(tun)).unwrap();
        assert!(!readable(r.ready_fd()));
        drop(r);
    }
}
