//! What made a slot switch late: the loop notes how long each piece of its work took, and a switch that begins
//! more than a tenth of a slot after its boundary says, in the log, the longest of them since the switch before
//! (or that none was that long: the kernel did not run the loop on time). How late switches are is in the status
//! and `/metrics` (the lateness histogram); this says why, at most once every [`SAY_EVERY`].

use std::time::{Duration, Instant};

/// How often at most a late switch is said; those in between are counted in the next that is.
const SAY_EVERY: Duration = Duration::from_secs(10);

/// The loop's work since its last switch, and when it last said a switch was late.
#[derive(Default)]
pub(super) struct Lag {
    /// The longest piece of work since the last switch: what it was, and how long it took.
    busiest: Option<(&'static str, Duration)>,
    /// When a late switch was last said.
    said: Option<Instant>,
    /// Late switches not said since then.
    unsaid: u64,
}

impl Lag {
    /// Notes that the loop spent `took` on `what`.
    pub(super) fn note(&mut self, what: &'static str, took: Duration) {
        if self.busiest.is_none_or(|(_, longest)| took > longest) {
            self.busiest = Some((what, took));
        }
    }

    /// Notes that the switch of slot `k` (slots of `length`) began `late` after its boundary, saying so when it
    /// was more than a tenth of a slot; starts noting the work before the next switch afresh.
    pub(super) fn switched(&mut self, k: u64, late: Duration, length: Duration) {
        let busiest = self.busiest.take();
        if late <= length / 10 {
            return;
        }
        if self.said.is_some_and(|at| at.elapsed() < SAY_EVERY) {
            self.unsaid += 1;
            return;
        }
        log::warn!("{}", why(k, late, busiest, self.unsaid));
        self.said = Some(Instant::now());
        self.unsaid = 0;
    }
}

/// The line that says slot `k` began `late`, with the loop's longest work before it and the late switches not said
/// since the last line.
fn why(k: u64, late: Duration, busiest: Option<(&'static str, Duration)>, unsaid: u64) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let held = match busiest {
        Some((what, took)) if took >= late => format!("the loop was busy {:.1} ms with {what}", ms(took)),
        Some((what, took)) => format!(
            "the loop's longest work since the switch before was {what} ({:.1} ms): the kernel did not run it on time",
            ms(took)
        ),
        None => "the loop did no work since the switch before: the kernel did not run it on time".to_string(),
    };
    let more = if unsaid > 0 { format!(" ({unsaid} more late switches since the last said)") } else { String::new() };
    format!("slot {k} switched {:.1} ms after its boundary: {held}{more}", ms(late))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_switch_names_the_longest_work_or_says_the_loop_was_not_run() {
        let ms = Duration::from_millis;
        let mut lag = Lag::default();
        lag.note("the watchdog's beat", ms(1));
        lag.note("a policy change", ms(60));
        lag.note("the watchdog's beat", ms(2));
        assert_eq!(lag.busiest, Some(("a policy change", ms(60))));
        assert_eq!(
            why(7, ms(55), lag.busiest, 0),
            "slot 7 switched 55.0 ms after its boundary: the loop was busy 60.0 ms with a policy change"
        );
        assert_eq!(
            why(7, ms(80), lag.busiest, 3),
            "slot 7 switched 80.0 ms after its boundary: the loop's longest work since the switch before was a \
             policy change (60.0 ms): the kernel did not run it on time (3 more late switches since the last said)"
        );
        // A switch starts the noting afresh; a late one is said at most every SAY_EVERY.
        lag.switched(7, ms(55), ms(100));
        assert_eq!((lag.busiest, lag.unsaid), (None, 0));
        assert!(lag.said.is_some());
        lag.switched(8, ms(55), ms(100));
        lag.switched(9, ms(5), ms(100));
        assert_eq!(lag.unsaid, 1, "one late switch within SAY_EVERY, one on time");
    }
}
