/*
 * Integer workloads: deflate compression (zlib), sorting 32-bit keys, a hash table of 64-bit keys, and parsing
 * numbers out of CSV text.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "workload.h"

/* A small xorshift generator for reproducible data. */
static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ---- deflate: 1 MiB of word-like text at level 6 ---- */

#define TEXT (1 << 20)

struct deflate {
    unsigned char *in, *out, *back;
    uLongf outlen;
};

static void *deflate_setup(void)
{
    static const char *words[] = { "lockstep ", "rank ", "barrier ", "slot ", "gang ", "core ", "numa ",
                                   "message ", "cgroup ", "weight ", "freeze ", "counter ", "\n", "0 ", "42 " };
    struct deflate *d = calloc(1, sizeof *d);
    d->in = malloc(TEXT);
    d->out = malloc(compressBound(TEXT));
    d->back = malloc(TEXT);
    uint64_t s = 88172645463325252ull;
    size_t n = 0;
    while (n < TEXT) {
        const char *w = words[next(&s) % 15];
        for (; *w && n < TEXT; w++)
            d->in[n++] = (unsigned char)*w;
    }
    return d;
}

static double deflate_run(void *p)
{
    struct deflate *d = p;
    d->outlen = compressBound(TEXT);
    compress2(d->out, &d->outlen, d->in, TEXT, 6);
    return TEXT / 1e6;
}

static int deflate_check(void *p)
{
    struct deflate *d = p;
    uLongf n = TEXT;
    return uncompress(d->back, &n, d->out, d->outlen) == Z_OK && n == TEXT && memcmp(d->back, d->in, TEXT) == 0;
}

static void deflate_teardown(void *p)
{
    struct deflate *d = p;
    free(d->in), free(d->out), free(d->back), free(d);
}

const struct workload WL_DEFLATE = { "deflate", INTEGER, "MB/s", 20.0, deflate_setup, deflate_run, deflate_check,
                                     deflate_teardown };

/* ---- sort: 256 Ki random 32-bit keys with qsort ---- */

#define KEYS (1 << 18)

struct sort {
    uint32_t *orig, *keys;
};

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void *sort_setup(void)
{
    struct sort *s = malloc(sizeof *s);
    s->orig = malloc(KEYS * sizeof(uint32_t));
    s->keys = malloc(KEYS * sizeof(uint32_t));
    uint64_t g = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < KEYS; i++)
        s->orig[i] = (uint32_t)next(&g);
    return s;
}

static double sort_run(void *p)
{
    struct sort *s = p;
    memcpy(s->keys, s->orig, KEYS * sizeof(uint32_t));
    qsort(s->keys, KEYS, sizeof(uint32_t), cmp_u32);
    return KEYS / 1e6;
}

static int sort_check(void *p)
{
    struct sort *s = p;
    for (int i = 1; i < KEYS; i++)
        if (s->keys[i - 1] > s->keys[i])
            return 0;
    return 1;
}

static void sort_teardown(void *p)
{
    struct sort *s = p;
    free(s->orig), free(s->keys), free(s);
}

const struct workload WL_SORT = { "sort", INTEGER, "Mkeys/s", 7.0, sort_setup, sort_run, sort_check,
                                  sort_teardown };

/* ---- hash: insert 256 Ki keys into an open-addressing table, then look each up ---- */

#define HKEYS (1 << 18)
#define SLOTS (1 << 19)

struct hash {
    uint64_t *keys, *table;
    uint64_t found;
};

static inline uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

static void *hash_setup(void)
{
    struct hash *h = calloc(1, sizeof *h);
    h->keys = malloc(HKEYS * sizeof(uint64_t));
    h->table = malloc(SLOTS * sizeof(uint64_t));
    uint64_t g = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < HKEYS; i++)
        h->keys[i] = next(&g) | 1; /* 0 marks an empty slot */
    return h;
}

static double hash_run(void *p)
{
    struct hash *h = p;
    memset(h->table, 0, SLOTS * sizeof(uint64_t));
    for (int i = 0; i < HKEYS; i++) {
        uint64_t j = mix(h->keys[i]) & (SLOTS - 1);
        while (h->table[j] && h->table[j] != h->keys[i])
            j = (j + 1) & (SLOTS - 1);
        h->table[j] = h->keys[i];
    }
    uint64_t found = 0;
    for (int i = 0; i < HKEYS; i++) {
        uint64_t j = mix(h->keys[i]) & (SLOTS - 1);
        while (h->table[j] && h->table[j] != h->keys[i])
            j = (j + 1) & (SLOTS - 1);
        found += h->table[j] == h->keys[i];
    }
    h->found = found;
    return 2.0 * HKEYS / 1e6;
}

static int hash_check(void *p)
{
    return ((struct hash *)p)->found == HKEYS;
}

static void hash_teardown(void *p)
{
    struct hash *h = p;
    free(h->keys), free(h->table), free(h);
}

const struct workload WL_HASH = { "hash", INTEGER, "Mops/s", 70.0, hash_setup, hash_run, hash_check,
                                  hash_teardown };

/* ---- parse: CSV lines of integers and decimals, summed ---- */

#define ROWS 20000

struct parse {
    char *text;
    size_t len;
    long long isum, expect_isum;
};

static void *parse_setup(void)
{
    struct parse *p = calloc(1, sizeof *p);
    p->text = malloc(ROWS * 64);
    uint64_t g = 0x853c49e6748fea9bull;
    for (int r = 0; r < ROWS; r++) {
        long a = (long)(next(&g) % 1000000), b = (long)(next(&g) % 1000) - 500;
        unsigned c = (unsigned)(next(&g) % 100000);
        p->len += (size_t)sprintf(p->text + p->len, "%ld,%ld,%u.%03u\n", a, b, c / 1000, c % 1000);
        p->expect_isum += a + b;
    }
    return p;
}

static double parse_run(void *q)
{
    struct parse *p = q;
    char *s = p->text, *end = p->text + p->len;
    long long isum = 0;
    double fsum = 0.0;
    while (s < end) {
        isum += strtol(s, &s, 10);
        isum += strtol(s + 1, &s, 10);
        fsum += strtod(s + 1, &s);
        s++; /* newline */
    }
    p->isum = isum + (fsum < 0); /* fsum is never negative: keeps the strtod calls live */
    return p->len / 1e6;
}

static int parse_check(void *q)
{
    struct parse *p = q;
    return p->isum == p->expect_isum;
}

static void parse_teardown(void *q)
{
    struct parse *p = q;
    free(p->text), free(p);
}

const struct workload WL_PARSE = { "parse", INTEGER, "MB/s", 100.0, parse_setup, parse_run, parse_check,
                                   parse_teardown };
