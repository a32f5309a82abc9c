//! RFC 4340's option rules on the connection's one parse path: options
//! ignored per packet type (Table 3), Mandatory (§5.8.2) and invalid
//! options (§5.8). Every rule broken is counted in `ConnStats`, and a packet
//! that passes the sequence checks is answered with the Reset the RFC
//! names; one that does not is only counted (a Sync answers it).

use crate::common;

use std::time::Duration;

use common::{addrs, emit, inject, last_genuine, open_two_paths};
use mpdccp_proto::conn::codec::{PacketType, ResetCode, Segment};
use mpdccp_proto::harness::{inspect, Harness, HarnessConfig, LinkSpec, Side};
use mpdccp_proto::wire::option::kind;
use mpdccp_proto::wire::FeatureNum;
use mpdccp_proto::PathId;

const PATH: usize = 0;

fn session() -> Harness {
    let mut h = Harness::new(HarnessConfig {
        paths: vec![LinkSpec::default(), LinkSpec::default()],
        seed: 7,
        ..Default::default()
    });
    h.record = true;
    open_two_paths(&mut h);
    assert!(h.client.is_established() && h.server.is_established());
    h
}

/// A pure Ack from the client that the server finds in-window (`valid`)
/// or far outside its sequence window, with `opts` appended to its
/// options (zero-padded) and a correct checksum.
fn client_ack(h: &Harness, opts: &[u8], valid: bool) -> Vec<u8> {
    let (cseq, _) = last_genuine(h, Side::Client, PATH);
    let (sseq, _) = last_genuine(h, Side::Server, PATH);
    let seq = if valid { cseq + 1 } else { cseq + (1 << 30) };
    let mut s = Segment::new(PacketType::Ack, seq);
    s.ack = Some(sseq);
    let mut b = emit(&s, PATH, Side::Client);
    let hl = b[4] as usize * 4;
    let mut area = opts.to_vec();
    area.resize(opts.len().div_ceil(4) * 4, 0);
    b.splice(hl..hl, area.iter().copied());
    b[4] += (area.len() / 4) as u8;
    let (src, dst) = addrs(PATH, Side::Client);
    inspect::fix_checksum(&mut b, src.ip(), dst.ip());
    b
}

/// Reset codes the server sent on `PATH` from wire record `from` on.
fn server_resets(h: &Harness, from: usize) -> Vec<ResetCode> {
    h.wire[from..]
        .iter()
        .filter(|w| w.from == Side::Server && w.path == PathId(PATH as u32))
        .filter_map(|w| Segment::parse(&w.bytes, None).ok())
        .filter(|s| s.ptype == PacketType::Reset)
        .map(|s| s.reset_code)
        .collect()
}

/// Delivers `bytes` to the server, lets the answers go out, and returns
/// (new bad-option count, Resets the server sent).
fn deliver(h: &mut Harness, bytes: &[u8]) -> (u64, Vec<ResetCode>) {
    let before = h.server.stats().rx.rx_bad_options;
    let mark = h.wire.len();
    inject(h, Side::Server, PATH, bytes);
    h.drive_for(Duration::from_millis(5));
    (
        h.server.stats().rx.rx_bad_options - before,
        server_resets(h, mark),
    )
}

#[test]
fn mandatory_before_an_option_not_understood_is_a_mandatory_error() {
    let mut h = session();
    // Mandatory, then reserved option 50 (RFC 4340 §5.8.2).
    let pkt = client_ack(&h, &[kind::MANDATORY, 50, 2], true);
    let (bad, resets) = deliver(&mut h, &pkt);
    assert_eq!(bad, 1);
    assert_eq!(resets, vec![ResetCode::MandatoryError]);
    assert_eq!(
        h.server.path_stats(PathId(PATH as u32)).map(|_| ()),
        Some(()),
        "the subflow is closed, not forgotten at once"
    );
    assert!(h
        .server
        .paths()
        .iter()
        .any(|p| p.id == PathId(PATH as u32) && !p.is_usable()));
}

#[test]
fn mandatory_as_the_last_option_is_an_option_error() {
    let mut h = session();
    let pkt = client_ack(&h, &[kind::MANDATORY], true);
    let (bad, resets) = deliver(&mut h, &pkt);
    assert_eq!(bad, 1);
    assert_eq!(resets, vec![ResetCode::OptionError]);
}

#[test]
fn mandatory_before_an_understood_option_is_accepted() {
    let mut h = session();
    // Mandatory Slow Receiver: understood (§5.8.2 asks nothing more).
    let pkt = client_ack(&h, &[kind::MANDATORY, kind::SLOW_RECEIVER], true);
    let (bad, resets) = deliver(&mut h, &pkt);
    assert_eq!((bad, resets), (0, vec![]));
    assert_eq!(common::open_paths(&h, Side::Server), 2);
}

#[test]
fn an_option_with_an_invalid_length_is_an_option_error() {
    let mut h = session();
    // Timestamp carries 4 bytes; this one 1 (RFC 4340 §13.1, §5.8).
    let pkt = client_ack(&h, &[kind::TIMESTAMP, 3, 0], true);
    let (bad, resets) = deliver(&mut h, &pkt);
    assert_eq!(bad, 1);
    assert_eq!(resets, vec![ResetCode::OptionError]);
}

#[test]
fn a_malformed_multipath_option_is_an_option_error() {
    let mut h = session();
    // MP_SEQ (subtype 1) with a 2-byte body instead of 6.
    let pkt = client_ack(&h, &[kind::MULTIPATH, 5, 1, 0, 0], true);
    let (bad, resets) = deliver(&mut h, &pkt);
    assert_eq!(bad, 1);
    assert_eq!(resets, vec![ResetCode::OptionError]);
}

#[test]
fn rule_breaks_outside_the_sequence_window_are_counted_not_reset() {
    let mut h = session();
    let pkt = client_ack(&h, &[kind::MANDATORY, 50, 2], false);
    let invalid = h.server.stats().rx.rx_seq_invalid;
    let (bad, resets) = deliver(&mut h, &pkt);
    assert_eq!(bad, 1);
    assert!(resets.is_empty(), "a forged packet cannot reset the path");
    assert_eq!(h.server.stats().rx.rx_seq_invalid, invalid + 1);
    assert_eq!(common::open_paths(&h, Side::Server), 2);
}

#[test]
fn options_table_3_ignores_on_data_are_ignored_and_counted() {
    let mut h = session();
    let (cseq, _) = last_genuine(&h, Side::Client, PATH);
    // A DCCP-Data packet (no acknowledgement) with Change L(Ack Ratio):
    // RFC 4340 Table 3 says feature negotiation on Data is ignored.
    let mut s = Segment::new(PacketType::Data, cseq + 1);
    s.push_feat(kind::CHANGE_L, FeatureNum::AckRatio, Some(7));
    let pkt = emit(&s, PATH, Side::Client);
    let ignored = h.server.stats().rx.rx_options_ignored;
    let mark = h.wire.len();
    let (bad, resets) = deliver(&mut h, &pkt);
    assert_eq!((bad, resets), (0, vec![]));
    assert_eq!(h.server.stats().rx.rx_options_ignored, ignored + 1);
    // Not acted on: the server confirms no Ack Ratio of 7.
    let confirmed = h.wire[mark..]
        .iter()
        .filter(|w| w.from == Side::Server)
        .filter_map(|w| Segment::parse(&w.bytes, None).ok())
        .any(|s| {
            s.feat(kind::CONFIRM_R, FeatureNum::AckRatio)
                .is_some_and(|f| f.value == 7)
        });
    assert!(!confirmed);
}

#[test]
fn a_request_breaking_the_rules_is_refused_with_its_reset_and_leaves_no_state() {
    let mut h = session();
    // A Request on a path the server does not know, Mandatory before a
    // reserved option: refused for that (not for being a second initial
    // handshake, which would be Connection Refused).
    let mut s = Segment::new(PacketType::Request, 1000);
    s.service_code = mpdccp_proto::conn::SERVICE_CODE;
    let mut b = emit(&s, 1, Side::Client);
    let hl = b[4] as usize * 4;
    b.splice(hl..hl, [kind::MANDATORY, 60, 2, 0]);
    b[4] += 1;
    let (src, dst) = addrs(1, Side::Client);
    inspect::fix_checksum(&mut b, src.ip(), dst.ip());
    let paths_before = h.server.paths().len();
    let before = h.server.stats().rx.rx_bad_options;
    let now = h.now;
    h.server.handle_datagram_from(now, PathId(9), dst, src, &b);
    let mut out = vec![0u8; 2048];
    let mut codes = vec![];
    while let Some(t) = h.server.poll_transmit(now, &mut out) {
        let s = Segment::parse(&out[..t.size], None).expect("our packet parses");
        if t.path == PathId(9) && s.ptype == PacketType::Reset {
            codes.push(s.reset_code);
        }
    }
    assert_eq!(h.server.stats().rx.rx_bad_options, before + 1);
    assert_eq!(codes, vec![ResetCode::MandatoryError]);
    h.server.handle_timeout(now);
    assert_eq!(h.server.paths().len(), paths_before, "no state is left");
}
