//! Running Slurm's and munge's client commands (`squeue`, `scontrol`, `munge`, `unmunge`), each killed after
//! [`TIMEOUT`]. A failure is classified once, where its exit status and last line of stderr are read, into a
//! [`ClientError`]: the clients say why only in words and exit statuses, and callers match on the kind, never on
//! the words.

use std::process::Stdio;
use std::time::Duration;

use lockstep_core::error::UsageError;
use lockstep_core::trust;

use crate::error::Result;
pub use crate::error::{ClientError, Refusal};

/// How long a client call may take: a prolog must not hold a job up when slurmctld does not answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// `scontrol ARGS`: its standard output.
pub(crate) fn scontrol(args: &[&str]) -> Result<String> {
    run_with_timeout("scontrol", args)
}

/// Runs Slurm client `program` with `args`; its standard output.
pub(crate) fn run_with_timeout(program: &str, args: &[&str]) -> Result<String> {
    run_with_input(program, args, Vec::new())
}

/// Runs Slurm's (or munge's) client `program` with `args` and `input` on its standard input; its standard output.
/// A client that cannot be started is an [`Error::Setup`] (it must be on `PATH`); one that fails, an
/// [`Error::Client`].
pub(crate) fn run_with_input(program: &str, args: &[&str], input: Vec<u8>) -> Result<String> {
    let mut child = trust::command(program)
        .map_err(|e| UsageError::new(format!("{e}; Slurm's client commands must be on PATH")))?
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| UsageError::new(format!("cannot run {program} ({e}); Slurm's client commands must be on PATH")))?;
    // The input is written and the output read while waiting (a long job list fills a pipe), on a thread, so
    // that the wait can end.
    let pid = child.id() as i32;
    let stdin = child.stdin.take();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            use std::io::Write as _;
            let _ = stdin.write_all(&input);
        }
        let _ = tx.send(child.wait_with_output());
    });
    let out = if let Ok(out) = rx.recv_timeout(TIMEOUT) {
        out.map_err(ClientError::Wait)?
    } else {
        // The reader thread reaps it once killed.
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        return Err(ClientError::Timeout { program: program.to_string(), args: args.join(" "), after: TIMEOUT }.into());
    };
    if !out.status.success() {
        // Slurm's clients say why over several lines, each leading to the last (`squeue: fatal: Could not
        // establish a configuration source` after the DNS lookups that led to it): the last is the one line here.
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("no message");
        let refusal = Refusal::of(last);
        let said = last.strip_prefix(&format!("{program}: ")).unwrap_or(last).to_string();
        return Err(
            ClientError::Failed { program: program.to_string(), status: out.status.code(), said, refusal }.into()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_s_last_line_is_classified_once() {
        assert_eq!(Refusal::of("squeue: error: Invalid job id specified"), Refusal::UnknownJob);
        assert_eq!(Refusal::of("scontrol: error: Job has already finished for job 2"), Refusal::JobFinished);
        assert_eq!(Refusal::of("squeue: fatal: Could not establish a configuration source"), Refusal::Unreachable);
        assert_eq!(Refusal::of("scontrol: error: Access/permission denied"), Refusal::Other);
        let e = crate::Error::from(ClientError::Failed {
            program: "squeue".into(),
            status: Some(1),
            said: "fatal: no slurmctld".into(),
            refusal: Refusal::Unreachable,
        });
        assert!(e.refused(Refusal::Unreachable) && !e.refused(Refusal::UnknownJob));
        assert_eq!(e.status(), Some(1));
        assert_eq!(
            e.to_string(),
            "squeue failed with status 1: fatal: no slurmctld (is slurmctld reachable? scontrol ping)"
        );
    }
}
