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
 * and would refuse plans that fit.)
 *
 * The executor calls this on every run, so it allocates nothing for
 * plans of up to SMALL_PLAN queries and costs O(accesses).
 */
#include <stdlib.h>

#include "phys.h"

#define SMALL_PLAN 64

/* The logical extent of level l of q's result. */
static double level_dim(const PhysQuery *q, int l) {
  int64_t d = q->indices[q->out[q->out_format.mode_order[l]]].dim;
  return d < 0 ? 0 : (double)d;
}

/* q's floor (see the top of the file). */
static double result_floor(const PhysQuery *q) {
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
  return 8 * (cells + 1) + (q->kind == PQ_KERNEL ? 12 * q->sure_nnz : 0);
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
  for (int n = 0; n < pp->nq; n++) {
    floor[n] = result_floor(&pp->q[n]);
    live += floor[n];
    if (live > peak->floor_bytes)
      peak->floor_bytes = live, peak->floor_query = n;
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
  *peak = (PhysPeak){0, -1};
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
