//! The agent's counters and state as Prometheus exposition text (format 0.0.4) or OpenMetrics 1.0 text, by
//! Prometheus's conventions: one unit per metric name, in base units (seconds, not nanoseconds), `_total` on
//! counters, `_info` metrics for what is text. A job's series are labelled `lockstep_job` (its lockstep name)
//! alone, a label that never changes while it runs; `lockstep_job_info` adds its Slurm job ID and owner, to join
//! (`* on(instance, lockstep_job) group_left(user) lockstep_job_info`), for the privileged callers only. Never
//! `job` or `node`, which Prometheus gives every target itself (`job`, `instance`). One series per job and event,
//! never per PID or per CPU.

use std::collections::HashMap;
use std::fmt::Write;

use crate::Sample;
use lockstep_core::ident::JobKey;
use lockstep_core::sample::{COSCHEDULED, RANK_RUNNING, RANK_WAITING};
use lockstep_proto::protocol::{Histogram, JobStatus, Status};

/// What one scrape shows.
pub struct Snapshot<'a> {
    /// The node.
    pub node: &'a lockstep_core::ident::NodeName,
    /// The latest cumulative sample of every counted job and event.
    pub samples: Vec<&'a Sample>,
    /// Jobs counted now.
    pub jobs: usize,
    /// The agent's own CPU time in seconds.
    pub cpu_seconds: f64,
    /// The agent's resident set size in bytes.
    pub rss_bytes: u64,
    /// The daemon's latest status: the policy, each managed job's state, how late the slot switches are.
    pub status: &'a Status,
    /// The name of each UID that owns a job, where the system knows one.
    pub users: &'a HashMap<u32, String>,
    /// Whether the caller is root or a named scraper, who see whose each job is (`lockstep_job_info`); others
    /// see names and counts only, as they always could.
    pub privileged: bool,
    /// The agent's release and the commit it was built from.
    pub build: (&'a str, &'a str),
}

/// The content type for OpenMetrics.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type for the Prometheus text format.
pub const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `value` as a label value: backslash, double quote and newline escaped.
fn escape(value: &str) -> String {
    value.replace('\\', r"\\").replace('"', r#"\""#).replace('\n', r"\n")
}

/// `text` as a HELP text: backslash and newline escaped (and, for OpenMetrics, double quotes).
fn escape_help(text: &str, openmetrics: bool) -> String {
    let text = text.replace('\\', r"\\").replace('\n', r"\n");
    if openmetrics {
        text.replace('"', r#"\""#)
    } else {
        text
    }
}

/// The kinds of metric family written here.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Info,
    Histogram,
}

/// The families being written, in either format.
struct Writer<'w> {
    out: &'w mut String,
    openmetrics: bool,
}

impl Writer<'_> {
    /// The header of family `name` (without `_total` or `_info`): HELP, TYPE and, in OpenMetrics, UNIT.
    fn header(&mut self, name: &str, kind: Kind, unit: Option<&str>, help: &str) {
        let (exposed, kind) = match (kind, self.openmetrics) {
            (Kind::Counter, true) => (name.to_string(), "counter"),
            (Kind::Counter, false) => (format!("{name}_total"), "counter"),
            (Kind::Info, true) => (name.to_string(), "info"),
            (Kind::Info, false) => (format!("{name}_info"), "gauge"),
            (Kind::Gauge, _) => (name.to_string(), "gauge"),
            (Kind::Histogram, _) => (name.to_string(), "histogram"),
        };
        let _ = writeln!(self.out, "# HELP {exposed} {}", escape_help(help, self.openmetrics));
        let _ = writeln!(self.out, "# TYPE {exposed} {kind}");
        if let (Some(unit), true) = (unit, self.openmetrics) {
            let _ = writeln!(self.out, "# UNIT {exposed} {unit}");
        }
    }

    /// One sample, `name` as exposed (with its suffix).
    fn sample(&mut self, name: &str, labels: &[(&str, String)], value: &str) {
        let labels: Vec<String> =
            labels.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
        if labels.is_empty() {
            let _ = writeln!(self.out, "{name} {value}");
        } else {
            let _ = writeln!(self.out, "{name}{{{}}} {value}", labels.join(","));
        }
    }

    /// A histogram's samples (`_bucket` for each bound and `+Inf`, `_sum`, `_count`).
    fn histogram(&mut self, name: &str, h: &Histogram) {
        for (bound, n) in h.bounds.iter().zip(&h.cumulative) {
            self.sample(&format!("{name}_bucket"), &[("le", format!("{bound:?}"))], &n.to_string());
        }
        self.sample(&format!("{name}_bucket"), &[("le", "+Inf".to_string())], &h.count.to_string());
        self.sample(&format!("{name}_sum"), &[], &format!("{:.9}", h.sum));
        self.sample(&format!("{name}_count"), &[], &h.count.to_string());
    }
}

/// The counter family one counted event is exposed as, with its samples.
struct EventFamily<'a> {
    /// Its name, without `_total`.
    name: String,
    /// The event.
    event: &'a str,
    /// Whether the event counts nanoseconds of time, exposed in seconds; else it is a count.
    seconds: bool,
    samples: Vec<&'a Sample>,
}

impl<'a> EventFamily<'a> {
    /// The family of `event`. Events counted in nanoseconds of time are exposed in seconds; any other event as a
    /// count, its name made of what Prometheus allows in one.
    fn of(event: &'a str) -> Self {
        let (name, seconds) = match event {
            "task-clock" => ("cpu".to_string(), true),
            "cpu-clock" => ("cpu_clock".to_string(), true),
            RANK_RUNNING => ("rank_running".to_string(), true),
            RANK_WAITING => ("rank_waiting".to_string(), true),
            COSCHEDULED => ("coscheduled".to_string(), true),
            other => {
                let name: String = other.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
                (name.split('_').filter(|w| !w.is_empty()).collect::<Vec<_>>().join("_"), false)
            }
        };
        let name = if seconds { format!("lockstep_job_{name}_seconds") } else { format!("lockstep_job_{name}") };
        Self { name, event, seconds, samples: Vec::new() }
    }

    /// A sample's value as exposed.
    fn value(&self, s: &Sample) -> String {
        if self.seconds {
            format!("{:.9}", s.value as f64 / 1e9)
        } else {
            s.value.to_string()
        }
    }
}

/// The families the agent writes itself: an event whose family would take one of these names is not exposed as a
/// family of its own (its times still are, labelled by event).
const FIXED: [&str; 10] = [
    "lockstep_job_info",
    "lockstep_job_frozen",
    "lockstep_job_boosted",
    "lockstep_job_planned",
    "lockstep_job_frozen_seconds",
    "lockstep_job_frozen_for_seconds",
    "lockstep_job_round_seconds",
    "lockstep_job_event_enabled_seconds",
    "lockstep_job_event_running_seconds",
    "lockstep_job_coscheduled_ratio",
];

/// The labels of `job`'s series: its name alone.
fn job_labels(job: &JobKey) -> Vec<(&'static str, String)> {
    vec![("lockstep_job", job.to_string())]
}

/// Renders `snap`; OpenMetrics when `openmetrics`, else the Prometheus text format.
pub fn render(snap: &Snapshot, openmetrics: bool) -> String {
    let mut out = String::new();
    let mut w = Writer { out: &mut out, openmetrics };
    write_events(&mut w, snap);
    write_job_states(&mut w, snap);
    write_agent(&mut w, snap);
    if openmetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// One of a sample's two times (enabled, running), in nanoseconds.
type SampleTime = fn(&Sample) -> u64;

/// A family of each job's state: name, kind, unit, help, and the value of a job as exposed (given the job's round).
type JobState =
    (&'static str, Kind, Option<&'static str>, &'static str, fn(&JobStatus, &dyn Fn(&JobStatus) -> String) -> String);

/// The counted events: a family per event, the times their counters were enabled and running, and the shares.
fn write_events(w: &mut Writer, snap: &Snapshot) {
    let labels = job_labels;
    // One family per event, in the order the events first come; an event whose name would be another's family
    // is left to the two families below, which name every event.
    let mut families: Vec<EventFamily> = Vec::new();
    for s in &snap.samples {
        let family = EventFamily::of(&s.event);
        if FIXED.contains(&family.name.as_str()) || family.name.ends_with("_ratio") {
            continue;
        }
        match families.iter_mut().find(|f| f.name == family.name) {
            Some(f) if f.event == s.event => f.samples.push(s),
            Some(_) => {}
            None => families.push(EventFamily { samples: vec![s], ..family }),
        }
    }
    for f in &families {
        let event = f.event;
        let (unit, help) = if f.seconds {
            (Some("seconds"), format!("Time counted for the job's \"{event}\" event since the agent attached to it."))
        } else {
            let help = format!(
                "\"{event}\" events counted for the job since the agent attached to it (raw: scale by \
                 lockstep_job_event_enabled_seconds_total / lockstep_job_event_running_seconds_total when multiplexed)."
            );
            (None, help)
        };
        w.header(&f.name, Kind::Counter, unit, &help);
        for s in &f.samples {
            w.sample(&format!("{}_total", f.name), &labels(&s.job), &f.value(s));
        }
    }
    let times: [(&str, &str, SampleTime); 2] = [
        ("lockstep_job_event_enabled_seconds", "Time the job's counter for the event was enabled.", |s| s.enabled),
        (
            "lockstep_job_event_running_seconds",
            "Time the job's counter for the event was counting (less than enabled when multiplexed).",
            |s| s.running,
        ),
    ];
    for (name, help, value) in times {
        w.header(name, Kind::Counter, Some("seconds"), help);
        for s in &snap.samples {
            let mut l = labels(&s.job);
            l.push(("event", s.event.clone()));
            w.sample(&format!("{name}_total"), &l, &format!("{:.9}", value(s) as f64 / 1e9));
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
        w.header(name, Kind::Gauge, Some("ratio"), help);
        for s in snap.samples.iter().filter(|s| s.event == event) {
            if let Some(share) = s.share() {
                w.sample(name, &labels(&s.job), &format!("{share:.6}"));
            }
        }
    }
}

/// Each managed job's state, from the daemon; and, for the privileged, whose each job is.
fn write_job_states(w: &mut Writer, snap: &Snapshot) {
    let slot = snap.status.slot_length;
    let rows = snap.status.rows;
    let round = move |j: &JobStatus| slot.saturating_mul(j.period.unwrap_or(rows).max(1)).as_secs_f64().to_string();
    let states: [JobState; 6] = [
        ("lockstep_job_frozen", Kind::Gauge, None, "1 while the agent holds the job frozen, else 0.", |j, _| {
            u8::from(j.frozen).to_string()
        }),
        (
            "lockstep_job_boosted",
            Kind::Gauge,
            None,
            "1 while the agent holds the job's CPU weight raised, else 0.",
            |j, _| u8::from(j.boosted).to_string(),
        ),
        (
            "lockstep_job_planned",
            Kind::Gauge,
            None,
            "1 while the policy in force plans the job; 0 while the agent leaves it to the kernel (its cgroups cost \
             too much to switch, or Slurm suspended it).",
            |j, _| u8::from(j.left.is_none()).to_string(),
        ),
        (
            "lockstep_job_frozen_seconds",
            Kind::Counter,
            Some("seconds"),
            "Time the agent has held the job frozen since it took it on.",
            |j, _| format!("{:.6}", j.frozen_seconds),
        ),
        (
            "lockstep_job_frozen_for_seconds",
            Kind::Gauge,
            Some("seconds"),
            "How long the agent has held the job frozen without a break, now (0 while it runs).",
            |j, _| format!("{:.3}", j.frozen_for_seconds),
        ),
        (
            "lockstep_job_round_seconds",
            Kind::Gauge,
            Some("seconds"),
            "Length of the job's round (the rows of its set of jobs sharing PUs, or its place's period, times the \
             slot): a slotted policy thaws it at least once a round.",
            |j, round| round(j),
        ),
    ];
    for (name, kind, unit, help, value) in states {
        w.header(name, kind, unit, help);
        let exposed = if kind == Kind::Counter { format!("{name}_total") } else { name.to_string() };
        for j in &snap.status.jobs {
            w.sample(&exposed, &job_labels(&j.name), &value(j, &round));
        }
    }
    if snap.privileged {
        w.header("lockstep_job", Kind::Info, None, "Whose each job is: its Slurm job ID and its owner.");
        for j in &snap.status.jobs {
            let slurm_job_id = j.name.slurm().map(|id| id.to_string()).unwrap_or_default();
            let user = snap.users.get(&j.owner).cloned().unwrap_or_else(|| j.owner.to_string());
            let labels = [("lockstep_job", j.name.to_string()), ("slurm_job_id", slurm_job_id), ("user", user)];
            w.sample("lockstep_job_info", &labels, "1");
        }
    }
}

/// The agent: its build, node, policy, slots and its own cost.
fn write_agent(w: &mut Writer, snap: &Snapshot) {
    let (release, commit) = snap.build;
    w.header("lockstep_build", Kind::Info, None, "The agent's release and the commit it was built from.");
    w.sample("lockstep_build_info", &[("version", release.to_string()), ("revision", commit.to_string())], "1");
    w.header("lockstep_agent", Kind::Info, None, "The node the agent serves and the policy in force.");
    let agent = [("node", snap.node.to_string()), ("policy", snap.status.policy.clone())];
    w.sample("lockstep_agent_info", &agent, "1");
    w.header("lockstep_agent_slot_seconds", Kind::Gauge, Some("seconds"), "Length of a slot.");
    w.sample("lockstep_agent_slot_seconds", &[], &snap.status.slot_length.as_secs_f64().to_string());
    w.header(
        "lockstep_agent_slot_switch_seconds",
        Kind::Gauge,
        Some("seconds"),
        "How long the last slot switch took the agent (every job's cgroups written).",
    );
    w.sample("lockstep_agent_slot_switch_seconds", &[], &format!("{:.6}", snap.status.last_apply_us / 1e6));
    w.header(
        "lockstep_agent_slot_lateness_seconds",
        Kind::Histogram,
        Some("seconds"),
        "How late each slot switch began after its boundary on the wall clock, since the agent started.",
    );
    w.histogram("lockstep_agent_slot_lateness_seconds", &snap.status.lateness);
    w.header("lockstep_agent_jobs", Kind::Gauge, None, "Jobs the agent counts now.");
    w.sample("lockstep_agent_jobs", &[], &snap.jobs.to_string());
    w.header(
        "lockstep_agent_cpu_seconds",
        Kind::Counter,
        Some("seconds"),
        "CPU time the agent has used (user + system).",
    );
    w.sample("lockstep_agent_cpu_seconds_total", &[], &format!("{:.2}", snap.cpu_seconds));
    w.header("lockstep_agent_resident_memory_bytes", Kind::Gauge, Some("bytes"), "Resident memory of the agent.");
    w.sample("lockstep_agent_resident_memory_bytes", &[], &snap.rss_bytes.to_string());
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{render, Snapshot};
    use crate::Sample;
    use lockstep_proto::protocol::{Histogram, JobStatus, Status};

    fn sample(job: &str, event: &str, value: u64) -> Sample {
        Sample {
            job: job.parse().unwrap(),
            node: "n1".parse().unwrap(),
            time: 1.0,
            event: event.into(),
            value,
            enabled: 2_000_000_000,
            running: 1_000_000_000,
        }
    }

    /// The node the tests' scrapes are of.
    static N1: std::sync::LazyLock<lockstep_core::ident::NodeName> = std::sync::LazyLock::new(|| "n1".parse().unwrap());

    /// What a privileged scrape of node `n1` shows of `samples` and `status`, the agent counting two jobs.
    fn snapshot<'a>(samples: Vec<&'a Sample>, status: &'a Status, users: &'a HashMap<u32, String>) -> Snapshot<'a> {
        Snapshot {
            node: &N1,
            samples,
            jobs: 2,
            cpu_seconds: 0.5,
            rss_bytes: 4096,
            status,
            users,
            privileged: true,
            build: ("0.1.0", "abc123"),
        }
    }

    fn status() -> Status {
        let mut lateness = Histogram::new(&[0.001, 0.01]);
        lateness.observe(0.0005);
        lateness.observe(0.02);
        let job = |name: &str, origin: &str, owner: u32, frozen: bool| -> JobStatus {
            let fields = serde_json::json!({"name": name, "row": 0, "pinned": false, "pus": "0", "frozen": frozen,
                "boosted": false, "origin": origin, "cgroups": [], "owner": owner, "frozen_seconds": 1.5});
            serde_json::from_value(fields).unwrap()
        };
        Status {
            policy: "gang".into(),
            slot_length: std::time::Duration::from_millis(500),
            lateness,
            jobs: vec![job("slurm-42", "slurm", 1000, true), job("ab", "run", 0, false)],
            ..Status::new("n1".parse().unwrap())
        }
    }

    /// One unit per name: time in seconds, counts as counts; a job's series labelled by its name alone, whose it
    /// is in `lockstep_job_info` (for the privileged), never `job` or `node`; label values escaped.
    #[test]
    fn renders_both_formats_one_unit_per_name_with_escaped_labels() {
        let (clock, switches, trace) = (
            sample("slurm-42", "task-clock", 3_000_000_000),
            sample("slurm-42", "context-switches", 7),
            sample("ab", "sched:sched_switch", 42),
        );
        // A job's name cannot hold a quote (JobKey's rules); a user's name, from /etc/passwd, is escaped.
        let (status, users) = (status(), HashMap::from([(1000, "al\"ice".to_string())]));
        let snap = snapshot(vec![&clock, &switches, &trace], &status, &users);
        let text = render(&snap, false);
        let slurm = "lockstep_job=\"slurm-42\"";
        for line in [
            "# TYPE lockstep_job_cpu_seconds_total counter\n".to_string(),
            format!("lockstep_job_cpu_seconds_total{{{slurm}}} 3.000000000\n"),
            format!("lockstep_job_context_switches_total{{{slurm}}} 7\n"),
            "lockstep_job_sched_sched_switch_total{lockstep_job=\"ab\"} 42\n".to_string(),
            "lockstep_job_info{lockstep_job=\"slurm-42\",slurm_job_id=\"42\",user=\"al\\\"ice\"} 1\n".to_string(),
            "lockstep_job_info{lockstep_job=\"ab\",user=\"0\"} 1\n".to_string(),
            format!("lockstep_job_round_seconds{{{slurm}}} 0.5\n"),
            format!("lockstep_job_event_running_seconds_total{{{slurm},event=\"task-clock\"}} 1.000000000\n"),
            format!("lockstep_job_frozen{{{slurm}}} 1\n"),
            format!("lockstep_job_frozen_seconds_total{{{slurm}}} 1.500000\n"),
            "lockstep_build_info{version=\"0.1.0\",revision=\"abc123\"} 1\n".to_string(),
            "lockstep_agent_info{node=\"n1\",policy=\"gang\"} 1\n".to_string(),
            "lockstep_agent_slot_seconds 0.5\n".to_string(),
            "lockstep_agent_slot_lateness_seconds_bucket{le=\"0.001\"} 1\n".to_string(),
            "lockstep_agent_slot_lateness_seconds_bucket{le=\"+Inf\"} 2\n".to_string(),
            "lockstep_agent_slot_lateness_seconds_count 2\n".to_string(),
        ] {
            assert!(text.contains(&line), "{line} not in:\n{text}");
        }
        let series = text.lines().filter(|l| !l.starts_with('#'));
        assert!(series.clone().all(|l| !l.contains("{job=") && !l.contains(",job=")), "{text}");
        assert!(series.filter(|l| l.contains("node=")).all(|l| l.starts_with("lockstep_agent_info{")), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
        let om = render(&snap, true);
        assert!(
            om.contains("# TYPE lockstep_job_cpu_seconds counter\n# UNIT lockstep_job_cpu_seconds seconds\n"),
            "{om}"
        );
        assert!(om.contains("# TYPE lockstep_build info\n"), "{om}");
        assert!(om.ends_with("# EOF\n"));
        // Whose each job is: only for root and the named scrapers.
        let others = Snapshot { privileged: false, ..snap };
        assert!(!render(&others, false).contains("lockstep_job_info"));
    }

    #[test]
    fn time_events_give_their_share_as_a_gauge() {
        let at = |event: &str, value| Sample { running: 2_000_000_000, ..sample("j", event, value) };
        let (together, waiting) = (at("coscheduled", 500_000_000), at("rank-waiting", 1_500_000_000));
        let running = at("rank-running", 1_000_000_000);
        let (status, users) = (Status::new("n1".parse().unwrap()), HashMap::new());
        let samples = vec![&together, &running, &waiting];
        let snap = Snapshot {
            node: &N1,
            samples,
            jobs: 1,
            cpu_seconds: 0.0,
            rss_bytes: 0,
            status: &status,
            users: &users,
            privileged: true,
            build: ("0.1.0", "abc"),
        };
        let text = render(&snap, true);
        assert!(text.contains("# UNIT lockstep_job_coscheduled_ratio ratio\n"), "{text}");
        assert!(text.contains("lockstep_job_coscheduled_ratio{lockstep_job=\"j\"} 0.250000\n"), "{text}");
        assert!(text.contains("lockstep_job_rank_running_ratio{lockstep_job=\"j\"} 0.500000\n"), "{text}");
        assert!(text.contains("lockstep_job_rank_waiting_ratio{lockstep_job=\"j\"} 0.750000\n"), "{text}");
        assert!(text.contains("lockstep_job_coscheduled_seconds_total{lockstep_job=\"j\"} 0.500000000\n"), "{text}");
    }

    /// Every metric the shipped alert rules (deploy/prometheus/lockstep-rules.yml) and the Grafana dashboard's
    /// queries (deploy/grafana/lockstep.json) name is one the agent exports.
    #[test]
    fn every_metric_the_alert_rules_and_the_dashboard_name_is_exported() {
        let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
        let rules = std::fs::read_to_string(deploy.join("prometheus/lockstep-rules.yml")).unwrap();
        let dashboard: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(deploy.join("grafana/lockstep.json")).unwrap()).unwrap();
        let mut queries = vec![rules];
        let panels = dashboard["panels"].as_array().unwrap();
        let targets = panels.iter().filter_map(|p| p["targets"].as_array()).flatten();
        queries.extend(targets.map(|t| t["expr"].as_str().unwrap().to_string()));
        let variables = dashboard["templating"]["list"].as_array().unwrap();
        queries.extend(variables.iter().filter_map(|v| v["definition"].as_str().map(str::to_string)));
        assert!(queries.len() > 10, "{queries:?}");
        let rules = queries.join("\n");
        let (status, users) = (status(), HashMap::new());
        let events = ["task-clock", "context-switches", "coscheduled", "rank-running", "rank-waiting"];
        let samples: Vec<Sample> = events.iter().map(|e| sample("slurm-42", e, 1)).collect();
        let snap = snapshot(samples.iter().collect(), &status, &users);
        let text = render(&snap, false);
        let named: Vec<&str> = rules
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("lockstep_") && w.len() > "lockstep_".len())
            // Label names, not metrics.
            .filter(|w| !["lockstep_job"].contains(w))
            .collect();
        assert!(named.len() >= 4, "{named:?}");
        for name in named {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} "))),
                "{name} is not exported:\n{text}"
            );
        }
    }
}
