//! ECN on the tunnelled (inner) IP packets waiting in the send queue.
//!
//! Why: when the send queue's AQM decides a flow must slow down, an
//! ECN-capable packet is marked Congestion Experienced instead of dropped
//! (RFC 8289 §5.3 "mark or drop", RFC 8290 §4.1 and §5.2; RFC 3168 §5):
//! the tunnelled TCP halves its window as for a loss but retransmits
//! nothing. Packets that are not ECN-capable (Not-ECT) are dropped as
//! before; a packet that is not IPv4/IPv6 or is too short is never touched.

/// The ECN field's codepoints (RFC 3168 §5).
const NOT_ECT: u8 = 0b00;
const CE: u8 = 0b11;

/// The ECN field of an IPv4 or IPv6 packet, `None` if `pkt` is neither
/// (or too short to hold the field and, for IPv4, its header checksum).
pub(crate) fn ecn_field(pkt: &[u8]) -> Option<u8> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => Some(pkt[1] & 0b11),
        // Traffic class = low nibble of byte 0 and high nibble of byte 1;
        // its two low bits are bits 4-5 of byte 1 (RFC 8200 §3, §7).
        6 if pkt.len() >= 40 => Some((pkt[1] >> 4) & 0b11),
        _ => None,
    }
}

/// Marks `pkt` Congestion Experienced if it is ECN-capable (ECT(0),
/// ECT(1) or already CE). Returns whether the packet may be kept instead
/// of dropped. IPv4's header checksum is updated incrementally
/// (RFC 1624 eq. 3: HC' = ~(~HC + ~m + m')).
pub(crate) fn mark_ce(pkt: &mut [u8]) -> bool {
    let Some(ecn) = ecn_field(pkt) else {
        return false;
    };
    if ecn == NOT_ECT {
        return false;
    }
    if ecn == CE {
        return true;
    }
    match pkt[0] >> 4 {
        4 => {
            // The 16-bit word holding the TOS byte: version/IHL, TOS.
            let old = u16::from_be_bytes([pkt[0], pkt[1]]);
            pkt[1] |= CE;
            let new = u16::from_be_bytes([pkt[0], pkt[1]]);
            let hc = u16::from_be_bytes([pkt[10], pkt[11]]);
            let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
            sum = (sum & 0xffff) + (sum >> 16);
            sum = (sum & 0xffff) + (sum >> 16);
            pkt[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        }
        _ => pkt[1] |= CE << 4,
    }
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{ecn_field, mark_ce, CE};

    /// RFC 1071 checksum of an IPv4 header (checksum field included), 0 when valid.
    pub(crate) fn fold(h: &[u8]) -> u16 {
        let mut s: u32 = h
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    fn ipv4(tos: u8) -> Vec<u8> {
        let mut p = vec![
            0x45, tos, 0, 40, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        p.resize(40, 0xab);
        let c = fold(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(fold(&p[..20]), 0);
        p
    }

    #[test]
    fn ect_ipv4_is_marked_ce_with_a_valid_checksum_and_dscp_kept() {
        // DSCP EF (46) with ECT(0), and ECT(1).
        for tos in [(46 << 2) | 0b10, 0b01, 0xfd] {
            let mut p = ipv4(tos);
            assert!(mark_ce(&mut p), "tos {tos:#x}");
            assert_eq!(p[1] & 0b11, CE);
            assert_eq!(p[1] >> 2, tos >> 2, "DSCP unchanged");
            assert_eq!(fold(&p[..20]), 0, "header checksum valid after marking");
            assert_eq!(&p[20..], &ipv4(tos)[20..], "payload untouched");
        }
    }

    #[test]
    fn not_ect_and_non_ip_packets_are_left_alone() {
        let mut p = ipv4(46 << 2);
        let before = p.clone();
        assert!(!mark_ce(&mut p));
        assert_eq!(p, before);
        for mut junk in [vec![], vec![0x45; 19], vec![0x60; 39], vec![0x00; 60]] {
            let before = junk.clone();
            assert!(!mark_ce(&mut junk));
            assert_eq!(junk, before);
        }
    }

    #[test]
    fn ce_stays_ce_and_counts_as_markable() {
        let mut p = ipv4(0b11);
        let before = p.clone();
        assert!(mark_ce(&mut p));
        assert_eq!(p, before);
    }

    #[test]
    fn ect_ipv6_is_marked_in_the_traffic_class() {
        // Version 6, traffic class 0xb9 (DSCP 46, ECT(1)), flow label 0x12345.
        let mut p = vec![0u8; 48];
        p[0] = 0x6b;
        p[1] = 0x91;
        p[2] = 0x23;
        p[3] = 0x45;
        assert_eq!(ecn_field(&p), Some(0b01));
        assert!(mark_ce(&mut p));
        assert_eq!(ecn_field(&p), Some(CE));
        assert_eq!((p[0], p[1] & 0x0f, p[2], p[3]), (0x6b, 0x01, 0x23, 0x45));
        assert_eq!(p[1] >> 6, 0b10, "DSCP bits of byte 1 kept");
    }
}
