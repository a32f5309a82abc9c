//! A gateway fleet (docs/FLEET.md): several servers behind one anycast
//! service address. Each host puts its host id in the top byte of the
//! Connection Identifiers it chooses — RFC 9897 §3.2.4 leaves the CI to
//! the host ("a unique number in the host"), so this is invisible to the
//! client — and a join naming another host's id is answered with a
//! DCCP-Reset (§3.2.8: "If the CI is unknown, the host MUST send a
//! DCCP-Reset"), even in the authenticated modes, where other unknown
//! remotes get nothing: the client then knows at once that the join
//! missed (ECMP sent it to the wrong host) and retries towards the
//! address the owner advertised (MP_ADDADDR).

/// The CI `ci` with host id `host` in its top byte; never 0 (a CI of 0
/// would read as "none"), so host 0 is not a fleet host id.
pub(super) fn with_host(ci: u32, host: u8) -> u32 {
    (u32::from(host) << 24) | (ci & 0x00ff_ffff).max(1)
}

/// The next candidate after `ci` on the same host (a collision with a
/// live connection's CI).
pub(super) fn next_on_host(ci: u32) -> u32 {
    let host = (ci >> 24) as u8;
    with_host(ci.wrapping_add(1), host)
}

/// Whether a join naming `token` was meant for another fleet host.
pub(super) fn names_other_host(own: Option<u8>, token: u32) -> bool {
    let host = (token >> 24) as u8;
    own.is_some_and(|own| host != 0 && host != own)
}

#[cfg(test)]
mod tests {
    use super::{names_other_host, next_on_host, with_host};

    #[test]
    fn the_host_id_is_the_top_byte_and_the_rest_is_kept() {
        assert_eq!(with_host(0xdead_beef, 7), 0x07ad_beef);
        assert_eq!(
            with_host(0xff00_0000, 7),
            0x0700_0001,
            "never 0 below the host byte"
        );
        assert_eq!(
            next_on_host(0x07ff_ffff),
            0x0700_0001,
            "wraps within the host"
        );
        assert!(names_other_host(Some(1), 0x0200_0005));
        assert!(!names_other_host(Some(2), 0x0200_0005));
        assert!(!names_other_host(None, 0x0200_0005), "not a fleet host");
        assert!(
            !names_other_host(Some(2), 0x0000_0005),
            "no host id: plain unknown"
        );
    }
}
