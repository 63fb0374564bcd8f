/*
 * cna_order: the order in which a NUMA-aware lock serves a queue built one waiter at a time, on an emulated
 * two-node machine. Two CPUs of the affinity mask become node 0 and node 1 (LOCKSTEP_NUMA_MAP); a holder on node
 * 0 takes the lock, then the waiters of SPEC queue in that order (L: a thread pinned to the node-0 CPU, R: to the
 * node-1 CPU; each queues only after the previous one is in the queue, seen from the lock's tail), then the holder
 * releases (cna-pt: once every waiter has parked, so that none takes the lock out of turn). Each waiter writes its label (L1, L2, ..., R1, ...) inside its critical section. Exit 0 when the
 * labels come in the order EXPECTED, 1 otherwise, 77 (skipped) with fewer than two CPUs, 2 on bad arguments.
 *
 *   cna_order cna|cna-pt SPEC EXPECTED        e.g. cna_order cna RLLRL "L1 L2 L3 R1 R2"
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lock_impl.h"
#include "queue.h"

#define MAX_WAITERS 16

static ls_lock *lock;
static int cpu_of_node[2];
static char order[MAX_WAITERS * 4 + 1];

struct waiter {
	pthread_t thread;
	int node;
	char label[8];
};

static void pin(int node)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu_of_node[node], &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
		perror("cna_order: pthread_setaffinity_np");
		exit(1);
	}
}

static void *wait_and_record(void *arg)
{
	struct waiter *w = arg;
	pin(w->node);
	ls_lock_acquire(lock);
	snprintf(order + strlen(order), sizeof order - strlen(order), "%s%s", *order ? " " : "", w->label);
	ls_lock_release(lock);
	return NULL;
}

/* The lock's state, by kind (queue.h). */
static struct ls_qlock *qlock(void)
{
	return (struct ls_qlock *)(void *)lock->state;
}
static struct ls_ptlock *ptlock(void)
{
	return strcmp(ls_lock_name(lock), "cna-pt") == 0 ? (struct ls_ptlock *)(void *)lock->state : NULL;
}

/* The lock's queue tail. */
static struct ls_qnode *tail(void)
{
	return atomic_load(ptlock() ? &ptlock()->tail : &qlock()->tail);
}

/* cna-pt: whether the first waiter heads the queue parked on the word and every other one is parked, so that
 * none can take the lock out of turn when the holder releases it. */
static int all_parked(struct ls_qnode **nodes, size_t n)
{
	if (atomic_load(&ptlock()->word) != LS_PT_HELD_PARKED)
		return 0;
	for (size_t i = 1; i < n; i++)
		if (atomic_load(&nodes[i]->state) != LS_PT_PARKED)
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "cna") != 0 && strcmp(argv[1], "cna-pt") != 0) ||
	    strspn(argv[2], "LR") != strlen(argv[2]) || strlen(argv[2]) > MAX_WAITERS) {
		fprintf(stderr, "usage: cna_order cna|cna-pt SPEC EXPECTED (SPEC: up to %d of L and R)\n", MAX_WAITERS);
		return 2;
	}
	cpu_set_t set;
	sched_getaffinity(0, sizeof set, &set);
	int found = 0;
	for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; cpu++)
		if (CPU_ISSET(cpu, &set))
			cpu_of_node[found++] = cpu;
	if (found < 2) {
		printf("cna_order: needs two CPUs; skipped\n");
		return 77;
	}
	char map[64];
	snprintf(map, sizeof map, "0:%d;1:%d", cpu_of_node[0], cpu_of_node[1]);
	setenv("LOCKSTEP_NUMA_MAP", map, 1);
	lock = ls_lock_create(argv[1]);
	pin(0);
	ls_lock_acquire(lock);
	size_t n = strlen(argv[2]);
	struct waiter w[MAX_WAITERS];
	struct ls_qnode *nodes[MAX_WAITERS];
	unsigned char counts[2] = { 0, 0 };
	for (size_t i = 0; i < n; i++) {
		w[i].node = argv[2][i] == 'R';
		snprintf(w[i].label, sizeof w[i].label, "%c%d", argv[2][i], ++counts[w[i].node]);
		struct ls_qnode *before = tail();
		pthread_create(&w[i].thread, NULL, wait_and_record, &w[i]);
		while (tail() == before)
			sched_yield();
		nodes[i] = tail();
	}
	while (ptlock() && !all_parked(nodes, n))
		sched_yield();
	ls_lock_release(lock);
	for (size_t i = 0; i < n; i++)
		pthread_join(w[i].thread, NULL);
	int ok = strcmp(order, argv[3]) == 0;
	printf("cna_order %s, map %s, bound %u: queued %s, served %s (want %s)\n", argv[1], map, ls_cna_bound(), argv[2],
	       order, argv[3]);
	return ok ? 0 : 1;
}
