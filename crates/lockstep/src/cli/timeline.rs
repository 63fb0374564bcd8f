//! `lockstep timeline`: which job's ranks ran on which CPU over a short window, as the agent records it (root
//! only), printed as each job's share of each CPU and its co-scheduled fraction, as JSON, or drawn as SVG.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use lockstep_core::error::UsageError;
use lockstep_core::ident::JobKey;
use lockstep_lab::harness::timeline::{draw, record, Panel};
use lockstep_proto::client::{call, check};
use lockstep_proto::protocol::{Request, Timeline, TIMELINE_MILLIS};

/// Arguments of `lockstep timeline`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The window's length in milliseconds (10 to 5000).
    #[arg(long, value_name = "MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(*TIMELINE_MILLIS.start()..=*TIMELINE_MILLIS.end()))]
    ms: u64,
    /// Also draw it into FILE (SVG): CPUs down, time across, a colour per job.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Print the recording as JSON (every segment) instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs `lockstep timeline`.
pub fn exec(args: &Args, socket: &Path) -> anyhow::Result<i32> {
    if let Some(svg) = &args.svg {
        writable(svg)?;
    }
    let timeline = record(socket, args.ms)?;
    if let Some(svg) = &args.svg {
        // The panel is headed by the policy in force (as the agent says it now, after the window).
        let policy = check(call(socket, &Request::Status)?)?.status.map_or_else(|| "agent".into(), |s| s.policy);
        let panel = Panel { label: policy, timeline: &timeline };
        std::fs::write(svg, draw(&[panel])).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", svg.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string(&timeline)?);
    } else {
        print!("{}", render(&timeline));
    }
    Ok(0)
}

/// Whether `path` can take the drawing: not a directory or something else than a file, in a directory that
/// exists (checked before the recording, which takes the window's time).
fn writable(path: &Path) -> Result<(), UsageError> {
    let bad = |why: &str| UsageError::new(format!("--svg {}: {why} (expected a file to write)", path.display()));
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => return Err(bad("is a directory")),
        Ok(m) if !m.is_file() => return Err(bad("is not a regular file")),
        _ => {}
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(bad("its directory does not exist"));
    }
    Ok(())
}

/// The recording as a table: per job its co-scheduled fraction, per CPU the share of the window each job held.
fn render(t: &Timeline) -> String {
    let mut out = format!("window {:.0} ms", t.window_ns as f64 / 1e6);
    if t.dropped > 0 {
        let _ = write!(out, "  ({} switches lost: the buffer was full)", t.dropped);
    }
    out += "\n\nJOB                              RANKS  CO-SCHEDULED\n";
    for j in &t.jobs {
        let share = j.coscheduled.map_or_else(|| "-".into(), |s| format!("{s:.2}"));
        let _ = writeln!(out, "{:<32} {:>5}  {share:>12}", j.name, j.ranks);
    }
    out += "\nCPU  JOBS (share of the window)\n";
    for lane in &t.cpus {
        let mut held: std::collections::BTreeMap<&JobKey, u64> = std::collections::BTreeMap::new();
        for s in &lane.segments {
            *held.entry(&s.job).or_default() += s.end_ns.saturating_sub(s.start_ns);
        }
        let jobs: Vec<String> =
            held.iter().map(|(j, ns)| format!("{j} {:.0} %", *ns as f64 / t.window_ns.max(1) as f64 * 100.0)).collect();
        let _ = writeln!(out, "{:<4} {}", lane.cpu, if jobs.is_empty() { "idle".into() } else { jobs.join(", ") });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_proto::protocol::{CpuLane, Segment, TimelineJob};

    #[test]
    fn the_table_shows_each_jobs_share_of_each_cpu() {
        let seg = |start_ns, end_ns, job: &str| Segment { start_ns, end_ns, job: job.parse().unwrap() };
        let t = Timeline {
            window_ns: 1_000_000_000,
            dropped: 0,
            cpus: vec![
                CpuLane { cpu: 0, segments: vec![seg(0, 250_000_000, "a"), seg(250_000_000, 1_000_000_000, "b")] },
                CpuLane { cpu: 1, segments: vec![] },
            ],
            jobs: vec![TimelineJob { name: "a".parse().unwrap(), ranks: 2, coscheduled: Some(0.5) }],
        };
        let text = render(&t);
        assert!(text.starts_with("window 1000 ms\n"), "{text}");
        assert!(text.contains("0    a 25 %, b 75 %\n") && text.contains("1    idle\n"), "{text}");
        assert!(text.contains("0.50"), "{text}");
    }
}
