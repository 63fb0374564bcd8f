//! A job's counts summed over the agents of several nodes (`lockstep stat --job NAME --nodes HOST:PORT,…`):
//! each agent has counted the job since it started there, so nothing is attached now and nothing delays it.

use super::counters::Reading;
use crate::agent::http;
use crate::agent::protocol::JobCounts;

/// One node's counts of `job`; `None` when that agent has not counted it.
pub fn fetch(addr: &str, job: &str) -> anyhow::Result<Option<JobCounts>> {
    let (code, body) = http::get(addr, &format!("/api/v1/jobs/{job}"))?;
    match code {
        200 => Ok(Some(serde_json::from_str(&body).map_err(|e| anyhow::anyhow!("bad answer from {addr}: {e}"))?)),
        404 => Ok(None),
        _ => anyhow::bail!("the agent at {addr} answered {code}: {}", body.trim()),
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

#[cfg(test)]
mod tests {
    use super::sum;
    use crate::agent::protocol::JobCounts;
    use crate::store::Sample;
    use crate::telemetry::counters::Reading;

    fn node(name: &str, values: &[(&str, u64)]) -> JobCounts {
        JobCounts {
            node: name.into(),
            job: "j".into(),
            counting: true,
            time: 1.0,
            events: values
                .iter()
                .map(|(e, v)| Sample {
                    job: "j".into(),
                    node: name.into(),
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
