//! What every kind's report shares: the HTML page and its Markdown tables, the files written, and line charts
//! whose series keep one colour per policy and lock across every report.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::plot::{legend, series_colour, LEGEND_WIDTH};
use super::stats::failed;
use lockstep_core::error::UsageError;
use lockstep_store::ExperimentRun;

/// `runs` of experiment `name`, read from the store for `session` (`None`: its latest), or an error when there
/// are none: a usage error for a report asked of an experiment that never ran, a failure of the system for a run
/// that recorded nothing.
pub(crate) fn some_runs<T>(name: &str, session: Option<f64>, runs: Vec<T>) -> anyhow::Result<Vec<T>> {
    if runs.is_empty() {
        return Err(match session {
            None => UsageError::new(format!("experiment {name:?} has no runs in the store (run it first)")).into(),
            Some(_) => anyhow::anyhow!("experiment {name}: this run recorded no results"),
        });
    }
    Ok(runs)
}

/// The section that lists the runs of failed cases (every job of a case one of whose jobs failed, the failed ones
/// marked `FAILED`), kept out of every other table's means; empty when none failed.
pub(crate) fn failed_section(failed_runs: &[ExperimentRun]) -> String {
    if failed_runs.is_empty() {
        return String::new();
    }
    let mut md = "\n## Failed cases\n\nA case one of whose jobs failed (exited with other than 0, or did not verify) \
                  is left out of every mean, ratio and headline above, its other jobs with it.\n\n\
                  | policy | progress | ranks in | mix | repetition | job | exit | verified | |\n\
                  |---|---|---|---|---|---|---|---|---|\n"
        .to_string();
    for r in failed_runs {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.policy,
            r.progress,
            r.placement,
            r.mix,
            r.repetition,
            r.job,
            r.exit_status.map_or("signal".into(), |c| c.to_string()),
            if r.verified { "yes" } else { "no" },
            if failed(r) { "FAILED" } else { "beside a failed job" }
        );
    }
    md
}

/// One line chart: x = `x_label` (MPL, threads), one series per key (policy, lock), each in its
/// [`series_colour`], the legend beside the plot.
pub(crate) fn chart(title: &str, x_label: &str, y_label: &str, series: &BTreeMap<String, Vec<(u32, f64)>>) -> String {
    let mut svg = String::new();
    {
        let whole = SVGBackend::with_string(&mut svg, (560 + LEGEND_WIDTH, 340)).into_drawing_area();
        let _ = whole.fill(&WHITE);
        let (root, side) = whole.split_horizontally(560);
        let xs: Vec<u32> = series.values().flatten().map(|p| p.0).collect();
        let ys: Vec<f64> = series.values().flatten().map(|p| p.1).filter(|y| y.is_finite()).collect();
        let (x0, x1) = (xs.iter().min().copied().unwrap_or(1), xs.iter().max().copied().unwrap_or(2).max(2));
        let y1 = ys.iter().copied().fold(0.0, f64::max) * 1.1 + 1e-9;
        let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(50)
            .build_cartesian_2d(f64::from(x0) - 0.2..f64::from(x1) + 0.2, 0.0..y1)
        else {
            return String::new();
        };
        // Whole numbers only on the x axis (jobs, threads): a label between two is left blank.
        let _ = chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_labels((x1 - x0 + 1) as usize)
            .x_label_formatter(&|x| whole_number(*x))
            .draw();
        let mut entries = Vec::new();
        for (policy, points) in series {
            let color = series_colour(policy);
            let pts: Vec<(f64, f64)> =
                points.iter().filter(|p| p.1.is_finite()).map(|p| (f64::from(p.0), p.1)).collect();
            let _ = chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)));
            let _ = chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())));
            entries.push((policy.clone(), color));
        }
        legend(&side, &entries, false);
        let _ = whole.present();
    }
    svg
}

/// `x` as a whole number (`3`), or nothing when it is not one: an axis of counts labels no fractions.
fn whole_number(x: f64) -> String {
    if (x - x.round()).abs() < 1e-6 {
        format!("{}", x.round() as i64)
    } else {
        String::new()
    }
}

/// What a kind's report says, for the harness to write ([`Report::write`]): its plots are already in the report
/// directory.
pub struct Report {
    /// The summary, in Markdown: `summary.md`, printed after a run, and the tables of the page.
    pub summary: String,
    /// The page's head and what comes before the summary's tables (plots, notes), left open ([`html_page`]).
    pub page: String,
}

impl Report {
    /// Writes `summary.md` and `index.html` (the page, then the summary's tables) into `dir`; returns the HTML
    /// path.
    pub fn write(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let html = format!("{}{}</body></html>\n", self.page, markdown_tables_to_html(&self.summary));
        std::fs::write(dir.join("summary.md"), &self.summary)?;
        let index = dir.join("index.html");
        std::fs::write(&index, html)?;
        Ok(index)
    }
}

/// The head of a report page and its title, left open for the body; `name` and `description` are escaped.
pub(crate) fn html_page(name: &str, description: &str) -> String {
    let (name, description) = (escape(name), escape(description));
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>lockstep experiment {name}</title><style>\
         body{{font-family:sans-serif;max-width:1200px;margin:2em auto}}table{{border-collapse:collapse;margin:1em 0}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}}td.n{{text-align:right}}\
         td.failed{{color:#b00;font-weight:bold}}th{{background:#f4f4f4}}svg{{margin:4px}}</style></head><body>\
         <h1>{name}</h1><p>{description}</p>"
    )
}

/// `text` safe in HTML and SVG (XML) text and attribute values: `&`, `<`, `>` and quotes as entities, control
/// characters other than newline and tab (which XML forbids) as U+FFFD.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// One line of the summary's Markdown as HTML: escaped, then its `code` and **bold** spans as such.
fn inline(md: &str) -> String {
    let mut out = String::new();
    for (i, part) in escape(md).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            for (j, text) in part.split("**").enumerate() {
                if j % 2 == 1 {
                    let _ = write!(out, "<b>{text}</b>");
                } else {
                    out += text;
                }
            }
        }
    }
    out
}

/// Whether a table cell holds a number (`1.25`, `+3.1 %`, `0.59x`, `1.00–1.20`, `12 ± 3`): right-aligned.
fn numeric(cell: &str) -> bool {
    let plain = cell.trim_matches('*');
    plain.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-' || c == '−' || c == '≤')
        && plain.chars().any(|c| c.is_ascii_digit())
        && plain.chars().all(|c| c.is_ascii_digit() || " .,+-−–±%x×≤()/µs".contains(c))
}

/// The summary's Markdown as HTML: its tables as tables (the first row a header, text left and numbers right, a
/// `FAILED` cell marked), headings, bullet lists and paragraphs; everything escaped.
fn markdown_tables_to_html(md: &str) -> String {
    let mut out = String::new();
    // What is open: 0 nothing, 1 a table (its header row written), 2 a list.
    let mut open = 0;
    let close = |out: &mut String, open: &mut u8| {
        match open {
            1 => *out += "</table>",
            2 => *out += "</ul>",
            _ => {}
        }
        *open = 0;
    };
    let mut header = false;
    for line in md.lines() {
        if line.starts_with('|') {
            if line.starts_with("|---") {
                continue;
            }
            if open != 1 {
                close(&mut out, &mut open);
                out += "<table>";
                open = 1;
                header = true;
            }
            out += "<tr>";
            for cell in line.trim().trim_matches('|').split('|') {
                let cell = cell.trim();
                let tag = if header { "th" } else { "td" };
                let class = if header {
                    ""
                } else if cell.contains("FAILED") {
                    " class=\"failed\""
                } else if numeric(cell) {
                    " class=\"n\""
                } else {
                    ""
                };
                let _ = write!(out, "<{tag}{class}>{}</{tag}>", inline(cell));
            }
            out += "</tr>";
            header = false;
        } else if let Some(item) = line.strip_prefix("- ") {
            if open != 2 {
                close(&mut out, &mut open);
                out += "<ul>";
                open = 2;
            }
            let _ = write!(out, "<li>{}</li>", inline(item));
        } else {
            close(&mut out, &mut open);
            if let Some(h) = line.strip_prefix("### ") {
                let _ = write!(out, "<h4>{}</h4>", inline(h));
            } else if let Some(h) = line.strip_prefix("## ") {
                let _ = write!(out, "<h3>{}</h3>", inline(h));
            } else if !line.is_empty() && !line.starts_with("# ") {
                let _ = write!(out, "<p>{}</p>", inline(line));
            }
        }
    }
    close(&mut out, &mut open);
    out
}

#[cfg(test)]
mod tests {
    use super::{chart, html_page, markdown_tables_to_html};
    use crate::harness::plot::series_colour;
    use std::collections::BTreeMap;

    #[test]
    fn a_policy_has_one_colour_in_every_chart() {
        let known = ["cfs", "boost", "gang", "auto", "dcs", "dcs+boost", "slurm-gang"];
        let colours: Vec<_> = known.iter().map(|p| series_colour(p)).collect();
        for (i, c) in colours.iter().enumerate() {
            assert!(!colours[..i].contains(c), "{} shares its colour", known[i]);
        }
        assert_eq!(series_colour("gang/200ms"), series_colour("gang/200ms"));
        assert_ne!(series_colour("gang/200ms"), series_colour("gang"));
        assert_eq!(series_colour("some-new-lock"), series_colour("some-new-lock"));
        // Whatever else a chart holds, and in whatever order, cfs is drawn in cfs's colour.
        let hex = |c: plotters::style::RGBColor| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
        for others in [vec!["auto"], vec!["boost", "gang", "auto"]] {
            let mut series = BTreeMap::new();
            for name in others.iter().chain(&["cfs"]) {
                series.insert((*name).to_string(), vec![(1, 1.0), (2, 2.0)]);
            }
            let svg = chart("t", "x", "y", &series);
            for name in others.iter().chain(&["cfs"]) {
                assert!(svg.contains(&hex(series_colour(name))), "{name} not in its colour: {svg}");
            }
        }
    }

    #[test]
    fn the_page_escapes_what_it_pastes_and_renders_tables_as_tables() {
        let page = html_page("<script>alert(1)</script>", "a & b \"quoted\"");
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("<h1>&lt;script&gt;alert(1)&lt;/script&gt;</h1>"), "{page}");
        assert!(page.contains("a &amp; b &quot;quoted&quot;"), "{page}");
        let md = "## Policies\n\nMPI progress `busy`, **bold**.\n\n| policy | mix | slowdown |\n|---|---|---|\n\
                  | cfs | lu+<b> | 1.25 |\n| gang/200ms | lu+ep | FAILED |\n\n- under cfs: 1.25x\n- under gang: -\n";
        let html = markdown_tables_to_html(md);
        assert!(html.contains("<h3>Policies</h3>"), "{html}");
        assert!(html.contains("<p>MPI progress <code>busy</code>, <b>bold</b>.</p>"), "{html}");
        assert!(html.contains("<tr><th>policy</th><th>mix</th><th>slowdown</th></tr>"), "{html}");
        assert!(html.contains("<tr><td>cfs</td><td>lu+&lt;b&gt;</td><td class=\"n\">1.25</td></tr>"), "{html}");
        assert!(html.contains("<td class=\"failed\">FAILED</td>"), "{html}");
        assert!(html.contains("<ul><li>under cfs: 1.25x</li><li>under gang: -</li></ul>"), "{html}");
        assert!(!html.contains('`') && !html.contains("- under") && !html.contains('|'), "{html}");
    }
}
