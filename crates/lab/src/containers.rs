//! Ranks in podman containers (the MPL paper's setting): `mpirun` starts one `podman run` per rank; each container
//! shares the host's network, IPC and PID namespaces (so that Open MPI's shared-memory transport works between
//! containers) and sees the host's `/usr`, `/etc`, `/tmp` and the build tree read from a skeleton root file
//! system — no image, no registry. The job's containers are then adopted by the agent as one job.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What podman needs on this kind of machine, prepared once per experiment.
pub struct Setup {
    rootfs: PathBuf,
    conf: PathBuf,
    mounts: Vec<PathBuf>,
}

impl Setup {
    /// Prepares a skeleton root file system and a `containers.conf` under `work`; `mounts` are host
    /// directories the ranks need besides `/usr`, `/etc` and `/tmp` (the build tree, the experiment's files).
    pub fn new(work: &Path, mounts: &[PathBuf]) -> anyhow::Result<Self> {
        anyhow::ensure!(
            Command::new("podman").arg("--version").output().is_ok_and(|o| o.status.success()),
            "ranks_in = container needs podman (scripts/deps.sh installs it)"
        );
        let rootfs = work.join("rootfs");
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
        Ok(Self { rootfs, conf, mounts: all })
    }

    /// Environment the launcher (`mpirun`) needs for containerised ranks.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("CONTAINERS_CONF".into(), self.conf.display().to_string()),
            // Ranks in different containers may not ptrace each other: no single-copy (CMA) transfers.
            ("OMPI_MCA_btl_vader_single_copy_mechanism".into(), "none".into()),
        ]
    }

    /// The per-rank command: a shell that execs `podman run` named `<prefix>-r<rank>`; inside, the rank waits for
    /// the file `go` (created once the agent has adopted every container of the job), then execs the program.
    pub fn rank_command(&self, prefix: &str, env: &[(String, String)], go: &Path, program: &[String]) -> Vec<String> {
        let mut podman = vec![
            "exec podman --cgroup-manager cgroupfs --runtime runc run --rm".to_string(),
            format!("--name {prefix}-r$OMPI_COMM_WORLD_RANK"),
            "--network host --ipc host --pid host".into(),
            "--env 'OMPI_*' --env 'PMIX_*' --env 'OPAL_*'".into(),
            "-v /usr:/usr:ro -v /etc:/etc:ro -v /tmp:/tmp".into(),
        ];
        for m in &self.mounts {
            podman.push(format!("-v {0}:{0}", m.display()));
        }
        for (k, v) in env {
            podman.push(format!("--env {k}={v}"));
        }
        podman.push(format!("--rootfs {}", self.rootfs.display()));
        podman.push(format!(
            "sh -c 'while [ ! -e {} ]; do sleep 0.01; done; exec {}'",
            go.display(),
            program.join(" ")
        ));
        vec!["sh".into(), "-c".into(), podman.join(" ")]
    }
}

/// Waits until `ranks` containers named `<prefix>-r<N>` run; returns their names.
pub fn wait_for_ranks(prefix: &str, ranks: u32, timeout: Duration) -> anyhow::Result<Vec<String>> {
    let want: Vec<String> = (0..ranks).map(|r| format!("{prefix}-r{r}")).collect();
    let deadline = Instant::now() + timeout;
    loop {
        let out = Command::new("podman").args(["ps", "--format", "{{.Names}}"]).output()?;
        let running = String::from_utf8_lossy(&out.stdout).into_owned();
        if want.iter().all(|w| running.lines().any(|l| l == w)) {
            return Ok(want);
        }
        anyhow::ensure!(Instant::now() < deadline, "the containers {prefix}-r* did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}
