#!/usr/bin/env bash
# Soak for the agent: for MINUTES (default 60; `make test` runs 2), a private agent under churn and attack: short
# jobs started and ended all the time (lockstep run), processes adopted and released, the policy changed every
# 10 s (cfs, boost, gang), /metrics scraped every second, and hostile clients (user nobody's idle connections, a
# client streaming garbage). Reports the agent's resident memory, open descriptors, threads and store size after
# a warm-up (a quarter of the run, at most 5 min) and at the end, and every error; ends with one line:
#   soak: J jobs, A adoptions, P policy changes, S scrapes in M min; RSS a->b KiB, fds a->b, threads a->b,
#   store a->b KiB; errors E
# and exits 1 when something grew by more than 10 % (the store: beyond what the retention bounds), a call failed
# or the agent died, after the end of the agent's log. Needs root and `make build`; everything it starts is
# stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-60}
. scripts/agent-scratch.sh
agent_scratch soak-agent.sh soak MINUTES "$minutes"
# Searchable by user nobody, whose hostile clients connect to the socket.
chmod 711 "$dir"
port=$(( 20000 + RANDOM % 20000 ))
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'echo "soak: stopped by SIGTERM" >&2; exit 143' TERM
trap 'echo "soak: stopped by SIGINT" >&2; exit 130' INT
# A command that fails outside a test ends the soak (set -e): say which, as the cleanup leaves nothing to read.
trap 'echo "soak: line $LINENO: \"$BASH_COMMAND\" failed with status $?, which ends the soak" >&2' ERR

# Started directly (not through a function), so that $! is the agent itself (lockstep execs lockstepd).
"$bin" --store "$store" --socket "$socket" agent --policy gang --slot 200ms --metrics "$port" --sample-interval 1s \
  --retention 1m --job-history 1m 2>"$dir/agent.log" &
agent=$!
pids+=("$agent")
for _ in $(seq 250); do lk status >/dev/null 2>&1 && break; sleep 0.02; done

errors=0
fail() { errors=$((errors + 1)); echo "soak: error at $(date -u +%T): $*" >&2; }
measure() { # rss_kib fds threads store_kib (0 for an agent that died: its log's last lines say why, below)
  local rss fds threads size
  rss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' /proc/"$agent"/status 2>/dev/null || echo 0)
  fds=$(find /proc/"$agent"/fd -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  threads=$(sed -n 's/^Threads:[[:space:]]*//p' /proc/"$agent"/status 2>/dev/null || echo 0)
  size=$(( $(cat "$store" "$store"-wal 2>/dev/null | wc -c) / 1024 ))
  echo "$rss $fds $threads $size"
}

# Hostile clients for the whole run: 20 idle connections of nobody, and a client sending garbage every 2 s.
hostile=()
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '
import socket, sys, time
ss = []
for _ in range(20):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); ss.append(s)
time.sleep(float(sys.argv[2]))' "$socket" $((minutes * 60 + 30)) &
hostile+=($!)
/usr/bin/python3 -c '
import os, socket, sys, time
end = time.time() + float(sys.argv[2])
while time.time() < end:
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(os.urandom(200000)); s.close()
    except OSError:
        pass
    time.sleep(2)' "$socket" $((minutes * 60)) &
hostile+=($!)
pids+=("${hostile[@]}")

# The baseline is taken once every kind of work has run for a while (a quarter of the run, at most 5 min, at
# least 75 s): the allocator's arenas, the doors' threads and the store's WAL reach their working size in the
# first minutes, and the final counts of the jobs that ended within the last minute are still on /metrics
# (sampler::FINALS_SERVED), so the ended jobs' share is full only after a minute.
start=$(date +%s) end=$(( $(date +%s) + minutes * 60 ))
warm=$(( minutes * 60 / 4 < 300 ? minutes * 60 / 4 : 300 ))
warm=$(( warm < 75 ? 75 : warm ))
rss0=""
jobs=0 adoptions=0 changes=0 scrapes=0 last_change=$start next=0
policies=(cfs boost gang)
runs=()
while [ "$(date +%s)" -lt "$end" ]; do
  # The previous round's jobs have ended: each must have ended well.
  for p in "${runs[@]}"; do wait "$p" || fail "a lockstep run job"; done
  runs=()
  # Four short jobs at a time, each its own lockstep run.
  for _ in 1 2 3 4; do
    lk run --job "soak-$$-$next" --place any -- sleep 0.3 >/dev/null 2>>"$dir/errors" &
    runs+=($!)
    next=$((next + 1)) jobs=$((jobs + 1))
  done
  # A process adopted and released.
  sleep 30 & sleeper=$!
  if lk adopt --job "soak-adopt-$$-$next" --pid "$sleeper" >/dev/null 2>>"$dir/errors"; then
    adoptions=$((adoptions + 1))
    lk release --job "soak-adopt-$$-$next" >/dev/null 2>>"$dir/errors" || fail "release"
  else
    fail "adopt"
  fi
  kill "$sleeper" 2>/dev/null; wait "$sleeper" 2>/dev/null || true
  # The policy every 10 s, /metrics every second.
  if [ $(( $(date +%s) - last_change )) -ge 10 ]; then
    lk policy set "${policies[$((changes % 3))]}" --slot 200ms >/dev/null 2>>"$dir/errors" || fail "policy set"
    changes=$((changes + 1)) last_change=$(date +%s)
  fi
  curl -sf "http://127.0.0.1:$port/metrics" >/dev/null || fail "scrape"
  scrapes=$((scrapes + 1))
  sleep 1
  if ! kill -0 "$agent" 2>/dev/null; then
    status=0
    wait "$agent" || status=$?
    fail "the agent died (exit status $status; past 128, killed by signal $((status - 128)))"
    break
  fi
  if [ -z "$rss0" ] && [ $(( $(date +%s) - start )) -ge "$warm" ]; then
    read -r rss0 fds0 threads0 store0 < <(measure)
  fi
done
for p in "${runs[@]}"; do wait "$p" || fail "a lockstep run job"; done
[ -n "$rss0" ] || { fail "the run ended before its warm-up"; rss0=0 fds0=0 threads0=0 store0=0; }
kill "${hostile[@]}" 2>/dev/null || true
sleep 2
read -r rss1 fds1 threads1 store1 < <(measure)
failed_runs=$(grep -c . "$dir/errors" 2>/dev/null || true)
[ "${failed_runs:-0}" -gt 0 ] && { errors=$((errors + failed_runs)); sed 's/^/soak: error: /' "$dir/errors" >&2; }
grew() { [ "$2" -gt $(( $1 + $1 / 10 + ${3:-0} )) ]; }
verdict=0
# Slack beyond 10 %: 1 MiB of memory; connections open at the moment of measuring; the doors' blocking threads,
# which come and go with the load (at most 16); the WAL file, which SQLite reuses but does not shrink (~4 MiB).
grew "$rss0" "$rss1" 1024 && { echo "soak: resident memory grew" >&2; verdict=1; }
grew "$fds0" "$fds1" 8 && { echo "soak: descriptors grew" >&2; verdict=1; }
grew "$threads0" "$threads1" 16 && { echo "soak: threads grew" >&2; verdict=1; }
grew "$store0" "$store1" 8192 && { echo "soak: the store grew past its retention" >&2; verdict=1; }
[ "$errors" -gt 0 ] && verdict=1
# The agent's last words, for a failed soak's cause (the scratch directory goes on exit): a stalled loop is
# logged as such ("did not run for ... s").
[ "$verdict" = 0 ] || tail -n 40 "$dir/agent.log" | sed 's/^/soak: agent: /' >&2
echo "soak: $jobs jobs, $adoptions adoptions, $changes policy changes, $scrapes scrapes in $minutes min;" \
  "RSS $rss0->$rss1 KiB, fds $fds0->$fds1, threads $threads0->$threads1, store $store0->$store1 KiB; errors $errors"
exit $verdict
