//! Reading DCCP packets back out of a capture file: classic pcap (either
//! byte order, µs or ns) and pcapng (Section Header, Interface Description
//! and Enhanced Packet blocks), with Ethernet (1) or raw IP (101) link
//! types, IPv4 and IPv6. This is how tests check what the reference kernel
//! put on the wire with our own decoder instead of tshark's.
//!
//! Hand-written (about 150 lines) rather than a dependency: only the
//! three pcapng block types and two link types are needed, and the reader
//! must treat the file as hostile input like everything else in `wire`:
//! every length is checked, a malformed file ends with
//! [`WireError::BadFraming`], nothing panics.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::checksum::IPPROTO_DCCP;
use super::WireError;

const LINKTYPE_ETHERNET: u16 = 1;
const LINKTYPE_RAW: u16 = 101;

/// One DCCP packet found in a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedDccp {
    /// 1-based frame number in the file (as Wireshark counts).
    pub frame: usize,
    /// pcapng interface id (0 for classic pcap).
    pub iface: u32,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The DCCP packet: header, options, payload.
    pub dccp: Vec<u8>,
}

/// Every IPv4/IPv6 packet with protocol 33 in `file` (pcap or pcapng).
/// Frames of other protocols are counted in the frame numbers but skipped.
pub fn dccp_packets(file: &[u8]) -> Result<Vec<CapturedDccp>, WireError> {
    let frames = frames(file)?;
    Ok(frames
        .into_iter()
        .enumerate()
        .filter_map(|(i, (iface, link, data))| {
            let (src, dst, dccp) = ip_dccp(link, data)?;
            Some(CapturedDccp {
                frame: i + 1,
                iface,
                src,
                dst,
                dccp: dccp.to_vec(),
            })
        })
        .collect())
}

type Frame<'a> = (u32, u16, &'a [u8]);

fn frames(f: &[u8]) -> Result<Vec<Frame<'_>>, WireError> {
    let magic = f.get(..4).ok_or(WireError::BadFraming)?;
    match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => classic(f, false),
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => classic(f, true),
        [0x0a, 0x0d, 0x0d, 0x0a] => pcapng(f),
        _ => Err(WireError::BadFraming),
    }
}

fn u32_at(b: &[u8], off: usize, be: bool) -> Result<u32, WireError> {
    let s: [u8; 4] = b
        .get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .ok_or(WireError::BadFraming)?;
    Ok(if be {
        u32::from_be_bytes(s)
    } else {
        u32::from_le_bytes(s)
    })
}

fn classic(f: &[u8], be: bool) -> Result<Vec<Frame<'_>>, WireError> {
    let link = u32_at(f, 20, be)? as u16;
    let mut out = Vec::new();
    let mut off = 24;
    while off < f.len() {
        let incl = u32_at(f, off + 8, be)? as usize;
        let data = f
            .get(off + 16..off + 16 + incl)
            .ok_or(WireError::BadFraming)?;
        out.push((0, link, data));
        off += 16 + incl;
    }
    Ok(out)
}

fn pcapng(f: &[u8]) -> Result<Vec<Frame<'_>>, WireError> {
    let mut out = Vec::new();
    let mut links: Vec<u16> = Vec::new();
    let mut be = false;
    let mut off = 0;
    while off < f.len() {
        let raw_type = u32_at(f, off, false)?;
        if raw_type == 0x0a0d_0d0a {
            // Section Header: the byte-order magic decides this section.
            be = f.get(off + 8..off + 12) == Some(&[0x1a, 0x2b, 0x3c, 0x4d][..]);
            links.clear();
        }
        let btype = u32_at(f, off, be)?;
        let blen = u32_at(f, off + 4, be)? as usize;
        if blen < 12 || !blen.is_multiple_of(4) {
            return Err(WireError::BadFraming);
        }
        let block = f.get(off..off + blen).ok_or(WireError::BadFraming)?;
        match btype {
            1 => {
                let lt = u32_at(block, 8, be)?;
                links.push(if be { (lt >> 16) as u16 } else { lt as u16 });
            }
            6 => {
                let iface = u32_at(block, 8, be)?;
                let cap = u32_at(block, 20, be)? as usize;
                let data = block.get(28..28 + cap).ok_or(WireError::BadFraming)?;
                let link = *links.get(iface as usize).ok_or(WireError::BadFraming)?;
                out.push((iface, link, data));
            }
            _ => {}
        }
        off += blen;
    }
    Ok(out)
}

/// `(src, dst, dccp)` of a frame that is IPv4/IPv6 protocol 33.
fn ip_dccp(link: u16, frame: &[u8]) -> Option<(IpAddr, IpAddr, &[u8])> {
    let ip = match link {
        LINKTYPE_ETHERNET => {
            let et = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
            if et != 0x0800 && et != 0x86dd {
                return None;
            }
            frame.get(14..)?
        }
        LINKTYPE_RAW => frame,
        _ => return None,
    };
    match ip.first()? >> 4 {
        4 => {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
            if ihl < 20 || *ip.get(9)? != IPPROTO_DCCP || total < ihl {
                return None;
            }
            let src = Ipv4Addr::from(<[u8; 4]>::try_from(ip.get(12..16)?).ok()?);
            let dst = Ipv4Addr::from(<[u8; 4]>::try_from(ip.get(16..20)?).ok()?);
            Some((src.into(), dst.into(), ip.get(ihl..total)?))
        }
        6 => {
            // No extension headers: DCCP directly after the fixed header.
            let plen = usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]));
            if *ip.get(6)? != IPPROTO_DCCP {
                return None;
            }
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(ip.get(8..24)?).ok()?);
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(ip.get(24..40)?).ok()?);
            Some((src.into(), dst.into(), ip.get(40..40 + plen)?))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;
    use crate::wire::pcap::PcapWriter;

    /// Our own writer's output reads back; every truncation is an error
    /// or a shorter list, never a panic.
    #[test]
    fn reads_back_our_pcap_writer_and_survives_truncation() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let a: IpAddr = "10.0.1.1".parse().unwrap();
        let b: IpAddr = "10.0.1.2".parse().unwrap();
        let mut pkt = vec![0u8; 24];
        pkt[4] = 5; // Data Offset 5 words
        pkt[8] = (2 << 1) | 1; // Data, X=1
        w.write_dccp(Instant::from_nanos(1_000), a, b, &pkt)
            .unwrap();
        w.write_dccp(Instant::from_nanos(2_000), b, a, &pkt)
            .unwrap();
        let file = w.into_inner().unwrap();
        let got = dccp_packets(&file).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!((got[1].src, got[1].dst, got[1].frame), (b, a, 2));
        assert_eq!(got[0].dccp.len(), 24);
        for n in 0..file.len() {
            if let Ok(v) = dccp_packets(&file[..n]) {
                assert!(v.len() <= 2);
            }
        }
    }
}
