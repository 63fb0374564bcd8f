//! The agent's socket server: one connection at a time, one request line, one response line.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

use super::{adopt, Agent, Shared};
use lockstep_core::cosched::{rows, slot, PolicySpec};
use lockstep_core::error::UsageError;
use lockstep_proto::names::check_job_name;
use lockstep_proto::protocol::{Request, Response};
use lockstep_store::SlurmJob;

/// Binds the socket (open to every user; see [`handle`] for what each may do); an agent already answering there
/// is a usage error, a stale socket file is replaced.
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    if UnixStream::connect(path).is_ok() {
        return Err(UsageError::new(format!("an agent is already running at {}", path.display())).into());
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let _ = std::fs::remove_file(path);
    let listener =
        UnixListener::bind(path).map_err(|e| UsageError::new(format!("cannot listen on {}: {e}", path.display())))?;
    // Anyone may connect: each request is checked against the caller's credentials (SO_PEERCRED).
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}

/// Serves requests on a thread of its own, at the slot thread's real-time priority: it takes the agent's lock,
/// and a holder preempted by the jobs (or by threads `dcs:rr` raised) would delay slot switches and lowering.
pub fn spawn(listener: UnixListener, shared: Shared) {
    std::thread::spawn(move || {
        super::realtime_thread("the control socket");
        for stream in listener.incoming().flatten() {
            let _ = serve(stream, &shared);
        }
    });
}

/// The UID of the process at the other end of `stream` (`SO_PEERCRED`).
fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    let cred = getsockopt(stream, PeerCredentials).map_err(std::io::Error::from)?;
    Ok(cred.uid())
}

fn serve(stream: UnixStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let uid = peer_uid(&stream)?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let response = match serde_json::from_str::<Request>(&line) {
        Ok(request) => {
            let r = handle(&mut shared.lock(), request, uid);
            shared.notify();
            r
        }
        Err(e) => {
            failure(UsageError::new(format!("malformed request ({e}); expected one JSON object per line")).into())
        }
    };
    let mut out = serde_json::to_string(&response).unwrap_or_else(|_| r#"{"ok":false}"#.into());
    out.push('\n');
    (&stream).write_all(out.as_bytes())
}

fn failure(e: anyhow::Error) -> Response {
    Response { ok: false, usage: e.is::<UsageError>(), error: Some(format!("{e:#}")), status: None }
}

fn done() -> Response {
    Response { ok: true, ..Default::default() }
}

/// Carries out `request` for user `uid`: root may do everything; another user sees only their own jobs in the
/// status and may change nothing.
fn handle(agent: &mut Agent, request: Request, uid: u32) -> Response {
    if uid != 0 && !matches!(request, Request::Status) {
        return failure(anyhow::anyhow!(
            "permission denied: only root may change what the agent does (UID {uid} may query its own jobs)"
        ));
    }
    let result = match request {
        Request::Status => {
            let viewer = (uid != 0).then_some(uid);
            return Response { ok: true, status: Some(agent.status(viewer)), ..Default::default() };
        }
        request => change(agent, request),
    };
    match result {
        Ok(()) => done(),
        Err(e) => failure(e),
    }
}

/// Carries out a request that changes what the agent does (root's only).
fn change(agent: &mut Agent, request: Request) -> anyhow::Result<()> {
    match request {
        Request::Status => Ok(()),
        Request::Policy { name, slot_ms } => set_policy(agent, &name, slot_ms),
        Request::Adopt { job, cgroups, pids, containers, row } => {
            check_job_name(&job)?;
            rows::check(row)?;
            agent.add_job(&job, |backend| match (cgroups.is_empty(), pids.is_empty(), containers.is_empty()) {
                (false, true, true) => adopt::from_cgroups(backend, &job, &cgroups, row),
                (true, false, true) => adopt::from_pids(backend, &job, &pids, row),
                (true, true, false) => adopt::from_containers(backend, &job, &containers, row),
                _ => Err(UsageError::new("adopt needs exactly one of --cgroup, --pid, --container").into()),
            })
        }
        Request::Register { job, dirs, row } => {
            check_job_name(&job)?;
            rows::check(row)?;
            agent.add_job(&job, |_| Ok(adopt::from_run(&job, dirs, row)))
        }
        Request::Release { job } => agent.release(&job),
        Request::SlurmProlog { id, uid, row } => {
            rows::check(row)?;
            agent.slurm_prolog(SlurmJob { id, uid, row })
        }
        Request::SlurmEpilog { id } => agent.slurm_epilog(id),
    }
}

fn set_policy(agent: &mut Agent, name: &str, slot_ms: Option<u64>) -> anyhow::Result<()> {
    let policy: PolicySpec = name.parse()?;
    let slot = slot_ms.map(|ms| slot::parse(&format!("{ms}ms"))).transpose()?;
    agent.set_policy(policy, slot)
}
