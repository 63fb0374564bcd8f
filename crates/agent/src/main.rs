//! `lockstepd [--store PATH] [--socket PATH] [--config FILE] [--policy NAME] [--slot DURATION] [--node NAME] [--events
//! LIST] [--sample-interval DURATION|none] [--retention DURATION] [--metrics [ADDR:]PORT] [--slurm-node NAME]
//! [--dcs-quantum DURATION] [--btf FILE]`: the node agent, in the foreground (`lockstep agent` runs it with the same
//! arguments).

use std::path::PathBuf;

use serde::Deserialize;

use clap::{CommandFactory, FromArgMatches, Parser};
use lockstep_core::cosched::{slot, PolicySpec};
use lockstep_core::duration;
use lockstep_core::error::UsageError;
use lockstep_proto::names::check_node_name;
use lockstep_telemetry::events::parse_list;
use lockstepd::{self as agent, Config};
use lockstepd::{DcsSettings, TelemetrySettings as Settings, DEFAULT_EVENTS};

/// lockstepd: the lockstep node agent (co-scheduling, watchdog, control socket, counters), in the foreground.
#[derive(Debug, Parser)]
#[command(
    name = "lockstepd",
    version,
    after_help = "Examples:
  lockstepd --policy gang --slot 200ms
      co-schedule this node's jobs, 200 ms per row (systemd runs it as lockstepd.service)
  lockstepd --config /etc/lockstep/agent.toml --metrics 9464
      settings from a file, and /metrics for Prometheus on 127.0.0.1:9464
  lockstep agent --policy auto
      the same program, started by lockstep"
)]
struct Args {
    /// SQLite store of this node [env: LOCKSTEP_STORE] [default: /var/lib/lockstep/lockstep.db]
    #[arg(long, value_name = "PATH")]
    store: Option<PathBuf>,
    /// Socket to serve [env: LOCKSTEP_SOCKET] [default: /run/lockstep/agent.sock]
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Run as the agent's watchdog over store STORE (the agent starts it so; not for users).
    #[arg(long, value_name = "STORE", hide = true)]
    watchdog: Option<PathBuf>,
    /// Write the manual page lockstepd.8 into DIR and exit (make install runs it).
    #[arg(long, value_name = "DIR", hide = true)]
    man: Option<PathBuf>,
    /// TOML configuration file (keys: socket, store, node, policy, slot, events, sample_interval, retention,
    /// job_history, metrics, slurm_node, dcs_quantum, btf); flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Co-scheduling policy at start: cfs, boost, gang, auto, dcs or dcs+boost (dcs raises as `:weight`, `:rr`,
    /// `:nice`).
    #[arg(long, value_name = "NAME")]
    policy: Option<String>,
    /// Slot length, e.g. 200ms or 2s (10ms to 60s).
    #[arg(long, value_name = "DURATION")]
    slot: Option<String>,
    /// Node name in decisions and status (default: the host name).
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
    /// Events every job is counted with, as `lockstep stat -e` takes them ("" counts nothing).
    #[arg(long, value_name = "EVENTS")]
    events: Option<String>,
    /// How often the counters are read into the store and /metrics, e.g. 1s; `none`: only when a job ends.
    #[arg(long, value_name = "DURATION")]
    sample_interval: Option<String>,
    /// How long counter samples and decisions are kept in the store, e.g. 12h or 7d (default 1d).
    #[arg(long, value_name = "DURATION")]
    retention: Option<String>,
    /// How long ended jobs stay in the store (`lockstep jobs --all`), e.g. 30d (default 30d).
    #[arg(long, value_name = "DURATION")]
    job_history: Option<String>,
    /// Serve /metrics (Prometheus) and the counters API over HTTP on [ADDR:]PORT (ADDR defaults to 127.0.0.1).
    #[arg(long, value_name = "[ADDR:]PORT")]
    metrics: Option<String>,
    /// This node's NodeName in Slurm, whose job cgroups the agent takes on (default: the node name).
    #[arg(long, value_name = "NAME")]
    slurm_node: Option<String>,
    /// How long `dcs` raises a job a message arrived for, e.g. 5ms (1ms to 1s; default 5ms).
    #[arg(long, value_name = "DURATION")]
    dcs_quantum: Option<String>,
    /// BTF file the eBPF programs (`dcs`'s, and the ranks' co-scheduled time) are loaded against (default: the
    /// kernel's, /sys/kernel/btf/vmlinux).
    #[arg(long, value_name = "FILE")]
    btf: Option<PathBuf>,
}

/// The configuration file's contents.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    socket: Option<PathBuf>,
    store: Option<PathBuf>,
    node: Option<String>,
    policy: Option<String>,
    slot: Option<String>,
    events: Option<String>,
    sample_interval: Option<String>,
    retention: Option<String>,
    job_history: Option<String>,
    metrics: Option<String>,
    slurm_node: Option<String>,
    dcs_quantum: Option<String>,
    btf: Option<PathBuf>,
}

/// Sampling interval when none is given.
const DEFAULT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
/// Retention when none is given.
const DEFAULT_RETENTION: std::time::Duration = std::time::Duration::from_hours(24);
/// Job history when none is given.
const DEFAULT_JOB_HISTORY: std::time::Duration = std::time::Duration::from_hours(30 * 24);

/// Longest a retention-like duration may be: ten years.
const LONGEST_KEPT: std::time::Duration = std::time::Duration::from_hours(10 * 365 * 24);

/// A retention-like duration from its flag or file key `what`, or `default`: from a second to ten years.
fn keep_for(what: &str, text: Option<&str>, default: std::time::Duration) -> Result<std::time::Duration, UsageError> {
    text.map_or(Ok(default), |t| duration::within(what, t, std::time::Duration::from_secs(1)..=LONGEST_KEPT))
}

/// `[ADDR:]PORT` → a socket address; a bare port means loopback.
fn metrics_addr(text: &str) -> Result<std::net::SocketAddr, UsageError> {
    use std::net::ToSocketAddrs;
    let bad = |why: String| UsageError::new(format!("bad --metrics {text:?}: {why} (expected PORT or ADDR:PORT)"));
    let full = if text.parse::<u16>().is_ok() { format!("127.0.0.1:{text}") } else { text.to_string() };
    full.to_socket_addrs().map_err(|e| bad(e.to_string()))?.next().ok_or_else(|| bad("no address".into()))
}

/// The telemetry settings from flags and file: events, sample interval, retention, job history.
fn telemetry(
    events: Option<String>,
    interval: Option<String>,
    retention: Option<String>,
    job_history: Option<String>,
) -> anyhow::Result<Settings> {
    let events = events.unwrap_or_else(|| DEFAULT_EVENTS.to_string());
    let groups = if events.trim().is_empty() { Vec::new() } else { parse_list(&events)? };
    let interval = match interval.as_deref() {
        None => Some(DEFAULT_INTERVAL),
        Some("none") => None,
        Some(t) => Some(duration::within("sample interval", t, std::time::Duration::from_millis(10)..=LONGEST_KEPT)?),
    };
    let retention = keep_for("retention", retention.as_deref(), DEFAULT_RETENTION)?;
    let job_history = keep_for("job history", job_history.as_deref(), DEFAULT_JOB_HISTORY)?;
    Ok(Settings { groups, interval, retention, job_history })
}

/// The `dcs` quantum when none is given: the DCS paper raised a receiver for a few milliseconds.
const DEFAULT_QUANTUM: std::time::Duration = std::time::Duration::from_millis(5);

/// The `dcs` settings from flags and file.
fn dcs(quantum: Option<String>, btf: Option<PathBuf>) -> Result<DcsSettings, UsageError> {
    if let Some(path) = &btf {
        // Checked now, whatever the policy: a typo must not wait for the first `policy set dcs` to show.
        lockstep_core::error::open_input(path, "BTF file", "the kernel's BTF, e.g. /sys/kernel/btf/vmlinux")?;
    }
    let quantum = match quantum {
        None => DEFAULT_QUANTUM,
        Some(t) => duration::within(
            "dcs quantum",
            &t,
            std::time::Duration::from_millis(1)..=std::time::Duration::from_secs(1),
        )?,
    };
    Ok(DcsSettings { quantum, btf })
}

/// Runs the agent with the flags and the configuration file; returns the exit status.
fn exec(args: &Args) -> anyhow::Result<i32> {
    let (socket, store) = (args.socket.as_deref(), args.store.as_deref());
    let file: File = match &args.config {
        Some(path) => {
            let text = lockstep_core::error::read_input(path, "config", "a TOML file, see lockstepd(8)")?;
            toml::from_str(&text).map_err(|e| {
                UsageError::new(format!(
                    "bad config {}: {}",
                    path.display(),
                    lockstep_core::error::toml_message(&text, &e)
                ))
            })?
        }
        None => File::default(),
    };
    let slot_text = args.slot.clone().or(file.slot);
    let node = args.node.clone().or(file.node).unwrap_or_else(hostname);
    check_node_name("node name", &node)?;
    let slurm_node = args.slurm_node.clone().or(file.slurm_node).unwrap_or_else(|| node.clone());
    check_node_name("Slurm node name", &slurm_node)?;
    let config = Config {
        socket: lockstep_proto::client::resolve_socket(socket.or(file.socket.as_deref())),
        store: lockstep_store::resolve_path(store.or(file.store.as_deref())),
        slurm_node,
        node,
        policy: args.policy.clone().or(file.policy).as_deref().map(str::parse).transpose()?.unwrap_or(PolicySpec::Cfs),
        slot: slot_text.as_deref().map(|t| slot::parse("slot", t)).transpose()?.unwrap_or(slot::DEFAULT),
        // Event names are resolved now, while the process has one thread (tracepoints may need a private
        // tracefs mount).
        telemetry: telemetry(
            args.events.clone().or(file.events),
            args.sample_interval.clone().or(file.sample_interval),
            args.retention.clone().or(file.retention),
            args.job_history.clone().or(file.job_history),
        )?,
        metrics: args.metrics.clone().or(file.metrics).as_deref().map(metrics_addr).transpose()?,
        dcs: dcs(args.dcs_quantum.clone().or(file.dcs_quantum), args.btf.clone().or(file.btf))?,
    };
    agent::run(config)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map_or_else(|_| "localhost".into(), |h| h.trim().to_string())
}

/// Writes lockstepd.8 into `dir`.
fn man(dir: &std::path::Path) -> anyhow::Result<i32> {
    let related =
        ["lockstep(1)", "lockstep-status(1)", "lockstep-policy(1)", "systemd.exec(5)", "slurm.conf(5)", "cgroups(7)"];
    lockstep_version::man::write_pages(Args::command(), "8", dir, &related)
        .map_err(|e| anyhow::anyhow!("cannot write lockstepd.8 into {}: {e}", dir.display()))?;
    Ok(0)
}

/// The `argv[0]` under which `lockstep agent` starts this program: usage and errors then say `lockstep agent`.
const AS_SUBCOMMAND: &str = "lockstep agent";

fn main() {
    let program = match std::env::args_os().next() {
        Some(arg0) if arg0 == AS_SUBCOMMAND => AS_SUBCOMMAND,
        _ => "lockstepd",
    };
    let cmd = lockstep_version::on_request(Args::command()).bin_name(program);
    let status = match cmd.try_get_matches().and_then(|m| Args::from_arg_matches(&m)) {
        Ok(Args { watchdog: Some(store), .. }) => lockstepd::watchdog_main(&store),
        Ok(Args { man: Some(dir), .. }) => lockstep_core::error::exit_status(program, man(&dir)),
        Ok(args) => lockstep_core::error::exit_status(program, exec(&args)),
        Err(e) => lockstep_core::error::clap_exit(program, &e.render().to_string(), e.use_stderr()),
    };
    std::process::exit(status);
}
