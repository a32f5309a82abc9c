//! What several tunnel tests of this directory share.

use std::time::Duration;

use mpdccp_lab::probe;
use mpdccp_lab::topo::Topology;

/// Upstream probe stream for 3 s at 8 Mbit/s: every packet exactly once,
/// and both paths sent more than 500 data packets.
pub fn stream_exactly_once(t: &Topology, port: u16) -> serde_json::Value {
    let (s, _) = t
        .start_probe_stream(false, 8_000_000, 3.0, port)
        .expect("probe stream");
    let (log, arr) = s.finish(Duration::from_millis(300)).expect("probe stream");
    let tally = probe::tally(&arr, 1, log.sent.len() as u64);
    assert!(log.sent.len() > 2500, "sent {}", log.sent.len());
    assert_eq!(tally.duplicates, 0, "{tally:?}");
    assert_eq!(tally.lost, 0, "{tally:?}");
    assert_eq!(tally.delivered, log.sent.len() as u64);
    let cst = t.status(false).expect("client status");
    for p in cst["connections"][0]["paths"].as_array().expect("paths") {
        assert!(
            p["stats"]["tx_data_pkts"].as_u64().unwrap_or(0) > 500,
            "{p}"
        );
    }
    cst
}
