/*
 * run.c -- the first distributed plan: each query's outermost loop cut
 * by work across the ranks, the parts recombined as the plan's partition
 * record says (run.h says the plan and why it is sound).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relation.h"
#include "rt_internal.h"
#include "run.h"

static galley_status nomem(galley_error *err) {
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
}

static int same_value(double x, double y) {
  return x == y || (isnan(x) && isnan(y));
}

/* The result mode that the outermost loop's index is, or -1. */
static int key_mode(const PhysQuery *q) {
  for (int m = 0; m < q->nout; m++)
    if (q->out[m] == q->loops[0])
      return m;
  return -1;
}

/* Whether query q may run in blocks of its outermost loop: a kernel with
 * a loop, and, when the blocks' results are folded, an associative and
 * commutative aggregate that starts from its identity over results whose
 * unvisited points hold it (so folding the partial results in any
 * grouping gives the whole fold). */
static int splittable(const PhysQuery *q) {
  if (q->kind != PQ_KERNEL || q->nloops == 0)
    return 0;
  if (q->part.combine != PART_REDUCE)
    return key_mode(q) >= 0;
  const Op *g = q->agg;
  unsigned need = OP_ASSOCIATIVE | OP_COMMUTATIVE | OP_HAS_IDENTITY;
  if (!g || (g->props & need) != need || !same_value(g->identity, g->agg_init))
    return 0;
  return q->nout == 0 || same_value(q->out_fill, g->identity);
}

/* Whether a later query reads query n's result. */
static int read_later(const PhysPlan *pp, int n) {
  for (int m = n + 1; m < pp->nq; m++)
    for (int x = 0; x < pp->q[m].nacc; x++)
      if (!pp->q[m].acc[x].is_input && pp->q[m].acc[x].tensor == n)
        return 1;
  return 0;
}

/* Room for a step per query of pp.  A plan is known by its address and
 * size only: a program that plans again may get the address of the plan
 * it freed, so the steps are scratch that each run writes before it
 * reads them (range, then finish), never trusted across runs. */
static int ensure_steps(DistRun *run, const PhysPlan *pp) {
  if (run->pp == pp && run->steps && run->nsteps == pp->nq)
    return 0;
  free(run->steps);
  run->steps = calloc((size_t)pp->nq + 1, sizeof *run->steps);
  run->nsteps = run->steps ? pp->nq : 0;
  run->pp = run->steps ? pp : NULL;
  for (int n = 0; n < run->nsteps; n++)
    run->steps[n].bytes = -1;
  return run->steps ? 0 : -1;
}

/* The access whose first level reads the outermost loop with the most
 * stored entries: its work per coordinate cuts the loop. */
static int work_access(const PhysQuery *q, const galley_tensor *const *in) {
  int best = -1;
  int64_t most = -1;
  for (int x = 0; x < q->nacc; x++) {
    if (q->acc[x].order == 0 || q->acc[x].level_idx[0] != q->loops[0])
      continue;
    int64_t s = galley_tensor_stored(in[x]);
    if (s > most) {
      most = s;
      best = x;
    }
  }
  return best;
}

static void part_range(void *ctx, const PhysPlan *pp, int n,
                       const galley_tensor *const *in, const int64_t *dims,
                       int64_t *lo, int64_t *hi) {
  DistRun *run = ctx;
  DistComm *c = run->c;
  if (ensure_steps(run, pp) != 0)
    return; /* runs whole; finish reports the lack of memory */
  DistStep *s = &run->steps[n];
  const PhysQuery *q = &pp->q[n];
  s->split = 0;
  if (c->size < 2 || !splittable(q))
    return;
  int64_t dim = dims[q->loops[0]];
  int64_t *prefix = NULL, *bounds = malloc(((size_t)c->size + 1) *
                                           sizeof *bounds);
  if (!bounds)
    return;
  int x = work_access(q, in);
  galley_error e;
  if (x >= 0) {
    const galley_tensor *t = in[x];
    int mode = t->lvl[0].mode;
    if (t->dims[mode] != dim ||
        dist_work_prefix(t, mode, &prefix, &e) != GALLEY_OK)
      prefix = NULL; /* an equal cut is as correct */
  }
  dist_split(prefix, dim, c->size, bounds);
  s->split = 1;
  s->lo = *lo = bounds[c->rank];
  s->hi = *hi = bounds[c->rank + 1];
  free(prefix);
  free(bounds);
}

static double fold_agg(void *ctx, double a, double b) {
  const Op *g = ctx;
  double args[2] = {a, b};
  return ops_apply(g, args, 2);
}

/* Whether the format stores any level sparsely. */
static int any_sparse(const galley_tensor *t) {
  for (int l = 0; l < t->order; l++)
    if (t->lvl[l].kind != GALLEY_RT_DENSE)
      return 1;
  return 0;
}

/* Send this rank's part of query n's result to rank 0 (or to every rank)
 * and rebuild the whole there. */
static galley_status combine(DistRun *run, const PhysPlan *pp, int n,
                             galley_tensor **res, galley_error *err) {
  DistComm *c = run->c;
  const PhysQuery *q = &pp->q[n];
  DistStep *s = &run->steps[n];
  int reduce = q->part.combine == PART_REDUCE, m0 = key_mode(q);
  int P = c->size, root = s->to_all ? -1 : 0;
  DistBlob b = {0};
  galley_status st = GALLEY_OK;
  if (!*res)
    st = rt_error(err, GALLEY_EINTERNAL, "query '%s' has no result to "
                  "combine", q->name);
  else if (reduce)
    st = dist_pack(*res, -1, 0, 0, 0, 0, &b, err);
  else
    st = dist_pack(*res, m0, s->lo, s->hi, 0, (*res)->dims[m0], &b, err);
  int64_t *v = calloc(2 * (size_t)P, sizeof *v);
  const void **d = calloc((size_t)P, sizeof *d);
  if (st == GALLEY_OK && (!v || !d))
    st = nomem(err);
  st = dist_agree(c, st, err);
  void *recv = NULL;
  if (st == GALLEY_OK)
    st = dist_gather(c, b.data, b.len, root, &recv, v, v + P, err);
  if (st == GALLEY_OK && recv) {
    for (int k = 0; k < P; k++)
      d[k] = (char *)recv + v[P + k];
    galley_tensor *t = NULL;
    st = dist_unpack(P, (const void *const *)d, v, -1, 0, NULL,
                     reduce ? fold_agg : NULL, (void *)q->agg,
                     reduce && any_sparse(*res), &t, err);
    if (st == GALLEY_OK) {
      galley_tensor_free(*res);
      *res = t;
    }
  }
  free(recv);
  free(b.data);
  free(v);
  free(d);
  return st;
}

/* GALLEY_DIST_FAULT: this rank fails after query n (-1: at the end). */
static galley_status maybe_fault(DistRun *run, const PhysPlan *pp, int n,
                                 galley_status st, galley_error *err) {
  if (st != GALLEY_OK || run->fault_rank != run->c->rank ||
      run->fault_query != n)
    return st;
  if (run->fault_kill)
    raise(SIGKILL);
  return rt_error(err, GALLEY_EDATA, "fault injected on rank %d after "
                  "query '%s' (GALLEY_DIST_FAULT)", run->c->rank,
                  n >= 0 && pp ? pp->q[n].name : "(end)");
}

static galley_status part_finish(void *ctx, const PhysPlan *pp, int n,
                                 galley_status st, galley_tensor **res,
                                 galley_error *err) {
  DistRun *run = ctx;
  DistComm *c = run->c;
  if (st == GALLEY_OK && ensure_steps(run, pp) != 0)
    st = nomem(err);
  st = maybe_fault(run, pp, n, st, err);
  int64_t before = c->bytes_sent;
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK)
    return st;
  DistStep *s = &run->steps[n];
  const PhysQuery *q = &pp->q[n];
  if (q->kind != PQ_KERNEL || q->nloops == 0)
    s->split = 0;
  s->to_all = read_later(pp, n);
  if (s->split)
    st = combine(run, pp, n, res, err);
  s->bytes = c->bytes_sent - before;
  s->split = s->split && st == GALLEY_OK;
  return st;
}

static galley_status part_done(void *ctx, galley_status st,
                               galley_error *err) {
  DistRun *run = ctx;
  DistComm *c = run->c;
  st = maybe_fault(run, run->pp, -1, st, err);
  if (st == GALLEY_OK || !c->agreed)
    st = dist_agree(c, st, err);
  if (st == EXEC_ASSUMPTION)
    c->agreed = 0; /* the program plans again and runs again */
  return st;
}

void dist_run_init(DistRun *run, DistComm *c) {
  memset(run, 0, sizeof *run);
  run->c = c;
  run->parts.ctx = run;
  run->parts.range = part_range;
  run->parts.finish = part_finish;
  run->parts.done = part_done;
  run->fault_rank = run->fault_query = -1;
  const char *f = getenv("GALLEY_DIST_FAULT");
  if (f && *f) {
    char kill[8] = "";
    int r = -1, qn = -1;
    if (sscanf(f, "%d:%d:%7s", &r, &qn, kill) >= 1) {
      run->fault_rank = r;
      run->fault_query = qn;
      run->fault_kill = strcmp(kill, "kill") == 0;
    }
  }
}

void dist_run_free(DistRun *run) {
  free(run->steps);
  run->steps = NULL;
  run->nsteps = 0;
}

/* The entries a result is estimated to store: the planner's estimate,
 * or every cell of an all-dense result. */
static double est_entries(const PhysQuery *q) {
  double cells = 1;
  int dense = 1;
  for (int m = 0; m < q->nout; m++)
    cells *= (double)q->indices[q->out[m]].dim;
  for (int l = 0; l < q->out_format.order; l++)
    dense &= q->out_format.kinds[l] == GALLEY_DENSE;
  if (dense || !q->has_est)
    return cells;
  return q->est_nnz < cells ? q->est_nnz : cells;
}

galley_status dist_run_estimate(DistRun *run, const PhysPlan *pp,
                                galley_error *err) {
  if (ensure_steps(run, pp) != 0)
    return nomem(err);
  double P = run->c->size;
  const double header = 8 * 3 + 8 * GALLEY_MAX_ORDER + 8 + 4 * 2 *
                        GALLEY_MAX_ORDER; /* a packed block's header */
  for (int n = 0; n < pp->nq; n++) {
    const PhysQuery *q = &pp->q[n];
    DistStep *s = &run->steps[n];
    s->split = P > 1 && splittable(q);
    s->to_all = read_later(pp, n);
    if (!s->split) {
      s->est_bytes = 0;
      continue;
    }
    double entry = 8.0 * (q->nout + 1), E = est_entries(q);
    /* each rank's block: 1/P of the entries (a fold: all of them) */
    double mine = q->part.combine == PART_REDUCE ? E : E / P;
    double receivers = s->to_all ? P - 1 : (P - 1) / P;
    double counts = 8 * P * (P - 1);
    s->est_bytes = (mine * entry + header) * receivers * P + counts;
  }
  return GALLEY_OK;
}

int64_t dist_run_step_bytes(DistRun *run, int n) {
  int64_t mine = n < run->nsteps ? run->steps[n].bytes : -1;
  if (mine < 0)
    mine = 0;
  return dist_sum_i64(run->c, mine);
}

static const char *fmt_bytes(double b, char *buf, size_t size) {
  if (b < 1e4)
    snprintf(buf, size, "%.0f B", b);
  else if (b < 1e7)
    snprintf(buf, size, "%.1f kB", b / 1e3);
  else
    snprintf(buf, size, "%.1f MB", b / 1e6);
  return buf;
}

void dist_run_print(DistRun *run, const PhysPlan *pp, int measured,
                    int64_t input_bytes, FILE *f) {
  galley_error e;
  DistStep *saved = NULL;
  if (measured && run->steps && run->pp == pp) {
    saved = malloc((size_t)pp->nq * sizeof *saved);
    if (saved)
      memcpy(saved, run->steps, (size_t)pp->nq * sizeof *saved);
  }
  int ok = dist_run_estimate(run, pp, &e) == GALLEY_OK;
  int P = run->c->size;
  char b1[32], b2[32];
  if (f)
    fprintf(f, "Distributed plan over %d ranks (1D row blocks cut by "
               "work; inputs replicated):\n", P);
  if (f)
    fprintf(f, "  step 0: broadcast the inputs from rank 0, est %s\n",
            fmt_bytes((double)input_bytes * (P - 1), b1, sizeof b1));
  for (int n = 0; ok && n < pp->nq; n++) {
    const PhysQuery *q = &pp->q[n];
    DistStep *s = &run->steps[n];
    int64_t got = 0;
    if (saved) {
      run->steps[n].bytes = saved[n].bytes;
      got = dist_run_step_bytes(run, n); /* collective: every rank */
    }
    if (!f)
      continue;
    fprintf(f, "  step %d: %s: ", n + 1, q->name);
    if (!s->split)
      fprintf(f, "whole on every rank (%s)",
              q->kind == PQ_TRANSPOSE ? "a transpose"
              : q->nloops == 0        ? "no loop"
                                      : "not split");
    else
      fprintf(f, "loop %s cut by work into %d blocks, %s, %s to %s",
              q->indices[q->loops[0]].name, P,
              phys_part_combine_name(q->part.combine),
              q->part.combine == PART_REDUCE ? "folded" : "concatenated",
              s->to_all ? "every rank" : "rank 0");
    fprintf(f, ", est %s", fmt_bytes(s->est_bytes, b1, sizeof b1));
    if (saved)
      fprintf(f, ", measured %s", fmt_bytes((double)got, b2, sizeof b2));
    fprintf(f, "\n");
  }
  free(saved);
}
