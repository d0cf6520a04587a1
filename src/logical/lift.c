/*
 * lift.c -- binding and lifting: the trivial logical plan (logical_lift)
 * that both planners consume.
 *
 * From a program and its bound inputs, in program order:
 *   1. Check every bound input against its declaration and infer the size
 *      of each index exactly as the reference evaluator does (`dim`, then
 *      the tensors it indexes, in source order), with the same located
 *      GALLEY_EBIND messages on a conflict (src/ir/bind.c).
 *   2. Lift nested aggregates, innermost first: every ND_AGG that is not
 *      the root of its query becomes a logical query "_l<N>" whose output
 *      indices are the subexpression's free indices (in order of first
 *      appearance) and is read back through an ND_ALIAS.  The root ND_AGG
 *      becomes the query's aggregate.  So no logical expression holds an
 *      ND_AGG, and a lifted query comes before the query that reads it.
 *   3. Give each logical query a compact index table: output indices (LHS
 *      order, each once), then the reduced ones, with their bound sizes.
 *      The default physical planner takes these ids as its loop positions
 *      (loop order = outputs, then reduced ones); the optimizers reorder.
 *   4. Each query's fill: its expression's fill with inputs read at their
 *      fill (bind_input_fill) and aliases at their query's, folded over
 *      the reduced sizes (refeval_fill's rule).
 *
 * The logical optimizer rewrites this plan (optimize.c); the default
 * physical planner (src/physical/default.c) plans it as it is.  Nothing
 * here depends on storage formats: a transposed copy is the physical
 * planner's business.  Everything lives in the plan's arena; running out
 * of memory longjmps to the single catch in logical_lift.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "logical.h"

typedef struct Lifter {
  Arena *a;
  const Program *p;
  const galley_tensor *const *inputs;
  galley_error *err;
  LogicalPlan *lp;
  int cap;                            /* room in lp->q */
  int *lq_of;                         /* program query -> logical query */
  int64_t (*qdims)[GALLEY_MAX_ORDER]; /* dims of program query results */
  const Query *uq;                    /* the program query being lifted */
  int64_t *sizes;                     /* its sizes, per program index id */
} Lifter;

static galley_status fail_at(const Lifter *L, galley_status status, Loc loc,
                             const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static galley_status fail_at(const Lifter *L, galley_status status, Loc loc,
                             const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  prog_vfail_at(L->err, status, L->p, loc, fmt, ap);
  va_end(ap);
  return status;
}

/* A new, zeroed logical query at the end of the plan. */
static int push_query(Lifter *L) {
  LogicalPlan *lp = L->lp;
  if (lp->nq == L->cap) {
    int cap = L->cap ? 2 * L->cap : 8;
    LogicalQuery *q = arena_alloc(L->a, (size_t)cap * sizeof *q);
    if (lp->nq)
      memcpy(q, lp->q, (size_t)lp->nq * sizeof *q);
    lp->q = q;
    L->cap = cap;
  }
  return lp->nq++;
}

/* ------------------------------------------------------------------ */
/* Free indices of a nested aggregate                                  */
/* ------------------------------------------------------------------ */

/* Mark the indices bound by the aggregates inside n (n included).
 * Index ids are unique per binder (a shadowing index has its own id), so
 * an id bound anywhere in n is bound wherever it occurs in n. */
static void mark_bound(const Node *n, unsigned char *bound) {
  if (n->kind == ND_AGG) {
    for (int k = 0; k < n->nidx; k++)
      bound[n->idx[k]] = 1;
    mark_bound(n->arg, bound);
  } else if (n->kind == ND_MAP) {
    for (int a = 0; a < n->nargs; a++)
      mark_bound(n->args[a], bound);
  }
}

/* Append to free_[] the unbound indices of the accesses in n, in order
 * of first appearance (left to right); seen[] marks those taken. */
static void collect_free(const Node *n, unsigned char *seen, int *free_,
                         int *nfree) {
  switch (n->kind) {
  case ND_INPUT:
  case ND_ALIAS:
    for (int k = 0; k < n->nidx; k++)
      if (!seen[n->idx[k]]) {
        seen[n->idx[k]] = 1;
        free_[(*nfree)++] = n->idx[k];
      }
    return;
  case ND_MAP:
    for (int a = 0; a < n->nargs; a++)
      collect_free(n->args[a], seen, free_, nfree);
    return;
  case ND_AGG:
    collect_free(n->arg, seen, free_, nfree);
    return;
  default:
    return;
  }
}

/* The free indices of n in order of first appearance. */
static int *free_indices(Lifter *L, const Node *n, int *nfree) {
  size_t ni = (size_t)L->uq->nindices + 1;
  unsigned char *seen = arena_alloc(L->a, ni); /* zeroed */
  int *free_ = arena_alloc(L->a, ni * sizeof *free_);
  mark_bound(n, seen); /* bound ones count as already taken */
  *nfree = 0;
  collect_free(n, seen, free_, nfree);
  return free_;
}

/* ------------------------------------------------------------------ */
/* Index tables: outputs, then reduced ones                            */
/* ------------------------------------------------------------------ */

/* old[] maps a new id to the program query's id; the new table holds the
 * output indices once each, then the reduced ones. */
typedef struct Renumber {
  int n;
  int *old;   /* per new id */
  int *to;    /* per program id: new id or -1 */
} Renumber;

static void renumber_add(Renumber *r, int id) {
  if (r->to[id] < 0) {
    r->to[id] = r->n;
    r->old[r->n++] = id;
  }
}

static galley_status renumber_node(const Lifter *L, const Renumber *r,
                                   Node *n) {
  switch (n->kind) {
  case ND_INPUT:
  case ND_ALIAS:
    for (int k = 0; k < n->nidx; k++) {
      if (r->to[n->idx[k]] < 0)
        return fail_at(L, GALLEY_EINTERNAL, n->loc,
                       "index '%s' is neither on the left nor aggregated",
                       L->uq->indices[n->idx[k]].name);
      n->idx[k] = r->to[n->idx[k]];
    }
    return GALLEY_OK;
  case ND_MAP:
    for (int k = 0; k < n->nargs; k++) {
      galley_status st = renumber_node(L, r, n->args[k]);
      if (st != GALLEY_OK)
        return st;
    }
    return GALLEY_OK;
  default:
    return GALLEY_OK;
  }
}

/* Fill q's index table, out and red from program ids, and renumber its
 * expression. */
static galley_status set_indices(Lifter *L, LogicalQuery *q, int nout,
                                 const int *out, int nred, const int *red) {
  Arena *a = L->a;
  int nprog = L->uq->nindices;
  Renumber r = {0, arena_alloc(a, ((size_t)nprog + 1) * sizeof(int)),
                arena_alloc(a, ((size_t)nprog + 1) * sizeof(int))};
  for (int id = 0; id < nprog; id++)
    r.to[id] = -1;
  for (int k = 0; k < nout; k++)
    renumber_add(&r, out[k]);
  for (int k = 0; k < nred; k++)
    renumber_add(&r, red[k]);
  q->nindices = r.n;
  q->indices = arena_alloc(a, ((size_t)r.n + 1) * sizeof *q->indices);
  for (int k = 0; k < r.n; k++) {
    q->indices[k] = L->uq->indices[r.old[k]];
    q->indices[k].dim = L->sizes[r.old[k]];
  }
  q->nout = nout;
  q->out = arena_alloc(a, ((size_t)nout + 1) * sizeof *q->out);
  for (int k = 0; k < nout; k++)
    q->out[k] = r.to[out[k]];
  q->nred = nred;
  q->red = arena_alloc(a, ((size_t)nred + 1) * sizeof *q->red);
  for (int k = 0; k < nred; k++)
    q->red[k] = r.to[red[k]];
  return renumber_node(L, &r, q->expr);
}

/* ------------------------------------------------------------------ */
/* Fills                                                               */
/* ------------------------------------------------------------------ */

/* The fill an access of the expression being lifted reads: an input's
 * from its binding, an earlier query's as computed. */
static double access_fill(const void *ctx, const Node *n) {
  const Lifter *L = ctx;
  return n->kind == ND_INPUT ? bind_input_fill(L->p, L->inputs, n->tensor)
                             : L->lp->q[n->tensor].out_fill;
}

static double query_fill(const Lifter *L, const LogicalQuery *q) {
  double v = ops_expr_fill(q->expr, access_fill, L);
  if (!q->agg)
    return v;
  double count = 1;
  for (int k = 0; k < q->nred; k++)
    count *= (double)q->indices[q->red[k]].dim;
  return ops_fold_aggregate(q->agg, v, count);
}

/* ------------------------------------------------------------------ */
/* Lifting                                                             */
/* ------------------------------------------------------------------ */

/* Append a logical query computing agg over red of expr (program ids of
 * the query being lifted) with output indices out; name NULL means
 * "_l<N>".  *number is its place in the plan. */
static galley_status add_query(Lifter *L, const char *name, int user_query,
                               int nout, const int *out, const Op *agg,
                               int nred, const int *red, Node *expr,
                               int *number) {
  LogicalQuery q = {0};
  q.user_query = user_query;
  q.agg = nred > 0 ? agg : NULL;
  q.expr = expr;
  galley_status st = set_indices(L, &q, nout, out, q.agg ? nred : 0, red);
  if (st != GALLEY_OK)
    return st;
  q.out_fill = query_fill(L, &q);
  *number = push_query(L);
  q.name = name ? name : arena_printf(L->a, "_l%d", *number);
  L->lp->q[*number] = q;
  return GALLEY_OK;
}

/* A copy of n in the plan's arena in which every ND_AGG (n itself
 * included) has become an ND_ALIAS of a logical query computing it, and
 * aliases name logical queries.  Index ids stay the program query's;
 * add_query renumbers them. */
static galley_status lower(Lifter *L, const Node *n, Node **out) {
  Arena *a = L->a;
  Node *c = arena_alloc(a, sizeof *c);
  *c = *n;
  c->access = 0;
  *out = c;
  switch (n->kind) {
  case ND_INPUT:
    c->idx = arena_ints(a, n->nidx, n->idx);
    return GALLEY_OK;
  case ND_ALIAS:
    c->idx = arena_ints(a, n->nidx, n->idx);
    c->tensor = L->lq_of[n->tensor];
    return GALLEY_OK;
  case ND_MAP: {
    c->args = arena_alloc(a, ((size_t)n->nargs + 1) * sizeof *c->args);
    galley_status st = GALLEY_OK;
    for (int k = 0; k < n->nargs && st == GALLEY_OK; k++)
      st = lower(L, n->args[k], &c->args[k]);
    return st;
  }
  case ND_AGG: {
    Node *body;
    galley_status st = lower(L, n->arg, &body);
    if (st != GALLEY_OK)
      return st;
    int nfree;
    int *free_ = free_indices(L, n, &nfree);
    if (nfree > GALLEY_MAX_ORDER)
      return fail_at(L, GALLEY_EBIND, n->loc,
                     "this aggregate has %d free indices; at most %d are "
                     "supported",
                     nfree, GALLEY_MAX_ORDER);
    int number;
    st = add_query(L, NULL, -1, nfree, free_, n->op, n->nidx, n->idx, body,
                   &number);
    if (st != GALLEY_OK)
      return st;
    *c = (Node){.kind = ND_ALIAS, .loc = n->loc, .nidx = nfree,
                .idx = free_, .tensor = number};
    return GALLEY_OK;
  }
  case ND_CONST:
  case ND_PARAM:
    break;
  }
  return GALLEY_OK;
}

/* Size the indices of program query qi (bind.c, as the reference
 * evaluator). */
static galley_status infer_sizes(Lifter *L, int qi) {
  const Query *q = L->uq;
  L->sizes = arena_alloc(L->a, ((size_t)q->nindices + 1) * sizeof *L->sizes);
  galley_status st = bind_query_sizes(
      L->p, qi, L->inputs, (const int64_t (*)[GALLEY_MAX_ORDER])L->qdims,
      L->sizes, L->err);
  if (st == GALLEY_OK && q->nout > GALLEY_MAX_ORDER)
    st = fail_at(L, GALLEY_EBIND, q->loc,
                 "query '%s' has %d indices on the left; at most %d are "
                 "supported",
                 q->name, q->nout, GALLEY_MAX_ORDER);
  return st;
}

/* Lift program query qi and the nested aggregates it holds. */
static galley_status lift_user_query(Lifter *L, int qi) {
  const Query *uq = &L->p->queries[qi];
  L->uq = uq;
  galley_status st = infer_sizes(L, qi);
  if (st != GALLEY_OK)
    return st;
  for (int k = 0; k < uq->nout; k++)
    L->qdims[qi][k] = L->sizes[uq->out[k]];
  const Node *root = uq->expr;
  const Op *agg = NULL;
  int nred = 0;
  const int *red = NULL;
  if (root->kind == ND_AGG) {
    agg = root->op;
    nred = root->nidx;
    red = root->idx;
    root = root->arg;
  }
  Node *expr;
  st = lower(L, root, &expr);
  if (st == GALLEY_OK)
    st = add_query(L, uq->name, qi, uq->nout, uq->out, agg, nred, red, expr,
                   &L->lq_of[qi]);
  return st;
}

/* The outputs as program.c orders them: the `output` statement's order,
 * else every query marked is_output in query order. */
static void set_outputs(Lifter *L) {
  const Program *p = L->p;
  LogicalPlan *lp = L->lp;
  lp->outputs = arena_alloc(L->a, ((size_t)p->nqueries + 1) * sizeof(int));
  lp->output_names =
      arena_alloc(L->a, ((size_t)p->nqueries + 1) * sizeof(const char *));
  int n = 0;
  if (p->outputs) {
    for (int k = 0; k < p->noutputs; k++) {
      lp->output_names[n] = p->queries[p->outputs[k]].name;
      lp->outputs[n++] = L->lq_of[p->outputs[k]];
    }
  } else {
    for (int q = 0; q < p->nqueries; q++)
      if (p->queries[q].is_output) {
        lp->output_names[n] = p->queries[q].name;
        lp->outputs[n++] = L->lq_of[q];
      }
  }
  lp->noutputs = n;
}

static galley_status lift_all(Lifter *L) {
  const Program *p = L->p;
  galley_status st = GALLEY_OK;
  for (int k = 0; k < p->ninputs && st == GALLEY_OK; k++)
    st = bind_check_input(p, L->inputs, k, L->err);
  size_t nq = (size_t)p->nqueries + 1;
  L->lq_of = arena_alloc(L->a, nq * sizeof *L->lq_of);
  L->qdims = arena_alloc(L->a, nq * sizeof *L->qdims);
  for (int q = 0; q < p->nqueries && st == GALLEY_OK; q++)
    st = lift_user_query(L, q);
  if (st == GALLEY_OK)
    set_outputs(L);
  return st;
}

/* lift_all under the arena's out-of-memory catch; *status is
 * GALLEY_ENOMEM when memory ran out. */
static void lift_guarded(Lifter *L, galley_status *status) {
  jmp_buf oom;
  L->a->oom = &oom;
  if (setjmp(oom)) {
    *status = GALLEY_ENOMEM;
    return;
  }
  *status = lift_all(L);
  L->a->oom = NULL;
}

galley_status logical_lift(const Program *p, const galley_tensor *const *inputs,
                           LogicalPlan **out, galley_error *err) {
  *out = NULL;
  if (err)
    memset(err, 0, sizeof *err);
  Arena *a = arena_new();
  LogicalPlan *lp = a ? arena_alloc(a, sizeof *lp) : NULL;
  galley_status st = GALLEY_ENOMEM;
  if (lp) {
    lp->arena = a;
    lp->prog = p;
    Lifter L = {.a = a, .p = p, .inputs = inputs, .err = err, .lp = lp};
    lift_guarded(&L, &st);
  }
  if (st == GALLEY_ENOMEM && err) {
    memset(err, 0, sizeof *err);
    err->status = GALLEY_ENOMEM;
    snprintf(err->msg, sizeof err->msg,
             "out of memory planning the program (logical plan)");
  }
  if (st != GALLEY_OK) {
    arena_free(a);
    return st;
  }
  a->oom = NULL;
  *out = lp;
  return GALLEY_OK;
}
