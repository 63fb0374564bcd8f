/*
 * libFuzzer target: the LOCKSTEP_NUMA_MAP parser of the lock library (native/locks/numa.c), and the
 * LOCKSTEP_CNA_BOUND and LOCKSTEP_LOCK settings the interposer reads, on arbitrary text. numa.c is included so
 * that its parser, which is static, is called directly.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../native/locks/numa.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (parse(text) != 0 && error[0] == '\0')
		abort(); /* a refused map must say why */
	error[0] = '\0';
	for (int cpu = 0; cpu < LS_NUMA_MAX_CPUS; cpu++)
		if (node_of[cpu] >= LS_NUMA_MAX_NODES)
			abort(); /* every node taken from a map is in range */
	memset(node_of, 0, sizeof node_of);
	free(text);
	return 0;
}
