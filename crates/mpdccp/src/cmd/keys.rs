//! `mpdccp genkey` and `mpdccp pubkey`: X25519 keys for the authenticated
//! mode, in base64 as WireGuard prints them:
//!
//! ```text
//! umask 077; mpdccp genkey > server.key; mpdccp pubkey < server.key > server.pub
//! ```

use std::io::Read;
use std::process::ExitCode;

use mpdccp_net::daemon::keyfile::{decode_key, encode_key, generate_private_key};
use mpdccp_proto::auth::public_key;

/// Print a new private key (base64) from the OS's randomness.
#[derive(clap::Args, Debug)]
pub struct GenArgs {}

/// Read a private key (base64) on standard input and print its public key.
#[derive(clap::Args, Debug)]
pub struct PubArgs {}

pub fn genkey(_: GenArgs) -> anyhow::Result<ExitCode> {
    println!("{}", encode_key(&generate_private_key()?));
    Ok(ExitCode::SUCCESS)
}

pub fn pubkey(_: PubArgs) -> anyhow::Result<ExitCode> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    let private = decode_key(&text)?;
    println!("{}", encode_key(&public_key(&private)));
    Ok(ExitCode::SUCCESS)
}
