//! A timeline drawn: which job's ranks ran on which CPU over a window (the agent's recording), CPUs down, time
//! across, one colour per job, one panel per policy stacked over a shared time axis, each headed by its
//! co-scheduled fraction, and a legend of the jobs beside them; blank is a CPU that ran no rank (another task,
//! or none). Plain SVG: a rectangle per run of pixels one job
//! held, so that a window of tens of thousands of switches stays a picture of a few hundred elements.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use lockstep_core::ident::JobKey;
use lockstep_proto::client::{call, check};
use lockstep_proto::protocol::{CpuLane, Request, Timeline};

/// A window of `millis` ms recorded by the agent at `socket` (root only: `lockstep timeline`, and an experiment's
/// report).
pub fn record(socket: &std::path::Path, millis: u64) -> anyhow::Result<Timeline> {
    let answer = check(call(socket, &Request::Timeline { millis })?)?;
    answer.timeline.ok_or_else(|| anyhow::anyhow!("the agent answered with no timeline"))
}

/// Width of the time axis, in pixels.
const WIDTH: u32 = 840;
/// Left margin (the CPUs' names).
const LEFT: u32 = 60;
/// Height of one CPU's lane, and the gap below it.
const LANE: u32 = 22;
const GAP: u32 = 4;
/// Height of a panel's heading, and of the time axis under the last panel.
const HEAD: u32 = 28;
const AXIS: u32 = 34;
/// Width of the legend beside the panels.
const LEGEND: u32 = 260;

/// The jobs' colours (Okabe and Ito's palette, for colour-blind readers, without its black), in the order of
/// the jobs' names; past its end, the colours start again.
const PALETTE: &[&str] = &["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442"];

/// One panel: its label (the policy) and what was recorded under it.
pub struct Panel<'a> {
    /// The policy, as the report names it (`cfs`, `gang/200ms`).
    pub label: String,
    /// The recording.
    pub timeline: &'a Timeline,
}

/// The colour of each job of `panels`: one per job name, the same in every panel.
pub fn colours(panels: &[Panel<'_>]) -> BTreeMap<JobKey, &'static str> {
    let mut names: Vec<&JobKey> = panels
        .iter()
        .flat_map(|p| {
            let lanes = p.timeline.cpus.iter().flat_map(|l| l.segments.iter().map(|s| &s.job));
            lanes.chain(p.timeline.jobs.iter().map(|j| &j.name))
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    names.into_iter().enumerate().map(|(i, n)| (n.clone(), PALETTE[i % PALETTE.len()])).collect()
}

/// The mean co-scheduled fraction over the jobs of `timeline` that ran in it; `None` when none did.
pub fn mean_coscheduled(timeline: &Timeline) -> Option<f64> {
    let shares: Vec<f64> = timeline.jobs.iter().filter_map(|j| j.coscheduled).collect();
    (!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64)
}

/// Per pixel column of `lane` (`columns` of them over `window_ns`), the job that held the CPU for the most of
/// it, if some job held it for at least half; then as runs: (first column, columns, job).
fn runs(lane: &CpuLane, window_ns: u64, columns: u32) -> Vec<(u32, u32, &JobKey)> {
    let per = window_ns.max(1) as f64 / f64::from(columns);
    let mut held: Vec<BTreeMap<&JobKey, f64>> = vec![BTreeMap::new(); columns as usize];
    for s in &lane.segments {
        let (a, b) = (s.start_ns as f64 / per, (s.end_ns.min(window_ns)) as f64 / per);
        let mut x = a.floor().max(0.0);
        while x < b && (x as usize) < held.len() {
            let share = (b.min(x + 1.0) - a.max(x)).max(0.0);
            *held[x as usize].entry(&s.job).or_default() += share;
            x += 1.0;
        }
    }
    let mut out: Vec<(u32, u32, &JobKey)> = Vec::new();
    for (x, jobs) in held.iter().enumerate() {
        let busy: f64 = jobs.values().sum();
        let top = jobs.iter().max_by(|a, b| a.1.total_cmp(b.1)).map(|(j, _)| *j);
        let Some(job) = top.filter(|_| busy >= 0.5) else { continue };
        match out.last_mut() {
            Some((first, n, j)) if *j == job && *first + *n == x as u32 => *n += 1,
            _ => out.push((x as u32, 1, job)),
        }
    }
    out
}

/// The SVG of `panels`, one above the other over one time axis (the longest window's), with the legend of the
/// jobs beside them.
pub fn draw(panels: &[Panel<'_>]) -> String {
    let colours = colours(panels);
    let window_ns = panels.iter().map(|p| p.timeline.window_ns).max().unwrap_or(0).max(1);
    let heights: Vec<u32> = panels.iter().map(|p| HEAD + p.timeline.cpus.len() as u32 * (LANE + GAP)).collect();
    let plot_height: u32 = heights.iter().sum();
    let (width, height) = (LEFT + WIDTH + 20 + LEGEND, plot_height + AXIS + 10);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} \
         {height}\" font-family=\"sans-serif\" font-size=\"13\"><rect width=\"{width}\" height=\"{height}\" \
         fill=\"white\"/>"
    );
    let mut y = 0;
    for (panel, h) in panels.iter().zip(&heights) {
        let t = panel.timeline;
        let share = mean_coscheduled(t).map_or_else(|| "not measured".into(), |s| format!("{s:.2}"));
        let dropped = if t.dropped > 0 { format!(" ({} switches lost)", t.dropped) } else { String::new() };
        let _ = write!(
            svg,
            "<text x=\"{LEFT}\" y=\"{}\" font-size=\"15\" font-weight=\"bold\">{} — co-scheduled {share}{}</text>",
            y + 19,
            super::report::escape(&panel.label),
            super::report::escape(&dropped)
        );
        // This panel's own window, on the shared axis.
        let columns = ((u128::from(t.window_ns) * u128::from(WIDTH)) / u128::from(window_ns)).max(1) as u32;
        for (i, lane) in t.cpus.iter().enumerate() {
            let top = y + HEAD + i as u32 * (LANE + GAP);
            let _ = write!(
                svg,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">CPU {}</text><rect x=\"{LEFT}\" y=\"{top}\" \
                 width=\"{columns}\" height=\"{LANE}\" fill=\"#f2f2f2\"/>",
                LEFT - 6,
                top + 15,
                lane.cpu
            );
            for (x, n, job) in runs(lane, t.window_ns, columns) {
                let _ = write!(
                    svg,
                    "<rect x=\"{}\" y=\"{top}\" width=\"{n}\" height=\"{LANE}\" fill=\"{}\"><title>{}</title></rect>",
                    LEFT + x,
                    colours.get(job).copied().unwrap_or("#999999"),
                    super::report::escape(&job.to_string())
                );
            }
        }
        y += h;
    }
    // The time axis, in milliseconds.
    let ms = window_ns as f64 / 1e6;
    let step = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0].into_iter().find(|s| ms / s <= 10.0);
    let step = step.unwrap_or(1000.0);
    let _ = write!(svg, "<line x1=\"{LEFT}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"black\"/>", LEFT + WIDTH);
    let mut tick = 0.0;
    while tick <= ms + 1e-9 {
        let x = f64::from(LEFT) + tick / ms * f64::from(WIDTH);
        let _ = write!(
            svg,
            "<line x1=\"{x:.1}\" y1=\"{y}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"black\"/><text x=\"{x:.1}\" y=\"{}\" \
             text-anchor=\"middle\">{tick}</text>",
            y + 5,
            y + 18
        );
        tick += step;
    }
    let _ = write!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">time in the window (ms)</text>",
        LEFT + WIDTH / 2,
        y + 32
    );
    // The legend: each job, with its co-scheduled fraction under each panel.
    let lx = LEFT + WIDTH + 20;
    let mut ly = 20;
    for (job, colour) in &colours {
        let _ = write!(
            svg,
            "<rect x=\"{lx}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{colour}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            ly - 11,
            lx + 20,
            ly,
            super::report::escape(&job.to_string())
        );
        for panel in panels {
            if let Some(share) = panel.timeline.jobs.iter().find(|j| &j.name == job).and_then(|j| j.coscheduled) {
                ly += 16;
                let _ = write!(
                    svg,
                    "<text x=\"{}\" y=\"{ly}\" font-size=\"12\" fill=\"#444\">{}: co-scheduled {share:.2}</text>",
                    lx + 20,
                    super::report::escape(&panel.label)
                );
            }
        }
        ly += 24;
    }
    svg += "</svg>";
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_proto::protocol::{Segment, TimelineJob};

    fn lane(cpu: u32, segments: &[(u64, u64, &str)]) -> CpuLane {
        let segments = segments
            .iter()
            .map(|&(start_ns, end_ns, job)| Segment { start_ns, end_ns, job: job.parse().unwrap() })
            .collect();
        CpuLane { cpu, segments }
    }

    fn job(name: &str, coscheduled: Option<f64>) -> TimelineJob {
        TimelineJob { name: name.parse().unwrap(), ranks: 2, coscheduled }
    }

    #[test]
    fn segments_become_rectangles_in_their_jobs_colours_with_names_escaped() {
        let hostile = "b";
        let t = Timeline {
            // A nanosecond per pixel column.
            window_ns: u64::from(WIDTH),
            dropped: 0,
            cpus: vec![lane(0, &[(0, 300, "a"), (300, u64::from(WIDTH), hostile)]), lane(1, &[(100, 200, "a")])],
            jobs: vec![job("a", Some(0.25)), job(hostile, Some(0.75))],
        };
        let panels = [Panel { label: "gang/200ms".into(), timeline: &t }];
        let colours = colours(&panels);
        assert_eq!(colours.len(), 2);
        let svg = draw(&panels);
        let (a, b) = (colours[&"a".parse().unwrap()], colours[&hostile.parse().unwrap()]);
        assert_ne!(a, b);
        for rect in [
            format!("<rect x=\"{LEFT}\" y=\"{HEAD}\" width=\"300\" height=\"{LANE}\" fill=\"{a}\">"),
            format!(
                "<rect x=\"{}\" y=\"{HEAD}\" width=\"{}\" height=\"{LANE}\" fill=\"{b}\">",
                LEFT + 300,
                WIDTH - 300
            ),
            format!(
                "<rect x=\"{}\" y=\"{}\" width=\"100\" height=\"{LANE}\" fill=\"{a}\">",
                LEFT + 100,
                HEAD + LANE + GAP
            ),
        ] {
            assert!(svg.contains(&rect), "{rect} not in {svg}");
        }
        assert!(svg.contains("gang/200ms — co-scheduled 0.50"), "{svg}");
        assert!(svg.contains("gang/200ms: co-scheduled 0.75"), "{svg}");
        // A job is a job key, which cannot hold markup; a label can, and is escaped.
        let svg = draw(&[Panel { label: "b<script>&\"x\"".into(), timeline: &t }]);
        assert!(!svg.contains("<script>") && svg.contains("b&lt;script&gt;&amp;&quot;x&quot;"), "{svg}");
    }

    #[test]
    fn a_column_goes_to_the_job_that_held_it_longest_and_short_blips_merge() {
        // 10 columns of 10 ns: a holds 0..44, b 44..47 (a blip), a 47..100 (idle for a bit at the end).
        let l = lane(0, &[(0, 44, "a"), (44, 47, "b"), (47, 96, "a")]);
        assert_eq!(runs(&l, 100, 10), [(0, 10, &"a".parse().unwrap())]);
        // Less than half of a column held: the column is idle.
        let l = lane(0, &[(0, 4, "a"), (20, 30, "b")]);
        assert_eq!(runs(&l, 100, 10), [(2, 1, &"b".parse().unwrap())]);
    }

    #[test]
    fn the_same_job_has_the_same_colour_in_every_panel_and_idle_lanes_are_drawn() {
        let cfs =
            Timeline { window_ns: 1000, cpus: vec![lane(0, &[(0, 1000, "x")]), lane(1, &[])], ..Default::default() };
        let gang = Timeline { window_ns: 1000, cpus: vec![lane(0, &[(0, 1000, "y")])], ..Default::default() };
        let panels = [Panel { label: "cfs".into(), timeline: &cfs }, Panel { label: "gang".into(), timeline: &gang }];
        let svg = draw(&panels);
        assert_eq!(svg.matches("CPU 1</text>").count(), 1);
        assert!(svg.contains("cfs — co-scheduled not measured"));
        assert_eq!(colours(&panels).values().collect::<Vec<_>>(), [&PALETTE[0], &PALETTE[1]]);
    }
}
