/*
 * The NAS Parallel Benchmarks' pseudorandom generator (NAS report RNR-94-007, section 2.3):
 *   x_{k+1} = a * x_k  (mod 2^46),   value r_k = x_k / 2^46 in (0, 1).
 * The reference computes it in double precision with a split multiply; here the state is an exact 46-bit
 * integer and the product is taken in 128 bits, which yields bit-identical values.
 */
#ifndef LOCKSTEP_NASRAND_H
#define LOCKSTEP_NASRAND_H

#include <stdint.h>

/** The multiplier every kernel uses: 5^13. */
#define NAS_A UINT64_C(1220703125)

/** Returns a * x mod 2^46. */
static inline uint64_t nas_mul(uint64_t a, uint64_t x)
{
    return (uint64_t)(((unsigned __int128)a * x) & ((UINT64_C(1) << 46) - 1));
}

/** Advances *x by one step of multiplier a and returns the new value scaled to (0, 1) (the spec's randlc). */
static inline double nas_randlc(uint64_t *x, uint64_t a)
{
    *x = nas_mul(a, *x);
    return (double)*x * 0x1p-46;
}

/** Fills y[0..n) with the next n values of the stream *x (the spec's vranlc). */
void nas_vranlc(long n, uint64_t *x, uint64_t a, double *y);

/** Returns a^n mod 2^46: the multiplier that skips n steps of the stream. */
uint64_t nas_pow(uint64_t a, uint64_t n);

#endif
