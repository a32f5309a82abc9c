//! A classic-pcap writer for DCCP traffic, readable by stock
//! Wireshark/tshark.
//!
//! Format: the classic libpcap file (magic `0xa1b2c3d4`, microsecond
//! timestamps, version 2.4) with link type `LINKTYPE_RAW` (101): each record
//! is a bare IP packet. We write an IPv4 (protocol 33) or IPv6 (next header
//! 33) header around each DCCP packet and recompute the DCCP checksum for
//! those addresses, because the core may have emitted the packet for UDP
//! encapsulation (RFC 6773), which tshark cannot dissect. Timestamps come
//! from the core's [`Instant`] (nanoseconds since the driver's epoch),
//! truncated to microseconds.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::Path;

use super::checksum::{self, IPPROTO_DCCP};
use super::packet::Packet;
use crate::time::Instant;

/// `LINKTYPE_RAW`: packets begin with an IPv4 or IPv6 header.
pub const LINKTYPE_RAW: u32 = 101;
const MAGIC_USEC: u32 = 0xa1b2_c3d4;
const SNAPLEN: u32 = 65_535;

/// Writes a pcap stream to `W`.
pub struct PcapWriter<W: Write> {
    out: W,
    ip_id: u16,
    scratch: Vec<u8>,
    packets: u64,
}

impl PcapWriter<BufWriter<File>> {
    /// Create (truncate) `path` and write the file header.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        PcapWriter::new(BufWriter::new(File::create(path)?))
    }
}

impl<W: Write> PcapWriter<W> {
    /// Write the global header and return the writer.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&MAGIC_USEC.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone = 0, sigfigs = 0
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_RAW.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            ip_id: 0,
            scratch: Vec::with_capacity(2048),
            packets: 0,
        })
    }

    /// Number of records written.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Record one DCCP packet sent from `src` to `dst` at `now`. The DCCP
    /// checksum is recomputed for these addresses when the packet is
    /// structurally valid (malformed packets are written as they are, which
    /// is what a capture of hostile input should show).
    pub fn write_dccp(
        &mut self,
        now: Instant,
        src: IpAddr,
        dst: IpAddr,
        dccp: &[u8],
    ) -> io::Result<()> {
        let mut pkt = std::mem::take(&mut self.scratch);
        let r = self.ip_header(&mut pkt, src, dst, IPPROTO_DCCP, dccp.len());
        if let Err(e) = r {
            self.scratch = pkt;
            return Err(e);
        }
        let ip_len = pkt.len();
        pkt.extend_from_slice(dccp);
        let addrs = match (src, dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => (src, dst),
            (s, d) => (
                IpAddr::V6(checksum::as_ipv6(s)),
                IpAddr::V6(checksum::as_ipv6(d)),
            ),
        };
        if let Ok(mut p) = Packet::new_checked(&mut pkt[ip_len..]) {
            // A bad Checksum Coverage leaves the packet as it came.
            let _ = p.fill_checksum(addrs);
        }
        let r = self.write_record(now, &pkt);
        self.scratch = pkt;
        r
    }

    /// Record one transport segment (e.g. a UDP datagram, header included:
    /// DCCP-in-UDP or U-DCCP) sent from `src` to `dst` with IP protocol
    /// `proto`, as it is (its checksum is the caller's).
    pub fn write_segment(
        &mut self,
        now: Instant,
        src: IpAddr,
        dst: IpAddr,
        proto: u8,
        segment: &[u8],
    ) -> io::Result<()> {
        let mut pkt = std::mem::take(&mut self.scratch);
        let r = self
            .ip_header(&mut pkt, src, dst, proto, segment.len())
            .and_then(|()| {
                pkt.extend_from_slice(segment);
                self.write_record(now, &pkt)
            });
        self.scratch = pkt;
        r
    }

    /// Writes (replacing `pkt`) an IPv4 header (DF, TTL 64) or, when either
    /// address is IPv6, an IPv6 one, for a payload of `len` bytes.
    fn ip_header(
        &mut self,
        pkt: &mut Vec<u8>,
        src: IpAddr,
        dst: IpAddr,
        proto: u8,
        len: usize,
    ) -> io::Result<()> {
        pkt.clear();
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let total = 20 + len;
                let total16 = u16::try_from(total).map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, "packet too large for IPv4")
                })?;
                let mut h = [0u8; 20];
                h[0] = 0x45; // version 4, IHL 5
                h[2..4].copy_from_slice(&total16.to_be_bytes());
                h[4..6].copy_from_slice(&self.ip_id.to_be_bytes());
                self.ip_id = self.ip_id.wrapping_add(1);
                h[6] = 0x40; // DF
                h[8] = 64; // TTL
                h[9] = proto;
                h[12..16].copy_from_slice(&s.octets());
                h[16..20].copy_from_slice(&d.octets());
                let c = checksum::internet_checksum(&h);
                h[10..12].copy_from_slice(&c.to_be_bytes());
                pkt.extend_from_slice(&h);
            }
            (s, d) => {
                let (s6, d6) = (checksum::as_ipv6(s), checksum::as_ipv6(d));
                let plen = u16::try_from(len)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "packet too large"))?;
                let mut h = [0u8; 40];
                h[0] = 0x60;
                h[4..6].copy_from_slice(&plen.to_be_bytes());
                h[6] = proto;
                h[7] = 64;
                h[8..24].copy_from_slice(&s6.octets());
                h[24..40].copy_from_slice(&d6.octets());
                pkt.extend_from_slice(&h);
            }
        }
        Ok(())
    }

    /// Record one raw IP packet as it is.
    pub fn write_ip(&mut self, now: Instant, ip_packet: &[u8]) -> io::Result<()> {
        self.write_record(now, ip_packet)
    }

    fn write_record(&mut self, now: Instant, data: &[u8]) -> io::Result<()> {
        let ns = now.as_nanos();
        // pcap stores 32-bit seconds; wraps after 2106, fine for captures.
        let sec = (ns / 1_000_000_000) as u32;
        let usec = ((ns % 1_000_000_000) / 1_000) as u32;
        let len = u32::try_from(data.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "record too large"))?;
        let incl = len.min(SNAPLEN);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&sec.to_le_bytes());
        h[4..8].copy_from_slice(&usec.to_le_bytes());
        h[8..12].copy_from_slice(&incl.to_le_bytes());
        h[12..16].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&data[..incl as usize])?;
        self.packets += 1;
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flush and return the inner writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
