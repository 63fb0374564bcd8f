#!/usr/bin/env bash
# `make bench`, part 2: the workloads themselves.
#  - every MPI kernel, classes A and B, 2 ranks, 3 runs each -> build/bench/kernels.md (median time, Mop/s, and
#    the Mop/s of the previous `make bench` on this machine beside them, kept in build/bench/kernels.json)
#  - the PMPI profiler's cost: ping-pong latency with and without it -> build/bench/pmpi.md
#  - corebench, single- and multi-thread on this node's PUs -> build/bench/corebench.md
# BENCH_CLASSES / BENCH_RUNS / BENCH_RANKS override the defaults (A B / 3 / 2; BENCH_RANKS may list several, "1 2").
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
out=build/bench
mkdir -p "$out"
classes=${BENCH_CLASSES:-A B}
runs=${BENCH_RUNS:-3}
ranks=${BENCH_RANKS:-2}
mpi=$(sed -n 's/^# mpirun for the MPI lockstep.s kernels were built with (\(.*\)), on this node:$/\1/p' $bin/mpirun)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "bench: kernels ($classes) with $ranks ranks, $runs runs each ($mpi, idle ranks yield)" >&2
for kernel in ep cg is mg lu; do
  for cls in $classes; do
    for n in $ranks; do
      for ((r = 1; r <= runs; r++)); do
        printf '  %s %s %s ranks run %d/%d\r' "$kernel" "$cls" "$n" "$r" "$runs" >&2
        $bin/mpirun -n "$n" $bin/$kernel --class "$cls" --json >>"$tmp/kernels.jsonl"
      done
    done
  done
done
echo >&2
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
python3 - "$tmp/kernels.jsonl" "$out" "$runs" "$mpi" "$(nproc)" "$commit" <<'PY'
import datetime, json, os, statistics, sys
src, out, runs, mpi, pus, commit = sys.argv[1:]
rows = {}
for line in open(src):
    r = json.loads(line)
    rows.setdefault((r["kernel"], r["class"], r["processes"]), []).append(r)
# The previous run's medians, by kernel, class and rank count (absent the first time).
history = os.path.join(out, "kernels.json")
try:
    before = json.load(open(history))
    previous = {(p["kernel"], p["class"], p["ranks"]): p for p in before["rows"]}
    since = f"{before['date']}, commit {before['commit']}"
except (OSError, ValueError, KeyError):
    previous, since = {}, "none"
lines = [f"# Kernels: median of {runs} runs ({mpi}, {pus} PUs); previous run: {since}", "",
         "| kernel | class | ranks | size | iterations | median time (s) | Mop/s total | previous Mop/s | change | Mop/s/process | verified |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
now = []
for (k, c, n), rs in rows.items():
    t = statistics.median(r["time_s"] for r in rs)
    m = statistics.median(r["mops_total"] for r in rs)
    ok = "all" if all(r["verified"] for r in rs) else "NO"
    p = previous.get((k, c, n))
    prev, change = (f"{p['mops']:.1f}", f"{(m / p['mops'] - 1) * 100:+.1f} %") if p and p["mops"] > 0 else ("—", "—")
    lines.append(f"| {k} | {c} | {n} | {rs[0]['size']} | {rs[0]['iterations']} | {t:.2f} | {m:.1f} | {prev} | {change} | {m / n:.1f} | {ok} |")
    now.append({"kernel": k, "class": c, "ranks": n, "time_s": t, "mops": m, "verified": ok == "all"})
date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
json.dump({"date": date, "commit": commit, "mpi": mpi, "rows": now}, open(history, "w"), indent=1)
open(os.path.join(out, "kernels.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY

echo "bench: PMPI profiler overhead (ping-pong, 8 bytes, runs alternating without/with)" >&2
for ((r = 1; r <= 3 * runs; r++)); do
  for mode in without with; do
    if [ "$mode" = with ]; then
      LOCKSTEP_PMPI_OUT=$tmp/pmpi.jsonl $bin/mpirun -n 2 env LD_PRELOAD="$PWD/build/lib/liblockstep-pmpi.so" \
        $bin/pingpong --iterations 50000 --repeats 5 --json
    else
      $bin/mpirun -n 2 $bin/pingpong --iterations 50000 --repeats 5 --json
    fi | sed "s/^{/{\"mode\":\"$mode\",/" >>"$tmp/pingpong.jsonl"
  done
done
python3 - "$tmp/pingpong.jsonl" "$out/pmpi.md" "$mpi" <<'PY'
import json, statistics, sys
src, dst, mpi = sys.argv[1:]
lat = {}
for line in open(src):
    r = json.loads(line)
    lat.setdefault(r["mode"], []).append(r["latency_us"])
a, b = statistics.median(lat["without"]), statistics.median(lat["with"])
lo_a, lo_b = min(lat["without"]), min(lat["with"])
lines = [f"# PMPI profiler overhead ({mpi}, 8-byte ping-pong, {len(lat['with'])} runs each, alternating)", "",
         "| | median one-way latency (us) | best run (us) |", "|---|---|---|",
         f"| without liblockstep-pmpi | {a:.3f} | {lo_a:.3f} |", f"| with liblockstep-pmpi | {b:.3f} | {lo_b:.3f} |",
         f"| overhead per message (one MPI_Send + one MPI_Recv) | {b - a:.3f} | {lo_b - lo_a:.3f} |"]
open(dst, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY

echo "bench: corebench" >&2
{
  echo '# corebench on this node'
  echo
  echo '```'
  $bin/corebench --seconds 1
  echo '```'
} >"$out/corebench.md"
cat "$out/corebench.md"
echo "bench: tables written to $out/" >&2
