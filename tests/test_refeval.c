/*
 * test_refeval.c -- the reference evaluator and the public program API.
 *
 * Every expected value is computed by hand (in a comment next to it) or by
 * an independent naive loop in the test, never by running the evaluator
 * twice.  Two layers: plans built by hand with the plan_* constructors
 * (the evaluator alone, no parser), and programs from .tin text through
 * galley.h (parse, bind, run, outputs).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "ir.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* Helpers: tensors                                                    */
/* ------------------------------------------------------------------ */

/* A tensor from nnz entries (coords entry after entry, 0-based). */
static galley_tensor *coo(int order, const int64_t *dims, int64_t nnz,
                          const int64_t *coords, const double *vals,
                          double fill) {
  galley_tensor *t = NULL;
  galley_error err;
  galley_status st =
      galley_tensor_from_coo(order, dims, nnz, coords, vals, fill, NULL, &t, &err);
  ck_assert_msg(st == GALLEY_OK, "from_coo: %s", err.msg);
  return t;
}

/* A dense row-major tensor (every entry stored). */
static galley_tensor *dense(int order, const int64_t *dims,
                            const double *vals, double fill) {
  galley_tensor *t = NULL;
  galley_error err;
  galley_format fmt = galley_format_dense(order);
  galley_status st =
      galley_tensor_from_dense(order, dims, vals, fill, &fmt, &t, &err);
  ck_assert_msg(st == GALLEY_OK, "from_dense: %s", err.msg);
  return t;
}

static galley_tensor *scalar(double v) {
  return coo(0, NULL, 1, NULL, &v, 0);
}

static double get1(const galley_tensor *t, int64_t i) {
  return galley_tensor_get(t, &i, NULL);
}

static double get2(const galley_tensor *t, int64_t i, int64_t j) {
  int64_t c[2] = {i, j};
  return galley_tensor_get(t, c, NULL);
}

static double get0(const galley_tensor *t) {
  int64_t none = 0;
  return galley_tensor_get(t, &none, NULL);
}

static int close_to(double a, double b) {
  if (isnan(a) || isnan(b))
    return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b))
    return a == b;
  return fabs(a - b) <= 1e-12 * (1 + fabs(a) + fabs(b));
}

#define ck_close(a, b)                                                    \
  do {                                                                    \
    double a_ = (a), b_ = (b);                                            \
    ck_assert_msg(close_to(a_, b_), "%s = %.17g, expected %.17g", #a, a_, \
                  b_);                                                    \
  } while (0)

/* ------------------------------------------------------------------ */
/* Helpers: hand-built programs                                        */
/* ------------------------------------------------------------------ */

enum { HB_MAX = 8 };

static Program *hb_new(void) {
  Arena *a = arena_new();
  ck_assert_ptr_nonnull(a);
  Program *p = arena_alloc(a, sizeof *p);
  p->arena = a;
  p->filename = "hand.tin";
  p->source = "";
  ops_init(&p->ops);
  p->inputs = arena_alloc(a, HB_MAX * sizeof *p->inputs);
  p->queries = arena_alloc(a, HB_MAX * sizeof *p->queries);
  p->dims = arena_alloc(a, HB_MAX * sizeof *p->dims);
  return p;
}

static Loc at(int line, int col) {
  Loc l = {line, col};
  return l;
}

static int hb_input(Program *p, const char *name, int order, double fill,
                    Loc loc) {
  InputDecl *d = &p->inputs[p->ninputs];
  d->name = name;
  d->order = order;
  d->fill = fill;
  d->loc = loc;
  return p->ninputs++;
}

/* A query whose indices are named by the letters of `names` (each of
 * size unknown), with LHS the first nout of them. */
static Query *hb_query(Program *p, const char *name, const char *names,
                       int nout, Loc loc) {
  Query *q = &p->queries[p->nqueries++];
  int n = (int)strlen(names);
  q->name = name;
  q->loc = loc;
  q->nindices = n;
  q->indices = arena_alloc(p->arena, (size_t)n * sizeof *q->indices + 1);
  for (int k = 0; k < n; k++) {
    q->indices[k].name = arena_strndup(p->arena, names + k, 1);
    q->indices[k].dim = -1;
    q->indices[k].loc = loc;
  }
  q->nout = nout;
  q->out = arena_alloc(p->arena, (size_t)nout * sizeof(int) + 1);
  for (int k = 0; k < nout; k++)
    q->out[k] = k;
  q->is_output = 1;
  return q;
}

static const Op *op(const Program *p, const char *name) {
  const Op *o = ops_find(&p->ops, name);
  ck_assert_msg(o != NULL, "no op %s", name);
  return o;
}

static const Op *agg(const Program *p, const char *name) {
  const Op *o = ops_find_agg(&p->ops, name);
  ck_assert_msg(o != NULL, "no aggregate %s", name);
  return o;
}

static Node *in1(Program *p, int t, int i, Loc loc) {
  return plan_input(p->arena, loc, t, 1, &i);
}

static Node *in2(Program *p, int t, int i, int j, Loc loc) {
  int idx[2] = {i, j};
  return plan_input(p->arena, loc, t, 2, idx);
}

static Node *map2(Program *p, const char *name, Node *x, Node *y) {
  Node *args[2] = {x, y};
  return plan_map(p->arena, at(0, 0), op(p, name), 2, args);
}

static Node *map1(Program *p, const char *name, Node *x) {
  return plan_map(p->arena, at(0, 0), op(p, name), 1, &x);
}

static Node *agg1(Program *p, const char *name, int i, Node *x) {
  return plan_agg(p->arena, at(0, 0), agg(p, name), 1, &i, x);
}

/* ------------------------------------------------------------------ */
/* Hand-built plans                                                    */
/* ------------------------------------------------------------------ */

/* t = A[i,i] : the trace (sum over i made explicit). */
START_TEST(hand_trace) {
  Program *p = hb_new();
  int A = hb_input(p, "A", 2, 0, at(1, 7));
  Query *q = hb_query(p, "t", "i", 0, at(2, 1));
  q->expr = agg1(p, "sum", 0, in2(p, A, 0, 0, at(2, 5)));
  int64_t dims[2] = {3, 3};
  int64_t c[] = {0, 0, 1, 1, 2, 2, 0, 2, 2, 0};
  double v[] = {1.5, 2, -4, 100, 7};
  galley_tensor *tA = coo(2, dims, 5, c, v, 0);
  const galley_tensor *in[1] = {tA};
  galley_tensor *res[1];
  galley_error err;
  ck_assert_int_eq(refeval_run(p, in, res, &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_order(res[0]), 0);
  ck_close(get0(res[0]), 1.5 + 2 - 4); /* the diagonal only */
  galley_tensor_free(res[0]);
  galley_tensor_free(tA);
  program_free(p);
}
END_TEST

/* C[i,k] = sum(j: A[i,j] * B[j,k]) against a naive triple loop, and the
 * fill of exp(C) computed by the evaluator is exp(0) = 1. */
START_TEST(hand_matmul_exp) {
  Program *p = hb_new();
  int A = hb_input(p, "A", 2, 0, at(1, 7));
  int B = hb_input(p, "B", 2, 0, at(1, 15));
  Query *q = hb_query(p, "C", "ikj", 2, at(2, 1));
  q->expr = agg1(p, "sum", 2,
                 map2(p, "*", in2(p, A, 0, 2, at(2, 10)),
                      in2(p, B, 2, 1, at(2, 19))));
  Query *e = hb_query(p, "E", "ik", 2, at(3, 1));
  int ik[2] = {0, 1};
  e->expr = map1(p, "exp", plan_alias(p->arena, at(3, 12), 0, 2, ik));
  test_rng r = test_rng_seed(7);
  int64_t da[2] = {4, 5}, db[2] = {5, 3};
  double a[20], b[15];
  for (int k = 0; k < 20; k++)
    a[k] = test_rng_below(&r, 3) == 0 ? test_rng_double(&r, -1, 1) : 0;
  for (int k = 0; k < 15; k++)
    b[k] = test_rng_below(&r, 2) == 0 ? test_rng_double(&r, -1, 1) : 0;
  galley_tensor *tA = dense(2, da, a, 0), *tB = dense(2, db, b, 0);
  const galley_tensor *in[2] = {tA, tB};
  galley_tensor *res[2];
  galley_error err;
  ck_assert_int_eq(refeval_run(p, in, res, &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_dim(res[0], 0), 4);
  ck_assert_int_eq(galley_tensor_dim(res[0], 1), 3);
  ck_close(galley_tensor_fill(res[1]), 1.0);
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 3; k++) {
      double s = 0;
      for (int j = 0; j < 5; j++)
        s += a[i * 5 + j] * b[j * 3 + k];
      ck_close(get2(res[0], i, k), s);
      ck_close(get2(res[1], i, k), exp(s));
    }
  for (int k = 0; k < 2; k++)
    galley_tensor_free(res[k]);
  galley_tensor_free(tA);
  galley_tensor_free(tB);
  program_free(p);
}
END_TEST

/* A size conflict is reported at the later access, naming both. */
START_TEST(hand_conflict) {
  Program *p = hb_new();
  int A = hb_input(p, "A", 2, 0, at(1, 7));
  int x = hb_input(p, "x", 1, 0, at(1, 15));
  Query *q = hb_query(p, "y", "ij", 1, at(2, 1));
  q->expr = agg1(p, "sum", 1,
                 map2(p, "*", in2(p, A, 0, 1, at(2, 8)), in1(p, x, 1, at(2, 17))));
  int64_t da[2] = {2, 3}, dx[1] = {4};
  galley_tensor *tA = coo(2, da, 0, NULL, NULL, 0);
  galley_tensor *tx = coo(1, dx, 0, NULL, NULL, 0);
  const galley_tensor *in[2] = {tA, tx};
  galley_tensor *res[1] = {(galley_tensor *)1};
  galley_error err;
  ck_assert_int_eq(refeval_run(p, in, res, &err), GALLEY_EBIND);
  ck_assert_ptr_null(res[0]);
  ck_assert_str_eq(err.msg, "hand.tin:2:17: error: index 'j' has size 4 here "
                            "(mode 0 of 'x') but size 3 at 2:8 (mode 1 of 'A')");
  ck_assert_int_eq(err.line, 2);
  ck_assert_int_eq(err.col, 17);
  in[1] = NULL;
  ck_assert_int_eq(refeval_run(p, in, res, &err), GALLEY_EBIND);
  ck_assert_str_eq(err.msg, "hand.tin:1:15: error: input 'x' is not bound");
  galley_tensor_free(tA);
  galley_tensor_free(tx);
  program_free(p);
}
END_TEST

/* Size guards: a 2^15 x 2^15 dense output is refused, by name. */
START_TEST(hand_too_large) {
  Program *p = hb_new();
  int A = hb_input(p, "A", 2, 0, at(1, 7));
  Query *q = hb_query(p, "B", "ij", 2, at(2, 1));
  q->expr = map1(p, "exp", in2(p, A, 0, 1, at(2, 12)));
  int64_t da[2] = {1 << 15, 1 << 15};
  galley_tensor *tA = coo(2, da, 0, NULL, NULL, 0);
  const galley_tensor *in[1] = {tA};
  galley_tensor *res[1];
  galley_error err;
  ck_assert_int_eq(refeval_run(p, in, res, &err), GALLEY_EOVERFLOW);
  ck_assert_str_eq(err.msg, "hand.tin:2:1: error: query 'B' is too large for "
                            "the reference evaluator: 1073741824 dense output "
                            "entries (the limit is 2^28)");
  /* B = sum(i, j: exp(A[i,j])): one output entry, but 2^34 aggregated
   * elements of 2 steps each exceed the work limit */
  int64_t db[2] = {1 << 17, 1 << 17};
  galley_tensor *tB = coo(2, db, 0, NULL, NULL, 0);
  Query *q2 = &p->queries[0];
  q2->nout = 0;
  int ij[2] = {0, 1};
  q2->expr = plan_agg(p->arena, at(0, 0), agg(p, "sum"), 2, ij,
                      map1(p, "exp", in2(p, A, 0, 1, at(2, 12))));
  in[0] = tB;
  ck_assert_int_eq(refeval_run(p, in, res, &err), GALLEY_EOVERFLOW);
  ck_assert_msg(strstr(err.msg, "query 'B' is too large") != NULL, "%s", err.msg);
  galley_tensor_free(tA);
  galley_tensor_free(tB);
  program_free(p);
}
END_TEST

/* refeval_fill by hand: sum over j (size 5) of a fill-2 input is 10;
 * max over an empty range is -inf (agg_init). */
START_TEST(hand_fill) {
  Program *p = hb_new();
  int A = hb_input(p, "A", 2, 2, at(1, 7));
  Query *q = hb_query(p, "y", "ij", 1, at(2, 1));
  Node *s = agg1(p, "sum", 1, in2(p, A, 0, 1, at(2, 5)));
  Node *m = agg1(p, "max", 1, in2(p, A, 0, 1, at(2, 5)));
  double fills[1] = {2};
  int64_t sizes[2] = {3, 5};
  ck_close(refeval_fill(p, q, s, fills, NULL, sizes), 10);
  ck_close(refeval_fill(p, q, m, fills, NULL, sizes), 2);
  sizes[1] = 0;
  ck_close(refeval_fill(p, q, s, fills, NULL, sizes), 0);
  ck_close(refeval_fill(p, q, m, fills, NULL, sizes), -INFINITY);
  program_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Helpers: programs from text                                         */
/* ------------------------------------------------------------------ */

static galley_program *parse_ok(const char *text) {
  galley_program *gp = NULL;
  char *diag = NULL;
  galley_error err;
  galley_status st =
      galley_program_parse("t.tin", text, strlen(text), &gp, &diag, &err);
  ck_assert_msg(st == GALLEY_OK, "parse failed: %s", diag ? diag : err.msg);
  free(diag);
  return gp;
}

static void bind_ok(galley_program *gp, const char *name,
                    const galley_tensor *t) {
  galley_error err;
  galley_status st = galley_program_bind(gp, name, t, &err);
  ck_assert_msg(st == GALLEY_OK, "bind %s: %s", name, err.msg);
}

static void run_ok(galley_program *gp) {
  galley_error err;
  galley_status st = galley_program_run_reference(gp, &err);
  ck_assert_msg(st == GALLEY_OK, "run: %s", err.msg);
}

/* The output called name (it must exist). */
static const galley_tensor *output(const galley_program *gp,
                                   const char *name) {
  for (int k = 0; k < galley_program_num_outputs(gp); k++)
    if (strcmp(galley_program_output_name(gp, k), name) == 0) {
      ck_assert_ptr_nonnull(galley_program_output(gp, k));
      return galley_program_output(gp, k);
    }
  ck_abort_msg("no output %s", name);
  return NULL;
}

/* Run the program and expect a failure with exactly this message. */
static void run_fails(galley_program *gp, galley_status want,
                      const char *msg) {
  galley_error err;
  ck_assert_int_eq(galley_program_run_reference(gp, &err), want);
  ck_assert_str_eq(err.msg, msg);
}

/* ------------------------------------------------------------------ */
/* Programs from text                                                  */
/* ------------------------------------------------------------------ */

START_TEST(trace) {
  galley_program *gp = parse_ok("input A[i, j]\nt = A[i,i]\n");
  int64_t dims[2] = {3, 3};
  int64_t c[] = {0, 0, 1, 1, 2, 2, 0, 2, 2, 0};
  double v[] = {1.5, 2, -4, 100, 7};
  galley_tensor *tA = coo(2, dims, 5, c, v, 0);
  bind_ok(gp, "A", tA);
  run_ok(gp);
  const galley_tensor *t = output(gp, "t");
  ck_assert_int_eq(galley_tensor_order(t), 0);
  ck_close(get0(t), 1.5 + 2 - 4);
  galley_program_free(gp);
  galley_tensor_free(tA);
}
END_TEST

/* Triangles of an undirected graph given as a symmetric 0/1 adjacency:
 * sum(i,j,k: E[i,j]*E[j,k]*E[i,k]) counts each triangle 6 times. */
static const char *triangle_prog =
    "input E[i, j]\n"
    "t = sum(i, j, k: E[i,j] * E[j,k] * E[i,k])\n";

START_TEST(triangles_small) {
  /* edges 0-1, 1-2, 0-2, 2-3, 1-3, 3-4: triangles {0,1,2} and {1,2,3} */
  int64_t edges[][2] = {{0, 1}, {1, 2}, {0, 2}, {2, 3}, {1, 3}, {3, 4}};
  int64_t c[24];
  for (int e = 0; e < 6; e++) {
    c[4 * e] = edges[e][0], c[4 * e + 1] = edges[e][1];
    c[4 * e + 2] = edges[e][1], c[4 * e + 3] = edges[e][0];
  }
  int64_t dims[2] = {5, 5};
  galley_tensor *E = coo(2, dims, 12, c, NULL, 0);
  galley_program *gp = parse_ok(triangle_prog);
  bind_ok(gp, "E", E);
  run_ok(gp);
  ck_close(get0(output(gp, "t")), 2 * 6);
  galley_program_free(gp);
  galley_tensor_free(E);
}
END_TEST

START_TEST(triangles_karate) {
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/karate.mtx", test_data_dir());
  galley_tensor *E = NULL;
  galley_error err;
  ck_assert_msg(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &E, &err) ==
                    GALLEY_OK, "%s", err.msg);
  galley_program *gp = parse_ok(triangle_prog);
  bind_ok(gp, "E", E);
  run_ok(gp);
  ck_close(get0(output(gp, "t")), 45 * 6); /* karate has 45 triangles */
  galley_program_free(gp);
  galley_tensor_free(E);
}
END_TEST

/* Row max over the whole row: unstored entries count as the fill 0. */
START_TEST(row_max) {
  /* row 0: 2, -1 (max 2); row 1: empty (0); row 2: -3, -2, -7 with one
   * entry missing (0); row 3: -5, -1, -3, -2 full (-1) */
  int64_t c[] = {0, 0, 0, 1, 2, 0, 2, 1, 2, 3, 3, 0, 3, 1, 3, 2, 3, 3};
  double v[] = {2, -1, -3, -2, -7, -5, -1, -3, -2};
  int64_t dims[2] = {4, 4};
  galley_tensor *A = coo(2, dims, 9, c, v, 0);
  galley_program *gp = parse_ok("input A[i, j]\nm[i] = max(j: A[i,j])\n");
  bind_ok(gp, "A", A);
  run_ok(gp);
  const galley_tensor *m = output(gp, "m");
  ck_close(get1(m, 0), 2);
  ck_close(get1(m, 1), 0);
  ck_close(get1(m, 2), 0);
  ck_close(get1(m, 3), -1);
  ck_close(galley_tensor_fill(m), 0); /* max over j of the fill 0 */
  galley_program_free(gp);
  galley_tensor_free(A);
}
END_TEST

/* Two steps of Bellman-Ford with min/+ over an inf fill. */
START_TEST(min_inf_fill) {
  /* edges 0->1 (2), 0->2 (5), 1->2 (1), 2->3 (1); d = [0, inf, inf, inf] */
  int64_t cw[] = {0, 1, 0, 2, 1, 2, 2, 3};
  double w[] = {2, 5, 1, 1};
  int64_t dims[2] = {4, 4}, n = 4, zero = 0;
  double dz = 0;
  galley_tensor *W = coo(2, dims, 4, cw, w, INFINITY);
  /* fill 0 (as read from a file without a fill): the declaration's inf
   * says what the unstored entries are */
  galley_tensor *W0 = coo(2, dims, 4, cw, w, 0);
  galley_tensor *d = coo(1, &n, 1, &zero, &dz, INFINITY);
  galley_program *gp = parse_ok(
      "input W[i, j] fill inf\ninput d[i] fill inf\n"
      "r[j] = min(i: d[i] + W[i,j])\n"
      "d2[j] = min(d[j], r[j])\n"
      "r2[j] = min(i: d2[i] + W[i,j])\n"
      "output r, r2\n");
  bind_ok(gp, "W", W);
  bind_ok(gp, "d", d);
  for (int pass = 0; pass < 2; pass++) {
    run_ok(gp);
    const galley_tensor *r = output(gp, "r"), *r2 = output(gp, "r2");
    double want_r[] = {INFINITY, 2, 5, INFINITY};
    double want_r2[] = {INFINITY, 2, 3, 6};
    for (int j = 0; j < 4; j++) {
      ck_close(get1(r, j), want_r[j]);
      ck_close(get1(r2, j), want_r2[j]);
    }
    ck_close(galley_tensor_fill(r), INFINITY);
    bind_ok(gp, "W", W0);
  }
  galley_program_free(gp);
  galley_tensor_free(W);
  galley_tensor_free(W0);
  galley_tensor_free(d);
}
END_TEST

START_TEST(exp_sparse) {
  int64_t c[] = {0, 1, 1, 0, 2, 2};
  double v[] = {1, -2, 0.5};
  int64_t dims[2] = {3, 4};
  galley_tensor *A = coo(2, dims, 3, c, v, 0);
  galley_program *gp = parse_ok("input A[i, j]\nE[i, j] = exp(A[i, j])\n");
  bind_ok(gp, "A", A);
  run_ok(gp);
  const galley_tensor *E = output(gp, "E");
  ck_close(galley_tensor_fill(E), 1);
  ck_assert_int_eq(galley_tensor_nnz(E), 3); /* only where A is stored */
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++)
      ck_close(get2(E, i, j), exp(get2(A, i, j)));
  galley_program_free(gp);
  galley_tensor_free(A);
}
END_TEST

START_TEST(logistic) {
  /* X is 4 x 3 with row 2 empty */
  int64_t c[] = {0, 0, 0, 2, 1, 1, 3, 0, 3, 1, 3, 2};
  double v[] = {1, 2, -1, 0.5, 0.25, 3};
  int64_t dims[2] = {4, 3}, three = 3;
  double th[3] = {0.5, -1, 2};
  galley_tensor *X = coo(2, dims, 6, c, v, 0);
  galley_tensor *theta = dense(1, &three, th, 0);
  galley_program *gp =
      parse_ok("input X[i, j], theta[j]\n"
               "P[i] = sigmoid(sum(j: X[i,j]*theta[j]))\n"
               /* the einsum rule sums over the whole right-hand side */
               "Q[i] = sigmoid(X[i,j]*theta[j])\n"
               "output P, Q\n");
  bind_ok(gp, "X", X);
  bind_ok(gp, "theta", theta);
  run_ok(gp);
  const galley_tensor *P = output(gp, "P");
  ck_close(galley_tensor_fill(P), 0.5);
  double z[4] = {1 * 0.5 + 2 * 2, -1 * -1, 0, 0.5 * 0.5 + 0.25 * -1 + 3 * 2};
  for (int i = 0; i < 4; i++)
    ck_close(get1(P, i), 1 / (1 + exp(-z[i])));
  /* Q[i] = sum over j of sigmoid(X[i,j]*theta[j]): row 2 is 3 * 0.5 */
  const galley_tensor *Q = output(gp, "Q");
  ck_close(galley_tensor_fill(Q), 1.5);
  for (int i = 0; i < 4; i++) {
    double want = 0;
    for (int j = 0; j < 3; j++)
      want += 1 / (1 + exp(-get2(X, i, j) * th[j]));
    ck_close(get1(Q, i), want);
  }
  ck_close(get1(Q, 2), 1.5);
  galley_program_free(gp);
  galley_tensor_free(X);
  galley_tensor_free(theta);
}
END_TEST

START_TEST(nested_aggregates) {
  /* row sums 3, -4, 0 (empty row) -> max 3; min over rows of the row max:
   * maxes 2, 0 (row 1 is all negative but has a missing entry), 0 -> 0 */
  int64_t c[] = {0, 0, 0, 1, 1, 0, 1, 1};
  double v[] = {1, 2, -1, -3};
  int64_t dims[2] = {3, 3};
  galley_tensor *A = coo(2, dims, 4, c, v, 0);
  galley_program *gp = parse_ok("input A[i, j]\n"
                                "m = max(i: sum(j: A[i,j]))\n"
                                "n = min(i: max(j: A[i,j]))\n"
                                "s = sum(i: A[i,j] * sum(j: A[i,j]))\n");
  bind_ok(gp, "A", A);
  run_ok(gp);
  ck_close(get0(output(gp, "m")), 3);
  ck_close(get0(output(gp, "n")), 0);
  /* s: the outer j is implicit and the inner j shadows it:
   * sum over i, j of A[i,j] * rowsum(i) = 3*3 + (-4)*(-4) = 25 */
  ck_close(get0(output(gp, "s")), 25);
  galley_program_free(gp);
  galley_tensor_free(A);
}
END_TEST

START_TEST(user_function) {
  int64_t ca[] = {0, 0, 1, 1}, cb[] = {0, 0, 0, 1};
  double va[] = {2, 3}, vb[] = {-1, 4};
  int64_t dims[2] = {2, 2};
  galley_tensor *A = coo(2, dims, 2, ca, va, 0);
  galley_tensor *B = coo(2, dims, 2, cb, vb, 0);
  galley_program *gp = parse_ok("def f(x, y) = sin(1 + x*y)\n"
                                "input A[i, j], B[i, j]\n"
                                "C[i, j] = f(A[i, j], B[i, j])\n");
  bind_ok(gp, "A", A);
  bind_ok(gp, "B", B);
  run_ok(gp);
  const galley_tensor *C = output(gp, "C");
  ck_close(galley_tensor_fill(C), sin(1));
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      ck_close(get2(C, i, j), sin(1 + get2(A, i, j) * get2(B, i, j)));
  ck_close(get2(C, 0, 0), sin(1 - 2));
  galley_program_free(gp);
  galley_tensor_free(A);
  galley_tensor_free(B);
}
END_TEST

START_TEST(outputs_and_aliases) {
  double a[6] = {1, 2, 0, 0, 3, 4}, x[3] = {1, -1, 2};
  int64_t dims[2] = {2, 3}, three = 3;
  galley_tensor *A = dense(2, dims, a, 0), *X = dense(1, &three, x, 0);
  /* y = A x = [1*1 + 2*-1 + 0, 0 + 3*-1 + 4*2] = [-1, 5] */
  galley_program *gp = parse_ok("input A[i, j], x[j]\n"
                                "y[i] = A[i,j] * x[j]\n"
                                "z = y[i] * y[i]\n"
                                "w[i] = 2 * y[i] + z\n"
                                "output z, y\n");
  ck_assert_int_eq(galley_program_num_outputs(gp), 2);
  ck_assert_str_eq(galley_program_output_name(gp, 0), "z");
  ck_assert_str_eq(galley_program_output_name(gp, 1), "y");
  ck_assert_ptr_null(galley_program_output(gp, 0)); /* not run yet */
  bind_ok(gp, "A", A);
  bind_ok(gp, "x", X);
  run_ok(gp);
  ck_close(get0(galley_program_output(gp, 0)), 1 + 25);
  ck_close(get1(galley_program_output(gp, 1), 0), -1);
  ck_close(get1(galley_program_output(gp, 1), 1), 5);
  galley_program_free(gp);
  /* without `output`: the queries no later query uses (w only) */
  gp = parse_ok("input A[i, j], x[j]\n"
                "y[i] = A[i,j] * x[j]\n"
                "z = y[i] * y[i]\n"
                "w[i] = 2 * y[i] + z\n");
  ck_assert_int_eq(galley_program_num_outputs(gp), 1);
  bind_ok(gp, "A", A);
  bind_ok(gp, "x", X);
  run_ok(gp);
  const galley_tensor *w = output(gp, "w");
  ck_close(get1(w, 0), -2 + 26);
  ck_close(get1(w, 1), 10 + 26);
  galley_program_free(gp);
  galley_tensor_free(A);
  galley_tensor_free(X);
}
END_TEST

START_TEST(repeated_index) {
  double a[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  int64_t dims[2] = {3, 3};
  galley_tensor *A = dense(2, dims, a, 0);
  galley_program *gp = parse_ok("input A[i, j]\n"
                                "d[i] = A[i,i]\n"
                                "e[i] = A[i,i] * A[i,j]\n");
  bind_ok(gp, "A", A);
  run_ok(gp);
  const galley_tensor *d = output(gp, "d"), *e = output(gp, "e");
  ck_close(get1(d, 0), 1);
  ck_close(get1(d, 1), 5);
  ck_close(get1(d, 2), 9);
  /* e[i] = A[i,i] * rowsum(i) = 1*6, 5*15, 9*24 */
  ck_close(get1(e, 0), 6);
  ck_close(get1(e, 1), 75);
  ck_close(get1(e, 2), 216);
  galley_program_free(gp);
  galley_tensor_free(A);
}
END_TEST

START_TEST(scalars) {
  double x[3] = {1, 0, -2};
  int64_t three = 3;
  galley_tensor *X = dense(1, &three, x, 0), *alpha = scalar(3);
  galley_program *gp = parse_ok("input alpha\ninput x[i]\n"
                                "y[i] = alpha * x[i]\n"
                                "s = alpha + 1\n"
                                "output y, s\n");
  ck_assert_int_eq(galley_program_num_inputs(gp), 2);
  ck_assert_str_eq(galley_program_input_name(gp, 0), "alpha");
  ck_assert_int_eq(galley_program_input_order(gp, 0), 0);
  ck_assert_int_eq(galley_program_input_order(gp, 1), 1);
  bind_ok(gp, "alpha", alpha);
  bind_ok(gp, "x", X);
  run_ok(gp);
  const galley_tensor *y = output(gp, "y"), *s = output(gp, "s");
  ck_close(get1(y, 0), 3);
  ck_close(get1(y, 1), 0);
  ck_close(get1(y, 2), -6);
  ck_assert_int_eq(galley_tensor_order(s), 0);
  ck_close(get0(s), 4);
  ck_close(galley_tensor_fill(s), 1); /* alpha's fill 0 plus 1 */
  galley_program_free(gp);
  galley_tensor_free(X);
  galley_tensor_free(alpha);
}
END_TEST

START_TEST(dim_statement) {
  galley_program *gp = parse_ok("dim n = 100\nc = sum(n: 2)\n"
                                "dim k = 3\nv[k] = 1\n"
                                "e = sum(k: v[k])\n"
                                "output c, v, e\n");
  run_ok(gp);
  ck_close(get0(output(gp, "c")), 200);
  const galley_tensor *v = output(gp, "v");
  ck_assert_int_eq(galley_tensor_dim(v, 0), 3);
  ck_close(get1(v, 2), 1);
  ck_close(get0(output(gp, "e")), 3);
  galley_program_free(gp);
}
END_TEST

/* An input with fill 1: sums count the missing entries. */
START_TEST(nonzero_fill_input) {
  int64_t c[] = {0, 0, 0, 2};
  double v[] = {5, 6};
  int64_t dims[2] = {3, 4};
  galley_tensor *A = coo(2, dims, 2, c, v, 1);
  galley_program *gp = parse_ok("input A[i, j] fill 1\n"
                                "s[i] = A[i,j]\n"
                                "t = A[i,j]\n"
                                "output s, t\n");
  bind_ok(gp, "A", A);
  run_ok(gp);
  const galley_tensor *s = output(gp, "s");
  ck_close(get1(s, 0), 5 + 6 + 2 * 1);
  ck_close(get1(s, 1), 4);
  ck_close(get1(s, 2), 4);
  ck_close(galley_tensor_fill(s), 4); /* 4 copies of the fill */
  ck_assert_int_eq(galley_tensor_nnz(s), 1);
  ck_close(get0(output(gp, "t")), 13 + 4 + 4);
  galley_program_free(gp);
  galley_tensor_free(A);
}
END_TEST

START_TEST(user_aggregate) {
  int64_t c[] = {0, 0, 0, 1, 2, 0, 2, 1, 2, 2};
  double v[] = {2, -1, -3, -2, -7};
  int64_t dims[2] = {3, 3};
  galley_tensor *A = coo(2, dims, 5, c, v, 1);
  galley_program *gp = parse_ok(
      "def smax(x, y) = max(x, y) [associative, commutative, idempotent, "
      "identity = -inf]\n"
      "def plus(x, y) = x + y [associative, commutative, identity = 0]\n"
      "input A[i, j] fill 1\n"
      "m[i] = smax(j: A[i,j])\n"
      "p[i] = plus(j: A[i,j])\n"
      "output m, p\n");
  bind_ok(gp, "A", A);
  run_ok(gp);
  const galley_tensor *m = output(gp, "m"), *p = output(gp, "p");
  /* rows: [2, -1, 1], [1, 1, 1], [-3, -2, -7] */
  ck_close(get1(m, 0), 2);
  ck_close(get1(m, 1), 1);
  ck_close(get1(m, 2), -2);
  ck_close(get1(p, 0), 2);
  ck_close(get1(p, 1), 3);
  ck_close(get1(p, 2), -12);
  ck_close(galley_tensor_fill(m), 1);
  ck_close(galley_tensor_fill(p), 3); /* plus-fold of 3 copies of 1 */
  galley_program_free(gp);
  galley_tensor_free(A);
}
END_TEST

START_TEST(any_all) {
  int64_t c[] = {0, 0, 0, 1, 0, 2, 1, 1};
  double v[] = {1, 2, 3, 0.5};
  int64_t dims[2] = {3, 3};
  galley_tensor *A = coo(2, dims, 4, c, v, 0);
  galley_program *gp = parse_ok("input A[i, j]\n"
                                "a[i] = any(j: A[i,j] > 1)\n"
                                "b[i] = all(j: A[i,j] > 0)\n"
                                "c = all(i: any(j: A[i,j]))\n"
                                "output a, b, c\n");
  bind_ok(gp, "A", A);
  run_ok(gp);
  const galley_tensor *a = output(gp, "a"), *b = output(gp, "b");
  ck_close(get1(a, 0), 1);
  ck_close(get1(a, 1), 0);
  ck_close(get1(a, 2), 0);
  ck_close(get1(b, 0), 1);
  ck_close(get1(b, 1), 0);
  ck_close(get1(b, 2), 0);
  ck_close(get0(output(gp, "c")), 0); /* row 2 is empty */
  galley_program_free(gp);
  galley_tensor_free(A);
}
END_TEST

START_TEST(bind_errors) {
  galley_program *gp = parse_ok("input A[i, j], x[j] fill 0\n"
                                "y[i] = A[i,j] * x[j]\n");
  int64_t da[2] = {2, 3}, dx = 4, d3[3] = {2, 3, 4};
  galley_tensor *A = coo(2, da, 0, NULL, NULL, 0);
  galley_tensor *x = coo(1, &dx, 0, NULL, NULL, 0);
  galley_tensor *A3 = coo(3, d3, 0, NULL, NULL, 0);
  galley_tensor *x5 = coo(1, &dx, 0, NULL, NULL, 5);
  galley_error err;
  ck_assert_int_eq(galley_program_bind(gp, "Z", A, &err), GALLEY_EBIND);
  ck_assert_str_eq(err.msg, "no input named 'Z'");
  ck_assert_int_eq(galley_program_bind(gp, "A", A3, &err), GALLEY_EBIND);
  ck_assert_str_eq(err.msg, "input 'A' is declared with 2 modes (at "
                            "t.tin:1:7) but the bound tensor has 3");
  bind_ok(gp, "A", A);
  run_fails(gp, GALLEY_EBIND, "t.tin:1:16: error: input 'x' is not bound");
  bind_ok(gp, "x", x);
  run_fails(gp, GALLEY_EBIND,
            "t.tin:2:17: error: index 'j' has size 4 here (mode 0 of 'x') but "
            "size 3 at 2:8 (mode 1 of 'A')");
  bind_ok(gp, "x", x5);
  run_fails(gp, GALLEY_EBIND,
            "t.tin:1:16: error: input 'x' is declared with fill 0 but the "
            "bound tensor has fill 5 (declare it with 'fill 5')");
  galley_program_free(gp);

  /* a repeated index on a non-square matrix */
  gp = parse_ok("input A[i, j]\nt = A[i,i]\n");
  bind_ok(gp, "A", A);
  run_fails(gp, GALLEY_EBIND,
            "t.tin:2:5: error: index 'i' has size 3 here (mode 1 of 'A') but "
            "size 2 in mode 0 of the same access");
  galley_program_free(gp);

  /* dim against data */
  gp = parse_ok("dim j = 5\ninput A[i, j]\ns[i] = A[i, j]\n");
  bind_ok(gp, "A", A);
  run_fails(gp, GALLEY_EBIND,
            "t.tin:3:8: error: index 'j' has size 3 here (mode 1 of 'A') but "
            "'dim j = 5' at 1:5 fixes it");
  galley_program_free(gp);
  galley_tensor_free(A);
  galley_tensor_free(x);
  galley_tensor_free(A3);
  galley_tensor_free(x5);
}
END_TEST

/* An input declared without a fill takes the bound tensor's (man/tin.5,
 * "Fills from data"), on the reference and the compiled path alike; a
 * declared fill still has to match. */
START_TEST(fills_from_data) {
  galley_program *gp = parse_ok("input x[j]\ns = sum(j: x[j])\n"
                                "m = max(j: x[j] * 2)\n");
  int64_t dx = 4, c[1] = {1};
  double v[1] = {-3};
  galley_tensor *x5 = coo(1, &dx, 1, c, v, 5);
  galley_tensor *x0 = coo(1, &dx, 1, c, v, 0);
  bind_ok(gp, "x", x5);
  galley_error err;
  ck_assert_int_eq(galley_program_run_reference(gp, &err), GALLEY_OK);
  ck_close(get0(output(gp, "s")), 12);
  ck_close(get0(output(gp, "m")), 10);
  ck_assert_int_eq(galley_program_run(gp, &err), GALLEY_OK);
  ck_close(get0(output(gp, "s")), 12);
  ck_close(get0(output(gp, "m")), 10);
  bind_ok(gp, "x", x0); /* a new fill: planned again */
  ck_assert_int_eq(galley_program_run(gp, &err), GALLEY_OK);
  ck_close(get0(output(gp, "s")), -3);
  ck_close(get0(output(gp, "m")), 0);
  galley_program_free(gp);
  gp = parse_ok("input x[j] fill 2\ns = sum(j: x[j])\n");
  bind_ok(gp, "x", x5);
  run_fails(gp, GALLEY_EBIND,
            "t.tin:1:7: error: input 'x' is declared with fill 2 but the "
            "bound tensor has fill 5 (declare it with 'fill 5')");
  bind_ok(gp, "x", x0); /* a declared fill overrides a bound 0 */
  ck_assert_int_eq(galley_program_run(gp, &err), GALLEY_OK);
  ck_close(get0(output(gp, "s")), 3);
  galley_program_free(gp);
  galley_tensor_free(x5);
  galley_tensor_free(x0);
}
END_TEST

/* Intermediates the planner cannot prove finite are planned as finite and
 * checked when run (issue 12): x = r / (d - 2) lets the last query skip
 * A's absent entries while no row sum d is 2; when one is, x holds inf,
 * the run plans again without the assumption and gives the dense meaning
 * (NaN where 0 * inf occurs), as the reference does. */
START_TEST(assumed_finite) {
  galley_program *gp = parse_ok("input A[i, j], r[i]\n"
                                "d[i] = sum(j: A[i, j])\n"
                                "x[i] = r[i] / (d[i] - 2)\n"
                                "y[j] = sum(i: A[i, j] * x[i])\n"
                                "output y\n");
  int64_t da[2] = {3, 3}, dr = 3;
  int64_t ca[] = {0, 1, 1, 0, 1, 2, 2, 1}, cb[] = {0, 1, 1, 0, 1, 2};
  double va[] = {1, 2, 3, 4}, vb[] = {2, 2, 3}, vr[] = {1, 2, 3};
  int64_t cr[] = {0, 1, 2};
  galley_tensor *full = coo(2, da, 4, ca, va, 0); /* row sums 1, 5, 4 */
  galley_tensor *gap = coo(2, da, 3, cb, vb, 0);  /* row sums 2, 5, 0 */
  galley_tensor *r = coo(1, &dr, 3, cr, vr, 0);
  galley_error err;
  char *logtext = NULL;
  size_t loglen = 0;
  FILE *log = open_memstream(&logtext, &loglen);
  galley_program_set_log(gp, 1, log);
  for (int k = 0; k < 2; k++) {
    bind_ok(gp, "A", k == 0 ? full : gap);
    bind_ok(gp, "r", r);
    ck_assert_int_eq(galley_program_run_reference(gp, &err), GALLEY_OK);
    double want[3];
    for (int64_t j = 0; j < 3; j++)
      want[j] = galley_tensor_get(output(gp, "y"), &j, NULL);
    ck_assert_int_eq(galley_program_run(gp, &err), GALLEY_OK);
    galley_run_info ri;
    galley_program_run_info(gp, &ri);
    /* the first run plans; the second data makes x hold inf: planned
     * again during the run */
    ck_assert_int_eq(ri.replanned, 1);

    for (int64_t j = 0; j < 3; j++) {
      double got = galley_tensor_get(output(gp, "y"), &j, NULL);
      ck_assert_msg((isnan(got) && isnan(want[j])) || got == want[j],
                    "case %d y[%lld]: got %g want %g", k, (long long)j, got,
                    want[j]);
    }
    if (k == 1)
      ck_assert(isnan(want[0]) || isnan(want[1]) || isnan(want[2]));
    /* the same data again reuses the plan it ended with */
    ck_assert_int_eq(galley_program_run(gp, &err), GALLEY_OK);
    galley_program_run_info(gp, &ri);
    ck_assert_int_eq(ri.replanned, 0);
  }
  galley_program_free(gp);
  fclose(log);
  ck_assert_msg(strstr(logtext, "re-planned: query 'x' was planned as finite") != NULL,
                "%s", logtext);
  free(logtext);
  galley_tensor_free(full);
  galley_tensor_free(gap);
  galley_tensor_free(r);
}
END_TEST

START_TEST(api_errors) {
  galley_program *gp = (galley_program *)1;
  char *diag = (char *)1;
  galley_error err;
  ck_assert_int_eq(galley_program_read("/nonexistent/p.tin", &gp, &diag, &err),
                   GALLEY_EIO);
  ck_assert_ptr_null(gp);
  ck_assert_ptr_null(diag);
  ck_assert_str_eq(err.msg, "/nonexistent/p.tin: error: cannot open: No such "
                            "file or directory");
  const char *bad = "input A[i, j]\nB[i] = A[i, k] +\n";
  ck_assert_int_eq(galley_program_parse("bad.tin", bad, strlen(bad), &gp,
                                        &diag, &err),
                   GALLEY_EPROGRAM);
  ck_assert_ptr_null(gp);
  ck_assert_ptr_nonnull(diag);
  ck_assert_msg(strncmp(diag, "bad.tin:", 8) == 0, "%s", diag);
  ck_assert_msg(strncmp(err.msg, "bad.tin:", 8) == 0, "%s", err.msg);
  free(diag);
  ck_assert_ptr_null(galley_program_free(NULL));
  /* galley_program_read of a real file */
  char path[] = "/tmp/test_refeval_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "w");
  fputs("dim n = 4\nc = sum(n: 0.5)\n", f);
  fclose(f);
  ck_assert_int_eq(galley_program_read(path, &gp, NULL, &err), GALLEY_OK);
  remove(path);
  run_ok(gp);
  ck_close(get0(output(gp, "c")), 2);
  galley_program_free(gp);
}
END_TEST

/* A random sparse matmul and a masked sum, checked against naive loops
 * over the same COO data (not through the evaluator). */
START_TEST(random_differential) {
  test_rng r = test_rng_seed(42);
  for (int round = 0; round < 5; round++) {
    int64_t I = 1 + test_rng_below(&r, 6), J = 1 + test_rng_below(&r, 6),
            K = 1 + test_rng_below(&r, 6);
    double *a = calloc((size_t)(I * J), sizeof *a);
    double *b = calloc((size_t)(J * K), sizeof *b);
    for (int64_t e = 0; e < I * J; e++)
      if (test_rng_below(&r, 3) == 0)
        a[e] = (double)test_rng_below(&r, 9) - 4;
    for (int64_t e = 0; e < J * K; e++)
      if (test_rng_below(&r, 3) == 0)
        b[e] = (double)test_rng_below(&r, 9) - 4;
    int64_t da[2] = {I, J}, db[2] = {J, K};
    galley_format csr = galley_format_default(2);
    galley_tensor *A = NULL, *B = NULL;
    galley_error err;
    ck_assert_int_eq(galley_tensor_from_dense(2, da, a, 0, &csr, &A, &err), 0);
    ck_assert_int_eq(galley_tensor_from_dense(2, db, b, 0, &csr, &B, &err), 0);
    galley_program *gp = parse_ok("input A[i, j], B[j, k]\n"
                                  "C[i, k] = A[i, j] * B[j, k]\n"
                                  "M[i] = max(k: C[i, k])\n"
                                  "output C, M\n");
    bind_ok(gp, "A", A);
    bind_ok(gp, "B", B);
    run_ok(gp);
    const galley_tensor *C = output(gp, "C"), *M = output(gp, "M");
    for (int64_t i = 0; i < I; i++) {
      double mx = -INFINITY;
      for (int64_t k = 0; k < K; k++) {
        double s = 0;
        for (int64_t j = 0; j < J; j++)
          s += a[i * J + j] * b[j * K + k];
        ck_close(get2(C, i, k), s);
        mx = fmax(mx, s);
      }
      ck_close(get1(M, i), mx);
    }
    galley_program_free(gp);
    galley_tensor_free(A);
    galley_tensor_free(B);
    free(a);
    free(b);
  }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Suite                                                               */
/* ------------------------------------------------------------------ */

int main(void) {
  Suite *s = suite_create("refeval");
  TCase *hand = tcase_create("hand-built plans");
  tcase_add_test(hand, hand_trace);
  tcase_add_test(hand, hand_matmul_exp);
  tcase_add_test(hand, hand_conflict);
  tcase_add_test(hand, hand_too_large);
  tcase_add_test(hand, hand_fill);
  suite_add_tcase(s, hand);
  TCase *text = tcase_create("programs");
  tcase_add_test(text, trace);
  tcase_add_test(text, triangles_small);
  tcase_add_test(text, triangles_karate);
  tcase_add_test(text, row_max);
  tcase_add_test(text, min_inf_fill);
  tcase_add_test(text, exp_sparse);
  tcase_add_test(text, logistic);
  tcase_add_test(text, nested_aggregates);
  tcase_add_test(text, user_function);
  tcase_add_test(text, outputs_and_aliases);
  tcase_add_test(text, repeated_index);
  tcase_add_test(text, scalars);
  tcase_add_test(text, dim_statement);
  tcase_add_test(text, nonzero_fill_input);
  tcase_add_test(text, user_aggregate);
  tcase_add_test(text, any_all);
  tcase_add_test(text, bind_errors);
  tcase_add_test(text, fills_from_data);
  tcase_add_test(text, assumed_finite);
  tcase_add_test(text, api_errors);
  tcase_add_test(text, random_differential);
  suite_add_tcase(s, text);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
