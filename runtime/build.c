/*
 * build.c -- building fibertree tensors from coordinate entries.
 *
 * Every builder funnels into two steps:
 *   rt_sort_rows     sort entries lexicographically in the target level
 *                    order and sum duplicates (an O(n) LSD radix sort on
 *                    packed keys; skipped when the input is already sorted);
 *   rt_build_sorted  lay out the levels from strictly sorted rows in one
 *                    pass per level.
 * Because rows arrive sorted, the child positions of every level increase
 * along the rows, so list offsets come from counting and the hash level's
 * insertion order is already its sorted (frozen) order.
 */
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

static galley_status nomem(galley_error *err) {
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
}

/* ------------------------------------------------------------------ */
/* Radix sort                                                          */
/* ------------------------------------------------------------------ */

/* Bits needed to hold coordinates 0..dim-1. */
static int bit_length(int64_t dim) {
  return dim <= 1 ? 0 : 64 - __builtin_clzll((unsigned long long)(dim - 1));
}

#define RADIX_MAX_BITS 11 /* 2048 buckets: the histogram stays in L1 */

/* Stable LSD radix sort of (key, idx) pairs on bits lo .. lo+bits-1 of key.
 * Ping-pongs between (key, idx) and (k2, i2); on return key and idx
 * point at the sorted data.  cnt is scratch of 6 << RADIX_MAX_BITS. */
static void radix_sort(uint64_t **key, int64_t **idx, uint64_t **k2,
                       int64_t **i2, int64_t n, int lo, int bits,
                       int64_t *cnt) {
  int npass = n > 1 ? (bits + RADIX_MAX_BITS - 1) / RADIX_MAX_BITS : 0;
  int w = npass ? (bits + npass - 1) / npass : 0;
  int64_t nb = (int64_t)1 << w;
  uint64_t mask = (uint64_t)nb - 1;
  memset(cnt, 0, (size_t)(npass * nb) * sizeof *cnt);
  for (int64_t j = 0; j < n; j++) /* every pass's histogram in one sweep */
    for (int s = 0; s < npass; s++)
      cnt[s * nb + (int64_t)(((*key)[j] >> (lo + s * w)) & mask)]++;
  for (int s = 0; s < npass; s++) {
    int64_t *c = cnt + s * nb, sum = 0;
    if (c[((*key)[0] >> (lo + s * w)) & mask] == n)
      continue; /* one digit value for all keys: the pass is a no-op */
    for (int64_t b = 0; b < nb; b++) {
      int64_t t = c[b];
      c[b] = sum;
      sum += t;
    }
    uint64_t *ks = *key, *kd = *k2;
    int64_t *is = *idx, *id = *i2;
    for (int64_t j = 0; j < n; j++) {
      int64_t to = c[(ks[j] >> (lo + s * w)) & mask]++;
      kd[to] = ks[j];
      id[to] = is[j];
    }
    *k2 = ks;
    *key = kd;
    *i2 = is;
    *idx = id;
  }
}

/* Whether rows (width columns, read through colmap) are already in
 * non-decreasing (strict: increasing) lexicographic order. */
static int rows_ordered(int64_t n, int width, const int64_t *rows, int order,
                        const int *colmap, int strict) {
  for (int64_t e = 1; e < n; e++) {
    const int64_t *a = rows + (e - 1) * width, *b = rows + e * width;
    int l = 0;
    for (; l < order; l++) {
      int64_t x = a[colmap[l]], y = b[colmap[l]];
      if (x < y)
        break;
      if (x > y)
        return 0;
    }
    if (strict && l == order)
      return 0;
  }
  return 1;
}

static int rows_sorted(int64_t n, int width, const int64_t *rows, int order,
                       const int *colmap) {
  return rows_ordered(n, width, rows, order, colmap, 0);
}

/* Sort the permutation *idx of the rows: LSD over groups of consecutive
 * columns packed into one 64-bit key each, last group first.  Usually
 * (product of dims below 2^64) there is a single group. */
static void sort_groups(int64_t n, int width, const int64_t *rows, int order,
                        const int *colmap, const int64_t *cdims,
                        uint64_t **key, int64_t **idx, uint64_t **k2,
                        int64_t **i2, int64_t *cnt) {
  int hi = order;
  while (hi > 0) {
    int lo = hi, bits = 0;
    while (lo > 0 && bits + bit_length(cdims[lo - 1]) <= 64)
      bits += bit_length(cdims[--lo]);
    if (bits > 0) {
      for (int64_t j = 0; j < n; j++) {
        const int64_t *r = rows + (*idx)[j] * width;
        uint64_t k = 0;
        for (int l = lo; l < hi; l++)
          k = k << bit_length(cdims[l]) | (uint64_t)r[colmap[l]];
        (*key)[j] = k;
      }
      radix_sort(key, idx, k2, i2, n, 0, bits, cnt);
    }
    hi = lo;
  }
}

/* Copy rows in the order perm (identity when NULL) into out rows of
 * `order` columns, summing runs of equal rows; returns the count. */
static int64_t gather_rows(int64_t n, int width, const int64_t *rows,
                           const double *vals, int order, const int *colmap,
                           const int64_t *perm, int64_t *orows,
                           double *ovals) {
  int64_t m = 0;
  for (int64_t j = 0; j < n; j++) {
    int64_t e = perm ? perm[j] : j;
    const int64_t *r = rows + e * width;
    double v = vals ? vals[e] : 1.0;
    int l = 0;
    if (m > 0) {
      const int64_t *prev = orows + (m - 1) * order;
      while (l < order && prev[l] == r[colmap[l]])
        l++;
      if (l == order) { /* a duplicate: summed in input order */
        ovals[m - 1] += v;
        continue;
      }
    }
    int64_t *o = orows + m * order;
    for (l = 0; l < order; l++)
      o[l] = r[colmap[l]];
    ovals[m++] = v;
  }
  return m;
}

/* When the rows are already sorted by the trailing target columns (a
 * transposition of sorted rows: CSR to CSC), a stable sort by the leading
 * columns alone suffices, as in CSparse's cs_transpose.  Returns the key
 * bits of the longest such suffix, which the radix sort may skip. */
static int sorted_suffix_bits(int64_t n, int width, const int64_t *rows,
                              int order, const int *colmap,
                              const int64_t *cdims) {
  int bits = 0, best = 0;
  for (int s = order - 1; s >= 1; s--) {
    bits += bit_length(cdims[s]);
    if (!rows_sorted(n, width, rows, order - s, colmap + s))
      break;
    best = bits;
  }
  return best;
}

/* Total bits of all columns, or -1 when they do not fit one 64-bit key. */
static int packed_bits(int order, const int64_t *cdims) {
  int bits = 0;
  for (int l = 0; l < order; l++)
    if ((bits += bit_length(cdims[l])) > 64)
      return -1;
  return bits;
}

/* The common case: each row packs into one 64-bit key.  Sort (key, value
 * bits) pairs and decode the rows from the keys, so that no pass reads
 * the input at random; equal keys are duplicates. */
static int64_t sort_packed(int64_t n, int width, const int64_t *rows,
                           const double *vals, int order, const int *colmap,
                           const int64_t *cdims, int bits, uint64_t *key,
                           int64_t *pay, uint64_t *k2, int64_t *p2,
                           int64_t *cnt, int64_t *orows, double *ovals) {
  for (int64_t j = 0; j < n; j++) {
    const int64_t *r = rows + j * width;
    uint64_t k = 0;
    for (int l = 0; l < order; l++)
      k = k << bit_length(cdims[l]) | (uint64_t)r[colmap[l]];
    double v = vals ? vals[j] : 1.0;
    key[j] = k;
    memcpy(&pay[j], &v, sizeof v);
  }
  int low = sorted_suffix_bits(n, width, rows, order, colmap, cdims);
  radix_sort(&key, &pay, &k2, &p2, n, low, bits - low, cnt);
  int64_t m = 0;
  for (int64_t j = 0; j < n; j++) {
    double v;
    memcpy(&v, &pay[j], sizeof v);
    if (m > 0 && key[j] == key[j - 1]) {
      ovals[m - 1] += v; /* a duplicate: summed in input order */
      continue;
    }
    uint64_t k = key[j];
    int64_t *o = orows + m * order;
    for (int l = order - 1; l >= 0; l--) {
      int b = bit_length(cdims[l]);
      o[l] = (int64_t)(k & (((uint64_t)1 << b) - 1));
      k = b < 64 ? k >> b : 0;
    }
    ovals[m++] = v;
  }
  return m;
}

galley_status rt_sort_rows(int64_t n, int width, const int64_t *rows,
                           const double *vals, int order, const int *colmap,
                           const int64_t *cdims, int64_t *nout,
                           int64_t **orows, double **ovals, galley_error *err) {
  uint64_t *key = NULL, *k2 = NULL;
  int64_t *idx = NULL, *i2 = NULL, *cnt = NULL;
  galley_status st = GALLEY_OK;
  *orows = rt_malloc_array(n * (int64_t)order, sizeof **orows);
  *ovals = rt_malloc_array(n, sizeof **ovals);
  if (!*orows || !*ovals)
    goto fail;
  if (!rows_sorted(n, width, rows, order, colmap)) {
    key = rt_malloc_array(n, sizeof *key);
    k2 = rt_malloc_array(n, sizeof *k2);
    idx = rt_malloc_array(n, sizeof *idx);
    i2 = rt_malloc_array(n, sizeof *i2);
    cnt = rt_malloc_array(6 << RADIX_MAX_BITS, sizeof *cnt);
    if (!key || !k2 || !idx || !i2 || !cnt)
      goto fail;
    int bits = packed_bits(order, cdims);
    if (bits >= 0) {
      *nout = sort_packed(n, width, rows, vals, order, colmap, cdims, bits,
                          key, idx, k2, i2, cnt, *orows, *ovals);
      goto done;
    }
    for (int64_t j = 0; j < n; j++)
      idx[j] = j;
    sort_groups(n, width, rows, order, colmap, cdims, &key, &idx, &k2, &i2,
                cnt);
  }
  *nout = gather_rows(n, width, rows, vals, order, colmap, idx, *orows, *ovals);
  goto done;
fail:
  free(*orows);
  free(*ovals);
  *orows = NULL;
  *ovals = NULL;
  st = nomem(err);
done:
  free(key);
  free(k2);
  free(idx);
  free(i2);
  free(cnt);
  return st;
}

/* ------------------------------------------------------------------ */
/* Level layout from sorted rows                                       */
/* ------------------------------------------------------------------ */

/* The shared state of one build: rows (strictly increasing, `order`
 * columns in level order), for each row the first level where it differs
 * from the previous row (so a row opens a new node at level l iff
 * depth[e] <= l), and the row's current position q[e] at the level being
 * built (its parent position before the pass, its child position after). */
typedef struct build_state {
  int order;
  int64_t n;
  const int64_t *rows;
  const uint8_t *depth;
  int64_t *q;
} build_state;

/* Write the decimal digits of x into buf (at least 40 bytes). */
static const char *u128_str(unsigned __int128 x, char *buf) {
  char *p = buf + 39;
  *p = '\0';
  do {
    *--p = (char)('0' + (int)(x % 10));
    x /= 10;
  } while (x);
  return p;
}

/* Refuse a level whose positions p*dim + i could overflow. */
static galley_status check_positions(const galley_level *L, int l,
                                     galley_error *err) {
  unsigned __int128 need = (unsigned __int128)L->npar * (uint64_t)L->dim;
  char buf[40];
  if (need < (unsigned __int128)RT_MAX_POSITIONS)
    return GALLEY_OK;
  return rt_error(err, GALLEY_EOVERFLOW,
                  "level %d (%s, mode %d) would need %s positions", l,
                  galley_level_kind_name((galley_level_kind)L->kind), L->mode,
                  u128_str(need, buf));
}

/* Turn per-parent counts in pos[1..npar] into fiber offsets. */
static void prefix_sum(galley_pos *pos, int64_t npar) {
  for (int64_t p = 0; p < npar; p++)
    pos[p + 1] += pos[p];
}

/* Dense: q = p*dim + i for every row. */
static galley_status build_dense(galley_level *L, int l, build_state *b) {
  for (int64_t e = 0; e < b->n; e++)
    b->q[e] = b->q[e] * L->dim + b->rows[e * b->order + l];
  L->nchild = L->nset = L->npar * L->dim;
  return GALLEY_OK;
}

/* List: one crd per new node, numbered in row order. */
static galley_status build_list(galley_level *L, int l, int64_t m,
                                build_state *b) {
  L->pos = rt_calloc_array(L->npar + 1, sizeof *L->pos);
  L->crd = rt_malloc_array(m, sizeof *L->crd);
  if (!L->pos || !L->crd)
    return GALLEY_ENOMEM;
  int64_t k = -1;
  for (int64_t e = 0; e < b->n; e++) {
    if (b->depth[e] <= l) {
      L->crd[++k] = b->rows[e * b->order + l];
      L->pos[b->q[e] + 1]++;
    }
    b->q[e] = k;
  }
  prefix_sum(L->pos, L->npar);
  L->nchild = L->nset = m;
  return GALLEY_OK;
}

/* Insert a key known to be absent (rows are distinct). */
static void hash_insert(galley_level *L, int64_t key, galley_pos q) {
  galley_pos mask = L->hcap - 1, h = galley_rt_hash_start(key, L->hcap);
  while (L->key[h] != -1)
    h = (h + 1) & mask;
  L->key[h] = key;
  L->slot[h] = q;
}

#define HASH_AHEAD 16 /* inserts in flight: hides the probes' cache misses */

/* Enter nodes 0..m-1 (fiber by fiber from pos/crd) into the table.  The
 * slot of each key is prefetched HASH_AHEAD inserts before it is probed;
 * the order of inserts, and so the table, is unchanged by the delay. */
static void hash_fill(galley_level *L) {
  int64_t ring[HASH_AHEAD], k = 0, m = L->nset;
  for (int64_t p = 0; p < L->npar; p++)
    for (int64_t t = L->pos[p]; t < L->pos[p + 1]; t++, k++) {
      int64_t key = p * L->dim + L->crd[t];
      galley_pos h = galley_rt_hash_start(key, L->hcap);
      __builtin_prefetch(&L->key[h], 1);
      __builtin_prefetch(&L->slot[h], 1);
      if (k >= HASH_AHEAD)
        hash_insert(L, ring[k % HASH_AHEAD], k - HASH_AHEAD);
      ring[k % HASH_AHEAD] = key;
    }
  for (int64_t j = m > HASH_AHEAD ? m - HASH_AHEAD : 0; j < m; j++)
    hash_insert(L, ring[j % HASH_AHEAD], j);
}

/* Hash: a list whose nodes are also entered in the table; insertion order
 * is sorted order, so the frozen view maps crd[t] to child t. */
static galley_status build_hash(galley_level *L, int l, int64_t m,
                                build_state *b) {
  L->hcap = 2;
  while (L->hcap < 2 * m)
    L->hcap *= 2;
  L->key = rt_malloc_array(L->hcap, sizeof *L->key);
  L->slot = rt_malloc_array(L->hcap, sizeof *L->slot);
  L->qos = rt_malloc_array(m, sizeof *L->qos);
  L->pos = rt_calloc_array(L->npar + 1, sizeof *L->pos);
  L->crd = rt_malloc_array(m, sizeof *L->crd);
  if (!L->key || !L->slot || !L->qos || !L->pos || !L->crd)
    return GALLEY_ENOMEM;
  memset(L->key, 0xff, (size_t)L->hcap * sizeof *L->key); /* all -1 */
  int64_t k = -1;
  for (int64_t e = 0; e < b->n; e++) {
    if (b->depth[e] <= l) {
      L->crd[++k] = b->rows[e * b->order + l];
      L->qos[k] = k;
      L->pos[b->q[e] + 1]++;
    }
    b->q[e] = k;
  }
  prefix_sum(L->pos, L->npar);
  L->nchild = L->nset = m;
  hash_fill(L);
  return GALLEY_OK;
}

/* Bytemap: flags over npar*dim, children dense, set list sorted. */
static galley_status build_bytemap(galley_level *L, int l, int64_t m,
                                   build_state *b) {
  L->tbl = rt_calloc_array(L->npar * L->dim, sizeof *L->tbl);
  L->pos = rt_calloc_array(L->npar + 1, sizeof *L->pos);
  L->crd = rt_malloc_array(m, sizeof *L->crd);
  if (!L->tbl || !L->pos || !L->crd)
    return GALLEY_ENOMEM;
  int64_t k = 0;
  for (int64_t e = 0; e < b->n; e++) {
    int64_t p = b->q[e], i = b->rows[e * b->order + l];
    if (b->depth[e] <= l) {
      L->crd[k++] = i;
      L->pos[p + 1]++;
      L->tbl[p * L->dim + i] = 1;
    }
    b->q[e] = p * L->dim + i;
  }
  prefix_sum(L->pos, L->npar);
  L->nchild = L->npar * L->dim;
  L->nset = m;
  return GALLEY_OK;
}

/* Lay out level l over npar parents; m rows open a node at this level. */
static galley_status build_level(galley_tensor *t, int l,
                                 const galley_format *fmt, int64_t npar,
                                 int64_t m, build_state *b,
                                 galley_error *err) {
  galley_level *L = &t->lvl[l];
  L->kind = (int)fmt->kinds[l];
  L->mode = fmt->mode_order[l];
  L->dim = t->dims[L->mode];
  L->npar = npar;
  galley_status st = check_positions(L, l, err);
  if (st != GALLEY_OK)
    return st;
  switch (L->kind) {
  case GALLEY_RT_DENSE:
    st = build_dense(L, l, b);
    break;
  case GALLEY_RT_LIST:
    st = build_list(L, l, m, b);
    break;
  case GALLEY_RT_HASH:
    st = build_hash(L, l, m, b);
    break;
  default:
    st = build_bytemap(L, l, m, b);
    break;
  }
  return st == GALLEY_ENOMEM ? nomem(err) : st;
}

/* Refuse an oversized level before allocating anything: the levels down
 * to the first list or hash have parent counts known in advance. */
static galley_status precheck_positions(const galley_tensor *t,
                                        const galley_format *fmt,
                                        galley_error *err) {
  galley_level L = {0};
  L.npar = 1;
  for (int l = 0; l < t->order; l++) {
    L.kind = (int)fmt->kinds[l];
    L.mode = fmt->mode_order[l];
    L.dim = t->dims[L.mode];
    galley_status st = check_positions(&L, l, err);
    if (st != GALLEY_OK || (L.kind != GALLEY_RT_DENSE &&
                            L.kind != GALLEY_RT_BYTEMAP))
      return st;
    L.npar *= L.dim; /* below 2^62 after the check */
  }
  return GALLEY_OK;
}

/* depth[e] = first column where row e differs from row e-1 (0 for e = 0);
 * opens[l] = number of rows that open a node at level l. */
static void row_depths(const build_state *b, uint8_t *depth, int64_t *opens) {
  int64_t hist[GALLEY_MAX_ORDER + 1] = {0};
  for (int64_t e = 0; e < b->n; e++) {
    int k = 0;
    if (e > 0) {
      const int64_t *r = b->rows + e * b->order;
      while (k < b->order && r[k] == r[k - b->order])
        k++;
    }
    depth[e] = (uint8_t)k;
    hist[k]++;
  }
  int64_t sum = 0;
  for (int l = 0; l < b->order; l++)
    opens[l] = sum += hist[l];
}

/* Allocate the values: fill everywhere, then each row's value. */
static galley_status build_values(galley_tensor *t, int64_t nval,
                                  const build_state *b, const double *vals,
                                  galley_error *err) {
  t->nval = nval;
  t->val = rt_malloc_array(nval, sizeof *t->val);
  if (!t->val)
    return nomem(err);
  for (int64_t q = 0; q < nval; q++)
    t->val[q] = t->fill;
  for (int64_t e = 0; e < b->n; e++)
    t->val[b->q[e]] = vals[e];
  return GALLEY_OK;
}

galley_status rt_build_sorted(int order, const int64_t *dims,
                              const galley_format *fmt, double fill,
                              int64_t n, const int64_t *rows,
                              const double *vals, galley_tensor **out,
                              galley_error *err) {
  galley_status st = GALLEY_OK;
  uint8_t *depth = rt_malloc_array(n, sizeof *depth);
  int64_t opens[GALLEY_MAX_ORDER] = {0}, npar = 1;
  build_state b = {order, n, rows, depth, rt_calloc_array(n, sizeof(int64_t))};
  galley_tensor *t = calloc(1, sizeof *t);
  *out = NULL;
  if (!t || !depth || !b.q) {
    st = nomem(err);
    goto done;
  }
  t->order = order;
  t->fill = fill;
  for (int k = 0; k < order; k++)
    t->dims[k] = dims[k];
  if ((st = precheck_positions(t, fmt, err)) != GALLEY_OK)
    goto done;
  row_depths(&b, depth, opens);
  for (int l = 0; l < order && st == GALLEY_OK; l++) {
    st = build_level(t, l, fmt, npar, opens[l], &b, err);
    npar = t->lvl[l].nchild;
  }
  if (st == GALLEY_OK)
    st = build_values(t, npar, &b, vals, err);
done:
  free(depth);
  free(b.q);
  if (st != GALLEY_OK)
    t = galley_tensor_free(t);
  *out = t;
  return st;
}

/* ------------------------------------------------------------------ */
/* Public builders                                                     */
/* ------------------------------------------------------------------ */

static galley_status check_shape(int order, const int64_t *dims,
                                 galley_error *err) {
  if (order < 0 || order > GALLEY_MAX_ORDER)
    return rt_error(err, GALLEY_EINVAL, "order %d is not in 0..%d", order,
                    GALLEY_MAX_ORDER);
  for (int k = 0; k < order; k++)
    if (dims[k] < 0)
      return rt_error(err, GALLEY_EINVAL, "mode %d has negative size %lld", k,
                      (long long)dims[k]);
  return GALLEY_OK;
}

static galley_status check_coords(int order, const int64_t *dims,
                                  int64_t nnz, const int64_t *coords,
                                  galley_error *err) {
  for (int64_t e = 0; e < nnz; e++)
    for (int k = 0; k < order; k++) {
      int64_t c = coords[e * order + k];
      if (c < 0 || c >= dims[k])
        return rt_error(err, GALLEY_EINVAL,
                        "entry %lld: coordinate %lld is out of range for "
                        "mode %d of size %lld",
                        (long long)e, (long long)c, k, (long long)dims[k]);
    }
  return GALLEY_OK;
}

/* Sort logical rows into fmt's level order and build. */
static galley_status build_logical(int order, const int64_t *dims,
                                   int64_t nnz, const int64_t *coords,
                                   const double *vals, double fill,
                                   const galley_format *fmt,
                                   galley_tensor **out, galley_error *err) {
  int64_t cdims[GALLEY_MAX_ORDER], n = 0, *rows = NULL;
  double *v = NULL;
  int identity = 1;
  for (int l = 0; l < order; l++) {
    cdims[l] = dims[fmt->mode_order[l]];
    identity &= fmt->mode_order[l] == l;
  }
  if (identity && vals && order > 0 &&
      rows_ordered(nnz, order, coords, order, fmt->mode_order, 1))
    return rt_build_sorted(order, dims, fmt, fill, nnz, coords, vals, out,
                           err); /* sorted, distinct: no copy needed */
  galley_status st = rt_sort_rows(nnz, order, coords, vals, order,
                                  fmt->mode_order, cdims, &n, &rows, &v, err);
  if (st == GALLEY_OK)
    st = rt_build_sorted(order, dims, fmt, fill, n, rows, v, out, err);
  free(rows);
  free(v);
  return st;
}

galley_status galley_tensor_from_coo(int order, const int64_t *dims,
                                     int64_t nnz, const int64_t *coords,
                                     const double *vals, double fill,
                                     const galley_format *fmt,
                                     galley_tensor **out, galley_error *err) {
  galley_format def;
  galley_status st;
  *out = NULL;
  if ((st = check_shape(order, dims, err)) != GALLEY_OK)
    return st;
  if (nnz < 0 || (nnz > 0 && order > 0 && !coords))
    return rt_error(err, GALLEY_EINVAL, "bad entry count %lld or no coords",
                    (long long)nnz);
  if (!fmt) {
    def = galley_format_default(order);
    fmt = &def;
  }
  if ((st = rt_format_check(fmt, order, err)) != GALLEY_OK ||
      (st = check_coords(order, dims, nnz, coords, err)) != GALLEY_OK)
    return st;
  return build_logical(order, dims, nnz, coords, vals, fill, fmt, out, err);
}

galley_status rt_tensor_from_coo(rt_coo *coo, const galley_format *fmt,
                                 galley_tensor **out, galley_error *err) {
  return galley_tensor_from_coo(coo->order, coo->dims, coo->nnz, coo->crd,
                                coo->val, coo->fill, fmt, out, err);
}

/* Whether v counts as the fill: equal, or the same bits (NaN fills). */
static int is_fill(double v, double fill) {
  return v == fill || memcmp(&v, &fill, sizeof v) == 0;
}

/* The logical coordinates and values of the non-fill entries of a dense
 * row-major array of count values. */
static galley_status dense_entries(int order, const int64_t *dims,
                                   const double *values, int64_t count,
                                   double fill, int64_t *nnz,
                                   int64_t **coords, double **vals) {
  int64_t n = 0, c[GALLEY_MAX_ORDER] = {0};
  for (int64_t j = 0; j < count; j++)
    n += !is_fill(values[j], fill);
  *coords = rt_malloc_array(n * (int64_t)order, sizeof **coords);
  *vals = rt_malloc_array(n, sizeof **vals);
  if (!*coords || !*vals)
    return GALLEY_ENOMEM;
  n = 0;
  for (int64_t j = 0; j < count; j++) {
    if (!is_fill(values[j], fill)) {
      memcpy(*coords + n * order, c, (size_t)order * sizeof *c);
      (*vals)[n++] = values[j];
    }
    for (int k = order - 1; k >= 0 && ++c[k] == dims[k]; k--)
      c[k] = 0; /* odometer over the row-major index */
  }
  *nnz = n;
  return GALLEY_OK;
}

galley_status galley_tensor_from_dense(int order, const int64_t *dims,
                                       const double *values, double fill,
                                       const galley_format *fmt,
                                       galley_tensor **out, galley_error *err) {
  galley_format def;
  galley_status st;
  int64_t count = 1, nnz = 0, *coords = NULL;
  double *vals = NULL;
  *out = NULL;
  if ((st = check_shape(order, dims, err)) != GALLEY_OK)
    return st;
  if (!fmt) {
    def = galley_format_default(order);
    fmt = &def;
  }
  if ((st = rt_format_check(fmt, order, err)) != GALLEY_OK)
    return st;
  for (int k = 0; k < order; k++)
    if (rt_mul_overflows(count, dims[k], &count))
      return rt_error(err, GALLEY_EOVERFLOW, "dense array is too large");
  if (dense_entries(order, dims, values, count, fill, &nnz, &coords, &vals))
    st = nomem(err);
  else
    st = build_logical(order, dims, nnz, coords, vals, fill, fmt, out, err);
  free(coords);
  free(vals);
  return st;
}
