/*
 * galley_rt_blocks.h -- the cut of a kernel's outermost loop into blocks
 * of about equal work (src/exec/blocks.h says what work is and why the
 * cut never depends on the thread count).  libc only.  One source for
 * the library's executor (src/exec/blocks.c, which picks the accesses
 * from the physical plan) and the ahead-of-time runtime
 * (runtime/aot_runtime.c, whose embedded text carries this file's text
 * in its place: tools/embed_source.awk).
 *
 * The work before coordinate c, W(c), is monotone in c; block b ends at
 * the first coordinate where W reaches b/n of the total, found by binary
 * search, so the split costs O(n log dim) (plus one pass over the walked
 * matrix's entries when its entries are weighted by multiplies).
 */
#ifndef GALLEY_RT_BLOCKS_H
#define GALLEY_RT_BLOCKS_H

#include <stdlib.h>

#include "galley_rt.h"

/* What the work function reads. */
typedef struct galley_rt_work {
  const struct galley_tensor *t; /* the walked access's tensor, or NULL:
                                    a unit per coordinate */
  const int64_t *prefix;         /* weighted work by level-0 position, or
                                    NULL */
} galley_rt_work;

/* The first position of level 0 of t whose coordinate is >= c. */
static int64_t galley_rt_first_position(const struct galley_tensor *t,
                                        int64_t c) {
  const galley_level *L = &t->lvl[0];
  if (L->kind == GALLEY_RT_DENSE)
    return c < L->dim ? c : L->dim;
  int64_t lo = galley_rt_pos(L, 0), hi = galley_rt_pos(L, 1);
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (galley_rt_crd(L, mid) < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The number of level-0 positions of t (the loop's iterations). */
static int64_t galley_rt_level0_positions(const struct galley_tensor *t) {
  const galley_level *L = &t->lvl[0];
  return L->kind == GALLEY_RT_DENSE ? L->dim : galley_rt_pos(L, 1);
}

/* Positions of the deepest level reachable through dense and list levels
 * that lie under level-0 positions before p0 (the entries of the first
 * p0 fibers). */
static int64_t galley_rt_entries_before(const struct galley_tensor *t,
                                        int64_t p0) {
  int64_t p = p0;
  for (int l = 1; l < t->order; l++) {
    const galley_level *L = &t->lvl[l];
    if (L->kind == GALLEY_RT_DENSE)
      p *= L->dim;
    else if (L->kind == GALLEY_RT_LIST)
      p = galley_rt_pos(L, p);
    else
      break; /* a hashed level: the entries above it measure well enough */
  }
  return p;
}

/* The weighted work of the matrix ta = A[i,j] (a list second level) times
 * tb = B[j,k] (a dense first level over a list): entry (i, j) weighs 1 +
 * the length of B's fiber j.  The work before each level-0 position of A,
 * in a new array of its positions + 1, or NULL when out of memory. */
static int64_t *galley_rt_multiply_prefix(const struct galley_tensor *ta,
                                          const struct galley_tensor *tb) {
  const galley_level *A1 = &ta->lvl[1], *B1 = &tb->lvl[1];
  int64_t rows = galley_rt_level0_positions(ta), bdim = tb->lvl[0].dim;
  int64_t *w = malloc((size_t)(rows + 1) * sizeof *w);
  if (!w)
    return NULL;
  w[0] = 0;
  for (int64_t p = 0; p < rows; p++) {
    int64_t sum = 1;
    for (int64_t e = galley_rt_pos(A1, p); e < galley_rt_pos(A1, p + 1);
         e++) {
      int64_t j = galley_rt_crd(A1, e);
      sum += 1;
      if (j >= 0 && j < bdim)
        sum += galley_rt_pos(B1, j + 1) - galley_rt_pos(B1, j);
    }
    w[p + 1] = w[p] + sum;
  }
  return w;
}

/* The work before coordinate c. */
static int64_t galley_rt_work_before(const galley_rt_work *w, int64_t c) {
  if (!w->t)
    return c;
  int64_t p = galley_rt_first_position(w->t, c);
  if (w->prefix)
    return w->prefix[p];
  return p + galley_rt_entries_before(w->t, p);
}

/* The first coordinate in [lo, hi] whose work before reaches target. */
static int64_t galley_rt_coordinate_at(const galley_rt_work *w, int64_t lo,
                                       int64_t hi, int64_t target) {
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (galley_rt_work_before(w, mid) < target)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* How many blocks [lo, hi) splits into: one per block_work units of its
 * work (at least 1), at most max_blocks and hi - lo.  *base: the work
 * before lo; *total: the work in [lo, hi). */
static int64_t galley_rt_blocks_count(const galley_rt_work *w, int64_t lo,
                                      int64_t hi, int64_t block_work,
                                      int64_t max_blocks, int64_t *base,
                                      int64_t *total) {
  *base = galley_rt_work_before(w, lo);
  *total = galley_rt_work_before(w, hi) - *base;
  int64_t n = *total / block_work + (*total % block_work != 0);
  if (n > max_blocks)
    n = max_blocks;
  if (n > hi - lo)
    n = hi - lo;
  return n;
}

/* Cut [lo, hi) into n blocks of about equal work (base and total as
 * galley_rt_blocks_count gave them): block b ends at the b-th n-quantile
 * of the work, empty blocks dropped.  cut[] (room for n + 1) receives
 * the m + 1 boundaries, cut[0] = lo and cut[m] = hi; returns m. */
static int64_t galley_rt_blocks_cut(const galley_rt_work *w, int64_t lo,
                                    int64_t hi, int64_t base, int64_t total,
                                    int64_t n, int64_t *cut) {
  int64_t m = 0;
  cut[0] = lo;
  for (int64_t b = 1; b < n; b++) {
    int64_t target =
        base + (int64_t)((double)total * (double)b / (double)n);
    int64_t c = galley_rt_coordinate_at(w, cut[m], hi, target);
    if (c > cut[m] && c < hi)
      cut[++m] = c;
  }
  cut[++m] = hi;
  return m;
}

#endif /* GALLEY_RT_BLOCKS_H */
