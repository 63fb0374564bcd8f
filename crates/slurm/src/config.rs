//! What an agent needs of slurmctld's configuration: whether Slurm time-slices jobs itself (`PreemptMode`), who
//! may tell it places (`SlurmUser`), and where munged listens (`AuthInfo`).

use std::path::PathBuf;

use crate::client::scontrol;
use crate::error::{Error, Result};
use crate::push::{default_socket, socket_in};

/// What an agent needs of slurmctld's configuration (`scontrol show config`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `PreemptMode`, as slurmctld says it (`OFF`, `GANG,SUSPEND`, …).
    pub preempt_mode: String,
    /// `SlurmUser`'s UID: the controller's hooks run as it, and its munge credentials are theirs.
    pub slurm_user: u32,
    /// munged's socket (`AuthInfo=socket=…`), else munge's default.
    pub munge_socket: PathBuf,
}

impl Config {
    /// slurmctld's configuration, as `scontrol show config` says it now.
    pub fn ask() -> Result<Self> {
        Self::parse(&scontrol(&["show", "config"])?)
    }

    /// The configuration in `scontrol show config`'s text (`Key = Value` lines).
    pub fn parse(text: &str) -> Result<Self> {
        let value = |key: &str| {
            text.lines().find_map(|l| l.split_once('=').filter(|(k, _)| k.trim() == key).map(|(_, v)| v.trim()))
        };
        let missing = |key: &str| Error::Unreadable(format!("scontrol show config names no {key}"));
        let preempt_mode = value("PreemptMode").ok_or_else(|| missing("PreemptMode"))?.to_string();
        // `slurm(64030)`: the UID in parentheses.
        let user = value("SlurmUser").ok_or_else(|| missing("SlurmUser"))?;
        let slurm_user = user
            .rsplit_once('(')
            .and_then(|(_, uid)| uid.strip_suffix(')')?.parse().ok())
            .ok_or_else(|| Error::Unreadable(format!("scontrol show config: SlurmUser {user:?} names no UID")))?;
        let munge_socket = value("AuthInfo").and_then(socket_in).unwrap_or_else(default_socket);
        Ok(Self { preempt_mode, slurm_user, munge_socket })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_names_preemption_slurm_user_and_munge_s_socket() {
        let config = "PreemptMode             = GANG,SUSPEND\nSlurmUser               = slurm(64030)\n\
                      AuthInfo                = socket=/run/m.sock\n";
        let c = Config::parse(config).unwrap();
        assert_eq!((c.preempt_mode.as_str(), c.slurm_user), ("GANG,SUSPEND", 64030));
        assert_eq!(c.munge_socket, PathBuf::from("/run/m.sock"));
        let c = Config::parse("PreemptMode = OFF\nSlurmUser = root(0)\nAuthInfo = (null)\n").unwrap();
        assert_eq!(c.munge_socket, default_socket());
    }
}
