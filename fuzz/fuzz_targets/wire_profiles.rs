//! Fuzz the reference-kernel wire profiles and the capture reader (run
//! with `cargo +nightly fuzz run wire_profiles` from the repository root).
//!
//! No panic; whatever a profile parses must re-emit, and the re-emitted
//! option must parse back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mpdccp_proto::wire::{capture, WireProfile};

fuzz_target!(|data: &[u8]| {
    for p in WireProfile::ALL {
        if let Ok(opt) = p.parse_mp(data) {
            if let Ok(bytes) = p.encode_mp(&opt) {
                assert_eq!(p.parse_mp(&bytes[2..]).as_ref(), Ok(&opt));
            }
            let _ = p.addr_hmac_message(&opt);
        }
    }
    if let Ok(pkts) = capture::dccp_packets(data) {
        assert!(pkts.iter().map(|c| c.dccp.len()).sum::<usize>() <= data.len());
    }
});
