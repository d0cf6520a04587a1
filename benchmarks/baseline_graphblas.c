/*
 * baseline_graphblas.c -- the SuiteSparse:GraphBLAS side of
 * `benchmarks/run kernels`, driven by benchmarks/kernels.py next to
 * bench_kernels (galleyc) and SciPy in interleaved rounds:
 *
 *   baseline_graphblas serve [-t N]
 *
 * answers benchutil.h's protocol on stdin/stdout, on N threads
 * (GxB_NTHREADS N, default 1), nonblocking mode:
 *   load KEY FILE       a CSR operand file written by `bench_kernels prep`
 *                       (the same arrays galleyc wraps), copied in with
 *                       GrB_Matrix_import (CSR, FP64)
 *   prep ID KEY KERNEL  job ID; its dense operands are made first, then
 *                       the first call is timed (first_ms)
 *   run ID N            N calls, each timed whole with a wall clock
 *                       (call_ms: the median), then (not timed) the
 *                       checksums of the result (benchutil.h)
 *   free ID | quit
 *
 * Kernels, each call ending with everything done (GrB_wait with
 * GrB_MATERIALIZE: nothing deferred past the clock, and a sorted result):
 *   spmv       y = A x: GrB_Vector_new + GrB_mxv (PLUS_TIMES_FP64), x full,
 *              x[j] = 1 + (j mod 7)/8
 *   spgemm     C = A A: GrB_Matrix_new + GrB_mxm (PLUS_TIMES_FP64) +
 *              GrB_wait (GraphBLAS returns a sorted matrix after the wait)
 *   sddmm      C<S> = U V' (GrB_mxm, S a structural mask, V transposed:
 *              GrB_DESC_ST1, dot products) then C = C .* S (GrB_eWiseMult);
 *              U, V full n x 32 with benchutil.h's values
 *   tri_lower  on L (the strict lower triangle): C<L> = L L' with
 *              GxB_PLUS_PAIR_INT64 (structural mask, GrB_DESC_ST1), then
 *              GrB_reduce to a scalar (each triangle counted once)
 *   tri_full   on the whole symmetric graph G: L = tril(G, -1) (GrB_select
 *              with GrB_TRIL) inside the timed call, then as tri_lower
 * Debian: libgraphblas-dev (7.x).
 */
#define _XOPEN_SOURCE 700
#include <GraphBLAS.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchutil.h"

#define MAX_SLOTS 16
#define MAX_JOBS 64

typedef enum Kernel { SPMV, SPGEMM, SDDMM, TRI_LOWER, TRI_FULL } Kernel;
static const char *const KERNEL_NAMES[] = {"spmv", "spgemm", "sddmm",
                                           "tri_lower", "tri_full"};
#define NKERNELS 5

typedef struct Slot {
  char key[128];
  GrB_Matrix a;
} Slot;

typedef struct Job {
  int used;
  char id[64];
  Kernel kernel;
  GrB_Matrix a;          /* borrowed from its slot */
  GrB_Vector x, y;       /* SpMV */
  GrB_Matrix u, v, c;    /* SDDMM factors; the last matrix result */
  int64_t count;         /* the last triangle count */
} Job;

static Slot slots[MAX_SLOTS];
static Job jobs[MAX_JOBS];

/* Every GraphBLAS call goes through this: a failure becomes the reply. */
#define TRY(call)                                                          \
  do {                                                                     \
    GrB_Info info_ = (call);                                               \
    if (info_ != GrB_SUCCESS) {                                            \
      snprintf(fail_msg, sizeof fail_msg, "%s failed (GrB_Info %d)", #call, \
               (int)info_);                                                \
      return -1;                                                           \
    }                                                                      \
  } while (0)

static char fail_msg[512];

static Slot *find_slot(const char *key) {
  for (int k = 0; k < MAX_SLOTS; k++)
    if (slots[k].a && !strcmp(slots[k].key, key))
      return &slots[k];
  return NULL;
}

static Job *find_job(const char *id) {
  for (int k = 0; k < MAX_JOBS; k++)
    if (jobs[k].used && !strcmp(jobs[k].id, id))
      return &jobs[k];
  return NULL;
}

static int import_csr(const BenchCsr *m, GrB_Matrix *a) {
  TRY(GrB_Matrix_import_FP64(a, GrB_FP64, (GrB_Index)m->nrows,
                             (GrB_Index)m->ncols, (const GrB_Index *)m->ptr,
                             (const GrB_Index *)m->idx, m->val,
                             (GrB_Index)m->nrows + 1, (GrB_Index)m->nnz,
                             (GrB_Index)m->nnz, GrB_CSR_FORMAT));
  TRY(GrB_wait(*a, GrB_MATERIALIZE));
  return 0;
}

static void cmd_load(const char *key, const char *file) {
  Slot *slot = NULL;
  for (int k = 0; !slot && k < MAX_SLOTS; k++)
    if (!slots[k].a)
      slot = &slots[k];
  BenchCsr m;
  if (!slot || find_slot(key)) {
    bench_reply_error(slot ? "key already loaded" : "too many keys");
    return;
  }
  if (bench_csr_read(file, &m)) {
    bench_reply_error("cannot read the CSR file (GraphBLAS: matrices only)");
    return;
  }
  int bad = import_csr(&m, &slot->a);
  bench_csr_free(&m);
  if (bad) {
    bench_reply_error(fail_msg);
    return;
  }
  snprintf(slot->key, sizeof slot->key, "%s", key);
  GrB_Index nv;
  GrB_Matrix_nvals(&nv, slot->a);
  printf("ok stored=%llu\n", (unsigned long long)nv);
  fflush(stdout);
}

/* A full rows x cols matrix of benchutil.h's factor values. */
static int make_factor(GrB_Index rows, int64_t a, int64_t b, GrB_Matrix *f) {
  double *v = bench_factor((int64_t)rows, BENCH_K, a, b);
  if (!v) {
    snprintf(fail_msg, sizeof fail_msg, "out of memory");
    return -1;
  }
  GrB_Index size = rows * BENCH_K * sizeof(double);
  TRY(GrB_Matrix_new(f, GrB_FP64, rows, BENCH_K));
  /* pack takes the array: GraphBLAS frees it with the matrix (it uses
   * the C library's malloc by default) */
  TRY(GxB_Matrix_pack_FullR(*f, (void **)&v, size, false, NULL));
  return 0;
}

static int make_operands(Job *j) {
  GrB_Index n, m;
  TRY(GrB_Matrix_nrows(&n, j->a));
  TRY(GrB_Matrix_ncols(&m, j->a));
  if (j->kernel == SPMV) {
    TRY(GrB_Vector_new(&j->x, GrB_FP64, m));
    for (GrB_Index q = 0; q < m; q++)
      TRY(GrB_Vector_setElement_FP64(j->x, bench_x_value((int64_t)q), q));
    TRY(GrB_wait(j->x, GrB_MATERIALIZE));
  } else if (j->kernel == SDDMM) {
    if (make_factor(n, 31, 17, &j->u) || make_factor(m, 7, 5, &j->v))
      return -1;
  }
  return 0;
}

/* The strict lower triangle's triangle count: C<L> = L L', summed. */
static int count_lower(Job *j, GrB_Matrix l) {
  GrB_Index n;
  TRY(GrB_Matrix_nrows(&n, l));
  GrB_Matrix c;
  TRY(GrB_Matrix_new(&c, GrB_INT64, n, n));
  TRY(GrB_mxm(c, l, NULL, GxB_PLUS_PAIR_INT64, l, l, GrB_DESC_ST1));
  int64_t count = 0;
  TRY(GrB_Matrix_reduce_INT64(&count, NULL, GrB_PLUS_MONOID_INT64, c, NULL));
  GrB_Matrix_free(&c);
  j->count = count;
  return 0;
}

/* One whole call (timed by the caller). */
static int call(Job *j) {
  GrB_Index n, m;
  TRY(GrB_Matrix_nrows(&n, j->a));
  TRY(GrB_Matrix_ncols(&m, j->a));
  switch (j->kernel) {
  case SPMV:
    TRY(GrB_Vector_new(&j->y, GrB_FP64, n));
    TRY(GrB_mxv(j->y, NULL, NULL, GrB_PLUS_TIMES_SEMIRING_FP64, j->a, j->x,
                NULL));
    TRY(GrB_wait(j->y, GrB_MATERIALIZE));
    return 0;
  case SPGEMM:
    TRY(GrB_Matrix_new(&j->c, GrB_FP64, n, m));
    TRY(GrB_mxm(j->c, NULL, NULL, GrB_PLUS_TIMES_SEMIRING_FP64, j->a, j->a,
                NULL));
    TRY(GrB_wait(j->c, GrB_MATERIALIZE));
    return 0;
  case SDDMM:
    TRY(GrB_Matrix_new(&j->c, GrB_FP64, n, m));
    TRY(GrB_mxm(j->c, j->a, NULL, GrB_PLUS_TIMES_SEMIRING_FP64, j->u, j->v,
                GrB_DESC_ST1));
    TRY(GrB_eWiseMult(j->c, NULL, NULL, GrB_TIMES_FP64, j->c, j->a, NULL));
    TRY(GrB_wait(j->c, GrB_MATERIALIZE));
    return 0;
  case TRI_LOWER:
    return count_lower(j, j->a);
  case TRI_FULL: {
    GrB_Matrix l;
    TRY(GrB_Matrix_new(&l, GrB_FP64, n, n));
    TRY(GrB_Matrix_select_INT64(l, NULL, NULL, GrB_TRIL, j->a, -1, NULL));
    int bad = count_lower(j, l);
    GrB_Matrix_free(&l);
    return bad;
  }
  }
  return 0;
}

/* The previous call's result, freed before the next call's clock. */
static void drop_result(Job *j) {
  if (j->y)
    GrB_Vector_free(&j->y);
  if (j->c)
    GrB_Matrix_free(&j->c);
}

static int sums_of(Job *j, BenchSums *s) {
  memset(s, 0, sizeof *s);
  GrB_Index nv, ncols = 0;
  if (j->kernel == TRI_LOWER || j->kernel == TRI_FULL) {
    bench_sums_add(s, 0, 0, 0, (double)j->count);
    return 0;
  }
  if (j->y)
    TRY(GrB_Vector_nvals(&nv, j->y));
  else {
    TRY(GrB_Matrix_nvals(&nv, j->c));
    TRY(GrB_Matrix_ncols(&ncols, j->c));
  }
  GrB_Index *I = malloc((nv + 1) * sizeof *I), *J = malloc((nv + 1) * sizeof *J);
  double *X = malloc((nv + 1) * sizeof *X);
  if (!I || !J || !X) {
    free(I), free(J), free(X);
    snprintf(fail_msg, sizeof fail_msg, "out of memory");
    return -1;
  }
  GrB_Info info = j->y ? GrB_Vector_extractTuples_FP64(J, X, &nv, j->y)
                       : GrB_Matrix_extractTuples_FP64(I, J, X, &nv, j->c);
  for (GrB_Index e = 0; info == GrB_SUCCESS && e < nv; e++)
    bench_sums_add(s, j->y ? 0 : (int64_t)I[e], (int64_t)J[e],
                   (int64_t)ncols, X[e]);
  free(I), free(J), free(X);
  TRY(info);
  return 0;
}

static void free_job(Job *j) {
  drop_result(j);
  if (j->x)
    GrB_Vector_free(&j->x);
  if (j->u)
    GrB_Matrix_free(&j->u);
  if (j->v)
    GrB_Matrix_free(&j->v);
  memset(j, 0, sizeof *j);
}

static void cmd_prep(const char *id, const char *key, const char *kernel) {
  Slot *slot = find_slot(key);
  Job *j = NULL;
  for (int k = 0; !j && k < MAX_JOBS; k++)
    if (!jobs[k].used)
      j = &jobs[k];
  int kn = 0;
  while (kn < NKERNELS && strcmp(KERNEL_NAMES[kn], kernel))
    kn++;
  if (!slot || !j || find_job(id) || kn == NKERNELS) {
    bench_reply_error(!slot ? "unknown key" : !j ? "too many jobs"
                      : kn == NKERNELS ? "GraphBLAS has no such kernel"
                                       : "job exists");
    return;
  }
  j->used = 1;
  snprintf(j->id, sizeof j->id, "%s", id);
  j->kernel = (Kernel)kn;
  j->a = slot->a;
  if (make_operands(j)) {
    free_job(j);
    bench_reply_error(fail_msg);
    return;
  }
  double t0 = now_ms();
  int bad = call(j);
  double first = now_ms() - t0;
  if (bad) {
    free_job(j);
    bench_reply_error(fail_msg);
    return;
  }
  printf("ok first_ms=%.4f\n", first);
  fflush(stdout);
}

static void cmd_run(const char *id, int n) {
  Job *j = find_job(id);
  double *ms = n > 0 && n <= 100000 ? malloc((size_t)n * sizeof *ms) : NULL;
  if (!j || !ms) {
    free(ms);
    bench_reply_error(!j ? "unknown job" : "bad call count");
    return;
  }
  for (int r = 0; r < n; r++) {
    drop_result(j);
    double t0 = now_ms();
    int bad = call(j);
    ms[r] = now_ms() - t0;
    if (bad) {
      free(ms);
      bench_reply_error(fail_msg);
      return;
    }
  }
  double call_min = ms[0];
  for (int r = 1; r < n; r++)
    call_min = ms[r] < call_min ? ms[r] : call_min;
  BenchSums s;
  if (sums_of(j, &s)) {
    free(ms);
    bench_reply_error(fail_msg);
    return;
  }
  printf("ok calls=%d call_ms=%.5f call_min_ms=%.5f sum=%.17g wsum=%.17g "
         "asum=%.17g count=%lld\n",
         n, median_of(ms, n), call_min, s.sum, s.wsum, s.asum,
         (long long)s.count);
  fflush(stdout);
  free(ms);
}

static int serve(void) {
  char line[8192], *av[BENCH_MAX_ARGS];
  while (fgets(line, sizeof line, stdin)) {
    int ac = bench_split(line, av, BENCH_MAX_ARGS);
    if (ac == 0)
      continue;
    if (!strcmp(av[0], "quit"))
      break;
    if (!strcmp(av[0], "load") && ac == 3) {
      cmd_load(av[1], av[2]);
    } else if (!strcmp(av[0], "prep") && ac == 4) {
      cmd_prep(av[1], av[2], av[3]);
    } else if (!strcmp(av[0], "run") && ac == 3) {
      cmd_run(av[1], atoi(av[2]));
    } else if (!strcmp(av[0], "free") && ac == 2) {
      Job *j = find_job(av[1]);
      if (j)
        free_job(j);
      printf(j ? "ok\n" : "error unknown job\n");
      fflush(stdout);
    } else {
      bench_reply_error("unknown command (load, prep, run, free, quit)");
    }
  }
  for (int k = 0; k < MAX_JOBS; k++)
    if (jobs[k].used)
      free_job(&jobs[k]);
  for (int k = 0; k < MAX_SLOTS; k++)
    if (slots[k].a)
      GrB_Matrix_free(&slots[k].a);
  return 0;
}

int main(int argc, char **argv) {
  int threads = 1;
  int ok = argc >= 2 && !strcmp(argv[1], "serve");
  if (ok && argc == 4 && !strcmp(argv[2], "-t"))
    threads = atoi(argv[3]);
  else if (argc != 2)
    ok = 0;
  if (!ok || threads < 1) {
    int help = argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
    fprintf(help ? stdout : stderr,
            "usage: baseline_graphblas serve [-t THREADS]\n"
            "(driven by benchmarks/kernels.py: benchmarks/run kernels -h)\n");
    return help ? 0 : 2;
  }
  if (GrB_init(GrB_NONBLOCKING) != GrB_SUCCESS ||
      GxB_Global_Option_set(GxB_NTHREADS, threads) != GrB_SUCCESS) {
    fprintf(stderr, "baseline_graphblas: GrB_init failed\n");
    return 1;
  }
  int ver[3] = {0, 0, 0};
  GxB_Global_Option_get(GxB_LIBRARY_VERSION, ver);
  fprintf(stderr, "# SuiteSparse:GraphBLAS %d.%d.%d, %d thread%s\n", ver[0],
          ver[1], ver[2], threads, threads == 1 ? "" : "s");
  int st = serve();
  GrB_finalize();
  return st;
}
