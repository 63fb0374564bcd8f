# Shared by tests/vm/run and tests/vm/up: the guest kernel and initramfs, prepared once under build/vm/, and the
# qemu command line of one guest; and by the scripts that run inside a guest, their checks. Sourced, not run.
#
# A guest boots Debian's own kernel (linux-image-amd64, installed beside the host's) uncompressed, so that TCG does
# not spend seconds decompressing it; its root file system is this host's, read-only over virtio-9p, under an
# overlay whose upper layer is a tmpfs (every installed package and the project's build/ are there, nothing to
# build; tests/vm/run --root boots another directory instead, e.g. a clean Debian: vm_debian_root); a second,
# writable 9p share (build/vm/NAME/) carries the command in and its status and files out.

vm_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
vm_dir=$vm_root/build/vm
# The directory the guests boot as their root file system (read-only, under the overlay): this host's, unless
# tests/vm/run --root says another (a clean Debian, vm_debian_root).
vm_lower=/

# Says what is wrong with the arguments, and exits 2.
vm_usage() {
  echo "$vm_prog: $1" >&2
  exit 2
}

# Checks that $2 (the value of option $1) is an integer from $3 to $4.
vm_int() {
  [[ $2 =~ ^[0-9]+$ ]] && (( 10#$2 >= $3 && 10#$2 <= $4 )) || vm_usage "$1 $2 (expected an integer from $3 to $4)"
}

# The guest kernel's release (the newest Debian kernel under /boot), its uncompressed image and the initramfs,
# made once per kernel: sets vm_kver, vm_vmlinux, vm_initrd.
vm_prepare() {
  local vmlinuz
  vmlinuz=$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1 || true)
  [[ -n $vmlinuz ]] || { echo "$vm_prog: no guest kernel under /boot (scripts/deps.sh installs linux-image-amd64)" >&2; exit 1; }
  command -v qemu-system-x86_64 >/dev/null || { echo "$vm_prog: qemu-system-x86_64 missing (scripts/deps.sh installs it)" >&2; exit 1; }
  vm_kver=${vmlinuz#/boot/vmlinuz-}
  mkdir -p "$vm_dir"
  vm_vmlinux=$vm_dir/vmlinux-$vm_kver
  vm_initrd=$vm_dir/initramfs-$vm_kver.cpio
  if [[ ! -s $vm_vmlinux ]]; then
    # The bzImage's payload is one XZ stream: decompress from its magic on.
    python3 - "$vmlinuz" "$vm_vmlinux.tmp.$$" <<'PY'
import lzma, sys
data = open(sys.argv[1], "rb").read()
at = data.find(b"\xfd7zXZ\x00")
if at < 0:
    sys.exit(f"{sys.argv[1]}: no XZ payload (expected Debian's XZ-compressed kernel)")
image = lzma.LZMADecompressor().decompress(data[at:])
if image[:4] != b"\x7fELF":
    sys.exit(f"{sys.argv[1]}: the payload is not an ELF image")
open(sys.argv[2], "wb").write(image)
PY
    mv "$vm_vmlinux.tmp.$$" "$vm_vmlinux"
  fi
  if [[ ! -s $vm_initrd || $vm_root/tests/vm/init -nt $vm_initrd ]]; then
    local tree
    tree=$(mktemp -d)
    mkdir -p "$tree/bin" "$tree/modules" "$tree/proc" "$tree/sys" "$tree/dev" "$tree/lower" "$tree/upper" "$tree/newroot"
    cp /bin/busybox "$tree/bin/busybox"
    cp "$vm_root/tests/vm/init" "$tree/init"
    chmod 0755 "$tree/init"
    local m ko
    for m in virtio_pci 9pnet_virtio 9p overlay virtio_net; do
      for ko in $(modprobe -S "$vm_kver" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'); do
        if ! grep -qx "$(basename "$ko")" "$tree/modules/order" 2>/dev/null; then
          cp "$ko" "$tree/modules/"
          basename "$ko" >> "$tree/modules/order"
        fi
      done
    done
    (cd "$tree" && find . | cpio -o -H newc --quiet) > "$vm_initrd.tmp.$$"
    rm -rf "$tree"
    mv "$vm_initrd.tmp.$$" "$vm_initrd"
  fi
}

# A clean Debian 12 root for a guest that must find what a fresh site node has: minbase, systemd as init, and
# iproute2 (what tests/vm/guest uses; no kernel modules: modprobe in such a guest finds none), from deb.debian.org
# (bookworm, its updates and its security archive, as mmdebstrap sets them for a stable suite), made once with
# mmdebstrap (about 40 s) into build/vm/debian12/ and kept. apt's package lists stay in it, so that packages can be
# installed into a copy of it offline, from what vm_debian_fetch put in its cache. Sets vm_debian.
vm_debian_root() {
  vm_debian=$vm_dir/debian12
  [[ -f $vm_dir/debian12.made && -x $vm_debian/usr/bin/apt-get ]] && return
  command -v mmdebstrap > /dev/null || { echo "$vm_prog: mmdebstrap missing (scripts/deps.sh installs it)" >&2; exit 1; }
  local tmp=$vm_dir/debian12.tmp.$$
  rm -rf --one-file-system "$vm_debian" "$vm_dir"/debian12.tmp.* "$vm_dir/debian12.made"
  mkdir -p "$vm_dir"
  if ! mmdebstrap --variant=minbase --include=systemd-sysv,iproute2 --skip=cleanup/apt/lists bookworm "$tmp" \
    > "$vm_dir/debian12.log" 2>&1; then
    rm -rf --one-file-system "$tmp"
    echo "$vm_prog: mmdebstrap could not make a Debian 12 root; its log ($vm_dir/debian12.log) ends:" >&2
    tail -n 20 "$vm_dir/debian12.log" | sed 's/^/  | /' >&2
    exit 1
  fi
  mv "$tmp" "$vm_debian"
  : > "$vm_dir/debian12.made"
}

# Fetches into vm_debian_root's cache (/var/cache/apt/archives) every package that `apt install` of the .deb
# files given (absolute paths) needs beyond what the root has, Recommends included, as a site's apt would: with
# the root's own configuration, package lists and dpkg database (APT_CONFIG: none of this host's apt settings).
# The lists are brought up to date once if a package named in them is no longer served; packages no longer
# served leave the cache.
vm_debian_fetch() {
  local config=$vm_dir/debian12.apt.conf log=$vm_dir/debian12-fetch.log
  printf 'Dir "%s/";\nAPT::Sandbox::User "root";\n' "$vm_debian" > "$config"
  local apt=(env APT_CONFIG="$config" apt-get -qq)
  { "${apt[@]}" install --download-only -y "$@" || { "${apt[@]}" update && "${apt[@]}" install --download-only -y "$@"; }; } \
    > "$log" 2>&1 && "${apt[@]}" autoclean >> "$log" 2>&1 ||
    { echo "$vm_prog: cannot fetch the packages' dependencies into $vm_debian; apt said:" >&2
      tail -n 20 "$log" | sed 's/^/  | /' >&2; exit 1; }
}

# The qemu command of one guest: vm_qemu NAME VCPUS NUMA MEM_MIB SHARE INIT [NETDEV…] (INIT: "shell" or
# "systemd", what runs the second stage); sets the array vm_cmd.
vm_qemu() {
  local name=$1 vcpus=$2 numa=$3 mem=$4 share=$5 init=$6
  shift 6
  local systemd=""
  [[ $init == shell ]] || systemd=" systemd.unit=lockstep-vm.service systemd.show_status=0"
  local per=$((vcpus / numa)) node_mem=$((mem / numa)) n
  # One host thread runs every vCPU in turn (thread=single). With a host thread per vCPU (MTTCG), guests stopped
  # for good in most runs of tests/vm/cgroup-v2 from 2026-11-28 on, in different tests. Backtraces of the stuck
  # guests (sysrq through the monitor, vm_backtraces) showed both vCPUs in one kernel loop: a write to a user page
  # between stac and clac that faulted again after each fault the handler had resolved (EFLAGS.AC set), with a vCPU
  # in the int3 handler of a live code patch (text_poke: the static keys that perf events, BPF attachments and
  # tracepoints switch); another time both vCPUs at the nop of a patched site with interrupts off. Without SMAP
  # (-smap, kept) the guest still stopped; single-threaded it ran 3 times of 3 and in a fresh clone's make test.
  vm_cmd=(qemu-system-x86_64 -name "$name" -accel tcg,thread=single -cpu max,-smap -bios /usr/share/qemu/qboot.rom
    -nodefaults -no-user-config -nographic -serial stdio -no-reboot -monitor "unix:$share/monitor.sock,server=on,wait=off"
    -smp "$vcpus,sockets=$numa,cores=$per,threads=1" -m "${mem}M"
    -kernel "$vm_vmlinux" -initrd "$vm_initrd"
    -append "console=ttyS0 quiet panic=-1 cryptomgr.notests no_timer_check tsc=reliable mitigations=off sysrq_always_enabled cgroup_no_v1=all lockstep_init=$init$systemd"
    -virtfs "local,path=$vm_lower,mount_tag=root,security_model=none,readonly=on,multidevs=remap"
    -virtfs "local,path=$share,mount_tag=share,security_model=none,multidevs=remap")
  for ((n = 0; n < numa; n++)); do
    vm_cmd+=(-object "memory-backend-ram,id=m$n,size=${node_mem}M"
      -numa "node,nodeid=$n,cpus=$((n * per))-$((n * per + per - 1)),memdev=m$n")
  done
  vm_cmd+=("$@")
}

# Asks the guest whose qemu monitor listens on socket $1 for the backtrace of every vCPU and the tasks that wait
# uninterruptibly (sysrq 9, l, w on its keyboard: its console prints them when its kernel still takes interrupts),
# prints where each vCPU is (RIP and flags, from the monitor: all there is when interrupts are off), then gives the
# console 10 s to print.
vm_backtraces() {
  python3 - "$1" <<'PY' >&2 || echo "$vm_prog: cannot reach the guest's monitor ($1)" >&2
import re, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])
for key in "9lw":
    s.sendall(f"sendkey alt-sysrq-{key}\n".encode())
    time.sleep(1)
s.sendall(b"info registers -a\n")
time.sleep(2)
said = b""
try:
    while chunk := s.recv(1 << 16):
        said += chunk
except socket.timeout:
    pass
for line in re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", said.decode(errors="replace")).splitlines():
    if line.startswith(("CPU#", "RIP=")):
        print("  vCPU", line)
PY
  sleep 10
}

# For the scripts that run inside a guest (tests/vm/systemd-unit, slurm-v2): each defines `fail MESSAGE`, which
# says what went wrong and exits 1.

# Prints the path of a chronyd for the guests, unpacked once from Debian's chrony package under build/vm/chrony/
# (not installed: the host's own time service stays as it is); exits 1 when the package cannot be had.
vm_chronyd() {
  local to=$vm_dir/chrony
  if [[ ! -x $to/usr/sbin/chronyd ]]; then
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && { apt-get download -qq chrony 2> /dev/null || { apt-get update -qq && apt-get download -qq chrony; }; })       > /dev/null 2>&1 || { rm -rf "$tmp"; echo "$vm_prog: cannot download Debian's chrony package" >&2; exit 1; }
    mkdir -p "$to"
    dpkg-deb -x "$tmp"/chrony_*.deb "$to"
    rm -rf "$tmp"
  fi
  echo "$to/usr/sbin/chronyd"
}

# Waits up to 60 s for the shell condition $2 (what it waits for: $1), or fails.
vm_until() {
  local what=$1 cond=$2 deadline=$((SECONDS + 60))
  until eval "$cond"; do
    ((SECONDS < deadline)) || fail "timed out (60 s) waiting for $what"
    sleep 0.1
  done
}

# Whether the cgroup v2 directory $1 is frozen, as its cgroup.events says. Read with builtins: a guest under TCG
# forks slowly, and vm_never_both_frozen's three reads must fall within one slot.
vm_frozen() {
  local line
  while read -r line; do [[ $line == "frozen 1" ]] && return 0; done < "$1/cgroup.events"
  return 1
} 2> /dev/null

# Checks 100 times that the cgroups $1 and $2 are never frozen at once, or fails. Both count as frozen only if $1
# reads frozen before and after $2 does: the reads are not one atomic look and a slot boundary may fall between
# them, but not two (slots of 200 ms).
vm_never_both_frozen() {
  local i
  for ((i = 0; i < 100; i++)); do
    ! { vm_frozen "$1" && vm_frozen "$2" && vm_frozen "$1"; } || fail "both jobs frozen at once"
  done
}

# Runs COMMAND (in a guest) with a deadline of $1 seconds: past it, prints every task of the guest (state, wait
# channel, elapsed time, command line), the kernel stacks of the user tasks not running, and kills COMMAND
# (status 137).
# A command that hangs in a TCG guest then says what it waited on, instead of running out the guest's own time
# with nothing on the console.
vm_limited() {
  local limit=$1 pid end task state
  shift
  "$@" &
  pid=$!
  end=$((SECONDS + limit))
  # bash reaps its background child as soon as it exits (keeping its status for `wait`): kill -0 then fails.
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= end)); then
      echo "$vm_prog: still running after $limit s: $*; every task of the guest:" >&2
      ps -eLo pid,tid,ppid,stat,wchan:32,etime,args >&2
      for task in /proc/[0-9]*/task/[0-9]*; do
        # Kernel threads (an empty command line) are left out.
        [[ $(head -c 1 "${task%/task/*}/cmdline" 2>/dev/null | wc -c) == 1 ]] || continue
        read -r state < <(sed -n 's/^State:\t\([A-Z]\).*/\1/p' "$task/status" 2>/dev/null)
        [[ ${state:-R} == R ]] && continue
        echo "--- ${task#/proc/} ($(cat "$task/comm" 2>/dev/null), $state):" >&2
        cat "$task/stack" >&2 2>/dev/null
      done
      kill -KILL "$pid" 2>/dev/null
      break
    fi
    sleep 0.2
  done
  wait "$pid"
}
