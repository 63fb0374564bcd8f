//! The agent's HTTP endpoint (`--metrics ADDR:PORT`): `GET /metrics` for Prometheus (OpenMetrics when the
//! scraper asks for it) and `GET /api/v1/jobs/NAME` (one job's counts as JSON, for `lockstep stat --nodes`).
//! Reads only; nothing else is served. The door itself (HTTP, caps, deadlines) is `doors`.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;

use hyper::{header, Method, StatusCode};

use super::sampler::Sampler;
use crate::doors::{Handler, Reply};
use lockstep_core::error::UsageError;
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

/// The metrics door's handler: reads only (`GET`), over the sampler's snapshot and the store.
pub fn handler(telemetry: Sampler, store: PathBuf) -> Handler {
    Arc::new(move |_caller, parts, _body| {
        if parts.method != Method::GET {
            return Reply::text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served");
        }
        let openmetrics = parts
            .headers
            .get_all(header::ACCEPT)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| v.contains("application/openmetrics-text")));
        route(parts.uri.path(), openmetrics, &telemetry, &store)
    })
}

fn route(path: &str, openmetrics: bool, telemetry: &Sampler, store: &std::path::Path) -> Reply {
    if path == "/metrics" {
        let me = std::process::id() as i32;
        let t = telemetry.published();
        let snap = Snapshot {
            node: t.node(),
            samples: t.latest().collect(),
            jobs: t.job_count(),
            cpu_seconds: lockstep_cgroup::procfs::cpu_seconds(me).unwrap_or(0.0),
            rss_bytes: lockstep_cgroup::procfs::rss_bytes(me).unwrap_or(0),
        };
        let body = render(&snap, openmetrics);
        let content_type = if openmetrics { OPENMETRICS } else { PROMETHEUS };
        return Reply { status: StatusCode::OK, content_type, body: body.into_bytes() };
    }
    if let Some(job) = path.strip_prefix("/api/v1/jobs/").filter(|j| !j.is_empty() && !j.contains('/')) {
        return match job_counts(job, telemetry, store) {
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

/// The job's latest counts: live when the agent counts it, else its final counts from the store.
fn job_counts(job: &str, telemetry: &Sampler, store: &std::path::Path) -> anyhow::Result<Option<JobCounts>> {
    let node = {
        let t = telemetry.published();
        if let Some(latest) = t.latest_of(job) {
            return Ok(Some(JobCounts {
                node: t.node().to_string(),
                job: job.to_string(),
                counting: true,
                time: latest.first().map_or(0.0, |s| s.time),
                events: latest.to_vec(),
            }));
        }
        t.node().to_string()
    };
    let finals: Vec<_> = lockstep_store::Store::open_existing(store)?.latest_samples(job, &node)?;
    if finals.is_empty() {
        return Ok(None);
    }
    Ok(Some(JobCounts { node, job: job.to_string(), counting: false, time: finals[0].time, events: finals }))
}
