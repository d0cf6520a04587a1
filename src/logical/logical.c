/*
 * logical.c -- printing and freeing logical plans.  The trivial logical
 * plan (logical_lift) is made by lift.c, the optimized one by optimize.c.
 */
#include <string.h>

#include "logical.h"

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
