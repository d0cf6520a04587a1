/*
 * randprog.h -- the seeded generator of random .tin programs and bound
 * tensors, and the entry comparison, shared by the differential tests
 * (test_diff.c: kernels vs the reference evaluator; test_physopt.c: the
 * optimizers' plans vs the reference).  Header-only (static functions):
 * each test includes it once.
 */
#ifndef GALLEY_RANDPROG_H
#define GALLEY_RANDPROG_H

#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "testutil.h"

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
  int nan_values;  /* with inf_values: NaN too */
  int few_nonfinite; /* 1-3 stored entries of each input are made inf,
                        -inf or NaN (exception splitting, issue 12) */
  int defer_fills; /* inputs may be bound with fill 0 (declared fill wins) */
  int list_bias;   /* formats: most levels sorted lists (the joins) */
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
  int k = (int)below(g, 6);
  if (k == 5) {
    /* ifelse(x != 0, y / x, 0): finite whenever x and y are, which value
     * ranges cannot prove (x's range holds 0): the planner assumes it
     * and the run checks (issue 12) */
    Ex x = gen_expr(g, depth - 1), y = gen_expr(g, depth - 1);
    Ex e = {fmt("ifelse(%s != 0, %s / %s, 0)", x.s, y.s, x.s),
            x.free | y.free, 2 * x.cost + y.cost};
    free(x.s);
    free(y.s);
    return e;
  }
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

/* A program of products (the shapes exception splitting takes apart,
 * issue 12): each query sums (or only maps) a product of two or three
 * factors, each an access of an input, an access under a map that keeps
 * it finite (min(X, 2), relu) or a constant.  With few_nonfinite data. */
static Ex gen_factor(Gen *g) {
  double u = test_rng_double(g->r, 0, 1);
  if (u < 0.1)
    return gen_const(g);
  Ex x = g->nq > 0 && u < 0.25 ? gen_access(g, &g->q[below(g, g->nq)])
                               : gen_access(g, &g->in[below(g, g->ninputs)]);
  if (u < 0.75)
    return x;
  return ex_join(chance(g, 0.5) ? "min(" : "max(", "", ", 2)", 1, &x);
}

__attribute__((unused)) static char *gen_product_program(Gen *g) {
  gen_sizes(g);
  gen_inputs(g);
  g->nq = 0;
  g->defs = 0;
  Buf text = {0};
  buf_add(&text, "# generated (products)\n");
  for (int k = 0; k < g->ninputs; k++) {
    const Spec *t = &g->in[k];
    buf_add(&text, "input %s", t->name);
    for (int m = 0; m < t->order; m++)
      buf_add(&text, "%s%s", m ? ", " : "[", IDX[name_of_size(g, t->dims[m])]);
    buf_add(&text, "%s", t->order ? "]" : "");
    if (t->fill != 0)
      buf_add(&text, " fill %s", fill_text(t->fill));
    buf_add(&text, "\n");
  }
  int nq = 1 + (int)below(g, 2);
  for (int q = 0; q < nq; q++) {
    Ex f[3];
    int nf = 2 + (int)below(g, 2);
    for (int k = 0; k < nf; k++)
      f[k] = gen_factor(g);
    Ex e = ex_join("", " * ", "", nf, f);
    unsigned lhs_set = 0;
    int lhs[4], nlhs = 0;
    for (int n = 0; n < NNAMES; n++)
      if ((e.free & (1u << n)) && nlhs < 3 && chance(g, 0.5)) {
        lhs_set |= 1u << n;
        lhs[nlhs++] = n;
      }
    Spec *out = &g->q[g->nq];
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "Q%d", g->nq);
    out->order = nlhs;
    buf_add(&text, "%s", out->name);
    for (int k = 0; k < nlhs; k++) {
      out->dims[k] = g->size[lhs[k]];
      buf_add(&text, "%s%s", k ? ", " : "[", IDX[lhs[k]]);
    }
    buf_add(&text, "%s = %s\n", nlhs ? "]" : "", e.s);
    free(e.s);
    g->nq++;
  }
  return text.s;
}

/* A program of joins over three distinct names a, b, c (issue 11's
 * intersections, MERGE_MARK): the triangle X[a,b] * Y[b,c] * Z[a,c] of
 * three inputs or of one square input read thrice, or the inner product
 * X[a,c] * Y[b,c]; an access may read its input transposed; an optional
 * constant factor; summed (or max, min, tplus) over the names not kept
 * as outputs.  Fills are mostly 0 (the intersections need conjuncts), the
 * formats random (a sorted list fixed two loops out gets marked). */
static char *gen_join_program(Gen *g) {
  int64_t n = 1 + below(g, 14);
  int names[NNAMES] = {0, 1, 2, 3};
  for (int k = NNAMES - 1; k > 0; k--) {
    int o = (int)below(g, k + 1), t = names[k];
    names[k] = names[o];
    names[o] = t;
  }
  int shape = (int)below(g, 3); /* 0 triangle, 1 one input thrice, 2 dot */
  for (int k = 0; k < NNAMES; k++)
    g->size[k] = shape == 1 ? n : 1 + below(g, 14);
  /* the accesses' (row, column) names */
  int acc[3][2] = {{names[0], names[1]}, {names[1], names[2]},
                   {names[0], names[2]}};
  if (shape == 2) {
    acc[0][1] = names[2];
    acc[1][0] = names[1];
  }
  int nacc = shape == 2 ? 2 : 3;
  static const char *const in_names[] = {"A", "B", "C"};
  g->ninputs = shape == 1 ? 1 : nacc;
  for (int k = 0; k < g->ninputs; k++) {
    Spec *t = &g->in[k];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", in_names[k]);
    t->order = 2;
    t->dims[0] = g->size[acc[k][0]];
    t->dims[1] = g->size[acc[k][1]];
    t->fill = chance(g, 0.8) ? 0 : gen_fill(g);
    t->bound_fill = t->fill;
  }
  g->nq = 0;
  g->defs = 0;
  Buf text = {0}, e = {0};
  if (chance(g, 0.2)) {
    Ex c = gen_const(g);
    buf_add(&e, "%s * ", c.s);
    free(c.s);
  }
  int decl[3][2];
  int first = (int)below(g, nacc); /* the product in any rotation */
  for (int m = 0; m < nacc; m++) {
    int k = (first + m) % nacc, in = shape == 1 ? 0 : k;
    int swap = shape == 1 ? 0 : chance(g, 0.25); /* read it transposed */
    decl[in][0] = acc[k][swap];
    decl[in][1] = acc[k][!swap];
    g->in[in].dims[0] = g->size[decl[in][0]];
    g->in[in].dims[1] = g->size[decl[in][1]];
    buf_add(&e, "%s%s[%s, %s]", m ? " * " : "", in_names[in],
            IDX[decl[in][0]], IDX[decl[in][1]]);
  }
  buf_add(&text, "# generated (joins)\n");
  for (int k = 0; k < g->ninputs; k++) {
    const Spec *t = &g->in[k];
    buf_add(&text, "input %s[%s, %s]", t->name, IDX[decl[k][0]],
            IDX[decl[k][1]]);
    if (t->fill != 0)
      buf_add(&text, " fill %s", fill_text(t->fill));
    buf_add(&text, "\n");
  }
  static const char *const aggs[] = {"sum", "sum", "sum", "sum", "sum",
                                     "max", "min", "tplus"};
  int ag = (int)below(g, 8);
  if (ag == 7)
    g->defs |= DEF_TPLUS;
  if (g->defs & DEF_TPLUS)
    buf_add(&text, "%s", DEF_TEXT[3]);
  unsigned used = 0;
  for (int k = 0; k < nacc; k++)
    used |= 1u << acc[k][0] | 1u << acc[k][1];
  Buf lhs = {0}, red = {0};
  for (int k = 0; k < 3; k++) {
    int nm = names[k];
    if (!(used & (1u << nm)))
      continue;
    Buf *b = chance(g, 0.25) ? &lhs : &red;
    buf_add(b, "%s%s", b->s ? ", " : "", IDX[nm]);
  }
  if (red.s)
    buf_add(&text, "Q0%s%s%s = %s(%s: %s)\n", lhs.s ? "[" : "",
            lhs.s ? lhs.s : "", lhs.s ? "]" : "", aggs[ag], red.s, e.s);
  else
    buf_add(&text, "Q0[%s] = %s\n", lhs.s, e.s);
  Spec *out = &g->q[g->nq++];
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "Q0");
  free(lhs.s);
  free(red.s);
  free(e.s);
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
  if (u < 0.94 && g->inf_values) {
    if (g->nan_values && chance(g, 0.3))
      return NAN;
    return chance(g, 0.5) ? INFINITY : -INFINITY;
  }
  return test_rng_double(g->r, -3, 3);
}

/* A random storage format: any level kinds, any mode order. */
static galley_format gen_format(Gen *g, int order) {
  galley_format f;
  memset(&f, 0, sizeof f);
  f.order = order;
  for (int l = 0; l < order; l++) {
    f.mode_order[l] = l;
    f.kinds[l] = g->list_bias && chance(g, 0.6)
                     ? GALLEY_LIST
                     : (galley_level_kind)below(g, GALLEY_NUM_LEVEL_KINDS);
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
  if (g->few_nonfinite && nnz > 0) {
    static const double bad[3] = {INFINITY, -INFINITY, NAN};
    for (int64_t k = 1 + below(g, 3); k > 0; k--)
      vals[below(g, nnz)] = bad[below(g, 3)];
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

#endif /* GALLEY_RANDPROG_H */
