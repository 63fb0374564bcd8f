//! What every kind's report shares: the HTML page and its Markdown tables, the files written, and line charts
//! whose series keep one colour per policy and lock across every report.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::plot::{legend, series_colour, LEGEND_WIDTH};
use lockstep_core::error::UsageError;

/// `runs`, or a usage error when experiment `name` has none in the store.
pub fn some_runs<T>(name: &str, runs: Vec<T>) -> Result<Vec<T>, UsageError> {
    if runs.is_empty() {
        return Err(UsageError::new(format!("experiment {name:?} has no runs in the store")));
    }
    Ok(runs)
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
        let _ = chart.configure_mesh().x_desc(x_label).y_desc(y_label).x_labels(x1 as usize).draw();
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

/// Writes `summary.md` and `index.html` (the page begun in `html`, then the summary's tables) into `dir`;
/// returns the HTML path.
pub(crate) fn write_files(dir: &Path, md: &str, mut html: String) -> anyhow::Result<PathBuf> {
    html += &markdown_tables_to_html(md);
    html += "</body></html>\n";
    std::fs::write(dir.join("summary.md"), md)?;
    let index = dir.join("index.html");
    std::fs::write(&index, html)?;
    Ok(index)
}

/// The head of a report page and its title, left open for the body.
pub(crate) fn html_page(name: &str, description: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>lockstep experiment {name}</title><style>\
         body{{font-family:sans-serif;max-width:1200px;margin:2em auto}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}svg{{margin:4px}}</style></head><body>\
         <h1>{name}</h1><p>{description}</p>"
    )
}

/// The Markdown tables of the summary as HTML tables (the rest of the Markdown as paragraphs).
fn markdown_tables_to_html(md: &str) -> String {
    let mut out = String::new();
    let mut in_table = false;
    for line in md.lines() {
        if line.starts_with('|') {
            if line.starts_with("|---") {
                continue;
            }
            if !in_table {
                out += "<table>";
                in_table = true;
            }
            out += "<tr>";
            for cell in line.trim_matches('|').split('|') {
                let _ = write!(out, "<td>{}</td>", cell.trim());
            }
            out += "</tr>";
        } else {
            if in_table {
                out += "</table>";
                in_table = false;
            }
            if let Some(h) = line.strip_prefix("## ") {
                let _ = write!(out, "<h3>{h}</h3>");
            } else if !line.is_empty() && !line.starts_with("# ") {
                let _ = write!(out, "<p>{line}</p>");
            }
        }
    }
    if in_table {
        out += "</table>";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::chart;
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
}
