/*
 * CG — conjugate gradient (NAS report RNR-94-007, "CG"): inverse power iteration for the smallest eigenvalue of a
 * random sparse symmetric positive-definite matrix, each step solving A z = x with 25 unpreconditioned CG steps.
 * The matrix is the spec's: A = sum_i ratio^i v_i v_i^T + (rcond - shift) I with sparse random v_i (makea). Vector
 * rows are split in blocks over ranks; each dot product is an MPI_Allreduce.
 *
 * The product streams the matrix from memory, which bounds the kernel's speed, so only A's upper triangle is kept
 * (half the bytes): entry a_ij serves as a_ji too. makea forms a_ij and a_ji as the same products in another order,
 * so they may differ in the last bit; zeta lands within 1e-14 of the official value either way. Each rank keeps
 * the upper-triangle rows of a block chosen so that ranks hold equal numbers of entries, gathers the whole direction
 * vector (MPI_Allgatherv), forms its rows' part of the product over the whole vector (a_ij p_j into row i, a_ij p_i
 * into row j), and MPI_Reduce_scatter sums the parts into each rank's rows.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel.h"
#include "common/nasrand.h"

#define CG_STEPS 25
#define RCOND 0.1

struct cg_class {
    char cls;
    int na, nonzer, niter;
    double shift, zeta;
};

static const struct cg_class CLASSES[] = {
    { 'S', 1400, 7, 15, 10.0, 8.5971775078648 },
    { 'W', 7000, 8, 15, 12.0, 10.362595087124 },
    { 'A', 14000, 11, 15, 20.0, 17.130235054029 },
    { 'B', 75000, 13, 75, 60.0, 22.712745482631 },
    { 'C', 150000, 15, 75, 110.0, 28.973605592845 },
};

/* This rank's rows of A's upper triangle in compressed sparse row form, columns global; each row's first entry is
 * its diagonal. */
struct csr {
    int row0, nrows;
    long *rowstart;
    int *col;
    double *val;
};

/* One generated entry before duplicates are summed: column, value, and generation order (for a stable sort). */
struct entry {
    int col;
    long seq;
    double val;
};

static int entry_cmp(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->col != y->col)
        return x->col < y->col ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The spec's sprnvc + vecset: nz distinct random positions in 1..n with random values, then position i set to
 * 0.5. Returns the number of elements (nz or nz + 1). */
static int sparse_vector(uint64_t *tran, int n, int nn1, int nz, int i, double *v, int *iv)
{
    int nzv = 0;
    while (nzv < nz) {
        double val = nas_randlc(tran, NAS_A);
        double loc = nas_randlc(tran, NAS_A);
        int pos = (int)(nn1 * loc) + 1;
        if (pos > n)
            continue;
        int seen = 0;
        for (int j = 0; j < nzv && !seen; j++)
            seen = iv[j] == pos;
        if (seen)
            continue;
        v[nzv] = val;
        iv[nzv++] = pos;
    }
    for (int j = 0; j < nzv; j++)
        if (iv[j] == i) {
            v[j] = 0.5;
            return nzv;
        }
    v[nzv] = 0.5;
    iv[nzv++] = i;
    return nzv;
}

/* The rows of A's upper triangle rank `rank` of `nprocs` keeps: a block holding about 1/nprocs of the triangle's
 * generated entries (counted before duplicates are summed), from the sparse vectors of makea. */
static void upper_block(int n, int w, const int *len, const int *iv, int rank, int nprocs, int *row0, int *nrows)
{
    long *upper = calloc(n + 1, sizeof(long));
    for (int i = 0; i < n; i++)
        for (int a = 0; a < len[i]; a++)
            for (int b = 0; b < len[i]; b++)
                if (iv[(long)i * w + b] >= iv[(long)i * w + a])
                    upper[iv[(long)i * w + a]]++; /* 1-based row: upper[r] counts row r - 1 */
    for (int r = 0; r < n; r++)
        upper[r + 1] += upper[r];
    /* Row r starts rank k's block when fewer than k/nprocs of the entries come before it. */
    int first = -1, end = n;
    for (int r = 0; r < n; r++) {
        int owner = (int)(upper[r] * nprocs / (upper[n] > 0 ? upper[n] : 1));
        if (owner >= rank && first < 0)
            first = r;
        if (owner > rank) {
            end = r;
            break;
        }
    }
    if (first < 0)
        first = n;
    *row0 = first;
    *nrows = (end > first ? end : first) - first;
    free(upper);
}

/* Builds this rank's rows of the upper triangle of the spec's matrix (makea). Every rank draws the whole random
 * stream. */
static void make_matrix(const struct cg_class *c, int rank, int nprocs, int perturb, struct csr *m)
{
    int n = c->na, w = c->nonzer + 1;
    int nn1 = 1;
    while (nn1 < n)
        nn1 *= 2;
    uint64_t tran = 314159265;
    nas_randlc(&tran, NAS_A); /* the spec draws zeta's initial value from the stream first */
    int *len = malloc(n * sizeof(int)), *iv = malloc((long)n * w * sizeof(int));
    double *v = malloc((long)n * w * sizeof(double));
    for (int i = 0; i < n; i++)
        len[i] = sparse_vector(&tran, n, nn1, c->nonzer, i + 1, v + (long)i * w, iv + (long)i * w);
    int row0, nrows;
    upper_block(n, w, len, iv, rank, nprocs, &row0, &nrows);

    /* Count, then fill each local row's upper entries in generation order. */
    m->row0 = row0;
    m->nrows = nrows;
    m->rowstart = calloc(nrows + 1, sizeof(long));
    for (int i = 0; i < n; i++)
        for (int a = 0; a < len[i]; a++) {
            int row = iv[(long)i * w + a] - 1;
            if (row < row0 || row >= row0 + nrows)
                continue;
            for (int b = 0; b < len[i]; b++)
                m->rowstart[row - row0 + 1] += iv[(long)i * w + b] - 1 >= row;
        }
    for (int r = 0; r < nrows; r++)
        m->rowstart[r + 1] += m->rowstart[r];
    long total = m->rowstart[nrows];
    struct entry *e = malloc((total > 0 ? total : 1) * sizeof(struct entry));
    long *fill = malloc((nrows > 0 ? nrows : 1) * sizeof(long));
    memcpy(fill, m->rowstart, nrows * sizeof(long));
    double ratio = pow(RCOND, 1.0 / n), size = 1.0;
    long seq = 0;
    for (int i = 0; i < n; i++, size *= ratio) {
        const double *vi = v + (long)i * w;
        const int *ii = iv + (long)i * w;
        for (int a = 0; a < len[i]; a++) {
            int row = ii[a] - 1;
            if (row < row0 || row >= row0 + nrows)
                continue;
            double scale = size * vi[a];
            for (int b = 0; b < len[i]; b++) {
                if (ii[b] - 1 < row)
                    continue;
                double val = vi[b] * scale;
                if (ii[b] - 1 == row && row == i)
                    val = val + RCOND - c->shift;
                e[fill[row - row0]++] = (struct entry){ ii[b] - 1, seq++, val };
            }
        }
    }

    /* Sort each row by column (stably) and sum duplicates in generation order. */
    m->col = malloc((total > 0 ? total : 1) * sizeof(int));
    m->val = malloc((total > 0 ? total : 1) * sizeof(double));
    long out = 0;
    for (int r = 0; r < nrows; r++) {
        long s = m->rowstart[r], t = m->rowstart[r + 1];
        qsort(e + s, t - s, sizeof(struct entry), entry_cmp);
        m->rowstart[r] = out;
        for (long j = s; j < t; j++) {
            if (j > s && e[j].col == e[j - 1].col) {
                m->val[out - 1] += e[j].val;
            } else {
                m->col[out] = e[j].col;
                m->val[out++] = e[j].val;
            }
        }
    }
    m->rowstart[nrows] = out;
    if (perturb && nrows > 0)
        m->val[0] *= 1.001;
    free(len), free(iv), free(v), free(e), free(fill);
}

struct cg {
    struct csr m;
    int n, nl;            /* rows in all, and this rank's vector rows */
    int *counts, *displs; /* vector rows per rank, for MPI_Allgatherv and MPI_Reduce_scatter */
    double *x, *z, *p, *q, *r, *pfull, *yfull;
};

static double dot(const struct cg *s, const double *a, const double *b)
{
    double local = 0.0, sum;
    for (int i = 0; i < s->nl; i++)
        local += a[i] * b[i];
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

/* out = A v for this rank's vector rows; v is local and gathered first. */
static void matvec(struct cg *s, const double *v, double *out)
{
    MPI_Allgatherv(v, s->nl, MPI_DOUBLE, s->pfull, s->counts, s->displs, MPI_DOUBLE, MPI_COMM_WORLD);
    const struct csr *m = &s->m;
    const double *p = s->pfull;
    double *y = s->yfull;
    /* Rows below the block are never touched: upper entries of its rows have columns at or after its first row. */
    memset(y + m->row0, 0, (size_t)(s->n - m->row0) * sizeof(double));
    for (int r = 0; r < m->nrows; r++) {
        int i = m->row0 + r;
        long j = m->rowstart[r], end = m->rowstart[r + 1];
        double pi = p[i], sum = m->val[j] * pi; /* the diagonal */
        for (j++; j < end; j++) {
            int c = m->col[j];
            sum += m->val[j] * p[c];
            y[c] += m->val[j] * pi;
        }
        y[i] += sum;
    }
    MPI_Reduce_scatter(y, out, s->counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

/* Approximately solves A z = x with 25 CG steps; returns ||x - A z||. */
static double conj_grad(struct cg *s)
{
    int nl = s->nl;
    for (int i = 0; i < nl; i++) {
        s->q[i] = s->z[i] = 0.0;
        s->r[i] = s->p[i] = s->x[i];
    }
    double rho = dot(s, s->r, s->r);
    for (int step = 0; step < CG_STEPS; step++) {
        matvec(s, s->p, s->q);
        double alpha = rho / dot(s, s->p, s->q);
        double rho0 = rho;
        for (int i = 0; i < nl; i++) {
            s->z[i] += alpha * s->p[i];
            s->r[i] -= alpha * s->q[i];
        }
        rho = dot(s, s->r, s->r);
        double beta = rho / rho0;
        for (int i = 0; i < nl; i++)
            s->p[i] = s->r[i] + beta * s->p[i];
    }
    matvec(s, s->z, s->r);
    for (int i = 0; i < nl; i++)
        s->r[i] = s->x[i] - s->r[i];
    return sqrt(dot(s, s->r, s->r));
}

int main(int argc, char **argv)
{
    struct kernel_ctx k;
    int cls = kernel_init(&k, "cg", "SWABC", &argc, &argv);
    const struct cg_class *c = &CLASSES[cls];

    struct cg s = { .n = c->na };
    s.counts = malloc(k.nprocs * sizeof(int));
    s.displs = malloc(k.nprocs * sizeof(int));
    for (int r = 0; r < k.nprocs; r++) {
        s.displs[r] = (int)((long)c->na * r / k.nprocs);
        s.counts[r] = (int)((long)c->na * (r + 1) / k.nprocs) - s.displs[r];
    }
    make_matrix(c, k.rank, k.nprocs, k.args.perturb && k.rank == 0, &s.m);
    int nl = s.nl = s.counts[k.rank];
    s.x = malloc(nl * sizeof(double));
    s.z = malloc(nl * sizeof(double));
    s.p = malloc(nl * sizeof(double));
    s.q = malloc(nl * sizeof(double));
    s.r = malloc(nl * sizeof(double));
    s.pfull = malloc(c->na * sizeof(double));
    s.yfull = calloc(c->na, sizeof(double));
    for (int i = 0; i < nl; i++)
        s.x[i] = 1.0;

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), zeta = 0.0, rnorm = 0.0;
    for (int it = 1; it <= c->niter; it++) {
        rnorm = conj_grad(&s);
        double xz = dot(&s, s.x, s.z), zz = dot(&s, s.z, s.z);
        zeta = c->shift + 1.0 / xz;
        double scale = 1.0 / sqrt(zz);
        for (int i = 0; i < nl; i++)
            s.x[i] = scale * s.z[i];
        if (k.rank == 0 && !k.args.json)
            printf("    %5d       %20.14e%20.13e\n", it, rnorm, zeta);
    }
    double time = kernel_max_time(MPI_Wtime() - t0);

    double err = kernel_relerr(zeta, c->zeta);
    char extra[160];
    snprintf(extra, sizeof extra, "\"zeta\":%.13e,\"zeta_reference\":%.13e,\"rel_error\":%.3e,\"rnorm\":%.6e", zeta,
             c->zeta, err, rnorm);
    double nz1 = (double)c->nonzer * (c->nonzer + 1);
    struct kernel_result r = { .iterations = c->niter, .time = time, .optype = "floating point",
                               .verified = err <= 1e-10, .extra = extra };
    snprintf(r.size, sizeof r.size, "%d", c->na);
    r.mops = 2.0 * c->niter * c->na * (3.0 + nz1 + 25.0 * (5.0 + nz1) + 3.0) / time / 1e6;
    if (k.rank == 0 && !k.args.json)
        printf(" CG benchmark: zeta = %.13e  reference %.13e  relative error %.3e\n", zeta, c->zeta, err);
    int rc = kernel_report(&k, &r);
    MPI_Finalize();
    return rc;
}
