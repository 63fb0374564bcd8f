# Sourced by tests/cluster/up and down: cluster_dir RAW — the cluster's directory from LOCKSTEP_CLUSTER_DIR (or the
# default), resolved, after checking that no other user than root can have planted or redirected it. up runs
# slurmctld, slurmd and the hooks as root from files in it, and down kills the PIDs it lists: a directory another
# user created first, could write, or reached through a link of theirs would hand them root. Every symbolic link
# on the way must be root's; every directory from / down must be root's and writable by no one else (a sticky one,
# like /tmp, only above the cluster's own). Prints the resolved path, or a line on stderr and returns 1.

# trusted_dirs PATH LEAF: every existing directory from PATH up to / is root's and not writable by others, except
# that those above the leaf may be sticky. LEAF is 1 when PATH is the cluster's directory itself.
trusted_dirs() {
  local p=$1 leaf=$2 owner mode
  while :; do
    if [ -e "$p" ]; then
      read -r owner mode < <(stat -c '%u %a' "$p") || return 1
      if [ "$owner" != 0 ]; then
        echo "cluster: refusing $p: it belongs to UID $owner, not root" >&2
        return 1
      fi
      if (( (8#$mode & 8#022) != 0 )) && { [ "$leaf" = 1 ] || (( (8#$mode & 8#1000) == 0 )); }; then
        echo "cluster: refusing $p: other users can write it (mode $mode)" >&2
        return 1
      fi
    fi
    [ "$p" = / ] && return 0
    p=$(dirname "$p")
    leaf=0
  done
}

cluster_dir() {
  local raw=$1 p owner
  [[ $raw = /* ]] || raw=$PWD/$raw
  # Links on the way, as given: each must be root's (realpath follows them below).
  p=$raw
  while [ "$p" != / ]; do
    if [ -L "$p" ]; then
      owner=$(stat -c %u "$p")
      if [ "$owner" != 0 ]; then
        echo "cluster: refusing $raw: the link $p belongs to UID $owner, not root" >&2
        return 1
      fi
    fi
    p=$(dirname "$p")
  done
  p=$(realpath -m "$raw") || return 1
  trusted_dirs "$p" 1 || return 1
  echo "$p"
}
