//! The locks report: per scenario and configuration (NUMA map, memory policy, co-runners) throughput against threads
//! for every lock (table and plot), fairness and p99 latency; then the lock targets (docs/locks.md), checked on the
//! `counter` scenarios; and what this machine cannot show.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::record::LockRun;
use super::spec::LocksSpec;
use crate::harness::report::{chart, html_page, Report};
use crate::harness::stats::median;

/// A configuration of a scenario: scenario, NUMA, memory policy, co-runners.
type Config = (String, String, String, u32);

/// Thread count → [throughput, fairness, p99 ns] of every successful repetition.
type ByThreads = BTreeMap<u32, Vec<[f64; 3]>>;

/// Whether a lockbench run failed: it did not exit 0 (it exited non-zero, or was killed, after printing its JSON
/// or not) or left no measures. A failed run is marked in the report and kept out of every number.
pub fn failed(r: &LockRun) -> bool {
    r.exit_status != Some(0) || r.throughput_ops_s.is_none()
}

/// Medians over repetitions, per lock and thread count.
#[derive(Default)]
struct Table {
    /// lock → its measures.
    cells: BTreeMap<String, ByThreads>,
    /// (lock, threads) → its failed runs, left out of `cells`.
    failed: BTreeMap<(String, u32), usize>,
    /// threads → threads per CPU.
    per_cpu: BTreeMap<u32, f64>,
}

impl Table {
    /// Median of measure `m` (0 throughput, 1 fairness, 2 p99) of `lock` at `threads`.
    fn median(&self, lock: &str, threads: u32, m: usize) -> Option<f64> {
        let v = self.cells.get(lock)?.get(&threads)?;
        let mut xs: Vec<f64> = v.iter().map(|c| c[m]).collect();
        (!xs.is_empty()).then(|| median(&mut xs))
    }

    /// The best median throughput at `threads`.
    fn best(&self, threads: u32) -> Option<f64> {
        self.cells.keys().filter_map(|l| self.median(l, threads, 0)).reduce(f64::max)
    }

    /// The thread count run at `per_cpu` threads per CPU.
    fn threads_at(&self, per_cpu: f64) -> Option<u32> {
        self.per_cpu.iter().find(|(_, p)| (**p - per_cpu).abs() < 1e-9).map(|(t, _)| *t)
    }
}

fn tables(runs: &[LockRun]) -> BTreeMap<Config, Table> {
    let mut out: BTreeMap<Config, Table> = BTreeMap::new();
    for r in runs {
        let key = (r.scenario.clone(), r.numa.clone(), r.numa_policy.clone(), r.corunners);
        let t = out.entry(key).or_default();
        t.per_cpu.insert(r.threads, r.threads_per_cpu);
        let cell = t.cells.entry(r.lock.clone()).or_default().entry(r.threads).or_default();
        match (r.throughput_ops_s, r.fairness_jain, r.p99_ns) {
            (Some(x), Some(f), Some(p)) if !failed(r) => cell.push([x, f, p as f64]),
            _ => *t.failed.entry((r.lock.clone(), r.threads)).or_default() += 1,
        }
    }
    out
}

/// The locks of `t` in the spec's order (then `kernel`).
fn locks_of<'a>(spec: &'a LocksSpec, t: &Table) -> Vec<&'a str> {
    spec.locks.iter().map(String::as_str).chain(["kernel"]).filter(|l| t.cells.contains_key(*l)).collect()
}

fn section(md: &mut String, spec: &LocksSpec, t: &Table, m: usize, title: &str, show: impl Fn(f64) -> String) {
    let threads: Vec<u32> = t.per_cpu.keys().copied().collect();
    let _ = write!(md, "{title}\n\n| lock |");
    for th in &threads {
        let _ = write!(md, " {th} ({}×) |", t.per_cpu[th]);
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(threads.len()));
    md.push('\n');
    for lock in locks_of(spec, t) {
        let _ = write!(md, "| {lock} |");
        for &th in &threads {
            let v = t.median(lock, th, m);
            let best = m == 0 && v.is_some() && v == t.best(th);
            let text = v.map_or("-".to_string(), &show);
            let text = if best { format!("**{text}**") } else { text };
            let text = match (t.failed.get(&(lock.to_string(), th)), v) {
                (None, _) => text,
                (Some(_), None) => "FAILED".to_string(),
                (Some(n), Some(_)) => format!("{text} (FAILED {n})"),
            };
            let _ = write!(md, " {text} |");
        }
        md.push('\n');
    }
    md.push('\n');
}

/// Writes one SVG plot per configuration into `dir`; returns the report (summary and page) that shows them.
pub fn write(spec: &LocksSpec, runs: &[LockRun], dir: &Path) -> anyhow::Result<Report> {
    std::fs::create_dir_all(dir)?;
    let tables = tables(runs);
    let lost = runs.iter().filter(|r| failed(r)).count();
    let cpus = lockstep_core::cpulist::CpuList::online().len();
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map_or(1, |d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("node")).count())
        .max(1);
    let mut md = format!("# {} — {}\n\n", spec.name, spec.description);
    let _ = writeln!(
        md,
        "{} lockbench runs ({lost} failed — exited non-zero, killed or without a result — marked `FAILED` in \
         their cells and left out of every number) of {} s each, {} repetitions; medians over the repetitions. \
         Machine: {cpus} CPUs, {nodes} NUMA node(s). Threads and co-runner processes are multiples of the CPUs \
         (co-runners spin, preempting lock holders and waiters as a host preempts vCPUs). Latency: acquisition \
         for `counter`, the whole rename for the rename workloads. **Bold**: the best throughput of a column.\n",
        runs.len(),
        spec.duration_s,
        spec.repetitions
    );
    if nodes == 1 && spec.guests.is_none() {
        md.push_str(
            "**What this machine cannot show.** It has one real NUMA node: `emulated-N` splits its CPUs into N \
             nodes with LOCKSTEP_NUMA_MAP, which changes only whom cna and cna-pt treat as local (the hand-over \
             order), not the cost of moving a cache line between sockets, so the locality gain the CNA-in-VMs paper measured \
             on real sockets cannot appear here; and the numactl policies (bind, preferred, interleave) all place \
             memory on the one node, so they differ only by noise.\n\n",
        );
    }
    let mut html = html_page(&spec.name, &spec.description);
    for ((scenario, numa, policy, corunners), t) in &tables {
        let title = format!("{scenario} — numa {numa}, memory {policy}, {corunners} co-runners");
        let _ = writeln!(md, "## {title}\n");
        section(&mut md, spec, t, 0, "Throughput (M ops/s)", |v| format!("{:.3}", v / 1e6));
        section(&mut md, spec, t, 1, "Fairness (Jain's index)", |v| format!("{v:.3}"));
        section(&mut md, spec, t, 2, "p99 latency (µs)", |v| format!("{:.1}", v / 1e3));
        let series: BTreeMap<String, Vec<(u32, f64)>> = locks_of(spec, t)
            .into_iter()
            .map(|l| {
                let points = t.per_cpu.keys().filter_map(|&th| Some((th, t.median(l, th, 0)? / 1e6))).collect();
                (l.to_string(), points)
            })
            .collect();
        let svg = chart(&title, "threads", "throughput (M ops/s)", &series);
        let slug: String = title.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        std::fs::write(dir.join(format!("{slug}.svg")), &svg)?;
        html += &svg;
    }
    let (vm_md, vm_svgs) = across_vms(spec, &tables);
    md += &vm_md;
    html += &vm_svgs;
    md += &targets(spec, &tables);
    html += "<h2>Tables</h2>";
    Ok(Report { summary: md, page: html })
}

/// Seed 003 across VMs: per scenario run in guests (`numa` = `guests-N`), every lock's throughput per guest against
/// the number of guests, relative to one guest and to pthread, fairness and p99, and the VM targets; one plot per
/// scenario with the guests on the x axis. Empty when nothing ran in guests.
fn across_vms(spec: &LocksSpec, tables: &BTreeMap<Config, Table>) -> (String, String) {
    let mut md = String::new();
    let mut html = String::new();
    let scenarios: Vec<&str> = spec.scenarios.iter().map(|s| s.name.as_str()).collect();
    for scenario in scenarios {
        // guests → its table.
        let by_guests: BTreeMap<u32, &Table> = tables
            .iter()
            .filter(|((s, ..), _)| s == scenario)
            .filter_map(|((_, numa, ..), t)| Some((numa.strip_prefix("guests-")?.parse().ok()?, t)))
            .collect();
        let Some((_, first)) = by_guests.first_key_value() else { continue };
        let Some(&threads) = first.per_cpu.keys().next() else { continue };
        let at = |n: u32, lock: &str, m: usize| by_guests.get(&n).and_then(|t| t.median(lock, threads, m));
        let best = |n: u32| by_guests.get(&n).and_then(|t| t.best(threads));
        let counts: Vec<u32> = by_guests.keys().copied().collect();
        if md.is_empty() {
            md.push_str(
                "**In the guests.** Each guest is a qemu TCG machine with its own kernel; the host's CPUs are shared by \
                 all guests' vCPUs, so with more guests the host preempts vCPUs — lock holders and waiters — as in the \
                 CNA-in-VMs paper. qemu does not emulate the latency of remote memory: the locality gain of a \
                 NUMA-aware lock inside one VM cannot be measured here; what can be is the hand-over order by vNUMA \
                 node (`lockbench` in a guest with several vNUMA nodes prints the share of hand-overs that stay on \
                 one node, from getcpu inside the critical section; docs/locks.md).\n\n",
            );
        }
        let _ = writeln!(
            md,
            "## {scenario} across VMs — {threads} threads per guest, all guests at once\n\nThroughput per guest \
             (M ops/s), then its ratio to the same lock in one guest alone and to pthread with as many guests:\n"
        );
        let lost =
            |n: u32, lock: &str| by_guests.get(&n).and_then(|t| t.failed.get(&(lock.to_string(), threads)).copied());
        let series = vm_table(&mut md, spec, &counts, &at, &lost);
        vm_targets(&mut md, &counts, &at, &best);
        md.push('\n');
        html += &chart(&format!("{scenario} across VMs"), "guests", "throughput per guest (M ops/s)", &series);
    }
    (md, html)
}

/// A guest count, a lock and a measure (0 throughput, 1 fairness, 2 p99) → the median.
type At<'a> = dyn Fn(u32, &str, usize) -> Option<f64> + 'a;

/// The across-VMs table of one scenario into `md`, a cell with failed runs (`lost`: their count, per guest count
/// and lock) marked; returns each lock's throughput series against the guests.
fn vm_table(
    md: &mut String,
    spec: &LocksSpec,
    counts: &[u32],
    at: &At,
    lost: &dyn Fn(u32, &str) -> Option<usize>,
) -> BTreeMap<String, Vec<(u32, f64)>> {
    md.push_str("| lock |");
    for n in counts {
        let _ = write!(md, " {n} guest(s) |");
    }
    md.push_str(" fairness (Jain) | p99 (µs) |\n|---|");
    md.push_str(&"---|".repeat(counts.len() + 2));
    md.push('\n');
    let mut series: BTreeMap<String, Vec<(u32, f64)>> = BTreeMap::new();
    for lock in &spec.locks {
        let _ = write!(md, "| {lock} |");
        for &n in counts {
            let cell = match at(n, lock, 0) {
                Some(x) => {
                    series.entry(lock.clone()).or_default().push((n, x / 1e6));
                    let one = at(counts[0], lock, 0).map_or("-".into(), |b| format!("{:.2}", x / b));
                    let vs = at(n, "pthread", 0).map_or("-".into(), |p| format!("{:.2}", x / p));
                    let marked = lost(n, lock).map_or(String::new(), |k| format!(" (FAILED {k})"));
                    format!("{:.3} ({one}, {vs}){marked}", x / 1e6)
                }
                None if lost(n, lock).is_some() => "FAILED".into(),
                None => "-".into(),
            };
            let _ = write!(md, " {cell} |");
        }
        let per_count = |m: usize, f: &dyn Fn(f64) -> String| {
            counts.iter().map(|&n| at(n, lock, m).map_or("-".into(), f)).collect::<Vec<_>>().join(" / ")
        };
        let _ = writeln!(
            md,
            " {} | {} |",
            per_count(1, &|v| format!("{v:.2}")),
            per_count(2, &|v| format!("{:.1}", v / 1e3))
        );
    }
    md.push_str("\n(fairness and p99: one value per guest count, in the order of the columns)\n\n");
    series
}

/// The VM targets of one scenario into `md`: the FIFO locks' collapse, mcs-pt and cna-pt at 2 guests and against
/// the best lock, cna-pt against shfl.
fn vm_targets(md: &mut String, counts: &[u32], at: &At, best: &dyn Fn(u32) -> Option<f64>) {
    let verdict = |ok: bool| if ok { "met" } else { "**not met**" };
    let two = counts.iter().copied().find(|&n| n == 2);
    for lock in ["ticket", "mcs", "cna"] {
        if let (Some(n), Some(b)) = (two, at(counts[0], lock, 0)) {
            if let Some(x) = at(n, lock, 0) {
                let _ = writeln!(
                    md,
                    "- {lock} at 2 guests / 1 guest: {:.2} ({})",
                    x / b,
                    if x / b < 0.5 { "collapses" } else { "does not collapse" }
                );
            }
        }
    }
    for lock in ["mcs-pt", "cna-pt"] {
        if let (Some(n), Some(b)) = (two, at(counts[0], lock, 0)) {
            if let Some(x) = at(n, lock, 0) {
                let _ = writeln!(md, "- {lock} keeps ≥ 80 % at 2 guests: {:.2}: {}", x / b, verdict(x / b >= 0.8));
            }
        }
        let worst =
            counts.iter().filter_map(|&n| Some((at(n, lock, 0)? / best(n)?, n))).min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((r, n)) = worst {
            let _ = writeln!(
                md,
                "- {lock} within 10 % of the best lock at every guest count: worst {r:.2} (at {n}): {}",
                verdict(r >= 0.9)
            );
        }
    }
    let vs_shfl = counts
        .iter()
        .filter_map(|&n| Some((at(n, "cna-pt", 0)? / at(n, "shfl", 0)?, n)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((r, n)) = vs_shfl {
        let _ = writeln!(
            md,
            "- cna-pt within 5 % of shfl or ahead at every guest count: worst {r:.2} (at {n}): {}",
            verdict(r >= 0.95)
        );
    }
}

/// The lock targets (docs/locks.md) on every `counter` configuration without co-runners (and its co-runner twin).
fn targets(spec: &LocksSpec, tables: &BTreeMap<Config, Table>) -> String {
    let mut md = String::from("## Targets\n\n");
    let counter: Vec<&str> =
        spec.scenarios.iter().filter(|s| s.workload == "counter").map(|s| s.name.as_str()).collect();
    let verdict = |ok: bool| if ok { "met" } else { "**not met**" };
    for ((scenario, numa, policy, corunners), t) in tables {
        if *corunners != 0 || !counter.contains(&scenario.as_str()) || numa.starts_with("guests-") {
            continue;
        }
        let _ = writeln!(md, "### {scenario} — numa {numa}, memory {policy}\n");
        // 1. At ≤ 1× threads per CPU, every lock within 5 % of the best.
        md.push_str(
            "At ≤ 1 thread per CPU, every lock within 5 % of the best (worst ratio over those thread counts):\n\n",
        );
        md.push_str("| lock | worst throughput / best | at threads | |\n|---|---|---|---|\n");
        for lock in locks_of(spec, t) {
            let worst = t
                .per_cpu
                .iter()
                .filter(|(_, p)| **p <= 1.0)
                .filter_map(|(&th, _)| Some((t.median(lock, th, 0)? / t.best(th)?, th)))
                .min_by(|a, b| a.0.total_cmp(&b.0));
            if let Some((ratio, th)) = worst {
                let _ = writeln!(md, "| {lock} | {ratio:.3} | {th} | {} |", verdict(ratio >= 0.95));
            }
        }
        // 2. Oversubscribed (2×) and with co-runners, against 1×.
        let one = t.threads_at(1.0);
        let two = t.threads_at(2.0);
        let co = tables
            .iter()
            .find(|((s, n, p, c), _)| s == scenario && n == numa && p == policy && *c > 0)
            .map(|(_, ct)| ct);
        md.push_str(
            "\nUnder preemption, throughput against the lock's own at 1 thread per CPU (cna-pt must keep ≥ 80 %; \
             plain mcs, ticket and cna are expected to collapse):\n\n",
        );
        md.push_str("| lock | 1× (M ops/s) | 2× threads / 1× | 1× + co-runners / 1× | |\n|---|---|---|---|---|\n");
        for lock in locks_of(spec, t) {
            let Some(base) = one.and_then(|th| t.median(lock, th, 0)) else { continue };
            let over = two.and_then(|th| t.median(lock, th, 0)).map(|v| v / base);
            let with_co = co.and_then(|ct| ct.median(lock, one?, 0)).map(|v| v / base);
            let ratios: Vec<f64> = [over, with_co].into_iter().flatten().collect();
            let worst = ratios.iter().copied().reduce(f64::min);
            let note = match (lock, worst) {
                ("cna-pt", Some(w)) => format!("≥ 0.8: {}", verdict(w >= 0.8)),
                ("mcs" | "ticket" | "cna", Some(w)) => {
                    (if w < 0.5 { "collapses (< 0.5)" } else { "holds up (≥ 0.5)" }).to_string()
                }
                _ => String::new(),
            };
            let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
            let _ = writeln!(md, "| {lock} | {:.3} | {} | {} | {note} |", base / 1e6, show(over), show(with_co));
        }
        // 3. CNA's fairness with its default flush bound.
        md.push_str(
            "\nFairness of cna with its default flush bound (Jain's index ≥ 0.9 at ≤ 1 thread per CPU; the lowest \
             over all thread counts for information):\n\n",
        );
        for lock in ["cna", "cna-pt"] {
            let lowest = |max: f64| {
                t.per_cpu
                    .iter()
                    .filter(|(_, p)| **p <= max)
                    .filter_map(|(&th, _)| Some((t.median(lock, th, 1)?, th)))
                    .min_by(|a, b| a.0.total_cmp(&b.0))
            };
            if let (Some((j, th)), Some((all, all_th))) = (lowest(1.0), lowest(f64::MAX)) {
                let _ = writeln!(
                    md,
                    "- {lock}: {j:.3} (at {th} threads): {}; over all thread counts {all:.3} (at {all_th})",
                    verdict(j >= 0.9)
                );
            }
        }
        md.push('\n');
    }
    if md.len() == "## Targets\n\n".len() {
        md.clear();
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lock: &str, threads: u32, per_cpu: f64, corunners: u32, throughput: f64, jain: f64) -> LockRun {
        LockRun {
            experiment: "l".into(),
            session: 1.0,
            scenario: "counter".into(),
            workload: "counter".into(),
            lock: lock.into(),
            threads,
            threads_per_cpu: per_cpu,
            corunners,
            numa: "emulated-2".into(),
            numa_policy: "default".into(),
            repetition: 1,
            ops: Some(1),
            throughput_ops_s: Some(throughput),
            fairness_jain: Some(jain),
            p50_ns: Some(100),
            p99_ns: Some(2000),
            p999_ns: Some(5000),
            exit_status: Some(0),
            started_at: 1.0,
        }
    }

    /// The spec `text`, written into `dir` and parsed as the CLI does.
    fn spec(dir: &Path, text: &str) -> LocksSpec {
        let path = dir.join("l.toml");
        std::fs::write(&path, text).unwrap();
        super::super::spec::parse(&path, text).unwrap()
    }

    #[test]
    fn targets_are_judged_from_the_medians() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let spec = spec(
            dir.path(),
            "kind = \"locks\"\nname = \"l\"\nduration_s = 1\nlocks = [\"mcs\", \"cna-pt\"]\n[[scenarios]]\n\
             name = \"counter\"\nworkload = \"counter\"\nthreads_per_cpu = [1, 2]\ncorunners_per_cpu = [0, 1]\n",
        );
        let runs = vec![
            run("mcs", 2, 1.0, 0, 4e6, 0.99),
            run("cna-pt", 2, 1.0, 0, 3.9e6, 0.95),
            run("mcs", 4, 2.0, 0, 0.1e6, 0.8),
            run("cna-pt", 4, 2.0, 0, 3.5e6, 0.97),
            run("mcs", 2, 1.0, 2, 0.2e6, 0.9),
            run("cna-pt", 2, 1.0, 2, 3.0e6, 0.99),
        ];
        let index = write(&spec, &runs, dir.path()).unwrap().write(dir.path()).unwrap();
        let md = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
        assert!(index.exists());
        assert!(md.contains("| mcs | **4.000** | 0.100 |"), "{md}");
        assert!(md.contains("| cna-pt | 0.975 | 2 | met |"), "{md}");
        assert!(md.contains("| mcs | 4.000 | 0.025 | 0.050 | collapses (< 0.5) |"), "{md}");
        assert!(md.contains("| cna-pt | 3.900 | 0.897 | 0.769 | ≥ 0.8: **not met** |"), "{md}");
        assert!(md.contains("- cna-pt: 0.950 (at 2 threads): met; over all thread counts 0.950 (at 2)"), "{md}");
    }

    #[test]
    fn a_run_that_exits_non_zero_is_failed_even_with_its_json_and_left_out_of_every_number() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let spec = spec(
            dir.path(),
            "kind = \"locks\"\nname = \"l\"\nduration_s = 1\nlocks = [\"mcs\", \"cna-pt\"]\n[[scenarios]]\n\
             name = \"counter\"\nworkload = \"counter\"\nthreads_per_cpu = [1, 2]\n",
        );
        // mcs at 2 threads: one repetition printed its JSON then exited 1 (a far higher throughput, never to be
        // the median), the other was killed after printing it; at 4 threads, one ran and one exited 1.
        let exiting = |status: Option<i32>, threads: u32, per_cpu: f64, x: f64| LockRun {
            exit_status: status,
            repetition: 2,
            ..run("mcs", threads, per_cpu, 0, x, 0.5)
        };
        let runs = vec![
            exiting(Some(1), 2, 1.0, 9e6),
            exiting(None, 2, 1.0, 8e6),
            run("cna-pt", 2, 1.0, 0, 3.9e6, 0.95),
            run("mcs", 4, 2.0, 0, 1e6, 0.9),
            exiting(Some(1), 4, 2.0, 7e6),
            run("cna-pt", 4, 2.0, 0, 3.5e6, 0.97),
        ];
        assert!(failed(&runs[0]) && failed(&runs[1]) && !failed(&runs[2]));
        assert!(failed(&LockRun { throughput_ops_s: None, ..runs[2].clone() }));
        let md = write(&spec, &runs, dir.path()).unwrap().summary;
        assert!(md.contains("6 lockbench runs (3 failed"), "{md}");
        // Its cells are marked; the best of the 2-thread column is cna-pt's, not the failed runs' 9 M ops/s.
        assert!(md.contains("| mcs | FAILED | 1.000 (FAILED 1) |"), "{md}");
        assert!(md.contains("| cna-pt | **3.900** | **3.500** |"), "{md}");
        assert!(md.contains("| mcs | FAILED | 0.900 (FAILED 1) |"), "{md}");
        assert!(!md.contains("9.000") && !md.contains("7.000") && !md.contains("0.500"), "{md}");
    }

    #[test]
    fn guests_are_on_the_x_axis_and_judged_against_one_guest() {
        let dir = lockstep_scratch::tempdir().unwrap();
        let spec = spec(
            dir.path(),
            "kind = \"locks\"\nname = \"l\"\nduration_s = 1\nlocks = [\"pthread\", \"mcs\", \"cna-pt\", \"shfl\"]\n\
             [guests]\ncounts = [1, 2]\n[[scenarios]]\nname = \"counter\"\nworkload = \"counter\"\n\
             threads_per_cpu = [1]\n",
        );
        let in_guests = |lock: &str, guests: u32, throughput: f64| LockRun {
            numa: format!("guests-{guests}"),
            ..run(lock, 2, 1.0, 0, throughput, 1.0)
        };
        let runs = vec![
            in_guests("pthread", 1, 1e6),
            in_guests("mcs", 1, 1e6),
            in_guests("cna-pt", 1, 1e6),
            in_guests("shfl", 1, 1e6),
            in_guests("pthread", 2, 0.5e6),
            in_guests("mcs", 2, 0.01e6),
            in_guests("cna-pt", 2, 0.9e6),
            in_guests("shfl", 2, 1e6),
        ];
        let md = write(&spec, &runs, dir.path()).unwrap().summary;
        assert!(md.contains("| cna-pt | 1.000 (1.00, 1.00) | 0.900 (0.90, 1.80) |"), "{md}");
        assert!(md.contains("- mcs at 2 guests / 1 guest: 0.01 (collapses)"), "{md}");
        assert!(md.contains("- cna-pt keeps ≥ 80 % at 2 guests: 0.90: met"), "{md}");
        assert!(
            md.contains("- cna-pt within 5 % of shfl or ahead at every guest count: worst 0.90 (at 2): **not met**")
        );
        assert!(!md.contains("## Targets") && !md.contains("What this machine cannot show"), "{md}");
    }
}
