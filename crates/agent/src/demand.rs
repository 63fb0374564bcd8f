//! How many CPUs a job wants: its ranks' runnable time (on a CPU, or waiting for one) per unit of time, as the
//! eBPF program integrates it (crate::together), over the last slot in which the agent held the job unfrozen
//! throughout. A frozen rank is asleep, so a slot the job spent frozen, even in part, says nothing of what it
//! wants and is not measured. The job's cgroups' CPU time over the same slot checks it: where that is more than
//! the ranks ran (threads that are not ranks — OpenMP workers, or a job that hides its work from the rank count),
//! what those threads want is not seen, and the demand is not known. A job whose demand is not known is taken to
//! want every PU it has: `gang` slices only jobs whose demands, so taken, summed exceed the PUs they share
//! (lockstep_core::cosched::sharing). A job just found is starting until a slot of it is first read unfrozen (its
//! demand then measured, or found not measurable: threads other than its ranks worked), for at most [`STARTING`]
//! where its ranks were registered within [`UNSEEN`] of it being found, and [`UNSEEN`] where they were not: `gang`
//! runs it in every slot meanwhile (lockstep_core::cosched::gang), so that a job whose work hides from the rank count
//! gets that for one slot, not for [`STARTING`].

use std::time::{Duration, Instant};

use crate::together::Reading;

/// The longest a job found counts as starting while its demand is not measured: a launcher starts its ranks and
/// they pass `MPI_Init` in a second or two here (is class B, 2 ranks, under `gang`: its demand first measured
/// 1.3–1.4 s after it was found, frozen in two slots of three meanwhile); a job whose ranks the agent cannot
/// measure is sliced once this is over.
pub const STARTING: Duration = Duration::from_secs(3);

/// The longest a job found counts as starting while none of its ranks is seen by the eBPF program (a launcher still
/// starting them, or ranks the agent does not measure: a Slurm job whose steps' ranks it does not see, a node
/// without the program). Seen on tests/cluster (Slurm 22.05, the agent's sample interval of 1 s): a two-node job of
/// lu class W lasted 2 s, never measured, and was never sliced while the wait was 3 s. In the lab (sample interval
/// 200 ms) is's demand was measured 0.3–1.1 s after it was found, so its ranks were seen before that.
pub const UNSEEN: Duration = Duration::from_secs(1);

/// The shortest slot measured: slots of 10–20 ms are allowed, and over less than this the reads' own skew counts.
const MIN_INTERVAL_NS: u64 = 20_000_000;

/// CPU time beyond the ranks' running time (CPUs) that still counts as the ranks': an MPI library's progress
/// thread, the agent's own reads.
const OTHER_THREADS: f64 = 0.1;

/// A job's demand as last measured, and the slot being measured now.
#[derive(Clone, Copy, Debug, Default)]
pub struct Demand {
    /// CPUs wanted over the last slot measured; `None` until one is, where the job's ranks or CPU time are not
    /// measured, or where its CPU time says threads other than its ranks worked.
    pub wanted: Option<f64>,
    /// Where the slot being measured began.
    start: Option<Mark>,
    /// When the job was found, and whether its ranks were registered within [`UNSEEN`] of that, until a slot of it
    /// is first read unfrozen.
    starting: Option<(Instant, bool)>,
}

/// What a job had had at the start of a slot, and whether it was frozen at some time since.
#[derive(Clone, Copy, Debug)]
struct Mark {
    reading: Reading,
    cpu_ns: u64,
    frozen: bool,
}

impl Demand {
    /// The demand of a job just found: not measured, and the job starting.
    pub fn found() -> Self {
        Self { starting: Some((Instant::now(), false)), ..Self::default() }
    }

    /// Whether the job is starting: no slot of it read unfrozen since it was found, less than [`STARTING`] ago where
    /// its ranks were registered within [`UNSEEN`] of that, less than [`UNSEEN`] ago where they were not.
    pub fn starting(&self) -> bool {
        self.starting.is_some_and(|(found, seen)| found.elapsed() < if seen { STARTING } else { UNSEEN })
    }

    /// At a slot boundary, before the slot is planned: ends the slot being measured and begins the next. `reading`
    /// is what the eBPF program measured of the job's ranks until now (`None` where it does not measure them),
    /// `cpu_ns` the CPU time of its cgroups until now (`None` where they keep none).
    pub fn boundary(&mut self, reading: Option<Reading>, cpu_ns: Option<u64>) {
        let (Some(reading), Some(cpu_ns)) = (reading.filter(|r| r.ranks > 0), cpu_ns) else {
            // Its ranks not seen yet (a launcher still starting them) leave a starting job starting.
            *self = Self { starting: self.starting, ..Self::default() };
            return;
        };
        // Ranks first registered [`UNSEEN`] or more after the job was found (a late sample) do not make it start
        // again: it may have been sliced since. When they were registered, not this boundary, counts: a slot may
        // be longer than that second.
        let registered_late =
            |found: Instant| found.elapsed().saturating_sub(Duration::from_nanos(reading.span)) >= UNSEEN;
        self.starting =
            self.starting.filter(|&(found, seen)| seen || !registered_late(found)).map(|(found, _)| (found, true));
        if let Some(start) = self.start.filter(|m| !m.frozen) {
            let span = reading.span.saturating_sub(start.reading.span);
            if span >= MIN_INTERVAL_NS {
                let ranks = reading.runnable.saturating_sub(start.reading.runnable) as f64 / span as f64;
                let cpu = cpu_ns.saturating_sub(start.cpu_ns) as f64 / span as f64;
                // CPU time past what the runnable ranks could have used: other threads worked.
                self.wanted = (cpu <= ranks + OTHER_THREADS).then_some(ranks);
                // Read over a slot unfrozen throughout, its demand is measured or known not to be measurable (a
                // job whose work is in threads that are not ranks): either way it has started, and from now on runs
                // in every slot only where it leaves room.
                self.starting = None;
            }
        }
        self.start = Some(Mark { reading, cpu_ns, frozen: false });
    }

    /// After every switch (at a boundary and at a replan within the slot): whether the job is held frozen now,
    /// which makes the slot being measured say nothing.
    pub fn held(&mut self, frozen: bool) {
        if let Some(mark) = &mut self.start {
            mark.frozen |= frozen;
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
    fn a_job_found_is_starting_until_its_demand_is_measured_its_ranks_unseen_or_not() {
        let mut d = Demand::found();
        assert!(d.starting());
        // Its launcher has not started its ranks yet: still starting.
        d.boundary(None, Some(0));
        d.boundary(Some(at(0, 0)), Some(0));
        assert!(d.starting());
        d.boundary(Some(at(200, 220)), Some(200 * MS));
        assert_eq!(d.wanted, Some(1.1));
        assert!(!d.starting());
        // Measured once, it is not starting again when its ranks go unseen.
        d.boundary(None, Some(200 * MS));
        assert!(!d.starting() && d.wanted.is_none());
        // A job restored, or measured again from scratch, is not starting; nor is one found too long ago.
        assert!(!Demand::default().starting());
        let old = Demand { starting: Some((Instant::now().checked_sub(STARTING).unwrap(), true)), ..Demand::default() };
        assert!(!old.starting());
        // Its ranks never seen: starting for a second only.
        let unseen =
            Demand { starting: Some((Instant::now().checked_sub(UNSEEN).unwrap(), false)), ..Demand::default() };
        assert!(!unseen.starting());
        let seen = Demand { starting: Some((Instant::now().checked_sub(UNSEEN).unwrap(), true)), ..Demand::default() };
        assert!(seen.starting());
        // Its ranks first registered after that second: it does not start again.
        let mut late = unseen;
        late.boundary(Some(at(0, 0)), Some(0));
        assert!(!late.starting());
        // Registered within the second, though first read at a boundary after it (a long slot): starting.
        let mut long_slot = unseen;
        long_slot.boundary(Some(at(500, 0)), Some(0));
        assert!(long_slot.starting());
        // A slot read unfrozen in which threads other than its ranks worked: not measurable, and no longer starting.
        let mut hidden = Demand::found();
        hidden.boundary(Some(at(0, 0)), Some(0));
        hidden.boundary(Some(at(200, 0)), Some(400 * MS));
        assert!(hidden.wanted.is_none() && !hidden.starting());
        // Seen within the second, it stays starting once that second is over.
        let mut early = Demand::found();
        early.boundary(Some(at(0, 0)), Some(0));
        early.starting = early.starting.map(|(found, seen)| (found.checked_sub(UNSEEN).unwrap(), seen));
        early.boundary(Some(at(0, 0)), Some(0));
        assert!(early.starting());
    }

    #[test]
    fn only_a_slot_held_unfrozen_throughout_and_run_by_its_ranks_is_measured() {
        let mut d = Demand::default();
        d.boundary(Some(at(0, 0)), Some(0));
        d.held(false);
        assert_eq!(d.wanted, None);
        // 200 ms in which two ranks were runnable 300 ms between them: 1.5 CPUs.
        d.boundary(Some(at(200, 300)), Some(250 * MS));
        assert_eq!(d.wanted, Some(1.5));
        // Frozen from its start: not measured, the last stands.
        d.held(true);
        d.boundary(Some(at(400, 300)), Some(250 * MS));
        assert_eq!(d.wanted, Some(1.5));
        // Frozen by a replan within the slot: not measured either.
        d.held(false);
        d.held(true);
        d.boundary(Some(at(600, 400)), Some(350 * MS));
        assert_eq!(d.wanted, Some(1.5));
        d.held(false);
        d.boundary(Some(at(800, 800)), Some(700 * MS));
        assert_eq!(d.wanted, Some(2.0));
        // Threads that are not ranks ran (2 CPUs of time where the ranks wanted 1): what they want is not seen.
        d.boundary(Some(at(1000, 1000)), Some(1100 * MS));
        assert_eq!(d.wanted, None);
        d.boundary(Some(at(1200, 1200)), Some(1300 * MS));
        assert_eq!(d.wanted, Some(1.0));
        // Ranks no longer measured, or no CPU time: nothing known.
        d.boundary(None, Some(1300 * MS));
        assert_eq!(d.wanted, None);
        d.boundary(Some(at(1300, 1300)), Some(1400 * MS));
        d.boundary(Some(at(1400, 1400)), None);
        assert_eq!(d.wanted, None);
        // Slots too short to rate are not measured.
        d.boundary(Some(at(1500, 1500)), Some(1500 * MS));
        d.boundary(Some(at(1510, 1510)), Some(1510 * MS));
        assert_eq!(d.wanted, None);
    }
}
