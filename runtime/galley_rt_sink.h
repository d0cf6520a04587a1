/*
 * galley_rt_sink.h -- what becomes of a rows-mode sink (galley_rt_sink of
 * galley_rt.h) after its kernel ran: its 32-bit coordinates widened when
 * the entries outgrow a 32-bit level, and its arrays laid out as the
 * result's levels, and the huge-page hint for its arrays.  libc only
 * (the includer brings <sys/mman.h> for madvise, where there is one).  One source for the library's executor
 * (src/exec/exec.c) and the ahead-of-time runtime (runtime/aot_runtime.c,
 * whose embedded text carries this file's text in its place:
 * tools/embed_source.awk).
 */
#ifndef GALLEY_RT_SINK_H
#define GALLEY_RT_SINK_H

#include <stdint.h>
#include <stdlib.h>

#include "galley_rt.h"

/* Ask for transparent huge pages over the interior of a large array
 * that will be written from its start (a sink's): one page fault per
 * 2 MiB instead of per 4 KiB.  Only a hint; nothing where madvise's
 * MADV_HUGEPAGE is not declared. */
static void galley_rt_hint_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  const uintptr_t huge = (uintptr_t)1 << 21;
  if (!p || bytes < 2 * huge)
    return;
  uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
  uintptr_t hi = ((uintptr_t)p + bytes) & ~(huge - 1);
  if (hi > lo)
    (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

/* A rows32 sink's coordinates as 64-bit ones (more entries than a 32-bit
 * list level holds, or blocks of both widths to join); 0, or -1 with s
 * unchanged when memory runs out. */
static int galley_rt_sink_widen(galley_rt_sink *s) {
  int64_t *crd = malloc((size_t)(s->cap > 0 ? s->cap : 1) * sizeof *crd);
  if (!crd)
    return -1;
  for (int64_t e = 0; e < s->n; e++)
    crd[e] = s->crd32[e];
  free(s->crd);
  free(s->crd32);
  s->crd = crd;
  s->crd32 = NULL;
  s->rows32 = 0;
  return 0;
}

/* The sink's arrays reallocated to cap entries (its entries kept): the
 * 32-bit coordinates while rows32, else `order` (1 in rows mode) 64-bit
 * coordinates an entry; the huge-page hint on the large ones.  0, or -1
 * when memory runs out (the arrays already grown stay with s). */
static int galley_rt_sink_realloc(galley_rt_sink *s, int64_t cap) {
  int64_t width = s->rows || s->order < 1 ? 1 : s->order;
  if (cap < 0 || cap > INT64_MAX / 8 / width)
    return -1;
  if (s->rows32) {
    int32_t *crd32 = (int32_t *)realloc(s->crd32, (size_t)cap * sizeof *crd32);
    if (!crd32)
      return -1;
    s->crd32 = crd32;
    galley_rt_hint_huge(crd32, (size_t)cap * sizeof *crd32);
  } else {
    int64_t *crd = (int64_t *)realloc(s->crd, (size_t)(cap * width) * sizeof *crd);
    if (!crd)
      return -1;
    s->crd = crd;
  }
  double *val = (double *)realloc(s->val, (size_t)cap * sizeof *val);
  if (!val)
    return -1;
  s->val = val;
  galley_rt_hint_huge(val, (size_t)cap * sizeof *val);
  s->cap = cap;
  return 0;
}

/* The tensor a rows-mode sink holds, laid out in t (zeroed by the
 * caller): dense levels over the sink's ldims, then one list level of
 * its entries, 32-bit while the sink is rows32.  The order, the mode of
 * each level (modes), the fill and the sizes (odims) are the result's.
 * t takes the sink's arrays (a list's arrays are never NULL, even when
 * empty).  `offsets`: s->pos holds the offsets already (the library's
 * executor makes them on its threads), not the counts per parent; pos32
 * (NULL: made here) a rows32 sink's offsets as 32-bit ones, which t
 * takes.  0, or -1 when out of memory: t then holds what it took, for
 * the caller to free with t. */
static int galley_rt_sink_rows_levels_ex(galley_rt_sink *s, int order,
                                         const int *modes, double fill,
                                         const int64_t *odims, int offsets,
                                         int32_t *pos32,
                                         struct galley_tensor *t) {
  int last = order - 1;
  t->order = order;
  for (int m = 0; m < order; m++)
    t->dims[m] = odims[m];
  t->fill = fill;
  int64_t npar = 1;
  for (int l = 0; l < last; l++) {
    galley_level *D = &t->lvl[l];
    D->kind = GALLEY_RT_DENSE;
    D->mode = modes[l];
    D->dim = s->ldims[l];
    D->npar = npar;
    npar *= D->dim;
    D->nchild = D->nset = npar;
  }
  for (int64_t p = 0; !offsets && p < npar; p++) /* counts to offsets */
    s->pos[p + 1] += s->pos[p];
  galley_level *L = &t->lvl[last];
  L->kind = GALLEY_RT_LIST;
  L->mode = modes[last];
  L->dim = s->ldims[last];
  L->npar = npar;
  L->nchild = L->nset = s->n;
  t->nval = s->n;
  /* an empty array still gets one element (realloc of NULL or of the
   * sink's own array); on failure the sink keeps what it had */
  t->val = s->n > 0 ? s->val : realloc(s->val, sizeof *t->val);
  if (t->val)
    s->val = NULL;
  if (s->rows32) {
    L->idx32 = 1;
    L->crd32 = s->n > 0 ? s->crd32 : realloc(s->crd32, sizeof *L->crd32);
    if (L->crd32)
      s->crd32 = NULL;
    L->pos32 = pos32 ? pos32 : malloc((size_t)(npar + 1) * sizeof *L->pos32);
    for (int64_t p = 0; !pos32 && L->pos32 && p <= npar; p++)
      L->pos32[p] = (int32_t)s->pos[p];
    return t->val && L->crd32 && L->pos32 ? 0 : -1;
  }
  L->crd = s->n > 0 ? s->crd : realloc(s->crd, sizeof *L->crd);
  if (L->crd)
    s->crd = NULL;
  L->pos = s->pos;
  s->pos = NULL;
  return t->val && L->crd ? 0 : -1;
}

/* galley_rt_sink_rows_levels_ex from the counts, 32-bit offsets made
 * here. */
static inline int galley_rt_sink_rows_levels(galley_rt_sink *s, int order,
                                             const int *modes, double fill,
                                             const int64_t *odims,
                                             struct galley_tensor *t) {
  return galley_rt_sink_rows_levels_ex(s, order, modes, fill, odims, 0, NULL,
                                       t);
}

#endif /* GALLEY_RT_SINK_H */
