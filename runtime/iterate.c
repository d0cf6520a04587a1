/*
 * iterate.c -- reading tensors: lookup, ordered iteration and export.
 *
 * Everything here walks the fibertree with one iterative cursor (no
 * recursion, no per-entry callbacks inside the runtime) and one tight loop
 * per leaf fiber (rt_internal.h), so export and conversion of millions of
 * entries stay a tight loop.  Reading never mutates the tensor, so any
 * number of threads may read one at once.
 *
 * Entries leave in storage order, which is sorted in the tensor's level
 * order.  Rows in another order come from a counting sort on the leading
 * modes that are out of place (rt_tensor_sorted_rows): two walks, a
 * histogram and one scatter, as in CSparse's cs_transpose.
 */
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

/* Streaming (non-temporal) 64-bit stores for large sequential outputs:
 * they skip the read-for-ownership of every destination line. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define STREAM64(p, v) _mm_stream_si64((long long *)(p), (long long)(v))
#define STREAM_FENCE() _mm_sfence()
#else
#define STREAM64(p, v)                                                        \
  do {                                                                        \
    int64_t v_ = (v);                                                         \
    memcpy((p), &v_, sizeof v_);                                              \
  } while (0)
#define STREAM_FENCE() ((void)0)
#endif
#define STREAM_MIN_BYTES ((int64_t)8 << 20) /* larger than the caches */

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
  rt_cursor c;
  int64_t coord[GALLEY_MAX_ORDER] = {0};
  galley_pos q;
  rt_cursor_init(&c, t, t->order);
  while ((q = rt_cursor_next(&c)) >= 0) {
    for (int l = 0; l < t->order; l++)
      coord[t->lvl[l].mode] = c.crd[l];
    int r = fn(ud, coord, t->val[q]);
    if (r)
      return r;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* Counting                                                            */
/* ------------------------------------------------------------------ */

int rt_tensor_has_fill_value(const galley_tensor *t) {
  const double *v = t->val, fill = t->fill;
  int64_t n = t->nval, q = 0;
  if (fill == fill) { /* not a NaN: plain compares, 8 at a time */
    typedef double v4d __attribute__((vector_size(32)));
    typedef long long v4l __attribute__((vector_size(32)));
    v4d f = {fill, fill, fill, fill};
    for (; q + 8 <= n; q += 8) {
      v4d a, b;
      memcpy(&a, v + q, sizeof a);
      memcpy(&b, v + q + 4, sizeof b);
      v4l hit = (a == f) | (b == f);
      if (hit[0] | hit[1] | hit[2] | hit[3])
        return 1;
    }
  }
  for (; q < n; q++)
    if (rt_is_fill(v[q], fill))
      return 1;
  return 0;
}

int64_t rt_tensor_count_nnz(const galley_tensor *t) {
  const galley_facts *f = rt_tensor_cached_facts(t);
  if (f)
    return f->nnz;
  int64_t n = 0;
  if (t->order == 0)
    return !rt_is_fill(t->val[0], t->fill);
  if (!rt_tensor_has_fill_value(t))
    return galley_tensor_stored(t);
  const double *val = t->val, fill = t->fill;
  rt_cursor c;
  RT_FOR_EACH_STORED(t, c, i, q, {
    (void)i;
    n += !rt_is_fill(val[q], fill);
  });
  return n;
}

int64_t rt_tensor_count(const galley_tensor *t, int skip_fill) {
  return skip_fill ? rt_tensor_count_nnz(t) : galley_tensor_stored(t);
}

int rt_tensor_fill_rare(const galley_tensor *t) {
  return t->order > 0 && t->lvl[t->order - 1].kind != GALLEY_RT_DENSE;
}

/* ------------------------------------------------------------------ */
/* Rows                                                                */
/* ------------------------------------------------------------------ */

static galley_status nomem(galley_error *err) {
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
}

/* Copy the stored entries (optionally only the non-fill ones) into rows
 * of level-order coordinates and values; returns the count, at most m. */
static int64_t copy_rows(const galley_tensor *t, int skip_fill, int64_t m,
                         int64_t *rows, double *vals) {
  int order = t->order;
  int64_t k = 0;
  const double *val = t->val, fill = t->fill;
  if (order == 0) {
    if (m > 0 && !(skip_fill && rt_is_fill(val[0], fill)))
      vals[k++] = val[0];
    return k;
  }
  rt_cursor c;
  if (order == 2 && m * 24 >= STREAM_MIN_BYTES) {
    /* the common matrix case, large: streaming stores */
    RT_FOR_EACH_STORED(t, c, i, q, {
      double v = val[q];
      if ((skip_fill && rt_is_fill(v, fill)) || k == m)
        continue;
      int64_t vb;
      memcpy(&vb, &v, sizeof vb);
      STREAM64(&rows[2 * k], c.crd[0]);
      STREAM64(&rows[2 * k + 1], i);
      STREAM64((void *)&vals[k], vb);
      k++;
    });
    STREAM_FENCE();
    return k;
  }
  if (order == 2) { /* the common matrix case, without the inner copy */
    RT_FOR_EACH_STORED(t, c, i, q, {
      double v = val[q];
      if ((skip_fill && rt_is_fill(v, fill)) || k == m)
        continue;
      rows[2 * k] = c.crd[0];
      rows[2 * k + 1] = i;
      vals[k++] = v;
    });
    return k;
  }
  RT_FOR_EACH_STORED(t, c, i, q, {
    double v = val[q];
    if ((skip_fill && rt_is_fill(v, fill)) || k == m)
      continue;
    int64_t *r = rows + k * order;
    for (int l = 0; l < order - 1; l++)
      r[l] = c.crd[l];
    r[order - 1] = i;
    vals[k++] = v;
  });
  return k;
}

/* The stored entries as rows of level-order coordinates, in storage
 * order, optionally without those equal to the fill. */
galley_status rt_tensor_rows(const galley_tensor *t, int skip_fill,
                             int64_t *n, int64_t **rows, double **vals,
                             galley_error *err) {
  /* Room for every stored entry when fill values are rare (trimmed after
   * the copy); otherwise an exact count first. */
  int64_t m = skip_fill && !rt_tensor_fill_rare(t) ? rt_tensor_count_nnz(t)
                                                   : galley_tensor_stored(t);
  *rows = rt_malloc_array(m * (int64_t)t->order, sizeof **rows);
  *vals = rt_malloc_array(m, sizeof **vals);
  if (!*rows || !*vals) {
    free(*rows);
    free(*vals);
    *rows = NULL;
    *vals = NULL;
    return nomem(err);
  }
  *n = copy_rows(t, skip_fill, m, *rows, *vals);
  if (*n < m) { /* dropped fill values: give the tail back */
    int64_t *r = realloc(*rows, (size_t)(*n * t->order + 1) * sizeof **rows);
    double *v = realloc(*vals, (size_t)(*n + 1) * sizeof **vals);
    if (r)
      *rows = r;
    if (v)
      *vals = v;
  }
  return GALLEY_OK;
}

/* Histogram limit of the counting sort: the key range may exceed the
 * entry count by this much before the radix sort takes over. */
#define COUNT_SORT_SLACK ((int64_t)1 << 20)

/* Rows in another level order by a counting sort.  src[l] is the source
 * level of target column l; columns 0..j-1 are the key (a row-major index
 * below range), and the columns after them are in source order, so the
 * stable scatter of the storage-order walk sorts the rows completely. */
static galley_status count_sort_rows(const galley_tensor *t, const int *src,
                                     int j, int64_t range, int skip,
                                     int check, int64_t *dropped, int64_t *n,
                                     int64_t **rows, double **vals,
                                     galley_error *err) {
  int order = t->order, last = order - 1;
  int64_t kst[GALLEY_MAX_ORDER] = {0}, stride = 1;
  for (int l = j - 1; l >= 0; l--) {
    kst[src[l]] = stride; /* the key weight of source level src[l] */
    stride *= t->dims[t->lvl[src[l]].mode];
  }
  int64_t *cnt = rt_calloc_array(range + 1, sizeof *cnt);
  if (!cnt)
    return nomem(err);
  const double *val = t->val, fill = t->fill;
  int64_t ki = kst[last];
  rt_cursor c;
  /* FOR_EACH_KEYED runs its body for every entry to keep, with key its
   * counting-sort key; the part fixed by the upper levels is computed
   * once per fiber. */
#define FOR_EACH_KEYED(SKIP, ...)                                             \
  for (rt_cursor_init(&c, t, last);;) {                                       \
    galley_pos lp_ = rt_cursor_next(&c);                                      \
    if (lp_ < 0)                                                              \
      break;                                                                  \
    int64_t base = 0;                                                         \
    for (int s = 0; s < last; s++)                                            \
      base += c.crd[s] * kst[s];                                              \
    RT_FIBER_LOOP(&t->lvl[last], lp_, i, q, {                                 \
      double v = val[q];                                                      \
      if (SKIP && rt_is_fill(v, fill)) {                                      \
        drop++;                                                               \
        continue;                                                             \
      }                                                                       \
      int64_t key = base + i * ki;                                            \
      __VA_ARGS__                                                             \
    });                                                                       \
  }
  int64_t drop = 0;
  if (skip) {
    FOR_EACH_KEYED(1, (void)v; cnt[key + 1]++;)
  } else {
    FOR_EACH_KEYED(0, (void)v; cnt[key + 1]++;)
  }
  drop = 0;
  for (int64_t b = 0; b < range; b++)
    cnt[b + 1] += cnt[b];
  int64_t m = cnt[range];
  *rows = rt_malloc_array(m * (int64_t)order, sizeof **rows);
  *vals = rt_malloc_array(m, sizeof **vals);
  if (!*rows || !*vals) {
    free(cnt);
    free(*rows);
    free(*vals);
    *rows = NULL;
    *vals = NULL;
    return nomem(err);
  }
  int64_t *out = *rows;
  double *ov = *vals;
  /* the scatter checks for fill values whenever asked to drop them: when
   * the histogram did not (check && !skip), a drop leaves a hole, and the
   * caller sorts again with skip */
#define SCATTER(SKIP)                                                         \
  do {                                                                        \
    if (order == 2) { /* a matrix stored column-major: swap */                \
      FOR_EACH_KEYED(SKIP, int64_t slot = cnt[key]++; out[2 * slot] = i;      \
                     out[2 * slot + 1] = c.crd[0]; ov[slot] = v;)             \
    } else {                                                                  \
      FOR_EACH_KEYED(SKIP, int64_t slot = cnt[key]++;                         \
                     int64_t *r = out + slot * order; c.crd[last] = i;        \
                     for (int l = 0; l < order; l++) r[l] = c.crd[src[l]];    \
                     ov[slot] = v;)                                           \
    }                                                                         \
  } while (0)
  if (check)
    SCATTER(1);
  else
    SCATTER(0);
#undef SCATTER
#undef FOR_EACH_KEYED
  free(cnt);
  *dropped = skip ? 0 : drop;
  *n = m;
  return GALLEY_OK;
}

galley_status rt_tensor_sorted_rows(const galley_tensor *t,
                                    const int *mode_order, int skip_fill,
                                    int64_t *n, int64_t **rows, double **vals,
                                    galley_error *err) {
  int order = t->order, src[GALLEY_MAX_ORDER], level_of[GALLEY_MAX_ORDER];
  *n = 0;
  *rows = NULL;
  *vals = NULL;
  for (int l = 0; l < order; l++)
    level_of[t->lvl[l].mode] = l;
  for (int l = 0; l < order; l++)
    src[l] = level_of[mode_order[l]];
  /* the longest run of target columns at the end that are in source
   * order: sorting by the columns before it suffices */
  int j = order > 0 ? order - 1 : 0;
  while (j > 0 && src[j - 1] < src[j])
    j--;
  if (j == 0) /* same order: the walk is sorted */
    return rt_tensor_rows(t, skip_fill, n, rows, vals, err);
  int64_t range = 1, stored = galley_tensor_stored(t), limit;
  int fits = !rt_mul_overflows(stored, 2, &limit) &&
             !rt_add_overflows(limit, COUNT_SORT_SLACK, &limit);
  for (int l = 0; l < j && fits; l++)
    fits = !rt_mul_overflows(range, t->dims[mode_order[l]], &range) &&
           range <= limit;
  if (fits) {
    /* the histogram skips fill values only when they are common; else a
     * fill value met by the scatter means sorting again with skip */
    int rare = rt_tensor_fill_rare(t);
    int skip = skip_fill && !rare && rt_tensor_has_fill_value(t);
    int64_t dropped = 0;
    galley_status st = count_sort_rows(t, src, j, range, skip, skip_fill,
                                       &dropped, n, rows, vals, err);
    if (st == GALLEY_OK && dropped) {
      free(*rows);
      free(*vals);
      *rows = NULL; /* the caller frees them even when the pass fails */
      *vals = NULL;
      st = count_sort_rows(t, src, j, range, 1, 1, &dropped, n, rows, vals,
                           err);
    }
    return st;
  }
  /* a key range far beyond the entry count (hypersparse): radix sort */
  int64_t m = 0, *r = NULL, cdims[GALLEY_MAX_ORDER];
  double *v = NULL;
  for (int l = 0; l < order; l++)
    cdims[l] = t->dims[mode_order[l]];
  galley_status st = rt_tensor_rows(t, skip_fill, &m, &r, &v, err);
  if (st == GALLEY_OK)
    st = rt_sort_rows(m, order, r, v, order, src, cdims, n, rows, vals, err);
  free(r);
  free(v);
  return st;
}

/* ------------------------------------------------------------------ */
/* Export                                                              */
/* ------------------------------------------------------------------ */

galley_status galley_tensor_to_coo(const galley_tensor *t, unsigned flags,
                                   int64_t *nnz, int64_t **coords,
                                   double **vals, galley_error *err) {
  int ident[GALLEY_MAX_ORDER] = {0, 1, 2, 3, 4, 5, 6, 7};
  /* logical order is a level order like any other */
  return rt_tensor_sorted_rows(t, ident,
                               (flags & GALLEY_EXPORT_SKIP_FILL) != 0, nnz,
                               coords, vals, err);
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
  rt_cursor c;
  galley_pos q;
  rt_cursor_init(&c, t, t->order);
  while ((q = rt_cursor_next(&c)) >= 0) {
    int64_t j = 0;
    for (int l = 0; l < t->order; l++)
      j += c.crd[l] * stride[t->lvl[l].mode];
    out[j] = t->val[q];
  }
  return GALLEY_OK;
}
