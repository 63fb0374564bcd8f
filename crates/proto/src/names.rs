//! Names: what the agent, the store and cgroup paths accept as the name of a job or a node.

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use lockstep_core::error::UsageError;

/// A job's name, checked once where it comes in (a flag, through [`FromStr`]; a request, through serde): it
/// becomes a directory name, so 1 to 64 letters, digits, `.`, `_`, `-`, not starting with `.`. Holding one means
/// it is valid; no one checks it again.
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
        check("job name", name)?;
        Ok(Self(name.to_string()))
    }
}

impl TryFrom<String> for JobName {
    type Error = UsageError;

    fn try_from(name: String) -> Result<Self, UsageError> {
        check("job name", &name)?;
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

impl fmt::Display for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks a node name (`--node`, `--slurm-node`): it is printed in every log line, status and metric label, and
/// names a Slurm node, so the same characters as a job name (a host name's, and `_`).
pub fn check_node_name(what: &str, name: &str) -> Result<(), UsageError> {
    check(what, name)
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
}
