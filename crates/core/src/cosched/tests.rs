//! The co-scheduling policies' tests: every policy's plan, row assignment and slots, against the papers' rules.

use std::time::Duration;

use super::rows::{assign, Entry};
use super::{slot, Desired, JobView, PolicySpec, Raise, POLICIES};
use crate::cpulist::CpuList;
use crate::ident::JobKey;

fn pus(s: &str) -> CpuList {
    CpuList::parse(s).unwrap()
}

/// Job `name` as the planners take it (leaked: a test's few jobs live as long as the test).
fn key(name: &str) -> &'static JobKey {
    Box::leak(Box::new(name.parse().unwrap()))
}

/// A job of row `row` of two, in a slot whose active row is 0.
fn view<'a>(name: &str, row: u32, pus: &'a CpuList) -> JobView<'a> {
    JobView { name: key(name), favoured: row == 0, round: 2, pus, demand: None, starting: false }
}

/// The same jobs one slot later (row 1 active).
fn next<'a>(jobs: &[JobView<'a>]) -> Vec<JobView<'a>> {
    jobs.iter().map(|j| JobView { favoured: !j.favoured, ..*j }).collect()
}

#[test]
fn sharing_jobs_get_different_rows_and_loners_row_zero() {
    let (a, b, c) = (pus("0-1"), pus("1-2"), pus("3"));
    let entries = [
        Entry { name: key("a"), pus: &a, pinned: None },
        Entry { name: key("b"), pus: &b, pinned: None },
        Entry { name: key("c"), pus: &c, pinned: None },
    ];
    let (rows, count) = assign(&entries);
    assert_ne!(rows[0], rows[1]);
    assert_eq!(rows[2], 0);
    assert_eq!(count, 2);
}

#[test]
fn pinned_rows_are_kept_and_others_avoid_them() {
    let all = pus("0-1");
    let entries = [
        Entry { name: key("x"), pus: &all, pinned: Some(1) },
        Entry { name: key("y"), pus: &all, pinned: None },
        Entry { name: key("z"), pus: &all, pinned: None },
    ];
    let (rows, count) = assign(&entries);
    assert_eq!(rows[0], 1);
    assert!(!rows[1..].contains(&1));
    assert_ne!(rows[1], rows[2]);
    assert_eq!(count, 3);
}

#[test]
fn rows_do_not_depend_on_input_order() {
    let all = pus("0-1");
    let names = ["lu-1", "ep-2", "is-3"];
    let forward: Vec<Entry> = names.iter().map(|n| Entry { name: key(n), pus: &all, pinned: None }).collect();
    let backward: Vec<Entry> = names.iter().rev().map(|n| Entry { name: key(n), pus: &all, pinned: None }).collect();
    let (f, _) = assign(&forward);
    let (mut b, _) = assign(&backward);
    b.reverse();
    assert_eq!(f, b);
}

#[test]
fn gang_freezes_only_jobs_sharing_pus_with_the_active_row() {
    let (a, b, c) = (pus("0-1"), pus("0-1"), pus("2-3"));
    let jobs = [view("j", 0, &a), view("j", 1, &b), view("j", 1, &c)];
    let gang = by_name("gang").build();
    let plan = gang.plan(&jobs);
    assert_eq!(plan.iter().map(|d| d.frozen).collect::<Vec<_>>(), [false, true, false]);
    let plan = gang.plan(&next(&jobs));
    assert_eq!(plan.iter().map(|d| d.frozen).collect::<Vec<_>>(), [true, false, false]);
}

/// The jobs `jobs` with the demands `wants`, in order.
fn wanting<'a>(jobs: &[JobView<'a>], wants: &[Option<f64>]) -> Vec<JobView<'a>> {
    jobs.iter().zip(wants).map(|(j, &demand)| JobView { demand, ..*j }).collect()
}

#[test]
fn gang_slices_only_jobs_that_want_more_cpus_than_they_share() {
    let (two, other) = (pus("0-1"), pus("2-3"));
    let jobs = [view("a", 0, &two), view("b", 1, &two), view("c", 1, &other), view("d", 0, &other)];
    let gang = by_name("gang").build();
    let frozen = |wants: &[Option<f64>]| {
        let views = wanting(&jobs, wants);
        let (now, later) = (gang.plan(&views), gang.plan(&next(&views)));
        now.iter().zip(&later).map(|(x, y)| x.frozen || y.frozen).collect::<Vec<_>>()
    };
    // One busy rank each on two shared PUs: they fit, and both run in every slot.
    assert_eq!(frozen(&[Some(1.0), Some(1.0), Some(2.0), Some(0.1)]), [false, false, false, false]);
    // A little over (the agent's own work): still one CPU each.
    assert_eq!(frozen(&[Some(1.05), Some(1.04), Some(2.0), Some(0.1)]), [false, false, false, false]);
    // Wanting more than two PUs, or one job not measured yet: sliced in turn, except that a job leaving at least
    // half a CPU of its PUs idle runs in every slot (beside the favoured job, and the other in its own).
    assert_eq!(frozen(&[Some(2.0), Some(1.6), Some(2.0), Some(0.1)]), [true, true, false, false]);
    assert_eq!(frozen(&[Some(2.0), Some(1.0), Some(2.0), Some(0.1)]), [false, false, false, false]);
    assert_eq!(frozen(&[None, Some(0.0), Some(2.0), Some(0.1)]), [false, false, false, false]);
    assert_eq!(frozen(&[None, Some(1.6), Some(2.0), Some(0.1)]), [true, true, false, false]);
    assert_eq!(frozen(&[Some(1.0), Some(1.0), Some(2.0), None]), [false, false, true, true]);
    // Jobs that share through a third: their demands count over every PU the three span.
    let (left, middle, right) = (pus("0"), pus("0-1"), pus("1"));
    let chain = [view("l", 0, &left), view("m", 1, &middle), view("r", 0, &right)];
    let fits = wanting(&chain, &[Some(1.0), Some(0.5), Some(0.5)]);
    assert!(gang.plan(&fits).iter().chain(&gang.plan(&next(&fits))).all(|d| !d.frozen));
    let over = wanting(&chain, &[Some(1.0), Some(1.6), Some(0.5)]);
    assert_eq!(gang.plan(&over).iter().map(|d| d.frozen).collect::<Vec<_>>(), [false, true, false]);
    // Two busy jobs on one PU do not fit because an idle third spans eight; the idle one is not frozen for them.
    let (one, eight) = (pus("0"), pus("0-7"));
    let crowded = [view("x", 0, &one), view("y", 1, &one), view("wide", 1, &eight)];
    let crowded = wanting(&crowded, &[Some(1.0), Some(1.0), Some(0.0)]);
    assert_eq!(gang.plan(&crowded).iter().map(|d| d.frozen).collect::<Vec<_>>(), [false, true, false]);
}

#[test]
fn gang_fills_the_room_its_favoured_jobs_leave_favouring_them_by_weight_and_a_starting_job_leaves_room() {
    let (two, other) = (pus("0-1"), pus("2-3"));
    let gang = by_name("gang").build();
    let state = |plan: Vec<Desired>| plan.iter().map(|d| (d.frozen, d.boosted)).collect::<Vec<_>>();
    // Three jobs of two busy ranks on two PUs, row 0 favoured; a fourth alone on its own PUs.
    let jobs = [view("a", 0, &two), view("b", 1, &two), view("c", 1, &two), view("d", 0, &other)];
    let busy = wanting(&jobs, &[Some(2.0), Some(2.0), Some(2.0), Some(1.0)]);
    assert_eq!(state(gang.plan(&busy)), [(false, false), (true, false), (true, false), (false, false)]);
    // The favoured job blocked (its launch, a file): the others run in its slot, and it is favoured by weight.
    let idle = wanting(&jobs, &[Some(0.3), Some(2.0), Some(2.0), Some(1.0)]);
    assert_eq!(state(gang.plan(&idle)), [(false, true), (false, false), (false, false), (false, false)]);
    // Just under the room needed: its slot is its own.
    let most = wanting(&jobs, &[Some(1.6), Some(2.0), Some(2.0), Some(1.0)]);
    assert_eq!(state(gang.plan(&most)), [(false, false), (true, false), (true, false), (false, false)]);
    // A job that leaves room (MPI_Init, I/O) is not frozen in the slot of a busy one, which is favoured by weight.
    let light = wanting(&jobs, &[Some(2.0), Some(0.4), Some(2.0), Some(1.0)]);
    assert_eq!(state(gang.plan(&light)), [(false, true), (false, false), (true, false), (false, false)]);
    // Two favoured jobs sharing PUs (rows given from outside): neither is raised beside a job that leaves room.
    let both = [view("a", 0, &two), view("e", 0, &two), view("b", 1, &two)];
    let both = wanting(&both, &[Some(1.4), Some(0.4), Some(1.0)]);
    let both: Vec<JobView> = both.iter().map(|j| JobView { favoured: j.name != key("b"), ..*j }).collect();
    assert_eq!(state(gang.plan(&both)), [(false, false), (false, false), (false, false)]);
    // A job starting leaves room until it is measured: it runs beside the favoured job, which is raised, while the
    // measured jobs are sliced as before; in its own slot the others run beside it, and it is raised.
    let mut starting = busy.clone();
    starting[1].starting = true;
    starting[1].demand = None;
    assert_eq!(state(gang.plan(&starting)), [(false, true), (false, false), (true, false), (false, false)]);
    let own: Vec<JobView> = starting.iter().map(|j| JobView { favoured: j.name == key("b"), ..*j }).collect();
    assert_eq!(state(gang.plan(&own)), [(false, false), (false, true), (false, false), (false, false)]);
}

#[test]
fn a_starting_job_runs_in_every_slot_and_freezes_no_job_that_fits() {
    fn start(j: JobView<'_>) -> JobView<'_> {
        JobView { starting: true, demand: None, ..j }
    }
    /// The jobs in the slot of row `row`, each in its row of `rows`.
    fn slot<'a>(jobs: &[JobView<'a>], rows: &[u32], row: u32) -> Vec<JobView<'a>> {
        let round = rows.iter().max().map_or(1, |r| r + 1);
        jobs.iter().zip(rows).map(|(j, &r)| JobView { favoured: r == row, round, ..*j }).collect()
    }
    let (lo, mid, hi, far) = (pus("0-1"), pus("1-2"), pus("2-3"), pus("4-5"));
    let gang = by_name("gang").build();
    let state = |plan: Vec<Desired>| plan.iter().map(|d| (d.frozen, d.boosted)).collect::<Vec<_>>();
    let (run, raised, frozen) = ((false, false), (false, true), (true, false));
    // X on PUs 0–1 and Y on 1–2 fit the 3 PUs they span; Z starting on 2–3 makes them contend by no measure of
    // theirs. In X's (and Z's) slot none is frozen or raised; in Y's, Z runs beside Y, which is raised.
    let fit = wanting(&[view("x", 0, &lo), view("y", 1, &mid), view("z", 0, &hi)], &[Some(1.52), Some(1.52), None]);
    let fit = [fit[0], fit[1], start(fit[2])];
    assert_eq!(state(gang.plan(&slot(&fit, &[0, 1, 0], 0))), [run; 3]);
    assert_eq!(state(gang.plan(&slot(&fit, &[0, 1, 0], 1))), [run, raised, run]);
    // Z starting on PUs 1–3 bridges A and B, busy on 0–1, with C and D, which fit 3–5: A and B are sliced as
    // before, C and D run in every slot; Z runs in every slot, each favoured job beside it raised, and is raised in
    // its own slot, where every other job runs.
    let (bridge, a_b, c, d) = (pus("1-3"), lo.clone(), pus("3-4"), far.clone());
    let jobs = [view("a", 0, &a_b), view("b", 1, &a_b), view("c", 0, &c), view("d", 1, &d), view("z", 2, &bridge)];
    let jobs = wanting(&jobs, &[Some(2.0), Some(2.0), Some(1.52), Some(1.52), None]);
    let jobs = [jobs[0], jobs[1], jobs[2], jobs[3], start(jobs[4])];
    let rows = [0, 1, 0, 1, 2];
    assert_eq!(state(gang.plan(&slot(&jobs, &rows, 0))), [raised, frozen, raised, run, run]);
    assert_eq!(state(gang.plan(&slot(&jobs, &rows, 1))), [frozen, raised, run, run, run]);
    assert_eq!(state(gang.plan(&slot(&jobs, &rows, 2))), [run, run, run, run, raised]);
    // Two starting jobs beside a busy favoured one: both run, and it is raised.
    let two = wanting(&[view("a", 0, &lo), view("b", 1, &lo), view("c", 2, &lo)], &[Some(2.0), None, None]);
    let two = [two[0], start(two[1]), start(two[2])];
    assert_eq!(state(gang.plan(&two)), [raised, run, run]);
    // A starting job that shares no PU changes nothing: busy jobs beside each other are sliced as before.
    let alone = wanting(&[view("a", 0, &lo), view("b", 1, &lo), view("d", 0, &far)], &[Some(2.0), Some(2.0), None]);
    let alone = [alone[0], alone[1], start(alone[2])];
    assert_eq!(state(gang.plan(&alone)), [run, frozen, run]);
    // Beside two favoured jobs: raised both where they share no PU, neither where they share one (rows given from
    // outside; never two sharing jobs raised at once).
    let apart = wanting(&[view("a", 0, &lo), view("e", 0, &hi), view("z", 1, &mid)], &[Some(2.0), Some(2.0), None]);
    let apart = [apart[0], apart[1], start(apart[2])];
    assert_eq!(state(gang.plan(&apart)), [raised, raised, run]);
    let shared = wanting(&[view("a", 0, &lo), view("e", 0, &lo), view("z", 1, &lo)], &[Some(1.0), Some(1.0), None]);
    let shared = [shared[0], shared[1], start(shared[2])];
    assert_eq!(state(gang.plan(&shared)), [run; 3]);
}

#[test]
fn boost_raises_the_active_row_and_cfs_does_nothing() {
    let a = pus("0-1");
    let jobs = [view("j", 0, &a), view("j", 1, &a)];
    let boost = by_name("boost").build().plan(&next(&jobs));
    assert_eq!(boost.iter().map(|d| d.boosted).collect::<Vec<_>>(), [false, true]);
    assert!(boost.iter().all(|d| !d.frozen));
    assert_eq!(by_name("cfs").build().plan(&jobs), vec![Desired::default(); 2]);
}

#[test]
fn slot_lengths_parse_within_range() {
    assert_eq!(slot::parse("slot", "200ms").unwrap(), Duration::from_millis(200));
    assert_eq!(slot::parse("slot", "2s").unwrap(), Duration::from_secs(2));
    assert_eq!(slot::parse("slot", "0.5s").unwrap(), Duration::from_millis(500));
    assert_eq!(slot::parse("slot", "10ms").unwrap(), slot::MIN);
    for bad in ["9ms", "61s", "2", "fast", "-1s", "nans"] {
        assert!(slot::parse("slot", bad).is_err(), "{bad}");
    }
}

#[test]
fn slots_come_from_the_wall_clock() {
    let l = Duration::from_millis(100);
    assert_eq!(slot::index(1_000_250_000_000, l), 10_002);
    assert_eq!(slot::start_ns(10_002, l), 1_000_200_000_000);
}

#[test]
fn every_policy_name_parses_and_every_policy_has_its_name() {
    for (name, spec) in POLICIES.0 {
        assert_eq!(name.parse::<PolicySpec>().unwrap(), *spec);
        assert_eq!(spec.name().parse::<PolicySpec>().unwrap(), *spec, "{name} shows as {}", spec.name());
    }
    assert_eq!(by_name("dcs").name(), "dcs:weight", "plain dcs shows its raise");
}

#[test]
fn dcs_names_parse_to_their_slot_plan_and_raise() {
    for (name, spec) in POLICIES.0.iter().filter(|(n, _)| n.starts_with("dcs")) {
        assert!(spec.raises().is_some(), "{name}");
        assert_eq!(spec.slotted(), name.starts_with("dcs+boost"), "{name}");
    }
    assert_eq!(by_name("dcs").raises(), Some(Raise::DEFAULT));
    assert_eq!(by_name("dcs:nice").raises(), Some(Raise::Nice));
    let all = pus("0-1");
    let jobs = [view("j", 0, &all), view("j", 1, &all)];
    let plain = by_name("dcs:weight").build().plan(&jobs);
    assert!(plain.iter().all(|d| *d == Desired::default()), "dcs alone plans like cfs");
    let with_boost = by_name("dcs+boost").build().plan(&next(&jobs));
    assert!(!with_boost[0].boosted && with_boost[1].boosted, "dcs+boost plans like boost");
    assert!(by_name("cfs").raises().is_none() && !by_name("cfs").slotted());
    assert!(by_name("gang").slotted() && by_name("boost").slotted());
    for bad in ["dcs:fifo", "dcs+gang", "dcs:", "round-robin"] {
        let err = bad.parse::<PolicySpec>().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("dcs+boost:nice"), "{bad}: {err}");
    }
}

fn by_name(name: &str) -> PolicySpec {
    name.parse().unwrap()
}

#[test]
fn rows_from_outside_are_bounded_and_never_make_zero_rows() {
    use super::rows::{assign, check, Entry, MAX_ROWS};
    assert!(check(Some(MAX_ROWS - 1)).is_ok() && check(None).is_ok());
    assert!(check(Some(u32::MAX)).unwrap_err().to_string().contains("out of range"));
    let all = pus("0-1");
    let entries = [
        Entry { name: key("a"), pus: &all, pinned: Some(u32::MAX) },
        Entry { name: key("b"), pus: &all, pinned: None },
    ];
    let (rows, count) = assign(&entries);
    assert!(count >= 2 && rows.iter().all(|&r| r < count), "{rows:?} of {count}");
}

#[test]
fn each_set_of_jobs_sharing_pus_cycles_through_its_own_rows() {
    use super::rows::{assign, cycles, Entry};
    // A and B share PU 0; C, D and E share PU 1; F on PUs 2-3 shares PU 2 with G, G PU 3 with H (a chain, two
    // rows); I is alone.
    let (zero, one, two3, two, three, four) = (pus("0"), pus("1"), pus("2-3"), pus("2"), pus("3"), pus("4"));
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    let on = [&zero, &zero, &one, &one, &one, &two3, &two, &three, &four];
    let entries: Vec<Entry> = names.iter().zip(on).map(|(n, p)| Entry { name: key(n), pus: p, pinned: None }).collect();
    let (rows, count) = assign(&entries);
    assert_eq!(count, 3, "{rows:?}");
    let cycle = cycles(&entries, &rows, count);
    assert_eq!(cycle, [2, 2, 3, 3, 3, 2, 2, 2, 1], "rows {rows:?}");
    // In every slot, every set has exactly one favoured job: the pair is sliced in slot 2 too (with the node's
    // cycle of three it had none then, and ran unsliced).
    for k in 0..12u32 {
        let favoured = |set: &[usize]| set.iter().filter(|&&i| rows[i] == k % cycle[i]).count();
        assert_eq!(favoured(&[0, 1]), 1, "slot {k}: rows {rows:?}");
        assert_eq!(favoured(&[2, 3, 4]), 1, "slot {k}: rows {rows:?}");
        assert_eq!(favoured(&[8]), 1, "slot {k}: rows {rows:?}");
        // The chain: F beside G and H, which share no PU and may be favoured together.
        assert!(rows[5] == k % cycle[5] || (rows[6] == k % cycle[6] && rows[7] == k % cycle[7]), "slot {k}");
    }
    // A set with a row given from outside cycles through the node's rows, which every node of the job is told
    // alike; a set without one, through its own.
    let given = [
        Entry { name: key("x"), pus: &zero, pinned: Some(1) },
        Entry { name: key("y"), pus: &zero, pinned: None },
        Entry { name: key("z"), pus: &one, pinned: Some(3) },
        Entry { name: key("w"), pus: &two, pinned: None },
        Entry { name: key("v"), pus: &two, pinned: None },
    ];
    let (rows, count) = assign(&given);
    assert_eq!((rows[0], rows[1], rows[2], count), (1, 0, 3, 4));
    assert_eq!(cycles(&given, &rows, count), [4, 4, 4, 2, 2]);
}

mod auto {
    //! `auto`'s decision on measurements the agent recorded on this machine (2 vCPUs, two 2-rank lu class A
    //! jobs, Open MPI, the PMPI profiler preloaded; rates per job over a 400 ms window, from the store's
    //! `auto_choices`), and its trial as slots go by.
    use std::time::Duration;

    use super::{next, pus, view};
    use crate::cosched::auto::{
        decide, window_slots, Auto, Choice, Decision, Rate, Sample, CANDIDATES, EVEN_EXPLOIT, MAX_STARTUP,
        MIN_READABLE_CALLS,
    };
    use crate::cosched::sharing::groups;
    use crate::cosched::{Desired, JobView, Policy, PolicySpec};
    use crate::ident::JobKey;

    fn r(calls_s: f64, cpu_s: f64) -> Rate {
        Rate { calls_s: Some(calls_s), calls: Some(calls_s as u64), cpu_s, together_s: None }
    }

    fn names(n: &[&str]) -> Vec<JobKey> {
        n.iter().map(|n| n.parse().unwrap()).collect()
    }

    const SLOT: Duration = Duration::from_millis(200);

    #[test]
    fn busy_polling_pair_is_ganged() {
        let cfs = vec![r(249.99, 0.987), r(247.50, 0.977)];
        let gang = vec![r(36035.07, 0.886), r(44866.77, 0.997)];
        let Decision { chosen: i, why, .. } = decide(&names(&["lu1", "lu2"]), &[gang, cfs]);
        assert_eq!(CANDIDATES[i], PolicySpec::Gang, "{why}");
    }

    #[test]
    fn yielding_pair_is_ganged_when_it_measures_faster() {
        // mpi_yield_when_idle 1: gang made both jobs 1.25x faster.
        let cfs = vec![r(35149.85, 0.990), r(35429.72, 0.993)];
        let gang = vec![r(43911.35, 0.993), r(44123.67, 0.997)];
        let Decision { chosen: i, why, .. } = decide(&names(&["lu3", "lu4"]), &[gang, cfs]);
        assert_eq!(CANDIDATES[i], PolicySpec::Gang, "{why}");
        assert!(why.contains("1.25x"), "{why}");
    }

    #[test]
    fn a_trial_within_the_margin_is_even_and_a_clear_loss_under_gang_chooses_cfs() {
        // Two ep jobs (no communication: no calls, CPU time is the progress): 1.01x is within the margin, an even
        // trial (what is kept then depends on the trials before: the next test).
        let cpu = |cpu_s| Rate { calls_s: Some(0.0), calls: Some(0), cpu_s, together_s: None };
        let cfs = vec![cpu(0.980), cpu(0.985)];
        let d = decide(&names(&["ep1", "ep2"]), &[vec![cpu(0.985), cpu(0.998)], cfs.clone()]);
        assert!(CANDIDATES[d.chosen] == PolicySpec::Cfs && d.even, "{d:?}");
        assert!(d.why.ends_with("; margin 5 %: even"), "{d:?}");
        // The jobs lose 10 % of their CPU time under gang (its switching): cfs, and clearly.
        let d = decide(&names(&["ep1", "ep2"]), &[vec![cpu(0.88), cpu(0.89)], cfs]);
        assert!(CANDIDATES[d.chosen] == PolicySpec::Cfs && !d.even, "{d:?}");
    }

    #[test]
    fn a_first_even_trial_keeps_gang_for_a_while_and_a_second_leaves_the_jobs_to_the_kernel() {
        // Two jobs that progress alike under both policies (jobs still setting up, or never waiting for each
        // other): the first trial keeps gang for 5 s; the second leaves them to cfs, tried again after 5, 10, 20,
        // then every 40 s.
        let made = run_pair(3_000, |_, _| 1000.0);
        let whys: Vec<(&str, &str)> = chosen(&made).into_iter().map(|c| (&*c.policy, &*c.why)).collect();
        let gaps: Vec<u64> = since_choice(&made, |why| why.ends_with("since the last trial: trying again"))
            .into_iter()
            .map(|(gap, _)| gap)
            .collect();
        // In slots, each rounded up to the end of gang's window (2 slots).
        let per_even = (EVEN_EXPLOIT.as_millis() / SLOT.as_millis()) as u64;
        let after = |times: u64| (per_even * times).next_multiple_of(2);
        assert!(
            whys[0].0 == "gang" && whys[0].1.ends_with("; margin 5 %: even, gang kept; next trial in 5 s"),
            "{whys:?}"
        );
        let later = &whys[1..];
        assert!(later.iter().all(|(p, why)| *p == "cfs" && why.contains(": even again: left to the kernel")));
        assert!(gaps.len() > 6 && gaps[..5] == [after(1), after(1), after(2), after(4), after(8)], "{gaps:?}");
        assert!(gaps[5..].iter().all(|&g| g == after(8)), "{gaps:?}");
    }

    #[test]
    fn a_job_without_calls_counts_by_cpu_and_a_stalled_job_vetoes() {
        // A spinning lu beside ep (no profiler: calls None): lu's 144x outweighs ep's unchanged CPU share.
        let ep = |cpu| Rate { calls_s: None, calls: None, cpu_s: cpu, together_s: None };
        let Decision { chosen: i, .. } =
            decide(&names(&["ep", "lu"]), &[vec![ep(0.97), r(36035.0, 0.89)], vec![ep(0.98), r(250.0, 0.99)]]);
        assert_eq!(CANDIDATES[i], PolicySpec::Gang);
        // A job that got no CPU at all under gang (calls in no window, so counted by CPU) rules it out.
        let idle = |cpu| Rate { calls_s: Some(0.0), calls: Some(0), cpu_s: cpu, together_s: None };
        let Decision { chosen: i, .. } =
            decide(&names(&["a", "b"]), &[vec![r(1e6, 1.0), idle(0.0)], vec![r(100.0, 1.0), idle(1.0)]]);
        assert_eq!(CANDIDATES[i], PolicySpec::Cfs);
        // Spinning ranks that complete no call at all in cfs's window (a 2-rank is class B pair, busy polling):
        // a stall, not a job without communication.
        let Decision { chosen: i, why, .. } =
            decide(&names(&["is1", "is2"]), &[vec![r(90.0, 0.9), r(85.0, 0.9)], vec![r(0.0, 1.0), r(0.0, 1.0)]]);
        assert_eq!(CANDIDATES[i], PolicySpec::Gang, "{why}");
    }

    #[test]
    fn a_job_with_too_few_calls_to_read_progresses_by_its_coscheduled_time() {
        // is beside mg (experiments/auto.toml, 2026-11-29): is makes a few exchanges a second and counted none in
        // gang's window, 3 in cfs's. Read by calls, that is a stall and rules gang out; it is a gap between two
        // exchanges, and is's ranks ran together three times as much under gang.
        let is = |calls: u64, seconds: f64, together| Rate {
            calls_s: Some(calls as f64 / seconds),
            calls: Some(calls),
            cpu_s: 0.95,
            together_s: Some(together),
        };
        let gang = vec![is(0, 0.4, 0.9), r(2000.0, 0.9)];
        let cfs = vec![is(3, 0.2, 0.3), r(1000.0, 0.95)];
        let Decision { chosen: i, why, .. } = decide(&names(&["is", "mg"]), &[gang, cfs]);
        assert_eq!(CANDIDATES[i], PolicySpec::Gang, "{why}");
        // A burst of calls in the short window of cfs against one in gang's four times longer one (auto.toml, busy
        // is+mg, 2026-11-29): too few to read either; the time its ranks ran together tells.
        let d = decide(
            &names(&["is", "mg"]),
            &[vec![is(16, 1.6, 0.94), r(375.0, 0.87)], vec![is(18, 0.8, 0.45), r(315.0, 1.0)]],
        );
        assert!(CANDIDATES[d.chosen] == PolicySpec::Gang && !d.even, "{d:?}");
        assert!(d.why.contains("is 2.09x"), "{d:?}");
        // With enough calls to read, a window without any stays a stall: the busy-polling pair above (its ranks ran
        // together under cfs as much as under gang, spinning).
        let stalled = vec![is(0, 0.2, 0.9), r(1000.0, 0.95)];
        let d = decide(&names(&["is", "mg"]), &[vec![is(MIN_READABLE_CALLS, 0.4, 0.9), r(2000.0, 0.9)], stalled]);
        assert!(CANDIDATES[d.chosen] == PolicySpec::Gang && d.why.contains("is 0.00x"), "{d:?}");
    }

    #[test]
    fn jobs_without_the_profiler_progress_by_their_coscheduled_time() {
        // lu W and cg A, 2 busy-polling ranks each, started without the profiler (experiments/together.toml's
        // shares): CPU time is the same under both policies, but the ranks ran together far more under gang.
        let blind = |cpu, together| Rate { calls_s: None, calls: None, cpu_s: cpu, together_s: Some(together) };
        let cfs = vec![blind(0.99, 0.30 * 0.99), blind(0.99, 0.07 * 0.99)];
        let gang = vec![blind(0.97, 0.91 * 0.97), blind(0.98, 0.95 * 0.98)];
        let d = decide(&names(&["cg", "lu"]), &[gang.clone(), cfs.clone()]);
        assert!(CANDIDATES[d.chosen] == PolicySpec::Gang && !d.even, "{d:?}");
        // By CPU time alone (no co-scheduled time measured) the same pair measures even: a trial that cannot tell
        // (it kept cfs then, before even trials kept gang).
        let cpu_only = |w: &[Rate]| w.iter().map(|r| Rate { together_s: None, ..*r }).collect::<Vec<_>>();
        let d = decide(&names(&["cg", "lu"]), &[cpu_only(&gang), cpu_only(&cfs)]);
        assert!(d.even, "{d:?}");
        // A profiled job that makes no calls does not communicate: CPU time, however its ranks ran together (an
        // even trial, not a clear win of gang).
        let quiet = |cpu, together| Rate { calls_s: Some(0.0), calls: Some(0), cpu_s: cpu, together_s: Some(together) };
        let d = decide(
            &names(&["ep1", "ep2"]),
            &[vec![quiet(0.99, 0.9), quiet(0.99, 0.9)], vec![quiet(1.0, 0.25), quiet(1.0, 0.25)]],
        );
        assert!(d.even, "{d:?}");
    }

    #[test]
    fn windows_are_whole_rounds_of_rows_and_at_least_400_ms() {
        assert_eq!(window_slots(2, SLOT), 2);
        assert_eq!(window_slots(3, SLOT), 3);
        assert_eq!(window_slots(2, Duration::from_millis(50)), 8);
        assert_eq!(window_slots(1, Duration::from_secs(2)), 1);
        // cfs's trial has no rounds: 200 ms.
        assert_eq!(window_slots(0, SLOT), 1);
        assert_eq!(window_slots(0, Duration::from_millis(50)), 4);
        assert_eq!(CANDIDATES.iter().filter(|&&c| c == PolicySpec::Cfs).count(), 1);
    }

    #[test]
    fn groups_are_jobs_that_share_pus_through_each_other() {
        let (a, b, c, d) = (pus("0-1"), pus("1-2"), pus("2-3"), pus("5"));
        let jobs = [view("a", 0, &a), view("d", 0, &d), view("c", 0, &c), view("b", 1, &b)];
        assert_eq!(groups(&jobs), vec![vec![0, 2, 3]]);
    }

    /// `auto.observe` with the samples of every job read beforehand.
    fn see(auto: &mut Auto, slot: u64, jobs: &[JobView<'_>], samples: &[Sample]) -> Vec<Choice> {
        auto.observe(slot, SLOT, jobs, |i| samples[i])
    }

    /// Samples at `t` seconds with `calls` calls so far per job.
    fn calls_at(t: f64, calls: &[u64]) -> Vec<Sample> {
        calls
            .iter()
            .map(|&c| Sample {
                at_ns: (t * 1e9) as u64,
                cpu_ns: (t * 1e9) as u64,
                calls: Some(c),
                publishers: 2,
                profiled: 0,
                together_ns: None,
                ranks: 2,
            })
            .collect()
    }

    #[test]
    fn a_choice_that_trials_confirm_is_tried_again_ever_less_often_until_its_progress_drifts() {
        // Two jobs that progress 4 times faster under gang: each timed trial confirms gang, and the next comes
        // 30, 60, 120, then 240 s after each decision; from slot 9000 on (a new phase) gang's progress halves,
        // still twice cfs's: the drift brings a trial at once and starts over at 30 s.
        let made = run_pair(12_000, |slot, policy| match policy {
            "gang" if slot < 9_000 => 2000.0,
            "gang" => 1000.0,
            _ => 500.0,
        });
        let choices = chosen(&made);
        assert!(choices.iter().all(|c| c.policy == "gang"), "{choices:?}");
        let gaps =
            since_choice(&made, |why| why.ends_with("since the last trial: trying again") || why.contains("drifted"));
        let at = gaps.iter().position(|(_, c)| c.slot >= 9_000).expect("a trial after the drift");
        let timed: Vec<u64> = gaps[..at].iter().map(|g| g.0).collect();
        assert!(timed.len() > 5 && timed[..4] == [150, 300, 600, 1200], "{gaps:?}");
        assert!(timed[4..].iter().all(|&g| g == 1200), "at most every 240 s: {gaps:?}");
        assert!(gaps[at].1.why.starts_with("progress under gang drifted by 50 %"), "{gaps:?}");
        assert_eq!(gaps[at + 1].0, 150, "{gaps:?}");
        for said in ["; confirmed once: next trial in 60 s", "; confirmed 3 times: next trial in 240 s"] {
            assert!(choices.iter().any(|c| c.why.ends_with(said)), "{said}: {choices:?}");
        }
    }

    #[test]
    fn drifts_that_trials_find_changed_nothing_must_last_ever_longer_and_a_real_change_is_still_tried() {
        // gang's progress alternates between two phases of 24 slots (2000 and 1200 calls/s, so that no baseline
        // measured across a phase change reads both as a drift; cfs 500): each drift trial confirms gang, and the
        // next drift must last 4, 8, then 16 windows (of 2 slots), longer than a phase: three drift trials in 2400
        // slots. From slot 2400 on gang falls below cfs for good: a drift of 16 windows still brings a trial, and
        // cfs is chosen.
        let made = run_pair(3600, |slot, policy| match policy {
            "gang" if slot >= 2400 => 250.0,
            "gang" if (slot / 24).is_multiple_of(2) => 2000.0,
            "gang" => 1200.0,
            _ => 500.0,
        });
        let drifts: Vec<&Made> = made.iter().filter(|c| c.trying && c.why.contains("drifted")).collect();
        assert_eq!(drifts.iter().filter(|c| c.slot < 2400).count(), 3, "{drifts:?}");
        for n in [4, 8, 16] {
            let said = format!("a drift that changed nothing: the next must last {n} windows");
            assert!(made.iter().any(|c| !c.trying && c.why.contains(&said)), "{said}: {made:?}");
        }
        assert!(drifts.iter().any(|c| (2400..2450).contains(&c.slot)), "{drifts:?}");
        assert_eq!(chosen(&made).last().map(|c| c.policy.as_str()), Some("cfs"), "{made:?}");
    }

    /// What `auto` said for the pair of [`run_pair`]: a choice or the start of a trial.
    #[derive(Debug)]
    struct Made {
        slot: u64,
        trying: bool,
        policy: String,
        why: String,
    }

    /// Runs a pair of jobs under `auto` for `slots` slots, each job making `rate(slot, policy in force)` calls per
    /// second; returns everything `auto` said, in order.
    fn run_pair(slots: u64, rate: impl Fn(u64, &str) -> f64) -> Vec<Made> {
        run_pair_with(slots, rate, |_, _| ())
    }

    /// [`run_pair`], with each slot's samples changed by `change(slot, samples)` before `auto` reads them.
    fn run_pair_with(slots: u64, rate: impl Fn(u64, &str) -> f64, change: impl Fn(u64, &mut [Sample])) -> Vec<Made> {
        let (x, y) = (pus("0-1"), pus("0-1"));
        let jobs = [view("x", 0, &x), view("y", 1, &y)];
        let mut auto = Auto::default();
        let (mut calls, mut made) = ([0u64; 2], Vec::new());
        for slot in 0..slots {
            let t = slot as f64 * SLOT.as_secs_f64();
            let mut samples = calls_at(t, &calls);
            change(slot, &mut samples);
            for c in see(&mut auto, slot, &jobs, &samples) {
                made.push(Made { slot, trying: c.trying, policy: c.policy, why: c.why });
            }
            let per_slot = rate(slot, &auto.choices()[0].policy) * SLOT.as_secs_f64();
            for c in &mut calls {
                *c += per_slot as u64;
            }
        }
        made
    }

    /// The choices `auto` made, in order (not the starts of trials).
    fn chosen(made: &[Made]) -> Vec<&Made> {
        made.iter().filter(|c| !c.trying).collect()
    }

    /// The trials whose reason `starts` accepts, each with the slots since the choice before it.
    fn since_choice(made: &[Made], starts: impl Fn(&str) -> bool) -> Vec<(u64, &Made)> {
        let mut decided = None;
        let mut trials = Vec::new();
        for c in made {
            if !c.trying {
                decided = Some(c.slot);
            } else if starts(&c.why) {
                trials.push((c.slot - decided.expect("a choice before a trial"), c));
            }
        }
        trials
    }

    #[test]
    fn a_trial_restarted_by_a_job_s_processes_changing_still_counts_as_a_confirmation() {
        // gang twice as fast as cfs; in the slot after the first timed trial starts, one of y's ranks is not
        // seen, then is again: the trial starts over twice, and still confirms gang (the next trial in 60 s).
        let rate = |_, policy: &str| if policy == "gang" { 2000.0 } else { 1000.0 };
        let plain = run_pair(400, rate);
        let timed = |made: &[Made]| made.iter().find(|c| c.why.contains("since the last trial")).map(|c| c.slot);
        let at = timed(&plain).expect("a timed trial");
        let made = run_pair_with(400, rate, |slot, samples| {
            if slot == at + 1 {
                samples[1].publishers = 1;
            }
        });
        assert_eq!(timed(&made), Some(at), "{made:?}");
        let changed = made.iter().filter(|c| c.slot > at && c.why.starts_with("a job's processes changed")).count();
        assert_eq!(changed, 2, "{made:?}");
        let next = chosen(&made).into_iter().find(|c| c.slot > at).expect("a choice after the trial");
        assert!(next.policy == "gang" && next.why.ends_with("; confirmed once: next trial in 60 s"), "{made:?}");
    }

    #[test]
    fn one_trial_against_gang_keeps_it_and_a_second_in_a_row_changes_it_and_one_for_gang_takes_it_at_once() {
        // gang twice as fast as cfs, except in one stray window of cfs (the first timed trial's, at slots 155-156)
        // that reads 1.5 times gang's rate: gang is kept, tried again 5 s later, and confirmed.
        let stray = run_pair(600, |slot, policy| match policy {
            "gang" => 2000.0,
            _ if (150..170).contains(&slot) => 3000.0,
            _ => 1000.0,
        });
        let stray = chosen(&stray);
        assert!(stray.iter().all(|c| c.policy == "gang"), "{stray:?}");
        let doubt = stray.iter().position(|c| c.why.contains("a first trial against gang")).expect("a doubt");
        assert!(stray[doubt].why.ends_with(": a first trial against gang, gang kept; next trial in 5 s"), "{stray:?}");
        let (at, next) = (stray[doubt].slot, &stray[doubt + 1]);
        let per_even = (EVEN_EXPLOIT.as_millis() / SLOT.as_millis()) as u64;
        assert!(next.slot > at + per_even && next.slot <= at + per_even + 4, "{stray:?}");
        assert!(!next.why.contains("against") && !next.why.contains("even"), "{stray:?}");
        // From slot 300 on, cfs is the faster (a new phase): gang's progress drifts, the trial goes against it and
        // keeps it for 5 s, the next trial goes against it again and cfs is chosen.
        let phase = run_pair(600, |slot, policy| match policy {
            "gang" if slot < 300 => 2000.0,
            "gang" => 500.0,
            _ => 1000.0,
        });
        let phase = chosen(&phase);
        let after: Vec<&Made> = phase.iter().copied().filter(|c| c.slot >= 300).collect();
        assert!(after.len() >= 2, "{phase:?}");
        assert!(
            after[0].policy == "gang" && after[0].why.contains("a first trial against gang, gang kept"),
            "{phase:?}"
        );
        assert!(after[1].policy == "cfs" && !after[1].why.contains("against"), "{phase:?}");
        assert!(after[1].slot <= after[0].slot + per_even + 4, "{phase:?}");
        assert!(after[2..].iter().all(|c| c.policy == "cfs"), "{phase:?}");
        // A trial for gang is acted on at once: jobs left to the kernel after two even trials (still setting up)
        // that then progress twice as fast under gang get it on the next trial.
        let late = run_pair(600, |slot, policy| if policy == "gang" && slot >= 200 { 2000.0 } else { 1000.0 });
        let late = chosen(&late);
        let kernel = |c: &&Made| c.slot < 200 && c.policy == "cfs" && c.why.contains("left to the kernel");
        assert!(late.iter().any(kernel), "{late:?}");
        let first = late.iter().find(|c| c.slot >= 200).expect("a trial after slot 200");
        assert!(first.policy == "gang" && !first.why.contains("against"), "{late:?}");
    }

    #[test]
    fn no_window_counts_while_a_job_is_still_starting() {
        // The case seen on 16 cores: y's ranks still in MPI_Init (they preload the profiler, none publishes yet)
        // while x already communicates. Nothing is decided from that, however long x's calls have been counted.
        let (x, y) = (pus("0-1"), pus("0-1"));
        let jobs = [view("x", 0, &x), view("y", 1, &y)];
        // Both jobs' two ranks preload the profiler.
        let profiled = |t: f64, calls: &[u64]| {
            let mut s = calls_at(t, calls);
            for sample in &mut s {
                sample.profiled = 2;
            }
            s
        };
        let starting = |t: f64, x_calls: u64| {
            let mut s = profiled(t, &[x_calls, 0]);
            (s[1].calls, s[1].publishers) = (None, 0);
            s
        };
        let mut auto = Auto::default();
        let first = see(&mut auto, 0, &jobs, &starting(0.0, 0));
        assert!(first[0].trying && first[0].policy == "gang", "{first:?}");
        assert!(first[0].why.starts_with("waiting for y to start (0 of its 2 profiled ranks publish)"), "{first:?}");
        for slot in 1..20 {
            let c = see(&mut auto, slot, &jobs, &starting(slot as f64 * 0.2, slot * 400));
            assert!(c.is_empty(), "slot {slot}: {c:?}");
            assert!(auto.choices()[0].trying && auto.choices()[0].policy == "gang");
        }
        // y's ranks publish: measured from here, gang then cfs, as for any pair.
        let started = see(&mut auto, 20, &jobs, &profiled(4.0, &[8000, 0]));
        assert!(started[0].trying && started[0].why == "every job started: trying gang", "{started:?}");
        assert!(see(&mut auto, 21, &jobs, &profiled(4.2, &[8400, 400])).is_empty());
        assert_eq!(see(&mut auto, 22, &jobs, &profiled(4.4, &[8800, 800]))[0].policy, "cfs");
        let chosen = see(&mut auto, 23, &jobs, &profiled(4.6, &[9000, 1000]));
        assert!(!chosen[0].trying && chosen[0].policy == "gang", "{chosen:?}");
        // A job whose profiled ranks never publish holds the trial no longer than MAX_STARTUP.
        let mut stuck = Auto::default();
        let limit = (MAX_STARTUP.as_millis() / SLOT.as_millis()) as u64;
        see(&mut stuck, 0, &jobs, &starting(0.0, 0));
        for slot in 1..limit {
            assert!(see(&mut stuck, slot, &jobs, &starting(slot as f64 * 0.2, slot * 400)).is_empty(), "slot {slot}");
        }
        let t = |slot: u64| slot as f64 * 0.2;
        let anyway = see(&mut stuck, limit, &jobs, &starting(t(limit), limit * 400));
        assert!(anyway[0].why == "y not started after 30 s: trying gang anyway", "{anyway:?}");
        let tried = see(&mut stuck, limit + 2, &jobs, &starting(t(limit + 2), (limit + 2) * 400));
        assert!(tried[0].trying && tried[0].policy == "cfs", "{tried:?}");
    }

    #[test]
    fn no_window_counts_while_a_job_s_demand_is_not_measured() {
        // y's demand is not measured yet, so gang runs the pair as cfs: the trial waits, however fast both go.
        let (x, y) = (pus("0-1"), pus("0-1"));
        let mut jobs = [view("x", 0, &x), view("y", 1, &y)];
        jobs[1].starting = true;
        let mut auto = Auto::default();
        let first = see(&mut auto, 0, &jobs, &calls_at(0.0, &[0, 0]));
        assert!(first[0].trying && first[0].policy == "gang", "{first:?}");
        assert_eq!(first[0].why, "waiting for y's demand to be measured: trying gang");
        for slot in 1..15 {
            let c = see(&mut auto, slot, &jobs, &calls_at(slot as f64 * 0.2, &[slot * 200, slot * 200]));
            assert!(c.is_empty(), "slot {slot}: {c:?}");
        }
        // Measured: gang's window starts here (2000 calls/s), then cfs's (1000), and gang is chosen.
        jobs[1].starting = false;
        let measured = see(&mut auto, 15, &jobs, &calls_at(3.0, &[3000, 3000]));
        assert!(measured[0].trying && measured[0].why == "every job started: trying gang", "{measured:?}");
        assert!(see(&mut auto, 16, &jobs, &calls_at(3.2, &[3400, 3400])).is_empty());
        assert_eq!(see(&mut auto, 17, &jobs, &calls_at(3.4, &[3800, 3800]))[0].policy, "cfs");
        let chosen = see(&mut auto, 18, &jobs, &calls_at(3.6, &[4000, 4000]));
        assert!(!chosen[0].trying && chosen[0].policy == "gang", "{chosen:?}");
        // A set that succeeds a ganged pair by a job whose demand is not measured keeps gang; the baseline of its
        // drift is measured from the first slot the job is (over slots m to m + 2), not at the half speed of the
        // slots before: no trial, whether the job is measured in the set's second slot or later.
        let y2 = pus("0-1");
        for measured in [16, 21] {
            let mut after = [view("x", 0, &x), view("y2", 1, &y2)];
            let mut kept = ganged(&jobs);
            // Slot s is at (s - 10) x 0.2 s; 200 calls a slot per job until slot `measured`, 400 after; x from 1000
            // at slot 13, y2 from none at slot 15.
            let calls = |slot: u64, from: u64| {
                200 * slot.min(measured).saturating_sub(from) + 400 * slot.saturating_sub(measured)
            };
            let made: Vec<(u64, Choice)> = (15..120)
                .flat_map(|slot| {
                    after[1].starting = slot < measured;
                    let now = calls_at((slot - 10) as f64 * 0.2, &[1000 + calls(slot, 13), calls(slot, 15)]);
                    see(&mut kept, slot, &after, &now).into_iter().map(move |m| (slot, m))
                })
                .collect();
            assert_eq!(made.len(), 1, "measured at {measured}: {made:?}");
            assert!(made[0].0 == 15 && !made[0].1.trying && made[0].1.policy == "gang", "{made:?}");
        }
    }

    #[test]
    fn a_pair_is_tried_under_gang_then_cfs_then_ganged_until_it_changes() {
        let (x, y, z) = (pus("0-1"), pus("0-1"), pus("3"));
        let jobs = [view("x", 0, &x), view("y", 1, &y)];
        let frozen_y = vec![Desired::default(), Desired { frozen: true, boosted: false }];
        let mut auto = Auto::default();
        let first = see(&mut auto, 10, &jobs, &calls_at(0.0, &[0, 0]));
        assert!(first[0].trying && first[0].policy == "gang");
        assert_eq!(auto.plan(&jobs), frozen_y);
        // Half of gang's window (two rows: two slots): nothing changes.
        assert!(see(&mut auto, 11, &jobs, &calls_at(0.2, &[400, 400])).is_empty());
        // gang measured at 2000 calls/s; cfs is tried, for one slot.
        let tried = see(&mut auto, 12, &jobs, &calls_at(0.4, &[800, 800]));
        assert!(tried[0].trying && tried[0].policy == "cfs");
        assert_eq!(auto.plan(&jobs), vec![Desired::default(); 2]);
        // cfs half as fast: gang chosen.
        let chosen = see(&mut auto, 13, &jobs, &calls_at(0.6, &[1000, 1000]));
        assert!(!chosen[0].trying && chosen[0].policy == "gang", "{chosen:?}");
        assert!(chosen[0].why.starts_with("gang progress 2.00x of cfs's"), "{chosen:?}");
        assert_eq!(chosen[0].rates.len(), 2);
        assert_eq!(auto.choices()[0].policy, "gang");
        assert_eq!(auto.plan(&jobs), frozen_y);
        // Progress stays as measured: kept.
        assert!(see(&mut auto, 15, &jobs, &calls_at(1.0, &[1800, 1800])).is_empty());
        // A third job on other PUs is left alone and does not disturb the pair.
        let more = [jobs[0], jobs[1], view("z", 0, &z)];
        let mut s = calls_at(1.4, &[2600, 2600]);
        s.push(Sample::default());
        assert!(see(&mut auto, 17, &more, &s).is_empty());
        assert_eq!(auto.plan(&next(&more))[2], Desired::default());
        // Progress halves: one window of it is not yet a drift; a second in a row is, and the pair is tried again
        // from gang.
        assert!(see(&mut auto, 19, &jobs, &calls_at(1.8, &[3000, 3000])).is_empty());
        let again = see(&mut auto, 21, &jobs, &calls_at(2.2, &[3400, 3400]));
        assert!(again[0].trying && again[0].policy == "gang" && again[0].why.contains("drifted"), "{again:?}");
        // One job gone: no group is left, every job under cfs.
        assert!(see(&mut auto, 23, &jobs[..1], &calls_at(2.6, &[3800])).is_empty());
        assert!(auto.choices().is_empty());
        assert_eq!(auto.plan(&jobs[..1]), vec![Desired::default()]);
    }

    #[test]
    fn taken_up_again_a_choice_stands_and_its_window_starts_afresh() {
        let (x, y) = (pus("0-1"), pus("0-1"));
        let jobs = [view("x", 0, &x), view("y", 1, &y)];
        let mut auto = ganged(&jobs);
        // Another policy for 100 slots, under which the jobs made few calls: taken up again, gang stands, and
        // what they did meanwhile is no drift.
        auto.resume();
        assert!(see(&mut auto, 113, &jobs, &calls_at(20.6, &[1100, 1100])).is_empty());
        assert_eq!(auto.choices()[0].policy, "gang");
        assert!(see(&mut auto, 115, &jobs, &calls_at(21.0, &[1900, 1900])).is_empty());
        assert!(see(&mut auto, 117, &jobs, &calls_at(21.4, &[2700, 2700])).is_empty());
        // Without being taken up again, the same gap reads as progress that fell away: a drift, tried again.
        let mut fresh = ganged(&jobs);
        see(&mut fresh, 113, &jobs, &calls_at(20.6, &[1100, 1100]));
        let again = see(&mut fresh, 115, &jobs, &calls_at(21.0, &[1200, 1200]));
        assert!(again[0].trying && again[0].why.contains("drifted"), "{again:?}");
    }

    #[test]
    fn a_job_whose_processes_change_restarts_the_trial() {
        let (x, y) = (pus("0-1"), pus("0-1"));
        let jobs = [view("x", 0, &x), view("y", 1, &y)];
        let mut auto = Auto::default();
        see(&mut auto, 0, &jobs, &calls_at(0.0, &[0, 0]));
        // Halfway through gang's window (two slots), one of y's ranks stops publishing: tried again at once, not
        // at the window's end.
        let mut s = calls_at(0.2, &[200, 200]);
        s[1].publishers = 1;
        let c = see(&mut auto, 1, &jobs, &s);
        assert!(c[0].trying && c[0].policy == "gang" && c[0].why.contains("changed"), "{c:?}");
        // It publishes again: a change again, measured from here.
        let c = see(&mut auto, 2, &jobs, &calls_at(0.4, &[400, 400]));
        assert!(c[0].trying && c[0].policy == "gang" && c[0].why.contains("changed"), "{c:?}");
        // gang at 2000 calls/s, cfs at 1000: gang chosen; then a job's ranks end: the choice stands.
        assert_eq!(see(&mut auto, 4, &jobs, &calls_at(0.8, &[1200, 1200]))[0].policy, "cfs");
        let chosen = see(&mut auto, 5, &jobs, &calls_at(1.0, &[1400, 1400]));
        assert!(!chosen[0].trying && chosen[0].policy == "gang", "{chosen:?}");
        let mut ending = calls_at(1.4, &[2200, 2200]);
        ending[0].publishers = 1;
        assert!(see(&mut auto, 7, &jobs, &ending).is_empty());
        assert_eq!(auto.choices()[0].policy, "gang");
        // Jobs that had made no call when the choice was made (still setting up: even, gang kept) begin to, and
        // go on: tried again.
        let mut quiet = Auto::default();
        let calls = |t: f64, c: [u64; 2]| calls_at(t, &c);
        see(&mut quiet, 0, &jobs, &calls(0.0, [0, 0]));
        see(&mut quiet, 2, &jobs, &calls(0.4, [0, 0]));
        let even = see(&mut quiet, 3, &jobs, &calls(0.6, [0, 0]));
        assert!(!even[0].trying && even[0].policy == "gang" && even[0].why.contains("even, gang kept"), "{even:?}");
        assert!(see(&mut quiet, 5, &jobs, &calls(1.0, [500, 500])).is_empty());
        let again = see(&mut quiet, 7, &jobs, &calls(1.4, [1000, 1000]));
        assert!(again[0].trying && again[0].why.contains("drifted"), "{again:?}");
        assert_eq!(auto.choices()[0].policy, "gang");
    }

    /// An `Auto` that chose `gang` for jobs x and y at slot 13 (gang twice as fast as cfs).
    fn ganged(jobs: &[JobView<'_>]) -> Auto {
        let mut auto = Auto::default();
        see(&mut auto, 10, jobs, &calls_at(0.0, &[0, 0]));
        see(&mut auto, 12, jobs, &calls_at(0.4, &[800, 800]));
        let chosen = see(&mut auto, 13, jobs, &calls_at(0.6, &[1000, 1000]));
        assert!(!chosen[0].trying && chosen[0].policy == "gang", "{chosen:?}");
        auto
    }

    #[test]
    fn a_set_that_succeeds_a_ganged_one_by_a_job_keeps_gang_until_the_next_timed_trial() {
        let (x, y, y2) = (pus("0-1"), pus("0-1"), pus("0-1"));
        let pair = [view("x", 0, &x), view("y", 1, &y)];
        let mut auto = ganged(&pair);
        // y ends and y2 starts in its place between two slots: gang is kept, no trial.
        let after = [view("x", 0, &x), view("y2", 1, &y2)];
        let mut s = calls_at(1.0, &[1800, 0]);
        (s[1].publishers, s[1].profiled) = (0, 2);
        let kept = see(&mut auto, 15, &after, &s);
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert!(!kept[0].trying && kept[0].policy == "gang", "{kept:?}");
        assert_eq!(kept[0].why, "gang kept from the set before, y left, y2 joined; next trial in 30 s");
        assert_eq!(auto.plan(&after), vec![Desired::default(), Desired { frozen: true, boosted: false }]);
        // y2's ranks begin to publish, then work: no trial (its window only starts again), and the first whole
        // window is the baseline of a drift, which a halving of progress then shows.
        assert!(see(&mut auto, 17, &after, &calls_at(1.4, &[2600, 0])).is_empty());
        assert!(see(&mut auto, 19, &after, &calls_at(1.8, &[3400, 800])).is_empty());
        assert!(see(&mut auto, 21, &after, &calls_at(2.2, &[4200, 1600])).is_empty());
        assert!(see(&mut auto, 23, &after, &calls_at(2.6, &[4600, 2000])).is_empty());
        let drift = see(&mut auto, 25, &after, &calls_at(3.0, &[5000, 2400]));
        assert!(drift[0].trying && drift[0].why.contains("drifted by 50 %"), "{drift:?}");
        // Without a drift, the next trial comes when the set before would have had it, 30 s after a first trial.
        let mut timed = ganged(&pair);
        see(&mut timed, 15, &after, &calls_at(1.0, &[1800, 0]));
        // x makes 2000 calls/s from 1000 at slot 13, y2 as many from none at slot 15; slot s is at (s - 10) x 0.2 s.
        let trials: Vec<(u64, Choice)> = (16..164)
            .flat_map(|slot| {
                let (t, x, y) = ((slot - 10) as f64 * 0.2, 1000 + 400 * (slot - 13), 400 * (slot - 15));
                see(&mut timed, slot, &after, &calls_at(t, &[x, y])).into_iter().map(move |m| (slot, m))
            })
            .collect();
        assert_eq!(trials.len(), 1, "{trials:?}");
        assert_eq!(trials[0].0, 13 + 150, "{trials:?}");
        assert!(trials[0].1.trying && trials[0].1.why.contains("since the last trial"), "{trials:?}");
    }

    #[test]
    fn a_job_started_again_every_few_seconds_carries_on_the_trials_and_what_they_confirmed() {
        // x runs on; y is started again every 13 slots (2.6 s: the demo's lu W and ep A), its run in place of the
        // one before in the same slot. Both make 2000 calls/s under gang and 1000 under cfs. Timed trials that a
        // new run interrupts go on in the set that succeeds, and what they confirm counts: the time between
        // trials doubles to 240 s as it does for jobs that run on, and no set is tried afresh.
        let (x, y) = (pus("0-1"), pus("0-1"));
        let mut auto = Auto::default();
        let (mut x_calls, mut y_calls, mut made) = (0u64, 0u64, Vec::new());
        for slot in 0..4000u64 {
            let run = format!("y{}", slot / 13);
            if slot % 13 == 0 {
                y_calls = 0;
            }
            let jobs = [view("x", 0, &x), view(&run, 1, &y)];
            let t = slot as f64 * SLOT.as_secs_f64();
            for c in see(&mut auto, slot, &jobs, &calls_at(t, &[x_calls, y_calls])) {
                made.push(Made { slot, trying: c.trying, policy: c.policy, why: c.why });
            }
            let per_slot = if auto.choices()[0].policy == "gang" { 400 } else { 200 };
            (x_calls, y_calls) = (x_calls + per_slot, y_calls + per_slot);
        }
        let fresh: Vec<&Made> = made.iter().filter(|c| c.why.starts_with("new set of jobs")).collect();
        assert_eq!(fresh.len(), 1, "only the first set is new: {fresh:?}");
        assert!(chosen(&made).iter().all(|c| c.policy == "gang"), "{made:?}");
        let carried = |c: &&Made| c.trying && c.why.starts_with("trial of gang carried on from the set before, y");
        assert!(made.iter().any(|c| carried(&c)), "no trial was carried on: {made:?}");
        // From each decision (not a choice kept from the set before) to the timed trial after it.
        let decisions: Vec<&Made> = made.iter().filter(|c| !c.trying && c.why.starts_with("gang progress")).collect();
        let timed: Vec<u64> = made
            .iter()
            .filter(|c| c.why.ends_with("since the last trial: trying again"))
            .map(|c| c.slot - decisions.iter().rev().find(|d| d.slot < c.slot).expect("a decision before").slot)
            .collect();
        // Within a slot: a succession in the slot a choice falls due moves it by one.
        let due = [150, 300, 600, 1200, 1200];
        assert!(timed.len() >= 5 && timed.iter().zip(due).all(|(&t, d)| (d..=d + 1).contains(&t)), "{timed:?}");
        let trials = made.iter().filter(|c| c.trying && c.policy == "cfs").count();
        assert!(trials <= 2 * (timed.len() + 1), "{trials} windows of cfs for {} timed trials: {made:?}", timed.len());
    }

    #[test]
    fn a_set_on_the_same_pus_with_no_job_in_common_keeps_gang_only_until_a_first_trial_s_time() {
        // x and y, gang twice as fast as cfs, confirmed once by slot 200 (the next trial about 60 s on); then, in
        // one slot, both are replaced on the same PUs: kept, but tried 30 s on; only y replaced: the deadline the
        // confirmation earned.
        let (x, y, x2, y2) = (pus("0-1"), pus("0-1"), pus("0-1"), pus("0-1"));
        let drive = |auto: &mut Auto, jobs: &[JobView<'_>], slots: std::ops::Range<u64>, calls: &mut [u64]| {
            let mut said = Vec::new();
            for slot in slots {
                let t = slot as f64 * SLOT.as_secs_f64();
                said.extend(see(auto, slot, jobs, &calls_at(t, calls)).into_iter().map(|c| (slot, c)));
                let per_slot = if auto.choices()[0].policy == "gang" { 400 } else { 200 };
                for c in calls.iter_mut() {
                    *c += per_slot;
                }
            }
            said
        };
        let pair = [view("x", 0, &x), view("y", 1, &y)];
        for (after, next) in
            [([view("x2", 0, &x2), view("y2", 1, &y2)], 30), ([view("x", 0, &x), view("y2", 1, &y2)], 51)]
        {
            let (mut auto, mut calls) = (Auto::default(), vec![0; 2]);
            let said = drive(&mut auto, &pair, 0..200, &mut calls);
            assert!(said.iter().any(|(_, c)| c.why.ends_with("confirmed once: next trial in 60 s")), "{said:?}");
            let said = drive(&mut auto, &after, 200..600, &mut [0, 0]);
            let kept = &said[0].1;
            assert!(!kept.trying && kept.why.ends_with(&format!("joined; next trial in {next} s")), "{said:?}");
            let timed = said.iter().find(|(_, c)| c.why.contains("since the last trial")).expect("a timed trial");
            // Slots of 200 ms; the seconds said are rounded.
            assert!((200 + next * 5 - 2..=200 + next * 5 + 2).contains(&timed.0), "{said:?}");
        }
    }

    #[test]
    fn a_choice_of_cfs_or_one_gone_too_long_is_not_passed_on_and_one_left_of_three_keeps_it() {
        let (x, y, y2, z) = (pus("0-1"), pus("0-1"), pus("0-1"), pus("0-1"));
        let pair = [view("x", 0, &x), view("y", 1, &y)];
        let after = [view("x", 0, &x), view("y2", 1, &y2)];
        // cfs chosen (no call at all under gang: a stall): a successor tries the candidates afresh.
        let mut auto = Auto::default();
        see(&mut auto, 10, &pair, &calls_at(0.0, &[0, 0]));
        see(&mut auto, 12, &pair, &calls_at(0.4, &[0, 0]));
        let cfs = see(&mut auto, 13, &pair, &calls_at(0.6, &[200, 200]));
        assert!(!cfs[0].trying && cfs[0].policy == "cfs", "{cfs:?}");
        let fresh = see(&mut auto, 15, &after, &calls_at(1.0, &[800, 0]));
        assert!(fresh[0].trying && fresh[0].why.starts_with("new set of jobs"), "{fresh:?}");
        // gang chosen, y ends, x runs alone for 11 s, then y2 joins: too long after, tried afresh.
        let mut auto = ganged(&pair);
        assert!(see(&mut auto, 15, &pair[..1], &calls_at(1.0, &[1800])).is_empty());
        let late = see(&mut auto, 15 + 55, &after, &calls_at(12.0, &[9000, 0]));
        assert!(late[0].trying && late[0].why.starts_with("new set of jobs"), "{late:?}");
        // Within 10 s it is kept.
        let mut auto = ganged(&pair);
        assert!(see(&mut auto, 15, &pair[..1], &calls_at(1.0, &[1800])).is_empty());
        let soon = see(&mut auto, 15 + 45, &after, &calls_at(10.0, &[9000, 0]));
        assert!(!soon[0].trying && soon[0].why.starts_with("gang kept"), "{soon:?}");
        // Three jobs ganged; z ends: the two left keep gang.
        let three = [view("x", 0, &x), view("y", 1, &y), view("z", 2, &z)];
        let mut auto = Auto::default();
        see(&mut auto, 0, &three, &calls_at(0.0, &[0, 0, 0]));
        see(&mut auto, 2, &three, &calls_at(0.4, &[800, 800, 800]));
        let chosen = see(&mut auto, 3, &three, &calls_at(0.6, &[1000, 1000, 1000]));
        assert!(!chosen[0].trying && chosen[0].policy == "gang", "{chosen:?}");
        let two = see(&mut auto, 5, &pair, &calls_at(1.0, &[1800, 1800]));
        assert_eq!(two[0].why, "gang kept from the set before, z left; next trial in 30 s");
    }

    #[test]
    fn a_choice_passes_to_a_set_one_job_apart_only_and_time_away_does_not_count() {
        let (x, y, y2, z) = (pus("0-1"), pus("0-1"), pus("0-1"), pus("0-1"));
        let pair = [view("x", 0, &x), view("y", 1, &y)];
        // One job more: kept. Two jobs other (none in common) on other PUs: tried afresh; on the same PUs: kept, and
        // tried within 30 s.
        let mut auto = ganged(&pair);
        let three = [view("x", 0, &x), view("y", 1, &y), view("z", 2, &z)];
        let joined = see(&mut auto, 15, &three, &calls_at(1.0, &[1800, 1800, 0]));
        assert_eq!(joined[0].why, "gang kept from the set before, z joined; next trial in 30 s");
        let mut auto = ganged(&pair);
        let (y3, z3) = (pus("1-2"), pus("1-2"));
        let others = [view("y3", 0, &y3), view("z3", 1, &z3)];
        let fresh = see(&mut auto, 15, &others, &calls_at(1.0, &[0, 0]));
        assert!(fresh[0].trying && fresh[0].why.starts_with("new set of jobs"), "{fresh:?}");
        let mut auto = ganged(&pair);
        let others = [view("y2", 0, &y2), view("z", 1, &z)];
        let kept = see(&mut auto, 15, &others, &calls_at(1.0, &[0, 0]));
        assert_eq!(kept[0].why, "gang kept from the set before, x, y left, y2, z joined; next trial in 30 s");
        // y ends; x alone, then another policy for 17 s (a paired comparison's turns); y2 joins as auto comes back:
        // the time away does not count, gang is kept. Without the turns, 17 s is too long.
        let after = [view("x", 0, &x), view("y2", 1, &y2)];
        let mut auto = ganged(&pair);
        assert!(see(&mut auto, 15, &pair[..1], &calls_at(1.0, &[1800])).is_empty());
        auto.resume();
        let back = see(&mut auto, 100, &after, &calls_at(18.0, &[9000, 0]));
        assert!(!back[0].trying && back[0].why.starts_with("gang kept"), "{back:?}");
        let mut auto = ganged(&pair);
        assert!(see(&mut auto, 15, &pair[..1], &calls_at(1.0, &[1800])).is_empty());
        let late = see(&mut auto, 100, &after, &calls_at(18.0, &[9000, 0]));
        assert!(late[0].trying && late[0].why.starts_with("new set of jobs"), "{late:?}");
    }

    #[test]
    fn successions_under_another_policy_one_job_at_a_time_keep_the_choice_when_taken_up_again() {
        let (x, y, x2, y2) = (pus("0-1"), pus("0-1"), pus("0-1"), pus("0-1"));
        let pair = [view("x", 0, &x), view("y", 1, &y)];
        let slot = Duration::from_millis(200);
        // Another policy in force (a paired comparison's turn): y is started again, then x, one after the other.
        let (one, both) = ([view("x", 0, &x), view("y2", 1, &y2)], [view("x2", 0, &x2), view("y2", 1, &y2)]);
        let mut auto = ganged(&pair);
        auto.follow(14, slot, &pair);
        auto.follow(15, slot, &pair[..1]);
        auto.follow(16, slot, &one);
        auto.follow(17, slot, &both);
        auto.resume();
        // Taken up again: the set it finds keeps gang, no trial, and its first window is the drift's baseline.
        assert!(see(&mut auto, 100, &both, &calls_at(18.0, &[9000, 9000])).is_empty());
        let choices = auto.choices();
        assert_eq!((choices[0].policy.as_str(), choices[0].trying), ("gang", false), "{choices:?}");
        assert_eq!(choices[0].why, "gang kept from the set before, x left, x2 joined; next trial in 30 s");
        assert!(see(&mut auto, 102, &both, &calls_at(18.4, &[9800, 9800])).is_empty());
        // Not followed: a new set, tried afresh.
        let mut blind = ganged(&pair);
        blind.resume();
        let fresh = see(&mut blind, 100, &both, &calls_at(18.0, &[9000, 9000]));
        assert!(fresh[0].trying && fresh[0].why.starts_with("new set of jobs"), "{fresh:?}");
        // Both replaced at once on the same PUs, within 10 s of the pair's last slot: gang kept, but tried within
        // 30 s of the succession (no job in common); 11 s after, or on other PUs: tried afresh.
        // The pair followed at slot 14, then `jobs` at slot `at`; what `auto` says as it is taken up again at 100.
        let back = |at: u64, jobs: &[JobView<'_>]| {
            let mut auto = ganged(&pair);
            auto.follow(14, slot, &pair);
            auto.follow(at, slot, jobs);
            auto.resume();
            let said = see(&mut auto, 100, jobs, &calls_at(18.0, &[9000, 9000]));
            (said, auto.choices())
        };
        let (said, choices) = back(64, &both);
        assert!(said.is_empty(), "{said:?}");
        assert_eq!(choices[0].why, "gang kept from the set before, x, y left, x2, y2 joined; next trial in 30 s");
        let (x3, y3) = (pus("0-2"), pus("0-2"));
        let elsewhere = [view("x3", 0, &x3), view("y3", 1, &y3)];
        for (at, jobs) in [(65, &both), (15, &elsewhere)] {
            let (fresh, _) = back(at, jobs);
            assert!(fresh[0].trying && fresh[0].why.starts_with("new set of jobs"), "{fresh:?}");
        }
    }

    #[test]
    fn a_window_in_which_the_new_job_makes_no_call_yet_is_no_baseline() {
        let (x, y, y2) = (pus("0-1"), pus("0-1"), pus("0-1"));
        let pair = [view("x", 0, &x), view("y", 1, &y)];
        let after = [view("x", 0, &x), view("y2", 1, &y2)];
        let mut auto = ganged(&pair);
        see(&mut auto, 15, &after, &calls_at(1.0, &[1800, 0]));
        // y2 sets up for two windows (no call), then exchanges at x's rate: no drift, no trial.
        for (slot, y) in [(17, 0), (19, 0), (21, 800), (23, 1600), (25, 2400), (27, 3200)] {
            let x = 1800 + 400 * (slot - 15);
            let said = see(&mut auto, slot, &after, &calls_at((slot - 10) as f64 * 0.2, &[x, y]));
            assert!(said.is_empty(), "slot {slot}: {said:?}");
        }
    }

    #[test]
    fn a_window_stretches_until_it_has_enough_calls_and_a_stall_shows_as_one() {
        let (x, y) = (pus("0-1"), pus("0-1"));
        let jobs = [view("x", 0, &x), view("y", 1, &y)];
        let mut auto = Auto::default();
        see(&mut auto, 0, &jobs, &calls_at(0.0, &[0, 0]));
        // 200 calls/s: 80 calls in gang's least window are too few; twice as long is enough.
        assert!(see(&mut auto, 2, &jobs, &calls_at(0.4, &[80, 80])).is_empty());
        assert_eq!(see(&mut auto, 4, &jobs, &calls_at(0.8, &[160, 160]))[0].policy, "cfs");
        // No call at all under cfs: not yet a stall while 200 calls/s would not have made 160 either.
        for (slot, t) in [(5, 1.0), (6, 1.2), (7, 1.4)] {
            assert!(see(&mut auto, slot, &jobs, &calls_at(t, &[160, 160])).is_empty(), "slot {slot}");
        }
        let chosen = see(&mut auto, 8, &jobs, &calls_at(1.6, &[160, 160]));
        assert!(!chosen[0].trying && chosen[0].policy == "gang", "{chosen:?}");
    }
}

#[test]
fn places_hold_their_slots_and_overlap_exactly_when_they_share_one() {
    use super::rows::{Place, Schedule};
    let p = |s: &str| s.parse::<Place>().unwrap();
    assert!(p("1/4").holds(5) && !p("1/4").holds(6) && p("0/1").holds(7));
    // Overlap by brute force over one round of the longer period.
    let all: Vec<Place> =
        [1u32, 2, 4, 8].iter().flat_map(|&period| (0..period).map(move |row| Place { row, period })).collect();
    for a in &all {
        for b in &all {
            let shared = (0..8u64).any(|k| a.holds(k) && b.holds(k));
            assert_eq!(a.overlaps(*b), shared, "{a} {b}");
        }
        for half in a.halves() {
            assert_eq!(half.parent(), Some(*a));
            assert_eq!(half.sibling().and_then(Place::parent), Some(*a));
            assert!(!half.overlaps(half.sibling().unwrap()));
        }
    }
    assert_eq!(p("3/4").to_string(), "3/4");
    for bad in ["4/4", "1/3", "1", "a/2", "0/2048"] {
        assert!(bad.parse::<Place>().is_err(), "{bad}");
    }
    let change = Schedule { place: p("0/4"), from_ms: 1000, before: Some(p("0/2")) };
    assert_eq!((change.at(999), change.at(1000)), (p("0/2"), p("0/4")));
    assert_eq!(Schedule { before: None, ..change }.at(0), Place::ALL);
}
