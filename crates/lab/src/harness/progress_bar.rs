//! The progress every kind shows while its cases run: on a terminal a bar with the time left; otherwise (a log, a
//! pipe, CI) one line per finished case with its time and the time left, so that a long experiment says how far
//! it is before it ends.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// The progress of an experiment's run: [`CaseProgress::start`] each case, [`CaseProgress::done`] when it ends.
pub struct CaseProgress {
    /// The bar, on a terminal; `None`: lines on stdout.
    bar: Option<ProgressBar>,
    total: usize,
    finished: usize,
    began: Instant,
    /// The case running now and when it started.
    current: Option<(String, Instant)>,
}

impl CaseProgress {
    /// The progress of `cases` cases: a bar when stdout is a terminal, lines otherwise.
    pub fn new(cases: usize) -> Self {
        let bar = std::io::stdout().is_terminal().then(|| {
            let bar = ProgressBar::new(cases as u64);
            bar.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} (ETA {eta}) {msg}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            bar
        });
        Self { bar, total: cases, finished: 0, began: Instant::now(), current: None }
    }

    /// Case `what` (`cfs ep+cg rep 1`) starts.
    pub fn start(&mut self, what: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(what.clone());
        }
        self.current = Some((what, Instant::now()));
    }

    /// The case started last ended; `failed`: one of its jobs failed.
    pub fn done(&mut self, failed: bool) {
        self.finished += 1;
        let Some((what, since)) = self.current.take() else { return };
        if let Some(bar) = &self.bar {
            bar.inc(1);
            return;
        }
        let left = self.total.saturating_sub(self.finished);
        let eta = if left == 0 {
            String::new()
        } else {
            let per_case = self.began.elapsed().as_secs_f64() / self.finished as f64;
            format!(" (ETA {})", eta_text(Duration::from_secs_f64(per_case * left as f64)))
        };
        let width = self.total.to_string().len();
        println!(
            "[{:>width$}/{}] {what}: {:.1} s{}{eta}",
            self.finished,
            self.total,
            since.elapsed().as_secs_f64(),
            if failed { ", FAILED" } else { "" }
        );
    }

    /// Every case ran: the bar goes.
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A time left in words a reader takes in at a glance: `45 s`, `4 min 10 s`, `2 h 5 min`.
fn eta_text(left: Duration) -> String {
    let s = left.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::eta_text;
    use std::time::Duration;

    #[test]
    fn time_left_reads_in_the_largest_units() {
        assert_eq!(eta_text(Duration::from_secs(45)), "45 s");
        assert_eq!(eta_text(Duration::from_secs(250)), "4 min 10 s");
        assert_eq!(eta_text(Duration::from_mins(125)), "2 h 5 min");
    }
}
