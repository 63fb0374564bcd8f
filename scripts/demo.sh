#!/usr/bin/env bash
# `make demo`: this machine's topology, a hybrid machine's topology and placements (from a bundled hwloc XML),
# a real parallel computation run as a lockstep job under a placement policy, and the MPL paper's co-scheduling
# experiment in miniature (lu + ep sharing the node in both MPI progress modes under cfs, gang and auto, ending
# with how much slower the jobs ran together under each; about a minute on 2 cores), then the same pair measured
# paired (cfs and gang taking turns every 4 s over one long run: gang's time against cfs's with its 95 % interval;
# two minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
fixture=${1:-fixtures/topology/intel-raptorlake-i7-1370p.xml}
lockstep=build/bin/lockstep
tag=$$

section() { printf '\n== %s\n' "$*"; }

section "lockstep topo   (this machine)"
$lockstep topo
section "lockstep topo --xml $fixture"
$lockstep topo --xml "$fixture"
section "placements on $fixture (the hybrid-CPU paper's Cp, Ce, Cm)"
for policy in p-only e-only mixed; do
  printf '%-7s ' "$policy"; $lockstep place --xml "$fixture" --policy "$policy" --json
done
printf '%-7s ' "mixed/4"; $lockstep place --xml "$fixture" --policy mixed --cpus 4 --json

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: lockstep run needs root for cgroups; skipping the run part" >&2
  exit 0
fi
section "lockstep run: pi on 1 PU, then on every PU of the p-only placement of this machine"
$lockstep run --job "demo-pi-1cpu-$tag" --place p-only --cpus 1 -- build/bin/pi
$lockstep run --job "demo-pi-all-$tag" --place p-only -- build/bin/pi
section "lockstep jobs --all   (from the node store)"
$lockstep jobs --all | awk 'NR <= 5'   # awk reads to the end: no SIGPIPE for lockstep

section "co-scheduling: lockstep experiment run experiments/mpl-demo.toml"
$lockstep experiment run experiments/mpl-demo.toml

section "co-scheduling, paired: lockstep experiment run experiments/mpl-demo-ab.toml"
$lockstep experiment run experiments/mpl-demo-ab.toml
