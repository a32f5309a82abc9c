//! `mpdccp sweep` on a cluster and under Slurm.

mod cluster;
mod slurm;
mod support;
