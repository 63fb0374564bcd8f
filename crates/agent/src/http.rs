//! The agent's HTTP endpoint (`--metrics ADDR:PORT`): `GET /metrics` for Prometheus (OpenMetrics when the
//! scraper asks for it) and `GET /api/v1/jobs/NAME` (one job's counts as JSON, for `lockstep stat --nodes`).
//! One short request per connection; nothing else is served.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use super::sampler::SharedTelemetry;
use lockstep_core::error::UsageError;
use lockstep_telemetry::exposition::{render, Snapshot, OPENMETRICS, PROMETHEUS};
use lockstep_telemetry::remote::JobCounts;

/// Binds `addr` and serves on a thread of its own; returns the address bound (port 0 picks one).
pub fn spawn(addr: SocketAddr, telemetry: SharedTelemetry, store: PathBuf) -> anyhow::Result<SocketAddr> {
    let listener =
        TcpListener::bind(addr).map_err(|e| UsageError::new(format!("cannot serve metrics on {addr}: {e}")))?;
    let bound = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = serve(stream, &telemetry, &store);
        }
    });
    Ok(bound)
}

/// A response: status line, content type, body.
struct Reply {
    status: &'static str,
    content_type: &'static str,
    body: String,
}

fn text(status: &'static str, body: &str) -> Reply {
    Reply { status, content_type: "text/plain; charset=utf-8", body: format!("{body}\n") }
}

fn serve(stream: TcpStream, telemetry: &SharedTelemetry, store: &std::path::Path) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(&stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut openmetrics = false;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.trim().eq_ignore_ascii_case("accept") && value.contains("application/openmetrics-text") {
                openmetrics = true;
            }
        }
    }
    let mut parts = request_line.split_whitespace();
    let reply = match (parts.next(), parts.next()) {
        (Some("GET"), Some(path)) => route(path, openmetrics, telemetry, store),
        (Some(_), Some(_)) => text("405 Method Not Allowed", "only GET is served"),
        _ => text("400 Bad Request", "malformed request line"),
    };
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reply.status,
        reply.content_type,
        reply.body.len()
    );
    let mut stream = &stream;
    stream.write_all(head.as_bytes())?;
    stream.write_all(reply.body.as_bytes())
}

fn route(path: &str, openmetrics: bool, telemetry: &SharedTelemetry, store: &std::path::Path) -> Reply {
    let path = path.split('?').next().unwrap_or(path);
    if path == "/metrics" {
        let me = std::process::id() as i32;
        let t = telemetry.lock();
        let snap = Snapshot {
            node: t.node(),
            samples: t.latest().collect(),
            jobs: t.job_count(),
            cpu_seconds: lockstep_cgroup::procfs::cpu_seconds(me).unwrap_or(0.0),
            rss_bytes: lockstep_cgroup::procfs::rss_bytes(me).unwrap_or(0),
        };
        let body = render(&snap, openmetrics);
        return Reply { status: "200 OK", content_type: if openmetrics { OPENMETRICS } else { PROMETHEUS }, body };
    }
    if let Some(job) = path.strip_prefix("/api/v1/jobs/").filter(|j| !j.is_empty() && !j.contains('/')) {
        return match job_counts(job, telemetry, store) {
            Ok(Some(counts)) => Reply {
                status: "200 OK",
                content_type: "application/json",
                body: serde_json::to_string(&counts).unwrap_or_default() + "\n",
            },
            Ok(None) => text("404 Not Found", &format!("no job {job:?} counted on this node")),
            Err(e) => text("500 Internal Server Error", &format!("{e:#}")),
        };
    }
    text("404 Not Found", "not found (try /metrics or /api/v1/jobs/NAME)")
}

/// The job's latest counts: live when the agent counts it, else its final counts from the store.
fn job_counts(job: &str, telemetry: &SharedTelemetry, store: &std::path::Path) -> anyhow::Result<Option<JobCounts>> {
    let node = {
        let t = telemetry.lock();
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
    let finals: Vec<_> = lockstep_store::Store::open(store)?.latest_samples(job, &node)?;
    if finals.is_empty() {
        return Ok(None);
    }
    Ok(Some(JobCounts { node, job: job.to_string(), counting: false, time: finals[0].time, events: finals }))
}
