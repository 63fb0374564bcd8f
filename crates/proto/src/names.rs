//! Names: what the agent, the store and cgroup paths accept as the name of a job or a node.

use lockstep_core::error::UsageError;

/// Checks a job name: it becomes a directory name, so letters, digits, `.`, `_`, `-`, at most 64 bytes.
pub fn check_job_name(name: &str) -> Result<(), UsageError> {
    check("job name", name)
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
