#!/usr/bin/env bash
# `make bench`, part 3: what the agent costs. One agent (private socket and store) manages 16 jobs that share
# every PU, with 100 ms slots, for BENCH_AGENT_SECONDS (default 30) per policy; CPU time (utime+stime of the agent
# and its watchdog) and peak RSS from /proc. Table -> build/bench/agent.md.
set -euo pipefail
cd "$(dirname "$0")/.."
lockstep=$PWD/build/bin/lockstep
seconds=${BENCH_AGENT_SECONDS:-30}
jobs=16
out=build/bench
mkdir -p "$out"
tmp=$(mktemp -d)
pids=()
agent=
cleanup() {
  [ -n "$agent" ] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-agent: needs root (cgroups)" >&2
  exit 2
fi
export LOCKSTEP_SOCKET=$tmp/agent.sock LOCKSTEP_STORE=$tmp/lockstep.db
tck=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }

{
  echo "# Agent overhead: $jobs jobs sharing every PU, 100 ms slots, ${seconds} s per policy ($(nproc) PUs)"
  echo
  echo "| policy | agent CPU (% of one core) | watchdog CPU (%) | agent peak RSS (MiB) | slot switch, median (us) | p99 (us) |"
  echo "|---|---|---|---|---|---|"
} >"$out/agent.md"
for policy in gang boost; do
  rm -f "$LOCKSTEP_STORE"*
  "$lockstep" agent --policy "$policy" --slot 100ms 2>/dev/null &
  agent=$!
  for _ in $(seq 100); do [ -S "$LOCKSTEP_SOCKET" ] && break; sleep 0.05; done
  watchdog=$("$lockstep" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["watchdog_pid"])')
  pids=()
  for i in $(seq "$jobs"); do
    sleep 100000 &
    pids+=($!)
    "$lockstep" adopt --job "bench-$i" --pid $!
  done
  a0=$(cpu_ticks "$agent") w0=$(cpu_ticks "$watchdog")
  t0=$(date +%s.%N)
  sleep "$seconds"
  a1=$(cpu_ticks "$agent") w1=$(cpu_ticks "$watchdog")
  t1=$(date +%s.%N)
  rss=$(rss_kib "$agent")
  for i in $(seq "$jobs"); do "$lockstep" release --job "bench-$i"; done
  kill "${pids[@]}"
  kill "$agent"; wait "$agent" || true
  agent=
  python3 - "$LOCKSTEP_STORE" "$policy" "$a0" "$a1" "$w0" "$w1" "$t0" "$t1" "$tck" "$rss" >>"$out/agent.md" <<'PY'
import sqlite3, statistics, sys
db, policy, a0, a1, w0, w1, t0, t1, tck, rss = sys.argv[1:]
wall = float(t1) - float(t0)
cpu = lambda a, b: (int(b) - int(a)) / int(tck) / wall * 100
d = sorted(r[0] for r in sqlite3.connect(db).execute("SELECT duration_us FROM decisions WHERE action = 'slot'"))
p99 = d[min(len(d) - 1, int(len(d) * 0.99))]
print(f"| {policy} | {cpu(a0, a1):.2f} | {cpu(w0, w1):.2f} | {int(rss) / 1024:.1f} | {statistics.median(d):.0f} | {p99:.0f} |")
PY
done
cat "$out/agent.md"
