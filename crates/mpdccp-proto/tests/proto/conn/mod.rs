//! The connection and the endpoint (`src/conn/`), driven through the harness.

mod auth;
mod close;
mod endpoint;
mod fleet;
mod fq;
mod handshake;
mod hostile;
mod mp;
mod options;
mod path_return;
mod path_truth;
mod paths;
mod plpmtu;
mod prio;
mod profile;
mod protect;
mod queue_time;
mod rebind;
mod repoll;
mod retransmit;
mod robust;
mod rtt;
mod timer_invariant;
mod unchecked;
mod video_after_outage;
