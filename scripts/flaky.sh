#!/usr/bin/env bash
# The flake hunt: runs each integration test binary N times with two CPU-burning processes beside it (a loaded
# node, as CI's is), then prints one table: binary, runs, failures, and the first failure's message.
#
#   scripts/flaky.sh [N] [BINARY…]     N defaults to 10; BINARY: a test binary of crates/lockstep/tests (agent,
#                                      slurm, dcs, doors, run, stat, telemetry, hostile, bad_input, locks), or
#                                      vm/NAME for a script of tests/vm (cgroup-v2, numa, …); default: every
#                                      cargo test binary of crates/lockstep/tests
#
# Needs root for the root tests (as make test runs them) and a build (make build). Exit status: 0 when nothing
# failed, 1 otherwise; each failed run's output stays in build/flaky/BINARY-RUN.log.
set -uo pipefail
cd "$(dirname "$0")/.."
prog=scripts/flaky.sh
runs=10
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
  runs=$1
  shift
fi
((runs >= 1 && runs <= 1000)) || { echo "$prog: N $runs (expected 1 to 1000)" >&2; exit 2; }
binaries=("$@")
if ((${#binaries[@]} == 0)); then
  for f in crates/lockstep/tests/*.rs; do binaries+=("$(basename "$f" .rs)"); done
fi
for b in "${binaries[@]}"; do
  case $b in
    vm/*) [[ -x tests/$b ]] || { echo "$prog: no guest script tests/$b (expected vm/NAME of tests/vm)" >&2; exit 2; } ;;
    *) [[ -f crates/lockstep/tests/$b.rs ]] || { echo "$prog: no test binary $b (expected a file of crates/lockstep/tests, or vm/NAME)" >&2; exit 2; } ;;
  esac
done
[[ -x build/bin/lockstep ]] || { echo "$prog: build/bin/lockstep missing (run make build first)" >&2; exit 2; }

out=build/flaky
mkdir -p "$out"
# Two processes that burn a CPU each, stopped by PID however this script ends.
burners=()
stop_burners() { ((${#burners[@]})) && kill "${burners[@]}" 2>/dev/null; wait "${burners[@]}" 2>/dev/null; }
trap stop_burners EXIT
for _ in 1 2; do
  (while :; do :; done) &
  burners+=($!)
done

# As make test runs them: every prerequisite required, every agent under the capabilities the unit grants.
export LOCKSTEP_BIN=$PWD/build/bin LOCKSTEP_REQUIRE_ALL=1
LOCKSTEP_AGENT_CAPS=$(sed -n 's/^AGENT_CAPS := //p' Makefile)
export LOCKSTEP_AGENT_CAPS
table=()
failed_any=0
for b in "${binaries[@]}"; do
  failures=0 first=""
  for ((i = 1; i <= runs; i++)); do
    log=$out/${b//\//-}-$i.log
    if [[ $b == vm/* ]]; then
      cmd=(timeout 1800 "tests/$b")
    else
      cmd=(timeout 1800 cargo test --release --locked -q -p lockstep --test "$b" -- --include-ignored)
    fi
    if "${cmd[@]}" > "$log" 2>&1; then
      rm -f "$log"
    else
      ((failures++))
      # The first failure's message: the panic's line (or the script's last line) and the one after it.
      [[ -n $first ]] || first=$(grep -m1 -A1 "panicked at\|FAILED\|timed out" "$log" | tr '\n' ' ' | cut -c1-200)
      [[ -n $first ]] || first=$(tail -n 1 "$log" | cut -c1-200)
    fi
  done
  ((failures == 0)) || failed_any=1
  table+=("$(printf '%-14s %5d %9d  %s' "$b" "$runs" "$failures" "${first:--}")")
  echo "$prog: $b: $failures of $runs failed" >&2
done
printf '%-14s %5s %9s  %s\n' BINARY RUNS FAILURES "FIRST FAILURE"
printf '%s\n' "${table[@]}"
exit "$failed_any"
