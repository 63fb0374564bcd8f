//! Slurm as lockstep talks to it: how a Slurm job is named, what `scontrol` says about jobs and nodes, and the
//! co-scheduling row the controller's prolog gives each job (kept in the job's `AdminComment`, which only
//! administrators can change, as `lockstep_row=N`).

pub mod hostlist;

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use nix::fcntl::{Flock, FlockArg};

use lockstep_core::error::UsageError;

/// The lockstep job name of Slurm job `id`.
pub fn job_name(id: u64) -> String {
    format!("slurm-{id}")
}

/// The Slurm job ID in a lockstep job name (`slurm-42`).
pub fn job_id(name: &str) -> Option<u64> {
    name.strip_prefix("slurm-")?.parse().ok()
}

/// The `AdminComment` key of a job's row.
const ROW_KEY: &str = "lockstep_row=";

/// What `scontrol show job` says of a job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobInfo {
    /// Job ID.
    pub id: u64,
    /// `JobState` (RUNNING, CONFIGURING, …).
    pub state: String,
    /// `NodeList`, expanded.
    pub nodes: Vec<String>,
    /// `AdminComment`.
    pub admin_comment: String,
}

impl JobInfo {
    /// The row the controller's prolog gave the job.
    pub fn row(&self) -> Option<u32> {
        self.admin_comment
            .split_whitespace()
            .find_map(|w| w.strip_prefix(ROW_KEY)?.parse().ok())
            .filter(|&r| r < lockstep_core::cosched::rows::MAX_ROWS)
    }

    /// Whether the job holds its nodes now (so its row is taken there).
    fn holds_nodes(&self) -> bool {
        matches!(self.state.as_str(), "RUNNING" | "CONFIGURING" | "SUSPENDED")
    }

    /// One job from a line of `scontrol -o show job`.
    fn parse(line: &str) -> Option<Self> {
        let fields = fields(line);
        let get = |k: &str| fields.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        let nodes = match get("NodeList") {
            None | Some("(null)" | "") => Vec::new(),
            Some(list) => hostlist::expand(list).ok()?,
        };
        Some(Self {
            id: get("JobId")?.parse().ok()?,
            state: get("JobState").unwrap_or_default().to_string(),
            nodes,
            admin_comment: get("AdminComment").filter(|c| *c != "(null)").unwrap_or_default().to_string(),
        })
    }
}

/// The `Key=Value` fields of one `scontrol -o` line. A value may hold spaces: a word that does not start with a
/// key (Slurm's keys start with a capital: `JobId`, `CPUs/Task`) continues the value before it.
pub fn fields(line: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for word in line.split_whitespace() {
        let key = word.split_once('=').map(|(k, _)| k).filter(|k| {
            k.starts_with(|c: char| c.is_ascii_uppercase())
                && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '/' | '_'))
        });
        match (key, out.last_mut()) {
            (Some(k), _) => out.push((k.to_string(), word[k.len() + 1..].to_string())),
            (None, Some((_, v))) => {
                v.push(' ');
                v.push_str(word);
            }
            (None, None) => {}
        }
    }
    out
}

/// How long an `scontrol` call may take: a prolog must not hold a job up when slurmctld does not answer.
const SCONTROL_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `scontrol ARGS`; its standard output. Killed after [`SCONTROL_TIMEOUT`].
fn scontrol(args: &[&str]) -> anyhow::Result<String> {
    let child =
        Command::new("scontrol").args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| {
            UsageError::new(format!("cannot run scontrol ({e}); Slurm's client commands must be on PATH"))
        })?;
    // The output is read while waiting (a long job list fills a pipe), on a thread, so that the wait can end.
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = if let Ok(out) = rx.recv_timeout(SCONTROL_TIMEOUT) {
        out?
    } else {
        // The reader thread reaps it once killed.
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        anyhow::bail!("scontrol {} did not answer within {} s", args.join(" "), SCONTROL_TIMEOUT.as_secs());
    };
    if !out.status.success() {
        anyhow::bail!("scontrol {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Job `id`, if Slurm knows it.
pub fn show_job(id: u64) -> anyhow::Result<Option<JobInfo>> {
    match scontrol(&["-o", "show", "job", &id.to_string()]) {
        Ok(text) => Ok(text.lines().find_map(JobInfo::parse).filter(|j| j.id == id)),
        Err(e) if format!("{e:#}").contains("Invalid job id") => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every job slurmctld knows.
fn jobs() -> anyhow::Result<Vec<JobInfo>> {
    Ok(scontrol(&["-o", "show", "job"])?.lines().filter_map(JobInfo::parse).collect())
}

/// The address of node `name` (`NodeAddr`).
pub fn node_addr(name: &str) -> anyhow::Result<String> {
    let text = scontrol(&["-o", "show", "node", name])?;
    fields(text.lines().next().unwrap_or_default())
        .into_iter()
        .find(|(k, _)| k == "NodeAddr")
        .map(|(_, v)| v)
        .with_context(|| format!("scontrol shows no NodeAddr for node {name}"))
}

/// The lowest row that no job sharing a node with `job` holds.
pub fn free_row(job: &JobInfo, others: &[JobInfo]) -> u32 {
    let taken: Vec<u32> = others
        .iter()
        .filter(|o| o.id != job.id && o.holds_nodes() && o.nodes.iter().any(|n| job.nodes.contains(n)))
        .filter_map(JobInfo::row)
        .collect();
    // Among the `taken.len() + 1` lowest rows one is free.
    (0..=taken.len() as u32).find(|r| !taken.contains(r)).expect("a free row exists")
}

/// `comment` with its row set to `row` (other words kept).
fn with_row(comment: &str, row: u32) -> String {
    let mut words: Vec<String> =
        comment.split_whitespace().filter(|w| !w.starts_with(ROW_KEY)).map(str::to_string).collect();
    words.push(format!("{ROW_KEY}{row}"));
    words.join(" ")
}

/// Lock file that serialises row assignment when slurmctld runs several prologs at once.
fn lock_path() -> PathBuf {
    std::env::var_os("LOCKSTEP_SLURM_LOCK")
        .map_or_else(|| PathBuf::from("/run/lock/lockstep-slurm-rows.lock"), PathBuf::from)
}

/// Gives job `id` the lowest row free on all its nodes and records it in its `AdminComment`; returns the row (a
/// job that has one keeps it).
pub fn assign_row(id: u64) -> anyhow::Result<u32> {
    let path = lock_path();
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open lock file {}", path.display()))?;
    let _lock = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| e).context("cannot lock the row file")?;
    let all = jobs()?;
    let job = all.iter().find(|j| j.id == id).with_context(|| format!("Slurm does not know job {id}"))?;
    if let Some(row) = job.row() {
        return Ok(row);
    }
    let row = free_row(job, &all);
    let comment = format!("AdminComment={}", with_row(&job.admin_comment, row));
    scontrol(&["update", &format!("JobId={id}"), &comment])?;
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scontrol_lines() {
        let line = "JobId=12 JobName=lu run UserId=alice(1000) JobState=RUNNING Reason=None NodeList=n[1-2] \
                    AdminComment=keep me lockstep_row=2 Command=/bin/x";
        let job = JobInfo::parse(line).unwrap();
        assert_eq!(job.id, 12);
        assert_eq!(job.state, "RUNNING");
        assert_eq!(job.nodes, ["n1", "n2"]);
        assert_eq!(job.admin_comment, "keep me lockstep_row=2");
        assert_eq!(job.row(), Some(2));
        let f = fields(line);
        assert_eq!(f[1], ("JobName".to_string(), "lu run".to_string()));
        let pending = JobInfo::parse("JobId=13 JobState=PENDING NodeList=(null)").unwrap();
        assert!(pending.nodes.is_empty());
        assert_eq!(pending.row(), None);
    }

    #[test]
    fn rows_differ_on_shared_nodes_only() {
        let job = |id, nodes: &[&str], state: &str, row: Option<u32>| JobInfo {
            id,
            state: state.into(),
            nodes: nodes.iter().map(std::string::ToString::to_string).collect(),
            admin_comment: row.map(|r| format!("{ROW_KEY}{r}")).unwrap_or_default(),
        };
        let new = job(5, &["n1", "n2"], "CONFIGURING", None);
        let others = [
            job(1, &["n1"], "RUNNING", Some(0)),
            job(2, &["n3"], "RUNNING", Some(1)),
            job(3, &["n2", "n3"], "COMPLETED", Some(1)),
            job(4, &["n2"], "RUNNING", Some(2)),
            new.clone(),
        ];
        assert_eq!(free_row(&new, &others), 1);
        assert_eq!(free_row(&job(6, &["n4"], "CONFIGURING", None), &others), 0);
    }

    #[test]
    fn row_replaces_the_old_one_and_keeps_other_words() {
        assert_eq!(with_row("", 1), "lockstep_row=1");
        assert_eq!(with_row("audit lockstep_row=0", 3), "audit lockstep_row=3");
    }

    #[test]
    fn names() {
        assert_eq!(job_name(42), "slurm-42");
        assert_eq!(job_id("slurm-42"), Some(42));
        assert_eq!(job_id("42"), None);
    }
}
