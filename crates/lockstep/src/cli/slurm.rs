//! `lockstep slurm prolog|epilog|prolog-slurmctld|epilog-slurmctld`: what Slurm runs at each job's start and end (see
//! deploy/slurm/). Each takes the job from Slurm's environment (`SLURM_JOB_ID`, `SLURM_JOB_UID`) and never fails
//! the job: a failing prolog drains the node, so problems are reported on stderr (slurmd's or slurmctld's log)
//! and the exit status stays 0. Only a missing or malformed job ID, which means it was run by hand, or a bad flag
//! (`--change-margin` out of range, as clap refuses a bad `--rows` or `--agent-port`) is exit 2: every job then
//! fails its controller prolog until the hook's line in slurm.conf is fixed.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use lockstep_core::error::{one_line, UsageError};
use lockstep_proto::client::{call_if_running, check};
use lockstep_proto::http::{self, Target};
use lockstep_proto::protocol::{Request, Response};
use lockstep_slurm::{self as slurm, push, SlurmJobId};

/// `lockstep slurm …`.
#[derive(Debug, clap::Subcommand)]
pub enum SlurmCommand {
    /// slurm.conf `Prolog=`: tell this node's agent that the job starts here (its owner, and its row if the
    /// controller's prolog gave one).
    Prolog(JobArgs),
    /// slurm.conf `Epilog=`: tell this node's agent that the job has ended here.
    Epilog(JobArgs),
    /// slurm.conf `PrologSlurmctld=`: give the job its place in the cluster-wide matrix (the same slots on every
    /// node; jobs sharing a node get disjoint slots, running neighbours making room), kept in its AdminComment.
    PrologSlurmctld(ControllerArgs),
    /// slurm.conf `EpilogSlurmctld=`: the job's neighbours grow into the slots it held, and a requeued job's
    /// AdminComment loses lockstep's words (the rest kept as it is).
    EpilogSlurmctld(ControllerEndArgs),
}

/// The controller prolog's job, how it gives rows, and where the agents take notices.
#[derive(Debug, clap::Args)]
pub struct ControllerArgs {
    #[command(flatten)]
    job: JobArgs,
    /// `cluster`: places every node of a job favours it in alike; `node`: a row of each node's own cycle (as
    /// before cluster-wide places; agreement then holds only where nodes run the same jobs).
    #[arg(long, value_enum, default_value_t = slurm::RowMode::Cluster)]
    rows: slurm::RowMode,
    #[command(flatten)]
    agents: AgentArgs,
}

/// Where the controller's hooks tell the nodes' agents the places they give, and how long before a change of
/// place takes effect.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The port of the agents' metrics door (lockstepd --metrics ADDR:PORT), at each node's NodeAddr.
    #[arg(long, value_name = "PORT", default_value_t = 9464)]
    agent_port: u16,
    /// How long after the hook a running job's change of place takes effect (1s to 10m) [default: 5s]: long
    /// enough for every agent of the job to learn it first. The notice reaches an agent in milliseconds, or at its
    /// second try within about 4 s; an agent without a metrics door asks slurmctld every 2 s. Below 5 s only where
    /// every agent takes notices on a network that loses none (a late agent keeps the old place past the change).
    #[arg(long, value_name = "DURATION")]
    change_margin: Option<String>,
}

impl AgentArgs {
    /// The margin `--change-margin` gives, or [`slurm::CHANGE_MARGIN`].
    fn margin(&self) -> Result<Duration, UsageError> {
        self.change_margin.as_deref().map_or(Ok(slurm::CHANGE_MARGIN), |text| {
            lockstep_core::duration::within("--change-margin", text, Duration::from_secs(1)..=Duration::from_mins(10))
        })
    }
}

/// The controller epilog's job, and where the agents take notices.
#[derive(Debug, clap::Args)]
pub struct ControllerEndArgs {
    #[command(flatten)]
    job: JobArgs,
    #[command(flatten)]
    agents: AgentArgs,
}

/// The job a prolog or epilog is for.
#[derive(Debug, clap::Args)]
pub struct JobArgs {
    /// Slurm job ID [default: $SLURM_JOB_ID].
    #[arg(long, value_name = "ID")]
    job_id: Option<SlurmJobId>,
}

impl JobArgs {
    fn id(&self) -> Result<SlurmJobId, UsageError> {
        if let Some(id) = self.job_id {
            return Ok(id);
        }
        let text = std::env::var("SLURM_JOB_ID").map_err(|_| {
            UsageError::new("no job: SLURM_JOB_ID is not set (run by Slurm as a prolog/epilog, or give --job-id ID)")
        })?;
        text.parse().map_err(|_| UsageError::new(format!("bad SLURM_JOB_ID {text:?} (expected a job number)")))
    }
}

/// Runs a `lockstep slurm` command.
pub fn exec(cmd: &SlurmCommand, socket: &Path) -> anyhow::Result<i32> {
    let (what, result) = match cmd {
        SlurmCommand::Prolog(args) => {
            let id = args.id()?;
            ("prolog", prolog(id, socket).map(|row| format!("job {id} announced, {row}")))
        }
        SlurmCommand::Epilog(args) => {
            let id = args.id()?;
            ("epilog", tell(socket, &Request::SlurmEpilog { id }).map(|()| format!("job {id} ended")))
        }
        SlurmCommand::PrologSlurmctld(args) => {
            let (id, margin) = (args.job.id()?, args.agents.margin()?);
            let tell =
                |changed: &[slurm::JobInfo], all: &[slurm::JobInfo]| push_places(changed, all, args.agents.agent_port);
            ("prolog-slurmctld", slurm::assign_row(id, args.rows, margin, &tell).map_err(anyhow::Error::new))
        }
        SlurmCommand::EpilogSlurmctld(args) => {
            let (id, margin) = (args.job.id()?, args.agents.margin()?);
            let tell =
                |changed: &[slurm::JobInfo], all: &[slurm::JobInfo]| push_places(changed, all, args.agents.agent_port);
            ("epilog-slurmctld", slurm::release_row(id, margin, &tell).map_err(anyhow::Error::new))
        }
    };
    match result {
        Ok(msg) => eprintln!("lockstep slurm {what}: {msg}"),
        Err(e) => eprintln!("lockstep slurm {what}: {} (the job goes on without lockstep's help)", one_line(&*e)),
    }
    Ok(0)
}

fn show_row(row: Option<slurm::Row>) -> String {
    row.map_or_else(|| "row from the job-ID hash".into(), slurm::show)
}

/// Announces job `id` to the agent; returns what it has of the job's row or place, for the log. The controller's prolog has told the agent the
/// job's place before any node's prolog runs; only when it could not (the agent was not reachable then, or has
/// restarted since) is slurmctld asked for it here, and the agent told again.
fn prolog(id: SlurmJobId, socket: &Path) -> anyhow::Result<String> {
    let Some(uid) = std::env::var("SLURM_JOB_UID").ok().and_then(|u| u.parse().ok()) else {
        anyhow::bail!("SLURM_JOB_UID is not set or not a number")
    };
    let answer = ask(socket, &Request::SlurmProlog { id, uid, row: None, place: None })?;
    if answer.placed == Some(true) {
        return Ok("its place as the controller's prolog told the agent".to_string());
    }
    let row = match slurm::show_job(id) {
        Ok(job) => job.and_then(|j| j.row()),
        Err(e) => {
            eprintln!("lockstep slurm prolog: cannot read job {id}'s row ({e:#}); using the job-ID hash");
            None
        }
    };
    let (node_row, place) = match row {
        Some(slurm::Row::Node(r)) => (Some(r), None),
        Some(slurm::Row::Cluster(s)) => (None, Some(s)),
        None => (None, None),
    };
    if row.is_some() {
        ask(socket, &Request::SlurmProlog { id, uid, row: node_row, place })?;
    }
    Ok(format!("{} (asked of slurmctld: the agent had not been told)", show_row(row)))
}

/// How many agents the controller's hooks tell at once.
const TOLD_AT_ONCE: usize = 32;

/// How long the controller's hooks wait for one agent to take its notice (they hold the row lock meanwhile).
const TELL_DEADLINE: Duration = Duration::from_secs(2);

/// Tells the agents of the nodes of `changed` (the jobs whose place was given or changed) the places of every
/// job on those nodes (of `all`) now (`push`: one notice a node, sealed by munge, sent to the agent's metrics door
/// on `port` at the node's `NodeAddr`, [`TOLD_AT_ONCE`] at a time, each tried twice with a deadline of
/// [`TELL_DEADLINE`]); returns what to add to the hook's log line: how many were told, and each one not told and
/// why (its agent keeps the places it had until its next notice, or asks slurmctld when it restarts).
fn push_places(changed: &[slurm::JobInfo], all: &[slurm::JobInfo], port: u16) -> String {
    let at_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let notices = push::notices(changed, all, at_ms);
    if notices.is_empty() {
        return String::new();
    }
    let names: Vec<String> = notices.iter().map(|n| n.node.clone()).collect();
    let addresses = match push::addresses(&names) {
        Ok(a) => a,
        Err(e) => return format!("; no agent told (cannot read the nodes' addresses: {e:#})"),
    };
    let socket = push::controller_socket();
    let next = AtomicUsize::new(0);
    let failed = Mutex::new(Vec::new());
    let tell_one = |notice: &push::Notice| -> anyhow::Result<()> {
        let addr = addresses.get(&notice.node).context("slurmctld names no NodeAddr for it")?;
        let target = if addr.contains(':') { format!("[{addr}]:{port}") } else { format!("{addr}:{port}") };
        let mut last = None;
        for _ in 0..2 {
            // A credential is decoded once: each try seals the notice anew.
            let credential = push::encode(&socket, &notice.payload)?;
            match http::request(Target::Tcp(&target), push::PATH, Some(credential.into_bytes()), TELL_DEADLINE) {
                Ok(answer) if answer.status == 200 => return Ok(()),
                // Busy (the door's caps or the caller's budget): worth the second try.
                Ok(answer) if matches!(answer.status, 429 | 503) => {
                    last = Some(format!("its agent at {target} was busy ({})", answer.status));
                }
                Ok(answer) => {
                    let said = String::from_utf8_lossy(&answer.body);
                    anyhow::bail!("its agent at {target} refused it ({}: {})", answer.status, said.trim())
                }
                Err(e) => last = Some(format!("cannot reach its agent at {target}: {e}")),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        anyhow::bail!(last.unwrap_or_default())
    };
    std::thread::scope(|scope| {
        for _ in 0..TOLD_AT_ONCE.min(notices.len()) {
            scope.spawn(|| {
                while let Some(notice) = notices.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if let Err(e) = tell_one(notice) {
                        failed.lock().unwrap_or_else(PoisonError::into_inner).push(format!(
                            "{}: {}",
                            notice.node,
                            one_line(&*e)
                        ));
                    }
                }
            });
        }
    });
    let failed = failed.into_inner().unwrap_or_else(PoisonError::into_inner);
    if failed.is_empty() {
        format!("; told {} agent(s)", notices.len())
    } else {
        format!("; told {} of {} agents (not told: {})", notices.len() - failed.len(), notices.len(), failed.join("; "))
    }
}

/// Sends a request to the agent; no agent running is fine (the job runs without co-scheduling).
fn tell(socket: &Path, request: &Request) -> anyhow::Result<()> {
    ask(socket, request).map(drop)
}

/// Sends a request to the agent; its answer.
fn ask(socket: &Path, request: &Request) -> anyhow::Result<Response> {
    match call_if_running(socket, request) {
        Some(answer) => Ok(check(answer?)?),
        None => anyhow::bail!("no agent at {}", socket.display()),
    }
}
