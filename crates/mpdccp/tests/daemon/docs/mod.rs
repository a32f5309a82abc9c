//! What the documentation shows, run as written.

mod readme_example;
