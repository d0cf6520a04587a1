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


/* ------------------------------------------------------------------ */
/* Text                                                                */
/* ------------------------------------------------------------------ */

static char *vfmt(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *s = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(s);
  vsnprintf(s, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *s = vfmt(f, ap);
  va_end(ap);
  return s;
}

/* A growing text. */
typedef struct Buf {
  char *s;
  size_t len;
} Buf;

static void buf_add(Buf *b, const char *f, ...)
    __attribute__((format(printf, 2, 3)));
static void buf_add(Buf *b, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *piece = vfmt(f, ap);
  va_end(ap);
  size_t n = strlen(piece);
  b->s = realloc(b->s, b->len + n + 1);
  ck_assert_ptr_nonnull(b->s);
  memcpy(b->s + b->len, piece, n + 1);
  b->len += n;
  free(piece);
}

/* ------------------------------------------------------------------ */
/* The program generator                                               */
/* ------------------------------------------------------------------ */

#define NNAMES 4
static const char *const IDX[NNAMES] = {"i", "j", "k", "l"};

#define MAX_INPUTS 3
#define MAX_QUERIES 3
/* Reference evaluation cost budget per query (pointwise evaluations). */
#define COST_BUDGET 60000.0

/* A tensor the program can read: an input or an earlier query. */
typedef struct Spec {
  char name[8];
  int order;
  int64_t dims[3];
  double fill;       /* declared fill (inputs) */
  double bound_fill; /* fill of the bound tensor: fill, or 0 (declared wins) */
} Spec;

/* User defs the generator may call; emitted only when used. */
enum { DEF_F1 = 1, DEF_F2 = 2, DEF_SMAX = 4, DEF_TPLUS = 8 };
static const char *const DEF_TEXT[4] = {
    "def f1(x, y) = x * y + 1\n",
    "def f2(x) = max(x, 0) * 2 - x\n",
    "def smax(x, y) = max(x, y) [associative, commutative, idempotent, "
    "identity = -inf]\n",
    "def tplus(x, y) = x + y [associative, commutative, identity = 0]\n"};

typedef struct Gen {
  test_rng *r;
  int64_t size[NNAMES]; /* the size of every index name */
  int ninputs;
  Spec in[MAX_INPUTS];
  int nq; /* queries generated so far (readable as aliases) */
  Spec q[MAX_QUERIES];
  unsigned defs;   /* DEF_* used */
  int inf_values;  /* stored values may be +-inf */
  int defer_fills; /* inputs may be bound with fill 0 (declared fill wins) */
} Gen;

/* An expression: its text, its free index names (bit n = IDX[n]) and an
 * estimate of the reference evaluator's work. */
typedef struct Ex {
  char *s;
  unsigned free;
  double cost;
} Ex;

static int chance(Gen *g, double p) {
  return test_rng_double(g->r, 0, 1) < p;
}

static int64_t below(Gen *g, int64_t n) { return test_rng_below(g->r, n); }

static double index_volume(const Gen *g, unsigned names) {
  double v = 1;
  for (int n = 0; n < NNAMES; n++)
    if (names & (1u << n))
      v *= (double)g->size[n];
  return v;
}

/* A random index name of the given size (one always exists: every dim is
 * some name's size). */
static int name_of_size(Gen *g, int64_t size) {
  int cand[NNAMES], nc = 0;
  for (int n = 0; n < NNAMES; n++)
    if (g->size[n] == size)
      cand[nc++] = n;
  ck_assert_int_gt(nc, 0);
  return cand[below(g, nc)];
}

static Ex gen_access(Gen *g, const Spec *t) {
  Ex e = {NULL, 0, 1};
  if (t->order == 0) {
    e.s = fmt("%s", t->name);
    return e;
  }
  Buf b = {0};
  buf_add(&b, "%s[", t->name);
  for (int m = 0; m < t->order; m++) {
    int n = name_of_size(g, t->dims[m]);
    e.free |= 1u << n;
    buf_add(&b, "%s%s", m ? ", " : "", IDX[n]);
  }
  buf_add(&b, "]");
  e.s = b.s;
  return e;
}

static Ex gen_const(Gen *g) {
  static const char *const c[] = {"0", "1", "2", "-1", "0.5", "-1.5", "3",
                                  "0.25"};
  Ex e = {NULL, 0, 1};
  if (chance(g, 0.03))
    e.s = fmt("%s", chance(g, 0.5) ? "inf" : "(-inf)");
  else
    e.s = fmt("%s", c[below(g, 8)]);
  return e;
}

static Ex gen_leaf(Gen *g) {
  double u = test_rng_double(g->r, 0, 1);
  if (g->nq > 0 && u < 0.2)
    return gen_access(g, &g->q[below(g, g->nq)]);
  if (u < 0.85)
    return gen_access(g, &g->in[below(g, g->ninputs)]);
  return gen_const(g);
}

/* Combine children into f(...) text; frees the children's text. */
static Ex ex_join(const char *head, const char *sep, const char *tail, int n,
                  Ex *kids) {
  Buf b = {0};
  Ex e = {NULL, 0, 0};
  buf_add(&b, "%s", head);
  for (int k = 0; k < n; k++) {
    buf_add(&b, "%s%s", k ? sep : "", kids[k].s);
    e.free |= kids[k].free;
    e.cost += kids[k].cost;
    free(kids[k].s);
  }
  buf_add(&b, "%s", tail);
  e.s = b.s;
  return e;
}

static Ex gen_expr(Gen *g, int depth);

static Ex gen_binary(Gen *g, int depth) {
  static const char *const ops[] = {"*", "*", "*", "+", "+", "-", "/",
                                    "<", "<=", ">", ">=", "==", "!=",
                                    "&&", "||"};
  int k = (int)below(g, 15);
  if (k > 6 && chance(g, 0.5))
    k = (int)below(g, 7); /* comparisons and logic less often */
  Ex kids[2] = {gen_expr(g, depth - 1), gen_expr(g, depth - 1)};
  if (k == 6) {
    /* galleyc does not keep the sign of a zero that sparse evaluation
     * skips (man/tin.5: -2 * 0 may come out as +0), so a division by such
     * a zero may give an infinity of the other sign: keep denominators
     * away from zero (they still see inf and nan). */
    Ex d = ex_join("(1.5 + abs(", "", "))", 1, &kids[1]);
    kids[1] = d;
  }
  char sep[8];
  snprintf(sep, sizeof sep, " %s ", ops[k]);
  return ex_join("(", sep, ")", 2, kids);
}

static Ex gen_unary(Gen *g, int depth) {
  static const char *const ops[] = {"-", "abs", "relu", "sigmoid", "tanh",
                                    "!", "exp", "sqrt", "log", "^2"};
  int k = (int)below(g, 10);
  if (k == 6) { /* exp of bounded values only: an input entry or constant */
    Ex x = chance(g, 0.8) ? gen_access(g, &g->in[below(g, g->ninputs)])
                          : gen_const(g);
    return ex_join("exp(", "", ")", 1, &x);
  }
  if (k >= 7 && chance(g, 0.6))
    k = (int)below(g, 6); /* NaN-makers and pow less often */
  Ex x = gen_expr(g, depth - 1);
  if (k == 9)
    return ex_join("(", "", " ^ 2)", 1, &x);
  if (k == 0 || k == 5) {
    char head[4] = {'(', ops[k][0], 0, 0};
    return ex_join(head, "", ")", 1, &x);
  }
  char head[16];
  snprintf(head, sizeof head, "%s(", ops[k]);
  return ex_join(head, "", ")", 1, &x);
}

static Ex gen_call(Gen *g, int depth) {
  int k = (int)below(g, 5);
  if (k == 0 || k == 1) { /* variadic max / min */
    int n = chance(g, 0.3) ? 3 : 2;
    Ex kids[3];
    for (int a = 0; a < n; a++)
      kids[a] = gen_expr(g, depth - 1);
    return ex_join(k ? "min(" : "max(", ", ", ")", n, kids);
  }
  if (k == 2) {
    Ex kids[3] = {gen_expr(g, depth - 1), gen_expr(g, depth - 1),
                  gen_expr(g, depth - 1)};
    return ex_join("ifelse(", ", ", ")", 3, kids);
  }
  if (k == 3) {
    g->defs |= DEF_F1;
    Ex kids[2] = {gen_expr(g, depth - 1), gen_expr(g, depth - 1)};
    return ex_join("f1(", ", ", ")", 2, kids);
  }
  g->defs |= DEF_F2;
  Ex x = gen_expr(g, depth - 1);
  return ex_join("f2(", "", ")", 1, &x);
}

/* OP(names: child) over a non-empty subset of the child's free names. */
static Ex gen_agg(Gen *g, int depth) {
  static const char *const ops[] = {"sum", "sum", "sum", "prod", "max",
                                    "min", "any", "all", "smax", "tplus"};
  Ex x = gen_expr(g, depth - 1);
  if (!x.free)
    return x;
  unsigned pick = 0;
  while (!pick)
    for (int n = 0; n < NNAMES; n++)
      if ((x.free & (1u << n)) && chance(g, 0.5))
        pick |= 1u << n;
  int k = (int)below(g, 10);
  if (k == 3 && index_volume(g, pick) > 36)
    k = 0; /* long products overflow; keep magnitudes sane */
  if (k == 8)
    g->defs |= DEF_SMAX;
  if (k == 9)
    g->defs |= DEF_TPLUS;
  Buf b = {0};
  buf_add(&b, "%s(", ops[k]);
  int first = 1;
  for (int n = 0; n < NNAMES; n++)
    if (pick & (1u << n)) {
      buf_add(&b, "%s%s", first ? "" : ", ", IDX[n]);
      first = 0;
    }
  buf_add(&b, ": %s)", x.s);
  free(x.s);
  Ex e = {b.s, x.free & ~pick, x.cost * index_volume(g, pick)};
  return e;
}

static Ex gen_expr(Gen *g, int depth) {
  if (depth <= 0 || chance(g, 0.2))
    return gen_leaf(g);
  double u = test_rng_double(g->r, 0, 1);
  if (u < 0.45)
    return gen_binary(g, depth);
  if (u < 0.6)
    return gen_unary(g, depth);
  if (u < 0.75)
    return gen_call(g, depth);
  return gen_agg(g, depth);
}

static double gen_fill(Gen *g) {
  double u = test_rng_double(g->r, 0, 1);
  if (u < 0.55) return 0;
  if (u < 0.67) return 1;
  if (u < 0.77) return -1.5;
  if (u < 0.84) return 0.5;
  if (u < 0.92) return INFINITY;
  return -INFINITY;
}

static void gen_inputs(Gen *g) {
  static const char *const names[] = {"A", "B", "C", "x", "W_2"};
  int first = (int)below(g, 5);
  g->ninputs = 1 + (int)below(g, MAX_INPUTS);
  for (int k = 0; k < g->ninputs; k++) {
    Spec *t = &g->in[k];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", names[(first + k) % 5]);
    static const int orders[10] = {0, 0, 1, 1, 1, 2, 2, 2, 3, 3};
    t->order = orders[below(g, 10)];
    for (int m = 0; m < t->order; m++)
      t->dims[m] = g->size[below(g, NNAMES)];
    t->fill = gen_fill(g);
    /* A bound fill of 0 defers to the declaration (refeval.c). */
    t->bound_fill = g->defer_fills && chance(g, 0.04) ? 0 : t->fill;
  }
}

/* Sizes: a few distinct values shared by the names, so that transposed
 * and repeated accesses (A[j,i], A[i,i]) type-check. */
static void gen_sizes(Gen *g) {
  int64_t pool[NNAMES];
  int ndistinct = 1 + (int)below(g, NNAMES);
  for (int d = 0; d < ndistinct; d++)
    pool[d] = 1 + below(g, 6);
  for (int n = 0; n < NNAMES; n++)
    g->size[n] = pool[below(g, ndistinct)];
}

static const char *fill_text(double f) {
  if (isinf(f))
    return f > 0 ? "inf" : "-inf";
  static const struct { double v; const char *s; } known[] = {
      {0, "0"}, {1, "1"}, {-1.5, "-1.5"}, {0.5, "0.5"}};
  for (int k = 0; k < 4; k++)
    if (f == known[k].v)
      return known[k].s;
  return "0";
}

/* One query `Qn[lhs] = rhs`: lhs a random arrangement of some of the free
 * names (the rest are summed implicitly; a name may not repeat on the
 * left). */
static void gen_query(Gen *g, Buf *body) {
  Ex e;
  unsigned lhs_set;
  int lhs[4], nlhs;
  for (int attempt = 0;; attempt++) {
    e = gen_expr(g, 1 + (int)below(g, 3));
    lhs_set = 0;
    nlhs = 0;
    for (int n = 0; n < NNAMES; n++)
      if ((e.free & (1u << n)) && nlhs < 3 && chance(g, 0.65)) {
        lhs_set |= 1u << n;
        lhs[nlhs++] = n;
      }
    if (e.cost * index_volume(g, e.free) <= COST_BUDGET || attempt > 20)
      break;
    free(e.s);
  }
  for (int k = nlhs - 1; k > 0; k--) { /* shuffle: transposed outputs */
    int o = (int)below(g, k + 1), t = lhs[k];
    lhs[k] = lhs[o];
    lhs[o] = t;
  }
  Spec *q = &g->q[g->nq];
  memset(q, 0, sizeof *q);
  snprintf(q->name, sizeof q->name, "Q%d", g->nq);
  q->order = nlhs;
  buf_add(body, "%s", q->name);
  for (int k = 0; k < nlhs; k++) {
    q->dims[k] = g->size[lhs[k]];
    buf_add(body, "%s%s", k ? ", " : "[", IDX[lhs[k]]);
  }
  buf_add(body, "%s = %s\n", nlhs ? "]" : "", e.s);
  free(e.s);
  g->nq++;
}

/* The whole program text. */
static char *gen_program(Gen *g) {
  gen_sizes(g);
  gen_inputs(g);
  g->nq = 0;
  g->defs = 0;
  Buf body = {0}, text = {0};
  int nq = 1 + (int)below(g, MAX_QUERIES);
  for (int k = 0; k < nq; k++)
    gen_query(g, &body);
  if (chance(g, 0.25)) { /* an explicit output list, in any order */
    buf_add(&body, "output ");
    int first = 1, start = (int)below(g, nq);
    for (int k = 0; k < nq; k++) {
      int qn = (start + k) % nq;
      if (first || chance(g, 0.5)) {
        buf_add(&body, "%s%s", first ? "" : ", ", g->q[qn].name);
        first = 0;
      }
    }
    buf_add(&body, "\n");
  }
  buf_add(&text, "# generated\n");
  for (int d = 0; d < 4; d++)
    if (g->defs & (1u << d))
      buf_add(&text, "%s", DEF_TEXT[d]);
  for (int k = 0; k < g->ninputs; k++) {
    const Spec *t = &g->in[k];
    buf_add(&text, "input %s", t->name);
    for (int m = 0; m < t->order; m++)
      buf_add(&text, "%s%s", m ? ", " : "[", IDX[name_of_size(g, t->dims[m])]);
    buf_add(&text, "%s", t->order ? "]" : "");
    if (t->fill != 0 || chance(g, 0.1))
      buf_add(&text, " fill %s", fill_text(t->fill));
    buf_add(&text, "\n");
  }
  buf_add(&text, "%s", body.s);
  free(body.s);
  return text.s;
}

/* ------------------------------------------------------------------ */
/* Random tensors                                                      */
/* ------------------------------------------------------------------ */

static double gen_value(Gen *g, double fill) {
  double u = test_rng_double(g->r, 0, 1);
  if (u < 0.75) { /* quarters: sums and products mostly stay exact */
    int64_t k = below(g, 24) - 12;
    return (double)(k >= 0 ? k + 1 : k) / 4;
  }
  if (u < 0.83) return 0;    /* an explicit zero */
  if (u < 0.9) return fill;  /* an explicit fill */
  if (u < 0.94 && g->inf_values)
    return chance(g, 0.5) ? INFINITY : -INFINITY;
  return test_rng_double(g->r, -3, 3);
}

/* A random storage format: any level kinds, any mode order. */
static galley_format gen_format(Gen *g, int order) {
  galley_format f;
  memset(&f, 0, sizeof f);
  f.order = order;
  for (int l = 0; l < order; l++) {
    f.mode_order[l] = l;
    f.kinds[l] = (galley_level_kind)below(g, GALLEY_NUM_LEVEL_KINDS);
  }
  for (int l = order - 1; l > 0; l--) {
    int o = (int)below(g, l + 1), t = f.mode_order[l];
    f.mode_order[l] = f.mode_order[o];
    f.mode_order[o] = t;
  }
  return f;
}

/* A random tensor of spec t in a random format (built in the default
 * format, then converted, so conversions and transposes run too). */
static galley_tensor *gen_tensor(Gen *g, const Spec *t, double density) {
  int64_t total = 1;
  for (int m = 0; m < t->order; m++)
    total *= t->dims[m];
  int64_t *coords = calloc((size_t)(total * 3 + 1), sizeof *coords);
  double *vals = calloc((size_t)total + 1, sizeof *vals);
  ck_assert(coords && vals);
  int64_t nnz = 0;
  for (int64_t e = 0; e < total; e++) {
    if (!chance(g, density))
      continue;
    int64_t rest = e;
    for (int m = t->order - 1; m >= 0; m--) {
      coords[nnz * t->order + m] = rest % t->dims[m];
      rest /= t->dims[m];
    }
    vals[nnz++] = gen_value(g, t->fill);
  }
  galley_tensor *built = NULL, *conv = NULL;
  galley_error err;
  galley_status st = galley_tensor_from_coo(t->order, t->dims, nnz, coords,
                                            vals, t->bound_fill, NULL, &built,
                                            &err);
  ck_assert_msg(st == GALLEY_OK, "from_coo: %s", err.msg);
  free(coords);
  free(vals);
  galley_format f = gen_format(g, t->order);
  st = galley_tensor_convert(built, &f, &conv, &err);
  ck_assert_msg(st == GALLEY_OK, "convert: %s", err.msg);
  galley_tensor_free(built);
  return conv;
}

static double gen_density(Gen *g) {
  double u = test_rng_double(g->r, 0, 1);
  if (u < 0.1) return 0;
  if (u < 0.2) return 1;
  return test_rng_double(g->r, 0.05, 0.95);
}

/* ------------------------------------------------------------------ */
/* Comparison                                                          */
/* ------------------------------------------------------------------ */

static int same_value(double a, double b) {
  if (isnan(a) || isnan(b))
    return isnan(a) && isnan(b);
  if (a == b)
    return 1;
  if (isinf(a) || isinf(b))
    return 0;
  return fabs(a - b) <= 1e-12 + 1e-9 * fmax(fabs(a), fabs(b));
}

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
  g.defer_fills = !env_long("GALLEY_DIFF_NO_DEFERRED_FILLS", 0);
  c->seed = seed;
  c->text = gen_program(&g);
  c->ninputs = g.ninputs;
  for (int k = 0; k < g.ninputs; k++) {
    snprintf(c->names[k], sizeof c->names[k], "%s", g.in[k].name);
    c->inputs[k] = gen_tensor(&g, &g.in[k], gen_density(&g));
  }
}

/* Run `cases` random cases from the base seed; print at most a few
 * failures in full; fail with the count. */
static void run_random(Path path, long cases) {
  uint64_t base = (uint64_t)env_long("GALLEY_DIFF_SEED", 20261121);
  long only = env_long("GALLEY_DIFF_ONLY", -1);
  int verbose = env_long("GALLEY_DIFF_VERBOSE", 0) != 0;
  long failures = 0, n = only >= 0 ? 1 : cases;
  uint64_t first_bad = 0;
  for (long k = 0; k < n; k++) {
    Case c;
    make_case(&c, only >= 0 ? (uint64_t)only : base + (uint64_t)k);
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
static void check_fixed(const char *text, int n, const char *const *names,
                        galley_tensor **inputs, int clang) {
  Case c;
  memset(&c, 0, sizeof c);
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

/* Every generated program must parse and bind: the generator itself is
 * checked against the reference alone (fast, no kernels). */
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

int main(void) {
  Suite *s = suite_create("diff");
  TCase *gen = tcase_create("generator");
  tcase_add_test(gen, generator_is_valid);
  suite_add_tcase(s, gen);
  TCase *tgt = tcase_create("targeted");
  tcase_set_timeout(tgt, 600);
  tcase_add_test(tgt, lead_kind_pairs);
  tcase_add_test(tgt, union_kind_pairs);
  tcase_add_test(tgt, matrix_kind_pairs);
  tcase_add_test(tgt, inf_fills_make_nan);
  tcase_add_test(tgt, repeated_indices);
  tcase_add_test(tgt, scalars_and_outputs);
  suite_add_tcase(s, tgt);
  TCase *rnd = tcase_create("random");
  tcase_set_timeout(rnd, 1800);
  tcase_add_test(rnd, random_tcc);
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
