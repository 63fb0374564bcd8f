//! The scale report: per cluster size and policy, the jobs (completed, slowdown, agreement, co-run share against
//! the matrix's share) and the control plane (hook latency, slot-switch spread, agent and slurmctld CPU and memory,
//! what Prometheus saw); charts of agreement and slowdown over cluster size.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::run::{CaseResult, JobResult};
use super::spec::log2;
use super::spec::ScaleSpec;
use crate::harness::report::{chart, html_page, write_files};
use lockstep_store::ScaleRecord;

/// The agreement the issue asks of every job under a slotted policy with cluster-wide places.
pub const TARGET_AGREEMENT: f64 = 0.95;

/// One case's records, parsed.
#[derive(Default)]
pub struct Case {
    /// Its jobs.
    pub jobs: Vec<JobResult>,
    /// Its control-plane measurements.
    pub case: Option<CaseResult>,
}

/// The records of a session, by (cluster size, policy label), in the spec's policy order.
pub fn cases(spec: &ScaleSpec, records: &[ScaleRecord]) -> anyhow::Result<Vec<((u32, String), Case)>> {
    let mut by: BTreeMap<(u32, String), Case> = BTreeMap::new();
    for r in records {
        let c = by.entry((r.nodes, r.policy.clone())).or_default();
        match r.record.as_str() {
            "job" => c.jobs.push(serde_json::from_str(&r.data)?),
            "case" => c.case = Some(serde_json::from_str(&r.data)?),
            _ => {}
        }
    }
    let order: Vec<String> = spec.policies.iter().map(super::spec::ScalePolicy::label).collect();
    let mut out: Vec<((u32, String), Case)> = by.into_iter().collect();
    out.sort_by_key(|((n, p), _)| (*n, order.iter().position(|o| o == p).unwrap_or(usize::MAX)));
    Ok(out)
}

/// Summary numbers of a case's jobs: all over the completed jobs (`srun` exited 0), since a job whose rank died
/// is not run by all its nodes any more.
pub struct Summary {
    /// Mean slowdown of the completed jobs.
    pub slowdown: Option<f64>,
    /// Mean slowdown of their timed regions (the computation alone).
    pub timed_slowdown: Option<f64>,
    /// Lowest and mean agreement (slotted policies).
    pub agreement: Option<(f64, f64)>,
    /// Completed jobs below [`TARGET_AGREEMENT`].
    pub below: usize,
    /// Lowest agreement of a job that failed, if one did.
    pub failed_agreement: Option<f64>,
    /// Mean co-run share and mean matrix share.
    pub co_run: Option<(f64, f64)>,
}

/// The summary of `jobs`.
pub fn summary(jobs: &[JobResult]) -> Summary {
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let done: Vec<&JobResult> = jobs.iter().filter(|j| j.exit == Some(0)).collect();
    let slow: Vec<f64> = done.iter().filter_map(|j| j.slowdown()).collect();
    let timed: Vec<f64> = done.iter().filter_map(|j| j.timed_slowdown()).collect();
    let agree: Vec<f64> = done.iter().filter_map(|j| j.agreement).collect();
    let co: Vec<f64> = done.iter().filter_map(|j| j.co_run).collect();
    let share: Vec<f64> = done.iter().filter_map(|j| j.share).collect();
    let failed: Vec<f64> = jobs.iter().filter(|j| j.exit != Some(0)).filter_map(|j| j.agreement).collect();
    Summary {
        slowdown: mean(&slow),
        timed_slowdown: mean(&timed),
        agreement: mean(&agree).map(|m| (agree.iter().copied().fold(1.0, f64::min), m)),
        below: agree.iter().filter(|a| **a < TARGET_AGREEMENT).count(),
        failed_agreement: (!failed.is_empty()).then(|| failed.iter().copied().fold(1.0, f64::min)),
        co_run: mean(&co).zip(mean(&share)),
    }
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// One job's cells: Slurm ID, nodes, workload, exit, slowdown, timed-region slowdown, agreement, slots apart (no
/// switch, other place), matrix share, co-run share, comm share.
fn job_cells(j: &JobResult) -> [String; 12] {
    let opt = |v: Option<f64>, digits: usize| v.map_or(String::new(), |v| format!("{v:.digits$}"));
    [
        j.id.to_string(),
        j.nodes.len().to_string(),
        j.workload.clone(),
        j.exit.map_or(String::new(), |e| e.to_string()),
        opt(j.slowdown(), 2),
        opt(j.timed_slowdown(), 2),
        opt(j.agreement, 3),
        j.apart.map_or(String::new(), |a| a.0.to_string()),
        j.apart.map_or(String::new(), |a| a.1.to_string()),
        opt(j.share, 3),
        opt(j.co_run, 3),
        opt(j.comm, 3),
    ]
}

/// Every job of the largest cluster, one table row each, per policy.
fn largest_cluster_jobs(cases: &[((u32, String), Case)]) -> String {
    let Some(largest) = cases.iter().map(|((n, _), _)| *n).max() else { return String::new() };
    let mut md = format!(
        "\n## Every job on {largest} nodes\n\nExit is `srun`'s (empty: cancelled at the deadline); comm share: its \
         time in MPI alone (PMPI); slots apart: the measured slots not agreed, those some node did not switch to \
         (its agent late by a whole slot) and those every node switched to but some held another place for the job \
         in (a change of place read late). Every case's jobs are in `jobs.csv`.\n\n| policy | job | nodes | \
         workload | exit | slowdown | timed slowdown | agreement | apart: no switch | apart: other place | matrix \
         share | co-run share | comm share |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for ((_, policy), c) in cases.iter().filter(|((n, _), _)| *n == largest) {
        for j in &c.jobs {
            let _ = writeln!(md, "| {policy} | {} |", job_cells(j).join(" | "));
        }
    }
    md + "\n"
}

/// Every job of every case as CSV (header first), for plotting elsewhere.
fn jobs_csv(cases: &[((u32, String), Case)]) -> String {
    let mut csv = String::from("cluster_nodes,policy,job,nodes,workload,exit,slowdown,timed_slowdown,agreement,apart_unswitched,apart_elsewhere,share,co_run,comm\n");
    for ((nodes, policy), c) in cases {
        for j in &c.jobs {
            let _ = writeln!(csv, "{nodes},{policy},{}", job_cells(j).join(","));
        }
    }
    csv
}

/// Writes `summary.md`, `index.html` and the charts into `dir`; returns the HTML path.
pub fn write(spec: &ScaleSpec, records: &[ScaleRecord], dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let cases = cases(spec, records)?;
    let mut md = format!("# {} — {}\n\n", spec.name, spec.description);
    let _ = writeln!(
        md,
        "A stream of {} jobs per case (sizes {:?} nodes, one rank per node, a mean of {:.1} s between submissions, \
         seed {}), on {:?}-node clusters of network namespaces on one machine of {} CPUs; MPI progress `{}`. \
         Every node is the same few CPUs: the jobs are small, and what is measured is the control plane. Slowdown: \
         wall time over the same job alone on the cluster; timed slowdown: the same for the time the program reports for \
         its computation (NPB's \"Time in seconds\"), without the launch, MPI start-up and `srun`'s waits. Agreement: of the slots some node of the job favoured \
         it in, the share all its nodes did (from the agents' `favour` records, over the slots all its nodes \
         managed it). Matrix share: the share of slots it was favoured in. Co-run share: the share of those slots' \
         time no node had it frozen. `rows=node` is lockstep before cluster-wide places (each node cycling its own \
         rows).\n",
        spec.jobs,
        spec.sizes,
        spec.arrival.as_secs_f64(),
        spec.seed,
        spec.nodes,
        lockstep_core::cpulist::CpuList::online().iter().count(),
        spec.progress
    );
    md += "## Jobs\n\nSlowdown, agreement and shares are over the completed jobs; the last column is the lowest \
           agreement of a job that failed (a rank that died leaves nodes that no longer run the job).\n\n\
           | nodes | policy | completed | mean slowdown | timed slowdown | agreement min | agreement mean | \
           below 0.95 | co-run share | matrix share | makespan (s) | failed jobs' agreement |\n\
           |---|---|---|---|---|---|---|---|---|---|---|---|\n";
    let mut agreement_chart: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    let mut slowdown_chart: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    for ((nodes, policy), c) in &cases {
        let s = summary(&c.jobs);
        let (submitted, completed, makespan) =
            c.case.as_ref().map_or((c.jobs.len() as u32, 0, None), |k| (k.submitted, k.completed, Some(k.makespan_s)));
        let _ = writeln!(
            md,
            "| {nodes} | {policy} | {completed}/{submitted} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            num(s.slowdown, 2),
            num(s.timed_slowdown, 2),
            num(s.agreement.map(|a| a.0), 3),
            num(s.agreement.map(|a| a.1), 3),
            if s.agreement.is_some() { s.below.to_string() } else { "-".into() },
            num(s.co_run.map(|c| c.0), 2),
            num(s.co_run.map(|c| c.1), 2),
            num(makespan, 1),
            num(s.failed_agreement, 3)
        );
        if let Some((min, _)) = s.agreement {
            agreement_chart.entry(policy.clone()).or_default().push((log2(*nodes), min));
        }
        if let Some(x) = s.slowdown {
            slowdown_chart.entry(policy.clone()).or_default().push((log2(*nodes), x));
        }
    }
    md += "\n## Control plane\n\nHooks: the time lockstep's Slurm hooks took per call (p50/p99, ms; the controller's \
           prolog and epilog run once per job, the nodes' once per job and node). Switch spread: per slot, the time \
           between the first and the last agent switching it (p50/p99, ms). Agent CPU: share of one CPU over the \
           case (mean/max over agents); RSS at the end (mean/max, MiB). Prometheus scraped every agent (file_sd) \
           each second: targets up, scrape duration (mean/max over agents, ms) and the most series one agent \
           exposed.\n\n| nodes | policy | prolog-slurmctld | epilog-slurmctld | prolog | epilog | switch spread | \
           agent CPU % | agent RSS MiB | slurmctld CPU % | scraped up | scrape ms | series/agent |\n\
           |---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for ((nodes, policy), c) in &cases {
        let Some(k) = &c.case else { continue };
        let hook = |name: &str| k.hooks.get(name).map_or("-".into(), |h| format!("{:.0}/{:.0}", h.1, h.2));
        let prom = k.prometheus.as_ref();
        let _ = writeln!(
            md,
            "| {nodes} | {policy} | {} | {} | {} | {} | {:.2}/{:.2} | {:.1}/{:.1} | {:.1}/{:.1} | {:.1} | {} | {} | {} |",
            hook("prolog-slurmctld"),
            hook("epilog-slurmctld"),
            hook("prolog"),
            hook("epilog"),
            k.skew_ms.0,
            k.skew_ms.1,
            k.agent_cpu.0 * 100.0,
            k.agent_cpu.1 * 100.0,
            k.agent_rss_mib.0,
            k.agent_rss_mib.1,
            k.slurmctld_cpu * 100.0,
            prom.map_or("-".into(), |p| format!("{}/{}", p.up, p.targets)),
            prom.map_or("-".into(), |p| format!("{:.1}/{:.1}", p.mean_ms, p.max_ms)),
            prom.map_or("-".into(), |p| format!("{:.0}", p.max_series)),
        );
    }
    md += &largest_cluster_jobs(&cases);
    std::fs::write(dir.join("jobs.csv"), jobs_csv(&cases))?;
    let mut html = html_page(&spec.name, &spec.description);
    for (file, title, y, series) in [
        ("agreement.svg", "Lowest agreement of any job", "agreement", &agreement_chart),
        ("slowdown.svg", "Mean slowdown", "slowdown", &slowdown_chart),
    ] {
        if series.is_empty() {
            continue;
        }
        let svg = chart(title, "log2 nodes", y, series);
        std::fs::write(dir.join(file), &svg)?;
        html += &svg;
    }
    html += "<h2>Tables</h2>";
    write_files(dir, &md, html)
}
