# lockstep: build, demo, test, bench. Everything lands in target/ (Rust) and build/ (binaries, native build).
CARGO  ?= cargo
BUILD  := $(CURDIR)/build
BIN    := $(BUILD)/bin
FIXTURE ?= fixtures/topology/intel-raptorlake-i7-1370p.xml

.PHONY: all deps build demo test bench clean

all: build

deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release --locked
	cmake -S native -B $(BUILD)/native -DCMAKE_INSTALL_PREFIX=$(BUILD) >/dev/null
	cmake --build $(BUILD)/native -j 2
	cmake --install $(BUILD)/native >/dev/null
	install -D -m 755 target/release/lockstep $(BIN)/lockstep

demo: build
	@scripts/demo.sh "$(FIXTURE)"

test: build
	LOCKSTEP_BIN=$(BIN) $(CARGO) test --release --locked
	ctest --test-dir $(BUILD)/native --output-on-failure

bench: build
	@scripts/bench.sh

clean:
	$(CARGO) clean
	rm -rf $(BUILD)
