//! A job the agent manages: its cgroups, its PUs and row, and the state applied to it. Every change goes
//! through the journal first.

use lockstep_cgroup::procfs::{thread_cpu, Live as _};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::demand::Demand;
use super::journal::Journal;
use crate::lock_wait::LockWait;
use crate::writer::Writer;
use lockstep_cgroup::knobs::{freeze_value, weight_value};
use lockstep_cgroup::procfs::ProcessRef;
use lockstep_cgroup::{procs_within, remove_dir, Bounds, JobCgroup, Knobs, JOB_TREE};
use lockstep_core::cosched::rows::Schedule;
use lockstep_core::cosched::{Desired, BOOST_WEIGHT};
use lockstep_core::cpulist::CpuList;
use lockstep_core::ident::JobKey;
use lockstep_core::job::SlurmJobId;
use lockstep_store::Action;

/// Where a managed job came from.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Origin {
    /// `lockstep run` registered it.
    Run,
    /// Adopted as existing cgroups (given by path, or the cgroups of containers).
    Cgroup,
    /// Adopted as processes moved into a cgroup the agent created; each process with the `cgroup.procs` files
    /// it came from, to go back on release (only while its PID still names it).
    Pids {
        /// (process, original `cgroup.procs` files).
        #[serde(deserialize_with = "moved_processes")]
        moved: Vec<(ProcessRef, Vec<PathBuf>)>,
        /// The cgroup the agent created.
        created: JobCgroup,
    },
    /// A Slurm job found in Slurm's cgroups; its groups follow its steps.
    Slurm {
        /// Slurm job ID.
        id: lockstep_core::job::SlurmJobId,
        /// The `job_<id>` directories: the job ends when they are gone, and is counted by them.
        dirs: Vec<PathBuf>,
        /// On cgroup v1, where Slurm uses no cpu controller: the agent's `cpu/lockstep/slurm-<id>`, which the
        /// job's processes are moved into so that `boost` has a weight to raise.
        #[serde(default)]
        weight_dir: Option<PathBuf>,
    },
}

impl Origin {
    /// Undoes what taking the job on did besides its cgroups' state: processes adopted into a cgroup of the
    /// agent's go back where they were (those still the processes named), and that cgroup is removed; an ended
    /// Slurm job's weight cgroup is removed. Files already gone are fine.
    pub fn put_back(&self) {
        if let Self::Pids { moved, created } = self {
            // A process that exited is not moved back: its PID may name another process by now.
            for (process, procs) in moved {
                for p in procs {
                    let _ = process.move_to(p);
                }
            }
            for dir in &created.dirs {
                let _ = remove_dir(dir);
            }
        }
        // rmdir fails while processes are in it: a job that still runs keeps them there (the next agent takes
        // it over); an ended one has left it empty.
        if let Self::Slurm { weight_dir: Some(dir), .. } = self {
            let _ = remove_dir(dir);
        }
    }

    /// The kind of origin, as status shows it.
    pub fn kind(&self) -> lockstep_proto::protocol::JobOrigin {
        use lockstep_proto::protocol::JobOrigin;
        match self {
            Self::Run => JobOrigin::Run,
            Self::Cgroup => JobOrigin::Cgroup,
            Self::Pids { .. } => JobOrigin::Pids,
            Self::Slurm { .. } => JobOrigin::Slurm,
        }
    }
}

/// The processes of an adopted job as the store keeps them. A store written before processes carried their start
/// time holds bare PIDs: those are kept with a start time no process has, so that nothing is ever moved for them
/// (which process a bare PID names now cannot be known).
fn moved_processes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<(ProcessRef, Vec<PathBuf>)>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Process(ProcessRef),
        Pid(i32),
    }
    let stored: Vec<(Stored, Vec<PathBuf>)> = Vec::deserialize(d)?;
    Ok(stored
        .into_iter()
        .map(|(p, back)| match p {
            Stored::Process(process) => (process, back),
            Stored::Pid(pid) => (ProcessRef { pid, start: u64::MAX }, back),
        })
        .collect())
}

/// One cgroup of a job (a container group has several).
#[derive(Debug)]
pub struct Group {
    /// Its directories (one per v1 hierarchy, or one v2 directory).
    pub dirs: Vec<PathBuf>,
    /// Files co-scheduling writes.
    pub knobs: Knobs,
    /// The freezer file, open from the moment the group is frozen until it is thawed: a thaw needs no new
    /// descriptor, so that running out of them can never leave a job frozen.
    thaw: Option<File>,
    /// While the weight is raised: the weight file, open for the same reason, and the value it had before.
    unboost: Option<(File, String)>,
}

impl Group {
    /// A group over `dirs`.
    pub fn new(dirs: Vec<PathBuf>) -> Self {
        let knobs = Knobs::find(&dirs);
        Self { dirs, knobs, thaw: None, unboost: None }
    }

    /// Freezes or thaws the group (the journal first, so that a crash in between still restores it). The file is
    /// opened before the job is frozen and kept open until it is thawed. Returns what the kernel took to take the
    /// write (a v1 freezer walks every cgroup and process below the group in it).
    fn set_frozen(
        &mut self,
        frozen: bool,
        job: &JobKey,
        journal: &mut Journal,
        writer: &Writer,
    ) -> Result<Took, ChangeError> {
        let Some(file) = &self.knobs.freeze else { return Ok(Took::default()) };
        if frozen {
            let held = open(file)?;
            journal.remember(writer, job, file, freeze_value(file, false))?;
            let took = write(&held, file, freeze_value(file, true))?;
            self.thaw = Some(held);
            Ok(took)
        } else if let Some(held) = &self.thaw {
            let took = write(held, file, freeze_value(file, false))?;
            self.thaw = None;
            journal.forget(file);
            Ok(took)
        } else {
            Ok(Took::default())
        }
    }

    /// Raises the group's weight to [`BOOST_WEIGHT`], or puts back the weight it had (through the descriptor
    /// opened when it was raised). Returns what the kernel took to take the write.
    fn set_boosted(
        &mut self,
        boosted: bool,
        job: &JobKey,
        journal: &mut Journal,
        writer: &Writer,
    ) -> Result<Took, ChangeError> {
        let Some(file) = &self.knobs.weight else { return Ok(Took::default()) };
        if boosted {
            let held = open(file)?;
            let before = std::fs::read_to_string(file).map_err(|_| ChangeError::Gone(file.clone()))?.trim().to_string();
            journal.remember(writer, job, file, &before)?;
            let took = write(&held, file, &weight_value(file, BOOST_WEIGHT))?;
            self.unboost = Some((held, before));
            Ok(took)
        } else if let Some((held, before)) = &self.unboost {
            let took = write(held, file, before)?;
            self.unboost = None;
            journal.forget(file);
            Ok(took)
        } else {
            Ok(Took::default())
        }
    }

    /// Drops the group's journal entries (its files are gone: nothing left to restore).
    fn forget(&self, journal: &mut Journal) {
        for file in [&self.knobs.freeze, &self.knobs.weight].into_iter().flatten() {
            journal.forget(file);
        }
    }
}

/// A job under co-scheduling.
#[derive(Debug)]
pub struct Managed {
    /// The job: its name, or its Slurm job ID (a Slurm job found in Slurm's cgroups, whatever its name in Slurm).
    pub key: JobKey,
    /// Its cgroups.
    pub groups: Vec<Group>,
    /// PUs it may run on.
    pub pus: CpuList,
    /// Row given from outside.
    pub pinned: Option<u32>,
    /// Place in the cluster-wide matrix (a Slurm job the controller placed), in place of a row.
    pub place: Option<Schedule>,
    /// Row in force (the place's row when it has one).
    pub row: u32,
    /// Slots in the job's cycle: its place's period, or the count of rows of its set (the jobs joined to it by
    /// shared PUs) on this node, the node's count where the set holds a row given from outside.
    pub round: u32,
    /// Whether the job is favoured in the slot in force.
    pub favoured: bool,
    /// State applied now.
    pub applied: Desired,
    /// State the slot policy wants (what `dcs` puts back after raising the weight).
    pub planned: Desired,
    /// Where it came from.
    pub origin: Origin,
    /// UID of the job's owner: users see their own jobs through the agent socket.
    pub owner: u32,
    /// What a change of the job's cgroups costs in the kernel's writes: the last change's, or half the estimate
    /// before it when more (so that one quick write does not make a slow job prompt again at once). `None` until
    /// its first change. See [`Managed::prompt`].
    pub switch_cost: Option<Duration>,
    /// Whether the job was said to be switched after the others (once).
    pub said_slow: bool,
    /// What its changes cost the kernel's writes in the window being judged ([`COST_SHARE`]).
    pub spent: Spent,
    /// What the slot loop judges of what [`Managed::spent`] measured.
    pub cost: Cost,
    /// Why the job is left to the kernel, if it is: its changes cost more than [`COST_SHARE`] of a CPU, so it is
    /// thawed, at its own weight, and never switched again until it ends.
    pub left: Option<String>,
    /// Whether Slurm holds the job halted (suspended or stopped): it is not planned, its slots going to its
    /// neighbours, until Slurm resumes it.
    pub halted: bool,
    /// How long the agent held it frozen, up to its last thaw, and since when it holds it frozen now.
    pub frozen_time: (Duration, Option<Instant>),
    /// How many CPUs its ranks want, as last measured (what `gang` slices by).
    pub demand: Demand,
}

/// The share of one CPU that changes of one job's cgroups may cost the agent, judged at the end of each
/// [`COST_WINDOW`] over it and the window before, each weighing as much (a job's first over it and an empty one;
/// a window that a stall of the slot loop drew out, at its rate): a job past it whose own tree made its
/// writes dear is left to the kernel ([`Managed::left`], [`verdict`]). A v1 freezer write walks every cgroup below
/// the one written, so a job whose user made thousands of cgroups in its tree would otherwise buy the agent's
/// (real-time) CPU at every switch, for nothing it spends; a job of 64 ranks in one cgroup, switched every 100 ms,
/// costs 0.1 %.
///
/// What is judged is the writing thread's CPU time, as the walk runs in the writer's time. A write that sleeps
/// (for the cgroup lock, or while the host runs something else, where the kernel accounts that time as stolen)
/// costs the agent no CPU, and is [`PROMPT_SWITCH`]'s concern; one that spins on the lock while its holder runs, or
/// whose CPU a host takes without the kernel knowing (no steal-time accounting, a qemu TCG guest), counts. Two
/// windows rather than one let a window of such noise cost twice the share before a job is left, while a user
/// who makes one window dear and the next cheap is still held to the share over both.
pub const COST_SHARE: f64 = 0.01;

/// The share past which a job is left to the kernel whatever the freezer's lock took of it ([`verdict`]): the
/// most that another user holding the lock may make a job's writes cost before it is left for it all the same.
/// Another user who held the v1 freezer's lock by reading a tree of 40,000 cgroups in two loops made the writes of
/// jobs of one cgroup cost 1 to 1.6 % (docs/security.md).
pub const COST_SHARE_WHATEVER: f64 = 3.0 * COST_SHARE;

/// How long what a job's changes cost is summed before it is judged ([`COST_SHARE`]).
pub const COST_WINDOW: Duration = Duration::from_secs(5);

/// What a job's changes cost the kernel's writes, in the writing thread's CPU time: in the window that began at
/// `since`, and in the one before it.
#[derive(Clone, Copy, Debug)]
pub struct Spent {
    /// When the window began.
    since: Instant,
    /// The CPU time the writes took in it.
    took: Duration,
    /// What its freezer writes took, and how many there were.
    freezes: (Duration, u32),
    /// The window before: what its writes took at its rate over [`COST_WINDOW`], and its freezer writes.
    before: (Duration, (Duration, u32)),
    /// How many freezer writes the window before made, at its rate over [`COST_WINDOW`].
    before_freezes: f64,
}

impl Default for Spent {
    fn default() -> Self {
        let none = (Duration::ZERO, 0);
        Self {
            since: Instant::now(),
            took: Duration::ZERO,
            freezes: none,
            before: (Duration::ZERO, none),
            before_freezes: 0.0,
        }
    }
}

/// What a job's changes cost over its last two windows ([`Spent`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostWindow {
    /// The share of a CPU they took.
    pub share: f64,
    /// How long the two windows lasted.
    pub over: Duration,
    /// What one freezer write took on the mean (`None`: none made): what the v1 freezer's lock, one for the whole
    /// machine, lengthens for every job alike while another holds it (a weight write takes another lock).
    pub per_freeze: Option<Duration>,
    /// How many freezer writes there were, the window before's at its rate (as [`CostWindow::share`] counts its
    /// time).
    pub freezes: f64,
}

impl Spent {
    /// Adds the writes of a change; at the end of a window, returns what the changes cost over it and the window
    /// before, and begins the next.
    fn add(&mut self, took: Took) -> Option<CostWindow> {
        self.took += took.cpu;
        self.freezes = (self.freezes.0 + took.freezes.0, self.freezes.1 + took.freezes.1);
        let elapsed = self.since.elapsed();
        if elapsed < COST_WINDOW {
            return None;
        }
        let (spent, over) = (self.before.0 + self.took, COST_WINDOW + elapsed);
        let (freeze_cpu, freezes) = (self.before.1 .0 + self.freezes.0, self.before.1 .1 + self.freezes.1);
        let per_freeze = (freezes > 0).then(|| freeze_cpu / freezes);
        let rate = COST_WINDOW.as_secs_f64() / elapsed.as_secs_f64();
        let counted = self.before_freezes + f64::from(self.freezes.1);
        *self = Self {
            before: (self.took.mul_f64(rate), self.freezes),
            before_freezes: f64::from(self.freezes.1) * rate,
            ..Self::default()
        };
        Some(CostWindow { share: spent.as_secs_f64() / over.as_secs_f64(), over, per_freeze, freezes: counted })
    }
}

/// What the slot loop judges of what a job's changes cost ([`verdict`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cost {
    /// The last window of [`Managed::spent`] that ended.
    pub window: Option<CostWindow>,
    /// Whether that window is yet to be judged.
    pub unjudged: bool,
    /// Whether the job was said to stay switched though past [`COST_SHARE`] (once).
    pub said_contended: bool,
}

/// What becomes of a job whose changes cost what `window` says.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It stays switched: within [`COST_SHARE`].
    Within,
    /// It stays switched, though past [`COST_SHARE`]: the freezer's lock took all of it beyond the share (why, to
    /// be said once). The v1 freezer's lock is one for the whole machine, and another user who holds it (reading a
    /// wide tree's `freezer.state`, which anyone may) makes every write wait for it, spinning in the writer's time:
    /// that is not the job's tree.
    Contended(String),
    /// Not judged yet: what the lock takes is being measured (the job's next window is judged).
    Measure,
    /// It is left to the kernel (why).
    Left(String),
}

/// The verdict on a job whose changes cost what `window` says, `lock` being what a freezer write of an empty
/// cgroup takes now. A job past [`COST_SHARE`] stays switched where its share less what its freezer writes would
/// have taken at the lock's mean is within [`COST_SHARE`]; it is left where more is its own tree's, where the lock
/// cannot be measured, where it made no freezer write (weight writes take another lock), or past
/// [`COST_SHARE_WHATEVER`], whatever the lock took.
pub fn verdict(window: &CostWindow, lock: LockWait) -> Verdict {
    if window.share <= COST_SHARE {
        return Verdict::Within;
    }
    let said = format!(
        "changes of its cgroups cost the kernel's writes {:.1} % of a CPU over {:.0} s, more than the {} % a job may",
        window.share * 100.0,
        window.over.as_secs_f64(),
        COST_SHARE * 100.0
    );
    let left = |also: &str| Verdict::Left(format!("{said}{also} (each write walks the cgroups and processes below)"));
    let Some(ours) = window.per_freeze.filter(|_| window.share <= COST_SHARE_WHATEVER) else { return left("") };
    let lock = match lock {
        LockWait::Unknown => return left(""),
        LockWait::Measuring => return Verdict::Measure,
        LockWait::Mean(lock) => lock.min(ours),
    };
    let lock_share = lock.as_secs_f64() * window.freezes / window.over.as_secs_f64();
    let own = window.share - lock_share;
    let writes = format!(
        "a freezer write of an empty cgroup took {:.0} µs on the mean, one of its {:.0} µs",
        lock.as_secs_f64() * 1e6,
        ours.as_secs_f64() * 1e6
    );
    if own <= COST_SHARE {
        Verdict::Contended(format!(
            "{said}, but {:.1} % of it was the freezer's lock ({writes}), not its tree",
            lock_share * 100.0
        ))
    } else {
        left(&format!(", {:.1} % beyond what the freezer's lock took ({writes})", own * 100.0))
    }
}

/// How long the kernel may take over one job's change for the job to be switched with the others at a slot's
/// start: half the 2 ms a slot switch may be late by (issue 59), over ten times what a job of one cgroup takes
/// (70 µs here). A v1 freezer write walks every cgroup and process below the one written, in the writer's time:
/// 2 to 9 ms for a delegated tree of 5,000 cgroups. A job past it is switched after every other job, so that what
/// its tree costs falls on it alone.
pub const PROMPT_SWITCH: Duration = Duration::from_millis(1);

/// What the store keeps of a managed job, to take it over again after a restart.
#[derive(Debug, Serialize, Deserialize)]
pub struct Saved {
    /// Where it came from.
    pub origin: Origin,
    /// Each group's directories.
    pub groups: Vec<Vec<PathBuf>>,
    /// PUs.
    pub pus: String,
    /// Row given from outside.
    pub pinned: Option<u32>,
    /// Owner's UID.
    #[serde(default)]
    pub owner: u32,
}

/// Why a change to a job's cgroups did not go through.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// A cgroup file of the job is gone: the job ended.
    #[error("cgroup file {0} is gone")]
    Gone(PathBuf),
    /// Anything else (the journal, a write the kernel refused): the job goes on, and the change is tried again.
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// What writes to a job's cgroups took.
#[derive(Clone, Copy, Debug, Default)]
struct Took {
    /// In wall time: what the slot waits for ([`Managed::switch_cost`]).
    wall: Duration,
    /// In the writing thread's CPU time: what they cost the agent ([`COST_SHARE`]).
    cpu: Duration,
    /// How many writes.
    writes: u32,
    /// What the freezer writes among them took in CPU time, and how many there were.
    freezes: (Duration, u32),
}

impl std::ops::AddAssign for Took {
    fn add_assign(&mut self, other: Self) {
        self.wall += other.wall;
        self.cpu += other.cpu;
        self.writes += other.writes;
        self.freezes = (self.freezes.0 + other.freezes.0, self.freezes.1 + other.freezes.1);
    }
}

/// A job's switch cost after a change whose writes took `took`, the estimate before it being `before`: the change's,
/// or half the estimate when more (a slow job is prompt again only after several quick changes).
fn switch_cost(before: Option<Duration>, took: Duration) -> Duration {
    before.map_or(took, |before| took.max(before / 2))
}

/// Opens cgroup file `file` for the writes that change it and put it back.
fn open(file: &Path) -> Result<File, ChangeError> {
    OpenOptions::new().write(true).open(file).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ChangeError::Gone(file.to_path_buf()),
        _ => anyhow::anyhow!("cannot open {}: {e}", file.display()).into(),
    })
}

/// Writes `value` to cgroup file `file` through `held`, its open descriptor (a cgroup file takes each write whole,
/// wherever the offset is); returns what the write took. A removed cgroup answers `ENODEV`: it is gone.
fn write(held: &File, file: &Path, value: &str) -> Result<Took, ChangeError> {
    let (started, cpu) = (Instant::now(), thread_cpu());
    let took =
        |_| Took { wall: started.elapsed(), cpu: thread_cpu().saturating_sub(cpu), writes: 1, ..Took::default() };
    held.write_at(value.as_bytes(), 0).map(took).map_err(|e| match (e.kind(), e.raw_os_error()) {
        (io::ErrorKind::NotFound, _) | (_, Some(libc::ENODEV)) => ChangeError::Gone(file.to_path_buf()),
        _ => anyhow::anyhow!("cannot write {value} to {}: {e}", file.display()).into(),
    })
}

impl Managed {
    /// The Slurm job it is, if the agent found it in Slurm's cgroups (only such a job has a Slurm key: never by
    /// its name).
    pub fn slurm_id(&self) -> Option<SlurmJobId> {
        self.key.slurm()
    }

    /// Whether it is the job `key` names: a Slurm job by its ID, any other by its name.
    pub fn is(&self, key: &JobKey) -> bool {
        self.key == *key
    }

    /// One cgroup directory per group of the job's processes (for a Slurm job, its `job_<id>` directory), to
    /// read what they use.
    pub fn count_dirs(&self) -> Vec<&Path> {
        match &self.origin {
            Origin::Slurm { dirs, .. } => dirs.first().map(PathBuf::as_path).into_iter().collect(),
            _ => self.groups.iter().filter_map(|g| g.dirs.first().map(PathBuf::as_path)).collect(),
        }
    }

    /// The description the store keeps.
    pub fn saved(&self) -> Saved {
        Saved {
            origin: self.origin.clone(),
            groups: self.groups.iter().map(|g| g.dirs.clone()).collect(),
            pus: self.pus.to_string(),
            pinned: self.pinned,
            owner: self.owner,
        }
    }

    /// The job `key` again from its description, unless every one of its cgroups is gone.
    pub fn restore_saved(key: JobKey, saved: Saved) -> Option<Self> {
        let groups: Vec<Group> =
            saved.groups.into_iter().filter(|d| d.iter().any(|p| p.is_dir())).map(Group::new).collect();
        if groups.is_empty() {
            return None;
        }
        Some(Self {
            key,
            groups,
            pus: CpuList::parse(&saved.pus).unwrap_or_default(),
            pinned: saved.pinned,
            place: None,
            row: saved.pinned.unwrap_or(0),
            round: 1,
            favoured: false,
            applied: Desired::default(),
            planned: Desired::default(),
            origin: saved.origin,
            owner: saved.owner,
            switch_cost: None,
            said_slow: false,
            spent: Spent::default(),
            cost: Cost::default(),
            left: None,
            halted: false,
            frozen_time: (Duration::ZERO, None),
            demand: Demand::default(),
        })
    }

    /// Whether the job is planned and switched: neither left to the kernel for its cost nor halted by Slurm.
    pub fn switched(&self) -> bool {
        self.left.is_none() && !self.halted
    }

    /// Follows [`Managed::frozen_time`] to `applied.frozen`: opens the interval at a freeze (unless one is open),
    /// closes it at a thaw, wherever `applied` changes (a switch, or a restore by the watchdog or at release).
    pub fn count_frozen_time(&mut self) {
        let (total, since) = &mut self.frozen_time;
        match (self.applied.frozen, *since) {
            (true, None) => *since = Some(Instant::now()),
            (false, Some(at)) => {
                *total += at.elapsed();
                *since = None;
            }
            _ => {}
        }
    }

    /// Seconds the agent has held the job frozen since it took it on.
    pub fn frozen_seconds(&self) -> f64 {
        let (total, since) = self.frozen_time;
        (total + since.map_or(Duration::ZERO, |at| at.elapsed())).as_secs_f64()
    }

    /// Why the job is not switched now, if it is not ([`Managed::switched`]).
    pub fn unswitched(&self) -> Option<String> {
        self.left.clone().or_else(|| self.halted.then(|| "its processes are stopped (Slurm suspended it)".to_string()))
    }

    /// Whether the job is known to switch promptly: a change of it has been measured ([`Managed::switch_cost`]),
    /// within [`PROMPT_SWITCH`]. A job not yet changed is not known to be prompt.
    pub fn prompt(&self) -> bool {
        self.switch_cost.is_some_and(|c| c <= PROMPT_SWITCH)
    }

    /// Brings the job's cgroups to `want`; returns the actions taken (freeze or thaw, boost or unboost). A change
    /// measures what the kernel's writes cost ([`Managed::switch_cost`]), and adds it to the job's window
    /// ([`COST_SHARE`]) even when a write of it failed: the writes made before it cost as much, and are made again
    /// at the next try. A window that ends is judged by the slot loop ([`Managed::cost`]).
    pub fn apply(&mut self, want: Desired, journal: &mut Journal, writer: &Writer) -> Result<Vec<Action>, ChangeError> {
        let mut took = Took::default();
        let changed = self.change(want, journal, writer, &mut took);
        if took.writes > 0 || matches!(&changed, Ok(actions) if !actions.is_empty()) {
            self.switch_cost = Some(switch_cost(self.switch_cost, took.wall));
        }
        if let Some(window) = self.spent.add(took) {
            self.cost = Cost { window: Some(window), unjudged: true, ..self.cost };
        }
        changed
    }

    /// Leaves the job to the kernel for `why` (said once): thawed and put back to its own weight at once, and
    /// never switched again until it ends. Returns the actions taken.
    pub fn leave(&mut self, why: String, journal: &mut Journal, writer: &Writer) -> Result<Vec<Action>, ChangeError> {
        log::warn!("job {}: {why}: left to the kernel, thawed and at its own weight, until it ends", self.key);
        self.left = Some(why);
        self.apply(Desired::default(), journal, writer)
    }

    /// The writes of [`Managed::apply`], adding what each took to `took` as it goes.
    fn change(
        &mut self,
        want: Desired,
        journal: &mut Journal,
        writer: &Writer,
        took: &mut Took,
    ) -> Result<Vec<Action>, ChangeError> {
        let mut actions = Vec::new();
        if want.frozen != self.applied.frozen {
            for g in &mut self.groups {
                let t = g.set_frozen(want.frozen, &self.key, journal, writer)?;
                *took += Took { freezes: (t.cpu, t.writes), ..t };
            }
            actions.push(if want.frozen { Action::Freeze } else { Action::Thaw });
            self.applied.frozen = want.frozen;
            self.count_frozen_time();
        }
        if want.boosted != self.applied.boosted {
            for g in &mut self.groups {
                *took += g.set_boosted(want.boosted, &self.key, journal, writer)?;
            }
            actions.push(if want.boosted { Action::Boost } else { Action::Unboost });
            self.applied.boosted = want.boosted;
        }
        Ok(actions)
    }

    /// Adds a cgroup to the job (a Slurm step that started) in the state the job is in.
    pub fn add_group(&mut self, dirs: Vec<PathBuf>, journal: &mut Journal, writer: &Writer) -> Result<(), ChangeError> {
        let mut g = Group::new(dirs);
        if self.applied.frozen {
            g.set_frozen(true, &self.key, journal, writer)?;
        }
        if self.applied.boosted {
            g.set_boosted(true, &self.key, journal, writer)?;
        }
        self.groups.push(g);
        Ok(())
    }

    /// Drops the cgroups that are gone (a step that ended) with their journal entries, while the job goes on.
    pub fn prune(&mut self, journal: &mut Journal) {
        let (gone, kept): (Vec<Group>, Vec<Group>) =
            std::mem::take(&mut self.groups).into_iter().partition(|g| !g.dirs.iter().any(|d| d.is_dir()));
        self.groups = kept;
        for g in &gone {
            g.forget(journal);
        }
    }

    /// Puts everything back (thaw, weights) and, for adopted processes, moves them back where they were and
    /// removes the cgroup the agent created (for an ended Slurm job, its weight cgroup). Files already gone are
    /// fine.
    pub fn release(&mut self, journal: &mut Journal, writer: &Writer) -> anyhow::Result<()> {
        match self.apply(Desired::default(), journal, writer) {
            Err(ChangeError::Gone(_)) => self.forget_all(journal),
            other => {
                other?;
            }
        }
        self.origin.put_back();
        Ok(())
    }

    /// Whether the job has ended: every cgroup of it is gone, or the processes the agent adopted into a cgroup of
    /// its own have all exited. A cgroup whose processes cannot be listed (no descriptor left) has not ended: a
    /// job is forgotten only on evidence, never on a failed read.
    pub fn ended(&self) -> bool {
        match &self.origin {
            Origin::Pids { created, .. } => created.pids().is_ok_and(|p| p.is_empty()),
            Origin::Slurm { dirs, .. } => !dirs.iter().any(|d| d.is_dir()),
            _ => !self.groups.iter().any(|g| g.dirs.iter().any(|d| d.is_dir())),
        }
    }

    /// For a job of processes adopted into a cgroup of the agent's: removes that cgroup if no process is left in
    /// it, which tells that the job has ended without a descriptor (the kernel refuses `rmdir` of a cgroup a
    /// process is in). Whether it is gone; `false` for every other job.
    pub fn remove_if_ended(&self) -> bool {
        let Origin::Pids { created, .. } = &self.origin else { return false };
        let removed = |d: &PathBuf| remove_dir(d).map_or_else(|e| e.kind() == io::ErrorKind::NotFound, |()| true);
        // Every one tried (no short cut): each hierarchy's directory goes on its own.
        let gone: Vec<bool> = created.dirs.iter().map(removed).collect();
        gone.into_iter().all(|g| g)
    }

    /// How far the agent looks into the job's cgroup tree: a Slurm job's processes are where Slurm puts them
    /// ([`crate::slurm::STEPS`]), deeper is its user's own making; any other job's whole tree, within
    /// [`JOB_TREE`].
    pub fn bounds(&self) -> Bounds {
        match self.origin {
            Origin::Slurm { .. } => crate::slurm::STEPS,
            _ => JOB_TREE,
        }
    }

    /// The job's processes on this node (as far as [`Managed::bounds`] look).
    pub fn pids(&self) -> Vec<i32> {
        match &self.origin {
            Origin::Pids { created, .. } => created.pids().unwrap_or_default(),
            _ => {
                procs_within(&self.groups.iter().filter_map(|g| g.dirs.first()).collect::<Vec<_>>(), self.bounds())
                    .procs
            }
        }
    }

    /// Drops the journal entries of a job whose cgroups are gone (nothing left to restore).
    fn forget_all(&mut self, journal: &mut Journal) {
        for g in &self.groups {
            g.forget(journal);
        }
        self.applied = Desired::default();
        self.count_frozen_time();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cpu` of the writing thread's time in one write.
    fn write_of(cpu: Duration) -> Took {
        Took { wall: cpu, cpu, writes: 1, freezes: (cpu, 1) }
    }

    /// Ends `spent`'s window after a last write that took `took`; returns its share of a CPU and how long it lasted.
    fn window(spent: &mut Spent, took: Duration) -> (f64, Duration) {
        spent.since -= COST_WINDOW;
        let w = spent.add(write_of(took)).unwrap();
        (w.share, w.over)
    }

    #[test]
    fn what_changes_cost_is_judged_once_per_window_over_it_and_the_one_before() {
        let ms = Duration::from_millis;
        let mut spent = Spent::default();
        assert_eq!(spent.add(write_of(ms(40))), None, "judged before its window ended");
        // 120 ms in a job's first window: with the empty one before it, 1.2 % over a little more than 10 s.
        spent.since -= COST_WINDOW;
        let w = spent.add(write_of(ms(80))).unwrap();
        assert!(w.share > 0.0119 && w.share <= 0.012, "{w:?}");
        assert!(w.over >= COST_WINDOW * 2 && w.over < COST_WINDOW * 3, "{w:?}");
        assert_eq!(w.per_freeze, Some(ms(60)), "two writes of 40 and 80 ms");
        assert!((w.freezes - 2.0).abs() < 1e-9, "{w:?}");
        assert_eq!((spent.took, spent.freezes), (Duration::ZERO, (Duration::ZERO, 0)), "the next window begins empty");
        assert_eq!(spent.add(write_of(ms(1))), None);
        // Then 20 ms: (120 + 20) ms over two windows, 140 ms over four writes.
        spent.since -= COST_WINDOW;
        let w = spent.add(write_of(ms(19))).unwrap();
        assert!(w.share > 0.0139 && w.share <= 0.014, "{w:?}");
        assert_eq!(w.per_freeze, Some(ms(35)));
        assert!(w.freezes > 3.99 && w.freezes <= 4.0, "the window before's two at its rate: {w:?}");
        // Weight writes count in the share, not in what a freezer write takes.
        spent.since -= COST_WINDOW;
        let weight = Took { wall: ms(30), cpu: ms(30), writes: 1, freezes: (Duration::ZERO, 0) };
        let w = spent.add(weight).unwrap();
        assert!(w.share > 0.0049 && w.share <= 0.005, "{w:?}");
        assert_eq!(w.per_freeze, Some(ms(10)), "the two freezer writes of the window before");
    }

    #[test]
    fn one_window_of_noise_is_forgiven_and_windows_dear_and_cheap_in_turn_are_not() {
        let ms = Duration::from_millis;
        let mut spent = Spent::default();
        window(&mut spent, ms(5));
        // A window at 1.8 %, between quiet ones: under 1 % over each pair.
        assert!(window(&mut spent, ms(90)).0 < COST_SHARE);
        assert!(window(&mut spent, ms(5)).0 < COST_SHARE);
        // 2.2 % and nothing in turn: over 1 % over every pair.
        for took in [ms(110), ms(0), ms(110), ms(0)] {
            let (share, _) = window(&mut spent, took);
            assert!(share > COST_SHARE, "{share} after a window of {took:?}");
        }
        // A window drawn out by a stall of the slot loop weighs as one at its rate: 300 ms over 5 minutes and then
        // 40 ms count as (5 + 40) ms, not 340.
        spent.since -= Duration::from_mins(5);
        assert!(window(&mut spent, ms(300)).0 < COST_SHARE);
        let (share, over) = window(&mut spent, ms(40));
        assert!(share > 0.0044 && share < 0.0046 && over < COST_WINDOW * 3, "{share} over {over:?}");
    }

    #[test]
    fn a_job_past_the_share_is_left_unless_the_freezer_s_lock_took_what_is_past_it() {
        let us = Duration::from_micros;
        // 100 freezer writes over 10 s, each of `per_write` on the mean.
        let at = |share: f64, per_write: u64| CostWindow {
            share,
            over: COST_WINDOW * 2,
            per_freeze: Some(us(per_write)),
            freezes: 100.0,
        };
        assert_eq!(verdict(&at(0.009, 900), LockWait::Unknown), Verdict::Within);
        // 1.1 %, of which writes of an empty cgroup at 800 µs would have taken 0.8 %: the lock, not its tree.
        let Verdict::Contended(why) = verdict(&at(0.011, 1100), LockWait::Mean(us(800))) else { panic!() };
        assert!(
            why.contains("1.1 % of a CPU over 10 s") && why.contains("0.8 % of it was the freezer's lock"),
            "{why}"
        );
        // A user's own jobs are judged each against the lock, not against each other: two alike at 2 % are left.
        assert!(matches!(verdict(&at(0.02, 2000), LockWait::Mean(us(100))), Verdict::Left(_)));
        // A dear tree beside a held lock: 2.6 %, 1.5 % of it beyond the lock's 1.1 %.
        let Verdict::Left(why) = verdict(&at(0.026, 2600), LockWait::Mean(us(1100))) else { panic!() };
        assert!(why.contains("1.5 % beyond what the freezer's lock took"), "{why}");
        // A lock measured dearer than the job's own writes counts as theirs at most.
        assert!(matches!(verdict(&at(0.025, 300), LockWait::Mean(us(5000))), Verdict::Left(_)));
        // Not yet measured: judged at the next window. Not measurable, past the share whatever the lock took, or
        // no freezer write at all: left.
        assert_eq!(verdict(&at(0.015, 1500), LockWait::Measuring), Verdict::Measure);
        assert!(matches!(verdict(&at(0.015, 1500), LockWait::Unknown), Verdict::Left(_)));
        assert!(matches!(verdict(&at(0.031, 3100), LockWait::Mean(us(3100))), Verdict::Left(_)));
        let weights = CostWindow { per_freeze: None, freezes: 0.0, ..at(0.015, 0) };
        assert!(matches!(verdict(&weights, LockWait::Mean(us(100))), Verdict::Left(_)));
    }

    #[test]
    fn a_job_is_prompt_once_measured_quick_and_slow_for_some_changes_after_a_slow_one() {
        let ms = Duration::from_millis;
        let mut job = Managed::restore_saved(
            "j".parse().unwrap(),
            Saved { origin: Origin::Run, groups: vec![vec!["/".into()]], pus: String::new(), pinned: None, owner: 0 },
        )
        .unwrap();
        assert!(!job.prompt(), "a job never changed is not known to be prompt");
        job.switch_cost = Some(switch_cost(None, Duration::from_micros(70)));
        assert!(job.prompt());
        // A freeze of a wide tree: 8 ms; then quick writes bring it back after a few changes, not at once.
        let mut cost = switch_cost(job.switch_cost, ms(8));
        let mut slow = 0;
        while cost > PROMPT_SWITCH {
            cost = switch_cost(Some(cost), Duration::from_micros(70));
            slow += 1;
        }
        assert_eq!(slow, 3, "8 ms halves to 4, 2, 1");
    }

    #[test]
    fn adopted_processes_keep_their_start_time_and_bare_pids_of_old_stores_move_nobody() {
        let me = ProcessRef::of(std::process::id() as i32).unwrap();
        let procs = PathBuf::from("/sys/fs/cgroup/freezer/cgroup.procs");
        let created = JobCgroup { version: lockstep_cgroup::Version::V1, dirs: Vec::new() };
        let now = Origin::Pids { moved: vec![(me, vec![procs.clone()])], created };
        let text = serde_json::to_string(&now).unwrap();
        let Origin::Pids { moved, .. } = serde_json::from_str(&text).unwrap() else { panic!("{text}") };
        assert_eq!(moved, [(me, vec![procs.clone()])]);
        let old = format!(
            r#"{{"kind":"pids","moved":[[{},["{}"]]],"created":{{"version":"v1","dirs":[]}}}}"#,
            me.pid,
            procs.display()
        );
        let Origin::Pids { moved, .. } = serde_json::from_str(&old).unwrap() else { panic!("{old}") };
        assert_eq!(moved[0].0.pid, me.pid);
        assert!(!moved[0].0.alive(), "a bare PID from an old store must never name a live process");
    }
}
