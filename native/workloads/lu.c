/*
 * LU — the NPB pseudo-application, written from its specification (NAS RNR-94-007 and NAS-95-020; the facts used
 * are in docs/workloads.md): the steady 3-D compressible Navier-Stokes equations, five unknowns per point (density,
 * three momenta, energy), on an n^3 grid, solved by symmetric successive over-relaxation (SSOR, omega = 1.2) of the
 * implicit time-stepping operator, from a known exact solution and the forcing that makes it one.
 *
 * One SSOR iteration: the residual times dt; the lower block-triangular sweep (planes k ascending, points in
 * (j, i) ascending: (D + omega L) x = r with 5x5 blocks D, and L coupling to the k-1, j-1, i-1 neighbours); the
 * upper sweep (descending, (D + omega U)); the update u += r / (omega (2 - omega)); the new residual: the central
 * differences of the convective fluxes, the viscous fluxes, second-order artificial diffusion and the fourth-order
 * dissipation, minus the forcing.
 *
 * The x-y plane is split over a 2-D process grid (x first, as NPB does). Each sweep is a pipelined wavefront: for
 * every k-plane a rank waits for the new boundary column of its x-neighbour and row of its y-neighbour on the
 * upstream side, solves its block of the plane, and passes its own on — two small messages per plane per sweep.
 * The residual exchanges two-deep halos of u (the dissipation's reach) before every evaluation.
 *
 * Verification, as NPB: the RMS norms of the final residual (5) and error (5) and a surface integral of the
 * pressure, each to a relative 1e-8 of the official values.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel.h"

#define NC 5      /* unknowns per point */
#define H 2       /* halo depth in x and y */
#define OMEGA 1.2 /* over-relaxation */

/* The equations' constants (c1 = gamma, c2 = gamma - 1, c3 c4 scale the viscous terms, c5 the heat flux). */
static const double C1 = 1.4, C2 = 0.4, C3 = 0.1, C4 = 1.0, C5 = 1.4;
/* Second-order artificial diffusion per component, in x, y (equal) and z. */
static const double DXY[NC] = { 0.75, 0.75, 0.75, 0.75, 0.75 }, DZ[NC] = { 1.0, 1.0, 1.0, 1.0, 1.0 };
/* The fourth-order dissipation's coefficient: max(dx1, dy1, dz1) / 4. */
static const double DSSP = 1.0 / 4.0;

/* The exact solution: component m is a polynomial of degree 4 in each coordinate, CE[m] its 13 coefficients
 * (constant; xi, eta, zeta; their squares; cubes; fourth powers). */
static const double CE[NC][13] = {
    { 2.0, 0.0, 0.0, 4.0, 5.0, 3.0, 0.5, 0.02, 0.01, 0.03, 0.5, 0.4, 0.3 },
    { 1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.01, 0.03, 0.02, 0.4, 0.3, 0.5 },
    { 2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.04, 0.03, 0.05, 0.3, 0.5, 0.4 },
    { 2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.03, 0.05, 0.04, 0.2, 0.1, 0.3 },
    { 5.0, 4.0, 3.0, 2.0, 0.1, 0.4, 0.3, 0.05, 0.04, 0.03, 0.1, 0.3, 0.2 },
};

/** One problem class: grid, iterations, time step, and the official residual norms, error norms and integral. */
struct lu_class {
    char cls;
    int n, itmax;
    double dt;
    double xcr[NC], xce[NC], xci;
};

static const struct lu_class CLASSES[] = {
    { 'S', 12, 50, 0.5,
      { 1.6196343210976702e-02, 2.1976745164821318e-03, 1.5179927653399185e-03, 1.5029584435994323e-03,
        3.4264073155896461e-02 },
      { 6.4223319957960924e-04, 8.4144342047347926e-05, 5.8588269616485186e-05, 5.8474222595157350e-05,
        1.3103347914111294e-03 },
      7.8418928865937083e+00 },
    { 'W', 33, 300, 1.5e-3,
      { 0.1236511638192e+02, 0.1317228477799e+01, 0.2550120713095e+01, 0.2326187750252e+01, 0.2826799444189e+02 },
      { 0.4867877144216e+00, 0.5064652880982e-01, 0.9281818101960e-01, 0.8570126542733e-01, 0.1084277417792e+01 },
      0.1161399311023e+02 },
    { 'A', 64, 250, 2.0,
      { 7.7902107606689367e+02, 6.3402765259692870e+01, 1.9499249727292479e+02, 1.7845301160418537e+02,
        1.8384760349464247e+03 },
      { 2.9964085685471943e+01, 2.8194576365003349e+00, 7.3473412698774742e+00, 6.7139225687777051e+00,
        7.0715315688392578e+01 },
      2.6030925604886277e+01 },
    { 'B', 102, 250, 2.0,
      { 3.5532672969982736e+03, 2.6214750795310692e+02, 8.8333721850952190e+02, 7.7812774739425265e+02,
        7.3087969592545314e+03 },
      { 1.1401176380212709e+02, 8.1098963655421574e+00, 2.8480597317698308e+01, 2.5905394567832939e+01,
        2.6054907504857413e+02 },
      4.7887162703308227e+01 },
    { 'C', 162, 250, 2.0,
      { 1.03766980323537846e+04, 8.92212458801008552e+02, 2.56238814582660871e+03, 2.19194343857831427e+03,
        1.78078057261061185e+04 },
      { 2.15986399716949279e+02, 1.55789559239863600e+01, 5.41318863077207766e+01, 4.82262643154045421e+01,
        4.55902910043250358e+02 },
      6.66404553572181300e+01 },
};

/** The spacing-dependent coefficients of one direction: 1/h^2, 1/(2h), 1/h, and the diffusion per component. */
struct dir {
    double t1, t2, t3;
    const double *dd;
};

/** This rank's part of the problem. Points are addressed by global indices (0 .. n-1 in each direction). */
struct lu {
    struct kernel_ctx *k;
    int n, px, py;
    int i0, ni, j0, nj;           /* owned block: i0 .. i0+ni-1, j0 .. j0+nj-1, every k */
    int ilo, ihi, jlo, jhi;       /* its interior points (the unknowns) */
    int west, east, south, north; /* neighbour ranks (x-1, x+1, y-1, y+1) or MPI_PROC_NULL */
    long lx, ly;                  /* local extents with halos */
    double dt;
    struct dir dx, dy, dz;
    double *u, *rsd, *frct;
    double *rho;                  /* 1 / density of the field being evaluated, per point (reciprocals()) */
    double *dlu;                  /* the factored diagonal blocks of the interior points (diag_at()) */
    double *buf;                  /* message buffer */
};

static inline int local(const struct lu *s, int i, int j);

/* The local index of point (i, j, k). */
static inline long idx(const struct lu *s, int i, int j, int k)
{
    return ((long)k * s->ly + (j - s->j0 + H)) * s->lx + (i - s->i0 + H);
}

/* The 5 unknowns of point (i, j, k) of field g. */
static inline double *at(const struct lu *s, double *g, int i, int j, int k)
{
    return g + idx(s, i, j, k) * NC;
}

/* 1 / density at every local point of the grid, of the field the residual is evaluated on (u, or the exact
 * solution for the forcing): the fluxes and the Jacobians divide by it often. */
static void reciprocals(struct lu *s, double *w)
{
    for (int k = 0; k < s->n; k++)
        for (int j = s->j0 - H; j < s->j0 + s->nj + H; j++)
            for (int i = s->i0 - H; i < s->i0 + s->ni + H; i++)
                if (local(s, i, j))
                    s->rho[idx(s, i, j, k)] = 1.0 / at(s, w, i, j, k)[0];
}

/* The exact solution at grid point (i, j, k). */
static void exact(const struct lu *s, int i, int j, int k, double out[NC])
{
    double h = 1.0 / (s->n - 1), xi = i * h, eta = j * h, zeta = k * h;
    for (int m = 0; m < NC; m++) {
        const double *e = CE[m];
        out[m] = e[0] + (e[1] + (e[4] + (e[7] + e[10] * xi) * xi) * xi) * xi +
                 (e[2] + (e[5] + (e[8] + e[11] * eta) * eta) * eta) * eta +
                 (e[3] + (e[6] + (e[9] + e[12] * zeta) * zeta) * zeta) * zeta;
    }
}

/* Whether global (i, j) lies in this rank's local arrays (owned or halo) and in the grid. */
static inline int local(const struct lu *s, int i, int j)
{
    return i >= 0 && i < s->n && j >= 0 && j < s->n && i >= s->i0 - H && i < s->i0 + s->ni + H && j >= s->j0 - H &&
           j < s->j0 + s->nj + H;
}

/*
 * Adds L(w) at the interior points of one grid line: the central difference of the convective flux, the viscous
 * flux difference with the second-order diffusion, and the fourth-order dissipation, in the direction whose
 * momentum is component v. `w`, `rho` (its reciprocal densities) and `r` point at the line's point of global
 * index `lo` (its first interior point here), points `stride` apart; the line's interior points here are lo .. hi,
 * and w is valid two points beyond.
 */
static void line(const struct lu *s, const double *w, const double *rho, double *r, long stride, int lo, int hi,
                 int v, const struct dir *d)
{
    int count = hi - lo + 3;
    double f[count][NC], g[count][NC]; /* fluxes at lo-1 .. hi+1 (index 0 is lo-1) */
#define W(t) (w + (long)((t) - lo) * stride * NC)
#define RHO(t) (rho[(long)((t) - lo) * stride])
    for (int t = lo - 1; t <= hi + 1; t++) {
        const double *p = W(t);
        double *fl = f[t - lo + 1], ri = RHO(t), vel = p[v] * ri;
        double q = 0.5 * (p[1] * p[1] + p[2] * p[2] + p[3] * p[3]) * ri;
        fl[0] = p[v];
        for (int m = 1; m < 4; m++)
            fl[m] = p[m] * vel;
        fl[v] += C2 * (p[4] - q);
        fl[4] = (C1 * p[4] - C2 * q) * vel;
    }
    for (int t = lo; t <= hi + 1; t++) {
        const double *p = W(t), *pm = W(t - 1);
        double ri = RHO(t), rim = RHO(t - 1), sq = 0.0, sqm = 0.0, *gl = g[t - lo + 1];
        for (int m = 1; m < 4; m++) {
            double a = p[m] * ri, b = pm[m] * rim;
            gl[m] = (m == v ? 4.0 / 3.0 : 1.0) * d->t3 * (a - b);
            sq += a * a;
            sqm += b * b;
        }
        double av = p[v] * ri, bv = pm[v] * rim;
        gl[4] = 0.5 * (1.0 - C1 * C5) * d->t3 * (sq - sqm) + (1.0 / 6.0) * d->t3 * (av * av - bv * bv) +
                C1 * C5 * d->t3 * (p[4] * ri - pm[4] * rim);
    }
    int n = s->n;
    for (int t = lo; t <= hi; t++) {
        const double *pm2 = t >= 2 ? W(t - 2) : NULL, *pm = W(t - 1), *p = W(t), *pp = W(t + 1);
        const double *pp2 = t <= n - 3 ? W(t + 2) : NULL;
        double *o = r + (long)(t - lo) * stride * NC;
        const double *fa = f[t - lo + 2], *fb = f[t - lo], *ga = g[t - lo + 2], *gb = g[t - lo + 1];
        for (int m = 0; m < NC; m++) {
            double diff = pm[m] - 2.0 * p[m] + pp[m];
            o[m] += -d->t2 * (fa[m] - fb[m]) + d->dd[m] * d->t1 * diff;
            if (m > 0)
                o[m] += d->t3 * C3 * C4 * (ga[m] - gb[m]);
            double diss;
            if (t == 1)
                diss = 5.0 * p[m] - 4.0 * pp[m] + pp2[m];
            else if (t == 2)
                diss = -4.0 * pm[m] + 6.0 * p[m] - 4.0 * pp[m] + pp2[m];
            else if (t == n - 3)
                diss = pm2[m] - 4.0 * pm[m] + 6.0 * p[m] - 4.0 * pp[m];
            else if (t == n - 2)
                diss = pm2[m] - 4.0 * pm[m] + 5.0 * p[m];
            else
                diss = pm2[m] - 4.0 * pm[m] + 6.0 * p[m] - 4.0 * pp[m] + pp2[m];
            o[m] -= DSSP * diss;
        }
    }
#undef W
#undef RHO
}

/* r += L(w) at every interior point of this rank, line by line in x, then y, then z; s->rho must be w's. */
static void apply_l(struct lu *s, double *w, double *r)
{
    long sy = s->lx, sz = s->lx * s->ly;
    for (int k = 1; k <= s->n - 2; k++)
        for (int j = s->jlo; j <= s->jhi; j++)
            line(s, at(s, w, s->ilo, j, k), s->rho + idx(s, s->ilo, j, k), at(s, r, s->ilo, j, k), 1, s->ilo,
                 s->ihi, 1, &s->dx);
    for (int k = 1; k <= s->n - 2; k++)
        for (int i = s->ilo; i <= s->ihi; i++)
            line(s, at(s, w, i, s->jlo, k), s->rho + idx(s, i, s->jlo, k), at(s, r, i, s->jlo, k), sy, s->jlo,
                 s->jhi, 2, &s->dy);
    for (int j = s->jlo; j <= s->jhi; j++)
        for (int i = s->ilo; i <= s->ihi; i++)
            line(s, at(s, w, i, j, 1), s->rho + idx(s, i, j, 1), at(s, r, i, j, 1), sz, 1, s->n - 2, 3, &s->dz);
}

/* Copies the box x in [i, i+w), y in [j, j+h), every k, of field g to (unpack 0) or from (1) buf. */
static void pack_box(struct lu *s, double *g, int i, int w, int j, int h, int unpack)
{
    double *b = s->buf;
    for (int k = 0; k < s->n; k++)
        for (int y = j; y < j + h; y++, b += (long)w * NC) {
            double *p = at(s, g, i, y, k);
            if (unpack)
                memcpy(p, b, (size_t)w * NC * sizeof(double));
            else
                memcpy(b, p, (size_t)w * NC * sizeof(double));
        }
}

/* One halo exchange of u in one direction: my `H` outermost owned layers go to `to`, `from`'s to my halo. */
static void swap(struct lu *s, int x, int send_at, int recv_at, int to, int from, int tag)
{
    int i = s->i0 - H, ni = s->ni + 2 * H; /* rows carry the x halos too: the corners come along */
    long count = (long)H * NC * s->n * (x ? s->nj : ni);
    if (x)
        pack_box(s, s->u, send_at, H, s->j0, s->nj, 0);
    else
        pack_box(s, s->u, i, ni, send_at, H, 0);
    MPI_Sendrecv_replace(s->buf, (int)count, MPI_DOUBLE, to, tag, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (from == MPI_PROC_NULL)
        return;
    if (x)
        pack_box(s, s->u, recv_at, H, s->j0, s->nj, 1);
    else
        pack_box(s, s->u, i, ni, recv_at, H, 1);
}

/* Fills u's two-deep halos (corners included) with the neighbours' values. */
static void exchange(struct lu *s)
{
    swap(s, 1, s->i0 + s->ni - H, s->i0 - H, s->east, s->west, 1);
    swap(s, 1, s->i0, s->i0 + s->ni, s->west, s->east, 2);
    swap(s, 0, s->j0 + s->nj - H, s->j0 - H, s->north, s->south, 3);
    swap(s, 0, s->j0, s->j0 + s->nj, s->south, s->north, 4);
}

/* The residual of the current u: rsd = L(u) - frct at the interior points. */
static void residual(struct lu *s)
{
    exchange(s);
    reciprocals(s, s->u);
    for (int k = 1; k <= s->n - 2; k++)
        for (int j = s->jlo; j <= s->jhi; j++)
            for (int i = s->ilo; i <= s->ihi; i++) {
                double *r = at(s, s->rsd, i, j, k), *f = at(s, s->frct, i, j, k);
                for (int m = 0; m < NC; m++)
                    r[m] = -f[m];
            }
    apply_l(s, s->u, s->rsd);
}

/* RMS over the grid's interior of each component of v (or of v minus the exact solution). */
static void rms(struct lu *s, double *v, int minus_exact, double out[NC])
{
    double local[NC] = { 0 }, e[NC] = { 0 };
    for (int k = 1; k <= s->n - 2; k++)
        for (int j = s->jlo; j <= s->jhi; j++)
            for (int i = s->ilo; i <= s->ihi; i++) {
                double *p = at(s, v, i, j, k);
                if (minus_exact)
                    exact(s, i, j, k, e);
                for (int m = 0; m < NC; m++)
                    local[m] += (p[m] - e[m]) * (p[m] - e[m]);
            }
    MPI_Allreduce(local, out, NC, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double interior = pow(s->n - 2, 3);
    for (int m = 0; m < NC; m++)
        out[m] = sqrt(out[m] / interior);
}

/* The viscous terms' constants: c3 c4 and c1 c3 c4 c5; the 4/3 of the normal stress. */
static const double C34 = C3 * C4, C1345 = C1 * C3 * C4 * C5, R43 = 4.0 / 3.0;

/*
 * The block coupling a point to its neighbour p in direction d (momentum component v), for the implicit operator:
 * sign * dt * t2 * (the convective flux Jacobian at p) - dt * t1 * (the viscous flux Jacobian at p + diffusion).
 * sign is -1 for the lower neighbours (i-1, j-1, k-1) and +1 for the upper ones. The Jacobians are the analytic
 * derivatives of the fluxes `line` differences, written out entry by entry (most are zero); r is 1 / density.
 */
static inline __attribute__((always_inline)) void coupling(const struct lu *s, const double *p, double r, int v, const struct dir *d, double sign,
                     double b[NC][NC])
{
    double r2 = r * r, r3 = r2 * r;
    double q = 0.5 * (p[1] * p[1] + p[2] * p[2] + p[3] * p[3]) * r, uv = p[v] * r;
    double cv = sign * s->dt * d->t2, cd = s->dt * d->t1;
    memset(b, 0, sizeof(double[NC][NC]));
    b[0][0] = -cd * d->dd[0];
    b[0][v] = cv;
    double e0 = 0.0;
    for (int m = 1; m < 4; m++) {
        double k = (m == v ? R43 : 1.0) * C34 - C1345;
        if (m != v) {
            b[m][0] = cv * (-(p[m] * p[v]) * r2) - cd * (-C34 * r2 * p[m]);
            b[m][v] = cv * (p[m] * r);
            b[m][m] = cv * uv - cd * (C34 * r) - cd * d->dd[m];
            b[v][m] = cv * (-C2 * (p[m] * r));
            b[4][m] = cv * (-C2 * (p[m] * p[v]) * r2) - cd * (k * r2 * p[m]);
        }
        e0 += k * r3 * (p[m] * p[m]);
    }
    b[v][0] = cv * (-uv * uv + C2 * q * r) - cd * (-R43 * C34 * r2 * p[v]);
    b[v][v] = cv * ((2.0 - C2) * uv) - cd * (R43 * C34 * r) - cd * d->dd[v];
    b[v][4] = cv * C2;
    b[4][0] = cv * ((C2 * 2.0 * q - C1 * p[4]) * (p[v] * r2)) - cd * (-e0 - C1345 * r2 * p[4]);
    b[4][v] = cv * (C1 * (p[4] * r) - C2 * (q * r + p[v] * p[v] * r2)) - cd * ((R43 * C34 - C1345) * r2 * p[v]);
    b[4][4] = cv * (C1 * uv) - cd * (C1345 * r) - cd * d->dd[4];
}

/* The diagonal block at p: the identity plus 2 dt times the viscous Jacobians and diffusion of the three
 * directions, each weighted by its t1 (the 4/3 goes with the direction's own momentum). */
static void diagonal(const struct lu *s, const double *p, double r, double b[NC][NC])
{
    const struct dir *dirs[3] = { &s->dx, &s->dy, &s->dz };
    double r2 = r * r, r3 = r2 * r, w = 2.0 * s->dt;
    double t1 = s->dx.t1 + s->dy.t1 + s->dz.t1, diff[NC] = { 0 };
    for (int m = 0; m < NC; m++)
        for (int x = 0; x < 3; x++)
            diff[m] += dirs[x]->t1 * dirs[x]->dd[m];
    memset(b, 0, sizeof(double[NC][NC]));
    double e0 = 0.0;
    for (int m = 1; m < 4; m++) {
        double cm = t1 + (R43 - 1.0) * dirs[m - 1]->t1; /* sum over directions of t1 times 4/3 or 1 */
        double k = cm * C34 - t1 * C1345;
        b[m][0] = w * (-cm * C34 * r2 * p[m]);
        b[m][m] = 1.0 + w * (cm * C34 * r) + w * diff[m];
        b[4][m] = w * (k * r2 * p[m]);
        e0 += k * r3 * (p[m] * p[m]);
    }
    b[0][0] = 1.0 + w * diff[0];
    b[4][0] = -w * (e0 + t1 * C1345 * r2 * p[4]);
    b[4][4] = 1.0 + w * (t1 * C1345 * r) + w * diff[4];
}

/* Factors the 5x5 block m in place (Gaussian elimination without pivoting: m is diagonally dominant): below the
 * diagonal the multipliers, above it U, on it the pivots' reciprocals. */
static inline void factor(double m[NC][NC])
{
#pragma GCC unroll 5
    for (int p = 0; p < NC; p++) {
        double inv = 1.0 / m[p][p];
        m[p][p] = inv;
#pragma GCC unroll 5
        for (int r = p + 1; r < NC; r++) {
            double f = inv * m[r][p];
            m[r][p] = f;
#pragma GCC unroll 5
            for (int c = p + 1; c < NC; c++)
                m[r][c] -= f * m[p][c];
        }
    }
}

/* Solves f x = x in place, f a block factor() made. */
static inline void solve(double f[NC][NC], double x[NC])
{
#pragma GCC unroll 5
    for (int p = 0; p < NC; p++)
#pragma GCC unroll 5
        for (int r = p + 1; r < NC; r++)
            x[r] -= x[p] * f[r][p];
#pragma GCC unroll 5
    for (int r = NC - 1; r >= 0; r--) {
        double t = x[r];
#pragma GCC unroll 5
        for (int c = r + 1; c < NC; c++)
            t -= f[r][c] * x[c];
        x[r] = t * f[r][r];
    }
}

/* The factored diagonal block of interior point (i, j, k): made by the lower sweep, used again by the upper one
 * (u does not change in between). */
static inline double (*diag_at(const struct lu *s, int i, int j, int k))[NC]
{
    long ni = s->ihi - s->ilo + 1, nj = s->jhi - s->jlo + 1;
    return (double (*)[NC])(s->dlu + ((((long)k - 1) * nj + (j - s->jlo)) * ni + (i - s->ilo)) * NC * NC);
}

/* The three blocks of point (i, j, k) toward the lower (dir -1) or upper (+1) neighbours: index 0 couples to the
 * k neighbour, 1 to j, 2 to i. */
static inline __attribute__((always_inline)) void jacobians(const struct lu *s, int i, int j, int k, int dir, double b[3][NC][NC])
{
    coupling(s, at(s, s->u, i, j, k + dir), s->rho[idx(s, i, j, k + dir)], 3, &s->dz, dir, b[0]);
    coupling(s, at(s, s->u, i, j + dir, k), s->rho[idx(s, i, j + dir, k)], 2, &s->dy, dir, b[1]);
    coupling(s, at(s, s->u, i + dir, j, k), s->rho[idx(s, i + dir, j, k)], 1, &s->dx, dir, b[2]);
}

/* Sends (recv 0) or receives (recv 1) the rsd column x = i, or row y = j, of plane k's interior points. */
static void edge(struct lu *s, int column, int idx, int k, int peer, int recv)
{
    if (peer == MPI_PROC_NULL)
        return;
    int lo = column ? s->jlo : s->ilo, count = (column ? s->jhi : s->ihi) - lo + 1;
    if (column && !recv)
        for (int t = 0; t < count; t++)
            memcpy(s->buf + (long)t * NC, at(s, s->rsd, idx, lo + t, k), NC * sizeof(double));
    double *data = column ? s->buf : at(s, s->rsd, lo, idx, k);
    if (recv)
        MPI_Recv(data, count * NC, MPI_DOUBLE, peer, 10 + column, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Send(data, count * NC, MPI_DOUBLE, peer, 10 + column, MPI_COMM_WORLD);
    if (column && recv)
        for (int t = 0; t < count; t++)
            memcpy(at(s, s->rsd, idx, lo + t, k), s->buf + (long)t * NC, NC * sizeof(double));
}

/* r - omega (b0 n0 + b1 n1 + b2 n2), the start of both sweeps' point update (`r` NULL: 0). */
static inline void couple(double b[3][NC][NC], const double *r, const double *n0, const double *n1,
                          const double *n2, double out[NC])
{
#pragma GCC unroll 5
    for (int m = 0; m < NC; m++) {
        double t = 0.0;
#pragma GCC unroll 5
        for (int c = 0; c < NC; c++)
            t += b[0][m][c] * n0[c] + b[1][m][c] * n1[c] + b[2][m][c] * n2[c];
        out[m] = (r ? r[m] : 0.0) - OMEGA * t;
    }
}

/* The lower sweep on plane k: (D + omega L) x = rsd, x replacing rsd. */
static void lower(struct lu *s, int k)
{
    edge(s, 1, s->ilo - 1, k, s->west, 1);
    edge(s, 0, s->jlo - 1, k, s->south, 1);
    for (int j = s->jlo; j <= s->jhi; j++)
        for (int i = s->ilo; i <= s->ihi; i++) {
            double b[3][NC][NC], (*d)[NC] = diag_at(s, i, j, k), *r = at(s, s->rsd, i, j, k);
            jacobians(s, i, j, k, -1, b);
            diagonal(s, at(s, s->u, i, j, k), s->rho[idx(s, i, j, k)], d);
            factor(d);
            couple(b, r, at(s, s->rsd, i, j, k - 1), at(s, s->rsd, i, j - 1, k), at(s, s->rsd, i - 1, j, k), r);
            solve(d, r);
        }
    edge(s, 1, s->ihi, k, s->east, 0);
    edge(s, 0, s->jhi, k, s->north, 0);
}

/* The upper sweep on plane k: rsd -= (D)^-1 omega U rsd, points in reverse order. */
static void upper(struct lu *s, int k)
{
    edge(s, 1, s->ihi + 1, k, s->east, 1);
    edge(s, 0, s->jhi + 1, k, s->north, 1);
    for (int j = s->jhi; j >= s->jlo; j--)
        for (int i = s->ihi; i >= s->ilo; i--) {
            double b[3][NC][NC], t[NC], *r = at(s, s->rsd, i, j, k);
            jacobians(s, i, j, k, 1, b);
            couple(b, NULL, at(s, s->rsd, i, j, k + 1), at(s, s->rsd, i, j + 1, k), at(s, s->rsd, i + 1, j, k), t);
            for (int m = 0; m < NC; m++)
                t[m] = -t[m];
            solve(diag_at(s, i, j, k), t);
            for (int m = 0; m < NC; m++)
                r[m] -= t[m];
        }
    edge(s, 1, s->ilo, k, s->west, 0);
    edge(s, 0, s->jlo, k, s->south, 0);
}

/* c2 (energy - kinetic energy): the pressure the surface integral sums. */
static double pressure(const struct lu *s, int i, int j, int k)
{
    const double *p = at(s, s->u, i, j, k);
    return C2 * (p[4] - 0.5 * (p[1] * p[1] + p[2] * p[2] + p[3] * p[3]) / p[0]);
}

/*
 * The surface integral of the pressure over the faces of a box inside the grid (x from 1 to n-2, y from 1 to n-3,
 * z from 2 to n-2, in 0-based indices, as NPB sets its bounds), by the trapezoidal rule on each face; u's halos must
 * be current. Each rank adds the cells whose lower corner it owns.
 */
static double integral(struct lu *s)
{
    int ib = 1, ie = s->n - 2, jb = 1, je = s->n - 3, kb = 2, ke = s->n - 2;
    double h = 1.0 / (s->n - 1), part[3] = { 0 }, sum[3];
    int i1 = s->i0 > ib ? s->i0 : ib, i2 = s->i0 + s->ni - 1 < ie - 1 ? s->i0 + s->ni - 1 : ie - 1;
    int j1 = s->j0 > jb ? s->j0 : jb, j2 = s->j0 + s->nj - 1 < je - 1 ? s->j0 + s->nj - 1 : je - 1;
    for (int j = j1; j <= j2; j++)
        for (int i = i1; i <= i2; i++)
            for (int k = kb; k <= ke; k += ke - kb)
                part[0] += pressure(s, i, j, k) + pressure(s, i + 1, j, k) + pressure(s, i, j + 1, k) +
                           pressure(s, i + 1, j + 1, k);
    for (int j = jb; j <= je; j += je - jb)
        if (j >= s->j0 && j < s->j0 + s->nj)
            for (int k = kb; k < ke; k++)
                for (int i = i1; i <= i2; i++)
                    part[1] += pressure(s, i, j, k) + pressure(s, i + 1, j, k) + pressure(s, i, j, k + 1) +
                               pressure(s, i + 1, j, k + 1);
    for (int i = ib; i <= ie; i += ie - ib)
        if (i >= s->i0 && i < s->i0 + s->ni)
            for (int k = kb; k < ke; k++)
                for (int j = j1; j <= j2; j++)
                    part[2] += pressure(s, i, j, k) + pressure(s, i, j + 1, k) + pressure(s, i, j, k + 1) +
                               pressure(s, i, j + 1, k + 1);
    MPI_Allreduce(part, sum, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return 0.25 * h * h * (sum[0] + sum[1] + sum[2]);
}

/* u: the exact solution on the six faces, inside the blend of the faces' values along each axis; frct = L of the
 * exact solution, so that the exact solution is the steady state. */
static void setup(struct lu *s)
{
    long total = s->lx * s->ly * s->n * NC;
    s->u = calloc(total, sizeof(double));
    s->rsd = calloc(total, sizeof(double));
    s->frct = calloc(total, sizeof(double));
    s->rho = calloc(total / NC, sizeof(double));
    s->dlu = malloc((size_t)(s->ihi - s->ilo + 1) * (s->jhi - s->jlo + 1) * (s->n - 2) * NC * NC * sizeof(double));
    long face = (long)H * NC * s->n * ((s->ni > s->nj ? s->ni : s->nj) + 2 * H);
    s->buf = malloc(face * sizeof(double));
    if (!s->u || !s->rsd || !s->frct || !s->rho || !s->dlu || !s->buf)
        kernel_fail(s->k, "out of memory for a %d^3 grid on %d processes", s->n, s->k->nprocs);
    int n = s->n;
    double h = 1.0 / (n - 1);
    /* The exact solution everywhere first (rsd holds it for a moment), for the forcing. */
    for (int k = 0; k < n; k++)
        for (int j = s->j0 - H; j < s->j0 + s->nj + H; j++)
            for (int i = s->i0 - H; i < s->i0 + s->ni + H; i++)
                if (local(s, i, j))
                    exact(s, i, j, k, at(s, s->rsd, i, j, k));
    reciprocals(s, s->rsd);
    apply_l(s, s->rsd, s->frct);
    memset(s->rsd, 0, total * sizeof(double));
    for (int k = 0; k < n; k++)
        for (int j = s->j0 - H; j < s->j0 + s->nj + H; j++)
            for (int i = s->i0 - H; i < s->i0 + s->ni + H; i++) {
                if (!local(s, i, j))
                    continue;
                double *p = at(s, s->u, i, j, k);
                if (i == 0 || i == n - 1 || j == 0 || j == n - 1 || k == 0 || k == n - 1) {
                    exact(s, i, j, k, p);
                    continue;
                }
                double x0[NC], x1[NC], y0[NC], y1[NC], z0[NC], z1[NC];
                exact(s, 0, j, k, x0);
                exact(s, n - 1, j, k, x1);
                exact(s, i, 0, k, y0);
                exact(s, i, n - 1, k, y1);
                exact(s, i, j, 0, z0);
                exact(s, i, j, n - 1, z1);
                double xi = i * h, eta = j * h, zeta = k * h;
                for (int m = 0; m < NC; m++) {
                    double px = (1.0 - xi) * x0[m] + xi * x1[m], py = (1.0 - eta) * y0[m] + eta * y1[m];
                    double pz = (1.0 - zeta) * z0[m] + zeta * z1[m];
                    p[m] = px + py + pz - px * py - py * pz - pz * px + px * py * pz;
                }
            }
}

/* Splits n points into `parts` blocks; block `idx` starts at *first (0-based) and has *count points. */
static void split(int n, int parts, int idx, int *first, int *count)
{
    *first = (int)((long)n * idx / parts);
    *count = (int)((long)n * (idx + 1) / parts) - *first;
}

int main(int argc, char **argv)
{
    struct kernel_ctx k;
    int cls = kernel_init(&k, "lu", "SWABC", &argc, &argv);
    const struct lu_class *c = &CLASSES[cls];

    struct lu s = { .k = &k, .n = c->n, .dt = c->dt * (k.args.perturb ? 1.01 : 1.0) };
    int lg = 0;
    while ((1 << lg) < k.nprocs)
        lg++;
    s.px = 1 << ((lg + 1) / 2);
    s.py = k.nprocs / s.px;
    if (s.n / s.px < 3 || s.n / s.py < 3)
        kernel_usage(&k, "class %c (%d^3) cannot be split over %dx%d processes (at least 3 points each)", c->cls,
                     s.n, s.px, s.py);
    int cx = k.rank % s.px, cy = k.rank / s.px;
    split(s.n, s.px, cx, &s.i0, &s.ni);
    split(s.n, s.py, cy, &s.j0, &s.nj);
    s.ilo = s.i0 > 1 ? s.i0 : 1;
    s.ihi = s.i0 + s.ni - 1 < s.n - 2 ? s.i0 + s.ni - 1 : s.n - 2;
    s.jlo = s.j0 > 1 ? s.j0 : 1;
    s.jhi = s.j0 + s.nj - 1 < s.n - 2 ? s.j0 + s.nj - 1 : s.n - 2;
    s.west = cx > 0 ? k.rank - 1 : MPI_PROC_NULL;
    s.east = cx < s.px - 1 ? k.rank + 1 : MPI_PROC_NULL;
    s.south = cy > 0 ? k.rank - s.px : MPI_PROC_NULL;
    s.north = cy < s.py - 1 ? k.rank + s.px : MPI_PROC_NULL;
    s.lx = s.ni + 2 * H;
    s.ly = s.nj + 2 * H;
    double h = 1.0 / (s.n - 1);
    s.dx = (struct dir){ 1.0 / (h * h), 1.0 / (2.0 * h), 1.0 / h, DXY };
    s.dy = s.dx;
    s.dz = (struct dir){ 1.0 / (h * h), 1.0 / (2.0 * h), 1.0 / h, DZ };
    setup(&s);

    residual(&s);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    double relax = 1.0 / (OMEGA * (2.0 - OMEGA));
    for (int it = 1; it <= c->itmax; it++) {
        for (int kk = 1; kk <= s.n - 2; kk++)
            for (int j = s.jlo; j <= s.jhi; j++)
                for (int i = s.ilo; i <= s.ihi; i++)
                    for (int m = 0; m < NC; m++)
                        at(&s, s.rsd, i, j, kk)[m] *= s.dt;
        for (int kk = 1; kk <= s.n - 2; kk++)
            lower(&s, kk);
        for (int kk = s.n - 2; kk >= 1; kk--)
            upper(&s, kk);
        for (int kk = 1; kk <= s.n - 2; kk++)
            for (int j = s.jlo; j <= s.jhi; j++)
                for (int i = s.ilo; i <= s.ihi; i++)
                    for (int m = 0; m < NC; m++)
                        at(&s, s.u, i, j, kk)[m] += relax * at(&s, s.rsd, i, j, kk)[m];
        residual(&s);
    }
    double xcr[NC], xce[NC];
    rms(&s, s.rsd, 0, xcr);
    double time = kernel_max_time(MPI_Wtime() - t0);
    rms(&s, s.u, 1, xce);
    double xci = integral(&s);

    double worst = kernel_relerr(xci, c->xci);
    for (int m = 0; m < NC; m++)
        worst = fmax(worst, fmax(kernel_relerr(xcr[m], c->xcr[m]), kernel_relerr(xce[m], c->xce[m])));
    char extra[768];
    int len = snprintf(extra, sizeof extra, "\"grid\":\"%dx%d\",\"xcr\":[", s.px, s.py);
    for (int m = 0; m < NC; m++)
        len += snprintf(extra + len, sizeof extra - len, "%s%.17e", m ? "," : "", xcr[m]);
    len += snprintf(extra + len, sizeof extra - len, "],\"xce\":[");
    for (int m = 0; m < NC; m++)
        len += snprintf(extra + len, sizeof extra - len, "%s%.17e", m ? "," : "", xce[m]);
    snprintf(extra + len, sizeof extra - len, "],\"xci\":%.17e,\"rel_error\":%.3e", xci, worst);

    struct kernel_result r = { .iterations = c->itmax, .time = time, .optype = "floating point",
                               .verified = worst <= 1e-8, .extra = extra };
    snprintf(r.size, sizeof r.size, "%dx%dx%d", s.n, s.n, s.n);
    double n3 = (double)s.n * s.n * s.n, sum = 3.0 * s.n;
    r.mops = c->itmax * (1984.77 * n3 - 10923.3 * (sum / 3.0) * (sum / 3.0) + 27770.9 * sum / 3.0 - 144010.0) /
             (time * 1e6);
    if (k.rank == 0 && !k.args.json) {
        printf(" LU benchmark: process grid %dx%d\n Verification being performed for class %c\n", s.px, s.py, c->cls);
        const char *names[2] = { "residual", "error" };
        const double *got[2] = { xcr, xce }, *want[2] = { c->xcr, c->xce };
        for (int v = 0; v < 2; v++) {
            printf(" Accuracy setting for epsilon = %20.13E\n Comparison of RMS-norms of %s\n", 1e-8, names[v]);
            for (int m = 0; m < NC; m++)
                printf("          %d %20.13E%20.13E%20.13E\n", m + 1, got[v][m], want[v][m],
                       kernel_relerr(got[v][m], want[v][m]));
        }
        printf(" Comparison of surface integral\n           %20.13E%20.13E%20.13E\n", xci, c->xci,
               kernel_relerr(xci, c->xci));
    }
    int rc = kernel_report(&k, &r);
    MPI_Finalize();
    return rc;
}
