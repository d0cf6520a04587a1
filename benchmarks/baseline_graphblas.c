/*
 * baseline_graphblas.c -- the SuiteSparse:GraphBLAS side of
 * `benchmarks/run kernels`: the kernels of bench_kernels.c on the same
 * files, single-threaded, printed as the same CSV lines:
 *
 *   tool,file,op,nnz,reps,median_ms,min_ms,bytes,note
 *
 *   baseline_graphblas [-r REPS] [-n] [-k spmv,spgemm,sddmm] [-c CAP_MS] FILE...
 *
 *   spmv    y = A x              GrB_mxv, GrB_PLUS_TIMES_SEMIRING_FP64,
 *                                x dense, x[j] = 1 + (j % 7) / 8
 *   spgemm  C = A A              GrB_mxm (sparse result)
 *   sddmm   C = S .* (U V^T)     GrB_mxm with S as a structural mask and V
 *                                transposed (GrB_DESC_ST1), then
 *                                GrB_eWiseMult with S; U, V dense n x 32
 *
 * The file is read with libgalley (galley_tensor_read, not timed) and
 * built into GraphBLAS matrices (not timed).  Every timed operation ends
 * with GrB_wait(..., GrB_MATERIALIZE), so nonblocking mode defers
 * nothing past the clock.  note holds the sum of the result's entries (to
 * compare with the other tools).  Debian: libgraphblas-dev (7.x).
 */
#include <GraphBLAS.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "galley.h"

#define K 32 /* columns of the SDDMM factors */

static void report(const char *file, const char *op, int64_t nnz, double *ms,
                   int reps, int64_t bytes, const char *note) {
  qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
  double median =
      reps % 2 ? ms[reps / 2] : (ms[reps / 2 - 1] + ms[reps / 2]) / 2;
  printf("graphblas,%s,%s,%lld,%d,%.3f,%.3f,%lld,%s\n", base_name(file), op,
         (long long)nnz, reps, median, ms[0], (long long)bytes, note);
  fflush(stdout);
}

#define GB_CHECK(call)                                                   \
  do {                                                                   \
    GrB_Info info_ = (call);                                             \
    if (info_ != GrB_SUCCESS) {                                          \
      fprintf(stderr, "baseline_graphblas: %s failed (%d)\n", #call,     \
              (int)info_);                                               \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

/* The SDDMM factor F[i, k] = ((i * a + k * b) % 13) / 13 - 0.5, as a
 * full GraphBLAS matrix (the same values as bench_kernels.c). */
static GrB_Matrix factor(GrB_Index n, int64_t a, int64_t b) {
  GrB_Index cnt = n * K;
  GrB_Index *I = malloc(cnt * sizeof *I), *J = malloc(cnt * sizeof *J);
  double *X = malloc(cnt * sizeof *X);
  if (!I || !J || !X) {
    fprintf(stderr, "baseline_graphblas: out of memory\n");
    exit(1);
  }
  for (GrB_Index i = 0; i < n; i++)
    for (GrB_Index k = 0; k < K; k++) {
      GrB_Index e = i * K + k;
      I[e] = i;
      J[e] = k;
      X[e] = (double)(((int64_t)i * a + (int64_t)k * b) % 13) / 13.0 - 0.5;
    }
  GrB_Matrix f;
  GB_CHECK(GrB_Matrix_new(&f, GrB_FP64, n, K));
  GB_CHECK(GrB_Matrix_build_FP64(f, I, J, X, cnt, GrB_PLUS_FP64));
  GB_CHECK(GrB_wait(f, GrB_MATERIALIZE));
  free(I);
  free(J);
  free(X);
  return f;
}

static GrB_Matrix load(const char *path, int64_t *nnz) {
  galley_tensor *t = NULL;
  galley_error err;
  if (galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err) != GALLEY_OK) {
    fprintf(stderr, "baseline_graphblas: %s\n", err.msg);
    exit(1);
  }
  int64_t n = galley_tensor_dim(t, 0), m = galley_tensor_dim(t, 1);
  int64_t cnt = 0, *coords = NULL;
  double *vals = NULL;
  if (galley_tensor_to_coo(t, 0, &cnt, &coords, &vals, &err) != GALLEY_OK) {
    fprintf(stderr, "baseline_graphblas: %s\n", err.msg);
    exit(1);
  }
  galley_tensor_free(t);
  GrB_Index *I = malloc((size_t)(cnt + 1) * sizeof *I);
  GrB_Index *J = malloc((size_t)(cnt + 1) * sizeof *J);
  if (!I || !J) {
    fprintf(stderr, "baseline_graphblas: out of memory\n");
    exit(1);
  }
  for (int64_t e = 0; e < cnt; e++) {
    I[e] = (GrB_Index)coords[2 * e];
    J[e] = (GrB_Index)coords[2 * e + 1];
  }
  GrB_Matrix a;
  GB_CHECK(GrB_Matrix_new(&a, GrB_FP64, (GrB_Index)n, (GrB_Index)m));
  GB_CHECK(GrB_Matrix_build_FP64(a, I, J, vals, (GrB_Index)cnt, GrB_PLUS_FP64));
  GB_CHECK(GrB_wait(a, GrB_MATERIALIZE));
  free(I);
  free(J);
  free(coords);
  free(vals);
  *nnz = cnt;
  return a;
}

static double matrix_sum(GrB_Matrix c) {
  double s = 0;
  GB_CHECK(GrB_Matrix_reduce_FP64(&s, NULL, GrB_PLUS_MONOID_FP64, c, NULL));
  return s;
}

/* Repetitions stop early once cap_ms is spent (reported in `reps`). */
typedef struct Timing {
  double ms[256];
  int reps;
} Timing;

static int more(Timing *t, int reps, double cap_ms) {
  double spent = 0;
  for (int r = 0; r < t->reps; r++)
    spent += t->ms[r];
  return t->reps < reps && t->reps < 256 && spent <= cap_ms;
}

static void bench_spmv(const char *file, GrB_Matrix a, int64_t nnz, int reps,
                       double cap_ms) {
  GrB_Index n, m;
  GB_CHECK(GrB_Matrix_nrows(&n, a));
  GB_CHECK(GrB_Matrix_ncols(&m, a));
  GrB_Vector x, y = NULL;
  GB_CHECK(GrB_Vector_new(&x, GrB_FP64, m));
  for (GrB_Index j = 0; j < m; j++)
    GB_CHECK(GrB_Vector_setElement_FP64(x, 1.0 + (double)(j % 7) / 8.0, j));
  GB_CHECK(GrB_wait(x, GrB_MATERIALIZE));
  Timing t = {{0}, 0};
  while (more(&t, reps, cap_ms)) {
    if (y)
      GrB_Vector_free(&y);
    GB_CHECK(GrB_Vector_new(&y, GrB_FP64, n));
    double t0 = now_ms();
    GB_CHECK(GrB_mxv(y, NULL, NULL, GrB_PLUS_TIMES_SEMIRING_FP64, a, x, NULL));
    GB_CHECK(GrB_wait(y, GrB_MATERIALIZE));
    t.ms[t.reps++] = now_ms() - t0;
  }
  double s = 0;
  GB_CHECK(GrB_Vector_reduce_FP64(&s, NULL, GrB_PLUS_MONOID_FP64, y, NULL));
  char note[128];
  snprintf(note, sizeof note, "sum %.10g", s);
  report(file, "spmv", nnz, t.ms, t.reps, (int64_t)n * 8, note);
  GrB_Vector_free(&x);
  GrB_Vector_free(&y);
}

static void bench_spgemm(const char *file, GrB_Matrix a, int64_t nnz,
                         int reps, double cap_ms) {
  GrB_Index n;
  GB_CHECK(GrB_Matrix_nrows(&n, a));
  GrB_Matrix c = NULL;
  Timing t = {{0}, 0};
  while (more(&t, reps, cap_ms)) {
    if (c)
      GrB_Matrix_free(&c);
    GB_CHECK(GrB_Matrix_new(&c, GrB_FP64, n, n));
    double t0 = now_ms();
    GB_CHECK(GrB_mxm(c, NULL, NULL, GrB_PLUS_TIMES_SEMIRING_FP64, a, a, NULL));
    GB_CHECK(GrB_wait(c, GrB_MATERIALIZE));
    t.ms[t.reps++] = now_ms() - t0;
  }
  GrB_Index cn;
  GB_CHECK(GrB_Matrix_nvals(&cn, c));
  char note[128];
  snprintf(note, sizeof note, "sum %.10g nnz %llu sparse out", matrix_sum(c),
           (unsigned long long)cn);
  report(file, "spgemm", nnz, t.ms, t.reps, (int64_t)cn * 16 + (int64_t)n * 8,
         note);
  GrB_Matrix_free(&c);
}

static void bench_sddmm(const char *file, GrB_Matrix s, int64_t nnz, int reps,
                        double cap_ms) {
  GrB_Index n, m;
  GB_CHECK(GrB_Matrix_nrows(&n, s));
  GB_CHECK(GrB_Matrix_ncols(&m, s));
  GrB_Matrix u = factor(n, 31, 17), v = factor(m, 7, 5), c = NULL;
  Timing t = {{0}, 0};
  while (more(&t, reps, cap_ms)) {
    if (c)
      GrB_Matrix_free(&c);
    GB_CHECK(GrB_Matrix_new(&c, GrB_FP64, n, m));
    double t0 = now_ms();
    /* C<S> = U V^T over S's pattern, then C = C .* S. */
    GB_CHECK(GrB_mxm(c, s, NULL, GrB_PLUS_TIMES_SEMIRING_FP64, u, v,
                GrB_DESC_ST1));
    GB_CHECK(GrB_eWiseMult(c, NULL, NULL, GrB_TIMES_FP64, c, s, NULL));
    GB_CHECK(GrB_wait(c, GrB_MATERIALIZE));
    t.ms[t.reps++] = now_ms() - t0;
  }
  char note[128];
  snprintf(note, sizeof note, "sum %.10g K %d", matrix_sum(c), K);
  report(file, "sddmm", nnz, t.ms, t.reps, nnz * 16, note);
  GrB_Matrix_free(&c);
  GrB_Matrix_free(&u);
  GrB_Matrix_free(&v);
}

static void usage(FILE *f) {
  fprintf(f, "usage: baseline_graphblas [-r REPS] [-n] [-k spmv,spgemm,sddmm] "
             "[-c CAP_MS] FILE...\n");
}

int main(int argc, char **argv) {
  int reps = 5, header = 1, c;
  double cap_ms = 60000;
  const char *ops = "spmv,spgemm,sddmm";
  while ((c = getopt(argc, argv, "r:nk:c:h")) != -1) {
    switch (c) {
    case 'r': reps = atoi(optarg); break;
    case 'n': header = 0; break;
    case 'k': ops = optarg; break;
    case 'c': cap_ms = atof(optarg); break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (reps < 1 || reps > 256 || optind >= argc) {
    usage(stderr);
    return 2;
  }
  GB_CHECK(GrB_init(GrB_NONBLOCKING));
  GB_CHECK(GxB_Global_Option_set(GxB_NTHREADS, 1)); /* single thread */
  int ver[3] = {0, 0, 0};
  GxB_Global_Option_get(GxB_LIBRARY_VERSION, ver);
  fprintf(stderr, "# SuiteSparse:GraphBLAS %d.%d.%d, 1 thread\n", ver[0],
          ver[1], ver[2]);
  if (header)
    printf("tool,file,op,nnz,reps,median_ms,min_ms,bytes,note\n");
  for (int f = optind; f < argc; f++) {
    int64_t nnz = 0;
    GrB_Matrix a = load(argv[f], &nnz);
    if (strstr(ops, "spmv"))
      bench_spmv(argv[f], a, nnz, reps, cap_ms);
    if (strstr(ops, "spgemm"))
      bench_spgemm(argv[f], a, nnz, reps, cap_ms);
    if (strstr(ops, "sddmm"))
      bench_sddmm(argv[f], a, nnz, reps, cap_ms);
    GrB_Matrix_free(&a);
  }
  GrB_finalize();
  return 0;
}
