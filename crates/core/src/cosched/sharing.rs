//! Which jobs share PUs ([`groups`]), and whether they contend for them ([`contending`]): jobs whose ranks want
//! no more CPUs than the PUs they share have run together at full speed, and no slot should take that away.

use std::collections::BTreeMap;

use super::policy::JobView;
use crate::cpulist::CpuList;

/// CPUs the summed demand of jobs may exceed their PUs by and still fit them: what the agent's own work, the
/// kernel's threads and the measurement's edges add to jobs that exactly fill their PUs.
pub const FIT_MARGIN: f64 = 0.1;

/// The sets of jobs that share PUs, directly or through each other, with more than one job: indices into
/// `jobs`, each set sorted, sets in order of their first job.
pub fn groups(jobs: &[JobView<'_>]) -> Vec<Vec<usize>> {
    let pus: Vec<&CpuList> = jobs.iter().map(|j| j.pus).collect();
    sets(&pus).into_iter().filter(|s| s.len() > 1).collect()
}

/// The sets of the PU lists `pus` joined by shared PUs, directly or through each other, a list sharing none a set
/// of its own: indices into `pus`, each set sorted, sets in order of their first list.
pub fn sets(pus: &[&CpuList]) -> Vec<Vec<usize>> {
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut parent: Vec<usize> = (0..pus.len()).collect();
    for i in 0..pus.len() {
        for j in i + 1..pus.len() {
            if pus[i].intersects(pus[j]) {
                let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut sets: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..pus.len() {
        let r = root(&mut parent, i);
        sets.entry(r).or_default().push(i);
    }
    sets.into_values().collect()
}

/// For each job of `jobs`, whether it contends for its PUs: whether the jobs sharing PUs with it, directly or
/// through each other, want more CPUs than there are for them — their demands summed exceed the PUs they span by
/// more than [`FIT_MARGIN`], or those of the jobs confined to some one job's PUs exceed that job's PUs (two jobs
/// on one PU do not fit because a third, idle, spans eight), or one of them has no demand measured (a job not yet
/// seen to run unfrozen, or one the agent cannot measure), which is taken to want every PU it has. A job that
/// shares no PU contends with nobody.
pub fn contending(jobs: &[JobView<'_>]) -> Vec<bool> {
    let mut out = vec![false; jobs.len()];
    let over = |wanted: f64, pus: usize| wanted > pus as f64 + FIT_MARGIN;
    for members in groups(jobs) {
        let mut span = CpuList::new();
        for &i in &members {
            for pu in jobs[i].pus.iter() {
                span.insert(pu);
            }
        }
        let known: Option<Vec<f64>> = members.iter().map(|&i| jobs[i].demand).collect();
        let contend = known.is_none_or(|demands| {
            over(demands.iter().sum(), span.len())
                || members.iter().any(|&i| {
                    let within = members.iter().zip(&demands).filter(|(&k, _)| jobs[k].pus.is_subset(jobs[i].pus));
                    over(within.map(|(_, d)| d).sum(), jobs[i].pus.len())
                })
        });
        for i in members {
            out[i] = contend;
        }
    }
    out
}
