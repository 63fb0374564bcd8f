/*
 * The per-thread pool of queue nodes: LS_MAX_HELD nodes in thread-local storage and a bitmask of the used ones.
 * A node is taken when its thread queues on a lock and given back when the thread no longer needs it (mcs and
 * cna: at release; the preemption-tolerant variants: when the lock is taken), so a thread holds at most
 * LS_MAX_HELD queue locks at once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "queue.h"
#include "lock_impl.h"

_Static_assert(LS_MAX_HELD <= 64, "the pool's bitmask has 64 bits");

static _Thread_local struct ls_qnode pool[LS_MAX_HELD];
static _Thread_local uint64_t used;

struct ls_qnode *ls_qnode_get(void)
{
	if (used == UINT64_MAX >> (64 - LS_MAX_HELD)) {
		fprintf(stderr, "liblockstep-locks: a thread holds more than %d queue locks at once\n", LS_MAX_HELD);
		abort();
	}
	int i = __builtin_ctzll(~used);
	used |= 1ull << i;
	return &pool[i];
}

void ls_qnode_put(struct ls_qnode *n)
{
	used &= ~(1ull << (n - pool));
}
