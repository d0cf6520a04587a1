/*
 * test_api.c -- the user's surface of galley.h (issue 6), through the
 * public header only: contexts (defaults, setters and their errors,
 * options copied into programs, freeing the context first, one context
 * per thread), CSR/CSC matrices wrapped without copying and copied from
 * 32-bit arrays (and every way their arrays can be bad), explain as
 * text, JSON and Graphviz, the log, the memory budget, and the re-run
 * rule: same shapes and nnz within a factor of 2 reuse the plan and the
 * kernels, anything else plans again.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "testutil.h"

/* ---- helpers ---- */

/* The backend that compiles kernels in this build. */
static galley_backend kernel_backend(void) {
#ifdef HAVE_LIBTCC
  return GALLEY_BACKEND_TCC;
#else
  return GALLEY_BACKEND_CLANG;
#endif
}

/* y = A x and n = sum(y): a matrix input and a vector input. */
static const char mv_source[] = "input A[i, j], x[j]\n"
                                "y[i] = A[i, j] * x[j]\n"
                                "n = sum(i: y[i])\n"
                                "output y, n\n";

static galley_program *parse_mv(const galley_context *ctx) {
  galley_program *p = NULL;
  galley_error err;
  galley_status st =
      ctx ? galley_context_program_parse(ctx, "mv.tin", mv_source,
                                         strlen(mv_source), &p, NULL, &err)
          : galley_program_parse("mv.tin", mv_source, strlen(mv_source), &p,
                                 NULL, &err);
  ck_assert_msg(st == GALLEY_OK, "%s", err.msg);
  return p;
}

/* A dense vector of n values. */
static galley_tensor *vector(int64_t n, const double *vals) {
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_dense(1, &n, vals, 0, NULL, &t, &err),
                   GALLEY_OK);
  return t;
}

/* Everything a FILE received, via a temporary file (malloc()ed). */
static char *slurp(FILE *f) {
  long n = ftell(f);
  ck_assert(n >= 0);
  char *text = calloc((size_t)n + 1, 1);
  rewind(f);
  ck_assert(fread(text, 1, (size_t)n, f) == (size_t)n);
  return text;
}

/* The whole output of galley_program_explain (NULL on failure, with
 * *status set). */
static char *explain(galley_program *p, unsigned flags, galley_status *st,
                     galley_error *err) {
  FILE *f = tmpfile();
  ck_assert(f);
  *st = galley_program_explain(p, f, flags, err);
  char *text = slurp(f);
  fclose(f);
  return text;
}

/* The 4 x 3 matrix of examples/data/X.mtx in CSR:
 *   [1 0 -2; 0 0.5 0; 3 1 1; 0 0 0] */
static const int64_t X_rowptr[] = {0, 2, 3, 6, 6};
static const int64_t X_colidx[] = {0, 2, 1, 0, 1, 2};
static const double X_vals[] = {1, -2, 0.5, 3, 1, 1};
static const double X_dense[] = {1, 0, -2, 0, 0.5, 0, 3, 1, 1, 0, 0, 0};

/* ---- contexts ---- */

START_TEST(context_defaults) {
  galley_context *ctx = NULL;
  galley_error err;
  ck_assert_int_eq(galley_context_create(&ctx, &err), GALLEY_OK);
  ck_assert_ptr_nonnull(ctx);
  ck_assert_int_eq(galley_context_backend(ctx), GALLEY_BACKEND_DEFAULT);
  ck_assert_int_eq(galley_context_planner(ctx), GALLEY_PLANNER_COST);
  ck_assert_int_eq(galley_context_estimator(ctx), GALLEY_ESTIMATOR_CHAIN);
  ck_assert_int_eq(galley_context_search(ctx), GALLEY_SEARCH_GREEDY);
  ck_assert_ptr_null(galley_context_cache_dir(ctx));
  ck_assert_int_eq(galley_context_log_level(ctx), 0);
  ck_assert_ptr_null(galley_context_log_file(ctx));
  ck_assert_int_eq(galley_context_memory_budget(ctx), 0);
  ck_assert_ptr_null(galley_context_free(ctx));
  ck_assert_ptr_null(galley_context_free(NULL));
  /* getters of NULL give the defaults */
  ck_assert_int_eq(galley_context_backend(NULL), GALLEY_BACKEND_DEFAULT);
  ck_assert_int_eq(galley_context_planner(NULL), GALLEY_PLANNER_COST);
  ck_assert_int_eq(galley_context_memory_budget(NULL), 0);
  ck_assert_int_eq(galley_context_create(NULL, &err), GALLEY_EINVAL);
}
END_TEST

START_TEST(context_setters) {
  galley_context *ctx = NULL;
  galley_error err;
  ck_assert_int_eq(galley_context_create(&ctx, NULL), GALLEY_OK);
  ck_assert_int_eq(galley_context_set_backend(ctx, GALLEY_BACKEND_REFERENCE,
                                              &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_backend(ctx), GALLEY_BACKEND_REFERENCE);
  ck_assert_int_eq(galley_context_set_planner(ctx, GALLEY_PLANNER_SIMPLE,
                                              &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_planner(ctx), GALLEY_PLANNER_SIMPLE);
  ck_assert_int_eq(galley_context_set_estimator(
                       ctx, GALLEY_ESTIMATOR_UNIFORM, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_estimator(ctx), GALLEY_ESTIMATOR_UNIFORM);
  ck_assert_int_eq(galley_context_set_search(ctx, GALLEY_SEARCH_EXACT, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_context_search(ctx), GALLEY_SEARCH_EXACT);
  ck_assert_int_eq(galley_context_set_memory_budget(ctx, 1 << 20, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_context_memory_budget(ctx), 1 << 20);
  ck_assert_int_eq(galley_context_set_log(ctx, 2, stderr, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_log_level(ctx), 2);
  ck_assert_ptr_eq(galley_context_log_file(ctx), stderr);
  /* a NULL stream turns the log off */
  ck_assert_int_eq(galley_context_set_log(ctx, 2, NULL, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_log_level(ctx), 0);
  /* the cache directory is copied */
  char dir[] = "/tmp/some-cache";
  ck_assert_int_eq(galley_context_set_cache_dir(ctx, dir, &err), GALLEY_OK);
  dir[1] = 'X';
  ck_assert_str_eq(galley_context_cache_dir(ctx), "/tmp/some-cache");
  ck_assert_int_eq(galley_context_set_cache_dir(ctx, NULL, &err), GALLEY_OK);
  ck_assert_ptr_null(galley_context_cache_dir(ctx));

  /* bad values: GALLEY_EINVAL with a message, nothing changed */
  ck_assert_int_eq(galley_context_set_backend(ctx, (galley_backend)9, &err),
                   GALLEY_EINVAL);
  ck_assert(strstr(err.msg, "unknown backend") != NULL);
  ck_assert_int_eq(galley_context_backend(ctx), GALLEY_BACKEND_REFERENCE);
  ck_assert_int_eq(galley_context_set_planner(ctx, (galley_planner)7, &err),
                   GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_planner(ctx), GALLEY_PLANNER_SIMPLE);
  ck_assert_int_eq(galley_context_set_estimator(ctx, (galley_estimator)-1,
                                                &err), GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_set_search(ctx, (galley_search)2, &err),
                   GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_set_memory_budget(ctx, -1, &err),
                   GALLEY_EINVAL);
  ck_assert(strstr(err.msg, "negative memory budget") != NULL);
  ck_assert_int_eq(galley_context_memory_budget(ctx), 1 << 20);
  ck_assert_int_eq(galley_context_set_log(ctx, 4, stderr, &err),
                   GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_set_log(ctx, -1, stderr, &err),
                   GALLEY_EINVAL);
  /* NULL contexts */
  ck_assert_int_eq(galley_context_set_backend(NULL, GALLEY_BACKEND_TCC, &err),
                   GALLEY_EINVAL);
  ck_assert(strstr(err.msg, "context is NULL") != NULL);
  ck_assert_int_eq(galley_context_set_planner(NULL, GALLEY_PLANNER_COST,
                                              NULL), GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_set_cache_dir(NULL, "x", &err),
                   GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_set_log(NULL, 1, stderr, &err),
                   GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_set_memory_budget(NULL, 0, &err),
                   GALLEY_EINVAL);
  galley_context_free(ctx);
}
END_TEST

/* A program copies the context's options and outlives the context. */
START_TEST(context_program_copies_options) {
  galley_context *ctx = NULL;
  galley_error err;
  ck_assert_int_eq(galley_context_create(&ctx, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_set_planner(ctx, GALLEY_PLANNER_SIMPLE,
                                              &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_set_backend(ctx, kernel_backend(), &err),
                   GALLEY_OK);
  galley_program *p = parse_mv(ctx);
  /* later changes to the context do not reach the program */
  ck_assert_int_eq(galley_context_set_planner(ctx, GALLEY_PLANNER_COST, &err),
                   GALLEY_OK);
  galley_context_free(ctx);

  galley_tensor *A = NULL, *x = NULL;
  ck_assert_int_eq(galley_tensor_wrap_csr(4, 3, X_rowptr, X_colidx, X_vals,
                                          0, &A, &err), GALLEY_OK);
  x = vector(3, (double[]){0.25, -1, 0.5});
  ck_assert_int_eq(galley_program_bind(p, "A", A, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_bind(p, "x", x, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
  galley_run_info info;
  galley_program_run_info(p, &info);
  ck_assert_int_eq(info.backend, kernel_backend());
  /* the simple planner made it: no logical plan */
  ck_assert_int_eq(galley_program_plan_num_queries(p, GALLEY_PLAN_LOGICAL), 0);
  int64_t c = 0;
  ck_assert_double_eq_tol(galley_tensor_get(galley_program_output(p, 0), &c,
                                            NULL), 0.25 - 1.0, 1e-12);
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(x);
}
END_TEST

START_TEST(context_program_errors) {
  galley_context *ctx = NULL;
  galley_program *p = (galley_program *)&p; /* must be reset to NULL */
  galley_error err;
  char *diag = (char *)&diag;
  ck_assert_int_eq(galley_context_create(&ctx, &err), GALLEY_OK);
  const char bad[] = "input A[i, j]\ny[i] = A[i, k] * B[k]\n";
  ck_assert_int_eq(galley_context_program_parse(ctx, "bad.tin", bad,
                                                strlen(bad), &p, &diag, &err),
                   GALLEY_EPROGRAM);
  ck_assert_ptr_null(p);
  ck_assert(strncmp(err.msg, "bad.tin:2:", 10) == 0);
  ck_assert_ptr_nonnull(diag);
  ck_assert(strstr(diag, "^") != NULL);
  free(diag);
  ck_assert_int_eq(galley_context_program_read(ctx, "/no/such/file.tin", &p,
                                               NULL, &err), GALLEY_EIO);
  ck_assert_ptr_null(p);
  ck_assert(strstr(err.msg, "cannot open") != NULL);
  ck_assert_int_eq(galley_context_program_parse(NULL, "x", bad, strlen(bad),
                                                &p, NULL, &err),
                   GALLEY_EINVAL);
  ck_assert_ptr_null(p);
  ck_assert_int_eq(galley_context_program_parse(ctx, "x", NULL, 0, &p, NULL,
                                                &err), GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_program_parse(ctx, "x", bad, strlen(bad),
                                                NULL, NULL, &err),
                   GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_program_read(ctx, NULL, &p, NULL, &err),
                   GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_program_read(NULL, "x.tin", &p, NULL, &err),
                   GALLEY_EINVAL);
  /* a file that parses */
  char path[] = "/tmp/test_api_XXXXXX";
  int fd = mkstemp(path);
  ck_assert(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs(mv_source, f);
  fclose(f);
  ck_assert_int_eq(galley_context_program_read(ctx, path, &p, NULL, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_program_num_inputs(p), 2);
  galley_program_free(p);
  remove(path);
  galley_context_free(ctx);
}
END_TEST

/* The log: level 1 the phases, 2 the queries, 3 why it planned again. */
START_TEST(context_log) {
  galley_context *ctx = NULL;
  galley_error err;
  FILE *log = tmpfile();
  ck_assert_int_eq(galley_context_create(&ctx, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_set_backend(ctx, kernel_backend(), &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_context_set_log(ctx, 3, log, &err), GALLEY_OK);
  galley_program *p = parse_mv(ctx);
  galley_context_free(ctx);
  galley_tensor *A = NULL, *x = vector(3, (double[]){1, 2, 3});
  ck_assert_int_eq(galley_tensor_wrap_csr(4, 3, X_rowptr, X_colidx, X_vals,
                                          0, &A, &err), GALLEY_OK);
  galley_program_bind(p, "A", A, &err);
  galley_program_bind(p, "x", x, &err);
  ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
  char *text = slurp(log);
  ck_assert_msg(strstr(text, "planned in ") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "(kernels reused)") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "re-planned: no plan yet") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "query y ") != NULL, "%s", text);
  free(text);
  /* off: nothing more is written */
  long before = ftell(log);
  galley_program_set_log(p, 0, log);
  ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
  ck_assert_int_eq(ftell(log), before);
  /* level 1: the phase line only */
  galley_program_set_log(p, 1, log);
  ck_assert_int_eq(galley_program_run_reference(p, &err), GALLEY_OK);
  text = slurp(log);
  ck_assert_msg(strstr(text + before, "backend reference: ran in ") ==
                    text + before, "%s", text + before);
  ck_assert(strstr(text + before, "query") == NULL);
  free(text);
  fclose(log);
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(x);
}
END_TEST

/* One context per thread: programs on several threads at once. */
typedef struct ThreadJob {
  int seed;
  int ok;
  char msg[1100];
} ThreadJob;

static void *thread_main(void *arg) {
  ThreadJob *job = arg;
  galley_context *ctx = NULL;
  galley_program *p = NULL;
  galley_tensor *A = NULL, *x = NULL;
  galley_error err = {0};
  double xs[3] = {job->seed, 1, 2};
  int64_t three = 3;
  galley_status st = galley_context_create(&ctx, &err);
  if (st == GALLEY_OK)
    st = galley_context_set_backend(ctx, kernel_backend(), &err);
  if (st == GALLEY_OK)
    st = galley_context_program_parse(ctx, "mv.tin", mv_source,
                                      strlen(mv_source), &p, NULL, &err);
  galley_context_free(ctx);
  if (st == GALLEY_OK)
    st = galley_tensor_wrap_csr(4, 3, X_rowptr, X_colidx, X_vals, 0, &A,
                                &err);
  if (st == GALLEY_OK)
    st = galley_tensor_from_dense(1, &three, xs, 0, NULL, &x, &err);
  if (st == GALLEY_OK)
    st = galley_program_bind(p, "A", A, &err);
  if (st == GALLEY_OK)
    st = galley_program_bind(p, "x", x, &err);
  for (int r = 0; st == GALLEY_OK && r < 3; r++)
    st = galley_program_run(p, &err);
  if (st == GALLEY_OK) {
    /* n = sum(A x) = (s - 4) + 0.5 + (3s + 1 + 2) with s = seed */
    double n = galley_tensor_get(galley_program_output(p, 1), NULL, NULL);
    job->ok = fabs(n - (4.0 * job->seed - 0.5)) < 1e-9;
    snprintf(job->msg, sizeof job->msg, "n = %g", n);
  } else {
    snprintf(job->msg, sizeof job->msg, "%s", err.msg);
  }
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(x);
  return NULL;
}

START_TEST(context_per_thread) {
  enum { N = 4 };
  pthread_t th[N];
  ThreadJob jobs[N];
  for (int k = 0; k < N; k++) {
    jobs[k] = (ThreadJob){.seed = k + 1};
    ck_assert_int_eq(pthread_create(&th[k], NULL, thread_main, &jobs[k]), 0);
  }
  for (int k = 0; k < N; k++) {
    pthread_join(th[k], NULL);
    ck_assert_msg(jobs[k].ok, "thread %d: %s", k, jobs[k].msg);
  }
}
END_TEST

/* ---- CSR / CSC ---- */

/* t holds exactly the entries of the row-major dense array want. */
static void assert_matrix(const galley_tensor *t, int64_t m, int64_t n,
                          const double *want) {
  ck_assert_int_eq(galley_tensor_order(t), 2);
  ck_assert_int_eq(galley_tensor_dim(t, 0), m);
  ck_assert_int_eq(galley_tensor_dim(t, 1), n);
  double *got = calloc((size_t)(m * n) + 1, sizeof *got);
  ck_assert_int_eq(galley_tensor_to_dense(t, got, m * n, NULL), GALLEY_OK);
  for (int64_t k = 0; k < m * n; k++)
    ck_assert_double_eq(got[k], want[k]);
  free(got);
}

START_TEST(wrap_csr_borrows) {
  /* arrays on the stack: freeing them would crash */
  int64_t rowptr[5], colidx[6];
  double vals[6];
  memcpy(rowptr, X_rowptr, sizeof rowptr);
  memcpy(colidx, X_colidx, sizeof colidx);
  memcpy(vals, X_vals, sizeof vals);
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_wrap_csr(4, 3, rowptr, colidx, vals, 0, &t,
                                          &err), GALLEY_OK);
  assert_matrix(t, 4, 3, X_dense);
  galley_format fmt, def = galley_format_default(2);
  galley_tensor_format(t, &fmt);
  ck_assert(memcmp(&fmt, &def, sizeof fmt) == 0);
  ck_assert_int_eq(galley_tensor_stored(t), 6);
  ck_assert_int_eq(galley_tensor_nnz(t), 6);
  ck_assert_double_eq(galley_tensor_fill(t), 0);
  int present;
  ck_assert_double_eq(galley_tensor_get(t, (int64_t[]){2, 0}, &present), 3);
  ck_assert_int_eq(present, 1);
  ck_assert_double_eq(galley_tensor_get(t, (int64_t[]){3, 1}, &present), 0);
  ck_assert_int_eq(present, 0);
  /* no copy: the tensor sees the caller's arrays */
  vals[3] = 42;
  ck_assert_double_eq(galley_tensor_get(t, (int64_t[]){2, 0}, NULL), 42);
  vals[3] = 3;
  /* a conversion copies: it outlives the arrays' changes */
  galley_tensor *c = NULL;
  ck_assert_int_eq(galley_tensor_convert(t, NULL, &c, &err), GALLEY_OK);
  ck_assert_ptr_null(galley_tensor_free(t));
  vals[0] = -7;
  assert_matrix(c, 4, 3, X_dense);
  galley_tensor_free(c);
}
END_TEST

START_TEST(wrap_csc) {
  /* X by column: col 0 rows 0, 2; col 1 rows 1, 2; col 2 rows 0, 2 */
  const int64_t colptr[] = {0, 2, 4, 6};
  const int64_t rowidx[] = {0, 2, 1, 2, 0, 2};
  const double vals[] = {1, 3, 0.5, 1, -2, 1};
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_wrap_csc(4, 3, colptr, rowidx, vals, 0, &t,
                                          &err), GALLEY_OK);
  assert_matrix(t, 4, 3, X_dense);
  galley_format fmt;
  galley_tensor_format(t, &fmt);
  char buf[64];
  galley_format_print(&fmt, buf, sizeof buf);
  ck_assert_str_eq(buf, "dense:1,list:0");
  galley_tensor_free(t);
}
END_TEST

START_TEST(wrap_empty_and_fill) {
  galley_tensor *t = NULL;
  galley_error err;
  const int64_t zeros[4] = {0, 0, 0, 0};
  /* no entries: index and value arrays may be NULL */
  ck_assert_int_eq(galley_tensor_wrap_csr(3, 5, zeros, NULL, NULL, 2.5, &t,
                                          &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_stored(t), 0);
  ck_assert_double_eq(galley_tensor_get(t, (int64_t[]){1, 4}, NULL), 2.5);
  galley_tensor *c = NULL;
  ck_assert_int_eq(galley_tensor_convert(t, &(galley_format){2, {1, 0},
                                         {GALLEY_HASH, GALLEY_LIST}}, &c,
                                         &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_stored(c), 0);
  galley_tensor_free(c);
  galley_tensor_free(t);
  /* no rows at all */
  ck_assert_int_eq(galley_tensor_wrap_csr(0, 5, zeros, NULL, NULL, 0, &t,
                                          &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_dim(t, 0), 0);
  galley_tensor_free(t);
  /* a stored value equal to the fill is stored but not a nonzero */
  const int64_t rp[] = {0, 1, 2}, ci[] = {0, 1};
  const double v[] = {1, 1};
  ck_assert_int_eq(galley_tensor_wrap_csr(2, 2, rp, ci, v, 1, &t, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_stored(t), 2);
  ck_assert_int_eq(galley_tensor_nnz(t), 0);
  galley_tensor_free(t);
}
END_TEST

/* Every way the arrays can be bad: GALLEY_EINVAL (or EOVERFLOW), a
 * message naming the element, and no tensor. */
typedef galley_status (*WrapFn)(int64_t, int64_t, const int64_t *,
                                const int64_t *, const double *, double,
                                galley_tensor **, galley_error *);

static void expect_bad(WrapFn fn, int64_t m, int64_t n, const int64_t *ptr,
                       const int64_t *idx, const double *vals,
                       galley_status want, const char *msg) {
  galley_tensor *t = (galley_tensor *)&t;
  galley_error err;
  ck_assert_int_eq(fn(m, n, ptr, idx, vals, 0, &t, &err), want);
  ck_assert_int_eq(err.status, want);
  ck_assert_ptr_null(t);
  ck_assert_msg(strstr(err.msg, msg) != NULL, "'%s' lacks '%s'", err.msg,
                msg);
}

START_TEST(wrap_bad_arrays) {
  const double v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  WrapFn csr = galley_tensor_wrap_csr, csc = galley_tensor_wrap_csc;
  expect_bad(csr, 2, 3, (int64_t[]){1, 1, 2}, (int64_t[]){0, 1}, v,
             GALLEY_EINVAL,
             "galley_tensor_wrap_csr: rowptr[0] = 1: it must be 0");
  expect_bad(csr, 2, 3, (int64_t[]){0, 2, 1}, (int64_t[]){0, 1}, v,
             GALLEY_EINVAL,
             "rowptr[2] = 1 is less than rowptr[1] = 2: rowptr must not "
             "decrease");
  expect_bad(csr, 2, 3, (int64_t[]){0, 1, 2}, (int64_t[]){0, 3}, v,
             GALLEY_EINVAL,
             "colidx[1] = 3 (row 1) is out of range: there are 3 columns");
  expect_bad(csr, 2, 3, (int64_t[]){0, 1, 2}, (int64_t[]){-1, 0}, v,
             GALLEY_EINVAL, "colidx[0] = -1 (row 0) is out of range");
  expect_bad(csr, 2, 3, (int64_t[]){0, 2, 2}, (int64_t[]){1, 1}, v,
             GALLEY_EINVAL,
             "colidx[1] = 1 is not greater than colidx[0] = 1 (row 0): "
             "indices must increase strictly within a row");
  expect_bad(csr, 2, 3, (int64_t[]){0, 2, 2}, (int64_t[]){2, 0}, v,
             GALLEY_EINVAL, "is not greater than");
  /* decreasing across rows is fine: only within a row counts */
  galley_tensor *t = NULL;
  ck_assert_int_eq(galley_tensor_wrap_csr(2, 3, (int64_t[]){0, 1, 2},
                                          (int64_t[]){2, 0}, v, 0, &t, NULL),
                   GALLEY_OK);
  galley_tensor_free(t);
  expect_bad(csc, 3, 2, (int64_t[]){0, 1, 2}, (int64_t[]){0, 3}, v,
             GALLEY_EINVAL,
             "galley_tensor_wrap_csc: rowidx[1] = 3 (column 1) is out of "
             "range: there are 3 rows");
  expect_bad(csc, 3, 2, (int64_t[]){0, 2, 1}, (int64_t[]){0, 1}, v,
             GALLEY_EINVAL, "colptr[2] = 1 is less than colptr[1] = 2");
  /* NULLs */
  expect_bad(csr, 2, 3, NULL, (int64_t[]){0}, v, GALLEY_EINVAL,
             "rowptr is NULL");
  expect_bad(csr, 2, 3, (int64_t[]){0, 1, 1}, NULL, v, GALLEY_EINVAL,
             "colidx is NULL but rowptr[2] = 1");
  expect_bad(csr, 2, 3, (int64_t[]){0, 1, 1}, (int64_t[]){0}, NULL,
             GALLEY_EINVAL, "vals is NULL but rowptr[2] = 1");
  galley_error err;
  ck_assert_int_eq(galley_tensor_wrap_csr(2, 3, (int64_t[]){0, 0, 0}, NULL,
                                          NULL, 0, NULL, &err),
                   GALLEY_EINVAL);
  ck_assert(strstr(err.msg, "out is NULL") != NULL);
  /* sizes */
  expect_bad(csr, -1, 3, (int64_t[]){0}, NULL, NULL, GALLEY_EINVAL,
             "negative size -1 x 3");
  expect_bad(csr, (int64_t)1 << 40, (int64_t)1 << 40, (int64_t[]){0}, NULL,
             NULL, GALLEY_EOVERFLOW, "too large");
  expect_bad(csr, INT64_MAX, 0, (int64_t[]){0}, NULL, NULL, GALLEY_EOVERFLOW,
             "too large");
}
END_TEST

START_TEST(from_csr32_copies) {
  int32_t rowptr[5], colidx[6];
  for (int k = 0; k < 5; k++)
    rowptr[k] = (int32_t)X_rowptr[k];
  for (int k = 0; k < 6; k++)
    colidx[k] = (int32_t)X_colidx[k];
  double vals[6];
  memcpy(vals, X_vals, sizeof vals);
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_csr32(4, 3, rowptr, colidx, vals, 0,
                                            &t, &err), GALLEY_OK);
  vals[0] = 99; /* copied: no effect */
  colidx[0] = 2;
  assert_matrix(t, 4, 3, X_dense);
  galley_tensor_free(t);
  /* a pattern */
  ck_assert_int_eq(galley_tensor_from_csr32(4, 3, rowptr, (int32_t[]){0, 2,
                                            1, 0, 1, 2}, NULL, 0, &t, &err),
                   GALLEY_OK);
  ck_assert_double_eq(galley_tensor_get(t, (int64_t[]){0, 2}, NULL), 1);
  ck_assert_int_eq(galley_tensor_nnz(t), 6);
  galley_tensor_free(t);
  /* CSC, and an empty one */
  ck_assert_int_eq(galley_tensor_from_csc32(4, 3, (int32_t[]){0, 2, 4, 6},
                                            (int32_t[]){0, 2, 1, 2, 0, 2},
                                            (double[]){1, 3, 0.5, 1, -2, 1},
                                            0, &t, &err), GALLEY_OK);
  assert_matrix(t, 4, 3, X_dense);
  galley_tensor_free(t);
  ck_assert_int_eq(galley_tensor_from_csc32(2, 2, (int32_t[]){0, 0, 0}, NULL,
                                            NULL, 0, &t, &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_stored(t), 0);
  galley_tensor_free(t);
  /* the same checks and messages */
  t = (galley_tensor *)&t;
  ck_assert_int_eq(galley_tensor_from_csr32(2, 3, (int32_t[]){0, 2, 2},
                                            (int32_t[]){1, 1}, NULL, 0, &t,
                                            &err), GALLEY_EINVAL);
  ck_assert_ptr_null(t);
  ck_assert_msg(strstr(err.msg, "galley_tensor_from_csr32: colidx[1] = 1 is "
                       "not greater than colidx[0] = 1") != NULL, "%s",
                err.msg);
  ck_assert_int_eq(galley_tensor_from_csc32(2, 3, (int32_t[]){0, -1, 0, 0},
                                            NULL, NULL, 0, &t, &err),
                   GALLEY_EINVAL);
  ck_assert(strstr(err.msg, "colptr[1] = -1 is less than colptr[0]") != NULL);
  ck_assert_int_eq(galley_tensor_from_csr32(2, 3, NULL, NULL, NULL, 0, &t,
                                            &err), GALLEY_EINVAL);
  ck_assert(strstr(err.msg, "rowptr is NULL") != NULL);
  ck_assert_int_eq(galley_tensor_from_csr32(2, 3, (int32_t[]){0, 1, 1}, NULL,
                                            NULL, 0, &t, &err),
                   GALLEY_EINVAL);
  ck_assert(strstr(err.msg, "colidx is NULL") != NULL);
  ck_assert_int_eq(galley_tensor_from_csr32(-2, 3, (int32_t[]){0}, NULL, NULL,
                                            0, &t, &err), GALLEY_EINVAL);
  ck_assert_int_eq(galley_tensor_from_csr32(2, 3, (int32_t[]){0, 0, 0}, NULL,
                                            NULL, 0, NULL, &err),
                   GALLEY_EINVAL);
}
END_TEST

/* A wrapped matrix runs a program as the same matrix read from COO. */
START_TEST(wrap_runs_program) {
  galley_error err;
  galley_tensor *A = NULL, *B = NULL, *x = vector(3, (double[]){0.25, -1, 0.5});
  /* borrowed: they must outlive A (not compound literals inside
   * ck_assert, whose block ends with the macro) */
  static const int64_t colptr[] = {0, 2, 4, 6}, rowidx[] = {0, 2, 1, 2, 0, 2};
  static const double vals[] = {1, 3, 0.5, 1, -2, 1};
  ck_assert_int_eq(galley_tensor_wrap_csc(4, 3, colptr, rowidx, vals, 0, &A,
                                          &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_from_dense(2, (int64_t[]){4, 3}, X_dense, 0,
                                            NULL, &B, &err), GALLEY_OK);
  galley_program *p = parse_mv(NULL), *q = parse_mv(NULL);
  ck_assert_int_eq(galley_program_set_backend(p, kernel_backend(), &err),
                   GALLEY_OK);
  galley_program_bind(p, "A", A, &err);
  galley_program_bind(p, "x", x, &err);
  galley_program_bind(q, "A", B, &err);
  galley_program_bind(q, "x", x, &err);
  ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_run_reference(q, &err), GALLEY_OK);
  for (int64_t i = 0; i < 4; i++)
    ck_assert_double_eq_tol(galley_tensor_get(galley_program_output(p, 0), &i,
                                              NULL),
                            galley_tensor_get(galley_program_output(q, 0), &i,
                                              NULL), 1e-12);
  galley_program_free(p);
  galley_program_free(q);
  galley_tensor_free(A);
  galley_tensor_free(B);
  galley_tensor_free(x);
}
END_TEST

/* ---- explain ---- */

/* mv with A = X and x bound, planned with the cost-based planner. */
static galley_program *bound_mv(galley_tensor **A, galley_tensor **x) {
  galley_error err;
  galley_program *p = parse_mv(NULL);
  ck_assert_int_eq(galley_program_set_backend(p, kernel_backend(), &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_wrap_csr(4, 3, X_rowptr, X_colidx, X_vals,
                                          0, A, &err), GALLEY_OK);
  *x = vector(3, (double[]){0.25, -1, 0.5});
  ck_assert_int_eq(galley_program_bind(p, "A", *A, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_bind(p, "x", *x, &err), GALLEY_OK);
  return p;
}

/* Results' value arrays are kept from one run for the next
 * (src/exec/recycle.h): an output taken by the caller is never reused, and
 * every run's outputs hold that run's values -- dense results (Z, W, of
 * one size) and a sparse pattern with a dense suffix (Y), each large
 * enough to be kept. */
static const char recycle_source[] =
    "input A[i, j], x[j], S[i, j], U[j, k]\n"
    "Z[i, j] = A[i, j] * x[j] + 1\n"
    "W[i, j] = Z[i, j] * 2\n"
    "Y[i, j, k] = S[i, j] * U[j, k] * x[j]\n"
    "output W, Y, Z\n";

enum { RC_M = 200, RC_N = 100, RC_K = 24 };

static galley_tensor *rc_dense(int order, const int64_t *dims,
                               const double *v) {
  galley_tensor *t = NULL;
  galley_format f = galley_format_dense(order);
  ck_assert_int_eq(galley_tensor_from_dense(order, dims, v, 0, &f, &t, NULL),
                   GALLEY_OK);
  return t;
}

/* W and Y of one run, checked against their formulas for x[j] = c * j. */
static void rc_check(const galley_tensor *W, const galley_tensor *Y,
                     const double *a, const double *s, const double *u,
                     double c) {
  static double w[RC_M * RC_N], y[RC_M * RC_N * RC_K];
  ck_assert_int_eq(galley_tensor_to_dense(W, w, RC_M * RC_N, NULL), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_to_dense(Y, y, RC_M * RC_N * RC_K, NULL),
                   GALLEY_OK);
  for (int i = 0; i < RC_M; i++)
    for (int j = 0; j < RC_N; j++) {
      ck_assert(w[i * RC_N + j] == (a[i * RC_N + j] * c * j + 1) * 2);
      for (int k = 0; k < RC_K; k++)
        ck_assert(y[(i * RC_N + j) * RC_K + k] ==
                  s[i * RC_N + j] * u[j * RC_K + k] * c * j);
    }
}

START_TEST(recycled_results) {
  static double a[RC_M * RC_N], s[RC_M * RC_N], u[RC_N * RC_K], x[RC_N];
  for (int e = 0; e < RC_M * RC_N; e++) {
    a[e] = e % 7 - 3;
    s[e] = e % 3 == 0 ? e % 5 + 1 : 0; /* a third stored */
  }
  for (int e = 0; e < RC_N * RC_K; e++)
    u[e] = e % 11 - 5;
  galley_program *p = NULL;
  galley_error err;
  ck_assert_int_eq(galley_program_parse("rc.tin", recycle_source,
                                        strlen(recycle_source), &p, NULL,
                                        &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_set_backend(p, kernel_backend(), &err),
                   GALLEY_OK);
  int64_t dm[2] = {RC_M, RC_N}, du[2] = {RC_N, RC_K}, dx = RC_N;
  galley_tensor *A = rc_dense(2, dm, a), *U = rc_dense(2, du, u), *S = NULL;
  galley_format csr = galley_format_default(2);
  ck_assert_int_eq(galley_tensor_from_dense(2, dm, s, 0, &csr, &S, NULL),
                   GALLEY_OK);
  ck_assert_int_eq(galley_program_bind(p, "A", A, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_bind(p, "S", S, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_bind(p, "U", U, &err), GALLEY_OK);
  galley_tensor *X[4] = {NULL};
  galley_tensor *W1 = NULL, *Y1 = NULL;
  for (int run = 0; run < 4; run++) {
    double c = run + 1; /* x changes every run */
    for (int j = 0; j < RC_N; j++)
      x[j] = c * j;
    X[run] = rc_dense(1, &dx, x);
    ck_assert_int_eq(galley_program_bind(p, "x", X[run], &err), GALLEY_OK);
    ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
    rc_check(galley_program_output(p, 0), galley_program_output(p, 1), a, s,
             u, c);
    /* Z: as large as W (so both may take a kept array of that size) */
    double z0 = 0;
    int64_t at[2] = {RC_M - 1, RC_N - 1};
    z0 = galley_tensor_get(galley_program_output(p, 2), at, NULL);
    ck_assert(z0 == a[RC_M * RC_N - 1] * c * (RC_N - 1) + 1);
    if (run == 1) { /* the caller keeps run 1's outputs */
      W1 = galley_program_take_output(p, 0);
      Y1 = galley_program_take_output(p, 1);
    }
    if (W1)
      rc_check(W1, Y1, a, s, u, 2);
  }
  galley_tensor_free(W1);
  galley_tensor_free(Y1);
  galley_program_free(p);
  for (int run = 0; run < 4; run++)
    galley_tensor_free(X[run]);
  galley_tensor_free(A);
  galley_tensor_free(S);
  galley_tensor_free(U);
}
END_TEST

/* Taking an output: the caller owns it, the program no longer lists it,
 * and it can be bound as the next run's input; a second take is NULL. */
START_TEST(take_output) {
  galley_tensor *A, *x;
  galley_program *p = bound_mv(&A, &x);
  galley_error err;
  ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
  ck_assert_ptr_null(galley_program_take_output(p, 2));
  ck_assert_ptr_null(galley_program_take_output(NULL, 0));
  const galley_tensor *y0 = galley_program_output(p, 0);
  galley_tensor *y = galley_program_take_output(p, 0);
  ck_assert_ptr_eq(y, y0);
  ck_assert_ptr_null(galley_program_output(p, 0));
  ck_assert_ptr_null(galley_program_take_output(p, 0));
  ck_assert_ptr_nonnull(galley_program_output(p, 1)); /* n stays */
  /* y = A x stays valid, the caller's, across later runs */
  double want[4] = {-0.75, -0.5, 0.25, 0};
  for (int64_t i = 0; i < 4; i++)
    ck_assert(galley_tensor_get(y, &i, NULL) == want[i]);
  ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
  ck_assert_ptr_nonnull(galley_program_output(p, 0)); /* a new result */
  ck_assert_ptr_ne(galley_program_output(p, 0), y);
  for (int64_t i = 0; i < 4; i++)
    ck_assert(galley_tensor_get(y, &i, NULL) == want[i]);
  galley_tensor_free(y);
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(x);
}
END_TEST

START_TEST(explain_forms) {
  galley_tensor *A, *x;
  galley_program *p = bound_mv(&A, &x);
  galley_status st;
  galley_error err;
  char *text = explain(p, 0, &st, &err);
  ck_assert_int_eq(st, GALLEY_OK);
  ck_assert_msg(strncmp(text, "input plan:\nQuery(y[i], ", 24) == 0, "%s",
                text);
  ck_assert(strstr(text, "\nlogical plan:\n") != NULL);
  ck_assert(strstr(text, "\nphysical plan:\n") != NULL);
  ck_assert(strstr(text, "analyze:") == NULL);
  /* the partition: y's loop over A's 4 rows and 6 entries (10 units of
   * work: one block); n reads y, which only the run makes */
  char head[128];
  snprintf(head, sizeof head,
           "\npartition: each outermost loop in blocks of about 16384 "
           "units of work, run by up to %d thread%s\n",
           galley_program_threads(p),
           galley_program_threads(p) == 1 ? "" : "s");
  ck_assert_msg(strstr(text, head) != NULL, "%s", text);
  ck_assert_msg(strstr(text, "\n  y: loop i over [0, 4): 1 block by the "
                             "entries of A (10 units) on 1 thread\n") != NULL,
                "%s", text);
  ck_assert_msg(strstr(text, "\n  n: loop i over [0, 4): blocks counted at "
                             "run time, from y\n") != NULL,
                "%s", text);
  char *plain = text;

  text = explain(p, GALLEY_EXPLAIN_ANALYZE, &st, &err);
  ck_assert_int_eq(st, GALLEY_OK);
  ck_assert(strstr(text, "\nanalyze: backend ") != NULL);
  ck_assert(strstr(text, "q-error") != NULL);
  /* the run does not change what the partition says */
  const char *part = strstr(plain, "\npartition:");
  const char *end = strstr(part, "\n  n: ");
  ck_assert(part && end);
  ck_assert(strncmp(strstr(text, "\npartition:"), part,
                    (size_t)(end - part)) == 0);
  free(plain);
  free(text);

  text = explain(p, GALLEY_EXPLAIN_JSON | GALLEY_EXPLAIN_ANALYZE, &st, &err);
  ck_assert_int_eq(st, GALLEY_OK);
  ck_assert_msg(strncmp(text, "{\n  \"program\": \"mv.tin\",", 24) == 0,
                "%s", text);
  ck_assert(strstr(text, "\"analyze\": {\"backend\": ") != NULL);
  ck_assert(strstr(text, "\"physical_plan\": [") != NULL);
  ck_assert_msg(strstr(text, "\"partition\": {\"loop\": \"i\", \"lo\": 0, "
                             "\"hi\": 4, \"combine\": \"disjoint\", "
                             "\"blocks\": 1, \"measure\": \"entries\", "
                             "\"of\": \"A\", \"times\": null, \"work\": 10, "
                             "\"threads\": 1}") != NULL,
                "%s", text);
  ck_assert(strstr(text, "\"blocks\": null, \"from\": \"y\"}") != NULL);
  ck_assert(text[strlen(text) - 2] == '}');
  free(text);

  text = explain(p, GALLEY_EXPLAIN_DOT, &st, &err);
  ck_assert_int_eq(st, GALLEY_OK);
  ck_assert_msg(strncmp(text, "digraph \"mv.tin\" {\n", 19) == 0, "%s", text);
  ck_assert(strstr(text, "  in0 [shape=box, label=\"input A\\n4 x 3, "
                         "dense:0,list:1\\nnnz 6\"];\n") != NULL);
  ck_assert(strstr(text, "  in1 [shape=box, label=\"input x\\n3, ") != NULL);
  ck_assert(strstr(text, "y (output)") != NULL);
  ck_assert(strstr(text, "n (output)") != NULL);
  ck_assert(strstr(text, "  in0 -> q0 [label=\"i::it,j::it\"];\n") != NULL);
  ck_assert(strstr(text, "\\nest nnz ") != NULL);
  ck_assert(strstr(text, "real nnz") == NULL);
  ck_assert_str_eq(text + strlen(text) - 2, "}\n");
  free(text);

  text = explain(p, GALLEY_EXPLAIN_DOT | GALLEY_EXPLAIN_ANALYZE, &st, &err);
  ck_assert_int_eq(st, GALLEY_OK);
  ck_assert_msg(strstr(text, "\\nreal nnz 3, ") != NULL, "%s", text);
  free(text);
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(x);
}
END_TEST

START_TEST(explain_errors) {
  galley_tensor *A, *x;
  galley_program *p = bound_mv(&A, &x);
  galley_status st;
  galley_error err;
  char *text = explain(p, GALLEY_EXPLAIN_JSON | GALLEY_EXPLAIN_DOT, &st, &err);
  ck_assert_int_eq(st, GALLEY_EINVAL);
  ck_assert(strstr(err.msg, "choose one") != NULL);
  ck_assert_str_eq(text, "");
  free(text);
  text = explain(p, 1u << 7, &st, &err);
  ck_assert_int_eq(st, GALLEY_EINVAL);
  ck_assert(strstr(err.msg, "unknown flags 0x80") != NULL);
  free(text);
  ck_assert_int_eq(galley_program_explain(p, NULL, 0, &err), GALLEY_EINVAL);
  ck_assert_int_eq(galley_program_explain(NULL, stdout, 0, &err),
                   GALLEY_EINVAL);
  galley_program_free(p);

  /* an unbound input: text explains the input plan only; DOT, ANALYZE
   * and JSON ANALYZE fail with EBIND and write nothing */
  p = parse_mv(NULL);
  galley_program_bind(p, "A", A, &err);
  text = explain(p, 0, &st, &err);
  ck_assert_int_eq(st, GALLEY_OK);
  ck_assert(strstr(text, "physical plan") == NULL);
  free(text);
  text = explain(p, GALLEY_EXPLAIN_JSON, &st, &err);
  ck_assert_int_eq(st, GALLEY_OK);
  ck_assert(strstr(text, "\"physical_plan\": null") != NULL);
  free(text);
  unsigned bad[] = {GALLEY_EXPLAIN_DOT, GALLEY_EXPLAIN_ANALYZE,
                    GALLEY_EXPLAIN_ANALYZE | GALLEY_EXPLAIN_JSON};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    text = explain(p, bad[k], &st, &err);
    ck_assert_int_eq(st, GALLEY_EBIND);
    ck_assert_msg(strstr(err.msg, "input 'x' is not bound") != NULL, "%s",
                  err.msg);
    ck_assert_int_eq(err.line, 1);
    ck_assert_str_eq(text, "");
    free(text);
  }
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(x);
}
END_TEST

/* The memory budget reaches the planner: the dense result of a matrix
 * product becomes sparse when it does not fit. */
START_TEST(memory_budget) {
  const char src[] = "input A[i, j], B[j, k]\n"
                     "C[i, k] = sum(j: A[i, j] * B[j, k])\n";
  galley_context *ctx = NULL;
  galley_program *p = NULL;
  galley_error err;
  galley_tensor *A = NULL;
  ck_assert_int_eq(galley_tensor_wrap_csr(4, 3, X_rowptr, X_colidx, X_vals,
                                          0, &A, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_create(&ctx, &err), GALLEY_OK);
  galley_tensor *At = NULL; /* X transposed: the same arrays read as CSC */
  ck_assert_int_eq(galley_tensor_wrap_csc(3, 4, X_rowptr, X_colidx, X_vals,
                                          0, &At, &err), GALLEY_OK);
  char *plans[2];
  for (int small = 0; small < 2; small++) {
    ck_assert_int_eq(galley_context_set_memory_budget(ctx, small ? 8 : 0,
                                                      &err), GALLEY_OK);
    ck_assert_int_eq(galley_context_program_parse(ctx, "mm.tin", src,
                                                  strlen(src), &p, NULL,
                                                  &err), GALLEY_OK);
    galley_program_bind(p, "A", A, &err);
    galley_program_bind(p, "B", At, &err);
    galley_status st;
    plans[small] = explain(p, GALLEY_EXPLAIN_DOT, &st, &err);
    ck_assert_msg(st == GALLEY_OK, "%s", err.msg);
    if (small) { /* a run refuses what passes the budget, naming it */
      ck_assert_int_eq(galley_program_run(p, &err), GALLEY_ENOMEM);
      ck_assert_msg(strstr(err.msg, "query 'C' needs ") &&
                    strstr(err.msg, "over the memory budget of 8 bytes"),
                    "%s", err.msg);
      ck_assert_ptr_null(galley_program_output(p, 0));
    } else {
      ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
      int64_t c[2] = {2, 2};
      ck_assert_double_eq(galley_tensor_get(galley_program_output(p, 0), c,
                                            NULL), 3 * 3 + 1 + 1);
    }
    ck_assert_int_eq(galley_program_set_memory_budget(p, -5, &err),
                     GALLEY_EINVAL);
    galley_program_free(p);
  }
  ck_assert_msg(strstr(plans[0], "result dense:0,dense:1") != NULL, "%s",
                plans[0]);
  ck_assert_msg(strstr(plans[1], "result dense:0,dense:1") == NULL, "%s",
                plans[1]);
  free(plans[0]);
  free(plans[1]);
  galley_context_free(ctx);
  galley_tensor_free(A);
  galley_tensor_free(At);
}
END_TEST

/* ---- the re-run rule ---- */

/* An n x n CSR matrix with the first k entries of the diagonal set to v
 * (arrays malloc()ed into *rp, *ci, *vals). */
static galley_tensor *diagonal(int64_t n, int64_t k, double v, int64_t **rp,
                               int64_t **ci, double **vals) {
  *rp = calloc((size_t)n + 1, sizeof **rp);
  *ci = calloc((size_t)k + 1, sizeof **ci);
  *vals = calloc((size_t)k + 1, sizeof **vals);
  for (int64_t r = 0; r < n; r++)
    (*rp)[r + 1] = (*rp)[r] + (r < k);
  for (int64_t e = 0; e < k; e++) {
    (*ci)[e] = e;
    (*vals)[e] = v;
  }
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_wrap_csr(n, n, *rp, *ci, *vals, 0, &t, &err),
                   GALLEY_OK);
  return t;
}

/* Bind A, run, and check what the run did and n = sum(A x) = want. */
static void run_expect(galley_program *p, const galley_tensor *A,
                       int replanned, int reused, double want) {
  galley_error err;
  ck_assert_int_eq(galley_program_bind(p, "A", A, &err), GALLEY_OK);
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
  galley_run_info info;
  galley_program_run_info(p, &info);
  ck_assert_int_eq(info.replanned, replanned);
  ck_assert_int_eq(info.reused, reused);
  ck_assert_double_eq_tol(galley_tensor_get(galley_program_output(p, 1), NULL,
                                            NULL), want, 1e-9);
}

START_TEST(rerun_rule) {
  enum { N = 64 };
  int64_t *rp[6], *ci[6];
  double *v[6];
  galley_tensor *A[6];
  A[0] = diagonal(N, 20, 1, &rp[0], &ci[0], &v[0]); /* planned for 20 */
  A[1] = diagonal(N, 40, 2, &rp[1], &ci[1], &v[1]); /* 2x: reuse */
  A[2] = diagonal(N, 10, 3, &rp[2], &ci[2], &v[2]); /* 1/2 of 20: reuse */
  A[3] = diagonal(N, 41, 1, &rp[3], &ci[3], &v[3]); /* > 2 x 20: re-plan */
  A[4] = diagonal(N, 19, 1, &rp[4], &ci[4], &v[4]); /* < 41/2: re-plan */
  A[5] = diagonal(N + 1, 19, 1, &rp[5], &ci[5], &v[5]); /* dims */
  double ones[N + 1];
  for (int k = 0; k <= N; k++)
    ones[k] = 1;
  galley_tensor *x = vector(N, ones), *x1 = vector(N + 1, ones);
  galley_program *p = parse_mv(NULL);
  galley_error err;
  FILE *log = tmpfile();
  galley_program_set_log(p, 3, log);
  ck_assert_int_eq(galley_program_set_backend(p, kernel_backend(), &err),
                   GALLEY_OK);
  galley_program_bind(p, "x", x, &err);
  galley_run_info info;
  galley_program_run_info(p, &info);
  ck_assert_int_eq(info.replanned, 0); /* all zero before a run */

  run_expect(p, A[0], 1, 0, 20);       /* first run: plan and compile */
  run_expect(p, A[0], 0, 1, 20);       /* again: nothing to do */
  run_expect(p, A[1], 0, 1, 80);       /* new data, nnz 2x: kernels reused */
  run_expect(p, A[2], 0, 1, 30);       /* nnz 1/2 */
  run_expect(p, A[3], 1, 0, 41);       /* nnz 41 > 2 x 20: re-plan */
  run_expect(p, A[4], 1, 0, 19);       /* 19 < 41 / 2 */
  galley_program_bind(p, "x", x1, &err);
  run_expect(p, A[5], 1, 0, 19);       /* other dims */
  galley_program_bind(p, "x", x, &err);
  run_expect(p, A[4], 1, 0, 19);
  /* another format: the CSC transpose of the same diagonal */
  galley_tensor *csc = NULL;
  ck_assert_int_eq(galley_tensor_wrap_csc(N, N, rp[4], ci[4], v[4], 0, &csc,
                                          &err), GALLEY_OK);
  run_expect(p, csc, 1, 0, 19);
  run_expect(p, A[4], 1, 0, 19);
  /* changed options plan again; an unchanged option does not */
  galley_program_set_estimator(p, GALLEY_ESTIMATOR_CHAIN);
  run_expect(p, A[4], 0, 1, 19);
  galley_program_set_estimator(p, GALLEY_ESTIMATOR_UNIFORM);
  run_expect(p, A[4], 1, 0, 19);
  ck_assert_int_eq(galley_program_set_memory_budget(p, 1 << 20, &err),
                   GALLEY_OK);
  run_expect(p, A[4], 1, 0, 19);
  /* another backend keeps the plan but compiles again */
  ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_REFERENCE,
                                              &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
  galley_program_run_info(p, &info);
  ck_assert_int_eq(info.replanned, 0);
  ck_assert_int_eq(info.backend, GALLEY_BACKEND_REFERENCE);
  /* planning alone follows the same rule */
  ck_assert_int_eq(galley_program_plan(p, &err), GALLEY_OK);

  char *text = slurp(log);
  ck_assert_msg(strstr(text, "re-planned: input 'A': nnz 41 is not within a "
                       "factor of 2 of the 20 planned for\n") != NULL,
                "%s", text);
  ck_assert(strstr(text, "re-planned: input 'A': its dims changed\n"));
  ck_assert(strstr(text, "re-planned: input 'A': its storage format "
                         "changed\n"));
  free(text);
  fclose(log);
  galley_program_free(p);
  for (int k = 0; k < 6; k++) {
    galley_tensor_free(A[k]);
    free(rp[k]);
    free(ci[k]);
    free(v[k]);
  }
  galley_tensor_free(csc);
  galley_tensor_free(x);
  galley_tensor_free(x1);
}
END_TEST

/* A fill that differs from the planned one plans again (a declared fill
 * 1: a bound fill of 0 takes it, a bound fill of 1 matches it). */
START_TEST(rerun_fill) {
  const char src[] = "input A[i, j] fill 1\nn = sum(i, j: A[i, j])\n";
  galley_program *p = NULL;
  galley_error err;
  FILE *log = tmpfile();
  ck_assert_int_eq(galley_program_parse("fill.tin", src, strlen(src), &p,
                                        NULL, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_set_backend(p, kernel_backend(), &err),
                   GALLEY_OK);
  galley_program_set_log(p, 3, log);
  galley_tensor *A0 = NULL, *A1 = NULL;
  ck_assert_int_eq(galley_tensor_wrap_csr(4, 3, X_rowptr, X_colidx, X_vals,
                                          0, &A0, &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_wrap_csr(4, 3, X_rowptr, X_colidx, X_vals,
                                          1, &A1, &err), GALLEY_OK);
  const galley_tensor *As[] = {A0, A0, A1, A1, A0};
  const int replanned[] = {1, 0, 1, 0, 1};
  for (int k = 0; k < 5; k++) {
    ck_assert_int_eq(galley_program_bind(p, "A", As[k], &err), GALLEY_OK);
    ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
    galley_run_info info;
    galley_program_run_info(p, &info);
    ck_assert_int_eq(info.replanned, replanned[k]);
    /* 6 stored entries summing to 4.5, 6 unstored ones of 1 */
    ck_assert_double_eq_tol(galley_tensor_get(galley_program_output(p, 0),
                                              NULL, NULL), 10.5, 1e-12);
  }
  char *text = slurp(log);
  ck_assert_msg(strstr(text, "re-planned: input 'A': its fill changed\n"),
                "%s", text);
  free(text);
  fclose(log);
  galley_program_free(p);
  galley_tensor_free(A0);
  galley_tensor_free(A1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("api");
  TCase *tc = tcase_create("context");
  tcase_add_test(tc, context_defaults);
  tcase_add_test(tc, context_setters);
  tcase_add_test(tc, context_program_copies_options);
  tcase_add_test(tc, context_program_errors);
  tcase_add_test(tc, context_log);
  tcase_add_test(tc, context_per_thread);
  suite_add_tcase(s, tc);
  tc = tcase_create("csr");
  tcase_add_test(tc, wrap_csr_borrows);
  tcase_add_test(tc, wrap_csc);
  tcase_add_test(tc, wrap_empty_and_fill);
  tcase_add_test(tc, wrap_bad_arrays);
  tcase_add_test(tc, from_csr32_copies);
  tcase_add_test(tc, wrap_runs_program);
  suite_add_tcase(s, tc);
  tc = tcase_create("explain");
  tcase_add_test(tc, explain_forms);
  tcase_add_test(tc, explain_errors);
  tcase_add_test(tc, memory_budget);
  suite_add_tcase(s, tc);
  tc = tcase_create("rerun");
  tcase_add_test(tc, rerun_rule);
  tcase_add_test(tc, rerun_fill);
  tcase_add_test(tc, take_output);
  tcase_add_test(tc, recycled_results);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
