//! One module per subcommand.
pub mod bench;
pub mod client;
pub mod demo;
pub mod netem;
pub mod reproduce;
pub mod server;
pub mod sim;
pub mod status;
pub mod sweep;
pub mod testbed;
