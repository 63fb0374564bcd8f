// SPDX-License-Identifier: GPL-2.0
//
// What the `together` eBPF program and the agent share: its limits and the layouts of its map entries. The agent
// gets the same structs as Rust types generated from the compiled object's BTF (libbpf-cargo's skeleton), and
// reads the limits from the loaded maps, so no size, offset or limit is written down twice.

#ifndef TOGETHER_INTF_H
#define TOGETHER_INTF_H

/// Limits of the program's maps.
enum together_limits {
	/// Most jobs one agent measures at once (slots of `jobs` and `sizes`).
	TOGETHER_MAX_JOBS = 1024,
	/// Most ranks, over every job, in `ranks`.
	TOGETHER_MAX_RANKS = 65536,
	/// Bytes of the `timeline` ring buffer (a power of two, a multiple of the page size): 24 bytes per event
	/// with its header, some 43,000 events, a second of switches on a busy node of dozens of CPUs; the agent
	/// drains it every few milliseconds while it records.
	TOGETHER_TIMELINE_BYTES = 1 << 20,
};

/// Where a rank is, as the scheduler's events last said.
enum rank_state {
	/// Asleep (blocked, or not seen yet).
	RANK_ASLEEP = 0,
	/// Runnable, waiting for a CPU.
	RANK_QUEUED = 1,
	/// On a CPU.
	RANK_RUNNING = 2,
	/// Just registered by the agent, not yet looked at (by the `together_look` iterator, or by its next event).
	RANK_UNKNOWN = 3,
};

/// A rank's `state` word: its state in the low RANK_STATE_BITS, and above them the generation of its job's counts
/// it was counted in. A rank of an older generation than its job's counts in none of them: unknown.
enum rank_word {
	RANK_STATE_BITS = 2,
	RANK_STATE_MASK = 3,
};

/// One rank (a thread that does the job's work, keyed by its thread id): its job's slot and its state word.
struct rank {
	__u32 job;
	__u32 state;
};

/// What the agent says of a job: how many ranks it has, and the generation of its counts. The agent moves to a new
/// generation whenever it takes a rank away (a rank that exited, a process that is no rank after all): the
/// program then starts the job's counts of running and queued ranks from zero, and the task iterator counts every
/// rank again as it is now, so that no rank taken away leaves its last state counted.
struct job_size {
	__u32 ranks;
	__u32 gen;
};

/// One job's ranks over time, guarded by `lock`: how many run and wait now (in generation `gen`), when that last
/// changed (CLOCK_MONOTONIC ns), and the time integrated so far in which some rank was on a CPU (`active_ns`, while
/// `running` > 0), in which every rank ran at once (`together_ns`, while `running` reaches the job's size) and in
/// which some rank waited for a CPU (`waiting_ns`, while `queued` > 0); and the ranks' runnable time, summed over
/// the ranks (`runnable_ns`: `running` + `queued` per nanosecond), whose rate is how many CPUs the job wants.
struct job_time {
	struct bpf_spin_lock lock;
	__s32 running;
	__s32 queued;
	__u32 gen;
	__u64 last_ns;
	__u64 active_ns;
	__u64 together_ns;
	__u64 waiting_ns;
	__u64 runnable_ns;
};

/// Whether the program records a timeline (`timeline_ctl`'s `on`), and the events it dropped since the agent
/// turned it on: the agent writes both (on, 0) to start and (off, 0) to stop, and reads `dropped` before it stops;
/// the program only ever adds to `dropped`.
struct timeline_ctl {
	__u32 on;
	__u32 pad;
	__u64 dropped;
};

/// What an event of the timeline says.
enum timeline_kind {
	/// The rank was switched out of the CPU.
	TIMELINE_OFF = 0,
	/// The rank was switched onto the CPU.
	TIMELINE_ON = 1,
};

/// One event of the timeline (`timeline` ring buffer): at `ns` (CLOCK_MONOTONIC) a rank of the job in slot `job`
/// was switched onto or off CPU `cpu` (`kind`, a `timeline_kind`).
struct timeline_event {
	__u64 ns;
	__u32 cpu;
	__u16 job;
	__u16 kind;
};

#endif
