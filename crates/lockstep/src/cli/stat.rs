//! `lockstep stat [-e EVENTS] [-I MS] [-x SEP] [--json] (-p PID[,PID…] | --job NAME [--nodes HOST:PORT,…] |
//! [-r N] -- CMD [ARGS…])`: a subset of `perf stat` with its flags and output (on stderr, as perf prints it).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::{signal, SigHandler, Signal};

use std::path::Path;

use lockstep_cgroup::procs_below;
use lockstep_core::error::{is_usage, one_line, UsageError};
use lockstep_core::ident::JobKey;
use lockstep_jobs::spawn::{self, Spawn};
use lockstep_telemetry::counters::{Counters, Reading};
use lockstep_telemetry::events::{parse_event, parse_list, EventSpec, DEFAULT};
use lockstep_telemetry::format::Style;
use lockstep_telemetry::remote;
use lockstep_telemetry::stat;

/// Arguments of `lockstep stat`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Events, comma-separated; `{a,b}` for a group (default: perf stat's default set).
    #[arg(short = 'e', long = "event", value_name = "EVENTS")]
    events: Vec<String>,
    /// Count existing processes (all their threads, and children they start).
    #[arg(short = 'p', long = "pid", value_name = "PID[,PID...]")]
    pid: Option<String>,
    /// Count every process of a running job of this node (`lockstep run`, or adopted by the agent) and the
    /// children they start, until it ends.
    #[arg(long, value_name = "NAME")]
    job: Option<JobKey>,
    /// With --job: sum the job's counts from the agents of these nodes (their --metrics addresses), which have
    /// counted it since it started; follows the job until it ends everywhere. A node that does not answer is said,
    /// its last counts stand in, and the exit status is 1. For a Slurm job (`--job slurm-ID`) the nodes come from
    /// `squeue` when this is not given.
    #[arg(long, value_name = "HOST:PORT,...", requires = "job")]
    nodes: Option<String>,
    /// The agents' metrics port, for the nodes of a Slurm job.
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_METRICS_PORT, requires = "job",
          value_parser = clap::value_parser!(u16).range(1..))]
    metrics_port: u16,
    /// Print counts every MS milliseconds (10 to 3600000).
    #[arg(short = 'I', long = "interval-print", value_name = "MS", value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    interval: Option<u64>,
    /// CSV output with this field separator (1 to 8 printable characters, e.g. `,` or `;`).
    #[arg(short = 'x', long = "field-separator", value_name = "SEP", value_parser = separator)]
    separator: Option<String>,
    /// JSON lines, one per event (not with -x: one output format at a time).
    #[arg(long, conflicts_with = "separator")]
    json: bool,
    /// Run the command N times and print the mean of each count with its noise (the standard error of the
    /// mean, relative to it).
    #[arg(short = 'r', long = "repeat", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    repeat: u32,
    /// The command to run and count (after `--`, or from the first word that is not an option on, as `perf
    /// stat` takes it).
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    command: Vec<String>,
}

/// A `-x` separator: what perf takes, a short string that cannot run fields together or break lines.
fn separator(text: &str) -> Result<String, String> {
    if text.is_empty() || text.chars().count() > 8 || text.chars().any(char::is_control) {
        return Err("expected 1 to 8 printable characters, e.g. , or ;".into());
    }
    Ok(text.to_string())
}

/// Metrics port of the agents of a Slurm cluster when none is given (deploy/slurm/ starts them on it).
const DEFAULT_METRICS_PORT: u16 = 9464;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    // Relaxed: a flag polled by the counting loop; no other memory is published through it.
    STOP.store(true, Ordering::Relaxed);
}

/// Runs `lockstep stat`; returns the command's exit status (0 for `-p` and `--job`).
pub fn exec(args: &Args, store: &Path, socket: &Path) -> anyhow::Result<i32> {
    let style = Style { csv: args.separator.clone(), json: args.json };
    let nodes = match (&args.job, &args.nodes) {
        (Some(job), None) => job.slurm().map(|id| slurm_nodes(id, args.metrics_port)).transpose()?,
        (_, nodes) => nodes.clone(),
    };
    if let (Some(job), Some(nodes)) = (&args.job, &nodes) {
        if args.pid.is_some() || !args.command.is_empty() {
            return Err(UsageError::new("--nodes counts a job: give --job NAME, not -p or a command").into());
        }
        let groups = if args.events.is_empty() { None } else { Some(parse_list(&args.events.join(","))?) };
        return count_nodes(groups, job, nodes, args.interval, &style);
    }
    if args.repeat > 1 && (args.command.is_empty() || args.interval.is_some()) {
        return Err(UsageError::new("-r N repeats a command: give -- CMD [ARGS...], without -I").into());
    }
    let list = if args.events.is_empty() { DEFAULT.to_string() } else { args.events.join(",") };
    let groups = parse_list(&list)?;
    match (&args.pid, &args.job, args.command.is_empty()) {
        (Some(list), None, true) => {
            let mut tids = Vec::new();
            let pids = parse_pids(list)?;
            for &pid in &pids {
                tids.extend(
                    lockstep_cgroup::procfs::threads(pid)
                        .ok_or_else(|| UsageError::new(format!("PID {pid} does not exist")))?,
                );
            }
            count_pids(&groups, &pids, &tids, args.interval, &style, format!("process id '{list}'"))
        }
        (None, Some(job), true) => {
            let pids = job_pids(store, socket, job)?;
            // A process of the job may end between the listing and here: the others are counted.
            let tids: Vec<i32> = pids.iter().filter_map(|&p| lockstep_cgroup::procfs::threads(p)).flatten().collect();
            if tids.is_empty() {
                return Err(UsageError::new(format!("no running job {job:?}: its processes ended")).into());
            }
            let status = count_pids(&groups, &pids, &tids, args.interval, &style, format!("job '{job}'"))?;
            if args.interval.is_none() && style.csv.is_none() && !style.json {
                print_coscheduled(store, job);
            }
            Ok(status)
        }
        (None, None, false) => repeat_command(&groups, &args.command, args.repeat, args.interval, &style),
        _ => Err(UsageError::new("give exactly one target: -p PID[,PID...], --job NAME or -- CMD [ARGS...]").into()),
    }
}

/// The agents (`ADDR:PORT,…`) of the nodes Slurm job `id` runs on.
fn slurm_nodes(id: lockstep_slurm::SlurmJobId, port: u16) -> anyhow::Result<String> {
    let job = lockstep_slurm::show_job(id)
        .map_err(|e| {
            anyhow::Error::new(e)
                .context(format!("cannot ask Slurm for the nodes of job {id} (or name them: --nodes HOST:PORT,...)"))
        })?
        .ok_or_else(|| UsageError::new(format!("Slurm does not know job {id} (see squeue)")))?;
    if job.nodes.is_empty() {
        return Err(UsageError::new(format!("Slurm job {id} has no nodes ({})", job.state)).into());
    }
    let addrs: Vec<String> = job
        .nodes
        .iter()
        .map(|n| lockstep_slurm::node_addr(n).map(|a| format!("{a}:{port}")))
        .collect::<lockstep_slurm::Result<_>>()?;
    Ok(addrs.join(","))
}

/// The processes of a running job of this node: a `lockstep run` job of the store, else a job the local agent
/// manages (its cgroups and the cgroups below them).
fn job_pids(store: &Path, socket: &Path, job: &JobKey) -> anyhow::Result<Vec<i32>> {
    // No store at the path is no `lockstep run` job (the agent may still manage one); a file that is not a
    // lockstep store is refused. A Slurm job is never one of `lockstep run`'s.
    let row = match job {
        JobKey::Named(name) if std::fs::symlink_metadata(store).is_ok() => {
            let name = lockstep_store::RowName::Job(name.clone());
            lockstep_store::Store::open_existing(store)?.jobs(false)?.into_iter().find(|j| j.name == name)
        }
        _ => None,
    };
    let cgroup = row.and_then(|j| j.cgroup).map(lockstep_cgroup::JobCgroup::from);
    let mut pids = cgroup.map(|cg| cg.pids().unwrap_or_default()).unwrap_or_default();
    if pids.is_empty() {
        let status = lockstep_proto::client::call_if_running(socket, &lockstep_proto::protocol::Request::Status);
        if let Some(Ok(lockstep_proto::protocol::Response { status: Some(status), .. })) = status {
            let managed = status.jobs.into_iter().find(|j| j.name == *job);
            pids = managed
                .map_or_else(Vec::new, |j| j.cgroups.iter().flat_map(|d| procs_below(d).unwrap_or_default()).collect());
        }
    }
    if pids.is_empty() {
        return Err(
            UsageError::new(format!("no running job {job:?} with processes on this node (see lockstep jobs)")).into()
        );
    }
    Ok(pids)
}

/// After `--job`'s counts: how its ranks ran, as the agent last sampled it into the store (nothing when the agent
/// did not measure it): the share of its time some rank ran, the share of that in which all its ranks ran at once,
/// and the share of its time a rank waited for a CPU.
fn print_coscheduled(store: &Path, job: &JobKey) {
    use lockstep_core::sample::{latest, COSCHEDULED, RANK_RUNNING, RANK_WAITING};
    let Some(samples) = lockstep_store::Store::open_existing(store).ok().and_then(|s| s.samples(job).ok()) else {
        return;
    };
    let lines = [
        (RANK_RUNNING, "running: some rank on a CPU (share of its time, agent)"),
        (COSCHEDULED, "co-scheduled: all its ranks on a CPU at once (share of the time one was, agent)"),
        (RANK_WAITING, "a rank runnable, waiting for a CPU (share of its time, agent)"),
    ];
    let shares: Vec<_> =
        lines.iter().filter_map(|(event, what)| Some((latest(&samples, event)?.share()?, what))).collect();
    for (share, what) in &shares {
        eprintln!(" {share:>17.3}      {what}");
    }
    if !shares.is_empty() {
        eprintln!();
    }
}

/// The PIDs of a `-p` list (`123,456`).
fn parse_pids(list: &str) -> anyhow::Result<Vec<i32>> {
    list.split(',')
        .map(|p| {
            p.trim()
                .parse()
                .map_err(|_| UsageError::new(format!("bad PID {p:?} in -p (expected e.g. -p 123,456)")).into())
        })
        .collect()
}

/// Counts threads `tids` of processes `pids` until every one of `pids` has ended (or Ctrl-C).
fn count_pids(
    groups: &[Vec<EventSpec>],
    pids: &[i32],
    tids: &[i32],
    interval: Option<u64>,
    style: &Style,
    target: String,
) -> anyhow::Result<i32> {
    let mut counters = Counters::open(groups, tids, false)?;
    stop_on_signals()?;
    let alive = || pids.iter().any(|p| Path::new(&format!("/proc/{p}")).exists());
    let events = counters.events.clone();
    let done = |wait| {
        std::thread::sleep(wait);
        !alive() || STOP.load(Ordering::Relaxed)
    };
    let run = stat::count(&events, || counters.read(), interval, style, done)?;
    if interval.is_none() {
        stat::summary(&events, &[run], style, &target, None);
    }
    Ok(0)
}

/// Counts `command` `repeat` times (stopping early on Ctrl-C) and prints the summary; returns the exit status
/// of the last run.
fn repeat_command(
    groups: &[Vec<EventSpec>],
    command: &[String],
    repeat: u32,
    interval: Option<u64>,
    style: &Style,
) -> anyhow::Result<i32> {
    let mut runs = Vec::new();
    let mut events = Vec::new();
    let mut status = 0;
    let mut times = None;
    for _ in 0..repeat {
        let counted = count_command(groups, command, interval, style)?;
        events = counted.events;
        runs.push(counted.run);
        status = counted.status;
        times = Some(counted.times);
        if counted.interrupted {
            break;
        }
    }
    if interval.is_none() {
        stat::summary(&events, &runs, style, &command.join(" "), times);
    }
    Ok(status)
}

/// One counted run of a command.
struct Counted {
    events: Vec<EventSpec>,
    run: stat::Run,
    /// Its exit status (128 + the signal's number when a signal ended it).
    status: i32,
    times: stat::CpuTimes,
    /// Whether Ctrl-C ended it (no more repeats).
    interrupted: bool,
}

fn count_command(
    groups: &[Vec<EventSpec>],
    command: &[String],
    interval: Option<u64>,
    style: &Style,
) -> anyhow::Result<Counted> {
    let program = lockstep_jobs::launch::resolve_command(&command[0])?;
    // Like perf: Ctrl-C goes to the command, which ends the count (and the repeats).
    // SAFETY: ignoring a signal installs no handler code.
    unsafe { signal(Signal::SIGINT, SigHandler::SigIgn) }?;
    // The child waits at its gate until the counters are attached; they start at exec (enable_on_exec).
    let spawn = Spawn { program: &program, argv: command, join: &[], reset: &[Signal::SIGINT] };
    let started = spawn.start(true)?;
    let child = started.pid();
    // A failure here drops the child at its gate: it ends without running.
    let mut counters = Counters::open(groups, &[child], true)?;
    if let Err(e) = started.go() {
        return Err(UsageError::new(format!("cannot start {}: {e}", command[0])).into());
    }
    let mut ended = None;
    let events = counters.events.clone();
    // SAFETY: pidfd_open takes a PID and flags and returns a new descriptor or -1; the child is not yet reaped.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, child, 0) } as i32;
    // SAFETY: a descriptor pidfd_open just returned, owned from here on.
    let pidfd = (pidfd >= 0).then(|| unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd) });
    let done = |wait: Duration| {
        if ended.is_none() {
            // The pidfd turns readable when the child exits; without one (kernels before 5.3), sleep.
            match &pidfd {
                Some(fd) => {
                    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                    // SAFETY: one valid pollfd, for at most `wait`.
                    unsafe { libc::poll(&raw mut p, 1, wait.as_millis() as i32) };
                }
                None => std::thread::sleep(wait),
            }
            ended = spawn::wait(child, libc::WNOHANG);
        }
        ended.is_some()
    };
    let run = stat::count(&events, || counters.read(), interval, style, done)?;
    let (wait_status, usage) = ended.unwrap_or_default();
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let status = spawn::exit_code(wait_status);
    let interrupted = libc::WIFSIGNALED(wait_status) && libc::WTERMSIG(wait_status) == libc::SIGINT;
    Ok(Counted {
        events,
        run,
        status,
        times: stat::CpuTimes { user: seconds(usage.ru_utime), sys: seconds(usage.ru_stime) },
        interrupted,
    })
}

/// Catches SIGINT and SIGTERM: they end the count (the summary is still printed).
fn stop_on_signals() -> anyhow::Result<()> {
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { signal(sig, SigHandler::Handler(on_stop)) }?;
    }
    Ok(())
}

/// `--job NAME --nodes …`: follows the job on every node's agent ([`remote::Follow`]: no node is waited for),
/// prints the sums; ends when no node counts the job any more (its final counts are printed) or on Ctrl-C. A node
/// named badly is bad input (exit 2), and so is a job no node that answered has counted; the one node given, or
/// every node, failing at first is the error. Otherwise a node that does not answer, or answers badly, is said on
/// stderr when it starts to fail and when it answers again; its last counts (none, if it never answered) stand in,
/// so that the sums never go back, and after [`remote::GIVE_UP`] it no longer keeps `stat` waiting. Nodes that
/// still fail at the end are named (in the summary, and on stderr), and the exit status is 1.
fn count_nodes(
    groups: Option<Vec<Vec<EventSpec>>>,
    job: &JobKey,
    nodes: &str,
    interval: Option<u64>,
    style: &Style,
) -> anyhow::Result<i32> {
    let nodes: Vec<&str> = nodes.split(',').map(str::trim).collect();
    if nodes.iter().any(|n| n.is_empty()) {
        return Err(UsageError::new(format!("malformed --nodes list {nodes:?} (expected HOST:PORT,HOST:PORT)")).into());
    }
    let (follow, first) = remote::Follow::start(&nodes, job);
    let errors: Vec<&lockstep_telemetry::Error> = first.iter().filter_map(|a| a.as_ref().err()).collect();
    if let Some(bad) = errors.iter().find(|e| is_usage(**e)) {
        return Err(UsageError::new(one_line(*bad)).into());
    }
    if errors.len() == nodes.len() {
        let more = errors.len() - 1;
        let others =
            if more > 0 { format!(" (and {more} other node(s) did not answer either)") } else { String::new() };
        anyhow::bail!("{}{others}", one_line(errors[0]));
    }
    for e in &errors {
        eprintln!("lockstep: {} (left out)", one_line(*e));
    }
    if follow.counts().is_empty() {
        let failing = follow.failing();
        if failing.is_empty() {
            return Err(UsageError::new(format!("no agent of {} has counted job {job:?}", nodes.join(","))).into());
        }
        let names: Vec<&str> = failing.iter().map(|(n, _)| n.as_str()).collect();
        anyhow::bail!("no agent that answered has counted job {job:?}, and {} did not answer", names.join(","));
    }
    let events: Vec<EventSpec> = match groups {
        Some(g) => g.into_iter().flatten().collect(),
        None => remote::sum(&follow.counts()).iter().map(|(name, _)| parse_event(name)).collect::<Result<_, _>>()?,
    };
    stop_on_signals()?;
    let read = || -> anyhow::Result<Vec<Option<Reading>>> {
        let sums = remote::sum(&follow.counts());
        Ok(events.iter().map(|e| sums.iter().find(|(n, _)| *n == e.name).map(|(_, r)| *r)).collect())
    };
    let done = |wait| {
        std::thread::sleep(wait);
        STOP.load(Ordering::Relaxed) || follow.done()
    };
    let run = stat::count(&events, read, interval, style, done)?;
    let failing: Vec<String> = follow.failing().into_iter().map(|(n, _)| n).collect();
    let missing = if failing.is_empty() { String::new() } else { format!(" ({} missing or stale)", failing.join(",")) };
    let target = format!("job '{job}' on {} node(s){missing}", nodes.len());
    if interval.is_none() {
        stat::summary(&events, &[run], style, &target, None);
    }
    if failing.is_empty() {
        return Ok(0);
    }
    eprintln!("lockstep: job {job}'s counts leave out what {} counted while not answering", failing.join(","));
    Ok(1)
}
