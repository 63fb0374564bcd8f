//! The threads that feed the daemon: each does work that must not hold up a slot (reading Slurm's cgroups and
//! asking slurmctld, polling `dcs`'s probe and scanning the jobs' sockets) and sends the daemon what it found as a
//! [`Command`](crate::command::Command). The control socket's threads (`server`) and the signal waiter (`setup`)
//! send it commands too.

pub mod dcs;
pub mod slurm;
