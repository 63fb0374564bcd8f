#!/usr/bin/env bash
# `make bench`: what lockstep itself costs, measured on this node.
#  1. launch overhead: a trivial command started directly vs. as a lockstep job (cgroup create, join, destroy,
#     two store transactions);
#  2. placement: the pi workload on 1 PU vs. every PU of the p-only placement.
# Numbers are medians over N runs; the store is a throwaway file so the node store is untouched.
set -euo pipefail
cd "$(dirname "$0")/.."
lockstep=build/bin/lockstep
runs=${BENCH_RUNS:-30}
store=$(mktemp -d)/bench.db
trap 'rm -rf "$(dirname "$store")"' EXIT
export LOCKSTEP_STORE=$store

if [ "$(id -u)" -ne 0 ]; then
  echo "bench: lockstep run needs root for cgroups" >&2
  exit 2
fi

# median_ms CMD...: run CMD $runs times, print the median wall time in milliseconds.
median_ms() {
  local i t0 t1
  for ((i = 0; i < runs; i++)); do
    t0=$(date +%s%N)
    "$@" >/dev/null
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000))
  done | sort -n | awk '{a[NR] = $1} END {m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.2f", m / 1000}'
}

n=0
job() { n=$((n + 1)); echo "bench-$$-$n"; }
lrun() { $lockstep run --job "$(job)" "$@"; }

case $(stat -fc %T /sys/fs/cgroup) in
  cgroup2fs) hierarchy="cgroup v2" ;;
  *) hierarchy="cgroup v1 controllers" ;;
esac
printf 'lockstep bench on %s (%s PUs, %s, %s runs each)\n\n' "$(hostname)" "$(nproc)" "$hierarchy" "$runs"
printf '%-44s %12s\n' "measurement" "median (ms)"

direct=$(median_ms /bin/true)
wrapped=$(median_ms lrun --place any -- /bin/true)
printf '%-44s %12s\n' "/bin/true, direct" "$direct" "/bin/true, lockstep run --place any" "$wrapped"
printf '%-44s %12s\n' "lockstep launch overhead" "$(awk -v a="$wrapped" -v b="$direct" 'BEGIN {printf "%.2f", a - b}')"

steps=100000000
runs=$(((runs + 2) / 3))
one=$(median_ms lrun --place p-only --cpus 1 -- build/bin/pi --steps $steps)
all=$(median_ms lrun --place p-only -- build/bin/pi --steps $steps)
printf '%-44s %12s\n' "pi 1e8 steps, p-only --cpus 1" "$one" "pi 1e8 steps, p-only (all $(nproc) PUs)" "$all"
printf '%-44s %12s\n' "speed-up, all PUs vs 1 PU" "$(awk -v a="$one" -v b="$all" 'BEGIN {printf "%.2fx", a / b}')"
