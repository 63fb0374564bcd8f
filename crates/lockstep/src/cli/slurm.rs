//! `lockstep slurm prolog|epilog|prolog-slurmctld|epilog-slurmctld`: what Slurm runs at each job's start and end (see
//! deploy/slurm/). Each takes the job from Slurm's environment (`SLURM_JOB_ID`, `SLURM_JOB_UID`) and never fails
//! the job: a failing prolog drains the node, so problems are reported on stderr (slurmd's or slurmctld's log)
//! and the exit status stays 0. Only a missing or malformed job ID, which means it was run by hand, is exit 2.

use std::path::Path;

use lockstep_core::error::UsageError;
use lockstep_proto::client::{call_if_running, check};
use lockstep_proto::protocol::Request;
use lockstep_slurm::{self as slurm, SlurmJobId};

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
    EpilogSlurmctld(JobArgs),
}

/// The controller prolog's job and how it gives rows.
#[derive(Debug, clap::Args)]
pub struct ControllerArgs {
    #[command(flatten)]
    job: JobArgs,
    /// `cluster`: places every node of a job favours it in alike; `node`: a row of each node's own cycle (as
    /// before cluster-wide places; agreement then holds only where nodes run the same jobs).
    #[arg(long, value_enum, default_value_t = slurm::RowMode::Cluster)]
    rows: slurm::RowMode,
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
            ("prolog", prolog(id, socket).map(|row| format!("job {id} announced, {}", show_row(row))))
        }
        SlurmCommand::Epilog(args) => {
            let id = args.id()?;
            ("epilog", tell(socket, &Request::SlurmEpilog { id }).map(|()| format!("job {id} ended")))
        }
        SlurmCommand::PrologSlurmctld(args) => {
            let id = args.job.id()?;
            ("prolog-slurmctld", slurm::assign_row(id, args.rows))
        }
        SlurmCommand::EpilogSlurmctld(args) => ("epilog-slurmctld", slurm::release_row(args.id()?)),
    };
    match result {
        Ok(msg) => eprintln!("lockstep slurm {what}: {msg}"),
        Err(e) => eprintln!("lockstep slurm {what}: {e:#} (the job goes on without lockstep's help)"),
    }
    Ok(0)
}

fn show_row(row: Option<slurm::Row>) -> String {
    row.map_or_else(|| "row from the job-ID hash".into(), slurm::show)
}

/// Announces job `id` to the agent; returns its row or place.
fn prolog(id: SlurmJobId, socket: &Path) -> anyhow::Result<Option<slurm::Row>> {
    let Some(uid) = std::env::var("SLURM_JOB_UID").ok().and_then(|u| u.parse().ok()) else {
        anyhow::bail!("SLURM_JOB_UID is not set or not a number")
    };
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
    tell(socket, &Request::SlurmProlog { id, uid, row: node_row, place })?;
    Ok(row)
}

/// Sends a request to the agent; no agent running is fine (the job runs without co-scheduling).
fn tell(socket: &Path, request: &Request) -> anyhow::Result<()> {
    match call_if_running(socket, request) {
        Some(answer) => check(answer?).map(drop),
        None => anyhow::bail!("no agent at {}", socket.display()),
    }
}
