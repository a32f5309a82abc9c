//! Who the two ends are to each other: the connection's keys and
//! connection identifiers (RFC 9897 §3.2.4 MP_KEY, §3.2.2 MP_JOIN), and in
//! the authenticated modes the handshake's session keys
//! (docs/SECURITY.md §4).
//!
//! Every MP_HMAC, MP_CLOSE / MP_FAST_CLOSE and join token is derived from
//! what this part holds; `handshake.rs` and `authn.rs` fill it in.

use super::keys::ConnKeys;
use super::Role;
use crate::auth::SessionKeys;
use crate::wire::profile_keys::PlainKeys;
use crate::wire::WireProfile;

/// Keys and connection identifiers of one connection.
pub(super) struct Identity {
    /// Our 64-bit key (key type 0), or in the authenticated modes the
    /// 8-byte close value of our d-key: what the peer's MP_CLOSE /
    /// MP_FAST_CLOSE must carry.
    pub(super) local_key: [u8; 8],
    /// The peer's, once its MP_KEY (or the session) told it.
    pub(super) remote_key: Option<[u8; 8]>,
    /// Our connection identifier (the token the peer's joins name).
    pub(super) local_ci: u32,
    /// The peer's connection identifier, once known.
    pub(super) remote_ci: Option<u32>,
    /// The authenticated handshake's keys (boxed: rarely touched, secret).
    pub(super) session: Option<Box<SessionKeys>>,
}

impl Identity {
    pub(super) fn new(local_key: [u8; 8], local_ci: u32) -> Self {
        Identity {
            local_key,
            remote_key: None,
            local_ci,
            remote_ci: None,
            session: None,
        }
    }

    /// An MP_CLOSE / MP_FAST_CLOSE value meant for us.
    pub(super) fn is_our_close_key(&self, k: [u8; 8]) -> bool {
        k == self.local_key
    }

    /// The keys of every MP_HMAC: the handshake's d-keys in authenticated
    /// mode, key type 0's otherwise; `None` until the peer's key is known.
    pub(super) fn d_keys(&self) -> Option<ConnKeys> {
        if let Some(k) = self.session.as_deref() {
            return Some(ConnKeys::Derived {
                local: *k.d_key_local(),
                remote: *k.d_key_remote(),
            });
        }
        Some(ConnKeys::Plain {
            local: self.local_key,
            remote: self.remote_key?,
        })
    }

    /// The identifiers of a join (RFC 9897 §3.2.2): the one in the
    /// client's MP_JOIN (the server's CI) and the one in the server's (the
    /// client's CI); the k5.10 reference puts the server's token in both
    /// (docs/INTEROP.md, `wire::profile_keys`). 0 while unknown.
    pub(super) fn join_ids(&self, role: Role, profile: WireProfile) -> (u32, u32) {
        let (ours, theirs) = (self.local_ci, self.remote_ci.unwrap_or(0));
        let (client_ci, server_ci) = match role {
            Role::Client => (ours, theirs),
            Role::Server => (theirs, ours),
        };
        match (self.remote_key, self.session.is_some()) {
            (Some(remote), false) => {
                let keys = match role {
                    Role::Client => PlainKeys {
                        client: self.local_key,
                        server: remote,
                    },
                    Role::Server => PlainKeys {
                        client: remote,
                        server: self.local_key,
                    },
                };
                (
                    profile.join_id(&keys, server_ci),
                    profile.join_response_id(&keys, client_ci),
                )
            }
            _ => (server_ci, client_ci),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::conn::keys::ConnKeys;
    use crate::conn::Role;
    use crate::wire::WireProfile;

    use super::Identity;

    fn pair() -> (Identity, Identity) {
        let mut c = Identity::new([1; 8], 0x11);
        let mut s = Identity::new([2; 8], 0x22);
        c.remote_key = Some(s.local_key);
        c.remote_ci = Some(s.local_ci);
        s.remote_key = Some(c.local_key);
        s.remote_ci = Some(c.local_ci);
        (c, s)
    }

    #[test]
    fn both_ends_agree_on_the_join_identifiers() {
        let (c, s) = pair();
        for p in [
            WireProfile::Rfc9897,
            WireProfile::ReferenceK414,
            WireProfile::ReferenceK510,
        ] {
            let ids = c.join_ids(Role::Client, p);
            assert_eq!(ids, s.join_ids(Role::Server, p), "{p:?}");
            if p == WireProfile::ReferenceK510 {
                // The server's token in both, not a CI.
                assert_eq!(ids.0, ids.1);
                assert_ne!(ids.0, 0x22);
            } else {
                // The client names the server's CI, the server the client's.
                assert_eq!(ids, (0x22, 0x11));
            }
        }
    }

    #[test]
    fn keys_are_known_only_once_the_peers_key_is() {
        let mut c = Identity::new([1; 8], 0x11);
        assert_eq!(c.d_keys(), None);
        assert_eq!(c.join_ids(Role::Client, WireProfile::Rfc9897), (0, 0x11));
        c.remote_key = Some([2; 8]);
        assert_eq!(
            c.d_keys(),
            Some(ConnKeys::Plain {
                local: [1; 8],
                remote: [2; 8]
            })
        );
        assert!(c.is_our_close_key([1; 8]));
        assert!(!c.is_our_close_key([2; 8]));
    }
}
