//! `lockstep run`: create the job's cgroup, start the command inside it, forward signals, wait, clean up.

use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{kill, SigSet, Signal};
use nix::unistd::Pid;

use crate::spawn::{self, Spawn, Started};
use crate::{reconcile, Error};
use lockstep_cgroup::procfs;
use lockstep_cgroup::{self as cgroup, Limits};
use lockstep_core::error::{is_usage, usage, UsageError};
use lockstep_core::ident::{JobKey, JobName, ProcessRef};
use lockstep_core::job::JobOrigin;
use lockstep_core::place::Placement;
use lockstep_proto::client::{self, CallError};
use lockstep_proto::protocol;
use lockstep_store::{NewJob, Store};

/// Signals `lockstep run` passes on to its command instead of dying from them.
const FORWARDED: [Signal; 4] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT];

/// How long leftover processes of a job get to die before cleanup gives up.
const DESTROY_TIMEOUT: Duration = Duration::from_secs(10);

/// A validated `lockstep run` request.
pub struct Request {
    /// Job name.
    pub name: JobName,
    /// Where the job goes.
    pub placement: Placement,
    /// `--cpus`, if given.
    pub requested_cpus: Option<usize>,
    /// CPU weight (cgroup v2 scale).
    pub weight: Option<u64>,
    /// Memory limit in bytes.
    pub mem_limit: Option<u64>,
    /// argv.
    pub command: Vec<String>,
    /// Row for co-scheduling, when the node's agent manages the job.
    pub row: Option<u32>,
    /// The agent's socket; the job is registered there when an agent listens.
    pub socket: PathBuf,
}

/// Finds `program` as `execvp` would; a usage error if it is not an executable file.
pub fn resolve_command(program: &str) -> Result<PathBuf, UsageError> {
    let executable = |p: &Path| p.is_file() && p.metadata().is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    let found = if program.contains('/') {
        Some(PathBuf::from(program)).filter(|p| executable(p))
    } else {
        std::env::var_os("PATH")
            .and_then(|path| std::env::split_paths(&path).map(|d| d.join(program)).find(|p| executable(p)))
    };
    found.ok_or_else(|| UsageError::new(format!("command not found or not executable: {program}")))
}

/// Runs the job to its end and returns the exit status lockstep should exit with (the command's, or
/// 128+signal when a signal killed it).
pub fn run(store: &mut Store, req: &Request) -> Result<i32, Error> {
    let program = resolve_command(&req.command[0])?;
    reconcile::reconcile(store)?;
    let key = JobKey::Named(req.name.clone());
    if store.managed_jobs()?.iter().any(|m| m.name == key && m.origin != JobOrigin::Run) {
        return usage(format!(
            "job name {:?} is in use by a job the agent manages (lockstep jobs lists it; pick another name)",
            req.name
        ));
    }

    let me = std::process::id() as i32;
    // A name in use is the store's usage error.
    let id = store.insert_job(&NewJob {
        name: &req.name,
        command: &req.command,
        placement: &req.placement,
        requested_cpus: req.requested_cpus,
        weight: req.weight,
        mem_limit: req.mem_limit,
        supervisor: ProcessRef { pid: me, start: procfs::start_time(me).unwrap_or(0) },
    })?;

    let limits = Limits {
        cpus: Some(req.placement.pus.clone()),
        mems: Some(req.placement.mems.clone()),
        weight: req.weight,
        mem_limit: req.mem_limit,
    };
    let created = cgroup::detect().map_err(Error::from).and_then(|backend| Ok(backend.create(&req.name, &limits)?));
    let cg = match created {
        Ok(cg) => cg,
        Err(e) if is_usage(&e) => {
            store.forget_job(id)?;
            return Err(e);
        }
        Err(e) => {
            store.finish(id, "failed", None, Some(&e.to_string()))?;
            return Err(e);
        }
    };
    store.set_cgroup(id, &cg.record())?;
    let registered = client::call_if_running(
        &req.socket,
        &protocol::Request::Register { job: req.name.clone(), dirs: cg.dirs.clone(), row: req.row },
    );
    let managed = match registered.map(|r| r.and_then(client::check)) {
        None => false,
        Some(Ok(_)) => true,
        Some(Err(e)) => {
            let _ = cg.destroy(DESTROY_TIMEOUT);
            if matches!(e, CallError::Usage(_)) {
                store.forget_job(id)?;
            } else {
                store.finish(id, "failed", None, Some(&format!("the agent refused the job: {e:#}")))?;
            }
            return Err(e.into());
        }
    };

    let outcome = supervise(&program, req, &cg.procs_paths(), store, id);
    let oom_kills = cg.oom_kills();
    if oom_kills > 0 {
        eprintln!(
            "lockstep: job {}: the kernel's OOM killer killed {oom_kills} process(es) at the memory limit ({} bytes)",
            req.name,
            req.mem_limit.unwrap_or_default()
        );
    }
    if managed {
        let release = protocol::Request::Release { job: req.name.clone().into() };
        let _ = client::call_if_running(&req.socket, &release);
    }
    let destroyed = cg.destroy(DESTROY_TIMEOUT);
    match (&outcome, destroyed) {
        (Ok(status), Ok(())) => store.finish(id, "done", Some(*status), None)?,
        (Ok(status), Err(e)) => {
            store.finish(id, "done", Some(*status), Some(&format!("cgroup cleanup failed: {e}")))?;
            eprintln!("lockstep: job {}: cgroup cleanup failed: {e}", req.name);
        }
        (Err(e), _) => store.finish(id, "failed", None, Some(&e.to_string()))?,
    }
    outcome
}

/// Starts the command in the cgroup (joined between fork and exec, [`crate::spawn`]), forwards signals to it,
/// and waits.
fn supervise(program: &Path, req: &Request, procs: &[CString], store: &Store, id: i64) -> Result<i32, Error> {
    let mut forwarded = SigSet::empty();
    for sig in FORWARDED {
        forwarded.add(sig);
    }
    // Blocked here, these signals wait for the forwarding thread's sigwait; the child unblocks them and gives
    // them their default action, even when `lockstep run` itself was started with them ignored (a background
    // job of a shell, nohup): an ignored disposition would survive exec.
    let mask = |e: nix::Error| Error::System { what: "cannot set the signal mask".into(), source: e.into() };
    forwarded.thread_block().map_err(mask)?;
    let spawn = Spawn { program, argv: &req.command, join: procs, reset: &FORWARDED };
    let child = match spawn.start(false).and_then(Started::go) {
        Ok(pid) => pid,
        Err(e) => {
            forwarded.thread_unblock().map_err(mask)?;
            return usage(format!("cannot start {}: {e}", req.command[0]));
        }
    };
    store.set_pid(id, child)?;

    let pid = Pid::from_raw(child);
    std::thread::spawn(move || loop {
        if let Ok(sig) = forwarded.wait() {
            let _ = kill(pid, sig);
        }
    });
    let (status, _) = spawn::wait(child, 0).ok_or_else(|| Error::System {
        what: format!("cannot wait for {}", req.command[0]),
        source: std::io::Error::last_os_error(),
    })?;
    Ok(spawn::exit_code(status))
}
