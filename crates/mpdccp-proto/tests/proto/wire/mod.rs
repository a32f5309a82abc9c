//! The wire format (`src/wire/`): test vectors, reference captures, pcap
//! output, U-DCCP and round-trip properties.

mod pcap;
mod props;
mod reference;
mod rfc9897;
mod udccp;
mod vectors;
