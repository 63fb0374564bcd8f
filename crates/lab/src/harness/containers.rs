//! Ranks in containers (the MPL paper's setting, and the hybrid-CPU paper's Singularity): `mpirun` starts one
//! container per rank — `podman run`, or Charliecloud's `ch-run`, the unprivileged HPC runtime with Singularity's
//! model (an image directory, no daemon, the host's network and MPI). Each container shares the host's network and
//! IPC (so that Open MPI's shared-memory transport works between containers) and sees the host's `/usr`, `/etc`,
//! `/tmp` and the build tree over a skeleton image directory — no registry. The job's containers are then adopted
//! by the agent as one job: podman's by name, Charliecloud's (which have none) as `charliecloud:PID`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A container runtime the ranks can run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// podman with runc, each rank a container named `<prefix>-r<rank>`.
    Podman,
    /// Charliecloud's `ch-run`, each rank a process tree rooted in the image directory, marked with the
    /// environment variable `LOCKSTEP_CONTAINER=<prefix>-r<rank>`.
    Charliecloud,
}

/// The environment variable that names a rank (`<prefix>-r<rank>`: its container, or a bare rank's name), for
/// finding its process.
const MARK: &str = "LOCKSTEP_CONTAINER";

/// What a runtime needs on this kind of machine, prepared once per experiment.
pub struct Setup {
    runtime: Runtime,
    rootfs: PathBuf,
    conf: PathBuf,
    mounts: Vec<PathBuf>,
}

impl Setup {
    /// Prepares a skeleton image directory (and for podman a `containers.conf`) under `work`; `mounts` are host
    /// directories the ranks need besides `/usr`, `/etc` and `/tmp` (the build tree, the experiment's files).
    pub fn new(runtime: Runtime, work: &Path, mounts: &[PathBuf]) -> anyhow::Result<Self> {
        let (program, spec, dir) = match runtime {
            Runtime::Podman => ("podman", "container", "rootfs"),
            Runtime::Charliecloud => ("ch-run", "charliecloud", "ch-image"),
        };
        anyhow::ensure!(
            Command::new(program).arg("--version").env("USER", user()).output().is_ok_and(|o| o.status.success()),
            "ranks_in = {spec} needs {program} (scripts/deps.sh installs it)"
        );
        let rootfs = work.join(dir);
        for d in ["usr", "etc", "tmp", "proc", "sys", "dev", "run", "root"] {
            std::fs::create_dir_all(rootfs.join(d))?;
        }
        for d in ["bin", "lib", "lib64", "sbin"] {
            let link = rootfs.join(d);
            if link.symlink_metadata().is_err() {
                std::os::unix::fs::symlink(format!("usr/{d}"), link)?;
            }
        }
        let mut all: Vec<PathBuf> = Vec::new();
        for m in mounts {
            let m = m.canonicalize()?;
            if !all.iter().any(|a| m.starts_with(a)) {
                all.retain(|a| !a.starts_with(&m));
                all.push(m);
            }
        }
        for m in &all {
            std::fs::create_dir_all(rootfs.join(m.strip_prefix("/").unwrap_or(m)))?;
        }
        // ch-run binds the host's passwd and group (and hosts, resolv.conf) onto files that must exist.
        for f in ["passwd", "group", "hosts", "resolv.conf"] {
            let file = rootfs.join("etc").join(f);
            if !file.exists() {
                std::fs::write(file, b"")?;
            }
        }
        // Podman raises RLIMIT_NOFILE and RLIMIT_NPROC beyond our hard limits by default, which fails without
        // CAP_SYS_RESOURCE: keep ours.
        let limits = std::fs::read_to_string("/proc/self/limits")?;
        let hard = |name: &str, default: &str| {
            limits
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().rev().nth(1).map(str::to_string))
                .filter(|v| v != "unlimited")
                .unwrap_or_else(|| default.into())
        };
        // (Setting NPROC even to its current hard limit is refused here; a lower one is always allowed.)
        let nofile = hard("Max open files", "1024");
        let nproc = hard("Max processes", "4096").parse::<u64>().map_or(4096, |n| n.min(4096));
        let conf = work.join("containers.conf");
        std::fs::write(
            &conf,
            format!("[containers]\ndefault_ulimits = [\"nofile={nofile}:{nofile}\", \"nproc={nproc}:{nproc}\"]\n"),
        )?;
        Ok(Self { runtime, rootfs, conf, mounts: all })
    }

    /// Environment the launcher (`mpirun`) needs for containerised ranks.
    pub fn env(&self) -> Vec<(String, String)> {
        // Ranks in different containers may not ptrace each other: no single-copy (CMA) transfers.
        let mut env = vec![("OMPI_MCA_btl_vader_single_copy_mechanism".to_string(), "none".to_string())];
        match self.runtime {
            Runtime::Podman => env.push(("CONTAINERS_CONF".into(), self.conf.display().to_string())),
            // ch-run refuses to start without $USER.
            Runtime::Charliecloud => env.push(("USER".into(), user())),
        }
        env
    }

    /// The per-rank command: a shell that execs the runtime, the container named `<prefix>-r<rank>`; inside, the
    /// rank waits for the file `go` (created once the agent has adopted every container of the job), then execs
    /// the program. `parents`, when given, are the podman containers' parent cgroups, one per rank.
    pub fn rank_command(
        &self,
        prefix: &str,
        env: &[(String, String)],
        go: &Path,
        program: &[String],
        parents: &[String],
    ) -> Vec<String> {
        let inside = gated(go, program);
        if self.runtime == Runtime::Charliecloud {
            let mut ch = vec![format!("exec env {MARK}={prefix}-r$OMPI_COMM_WORLD_RANK")];
            ch.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
            ch.push("ch-run -b /usr:/usr -b /etc:/etc -b /tmp:/tmp".into());
            ch.extend(self.mounts.iter().map(|m| format!("-b {0}:{0}", m.display())));
            ch.push(format!("{} -- {inside}", self.rootfs.display()));
            return vec!["sh".into(), "-c".into(), ch.join(" ")];
        }
        let mut podman = vec![
            "exec podman --cgroup-manager cgroupfs --runtime runc run --rm".to_string(),
            format!("--name {prefix}-r$OMPI_COMM_WORLD_RANK"),
            format!("--env {MARK}={prefix}-r$OMPI_COMM_WORLD_RANK"),
            "--network host --ipc host --pid host".into(),
            "--env 'OMPI_*' --env 'PMIX_*' --env 'OPAL_*'".into(),
            "-v /usr:/usr:ro -v /etc:/etc:ro -v /tmp:/tmp".into(),
        ];
        if !parents.is_empty() {
            let cases: Vec<String> = parents.iter().enumerate().map(|(r, p)| format!("{r}) echo {p};;")).collect();
            podman.push(format!("--cgroup-parent $(case $OMPI_COMM_WORLD_RANK in {} esac)", cases.join(" ")));
        }
        for m in &self.mounts {
            podman.push(format!("-v {0}:{0}", m.display()));
        }
        for (k, v) in env {
            podman.push(format!("--env {k}={v}"));
        }
        podman.push(format!("--rootfs {}", self.rootfs.display()));
        podman.push(inside);
        vec!["sh".into(), "-c".into(), podman.join(" ")]
    }

    /// Waits until the `ranks` containers named `<prefix>-r<N>` run; returns them as the agent's `adopt`
    /// takes them: podman's names, or `charliecloud:PID` for each rank's process. At the deadline, the error names
    /// the podman containers of them that did run when last looked at.
    pub fn wait_for_ranks(&self, prefix: &str, ranks: u32, timeout: Duration) -> anyhow::Result<Vec<String>> {
        let want: Vec<String> = (0..ranks).map(|r| format!("{prefix}-r{r}")).collect();
        let deadline = Instant::now() + timeout;
        loop {
            let (found, seen) = match self.runtime {
                Runtime::Podman => {
                    let out = Command::new("podman").args(["ps", "--format", "{{.Names}}"]).output()?;
                    let running = String::from_utf8_lossy(&out.stdout).into_owned();
                    let seen: Vec<&String> = want.iter().filter(|w| running.lines().any(|l| l == *w)).collect();
                    let names = seen.iter().map(|w| w.as_str()).collect::<Vec<_>>().join(", ");
                    ((seen.len() == want.len()).then(|| want.clone()), Some(names))
                }
                Runtime::Charliecloud => {
                    let found = rank_processes(prefix, ranks, Some(Runtime::Charliecloud));
                    // Found only once every rank's process is: which of them ran is not known.
                    (found.map(|p| p.into_iter().map(|pid| format!("charliecloud:{pid}")).collect()), None)
                }
            };
            if let Some(found) = found {
                return Ok(found);
            }
            let seen = match seen.as_deref() {
                Some("") => " (running: none)".to_string(),
                Some(names) => format!(" (running: {names})"),
                None => String::new(),
            };
            anyhow::ensure!(
                Instant::now() < deadline,
                "the containers {prefix}-r* did not start within {} s{seen}",
                timeout.as_secs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The shell a rank runs first: it waits for the file `go`, then execs the program.
fn gated(go: &Path, program: &[String]) -> String {
    format!("sh -c 'while [ ! -e {} ]; do sleep 0.01; done; exec {}'", go.display(), program.join(" "))
}

/// The per-rank command of a bare rank (no container) named `<prefix>-r<rank>`: it waits for the file `go`, then
/// execs the program with `env`.
pub fn bare_rank_command(prefix: &str, env: &[(String, String)], go: &Path, program: &[String]) -> Vec<String> {
    let mut sh = vec![format!("exec env {MARK}={prefix}-r$OMPI_COMM_WORLD_RANK")];
    sh.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    sh.push(gated(go, program));
    vec!["sh".into(), "-c".into(), sh.join(" ")]
}

/// The processes of ranks `<prefix>-r0` … `<prefix>-r<ranks - 1>`, in rank order, once all of them run: for each
/// rank, the process whose environment names it and whose parent's does not (the rank's first process; its
/// children inherit the name). Charliecloud ranks count once `ch-run` has entered the image (`CH_RUNNING`).
/// `None` while any is missing.
pub fn rank_processes(prefix: &str, ranks: u32, runtime: Option<Runtime>) -> Option<Vec<i32>> {
    let marks: Vec<Vec<u8>> = (0..ranks).map(|r| format!("{MARK}={prefix}-r{r}").into_bytes()).collect();
    let mark_of = |env: &[Vec<u8>]| marks.iter().position(|m| env.contains(m));
    let mut found: Vec<Option<i32>> = vec![None; ranks as usize];
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Some(env) = lockstep_cgroup::procfs::environ(pid) else { continue };
        let Some(rank) = mark_of(&env) else { continue };
        // A process gone before its parent is read (a rank's `sleep` between two looks for its gate) is not the
        // rank's first process, whose PID the agent must find running.
        let Some(parent) = lockstep_cgroup::procfs::parent(pid) else { continue };
        if lockstep_cgroup::procfs::environ(parent).is_some_and(|p| mark_of(&p) == Some(rank)) {
            continue;
        }
        if runtime == Some(Runtime::Charliecloud) && !env.iter().any(|v| v.starts_with(b"CH_RUNNING=")) {
            continue;
        }
        found[rank] = Some(pid);
    }
    found.into_iter().collect()
}

/// The name of the user running this program ($USER, else from the password database; "root" if neither).
fn user() -> String {
    std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| {
        nix::unistd::User::from_uid(nix::unistd::getuid()).ok().flatten().map_or_else(|| "root".into(), |u| u.name)
    })
}
