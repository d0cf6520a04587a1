/*
 * optimize.c -- the logical optimizer (Galley paper Sec. 4; galley-notes
 * section 2): variable elimination over sums of products.
 *
 * logical_lift (logical.c) first checks the bound data (the evaluator's
 * GALLEY_EBIND messages), infers the index sizes and lifts every nested
 * aggregate into a query of its own.  Each lifted query of the form
 *   Agg(op, reduced, Map(f, factors...))
 * where op and f are commutative and associative and f distributes over op
 * (a sum of products, a max-plus, an any-of-ands) is then rewritten into a
 * sequence of smaller queries, one per elimination step: the step for index
 * j aggregates j (and every other reduced index local to the same factors)
 * out of the factors that contain j plus the factors their indices cover
 * (galley-notes 2.3 get_reduce_query), materializes the result as a new
 * query, and replaces those factors by an alias of it.  The order of steps
 * is chosen by a cost model (paper Sec. 4.5, galley-notes 2.4) over the
 * sparsity estimates of stats.h: greedily, or exactly by branch and bound
 * over sets of eliminated indices, bounded by the greedy cost (Sec. 4.6).
 *
 * Within one lifted query every reduced index is aggregated by the same
 * commutative, associative op, so every order is allowed: the ordering
 * constraints of nested, non-commuting aggregates are the lift's query
 * boundaries.  Queries of any other shape are kept as lifted (always
 * correct).  The rewrite is exact in real arithmetic for every fill: the
 * logical plan has dense semantics, and each intermediate's fill is the
 * fold of its expression's fill over the reduced sizes (ops_fold_repeat).
 */
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "logical.h"

/* The reference constants (galley-notes 2.4): ComputeCost,
 * DenseAllocateCost, SparseAllocateCost; no dense intermediate over 8 GiB. */
OptOptions opt_defaults(void) {
  OptOptions o = {EST_CHAIN, SEARCH_GREEDY, 1.0, 0.5, 60.0,
                  8.0 * 1024 * 1024 * 1024};
  return o;
}

/* Exact search is exponential in the reduced indices: past this many the
 * greedy order is kept (the reference's pruned optimizer stops at 10). */
#define EXACT_MAX_INDICES 10
#define MAX_FACTORS 64

typedef struct Opt {
  const Program *p;
  const galley_tensor *const *inputs;
  OptOptions o;
  const LogicalPlan *lift; /* the lifted plan (input) */
  LogicalPlan *lp;         /* the plan being built */
  Arena *a;                /* lp->arena */
  Arena *scratch;          /* statistics and search states */
  int cap;                 /* allocated length of lp->q */
  int *map;                /* lifted query number -> new query number */
  unsigned char *finite;   /* per lifted query: its values are all finite */
  unsigned char *input_finite; /* per input: values and declared fill */
} Opt;

/* One argument of the product: an expression of the lifted query (alias
 * numbers already in the new plan's numbering), or an intermediate of an
 * earlier step (node NULL, `query` its number in the new plan, -1 while
 * searching). */
typedef struct Factor {
  const Node *node;
  int query;
  IdxSet idx;      /* its indices */
  const TensorStats *st; /* its statistics */
} Factor;

/* A partial elimination: the factors left, the reduced indices still to
 * eliminate, the cost so far and the order chosen. */
typedef struct State {
  int n;
  Factor f[MAX_FACTORS];
  IdxSet left;
  double cost;
  int done;        /* the final step has been taken */
  int nord;
  int ord[STATS_MAX_INDICES];
} State;

/* One elimination step. */
typedef struct Step {
  uint64_t rel;      /* the factors it consumes (bit k = factor k) */
  IdxSet elim;       /* the indices it aggregates */
  IdxSet out;        /* its result's indices */
  int final;         /* it computes the query's result itself */
  const TensorStats *res; /* statistics of its result */
  double cost;
} Step;

/* The lifted query being optimized. */
typedef struct Work {
  Opt *O;
  const LogicalQuery *lq;
  StatsContext sc;
  int64_t *dims;  /* per lifted index id */
  const Op *f;    /* the pointwise op of the product */
  const Op *op;   /* the aggregate */
  IdxSet out;     /* the query's output indices */
  IdxSet extra;   /* reduced indices no factor mentions */
  const TensorStats *result; /* statistics of the query's result */
} Work;

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

static int popcount(uint64_t x) {
  int n = 0;
  for (; x; x &= x - 1)
    n++;
  return n;
}

static IdxSet node_indices(const Node *n) {
  IdxSet s = 0;
  switch (n->kind) {
  case ND_INPUT:
  case ND_ALIAS:
    for (int k = 0; k < n->nidx; k++)
      s |= (IdxSet)1 << n->idx[k];
    break;
  case ND_MAP:
    for (int k = 0; k < n->nargs; k++)
      s |= node_indices(n->args[k]);
    break;
  case ND_AGG:
    s = node_indices(n->arg);
    break;
  default:
    break;
  }
  return s;
}

/* The value of expr where every access reads its fill. */
static double node_fill(const Opt *O, const Node *n) {
  switch (n->kind) {
  case ND_CONST:
    return n->value;
  case ND_INPUT:
    return O->p->inputs[n->tensor].fill;
  case ND_ALIAS:
    return O->lp->q[n->tensor].out_fill;
  case ND_MAP: {
    double *args = arena_alloc(O->scratch, (size_t)n->nargs * sizeof *args);
    for (int k = 0; k < n->nargs; k++)
      args[k] = node_fill(O, n->args[k]);
    return ops_apply(n->op, args, n->nargs);
  }
  default:
    return NAN;
  }
}

/* A copy of n (in the plan's arena) with index ids renamed by idmap (NULL:
 * kept) and, when remap, alias numbers of the lift renamed to the plan's. */
static Node *copy_node(const Opt *O, const Node *n, const int *idmap,
                       int remap) {
  Node *c = arena_alloc(O->a, sizeof *c);
  *c = *n;
  if (n->kind == ND_INPUT || n->kind == ND_ALIAS) {
    c->idx = arena_alloc(O->a, (size_t)(n->nidx + 1) * sizeof *c->idx);
    for (int k = 0; k < n->nidx; k++)
      c->idx[k] = idmap ? idmap[n->idx[k]] : n->idx[k];
    if (n->kind == ND_ALIAS && remap)
      c->tensor = O->map[n->tensor];
  } else if (n->kind == ND_MAP) {
    c->args = arena_alloc(O->a, (size_t)n->nargs * sizeof *c->args);
    for (int k = 0; k < n->nargs; k++)
      c->args[k] = copy_node(O, n->args[k], idmap, remap);
  }
  return c;
}

static int is_reorderable(const Op *op) {
  unsigned need = OP_COMMUTATIVE | OP_ASSOCIATIVE;
  return op && (op->props & need) == need;
}

/* Flatten nested maps by the same associative op into one variadic map:
 * Map(*, a, Map(*, b, c)) -> Map(*, a, b, c).  n is the plan's own copy. */
static int merges_into(const Node *parent, const Node *c) {
  return c->kind == ND_MAP && c->op == parent->op &&
         (parent->op->props & OP_ASSOCIATIVE) &&
         (parent->op->props & OP_VARIADIC);
}

static Node *flatten(const Opt *O, Node *n) {
  if (n->kind != ND_MAP)
    return n;
  int total = 0;
  for (int k = 0; k < n->nargs; k++) {
    n->args[k] = flatten(O, n->args[k]);
    total += merges_into(n, n->args[k]) ? n->args[k]->nargs : 1;
  }
  if (total == n->nargs)
    return n;
  Node **args = arena_alloc(O->a, (size_t)total * sizeof *args);
  int m = 0;
  for (int k = 0; k < n->nargs; k++) {
    Node *c = n->args[k];
    if (merges_into(n, c))
      for (int i = 0; i < c->nargs; i++)
        args[m++] = c->args[i];
    else
      args[m++] = c;
  }
  n->args = args;
  n->nargs = total;
  return n;
}

/* ------------------------------------------------------------------ */
/* Statistics and costs                                                */
/* ------------------------------------------------------------------ */

static TensorStats *node_stats(const Work *W, const Node *n) {
  const Opt *O = W->O;
  switch (n->kind) {
  case ND_CONST:
    return stats_const(&W->sc, n->value);
  case ND_INPUT:
    return stats_from_tensor(&W->sc, O->inputs[n->tensor], n->idx,
                             O->p->inputs[n->tensor].fill);
  case ND_ALIAS: {
    const LogicalQuery *q = &O->lp->q[n->tensor];
    return stats_new(&W->sc, node_indices(n), q->est_nnz, q->out_fill);
  }
  case ND_MAP: {
    const TensorStats **args =
        arena_alloc(O->scratch, (size_t)n->nargs * sizeof *args);
    for (int k = 0; k < n->nargs; k++)
      args[k] = node_stats(W, n->args[k]);
    return stats_map(&W->sc, n->op, args, n->nargs);
  }
  default:
    return stats_new(&W->sc, node_indices(n), 0, NAN);
  }
}

static double est_all(const Work *W, const TensorStats *s) {
  return stats_estimate(&W->sc, s, stats_indices(s), 0);
}

/* The cost of computing comp and materializing res (galley-notes 2.4):
 * every computed entry costs a per index of the computation, every written
 * entry b, dense or sparse by the estimated fill fraction. */
static double step_cost(const Work *W, const TensorStats *comp,
                        const TensorStats *res) {
  const OptOptions *o = &W->O->o;
  double compute = est_all(W, comp) * popcount(stats_indices(comp));
  double written = est_all(W, res);
  double space = stats_dense(W->dims, stats_indices(res));
  int dense = space > 0 && written / space > 0.5;
  return compute * o->cost_compute +
         written * (dense ? o->cost_dense_write : o->cost_sparse_write);
}

/* Statistics of the map of the factors in rel (one factor: itself). */
static const TensorStats *rel_stats(const Work *W, const State *s,
                                    uint64_t rel) {
  const TensorStats *args[MAX_FACTORS];
  int n = 0;
  for (int k = 0; k < s->n; k++)
    if (rel >> k & 1)
      args[n++] = s->f[k].st;
  if (n == 1)
    return args[0];
  return stats_map(&W->sc, W->f, args, n);
}

/* ------------------------------------------------------------------ */
/* Elimination steps                                                   */
/* ------------------------------------------------------------------ */

/* The minimal sub-expression that eliminates index j from state s: the
 * factors holding j, every factor their indices cover, and every other
 * pending index that occurs only inside them. */
static void make_step(const Work *W, const State *s, int j, Step *st) {
  uint64_t rel = 0, all = 0, scal = 0;
  IdxSet kernel = 0;
  for (int k = 0; k < s->n; k++) {
    if (s->f[k].idx >> j & 1) {
      rel |= (uint64_t)1 << k;
      kernel |= s->f[k].idx;
    }
    if (s->f[k].idx)
      all |= (uint64_t)1 << k;
    else
      scal |= (uint64_t)1 << k;
  }
  for (int k = 0; k < s->n; k++)
    if (s->f[k].idx && (s->f[k].idx & ~kernel) == 0)
      rel |= (uint64_t)1 << k;
  st->final = (rel & all) == all;
  if (st->final)
    rel |= scal; /* constants join the last query rather than a new one */
  IdxSet elim = 0;
  for (int r = 0; r < STATS_MAX_INDICES; r++) {
    if (!(s->left >> r & 1) || !(kernel >> r & 1))
      continue;
    int local = 1;
    for (int k = 0; k < s->n; k++)
      if (!(rel >> k & 1) && (s->f[k].idx >> r & 1))
        local = 0;
    if (local)
      elim |= (IdxSet)1 << r;
  }
  st->rel = rel;
  st->elim = st->final ? elim | W->extra : elim;
  st->out = st->final ? W->out : kernel & ~elim;
  const TensorStats *comp = rel_stats(W, s, rel);
  /* every order writes the same result: estimate it once (estimates of
   * one tensor along different paths differ, and the write of the result
   * would otherwise decide the order) */
  st->res = st->final ? W->result
                      : stats_aggregate(&W->sc, W->op, comp, st->elim);
  st->cost = step_cost(W, comp, st->res);
}

/* The state after step st, whose result is query number q (-1 while
 * searching). */
static void apply_step(const State *s, int j, const Step *st, int q,
                       State *next) {
  int n = 0;
  for (int k = 0; k < s->n; k++)
    if (!(st->rel >> k & 1))
      next->f[n++] = s->f[k];
  if (!st->final) {
    Factor nf = {NULL, q, st->out, st->res};
    next->f[n++] = nf;
  }
  next->n = n;
  next->left = s->left & ~st->elim;
  next->cost = s->cost + st->cost;
  next->done = st->final;
  memcpy(next->ord, s->ord, sizeof s->ord);
  next->nord = s->nord;
  next->ord[next->nord++] = j;
}

/* The cost of the last query when no step produced it: the map of the
 * factors left, aggregated over the indices no factor mentions. */
static double finish_cost(const Work *W, const State *s) {
  if (s->done || s->n == 0)
    return 0;
  uint64_t rel = s->n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << s->n) - 1;
  return step_cost(W, rel_stats(W, s, rel), W->result);
}

/* Greedy (Sec. 4.6): the cheapest step each time, lowest index id on
 * ties.  *s is advanced to the end; returns the total cost. */
static double greedy(const Work *W, State *s) {
  while (s->left && !s->done) {
    Step best = {0}, st;
    int bj = -1;
    for (int j = 0; j < STATS_MAX_INDICES; j++) {
      if (!(s->left >> j & 1))
        continue;
      make_step(W, s, j, &st);
      if (bj < 0 || st.cost < best.cost) {
        best = st;
        bj = j;
      }
    }
    State *next = arena_alloc(W->O->scratch, sizeof *next);
    apply_step(s, bj, &best, -1, next);
    *s = *next;
  }
  return s->cost + finish_cost(W, s);
}

/* Exact search (Sec. 4.6, galley-notes 2.5): a layered dynamic program
 * over sets of eliminated indices keeping the cheapest state per set,
 * pruned by the greedy cost.  Returns the best complete order found in
 * *best (its total cost in best->cost) or 0 when none beat `bound`. */
static int exact(const Work *W, const State *s0, double bound, State *best) {
  Arena *a = W->O->scratch;
  int cap = 1 << EXACT_MAX_INDICES;
  State **cur = arena_alloc(a, (size_t)cap * sizeof *cur);
  State **nxt = arena_alloc(a, (size_t)cap * sizeof *nxt);
  int ncur = 1, found = 0;
  double slack = bound * 1e-12;
  cur[0] = (State *)s0;
  while (ncur > 0) {
    int nn = 0;
    for (int c = 0; c < ncur; c++) {
      for (int j = 0; j < STATS_MAX_INDICES; j++) {
        if (!(cur[c]->left >> j & 1))
          continue;
        Step st;
        make_step(W, cur[c], j, &st);
        if (cur[c]->cost + st.cost > bound + slack)
          continue;
        State *s = arena_alloc(a, sizeof *s);
        apply_step(cur[c], j, &st, -1, s);
        if (s->done || !s->left) {
          double total = s->cost + finish_cost(W, s);
          if (total <= bound + slack && (!found || total < best->cost)) {
            *best = *s;
            best->cost = total;
            found = 1;
          }
          continue;
        }
        IdxSet key = s0->left & ~s->left;
        int at = 0;
        while (at < nn && (s0->left & ~nxt[at]->left) != key)
          at++;
        if (at == nn)
          nxt[nn++] = s;
        else if (s->cost < nxt[at]->cost)
          nxt[at] = s;
      }
    }
    State **t = cur;
    cur = nxt;
    nxt = t;
    ncur = nn;
  }
  return found;
}

/* ------------------------------------------------------------------ */
/* Emitting queries                                                    */
/* ------------------------------------------------------------------ */

static galley_status grow(Opt *O) {
  if (O->lp->nq < O->cap)
    return GALLEY_OK;
  int cap = O->cap ? 2 * O->cap : 8;
  LogicalQuery *q = arena_alloc(O->a, (size_t)cap * sizeof *q);
  if (O->lp->nq)
    memcpy(q, O->lp->q, (size_t)O->lp->nq * sizeof *q);
  O->lp->q = q;
  O->cap = cap;
  return GALLEY_OK;
}

static void add_id(int *ids, int *n, int *idmap, int id) {
  if (idmap[id] >= 0)
    return;
  idmap[id] = *n;
  ids[(*n)++] = id;
}

static void collect_ids(const Node *e, int *ids, int *n, int *idmap) {
  if (e->kind == ND_INPUT || e->kind == ND_ALIAS)
    for (int k = 0; k < e->nidx; k++)
      add_id(ids, n, idmap, e->idx[k]);
  else if (e->kind == ND_MAP)
    for (int k = 0; k < e->nargs; k++)
      collect_ids(e->args[k], ids, n, idmap);
}

/* Append a query computing agg over red of expr (lifted ids, aliases in
 * the plan's numbering) with outputs out[0..nout); its indices are
 * renumbered to the ones it uses: outputs first, then reduced ones. */
static int emit(Work *W, const char *name, int user, int nout, const int *out,
                const Op *agg, IdxSet red, const Node *expr, double est,
                double cost) {
  Opt *O = W->O;
  const LogicalQuery *lq = W->lq;
  grow(O);
  int number = O->lp->nq;
  LogicalQuery *q = &O->lp->q[number];
  memset(q, 0, sizeof *q);
  int *idmap = arena_alloc(O->scratch, (size_t)lq->nindices * sizeof *idmap);
  int *ids = arena_alloc(O->scratch, (size_t)lq->nindices * sizeof *ids);
  int n = 0;
  for (int k = 0; k < lq->nindices; k++)
    idmap[k] = -1;
  for (int k = 0; k < nout; k++)
    add_id(ids, &n, idmap, out[k]);
  int nred = 0;
  for (int r = 0; r < lq->nindices; r++)
    if (red >> r & 1) {
      add_id(ids, &n, idmap, r);
      nred++;
    }
  collect_ids(expr, ids, &n, idmap);
  q->name = name ? name : arena_printf(O->a, "_l%d", number);
  q->user_query = user;
  q->nindices = n;
  q->indices = arena_alloc(O->a, (size_t)(n + 1) * sizeof *q->indices);
  for (int k = 0; k < n; k++)
    q->indices[k] = lq->indices[ids[k]];
  q->nout = nout;
  q->out = arena_alloc(O->a, (size_t)(nout + 1) * sizeof *q->out);
  for (int k = 0; k < nout; k++)
    q->out[k] = idmap[out[k]];
  q->agg = nred ? agg : NULL;
  q->nred = q->agg ? nred : 0;
  q->red = arena_alloc(O->a, (size_t)(nred + 1) * sizeof *q->red);
  double count = 1;
  for (int k = 0; k < q->nred; k++) {
    q->red[k] = nout + k;
    count *= (double)q->indices[nout + k].dim;
  }
  q->expr = copy_node(O, expr, idmap, 0);
  q->est_nnz = est;
  q->cost = cost;
  double v = node_fill(O, q->expr);
  q->out_fill = q->agg ? ops_fold_aggregate(q->agg, v, count) : v;
  O->lp->nq++;
  return number;
}

static IdxSet red_set(const LogicalQuery *lq) {
  IdxSet s = 0;
  for (int k = 0; k < lq->nred; k++)
    s |= (IdxSet)1 << lq->red[k];
  return s;
}

/* The expression of factor fa. */
static Node *factor_node(const Work *W, const Factor *fa) {
  if (fa->node)
    return (Node *)fa->node;
  int idx[STATS_MAX_INDICES], n = 0;
  for (int r = 0; r < STATS_MAX_INDICES; r++)
    if (fa->idx >> r & 1)
      idx[n++] = r;
  return plan_alias(W->O->a, (Loc){0, 0}, fa->query, n, idx);
}

static Node *rel_node(const Work *W, const State *s, uint64_t rel) {
  Node *args[MAX_FACTORS];
  int n = 0;
  for (int k = 0; k < s->n; k++)
    if (rel >> k & 1)
      args[n++] = factor_node(W, &s->f[k]);
  if (n == 1)
    return args[0];
  return plan_map(W->O->a, (Loc){0, 0}, W->f, n, args);
}

/* Emit the queries of an elimination order; the last realizes the lifted
 * query.  Returns its number. */
static int replay(Work *W, const State *s0, const int *ord, int nord) {
  const LogicalQuery *lq = W->lq;
  State *s = arena_alloc(W->O->scratch, sizeof *s);
  *s = *s0;
  int last = -1;
  for (int t = 0; t < nord; t++) {
    Step st;
    make_step(W, s, ord[t], &st);
    Node *e = rel_node(W, s, st.rel);
    double est = est_all(W, st.res);
    int out[STATS_MAX_INDICES], nout = 0;
    for (int r = 0; r < STATS_MAX_INDICES; r++)
      if (st.out >> r & 1)
        out[nout++] = r;
    const char *name = lq->user_query >= 0 ? lq->name : NULL;
    if (st.final)
      last = emit(W, name, lq->user_query, lq->nout, lq->out, W->op,
                  st.elim, e, est, st.cost);
    else
      last = emit(W, NULL, -1, nout, out, W->op, st.elim, e, est, st.cost);
    State *next = arena_alloc(W->O->scratch, sizeof *next);
    apply_step(s, ord[t], &st, last, next);
    s = next;
  }
  if (s->done)
    return last;
  uint64_t rel = s->n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << s->n) - 1;
  const TensorStats *comp = rel_stats(W, s, rel);
  return emit(W, lq->user_query >= 0 ? lq->name : NULL, lq->user_query,
              lq->nout, lq->out, W->op, W->extra, rel_node(W, s, rel),
              est_all(W, W->result), step_cost(W, comp, W->result));
}

/* ------------------------------------------------------------------ */
/* One lifted query                                                    */
/* ------------------------------------------------------------------ */

static void setup_work(Opt *O, const LogicalQuery *lq, Work *W) {
  memset(W, 0, sizeof *W);
  W->O = O;
  W->lq = lq;
  W->dims = arena_alloc(O->scratch, (size_t)(lq->nindices + 1) * sizeof *W->dims);
  for (int k = 0; k < lq->nindices; k++)
    W->dims[k] = lq->indices[k].dim < 0 ? 0 : lq->indices[k].dim;
  StatsContext sc = {O->o.estimator, O->scratch, W->dims, lq->nindices};
  W->sc = sc;
  W->op = lq->agg;
  for (int k = 0; k < lq->nout; k++)
    W->out |= (IdxSet)1 << lq->out[k];
}

/* Keep the lifted query (aliases renumbered), with its estimate. */
static int keep_query(Work *W, Node *expr, int stats_ok) {
  const LogicalQuery *lq = W->lq;
  double est = 0, cost = 0;
  if (stats_ok) {
    const TensorStats *comp = node_stats(W, expr);
    const TensorStats *res = comp;
    if (lq->agg)
      res = stats_aggregate(&W->sc, lq->agg, comp, red_set(lq));
    est = est_all(W, res);
    cost = step_cost(W, comp, res);
  } else {
    est = 1;
    for (int k = 0; k < lq->nout; k++)
      est *= (double)W->dims[lq->out[k]];
  }
  /* lifted "_lN" names are renumbered with the plan */
  const char *name = lq->user_query >= 0 ? lq->name : NULL;
  return emit(W, name, lq->user_query, lq->nout, lq->out, lq->agg,
              red_set(lq), expr, est, cost);
}

/* Whether the query is a sum of products we may reorder. */
static int eliminable(const Work *W, const Node *e) {
  const LogicalQuery *lq = W->lq;
  if (!lq->agg || lq->nred == 0 || e->kind != ND_MAP || e->nargs < 2 ||
      e->nargs > MAX_FACTORS)
    return 0;
  return is_reorderable(lq->agg) && is_reorderable(e->op) &&
         (e->op->props & OP_VARIADIC) && ops_distributes(e->op, lq->agg);
}

/* Whether every value of e (a lifted query's expression) is finite. */
static int expr_finite(const Opt *O, const Node *e) {
  switch (e->kind) {
  case ND_CONST:
    return isfinite(e->value);
  case ND_INPUT:
    return O->input_finite[e->tensor];
  case ND_ALIAS:
    return O->finite[e->tensor];
  case ND_MAP:
    if (!phys_op_keeps_finite(e->op))
      return 0;
    for (int k = 0; k < e->nargs; k++)
      if (!expr_finite(O, e->args[k]))
        return 0;
    return 1;
  default:
    return 0;
  }
}

/* Whether a bound input's stored values and declared fill are finite. */
static int input_is_finite(const Opt *O, int k) {
  const galley_tensor *t = O->inputs[k];
  if (!isfinite(O->p->inputs[k].fill))
    return 0;
  for (galley_pos q = 0; q < t->nval; q++)
    if (!isfinite(t->val[q]))
      return 0;
  return 1;
}

static void optimize_query(Opt *O, int qi) {
  const LogicalQuery *lq = &O->lift->q[qi];
  Work W;
  setup_work(O, lq, &W);
  int stats_ok = lq->nindices <= STATS_MAX_INDICES;
  Node *e = flatten(O, copy_node(O, lq->expr, NULL, 1));
  /* Variable elimination reorders sums of products (sum_i a*b = a *
   * sum_i b): exact on finite values, but with inf the two orders make nan
   * (inf - inf, 0 * inf) in different places, so a query over values that
   * may not be finite keeps its lifted form. */
  int finite = expr_finite(O, lq->expr);
  O->finite[qi] = (unsigned char)(finite && isfinite(lq->out_fill) &&
                                  (!lq->agg || lq->agg->is_builtin));
  if (!stats_ok || !finite || !eliminable(&W, e)) {
    O->map[qi] = keep_query(&W, e, stats_ok);
    O->lp->q[O->map[qi]].out_fill = lq->out_fill;
    return;
  }
  W.f = e->op;
  State *s0 = arena_alloc(O->scratch, sizeof *s0);
  s0->n = e->nargs;
  IdxSet seen = 0;
  for (int k = 0; k < e->nargs; k++) {
    Factor fa = {e->args[k], -1, node_indices(e->args[k]),
                 node_stats(&W, e->args[k])};
    s0->f[k] = fa;
    seen |= fa.idx;
  }
  s0->left = red_set(lq) & seen;
  W.extra = red_set(lq) & ~seen;
  W.result = stats_aggregate(&W.sc, W.op, node_stats(&W, e), red_set(lq));
  State *g = arena_alloc(O->scratch, sizeof *g);
  *g = *s0;
  double gcost = greedy(&W, g);
  const State *pick = g;
  if (O->o.search == SEARCH_EXACT &&
      popcount(s0->left) <= EXACT_MAX_INDICES) {
    State *x = arena_alloc(O->scratch, sizeof *x);
    if (exact(&W, s0, gcost, x) && x->cost < gcost)
      pick = x;
  }
  O->map[qi] = replay(&W, s0, pick->ord, pick->nord);
  /* the result's fill as the lift (and the evaluator) computes it, not
   * re-derived through the intermediates (equal up to rounding) */
  O->lp->q[O->map[qi]].out_fill = lq->out_fill;
}

/* ------------------------------------------------------------------ */
/* Entry                                                               */
/* ------------------------------------------------------------------ */

static void set_outputs(Opt *O) {
  const LogicalPlan *l = O->lift;
  LogicalPlan *lp = O->lp;
  lp->noutputs = l->noutputs;
  lp->outputs = arena_alloc(O->a, (size_t)(l->noutputs + 1) * sizeof(int));
  lp->output_names =
      arena_alloc(O->a, (size_t)(l->noutputs + 1) * sizeof(const char *));
  for (int k = 0; k < l->noutputs; k++) {
    lp->outputs[k] = O->map[l->outputs[k]];
    lp->output_names[k] = l->output_names[k];
  }
}

static void optimize_all(Opt *O) {
  O->map = arena_alloc(O->scratch, (size_t)(O->lift->nq + 1) * sizeof(int));
  O->finite = arena_alloc(O->scratch, (size_t)O->lift->nq + 1);
  O->input_finite = arena_alloc(O->scratch, (size_t)O->p->ninputs + 1);
  for (int k = 0; k < O->p->ninputs; k++)
    O->input_finite[k] = (unsigned char)input_is_finite(O, k);
  for (int qi = 0; qi < O->lift->nq; qi++)
    optimize_query(O, qi);
  set_outputs(O);
}

/* Release everything of a failed optimization; GALLEY_ENOMEM. */
static galley_status out_of_memory(Arena *a, Arena *scratch, LogicalPlan *lift,
                                   galley_error *err) {
  arena_free(a);
  arena_free(scratch);
  logical_plan_free(lift);
  if (err) {
    memset(err, 0, sizeof *err);
    err->status = GALLEY_ENOMEM;
    strcpy(err->msg, "out of memory");
  }
  return GALLEY_ENOMEM;
}

galley_status logical_optimize(const Program *p,
                               const galley_tensor *const *inputs,
                               const OptOptions *opt, LogicalPlan **out,
                               galley_error *err) {
  *out = NULL;
  LogicalPlan *lift = NULL;
  galley_status st = logical_lift(p, inputs, &lift, err);
  if (st != GALLEY_OK)
    return st;
  Arena *a = arena_new(), *scratch = arena_new();
  LogicalPlan *lp = a ? arena_alloc(a, sizeof *lp) : NULL;
  if (!lp || !scratch) {
    return out_of_memory(a, scratch, lift, err);
  }
  lp->arena = a;
  lp->prog = p;
  Opt O = {p, inputs, opt ? *opt : opt_defaults(), lift, lp, a, scratch,
           0, NULL, NULL, NULL};
  jmp_buf jb;
  a->oom = &jb;
  scratch->oom = &jb;
  if (setjmp(jb)) {
    return out_of_memory(a, scratch, lift, err);
  }
  optimize_all(&O);
  a->oom = NULL;
  arena_free(scratch);
  logical_plan_free(lift);
  *out = lp;
  return GALLEY_OK;
}
