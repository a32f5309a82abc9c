//! Coalescing several flows at once on the way into the TUN.
//!
//! Why: one [`Coalescer`] holds one pending super-packet, so any packet of
//! another flow flushes it. The send queue's flow queuing (FQ-CoDel, DRR
//! with a one-packet quantum) interleaves bulk flows packet by packet, and
//! with four TCP streams the receiving daemon then wrote 7 segments per TUN
//! write instead of 33 — each write one pass through the kernel's stack.
//! Like Linux's GRO, which keeps up to 8 flows pending per NAPI context
//! (`MAX_GRO_SKBS`), this keeps a coalescer per recent flow. Order within
//! a flow is kept (one flow, one slot); across flows it may change, as GRO
//! changes it.

use super::{Coalescer, OffloadStats, VNET_HDR_LEN};

/// Flows pending at once (Linux GRO: `MAX_GRO_SKBS` = 8).
pub const FLOW_SLOTS: usize = 8;

/// Up to `FLOW_SLOTS` coalescers, one per flow seen most recently.
pub struct FlowCoalescer {
    /// (flow key, its coalescer), in order of first use; the oldest is
    /// flushed and reused when a new flow needs a slot.
    slots: Vec<(u64, Coalescer)>,
    /// The next slot to reuse when all are taken (round robin = oldest).
    evict: usize,
    udp_gso: bool,
}

impl Default for FlowCoalescer {
    fn default() -> Self {
        FlowCoalescer::new()
    }
}

impl FlowCoalescer {
    pub fn new() -> FlowCoalescer {
        FlowCoalescer {
            slots: Vec::new(),
            evict: 0,
            udp_gso: false,
        }
    }

    /// See [`Coalescer::set_udp_gso`]. Called per packet by the TUN writer:
    /// the slots are only visited when the setting changes.
    pub fn set_udp_gso(&mut self, on: bool) {
        if on == self.udp_gso {
            return;
        }
        self.udp_gso = on;
        for (_, c) in &mut self.slots {
            c.set_udp_gso(on);
        }
    }

    /// Offers one delivered IP packet to its flow's coalescer (see
    /// [`Coalescer::push`]); call [`FlowCoalescer::flush`] at the end of
    /// the wake-up.
    pub fn push(
        &mut self,
        pkt: &[u8],
        stats: &mut OffloadStats,
        write: &mut impl FnMut(&[u8; VNET_HDR_LEN], &[u8]),
    ) {
        let key = flow_key(pkt);
        let i = match self.slots.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None if self.slots.len() < FLOW_SLOTS => {
                let mut c = Coalescer::new();
                c.set_udp_gso(self.udp_gso);
                self.slots.push((key, c));
                self.slots.len() - 1
            }
            None => {
                let i = self.evict;
                self.evict = (self.evict + 1) % FLOW_SLOTS;
                self.slots[i].1.flush(stats, write);
                self.slots[i].0 = key;
                i
            }
        };
        self.slots[i].1.push(pkt, stats, write);
    }

    /// Writes every flow's pending super-packet.
    pub fn flush(
        &mut self,
        stats: &mut OffloadStats,
        write: &mut impl FnMut(&[u8; VNET_HDR_LEN], &[u8]),
    ) {
        for (_, c) in &mut self.slots {
            c.flush(stats, write);
        }
    }
}

/// A flow's identity: IP version, protocol, addresses and, for TCP and
/// UDP, ports (FNV-1a over those bytes). Anything unparseable is flow 0; a
/// collision only shares a slot, as all flows did before.
fn flow_key(p: &[u8]) -> u64 {
    let (proto, addrs, l4) = match p.first().map(|b| b >> 4) {
        Some(4) if p.len() >= 20 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            (p[9], &p[12..20], ihl)
        }
        Some(6) if p.len() >= 40 => (p[6], &p[8..40], 40),
        _ => return 0,
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    eat(p[0] >> 4);
    eat(proto);
    addrs.iter().for_each(|&b| eat(b));
    if matches!(proto, 6 | 17) {
        if let Some(ports) = p.get(l4..l4 + 4) {
            ports.iter().for_each(|&b| eat(b));
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::super::tests::tcp_packet_for_flow;
    use super::*;

    fn run(pkts: &[Vec<u8>]) -> (Vec<Vec<u8>>, OffloadStats) {
        let mut c = FlowCoalescer::new();
        let mut st = OffloadStats::default();
        let mut w = Vec::new();
        let mut wr = |_: &[u8; VNET_HDR_LEN], p: &[u8]| w.push(p.to_vec());
        for p in pkts {
            c.push(p, &mut st, &mut wr);
        }
        c.flush(&mut st, &mut wr);
        (w, st)
    }

    /// Four TCP flows interleaved segment by segment (as the send queue's
    /// DRR sends them) still leave as one super-packet each.
    #[test]
    fn interleaved_flows_coalesce_each() {
        let mut pkts = Vec::new();
        for i in 0..10u32 {
            for port in [1000, 1001, 1002, 1003] {
                pkts.push(tcp_packet_for_flow(port, 5000 + i * 1000, 1000));
            }
        }
        let (w, st) = run(&pkts);
        assert_eq!(w.len(), 4, "one super-packet per flow");
        assert_eq!((st.gro_frames, st.gro_segments), (4, 40));
        assert!(w.iter().all(|p| p.len() == 40 + 10 * 1000));
    }

    /// More flows than slots: the oldest slot is flushed and reused; every
    /// byte comes out once and each flow's segments stay in order.
    #[test]
    fn more_flows_than_slots_lose_nothing() {
        let flows = FLOW_SLOTS as u16 + 3;
        let mut pkts = Vec::new();
        for i in 0..4u32 {
            for port in 0..flows {
                pkts.push(tcp_packet_for_flow(2000 + port, 7000 + i * 500, 500));
            }
        }
        let (w, st) = run(&pkts);
        let payload: usize = w.iter().map(|p| p.len() - 40).sum();
        assert_eq!(payload, usize::from(flows) * 4 * 500);
        // Cycling through more flows than slots evicts each before its next
        // segment: nothing merges, nothing is lost.
        assert_eq!(st.gro_frames, 0);
        assert_eq!(w.len(), usize::from(flows) * 4);
        // Per flow: the sequence numbers written rise.
        for port in 0..flows {
            let seqs: Vec<u32> = w
                .iter()
                .filter(|p| u16::from_be_bytes([p[20], p[21]]) == 2000 + port)
                .map(|p| u32::from_be_bytes([p[24], p[25], p[26], p[27]]))
                .collect();
            assert!(seqs.windows(2).all(|s| s[0] < s[1]), "{port}: {seqs:?}");
        }
    }

    #[test]
    fn flow_key_separates_ports_and_ignores_junk() {
        let a = tcp_packet_for_flow(1, 0, 10);
        let b = tcp_packet_for_flow(2, 0, 10);
        assert_ne!(flow_key(&a), flow_key(&b));
        assert_eq!(flow_key(&a), flow_key(&tcp_packet_for_flow(1, 99, 20)));
        for junk in [&[][..], &[0x45; 19], &[0x60; 39], &[0x00; 50]] {
            assert_eq!(flow_key(junk), 0);
        }
        // IHL pointing past the end: no ports read, no panic.
        let mut long = a.clone();
        long[0] = 0x4f;
        flow_key(&long[..30]);
    }
}
