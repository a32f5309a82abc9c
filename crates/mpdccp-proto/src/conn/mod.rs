//! Connections: the MP-DCCP meta connection (keys, connection identifiers,
//! MP_SEQ, address IDs) and its DCCP subflows (state machine, sequence windows,
//! feature negotiation, CCID2 ack machinery).
