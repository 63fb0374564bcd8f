//! Command-line interface: argument parsing and one module per subcommand.

mod control;
mod experiment;
mod jobs;
mod place;
mod run;
mod slurm;
mod stat;
mod topo;

use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// lockstep: place, co-schedule and measure parallel jobs that share HPC nodes.
#[derive(Debug, Parser)]
#[command(name = "lockstep", version, about, propagate_version = true)]
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

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the machine's topology: packages, NUMA nodes, cores, PUs and core kinds.
    Topo(topo::Args),
    /// Show which PUs and memory nodes a placement policy gives a job.
    Place(place::Args),
    /// Run a command as a job inside its own cgroup, placed by a policy.
    Run(run::Args),
    /// List the jobs of this node.
    Jobs(jobs::Args),
    /// Run the node agent in the foreground (co-scheduling, watchdog, control socket): `lockstepd`, beside
    /// this program, with the same arguments (`lockstep agent --help` lists them).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Agent {
        /// Arguments for lockstepd.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
        args: Vec<std::ffi::OsString>,
    },
    /// Show the agent's live table: policy, slot, rows, and each job's state.
    Status(control::StatusArgs),
    /// Change the agent's co-scheduling policy.
    #[command(subcommand)]
    Policy(control::PolicyCommand),
    /// Put existing cgroups, processes or containers under the agent as one job.
    Adopt(control::AdoptArgs),
    /// Stop managing a job, restoring its cgroups.
    Release(control::ReleaseArgs),
    /// Count hardware and software events of a command or processes, like `perf stat`.
    Stat(stat::Args),
    /// Run an experiment spec, or write its report.
    #[command(subcommand)]
    Experiment(experiment::ExperimentCommand),
    /// Slurm's prolog and epilog: tell the agent about each job (see deploy/slurm/).
    #[command(subcommand)]
    Slurm(slurm::SlurmCommand),
    /// Print the completion script of a shell, e.g. `lockstep completion bash > /etc/bash_completion.d/lockstep`.
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the manual pages (lockstep.1 and one per subcommand, lockstep-SUBCOMMAND.1) into a directory.
    Man {
        /// Directory to write them into (created if missing).
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
        Err(e) => lockstep_core::error::clap_exit("lockstep", &e.render().to_string(), e.use_stderr()),
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
        Command::Slurm(cmd) => slurm::exec(&cmd, &socket),
        Command::Completion { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "lockstep", &mut std::io::stdout());
            Ok(0)
        }
        Command::Man { dir } => {
            std::fs::create_dir_all(&dir)
                .and_then(|()| clap_mangen::generate_to(Cli::command(), &dir))
                .map_err(|e| anyhow::anyhow!("cannot write the manual pages into {}: {e}", dir.display()))?;
            Ok(0)
        }
    }
}

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
    anyhow::bail!("cannot run the agent {}: {e} (make build installs it beside lockstep)", daemon.display())
}
