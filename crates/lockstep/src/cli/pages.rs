//! What `lockstep man` writes beyond clap's sections: each page's DESCRIPTION, and its EXIT STATUS, ENVIRONMENT,
//! FILES and SIGNALS.

use lockstep_version::man::Section;

/// The DESCRIPTION of each page, by page name: what the command does, beyond its one line in NAME.
const DESCRIPTIONS: &[(&str, &str)] = &[
    (
        "lockstep",
        "lockstep places parallel jobs on a node's cores and memory, runs them in cgroups of their own, and, through \
         its node agent (lockstepd(8)), co-schedules the jobs that share cores: gang scheduling in wall-clock time \
         slots that are the same on every node, boosts, demand-driven raises, or the kernel's own scheduler. It \
         also counts hardware events as perf stat does, and runs experiments that compare the policies side by side.\n\n\
         Commands that change cgroups (run, agent, experiment run) need root. Commands that talk to the agent \
         (status, policy, adopt, release, slurm) reach it on its socket; any user may ask for status, only root \
         may change what the agent does. topo, place and stat need no agent.",
    ),
    (
        "lockstep-topo",
        "Prints the machine's topology as hwloc sees it: packages, NUMA nodes with their memory, cores with their \
         kind (P, E, LP-E on hybrid CPUs), PUs, and the NUMA distances. With --xml, the topology of another \
         machine, from the XML file lstopo --of xml wrote there.",
    ),
    (
        "lockstep-place",
        "Prints the PUs and memory nodes a placement policy gives a job of --cpus PUs on this machine (or on the \
         topology of --xml), without running anything: what lockstep run --place would give it.",
    ),
    (
        "lockstep-run",
        "Runs CMD as a job: in a cgroup of its own (lockstep/NAME in every hierarchy), on the PUs and memory nodes \
         the placement policy gives it, with the CPU weight and memory limit asked for. The job is recorded in the \
         store; when an agent runs, it is registered with it and co-scheduled. Signals are passed on to the job; \
         when it ends its cgroup is removed, and lockstep run exits with the job's exit status.",
    ),
    (
        "lockstep-jobs",
        "Lists the jobs of this node from the store: those lockstep run started and those the agent manages, with \
         their state, placement, weight and exit status; --all adds the jobs that ended.",
    ),
    (
        "lockstep-agent",
        "Replaces itself with lockstepd(8), the node agent, from the same directory, passing --store and --socket \
         given before agent and every argument after it. lockstepd(8) describes the agent.",
    ),
    (
        "lockstep-status",
        "Asks the agent for its live table. The first line names the node, the agent's and its watchdog's PIDs, the \
         policy and the slot length. The second says which row of the co-scheduling matrix runs now, since when \
         (UTC), and the number of the slot: slots are counted from the epoch on the wall clock (slot K began K \
         times the slot length after 1970-01-01 00:00 UTC), so that every node's agent switches the same slot at \
         the same moment. Then one line per job: its row (ROW/PERIOD for a Slurm job's place in the cluster-wide \
         matrix, * when the row was given), its PUs, whether it is frozen or boosted now, where it came from, the \
         share of its time its ranks ran together (TOGETHER), and its first cgroup. A user other than root sees \
         their own jobs only, and may ask the agent 20 times at once and then 10 times a second (each millisecond \
         of the agent's time a request takes counting as one more): past that, the agent refuses at once and \
         lockstep says when to ask again (exit status 1).",
    ),
    (
        "lockstep-timeline",
        "Asks the agent to record, for MS milliseconds (10 to 5000), which job's ranks ran on which CPU, from the \
         scheduler's switches as its eBPF program sees them, and prints each job's share of the window in which \
         all its ranks ran at once (CO-SCHEDULED) and each CPU's share per job; --svg draws the window (CPUs down, \
         time across, a colour per job) and --json prints it whole. Root only; one recording at a time. Events \
         past what the agent keeps in one window are counted as dropped and said.",
    ),
    (
        "lockstep-policy",
        "Changes the agent's co-scheduling policy. See lockstep-policy-set(1).",
    ),
    (
        "lockstep-policy-set",
        "Switches the agent's co-scheduling policy, at the next slot boundary: cfs (the kernel's scheduler alone), \
         boost (the active row's jobs get the highest CPU weight), gang (the jobs of the other rows are frozen), auto \
         (gang or cfs for each set of jobs sharing PUs, chosen by trial), dcs and dcs+boost (a job a message arrives \
         for is raised for the quantum; dcs:weight, dcs:rr and dcs:nice choose how). --slot changes the slot length \
         too. Only root may change the policy.",
    ),
    (
        "lockstep-adopt",
        "Puts running work under the agent as one job: existing cgroups (--cgroup), processes (--pid, moved into a \
         cgroup of the agent's and back on release) or containers (--container). A cgroup must hold no other job, \
         no process of the agent, its watchdog or init, and may be neither lockstep's own tree (lockstep/, the \
         parent of every job's cgroup) nor hold it. Only root may adopt.",
    ),
    (
        "lockstep-release",
        "Stops managing a job: the agent thaws it, restores its weights, puts processes it moved back where they \
         were and removes the cgroups it made for them.",
    ),
    (
        "lockstep-stat",
        "Counts hardware and software events of a command, of running processes (-p) or of a job (--job), as perf \
         stat does, with perf's event syntax and output on stderr: -x SEP for CSV, --json for JSON lines (one \
         format at a time), -I MS for counts every interval, -r N to repeat a command and print the mean of each \
         count with its noise. --job with --nodes (or a Slurm job, whose nodes come from squeue) sums the counts the \
         agents of those nodes took since the job started.",
    ),
    (
        "lockstep-experiment",
        "Runs the experiments of experiments/*.toml and writes their reports. See lockstep-experiment-run(1) and \
         lockstep-experiment-report(1).",
    ),
    (
        "lockstep-experiment-run",
        "Runs every case of the experiment spec SPEC, as root: a private agent, real cgroups, real MPI jobs; each \
         job's time, verification and communication share go into the store; then writes the report into \
         REPORTS/NAME/ (summary.md, index.html, one SVG per plot, a copy of the spec) and prints the summary. A \
         stopping signal takes down what it started.\n\n\
         A spec is a TOML file. Every spec has the header fields kind (mpl, the default; counters, locks, \
         placement, scale or scale-model), name (1 to 32 letters, digits, - and _: the report's directory and the \
         name in the store) and description. A co-scheduling spec (kind = \"mpl\") then has ranks, repetitions, \
         placement (any, numa-local, spread, p-only, e-only or mixed), progress ([\"yield\", \"busy\"]: how idle ranks wait), \
         ranks_in (process, container, charliecloud or slurm), either mpl (levels: that many copies of each \
         workload at once) or mixes (lists of workload names run together), a table [workloads.NAME] per program \
         (command = [\"lu\", \"--class\", \"A\"], communication = true) and one [[policies]] table per policy (name, \
         slot). docs/experiments.md describes every kind and field; experiments/mpl-quick.toml is a short example.",
    ),
    (
        "lockstep-experiment-report",
        "Writes the report of the latest run of experiment NAME again, from the store and the copy of its spec in \
         REPORTS/NAME/spec.toml, and prints its summary: after a change of the report's code, or of the store.",
    ),
    (
        "lockstep-slurm",
        "The commands Slurm runs around each job (deploy/slurm/ has the scripts and the slurm.conf lines): they \
         tell the node's agent about the job and give it its place in the cluster-wide matrix.",
    ),
    (
        "lockstep-slurm-prolog",
        "slurm.conf's Prolog: run by slurmd as the job starts on the node; tells the node's agent the job's ID and \
         owner, so that the agent takes its cgroups on at once, and its row or place when the controller's prolog \
         could not tell the agent (then read from squeue). No agent running is no error: the job then runs without \
         co-scheduling.",
    ),
    (
        "lockstep-slurm-epilog",
        "slurm.conf's Epilog: run by slurmd as the job ends on the node; the agent forgets the job.",
    ),
    (
        "lockstep-slurm-prolog-slurmctld",
        "slurm.conf's PrologSlurmctld: run by slurmctld before the job starts; gives the job its place in the \
         cluster-wide matrix (the same slots on every node, disjoint from those of the jobs it shares a node with, \
         running neighbours making room), keeps it in the job's AdminComment, after whatever else the field \
         holds, and tells the agents of the nodes concerned (a notice sealed by munge, POST /slurm/places at each \
         node's NodeAddr on --agent-port), so that no agent asks slurmctld while its jobs run.",
    ),
    (
        "lockstep-slurm-epilog-slurmctld",
        "slurm.conf's EpilogSlurmctld: run by slurmctld after the job (and after each run of a requeued job); its \
         neighbours grow into the slots it held, and their nodes' agents are told. A requeued job's AdminComment loses lockstep's words, whatever \
         else the field holds kept as it is (an empty field stays empty); a finished job's stays, as Slurm \
         changes nothing of a finished job.",
    ),
    (
        "lockstep-completion",
        "Prints the completion script of a shell (bash, zsh, fish, elvish, powershell) on standard output.",
    ),
    (
        "lockstep-man",
        "Writes this manual: lockstep.1 and one page per subcommand, lockstep-SUBCOMMAND.1, into DIR, which is \
         created if missing and must be a directory.",
    ),
];

/// What every page's EXIT STATUS says; a command that runs another adds how it passes that one's status on.
const EXIT_STATUS: &str = "0\tsuccess.\n\
    1\ta failure of the system, not of the input: the kernel, Slurm or a program refused or failed, or the agent is \
    there but did not answer. The message on stderr says what failed.\n\
    2\tbad input: a usage error, a value out of range, a file that is missing or of the wrong kind, a job or cgroup \
    that is not there or not allowed, or no agent at the socket. Nothing was changed.\n\n\
    Every error is one line on stderr, lockstep: WHAT: WHY (HINT): the exit status, not the words, tells the two \
    kinds apart.";

/// How a command that runs another (`run`, `stat -- CMD`) ends.
const EXIT_OF_COMMAND: &str = "Otherwise the exit status is the command's: its own, or 128 + N when signal N ended \
    it.";

/// The variables every page names.
const ENVIRONMENT: &str = "LOCKSTEP_STORE\tthe store, when --store is not given.\n\
    LOCKSTEP_SOCKET\tthe agent's socket, when --socket is not given.";

/// The files every page names.
const FILES: &str = "/var/lib/lockstep/lockstep.db\tthe node's store (SQLite): jobs, the agent's decisions, counter \
    samples, experiment runs; root's (mode 0600) in a directory only root may change.\n\
    /run/lockstep/agent.sock\tthe agent's control socket; every user may connect, each request is checked against \
    the caller's credentials.";

/// The sections of page `name` (DESCRIPTION, EXIT STATUS, ENVIRONMENT, FILES, SIGNALS where it has any).
pub fn sections(name: &str) -> Vec<Section> {
    let mut out = Vec::new();
    if let Some((_, text)) = DESCRIPTIONS.iter().find(|(page, _)| *page == name) {
        out.push(Section::new("DESCRIPTION", *text));
    }
    let exit = match name {
        "lockstep-run" | "lockstep-stat" => format!("{EXIT_STATUS}\n\n{EXIT_OF_COMMAND}"),
        "lockstep-agent" => {
            "As lockstepd(8): 0 after SIGTERM or SIGINT with every job restored; 1 and 2 as \
                             below.\n\n"
                .to_string()
                + EXIT_STATUS
        }
        "lockstep-experiment-run" => {
            format!("{EXIT_STATUS}\n\nStopped by a signal N, it exits with 128 + N after taking down what it started.")
        }
        _ => EXIT_STATUS.to_string(),
    };
    out.push(Section::new("EXIT STATUS", exit));
    out.push(Section::new("ENVIRONMENT", ENVIRONMENT));
    let files = match name {
        "lockstep-experiment-run" | "lockstep-experiment-report" => format!(
            "{FILES}\nexperiments/*.toml\tthe experiment specs.\nbuild/reports/NAME/\tan experiment's report \
             (summary.md, index.html, SVG plots, spec.toml)."
        ),
        _ => FILES.to_string(),
    };
    out.push(Section::new("FILES", files));
    if let Some(signals) = signals(name) {
        out.push(Section::new("SIGNALS", signals));
    }
    out
}

/// What the commands that run or follow something do on a signal.
fn signals(name: &str) -> Option<&'static str> {
    Some(match name {
        "lockstep-run" => {
            "SIGINT, SIGTERM, SIGHUP, SIGQUIT\tpassed on to the job's command; when it has ended, the job's cgroup is \
             removed."
        }
        "lockstep-stat" => {
            "SIGINT, SIGTERM\tend the count; the counts so far are printed (a command being counted gets SIGINT from \
             the terminal as usual)."
        }
        "lockstep-experiment-run" => {
            "SIGINT, SIGTERM, SIGHUP\ttake down what the experiment started (its jobs, its private agent, which \
             restores every cgroup change, a test Slurm cluster), then exit with 128 + the signal; the cases \
             finished so far stay in the store."
        }
        "lockstep-agent" => "SIGTERM, SIGINT\tas lockstepd(8): restore every job, then exit 0.\nSIGHUP\tas lockstepd(8): read the configuration again.",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every page's name, as `lockstep man` names the files.
    fn pages(cmd: &clap::Command, into: &mut Vec<String>) {
        into.push(cmd.get_display_name().unwrap_or_else(|| cmd.get_name()).to_string());
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            pages(sub, into);
        }
    }

    #[test]
    fn every_page_has_a_description_and_an_exit_status() {
        let mut cmd = super::super::Cli::command().disable_help_subcommand(true);
        cmd.build();
        let mut names = Vec::new();
        pages(&cmd, &mut names);
        assert!(names.len() > 20, "{names:?}");
        for name in &names {
            let titles: Vec<&str> = super::sections(name).iter().map(|s| s.title).collect();
            assert!(titles.contains(&"DESCRIPTION") && titles.contains(&"EXIT STATUS"), "{name}: {titles:?}");
        }
        for (page, _) in super::DESCRIPTIONS {
            assert!(names.iter().any(|n| n == page), "a description of no page: {page}");
        }
    }
}
