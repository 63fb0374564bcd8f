# Sourced by the scripts that stop daemons by PID (tests/cluster/down, tests/vm/down).
#
# running PID: whether PID names a process that has not exited. A daemon whose starter has exited is reaped by
# whoever adopted it, maybe seconds later (this machine's PID 1 reaps every 2 s): until then `kill -0` still
# finds it, but a zombie (state Z in /proc/PID/stat) has exited all the same.
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ ${stat##*) } != Z* ]]
}
