/*
 * What every native program shares on its command line: strict number parsing (the whole text, in a range), the
 * one-line refusal ("PROG: what (expected ...)" on stderr, control characters escaped, length capped) and, for
 * programs an MPI launcher starts several times, the launcher's rank before MPI_Init, so that only rank 0 says it.
 *
 * Header only (static inline): the MPI kernels, pi, pingpong, commprobe, corebench and lockbench include it.
 */
#ifndef LOCKSTEP_CLI_H
#define LOCKSTEP_CLI_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Most bytes of a refusal's message before it is cut (a 128 KB argument stays one short line). */
#define CLI_MESSAGE_MAX 400

/*
 * The rank an MPI launcher gave this process, read from its environment before MPI_Init: Open MPI's
 * OMPI_COMM_WORLD_RANK, PMIx's PMIX_RANK, MPICH's (and Slurm's PMI) PMI_RANK, srun's SLURM_PROCID. 0 when none is
 * set (a program run on its own) or the value is not a rank.
 */
static inline long cli_launcher_rank(void)
{
	static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID" };
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *v = getenv(vars[i]);
		if (!v || !*v)
			continue;
		char *end;
		errno = 0;
		long r = strtol(v, &end, 10);
		return errno || *end || r < 0 ? 0 : r;
	}
	return 0;
}

/* Writes "PROG: message\n" to stderr as one line: bytes below 0x20 and 0x7f as \xNN, cut at CLI_MESSAGE_MAX. */
static inline void cli_vsay(const char *prog, const char *fmt, va_list ap)
{
	char msg[CLI_MESSAGE_MAX + 1];
	int n = vsnprintf(msg, sizeof msg, fmt, ap);
	char out[4 * CLI_MESSAGE_MAX + 8];
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", *p);
		else
			out[o++] = (char)*p;
	}
	if (n > CLI_MESSAGE_MAX)
		o += (size_t)snprintf(out + o, sizeof out - o, "...");
	out[o] = 0;
	fprintf(stderr, "%s: %s\n", prog, out);
	fflush(stderr);
}

/*
 * A usage error before MPI_Init (or in a program without MPI): cli_vsay on launcher rank 0 only (the other ranks of
 * a job refuse the same arguments in silence), then exit status 2 on every rank.
 */
static inline __attribute__((noreturn, format(printf, 2, 3))) void cli_refuse(const char *prog, const char *fmt, ...)
{
	if (cli_launcher_rank() == 0) {
		va_list ap;
		va_start(ap, fmt);
		cli_vsay(prog, fmt, ap);
		va_end(ap);
	} else {
		/*
		 * Rank 0 says why. A launcher that sees another rank end first stops the rest, rank 0 perhaps before it
		 * has said it (MPICH's, under load: no line, exit status 141). The others wait until the launcher ends
		 * them as rank 0 ends, 1 s at most (a launcher that leaves them, srun by default).
		 */
		sleep(1);
	}
	exit(2);
}

/*
 * Parses all of `text` as a decimal integer from `min` to `max` into *out: 0, or -1 (nothing, spaces, trailing
 * characters, out of range, or past what a long holds). *out is untouched on -1.
 */
static inline int cli_long(const char *text, long min, long max, long *out)
{
	if (!text || !((*text >= '0' && *text <= '9') || ((*text == '-' || *text == '+') && text[1] >= '0' &&
							    text[1] <= '9')))
		return -1;
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/*
 * The value of flag argv[*i] (the next argument, *i moved onto it) as an integer from `min` to `max`; otherwise
 * `prog` refuses in one line (before MPI_Init, so that launcher rank 0 alone says it): a missing or bad value.
 */
static inline long cli_option_long(const char *prog, int argc, char **argv, int *i, long min, long max)
{
	const char *flag = argv[*i];
	if (*i + 1 >= argc)
		cli_refuse(prog, "%s needs a value (an integer from %ld to %ld)", flag, min, max);
	const char *text = argv[++*i];
	long v;
	if (cli_long(text, min, max, &v) != 0)
		cli_refuse(prog, "bad %s '%.40s' (expected an integer from %ld to %ld)", flag, text, min, max);
	return v;
}

/*
 * Parses all of `text` as a finite decimal number from `min` to `max` into *out: 0, or -1 (nothing, spaces,
 * trailing characters, NaN, infinity, hexadecimal, out of range). *out is untouched on -1.
 */
static inline int cli_double(const char *text, double min, double max, double *out)
{
	if (!text || !*text || strpbrk(text, "xXpP") || !((*text >= '0' && *text <= '9') || *text == '.' ||
							    *text == '-' || *text == '+'))
		return -1;
	char *end;
	errno = 0;
	double v = strtod(text, &end);
	if (end == text || *end || errno == ERANGE || !isfinite(v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

#endif
