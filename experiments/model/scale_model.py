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
  its share. Sharing the CPU uncoordinated (cfs), a rank that waits in MPI for a partner that is not running
  yields its CPU; alone, the CPU goes to its own job's ranks, so those waits were part of its time alone, but
  shared, it goes to other jobs' ranks, which hold it for whole time slices. Each of the log2(w) stages of a
  w-wide job's collectives then waits about as long as the others hold the CPU, so its time grows, beyond its
  share, by 1 + gamma * c0 * log2(w) * o: o the CPU demand of the other jobs its ranks share CPUs with, per CPU
  (none alone), c0 its program's communication share on CPUs of its own (the mean of its runs alone at its
  narrowest width, over every session) and gamma one value for every program (calibrated on the cfs
  measurements). The penalty grows with the load, so the slowdown grows faster than the load (measured: the cfs
  slowdown went 15.7, 34.7, 49.9 at 16, 32, 64 nodes). On the measured cluster all nodes are the same host CPUs,
  so even a favoured job shares them, uncoordinated, with the favoured jobs of other nodes.
- lockstep gang: jobs get places (row R of period P) exactly as lockstep's controller prolog gives them (same
  algorithm, ported); in each slot a job is favoured where its place holds the slot, frozen where a neighbour
  is favoured, otherwise shares the CPU uncoordinated. A favoured slot loses the spread of its nodes' switches,
  the freeze/thaw time, and delta, the time its ranks take to run in step again after a thaw. A job frozen where
  a neighbour is favoured makes no progress, but its ranks on its other nodes run: they wait in MPI for the
  frozen ones and ask for a part s of a CPU each (on the measured cluster, where they share the host CPUs with
  every running job; delta and s calibrated together on the gang measurements). A w-wide job's nodes switch
  within E[max - min] of w offsets, normal with the deviation of the clocks' synchronisation and of the agents'
  own switch jitter (measured on the test cluster) combined.
- Slurm gang, slice by slice as Slurm 22.05's gang scheduler does it: the jobs are kept in a list; a new job
  runs at once if none of its nodes is held by a running job, else it starts suspended; every S seconds the jobs
  that ran move to the end of the list and the running set is built again, first fit from the list's start; a job
  that ends lets the first suspended jobs that now fit resume. A running job runs coordinated; a job resumed
  makes no progress for beta seconds of the slice, its ranks continued and back in step, while they ask for the
  CPU as when they compute (beta calibrated on the slurm-gang measurements; slurmctld signals a job's nodes in
  parallel, so beta does not grow with the job's width); a job that keeps running from one slice to the next, or
  that is never suspended, loses nothing. A job started suspended: the `srun` of its batch script asks for its
  step while the job is suspended, is refused, and waits srun's step_wait (SlurmctldTimeout clamped to 60-300 s,
  plus its PID mod 10) before it asks again, as often as it finds the job suspended (Slurm 22.05's srun; not
  calibrated). Meanwhile the job takes its turns without
  computing. (Slurm's gang.c: jobs running since they started or resumed between slices keep their places in
  the list; a slice with no job suspended changes nothing.)
  A measured Slurm gang case whose slurmctld logged what its gang scheduler did (DebugFlags=Gang: every job
  suspended and resumed, and when) is replayed as logged instead: a job computes while it is not held suspended,
  and for beta after a resume within its computation it asks for the CPU without progressing. What is validated
  there is the progress of the jobs Slurm ran; the slices are modelled in the extrapolation.
- Validation replays each measured case, pooled over the sessions that measured it (the same spec and stream:
  its mean is over its jobs of every session, each replayed in its own session): every job starts when Slurm
  started it (the queue is not what is validated); one job at a time is modelled while the others, and the jobs
  that failed, hold their nodes and CPU for their measured wall time. Where the programs report their timed
  region (NPB's "Time in seconds"), what is modelled and compared is that computation: every job goes through
  what was measured before it (srun's waits for its step, then its launch and MPI start-up, during which it asks
  for a part u of the CPU it asks for computing; u calibrated on the cfs measurements), and its computation
  starts when it was measured to. On real nodes the launch is small against jobs of minutes; srun's waits are
  modelled in the extrapolation. The report also shows every job modelled at once (only the starts and launches
  measured), where a job modelled too slow shares the CPU longer and slows the others: errors feed back.
- Controller load: lockstep's hooks cost the controller their measured time per job (prolog, epilog), and every
  node running jobs reads its jobs' places every 2 s (one RPC); Slurm's gang scheduler signals every node of every
  job it suspends or resumes at every slice.
"""

import itertools
import json
import math
import multiprocessing
import os
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
        # Slurm gang: its list of jobs; the running ones, put in the running set by the last slice (active) or
        # since (fillers: a job that started running, or resumed as another ended); the jobs whose srun waits to
        # ask for its step again (they do not compute yet).
        self.order = []
        self.active = set()
        self.fillers = set()
        self.waiting = set()
        # Replayed jobs that hold their nodes but do not compute now (outside their measured computation).
        self.idle = set()
        # Slurm gang replayed as slurmctld logged it (cfg["recorded"]): the jobs it holds suspended now.
        self.suspended = set()
        # Slurm gang: the running jobs that were resumed by the last slice (they pay for it, beta); replayed as
        # logged, those resumed less than beta ago.
        self.resumed = set()

    def add(self, j, job, waits=True):
        """Job j starts; under Slurm gang its srun waits for its step if it starts suspended (and `waits`: not
        when its waits are replayed as measured)."""
        self.jobs[j] = job
        if self.policy == "gang":
            self.matrix.add(j, job["nodes"])
        if self.policy == "slurm-gang" and not self.cfg.get("recorded"):
            self.order.append(j)
            if self.held().isdisjoint(job["nodes"]):
                self.fillers.add(j)
            elif waits and self.cfg.get("step_wait_s", 0.0) > 0.0:
                # Started suspended: its srun is refused its step and waits.
                self.waiting.add(j)

    def remove(self, j):
        del self.jobs[j]
        self.waiting.discard(j)
        self.idle.discard(j)
        if self.policy == "gang":
            self.matrix.remove(j)
        if self.policy == "slurm-gang" and not self.cfg.get("recorded"):
            self.order.remove(j)
            self.active.discard(j)
            self.fillers.discard(j)
            self.resumed.discard(j)
            before = self.running()
            self.fill(self.fillers)
            self.resumed |= self.running() - before

    def computes(self, j):
        """Replayed job j starts its computation, as measured: under Slurm gang it ran then (it had its step), so
        the running jobs it shares a node with are suspended, and it runs."""
        if self.policy != "slurm-gang" or self.cfg.get("recorded") or j in self.running():
            return
        nodes = self.jobs[j]["nodes"]
        for k in self.running():
            if not set(self.jobs[k]["nodes"]).isdisjoint(nodes):
                self.active.discard(k)
                self.fillers.discard(k)
        self.fillers.add(j)

    def running(self):
        """Slurm gang: the jobs running now (replayed as logged: those not held suspended)."""
        if self.cfg.get("recorded"):
            return set(self.jobs) - self.suspended
        return self.active | self.fillers

    def held(self):
        """Slurm gang: the nodes of the running jobs."""
        return {n for k in self.running() for n in self.jobs[k]["nodes"]}

    def fill(self, into):
        """Slurm gang: the suspended jobs that fit beside the running ones run, first fit in list order, as
        `into` (fillers, or the slice's active jobs)."""
        held = self.held()
        for k in self.order:
            nodes = self.jobs[k]["nodes"]
            if k not in self.active and k not in self.fillers and held.isdisjoint(nodes):
                into.add(k)
                held.update(nodes)

    def slice(self):
        """Slurm gang's time slice is over: if a job is suspended, the jobs the last slice made active go to the
        end of the list (fillers keep their places) and the running set is built again from its start."""
        if len(self.running()) == len(self.order):
            return
        before = self.running()
        self.order = [k for k in self.order if k not in self.active] + [k for k in self.order if k in self.active]
        self.active, self.fillers = set(), set()
        self.fill(self.active)
        self.resumed = self.running() - before

    def shares(self, active, stalled=0):
        """The CPU share of every job of `active` when they run, and the CPU demand of the other jobs it shares
        its CPUs with, per CPU: on a real cluster its busiest node's (a job per node asks for all of its CPUs);
        on the measured one the host's share of its ranks, relative to its share alone, and the other jobs'
        demand on the host's CPUs. There a rank asks for the CPU the share of its time it computes and a part y
        of the time it waits in MPI (yielding, it gives the rest of its turns away): its demand is 1 - y * c. A
        job waiting for its step asks for none and has no share; a replayed job being launched (idle: outside its
        measured computation) asks for a part u of what it asks for computing (u calibrated on the cfs
        measurements) and has no share either. `stalled` ranks of jobs that cannot progress (lockstep gang:
        frozen on other nodes) wait in MPI and ask for a part s of a CPU each, on the measured cluster."""
        launching = [k for k in active if k in self.idle and k not in self.waiting]
        active = [k for k in active if self.computing(k)]
        if self.cfg["mode"] == "host":
            cpus = self.cfg["host_cpus"]
            demand = sum(self.demand(k) for k in active) + self.cfg.get("s", 0.0) * stalled
            launch = sum(self.cfg.get("u", 0.0) * len(self.jobs[k]["nodes"]) for k in launching)
            now = min(1.0, cpus / max(demand + launch, 1e-9))
            return {k: (now / self.alone_share(k), (demand + launch - self.demand(k)) / cpus) for k in active}
        load = {}
        for k in active:
            for n in self.jobs[k]["nodes"]:
                load[n] = load.get(n, 0) + 1
        busiest = {k: max(load[n] for n in self.jobs[k]["nodes"]) for k in active}
        return {k: (1.0 / b, b - 1.0) for k, b in busiest.items()}

    def computing(self, k):
        """Whether job k is in its computation: neither waiting for its step nor being launched (idle)."""
        return k not in self.idle and k not in self.waiting

    def demand(self, k):
        """The host CPUs job k's ranks ask for computing (measured cluster): 1 - y * c each."""
        return len(self.jobs[k]["nodes"]) * (1.0 - self.cfg["y"] * self.jobs[k]["comm"])

    def alone_share(self, k):
        """The CPU share job k's ranks had alone: on the measured cluster the host's CPUs over its demand (at
        most all of them), on a real cluster all of its nodes'."""
        if self.cfg["mode"] != "host":
            return 1.0
        return min(1.0, self.cfg["host_cpus"] / max(self.demand(k), 1e-9))

    def uncoordinated(self, j, shared):
        """The progress of a job sharing its CPUs uncoordinated, `shared` its share (of what it had alone) and
        the other jobs' demand o on its CPUs (per CPU), as shares() gives them: a rank that waits in MPI for a
        partner that is not running yields its CPU to the other jobs' ranks, which hold it for their time
        slices, and a w-wide job waits so at each of the log2(w) stages of its collectives. Its time grows by 1
        + gamma * c0 * log2(w) * o beyond its share: the more the more other jobs ask for its CPUs and the more
        its program communicates (c0), by the program's sensitivity gamma. Alone (o = 0) it progresses at 1:
        the waits for its own ranks were part of its time alone."""
        share, others = shared
        job = self.jobs[j]
        g = self.cfg["gamma"].get(job["workload"], 0.0)
        c0 = self.cfg["comm0"].get(job["workload"], job["comm"])
        stages = math.log2(len(job["nodes"]))
        return min(1.0, share) / (1.0 + g * c0 * stages * others)

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
            rate = {j: 0.0 for j in ids}
            # A job resumed by the last slice loses beta of it; replayed as logged, one resumed is within its
            # beta (held()) and makes no progress. Either way it asks for its share of the CPU.
            lost = 1.0 if self.cfg.get("recorded") else min(1.0, self.cfg["beta"] / self.cfg["slurm_slice_s"])
            running = self.running()
            # On a real cluster the running jobs hold their nodes alone (o = 0).
            for j, s in self.shares([k for k in ids if k in running]).items():
                rate[j] = self.uncoordinated(j, s) * (1.0 - lost if j in self.resumed else 1.0)
            return rate
        if self.cfg["mode"] == "host":
            return self.gang_exact(ids)
        return self.gang_real(ids)

    def gang_exact(self, ids):
        """lockstep gang, slot by slot over one cycle of the longest period (the measured cluster's few jobs):
        the ranks of a job frozen on some of its nodes wait on the others, asking for the CPU (shares)."""
        place = self.matrix.place
        cycle = max(place[j][1] for j in ids)
        rate = {j: 0.0 for j in ids}
        for k in range(cycle):
            favoured = {j for j in ids if k % place[j][1] == place[j][0]}
            active = [j for j in ids if j in favoured or not (self.matrix.neighbours(j) & favoured)]
            # A job frozen where a neighbour is favoured still runs its ranks on its other nodes, where they
            # wait for the frozen ones.
            held = {n for j in favoured for n in self.jobs[j]["nodes"]}
            stalled = sum(
                sum(1 for n in self.jobs[j]["nodes"] if n not in held)
                for j in ids
                if j not in active and self.computing(j)
            )
            # On the measured cluster every node is the same host CPUs: a favoured job still shares them,
            # uncoordinated, with the favoured jobs of other nodes.
            for j, s in self.shares(active, stalled).items():
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
    for their measured wall time and have no slowdown. In a case of computations (cfg["timed"]) a replayed job
    that carries `timed` (its program's timed region and the same alone) goes through what was measured before
    its computation: srun's waits for its step (Slurm gang: as many step_waits as fit in that time), then its
    launch, during which it asks for a part u of the CPU it asks for computing; its computation starts when it
    was measured to, running (under Slurm gang, the jobs running on its nodes are suspended: it had its step).
    A job in `fixed` computes for its measured time; the others for the work of their computation alone, and
    their slowdown is that of the computation. A job that failed asks for no CPU in such a case.

    A job that can no longer progress (under Slurm gang, resumed every slice and losing all of it) would keep
    the slices going for ever: the run ends a thousand times the longest job's time alone after the last
    start, and a job not done by then has no slowdown (the replay takes it as infinitely slow)."""
    env = simpy.Environment()

    def modelled(i):
        return i not in fixed and jobs[i].get("completed", True)

    def measured_phases(i):
        return cfg.get("timed") and "start" in jobs[i]

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
                cluster.add(i, jobs[i], waits=not measured_phases(i))
                started[i] = env.now
                if i in cluster.waiting:
                    env.process(wake(i))
                if measured_phases(i):
                    cluster.idle.add(i)
                    env.process(phases(i))
                elif modelled(i):
                    remaining[i] = jobs[i]["alone_s"]
                else:
                    env.process(leave(i))

    def changes():
        nonlocal changed
        changed.succeed()
        changed = env.event()

    def wake(i):
        """Job i's srun asks for its step again (Slurm gang) after step_wait, as often as it finds the job
        suspended; the job computes from then on."""
        while True:
            yield env.timeout(cfg["step_wait_s"])
            if i not in cluster.jobs or i in cluster.running():
                break
        cluster.waiting.discard(i)
        changes()

    def slices():
        """Slurm gang's time slices, until every job is done."""
        while len(done) < len(jobs):
            yield env.timeout(cfg["slurm_slice_s"])
            cluster.slice()
            changes()

    def phases(i):
        """Job i as measured before its computation (srun's waits, its launch), then its computation: modelled,
        or as measured (fixed); a failed job holds its nodes for its wall time without computing."""
        job = jobs[i]
        timed = job.get("timed") if job.get("completed", True) else None
        before = job["wall"] - timed[0] if timed is not None else job["wall"]
        step_wait = cfg.get("step_wait_s", 0.0)
        waits = math.floor(before / step_wait) if policy == "slurm-gang" and step_wait > 0 else 0
        if waits > 0:
            cluster.waiting.add(i)
            yield env.timeout(waits * step_wait)
            cluster.waiting.discard(i)
            changes()
        yield env.timeout(max(0.0, before - waits * step_wait))
        if timed is None:
            end(i)
            start_what_fits()
            changes()
            return
        cluster.idle.discard(i)
        cluster.computes(i)
        if modelled(i):
            started[i] = env.now
            remaining[i] = timed[1]
            changes()
            return
        changes()
        yield env.timeout(timed[0])
        end(i)
        start_what_fits()
        changes()

    def held(i):
        """Job i suspended and resumed when slurmctld logged it (Slurm gang replayed as it ran); after a resume
        within its computation it makes no progress for beta (its ranks continued and in step again), up to its
        next suspension, while its ranks ask for the CPU (resumed)."""
        job = jobs[i]
        computing = job["start"] + job["wall"] - job["timed"][0] if job.get("timed") else math.inf
        logged = job["suspended"]
        for k, (a, b) in enumerate(logged):
            yield env.timeout(max(0.0, a - env.now))
            cluster.suspended.add(i)
            changes()
            yield env.timeout(max(0.0, b - env.now))
            cluster.suspended.discard(i)
            until = b + cfg["beta"] if b > computing else b
            if k + 1 < len(logged):
                until = min(until, logged[k + 1][0])
            if until > env.now:
                cluster.resumed.add(i)
                changes()
                yield env.timeout(until - env.now)
                cluster.resumed.discard(i)
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
        for i, job in sorted(enumerate(jobs), key=lambda x: x[1].get("start", x[1]["submit"])):
            yield env.timeout(max(0.0, job.get("start", job["submit"]) - env.now))
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
    if policy == "slurm-gang" and cfg.get("recorded"):
        for i, job in enumerate(jobs):
            if job.get("suspended"):
                env.process(held(i))
    elif policy == "slurm-gang":
        env.process(slices())
    last = max((j.get("start", j["submit"]) for j in jobs), default=0.0)
    env.run(until=last + 1000.0 * max((j["alone_s"] for j in jobs), default=0.0) + 1.0)
    return {
        j: (done[j] - started[j]) / (jobs[j]["timed"][1] if measured_phases(j) else jobs[j]["alone_s"])
        for j in done
        if modelled(j)
    }


def mean(values):
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def jitter_sigma(case):
    """The deviation of one agent's slot switch that makes the case's measured p50 spread across its nodes."""
    return case["skew_s"] / max(spread(case["nodes"], 1.0), 1.0)


def case_model(cfg, case):
    """The configuration and policy that model a measured case."""
    c = dict(
        cfg,
        slot_s=case["slot_s"],
        slurm_slice_s=case["slot_s"],
        clock_sigma_s=jitter_sigma(case),
        timed=case.get("timed", False),
        recorded=any(j.get("suspended") for j in case["jobs"]),
    )
    return c, case["policy"]


def replayed(cfg, case):
    """Every completed job of a measured case replayed one at a time: the job starts when Slurm started it and
    progresses as the model says, while every other job holds its nodes and CPU from its measured start for its
    measured wall time. Each job's slowdown as modelled and as measured (of its computation, in a case of
    computations)."""
    c, policy = case_model(cfg, case)
    jobs = case["jobs"]
    ids = {i for i, j in enumerate(jobs) if j.get("completed", True)}
    out = []
    for i in sorted(ids):
        job = jobs[i]
        measured = job["timed"][0] / job["timed"][1] if c["timed"] and "timed" in job else job["wall"] / job["alone_s"]
        # A job that never finishes (a thaw loss longer than its slots) is infinitely slow.
        out.append((simulate(c, policy, jobs, fixed=ids - {i}).get(i, math.inf), measured))
    return out


def groups(cases):
    """The measured cases pooled: the same case (cluster size, policy and quantity: timed regions or wall times)
    measured in several sessions, in the order each first appears."""
    out = {}
    for c in cases:
        out.setdefault((c["nodes"], c["policy"], c.get("timed", False)), []).append(c)
    return list(out.values())


def pooled(cfg, group):
    """The completed jobs of every session of a pooled case, each replayed (replayed): (model, measured)."""
    return [job for c in group for job in replayed(cfg, c)]


def free_slowdowns(cfg, case):
    """The slowdowns of a measured case's completed jobs with every job progressing as the model says (only the
    start times are measured): errors feed back, as a slower job shares the CPU longer."""
    c, policy = case_model(cfg, case)
    return list(simulate(c, policy, case["jobs"]).values())


def error(cfg, cases):
    """Squared relative error of the model's mean slowdowns over `cases`, pooled (groups): a case's mean is over
    its jobs of every session."""
    total = 0.0
    for group in groups(cases):
        jobs = pooled(cfg, group)
        total += (mean(m for m, _ in jobs) / mean(x for _, x in jobs) - 1) ** 2
    return total


def job_error(cfg, cases):
    """Squared log error of the model's slowdown of every job of `cases`, replayed."""
    return sum(math.log(model / measured) ** 2 for c in cases for model, measured in replayed(cfg, c))


def fit(cfg, cases, *params, loss=error, rounds=5):
    """cfg with the values that give the least `loss` over `cases` (cfg unchanged when there is no case to fit
    on), each param a (set_value, lo, hi) whose value in [lo, hi] is set by `set_value(cfg, value)`. The params
    are fitted together, on a grid: seven values across each range, then seven across the two steps around the
    best, `rounds` times in all (parameters that trade off against each other, fitted one at a time, stop
    wherever the first one left them)."""
    if not cases:
        return cfg
    ranges = [(lo, hi) for _, lo, hi in params]
    best = None
    for _ in range(rounds):
        axes = [[lo + k * (hi - lo) / 6 for k in range(7)] for lo, hi in ranges]
        for values in itertools.product(*axes):
            trial = dict(cfg, gamma=dict(cfg["gamma"]))
            for (set_value, _, _), value in zip(params, values):
                set_value(trial, value)
            err = loss(trial, cases)
            if best is None or err < best[0]:
                best = (err, values, trial)
        ranges = [
            (max(floor, v - (hi - lo) / 6), min(ceiling, v + (hi - lo) / 6))
            for v, (lo, hi), (_, floor, ceiling) in zip(best[1], ranges, params)
        ]
    return best[2]


def fitted(cfg, cases):
    """cfg fitted on `cases` by turns, two rounds: u (cases of computations) on the slowdowns of their cfs
    cases' jobs, then y with gamma on the mean slowdowns of their cfs cases; beta (at most a slice) on their
    slurm-gang cases; then delta with s on their gang cases (together, as they trade off too: a loss in every
    favoured slot, or a load that grows with the jobs frozen on some of their nodes; four rounds of the grid,
    as each of its values replays every gang job). y and gamma trade off (a rank that asks for less of the
    CPU while it waits, and a larger penalty for waiting), so they are fitted together; with u they would be
    three values fitted on the means of as few as two cases, which any of many triples matches: u, which tells
    which jobs a launch slows, is fitted on the jobs. One gamma for every program: its communication share c0
    is what tells programs apart in the penalty (a gamma per program, fitted on two cluster sizes, followed
    each size's noise)."""
    cfs = [c for c in cases if c["policy"] == "cfs"]
    slurm = [c for c in cases if c["policy"] == "slurm-gang"]
    slice_s = min((c["slot_s"] for c in slurm), default=0.0)
    programs = sorted({j["workload"] for c in cfs for j in c["jobs"]})
    cfg = dict(cfg, gamma={p: 1.0 for p in programs})
    timed = any(c.get("timed") for c in cfs)
    for _ in range(2):
        if timed:
            cfg = fit(cfg, cfs, (lambda t, v: t.__setitem__("u", v), 0.0, 1.0), loss=job_error)
        cfg = fit(
            cfg,
            cfs,
            (lambda t, v: t.__setitem__("y", v), 0.0, 1.0),
            (lambda t, v: t["gamma"].update({p: v for p in programs}), 0.0, 4.0),
        )
        cfg = fit(cfg, slurm, (lambda t, v: t.__setitem__("beta", v), 0.0, slice_s))
    return fit(
        cfg,
        [c for c in cases if c["policy"] == "gang"],
        (lambda t, v: t.__setitem__("delta", v), 0.0, 0.5),
        (lambda t, v: t.__setitem__("s", v), 0.0, 0.3),
        rounds=4,
    )


def fits(host, cases):
    """The model fitted without the measurements of each cluster size (held out: a case never validates a
    parameter fitted on itself), by size, and fitted on every case; the fits run side by side, one process per
    CPU. The pool is closed and joined, not terminated: its workers end when they read the end of its queue,
    where terminating relies on SIGTERM, which a parent may have left blocked (a worker blocked on the queue's
    lock, SIGTERM blocked, kept a model started by `lockstep experiment run` waiting for ever)."""
    sizes = sorted({c["nodes"] for c in cases})
    subsets = [[o for o in cases if o["nodes"] != n] or cases for n in sizes] + [cases]
    pool = multiprocessing.Pool(max(1, min(len(subsets), os.cpu_count() or 1)))
    try:
        done = pool.starmap(fitted, [(host, s) for s in subsets])
    finally:
        pool.close()
        pool.join()
    return dict(zip(sizes, done)), done[-1]


def validate(held_out, cases):
    """Every measured case, pooled over its sessions (groups), against the model fitted without its cluster size
    (`held_out`, by size). `measured` and `model` are the means of its jobs of every session, replayed
    (pooled); `job_factor` how far their modelled slowdowns typically miss the measured ones; `free` every job
    modelled at once (free_slowdowns); `sessions` each session's own measured mean, oldest first."""
    out = []
    for group in groups(cases):
        c = group[0]
        cfg = held_out[c["nodes"]]
        jobs = pooled(cfg, group)
        model, measured = mean(m for m, _ in jobs), mean(x for _, x in jobs)
        out.append(
            {
                "nodes": c["nodes"],
                "policy": c["policy"],
                "measured": measured,
                "timed": c.get("timed", False),
                "sessions": [s["measured"] for s in sorted(group, key=lambda s: s.get("session", 0.0))],
                "model": model,
                "free": mean(f for s in group for f in free_slowdowns(cfg, s)),
                "error": model / measured - 1,
                "job_factor": math.exp(math.sqrt(mean(math.log(m / x) ** 2 for m, x in jobs))),
            }
        )
    return out


def programs(cases):
    """Each measured program's communication share on real nodes: the mean over its jobs at its narrowest measured
    width, in every case and session (wider jobs on the measured cluster put several ranks on each host CPU, which
    inflates it; pooling the sessions keeps the value from depending on which session ran last)."""
    runs = {}
    for c in cases:
        for j in c["jobs"]:
            runs.setdefault(j["workload"], []).append((len(j["nodes"]), j["comm"]))
    shares = {}
    for program, seen in sorted(runs.items()):
        narrowest = min(w for w, _ in seen)
        comm = [c for w, c in seen if w == narrowest]
        shares[program] = sum(comm) / len(comm)
    return shares


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
        "u": 0.0,
        "delta": 0.0,
        "s": 0.0,
        "beta": 0.0,
        "switch_s": cal["switch_s"],
        "step_wait_s": cal["step_wait_s"],
        "mpl": cal["mpl"],
    }
    cases = [c for c in cal["cases"] if c["policy"] in ("cfs", "gang", "slurm-gang") and c["jobs"]]
    host["comm0"] = programs(cases)
    held_out, host = fits(host, cases)
    validation = validate(held_out, cases)
    # The agents' own switch jitter, from the widest measured gang case, adds to the clocks' offsets.
    gang = [c for c in cases if c["policy"] == "gang"]
    jitter = jitter_sigma(max(gang, key=lambda c: c["nodes"])) if gang else 0.0
    real = dict(host, mode="real", mpl=cal["extrapolate_mpl"])
    answers = []
    for nodes in cal["extrapolate_nodes"]:
        max_width = min(1024, nodes)
        jobs = synthetic(nodes, cal["seed"], cal["load"], cal["horizon_s"], max_width, host["comm0"])
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
                "u": host["u"],
                "delta": host["delta"],
                "s": host["s"],
                "beta": host["beta"],
                "comm": host["comm0"],
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
