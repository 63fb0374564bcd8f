#!/usr/bin/env python3
"""Third-party programs under liblockstep-mutex: every lock against glibc's own mutex (docs/locks.md).

Three widely used multi-threaded programs that Debian packages, each of which takes pthread mutexes on its hot path:

  sysbench-threads  sysbench's thread benchmark, all threads on one mutex, the holder yields 10 times while it holds
                    it (--thread-locks=1 --thread-yields=10): the holder leaves its CPU inside the critical section.
                    Measure: events/s.
  pigz              the parallel gzip compressor: its threads hand blocks to each other through mutexes and condition
                    variables (pigz -p THREADS on a fixed 48 MiB input). Measure: MB/s of input.
  memcached         the key-value store, its worker threads (-t THREADS) under its own load generator, memcslap with
                    as many client threads setting keys over loopback (port 21987). Measure: sets/s.

Each runs with glibc's mutex (no preload) and with every lock through the interposer (LD_PRELOAD, LOCKSTEP_LOCK), at
1, 2 and 4 threads per CPU, and at 1 thread per CPU with one spinning co-runner process per CPU. Runs of a
repetition are interleaved lock by lock; medians over the repetitions. A run that fails or exceeds its time limit
counts as 0. Prints a markdown table (glibc's measure, then each lock's ratio to it) and the worst ratio of each
lock; --json FILE also writes every run.

  scripts/bench-locks.py [--reps N] [--locks L1,L2,...] [--programs P1,...] [--interposer PATH] [--json FILE]
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCKS = ["ttas", "ticket", "mcs", "cna", "mcs-pt", "cna-pt", "shfl"]
PROGRAMS = ["sysbench-threads", "pigz", "memcached"]
# (label, threads per CPU, co-runners per CPU)
CONFIGS = [("1x", 1, 0), ("2x", 2, 0), ("4x", 4, 0), ("1x+co", 1, 1)]
PORT = 21987
LIMIT_S = 60


def fail(why):
    """One line on stderr, exit status 2."""
    print(f"bench-locks: {why}", file=sys.stderr)
    sys.exit(2)


def env_for(lock, interposer):
    """The environment of a run: glibc (lock None) or the interposer with `lock`."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lock:
        env["LD_PRELOAD"] = interposer
        env["LOCKSTEP_LOCK"] = lock
    return env


def timed(cmd, env, stdin=None):
    """Runs `cmd`; returns (seconds, stdout) or None when it failed or exceeded LIMIT_S."""
    start = time.monotonic()
    try:
        out = subprocess.run(cmd, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             timeout=LIMIT_S, check=True)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    return time.monotonic() - start, out.stdout.decode(errors="replace")


def sysbench_threads(threads, env, _work):
    got = timed(["sysbench", "threads", f"--threads={threads}", "--thread-locks=1", "--thread-yields=10",
                 "--time=2", "run"], env)
    m = got and re.search(r"total number of events:\s+(\d+)", got[1])
    return int(m.group(1)) / 2.0 if m else 0.0


def pigz(threads, env, work):
    with open(work["input"], "rb") as f:
        got = timed(["pigz", "-p", str(threads), "-c"], env, stdin=f)
    return work["input_mb"] / got[0] if got else 0.0


def port_taken():
    """Whether something already listens on PORT (a server left over would be measured instead of ours)."""
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=0.1).close()
        return True
    except OSError:
        return False


def memcached(threads, env, _work):
    if port_taken():
        fail(f"port {PORT} is taken: another memcached? (expected it free for the benchmark's own server)")
    server = subprocess.Popen(["memcached", "-u", "root", "-U", "0", "-l", "127.0.0.1", "-p", str(PORT),
                               "-t", str(threads), "-m", "64"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if server.poll() is not None:
                return 0.0
            if port_taken():
                break
            time.sleep(0.05)
        else:
            return 0.0
        sets = 10000
        got = timed(["memcslap", "-s", f"127.0.0.1:{PORT}", "-c", str(threads), "-t", "set", "-e", str(sets)],
                    env_for(None, None))
        m = got and re.search(r"Time to set\s+(\d+) keys by\s+\d+ threads:\s+([0-9.]+) seconds", got[1])
        return int(m.group(1)) / float(m.group(2)) if m and float(m.group(2)) > 0 else 0.0
    finally:
        server.kill()
        server.wait()


RUN = {"sysbench-threads": sysbench_threads, "pigz": pigz, "memcached": memcached}


def corunners(count):
    """`count` processes that spin until killed."""
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(count)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--locks", default=",".join(LOCKS))
    p.add_argument("--programs", default=",".join(PROGRAMS))
    p.add_argument("--interposer", default=os.path.join(ROOT, "build/lib/liblockstep-mutex.so"))
    p.add_argument("--json")
    a = p.parse_args()
    locks = a.locks.split(",")
    programs = a.programs.split(",")
    if not 1 <= a.reps <= 100:
        fail(f"bad --reps {a.reps} (expected 1 to 100)")
    if bad := [x for x in locks if x not in LOCKS]:
        fail(f"bad --locks {','.join(bad)} (expected some of {','.join(LOCKS)})")
    if bad := [x for x in programs if x not in PROGRAMS]:
        fail(f"bad --programs {','.join(bad)} (expected some of {','.join(PROGRAMS)})")
    if not os.path.isfile(a.interposer):
        fail(f"no interposer at {a.interposer} (expected liblockstep-mutex.so: make build)")
    needed = {"sysbench-threads": "sysbench", "pigz": "pigz", "memcached": "memcslap"}
    if missing := [needed[x] for x in programs if not shutil.which(needed[x])]:
        fail(f"missing {', '.join(missing)} (expected scripts/deps.sh to have installed them)")
    cpus = len(os.sched_getaffinity(0))
    work = {}
    with tempfile.TemporaryDirectory() as tmp:
        work["input"] = os.path.join(tmp, "input")
        # 48 MiB of compressible text, the same every time.
        with open(work["input"], "w") as f:
            x = 12345
            lines = []
            for i in range(1_200_000):
                x = (x * 1103515245 + 12345) % 2147483648
                lines.append(f"{i} {x} {x % 977} lockstep\n")
            f.write("".join(lines))
        work["input_mb"] = os.path.getsize(work["input"]) / 1e6
        runs = []
        variants = [None] + locks
        for rep in range(1, a.reps + 1):
            for program in programs:
                for label, per_cpu, co in CONFIGS:
                    spinners = corunners(co * cpus)
                    try:
                        for lock in variants:
                            value = RUN[program](per_cpu * cpus, env_for(lock, a.interposer), work)
                            runs.append({"program": program, "config": label, "lock": lock or "glibc",
                                         "repetition": rep, "value": value})
                            print(f"  {program} {label} {lock or 'glibc'} #{rep}: {value:.1f}", file=sys.stderr)
                    finally:
                        for s in spinners:
                            s.send_signal(signal.SIGKILL)
                            s.wait()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f, indent=1)
    med = {}
    for r in runs:
        med.setdefault((r["program"], r["config"], r["lock"]), []).append(r["value"])
    med = {k: statistics.median(v) for k, v in med.items()}
    unit = {"sysbench-threads": "events/s", "pigz": "MB/s", "memcached": "sets/s"}
    print(f"Third-party programs, {cpus} CPUs, {a.reps} repetitions, medians; glibc's measure, then each lock "
          "through liblockstep-mutex as a ratio to glibc (≥ 1: as fast or faster).\n")
    print("| program | config | glibc | " + " | ".join(locks) + " |")
    print("|---|---|---|" + "---|" * len(locks))
    worst = {}
    for program in programs:
        for label, _, _ in CONFIGS:
            base = med[(program, label, "glibc")]
            cells = []
            for lock in locks:
                ratio = med[(program, label, lock)] / base if base else 0.0
                if lock not in worst or ratio < worst[lock][0]:
                    worst[lock] = (ratio, f"{program} {label}")
                cells.append(f"{ratio:.2f}")
            print(f"| {program} | {label} | {base:.1f} {unit[program]} | " + " | ".join(cells) + " |")
    print("\nWorst ratio to glibc over every program and configuration:\n")
    for lock in locks:
        print(f"- {lock}: {worst[lock][0]:.2f} ({worst[lock][1]})")


if __name__ == "__main__":
    main()
