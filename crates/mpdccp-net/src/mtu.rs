//! Tunnel MTU from the path MTU.
//!
//! Every tunnelled IP packet travels as the payload of one DCCP-DataAck
//! (RFC 4340 §5.1 generic header with 48-bit sequence numbers, 16 bytes, plus
//! the 8-byte acknowledgement sub-header, §5.3) with options (MP_SEQ and
//! friends of RFC 9897 §3.2, Ack Vector, timestamps — padded to 4 bytes),
//! inside UDP (RFC 6773, 8 bytes) inside IPv4 (20) or IPv6 (40). The tunnel
//! MTU is what is left of the smallest path MTU, so an inner packet never has to
//! be fragmented on any path.

/// Bytes of DCCP header in front of every data packet (extended sequence
/// numbers + acknowledgement sub-header).
pub const DCCP_HEADER_BYTES: u32 = 16 + 8;
/// Option space reserved in every data packet by default: what the core
/// reserves ([`mpdccp_proto::conn::DATA_HEADER_MAX`]) minus the fixed header.
pub const DEFAULT_OPTIONS_BUDGET_BYTES: u32 =
    mpdccp_proto::conn::DATA_HEADER_MAX as u32 - DCCP_HEADER_BYTES;
pub const UDP_HEADER_BYTES: u32 = 8;
pub const IPV4_HEADER_BYTES: u32 = 20;
pub const IPV6_HEADER_BYTES: u32 = 40;
/// IPv6 requires every link to carry 1280-byte packets (RFC 8200 §5); a tunnel
/// that carries IPv6 inside must not go below it.
pub const IPV6_MIN_MTU: u32 = 1280;

/// The overhead and resulting sizes for one outer path MTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtuPlan {
    pub path_mtu: u32,
    /// Outer IP + encapsulation (UDP, or nothing for native DCCP) bytes.
    pub outer_bytes: u32,
    /// DCCP header + option budget.
    pub dccp_bytes: u32,
    /// Largest DCCP packet (the UDP payload, or the IP payload for native
    /// DCCP): what the core calls `mss_bytes`.
    pub mss_bytes: u32,
    /// Largest inner IP packet: the TUN MTU.
    pub tun_mtu: u32,
}

impl MtuPlan {
    /// `ipv6_outer`: whether any path runs over IPv6 (40-byte header).
    /// DCCP-in-UDP.
    pub fn new(path_mtu: u32, ipv6_outer: bool, options_budget_bytes: u32) -> MtuPlan {
        Self::with_encap(path_mtu, ipv6_outer, UDP_HEADER_BYTES, options_budget_bytes)
    }

    /// `encap_bytes` between the outer IP header and DCCP: 8 for UDP, 0
    /// for native DCCP.
    pub fn with_encap(
        path_mtu: u32,
        ipv6_outer: bool,
        encap_bytes: u32,
        options_budget_bytes: u32,
    ) -> MtuPlan {
        let ip = if ipv6_outer {
            IPV6_HEADER_BYTES
        } else {
            IPV4_HEADER_BYTES
        };
        let outer_bytes = ip + encap_bytes;
        let dccp_bytes = DCCP_HEADER_BYTES + options_budget_bytes.next_multiple_of(4);
        let mss_bytes = path_mtu.saturating_sub(outer_bytes);
        MtuPlan {
            path_mtu,
            outer_bytes,
            dccp_bytes,
            mss_bytes,
            tun_mtu: mss_bytes.saturating_sub(dccp_bytes),
        }
    }

    /// Whether IPv6 can run inside (RFC 8200 minimum link MTU).
    pub fn carries_ipv6(&self) -> bool {
        self.tun_mtu >= IPV6_MIN_MTU
    }
}

impl std::fmt::Display for MtuPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "path MTU {} - outer IP(+UDP) {} - DCCP header+options {} = tunnel MTU {} (DCCP packet <= {} bytes)",
            self.path_mtu, self.outer_bytes, self.dccp_bytes, self.tun_mtu, self.mss_bytes
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_budget_matches_the_core() {
        let p = MtuPlan::new(1500, false, DEFAULT_OPTIONS_BUDGET_BYTES);
        assert_eq!(p.dccp_bytes as usize, mpdccp_proto::conn::DATA_HEADER_MAX);
        assert_eq!(p.tun_mtu, 1472 - p.dccp_bytes);
    }

    #[test]
    fn ethernet_ipv4_path() {
        let p = MtuPlan::new(1500, false, 48);
        // 1500 - 20 - 8 = 1472 for DCCP; 1472 - 24 - 48 = 1400 inside.
        assert_eq!(p.mss_bytes, 1472);
        assert_eq!(p.tun_mtu, 1400);
        assert!(p.carries_ipv6());
    }

    #[test]
    fn ipv6_outer_and_unaligned_options() {
        let p = MtuPlan::new(1500, true, 45);
        assert_eq!(p.outer_bytes, 48);
        assert_eq!(p.dccp_bytes, 24 + 48);
        assert_eq!(p.tun_mtu, 1500 - 48 - 72);
    }

    #[test]
    fn native_dccp_has_no_udp_header() {
        let udp = MtuPlan::new(1500, false, 48);
        let raw = MtuPlan::with_encap(1500, false, 0, 48);
        // 1500 - 20 = 1480 for DCCP; 1480 - 24 - 48 = 1408 inside.
        assert_eq!(
            (raw.outer_bytes, raw.mss_bytes, raw.tun_mtu),
            (20, 1480, 1408)
        );
        assert_eq!(raw.tun_mtu, udp.tun_mtu + UDP_HEADER_BYTES);
        let raw6 = MtuPlan::with_encap(1500, true, 0, 48);
        assert_eq!(raw6.tun_mtu, 1500 - 40 - 72);
    }

    #[test]
    fn tiny_path_saturates() {
        let p = MtuPlan::new(40, false, 48);
        assert_eq!(p.tun_mtu, 0);
        assert!(!p.carries_ipv6());
    }
}
