/*
 * bench_jit.c -- compile latency of the JIT backends, per kernel.
 * Built by `make benchmarks` in a build directory:
 *
 *   bench_jit [-r REPS] [-c CALLS]
 *
 * For each kernel (SpMV, SpGEMM, SDDMM, and a union with exp), the C
 * source is what the code generator emits for the .tin program below
 * (front end, default planner on random inputs, cg_plan); if that
 * pipeline fails, a hand-written kernel of the same shape in the
 * generated style is used instead (the `source` column says which).
 * Measured, each the median of REPS runs:
 *   tcc            jit_compile with libtcc (always cold: nothing cached)
 *   clang_empty    clang into an empty new cache directory (version probe
 *                  + compile + load)
 *   clang_miss     clang, new source (a comment changes the key) in a
 *                  directory whose compiler version is already cached
 *   clang_cached   clang, the same source again: a cache hit (no process)
 * and the call overhead of an already-loaded kernel (a 4x4 SpMV kernel,
 * CALLS calls, ns per call) for each backend.  A table goes to stdout,
 * then CSV lines:
 *   tool,kernel,op,source_bytes,reps,median_ms,min_ms,note
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "galley.h"
#include "galley_rt.h"
#include "ir.h"
#include "phys.h"
#include "rt_internal.h"

static const char rt_header[] =
#include "rt_header.inc"
    ;

enum { MAX_REPS = 101, MAX_ROWS = 64 };

/* ---- the kernels ---- */

typedef struct BenchKernel {
  const char *name;
  const char *tin;       /* the program */
  int nin;               /* its inputs, in declaration order: */
  int order[3];          /* order of each */
  int64_t dim;           /* every index has this size */
  const char *synthetic; /* the fallback body (after the header) */
} BenchKernel;

static const char spmv_body[] =
    "/* y(i) = A(i,j) * x(j) */\n"
    "int galley_q0(const galley_kernel_args *a) {\n"
    "  const struct galley_tensor *A = a->in[0], *x = a->in[1];\n"
    "  const galley_level *A0 = &A->lvl[0], *A1 = &A->lvl[1];\n"
    "  const galley_level *x0 = &x->lvl[0];\n"
    "  double *y_val = a->out->val;\n"
    "  for (galley_crd i = a->lo; i < a->hi; i++) {\n"
    "    galley_pos pA1 = galley_rt_dense_locate(A0, 0, i);\n"
    "    double acc = 0.0;\n"
    "    for (galley_pos tA = A1->pos[pA1]; tA < A1->pos[pA1 + 1]; tA++) {\n"
    "      galley_crd j = A1->crd[tA];\n"
    "      galley_pos px = galley_rt_list_locate(x0, 0, j);\n"
    "      if (px < 0) continue;\n"
    "      acc += A->val[tA] * x->val[px];\n"
    "    }\n"
    "    y_val[i] = acc;\n"
    "  }\n"
    "  return 0;\n"
    "}\n";

static const char spgemm_body[] =
    "/* C(i,k) = A(i,j) * B(j,k), B transposed to (k,j): a merge per (i,k) */\n"
    "int galley_q0(const galley_kernel_args *a) {\n"
    "  const struct galley_tensor *A = a->in[0], *B = a->in[1];\n"
    "  const galley_level *A0 = &A->lvl[0], *A1 = &A->lvl[1];\n"
    "  const galley_level *B0 = &B->lvl[0], *B1 = &B->lvl[1];\n"
    "  galley_rt_sink *out = a->sink;\n"
    "  galley_crd K = a->dims[2];\n"
    "  for (galley_crd i = a->lo; i < a->hi; i++) {\n"
    "    galley_pos pA1 = galley_rt_dense_locate(A0, 0, i);\n"
    "    for (galley_crd k = 0; k < K; k++) {\n"
    "      galley_pos pB1 = galley_rt_dense_locate(B0, 0, k);\n"
    "      galley_pos tA = A1->pos[pA1], eA = A1->pos[pA1 + 1];\n"
    "      galley_pos tB = B1->pos[pB1], eB = B1->pos[pB1 + 1];\n"
    "      double acc = 0.0;\n"
    "      int any = 0;\n"
    "      while (tA < eA && tB < eB) {\n"
    "        galley_crd jA = A1->crd[tA], jB = B1->crd[tB];\n"
    "        if (jA < jB) { tA = galley_rt_gallop(A1->crd, tA, eA, jB); continue; }\n"
    "        if (jB < jA) { tB = galley_rt_gallop(B1->crd, tB, eB, jA); continue; }\n"
    "        acc += A->val[tA] * B->val[tB];\n"
    "        any = 1;\n"
    "        tA++, tB++;\n"
    "      }\n"
    "      if (any && acc != 0.0) {\n"
    "        int64_t c[2] = {i, k};\n"
    "        if (galley_rt_sink_push(out, c, acc) != 0) return -1;\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  return 0;\n"
    "}\n";

static const char sddmm_body[] =
    "/* C(i,j) = S(i,j) * U(i,k) * V(j,k) */\n"
    "int galley_q0(const galley_kernel_args *a) {\n"
    "  const struct galley_tensor *S = a->in[0], *U = a->in[1], *V = a->in[2];\n"
    "  const galley_level *S0 = &S->lvl[0], *S1 = &S->lvl[1];\n"
    "  const galley_level *U0 = &U->lvl[0], *U1 = &U->lvl[1];\n"
    "  const galley_level *V0 = &V->lvl[0], *V1 = &V->lvl[1];\n"
    "  galley_rt_sink *out = a->sink;\n"
    "  for (galley_crd i = a->lo; i < a->hi; i++) {\n"
    "    galley_pos pS1 = galley_rt_dense_locate(S0, 0, i);\n"
    "    galley_pos pU1 = galley_rt_dense_locate(U0, 0, i);\n"
    "    for (galley_pos tS = S1->pos[pS1]; tS < S1->pos[pS1 + 1]; tS++) {\n"
    "      galley_crd j = S1->crd[tS];\n"
    "      galley_pos pV1 = galley_rt_dense_locate(V0, 0, j);\n"
    "      double acc = 0.0;\n"
    "      for (galley_pos tU = U1->pos[pU1]; tU < U1->pos[pU1 + 1]; tU++) {\n"
    "        galley_crd k = U1->crd[tU];\n"
    "        galley_pos qV = galley_rt_list_locate(V1, pV1, k);\n"
    "        if (qV < 0) continue;\n"
    "        acc += S->val[tS] * U->val[tU] * V->val[qV];\n"
    "      }\n"
    "      int64_t c[2] = {i, j};\n"
    "      if (galley_rt_sink_push(out, c, acc) != 0) return -1;\n"
    "    }\n"
    "  }\n"
    "  return 0;\n"
    "}\n";

static const char union_body[] =
    "extern double exp(double);\n"
    "/* C(i,j) = exp(A(i,j) + B(i,j)): a two-finger union per row */\n"
    "int galley_q0(const galley_kernel_args *a) {\n"
    "  const struct galley_tensor *A = a->in[0], *B = a->in[1];\n"
    "  const galley_level *A1 = &A->lvl[1], *B1 = &B->lvl[1];\n"
    "  double *C_val = a->out->val;\n"
    "  galley_crd J = a->dims[1];\n"
    "  for (galley_crd i = a->lo; i < a->hi; i++) {\n"
    "    galley_pos tA = A1->pos[i], eA = A1->pos[i + 1];\n"
    "    galley_pos tB = B1->pos[i], eB = B1->pos[i + 1];\n"
    "    for (galley_crd j = 0; j < J; j++) {\n"
    "      double va = A->fill, vb = B->fill;\n"
    "      if (tA < eA && A1->crd[tA] == j) va = A->val[tA++];\n"
    "      if (tB < eB && B1->crd[tB] == j) vb = B->val[tB++];\n"
    "      C_val[i * J + j] = exp(va + vb);\n"
    "    }\n"
    "  }\n"
    "  return 0;\n"
    "}\n";

static const BenchKernel kernels[] = {
    {"spmv", "input A[i, j], x[j]\ny[i] = sum(j: A[i, j] * x[j])\noutput y\n",
     2, {2, 1}, 200, spmv_body},
    {"spgemm",
     "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\noutput C\n",
     2, {2, 2}, 200, spgemm_body},
    {"sddmm",
     "input S[i, j], U[i, k], V[j, k]\n"
     "C[i, j] = sum(k: S[i, j] * U[i, k] * V[j, k])\noutput C\n",
     3, {2, 2, 2}, 200, sddmm_body},
    {"union_exp", "input A[i, j], B[i, j]\nC[i, j] = exp(A[i, j] + B[i, j])\n"
                  "output C\n",
     2, {2, 2}, 200, union_body},
};

/* A random tensor: about 2% dense for matrices, 30% for vectors. */
static galley_tensor *random_tensor(int order, int64_t dim, unsigned seed) {
  int64_t dims[3] = {dim, dim, dim};
  int64_t nnz = order == 1 ? dim * 3 / 10 : dim * dim / 50;
  int64_t *crd = malloc((size_t)(nnz * order + 1) * sizeof *crd);
  double *val = malloc((size_t)(nnz + 1) * sizeof *val);
  uint64_t x = seed * 2654435761u + 1;
  for (int64_t e = 0; e < nnz; e++) {
    for (int k = 0; k < order; k++) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      crd[e * order + k] = (int64_t)((x >> 33) % (uint64_t)dim);
    }
    val[e] = 0.5 + (double)(e % 7);
  }
  galley_tensor *t = NULL;
  galley_tensor_from_coo(order, dims, nnz, crd, val, 0.0, NULL, &t, NULL);
  /* the hand-written kernels read 64-bit index arrays */
  if (t)
    rt_tensor_set_widths(t, 0, NULL);
  free(crd);
  free(val);
  return t;
}

/* The generated source and kernel symbols of a kernel's program, or 0
 * when the pipeline is not able to (yet). */
static int generated_source(const BenchKernel *bk, char **src,
                            char ***syms, int *nsym) {
  Program *p = NULL;
  PhysPlan *pp = NULL;
  galley_tensor *in[3] = {NULL, NULL, NULL};
  size_t len = 0;
  int ok = 0;
  *src = NULL;
  if (front_parse(bk->name, bk->tin, strlen(bk->tin), &p, NULL, NULL) != 0)
    goto done;
  for (int k = 0; k < bk->nin; k++)
    in[k] = random_tensor(bk->order[k], bk->dim, (unsigned)k + 1);
  if (phys_default_plan(p, (const galley_tensor *const *)in, &pp, NULL) != 0)
    goto done;
  if (cg_plan(pp, src, &len, NULL) != 0)
    goto done;
  *syms = calloc((size_t)pp->nq + 1, sizeof **syms);
  *nsym = 0;
  for (int n = 0; n < pp->nq; n++)
    if (pp->q[n].kind == PQ_KERNEL) {
      (*syms)[*nsym] = malloc(32);
      cg_kernel_name(n, (*syms)[*nsym], 32);
      (*nsym)++;
    }
  ok = 1;
done:
  if (!ok) {
    free(*src);
    *src = NULL;
  }
  phys_plan_free(pp);
  program_free(p);
  for (int k = 0; k < 3; k++)
    galley_tensor_free(in[k]);
  return ok;
}

/* The fallback: header + hand-written body, one symbol galley_q0. */
static void synthetic_source(const BenchKernel *bk, char **src, char ***syms,
                             int *nsym) {
  size_t n = strlen(rt_header) + strlen(bk->synthetic) + 1;
  *src = malloc(n);
  snprintf(*src, n, "%s%s", rt_header, bk->synthetic);
  *syms = calloc(2, sizeof **syms);
  (*syms)[0] = strdup("galley_q0");
  *nsym = 1;
}

/* ---- measurements ---- */

static void rm_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
        continue;
      char sub[4096];
      snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
      rm_tree(sub);
    }
    if (d)
      closedir(d);
    rmdir(path);
  } else {
    unlink(path);
  }
}

static char *temp_dir(void) {
  const char *t = getenv("TMPDIR");
  char *path = malloc(4096);
  snprintf(path, 4096, "%s/galley-bench-jit-XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(path)) {
    free(path);
    return NULL;
  }
  return path;
}

/* One jit_compile: its time in ms, or -1 (message on stderr). */
static double time_compile(JitBackend b, const char *dir, const char *src,
                           char **syms, int nsym) {
  void **fns = calloc((size_t)nsym + 1, sizeof *fns);
  JitOptions opt = {.backend = b, .cache_dir = dir};
  JitModule *m = NULL;
  galley_error err = {0};
  double t0 = now_ms();
  galley_status st =
      jit_compile(&opt, src, (const char *const *)syms, nsym, fns, &m, &err);
  double t = now_ms() - t0;
  jit_free(m);
  free(fns);
  if (st != GALLEY_OK) {
    fprintf(stderr, "bench_jit: %s\n", err.msg);
    return -1;
  }
  return t;
}

/* src with a comment that makes it a new cache key. */
static char *variant(const char *src, int k) {
  size_t n = strlen(src) + 64;
  char *s = malloc(n);
  snprintf(s, n, "/* variant %d %ld */\n%s", k, (long)getpid(), src);
  return s;
}

typedef struct Stat {
  double med, min;
  int n;
} Stat;

static Stat summarize(double *ms, int n) {
  Stat s = {-1, -1, 0};
  int k = 0;
  for (int r = 0; r < n; r++)
    if (ms[r] >= 0)
      ms[k++] = ms[r];
  if (k == 0)
    return s;
  qsort(ms, (size_t)k, sizeof *ms, cmp_double);
  s.med = k % 2 ? ms[k / 2] : (ms[k / 2 - 1] + ms[k / 2]) / 2;
  s.min = ms[0];
  s.n = k;
  return s;
}

typedef struct Row {
  const char *kernel, *source;
  size_t bytes;
  Stat tcc, clang_empty, clang_miss, clang_cached;
} Row;

/* The four compile timings of one source. */
static Row measure(const char *kernel, const char *source, const char *src,
                   char **syms, int nsym, int reps) {
  Row row = {.kernel = kernel, .source = source, .bytes = strlen(src)};
  double ms[MAX_REPS];
  for (int r = 0; r < reps; r++)
    ms[r] = time_compile(JIT_TCC, NULL, src, syms, nsym);
  row.tcc = summarize(ms, reps);
  for (int r = 0; r < reps; r++) {
    char *dir = temp_dir(), *v = variant(src, r);
    ms[r] = dir ? time_compile(JIT_CLANG, dir, v, syms, nsym) : -1;
    if (dir)
      rm_tree(dir);
    free(dir);
    free(v);
  }
  row.clang_empty = summarize(ms, reps);
  char *dir = temp_dir();
  if (dir && time_compile(JIT_CLANG, dir, "int galley_warm;\n", NULL, 0) < 0)
    fprintf(stderr, "bench_jit: clang warm-up failed\n");
  for (int r = 0; r < reps; r++) {
    char *v = variant(src, 1000 + r);
    ms[r] = dir ? time_compile(JIT_CLANG, dir, v, syms, nsym) : -1;
    free(v);
  }
  row.clang_miss = summarize(ms, reps);
  if (dir)
    time_compile(JIT_CLANG, dir, src, syms, nsym);
  for (int r = 0; r < reps; r++)
    ms[r] = dir ? time_compile(JIT_CLANG, dir, src, syms, nsym) : -1;
  row.clang_cached = summarize(ms, reps);
  if (dir)
    rm_tree(dir);
  free(dir);
  return row;
}

/* ns per call of an already-loaded 4x4 SpMV kernel, -1 on failure. */
static double call_overhead_ns(JitBackend b, const char *dir, long calls) {
  size_t n = strlen(rt_header) + strlen(spmv_body) + 1;
  char *src = malloc(n);
  snprintf(src, n, "%s%s", rt_header, spmv_body);
  const char *sym = "galley_q0";
  void *fn = NULL;
  JitOptions opt = {.backend = b, .cache_dir = dir};
  JitModule *m = NULL;
  galley_status st = jit_compile(&opt, src, &sym, 1, &fn, &m, NULL);
  free(src);
  if (st != GALLEY_OK)
    return -1;
  galley_tensor *A = random_tensor(2, 4, 1), *x = random_tensor(1, 4, 2);
  galley_tensor *y = NULL;
  int64_t d4 = 4;
  galley_format fd = galley_format_dense(1);
  galley_tensor_from_coo(1, &d4, 0, NULL, NULL, 0.0, &fd, &y, NULL);
  const struct galley_tensor *in[2] = {A, x};
  int64_t dims[2] = {4, 4};
  galley_kernel_args args = {.in = in, .out = y, .dims = dims, .lo = 0,
                             .hi = 4};
  int (*k)(const galley_kernel_args *) = (int (*)(const galley_kernel_args *))fn;
  double t0 = now_ms();
  for (long c = 0; c < calls; c++)
    k(&args);
  double ns = (now_ms() - t0) * 1e6 / (double)calls;
  galley_tensor_free(A);
  galley_tensor_free(x);
  galley_tensor_free(y);
  jit_free(m);
  return ns;
}

static void print_row(const Row *r) {
  printf("%-10s %-9s %7zu %10.2f %12.2f %11.2f %13.3f\n", r->kernel,
         r->source, r->bytes, r->tcc.med, r->clang_empty.med,
         r->clang_miss.med, r->clang_cached.med);
}

static void csv_stat(const Row *r, const char *op, Stat s) {
  printf("galleyc,%s,%s,%zu,%d,%.3f,%.3f,%s\n", r->kernel, op, r->bytes, s.n,
         s.med, s.min, r->source);
}

int main(int argc, char **argv) {
  int reps = 7;
  long calls = 1000000;
  int opt;
  while ((opt = getopt(argc, argv, "r:c:")) != -1) {
    if (opt == 'r')
      reps = atoi(optarg);
    else if (opt == 'c')
      calls = atol(optarg);
    else {
      fprintf(stderr, "usage: bench_jit [-r REPS] [-c CALLS]\n");
      return 2;
    }
  }
  if (reps < 1 || reps > MAX_REPS || calls < 1) {
    fprintf(stderr, "bench_jit: bad -r or -c\n");
    return 2;
  }
  enum { NK = sizeof kernels / sizeof kernels[0] };
  Row rows[NK];
  printf("compile latency, median of %d runs (ms)\n", reps);
  printf("%-10s %-9s %7s %10s %12s %11s %13s\n", "kernel", "source", "bytes",
         "tcc", "clang_empty", "clang_miss", "clang_cached");
  for (int k = 0; k < NK; k++) {
    char *src = NULL, **syms = NULL;
    int nsym = 0;
    const char *how = "generated";
    if (!generated_source(&kernels[k], &src, &syms, &nsym)) {
      synthetic_source(&kernels[k], &src, &syms, &nsym);
      how = "synthetic";
    }
    rows[k] = measure(kernels[k].name, how, src, syms, nsym, reps);
    print_row(&rows[k]);
    fflush(stdout);
    for (int s = 0; s < nsym; s++)
      free(syms[s]);
    free(syms);
    free(src);
  }
  char *dir = temp_dir();
  double ov_tcc = call_overhead_ns(JIT_TCC, NULL, calls);
  double ov_clang = dir ? call_overhead_ns(JIT_CLANG, dir, calls) : -1;
  if (dir)
    rm_tree(dir);
  free(dir);
  printf("call of a loaded 4x4 SpMV kernel (ns/call, %ld calls): tcc %.1f, "
         "clang %.1f\n",
         calls, ov_tcc, ov_clang);
  printf("tool,kernel,op,source_bytes,reps,median_ms,min_ms,note\n");
  for (int k = 0; k < NK; k++) {
    csv_stat(&rows[k], "tcc", rows[k].tcc);
    csv_stat(&rows[k], "clang_empty", rows[k].clang_empty);
    csv_stat(&rows[k], "clang_miss", rows[k].clang_miss);
    csv_stat(&rows[k], "clang_cached", rows[k].clang_cached);
  }
  printf("galleyc,spmv4x4,call_tcc,0,%ld,%.6f,%.6f,ns_per_call=%.1f\n", calls,
         ov_tcc / 1e6, ov_tcc / 1e6, ov_tcc);
  printf("galleyc,spmv4x4,call_clang,0,%ld,%.6f,%.6f,ns_per_call=%.1f\n",
         calls, ov_clang / 1e6, ov_clang / 1e6, ov_clang);
  return 0;
}
