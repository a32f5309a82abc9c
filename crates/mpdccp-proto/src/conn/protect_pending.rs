//! Placeholder for payload protection's seam until `conn/subflow/`'s
//! per-path seal/open (issue #11 step 4, another branch) is merged: then
//! this file and its `mod` line go, and the daemon's check of
//! [`PAYLOAD_PROTECTION_AVAILABLE`] with them.

use super::Connection;
use crate::auth::SessionKeys;

/// False while this placeholder is in the build: nothing is sealed, so the
/// daemon refuses `auth = "protected"` instead of pretending.
pub const PAYLOAD_PROTECTION_AVAILABLE: bool = false;

impl Connection {
    /// Starts per-path payload protection with the handshake's keys
    /// (placeholder: the keys stay in [`Connection::session_keys`]).
    pub fn enable_payload_protection(&mut self, _keys: SessionKeys) {}
}
