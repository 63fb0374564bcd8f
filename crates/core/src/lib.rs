//! The pure core of lockstep: what a machine is made of ([`topo`]), which PUs a job gets ([`place`]), CPU lists
//! ([`cpulist`]), durations ([`duration`]), and what each co-scheduling policy wants of each job in a slot
//! ([`cosched`]). Nothing here changes the system: the other crates act on these decisions.

pub mod cosched;
pub mod cpulist;
pub mod duration;
pub mod error;
pub mod names;
pub mod place;
pub mod topo;

#[cfg(any(test, feature = "testutils"))]
pub mod testutil;
