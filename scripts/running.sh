# Sourced by the scripts that start and stop daemons by PID (tests/cluster/up and down, tests/vm/down).
#
# running PID: whether PID names a process that has not exited. A daemon whose starter has exited is reaped by
# whoever adopted it, maybe seconds later (this machine's PID 1 reaps every 2 s): until then `kill -0` still
# finds it, but a zombie (state Z in /proc/PID/stat) has exited all the same.
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ ${stat##*) } != Z* ]]
}

# start_time PID: when PID's process started (clock ticks after boot, /proc/PID/stat's 22nd field; the fields
# are counted after the command's closing parenthesis, as the command may hold spaces). Nothing when it is gone.
# A PID with its start time names one process: a PID alone may be another's once the first has exited.
start_time() {
  local stat fields
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  read -ra fields <<< "${stat##*) }"
  echo "${fields[19]}"
}

# still PID START: whether the process that started at START (start_time's) as PID has not exited; with START
# empty (a list written before start times were kept), whether PID has not exited.
still() {
  [[ -n $2 ]] || { running "$1"; return; }
  running "$1" && [[ $(start_time "$1") == "$2" ]]
}
