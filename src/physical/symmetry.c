/*
 * symmetry.c -- sums over a symmetric matrix that count each unordered
 * tuple once.
 *
 * The triangle program as written, sum(i, j, k: E[i,j] * E[j,k] * E[i,k]),
 * visits every triangle 6 times, plus terms with two equal indices.  When
 * E is symmetric with an empty diagonal, fill 0 and finite values, a term
 * with two equal indices has a factor E[x,x] = 0, and the other terms come
 * in 3! equal permutations, so the sum is 6 times the sum over i > j > k.
 * The same holds for any product whose index pairs cover the complete
 * graph on the summed indices, each pair equally often (4-cliques: 4!
 * over 6 factors).
 *
 * The rewrite keeps the plan's loop order s_0, s_1, ... over the summed
 * indices and bounds each s_m by s_{m-1} (PhysQuery.upper): a sorted
 * walk stops at the bound.  Each access reads the matrix as
 * E[outer, inner] (E is its own transpose), so no transpose is made.
 */
#include <math.h>
#include <string.h>

#include "phys.h"
#include "rt_internal.h"

/* Through the runtime, which keeps the answer with the tensor: the
 * re-run rule (src/api/program.c) then knows that the plan relied on it
 * and checks it for the next data. */
int phys_matrix_symmetry(const galley_tensor *t) {
  if (t->order != 2 || t->dims[0] != t->dims[1])
    return 0;
  galley_format f;
  galley_tensor_format(t, &f);
  for (int l = 0; l < 2; l++)
    if (f.kinds[l] != GALLEY_DENSE && f.kinds[l] != GALLEY_LIST)
      return 0; /* only dense and list matrices are read as their transpose */
  int s = rt_tensor_symmetry(t);
  if (!(s & RT_SYMMETRIC))
    return 0;
  galley_facts facts;
  rt_tensor_facts(t, &facts);
  int hollow = t->fill == 0 && (s & RT_ZERO_DIAGONAL) &&
               rt_facts_finite(&facts); /* 0 * v cancels */
  return hollow ? PHYS_SYMMETRIC | PHYS_HOLLOW : PHYS_SYMMETRIC;
}

/* Collect the factors of a product (nested built-in `*` maps) into fac[];
 * their number, or -1 when n is not such a product of at most max. */
static int product_factors(const Node *n, Node **fac, int max, int count) {
  if (n->kind == ND_MAP && n->op->is_builtin && strcmp(n->op->name, "*") == 0) {
    for (int k = 0; k < n->nargs && count >= 0; k++)
      count = product_factors(n->args[k], fac, max, count);
    return count;
  }
  if (count < 0 || count >= max)
    return -1;
  fac[count] = (Node *)n;
  return count + 1;
}

/* Whether the accesses' index pairs cover the complete graph on the
 * summed indices, every pair the same number of times (so the product is
 * invariant under permutations of them); *input receives their input. */
static int complete_graph(const PhysQuery *q, Node **fac, int nfac,
                          int *input) {
  unsigned char seen[GALLEY_MAX_ORDER * GALLEY_MAX_ORDER] = {0};
  *input = -1;
  for (int k = 0; k < nfac; k++) {
    const Node *f = fac[k];
    if (f->kind == ND_CONST)
      continue;
    if (f->kind != ND_INPUT || f->nidx != 2 || (*input >= 0 && f->tensor != *input))
      return 0;
    *input = f->tensor;
    int a = f->idx[0], b = f->idx[1];
    if (a == b || !phys_is_reduced(q, a) || !phys_is_reduced(q, b) || a >= GALLEY_MAX_ORDER ||
        b >= GALLEY_MAX_ORDER)
      return 0;
    int lo = a < b ? a : b, hi = a < b ? b : a;
    seen[lo * GALLEY_MAX_ORDER + hi]++;
  }
  int times = -1;
  for (int x = 0; x < q->nred; x++)
    for (int y = x + 1; y < q->nred; y++) {
      int a = q->red[x] < q->red[y] ? q->red[x] : q->red[y];
      int b = q->red[x] < q->red[y] ? q->red[y] : q->red[x];
      int c = seen[a * GALLEY_MAX_ORDER + b];
      if (c == 0 || (times >= 0 && c != times))
        return 0;
      times = c;
    }
  return *input >= 0;
}

int phys_symmetric_sum(Arena *a, PhysQuery *q, const Op *mul,
                       int (*symmetric)(void *ctx, int input), void *ctx) {
  const Op *agg = q->agg;
  if (!agg || !mul || !agg->is_builtin || strcmp(agg->name, "+") != 0 || q->nred < 2 ||
      q->nloops > GALLEY_MAX_ORDER || phys_interleaved(q))
    return 0;
  /* the summed loops come last (outputs first), ids are loop positions */
  for (int d = 0; d < q->nloops; d++)
    if (q->loops[d] != d || phys_is_reduced(q, d) != (d >= q->nout))
      return 0;
  Node *fac[GALLEY_MAX_ORDER * GALLEY_MAX_ORDER];
  int nfac = product_factors(q->expr, fac, GALLEY_MAX_ORDER * GALLEY_MAX_ORDER, 0);
  int input;
  if (nfac < 1 || !complete_graph(q, fac, nfac, &input) ||
      symmetric(ctx, input) != (PHYS_SYMMETRIC | PHYS_HOLLOW))
    return 0;
  for (int k = 0; k < nfac; k++) /* read E[outer, inner] */
    if (fac[k]->kind == ND_INPUT && fac[k]->idx[0] > fac[k]->idx[1]) {
      int t = fac[k]->idx[0];
      fac[k]->idx[0] = fac[k]->idx[1];
      fac[k]->idx[1] = t;
    }
  q->upper = arena_alloc(a, ((size_t)q->nloops + 1) * sizeof *q->upper);
  double perms = 1;
  for (int d = 0; d < q->nloops; d++) {
    q->upper[d] = d > q->nout ? d - 1 : -1;
    if (d >= q->nout)
      perms *= (double)(d - q->nout + 1);
  }
  Node *args[2] = {plan_const(a, q->expr->loc, perms), q->expr};
  q->expr = plan_map(a, q->expr->loc, mul, 2, args);
  return 1;
}
