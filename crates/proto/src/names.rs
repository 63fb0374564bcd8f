//! Job names: what the agent, the store and cgroup paths accept as the name of a job.

use lockstep_core::error::UsageError;

/// Checks a job name: it becomes a directory name, so letters, digits, `.`, `_`, `-`, at most 64 bytes.
pub fn check_job_name(name: &str) -> Result<(), UsageError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(UsageError::new(format!(
            "invalid job name {name:?} (expected 1-64 characters of letters, digits, '.', '_', '-', not starting with '.')"
        )))
    }
}
