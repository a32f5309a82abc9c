//! Output: the scheduling loop (MP_SEQ is assigned here), GSO batching and
//! the construction of each packet.

use super::adverts::{addaddr_hmac, removeaddr_hmac};
use super::*;

impl Connection {
    /// The next packet to send, written into `buf`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.last_now = self.last_now.max(now);
        // A datagram set aside by the previous GSO batch goes first.
        if let Some((path, n)) = self.held.take() {
            if buf.len() >= n {
                buf[..n].copy_from_slice(&self.held_buf[..n]);
                return Some(Transmit {
                    path,
                    size: n,
                    segment_size: None,
                });
            }
            self.held = Some((path, n));
            return None;
        }
        if self.state == ConnState::Closed && self.paths.iter().all(|p| !p.has_pending_reset()) {
            return None;
        }
        self.schedule(now);
        let n = self.paths.len();
        for k in 0..n {
            let i = (self.rr_next + k) % n;
            let Some(size) = self.emit_on(now, i, buf, false) else {
                continue;
            };
            self.rr_next = (i + 1) % n.max(1);
            self.count_tx(i, size);
            let id = self.paths[i].id;
            // GSO batch: more data packets of the same size for this path.
            let mut total = size;
            let mut segments = 1;
            let mss = self.config.mss_bytes as usize;
            while segments < self.config.max_gso_segments && buf.len() - total >= mss {
                self.schedule(now);
                let Some(m) = self.emit_on(now, i, &mut buf[total..], true) else {
                    break;
                };
                self.count_tx(i, m);
                if m == size {
                    total += m;
                    segments += 1;
                } else if m < size {
                    // The last segment may be shorter.
                    total += m;
                    segments += 1;
                    break;
                } else {
                    // Larger: it goes out alone on the next call.
                    self.held_buf.clear();
                    self.held_buf.extend_from_slice(&buf[total..total + m]);
                    self.held = Some((id, m));
                    break;
                }
            }
            return Some(Transmit {
                path: id,
                size: total,
                segment_size: (segments > 1).then_some(size),
            });
        }
        None
    }

    pub(super) fn count_tx(&mut self, i: usize, size: usize) {
        self.stats.tx_datagrams += 1;
        self.stats.tx_bytes += size as u64;
        let sf = &mut self.paths[i];
        sf.stats.tx_pkts += 1;
        sf.stats.tx_bytes += size as u64;
    }

    pub(super) fn rebuild_views(&mut self) {
        self.views.clear();
        for p in &self.paths {
            self.views.push(p.view());
        }
    }

    pub(super) fn snapshots(&mut self) {
        self.snaps.clear();
        for p in &self.paths {
            self.snaps.push(p.snapshot());
        }
    }

    /// Hands queued packets to paths as the scheduler decides; MP_SEQ is
    /// assigned here, in application order.
    pub(super) fn schedule(&mut self, now: Instant) {
        if self.queue.len() == 0 || !self.paths.iter().any(|p| p.is_open() && !p.failed) {
            return;
        }
        // Within this loop only the per-path queues change, so a view is
        // refreshed when its path takes a packet, not rebuilt for every path.
        self.rebuild_views();
        for _ in 0..64 {
            let Some(head) = self.queue.front() else {
                break;
            };
            let meta = PacketMeta {
                len: head.data.len(),
                queued_pkts: self.queue.len(),
                queued_bytes: self.queue.bytes(),
            };
            self.sched_out.clear();
            self.scheduler
                .select(now, &meta, &self.views, &mut self.sched_out);
            // A usable path that could not take this packet (window or pacer)
            // has more demand than it carries: not application limited.
            for (k, v) in self.views.iter().enumerate() {
                if v.is_usable() && !v.can_send(now) && !self.sched_out.contains(&v.id) {
                    self.paths[k].blocked_at = Some(now);
                }
            }
            // Keep only paths that can carry data and are not hopelessly backlogged.
            let paths = &self.paths;
            self.sched_out.retain(|id| {
                paths
                    .binary_search_by_key(id, |p| p.id)
                    .ok()
                    .is_some_and(|i| {
                        let p = &paths[i];
                        p.is_open() && !p.failed && (p.queue.len() as u32) < p.cc.cwnd_pkts().max(1)
                    })
            });
            self.sched_out.dedup();
            if self.sched_out.is_empty() {
                break;
            }
            // Invariant: head existed above and nothing popped since.
            let q = self.queue.pop().expect("head exists");
            let seq = if self.mp == Some(true) {
                let s = self.next_mp_seq;
                self.next_mp_seq += 1;
                s
            } else {
                0
            };
            let n = self.sched_out.len();
            let mut q = Some(q);
            for k in 0..n {
                let id = self.sched_out[k];
                // Invariant: retained ids exist.
                let i = self.idx(id).expect("retained path exists");
                let item = if k + 1 == n {
                    q.take().expect("moved once")
                } else {
                    let src = q.as_ref().expect("still owned");
                    Queued {
                        data: src.data.clone(),
                        enqueued: src.enqueued,
                    }
                };
                self.paths[i].queue.push_back((seq, item));
                self.views[i] = self.paths[i].view();
            }
            self.scheduler.on_scheduled(now, &meta, &self.sched_out);
        }
    }

    pub(super) fn base_segment<'a>(sf: &Subflow, ptype: PacketType, seq: u64) -> Segment<'a> {
        let mut s = Segment::new(ptype, seq & SEQ_MASK);
        s.src_port = sf.cfg.local.map_or(4242, |a| a.port());
        s.dst_port = sf.cfg.remote.map_or(4242, |a| a.port());
        if ptype.has_ack() {
            s.ack = Some(sf.gsr & SEQ_MASK);
        }
        s
    }

    /// Builds the next packet due on path `i`, if any.
    /// With `data_only`, only a data packet (for a GSO batch) is built.
    pub(super) fn emit_on(
        &mut self,
        now: Instant,
        i: usize,
        buf: &mut [u8],
        data_only: bool,
    ) -> Option<usize> {
        let mp_on = self.mp == Some(true);
        let keys = self.d_keys();
        let sf = &mut self.paths[i];
        let addrs = codec::path_ips(sf.cfg.local, sf.cfg.remote);
        if data_only
            && !(sf.state == SubState::Open
                && sf.pend.reset.is_none()
                && sf.pend.sync.is_none()
                && sf.pend.syncack.is_none()
                && !sf.failed
                && !sf.queue.is_empty()
                && sf.cwnd_room()
                && sf.pacing_ok(now))
        {
            return None;
        }

        // 1. Reset (refusals, closes, fast close).
        if let Some(code) = sf.pend.reset.take() {
            let seq = sf.next_seq();
            let mut s = Self::base_segment(sf, PacketType::Reset, seq);
            s.reset_code = code;
            if code == ResetCode::MpFastClose {
                s.mp.fast_close = self.remote_key;
            }
            self.stats.resets_sent += 1;
            return self.finish_emit(s, addrs, buf);
        }
        match sf.state {
            SubState::Request => {
                if !(sf.pend.request || sf.expired(Timer::Retx, now)) {
                    return None;
                }
                sf.pend.request = false;
                sf.retx_tries += 1;
                sf.timers.arm(
                    Timer::Retx,
                    now + retx_backoff(sf.retx_interval, sf.retx_tries),
                );
                let seq = sf.next_seq();
                sf.hs_probe = Some((seq, now));
                let mut s = Self::base_segment(sf, PacketType::Request, seq);
                s.service_code = self.config.service_code;
                s.push_feat(opt::CHANGE_L, FeatureNum::Ccid, Some(2));
                s.push_feat(opt::CHANGE_R, FeatureNum::Ccid, Some(2));
                s.push_feat(opt::CHANGE_R, FeatureNum::SendAckVector, Some(1));
                s.push_feat(
                    opt::CHANGE_L,
                    FeatureNum::SequenceWindow,
                    Some(sf.seq_window),
                );
                if self.config.multipath {
                    if !sf.join {
                        s.push_feat(opt::CHANGE_L, FeatureNum::MultipathCapable, Some(0));
                        s.mp.key = Some(MpKey {
                            plain: true,
                            ci: self.local_ci,
                            key: self.local_key,
                            peer_key: None,
                        });
                    } else {
                        s.mp.join = Some(MpJoin {
                            addr_id: sf.local_addr_id,
                            token: self.remote_ci.unwrap_or(0),
                            nonce: sf.local_nonce,
                        });
                    }
                }
                return self.finish_emit(s, addrs, buf);
            }
            SubState::Respond if sf.pend.response => {
                sf.pend.response = false;
                let seq = sf.next_seq();
                sf.hs_probe = Some((seq, now));
                let mut s = Self::base_segment(sf, PacketType::Response, seq);
                s.service_code = self.config.service_code;
                s.push_feat(opt::CONFIRM_L, FeatureNum::Ccid, Some(2));
                s.push_feat(opt::CONFIRM_R, FeatureNum::Ccid, Some(2));
                s.push_feat(opt::CONFIRM_L, FeatureNum::SendAckVector, Some(1));
                s.push_feat(
                    opt::CONFIRM_R,
                    FeatureNum::SequenceWindow,
                    Some(sf.seq_window),
                );
                if mp_on {
                    if !sf.join {
                        s.push_feat(opt::CONFIRM_R, FeatureNum::MultipathCapable, Some(0));
                        s.mp.key = Some(MpKey {
                            plain: true,
                            ci: self.local_ci,
                            key: self.local_key,
                            peer_key: None,
                        });
                    } else if let Some(k) = keys {
                        s.mp.join = Some(MpJoin {
                            addr_id: sf.local_addr_id,
                            token: self.remote_ci.unwrap_or(0),
                            nonce: sf.local_nonce,
                        });
                        // B: HMAC(d-keyB, RB‖RA).
                        s.mp.hmac = Some(keys::join_hmac(
                            &k.d_key_local(),
                            sf.local_nonce,
                            sf.remote_nonce,
                        ));
                    }
                } else if !sf.join {
                    // Feature 10 not understood / refused: empty Confirm
                    // (RFC 4340 §6.6.7) tells the client to fall back.
                    s.push_feat(opt::CONFIRM_R, FeatureNum::MultipathCapable, None);
                }
                return self.finish_emit(s, addrs, buf);
            }
            SubState::PartOpen if sf.pend.handshake_ack => {
                sf.pend.handshake_ack = false;
                sf.retx_tries += 1;
                sf.timers.arm(
                    Timer::Retx,
                    now + retx_backoff(sf.retx_interval, sf.retx_tries),
                );
                let seq = sf.next_seq();
                let mut s = Self::base_segment(sf, PacketType::Ack, seq);
                let av = sf.rx.encode(
                    sf.ack_cover(self.config.ackvec_cover_pkts),
                    ACKVEC_MAX_CELLS,
                );
                if mp_on {
                    if !sf.join {
                        s.mp.key = Some(MpKey {
                            plain: true,
                            ci: self.local_ci,
                            key: self.local_key,
                            peer_key: self.remote_key,
                        });
                    } else if let Some(k) = keys {
                        // A: HMAC(d-keyA, RA‖RB).
                        s.mp.hmac = Some(keys::join_hmac(
                            &k.d_key_local(),
                            sf.local_nonce,
                            sf.remote_nonce,
                        ));
                    }
                }
                sf.on_ack_sent();
                s.ack_vector_out = Some(av);
                let r = self.finish_emit(s, addrs, buf);
                return r;
            }
            SubState::CloseReq if sf.pend.closereq => {
                sf.pend.closereq = false;
                sf.retx_tries += 1;
                sf.timers.arm(
                    Timer::Retx,
                    now + retx_backoff(sf.retx_interval, sf.retx_tries),
                );
                let seq = sf.next_seq();
                let mut s = Self::base_segment(sf, PacketType::CloseReq, seq);
                if self.closing_mp {
                    s.mp.close = self.remote_key;
                }
                return self.finish_emit(s, addrs, buf);
            }
            SubState::Closing if sf.pend.close => {
                sf.pend.close = false;
                sf.retx_tries += 1;
                sf.timers.arm(
                    Timer::Retx,
                    now + retx_backoff(sf.retx_interval, sf.retx_tries),
                );
                let seq = sf.next_seq();
                let mut s = Self::base_segment(sf, PacketType::Close, seq);
                if self.closing_mp {
                    s.mp.close = self.remote_key;
                }
                return self.finish_emit(s, addrs, buf);
            }
            _ => {}
        }
        if !sf.have_isr || !matches!(sf.state, SubState::Open | SubState::PartOpen) {
            return None;
        }
        // 2. Sync / SyncAck (RFC 4340 §7.5.4).
        if let Some(ack) = sf.pend.syncack.take() {
            let seq = sf.next_seq();
            let mut s = Self::base_segment(sf, PacketType::SyncAck, seq);
            s.ack = Some(ack);
            self.stats.syncacks_sent += 1;
            return self.finish_emit(s, addrs, buf);
        }
        if let Some(ack) = sf.pend.sync.take() {
            let seq = sf.next_seq();
            let mut s = Self::base_segment(sf, PacketType::Sync, seq);
            s.ack = Some(ack);
            sf.last_sync_sent = Some(now);
            self.stats.syncs_sent += 1;
            return self.finish_emit(s, addrs, buf);
        }
        if sf.state != SubState::Open {
            return None;
        }
        // 3. Data, when cwnd and the pacer allow.
        let data_ready = !sf.failed && !sf.queue.is_empty() && sf.cwnd_room() && sf.pacing_ok(now);
        // Connection-level MP options due on this path.
        let advert = if mp_on {
            self.adverts.iter().position(|a| a.is_due(now))
        } else {
            None
        };
        let prio_due =
            sf.pend.prio.is_some() && (sf.pend.prio_due || sf.expired(Timer::PrioRetx, now));
        let pure_ack =
            sf.wants_ack(now) || !sf.pend.confirms.is_empty() || prio_due || advert.is_some();
        if !data_ready && !pure_ack {
            return None;
        }
        let mut data = None;
        if data_ready {
            data = sf.queue.pop_front();
        }
        let ptype = if data.is_some() {
            PacketType::DataAck
        } else {
            PacketType::Ack
        };
        let seq = sf.next_seq();
        let mut s = Self::base_segment(sf, ptype, seq);
        let av = sf.rx.encode(
            sf.ack_cover(self.config.ackvec_cover_pkts),
            ACKVEC_MAX_CELLS,
        );
        s.ack_vector_out = Some(av);
        // A held pure ack says for how long, so the peer's RTT sample does
        // not carry our Ack Ratio / ack-timer wait (RFC 4340 §13.2). Data
        // packets leave it out: their size is budgeted to the MSS.
        if ptype == PacketType::Ack {
            s.elapsed_10us = sf.ack_elapsed_10us(now);
        }
        if let Some(v) = sf.pend.confirm_ack_ratio.take() {
            s.push_feat(opt::CONFIRM_R, FeatureNum::AckRatio, Some(v));
        }
        if let Some((mseq, q)) = &data {
            // Ack Ratio ≤ ceil(cwnd/2) (RFC 4341 §6.1.2).
            let want = sf.desired_ack_ratio(self.config.ack_ratio);
            if want != sf.ack_ratio_tx {
                sf.ack_ratio_tx = want;
                sf.ack_ratio_unconfirmed = true;
            }
            if sf.ack_ratio_unconfirmed {
                s.push_feat(
                    opt::CHANGE_L,
                    FeatureNum::AckRatio,
                    Some(sf.ack_ratio_tx as u64),
                );
            }
            if mp_on {
                s.mp.seq = Some(mseq & SEQ_MASK);
                let due = sf
                    .last_mp_rtt_sent
                    .is_none_or(|t| now - t >= self.config.mp_rtt_interval);
                if let (true, Some(srtt)) = (due, sf.rtt.srtt()) {
                    // RFC 9897 §3.2.7: cycle raw (with its age), min and
                    // smoothed RTT reports.
                    sf.last_mp_rtt_sent = Some(now);
                    let kind = sf.mp_rtt_next_kind;
                    sf.mp_rtt_next_kind = match kind {
                        0 => 1,
                        1 => 3,
                        _ => 0,
                    };
                    let ms = |d: Duration| d.as_millis().min(u32::MAX as u128) as u32;
                    let (rtt, age) = match kind {
                        0 => (
                            sf.rtt.latest().unwrap_or(srtt),
                            sf.last_rtt_sample_at.map_or(Duration::ZERO, |t| now - t),
                        ),
                        1 => (sf.rtt.min_rtt().unwrap_or(srtt), Duration::ZERO),
                        _ => (srtt, Duration::ZERO),
                    };
                    s.mp.rtt = Some(codec::MpRtt {
                        kind,
                        rtt_ms: ms(rtt),
                        age_ms: ms(age),
                    });
                }
            }
            s.payload = &q.data;
        }
        if mp_on {
            for c in sf.pend.confirms.drain(..) {
                if !s.mp.push_confirm(c) {
                    break;
                }
            }
            if prio_due {
                s.mp.prio = sf.pend.prio;
                sf.pend.prio_tries += 1;
                sf.pend.prio_due = false;
                if sf.pend.prio_tries >= self.config.mp_option_max_tries {
                    sf.pend.prio = None;
                    sf.timers.stop(Timer::PrioRetx);
                    self.stats.mp_option_unconfirmed += 1;
                } else {
                    sf.timers.arm(
                        Timer::PrioRetx,
                        now + self.config.mp_option_rto.max(sf.rtt.rto()),
                    );
                }
            }
            // ADDADDR/REMOVEADDR travel on pure Acks (their MP_HMAC would
            // clash with nothing else there).
            if let (Some(ai), Some(k), None) = (advert, keys, &data) {
                let rto = self.config.mp_option_rto.max(sf.rtt.rto());
                let a = &mut self.adverts[ai];
                a.tries += 1;
                a.retx_at = now + rto;
                a.due = false;
                if a.remove {
                    let r = MpRemoveAddr {
                        addr_id: a.id,
                        nonce: a.nonce,
                    };
                    s.mp.hmac = Some(removeaddr_hmac(&k.d_key_local(), &r));
                    s.mp.removeaddr = Some(r);
                } else {
                    let ad = MpAddAddr {
                        addr_id: a.id,
                        nonce: a.nonce,
                        ip: a.addr.ip(),
                        port: (a.addr.port() != 0).then_some(a.addr.port()),
                    };
                    s.mp.hmac = Some(addaddr_hmac(&k.d_key_local(), &ad));
                    s.mp.addaddr = Some(ad);
                }
            }
        }
        let sf = &mut self.paths[i];
        sf.on_ack_sent();
        let result = s.emit(buf, addrs);
        if let Some((_, q)) = data {
            let bytes = q.data.len() as u32;
            if result.is_some() {
                // Draft-cheng §3.4, per path: nothing waiting here or in the
                // connection queue, window not full, and no packet diverted
                // away from this path within the last round trip.
                let rtt = sf.rtt.srtt().unwrap_or(self.config.initial_rto);
                let app_limited = sf.queue.is_empty()
                    && self.queue.len() == 0
                    && sf.pipe + 1 < sf.cc.cwnd_pkts()
                    && sf.blocked_at.is_none_or(|t| now - t > rtt);
                sf.on_data_sent(now, seq, bytes, app_limited);
                self.stats.tx_data_pkts += 1;
            } else {
                self.stats.tx_buffer_too_small += 1;
            }
            self.queue.recycle(q.data);
        }
        if result.is_none() {
            self.stats.tx_buffer_too_small += 1;
        }
        result
    }

    pub(super) fn finish_emit(
        &mut self,
        mut s: Segment<'_>,
        addrs: (IpAddr, IpAddr),
        buf: &mut [u8],
    ) -> Option<usize> {
        let r = s.emit(buf, addrs);
        if r.is_none() {
            self.stats.tx_buffer_too_small += 1;
        }
        r
    }
}

impl Subflow {
    fn has_pending_reset(&self) -> bool {
        self.pend.reset.is_some()
    }
}

/// Exponential backoff of handshake/close retransmissions, each interval
/// capped at 4 s so a bounded number of tries ends in bounded time.
pub(super) fn retx_backoff(base: Duration, tries: u32) -> Duration {
    (base * (1u32 << tries.saturating_sub(1).min(10))).min(Duration::from_secs(4))
}
