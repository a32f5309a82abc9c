//! The sharded server's status document: the workers' answers summed.

use std::sync::mpsc;
use std::time::Duration;

use mpdccp_proto::Instant;

use crate::daemon::shard::{Control, Shared};
use crate::daemon::status::{StatusHead, WorkerStatus};
use crate::daemon::status_doc::StatusDoc;

/// The server's status: the workers' documents summed (counters), their
/// connections listed (each worker numbers its handles handle × N + worker,
/// unique), and one entry per worker under `per_worker`.
pub(super) fn status(shared: &Shared, started: Instant) -> StatusDoc {
    let n = shared.mail.len();
    let mut docs = Vec::with_capacity(n);
    for m in &shared.mail {
        let (tx, rx) = mpsc::sync_channel(1);
        if m.control.send(Control::Status(tx)).is_ok() {
            m.wake.ring();
            docs.push(rx);
        }
    }
    let docs: Vec<StatusDoc> = docs
        .into_iter()
        .filter_map(|rx| rx.recv_timeout(Duration::from_secs(2)).ok())
        .collect();
    let mtu = shared.mtu.lock().map_or(0, |m| m.1);
    let uptime_s = (crate::clock::now() - started).as_secs_f64();
    merge(docs, n, mtu, uptime_s)
}

/// The workers' answers `docs` (of `n` workers) as one document: counters
/// summed, names kept from the first ([`StatusHead::add`]), connections
/// concatenated, the server-wide `tun_mtu` and `uptime_s`, and
/// `per_worker`.
fn merge(docs: Vec<StatusDoc>, n: usize, mtu: u32, uptime_s: f64) -> StatusDoc {
    let answered = docs.len();
    let mut total: Option<StatusHead> = None;
    let mut conns = Vec::new();
    let mut per_worker = Vec::new();
    for d in docs {
        let w = d.head.worker.unwrap_or(0);
        per_worker.push(WorkerStatus::of(w, &d.head, d.connections.len()));
        match &mut total {
            Some(t) => t.add(&d.head),
            None => total = Some(d.head),
        }
        conns.extend(d.connections);
    }
    let mut head = total.unwrap_or_default();
    head.worker = None;
    head.mailbox_capacity = None;
    head.uptime_s = uptime_s;
    head.tun_mtu = mtu;
    head.tun.mtu = mtu;
    head.workers = Some(n as u64);
    head.workers_answered = Some(answered as u64);
    head.per_worker = Some(per_worker);
    let mut doc = StatusDoc::new(head);
    doc.connections = conns;
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::status::{AuthStatus, Counters};
    use serde_json::{json, Value};

    /// Worker `w`'s answer (as `Server::status` gives it: handles already
    /// handle × N + worker).
    fn worker(w: u64, rx: u64, handles: &[u64]) -> StatusDoc {
        let mut head = StatusHead {
            role: "server".into(),
            worker: Some(w),
            mailbox_capacity: Some(1024),
            tun_mtu: 1400,
            uptime_s: 1.0,
            daemon: Counters::from_pairs([("udp_rx_datagrams", rx), ("handoffs", w)]),
            endpoint: Some(Counters::from_pairs([("accepted", 1)])),
            learned_addresses: Some(2),
            auth: Some(AuthStatus::Open),
            ..StatusHead::default()
        };
        head.tun.name = "tun0".into();
        head.tun.mtu = 1400;
        let mut d = StatusDoc::new(head);
        for &h in handles {
            d.push_connection(&json!({"handle": h, "worker": w}));
        }
        d
    }

    /// Two workers' answers make one document.
    #[test]
    fn workers_answers_merge_into_one_document() {
        let doc = merge(
            vec![worker(0, 10, &[0, 2]), worker(1, 5, &[3])],
            2,
            1380,
            7.5,
        );
        let v: Value = serde_json::from_str(&doc.to_text()).unwrap();
        assert_eq!(v["daemon"]["udp_rx_datagrams"], json!(15));
        assert_eq!(v["endpoint"]["accepted"], json!(2));
        assert_eq!(v["learned_addresses"], json!(4));
        assert_eq!(v["auth"], json!({"mode": "open"}));
        assert_eq!(v["role"], json!("server"));
        assert_eq!(v["tun"], json!({"name": "tun0", "mtu": 1380}));
        assert_eq!(v["tun_mtu"], json!(1380));
        assert_eq!(v["uptime_s"], json!(7.5));
        assert_eq!(
            (v["workers"].clone(), v["workers_answered"].clone()),
            (json!(2), json!(2))
        );
        assert!(v.get("worker").is_none() && v.get("mailbox_capacity").is_none());
        let handles: Vec<u64> = v["connections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["handle"].as_u64().unwrap())
            .collect();
        assert_eq!(handles, [0, 2, 3]);
        let counts: Vec<(u64, u64)> = v["per_worker"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["connections"].as_u64().unwrap(),
                    p["udp_rx_datagrams"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(counts, [(2, 10), (1, 5)]);
    }

    /// The authenticated modes' counters add up too; the mode and the
    /// number of configured peers (each worker has them all) are kept.
    #[test]
    fn authenticated_counters_sum_and_the_mode_is_kept() {
        let auth = |n: u64| AuthStatus::Authenticated {
            peers: 3,
            routes: Some(Counters::from_pairs([("superseded", n)])),
            gate: Counters::from_pairs([("confirmed", n)]),
            handshake: Counters::from_pairs([("accepted", n)]),
        };
        let (mut a, mut b) = (worker(0, 1, &[]), worker(1, 1, &[]));
        a.head.auth = Some(auth(2));
        b.head.auth = Some(auth(5));
        let v: Value = serde_json::from_str(&merge(vec![a, b], 2, 1380, 1.0).to_text()).unwrap();
        assert_eq!(
            v["auth"],
            json!({"mode": "authenticated", "peers": 3, "routes": {"superseded": 7},
                   "gate": {"confirmed": 7}, "handshake": {"accepted": 7}})
        );
    }
}
