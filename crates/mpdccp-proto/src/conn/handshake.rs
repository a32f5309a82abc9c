//! The MP-DCCP handshakes (RFC 9897 §3.3, §3.2.2): MP_KEY on the first
//! subflow, MP_JOIN + MP_HMAC on the others, the server's acceptance of
//! Requests and the checks of the third packet.

use super::*;

impl Connection {
    pub(super) fn accept_request(&mut self, now: Instant, path: PathId, seg: &Segment<'_>) {
        if matches!(self.state, ConnState::Closing | ConnState::Closed) {
            self.stats.rx_request_refused += 1;
            return;
        }
        let cfg = PathConfig::default();
        let mut sf = self.new_subflow(path, cfg);
        sf.last_rx_at = now;
        sf.set_isr(seg.seq);
        sf.remote_addr_id = 0;
        let mut reset = None;
        if let Some(j) = seg.mp.join {
            if self.mp != Some(true) {
                self.stats.join_not_multipath += 1;
                reset = Some(ResetCode::ConnectionRefused);
            } else if j.token != self.local_ci {
                // RFC 9897 §3.2.2: unknown path token → Reset.
                self.stats.join_unknown_token += 1;
                reset = Some(ResetCode::NoConnection);
            } else if self.live_paths() >= self.config.max_paths {
                self.stats.join_too_busy += 1;
                reset = Some(ResetCode::TooBusy);
            } else {
                sf.join = true;
                sf.remote_nonce = j.nonce;
                sf.remote_addr_id = j.addr_id;
                sf.local_nonce = self.rng.gen::<u32>().max(1);
                sf.local_addr_id = self.alloc_addr_id();
            }
        } else if self.paths.iter().any(|p| !p.join && !p.is_gone()) || self.mp.is_some() {
            // A second initial handshake on an existing connection.
            self.stats.rx_unexpected += 1;
            reset = Some(ResetCode::ConnectionRefused);
        } else {
            let wants_mp = seg
                .feat(opt::CHANGE_L, FeatureNum::MultipathCapable)
                .is_some_and(|f| f.has_value)
                && seg.mp.key.is_some_and(|k| k.plain);
            if self.config.multipath && wants_mp {
                // Invariant: wants_mp checked key is Some.
                let k = seg.mp.key.expect("checked above");
                self.remote_key = Some(k.key);
                self.remote_ci = Some(k.ci);
                self.mp = Some(true);
            } else {
                if self.config.multipath {
                    self.stats.fallbacks += 1;
                }
                self.mp = Some(false);
            }
        }
        if let Some(code) = reset {
            sf.state = SubState::Closed;
            sf.pend.reset = Some(code);
            self.stats.resets_sent += 0;
        } else {
            sf.state = SubState::Respond;
            sf.pend.response = true;
            sf.timers
                .arm(Timer::Retx, now + self.config.respond_timeout);
            // RFC 4340 §6: features the client asked us to confirm.
            if let Some(f) = seg.feat(opt::CHANGE_L, FeatureNum::SequenceWindow) {
                sf.seq_window = sf.seq_window.max(f.value.clamp(32, 1 << 46));
            }
        }
        self.insert_path(sf);
    }

    pub(super) fn handle_in_request(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        let sf = &self.paths[i];
        let ack_valid = seg.ack.is_some_and(|a| {
            let a = sf.unwrap_ack(a);
            a >= sf.iss && a <= sf.gss
        });
        match seg.ptype {
            PacketType::Reset if ack_valid => {
                self.stats.resets_received += 1;
                let first = !self.paths[i].join;
                let id = self.paths[i].id;
                self.fail_path(i, None);
                if first {
                    self.close_reason = Some(format!(
                        "connection refused (reset code {:?})",
                        seg.reset_code
                    ));
                }
                let _ = id;
            }
            PacketType::Response if ack_valid => self.handle_response(now, i, seg),
            _ => self.stats.rx_unexpected += 1,
        }
    }

    pub(super) fn handle_response(&mut self, now: Instant, i: usize, seg: &Segment<'_>) {
        {
            let sf = &mut self.paths[i];
            sf.set_isr(seg.seq);
            if let Some(a) = seg.ack {
                sf.gar = sf.unwrap_ack(a);
                sf.on_handshake_ack(now, sf.gar);
            }
        }
        let join = self.paths[i].join;
        if !join {
            let confirmed = seg
                .feat(opt::CONFIRM_R, FeatureNum::MultipathCapable)
                .is_some_and(|f| f.has_value);
            match seg.mp.key {
                Some(k) if self.config.multipath && confirmed && k.plain => {
                    self.remote_key = Some(k.key);
                    self.remote_ci = Some(k.ci);
                    self.mp = Some(true);
                }
                _ => {
                    if self.config.multipath {
                        self.stats.fallbacks += 1;
                    }
                    self.mp = Some(false);
                }
            }
        } else {
            // RFC 9897 §3.2.2: verify HMAC(d-keyB, RB‖RA) from the server.
            let ok = match (seg.mp.join, seg.mp.hmac, self.d_keys()) {
                (Some(j), Some(h), Some(k)) => {
                    let ra = self.paths[i].local_nonce;
                    keys::verify_join_hmac(&k.d_key_remote(), j.nonce, ra, &h).then_some(j)
                }
                _ => None,
            };
            match ok {
                Some(j) => {
                    let sf = &mut self.paths[i];
                    sf.remote_nonce = j.nonce;
                    sf.remote_addr_id = j.addr_id;
                }
                None => {
                    self.stats.join_bad_hmac += 1;
                    self.fail_path(i, Some(ResetCode::OptionError));
                    return;
                }
            }
        }
        let sf = &mut self.paths[i];
        sf.rx.record(sf.gsr);
        sf.state = SubState::PartOpen;
        sf.pend.handshake_ack = true;
        sf.retx_tries = 0;
        sf.retx_interval = self.config.handshake_rto;
        sf.timers.arm(Timer::Retx, now);
        // The Response-to-Request time is an RTT sample (RFC 4340 §8.1).
        let _ = now;
    }

    /// Server side of the third handshake packet: MP_KEY echo (first
    /// subflow) or MP_HMAC = HMAC(d-keyA, RA‖RB) (join).
    pub(super) fn verify_third_packet(&mut self, i: usize, seg: &Segment<'_>) -> bool {
        if self.mp != Some(true) {
            return true;
        }
        let sf = &self.paths[i];
        if sf.join {
            let ok = match (seg.mp.hmac, self.d_keys()) {
                (Some(h), Some(k)) => {
                    keys::verify_join_hmac(&k.d_key_remote(), sf.remote_nonce, sf.local_nonce, &h)
                }
                _ => false,
            };
            if !ok {
                self.stats.join_bad_hmac += 1;
                let sf = &mut self.paths[i];
                sf.state = SubState::Closed;
                sf.pend = Default::default();
                sf.pend.reset = Some(ResetCode::OptionError);
                return false;
            }
        } else if let Some(k) = seg.mp.key {
            if Some(k.key) != self.remote_key || k.peer_key.is_some_and(|p| p != self.local_key) {
                self.stats.bad_key_echo += 1;
                let sf = &mut self.paths[i];
                sf.state = SubState::Closed;
                sf.pend = Default::default();
                sf.pend.reset = Some(ResetCode::OptionError);
                self.close_reason = Some("MP_KEY mismatch".into());
                return false;
            }
        }
        true
    }

    pub(super) fn mark_open(&mut self, i: usize) {
        let sf = &mut self.paths[i];
        sf.state = SubState::Open;
        sf.timers.stop(Timer::Retx);
        sf.retx_tries = 0;
        sf.pend.handshake_ack = false;
        if !sf.announced {
            sf.announced = true;
            let id = sf.id;
            if !self.connected_event_sent {
                self.connected_event_sent = true;
                if self.state == ConnState::Handshaking {
                    self.state = ConnState::Established;
                }
                self.events.push_back(Event::Connected);
            }
            self.events.push_back(Event::PathEstablished(id));
        }
    }

    pub(super) fn d_keys(&self) -> Option<ConnKeys> {
        Some(ConnKeys {
            local: self.local_key,
            remote: self.remote_key?,
        })
    }
}
