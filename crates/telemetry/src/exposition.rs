//! The agent's counters as Prometheus exposition text (format 0.0.4) or OpenMetrics 1.0 text. Labels are
//! limited to `node`, `job` and `event`: one series per job and event, never per PID or per CPU.

use std::fmt::Write;

use crate::Sample;
use lockstep_core::sample::{COSCHEDULED, RANK_RUNNING, RANK_WAITING};

/// What one scrape shows.
pub struct Snapshot<'a> {
    /// Node name.
    pub node: &'a str,
    /// The latest cumulative sample of every counted job and event.
    pub samples: Vec<&'a Sample>,
    /// Jobs counted now.
    pub jobs: usize,
    /// The agent's own CPU time in seconds.
    pub cpu_seconds: f64,
    /// The agent's resident set size in bytes.
    pub rss_bytes: u64,
}

/// The content type for OpenMetrics.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type for the Prometheus text format.
pub const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `value` as a label value: backslash, double quote and newline escaped.
fn escape(value: &str) -> String {
    value.replace('\\', r"\\").replace('"', r#"\""#).replace('\n', r"\n")
}

/// One metric family in either format. `name` is the family name without `_total`; `counter` families get
/// `_total` on their samples.
struct Family<'w> {
    out: &'w mut String,
    openmetrics: bool,
}

impl Family<'_> {
    fn header(&mut self, name: &str, kind: &str, unit: Option<&str>, help: &str) {
        let exposed = if kind == "counter" && !self.openmetrics { format!("{name}_total") } else { name.to_string() };
        let _ = writeln!(self.out, "# HELP {exposed} {help}");
        let _ = writeln!(self.out, "# TYPE {exposed} {kind}");
        if let (Some(unit), true) = (unit, self.openmetrics) {
            let _ = writeln!(self.out, "# UNIT {exposed} {unit}");
        }
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: &str) {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
        let _ = writeln!(self.out, "{name}{{{}}} {value}", labels.join(","));
    }
}

/// One per-event metric family: name, unit, help, and the sample's value as exposed.
type EventFamily = (&'static str, Option<&'static str>, &'static str, fn(&Sample) -> String);

/// Renders `snap`; OpenMetrics when `openmetrics`, else the Prometheus text format.
pub fn render(snap: &Snapshot, openmetrics: bool) -> String {
    let mut out = String::new();
    let mut f = Family { out: &mut out, openmetrics };
    let node = snap.node;
    let per_event: [EventFamily; 3] = [
        (
            "lockstep_job_events",
            None,
            "Events counted for a job since the agent attached to it, raw (scale by enabled/running when multiplexed).",
            |s| s.value.to_string(),
        ),
        (
            "lockstep_job_event_enabled_seconds",
            Some("seconds"),
            "Time the job's counter for this event was enabled, summed over its counters.",
            |s| format!("{:.9}", s.enabled as f64 / 1e9),
        ),
        (
            "lockstep_job_event_running_seconds",
            Some("seconds"),
            "Time the job's counter for this event was counting (less than enabled when multiplexed).",
            |s| format!("{:.9}", s.running as f64 / 1e9),
        ),
    ];
    for (name, unit, help, value) in per_event {
        f.header(name, "counter", unit, help);
        for s in &snap.samples {
            f.sample(&format!("{name}_total"), &[("node", node), ("job", &s.job), ("event", &s.event)], &value(s));
        }
    }
    let shares: [(&str, &str, &str); 3] = [
        (
            "lockstep_job_coscheduled_ratio",
            COSCHEDULED,
            "Share of the time some of the job's ranks on this node was on a CPU in which every one of them was at \
             once, since its first rank was seen: 1 when its ranks run together whenever they run, near 0 when they \
             never do.",
        ),
        (
            "lockstep_job_rank_running_ratio",
            RANK_RUNNING,
            "Share of the job's time since its first rank was seen in which some of its ranks on this node was on a \
             CPU.",
        ),
        (
            "lockstep_job_rank_waiting_ratio",
            RANK_WAITING,
            "Share of the job's time since its first rank was seen in which one of its ranks on this node was \
             runnable but waited for a CPU.",
        ),
    ];
    for (name, event, help) in shares {
        f.header(name, "gauge", Some("ratio"), help);
        for s in snap.samples.iter().filter(|s| s.event == event) {
            if let Some(share) = s.share() {
                f.sample(name, &[("node", node), ("job", &s.job)], &format!("{share:.6}"));
            }
        }
    }
    f.header("lockstep_agent_jobs", "gauge", None, "Jobs the agent counts now.");
    f.sample("lockstep_agent_jobs", &[("node", node)], &snap.jobs.to_string());
    f.header("lockstep_agent_cpu_seconds", "counter", Some("seconds"), "CPU time the agent has used (user + system).");
    f.sample("lockstep_agent_cpu_seconds_total", &[("node", node)], &format!("{:.2}", snap.cpu_seconds));
    f.header("lockstep_agent_resident_memory_bytes", "gauge", Some("bytes"), "Resident memory of the agent.");
    f.sample("lockstep_agent_resident_memory_bytes", &[("node", node)], &snap.rss_bytes.to_string());
    if openmetrics {
        out.push_str("# EOF\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{render, Snapshot};
    use crate::Sample;

    #[test]
    fn renders_both_formats_with_escaped_labels() {
        let s = Sample {
            job: "a\"b".into(),
            node: "n1".into(),
            time: 1.0,
            event: "sched:sched_switch".into(),
            value: 42,
            enabled: 2_000_000_000,
            running: 1_000_000_000,
        };
        let snap = Snapshot { node: "n1", samples: vec![&s], jobs: 1, cpu_seconds: 0.5, rss_bytes: 4096 };
        let text = render(&snap, false);
        assert!(text.contains("# TYPE lockstep_job_events_total counter\n"));
        assert!(
            text.contains("lockstep_job_events_total{node=\"n1\",job=\"a\\\"b\",event=\"sched:sched_switch\"} 42\n")
        );
        assert!(text.contains("lockstep_job_event_running_seconds_total{node=\"n1\",job=\"a\\\"b\",event=\"sched:sched_switch\"} 1.000000000\n"));
        assert!(!text.contains("# EOF"));
        let om = render(&snap, true);
        assert!(om.contains("# TYPE lockstep_job_events counter\n"));
        assert!(om.contains("# UNIT lockstep_job_event_enabled_seconds seconds\n"));
        assert!(om.ends_with("# EOF\n"));
    }

    #[test]
    fn time_events_give_their_share_as_a_gauge() {
        let at = |event: &str, value| Sample {
            job: "j".into(),
            node: "n1".into(),
            time: 1.0,
            event: event.into(),
            value,
            enabled: 2_000_000_000,
            running: 2_000_000_000,
        };
        let (together, waiting) = (at("coscheduled", 500_000_000), at("rank-waiting", 1_500_000_000));
        let running = at("rank-running", 1_000_000_000);
        let samples = vec![&together, &running, &waiting];
        let snap = Snapshot { node: "n1", samples, jobs: 1, cpu_seconds: 0.0, rss_bytes: 0 };
        let text = render(&snap, true);
        assert!(text.contains("# UNIT lockstep_job_coscheduled_ratio ratio\n"), "{text}");
        assert!(text.contains("lockstep_job_coscheduled_ratio{node=\"n1\",job=\"j\"} 0.250000\n"), "{text}");
        assert!(text.contains("lockstep_job_rank_running_ratio{node=\"n1\",job=\"j\"} 0.500000\n"), "{text}");
        assert!(text.contains("lockstep_job_rank_waiting_ratio{node=\"n1\",job=\"j\"} 0.750000\n"), "{text}");
    }
}
