#!/bin/sh
# Test: every native program refuses bad input in one line on stderr with exit status 2 and prints nothing on stdout;
# under the mpirun wrapper the one line comes from rank 0 alone, and whatever the launcher adds is its known notice
# of a non-zero exit (Open MPI's mpirun prints it and no program can keep it from doing so; MPICH's prints nothing),
# never an abort banner; --help (and -h) exit 0 with the usage on stdout. No case may run past its deadline (a value
# that makes a program spin is a failure).
# usage: check_bad_input.sh MPI MPIRUN PI EP CG IS MG LU PINGPONG COMMPROBE COREBENCH LOCKBENCH
set -u
mpi=$1 mpirun=$2 pi=$3 ep=$4 cg=$5 is=$6 mg=$7 lu=$8 pingpong=$9
shift 9
commprobe=$1 corebench=$2 lockbench=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0 cases=0
# Seconds a case may take: the slowest (a few ranks starting and refusing) take about one here.
deadline=60

# How the launcher marks its ranks' lines, and the lines Open MPI's mpirun adds when a rank exits non-zero.
if [ "$mpi" = openmpi ]; then
  tag_flags=--tag-output err_tag='^\[[0-9]+,[0-9]+\]<stderr>:' out_tag='^\[[0-9]+,[0-9]+\]<stdout>:'
  rank0='^\[[0-9]+,0\]<std(err|out)>:'
else
  tag_flags=-prepend-rank err_tag='^\[[0-9]+\] ' out_tag='^\[[0-9]+\] ' rank0='^\[0\] '
fi
notice='^(-+|Primary job +terminated normally, but [0-9]+ process(es)? returned|a non-zero exit code\. Per user-direction, the job has been aborted\.|mpiexec(\.openmpi)? detected that one or more processes exited with non-zero status, thus causing|the job to be terminated\. The first process to do so was:|  Process name: \[\[[0-9]+,[0-9]+\],[0-9]+\]|  Exit code: +2|)$'

fail() {
  echo "FAIL $label: $1"
  sed 's/^/  stderr: /' "$dir/err"
  sed 's/^/  stdout: /' "$dir/out" | head -5
  failed=$((failed + 1))
}

# run WANT_STATUS CMD...: runs the command with the deadline; sets $status and $label.
run() {
  want=$1
  shift
  label=$(printf '%s ' "$@" | sed 's#[^ ]*/##g' | tr -c '[:print:]' '?')
  cases=$((cases + 1))
  timeout -s KILL $deadline "$@" >"$dir/out" 2>"$dir/err"
  status=$?
  if [ $status -eq 137 ]; then
    fail "did not end within $deadline s"
    return 1
  fi
  if [ $status -ne "$want" ]; then
    fail "exit status $status (expected $want)"
    return 1
  fi
}

# bad PROGRAM_NAME ARGV...: run without a launcher; exactly one line on stderr, "PROGRAM_NAME: ...", stdout empty.
bad() {
  name=$1
  shift
  run 2 "$@" || return 0
  if [ "$(wc -l <"$dir/err")" -ne 1 ] || ! grep -q "^$name: " "$dir/err"; then
    fail "stderr is not one line starting '$name: '"
  elif [ -s "$dir/out" ]; then
    fail "printed on stdout"
  else
    echo "ok   $label-> $(cat "$dir/err")"
  fi
}

# bad_mpi PROGRAM_NAME RANKS ARGV...: under the wrapper with RANKS ranks, exit 2: one line from the ranks, rank 0's,
# "PROGRAM_NAME: ..."; no other line but the launcher's notice of a non-zero exit; nothing on stdout.
bad_mpi() {
  name=$1 ranks=$2
  shift 2
  LOCKSTEP_MPIRUN_FLAGS=$tag_flags run 2 "$mpirun" -n "$ranks" "$@" || return 0
  ours=$(grep -cE "$err_tag" "$dir/err")
  if [ "$ours" -ne 1 ] || ! grep -E "$rank0" "$dir/err" | sed -E "s/$err_tag//" | grep -q "^$name: "; then
    fail "$ours lines from the ranks on stderr (expected one, rank 0's, starting '$name: ')"
  elif grep -vE "$err_tag" "$dir/err" | grep -qvE "$notice"; then
    fail "the launcher said more than its notice of a non-zero exit"
  elif [ -s "$dir/out" ]; then
    fail "printed on stdout"
  else
    echo "ok   $label-> $(grep -E "$err_tag" "$dir/err" | sed -E "s/$err_tag//") (+$(grep -cvE "$err_tag" "$dir/err") launcher lines)"
  fi
}

# help ARGV...: exit 0, usage on stdout, nothing on stderr.
help() {
  run 0 "$@" || return 0
  if [ -s "$dir/err" ] || ! grep -qi 'usage' "$dir/out"; then
    fail "expected the usage on stdout and nothing on stderr"
  else
    echo "ok   $label-> usage, exit 0"
  fi
}

# help_mpi ARGV...: under the wrapper with 2 ranks, exit 0: the usage on stdout from rank 0 alone, nothing on stderr.
help_mpi() {
  LOCKSTEP_MPIRUN_FLAGS=$tag_flags run 0 "$mpirun" -n 2 "$@" || return 0
  if [ -s "$dir/err" ] || ! grep -qi 'usage' "$dir/out" || grep -E "$out_tag" "$dir/out" | grep -qvE "$rank0"; then
    fail "expected the usage on stdout from rank 0 alone and nothing on stderr"
  else
    echo "ok   $label-> usage from rank 0, exit 0"
  fi
}

# The wrapper: the rank count, before any rank starts.
for n in 0 -1 x 1000 257 '' 99999999999999999999 "$(printf '2\n3')"; do
  bad mpirun "$mpirun" -n "$n" "$ep"
done
bad mpirun "$mpirun" -np 0 "$ep"
bad mpirun "$mpirun" --bind-to none -n 0 "$ep"
bad mpirun "$mpirun" -n

# The kernels: arguments before MPI_Init, the rank count after it.
for k in ep cg is mg lu; do
  eval "prog=\$$k"
  bad $k "$prog" --class Q
  bad $k "$prog" --class
  bad $k "$prog" --class ''
  bad $k "$prog" --bogus
  help "$prog" --help
  help "$prog" -h
  bad_mpi $k 3 "$prog" --class S
done
bad_mpi cg 2 "$cg" --class Q
help_mpi "$cg" --help
bad_mpi lu 6 "$lu"
bad ep "$ep" --class "$(printf 'A\nB')"

# pi: threads 1 to 1024, steps 1 to 10^15, whole numbers only.
for v in 0 -1 1025 32752 x 1.5 ' 4' 99999999999999999999 ''; do
  bad pi "$pi" --threads "$v"
done
for v in 0 1e3 1000000000000001 0x10; do
  bad pi "$pi" --steps "$v"
done
bad pi "$pi" --threads
bad pi "$pi" --bogus
help "$pi" --help
help "$pi" -h

# pingpong: arguments before MPI_Init (one line, not one per rank), exactly 2 ranks after it.
for a in '--size -1' '--size 67108865' '--iterations 0' '--iterations 1000000000001' '--repeats 0' '--repeats 1001' \
  '--size' '--bogus'; do
  # shellcheck disable=SC2086
  bad pingpong "$pingpong" $a
done
bad_mpi pingpong 2 "$pingpong" --size -1
bad_mpi pingpong 3 "$pingpong" --iterations 1
help "$pingpong" --help
help "$pingpong" -h
help_mpi "$pingpong" --help

# commprobe: --compute in seconds from 0 to 3600; NaN spun forever.
for v in nan NaN -nan inf -1 3601 1e400 '' 0x10 1s; do
  bad commprobe "$commprobe" --compute "$v"
done
bad commprobe "$commprobe" --compute
bad commprobe "$commprobe" --bogus
bad_mpi commprobe 2 "$commprobe" --compute nan
help "$commprobe" --help
help "$commprobe" -h

# corebench.
for v in 0 nan inf 601 -1 ''; do
  bad corebench "$corebench" --seconds "$v"
done
bad corebench "$corebench" --seconds
bad corebench "$corebench" --mode fast
bad corebench "$corebench" --mode
bad corebench "$corebench" --bogus
help "$corebench" --help
help "$corebench" -h

# lockbench.
d='--duration 0.01'
for a in "--sweep 1,,2 $d" "--sweep , $d" "--sweep 1, $d" "--sweep 1+ $d" "--sweep 0 $d" "--sweep 1 --locks , $d" \
  "--sweep 1 --locks mcs,,cna $d" "--sweep 1 --locks nope $d" "--list --lock mcs" "--list --json" \
  "--lock mcs --threads 1 $d --numa-map 0:0" "--sweep 1 --locks mcs $d --numa-map 0:0" \
  "--workload rename --threads 1 $d --numa-map 0:0" "--lock cna --threads 1 $d --numa-map zz" \
  "--sweep 1 --locks cna $d --numa-map zz" "--lock mcs --threads 0 $d" "--lock mcs --threads 4097 $d" \
  "--lock mcs --threads 1 --duration nan" "--lock mcs --threads 1 --duration 0" "--lock mcs --threads 1 --duration 3601" \
  "--lock mcs --threads 1 $d --corunners 1025" "--lock mcs --threads 1 $d --cs-lines 4097" \
  "--lock mcs --threads 1 $d --cs -1" "--lock mcs --threads 1 $d --cs-block sleep:0" "--sweep 1 $d --rounds 0" \
  "--lock mcs --threads 1 $d --bogus" "--lock mcs --threads 1"; do
  # shellcheck disable=SC2086
  bad lockbench "$lockbench" $a
done
bad lockbench "$lockbench" --sweep 1 --locks '' --duration 0.01
bad lockbench "$lockbench" --lock "$(printf 'a\nb')" --threads 1 --duration 0.01
help "$lockbench" --help
help "$lockbench" -h

echo "$((cases - failed)) of $cases cases as expected"
[ $failed -eq 0 ]
