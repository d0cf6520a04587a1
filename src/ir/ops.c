/*
 * ops.c -- the operator registry: one static const table of built-in
 * pointwise functions and aggregates with their algebraic properties, plus
 * each program's user defs.
 *
 * What a property claim means.  The optimizer may rely on every flag, so
 * a flag is set only when it holds for all doubles, with these documented
 * exceptions, which are the ones tin.md tolerates or ir.h spells out:
 *  - rounding: OP_ASSOCIATIVE and distributes_over for `+` and `*` hold in
 *    real arithmetic; in floating point the two sides may differ by
 *    rounding (tin.md section 1: "floating-point sums may differ by
 *    rounding only") and by overflow (1e300 * 1e300 * 0).
 *  - non-finite values: a distributive rewrite may turn a finite or
 *    infinite result into NaN or back when it creates or removes an
 *    inf - inf or 0 * inf (x = -inf, y + z = 2.5 - 3: -inf * -0.5 is
 *    +inf, but -inf*2.5 + -inf*-3 is nan).  Whenever both sides are not
 *    NaN they agree.
 *  - annihilators: f(a, x) = a for x finite or equal to a (ir.h).  Each
 *    op names one annihilator even where two exist: `+` names +inf (the
 *    one the min-plus semiring needs; -inf would do as well), max +inf,
 *    min -inf.
 * Every other claim (commutativity, idempotence, identities, the
 * properties of max, min, &&, ||, ==, !=) is exact for every double,
 * NaN included; tests/test_ir.c checks each one on a grid of values.
 *
 * Truth values: comparisons and logical ops return exactly 1 or 0, and
 * a value is true when it is != 0 (so NaN is true, as in C).  `||` and
 * `&&` therefore have no identity (0 || 5 is 1) and are not idempotent,
 * but their annihilators (1 for ||, 0 for &&) are exact, and as
 * aggregates (any, all) they start from agg_init 0 / 1.
 *
 * Derivatives (for grad, src/front/grad.c): each built-in says how it is
 * differentiated (DerivKind in ir.h); the formulas are .tin text over the
 * arguments x, y, z and the value v, parsed by the front end, and are
 * what man/tin.5 lists under GRADIENTS.  tests/test_grad.c checks them
 * against finite differences.
 *
 * max and min propagate NaN (if any argument is NaN the result is NaN,
 * unlike C's fmax); this keeps them commutative, associative and
 * idempotent on all doubles.  relu propagates NaN too.  The c_templates
 * compute exactly what eval computes (galley_rt_max etc. in galley_rt.h).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* ---- evaluation of the built-ins ---- */

static double ev_add(const double *x, int n) {
  double r = x[0];
  for (int k = 1; k < n; k++) r += x[k];
  return r;
}

static double ev_mul(const double *x, int n) {
  double r = x[0];
  for (int k = 1; k < n; k++) r *= x[k];
  return r;
}

/* NaN-propagating maximum: NaN if any argument is NaN. */
static double ev_max(const double *x, int n) {
  double r = x[0];
  for (int k = 1; k < n; k++) {
    if (isnan(r) || isnan(x[k])) return NAN;
    if (x[k] > r) r = x[k];
  }
  return isnan(r) ? NAN : r;
}

/* NaN-propagating minimum. */
static double ev_min(const double *x, int n) {
  double r = x[0];
  for (int k = 1; k < n; k++) {
    if (isnan(r) || isnan(x[k])) return NAN;
    if (x[k] < r) r = x[k];
  }
  return isnan(r) ? NAN : r;
}

/* Logical and / or over any number of arguments; results are 0 or 1. */
static double ev_and(const double *x, int n) {
  for (int k = 0; k < n; k++)
    if (x[k] == 0) return 0;
  return 1;
}

static double ev_or(const double *x, int n) {
  for (int k = 0; k < n; k++)
    if (x[k] != 0) return 1;
  return 0;
}

static double ev_sub(const double *x, int n) { return x[0] - x[1]; }
static double ev_div(const double *x, int n) { return x[0] / x[1]; }
static double ev_pow(const double *x, int n) { return pow(x[0], x[1]); }
static double ev_eq(const double *x, int n) { return x[0] == x[1]; }
static double ev_ne(const double *x, int n) { return x[0] != x[1]; }
static double ev_lt(const double *x, int n) { return x[0] < x[1]; }
static double ev_le(const double *x, int n) { return x[0] <= x[1]; }
static double ev_gt(const double *x, int n) { return x[0] > x[1]; }
static double ev_ge(const double *x, int n) { return x[0] >= x[1]; }
static double ev_neg(const double *x, int n) { return -x[0]; }
static double ev_not(const double *x, int n) { return x[0] == 0; }
static double ev_exp(const double *x, int n) { return exp(x[0]); }
static double ev_log(const double *x, int n) { return log(x[0]); }
static double ev_sqrt(const double *x, int n) { return sqrt(x[0]); }
static double ev_abs(const double *x, int n) { return fabs(x[0]); }
static double ev_sin(const double *x, int n) { return sin(x[0]); }
static double ev_cos(const double *x, int n) { return cos(x[0]); }
static double ev_tanh(const double *x, int n) { return tanh(x[0]); }
static double ev_sigmoid(const double *x, int n) {
  return 1.0 / (1.0 + exp(-x[0]));
}
/* max(x, 0) that keeps NaN (and maps -0 to 0). */
static double ev_relu(const double *x, int n) {
  return x[0] <= 0 ? 0.0 : x[0];
}
static double ev_ifelse(const double *x, int n) {
  return x[0] != 0 ? x[1] : x[2];
}

/* ---- the built-in table ---- */

#define CA (OP_COMMUTATIVE | OP_ASSOCIATIVE)

/* A unary math function: no algebraic properties; d is its derivative
 * as .tin text over x (the argument) and v (the value). */
#define UNARY(nm, tmpl, fn, d)                                         \
  {.name = nm, .arity = 1, .c_template = tmpl, .eval = fn, .is_builtin = 1, \
   .deriv = DERIV_FORMULA, .partial = {d}}
/* A binary op without properties, with its two partial derivatives. */
#define PLAIN2(nm, tmpl, fn, dx, dy)                                   \
  {.name = nm, .arity = 2, .c_template = tmpl, .eval = fn, .is_builtin = 1, \
   .deriv = DERIV_FORMULA, .partial = {dx, dy}}
/* A comparison: piecewise constant, so no gradient flows through it. */
#define CMP2(nm, tmpl, fn)                                             \
  {.name = nm, .arity = 2, .c_template = tmpl, .eval = fn, .is_builtin = 1, \
   .deriv = DERIV_ZERO}

static const Op op_add = {
    .name = "+", .agg_name = "sum", .arity = 2,
    .props = CA | OP_HAS_IDENTITY | OP_HAS_ANNIHILATOR | OP_VARIADIC,
    .identity = 0, .annihilator = INFINITY, .agg_init = 0,
    .repeat = REPEAT_TIMES, .distributes_over = {"max", "min", NULL},
    .c_template = "($0 + $1)", .eval = ev_add, .is_builtin = 1,
    .deriv = DERIV_SUM};
static const Op op_mul = {
    .name = "*", .agg_name = "prod", .arity = 2,
    .props = CA | OP_HAS_IDENTITY | OP_HAS_ANNIHILATOR | OP_VARIADIC,
    .identity = 1, .annihilator = 0, .agg_init = 1,
    .repeat = REPEAT_POW, .distributes_over = {"+", "-", NULL},
    .c_template = "($0 * $1)", .eval = ev_mul, .is_builtin = 1,
    .deriv = DERIV_PRODUCT};
static const Op op_max = {
    .name = "max", .agg_name = "max", .arity = 2,
    .props = CA | OP_IDEMPOTENT | OP_HAS_IDENTITY | OP_HAS_ANNIHILATOR |
             OP_VARIADIC,
    .identity = -INFINITY, .annihilator = INFINITY, .agg_init = -INFINITY,
    .repeat = REPEAT_SELF, .distributes_over = {"min", "max", NULL},
    .c_template = "galley_rt_max($0, $1)", .eval = ev_max, .is_builtin = 1,
    .deriv = DERIV_SELECT};
static const Op op_min = {
    .name = "min", .agg_name = "min", .arity = 2,
    .props = CA | OP_IDEMPOTENT | OP_HAS_IDENTITY | OP_HAS_ANNIHILATOR |
             OP_VARIADIC,
    .identity = INFINITY, .annihilator = -INFINITY, .agg_init = INFINITY,
    .repeat = REPEAT_SELF, .distributes_over = {"max", "min", NULL},
    .c_template = "galley_rt_min($0, $1)", .eval = ev_min, .is_builtin = 1,
    .deriv = DERIV_SELECT};
/* any: no identity (0 || 5 is 1), annihilator 1 exact (results are 0/1) */
static const Op op_or = {
    .name = "||", .agg_name = "any", .arity = 2,
    .props = CA | OP_HAS_ANNIHILATOR | OP_VARIADIC,
    .annihilator = 1, .agg_init = 0, .repeat = REPEAT_UNKNOWN,
    .distributes_over = {"&&", NULL},
    .c_template = "(double)($0 != 0 || $1 != 0)", .eval = ev_or,
    .is_builtin = 1, .deriv = DERIV_ZERO};
static const Op op_and = {
    .name = "&&", .agg_name = "all", .arity = 2,
    .props = CA | OP_HAS_ANNIHILATOR | OP_VARIADIC,
    .annihilator = 0, .agg_init = 1, .repeat = REPEAT_UNKNOWN,
    .distributes_over = {"||", NULL},
    .c_template = "(double)($0 != 0 && $1 != 0)", .eval = ev_and,
    .is_builtin = 1, .deriv = DERIV_ZERO};
/* == and != are commutative on every double (nan == nan is 0 both ways) */
static const Op op_eq = {
    .name = "==", .arity = 2, .props = OP_COMMUTATIVE,
    .c_template = "(double)($0 == $1)", .eval = ev_eq, .is_builtin = 1,
    .deriv = DERIV_ZERO};
static const Op op_ne = {
    .name = "!=", .arity = 2, .props = OP_COMMUTATIVE,
    .c_template = "(double)($0 != $1)", .eval = ev_ne, .is_builtin = 1,
    .deriv = DERIV_ZERO};
/* Derivatives (man/tin.5, GRADIENTS): the value v is reused where it is
 * the cheapest form (exp, sqrt, tanh, sigmoid, x / y).  Conventions at
 * the points where the derivative does not exist: abs and relu take 0
 * at 0; x ^ y takes 0 in x when y = 0 (x^0 is the constant 1) and 0 in
 * y when x = 0. */
static const Op op_sub = PLAIN2("-", "($0 - $1)", ev_sub, "1", "-1");
static const Op op_div = PLAIN2("/", "($0 / $1)", ev_div, "1 / y", "-v / y");
static const Op op_pow = PLAIN2("^", "pow($0, $1)", ev_pow,
                                "ifelse(y == 0, 0, y * x ^ (y - 1))",
                                "ifelse(x == 0, 0, v * log(x))");
static const Op op_lt = CMP2("<", "(double)($0 < $1)", ev_lt);
static const Op op_le = CMP2("<=", "(double)($0 <= $1)", ev_le);
static const Op op_gt = CMP2(">", "(double)($0 > $1)", ev_gt);
static const Op op_ge = CMP2(">=", "(double)($0 >= $1)", ev_ge);
static const Op op_neg = UNARY("neg", "(-$0)", ev_neg, "-1");
static const Op op_not = {
    .name = "!", .arity = 1, .c_template = "(double)($0 == 0)",
    .eval = ev_not, .is_builtin = 1, .deriv = DERIV_ZERO};
static const Op op_exp = UNARY("exp", "exp($0)", ev_exp, "v");
static const Op op_log = UNARY("log", "log($0)", ev_log, "1 / x");
static const Op op_sqrt = UNARY("sqrt", "sqrt($0)", ev_sqrt, "0.5 / v");
static const Op op_abs =
    UNARY("abs", "fabs($0)", ev_abs, "(x > 0) - (x < 0)");
static const Op op_sin = UNARY("sin", "sin($0)", ev_sin, "cos(x)");
static const Op op_cos = UNARY("cos", "cos($0)", ev_cos, "-sin(x)");
static const Op op_tanh = UNARY("tanh", "tanh($0)", ev_tanh, "1 - v * v");
static const Op op_sigmoid = UNARY("sigmoid", "(1.0 / (1.0 + exp(-$0)))",
                                   ev_sigmoid, "v * (1 - v)");
static const Op op_relu = UNARY("relu", "galley_rt_relu($0)", ev_relu, "x > 0");
static const Op op_ifelse = {
    .name = "ifelse", .arity = 3, .c_template = "($0 != 0 ? $1 : $2)",
    .eval = ev_ifelse, .is_builtin = 1, .deriv = DERIV_FORMULA,
    .partial = {"0", "x != 0", "x == 0"}};

static const Op *const builtin_ops[] = {
    &op_add, &op_sub, &op_mul, &op_div, &op_pow, &op_eq, &op_ne,
    &op_lt, &op_le, &op_gt, &op_ge, &op_and, &op_or, &op_neg,
    &op_not, &op_exp, &op_log, &op_sqrt, &op_abs, &op_sin, &op_cos,
    &op_tanh, &op_sigmoid, &op_relu, &op_min, &op_max, &op_ifelse};

/* ---- lookup ---- */

void ops_init(OpRegistry *r) {
  memset(r, 0, sizeof *r);
  r->builtin = builtin_ops;
  r->nbuiltin = (int)(sizeof builtin_ops / sizeof builtin_ops[0]);
}

const Op *ops_find(const OpRegistry *r, const char *name) {
  if (strcmp(name, "pow") == 0) name = "^"; /* pow(x, y) is x ^ y */
  for (int k = 0; k < r->nbuiltin; k++)
    if (strcmp(r->builtin[k]->name, name) == 0) return r->builtin[k];
  for (int k = 0; k < r->nuser; k++)
    if (strcmp(r->user[k]->name, name) == 0) return r->user[k];
  return NULL;
}

/* Whether a user op may be an aggregate (tin.md section 4): two
 * arguments, associative, commutative, with an identity. */
static int user_aggregable(const Op *op) {
  unsigned need = OP_ASSOCIATIVE | OP_COMMUTATIVE | OP_HAS_IDENTITY;
  return op->arity == 2 && (op->props & need) == need;
}

/* Built-ins by their aggregate spelling; user defs by name, only when
 * they qualify (callers diagnose an unqualified def via ops_find). */
const Op *ops_find_agg(const OpRegistry *r, const char *name) {
  for (int k = 0; k < r->nbuiltin; k++) {
    const char *agg = r->builtin[k]->agg_name;
    if (agg && strcmp(agg, name) == 0) return r->builtin[k];
  }
  for (int k = 0; k < r->nuser; k++)
    if (strcmp(r->user[k]->name, name) == 0)
      return user_aggregable(r->user[k]) ? r->user[k] : NULL;
  return NULL;
}

void ops_add_user(OpRegistry *r, Arena *a, Op *op) {
  if (r->nuser == r->cap) {
    int cap = r->cap ? 2 * r->cap : 8;
    Op **user = arena_alloc(a, sizeof(Op *) * (size_t)cap);
    if (!user) return; /* arena without oom handler: op not added */
    if (r->nuser) memcpy(user, r->user, sizeof(Op *) * (size_t)r->nuser);
    r->user = user;
    r->cap = cap;
  }
  r->user[r->nuser++] = op;
}

/* Whether `name` is g (by pointwise or aggregate spelling). */
static int op_named(const Op *g, const char *name) {
  return strcmp(g->name, name) == 0 ||
         (g->agg_name && strcmp(g->agg_name, name) == 0);
}

/* By name, so that a user def may name a built-in ("distributes over +")
 * or another user def, and a built-in names built-ins. */
int ops_distributes(const Op *f, const Op *g) {
  for (int k = 0; k < 4 && f->distributes_over[k]; k++)
    if (op_named(g, f->distributes_over[k])) return 1;
  return 0;
}

/* ---- application ---- */

enum { APPLY_CHUNK = 16 }; /* arguments evaluated at once on the stack */

static double body_eval(const Node *n, const double *params, int nparams);

/* op applied to the values of args[0..nargs) with the given params. */
static double map_eval(const Node *n, const double *params, int nparams) {
  double v[APPLY_CHUNK];
  if (n->nargs <= APPLY_CHUNK) {
    for (int k = 0; k < n->nargs; k++)
      v[k] = body_eval(n->args[k], params, nparams);
    return ops_apply(n->op, v, n->nargs);
  }
  /* more arguments than fit: only variadic (associative) ops get here,
   * so fold chunk by chunk, carrying the running value in v[0] */
  v[0] = body_eval(n->args[0], params, nparams);
  int k = 1;
  while (k < n->nargs) {
    int m = 1;
    while (m < APPLY_CHUNK && k < n->nargs)
      v[m++] = body_eval(n->args[k++], params, nparams);
    v[0] = ops_apply(n->op, v, m);
  }
  return v[0];
}

/* The value of a user def body (ND_CONST, ND_PARAM, ND_MAP only). */
static double body_eval(const Node *n, const double *params, int nparams) {
  switch (n->kind) {
  case ND_CONST:
    return n->value;
  case ND_PARAM:
    return n->tensor >= 0 && n->tensor < nparams ? params[n->tensor] : NAN;
  case ND_MAP:
    return map_eval(n, params, nparams);
  default:
    return NAN; /* not a pointwise body */
  }
}

double ops_apply(const Op *op, const double *args, int n) {
  if (op->eval) return op->eval(args, n);
  if (op->body) return body_eval(op->body, args, n);
  return NAN;
}

/* ---- memoized application (the property checks of user defs) ---- */

enum { MEMO_ARGS = 4 }; /* calls with more arguments are not memoized */

/* One memoized call: the op and its arguments' bits (NaN and -0 are
 * keys like any other value). */
typedef struct MemoEntry {
  const Op *op;            /* NULL: an empty slot */
  int n;                   /* number of arguments */
  double args[MEMO_ARGS];
  double value;
} MemoEntry;

struct OpMemo {
  MemoEntry *slots; /* open addressing, a power of two */
  size_t cap, used;
  double steps, budget; /* expression nodes evaluated, and the limit */
  int exhausted;
};

OpMemo *ops_memo_new(double budget) {
  OpMemo *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->cap = 64;
  m->slots = calloc(m->cap, sizeof *m->slots);
  if (!m->slots) {
    free(m);
    return NULL;
  }
  m->budget = budget;
  return m;
}

void ops_memo_free(OpMemo *m) {
  if (!m) return;
  free(m->slots);
  free(m);
}

int ops_memo_exhausted(const OpMemo *m) { return m->exhausted; }

static size_t memo_hash(const Op *op, const double *args, int n) {
  uint64_t h = (uint64_t)(uintptr_t)op * 0x9E3779B97F4A7C15ULL;
  for (int k = 0; k < n; k++) {
    uint64_t b;
    memcpy(&b, &args[k], sizeof b);
    h = (h ^ b) * 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
  }
  return (size_t)h;
}

/* The slot of (op, args): the entry, or the empty slot where it goes. */
static MemoEntry *memo_slot(OpMemo *m, const Op *op, const double *args,
                            int n) {
  size_t k = memo_hash(op, args, n) & (m->cap - 1);
  for (;; k = (k + 1) & (m->cap - 1)) {
    MemoEntry *e = &m->slots[k];
    if (!e->op || (e->op == op && e->n == n &&
                   memcmp(e->args, args, (size_t)n * sizeof *args) == 0))
      return e;
  }
}

/* Double the table when half full; on failure keep it (lookups still
 * work, the table just stops growing: memo_put then declines). */
static void memo_grow(OpMemo *m) {
  MemoEntry *old = m->slots;
  size_t oldcap = m->cap;
  MemoEntry *slots = calloc(2 * oldcap, sizeof *slots);
  if (!slots) return;
  m->slots = slots;
  m->cap = 2 * oldcap;
  for (size_t k = 0; k < oldcap; k++)
    if (old[k].op) *memo_slot(m, old[k].op, old[k].args, old[k].n) = old[k];
  free(old);
}

static double memo_body(OpMemo *m, const Node *n, const double *params,
                        int nparams);

/* The args of a map node through the memo, then the op. */
static double memo_map(OpMemo *m, const Node *n, const double *params,
                       int nparams) {
  double small[APPLY_CHUNK], *v = small;
  if (n->nargs > APPLY_CHUNK &&
      !(v = malloc((size_t)n->nargs * sizeof *v))) {
    m->exhausted = 1; /* out of memory: give up like an exhausted budget */
    return NAN;
  }
  for (int k = 0; k < n->nargs && !m->exhausted; k++)
    v[k] = memo_body(m, n->args[k], params, nparams);
  double r = m->exhausted ? NAN : ops_memo_apply(m, n->op, v, n->nargs);
  if (v != small) free(v);
  return r;
}

static double memo_body(OpMemo *m, const Node *n, const double *params,
                        int nparams) {
  if (++m->steps > m->budget) m->exhausted = 1;
  if (m->exhausted) return NAN;
  switch (n->kind) {
  case ND_CONST:
    return n->value;
  case ND_PARAM:
    return n->tensor >= 0 && n->tensor < nparams ? params[n->tensor] : NAN;
  case ND_MAP:
    return memo_map(m, n, params, nparams);
  default:
    return NAN;
  }
}

double ops_memo_apply(OpMemo *m, const Op *op, const double *args, int n) {
  if (m->exhausted) return NAN;
  if (op->eval || !op->body) return ops_apply(op, args, n);
  if (n > MEMO_ARGS) return memo_body(m, op->body, args, n);
  MemoEntry *e = memo_slot(m, op, args, n);
  if (e->op) return e->value;
  double v = memo_body(m, op->body, args, n);
  if (m->exhausted) return NAN;
  if (2 * (m->used + 1) > m->cap) memo_grow(m);
  if (2 * (m->used + 1) > m->cap) return v; /* could not grow: not kept */
  e = memo_slot(m, op, args, n); /* the table may have moved */
  e->op = op;
  e->n = n;
  memcpy(e->args, args, (size_t)n * sizeof *args);
  e->value = v;
  m->used++;
  return v;
}

/* ---- repeated application ---- */

/* The value over zero elements: the identity where there is one, else
 * agg_init (any/all). */
static double op_start(const Op *op) {
  return (op->props & OP_HAS_IDENTITY) ? op->identity : op->agg_init;
}

static double apply2(const Op *op, double x, double y) {
  double v[2] = {x, y};
  return ops_apply(op, v, 2);
}

/* x op x op ... (count copies) by repeated doubling: O(log count)
 * applications; valid because the op is associative.  Ops usable as
 * aggregates start from their value over zero elements, so that any/all
 * give 0/1 even for one copy; others start from nothing. */
static double fold_doubling(const Op *op, double x, double count) {
  int have = (op->props & OP_HAS_IDENTITY) || op->agg_name;
  double acc = have ? op_start(op) : 0, base = x;
  while (count >= 1) {
    double half = floor(count / 2);
    if (count - 2 * half >= 1) {
      acc = have ? apply2(op, acc, base) : base;
      have = 1;
    }
    count = half;
    if (count >= 1) base = apply2(op, base, base);
  }
  return acc;
}

double ops_fold_repeat(const Op *op, double x, double count) {
  if (count < 1) return op_start(op);
  switch (op->repeat) {
  case REPEAT_SELF:
    return x;
  case REPEAT_TIMES:
    return x * count;
  case REPEAT_POW:
    return pow(x, count);
  default:
    return fold_doubling(op, x, count);
  }
}

double ops_fold_aggregate(const Op *op, double x, double count) {
  if (count <= 0)
    return op->agg_init;
  double args[2] = {op->agg_init, ops_fold_repeat(op, x, count)};
  return ops_apply(op, args, 2);
}

/* Built-in ops that map finite arguments to finite results (up to the
 * overflow of + and * to inf); exp, log, sqrt, /, ^ and user ops are not
 * known to. */
int ops_keeps_finite(const Op *op) {
  static const char *const names[] = {
      "+", "-", "*", "neg", "abs", "max", "min", "relu", "sigmoid", "tanh",
      "sin", "cos", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "!",
      "ifelse", NULL};
  if (!op->is_builtin)
    return 0;
  for (int k = 0; names[k]; k++)
    if (strcmp(op->name, names[k]) == 0)
      return 1;
  return 0;
}
