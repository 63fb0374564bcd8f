#!/usr/bin/env bash
# scripts/slurm-rpcs.sh [WINDOW] [BUSY...]: what lockstep costs slurmctld, as Slurm's own `sdiag` counts it. Brings
# up the test cluster (tests/cluster/up, LOCKSTEP_RPC_NODES nodes, default 64, lockstep's hooks installed), and for
# each BUSY count (default 0 8 64): cancels every job, starts BUSY one-node jobs (`sleep`, one on each of the first
# BUSY nodes), waits until all run and the agents have taken them on, resets slurmctld's counters (`sdiag -r`),
# waits WINDOW seconds (default 600), and saves `sdiag` to OUT/busy-BUSY.txt (OUT: LOCKSTEP_RPC_OUT, default
# /tmp/slurm-rpcs). Then prints, per BUSY count, the RPCs per minute by message type (all of slurmctld's: the
# clients lockstep runs are squeue, REQUEST_JOB_INFO; scontrol update, REQUEST_UPDATE_JOB; scontrol show,
# REQUEST_BUILD_INFO / REQUEST_NODE_INFO; munge and slurmd's own messages are Slurm's). The cluster goes down at
# the end, pass or fail. LOCKSTEP names the lockstep binary (default build/bin/lockstep). Root; ~12 min a count.
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "slurm-rpcs: needs root (the test cluster does)" >&2; exit 2; }
window=${1:-600}
[[ $window =~ ^[0-9]+$ ]] && [ "$window" -gt 0 ] || { echo "slurm-rpcs: bad WINDOW '$window' (expected seconds)" >&2; exit 2; }
shift || true
busy=("$@")
[ ${#busy[@]} -gt 0 ] || busy=(0 8 64)
nodes=${LOCKSTEP_RPC_NODES:-64}
for b in "${busy[@]}"; do
  [[ $b =~ ^[0-9]+$ ]] && [ "$b" -le "$nodes" ] || { echo "slurm-rpcs: bad BUSY '$b' (expected 0 to $nodes)" >&2; exit 2; }
done
out=${LOCKSTEP_RPC_OUT:-/tmp/slurm-rpcs}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export LOCKSTEP_CLUSTER_DIR=${LOCKSTEP_CLUSTER_DIR:-/tmp/lockstep-rpcs} LOCKSTEP_CLUSTER_HOOKS=yes
trap 'tests/cluster/down >/dev/null 2>&1 || true' EXIT
tests/cluster/up "$nodes" >"$out/up.log" 2>&1 || { cat "$out/up.log" >&2; exit 1; }
export SLURM_CONF=$LOCKSTEP_CLUSTER_DIR/slurm.conf

# wait_for WHAT SECONDS CMD...: until CMD succeeds, or fail saying what was last seen.
wait_for() {
  local what=$1 secs=$2
  shift 2
  for _ in $(seq $((secs * 5))); do "$@" && return 0; sleep 0.2; done
  echo "slurm-rpcs: no $what after ${secs} s; squeue says:" >&2
  squeue -h -o '%i %T %N' >&2 || true
  exit 1
}
queue_empty() { [ -z "$(squeue -h -o %i)" ]; }
running() { [ "$(squeue -h -t R -o %i | wc -l)" -eq "$1" ]; }

for b in "${busy[@]}"; do
  scancel --quiet --user=root 2>/dev/null || true
  wait_for "empty queue" 120 queue_empty
  for i in $(seq "$b"); do
    sbatch --quiet -N1 -n1 -w "n$i" -o /dev/null -J "busy$i" --wrap 'exec sleep 100000' >/dev/null
  done
  wait_for "$b running jobs" 300 running "$b"
  # The agents take a job on within a scan or two of its cgroups; the prologs have run by now.
  sleep 10
  sdiag -r >/dev/null
  echo "slurm-rpcs: $b busy node(s) of $nodes: counting for $window s" >&2
  sleep "$window"
  sdiag >"$out/busy-$b.txt"
done
scancel --quiet --user=root 2>/dev/null || true

# The per-type table of each window, RPCs per minute, types in any window.
python3 - "$window" "$out" "${busy[@]}" <<'EOF'
import re, sys
window, out, busy = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
counts = {}
for b in busy:
    text = open(f"{out}/busy-{b}.txt").read()
    section = text.split("Remote Procedure Call statistics by message type", 1)[1]
    section = section.split("Remote Procedure Call statistics by user", 1)[0]
    for name, count in re.findall(r"^\s*(\w+)\s*\(\s*\d+\)\s*count:(\d+)", section, re.M):
        counts.setdefault(name, {})[b] = int(count)
print(f"RPCs per minute at slurmctld over {window} s ({', '.join(busy)} busy nodes)")
print(f"{'message type':<36}" + "".join(f"{b + ' busy':>12}" for b in busy))
for name in sorted(counts, key=lambda n: -max(counts[n].values())):
    print(f"{name:<36}" + "".join(f"{counts[name].get(b, 0) * 60 / window:>12.1f}" for b in busy))
EOF
