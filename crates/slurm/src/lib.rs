//! Slurm as lockstep talks to it: what `squeue` says about jobs (only fields no user
//! writes) and `scontrol` about nodes, and the co-scheduling place the controller's prolog gives each job, kept in
//! the job's `AdminComment` (which only administrators can change) as `lockstep_row=ROW/PERIOD`, with
//! `lockstep_from=MS lockstep_before=ROW/PERIOD` while a change is pending (docs/policies/gang.md), and
//! `lockstep_run=N`, the run it was given for: Slurm's restart count then (a requeued job runs again with the
//! count one higher, and a place of an earlier run is none). `lockstep_row=ROW` alone is a row of each node's own
//! cycle (`prolog-slurmctld --rows node`, as before cluster-wide places). The field is shared: lockstep's words
//! follow whatever else it holds, which every write keeps byte for byte, and the controller's epilog takes them out
//! again at the end of a run after which the job runs again (requeued; [`without_ours`]), so that tools that write
//! the field then (a jobstats-like summary) find it as they would without lockstep. A finished job's stay: Slurm
//! changes nothing of a finished job.

pub mod client;
pub mod config;
pub mod error;
pub mod hostlist;
pub mod push;

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

use client::{run_with_timeout, scontrol, Refusal};
pub use error::{Error, Result};
use nix::fcntl::{Flock, FlockArg};

use lockstep_core::cosched::rows::{Place, Schedule, MAX_ROWS};
pub use lockstep_core::job::SlurmJobId;
use lockstep_core::trust;

/// The `AdminComment` key of a job's row or place (`lockstep_row=3` or `lockstep_row=1/4`).
pub const ROW_KEY: &str = "lockstep_row=";
/// The `AdminComment` key of when a pending change of place takes effect (ms since the Unix epoch).
const FROM_KEY: &str = "lockstep_from=";
/// The `AdminComment` key of the place until then.
const BEFORE_KEY: &str = "lockstep_before=";
/// The `AdminComment` key of the run a place was given for: the job's restart count (`RestartCnt`) when it was
/// given. A comment without it (written before lockstep recorded runs) holds a place of run 0.
const RUN_KEY: &str = "lockstep_run=";
/// The `AdminComment` key of the job a place was given to: a job array's tasks that had not started yet when one
/// task was placed inherit its `AdminComment` as Slurm splits them off, and the place is not theirs. A comment
/// without it (written before lockstep recorded it) is taken as the job's own.
const JOB_KEY: &str = "lockstep_job=";

/// How long the agents of a job whose place changes have to learn it before it takes effect, unless the
/// controller's hooks are given another (`--change-margin`): the controller's notice reaches them within its two
/// tries ([`push`]); an agent that asks slurmctld instead, within a few of its [`REFRESH`] intervals.
pub const CHANGE_MARGIN: Duration = Duration::from_secs(5);

/// How often an agent that runs Slurm jobs and cannot be told their places (no metrics door for the controller's
/// notices) reads them again (a change reaches it within this).
pub const REFRESH: Duration = Duration::from_secs(2);

/// A job's co-scheduling row, as its `AdminComment` holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Row {
    /// A row of each node's own cycle (`k mod` the node's row count): agrees across nodes only where they run
    /// the same jobs.
    Node(u32),
    /// A place in the cluster-wide matrix, with its pending change.
    Cluster(Schedule),
}

/// How the controller's prolog gives rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RowMode {
    /// Cluster-wide places: every node of a job favours it in the same slots.
    #[default]
    Cluster,
    /// Rows of each node's own cycle (what lockstep did before cluster-wide places; kept for comparisons).
    Node,
}

/// What Slurm says of a job: only fields that no user can write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobInfo {
    /// Job ID.
    pub id: SlurmJobId,
    /// `JobState` (RUNNING, CONFIGURING, …).
    pub state: String,
    /// `NodeList`, expanded.
    pub nodes: Vec<String>,
    /// `RestartCnt`: how many times the job was requeued (by `scontrol requeue`, or by Slurm after a node
    /// failure); its run now is run `restarts`.
    pub restarts: u32,
    /// For a task of a job array that runs as a job of its own: the array's job ID and the task's index
    /// (`ArrayJobID`, `ArrayTaskID`).
    pub array_task: Option<(SlurmJobId, u32)>,
    /// For a component of a heterogeneous job (`sbatch -n1 : -n4`, each component a job of its own, on nodes of
    /// its own): the heterogeneous job's ID, its first component's (`HetJobID`). Its components share one place.
    pub het_job: Option<SlurmJobId>,
    /// `AdminComment`.
    pub admin_comment: String,
}

impl JobInfo {
    /// The row or place the controller's prolog gave the job for the run it is in (words that do not parse count
    /// as none). A place given for another run (the job was requeued since) is none: the neighbours it had may
    /// have ended, and jobs placed while it was pending did not make room for it.
    pub fn row(&self) -> Option<Row> {
        let run = self.word(RUN_KEY).map_or(Some(0), |r| r.parse::<u32>().ok());
        let job = self.word(JOB_KEY).map_or(Some(self.id.0), |j| j.parse::<u64>().ok());
        if run != Some(self.restarts) || job != Some(self.id.0) {
            return None;
        }
        self.recorded_row()
    }

    /// The word of `key` in the `AdminComment` (its first), without the key.
    fn word(&self, key: &str) -> Option<&str> {
        self.admin_comment.split_whitespace().find_map(|w| w.strip_prefix(key))
    }

    /// The row or place the `AdminComment` holds, for whichever run it was given.
    fn recorded_row(&self) -> Option<Row> {
        let word = |key: &str| self.word(key);
        let row = word(ROW_KEY)?;
        if !row.contains('/') {
            return row.parse().ok().filter(|&r| r < MAX_ROWS).map(Row::Node);
        }
        let place: Place = row.parse().ok()?;
        let from_ms = word(FROM_KEY).and_then(|t| t.parse().ok()).unwrap_or(0);
        let before = word(BEFORE_KEY).and_then(|p| p.parse().ok());
        Some(Row::Cluster(Schedule { place, from_ms, before }))
    }

    /// The job's place as it will be once pending changes took effect.
    fn place(&self) -> Option<Place> {
        match self.row()? {
            Row::Cluster(s) => Some(s.place),
            Row::Node(_) => None,
        }
    }

    /// Whether the job shares a node with `other` and holds it now (the components of one heterogeneous job are not
    /// neighbours: they share their place).
    fn neighbour_of(&self, other: &JobInfo) -> bool {
        self.id != other.id
            && (self.het_job.is_none() || self.het_job != other.het_job)
            && self.holds_nodes()
            && self.nodes.iter().any(|n| other.nodes.contains(n))
    }

    /// How `scontrol update` names this job alone: `ARRAY_TASK` for a task of a job array (the array's ID, which a
    /// task may hold, names every task of the array), its ID for any other.
    fn scontrol_id(&self) -> String {
        self.array_task.map_or_else(|| self.id.to_string(), |(array, task)| format!("{array}_{task}"))
    }

    /// Whether Slurm holds the job halted (suspended or stopped): its processes are stopped, its nodes kept.
    pub fn halted(&self) -> bool {
        matches!(self.state.as_str(), "SUSPENDED" | "STOPPED")
    }

    /// Whether the job has finished for good (a state of squeue's for a job that will not run again): Slurm then
    /// changes nothing of it.
    fn finished(&self) -> bool {
        const FINAL: [&str; 10] = [
            "BOOT_FAIL",
            "CANCELLED",
            "COMPLETED",
            "DEADLINE",
            "FAILED",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
            "PREEMPTED",
            "REVOKED",
            "TIMEOUT",
        ];
        FINAL.contains(&self.state.as_str())
    }

    /// Whether the job holds its nodes now (so its row is taken there).
    pub fn holds_nodes(&self) -> bool {
        matches!(self.state.as_str(), "RUNNING" | "CONFIGURING" | "SUSPENDED")
    }

    /// One job from a line of `squeue -h -O` [`JOB_FORMAT`]: its ID, state, node list, restart count, array job ID,
    /// array task ID and heterogeneous job ID (which only Slurm writes, none with a `|`), each ended by a `|`, then
    /// its `AdminComment` (which only an administrator or the controller's prolog writes) as the rest of the line.
    /// `None` for a line that is not one.
    pub fn parse(line: &str) -> Option<Self> {
        let mut parts = line.splitn(FIELDS, FIELD_END);
        let (id, state, nodes) = (parts.next()?.trim(), parts.next()?.trim(), parts.next()?.trim());
        let restarts = parts.next()?.trim();
        let (array, task) = (parts.next()?.trim(), parts.next()?.trim());
        let het = parts.next()?.trim();
        let comment = parts.next()?.trim();
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        // A task of an array running as a job of its own has a single index; the array's record of its tasks not
        // started yet a range (`2-9`), and a job of no array `N/A`.
        let array_task = match (digits(array), digits(task)) {
            (true, true) => Some((SlurmJobId(array.parse().ok()?), task.parse().ok()?)),
            (true, false) => None,
            (false, _) => return None,
        };
        // A job of no heterogeneous job: `N/A` (or 0).
        let het_job = match het {
            "N/A" | "0" | "" => None,
            id if digits(id) => Some(SlurmJobId(id.parse().ok()?)),
            _ => return None,
        };
        let state_ok = !state.is_empty() && state.chars().all(|c| c.is_ascii_uppercase() || c == '_');
        if !state_ok {
            return None;
        }
        let nodes = match nodes {
            "" | "(null)" => Vec::new(),
            list => hostlist::expand(list).ok()?,
        };
        Some(Self {
            id: id.parse().ok()?,
            state: state.to_string(),
            nodes,
            restarts: if restarts.bytes().all(|b| b.is_ascii_digit()) { restarts.parse().ok()? } else { return None },
            array_task,
            het_job,
            admin_comment: if comment == "(null)" { String::new() } else { comment.to_string() },
        })
    }
}

/// What ends each field but the last in `squeue`'s output: no job ID, state or host list holds it.
const FIELD_END: char = '|';

/// The fields lockstep asks `squeue -O` for, in this order: ID, state, node list, restart count, array job ID,
/// array task ID, heterogeneous job ID, `AdminComment` (last, so that whatever it holds is the rest of the line).
/// Each field is as wide as its value (size 0: never cut, never padded), the first seven ended by [`FIELD_END`]. No field a user sets (job name, comment, work
/// directory, command) is asked for: none can be taken for another.
pub const JOB_FORMAT: &str =
    "JobID:0|,State:0|,NodeList:0|,RestartCnt:0|,ArrayJobID:0|,ArrayTaskID:0|,HetJobID:0|,admin_comment:0";

/// The fields of [`JOB_FORMAT`].
const FIELDS: usize = 8;

/// The `Key=Value` fields of one `scontrol -o show node` line. A value may hold spaces: a word that does not
/// start with a key (Slurm's keys start with a capital: `NodeAddr`, `CPUTot`) continues the value before it. Only
/// for records no user writes: a job's line holds its user-chosen name and comment, which can look like keys.
pub fn fields(line: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for word in line.split_whitespace() {
        let key = word.split_once('=').map(|(k, _)| k).filter(|k| {
            k.starts_with(|c: char| c.is_ascii_uppercase())
                && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '/' | '_'))
        });
        match (key, out.last_mut()) {
            (Some(k), _) => out.push((k.to_string(), word[k.len() + 1..].to_string())),
            (None, Some((_, v))) => {
                v.push(' ');
                v.push_str(word);
            }
            (None, None) => {}
        }
    }
    out
}

/// Whether Slurm time-slices jobs itself under preemption mode `mode` (its `GANG`): two time slicers on one node
/// would each stop jobs in slots of their own.
pub fn slices_time(mode: &str) -> bool {
    mode.split(',').any(|m| m.trim().eq_ignore_ascii_case("GANG"))
}

/// Job `id`, if Slurm knows it.
pub fn show_job(id: SlurmJobId) -> Result<Option<JobInfo>> {
    match run_with_timeout("squeue", &["-h", "-t", "all", "-j", &id.to_string(), "-O", JOB_FORMAT]) {
        Ok(text) => Ok(records(&text).iter().filter_map(|r| JobInfo::parse(r)).find(|j| j.id == id)),
        Err(e) if e.refused(Refusal::UnknownJob) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every job slurmctld knows.
fn jobs() -> Result<Vec<JobInfo>> {
    let text = run_with_timeout("squeue", &["-h", "-t", "all", "-O", JOB_FORMAT])?;
    Ok(records(&text).iter().filter_map(|r| JobInfo::parse(r)).collect())
}

/// The jobs' records in `squeue -O` [`JOB_FORMAT`] output, one a job: each is a line, but for an `AdminComment`
/// that holds line breaks (an administrator can write one with scontrol; squeue prints it as it is), whose lines
/// after the first continue the record before them. A record starts with a line of at least [`FIELDS`] fields
/// (one `|` fewer) whose first starts with a digit and holds no whitespace: a job ID. (A line of a comment that looks so
/// starts a record of its own: only administrators write the field.)
pub fn records(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let id = line.split(FIELD_END).next().unwrap_or_default();
        let starts = line.matches(FIELD_END).count() >= FIELDS - 1
            && id.starts_with(|c: char| c.is_ascii_digit())
            && !id.contains(char::is_whitespace);
        match out.last_mut() {
            Some(record) if !starts => {
                record.push('\n');
                record.push_str(line);
            }
            _ => out.push(line.to_string()),
        }
    }
    out
}

/// The address of node `name` (`NodeAddr`).
pub fn node_addr(name: &str) -> Result<String> {
    let text = scontrol(&["-o", "show", "node", name])?;
    fields(text.lines().next().unwrap_or_default())
        .into_iter()
        .find(|(k, _)| k == "NodeAddr")
        .map(|(_, v)| v)
        .ok_or_else(|| Error::Unreadable(format!("scontrol shows no NodeAddr for node {name}")))
}

/// The lowest row of the nodes' own cycles that no job sharing a node with `job` holds ([`RowMode::Node`]).
pub fn free_row(job: &JobInfo, others: &[JobInfo]) -> u32 {
    let taken: Vec<u32> = others
        .iter()
        .filter(|o| o.neighbour_of(job))
        .filter_map(|o| match o.row()? {
            Row::Node(r) => Some(r),
            Row::Cluster(s) => Some(s.place.row),
        })
        .collect();
    // Among the `taken.len() + 1` lowest rows one is free.
    (0..=taken.len() as u32).find(|r| !taken.contains(r)).expect("a free row exists")
}

/// The largest place (smallest period, then lowest row) that overlaps none of `taken`.
pub fn free_place(taken: &[Place]) -> Option<Place> {
    // Past the largest period in `taken`, a longer period frees no slot a shorter one does not.
    let longest = taken.iter().map(|p| p.period).max().unwrap_or(1);
    std::iter::successors(Some(1u32), |p| (*p < longest).then(|| p * 2))
        .flat_map(|period| (0..period).map(move |row| Place { row, period }))
        .find(|p| !taken.iter().any(|t| t.overlaps(*p)))
}

/// A running job's place changing: `(job ID, new place)`.
pub type Change = (SlurmJobId, Place);

/// The place of a new job `job`, and the changes to running jobs that make room for it (`others`: every job
/// slurmctld knows). Its neighbours (running jobs sharing one of its nodes) keep their places if a place none of
/// them overlaps is left; else the neighbour with the largest share gives up half of it, until one is. A
/// neighbour already at [`MAX_ROWS`] cannot be halved: then the job shares the place of the neighbour with the
/// longest period (they run together in its slots, as under `cfs`).
pub fn place_new(job: &JobInfo, others: &[JobInfo]) -> (Place, Vec<Change>) {
    let mut neighbours: Vec<(SlurmJobId, Place)> =
        others.iter().filter(|o| o.neighbour_of(job)).filter_map(|o| Some((o.id, o.place()?))).collect();
    let mut changes: Vec<Change> = Vec::new();
    loop {
        let taken: Vec<Place> = neighbours.iter().map(|n| n.1).collect();
        if let Some(place) = free_place(&taken) {
            return (place, changes);
        }
        let largest = neighbours.iter_mut().min_by_key(|(id, p)| (p.period, *id)).expect("a full cycle has holders");
        if largest.1.period >= MAX_ROWS {
            let fullest = neighbours.iter().max_by_key(|(id, p)| (p.period, std::cmp::Reverse(*id)));
            return (fullest.expect("neighbours").1, changes);
        }
        largest.1 = largest.1.halves()[0];
        let (id, place) = *largest;
        changes.retain(|c| c.0 != id);
        changes.push((id, place));
    }
}

/// The changes that give running jobs back what job `ended` held: every running job that shared a node with
/// it, the smallest share first, moves to the largest place none of its other neighbours overlaps, when that is
/// larger than its own.
pub fn grow_after(ended: &JobInfo, others: &[JobInfo]) -> Vec<Change> {
    let running: Vec<&JobInfo> = others.iter().filter(|o| o.id != ended.id && o.holds_nodes()).collect();
    let mut places: Vec<Option<Place>> = running.iter().map(|o| o.place()).collect();
    let mut order: Vec<usize> =
        (0..running.len()).filter(|&i| places[i].is_some() && running[i].neighbour_of(ended)).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(places[i].map(|p| p.period)), running[i].id));
    let mut changes: Vec<Change> = Vec::new();
    for i in order {
        let taken: Vec<Place> = (0..running.len())
            .filter(|&j| j != i && running[j].neighbour_of(running[i]))
            .filter_map(|j| places[j])
            .collect();
        let (Some(now), Some(best)) = (places[i], free_place(&taken)) else { continue };
        if best.period < now.period {
            places[i] = Some(best);
            changes.push((running[i].id, best));
        }
    }
    changes
}

/// The keys of lockstep's words in an `AdminComment`.
const KEYS: [&str; 5] = [ROW_KEY, FROM_KEY, BEFORE_KEY, RUN_KEY, JOB_KEY];

/// Whether `word`, one of an `AdminComment`'s whitespace-separated words, is lockstep's: it starts with one of
/// lockstep's keys, as the words [`JobInfo::row`] reads do (`lockstep_row=x` too, which it reads as no row). A key
/// inside another word (`note=lockstep_row=1/2`, `JS1:…`) is another tool's.
fn is_ours(word: &str) -> bool {
    KEYS.iter().any(|k| word.starts_with(k))
}

/// `comment` without lockstep's words, everything else byte for byte: each word of lockstep's goes with the
/// whitespace before it, or, when no other word comes before it, with the whitespace after it (what [`with_row`]
/// adds is taken away again). A comment with none of lockstep's words comes back as it is; one with only
/// lockstep's words comes back empty.
pub fn without_ours(comment: &str) -> String {
    let mut out = String::with_capacity(comment.len());
    let mut rest = comment;
    // Whether another word was kept yet, and whether the whitespace before the next word goes (a word of
    // lockstep's that no other word came before took it).
    let (mut kept, mut drop_space) = (false, false);
    loop {
        let word_at = rest.len() - rest.trim_start().len();
        let (space, after) = rest.split_at(word_at);
        let word_len = after.find(char::is_whitespace).unwrap_or(after.len());
        let (word, next) = after.split_at(word_len);
        if word.is_empty() {
            if !drop_space {
                out.push_str(space);
            }
            return out;
        }
        if is_ours(word) {
            if !kept && !drop_space {
                out.push_str(space);
            }
            drop_space = !kept;
        } else {
            if !drop_space {
                out.push_str(space);
            }
            out.push_str(word);
            (kept, drop_space) = (true, false);
        }
        rest = next;
    }
}

/// `job`'s `AdminComment` with its row words replaced by `words` and the run they are for, the job's run now:
/// whatever else it holds (another tool's or an administrator's) is kept byte for byte ([`without_ours`]), and
/// lockstep's words follow it, after one space.
fn with_row(job: &JobInfo, words: &[String]) -> String {
    let mut out = without_ours(&job.admin_comment);
    let stamp = [format!("{RUN_KEY}{}", job.restarts), format!("{JOB_KEY}{}", job.id)];
    for word in words.iter().chain(&stamp) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// The row words of a running job's place changing to `place` at `from_ms` (it keeps `before` until then).
fn change_words(place: Place, before: Option<Place>, from_ms: u64) -> Vec<String> {
    let mut words = vec![format!("{ROW_KEY}{place}"), format!("{FROM_KEY}{from_ms}")];
    words.extend(before.map(|b| format!("{BEFORE_KEY}{b}")));
    words
}

/// Lock file that serialises row assignment when slurmctld runs several prologs at once: in a directory of the
/// prologs' user (root or SlurmUser) alone, so that no other user can take the lock first and stall every job's
/// start.
fn lock_path() -> PathBuf {
    std::env::var_os("LOCKSTEP_SLURM_LOCK")
        .map_or_else(|| PathBuf::from("/run/lockstep-slurm/rows.lock"), PathBuf::from)
}

/// How long a prolog waits for the row lock before it gives up (the job then goes on without a place).
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Runs `f` over every job slurmctld knows, with the row lock held (waiting at most [`LOCK_WAIT`] for it).
fn locked<T>(f: impl FnOnce(Vec<JobInfo>) -> Result<T>) -> Result<T> {
    let path = lock_path();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        trust::ensure_dir(dir, 0o700, "the row lock's directory").map_err(|e| Error::Lock(format!("{e:#}")))?;
    }
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(&path)
        .map_err(|e| Error::Lock(format!("cannot open lock file {}: {e}", path.display())))?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    let _lock = loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => break lock,
            Err((f, nix::errno::Errno::EWOULDBLOCK)) if std::time::Instant::now() < deadline => {
                file = f;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                return Err(Error::Lock(format!(
                    "cannot lock {}: another process has held it for {} s",
                    path.display(),
                    LOCK_WAIT.as_secs()
                )))
            }
            Err((_, e)) => return Err(Error::Lock(format!("cannot lock {}: {e}", path.display()))),
        }
    };
    f(jobs()?)
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Running jobs' changes of place as written: the jobs as they are now, and those that finished after `squeue`
/// listed them (slurmctld changes no finished job's field, and a finished job needs no place).
struct Applied {
    /// The jobs whose place was written, each as it is now.
    updated: Vec<JobInfo>,
    /// Each change written.
    moved: Vec<Change>,
    /// The jobs that finished meanwhile, left as they are.
    ended: Vec<SlurmJobId>,
}

impl Applied {
    /// What the hook's log line says of the changes: `"; {what}: 2 -> 0/1"`, then which jobs ended meanwhile.
    fn said(&self, what: &str) -> String {
        let mut parts = Vec::new();
        if !self.moved.is_empty() {
            let moved: Vec<String> = self.moved.iter().map(|(id, place)| format!("{id} -> {place}")).collect();
            parts.push(format!("; {what}: {}", moved.join(", ")));
        }
        if !self.ended.is_empty() {
            let ended: Vec<String> = self.ended.iter().map(ToString::to_string).collect();
            parts.push(format!("; ended meanwhile, left as they are: {}", ended.join(", ")));
        }
        parts.concat()
    }
}

/// Writes running jobs' changes of place, each effective `margin` from now. A job that finished since `all` was
/// read (its own end's epilog runs beside this hook) is left out; any other failure fails the whole.
fn apply_changes(all: &[JobInfo], changes: &[Change], margin: Duration) -> Result<Applied> {
    let from_ms = now_ms().saturating_add(u64::try_from(margin.as_millis()).unwrap_or(u64::MAX));
    let mut applied = Applied { updated: Vec::new(), moved: Vec::new(), ended: Vec::new() };
    for &(id, place) in changes {
        let Some(job) = all.iter().find(|j| j.id == id) else { continue };
        // The place the job's nodes use until the change: what is in force now.
        let before = match job.row() {
            Some(Row::Cluster(s)) => Some(s.at(now_ms())),
            _ => None,
        };
        match update_comment(job, with_row(job, &change_words(place, before, from_ms))) {
            Ok(now) => {
                applied.updated.push(now);
                applied.moved.push((id, place));
            }
            Err(e) if finished_meanwhile(&e) => applied.ended.push(id),
            Err(e) => return Err(e),
        }
    }
    Ok(applied)
}

/// Whether `scontrol update` failed because the job has finished (slurmctld refuses every change to a finished
/// job).
fn finished_meanwhile(e: &Error) -> bool {
    e.refused(Refusal::JobFinished)
}

/// Writes `comment` as `job`'s `AdminComment`; the job as it is now.
fn update_comment(job: &JobInfo, comment: String) -> Result<JobInfo> {
    scontrol(&["update", &format!("JobId={}", job.scontrol_id()), &format!("AdminComment={comment}")])?;
    Ok(JobInfo { admin_comment: comment, ..job.clone() })
}

/// What the controller's hooks do with the jobs whose place they gave or changed, the row lock still held: tell
/// the agents of their nodes ([`push`]), given every job slurmctld knows as it is now; returns what to add to the
/// hook's log line.
pub type Tell<'a> = &'a dyn Fn(&[JobInfo], &[JobInfo]) -> String;

/// What the agents are told slurmctld lists now: `all` with the jobs of `updated` as they are now, without the
/// jobs of `gone`, which finished meanwhile.
fn listed_now(all: &[JobInfo], updated: &[JobInfo], gone: &[SlurmJobId]) -> Vec<JobInfo> {
    all.iter()
        .filter(|j| !gone.contains(&j.id))
        .map(|j| updated.iter().find(|u| u.id == j.id).unwrap_or(j).clone())
        .collect()
}

/// `changed` with the jobs of `later`, each as it is after the later change.
fn merged(mut changed: Vec<JobInfo>, later: Vec<JobInfo>) -> Vec<JobInfo> {
    for job in later {
        match changed.iter_mut().find(|c| c.id == job.id) {
            Some(c) => *c = job,
            None => changed.push(job),
        }
    }
    changed
}

/// Gives job `id` its row (`mode`) and records it in its `AdminComment` with the run it is for, with the changes
/// of place its neighbours make room with; returns what was done, for the log (a job that has a row for this run
/// keeps it; a place of an earlier run, before the job was requeued, is replaced by a fresh one). Neighbours' changes
/// take effect `margin` from now ([`CHANGE_MARGIN`] unless a site chose another).
pub fn assign_row(id: SlurmJobId, mode: RowMode, margin: Duration, tell: Tell<'_>) -> Result<String> {
    locked(|all| {
        let job = all.iter().find(|j| j.id == id).ok_or(Error::UnknownJob(id))?;
        if let Some(row) = job.row() {
            return Ok(format!("job {id} keeps {}", show(row)));
        }
        // A place the comment holds is of an earlier run: the job was requeued since.
        let requeued = job.recorded_row().map_or(String::new(), |row| {
            format!(" for run {} (requeued: {} of an earlier run not kept)", job.restarts, show(row))
        });
        // A heterogeneous job is placed whole, at its first component's prolog: over every node of its
        // components, which then share the place.
        let whole = JobInfo { nodes: het_nodes(job, &all), ..job.clone() };
        // The jobs whose place was written, and those that finished meanwhile (left as they are).
        let (words, said, changed, mut gone) = match mode {
            RowMode::Node => {
                let row = free_row(job, &all);
                let said = format!("job {id} row {row} (node cycles){requeued}");
                (vec![format!("{ROW_KEY}{row}")], said, Vec::new(), Vec::new())
            }
            RowMode::Cluster if het_place(job, &all).is_some() => {
                let place = het_place(job, &all).expect("just seen");
                let said = format!("job {id} place {place}{requeued}, its heterogeneous job's");
                (vec![format!("{ROW_KEY}{place}")], said, Vec::new(), Vec::new())
            }
            RowMode::Cluster => {
                let (place, changes) = place_new(&whole, &all);
                let applied = apply_changes(&all, &changes, margin)?;
                let said = format!("job {id} place {place}{requeued}{}", applied.said("made room"));
                (vec![format!("{ROW_KEY}{place}")], said, applied.updated, applied.ended)
            }
        };
        let (said, mut changed) = match update_comment(job, with_row(job, &words)) {
            Ok(now) => (said, [changed, vec![now]].concat()),
            // Cancelled while this prolog ran: the neighbours grow back into the room they made for it.
            Err(e) if finished_meanwhile(&e) => {
                gone.push(id);
                let now = listed_now(&all, &changed, &gone);
                let back = apply_changes(&now, &grow_after(&whole, &now), margin)?;
                gone.extend(&back.ended);
                let said = format!("{said}; job {id} ended meanwhile{}", back.said("grown back"));
                (said, merged(changed, back.updated))
            }
            Err(e) => return Err(e),
        };
        // The other components of a heterogeneous job placed whole hold its place from now on, before their own
        // prologs: a job placed meanwhile beside one of them makes room for it.
        if mode == RowMode::Cluster && !gone.contains(&id) {
            for sibling in het_siblings(job, &all).filter(|s| s.row().is_none()) {
                match update_comment(sibling, with_row(sibling, &words)) {
                    Ok(now) => changed.push(now),
                    Err(e) if finished_meanwhile(&e) => gone.push(sibling.id),
                    Err(e) => return Err(e),
                }
            }
        }
        changed.retain(|c| !gone.contains(&c.id));
        Ok(format!("{said}{}", tell(&changed, &listed_now(&all, &changed, &gone))))
    })
}

/// The other components of `job`'s heterogeneous job, if it is a component of one.
fn het_siblings<'a>(job: &'a JobInfo, all: &'a [JobInfo]) -> impl Iterator<Item = &'a JobInfo> {
    all.iter().filter(move |o| o.id != job.id && job.het_job.is_some() && o.het_job == job.het_job)
}

/// The place another component of `job`'s heterogeneous job holds for the run it is in, if one does.
fn het_place(job: &JobInfo, all: &[JobInfo]) -> Option<Place> {
    het_siblings(job, all).find_map(JobInfo::place)
}

/// The nodes of `job` and of every other component of its heterogeneous job, if it is one of one.
fn het_nodes(job: &JobInfo, all: &[JobInfo]) -> Vec<String> {
    let mut nodes = job.nodes.clone();
    for other in het_siblings(job, all) {
        nodes.extend(other.nodes.iter().filter(|n| !job.nodes.contains(n)).cloned());
    }
    nodes.sort();
    nodes.dedup();
    nodes
}

/// What the controller's epilog says of a finished job's words: slurmctld refuses every change to a finished job
/// ("Job has already finished"), so they stay in its `AdminComment` (and in the accounting record slurmctld wrote
/// as the job finished).
const KEPT_WHEN_FINISHED: &str = "; lockstep's words stay in its AdminComment (Slurm changes no finished job's)";

/// Job `id` ended, or its run did (it was requeued): its neighbours grow into the slots it held (see
/// [`grow_after`]), and, where Slurm lets a job's `AdminComment` change (a requeued job, which runs again: its
/// restart count has grown past the run its words are for; never a finished one, so no call is made for one),
/// lockstep's words leave it ([`without_ours`]), so that the tools that run after this epilog find
/// the field as they would without lockstep: another tool's content byte for byte, an empty field empty (written
/// only when it held words of lockstep's). Returns what was done. A requeued job's restart count has already grown when its
/// epilog runs, so the place it held is the one its comment holds, whichever run it was given for. A job that runs
/// again in a place given for the run it is in (its next run started before this epilog ran) is left as it is.
/// Neighbours' changes take effect `margin` from now, as [`assign_row`]'s.
pub fn release_row(id: SlurmJobId, margin: Duration, tell: Tell<'_>) -> Result<String> {
    locked(|all| {
        let Some(job) = all.iter().find(|j| j.id == id) else {
            return Ok(format!("job {id} is gone; nothing to give back"));
        };
        if job.holds_nodes() && job.row().is_some() {
            return Ok(format!("job {id} runs again (run {}) in its place; kept", job.restarts));
        }
        let grown = if matches!(job.recorded_row(), Some(Row::Cluster(_))) {
            apply_changes(&all, &grow_after(job, &all), margin).map(|applied| {
                if applied.updated.is_empty() {
                    format!("job {id} ended; no neighbour grows{}", applied.said("grown"))
                } else {
                    let told = tell(&applied.updated, &listed_now(&all, &applied.updated, &applied.ended));
                    format!("job {id} ended{}{told}", applied.said("grown"))
                }
            })
        } else {
            Ok(format!("job {id} had no cluster place"))
        };
        // Taken out whether or not the neighbours could grow: the tools after this epilog read the field now.
        let rest = without_ours(&job.admin_comment);
        let cleared = if rest == job.admin_comment {
            Ok(String::new())
        } else if job.finished() || job.row().is_some() {
            // Its words are of the run that ended and it runs no other: it ended for good (squeue says COMPLETING
            // at first, as for a requeued run; a requeued job's restart count has grown past its words' run).
            Ok(KEPT_WHEN_FINISHED.to_string())
        } else {
            match scontrol(&["update", &format!("JobId={}", job.scontrol_id()), &format!("AdminComment={rest}")]) {
                Ok(_) => Ok("; lockstep's words taken out of its AdminComment".to_string()),
                // It finished for good though it was requeued (cancelled meanwhile).
                Err(e) if finished_meanwhile(&e) => Ok(KEPT_WHEN_FINISHED.to_string()),
                Err(e) => Err(e),
            }
        };
        match (grown, cleared) {
            (Ok(grown), Ok(cleared)) => Ok(format!("{grown}{cleared}")),
            (Err(e), _) | (Ok(_), Err(e)) => Err(e),
        }
    })
}

/// A row as the hooks' log lines show it.
pub fn show(row: Row) -> String {
    match row {
        Row::Node(r) => format!("row {r} (node cycles)"),
        Row::Cluster(s) if s.from_ms == 0 => format!("place {}", s.place),
        Row::Cluster(s) => format!(
            "place {} from {} ms (before: {})",
            s.place,
            s.from_ms,
            s.before.map_or("none".into(), |b| b.to_string())
        ),
    }
}

/// A job slurmctld lists on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The job.
    pub id: SlurmJobId,
    /// Its row or place, if its `AdminComment` holds one.
    pub row: Option<Row>,
}

/// The jobs slurmctld runs on node `node` now (running, configuring, suspended or stopped: `squeue --all -w NODE
/// -t R,CF,S,ST`, every partition's, hidden ones included), each with its row if it has one: what an agent reads
/// when it starts, when it finds a job it was not told of, and every [`REFRESH`] where the controller's hooks
/// cannot tell it ([`push`]). A line whose other fields do not parse still names its job (without a row); one
/// that names no job fails the whole answer, since a job left out of it would be released.
pub fn on_node(node: &lockstep_core::ident::NodeName) -> Result<Vec<Listed>> {
    let text = run_with_timeout("squeue", &["--all", "-h", "-w", node.as_str(), "-t", "R,CF,S,ST", "-O", JOB_FORMAT])?;
    let mut jobs = Vec::new();
    for record in records(&text) {
        let line = record.as_str();
        if line.trim().is_empty() {
            continue;
        }
        if let Some(job) = JobInfo::parse(line) {
            jobs.push(Listed { id: job.id, row: job.row() });
        } else {
            let id = line.split(FIELD_END).next().and_then(|id| id.trim().parse().ok());
            let id =
                id.ok_or_else(|| Error::Unreadable(format!("squeue printed a line that names no job: {line:?}")))?;
            jobs.push(Listed { id, row: None });
        }
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_neighbour_that_ended_meanwhile_is_named_apart_from_the_changes_written() {
        let none = Applied { updated: Vec::new(), moved: Vec::new(), ended: Vec::new() };
        assert_eq!(none.said("grown"), "");
        let moved = vec![(SlurmJobId(3), Place { row: 0, period: 1 })];
        let both = Applied { updated: Vec::new(), moved, ended: vec![SlurmJobId(2)] };
        assert_eq!(both.said("grown"), "; grown: 3 -> 0/1; ended meanwhile, left as they are: 2");
        let failed = |refusal| client::ClientError::Failed {
            program: "scontrol".into(),
            status: Some(1),
            said: String::new(),
            refusal,
        };
        assert!(finished_meanwhile(&Error::from(failed(Refusal::JobFinished))));
        assert!(!finished_meanwhile(&Error::from(failed(Refusal::UnknownJob))));
    }

    #[test]
    fn parses_squeue_lines() {
        let job = JobInfo::parse("12|RUNNING|n[1-2]|0|12|N/A|N/A|keep me | lockstep_row=2 JobState=PENDING").unwrap();
        assert_eq!(job.id, SlurmJobId(12));
        assert_eq!(job.state, "RUNNING");
        assert_eq!(job.nodes, ["n1", "n2"]);
        assert_eq!(job.restarts, 0);
        assert_eq!(job.admin_comment, "keep me | lockstep_row=2 JobState=PENDING");
        assert_eq!(job.row(), Some(Row::Node(2)));
        let pending = JobInfo::parse("13|PENDING||2|13|N/A|N/A|").unwrap();
        assert!(pending.nodes.is_empty());
        assert_eq!((pending.row(), pending.admin_comment.as_str(), pending.restarts), (None, "", 2));
        // A task of an array, running as job 14, is named by the array's ID and its index when it is changed; the
        // array's record of its tasks not started, and a job of no array, by their own ID.
        let task = JobInfo::parse("14|RUNNING|n1|0|12|3|N/A|").unwrap();
        assert_eq!(
            (task.id, task.array_task, task.scontrol_id()),
            (SlurmJobId(14), Some((SlurmJobId(12), 3)), "12_3".into())
        );
        assert_eq!(JobInfo::parse("12|PENDING||0|12|4-9|N/A|").unwrap().scontrol_id(), "12");
        assert_eq!(job.scontrol_id(), "12");
        let bad_lines = [
            "",
            "13",
            "13|RUNNING|n1",
            "13|RUNNING|n1|",
            "x|RUNNING|n1|0|",
            "13|running|n1|0|",
            "13||n1|0|",
            "13|RUNNING|n[|0|",
            "13|RUNNING|n1||",
            "13|RUNNING|n1|x|",
            "13|RUNNING|n1|+1|",
            "13|RUNNING|n1|-1|",
            "13|RUNNING|n1|99999999999|13|N/A|N/A|",
            "13|RUNNING|n1|0|",
            "13|RUNNING|n1|0|x|N/A|N/A|",
            "13|RUNNING|n1|0||N/A|N/A|",
            "13|RUNNING|n1|0|-1|2|N/A|",
            "13|RUNNING|n1|0|13|N/A|x|",
            // A line of the format before the heterogeneous job's ID: the comment is not taken for it.
            "13|RUNNING|n1|0|13|N/A|lockstep_row=0/1",
            // A line of the format before the restart count: the comment is not taken for one.
            "13|RUNNING|n1|lockstep_row=0/1",
        ];
        for bad in bad_lines {
            assert_eq!(JobInfo::parse(bad), None, "{bad:?}");
        }
        let f = fields("NodeName=n1 Arch=x86_64 NodeAddr=10.0.0.1 Reason=down for a while [root]");
        assert_eq!(f[2], ("NodeAddr".to_string(), "10.0.0.1".to_string()));
        assert_eq!(f[3], ("Reason".to_string(), "down for a while [root]".to_string()));
    }

    #[test]
    fn rows_differ_on_shared_nodes_only() {
        let job = |id, nodes: &[&str], state: &str, row: Option<u32>| JobInfo {
            array_task: None,
            het_job: None,
            id: SlurmJobId(id),
            state: state.into(),
            nodes: nodes.iter().map(std::string::ToString::to_string).collect(),
            restarts: 0,
            admin_comment: row.map(|r| format!("{ROW_KEY}{r}")).unwrap_or_default(),
        };
        let new = job(5, &["n1", "n2"], "CONFIGURING", None);
        let others = [
            job(1, &["n1"], "RUNNING", Some(0)),
            job(2, &["n3"], "RUNNING", Some(1)),
            job(3, &["n2", "n3"], "COMPLETED", Some(1)),
            job(4, &["n2"], "RUNNING", Some(2)),
            new.clone(),
        ];
        assert_eq!(free_row(&new, &others), 1);
        assert_eq!(free_row(&job(6, &["n4"], "CONFIGURING", None), &others), 0);
    }

    #[test]
    fn gang_among_the_preemption_modes_is_slurm_s_own_time_slicing() {
        for (mode, slices) in [("OFF", false), ("SUSPEND", false), ("GANG,SUSPEND", true), ("suspend, gang", true)] {
            assert_eq!(slices_time(mode), slices, "{mode}");
        }
    }

    #[test]
    fn a_place_inherited_from_another_job_is_none() {
        // Task 1_1 of array 1, split off as job 2 after task 1_2 (job 1) was placed: it holds job 1's words.
        let placed = with_row(&JobInfo { id: SlurmJobId(1), ..JobInfo::default() }, &["lockstep_row=0/1".into()]);
        assert!(placed.ends_with("lockstep_run=0 lockstep_job=1"), "{placed}");
        let own = JobInfo { id: SlurmJobId(1), admin_comment: placed.clone(), ..JobInfo::default() };
        let inherited = JobInfo { id: SlurmJobId(2), admin_comment: placed, ..JobInfo::default() };
        assert!(own.row().is_some());
        assert_eq!(inherited.row(), None);
        // Words of before the job key are the job's own.
        let older = JobInfo { id: SlurmJobId(2), admin_comment: "lockstep_row=0/1 lockstep_run=0".into(), ..own };
        assert!(older.row().is_some());
        for bad in ["x", "", "-1", "3", "2.0"] {
            let comment = format!("lockstep_row=0/1 lockstep_job={bad}");
            assert_eq!(JobInfo { admin_comment: comment.clone(), ..older.clone() }.row(), None, "{comment}");
        }
    }

    #[test]
    fn row_replaces_the_old_one_and_keeps_other_words() {
        assert_eq!(
            with_row(&JobInfo::default(), &["lockstep_row=1".into()]),
            "lockstep_row=1 lockstep_run=0 lockstep_job=0"
        );
        let words = change_words(Place { row: 0, period: 4 }, Some(Place { row: 0, period: 2 }), 77);
        let comment =
            with_row(&JobInfo { admin_comment: "audit lockstep_row=0/2".into(), ..JobInfo::default() }, &words);
        assert_eq!(
            comment,
            "audit lockstep_row=0/4 lockstep_from=77 lockstep_before=0/2 lockstep_run=0 lockstep_job=0"
        );
        let job = JobInfo { admin_comment: comment, ..JobInfo::default() };
        let want =
            Schedule { place: Place { row: 0, period: 4 }, from_ms: 77, before: Some(Place { row: 0, period: 2 }) };
        assert_eq!(job.row(), Some(Row::Cluster(want)));
        for bad in ["lockstep_row=3/3", "lockstep_row=4/4", "lockstep_row=x/2", "lockstep_row=2000"] {
            assert_eq!(JobInfo { admin_comment: bad.into(), ..JobInfo::default() }.row(), None, "{bad}");
        }
    }

    /// A running job on `nodes` with place `place` (none when empty).
    fn placed(id: u64, nodes: &[&str], place: &str) -> JobInfo {
        JobInfo {
            id: SlurmJobId(id),
            state: "RUNNING".into(),
            nodes: nodes.iter().map(std::string::ToString::to_string).collect(),
            restarts: 0,
            array_task: None,
            het_job: None,
            admin_comment: if place.is_empty() { String::new() } else { format!("{ROW_KEY}{place}") },
        }
    }

    /// A heterogeneous job is placed whole: its first component makes room on every node of its components, and
    /// the others take its place; its components are not each other's neighbours.
    #[test]
    fn a_heterogeneous_job_s_components_share_one_place_made_room_for_on_all_their_nodes() {
        let p = placed(1, &["n2"], "0/1");
        let het = |id, node: &str, place: &str| JobInfo { het_job: Some(SlurmJobId(10)), ..placed(id, &[node], place) };
        let (first, second) = (het(10, "n1", ""), het(11, "n2", ""));
        let all = [p.clone(), first.clone(), second.clone()];
        assert_eq!(het_nodes(&first, &all), ["n1", "n2"]);
        assert_eq!(het_place(&first, &all), None);
        let whole = JobInfo { nodes: het_nodes(&first, &all), ..first.clone() };
        let (place, changes) = place_new(&whole, &all);
        assert_eq!((place.to_string(), changes), ("1/2".to_string(), vec![(SlurmJobId(1), "0/2".parse().unwrap())]));
        let all = [p, het(10, "n1", "1/2"), second.clone()];
        assert_eq!(het_place(&second, &all).map(|p| p.to_string()), Some("1/2".to_string()));
        assert!(!all[1].neighbour_of(&JobInfo { nodes: vec!["n1".into()], ..second }));
    }

    #[test]
    fn the_triangle_gets_disjoint_places_and_the_survivors_grow_back() {
        // n1+n2, then n2+n3, then n1+n3: the triangle.
        let first = placed(1, &["n1", "n2"], "");
        assert_eq!(place_new(&first, std::slice::from_ref(&first)), ("0/1".parse().unwrap(), vec![]));
        let all = [placed(1, &["n1", "n2"], "0/1")];
        let (p2, c) = place_new(&placed(2, &["n2", "n3"], ""), &all);
        assert_eq!((p2.to_string(), c), ("1/2".into(), vec![(SlurmJobId(1), "0/2".parse().unwrap())]));
        let all = [placed(1, &["n1", "n2"], "0/2"), placed(2, &["n2", "n3"], "1/2")];
        let (p3, c) = place_new(&placed(3, &["n1", "n3"], ""), &all);
        assert_eq!((p3.to_string(), c), ("2/4".into(), vec![(SlurmJobId(1), "0/4".parse().unwrap())]));
        let all = [placed(1, &["n1", "n2"], "0/4"), placed(2, &["n2", "n3"], "1/2"), placed(3, &["n1", "n3"], "2/4")];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert!(!a.place().unwrap().overlaps(b.place().unwrap()), "{a:?} {b:?}");
            }
        }
        // Job 2 ends: job 1 (the smallest share; its neighbour job 3 holds 2/4) moves to the half job 2 held,
        // then job 3 takes the other half.
        let grown = vec![(SlurmJobId(1), "1/2".parse().unwrap()), (SlurmJobId(3), "0/2".parse().unwrap())];
        assert_eq!(grow_after(&all[1], &all), grown);
        // Job 3 ends too: job 1 has the whole cycle.
        let after = [placed(1, &["n1", "n2"], "1/2"), placed(3, &["n1", "n3"], "0/2")];
        assert_eq!(grow_after(&after[1], &after), vec![(SlurmJobId(1), "0/1".parse().unwrap())]);
    }

    #[test]
    fn places_of_neighbours_never_overlap_in_random_streams() {
        // A stream of jobs on 16 nodes: arrivals placed, departures grown, changes applied at once.
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let set = |jobs: &mut Vec<JobInfo>, id: SlurmJobId, p: Place| {
            jobs.iter_mut().find(|r| r.id == id).unwrap().admin_comment = format!("{ROW_KEY}{p}");
        };
        let mut running: Vec<JobInfo> = Vec::new();
        for id in 1..400u64 {
            if !running.is_empty() && rand(3) == 0 {
                let gone = running.remove(rand(running.len() as u64) as usize);
                for (j, p) in grow_after(&gone, &running) {
                    set(&mut running, j, p);
                }
            }
            let first = rand(16);
            let nodes: Vec<String> = (first..first + 1 + rand(6)).map(|n| format!("n{}", n % 16)).collect();
            let refs: Vec<&str> = nodes.iter().map(String::as_str).collect();
            let (place, changes) = place_new(&placed(id, &refs, ""), &running);
            for (j, p) in changes {
                let old = running.iter().find(|r| r.id == j).unwrap().place().unwrap();
                assert!(p.period > old.period, "a newcomer only shrinks its neighbours");
                set(&mut running, j, p);
            }
            running.push(placed(id, &refs, &place.to_string()));
            for (i, a) in running.iter().enumerate() {
                for b in &running[i + 1..] {
                    if a.neighbour_of(b) {
                        assert!(!a.place().unwrap().overlaps(b.place().unwrap()), "{a:?} {b:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_place_holds_only_for_the_run_it_was_given_for() {
        let job = |comment: &str, restarts| JobInfo { admin_comment: comment.into(), restarts, ..JobInfo::default() };
        let half = |row| Some(Row::Cluster(Schedule { place: Place { row, period: 2 }, from_ms: 0, before: None }));
        // A comment without the run word (written before runs were recorded) is run 0's.
        assert_eq!(job("lockstep_row=1/2", 0).row(), half(1));
        assert_eq!(job("lockstep_row=1/2", 1).row(), None);
        assert_eq!(job("lockstep_row=1/2 lockstep_run=0", 0).row(), half(1));
        assert_eq!(job("lockstep_row=1/2 lockstep_run=3", 3).row(), half(1));
        assert_eq!(job("lockstep_row=3 lockstep_run=1", 1).row(), Some(Row::Node(3)));
        for (comment, restarts) in [
            ("lockstep_row=1/2 lockstep_run=0", 1),
            ("lockstep_row=1/2 lockstep_run=1", 2),
            ("lockstep_row=1/2 lockstep_run=2", 1),
            ("lockstep_row=3 lockstep_run=0", 1),
            ("lockstep_row=1/2 lockstep_run=x", 0),
            ("lockstep_row=1/2 lockstep_run=", 0),
            ("lockstep_row=1/2 lockstep_run=-0", 0),
        ] {
            assert_eq!(job(comment, restarts).row(), None, "{comment} at restart {restarts}");
        }
        // The stale place is still what the run that ended held (its epilog gives it back).
        assert_eq!(job("lockstep_row=1/2 lockstep_run=0", 1).recorded_row(), half(1));
        // Placing a requeued job again replaces every word of the old place and records the run now.
        let stale = job("audit lockstep_row=0/4 lockstep_from=9 lockstep_before=0/2 lockstep_run=0", 1);
        let fresh = JobInfo { admin_comment: with_row(&stale, &["lockstep_row=1/2".into()]), ..stale };
        assert_eq!(fresh.admin_comment, "audit lockstep_row=1/2 lockstep_run=1 lockstep_job=0");
        assert_eq!(fresh.row(), half(1));
    }

    #[test]
    fn a_requeued_job_is_placed_anew_beside_a_neighbour_placed_while_it_was_pending() {
        // Job 1 had the whole cycle, was requeued, and job 2 took the whole cycle while it was pending.
        let requeued = JobInfo { restarts: 1, ..placed(1, &["n1"], "0/1") };
        let neighbour = placed(2, &["n1"], "0/1");
        let all = [requeued.clone(), neighbour.clone()];
        assert_eq!(requeued.place(), None, "run 0's place is not run 1's");
        let (place, changes) = place_new(&requeued, &all);
        assert_eq!((place.to_string(), changes), ("1/2".into(), vec![(SlurmJobId(2), "0/2".parse().unwrap())]));
        // A newcomer does not make room for a stale place: it is no place.
        let (place, _) = place_new(&placed(3, &["n1"], ""), &[requeued]);
        assert_eq!(place.to_string(), "0/1");
    }

    #[test]
    fn lockstep_takes_out_its_words_and_keeps_everything_else_byte_for_byte() {
        for (comment, rest) in [
            ("", ""),
            ("lockstep_row=1/2 lockstep_run=0", ""),
            ("lockstep_row=0/4 lockstep_from=77 lockstep_before=0/2 lockstep_run=3", ""),
            ("lockstep_row=3", ""),
            ("audit=1", "audit=1"),
            ("audit=1 lockstep_row=1/2 lockstep_run=0", "audit=1"),
            ("lockstep_row=1/2 lockstep_run=0 audit=1", "audit=1"),
            ("lockstep_row=1/2 audit=1 lockstep_run=0", "audit=1"),
            ("a  lockstep_row=1/2\tb", "a\tb"),
            ("a\tb  c lockstep_row=1/2", "a\tb  c"),
            ("JS1:H4sIAAAA+/x=lockstep_row== lockstep_run=0", "JS1:H4sIAAAA+/x=lockstep_row=="),
            // A key inside another tool's word, or in another case, is that tool's.
            ("note=lockstep_row=1/2", "note=lockstep_row=1/2"),
            (
                "xlockstep_row=1/2 LOCKSTEP_ROW=1/2 lockstep_rows=2",
                "xlockstep_row=1/2 LOCKSTEP_ROW=1/2 lockstep_rows=2",
            ),
            ("lockstep_row lockstep_run", "lockstep_row lockstep_run"),
            // A word that starts with a key is lockstep's, as `row` reads it, even one it reads as no row.
            ("keep lockstep_row=x lockstep_run=", "keep"),
        ] {
            assert_eq!(without_ours(comment), rest, "{comment:?}");
        }
    }

    #[test]
    fn another_tools_content_survives_every_write_of_a_place() {
        let others = [
            "audit=1",
            "JS1:H4sIAAAAAAAAA+2YXW/aMBSG/wo=",
            "audit=1 note: a=b  JS1:eyJub2RlcyI6e319\tk:v",
            "user said \"lockstep_row=0/1\" here: note=lockstep_row=0/1",
        ];
        for other in others {
            // Placed, a change of place, placed again for run 1; then the job ends.
            let placed =
                with_row(&JobInfo { admin_comment: other.into(), ..JobInfo::default() }, &["lockstep_row=0/1".into()]);
            assert_eq!(placed, format!("{other} lockstep_row=0/1 lockstep_run=0 lockstep_job=0"));
            let job = JobInfo { admin_comment: placed, ..JobInfo::default() };
            assert_eq!(
                job.row(),
                Some(Row::Cluster(Schedule { place: Place { row: 0, period: 1 }, from_ms: 0, before: None }))
            );
            // Another tool appends while the job runs.
            let appended = JobInfo { admin_comment: format!("{} audit=2", job.admin_comment), ..job };
            let words = change_words(Place { row: 1, period: 2 }, Some(Place { row: 0, period: 1 }), 9);
            let changed = with_row(&appended, &words);
            assert_eq!(
                changed,
                format!("{other} audit=2 lockstep_row=1/2 lockstep_from=9 lockstep_before=0/1 lockstep_run=0 lockstep_job=0")
            );
            let requeued = JobInfo { admin_comment: changed, restarts: 1, ..JobInfo::default() };
            let again = with_row(&requeued, &["lockstep_row=0/2".into()]);
            assert_eq!(again, format!("{other} audit=2 lockstep_row=0/2 lockstep_run=1 lockstep_job=0"));
            assert_eq!(without_ours(&again), format!("{other} audit=2"));
        }
        // Nothing but lockstep's words: placed, the field holds them alone; ended, it is empty again.
        let alone = with_row(&JobInfo::default(), &["lockstep_row=0/1".into()]);
        assert_eq!(
            (alone.as_str(), without_ours(&alone).as_str()),
            ("lockstep_row=0/1 lockstep_run=0 lockstep_job=0", "")
        );
    }

    #[test]
    fn a_comment_of_several_lines_is_read_and_written_whole() {
        let text =
            "7|RUNNING|n1|0|7|N/A|N/A|first line\n2026|note: second lockstep_row=1/2\n\n  third\n8|PENDING||0|8|N/A|N/A|\n";
        let two = records(text);
        assert_eq!(two.len(), 2, "{two:?}");
        let job = JobInfo::parse(&two[0]).unwrap();
        assert_eq!(job.admin_comment, "first line\n2026|note: second lockstep_row=1/2\n\n  third");
        assert_eq!(
            job.row(),
            Some(Row::Cluster(Schedule { place: Place { row: 1, period: 2 }, from_ms: 0, before: None }))
        );
        let placed = with_row(&job, &["lockstep_row=0/2".into()]);
        assert_eq!(placed, "first line\n2026|note: second\n\n  third lockstep_row=0/2 lockstep_run=0 lockstep_job=7");
        assert_eq!(without_ours(&placed), "first line\n2026|note: second\n\n  third");
        assert_eq!(JobInfo::parse(&two[1]).map(|j| j.id), Some(SlurmJobId(8)));
        // A line before any record is a record of its own, which parses as no job; a line that names a job but
        // does not parse is a record (on_node takes its job without a row).
        assert_eq!(
            records("x\n9|RUNNING|n1|0|9|N/A|N/A|\n10|?|n1|0|10|N/A|N/A|"),
            ["x", "9|RUNNING|n1|0|9|N/A|N/A|", "10|?|n1|0|10|N/A|N/A|"]
        );
    }
}
