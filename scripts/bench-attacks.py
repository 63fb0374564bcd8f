#!/usr/bin/env python3
"""`make bench-agent-attacks` (and `make bench`, part 4): what a user who is not root can make the root agent do.

One private agent (its own socket, store and metrics port) co-schedules two small jobs of spinning processes under
`gang` with 100 ms slots (so that slots switch); each attack runs for BENCH_ATTACKS_SECONDS (default 15) as user
`nobody`, right after an idle window of the same length (the pair's baseline). The many-descriptor job runs against
a second agent under `dcs`, with its own idle window. Attacks (issue 59):

  status flood      8 processes of nobody's, each asking `status` on the control socket in a loop (raw HTTP)
  metrics flood     8 processes of nobody's GETting /metrics and /api/v1/jobs/<unknown> in turn over loopback
  held connections  72 TCP connections of nobody's to the metrics port with unfinished request heads, re-opened
                    every 9 s
  wide cgroup tree  a job over a cgroup delegated to nobody (freezer and cpu), nobody making 5,000 children in it
  deep cgroup tree  the same, a chain 200 deep
  fork and exit     a job of nobody's running `while :; do /bin/true; done`
  many descriptors  (under dcs) a job of 41 processes of nobody's, each holding 20,000 duplicated descriptors of one
                    TCP socket (fewer if the hard NOFILE limit nobody inherits is lower: the table says so), asleep

Measured over each window:
  agent CPU         CPU time of every thread of the agent's process (/proc/PID/task/TID/schedstat, sampled every
                    100 ms), split by each thread's policy (field 41 of .../stat: 1 SCHED_FIFO or 2 SCHED_RR is
                    real-time); a thread that ended between two samples counts as normal for its unseen rest
                    (the process's own utime+stime less what its threads showed). % of one CPU.
  per attacker CPU  (agent CPU in the attack window - in its idle window) / the attacker's CPU, the attacker's
                    processes (and their children, exited or not) being in a v1 cpuacct cgroup of their own
                    (cpuacct.usage). The tree and descriptor attacks build what they hold before the window: in the
                    window the attacker spends (almost) nothing.
  slot lateness     from the agent's store: when each slot switch was done (its `slot` decision's time, when the
                    tick began, plus its prompt_us: every job known to switch promptly frozen, thawed, raised or
                    lowered; an agent that keeps no prompt_us: its duration_us) minus its slot's boundary (slot
                    index x slot length since the epoch), p50 and p99, in ms; slots missed = the boundaries in the
                    window with no record
  whole switch      the same to the end of the whole switch (time + duration_us: the slow jobs, switched last,
                    too), p99 in ms: what the slowly switching jobs' own switches wait for
  bystander         a spinning process at nice 0 outside every job: its CPU over the window, % of one CPU
  root's scrapes    root runs `curl -m 2` on /metrics every 0.5 s: answered 200 / tried

Targets (issue 59), printed beside: agent CPU beyond idle <= 0.25 x the attacker's (plus a floor of 1 % of one CPU,
the idle-to-idle noise, so that an attacker who spends nothing is held to "costs nothing"); agent real-time CPU
<= 5 % of one CPU; lateness p99 within 2 ms of idle; bystander >= 90 % of idle; every scrape answered.

Needs root and the v1 cpuacct and freezer hierarchies. Everything it starts is stopped by PID (process groups it
made) and every cgroup it makes is removed, pass or fail. Table -> build/bench/attacks.md and stdout.

Environment: LOCKSTEP_BIN (directory of lockstep, default build/bin), BENCH_ATTACKS_SECONDS (window length),
BENCH_ATTACKS_ONLY (comma-separated attack keys: status,metrics,held,wide,deep,fork,fds), BENCH_ATTACKS_AGENT_ARGS
(more arguments for both agents, e.g. `--config /etc/lockstep/bench.toml` to name root as a scraper).
"""
import json
import os
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECONDS = 15.0  # BENCH_ATTACKS_SECONDS, read in main
SLOT_S = 0.1
NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
CGROUP = Path("/sys/fs/cgroup")
ACCT = CGROUP / "cpuacct"
DELEGATED = ("freezer", "cpu")
FLOODERS = 8
HELD = 72
HOLD_PERIOD = 9.0
WIDE = 5000
DEEP = 200
FD_PROCS = 41
FDS = 20000

# Targets (issue 59).
CPU_RATIO = 0.25
CPU_FLOOR = 1.0  # % of one CPU
RT_MAX = 5.0  # % of one CPU
LATE_MS = 2.0
BYSTANDER = 0.90

# The attacker, run as nobody (`python3 -I -c ATTACKER MODE ARGS...`). Counting modes print their count on SIGTERM.
ATTACKER = r'''
import os, resource, signal, socket, sys, time
mode, args = sys.argv[1], sys.argv[2:]
count = ok = 0
def done(*_):
    print(count, ok, flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, done)

def ask(family, addr, request):
    global count, ok
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.connect(addr)
        s.sendall(request)
        head = s.recv(65536)
        while s.recv(65536):
            pass
        if head.startswith(b"HTTP/1.1 "):
            count += 1
            ok += head.startswith(b"HTTP/1.1 200") or head.startswith(b"HTTP/1.1 404")
    except OSError:
        time.sleep(0.001)
    finally:
        s.close()

if mode == "status":
    body = b'{"version":3,"op":"status"}'
    req = (b"POST /v1/request HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\nConnection: close\r\n"
           b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    while True:
        ask(socket.AF_UNIX, args[0], req)
elif mode == "metrics":
    port, me = int(args[0]), args[1]
    reqs = [b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % p
            for p in (b"/metrics", b"/api/v1/jobs/no-such-job-" + me.encode())]
    while True:
        for r in reqs:
            ask(socket.AF_INET, ("127.0.0.1", port), r)
elif mode == "hold":
    port, n, period = int(args[0]), int(args[1]), float(args[2])
    ok = -1  # how many were still open at the end of the last period; none ended yet
    while True:
        held = []
        for _ in range(n):
            s = socket.socket()
            try:
                s.connect(("127.0.0.1", port))
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                held.append(s)
            except OSError:
                s.close()
        count = max(count, len(held))
        time.sleep(period)
        still = 0
        for s in held:
            s.setblocking(False)
            try:
                s.recv(1)
            except BlockingIOError:
                still += 1
            except OSError:
                pass
            s.close()
        ok = still
elif mode == "fds":
    procs, want = int(args[0]), int(args[1])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    held = len(os.listdir("/proc/self/fd"))
    while held < min(want, hard):
        os.dup(s.fileno())
        held += 1
    pids = [os.getpid()]
    for _ in range(procs - 1):
        pid = os.fork()
        if pid == 0:
            while True:
                signal.pause()
        pids.append(pid)
    print(held, hard, ",".join(map(str, pids)), flush=True)
    while True:
        signal.pause()
elif mode == "wide":
    for d in args[1:]:
        for i in range(int(args[0])):
            os.mkdir(f"{d}/w{i}")
    print("made", flush=True)
elif mode == "deep":
    for d in args[1:]:
        for _ in range(int(args[0])):
            d += "/d"
            os.mkdir(d)
    print("made", flush=True)
'''


def say(msg):
    print(f"bench-attacks: {msg}", file=sys.stderr, flush=True)


def read(path):
    return Path(path).read_text()


def task_sample(pid):
    """{tid: (cpu ns, policy, name)} of every thread of `pid` now."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            ns = int(read(f"/proc/{pid}/task/{tid}/schedstat").split()[0])
            stat = read(f"/proc/{pid}/task/{tid}/stat")
        except (OSError, ValueError, IndexError):
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = (ns, int(fields[41 - 3]), name)
    return out


def process_ns(pid):
    """utime+stime of the whole process `pid` (its ended threads included), in ns."""
    fields = read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()
    return (int(fields[14 - 3]) + int(fields[15 - 3])) * 1e9 / os.sysconf("SC_CLK_TCK")



def stop_agent(agent):
    """Stops the agent process `agent` by SIGTERM (it restores every job), by SIGKILL past 30 s; waits for it."""
    agent.terminate()
    try:
        agent.wait(timeout=30)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.wait()

class ThreadMeter:
    """The agent's CPU per thread over a window, by policy: sampled every 100 ms by a thread of its own."""

    def __init__(self, pid):
        self.pid = pid
        self.lock = threading.Lock()
        self.threads = None  # tid -> [start ns, last ns, policy, name] while a window is open
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop.wait(0.1):
            self.update()

    def update(self):
        sample = task_sample(self.pid)
        with self.lock:
            if self.threads is None:
                return
            for tid, (ns, policy, name) in sample.items():
                t = self.threads.setdefault(tid, [0, 0, policy, name])
                t[1:] = [ns, policy, name]

    def begin(self):
        sample = task_sample(self.pid)
        with self.lock:
            self.threads = {tid: [ns, ns, policy, name] for tid, (ns, policy, name) in sample.items()}
        self.process0 = process_ns(self.pid)

    def end(self):
        self.update()
        process = process_ns(self.pid) - self.process0
        with self.lock:
            threads, self.threads = self.threads, None
        rt = sum(t[1] - t[0] for t in threads.values() if t[2] in (1, 2))
        normal = sum(t[1] - t[0] for t in threads.values() if t[2] not in (1, 2))
        # The process's time is in ticks (10 ms): only a difference beyond two is a thread that ended unseen.
        unseen = process - rt - normal
        if unseen > 0.02e9:
            normal += unseen
        by_name = {}
        for t in threads.values():
            key = (t[3], "FIFO" if t[2] == 1 else "RR" if t[2] == 2 else "normal")
            by_name[key] = by_name.get(key, 0) + t[1] - t[0]
        busiest = sorted(by_name.items(), key=lambda kv: -kv[1])[:4]
        return rt, normal, busiest

    def close(self):
        self.stop.set()
        self.thread.join()


def group_alive(pgid):
    """Whether a process of process group `pgid` is left (its leader reaped or not)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = read(f"/proc/{pid}/stat")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[5 - 3]) == pgid and fields[0] != "Z":
            return True
    return False


def cpu_ns(pid):
    return int(read(f"/proc/{pid}/schedstat").split()[0])


class Scraper:
    """Root's scrapes of /metrics over a window: `curl -m 2` every 0.5 s, one after the other."""

    def __init__(self, port):
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.tried = self.answered = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        next_at = time.monotonic()
        while not self.stop.is_set():
            r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "2", self.url],
                               capture_output=True, text=True, check=False)
            self.tried += 1
            self.answered += r.stdout.strip() == "200"
            next_at += 0.5
            self.stop.wait(max(0.0, next_at - time.monotonic()))

    def end(self):
        self.stop.set()
        self.thread.join()
        return self.answered, self.tried


class Bench:
    """One run: a private agent at a time, the bystander, the attacks, and what each made (to undo)."""

    def __init__(self, bindir):
        self.lockstep = str(bindir / "lockstep")
        self.tmp = Path(tempfile.mkdtemp(prefix="lockstep-bench-attacks-"))
        self.tmp.chmod(0o755)  # nobody reaches the socket (0666) through it
        self.tag = f"bench-atk-{os.getpid()}"
        self.groups = []  # session leaders of everything started but the agent (killed by process group)
        self.cgroups = []  # cgroup directories made, removed in reverse order
        self.jobs = []  # job names adopted, whose agent cgroups are removed if the agent left them
        self.agent = self.agent_pid = self.meter = self.bystander = None
        self.spinners = []  # (job, process) of the agent's two spinning jobs
        self.slot_stats = {}  # id(window) -> (lateness, missed, whole), read from the store once the agent stopped
        self.store = self.tmp / "lockstep.db"
        self.env = dict(os.environ, LOCKSTEP_SOCKET=str(self.tmp / "agent.sock"), LOCKSTEP_STORE=str(self.store))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]

    # --- processes -----------------------------------------------------------------------------------------------
    def spawn(self, argv, nobody=False, acct=None, stdout=subprocess.DEVNULL):
        """Starts `argv` in a session of its own (as nobody when asked, in cpuacct cgroup `acct` when given)."""
        if nobody:
            argv = AS_NOBODY + argv
        if acct is not None:
            argv = ["sh", "-c", 'echo $$ >"$0/cgroup.procs" && exec "$@"', str(acct)] + argv
        p = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cwd="/",
                             start_new_session=True, text=True)
        self.groups.append(p)
        return p

    def attacker(self, mode, *args, acct=None):
        return self.spawn(["python3", "-I", "-c", ATTACKER, mode, *map(str, args)], nobody=True, acct=acct,
                          stdout=subprocess.PIPE)

    def kill(self, p, sig=signal.SIGKILL):
        """Kills process group `p` (one this bench started) and reaps its leader; returns what it printed."""
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            try:
                out, _ = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                say(f"process {p.pid} ({p.args[-1]}) does not end (frozen?); left as it is")
                out = ""
        if p in self.groups:
            self.groups.remove(p)
        # The rest of the group (forked children, those holding thousands of descriptors slow to close) gone too.
        deadline = time.monotonic() + 10
        while group_alive(p.pid) and time.monotonic() < deadline:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        return out or ""

    def cli(self, *args):
        r = subprocess.run([self.lockstep, *args], env=self.env, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"lockstep {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    # --- cgroups -------------------------------------------------------------------------------------------------
    def mkcg(self, path, owner=None):
        path.mkdir()
        self.cgroups.append(path)
        if owner is not None:
            for f in [path] + [path / n for n in ("cgroup.procs", "tasks", "freezer.state") if (path / n).exists()]:
                os.chown(f, owner, owner)
        return path

    def rmcg(self, path):
        """Removes cgroup `path` and everything below it, deepest first, after thawing it and killing what is in it
        (only processes this bench started can be there)."""
        if not path.is_dir():
            return
        if (path / "freezer.state").exists():
            try:
                (path / "freezer.state").write_text("THAWED")
            except OSError:
                pass
        for dirpath, dirnames, _ in os.walk(path, topdown=False):
            for pid in read(Path(dirpath) / "cgroup.procs").split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for _ in range(100):
                try:
                    os.rmdir(dirpath)
                    break
                except OSError:
                    time.sleep(0.05)

    # --- the agent -----------------------------------------------------------------------------------------------
    def start_agent(self, policy):
        extra = shlex.split(os.environ.get("BENCH_ATTACKS_AGENT_ARGS", ""))
        log = open(self.tmp / f"agent-{policy}.log", "w")
        self.agent = subprocess.Popen(
            [self.lockstep, "agent", "--policy", policy, "--slot", "100ms", "--metrics", f"127.0.0.1:{self.port}",
             *extra], env=self.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            r = subprocess.run([self.lockstep, "status", "--json"], env=self.env, capture_output=True, text=True,
                               check=False)
            if r.returncode == 0:
                self.agent_pid = json.loads(r.stdout)["pid"]
                break
            if self.agent.poll() is not None or time.monotonic() > deadline:
                tail = read(self.tmp / f"agent-{policy}.log")[-2000:]
                raise RuntimeError(f"the {policy} agent did not start: {tail}")
            time.sleep(0.1)
        self.spinners = []
        for row in ("a", "b"):
            p = self.spawn(["sh", "-c", "while :; do :; done"])
            job = f"{self.tag}-{policy}-{row}"
            self.cli("adopt", "-q", "--job", job, "--pid", str(p.pid))
            self.jobs.append(job)
            self.spinners.append((job, p))
        self.meter = ThreadMeter(self.agent_pid)

    def stop_agent(self):
        """Releases the spinning jobs and stops the agent (it restores everything)."""
        self.meter.close()
        self.meter = None
        for job, p in self.spinners:
            try:
                self.cli("release", "-q", "--job", job)
            except RuntimeError as e:
                say(str(e))
            self.kill(p)
        stop_agent(self.agent)
        self.agent = None

    def slots(self, t0, t1):
        """Lateness (ms) of every slot switch between t0 and t1 (when its prompt part was done: its record's time,
        when the tick began, plus its prompt_us, or its duration_us where the agent keeps none, minus its
        boundary), how many boundaries had no record, and the lateness of the whole switches (to time +
        duration_us)."""
        db = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)
        columns = {r[1] for r in db.execute("PRAGMA table_info(decisions)")}
        prompt = "coalesce(prompt_us, duration_us)" if "prompt_us" in columns else "duration_us"
        rows = db.execute(f"SELECT time, {prompt}, duration_us, slot FROM decisions WHERE action = 'slot' AND time "
                          "BETWEEN ? AND ?", (t0, t1)).fetchall()
        db.close()
        late = sorted((t + us / 1e6 - k * SLOT_S) * 1e3 for t, us, _, k in rows)
        whole = sorted((t + us / 1e6 - k * SLOT_S) * 1e3 for t, _, us, k in rows)
        expected = int(t1 / SLOT_S) - int(t0 / SLOT_S)
        return late, max(0, expected - len({k for _, _, _, k in rows})), whole

    # --- one window ----------------------------------------------------------------------------------------------
    def window(self, acct=None):
        scraper = Scraper(self.port)
        usage0 = int(read(acct / "cpuacct.usage")) if acct else 0
        by0 = cpu_ns(self.bystander.pid)
        self.meter.begin()
        t0 = time.time()
        time.sleep(SECONDS)
        t1 = time.time()
        rt, normal, busiest = self.meter.end()
        by = cpu_ns(self.bystander.pid) - by0
        usage = int(read(acct / "cpuacct.usage")) - usage0 if acct else 0
        answered, tried = scraper.end()
        wall = t1 - t0
        pct = lambda ns: ns / 1e9 / wall * 100  # noqa: E731
        return {"t0": t0, "t1": t1, "rt": pct(rt), "normal": pct(normal), "attacker": pct(usage),
                "bystander": pct(by), "scrapes": (answered, tried),
                "busiest": [(n, p, pct(ns)) for (n, p), ns in busiest]}

    def acct_group(self, key):
        return self.mkcg(ACCT / f"{self.tag}-{key}")

    def delegated(self, key):
        """A cgroup in each of DELEGATED, given to nobody (the directory and its procs, tasks and freezer files)
        as Slurm or systemd delegate one: its name relative to the hierarchies' roots, and its directories."""
        name = f"{self.tag}-{key}"
        dirs = [self.mkcg(CGROUP / h / name, owner=NOBODY) for h in DELEGATED]
        return name, dirs

    # --- the attacks ---------------------------------------------------------------------------------------------
    def attack(self, key, acct):
        """Starts attack `key`, its processes in cpuacct cgroup `acct`; returns (done, note): `done()` ends it and
        says what it did, `note` is what the table must say beside it (or None)."""
        if key in ("status", "metrics"):
            if key == "status":
                ps = [self.attacker("status", self.env["LOCKSTEP_SOCKET"], acct=acct) for _ in range(FLOODERS)]
            else:
                ps = [self.attacker("metrics", self.port, i, acct=acct) for i in range(FLOODERS)]

            def done():
                counts = [self.kill(p, signal.SIGTERM).split() or ["0", "0"] for p in ps]
                answers, served = (sum(int(c[i]) for c in counts) for i in (0, 1))
                # 404 is the served answer to the unknown job; anything else (a refusal) is counted apart.
                return f"{answers:,} answers, {served:,} of them served (200 or 404), the rest refused"
            return done, None
        if key == "held":
            p = self.attacker("hold", self.port, HELD, HOLD_PERIOD, acct=acct)
            def done():
                opened, still = (self.kill(p, signal.SIGTERM).split() + ["0", "0"])[:2]
                kept = "no period ended" if still == "-1" else f"{still} still open after {HOLD_PERIOD:g} s"
                return f"{opened} connections opened at once ({kept})"
            return done, None
        if key in ("wide", "deep"):
            name, dirs = self.delegated(key)
            sleeper = self.spawn(["sleep", "100000"], nobody=True, acct=acct)
            for d in dirs:
                (d / "cgroup.procs").write_text(str(sleeper.pid))
            job = f"{self.tag}-{key}"
            self.cli("adopt", "-q", "--job", job, "--cgroup", f"/{name}")
            self.jobs.append(job)
            t = time.monotonic()
            size = WIDE if key == "wide" else DEEP
            maker = self.attacker(key, size, *dirs, acct=acct)
            out, _ = maker.communicate(timeout=600)
            self.groups.remove(maker)
            if out.strip() != "made":
                raise RuntimeError(f"nobody could not make the {key} tree in {dirs[0]}")
            what = (f"{size:,} child cgroups" if key == "wide" else f"a chain {size} deep") + \
                f" in each of {', '.join(DELEGATED)} (made in {time.monotonic() - t:.1f} s, before the window)"

            def done():
                self.cli("release", "-q", "--job", job)
                self.kill(sleeper)
                return what
            return done, None
        if key == "fork":
            p = self.spawn(["sh", "-c", "while :; do /bin/true; done"], nobody=True, acct=acct)
            job = f"{self.tag}-fork"
            self.cli("adopt", "-q", "--job", job, "--pid", str(p.pid))
            self.jobs.append(job)

            def done():
                self.cli("release", "-q", "--job", job)
                self.kill(p)
                return "`while :; do /bin/true; done` in a job"
            return done, None
        if key == "fds":
            p = self.attacker("fds", FD_PROCS, FDS, acct=acct)
            line = p.stdout.readline().split()
            held, hard, pids = int(line[0]), int(line[1]), line[2]
            job = f"{self.tag}-fds"
            self.cli("adopt", "-q", "--job", job, "--pid", pids)
            self.jobs.append(job)
            note = f"nobody's hard NOFILE limit is {hard}" if hard < FDS else None

            def done():
                self.cli("release", "-q", "--job", job)
                self.kill(p)
                return f"{FD_PROCS} processes x {held:,} descriptors, asleep"
            return done, note
        raise ValueError(key)

    def pair(self, key):
        """An idle window, then the attack's; what each measured. An attack that cannot be set up (the agent
        refuses the adoption, say) is said in its row, what it made undone, and the others go on."""
        idle = self.window()
        made, jobs = len(self.cgroups), len(self.jobs)
        try:
            acct = self.acct_group(key)
            done, note = self.attack(key, acct)
            time.sleep(1)  # the attack under way before the window opens
            hit = self.window(acct)
            hit["did"] = done()
            hit["note"] = note
        except (RuntimeError, OSError, ValueError, IndexError, subprocess.TimeoutExpired) as e:
            say(f"{key}: {e}")
            hit = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
            for job in self.jobs[jobs:]:
                subprocess.run([self.lockstep, "release", "-q", "--job", job], env=self.env, capture_output=True,
                               check=False)
        for p in [p for p in self.groups if p is not self.bystander and p not in [s for _, s in self.spinners]]:
            self.kill(p)
        for cg in reversed(self.cgroups[made:]):
            self.rmcg(cg)
            self.cgroups.remove(cg)
        time.sleep(1)
        return idle, hit

    def cleanup(self):
        if self.agent is not None:
            if self.meter is not None:
                self.meter.close()
            stop_agent(self.agent)
        # Nothing may stay frozen: a frozen process cannot be killed.
        for cg in [CGROUP / "freezer/lockstep" / job for job in self.jobs] + self.cgroups:
            if (cg / "freezer.state").exists():
                try:
                    (cg / "freezer.state").write_text("THAWED")
                except OSError:
                    pass
        for p in list(self.groups):
            self.kill(p)
        for job in self.jobs:
            for h in CGROUP.iterdir():
                self.rmcg(h / "lockstep" / job)
        for cg in reversed(self.cgroups):
            self.rmcg(cg)
        shutil.rmtree(self.tmp, ignore_errors=True)


ATTACKS = [
    ("status", "gang", "status flood (8 procs, control socket)"),
    ("metrics", "gang", "metrics flood (8 procs, /metrics + /api/v1/jobs/unknown)"),
    ("held", "gang", f"held connections ({HELD}, heads unfinished, re-opened every {HOLD_PERIOD:.0f} s)"),
    ("wide", "gang", f"wide delegated cgroup tree ({WIDE:,})"),
    ("deep", "gang", f"deep delegated cgroup tree (depth {DEEP})"),
    ("fork", "gang", "job forking and exiting fast"),
    ("fds", "dcs", f"many-descriptor job under dcs ({FD_PROCS} procs x {FDS:,} fds)"),
]


def pctile(xs, q):
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else float("nan")


def table(bench, results):
    lines = [
        f"# Attacks by user nobody on the agent: {SECONDS:g} s windows, 100 ms slots, {os.cpu_count()} CPUs "
        f"(`{Path(bench.lockstep).parent}`)",
        "",
        f"Targets: agent CPU beyond idle <= {CPU_RATIO}x the attacker's (+ {CPU_FLOOR:g} % of one CPU); agent "
        f"real-time CPU <= {RT_MAX:g} % of one CPU; lateness p99 <= idle's + {LATE_MS:g} ms; bystander >= "
        f"{BYSTANDER:.0%} of idle; every root scrape answered. Idle values (the window just before) in parentheses.",
        "",
        "| attack | policy | attacker CPU % | agent real-time CPU % | agent normal CPU % | agent CPU beyond idle per "
        "attacker CPU-s (real-time + normal) | slot lateness p50 / p99 ms (missed) | whole switch p99 ms | "
        "bystander CPU % | root scrapes 200/tried | targets missed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    details = []
    for (key, policy, label), (idle, hit) in results:
        if "error" in hit:
            lines.append(f"| {label} | {policy} | could not run: {hit['error']} ||||||||| not measured |")
            continue
        li, mi, wi = bench.slot_stats[id(idle)]
        lh, mh, wh = bench.slot_stats[id(hit)]
        extra_rt, extra_normal = hit["rt"] - idle["rt"], hit["normal"] - idle["normal"]
        extra = extra_rt + extra_normal
        if hit["attacker"] >= 1.0:
            per = lambda x: max(0.0, x) / hit["attacker"]  # noqa: E731
            ratio = f"{per(extra):.2f} ({per(extra_rt):.2f} + {per(extra_normal):.2f})"
        else:
            ratio = f"n/a: attacker idle, agent {extra:+.1f} % of a CPU"
        missed = []
        if extra > CPU_RATIO * hit["attacker"] + CPU_FLOOR:
            missed.append("cpu")
        if hit["rt"] > RT_MAX:
            missed.append("real-time")
        p99h, p99i = pctile(lh, 0.99), pctile(li, 0.99)
        if not lh or p99h > p99i + LATE_MS or mh > mi:
            missed.append("lateness")
        if hit["bystander"] < BYSTANDER * idle["bystander"]:
            missed.append("bystander")
        a, t = hit["scrapes"]
        if a != t:
            missed.append("scrapes")
        lines.append(
            f"| {label} | {policy} | {hit['attacker']:.1f} | {hit['rt']:.1f} ({idle['rt']:.1f}) | "
            f"{hit['normal']:.1f} ({idle['normal']:.1f}) | {ratio} | "
            f"{pctile(lh, 0.5):.2f} / {p99h:.2f} ({mh}) [idle {pctile(li, 0.5):.2f} / {p99i:.2f} ({mi})] | "
            f"{pctile(wh, 0.99):.2f} ({pctile(wi, 0.99):.2f}) | "
            f"{hit['bystander']:.0f} ({idle['bystander']:.0f}) | {a}/{t} ({idle['scrapes'][0]}/{idle['scrapes'][1]}) | "
            f"{', '.join(missed) or 'none'} |")
        busy = "; ".join(f"{n} ({p}) {c:.1f} %" for n, p, c in hit["busiest"])
        details.append(f"- {label}: {hit['did']}{'; ' + hit['note'] if hit['note'] else ''}. Busiest agent threads: "
                       f"{busy}.")
    return "\n".join(lines + ["", "What each attack did, and the agent's busiest threads in its window:", ""] +
                     details) + "\n"


def main():
    if os.geteuid() != 0:
        print("bench-attacks: needs root (cgroups, user nobody, a private agent): run it as root, e.g. sudo make "
              "bench-agent-attacks", file=sys.stderr)
        return 2
    if not (ACCT / "cpuacct.usage").exists() or not all((CGROUP / h / "cgroup.procs").exists() for h in DELEGATED):
        print(f"bench-attacks: needs the v1 cpuacct, {' and '.join(DELEGATED)} hierarchies under {CGROUP} (the "
              "attacker's CPU is its cpuacct cgroup's; the trees are delegated v1 cgroups)", file=sys.stderr)
        return 2
    global SECONDS  # noqa: PLW0603 - one setting for the whole run
    seconds = os.environ.get("BENCH_ATTACKS_SECONDS", "15")
    try:
        SECONDS = float(seconds)
        if not 1 <= SECONDS <= 3600:
            raise ValueError
    except ValueError:
        print(f"bench-attacks: BENCH_ATTACKS_SECONDS={seconds}: not a window length (expected seconds, 1 to 3600, "
              "e.g. 15)", file=sys.stderr)
        return 2
    bindir = Path(os.environ.get("LOCKSTEP_BIN", ROOT / "build/bin"))
    if not os.access(bindir / "lockstep", os.X_OK):
        print(f"bench-attacks: no lockstep in {bindir} (run make build, or set LOCKSTEP_BIN)", file=sys.stderr)
        return 2
    only = os.environ.get("BENCH_ATTACKS_ONLY")
    attacks = [a for a in ATTACKS if not only or a[0] in only.split(",")]
    unknown = set(only.split(",")) - {a[0] for a in ATTACKS} if only else set()
    if unknown or not attacks:
        print(f"bench-attacks: BENCH_ATTACKS_ONLY={only}: unknown attack {', '.join(sorted(unknown))} (expected "
              f"some of {','.join(a[0] for a in ATTACKS)})", file=sys.stderr)
        return 2
    bench = Bench(bindir)

    def stop(signum, _frame):
        say(f"stopped by signal {signum}: stopping what it started, removing the cgroups it made")
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    results = []
    try:
        bench.bystander = bench.spawn(["sh", "-c", "renice -n 0 -p $$ >/dev/null; exec sh -c 'while :; do :; done'"])
        for policy in dict.fromkeys(p for _, p, _ in attacks):
            bench.start_agent(policy)
            say(f"{policy} agent {bench.agent_pid}, metrics on 127.0.0.1:{bench.port}")
            mine = []
            for a in [a for a in attacks if a[1] == policy]:
                say(f"{a[2]}: idle {SECONDS:g} s, then the attack {SECONDS:g} s")
                mine.append((a, bench.pair(a[0])))
            bench.stop_agent()
            for _, (idle, hit) in mine:
                for w in (idle, hit):
                    bench.slot_stats[id(w)] = bench.slots(w["t0"], w["t1"])
            results += mine
        text = table(bench, results)
    except (RuntimeError, OSError) as e:
        say(str(e))
        return 1
    finally:
        bench.cleanup()
    out = ROOT / "build/bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "attacks.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
