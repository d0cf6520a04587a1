/*
 * build.c -- building fibertree tensors from coordinate entries.
 *
 * Every builder funnels into two steps:
 *   sorting     entries lexicographically in the target level order: an
 *               O(n) LSD radix sort of (packed key, value) pairs, skipped
 *               when the input is already sorted, and limited to the
 *               leading key bits when the trailing columns are sorted;
 *   rt_builder  lays out every level in one streaming pass over the sorted
 *               entries (after a counting pass that sizes the levels),
 *               summing equal consecutive entries on the way.
 * Because entries arrive sorted, the child positions of every level
 * increase along them, so list offsets come from counting and the hash
 * level's insertion order is already its sorted (frozen) order.
 *
 * The file readers hand over their coordinate list (rt_tensor_from_coo):
 * its arrays double as the sort's scratch and are freed as soon as they
 * are no longer needed, so reading holds little more than the list.
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
/* The streaming builder                                               */
/* ------------------------------------------------------------------ */

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

/* Turn per-parent counts in pos[1..npar] into fiber offsets. */
static void prefix_sum(galley_pos *pos, int64_t npar) {
  galley_pos sum = 0;
  for (int64_t p = 1; p <= npar; p++)
    pos[p] = sum += pos[p];
}

/* Insert a key known to be absent (entries are distinct), into a table
 * of either width. */
static void hash_insert(galley_level *L, int64_t key, galley_pos q) {
  galley_pos mask = L->hcap - 1, h = galley_rt_hash_start(key, L->hcap);
  if (L->key32) {
    while (L->key32[h] != -1)
      h = (h + 1) & mask;
    L->key32[h] = (int32_t)key;
    L->slot32[h] = (int32_t)q;
    return;
  }
  while (L->key[h] != -1)
    h = (h + 1) & mask;
  L->key[h] = key;
  L->slot[h] = q;
}

#define HASH_AHEAD 16 /* inserts in flight: hides the probes' cache misses */

/* Enter nodes 0..m-1 (fiber by fiber from the 64-bit pos/crd the
 * builder wrote) into the table.  The slot of each key is prefetched
 * HASH_AHEAD inserts before it is probed; the order of inserts, and so
 * the table, is unchanged by the delay.  (Partitioning the keys by table
 * region first was tried: slower.) */
static void hash_fill(galley_level *L) {
  int64_t ring[HASH_AHEAD], k = 0, m = L->nset;
  for (int64_t p = 0; p < L->npar; p++)
    for (int64_t t = L->pos[p]; t < L->pos[p + 1]; t++, k++) {
      int64_t key = p * L->dim + L->crd[t];
      galley_pos h = galley_rt_hash_start(key, L->hcap);
      if (L->key32) {
        __builtin_prefetch(&L->key32[h], 1);
        __builtin_prefetch(&L->slot32[h], 1);
      } else {
        __builtin_prefetch(&L->key[h], 1);
        __builtin_prefetch(&L->slot[h], 1);
      }
      if (k >= HASH_AHEAD)
        hash_insert(L, ring[k % HASH_AHEAD], k - HASH_AHEAD);
      ring[k % HASH_AHEAD] = key;
    }
  for (int64_t j = m > HASH_AHEAD ? m - HASH_AHEAD : 0; j < m; j++)
    hash_insert(L, ring[j % HASH_AHEAD], j);
}

/* Allocate hash level L's table and qos for m nodes (npar, dim set), of
 * the width the finished level will have: 32-bit when it fits
 * (rt_level_fits32), so a 32-bit table is never first built 64-bit.
 * The frozen view's pos and crd are written 64-bit by the builder and
 * narrowed in place by hash_finish. */
static galley_status alloc_hash_table(galley_level *L, int64_t m) {
  L->nset = m;
  L->hcap = 2;
  while (L->hcap < 2 * m)
    L->hcap *= 2;
  if (rt_level_fits32(L)) {
    L->key32 = rt_malloc_array(L->hcap, sizeof *L->key32);
    L->slot32 = rt_malloc_array(L->hcap, sizeof *L->slot32);
    L->qos32 = rt_malloc_array(m, sizeof *L->qos32);
    return L->key32 && L->slot32 && L->qos32 ? GALLEY_OK : GALLEY_ENOMEM;
  }
  L->key = rt_malloc_array(L->hcap, sizeof *L->key);
  L->slot = rt_malloc_array(L->hcap, sizeof *L->slot);
  L->qos = rt_malloc_array(m, sizeof *L->qos);
  return L->key && L->slot && L->qos ? GALLEY_OK : GALLEY_ENOMEM;
}

static void free_hash_table(galley_level *L) {
  free(L->qos);
  free(L->key);
  free(L->slot);
  free(L->qos32);
  free(L->key32);
  free(L->slot32);
  L->qos = NULL, L->key = NULL, L->slot = NULL;
  L->qos32 = NULL, L->key32 = NULL, L->slot32 = NULL;
}

/* n 64-bit values of a as 32-bit ones in the same block (they fit),
 * shrunk; never fails.  Value k moves from bytes 8k.. to 4k.., which no
 * later value occupies, so one forward pass suffices (through memcpy:
 * the block changes type). */
static int32_t *narrow_in_place(int64_t *a, int64_t n) {
  unsigned char *b = (unsigned char *)a;
  for (int64_t k = 0; k < n; k++) {
    int64_t v;
    memcpy(&v, b + 8 * k, sizeof v);
    int32_t w = (int32_t)v;
    memcpy(b + 4 * k, &w, sizeof w);
  }
  void *s = realloc(a, (size_t)(n > 0 ? n : 1) * sizeof(int32_t));
  return s ? s : (void *)a;
}

/* Freeze a built hash level: children in insertion (= sorted) order, so
 * qos[t] = t; the table over pos/crd; then, for a 32-bit table, pos and
 * crd narrowed in place, so the whole level is 32-bit (idx32). */
static void hash_finish(galley_level *L) {
  if (L->key32) {
    for (int64_t k = 0; k < L->nset; k++)
      L->qos32[k] = (int32_t)k;
    memset(L->key32, 0xff, (size_t)L->hcap * sizeof *L->key32); /* -1 */
  } else {
    for (int64_t k = 0; k < L->nset; k++)
      L->qos[k] = k;
    memset(L->key, 0xff, (size_t)L->hcap * sizeof *L->key); /* all -1 */
  }
  hash_fill(L);
  if (!L->key32)
    return;
  L->pos32 = narrow_in_place(L->pos, L->npar + 1);
  L->crd32 = narrow_in_place(L->crd, L->nset);
  L->pos = NULL;
  L->crd = NULL;
  L->idx32 = 1;
}

/* Allocate level l (kind, mode, dim, npar set) for m nodes. */
static galley_status alloc_level(galley_level *L, int64_t m) {
  switch (L->kind) {
  case GALLEY_RT_DENSE:
    L->nchild = L->nset = L->npar * L->dim;
    return GALLEY_OK;
  case GALLEY_RT_HASH: /* a list, and a table over its nodes */
  case GALLEY_RT_LIST:
    if (L->kind == GALLEY_RT_HASH && alloc_hash_table(L, m) != GALLEY_OK)
      return GALLEY_ENOMEM;
    L->pos = rt_calloc_array(L->npar + 1, sizeof *L->pos);
    L->crd = rt_malloc_array(m, sizeof *L->crd);
    L->nchild = L->nset = m;
    return L->pos && L->crd ? GALLEY_OK : GALLEY_ENOMEM;
  default:
    L->tbl = rt_calloc_array(L->npar * L->dim, sizeof *L->tbl);
    L->pos = rt_calloc_array(L->npar + 1, sizeof *L->pos);
    L->crd = rt_malloc_array(m, sizeof *L->crd);
    L->nchild = L->npar * L->dim;
    L->nset = m;
    return L->tbl && L->pos && L->crd ? GALLEY_OK : GALLEY_ENOMEM;
  }
}

galley_status rt_builder_init(rt_builder *b, int order, const int64_t *dims,
                              const galley_format *fmt, double fill,
                              const int64_t *opens, galley_error *err) {
  galley_status st = GALLEY_OK;
  memset(b, 0, sizeof *b);
  b->order = order;
  galley_tensor *t = b->t = calloc(1, sizeof *t);
  if (!t)
    return nomem(err);
  t->order = order;
  t->fill = fill;
  for (int k = 0; k < order; k++)
    t->dims[k] = dims[k];
  if ((st = precheck_positions(t, fmt, err)) != GALLEY_OK)
    goto fail;
  int64_t npar = 1;
  int all_sparse = order > 0; /* every value slot will be written */
  for (int l = 0; l < order; l++) {
    galley_level *L = &t->lvl[l];
    L->kind = (int)fmt->kinds[l];
    L->mode = fmt->mode_order[l];
    L->dim = t->dims[L->mode];
    L->npar = npar;
    if ((st = check_positions(L, l, err)) != GALLEY_OK)
      goto fail;
    if (alloc_level(L, opens ? opens[l] : 0) != GALLEY_OK)
      goto nomem;
    all_sparse &= L->kind == GALLEY_RT_LIST || L->kind == GALLEY_RT_HASH;
    npar = L->nchild;
  }
  t->nval = npar;
  t->val = rt_malloc_array(npar, sizeof *t->val);
  if (!t->val)
    goto nomem;
  if (!all_sparse)
    for (int64_t q = 0; q < npar; q++)
      t->val[q] = fill;
  return GALLEY_OK;
nomem:
  st = nomem(err);
fail:
  rt_builder_abort(b);
  return st;
}

void rt_builder_finish(rt_builder *b, galley_tensor **out) {
  galley_tensor *t = b->t;
  for (int l = 0; l < t->order; l++) {
    galley_level *L = &t->lvl[l];
    if (L->kind == GALLEY_RT_DENSE)
      continue;
    if (!(b->ready >> l & 1))
      prefix_sum(L->pos, L->npar);
    if (L->kind == GALLEY_RT_HASH)
      hash_finish(L);
    /* 32-bit indices where they fit: less memory traffic for kernels.
     * Out of memory here leaves the level 64-bit, which is as valid. */
    if (rt_level_fits32(L))
      (void)rt_level_set_width_par(L, 1, b->par);
  }
  *out = t;
  b->t = NULL;
}

galley_status rt_builder_resize_last(rt_builder *b, int64_t m,
                                     galley_error *err) {
  galley_tensor *t = b->t;
  galley_level *L = &t->lvl[t->order - 1];
  free(L->crd);
  L->crd = rt_malloc_array(m, sizeof *L->crd);
  L->nset = m;
  if (L->kind == GALLEY_RT_HASH) {
    free_hash_table(L);
    if (alloc_hash_table(L, m) != GALLEY_OK)
      return nomem(err);
  }
  if (L->kind != GALLEY_RT_BYTEMAP) {
    L->nchild = m;
    free(t->val);
    t->nval = m;
    t->val = rt_malloc_array(m, sizeof *t->val);
    if (!t->val)
      return nomem(err);
  }
  return L->crd ? GALLEY_OK : nomem(err);
}

void rt_builder_abort(rt_builder *b) { b->t = galley_tensor_free(b->t); }

/* opens[l] = entries whose depth (first level differing from the
 * previous entry) is at most l, from the depth histogram hist[0..order]. */
static void opens_from_hist(int order, const int64_t *hist, int64_t *opens) {
  int64_t sum = 0;
  for (int l = 0; l < order; l++)
    opens[l] = sum += hist[l];
}

galley_status rt_build_rows(int order, const int64_t *dims,
                            const galley_format *fmt, double fill, int64_t n,
                            int width, const int64_t *rows, const int *colmap,
                            const double *vals, galley_tensor **out,
                            galley_error *err) {
  int64_t hist[GALLEY_MAX_ORDER + 1] = {0}, opens[GALLEY_MAX_ORDER];
  int direct = width == order;
  for (int l = 0; l < order; l++)
    direct &= colmap[l] == l;
  *out = NULL;
  for (int64_t e = 1; e < n && order > 0; e++) {
    const int64_t *a = rows + (e - 1) * width, *r = rows + e * width;
    int d = 0;
    while (d < order && a[colmap[d]] == r[colmap[d]])
      d++;
    hist[d]++;
  }
  hist[0] += n > 0;
  opens_from_hist(order, hist, opens);
  rt_builder b;
  galley_status st = rt_builder_init(&b, order, dims, fmt, fill, opens, err);
  if (st != GALLEY_OK)
    return st;
  int64_t cc[GALLEY_MAX_ORDER] = {0};
  for (int64_t e = 0; e < n; e++) {
    const int64_t *r = order ? rows + e * width : cc;
    int d = 0;
    if (e > 0) {
      const int64_t *a = r - width;
      while (d < order && a[colmap[d]] == r[colmap[d]])
        d++;
    }
    if (!direct)
      for (int l = d; l < order; l++)
        cc[l] = r[colmap[l]];
    rt_builder_push(&b, d, direct ? r : cc, vals ? vals[e] : 1.0);
  }
  rt_builder_finish(&b, out);
  return GALLEY_OK;
}

galley_status rt_build_sorted(int order, const int64_t *dims,
                              const galley_format *fmt, double fill,
                              int64_t n, const int64_t *rows,
                              const double *vals, galley_tensor **out,
                              galley_error *err) {
  int ident[GALLEY_MAX_ORDER] = {0, 1, 2, 3, 4, 5, 6, 7};
  return rt_build_rows(order, dims, fmt, fill, n, order, rows, ident, vals,
                       out, err);
}

/* Build from n packed keys (sorted; columns in level order, cdims[l]
 * bounding level l, the last level in the low bits) and their values'
 * bits.  Equal keys are duplicates and are summed. */
static galley_status build_keys(int order, const int64_t *dims,
                                const galley_format *fmt, double fill,
                                const int64_t *cdims, int64_t n,
                                const uint64_t *key, const int64_t *pay,
                                galley_tensor **out, galley_error *err) {
  int sh[GALLEY_MAX_ORDER], lvl_of_bit[64];
  uint64_t mask[GALLEY_MAX_ORDER];
  int64_t hist[GALLEY_MAX_ORDER + 1] = {0}, opens[GALLEY_MAX_ORDER];
  int s = 0;
  for (int l = order - 1; l >= 0; l--) {
    int bw = bit_length(cdims[l]);
    sh[l] = bw ? s : 0;
    mask[l] = bw == 64 ? ~(uint64_t)0 : bw ? ((uint64_t)1 << bw) - 1 : 0;
    for (int bit = s; bit < s + bw; bit++)
      lvl_of_bit[bit] = l;
    s += bw;
  }
  *out = NULL;
  for (int64_t j = 1; j < n; j++) {
    uint64_t x = key[j] ^ key[j - 1];
    hist[x ? lvl_of_bit[63 - __builtin_clzll(x)] : order]++;
  }
  hist[0] += n > 0;
  opens_from_hist(order, hist, opens);
  rt_builder b;
  galley_status st = rt_builder_init(&b, order, dims, fmt, fill, opens, err);
  if (st != GALLEY_OK)
    return st;
  int64_t cc[GALLEY_MAX_ORDER] = {0};
  for (int64_t j = 0; j < n; j++) {
    uint64_t k = key[j], x = j > 0 ? k ^ key[j - 1] : ~(uint64_t)0;
    int d = x ? (j > 0 ? lvl_of_bit[63 - __builtin_clzll(x)] : 0) : order;
    for (int l = d; l < order; l++)
      cc[l] = (int64_t)((k >> sh[l]) & mask[l]);
    double v;
    memcpy(&v, &pay[j], sizeof v);
    rt_builder_push(&b, d, cc, v);
  }
  rt_builder_finish(&b, out);
  return GALLEY_OK;
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

/* The argument checks of galley_tensor_from_coo; *fmt becomes the default
 * format when NULL (def is its storage). */
static galley_status check_input(int order, const int64_t *dims,
                                 int64_t nnz, const int64_t *coords,
                                 const galley_format **fmt,
                                 galley_format *def, galley_error *err) {
  galley_status st;
  if ((st = check_shape(order, dims, err)) != GALLEY_OK)
    return st;
  if (nnz < 0 || (nnz > 0 && order > 0 && !coords))
    return rt_error(err, GALLEY_EINVAL, "bad entry count %lld or no coords",
                    (long long)nnz);
  if (!*fmt) {
    *def = rt_format_for_entries(order, dims, nnz);
    *fmt = def;
  }
  if ((st = rt_format_check(*fmt, order, err)) != GALLEY_OK)
    return st;
  return check_coords(order, dims, nnz, coords, err);
}

/* Keys and value bits of the rows, sorted: on return *key and *pay point
 * at whichever of (key, pay) and (k2, p2) holds the result.  pay may
 * already hold the values' bits (vals == NULL then). */
static void sort_keys(int64_t n, const int64_t *rows, const double *vals,
                      int order, const int *colmap, const int64_t *cdims,
                      int bits, uint64_t **key, int64_t **pay, uint64_t **k2,
                      int64_t **p2, int64_t *cnt, int copy_vals) {
  int bw[GALLEY_MAX_ORDER];
  for (int l = 0; l < order; l++)
    bw[l] = bit_length(cdims[l]);
  uint64_t *kk = *key;
  for (int64_t j = 0; j < n; j++) {
    const int64_t *r = rows + j * order;
    uint64_t k = 0;
    for (int l = 0; l < order; l++)
      k = (bw[l] ? k << bw[l] : k) | (uint64_t)r[colmap[l]];
    kk[j] = k;
  }
  if (copy_vals) {
    if (vals)
      memcpy(*pay, vals, (size_t)n * sizeof *vals);
    else
      for (int64_t j = 0; j < n; j++) {
        double one = 1.0;
        memcpy(&(*pay)[j], &one, sizeof one);
      }
  }
  int low = sorted_suffix_bits(n, order, rows, order, colmap, cdims);
  radix_sort(key, pay, k2, p2, n, low, bits - low, cnt);
}

/* Whether rows are sorted in fmt's level order: then no sort at all. */
static int input_sorted(int order, int64_t nnz, const int64_t *coords,
                        const galley_format *fmt) {
  return order == 0 || rows_sorted(nnz, order, coords, order, fmt->mode_order);
}

/* The general route for keys wider than 64 bits: sort the rows (summing
 * duplicates) and build from the copy. */
static galley_status build_wide(int order, const int64_t *dims, int64_t nnz,
                                const int64_t *coords, const double *vals,
                                double fill, const galley_format *fmt,
                                const int64_t *cdims, galley_tensor **out,
                                galley_error *err) {
  int64_t n = 0, *rows = NULL;
  double *v = NULL;
  galley_status st = rt_sort_rows(nnz, order, coords, vals, order,
                                  fmt->mode_order, cdims, &n, &rows, &v, err);
  if (st == GALLEY_OK)
    st = rt_build_sorted(order, dims, fmt, fill, n, rows, v, out, err);
  free(rows);
  free(v);
  return st;
}

static void level_dims(int order, const int64_t *dims,
                       const galley_format *fmt, int64_t *cdims) {
  for (int l = 0; l < order; l++)
    cdims[l] = dims[fmt->mode_order[l]];
}

/* Sort logical rows into fmt's level order and build; the input is left
 * untouched (the sort works on packed copies). */
static galley_status build_logical(int order, const int64_t *dims,
                                   int64_t nnz, const int64_t *coords,
                                   const double *vals, double fill,
                                   const galley_format *fmt,
                                   galley_tensor **out, galley_error *err) {
  int64_t cdims[GALLEY_MAX_ORDER];
  level_dims(order, dims, fmt, cdims);
  if (input_sorted(order, nnz, coords, fmt))
    return rt_build_rows(order, dims, fmt, fill, nnz, order, coords,
                         fmt->mode_order, vals, out, err);
  int bits = packed_bits(order, cdims);
  if (bits < 0)
    return build_wide(order, dims, nnz, coords, vals, fill, fmt, cdims, out,
                      err);
  galley_status st = GALLEY_OK;
  uint64_t *key = rt_malloc_array(nnz, sizeof *key);
  int64_t *pay = rt_malloc_array(nnz, sizeof *pay);
  uint64_t *scratch = rt_malloc_array(2 * nnz, sizeof *scratch);
  int64_t *cnt = rt_malloc_array(6 << RADIX_MAX_BITS, sizeof *cnt);
  *out = NULL;
  if (!key || !pay || !scratch || !cnt) {
    st = nomem(err);
  } else {
    uint64_t *k = key, *k2 = scratch;
    int64_t *p = pay, *p2 = (int64_t *)scratch + nnz;
    sort_keys(nnz, coords, vals, order, fmt->mode_order, cdims, bits, &k, &p,
              &k2, &p2, cnt, 1);
    free(cnt);
    cnt = NULL;
    if (k == key) { /* the scratch pair is free before the build */
      free(scratch);
      scratch = NULL;
    } else {
      free(key);
      free(pay);
      key = NULL;
      pay = NULL;
    }
    st = build_keys(order, dims, fmt, fill, cdims, nnz, k, p, out, err);
  }
  free(key);
  free(pay);
  free(scratch);
  free(cnt);
  return st;
}

/* Like build_logical, but consumes the entries: the coordinate array
 * becomes the radix sort's scratch and both arrays are freed (and set to
 * NULL) as soon as they are no longer needed, so that the peak is the list
 * plus one key per entry, or the keys and values plus the tensor. */
static galley_status build_consume(rt_coo *coo, const galley_format *fmt,
                                   galley_tensor **out, galley_error *err) {
  int order = coo->order;
  int64_t n = coo->nnz, cdims[GALLEY_MAX_ORDER];
  level_dims(order, coo->dims, fmt, cdims);
  int bits = packed_bits(order, cdims);
  if (input_sorted(order, n, coo->crd, fmt) || bits < 0 || !coo->val ||
      order == 0)
    return build_logical(order, coo->dims, n, coo->crd, coo->val, coo->fill,
                         fmt, out, err);
  *out = NULL;
  uint64_t *key = rt_malloc_array(n, sizeof *key);
  int64_t *extra = order < 2 ? rt_malloc_array(n, sizeof *extra) : NULL;
  int64_t *cnt = rt_malloc_array(6 << RADIX_MAX_BITS, sizeof *cnt);
  if (!key || (order < 2 && !extra) || !cnt) {
    free(key);
    free(extra);
    free(cnt);
    return nomem(err);
  }
  uint64_t *k = key, *k2 = (uint64_t *)coo->crd;
  int64_t *p = (int64_t *)coo->val, *p2 = order < 2 ? extra : coo->crd + n;
  sort_keys(n, coo->crd, NULL, order, fmt->mode_order, cdims, bits, &k, &p,
            &k2, &p2, cnt, 0);
  free(cnt);
  if (k == key) { /* sorted into (key, val): the coordinates are free */
    free(coo->crd);
    free(extra);
    coo->crd = NULL;
    extra = NULL;
  } else { /* sorted into the coordinate array (and extra) */
    free(key);
    free(coo->val);
    key = NULL;
    coo->val = NULL;
  }
  galley_status st = build_keys(order, coo->dims, fmt, coo->fill, cdims, n, k,
                                p, out, err);
  free(key);
  free(extra);
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
  if ((st = check_input(order, dims, nnz, coords, &fmt, &def, err)) !=
      GALLEY_OK)
    return st;
  return build_logical(order, dims, nnz, coords, vals, fill, fmt, out, err);
}

galley_status rt_tensor_from_coo(rt_coo *coo, const galley_format *fmt,
                                 galley_tensor **out, galley_error *err) {
  galley_format def;
  galley_status st;
  *out = NULL;
  if ((st = check_input(coo->order, coo->dims, coo->nnz, coo->crd, &fmt, &def,
                        err)) != GALLEY_OK)
    return st;
  return build_consume(coo, fmt, out, err);
}

/* The logical coordinates and values of the non-fill entries of a dense
 * row-major array of count values, as a coordinate list. */
static galley_status dense_entries(int order, const int64_t *dims,
                                   const double *values, int64_t count,
                                   double fill, rt_coo *coo) {
  int64_t n = 0, c[GALLEY_MAX_ORDER] = {0};
  for (int64_t j = 0; j < count; j++)
    n += !rt_is_fill(values[j], fill);
  rt_coo_init(coo, order);
  coo->fill = fill;
  if (order > 0) /* a scalar passes dims = NULL */
    memcpy(coo->dims, dims, (size_t)order * sizeof *dims);
  coo->crd = rt_malloc_array(n * (int64_t)order, sizeof *coo->crd);
  coo->val = rt_malloc_array(n, sizeof *coo->val);
  if (!coo->crd || !coo->val)
    return GALLEY_ENOMEM;
  coo->cap = n;
  for (int64_t j = 0; j < count; j++) {
    if (!rt_is_fill(values[j], fill)) {
      if (order > 0)
        memcpy(coo->crd + coo->nnz * order, c, (size_t)order * sizeof *c);
      coo->val[coo->nnz++] = values[j];
    }
    for (int k = order - 1; k >= 0 && ++c[k] == dims[k]; k--)
      c[k] = 0; /* odometer over the row-major index */
  }
  return GALLEY_OK;
}

galley_status galley_tensor_from_dense(int order, const int64_t *dims,
                                       const double *values, double fill,
                                       const galley_format *fmt,
                                       galley_tensor **out, galley_error *err) {
  galley_format def;
  galley_status st;
  int64_t count = 1;
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
  rt_coo coo;
  if (dense_entries(order, dims, values, count, fill, &coo))
    st = nomem(err);
  else
    st = build_consume(&coo, fmt, out, err);
  rt_coo_free(&coo);
  return st;
}
