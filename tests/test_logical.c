/*
 * test_logical.c -- the logical optimizer (src/logical/optimize.c): plan
 * shapes for known decisions (matrix chains follow sparsity, the
 * parameter vector is pushed into a join, triangles stay one query),
 * exact search never costs more than greedy, determinism, and the main
 * thing: optimized plans, evaluated densely query by query, equal the
 * reference evaluator on randomized sums of products.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "ir.h"
#include "logical.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static Program *parse(const char *src) {
  Program *p = NULL;
  galley_error err;
  galley_status st = front_parse("t.tin", src, strlen(src), &p, NULL, &err);
  ck_assert_msg(st == GALLEY_OK, "parse: %s\n%s", err.msg, src);
  return p;
}

/* A random tensor: each entry stored with probability density, values in
 * [-1, 1) (never equal to the fill), unstored entries fill. */
static galley_tensor *random_tensor(test_rng *r, int order,
                                    const int64_t *dims, double density,
                                    double fill) {
  int64_t space = 1;
  for (int k = 0; k < order; k++)
    space *= dims[k];
  int64_t *coords = malloc((size_t)(space * order + 1) * sizeof *coords);
  double *vals = malloc((size_t)(space + 1) * sizeof *vals);
  int64_t nnz = 0;
  for (int64_t e = 0; e < space; e++) {
    if (test_rng_double(r, 0, 1) >= density)
      continue;
    int64_t rest = e;
    for (int k = order - 1; k >= 0; k--) {
      coords[nnz * order + k] = rest % dims[k];
      rest /= dims[k];
    }
    double v = test_rng_double(r, -1, 1);
    vals[nnz++] = v == fill ? v + 0.25 : v;
  }
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(order, dims, nnz, coords, vals,
                                          fill, NULL, &t, &err),
                   GALLEY_OK);
  free(coords);
  free(vals);
  return t;
}

static galley_tensor *matrix(test_rng *r, int64_t m, int64_t n,
                             double density) {
  int64_t d[2] = {m, n};
  return random_tensor(r, 2, d, density, 0);
}

static LogicalPlan *optimize(const Program *p, galley_tensor **in,
                             EstimatorKind est, SearchKind search) {
  OptOptions o = opt_defaults();
  o.estimator = est;
  o.search = search;
  LogicalPlan *lp = NULL;
  galley_error err;
  galley_status st = logical_optimize(p, (const galley_tensor *const *)in,
                                      &o, &lp, &err);
  ck_assert_msg(st == GALLEY_OK, "optimize: %s", err.msg);
  return lp;
}

static char *print_plan(const LogicalPlan *lp) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  logical_print(lp, f);
  fclose(f);
  return buf;
}

/* Whether expression n reads input number `input`. */
static int reads_input(const Node *n, int input) {
  if (n->kind == ND_INPUT)
    return n->tensor == input;
  if (n->kind == ND_MAP)
    for (int k = 0; k < n->nargs; k++)
      if (reads_input(n->args[k], input))
        return 1;
  return 0;
}

static double total_cost(const LogicalPlan *lp) {
  double c = 0;
  for (int k = 0; k < lp->nq; k++)
    c += lp->q[k].cost;
  return c;
}

static void free_inputs(galley_tensor **in, int n) {
  for (int k = 0; k < n; k++)
    galley_tensor_free(in[k]);
}

/* ------------------------------------------------------------------ */
/* A dense evaluator over logical plans                                */
/* ------------------------------------------------------------------ */

typedef struct Dense {
  int order;
  int64_t dims[GALLEY_MAX_ORDER];
  double *v;
} Dense;

static int64_t dense_pos(const Dense *d, const Node *n, const int64_t *at) {
  int64_t pos = 0;
  for (int k = 0; k < n->nidx; k++)
    pos = pos * d->dims[k] + at[n->idx[k]];
  return pos;
}

static double eval_node(const Node *n, const Dense *in, const Dense *qs,
                        const int64_t *at) {
  switch (n->kind) {
  case ND_CONST:
    return n->value;
  case ND_INPUT:
    return in[n->tensor].v[dense_pos(&in[n->tensor], n, at)];
  case ND_ALIAS:
    return qs[n->tensor].v[dense_pos(&qs[n->tensor], n, at)];
  case ND_MAP: {
    double args[64];
    ck_assert_int_le(n->nargs, 64);
    for (int k = 0; k < n->nargs; k++)
      args[k] = eval_node(n->args[k], in, qs, at);
    return ops_apply(n->op, args, n->nargs);
  }
  default:
    ck_abort_msg("unexpected node kind %d", n->kind);
    return 0;
  }
}

/* Query q densely: every assignment of its indices in row-major order,
 * the aggregate folded from agg_init in that order. */
static void eval_query(const LogicalQuery *q, const Dense *in, Dense *qs,
                       int self) {
  Dense *r = &qs[self];
  r->order = q->nout;
  int64_t space = 1;
  for (int k = 0; k < q->nout; k++) {
    r->dims[k] = q->indices[q->out[k]].dim;
    space *= r->dims[k];
  }
  r->v = malloc((size_t)(space + 1) * sizeof *r->v);
  unsigned char *seen = calloc((size_t)space + 1, 1);
  int64_t at[64] = {0}, total = 1;
  for (int k = 0; k < q->nindices; k++)
    total *= q->indices[k].dim;
  for (int64_t e = 0; e < total; e++) {
    int64_t rest = e;
    for (int k = q->nindices - 1; k >= 0; k--) {
      at[k] = rest % q->indices[k].dim;
      rest /= q->indices[k].dim;
    }
    int64_t pos = 0;
    for (int k = 0; k < q->nout; k++)
      pos = pos * r->dims[k] + at[q->out[k]];
    double v = eval_node(q->expr, in, qs, at);
    if (!q->agg) {
      r->v[pos] = v;
      continue;
    }
    double args[2] = {seen[pos] ? r->v[pos] : q->agg->agg_init, v};
    r->v[pos] = ops_apply(q->agg, args, 2);
    seen[pos] = 1;
  }
  for (int64_t e = 0; e < space && q->agg; e++)
    if (!seen[e])
      r->v[e] = q->agg->agg_init; /* a reduced index of size 0 */
  free(seen);
}

static void to_dense(const galley_tensor *t, Dense *d) {
  d->order = galley_tensor_order(t);
  int64_t space = 1;
  for (int k = 0; k < d->order; k++) {
    d->dims[k] = galley_tensor_dim(t, k);
    space *= d->dims[k];
  }
  d->v = malloc((size_t)(space + 1) * sizeof *d->v);
  galley_error err;
  ck_assert_int_eq(galley_tensor_to_dense(t, d->v, space, &err), GALLEY_OK);
}

static int close_enough(double a, double b) {
  if (isnan(a) || isnan(b))
    return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b))
    return a == b;
  return fabs(a - b) <= 1e-9 * (1 + fmax(fabs(a), fabs(b)));
}

/* Evaluate lp densely and compare every user query with refeval_run. */
static void check_against_reference(const Program *p, galley_tensor **inputs,
                                    const LogicalPlan *lp) {
  galley_tensor **ref = calloc((size_t)p->nqueries + 1, sizeof *ref);
  galley_error err;
  ck_assert_int_eq(refeval_run(p, (const galley_tensor *const *)inputs, ref,
                               &err),
                   GALLEY_OK);
  Dense *in = calloc((size_t)p->ninputs + 1, sizeof *in);
  Dense *qs = calloc((size_t)lp->nq + 1, sizeof *qs);
  for (int k = 0; k < p->ninputs; k++)
    to_dense(inputs[k], &in[k]);
  int checked = 0;
  for (int k = 0; k < lp->nq; k++) {
    eval_query(&lp->q[k], in, qs, k);
    int u = lp->q[k].user_query;
    if (u < 0)
      continue;
    Dense want;
    to_dense(ref[u], &want);
    int64_t space = 1;
    for (int m = 0; m < want.order; m++)
      space *= want.dims[m];
    for (int64_t e = 0; e < space; e++)
      ck_assert_msg(close_enough(qs[k].v[e], want.v[e]),
                    "%s[%lld]: %.17g != %.17g", lp->q[k].name, (long long)e,
                    qs[k].v[e], want.v[e]);
    free(want.v);
    checked++;
  }
  ck_assert_int_eq(checked, p->nqueries);
  for (int k = 0; k < p->ninputs; k++)
    free(in[k].v);
  for (int k = 0; k < lp->nq; k++)
    free(qs[k].v);
  for (int k = 0; k < p->nqueries; k++)
    galley_tensor_free(ref[k]);
  free(in);
  free(qs);
  free(ref);
}

/* ------------------------------------------------------------------ */
/* Plan shapes                                                         */
/* ------------------------------------------------------------------ */

static const char *chain3 =
    "input A[i, j], B[j, k], C[k, l]\n"
    "D[i, l] = sum(j, k: A[i, j] * B[j, k] * C[k, l])\n";

/* The first materialized query of the chain and what it reads. */
static void chain_case(double da, double db, double dc, int first_input,
                       int other_end) {
  test_rng r = test_rng_seed(7);
  Program *p = parse(chain3);
  galley_tensor *in[3] = {matrix(&r, 200, 200, da), matrix(&r, 200, 200, db),
                          matrix(&r, 200, 200, dc)};
  for (int e = 0; e < 2; e++) {
    for (int s = 0; s < 2; s++) {
      LogicalPlan *lp = optimize(p, in, (EstimatorKind)e, (SearchKind)s);
      ck_assert_int_eq(lp->nq, 2);
      ck_assert(reads_input(lp->q[0].expr, first_input));
      ck_assert(reads_input(lp->q[0].expr, 1));
      ck_assert(!reads_input(lp->q[0].expr, other_end));
      ck_assert_str_eq(lp->q[1].name, "D");
      ck_assert_int_eq(lp->outputs[0], 1);
      logical_plan_free(lp);
    }
  }
  free_inputs(in, 3);
  program_free(p);
}

START_TEST(chain_sparse_end_first) { chain_case(0.1, 0.1, 1e-3, 2, 0); }
END_TEST

START_TEST(chain_sparse_start_first) { chain_case(1e-3, 0.1, 0.1, 0, 2); }
END_TEST

/* galley-notes 5.3 case 25: A(2x10) B(10x3) C(3x4) eliminates j first. */
START_TEST(chain_small_dims) {
  test_rng r = test_rng_seed(25);
  Program *p = parse(chain3);
  galley_tensor *in[3] = {matrix(&r, 2, 10, 1), matrix(&r, 10, 3, 1),
                          matrix(&r, 3, 4, 1)};
  for (int s = 0; s < 2; s++) {
    LogicalPlan *lp = optimize(p, in, EST_CHAIN, (SearchKind)s);
    ck_assert_int_eq(lp->nq, 2);
    const LogicalQuery *q = &lp->q[0];
    ck_assert_int_eq(q->nred, 1);
    ck_assert_str_eq(q->indices[q->red[0]].name, "j");
    ck_assert(reads_input(q->expr, 0) && reads_input(q->expr, 1));
    check_against_reference(p, in, lp);
    logical_plan_free(lp);
  }
  free_inputs(in, 3);
  program_free(p);
}
END_TEST

/* ML over a join (paper Sec. 4.6): the parameter vector meets the
 * dimension table first, never the big fact table. */
START_TEST(ml_over_join_pushes_theta) {
  test_rng r = test_rng_seed(46);
  Program *p = parse("input S[i, p], P[p, j], theta[j]\n"
                     "R[i] = sigmoid(sum(p, j: S[i, p] * P[p, j] * theta[j]))\n");
  int64_t dt = 100;
  galley_tensor *in[3] = {matrix(&r, 2000, 50, 0.05), matrix(&r, 50, 100, 1),
                          random_tensor(&r, 1, &dt, 1, 0)};
  for (int e = 0; e < 2; e++) {
    LogicalPlan *lp = optimize(p, in, (EstimatorKind)e, SEARCH_GREEDY);
    ck_assert_int_eq(lp->nq, 3);
    const LogicalQuery *q = &lp->q[0];
    ck_assert(reads_input(q->expr, 1) && reads_input(q->expr, 2));
    ck_assert(!reads_input(q->expr, 0));
    ck_assert_str_eq(q->indices[q->red[0]].name, "j");
    logical_plan_free(lp);
  }
  free_inputs(in, 3);
  program_free(p);
}
END_TEST

/* The ALS loss (paper Example 3): distributed when X is sparse and u, v
 * dense -- X^2 - 2 X u v + (u u)(v v), linear in the entries of X -- and
 * kept as written when everything is dense. */
START_TEST(als_distributes_when_sparse) {
  Program *p = parse("input X[i, j], u[i], v[j]\n"
                     "loss = sum(i, j: (X[i, j] - u[i] * v[j]) ^ 2)\n");
  int64_t n = 300;
  for (int dense = 0; dense < 2; dense++) {
    test_rng r = test_rng_seed(3 + dense);
    galley_tensor *in[3] = {matrix(&r, n, n, dense ? 1 : 0.003),
                            random_tensor(&r, 1, &n, 1, 0),
                            random_tensor(&r, 1, &n, 1, 0)};
    for (int e = 0; e < 2; e++)
      for (int s = 0; s < 2; s++) {
        LogicalPlan *lp = optimize(p, in, (EstimatorKind)e, (SearchKind)s);
        const LogicalQuery *last = &lp->q[lp->outputs[0]];
        ck_assert_str_eq(last->name, "loss");
        if (dense) {
          ck_assert_int_eq(lp->nq, 1);
          ck_assert_ptr_nonnull(last->agg);
        } else {
          /* the terms are summed apart; the last query adds them */
          ck_assert_int_ge(lp->nq, 3);
          ck_assert_ptr_null(last->agg);
          for (int q = 0; q < lp->nq; q++) /* X never meets a dense i*j */
            if (reads_input(lp->q[q].expr, 0))
              ck_assert_double_le(lp->q[q].cost, 100.0 * 300);
          char *text = print_plan(lp);
          ck_assert_msg(strstr(text, "-2"), "no merged -2 X u v term:\n%s",
                        text);
          free(text);
        }
        check_against_reference(p, in, lp);
        logical_plan_free(lp);
      }
    free_inputs(in, 3);
  }
  program_free(p);
}
END_TEST

/* prod(i, j, k: A[i, j] * b[k]) = prod(A)^|k| * prod(b)^(|i| |j|): the
 * split never builds the i*j*k space (the repeat of * is a power). */
/* The rank-k ALS loss: sum(k: U V) is inlined into the distributed terms
 * (x * sum(k: y) = sum(k: x * y)), so the dense U V^T is never built when
 * X is sparse; it is when X is dense. */
START_TEST(als_rank_k_inlines_the_sum) {
  Program *p = parse("input X[i, j], U[i, k], V[j, k]\n"
                     "loss = sum(i, j: (X[i, j] - sum(k: U[i, k] * V[j, k]))^2)\n"
                     "seen = sum(i, j: (X[i, j] != 0) * "
                     "(X[i, j] - sum(k: U[i, k] * V[j, k]))^2)\n");
  for (int dense = 0; dense < 2; dense++) {
    test_rng r = test_rng_seed(5 + dense);
    galley_tensor *in[3] = {matrix(&r, 120, 100, dense ? 1 : 0.01),
                            matrix(&r, 120, 4, 1), matrix(&r, 100, 4, 1)};
    for (int e = 0; e < 2; e++) {
      LogicalPlan *lp = optimize(p, in, (EstimatorKind)e, SEARCH_GREEDY);
      int uv = 0; /* queries computing U V^T over (i, j) */
      for (int q = 0; q < lp->nq; q++)
        uv += lp->q[q].nout == 2 && reads_input(lp->q[q].expr, 1) &&
              reads_input(lp->q[q].expr, 2) && !reads_input(lp->q[q].expr, 0);
      char *text = print_plan(lp);
      ck_assert_msg(dense ? uv > 0 : uv == 0, "dense %d:\n%s", dense, text);
      free(text);
      check_against_reference(p, in, lp);
      logical_plan_free(lp);
    }
    free_inputs(in, 3);
  }
  program_free(p);
}
END_TEST

/* SDDMM: A[i, j] * sum(k: U V) becomes sum(k: A U V) (the aggregate
 * lifted above the product, Sec. 4.1) when A is sparse: one query, no
 * dense U V^T. */
START_TEST(sddmm_fuses) {
  Program *p = parse("input A[i, j], U[i, k], V[j, k]\n"
                     "C[i, j] = A[i, j] * sum(k: U[i, k] * V[j, k])\n");
  test_rng r = test_rng_seed(9);
  galley_tensor *in[3] = {matrix(&r, 150, 140, 0.01), matrix(&r, 150, 6, 1),
                          matrix(&r, 140, 6, 1)};
  for (int e = 0; e < 2; e++) {
    LogicalPlan *lp = optimize(p, in, (EstimatorKind)e, SEARCH_GREEDY);
    char *text = print_plan(lp);
    ck_assert_msg(lp->nq == 1 && lp->q[0].agg && reads_input(lp->q[0].expr, 0) &&
                      reads_input(lp->q[0].expr, 1) &&
                      reads_input(lp->q[0].expr, 2),
                  "not fused:\n%s", text);
    free(text);
    check_against_reference(p, in, lp);
    logical_plan_free(lp);
  }
  free_inputs(in, 3);
  program_free(p);
}
END_TEST

START_TEST(split_same_op) {
  Program *p = parse("input A[i, j], b[k]\ns = prod(i, j, k: A[i, j] * b[k])\n"
                     "m[i] = max(j, k: max(A[i, j], b[k]))\n");
  test_rng r = test_rng_seed(11);
  int64_t nk = 7;
  galley_tensor *in[2] = {matrix(&r, 6, 5, 1), random_tensor(&r, 1, &nk, 1, 0)};
  for (int e = 0; e < 2; e++) {
    LogicalPlan *lp = optimize(p, in, (EstimatorKind)e, SEARCH_GREEDY);
    /* (m: variable elimination pulls max(k: b[k]) out instead) */
    ck_assert_msg(lp->q[lp->outputs[0]].agg == NULL, "s not split");
    check_against_reference(p, in, lp);
    logical_plan_free(lp);
  }
  free_inputs(in, 2);
  program_free(p);
}
END_TEST

START_TEST(triangle_one_query) {
  test_rng r = test_rng_seed(3);
  Program *p = parse("input E[i, j]\n"
                     "t = sum(i, j, k: E[i, j] * E[j, k] * E[i, k]) / 6\n");
  galley_tensor *in[1] = {matrix(&r, 300, 300, 0.02)};
  for (int s = 0; s < 2; s++) {
    LogicalPlan *lp = optimize(p, in, EST_CHAIN, (SearchKind)s);
    /* the triangle's third edge is covered by the other two: no
     * intermediate (a wedge list would be far larger than the answer) */
    ck_assert_int_eq(lp->nq, 2);
    ck_assert_int_eq(lp->q[0].nred, 3);
    ck_assert_int_eq(lp->q[0].expr->nargs, 3);
    ck_assert_ptr_null(lp->q[1].agg);
    ck_assert_str_eq(lp->q[1].name, "t");
    logical_plan_free(lp);
  }
  free_inputs(in, 1);
  program_free(p);
}
END_TEST

START_TEST(exact_never_worse_than_greedy) {
  test_rng r = test_rng_seed(11);
  const char *src =
      "input A[a, b], B[b, c], C[c, d], D[d, e]\n"
      "R[a, e] = sum(b, c, d: A[a, b] * B[b, c] * C[c, d] * D[d, e])\n";
  Program *p = parse(src);
  int strictly = 0;
  for (int t = 0; t < 30; t++) {
    int64_t n[5];
    for (int k = 0; k < 5; k++)
      n[k] = 1 + test_rng_below(&r, 60);
    double dens[3] = {1, 0.1, 0.01};
    galley_tensor *in[4];
    for (int k = 0; k < 4; k++)
      in[k] = matrix(&r, n[k], n[k + 1], dens[test_rng_below(&r, 3)]);
    for (int e = 0; e < 2; e++) {
      LogicalPlan *g = optimize(p, in, (EstimatorKind)e, SEARCH_GREEDY);
      LogicalPlan *x = optimize(p, in, (EstimatorKind)e, SEARCH_EXACT);
      double cg = total_cost(g), cx = total_cost(x);
      ck_assert_msg(cx <= cg * (1 + 1e-12), "exact %g > greedy %g", cx, cg);
      strictly += cx < cg;
      logical_plan_free(g);
      logical_plan_free(x);
    }
    free_inputs(in, 4);
  }
  (void)strictly; /* greedy is often optimal; only the bound is a law */
  program_free(p);
}
END_TEST

START_TEST(deterministic) {
  test_rng r = test_rng_seed(5);
  Program *p = parse(chain3);
  galley_tensor *in[3] = {matrix(&r, 80, 60, 0.2), matrix(&r, 60, 70, 0.05),
                          matrix(&r, 70, 90, 0.3)};
  for (int s = 0; s < 2; s++) {
    LogicalPlan *a = optimize(p, in, EST_CHAIN, (SearchKind)s);
    LogicalPlan *b = optimize(p, in, EST_CHAIN, (SearchKind)s);
    char *pa = print_plan(a), *pb = print_plan(b);
    ck_assert_str_eq(pa, pb);
    free(pa);
    free(pb);
    logical_plan_free(a);
    logical_plan_free(b);
  }
  free_inputs(in, 3);
  program_free(p);
}
END_TEST

START_TEST(flattens_nested_products) {
  test_rng r = test_rng_seed(9);
  Program *p = parse(chain3);
  galley_tensor *in[3] = {matrix(&r, 4, 5, 1), matrix(&r, 5, 6, 1),
                          matrix(&r, 6, 7, 1)};
  LogicalPlan *lp = optimize(p, in, EST_CHAIN, SEARCH_GREEDY);
  /* the parser nests (A*B)*C; elimination needs the flat product */
  ck_assert_int_eq(lp->nq, 2);
  check_against_reference(p, in, lp);
  logical_plan_free(lp);
  free_inputs(in, 3);
  program_free(p);
}
END_TEST

START_TEST(bind_errors_pass_through) {
  test_rng r = test_rng_seed(1);
  Program *p = parse(chain3);
  galley_tensor *in[3] = {matrix(&r, 4, 5, 1), matrix(&r, 6, 6, 1),
                          matrix(&r, 6, 7, 1)};
  LogicalPlan *lp = (LogicalPlan *)1;
  galley_error err;
  galley_status st = logical_optimize(p, (const galley_tensor *const *)in,
                                      NULL, &lp, &err);
  ck_assert_int_eq(st, GALLEY_EBIND);
  ck_assert_ptr_null(lp);
  ck_assert(strstr(err.msg, "error:") != NULL);
  free_inputs(in, 3);
  program_free(p);
}
END_TEST

START_TEST(defaults) {
  OptOptions o = opt_defaults();
  ck_assert_int_eq(o.estimator, EST_CHAIN);
  ck_assert_int_eq(o.search, SEARCH_GREEDY);
  /* calibrated (benchmarks/calibrate.py): writes cost more than a
   * computed entry, sparse ones more than dense ones */
  ck_assert(o.cost_compute == 1 && o.cost_dense_write == 7 &&
            o.cost_sparse_write == 76);
  ck_assert(o.memory_budget >= 1e9);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Randomized differential tests                                       */
/* ------------------------------------------------------------------ */

/* One random program from a family, written to buf; declares the inputs'
 * orders and index names so that the data can be made to fit. */
typedef struct Family {
  const char *src;
  int ninputs;
  int order[6];
  const char *idx[6][3]; /* index names of each input's modes */
} Family;

static const Family families[] = {
    {"input A[i, j], B[j, k]\nC[i, k] = A[i, j] * B[j, k]\n",
     2, {2, 2}, {{"i", "j"}, {"j", "k"}}},
    {"input A[i, j], B[j, k], C[k, l]\nD[i, l] = A[i, j] * B[j, k] * C[k, l]\n",
     3, {2, 2, 2}, {{"i", "j"}, {"j", "k"}, {"k", "l"}}},
    {"input A[i, j], B[j, k], C[k, l]\nd = sum(i, j, k, l: A[i, j] * (B[j, k] * C[k, l]))\n",
     3, {2, 2, 2}, {{"i", "j"}, {"j", "k"}, {"k", "l"}}},
    {"input A[a, b], B[b, c], C[c, d], D[d, e]\n"
     "R[a, e] = A[a, b] * B[b, c] * C[c, d] * D[d, e]\n",
     4, {2, 2, 2, 2}, {{"a", "b"}, {"b", "c"}, {"c", "d"}, {"d", "e"}}},
    {"input A[a, b], B[b, c], C[c, d], D[d, e]\n"
     "R[c] = 2 * A[a, b] * B[b, c] * C[c, d] * D[d, e]\n",
     4, {2, 2, 2, 2}, {{"a", "b"}, {"b", "c"}, {"c", "d"}, {"d", "e"}}},
    {"input A[i, j], B[j, k], C[i, k]\nt = sum(i, j, k: A[i, j] * B[j, k] * C[i, k])\n",
     3, {2, 2, 2}, {{"i", "j"}, {"j", "k"}, {"i", "k"}}},
    {"input A[i, j], B[j, k], C[i, k]\nT[i] = A[i, j] * B[j, k] * C[i, k]\n",
     3, {2, 2, 2}, {{"i", "j"}, {"j", "k"}, {"i", "k"}}},
    {"input F[i, x, y], D1[x, u], D2[y, v]\n"
     "R[i] = sum(x, y, u, v: F[i, x, y] * D1[x, u] * D2[y, v])\n",
     3, {3, 2, 2}, {{"i", "x", "y"}, {"x", "u"}, {"y", "v"}}},
    {"input F[i, x, y], D1[x, u], w[u]\n"
     "R[i, y] = F[i, x, y] * D1[x, u] * w[u]\n",
     3, {3, 2, 1}, {{"i", "x", "y"}, {"x", "u"}, {"u"}}},
    {"input A[i, j], B[j, k], c[k]\n"
     "R[i] = sum(j: A[i, j] * sum(k: B[j, k] * c[k]))\n",
     3, {2, 2, 1}, {{"i", "j"}, {"j", "k"}, {"k"}}},
    {"input A[i, j], b[j]\ndim n = 3\nR[i] = sum(n, j: A[i, j] * b[j])\n",
     2, {2, 1}, {{"i", "j"}, {"j"}}},
    {"input A[i, j], B[j, k], C[k, l]\n"
     "D[i, l] = max(j, k: A[i, j] + B[j, k] + C[k, l])\n",
     3, {2, 2, 2}, {{"i", "j"}, {"j", "k"}, {"k", "l"}}},
    {"input A[i, j], B[j, k], C[k, l]\n"
     "D[i, l] = min(j, k: A[i, j] + (B[j, k] + C[k, l]))\n",
     3, {2, 2, 2}, {{"i", "j"}, {"j", "k"}, {"k", "l"}}},
    /* * does not distribute over max (negative values): kept as lifted */
    {"input A[i, j], B[j, k], C[k, l]\n"
     "D[i, l] = max(j, k: A[i, j] * B[j, k] * C[k, l])\n",
     3, {2, 2, 2}, {{"i", "j"}, {"j", "k"}, {"k", "l"}}},
    {"input A[i, j], B[j, k], x[i], y[k]\n"
     "s = sum(i, j, k: x[i] * A[i, j] * B[j, k] * y[k])\n",
     4, {2, 2, 1, 1}, {{"i", "j"}, {"j", "k"}, {"i"}, {"k"}}},
    /* sums inside products: candidates for distribution (Sec. 4.1) */
    {"input X[i, j], u[i], v[j]\ns = sum(i, j: (X[i, j] - u[i] * v[j]) ^ 2)\n",
     3, {2, 1, 1}, {{"i", "j"}, {"i"}, {"j"}}},
    {"input A[i, j], B[i, j], x[j]\nR[i] = sum(j: (A[i, j] + B[i, j]) * x[j])\n",
     3, {2, 2, 1}, {{"i", "j"}, {"i", "j"}, {"j"}}},
    {"input A[i, j], B[j, k], C[j, k]\n"
     "D[i, k] = sum(j: A[i, j] * (B[j, k] - C[j, k]))\n",
     3, {2, 2, 2}, {{"i", "j"}, {"j", "k"}, {"j", "k"}}},
    {"input A[i, j], x[j], y[i]\n"
     "R[i] = sum(j: (A[i, j] + y[i]) * (x[j] - 2) * -(A[i, j] - x[j]))\n",
     3, {2, 1, 1}, {{"i", "j"}, {"j"}, {"i"}}},
    {"input A[i, j], B[j, k], x[k]\ndim n = 3\n"
     "R[i] = sum(n, j, k: A[i, j] * (B[j, k] + x[k]) * (x[k] - A[i, j]))\n",
     3, {2, 2, 1}, {{"i", "j"}, {"j", "k"}, {"k"}}},
    /* an aggregate over a map by the same op: split (Sec. 4.4) */
    {"input A[i, j], b[k]\ns = prod(i, j, k: A[i, j] * b[k])\n",
     2, {2, 1}, {{"i", "j"}, {"k"}}},
    {"input A[i, j], b[j], c[k]\nR[i] = min(j, k: min(A[i, j], b[j], c[k]))\n",
     3, {2, 1, 1}, {{"i", "j"}, {"j"}, {"k"}}},
    {"input A[i, j], c[k]\nR[i] = max(j, k: max(A[i, j] * 2, c[k] - 1))\n",
     2, {2, 1}, {{"i", "j"}, {"k"}}},
    /* summed aliases inlined into distributed terms */
    {"input X[i, j], U[i, k], V[j, k]\n"
     "s = sum(i, j: (X[i, j] - sum(k: U[i, k] * V[j, k]))^2)\n",
     3, {2, 2, 2}, {{"i", "j"}, {"i", "k"}, {"j", "k"}}},
    {"input A[i, j], B[j, k], x[k]\n"
     "R[i] = sum(j: A[i, j] * (2 + sum(k: B[j, k] * x[k])))\n",
     3, {2, 2, 1}, {{"i", "j"}, {"j", "k"}, {"k"}}},
    {"input A[i, j], U[i, k], V[j, k]\n"
     "C[i, j] = A[i, j] * sum(k: U[i, k] * V[j, k])\n",
     3, {2, 2, 2}, {{"i", "j"}, {"i", "k"}, {"j", "k"}}},
    {"input A[i, j], x[j]\nC[i, j] = A[i, j] * (x[j] - sum(k: A[i, k]))\n",
     2, {2, 1}, {{"i", "j"}, {"j"}}},
};

static int64_t index_dim(const int64_t *sizes, const char *name) {
  return sizes[(unsigned char)name[0]];
}

static void random_program(test_rng *r, int *nchecked, int *nsplit,
                           int *ndist) {
  int nf = (int)(sizeof families / sizeof families[0]);
  const Family *fam = &families[test_rng_below(r, nf)];
  int64_t sizes[256];
  for (int k = 0; k < 256; k++)
    sizes[k] = 1 + test_rng_below(r, 5);
  double fills[4] = {0, 0, 1, 0.5};
  double dens[4] = {0.1, 0.3, 0.7, 1};
  int with_fill = test_rng_below(r, 4) == 0;
  char src[1024];
  snprintf(src, sizeof src, "%s", fam->src);
  galley_tensor *in[6] = {0};
  for (int t = 0; t < fam->ninputs; t++) {
    int64_t d[3];
    for (int m = 0; m < fam->order[t]; m++)
      d[m] = index_dim(sizes, fam->idx[t][m]);
    double fill = with_fill ? fills[test_rng_below(r, 4)] : 0;
    in[t] = random_tensor(r, fam->order[t], d, dens[test_rng_below(r, 4)],
                          fill);
  }
  /* declare the fills as `input ... fill V` would */
  Program *p = parse(src);
  for (int t = 0; t < fam->ninputs; t++)
    p->inputs[t].fill = galley_tensor_fill(in[t]);
  for (int e = 0; e < 2; e++)
    for (int s = 0; s < 2; s++) {
      LogicalPlan *lp = optimize(p, in, (EstimatorKind)e, (SearchKind)s);
      check_against_reference(p, in, lp);
      LogicalPlan *lifted = NULL;
      galley_error err;
      ck_assert_int_eq(logical_lift(p, (const galley_tensor *const *)in,
                                    &lifted, &err),
                       GALLEY_OK);
      *nsplit += lp->nq > lifted->nq;
      /* distributed: the user's sum became a pointwise sum of parts */
      const LogicalQuery *fin = &lp->q[lp->outputs[0]];
      *ndist += lifted->q[lifted->outputs[0]].agg && !fin->agg;
      logical_plan_free(lifted);
      logical_plan_free(lp);
      (*nchecked)++;
    }
  free_inputs(in, fam->ninputs);
  program_free(p);
}

START_TEST(random_sums_of_products) {
  test_rng r = test_rng_seed(2024);
  int n = 0, split = 0, dist = 0;
  for (int k = 0; k < 300; k++)
    random_program(&r, &n, &split, &dist);
  ck_assert_int_eq(n, 1200);
  /* the rewrite must actually be exercised, not just the fallback */
  ck_assert_msg(split >= 200, "only %d plans were split", split);
  ck_assert_msg(dist >= 10, "only %d plans were distributed", dist);
  fprintf(stderr, "random: %d plans, %d split into steps, %d distributed\n",
          n, split, dist);
}
END_TEST

int main(void) {
  Suite *s = suite_create("logical");
  TCase *shape = tcase_create("shape");
  tcase_set_timeout(shape, 120);
  tcase_add_test(shape, chain_sparse_end_first);
  tcase_add_test(shape, chain_sparse_start_first);
  tcase_add_test(shape, chain_small_dims);
  tcase_add_test(shape, ml_over_join_pushes_theta);
  tcase_add_test(shape, triangle_one_query);
  tcase_add_test(shape, als_distributes_when_sparse);
  tcase_add_test(shape, split_same_op);
  tcase_add_test(shape, sddmm_fuses);
  tcase_add_test(shape, als_rank_k_inlines_the_sum);
  tcase_add_test(shape, exact_never_worse_than_greedy);
  tcase_add_test(shape, deterministic);
  tcase_add_test(shape, flattens_nested_products);
  tcase_add_test(shape, bind_errors_pass_through);
  tcase_add_test(shape, defaults);
  suite_add_tcase(s, shape);
  TCase *diff = tcase_create("differential");
  tcase_set_timeout(diff, 300);
  tcase_add_test(diff, random_sums_of_products);
  suite_add_tcase(s, diff);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
