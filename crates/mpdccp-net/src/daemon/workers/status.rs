//! The sharded server's status document: the workers' answers summed.

use std::sync::mpsc;
use std::time::Duration;

use mpdccp_proto::Instant;
use serde_json::{json, Value};

use crate::daemon::shard::{Control, Shared};
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
/// summed, names kept from the first, connections concatenated, the
/// server-wide `tun_mtu` and `uptime_s`, and `per_worker`.
fn merge(docs: Vec<StatusDoc>, n: usize, mtu: u32, uptime_s: f64) -> StatusDoc {
    let answered = docs.len();
    let mut total = json!({});
    let mut conns = Vec::new();
    let mut per_worker = Vec::new();
    for d in docs {
        let w = d.head.get("worker").and_then(Value::as_u64).unwrap_or(0);
        let daemon = &d.head.get("daemon").cloned().unwrap_or(Value::Null);
        per_worker.push(json!({
            "worker": w,
            "connections": d.connections.len(),
            "handoffs": daemon["handoffs"],
            "handoffs_received": daemon["handoffs_received"],
            "handoff_dropped": daemon["handoff_dropped"],
            "udp_rx_datagrams": daemon["udp_rx_datagrams"],
            "tun_rx_pkts": daemon["tun_rx_pkts"],
        }));
        sum_into(&mut total, &Value::Object(d.head));
        conns.extend(d.connections);
    }
    if let Some(o) = total.as_object_mut() {
        o.remove("worker");
        o.remove("mailbox_capacity");
        o.insert("uptime_s".into(), json!(uptime_s));
        o.insert("tun_mtu".into(), json!(mtu));
        if let Some(t) = o.get_mut("tun").and_then(Value::as_object_mut) {
            t.insert("mtu".into(), json!(mtu));
        }
        o.insert("workers".into(), json!(n));
        o.insert("workers_answered".into(), json!(answered));
        o.insert("per_worker".into(), Value::Array(per_worker));
    }
    let mut doc = StatusDoc::new(total);
    doc.connections = conns;
    doc
}

/// Adds `b` into `a`: numbers summed, objects merged key by key, anything
/// else (names, modes) kept from the first document.
fn sum_into(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in y {
                match x.get_mut(k) {
                    Some(e) => sum_into(e, v),
                    None => {
                        x.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (a @ Value::Number(_), Value::Number(y)) => {
            let s = match (a.as_u64(), y.as_u64()) {
                (Some(p), Some(q)) => json!(p.saturating_add(q)),
                _ => json!(a.as_f64().unwrap_or(0.0) + y.as_f64().unwrap_or(0.0)),
            };
            *a = s;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two workers' answers (as `Server::status` gives them: handles
    /// already handle × N + worker) make one document.
    #[test]
    fn workers_answers_merge_into_one_document() {
        let worker = |w: u64, rx: u64, handles: &[u64]| {
            let mut d = StatusDoc::new(json!({
                "role": "server", "worker": w, "mailbox_capacity": 1024,
                "tun": {"name": "tun0", "mtu": 1400}, "tun_mtu": 1400, "uptime_s": 1.0,
                "daemon": {"udp_rx_datagrams": rx, "handoffs": w},
            }));
            for &h in handles {
                d.push_connection(&json!({"handle": h, "worker": w}));
            }
            d
        };
        let doc = merge(
            vec![worker(0, 10, &[0, 2]), worker(1, 5, &[3])],
            2,
            1380,
            7.5,
        );
        let v: Value = serde_json::from_str(&doc.to_text()).unwrap();
        assert_eq!(v["daemon"]["udp_rx_datagrams"], json!(15));
        assert_eq!(v["role"], json!("server"));
        assert_eq!(v["tun_mtu"], json!(1380));
        assert_eq!(v["tun"]["mtu"], json!(1380));
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

    #[test]
    fn statuses_sum_counters_and_keep_names() {
        let mut a = json!({});
        sum_into(
            &mut a,
            &json!({"role": "server", "daemon": {"handoffs": 2, "x": 1.5}}),
        );
        sum_into(
            &mut a,
            &json!({"role": "server", "daemon": {"handoffs": 3, "x": 1.0}, "y": 1}),
        );
        assert_eq!(
            a,
            json!({"role": "server", "daemon": {"handoffs": 5, "x": 2.5}, "y": 1})
        );
    }
}
