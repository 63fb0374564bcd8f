/* Floating-point workloads: dense matrix multiply, an n-body step, and a 2-D Jacobi stencil. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

/* ---- matmul: C = A B, 192 x 192 doubles, i-k-j order with 48-wide blocks ---- */

#define MN 192
#define MB 48

struct matmul {
    double *a, *b, *c;
};

static void *matmul_setup(void)
{
    struct matmul *m = malloc(sizeof *m);
    m->a = malloc(MN * MN * sizeof(double));
    m->b = malloc(MN * MN * sizeof(double));
    m->c = malloc(MN * MN * sizeof(double));
    for (int i = 0; i < MN * MN; i++) {
        m->a[i] = (i % 7) - 3.0;
        m->b[i] = (i % 5) * 0.5;
    }
    return m;
}

static double matmul_run(void *p)
{
    struct matmul *m = p;
    memset(m->c, 0, MN * MN * sizeof(double));
    for (int ii = 0; ii < MN; ii += MB)
        for (int kk = 0; kk < MN; kk += MB)
            for (int jj = 0; jj < MN; jj += MB)
                for (int i = ii; i < ii + MB; i++)
                    for (int k = kk; k < kk + MB; k++) {
                        double aik = m->a[i * MN + k];
                        for (int j = jj; j < jj + MB; j++)
                            m->c[i * MN + j] += aik * m->b[k * MN + j];
                    }
    return 2.0 * MN * MN * MN / 1e9;
}

/* One element recomputed directly (inputs are small integers and halves: the sum is exact). */
static int matmul_check(void *p)
{
    struct matmul *m = p;
    double s = 0.0;
    for (int k = 0; k < MN; k++)
        s += m->a[5 * MN + k] * m->b[k * MN + 7];
    return s == m->c[5 * MN + 7];
}

static void matmul_teardown(void *p)
{
    struct matmul *m = p;
    free(m->a), free(m->b), free(m->c), free(m);
}

const struct workload WL_MATMUL = { "matmul", FLOAT, "GFLOP/s", 4.0, matmul_setup, matmul_run, matmul_check,
                                    matmul_teardown };

/* ---- nbody: one leapfrog step of 512 bodies with softened gravity ---- */

#define BODIES 512

struct nbody {
    double x[BODIES], y[BODIES], z[BODIES], vx[BODIES], vy[BODIES], vz[BODIES], m[BODIES];
    double p0; /* momentum at the start: conserved by the symmetric force */
};

static double momentum(const struct nbody *b)
{
    double px = 0.0;
    for (int i = 0; i < BODIES; i++)
        px += b->m[i] * b->vx[i];
    return px;
}

static void *nbody_setup(void)
{
    struct nbody *b = calloc(1, sizeof *b);
    for (int i = 0; i < BODIES; i++) {
        double t = i * 0.618033988749895;
        b->x[i] = cos(t * 6.283) * (1 + i % 13);
        b->y[i] = sin(t * 6.283) * (1 + i % 11);
        b->z[i] = (i % 17) - 8.0;
        b->vx[i] = 0.01 * ((i % 3) - 1);
        b->m[i] = 1.0 + (i % 4);
    }
    b->p0 = momentum(b);
    return b;
}

static double nbody_run(void *p)
{
    struct nbody *b = p;
    const double dt = 1e-3, eps2 = 1e-2;
    for (int i = 0; i < BODIES; i++) {
        double ax = 0.0, ay = 0.0, az = 0.0;
        for (int j = 0; j < BODIES; j++) {
            double dx = b->x[j] - b->x[i], dy = b->y[j] - b->y[i], dz = b->z[j] - b->z[i];
            double r2 = dx * dx + dy * dy + dz * dz + eps2;
            double inv = b->m[j] / (r2 * sqrt(r2));
            ax += dx * inv;
            ay += dy * inv;
            az += dz * inv;
        }
        b->vx[i] += dt * ax;
        b->vy[i] += dt * ay;
        b->vz[i] += dt * az;
    }
    for (int i = 0; i < BODIES; i++) {
        b->x[i] += dt * b->vx[i];
        b->y[i] += dt * b->vy[i];
        b->z[i] += dt * b->vz[i];
    }
    return (double)BODIES * BODIES / 1e6;
}

/* Total momentum is conserved up to rounding. */
static int nbody_check(void *p)
{
    struct nbody *b = p;
    return fabs(momentum(b) - b->p0) < 1e-6;
}

const struct workload WL_NBODY = { "nbody", FLOAT, "Minteractions/s", 180.0, nbody_setup, nbody_run, nbody_check,
                                   free };

/* ---- stencil: 5-point Jacobi sweeps on a 512 x 512 grid with fixed edges ---- */

#define SN 512

struct stencil {
    double *a, *b;
};

static void *stencil_setup(void)
{
    struct stencil *s = malloc(sizeof *s);
    s->a = calloc(SN * SN, sizeof(double));
    s->b = calloc(SN * SN, sizeof(double));
    for (int i = 0; i < SN; i++)
        s->a[i] = s->b[i] = 1.0; /* hot top edge */
    return s;
}

static double stencil_run(void *p)
{
    struct stencil *s = p;
    for (int i = 1; i < SN - 1; i++)
        for (int j = 1; j < SN - 1; j++)
            s->b[i * SN + j] =
                0.25 * (s->a[(i - 1) * SN + j] + s->a[(i + 1) * SN + j] + s->a[i * SN + j - 1] + s->a[i * SN + j + 1]);
    double *t = s->a;
    s->a = s->b;
    s->b = t;
    return (double)(SN - 2) * (SN - 2) / 1e6;
}

/* The maximum principle: every value stays within the boundary values [0, 1]. */
static int stencil_check(void *p)
{
    struct stencil *s = p;
    for (int i = 0; i < SN * SN; i++)
        if (s->a[i] < 0.0 || s->a[i] > 1.0)
            return 0;
    return s->a[SN + SN / 2] > 0.0;
}

static void stencil_teardown(void *p)
{
    struct stencil *s = p;
    free(s->a), free(s->b), free(s);
}

const struct workload WL_STENCIL = { "stencil", FLOAT, "Mpoints/s", 1400.0, stencil_setup, stencil_run, stencil_check,
                                     stencil_teardown };
