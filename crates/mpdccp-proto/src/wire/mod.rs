//! Wire format: DCCP generic header and options (RFC 4340), the Multipath
//! option 46 and its sub-options (RFC 9897), DCCP-in-UDP framing (RFC 6773).
