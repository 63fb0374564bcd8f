/*
 * pthread: the C library's mutex (glibc: a futex word, spinning briefly in the adaptive type), the baseline every
 * other algorithm is compared with. Its memory ordering is the C library's: acquire on lock, release on unlock.
 */
#include <errno.h>
#include <pthread.h>

#include "lock_impl.h"

static void init(void *s)
{
	pthread_mutex_init(s, NULL);
}

static int acquire(void *s)
{
	return pthread_mutex_lock(s);
}

static int tryacquire(void *s)
{
	return pthread_mutex_trylock(s) == 0 ? 0 : EBUSY;
}

static void release(void *s)
{
	pthread_mutex_unlock(s);
}

static void destroy(void *s)
{
	pthread_mutex_destroy(s);
}

const struct ls_ops ls_pthread_ops = { "pthread", sizeof(pthread_mutex_t), init, acquire, tryacquire, release, destroy };
