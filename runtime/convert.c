/*
 * convert.c -- a tensor in another format and/or mode order.
 *
 * Conversion is export-sort-build: the source's non-fill entries come out
 * in its storage order (iterate.c), their columns are permuted into the
 * target's level order and radix sorted unless the order already agrees
 * (build.c), and the target is laid out in one pass per level.  Entries
 * equal to the fill are dropped on the way, so sparse target levels never
 * store them (a dense matrix converted to CSR keeps only its nonzeros).
 */
#include <stdlib.h>

#include "rt_internal.h"

/* Whether fmt stores the modes in the same level order as src. */
static int same_order(const galley_tensor *src, const galley_format *fmt) {
  for (int l = 0; l < src->order; l++)
    if (src->lvl[l].mode != fmt->mode_order[l])
      return 0;
  return 1;
}

galley_status galley_tensor_convert(const galley_tensor *src,
                                    const galley_format *fmt,
                                    galley_tensor **out, galley_error *err) {
  int order = src->order, colmap[GALLEY_MAX_ORDER], srccol[GALLEY_MAX_ORDER];
  int64_t cdims[GALLEY_MAX_ORDER], n = 0, m = 0, *rows = NULL, *srows = NULL;
  double *v = NULL, *sv = NULL;
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
    srccol[src->lvl[l].mode] = l; /* logical mode -> source column */
  for (int l = 0; l < order; l++) {
    colmap[l] = srccol[fmt->mode_order[l]];
    cdims[l] = src->dims[fmt->mode_order[l]];
  }
  st = rt_tensor_rows(src, 1, &n, &rows, &v, err);
  if (st == GALLEY_OK && same_order(src, fmt)) {
    srows = rows; /* already sorted in the target's level order, distinct */
    sv = v;
    m = n;
    rows = NULL;
    v = NULL;
  } else if (st == GALLEY_OK) {
    st = rt_sort_rows(n, order, rows, v, order, colmap, cdims, &m, &srows,
                      &sv, err);
  }
  if (st == GALLEY_OK)
    st = rt_build_sorted(order, src->dims, fmt, src->fill, m, srows, sv, out,
                         err);
  free(rows);
  free(v);
  free(srows);
  free(sv);
  return st;
}
