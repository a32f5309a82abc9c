//! Hostile input: forged, flooded and mutated datagrams against live
//! sessions, with and without payload protection.

mod closed_subflow;
mod flood;
mod forgery;
mod props;
mod protected;
mod protected_mutations;
mod unprotected;
