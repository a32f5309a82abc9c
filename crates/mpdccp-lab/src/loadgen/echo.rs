//! The downstream source: a UDP echo on the server's inner address, in the
//! server's namespace. What the tunnel delivers upstream comes back as the
//! server's downstream to the same client (the server routes it by the
//! inner address it learned), so both directions carry the offered rate
//! and each is counted at its receiver.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;

use crate::netns::spawn_in_netns;

/// Counters of the echo (shared with the caller while it runs).
#[derive(Debug, Default)]
pub struct EchoCounters {
    pub recv_pkts: AtomicU64,
    pub recv_bytes: AtomicU64,
    pub sent_pkts: AtomicU64,
    pub send_errors: AtomicU64,
}

pub struct Echo {
    pub counters: Arc<EchoCounters>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Echo {
    /// Starts the echo on `addr` inside namespace `ns` (the address must
    /// exist there: start it after the server's TUN is up).
    pub fn start(ns: &str, addr: SocketAddr) -> anyhow::Result<Echo> {
        let counters = Arc::new(EchoCounters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counters.clone(), stop.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = spawn_in_netns(ns, move || {
            let sock = bind(addr);
            let ok = sock.as_ref().map(|_| ()).map_err(|e| format!("{e:#}"));
            let _ = ready_tx.send(ok);
            serve(&sock?, &c, &s);
            Ok(())
        });
        match ready_rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => anyhow::bail!("echo on {addr}: {e}"),
            Err(_) => anyhow::bail!("echo on {addr} did not start"),
        }
        Ok(Echo {
            counters,
            stop,
            thread: Some(thread),
        })
    }
}

fn bind(addr: SocketAddr) -> anyhow::Result<UdpSocket> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
    // Room for a burst from 1 000 clients while the thread is descheduled.
    let _ = s.set_recv_buffer_size(8 << 20);
    let _ = s.set_send_buffer_size(8 << 20);
    s.bind(&addr.into())
        .with_context(|| format!("bind {addr}"))?;
    let sock: UdpSocket = s.into();
    sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    Ok(sock)
}

fn serve(sock: &UdpSocket, c: &EchoCounters, stop: &AtomicBool) {
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        c.recv_pkts.fetch_add(1, Ordering::Relaxed);
        c.recv_bytes.fetch_add(n as u64, Ordering::Relaxed);
        match sock.send_to(&buf[..n], from) {
            Ok(_) => c.sent_pkts.fetch_add(1, Ordering::Relaxed),
            Err(_) => c.send_errors.fetch_add(1, Ordering::Relaxed),
        };
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
