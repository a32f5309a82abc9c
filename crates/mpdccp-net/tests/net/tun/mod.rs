//! The TUN device (`src/tun.rs`) against the real kernel.

mod busy;
mod uso;
