//! Keys and peers of the authenticated mode as an operator writes them:
//! X25519 keys in base64 (44 characters, as WireGuard prints them), private
//! keys and PSKs in files only root can read, and `[[peer]]` tables turned
//! into the core's `auth::PeerTable` with errors that name the peer.
//!
//! Used by `mpdccp genkey` / `mpdccp pubkey` and by the server and client
//! configurations (`auth = "authenticated"`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use mpdccp_proto::auth::peers::KEY_LEN;
use mpdccp_proto::auth::{keypair, IpPrefix, Peer, PeerLimits, PeerTable};
use rand_chacha::rand_core::SeedableRng;
use serde::{Deserialize, Serialize};

/// A 32-byte key from its base64 form.
pub fn decode_key(s: &str) -> anyhow::Result<[u8; KEY_LEN]> {
    let bytes = STANDARD
        .decode(s.trim())
        .map_err(|e| anyhow::anyhow!("not a base64 key: {e}"))?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| anyhow::anyhow!("a key has 32 bytes, this one {}", b.len()))
}

pub fn encode_key(k: &[u8; KEY_LEN]) -> String {
    STANDARD.encode(k)
}

/// A new private key from the OS's randomness.
pub fn generate_private_key() -> anyhow::Result<[u8; KEY_LEN]> {
    let mut seed = [0u8; 32];
    // SAFETY: `seed` is valid for 32 bytes.
    let n = unsafe { libc::getrandom(seed.as_mut_ptr().cast(), seed.len(), 0) };
    if n != 32 {
        bail!("getrandom: {}", std::io::Error::last_os_error());
    }
    let mut rng = rand_chacha::ChaCha20Rng::from_seed(seed);
    Ok(keypair(&mut rng).0)
}

/// The file systemd passed for `path` with `LoadCredential=<name>:<path>`
/// (systemd.exec(5) "Credentials"): `$CREDENTIALS_DIRECTORY/<name>`, where
/// `<name>` is `path`'s file name, when that file exists. A unit with
/// `DynamicUser=yes` cannot read a root-owned key in /etc; systemd copies
/// it into a directory only the service's user can read.
pub fn systemd_credential(path: &Path) -> Option<PathBuf> {
    let dir = std::env::var_os("CREDENTIALS_DIRECTORY")?;
    let p = Path::new(&dir).join(path.file_name()?);
    p.is_file().then_some(p)
}

/// Reads a secret key file, refusing one that group or others may read
/// (a local user must not learn the server's or a peer's key). A systemd
/// credential of the same file name is read instead ([`systemd_credential`]);
/// systemd grants its service user read access by an ACL, whose mask shows
/// as the group bits, so there only "others" must have no access.
pub fn read_secret_key(path: &Path) -> anyhow::Result<[u8; KEY_LEN]> {
    let (path, forbidden) = match systemd_credential(path) {
        Some(p) => (p, 0o007),
        None => (path.to_path_buf(), 0o077),
    };
    let path = path.as_path();
    let meta = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & forbidden != 0 {
        bail!(
            "{}: mode {mode:o} lets other users read the key; chmod 600 it",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    decode_key(&text).with_context(|| format!("{}", path.display()))
}

/// A key file named relative to the configuration file is found beside it
/// (`private_key_file = "server.key"` next to `server.toml`), wherever the
/// daemon was started from.
pub fn beside(config_dir: &Path, file: &mut Option<PathBuf>) {
    if let Some(f) = file.as_mut().filter(|f| f.is_relative()) {
        *f = config_dir.join(&*f);
    }
}

/// One `[[peer]]` of the server configuration.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    pub name: String,
    /// The peer's public key, base64 (`mpdccp pubkey < peer.key`).
    pub public_key: String,
    /// Optional pre-shared key file (base64, mode 0600), mixed into the handshake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psk_file: Option<PathBuf>,
    /// Inner prefixes the peer may send from and receives traffic for.
    pub allowed_ips: Vec<String>,
}

impl PeerConfig {
    pub fn to_peer(&self) -> anyhow::Result<Peer> {
        let ctx = || format!("peer {:?}", self.name);
        let public_key =
            decode_key(&self.public_key).with_context(|| format!("{}: public_key", ctx()))?;
        let psk = match &self.psk_file {
            Some(p) => Some(read_secret_key(p).with_context(ctx)?),
            None => None,
        };
        let allowed_ips = self
            .allowed_ips
            .iter()
            .map(|s| s.parse::<IpPrefix>())
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("{}: allowed_ips", ctx()))?;
        Ok(Peer {
            name: self.name.clone(),
            public_key,
            psk,
            allowed_ips,
        })
    }
}

/// The client's side of the handshake from its configuration keys.
pub fn initiator_config(
    private_key_file: &Path,
    server_public_key: &str,
    psk_file: Option<&Path>,
) -> anyhow::Result<mpdccp_proto::auth::InitiatorConfig> {
    Ok(mpdccp_proto::auth::InitiatorConfig {
        static_private: read_secret_key(private_key_file)?,
        server_public: decode_key(server_public_key).context("server_public_key")?,
        psk: psk_file.map(read_secret_key).transpose()?,
    })
}

/// The server's peer table from its `[[peer]]` entries.
pub fn peer_table(peers: &[PeerConfig]) -> anyhow::Result<PeerTable> {
    let peers = peers
        .iter()
        .map(PeerConfig::to_peer)
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(PeerTable::new(peers, PeerLimits::default())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpdccp_proto::auth::public_key;
    use std::net::IpAddr;

    #[test]
    fn keys_round_trip_and_bad_keys_are_refused() {
        let k = generate_private_key().unwrap();
        assert_eq!(decode_key(&format!(" {}\n", encode_key(&k))).unwrap(), k);
        assert_eq!(encode_key(&k).len(), 44);
        assert!(decode_key("AAAA").is_err());
        assert!(decode_key("not base64!").is_err());
        assert_ne!(generate_private_key().unwrap(), k);
    }

    #[test]
    fn key_files_readable_by_others_are_refused() {
        let dir = std::env::temp_dir().join(format!("mpdccp-keyfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("server.key");
        let k = [7u8; 32];
        std::fs::write(&f, encode_key(&k)).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = read_secret_key(&f).unwrap_err().to_string();
        assert!(
            err.contains("mode 644") && err.contains("server.key"),
            "{err}"
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_secret_key(&f).unwrap(), k);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `LoadCredential=k.key:/etc/mpdccp/k.key`: the daemon reads
    /// `$CREDENTIALS_DIRECTORY/k.key` for `/etc/mpdccp/k.key`,
    /// accepting systemd's ACL mode (0440) there but not a key others read.
    #[test]
    fn a_systemd_credential_replaces_the_configured_key_file() {
        let dir = std::env::temp_dir().join(format!("mpdccp-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("cred-test.key");
        let k = [9u8; 32];
        std::fs::write(&f, encode_key(&k)).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o440)).unwrap();
        let configured = Path::new("/nonexistent/etc/mpdccp/cred-test.key");
        assert!(read_secret_key(configured).is_err());
        // The only test of this crate that sets the variable; no other test
        // reads a file of this name.
        std::env::set_var("CREDENTIALS_DIRECTORY", &dir);
        assert_eq!(systemd_credential(configured), Some(f.clone()));
        assert_eq!(read_secret_key(configured).unwrap(), k);
        assert_eq!(systemd_credential(Path::new("/etc/mpdccp/other.key")), None);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
        let err = read_secret_key(configured).unwrap_err().to_string();
        std::env::remove_var("CREDENTIALS_DIRECTORY");
        assert!(err.contains("mode 444"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn peers_from_toml() {
        let pk = encode_key(&public_key(&[9u8; 32]));
        let text = format!(
            "[[peer]]\nname = \"cpe1\"\npublic_key = \"{pk}\"\nallowed_ips = [\"10.0.1.0/24\", \"fd00:1::/64\"]\n"
        );
        #[derive(Deserialize)]
        struct Doc {
            peer: Vec<PeerConfig>,
        }
        let doc: Doc = toml::from_str(&text).unwrap();
        let t = peer_table(&doc.peer).unwrap();
        let ip: IpAddr = "10.0.1.9".parse().unwrap();
        assert_eq!(t.route(ip).map(|p| p.0), Some(0));
        let mut bad = doc.peer[0].clone();
        bad.allowed_ips.push("10.0.1.1/24".into());
        let err = format!("{:#}", peer_table(&[bad]).unwrap_err());
        assert!(err.contains("cpe1") && err.contains("allowed_ips"), "{err}");
    }
}
