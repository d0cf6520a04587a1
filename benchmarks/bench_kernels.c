/*
 * bench_kernels.c -- galleyc's side of `benchmarks/run kernels`: what a
 * host program pays per call of galleyc's program API (galley.h) for the
 * kernels of benchmarks/kernels/ *.tin.  Built by `make benchmarks`;
 * driven by benchmarks/kernels.py, which runs it next to
 * baseline_graphblas (SuiteSparse:GraphBLAS) and SciPy in interleaved
 * rounds.  Two commands:
 *
 *   bench_kernels prep [-g] -o DIR NAME FILE
 *
 * reads FILE (.mtx, .tns, optionally .gz) with galley_tensor_read, the
 * reading every tool then shares, and writes its arrays (benchutil.h's
 * operand files): a matrix as DIR/NAME.A.bin (CSR), an order-3 tensor as
 * DIR/NAME.T.bin (COO).  With -g (a graph, for the triangle kernels) also
 * DIR/NAME.G.bin, the undirected graph of the matrix: the pattern of
 * A + A' without its diagonal (self-loops), every value 1; and
 * DIR/NAME.L.bin, its strictly lower triangle.  Prints one line
 * "ok name=NAME order=N dims=D0xD1[xD2] nnz=N [g_nnz=N l_nnz=N]".
 *
 *   bench_kernels serve [-d CACHE_ROOT]
 *
 * answers the commands of benchutil.h's protocol on stdin/stdout:
 *   load KEY FILE [POISON]          an operand file; CSR files are wrapped
 *                                   (galley_tensor_wrap_csr32 over 32-bit
 *                                   copies of the indices made at load, as
 *                                   SciPy keeps them; wrap_csr when they do
 *                                   not fit), COO files built with
 *                                   galley_tensor_from_coo; POISON
 *                                   (infN or infNnanM, kernels.py -x)
 *                                   sets N stored values to +inf and M
 *                                   to NaN first (poison_values); a
 *                                   final "s" also their mirrors (c, r)
 *   prep ID KEY BACKEND PROGRAM     job ID: the program PROGRAM (a .tin
 *                                   file) on KEY with BACKEND (default,
 *                                   tcc, clang; NAME@N: on N threads,
 *                                   galley_program_set_threads, else the
 *                                   library's default).  The first call is timed
 *                                   whole, as a host pays it: parse, set
 *                                   the backend, bind, first
 *                                   galley_program_run (planning,
 *                                   compiling, running).  The program's
 *                                   first input is KEY's tensor; the
 *                                   others, by name, are dense operands
 *                                   made before the clock starts: x (SpMV,
 *                                   length = KEY's columns), U and V
 *                                   (SDDMM, K = 32 columns, rows = KEY's
 *                                   rows / columns), C and D (MTTKRP, rank
 *                                   16, rows = KEY's modes 1 and 2), with
 *                                   benchutil.h's values.  Then it waits
 *                                   for the tiered JIT's clang code
 *                                   (galley_program_wait_compiled), so
 *                                   timed calls come after the swap.
 *                                   Reply: first_ms plan_ms compile_ms
 *                                   exec_ms backend queries swap_ms (the
 *                                   wait)
 *   run ID N                        N more calls of galley_program_run,
 *                                   each timed with a wall clock around
 *                                   the call (call_ms: the median), and
 *                                   the kernels alone: the sum of the
 *                                   seconds of every query of the run
 *                                   (galley_program_query_info;
 *                                   kernel_ms: the median), of which
 *                                   transpose_ms were transposes.  Then
 *                                   (not timed) the checksums of output 0
 *                                   (benchutil.h): sum, wsum, asum, count,
 *                                   and reused (1 when every call reused
 *                                   plan and kernels)
 *   free ID | quit
 *
 * BACKEND aot (aot@N: on N threads; plain aot: 0, one per online
 * processor, as the library's default) times the ahead-of-time output
 * instead, as a host program that links it pays per call: prep parses,
 * binds (the operands are the sample data), writes the C file of
 * galley_program_compile_aot_with (prefix bk), compiles it with
 * $BENCH_AOT_CC (default gcc; BACKEND aot-clang: clang, the JIT's
 * compiler) and the flags galleyc(1) advises,
 * -O3 -march=native -ffp-contract=off (plus -fPIC -shared, to dlopen it),
 * and makes the first call (plan_ms: compile_aot, compile_ms: the C
 * compiler); every timed call of run is bk_run_threads on the wrapped
 * tensors with the job's threads (a bk_threads_new handle made at prep,
 * as the library keeps its pool) and the default O(1) structural input check,
 * the values trusted after the first call (bk_TRUST_VALUES, as the JIT
 * scans a tensor's values once; BENCH_AOT_CHECK=1: checked every call),
 * preceded by
 * freeing the previous call's outputs (bk_free), as galley_program_run
 * frees its previous results.  kernel_ms is the whole call (the AOT
 * output reports no per-query seconds).
 *
 * The clang backend (and the default one when it picks clang) compiles
 * into a cache directory of the job's own, made under CACHE_ROOT (default
 * $TMPDIR or /tmp) and removed with the job, so that every first call
 * includes a cold compile.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw, getopt */
#include <dlfcn.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "benchutil.h"
#include "galley.h"

#define MAX_SLOTS 16
#define MAX_JOBS 64
#define MAX_OPERANDS 8
#define MAX_OUTPUTS 16

/* ------------------------------------------------------------------ */
/* prep: one reading of the file, the arrays every tool gets           */
/* ------------------------------------------------------------------ */

static int fail(const char *what, const char *msg) {
  fprintf(stderr, "bench_kernels: %s: %s\n", what, msg);
  return 1;
}

/* CSR arrays of sorted, unique COO entries (coords entry after entry). */
static int csr_from_sorted_coo(int64_t nrows, int64_t ncols, int64_t nnz,
                               const int64_t *coords, const double *vals,
                               BenchCsr *m) {
  if (bench_csr_alloc(m, nrows, ncols, nnz))
    return -1;
  memset(m->ptr, 0, (size_t)(nrows + 1) * sizeof *m->ptr);
  for (int64_t e = 0; e < nnz; e++) {
    m->ptr[coords[2 * e] + 1]++;
    m->idx[e] = coords[2 * e + 1];
    m->val[e] = vals ? vals[e] : 1.0;
  }
  for (int64_t r = 0; r < nrows; r++)
    m->ptr[r + 1] += m->ptr[r];
  return 0;
}

static int write_csr(const char *dir, const char *name, const char *variant,
                     const BenchCsr *m) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%s.bin", dir, name, variant);
  if (bench_csr_write(path, m))
    return fail(path, "cannot write");
  return 0;
}

/* The undirected graph of a: the pattern of a + a' without the diagonal
 * (libgalley sorts and merges the duplicates); then its strict lower
 * triangle. */
static int write_graph(const char *dir, const char *name, const BenchCsr *a,
                       int64_t *g_nnz, int64_t *l_nnz) {
  if (a->nrows != a->ncols)
    return fail(name, "a graph needs a square matrix");
  int64_t *both = malloc((size_t)(4 * a->nnz + 2) * sizeof *both), n = 0;
  if (!both)
    return fail(name, "out of memory");
  for (int64_t i = 0; i < a->nrows; i++)
    for (int64_t q = a->ptr[i]; q < a->ptr[i + 1]; q++)
      if (a->idx[q] != i) {
        both[2 * n] = i, both[2 * n + 1] = a->idx[q], n++;
        both[2 * n] = a->idx[q], both[2 * n + 1] = i, n++;
      }
  galley_tensor *g = NULL;
  galley_error err;
  int64_t dims[2] = {a->nrows, a->ncols}, cnt = 0, *coords = NULL;
  double *vals = NULL;
  int bad = galley_tensor_from_coo(2, dims, n, both, NULL, 0, NULL, &g,
                                   &err) != GALLEY_OK ||
            galley_tensor_to_coo(g, 0, &cnt, &coords, &vals, &err) !=
                GALLEY_OK;
  free(both);
  galley_tensor_free(g);
  if (bad) {
    free(coords);
    free(vals);
    return fail(name, err.msg);
  }
  BenchCsr gm, lm;
  bad = csr_from_sorted_coo(a->nrows, a->ncols, cnt, coords, NULL, &gm);
  /* the lower triangle: the entries with i > j, already in order */
  int64_t nl = 0;
  for (int64_t e = 0; e < cnt; e++)
    if (coords[2 * e] > coords[2 * e + 1]) {
      coords[2 * nl] = coords[2 * e];
      coords[2 * nl + 1] = coords[2 * e + 1];
      nl++;
    }
  bad = bad || csr_from_sorted_coo(a->nrows, a->ncols, nl, coords, NULL, &lm);
  free(coords);
  free(vals);
  if (bad)
    return fail(name, "out of memory");
  bad = write_csr(dir, name, "G", &gm) || write_csr(dir, name, "L", &lm);
  *g_nnz = gm.nnz;
  *l_nnz = lm.nnz;
  bench_csr_free(&gm);
  bench_csr_free(&lm);
  return bad;
}

static int prep(int argc, char **argv) {
  const char *dir = NULL;
  int graph = 0, c;
  while ((c = getopt(argc, argv, "go:")) != -1)
    switch (c) {
    case 'g': graph = 1; break;
    case 'o': dir = optarg; break;
    default: return 2;
    }
  if (!dir || argc - optind != 2)
    return 2;
  const char *name = argv[optind], *file = argv[optind + 1];
  galley_tensor *t = NULL;
  galley_error err;
  if (galley_tensor_read(file, GALLEY_FILE_AUTO, NULL, &t, &err) != GALLEY_OK)
    return fail(file, err.msg);
  int order = galley_tensor_order(t);
  int64_t cnt = 0, *coords = NULL;
  double *vals = NULL;
  if (galley_tensor_to_coo(t, 0, &cnt, &coords, &vals, &err) != GALLEY_OK) {
    galley_tensor_free(t);
    return fail(file, err.msg);
  }
  int status = 0;
  char path[4096];
  if (order == 2) {
    BenchCsr a;
    if (csr_from_sorted_coo(galley_tensor_dim(t, 0), galley_tensor_dim(t, 1),
                            cnt, coords, vals, &a)) {
      status = fail(file, "out of memory");
    } else {
      int64_t g_nnz = 0, l_nnz = 0;
      status = write_csr(dir, name, "A", &a) ||
               (graph && write_graph(dir, name, &a, &g_nnz, &l_nnz));
      if (!status) {
        printf("ok name=%s order=2 dims=%lldx%lld nnz=%lld", name,
               (long long)a.nrows, (long long)a.ncols, (long long)a.nnz);
        if (graph)
          printf(" g_nnz=%lld l_nnz=%lld", (long long)g_nnz,
                 (long long)l_nnz);
        printf("\n");
      }
      bench_csr_free(&a);
    }
  } else if (order == 3) {
    BenchCoo b = {.order = 3, .nnz = cnt, .coords = coords, .val = vals};
    for (int m = 0; m < 3; m++)
      b.dims[m] = galley_tensor_dim(t, m);
    snprintf(path, sizeof path, "%s/%s.T.bin", dir, name);
    if (bench_coo_write(path, &b))
      status = fail(path, "cannot write");
    else
      printf("ok name=%s order=3 dims=%lldx%lldx%lld nnz=%lld\n", name,
             (long long)b.dims[0], (long long)b.dims[1], (long long)b.dims[2],
             (long long)cnt);
  } else {
    status = fail(file, "only matrices and order-3 tensors are benchmarked");
  }
  free(coords);
  free(vals);
  galley_tensor_free(t);
  return status;
}

/* ------------------------------------------------------------------ */
/* serve: the timed calls                                              */
/* ------------------------------------------------------------------ */

typedef struct Slot {
  char key[128];
  galley_tensor *t;
  BenchCsr csr; /* the arrays read (CSR files) */
  int32_t *ptr32, *idx32; /* their 32-bit copies, wrapped (as SciPy keeps
                             them), when the matrix fits */
} Slot;

/* 32-bit copies of a CSR's index arrays (made once, before timing), or
 * -1 when it does not fit 32-bit indices or memory runs out. */
static int csr_to_32(const BenchCsr *m, int32_t **ptr, int32_t **idx) {
  if (m->nnz >= INT32_MAX || m->ncols >= INT32_MAX)
    return -1;
  *ptr = malloc((size_t)(m->nrows + 1) * sizeof **ptr);
  *idx = malloc((size_t)(m->nnz > 0 ? m->nnz : 1) * sizeof **idx);
  if (!*ptr || !*idx) {
    free(*ptr);
    free(*idx);
    *ptr = *idx = NULL;
    return -1;
  }
  for (int64_t r = 0; r <= m->nrows; r++)
    (*ptr)[r] = (int32_t)m->ptr[r];
  for (int64_t e = 0; e < m->nnz; e++)
    (*idx)[e] = (int32_t)m->idx[e];
  return 0;
}

typedef struct Job {
  int used;
  char id[64];
  galley_program *p;
  galley_tensor *ops[MAX_OPERANDS];
  int nops;
  char cache[4096]; /* its own clang cache: a cold first call */
  /* the aot backend: the compiled output, dlopen()ed */
  int aot, threads;
  const char *aot_cc; /* the C compiler, NULL: $BENCH_AOT_CC or gcc */
  unsigned aot_flags; /* bk_run_ex's flags */
  void *dl;
  void *(*threads_new)(int);
  void (*threads_free)(void *);
  int (*run_threads)(void *, const galley_tensor *const *, galley_tensor **,
                     unsigned, char *, size_t);
  void (*free_out)(galley_tensor *);
  void *pool; /* bk_threads_new(threads): kept for the job's calls */
  const galley_tensor *in[MAX_OPERANDS + 1];
  galley_tensor *out[MAX_OUTPUTS];
} Job;

typedef struct Server {
  Slot slots[MAX_SLOTS];
  Job jobs[MAX_JOBS];
  const char *cache_root;
} Server;

static Slot *find_slot(Server *s, const char *key) {
  for (int k = 0; k < MAX_SLOTS; k++)
    if (s->slots[k].t && !strcmp(s->slots[k].key, key))
      return &s->slots[k];
  return NULL;
}

static Job *find_job(Server *s, const char *id) {
  for (int k = 0; k < MAX_JOBS; k++)
    if (s->jobs[k].used && !strcmp(s->jobs[k].id, id))
      return &s->jobs[k];
  return NULL;
}

/* The exceptions of `load`'s POISON (kernels.py -x): "infN" sets N
 * stored values to +inf, "infNnanM" also M to NaN, at entries spread
 * evenly over the storage order (entry (2k+1)*nnz/(2n) of n), so that
 * every rerun poisons the same entries.  0, or -1 for a bad spec. */
static int poison_values(double *val, int64_t nnz, const char *spec) {
  int ninf = 0, nnan = 0, used = 0;
  if (sscanf(spec, "inf%d%n", &ninf, &used) != 1)
    return -1;
  if (spec[used] && sscanf(spec + used, "nan%d", &nnan) != 1)
    return -1;
  int n = ninf + nnan;
  if (ninf < 0 || nnan < 0 || n > nnz)
    return -1;
  for (int k = 0; k < n; k++)
    val[(2 * (int64_t)k + 1) * nnz / (2 * n)] = k < ninf ? INFINITY : NAN;
  return 0;
}

/* poison_values on a CSR matrix; a spec ending in "s" (an undirected
 * graph: kernels.py asks it for G) also poisons each entry's mirror
 * (c, r), so that a symmetric matrix stays symmetric. */
static int poison_csr(BenchCsr *m, const char *spec) {
  size_t len = strlen(spec);
  int mirror = len > 0 && spec[len - 1] == 's';
  char plain[64];
  snprintf(plain, sizeof plain, "%.*s", (int)(len - (size_t)mirror), spec);
  int64_t nnz = m->ptr[m->nrows];
  if (poison_values(m->val, nnz, plain))
    return -1;
  for (int64_t r = 0; mirror && r < m->nrows; r++)
    for (int64_t p = m->ptr[r]; p < m->ptr[r + 1]; p++) {
      int64_t c = m->idx[p];
      if (isfinite(m->val[p]) || c >= m->nrows)
        continue;
      for (int64_t q = m->ptr[c]; q < m->ptr[c + 1]; q++)
        if (m->idx[q] == r)
          m->val[q] = m->val[p];
    }
  return 0;
}

static void cmd_load(Server *s, const char *key, const char *file,
                     const char *poison) {
  Slot *slot = find_slot(s, key);
  for (int k = 0; !slot && k < MAX_SLOTS; k++)
    if (!s->slots[k].t)
      slot = &s->slots[k];
  if (!slot || slot->t) {
    bench_reply_error(slot ? "key already loaded" : "too many keys");
    return;
  }
  char magic[9], msg[1200];
  galley_error err;
  bench_file_magic(file, magic);
  galley_status st;
  if (!strcmp(magic, BENCH_CSR_MAGIC)) {
    if (bench_csr_read(file, &slot->csr)) {
      bench_reply_error("cannot read the CSR file");
      return;
    }
    if (poison && poison_csr(&slot->csr, poison)) {
      bench_csr_free(&slot->csr);
      bench_reply_error("bad POISON (infN or infNnanM, at most nnz)");
      return;
    }
    if (csr_to_32(&slot->csr, &slot->ptr32, &slot->idx32) == 0)
      st = galley_tensor_wrap_csr32(slot->csr.nrows, slot->csr.ncols,
                                    slot->ptr32, slot->idx32, slot->csr.val,
                                    0, &slot->t, &err);
    else
      st = galley_tensor_wrap_csr(slot->csr.nrows, slot->csr.ncols,
                                  slot->csr.ptr, slot->csr.idx, slot->csr.val,
                                  0, &slot->t, &err);
  } else if (!strcmp(magic, BENCH_COO_MAGIC)) {
    BenchCoo b;
    if (bench_coo_read(file, &b)) {
      bench_reply_error("cannot read the COO file");
      return;
    }
    if (poison && poison_values(b.val, b.nnz, poison)) {
      bench_coo_free(&b);
      bench_reply_error("bad POISON (infN or infNnanM, at most nnz)");
      return;
    }
    st = galley_tensor_from_coo((int)b.order, b.dims, b.nnz, b.coords, b.val,
                                0, NULL, &slot->t, &err);
    bench_coo_free(&b);
  } else {
    bench_reply_error("not an operand file");
    return;
  }
  if (st != GALLEY_OK) {
    snprintf(msg, sizeof msg, "%s: %s", file, err.msg);
    bench_reply_error(msg);
    bench_csr_free(&slot->csr);
    free(slot->ptr32);
    free(slot->idx32);
    slot->ptr32 = slot->idx32 = NULL;
    slot->t = NULL;
    return;
  }
  snprintf(slot->key, sizeof slot->key, "%s", key);
  printf("ok stored=%lld\n", (long long)galley_tensor_stored(slot->t));
  fflush(stdout);
}

static galley_tensor *dense_tensor(int order, int64_t *dims, double *v) {
  galley_format f = galley_format_dense(order);
  galley_tensor *t = NULL;
  if (v)
    galley_tensor_from_dense(order, dims, v, 0, &f, &t, NULL);
  free(v);
  return t;
}

/* The dense operand an input called name stands for, made from the main
 * tensor's dims (NULL for an unknown name). */
static galley_tensor *operand(const char *name, const galley_tensor *main) {
  int order = galley_tensor_order(main);
  int64_t d1 = order > 1 ? galley_tensor_dim(main, 1) : 0;
  if (!strcmp(name, "x") && order == 2) {
    double *v = malloc((size_t)(d1 + 1) * sizeof *v);
    for (int64_t j = 0; v && j < d1; j++)
      v[j] = bench_x_value(j);
    return dense_tensor(1, &d1, v);
  }
  int64_t rows = -1, cols = 0, a = 0, b = 0;
  if (!strcmp(name, "U") && order == 2)
    rows = galley_tensor_dim(main, 0), cols = BENCH_K, a = 31, b = 17;
  else if (!strcmp(name, "V") && order == 2)
    rows = d1, cols = BENCH_K, a = 7, b = 5;
  else if (!strcmp(name, "C") && order == 3)
    rows = d1, cols = BENCH_RANK, a = 7, b = 5;
  else if (!strcmp(name, "D") && order == 3)
    rows = galley_tensor_dim(main, 2), cols = BENCH_RANK, a = 3, b = 11;
  if (rows < 0)
    return NULL;
  int64_t dims[2] = {rows, cols};
  return dense_tensor(2, dims, bench_factor(rows, cols, a, b));
}

static char *read_text(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb)
        free(buf);
      buf = nb;
    }
  }
  fclose(f);
  *len = n;
  return buf;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

/* Free the aot job's outputs of its last call. */
static void free_aot_outputs(Job *j) {
  for (int k = 0; k < MAX_OUTPUTS; k++) {
    if (j->out[k] && j->free_out)
      j->free_out(j->out[k]);
    j->out[k] = NULL;
  }
}

static void free_job(Job *j) {
  free_aot_outputs(j);
  if (j->pool)
    j->threads_free(j->pool);
  if (j->dl)
    dlclose(j->dl);
  galley_program_free(j->p);
  for (int k = 0; k < j->nops; k++)
    galley_tensor_free(j->ops[k]);
  if (j->cache[0])
    nftw(j->cache, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  memset(j, 0, sizeof *j);
}

/* A new empty cache directory for the job (NULL when none can be made:
 * the program then uses the default cache). */
static const char *cache_dir(Server *s, Job *j) {
  snprintf(j->cache, sizeof j->cache, "%s/galley-bench-cache.XXXXXX",
           s->cache_root);
  if (!mkdtemp(j->cache))
    j->cache[0] = '\0';
  return j->cache[0] ? j->cache : NULL;
}

/* Parse, set the backend and threads (0: the default), bind: everything
 * before the first run. */
static galley_status setup_program(Server *s, Job *j, const char *path,
                                   const char *text, size_t len,
                                   galley_backend backend, int threads,
                                   const galley_tensor *main,
                                   galley_error *err) {
  galley_status st =
      galley_program_parse(path, text, len, &j->p, NULL, err);
  if (st == GALLEY_OK)
    st = galley_program_set_backend(j->p, backend, err);
  if (st == GALLEY_OK)
    st = galley_program_set_threads(j->p, threads, err);
  /* every call computes every query, as the baselines do: the triangle
   * program's intermediates depend on E alone, and a kept result would
   * time a lookup, not a kernel */
  if (st == GALLEY_OK)
    galley_program_set_keep_invariants(j->p, 0);
  if (st == GALLEY_OK && backend != GALLEY_BACKEND_TCC)
    st = galley_program_set_cache_dir(j->p, j->cache[0] ? j->cache : NULL,
                                      err);
  for (int k = 0; st == GALLEY_OK && k < galley_program_num_inputs(j->p);
       k++) {
    const char *name = galley_program_input_name(j->p, k);
    const galley_tensor *t = k == 0 ? main : NULL;
    for (int o = 0; !t && o < j->nops; o++)
      if (!strcmp(galley_program_input_name(j->p, o + 1), name))
        t = j->ops[o];
    if (!t) {
      snprintf(err->msg, sizeof err->msg, "%s: no operand for input %s",
               path, name);
      return GALLEY_EBIND;
    }
    st = galley_program_bind(j->p, name, t, err);
  }
  return st;
}

/* The names of a program's inputs after the first, without binding:
 * the operands are made before the clock starts. */
static int make_operands(Job *j, const char *path, const char *text,
                         size_t len, const galley_tensor *main,
                         char *msg, size_t size) {
  galley_program *p = NULL;
  galley_error err;
  if (galley_program_parse(path, text, len, &p, NULL, &err) != GALLEY_OK) {
    snprintf(msg, size, "%s", err.msg);
    return -1;
  }
  int n = galley_program_num_inputs(p), bad = 0;
  for (int k = 1; k < n && k <= MAX_OPERANDS && !bad; k++) {
    const char *name = galley_program_input_name(p, k);
    j->ops[j->nops] = operand(name, main);
    if (!j->ops[j->nops]) {
      snprintf(msg, size, "%s: no operand for input %s (x, U, V, C, D)",
               path, name);
      bad = 1;
    } else {
      j->nops++;
    }
  }
  galley_program_free(p);
  return bad ? -1 : 0;
}

/* Write text to path; 0, or -1. */
static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return -1;
  int bad = fputs(text, f) < 0;
  return fclose(f) != 0 || bad ? -1 : 0;
}

/* The aot job's C file compiled into DIR/bk.so and loaded; 0, or -1
 * with msg set. */
static int build_aot(Job *j, const char *source, char *msg, size_t size) {
  char c_path[4200], so_path[4200], cmd[9000];
  snprintf(c_path, sizeof c_path, "%s/bk.c", j->cache);
  snprintf(so_path, sizeof so_path, "%s/bk.so", j->cache);
  if (write_text(c_path, source) != 0) {
    snprintf(msg, size, "%.300s: cannot write", c_path);
    return -1;
  }
  const char *cc = j->aot_cc ? j->aot_cc : getenv("BENCH_AOT_CC");
  snprintf(cmd, sizeof cmd,
           "%s -O3 -march=native -ffp-contract=off -fPIC -shared -o '%s' "
           "'%s' -lm -lpthread",
           cc && *cc ? cc : "gcc", so_path, c_path);
  if (system(cmd) != 0) {
    snprintf(msg, size, "the C compiler failed: %.200s", cmd);
    return -1;
  }
  j->dl = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  if (!j->dl) {
    snprintf(msg, size, "dlopen: %s", dlerror());
    return -1;
  }
  *(void **)&j->threads_new = dlsym(j->dl, "bk_threads_new");
  *(void **)&j->threads_free = dlsym(j->dl, "bk_threads_free");
  *(void **)&j->run_threads = dlsym(j->dl, "bk_run_threads");
  *(void **)&j->free_out = dlsym(j->dl, "bk_free");
  if (!j->threads_new || !j->threads_free || !j->run_threads ||
      !j->free_out) {
    snprintf(msg, size, "an entry point is missing");
    return -1;
  }
  if (!(j->pool = j->threads_new(j->threads))) {
    snprintf(msg, size, "bk_threads_new failed");
    return -1;
  }
  return 0;
}

/* One call of the aot job (its previous outputs freed first). */
static int call_aot(Job *j, char *msg, size_t size) {
  free_aot_outputs(j);
  return j->run_threads(j->pool, j->in, j->out, j->aot_flags, msg, size);
}

/* prep for the aot backend: parse, bind, compile ahead of time, build
 * with the C compiler, load, first call (all timed, as first_ms). */
static void prep_aot(Server *s, const char *id, Slot *slot, Job *j,
                     int threads, const char *path) {
  char msg[1400];
  size_t len = 0;
  char *text = read_text(path, &len), *src = NULL, *hdr = NULL;
  if (!text) {
    snprintf(msg, sizeof msg, "%s: cannot read", path);
    bench_reply_error(msg);
    return;
  }
  j->used = 1;
  j->aot = 1;
  j->threads = threads;
  /* the values were checked by the first call: later calls trust them,
   * as the JIT keeps what it found (bk_TRUST_VALUES); BENCH_AOT_CHECK=1
   * checks them every call */
  const char *check = getenv("BENCH_AOT_CHECK");
  j->aot_flags = check && *check == '1' ? 0 : 2u;
  snprintf(j->id, sizeof j->id, "%s", id);
  if (make_operands(j, path, text, len, slot->t, msg, sizeof msg) ||
      !cache_dir(s, j)) {
    if (!j->cache[0])
      snprintf(msg, sizeof msg, "cannot make a scratch directory");
    free_job(j);
    free(text);
    bench_reply_error(msg);
    return;
  }
  galley_error err;
  double t0 = now_ms();
  galley_status st = setup_program(s, j, path, text, len,
                                   GALLEY_BACKEND_DEFAULT, 0, slot->t, &err);
  galley_aot_options opt = {.prefix = "bk"};
  if (st == GALLEY_OK)
    st = galley_program_compile_aot_with(j->p, &opt, &src, &hdr, &err);
  double t1 = now_ms();
  free(text);
  int bad = st != GALLEY_OK;
  if (bad)
    snprintf(msg, sizeof msg, "compile_aot: %s", err.msg);
  bad = bad || build_aot(j, src, msg, sizeof msg);
  free(src);
  free(hdr);
  double t2 = now_ms();
  j->in[0] = slot->t;
  for (int k = 0; k < j->nops; k++)
    j->in[k + 1] = j->ops[k];
  char rmsg[512];
  unsigned flags = j->aot_flags;
  j->aot_flags = 0; /* the first call checks everything */
  int rc = bad ? 0 : call_aot(j, rmsg, sizeof rmsg);
  j->aot_flags = flags;
  double t3 = now_ms();
  if (!bad && rc != 0)
    snprintf(msg, sizeof msg, "first call: %d %s", rc, rmsg);
  if (bad || rc != 0) {
    free_job(j);
    bench_reply_error(msg);
    return;
  }
  printf("ok first_ms=%.4f plan_ms=%.4f compile_ms=%.4f exec_ms=%.4f "
         "backend=aot queries=0 swap_ms=0\n",
         t3 - t0, t1 - t0, t2 - t1, t3 - t2);
  fflush(stdout);
}

static void cmd_prep(Server *s, const char *id, const char *key,
                     const char *backend_name, const char *path) {
  Slot *slot = find_slot(s, key);
  Job *j = NULL;
  for (int k = 0; !j && k < MAX_JOBS; k++)
    if (!s->jobs[k].used)
      j = &s->jobs[k];
  galley_backend backend;
  galley_error err;
  char msg[1400], bname[64];
  size_t len = 0;
  char *text = NULL;
  int threads = 0;
  if (!slot || !j || find_job(s, id)) {
    bench_reply_error(!slot ? "unknown key" : !j ? "too many jobs"
                                                 : "job exists");
    return;
  }
  /* NAME@N: the backend on N threads */
  snprintf(bname, sizeof bname, "%s", backend_name);
  char *at = strchr(bname, '@');
  if (at) {
    *at = '\0';
    threads = atoi(at + 1);
    if (threads < 1) {
      bench_reply_error("bad thread count after @");
      return;
    }
  }
  backend_name = bname;
  if (!strcmp(backend_name, "aot") || !strcmp(backend_name, "aot-clang")) {
    j->aot_cc = strcmp(backend_name, "aot") ? "clang" : NULL;
    prep_aot(s, id, slot, j, threads, path);
    return;
  }
  if (galley_backend_parse(backend_name, &backend, &err) != GALLEY_OK) {
    bench_reply_error(err.msg);
    return;
  }
  if (!(text = read_text(path, &len))) {
    snprintf(msg, sizeof msg, "%s: cannot read", path);
    bench_reply_error(msg);
    return;
  }
  j->used = 1;
  snprintf(j->id, sizeof j->id, "%s", id);
  if (make_operands(j, path, text, len, slot->t, msg, sizeof msg)) {
    free_job(j);
    free(text);
    bench_reply_error(msg);
    return;
  }
  if (backend != GALLEY_BACKEND_TCC)
    cache_dir(s, j);
  double t0 = now_ms();
  galley_status st =
      setup_program(s, j, path, text, len, backend, threads, slot->t, &err);
  if (st == GALLEY_OK)
    st = galley_program_run(j->p, &err);
  double first = now_ms() - t0;
  free(text);
  if (st != GALLEY_OK) {
    snprintf(msg, sizeof msg, "first call: %s", err.msg);
    free_job(j);
    bench_reply_error(msg);
    return;
  }
  galley_run_info ri;
  galley_program_run_info(j->p, &ri);
  /* the timed calls are those after the tiered JIT's swap to clang code
   * (issue 11: "after the first run"): wait for it here, so that the
   * warm call that sizes the batches is not a tcc call */
  double w0 = now_ms();
  galley_program_wait_compiled(j->p, &err);
  double swap = now_ms() - w0;
  printf("ok first_ms=%.4f plan_ms=%.4f compile_ms=%.4f exec_ms=%.4f "
         "backend=%s queries=%d swap_ms=%.4f\n",
         first, ri.plan_seconds * 1e3, ri.compile_seconds * 1e3,
         ri.exec_seconds * 1e3, galley_backend_name(ri.backend), ri.nqueries,
         swap);
  fflush(stdout);
}

/* Milliseconds of the last run's queries: all, and the transposes. */
static void query_ms(const galley_program *p, double *all, double *transp) {
  galley_run_info ri;
  galley_program_run_info(p, &ri);
  *all = *transp = 0;
  for (int q = 0; q < ri.nqueries; q++) {
    galley_query_info qi;
    if (galley_program_query_info(p, q, &qi, NULL) != GALLEY_OK ||
        qi.seconds < 0)
      continue;
    *all += qi.seconds * 1e3;
    if (qi.transpose)
      *transp += qi.seconds * 1e3;
  }
}

typedef struct SumState {
  BenchSums sums;
  int order;
  int64_t ncols;
} SumState;

static int add_entry(void *ud, const int64_t *coord, double value) {
  SumState *s = ud;
  if (s->order == 1)
    bench_sums_add(&s->sums, 0, coord[0], 0, value);
  else
    bench_sums_add(&s->sums, coord[0], coord[1], s->ncols, value);
  return 0;
}

static void cmd_run(Server *s, const char *id, int n) {
  Job *j = find_job(s, id);
  if (!j || n < 1 || n > 100000) {
    bench_reply_error(!j ? "unknown job" : "bad call count");
    return;
  }
  double *call = malloc((size_t)n * sizeof *call);
  double *kern = malloc((size_t)n * sizeof *kern);
  double *transp = malloc((size_t)n * sizeof *transp);
  if (!call || !kern || !transp) {
    free(call), free(kern), free(transp);
    bench_reply_error("out of memory");
    return;
  }
  galley_error err;
  int reused = 1;
  for (int r = 0; j->aot && r < n; r++) {
    char msg[512];
    double t0 = now_ms();
    int rc = call_aot(j, msg, sizeof msg);
    call[r] = kern[r] = now_ms() - t0;
    transp[r] = 0;
    if (rc != 0) {
      free(call), free(kern), free(transp);
      bench_reply_error(msg);
      return;
    }
  }
  for (int r = 0; !j->aot && r < n; r++) {
    double t0 = now_ms();
    galley_status st = galley_program_run(j->p, &err);
    call[r] = now_ms() - t0;
    if (st != GALLEY_OK) {
      free(call), free(kern), free(transp);
      bench_reply_error(err.msg);
      return;
    }
    galley_run_info ri;
    galley_program_run_info(j->p, &ri);
    reused &= ri.reused;
    query_ms(j->p, &kern[r], &transp[r]);
  }
  double call_min = call[0];
  for (int r = 1; r < n; r++)
    call_min = call[r] < call_min ? call[r] : call_min;
  const galley_tensor *out = j->aot ? j->out[0] : galley_program_output(j->p, 0);
  SumState ss = {{0, 0, 0, 0}, galley_tensor_order(out), 0};
  if (ss.order == 0) {
    double v = galley_tensor_get(out, NULL, NULL);
    bench_sums_add(&ss.sums, 0, 0, 0, v);
  } else if (ss.order <= 2) {
    ss.ncols = ss.order == 2 ? galley_tensor_dim(out, 1) : 0;
    galley_tensor_foreach(out, add_entry, &ss);
  }
  galley_run_info ri;
  galley_program_run_info(j->p, &ri);
  const char *bname = !j->aot   ? galley_backend_name(ri.backend)
                      : j->aot_cc ? "aot-clang"
                                  : "aot";
  printf("ok calls=%d call_ms=%.5f call_min_ms=%.5f kernel_ms=%.5f "
         "transpose_ms=%.5f reused=%d backend=%s sum=%.17g wsum=%.17g "
         "asum=%.17g count=%lld fill=%g\n",
         n, median_of(call, n), call_min, median_of(kern, n),
         median_of(transp, n), reused, bname,
         ss.sums.sum, ss.sums.wsum, ss.sums.asum, (long long)ss.sums.count,
         galley_tensor_fill(out));
  fflush(stdout);
  free(call), free(kern), free(transp);
}

static int serve(int argc, char **argv) {
  static Server s; /* large: not on the stack */
  const char *tmp = getenv("TMPDIR");
  s.cache_root = tmp && *tmp ? tmp : "/tmp";
  int c;
  while ((c = getopt(argc, argv, "d:")) != -1)
    switch (c) {
    case 'd': s.cache_root = optarg; break;
    default: return 2;
    }
  char line[8192], *av[BENCH_MAX_ARGS];
  while (fgets(line, sizeof line, stdin)) {
    int ac = bench_split(line, av, BENCH_MAX_ARGS);
    if (ac == 0)
      continue;
    if (!strcmp(av[0], "quit"))
      break;
    if (!strcmp(av[0], "load") && (ac == 3 || ac == 4)) {
      cmd_load(&s, av[1], av[2], ac == 4 ? av[3] : NULL);
    } else if (!strcmp(av[0], "prep") && ac == 5) {
      cmd_prep(&s, av[1], av[2], av[3], av[4]);
    } else if (!strcmp(av[0], "run") && ac == 3) {
      cmd_run(&s, av[1], atoi(av[2]));
    } else if (!strcmp(av[0], "free") && ac == 2) {
      Job *j = find_job(&s, av[1]);
      if (j)
        free_job(j);
      printf(j ? "ok\n" : "error unknown job\n");
      fflush(stdout);
    } else {
      bench_reply_error("unknown command (load, prep, run, free, quit)");
    }
  }
  for (int k = 0; k < MAX_JOBS; k++)
    if (s.jobs[k].used)
      free_job(&s.jobs[k]);
  for (int k = 0; k < MAX_SLOTS; k++) {
    galley_tensor_free(s.slots[k].t);
    bench_csr_free(&s.slots[k].csr);
    free(s.slots[k].ptr32);
    free(s.slots[k].idx32);
  }
  return 0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_kernels prep [-g] -o DIR NAME FILE\n"
             "       bench_kernels serve [-d CACHE_ROOT]\n"
             "(driven by benchmarks/kernels.py: benchmarks/run kernels -h)\n");
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "prep")) {
    int st = prep(argc - 1, argv + 1);
    if (st == 2)
      usage(stderr);
    return st;
  }
  if (argc >= 2 && !strcmp(argv[1], "serve")) {
    int st = serve(argc - 1, argv + 1);
    if (st == 2)
      usage(stderr);
    return st;
  }
  int help = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
  usage(help ? stdout : stderr);
  return help ? 0 : 2;
}
