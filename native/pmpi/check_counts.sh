#!/bin/sh
# Test: the profiler counts a real kernel's calls and bytes exactly as the kernel makes them, appends one line per
# rank to a file, and writes nothing when LOCKSTEP_PMPI_OUT is unset. The job name (the rank's user sets it) is a
# JSON string whatever it holds: it cannot add keys to the report.
# usage: check_counts.sh MPIRUN LU LIBPMPI
set -eu
mpirun=$1 lu=$2 lib=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
hostile='x","rank":99,"tab":"	\\'
LOCKSTEP_JOB=$hostile LOCKSTEP_PMPI_OUT=$dir/all.jsonl "$mpirun" -n 2 env LD_PRELOAD="$lib" "$lu" --class S >/dev/null
env -u LOCKSTEP_PMPI_OUT "$mpirun" -n 2 env LD_PRELOAD="$lib" "$lu" --class S >/dev/null
python3 - "$dir" "$hostile" <<'PY'
import json, os, sys
d, hostile = sys.argv[1], sys.argv[2]
assert sorted(os.listdir(d)) == ["all.jsonl"], f"unexpected files: {os.listdir(d)}"
lines = [json.loads(l) for l in open(f"{d}/all.jsonl")]
assert sorted(r["rank"] for r in lines) == [0, 1], "one line per rank"
assert all(r["job"] == hostile and "tab" not in r for r in lines), "the job name must stay one string"
# lu (NPB LU) class S on a 2x1 grid: n = 12, interior planes 1..10, 50 iterations. Per plane and sweep one column of
# the 10 interior points (5 doubles each) goes to the neighbour: rank 0 sends in the lower sweep, rank 1 in the upper.
# The residual (once before the iterations and once in each) exchanges u's halos with 4 MPI_Sendrecv_replace (one per
# side; MPI_PROC_NULL where there is no neighbour).
planes, it, rows = 10, 50, 10
for r in lines:
    f = r["functions"]
    assert f["MPI_Send"]["calls"] == it * planes, f["MPI_Send"]
    assert f["MPI_Send"]["bytes"] == f["MPI_Send"]["calls"] * rows * 5 * 8
    assert f["MPI_Recv"]["calls"] == f["MPI_Send"]["calls"]
    assert f["MPI_Sendrecv_replace"]["calls"] == (it + 1) * 4, f["MPI_Sendrecv_replace"]
    assert r["families"]["p2p"]["calls"] == f["MPI_Send"]["calls"] * 2 + f["MPI_Sendrecv_replace"]["calls"]
    assert 0 < r["mpi_s"] < r["wall_s"] and abs(r["comm_ratio"] - r["mpi_s"] / r["wall_s"]) < 1e-5
    print(f"rank {r['rank']}: {r['calls']} calls, {r['bytes']} bytes, comm ratio {r['comm_ratio']:.3f}")
print("counts match the kernel's communication")
PY
