// SPDX-License-Identifier: GPL-2.0
//
// together: for each measured job, the time in which all its ranks on this node were on a CPU at once, and the
// time in which one of them was runnable but waited for a CPU.
//
// BTF tracepoint programs on sched_switch, sched_wakeup and sched_wakeup_new follow the ranks the agent put in
// `ranks` (thread id -> job slot and state) from state to state: asleep, queued (woken, or preempted while
// runnable), running. Every change of a rank's state moves its job's counts of running and queued ranks, and first
// adds the time since the job's previous change to `together_ns` if every rank ran during it (running >= the size
// the agent wrote in `sizes`), and to `waiting_ns` if one waited. A thread that is not a rank costs one hash lookup
// per event. The state moves by one atomic exchange (a compare-exchange for a wake-up, which only wakes a sleeper),
// so that events racing on several CPUs each move the counts once; the counts and times move under the job's lock.
//
// The agent registers a rank as RANK_UNKNOWN and then runs the task iterator `together_look`, which gives each
// rank still unknown the state it has now (on a CPU, runnable, or asleep): a rank that runs alone on its CPU may
// not switch for a long time, and must not count as asleep meanwhile.
//
// Kernel structures are read with CO-RE through minimal definitions of the few fields used, as dcs.bpf.c does.

#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "together_intf.h"

struct task_struct {
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
	__type(value, __u32);
} sizes SEC(".maps");

/// Moves job `slot`'s counts from a rank's state `from` to `to` at `now`, after integrating the time since its
/// last change.
static __always_inline void account(__u32 slot, __u32 from, __u32 to, __u64 now)
{
	struct job_time *j = bpf_map_lookup_elem(&jobs, &slot);
	__u32 *size = bpf_map_lookup_elem(&sizes, &slot);
	__s32 want;

	if (!j || !size)
		return;
	want = (__s32)*size;
	bpf_spin_lock(&j->lock);
	if (j->last_ns && now > j->last_ns) {
		__u64 dt = now - j->last_ns;

		if (want > 0 && j->running >= want)
			j->together_ns += dt;
		if (j->queued > 0)
			j->waiting_ns += dt;
	}
	if (now > j->last_ns)
		j->last_ns = now;
	j->running += (to == RANK_RUNNING) - (from == RANK_RUNNING);
	j->queued += (to == RANK_QUEUED) - (from == RANK_QUEUED);
	bpf_spin_unlock(&j->lock);
}

/// Thread `tid`, if it is a rank, is now in state `to`.
static __always_inline void move(__u32 tid, __u32 to, __u64 now)
{
	struct rank *r = bpf_map_lookup_elem(&ranks, &tid);
	__u32 from;

	if (!r)
		return;
	from = __sync_lock_test_and_set(&r->state, to);
	if (from != to)
		account(r->job, from, to, now);
}

/// Thread `tid`, if it is a rank and asleep, is woken: queued. (A wake-up of a running thread changes nothing.)
static __always_inline void wake(__u32 tid, __u64 now)
{
	struct rank *r = bpf_map_lookup_elem(&ranks, &tid);

	if (r && __sync_val_compare_and_swap(&r->state, RANK_ASLEEP, RANK_QUEUED) == RANK_ASLEEP)
		account(r->job, RANK_ASLEEP, RANK_QUEUED, now);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(together_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();

	// Preempted, or yielded while runnable (state 0, TASK_RUNNING): it waits for a CPU; otherwise it sleeps.
	move(BPF_CORE_READ(prev, pid), preempt || prev_state == 0 ? RANK_QUEUED : RANK_ASLEEP, now);
	move(BPF_CORE_READ(next, pid), RANK_RUNNING, now);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(together_wakeup, struct task_struct *p)
{
	wake(BPF_CORE_READ(p, pid), bpf_ktime_get_ns());
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(together_wakeup_new, struct task_struct *p)
{
	wake(BPF_CORE_READ(p, pid), bpf_ktime_get_ns());
	return 0;
}

SEC("iter/task")
int together_look(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct rank *r;
	__u32 tid, now_state;

	if (!task)
		return 0;
	tid = BPF_CORE_READ(task, pid);
	r = bpf_map_lookup_elem(&ranks, &tid);
	if (!r)
		return 0;
	now_state = BPF_CORE_READ(task, on_cpu) ? RANK_RUNNING :
		    BPF_CORE_READ(task, __state) == 0 ? RANK_QUEUED : RANK_ASLEEP;
	// Only from unknown: an event that came first knows better.
	if (__sync_val_compare_and_swap(&r->state, RANK_UNKNOWN, now_state) == RANK_UNKNOWN)
		account(r->job, RANK_UNKNOWN, now_state, bpf_ktime_get_ns());
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
