# Sourced by scripts/soak-agent.sh and scripts/chaos-agent.sh, which run a private agent under load: checks what
# both need and makes the agent's scratch directory.
#
#   agent_scratch PROGRAM KIND WHAT VALUE   checks that VALUE (the script's WHAT, its first argument) is a positive
#                                           integer, that build/bin/lockstep exists and that we are root (each
#                                           failure one line on stderr, exit 2); sets bin, dir (a new
#                                           /tmp/lockstep-KIND.XXXXXX), store and socket
#   lk ARGS…                                the CLI on that store and socket

agent_scratch() {
  local prog=$1 kind=$2 what=$3 value=$4
  [[ $value =~ ^[1-9][0-9]*$ ]] || { echo "$prog: $what $value (expected a positive integer)" >&2; exit 2; }
  bin=build/bin/lockstep
  [ -x "$bin" ] || { echo "$prog: $bin missing (run make build)" >&2; exit 2; }
  [ "$(id -u)" = 0 ] || { echo "$prog: needs root (real cgroups)" >&2; exit 2; }
  dir=$(mktemp -d "/tmp/lockstep-$kind.XXXXXX")
  store=$dir/lockstep.db socket=$dir/agent.sock
}

lk() { "$bin" --store "$store" --socket "$socket" "$@"; }
