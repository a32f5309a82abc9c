//! RFC 4340 §6 feature negotiation in the handshake: every Change option
//! the peer sends in its Request (we are the server) or Response (we are
//! the client) is answered with a Confirm — the value reconciled as §6.3
//! says, or empty for a feature we do not understand (§6.6.7) or cannot
//! agree on. The reference kernel resets a connection whose handshake Ack
//! leaves its Response's Change options unconfirmed (docs/INTEROP.md).

use super::codec::{FeatOpt, Segment};
use crate::wire::mp::{mp_capable_value, mp_capable_version};
use crate::wire::option::kind as opt;
use crate::wire::FeatureNum;

/// RFC 9897 §3.1, §3.6 (finding F10): multipath only on version 0, our
/// one version. Server: the client's Change R(10) list (Change L from our
/// own older releases) holds version 0, so server-priority reconciliation
/// (RFC 4340 §6.3.1) selects it. Client: the server's Confirm L(10)
/// (Confirm R from older releases of ours) selected version 0. Otherwise
/// the caller falls back to plain DCCP.
pub(super) fn mp_version_agreed(seg: &Segment<'_>, we_are_server: bool) -> bool {
    let kinds = if we_are_server {
        [opt::CHANGE_R, opt::CHANGE_L]
    } else {
        [opt::CONFIRM_L, opt::CONFIRM_R]
    };
    let Some(f) = kinds
        .iter()
        .find_map(|&k| seg.feat(k, FeatureNum::MultipathCapable))
    else {
        return false;
    };
    if we_are_server {
        f.list().iter().any(|&b| mp_capable_version(b) == 0)
    } else {
        f.has_value && mp_capable_version(f.value as u8) == 0
    }
}

/// Values of a server-priority feature we can work with, ours first;
/// `at_us` is the feature's location (the peer sent Change R). `None`: a
/// feature we do not understand.
fn supported(feature: FeatureNum, at_us: bool, multipath: bool) -> Option<&'static [u8]> {
    use FeatureNum::*;
    const ANY_COVERAGE: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    Some(match (feature, at_us) {
        // We run CCID 2 only (RFC 4341).
        (Ccid, _) => &[2],
        // We neither send short sequence numbers nor take them (§7.6.1);
        // the peer may accept them or not.
        (AllowShortSeqnos, true) => &[0],
        (AllowShortSeqnos, false) => &[0, 1],
        // We do not act on ECN marks (§12.1): we stay ECN incapable.
        (EcnIncapable, true) => &[1],
        (EcnIncapable, false) => &[0, 1],
        // We always send Ack Vectors and read them when they come.
        (SendAckVector, _) => &[1, 0],
        // No NDP Count sent; the peer's is read or ignored.
        (SendNdpCount, true) => &[0],
        (SendNdpCount, false) => &[0, 1],
        // We send full coverage, which meets any minimum (§9.2.1).
        (MinChecksumCoverage, true) => &[0],
        (MinChecksumCoverage, false) => &ANY_COVERAGE,
        // We send no Data Checksum option (§9.3).
        (CheckDataChecksum, _) => &[0],
        // RFC 9897 §3.1: version 0 only, and only when multipath is agreed.
        (MultipathCapable, _) if multipath => &[0],
        (MultipathCapable, _) => &[],
        (SequenceWindow | AckRatio | Other(_), _) => return None,
    })
}

/// Server-priority reconciliation (RFC 4340 §6.3.1): the first entry of
/// the server's list that the client's list also holds.
fn reconcile(peer: &[u8], ours: &[u8], we_are_server: bool) -> Option<u8> {
    let (server, client) = if we_are_server {
        (ours, peer)
    } else {
        (peer, ours)
    };
    server.iter().copied().find(|v| client.contains(v))
}

/// The Confirm for one Change option of the peer.
fn confirm(change: &FeatOpt, we_are_server: bool, multipath: bool) -> FeatOpt {
    let at_us = change.kind == opt::CHANGE_R;
    let kind = if at_us {
        opt::CONFIRM_L
    } else {
        opt::CONFIRM_R
    };
    let empty = FeatOpt::with_list(kind, change.feature, &[]);
    match change.feature {
        // Non-negotiable (§6.3.2): the value is taken as sent, when valid.
        FeatureNum::SequenceWindow if (32..1 << 46).contains(&change.value) => {
            FeatOpt::with_value(kind, change.feature, change.value)
        }
        FeatureNum::AckRatio if (1..=u64::from(u16::MAX)).contains(&change.value) => {
            FeatOpt::with_value(kind, change.feature, change.value)
        }
        f => match supported(f, at_us, multipath) {
            Some(ours) if change.has_value => {
                let mut peer = change.list();
                if f == FeatureNum::MultipathCapable {
                    // Only the version counts (§3.1: the low bits are
                    // unassigned and ignored).
                    peer.iter_mut()
                        .for_each(|b| *b = mp_capable_value(mp_capable_version(*b)));
                }
                match reconcile(&peer, ours, we_are_server) {
                    // §6.1: the selected value, then our preference list.
                    Some(v) => {
                        let mut list = vec![v];
                        list.extend_from_slice(ours);
                        FeatOpt::with_list(kind, f, &list)
                    }
                    None => empty,
                }
            }
            // §6.6.7: not understood (or a Change without a value).
            _ => empty,
        },
    }
}

/// The Confirms owed for the Change options in `seg` (one per feature and
/// location, in the order the Changes came).
pub(super) fn handshake_confirms(
    seg: &Segment<'_>,
    we_are_server: bool,
    multipath: bool,
) -> Vec<FeatOpt> {
    let feats = seg.feats();
    feats
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind == opt::CHANGE_L || f.kind == opt::CHANGE_R)
        .filter(|(i, f)| {
            !feats[..*i]
                .iter()
                .any(|g| g.kind == f.kind && g.feature == f.feature)
        })
        .map(|(_, f)| confirm(f, we_are_server, multipath))
        .collect()
}
