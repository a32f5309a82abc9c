//! Fuzz every wire parse path with untrusted bytes (run with
//! `cargo +nightly fuzz run parse_packet` from the repository root).
//!
//! Beyond "no panic", whatever parses must re-emit, and the re-emitted
//! bytes must parse back to the same Repr (canonical form is stable).
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use mpdccp_proto::wire::option::parse_options;
use mpdccp_proto::wire::{udp_encap, DccpRepr, MpOption, Packet, PacketType, WireProfile};

fuzz_target!(|data: &[u8]| {
    let v4 = (
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    );
    let v6 = (
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    );
    let _ = DccpRepr::parse(data, Some(v4));
    let _ = DccpRepr::parse(data, Some(v6));
    if let Ok(p) = Packet::new_checked(data) {
        let _ = (
            p.seq(),
            p.ack(),
            p.service_code(),
            p.reset(),
            p.payload().len(),
        );
        for o in p.options().map_while(Result::ok) {
            let _ = o.to_option();
        }
        let _ = p.mp_seq();
        if let Some(av) = p.ack_vector() {
            assert!(av.iter(p.ack().unwrap_or(0)).count() <= 253 * 64);
        }
    }
    let _ = udp_encap::unframe(data, Some(v6));
    let mut ignored = 0;
    // Every wire profile: option 46 in RFC 9897's and the reference
    // kernels' layouts.
    for profile in WireProfile::ALL {
        let _ = MpOption::parse_in(data, profile);
        for ty in [PacketType::Request, PacketType::Data, PacketType::Ack] {
            let _ = parse_options(data, ty, &mut ignored, profile);
        }
        if let Ok((r, hl)) = DccpRepr::parse_in(data, None, profile) {
            let mut again = vec![0u8; r.buffer_len(data.len() - hl)];
            r.emit(&mut again, &data[hl..], None)
                .expect("parsed Repr must re-emit");
            let (r2, _) =
                DccpRepr::parse_in(&again, None, profile).expect("re-emitted bytes must parse");
            assert_eq!(r, r2);
        }
    }
});
