//! A job's counts summed over the agents of several nodes (`lockstep stat --job NAME --nodes HOST:PORT,…`):
//! each agent has counted the job since it started there, so nothing is attached now and nothing delays it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
        _ => Err(Error::Answered {
            addr: addr.into(),
            code,
            said: lockstep_core::error::printable(body.trim(), 200).into_owned(),
        }),
    }
}

/// How long a node that counted the job may fail to answer before [`Follow`] takes it for done: a network blip
/// is waited out, a node gone for good does not keep the caller waiting for ever.
pub const GIVE_UP: Duration = Duration::from_secs(30);

/// How often each node is asked.
const EVERY: Duration = Duration::from_millis(500);

/// Most threads [`Follow`] asks nodes with; each asks its share of the nodes in turn.
const ASKERS: usize = 32;

/// What is known of one node.
#[derive(Clone, Debug, Default)]
struct Known {
    /// Its last counts of the job, kept when it fails or, after counting, no longer knows the job (its agent
    /// restarted): the sums never go back.
    counts: Option<JobCounts>,
    /// Since when it fails, and why; `None` while it answers.
    failing: Option<(Instant, String)>,
}

/// A job's counts followed on several nodes without waiting for any of them: threads ask each node every 500 ms
/// (a node that does not answer holds only its own thread, up to the 10 s deadline of one request), and the caller
/// reads what they last heard. A node that starts to fail is said on stderr once, and again when it answers.
pub struct Follow {
    nodes: Vec<String>,
    known: Arc<Mutex<Vec<Known>>>,
    stop: Arc<AtomicBool>,
}

impl Follow {
    /// Asks every node in `nodes` once, at the same time, and starts following them. The first answers are
    /// returned as they came, so that the caller can refuse a start where no node has counted the job or a node
    /// is named badly, and say which nodes failed; a node that goes on failing is not said again.
    pub fn start(nodes: &[&str], job: &JobKey) -> (Self, Vec<Result<Option<JobCounts>>>) {
        let first = ask_all(nodes, job);
        let now = Instant::now();
        let known = first
            .iter()
            .map(|a| match a {
                Ok(counts) => Known { counts: counts.clone(), failing: None },
                Err(e) => Known { counts: None, failing: Some((now, lockstep_core::error::one_line(e))) },
            })
            .collect();
        let follow = Self {
            nodes: nodes.iter().map(ToString::to_string).collect(),
            known: Arc::new(Mutex::new(known)),
            stop: Arc::new(AtomicBool::new(false)),
        };
        for share in 0..nodes.len().min(ASKERS) {
            let (nodes, known, stop, job) =
                (follow.nodes.clone(), follow.known.clone(), follow.stop.clone(), job.clone());
            std::thread::spawn(move || {
                let mut round = now;
                loop {
                    std::thread::sleep(EVERY.saturating_sub(round.elapsed()));
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    round = Instant::now();
                    for i in (share..nodes.len()).step_by(ASKERS) {
                        let answer = fetch(&nodes[i], &job);
                        let mut known = known.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        take(&nodes[i], &mut known[i], answer);
                    }
                }
            });
        }
        (follow, first)
    }

    /// The counts last heard from each node that has any.
    pub fn counts(&self) -> Vec<JobCounts> {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter_map(|k| k.counts.clone())
            .collect()
    }

    /// Whether no node counts the job any more: each has said so, or never counted it, or has failed for
    /// [`GIVE_UP`].
    pub fn done(&self) -> bool {
        let known = self.known.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        known.iter().all(|k| match (&k.counts, &k.failing) {
            (_, Some((since, _))) if since.elapsed() >= GIVE_UP => true,
            (Some(c), _) => !c.counting,
            (None, _) => true,
        })
    }

    /// The nodes that fail now, with why: their counts are missing (never heard) or stale.
    pub fn failing(&self) -> Vec<(String, String)> {
        let known = self.known.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        known
            .iter()
            .zip(&self.nodes)
            .filter_map(|(k, n)| k.failing.as_ref().map(|(_, why)| (n.clone(), why.clone())))
            .collect()
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Every node's answer, asked at the same time ([`ASKERS`] threads at most).
fn ask_all(nodes: &[&str], job: &JobKey) -> Vec<Result<Option<JobCounts>>> {
    let answers: Vec<Mutex<Option<Result<Option<JobCounts>>>>> = nodes.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for share in 0..nodes.len().min(ASKERS) {
            let answers = &answers;
            scope.spawn(move || {
                for i in (share..nodes.len()).step_by(ASKERS) {
                    *answers[i].lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fetch(nodes[i], job));
                }
            });
        }
    });
    answers
        .into_iter()
        .map(|a| a.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).expect("every node was asked"))
        .collect()
}

/// Takes node `addr`'s `answer` into what is known of it.
fn take(addr: &str, known: &mut Known, answer: Result<Option<JobCounts>>) {
    match answer {
        Ok(counts) => {
            if known.failing.take().is_some() {
                eprintln!("lockstep: {addr} answers again");
            }
            match (counts, &mut known.counts) {
                (Some(c), kept) => *kept = Some(c),
                // It counted the job and knows it no more (its agent restarted): its last counts stay, final.
                (None, Some(kept)) => kept.counting = false,
                (None, None) => {}
            }
        }
        Err(e) => {
            if known.failing.is_none() {
                let kept = if known.counts.is_some() { "its last counts stand in" } else { "left out" };
                let why = lockstep_core::error::one_line(&e);
                eprintln!("lockstep: {why} ({kept})");
                known.failing = Some((Instant::now(), why));
            }
        }
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
