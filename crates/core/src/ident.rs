//! Who a job and a node are: a job's name ([`JobName`], checked once where it comes in), a job as the agent keys
//! it ([`JobKey`]: a named job or a Slurm job, which no name can pose as), and a node's name ([`NodeName`]).

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::UsageError;
use crate::job::SlurmJobId;

/// What the name of a Slurm job begins with (`slurm-42`); no other job's name may.
pub const SLURM_PREFIX: &str = "slurm-";

/// A job's name, checked once where it comes in (a flag, through [`FromStr`]; a request, through serde): it
/// becomes a directory name, so 1 to 64 letters, digits, `.`, `_`, `-`, not starting with `.`; and it never begins
/// with [`SLURM_PREFIX`], which names Slurm jobs ([`JobKey::Slurm`]). Holding one means it is valid; no one checks
/// it again.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobName(String);

impl JobName {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for JobName {
    type Err = UsageError;

    fn from_str(name: &str) -> Result<Self, UsageError> {
        name.to_string().try_into()
    }
}

impl TryFrom<String> for JobName {
    type Error = UsageError;

    fn try_from(name: String) -> Result<Self, UsageError> {
        check("job name", &name)?;
        if name.starts_with(SLURM_PREFIX) {
            return Err(UsageError::new(format!(
                "invalid job name {name:?} (names beginning with {SLURM_PREFIX:?} are Slurm's jobs; expected another \
                 name)"
            )));
        }
        Ok(Self(name))
    }
}

impl From<JobName> for String {
    fn from(name: JobName) -> Self {
        name.0
    }
}

impl Deref for JobName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// Shown as the text it is, quoted (`{:?}` in a message reads `"lu"`, not `JobName("lu")`).
impl fmt::Debug for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// The name, padded as a width asks (`{:<20}` in a table).
impl fmt::Display for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// A job as the agent keys it: one given a name (adopted, or registered by `lockstep run`), or a Slurm job, by its
/// ID. Written as its name (`lu`, `slurm-42`), in text and in JSON; since a [`JobName`] never begins with
/// [`SLURM_PREFIX`], the text says which it is.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum JobKey {
    /// A job given a name.
    Named(JobName),
    /// A Slurm job.
    Slurm(SlurmJobId),
}

impl JobKey {
    /// The Slurm job it is, if it is one.
    pub fn slurm(&self) -> Option<SlurmJobId> {
        match self {
            Self::Slurm(id) => Some(*id),
            Self::Named(_) => None,
        }
    }
}

impl FromStr for JobKey {
    type Err = UsageError;

    /// `slurm-ID` (the ID's digits only) is a Slurm job; anything else must be a [`JobName`].
    fn from_str(text: &str) -> Result<Self, UsageError> {
        match text.strip_prefix(SLURM_PREFIX) {
            Some(id) => id
                .parse()
                .map(Self::Slurm)
                .map_err(|e: String| UsageError::new(format!("invalid job {text:?}: {e} after {SLURM_PREFIX:?}"))),
            None => text.parse().map(Self::Named),
        }
    }
}

crate::serde_by_text!(JobKey);

impl From<JobName> for JobKey {
    fn from(name: JobName) -> Self {
        Self::Named(name)
    }
}

/// The key's text, padded as a width asks (`{:<20}` in a table).
impl fmt::Display for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Named(name) => f.pad(name),
            Self::Slurm(id) => f.pad(&format!("{SLURM_PREFIX}{id}")),
        }
    }
}

/// Shown as its name, quoted, as a [`JobName`] is.
impl fmt::Debug for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

/// A node's name (`--node`, `--slurm-node`), checked once where it comes in: it is printed in every log line,
/// status and metric label, and names a Slurm node, so the same characters as a job name (a host name's, and
/// `_`). Holding one means it is valid.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeName(String);

impl NodeName {
    /// `name` as a node name, called `what` in the message when it is not one (`Slurm node name`).
    pub fn new(what: &str, name: String) -> Result<Self, UsageError> {
        check(what, &name)?;
        Ok(Self(name))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for NodeName {
    type Err = UsageError;

    fn from_str(name: &str) -> Result<Self, UsageError> {
        Self::new("node name", name.to_string())
    }
}

impl TryFrom<String> for NodeName {
    type Error = UsageError;

    fn try_from(name: String) -> Result<Self, UsageError> {
        Self::new("node name", name)
    }
}

impl From<NodeName> for String {
    fn from(name: NodeName) -> Self {
        name.0
    }
}

/// Shown as the text it is, quoted, as a [`JobName`] is.
impl fmt::Debug for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// The name, padded as a width asks.
impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// Checks `name`, called `what` in the message: 1 to 64 letters, digits, `.`, `_`, `-`, not starting with `.`.
fn check(what: &str, name: &str) -> Result<(), UsageError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(UsageError::new(format!(
            "invalid {what} {name:?} (expected 1-64 characters of letters, digits, '.', '_', '-', not starting with '.')"
        )))
    }
}

/// A process or thread as lockstep names it: its ID and its start time (clock ticks since boot, field 22 of
/// `/proc/PID/stat`). An ID alone is not a process: once the process exits the kernel gives the ID to another, and
/// a stale ID acted on by root would move, raise or signal whoever got it. Every action on a process or thread goes
/// through a `ProcessRef` (`lockstep_cgroup::procfs::Live`), which acts only while the ID still names the process
/// that was seen; the store keeps one as one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessRef {
    /// Process (or thread) ID.
    pub pid: i32,
    /// Its start time, in clock ticks since boot.
    pub start: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_name_is_checked_wherever_it_comes_from() {
        assert_eq!("lu.A-2_x".parse::<JobName>().unwrap().as_str(), "lu.A-2_x");
        for bad in ["", ".hidden", "a/b", "x\ny", &"n".repeat(65)] {
            assert!(bad.parse::<JobName>().unwrap_err().to_string().contains("invalid job name"), "{bad:?}");
            let json = serde_json::to_string(bad).unwrap();
            let refused = serde_json::from_str::<JobName>(&json).unwrap_err().to_string();
            assert!(refused.contains("invalid job name"), "{refused}");
        }
        let name: JobName = serde_json::from_str(r#""ok""#).unwrap();
        assert_eq!(serde_json::to_string(&name).unwrap(), r#""ok""#);
    }

    #[test]
    fn names_and_keys_fill_a_table_s_column() {
        let named: JobKey = "lu".parse().unwrap();
        let slurm: JobKey = "slurm-42".parse().unwrap();
        let node: NodeName = "n1".parse().unwrap();
        let row = format!("{named:<6}|{slurm:<10}|{:>4}|{node:<3}|", JobName::try_from("cg".to_string()).unwrap());
        assert_eq!(row, "lu    |slurm-42  |  cg|n1 |");
    }

    #[test]
    fn no_name_can_pose_as_a_slurm_job() {
        for posing in ["slurm-42", "slurm-x", "slurm-"] {
            let e = posing.parse::<JobName>().unwrap_err().to_string();
            assert!(e.contains("Slurm's jobs"), "{posing}: {e}");
            assert!(serde_json::from_str::<JobName>(&format!("{posing:?}")).is_err(), "{posing}");
        }
        assert_eq!("slurm-42".parse::<JobKey>().unwrap(), JobKey::Slurm(SlurmJobId(42)));
        assert_eq!("slurm42".parse::<JobKey>().unwrap(), JobKey::Named("slurm42".parse().unwrap()));
        for bad in ["slurm-+42", "slurm-x", "slurm-", "a/b"] {
            assert!(bad.parse::<JobKey>().unwrap_err().to_string().contains("invalid job"), "{bad}");
        }
        let key: JobKey = serde_json::from_str(r#""slurm-7""#).unwrap();
        assert_eq!((key.slurm(), key.to_string()), (Some(SlurmJobId(7)), "slurm-7".to_string()));
        assert_eq!(serde_json::to_string(&JobKey::Slurm(SlurmJobId(7))).unwrap(), r#""slurm-7""#);
    }
}
