/*
 * test_ir.c -- unit tests of the IR core: the arena, the operator
 * registry (every claimed algebraic property checked numerically on a
 * grid of values, the exact property table pinned, eval of every
 * built-in, repeated folding against a naive fold), plan node hashing and
 * equality, and the printer on hand-built programs.
 *
 * The property checks follow the contract of ops.c: commutativity,
 * idempotence and identities are exact on every double (NaN included);
 * annihilators hold for finite x or x equal to the annihilator;
 * associativity and distributivity of the arithmetic ops (+, *) hold
 * exactly on values where no rounding or overflow occurs, and on every
 * value up to rounding whenever neither side is NaN.
 */
#include <check.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "ir.h"
#include "testutil.h"

/* The full grid and the subset on which + and * never round. */
static const double grid[] = {0,   1,     -1,        2.5, -3,
                              1e300, INFINITY, -INFINITY, NAN};
static const double exact_grid[] = {0, 1, -1, 2.5, -3, INFINITY, -INFINITY,
                                    NAN};
#define NGRID ((int)(sizeof grid / sizeof grid[0]))
#define NEXACT ((int)(sizeof exact_grid / sizeof exact_grid[0]))

/* Both NaN, or equal. */
static int same(double a, double b) {
  return (isnan(a) && isnan(b)) || a == b;
}

/* Same up to rounding, or one side NaN (the documented caveat). */
static int same_caveat(double a, double b) {
  if (isnan(a) || isnan(b) || a == b) return 1;
  return fabs(a - b) <= 1e-15 * fmax(fabs(a), fabs(b));
}

static OpRegistry reg(void) {
  OpRegistry r;
  ops_init(&r);
  return r;
}

static double ap1(const Op *op, double x) { return ops_apply(op, &x, 1); }
static double ap2(const Op *op, double x, double y) {
  double v[2] = {x, y};
  return ops_apply(op, v, 2);
}
static double ap3(const Op *op, double x, double y, double z) {
  double v[3] = {x, y, z};
  return ops_apply(op, v, 3);
}

/* Whether op rounds (its associativity/distributivity is up to rounding). */
static int rounds(const Op *op) {
  return strcmp(op->name, "+") == 0 || strcmp(op->name, "*") == 0;
}

/* ------------------------------------------------------------------ */
/* Arena                                                               */
/* ------------------------------------------------------------------ */

START_TEST(arena_many_aligned_zeroed) {
  Arena *a = arena_new();
  ck_assert_ptr_nonnull(a);
  size_t total = 0;
  for (int k = 0; k < 20000; k++) {
    size_t size = (size_t)(k % 97) + 1;
    unsigned char *p = arena_alloc(a, size);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % 16, 0);
    unsigned char any = 0;
    for (size_t m = 0; m < size; m++) any |= p[m];
    ck_assert_uint_eq(any, 0);
    memset(p, 0xAB, size); /* a later overlap would show as nonzero */
    total += size;
  }
  ck_assert_uint_ge(a->bytes, total);
  arena_free(a);
}
END_TEST

START_TEST(arena_large_blocks) {
  Arena *a = arena_new();
  void *small = arena_alloc(a, 8);
  size_t big = (size_t)5 << 20; /* larger than any regular block */
  unsigned char *p = arena_alloc(a, big);
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_eq((uintptr_t)p % 16, 0);
  ck_assert_uint_eq(p[0], 0);
  ck_assert_uint_eq(p[big - 1], 0);
  memset(p, 1, big);
  unsigned char *q = arena_alloc(a, 100);
  ck_assert_ptr_nonnull(q);
  ck_assert_uint_eq(q[99], 0);
  ck_assert_ptr_nonnull(small);
  ck_assert_ptr_ne(arena_alloc(a, 0), arena_alloc(a, 0));
  arena_free(a);
  arena_free(NULL);
}
END_TEST

START_TEST(arena_strings) {
  Arena *a = arena_new();
  char *s = arena_strndup(a, "hello world", 5);
  ck_assert_str_eq(s, "hello");
  char *t = arena_printf(a, "%s-%d-%.1f", "x", 42, 2.5);
  ck_assert_str_eq(t, "x-42-2.5");
  char *e = arena_printf(a, "%s", "");
  ck_assert_str_eq(e, "");
  char longbuf[10000];
  memset(longbuf, 'z', sizeof longbuf - 1);
  longbuf[sizeof longbuf - 1] = '\0';
  char *l = arena_printf(a, "<%s>", longbuf);
  ck_assert_uint_eq(strlen(l), sizeof longbuf + 1);
  ck_assert_int_eq(l[0], '<');
  ck_assert_int_eq(l[sizeof longbuf], '>');
  arena_free(a);
}
END_TEST

START_TEST(arena_oom) {
  Arena *a = arena_new();
  ck_assert_ptr_null(arena_alloc(a, SIZE_MAX));      /* no handler: NULL */
  ck_assert_ptr_null(arena_alloc(a, SIZE_MAX - 64)); /* block too large */
  jmp_buf jb;
  volatile int jumped = 0;
  a->oom = &jb;
  if (setjmp(jb) == 0)
    arena_alloc(a, SIZE_MAX);
  else
    jumped = 1;
  ck_assert_int_eq(jumped, 1);
  a->oom = NULL;
  ck_assert_ptr_nonnull(arena_alloc(a, 16)); /* still usable */
  arena_free(a);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Registry: lookup and the exact property table                       */
/* ------------------------------------------------------------------ */

START_TEST(ops_lookup) {
  OpRegistry r = reg();
  static const char *names[] = {
      "+",   "-",   "*",    "/",   "^",   "==",  "!=",   "<",       "<=",
      ">",   ">=",  "&&",   "||",  "neg", "!",   "exp",  "log",     "sqrt",
      "abs", "sin", "cos",  "tanh", "sigmoid", "relu", "min", "max",
      "ifelse"};
  int n = (int)(sizeof names / sizeof names[0]);
  ck_assert_int_eq(r.nbuiltin, n);
  for (int k = 0; k < n; k++) {
    const Op *op = ops_find(&r, names[k]);
    ck_assert_msg(op != NULL, "missing %s", names[k]);
    ck_assert_str_eq(op->name, names[k]);
    ck_assert_int_eq(op->is_builtin, 1);
    ck_assert_ptr_nonnull(op->eval);
    ck_assert_ptr_nonnull(op->c_template);
  }
  ck_assert_ptr_eq(ops_find(&r, "pow"), ops_find(&r, "^"));
  ck_assert_ptr_null(ops_find(&r, "sum"));
  ck_assert_ptr_null(ops_find(&r, "nosuch"));
  ck_assert_ptr_eq(ops_find_agg(&r, "sum"), ops_find(&r, "+"));
  ck_assert_ptr_eq(ops_find_agg(&r, "prod"), ops_find(&r, "*"));
  ck_assert_ptr_eq(ops_find_agg(&r, "max"), ops_find(&r, "max"));
  ck_assert_ptr_eq(ops_find_agg(&r, "min"), ops_find(&r, "min"));
  ck_assert_ptr_eq(ops_find_agg(&r, "any"), ops_find(&r, "||"));
  ck_assert_ptr_eq(ops_find_agg(&r, "all"), ops_find(&r, "&&"));
  ck_assert_ptr_null(ops_find_agg(&r, "+"));
  ck_assert_ptr_null(ops_find_agg(&r, "exp"));
  ck_assert_ptr_null(ops_find_agg(&r, "-"));
}
END_TEST

/* The expected table, so that a changed claim is a deliberate change. */
typedef struct Expect {
  const char *name;
  int arity;
  unsigned props;
  double identity, annihilator, agg_init;
  RepeatKind repeat;
} Expect;

#define C_ OP_COMMUTATIVE
#define A_ OP_ASSOCIATIVE
#define I_ OP_IDEMPOTENT
#define ID OP_HAS_IDENTITY
#define AN OP_HAS_ANNIHILATOR
#define V_ OP_VARIADIC
static const Expect expect[] = {
    {"+", 2, C_ | A_ | ID | AN | V_, 0, INFINITY, 0, REPEAT_TIMES},
    {"*", 2, C_ | A_ | ID | AN | V_, 1, 0, 1, REPEAT_POW},
    {"max", 2, C_ | A_ | I_ | ID | AN | V_, -INFINITY, INFINITY, -INFINITY,
     REPEAT_SELF},
    {"min", 2, C_ | A_ | I_ | ID | AN | V_, INFINITY, -INFINITY, INFINITY,
     REPEAT_SELF},
    {"||", 2, C_ | A_ | AN | V_, 0, 1, 0, REPEAT_UNKNOWN},
    {"&&", 2, C_ | A_ | AN | V_, 0, 0, 1, REPEAT_UNKNOWN},
    {"==", 2, C_, 0, 0, 0, REPEAT_UNKNOWN},
    {"!=", 2, C_, 0, 0, 0, REPEAT_UNKNOWN},
    {"-", 2, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"/", 2, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"^", 2, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"<", 2, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"<=", 2, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {">", 2, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {">=", 2, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"neg", 1, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"!", 1, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"exp", 1, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"log", 1, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"sqrt", 1, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"abs", 1, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"sin", 1, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"cos", 1, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"tanh", 1, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"sigmoid", 1, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"relu", 1, 0, 0, 0, 0, REPEAT_UNKNOWN},
    {"ifelse", 3, 0, 0, 0, 0, REPEAT_UNKNOWN},
};
#define NEXPECT ((int)(sizeof expect / sizeof expect[0]))

START_TEST(ops_property_table) {
  OpRegistry r = reg();
  ck_assert_int_eq(NEXPECT, r.nbuiltin);
  for (int k = 0; k < NEXPECT; k++) {
    const Expect *e = &expect[k];
    const Op *op = ops_find(&r, e->name);
    ck_assert_msg(op->props == e->props, "%s props", e->name);
    ck_assert_int_eq(op->arity, e->arity);
    ck_assert_int_eq(op->repeat, e->repeat);
    if (op->props & OP_HAS_IDENTITY) ck_assert(same(op->identity, e->identity));
    if (op->props & OP_HAS_ANNIHILATOR)
      ck_assert(same(op->annihilator, e->annihilator));
    if (op->agg_name) ck_assert(same(op->agg_init, e->agg_init));
  }
}
END_TEST

START_TEST(ops_distributivity_claims) {
  OpRegistry r = reg();
  const Op *add = ops_find(&r, "+"), *mul = ops_find(&r, "*"),
           *mx = ops_find(&r, "max"), *mn = ops_find(&r, "min"),
           *sub = ops_find(&r, "-"), *land = ops_find(&r, "&&"),
           *lor = ops_find(&r, "||");
  ck_assert(ops_distributes(mul, add));
  ck_assert(ops_distributes(mul, sub));
  ck_assert(!ops_distributes(mul, mx)); /* only for x >= 0: not a property */
  ck_assert(!ops_distributes(mul, mn));
  ck_assert(ops_distributes(add, mx));
  ck_assert(ops_distributes(add, mn));
  ck_assert(!ops_distributes(add, mul));
  ck_assert(!ops_distributes(add, add));
  ck_assert(ops_distributes(mx, mn));
  ck_assert(ops_distributes(mn, mx));
  ck_assert(ops_distributes(land, lor));
  ck_assert(ops_distributes(lor, land));
  ck_assert(!ops_distributes(sub, add));
  /* user ops naming built-ins and each other */
  Arena *a = arena_new();
  Op *u = arena_alloc(a, sizeof(Op));
  u->name = "tropmul";
  u->arity = 2;
  u->distributes_over[0] = "min";
  u->distributes_over[1] = "myadd";
  Op *g = arena_alloc(a, sizeof(Op));
  g->name = "myadd";
  g->arity = 2;
  ops_add_user(&r, a, u);
  ops_add_user(&r, a, g);
  ck_assert(ops_distributes(u, mn));
  ck_assert(ops_distributes(u, g));
  ck_assert(!ops_distributes(u, add));
  ck_assert(!ops_distributes(mul, g));
  arena_free(a);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Registry: every claim checked numerically                           */
/* ------------------------------------------------------------------ */

static void check_commutative(const Op *op) {
  for (int a = 0; a < NGRID; a++)
    for (int b = 0; b < NGRID; b++) {
      double x = grid[a], y = grid[b];
      ck_assert_msg(same(ap2(op, x, y), ap2(op, y, x)), "%s comm %g %g",
                    op->name, x, y);
    }
}

static void check_associative(const Op *op) {
  const double *g = rounds(op) ? exact_grid : grid;
  int n = rounds(op) ? NEXACT : NGRID;
  for (int a = 0; a < NGRID; a++)
    for (int b = 0; b < NGRID; b++)
      for (int c = 0; c < NGRID; c++) {
        double x = grid[a], y = grid[b], z = grid[c];
        double l = ap2(op, ap2(op, x, y), z), r = ap2(op, x, ap2(op, y, z));
        int ok = rounds(op) ? same_caveat(l, r) : same(l, r);
        ck_assert_msg(ok, "%s assoc %g %g %g", op->name, x, y, z);
        if (a < n && b < n && c < n) {
          x = g[a], y = g[b], z = g[c];
          l = ap2(op, ap2(op, x, y), z);
          r = ap2(op, x, ap2(op, y, z));
          ck_assert_msg(same(l, r), "%s exact assoc %g %g %g", op->name, x,
                        y, z);
        }
      }
}

static void check_identity_and_more(const Op *op) {
  for (int a = 0; a < NGRID; a++) {
    double x = grid[a];
    if (op->props & OP_IDEMPOTENT)
      ck_assert_msg(same(ap2(op, x, x), x), "%s idem %g", op->name, x);
    if (op->props & OP_HAS_IDENTITY) {
      ck_assert_msg(same(ap2(op, op->identity, x), x), "%s id %g", op->name,
                    x);
      ck_assert_msg(same(ap2(op, x, op->identity), x), "%s id %g", op->name,
                    x);
    }
    if ((op->props & OP_HAS_ANNIHILATOR) &&
        (isfinite(x) || x == op->annihilator)) {
      double z = op->annihilator;
      ck_assert_msg(same(ap2(op, z, x), z), "%s ann %g", op->name, x);
      ck_assert_msg(same(ap2(op, x, z), z), "%s ann %g", op->name, x);
    }
  }
}

/* f(x, g(y, z)) = g(f(x, y), f(x, z)); exact for the lattice/logic ops,
 * up to the rounding/NaN caveat for the arithmetic ones. */
static void check_distributes(const Op *f, const Op *g) {
  int arith = rounds(f) || rounds(g);
  for (int a = 0; a < NGRID; a++)
    for (int b = 0; b < NGRID; b++)
      for (int c = 0; c < NGRID; c++) {
        double x = grid[a], y = grid[b], z = grid[c];
        double l = ap2(f, x, ap2(g, y, z));
        double r = ap2(g, ap2(f, x, y), ap2(f, x, z));
        int ok = arith ? same_caveat(l, r) : same(l, r);
        ck_assert_msg(ok, "%s over %s: %g %g %g", f->name, g->name, x, y, z);
        if (arith && isfinite(x) && isfinite(y) && isfinite(z) &&
            fabs(x) < 1e10 && fabs(y) < 1e10 && fabs(z) < 1e10)
          ck_assert_msg(same(l, r), "%s over %s exact: %g %g %g", f->name,
                        g->name, x, y, z);
      }
}

START_TEST(ops_claims_hold) {
  OpRegistry r = reg();
  int ndist = 0;
  for (int k = 0; k < r.nbuiltin; k++) {
    const Op *op = r.builtin[k];
    if (op->props & OP_COMMUTATIVE) check_commutative(op);
    if (op->props & OP_ASSOCIATIVE) check_associative(op);
    check_identity_and_more(op);
    for (int m = 0; m < 4 && op->distributes_over[m]; m++) {
      const Op *g = ops_find(&r, op->distributes_over[m]);
      ck_assert_ptr_nonnull(g);
      check_distributes(op, g);
      ndist++;
    }
  }
  ck_assert_int_ge(ndist, 8);
}
END_TEST

/* The claims we refuse to make are really false somewhere. */
START_TEST(ops_nonclaims_are_false) {
  OpRegistry r = reg();
  const Op *mul = ops_find(&r, "*"), *mx = ops_find(&r, "max"),
           *lor = ops_find(&r, "||"), *land = ops_find(&r, "&&"),
           *sub = ops_find(&r, "-"), *dv = ops_find(&r, "/"),
           *pw = ops_find(&r, "^");
  /* * over max: -1 * max(1, 2) = -2 but max(-1, -2) = -1 */
  ck_assert(ap2(mul, -1, ap2(mx, 1, 2)) != ap2(mx, ap2(mul, -1, 1),
                                              ap2(mul, -1, 2)));
  ck_assert(ap2(lor, 0, 5) != 5);  /* no identity 0 */
  ck_assert(ap2(land, 1, 5) != 5); /* no identity 1 */
  ck_assert(ap2(land, 5, 5) != 5); /* not idempotent */
  ck_assert(ap2(sub, 1, 2) != ap2(sub, 2, 1));
  ck_assert(ap2(sub, 0, 2) != 2); /* 0 is only a right identity */
  ck_assert(ap2(dv, 1, 2) != ap2(dv, 2, 1));
  ck_assert(ap2(dv, ap2(dv, 8, 4), 2) != ap2(dv, 8, ap2(dv, 4, 2)));
  ck_assert(ap2(pw, 1, 3) == 1 && ap2(pw, 3, 1) == 3 && ap2(pw, 2, 3) == 8);
  ck_assert(ap2(pw, 2, ap2(pw, 3, 2)) != ap2(pw, ap2(pw, 2, 3), 2));
}
END_TEST

START_TEST(ops_max_min_nan) {
  OpRegistry r = reg();
  const Op *mx = ops_find(&r, "max"), *mn = ops_find(&r, "min");
  for (int a = 0; a < NGRID; a++) {
    ck_assert(isnan(ap2(mx, NAN, grid[a])));
    ck_assert(isnan(ap2(mx, grid[a], NAN)));
    ck_assert(isnan(ap2(mn, NAN, grid[a])));
    ck_assert(isnan(ap2(mn, grid[a], NAN)));
  }
  double v[5] = {1, 7, NAN, 3, 9};
  ck_assert(isnan(ops_apply(mx, v, 5)));
  ck_assert(isnan(ops_apply(mn, v, 5)));
  v[2] = -2;
  ck_assert(ops_apply(mx, v, 5) == 9);
  ck_assert(ops_apply(mn, v, 5) == -2);
  ck_assert(isnan(ops_apply(mx, (double[]){NAN}, 1)));
}
END_TEST

/* Every built-in on sample values. */
typedef struct Sample {
  const char *name;
  int n;
  double x[3];
  double want;
} Sample;

static const Sample samples[] = {
    {"+", 2, {2, 3}, 5},        {"+", 3, {1, 2, 4}, 7},
    {"-", 2, {2, 3}, -1},       {"*", 2, {2, 3}, 6},
    {"*", 3, {2, 3, 4}, 24},    {"/", 2, {3, 2}, 1.5},
    {"/", 2, {1, 0}, INFINITY}, {"^", 2, {2, 10}, 1024},
    {"^", 2, {4, 0.5}, 2},      {"==", 2, {2, 2}, 1},
    {"==", 2, {NAN, NAN}, 0},   {"!=", 2, {2, 3}, 1},
    {"!=", 2, {NAN, NAN}, 1},   {"<", 2, {2, 3}, 1},
    {"<", 2, {3, 3}, 0},        {"<=", 2, {3, 3}, 1},
    {">", 2, {3, 2}, 1},        {">", 2, {NAN, 2}, 0},
    {">=", 2, {2, 3}, 0},       {"&&", 2, {2, -1}, 1},
    {"&&", 2, {2, 0}, 0},       {"&&", 2, {NAN, 1}, 1},
    {"||", 2, {0, 0}, 0},       {"||", 2, {0, 5}, 1},
    {"||", 3, {0, 0, 3}, 1},    {"neg", 1, {2.5}, -2.5},
    {"!", 1, {0}, 1},           {"!", 1, {3}, 0},
    {"!", 1, {NAN}, 0},         {"exp", 1, {0}, 1},
    {"log", 1, {1}, 0},         {"log", 1, {0}, -INFINITY},
    {"sqrt", 1, {9}, 3},        {"abs", 1, {-2.5}, 2.5},
    {"sin", 1, {0}, 0},         {"cos", 1, {0}, 1},
    {"tanh", 1, {0}, 0},        {"sigmoid", 1, {0}, 0.5},
    {"sigmoid", 1, {INFINITY}, 1}, {"sigmoid", 1, {-INFINITY}, 0},
    {"relu", 1, {-3}, 0},       {"relu", 1, {2.5}, 2.5},
    {"relu", 1, {NAN}, NAN},    {"min", 2, {2, -3}, -3},
    {"max", 2, {2, -3}, 2},     {"max", 3, {-5, -3, -4}, -3},
    {"max", 2, {-INFINITY, -3}, -3}, {"ifelse", 3, {1, 2, 3}, 2},
    {"ifelse", 3, {0, 2, 3}, 3}, {"ifelse", 3, {NAN, 2, 3}, 2},
};

START_TEST(ops_eval_samples) {
  OpRegistry r = reg();
  int seen[64] = {0};
  for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++) {
    const Sample *s = &samples[k];
    const Op *op = ops_find(&r, s->name);
    ck_assert_ptr_nonnull(op);
    double got = ops_apply(op, s->x, s->n);
    ck_assert_msg(same(got, s->want), "%s -> %g, want %g", s->name, got,
                  s->want);
    for (int m = 0; m < r.nbuiltin; m++)
      if (r.builtin[m] == op) seen[m] = 1;
  }
  for (int m = 0; m < r.nbuiltin; m++)
    ck_assert_msg(seen[m], "no sample for %s", r.builtin[m]->name);
  /* sigmoid and relu values that matter for fills */
  ck_assert(ap1(ops_find(&r, "sigmoid"), 2) == 1 / (1 + exp(-2.0)));
  ck_assert(signbit(ap1(ops_find(&r, "relu"), -0.0)) == 0);
  ck_assert(ap3(ops_find(&r, "ifelse"), -1, 7, 8) == 7);
}
END_TEST

/* ------------------------------------------------------------------ */
/* User ops and repeated folding                                       */
/* ------------------------------------------------------------------ */

/* A user op f(x, y) = sin(1 + x*y), defined by a body. */
static Op *user_sin(Arena *a, OpRegistry *r) {
  Loc L = {0, 0};
  Node *p0 = plan_param(a, L, 0), *p1 = plan_param(a, L, 1);
  Node *xy[2] = {p0, p1};
  Node *prod = plan_map(a, L, ops_find(r, "*"), 2, xy);
  Node *one_prod[2] = {plan_const(a, L, 1), prod};
  Node *sum = plan_map(a, L, ops_find(r, "+"), 2, one_prod);
  Node *body = plan_map(a, L, ops_find(r, "sin"), 1, &sum);
  Op *op = arena_alloc(a, sizeof(Op));
  op->name = "f";
  op->arity = 2;
  op->body = body;
  ops_add_user(r, a, op);
  return op;
}

START_TEST(ops_user_apply) {
  Arena *a = arena_new();
  OpRegistry r = reg();
  Op *f = user_sin(a, &r);
  ck_assert_ptr_eq(ops_find(&r, "f"), f);
  ck_assert_ptr_null(ops_find_agg(&r, "f")); /* not associative */
  for (int k = 0; k < NGRID; k++)
    for (int m = 0; m < NGRID; m++) {
      double x = grid[k], y = grid[m];
      ck_assert(same(ap2(f, x, y), sin(1 + x * y)));
    }
  /* g(x) = f(x, 2) * 3: a user op calling another */
  Loc L = {0, 0};
  Node *fa[2] = {plan_param(a, L, 0), plan_const(a, L, 2)};
  Node *call = plan_map(a, L, f, 2, fa);
  Node *ga[2] = {call, plan_const(a, L, 3)};
  Op *g = arena_alloc(a, sizeof(Op));
  g->name = "g";
  g->arity = 1;
  g->body = plan_map(a, L, ops_find(&r, "*"), 2, ga);
  ops_add_user(&r, a, g);
  ck_assert(ap1(g, 0.5) == sin(1 + 0.5 * 2) * 3);
  /* a variadic map with more arguments than fit on the stack */
  Node *many[40];
  double want = -INFINITY, wsum = 0;
  for (int k = 0; k < 40; k++) {
    double v = (k * 37) % 41 - 20;
    many[k] = plan_const(a, L, v);
    want = fmax(want, v);
    wsum += v;
  }
  Op *h = arena_alloc(a, sizeof(Op));
  h->name = "h";
  h->body = plan_map(a, L, ops_find(&r, "max"), 40, many);
  ck_assert(ap1(h, 0) == want);
  h->body = plan_map(a, L, ops_find(&r, "+"), 40, many);
  ck_assert(ap1(h, 0) == wsum);
  /* many user ops: the registry grows in the arena */
  for (int k = 0; k < 100; k++) {
    Op *u = arena_alloc(a, sizeof(Op));
    u->name = arena_printf(a, "u%d", k);
    ops_add_user(&r, a, u);
  }
  ck_assert_int_eq(r.nuser, 102);
  ck_assert_str_eq(ops_find(&r, "u77")->name, "u77");
  ck_assert_ptr_eq(ops_find(&r, "g"), g);
  arena_free(a);
}
END_TEST

/* count copies of x folded naively from the start value. */
static double naive_fold(const Op *op, double x, int count) {
  double acc = (op->props & OP_HAS_IDENTITY) ? op->identity : op->agg_init;
  for (int k = 0; k < count; k++) acc = ap2(op, acc, x);
  return acc;
}

START_TEST(ops_fold_small_counts) {
  OpRegistry r = reg();
  static const char *aggs[] = {"sum", "prod", "max", "min", "any", "all"};
  static const double xs[] = {0,   1,   -1,       2.5,       -3,
                              0.5, NAN, INFINITY, -INFINITY, -0.75};
  for (int k = 0; k < 6; k++) {
    const Op *op = ops_find_agg(&r, aggs[k]);
    for (size_t m = 0; m < sizeof xs / sizeof xs[0]; m++)
      for (int c = 0; c <= 20; c++) {
        double got = ops_fold_repeat(op, xs[m], c);
        double want = naive_fold(op, xs[m], c);
        ck_assert_msg(same(got, want), "%s x=%g n=%d: %g vs %g", aggs[k],
                      xs[m], c, got, want);
      }
  }
}
END_TEST

static long count_calls_n; /* calls of ev_counting_add (test only) */
static double ev_counting_add(const double *x, int n) {
  count_calls_n++;
  return x[0] + x[1];
}

START_TEST(ops_fold_large_counts) {
  OpRegistry r = reg();
  const Op *sum = ops_find_agg(&r, "sum"), *prod = ops_find_agg(&r, "prod");
  const Op *any = ops_find_agg(&r, "any"), *all = ops_find_agg(&r, "all");
  const Op *mx = ops_find_agg(&r, "max");
  ck_assert(ops_fold_repeat(sum, 2.5, 1e20) == 2.5e20);
  ck_assert(ops_fold_repeat(sum, 0, 1e300) == 0);
  ck_assert(ops_fold_repeat(prod, 1, 1e20) == 1);
  ck_assert(ops_fold_repeat(prod, -1, 1e20) == 1);
  ck_assert(ops_fold_repeat(prod, -1, 1e15 + 1) == -1);
  ck_assert(ops_fold_repeat(prod, 0.5, 2000) == 0);
  ck_assert(ops_fold_repeat(prod, 2, 2000) == INFINITY);
  ck_assert(ops_fold_repeat(mx, -7, 1e30) == -7);
  ck_assert(ops_fold_repeat(any, 0, 1e30) == 0);
  ck_assert(ops_fold_repeat(any, -3, 1e30) == 1);
  ck_assert(ops_fold_repeat(all, -3, 1e30) == 1);
  ck_assert(ops_fold_repeat(all, 0, 1e30) == 0);
  /* an associative op without a closed form folds by doubling */
  Op add = {.name = "myadd", .arity = 2,
            .props = OP_COMMUTATIVE | OP_ASSOCIATIVE | OP_HAS_IDENTITY,
            .identity = 0, .agg_init = 0, .eval = ev_counting_add};
  for (int c = 0; c <= 20; c++) {
    ck_assert(ops_fold_repeat(&add, 1.5, c) == 1.5 * c);
    ck_assert(ops_fold_repeat(&add, 1.5, c) == naive_fold(&add, 1.5, c));
  }
  count_calls_n = 0;
  ck_assert(ops_fold_repeat(&add, 1, 3e15) == 3e15);
  ck_assert_int_le(count_calls_n, 2 * 52 + 2);
  count_calls_n = 0;
  ck_assert(ops_fold_repeat(&add, 1, 1e30) == 1e30);
  ck_assert_int_le(count_calls_n, 2 * 100 + 2);
  ck_assert(ops_fold_repeat(&add, 7, 0) == 0);
  /* no identity and no aggregate spelling: starts from x itself */
  Op noid = add;
  noid.props = OP_COMMUTATIVE | OP_ASSOCIATIVE;
  noid.agg_init = 99;
  ck_assert(ops_fold_repeat(&noid, 2, 1) == 2);
  ck_assert(ops_fold_repeat(&noid, 2, 5) == 10);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Plan nodes: hash, equality, printer                                 */
/* ------------------------------------------------------------------ */

/* The printed query k of p, in a static buffer. */
static const char *printed(const Program *p, int k) {
  static char buf[4096];
  FILE *f = fmemopen(buf, sizeof buf, "w");
  plan_print_query(p, &p->queries[k], f);
  fclose(f);
  return buf;
}

static Index *indices(Arena *a, int n, const char *const *names) {
  Index *ix = arena_alloc(a, sizeof(Index) * (size_t)n);
  for (int k = 0; k < n; k++) {
    ix[k].name = names[k];
    ix[k].dim = -1;
  }
  return ix;
}

/* A program with inputs X[i,j], theta[j], alpha, A[i,j] and two queries
 * built by the tests below. */
static Program *sample_program(void) {
  Arena *a = arena_new();
  Program *p = arena_alloc(a, sizeof(Program));
  p->arena = a;
  ops_init(&p->ops);
  static const char *in[] = {"X", "theta", "alpha", "A"};
  static const int order[] = {2, 1, 0, 2};
  p->ninputs = 4;
  p->inputs = arena_alloc(a, sizeof(InputDecl) * 4);
  for (int k = 0; k < 4; k++) {
    p->inputs[k].name = in[k];
    p->inputs[k].order = order[k];
  }
  p->nqueries = 3;
  p->queries = arena_alloc(a, sizeof(Query) * 3);
  return p;
}

START_TEST(plan_printer) {
  Program *p = sample_program();
  Arena *a = p->arena;
  const OpRegistry *r = &p->ops;
  Loc L = {1, 1};
  /* Query(P[i], Map(sigmoid, Agg(+, j, Map(*, X[i,j], theta[j])))) */
  Query *q = &p->queries[0];
  static const char *n0[] = {"i", "j"};
  q->name = "P";
  q->indices = indices(a, 2, n0);
  q->nindices = 2;
  int ij[2] = {0, 1}, j = 1, i = 0;
  q->nout = 1;
  q->out = &i;
  Node *prod_args[2] = {plan_input(a, L, 0, 2, ij), plan_input(a, L, 1, 1, &j)};
  Node *prod = plan_map(a, L, ops_find(r, "*"), 2, prod_args);
  Node *agg = plan_agg(a, L, ops_find_agg(r, "sum"), 1, &j, prod);
  q->expr = plan_map(a, L, ops_find(r, "sigmoid"), 1, &agg);
  q->is_output = 1;
  ck_assert_str_eq(printed(p, 0),
                   "Query(P[i], Map(sigmoid, Agg(+, j, Map(*, X[i,j], "
                   "theta[j]))))");
  /* a scalar with several aggregated indices, constants, a scalar input,
   * a shadowed index and a repeated index */
  q = &p->queries[1];
  static const char *n1[] = {"i", "j", "k", "i"};
  q->name = "t";
  q->indices = indices(a, 4, n1);
  q->nindices = 4;
  int ii[2] = {0, 0}, ij2[2] = {3, 1}, all3[3] = {0, 1, 2}, sh = 3;
  Node *inner = plan_agg(a, L, ops_find_agg(r, "max"), 1, &sh,
                         plan_input(a, L, 3, 2, ij2));
  Node *args[6] = {plan_input(a, L, 3, 2, ii), plan_input(a, L, 2, 0, NULL),
                   plan_const(a, L, INFINITY), plan_const(a, L, -INFINITY),
                   plan_const(a, L, NAN), plan_const(a, L, 0.1)};
  Node *m6 = plan_map(a, L, ops_find(r, "+"), 6, args);
  Node *m2args[2] = {m6, inner};
  Node *m2 = plan_map(a, L, ops_find(r, "||"), 2, m2args);
  q->expr = plan_agg(a, L, ops_find_agg(r, "any"), 3, all3, m2);
  ck_assert_str_eq(printed(p, 1),
                   "Query(t, Agg(||, i, j, k, Map(||, Map(+, A[i,i], alpha, "
                   "inf, -inf, nan, 0.10000000000000001), Agg(max, i#2, "
                   "A[i#2,j]))))");
  /* aliases, a user op, negative zero and -nan */
  q = &p->queries[2];
  static const char *n2[] = {"a", "b"};
  q->name = "Z";
  q->indices = indices(a, 2, n2);
  q->nindices = 2;
  int ab[2] = {0, 1}, ba[2] = {1, 0}, b = 1;
  q->nout = 2;
  q->out = ba;
  Op *f = arena_alloc(a, sizeof(Op));
  f->name = "smax";
  f->arity = 2;
  ops_add_user(&p->ops, a, f);
  Node *fa[4] = {plan_alias(a, L, 0, 1, &b), plan_alias(a, L, 1, 0, NULL),
                 plan_const(a, L, -0.0), plan_const(a, L, -NAN)};
  Node *fm = plan_map(a, L, f, 2, fa);
  Node *nm[3] = {fm, plan_const(a, L, fa[2]->value), fa[3]};
  Node *ie = plan_map(a, L, ops_find(r, "ifelse"), 3, nm);
  Node *neg = plan_map(a, L, ops_find(r, "neg"), 1, &ie);
  Node *acc[2] = {neg, plan_input(a, L, 3, 2, ab)};
  q->expr = plan_map(a, L, ops_find(r, "&&"), 2, acc);
  ck_assert_str_eq(printed(p, 2),
                   "Query(Z[b,a], Map(&&, Map(neg, Map(ifelse, Map(smax, "
                   "Alias(P[b]), Alias(t)), -0, nan)), A[a,b]))");
  /* shadowed names are numbered in reading order, not by id: here the
   * inner aggregate's i has the lower id but is printed second */
  Query save = p->queries[1];
  q = &p->queries[1];
  static const char *n3[] = {"i", "i"};
  q->name = "z";
  q->indices = indices(a, 2, n3);
  q->nindices = 2;
  q->nout = 0;
  int in0[2] = {0, 0}, in1 = 1, id0 = 0;
  Node *inner0 = plan_agg(a, L, ops_find_agg(r, "sum"), 1, &id0,
                          plan_input(a, L, 3, 2, in0));
  Node *sa[2] = {inner0, plan_input(a, L, 1, 1, &in1)};
  q->expr = plan_agg(a, L, ops_find_agg(r, "sum"), 1, &in1,
                     plan_map(a, L, ops_find(r, "+"), 2, sa));
  ck_assert_str_eq(printed(p, 1), "Query(z, Agg(+, i, Map(+, Agg(+, i#2, "
                                  "A[i#2,i#2]), theta[i])))");
  p->queries[1] = save;
  /* the whole program, with its outputs */
  p->queries[2].is_output = 1;
  char buf[4096];
  FILE *out = fmemopen(buf, sizeof buf, "w");
  plan_print(p, out);
  fclose(out);
  ck_assert(strstr(buf, "Query(P[i], ") == buf);
  ck_assert_ptr_nonnull(strstr(buf, ")\nQuery(t, "));
  ck_assert_ptr_nonnull(strstr(buf, ")\nQuery(Z[b,a], "));
  ck_assert_ptr_nonnull(strstr(buf, "))\nOutputs(P, Z)\n"));
  int order[2] = {2, 0};
  p->outputs = order;
  p->noutputs = 2;
  out = fmemopen(buf, sizeof buf, "w");
  plan_print(p, out);
  fclose(out);
  ck_assert_ptr_nonnull(strstr(buf, "))\nOutputs(Z, P)\n"));
  program_free(p);
  program_free(NULL);
}
END_TEST

START_TEST(plan_hash_equal) {
  Arena *a = arena_new();
  OpRegistry r = reg();
  const Op *add = ops_find(&r, "+"), *sub = ops_find(&r, "-"),
           *mul = ops_find(&r, "*"), *eq = ops_find(&r, "==");
  Loc L1 = {1, 2}, L2 = {7, 9};
  int ij[2] = {0, 1}, ji[2] = {1, 0}, j = 1;
  /* build the same tree twice at different locations */
  Node *t[2];
  for (int k = 0; k < 2; k++) {
    Loc L = k ? L2 : L1;
    Node *ma[2] = {plan_input(a, L, 0, 2, ij), plan_input(a, L, 1, 1, &j)};
    Node *m = plan_map(a, L, mul, 2, ma);
    t[k] = plan_agg(a, L, ops_find_agg(&r, "sum"), 1, &j, m);
  }
  ck_assert(t[0] != t[1]);
  ck_assert(plan_equal(t[0], t[1]));
  ck_assert_uint_eq(plan_hash(t[0]), plan_hash(t[1]));
  /* differences: op, indices, tensor, constants, kinds */
  Node *x = plan_input(a, L1, 0, 2, ij), *xt = plan_input(a, L1, 0, 2, ji);
  Node *y = plan_input(a, L1, 1, 2, ij), *al = plan_alias(a, L1, 0, 2, ij);
  ck_assert(!plan_equal(x, xt));
  ck_assert_uint_ne(plan_hash(x), plan_hash(xt));
  ck_assert(!plan_equal(x, y));
  ck_assert_uint_ne(plan_hash(x), plan_hash(y));
  ck_assert(!plan_equal(x, al));
  ck_assert_uint_ne(plan_hash(x), plan_hash(al));
  Node *c1 = plan_const(a, L1, 1), *c2 = plan_const(a, L2, 2);
  Node *c1b = plan_const(a, L2, 1), *nan1 = plan_const(a, L1, NAN);
  Node *nan2 = plan_const(a, L2, -NAN), *z = plan_const(a, L1, 0);
  Node *nz = plan_const(a, L1, -0.0);
  ck_assert(plan_equal(c1, c1b));
  ck_assert_uint_eq(plan_hash(c1), plan_hash(c1b));
  ck_assert(!plan_equal(c1, c2));
  ck_assert_uint_ne(plan_hash(c1), plan_hash(c2));
  ck_assert(plan_equal(nan1, nan2));
  ck_assert_uint_eq(plan_hash(nan1), plan_hash(nan2));
  ck_assert(!plan_equal(z, nz));
  ck_assert(!plan_equal(plan_param(a, L1, 0), plan_param(a, L1, 1)));
  ck_assert(plan_equal(plan_param(a, L1, 1), plan_param(a, L2, 1)));
  /* argument order matters for -, not for +, * or == */
  Node *xy[2] = {x, y}, *yx[2] = {y, x};
  ck_assert(!plan_equal(plan_map(a, L1, sub, 2, xy),
                        plan_map(a, L1, sub, 2, yx)));
  ck_assert_uint_ne(plan_hash(plan_map(a, L1, sub, 2, xy)),
                    plan_hash(plan_map(a, L1, sub, 2, yx)));
  const Op *comm[3] = {add, mul, eq};
  for (int k = 0; k < 3; k++) {
    Node *p = plan_map(a, L1, comm[k], 2, xy), *q = plan_map(a, L2, comm[k], 2, yx);
    ck_assert(plan_equal(p, q));
    ck_assert_uint_eq(plan_hash(p), plan_hash(q));
  }
  ck_assert(!plan_equal(plan_map(a, L1, add, 2, xy),
                        plan_map(a, L1, mul, 2, xy)));
  ck_assert_uint_ne(plan_hash(plan_map(a, L1, add, 2, xy)),
                    plan_hash(plan_map(a, L1, mul, 2, xy)));
  /* multisets: (x, x, y) is not (x, y, y) */
  Node *xxy[3] = {x, x, y}, *xyy[3] = {x, y, y}, *yxx[3] = {y, x, x};
  ck_assert(!plan_equal(plan_map(a, L1, add, 3, xxy),
                        plan_map(a, L1, add, 3, xyy)));
  ck_assert(plan_equal(plan_map(a, L1, add, 3, xxy),
                       plan_map(a, L1, add, 3, yxx)));
  ck_assert_uint_eq(plan_hash(plan_map(a, L1, add, 3, xxy)),
                    plan_hash(plan_map(a, L1, add, 3, yxx)));
  ck_assert(!plan_equal(plan_map(a, L1, add, 2, xy),
                        plan_map(a, L1, add, 3, xxy)));
  /* aggregate indices are a set; op and index matter */
  Node *s_ij = plan_agg(a, L1, add, 2, ij, x);
  Node *s_ji = plan_agg(a, L2, add, 2, ji, x);
  Node *s_j = plan_agg(a, L1, add, 1, &j, x);
  Node *m_ij = plan_agg(a, L1, ops_find(&r, "max"), 2, ij, x);
  ck_assert(plan_equal(s_ij, s_ji));
  ck_assert_uint_eq(plan_hash(s_ij), plan_hash(s_ji));
  ck_assert(!plan_equal(s_ij, s_j));
  ck_assert_uint_ne(plan_hash(s_ij), plan_hash(s_j));
  ck_assert(!plan_equal(s_ij, m_ij));
  ck_assert_uint_ne(plan_hash(s_ij), plan_hash(m_ij));
  ck_assert(!plan_equal(s_ij, plan_agg(a, L1, add, 2, ij, y)));
  ck_assert(plan_equal(NULL, NULL));
  ck_assert(!plan_equal(x, NULL));
  /* constructors copy their arrays */
  int buf[2] = {0, 1};
  Node *cp = plan_input(a, L1, 0, 2, buf);
  buf[0] = 5;
  ck_assert_int_eq(cp->idx[0], 0);
  ck_assert_int_eq(cp->loc.line, 1);
  ck_assert_int_eq(cp->loc.col, 2);
  ck_assert_int_eq(cp->kind, ND_INPUT);
  arena_free(a);
}
END_TEST

/* Random trees: a tree rebuilt from the same seed is equal and hashes
 * equal; different trees (almost surely) hash differently. */
static Node *random_tree(Arena *a, const OpRegistry *r, test_rng *g, int depth) {
  static const char *ops[] = {"+", "-", "*", "max", "exp"};
  Loc L = {0, 0};
  int kind = depth <= 0 ? 0 : (int)test_rng_below(g, 4);
  if (kind == 0) {
    int idx[2] = {(int)test_rng_below(g, 3), (int)test_rng_below(g, 3)};
    return plan_input(a, L, (int)test_rng_below(g, 2), 2, idx);
  }
  if (kind == 1) return plan_const(a, L, (double)test_rng_below(g, 5));
  const Op *op = ops_find(r, ops[test_rng_below(g, 5)]);
  if (kind == 3 && op->agg_name) {
    int idx = (int)test_rng_below(g, 3);
    return plan_agg(a, L, op, 1, &idx,
                    random_tree(a, r, g, depth - 1));
  }
  int n = op->arity;
  Node *args[2];
  for (int k = 0; k < n; k++) args[k] = random_tree(a, r, g, depth - 1);
  return plan_map(a, L, op, n, args);
}

START_TEST(plan_hash_random) {
  Arena *a = arena_new();
  OpRegistry r = reg();
  enum { N = 300 };
  Node *t[N];
  uint64_t h[N];
  for (int k = 0; k < N; k++) {
    test_rng g = test_rng_seed((uint64_t)k);
    test_rng g2 = test_rng_seed((uint64_t)k);
    t[k] = random_tree(a, &r, &g, 4);
    Node *again = random_tree(a, &r, &g2, 4);
    ck_assert(plan_equal(t[k], again));
    h[k] = plan_hash(t[k]);
    ck_assert_uint_eq(h[k], plan_hash(again));
  }
  for (int k = 0; k < N; k++)
    for (int m = 0; m < k; m++)
      if (h[k] == h[m]) ck_assert(plan_equal(t[k], t[m]));
      else ck_assert(!plan_equal(t[k], t[m]));
  arena_free(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ir");
  TCase *tc = tcase_create("arena");
  tcase_add_test(tc, arena_many_aligned_zeroed);
  tcase_add_test(tc, arena_large_blocks);
  tcase_add_test(tc, arena_strings);
  tcase_add_test(tc, arena_oom);
  suite_add_tcase(s, tc);
  tc = tcase_create("ops");
  tcase_add_test(tc, ops_lookup);
  tcase_add_test(tc, ops_property_table);
  tcase_add_test(tc, ops_distributivity_claims);
  tcase_add_test(tc, ops_claims_hold);
  tcase_add_test(tc, ops_nonclaims_are_false);
  tcase_add_test(tc, ops_max_min_nan);
  tcase_add_test(tc, ops_eval_samples);
  tcase_add_test(tc, ops_user_apply);
  tcase_add_test(tc, ops_fold_small_counts);
  tcase_add_test(tc, ops_fold_large_counts);
  suite_add_tcase(s, tc);
  tc = tcase_create("plan");
  tcase_add_test(tc, plan_printer);
  tcase_add_test(tc, plan_hash_equal);
  tcase_add_test(tc, plan_hash_random);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
