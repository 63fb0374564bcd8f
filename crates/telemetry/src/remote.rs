//! A job's counts summed over the agents of several nodes (`lockstep stat --job NAME --nodes HOST:PORT,…`):
//! each agent has counted the job since it started there, so nothing is attached now and nothing delays it.

use std::time::Duration;

use lockstep_core::ident::{JobKey, NodeName};
use lockstep_proto::http::{self, Target};
use serde::{Deserialize, Serialize};

use crate::counters::Reading;
use crate::error::{Error, Result};
use crate::Sample;

/// A job's counters on one node, as the agent's HTTP API serves them (`GET /api/v1/jobs/NAME`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobCounts {
    /// The node.
    pub node: NodeName,
    /// The job.
    pub job: JobKey,
    /// Whether the agent counts the job now (false: the job has gone and these are its final counts).
    pub counting: bool,
    /// When the counts were read, seconds since the epoch (0 before the first read).
    pub time: f64,
    /// One entry per event this machine can count.
    pub events: Vec<Sample>,
}

/// One node's counts of `job`; `None` when that agent has not counted it. An answer that is not an agent's (names
/// that are no valid job or node) or of another job is an error.
pub fn fetch(addr: &str, job: &JobKey) -> Result<Option<JobCounts>> {
    let (code, body) = get(addr, &format!("/api/v1/jobs/{job}"))?;
    match code {
        200 => {
            let counts: JobCounts =
                serde_json::from_str(&body).map_err(|why| Error::BadAnswer { addr: addr.into(), why })?;
            if counts.job != *job {
                return Err(Error::OtherJob { addr: addr.into(), asked: job.clone(), answered: counts.job });
            }
            Ok(Some(counts))
        }
        404 => Ok(None),
        _ => Err(Error::Answered { addr: addr.into(), code, said: body.trim().to_string() }),
    }
}

/// Every event's counts summed over the nodes, in the order the first node lists them.
pub fn sum(nodes: &[JobCounts]) -> Vec<(String, Reading)> {
    let mut out: Vec<(String, Reading)> = Vec::new();
    for s in nodes.iter().flat_map(|n| &n.events) {
        let r = Reading { value: s.value, enabled: s.enabled, running: s.running };
        match out.iter_mut().find(|(e, _)| *e == s.event) {
            Some((_, total)) => total.add(&r),
            None => out.push((s.event.clone(), r)),
        }
    }
    out
}

/// `GET path` from the HTTP server at `addr` (`HOST:PORT`: an agent's metrics address); returns the status code
/// and the body. A malformed address is a usage error; the exchange has a 10 s deadline.
pub fn get(addr: &str, path: &str) -> Result<(u16, String)> {
    use std::net::ToSocketAddrs;
    addr.to_socket_addrs()
        .map_err(|e| Error::usage(format!("bad node address {addr:?}: {e} (expected HOST:PORT)")))?
        .next()
        .ok_or_else(|| Error::usage(format!("node address {addr:?} resolves to nothing")))?;
    let answer = http::request(Target::Tcp(addr), path, None, Duration::from_secs(10))
        .map_err(|why| Error::Unreachable { addr: addr.into(), why })?;
    Ok((answer.status, String::from_utf8_lossy(&answer.body).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::sum;
    use super::JobCounts;
    use crate::counters::Reading;
    use crate::Sample;

    fn node(name: &str, values: &[(&str, u64)]) -> JobCounts {
        JobCounts {
            node: name.parse().unwrap(),
            job: "j".parse().unwrap(),
            counting: true,
            time: 1.0,
            events: values
                .iter()
                .map(|(e, v)| Sample {
                    job: "j".parse().unwrap(),
                    node: name.parse().unwrap(),
                    time: 1.0,
                    event: e.to_string(),
                    value: *v,
                    enabled: 10,
                    running: 10,
                })
                .collect(),
        }
    }

    #[test]
    fn sums_events_over_nodes() {
        let total = sum(&[node("a", &[("task-clock", 5), ("page-faults", 1)]), node("b", &[("page-faults", 2)])]);
        assert_eq!(
            total,
            vec![
                ("task-clock".to_string(), Reading { value: 5, enabled: 10, running: 10 }),
                ("page-faults".to_string(), Reading { value: 3, enabled: 20, running: 20 }),
            ]
        );
    }
}
