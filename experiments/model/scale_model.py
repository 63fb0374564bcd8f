#!/usr/bin/env python3
"""A discrete-event model of a cluster of co-scheduled MPI jobs, built on SimPy (fluid processor sharing).

`lockstep experiment run experiments/scale-model.toml` writes the calibration (what the scale experiment
measured) to a JSON file and runs this program on it; this program answers in another JSON
file, which the report plots. Usage: scale_model.py CALIBRATION.json ANSWER.json

The model (docs/experiments.md states its assumptions):
- A job has a width w (nodes, one rank each), the time T it takes alone, its program, and a communication share c
  (the share of its time alone spent in MPI, from the PMPI profile of its run alone in the scale experiment).
- Jobs are submitted at given times (the measured stream, or a synthetic one) and wait in Slurm's queue until each
  of their nodes runs fewer than `mpl` jobs (OverSubscribe=FORCE:mpl); they leave when their work T is done.
  Between events every job progresses at a constant rate (a fluid model): SimPy processes submissions and
  completions, and the rates are worked out again whenever the set of running jobs changes.
- Capacity: on a real cluster a node's CPU is shared equally by the jobs active on it; a rank paces its job, so a
  job progresses at the share of its busiest node. On the measured cluster of network namespaces every node is the
  same few host CPUs: a job progresses at the host share of its ranks relative to the share it had alone, where
  a rank asks for the CPU while it computes and for a part y of the time it waits in MPI (MPI progress `yield`
  gives the rest away; y calibrated on the cfs measurements).
- Coordination: a job whose ranks are all given the CPU at once (gang slots, Slurm's time slices) progresses at
  its share. Sharing the CPU uncoordinated (cfs), a rank that waits for a partner that is not running spins on its
  share: the job's work grows by 1 + gamma * c * (1 - share) (none alone; gamma per program, calibrated on the cfs
  measurements). On the measured cluster all nodes are the same host CPUs, so even a favoured job shares them,
  uncoordinated, with the favoured jobs of other nodes.
- lockstep gang: jobs get places (row R of period P) exactly as lockstep's controller prolog gives them (same
  algorithm, ported); in each slot a job is favoured where its place holds the slot, frozen where a neighbour
  is favoured, otherwise shares the CPU uncoordinated. A favoured slot loses the spread of its nodes' switches,
  the freeze/thaw time, and delta, the time its ranks take to run in step again after a thaw (calibrated on the
  gang measurements). A w-wide job's nodes switch within E[max - min] of w offsets, normal with the deviation of
  the clocks' synchronisation and of the agents' own switch jitter (measured on the test cluster) combined.
- Slurm gang: the controller packs jobs into rows (first fit in arrival order) and cycles them every S seconds; a
  job runs coordinated in its row's slices; every slice of a job loses beta seconds to suspending and resuming it
  (beta calibrated on the slurm-gang measurements; slurmctld signals a job's nodes in parallel, so beta does not
  grow with the job's width). A job starts in the active row when it fits there, else suspended; then the `srun`
  of its batch script asks for its step while the job is suspended, is refused, and waits srun's step_wait
  (SlurmctldTimeout clamped to 60-300 s, plus its PID mod 10) before asking again: a job waits that long times the
  chance that the active row holds one of its neighbours (Slurm 22.05's srun; not calibrated).
- Validation replays each measured case: every job starts when Slurm started it (the queue is not what is
  validated); one job at a time is modelled while the others, and the jobs that failed, hold their nodes and CPU
  for their measured wall time. Where the programs report their timed region (NPB's "Time in seconds"), what is
  modelled and compared is that computation, from when it started: the launch and MPI start-up of a job on a
  host loaded with dozens of ranks, and srun's wait for its step, are measured but not modelled (on real nodes
  the first is small against jobs of minutes; the second is modelled in the extrapolation). The report also shows every job modelled at once (only the starts measured),
  where a job modelled too slow shares the CPU longer and slows the others: errors feed back.
- Controller load: lockstep's hooks cost the controller their measured time per job (prolog, epilog), and every
  node running jobs reads its jobs' places every 2 s (one RPC); Slurm's gang scheduler signals every node of every
  job it suspends or resumes at every slice.
"""

import json
import math
import random
import sys

import simpy

MAX_ROWS = 1024


# --- Places: the same rule as crates/slurm/src/lib.rs (place_new, grow_after) ------------------------------------


def overlaps(a, b):
    m = min(a[1], b[1])
    return a[0] % m == b[0] % m


def free_place(taken):
    longest = max([p for _, p in taken], default=1)
    period = 1
    while period <= longest:
        for row in range(period):
            if not any(overlaps((row, period), t) for t in taken):
                return (row, period)
        period *= 2
    return None


class Matrix:
    """Places of the running jobs; neighbours share a node."""

    def __init__(self):
        self.place = {}
        self.nodes = {}
        self.on_node = {}
        self.neigh = {}

    def neighbours(self, j):
        return self.neigh[j]

    def add(self, j, nodes):
        self.nodes[j] = nodes
        mine = set()
        for n in nodes:
            mine |= self.on_node.setdefault(n, set())
            self.on_node[n].add(j)
        self.neigh[j] = mine
        for k in mine:
            self.neigh[k].add(j)
        neigh = sorted(mine)
        while True:
            p = free_place([self.place[n] for n in neigh])
            if p is not None:
                self.place[j] = p
                return
            largest = min(neigh, key=lambda n: (self.place[n][1], n))
            row, period = self.place[largest]
            if period >= MAX_ROWS:
                self.place[j] = self.place[max(neigh, key=lambda n: (self.place[n][1], -n))]
                return
            self.place[largest] = (row, period * 2)

    def remove(self, j):
        neigh = self.neigh.pop(j)
        for n in self.nodes.pop(j):
            self.on_node[n].discard(j)
        for k in neigh:
            self.neigh[k].discard(j)
        self.place.pop(j, None)
        for k in sorted(neigh, key=lambda k: (-self.place[k][1], k)):
            best = free_place([self.place[n] for n in self.neigh[k]])
            if best is not None and best[1] < self.place[k][1]:
                self.place[k] = best


# --- Rates -----------------------------------------------------------------------------------------------------------


def spread(width, sigma):
    """E[max - min] of `width` normal clock offsets of deviation sigma (seconds)."""
    if width < 2 or sigma <= 0:
        return 0.0
    return 2.0 * sigma * math.sqrt(2.0 * math.log(width))


class Cluster:
    """The running jobs and their rates under one policy."""

    def __init__(self, cfg, policy):
        self.cfg = cfg
        self.policy = policy
        self.jobs = {}
        self.matrix = Matrix()
        self.rows = []
        # Slurm gang: the jobs whose srun waits to ask for its step again, and how long (they do not run yet).
        self.waiting = {}

    def add(self, j, job, waits=True):
        """Job j starts; under Slurm gang its srun waits for its step if it starts suspended and `waits`."""
        self.jobs[j] = job
        if self.policy == "gang":
            self.matrix.add(j, job["nodes"])
        if self.policy == "slurm-gang":
            mine = set(job["nodes"])
            busy = [any(mine & set(self.jobs[k]["nodes"]) for k in row) for row in self.rows]
            # Slurm starts a job in the active row when it fits there, else suspended; the active row is any of
            # the rows with the same chance. Started suspended, the job's srun asks for its step while the job is
            # suspended, is refused, and waits srun's step_wait before asking again: the expected wait.
            wait = sum(busy) / max(1, len(self.rows)) * self.cfg.get("step_wait_s", 0.0)
            if wait > 0.0 and waits:
                self.waiting[j] = wait
            for row, taken in zip(self.rows, busy):
                if not taken:
                    row.append(j)
                    break
            else:
                self.rows.append([j])

    def remove(self, j):
        del self.jobs[j]
        self.waiting.pop(j, None)
        if self.policy == "gang":
            self.matrix.remove(j)
        if self.policy == "slurm-gang":
            for row in self.rows:
                if j in row:
                    row.remove(j)
            self.rows = [r for r in self.rows if r]

    def shares(self, active):
        """The CPU share of every job of `active` when they run: on a real cluster that of its busiest node; on
        the measured one the host's share of its ranks, relative to its share alone. There a rank asks for the
        CPU the share of its time it computes and a part y of the time it waits in MPI (yielding, it gives the
        rest of its turns away): its demand is 1 - y * c."""
        if self.cfg["mode"] == "host":
            cpus = self.cfg["host_cpus"]
            demand = {k: len(self.jobs[k]["nodes"]) * (1.0 - self.cfg["y"] * self.jobs[k]["comm"]) for k in active}
            now = min(1.0, cpus / max(sum(demand.values()), 1e-9))
            return {k: now / min(1.0, cpus / max(demand[k], 1e-9)) for k in active}
        load = {}
        for k in active:
            for n in self.jobs[k]["nodes"]:
                load[n] = load.get(n, 0) + 1
        return {k: 1.0 / max(load[n] for n in self.jobs[k]["nodes"]) for k in active}

    def uncoordinated(self, j, share):
        """The progress of a job sharing its CPUs uncoordinated at `share`: each time a rank waits for a partner
        that is not running it spins (or yields) on its share, so the job's work grows by 1 + gamma * c * (1 -
        share): not at all alone, the more the less of the CPU it has and the more it communicates (c), by its
        program's sensitivity gamma."""
        share = min(1.0, share)
        job = self.jobs[j]
        return share / (1.0 + self.cfg["gamma"].get(job["workload"], 0.0) * job["comm"] * (1.0 - share))

    def lost(self, j):
        """The share of a favoured slot a job loses: its nodes' clock spread, the freeze/thaw, and the time its
        ranks take to get going again after a thaw (delta)."""
        w = len(self.jobs[j]["nodes"])
        lost = spread(w, self.cfg["clock_sigma_s"]) + self.cfg["switch_s"] + self.cfg["delta"]
        return min(1.0, lost / self.cfg["slot_s"])

    def rates(self):
        """Every job's progress rate (work seconds per second), averaged over the policy's cycle."""
        ids = list(self.jobs)
        if not ids:
            return {}
        if self.policy == "cfs":
            return {j: self.uncoordinated(j, s) for j, s in self.shares(ids).items()}
        if self.policy == "slurm-gang":
            slice_s = self.cfg["slurm_slice_s"]
            rate = {j: 0.0 for j in ids}
            host = self.cfg["mode"] == "host"
            lost = min(1.0, self.cfg["beta"] / slice_s)
            for row in self.rows:
                for j, s in self.shares([k for k in row if k not in self.waiting]).items():
                    run = self.uncoordinated(j, s) if host else s
                    rate[j] += run * (1.0 - lost) / len(self.rows)
            return rate
        if self.cfg["mode"] == "host":
            return self.gang_exact(ids)
        return self.gang_real(ids)

    def gang_exact(self, ids):
        """lockstep gang, slot by slot over one cycle of the longest period (the measured cluster's few jobs)."""
        place = self.matrix.place
        cycle = max(place[j][1] for j in ids)
        rate = {j: 0.0 for j in ids}
        for k in range(cycle):
            favoured = {j for j in ids if k % place[j][1] == place[j][0]}
            active = [j for j in ids if j in favoured or not (self.matrix.neighbours(j) & favoured)]
            # On the measured cluster every node is the same host CPUs: a favoured job still shares them,
            # uncoordinated, with the favoured jobs of other nodes.
            for j, s in self.shares(active).items():
                rate[j] += self.uncoordinated(j, s) * (1 - self.lost(j) if j in favoured else 1)
        return {j: r / cycle for j, r in rate.items()}

    def gang_real(self, ids):
        """lockstep gang on a real cluster: in its own slots a job has its nodes to itself (its neighbours are
        frozen); in a slot of a neighbour it is frozen; in the others it shares its busiest node uncoordinated."""
        place = self.matrix.place
        busiest = self.shares(ids)
        rate = {}
        for j in ids:
            neigh = [place[n] for n in self.matrix.neighbours(j)]
            cycle = max([place[j][1]] + [p for _, p in neigh])
            taken = slots_mask(place[j], cycle)
            for p in neigh:
                taken |= slots_mask(p, cycle)
            own = cycle // place[j][1]
            free = cycle - taken.bit_count()
            rate[j] = (own * (1 - self.lost(j)) + free * self.uncoordinated(j, busiest[j])) / cycle
        return rate


def slots_mask(place, cycle):
    """The slots of `place` within one cycle of `cycle` slots, as the bits of an integer."""
    row, period = place
    mask, width = 1 << row, period
    while width < cycle:
        mask |= mask << width
        width *= 2
    return mask


def simulate(cfg, policy, jobs, fixed=()):
    """Runs `jobs` (each: submit, nodes, alone_s, workload, comm) under `policy`; returns each job's slowdown: its
    time from its start to its end over its time alone. Jobs wait in Slurm's queue until every one of their nodes
    runs fewer than cfg["mpl"] jobs (OverSubscribe=FORCE:mpl); the queue is scanned in submission order, a job
    that cannot start holding back none behind it (as backfill does for jobs bound to their nodes).

    A replayed job (a measured one) carries `start`, `wall` and `completed`: it starts when Slurm started it,
    whatever the queue; one that did not complete (a rank died) and those in `fixed` hold their nodes and CPU
    for their measured wall time and have no slowdown. A replayed job that carries `timed` (its program's timed
    region and the same alone) is modelled from when its computation started (that long before it ended) for
    the work of its computation alone, and its slowdown is that of the computation."""
    env = simpy.Environment()

    def modelled(i):
        return i not in fixed and jobs[i].get("completed", True)

    def computes(i):
        return modelled(i) and jobs[i].get("timed") is not None

    def arrival(i):
        job = jobs[i]
        if computes(i):
            return job["start"] + job["wall"] - job["timed"][0]
        return job.get("start", job["submit"])

    def work(i):
        return jobs[i]["timed"][1] if computes(i) else jobs[i]["alone_s"]

    cluster = Cluster(cfg, policy)
    per_node = {}
    queue = []
    remaining = {}
    started = {}
    done = {}
    changed = env.event()

    def start_what_fits():
        for i in list(queue):
            nodes = jobs[i]["nodes"]
            if "start" in jobs[i] or all(per_node.get(n, 0) < cfg["mpl"] for n in nodes):
                queue.remove(i)
                for n in nodes:
                    per_node[n] = per_node.get(n, 0) + 1
                # A computation starts after its srun got its step: it does not wait for it.
                cluster.add(i, jobs[i], waits=not computes(i))
                started[i] = env.now
                if i in cluster.waiting:
                    env.process(wake(i))
                if modelled(i):
                    remaining[i] = work(i)
                else:
                    env.process(leave(i))

    def changes():
        nonlocal changed
        changed.succeed()
        changed = env.event()

    def wake(i):
        """Job i's srun asks for its step again (Slurm gang), and it runs from then on."""
        yield env.timeout(cluster.waiting[i])
        cluster.waiting.pop(i, None)
        changes()

    def leave(i):
        """Job i leaves when it left in the measured run."""
        yield env.timeout(jobs[i]["wall"])
        end(i)
        start_what_fits()
        changes()

    def end(i):
        cluster.remove(i)
        for n in jobs[i]["nodes"]:
            per_node[n] -= 1
        done[i] = env.now

    def arrivals():
        for i in sorted(range(len(jobs)), key=arrival):
            yield env.timeout(max(0.0, arrival(i) - env.now))
            queue.append(i)
            start_what_fits()
            changes()

    def progress():
        last = env.now
        rates = {}
        while len(done) < len(jobs):
            for j, r in rates.items():
                if j in remaining:
                    remaining[j] -= r * (env.now - last)
            last = env.now
            # Done: no work left, or so little that the time to finish it no longer moves the clock (a job
            # crawling for a long simulated time would otherwise be stepped forever by nothing).
            ending = [
                j
                for j, left in remaining.items()
                if left <= 1e-9 or (rates.get(j, 1.0) > 0 and env.now + left / rates.get(j, 1.0) == env.now)
            ]
            for j in ending:
                del remaining[j]
                end(j)
            if ending:
                start_what_fits()
            rates = {j: r for j, r in cluster.rates().items() if j in remaining}
            soonest = min((remaining[j] / r for j, r in rates.items() if r > 0), default=None)
            events = [changed]
            if soonest is not None:
                events.append(env.timeout(max(soonest, 1e-9)))
            yield env.any_of(events)

    env.process(arrivals())
    env.process(progress())
    env.run()
    return {j: (done[j] - started[j]) / work(j) for j in done if modelled(j)}


def mean(values):
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def jitter_sigma(case):
    """The deviation of one agent's slot switch that makes the case's measured p50 spread across its nodes."""
    return case["skew_s"] / max(spread(case["nodes"], 1.0), 1.0)


def case_model(cfg, case):
    """The configuration and policy that model a measured case."""
    c = dict(cfg, slot_s=case["slot_s"], slurm_slice_s=case["slot_s"], clock_sigma_s=jitter_sigma(case))
    return c, case["policy"]


def case_slowdown(cfg, case):
    """The mean slowdown of a measured case's completed jobs, replayed one job at a time: the job starts when Slurm
    started it and progresses as the model says, while every other job holds its nodes and CPU from its measured
    start for its measured wall time."""
    c, policy = case_model(cfg, case)
    jobs = case["jobs"]
    ids = {i for i, j in enumerate(jobs) if j.get("completed", True)}
    # A job that never finishes (a thaw loss longer than its slots) is infinitely slow.
    return mean(simulate(c, policy, jobs, fixed=ids - {i}).get(i, math.inf) for i in sorted(ids))


def free_slowdown(cfg, case):
    """The mean slowdown of a measured case with every completed job progressing as the model says (only the start
    times are measured): errors feed back, as a slower job shares the CPU longer."""
    c, policy = case_model(cfg, case)
    return mean(simulate(c, policy, case["jobs"]).values())


def error(cfg, cases):
    """Squared relative error of the model's mean slowdowns over `cases`."""
    return sum((case_slowdown(cfg, c) / c["measured"] - 1) ** 2 for c in cases)


def fit(cfg, cases, set_value, lo, hi):
    """cfg with the value in [lo, hi] that, set by `set_value(cfg, value)`, gives the least error over `cases`
    (cfg unchanged when there is no case to fit on): eleven values across the range, then eleven across the
    two steps around the best, three times."""
    if not cases:
        return cfg
    best = None
    floor = lo
    for _ in range(3):
        step = (hi - lo) / 10
        for k in range(11):
            value = lo + k * step
            trial = dict(cfg, gamma=dict(cfg["gamma"]))
            set_value(trial, value)
            err = error(trial, cases)
            if best is None or err < best[0]:
                best = (err, value, trial)
        lo, hi = max(floor, best[1] - step), best[1] + step
    return best[2]


def fitted(cfg, cases):
    """cfg with y and each program's gamma fitted on the cfs cases of `cases` (by turns, two rounds), delta on
    their gang cases and beta on their slurm-gang cases."""
    cfs = [c for c in cases if c["policy"] == "cfs"]
    programs = sorted({j["workload"] for c in cfs for j in c["jobs"]})
    cfg = dict(cfg, gamma={p: 1.0 for p in programs})
    for _ in range(2):
        cfg = fit(cfg, cfs, lambda t, v: t.__setitem__("y", v), 0.0, 1.0)
        for p in programs:
            cfg = fit(cfg, cfs, lambda t, v, p=p: t["gamma"].__setitem__(p, v), 0.0, 8.0)
    cfg = fit(cfg, [c for c in cases if c["policy"] == "gang"], lambda t, v: t.__setitem__("delta", v), 0.0, 0.5)
    cfg = fit(cfg, [c for c in cases if c["policy"] == "slurm-gang"], lambda t, v: t.__setitem__("beta", v), 0.0, 4.0)
    return cfg


def validate(host, cases):
    """Every measured case against the model fitted without the measurements of its cluster size (held out):
    a case never validates a parameter fitted on itself. `model` is the replay (case_slowdown), `free` every job
    modelled at once (free_slowdown)."""
    out = []
    for c in cases:
        others = [o for o in cases if o["nodes"] != c["nodes"]]
        cfg = fitted(host, others) if others else fitted(host, cases)
        model = case_slowdown(cfg, c)
        out.append(
            {
                "nodes": c["nodes"],
                "policy": c["policy"],
                "measured": c["measured"],
                "timed": c.get("timed", False),
                "earlier": c.get("earlier", []),
                "model": model,
                "free": free_slowdown(cfg, c),
                "error": model / c["measured"] - 1,
            }
        )
    return out


def programs(cases):
    """Each measured program's communication share on real nodes: the one it had alone on its narrowest
    measured width (wider jobs on the measured cluster put several ranks on each host CPU, which inflates it)."""
    narrowest = {}
    for c in cases:
        for j in c["jobs"]:
            w = len(j["nodes"])
            if j["workload"] not in narrowest or w < narrowest[j["workload"]][0]:
                narrowest[j["workload"]] = (w, j["comm"])
    return {p: c for p, (_, c) in sorted(narrowest.items())}


def synthetic(nodes, seed, load, horizon_s, max_width, comm):
    """A stream on `nodes` nodes: widths log-uniform from 1 to max_width, alone 30-120 s, programs drawn evenly
    from `comm` (program -> communication share), Poisson arrivals offering `load` node-seconds of work per
    node-second."""
    rng = random.Random(seed)
    widths_mean = (max_width - 1) / math.log(max_width) if max_width > 1 else 1
    mean_alone = 75.0
    rate = load * nodes / (widths_mean * mean_alone)
    jobs, at = [], 0.0
    names = sorted(comm)
    while at < horizon_s:
        w = min(nodes, max(1, int(round(math.exp(rng.uniform(0, math.log(max_width)))))))
        first = rng.randrange(nodes)
        program = rng.choice(names)
        jobs.append(
            {
                "submit": at,
                "nodes": [(first + i * max(1, nodes // w)) % nodes for i in range(w)],
                "alone_s": rng.uniform(30, 120),
                "workload": program,
                "comm": comm[program],
            }
        )
        at += rng.expovariate(rate)
    return jobs


def main():
    calibration_path, answer_path = sys.argv[1], sys.argv[2]
    with open(calibration_path) as f:
        cal = json.load(f)
    host = {
        "mode": "host",
        "host_cpus": cal["host_cpus"],
        "gamma": {},
        "y": 0.0,
        "delta": 0.0,
        "beta": 0.0,
        "switch_s": cal["switch_s"],
        "step_wait_s": cal["step_wait_s"],
        "mpl": cal["mpl"],
    }
    cases = [c for c in cal["cases"] if c["policy"] in ("cfs", "gang", "slurm-gang") and c["jobs"]]
    validation = validate(host, cases)
    host = fitted(host, cases)
    # The agents' own switch jitter, from the widest measured gang case, adds to the clocks' offsets.
    gang = [c for c in cases if c["policy"] == "gang"]
    jitter = jitter_sigma(max(gang, key=lambda c: c["nodes"])) if gang else 0.0
    real = dict(host, mode="real", mpl=cal["extrapolate_mpl"])
    answers = []
    for nodes in cal["extrapolate_nodes"]:
        max_width = min(1024, nodes)
        jobs = synthetic(nodes, cal["seed"], cal["load"], cal["horizon_s"], max_width, programs(cases))
        for label, policy, extra in [
            ("cfs", "cfs", {}),
            ("slurm-gang 30s", "slurm-gang", {"slurm_slice_s": 30.0}),
            ("lockstep gang, PTP 1us", "gang", {"clock_sigma_s": math.hypot(1e-6, jitter)}),
            ("lockstep gang, NTP 1ms", "gang", {"clock_sigma_s": math.hypot(1e-3, jitter)}),
            ("lockstep gang, NTP 10ms", "gang", {"clock_sigma_s": math.hypot(1e-2, jitter)}),
            # delta was fitted where every node is the same two CPUs shared by dozens of ranks; on nodes of
            # their own a thawed job's ranks find their CPUs free: the bound without it.
            ("lockstep gang, NTP 1ms, no thaw loss", "gang", {"clock_sigma_s": math.hypot(1e-3, jitter), "delta": 0.0}),
        ]:
            cfg = dict(real, slot_s=cal["slot_s"], slurm_slice_s=30.0, clock_sigma_s=0.0)
            cfg.update(extra)
            slow = simulate(cfg, policy, jobs)
            wide = [s for j, s in slow.items() if len(jobs[j]["nodes"]) >= 256]
            answers.append(
                {
                    "nodes": nodes,
                    "policy": label,
                    "jobs": len(jobs),
                    "mean_slowdown": mean(slow.values()),
                    "wide_slowdown": mean(wide) if wide else None,
                }
            )
    skew = []
    for label, sigma in [("PTP 1us", 1e-6), ("NTP 1ms", 1e-3), ("NTP 10ms", 1e-2)]:
        for w in [2, 16, 64, 256, 1024]:
            loss = min(1.0, (spread(w, math.hypot(sigma, jitter)) + cal["switch_s"]) / cal["slot_s"])
            skew.append({"clock": label, "width": w, "lost": loss})
    controller = []
    for nodes in cal["extrapolate_nodes"]:
        max_width = min(1024, nodes)
        widths_mean = (max_width - 1) / math.log(max_width) if max_width > 1 else 1
        jobs_per_s = cal["load"] * nodes / (widths_mean * 75.0)
        hooks_s = (cal["prolog_ctld_ms"] + cal["epilog_ctld_ms"]) / 1e3
        slurm_rpcs = 2 * nodes * 2 / 30.0  # every job's nodes suspended and resumed every 30 s slice (MPL 2)
        controller.append(
            {
                "nodes": nodes,
                "jobs_per_s": jobs_per_s,
                "hook_busy": jobs_per_s * hooks_s,
                "refresh_rpcs": nodes / cal["refresh_s"],
                "slurm_gang_rpcs": slurm_rpcs,
            }
        )
    with open(answer_path, "w") as f:
        json.dump(
            {
                "simpy": simpy.__version__,
                "gamma": host["gamma"],
                "y": host["y"],
                "delta": host["delta"],
                "beta": host["beta"],
                "comm": programs(cases),
                "jitter_s": jitter,
                "validation": validation,
                "extrapolation": answers,
                "skew": skew,
                "controller": controller,
            },
            f,
            indent=1,
        )


if __name__ == "__main__":
    main()
