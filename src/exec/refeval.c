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

/* Errors located in the program text (bind.c). */
#define fail_at prog_fail_at

static galley_status out_of_memory(galley_error *err) {
  if (err) {
    err->status = GALLEY_ENOMEM;
    err->line = err->col = 0;
    snprintf(err->msg, sizeof err->msg, "out of memory");
  }
  return GALLEY_ENOMEM;
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
    return ops_fold_aggregate(n->op,
                     refeval_fill(p, q, n->arg, input_fill, query_fill, sizes),
                     agg_count(n, sizes));
  case ND_PARAM:
    break;
  }
  return NAN;
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
  int64_t *env;                       /* per index of the current query */
  double *stack;                      /* map argument slots */
} Run;

static void run_free_query(Run *r) {
  free(r->sizes);
  free(r->env);
  free(r->stack);
  r->sizes = NULL;
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
    galley_status st = bind_check_input(p, inputs, k, err);
    if (st != GALLEY_OK)
      return st;
    r->input_fill[k] = bind_input_fill(p, inputs, k);
  }
  return GALLEY_OK;
}

/* Per-query scratch: sizes, size sources, environment, map slots. */
static galley_status run_alloc_query(Run *r, const Query *q,
                                     galley_error *err) {
  size_t n = (size_t)q->nindices + 1;
  r->sizes = calloc(n, sizeof *r->sizes);
  r->env = calloc(n, sizeof *r->env);
  r->stack = calloc((size_t)stack_need(q->expr) + 1, sizeof *r->stack);
  if (!r->sizes || !r->env || !r->stack)
    return out_of_memory(err);
  return GALLEY_OK;
}

/* Evaluate query number qi densely and build its result tensor. */
static galley_status run_query(Run *r, int qi, galley_tensor **result,
                               galley_error *err) {
  const Program *p = r->p;
  const Query *q = &p->queries[qi];
  galley_status st = run_alloc_query(r, q, err);
  if (st == GALLEY_OK)
    st = bind_query_sizes(p, qi, r->inputs,
                          (const int64_t (*)[GALLEY_MAX_ORDER])r->qdims,
                          r->sizes, err);
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
