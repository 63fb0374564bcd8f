/*
 * MG — multigrid (NAS report RNR-94-007, "MG"): V-cycles for the discrete Poisson problem on a periodic 3-D grid
 * with a right-hand side of +1 at the 10 largest and -1 at the 10 smallest of n^3 random numbers; the result is the
 * L2 norm of the final residual. Operators A (resid), S (psinv), P (rprj3) and Q (interp) use the spec's 27-point
 * coefficients. The ranks form a py x pz grid (kernel_grid_rows: 1 x 2, 2 x 2, 2 x 4, 4 x 4), and each level is
 * cut into blocks of whole x-rows over it, ny = n / py rows (y) by nz = n / pz planes (z) per rank, while it has at
 * least one of each per rank; ghost rows and planes are exchanged with the four grid neighbours, so that a rank
 * sends about 2 n^2 (1 / py + 1 / pz) numbers per exchange, where slabs of z-planes sent 2 n^2 at any rank count.
 * Coarser levels are replicated on every rank, gathered once on the way down.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel.h"
#include "common/nasrand.h"

#define MAXLEVEL 11
#define NEXTREME 10
#define SEED UINT64_C(314159265)

struct mg_class {
    char cls;
    int log2n, nit;
    double rnm2;
};

static const struct mg_class CLASSES[] = {
    { 'S', 5, 4, 0.5307707005734e-04 },
    { 'W', 7, 4, 0.6467329375339e-05 },
    { 'A', 8, 4, 0.2433365309069e-05 },
    { 'B', 8, 20, 0.1800564401355e-05 },
};

/* One grid level: n^3 interior points; this rank holds rows y0 .. y0+ny-1 of planes z0 .. z0+nz-1 (1-based
 * global), every row whole (n points in x), plus one ghost layer on every side. A replicated level holds everything
 * (y0 = z0 = 1, ny = nz = n). */
struct level {
    int n, ny, nz, y0, z0, replicated;
    long m1, plane; /* points per row and per plane, ghosts included */
    double *u, *r;
};

struct mg {
    struct kernel_ctx *k;
    int lt;
    struct level lv[MAXLEVEL + 1];
    double *v;
    double a[4], c[4];
    /* The rank grid (py x pz, this rank at (ry, rz)) and the neighbours across y (south, north) and z (down, up). */
    int py, pz, ry, rz, south, north, down, up;
    /* Ghost rows on their way, packed: a send and a receive buffer of nz rows each, for the finest level. */
    double *rows_out, *rows_in;
};

static inline double *at(const struct level *l, double *g, long i3, long i2, long i1)
{
    return g + i3 * l->plane + i2 * l->m1 + i1;
}

/* Sends row `from` of every interior plane of g to rank `to` and receives row `into` of every plane from `from_rank`
 * (the y exchange of comm3: the rows are strided, so they travel packed). */
static void swap_rows(const struct mg *s, const struct level *l, double *g, long from, int to, long into,
                      int from_rank, int tag)
{
    for (long i3 = 1; i3 <= l->nz; i3++)
        memcpy(s->rows_out + (i3 - 1) * l->m1, at(l, g, i3, from, 0), l->m1 * sizeof(double));
    MPI_Sendrecv(s->rows_out, (int)(l->nz * l->m1), MPI_DOUBLE, to, tag, s->rows_in, (int)(l->nz * l->m1),
                 MPI_DOUBLE, from_rank, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (long i3 = 1; i3 <= l->nz; i3++)
        memcpy(at(l, g, i3, into, 0), s->rows_in + (i3 - 1) * l->m1, l->m1 * sizeof(double));
}

/* Periodic ghost layers: x inside each row; then y, whole rows (x ghosts included), from the grid neighbours across
 * y; then z, whole planes (y ghosts included), from those across z; locally where the level is replicated or the
 * grid is one rank wide. Each step carries the previous one's ghosts, so edges and corners are filled too. */
static void comm3(const struct mg *s, const struct level *l, double *g)
{
    long n = l->n, ny = l->ny, nz = l->nz;
    for (long i3 = 1; i3 <= nz; i3++)
        for (long i2 = 1; i2 <= ny; i2++) {
            *at(l, g, i3, i2, 0) = *at(l, g, i3, i2, n);
            *at(l, g, i3, i2, n + 1) = *at(l, g, i3, i2, 1);
        }
    if (l->replicated || s->py == 1) {
        for (long i3 = 1; i3 <= nz; i3++) {
            memcpy(at(l, g, i3, 0, 0), at(l, g, i3, ny, 0), l->m1 * sizeof(double));
            memcpy(at(l, g, i3, ny + 1, 0), at(l, g, i3, 1, 0), l->m1 * sizeof(double));
        }
    } else {
        swap_rows(s, l, g, ny, s->north, 0, s->south, 1);
        swap_rows(s, l, g, 1, s->south, ny + 1, s->north, 2);
    }
    if (l->replicated || s->pz == 1) {
        memcpy(at(l, g, 0, 0, 0), at(l, g, nz, 0, 0), l->plane * sizeof(double));
        memcpy(at(l, g, nz + 1, 0, 0), at(l, g, 1, 0, 0), l->plane * sizeof(double));
        return;
    }
    MPI_Sendrecv(at(l, g, nz, 0, 0), (int)l->plane, MPI_DOUBLE, s->up, 3, at(l, g, 0, 0, 0), (int)l->plane,
                 MPI_DOUBLE, s->down, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(at(l, g, 1, 0, 0), (int)l->plane, MPI_DOUBLE, s->down, 4, at(l, g, nz + 1, 0, 0), (int)l->plane,
                 MPI_DOUBLE, s->up, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void zero3(const struct level *l, double *g)
{
    memset(g, 0, (l->nz + 2) * l->plane * sizeof(double));
}

/* Along row (i3, i2) of g: s1 = sum of the 4 edge neighbours in the y-z plane, s2 = sum of the 4 corner ones. */
static void neighbour_sums(const struct level *l, double *g, long i3, long i2, double *s1, double *s2)
{
    for (long i1 = 0; i1 <= l->n + 1; i1++) {
        s1[i1] = *at(l, g, i3, i2 - 1, i1) + *at(l, g, i3, i2 + 1, i1) + *at(l, g, i3 - 1, i2, i1) +
                 *at(l, g, i3 + 1, i2, i1);
        s2[i1] = *at(l, g, i3 - 1, i2 - 1, i1) + *at(l, g, i3 - 1, i2 + 1, i1) + *at(l, g, i3 + 1, i2 - 1, i1) +
                 *at(l, g, i3 + 1, i2 + 1, i1);
    }
}

/* r = v - A u (v and r may be the same grid). */
static void resid(const struct mg *s, const struct level *l, double *u, double *v, double *r)
{
    long n = l->n;
    double u1[l->m1], u2[l->m1];
    for (long i3 = 1; i3 <= l->nz; i3++)
        for (long i2 = 1; i2 <= l->ny; i2++) {
            neighbour_sums(l, u, i3, i2, u1, u2);
            for (long i1 = 1; i1 <= n; i1++)
                *at(l, r, i3, i2, i1) = *at(l, v, i3, i2, i1) - s->a[0] * *at(l, u, i3, i2, i1) -
                                        s->a[2] * (u2[i1] + u1[i1 - 1] + u1[i1 + 1]) -
                                        s->a[3] * (u2[i1 - 1] + u2[i1 + 1]);
        }
    comm3(s, l, r);
}

/* u = u + S r: the smoother. */
static void psinv(const struct mg *s, const struct level *l, double *r, double *u)
{
    long n = l->n;
    double r1[l->m1], r2[l->m1];
    for (long i3 = 1; i3 <= l->nz; i3++)
        for (long i2 = 1; i2 <= l->ny; i2++) {
            neighbour_sums(l, r, i3, i2, r1, r2);
            for (long i1 = 1; i1 <= n; i1++)
                *at(l, u, i3, i2, i1) += s->c[0] * *at(l, r, i3, i2, i1) +
                                         s->c[1] * (*at(l, r, i3, i2, i1 - 1) + *at(l, r, i3, i2, i1 + 1) + r1[i1]) +
                                         s->c[2] * (r2[i1] + r1[i1 - 1] + r1[i1 + 1]);
        }
    comm3(s, l, u);
}

/* First and one-past-last global coarse index (plane or row) a rank computes when restricting from a fine level
 * of which it holds the `count` planes or rows from `first` on: those whose central fine index 2j it holds. */
static void coarse_range(int first, int count, int *lo, int *hi)
{
    *lo = (first + 1) / 2;
    *hi = (first + count - 1) / 2 + 1;
}

/* Fills the replicated coarse level c, of which every rank computed the block that coarse_range gives it from the
 * distributed fine level f, with every rank's block. */
static void gather_blocks(const struct mg *s, const struct level *f, const struct level *c)
{
    int P = s->k->nprocs, *counts = malloc(P * sizeof(int)), *displs = malloc(P * sizeof(int));
    int (*range)[4] = malloc(P * sizeof *range);
    double *all = malloc((size_t)c->n * c->n * c->m1 * sizeof(double));
    if (!counts || !displs || !range || !all)
        kernel_fail(s->k, "out of memory gathering a %d^3 grid", c->n);
    int offset = 0;
    for (int r = 0; r < P; r++) {
        int ry = r % s->py, rz = r / s->py, *b = range[r];
        coarse_range(ry * f->ny + 1, f->ny, &b[0], &b[1]);
        coarse_range(rz * f->nz + 1, f->nz, &b[2], &b[3]);
        counts[r] = (int)((b[1] - b[0]) * (b[3] - b[2]) * c->m1);
        displs[r] = offset;
        offset += counts[r];
    }
    /* This rank's block, packed row by row, then every block into its place. */
    int *mine = range[s->k->rank];
    double *out = all + displs[s->k->rank];
    for (int j3 = mine[2]; j3 < mine[3]; j3++)
        for (int j2 = mine[0]; j2 < mine[1]; j2++, out += c->m1)
            memcpy(out, at(c, c->r, j3, j2, 0), c->m1 * sizeof(double));
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int r = 0; r < P; r++) {
        double *in = all + displs[r];
        for (int j3 = range[r][2]; j3 < range[r][3]; j3++)
            for (int j2 = range[r][0]; j2 < range[r][1]; j2++, in += c->m1)
                memcpy(at(c, c->r, j3, j2, 0), in, c->m1 * sizeof(double));
    }
    free(counts), free(displs), free(range), free(all);
}

/* Coarse residual = P fine residual (full weighting). */
static void rprj3(const struct mg *s, const struct level *f, const struct level *c)
{
    long n = c->n;
    double x1[f->m1], y1[f->m1];
    int lo3, hi3, lo2, hi2;
    coarse_range(f->z0, f->nz, &lo3, &hi3);
    coarse_range(f->y0, f->ny, &lo2, &hi2);
    for (int j3g = lo3; j3g < hi3; j3g++) {
        long i3 = 2L * j3g - 1 - f->z0 + 1; /* local index of fine plane 2*j3 - 1 */
        long j3 = j3g - c->z0 + 1;
        for (int j2g = lo2; j2g < hi2; j2g++) {
            long i2 = 2L * j2g - 1 - f->y0 + 1; /* local index of fine row 2*j2 - 1 */
            long j2 = j2g - c->y0 + 1;
            for (long j1 = 1; j1 <= n + 1; j1++) {
                long i1 = 2 * j1 - 1;
                x1[i1] = *at(f, f->r, i3 + 1, i2, i1) + *at(f, f->r, i3 + 1, i2 + 2, i1) +
                         *at(f, f->r, i3, i2 + 1, i1) + *at(f, f->r, i3 + 2, i2 + 1, i1);
                y1[i1] = *at(f, f->r, i3, i2, i1) + *at(f, f->r, i3 + 2, i2, i1) + *at(f, f->r, i3, i2 + 2, i1) +
                         *at(f, f->r, i3 + 2, i2 + 2, i1);
            }
            for (long j1 = 1; j1 <= n; j1++) {
                long i1 = 2 * j1 - 1;
                double y2 = *at(f, f->r, i3, i2, i1 + 1) + *at(f, f->r, i3 + 2, i2, i1 + 1) +
                            *at(f, f->r, i3, i2 + 2, i1 + 1) + *at(f, f->r, i3 + 2, i2 + 2, i1 + 1);
                double x2 = *at(f, f->r, i3 + 1, i2, i1 + 1) + *at(f, f->r, i3 + 1, i2 + 2, i1 + 1) +
                            *at(f, f->r, i3, i2 + 1, i1 + 1) + *at(f, f->r, i3 + 2, i2 + 1, i1 + 1);
                *at(c, c->r, j3, j2, j1) =
                    0.5 * *at(f, f->r, i3 + 1, i2 + 1, i1 + 1) +
                    0.25 * (*at(f, f->r, i3 + 1, i2 + 1, i1) + *at(f, f->r, i3 + 1, i2 + 1, i1 + 2) + x2) +
                    0.125 * (x1[i1] + x1[i1 + 2] + y2) + 0.0625 * (y1[i1] + y1[i1 + 2]);
            }
        }
    }
    if (c->replicated && !f->replicated)
        gather_blocks(s, f, c);
    comm3(s, c, c->r);
}

/* Fine u = fine u + Q coarse u (trilinear prolongation): a fine point of even global index in a dimension takes the
 * coarse point of half that index, one of odd index the mean of the two coarse points beside it; sums in the order
 * of the spec's interp, so that every rank count gives the same bits. */
static void interp(const struct mg *s, const struct level *c, const struct level *f)
{
    long mm = c->n + 2;
    double z[mm];
    for (long p3 = 1; p3 <= f->nz; p3++) {
        long g3 = f->z0 + p3 - 1;    /* global fine plane */
        long i3 = g3 / 2 - c->z0 + 1; /* local coarse plane at or below it */
        for (long p2 = 1; p2 <= f->ny; p2++) {
            long g2 = f->y0 + p2 - 1;
            long i2 = g2 / 2 - c->y0 + 1;
            const double *a = at(c, c->u, i3, i2, 0), *b = at(c, c->u, i3, i2 + 1, 0);
            const double *d = at(c, c->u, i3 + 1, i2, 0), *e = at(c, c->u, i3 + 1, i2 + 1, 0);
            /* One loop per parity case: no branch in the inner loop. */
            if (!(g3 & 1) && !(g2 & 1))
                memcpy(z, a, mm * sizeof(double));
            else if (!(g3 & 1))
                for (long i1 = 0; i1 < mm; i1++)
                    z[i1] = 0.5 * (b[i1] + a[i1]);
            else if (!(g2 & 1))
                for (long i1 = 0; i1 < mm; i1++)
                    z[i1] = 0.5 * (d[i1] + a[i1]);
            else
                for (long i1 = 0; i1 < mm; i1++)
                    z[i1] = 0.25 * (e[i1] + d[i1] + (b[i1] + a[i1]));
            double *row = at(f, f->u, p3, p2, 0);
            for (long i1 = 0; i1 < mm - 1; i1++) {
                row[2 * i1] += z[i1];
                row[2 * i1 + 1] += 0.5 * (z[i1] + z[i1 + 1]);
            }
        }
    }
    comm3(s, f, f->u);
}

/* One V-cycle: u = u + M r at the finest level. */
static void mg3p(struct mg *s)
{
    for (int k = s->lt; k >= 2; k--)
        rprj3(s, &s->lv[k], &s->lv[k - 1]);
    zero3(&s->lv[1], s->lv[1].u);
    psinv(s, &s->lv[1], s->lv[1].r, s->lv[1].u);
    for (int k = 2; k < s->lt; k++) {
        struct level *l = &s->lv[k];
        zero3(l, l->u);
        interp(s, &s->lv[k - 1], l);
        resid(s, l, l->u, l->r, l->r);
        psinv(s, l, l->r, l->u);
    }
    struct level *t = &s->lv[s->lt];
    interp(s, &s->lv[s->lt - 1], t);
    resid(s, t, t->u, s->v, t->r);
    psinv(s, t, t->r, t->u);
}

/* One candidate extreme: value and global linear position. */
struct extreme {
    double val;
    long pos;
};

static int by_value_desc(const void *a, const void *b)
{
    const struct extreme *x = a, *y = b;
    if (x->val != y->val)
        return x->val > y->val ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Keeps the NEXTREME largest (sign = 1) or smallest (sign = -1) values seen, sorted best first. */
static void keep(struct extreme *best, double val, long pos, int sign)
{
    if (sign * val <= sign * best[NEXTREME - 1].val)
        return;
    int i = NEXTREME - 1;
    for (; i > 0 && sign * val > sign * best[i - 1].val; i--)
        best[i] = best[i - 1];
    best[i] = (struct extreme){ val, pos };
}

/* The right-hand side (zran3): random numbers in spec order, then +1 at the 10 largest, -1 at the 10 smallest. */
static void zran3(struct mg *s, const struct level *l, double *z)
{
    long n = l->n;
    struct extreme hi[NEXTREME], lo[NEXTREME];
    for (int i = 0; i < NEXTREME; i++)
        hi[i] = (struct extreme){ 0.0, -1 }, lo[i] = (struct extreme){ 1.0, -1 };
    zero3(l, z);
    for (long i3 = 1; i3 <= l->nz; i3++) {
        long g3 = l->z0 + i3 - 1;
        for (long i2 = 1; i2 <= l->ny; i2++) {
            long row = n * ((l->y0 + i2 - 2) + n * (g3 - 1));
            uint64_t x = nas_mul(SEED, nas_pow(NAS_A, (uint64_t)row));
            nas_vranlc(n, &x, NAS_A, at(l, z, i3, i2, 1));
            for (long i1 = 1; i1 <= n; i1++) {
                double v = *at(l, z, i3, i2, i1);
                keep(hi, v, row + i1 - 1, 1);
                keep(lo, v, row + i1 - 1, -1);
            }
        }
    }
    /* Every rank's candidates to everyone; the global extremes are the best of them. */
    int P = s->k->nprocs;
    struct extreme *all = malloc(sizeof(struct extreme) * 2 * NEXTREME * P), mine[2 * NEXTREME];
    memcpy(mine, hi, sizeof hi);
    memcpy(mine + NEXTREME, lo, sizeof lo);
    MPI_Allgather(mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    struct extreme *his = malloc(sizeof(struct extreme) * NEXTREME * P), *los = malloc(sizeof *los * NEXTREME * P);
    for (int r = 0; r < P; r++) {
        memcpy(his + r * NEXTREME, all + r * 2 * NEXTREME, sizeof hi);
        memcpy(los + r * NEXTREME, all + r * 2 * NEXTREME + NEXTREME, sizeof lo);
    }
    qsort(his, (size_t)NEXTREME * P, sizeof *his, by_value_desc);
    qsort(los, (size_t)NEXTREME * P, sizeof *los, by_value_desc);
    zero3(l, z);
    for (int i = 0; i < 2 * NEXTREME; i++) {
        long pos = i < NEXTREME ? los[NEXTREME * P - 1 - i].pos : his[i - NEXTREME].pos;
        long g3 = pos / (n * n) + 1, g2 = pos / n % n + 1, i1 = pos % n + 1;
        if (g3 >= l->z0 && g3 < l->z0 + l->nz && g2 >= l->y0 && g2 < l->y0 + l->ny)
            *at(l, z, g3 - l->z0 + 1, g2 - l->y0 + 1, i1) = i < NEXTREME ? -1.0 : 1.0;
    }
    free(all), free(his), free(los);
    comm3(s, l, z);
}

/* L2 norm (over n^3) and max norm of the interior of grid g. */
static void norm2u3(const struct level *l, double *g, double *rnm2, double *rnmu)
{
    double sum = 0.0, max = 0.0;
    for (long i3 = 1; i3 <= l->nz; i3++)
        for (long i2 = 1; i2 <= l->ny; i2++)
            for (long i1 = 1; i1 <= l->n; i1++) {
                double v = *at(l, g, i3, i2, i1);
                sum += v * v;
                max = fmax(max, fabs(v));
            }
    MPI_Allreduce(&sum, rnm2, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&max, rnmu, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    *rnm2 = sqrt(*rnm2 / ((double)l->n * l->n * l->n));
}

static double *grid(struct kernel_ctx *k, const struct level *l)
{
    double *g = calloc((l->nz + 2) * l->plane, sizeof(double));
    if (!g)
        kernel_fail(k, "out of memory for a %d^3 grid on %d processes", l->n, k->nprocs);
    return g;
}

int main(int argc, char **argv)
{
    struct kernel_ctx k;
    int cls = kernel_init(&k, "mg", "SWAB", &argc, &argv);
    const struct mg_class *c = &CLASSES[cls];

    struct mg s = { .k = &k, .lt = c->log2n, .a = { -8.0 / 3.0, 0.0, 1.0 / 6.0, 1.0 / 12.0 } };
    if (c->cls == 'S' || c->cls == 'W' || c->cls == 'A')
        memcpy(s.c, (double[4]){ -3.0 / 8.0, 1.0 / 32.0, -1.0 / 64.0, 0.0 }, sizeof s.c);
    else
        memcpy(s.c, (double[4]){ -3.0 / 17.0, 1.0 / 33.0, -1.0 / 61.0, 0.0 }, sizeof s.c);
    s.py = kernel_grid_rows(k.nprocs);
    s.pz = k.nprocs / s.py;
    s.ry = k.rank % s.py;
    s.rz = k.rank / s.py;
    s.south = s.rz * s.py + (s.ry + s.py - 1) % s.py;
    s.north = s.rz * s.py + (s.ry + 1) % s.py;
    s.down = (s.rz + s.pz - 1) % s.pz * s.py + s.ry;
    s.up = (s.rz + 1) % s.pz * s.py + s.ry;
    for (int kk = 1; kk <= s.lt; kk++) {
        struct level *l = &s.lv[kk];
        l->n = 1 << kk;
        l->replicated = l->n < s.pz; /* py <= pz: a distributed level has a row and a plane per rank */
        l->ny = l->replicated ? l->n : l->n / s.py;
        l->nz = l->replicated ? l->n : l->n / s.pz;
        l->y0 = l->replicated ? 1 : s.ry * l->ny + 1;
        l->z0 = l->replicated ? 1 : s.rz * l->nz + 1;
        l->m1 = l->n + 2;
        l->plane = (l->ny + 2) * l->m1;
        l->u = grid(&k, l);
        l->r = grid(&k, l);
    }
    struct level *t = &s.lv[s.lt];
    s.rows_out = malloc(2 * t->nz * t->m1 * sizeof(double));
    if (!s.rows_out)
        kernel_fail(&k, "out of memory for the ghost rows of a %d^3 grid", t->n);
    s.rows_in = s.rows_out + t->nz * t->m1;
    s.v = grid(&k, t);
    zran3(&s, t, s.v);
    if (k.args.perturb) {
        if (k.rank == 0)
            *at(t, s.v, 1, 1, 1) += 1e-3;
        comm3(&s, t, s.v);
    }

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), rnm2, rnmu;
    resid(&s, t, t->u, s.v, t->r);
    for (int it = 1; it <= c->nit; it++) {
        mg3p(&s);
        resid(&s, t, t->u, s.v, t->r);
    }
    norm2u3(t, t->r, &rnm2, &rnmu);
    double time = kernel_max_time(MPI_Wtime() - t0);

    double err = kernel_relerr(rnm2, c->rnm2);
    char extra[160];
    snprintf(extra, sizeof extra, "\"rnm2\":%.13e,\"rnm2_reference\":%.13e,\"rel_error\":%.3e,\"rnmu\":%.6e", rnm2,
             c->rnm2, err, rnmu);
    struct kernel_result r = { .iterations = c->nit, .time = time, .optype = "floating point",
                               .verified = err <= 1e-8, .extra = extra };
    snprintf(r.size, sizeof r.size, "%dx%dx%d", t->n, t->n, t->n);
    r.mops = 58.0 * c->nit * pow(t->n, 3) / time / 1e6;
    if (k.rank == 0 && !k.args.json)
        printf(" MG benchmark: rnm2 = %.13e  reference %.13e  relative error %.3e\n", rnm2, c->rnm2, err);
    int rc = kernel_report(&k, &r);
    MPI_Finalize();
    return rc;
}
