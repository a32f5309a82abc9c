//! Prometheus conventions for the families [`super::metrics`] derives from
//! the status document: base units (a JSON key in ms, µs, s, kB or bit/s
//! becomes a family in seconds, bytes or bytes per second, value scaled)
//! and HELP texts that say what a number is.
//!
//! The status document keeps its own units (`srtt_ms` reads well in `mpdccp
//! status`); only the exposition converts. Names in packets (`cwnd_pkts`,
//! `lost_pkts_total`) stay: packets are the unit, and docs/OPERATIONS.md and
//! the crate README promise those names.

/// A JSON key's unit suffix, its base-unit replacement and the factor.
const UNITS: &[(&str, &str, f64)] = &[
    ("_ms", "_seconds", 1e-3),
    ("_us", "_seconds", 1e-6),
    ("_s", "_seconds", 1.0),
    ("_bps", "_bytes_per_second", 0.125),
    ("_kb", "_bytes", 1024.0),
];

/// Unit suffixes that are not base units: no family may end in one (the
/// test of `metrics`).
#[cfg(test)]
pub(super) const NON_BASE_SUFFIXES: &[&str] = &["_ms", "_us", "_s", "_bps", "_kb"];

/// The family name in base units for `name`, and the factor its values
/// are multiplied by.
pub(super) fn base_unit(name: &str) -> (String, f64) {
    for (from, to, factor) in UNITS {
        if let Some(stem) = name.strip_suffix(from) {
            return (format!("{stem}{to}"), *factor);
        }
    }
    (name.to_owned(), 1.0)
}

/// Written HELP texts, by family name (base units, no `mpdccp_` prefix, no
/// `_total`), without the final period the encoder adds.
const HELP: &[(&str, &str)] = &[
    ("uptime_seconds", "Time since the daemon started, seconds"),
    ("tun_mtu", "MTU of the TUN interface, bytes"),
    ("conn_established", "1 while the connection is established, else 0"),
    ("conn_closed", "1 once the connection has closed, else 0"),
    ("conn_send_queue_pkts", "Packets waiting in the connection's send queue in front of the scheduler"),
    ("conn_plpmtu", "Largest tunnelled packet the connection's confirmed path MTUs allow (RFC 8899), bytes"),
    ("connection_info", "Always 1; the labels are the connection's settings in force: cc, scheduler, reorder, aqm, wire_profile, auth and switches"),
    ("path_info", "Always 1; the label transport says how the path's packets travel (udp, dccp or udccp)"),
    ("path_active", "1 while the path is in state Active (carries data), else 0"),
    ("path_subflows", "Subflows of this path the core still holds (each rejoin adds one)"),
    ("path_priority", "MP_PRIO priority in force on the path (RFC 9897; 0: not used)"),
    ("path_cwnd_pkts", "Congestion window of the path's controller, packets (an idle window decays, RFC 7661)"),
    ("path_in_flight_pkts", "Data packets sent on the path, neither acknowledged nor declared lost"),
    ("path_queued_pkts", "Packets handed to the path by the scheduler that wait for its window or pacer"),
    ("path_srtt_seconds", "Smoothed round-trip time of the path (RFC 6298 SRTT), seconds"),
    ("path_min_rtt_seconds", "Smallest round-trip time of the path over its recent window, seconds"),
    ("path_rttvar_seconds", "Round-trip time variation of the path (RFC 6298 RTTVAR), seconds"),
    ("path_pacing_rate_bytes_per_second", "Pacing rate of the path's controller, bytes per second (absent: it does not pace)"),
    ("path_delivery_rate_bytes_per_second", "Latest delivery-rate estimate of the path, bytes per second"),
    ("path_loss_rate", "Fraction of data packets lost on the path, smoothed per acknowledgement over about 64 packets (see path_loss_window_ratio)"),
    ("path_loss_window_ratio", "Fraction of the data packets sent on the path over the loss window (about 10 s) that acknowledgements proved lost"),
    ("path_loss_window_sent_pkts", "Data packets sent on the path over the loss window"),
    ("path_loss_window_lost_pkts", "Data packets of the loss window that acknowledgements proved lost"),
    ("path_loss_window_window_seconds", "Length of the path's loss window, seconds"),
    ("path_pipe_ack_pkts", "RFC 7661 pipeACK: packets the path delivered per round trip over its last sampling period"),
    ("path_plpmtu", "Path MTU confirmed on the path by DPLPMTUD (RFC 8899), bytes of DCCP packet"),
    ("path_tx_pkts", "Datagrams sent on the path (data, acknowledgements and control)"),
    ("path_tx_bytes", "Bytes sent on the path"),
    ("path_tx_data_pkts", "Data packets sent on the path"),
    ("path_rx_pkts", "Datagrams received on the path"),
    ("path_rx_bytes", "Bytes received on the path"),
    ("path_rx_data_pkts", "Data packets received on the path"),
    ("path_lost_pkts", "Data packets declared lost on the path: by acknowledgements (RFC 4341 §5) or given up at an RTO"),
    ("path_rto_lost_pkts", "Data packets in flight when the path's retransmission timer fired (their fate is unknown)"),
    ("path_rtos", "Retransmission timeouts of the path"),
    ("path_acks_sent", "Acknowledgements sent on the path"),
    ("path_rtt_samples", "Round-trip time samples taken on the path"),
    ("conn_delivered_pkts", "Packets the connection delivered to the application in order"),
    ("conn_delivered_bytes", "Bytes the connection delivered to the application"),
    ("conn_rx_bytes", "Bytes of datagrams the connection received"),
    ("conn_tx_bytes", "Bytes of datagrams the connection sent"),
    ("reorder_held_pkts", "Packets the receiver's reordering holds back right now"),
    ("reorder_held_bytes", "Bytes the receiver's reordering holds back right now"),
    ("ops_snapshots", "Status documents the packet loop built for status requests and scrapes"),
];

/// Words of a key spelled out for a generated HELP.
const WORDS: &[(&str, &str)] = &[
    ("rx", "received"),
    ("tx", "sent"),
    ("pkts", "packets"),
    ("syscalls", "system calls"),
    ("addaddr", "MP_ADDADDR"),
    ("removeaddr", "MP_REMOVEADDR"),
    ("hmac", "HMAC"),
    ("mp", "MP"),
    ("seq", "sequence"),
    ("udp", "UDP"),
    ("tun", "TUN"),
    ("dccp", "DCCP"),
    ("gro", "GRO"),
    ("gso", "GSO"),
    ("tso", "TSO"),
    ("ecn", "ECN"),
    ("rto", "RTO"),
    ("rtos", "RTOs"),
    ("plpmtu", "PLPMTU"),
    ("ack", "acknowledgement"),
    ("acks", "acknowledgements"),
];

/// The HELP of family `name` (base units, no prefix): a written text, or
/// for the many counters of the core's stats structs a sentence built from
/// `what` (the section, naming the struct that documents the field) and
/// the key's words spelled out.
pub(super) fn help_for(name: &str, what: &str, key: &str, counter: bool) -> String {
    if let Some((_, h)) = HELP.iter().find(|(n, _)| *n == name) {
        return (*h).to_owned();
    }
    let words: Vec<&str> = key
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| WORDS.iter().find(|(k, _)| *k == w).map_or(w, |(_, v)| *v))
        .collect();
    let noun = if counter { "count of" } else { "current" };
    // The encoder ends the line with a period.
    let mut s = format!("{what}, field {key}: {noun} {}", words.join(" "));
    if let Some(c) = s.get(0..1) {
        let up = c.to_uppercase();
        s.replace_range(0..1, &up);
    }
    s
}
