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

double ops_expr_fill(const Node *n,
                     double (*leaf)(const void *ctx, const Node *n),
                     const void *ctx) {
  switch (n->kind) {
  case ND_CONST:
    return n->value;
  case ND_INPUT:
  case ND_ALIAS:
    return leaf(ctx, n);
  case ND_MAP: {
    double small[16] = {0};
    double *args =
        n->nargs <= 16 ? small : malloc((size_t)n->nargs * sizeof *args);
    if (!args)
      return NAN; /* as refeval_fill: still a correct (if useless) fill */
    for (int k = 0; k < n->nargs; k++)
      args[k] = ops_expr_fill(n->args[k], leaf, ctx);
    double v = ops_apply(n->op, args, n->nargs);
    if (args != small)
      free(args);
    return v;
  }
  default:
    return NAN;
  }
}

/* Built-in ops that map finite arguments to finite results (up to the
 * overflow of + and * to inf); exp, log, sqrt, /, ^ and user ops are not
 * known to. */
int ops_fold_neutral(const Op *agg, double *v) {
  if (agg->props & OP_HAS_IDENTITY) {
    *v = agg->identity;
    return 1;
  }
  if (agg->eval == ev_or || agg->eval == ev_and) { /* folds give 0 or 1 */
    *v = agg->eval == ev_or ? 0 : 1;
    return agg->agg_init == *v;
  }
  return 0;
}

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

/* ------------------------------------------------------------------ */
/* Value ranges (issue 12)                                             */
/* ------------------------------------------------------------------ */

#include <float.h>
#include <stdio.h>

Range range_empty(void) {
  return (Range){.lo = INFINITY, .hi = -INFINITY, .integer = 1};
}

Range range_top(void) {
  return (Range){.lo = -DBL_MAX, .hi = DBL_MAX, .nan = 1, .pinf = 1,
                 .ninf = 1, .integer = 0};
}

static int range_whole(double v) {
  return fabs(v) >= 0x1p52 || (double)(int64_t)v == v;
}

Range range_point(double v) {
  Range r = range_empty();
  if (isnan(v))
    r.nan = 1;
  else if (isinf(v))
    *(v > 0 ? &r.pinf : &r.ninf) = 1;
  else {
    r.lo = r.hi = v;
    r.integer = (unsigned char)range_whole(v);
  }
  return r;
}

static int range_has_finite(Range r) { return r.lo <= r.hi; }

Range range_join(Range a, Range b) {
  Range r;
  r.lo = a.lo < b.lo ? a.lo : b.lo;
  r.hi = a.hi > b.hi ? a.hi : b.hi;
  r.nan = a.nan | b.nan;
  r.pinf = a.pinf | b.pinf;
  r.ninf = a.ninf | b.ninf;
  /* whole when each side's finite values are (an empty side has none) */
  r.integer = (unsigned char)((a.integer || !range_has_finite(a)) &&
                              (b.integer || !range_has_finite(b)));
  r.dep = a.dep | b.dep;
  r.program = a.program & b.program;
  return r;
}

Range range_meet(Range a, Range b) {
  Range r;
  r.lo = a.lo > b.lo ? a.lo : b.lo;
  r.hi = a.hi < b.hi ? a.hi : b.hi;
  r.nan = a.nan & b.nan;
  r.pinf = a.pinf & b.pinf;
  r.ninf = a.ninf & b.ninf;
  r.integer = a.integer | b.integer;
  r.dep = a.dep | b.dep;
  r.program = a.program & b.program;
  if (r.integer && r.lo <= r.hi) { /* whole numbers within the bounds */
    r.lo = ceil(r.lo);
    r.hi = floor(r.hi);
  }
  return r;
}

int range_finite(Range r) { return !r.nan && !r.pinf && !r.ninf; }

int range_contains(Range o, Range i) {
  if ((i.nan && !o.nan) || (i.pinf && !o.pinf) || (i.ninf && !o.ninf))
    return 0;
  if (!range_has_finite(i))
    return 1;
  return o.lo <= i.lo && i.hi <= o.hi && (!o.integer || i.integer);
}

int range_absorbed_by(Range r, double a) {
  if (r.nan)
    return 0;
  return (!r.pinf || a == INFINITY) && (!r.ninf || a == -INFINITY);
}

void range_format(Range r, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = 0;
#define RF_PUT(...)                                                           \
  do {                                                                        \
    if (n < size)                                                             \
      n += (size_t)snprintf(buf + n, size - n, __VA_ARGS__);                  \
  } while (0)
  if (range_has_finite(r)) {
    if (r.lo == r.hi)
      RF_PUT("%.6g", r.lo);
    else
      RF_PUT("[%.6g, %.6g]", r.lo, r.hi);
    if (r.integer && r.lo != r.hi)
      RF_PUT(" whole");
  }
  const char *special[3] = {r.ninf ? "-inf" : NULL, r.pinf ? "+inf" : NULL,
                            r.nan ? "NaN" : NULL};
  for (int k = 0; k < 3; k++)
    if (special[k])
      RF_PUT("%s%s", n ? " or " : "", special[k]);
  if (!n)
    RF_PUT("nothing");
#undef RF_PUT
}

/* The least power of 16 (or 0) at least x, for x >= 0: buckets wide
 * enough that values drifting between runs (a model's weights) seldom
 * leave them, narrow enough to keep exp of them finite. */
static double coarse_up(double x) {
  if (x <= 0)
    return 0;
  if (x > 0x1p1020)
    return DBL_MAX;
  int e;
  (void)frexp(x, &e); /* x < 2^e */
  if (ldexp(1.0, e - 1) == x)
    e--; /* x is a power of 2 */
  e = (e + 3 + 4096) / 4 * 4 - 4096; /* up to a multiple of 4 */
  return ldexp(1.0, e);
}

/* The greatest power of 16 at most x, for x > 0. */
static double coarse_down(double x) {
  if (x < 0x1p-1020)
    return 0;
  int e;
  (void)frexp(x, &e); /* 2^(e-1) <= x */
  e -= 1;
  e = e >= 0 ? e / 4 * 4 : -((-e + 3) / 4 * 4);
  return ldexp(1.0, e);
}

/* Widen [lo, hi] outward to 0 or signed powers of 16. */
static void coarsen(Range *r) {
  if (!range_has_finite(*r))
    return;
  r->hi = r->hi >= 0 ? coarse_up(r->hi) : -coarse_down(-r->hi);
  r->lo = r->lo <= 0 ? -coarse_up(-r->lo) : coarse_down(r->lo);
}

Range range_of_facts(const galley_facts *f, double fill, int coarse) {
  Range r = range_empty();
  if (f->max >= f->min) {
    r.lo = f->min;
    r.hi = f->max;
  }
  r.nan = f->nan > 0;
  r.pinf = f->pos_inf > 0;
  r.ninf = f->neg_inf > 0;
  r.integer = (unsigned char)(f->integer != 0);
  if (coarse)
    coarsen(&r);
  return range_join(r, range_point(fill));
}

/* ---- transfer functions ---- */

enum { RANGE_REPS = 6 };

/* The values that bound op over r: its finite ends and 0 when inside,
 * and the specials it may take. */
static int range_reps(Range r, double *v) {
  int n = 0;
  if (range_has_finite(r)) {
    v[n++] = r.lo;
    if (r.hi != r.lo)
      v[n++] = r.hi;
    if (r.lo < 0 && r.hi > 0)
      v[n++] = 0;
  }
  if (r.nan)
    v[n++] = NAN;
  if (r.pinf)
    v[n++] = INFINITY;
  if (r.ninf)
    v[n++] = -INFINITY;
  return n;
}

/* Add value v, computed from finite arguments when from_finite, to *r;
 * clamp: an infinity from finite arguments is an overflow the convention
 * does not see (+ - *): it widens the bounds to +-DBL_MAX instead. */
static void add_value(Range *r, double v, int from_finite, int clamp) {
  if (from_finite && isinf(v)) {
    /* finite arguments overflowed: the finite values below the
     * overflow are unbounded too */
    double big = v > 0 ? DBL_MAX : -DBL_MAX;
    if (!clamp)
      add_value(r, big, 0, 0);
    else
      v = big;
  }
  Range p = range_point(v);
  p.integer = r->integer; /* whole-ness is decided by the op */
  p.dep = r->dep;
  *r = range_join(*r, p);
  r->integer = p.integer;
}

/* op over every combination of the representatives of a[0..n) (n <= 2):
 * exact bounds for ops monotone or bilinear in each argument over the
 * finite values (+ - * max min and the monotone unary functions), and
 * the specials they produce. */
static Range range_by_reps(const Op *op, const Range *a, int n, int clamp) {
  double v[2][RANGE_REPS];
  int m[2] = {0, 0};
  for (int k = 0; k < n; k++)
    m[k] = range_reps(a[k], v[k]);
  Range r = range_empty();
  if (n == 1) {
    for (int x = 0; x < m[0]; x++)
      add_value(&r, ops_apply(op, &v[0][x], 1), isfinite(v[0][x]), clamp);
    return r;
  }
  for (int x = 0; x < m[0]; x++)
    for (int y = 0; y < m[1]; y++) {
      double args[2] = {v[0][x], v[1][y]};
      add_value(&r, ops_apply(op, args, 2),
                isfinite(args[0]) && isfinite(args[1]), clamp);
    }
  return r;
}

static int op_is(const Op *op, const char *name) {
  return op->is_builtin && strcmp(op->name, name) == 0;
}

static int op_in(const Op *op, const char *const *names) {
  for (int k = 0; names[k]; k++)
    if (op_is(op, names[k]))
      return 1;
  return 0;
}

/* Whether whole arguments give whole results. */
static int keeps_whole(const Op *op) {
  static const char *const names[] = {"+", "-", "*", "neg", "abs", "max",
                                      "min", "relu", NULL};
  return op_in(op, names);
}

/* Ops whose results are exactly 0 or 1. */
static int is_truth(const Op *op) {
  static const char *const names[] = {"==", "!=", "<", "<=", ">", ">=",
                                      "&&", "||", "!", NULL};
  return op_in(op, names);
}

static Range truth_range(void) {
  Range r = range_point(0);
  r.hi = 1;
  return r;
}

static Range range_div(const Op *op, const Range *a) {
  Range y = a[1];
  Range r = range_by_reps(op, a, 2, 0);
  if (range_has_finite(y) && y.lo <= 0 && y.hi >= 0) {
    /* near a zero divisor the quotient is unbounded */
    r = range_join(r, range_top());
    r.integer = 0;
  }
  r.integer = 0;
  return r;
}

static Range range_pow(const Op *op, const Range *a) {
  Range x = a[0], y = a[1];
  if (range_has_finite(y) && y.lo == y.hi && range_finite(y) && y.lo >= 0 &&
      y.lo <= 64 && y.integer) {
    /* x ^ k: a product of k copies (x ^ 0 is 1 for every x, NaN too);
     * repeated interval products over-approximate, never under */
    Range r = range_point(1);
    for (int k = 0; k < (int)y.lo; k++) {
      Range two[2] = {r, x};
      r = range_by_reps(&op_mul, two, 2, 1); /* as x * x: overflow unseen */
      r.integer = two[0].integer && two[1].integer;
    }
    if ((int)y.lo % 2 == 0 && y.lo > 0) {
      /* an even power is never negative (x ^ 2 of x in [-a, a] is in
       * [0, a^2], not the products' [-a^2, a^2]): a sum of squares is a
       * norm, so sqrt(S + eps) and 1 / sqrt(S + eps) are finite */
      if (range_has_finite(r) && r.lo < 0)
        r.lo = 0;
      if (r.ninf) {
        r.ninf = 0;
        r.pinf = 1;
      }
      r.nan = x.nan; /* pow(-inf, 2) is inf: no -inf * 0 between copies */
    }
    return r;
  }
  if (!x.ninf && (!range_has_finite(x) || x.lo >= 0)) {
    /* x >= 0: x ^ y = exp(y log x) is bilinear in (y, log x), so its
     * extremes are at the corners (y = 0 is a representative when
     * inside) */
    Range r = range_by_reps(op, a, 2, 0);
    r.integer = 0;
    if (range_has_finite(x) && x.lo == 0 && (y.ninf || (range_has_finite(y) &&
                                                         y.lo < 0)))
      r.ninf = 1; /* (-0) ^ -3 is -inf */
    return r;
  }
  return range_top();
}

static Range range_unary_bounded(const Op *op, Range x, double lo, double hi) {
  /* sin, cos: [-1, 1] over the finite values; the specials evaluated */
  Range r = range_empty();
  if (range_has_finite(x)) {
    r.lo = lo;
    r.hi = hi;
  }
  r.integer = 0;
  if (x.nan)
    add_value(&r, ops_apply(op, &(double){NAN}, 1), 0, 0);
  if (x.pinf)
    add_value(&r, ops_apply(op, &(double){INFINITY}, 1), 0, 0);
  if (x.ninf)
    add_value(&r, ops_apply(op, &(double){-INFINITY}, 1), 0, 0);
  return r;
}

static Range range_user(const Op *op, const Range *args, int n);

/* A built-in op of one or two arguments (n is the count given). */
static Range range_builtin(const Op *op, const Range *a, int n) {
  static const char *const monotone[] = {"+", "-", "*", "max", "min", "neg",
                                         "relu", "exp", "log", "sqrt",
                                         "tanh", "sigmoid", "abs", NULL};
  static const char *const clamped[] = {"+", "-", "*", NULL};
  if (is_truth(op))
    return truth_range();
  if (op_is(op, "ifelse"))
    return range_join(a[1], a[2]); /* refined by the caller when it can */
  if (op_is(op, "/"))
    return range_div(op, a);
  if (op_is(op, "^"))
    return range_pow(op, a);
  if (op_is(op, "sin") || op_is(op, "cos"))
    return range_unary_bounded(op, a[0], -1, 1);
  if (!op_in(op, monotone) || n > 2)
    return range_top();
  Range r = range_by_reps(op, a, n, op_in(op, clamped));
  int whole = keeps_whole(op);
  for (int k = 0; k < n; k++)
    whole = whole && (a[k].integer || !range_has_finite(a[k]));
  r.integer = (unsigned char)whole;
  if (!whole && range_has_finite(r) && r.lo == r.hi)
    r.integer = (unsigned char)range_whole(r.lo);
  return r;
}

static Range range_apply_plain(const Op *op, const Range *args, int n);

/* r with its bounds forgotten: every finite double, not known whole. */
static Range widened(Range r) {
  if (range_has_finite(r)) {
    r.lo = -DBL_MAX;
    r.hi = DBL_MAX;
  }
  r.integer = 0;
  return r;
}

static int is_wide(Range r) {
  return !range_has_finite(r) ||
         (r.lo == -DBL_MAX && r.hi == DBL_MAX && !r.integer);
}

static int same_specials(Range a, Range b) {
  return a.nan == b.nan && a.pinf == b.pinf && a.ninf == b.ninf;
}

enum { RANGE_DEP_ARGS = 8 };

/* r = op over args; set r.dep when an argument's range depends on
 * bounds, or when the arguments' bounds decide r's specials (the same op
 * over widened arguments gives other specials). */
static Range with_dep(const Op *op, const Range *args, int n, Range r,
                      Range (*apply)(const Op *, const Range *, int)) {
  int dep = 0, narrow = 0, program = 1;
  for (int k = 0; k < n; k++) {
    dep |= args[k].dep;
    narrow |= !is_wide(args[k]) && !args[k].program;
    program &= args[k].program;
  }
  if (!dep && narrow && n <= RANGE_DEP_ARGS) {
    Range w[RANGE_DEP_ARGS];
    for (int k = 0; k < n; k++) /* the data's bounds, not the program's */
      w[k] = args[k].program ? args[k] : widened(args[k]);
    dep = !same_specials(apply(op, w, n), r);
  } else if (!dep && narrow) {
    dep = 1;
  }
  r.dep = (unsigned char)dep;
  r.program = (unsigned char)program;
  return r;
}

Range ops_range_apply(const Op *op, const Range *args, int n) {
  return with_dep(op, args, n, range_apply_plain(op, args, n),
                  range_apply_plain);
}

static Range range_apply_plain(const Op *op, const Range *args, int n) {
  if (!op->is_builtin)
    return range_user(op, args, n);
  if (n > 2 && (op->props & OP_VARIADIC)) {
    /* associative: fold two at a time (sound for intervals) */
    Range r = args[0];
    for (int k = 1; k < n; k++) {
      Range two[2] = {r, args[k]};
      r = range_builtin(op, two, 2);
    }
    return r;
  }
  return range_builtin(op, args, n);
}

static Range range_aggregate_plain(const Op *op, Range r, double count);

Range ops_range_aggregate(const Op *op, Range r, double count) {
  Range out = range_aggregate_plain(op, r, count);
  out.program = r.program;
  out.dep = r.dep || (!is_wide(r) && !r.program &&
                      !same_specials(range_aggregate_plain(op, widened(r),
                                                           count),
                                     out));
  return out;
}

static Range range_aggregate_plain(const Op *op, Range r, double count) {
  if (count < 1)
    return range_point(op->agg_init);
  if (op_is(op, "max") || op_is(op, "min"))
    return r; /* one of the values */
  if (is_truth(op))
    return truth_range();
  if (op_is(op, "+")) {
    Range s = range_empty();
    if (range_has_finite(r)) {
      /* count values within [lo, hi]: the sum is within count times */
      double lo = r.lo * count, hi = r.hi * count;
      s.lo = isinf(lo) ? -DBL_MAX : lo;
      s.hi = isinf(hi) ? DBL_MAX : hi;
      if (r.lo > 0 && !(s.lo > 0))
        s.lo = r.lo; /* a sum of positives is at least its least term */
    }
    s.integer = r.integer;
    s.nan = r.nan || (r.pinf && r.ninf && count >= 2);
    s.pinf = r.pinf;
    s.ninf = r.ninf;
    return s;
  }
  if (op_is(op, "*")) {
    Range p = range_empty();
    if (range_has_finite(r)) {
      if (r.lo >= 0 && r.hi <= 1) {
        p.lo = 0;
        p.hi = 1;
      } else if (r.lo >= -1 && r.hi <= 1) {
        p.lo = -1;
        p.hi = 1;
      } else {
        p.lo = r.lo >= 0 ? 0 : -DBL_MAX;
        p.hi = DBL_MAX;
      }
    }
    p.integer = r.integer;
    int zero = range_has_finite(r) && r.lo <= 0 && r.hi >= 0;
    int inf = r.pinf || r.ninf;
    p.nan = r.nan || (zero && inf);
    p.pinf = p.ninf = (unsigned char)inf;
    return p;
  }
  return range_top();
}

/* ---- ranges of expressions, with ifelse's refinement ---- */

/* A refinement: within a branch of ifelse, every node structurally equal
 * to `x` has its range met with `allowed`; strict: x's lower (below:
 * upper) bound is not itself a value (x > k). */
typedef struct Refine {
  const struct Refine *next;
  const Node *x;
  Range allowed;
  int strict_lo, strict_hi;
} Refine;

struct RangeEnv;
static Range expr_range(struct RangeEnv *E, const Node *n, const Refine *rf);

typedef struct RangeEnv {
  Range (*leaf)(void *ctx, const Node *n);
  void *ctx;
  const Range *params; /* a user body's arguments */
  int nparams;
  double *budget;      /* nodes left to evaluate, shared by the bodies of
                          user defs called within (linear, not
                          exponential, in chains of defs) */
} RangeEnv;

static Range apply_refinements(Range r, const Node *n, const Refine *rf) {
  for (; rf; rf = rf->next) {
    if (!plan_equal(rf->x, n))
      continue;
    r = range_meet(r, rf->allowed);
    if (rf->strict_lo && range_has_finite(r) && r.lo == rf->allowed.lo)
      r.lo = r.integer ? floor(r.lo) + 1 : nextafter(r.lo, INFINITY);
    if (rf->strict_hi && range_has_finite(r) && r.hi == rf->allowed.hi)
      r.hi = r.integer ? ceil(r.hi) - 1 : nextafter(r.hi, -INFINITY);
  }
  return r;
}

/* The values x may take when `x CMP k` is true (the comparison by name,
 * x on the left); 0 when it says nothing. */
static int cmp_allows(const char *cmp, double k, Refine *out) {
  Range a = range_top();
  a.integer = 0;
  out->strict_lo = out->strict_hi = 0;
  if (isnan(k))
    return 0;
  if (strcmp(cmp, ">") == 0 || strcmp(cmp, ">=") == 0) {
    a.nan = 0;
    a.ninf = 0;
    a.lo = isinf(k) ? DBL_MAX : k;
    a.pinf = 1;
    out->strict_lo = cmp[1] == 0;
  } else if (strcmp(cmp, "<") == 0 || strcmp(cmp, "<=") == 0) {
    a.nan = 0;
    a.pinf = 0;
    a.hi = isinf(k) ? -DBL_MAX : k;
    a.ninf = 1;
    out->strict_hi = cmp[1] == 0;
  } else if (strcmp(cmp, "==") == 0) {
    a = range_point(k);
    a.integer = 0;
  } else {
    return 0;
  }
  out->allowed = a;
  return 1;
}

/* The comparison that holds when `cmp` does not (NaN aside: the callers
 * add it back), and the mirror for swapped operands. */
static const char *cmp_negate(const char *c) {
  static const char *const from[] = {">", ">=", "<", "<=", "==", "!=", NULL};
  static const char *const to[] = {"<=", "<", ">=", ">", "!=", "==", NULL};
  for (int k = 0; from[k]; k++)
    if (strcmp(c, from[k]) == 0)
      return to[k];
  return NULL;
}

static const char *cmp_mirror(const char *c) {
  static const char *const from[] = {">", ">=", "<", "<=", "==", "!=", NULL};
  static const char *const to[] = {"<", "<=", ">", ">=", "==", "!=", NULL};
  for (int k = 0; from[k]; k++)
    if (strcmp(c, from[k]) == 0)
      return to[k];
  return NULL;
}

enum { MAX_REFINE = 8 };

/* Refinements implied by cond being true (truth 1) or false (0), pushed
 * onto *rf from store[*used..MAX_REFINE). */
static void refine_by(const Node *cond, int truth, Refine *store, int *used,
                      const Refine **rf) {
  if (*used >= MAX_REFINE || cond->kind != ND_MAP || !cond->op->is_builtin)
    return;
  const char *name = cond->op->name;
  if (strcmp(name, "!") == 0) {
    refine_by(cond->args[0], !truth, store, used, rf);
    return;
  }
  if ((strcmp(name, "&&") == 0 && truth) || (strcmp(name, "||") == 0 && !truth)) {
    for (int k = 0; k < cond->nargs; k++)
      refine_by(cond->args[k], truth, store, used, rf);
    return;
  }
  if (cond->nargs != 2 || !cmp_negate(name))
    return;
  const Node *x = cond->args[0], *c = cond->args[1];
  const char *cmp = name;
  if (x->kind == ND_CONST) {
    const Node *t = x;
    x = c;
    c = t;
    cmp = cmp_mirror(cmp);
  }
  if (c->kind != ND_CONST || x->kind == ND_CONST)
    return;
  if (!truth)
    cmp = cmp_negate(cmp);
  Refine *r = &store[*used];
  if (!cmp_allows(cmp, c->value, r))
    return;
  if (!truth) /* a false comparison may also mean x was NaN */
    r->allowed.nan = 1;
  r->x = x;
  r->next = *rf;
  *rf = r;
  (*used)++;
}

static Range map_range(RangeEnv *E, const Node *n, const Refine *rf) {
  if (n->op->is_builtin && strcmp(n->op->name, "ifelse") == 0 &&
      n->nargs == 3) {
    Range c = expr_range(E, n->args[0], rf);
    Refine store[2][MAX_REFINE];
    const Refine *branch[2] = {rf, rf};
    int used[2] = {0, 0};
    refine_by(n->args[0], 1, store[0], &used[0], &branch[0]);
    refine_by(n->args[0], 0, store[1], &used[1], &branch[1]);
    int may_true = c.nan || c.pinf || c.ninf ||
                   (range_has_finite(c) && (c.lo != 0 || c.hi != 0));
    int may_false = range_has_finite(c) && c.lo <= 0 && c.hi >= 0;
    Range r = range_empty();
    if (may_true)
      r = range_join(r, expr_range(E, n->args[1], branch[0]));
    if (may_false)
      r = range_join(r, expr_range(E, n->args[2], branch[1]));
    if (!may_true || !may_false) /* the condition's range chose */
      r.dep |= c.dep || (!is_wide(c) && !c.program);
    return r;
  }
  Range small[8];
  Range *a = n->nargs <= 8 ? small : malloc((size_t)n->nargs * sizeof *a);
  if (!a)
    return range_top();
  for (int k = 0; k < n->nargs; k++)
    a[k] = expr_range(E, n->args[k], rf);
  Range r;
  if (!n->op->is_builtin && n->op->body) {
    RangeEnv B = {.params = a, .nparams = n->nargs, .budget = E->budget};
    r = expr_range(&B, n->op->body, NULL);
  } else {
    r = ops_range_apply(n->op, a, n->nargs);
  }
  if (a != small)
    free(a);
  return r;
}

static Range expr_range(RangeEnv *E, const Node *n, const Refine *rf) {
  if (--*E->budget < 0)
    return range_top();
  Range r;
  switch (n->kind) {
  case ND_CONST:
    r = range_point(n->value);
    r.program = 1;
    break;
  case ND_PARAM:
    r = E->params && n->tensor >= 0 && n->tensor < E->nparams
            ? E->params[n->tensor]
            : range_top();
    break;
  case ND_MAP:
    r = map_range(E, n, rf);
    break;
  default:
    r = E->leaf ? E->leaf(E->ctx, n) : range_top();
    break;
  }
  return rf ? apply_refinements(r, n, rf) : r;
}

enum { RANGE_BUDGET = 100000 }; /* nodes per range of an expression */

Range ops_range_expr(const Node *n, Range (*leaf)(void *ctx, const Node *n),
                     void *ctx) {
  double budget = RANGE_BUDGET;
  RangeEnv E = {.leaf = leaf, .ctx = ctx, .budget = &budget};
  return expr_range(&E, n, NULL);
}

static Range range_user(const Op *op, const Range *args, int n) {
  if (!op->body)
    return range_top();
  double budget = RANGE_BUDGET;
  RangeEnv E = {.params = args, .nparams = n, .budget = &budget};
  return expr_range(&E, op->body, NULL);
}
