#!/usr/bin/env bash
# `make bench`, part 4: the worst case of always-on counting. A syscall-bound program (dd with 1-byte blocks: a
# read and a write per byte, each firing the syscall and scheduler tracepoints) runs uncounted, counted by the
# agent (per-cgroup counters on the job's PUs) and by `perf stat` (per-thread counters), with 2 and with 50
# events (experiments/counters.toml's sets). The time is dd's own (from its first copy), so no tool's start-up
# counts; the median of BENCH_COUNTERS_RUNS (default 7) runs. Overhead per syscall in ns.
# Table -> build/bench/counters.md.
set -euo pipefail
cd "$(dirname "$0")/.."
lockstep=$PWD/build/bin/lockstep
runs=${BENCH_COUNTERS_RUNS:-7}
bytes=${BENCH_COUNTERS_BYTES:-1000000}
out=build/bench
mkdir -p "$out"
tmp=$(mktemp -d)
agent=
holder=
cleanup() {
  [ -n "$agent" ] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null
  [ -n "$holder" ] && kill "$holder" 2>/dev/null && wait "$holder" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-counters: needs root (cgroups, perf)" >&2
  exit 2
fi
export LOCKSTEP_SOCKET=$tmp/agent.sock LOCKSTEP_STORE=$tmp/lockstep.db
two="task-clock,page-faults"
fifty=$(sed -n 's/^events = "\(task-clock,cpu-clock[^"]*\)"/\1/p' experiments/counters.toml | head -1)
[ -n "$fifty" ] || { echo "bench-counters: no 50-event set in experiments/counters.toml" >&2; exit 2; }

# dd_seconds: dd's own elapsed time ("…, 1.23 s, …" on its last stderr line) from the command's stderr.
dd_seconds() { awk -F', ' '/copied/ {sub(/ s$/, "", $(NF - 1)); print $(NF - 1)}'; }
ddcmd=(dd if=/dev/zero of=/dev/null bs=1 "count=$bytes")
n=0
# median CMD...: runs CMD $runs times, prints the median of dd's time in seconds.
median() {
  local i
  for ((i = 0; i < runs; i++)); do
    "$@" 2>&1 >/dev/null | dd_seconds
  done | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}
as_job() { n=$((n + 1)); "$lockstep" run --job "bench-counters-$$-$n" --place any -- "${ddcmd[@]}"; }
start_agent() {
  rm -f "$LOCKSTEP_STORE"*
  "$lockstep" agent --events "$1" --sample-interval 1s 2>/dev/null &
  agent=$!
  for _ in $(seq 200); do [ -S "$LOCKSTEP_SOCKET" ] && break; sleep 0.05; done
}
stop_agent() { kill "$agent"; wait "$agent" || true; agent=; }

declare -A t
start_agent ""
t[none]=$(median as_job)
stop_agent
for set in two fifty; do
  start_agent "${!set}"
  t[lockstep-$set]=$(median as_job)
  stop_agent
  # perf stat registers tracepoints when it starts; a second perf holding them registered (as the agent does)
  # keeps that out of every run but the first.
  sleep 1000 &
  sleeper=$!
  perf stat -e "${!set}" -p "$sleeper" -o /dev/null 2>/dev/null &
  holder=$!
  sleep 3
  t[perf-$set]=$(median perf stat -e "${!set}" -o /dev/null -- "${ddcmd[@]}")
  kill "$holder" "$sleeper" 2>/dev/null || true
  wait "$holder" 2>/dev/null || true
  holder=
done

syscalls=$((2 * bytes))
{
  echo "# Counting cost on a syscall-bound program: dd, 1-byte blocks, $syscalls syscalls, median of $runs runs ($(nproc) PUs)"
  echo
  echo "| counted by | events | dd time (s) | overhead | per syscall (ns) |"
  echo "|---|---|---|---|---|"
  printf '| nothing (agent running, no events) | 0 | %s | - | - |\n' "${t[none]}"
  for tool in lockstep perf; do
    for set in two fifty; do
      label=$([ "$tool" = lockstep ] && echo "lockstep agent (per cgroup)" || echo "perf stat (per thread)")
      count=$([ "$set" = two ] && echo 2 || echo 50)
      awk -v base="${t[none]}" -v x="${t[$tool-$set]}" -v s="$syscalls" -v l="$label" -v c="$count" \
        'BEGIN {printf "| %s | %s | %s | %+.1f %% | %.0f |\n", l, c, x, (x / base - 1) * 100, (x - base) * 1e9 / s}'
    done
  done
} >"$out/counters.md"
cat "$out/counters.md"
