/*
 * memory.c -- how much memory a plan's results need while it runs, known
 * before any kernel runs (issue 12: a hard memory budget).
 *
 * The executor checks each result against the budget as it allocates it.
 * That alone lets a plan run half-way and then fail when a later result
 * no longer fits beside the ones still alive.  Here the plan is walked in
 * execution order with the liveness the executor uses (a result lives
 * until its last reader has run; outputs live to the end), adding up
 * what each result needs.  (A result nobody reads stays to the end, as
 * in the executor.)
 *
 * Two figures per result:
 *   floor     bytes it needs for sure: an all-dense result's values and a
 *             sparse result's dense prefix (the fiber offsets under its
 *             leading dense levels).  Exact, so a plan whose floor passes
 *             the budget is refused before running, never wrongly.
 *   estimate  the floor plus the estimated stored entries (est_nnz, from
 *             the cost planner's estimators: an upper bound in spirit,
 *             often loose), for explain.
 */
#include <math.h>
#include <stdlib.h>

#include "phys.h"

/* Bytes of one stored entry of a sparse result: its value and, per
 * sparse level, a coordinate (plus, loosely, a position). */
#define SPARSE_ENTRY_BYTES(levels) (8.0 + 16.0 * (levels))

/* The logical extent of level l of q's result. */
static double level_dim(const PhysQuery *q, int l) {
  int mode = q->out_format.mode_order[l];
  int64_t d = q->indices[q->out[mode]].dim;
  return d < 0 ? 0 : (double)d;
}

static int all_dense(const PhysQuery *q) {
  for (int l = 0; l < q->nout; l++)
    if (q->out_format.kinds[l] != GALLEY_DENSE)
      return 0;
  return 1;
}

/* The floor and the estimate of q's result (see the top of the file). */
static void result_bytes(const PhysQuery *q, double *floor, double *est) {
  double cells = 1;
  int l = 0;
  for (; l < q->nout && q->out_format.kinds[l] == GALLEY_DENSE; l++)
    cells *= level_dim(q, l);
  if (q->nout == 0 || all_dense(q) ||
      (q->kind == PQ_KERNEL &&
       (q->out_kind == OUT_DENSE || q->out_kind == OUT_ACCUMULATE))) {
    for (; l < q->nout; l++)
      cells *= level_dim(q, l);
    *floor = *est = 8 * cells;
    return;
  }
  *floor = 8 * (cells + 1); /* the first sparse level's offsets */
  double nnz = q->has_est && isfinite(q->est_nnz) ? q->est_nnz : 0;
  *est = *floor + nnz * SPARSE_ENTRY_BYTES(q->nout - l);
}

/* The last query reading each result (-1: none). */
static void last_readers(const PhysPlan *pp, int *last) {
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
}

galley_status phys_peak_memory(const PhysPlan *pp, PhysPeak *peak) {
  *peak = (PhysPeak){0, 0, -1, -1};
  if (pp->nq == 0)
    return GALLEY_OK;
  int *last = malloc((size_t)pp->nq * sizeof *last);
  double *fl = malloc((size_t)pp->nq * sizeof *fl);
  double *es = malloc((size_t)pp->nq * sizeof *es);
  if (!last || !fl || !es) {
    free(last), free(fl), free(es);
    return GALLEY_ENOMEM;
  }
  last_readers(pp, last);
  double live_floor = 0, live_est = 0;
  for (int n = 0; n < pp->nq; n++) {
    result_bytes(&pp->q[n], &fl[n], &es[n]);
    live_floor += fl[n];
    live_est += es[n];
    if (live_floor > peak->floor_bytes)
      peak->floor_bytes = live_floor, peak->floor_query = n;
    if (live_est > peak->est_bytes)
      peak->est_bytes = live_est, peak->est_query = n;
    for (int m = 0; m < n; m++) /* results read for the last time */
      if (last[m] == n) {
        live_floor -= fl[m];
        live_est -= es[m];
      }
  }
  free(last), free(fl), free(es);
  return GALLEY_OK;
}
