/*
 * LU — an LU-like SSOR kernel (our own problem, in the spirit of NAS LU; see docs/workloads.md).
 *
 * Five coupled unknowns per point of an n^3 grid with zero Dirichlet boundary; the operator is
 *   (A u)_p = D u_p - cx (u_{i-1} + u_{i+1}) - cy (u_{j-1} + u_{j+1}) - cz (u_{k-1} + u_{k+1})
 * with a nonsymmetric 5x5 block D, and the right-hand side f = A u* for a known smooth u*. Each iteration is a
 * forward Gauss-Seidel/SOR sweep in lexicographic order and a backward sweep in reverse order (SSOR).
 *
 * The x-y plane is split over a 2-D process grid. A sweep is a pipelined wavefront, as in NAS LU: for every
 * z-plane a rank waits for the new boundary column of its west neighbour and row of its south neighbour, updates
 * its block of the plane, and passes its own east column and north row on (reversed for the backward sweep) — two
 * small messages per plane per sweep. Every point sees exactly the values it would in a 1-rank run, so results
 * agree with the 1-rank run to rounding in the final norms.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel.h"

#define NC 5          /* unknowns per point */
#define OMEGA 1.2     /* over-relaxation */
#define SIGMA 0.01    /* diagonal shift beyond the stencil sum */
static const double CX = 1.0, CY = 0.8, CZ = 0.6;

struct lu_class {
    char cls;
    int n, itmax;
    double rsdnm[NC], errnm[NC]; /* 1-rank reference: residual and error norms after itmax iterations */
};

static const struct lu_class CLASSES[] = {
#include "lu_reference.h"
};

struct lu {
    struct kernel_ctx *k;
    int n, px, py, cx, cy;      /* grid size, process grid, this rank's coordinates */
    int x0, nx, y0, ny;         /* this rank's block: global x0 .. x0+nx-1 (1-based), same for y */
    int west, east, south, north; /* neighbour ranks or MPI_PROC_NULL */
    long sj, sk;                /* strides of j and k in points */
    double *u, *f, *ustar;
    double dinv[NC][NC];
    double *buf;                /* pack buffer for faces */
};

static inline double *pt(const struct lu *s, double *g, long i, long j, long k)
{
    return g + (k * s->sk + j * s->sj + i) * NC;
}

/* The exact solution: smooth, zero on the boundary, different in each component. */
static double exact(int m, double x, double y, double z)
{
    return (1.0 + 0.2 * m) * x * (1 - x) * y * (1 - y) * z * (1 - z) * (1.0 + x + 2.0 * y + 3.0 * z) * 64.0;
}

/* D: diagonally dominant and nonsymmetric. */
static void make_d(double d[NC][NC])
{
    for (int a = 0; a < NC; a++)
        for (int b = 0; b < NC; b++)
            d[a][b] = a == b ? 2.0 * (CX + CY + CZ) + SIGMA : 0.002 * (b - a);
}

/* D^-1 by Gauss-Jordan elimination. */
static void make_dinv(double dinv[NC][NC])
{
    double d[NC][NC], aug[NC][2 * NC];
    make_d(d);
    for (int a = 0; a < NC; a++)
        for (int b = 0; b < NC; b++) {
            aug[a][b] = d[a][b];
            aug[a][NC + b] = a == b;
        }
    for (int c = 0; c < NC; c++) {
        double p = aug[c][c];
        for (int b = 0; b < 2 * NC; b++)
            aug[c][b] /= p;
        for (int a = 0; a < NC; a++)
            if (a != c) {
                double q = aug[a][c];
                for (int b = 0; b < 2 * NC; b++)
                    aug[a][b] -= q * aug[c][b];
            }
    }
    for (int a = 0; a < NC; a++)
        for (int b = 0; b < NC; b++)
            dinv[a][b] = aug[a][NC + b];
}

/* out = (A g) at interior point (i, j, k); g's ghosts must be current. */
static void apply_a(const struct lu *s, double d[NC][NC], double *g, long i, long j, long k, double out[NC])
{
    double *x = pt(s, g, i, j, k);
    for (int m = 0; m < NC; m++) {
        double v = -CX * (x[m - NC] + x[m + NC]) - CY * (x[m - s->sj * NC] + x[m + s->sj * NC]) -
                   CZ * (x[m - s->sk * NC] + x[m + s->sk * NC]);
        for (int c = 0; c < NC; c++)
            v += d[m][c] * x[c];
        out[m] = v;
    }
}

/* Exchanges one ghost face with a neighbour: the face at index `send` goes out, the ghost at `recv` comes in.
 * dir 0 packs x = const columns (ny points per plane), dir 1 packs y = const rows (nx points per plane). */
static void exchange_face(struct lu *s, int dir, int send, int recv, int to, int from, int tag)
{
    long per = (dir == 0 ? s->ny : s->nx) * NC, count = per * s->n;
    double *out = s->buf, *in = s->buf + count;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            MPI_Sendrecv(out, (int)count, MPI_DOUBLE, to, tag, in, (int)count, MPI_DOUBLE, from, tag, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
        if (pass == 1 && from == MPI_PROC_NULL)
            return;
        for (long k = 1; k <= s->n; k++)
            for (long t = 1; t <= (dir == 0 ? s->ny : s->nx); t++) {
                double *p = dir == 0 ? pt(s, s->u, pass ? recv : send, t, k) : pt(s, s->u, t, pass ? recv : send, k);
                double *b = (pass ? in : out) + (k - 1) * per + (t - 1) * NC;
                if (pass)
                    memcpy(p, b, NC * sizeof(double));
                else
                    memcpy(b, p, NC * sizeof(double));
            }
    }
}

/* All four ghost faces of u get the neighbours' current values. */
static void exchange_halo(struct lu *s)
{
    exchange_face(s, 0, s->nx, 0, s->east, s->west, 10);
    exchange_face(s, 0, 1, s->nx + 1, s->west, s->east, 11);
    exchange_face(s, 1, s->ny, 0, s->north, s->south, 12);
    exchange_face(s, 1, 1, s->ny + 1, s->south, s->north, 13);
}

/* Sends (recv = 0) or receives (recv = 1) the column at x-index i of plane k. */
static void column(struct lu *s, long i, long k, int peer, int recv)
{
    if (peer == MPI_PROC_NULL)
        return;
    double *b = s->buf;
    if (!recv)
        for (long j = 1; j <= s->ny; j++)
            memcpy(b + (j - 1) * NC, pt(s, s->u, i, j, k), NC * sizeof(double));
    if (recv) {
        MPI_Recv(b, s->ny * NC, MPI_DOUBLE, peer, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (long j = 1; j <= s->ny; j++)
            memcpy(pt(s, s->u, i, j, k), b + (j - 1) * NC, NC * sizeof(double));
    } else {
        MPI_Send(b, s->ny * NC, MPI_DOUBLE, peer, 20, MPI_COMM_WORLD);
    }
}

/* Sends or receives the row at y-index j of plane k (rows are contiguous in memory). */
static void row(struct lu *s, long j, long k, int peer, int recv)
{
    if (peer == MPI_PROC_NULL)
        return;
    double *p = pt(s, s->u, 1, j, k);
    if (recv)
        MPI_Recv(p, s->nx * NC, MPI_DOUBLE, peer, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Send(p, s->nx * NC, MPI_DOUBLE, peer, 21, MPI_COMM_WORLD);
}

/* The SOR update of one point from the current values of its neighbours. */
static inline void relax(struct lu *s, long i, long j, long k)
{
    double *p = pt(s, s->u, i, j, k), *f = pt(s, s->f, i, j, k);
    const double *w = p - NC, *e = p + NC, *so = p - s->sj * NC, *no = p + s->sj * NC;
    const double *b = p - s->sk * NC, *t = p + s->sk * NC;
    double r[NC];
    for (int m = 0; m < NC; m++)
        r[m] = f[m] + CX * (w[m] + e[m]) + CY * (so[m] + no[m]) + CZ * (b[m] + t[m]);
    for (int a = 0; a < NC; a++) {
        double g = 0.0;
        for (int c = 0; c < NC; c++)
            g += s->dinv[a][c] * r[c];
        p[a] = (1.0 - OMEGA) * p[a] + OMEGA * g;
    }
}

/* Forward sweep: k, j, i ascending; new values flow east and north. */
static void sweep_forward(struct lu *s)
{
    for (long k = 1; k <= s->n; k++) {
        column(s, 0, k, s->west, 1);
        row(s, 0, k, s->south, 1);
        for (long j = 1; j <= s->ny; j++)
            for (long i = 1; i <= s->nx; i++)
                relax(s, i, j, k);
        column(s, s->nx, k, s->east, 0);
        row(s, s->ny, k, s->north, 0);
    }
}

/* Backward sweep: k, j, i descending; new values flow west and south. */
static void sweep_backward(struct lu *s)
{
    for (long k = s->n; k >= 1; k--) {
        column(s, s->nx + 1, k, s->east, 1);
        row(s, s->ny + 1, k, s->north, 1);
        for (long j = s->ny; j >= 1; j--)
            for (long i = s->nx; i >= 1; i--)
                relax(s, i, j, k);
        column(s, 1, k, s->west, 0);
        row(s, 1, k, s->south, 0);
    }
}

/* Norms over the grid: residual f - A u and error u - u*, per component, each sqrt(sum / n^3). */
static void norms(struct lu *s, double rsd[NC], double err[NC])
{
    exchange_halo(s);
    double d[NC][NC], local[2 * NC] = { 0 }, au[NC];
    make_d(d);
    for (long k = 1; k <= s->n; k++)
        for (long j = 1; j <= s->ny; j++)
            for (long i = 1; i <= s->nx; i++) {
                double *p = pt(s, s->u, i, j, k), *f = pt(s, s->f, i, j, k), *x = pt(s, s->ustar, i, j, k);
                apply_a(s, d, s->u, i, j, k, au);
                for (int m = 0; m < NC; m++) {
                    local[m] += (f[m] - au[m]) * (f[m] - au[m]);
                    local[NC + m] += (p[m] - x[m]) * (p[m] - x[m]);
                }
            }
    double sum[2 * NC], points = pow(s->n, 3);
    MPI_Allreduce(local, sum, 2 * NC, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int m = 0; m < NC; m++) {
        rsd[m] = sqrt(sum[m] / points);
        err[m] = sqrt(sum[NC + m] / points);
    }
}

/* u* on the grid (ghosts included, zero on the boundary) and f = A u*; u starts at zero. */
static void setup(struct lu *s)
{
    long total = (s->n + 2L) * s->sk * NC;
    s->u = calloc(total, sizeof(double));
    s->f = calloc(total, sizeof(double));
    s->ustar = calloc(total, sizeof(double));
    long face = (long)(s->nx > s->ny ? s->nx : s->ny) * s->n * NC;
    s->buf = malloc(2 * face * sizeof(double));
    if (!s->u || !s->f || !s->ustar || !s->buf)
        kernel_usage(s->k, "out of memory for a %d^3 grid on %d processes", s->n, s->k->nprocs);
    double h = 1.0 / (s->n + 1);
    for (long k = 0; k <= s->n + 1; k++)
        for (long j = 0; j <= s->ny + 1; j++)
            for (long i = 0; i <= s->nx + 1; i++)
                for (int m = 0; m < NC; m++)
                    pt(s, s->ustar, i, j, k)[m] = exact(m, (s->x0 + i - 1) * h, (s->y0 + j - 1) * h, k * h);
    double d[NC][NC];
    make_d(d);
    for (long k = 1; k <= s->n; k++)
        for (long j = 1; j <= s->ny; j++)
            for (long i = 1; i <= s->nx; i++)
                apply_a(s, d, s->ustar, i, j, k, pt(s, s->f, i, j, k));
    make_dinv(s->dinv);
}

/* Splits n points into `parts` blocks; block `idx` starts at *first (1-based) and has *count points. */
static void split(int n, int parts, int idx, int *first, int *count)
{
    *first = (int)((long)n * idx / parts) + 1;
    *count = (int)((long)n * (idx + 1) / parts) + 1 - *first;
}

int main(int argc, char **argv)
{
    struct kernel_ctx k;
    int cls = kernel_init(&k, "lu", "SWABC", &argc, &argv);
    const struct lu_class *c = &CLASSES[cls];

    struct lu s = { .k = &k, .n = c->n };
    int lg = 0;
    while ((1 << lg) < k.nprocs)
        lg++;
    s.px = 1 << ((lg + 1) / 2);
    s.py = k.nprocs / s.px;
    if (s.px > s.n || s.py > s.n)
        kernel_usage(&k, "class %c (%d^3) cannot be split over %dx%d processes", c->cls, s.n, s.px, s.py);
    s.cx = k.rank % s.px;
    s.cy = k.rank / s.px;
    split(s.n, s.px, s.cx, &s.x0, &s.nx);
    split(s.n, s.py, s.cy, &s.y0, &s.ny);
    s.west = s.cx > 0 ? k.rank - 1 : MPI_PROC_NULL;
    s.east = s.cx < s.px - 1 ? k.rank + 1 : MPI_PROC_NULL;
    s.south = s.cy > 0 ? k.rank - s.px : MPI_PROC_NULL;
    s.north = s.cy < s.py - 1 ? k.rank + s.px : MPI_PROC_NULL;
    s.sj = s.nx + 2;
    s.sk = s.sj * (s.ny + 2);
    setup(&s);
    if (k.args.perturb && k.rank == 0)
        pt(&s, s.f, 1, 1, 1)[0] += 1e-3;

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 1; it <= c->itmax; it++) {
        exchange_halo(&s);
        sweep_forward(&s);
        exchange_halo(&s);
        sweep_backward(&s);
    }
    double rsd[NC], err[NC];
    norms(&s, rsd, err);
    double time = kernel_max_time(MPI_Wtime() - t0);

    double worst = 0.0;
    for (int m = 0; m < NC; m++)
        worst = fmax(worst, fmax(kernel_relerr(rsd[m], c->rsdnm[m]), kernel_relerr(err[m], c->errnm[m])));
    char extra[640];
    int len = snprintf(extra, sizeof extra, "\"grid\":\"%dx%d\",\"rsdnm\":[", s.px, s.py);
    for (int m = 0; m < NC; m++)
        len += snprintf(extra + len, sizeof extra - len, "%s%.17e", m ? "," : "", rsd[m]);
    len += snprintf(extra + len, sizeof extra - len, "],\"errnm\":[");
    for (int m = 0; m < NC; m++)
        len += snprintf(extra + len, sizeof extra - len, "%s%.17e", m ? "," : "", err[m]);
    snprintf(extra + len, sizeof extra - len, "],\"rel_error\":%.3e", worst);

    struct kernel_result r = { .iterations = c->itmax, .time = time, .optype = "floating point",
                               .verified = worst <= 1e-10, .extra = extra };
    snprintf(r.size, sizeof r.size, "%dx%dx%d", s.n, s.n, s.n);
    r.mops = 210.0 * pow(s.n, 3) * c->itmax / time / 1e6;
    if (k.rank == 0 && !k.args.json) {
        printf(" LU benchmark: process grid %dx%d\n  component  residual norm          error norm\n", s.px, s.py);
        for (int m = 0; m < NC; m++)
            printf("  %9d  %.15e  %.15e\n", m + 1, rsd[m], err[m]);
        printf(" largest relative difference from the 1-rank reference: %.3e\n", worst);
    }
    int rc = kernel_report(&k, &r);
    MPI_Finalize();
    return rc;
}
