/*
 * refeval.c -- the reference evaluator: the dense meaning of tin.md
 * section 1, computed the obvious way.
 *
 * For every query, in order: infer the size of each of its indices from
 * `dim` and from the tensors it indexes (bound inputs, earlier results),
 * then, for every coordinate of the left-hand side, evaluate the
 * expression recursively with an environment of index values.  An
 * aggregate loops over the whole range of its indices, so unstored
 * entries take part with their fill value exactly as stored ones do.
 *
 * It is slow on purpose: no sparsity, no reordering, no algebra beyond
 * applying each operator.  Every later stage (optimizer, generated
 * kernels) is tested against it, so it must stay simple enough to be
 * checked by reading.  Size guards refuse queries whose dense output or
 * iteration space would take hours or exhaust memory.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* The evaluator refuses a query whose dense output has more entries than
 * this (2 GiB of doubles) ... */
#define MAX_OUTPUT_ENTRIES 268435456.0 /* 2^28 */
/* ... or whose evaluation would visit more expression nodes than this
 * (minutes of work at the evaluator's speed). */
#define MAX_WORK 17179869184.0 /* 2^34 */

/* ------------------------------------------------------------------ */
/* Messages                                                            */
/* ------------------------------------------------------------------ */

/* Record "FILE:LINE:COL: error: MESSAGE" (or "FILE: error: MESSAGE" for a
 * node without location) and return status. */
static galley_status fail_at(galley_error *err, galley_status status,
                             const Program *p, Loc loc, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static galley_status fail_at(galley_error *err, galley_status status,
                             const Program *p, Loc loc, const char *fmt, ...) {
  if (!err)
    return status;
  const char *file = p->filename ? p->filename : "<program>";
  int n = loc.line > 0 ? snprintf(err->msg, sizeof err->msg,
                                  "%s:%d:%d: error: ", file, loc.line, loc.col)
                       : snprintf(err->msg, sizeof err->msg, "%s: error: ", file);
  if (n >= 0 && (size_t)n < sizeof err->msg) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
    va_end(ap);
  }
  err->status = status;
  err->line = loc.line;
  err->col = loc.col;
  return status;
}

static galley_status out_of_memory(galley_error *err) {
  if (err) {
    err->status = GALLEY_ENOMEM;
    err->line = err->col = 0;
    snprintf(err->msg, sizeof err->msg, "out of memory");
  }
  return GALLEY_ENOMEM;
}

/* Fills compare equal when both are the same number or both NaN. */
static int same_fill(double a, double b) {
  return a == b || (isnan(a) && isnan(b));
}

/* ------------------------------------------------------------------ */
/* Fill values                                                         */
/* ------------------------------------------------------------------ */

/* How many elements an aggregate over n's indices visits. */
static double agg_count(const Node *n, const int64_t *sizes) {
  double count = 1;
  for (int k = 0; k < n->nidx; k++)
    count *= (double)sizes[n->idx[k]];
  return count;
}

/* The value of aggregating `count` copies of x, as the dense loop computes
 * it: agg_init, then op with each copy.  Because the op is associative,
 * that is op(agg_init, x op x op ... op x) for count >= 1. */
static double fold_fill(const Op *op, double x, double count) {
  if (count <= 0)
    return op->agg_init;
  double args[2] = {op->agg_init, ops_fold_repeat(op, x, count)};
  return ops_apply(op, args, 2);
}

double refeval_fill(const Program *p, const Query *q, const Node *n,
                    const double *input_fill, const double *query_fill,
                    const int64_t *sizes) {
  switch (n->kind) {
  case ND_CONST:
    return n->value;
  case ND_INPUT:
    return input_fill[n->tensor];
  case ND_ALIAS:
    return query_fill[n->tensor];
  case ND_MAP: {
    double small[8] = {0};
    double *args = n->nargs <= 8 ? small : malloc((size_t)n->nargs * sizeof *args);
    if (!args)
      return NAN; /* only a fill: NaN is still a correct (if useless) choice */
    for (int a = 0; a < n->nargs; a++)
      args[a] = refeval_fill(p, q, n->args[a], input_fill, query_fill, sizes);
    double v = ops_apply(n->op, args, n->nargs);
    if (args != small)
      free(args);
    return v;
  }
  case ND_AGG:
    return fold_fill(n->op,
                     refeval_fill(p, q, n->arg, input_fill, query_fill, sizes),
                     agg_count(n, sizes));
  case ND_PARAM:
    break;
  }
  return NAN;
}

/* ------------------------------------------------------------------ */
/* Checking the bound inputs                                           */
/* ------------------------------------------------------------------ */

/* A bound tensor fits its declaration when the orders agree and its fill
 * is the declared one, or 0: formats that cannot record a fill (Matrix
 * Market, .tns without a '# fill:' line) give 0, and then the declaration
 * says what the unstored entries are (`input D[i,j] fill inf`). */
static galley_status check_input(const Program *p, int k,
                                 const galley_tensor *t, galley_error *err) {
  const InputDecl *d = &p->inputs[k];
  if (!t)
    return fail_at(err, GALLEY_EBIND, p, d->loc, "input '%s' is not bound",
                   d->name);
  int order = galley_tensor_order(t);
  if (order != d->order)
    return fail_at(err, GALLEY_EBIND, p, d->loc,
                   "input '%s' is declared with %d mode%s but the bound "
                   "tensor has %d",
                   d->name, d->order, d->order == 1 ? "" : "s", order);
  double fill = galley_tensor_fill(t);
  if (!same_fill(fill, d->fill) && fill != 0)
    return fail_at(err, GALLEY_EBIND, p, d->loc,
                   "input '%s' is declared with fill %.17g but the bound "
                   "tensor has fill %.17g (declare it with 'fill %.17g')",
                   d->name, d->fill, fill, fill);
  return GALLEY_OK;
}

/* ------------------------------------------------------------------ */
/* Index sizes                                                         */
/* ------------------------------------------------------------------ */

/* What fixed an index's size first: an access (node, mode), or `dim`
 * (node NULL). */
typedef struct SizeSource {
  const Node *node;
  int mode;
} SizeSource;

/* The state of inferring one query's index sizes. */
typedef struct Sizing {
  const Program *p;
  const Query *q;
  const galley_tensor *const *inputs; /* bound inputs */
  int64_t (*qdims)[GALLEY_MAX_ORDER]; /* dims of earlier results */
  int64_t *sizes;                     /* per index id, -1 = unknown */
  SizeSource *src;                    /* per index id */
  galley_error *err;
} Sizing;

/* The name of the tensor an access reads. */
static const char *access_name(const Program *p, const Node *n) {
  return n->kind == ND_INPUT ? p->inputs[n->tensor].name
                             : p->queries[n->tensor].name;
}

static const DimDecl *find_dim(const Program *p, const char *name) {
  for (int d = 0; d < p->ndims; d++)
    if (strcmp(p->dims[d].name, name) == 0)
      return &p->dims[d];
  return NULL;
}

/* The error for index id having size `size` at mode `mode` of access n
 * when an earlier source gave it another size. */
static galley_status size_conflict(Sizing *s, int id, const Node *n, int mode,
                                   int64_t size) {
  const Program *p = s->p;
  const Index *ix = &s->q->indices[id];
  const SizeSource *was = &s->src[id];
  long long now = (long long)size, before = (long long)s->sizes[id];
  const char *name = access_name(p, n);
  if (!was->node) {
    const DimDecl *d = find_dim(p, ix->name);
    Loc dl = d ? d->loc : ix->loc;
    return fail_at(s->err, GALLEY_EBIND, p, n->loc,
                   "index '%s' has size %lld here (mode %d of '%s') but "
                   "'dim %s = %lld' at %d:%d fixes it",
                   ix->name, now, mode, name, ix->name, before, dl.line, dl.col);
  }
  if (was->node == n)
    return fail_at(s->err, GALLEY_EBIND, p, n->loc,
                   "index '%s' has size %lld here (mode %d of '%s') but size "
                   "%lld in mode %d of the same access",
                   ix->name, now, mode, name, before, was->mode);
  return fail_at(s->err, GALLEY_EBIND, p, n->loc,
                 "index '%s' has size %lld here (mode %d of '%s') but size "
                 "%lld at %d:%d (mode %d of '%s')",
                 ix->name, now, mode, name, before, was->node->loc.line,
                 was->node->loc.col, was->mode, access_name(p, was->node));
}

/* Take the sizes of an access's indices from the tensor it reads. */
static galley_status size_access(Sizing *s, const Node *n) {
  for (int k = 0; k < n->nidx; k++) {
    int id = n->idx[k];
    int64_t size = n->kind == ND_INPUT
                       ? galley_tensor_dim(s->inputs[n->tensor], k)
                       : s->qdims[n->tensor][k];
    if (s->sizes[id] < 0) {
      s->sizes[id] = size;
      s->src[id] = (SizeSource){n, k};
    } else if (s->sizes[id] != size) {
      return size_conflict(s, id, n, k, size);
    }
  }
  return GALLEY_OK;
}

/* Walk the expression in source order (arguments left to right), so that
 * a conflict is reported at the later of the two accesses. */
static galley_status size_walk(Sizing *s, const Node *n) {
  galley_status st = GALLEY_OK;
  switch (n->kind) {
  case ND_INPUT:
  case ND_ALIAS:
    return size_access(s, n);
  case ND_MAP:
    for (int a = 0; a < n->nargs && st == GALLEY_OK; a++)
      st = size_walk(s, n->args[a]);
    return st;
  case ND_AGG:
    return size_walk(s, n->arg);
  case ND_CONST:
  case ND_PARAM:
    break;
  }
  return GALLEY_OK;
}

/* Every index of query q gets a size, or the query fails. */
static galley_status infer_sizes(Sizing *s) {
  const Query *q = s->q;
  for (int id = 0; id < q->nindices; id++) {
    s->sizes[id] = q->indices[id].dim;
    s->src[id] = (SizeSource){NULL, 0};
  }
  galley_status st = size_walk(s, q->expr);
  for (int id = 0; id < q->nindices && st == GALLEY_OK; id++)
    if (s->sizes[id] < 0)
      st = fail_at(s->err, GALLEY_EBIND, s->p, q->indices[id].loc,
                   "cannot infer the size of index '%s' in query '%s': it "
                   "indexes no tensor and no 'dim %s = N' fixes it",
                   q->indices[id].name, q->name, q->indices[id].name);
  return st;
}

/* ------------------------------------------------------------------ */
/* Size guards                                                         */
/* ------------------------------------------------------------------ */

/* Expression nodes visited to evaluate n once (saturates as a double). */
static double work_of(const Node *n, const int64_t *sizes) {
  double w = 1;
  switch (n->kind) {
  case ND_MAP:
    for (int a = 0; a < n->nargs; a++)
      w += work_of(n->args[a], sizes);
    return w;
  case ND_AGG:
    return 1 + agg_count(n, sizes) * work_of(n->arg, sizes);
  default:
    return w;
  }
}

static galley_status check_size(const Program *p, const Query *q,
                                const int64_t *sizes, galley_error *err) {
  if (q->nout > GALLEY_MAX_ORDER)
    return fail_at(err, GALLEY_EBIND, p, q->loc,
                   "query '%s' has %d indices on the left; at most %d are "
                   "supported",
                   q->name, q->nout, GALLEY_MAX_ORDER);
  double entries = 1;
  for (int k = 0; k < q->nout; k++)
    entries *= (double)sizes[q->out[k]];
  if (entries > MAX_OUTPUT_ENTRIES)
    return fail_at(err, GALLEY_EOVERFLOW, p, q->loc,
                   "query '%s' is too large for the reference evaluator: "
                   "%.0f dense output entries (the limit is 2^28)",
                   q->name, entries);
  double work = entries * work_of(q->expr, sizes);
  if (work > MAX_WORK)
    return fail_at(err, GALLEY_EOVERFLOW, p, q->loc,
                   "query '%s' is too large for the reference evaluator: "
                   "about %.3g evaluation steps (the limit is 2^34)",
                   q->name, work);
  return GALLEY_OK;
}

/* ------------------------------------------------------------------ */
/* Dense evaluation                                                    */
/* ------------------------------------------------------------------ */

/* The state of evaluating one query. */
typedef struct Eval {
  const Program *p;
  const galley_tensor *const *inputs;
  const double *input_fill;           /* declared fills */
  double *const *dense;               /* dense results of earlier queries */
  int64_t (*qdims)[GALLEY_MAX_ORDER]; /* their dims */
  const int64_t *sizes;               /* per index id */
  int64_t *env;                       /* per index id: its current value */
  double *stack;                      /* argument slots of nested maps */
  int top;                            /* first free slot */
} Eval;

static double eval_node(Eval *e, const Node *n);

/* An input entry: stored value, else the declared fill. */
static double eval_input(Eval *e, const Node *n) {
  int64_t coord[GALLEY_MAX_ORDER + 1] = {0};
  for (int k = 0; k < n->nidx; k++)
    coord[k] = e->env[n->idx[k]];
  int present = 0;
  double v = galley_tensor_get(e->inputs[n->tensor], coord, &present);
  return present ? v : e->input_fill[n->tensor];
}

/* An entry of an earlier result (row-major). */
static double eval_alias(Eval *e, const Node *n) {
  int64_t off = 0;
  for (int k = 0; k < n->nidx; k++)
    off = off * e->qdims[n->tensor][k] + e->env[n->idx[k]];
  return e->dense[n->tensor][off];
}

/* Arguments go to slots on e->stack, released when the map returns. */
static double eval_map(Eval *e, const Node *n) {
  int base = e->top;
  e->top += n->nargs;
  for (int a = 0; a < n->nargs; a++)
    e->stack[base + a] = eval_node(e, n->args[a]);
  double v = ops_apply(n->op, e->stack + base, n->nargs);
  e->top = base;
  return v;
}

/* Step the indices idx[0..nidx) of env to the next coordinate, last index
 * fastest; 0 after the last one. */
static int next_coord(int64_t *env, int nidx, const int *idx,
                      const int64_t *sizes) {
  for (int k = nidx - 1; k >= 0; k--) {
    if (++env[idx[k]] < sizes[idx[k]])
      return 1;
    env[idx[k]] = 0;
  }
  return 0;
}

/* Fold op over the whole range of the aggregated indices, starting from
 * agg_init (so an empty range gives agg_init). */
static double eval_agg(Eval *e, const Node *n) {
  double acc = n->op->agg_init;
  for (int k = 0; k < n->nidx; k++)
    if (e->sizes[n->idx[k]] == 0)
      return acc;
  for (int k = 0; k < n->nidx; k++)
    e->env[n->idx[k]] = 0;
  do {
    double args[2] = {acc, eval_node(e, n->arg)};
    acc = ops_apply(n->op, args, 2);
  } while (next_coord(e->env, n->nidx, n->idx, e->sizes));
  return acc;
}

static double eval_node(Eval *e, const Node *n) {
  switch (n->kind) {
  case ND_CONST:
    return n->value;
  case ND_INPUT:
    return eval_input(e, n);
  case ND_ALIAS:
    return eval_alias(e, n);
  case ND_MAP:
    return eval_map(e, n);
  case ND_AGG:
    return eval_agg(e, n);
  case ND_PARAM:
    break;
  }
  return NAN; /* parameters occur only in def bodies */
}

/* Slots needed by the nested maps of n (a bound: all of their args). */
static int stack_need(const Node *n) {
  int need = 0;
  if (n->kind == ND_MAP) {
    need = n->nargs;
    for (int a = 0; a < n->nargs; a++)
      need += stack_need(n->args[a]);
  } else if (n->kind == ND_AGG) {
    need = stack_need(n->arg);
  }
  return need;
}

/* Whether the current LHS coordinate lies on the diagonal of every
 * repeated LHS index (C[i,i] = ...): out[k] must agree with coord[k]. */
static int lhs_consistent(const Query *q, const int64_t *coord,
                          const int64_t *env) {
  for (int k = 0; k < q->nout; k++)
    if (env[q->out[k]] != coord[k])
      return 0;
  return 1;
}

/* Fill dense[0..entries) with the query's values in row-major LHS order.
 * Entries off the diagonal of a repeated LHS index take the fill. */
static void eval_query(Eval *e, const Query *q, double *dense, double fill) {
  int64_t coord[GALLEY_MAX_ORDER] = {0};
  int64_t dims[GALLEY_MAX_ORDER];
  for (int k = 0; k < q->nout; k++) {
    dims[k] = e->sizes[q->out[k]];
    if (dims[k] == 0)
      return;
  }
  int64_t off = 0;
  for (;;) {
    for (int k = 0; k < q->nout; k++)
      e->env[q->out[k]] = coord[k];
    dense[off++] =
        lhs_consistent(q, coord, e->env) ? eval_node(e, q->expr) : fill;
    int k = q->nout - 1;
    while (k >= 0 && ++coord[k] == dims[k])
      coord[k--] = 0;
    if (k < 0)
      return;
  }
}

/* ------------------------------------------------------------------ */
/* The run                                                             */
/* ------------------------------------------------------------------ */

/* Everything one run allocates, freed in one place. */
typedef struct Run {
  const Program *p;
  const galley_tensor *const *inputs;
  double *input_fill;                 /* per input */
  double *query_fill;                 /* per query */
  double **dense;                     /* per query, once evaluated */
  int64_t (*qdims)[GALLEY_MAX_ORDER]; /* per query */
  int64_t *sizes;                     /* per index of the current query */
  SizeSource *src;                    /* per index of the current query */
  int64_t *env;                       /* per index of the current query */
  double *stack;                      /* map argument slots */
} Run;

static void run_free_query(Run *r) {
  free(r->sizes);
  free(r->src);
  free(r->env);
  free(r->stack);
  r->sizes = NULL;
  r->src = NULL;
  r->env = NULL;
  r->stack = NULL;
}

static void run_free(Run *r) {
  run_free_query(r);
  if (r->dense)
    for (int q = 0; q < r->p->nqueries; q++)
      free(r->dense[q]);
  free(r->dense);
  free(r->qdims);
  free(r->input_fill);
  free(r->query_fill);
}

static galley_status run_init(Run *r, const Program *p,
                              const galley_tensor *const *inputs,
                              galley_error *err) {
  memset(r, 0, sizeof *r);
  r->p = p;
  r->inputs = inputs;
  size_t ni = (size_t)p->ninputs + 1, nq = (size_t)p->nqueries + 1;
  r->input_fill = calloc(ni, sizeof *r->input_fill);
  r->query_fill = calloc(nq, sizeof *r->query_fill);
  r->dense = calloc(nq, sizeof *r->dense);
  r->qdims = calloc(nq, sizeof *r->qdims);
  if (!r->input_fill || !r->query_fill || !r->dense || !r->qdims)
    return out_of_memory(err);
  for (int k = 0; k < p->ninputs; k++) {
    galley_status st = check_input(p, k, inputs ? inputs[k] : NULL, err);
    if (st != GALLEY_OK)
      return st;
    r->input_fill[k] = p->inputs[k].fill;
  }
  return GALLEY_OK;
}

/* Per-query scratch: sizes, size sources, environment, map slots. */
static galley_status run_alloc_query(Run *r, const Query *q,
                                     galley_error *err) {
  size_t n = (size_t)q->nindices + 1;
  r->sizes = calloc(n, sizeof *r->sizes);
  r->src = calloc(n, sizeof *r->src);
  r->env = calloc(n, sizeof *r->env);
  r->stack = calloc((size_t)stack_need(q->expr) + 1, sizeof *r->stack);
  if (!r->sizes || !r->src || !r->env || !r->stack)
    return out_of_memory(err);
  return GALLEY_OK;
}

/* Evaluate query number qi densely and build its result tensor. */
static galley_status run_query(Run *r, int qi, galley_tensor **result,
                               galley_error *err) {
  const Program *p = r->p;
  const Query *q = &p->queries[qi];
  galley_status st = run_alloc_query(r, q, err);
  Sizing s = {p, q, r->inputs, r->qdims, r->sizes, r->src, err};
  if (st == GALLEY_OK)
    st = infer_sizes(&s);
  if (st == GALLEY_OK)
    st = check_size(p, q, r->sizes, err);
  if (st != GALLEY_OK)
    return st;
  int64_t entries = 1;
  for (int k = 0; k < q->nout; k++) {
    r->qdims[qi][k] = r->sizes[q->out[k]];
    entries *= r->qdims[qi][k];
  }
  double fill = refeval_fill(p, q, q->expr, r->input_fill, r->query_fill,
                             r->sizes);
  r->query_fill[qi] = fill;
  if (!(r->dense[qi] = malloc((size_t)(entries > 0 ? entries : 1) * sizeof(double))))
    return out_of_memory(err);
  Eval e = {p, r->inputs, r->input_fill, r->dense, r->qdims,
            r->sizes, r->env, r->stack, 0};
  eval_query(&e, q, r->dense[qi], fill);
  st = galley_tensor_from_dense(q->nout, r->qdims[qi], r->dense[qi], fill,
                                NULL, result, err);
  run_free_query(r);
  return st;
}

galley_status refeval_run(const Program *p, const galley_tensor *const *inputs,
                          galley_tensor **results, galley_error *err) {
  if (err)
    memset(err, 0, sizeof *err);
  for (int q = 0; q < p->nqueries; q++)
    results[q] = NULL;
  Run r;
  galley_status st = run_init(&r, p, inputs, err);
  for (int q = 0; q < p->nqueries && st == GALLEY_OK; q++)
    st = run_query(&r, q, &results[q], err);
  run_free(&r);
  if (st != GALLEY_OK)
    for (int q = 0; q < p->nqueries; q++)
      results[q] = galley_tensor_free(results[q]);
  return st;
}
