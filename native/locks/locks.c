/*
 * liblockstep-locks: the registry of algorithms and the generic entry points.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lock_impl.h"
#include "queue.h"

static const struct ls_ops *const all[] = { &ls_pthread_ops, &ls_ttas_ops,   &ls_ticket_ops,
					    &ls_mcs_ops,     &ls_cna_ops,    &ls_mcs_pt_ops,
					    &ls_cna_pt_ops,  &ls_shfl_ops };

#define COUNT (sizeof all / sizeof all[0])

static const char *names[COUNT + 1];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void list_names(void)
{
	for (size_t i = 0; i < COUNT; i++)
		names[i] = all[i]->name;
}

const char *const *ls_lock_names(void)
{
	pthread_once(&names_once, list_names);
	return names;
}

ls_lock *ls_lock_create(const char *name)
{
	for (size_t i = 0; name && i < COUNT; i++) {
		if (strcmp(all[i]->name, name) != 0)
			continue;
		ls_lock *l = aligned_alloc(64, (sizeof(ls_lock) + all[i]->size + 63) / 64 * 64);
		if (!l) {
			errno = ENOMEM;
			return NULL;
		}
		l->ops = all[i];
		l->ops->init(l->state);
		return l;
	}
	errno = EINVAL;
	return NULL;
}

int ls_lock_acquire(ls_lock *l)
{
	return l->ops->acquire(l->state);
}

int ls_lock_tryacquire(ls_lock *l)
{
	return l->ops->tryacquire(l->state);
}

void ls_lock_release(ls_lock *l)
{
	l->ops->release(l->state);
}

void ls_lock_destroy(ls_lock *l)
{
	if (!l)
		return;
	l->ops->destroy(l->state);
	free(l);
}

const char *ls_lock_name(const ls_lock *l)
{
	return l->ops->name;
}

const char *ls_lock_config_error(void)
{
	const char *why = ls_numa_error();
	return why ? why : ls_cna_bound_error();
}

void ls_nothing(void *state)
{
	(void)state;
}
