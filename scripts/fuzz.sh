#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of outside input (docs/security.md).
#
#   scripts/fuzz.sh build                       builds every target, runs none (`make test` does this beside
#                                               the integration tests, then the smoke run finds them built)
#   scripts/fuzz.sh smoke [SECONDS] [TARGET…]   each target for SECONDS (default 5): part of `make test`
#   scripts/fuzz.sh full [RUNS] [TARGET…]       each target for RUNS executions (default 1000000): `make fuzz`
# (every target unless some are named)
#
# Rust targets (fuzz/fuzz_targets/) are built with libFuzzer (the libfuzzer-sys crate) and its coverage
# instrumentation, which stable Rust provides through `-C passes=sancov-module`; C targets (fuzz/c/) with clang's
# -fsanitize=fuzzer,address. Each run starts from the seeds in fuzz/corpus/TARGET (copied, so the tree is not
# changed) and keeps crashing inputs in build/fuzz/artifacts/. One summary line per target; exit 1 on a finding.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-smoke}
# The smoke run's build (fuzz/Cargo.toml's profile smoke) is quicker to make and slower to run than the full run's.
profile=smoke
case $mode in
  build) (($# == 1)) || { echo "fuzz.sh: build takes no arguments (got ${*:2})" >&2; exit 2; } ;;
  smoke) limit=(-max_total_time="${2:-5}") ;;
  full) limit=(-runs="${2:-1000000}") profile=release ;;
  *) echo "fuzz.sh: unknown mode $mode (expected build, smoke or full)" >&2; exit 2 ;;
esac
if [ $# -ge 2 ] && ! [[ $2 =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: $2 is not a count (expected $mode's SECONDS or RUNS as a positive integer, then TARGET…)" >&2
  exit 2
fi
shift $(( $# < 2 ? $# : 2 ))
only=" $* "
out=build/fuzz
mkdir -p "$out/artifacts" "$out/corpus" "$out/bin"

coverage="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
# With --target, the flags reach the fuzzed code only, not build scripts. SQLite is the system's (Debian's
# libsqlite3-dev), as for the shipped binaries: no target reaches it.
triple=$(rustc -vV | sed -n 's/^host: //p')
LIBSQLITE3_SYS_USE_PKG_CONFIG=1 RUSTFLAGS="$coverage" cargo build --profile "$profile" --locked --quiet \
  --manifest-path fuzz/Cargo.toml --target "$triple" --target-dir "$out/target" --bins
rust_targets=$(sed -n 's/^name = "\([a-z_]*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^lockstep-fuzz$')
for t in $rust_targets; do cp "$out/target/$triple/$profile/$t" "$out/bin/$t"; done
c_targets=""
for src in fuzz/c/*.c; do
  t=$(basename "$src" .c)
  clang -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -Inative/locks -Inative/locks/include "$src" -o "$out/bin/$t" -lpthread
  c_targets="$c_targets $t"
done
[ "$mode" != build ] || exit 0

# hwloc 2.9 itself (Debian 12's libhwloc) crashes on some malformed XML within seconds of fuzzing
# (fuzz/findings/hwloc-2.9-crash.xml): the smoke run leaves that target to `make fuzz`, which reports it.
smoke_skip="topology_xml"
all=" $(echo $rust_targets $c_targets) "
for t in $only; do
  [[ $all == *" $t "* ]] || { echo "fuzz.sh: no target $t (expected one of:$all)" >&2; exit 2; }
done
# run_one TARGET: fuzzes TARGET, leaving its summary line in $out/TARGET.summary.
run_one() {
  local t=$1 log=$out/$1.log result stats
  rm -rf "$out/corpus/$t"
  mkdir -p "$out/corpus/$t"
  if [ -d "fuzz/corpus/$t" ]; then cp fuzz/corpus/"$t"/* "$out/corpus/$t/" 2>/dev/null || true; fi
  if "$out/bin/$t" "${limit[@]}" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$out/artifacts/$t-" "$out/corpus/$t" >"$log" 2>&1; then
    result=ok
  else
    result=FOUND
  fi
  stats=$( (grep -E '^#[0-9]+' "$log" | tail -1 | sed -E 's/^#([0-9]+)[[:space:]]+[A-Z]+[[:space:]]+cov: ([0-9]+) ft: ([0-9]+).*exec\/s: ([0-9]+).*/\1 runs, cov \2, features \3, \4 exec\/s/') || true)
  echo "fuzz: $t: $result, ${stats:-no stats} (log: $log)" > "$out/$t.summary"
}

# One target per CPU at a time (each libFuzzer run is one thread); the summaries in the targets' order.
ran=()
for t in $rust_targets $c_targets; do
  if [ "$only" != "  " ] && [[ $only != *" $t "* ]]; then continue; fi
  if [ "$mode" = smoke ] && [[ " $smoke_skip " == *" $t "* ]]; then
    echo "fuzz: $t: skipped in the smoke run (hwloc's own crashes; see docs/security.md)" > "$out/$t.summary"
  else
    while (($(jobs -rp | wc -l) >= $(nproc))); do wait -n || true; done
    run_one "$t" &
  fi
  ran+=("$t")
done
wait
failed=0
for t in "${ran[@]}"; do
  cat "$out/$t.summary"
  if grep -q ": FOUND," "$out/$t.summary"; then failed=1; fi
done
exit $failed
