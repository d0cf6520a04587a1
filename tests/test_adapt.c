/*
 * test_adapt.c -- issue 12's adaptive planning and re-plan churn.
 *
 * Adaptive planning: a product whose result is far denser than the
 * uniform estimator says (a dense column of A times a dense row of B)
 * is measured when it has run; the query after it is planned again with
 * the real nnz, and its plan no longer walks the dense product (it
 * takes fewer steps: the kernel of D is timed both ways), with results
 * equal to the reference evaluator; the next run keeps the new plan;
 * explain --analyze gives the estimate, the real nnz and the outcome.
 * An estimate within the factor re-plans nothing.  An intermediate whose
 * entries crowd into a few fibers is re-planned for its degrees (kept
 * off the positions its kernel wrote), which explain --analyze shows.
 *
 * Churn: data that re-plans (its nnz moved past the re-run rule) but
 * yields the same kernels keeps the compiled code.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "galley.h"
#include "refcheck.h"
#include "rt_internal.h"
#include "testutil.h"

static galley_tensor *coo(int64_t n, int64_t nnz, const int64_t *coords,
                          const double *vals) {
  galley_tensor *t = NULL;
  galley_error err;
  int64_t dims[2] = {n, n};
  ck_assert_msg(galley_tensor_from_coo(2, dims, nnz, coords, vals, 0, NULL,
                                       &t, &err) == GALLEY_OK,
                "%s", err.msg);
  return t;
}

/* A: column 0 full plus the diagonal; B (by_row): row 0 full plus the
 * diagonal.  A * B is full: n^2 entries, where a uniform estimate sees
 * two matrices of density 2/n. */
static galley_tensor *cross(test_rng *r, int64_t n, int by_row) {
  int64_t m = 2 * n - 1, *c = malloc(2 * (size_t)m * sizeof *c);
  double *v = malloc((size_t)m * sizeof *v);
  for (int64_t k = 0; k < m; k++) {
    int64_t line = k < n ? k : k - n + 1, other = k < n ? 0 : line;
    c[2 * k] = by_row ? other : line;
    c[2 * k + 1] = by_row ? line : other;
    v[k] = test_rng_double(r, 1, 2);
  }
  galley_tensor *t = coo(n, m, c, v);
  free(c);
  free(v);
  return t;
}

static galley_tensor *random_matrix(test_rng *r, int64_t n, int per_row) {
  int64_t m = n * per_row, *c = malloc(2 * (size_t)m * sizeof *c);
  double *v = malloc((size_t)m * sizeof *v);
  for (int64_t k = 0; k < m; k++) {
    c[2 * k] = k / per_row;
    c[2 * k + 1] = test_rng_below(r, n);
    v[k] = test_rng_double(r, -1, 1);
  }
  galley_tensor *t = coo(n, m, c, v);
  free(c);
  free(v);
  return t;
}

static char *text_of(galley_program *p, unsigned flags) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_assert_ptr_nonnull(f);
  galley_error err;
  ck_assert_msg(galley_program_explain(p, f, flags, &err) == GALLEY_OK, "%s",
                err.msg);
  fclose(f);
  return text;
}

/* The physical plan's line of query name (malloc()ed). */
static char *plan_line(const char *explained, const char *name) {
  const char *s = strstr(explained, "physical plan:");
  ck_assert_ptr_nonnull(s);
  char key[64];
  snprintf(key, sizeof key, "\nQuery(%s[", name);
  s = strstr(s, key);
  ck_assert_msg(s != NULL, "no query %s in\n%s", name, explained);
  s++;
  size_t n = strcspn(s, "\n");
  char *line = malloc(n + 1);
  memcpy(line, s, n);
  line[n] = 0;
  return line;
}

/* The kernel time of the query named name in the last run. */
static double query_seconds(const galley_program *p, const char *name) {
  galley_run_info info;
  galley_program_run_info(p, &info);
  for (int k = 0; k < info.nqueries; k++) {
    galley_query_info qi;
    ck_assert_int_eq(galley_program_query_info(p, k, &qi, NULL), GALLEY_OK);
    if (strcmp(qi.name, name) == 0)
      return qi.seconds;
  }
  ck_abort_msg("no query %s in the last run", name);
  return 0;
}

static const char *const PRODUCT =
    "input A[i, j], B[j, k], M[i, k]\n"
    "C[i, k] = sum(j: A[i, j] * B[j, k])\n"
    "D[i, k] = C[i, k] * M[i, k]\n"
    "output C, D\n";

static galley_program *product_program(galley_tensor *const *t, int adapt) {
  galley_program *p = program(PRODUCT);
  galley_program_set_estimator(p, GALLEY_ESTIMATOR_UNIFORM);
  ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_TCC, NULL), GALLEY_OK);
  p->adapt_off = !adapt;
  bind(p, "A", t[0]);
  bind(p, "B", t[1]);
  bind(p, "M", t[2]);
  return p;
}

START_TEST(a_dense_product_replans_what_reads_it) {
  test_rng r = test_rng_seed(12);
  int64_t n = 300;
  galley_tensor *t[3] = {cross(&r, n, 0), cross(&r, n, 1),
                         random_matrix(&r, n, 6)};
  galley_program *fixed = product_program(t, 0);
  galley_program *adapt = product_program(t, 1);
  char *before = text_of(fixed, 0); /* planned, not run */
  char *d_before = plan_line(before, "D");
  ck_assert_msg(strstr(d_before, "C[i::it"), "D does not walk C:\n%s", before);

  galley_error err;
  galley_run_info info;
  ck_assert_msg(galley_program_run(adapt, &err) == GALLEY_OK, "%s", err.msg);
  galley_program_run_info(adapt, &info);
  ck_assert_int_eq(info.replanned, 1);
  ck_assert_msg(strstr(adapt->replan_reason, "query 'C' has 90000 entries"),
                "%s", adapt->replan_reason);
  char *after = text_of(adapt, GALLEY_EXPLAIN_ANALYZE);
  char *d_after = plan_line(after, "D");
  ck_assert_msg(!strstr(d_after, "C[i::it"), "D still walks C:\n%s", after);
  ck_assert_msg(strstr(after, "analyze: adaptive: query 'C': ") &&
                    strstr(after, " 90000 real; ") &&
                    strstr(after, ": the queries after it were planned "
                                  "again with the real facts"),
                "%s", after);
  /* the new plan stays: the next run plans nothing */
  ck_assert_msg(galley_program_run(adapt, &err) == GALLEY_OK, "%s", err.msg);
  galley_program_run_info(adapt, &info);
  ck_assert_int_eq(info.replanned, 0);
  ck_assert_int_eq(info.reused, 1);
  check_against_reference(adapt);

  /* fewer steps: the best of five runs of D's kernel each way */
  double t_fixed = INFINITY, t_adapt = INFINITY;
  for (int k = 0; k < 5; k++) {
    ck_assert(galley_program_run(fixed, &err) == GALLEY_OK);
    t_fixed = fmin(t_fixed, query_seconds(fixed, "D"));
    ck_assert(galley_program_run(adapt, &err) == GALLEY_OK);
    t_adapt = fmin(t_adapt, query_seconds(adapt, "D"));
  }
  ck_assert_msg(t_adapt < t_fixed, "D: %g s adapted, %g s as estimated",
                t_adapt, t_fixed);
  free(d_before);
  free(d_after);
  free(before);
  free(after);
  galley_program_free(fixed);
  galley_program_free(adapt);
  for (int k = 0; k < 3; k++)
    galley_tensor_free(t[k]);
}
END_TEST

static const char *const TWO_HOPS =
    "input A[i, j], B[j, k], F[k, l]\n"
    "C[i, k] = sum(j: A[i, j] * B[j, k])\n"
    "E[i, l] = sum(k: C[i, k] * F[k, l])\n"
    "output C, E\n";

/* Degree statistics of intermediates (issue 12, item 1): C = A * B with
 * B's row 0 full (plus the diagonal) copies that row into every row of
 * C whose A holds column 0: a few rows of 400 entries among rows of
 * about 3, where the planner spreads C's entries evenly.  The run
 * measures the degrees of C's levels off the positions its kernel
 * wrote and plans E again with them (degree constraints on C);
 * explain --analyze shows them and why; the results equal the
 * reference.  An intermediate of even degrees is not re-planned for its
 * degrees. */
START_TEST(skewed_degrees_replan_what_reads_them) {
  test_rng r = test_rng_seed(21);
  int64_t n = 400;
  galley_tensor *A = random_matrix(&r, n, 3);
  galley_tensor *B = cross(&r, n, 1);
  galley_tensor *F = random_matrix(&r, n, 3);
  galley_program *p = program(TWO_HOPS);
  bind(p, "A", A);
  bind(p, "B", B);
  bind(p, "F", F);
  galley_error err;
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
  char *text = text_of(p, GALLEY_EXPLAIN_ANALYZE);
  ck_assert_msg(strstr(text, "analyze: adaptive: query 'C': ") &&
                    strstr(text, "skewed degrees: a fiber of level 1 holds "
                                 "400 entries"),
                "%s", text);
  ck_assert_msg(strstr(text, "planned again with the real facts") ||
                    strstr(text, "were planned again with the real facts"),
                "%s", text);
  ck_assert_msg(strstr(text, "analyze: degrees: query 'C': ") &&
                    strstr(text, "level 1 (mode 1): 400 fibers hold "
                                 "entries, at most 400"),
                "%s", text);
  check_against_reference(p);
  free(text);
  galley_program_free(p);

  /* even degrees: B without its full row */
  galley_tensor *B2 = random_matrix(&r, n, 2);
  p = program(TWO_HOPS);
  bind(p, "A", A);
  bind(p, "B", B2);
  bind(p, "F", F);
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
  text = text_of(p, GALLEY_EXPLAIN_ANALYZE);
  ck_assert_msg(strstr(text, "analyze: degrees: query 'C': ") &&
                    !strstr(text, "skewed degrees"),
                "%s", text);
  check_against_reference(p);
  free(text);
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(B);
  galley_tensor_free(B2);
  galley_tensor_free(F);
}
END_TEST

START_TEST(a_good_estimate_replans_nothing) {
  test_rng r = test_rng_seed(3);
  galley_tensor *t[3] = {random_matrix(&r, 200, 2), random_matrix(&r, 200, 2),
                         random_matrix(&r, 200, 3)};
  galley_program *p = program(PRODUCT);
  ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_TCC, NULL), GALLEY_OK);
  bind(p, "A", t[0]);
  bind(p, "B", t[1]);
  bind(p, "M", t[2]);
  char *text = text_of(p, GALLEY_EXPLAIN_ANALYZE);
  ck_assert_msg(strstr(text, "analyze: adaptive: query 'C': ") &&
                    strstr(text, "the facts are as planned: plan kept"),
                "%s", text);
  ck_assert_msg(!strstr(text, "planned with the real facts"), "%s", text);
  free(text);
  check_against_reference(p);
  galley_program_free(p);
  for (int k = 0; k < 3; k++)
    galley_tensor_free(t[k]);
}
END_TEST

/* A vector whose nnz grows past twice the planned re-plans (the
 * re-run rule) into the same kernels: the code is kept, not compiled. */
START_TEST(same_kernels_are_not_compiled_again) {
  test_rng r = test_rng_seed(4);
  galley_tensor *A = random_matrix(&r, 300, 3);
  galley_program *p = program("input A[i, j], x[j]\n"
                              "s = sum(i, j: A[i, j] * x[j])\noutput s\n");
  ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_TCC, NULL), GALLEY_OK);
  char *log = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&log, &len);
  galley_program_set_log(p, 3, f);
  bind(p, "A", A);
  galley_tensor *x[2];
  for (int v = 0; v < 2; v++) {
    int64_t nnz = v ? 45 : 20, dims[1] = {300}, c[45];
    double val[45];
    for (int64_t k = 0; k < nnz; k++) {
      c[k] = k * 2;
      val[k] = (double)k + 1;
    }
    ck_assert_int_eq(galley_tensor_from_coo(1, dims, nnz, c, val, 0, NULL,
                                            &x[v], NULL),
                     GALLEY_OK);
  }
  bind(p, "x", x[0]);
  check_against_reference(p);
  const void *code = p->jit;
  char *src0 = strdup(galley_program_source(p));
  bind(p, "x", x[1]);
  check_against_reference(p);
  ck_assert_str_eq(src0, galley_program_source(p));
  free(src0);
  galley_run_info info;
  galley_program_run_info(p, &info);
  ck_assert_int_eq(info.replanned, 1);
  fflush(f);
  ck_assert_msg(strstr(log, "re-planned to kernels compiled before"), "%s", log);
  ck_assert_ptr_eq(code, p->jit);
  galley_program_free(p);
  fclose(f);
  free(log);
  galley_tensor_free(A);
  galley_tensor_free(x[0]);
  galley_tensor_free(x[1]);
}
END_TEST

/* A bytemap vector of length n holding 1 at 0, stride, 2 stride, ...
 * (count points): a BFS frontier or visited set. */
static galley_tensor *ones_every(int64_t n, int64_t count, int64_t stride) {
  int64_t *c = malloc((size_t)count * sizeof *c);
  double *one = malloc((size_t)count * sizeof *one);
  for (int64_t k = 0; k < count; k++) {
    c[k] = k * stride;
    one[k] = 1;
  }
  galley_format bytemap = {.order = 1, .kinds = {GALLEY_BYTEMAP}};
  galley_tensor *t = NULL;
  ck_assert_int_eq(galley_tensor_from_coo(1, &n, count, c, one, 0, &bytemap,
                                          &t, NULL),
                   GALLEY_OK);
  free(c);
  free(one);
  return t;
}

/* A BFS step (examples/bfs.tin) plans by the frontier's real size: a
 * small frontier is walked and its rows scattered (push: the loop over
 * i outermost, f leading it); a frontier of most vertices reads every
 * row once with f looked up (pull: j outermost).  Both equal the
 * reference evaluator. */
START_TEST(bfs_pushes_a_small_frontier) {
  test_rng r = test_rng_seed(17);
  int64_t n = 2000;
  galley_tensor *A = random_matrix(&r, n, 4);
  galley_program *p = program(
      "input A[i, j], f[i], v[j]\n"
      "next[j] = any(i: f[i] * A[i, j]) && !v[j]\n"
      "count = sum(j: next[j])\n"
      "visited[j] = max(v[j], next[j])\n"
      "output next, count, visited\n");
  int64_t sizes[2] = {20, 1900};
  for (int s = 0; s < 2; s++) {
    galley_tensor *f = ones_every(n, sizes[s], n / sizes[s]);
    galley_tensor *v = ones_every(n, sizes[s] / 2, n / sizes[s]);
    bind(p, "A", A);
    bind(p, "f", f);
    bind(p, "v", v);
    char *text = text_of(p, 0);
    const char *push = "Map(*, f[i::it], A[i::lu,j::it]))), loops(i:lead";
    if (s == 0)
      ck_assert_msg(strstr(text, push), "no push plan:\n%s", text);
    else
      ck_assert_msg(!strstr(text, push) && strstr(text, "loops(j:"),
                    "no pull plan:\n%s", text);
    free(text);
    check_against_reference(p);
    galley_tensor_free(f);
    galley_tensor_free(v);
  }
  galley_program_free(p);
  galley_tensor_free(A);
}
END_TEST


/* ---- value ranges and finiteness fed back (issue 12) ---- */

/* x = r / d (0 where d is 0: the fill stays 0) cannot be proven finite
 * (d's values range over [-1, 1], 0 included: an interval cannot leave
 * it out) but is finite at run time (no d is 0); y reads A times x.
 * Planned without assuming finiteness (as after a failed assumption),
 * y must look A's absent entries up (0 * inf is NaN) and visits n^2
 * pairs; the run measures x, finds it finite and plans y again, walking
 * A's entries. */
static const char *const RATIO =
    "input A[i, j], r[i], d[i]\n"
    "x[i] = ifelse(d[i] != 0, r[i] / d[i], 0)\n"
    "y[j] = sum(i: A[i, j] * x[i])\n"
    "output y\n";

/* A dense vector of n values of both signs; tiny_at >= 0 stores a
 * subnormal there (dividing by it overflows to inf). */
static galley_tensor *signs(int64_t n, int64_t tiny_at) {
  double *v = malloc((size_t)n * sizeof *v);
  for (int64_t k = 0; k < n; k++)
    v[k] = k == tiny_at ? 1e-320 : (k % 2 ? 0.5 : -0.75);
  galley_tensor *t = NULL;
  galley_format dense = galley_format_dense(1);
  ck_assert_int_eq(galley_tensor_from_dense(1, &n, v, 0, &dense, &t, NULL),
                   GALLEY_OK);
  free(v);
  return t;
}

static galley_program *ratio_program(galley_tensor *const *t, int adapt) {
  galley_program *p = program(RATIO);
  ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_TCC, NULL),
                   GALLEY_OK);
  p->adapt_off = !adapt;
  p->pessimistic = 1; /* as after a result planned finite was not */
  bind(p, "A", t[0]);
  bind(p, "r", t[1]);
  bind(p, "d", t[2]);
  return p;
}

START_TEST(a_result_finite_at_run_time_is_planned_finite) {
  test_rng r = test_rng_seed(21);
  int64_t n = 400;
  galley_tensor *t[3] = {random_matrix(&r, n, 3), signs(n, -1),
                         signs(n, -1)};
  galley_program *fixed = ratio_program(t, 0);
  galley_program *adapt = ratio_program(t, 1);
  galley_error err;
  ck_assert_msg(galley_program_run(fixed, &err) == GALLEY_OK, "%s", err.msg);
  char *before = text_of(fixed, 0);
  char *y_before = plan_line(before, "y");
  ck_assert_msg(strstr(y_before, "[i::lu,j::lu]"), "y skips A's zeros "
                "without knowing x finite:\n%s", before);

  ck_assert_msg(galley_program_run(adapt, &err) == GALLEY_OK, "%s", err.msg);
  galley_run_info info;
  galley_program_run_info(adapt, &info);
  ck_assert_int_eq(info.replanned, 1);
  ck_assert_msg(strstr(adapt->replan_reason, "query 'x' holds finite values"),
                "%s", adapt->replan_reason);
  char *after = text_of(adapt, GALLEY_EXPLAIN_ANALYZE);
  char *y_after = plan_line(after, "y");
  ck_assert_msg(!strstr(y_after, "[i::lu,j::lu]"), "y still looks A up:\n%s",
                after);
  ck_assert_msg(strstr(after, "analyze: adaptive: query 'x': ") &&
                    strstr(after, "holds finite values") &&
                    strstr(after, "planned again with the real facts"),
                "%s", after);
  check_against_reference(adapt);
  /* the next run keeps the plan */
  ck_assert_msg(galley_program_run(adapt, &err) == GALLEY_OK, "%s", err.msg);
  galley_program_run_info(adapt, &info);
  ck_assert_int_eq(info.replanned, 0);
  free(y_before);
  free(y_after);
  free(before);
  free(after);
  galley_program_free(fixed);
  galley_program_free(adapt);
  for (int k = 0; k < 3; k++)
    galley_tensor_free(t[k]);
}
END_TEST

/* The plan made with x measured finite is kept for new data that fits
 * the re-run rule (d's nnz, range and finiteness as before) -- but with
 * a subnormal in d, x holds an inf: the run sees x leave the values
 * measured before and plans again before y reads it, so y is NaN where
 * the dense meaning says (0 * inf), as the reference evaluator. */
START_TEST(values_leaving_the_measured_range_replan_before_use) {
  test_rng r = test_rng_seed(22);
  int64_t n = 300;
  galley_tensor *A = random_matrix(&r, n, 3), *rv = signs(n, -1);
  galley_tensor *d[2] = {signs(n, -1), signs(n, 7)};
  galley_tensor *t[3] = {A, rv, d[0]};
  galley_program *p = ratio_program(t, 1);
  check_against_reference(p); /* planned with x finite */
  char *log = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&log, &len);
  galley_program_set_log(p, 3, f);
  bind(p, "d", d[1]);
  check_against_reference(p);
  galley_run_info info;
  galley_program_run_info(p, &info);
  ck_assert_int_eq(info.replanned, 1);
  fflush(f);
  ck_assert_msg(strstr(log, "outside those measured before"), "%s", log);
  /* y is NaN somewhere: the inf was not skipped */
  double *y = malloc((size_t)n * sizeof *y);
  ck_assert_int_eq(galley_tensor_to_dense(galley_program_output(p, 0), y, n,
                                          NULL), GALLEY_OK);
  int nans = 0;
  for (int64_t k = 0; k < n; k++)
    nans += y[k] != y[k];
  ck_assert_int_gt(nans, 0);
  free(y);
  galley_program_free(p);
  fclose(f);
  free(log);
  galley_tensor_free(A);
  galley_tensor_free(rv);
  galley_tensor_free(d[0]);
  galley_tensor_free(d[1]);
}
END_TEST

/* A run pays for the facts of an intermediate only when the plan can
 * use them: measured on the first run, then not again while the plan
 * relies on no measured range (C's planned range follows from the
 * inputs'); where the plan narrowed x's range to the values measured
 * (planned finite at run time), every run measures x again, which is
 * what lets values_leaving_the_measured_range_replan_before_use see them
 * leave. */
START_TEST(facts_are_measured_only_where_the_plan_relies_on_them) {
  test_rng r = test_rng_seed(3);
  galley_tensor *t[3] = {random_matrix(&r, 200, 2), random_matrix(&r, 200, 2),
                         random_matrix(&r, 200, 3)};
  galley_program *p = program(PRODUCT);
  ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_TCC, NULL),
                   GALLEY_OK);
  bind(p, "A", t[0]);
  bind(p, "B", t[1]);
  bind(p, "M", t[2]);
  check_against_reference(p);
  int64_t first = p->facts_passes;
  ck_assert_int_gt(first, 0); /* C measured once for the data */
  for (int run = 0; run < 3; run++)
    check_against_reference(p);
  ck_assert_int_eq(p->facts_passes, first);

  test_rng r2 = test_rng_seed(21);
  int64_t n = 400;
  galley_tensor *u[3] = {random_matrix(&r2, n, 3), signs(n, -1),
                         signs(n, -1)};
  galley_program *q = ratio_program(u, 1);
  check_against_reference(q);
  galley_run_info info;
  galley_program_run_info(q, &info);
  ck_assert_int_eq(info.replanned, 1); /* with x measured finite */
  int64_t before = q->facts_passes;
  check_against_reference(q);
  galley_program_run_info(q, &info);
  ck_assert_int_eq(info.replanned, 0);
  ck_assert_int_gt(q->facts_passes, before);
  galley_program_free(p);
  galley_program_free(q);
  for (int k = 0; k < 3; k++) {
    galley_tensor_free(t[k]);
    galley_tensor_free(u[k]);
  }
}
END_TEST

/* The count of a result's entries that record_stats takes (a flat pass
 * over a dense result's values) is the cursor's count, for a 0 fill and
 * for a NaN fill (bitwise-equal NaNs are the fill), and for a sparse
 * result (the cursor's own path). */
START_TEST(the_quick_nnz_count_is_the_count) {
  int64_t n = 1000;
  double *v = malloc((size_t)n * sizeof *v);
  const double fills[2] = {0, NAN};
  for (int f = 0; f < 2; f++) {
    int64_t want = 0;
    for (int64_t k = 0; k < n; k++) {
      v[k] = k % 3 == 0 ? fills[f] : (k % 7 == 0 ? -NAN : (double)k);
      want += k % 3 != 0;
    }
    galley_format dense = galley_format_dense(1);
    galley_tensor *t = NULL;
    ck_assert_int_eq(galley_tensor_from_dense(1, &n, v, fills[f], &dense, &t,
                                              NULL), GALLEY_OK);
    ck_assert_int_eq(galley_tensor_stored(t), n);
    ck_assert_int_eq(rt_tensor_nnz_quick(t), rt_tensor_count_nnz(t));
    ck_assert_int_eq(rt_tensor_nnz_quick(t), want);
    galley_tensor_free(t);
    ck_assert_int_eq(galley_tensor_from_dense(1, &n, v, fills[f], NULL, &t,
                                              NULL), GALLEY_OK);
    ck_assert_int_eq(rt_tensor_nnz_quick(t), want);
    galley_tensor_free(t);
  }
  free(v);
}
END_TEST

/* The plan cache: data that comes back to the facts of an earlier plan
 * takes that plan again without planning; an all-dense input whose nnz
 * moved past twice without changing the plan no longer re-plans. */
START_TEST(kept_plans_are_taken_again_without_planning) {
  test_rng r = test_rng_seed(23);
  int64_t n = 2000;
  galley_tensor *A = random_matrix(&r, n, 4);
  galley_program *p = program("input A[i, j], f[i]\n"
                              "y[j] = sum(i: f[i] * A[i, j])\n"
                              "output y\n");
  ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_TCC, NULL),
                   GALLEY_OK);
  char *log = NULL;
  size_t len = 0;
  FILE *lf = open_memstream(&log, &len);
  galley_program_set_log(p, 3, lf);
  int64_t sizes[3] = {10, 1800, 12};
  galley_tensor *f[3];
  for (int s = 0; s < 3; s++)
    f[s] = ones_every(n, sizes[s], n / sizes[s]);
  bind(p, "A", A);
  const char *sources[3];
  for (int s = 0; s < 3; s++) {
    bind(p, "f", f[s]);
    check_against_reference(p);
    sources[s] = galley_program_source(p);
  }
  /* push for 10 and 12, pull for 1800: the third run took the first
   * plan back (the same source object: not planned again) */
  ck_assert_ptr_eq(sources[0], sources[2]);
  fflush(lf);
  ck_assert_msg(strstr(log, "a plan kept from before fits: taken without "
                            "planning"), "%s", log);
  galley_program_free(p);
  fclose(lf);
  free(log);
  galley_tensor_free(A);
  for (int s = 0; s < 3; s++)
    galley_tensor_free(f[s]);
}
END_TEST

/* Loop-invariant queries: d (A's row sums) and n depend on A alone; a
 * run that binds the same A again borrows them from the first run
 * (the log says so) while x, which reads y, runs; after A's values
 * change in place and galley_tensor_touch, d is computed again (the
 * results equal the reference evaluator's every time). */
START_TEST(results_of_one_unchanged_input_are_kept) {
  enum { N = 300 };
  int64_t rp[N + 1], ci[2 * N];
  double vals[2 * N], yv[N];
  for (int64_t r = 0; r <= N; r++)
    rp[r] = 2 * r;
  for (int64_t r = 0; r < N; r++) { /* columns r/2 and N/2 + r/2 */
    ci[2 * r] = r / 2;
    ci[2 * r + 1] = N / 2 + r / 2;
    vals[2 * r] = 1 + (double)(r % 5);
    vals[2 * r + 1] = 2;
  }
  galley_tensor *A = NULL;
  ck_assert_int_eq(galley_tensor_wrap_csr(N, N, rp, ci, vals, 0, &A, NULL),
                   GALLEY_OK);
  galley_program *p = program("input A[i, j], y[i]\n"
                              "d[i] = sum(j: A[i, j])\n"
                              "n = sum(i: 0 * d[i] + 1)\n"
                              "x[i] = y[i] / d[i] + n\n"
                              "output x\n");
  ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_TCC, NULL),
                   GALLEY_OK);
  char *log = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&log, &len);
  bind(p, "A", A);
  galley_tensor *y[3];
  for (int v = 0; v < 3; v++) {
    for (int64_t k = 0; k < N; k++)
      yv[k] = (double)(k % (v + 3)) - 1;
    galley_format dense = galley_format_dense(1);
    int64_t n = N;
    ck_assert_int_eq(galley_tensor_from_dense(1, &n, yv, 0, &dense, &y[v],
                                              NULL), GALLEY_OK);
  }
  bind(p, "y", y[0]);
  check_against_reference(p); /* d and n computed, kept with A */
  galley_program_set_log(p, 2, f);
  bind(p, "y", y[1]);
  check_against_reference(p);
  fflush(f);
  ck_assert_msg(strstr(log, "query d ") && strstr(log, "(kept from an "
                "earlier run") && strstr(log, "query n "), "%s", log);
  char *x_line = strstr(log, "query x "); /* x reads y: it ran */
  ck_assert_msg(x_line && (!strstr(x_line, "(kept") ||
                           strstr(x_line, "(kept") > strchr(x_line, '\n')),
                "%s", log);
  /* A changes in place: touched, nothing kept is used */
  for (int64_t e = 0; e < 2 * N; e++)
    vals[e] += 1;
  galley_tensor_touch(A);
  char *log2 = NULL;
  size_t len2 = 0;
  FILE *f2 = open_memstream(&log2, &len2);
  galley_program_set_log(p, 2, f2);
  bind(p, "y", y[2]);
  check_against_reference(p);
  fflush(f2);
  ck_assert_msg(strstr(log2, "query d ") &&
                    !strstr(log2, "(kept from an earlier run"), "%s", log2);
  /* keeping turned off: the next run computes d and n again, although A
   * is unchanged since the run that kept them */
  galley_program_set_keep_invariants(p, 0);
  char *log3 = NULL;
  size_t len3 = 0;
  FILE *f3 = open_memstream(&log3, &len3);
  galley_program_set_log(p, 2, f3);
  bind(p, "y", y[0]);
  check_against_reference(p);
  fflush(f3);
  ck_assert_msg(strstr(log3, "query d ") &&
                    !strstr(log3, "(kept from an earlier run"), "%s", log3);
  galley_program_free(p);
  fclose(f);
  free(log);
  fclose(f2);
  free(log2);
  fclose(f3);
  free(log3);
  galley_tensor_free(A);
  for (int v = 0; v < 3; v++)
    galley_tensor_free(y[v]);
}
END_TEST


/* A vector of n values (dense, or only its non-fill values in a list). */
static galley_tensor *vec(int64_t n, const double *x, double fill, int dense) {
  galley_format f = {.order = 1, .kinds = {dense ? GALLEY_DENSE
                                                 : GALLEY_LIST}};
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_msg(galley_tensor_from_dense(1, &n, x, fill, &f, &t, &err) ==
                    GALLEY_OK, "%s", err.msg);
  return t;
}

/* The facts of t equal those of a fresh copy (an in-place update tracks
 * them without a pass). */
static void facts_exact(const galley_tensor *t) {
  galley_tensor *copy = NULL;
  galley_format fmt;
  galley_facts a, b;
  galley_tensor_format(t, &fmt);
  ck_assert_int_eq(galley_tensor_convert(t, &fmt, &copy, NULL), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_facts(t, &a, NULL), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_facts(copy, &b, NULL), GALLEY_OK);
  ck_assert_int_eq(a.nnz, b.nnz);
  ck_assert_int_eq(a.nan + a.pos_inf + a.neg_inf,
                   b.nan + b.pos_inf + b.neg_inf);
  ck_assert(a.min == b.min && a.max == b.max && a.integer == b.integer);
  galley_tensor_free(copy);
}

/* A result handed back as the next run's input (galley_program_bind_
 * owned) is updated in place where the op keeps the input's values at
 * the other operand's fill: min with fill inf (its identity), max over
 * values at or above the fill 0 (with +inf stored).  Every step equals
 * the reference evaluator run on copies, the facts stay exact, and an
 * op that would change the unwritten entries (max over negative values,
 * fill 0) is not run in place until the values allow it. */
START_TEST(a_result_handed_back_is_updated_in_place) {
  const char *texts[] = {
      "input d[j], e[j] fill inf\nout[j] = min(d[j], e[j])\noutput out\n",
      "input d[j], e[j]\nout[j] = max(d[j], e[j])\noutput out\n",
      "input d[j], e[j]\nout[j] = max(d[j], e[j])\noutput out\n"};
  const double fills[] = {INFINITY, 0, 0};
  const int expect_in_place[] = {1, 1, 0};
  enum { N = 300 };
  test_rng r = test_rng_seed(12);
  for (int c = 0; c < 3; c++) {
    double x[N], y[N];
    for (int k = 0; k < N; k++) /* case 2: values below e's fill 0 */
      x[k] = k % 7 == 0 ? INFINITY
                        : (c == 2 ? -1 : 1) * (double)test_rng_below(&r, 5);
    if (c == 0) /* one greatest finite value, overwritten at step 0 */
      for (int k = 0; k < N; k++)
        x[k] = k % 3 ? INFINITY : k == 3 ? 100 : x[k];
    galley_program *p = program(texts[c]), *ref = program(texts[c]);
    galley_tensor *d = vec(N, x, fills[c], 1);
    galley_error err;
    ck_assert_int_eq(galley_program_bind_owned(p, "d", d, &err), GALLEY_OK);
    for (int step = 0; step < 4; step++) {
      for (int k = 0; k < N; k++)
        y[k] = test_rng_below(&r, 10) == 0 ? (double)test_rng_below(&r, 9)
                                           : fills[c];
      if (step == 0)
        y[3] = 1;
      galley_tensor *e = vec(N, y, fills[c], 0), *dref = NULL;
      galley_format dense = galley_format_dense(1);
      ck_assert_int_eq(galley_tensor_convert(d, &dense, &dref, NULL),
                       GALLEY_OK);
      bind(ref, "d", dref);
      bind(ref, "e", e);
      ck_assert_msg(galley_program_run_reference(ref, &err) == GALLEY_OK,
                    "%s", err.msg);
      double want[N], got[N];
      ck_assert_int_eq(galley_tensor_to_dense(galley_program_output(ref, 0),
                                              want, N, NULL), GALLEY_OK);
      bind(p, "e", e);
      ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
      galley_query_info qi;
      int q = 0;
      while (galley_program_query_info(p, q, &qi, NULL) == GALLEY_OK &&
             strcmp(qi.name, "out") != 0)
        q++;
      /* case 2: max(d, e) with e's fill 0 leaves d >= 0 after step 0 */
      int in_place = expect_in_place[c] || step > 0;
      ck_assert_msg(qi.in_place == in_place, "case %d step %d: in place %d",
                    c, step, qi.in_place);
      d = galley_program_take_output(p, 0);
      ck_assert_int_eq(galley_tensor_to_dense(d, got, N, NULL), GALLEY_OK);
      for (int k = 0; k < N; k++)
        ck_assert_msg(got[k] == want[k], "case %d step %d entry %d: %g, "
                      "want %g", c, step, k, got[k], want[k]);
      facts_exact(d);
      if (in_place) /* bound no more: it is the result */
        ck_assert_int_eq(galley_program_run(p, &err), GALLEY_EBIND);
      ck_assert_int_eq(galley_program_bind_owned(p, "d", d, &err), GALLEY_OK);
      galley_program_free(ref); /* e and dref outlive no program */
      ref = program(texts[c]);
      galley_tensor_free(e);
      galley_tensor_free(dref);
    }
    galley_program_free(p); /* frees d, which it owns */
    galley_program_free(ref);
  }
}
END_TEST


/* A tensor has one owner: a result the program still holds, or a tensor
 * another input owns, is refused (and stays the caller's). */
START_TEST(a_handed_over_tensor_has_one_owner) {
  double x[4] = {1, 0, 2, 0};
  galley_program *p =
      program("input d[j], e[j]\nout[j] = max(d[j], e[j])\noutput out\n");
  galley_tensor *d = vec(4, x, 0, 1), *e = vec(4, x, 0, 0);
  galley_error err;
  ck_assert_int_eq(galley_program_bind_owned(p, "d", d, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_bind_owned(p, "e", d, &err), GALLEY_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "owned by input 'd'"));
  bind(p, "e", e);
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
  galley_tensor *out = (galley_tensor *)galley_program_output(p, 0);
  ck_assert_int_eq(galley_program_bind_owned(p, "d", out, &err),
                   GALLEY_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "take it first"));
  galley_program_free(p); /* frees the result and nothing twice */
  galley_tensor_free(e);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("adapt");
  TCase *t = tcase_create("adapt");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, a_dense_product_replans_what_reads_it);
  tcase_add_test(t, a_good_estimate_replans_nothing);
  tcase_add_test(t, skewed_degrees_replan_what_reads_them);
  tcase_add_test(t, same_kernels_are_not_compiled_again);
  tcase_add_test(t, bfs_pushes_a_small_frontier);
  tcase_add_test(t, a_result_finite_at_run_time_is_planned_finite);
  tcase_add_test(t, values_leaving_the_measured_range_replan_before_use);
  tcase_add_test(t, facts_are_measured_only_where_the_plan_relies_on_them);
  tcase_add_test(t, the_quick_nnz_count_is_the_count);
  tcase_add_test(t, kept_plans_are_taken_again_without_planning);
  tcase_add_test(t, results_of_one_unchanged_input_are_kept);
  tcase_add_test(t, a_result_handed_back_is_updated_in_place);
  tcase_add_test(t, a_handed_over_tensor_has_one_owner);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
