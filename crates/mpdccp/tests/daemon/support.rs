//! What the test modules share.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// One network test at a time, crate-wide: the timing-sensitive tests
/// measure a two-core machine and must not measure each other. A test
/// that panicked while holding the guard poisons the mutex; the next one
/// still runs (the guard protects no data).
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `mpdccp` binary under test (Cargo builds it for the test binary).
pub fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mpdccp"))
}
