/*
 * output.c -- how a kernel query writes its result, decided once and
 * recorded in the plan (PhysQuery.out_kind, out_rows, pattern, part).
 *
 * Each output strategy has its legality here; the code generator emits
 * what the kind names and the executor prepares what the kind needs:
 *
 *   OUT_DENSE       all-dense result, preallocated with the fill, each
 *                   point stored once (output loops come first);
 *   OUT_ACCUMULATE  all-dense result folded in place, agg(old, v): a
 *                   reduced loop comes before an output loop (Gustavson);
 *   OUT_PATTERN     the result's levels are a copy of one access's levels
 *                   (SDDMM: C[i,j] = S[i,j] * ...), possibly followed by
 *                   dense levels (X[h,r,t,d] = T[h,r,t] * ...): the kernel
 *                   writes each value at the position the pattern's walk
 *                   is at (times the dense block), with no sink and no
 *                   layout afterwards;
 *   OUT_APPEND      entries appended to a sink in loop order, laid out in
 *                   the result's format afterwards;
 *   OUT_SCATTER     random writes into a workspace (a bytemap, or a hash
 *                   table for large key spaces) flushed in key order to
 *                   the sink after each iteration of the leading output
 *                   loops.
 * A sink whose result is dense levels over one sorted list takes rows
 * mode (out_rows): it writes the list's arrays directly, a count per
 * parent, with a plain rerun should entries arrive out of order.
 *
 * The partition (PhysQuery.part) says how the outermost loop may be split
 * into ranges and the parts' results recombined: DISJOINT (each part owns
 * its own output points in place), CONCAT (each part's entries follow the
 * previous part's, in order) or REDUCE (each part holds partial results
 * that are combined with the aggregate in a fixed order).  One part runs
 * today; threads and distributed tiles reuse the record.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phys.h"

/* Results with at most this many parents of their list level take the
 * sink's rows mode (a count per parent). */
#define ROWS_MAX_PARENTS ((int64_t)1 << 27)

static int same_value(double x, double y) {
  return (isnan(x) && isnan(y)) || x == y;
}

int phys_is_reduced(const PhysQuery *q, int id) {
  for (int k = 0; k < q->nred; k++)
    if (q->red[k] == id) return 1;
  return 0;
}

void phys_loop_levels(const PhysQuery *q, int x, int d, int *l0, int *l1) {
  const PAccess *A = &q->acc[x];
  int l = 0;
  while (l < A->order) {
    int seen = 0;
    for (int e = 0; e < d; e++) seen |= q->loops[e] == A->level_idx[l];
    if (!seen) break;
    l++;
  }
  *l0 = l;
  while (l < A->order && A->level_idx[l] == q->loops[d]) l++;
  *l1 = l;
}

/* The depth of the first reduced loop (nloops when none). */
static int first_reduced(const PhysQuery *q) {
  int d = 0;
  while (d < q->nloops && !phys_is_reduced(q, q->loops[d])) d++;
  return d;
}

int phys_interleaved(const PhysQuery *q) {
  for (int d = 0; d < q->nloops && d < q->nout; d++)
    if (phys_is_reduced(q, q->loops[d])) return 1;
  return 0;
}

int phys_scatter_indices(const PhysQuery *q, int *ids) {
  int n = 0;
  for (int d = first_reduced(q); d < q->nloops; d++)
    if (!phys_is_reduced(q, q->loops[d])) ids[n++] = q->loops[d];
  return n;
}

static int all_dense(const galley_format *f) {
  for (int l = 0; l < f->order; l++)
    if (f->kinds[l] != GALLEY_DENSE) return 0;
  return 1;
}

int phys_workspace_kind(const PhysQuery *q) {
  return q->out_kind == OUT_SCATTER ? (int)q->ws_kind : -1;
}

/* The workspace for scattering into a key space of the product of the
 * scattered indices' sizes. */
static galley_level_kind scatter_kind(const PhysQuery *q) {
  int ids[GALLEY_MAX_ORDER];
  int n = phys_scatter_indices(q, ids);
  double size = 1;
  for (int k = 0; k < n; k++) size *= (double)q->indices[ids[k]].dim;
  return size <= (double)PHYS_WS_DENSE_MAX ? GALLEY_BYTEMAP : GALLEY_HASH;
}

const char *phys_inplace_problem(const PhysQuery *q) {
  if (!q->agg || q->nred == 0) return "an in-place reduction without an aggregate";
  if (q->out_format.order != q->nout)
    return "the output format's order differs from the output's";
  const Op *agg = q->agg;
  double neutral; /* agg's identity, or what acts as one on its folds */
  if (!ops_fold_neutral(agg, &neutral) ||
      !same_value(agg->agg_init, neutral) ||
      !same_value(agg->agg_init, q->out_fill))
    return "reduced loops before output loops need the result's fill to be the aggregate's initial value";
  /* every point a loop inside the first reduced loop skips must hold the
   * identity, so that not folding it changes nothing (skips above it
   * leave the fill, as in the outputs-first order) */
  int nacc = q->nacc > 0 ? q->nacc : 1;
  /* on the stack for the usual few accesses: the code generator asks
   * this again, and an allocation failing there read as an internal
   * error, not as out of memory (test_oom) */
  unsigned char small[64];
  unsigned char *absent = nacc <= 64 ? small : calloc((size_t)nacc, 1);
  if (!absent) return "out of memory";
  const char *why = NULL;
  for (int d = first_reduced(q); d < q->nloops && !why; d++) {
    if (q->merge[d] == MERGE_DENSE) continue;
    memset(absent, 0, (size_t)nacc);
    for (int x = 0; x < q->nacc; x++) {
      int l0, l1;
      phys_loop_levels(q, x, d, &l0, &l1);
      if (l0 < l1 && q->acc[x].proto[l0] == PROTO_ITERATE) absent[x] = 1;
    }
    double c;
    if (!phys_absent_value(q, q->expr, absent, &c))
      why = "a merge whose skipped points are not constant";
    else if (!same_value(c, neutral))
      why = "reduced loops before output loops need skipped points to hold the aggregate's identity";
  }
  if (absent != small) free(absent);
  return why;
}

/* Whether access x can give the result its pattern: its levels are the
 * first output loops, outermost first, each dense or a sorted list that
 * the loop walks as its leader or in an intersection -- so every point
 * the kernel reaches has a position in x's last level, and every point it
 * stores a value at is one of x's stored points.  Where x is absent the
 * loop skips the point, which then holds the result's fill (the lead
 * loop's contract; an intersection skips where any of its lists is
 * absent, and those points of x hold the fill too).  The
 * output loops after x's levels, if any, become dense levels under x's
 * last one (TransE's X[h,r,t,d] = T[h,r,t] * ...: T's pattern times a
 * dense d): each stored point of x owns a dense block of them, which the
 * kernel fills like an OUT_DENSE result (points it skips keep the fill). */
static int pattern_fits(const PhysQuery *q, int x) {
  const PAccess *A = &q->acc[x];
  if (A->order < 1 || q->nout < 1) return 0;
  /* an access with more levels lends its first nout (the rest are on
   * reduced loops, inside: S[h,r,t] = sum(d: X[h,r,t,d]^2) on X's
   * pattern of (h, r, t)) */
  int k = A->order < q->nout ? A->order : q->nout;
  for (int l = k; l < A->order; l++) /* not a diagonal: B[l, l] */
    if (!phys_is_reduced(q, A->level_idx[l])) return 0;
  for (int l = 0; l < k; l++) {
    if (q->loops[l] != A->level_idx[l]) return 0;
    if (A->kind[l] == GALLEY_DENSE) continue;
    if (A->kind[l] != GALLEY_LIST || A->proto[l] != PROTO_ITERATE ||
        (q->merge[l] != MERGE_LEAD && q->merge[l] != MERGE_INTERSECT))
      return 0;
  }
  /* a prefix or a dense suffix is worth it only with a sparse level of x
   * among those copied (else the result is all dense: OUT_DENSE) */
  int sparse = 0;
  for (int l = 0; l < k; l++) sparse |= A->kind[l] == GALLEY_LIST;
  return sparse || A->order == q->nout;
}

/* The result format that copies access x's levels: the same kinds, each
 * storing the output mode x's level reads, then dense levels for the
 * output loops after them, in loop order. */
static void pattern_format(const PhysQuery *q, int x, galley_format *f) {
  const PAccess *A = &q->acc[x];
  f->order = q->nout;
  for (int l = 0; l < q->nout; l++) {
    int id = l < A->order ? A->level_idx[l] : q->loops[l];
    f->kinds[l] = l < A->order ? A->kind[l] : GALLEY_DENSE;
    for (int m = 0; m < q->nout; m++)
      if (q->out[m] == id) f->mode_order[l] = m;
  }
}

/* The output loops access x's levels give the result (pattern_fits). */
static int pattern_covers(const PhysQuery *q, int x) {
  return q->acc[x].order < q->nout ? q->acc[x].order : q->nout;
}

/* The access that gives a sparse result its pattern, or -1: the one
 * covering the most output loops (a full copy before a dense suffix),
 * the first of those. */
static int choose_pattern(const PhysQuery *q) {
  if (all_dense(&q->out_format) || phys_interleaved(q)) return -1;
  int best = -1;
  for (int x = 0; x < q->nacc; x++)
    if (pattern_fits(q, x) &&
        (best < 0 || pattern_covers(q, x) > pattern_covers(q, best)))
      best = x;
  return best;
}

/* Rows mode: dense levels over one sorted list, with few enough parents
 * for a count per parent. */
static int rows_fit(const PhysQuery *q) {
  const galley_format *f = &q->out_format;
  int last = f->order - 1;
  if (f->order < 1 || f->kinds[last] != GALLEY_LIST) return 0;
  double npar = 1;
  for (int l = 0; l < last; l++) {
    if (f->kinds[l] != GALLEY_DENSE) return 0;
    npar *= (double)q->indices[q->out[f->mode_order[l]]].dim;
  }
  return npar <= (double)ROWS_MAX_PARENTS;
}

static void choose_partition(PhysQuery *q) {
  q->part.loop = q->nloops > 0 ? 0 : -1;
  if (q->nloops == 0 || phys_is_reduced(q, q->loops[0]))
    q->part.combine = PART_REDUCE;
  else if (q->out_kind == OUT_DENSE || q->out_kind == OUT_ACCUMULATE ||
           q->out_kind == OUT_PATTERN)
    q->part.combine = PART_DISJOINT;
  else
    q->part.combine = PART_CONCAT;
}

void phys_choose_output(PhysQuery *q) {
  q->pattern = -1;
  q->out_rows = 0;
  if (all_dense(&q->out_format)) {
    q->out_kind = phys_interleaved(q) ? OUT_ACCUMULATE : OUT_DENSE;
  } else if (phys_interleaved(q)) {
    q->out_kind = OUT_SCATTER;
    q->ws_kind = scatter_kind(q);
    q->out_rows = rows_fit(q);
  } else if ((q->pattern = choose_pattern(q)) >= 0) {
    q->out_kind = OUT_PATTERN;
    pattern_format(q, q->pattern, &q->out_format);
  } else {
    q->out_kind = OUT_APPEND;
    q->out_rows = rows_fit(q);
  }
  choose_partition(q);
}

/* Whether every level access x resolves before loop d + 1 is dense. */
static int dense_through(const PhysQuery *q, int x, int l1) {
  for (int l = 0; l < l1; l++)
    if (q->acc[x].kind[l] != GALLEY_DENSE) return 0;
  return 1;
}

int phys_stores_every_point(const PhysQuery *q) {
  if ((q->out_kind != OUT_DENSE && q->out_kind != OUT_PATTERN) ||
      q->nout == 0 || q->nloops < q->nout || q->part.combine == PART_REDUCE)
    return 0;
  int reduces = q->agg && q->nred > 0;
  if (!reduces && q->nloops != q->nout) return 0;
  for (int d = 0; d < q->nout; d++) {
    if (phys_is_reduced(q, q->loops[d]) || (q->upper && q->upper[d] >= 0) ||
        q->merge[d] == MERGE_INTERSECT)
      return 0;
    int iterating = 0;
    for (int x = 0; x < q->nacc; x++) {
      int l0, l1;
      phys_loop_levels(q, x, d, &l0, &l1);
      if (l0 == l1) continue;
      iterating |= q->acc[x].proto[l0] == PROTO_ITERATE;
      /* the pattern's own walk visits each of its stored points; any
       * other level is dense under dense parents: never absent, so no
       * point is skipped */
      if (!(q->out_kind == OUT_PATTERN && x == q->pattern) &&
          !dense_through(q, x, l1))
        return 0;
    }
    /* a merge with no iterating access visits no point */
    if (q->merge[d] != MERGE_DENSE && !iterating) return 0;
  }
  return 1;
}

const char *phys_out_kind_name(OutKind k) {
  switch (k) {
  case OUT_DENSE:
    return "dense";
  case OUT_ACCUMULATE:
    return "accumulate";
  case OUT_PATTERN:
    return "pattern";
  case OUT_APPEND:
    return "append";
  case OUT_SCATTER:
    return "scatter";
  }
  return "?";
}

const char *phys_part_combine_name(PartCombine c) {
  switch (c) {
  case PART_DISJOINT:
    return "disjoint";
  case PART_CONCAT:
    return "concat";
  case PART_REDUCE:
    return "reduce";
  }
  return "?";
}
