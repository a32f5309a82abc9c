//! The integration tests of `mpdccp-model`: one binary, a module per
//! subject.

mod end_to_end;
mod link;
