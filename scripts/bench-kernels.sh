#!/usr/bin/env bash
# `make bench`, part 2: the workloads themselves.
#  - every MPI kernel, classes A and B, 2 ranks, 3 runs each -> build/bench/kernels.md (median time, Mop/s, and
#    the Mop/s of the previous `make bench` on this machine beside them, kept in build/bench/kernels.json)
#  - what every kernel moves: the PMPI profiler's bytes per rank per iteration at 2, 4, 8 and 16 ranks, class A
#    -> build/bench/bytes.md (times mean nothing with more ranks than CPUs; bytes do)
#  - the PMPI profiler's cost: ping-pong latency with and without it -> build/bench/pmpi.md
#  - corebench, single- and multi-thread on this node's PUs -> build/bench/corebench.md
# BENCH_CLASSES / BENCH_RUNS / BENCH_RANKS override the defaults (A B / 3 / 2; BENCH_RANKS may list several, "1 2");
# BENCH_BYTES_CLASS / BENCH_BYTES_RANKS those of the bytes table (A / 2 4 8 16).
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

bytes_class=${BENCH_BYTES_CLASS:-A}
bytes_ranks=${BENCH_BYTES_RANKS:-2 4 8 16}
echo "bench: bytes per rank per iteration, class $bytes_class at $bytes_ranks ranks (PMPI profiler)" >&2
for kernel in ep cg is mg lu; do
  for n in $bytes_ranks; do
    printf '  %s %s ranks\r' "$kernel" "$n" >&2
    rm -f "$tmp/profile"
    # More ranks than CPUs: ranks yield while they wait, and only the bytes count.
    run=$(LOCKSTEP_PMPI_OUT=$tmp/profile $bin/mpirun -n "$n" env \
      LD_PRELOAD="$PWD/build/lib/liblockstep-pmpi.so" $bin/$kernel --class "$bytes_class" --json)
    printf '%s\t%s\t%s\n' "$kernel" "$n" "$run" >>"$tmp/bytes.tsv"
    sed "s/^/$kernel\t$n\t/" "$tmp/profile" >>"$tmp/profiles.tsv"
  done
done
echo >&2
python3 - "$tmp/bytes.tsv" "$tmp/profiles.tsv" "$out/bytes.md" "$bytes_class" "$mpi" <<'PY'
import json, sys
runs, profiles, dst, cls, mpi = sys.argv[1:]
iterations = {}
for line in open(runs):
    kernel, n, text = line.rstrip("\n").split("\t", 2)
    iterations[(kernel, int(n))] = json.loads(text)["iterations"]
per_rank = {}
for line in open(profiles):
    kernel, n, text = line.rstrip("\n").split("\t", 2)
    per_rank.setdefault((kernel, int(n)), []).append(json.loads(text)["bytes"])
ranks = sorted({n for _, n in per_rank})
lines = [f"# Bytes per rank per iteration (PMPI profiler: what each rank passes to MPI calls; class {cls}, {mpi})", "",
         "| kernel | " + " | ".join(f"{n} ranks" for n in ranks) + " |", "|---|" + "---|" * len(ranks)]
for kernel in ["ep", "cg", "is", "mg", "lu"]:
    cells = []
    for n in ranks:
        b = per_rank.get((kernel, n))
        it = iterations.get((kernel, n))
        # A kernel without iterations (ep) counts its whole run as one.
        cells.append(f"{sum(b) / len(b) / max(it, 1) / 1e3:.1f} kB" if b and it is not None else "—")
    lines.append(f"| {kernel} | " + " | ".join(cells) + " |")
open(dst, "w").write("\n".join(lines) + "\n")
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
