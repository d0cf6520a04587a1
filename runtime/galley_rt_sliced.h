/*
 * galley_rt_sliced.h -- the sliced copy of a matrix (galley_rt.h's
 * galley_rt_sliced) that the sliced strategy's chunk loop walks.  libc
 * and libm only.  One source for the library (runtime/csr.c, whose copy
 * runtime/facts.c keeps with the bound tensor) and the ahead-of-time
 * runtime (runtime/aot_runtime.c, whose embedded text carries this
 * file's text in its place: tools/embed_source.awk; it keeps the copy in
 * the caller's thread handle).
 */
#ifndef GALLEY_RT_SLICED_H
#define GALLEY_RT_SLICED_H

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "galley_rt.h"

/* A copy whose values all are floats keeps them as floats (8 bytes a
 * slot instead of 12) from this size on (with doubles): a quarter of the
 * machine's 32 MiB L3.  Measured in session 6 (1 thread, loaded): mdual
 * (12.4 MB) 0.67 -> 0.45-0.52 ms; smaller copies that stay in cache ran
 * slower with the conversion (luxembourg_osm, 3.2 MB: 0.082 -> 0.115 ms;
 * pgp-strong-2009, 6.7 MB: 0.142 -> 0.156 ms). */
#define GALLEY_RT_SLICED_F32_MIN_BYTES ((int64_t)8 << 20)

/* Whether t has the levels a sliced copy is made of: a dense level 0
 * over one list level 1 whose coordinates fit 32 bits. */
static int galley_rt_sliced_fits(const struct galley_tensor *t) {
  return t->order == 2 && t->lvl[0].kind == GALLEY_RT_DENSE &&
         t->lvl[1].kind == GALLEY_RT_LIST &&
         t->lvl[1].dim <= GALLEY_RT_IDX32_MAX_DIM;
}

/* The slots (steps times GALLEY_RT_SLICE) a sliced copy of t holds:
 * every chunk padded to its longest row. */
static int64_t galley_rt_sliced_slots(const struct galley_tensor *t) {
  const galley_level *L = &t->lvl[1];
  int64_t nrows = t->lvl[0].dim, nchunk = nrows / GALLEY_RT_SLICE, steps = 0;
  for (int64_t c = 0; c < nchunk; c++) {
    int64_t w = 0;
    for (int r = 0; r < GALLEY_RT_SLICE; r++) {
      int64_t i = c * GALLEY_RT_SLICE + r;
      int64_t len = galley_rt_pos(L, i + 1) - galley_rt_pos(L, i);
      w = len > w ? len : w;
    }
    steps += w;
  }
  return steps * GALLEY_RT_SLICE;
}

/* Whether the n values and the fill are each a float exactly (bitwise
 * the same double after the round trip). */
static int galley_rt_exact_float(double v) {
  if (isfinite(v) && fabs(v) > FLT_MAX) return 0; /* no float: undefined */
  double back = (double)(float)v;
  return memcmp(&back, &v, sizeof back) == 0;
}

static int galley_rt_exact_floats(const double *v, int64_t n, double fill) {
  if (!galley_rt_exact_float(fill)) return 0;
  for (int64_t k = 0; k < n; k++)
    if (!galley_rt_exact_float(v[k])) return 0;
  return 1;
}

/* The sliced copy of t (rt_sliced_fits) with fill `fill` in its padding,
 * one allocation (free() it), its values floats when they are floats
 * exactly and the copy would take f32_min_bytes or more with doubles;
 * NULL when out of memory or when padding would more than triple the
 * stored entries (the layout would cost more than it saves; the kernel
 * then walks the list). */
static galley_rt_sliced *galley_rt_sliced_make(const struct galley_tensor *t,
                                               double fill,
                                               int64_t f32_min_bytes) {
  const galley_level *L = &t->lvl[1];
  int64_t nchunk = t->lvl[0].dim / GALLEY_RT_SLICE;
  int64_t slots = galley_rt_sliced_slots(t);
  if (slots > 3 * L->nset + 64) return NULL;
  int64_t f64_bytes = slots * (int64_t)(sizeof(double) + sizeof(int32_t));
  int f32 = f64_bytes >= f32_min_bytes && galley_rt_exact_floats(t->val, L->nset, fill);
  size_t vbytes = f32 ? sizeof(float) : sizeof(double);
  size_t bytes = sizeof(galley_rt_sliced) + (size_t)(nchunk + 1) * sizeof(int64_t) +
                 (size_t)slots * (vbytes + sizeof(int32_t));
  galley_rt_sliced *s = malloc(bytes);
  if (!s) return NULL;
  int64_t *start = (int64_t *)(s + 1);
  double *val = f32 ? NULL : (double *)(start + nchunk + 1);
  float *val32 = f32 ? (float *)(start + nchunk + 1) : NULL;
  int32_t *crd = (int32_t *)((char *)(start + nchunk + 1) + (size_t)slots * vbytes);
  start[0] = 0;
  for (int64_t c = 0; c < nchunk; c++) {
    int64_t w = 0, i0 = c * GALLEY_RT_SLICE;
    for (int r = 0; r < GALLEY_RT_SLICE; r++) {
      int64_t len = galley_rt_pos(L, i0 + r + 1) - galley_rt_pos(L, i0 + r);
      w = len > w ? len : w;
    }
    for (int r = 0; r < GALLEY_RT_SLICE; r++) {
      int64_t p = galley_rt_pos(L, i0 + r), e = galley_rt_pos(L, i0 + r + 1);
      int32_t pad = e > p ? (int32_t)galley_rt_crd(L, e - 1) : 0;
      for (int64_t k = 0; k < w; k++) {
        int64_t q = (start[c] + k) * GALLEY_RT_SLICE + r;
        crd[q] = p + k < e ? (int32_t)galley_rt_crd(L, p + k) : pad;
        double v = p + k < e ? t->val[p + k] : fill;
        if (f32) val32[q] = (float)v;
        else val[q] = v;
      }
    }
    start[c + 1] = start[c] + w;
  }
  s->nchunk = nchunk;
  s->start = start;
  s->crd = crd;
  s->val = val;
  s->val32 = val32;
  return s;
}

#endif /* GALLEY_RT_SLICED_H */
