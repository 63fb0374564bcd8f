//! What every chart of every report shares: one colour per policy and per lock, and the legend beside the plot.

use plotters::prelude::*;

/// The colour of each policy and lock lockstep has, in every chart of every report (Okabe and Ito's palette for
/// colour-blind readers first): a reader comparing charts follows one colour.
const COLOURS: &[(&str, (u8, u8, u8))] = &[
    ("cfs", (0, 0, 0)),
    ("boost", (230, 159, 0)),
    ("gang", (0, 114, 178)),
    ("auto", (0, 158, 115)),
    ("dcs", (204, 121, 167)),
    ("dcs+boost", (213, 94, 0)),
    ("slurm-gang", (86, 180, 233)),
    ("dedicated", (153, 153, 153)),
    ("p-only", (0, 114, 178)),
    ("mixed", (0, 158, 115)),
    ("e-only", (230, 159, 0)),
    ("pthread", (0, 0, 0)),
    ("ttas", (230, 159, 0)),
    ("ticket", (86, 180, 233)),
    ("mcs", (0, 114, 178)),
    ("cna", (0, 158, 115)),
    ("mcs-pt", (140, 86, 75)),
    ("cna-pt", (204, 121, 167)),
    ("shfl", (213, 94, 0)),
];

/// The colour of series `name` in every chart: its policy's or lock's (the name before any `/slot` or `:raise`),
/// made darker by an amount fixed by the rest of the name (`gang/200ms` and `gang/2s` differ, each the same
/// everywhere); a name outside [`COLOURS`] gets a colour fixed by its text.
pub(crate) fn series_colour(name: &str) -> RGBColor {
    let base = name.split(['/', ':']).next().unwrap_or(name);
    // FNV-1a: the same bytes give the same colour in every report, on every machine.
    let hash = |text: &str| {
        text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    };
    let (r, g, b) = COLOURS.iter().find(|(n, _)| *n == base).map_or_else(
        || {
            let c = Palette99::pick(hash(base) as usize % 99).to_rgba();
            (c.0, c.1, c.2)
        },
        |(_, rgb)| *rgb,
    );
    let rest = &name[base.len()..];
    if rest.is_empty() {
        return RGBColor(r, g, b);
    }
    let keep = 0.55 + 0.35 * (hash(rest) % 100) as f64 / 100.0;
    let dim = |v: u8| (f64::from(v) * keep) as u8 + if v == 0 { (60.0 * (1.0 - keep)) as u8 } else { 0 };
    RGBColor(dim(r), dim(g), dim(b))
}

/// Width of the legend beside a chart: the legend never covers the data.
pub(crate) const LEGEND_WIDTH: u32 = 170;

/// Draws the legend of `entries` (name, colour) in `area`, beside the chart: a line, or a box for bars.
pub(crate) fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    entries: &[(String, RGBColor)],
    boxes: bool,
) {
    for (i, (name, colour)) in entries.iter().enumerate() {
        let y = 40 + 20 * i as i32;
        let _ = if boxes {
            area.draw(&Rectangle::new([(6, y - 5), (18, y + 5)], colour.filled()))
        } else {
            area.draw(&PathElement::new(vec![(2, y), (20, y)], colour.stroke_width(2)))
        };
        let _ = area.draw(&Text::new(name.clone(), (26, y - 7), ("sans-serif", 13)));
    }
}
