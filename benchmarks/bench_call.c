/*
 * bench_call.c -- what a host program pays per galley_program_run once
 * the program is parsed, bound and compiled: the whole call, timed with
 * a wall clock around it, against the time of its queries (the kernels
 * and the layout of their results, galley_query_info.seconds).  The
 * difference is the run path's overhead: the re-run check, allocations,
 * bookkeeping.  Built by `make benchmarks` in a build directory:
 *
 *   bench_call [-m MATRIX] [-r RUNS] [-b BACKENDS] [-c CASES]
 *
 * Cases, each bound once and run RUNS times (default 200) after one
 * warm-up run that plans and compiles:
 *   spmv       y[i] = A[i,j] * x[j], A the matrix (default
 *              ../shared/data/matrices/xenon1.mtx.gz) in CSR, x dense
 *   spmv_csc   the same with A bound in CSC (the plan may transpose it)
 *   sddmm      C[i,j] = S[i,j] * U[i,k] * V[j,k], S the matrix, U and V
 *              dense with 16 columns (dense factors used to be scanned)
 *   tiny       y[i] = A[i,j] * x[j] on a 4 x 4 matrix with 6 entries:
 *              nearly all of the call is overhead
 * CASES is a comma-separated subset (default all).
 * For each case and backend (default "tcc,clang"): the median and
 * minimum of the call, the median of the queries' time, and the median
 * overhead (call minus queries) in microseconds.  A table goes to
 * stdout, then CSV lines:
 *   case,backend,runs,call_median_us,call_min_us,queries_median_us,
 *   overhead_median_us
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchutil.h"
#include "galley.h"

enum { MAX_RUNS = 100000 };

typedef struct Result {
  const char *name, *backend;
  int runs;
  double call_med, call_min, query_med, over_med; /* microseconds */
} Result;

static void die(const char *what, const galley_error *err) {
  fprintf(stderr, "bench_call: %s: %s\n", what, err ? err->msg : "");
  exit(1);
}

/* A dense vector of n values 1 + (j % 7) / 8. */
static galley_tensor *dense_vector(int64_t n) {
  double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  galley_format fmt = galley_format_dense(1);
  galley_tensor *t = NULL;
  galley_error err;
  for (int64_t j = 0; v && j < n; j++)
    v[j] = 1 + (double)(j % 7) / 8;
  if (!v || galley_tensor_from_dense(1, &n, v, 0, &fmt, &t, &err) != GALLEY_OK)
    die("dense vector", &err);
  free(v);
  return t;
}

/* A dense rows x cols matrix of values 1 + ((r + 3c) % 5) / 4. */
static galley_tensor *dense_matrix(int64_t rows, int64_t cols) {
  int64_t dims[2] = {rows, cols};
  double *v = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *v);
  galley_format fmt = galley_format_dense(2);
  galley_tensor *t = NULL;
  galley_error err;
  for (int64_t k = 0; v && k < rows * cols; k++)
    v[k] = 1 + (double)((k / cols + 3 * (k % cols)) % 5) / 4;
  if (!v ||
      galley_tensor_from_dense(2, dims, v, 0, &fmt, &t, &err) != GALLEY_OK)
    die("dense matrix", &err);
  free(v);
  return t;
}

static int cmp_d(const void *a, const void *b) { return cmp_double(a, b); }

/* Run prog (inputs bound) once to plan and compile, then runs times. */
static Result time_runs(galley_program *prog, const char *name,
                        galley_backend backend, int runs, double *call,
                        double *query, double *over) {
  galley_error err;
  Result r = {name, galley_backend_name(backend), runs, 0, 0, 0, 0};
  if (galley_program_set_backend(prog, backend, &err) != GALLEY_OK ||
      galley_program_run(prog, &err) != GALLEY_OK)
    die(name, &err);
  for (int k = 0; k < runs; k++) {
    double t0 = now_ms();
    if (galley_program_run(prog, &err) != GALLEY_OK)
      die(name, &err);
    call[k] = 1e3 * (now_ms() - t0);
    galley_run_info info;
    galley_program_run_info(prog, &info);
    if (!info.reused)
      die("a repeated run did not reuse its kernels", NULL);
    double qs = 0;
    for (int n = 0; n < info.nqueries; n++) {
      galley_query_info qi;
      if (galley_program_query_info(prog, n, &qi, &err) != GALLEY_OK)
        die(name, &err);
      qs += qi.seconds;
    }
    query[k] = 1e6 * qs;
    over[k] = call[k] - query[k];
  }
  qsort(call, (size_t)runs, sizeof *call, cmp_d);
  qsort(query, (size_t)runs, sizeof *query, cmp_d);
  qsort(over, (size_t)runs, sizeof *over, cmp_d);
  r.call_med = call[runs / 2];
  r.call_min = call[0];
  r.query_med = query[runs / 2];
  r.over_med = over[runs / 2];
  return r;
}

static galley_program *parse(const char *text) {
  galley_program *p = NULL;
  galley_error err;
  if (galley_program_parse("<bench>", text, strlen(text), &p, NULL, &err) !=
      GALLEY_OK)
    die("parse", &err);
  return p;
}

static void bind(galley_program *p, const char *name, const galley_tensor *t) {
  galley_error err;
  if (galley_program_bind(p, name, t, &err) != GALLEY_OK)
    die("bind", &err);
}

static galley_tensor *tiny_matrix(void) {
  static const int64_t dims[2] = {4, 4};
  static const int64_t crd[] = {0, 0, 0, 3, 1, 1, 2, 0, 2, 2, 3, 3};
  static const double val[] = {1, 2, 3, 4, 5, 6};
  galley_tensor *t = NULL;
  galley_error err;
  if (galley_tensor_from_coo(2, dims, 6, crd, val, 0, NULL, &t, &err) !=
      GALLEY_OK)
    die("tiny matrix", &err);
  return t;
}

/* Whether name is one of the comma-separated list. */
static int wanted(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *s = list; s; s = strchr(s, ',')) {
    if (*s == ',')
      s++;
    if (strncmp(s, name, n) == 0 && (s[n] == ',' || s[n] == '\0'))
      return 1;
  }
  return 0;
}

static const char spmv_tin[] = "input A[i, j], x[j]\ny[i] = A[i, j] * x[j]\n";
static const char sddmm_tin[] =
    "input S[i, j], U[i, k], V[j, k]\n"
    "C[i, j] = S[i, j] * U[i, k] * V[j, k]\n";

int main(int argc, char **argv) {
  const char *matrix = "../shared/data/matrices/xenon1.mtx.gz";
  const char *backends = "tcc,clang", *cases = "spmv,spmv_csc,tiny,sddmm";
  int runs = 200, c;
  while ((c = getopt(argc, argv, "m:r:b:c:")) != -1) {
    if (c == 'm')
      matrix = optarg;
    else if (c == 'r')
      runs = atoi(optarg);
    else if (c == 'b')
      backends = optarg;
    else if (c == 'c')
      cases = optarg;
    else {
      fprintf(stderr, "usage: bench_call [-m MATRIX] [-r RUNS] "
                      "[-b BACKENDS] [-c CASES]\n");
      return 2;
    }
  }
  if (runs < 1 || runs > MAX_RUNS)
    runs = 200;
  galley_error err;
  galley_tensor *A = NULL, *Acsc = NULL;
  galley_format csc;
  if (galley_tensor_read(matrix, GALLEY_FILE_AUTO, NULL, &A, &err) !=
          GALLEY_OK ||
      galley_format_parse("dense:1,list:0", 2, &csc, &err) != GALLEY_OK ||
      galley_tensor_convert(A, &csc, &Acsc, &err) != GALLEY_OK)
    die(matrix, &err);
  int64_t m = galley_tensor_dim(A, 0), n = galley_tensor_dim(A, 1);
  galley_tensor *x = dense_vector(n), *U = dense_matrix(m, 16),
                *V = dense_matrix(n, 16), *T = tiny_matrix(),
                *tx = dense_vector(4);
  printf("matrix %s: %lld x %lld, %lld stored; %d runs per case\n",
         base_name(matrix), (long long)m, (long long)n,
         (long long)galley_tensor_stored(A), runs);
  double *call = malloc((size_t)runs * sizeof *call);
  double *query = malloc((size_t)runs * sizeof *query);
  double *over = malloc((size_t)runs * sizeof *over);
  Result res[32];
  int nres = 0;
  char list[256];
  snprintf(list, sizeof list, "%s", backends);
  for (char *save = NULL, *b = strtok_r(list, ",", &save); b && nres < 28;
       b = strtok_r(NULL, ",", &save)) {
    galley_backend be;
    if (galley_backend_parse(b, &be, &err) != GALLEY_OK)
      die(b, &err);
    galley_program *p = parse(spmv_tin);
    bind(p, "x", x);
    if (wanted(cases, "spmv")) {
      bind(p, "A", A);
      res[nres++] = time_runs(p, "spmv", be, runs, call, query, over);
    }
    if (wanted(cases, "spmv_csc")) {
      bind(p, "A", Acsc);
      res[nres++] = time_runs(p, "spmv_csc", be, runs, call, query, over);
    }
    if (wanted(cases, "tiny")) {
      bind(p, "A", T);
      bind(p, "x", tx);
      res[nres++] = time_runs(p, "tiny", be, runs, call, query, over);
    }
    galley_program_free(p);
    if (wanted(cases, "sddmm")) {
      p = parse(sddmm_tin);
      bind(p, "S", A);
      bind(p, "U", U);
      bind(p, "V", V);
      res[nres++] = time_runs(p, "sddmm", be, runs, call, query, over);
      galley_program_free(p);
    }
  }
  printf("%-9s %-7s %12s %12s %12s %12s\n", "case", "backend", "call_med_us",
         "call_min_us", "query_med_us", "overhead_us");
  for (int k = 0; k < nres; k++)
    printf("%-9s %-7s %12.1f %12.1f %12.1f %12.1f\n", res[k].name,
           res[k].backend, res[k].call_med, res[k].call_min,
           res[k].query_med, res[k].over_med);
  for (int k = 0; k < nres; k++)
    printf("%s,%s,%d,%.2f,%.2f,%.2f,%.2f\n", res[k].name, res[k].backend,
           res[k].runs, res[k].call_med, res[k].call_min, res[k].query_med,
           res[k].over_med);
  free(call);
  free(query);
  free(over);
  galley_tensor_free(A);
  galley_tensor_free(Acsc);
  galley_tensor_free(x);
  galley_tensor_free(U);
  galley_tensor_free(V);
  galley_tensor_free(T);
  galley_tensor_free(tx);
  return 0;
}
