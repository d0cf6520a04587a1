/*
 * test_threads.c -- multithreaded runs: results bitwise identical for
 * every thread count, and equal (within rounding) to the reference
 * evaluator.
 *
 * Random programs (tests/randprog.h) run with tiny blocks (a few units of
 * work each, so that their small data splits into many blocks) on 1, 2,
 * 3, 4 and 7 threads: every output must be bitwise the one thread's, and
 * the one thread's must match the reference evaluator as in test_diff.
 * Fixed kernels (SpMV, SpGEMM, reductions to a scalar and over the outer
 * index, sparse outputs) run on data large enough for the default block
 * size.  Programs of one context share its pool, also from two threads
 * at once.
 *
 * Environment: GALLEY_THREADS_CASES (random programs, default 300, and
 * as many join programs: triangles and inner products),
 * GALLEY_DIFF_SEED (base seed, shared with test_diff).
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "galley.h"
#include "api_internal.h" /* api_program_set_block_work */
#include "pool.h"
#include "io_reader.h"
#include "rt_internal.h"
#include "testutil.h"

#include "randprog.h"

static long env_long(const char *name, long dflt) {
  const char *s = getenv(name);
  return s && *s ? strtol(s, NULL, 10) : dflt;
}

static const int THREADS[] = {1, 2, 3, 4, 7};
#define NTHREADS ((int)(sizeof THREADS / sizeof THREADS[0]))

/* ------------------------------------------------------------------ */
/* Results                                                             */
/* ------------------------------------------------------------------ */

/* An output as dense values (row-major) when it has at most DENSE_MAX
 * points, else as its stored entries (COO), with its stored count. */
#define DENSE_MAX ((int64_t)1 << 20)
typedef struct Snap {
  int order;
  int64_t dims[GALLEY_MAX_ORDER];
  int64_t count, stored;
  double fill;
  double *dense;
  int64_t nnz, *coords; /* the COO form (dense NULL) */
  double *vals;
} Snap;

static void snap_take(Snap *s, const galley_tensor *t) {
  memset(s, 0, sizeof *s);
  galley_error err;
  s->order = galley_tensor_order(t);
  s->count = 1;
  for (int m = 0; m < s->order; m++) {
    s->dims[m] = galley_tensor_dim(t, m);
    s->count *= s->dims[m];
  }
  s->fill = galley_tensor_fill(t);
  s->stored = galley_tensor_stored(t);
  if (s->count > DENSE_MAX) {
    ck_assert_int_eq(galley_tensor_to_coo(t, 0, &s->nnz, &s->coords,
                                          &s->vals, &err), GALLEY_OK);
    return;
  }
  s->dense = malloc((size_t)(s->count > 0 ? s->count : 1) * sizeof *s->dense);
  ck_assert_ptr_nonnull(s->dense);
  ck_assert_int_eq(galley_tensor_to_dense(t, s->dense, s->count, &err),
                   GALLEY_OK);
}

static void snap_free(Snap *s) {
  free(s->dense);
  free(s->coords);
  free(s->vals);
  memset(s, 0, sizeof *s);
}

/* Why got differs from ref, or NULL.  bitwise: every bit of every value
 * and the stored count; else within test_diff's tolerance. */
static char *snap_diff(const Snap *ref, const Snap *got, int bitwise) {
  if (ref->order != got->order || ref->count != got->count)
    return fmt("shape differs");
  if (!same_value(ref->fill, got->fill))
    return fmt("fill %.17g, expected %.17g", got->fill, ref->fill);
  if (bitwise && ref->stored != got->stored)
    return fmt("%lld stored entries, expected %lld", (long long)got->stored,
               (long long)ref->stored);
  if (!ref->dense || !got->dense) { /* large: the stored entries, bitwise */
    if (!ref->dense != !got->dense || ref->nnz != got->nnz)
      return fmt("%lld entries, expected %lld", (long long)got->nnz,
                 (long long)ref->nnz);
    size_t nc = (size_t)(ref->nnz * ref->order) * sizeof *ref->coords;
    if ((nc && memcmp(ref->coords, got->coords, nc) != 0) ||
        (ref->nnz &&
         memcmp(ref->vals, got->vals, (size_t)ref->nnz * sizeof *ref->vals)))
      return fmt("the stored entries differ");
    return NULL;
  }
  for (int64_t e = 0; e < ref->count; e++) {
    double a = ref->dense[e], b = got->dense[e];
    int ok = bitwise ? memcmp(&a, &b, sizeof a) == 0 : same_value(a, b);
    if (!ok)
      return fmt("entry %lld (row-major) is %.17g, expected %.17g",
                 (long long)e, b, a);
  }
  return NULL;
}

static int take_outputs(const galley_program *p, Snap *s, int max) {
  int n = galley_program_num_outputs(p);
  ck_assert_int_le(n, max);
  for (int k = 0; k < n; k++)
    snap_take(&s[k], galley_program_output(p, k));
  return n;
}

/* ------------------------------------------------------------------ */
/* Random programs                                                     */
/* ------------------------------------------------------------------ */

typedef struct Case {
  uint64_t seed;
  char *text;
  int ninputs;
  char names[MAX_INPUTS + 8][16];
  galley_tensor *inputs[MAX_INPUTS + 8];
} Case;

static void make_case(Case *c, uint64_t seed) {
  memset(c, 0, sizeof *c);
  test_rng mix = test_rng_seed(seed);
  test_rng r = test_rng_seed(test_rng_next(&mix));
  Gen g;
  memset(&g, 0, sizeof g);
  g.r = &r;
  g.inf_values = chance(&g, 0.1);
  g.defer_fills = 1;
  c->seed = seed;
  c->text = gen_program(&g);
  c->ninputs = g.ninputs;
  for (int k = 0; k < g.ninputs; k++) {
    snprintf(c->names[k], sizeof c->names[k], "%s", g.in[k].name);
    c->inputs[k] = gen_tensor(&g, &g.in[k], gen_density(&g));
  }
}

/* A join program (randprog.h: triangles, inner products) and its data:
 * the marked tables of issue 11 are per thread. */
static void make_join_case(Case *c, uint64_t seed) {
  memset(c, 0, sizeof *c);
  test_rng mix = test_rng_seed(seed ^ 0x27d4eb2fu);
  test_rng r = test_rng_seed(test_rng_next(&mix));
  Gen g;
  memset(&g, 0, sizeof g);
  g.r = &r;
  g.inf_values = chance(&g, 0.1);
  c->seed = seed;
  c->text = gen_join_program(&g);
  g.list_bias = 1;
  c->ninputs = g.ninputs;
  for (int k = 0; k < g.ninputs; k++) {
    snprintf(c->names[k], sizeof c->names[k], "%s", g.in[k].name);
    c->inputs[k] = gen_tensor(&g, &g.in[k], gen_density(&g));
  }
}

static void case_free(Case *c) {
  free(c->text);
  for (int k = 0; k < c->ninputs; k++)
    galley_tensor_free(c->inputs[k]);
  memset(c, 0, sizeof *c);
}

enum { MAXOUT = MAX_QUERIES + 8 };

/* Run p with `threads` threads into got[]; 0 when the run failed (its
 * message in *why). */
static int run_with(galley_program *p, int threads, Snap *got, int *ngot,
                    char **why) {
  galley_error err;
  ck_assert_int_eq(galley_program_set_threads(p, threads, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_threads(p), threads);
  galley_status st = galley_program_run(p, &err);
  if (st != GALLEY_OK) {
    *why = fmt("%d threads: %s: %s", threads, galley_status_name(st),
               err.msg);
    return 0;
  }
  *ngot = take_outputs(p, got, MAXOUT);
  return 1;
}

/* Every output of `got` against `ref`; NULL or why not. */
static char *outputs_diff(const galley_program *p, const Snap *ref, int nref,
                          const Snap *got, int ngot, int bitwise) {
  if (nref != ngot)
    return fmt("%d outputs, expected %d", ngot, nref);
  for (int k = 0; k < nref; k++) {
    char *d = snap_diff(&ref[k], &got[k], bitwise);
    if (d) {
      char *w = fmt("output %d (%s): %s", k, galley_program_output_name(p, k),
                    d);
      free(d);
      return w;
    }
  }
  return NULL;
}

/* One random case: reference, then 1, 2, 3, 4, 7 threads with tiny
 * blocks.  1 when all agree. */
static int check_case(const Case *c, int64_t block_work) {
  galley_program *p = NULL;
  galley_error err;
  ck_assert_msg(galley_program_parse("threads.tin", c->text, strlen(c->text),
                                     &p, NULL, &err) == GALLEY_OK,
                "seed %llu: %s", (unsigned long long)c->seed, err.msg);
  for (int k = 0; k < c->ninputs; k++)
    ck_assert_int_eq(galley_program_bind(p, c->names[k], c->inputs[k], &err),
                     GALLEY_OK);
  ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_TCC, &err),
                   GALLEY_OK);
  api_program_set_block_work(p, block_work);
  Snap ref[MAXOUT], one[MAXOUT], got[MAXOUT];
  int nref = 0, none = 0, ngot = 0;
  char *why = NULL;
  ck_assert_int_eq(galley_program_run_reference(p, &err), GALLEY_OK);
  nref = take_outputs(p, ref, MAXOUT);
  if (run_with(p, 1, one, &none, &why))
    why = outputs_diff(p, ref, nref, one, none, 0);
  for (int t = 1; !why && t < NTHREADS; t++) {
    if (!run_with(p, THREADS[t], got, &ngot, &why))
      break;
    char *d = outputs_diff(p, one, none, got, ngot, 1);
    if (d)
      why = fmt("%d threads differ from 1 thread: %s", THREADS[t], d);
    free(d);
    for (int k = 0; k < ngot; k++)
      snap_free(&got[k]);
    ngot = 0;
  }
  if (why) {
    fprintf(stderr, "\n==== threads FAILURE case seed %llu (block work %lld):"
            " %s\n--- program\n%s--- physical plan\n",
            (unsigned long long)c->seed, (long long)block_work, why, c->text);
    galley_program_print_physical_plan(p, stderr, NULL);
  }
  for (int k = 0; k < nref; k++)
    snap_free(&ref[k]);
  for (int k = 0; k < none; k++)
    snap_free(&one[k]);
  galley_program_free(p);
  int ok = why == NULL;
  free(why);
  return ok;
}

START_TEST(random_programs) {
  uint64_t base = (uint64_t)env_long("GALLEY_DIFF_SEED", 20261121);
  long cases = env_long("GALLEY_THREADS_CASES", 300), failures = 0;
  for (long k = 0; k < 2 * cases && failures < 3; k++) {
    Case c;
    /* the generator's programs, then as many join programs */
    if (k < cases)
      make_case(&c, base + (uint64_t)k);
    else
      make_join_case(&c, base + (uint64_t)(k - cases));
    /* 1, 2 or 5 units: most outer coordinates get blocks of their own */
    int64_t work = (int64_t[]){1, 2, 5}[k % 3];
    failures += !check_case(&c, work);
    case_free(&c);
  }
  ck_assert_msg(failures == 0, "%ld random programs differ (see stderr)",
                failures);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Fixed kernels on data of many default-sized blocks                  */
/* ------------------------------------------------------------------ */

/* A random n x n matrix with about `per_row` entries a row, skewed: row i
 * has up to 4 * per_row entries when i % 16 == 0, so that blocks by rows
 * would not balance. */
static galley_tensor *random_matrix(int64_t n, int per_row, uint64_t seed,
                                    const char *format) {
  test_rng r = test_rng_seed(seed);
  int64_t cap = n * per_row * 4, nnz = 0, dims[2] = {n, n};
  int64_t *crd = malloc((size_t)cap * 2 * sizeof *crd);
  double *val = malloc((size_t)cap * sizeof *val);
  ck_assert(crd && val);
  for (int64_t i = 0; i < n; i++) {
    int k = (int)test_rng_below(&r, i % 16 == 0 ? 4 * per_row : per_row);
    for (int e = 0; e < k && nnz < cap; e++) {
      crd[2 * nnz] = i;
      crd[2 * nnz + 1] = test_rng_below(&r, n);
      val[nnz++] = test_rng_double(&r, -1, 1);
    }
  }
  galley_format f;
  galley_error err;
  ck_assert_int_eq(galley_format_parse(format, 2, &f, &err), GALLEY_OK);
  galley_tensor *t = NULL;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, nnz, crd, val, 0, &f, &t,
                                          &err), GALLEY_OK);
  free(crd);
  free(val);
  return t;
}

static galley_tensor *random_vector(int64_t n, uint64_t seed) {
  test_rng r = test_rng_seed(seed);
  double *v = malloc((size_t)n * sizeof *v);
  ck_assert_ptr_nonnull(v);
  for (int64_t i = 0; i < n; i++)
    v[i] = test_rng_double(&r, -1, 1);
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_dense(1, &n, v, 0, NULL, &t, &err),
                   GALLEY_OK);
  free(v);
  return t;
}

static const char *const KERNELS =
    "input A[i,j]\n"
    "input B[i,j]\n"
    "input x[j]\n"
    "y[i] = sum(j: A[i,j] * x[j])\n"              /* SpMV: in place */
    "s = sum(i, j: A[i,j] * x[j])\n"              /* to a scalar */
    "z[j] = sum(i: A[i,j] * x[i])\n"              /* over the outer index */
    "C[i,k] = sum(j: A[i,j] * B[j,k])\n"          /* SpGEMM: scatter */
    "D[i,j] = A[i,j] * sum(k: B[i,k] * B[j,k])\n" /* SDDMM-like: pattern */
    "m = max(i, j: A[i,j] + B[i,j])\n";           /* union, max */

/* The kernels on n x n matrices in one format, every thread count
 * bitwise equal to one thread and, when `reference` is set (the dense
 * reference evaluator is O(n^3) here), one thread close to the
 * reference.  block_work 0: the default blocks. */
static void check_kernels(const char *format, galley_backend backend,
                          int64_t n, int64_t block_work, int reference) {
  galley_program *p = NULL;
  galley_error err;
  ck_assert_int_eq(galley_program_parse("kernels.tin", KERNELS,
                                        strlen(KERNELS), &p, NULL, &err),
                   GALLEY_OK);
  galley_tensor *A = random_matrix(n, 12, 1, format);
  galley_tensor *B = random_matrix(n, 4, 2, format);
  galley_tensor *x = random_vector(n, 3);
  ck_assert_int_eq(galley_program_bind(p, "A", A, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_bind(p, "B", B, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_bind(p, "x", x, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_set_backend(p, backend, &err), GALLEY_OK);
  api_program_set_block_work(p, block_work);
  Snap ref[MAXOUT], one[MAXOUT], got[MAXOUT];
  int nref = 0, none = 0, ngot = 0;
  char *why = NULL;
  if (reference) {
    ck_assert_msg(galley_program_run_reference(p, &err) == GALLEY_OK, "%s",
                  err.msg);
    nref = take_outputs(p, ref, MAXOUT);
  }
  ck_assert_msg(run_with(p, 1, one, &none, &why), "%s", why);
  if (reference) {
    why = outputs_diff(p, ref, nref, one, none, 0);
    ck_assert_msg(!why, "%s: 1 thread against the reference: %s", format,
                  why);
  }
  for (int t = 1; t < NTHREADS; t++) {
    ck_assert_msg(run_with(p, THREADS[t], got, &ngot, &why), "%s", why);
    why = outputs_diff(p, one, none, got, ngot, 1);
    ck_assert_msg(!why, "%s: %d threads: %s", format, THREADS[t], why);
    for (int k = 0; k < ngot; k++)
      snap_free(&got[k]);
  }
  for (int k = 0; k < nref; k++)
    snap_free(&ref[k]);
  for (int k = 0; k < none; k++)
    snap_free(&one[k]);
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(B);
  galley_tensor_free(x);
}

/* B's list level: as made (saved), or with every fourth row holding
 * columns 0, 1, ... instead (fewer entries in the product). */
static void set_pattern(galley_tensor *B, const int64_t *saved, int changed) {
  galley_level *L = &B->lvl[1];
  for (int64_t r = 0; r < L->npar; r++)
    for (int64_t e = galley_rt_pos(L, r); e < galley_rt_pos(L, r + 1); e++) {
      int64_t c = changed && r % 4 == 1 ? e - galley_rt_pos(L, r) : saved[e];
      if (L->idx32)
        L->crd32[e] = (int32_t)c;
      else
        L->crd[e] = c;
    }
}

/* One run of p on `threads` threads, bitwise `one`. */
static void check_run(galley_program *p, int threads, const Snap *one,
                      int none, const char *what) {
  Snap got[MAXOUT];
  int ngot = 0;
  char *why = NULL;
  ck_assert_msg(run_with(p, threads, got, &ngot, &why), "%s", why);
  why = outputs_diff(p, one, none, got, ngot, 1);
  ck_assert_msg(!why, "%s, %d threads: %s", what, threads, why);
  for (int g = 0; g < ngot; g++)
    snap_free(&got[g]);
}

/* A repeated SpGEMM: from its second run on a thread count, each
 * thread's entries are placed where the result wants them (exec.c's
 * Placement, from the sizes the run before noted with A) when
 * PLACEMENT_ON is 1 (it is measured off for now, and this test then
 * checks the repeated plain concatenation); every run is bitwise one
 * thread's.  Between runs B's pattern changes in place
 * without galley_tensor_touch -- deliberately, so that the sizes noted
 * with A are wrong guesses, too large (ranges shorter than their views)
 * and then too small (views outgrown, moved out): the runs still equal
 * one thread's product of the B they read. */
START_TEST(spgemm_placed) {
  const char *src = "input A[i,j]\ninput B[i,j]\n"
                    "C[i,k] = sum(j: A[i,j] * B[j,k])\n";
  galley_program *p = NULL;
  galley_error err;
  ck_assert_int_eq(galley_program_parse("placed.tin", src, strlen(src), &p,
                                        NULL, &err), GALLEY_OK);
  galley_tensor *A = random_matrix(3000, 12, 5, "dense,list");
  galley_tensor *B = random_matrix(3000, 8, 6, "dense,list");
  ck_assert_int_eq(galley_program_bind(p, "A", A, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_bind(p, "B", B, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_TCC, &err),
                   GALLEY_OK);
  galley_level *L = &B->lvl[1];
  int64_t nz = galley_rt_pos(L, L->npar);
  int64_t *saved = malloc((size_t)nz * sizeof *saved);
  ck_assert_ptr_nonnull(saved);
  for (int64_t e = 0; e < nz; e++)
    saved[e] = galley_rt_crd(L, e);
  Snap one[2][MAXOUT];
  int none[2] = {0, 0};
  for (int c = 0; c < 2; c++) {
    char *why = NULL;
    set_pattern(B, saved, c);
    ck_assert_msg(run_with(p, 1, one[c], &none[c], &why), "%s", why);
    ck_assert_int_eq(none[c], 1);
    ck_assert_int_ge(one[c][0].nnz, (int64_t)1 << 16); /* PLACE_MIN */
  }
  ck_assert_int_lt(one[1][0].nnz, one[0][0].nnz);
  for (int t = 1; t < NTHREADS; t++) {
    set_pattern(B, saved, 0);
    check_run(p, THREADS[t], one[0], none[0], "first run");
    check_run(p, THREADS[t], one[0], none[0], "placed");
    set_pattern(B, saved, 1);
    check_run(p, THREADS[t], one[1], none[1], "fewer than noted");
    check_run(p, THREADS[t], one[1], none[1], "placed again");
    set_pattern(B, saved, 0);
    check_run(p, THREADS[t], one[0], none[0], "more than noted");
  }
  for (int c = 0; c < 2; c++)
    for (int k = 0; k < none[c]; k++)
      snap_free(&one[c][k]);
  free(saved);
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(B);
}
END_TEST

/* Small enough for the reference, in blocks of 64 units. */
START_TEST(kernels_csr) {
  check_kernels("dense,list", GALLEY_BACKEND_TCC, 300, 64, 1);
}
END_TEST

START_TEST(kernels_dcsr) {
  check_kernels("list,list", GALLEY_BACKEND_TCC, 300, 64, 1);
}
END_TEST

/* The default blocks: many of them on a 20000 x 20000 matrix. */
START_TEST(kernels_default_blocks) {
  check_kernels("dense,list", GALLEY_BACKEND_TCC, 20000, 0, 0);
}
END_TEST

START_TEST(kernels_clang) {
  const char *c = getenv("CLANG");
  if (!c || !*c)
    return; /* no clang configured */
  check_kernels("dense,list", GALLEY_BACKEND_CLANG, 300, 64, 1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The options and the shared pool                                     */
/* ------------------------------------------------------------------ */

/* explain's partition is the executor's: on rows of equal work (3
 * entries each, so that no two cuts fall on one coordinate) it is
 * ceil((rows + entries) / block_work) blocks by A's entries, on the
 * program's threads; the same after a run (--analyze). */
/* A reduction over the outer loop into a dense vector much longer than
 * the work of a block: every block after the first fills and folds a
 * partial vector, so a block does at least twice the vector's length in
 * work (blocks_unit_work) -- here 6 blocks where 64 units a block would
 * have made 641 partial vectors. */
START_TEST(reduce_blocks_outweigh_partials) {
  enum { ROWS = 1000, COLS = 4000, PER = 40 };
  static int64_t ptr[ROWS + 1], col[ROWS * PER];
  static double val[ROWS * PER];
  for (int64_t i = 0; i <= ROWS; i++)
    ptr[i] = i * PER;
  for (int64_t e = 0; e < ROWS * PER; e++) {
    /* sorted in each row; the rows x stores cover every column */
    col[e] = (e % PER) * 100 + (e / PER / 10) % 100;
    val[e] = 1 + (double)(e % 7);
  }
  const char *src = "input A[i, j], x[i]\ny[j] = sum(i: x[i] * A[i, j])\n"
                    "output y\n";
  static const int64_t works[] = {64, 1 << 14};
  for (int w = 0; w < 2; w++) {
    galley_program *p = NULL;
    /* a sparse x (a tenth of its index): the planner pushes from it */
    enum { XN = ROWS / 10 };
    int64_t xi[XN], dims[1] = {ROWS};
    double xv[XN];
    for (int k = 0; k < XN; k++)
      xi[k] = 10 * k, xv[k] = 1 + k % 5;
    galley_tensor *A = NULL, *x = NULL;
    galley_error err;
    ck_assert_int_eq(galley_tensor_from_coo(1, dims, XN, xi, xv, 0, NULL, &x,
                                            &err),
                     GALLEY_OK);
    ck_assert_int_eq(galley_program_parse("push.tin", src, strlen(src), &p,
                                          NULL, &err),
                     GALLEY_OK);
    ck_assert_int_eq(galley_tensor_wrap_csr(ROWS, COLS, ptr, col, val, 0, &A,
                                            &err),
                     GALLEY_OK);
    ck_assert_int_eq(galley_program_bind(p, "A", A, &err), GALLEY_OK);
    ck_assert_int_eq(galley_program_bind(p, "x", x, &err), GALLEY_OK);
    ck_assert_int_eq(galley_program_set_threads(p, 2, &err), GALLEY_OK);
    api_program_set_block_work(p, works[w]);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_int_eq(galley_program_explain(p, f, GALLEY_EXPLAIN_ANALYZE, &err),
                     GALLEY_OK);
    fclose(f);
    int64_t total = ROWS + ROWS * PER, unit = works[w];
    if (unit < 2 * COLS)
      unit = 2 * COLS;
    char want[128];
    snprintf(want, sizeof want,
             "\n  y: loop i over [0, %d): %lld blocks by the entries of A "
             "(%lld units)",
             ROWS, (long long)((total + unit - 1) / unit), (long long)total);
    ck_assert_msg(strstr(text, want) != NULL, "want%s (work %lld) in:\n%s",
                  want, (long long)works[w], text);
    free(text);
    galley_program_free(p);
    galley_tensor_free(A);
    galley_tensor_free(x);
  }
}
END_TEST

START_TEST(explain_partition) {
  enum { ROWS = 1000, COLS = 50, PER = 3 };
  static int64_t ptr[ROWS + 1], col[ROWS * PER];
  static double val[ROWS * PER];
  for (int64_t i = 0; i <= ROWS; i++)
    ptr[i] = i * PER;
  for (int64_t e = 0; e < ROWS * PER; e++) {
    col[e] = (e / PER) % (COLS - PER) + e % PER; /* sorted in each row */
    val[e] = 1 + (double)(e % 7);
  }
  const char *src = "input A[i, j], x[j]\ny[i] = sum(j: A[i, j] * x[j])\n"
                    "output y\n";
  static const int64_t works[] = {64, 1000, 1 << 14};
  for (int w = 0; w < 3; w++) {
    galley_program *p = NULL;
    galley_tensor *A = NULL, *x = random_vector(COLS, 5);
    galley_error err;
    ck_assert_int_eq(galley_program_parse("spmv.tin", src, strlen(src), &p,
                                          NULL, &err),
                     GALLEY_OK);
    ck_assert_int_eq(galley_tensor_wrap_csr(ROWS, COLS, ptr, col, val, 0, &A,
                                            &err),
                     GALLEY_OK);
    ck_assert_int_eq(galley_program_bind(p, "A", A, &err), GALLEY_OK);
    ck_assert_int_eq(galley_program_bind(p, "x", x, &err), GALLEY_OK);
    ck_assert_int_eq(galley_program_set_threads(p, 3, &err), GALLEY_OK);
    api_program_set_block_work(p, works[w]);
    int64_t total = ROWS + ROWS * PER;
    int64_t blocks = (total + works[w] - 1) / works[w];
    char want[256];
    snprintf(want, sizeof want,
             "\n  y: loop i over [0, %d): %lld block%s by the entries of A "
             "(%lld units) on %d thread%s%s\n",
             ROWS, (long long)blocks, blocks == 1 ? "" : "s",
             (long long)total, blocks < 3 ? (int)blocks : 3,
             blocks == 1 ? "" : "s",
             blocks > 1 ? ", each block writes its own points" : "");
    for (int analyze = 0; analyze < 2; analyze++) {
      char *text = NULL;
      size_t len = 0;
      FILE *f = open_memstream(&text, &len);
      ck_assert_int_eq(galley_program_explain(
                           p, f, analyze ? GALLEY_EXPLAIN_ANALYZE : 0, &err),
                       GALLEY_OK);
      fclose(f);
      char head[128];
      snprintf(head, sizeof head,
               "\npartition: each outermost loop in blocks of about %lld "
               "units of work, run by up to 3 threads\n",
               (long long)works[w]);
      ck_assert_msg(strstr(text, head) != NULL, "%s", text);
      ck_assert_msg(strstr(text, want) != NULL, "want%s in:\n%s", want, text);
      free(text);
    }
    galley_program_free(p);
    galley_tensor_free(A);
    galley_tensor_free(x);
  }
}
END_TEST

START_TEST(thread_options) {
  galley_context *ctx = NULL;
  galley_error err;
  ck_assert_int_eq(galley_context_create(&ctx, &err), GALLEY_OK);
  ck_assert_int_ge(galley_context_threads(ctx), 1);
  ck_assert_int_eq(galley_context_set_threads(ctx, -1, &err), GALLEY_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "thread count"));
  ck_assert_int_eq(galley_context_set_threads(ctx, 257, &err), GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_set_threads(NULL, 2, &err), GALLEY_EINVAL);
  ck_assert_int_eq(galley_context_set_threads(ctx, 3, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_threads(ctx), 3);
  galley_program *p = NULL;
  const char *text = "input x[i]\ny = sum(i: x[i])\n";
  ck_assert_int_eq(galley_context_program_parse(ctx, "t.tin", text,
                                                strlen(text), &p, NULL, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_program_threads(p), 3);
  /* later changes to the context do not reach the program */
  ck_assert_int_eq(galley_context_set_threads(ctx, 2, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_threads(p), 3);
  ck_assert_int_eq(galley_program_set_threads(p, -2, &err), GALLEY_EINVAL);
  ck_assert_int_eq(galley_program_threads(p), 3);
  /* the program outlives its context and still runs on its pool */
  galley_context_free(ctx);
  galley_tensor *x = random_vector(100000, 5);
  ck_assert_int_eq(galley_program_bind(p, "x", x, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
  double sum = 0;
  ck_assert_int_eq(galley_tensor_to_dense(galley_program_output(p, 0), &sum,
                                          1, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_set_threads(p, 1, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
  double sum1 = 0;
  ck_assert_int_eq(galley_tensor_to_dense(galley_program_output(p, 0), &sum1,
                                          1, &err), GALLEY_OK);
  ck_assert(memcmp(&sum, &sum1, sizeof sum) == 0);
  galley_program_free(p);
  galley_tensor_free(x);
}
END_TEST

/* Two programs of one context, run on two threads at once: one of them
 * may find the shared pool busy and run its blocks itself. */
typedef struct Runner {
  galley_program *p;
  int rounds;
  double first;
  int ok;
} Runner;

static void *runner_main(void *arg) {
  Runner *r = arg;
  galley_error err;
  r->ok = 1;
  for (int k = 0; k < r->rounds && r->ok; k++) {
    double v = 0;
    r->ok = galley_program_run(r->p, &err) == GALLEY_OK &&
            galley_tensor_to_dense(galley_program_output(r->p, 0), &v, 1,
                                   &err) == GALLEY_OK;
    if (k == 0)
      r->first = v;
    else if (memcmp(&v, &r->first, sizeof v) != 0)
      r->ok = 0;
  }
  return NULL;
}

START_TEST(shared_pool_two_callers) {
  galley_context *ctx = NULL;
  galley_error err;
  ck_assert_int_eq(galley_context_create(&ctx, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_set_threads(ctx, 2, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_set_backend(ctx, GALLEY_BACKEND_TCC, &err),
                   GALLEY_OK);
  const char *text = "input A[i,j]\ninput x[j]\n"
                     "s = sum(i, j: A[i,j] * x[j])\n";
  galley_tensor *A = random_matrix(4000, 8, 7, "dense,list");
  galley_tensor *x = random_vector(4000, 8);
  Runner r[2];
  pthread_t tid[2];
  for (int k = 0; k < 2; k++) {
    memset(&r[k], 0, sizeof r[k]);
    r[k].rounds = 20;
    ck_assert_int_eq(galley_context_program_parse(ctx, "t.tin", text,
                                                  strlen(text), &r[k].p, NULL,
                                                  &err), GALLEY_OK);
    ck_assert_int_eq(galley_program_bind(r[k].p, "A", A, &err), GALLEY_OK);
    ck_assert_int_eq(galley_program_bind(r[k].p, "x", x, &err), GALLEY_OK);
    ck_assert_int_eq(galley_program_run(r[k].p, &err), GALLEY_OK); /* plan */
  }
  galley_context_free(ctx);
  for (int k = 0; k < 2; k++)
    ck_assert_int_eq(pthread_create(&tid[k], NULL, runner_main, &r[k]), 0);
  for (int k = 0; k < 2; k++)
    pthread_join(tid[k], NULL);
  ck_assert(r[0].ok && r[1].ok);
  ck_assert(memcmp(&r[0].first, &r[1].first, sizeof r[0].first) == 0);
  for (int k = 0; k < 2; k++)
    galley_program_free(r[k].p);
  galley_tensor_free(A);
  galley_tensor_free(x);
}
END_TEST


/* ------------------------------------------------------------------ */
/* Conversions and index narrowing on threads                          */
/* ------------------------------------------------------------------ */

static void par_pool(void *pool, int64_t n, rt_task fn, void *ctx) {
  pool_run(pool, n, fn, ctx);
}

/* Parts run backwards on the caller: a result that depended on the
 * order parts run in would differ. */
static void par_backwards(void *pool, int64_t n, rt_task fn, void *ctx) {
  (void)pool;
  for (int64_t p = n - 1; p >= 0; p--)
    fn(ctx, p, 0);
}

/* NULL when a and b store the same levels and values bit for bit, else
 * what differs. */
static const char *same_layout(const galley_tensor *a,
                               const galley_tensor *b) {
  if (a->order != b->order || a->nval != b->nval)
    return "order or nval";
  for (int l = 0; l < a->order; l++) {
    const galley_level *x = &a->lvl[l], *y = &b->lvl[l];
    if (x->kind != y->kind || x->mode != y->mode || x->npar != y->npar ||
        x->nset != y->nset || x->idx32 != y->idx32)
      return "a level's kind, mode, sizes or width";
    if (x->kind == GALLEY_RT_DENSE)
      continue;
    for (int64_t p = 0; p <= x->npar; p++)
      if (galley_rt_pos(x, p) != galley_rt_pos(y, p))
        return "pos";
    for (int64_t k = 0; k < x->nset; k++)
      if (galley_rt_crd(x, k) != galley_rt_crd(y, k))
        return "crd";
  }
  return memcmp(a->val, b->val, (size_t)a->nval * sizeof *a->val) ? "values"
                                                                  : NULL;
}

/* 1500 x 2500 with about 400k entries, above RT_PAR_MIN: CSR to CSC in
 * parts, narrowed in parts, bitwise the serial copies.  With `zeros`
 * some stored values are the fill: the transpose drops them (counted in
 * parts) and converts again. */
static void check_conversions(int zeros) {
  enum { M = 1500, N = 2500, NNZ = 400000 };
  int64_t dims[2] = {M, N};
  int64_t *crd = malloc(2 * NNZ * sizeof *crd);
  double *val = malloc(NNZ * sizeof *val);
  ck_assert_ptr_nonnull(crd);
  ck_assert_ptr_nonnull(val);
  uint64_t x = 12345;
  for (int e = 0; e < NNZ; e++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    crd[2 * e] = (int64_t)((x >> 33) % M);
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    crd[2 * e + 1] = (int64_t)((x >> 33) % N);
    val[e] = zeros && e % 97 == 0 ? 0.0 : 0.5 + (double)(x >> 40) / 1e6;
  }
  galley_error err = {0};
  galley_tensor *A = NULL;
  galley_format csr, csc;
  ck_assert_int_eq(galley_format_parse("dense:0,list:1", 2, &csr, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_format_parse("dense:1,list:0", 2, &csc, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, NNZ, crd, val, 0, &csr,
                                          &A, &err),
                   GALLEY_OK);
  ck_assert_int_ge(galley_tensor_stored(A), RT_PAR_MIN);
  galley_tensor *ref = NULL;
  ck_assert_int_eq(galley_tensor_convert(A, &csc, &ref, &err), GALLEY_OK);
  GalleyPool *pool = pool_new(3);
  ck_assert_ptr_nonnull(pool);
  rt_par pars[2] = {{.run = par_pool, .pool = pool},
                    {.run = par_backwards, .pool = NULL}};
  for (int k = 0; k < 2; k++) {
    galley_tensor *got = NULL;
    ck_assert_int_eq(rt_tensor_convert_par(A, &csc, &pars[k], &got, &err),
                     GALLEY_OK);
    const char *why = same_layout(ref, got);
    ck_assert_msg(!why, "CSR to CSC in parts (%s): %s differs",
                  k ? "backwards" : "pool", why);
    /* widen and narrow again, in parts, against the serial copies */
    galley_tensor *w = NULL;
    ck_assert_int_eq(galley_tensor_convert(ref, &csc, &w, &err), GALLEY_OK);
    ck_assert_int_eq(rt_tensor_set_widths(w, 0, &err), GALLEY_OK);
    ck_assert_int_eq(rt_tensor_set_widths_par(got, 0, &pars[k], &err),
                     GALLEY_OK);
    why = same_layout(w, got);
    ck_assert_msg(!why, "widened in parts: %s differs", why);
    ck_assert_int_eq(rt_tensor_set_widths(w, 2, &err), GALLEY_OK);
    ck_assert_int_eq(rt_tensor_set_widths_par(got, 2, &pars[k], &err),
                     GALLEY_OK);
    why = same_layout(w, got);
    ck_assert_msg(!why, "narrowed in parts: %s differs", why);
    ck_assert_int_eq(got->lvl[1].idx32, 1);
    galley_tensor_free(w);
    galley_tensor_free(got);
  }
  pool_unref(pool);
  galley_tensor_free(ref);
  galley_tensor_free(A);
  free(crd);
  free(val);
}

/* The .tns text of t, serially (par NULL) or in parts on par. */
static char *tns_text(const galley_tensor *t, const rt_par *par) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_assert_ptr_nonnull(f);
  galley_error err = {0};
  galley_status st = par ? rt_write_tns_stream_par(t, f, par, &err)
                         : galley_tensor_write_tns_stream(t, f, &err);
  ck_assert_int_eq(st, GALLEY_OK);
  fclose(f);
  return text;
}

/* nnz random (row, column) pairs of an m x n matrix from a seeded
 * generator (repeats allowed), every 101st value 0 (the fill) and every
 * 103rd NaN: the files and texts the parallel writers must reproduce. */
static void random_coo(int64_t m, int64_t n, int nnz, uint64_t x,
                       int64_t **crd_out, double **val_out) {
  int64_t *crd = malloc(2 * (size_t)nnz * sizeof *crd);
  double *val = malloc((size_t)nnz * sizeof *val);
  ck_assert(crd && val);
  for (int e = 0; e < nnz; e++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    crd[2 * e] = (int64_t)((x >> 33) % (uint64_t)m);
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    crd[2 * e + 1] = (int64_t)((x >> 33) % (uint64_t)n);
    val[e] = e % 101 == 0 ? 0.0 : e % 103 == 0 ? NAN
                                              : (double)(x >> 20) / 7e5;
  }
  *crd_out = crd;
  *val_out = val;
}

/* A 1500 x 2500 matrix with about 360k entries (above RT_PAR_MIN), some of them
 * equal to the fill, some NaN, in CSR, CSC (a sorted export) and COO:
 * its text formatted in parts on 3 threads, and in parts run backwards,
 * is the serial text byte for byte. */
START_TEST(tns_text_on_threads) {
  enum { M = 1500, N = 2500, NNZ = 400000 };
  int64_t dims[2] = {M, N};
  int64_t *crd;
  double *val;
  random_coo(M, N, NNZ, 99, &crd, &val);
  const char *formats[] = {"dense:0,list:1", "dense:1,list:0",
                           "list:0,list:1"};
  GalleyPool *pool = pool_new(3);
  rt_par pars[2] = {{.run = par_pool, .pool = pool},
                    {.run = par_backwards, .pool = NULL}};
  for (int k = 0; k < 3; k++) {
    galley_error err = {0};
    galley_format fmt;
    galley_tensor *A = NULL;
    ck_assert_int_eq(galley_format_parse(formats[k], 2, &fmt, &err),
                     GALLEY_OK);
    ck_assert_int_eq(galley_tensor_from_coo(2, dims, NNZ, crd, val, 0, &fmt,
                                            &A, &err), GALLEY_OK);
    ck_assert_int_ge(galley_tensor_stored(A), RT_PAR_MIN);
    char *serial = tns_text(A, NULL);
    for (int p = 0; p < 2; p++) {
      char *parts = tns_text(A, &pars[p]);
      ck_assert_msg(strcmp(serial, parts) == 0,
                    "%s: the text formatted in parts (%s) differs",
                    formats[k], p ? "backwards" : "pool");
      free(parts);
    }
    free(serial);
    galley_tensor_free(A);
  }
  pool_unref(pool);
  free(crd);
  free(val);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Reading a Matrix Market file on threads                             */
/* ------------------------------------------------------------------ */

/* A coordinate file of n entries (1-based, values with exponents that
 * take strtod's path too), with comments, blank lines and CRLF ends
 * among them; `symmetric`: the lower triangle of a symmetric one.  bad
 * > 0: entry line `bad` is broken (a column out of range); extra: that
 * many entries more than the size line says.  No newline at the end. */
static char *mtx_text(int n, int symmetric, int bad, int extra,
                      size_t *len) {
  size_t cap = (size_t)(n + extra) * 48 + 256, at = 0;
  char *s = malloc(cap);
  ck_assert_ptr_nonnull(s);
  at += (size_t)snprintf(s + at, cap - at,
                         "%%%%MatrixMarket matrix coordinate real %s\n"
                         "%% a comment\n%d %d %d\n",
                         symmetric ? "symmetric" : "general", 5000, 5000, n);
  uint64_t x = 777;
  for (int e = 1; e <= n + extra; e++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    int i = 1 + (int)((x >> 33) % 5000);
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    int j = 1 + (int)((x >> 33) % 5000);
    if (symmetric && j > i) {
      int t = i;
      i = j;
      j = t;
    }
    if (e == bad)
      j = 5001;
    double v = (double)(x >> 20) * (e % 3 ? 1e-7 : 1e25);
    at += (size_t)snprintf(s + at, cap - at, "%d %d %.17g%s", i, j, v,
                           e % 50 == 0 ? "\r\n" : "\n");
    if (e % 1000 == 0)
      at += (size_t)snprintf(s + at, cap - at, "%% c %d\n\n", e);
  }
  at--; /* no newline at the end */
  *len = at;
  return s;
}

/* Read text with `threads` threads (0: the serial reader) in small
 * chunks and parts; the status, and err and *coo. */
static galley_status read_mtx_with(const char *text, size_t len, int threads,
                                   rt_coo *coo, galley_error *err) {
  rt_reader r;
  ck_assert_int_eq(rt_reader_open_mem(&r, "m.mtx", text, len, err),
                   GALLEY_OK);
  rt_par par = {.run = rt_run_on_threads, .pool = &threads};
  galley_status st =
      rt_read_mtx_sized(&r, coo, NULL, threads > 0 ? &par : NULL,
                        (size_t)40000 + (size_t)threads * 977, 9000, err);
  rt_reader_close(&r);
  return st;
}

static void check_mtx_reads(int symmetric, int bad, int extra) {
  size_t len;
  char *text = mtx_text(20000, symmetric, bad, extra, &len);
  rt_coo ref;
  galley_error rerr = {0};
  galley_status rst = read_mtx_with(text, len, 0, &ref, &rerr);
  ck_assert_int_eq(rst == GALLEY_OK, (!bad && !extra));
  for (size_t k = 0; k < sizeof THREADS / sizeof *THREADS; k++) {
    rt_coo got;
    galley_error err = {0};
    galley_status st = read_mtx_with(text, len, THREADS[k], &got, &err);
    ck_assert_int_eq(st, rst);
    ck_assert_str_eq(err.msg, rerr.msg);
    if (st == GALLEY_OK) {
      ck_assert_int_eq(got.nnz, ref.nnz);
      ck_assert(memcmp(got.crd, ref.crd, (size_t)ref.nnz * 2 *
                                             sizeof *ref.crd) == 0);
      ck_assert(memcmp(got.val, ref.val, (size_t)ref.nnz *
                                             sizeof *ref.val) == 0);
    }
    rt_coo_free(&got);
  }
  rt_coo_free(&ref);
  free(text);
}

/* 20000 entries (about 600 kB) in chunks of about 40 kB cut into parts
 * of about 9 kB: the entries, and the first error and its line, are the
 * serial reader's for every thread count. */
START_TEST(mtx_read_on_threads) {
  check_mtx_reads(0, 0, 0);
  check_mtx_reads(1, 0, 0);
  check_mtx_reads(0, 12345, 0); /* a bad line deep in the file */
  check_mtx_reads(0, 20001, 1); /* the first entry too many is broken */
  check_mtx_reads(0, 0, 3);     /* more entries than the size line */
  check_mtx_reads(1, 19999, 0);
}
END_TEST

/* A .tns file of n order-3 entries (values with exponents), with
 * comments, blank lines and CRLF ends among them; `dims`: a '# dims:'
 * header (else the sizes are the largest coordinates).  bad: entry line
 * `bad` is broken as `how` says (1 a coordinate 0, 2 a field too many, 3
 * a '# fill:' header before it).  No newline at the end. */
static char *tns_file(int n, int dims, int bad, int how, size_t *len) {
  size_t cap = (size_t)n * 64 + 256, at = 0;
  char *s = malloc(cap);
  ck_assert_ptr_nonnull(s);
  if (dims)
    at += (size_t)snprintf(s + at, cap - at, "# dims: 300 400 500\n");
  at += (size_t)snprintf(s + at, cap - at, "# fill: 0.5\n# note\n");
  uint64_t x = 31337;
  for (int e = 1; e <= n; e++) {
    int c[3];
    for (int m = 0; m < 3; m++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      c[m] = 1 + (int)((x >> 33) % (unsigned)(300 + 100 * m));
    }
    if (e == bad && how == 1)
      c[1] = 0;
    if (e == bad && how == 3)
      at += (size_t)snprintf(s + at, cap - at, "# fill: 2\n");
    double v = (double)(x >> 20) * (e % 3 ? 1e-7 : 1e25);
    at += (size_t)snprintf(s + at, cap - at, "%d %d %d %.17g%s%s", c[0], c[1],
                           c[2], v, e == bad && how == 2 ? " 7" : "",
                           e % 50 == 0 ? "\r\n" : "\n");
    if (e % 1000 == 0)
      at += (size_t)snprintf(s + at, cap - at, "# c %d\n\n", e);
  }
  at--;
  *len = at;
  return s;
}

static galley_status read_tns_with(const char *text, size_t len, int threads,
                                   rt_coo *coo, galley_error *err) {
  rt_reader r;
  ck_assert_int_eq(rt_reader_open_mem(&r, "t.tns", text, len, err),
                   GALLEY_OK);
  rt_par par = {.run = rt_run_on_threads, .pool = &threads};
  galley_status st =
      rt_read_tns_sized(&r, coo, threads > 0 ? &par : NULL,
                        (size_t)40000 + (size_t)threads * 977, 9000, err);
  rt_reader_close(&r);
  return st;
}

static void check_tns_reads(int dims, int bad, int how) {
  size_t len;
  char *text = tns_file(20000, dims, bad, how, &len);
  rt_coo ref;
  galley_error rerr = {0};
  galley_status rst = read_tns_with(text, len, 0, &ref, &rerr);
  ck_assert_int_eq(rst == GALLEY_OK, (bad == 0));
  for (size_t k = 0; k < sizeof THREADS / sizeof *THREADS; k++) {
    rt_coo got;
    galley_error err = {0};
    galley_status st = read_tns_with(text, len, THREADS[k], &got, &err);
    ck_assert_int_eq(st, rst);
    ck_assert_str_eq(err.msg, rerr.msg);
    if (st == GALLEY_OK) {
      ck_assert_int_eq(got.order, 3);
      ck_assert(memcmp(got.dims, ref.dims, sizeof got.dims) == 0);
      ck_assert(got.fill == ref.fill);
      ck_assert_int_eq(got.nnz, ref.nnz);
      ck_assert(memcmp(got.crd, ref.crd, (size_t)ref.nnz * 3 *
                                             sizeof *ref.crd) == 0);
      ck_assert(memcmp(got.val, ref.val, (size_t)ref.nnz *
                                             sizeof *ref.val) == 0);
    }
    rt_coo_free(&got);
  }
  rt_coo_free(&ref);
  free(text);
}

/* The same for .tns files: with and without '# dims:' (the sizes then
 * the largest coordinates, gathered from every part), and three errors
 * deep in the file. */
START_TEST(tns_read_on_threads) {
  check_tns_reads(1, 0, 0);
  check_tns_reads(0, 0, 0);
  check_tns_reads(1, 12345, 1);
  check_tns_reads(0, 17000, 2);
  check_tns_reads(1, 9999, 3);
}
END_TEST

/* The bytes of file path (its length in *len). */
static char *file_bytes(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(b);
  ck_assert_int_eq(fread(b, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return b;
}

/* A file of A written with `threads` threads (0: serially); its bytes. */
static char *written(const galley_tensor *A, const char *dir,
                     const char *ext, int threads, size_t *len) {
  char path[512];
  snprintf(path, sizeof path, "%s/w%d.%s", dir, threads, ext);
  rt_par par = {.run = rt_run_on_threads, .pool = &threads};
  galley_error err = {0};
  ck_assert_msg(rt_tensor_write_par(A, path, GALLEY_FILE_AUTO,
                                    threads > 0 ? &par : NULL,
                                    &err) == GALLEY_OK, "%s", err.msg);
  char *b = file_bytes(path, len);
  remove(path);
  return b;
}

/* 300k entries (above RT_PAR_MIN), some 0 (left out) and some NaN, in
 * CSR and CSC: .mtx, .mtx.gz and .tns.gz files are the same bytes for
 * every thread count and serially; the plain .mtx is the serial text,
 * and the gzip files (deflated in pieces) read back as the tensor. */
START_TEST(files_on_threads) {
  enum { M = 1500, N = 2500, NNZ = 300000 };
  int64_t dims[2] = {M, N};
  int64_t *crd;
  double *val;
  random_coo(M, N, NNZ, 4242, &crd, &val);
  char dir[] = "/tmp/galley-files-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  const char *formats[] = {"dense:0,list:1", "dense:1,list:0"};
  const char *exts[] = {"mtx", "mtx.gz", "tns.gz"};
  for (int k = 0; k < 2; k++) {
    galley_error err = {0};
    galley_format fmt;
    galley_tensor *A = NULL;
    ck_assert_int_eq(galley_format_parse(formats[k], 2, &fmt, &err),
                     GALLEY_OK);
    ck_assert_int_eq(galley_tensor_from_coo(2, dims, NNZ, crd, val, 0, &fmt,
                                            &A, &err), GALLEY_OK);
    for (int x2 = 0; x2 < 3; x2++) {
      size_t rlen, len;
      char *ref = written(A, dir, exts[x2], 0, &rlen);
      for (size_t t = 0; t < sizeof THREADS / sizeof *THREADS; t++) {
        if (x2 != 1 && THREADS[t] != 2 && THREADS[t] != 7)
          continue; /* every count for .mtx.gz, two for the others */
        char *got = written(A, dir, exts[x2], THREADS[t], &len);
        ck_assert_msg(len == rlen && memcmp(got, ref, len) == 0,
                      "%s %s: %d threads wrote other bytes", formats[k],
                      exts[x2], THREADS[t]);
        free(got);
      }
      if (x2 > 0) { /* the pieces read back as the serial plain text */
        char path[512], plain[512];
        snprintf(path, sizeof path, "%s/back.%s", dir, exts[x2]);
        snprintf(plain, sizeof plain, "%s/back.%.3s", dir, exts[x2]);
        FILE *f = fopen(path, "wb");
        ck_assert_int_eq(fwrite(ref, 1, rlen, f), rlen);
        fclose(f);
        ck_assert_int_eq(rt_tensor_write_par(A, plain, GALLEY_FILE_AUTO,
                                             NULL, &err), GALLEY_OK);
        galley_tensor *B = NULL, *P = NULL;
        ck_assert_msg(galley_tensor_read(path, GALLEY_FILE_AUTO, &fmt, &B,
                                         &err) == GALLEY_OK, "%s", err.msg);
        ck_assert_msg(galley_tensor_read(plain, GALLEY_FILE_AUTO, &fmt, &P,
                                         &err) == GALLEY_OK, "%s", err.msg);
        const char *why = same_layout(P, B);
        ck_assert_msg(!why, "%s %s read back: %s", formats[k], exts[x2], why);
        galley_tensor_free(B);
        galley_tensor_free(P);
        remove(path);
        remove(plain);
      }
      free(ref);
    }
    galley_tensor_free(A);
  }
  rmdir(dir);
  free(crd);
  free(val);
}
END_TEST

START_TEST(conversions_on_threads) {
  check_conversions(0);
  check_conversions(1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Owned ranges (pool_run_owned)                                       */
/* ------------------------------------------------------------------ */

/* Who ran each block, and each worker's blocks in the order it ran them. */
typedef struct Owned {
  pthread_mutex_t mu;
  int64_t nblocks;
  int *runs;        /* per block: times run */
  int *by;          /* per block: the worker that ran it */
  int64_t *order;   /* per worker: its blocks in order (nblocks slots) */
  int64_t *count;   /* per worker: how many */
  int slow_range0;  /* the blocks of worker 0's range sleep */
  int nthreads;
} Owned;

static void owned_task(void *ctx, int64_t b, int w) {
  Owned *o = ctx;
  if (o->slow_range0 && b < pool_range_start(o->nblocks, o->nthreads, 1)) {
    struct timespec ts = {0, 300000};
    nanosleep(&ts, NULL);
  }
  pthread_mutex_lock(&o->mu);
  o->runs[b]++;
  o->by[b] = w;
  o->order[(int64_t)w * o->nblocks + o->count[w]++] = b;
  pthread_mutex_unlock(&o->mu);
}

/* Every block runs once, and a worker runs the blocks of its own range
 * that it runs at all first, as the range's first ones in increasing
 * order (what run_sink's in-place sink 0 relies on). */
static void check_owned(GalleyPool *pool, int nthreads, int64_t nblocks,
                        int slow) {
  Owned o = {.nblocks = nblocks, .slow_range0 = slow, .nthreads = nthreads};
  pthread_mutex_init(&o.mu, NULL);
  o.runs = calloc((size_t)nblocks, sizeof *o.runs);
  o.by = calloc((size_t)nblocks, sizeof *o.by);
  o.order = calloc((size_t)(nblocks * nthreads), sizeof *o.order);
  o.count = calloc((size_t)nthreads, sizeof *o.count);
  ck_assert(o.runs && o.by && o.order && o.count);
  pool_run_owned(pool, nblocks, owned_task, &o, 1);
  for (int64_t b = 0; b < nblocks; b++)
    ck_assert_int_eq(o.runs[b], 1);
  for (int w = 0; w < nthreads; w++) {
    int64_t lo = pool_range_start(nblocks, nthreads, w);
    int64_t hi = pool_range_start(nblocks, nthreads, w + 1);
    int64_t k = 0, *seq = o.order + (int64_t)w * nblocks;
    while (k < o.count[w] && seq[k] == lo + k && lo + k < hi)
      k++;
    for (; k < o.count[w]; k++) {
      int64_t b = seq[k];
      ck_assert_msg(b < lo || b >= hi,
                    "%d threads, %lld blocks: worker %d ran block %lld of "
                    "its own range out of turn", nthreads,
                    (long long)nblocks, w, (long long)b);
    }
  }
  free(o.runs);
  free(o.by);
  free(o.order);
  free(o.count);
  pthread_mutex_destroy(&o.mu);
}

START_TEST(owned_ranges) {
  const int threads[] = {2, 3, 7};
  const int64_t nblocks[] = {1, 2, 5, 16, 61};
  for (int t = 0; t < 3; t++) {
    GalleyPool *pool = pool_new(threads[t]);
    ck_assert_ptr_nonnull(pool);
    for (int n = 0; n < 5; n++)
      for (int slow = 0; slow < 2; slow++)
        check_owned(pool, threads[t], nblocks[n], slow);
    pool_unref(pool);
  }
  /* without a pool: every block on worker 0, in order */
  check_owned(NULL, 1, 9, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("threads");
  TCase *tc = tcase_create("threads");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, thread_options);
  tcase_add_test(tc, explain_partition);
  tcase_add_test(tc, reduce_blocks_outweigh_partials);
  tcase_add_test(tc, shared_pool_two_callers);
  tcase_add_test(tc, owned_ranges);
  tcase_add_test(tc, kernels_csr);
  tcase_add_test(tc, kernels_dcsr);
  tcase_add_test(tc, kernels_default_blocks);
  tcase_add_test(tc, kernels_clang);
  tcase_add_test(tc, random_programs);
  tcase_add_test(tc, conversions_on_threads);
  tcase_add_test(tc, tns_text_on_threads);
  tcase_add_test(tc, mtx_read_on_threads);
  tcase_add_test(tc, tns_read_on_threads);
  tcase_add_test(tc, files_on_threads);
  tcase_add_test(tc, spgemm_placed);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
