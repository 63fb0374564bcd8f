#!/usr/bin/env bash
# Chaos for the agent: N times (default 100) an agent is started over 4 jobs that share the PUs, under gang and
# boost in turn (100 ms slots), and killed at a random moment: SIGKILL of the agent, of its watchdog, of both at
# once (the agent is then started again, as systemd's Restart= would, after 1 s), and once a SIGSTOP of the agent
# for 10 s. After each kill it measures the time until every job is thawed with its default weight, and checks
# that no job process was lost. Ends with one line:
#   chaos: K/N restored within 3 s, p99 X ms, max Y ms, lost Z
# Needs root (real cgroups) and `make build`. Everything it starts is stopped, by PID, on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100}
. scripts/agent-scratch.sh
agent_scratch chaos-agent.sh chaos N "$n"
agent_pid="" job_pids=()

cleanup() {
  [ -n "$agent_pid" ] && kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null || true
  for p in "${job_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${job_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

start_agent() { # POLICY
  # Started directly, not through lk, so that $! is the agent itself (lockstep execs lockstepd).
  "$bin" --store "$store" --socket "$socket" agent --policy "$1" --slot 100ms 2>>"$dir/agent.log" &
  agent_pid=$!
  for _ in $(seq 200); do [ -S "$socket" ] && lk status >/dev/null 2>&1 && return; sleep 0.02; done
  echo "chaos-agent.sh: the agent did not start" >&2; exit 1
}

# The knob files of job $1: its freezer state and weight, v1 or v2.
freeze_file() {
  local f
  for f in /sys/fs/cgroup/freezer/lockstep/"$1"/freezer.state /sys/fs/cgroup/lockstep/"$1"/cgroup.freeze; do
    [ -e "$f" ] && { echo "$f"; return; }
  done
}
weight_file() {
  local f
  for f in /sys/fs/cgroup/cpu/lockstep/"$1"/cpu.shares /sys/fs/cgroup/lockstep/"$1"/cpu.weight; do
    [ -e "$f" ] && { echo "$f"; return; }
  done
}
default_weight() { case $(weight_file "$1") in *cpu.shares) echo 1024 ;; *) echo 100 ;; esac; }
restored() { # every job thawed and at its default weight
  local j f
  for j in "${jobs[@]}"; do
    f=$(freeze_file "$j"); [ -z "$f" ] && return 1
    case $(cat "$f") in FROZEN|FREEZING|1) return 1 ;; esac
    [ "$(cat "$(weight_file "$j")")" = "$(default_weight "$j")" ] || return 1
  done
}
changed() { # some job frozen or boosted: the agent is acting
  ! restored
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

jobs=()
for i in 1 2 3 4; do
  j=chaos-$$-$i
  jobs+=("$j")
  "$bin" --store "$store" --socket "$socket" run --job "$j" --place any -- sh -c 'while :; do :; done' \
    >/dev/null 2>&1 &
  job_pids+=($!)
done
for j in "${jobs[@]}"; do
  for _ in $(seq 200); do [ -n "$(freeze_file "$j")" ] && break; sleep 0.02; done
done
count_procs() { # processes in the jobs' cgroups
  local j f
  for j in "${jobs[@]}"; do
    f=$(freeze_file "$j")
    [ -n "$f" ] && cat "$(dirname "$f")/cgroup.procs"
  done | sort -u | wc -l
}
procs_before=$(count_procs)

times=() within=0 lost=0
for i in $(seq "$n"); do
  policy=$([ $((i % 2)) = 0 ] && echo gang || echo boost)
  start_agent "$policy"
  # Wait for the agent to change something, then a random moment within a few slots.
  for _ in $(seq 100); do changed && break; sleep 0.01; done
  sleep "0.$(( RANDOM % 9 + 1 ))"
  watchdog=$(lk status --json | sed -n 's/.*"watchdog_pid":\([0-9]*\).*/\1/p')
  case $i in
    $((n / 2))) what=sigstop ;;
    *) case $((i % 10)) in 3) what=watchdog ;; 7) what=both ;; *) what=agent ;; esac ;;
  esac
  t0=$(now_ms)
  case $what in
    agent) kill -KILL "$agent_pid" || true ;;
    watchdog) kill -KILL "$watchdog" || true ;;
    both) kill -KILL "$agent_pid" "$watchdog" || true ;;
    sigstop) kill -STOP "$agent_pid" || true ;;
  esac
  if [ "$what" = both ]; then
    wait "$agent_pid" 2>/dev/null || true
    sleep 1 # systemd's RestartSec=1
    start_agent cfs
  fi
  if [ "$what" = watchdog ]; then
    # The agent replaces its watchdog and goes on: the measure is that it still acts, then a SIGKILL of it.
    sleep 0.6
    kill -KILL "$agent_pid" || true
  fi
  until restored; do
    [ $(( $(now_ms) - t0 )) -gt 15000 ] && break
    sleep 0.005
  done
  took=$(( $(now_ms) - t0 ))
  [ "$what" = watchdog ] && took=$(( took - 600 ))
  times+=("$took")
  [ "$took" -le 3000 ] && within=$((within + 1))
  [ "$what" = sigstop ] && { sleep 10; kill -CONT "$agent_pid" || true; kill -KILL "$agent_pid" || true; }
  # Whatever still runs (the agent started again after "both") is stopped before the next round.
  kill -TERM "$agent_pid" 2>/dev/null || true
  wait "$agent_pid" 2>/dev/null || true
  agent_pid=""
  procs_now=$(count_procs)
  [ "$procs_now" -lt "$procs_before" ] && lost=$((lost + procs_before - procs_now)) && procs_before=$procs_now
  echo "chaos: $i/$n $policy, kill $what: restored after $took ms" >&2
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
count=${#times[@]}
p99=$(echo "$sorted" | sed -n "$(( (count * 99 + 99) / 100 ))p")
max=$(echo "$sorted" | tail -1)
echo "chaos: $within/$n restored within 3 s, p99 $p99 ms, max $max ms, lost $lost"
