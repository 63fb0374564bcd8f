//! Command-line interface: argument parsing and one module per subcommand.

mod control;
mod experiment;
mod jobs;
mod pages;
mod place;
mod run;
mod slurm;
mod stat;
mod timeline;
mod topo;

use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// lockstep: place, co-schedule and measure parallel jobs that share HPC nodes.
#[derive(Debug, Parser)]
#[command(name = "lockstep", version, about, propagate_version = true, after_help = TOP_EXAMPLES)]
pub struct Cli {
    /// SQLite store of this node [env: LOCKSTEP_STORE] [default: /var/lib/lockstep/lockstep.db]
    #[arg(long, global = true, value_name = "PATH", help_heading = "Global options")]
    store: Option<PathBuf>,
    /// Agent socket [env: LOCKSTEP_SOCKET] [default: /run/lockstep/agent.sock]
    #[arg(long, global = true, value_name = "PATH", help_heading = "Global options")]
    socket: Option<PathBuf>,
    /// Say nothing on success (`policy set`, `adopt`, `release` say what they did otherwise).
    #[arg(short, long, global = true, help_heading = "Global options")]
    quiet: bool,

    #[command(subcommand)]
    command: Command,
}

/// A first session, in order.
const TOP_EXAMPLES: &str = "Examples:
  lockstep topo
      this machine's packages, NUMA nodes, cores and core kinds
  lockstep run --job lu --place numa-local -- mpirun -n 4 ./lu
      run an MPI job in its own cgroup, on one NUMA node's cores
  lockstep agent --policy gang --slot 200ms
      the node agent, in the foreground, co-scheduling the jobs of this node
  lockstep status
      what the agent runs now: each job's row, PUs, frozen or boosted
  lockstep stat -e task-clock,context-switches sleep 1
      count a command's events, as perf stat does
  lockstep experiment run experiments/mpl-quick.toml
      a short co-scheduling experiment, its table and HTML report";

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the machine's topology: packages, NUMA nodes, cores, PUs and core kinds.
    #[command(after_help = "Examples:
  lockstep topo
      this machine, as hwloc sees it
  lockstep topo --xml fixtures/topology/intel-raptorlake-i7-1370p.xml --json
      another machine's topology, from the XML lstopo --of xml wrote there")]
    Topo(topo::Args),
    /// Show which PUs and memory nodes a placement policy gives a job.
    #[command(after_help = "Examples:
  lockstep place --policy numa-local --cpus 4
      four PUs and their memory node, on one NUMA node
  lockstep place --policy p-only --xml fixtures/topology/intel-raptorlake-i7-1370p.xml
      the performance cores of a hybrid CPU")]
    Place(place::Args),
    /// Run a command as a job inside its own cgroup, placed by a policy.
    #[command(after_help = "Examples:
  lockstep run --job lu --place numa-local -- mpirun -n 4 ./lu
      the job's cgroup gets one NUMA node's PUs and memory
  lockstep run --job build --place any --weight 50 --mem-limit 4G make -j8
      a lower CPU weight and a memory limit; the command may follow without --")]
    Run(run::Args),
    /// List the jobs of this node.
    #[command(after_help = "Examples:
  lockstep jobs
      running jobs: those lockstep run started and those the agent manages
  lockstep jobs --all --json
      ended ones too, as JSON")]
    Jobs(jobs::Args),
    /// Run the node agent in the foreground (co-scheduling, watchdog, control socket): `lockstepd`, beside
    /// this program, with the same arguments (`lockstep agent --help` lists them).
    #[command(
        disable_help_flag = true,
        disable_version_flag = true,
        after_help = "Examples:
  lockstep agent --policy gang --slot 200ms
      the agent in the foreground; lockstep agent --help lists its options (lockstepd(8))"
    )]
    Agent {
        /// Arguments for lockstepd.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
        args: Vec<std::ffi::OsString>,
    },
    /// Show the agent's live table: policy, slot, rows, and each job's state.
    #[command(after_help = "Examples:
  lockstep status
      the table: node, policy, slot, then one line per job
  lockstep --socket /run/lockstep/agent.sock status --json
      the same as JSON, from an agent at another socket")]
    Status(control::StatusArgs),
    /// Change the agent's co-scheduling policy.
    #[command(
        subcommand,
        after_help = "Examples:
  lockstep policy set gang --slot 200ms
      gang-schedule the jobs that share PUs, 200 ms per row
  lockstep -q policy set cfs
      back to the kernel's scheduler, saying nothing"
    )]
    Policy(control::PolicyCommand),
    /// Put existing cgroups, processes or containers under the agent as one job.
    #[command(after_help = "Examples:
  lockstep adopt --job sim --pid 4242,4243
      move two processes into a cgroup of the agent's, as job sim
  lockstep adopt --job ranks --container rank0 rank1
      the cgroups of two podman containers, as one job")]
    Adopt(control::AdoptArgs),
    /// Stop managing a job, restoring its cgroups.
    #[command(after_help = "Examples:
  lockstep release --job sim
      the job's cgroups and processes as they were before adopt")]
    Release(control::ReleaseArgs),
    /// Record which job's ranks ran on which CPU over a short window (the agent's eBPF program; root only).
    #[command(after_help = "Examples:
  lockstep timeline
      one second: each job's co-scheduled fraction and share of each CPU
  lockstep timeline --ms 500 --svg /tmp/timeline.svg
      half a second, drawn: CPUs down, time across, a colour per job")]
    Timeline(timeline::Args),
    /// Count hardware and software events of a command or processes, like `perf stat`.
    #[command(after_help = "Examples:
  lockstep stat -e task-clock,context-switches sleep 1
      count a command, as perf stat does (-- before it is optional)
  lockstep stat -e '{cycles,instructions}' -I 1000 -p 4242
      a group of two events of a running process, printed every second
  lockstep stat --job slurm-17
      a Slurm job's counts summed over the agents of its nodes")]
    Stat(stat::Args),
    /// Run an experiment spec, or write its report.
    #[command(
        subcommand,
        after_help = "Examples:
  lockstep experiment run experiments/mpl-quick.toml
      run every case, print the table, write reports/NAME/index.html
  lockstep experiment report mpl-quick
      write the report of its latest run again, from the store"
    )]
    Experiment(experiment::ExperimentCommand),
    /// Slurm's prolog and epilog: tell the agent about each job (see deploy/slurm/).
    #[command(
        subcommand,
        after_help = "Examples:
  lockstep slurm prolog
      slurm.conf's Prolog (deploy/slurm/prolog): the node's agent learns of the job as it starts
  lockstep slurm epilog
      slurm.conf's Epilog: the agent forgets the job as it ends on the node
  lockstep slurm prolog-slurmctld
      slurm.conf's PrologSlurmctld: the job's place in the cluster-wide matrix, in its AdminComment
  lockstep slurm epilog-slurmctld
      slurm.conf's EpilogSlurmctld: its neighbours take the slots it held"
    )]
    Slurm(slurm::SlurmCommand),
    /// Print the completion script of a shell, e.g. `lockstep completion bash > /etc/bash_completion.d/lockstep`.
    #[command(after_help = "Examples:
  lockstep completion bash > /etc/bash_completion.d/lockstep
      completion for bash, for every user")]
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the manual pages (lockstep.1 and one per subcommand, lockstep-SUBCOMMAND.1) into a directory.
    #[command(after_help = "Examples:
  lockstep man /usr/local/share/man/man1
      the pages, where man finds them (make install does this)")]
    Man {
        /// Directory to write them into (created if missing; not a file).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

/// The command line's definition, with the long version text (`--version`: the git commit, the features built
/// in and what the machine provides) when it is asked for; it probes the machine, so only then.
fn definition() -> clap::Command {
    lockstep_version::on_request(Cli::command())
}

/// Parses arguments and runs the command; returns the process exit status.
pub fn main() -> i32 {
    match definition().try_get_matches().and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => lockstep_core::error::exit_status("lockstep", exec(cli)),
        Err(e) => lockstep_core::error::clap_exit(
            "lockstep",
            &e.render().to_string(),
            e.use_stderr(),
            e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand,
        ),
    }
}

fn exec(cli: Cli) -> anyhow::Result<i32> {
    let store = lockstep_store::resolve_path(cli.store.as_deref());
    let socket = lockstep_proto::client::resolve_socket(cli.socket.as_deref());
    match cli.command {
        Command::Topo(args) => topo::exec(&args),
        Command::Place(args) => place::exec(&args),
        Command::Run(args) => run::exec(&args, &store, &socket),
        Command::Jobs(args) => jobs::exec(&args, &store),
        Command::Agent { args } => agent(cli.store.as_deref(), cli.socket.as_deref(), &args),
        Command::Status(args) => control::status(&args, &socket),
        Command::Policy(cmd) => control::policy(&cmd, &socket, cli.quiet),
        Command::Adopt(args) => control::adopt(&args, &socket, cli.quiet),
        Command::Release(args) => control::release(&args, &socket, cli.quiet),
        Command::Experiment(cmd) => experiment::exec(&cmd, &store),
        Command::Stat(args) => stat::exec(&args, &store, &socket),
        Command::Timeline(args) => timeline::exec(&args, &socket),
        Command::Slurm(cmd) => slurm::exec(&cmd, &socket),
        Command::Completion { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "lockstep", &mut std::io::stdout());
            Ok(0)
        }
        Command::Man { dir } => {
            lockstep_version::man::write_pages(Cli::command(), "1", &dir, RELATED, &pages::sections)
                .map_err(|e| man_error(&dir, &e))?;
            Ok(0)
        }
    }
}

/// Why the manual pages could not be written into `dir`: a path that is not a directory is a usage error.
fn man_error(dir: &std::path::Path, e: &std::io::Error) -> anyhow::Error {
    let say = format!("cannot write the manual pages into {}: {}", dir.display(), lockstep_core::error::io_reason(e));
    match e.kind() {
        std::io::ErrorKind::NotADirectory => lockstep_core::error::UsageError::new(format!(
            "{say} (expected a directory, e.g. /usr/local/share/man/man1)"
        ))
        .into(),
        std::io::ErrorKind::PermissionDenied => anyhow::anyhow!("{say} (run as root, or give a directory of yours)"),
        _ => anyhow::anyhow!(say),
    }
}

/// The pages every SEE ALSO of lockstep's ends with: the agent, and the tools whose habits lockstep follows.
const RELATED: &[&str] =
    &["lockstepd(8)", "perf-stat(1)", "lstopo(1)", "hwloc(7)", "srun(1)", "mpirun(1)", "cgroups(7)"];

/// The name `lockstep agent` starts lockstepd under (its `argv[0]`), which lockstepd shows in its usage.
const AGENT_ARG0: &str = "lockstep agent";

/// `lockstep agent ARGS`: replaces this process with `lockstepd` from the same directory (so the daemon keeps
/// this PID and links none of the experiment code), passing `--store`/`--socket` given before `agent`.
fn agent(
    store: Option<&std::path::Path>,
    socket: Option<&std::path::Path>,
    args: &[std::ffi::OsString],
) -> anyhow::Result<i32> {
    use std::os::unix::process::CommandExt;
    let daemon = std::env::current_exe()?.with_file_name("lockstepd");
    let mut cmd = std::process::Command::new(&daemon);
    // lockstepd's help and errors then name the command the user typed.
    cmd.arg0(AGENT_ARG0);
    if let Some(store) = store {
        cmd.arg("--store").arg(store);
    }
    if let Some(socket) = socket {
        cmd.arg("--socket").arg(socket);
    }
    let e = cmd.args(args).exec();
    anyhow::bail!(
        "cannot run the agent {}: {} (make build installs it beside lockstep)",
        daemon.display(),
        lockstep_core::error::io_reason(&e)
    )
}
