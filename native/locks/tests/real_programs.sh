#!/bin/sh
# The interposer under real, unmodified multi-threaded programs: GNU sort (threads merging under a mutex and a
# condition variable) and xz (liblzma's threaded coder: mutexes, and condition variables on CLOCK_MONOTONIC with
# timed waits), with the lock LOCK. Their output must equal that of the same program without the interposer, and
# the interposer must report that it ran their mutexes on LOCK.
#
#   real_programs.sh INTERPOSER LOCK
set -eu
interposer=$1
lock=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# 400k lines in a fixed pseudo-random order: above sort's threshold for sorting with several threads.
awk 'BEGIN { x = 12345; for (i = 0; i < 400000; i++) { x = (x * 1103515245 + 12345) % 2147483648; print x } }' \
	>"$dir/in"
sort -S 200M --parallel=2 "$dir/in" >"$dir/want"
LD_PRELOAD=$interposer LOCKSTEP_LOCK=$lock LOCKSTEP_MUTEX_VERBOSE=1 sort -S 200M --parallel=2 "$dir/in" \
	>"$dir/sorted" 2>"$dir/sort.err"
cmp "$dir/want" "$dir/sorted"
grep -E "[1-9][0-9]* mutexes ran on $lock\$" "$dir/sort.err"

# Small blocks, so that two threads compress (and decompress) at once.
LD_PRELOAD=$interposer LOCKSTEP_LOCK=$lock LOCKSTEP_MUTEX_VERBOSE=1 xz -T2 --block-size=64KiB -c "$dir/in" \
	>"$dir/in.xz" 2>"$dir/xz.err"
LD_PRELOAD=$interposer LOCKSTEP_LOCK=$lock xz -T2 -dc "$dir/in.xz" >"$dir/back"
cmp "$dir/in" "$dir/back"
grep -E "[1-9][0-9]* mutexes ran on $lock\$" "$dir/xz.err"
echo "sort and xz ran on $lock: OK"
