/*
 * The NUMA node of the calling thread, for the NUMA-aware locks: the node of the CPU it runs on now, from the
 * kernel (getcpu) or, when LOCKSTEP_NUMA_MAP is set, from that CPU-to-node map, so that tests and experiments can
 * emulate several nodes on a machine that has one.
 *
 *   LOCKSTEP_NUMA_MAP="0:0-3,8-11;1:4-7,12-15"   NODE:CPULIST pairs separated by ';' (CPUs not listed: node 0)
 *
 * The map is read once, at the first use. A malformed map is reported by ls_lock_config_error() and ignored: every
 * CPU then counts as node 0.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock_impl.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int mapped;
static unsigned short node_of[LS_NUMA_MAX_CPUS];
static char error[256];

/* Reads a decimal number in [0, max] at *p and moves *p past it; -1 if there is none or it is too large. */
static long number(const char **p, long max)
{
	char *end;
	if (**p < '0' || **p > '9')
		return -1;
	errno = 0;
	long v = strtol(*p, &end, 10);
	if (errno || v > max)
		return -1;
	*p = end;
	return v;
}

/* Fills node_of from `map`; 0, or -1 with `error` set. */
static int parse(const char *map)
{
	unsigned char seen[LS_NUMA_MAX_CPUS] = { 0 };
	const char *p = map;
	if (!*p)
		goto bad;
	for (;;) {
		long node = number(&p, LS_NUMA_MAX_NODES - 1);
		if (node < 0 || *p != ':')
			goto bad;
		p++;
		for (;;) {
			long first = number(&p, LS_NUMA_MAX_CPUS - 1), last = first;
			if (first < 0)
				goto bad;
			if (*p == '-') {
				p++;
				last = number(&p, LS_NUMA_MAX_CPUS - 1);
				if (last < first)
					goto bad;
			}
			for (long cpu = first; cpu <= last; cpu++) {
				if (seen[cpu]++) {
					snprintf(error, sizeof error,
						 "bad LOCKSTEP_NUMA_MAP \"%.64s\": CPU %ld is given twice", map, cpu);
					return -1;
				}
				node_of[cpu] = (unsigned short)node;
			}
			if (*p != ',')
				break;
			p++;
		}
		if (!*p)
			return 0;
		if (*p++ != ';')
			goto bad;
	}
bad:
	snprintf(error, sizeof error,
		 "bad LOCKSTEP_NUMA_MAP \"%.64s\" near \"%.16s\" (expected NODE:CPULIST pairs separated by ';', "
		 "e.g. 0:0-3;1:4-7, with CPUs below %d and nodes below %d)",
		 map, p, LS_NUMA_MAX_CPUS, LS_NUMA_MAX_NODES);
	return -1;
}

static void load(void)
{
	const char *map = secure_getenv("LOCKSTEP_NUMA_MAP");
	if (!map)
		return;
	mapped = 1;
	if (parse(map) != 0)
		memset(node_of, 0, sizeof node_of);
}

int ls_numa_node(void)
{
	pthread_once(&once, load);
	if (mapped) {
		int cpu = sched_getcpu();
		return cpu >= 0 && cpu < LS_NUMA_MAX_CPUS ? node_of[cpu] : 0;
	}
	unsigned cpu, node;
	return getcpu(&cpu, &node) == 0 ? (int)node : 0;
}

const char *ls_numa_error(void)
{
	pthread_once(&once, load);
	return error[0] ? error : NULL;
}
