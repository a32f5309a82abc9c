//! Process-wide settings of the command-line tool.

/// Restores the default action of `SIGPIPE` (terminate quietly).
///
/// The Rust runtime ignores `SIGPIPE`, so `mpdccp sim … | head` makes the
/// next `println!` fail with `EPIPE` and panic. Report-printing commands
/// want the shell convention instead: the reader went away, so stop.
/// The daemons must not call this: a status client that disconnects early
/// would otherwise kill them through their control socket.
pub fn default_sigpipe() {
    // SAFETY: `signal` with `SIG_DFL` installs no handler code; it is called
    // once at start-up before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
