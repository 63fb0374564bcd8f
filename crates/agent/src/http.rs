//! The agent's HTTP endpoint (`--metrics ADDR:PORT`): `GET /metrics` for Prometheus (OpenMetrics when the scraper asks
//! for it), `GET /api/v1/jobs/NAME` (one job's counts as JSON, for `lockstep stat --nodes`), and `POST /slurm/places`,
//! the controller's notices of places (`notices`): the one request that is not a read. The door itself (HTTP, caps,
//! deadlines) is `doors`.

use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use hyper::{header, Method, StatusCode};

use super::sampler::Sampler;
use crate::daemon::Board;
use crate::doors::{Handler, Reply};
use crate::notices::Notices;
use lockstep_core::error::UsageError;
use lockstep_core::ident::JobKey;
use lockstep_store::Store;
use lockstep_telemetry::exposition::{render, Snapshot, OPENMETRICS, PROMETHEUS};
use lockstep_telemetry::remote::JobCounts;

/// Binds the metrics address; a usage error names it when it cannot be bound.
pub fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::AddrInUse => " (another program listens there: choose another --metrics port)",
            std::io::ErrorKind::AddrNotAvailable => " (no interface of this machine has that address)",
            _ => "",
        };
        UsageError::new(format!("cannot serve metrics on {addr}: {}{hint}", lockstep_core::error::io_reason(&e))).into()
    })
}

/// The metrics door's handler: reads only (`GET`), over the agent's counters and, for a job no longer counted,
/// the store at `store` through one read-only connection opened once (opened at the first request that needs
/// it, and again after a failure), shared by every request; and takes the controller's notices of places
/// (`POST /slurm/places`) to `notices`.
/// Each scrape also shows the daemon's latest status, read from `board` (never waiting on the daemon's loop).
/// Root and the `scrapers` named are told whose each job is.
pub fn handler(
    telemetry: Sampler,
    board: Board,
    store: PathBuf,
    notices: Arc<Notices>,
    scrapers: crate::doors::Scrapers,
) -> Handler {
    let reader = Arc::new(Reader { path: store, store: Mutex::new(None) });
    Arc::new(move |caller, parts, body| {
        if parts.method == Method::POST && parts.uri.path() == lockstep_slurm::push::PATH {
            return notices.take(&body);
        }
        if parts.method != Method::GET {
            return Reply::text(
                StatusCode::METHOD_NOT_ALLOWED,
                "only GET is served (and POST of the controller's notices)",
            );
        }
        let openmetrics = parts
            .headers
            .get_all(header::ACCEPT)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| v.contains("application/openmetrics-text")));
        route(parts.uri.path(), openmetrics, scrapers.names(caller), &telemetry, &board, &reader)
    })
}

/// The store's read-only connection of the metrics door (`Store::open_existing`: no write lock, no write
/// transaction, so no request can hold up the daemon's writes).
struct Reader {
    path: PathBuf,
    store: Mutex<Option<Store>>,
}

impl Reader {
    /// The last samples of job `job` of node `node` in the store.
    fn latest_samples(
        &self,
        job: &JobKey,
        node: &lockstep_core::ident::NodeName,
    ) -> anyhow::Result<Vec<lockstep_core::sample::Sample>> {
        let mut store = self.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if store.is_none() {
            *store = Some(Store::open_existing(&self.path)?);
        }
        let found = store.as_ref().map(|s| s.latest_samples(job, node)).transpose()?.unwrap_or_default();
        Ok(found)
    }
}

/// Answers `path`; a scrape by a `privileged` caller (root, a named scraper) also says whose each job is.
fn route(path: &str, openmetrics: bool, privileged: bool, telemetry: &Sampler, board: &Board, store: &Reader) -> Reply {
    if path == "/metrics" {
        let me = std::process::id() as i32;
        let t = telemetry.published();
        let status = board.read();
        let owners: HashSet<u32> =
            if privileged { status.jobs.iter().map(|j| j.owner).collect() } else { HashSet::new() };
        let users = user_names(&owners);
        let snap = Snapshot {
            node: t.node(),
            samples: t.latest().collect(),
            jobs: t.job_count(),
            cpu_seconds: lockstep_cgroup::procfs::cpu_seconds(me).unwrap_or(0.0),
            rss_bytes: lockstep_cgroup::procfs::rss_bytes(me).unwrap_or(0),
            status: &status,
            users: &users,
            privileged,
            build: (lockstep_version::RELEASE, lockstep_version::COMMIT),
        };
        let body = render(&snap, openmetrics);
        let content_type = if openmetrics { OPENMETRICS } else { PROMETHEUS };
        return Reply { status: StatusCode::OK, content_type, body: body.into_bytes() };
    }
    if let Some(job) = path.strip_prefix("/api/v1/jobs/").filter(|j| !j.is_empty() && !j.contains('/')) {
        let job: JobKey = match job.parse() {
            Ok(job) => job,
            Err(e) => return Reply::text(StatusCode::BAD_REQUEST, &e.to_string()),
        };
        return match job_counts(&job, telemetry, store) {
            Ok(Some(counts)) => Reply {
                status: StatusCode::OK,
                content_type: "application/json",
                body: (serde_json::to_string(&counts).unwrap_or_default() + "\n").into_bytes(),
            },
            Ok(None) => Reply::text(StatusCode::NOT_FOUND, &format!("no job {job:?} counted on this node")),
            Err(e) => Reply::text(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e:#}")),
        };
    }
    Reply::text(StatusCode::NOT_FOUND, "not found (try /metrics or /api/v1/jobs/NAME)")
}

/// The names of the UIDs `owners`, from /etc/passwd (root's file, read once per privileged scrape; the name
/// service is never asked: an LDAP server that is slow would hold up the scrape). A UID not there is shown as its
/// number.
fn user_names(owners: &HashSet<u32>) -> HashMap<u32, String> {
    if owners.is_empty() {
        return HashMap::new();
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .filter_map(|l| {
            let mut fields = l.split(':');
            let name = fields.next()?;
            let uid: u32 = fields.nth(1)?.parse().ok()?;
            owners.contains(&uid).then(|| (uid, name.to_string()))
        })
        .collect()
}

/// The job's latest counts: live when the agent counts it, else its final counts from the store.
fn job_counts(job: &JobKey, telemetry: &Sampler, store: &Reader) -> anyhow::Result<Option<JobCounts>> {
    let node = {
        let t = telemetry.published();
        if let Some(latest) = t.latest_of(job) {
            return Ok(Some(JobCounts {
                node: t.node().clone(),
                job: job.clone(),
                counting: true,
                time: latest.first().map_or(0.0, |s| s.time),
                events: latest.to_vec(),
            }));
        }
        t.node().clone()
    };
    let finals = store.latest_samples(job, &node)?;
    if finals.is_empty() {
        return Ok(None);
    }
    Ok(Some(JobCounts { node, job: job.clone(), counting: false, time: finals[0].time, events: finals }))
}
