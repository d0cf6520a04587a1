/*
 * test_oom.c -- out of memory at every allocation: each library operation
 * below runs again and again with its k-th allocation failing (k = 0, 1,
 * ...) until a run makes no k-th allocation.  Every run must return
 * GALLEY_ENOMEM or GALLEY_OK (nothing failed, or the failed allocation
 * was one the library can do without, such as a statistics cache) --
 * never crash, never another error -- and (under AddressSanitizer) leak
 * nothing.
 *
 * The failures are injected by linking with -Wl,--wrap=malloc,calloc,
 * realloc: the library's own calls go through the wrappers below; libc's
 * and zlib's internal allocations do not.  The JIT is not exercised here
 * (libtcc exits on out of memory).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "rt_internal.h" /* rt_tensor_converted */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

/* The injection: the fail_at-th allocation (counting from 0) fails. */
static long fail_at = -1, allocations;

static int fail_now(void) {
  return fail_at >= 0 && allocations++ == fail_at;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) {
  return fail_now() ? NULL : __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n) {
  return fail_now() ? NULL : __real_realloc(p, n);
}

static const char *data_dir;
static int failures;

/* ---- the operations ---- */

static galley_status op_read(galley_error *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/karate.mtx", data_dir);
  galley_tensor *t = NULL;
  galley_status st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, err);
  galley_tensor_free(t);
  return st;
}

/* A 30 x 20 matrix built in one format and converted to others. */
static galley_status op_build(galley_error *err) {
  int64_t dims[2] = {30, 20}, coords[2 * 120];
  double vals[120];
  for (int e = 0; e < 120; e++) {
    coords[2 * e] = (e * 7) % 30;
    coords[2 * e + 1] = (e * 11) % 20;
    vals[e] = e % 5 - 2;
  }
  static const char *const fmts[] = {"dense,list", "list:1,hash:0",
                                     "bytemap,list", "hash,bytemap"};
  galley_tensor *t = NULL;
  galley_format f;
  galley_status st = galley_format_parse(fmts[0], 2, &f, err);
  if (st == GALLEY_OK)
    st = galley_tensor_from_coo(2, dims, 120, coords, vals, 0, &f, &t, err);
  for (int k = 1; k < 4 && st == GALLEY_OK; k++) {
    galley_tensor *u = NULL;
    st = galley_format_parse(fmts[k], 2, &f, err);
    if (st == GALLEY_OK)
      st = galley_tensor_convert(t, &f, &u, err);
    galley_tensor_free(u);
  }
  galley_degree_stats *ds = st == GALLEY_OK ? malloc(sizeof *ds) : NULL;
  if (st == GALLEY_OK && !ds)
    st = GALLEY_ENOMEM;
  if (st == GALLEY_OK)
    st = galley_tensor_degree_stats(t, ds, err);
  free(ds);
  galley_tensor_free(t);
  return st;
}

/* A hash tensor's width changed both ways (rt_tensor_set_widths copies
 * all five arrays of a hash level): out of memory leaves the level whole
 * at its old width, so every entry still reads back (else EINTERNAL). */
static galley_status op_hash_widths(galley_error *err) {
  int64_t dims[2] = {30, 20}, coords[2 * 60];
  double vals[60];
  for (int e = 0; e < 60; e++) {
    coords[2 * e] = (e * 7) % 30;
    coords[2 * e + 1] = (e * 11) % 20;
    vals[e] = e % 5 + 1;
  }
  galley_format f;
  galley_tensor *t = NULL;
  galley_status st = galley_format_parse("hash,hash", 2, &f, err);
  if (st == GALLEY_OK)
    st = galley_tensor_from_coo(2, dims, 60, coords, vals, 0, &f, &t, err);
  for (unsigned w = 0; w < 2 && st == GALLEY_OK; w++) {
    galley_status ws = rt_tensor_set_widths(t, w ? 3u : 0u, err);
    for (int e = 0; e < 60; e++) /* distinct coordinates: (7e, 11e) */
      if (galley_tensor_get(t, coords + 2 * e, NULL) != vals[e])
        ws = rt_error(err, GALLEY_EINTERNAL, "entry %d lost", e);
    st = ws;
  }
  galley_tensor_free(t);
  return st;
}

static const char *const PROGRAM =
    "def f(x, y) = x * y + 1\n"
    "input A[i, j], x[j]\n"
    "y[i] = sum(j: A[i, j] * x[j])\n"
    "z[i] = max(j: f(A[i, j], x[j]))\n"
    "n = sum(i: y[i] * z[i])\n"
    "s = sum(i, j, k: A[i, j] * A[j, k] * A[i, k])\n"
    "l = sum(i, j: (A[i, j] - x[i] * x[j])^2)\n"
    "gl[j] = grad(l, x[j])\n"
    "gn[j] = grad(n, x[j])\n"
    "e[i] = sum(j: exp(A[i, j] * x[j]))\n" /* the fill split */
    "m[i] = max(j: A[i, j] * x[j] + 2)\n"
    "output y, n, s, l, gl, gn, e, m\n";

static galley_status op_parse(galley_error *err) {
  galley_program *p = NULL;
  char *diags = NULL;
  galley_status st = galley_program_parse("oom.tin", PROGRAM, strlen(PROGRAM),
                                          &p, &diags, err);
  free(diags);
  galley_program_free(p);
  return st;
}

/* Parse, bind karate and a vector, plan (both optimizers), print the
 * plans, and run the reference evaluator. */
static galley_status op_plan_and_run(galley_error *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/karate.mtx", data_dir);
  galley_tensor *A = NULL, *x = NULL;
  galley_program *p = NULL;
  galley_status st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &A, err);
  int64_t n = 34, coords[34];
  double vals[34];
  for (int k = 0; k < 34; k++) {
    coords[k] = k;
    vals[k] = (k % 3) - 1;
  }
  if (st == GALLEY_OK)
    st = galley_tensor_from_coo(1, &n, 34, coords, vals, 0, NULL, &x, err);
  if (st == GALLEY_OK)
    st = galley_program_parse("oom.tin", PROGRAM, strlen(PROGRAM), &p, NULL,
                              err);
  if (st == GALLEY_OK)
    st = galley_program_bind(p, "A", A, err);
  if (st == GALLEY_OK)
    st = galley_program_bind(p, "x", x, err);
  FILE *devnull = fopen("/dev/null", "w");
  if (!devnull)
    return GALLEY_EIO;
  for (unsigned flags = 0; flags < 2 && st == GALLEY_OK; flags++)
    st = galley_program_explain(p, devnull, flags ? GALLEY_EXPLAIN_JSON : 0,
                                err);
  fclose(devnull);
  if (st == GALLEY_OK)
    st = galley_program_run_reference(p, err);
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(x);
  return st;
}

/* What a tensor keeps about its values: its facts, its symmetry (whose
 * fast path allocates, and must give the same answer without), a kept
 * transpose, dropped by touch and made again.  karate is symmetric. */
static galley_status op_facts(galley_error *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/karate.mtx", data_dir);
  galley_tensor *A = NULL;
  galley_format csc;
  const galley_tensor *copy = NULL;
  galley_status st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &A, err);
  if (st == GALLEY_OK)
    st = galley_format_parse("dense:1,list:0", 2, &csc, err);
  for (int round = 0; round < 2 && st == GALLEY_OK; round++) {
    galley_facts f;
    st = galley_tensor_facts(A, &f, err);
    if (st == GALLEY_OK && (f.nnz != 156 || galley_tensor_nnz(A) != 156 ||
                            !galley_tensor_is_symmetric(A)))
      st = GALLEY_EINTERNAL; /* a wrong answer: reported as a failure */
    if (st == GALLEY_OK)
      st = rt_tensor_converted(A, &csc, 0, &copy, err);
    if (st == GALLEY_OK && galley_tensor_nnz(copy) != 156)
      st = GALLEY_EINTERNAL;
    galley_tensor_touch(A);
  }
  galley_tensor_free(A);
  return st;
}

/* The executor alone: a program compiled once (below, outside the
 * injection) runs again on the same data, reusing its plan and kernels;
 * its sinks, scatter workspaces, transposes and results fail. */
static galley_program *compiled;
static galley_tensor *compiled_A; /* bound (borrowed) by compiled */

static galley_status op_execute(galley_error *err) {
  return galley_program_run(compiled, err);
}

/* The same after touching A: its facts and kept transpose are made
 * again. */
static galley_status op_execute_touched(galley_error *err) {
  galley_tensor_touch(compiled_A);
  return galley_program_run(compiled, err);
}

static galley_status compile_once(galley_error *err) {
  static const char *const text =
      "input A[i, j]\n"
      "C[i, k] = sum(j: A[i, j] * A[j, k])\n"      /* Gustavson, scattered */
      "T[j, i] = A[i, j] * 2\n"                    /* written transposed */
      "d[i] = max(j: A[i, j] + 1)\n"
      "t = sum(i, j, k: A[i, j] * A[j, k] * A[i, k])\n"
      "output C, T, d, t\n";
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/karate.mtx", data_dir);
  galley_status st =
      galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &compiled_A, err);
  if (st == GALLEY_OK)
    st = galley_program_parse("exec.tin", text, strlen(text), &compiled, NULL,
                              err);
  if (st == GALLEY_OK)
    st = galley_program_bind(compiled, "A", compiled_A, err);
  if (st == GALLEY_OK)
    st = galley_program_run(compiled, err); /* plans and compiles */
  return st;
}

/* ---- the driver ---- */

typedef galley_status (*Op)(galley_error *err);

static void exhaust(const char *name, Op op) {
  long k = 0;
  for (;; k++) {
    galley_error err;
    memset(&err, 0, sizeof err);
    allocations = 0;
    fail_at = k;
    galley_status st = op(&err);
    fail_at = -1;
    int injected = allocations > k;
    if (!injected) {
      if (st != GALLEY_OK) {
        printf("FAIL: %s: %s with no failed allocation: %s\n", name,
               galley_status_name(st), err.msg);
        failures++;
      }
      break;
    }
    /* GALLEY_OK: an allocation the library can do without (a cache, a
     * trimming realloc) */
    if (st != GALLEY_ENOMEM && st != GALLEY_OK) {
      printf("FAIL: %s: allocation %ld failed, got %s: %s\n", name, k,
             galley_status_name(st), err.msg);
      failures++;
    }
  }
  printf("test_oom: %s: %ld allocations, each failed once\n", name, k);
}

int main(void) {
  data_dir = getenv("GALLEY_DATA_DIR");
  if (!data_dir || !*data_dir) {
    printf("test_oom: GALLEY_DATA_DIR not set, skipped\n");
    return 77;
  }
  exhaust("read karate.mtx", op_read);
  exhaust("build and convert", op_build);
  exhaust("hash level widths", op_hash_widths);
  exhaust("parse a program", op_parse);
  exhaust("plan, explain and run (reference)", op_plan_and_run);
  exhaust("facts, symmetry and kept copies", op_facts);
  galley_error err;
  if (compile_once(&err) == GALLEY_OK) {
    exhaust("execute compiled kernels", op_execute);
    exhaust("execute after touch", op_execute_touched);
  } else {
    printf("FAIL: cannot compile the executor's program: %s\n", err.msg);
    failures++;
  }
  galley_program_free(compiled);
  galley_tensor_free(compiled_A);
  printf("test_oom: %d failures\n", failures);
  return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
