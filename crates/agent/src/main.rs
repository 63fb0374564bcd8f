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
use lockstep_core::ident::NodeName;
use lockstep_telemetry::events::parse_list;
use lockstep_version::man::Section;
use lockstepd::{self as agent, Config};
use lockstepd::{DcsSettings, TelemetrySettings as Settings, DEFAULT_EVENTS};

/// lockstepd: the lockstep node agent (co-scheduling, watchdog, control socket, counters), in the foreground.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "lockstepd",
    version,
    after_help = "Examples:
  lockstepd --policy gang --slot 200ms
      co-schedule this node's jobs, 200 ms per row (systemd runs it as lockstep-agent.service)
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
    /// Make the agent's parent cgroups (lockstep/ in each hierarchy it uses) where missing, and exit. A
    /// hierarchy's root takes CAP_DAC_OVERRIDE to write, which the agent runs without under its systemd unit:
    /// the unit runs this first, as root (ExecStartPre=+).
    #[arg(long)]
    cgroup_parents: bool,
    /// TOML configuration file (keys: socket, store, node, policy, slot, events, sample_interval, retention,
    /// job_history, metrics, metrics_scraper (a list), slurm_node, dcs_quantum, btf); flags override it.
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
    /// A scraper of the metrics door, by user name or UID (a process of this host) or IP address (another host),
    /// repeatable: its connections count apart from every other caller's and are not rate-limited, so no other
    /// caller can take its room (root's scrapes always are).
    #[arg(long, value_name = "USER|UID|IP")]
    metrics_scraper: Vec<String>,
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
    metrics_scraper: Option<Vec<String>>,
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
    let addr =
        full.to_socket_addrs().map_err(|e| bad(e.to_string()))?.next().ok_or_else(|| bad("no address".into()))?;
    if addr.port() == 0 {
        // Port 0 would bind wherever the kernel chose, where no scraper or `lockstep stat --nodes` looks.
        return Err(bad("port 0 would be one the kernel picks, which no scraper knows".into()));
    }
    Ok(addr)
}

/// The metrics door's named scrapers, each `USER`, `UID` or `IP`: an address names a host, a number or a name a
/// user of this host (looked up now).
fn scrapers(named: &[String]) -> Result<agent::Scrapers, UsageError> {
    let mut scrapers = agent::Scrapers::default();
    for text in named {
        if let Ok(ip) = text.parse::<std::net::IpAddr>() {
            scrapers.ips.push(ip);
        } else if let Ok(uid) = text.parse::<u32>() {
            scrapers.uids.push(uid);
        } else {
            let user = nix::unistd::User::from_name(text).ok().flatten().ok_or_else(|| {
                UsageError::new(format!(
                    "bad --metrics-scraper {text:?}: no user of that name on this host (expected a user name, a \
                     UID or an IP address)"
                ))
            })?;
            scrapers.uids.push(user.uid.as_raw());
        }
    }
    Ok(scrapers)
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
        check_btf(path)?;
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

/// What a `--btf` file must be.
const BTF_EXPECTED: &str = "the kernel's BTF, e.g. /sys/kernel/btf/vmlinux";

/// Refuses a `--btf` file that is not BTF: unreadable, not a regular file, or not parsed by libbpf (raw BTF, as
/// /sys/kernel/btf/vmlinux is, or an ELF file with a .BTF section).
fn check_btf(path: &std::path::Path) -> Result<(), UsageError> {
    use std::io::Read;
    let mut head = [0u8; 4];
    let mut file = lockstep_core::error::open_input(path, "BTF file", BTF_EXPECTED)?;
    let bad = |why: &str| lockstep_core::error::input_error(path, "BTF file", BTF_EXPECTED, why);
    file.read_exact(&mut head).map_err(|_| bad("is too short to be BTF"))?;
    // Raw BTF begins with its magic 0xeB9F in the machine's byte order; libbpf also reads the .BTF of an ELF file.
    let raw = u16::from_ne_bytes([head[0], head[1]]) == 0xEB9F;
    if !raw && head != *b"\x7fELF" {
        return Err(bad("is not BTF: neither the BTF magic 0xeB9F nor an ELF header"));
    }
    // libbpf's own messages would go to stderr beside ours; its verdict is enough.
    libbpf_rs::set_print(None);
    libbpf_rs::btf::Btf::from_path(path).map_err(|_| {
        bad(if raw {
            "libbpf cannot parse its type information (truncated or corrupt)"
        } else {
            "is an ELF file in which libbpf finds no valid .BTF section"
        })
    })?;
    Ok(())
}

/// Runs the agent with the flags and the configuration file; returns the exit status.
fn exec(args: &Args) -> anyhow::Result<i32> {
    // Before anything is read or made: an agent that is not root could change no job.
    agent::check_privileges()?;
    let first = config(args)?;
    let again = args.clone();
    agent::run(first, Box::new(move || config(&again)))
}

/// The agent's configuration: the flags `args`, over the configuration file they name as it is now.
fn config(args: &Args) -> anyhow::Result<Config> {
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
    let node = NodeName::new("node name", args.node.clone().or(file.node).unwrap_or_else(hostname))?;
    let slurm_node = match args.slurm_node.clone().or(file.slurm_node) {
        Some(name) => NodeName::new("Slurm node name", name)?,
        None => node.clone(),
    };
    let config = Config {
        socket: lockstep_proto::client::resolve_socket(socket.or(file.socket.as_deref())),
        store: lockstep_store::resolve_path(store.or(file.store.as_deref())),
        slurm_node,
        node,
        policy: args.policy.clone().or(file.policy).as_deref().map(str::parse).transpose()?.unwrap_or(PolicySpec::Cfs),
        slot: slot_text.as_deref().map(|t| slot::parse("slot", t)).transpose()?.unwrap_or(slot::DEFAULT),
        // Event names are resolved now, at the start while the process has one thread (tracepoints may need a
        // private tracefs mount, which is then the whole agent's); at a reload, only to tell whether they changed
        // (a change takes a restart).
        telemetry: telemetry(
            args.events.clone().or(file.events),
            args.sample_interval.clone().or(file.sample_interval),
            args.retention.clone().or(file.retention),
            args.job_history.clone().or(file.job_history),
        )?,
        metrics: args.metrics.clone().or(file.metrics).as_deref().map(metrics_addr).transpose()?,
        scrapers: scrapers(if args.metrics_scraper.is_empty() {
            file.metrics_scraper.as_deref().unwrap_or_default()
        } else {
            &args.metrics_scraper
        })?,
        dcs: dcs(args.dcs_quantum.clone().or(file.dcs_quantum), args.btf.clone().or(file.btf))?,
    };
    Ok(config)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map_or_else(|_| "localhost".into(), |h| h.trim().to_string())
}

/// The sections of lockstepd.8 that clap does not write.
fn man_sections(_: &str) -> Vec<Section> {
    vec![
        Section::new(
            "DESCRIPTION",
            "lockstepd is the node agent of lockstep(1). It runs in the foreground, as root (it refuses to start \
             otherwise: every job's cgroup files are root's), usually as the systemd unit lockstep-agent.service \
             (deploy/systemd/), with the capabilities docs/security.md lists. It takes on the jobs of the node \
             (those lockstep run starts, those lockstep adopt names, and Slurm's, from their cgroups), places them \
             in rows of a co-scheduling matrix and, at every wall-clock slot boundary (the same instant on every \
             node), applies the policy: cfs, boost, gang, auto, dcs or dcs+boost. It serves lockstep(1) on a Unix \
             socket (status to every user, changes to root) and, with --metrics, Prometheus metrics over HTTP. It \
             counts every job's events into the store.\n\n\
             Every change to a cgroup is journaled in the store before it is made, and undone when the job ends or \
             is released, when the agent stops, and, should the agent die, by its watchdog (a second process, \
             lockstepd --watchdog) which thaws and restores every job. A restarted agent takes on the jobs of the \
             store again.\n\n\
             Everything that can refuse the start (not root, a bad flag or configuration key, a BTF file that is not \
             BTF, a socket another agent answers on, a metrics address already in use, a store another user owns or \
             may read or write) is checked before the store is made; a socket bound before a refusal is removed. \
             A store directory the agent made stays.",
        ),
        Section::new(
            "EXIT STATUS",
            "0\tstopped by SIGTERM or SIGINT, every job restored.\n\
             1\ta failure of the system: the kernel refused what the agent needs (a cgroup hierarchy, its watchdog, \
             the store), or a job could not be restored at stop (the log names it; the watchdog tries again).\n\
             2\tbad input, refused before the store was made: not root, a bad flag, configuration key or file, a \
             socket another agent answers on, a metrics address already in use, a store not private to root.\n\n\
             Every error is one line on stderr, lockstepd: WHAT: WHY (HINT) (lockstep: agent: ... when started by \
             lockstep agent); the exit status tells the two kinds apart.",
        ),
        Section::new(
            "ENVIRONMENT",
            "LOCKSTEP_STORE\tthe store, when neither --store nor the configuration file's store gives one.\n\
             LOCKSTEP_SOCKET\tthe socket, when neither --socket nor the configuration file's socket gives one.\n\
             LOCKSTEP_LOG\twhich log lines are written, in env_logger's filter syntax, in place of the default as \
             RUST_LOG does (warn: warnings and errors only; warn,lockstepd::daemon=info); unset or empty, the \
             agent's from info up, other crates' from warn up.\n\
             JOURNAL_STREAM\tset by systemd: log lines then carry their syslog priority (3 error, 4 warning, 6 info, \
             7 debug) instead of the time and level.",
        ),
        Section::new(
            "FILES",
            "/etc/lockstep/agent.toml\tthe configuration the systemd unit gives with --config (keys as the long \
             flags, with _ for -).\n\
             /var/lib/lockstep/lockstep.db\tthe store (SQLite, mode 0600): jobs, journal, decisions, samples.\n\
             /run/lockstep/agent.sock\tthe control socket (mode 0666; each request checked by SO_PEERCRED).\n\
             /sys/kernel/btf/vmlinux\tthe kernel's BTF, which the eBPF programs load against unless --btf names \
             another.\n\
             /sys/fs/cgroup/*/lockstep/\tthe cgroups of the jobs lockstep makes, in every hierarchy.",
        ),
        Section::new(
            "SIGNALS",
            "SIGTERM, SIGINT\tstop: every job is thawed and its weights and threads restored, the socket removed, \
             exit 0.\n\
             SIGHUP\treload: the configuration file is read again (under the flags given at the start, which still \
             win); a new policy or slot length takes effect at once, a change of any other setting is said in \
             the log to take a restart, and a file that does not read is said and the running configuration \
             kept (systemctl reload lockstep-agent).\n\
             SIGKILL\tthe agent cannot restore anything; its watchdog does, when the agent's pipe to it closes.\n\
             SIGPIPE\tignored: a client or scraper that hangs up ends only its own connection.",
        ),
    ]
}

/// Writes lockstepd.8 into `dir`.
fn man(dir: &std::path::Path) -> anyhow::Result<i32> {
    let related = [
        "lockstep(1)",
        "lockstep-status(1)",
        "lockstep-policy(1)",
        "systemctl(1)",
        "systemd.exec(5)",
        "slurm.conf(5)",
        "cgroups(7)",
    ];
    lockstep_version::man::write_pages(Args::command(), "8", dir, &related, &man_sections).map_err(|e| {
        let say = format!("cannot write lockstepd.8 into {}: {}", dir.display(), lockstep_core::error::io_reason(&e));
        if e.kind() == std::io::ErrorKind::NotADirectory {
            anyhow::Error::from(UsageError::new(format!(
                "{say} (expected a directory, e.g. /usr/local/share/man/man8)"
            )))
        } else {
            anyhow::anyhow!(say)
        }
    })?;
    Ok(0)
}

/// The `argv[0]` under which `lockstep agent` starts this program: usage then says `lockstep agent`.
const AS_SUBCOMMAND: &str = "lockstep agent";

/// `--cgroup-parents`: makes the parent cgroups that are missing, one line for each; exit status 0.
fn cgroup_parents() -> anyhow::Result<i32> {
    for made in lockstep_cgroup::detect()?.make_parents()? {
        println!("made cgroup {}", made.display());
    }
    Ok(0)
}

fn main() {
    // Errors begin as the command's do: `lockstep: agent: …` when started as `lockstep agent`.
    let (bin, program) = match std::env::args_os().next() {
        Some(arg0) if arg0 == AS_SUBCOMMAND => (AS_SUBCOMMAND, "lockstep: agent"),
        _ => ("lockstepd", "lockstepd"),
    };
    let cmd = lockstep_version::on_request(Args::command()).bin_name(bin);
    let status = match cmd.try_get_matches().and_then(|m| Args::from_arg_matches(&m)) {
        Ok(Args { watchdog: Some(store), .. }) => lockstepd::watchdog_main(&store),
        Ok(Args { man: Some(dir), .. }) => lockstep_core::error::exit_status(program, man(&dir)),
        Ok(Args { cgroup_parents: true, .. }) => lockstep_core::error::exit_status(program, cgroup_parents()),
        // The agent's last word goes through its log's queue: a stderr nobody drains (a stalled journald) must not
        // keep it from exiting.
        Ok(args) => lockstep_core::error::exit_status_to(program, exec(&args), lockstepd::say_last),
        Err(e) => lockstep_core::error::clap_exit(
            program,
            &e.render().to_string(),
            e.use_stderr(),
            e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand,
        ),
    };
    // The log's last lines (the agent's "stopped", the watchdog's restores) reach stderr before the exit.
    lockstepd::flush_log();
    std::process::exit(status);
}
