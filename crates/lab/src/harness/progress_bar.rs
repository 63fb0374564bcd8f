//! The progress bar every kind shows while its cases run.

use indicatif::{ProgressBar, ProgressStyle};

/// The progress bar of an experiment run: elapsed time, bar, cases done, the current case.
pub fn progress_bar(cases: usize) -> ProgressBar {
    let bar = ProgressBar::new(cases as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}
