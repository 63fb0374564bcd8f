/*
 * CG — conjugate gradient (NAS report RNR-94-007, "CG"): inverse power iteration for the smallest eigenvalue of a
 * random sparse symmetric positive-definite matrix, each step solving A z = x with 25 unpreconditioned CG steps.
 * The matrix is the spec's: A = sum_i ratio^i v_i v_i^T + (rcond - shift) I with sparse random v_i (makea).
 *
 * The data are distributed as NPB 3 distributes them (NAS-95-020), so that each rank's traffic per product falls
 * as 1/sqrt(ranks): the ranks form a grid of nprows x npcols (both powers of two, npcols = nprows or 2 nprows). The
 * vector index range is cut into npcols column blocks
 * C_j, and into nprows row blocks R_i, each R_i the union of h = npcols / nprows consecutive column blocks. Rank
 * (i, j) keeps the matrix block A[R_i, C_j] (every entry as makea generates it) and the vectors' segment C_j
 * (the same on every rank of grid column j). A product A p: each rank multiplies its block by its p[C_j]; the
 * ranks of a grid row sum their partial results over R_i (MPI_Allreduce on the row's communicator: n / nprows
 * numbers); then each rank sends one column block of that sum to the rank whose next product needs it, its
 * transpose partner ((i, j) sends C_(h i + j mod h) to (j / h, h i + j mod h); with a square grid that is (j, i)).
 * Dot products are summed over the grid row, whose column blocks cover the vector once. Per product a rank moves
 * n / nprows + n / npcols numbers, against 2 n for a row distribution.
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

/* This rank's block A[R_i, C_j] in compressed sparse row form: rows from row0, columns counted from col0. */
struct csr {
    int row0, nrows, col0, ncols;
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

/* Builds this rank's block of the spec's matrix (makea): rows [row0, row0 + nrows), columns [col0, col0 + ncols).
 * Every rank draws the whole random stream. */
static void make_matrix(const struct cg_class *c, int perturb, struct csr *m)
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
    int row0 = m->row0, nrows = m->nrows, col0 = m->col0, ncols = m->ncols;
#define IN_BLOCK(r, col) ((r) >= row0 && (r) < row0 + nrows && (col) >= col0 && (col) < col0 + ncols)

    /* Count, then fill each local row's entries in generation order. */
    m->rowstart = calloc(nrows + 1, sizeof(long));
    for (int i = 0; i < n; i++)
        for (int a = 0; a < len[i]; a++) {
            int row = iv[(long)i * w + a] - 1;
            if (row < row0 || row >= row0 + nrows)
                continue;
            for (int b = 0; b < len[i]; b++)
                m->rowstart[row - row0 + 1] += IN_BLOCK(row, iv[(long)i * w + b] - 1);
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
                int col = ii[b] - 1;
                if (!IN_BLOCK(row, col))
                    continue;
                double val = vi[b] * scale;
                if (col == row && row == i)
                    val = val + RCOND - c->shift;
                e[fill[row - row0]++] = (struct entry){ col - col0, seq++, val };
            }
        }
    }
#undef IN_BLOCK

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
    if (perturb && out > 0)
        m->val[0] *= 1.001;
    free(len), free(iv), free(v), free(e), free(fill);
}

/* The grid and this rank's place in it, its block, its vectors' segment C_j, and the exchange buffers. */
struct cg {
    struct csr m;
    int n, nl;              /* rows in all, and this rank's vector segment: nl = |C_j| */
    MPI_Comm row;           /* the ranks of this rank's grid row */
    int row_size, self;     /* how many (npcols), and this rank in MPI_COMM_WORLD */
    int partner;            /* the rank this rank's column block of the summed product goes to, and whose block
                               its own next product needs: the exchange is pairwise */
    int send_at;            /* where the block it sends starts in the summed row block R_i */
    int send_len;           /* its length */
    double *x, *z, *p, *q, *r, *w, *sum;
};

/* The start of column block `j` of `blocks` over n indices. */
static int block_start(int n, int blocks, int j)
{
    return (int)((long)n * j / blocks);
}

/* Places rank `rank` of `nprocs` on the grid and sets up its block, segment, row communicator and partners. */
static void grid(struct cg *s, int rank, int nprocs)
{
    int nprows = kernel_grid_rows(nprocs); /* nprocs is a power of two (kernel_init) */
    int npcols = nprocs / nprows, h = npcols / nprows;
    int i = rank / npcols, j = rank % npcols;
    s->m.row0 = block_start(s->n, npcols, h * i);
    s->m.nrows = block_start(s->n, npcols, h * (i + 1)) - s->m.row0;
    s->m.col0 = block_start(s->n, npcols, j);
    s->m.ncols = s->nl = block_start(s->n, npcols, j + 1) - s->m.col0;
    MPI_Comm_split(MPI_COMM_WORLD, i, j, &s->row);
    s->row_size = npcols;
    s->self = rank;
    /* This rank sends C_(h i + j mod h), a part of its summed R_i, to (j / h, h i + j mod h); its own C_j comes from
     * the rank (a, b) of grid row a = j / h that sends C_(h a + b mod h) = C_j to (b / h, ...) = (i, j), that is
     * b = h i + j mod h: the same rank. */
    int cb = h * i + j % h;
    s->partner = (j / h) * npcols + cb;
    s->send_at = block_start(s->n, npcols, cb) - s->m.row0;
    s->send_len = block_start(s->n, npcols, cb + 1) - block_start(s->n, npcols, cb);
}

static double dot(const struct cg *s, const double *a, const double *b)
{
    double local = 0.0, sum = 0.0;
    for (int i = 0; i < s->nl; i++)
        local += a[i] * b[i];
    if (s->row_size == 1)
        return local;
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, s->row);
    return sum;
}

/* out = A v on this rank's segment: the block's product, summed over the grid row, its column block exchanged
 * with the transpose partner. */
static void matvec(struct cg *s, const double *v, double *out)
{
    const struct csr *m = &s->m;
    for (int r = 0; r < m->nrows; r++) {
        double sum = 0.0;
        for (long j = m->rowstart[r]; j < m->rowstart[r + 1]; j++)
            sum += m->val[j] * v[m->col[j]];
        s->w[r] = sum;
    }
    /* A row of one rank sums nothing, and a rank that is its own partner (the grid's diagonal) sends nothing. */
    const double *sum = s->w;
    if (s->row_size > 1) {
        MPI_Allreduce(s->w, s->sum, m->nrows, MPI_DOUBLE, MPI_SUM, s->row);
        sum = s->sum;
    }
    if (s->partner == s->self)
        memcpy(out, sum + s->send_at, (size_t)s->nl * sizeof(double));
    else
        MPI_Sendrecv(sum + s->send_at, s->send_len, MPI_DOUBLE, s->partner, 0, out, s->nl, MPI_DOUBLE, s->partner,
                     0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
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
    grid(&s, k.rank, k.nprocs);
    make_matrix(c, k.args.perturb && k.rank == 0, &s.m);
    int nl = s.nl;
    s.x = malloc(nl * sizeof(double));
    s.z = malloc(nl * sizeof(double));
    s.p = malloc(nl * sizeof(double));
    s.q = malloc(nl * sizeof(double));
    s.r = malloc(nl * sizeof(double));
    s.w = malloc((s.m.nrows > 0 ? s.m.nrows : 1) * sizeof(double));
    s.sum = malloc((s.m.nrows > 0 ? s.m.nrows : 1) * sizeof(double));
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
