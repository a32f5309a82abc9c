//! A daemon restarted at once finds its TUN still held by the one it
//! replaces (the kernel tears the old device down after the last
//! fd closes). `Tun::open_queues_waiting` waits for it instead of failing;
//! a device held for longer than the wait (a second daemon) stays an
//! error. Needs root (fails instead of skipping when `CI` is set).

use std::time::{Duration, Instant};

use mpdccp_net::tun::Tun;

/// Fails unless root: the tests that call it are `#[ignore]`d and run with
/// `cargo test -- --include-ignored` as root (.ci/run), never skipped.
fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    assert!(unsafe { libc::geteuid() } == 0, "{test}: needs root (TUN)");
    true
}

#[test]
#[ignore = "needs root (network namespaces): run as root with `cargo test -- --include-ignored`"]
fn a_restart_waits_for_the_tun_its_predecessor_still_holds() {
    if !require_root("a_restart_waits_for_the_tun_its_predecessor_still_holds") {
        return;
    }
    let name = format!("mpdbsy{}", std::process::id() % 100_000);
    let old = Tun::open(&name).expect("first TUN");
    // Without waiting, the busy device is an error (the control).
    let busy = Tun::open_queues(&name, false, 1).unwrap_err();
    assert_eq!(busy.kind(), std::io::ErrorKind::ResourceBusy, "{busy}");
    // Held past a short wait: still the error, after the wait.
    let t = Instant::now();
    let e = Tun::open_queues_waiting(&name, false, 1, Duration::from_millis(200)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ResourceBusy, "{e}");
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );
    // Released after 300 ms, as an exiting daemon does: the new one gets it.
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        drop(old);
    });
    let t = Instant::now();
    let new = Tun::open_queues_waiting(&name, false, 1, Duration::from_secs(3))
        .expect("the TUN once its holder let go");
    let waited = t.elapsed();
    releaser.join().unwrap();
    assert_eq!(new[0].name(), name);
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    eprintln!("waited {waited:?} for the released TUN");
}
