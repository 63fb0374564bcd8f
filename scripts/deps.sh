#!/usr/bin/env bash
# Installs the Debian 12 packages lockstep builds and tests with. Idempotent: packages already present are
# skipped, and `apt-get update` runs once, only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config   # C toolchain and native/ build
  hwloc libhwloc-dev libudev-dev     # topology (hwlocality links the system libhwloc, which needs libudev)
  sqlite3 libsqlite3-dev             # the store links the system's SQLite; sqlite3 inspects it by hand
  openmpi-bin libopenmpi-dev         # MPI kernels and the PMPI profiler (default MPI)
  mpich libmpich-dev                 # the second MPI the kernels must build and verify with
  libssl-dev zlib1g-dev              # corebench: AES-XTS through EVP, deflate
  podman runc busybox-static         # jobs made of containers (one per rank), tested offline on a busybox rootfs
  charliecloud-runtime               # ch-run: ranks in Charliecloud containers (the HPC runtime with Singularity's model)
  linux-perf                         # perf stat, the reference `lockstep stat` is tested against
  man-db                             # make test renders the man pages make install puts in place (man -l)
  libpfm4-dev                        # PMU event names (libpfm4) for lockstep stat and the agent
  prometheus                         # promtool check metrics, and the server that scrapes the agent in tests
  slurmctld slurmd slurm-client munge  # tests/cluster: a real Slurm cluster of network namespaces on this machine
  libslurm-dev                       # slurm/spank.h: the SPANK plugin that preloads the MPI profiler into jobs
  clang libelf-dev                   # dcs: the eBPF program (clang -target bpf) and libbpf, built from source by libbpf-sys
  libclang-rt-14-dev                 # libFuzzer and AddressSanitizer for the C fuzz targets (scripts/fuzz.sh)
  numactl xz-utils                   # locks: lockbench's memory policies; xz, a real program the interposer is tested under
  sysbench pigz memcached libmemcached-tools  # make bench-locks: third-party programs under the interposer
  qemu-system-x86 linux-image-amd64 cpio e2fsprogs  # tests/vm: guests with cgroup v2 and vNUMA (busybox-static above for their initramfs); loop-disk faults
  mmdebstrap                         # tests/vm/deb-install: a clean Debian 12 root for the guest that installs the packages
  python3-venv                       # build/venv: SimPy for the scale model (experiments/model/)
  strace                             # tests: which files the agent opens (never the cgroups a Slurm user made)
)

missing=()
for p in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps.sh: missing packages: ${missing[*]} (run as root, or install them with apt-get)" >&2
    exit 2
  fi
  echo "deps.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # memcached's package starts a server on port 11211; the benchmark starts its own, on a port of its own.
  if [[ " ${missing[*]} " == *" memcached "* ]] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now memcached >/dev/null 2>&1 || true
  fi
fi

# The scale model runs on SimPy 4 (Debian packages only SimPy 2), from PyPI into build/venv, once.
venv=$(dirname "$(realpath "$0")")/../build/venv
if ! "$venv/bin/python3" -c 'import simpy' >/dev/null 2>&1; then
  echo "deps.sh: installing SimPy into build/venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'simpy==4.1.1'
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "deps.sh: cargo not found: install Rust (rustup) first" >&2
  exit 2
fi
