/*
 * convert.c -- a tensor in another format and/or mode order.
 *
 * The source's storage order is sorted in its level order, so:
 *   - same mode order: the walk already is the target's sorted order; the
 *     target is laid out straight from it (a counting walk sizes the
 *     levels, a second walk fills them), with no sort and no copy;
 *   - another mode order, target dense above its last level (CSR to CSC
 *     and its higher-order kin): a counting transpose as in CSparse's
 *     cs_transpose -- a histogram of the target fibers in the last level's
 *     offsets, a prefix sum, and one scatter into the target arrays;
 *   - any other order: rows in the target order from a counting sort
 *     (iterate.c; a radix sort when the key range is huge), then laid out.
 * Entries equal to the fill are dropped on the way, so sparse target
 * levels never store them (a dense matrix converted to CSR keeps only its
 * nonzeros).
 */
#include <stdlib.h>

#include "rt_internal.h"

/* Same mode order: two walks of the source into the builder. */
static galley_status convert_walk(const galley_tensor *src,
                                  const galley_format *fmt, int skip,
                                  int64_t *dropped, galley_tensor **out,
                                  galley_error *err) {
  int order = src->order, last = order - 1, upper = 0;
  int64_t hist[GALLEY_MAX_ORDER + 1] = {0}, opens[GALLEY_MAX_ORDER] = {0};
  const double *val = src->val, fill = src->fill;
  rt_cursor c;
  for (int l = 0; l < last; l++)
    upper |= fmt->kinds[l] != GALLEY_DENSE;
  if (!upper && !skip) {
    opens[last] = galley_tensor_stored(src); /* one node per entry */
  } else if (upper || fmt->kinds[last] != GALLEY_DENSE) {
    /* count the nodes each level will hold */
#define COUNT(SKIP)                                                           \
  RT_FOR_EACH_STORED(src, c, i, q, {                                          \
    (void)i;                                                                  \
    if (SKIP && rt_is_fill(val[q], fill))                                     \
      continue;                                                               \
    hist[c.chg < last ? c.chg : last]++;                                      \
    c.chg = last;                                                             \
  })
    if (skip) {
      COUNT(1);
    } else {
      COUNT(0);
    }
#undef COUNT
    int64_t sum = 0;
    for (int l = 0; l < order; l++)
      opens[l] = sum += hist[l];
  }
  rt_builder b;
  galley_status st =
      rt_builder_init(&b, order, src->dims, fmt, fill, opens, err);
  if (st != GALLEY_OK)
    return st;
  int64_t drop = 0;
  RT_FOR_EACH_STORED(src, c, i, q, {
    double v = val[q];
    if (rt_is_fill(v, fill)) {
      drop++;
      continue;
    }
    c.crd[last] = i;
    rt_builder_push(&b, c.chg < last ? c.chg : last, c.crd, v);
    c.chg = last;
  });
  if (drop && !skip && (upper || fmt->kinds[last] != GALLEY_DENSE)) {
    /* the levels were sized for the fill values too */
    *dropped = drop;
    rt_builder_abort(&b);
    return GALLEY_OK;
  }
  rt_builder_finish(&b, out);
  return GALLEY_OK;
}

/* The transpose of a matrix whose rows are a dense level over a list
 * level S, into the builder's (dense, list or hash) levels: a histogram of
 * the columns in the target's fiber offsets, a prefix sum, and one
 * scatter, each a flat loop over S's coordinates (software prefetching
 * of the target slots was tried: no gain, even for random columns).
 * Returns the number of fill values met (the target is then incomplete),
 * or -1 when memory runs out (the builder is then aborted). */
/* The histogram and scatter of transpose_flat over S's arrays SP, SC of
 * either width. */
#define TRANSPOSE_COUNT(SP, SC)                                               \
  do {                                                                        \
    for (int64_t w = 0; w < nz; w++)                                          \
      pos[(SC)[w] + 1]++;                                                     \
  } while (0)
#define TRANSPOSE_SCATTER(SP, SC)                                             \
  do {                                                                        \
    for (int64_t r = 0; r < nrow; r++)                                        \
      for (int64_t w = (SP)[r], e = (SP)[r + 1]; w < e; w++) {                \
        double v = val[w];                                                    \
        if (rt_is_fill(v, fill)) {                                            \
          drop++;                                                             \
          continue;                                                           \
        }                                                                     \
        int64_t slot = pos[(SC)[w]]++;                                        \
        crd[slot] = r;                                                        \
        tv[slot] = v;                                                         \
      }                                                                       \
  } while (0)

static int64_t transpose_flat(const galley_level *S, const double *val,
                              double fill, rt_builder *b, galley_error *err) {
  galley_tensor *t = b->t;
  galley_level *L = &t->lvl[1];
  galley_pos *pos = L->pos;
  int64_t nrow = S->npar, nz = galley_rt_pos(S, nrow), npar = L->npar;
  int64_t drop = 0;
  if (S->idx32)
    TRANSPOSE_COUNT(S->pos32, S->crd32);
  else
    TRANSPOSE_COUNT(S->pos, S->crd);
  for (int64_t p = 0; p < npar; p++)
    pos[p + 1] += pos[p];
  if (rt_builder_resize_last(b, nz, err) != GALLEY_OK) {
    rt_builder_abort(b);
    return -1;
  }
  galley_crd *crd = L->crd;
  double *tv = t->val;
  if (S->idx32)
    TRANSPOSE_SCATTER(S->pos32, S->crd32);
  else
    TRANSPOSE_SCATTER(S->pos, S->crd);
  for (int64_t p = npar; p > 0; p--)
    pos[p] = pos[p - 1];
  pos[0] = 0;
  b->ready |= 2u;
  return drop;
}
#undef TRANSPOSE_COUNT
#undef TRANSPOSE_SCATTER

/* The same transpose on threads, for large matrices: the rows are cut
 * into R blocks of about equal entries (R from the entry count, never
 * from the thread count), each counts its columns in a histogram of its
 * own, a prefix over (column, block) gives each block its first slot in
 * every target fiber, and each block scatters its rows there.  Blocks
 * hold increasing rows, so every fiber lists its rows in increasing
 * order: the result is the serial one exactly.  Parts of about 2^17
 * entries keep the histograms (parts x columns, at most nnz) small next
 * to the matrix.  -2 when there are fewer than two parts or the
 * histograms do not fit (the caller then transposes serially). */
#define TRANSPOSE_PART_ENTRIES ((int64_t)1 << 17)
#define TRANSPOSE_MAX_PARTS 32
#define TRANSPOSE_COL_CHUNK ((int64_t)1 << 12)

typedef struct ParTranspose {
  const galley_level *S;
  const double *val;
  double fill;
  int64_t nparts, ncol;
  int64_t rowcut[TRANSPOSE_MAX_PARTS + 1];
  int64_t *cnt;               /* nparts x ncol: counts, then slots */
  galley_pos *pos;            /* the target's fiber offsets */
  galley_crd *crd;
  double *tv;
  int64_t drop[TRANSPOSE_MAX_PARTS];
} ParTranspose;

#define PT_COUNT(SP, SC)                                                      \
  for (int64_t w = (SP)[x->rowcut[b]]; w < (SP)[x->rowcut[b + 1]]; w++)       \
    h[(SC)[w]]++
#define PT_SCATTER(SP, SC)                                                    \
  for (int64_t r = x->rowcut[b]; r < x->rowcut[b + 1]; r++)                   \
    for (int64_t w = (SP)[r], e = (SP)[r + 1]; w < e; w++) {                  \
      double v = x->val[w];                                                   \
      if (rt_is_fill(v, x->fill)) {                                           \
        drop++;                                                               \
        continue;                                                             \
      }                                                                       \
      int64_t slot = h[(SC)[w]]++;                                            \
      x->crd[slot] = r;                                                       \
      x->tv[slot] = v;                                                        \
    }

static void pt_count(void *ctx, int64_t b, int worker) {
  ParTranspose *x = ctx;
  int64_t *h = x->cnt + b * x->ncol;
  (void)worker;
  if (x->S->idx32) {
    PT_COUNT(x->S->pos32, x->S->crd32);
  } else {
    PT_COUNT(x->S->pos, x->S->crd);
  }
}

/* Columns of chunk c: each part's count becomes its offset within the
 * column, and the column's total goes to pos[col + 1]. */
static void pt_column_offsets(void *ctx, int64_t c, int worker) {
  ParTranspose *x = ctx;
  int64_t lo = c * TRANSPOSE_COL_CHUNK, hi = lo + TRANSPOSE_COL_CHUNK;
  (void)worker;
  if (hi > x->ncol)
    hi = x->ncol;
  for (int64_t col = lo; col < hi; col++) {
    int64_t sum = 0;
    for (int64_t b = 0; b < x->nparts; b++) {
      int64_t k = x->cnt[b * x->ncol + col];
      x->cnt[b * x->ncol + col] = sum;
      sum += k;
    }
    x->pos[col + 1] = sum;
  }
}

/* Columns of chunk c: the parts' offsets shifted to the fiber's start. */
static void pt_column_starts(void *ctx, int64_t c, int worker) {
  ParTranspose *x = ctx;
  int64_t lo = c * TRANSPOSE_COL_CHUNK, hi = lo + TRANSPOSE_COL_CHUNK;
  (void)worker;
  if (hi > x->ncol)
    hi = x->ncol;
  for (int64_t b = 0; b < x->nparts; b++)
    for (int64_t col = lo; col < hi; col++)
      x->cnt[b * x->ncol + col] += x->pos[col];
}

static void pt_scatter(void *ctx, int64_t b, int worker) {
  ParTranspose *x = ctx;
  int64_t *h = x->cnt + b * x->ncol, drop = 0;
  (void)worker;
  if (x->S->idx32) {
    PT_SCATTER(x->S->pos32, x->S->crd32);
  } else {
    PT_SCATTER(x->S->pos, x->S->crd);
  }
  x->drop[b] = drop;
}
#undef PT_COUNT
#undef PT_SCATTER

static int64_t transpose_flat_par(const galley_level *S, const double *val,
                                  double fill, rt_builder *bl,
                                  const rt_par *par, galley_error *err) {
  galley_level *L = &bl->t->lvl[1];
  int64_t nrow = S->npar, nz = galley_rt_pos(S, nrow), ncol = L->npar;
  int64_t nparts = nz / TRANSPOSE_PART_ENTRIES;
  if (nparts > TRANSPOSE_MAX_PARTS)
    nparts = TRANSPOSE_MAX_PARTS;
  if (nparts > nrow)
    nparts = nrow;
  while (nparts > 1 && nparts * ncol > nz) /* histograms within O(nnz) */
    nparts /= 2;
  if (nparts < 2)
    return -2;
  ParTranspose *x = calloc(1, sizeof *x);
  int64_t *cnt = x ? rt_calloc_array(nparts * ncol, sizeof *cnt) : NULL;
  if (!cnt) {
    free(x);
    return -2;
  }
  x->S = S;
  x->val = val;
  x->fill = fill;
  x->nparts = nparts;
  x->ncol = ncol;
  x->cnt = cnt;
  x->pos = L->pos;
  /* part b starts at the first row holding entry b * nz / nparts */
  x->rowcut[0] = 0;
  for (int64_t b = 1; b < nparts; b++) {
    int64_t target = (int64_t)((double)nz * (double)b / (double)nparts);
    int64_t lo = x->rowcut[b - 1], hi = nrow;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (galley_rt_pos(S, mid) < target)
        lo = mid + 1;
      else
        hi = mid;
    }
    x->rowcut[b] = lo;
  }
  x->rowcut[nparts] = nrow;
  int64_t chunks = (ncol + TRANSPOSE_COL_CHUNK - 1) / TRANSPOSE_COL_CHUNK;
  rt_par_run(par, nparts, pt_count, x);
  rt_par_run(par, chunks, pt_column_offsets, x);
  x->pos[0] = 0;
  for (int64_t p = 0; p < ncol; p++)
    x->pos[p + 1] += x->pos[p];
  rt_par_run(par, chunks, pt_column_starts, x);
  int64_t drop = 0;
  if (rt_builder_resize_last(bl, nz, err) != GALLEY_OK) {
    rt_builder_abort(bl);
    drop = -1;
  } else {
    x->crd = L->crd;
    x->tv = bl->t->val;
    rt_par_run(par, nparts, pt_scatter, x);
    for (int64_t b = 0; b < nparts; b++)
      drop += x->drop[b];
    bl->ready |= 2u;
  }
  free(cnt);
  free(x);
  return drop;
}

/* Another mode order, every target level above the last one dense: the
 * target position of an entry's last-level parent is a row-major index p
 * of its other coordinates, so a counting sort on p lays out the last
 * level directly (cs_transpose).  src[l] is the source level of target
 * level l. */
static galley_status convert_scatter(const galley_tensor *s,
                                     const galley_format *fmt, int skip,
                                     const int *src, const rt_par *par,
                                     int64_t *dropped, galley_tensor **out,
                                     galley_error *err) {
  int order = s->order, last = order - 1;
  int64_t kst[GALLEY_MAX_ORDER] = {0}, opens[GALLEY_MAX_ORDER] = {0};
  const double *val = s->val, fill = s->fill;
  rt_builder b;
  galley_status st = rt_builder_init(&b, order, s->dims, fmt, fill, opens, err);
  if (st != GALLEY_OK)
    return st;
  b.par = par;
  galley_tensor *t = b.t;
  galley_level *L = &t->lvl[last];
  /* key weights: p = sum over source levels of crd * kst */
  int64_t stride = 1; /* below 2^62: the builder checked the levels */
  for (int l = last - 1; l >= 0; l--) {
    kst[src[l]] = stride;
    stride *= t->lvl[l].dim;
  }
  int64_t ki = kst[last], dim = L->dim;
  int lsrc = src[last], leaf_last = lsrc == last;
  rt_cursor c;
  /* FOR_EACH_KEYED runs its body for every entry to keep (SKIP: not the
   * fill values; a constant, so that each loop is tight), with p its
   * target fiber and x its last-level coordinate; the part of p (and x)
   * fixed by the source's upper levels is computed once per fiber. */
#define FOR_EACH_KEYED(SKIP, ...)                                             \
  for (rt_cursor_init(&c, s, last);;) {                                       \
    galley_pos lp_ = rt_cursor_next(&c);                                      \
    if (lp_ < 0)                                                              \
      break;                                                                  \
    int64_t base = 0, xf = c.crd[lsrc < last ? lsrc : 0];                     \
    for (int sl = 0; sl < last; sl++)                                         \
      base += c.crd[sl] * kst[sl];                                            \
    RT_FIBER_LOOP(&s->lvl[last], lp_, i, q, {                                 \
      double v = val[q];                                                      \
      if (SKIP && rt_is_fill(v, fill)) {                                      \
        drop++;                                                               \
        continue;                                                             \
      }                                                                       \
      int64_t p = base + i * ki, x = leaf_last ? i : xf;                      \
      __VA_ARGS__                                                             \
    });                                                                       \
  }
  double *tv = t->val;
  int64_t drop = 0;
  if (L->kind == GALLEY_RT_DENSE) { /* all dense: any order will do */
    FOR_EACH_KEYED(1, tv[p * dim + x] = v;)
    rt_builder_finish(&b, out);
    return GALLEY_OK;
  }
  galley_pos *pos = L->pos; /* the histogram: fiber p counts at pos[p+1] */
  const galley_level *S1 = &s->lvl[last];
  if (order == 2 && s->lvl[0].kind == GALLEY_RT_DENSE &&
      S1->kind == GALLEY_RT_LIST && L->kind != GALLEY_RT_BYTEMAP && !skip) {
    /* CSR to CSC and back: one flat loop per pass, as in cs_transpose
     * (large ones in parts on threads) */
    *dropped = par && galley_rt_pos(S1, S1->npar) >= RT_PAR_MIN
                   ? transpose_flat_par(S1, val, fill, &b, par, err)
                   : -2;
    if (*dropped == -2)
      *dropped = transpose_flat(S1, val, fill, &b, err);
    if (*dropped < 0)
      return GALLEY_ENOMEM;
    if (*dropped == 0)
      rt_builder_finish(&b, out);
    else
      rt_builder_abort(&b);
    return GALLEY_OK;
  }
  if (skip) {
    FOR_EACH_KEYED(1, (void)x; (void)v; pos[p + 1]++;)
  } else {
    FOR_EACH_KEYED(0, (void)x; (void)v; pos[p + 1]++;)
  }
  drop = 0;
  int64_t npar = L->npar;
  for (int64_t p = 0; p < npar; p++)
    pos[p + 1] += pos[p];
  if ((st = rt_builder_resize_last(&b, pos[npar], err)) != GALLEY_OK) {
    rt_builder_abort(&b);
    return st;
  }
  galley_crd *crd = L->crd;
  tv = t->val;
  if (L->kind == GALLEY_RT_BYTEMAP) {
    uint8_t *tbl = L->tbl;
    FOR_EACH_KEYED(1, crd[pos[p]++] = x; tbl[p * dim + x] = 1;
                   tv[p * dim + x] = v;)
  } else {
    FOR_EACH_KEYED(1, int64_t slot = pos[p]++; crd[slot] = x; tv[slot] = v;)
  }
#undef FOR_EACH_KEYED
  if (drop && !skip) { /* the histogram counted fill values: holes */
    *dropped = drop;
    rt_builder_abort(&b);
    return GALLEY_OK;
  }
  /* pos[p] now ends fiber p: shift back to fiber starts */
  for (int64_t p = npar; p > 0; p--)
    pos[p] = pos[p - 1];
  pos[0] = 0;
  b.ready |= 1u << last;
  rt_builder_finish(&b, out);
  return GALLEY_OK;
}

galley_status galley_tensor_convert(const galley_tensor *src,
                                    const galley_format *fmt,
                                    galley_tensor **out, galley_error *err) {
  return rt_tensor_convert_par(src, fmt, NULL, out, err);
}

galley_status rt_tensor_convert_par(const galley_tensor *src,
                                    const galley_format *fmt,
                                    const rt_par *par, galley_tensor **out,
                                    galley_error *err) {
  int order = src->order, srcl[GALLEY_MAX_ORDER], level_of[GALLEY_MAX_ORDER];
  int same = 1, dense_top = order >= 2;
  galley_format def;
  *out = NULL;
  if (!fmt) {
    def = galley_format_default(order);
    fmt = &def;
  }
  galley_status st = rt_format_check(fmt, order, err);
  if (st != GALLEY_OK)
    return st;
  for (int l = 0; l < order; l++)
    level_of[src->lvl[l].mode] = l;
  for (int l = 0; l < order; l++) {
    srcl[l] = level_of[fmt->mode_order[l]]; /* source level of level l */
    same &= srcl[l] == l;
    if (l < order - 1)
      dense_top &= fmt->kinds[l] == GALLEY_DENSE;
  }
  /* Fill values are dropped.  Where they are rare (a sparse last level),
   * the counting passes assume there are none and the writing pass checks;
   * meeting one there means converting again with counting passes that
   * skip them too.  Otherwise look for them first. */
  int skip = !rt_tensor_fill_rare(src) && rt_tensor_has_fill_value(src);
  int64_t dropped = 0;
  if (order == 0) {
    rt_builder b;
    if ((st = rt_builder_init(&b, 0, src->dims, fmt, src->fill, NULL, err)) !=
        GALLEY_OK)
      return st;
    if (!(skip && rt_is_fill(src->val[0], src->fill)))
      b.t->val[0] = src->val[0];
    rt_builder_finish(&b, out);
    return GALLEY_OK;
  }
  if (same || dense_top) {
    st = same ? convert_walk(src, fmt, skip, &dropped, out, err)
              : convert_scatter(src, fmt, skip, srcl, par, &dropped, out,
                                err);
    if (st == GALLEY_OK && dropped)
      st = same ? convert_walk(src, fmt, 1, &dropped, out, err)
                : convert_scatter(src, fmt, 1, srcl, par, &dropped, out,
                                  err);
    return st;
  }
  int64_t n = 0, *rows = NULL;
  double *v = NULL;
  int ident[GALLEY_MAX_ORDER] = {0, 1, 2, 3, 4, 5, 6, 7};
  st = rt_tensor_sorted_rows(src, fmt->mode_order, 1, &n, &rows, &v, err);
  if (st == GALLEY_OK)
    st = rt_build_rows(order, src->dims, fmt, src->fill, n, order, rows,
                       ident, v, out, err);
  free(rows);
  free(v);
  return st;
}
