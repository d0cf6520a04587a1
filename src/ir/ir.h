/*
 * ir.h -- galleyc's internal program representation: arenas, the operator
 * registry, plan nodes (the input-plan dialect of the Galley paper, Fig.
 * 4A), and the checked program.  Internal only; the public surface is
 * galley.h.
 *
 * Pipeline (see docs/ARCHITECTURE.md):
 *   text --front_parse--> Program (checked, resolved, implicit sums made
 *   explicit) --refeval_run--> result tensors          (reference evaluator)
 *              `--later: logical / physical optimizer, codegen, JIT.
 *
 * Memory: everything a Program points to (nodes, strings, index tables,
 * user operators) lives in the program's Arena and dies with it.  Bound
 * input tensors are borrowed; result tensors are owned by the Program.
 *
 * Naming: CamelCase typedefs for internal types, ND_/OP_ prefixes for enum
 * constants, module prefixes arena_, ops_, plan_, front_, refeval_.
 */
#ifndef GALLEY_IR_H
#define GALLEY_IR_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "galley.h"

/* ------------------------------------------------------------------ */
/* Arena (src/ir/arena.c)                                              */
/* ------------------------------------------------------------------ */

/* A bump allocator: many small allocations, one free.  When an
 * allocation fails and `oom` is set, the arena longjmps there (the single
 * catch sits at the API entry that owns the arena, per style.md rule 5);
 * when `oom` is NULL it returns NULL. */
typedef struct ArenaBlock ArenaBlock;
typedef struct Arena {
  ArenaBlock *head; /* newest block */
  jmp_buf *oom;     /* where to jump when out of memory, or NULL */
  size_t bytes;     /* total bytes handed out (for -v and tests) */
} Arena;

Arena *arena_new(void);                    /* NULL when out of memory */
void arena_free(Arena *a);                 /* frees every block; NULL ok */
void *arena_alloc(Arena *a, size_t size);  /* zeroed, 16-byte aligned */
char *arena_strndup(Arena *a, const char *s, size_t n);
/* A copy of the n ints at v (room for n + 1, so n may be 0). */
int *arena_ints(Arena *a, int n, const int *v);
char *arena_printf(Arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------ */
/* Operators (src/ir/ops.c)                                            */
/* ------------------------------------------------------------------ */

/* Algebraic properties an operator has (bit flags).  Only properties that
 * are exactly true go here: the optimizer may rely on every one. */
enum {
  OP_COMMUTATIVE = 1 << 0,  /* f(x, y) = f(y, x) */
  OP_ASSOCIATIVE = 1 << 1,  /* f(f(x, y), z) = f(x, f(y, z)) */
  OP_IDEMPOTENT = 1 << 2,   /* f(x, x) = x */
  OP_HAS_IDENTITY = 1 << 3, /* f(identity, x) = x for all x */
  /* f(annihilator, x) = annihilator for every x that is finite or equal
   * to the annihilator (0 * nan and 0 * inf are nan, so `*` annihilates
   * only finite values; the optimizer must know the data is finite, or
   * fall back, before skipping absent entries). */
  OP_HAS_ANNIHILATOR = 1 << 4,
  OP_VARIADIC = 1 << 5      /* a Map may take 2+ arguments (assoc ops) */
};

/* How f(x, x, ..., x) with n copies folds (Galley's repeat operator):
 * needed to push an aggregate through a sum of terms that lack its index. */
typedef enum RepeatKind {
  REPEAT_UNKNOWN = 0, /* no closed form: fold by doubling */
  REPEAT_SELF,        /* idempotent: x */
  REPEAT_TIMES,       /* x * n (for +) */
  REPEAT_POW          /* x ^ n (for *) */
} RepeatKind;

typedef struct Node Node;

/* How reverse-mode differentiation (src/front/grad.c, man/tin.5 section
 * GRADIENTS) takes the partial derivatives of an op, as a pointwise
 * function and, where it is one, as an aggregate. */
typedef enum DerivKind {
  DERIV_BODY = 0, /* user defs: differentiated symbolically from `body` */
  DERIV_FORMULA,  /* partial[k] is d op / d argument k, as .tin text over
                     x, y, z (the arguments) and v (the op's value) */
  DERIV_ZERO,     /* piecewise constant (comparisons, logic, any, all):
                     no gradient flows through it */
  DERIV_SUM,      /* +: every partial is 1; sum: 1 for every element */
  DERIV_PRODUCT,  /* *: the product of the other arguments; prod: of the
                     other elements (exact with zeros, no division by 0) */
  DERIV_SELECT    /* max, min: the t arguments (elements) equal to the
                     value get 1/t each, the others 0 */
} DerivKind;

/* One registry entry: a pointwise function, possibly also usable as an
 * aggregate (sum is `+`, prod `*`, max, min, any `||`, all `&&`). */
typedef struct Op {
  const char *name;     /* spelling in .tin: "+", "exp", "max", user name */
  const char *agg_name; /* aggregate spelling ("sum", ...), or NULL */
  int arity;            /* number of arguments; with OP_VARIADIC the minimum */
  unsigned props;       /* OP_* flags */
  double identity;      /* valid with OP_HAS_IDENTITY */
  double annihilator;   /* valid with OP_HAS_ANNIHILATOR */
  double agg_init;      /* aggregates: the value over zero elements (0 for
                           sum and any, 1 for prod and all, -inf for max,
                           +inf for min, a user op's identity); this is not
                           an identity claim (0 || 5 is 1, not 5) */
  RepeatKind repeat;    /* closed form of repeated application */
  const char *distributes_over[4]; /* names of ops g with
                            f(x, g(y, z)) = g(f(x, y), f(x, z)); NULL-ended */
  /* C code for generated kernels: a template in which $0, $1, ... stand
   * for the (parenthesized) arguments, e.g. "($0 + $1)", "exp($0)". */
  const char *c_template;
  /* Evaluation for the reference evaluator and fill computation; n is the
   * number of arguments.  NULL for user-defined ops (evaluate `body`). */
  double (*eval)(const double *args, int n);
  /* User-defined ops: the body over ND_PARAM leaves, else NULL. */
  const Node *body;
  /* Unused, kept for layout compatibility: derivatives are `deriv` and
   * `partial` below (text rather than nodes, because the built-in table
   * is static const and nodes live in a program's arena). */
  const Node *derivative[3];
  int is_builtin;       /* 1 for the built-in table */
  DerivKind deriv;      /* how grad differentiates it (DERIV_BODY: user) */
  /* DERIV_FORMULA: the partial derivative in each argument as .tin text
   * over x, y, z and v, e.g. sigmoid's "v * (1 - v)"; "0" means no
   * gradient flows through that argument (ifelse's condition). */
  const char *partial[3];
} Op;

/* The registry of one program: the built-ins (shared, immutable, static
 * const) plus that program's user defs (in its arena). */
typedef struct OpRegistry {
  const Op *const *builtin; /* the built-in table */
  int nbuiltin;
  Op **user;                /* user defs, in order of definition */
  int nuser;
  int cap;
} OpRegistry;

void ops_init(OpRegistry *r);            /* built-ins only */
/* The op named `name` (pointwise spelling: "+", "max", "f"), or NULL. */
const Op *ops_find(const OpRegistry *r, const char *name);
/* The op for an aggregate spelling ("sum", "max", a user def), or NULL. */
const Op *ops_find_agg(const OpRegistry *r, const char *name);

/* Whether a built-in op maps finite arguments to finite results (up to the
 * overflow of + and * to inf). */
int ops_keeps_finite(const Op *op);
/* A value range (issue 12): what the values of an expression may be.
 * lo..hi bounds its finite values (lo > hi: it has none); nan, pinf and
 * ninf say whether it may be NaN, +inf or -inf; integer that every
 * finite value is a whole number.  Ranges are sound over-approximations
 * with one convention, the one ops_keeps_finite has always had: + - *
 * and sum/prod of finite values are taken to stay finite (their overflow
 * to inf is not seen; the bounds clamp at +-DBL_MAX instead).  Every
 * other op's infinities (x / 0, exp(1000), log(0)) are seen. */
typedef struct Range {
  double lo, hi;
  unsigned char nan, pinf, ninf;
  unsigned char integer;
  /* Whether nan/pinf/ninf were narrowed by finite bounds or whole-ness
   * somewhere below (exp of values <= 700 is finite, r / d with d a
   * whole number >= 1 too): a plan relying on such a range holds only
   * while the data stays within the bounds (the re-run rule compares
   * them); without it, only the specials matter. */
  unsigned char dep;
  /* Fixed by the program text (constants and ops of them), not by data:
   * never widened when looking for `dep`. */
  unsigned char program;
} Range;

Range range_empty(void);               /* no value at all */
Range range_top(void);                 /* any double */
Range range_point(double v);           /* exactly v */
Range range_join(Range a, Range b);    /* either */
Range range_meet(Range a, Range b);    /* both (intersection) */
int range_finite(Range r);             /* no NaN, no infinity */
int range_contains(Range outer, Range inner); /* inner within outer */
/* Whether every value of r is finite or equal to a (the values an
 * annihilator a absorbs: f(a, x) = a). */
int range_absorbed_by(Range r, double a);
/* A short text for explain ("[0, 100]", "[1, 1e+09] or +inf", "NaN"...)
 * into buf[size]. */
void range_format(Range r, char *buf, size_t size);
/* The facts of a tensor (galley.h) with its fill, as a range.  coarse:
 * widen the bounds to 0 or powers of 2, so that plans made from it hold
 * for data whose values move a little (the re-run rule compares with
 * range_contains). */
Range range_of_facts(const galley_facts *f, double fill, int coarse);

/* The range of op applied to arguments with ranges args[0..n) (user defs
 * through their bodies; an op it knows nothing of gives range_top). */
Range ops_range_apply(const Op *op, const Range *args, int n);
/* The range of aggregating `count` values of range r with op (count 0:
 * agg_init). */
Range ops_range_aggregate(const Op *op, Range r, double count);
/* The range of expression n: constants, maps (ifelse refined by its
 * condition in each branch: `ifelse(d > 0, r / d, 0)` divides by d >= 1
 * when d is whole), user defs through their bodies; every other node
 * (accesses) asks leaf(ctx, n).  Past a budget of nodes it gives up
 * (range_top). */
Range ops_range_expr(const Node *n, Range (*leaf)(void *ctx, const Node *n),
                     void *ctx);

/* Add a user op (allocated by the caller in the program's arena). */
void ops_add_user(OpRegistry *r, Arena *a, Op *op);
/* Whether f distributes over g (f(x, g(y,z)) = g(f(x,y), f(x,z))). */
int ops_distributes(const Op *f, const Op *g);

/* Apply op to n argument values (built-ins through eval; user ops by
 * evaluating the body). */
double ops_apply(const Op *op, const double *args, int n);
/* Memoized application for checking the declared properties of user
 * defs: each (op, arguments) pair is evaluated once, so that defs which
 * call each other (f2 calls f1 twice, f3 calls f2 twice, ...) cost time
 * linear in the chain instead of exponential; and every evaluation counts
 * against a budget of expression nodes, so that no body can make the
 * checks run for long.  NULL when out of memory. */
typedef struct OpMemo OpMemo;
OpMemo *ops_memo_new(double budget);
void ops_memo_free(OpMemo *m);
/* ops_apply through the memo; NaN once the budget is spent (then
 * ops_memo_exhausted is 1 and the value means nothing). */
double ops_memo_apply(OpMemo *m, const Op *op, const double *args, int n);
int ops_memo_exhausted(const OpMemo *m);

/* The value of aggregating `count` copies of x with op: the fill of an
 * aggregate over `count` unstored entries.  count 0 gives the identity
 * (callers ensure the op has one).  Exact for + (x * count), * (pow),
 * idempotent ops (x); other associative ops fold by doubling. */
double ops_fold_repeat(const Op *op, double x, double count);
/* The aggregate of `count` copies of x as a dense loop computes it:
 * agg_init, then op with each copy; by associativity op(agg_init,
 * ops_fold_repeat(x, count)), and agg_init for count 0.  The fill of an
 * aggregate whose argument is all fill. */
double ops_fold_aggregate(const Op *op, double x, double count);
/* The value of the pointwise expression n when every access reads its
 * fill: constants are themselves, maps apply their op, and an input or
 * alias access is leaf(ctx, n) (where the fills live differs: bindings
 * when lifting, the plan's accesses when planning).  NaN for anything
 * else, or when out of memory: a correct, if useless, fill. */
double ops_expr_fill(const Node *n,
                     double (*leaf)(const void *ctx, const Node *n),
                     const void *ctx);
/* A value v that leaves every result of a fold of agg from its agg_init
 * unchanged (agg(r, v) == r): its identity when it has one; 0 for any
 * (||) and 1 for all (&&), whose folds give only 0 or 1 (they have no
 * identity: 0 || 5 is 1).  Folding such a v may be skipped, as an
 * identity's (reduced loops before output loops).  1 and *v, or 0. */
int ops_fold_neutral(const Op *agg, double *v);

/* ------------------------------------------------------------------ */
/* Plan nodes (src/ir/plan.c)                                          */
/* ------------------------------------------------------------------ */

typedef struct Loc {
  int line; /* 1-based; 0 = no location (nodes made by rewrites) */
  int col;  /* 1-based */
} Loc;

typedef enum NodeKind {
  ND_CONST, /* a number: value */
  ND_INPUT, /* an access of an input tensor: tensor = input number, idx */
  ND_ALIAS, /* an access of an earlier query: tensor = query number, idx */
  ND_MAP,   /* op applied pointwise to args[0..nargs) */
  ND_AGG,   /* op aggregated over the indices idx[0..nidx) of arg */
  ND_PARAM  /* parameter `tensor` of a user def body */
} NodeKind;

struct Node {
  NodeKind kind;
  Loc loc;           /* where it came from in the source */
  double value;      /* ND_CONST */
  const Op *op;      /* ND_MAP, ND_AGG */
  int nargs;         /* ND_MAP */
  Node **args;       /* ND_MAP */
  Node *arg;         /* ND_AGG: the aggregated expression */
  int nidx;          /* ND_INPUT/ND_ALIAS: one index per mode (may repeat);
                        ND_AGG: the aggregated indices (distinct) */
  int *idx;          /* index ids into Query.indices (per query) */
  int tensor;        /* ND_INPUT: input #; ND_ALIAS: query #; ND_PARAM: # */
  int access;        /* physical plans: the PAccess this ND_INPUT/ND_ALIAS
                        reads (phys.h); 0 and unused in input plans */
};

Node *plan_const(Arena *a, Loc loc, double value);
Node *plan_input(Arena *a, Loc loc, int input, int nidx, const int *idx);
Node *plan_alias(Arena *a, Loc loc, int query, int nidx, const int *idx);
Node *plan_map(Arena *a, Loc loc, const Op *op, int nargs, Node *const *args);
Node *plan_agg(Arena *a, Loc loc, const Op *op, int nidx, const int *idx,
               Node *arg);
Node *plan_param(Arena *a, Loc loc, int param);

/* Structural hash and equality (locations ignored; index ids compared as
 * ids), for CSE.  Equal nodes hash equal. */
uint64_t plan_hash(const Node *n);
int plan_equal(const Node *a, const Node *b);

/* ------------------------------------------------------------------ */
/* Programs                                                            */
/* ------------------------------------------------------------------ */

/* An index of one query (indices are scoped to their query; `dim n = 100`
 * fixes the size of every index named n in every query). */
typedef struct Index {
  const char *name;
  int64_t dim; /* size: from `dim`, else -1 until bound to data */
  Loc loc;     /* first occurrence in the query */
} Index;

typedef struct InputDecl {
  const char *name;
  int order;   /* number of modes */
  double fill; /* declared fill (`fill V`), default 0 */
  int has_fill; /* `fill V` was written; otherwise the input takes the
                   fill of the tensor bound to it (bind_input_fill) */
  Loc loc;
} InputDecl;

typedef struct DimDecl {
  const char *name;
  int64_t size;
  Loc loc;
} DimDecl;

typedef struct Query {
  const char *name;
  int nout;        /* number of LHS indices */
  int *out;        /* LHS index ids, in order */
  Index *indices;  /* every index of the query */
  int nindices;
  Node *expr;      /* the right-hand side, implicit sums made explicit Aggs */
  int is_output;   /* a result of the program */
  Loc loc;
} Query;

typedef struct Program {
  Arena *arena;
  const char *filename; /* as given, for messages */
  const char *source;   /* the text (NUL-terminated copy) */
  OpRegistry ops;
  InputDecl *inputs;
  int ninputs;
  DimDecl *dims;
  int ndims;
  Query *queries;
  int nqueries;
  /* The results as query numbers, in the order of the `output` statement
   * (without one: every query with is_output, in query order).  Set by
   * front_parse; when NULL, users fall back to is_output in query order. */
  int *outputs;
  int noutputs;
} Program;

/* Print a query in the paper's input-plan notation:
 *   Query(P[i], Map(sigmoid, Agg(+, j, Map(*, X[i,j], theta[j]))))
 * Inputs print as NAME[idx,...] (a scalar as NAME), aliases as
 * Alias(NAME[idx,...]), constants with %.17g, Agg ops by their pointwise
 * name (+, *, max, min, ||, &&, user name). */
void plan_print_query(const Program *p, const Query *q, FILE *f);
/* plan_print_query writes no newline.  Shadowed indices (a second Index
 * with the same name in one query) print as NAME#2, NAME#3, ... in the
 * order the printout first mentions them (the LHS first, then left to
 * right); parameters of user bodies as $0, $1, ... */
/* Every query, one per line, then (when there are results) one line
 * Outputs(NAME, ...) naming them in p->outputs order (else is_output). */
void plan_print(const Program *p, FILE *f);

/* ------------------------------------------------------------------ */
/* Front end (src/front/)                                              */
/* ------------------------------------------------------------------ */

/* Parse and check a .tin program.  On success *out is a Program that owns
 * its arena.  On failure returns GALLEY_EPROGRAM, *out is NULL, err holds
 * the first diagnostic's "FILE:LINE:COL: error: MESSAGE" with its line and
 * col, and *diagnostics (when diagnostics is non-NULL) is a malloc()ed text
 * of ALL diagnostics found, each as
 *   FILE:LINE:COL: error: MESSAGE\n<source line>\n<spaces>^\n  */
galley_status front_parse(const char *filename, const char *source,
                          size_t length, Program **out, char **diagnostics,
                          galley_error *err);

/* Frees p's arena; the Program itself is allocated in its own arena
 * (p->arena), so nothing else is freed.  NULL is fine. */
void program_free(Program *p);

/* ------------------------------------------------------------------ */
/* Binding checks (src/exec/bind.c)                                    */
/* ------------------------------------------------------------------ */

/* Shared by the reference evaluator and the planners, so that a mismatch
 * between program and data gets the same located message on every path. */

/* Record "FILE:LINE:COL: error: MESSAGE" (or "FILE: error: MESSAGE" when
 * loc has no line) with err->line/col, and return status. */
galley_status prog_fail_at(galley_error *err, galley_status status,
                           const Program *p, Loc loc, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
galley_status prog_vfail_at(galley_error *err, galley_status status,
                            const Program *p, Loc loc, const char *fmt,
                            va_list ap);

/* Input k is bound (inputs[k] non-NULL), has the declared order, and,
 * when a fill is declared, a fill that is the declared one or 0
 * (man/tin.5).  GALLEY_EBIND if not. */
galley_status bind_check_input(const Program *p,
                               const galley_tensor *const *inputs, int k,
                               galley_error *err);
galley_status bind_check_inputs(const Program *p,
                                const galley_tensor *const *inputs,
                                galley_error *err);

/* The fill input k is read with: the declared one (which overrides a
 * bound fill of 0), else the bound tensor's (man/tin.5, "Fills from
 * data"); the declared or default 0 when nothing is bound. */
double bind_input_fill(const Program *p, const galley_tensor *const *inputs,
                       int k);

/* The size of every index of query qi into sizes[0..nindices): from its
 * `dim`, else from the tensors it indexes (bound inputs; earlier queries'
 * result dims qdims[query][mode]).  A conflict, or an index nothing sizes,
 * is GALLEY_EBIND located at the offending access. */
galley_status bind_query_sizes(const Program *p, int qi,
                               const galley_tensor *const *inputs,
                               const int64_t (*qdims)[GALLEY_MAX_ORDER],
                               int64_t *sizes, galley_error *err);

/* ------------------------------------------------------------------ */
/* Reference evaluator (src/exec/refeval.c)                            */
/* ------------------------------------------------------------------ */

/* Fill value of an expression (tin.md section 1): inputs their fill,
 * constants themselves, maps op(fills), aggregates the fold of the fill
 * over the product of the aggregated sizes.  sizes[id] are the bound
 * sizes of the query's indices; fills of earlier queries in qfill[]. */
double refeval_fill(const Program *p, const Query *q, const Node *n,
                    const double *input_fill, const double *query_fill,
                    const int64_t *sizes);

/* Evaluate every query of p, densely, in order.  inputs[k] is bound to
 * p->inputs[k] (borrowed).  Index sizes are inferred from the bound
 * inputs; a size conflict, an unbound or ill-shaped input, or a size that
 * cannot be inferred fails with GALLEY_EBIND and "FILE:LINE:COL: error:
 * ..." at the offending access.  On success results[q] (q < nqueries) is
 * a new tensor owned by the caller (default format, entries equal to the
 * fill not stored, fill as computed), for every query. */
galley_status refeval_run(const Program *p, const galley_tensor *const *inputs,
                          galley_tensor **results, galley_error *err);

#endif /* GALLEY_IR_H */
