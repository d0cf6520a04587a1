/*
 * bench_kernels.c -- times galleyc's generated kernels through the program
 * API (galley.h) on real matrices.  Built by `make benchmarks`; run by
 * `benchmarks/run kernels`, which compares it with
 * benchmarks/baseline_kernels.py (SciPy) and benchmarks/baseline_graphblas
 * (SuiteSparse:GraphBLAS) on the same files in the same run.
 *
 *   bench_kernels [-r REPS] [-n] [-k KERNELS] [-b BACKENDS] [-m MAX_MIB]
 *                 [-c CAP_MS] [-d CACHE_DIR] FILE...
 *
 * Kernels (-k, comma-separated; default spmv,spgemm,sddmm):
 *   spmv         y[i] = A[i,j] * x[j]          x dense, x[j] = 1 + (j % 7)/8
 *   spgemm       C[i,k] = A[i,j] * A[j,k]
 *   sddmm        C[i,j] = S[i,j] * sum(k: U[i,k] * V[j,k])   S = A, U and V
 *                dense n x 32, U[i,k] = ((31i + 17k) % 13)/13 - 0.5,
 *                V[j,k] = ((7j + 5k) % 13)/13 - 0.5
 *   sddmm_fused  C[i,j] = S[i,j] * U[i,k] * V[j,k]  (the same result with
 *                implicit summation: one query instead of a lifted one)
 *   mttkrp       A[i,r] = sum(j,k: B[i,j,k] * C[j,r] * D[k,r])  B = the
 *                file's order-3 tensor, C and D dense with rank R = 16,
 *                C[j,r] = ((7j + 5r) % 13)/13 - 0.5,
 *                D[k,r] = ((3k + 11r) % 13)/13 - 0.5
 * Order-2 files (matrices) run the first four, order-3 files (tensors)
 * only mttkrp.
 * Backends (-b, default tcc,clang).  With -m MAX_MIB > 0, SpGEMM and
 * SDDMM are skipped (and say so) when a dense n x m result would need
 * more than MAX_MIB; the default 0 never skips (the cost planner stores
 * sparse results sparse).
 *
 * For every (file, kernel, backend): one cold run (plan, generate,
 * compile, execute; the clang backend compiles into a fresh private cache
 * directory under -d, default $TMPDIR), then the compile of a second,
 * separate program object on the same cache (the cached compile), then
 * REPS timed runs that reuse the compiled kernels (galley_program_run
 * reuses plan and kernels when the bound tensors are unchanged).  A run's
 * time is galley_run_info.exec_seconds: every query of the plan
 * (transposes, lifted aggregates, output allocation), nothing of loading,
 * planning or compiling.  Repetitions stop early once CAP_MS (default
 * 60000) is spent.  CSV lines, as the other benchmark programs:
 *
 *   tool,file,op,nnz,reps,median_ms,min_ms,bytes,note
 *
 * with tool galleyc-tcc / galleyc-clang and op
 *   KERNEL          median exec time of the reused runs (note: checksum =
 *                   sum of the result's entries, for a matrix result also
 *                   wsum = sum of A[i,r] * (1 + (i * ncols + r) % 11), and
 *                   the kernel-only share: the queries that are not
 *                   transposes, and "dims N x M" of the file's first two
 *                   modes)
 *   KERNEL_compile  compile time of the cold run (note: plan+codegen ms)
 *   KERNEL_cached   compile time of the second program (clang: the cache
 *                   hit; tcc compiles again, it has no cache); not
 *                   measured when one run takes more than 2 s
 *   KERNEL          with reps 0 and a note when skipped
 * The physical plan of every kernel goes to stderr.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "benchutil.h"
#include "galley.h"

#define K 32 /* columns of the SDDMM factors */
#define RANK 16 /* columns of the MTTKRP factors */

typedef struct Options {
  int reps;
  const char *kernels;
  const char *backends;
  double max_mib;
  double cap_ms;
  const char *cache_root;
} Options;

static void emit(const char *tool, const char *file, const char *op,
                 int64_t nnz, double *ms, int reps, int64_t bytes,
                 const char *note) {
  char nb[1300];
  clean(note, nb, sizeof nb);
  if (reps == 0) {
    printf("%s,%s,%s,%lld,0,,,,%s\n", tool, base_name(file), op,
           (long long)nnz, nb);
  } else {
    qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
    double median =
        reps % 2 ? ms[reps / 2] : (ms[reps / 2 - 1] + ms[reps / 2]) / 2;
    printf("%s,%s,%s,%lld,%d,%.3f,%.3f,%lld,%s\n", tool, base_name(file), op,
           (long long)nnz, reps, median, ms[0], (long long)bytes, nb);
  }
  fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* Operands                                                            */
/* ------------------------------------------------------------------ */

static galley_tensor *dense_vector(int64_t n) {
  double *v = malloc((size_t)n * sizeof *v);
  if (!v)
    return NULL;
  for (int64_t j = 0; j < n; j++)
    v[j] = 1.0 + (double)(j % 7) / 8.0;
  galley_format f = galley_format_dense(1);
  galley_tensor *t = NULL;
  galley_tensor_from_dense(1, &n, v, 0, &f, &t, NULL);
  free(v);
  return t;
}

/* F[i, k] = ((i * a + k * b) % 13) / 13 - 0.5, dense n x cols. */
static galley_tensor *factor_cols(int64_t n, int64_t a, int64_t b,
                                  int64_t cols) {
  double *v = malloc((size_t)(n * cols) * sizeof *v);
  if (!v)
    return NULL;
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < cols; k++)
      v[i * cols + k] = (double)((i * a + k * b) % 13) / 13.0 - 0.5;
  int64_t dims[2] = {n, cols};
  galley_format f = galley_format_dense(2);
  galley_tensor *t = NULL;
  galley_tensor_from_dense(2, dims, v, 0, &f, &t, NULL);
  free(v);
  return t;
}

static galley_tensor *factor(int64_t n, int64_t a, int64_t b) {
  return factor_cols(n, a, b, K);
}

/* ------------------------------------------------------------------ */
/* One kernel                                                          */
/* ------------------------------------------------------------------ */

typedef struct Kernel {
  const char *name;
  const char *text;
  int dense_out; /* 1: the default plan's result (or lifted
                    intermediate) is a dense n x n matrix */
  int order;     /* the order of the file's tensor it runs on */
} Kernel;

static const Kernel KERNELS[] = {
    {"spmv", "input A[i, j], x[j]\ny[i] = A[i, j] * x[j]\n", 0, 2},
    {"spgemm", "input A[i, j]\nC[i, k] = A[i, j] * A[j, k]\n", 1, 2},
    {"sddmm",
     "input S[i, j], U[i, k], V[j, k]\n"
     "C[i, j] = S[i, j] * sum(k: U[i, k] * V[j, k])\n",
     1, 2},
    {"sddmm_fused",
     "input S[i, j], U[i, k], V[j, k]\nC[i, j] = S[i, j] * U[i, k] * V[j, k]\n",
     1, 2},
    {"mttkrp",
     "input B[i, j, k], C[j, r], D[k, r]\n"
     "A[i, r] = sum(j, k: B[i, j, k] * C[j, r] * D[k, r])\n",
     0, 3},
};
#define NKERNELS (int)(sizeof KERNELS / sizeof KERNELS[0])

typedef struct Operands {
  const galley_tensor *a, *x, *u, *v, *c, *d;
} Operands;

/* A parsed program with its inputs bound, on the given backend. */
static galley_program *prepare(const Kernel *k, const Operands *o,
                               galley_backend backend, const char *cache,
                               galley_error *err) {
  galley_program *p = NULL;
  if (galley_program_parse(k->name, k->text, strlen(k->text), &p, NULL,
                           err) != GALLEY_OK)
    return NULL;
  int ok = galley_program_set_backend(p, backend, err) == GALLEY_OK &&
           (!cache || galley_program_set_cache_dir(p, cache, err) == GALLEY_OK);
  for (int n = 0; ok && n < galley_program_num_inputs(p); n++) {
    const char *name = galley_program_input_name(p, n);
    const galley_tensor *t = !strcmp(name, "x")   ? o->x
                             : !strcmp(name, "U") ? o->u
                             : !strcmp(name, "V") ? o->v
                             : !strcmp(name, "C") ? o->c
                             : !strcmp(name, "D") ? o->d
                                                  : o->a;
    ok = galley_program_bind(p, name, t, err) == GALLEY_OK;
  }
  if (!ok)
    p = galley_program_free(p);
  return p;
}

typedef struct SumState {
  double sum, wsum;
  int64_t ncols; /* > 0: also the weighted sum of a matrix */
} SumState;

static int add_entry(void *ud, const int64_t *coord, double value) {
  SumState *s = ud;
  s->sum += value;
  if (s->ncols > 0)
    s->wsum += value * (double)(1 + (coord[0] * s->ncols + coord[1]) % 11);
  return 0;
}

/* The weighted sum of a matrix output 0's stored entries (0 otherwise;
 * only meaningful for a fill of 0). */
static double wchecksum(const galley_program *p) {
  const galley_tensor *t = galley_program_output(p, 0);
  if (galley_tensor_order(t) != 2 || galley_tensor_fill(t) != 0)
    return 0;
  SumState s = {0, 0, galley_tensor_dim(t, 1)};
  galley_tensor_foreach(t, add_entry, &s);
  return s.wsum;
}

/* The sum of every entry of output 0 (fills of unstored entries too). */
static double checksum(const galley_program *p) {
  const galley_tensor *t = galley_program_output(p, 0);
  SumState s = {0, 0, 0};
  galley_tensor_foreach(t, add_entry, &s);
  double total = 1;
  for (int m = 0; m < galley_tensor_order(t); m++)
    total *= (double)galley_tensor_dim(t, m);
  double fill = galley_tensor_fill(t);
  if (fill != 0)
    s.sum += fill * (total - (double)galley_tensor_stored(t));
  return s.sum;
}

/* Seconds of the last run's queries that are not transposes. */
static double kernel_seconds(const galley_program *p) {
  galley_run_info ri;
  galley_program_run_info(p, &ri);
  double s = 0;
  for (int q = 0; q < ri.nqueries; q++) {
    galley_query_info qi;
    if (galley_program_query_info(p, q, &qi, NULL) == GALLEY_OK &&
        !qi.transpose && qi.seconds > 0)
      s += qi.seconds;
  }
  return s;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  return remove(path);
}

static void fail_line(const char *tool, const char *file, const char *op,
                      int64_t nnz, const char *what, const galley_error *err) {
  char note[1200];
  snprintf(note, sizeof note, "error: %s: %.1000s", what, err->msg);
  fprintf(stderr, "bench_kernels: %s: %s %s: %s\n", file, op, tool, note);
  emit(tool, file, op, nnz, NULL, 0, 0, note);
}

/* Cold run, cached compile, then the timed reused runs. */
static void bench_backend(const char *file, const Kernel *k,
                          const Operands *o, galley_backend backend,
                          const Options *opt, int64_t nnz) {
  char tool[32], op[64], note[256];
  snprintf(tool, sizeof tool, "galleyc-%s", galley_backend_name(backend));
  galley_error err;
  char cache[4096] = "";
  if (backend == GALLEY_BACKEND_CLANG) {
    snprintf(cache, sizeof cache, "%s/galley-bench-cache.XXXXXX",
             opt->cache_root);
    if (!mkdtemp(cache)) {
      perror("bench_kernels: mkdtemp");
      return;
    }
  }
  const char *cdir = cache[0] ? cache : NULL;
  galley_program *p = prepare(k, o, backend, cdir, &err);
  if (!p || galley_program_run(p, &err) != GALLEY_OK) {
    fail_line(tool, file, k->name, nnz, "cold run", &err);
    galley_program_free(p);
    goto done;
  }
  galley_run_info ri;
  galley_program_run_info(p, &ri);
  fprintf(stderr, "== %s %s %s: physical plan\n", base_name(file), k->name,
          tool);
  galley_program_print_physical_plan(p, stderr, NULL);
  double ms[256];
  ms[0] = ri.compile_seconds * 1e3;
  snprintf(note, sizeof note, "cold; plan+codegen %.3f ms; first exec %.3f ms",
           ri.plan_seconds * 1e3, ri.exec_seconds * 1e3);
  snprintf(op, sizeof op, "%s_compile", k->name);
  emit(tool, file, op, nnz, ms, 1, 0, note);

  /* The same kernels compiled by a second program object (which runs
   * them once more: not worth it for the naive plans' slow runs). */
  snprintf(op, sizeof op, "%s_cached", k->name);
  galley_program *p2 = NULL;
  if (ri.exec_seconds > 2)
    emit(tool, file, op, nnz, NULL, 0, 0, "not measured: a run takes > 2 s");
  else
    p2 = prepare(k, o, backend, cdir, &err);
  if (p2 && galley_program_run(p2, &err) == GALLEY_OK) {
    galley_run_info r2;
    galley_program_run_info(p2, &r2);
    ms[0] = r2.compile_seconds * 1e3;
    emit(tool, file, op, nnz, ms, 1, 0,
         backend == GALLEY_BACKEND_CLANG ? "clang cache hit"
                                         : "tcc (no cache: compiles again)");
  }
  galley_program_free(p2);

  double kern[256], spent = 0;
  int reps = 0, reused = 1;
  while (reps < opt->reps && reps < 256 && spent <= opt->cap_ms) {
    if (galley_program_run(p, &err) != GALLEY_OK) {
      fail_line(tool, file, k->name, nnz, "timed run", &err);
      galley_program_free(p);
      goto done;
    }
    galley_program_run_info(p, &ri);
    reused &= ri.reused;
    ms[reps] = ri.exec_seconds * 1e3;
    kern[reps] = kernel_seconds(p) * 1e3;
    spent += ms[reps++];
  }
  qsort(kern, (size_t)reps, sizeof *kern, cmp_double);
  const galley_tensor *out = galley_program_output(p, 0);
  char wnote[64] = "";
  if (k->order == 3)
    snprintf(wnote, sizeof wnote, "; wsum %.10g", wchecksum(p));
  const galley_tensor *in0 = o->a;
  snprintf(note, sizeof note,
           "sum %.10g%s; kernels only %.3f ms%s; out %s; dims %lld x %lld",
           checksum(p), wnote, kern[reps / 2], reused ? "" : "; NOT reused",
           galley_tensor_stored(out) == 0 ? "empty" : "stored",
           (long long)galley_tensor_dim(in0, 0),
           (long long)galley_tensor_dim(in0, 1));
  emit(tool, file, k->name, nnz, ms, reps, galley_tensor_bytes(out), note);
  galley_program_free(p);
done:
  if (cache[0])
    nftw(cache, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *s = list; (s = strstr(s, name)) != NULL; s += n)
    if ((s == list || s[-1] == ',') && (s[n] == ',' || s[n] == '\0'))
      return 1;
  return 0;
}

static void bench_file(const char *file, const Options *opt) {
  galley_tensor *a = NULL;
  galley_error err;
  if (galley_tensor_read(file, GALLEY_FILE_AUTO, NULL, &a, &err) !=
      GALLEY_OK) {
    fprintf(stderr, "bench_kernels: %s\n", err.msg);
    return;
  }
  int order = galley_tensor_order(a);
  int64_t n = galley_tensor_dim(a, 0), m = order > 1 ? galley_tensor_dim(a, 1) : 1;
  int64_t nnz = galley_tensor_nnz(a);
  Operands o = {a, NULL, NULL, NULL, NULL, NULL};
  if (order == 2) {
    o.x = dense_vector(m);
    o.u = factor(n, 31, 17);
    o.v = factor(m, 7, 5);
  } else if (order == 3) {
    o.c = factor_cols(m, 7, 5, RANK);
    o.d = factor_cols(galley_tensor_dim(a, 2), 3, 11, RANK);
  }
  double dense_mib = (double)n * (double)m * 8 / 1048576;
  for (int k = 0; k < NKERNELS; k++) {
    const Kernel *kn = &KERNELS[k];
    if (!listed(opt->kernels, kn->name) || kn->order != order)
      continue;
    if (kn->dense_out && opt->max_mib > 0 && dense_mib > opt->max_mib) {
      char note[256];
      snprintf(note, sizeof note,
               "skipped: the default plan's dense %lld x %lld result needs "
               "%.0f MiB (limit %.0f)",
               (long long)n, (long long)m, dense_mib, opt->max_mib);
      for (int b = 1; b <= 2; b++)
        if (listed(opt->backends, galley_backend_name((galley_backend)b))) {
          char tool[32];
          snprintf(tool, sizeof tool, "galleyc-%s",
                   galley_backend_name((galley_backend)b));
          emit(tool, file, kn->name, nnz, NULL, 0, 0, note);
        }
      continue;
    }
    if (listed(opt->backends, "tcc"))
      bench_backend(file, kn, &o, GALLEY_BACKEND_TCC, opt, nnz);
    if (listed(opt->backends, "clang"))
      bench_backend(file, kn, &o, GALLEY_BACKEND_CLANG, opt, nnz);
  }
  galley_tensor_free((galley_tensor *)o.x);
  galley_tensor_free((galley_tensor *)o.u);
  galley_tensor_free((galley_tensor *)o.v);
  galley_tensor_free((galley_tensor *)o.c);
  galley_tensor_free((galley_tensor *)o.d);
  galley_tensor_free(a);
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_kernels [-r REPS] [-n] [-k KERNELS] [-b BACKENDS] "
             "[-m MAX_MIB] [-c CAP_MS] [-d CACHE_DIR] FILE...\n");
}

int main(int argc, char **argv) {
  const char *tmp = getenv("TMPDIR");
  Options opt = {5, "spmv,spgemm,sddmm,mttkrp", "tcc,clang", 0, 60000,
                 tmp && *tmp ? tmp : "/tmp"};
  int header = 1, c;
  while ((c = getopt(argc, argv, "r:nk:b:m:c:d:h")) != -1) {
    switch (c) {
    case 'r': opt.reps = atoi(optarg); break;
    case 'n': header = 0; break;
    case 'k': opt.kernels = optarg; break;
    case 'b': opt.backends = optarg; break;
    case 'm': opt.max_mib = atof(optarg); break;
    case 'c': opt.cap_ms = atof(optarg); break;
    case 'd': opt.cache_root = optarg; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (opt.reps < 1 || opt.reps > 256 || optind >= argc) {
    usage(stderr);
    return 2;
  }
  if (header)
    printf("tool,file,op,nnz,reps,median_ms,min_ms,bytes,note\n");
  for (int f = optind; f < argc; f++)
    bench_file(argv[f], &opt);
  return 0;
}
