//! pcap writer. Filled in below.
