//! The pure core of lockstep: what a machine is made of ([`topo`]), which PUs a job gets ([`place`]), CPU lists
//! ([`cpulist`]), durations ([`duration`]), what each co-scheduling policy wants of each job in a slot
//! ([`cosched`]), which paths root may trust ([`trust`]), who a job and a node are ([`ident`]), and the records other crates keep of a job's cgroup
//! ([`cgroup_record`]), its origin ([`job`]) and its counts ([`sample`]). Nothing here changes the system (beyond creating a
//! private directory): the other crates act on these decisions.

pub mod cgroup_record;
pub mod cosched;
pub mod cpulist;
pub mod duration;
pub mod error;
pub mod ident;
pub mod job;
pub mod names;
pub mod place;
pub mod sample;
pub mod topo;
pub mod trust;

#[cfg(any(test, feature = "testutils"))]
pub mod testutil;
