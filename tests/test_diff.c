/*
 * test_diff.c -- differential tests: generated kernels against the
 * reference evaluator.
 *
 * A seeded generator writes small random .tin programs as TEXT (so the
 * parser and the checker run too), binds random tensors in random storage
 * formats and mode orders, runs the program once with the reference
 * evaluator (the dense meaning, tin.md section 1) and once through the
 * kernel path (the default planner, code generation and the JIT), and
 * compares every output: same order, dims and fill, every entry equal
 * within 1e-9 relative / 1e-12 absolute, NaN equal to NaN, infinities
 * exactly.  Fills include inf and -inf on purpose: 0 * inf and inf - inf
 * are NaN in the dense meaning, and the kernels must produce the same NaNs.
 *
 * Environment (all optional):
 *   GALLEY_DIFF_CASES        random programs for the tcc backend (10000)
 *   GALLEY_DIFF_CLANG_CASES  random programs for the clang backend (300;
 *                            each cold clang compile costs ~0.3 s)
 *   GALLEY_DIFF_ROWS_CASES   row-loop programs (the sliced strategy) for
 *                            tcc (600); GALLEY_DIFF_ROWS_CLANG_CASES for
 *                            clang (40)
 *   GALLEY_DIFF_SEED         base seed (case n uses seed + n)
 *   GALLEY_DIFF_ONLY         run just this one case seed (with -v detail)
 *   GALLEY_DIFF_VERBOSE      1: print every program (and, on a mismatch,
 *                            the generated kernel source)
 *   GALLEY_DIFF_NO_DEFERRED_FILLS  1: never bind a tensor of fill 0 to an
 *                            input declared with another fill (the
 *                            declaration wins, refeval.c; a known bug
 *                            class at the time of writing)
 *   GALLEY_DIFF_SELFCHECK    1: the "kernel path" is the reference backend
 *                            (checks the generator and the harness alone)
 * A mismatch prints the case seed, the program, the inputs (.tns text with
 * their storage formats) and both results; GALLEY_DIFF_ONLY=<seed>
 * reproduces it.  A generated program that does not parse or bind is a
 * generator bug and fails the test as well.
 */
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */
#include <check.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "galley.h"
#include "rt_internal.h" /* rt_tensor_set_widths: inputs of both widths */
#include "api_internal.h" /* api_program_set_block_work */
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* The two paths                                                       */
/* ------------------------------------------------------------------ */

static long env_long(const char *name, long dflt) {
  const char *s = getenv(name);
  return s && *s ? strtol(s, NULL, 10) : dflt;
}

typedef enum Path { PATH_TCC = 0, PATH_CLANG = 1 } Path;

static const char *path_name(Path path) {
  return path == PATH_TCC ? "tcc" : "clang";
}

/* The kernel path: plan, generate, compile with the backend, execute. */
static galley_status run_kernels(galley_program *p, Path path,
                                 galley_error *err) {
  galley_backend b =
      path == PATH_TCC ? GALLEY_BACKEND_TCC : GALLEY_BACKEND_CLANG;
  if (env_long("GALLEY_DIFF_SELFCHECK", 0))
    b = GALLEY_BACKEND_REFERENCE; /* the harness and generator alone */
  galley_status st = galley_program_set_backend(p, b, err);
  return st != GALLEY_OK ? st : galley_program_run(p, err);
}

/* The program generator and the comparison of entries. */
#include "randprog.h"

/* A result copied out of the program (results die at the next run). */
typedef struct Snap {
  galley_tensor *t; /* a copy in the same format */
  int order;
  int64_t dims[GALLEY_MAX_ORDER];
  int64_t count;
  double fill;
  double *dense;
} Snap;

static void snap_take(Snap *s, const galley_tensor *t) {
  memset(s, 0, sizeof *s);
  galley_error err;
  galley_format f;
  galley_tensor_format(t, &f);
  ck_assert_int_eq(galley_tensor_convert(t, &f, &s->t, &err), GALLEY_OK);
  s->order = galley_tensor_order(t);
  s->count = 1;
  for (int m = 0; m < s->order; m++) {
    s->dims[m] = galley_tensor_dim(t, m);
    s->count *= s->dims[m];
  }
  s->fill = galley_tensor_fill(t);
  s->dense = malloc((size_t)s->count * sizeof *s->dense);
  ck_assert_ptr_nonnull(s->dense);
  ck_assert_int_eq(galley_tensor_to_dense(t, s->dense, s->count, &err),
                   GALLEY_OK);
}

static void snap_free(Snap *s) {
  galley_tensor_free(s->t);
  free(s->dense);
  memset(s, 0, sizeof *s);
}

/* Why two results differ, or NULL when they agree (malloc()ed text). */
static char *snap_diff(const Snap *ref, const Snap *got) {
  if (ref->order != got->order)
    return fmt("order %d, expected %d", got->order, ref->order);
  for (int m = 0; m < ref->order; m++)
    if (ref->dims[m] != got->dims[m])
      return fmt("dim %d is %lld, expected %lld", m, (long long)got->dims[m],
                 (long long)ref->dims[m]);
  if (!same_value(ref->fill, got->fill))
    return fmt("fill %.17g, expected %.17g", got->fill, ref->fill);
  for (int64_t e = 0; e < ref->count; e++)
    if (!same_value(ref->dense[e], got->dense[e]))
      return fmt("entry %lld (row-major) is %.17g, expected %.17g",
                 (long long)e, got->dense[e], ref->dense[e]);
  return NULL;
}

/* ------------------------------------------------------------------ */
/* Running one case                                                    */
/* ------------------------------------------------------------------ */

#define TARGETED UINT64_MAX /* the seed of a hand-written case */

typedef struct Case {
  uint64_t seed;
  char *text;
  int ninputs;
  char names[MAX_INPUTS + 8][16];
  galley_tensor *inputs[MAX_INPUTS + 8];
  int simple_planner; /* plan with --planner=simple's planner */
  int threads;        /* > 1: run the kernels on this many threads */
  int64_t block_work; /* > 0: blocks of this much work (tiny: many) */
} Case;

static void case_free(Case *c) {
  free(c->text);
  for (int k = 0; k < c->ninputs; k++)
    galley_tensor_free(c->inputs[k]);
  memset(c, 0, sizeof *c);
}

static void print_tensor(FILE *f, const char *label, const galley_tensor *t) {
  char fb[256];
  galley_format fm;
  galley_tensor_format(t, &fm);
  galley_format_print(&fm, fb, sizeof fb);
  fprintf(f, "--- %s (format %s)\n", label, fb);
  galley_tensor_write_tns_stream(t, f, NULL);
}

/* Everything needed to reproduce a failure, on stderr. */
static void report(const Case *c, Path path, const char *what,
                   galley_program *p, const Snap *ref, int nref,
                   const Snap *got, int ngot) {
  if (c->seed == TARGETED)
    fprintf(stderr, "\n==== diff FAILURE [%s] targeted case: %s\n",
            path_name(path), what);
  else
    fprintf(stderr,
            "\n==== diff FAILURE [%s] case seed %llu: %s\n"
            "(reproduce: GALLEY_DIFF_ONLY=%llu tests/test_diff)\n",
            path_name(path), (unsigned long long)c->seed, what,
            (unsigned long long)c->seed);
  fprintf(stderr, "--- program\n%s", c->text);
  for (int k = 0; k < c->ninputs; k++)
    print_tensor(stderr, c->names[k], c->inputs[k]);
  for (int k = 0; k < nref; k++)
    print_tensor(stderr, "reference output", ref[k].t);
  for (int k = 0; k < ngot; k++)
    print_tensor(stderr, "kernel output", got[k].t);
  if (p) { /* how the kernel path planned it */
    fprintf(stderr, "--- physical plan\n");
    galley_program_print_physical_plan(p, stderr, NULL);
    const char *src = galley_program_source(p);
    if (src && env_long("GALLEY_DIFF_VERBOSE", 0))
      fprintf(stderr, "--- kernel source\n%s\n", src);
  }
  fprintf(stderr, "==== end of case\n");
}

static int take_outputs(const galley_program *p, Snap *s, int max) {
  int n = galley_program_num_outputs(p);
  ck_assert_int_le(n, max);
  for (int k = 0; k < n; k++) {
    const galley_tensor *t = galley_program_output(p, k);
    ck_assert_ptr_nonnull(t);
    snap_take(&s[k], t);
  }
  return n;
}

/* Parse, bind, run both ways, compare.  Returns 1 when they agree. */
static int check_case(const Case *c, Path path) {
  galley_program *p = NULL;
  galley_error err;
  char *diags = NULL;
  galley_status st = galley_program_parse("diff.tin", c->text,
                                          strlen(c->text), &p, &diags, &err);
  if (st != GALLEY_OK) {
    report(c, path, diags ? diags : err.msg, NULL, NULL, 0, NULL, 0);
    free(diags);
    return 0; /* the generator wrote an invalid program */
  }
  free(diags);
  for (int k = 0; k < c->ninputs; k++)
    ck_assert_msg(galley_program_bind(p, c->names[k], c->inputs[k], &err) ==
                      GALLEY_OK, "bind %s: %s", c->names[k], err.msg);
  if (c->simple_planner)
    galley_program_set_planner(p, GALLEY_PLANNER_SIMPLE);
  if (c->threads > 1)
    ck_assert_int_eq(galley_program_set_threads(p, c->threads, &err), GALLEY_OK);
  if (c->block_work > 0)
    api_program_set_block_work(p, c->block_work);
  enum { MAXOUT = MAX_QUERIES + 8 };
  Snap ref[MAXOUT], got[MAXOUT];
  int nref = 0, ngot = 0, ok = 0;
  st = galley_program_run_reference(p, &err);
  if (st != GALLEY_OK) {
    report(c, path, err.msg, NULL, NULL, 0, NULL, 0); /* a generator bug */
    goto done;
  }
  nref = take_outputs(p, ref, MAXOUT);
  st = run_kernels(p, path, &err);
  if (st != GALLEY_OK) {
    char *why = fmt("kernel path failed: %s: %s", galley_status_name(st),
                    err.msg);
    report(c, path, why, p, ref, nref, NULL, 0);
    free(why);
    goto done;
  }
  ngot = take_outputs(p, got, MAXOUT);
  ok = 1;
  char *why = nref != ngot ? fmt("%d outputs, expected %d", ngot, nref) : NULL;
  for (int k = 0; !why && k < nref; k++) {
    char *d = snap_diff(&ref[k], &got[k]);
    if (d) {
      why = fmt("output %d (%s): %s", k, galley_program_output_name(p, k), d);
      free(d);
    }
  }
  if (why) {
    report(c, path, why, p, ref, nref, got, ngot);
    free(why);
    ok = 0;
  }
done:
  for (int k = 0; k < nref; k++) snap_free(&ref[k]);
  for (int k = 0; k < ngot; k++) snap_free(&got[k]);
  galley_program_free(p);
  return ok;
}

/* Generate case `seed`: the program and its bound tensors. */
static void make_case(Case *c, uint64_t seed) {
  memset(c, 0, sizeof *c);
  /* Neighbouring seeds of test_rng_seed give shifted streams: hash it. */
  test_rng mix = test_rng_seed(seed);
  test_rng r = test_rng_seed(test_rng_next(&mix));
  Gen g;
  memset(&g, 0, sizeof g);
  g.r = &r;
  g.inf_values = chance(&g, 0.1);
  g.nan_values = chance(&g, 0.5);
  /* a few non-finite values among finite ones: exception splitting */
  g.few_nonfinite = !g.inf_values && chance(&g, 0.15);
  g.defer_fills = !env_long("GALLEY_DIFF_NO_DEFERRED_FILLS", 0);
  c->seed = seed;
  c->text = gen_program(&g);
  c->ninputs = g.ninputs;
  /* the index width of each input: its own stream, so that programs and
   * data stay those of the seed */
  test_rng wr = test_rng_seed(test_rng_next(&mix));
  for (int k = 0; k < g.ninputs; k++) {
    snprintf(c->names[k], sizeof c->names[k], "%s", g.in[k].name);
    c->inputs[k] = gen_tensor(&g, &g.in[k], gen_density(&g));
    /* built 32-bit where it fits; every other input 64-bit (a random
     * mask of levels), so kernels read mixed widths */
    unsigned keep32 = (unsigned)test_rng_next(&wr);
    if (test_rng_next(&wr) & 1)
      ck_assert_int_eq(rt_tensor_set_widths(c->inputs[k],
                                            rt_tensor_widths(c->inputs[k]) &
                                                keep32,
                                            NULL),
                       GALLEY_OK);
  }
}

/* Case `seed` of the products generator (exception splitting): a few
 * non-finite values in every input. */
static void make_product_case(Case *c, uint64_t seed) {
  memset(c, 0, sizeof *c);
  test_rng mix = test_rng_seed(seed ^ 0x5bd1e995u);
  test_rng r = test_rng_seed(test_rng_next(&mix));
  Gen g;
  memset(&g, 0, sizeof g);
  g.r = &r;
  g.few_nonfinite = 1;
  c->seed = seed;
  c->text = gen_product_program(&g);
  c->ninputs = g.ninputs;
  for (int k = 0; k < g.ninputs; k++) {
    snprintf(c->names[k], sizeof c->names[k], "%s", g.in[k].name);
    c->inputs[k] = gen_tensor(&g, &g.in[k], gen_density(&g));
  }
}

/* Case `seed` of the joins generator (triangles, inner products: the
 * intersections and marked tables of issue 11). */
static void make_join_case(Case *c, uint64_t seed) {
  memset(c, 0, sizeof *c);
  test_rng mix = test_rng_seed(seed ^ 0x27d4eb2fu);
  test_rng r = test_rng_seed(test_rng_next(&mix));
  Gen g;
  memset(&g, 0, sizeof g);
  g.r = &r;
  g.inf_values = chance(&g, 0.1);
  g.nan_values = chance(&g, 0.5);
  g.few_nonfinite = !g.inf_values && chance(&g, 0.1);
  c->seed = seed;
  c->text = gen_join_program(&g);
  g.list_bias = 1;
  c->ninputs = g.ninputs;
  for (int k = 0; k < g.ninputs; k++) {
    snprintf(c->names[k], sizeof c->names[k], "%s", g.in[k].name);
    c->inputs[k] = gen_tensor(&g, &g.in[k], gen_density(&g));
  }
}

/* Case `seed` of the rows generator (the sliced row loop of issue 11,
 * PhysQuery.sliced): `y[i] = AGG(j: f(A[i, j], x[j], z[j]))` over a
 * matrix of 8-41 rows of random lengths (mostly 0-4, a few long: chunks
 * padded a little or a lot), in CSR mostly, else another format; fills
 * 0, 1 or inf; vectors with inf and NaN now and then (0 * inf is NaN:
 * the padding would not fold to nothing, so the planner must not slice);
 * aggregates and expressions where the fill does and does not make the
 * identity.  Odd cases run on 2 threads in blocks of 1-5 units, so blocks
 * start and end inside chunks. */
static void make_rows_case(Case *c, uint64_t seed) {
  static const char *const bodies[] = {
      "sum(j: A[i, j] * x[j])",
      "sum(j: A[i, j] * x[j] * z[j])",
      "sum(j: A[i, j] * (x[j] + z[j]))",
      "sum(j: x[j] * A[i, j] * 0.5)",
      "sum(j: A[i, j] * exp(z[j]))",
      "sum(j: A[i, j])",
      "2 * sum(j: A[i, j] * x[j]) + z[i]",
      "max(j: A[i, j] * x[j])",
      "sum(j: A[i, j] * A[i, j] * x[j])",
      "sum(j: A[i, j] + x[j])",
  };
  memset(c, 0, sizeof *c);
  test_rng mix = test_rng_seed(seed ^ 0x9e3779b9u);
  test_rng r = test_rng_seed(test_rng_next(&mix));
  int64_t n = 8 + test_rng_below(&r, 34), m = 1 + test_rng_below(&r, 30);
  int nb = (int)(sizeof bodies / sizeof *bodies);
  const char *body = bodies[test_rng_below(&r, nb)];
  /* z[i] reads the rows' index: a square matrix */
  if (strstr(body, "z[i]")) m = n;
  c->seed = seed;
  c->text = fmt("input A[i, j], x[j], z[j]\ny[i] = %s\n", body);
  c->ninputs = 3;
  snprintf(c->names[0], sizeof c->names[0], "A");
  snprintf(c->names[1], sizeof c->names[1], "x");
  snprintf(c->names[2], sizeof c->names[2], "z");
  int64_t *coords = malloc((size_t)(2 * n * m) * sizeof *coords);
  double *vals = malloc((size_t)(n * m) * sizeof *vals);
  ck_assert_ptr_nonnull(coords);
  ck_assert_ptr_nonnull(vals);
  int64_t nnz = 0, dims[2] = {n, m};
  int long_rows = test_rng_below(&r, 3) == 0;
  /* quarters: floats exactly, so the copy keeps them as floats */
  int quarters = test_rng_below(&r, 2) == 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t len = test_rng_below(&r, 5);
    if (long_rows && test_rng_below(&r, 6) == 0) len = test_rng_below(&r, m + 1);
    if (len > m) len = m;
    int64_t first = test_rng_below(&r, m - len + 1);
    for (int64_t t = 0; t < len; t++) { /* distinct, spread columns */
      coords[2 * nnz] = i;
      coords[2 * nnz + 1] = (first + t * 7) % m;
      int64_t u = test_rng_below(&r, 40);
      vals[nnz++] = u == 0   ? 0.0
                    : u == 1 ? -0.0
                    : quarters ? (double)(u - 20) / 4
                               : test_rng_double(&r, -2, 2);
    }
  }
  static const double fills[] = {0, 0, 0, 0, 1, INFINITY};
  double fill = fills[test_rng_below(&r, 6)];
  galley_format f = {.order = 2, .mode_order = {0, 1},
                     .kinds = {GALLEY_DENSE, GALLEY_LIST}};
  int64_t u = test_rng_below(&r, 8);
  if (u == 5) f.kinds[0] = GALLEY_LIST;
  if (u == 6) f.kinds[1] = GALLEY_DENSE;
  if (u == 7) f.mode_order[0] = 1, f.mode_order[1] = 0;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, nnz, coords, vals, fill,
                                          &f, &c->inputs[0], &err), GALLEY_OK);
  if (test_rng_below(&r, 2))
    ck_assert_int_eq(rt_tensor_set_widths(c->inputs[0], 0, NULL), GALLEY_OK);
  for (int k = 1; k < 3; k++) {
    double v[64];
    int special = test_rng_below(&r, 5) == 0;
    for (int64_t j = 0; j < m; j++) {
      v[j] = test_rng_double(&r, -3, 3);
      if (special && test_rng_below(&r, 4) == 0)
        v[j] = test_rng_below(&r, 2) ? INFINITY : NAN;
    }
    galley_format d = galley_format_dense(1);
    ck_assert_int_eq(galley_tensor_from_dense(1, &m, v, 0, &d, &c->inputs[k],
                                              &err), GALLEY_OK);
  }
  free(coords);
  free(vals);
  /* whole-quarter values: the copy kept with A takes floats at any size
   * (the executor reads the copy made here) */
  if (quarters)
    (void)rt_tensor_sliced_ex(c->inputs[0], fill, 0);
  if (seed & 1) {
    c->threads = 2;
    c->block_work = 1 + test_rng_below(&r, 5);
  }
}

/* Run `cases` random cases from the base seed; print at most a few
 * failures in full; fail with the count. */
static void run_random_with(Path path, long cases,
                            void (*make)(Case *, uint64_t)) {
  uint64_t base = (uint64_t)env_long("GALLEY_DIFF_SEED", 20261121);
  long only = env_long("GALLEY_DIFF_ONLY", -1);
  int verbose = env_long("GALLEY_DIFF_VERBOSE", 0) != 0;
  long failures = 0, n = only >= 0 ? 1 : cases;
  uint64_t first_bad = 0;
  for (long k = 0; k < n; k++) {
    Case c;
    make(&c, only >= 0 ? (uint64_t)only : base + (uint64_t)k);
    if (verbose || only >= 0)
      fprintf(stderr, "case %llu:\n%s", (unsigned long long)c.seed, c.text);
    if (!check_case(&c, path) && failures++ == 0)
      first_bad = c.seed;
    case_free(&c);
    if (failures >= 5)
      break; /* enough to act on */
  }
  ck_assert_msg(failures == 0,
                "%s: %ld of the random programs differ from the reference "
                "(first: case seed %llu; details on stderr)",
                path_name(path), failures, (unsigned long long)first_bad);
}

/* ------------------------------------------------------------------ */
/* Backends and the clang cache                                        */
/* ------------------------------------------------------------------ */

/* Clang is there when configure found it (make check exports CLANG). */
static int have_clang(void) {
  const char *c = getenv("CLANG");
  return c && *c;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  return remove(path);
}

static void run_random(Path path, long cases) {
  run_random_with(path, cases, make_case);
}

/* Products over data with a few non-finite values (issue 12's exception
 * splitting), NaN patterns included. */
START_TEST(random_products) {
  run_random_with(PATH_TCC, env_long("GALLEY_DIFF_PRODUCT_CASES", 2000),
                  make_product_case);
}
END_TEST

/* Joins (triangles, inner products) over random formats and fills:
 * two-finger intersections and marked tables (MERGE_MARK). */
START_TEST(random_joins) {
  run_random_with(PATH_TCC, env_long("GALLEY_DIFF_JOIN_CASES", 1500),
                  make_join_case);
}
END_TEST

/* The rows generator under tcc, and a share of it under clang. */
START_TEST(random_rows) {
  run_random_with(PATH_TCC, env_long("GALLEY_DIFF_ROWS_CASES", 600),
                  make_rows_case);
  if (have_clang())
    run_random_with(PATH_CLANG, env_long("GALLEY_DIFF_ROWS_CLANG_CASES", 40),
                    make_rows_case);
}
END_TEST

START_TEST(random_tcc) {
  run_random(PATH_TCC, env_long("GALLEY_DIFF_CASES", 10000));
}
END_TEST

START_TEST(random_clang) {
  if (!have_clang()) {
    fprintf(stderr, "test_diff: no clang configured; clang cases skipped\n");
    return;
  }
  run_random(PATH_CLANG, env_long("GALLEY_DIFF_CLANG_CASES", 300));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Targeted cases                                                      */
/* ------------------------------------------------------------------ */

/* A vector of n entries with every `stride`-th coordinate stored. */
static galley_tensor *vec(int64_t n, int stride, double fill,
                          galley_level_kind kind, double base) {
  int64_t coords[64];
  double vals[64];
  int64_t nnz = 0;
  for (int64_t i = 0; i < n; i += stride) {
    coords[nnz] = i;
    vals[nnz++] = base + (double)i / 4;
  }
  galley_format f = {.order = 1, .mode_order = {0}, .kinds = {kind}};
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(1, &n, nnz, coords, vals, fill, &f,
                                          &t, &err), GALLEY_OK);
  return t;
}

/* A matrix with a pattern given by (i * 7 + j * 3) % mod < keep. */
static galley_tensor *mat(int64_t n, int64_t m, int mod, int keep,
                          double fill, galley_level_kind k0,
                          galley_level_kind k1, int transposed) {
  int64_t coords[2 * 64];
  double vals[64];
  int64_t nnz = 0, dims[2] = {n, m};
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++)
      if ((i * 7 + j * 3) % mod < keep) {
        coords[2 * nnz] = i;
        coords[2 * nnz + 1] = j;
        vals[nnz++] = (double)(i - j) / 2 + 0.25;
      }
  galley_format f = {.order = 2,
                     .mode_order = {transposed, !transposed},
                     .kinds = {k0, k1}};
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, nnz, coords, vals, fill,
                                          &f, &t, &err), GALLEY_OK);
  return t;
}

static galley_tensor *scalar(double v, double fill) {
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(0, NULL, 1, NULL, &v, fill, NULL,
                                          &t, &err), GALLEY_OK);
  return t;
}

/* Check a fixed program with the given inputs (taken over) under tcc, and
 * under clang when `clang` is set and available. */
static void check_fixed_with(const char *text, int n,
                             const char *const *names, galley_tensor **inputs,
                             int clang, int simple_planner) {
  Case c;
  memset(&c, 0, sizeof c);
  c.simple_planner = simple_planner;
  c.seed = TARGETED;
  c.text = fmt("%s", text);
  c.ninputs = n;
  for (int k = 0; k < n; k++) {
    snprintf(c.names[k], sizeof c.names[k], "%s", names[k]);
    c.inputs[k] = inputs[k];
  }
  int ok = check_case(&c, PATH_TCC);
  if (ok && clang && have_clang())
    ok = check_case(&c, PATH_CLANG);
  case_free(&c);
  ck_assert_msg(ok, "targeted program differs (details on stderr):\n%s", text);
}

static void check_fixed(const char *text, int n, const char *const *names,
                        galley_tensor **inputs, int clang) {
  check_fixed_with(text, n, names, inputs, clang, 0);
}

/* Which (level kind, protocol) pairs the physical plan of a program over
 * vectors uses: the plan printer writes `x[i::it]` / `x[i::lu]`.  Marks
 * seen[kind][0] for iterate, seen[kind][1] for lookup. */
static void record_protocols(const char *text, int n, const char *const *names,
                             galley_tensor *const *inputs, int seen[][2]) {
  galley_program *p = NULL;
  galley_error err;
  ck_assert_int_eq(galley_program_parse("proto.tin", text, strlen(text), &p,
                                        NULL, &err), GALLEY_OK);
  for (int k = 0; k < n; k++)
    ck_assert_int_eq(galley_program_bind(p, names[k], inputs[k], &err),
                     GALLEY_OK);
  char *plan = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&plan, &len);
  ck_assert_ptr_nonnull(f);
  galley_status st = galley_program_print_physical_plan(p, f, &err);
  fclose(f);
  ck_assert_msg(st == GALLEY_OK, "physical plan: %s", err.msg);
  for (int k = 0; k < n; k++) {
    galley_format fm;
    galley_tensor_format(inputs[k], &fm);
    char it[32], lu[32];
    snprintf(it, sizeof it, "%s[i::it]", names[k]);
    snprintf(lu, sizeof lu, "%s[i::lu]", names[k]);
    seen[fm.kinds[0]][0] |= strstr(plan, it) != NULL;
    seen[fm.kinds[0]][1] |= strstr(plan, lu) != NULL;
  }
  free(plan);
  galley_program_free(p);
}

static void assert_all_protocols(int seen[][2], const char *what) {
  for (int k = 0; k < GALLEY_NUM_LEVEL_KINDS; k++)
    for (int pr = 0; pr < 2; pr++)
      ck_assert_msg(seen[k][pr], "%s: no plan %s a %s level", what,
                    pr ? "looks up in" : "iterates",
                    galley_level_kind_name((galley_level_kind)k));
}

static const char *const XY[] = {"x", "y"};
static const char *const AB[] = {"A", "B"};

/* Each level kind leading a merge with each kind looked up, both ways. */
START_TEST(lead_kind_pairs) {
  int seen[GALLEY_NUM_LEVEL_KINDS][2] = {{0}};
  static const char *const prog1 =
      "input x[i], y[i]\nz[i] = x[i] * y[i]\ns = x[i] * y[i]\n";
  /* y's absence does not make the product constant: x leads alone, even
   * when it is dense. */
  static const char *const prog2 =
      "input x[i]\ninput y[i] fill 2\nz[i] = x[i] * (y[i] + 1)\n";
  for (int a = 0; a < GALLEY_NUM_LEVEL_KINDS; a++)
    for (int b = 0; b < GALLEY_NUM_LEVEL_KINDS; b++) {
      galley_tensor *in[2] = {vec(9, 3, 0, (galley_level_kind)a, 1),
                              vec(9, 1 + (b & 1), 0, (galley_level_kind)b, -2)};
      record_protocols(prog1, 2, XY, in, seen);
      check_fixed(prog1, 2, XY, in, a == b);
      galley_tensor *in2[2] = {vec(9, 2, 0, (galley_level_kind)a, 1),
                               vec(9, 3, 2, (galley_level_kind)b, -2)};
      record_protocols(prog2, 2, XY, in2, seen);
      check_fixed(prog2, 2, XY, in2, 0);
    }
  assert_all_protocols(seen, "lead merges");
}
END_TEST

/* Union co-iteration of each pair of kinds, with non-zero fills. */
START_TEST(union_kind_pairs) {
  int seen[GALLEY_NUM_LEVEL_KINDS][2] = {{0}};
  static const char *const prog =
      "input x[i], y[i]\nz[i] = x[i] + y[i]\n"
      "m = max(i: x[i] - y[i])\np = prod(i: x[i] + y[i] + 1)\n";
  for (int a = 0; a < GALLEY_NUM_LEVEL_KINDS; a++)
    for (int b = 0; b < GALLEY_NUM_LEVEL_KINDS; b++) {
      galley_tensor *in[2] = {vec(10, 3, 0, (galley_level_kind)a, 1),
                              vec(10, 4, 0, (galley_level_kind)b, -2)};
      record_protocols(prog, 2, XY, in, seen);
      check_fixed(prog, 2, XY, in, a == b);
      galley_tensor *in2[2] = {vec(10, 2, 1, (galley_level_kind)a, 1),
                               vec(10, 5, -1.5, (galley_level_kind)b, -2)};
      check_fixed("input x[i] fill 1\ninput y[i] fill -1.5\n"
                  "z[i] = max(x[i], y[i]) + exp(x[i])\n",
                  2, XY, in2, 0);
    }
  for (int k = 0; k < GALLEY_NUM_LEVEL_KINDS; k++)
    ck_assert_msg(seen[k][0], "no union iterates a %s level",
                  galley_level_kind_name((galley_level_kind)k));
}
END_TEST

/* Two-level pairs, including transposed storage (the planner copies). */
START_TEST(matrix_kind_pairs) {
  int n = 0;
  for (int k0 = 0; k0 < GALLEY_NUM_LEVEL_KINDS; k0++)
    for (int k1 = 0; k1 < GALLEY_NUM_LEVEL_KINDS; k1++, n++) {
      galley_level_kind a0 = (galley_level_kind)k0, a1 = (galley_level_kind)k1;
      galley_level_kind b0 = (galley_level_kind)((k0 + 1) % 4);
      galley_level_kind b1 = (galley_level_kind)((k1 + 3) % 4);
      galley_tensor *in[2] = {mat(5, 6, 5, 2, 0, a0, a1, n & 1),
                              mat(6, 5, 3, 2, 0, b0, b1, (n >> 1) & 1)};
      check_fixed("input A[i, j], B[j, k]\nC[i, k] = A[i, j] * B[j, k]\n"
                  "D[i, j] = A[i, j] + B[j, i]\nE[j, i] = A[i, j] * B[j, i]\n",
                  2, AB, in, k0 == k1);
    }
}
END_TEST

START_TEST(inf_fills_make_nan) {
  galley_tensor *in[2] = {vec(8, 3, INFINITY, GALLEY_LIST, 1),
                          vec(8, 2, 0, GALLEY_HASH, -1)};
  /* inf * 0 is NaN where both are unstored; inf - inf where ... */
  check_fixed("input x[i] fill inf, y[i]\nz[i] = x[i] * y[i]\n"
              "w[i] = x[i] - x[i]\ns = sum(i: x[i] * y[i])\n"
              "m = min(i: x[i] + y[i])\n",
              2, XY, in, 1);
  galley_tensor *in2[2] = {mat(4, 4, 3, 1, -INFINITY, GALLEY_LIST,
                               GALLEY_BYTEMAP, 0),
                           mat(4, 4, 4, 3, INFINITY, GALLEY_DENSE,
                               GALLEY_LIST, 1)};
  check_fixed("input A[i, j] fill -inf\ninput B[i, j] fill inf\n"
              "C[i, k] = min(j: A[i, j] + B[j, k])\n"
              "D[i, j] = A[i, j] * B[i, j]\nm[i] = max(j: A[i, j])\n",
              2, AB, in2, 1);
}
END_TEST

START_TEST(repeated_indices) {
  for (int k0 = 0; k0 < GALLEY_NUM_LEVEL_KINDS; k0++)
    for (int k1 = 0; k1 < GALLEY_NUM_LEVEL_KINDS; k1++) {
      galley_tensor *in[2] = {mat(5, 5, 4, 2, 0, (galley_level_kind)k0,
                                  (galley_level_kind)k1, k0 & 1),
                              vec(5, 2, 0, (galley_level_kind)k1, 1)};
      static const char *const AX[] = {"A", "x"};
      check_fixed("input A[i, j], x[i]\nt = A[i, i]\nd[i] = A[i, i] * x[i]\n"
                  "D[i, j] = A[i, j] * A[j, j]\nE[i] = x[i] + A[i, i]\n"
                  "output t, d, D, E\n",
                  2, AX, in, k0 == k1);
    }
}
END_TEST

START_TEST(scalars_and_outputs) {
  static const char *const SX[] = {"s", "x", "A"};
  galley_tensor *in[3] = {scalar(2.5, 0), vec(6, 2, 0, GALLEY_LIST, 1),
                          mat(6, 6, 3, 1, 0, GALLEY_DENSE, GALLEY_LIST, 0)};
  check_fixed("input s, x[i], A[i, j]\n"
              "a = s * 2 + 1\nb = x[i] * s\nc[i] = x[i] + a\n"
              "d = sum(i: c[i]) * b\ne[j, i] = A[i, j] * c[j]\n"
              "f = 3\noutput f, e, d, c, a\n",
              3, SX, in, 1);
  galley_tensor *in2[3] = {scalar(-1, 0), vec(6, 3, 1, GALLEY_BYTEMAP, 0),
                           mat(6, 6, 2, 1, -1.5, GALLEY_HASH, GALLEY_HASH, 1)};
  check_fixed("input s\ninput x[i] fill 1\ninput A[i, j] fill -1.5\n"
              "n[i] = sum(j: A[i, j] * x[j]) + s\n"
              "m = max(i: min(j: A[i, j] - x[i]))\n"
              "q = prod(i: x[i])\nz = any(i, j: A[i, j] > 0)\n"
              "w = all(i: x[i])\n",
              3, SX, in2, 1);
}
END_TEST

/* A sparse tensor of the given dims with entry e at a pseudo-random
 * coordinate (duplicates summed), values in [-2, 2), in format f. */
static galley_tensor *scattered_coo(int order, const int64_t *dims,
                                    int64_t nnz, uint64_t seed, double fill,
                                    const char *fmt) {
  int64_t *coords = malloc((size_t)(nnz * order + 1) * sizeof *coords);
  double *vals = malloc((size_t)(nnz + 1) * sizeof *vals);
  ck_assert(coords && vals);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t e = 0; e < nnz; e++) {
    for (int m = 0; m < order; m++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      coords[e * order + m] = (int64_t)(x % (uint64_t)dims[m]);
    }
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    vals[e] = (double)(x % 16) / 4 - 2;
  }
  galley_format f;
  galley_error err;
  ck_assert_int_eq(galley_format_parse(fmt, order, &f, &err), GALLEY_OK);
  galley_tensor *t = NULL;
  ck_assert_msg(galley_tensor_from_coo(order, dims, nnz, coords, vals, fill,
                                       &f, &t, &err) == GALLEY_OK, "%s",
                err.msg);
  free(coords);
  free(vals);
  return t;
}

/* The physical plan's text. */
static char *plan_text(const char *text, int n, const char *const *names,
                       galley_tensor *const *inputs) {
  galley_program *p = NULL;
  galley_error err;
  ck_assert_int_eq(galley_program_parse("scatter.tin", text, strlen(text),
                                        &p, NULL, &err), GALLEY_OK);
  for (int k = 0; k < n; k++)
    ck_assert_int_eq(galley_program_bind(p, names[k], inputs[k], &err),
                     GALLEY_OK);
  char *plan = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&plan, &len);
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(galley_program_print_physical_plan(p, f, &err), GALLEY_OK);
  fclose(f);
  galley_program_free(p);
  return plan;
}

/* Results written out of loop order through the scatter workspace
 * (Gustavson's SpGEMM, loops i, j, k): sum and min-plus, every input
 * format, sparse results (hash or bytemap levels), and a key space large
 * enough for the hashed workspace. */
START_TEST(scatter_outputs) {
  static const char *const spgemm =
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n";
  static const char *const minplus =
      "input A[i, j] fill inf\ninput B[j, k] fill inf\n"
      "C[i, k] = min(j: A[i, j] + B[j, k])\n";
  static const char *const fmts[] = {"dense,list", "dense,hash",
                                     "dense,bytemap", "list,list",
                                     "hash,hash"};
  int64_t dims[2] = {200, 200};
  for (int k = 0; k < 5; k++) {
    for (int prog = 0; prog < 2; prog++) {
      double fill = prog ? INFINITY : 0;
      galley_tensor *in[2] = {scattered_coo(2, dims, 300, 3 + k, fill, fmts[k]),
                              scattered_coo(2, dims, 250, 7 + k, fill,
                                            fmts[4 - k])};
      const char *text = prog ? minplus : spgemm;
      char *plan = plan_text(text, 2, AB, in);
      ck_assert_msg(strstr(plan, "loops(i:") && strstr(plan, ", j:") &&
                        strstr(plan, "scatter(bytemap)"),
                    "not a Gustavson plan with a random-write workspace:\n%s",
                    plan);
      free(plan);
      check_fixed(text, 2, AB, in, k == 0);
    }
  }
  /* C[i, k, l]: the scattered (k, l) key space is 1500 * 1500 > 2^21,
   * so the workspace is a hash table (and it grows past its first
   * 1024 slots: row i of C has up to 3 * 900 points) */
  static const char *const wide =
      "input A[i, j], B[j, k, l]\n"
      "C[i, k, l] = sum(j: A[i, j] * B[j, k, l])\n";
  int64_t ad[2] = {3, 3}, bd[3] = {3, 1500, 1500};
  galley_tensor *in[2] = {scattered_coo(2, ad, 7, 11, 0, "dense,list"),
                          scattered_coo(3, bd, 2700, 13, 0, "dense,list,list")};
  char *plan = plan_text(wide, 2, AB, in);
  ck_assert_msg(strstr(plan, "loops(i:") && strstr(plan, ", j:") &&
                    strstr(plan, "scatter(hash)"),
                "not a Gustavson plan with a hashed workspace:\n%s", plan);
  free(plan);
  check_fixed(wide, 2, AB, in, 1);
}
END_TEST

/* A sum, max or min whose body is a constant c where an operand is
 * absent (exp(A * B) is 1 there) is planned by the logical optimizer's
 * fill split (aggregate and count the points that differ from c): equal
 * to the reference, inf and NaN included, and linear in the stored
 * entries.  Before, every output point was visited: 10^12 of them in
 * fill_split_is_linear. */
START_TEST(fill_split) {
  static const char *const progs[] = {
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: exp(A[i, j] * B[j, k]))\n",
      "input A[i, j], B[j, k]\nC[i] = sum(j: exp(A[i, j] * B[j, i]))\n"
      "D[k] = sum(i, j: cos(A[i, j] * B[j, k]) * 2)\n",
      "input A[i, j] fill 1\ninput B[j, k] fill 1\n"
      "C[i, k] = sum(j: 2 ^ (log(A[i, j]) * B[j, k]))\n",
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k] + 3)\n",
      "input A[i, j], B[j, k]\nC[i, k] = max(j: A[i, j] * B[j, k] + 1)\n"
      "D[i, k] = min(j: exp(A[i, j] * B[j, k]))\n"
      "E[k] = max(i, j: A[i, j] * B[j, k] - 0.5)\n"};
  int64_t dims[2] = {40, 40};
  for (int k = 0; k < 5; k++) {
    double fill = k == 2 ? 1 : 0;
    galley_tensor *in[2] = {scattered_coo(2, dims, 90, 5 + k, fill, "dense,list"),
                            scattered_coo(2, dims, 70, 9 + k, fill, "list,list")};
    check_fixed(progs[k], 2, AB, in, k == 0);
  }
  /* inf and nan among the stored values: B's absence still makes the
   * body 1 (A finite), A's does not (0 * inf) */
  int64_t coords[6] = {0, 1, 2, 3, 3, 3};
  double bv[3] = {INFINITY, -INFINITY, NAN}, av[3] = {0.5, -1, 2};
  int64_t d4[2] = {4, 4};
  galley_tensor *in[2] = {NULL, NULL};
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(2, d4, 3, coords, av, 0, NULL,
                                          &in[0], &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_from_coo(2, d4, 3, coords, bv, 0, NULL,
                                          &in[1], &err), GALLEY_OK);
  check_fixed(progs[0], 2, AB, in, 1);
  ck_assert_int_eq(galley_tensor_from_coo(2, d4, 3, coords, av, 0, NULL,
                                          &in[0], &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_from_coo(2, d4, 3, coords, bv, 0, NULL,
                                          &in[1], &err), GALLEY_OK);
  check_fixed(progs[4], 2, AB, in, 0);
  /* every point stored: max(j: f) below c = 1 everywhere (no point
   * holds c), and points equal to c (stored zeros) */
  double full[9] = {-1, -2, 0.5, 0, -0.5, 2, -3, 1, 0};
  int64_t d3[2] = {3, 3};
  for (int t = 0; t < 2; t++) {
    galley_format f;
    ck_assert_int_eq(galley_format_parse(t ? "dense,list" : "dense,dense", 2,
                                         &f, &err), GALLEY_OK);
    ck_assert_int_eq(galley_tensor_from_dense(2, d3, full, 0, &f, &in[0],
                                              &err), GALLEY_OK);
    ck_assert_int_eq(galley_tensor_from_dense(2, d3, full, 0, &f,
                                              &in[1], &err), GALLEY_OK);
    check_fixed(progs[4], 2, AB, in, 0);
  }
}
END_TEST

/* The split keeps small sums accurate where every point is stored: a
 * shift, sum(exp(z) - 1) + n, gives 0 for 4 exp(-50) (an error the
 * comparison's absolute tolerance would hide), so the value is checked
 * to a relative 1e-12. */
START_TEST(fill_split_no_cancellation) {
  static const char *const text =
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: exp(A[i, j] * B[j, k]))\n";
  int64_t da[2] = {40, 4}, db[2] = {4, 40};
  int64_t ca[8] = {0, 0, 0, 1, 0, 2, 0, 3}, cb[8] = {0, 0, 1, 0, 2, 0, 3, 0};
  double va[4] = {-50, -50, -50, -50}, vb[4] = {1, 1, 1, 1};
  galley_tensor *in[2] = {NULL, NULL};
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(2, da, 4, ca, va, 0, NULL, &in[0],
                                          &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_from_coo(2, db, 4, cb, vb, 0, NULL, &in[1],
                                          &err), GALLEY_OK);
  galley_program *p = NULL;
  ck_assert_int_eq(galley_program_parse("c.tin", text, strlen(text), &p, NULL,
                                        &err), GALLEY_OK);
  for (int k = 0; k < 2; k++)
    ck_assert_int_eq(galley_program_bind(p, AB[k], in[k], &err), GALLEY_OK);
  char *plan = plan_text(text, 2, AB, in);
  ck_assert_msg(strstr(plan, "ifelse"), "not split:\n%s", plan);
  free(plan);
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
  int64_t at[2] = {0, 0};
  double want = 4 * exp(-50),
         got = galley_tensor_get(galley_program_output(p, 0), at, NULL);
  ck_assert_msg(fabs(got - want) <= 1e-12 * want, "%.17g, expected %.17g", got,
                want);
  galley_program_free(p);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
}
END_TEST

/* The time limit of the tcase makes this fail without the split. */
START_TEST(fill_split_is_linear) {
  static const char *const text =
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: exp(A[i, j] * B[j, k]))\n";
  galley_tensor *in[2] = {NULL, NULL};
  galley_error err;
  /* 10^6 x 4 times 4 x 10^6 with 3 stored entries: result fill 4 */
  int64_t da[2] = {1000000, 4}, db[2] = {4, 1000000};
  int64_t ca[4] = {0, 0, 999999, 3}, cb[2] = {0, 1};
  double va[2] = {2, 3}, vb[1] = {5};
  ck_assert_int_eq(galley_tensor_from_coo(2, da, 2, ca, va, 0, NULL, &in[0],
                                          &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_from_coo(2, db, 1, cb, vb, 0, NULL, &in[1],
                                          &err), GALLEY_OK);
  galley_program *p = NULL;
  ck_assert_int_eq(galley_program_parse("split.tin", text, strlen(text),
                                        &p, NULL, &err),
                   GALLEY_OK);
  for (int k = 0; k < 2; k++)
    ck_assert_int_eq(galley_program_bind(p, AB[k], in[k], &err), GALLEY_OK);
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
  const galley_tensor *c = galley_program_output(p, 0);
  int64_t at[2] = {0, 1};
  ck_assert_double_eq(galley_tensor_fill(c), 4);
  ck_assert_int_eq(galley_tensor_nnz(c), 1);
  ck_assert_double_eq_tol(galley_tensor_get(c, at, NULL), exp(10) + 3, 1e-9);
  galley_program_free(p);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
}
END_TEST

/* The simple planner plans results it cannot prove finite (x = r / d) as
 * finite, checked when run, like the cost planner: A^T x iterates A's
 * entries instead of looking up all n^2 points (over 7 minutes on mdual
 * before).  When the assumption fails (d has zeros: x holds inf) it plans
 * again and still gives the dense meaning. */
static const char *const transposed_spmv =
    "input A[i, j], r[i], d[i]\nx[i] = ifelse(d[i] > 0, r[i] / d[i], 0)\n"
    "y[j] = sum(i: A[i, j] * x[i])\nz[j] = sum(i: A[i, j] * r[i] / d[i])\n";
static const char *const ARD[] = {"A", "r", "d"};
static const char *const pagerank_spmv =
    "input A[i, j], r[i], d[i]\nx[i] = ifelse(d[i] > 0, r[i] / d[i], 0)\n"
    "y[j] = sum(i: A[i, j] * x[i])\n";

START_TEST(simple_planner_assumes_finite) {
  int64_t dims[2] = {30, 30}, n = 30;
  for (int zeros = 0; zeros < 2; zeros++) {
    double dv[30];
    for (int k = 0; k < 30; k++)
      dv[k] = zeros && k % 4 == 0 ? 0 : 1 + k % 3;
    galley_tensor *in[3] = {scattered_coo(2, dims, 60, 17, 0, "dense,list"),
                            vec(30, 1, 0, GALLEY_DENSE, 1), NULL};
    galley_error err;
    ck_assert_int_eq(galley_tensor_from_dense(1, &n, dv, 0, NULL, &in[2],
                                              &err), GALLEY_OK);
    check_fixed_with(transposed_spmv, 3, ARD, in, 0, 1);
  }
}
END_TEST

/* max over a body that is 1 where an operand is absent: 10^5 x 4 and
 * 4 x 10^5 with 10^4 and 3 entries took 95 s visiting every output
 * point; counted (the fill split), it is linear. */
START_TEST(max_split_is_linear) {
  static const char *const text =
      "input A[i, j], B[j, k]\nC[i, k] = max(j: A[i, j] * B[j, k] + 1)\n"
      "D[i, k] = min(j: exp(A[i, j] * B[j, k]))\n";
  int64_t m = 100000, da[2] = {m, 4}, db[2] = {4, m};
  int64_t na = m / 10;
  int64_t *ca = malloc((size_t)(2 * na) * sizeof *ca);
  double *va = malloc((size_t)na * sizeof *va);
  ck_assert(ca && va);
  for (int64_t e = 0; e < na; e++) {
    ca[2 * e] = 10 * e;
    ca[2 * e + 1] = e % 4;
    va[e] = (double)(e % 3) - 1; /* -1, 0, 1 */
  }
  int64_t cb[6] = {0, 1, 1, 6, 3, m - 1};
  double vb[3] = {5, 1, 2};
  galley_tensor *in[2] = {NULL, NULL};
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(2, da, na, ca, va, 0, NULL, &in[0],
                                          &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_from_coo(2, db, 3, cb, vb, 0, NULL, &in[1],
                                          &err), GALLEY_OK);
  free(ca);
  free(va);
  galley_program *p = NULL;
  ck_assert_int_eq(galley_program_parse("max.tin", text, strlen(text), &p,
                                        NULL, &err), GALLEY_OK);
  for (int k = 0; k < 2; k++)
    ck_assert_int_eq(galley_program_bind(p, AB[k], in[k], &err), GALLEY_OK);
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
  const galley_tensor *c = galley_program_output(p, 0),
                      *d = galley_program_output(p, 1);
  ck_assert_double_eq(galley_tensor_fill(c), 1);
  ck_assert_double_eq(galley_tensor_fill(d), 1);
  /* row 10 * e of A holds e % 3 - 1 at column e % 4; B[0, 1] = 5,
   * B[1, 6] = 1, B[3, m-1] = 2: C[i, k] = max(1, A[i, j] B[j, k] + 1) */
  int64_t at[2] = {10 * 3, 1}; /* e = 3: column 3, value -1: no product */
  ck_assert_double_eq(galley_tensor_get(c, at, NULL), 1);
  at[0] = 10 * 8; /* e = 8: column 0, value 1: 1 * 5 + 1 */
  ck_assert_double_eq(galley_tensor_get(c, at, NULL), 6);
  at[0] = 10 * 4; /* e = 4: column 0, value 0: exp(0) = 1 */
  ck_assert_double_eq(galley_tensor_get(d, at, NULL), 1);
  at[0] = 10 * 12; /* e = 12: column 0, value -1: exp(-5) */
  ck_assert_double_eq_tol(galley_tensor_get(d, at, NULL), exp(-5), 1e-15);
  ck_assert_int_le(galley_tensor_nnz(c), 2 * m / 10);
  galley_program_free(p);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
}
END_TEST

/* The time limit of the tcase makes this fail when the simple planner
 * looks up every (j, i). */
START_TEST(simple_planner_is_linear) {
  int64_t n = 300000, dims[2] = {n, n};
  double *ones = malloc((size_t)n * sizeof *ones);
  ck_assert_ptr_nonnull(ones);
  for (int64_t k = 0; k < n; k++)
    ones[k] = 1 + k % 3;
  galley_tensor *in[3] = {scattered_coo(2, dims, 2 * n, 23, 0, "dense,list"),
                          NULL, NULL};
  galley_error err;
  for (int k = 1; k < 3; k++)
    ck_assert_int_eq(galley_tensor_from_dense(1, &n, ones, 0, NULL, &in[k],
                                              &err), GALLEY_OK);
  free(ones);
  double sums[2][1];
  for (int planner = 0; planner < 2; planner++) {
    galley_program *p = NULL;
    ck_assert_int_eq(galley_program_parse("spmv.tin", pagerank_spmv,
                                          strlen(pagerank_spmv), &p, NULL,
                                          &err), GALLEY_OK);
    for (int k = 0; k < 3; k++)
      ck_assert_int_eq(galley_program_bind(p, ARD[k], in[k], &err), GALLEY_OK);
    galley_program_set_planner(p, planner ? GALLEY_PLANNER_SIMPLE
                                          : GALLEY_PLANNER_COST);
    ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
    for (int o = 0; o < 1; o++) {
      const galley_tensor *y = galley_program_output(p, o);
      double sum = 0;
      for (int64_t j = 0; j < n; j++)
        sum += galley_tensor_get(y, &j, NULL);
      sums[planner][o] = sum;
    }
    galley_program_free(p);
  }
  for (int o = 0; o < 1; o++)
    ck_assert_double_eq_tol(sums[0][o], sums[1][o], 1e-9 * fabs(sums[0][o]));
  for (int k = 0; k < 3; k++)
    galley_tensor_free(in[k]);
}
END_TEST

/* Hypersparse inputs built without a format get a sorted-list root
 * (rt_format_for_entries): every kind of loop over them, both planners. */
START_TEST(hypersparse_roots) {
  static const char *const progs[] = {
      "input A[i, j], B[j, k]\ny[i] = sum(j: A[i, j] * B[j, j])\n"
      "C[i, k] = sum(j: A[i, j] * B[j, k])\nD[i, j] = A[i, j] + B[i, j]\n"
      "E[j, i] = A[i, j] * B[i, j]\nt = sum(i, j: A[i, j])\n",
      "input A[i, j], B[j, k]\nz[j] = sum(i: A[i, j] * B[i, i])\n"
      "m[i] = max(j: A[i, j] - B[i, j])\n"
      "S[i, k] = sum(j: exp(A[i, j] * B[j, k]))\n"};
  int64_t dims[2] = {300, 300};
  for (int k = 0; k < 2; k++)
    for (int simple = 0; simple < 2; simple++) {
      galley_tensor *in[2];
      int64_t coords[2 * 9];
      double vals[9];
      uint64_t x = 77 + (uint64_t)k;
      for (int t = 0; t < 2; t++) {
        for (int e = 0; e < 9; e++) {
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;
          coords[2 * e] = (int64_t)(x % 300);
          coords[2 * e + 1] = (int64_t)(x / 300 % 300);
          vals[e] = (double)(x % 8) - 3.5;
        }
        galley_error err;
        ck_assert_int_eq(galley_tensor_from_coo(2, dims, 9, coords, vals, 0,
                                                NULL, &in[t], &err),
                         GALLEY_OK);
        galley_format f;
        galley_tensor_format(in[t], &f);
        ck_assert_int_eq(f.kinds[0], GALLEY_LIST);
      }
      check_fixed_with(progs[k], 2, AB, in, k == 0 && !simple, simple);
    }
}
END_TEST

/* A symmetric matrix stored with fill 0 but declared with another fill
 * (the declaration wins) is not hollow: the triangle sum's rewrite (each
 * unordered pair once) would read the diagonal's fill as 0 (random case
 * 13556 of seed 777). */
START_TEST(declared_fill_not_hollow) {
  static const char *const XS[] = {"x"};
  int64_t dims[2] = {6, 6};
  int64_t coords[4] = {0, 1, 1, 0};
  double vals[2] = {2, 2};
  for (int stored = 0; stored < 2; stored++) {
    galley_tensor *in[1] = {NULL};
    galley_error err;
    ck_assert_int_eq(galley_tensor_from_coo(2, dims, stored ? 2 : 0, coords,
                                            vals, 0, NULL, &in[0], &err),
                     GALLEY_OK);
    check_fixed("input x[j, i] fill -1.5\nQ0 = x[i, k]\n"
                "T = sum(i, j, k: x[i, j] * x[j, k] * x[i, k])\n",
                1, XS, in, 0);
  }
}
END_TEST

/* Every generated program must parse and bind: the generator itself is
 * checked against the reference alone (fast, no kernels). */
/* A matrix of n rows, row i holding (i * step) % (m + 1) entries at
 * distinct columns, with values that round differently when summed in
 * another order; kinds k0, k1. */
static galley_tensor *ragged(int64_t n, int64_t m, int step,
                             galley_level_kind k0, galley_level_kind k1) {
  int64_t *coords = malloc((size_t)(2 * n * m) * sizeof *coords);
  double *vals = malloc((size_t)(n * m) * sizeof *vals);
  ck_assert_ptr_nonnull(coords);
  ck_assert_ptr_nonnull(vals);
  int64_t nnz = 0, dims[2] = {n, m};
  for (int64_t i = 0; i < n; i++)
    for (int64_t t = 0; t < (i * step) % (m + 1); t++) {
      coords[2 * nnz] = i;
      coords[2 * nnz + 1] = (i * 3 + t * 7) % m; /* 7 is prime to m */
      vals[nnz++] = 0.1 * (double)(t + 1) - (double)i / 3;
    }
  galley_format f = {.order = 2, .mode_order = {0, 1}, .kinds = {k0, k1}};
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, nnz, coords, vals, 0, &f,
                                          &t, &err), GALLEY_OK);
  free(coords);
  free(vals);
  return t;
}

/* The unrolled innermost sums (codegen.c, emit_unrolled): rows and dense
 * ranges from empty to past twice the lanes, so that the plain loop of
 * short ranges, the lanes and their remainder all run (random programs
 * keep every size below 7). */
START_TEST(unrolled_ranges) {
  const galley_level_kind D = GALLEY_DENSE, L = GALLEY_LIST;
  const char *const AX[] = {"A", "x"}, *const SUV[] = {"S", "U", "V"};
  const char *spmv = "input A[i, j], x[j]\ny[i] = sum(j: A[i, j] * x[j])\n";
  galley_tensor *in[3] = {ragged(43, 41, 1, D, L), vec(41, 1, 0, D, 0.3)};
  check_fixed(spmv, 2, AX, in, 1);
  in[0] = ragged(5, 37, 37, D, D); /* dense rows: a dense range */
  in[1] = vec(37, 1, 0, D, 0.7);
  check_fixed(spmv, 2, AX, in, 1);
  const char *sddmm = "input S[i, j], U[i, k], V[j, k]\n"
                      "C[i, j] = S[i, j] * sum(k: U[i, k] * V[j, k])\n";
  in[0] = ragged(9, 9, 2, D, L);
  in[1] = ragged(9, 35, 35, D, D);
  in[2] = ragged(9, 35, 35, D, D);
  check_fixed(sddmm, 3, SUV, in, 1);
}
END_TEST

START_TEST(generator_is_valid) {
  for (uint64_t seed = 1; seed <= 300; seed++) {
    Case c;
    make_case(&c, seed);
    galley_program *p = NULL;
    galley_error err;
    char *diags = NULL;
    galley_status st = galley_program_parse("gen.tin", c.text, strlen(c.text),
                                            &p, &diags, &err);
    ck_assert_msg(st == GALLEY_OK, "seed %llu:\n%s%s", (unsigned long long)seed,
                  c.text, diags ? diags : err.msg);
    free(diags);
    for (int k = 0; k < c.ninputs; k++)
      ck_assert_int_eq(galley_program_bind(p, c.names[k], c.inputs[k], &err),
                       GALLEY_OK);
    st = galley_program_run_reference(p, &err);
    ck_assert_msg(st == GALLEY_OK, "seed %llu:\n%s%s", (unsigned long long)seed,
                  c.text, err.msg);
    galley_program_free(p);
    case_free(&c);
  }
}
END_TEST

/* The physical plan of case c, as text (the caller frees it). */
static char *case_plan(const Case *c) {
  galley_program *p = NULL;
  galley_error err;
  ck_assert_int_eq(galley_program_parse("gen.tin", c->text, strlen(c->text),
                                        &p, NULL, &err), GALLEY_OK);
  for (int k = 0; k < c->ninputs; k++)
    ck_assert_int_eq(galley_program_bind(p, c->names[k], c->inputs[k], &err),
                     GALLEY_OK);
  char *plan = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&plan, &len);
  ck_assert_ptr_nonnull(f);
  galley_status st = galley_program_print_physical_plan(p, f, &err);
  fclose(f);
  ck_assert_msg(st == GALLEY_OK, "physical plan: %s", err.msg);
  galley_program_free(p);
  return plan;
}

/* The kernel source of case c's plan (explain --c; the caller frees it),
 * after the runtime header, which defines every helper. */
static char *case_kernels(const Case *c) {
  galley_program *p = NULL;
  galley_error err;
  ck_assert_int_eq(galley_program_parse("gen.tin", c->text, strlen(c->text),
                                        &p, NULL, &err), GALLEY_OK);
  for (int k = 0; k < c->ninputs; k++)
    ck_assert_int_eq(galley_program_bind(p, c->names[k], c->inputs[k], &err),
                     GALLEY_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_assert_ptr_nonnull(f);
  galley_status st = galley_program_explain(p, f, GALLEY_EXPLAIN_C, &err);
  fclose(f);
  ck_assert_msg(st == GALLEY_OK, "explain --c: %s", err.msg);
  galley_program_free(p);
  const char *end = strstr(text, "#endif /* GALLEY_RT_H */");
  char *kernels = strdup(end ? end : "");
  free(text);
  return kernels;
}

/* The programs random_tcc checks read hash levels at both index widths
 * (make_case builds inputs 32-bit where they fit and widens a random
 * share): kernels that probe a 32-bit and a 64-bit table
 * (galley_rt_hash_locate32/64) and that walk a 32-bit and a 64-bit
 * frozen view (qos32, qos). */
START_TEST(random_programs_hash_widths) {
  long cases = env_long("GALLEY_DIFF_CASES", 10000);
  long seen[4] = {0};
  static const char *const marks[4] = {"galley_rt_hash_locate32(",
                                       "galley_rt_hash_locate64(", ".qos32;",
                                       ".qos;"};
  if (cases > 1000)
    cases = 1000;
  for (long k = 0; k < cases; k++) {
    Case c;
    make_case(&c, (uint64_t)env_long("GALLEY_DIFF_SEED", 20261121) +
                      (uint64_t)k);
    char *src = case_kernels(&c);
    for (int m = 0; m < 4; m++)
      seen[m] += strstr(src, marks[m]) != NULL;
    free(src);
    case_free(&c);
  }
  fprintf(stderr, "test_diff: of %ld random programs, %ld/%ld probe a "
          "32/64-bit hash level, %ld/%ld walk one\n", cases, seen[0],
          seen[1], seen[2], seen[3]);
  for (int m = 0; m < 4; m++)
    ck_assert_msg(seen[m] * 100 >= cases, "only %ld of %ld random programs "
                  "have kernels with %s", seen[m], cases, marks[m]);
}
END_TEST

/* The programs random_joins checks exercise the marked intersection
 * (MERGE_MARK: a sorted list fixed two loops out read through a table),
 * both with the table's zeros skipped and added (a sum's +-0 terms):
 * the plans print `:mark`, and the kernels' source `mk[` and, when the
 * zeros are skipped, `== 0.0) continue`. */
START_TEST(random_programs_mark) {
  long cases = env_long("GALLEY_DIFF_JOIN_CASES", 1500), marked = 0;
  long skipping = 0;
  if (cases > 1500)
    cases = 1500;
  for (long k = 0; k < cases; k++) {
    Case c;
    make_join_case(&c, (uint64_t)env_long("GALLEY_DIFF_SEED", 20261121) +
                           (uint64_t)k);
    char *plan = case_plan(&c);
    int mark = strstr(plan, ":mark") != NULL;
    marked += mark;
    /* an aggregate other than + never adds the zeros */
    skipping += mark && !strstr(plan, "Agg(+");
    free(plan);
    case_free(&c);
  }
  fprintf(stderr, "test_diff: %ld of %ld join programs mark, %ld not by +\n",
          marked, cases, skipping);
  ck_assert_msg(marked * 10 >= cases, "only %ld of %ld join programs plan a "
                "marked intersection", marked, cases);
  ck_assert_msg(skipping * 100 >= cases, "only %ld of %ld join programs mark "
                "under another aggregate than +", skipping, cases);
}
END_TEST

/* The programs random_rows checks exercise the sliced row loop: a good
 * share of their plans print `sliced(A)`, and some do not (a fill or a
 * value that would make the padding count, another aggregate or format). */
START_TEST(random_programs_sliced) {
  long cases = env_long("GALLEY_DIFF_ROWS_CASES", 600), sliced = 0;
  if (cases > 600)
    cases = 600;
  for (long k = 0; k < cases; k++) {
    Case c;
    make_rows_case(&c, (uint64_t)env_long("GALLEY_DIFF_SEED", 20261121) +
                           (uint64_t)k);
    char *plan = case_plan(&c);
    sliced += strstr(plan, "sliced(A)") != NULL;
    free(plan);
    case_free(&c);
  }
  fprintf(stderr, "test_diff: %ld of %ld rows programs slice\n", sliced, cases);
  ck_assert_msg(sliced * 4 >= cases && sliced * 4 <= 3 * cases,
                "%ld of %ld rows programs plan the sliced loop", sliced, cases);
}
END_TEST

int main(void) {
  Suite *s = suite_create("diff");
  TCase *gen = tcase_create("generator");
  tcase_add_test(gen, generator_is_valid);
  tcase_add_test(gen, random_programs_mark);
  tcase_add_test(gen, random_programs_hash_widths);
  tcase_add_test(gen, random_programs_sliced);
  suite_add_tcase(s, gen);
  TCase *tgt = tcase_create("targeted");
  tcase_set_timeout(tgt, 600);
  tcase_add_test(tgt, lead_kind_pairs);
  tcase_add_test(tgt, union_kind_pairs);
  tcase_add_test(tgt, matrix_kind_pairs);
  tcase_add_test(tgt, inf_fills_make_nan);
  tcase_add_test(tgt, repeated_indices);
  tcase_add_test(tgt, scalars_and_outputs);
  tcase_add_test(tgt, scatter_outputs);
  tcase_add_test(tgt, fill_split);
  tcase_add_test(tgt, fill_split_no_cancellation);
  tcase_add_test(tgt, simple_planner_assumes_finite);
  tcase_add_test(tgt, hypersparse_roots);
  tcase_add_test(tgt, declared_fill_not_hollow);
  tcase_add_test(tgt, unrolled_ranges);
  suite_add_tcase(s, tgt);
  TCase *lin = tcase_create("linear");
  tcase_set_timeout(lin, 60);
  tcase_add_test(lin, fill_split_is_linear);
  tcase_add_test(lin, simple_planner_is_linear);
  tcase_add_test(lin, max_split_is_linear);
  suite_add_tcase(s, lin);
  TCase *rnd = tcase_create("random");
  tcase_set_timeout(rnd, 1800);
  tcase_add_test(rnd, random_tcc);
  tcase_add_test(rnd, random_products);
  tcase_add_test(rnd, random_joins);
  tcase_add_test(rnd, random_rows);
  tcase_add_test(rnd, random_clang);
  suite_add_tcase(s, rnd);
  /* The clang backend compiles into a private, cold cache (inherited by
   * the forked tests through the environment), removed afterwards. */
  char dir[] = "/tmp/galley-diff-cache.XXXXXX";
  if (!mkdtemp(dir)) {
    perror("test_diff: mkdtemp");
    return EXIT_FAILURE;
  }
  setenv("GALLEY_CACHE_DIR", dir, 1);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
