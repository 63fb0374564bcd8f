//! Jobs started by `lockstep run`: each in a cgroup of its own, supervised until it ends ([`launch`]), and the
//! bookkeeping that finds jobs whose supervisor died and cleans up after them ([`reconcile`]); and the one way
//! lockstep starts a user's command, for `run` and `stat` alike ([`spawn`]).

pub mod launch;
pub mod reconcile;
pub mod spawn;
