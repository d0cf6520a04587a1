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

/* Another mode order, every target level above the last one dense: the
 * target position of an entry's last-level parent is a row-major index p
 * of its other coordinates, so a counting sort on p lays out the last
 * level directly (cs_transpose).  src[l] is the source level of target
 * level l. */
static galley_status convert_scatter(const galley_tensor *s,
                                     const galley_format *fmt, int skip,
                                     const int *src, int64_t *dropped,
                                     galley_tensor **out, galley_error *err) {
  int order = s->order, last = order - 1;
  int64_t kst[GALLEY_MAX_ORDER] = {0}, opens[GALLEY_MAX_ORDER] = {0};
  const double *val = s->val, fill = s->fill;
  rt_builder b;
  galley_status st = rt_builder_init(&b, order, s->dims, fmt, fill, opens, err);
  if (st != GALLEY_OK)
    return st;
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
    /* CSR to CSC and back: one flat loop per pass, as in cs_transpose */
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
              : convert_scatter(src, fmt, skip, srcl, &dropped, out, err);
    if (st == GALLEY_OK && dropped)
      st = same ? convert_walk(src, fmt, 1, &dropped, out, err)
                : convert_scatter(src, fmt, 1, srcl, &dropped, out, err);
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
