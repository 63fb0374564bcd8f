#!/usr/bin/env python3
"""The most any co-scheduling policy could gain over cfs on one mix of MPI jobs, from what the jobs measure.

    scripts/policy-bound.py [--busy] [--ranks N] [--alone RUNS] [--seconds S] [--sleeping-waits US]
                            PROGRAM:CLASS PROGRAM:CLASS [...]

Root, cgroup v1 cpu controller at /sys/fs/cgroup/cpu, the built kernels (build/bin) and profiler (build/lib). For
each job (e.g. `lu:W ep:A`, N ranks each, 2 by default; ranks yield when they wait unless --busy):

1. alone, RUNS times (3 by default), with lockstep's PMPI profiler: its time from MPI_Init to MPI_Finalize, and the
   share of its ranks' time spent inside MPI calls (waiting for a message or a collective, or copying one);
2. all jobs at once for S seconds (60 by default), each in a cpu cgroup of its own as lockstep's `cfs` places jobs,
   each started again as it ends; the runs that ended before S count (the others ran partly alone). While a job
   is between two runs (mpirun before MPI_Init and after MPI_Finalize) the others run without it; that share is
   printed, and the bound is only as good as it is small (short runs: choose a larger class).

Its speed under cfs is its time alone over its time there. A policy gives the jobs the node's P CPUs (those this
script may run on) in some order; a job at speed s (against alone) needs s x N x (1 - m) CPUs for the work outside
MPI (m its MPI share alone), and s x N if its ranks keep their CPUs while they wait, as yielding and polling ranks
do under every cgroup policy on this kernel (a yield does not leave the rank's cpu cgroup: scripts/yield-handoff.sh).
The speeds that maximise the paired comparison's measure (the mean over the jobs of the log of the speed against
cfs's) under sum(s x need) <= P and s <= 1 are each job the same CPUs (as far as its speed alone allows); printed as
time against cfs, the paired comparison's figure (docs/experiments.md): the bound of every policy that leaves the
waits to their ranks ("no fill") and of one that hands every wait's CPU to another job at no cost ("perfect fill").
A bound, not a forecast: no policy here can be below it. Last, the median time of a 1 µs sleep on this node (timer
slack 1 ns, the CPU otherwise idle): a rank that gives its CPU away for a wait pays at least that to get it back, so
waits much shorter than it (the mean per MPI call is printed) cannot be filled.

With --sleeping-waits US, the jobs run together for S seconds more, as in 2., with ranks that sleep through their
waits (scripts/sleeping-waits.c, built with mpicc: the blocking sends, receives, waits and collectives the kernels
make become their non-blocking forms, tested every US microseconds and slept between; the collectives are then the
library's non-blocking algorithms): the fill a rank can do by itself, against the bound. Both
periods are whole runs one after the other (σ 5-10 % per period on the reference machine), not a paired comparison.

Everything it starts is stopped by process group, and its cgroups removed, pass or fail. A run that fails fails the
measurement (exit 1); bad arguments are one line on stderr and exit 2.
"""
import ctypes
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
PROFILER = os.path.join(ROOT, "build", "lib", "liblockstep-pmpi.so")
CPU = "/sys/fs/cgroup/cpu"
USAGE = ("usage: scripts/policy-bound.py [--busy] [--ranks N] [--alone RUNS] [--seconds S] [--sleeping-waits US] "
         "PROGRAM:CLASS PROGRAM:CLASS [...]")
SHIM = os.path.join(ROOT, "scripts", "sleeping-waits.c")


def refuse(what):
    """Says what was wrong with the arguments or the machine in one line and exits 2."""
    print(f"policy-bound: {what}", file=sys.stderr)
    sys.exit(2)


def whole(flag, text, low, high):
    """TEXT as a whole number from LOW to HIGH, or refusal."""
    if not re.fullmatch(r"[0-9]{1,5}", text) or not low <= int(text) <= high:
        refuse(f"bad {flag} '{text[:40]}' (expected a whole number from {low} to {high}; {USAGE})")
    return int(text)


def parse(argv):
    """The settings and jobs the arguments name."""
    opts = {"busy": False, "ranks": 2, "alone": 3, "seconds": 60, "sleeping-waits": 0}
    jobs = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--busy":
            opts["busy"] = True
        elif a in ("--ranks", "--alone", "--seconds", "--sleeping-waits"):
            if i + 1 == len(argv):
                refuse(f"{a} needs a value ({USAGE})")
            bounds = {"--ranks": (1, 64), "--alone": (1, 20), "--seconds": (10, 3600), "--sleeping-waits": (1, 10000)}[a]
            opts[a[2:]] = whole(a, argv[i + 1], *bounds)
            i += 1
        elif re.fullmatch(r"[a-z]{1,8}:[A-Z]", a):
            program, cls = a.split(":")
            if not os.access(os.path.join(BIN, program), os.X_OK):
                refuse(f"no kernel '{program}' in {BIN} (expected one of the built kernels: make build)")
            jobs.append((program, cls))
        else:
            refuse(f"bad argument '{a[:40]}' (expected a flag or PROGRAM:CLASS such as lu:W; {USAGE})")
        i += 1
    if len(jobs) < 2:
        refuse(f"needs two jobs or more (PROGRAM:CLASS each; {USAGE})")
    return opts, jobs


class Runner:
    """Starts the kernels, each in a process group of its own, and stops what is still running on the way out."""

    def __init__(self, opts, work):
        self.opts = opts
        self.work = work
        self.live = set()
        self.lock = threading.Lock()
        self.groups = []
        self.count = 0
        self.rounds = 0
        self.closed = False

    def group(self, name):
        """A new cpu cgroup of this script's, at the usual weight."""
        path = os.path.join(CPU, f"policy-bound-{os.getpid()}-{name}")
        os.mkdir(path)
        self.groups.append(path)
        return path

    def run(self, program, cls, group=None, shim=None):
        """One run of PROGRAM --class CLS (in cpu cgroup GROUP; with the sleeping waits SHIM preloaded before the
        profiler); its ranks' profiler lines. A failed run fails the measurement."""
        with self.lock:
            if self.closed:
                raise RuntimeError("stopped")
            self.count += 1
            out = os.path.join(self.work, f"{program}-{self.count}.json")
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        env["LOCKSTEP_MPI_BUSY_POLL"] = "1" if self.opts["busy"] else "0"
        preload = f"{shim}:{PROFILER}" if shim else PROFILER
        env["SLEEPING_WAITS_US"] = str(self.opts["sleeping-waits"])
        command = [os.path.join(BIN, "mpirun"), "-x", f"LD_PRELOAD={preload}", "-x", f"LOCKSTEP_PMPI_OUT={out}",
                   "-x", "SLEEPING_WAITS_US",
                   "-n", str(self.opts["ranks"]), os.path.join(BIN, program), "--class", cls]
        if group:
            command = ["sh", "-c", 'echo $$ > "$0/tasks" && exec "$@"', group] + command
        child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 start_new_session=True)
        with self.lock:
            self.live.add(child.pid)
            if self.closed:
                os.killpg(child.pid, signal.SIGKILL)
        _, err = child.communicate()
        with self.lock:
            self.live.discard(child.pid)
        if child.returncode != 0:
            raise RuntimeError(f"{program}.{cls} failed (exit {child.returncode}): {err.decode(errors='replace')[-300:]}")
        with open(out) as f:
            ranks = [json.loads(line) for line in f if line.strip()]
        if len(ranks) != self.opts["ranks"]:
            raise RuntimeError(f"{program}.{cls}: {len(ranks)} profiler lines for {self.opts['ranks']} ranks in {out}")
        return ranks

    def close(self):
        """Stops every run still going (by process group, and any task left in its cgroups) and removes the
        cgroups."""
        with self.lock:
            self.closed = True
            pids = list(self.live)
            groups, self.groups = self.groups, []
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for path in groups:
            try:
                with open(os.path.join(path, "tasks")) as f:
                    for task in f.read().split():
                        try:
                            os.kill(int(task), signal.SIGKILL)
                        except ProcessLookupError:
                            pass
            except OSError:
                pass
        for path in groups:
            deadline = time.monotonic() + 10
            while True:
                try:
                    os.rmdir(path)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        print(f"policy-bound: cannot remove {path} (remove it once its tasks are gone)", file=sys.stderr)
                        break
                    time.sleep(0.1)


def summary(runs):
    """A job's mean time (MPI_Init to MPI_Finalize, its slowest rank) and MPI share over RUNS, and its mean time
    per MPI call, in microseconds."""
    times = [max(r["wall_s"] for r in ranks) for ranks in runs]
    wall = sum(r["wall_s"] for ranks in runs for r in ranks)
    mpi = sum(r["mpi_s"] for ranks in runs for r in ranks)
    calls = sum(r["calls"] for ranks in runs for r in ranks)
    return sum(times) / len(times), mpi / wall, 1e6 * mpi / max(calls, 1)


def shared(runner, jobs, seconds, shim=None):
    """Every job at once, each in a cpu cgroup of its own and started again as it ends, for SECONDS (with the
    sleeping waits SHIM, if given): the profiler lines of each job's runs that ended by then, and the share of the
    SECONDS each job spent between them (mpirun starting a run before its MPI_Init or ending it after its
    MPI_Finalize), in which the others ran without it."""
    stop = time.monotonic() + seconds
    counted = [[] for _ in jobs]
    between = [0.0] * len(jobs)
    errors = []

    def loop(i, program, cls, group):
        try:
            while time.monotonic() < stop and not errors:
                t0 = time.monotonic()
                ranks = runner.run(program, cls, group, shim)
                t1 = time.monotonic()
                if t1 <= stop:
                    counted[i].append(ranks)
                    between[i] += t1 - t0 - max(r["wall_s"] for r in ranks)
        except Exception as e:  # noqa: BLE001 - any failure of a run fails the measurement, and stops the others
            errors.append(str(e))
            runner.close()

    runner.rounds += 1
    groups = [runner.group(f"{runner.rounds}-{i}") for i in range(len(jobs))]
    threads = [threading.Thread(target=loop, args=(i, p, c, g), daemon=True)
               for i, ((p, c), g) in enumerate(zip(jobs, groups))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(errors[0])
    return counted, [b / seconds for b in between]


def best(need, cpus):
    """The speeds (each at most 1) that maximise the sum of their logs under sum(speed x need) <= cpus: each job the
    same CPUs, those a job cannot use at its speed alone shared by the others."""
    speeds = [0.0] * len(need)
    left, open_ = float(cpus), list(range(len(need)))
    while open_:
        share = left / len(open_)
        full = [j for j in open_ if share >= need[j]]
        if not full:
            for j in open_:
                speeds[j] = share / need[j]
            break
        for j in full:
            speeds[j] = 1.0
            left -= need[j]
            open_.remove(j)
    return speeds


def wake_latency():
    """The median time of a 1 µs sleep, in microseconds, over 2,000 with the timer slack at 1 ns (PR_SET_TIMERSLACK)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(29, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_TIMERSLACK)")
    samples = []
    for _ in range(2000):
        t0 = time.perf_counter_ns()
        time.sleep(1e-6)
        samples.append(time.perf_counter_ns() - t0)
    libc.prctl(29, 0, 0, 0, 0)  # back to the default slack, which the jobs started from here inherit
    samples.sort()
    return samples[len(samples) // 2] / 1000


def against(cfs, speeds):
    """The paired comparison's figure: exp of the mean over the jobs of ln(speed under cfs / speed)."""
    return math.exp(sum(math.log(c / s) for c, s in zip(cfs, speeds)) / len(cfs))


def main():
    opts, jobs = parse(sys.argv[1:])
    if os.geteuid() != 0:
        refuse("needs root (it makes cpu cgroups)")
    if not os.path.isfile(os.path.join(CPU, "cpu.shares")):
        refuse(f"no cgroup v1 cpu controller at {CPU} (expected cpu.shares there)")
    for path in (os.path.join(BIN, "mpirun"), PROFILER):
        if not os.path.exists(path):
            refuse(f"{path} is missing (expected the built kernels and profiler: make build)")
    if opts["sleeping-waits"] and not shutil.which("mpicc"):
        refuse("--sleeping-waits needs mpicc (Debian: libopenmpi-dev) to build scripts/sleeping-waits.c")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cpus = len(os.sched_getaffinity(0))
    names = [f"{p}.{c}" for p, c in jobs]
    progress = "busy polling" if opts["busy"] else "yielding"
    with tempfile.TemporaryDirectory(prefix="policy-bound.") as work:
        runner = Runner(opts, work)
        try:
            sleep = wake_latency()
            shim, sleeping = None, None
            if opts["sleeping-waits"]:
                shim = os.path.join(work, "sleeping-waits.so")
                subprocess.run(["mpicc", "-O2", "-shared", "-fPIC", "-o", shim, SHIM, "-ldl"], check=True)
            alone = [summary([runner.run(p, c) for _ in range(opts["alone"])]) for p, c in jobs]
            counted, between = shared(runner, jobs, opts["seconds"])
            if shim:
                sleeping = shared(runner, jobs, opts["seconds"], shim)[0]
        except (RuntimeError, OSError, ValueError, KeyError, subprocess.CalledProcessError) as e:
            print(f"policy-bound: {e}", file=sys.stderr)
            return 1
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            runner.close()
    missing = sorted({n for n, runs in zip(names * 2, counted + (sleeping or [])) if not runs})
    if missing:
        print(f"policy-bound: no run of {', '.join(missing)} ended within {opts['seconds']} s; give more --seconds",
              file=sys.stderr)
        return 1
    under = [summary(runs)[0] for runs in counted]
    cfs = [a[0] / u for a, u in zip(alone, under)]
    ranks = opts["ranks"]
    busy = min(ranks, cpus)  # the CPUs a job alone keeps busy
    no_fill = best([busy] * len(jobs), cpus)
    fill = best([busy * (1 - min(max(a[1], 0.0), 1.0)) for a in alone], cpus)
    print(f"{' + '.join(names)}, {ranks} {progress} ranks each, on {cpus} CPUs "
          f"(alone {opts['alone']} run{'s' if opts['alone'] > 1 else ''} each; together {opts['seconds']} s in {len(jobs)} cpu cgroups)")
    slept = [a[0] / summary(runs)[0] for a, runs in zip(alone, sleeping)] if sleeping else None
    extra = ("", "")
    if slept:
        extra = (f" speed, cfs and sleeping waits of {opts['sleeping-waits']} µs (runs) |", "---|")
    print("| job | alone | MPI share | per MPI call | under cfs (runs) | between runs | speed under cfs | best, no fill "
          f"| best, perfect fill |{extra[0]}")
    print(f"|---|---|---|---|---|---|---|---|---|{extra[1]}")
    for j, (n, a, u, runs) in enumerate(zip(names, alone, under, counted)):
        row = (f"| {n} | {a[0]:.2f} s | {a[1]:.1%} | {a[2]:.0f} µs | {u:.2f} s ({len(runs)}) | {between[j]:.1%} "
               f"| {cfs[j]:.3f} | {no_fill[j]:.3f} | {fill[j]:.3f} |")
        if slept:
            row += f" {slept[j]:.3f} ({len(sleeping[j])}) |"
        print(row)
    print(f"time against cfs, the best any policy could do: no fill {against(cfs, no_fill):.3f}, "
          f"perfect fill {against(cfs, fill):.3f}")
    if max(between) > 0.02:
        print(f"the jobs were between runs up to {max(between):.0%} of the time, in which the others ran without them: "
              "their speeds under cfs are that much too high, and the bound too close to 1 (longer runs: a larger CLASS)")
    if slept:
        print(f"time against cfs with ranks that sleep through their waits: {against(cfs, slept):.3f} "
              "(whole runs, the two periods one after the other)")
    print(f"a 1 µs sleep takes {sleep:.0f} µs here (median of 2,000): the least a rank pays to give its CPU away for a wait")
    return 0


if __name__ == "__main__":
    sys.exit(main())
