//! Jobs started by `lockstep run`: each in a cgroup of its own, supervised until it ends ([`launch`]), and the
//! bookkeeping that finds jobs whose supervisor died and cleans up after them ([`reconcile`]).

pub mod launch;
pub mod reconcile;
