//! Experiments on the test Slurm cluster of `tests/cluster/up` (`ranks_in = ["slurm"]`): every job is a batch
//! job whose `srun` spans the cluster's nodes, co-scheduled by the nodes' agents — or, under the policy
//! `slurm-gang`, time-sliced by Slurm itself (`PreemptMode=GANG`, the policy's slot as `SchedulerTimeSlice`) with
//! the agents at `cfs`. The cluster is brought up in the mode the case needs and taken down at the end.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use super::spec::{PolicyConfig, Scheduler};
use crate::harness::Paths;
use lockstep_proto::client::{call, check};
use lockstep_store::{Action, Store};

/// What a batch job's last output line starts with: the time its `srun` ended.
const END_MARK: &str = "lockstep-job-end";
/// What its first output line starts with: the time its batch script began (once Slurm started the job).
const START_MARK: &str = "lockstep-job-start";

/// Whether the test cluster is up, and with which of Slurm's own scheduling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Not started, or taken down.
    Down,
    /// Up; with Slurm's gang scheduling at this time slice (seconds) when `Some`, and the controller's prolog
    /// giving rows of this kind (`cluster`, `node`).
    Up(Option<u64>, &'static str),
}

/// A job suspended or resumed by Slurm's gang scheduler.
#[derive(Clone, Copy, Debug)]
pub struct GangEvent {
    /// When (seconds since the epoch).
    pub time: f64,
    /// The Slurm job ID.
    pub job: lockstep_slurm::SlurmJobId,
    /// Suspended (`true`) or resumed.
    pub suspended: bool,
}

impl GangEvent {
    /// The event a line of slurmctld's log reports (`[2026-11-25T18:36:01.887+00:00] gang: suspending JobId=1`), if
    /// any.
    fn parse(line: &str) -> Option<Self> {
        let (stamp, text) = line.strip_prefix('[')?.split_once("] ")?;
        let text = text.strip_prefix("gang: ")?;
        let (suspended, id) = match text.strip_prefix("suspending JobId=") {
            Some(id) => (true, id),
            None => (false, text.strip_prefix("resuming JobId=")?),
        };
        Some(Self { time: epoch_seconds(stamp)?, job: id.trim().parse().ok()?, suspended })
    }
}

/// Seconds since the epoch of an RFC 3339 time with its offset (`2026-11-25T18:36:01.887+00:00`, `...Z`, or an
/// offset without a colon, as RFC 5424 stamps may have).
fn epoch_seconds(stamp: &str) -> Option<f64> {
    let (date, time) = stamp.split_once('T')?;
    let mut ymd = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (year, month, day) = (ymd.next()??, ymd.next()??, ymd.next()??);
    let zone_at = time.find(['Z', '+', '-'])?;
    let (clock, zone) = time.split_at(zone_at);
    let mut hms = clock.splitn(3, ':');
    let (h, m) = (hms.next()?.parse::<i64>().ok()?, hms.next()?.parse::<i64>().ok()?);
    let s: f64 = hms.next()?.parse().ok()?;
    let offset = if zone == "Z" {
        0
    } else {
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
        if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        sign * (digits[..2].parse::<i64>().ok()? * 3600 + digits[2..].parse::<i64>().ok()? * 60)
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || !(0.0..61.0).contains(&s) {
        return None;
    }
    Some((days_since_epoch(year, month, day) * 86_400 + h * 3600 + m * 60 - offset) as f64 + s)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar: the year counted from March, so that the
/// leap day ends it, in 400-year eras of 146,097 days.
fn days_since_epoch(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The test cluster an experiment runs its jobs on.
pub struct Cluster {
    /// Where the test cluster's `up` and `down` are ([`Paths::cluster`]).
    scripts: PathBuf,
    /// `LOCKSTEP_CLUSTER_DIR`.
    dir: PathBuf,
    nodes: u32,
    /// How the controller's prolog gives rows: `cluster` (places) or `node` (each node's own cycle).
    rows: &'static str,
    /// How the cluster runs now.
    mode: Mode,
    /// Takes it down if a signal ends the experiment while it is up.
    teardown: Option<crate::harness::teardown::Registration>,
}

impl Cluster {
    /// A cluster of `nodes` nodes, not up yet, with its files under the experiment's work directory.
    pub fn new(paths: &Paths, nodes: u32) -> anyhow::Result<Self> {
        let scripts = paths.cluster.clone();
        anyhow::ensure!(
            scripts.join("up").exists(),
            "ranks_in = [\"slurm\"] needs the test cluster's scripts (no up in {})",
            scripts.display()
        );
        let dir = std::path::absolute(paths.work.join("cluster"))?;
        Ok(Self { scripts, dir, nodes, rows: "cluster", mode: Mode::Down, teardown: None })
    }

    /// From the next [`Self::apply`] on, the controller's prolog gives rows of kind `rows` (`cluster`: places
    /// agreed cluster-wide; `node`: rows of each node's own cycle, as before them).
    pub fn set_rows(&mut self, rows: &'static str) {
        self.rows = rows;
    }

    /// The cluster's directory (`LOCKSTEP_CLUSTER_DIR`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Brings the cluster into the mode `policy` needs — restarted when Slurm's gang scheduling is switched on or
    /// off or its time slice changes — and sets every agent's policy (`cfs` under Slurm's gang scheduling).
    pub fn apply(&mut self, policy: &PolicyConfig) -> anyhow::Result<()> {
        let gang = (policy.scheduler == Scheduler::SlurmGang).then_some(policy.slot.as_secs());
        if self.mode != Mode::Up(gang, self.rows) {
            self.down();
            let mut up = Command::new(self.scripts.join("up"));
            up.arg(self.nodes.to_string())
                .env("LOCKSTEP_CLUSTER_DIR", &self.dir)
                .env("LOCKSTEP_CLUSTER_ROWS", self.rows)
                .env("LOCKSTEP", std::env::current_exe()?);
            if let Some(seconds) = gang {
                up.env("LOCKSTEP_CLUSTER_GANG", seconds.to_string());
            }
            // Up, or half up, from here on: taken down on a signal, on drop, and when `up` fails.
            self.mode = Mode::Up(gang, self.rows);
            let mut down = self.down_command();
            self.teardown = Some(crate::harness::teardown::register(move || {
                let _ = down.output();
            }));
            let out = up.output().context("cannot run tests/cluster/up");
            if let Some(failed) = match &out {
                Ok(o) if o.status.success() => None,
                Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
                Err(e) => Some(format!("{e:#}")),
            } {
                self.down();
                anyhow::bail!("tests/cluster/up failed: {failed}");
            }
        }
        let request = policy.agent_request();
        for node in 1..=self.nodes {
            check(call(&self.socket(node), &request)?)?;
        }
        Ok(())
    }

    fn socket(&self, node: u32) -> PathBuf {
        self.dir.join(format!("n{node}/agent.sock"))
    }

    /// One job submitted with `sbatch --wait` (which returns when the job ends, with its exit status): a batch
    /// script that runs `srun PROGRAM…` over every node, `ranks` ranks spread evenly, the tasks of a node holding
    /// all its CPUs (so that jobs share cores, which is what Slurm time-slices and the agents co-schedule), MPI
    /// over TCP between the nodes' network namespaces (also between ranks of one node), in MPI progress mode
    /// `busy` or yield; the job's output goes to `output`, ending with the time the job ended
    /// ([`Self::end_time`]: `sbatch --wait` itself notices the end only at its next poll, seconds later). A batch
    /// job, as Slurm users run MPI jobs, rather than a bare `srun`, which waits out a job suspended at its start
    /// with a step-creation backoff of up to minutes. (The `srun` inside backs off the same way when the gang
    /// scheduler suspends the job just as the step starts: that delay is part of what Slurm's gang scheduling
    /// costs.)
    pub fn sbatch(&self, job: &str, ranks: u32, busy: bool, output: &Path, program: &[String]) -> Command {
        let per_node = ranks / self.nodes;
        let mut cmd = self.batch(job, busy, output, program, per_node);
        cmd.args(["--wait", "--quiet", "-N", &self.nodes.to_string(), "-n", &ranks.to_string()]);
        cmd
    }

    /// One job of one rank on each of `nodes` (numbers, from 1), submitted and not waited for (`--parsable`:
    /// its output is the job ID); otherwise as [`Self::sbatch`]. Its output begins with the time it started
    /// ([`Self::start_time`]).
    pub fn sbatch_on(&self, job: &str, nodes: &[u32], busy: bool, output: &Path, program: &[String]) -> Command {
        let list: Vec<String> = nodes.iter().map(|n| format!("n{n}")).collect();
        let mut cmd = self.batch(job, busy, output, program, 1);
        cmd.args(["--parsable", "-N", &nodes.len().to_string(), "-n", &nodes.len().to_string(), "-w", &list.join(",")]);
        cmd
    }

    /// The `sbatch` of a job with `per_node` tasks on each node, each holding its share of the node's CPUs.
    fn batch(&self, job: &str, busy: bool, output: &Path, program: &[String], per_node: u32) -> Command {
        let cpus = (lockstep_core::cpulist::CpuList::online().iter().count() as u32 / per_node.max(1)).max(1);
        let quoted: Vec<String> = program.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
        let mut cmd = Command::new("sbatch");
        cmd.args(["--ntasks-per-node", &per_node.to_string(), "-c", &cpus.to_string()])
            .args(["--job-name", job, "--output"])
            .arg(output)
            .arg(format!(
                "--wrap=echo \"{START_MARK} $(date +%s.%N)\"; srun --kill-on-bad-exit=1 {}; rc=$?; \
                 echo \"{END_MARK} $(date +%s.%N) $rc\"; exit $rc",
                quoted.join(" ")
            ))
            .env("SLURM_CONF", self.dir.join("slurm.conf"))
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MCA_btl", "self,tcp")
            .env("OMPI_MCA_btl_tcp_if_include", "eth0")
            .env("OMPI_MCA_mpi_yield_when_idle", if busy { "0" } else { "1" });
        cmd
    }

    /// Cancels the job named `job` (background load whose measured jobs are done) and waits, up to a minute,
    /// until Slurm no longer lists it (`sbatch --wait` would notice only at its next poll, up to a minute later).
    pub fn cancel(&self, job: &str) {
        let conf = self.dir.join("slurm.conf");
        let _ = Command::new("scancel").args(["--name", job]).env("SLURM_CONF", &conf).output();
        let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
        while std::time::Instant::now() < deadline {
            let listed = Command::new("squeue")
                .args(["-h", "-o", "%i", "--name", job])
                .env("SLURM_CONF", &conf)
                .output()
                .is_ok_and(|o| !o.stdout.trim_ascii().is_empty());
            if !listed {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// The nodes' agent stores.
    pub fn stores(&self) -> Vec<PathBuf> {
        (1..=self.nodes).map(|node| self.dir.join(format!("n{node}/lockstep.db"))).collect()
    }

    /// When the job whose output is `text` ended (seconds since the epoch), as its batch script wrote it.
    pub fn end_time(text: &str) -> Option<f64> {
        text.lines().rev().find_map(|l| l.strip_prefix(END_MARK)?.split_whitespace().next()?.parse().ok())
    }

    /// The exit status of `srun` in the job whose output is `text`, as its batch script wrote it.
    pub fn exit_code(text: &str) -> Option<i32> {
        text.lines().rev().find_map(|l| l.strip_prefix(END_MARK)?.split_whitespace().nth(1)?.parse().ok())
    }

    /// When the job whose output is `text` started (seconds since the epoch), as its batch script wrote it.
    pub fn start_time(text: &str) -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(START_MARK)?.trim().parse().ok())
    }

    /// The largest gap, in milliseconds, between the nodes' agents switching the same slot within
    /// `[from, to]` (seconds since the epoch); `None` when fewer than two nodes switched any slot then. The
    /// agents' last decisions of the interval must have been written (they flush once a second).
    pub fn skew_ms(&self, from: f64, to: f64) -> anyhow::Result<Option<f64>> {
        let mut per_node = Vec::new();
        for db in self.stores() {
            let switches = Store::open_existing(&db)?.decisions_between(Action::Slot, from, to)?;
            per_node
                .push(switches.into_iter().map(|d| (d.slot, d.time)).collect::<std::collections::BTreeMap<u64, f64>>());
        }
        let Some((first, rest)) = per_node.split_first() else { return Ok(None) };
        let gaps: Vec<f64> = first
            .iter()
            .filter_map(|(slot, t)| {
                let times: Vec<f64> = rest.iter().filter_map(|m| m.get(slot).copied()).collect();
                (times.len() == rest.len() && !times.is_empty()).then(|| {
                    times.iter().chain([t]).fold(f64::MIN, |a, &b| a.max(b))
                        - times.iter().chain([t]).fold(f64::MAX, |a, &b| a.min(b))
                })
            })
            .collect();
        Ok((!gaps.is_empty()).then(|| gaps.iter().fold(0.0, |a: f64, &b| a.max(b)) * 1e3))
    }

    /// What Slurm's gang scheduler did to jobs, oldest first: every job it suspended or resumed, and when, from
    /// slurmctld's log (tests/cluster/up turns on `DebugFlags=Gang` with Slurm's gang scheduling, and stamps the
    /// log's lines in RFC 5424 time, which carries its offset from UTC). Empty without Slurm's gang scheduling.
    pub fn gang_events(&self) -> Vec<GangEvent> {
        let log = std::fs::read_to_string(self.dir.join("log/slurmctld.log")).unwrap_or_default();
        log.lines().filter_map(GangEvent::parse).collect()
    }

    /// `tests/cluster/down`, for this cluster.
    fn down_command(&self) -> Command {
        let mut down = Command::new(self.scripts.join("down"));
        down.env("LOCKSTEP_CLUSTER_DIR", &self.dir);
        down
    }

    /// Takes the cluster down if it is up (or was being brought up).
    fn down(&mut self) {
        self.teardown = None;
        if std::mem::replace(&mut self.mode, Mode::Down) != Mode::Down {
            let _ = self.down_command().output();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_count_from_the_epoch_with_their_offset() {
        let close = |stamp: &str, want: f64| {
            let got = epoch_seconds(stamp).unwrap_or_else(|| panic!("{stamp} not parsed"));
            assert!((got - want).abs() < 1e-6, "{stamp}: {got} != {want}");
        };
        close("2026-11-25T18:36:01.887+00:00", 1_795_631_761.887);
        close("2000-02-29T23:59:59+02:00", 951_861_599.0);
        close("2000-02-29T23:59:59+0200", 951_861_599.0);
        close("1969-12-31T23:00:00Z", -3600.0);
        for bad in [
            "2026-11-25 18:36:01",
            "2026-13-01T00:00:00Z",
            "2026-11-25T18:36:01+1",
            "2026-11-25T18:36:01+1é1",
            "T:Z",
            "",
        ] {
            assert_eq!(epoch_seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_gang_schedulers_decisions_are_read_from_slurmctlds_log() {
        let log = "[2026-11-25T18:35:53.025+00:00] gang: suspending JobId=3\n\
                   [2026-11-25T18:35:53.025+00:00] gang:  part debug has 3 jobs, 0 shadows:\n\
                   [2026-11-25T18:36:01.887+00:00] gang: resuming JobId=3\n\
                   [2026-11-25T18:36:01.887+00:00] sched: Allocate JobId=4\n\
                   garbage gang: suspending JobId=9\n\
                   [2026-11-25T18:36:02.000+00:00] gang: suspending JobId=x\n";
        let events: Vec<(u64, bool, i64)> = log
            .lines()
            .filter_map(GangEvent::parse)
            .map(|e| (e.job.0, e.suspended, (e.time * 1e3).round() as i64))
            .collect();
        assert_eq!(events, [(3, true, 1_795_631_753_025), (3, false, 1_795_631_761_887)]);
    }
}
