//! Fuzz the reference-kernel wire profiles and the capture reader (run
//! with `cargo +nightly fuzz run wire_profiles` from the repository root).
//!
//! No panic; whatever a profile parses must re-emit, and the re-emitted
//! option must parse back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mpdccp_proto::wire::{capture, MpOption, WireProfile};

fuzz_target!(|data: &[u8]| {
    for p in WireProfile::ALL {
        if let Ok(opt) = MpOption::parse_in(data, p) {
            if let Ok(bytes) = opt.encode_in(p) {
                assert_eq!(MpOption::parse_in(&bytes[2..], p).as_ref(), Ok(&opt));
            }
            let _ = p.addr_hmac_message(&opt);
        }
    }
    if let Ok(pkts) = capture::dccp_packets(data) {
        assert!(pkts.iter().map(|c| c.dccp.len()).sum::<usize>() <= data.len());
    }
});
