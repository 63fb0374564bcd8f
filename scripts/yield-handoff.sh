#!/usr/bin/env bash
# Measures whether a thread that calls sched_yield() hands its CPU to another job's thread, which decides whether a
# co-scheduling policy can fill the waits of yielding MPI ranks (docs/experiments.md, "The yield case"). Root, with
# the cgroup v1 cpu controller mounted (this machine: /sys/fs/cgroup/cpu).
#
#   scripts/yield-handoff.sh [--mix ROUNDS]
#
# Without --mix: a thread that only yields and a thread that only works share one CPU for 5 s, in three
# placements — two cpu cgroups (one per job, as lockstep and Slurm place jobs), one cpu cgroup, and one cpu cgroup
# with the yielder at nice -10 and the worker at nice 19 — and the worker's speed against its speed alone is
# printed for each. With --mix ROUNDS: also lu class W and ep class A, 2 yielding ranks each, run again and again for
# 40 s per placement (two cgroups, one cgroup, one cgroup with lu at nice -10 and ep at nice 19), the placements in
# turn for ROUNDS rounds; the mean time of each job's runs is printed per placement (lu W alone: ~3.3 s, ep A ~3.9 s).
# A job starts runs until 40 s have passed, so its last run may end after the other's loop, partly alone.
#
# Everything it starts is stopped by PID and its cgroups removed, pass or fail.
set -euo pipefail
usage="usage: scripts/yield-handoff.sh [--mix ROUNDS]"
rounds=0
if (($# > 0)); then
  [[ $# -eq 2 && $1 == --mix && $2 =~ ^[1-9][0-9]?$ ]] || { echo "yield-handoff: bad arguments '$*' (expected nothing or --mix ROUNDS, ROUNDS 1-99; $usage)" >&2; exit 2; }
  rounds=$2
fi
((EUID == 0)) || { echo "yield-handoff: needs root (it makes cpu cgroups and sets nice -10)" >&2; exit 2; }
cpu=/sys/fs/cgroup/cpu
[[ -f $cpu/cpu.shares ]] || { echo "yield-handoff: no cgroup v1 cpu controller at $cpu (expected cpu.shares there)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
if ((rounds > 0)); then
  for p in mpirun lu ep; do
    [[ -x $bin/$p ]] || { echo "yield-handoff: $bin/$p is missing (expected the built kernels: make build)" >&2; exit 2; }
  done
fi

work=$(mktemp -d)
groups=("$cpu/yield-handoff-a.$$" "$cpu/yield-handoff-b.$$")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2> /dev/null || kill -TERM "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  for g in "${groups[@]}"; do
    [[ -d $g ]] || continue
    while read -r t; do echo "$t" > "$cpu/tasks" 2> /dev/null || true; done < "$g/tasks"
    rmdir "$g" 2> /dev/null || echo "yield-handoff: cannot remove $g (remove it by hand once its tasks are gone)" >&2
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir "${groups[@]}"

# One thread on the last CPU for SECONDS: yields in a loop (`yield`) or counts work (`work`); prints its count.
cat > "$work/spin.c" << 'EOF'
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int yield = strcmp(argv[1], "yield") == 0;
    double seconds = atof(argv[2]);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sysconf(_SC_NPROCESSORS_ONLN) - 1, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) return 1;
    double start = now();
    unsigned long n = 0;
    while (now() - start < seconds) {
        if (yield) sched_yield();
        else for (volatile int i = 0; i < 1000; i++) {}
        n++;
    }
    printf("%lu\n", n);
    return 0;
}
EOF
cc -O2 -o "$work/spin" "$work/spin.c"

# Starts COMMAND… in cpu cgroup GROUP at nice NICE, in a process group of its own; its PID in $started.
start_in() {
  local group=$1 nice=$2
  shift 2
  setsid bash -c 'echo $$ > "$1/tasks" && shift && exec nice -n "$1" "${@:2}"' _ "$group" "$nice" "$@" &
  started=$!
  pids+=("$started")
}

# The worker's count over 5 s beside a yielder, placed as PLACEMENT (two | one | one-nice), in $work/count.
beside_yielder() {
  local a=${groups[0]} b=${groups[1]} ny=0 nw=0
  case $1 in
    one) b=$a ;;
    one-nice) b=$a ny=-10 nw=19 ;;
  esac
  start_in "$a" "$ny" "$work/spin" yield 5 > /dev/null
  local y=$started
  start_in "$b" "$nw" "$work/spin" work 5 > "$work/count"
  wait "$y"
  wait "$started"
}

alone=$("$work/spin" work 5)
echo "a working thread beside a yielding one on one CPU, 5 s each: its speed against alone ($alone iterations)"
for placement in two one one-nice; do
  beside_yielder "$placement"
  count=$(cat "$work/count")
  case $placement in
    two) what="two cpu cgroups (one per job)" ;;
    one) what="one cpu cgroup" ;;
    one-nice) what="one cpu cgroup, yielder nice -10, worker nice 19" ;;
  esac
  awk -v c="$count" -v a="$alone" -v w="$what" 'BEGIN { printf "  %-52s %.2f\n", w, c / a }'
done
((rounds > 0)) || exit 0

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset LOCKSTEP_MPI_BUSY_POLL # the ranks yield (build/bin/mpirun)
# Runs PROGRAM --class CLASS with 2 ranks again and again for 40 s; prints the runs and their mean time. A run that
# fails fails the measurement.
runs() {
  local program=$1 class=$2 n=0 total=0 t0 t1
  local end=$((SECONDS + 40))
  while ((SECONDS < end)); do
    t0=$(date +%s%N)
    "$bin/mpirun" -n 2 "$bin/$program" --class "$class" > /dev/null 2>&1 || { echo "yield-handoff: $program.$class failed" >&2; exit 1; }
    t1=$(date +%s%N)
    total=$((total + t1 - t0)) n=$((n + 1))
  done
  awk -v t="$total" -v n="$n" -v p="$program" 'BEGIN { printf "%s %.2f s (%d runs)", p, t / n / 1e9, n }'
}
echo "lu W + ep A, 2 yielding ranks each, 40 s per placement: mean time of a run"
for round in $(seq "$rounds"); do
  for placement in two one one-nice; do
    a=${groups[0]} b=${groups[1]} nl=0 ne=0
    case $placement in
      one) b=$a ;;
      one-nice) b=$a nl=-10 ne=19 ;;
    esac
    start_in "$a" "$nl" bash -c "$(declare -f runs); bin=$(printf %q "$bin"); runs lu W" > "$work/lu"
    l=$started
    start_in "$b" "$ne" bash -c "$(declare -f runs); bin=$(printf %q "$bin"); runs ep A" > "$work/ep"
    wait "$l"
    wait "$started"
    printf '  round %d %-9s %s, %s\n' "$round" "$placement" "$(cat "$work/lu")" "$(cat "$work/ep")"
  done
done
