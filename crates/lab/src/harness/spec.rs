//! What every kind's spec shares: the header (`kind`, `name`, `description`) read and checked once, the checks of
//! names, commands, rank and repetition counts, and the vocabulary of cases (MPI progress modes, where ranks run,
//! what schedules the jobs).

use std::path::Path;
use std::time::Duration;

use serde::de::DeserializeOwned;

use lockstep_core::cosched::{slot, PolicySpec};
use lockstep_core::error::UsageError;
use lockstep_core::names::Names;
use lockstep_core::place::PlacementKind;
use lockstep_core::topo::Machine;

/// The kind of a spec without a `kind` key.
pub const DEFAULT_KIND: &str = "mpl";

/// What every spec starts with, whatever its kind.
#[derive(Clone, Debug)]
pub struct Header {
    /// Experiment name (report directory, store key).
    pub name: String,
    /// One line saying what it reproduces.
    pub description: String,
}

/// The header's keys of a raw spec that [`raw_spec!`] declared, taken out of it.
pub trait RawHeader {
    /// `name` and `description` (`kind` chose the parser, and is read by the registry alone).
    fn header(&mut self) -> (String, String);
}

/// Declares a kind's raw spec as serde reads it, unknown keys refused: the header's keys every kind starts with
/// (`kind`, `name`, `description`), then the kind's own, as given.
macro_rules! raw_spec {
    ($(#[$meta:meta])* struct $raw:ident { $($body:tt)* }) => {
        $(#[$meta])*
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $raw {
            #[serde(rename = "kind")]
            _kind: Option<String>,
            name: String,
            #[serde(default)]
            description: String,
            $($body)*
        }

        impl $crate::harness::spec::RawHeader for $raw {
            fn header(&mut self) -> (String, String) {
                (std::mem::take(&mut self.name), std::mem::take(&mut self.description))
            }
        }
    };
}
pub(crate) use raw_spec;

/// The usage error of a bad spec at `path`: one line naming the file and `what` is wrong.
pub fn bad(path: &Path) -> impl Fn(String) -> UsageError + Copy + '_ {
    move |what| UsageError::new(format!("bad experiment spec {}: {what}", path.display()))
}

/// Reads `text` (as read from `path`, which messages name) as a spec of the kind whose raw form is `R`: its
/// header, checked, and the rest (a TOML error names its line). The registry (`KINDS`, in lib.rs) chose the kind
/// from the spec's `kind`, so that a kind's name is written once, there.
pub fn read<R: DeserializeOwned + RawHeader>(path: &Path, text: &str) -> Result<(Header, R), UsageError> {
    let bad = bad(path);
    let mut raw: R = toml::from_str(text).map_err(|e| bad(lockstep_core::error::toml_message(text, &e)))?;
    let (name, description) = raw.header();
    if !is_short_name(&name, MAX_NAME) {
        return Err(bad(format!("name {name:?} (expected 1 to {MAX_NAME} letters, digits, '-', '_')")));
    }
    Ok((Header { name, description }, raw))
}

/// The kind a spec's `text` names by its `kind` key ([`DEFAULT_KIND`] when it names none, or does not read).
pub fn kind_of(text: &str) -> String {
    let kind = text.parse::<toml::Table>().ok().and_then(|t| t.get("kind")?.as_str().map(str::to_string));
    kind.unwrap_or_else(|| DEFAULT_KIND.to_string())
}

/// The default of a count that is one unless given (serde's `default = "…"`).
pub(crate) fn one() -> u32 {
    1
}

/// The default of a count that is two unless given (serde's `default = "…"`).
pub(crate) fn two() -> u32 {
    2
}

/// Most repetitions of a case a spec may ask for.
pub(crate) const MAX_REPETITIONS: u32 = 1000;

/// Checks a repetition count: from `min` to [`MAX_REPETITIONS`].
pub(crate) fn check_repetitions(repetitions: u32, min: u32) -> Result<(), String> {
    if (min..=MAX_REPETITIONS).contains(&repetitions) {
        Ok(())
    } else {
        Err(format!("repetitions = {repetitions} (expected {min} to {MAX_REPETITIONS})"))
    }
}

/// Checks that `list` (the spec's `field`) is not empty and names nothing twice; `expected` says what it takes.
pub(crate) fn distinct<T: PartialEq + std::fmt::Debug>(field: &str, list: &[T], expected: &str) -> Result<(), String> {
    if list.is_empty() {
        return Err(format!("{field} = [] (expected {expected})"));
    }
    match list.iter().enumerate().find(|(i, x)| list[..*i].contains(x)) {
        Some((_, twice)) => Err(format!("{field} names {twice:?} twice (expected {expected})")),
        None => Ok(()),
    }
}

/// Checks that placement policy `kind` (the spec's `field`) can place a job on this machine: a usage error naming
/// the field and the machine's core kinds when it cannot (e-only or mixed on a machine with one kind).
pub fn check_placement(path: &Path, field: &str, kind: PlacementKind) -> anyhow::Result<()> {
    let machine = Machine::live()?;
    if let Err(e) = lockstep_core::place::place(&machine, kind, None) {
        let kinds: Vec<String> = machine.kinds.iter().map(|k| format!("{} ×{}", k.label, k.cores)).collect();
        let field = format!("{field} = {:?} on this machine (cores by kind: {})", kind.name(), kinds.join(", "));
        return Err(bad(path)(format!("{field}: {e}")).into());
    }
    Ok(())
}

/// Longest name of a spec. A job's name (`<spec>-<workload>-<position>`, at most 64 characters for the agent) is
/// made of it and of a workload's name.
const MAX_NAME: usize = 32;

/// Longest name of a workload.
const MAX_WORKLOAD_NAME: usize = 16;

/// Whether `name` is 1 to `max` letters, digits, '-' and '_'.
fn is_short_name(name: &str, max: usize) -> bool {
    (1..=max).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Checks a workload: its name, and its command (a program of `build/bin` by its file name, no path, and its
/// arguments).
pub(crate) fn check_command(workload: &str, command: &[String]) -> Result<(), String> {
    if !is_short_name(workload, MAX_WORKLOAD_NAME) {
        return Err(format!(
            "workload name {workload:?} (expected 1 to {MAX_WORKLOAD_NAME} letters, digits, '-', '_')"
        ));
    }
    match command.first().map(String::as_str) {
        None => Err(format!("workload {workload} has an empty command")),
        Some(p) if p.is_empty() || p.contains('/') || p == "." || p == ".." => Err(format!(
            "workload {workload}: program {p:?} (expected the name of a program in build/bin, without a path)"
        )),
        Some(_) => Ok(()),
    }
}

/// Checks a job's rank count: what the kernels accept.
pub(crate) fn check_ranks(ranks: u32) -> Result<(), String> {
    if (1..=16).contains(&ranks) && ranks.is_power_of_two() {
        Ok(())
    } else {
        Err(format!("ranks = {ranks} (expected a power of two from 1 to 16)"))
    }
}

/// MPI progress mode of a case's ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Ranks yield the CPU while they wait (`mpi_yield_when_idle`).
    Yield,
    /// Ranks poll without yielding.
    Busy,
}

/// The names of [`Progress`].
pub const PROGRESS: Names<Progress> = Names(&[("yield", Progress::Yield), ("busy", Progress::Busy)]);

/// Where a job's ranks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RanksIn {
    /// Bare processes under `lockstep run`, in the job's cgroup.
    Process,
    /// One podman container per rank, the containers adopted as the job.
    Container,
    /// One Charliecloud container (`ch-run`) per rank, the containers adopted as the job.
    Charliecloud,
    /// A Slurm batch job (`srun`) on the test cluster of `tests/cluster/up`.
    Slurm,
}

/// The names of [`RanksIn`].
pub const RANKS_IN: Names<RanksIn> = Names(&[
    ("process", RanksIn::Process),
    ("container", RanksIn::Container),
    ("charliecloud", RanksIn::Charliecloud),
    ("slurm", RanksIn::Slurm),
]);

/// What schedules a case's jobs: a lockstep policy, or Slurm's own gang scheduling with the agents at `cfs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// The agents' policy.
    Lockstep(PolicySpec),
    /// Slurm's `PreemptMode=GANG`, its `SchedulerTimeSlice` the case's slot.
    SlurmGang,
}

/// The name of Slurm's gang scheduling in specs and reports.
pub const SLURM_GANG: &str = "slurm-gang";

impl Scheduler {
    /// The name a spec gives it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lockstep(p) => p.name(),
            Self::SlurmGang => SLURM_GANG,
        }
    }

    /// The policy the agents run: `cfs` under Slurm's gang scheduling.
    pub fn agents(self) -> PolicySpec {
        match self {
            Self::Lockstep(p) => p,
            Self::SlurmGang => PolicySpec::Cfs,
        }
    }
}

lockstep_core::display_by_name!(Progress => PROGRESS, RanksIn => RANKS_IN);

/// One policy setting to compare.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicyConfig {
    /// What schedules the jobs.
    pub scheduler: Scheduler,
    /// Slot length (for the policies that have slots, and Slurm's time slice).
    pub slot: Duration,
}

impl PolicyConfig {
    /// `cfs`, `boost/2s`, `gang/200ms`, `dcs:weight`, `dcs+boost:weight/200ms`, `slurm-gang/5s`: the slot where
    /// the policy has slots.
    pub fn label(&self) -> String {
        match self.scheduler {
            Scheduler::Lockstep(p) if !p.slotted() => p.name().to_string(),
            s => format!("{}/{}", s.name(), lockstep_core::duration::format(self.slot)),
        }
    }

    /// The request that puts it in force on an agent: its policy, and its slot length where the policy has slots
    /// (else the agent's is left as it is).
    pub fn agent_request(&self) -> lockstep_proto::protocol::Request {
        let policy = self.scheduler.agents();
        lockstep_proto::protocol::Request::Policy { policy, slot: policy.slotted().then_some(self.slot) }
    }
}

/// A `[[policies]]` entry: `name` a lockstep policy or `slurm-gang` (only when jobs run under Slurm, `slurm`),
/// `slot` its slot length (Slurm's time slice: whole seconds, at least 5).
pub(crate) fn policy_config(name: &str, slot: Option<&str>, slurm: bool) -> Result<PolicyConfig, String> {
    let scheduler = if name == SLURM_GANG {
        if !slurm {
            return Err(format!("policy {SLURM_GANG} needs ranks_in = [\"slurm\"]"));
        }
        Scheduler::SlurmGang
    } else {
        Scheduler::Lockstep(name.parse().map_err(|e: UsageError| e.to_string())?)
    };
    let slot = match slot {
        Some(s) => slot::parse("slot", s).map_err(|e| e.to_string())?,
        None => slot::DEFAULT,
    };
    if scheduler == Scheduler::SlurmGang && (slot.subsec_nanos() != 0 || slot.as_secs() < 5) {
        return Err(format!(
            "policy {SLURM_GANG}: slot {} is Slurm's SchedulerTimeSlice (expected whole seconds, at least 5s)",
            lockstep_core::duration::format(slot)
        ));
    }
    Ok(PolicyConfig { scheduler, slot })
}
