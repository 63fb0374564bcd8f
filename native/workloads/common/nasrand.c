#include "nasrand.h"

void nas_vranlc(long n, uint64_t *x, uint64_t a, double *y)
{
    uint64_t s = *x;
    for (long i = 0; i < n; i++) {
        s = nas_mul(a, s);
        y[i] = (double)s * 0x1p-46;
    }
    *x = s;
}

uint64_t nas_pow(uint64_t a, uint64_t n)
{
    uint64_t r = 1;
    while (n) {
        if (n & 1)
            r = nas_mul(r, a);
        a = nas_mul(a, a);
        n >>= 1;
    }
    return r;
}
