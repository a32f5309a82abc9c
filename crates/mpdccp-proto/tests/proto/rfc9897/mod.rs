//! RFC 9897 conformance: the requirements matrix and the findings it names.

mod conn;
mod findings;
mod matrix;
