// SPDX-License-Identifier: GPL-2.0
//
// together: for each measured job, the time in which some of its ranks on this node was on a CPU, the time in which
// all of them were at once, and the time in which one of them was runnable but waited for a CPU.
//
// BTF tracepoint programs on sched_switch, sched_wakeup and sched_wakeup_new follow the ranks the agent put in
// `ranks` (thread id -> job slot and state) from state to state: asleep, queued (woken, or preempted while
// runnable), running. Every change of a rank's state moves its job's counts of running and queued ranks, and first
// adds the time since the job's previous change to `active_ns` if some rank ran during it, to `together_ns` if
// every rank did (running >= the size the agent wrote in `sizes`), to `waiting_ns` if one waited, and the ranks
// that ran or waited, times the time, to `runnable_ns` (how many CPUs the job wants, integrated). A thread that
// is not a rank costs one hash lookup per event. The state moves by one atomic exchange (a compare-exchange for a
// wake-up, which only wakes a sleeper), so that events racing on several CPUs each move the counts once; the counts
// and times move under the job's lock.
// Counts belong to a generation (together_intf.h): when the agent takes ranks away it starts a new one, and every
// rank counts again from its next event or the iterator's look, so that a rank taken away leaves nothing counted.
//
// The agent registers a rank as unknown and then runs the task iterator `together_look`, which gives each rank
// still unknown in its job's generation the state it has now (on a CPU, runnable, or asleep): a rank that runs alone
// on its CPU may not switch for a long time, and must not count as asleep meanwhile.
//
// While the agent records a timeline (`timeline_ctl`'s `on`, off unless it asks), every switch of a rank onto or
// off a CPU is also an event in the `timeline` ring buffer, and the iterator `timeline_look` gives the ranks on a
// CPU when the recording starts; an event that finds the ring full is dropped and counted. Off, it costs a rank's
// switch one array lookup, and a thread that is no rank nothing.
//
// Kernel structures are read through minimal definitions of the few fields used, relocated by CO-RE against the
// running kernel's BTF (preserve_access_index), as dcs.bpf.c does; the tasks are BTF pointers, read directly.

#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "together_intf.h"

struct thread_info {
	unsigned int cpu;
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_info thread_info;
	int pid;
	int on_cpu;
	unsigned int __state;
} __attribute__((preserve_access_index));

struct bpf_iter_meta;

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} __attribute__((preserve_access_index));

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TOGETHER_MAX_RANKS);
	__type(key, __u32);
	__type(value, struct rank);
} ranks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TOGETHER_MAX_JOBS);
	__type(key, __u32);
	__type(value, struct job_time);
} jobs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TOGETHER_MAX_JOBS);
	__type(key, __u32);
	__type(value, struct job_size);
} sizes SEC(".maps");

/// Never read: makes clang emit the BTF of `struct timeline_event` (only ring-buffer records have it otherwise),
/// from which the agent's skeleton types are generated.
const volatile struct timeline_event timeline_event_layout = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, TOGETHER_TIMELINE_BYTES);
} timeline SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct timeline_ctl);
} timeline_ctl SEC(".maps");

/// While a timeline is recorded: a rank of job `slot` was switched onto or off (`kind`) CPU `cpu` at `now`.
static __always_inline void record(__u32 slot, __u32 cpu, __u32 kind, __u64 now)
{
	__u32 zero = 0;
	struct timeline_ctl *ctl = bpf_map_lookup_elem(&timeline_ctl, &zero);
	struct timeline_event *e;

	if (!ctl || !ctl->on)
		return;
	e = bpf_ringbuf_reserve(&timeline, sizeof(*e), 0);
	if (!e) {
		// Full: the agent reads `dropped` and says how many the recording lacks.
		__sync_fetch_and_add(&ctl->dropped, 1);
		return;
	}
	e->ns = now;
	e->cpu = cpu;
	e->job = slot;
	e->kind = kind;
	bpf_ringbuf_submit(e, 0);
}

/// A state word: `state` counted in generation `gen`.
static __always_inline __u32 word(__u32 gen, __u32 state)
{
	return gen << RANK_STATE_BITS | state;
}

/// The state a word says in generation `gen`: unknown if it was counted in another.
static __always_inline __u32 state_in(__u32 w, __u32 gen)
{
	return w >> RANK_STATE_BITS == gen ? (w & RANK_STATE_MASK) : RANK_UNKNOWN;
}

/// Moves job `slot`'s counts of generation `gen` from a rank's state `from` to `to` at `now`, after integrating the
/// time since its last change (a new generation starts its counts from zero; the integrated times go on).
static __always_inline void account(__u32 slot, __u32 gen, __s32 want, __u32 from, __u32 to, __u64 now)
{
	struct job_time *j = bpf_map_lookup_elem(&jobs, &slot);

	if (!j)
		return;
	bpf_spin_lock(&j->lock);
	if (j->last_ns && now > j->last_ns) {
		__u64 dt = now - j->last_ns;

		if (j->running > 0)
			j->active_ns += dt;
		if (want > 0 && j->running >= want)
			j->together_ns += dt;
		if (j->queued > 0)
			j->waiting_ns += dt;
		if (j->running + j->queued > 0)
			j->runnable_ns += dt * (__u64)(j->running + j->queued);
	}
	if (now > j->last_ns)
		j->last_ns = now;
	if (j->gen != gen) {
		j->gen = gen;
		j->running = 0;
		j->queued = 0;
	}
	j->running += (to == RANK_RUNNING) - (from == RANK_RUNNING);
	j->queued += (to == RANK_QUEUED) - (from == RANK_QUEUED);
	bpf_spin_unlock(&j->lock);
}

/// The rank thread `tid` is, with its job's slot and size; NULL if it is none. The idle task (0, on every switch
/// from or to an idle CPU) is none without a lookup.
static __always_inline struct rank *rank_of(__u32 tid, __u32 *slot, struct job_size **size)
{
	struct rank *r;

	if (!tid)
		return NULL;
	r = bpf_map_lookup_elem(&ranks, &tid);
	if (!r)
		return NULL;
	*slot = r->job;
	*size = bpf_map_lookup_elem(&sizes, slot);
	return *size ? r : NULL;
}

/// Thread `tid`, if it is a rank, is now in state `to`; returns its job's slot, or -1 if it is none.
static __always_inline long move(__u32 tid, __u32 to, __u64 now)
{
	struct job_size *size;
	__u32 slot, from;
	struct rank *r = rank_of(tid, &slot, &size);

	if (!r)
		return -1;
	from = state_in(__sync_lock_test_and_set(&r->state, word(size->gen, to)), size->gen);
	if (from != to)
		account(slot, size->gen, size->ranks, from, to, now);
	return slot;
}

/// Thread `tid`, if it is a rank and asleep, is woken: queued. (A wake-up of a running thread changes nothing.)
static __always_inline void wake(__u32 tid, __u64 now)
{
	struct job_size *size;
	__u32 slot, asleep;
	struct rank *r = rank_of(tid, &slot, &size);

	if (!r)
		return;
	asleep = word(size->gen, RANK_ASLEEP);
	if (__sync_val_compare_and_swap(&r->state, asleep, word(size->gen, RANK_QUEUED)) == asleep)
		account(slot, size->gen, size->ranks, RANK_ASLEEP, RANK_QUEUED, now);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(together_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 cpu = bpf_get_smp_processor_id();
	long slot;

	// Preempted, or yielded while runnable (state 0, TASK_RUNNING): it waits for a CPU; otherwise it sleeps. The
	// tasks are BTF pointers the kernel passes: read directly (relocated by CO-RE), without a helper call.
	slot = move(prev->pid, preempt || prev_state == 0 ? RANK_QUEUED : RANK_ASLEEP, now);
	if (slot >= 0)
		record(slot, cpu, TIMELINE_OFF, now);
	slot = move(next->pid, RANK_RUNNING, now);
	if (slot >= 0)
		record(slot, cpu, TIMELINE_ON, now);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(together_wakeup, struct task_struct *p)
{
	wake(p->pid, bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(together_wakeup_new, struct task_struct *p)
{
	wake(p->pid, bpf_ktime_get_ns());
	return 0;
}

SEC("iter/task")
int together_look(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct job_size *size;
	struct rank *r;
	__u32 tid, slot, was, now_state;

	if (!task)
		return 0;
	tid = task->pid;
	r = rank_of(tid, &slot, &size);
	if (!r)
		return 0;
	was = r->state;
	// Only a rank unknown in this generation: an event that came first knows better.
	if (state_in(was, size->gen) != RANK_UNKNOWN)
		return 0;
	now_state = task->on_cpu ? RANK_RUNNING : task->__state == 0 ? RANK_QUEUED : RANK_ASLEEP;
	if (__sync_val_compare_and_swap(&r->state, was, word(size->gen, now_state)) == was)
		account(slot, size->gen, size->ranks, RANK_UNKNOWN, now_state, bpf_ktime_get_ns());
	return 0;
}

SEC("iter/task")
int timeline_look(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct job_size *size;
	__u32 slot;

	// The ranks on a CPU as the recording starts: a rank that runs on alone may not switch within the window.
	// The CPU a task is on is its thread_info's (CONFIG_THREAD_INFO_IN_TASK); without it, it stays unknown.
	if (!task || !task->on_cpu || !bpf_core_field_exists(task->thread_info.cpu))
		return 0;
	if (!rank_of(task->pid, &slot, &size))
		return 0;
	record(slot, task->thread_info.cpu, TIMELINE_ON, bpf_ktime_get_ns());
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
