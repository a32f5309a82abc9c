//! The command line as an operator meets it: help, mistakes, pipes.

mod help;
mod mistakes;
mod pipe;
