//! The scale report: per cluster size and policy, the jobs (completed, slowdown, agreement, co-run share against
//! the matrix's share) and the control plane (hook latency, slot-switch spread, agent and slurmctld CPU and memory,
//! what Prometheus saw); charts of agreement and slowdown over cluster size.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use super::common::ScaleRecord;
use super::common::{cases, log2, summary, Case, JobResult};
use super::spec::ScaleSpec;
use crate::harness::report::{chart, html_page, Report};

/// Whether a case failed: one of its jobs did not complete.
fn failed_case(c: &Case) -> bool {
    c.jobs.iter().any(|j| j.exit != Some(0))
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
        let marked = if failed_case(c) { format!("{policy} (case FAILED)") } else { policy.clone() };
        for j in &c.jobs {
            let _ = writeln!(md, "| {marked} | {} |", job_cells(j).join(" | "));
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

/// The control-plane table of every case, a failed case `FAILED` without its numbers.
fn control_plane(cases: &[((u32, String), Case)]) -> String {
    let mut md = String::new();
    md += "\n## Control plane\n\nHooks: the time lockstep's Slurm hooks took per call (p50/p99, ms; the controller's \
           prolog and epilog run once per job, the nodes' once per job and node). Switch spread: per slot, the time \
           between the first and the last agent switching it (p50/p99, ms). Agent CPU: share of one CPU over the \
           case (mean/max over agents); RSS at the end (mean/max, MiB). Prometheus scraped every agent (file_sd) \
           each second: targets up, scrape duration (mean/max over agents, ms) and the most series one agent \
           exposed.\n\n| nodes | policy | prolog-slurmctld | epilog-slurmctld | prolog | epilog | switch spread | \
           agent CPU % | agent RSS MiB | slurmctld CPU % | scraped up | scrape ms | series/agent |\n\
           |---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for ((nodes, policy), c) in cases {
        let Some(k) = &c.case else { continue };
        if failed_case(c) {
            let _ = writeln!(md, "| {nodes} | {policy} | FAILED |{}", " - |".repeat(10));
            continue;
        }
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
    md
}

/// Writes the charts into `dir`; returns the report (summary and page) that shows them.
pub fn write(spec: &ScaleSpec, records: &[ScaleRecord], dir: &Path) -> anyhow::Result<Report> {
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
    md +=
        "## Jobs\n\nSlowdown, agreement and shares are over the case's jobs. A case one of whose jobs failed (`srun` \
           exited other than 0, was killed or was cancelled at the deadline) is `FAILED` in every table and gives no \
           number: the others ran beside it. The last column is the lowest agreement of a job that failed (a rank \
           that died leaves nodes that no longer run the job).\n\n\
           | nodes | policy | completed | mean slowdown | timed slowdown | agreement min | agreement mean | \
           below 0.95 | co-run share | matrix share | makespan (s) | failed jobs' agreement |\n\
           |---|---|---|---|---|---|---|---|---|---|---|---|\n";
    let mut agreement_chart: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    let mut slowdown_chart: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    for ((nodes, policy), c) in &cases {
        let s = summary(&c.jobs);
        let (submitted, completed, makespan) =
            c.case.as_ref().map_or((c.jobs.len() as u32, 0, None), |k| (k.submitted, k.completed, Some(k.makespan_s)));
        if s.failed > 0 {
            let _ = writeln!(
                md,
                "| {nodes} | {policy} | {completed}/{submitted} | FAILED ({} of {} jobs) | - | - | - | - | - | - | - \
                 | {} |",
                s.failed,
                c.jobs.len(),
                num(s.failed_agreement, 3)
            );
            continue;
        }
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
    md += &control_plane(&cases);
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
    Ok(Report { summary: md, page: html })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale::common::CaseResult;

    /// A job of `nodes` nodes that exited `exit`, ran `wall_s` (1 s alone) and agreed `agreement`.
    fn job(exit: Option<i32>, wall_s: f64, agreement: f64) -> JobResult {
        JobResult {
            nodes: vec![1, 2],
            workload: "cg --class A".into(),
            wall_s: Some(wall_s),
            alone_s: Some(1.0),
            exit,
            agreement: Some(agreement),
            share: Some(0.5),
            co_run: Some(0.9),
            ..JobResult::default()
        }
    }

    #[test]
    fn a_case_with_a_failed_job_gives_no_number_and_is_marked_failed() {
        let s = summary(&[job(Some(0), 2.0, 1.0), job(Some(0), 4.0, 0.9)]);
        assert_eq!(s.failed, 0);
        assert_eq!(s.slowdown, Some(3.0));
        assert_eq!(s.agreement, Some((0.9, 0.95)));
        assert_eq!(s.below, 1);
        // One job exited 1 and one was cancelled at the deadline: the completed one's numbers are not the case's.
        let s = summary(&[job(Some(0), 2.0, 1.0), job(Some(1), 0.5, 0.4), job(None, 9.0, 0.7)]);
        assert_eq!(s.failed, 2);
        assert!(s.slowdown.is_none() && s.timed_slowdown.is_none() && s.agreement.is_none() && s.co_run.is_none());
        assert_eq!(s.below, 0);
        assert_eq!(s.failed_agreement, Some(0.4));

        let dir = lockstep_scratch::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        let text = "kind = \"scale\"\nname = \"s\"\nnodes = [2]\njobs = 2\nsizes = [2]\narrival = \"1s\"\nseed = 7\n\
                    workloads = [[\"cg\"]]\n[[policies]]\nname = \"gang\"\nslot = \"500ms\"\n[[policies]]\n\
                    name = \"cfs\"\n";
        std::fs::write(&path, text).unwrap();
        let spec = super::super::spec::parse(&path, text).unwrap();
        let record = |policy: &str, record: &str, data: String| ScaleRecord {
            experiment: "s".into(),
            session: 1.0,
            nodes: 2,
            policy: policy.into(),
            record: record.into(),
            data,
        };
        let case = serde_json::to_string(&CaseResult { submitted: 2, completed: 1, ..CaseResult::default() }).unwrap();
        let gang = spec.policies[0].label();
        let records = [
            record(&gang, "job", serde_json::to_string(&job(Some(0), 7.0, 1.0)).unwrap()),
            record(&gang, "job", serde_json::to_string(&job(Some(1), 0.5, 0.4)).unwrap()),
            record(&gang, "case", case.clone()),
            record("cfs", "job", serde_json::to_string(&job(Some(0), 2.0, 1.0)).unwrap()),
            record("cfs", "job", serde_json::to_string(&job(Some(0), 2.0, 1.0)).unwrap()),
            record("cfs", "case", case.replace("\"completed\":1", "\"completed\":2")),
        ];
        let md = write(&spec, &records, dir.path()).unwrap().summary;
        assert!(md.contains(&format!("| 2 | {gang} | 1/2 | FAILED (1 of 2 jobs) | - |")), "{md}");
        assert!(md.contains("| 2 | cfs | 2/2 | 2.00 |"), "{md}");
        assert!(md.contains(&format!("| 2 | {gang} | FAILED | - |")), "{md}");
        // Its jobs are listed as they ran, marked; the completed one's slowdown (7 s against 1 s alone) is in no
        // number of the case, nor in the chart.
        assert!(md.contains(&format!("| {gang} (case FAILED) | 0 | 2 | cg --class A | 0 | 7.00 |")), "{md}");
        assert_eq!(md.matches("7.00").count(), 1, "{md}");
        let chart = std::fs::read_to_string(dir.path().join("slowdown.svg")).unwrap();
        assert!(!chart.contains(&gang), "{chart}");
    }
}
