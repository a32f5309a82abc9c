//! Peer authentication and payload protection (`src/auth/`).

mod flood;
mod wire;
