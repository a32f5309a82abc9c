//! `Connection::repoll_would_idle`: the promise a driver may skip a poll
//! on. True only while a repeat of the last `poll_transmit`'s `None` at the
//! same instant is certain; `send` (appending to the plain FIFO behind the
//! held head) keeps it, any other input (a datagram, a timer) voids it.
//! The harness also checks the promise on every poll it makes
//! (`Harness::transmit_one`).

use crate::common;

use std::time::Duration;

use mpdccp_proto::ConnectionConfig;

/// The client's windows full behind a 2 Mbit/s bottleneck, its queue
/// holding more, drained at `h.now` until `poll_transmit` says `None`.
fn client_blocked() -> (mpdccp_proto::harness::Harness, Vec<u8>) {
    let mut h = common::bottleneck(ConnectionConfig::default(), 2_000_000);
    let now = h.now;
    for _ in 0..100 {
        h.client.send(now, &[7u8; 1000]).unwrap();
    }
    let mut buf = vec![0u8; 4096];
    // The datagrams are dropped: only the client's own state matters here.
    let mut sent = 0;
    while h.client.poll_transmit(now, &mut buf).is_some() {
        sent += 1;
        assert!(sent < 100, "the window never filled");
    }
    (h, buf)
}

#[test]
fn a_blocked_none_holds_at_its_instant_through_sends() {
    let (mut h, mut buf) = client_blocked();
    let now = h.now;
    assert!(h.client.repoll_would_idle(now));
    assert!(!h.client.repoll_would_idle(now + Duration::from_millis(1)));
    for _ in 0..3 {
        h.client.send(now, &[7u8; 1000]).unwrap();
        assert!(h.client.repoll_would_idle(now));
        assert!(h.client.poll_transmit(now, &mut buf).is_none());
        assert!(h.client.repoll_would_idle(now), "the repeat said the same");
    }
}

#[test]
fn a_timer_or_a_datagram_voids_it() {
    let (mut h, _) = client_blocked();
    let now = h.now;
    h.client.handle_timeout(now);
    assert!(
        !h.client.repoll_would_idle(now),
        "a timer may free a window"
    );

    let (mut h, mut buf) = client_blocked();
    let now = h.now;
    // Any datagram, even one the connection throws away, is an input.
    h.client
        .handle_datagram(now, mpdccp_proto::PathId(0), &[0u8; 16]);
    assert!(!h.client.repoll_would_idle(now), "an ack may free a window");
    // The poll it forces answers for itself and may promise again.
    let again = h.client.poll_transmit(now, &mut buf);
    assert!(again.is_none() || !h.client.repoll_would_idle(now));
}

#[test]
fn acks_free_the_window_and_the_queue_moves_again() {
    let (mut h, _) = client_blocked();
    let before = h.client.stats().traffic.tx_datagrams;
    let queued = h.client.send_queue_len();
    // The harness retransmits what was dropped above and the acks open
    // the window: data leaves the queue again.
    h.drive_for(Duration::from_secs(2));
    assert!(h.client.stats().traffic.tx_datagrams > before);
    assert!(h.client.send_queue_len() < queued);
}
