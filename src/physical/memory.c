/*
 * memory.c -- how much memory a plan's results need for sure while it
 * runs, known before any kernel runs (issue 12: a hard memory budget).
 *
 * The executor checks each result against the budget as it allocates it.
 * That alone lets a plan run half-way and then fail when a later result
 * no longer fits beside the ones still alive.  Here the plan is walked in
 * execution order with the liveness the executor uses (a result lives
 * until its last reader has run; outputs, and results nobody reads, live
 * to the end), adding up each result's floor: an all-dense result's
 * values, or a sparse result's dense prefix (the offsets under its
 * leading dense levels), plus the entries it stores for sure
 * (PhysQuery.sure_nnz: dense loops over values that cannot be the fill,
 * the outer sum x[i] + y[j] of two full vectors of positive values:
 * n^2 entries whose sparse result would outgrow the budget only while
 * it runs).  Floors are exact, so a plan whose peak passes the budget is
 * refused before running, never wrongly.  (Estimated sparse entries are
 * left out on purpose: the estimators give upper bounds, often loose,
 * and would refuse plans that fit.)  One estimate is counted: that of an
 * outer union, a result with nothing reduced whose accesses read
 * pairwise disjoint index sets (x[i] + y[j]).  Every stored entry of one
 * access meets every point of the others, so its estimate is the
 * product of their extents, not a loose bound; only values that cancel
 * to the fill (x[i] = -y[j]) store less, and mixed signs do not make an
 * n^2 result small.  PhysPeak.estimated says when the peak counts one.
 *
 * The executor calls this on every run, so it allocates nothing for
 * plans of up to SMALL_PLAN queries and costs O(accesses).
 */
#include <stdint.h>
#include <stdlib.h>

#include "phys.h"

#define SMALL_PLAN 64

/* The logical extent of level l of q's result. */
static double level_dim(const PhysQuery *q, int l) {
  int64_t d = q->indices[q->out[q->out_format.mode_order[l]]].dim;
  return d < 0 ? 0 : (double)d;
}

/* Whether q is an outer union (see the top of the file) with an
 * estimate. */
static int outer_union(const PhysQuery *q) {
  if (q->kind != PQ_KERNEL || q->agg || q->nacc < 2 || !q->has_est)
    return 0;
  uint64_t seen = 0;
  for (int k = 0; k < q->nacc; k++) {
    uint64_t reads = 0;
    for (int l = 0; l < q->acc[k].order; l++) {
      int x = q->acc[k].level_idx[l];
      if (x < 0 || x >= 64)
        return 0;
      reads |= (uint64_t)1 << x;
    }
    if (reads & seen)
      return 0;
    seen |= reads;
  }
  return 1;
}

/* The entries q's result stores for sure, or by an estimate that is
 * not a loose bound (*estimated set to 1 then). */
static double counted_entries(const PhysQuery *q, int *estimated) {
  if (q->kind != PQ_KERNEL)
    return 0;
  if (outer_union(q) && q->est_nnz > q->sure_nnz) {
    *estimated = 1;
    return q->est_nnz;
  }
  return q->sure_nnz;
}

/* q's floor (see the top of the file); *estimated set when it counts an
 * estimate. */
static double result_floor(const PhysQuery *q, int *estimated) {
  int dense = q->kind == PQ_KERNEL &&
              (q->out_kind == OUT_DENSE || q->out_kind == OUT_ACCUMULATE);
  double cells = 1;
  int l = 0;
  for (; l < q->nout && (dense || q->out_format.kinds[l] == GALLEY_DENSE); l++)
    cells *= level_dim(q, l);
  if (l == q->nout)
    return 8 * cells; /* all dense: the values */
  /* the first sparse level's offsets, and the entries stored for sure:
   * a value and a coordinate of at least 4 bytes each */
  return 8 * (cells + 1) + 12 * counted_entries(q, estimated);
}

/* The largest result alive after query n ran (last[m] is -2 once m's
 * last reader ran): what to name when the peak is over the budget.
 * O(n) at each new peak, which only a plan whose results keep growing
 * reaches often. */
static void largest_alive(const double *floor, const int *last, int n,
                          PhysPeak *peak) {
  peak->largest_query = n;
  for (int m = 0; m < n; m++)
    if (last[m] != -2 && floor[m] > floor[peak->largest_query])
      peak->largest_query = m;
  peak->largest_bytes = floor[peak->largest_query];
}

/* Walk the plan with last[] (per query) as scratch. */
static void walk(const PhysPlan *pp, int *last, double *floor, PhysPeak *peak) {
  for (int n = 0; n < pp->nq; n++)
    last[n] = -1;
  for (int n = 0; n < pp->nq; n++)
    for (int k = 0; k < pp->q[n].nacc; k++) {
      const PAccess *a = &pp->q[n].acc[k];
      if (!a->is_input && a->tensor >= 0 && a->tensor < n)
        last[a->tensor] = n;
    }
  for (int k = 0; k < pp->noutputs; k++)
    last[pp->outputs[k]] = pp->nq; /* handed to the caller */
  double live = 0;
  int estimated = 0; /* a result alive now counts an estimate */
  for (int n = 0; n < pp->nq; n++) {
    int est = 0;
    floor[n] = result_floor(&pp->q[n], &est);
    live += floor[n];
    estimated |= est; /* (kept while any estimate may be alive: cheap,
                          and the message only says "estimated") */
    if (live > peak->floor_bytes) {
      peak->floor_bytes = live, peak->floor_query = n;
      peak->estimated = estimated;
      largest_alive(floor, last, n, peak);
    }
    for (int k = 0; k < pp->q[n].nacc; k++) { /* read for the last time */
      const PAccess *a = &pp->q[n].acc[k];
      if (!a->is_input && a->tensor >= 0 && a->tensor < n &&
          last[a->tensor] == n) {
        live -= floor[a->tensor];
        last[a->tensor] = -2; /* counted off once (read twice by n) */
      }
    }
  }
}

galley_status phys_peak_memory(const PhysPlan *pp, PhysPeak *peak) {
  *peak = (PhysPeak){0, -1, 0, -1, 0};
  int last_small[SMALL_PLAN];
  double floor_small[SMALL_PLAN];
  int *last = last_small;
  double *floor = floor_small;
  if (pp->nq > SMALL_PLAN) {
    last = malloc((size_t)pp->nq * sizeof *last);
    floor = malloc((size_t)pp->nq * sizeof *floor);
    if (!last || !floor) {
      free(last), free(floor);
      return GALLEY_ENOMEM;
    }
  }
  walk(pp, last, floor, peak);
  if (last != last_small)
    free(last), free(floor);
  return GALLEY_OK;
}
