/*
 * iterate.c -- reading tensors: lookup, ordered iteration and export.
 *
 * Everything here walks the fibertree with one iterative cursor (no
 * recursion, no per-entry callbacks inside the runtime), so export and
 * conversion of millions of entries stay a tight loop.  Reading never
 * mutates the tensor, so any number of threads may read one at once.
 */
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

/* Whether v counts as the fill: equal, or the same bits (NaN fills). */
static int is_fill(double v, double fill) {
  return v == fill || memcmp(&v, &fill, sizeof v) == 0;
}

/* ------------------------------------------------------------------ */
/* The cursor                                                          */
/* ------------------------------------------------------------------ */

/* A depth-first position in the fibertree.  At level l the cursor walks
 * t = at[l] .. end[l]-1 of fiber par[l]; crd[l] is the coordinate of the
 * entry last returned (in level order). */
typedef struct cursor {
  const galley_tensor *t;
  int depth;                        /* levels walked: order, or fewer */
  int lvl;                          /* level being walked */
  int done;                         /* depth 0: the root was returned */
  galley_pos par[GALLEY_MAX_ORDER]; /* fiber walked at each level */
  galley_pos at[GALLEY_MAX_ORDER];  /* next walk index */
  galley_pos end[GALLEY_MAX_ORDER]; /* end of the walk */
  galley_crd crd[GALLEY_MAX_ORDER]; /* current coordinates, level order */
} cursor;

static void cursor_open(cursor *c, int l, galley_pos p) {
  const galley_level *L = &c->t->lvl[l];
  c->lvl = l;
  c->par[l] = p;
  c->at[l] = galley_rt_walk_begin(L, p);
  c->end[l] = galley_rt_walk_end(L, p);
}

/* Walk the first `depth` levels: cursor_next then yields the positions
 * of level depth-1 (the root position 0 once when depth is 0). */
static void cursor_init(cursor *c, const galley_tensor *t, int depth) {
  c->t = t;
  c->depth = depth;
  c->done = 0;
  if (depth > 0)
    cursor_open(c, 0, 0);
}

/* Advance to the next stored position at level depth-1 (for depth =
 * order, a value position); -1 when the walk is over. */
static galley_pos cursor_next(cursor *c) {
  const galley_tensor *t = c->t;
  if (c->depth == 0)
    return c->done++ ? -1 : 0;
  int l = c->lvl;
  for (;;) {
    if (c->at[l] < c->end[l]) {
      const galley_level *L = &t->lvl[l];
      galley_pos w = c->at[l]++;
      galley_pos q = galley_rt_walk_child(L, c->par[l], w);
      c->crd[l] = galley_rt_walk_crd(L, w);
      if (l == c->depth - 1) {
        c->lvl = l;
        return q;
      }
      cursor_open(c, ++l, q);
    } else if (l == 0) {
      c->lvl = 0;
      return -1;
    } else {
      l--;
    }
  }
}

/* ------------------------------------------------------------------ */
/* Lookup and iteration                                                */
/* ------------------------------------------------------------------ */

double galley_tensor_get(const galley_tensor *t, const int64_t *coord,
                         int *present) {
  galley_pos p = 0;
  for (int l = 0; l < t->order && p >= 0; l++)
    p = galley_rt_locate(&t->lvl[l], p, coord[t->lvl[l].mode]);
  if (present)
    *present = p >= 0;
  return p >= 0 ? t->val[p] : t->fill;
}

int galley_tensor_foreach(const galley_tensor *t, galley_entry_fn fn,
                          void *ud) {
  cursor c;
  int64_t coord[GALLEY_MAX_ORDER] = {0};
  galley_pos q;
  cursor_init(&c, t, t->order);
  while ((q = cursor_next(&c)) >= 0) {
    for (int l = 0; l < t->order; l++)
      coord[t->lvl[l].mode] = c.crd[l];
    int r = fn(ud, coord, t->val[q]);
    if (r)
      return r;
  }
  return 0;
}

/* The fibers of the last level: a cursor over the levels above it, and
 * per fiber a tight loop (the hot path of export and conversion). */
#define FOR_EACH_LEAF(t, c, L, p, w, q)                                       \
  for (cursor_init(&c, t, t->order - 1); (p = cursor_next(&c)) >= 0;)         \
    for (w = galley_rt_walk_begin(L, p); w < galley_rt_walk_end(L, p); w++)   \
      if ((q = galley_rt_walk_child(L, p, w)) >= 0)

int64_t rt_tensor_count_nnz(const galley_tensor *t) {
  int64_t n = 0;
  if (t->order == 0)
    return !is_fill(t->val[0], t->fill);
  const galley_level *L = &t->lvl[t->order - 1];
  cursor c;
  galley_pos p, w, q;
  FOR_EACH_LEAF(t, c, L, p, w, q)
  n += !is_fill(t->val[q], t->fill);
  return n;
}

/* Copy the stored entries (optionally only the non-fill ones) into rows
 * of level-order coordinates and values; returns the count, at most m. */
static int64_t copy_rows(const galley_tensor *t, int skip_fill, int64_t m,
                         int64_t *rows, double *vals) {
  int order = t->order;
  int64_t k = 0;
  if (order == 0) {
    if (m > 0 && !(skip_fill && is_fill(t->val[0], t->fill)))
      vals[k++] = t->val[0];
    return k;
  }
  const galley_level *L = &t->lvl[order - 1];
  cursor c;
  galley_pos p, w, q;
  FOR_EACH_LEAF(t, c, L, p, w, q) {
    double v = t->val[q];
    if ((skip_fill && is_fill(v, t->fill)) || k == m)
      continue;
    int64_t *r = rows + k * order;
    memcpy(r, c.crd, (size_t)(order - 1) * sizeof *r);
    r[order - 1] = galley_rt_walk_crd(L, w);
    vals[k++] = v;
  }
  return k;
}

/* The stored entries as rows of level-order coordinates, in storage
 * order, optionally without those equal to the fill. */
galley_status rt_tensor_rows(const galley_tensor *t, int skip_fill,
                             int64_t *n, int64_t **rows, double **vals,
                             galley_error *err) {
  int64_t m = skip_fill ? rt_tensor_count_nnz(t) : galley_tensor_stored(t);
  *rows = rt_malloc_array(m * (int64_t)t->order, sizeof **rows);
  *vals = rt_malloc_array(m, sizeof **vals);
  if (!*rows || !*vals) {
    free(*rows);
    free(*vals);
    *rows = NULL;
    *vals = NULL;
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  *n = copy_rows(t, skip_fill, m, *rows, *vals);
  return GALLEY_OK;
}

/* ------------------------------------------------------------------ */
/* Export                                                              */
/* ------------------------------------------------------------------ */

galley_status galley_tensor_to_coo(const galley_tensor *t, unsigned flags,
                                   int64_t *nnz, int64_t **coords,
                                   double **vals, galley_error *err) {
  int64_t n = 0, *rows = NULL, cdims[GALLEY_MAX_ORDER];
  int colmap[GALLEY_MAX_ORDER], identity = 1;
  double *v = NULL;
  *nnz = 0;
  *coords = NULL;
  *vals = NULL;
  galley_status st = rt_tensor_rows(t, (flags & GALLEY_EXPORT_SKIP_FILL) != 0,
                                    &n, &rows, &v, err);
  if (st != GALLEY_OK)
    return st;
  for (int l = 0; l < t->order; l++) {
    colmap[t->lvl[l].mode] = l; /* logical mode m is level column colmap[m] */
    cdims[l] = t->dims[l];
    identity &= t->lvl[l].mode == l;
  }
  if (!identity) { /* storage order is not logical order: re-sort */
    int64_t *srows = NULL;
    double *sv = NULL;
    st = rt_sort_rows(n, t->order, rows, v, t->order, colmap, cdims, &n,
                      &srows, &sv, err);
    free(rows);
    free(v);
    rows = srows;
    v = sv;
    if (st != GALLEY_OK)
      return st;
  }
  *nnz = n;
  *coords = rows;
  *vals = v;
  return GALLEY_OK;
}

galley_status galley_tensor_to_dense(const galley_tensor *t, double *out,
                                     int64_t count, galley_error *err) {
  int64_t size = 1, stride[GALLEY_MAX_ORDER];
  for (int k = t->order - 1; k >= 0; k--) {
    stride[k] = size;
    if (rt_mul_overflows(size, t->dims[k], &size))
      return rt_error(err, GALLEY_EINVAL, "the dense image is too large");
  }
  if (count != size)
    return rt_error(err, GALLEY_EINVAL,
                    "dense array has %lld elements, the tensor needs %lld",
                    (long long)count, (long long)size);
  for (int64_t j = 0; j < size; j++)
    out[j] = t->fill;
  cursor c;
  galley_pos q;
  cursor_init(&c, t, t->order);
  while ((q = cursor_next(&c)) >= 0) {
    int64_t j = 0;
    for (int l = 0; l < t->order; l++)
      j += c.crd[l] * stride[t->lvl[l].mode];
    out[j] = t->val[q];
  }
  return GALLEY_OK;
}
