/*
 * logical.c -- the trivial logical plan (logical_lift), printing and
 * freeing logical plans.
 *
 * logical_lift is phys_default_plan's first step: size inference with the
 * reference evaluator's messages, declared fills, every nested aggregate
 * lifted into a query of its own.  Rather than repeat that inference, it
 * runs the default planner and reads the lifted queries back out of its
 * plan: every PQ_KERNEL query is one logical query (same index table, same
 * output and reduced indices, same expression), and a PQ_TRANSPOSE query
 * is only a storage detail, so an access to one reads its source instead
 * (the access node keeps its logical indices: a transpose changes the
 * storage order, never the logical modes).
 */
#include <math.h>
#include <string.h>

#include "logical.h"


static int *copy_ints(Arena *a, int n, const int *v) {
  int *c = arena_alloc(a, ((size_t)n + 1) * sizeof *c);
  if (n)
    memcpy(c, v, (size_t)n * sizeof *c);
  return c;
}

/* A copy of the physical expression n as a logical one: aliases name
 * logical queries (lq_of[physical query]); transposes read their source. */
static Node *lift_node(Arena *a, const PhysPlan *pp, const int *lq_of,
                       const Node *n) {
  Node *c = arena_alloc(a, sizeof *c);
  *c = *n;
  c->access = 0;
  switch (n->kind) {
  case ND_INPUT:
  case ND_ALIAS: {
    c->idx = copy_ints(a, n->nidx, n->idx);
    int t = n->tensor;
    int is_input = n->kind == ND_INPUT;
    while (!is_input && pp->q[t].kind == PQ_TRANSPOSE) {
      is_input = pp->q[t].acc[0].is_input;
      t = pp->q[t].acc[0].tensor;
    }
    c->kind = is_input ? ND_INPUT : ND_ALIAS;
    c->tensor = is_input ? t : lq_of[t];
    return c;
  }
  case ND_MAP:
    c->args = arena_alloc(a, ((size_t)n->nargs + 1) * sizeof *c->args);
    for (int k = 0; k < n->nargs; k++)
      c->args[k] = lift_node(a, pp, lq_of, n->args[k]);
    return c;
  default:
    return c;
  }
}

static void lift_query(Arena *a, const PhysPlan *pp, const int *lq_of,
                       const PhysQuery *pq, int number, LogicalQuery *lq) {
  lq->name = pq->user_query >= 0 ? pq->name : arena_printf(a, "_l%d", number);
  lq->user_query = pq->user_query;
  lq->nindices = pq->nindices;
  lq->indices = arena_alloc(a, ((size_t)pq->nindices + 1) * sizeof *lq->indices);
  if (pq->nindices)
    memcpy(lq->indices, pq->indices, (size_t)pq->nindices * sizeof *lq->indices);
  lq->nout = pq->nout;
  lq->out = copy_ints(a, pq->nout, pq->out);
  lq->agg = pq->agg;
  lq->nred = pq->agg ? pq->nred : 0;
  lq->red = copy_ints(a, lq->nred, pq->red);
  lq->expr = lift_node(a, pp, lq_of, pq->expr);
  lq->est_nnz = 0;
  lq->cost = 0;
  lq->out_fill = pq->out_fill;
}

static LogicalPlan *lift_plan(Arena *a, const Program *p, const PhysPlan *pp) {
  LogicalPlan *lp = arena_alloc(a, sizeof *lp);
  lp->arena = a;
  lp->prog = p;
  int *lq_of = arena_alloc(a, ((size_t)pp->nq + 1) * sizeof *lq_of);
  lp->q = arena_alloc(a, ((size_t)pp->nq + 1) * sizeof *lp->q);
  for (int k = 0; k < pp->nq; k++) {
    lq_of[k] = -1;
    if (pp->q[k].kind != PQ_KERNEL)
      continue;
    lq_of[k] = lp->nq;
    lift_query(a, pp, lq_of, &pp->q[k], lp->nq, &lp->q[lp->nq]);
    lp->nq++;
  }
  lp->noutputs = pp->noutputs;
  lp->outputs = arena_alloc(a, ((size_t)pp->noutputs + 1) * sizeof(int));
  lp->output_names =
      arena_alloc(a, ((size_t)pp->noutputs + 1) * sizeof(const char *));
  for (int k = 0; k < pp->noutputs; k++) {
    lp->outputs[k] = lq_of[pp->outputs[k]];
    lp->output_names[k] = pp->output_names[k];
  }
  return lp;
}

galley_status logical_lift(const Program *p, const galley_tensor *const *inputs,
                           LogicalPlan **out, galley_error *err) {
  *out = NULL;
  PhysPlan *pp;
  galley_status st = phys_lift_plan(p, inputs, &pp, err);
  if (st != GALLEY_OK)
    return st;
  Arena *a = arena_new();
  if (!a) {
    phys_plan_free(pp);
    if (err) {
      memset(err, 0, sizeof *err);
      err->status = GALLEY_ENOMEM;
      snprintf(err->msg, sizeof err->msg, "out of memory planning the program (logical plan)");
    }
    return GALLEY_ENOMEM;
  }
  jmp_buf oom;
  a->oom = &oom;
  if (setjmp(oom)) {
    arena_free(a);
    phys_plan_free(pp);
    if (err) {
      memset(err, 0, sizeof *err);
      err->status = GALLEY_ENOMEM;
      snprintf(err->msg, sizeof err->msg, "out of memory planning the program (logical plan)");
    }
    return GALLEY_ENOMEM;
  }
  *out = lift_plan(a, p, pp);
  a->oom = NULL;
  phys_plan_free(pp);
  return GALLEY_OK;
}

void logical_plan_free(LogicalPlan *lp) {
  if (lp)
    arena_free(lp->arena);
}

/* ------------------------------------------------------------------ */
/* Printing                                                            */
/* ------------------------------------------------------------------ */

static void print_indices(const LogicalQuery *q, int n, const int *ids,
                          FILE *f) {
  for (int k = 0; k < n; k++)
    fprintf(f, "%s%s", k ? "," : "", q->indices[ids[k]].name);
}

static void print_node(const LogicalPlan *lp, const LogicalQuery *q,
                       const Node *n, FILE *f) {
  switch (n->kind) {
  case ND_CONST:
    fprintf(f, "%.17g", n->value);
    return;
  case ND_INPUT:
  case ND_ALIAS:
    fprintf(f, "%s[", n->kind == ND_INPUT ? lp->prog->inputs[n->tensor].name
                                          : lp->q[n->tensor].name);
    print_indices(q, n->nidx, n->idx, f);
    fputc(']', f);
    return;
  case ND_MAP:
    fprintf(f, "Map(%s", n->op->name);
    for (int k = 0; k < n->nargs; k++) {
      fputs(", ", f);
      print_node(lp, q, n->args[k], f);
    }
    fputc(')', f);
    return;
  case ND_AGG: /* not in logical plans; printed for debugging */
    fprintf(f, "Agg(%s, ", n->op->name);
    print_indices(q, n->nidx, n->idx, f);
    fputs(", ", f);
    print_node(lp, q, n->arg, f);
    fputc(')', f);
    return;
  case ND_PARAM:
    fprintf(f, "$%d", n->tensor);
    return;
  }
}

void logical_print(const LogicalPlan *lp, FILE *f) {
  for (int k = 0; k < lp->nq; k++) {
    const LogicalQuery *q = &lp->q[k];
    fprintf(f, "Query(%s[", q->name);
    print_indices(q, q->nout, q->out, f);
    fputs("], ", f);
    if (q->agg) {
      fprintf(f, "Agg(%s, ", q->agg->name);
      print_indices(q, q->nred, q->red, f);
      fputs(", ", f);
    }
    print_node(lp, q, q->expr, f);
    if (q->agg)
      fputc(')', f);
    fprintf(f, ")  est %.6g  cost %.6g\n", q->est_nnz, q->cost);
  }
  fputs("Outputs(", f);
  for (int k = 0; k < lp->noutputs; k++)
    fprintf(f, "%s%s", k ? ", " : "", lp->q[lp->outputs[k]].name);
  fputs(")\n", f);
}
