//! The commands that talk to the agent: `status`, `policy set`, `adopt`, `release`.

use lockstep_core::cosched::rows::MAX_ROWS;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lockstep_cgroup::procfs::Live as _;
use lockstep_core::cosched::{slot, PolicySpec};
use lockstep_core::error::UsageError;
use lockstep_core::ident::{JobKey, JobName, ProcessRef};
use lockstep_proto::client::{call, check};
use lockstep_proto::protocol::{Request, Status};

/// Arguments of `lockstep status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `lockstep policy set NAME [--slot DURATION]`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Switch the agent's co-scheduling policy (cfs, boost, gang, auto, dcs, dcs+boost; dcs:weight, dcs:rr,
    /// dcs:nice).
    Set {
        /// Policy name.
        name: String,
        /// Slot length, e.g. 200ms or 2s (10ms to 60s).
        #[arg(long, value_name = "DURATION")]
        slot: Option<String>,
    },
}

/// Arguments of `lockstep adopt`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["cgroup", "pid", "container"])))]
pub struct AdoptArgs {
    /// Job name.
    #[arg(long, value_name = "NAME")]
    job: JobName,
    /// An existing cgroup: absolute, or relative to the hierarchy roots (e.g. /slurm_n1/uid_0/job_7/step_0).
    #[arg(long, value_name = "PATH", num_args = 1..)]
    cgroup: Vec<PathBuf>,
    /// Processes to move into a cgroup of the agent's (`--pid 1 2` or `--pid 1,2`), each as it is when this runs
    /// (its start time goes with its PID: one that ends before the agent takes it is refused, never its PID's next
    /// holder).
    #[arg(long, value_name = "PID", num_args = 1.., value_delimiter = ',')]
    pid: Vec<i32>,
    /// Containers, e.g. the ranks of one MPI job: podman names or IDs (one cgroup each), or Charliecloud
    /// containers as charliecloud:PID (the process ch-run became; moved into a cgroup of the agent's).
    #[arg(long, value_name = "ID", num_args = 1..)]
    container: Vec<String>,
    /// Row in the co-scheduling matrix (the same on every node of the job); a name hash otherwise.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(..i64::from(MAX_ROWS)))]
    row: Option<u32>,
}

/// Arguments of `lockstep release`.
#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    /// Job name (`slurm-ID` for a Slurm job).
    #[arg(long, value_name = "NAME")]
    job: JobKey,
}

/// Runs `lockstep status`.
pub fn status(args: &StatusArgs, socket: &Path) -> anyhow::Result<i32> {
    let status = agent_status(socket)?;
    if args.json {
        println!("{}", serde_json::to_string(&status)?);
    } else {
        print!("{}", render(&status));
    }
    Ok(0)
}

/// `since_epoch` as the UTC time of day, `HH:MM:SS.mmm UTC`.
fn time_of_day(since_epoch: Duration) -> String {
    let (s, ms) = (since_epoch.as_secs(), since_epoch.subsec_millis());
    format!("{:02}:{:02}:{:02}.{ms:03} UTC", s / 3600 % 24, s / 60 % 60, s % 60)
}

fn render(s: &Status) -> String {
    let slot = lockstep_core::duration::format(s.slot_length);
    // Slots are numbered from the epoch on the wall clock, so that every node's agent switches the same slot at
    // the same moment: number K began K × slot after it.
    let mut out = format!(
        "node {}  agent {}  watchdog {}  policy {}  slot {slot}\nactive row {} of rows 0-{} since {} (slot {} of {slot} \
         since the epoch, the same on every node); that switch took {:.0} us\n",
        s.node,
        s.pid,
        s.watchdog_pid,
        s.policy,
        s.active_row,
        s.rows.saturating_sub(1),
        time_of_day(Duration::from_nanos(s.slot.saturating_mul(s.slot_length.as_nanos() as u64))),
        s.slot,
        s.last_apply_us
    );
    let _ = writeln!(
        out,
        "{:<24} {:>6} {:<12} {:<7} {:<7} {:<7} {:>8} {:>5} CGROUP",
        "JOB", "ROW", "PUS", "FROZEN", "BOOSTED", "ORIGIN", "TOGETHER", "WANTS"
    );
    for j in &s.jobs {
        let _ = writeln!(
            out,
            "{:<24} {:>5}{} {:<12} {:<7} {:<7} {:<7} {:>8} {:>5} {}",
            j.name,
            j.period.map_or_else(|| j.row.to_string(), |p| format!("{}/{p}", j.row)),
            if j.pinned { "*" } else { " " },
            j.pus,
            if j.frozen { "yes" } else { "no" },
            if j.boosted { "yes" } else { "no" },
            j.origin,
            j.coscheduled.map_or_else(|| "-".to_string(), |c| format!("{:.0} %", c * 100.0)),
            match j.cpus_wanted {
                _ if j.starting => "start".to_string(),
                Some(w) => format!("{w:.2}"),
                None => "-".to_string(),
            },
            j.cgroups.first().map(|p| p.display().to_string()).unwrap_or_default()
        );
    }
    for j in &s.jobs {
        if let Some(why) = &j.left {
            let _ = writeln!(out, "({} left to the kernel: {why})", j.name);
        }
    }
    if s.others > 0 {
        let _ = writeln!(out, "({} job(s) of other users not shown)", s.others);
    }
    for g in &s.groups {
        let _ = writeln!(
            out,
            "auto: {} -> {}{}: {}",
            g.members(),
            g.policy,
            if g.trying { " (trying)" } else { "" },
            g.why
        );
    }
    if let Some(d) = &s.dcs {
        let _ = writeln!(
            out,
            "dcs: raise {}  quantum {:.1} ms  events {}  raises {}  arrival to raise p50 {:.0} us  p99 {:.0} us  \
             max {:.0} us  longest raise {:.1} ms",
            d.raise,
            d.quantum_ms,
            d.events,
            d.raises,
            d.latency_p50_us,
            d.latency_p99_us,
            d.latency_max_us,
            d.held_max_us / 1e3
        );
        let _ = writeln!(out, "{:<24} {:>5} {:>10} {:>12} {:>8} RAISED", "JOB", "PORTS", "PACKETS", "BYTES", "RAISES");
        for j in &d.jobs {
            let _ = writeln!(
                out,
                "{:<24} {:>5} {:>10} {:>12} {:>8} {}",
                j.name,
                j.ports,
                j.packets,
                j.bytes,
                j.raises,
                if j.raised { "yes" } else { "no" }
            );
        }
    }
    out
}

/// Runs `lockstep policy set`; says what the agent now runs unless `quiet`.
pub fn policy(cmd: &PolicyCommand, socket: &Path, quiet: bool) -> anyhow::Result<i32> {
    let PolicyCommand::Set { name, slot } = cmd;
    let policy: PolicySpec = name.parse()?;
    let slot = slot.as_deref().map(|t| slot::parse("--slot", t)).transpose()?;
    check(call(socket, &Request::Policy { policy, slot })?)?;
    if !quiet {
        let now = agent_status(socket)?;
        println!("node {}: policy {}, slot {}", now.node, now.policy, lockstep_core::duration::format(now.slot_length));
    }
    Ok(0)
}

/// Runs `lockstep adopt`; says how the agent took the job on unless `quiet`.
pub fn adopt(args: &AdoptArgs, socket: &Path, quiet: bool) -> anyhow::Result<i32> {
    let request = Request::Adopt {
        job: args.job.clone(),
        cgroups: args.cgroup.clone(),
        pids: args
            .pid
            .iter()
            .map(|&pid| {
                ProcessRef::of(pid)
                    .ok_or_else(|| UsageError::new(format!("PID {pid} does not exist (expected running processes)")))
            })
            .collect::<Result<_, _>>()?,
        containers: args.container.clone(),
        row: args.row,
    };
    check(call(socket, &request)?)?;
    if !quiet {
        let now = agent_status(socket)?;
        match now.jobs.iter().find(|j| j.name == JobKey::Named(args.job.clone())) {
            Some(j) => println!(
                "adopted job {} ({}): row {}, PUs {}, {} cgroup(s), first {}",
                j.name,
                j.origin,
                j.row,
                j.pus,
                j.cgroups.len(),
                j.cgroups.first().map_or_else(|| "-".into(), |c| c.display().to_string())
            ),
            // It ended between the two requests.
            None => println!("adopted job {}; it has ended since", args.job),
        }
    }
    Ok(0)
}

/// Runs `lockstep release`; says so unless `quiet`.
pub fn release(args: &ReleaseArgs, socket: &Path, quiet: bool) -> anyhow::Result<i32> {
    check(call(socket, &Request::Release { job: args.job.clone() })?)?;
    if !quiet {
        println!("released job {}: its cgroups are as they were before the agent took it on", args.job);
    }
    Ok(0)
}

/// The agent's status, as `lockstep status` reads it.
fn agent_status(socket: &Path) -> anyhow::Result<Status> {
    let answer = check(call(socket, &Request::Status)?)?;
    answer.status.ok_or_else(|| anyhow::anyhow!("the agent at {} answered without its status", socket.display()))
}
