//! DCCP-UDP encapsulation (RFC 6773). Filled in below.
