//! How many CPUs a job wants: its ranks' runnable time (on a CPU, or waiting for one) per unit of time, as the
//! eBPF program integrates it (crate::together), or the CPU time its cgroups had per unit of time where that is
//! more (threads that are not ranks: OpenMP workers, or a job that hides its work from the rank count), over the
//! last slot in which the agent held the job unfrozen throughout. A frozen rank is asleep, so a slot the job spent
//! frozen, even in part, says nothing of what it wants and is not measured. A job whose ranks are not measured, or
//! one of whose cgroups says no CPU time, has no demand known: `gang` slices only jobs whose demands are known and,
//! summed, exceed the PUs they share (lockstep_core::cosched::sharing).

use crate::together::Reading;

/// The shortest interval measured: a replan just after a boundary leaves too little time to rate.
const MIN_INTERVAL_NS: u64 = 20_000_000;

/// A job's demand as last measured, and the interval being measured now.
#[derive(Clone, Copy, Debug, Default)]
pub struct Demand {
    /// CPUs wanted over the last slot measured; `None` until one is, or where the job's ranks are not measured.
    pub wanted: Option<f64>,
    /// Where the slot being measured began.
    start: Option<Mark>,
}

/// What a job had had at the start of a slot, and whether it was frozen at some time since.
#[derive(Clone, Copy, Debug)]
struct Mark {
    reading: Reading,
    cpu_ns: u64,
    frozen: bool,
}

impl Demand {
    /// Takes the job's state after a tick's switch: `reading` what the eBPF program measured of its ranks until now
    /// (`None` where it does not measure them), `cpu_ns` the CPU time of its cgroups until now,
    /// `frozen` whether the job is frozen now, `boundary` whether the tick began a slot (which ends the slot being
    /// measured and begins the next).
    pub fn observe(&mut self, reading: Option<Reading>, cpu_ns: Option<u64>, frozen: bool, boundary: bool) {
        let (Some(reading), Some(cpu_ns)) = (reading.filter(|r| r.ranks > 0), cpu_ns) else {
            *self = Self::default();
            return;
        };
        match &mut self.start {
            Some(mark) if !boundary => mark.frozen |= frozen,
            _ => {
                if let Some(start) = self.start.filter(|m| !m.frozen) {
                    let span = reading.span.saturating_sub(start.reading.span);
                    if span >= MIN_INTERVAL_NS {
                        let ranks = reading.runnable.saturating_sub(start.reading.runnable);
                        let cpu = cpu_ns.saturating_sub(start.cpu_ns);
                        self.wanted = Some(ranks.max(cpu) as f64 / span as f64);
                    }
                }
                self.start = Some(Mark { reading, cpu_ns, frozen });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn at(span_ms: u64, runnable_ms: u64) -> Reading {
        Reading { span: span_ms * MS, runnable: runnable_ms * MS, ranks: 2, ..Reading::default() }
    }

    #[test]
    fn only_a_slot_held_unfrozen_throughout_is_measured() {
        let mut d = Demand::default();
        d.observe(Some(at(0, 0)), Some(0), false, true);
        assert_eq!(d.wanted, None);
        // 200 ms in which two ranks were runnable 300 ms between them: 1.5 CPUs.
        d.observe(Some(at(200, 300)), Some(250 * MS), true, true);
        assert_eq!(d.wanted, Some(1.5));
        // Frozen at its start: not measured, the last stands.
        d.observe(Some(at(400, 300)), Some(250 * MS), false, true);
        assert_eq!(d.wanted, Some(1.5));
        // Frozen by a replan within the slot: not measured either.
        d.observe(Some(at(450, 350)), Some(300 * MS), true, false);
        d.observe(Some(at(600, 400)), Some(350 * MS), false, true);
        assert_eq!(d.wanted, Some(1.5));
        d.observe(Some(at(800, 800)), Some(700 * MS), false, true);
        assert_eq!(d.wanted, Some(2.0));
        // Threads that are no ranks ran: the CPU time says more than the ranks.
        d.observe(Some(at(1000, 800)), Some(1100 * MS), false, true);
        assert_eq!(d.wanted, Some(2.0));
        // Ranks no longer measured, or no CPU time: nothing known.
        d.observe(None, Some(1100 * MS), false, true);
        assert_eq!(d.wanted, None);
        d.observe(Some(at(1100, 900)), Some(1200 * MS), false, true);
        d.observe(Some(at(1300, 1100)), None, false, true);
        assert_eq!(d.wanted, None);
        d.observe(Some(Reading { ranks: 0, ..Reading::default() }), Some(0), false, true);
        d.observe(Some(at(1500, 1300)), Some(1300 * MS), false, true);
        assert_eq!(d.wanted, None);
    }
}
