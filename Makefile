# lockstep: build, demo, test, bench. Everything lands in target/ (Rust) and build/ (binaries, native build).
CARGO  ?= cargo
BUILD  := $(CURDIR)/build
BIN    := $(BUILD)/bin
FIXTURE ?= fixtures/topology/intel-raptorlake-i7-1370p.xml
# MPI the kernels and the profiler are built with (openmpi or mpich); `make test` also verifies the other one.
# MPICC=… and MPIEXEC=… on the command line (never from the environment, where MPI modules export their own) name
# its wrappers where they are not Debian's /usr/bin/mpicc.$(MPI) and mpiexec.$(MPI).
MPI    ?= openmpi
# The capabilities the agent needs (docs/security.md); make test runs every agent its tests start with only these
# (the end-to-end experiments' agents, which the experiment starts itself, and the guests' run as full root).
AGENT_CAPS := sys_admin,bpf,perfmon,net_admin,sys_nice,sys_ptrace,dac_read_search
OTHER_MPI := $(if $(filter mpich,$(MPI)),openmpi,mpich)
NATIVE := $(BUILD)/native-$(MPI)

.PHONY: all deps build install uninstall package demo test bench bench-agent-attacks bench-locks fuzz chaos soak clean

all: build

# NO_DEPS=1: the build dependencies are the system's package manager's (an RPM or Spack build), not deps.sh's.
deps:
	@[ -n "$(NO_DEPS)" ] || scripts/deps.sh

build: deps
	$(CARGO) build --release --locked --workspace
	cmake -S native -B $(NATIVE) -DLOCKSTEP_MPI=$(MPI) -DCMAKE_INSTALL_PREFIX=$(BUILD) \
	  $(if $(filter command line,$(origin MPICC)),-DLOCKSTEP_MPICC=$(MPICC)) \
	  $(if $(filter command line,$(origin MPIEXEC)),-DLOCKSTEP_MPIEXEC=$(MPIEXEC)) >/dev/null
	cmake --build $(NATIVE) -j 2
	DESTDIR= cmake --install $(NATIVE) >/dev/null
	install -D -m 755 target/release/lockstep $(BIN)/lockstep
	install -D -m 755 target/release/lockstepd $(BIN)/lockstepd
	$(BIN)/lockstep man $(BUILD)/share/man/man1
	$(BIN)/lockstepd --man $(BUILD)/share/man/man8
	mkdir -p $(BUILD)/share/completions
	$(BIN)/lockstep completion bash > $(BUILD)/share/completions/lockstep.bash
	$(BIN)/lockstep completion zsh > $(BUILD)/share/completions/_lockstep
	$(BIN)/lockstep completion fish > $(BUILD)/share/completions/lockstep.fish

# The binaries, libraries, lab programs, systemd unit, Slurm hooks, man pages and completions (scripts/install.sh
# lists where each goes); PREFIX (/usr/local), SYSCONFDIR (/etc), DESTDIR as usual; LAB=no leaves out the lab.
PREFIX ?= /usr/local
LAB ?= yes
SYSCONFDIR ?= /etc
install: build
	PREFIX=$(PREFIX) SYSCONFDIR=$(SYSCONFDIR) DESTDIR=$(DESTDIR) LAB=$(LAB) scripts/install.sh install

uninstall:
	PREFIX=$(PREFIX) SYSCONFDIR=$(SYSCONFDIR) DESTDIR=$(DESTDIR) scripts/install.sh uninstall

# The workspace's version (Cargo.toml), which the packages carry.
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n 1)

# Debian packages (debian/): lockstep (agent, CLI, libraries, SPANK plugin, unit, man pages, completions, examples)
# and lockstep-lab (kernels, mpirun wrapper, cluster scripts, scale model), built by debhelper from `make build`
# and scripts/install.sh, into build/packages/; and the same two as RPMs (packaging/rpm/lockstep.spec, rpmbuild;
# --nodeps, as the build dependencies here are Debian's, which rpm's database does not list).
package: build
	command -v dh > /dev/null || apt-get install -y -qq --no-install-recommends debhelper > /dev/null
	dpkg-buildpackage --build=binary --no-sign --no-check-builddeps
	mkdir -p $(BUILD)/packages
	mv ../lockstep*_$$(dpkg-parsechangelog -S Version)_*.deb ../lockstep_$$(dpkg-parsechangelog -S Version)_*.buildinfo \
	  ../lockstep_$$(dpkg-parsechangelog -S Version)_*.changes $(BUILD)/packages/
	command -v rpmbuild > /dev/null || apt-get install -y -qq --no-install-recommends rpm > /dev/null
	rpmbuild -bb --nodeps --build-in-place --define "_topdir $(BUILD)/rpm" --define "pkg_version $(VERSION)" \
	  --define "lockstep_mpi $(MPI)" --define "mpicc /usr/bin/mpicc.$(MPI)" --define "mpiexec /usr/bin/mpiexec.$(MPI)" \
	  packaging/rpm/lockstep.spec
	mv $(BUILD)/rpm/RPMS/*/lockstep-*$(VERSION)-1.*.rpm $(BUILD)/packages/
	@ls $(BUILD)/packages/*.deb $(BUILD)/packages/*.rpm

demo: build
	@scripts/demo.sh "$(FIXTURE)"

# Each line of the suite says how long it took (scripts/timed-shell). Guests of one qemu each run two at a time
# (scripts/together --jobs 2, the longest first), as each runs on one host thread. The Slurm cluster's tests,
# which mostly wait on Slurm (40 % of the CPUs busy, 270 s), run beside the guests of two (tests/vm/beside-cluster:
# two-nodes, then slurm-two, which share a bridge), whose checks hold no timing, beside the agent soak (4 % of the
# CPUs, 2 minutes, at the usual priority: beside the single guests at a low weight its agent went seconds without
# running), and beside the fuzz smoke run and the native tests (tests/native-tests), which took 100 s one after the
# other at the suite's end; beside the cgroup v2 guest's they made its timing checks fail (docs/development.md).
# The fuzz crates' own Cargo.lock is checked first (seconds), not only by the fuzz build beside the tests (which
# would say it about 12 minutes in, as the cargo tests end).
test: SHELL := $(CURDIR)/scripts/timed-shell
test: build
	$(CARGO) fmt --all --check
	scripts/module-cycles.py crates
	$(CARGO) tree --locked --manifest-path fuzz/Cargo.toml > /dev/null
	tests/install
	$(CARGO) clippy --release --locked --workspace --all-targets -- -D warnings
	targets=$$(CARGO=$(CARGO) scripts/test-targets --except slurm) && scripts/beside $(BUILD)/fuzz/build.log \
		scripts/fuzz.sh build -- env LOCKSTEP_BIN=$(BIN) LOCKSTEP_REQUIRE_ALL=1 LOCKSTEP_AGENT_CAPS=$(AGENT_CAPS) \
		$(CARGO) test --release --locked --workspace $$targets -- --include-ignored
	$(CARGO) test --release --locked --workspace --doc
	$(CARGO) test --release --locked --workspace --test slurm --no-run
	$(MAKE) package > $(BUILD)/package.log
	tests/packages
	scripts/together --jobs 2 $(BUILD)/vm-logs \
		tests/vm/cgroup-v2 tests/vm/systemd-unit tests/vm/deb-install tests/vm/slurm-v2 tests/vm/numa
	env LOCKSTEP_BIN=$(BIN) CARGO=$(CARGO) BUILD=$(BUILD) NATIVE=$(NATIVE) OTHER_MPI=$(OTHER_MPI) \
		scripts/together $(BUILD)/vm-logs tests/cluster/slurm-tests tests/vm/beside-cluster tests/agent-soak \
		tests/native-tests

bench: build
	@scripts/bench.sh
	@scripts/bench-kernels.sh
	@scripts/bench-agent.sh
	@scripts/bench-counters.sh
	@scripts/bench-attacks.py

# What users other than root can make the agent do: each attack of issue 59 as user nobody against a private agent
# (docs/security.md, "Availability"); BENCH_ATTACKS_SECONDS per window (default 15).
bench-agent-attacks: build
	scripts/bench-attacks.py

# Third-party programs (sysbench, pigz, memcached) under every lock of the interposer, glibc beside (docs/locks.md).
bench-locks: build
	scripts/bench-locks.py

fuzz: build
	scripts/fuzz.sh full

chaos: build
	scripts/chaos-agent.sh 100

soak: build
	scripts/soak-agent.sh 60

clean:
	$(CARGO) clean
	rm -rf $(BUILD)
