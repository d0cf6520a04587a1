/*
 * optimize.c -- the logical optimizer (Galley paper Sec. 4; galley-notes
 * section 2): variable elimination over sums of products.
 *
 * logical_lift (lift.c) first checks the bound data (the evaluator's
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
 * Before that, on finite data, two rewrites may reshape a query
 * (optimize_query):
 *  - distribute (Sec. 4.1): a sum over a polynomial -- or a pointwise
 *    product with a summed factor, x * sum(k: y) -- becomes a sum of
 *    terms, each a sum-of-products query planned as above, added by a
 *    final pointwise query; a greedy search takes one step at a time
 *    (expand a sum factor, or inline a summed alias with fresh indices)
 *    while the cost drops, then tries the fully distributed form;
 *  - split_same_op (Sec. 4.4): op(red: op(x, y)) becomes
 *    op(op(red_x: x)^r, ...) with the repeat operator, when cheaper.
 * Queries no output reads any more (inlined aliases) are then dropped
 * (prune_unread).
 *
 * Within one lifted query every reduced index is aggregated by the same
 * commutative, associative op, so every order is allowed: the ordering
 * constraints of nested, non-commuting aggregates are the lift's query
 * boundaries.  Queries of any other shape are kept as lifted (always
 * correct).  The rewrites are exact in real arithmetic for every fill: the
 * logical plan has dense semantics, and each intermediate's fill is the
 * fold of its expression's fill over the reduced sizes (ops_fold_repeat).
 */
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "logical.h"
#include "rt_internal.h"

/* The cost constants, calibrated on this machine by
 * benchmarks/calibrate.py (a least-squares fit of 54 kernel times on nine
 * real matrices; benchmarks/RESULTS.md, "Cost constants"): a computed
 * entry 1 (0.4 ns), a dense result entry 7, a sparse one 76 (the
 * reference constants, galley-notes 2.4, are 1, 0.5 and 60); no dense
 * intermediate over 8 GiB. */
OptOptions opt_defaults(void) {
  OptOptions o = {.estimator = EST_CHAIN, .search = SEARCH_GREEDY,
                  .cost_compute = 1.0, .cost_dense_write = 7.0,
                  .cost_sparse_write = 76.0,
                  .memory_budget = 8.0 * 1024 * 1024 * 1024,
                  .assume_finite = 0, .stats_cache = NULL};
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
  Range *range;            /* per lifted query: its values (issue 12) */
  Range *input_range;      /* per input: its values, fill included */
  StatsCache *stats_cache; /* the inputs' nnz and degree statistics */
  int *uses;               /* per lifted query: its readers + outputs */
  struct TermCache *tc;    /* distribute's cost cache, or NULL */
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

/* A step already estimated: the statistics of its factors (in state
 * order), what it aggregates, whether it is final, and what make_step
 * found.  The same factors give the same statistics, so every state that
 * takes the step again (the other candidates of each greedy round, the
 * exact search's many paths) reads it here instead of estimating it. */
typedef struct StepMemo {
  uint64_t hash;  /* 0: free */
  IdxSet elim;
  int final;
  int n;
  const TensorStats **args;
  const TensorStats *res;
  double cost;
} StepMemo;

#define STEP_MEMO_SIZE 128 /* a power of two; more steps are not kept */

/* The lifted query being optimized. */
typedef struct Work {
  StepMemo *memo; /* STEP_MEMO_SIZE entries, made at the first step */
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
    return bind_input_fill(O->p, O->inputs, n->tensor);
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

static int op_is(const Node *n, const char *name) {
  return n->kind == ND_MAP && n->op->is_builtin &&
         strcmp(n->op->name, name) == 0;
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
                             bind_input_fill(O->p, O->inputs, n->tensor));
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

static uint64_t step_hash(const State *s, const Step *st) {
  uint64_t h = (st->elim ^ (uint64_t)st->final) * 0x9E3779B97F4A7C15ull;
  for (int k = 0; k < s->n; k++)
    if (st->rel >> k & 1)
      h = (h ^ (uint64_t)(uintptr_t)s->f[k].st) * 0xC2B2AE3D27D4EB4Full;
  return h | 1;
}

static int step_same(const State *s, const Step *st, const StepMemo *m) {
  if (m->elim != st->elim || m->final != st->final)
    return 0;
  int n = 0;
  for (int k = 0; k < s->n; k++)
    if (st->rel >> k & 1) {
      if (n == m->n || m->args[n] != s->f[k].st)
        return 0;
      n++;
    }
  return n == m->n;
}

/* The memo entry of step st from state s: the step's figures when kept
 * (n > 0), else the free entry to keep them in; NULL when the probe
 * finds neither (then nothing is kept). */
static StepMemo *step_memo(Work *W, const State *s, const Step *st) {
  if (!W->memo) /* zeroed: every entry free */
    W->memo = arena_alloc(W->O->scratch, STEP_MEMO_SIZE * sizeof *W->memo);
  uint64_t h = step_hash(s, st);
  size_t mask = STEP_MEMO_SIZE - 1, at = (size_t)(h >> 32) & mask;
  for (int probe = 0; probe < 16; probe++, at = (at + 1) & mask) {
    StepMemo *m = &W->memo[at];
    if (m->hash == 0) {
      m->n = 0;
      return m;
    }
    if (m->hash == h && step_same(s, st, m))
      return m;
  }
  return NULL;
}

static void step_memo_keep(Work *W, const State *s, const Step *st,
                           StepMemo *m) {
  int n = 0;
  for (int k = 0; k < s->n; k++)
    n += (int)(st->rel >> k & 1);
  m->args = arena_alloc(W->O->scratch, ((size_t)n + 1) * sizeof *m->args);
  n = 0;
  for (int k = 0; k < s->n; k++)
    if (st->rel >> k & 1)
      m->args[n++] = s->f[k].st;
  m->hash = step_hash(s, st);
  m->elim = st->elim;
  m->final = st->final;
  m->n = n;
  m->res = st->res;
  m->cost = st->cost;
}

/* The minimal sub-expression that eliminates index j from state s: the
 * factors holding j, every factor their indices cover, and every other
 * pending index that occurs only inside them. */
static void make_step(Work *W, const State *s, int j, Step *st) {
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
  for (IdxSet pending = s->left & kernel; pending; pending &= pending - 1) {
    int r = __builtin_ctzll(pending);
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
  StepMemo *m = step_memo(W, s, st);
  if (m && m->n) {
    st->res = m->res;
    st->cost = m->cost;
    return;
  }
  const TensorStats *comp = rel_stats(W, s, rel);
  /* every order writes the same result: estimate it once (estimates of
   * one tensor along different paths differ, and the write of the result
   * would otherwise decide the order) */
  st->res = st->final ? W->result
                      : stats_aggregate(&W->sc, W->op, comp, st->elim);
  st->cost = step_cost(W, comp, st->res);
  if (m)
    step_memo_keep(W, s, st, m);
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
static double greedy(Work *W, State *s) {
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
static int exact(Work *W, const State *s0, double bound, State *best) {
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
  StatsContext sc = {O->o.estimator, O->scratch, W->dims, lq->nindices,
                     O->stats_cache,
                     stats_log_dims(O->scratch, W->dims, lq->nindices)};
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

/* A leaf's range: an input's facts, an earlier lifted query's range. */
static Range lifted_leaf(void *ctx, const Node *n) {
  const Opt *O = ctx;
  if (n->kind == ND_INPUT)
    return O->input_range[n->tensor];
  if (n->kind == ND_ALIAS)
    return O->range[n->tensor];
  return range_top();
}

/* Whether every value of e (a lifted query's expression) is finite, by
 * value ranges (issue 12): min(A, 100) is finite when A holds +inf. */
static int expr_finite(const Opt *O, const Node *e) {
  return range_finite(ops_range_expr(e, lifted_leaf, (void *)O));
}

/* The range of lifted query lq's values, its fill included. */
static Range lifted_range(const Opt *O, const LogicalQuery *lq) {
  Range r = ops_range_expr(lq->expr, lifted_leaf, (void *)O);
  if (lq->agg) {
    double count = 1;
    for (int k = 0; k < lq->nred; k++)
      count *= (double)lq->indices[lq->red[k]].dim;
    r = ops_range_aggregate(lq->agg, r, count);
  }
  return range_join(r, range_point(lq->out_fill));
}

/* A bound input's values (coarsened facts) with the fill it is read
 * with. */
static Range input_range(const Opt *O, int k) {
  galley_facts f;
  rt_tensor_facts(O->inputs[k], &f); /* kept: no scan after binding */
  return range_of_facts(&f, bind_input_fill(O->p, O->inputs, k), 1);
}

/* Variable elimination for query lq (lifted ids, aliases in the plan's
 * numbering) with expression e (flattened): returns the cost of its best
 * plan, and when `emit_it` also appends that plan's queries, the last of
 * which realizes lq, into *number.  Queries that are not sums of products
 * (or whose values may not be finite, or with too many indices) keep
 * their lifted form. */
static double plan_ve(Opt *O, const LogicalQuery *lq, Node *e, int reorder,
                      int emit_it, int *number) {
  Work W;
  setup_work(O, lq, &W);
  int stats_ok = lq->nindices <= STATS_MAX_INDICES;
  if (!stats_ok || !reorder || !eliminable(&W, e)) {
    double cost = 0;
    if (stats_ok) {
      const TensorStats *comp = node_stats(&W, e);
      const TensorStats *res =
          lq->agg ? stats_aggregate(&W.sc, lq->agg, comp, red_set(lq)) : comp;
      cost = step_cost(&W, comp, res);
    }
    if (emit_it)
      *number = keep_query(&W, e, stats_ok);
    return cost;
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
  if (emit_it)
    *number = replay(&W, s0, pick->ord, pick->nord);
  return pick == g ? gcost : pick->cost;
}

/* ------------------------------------------------------------------ */
/* Pointwise distributivity (paper Sec. 4.1)                           */
/* ------------------------------------------------------------------ */

/* A sum over reduced indices of a polynomial, kept as a list of terms,
 * each a coefficient times a product of factors; a factor that is itself
 * a sum or a difference may be expanded.  Distributing * over + and -
 * and splitting the sum over the terms (sum_i (x + y) = sum_i x + sum_i
 * y; a term without i is repeated: sum_i y = N_i * y) is exact in real
 * arithmetic, so it is applied to finite data only (like variable
 * elimination).  Rounding differs: the distributed form of an almost-zero
 * square (x - y)^2 cancels. */
#define MAX_TERMS 16
#define MAX_TERM_FACTORS 24

typedef struct Term {
  double coef;
  int n;
  IdxSet fresh; /* reduced indices of inlined aggregates (see inline_one) */
  const Node *f[MAX_TERM_FACTORS];
} Term;

typedef struct Terms {
  int n;
  Term t[MAX_TERMS];
} Terms;

/* Multiply term t by x, flattening products, squares (x^2 = x*x),
 * negations and constants; 0 when t has no room. */
static int term_mul(Term *t, const Node *x) {
  if (x->kind == ND_CONST) {
    t->coef *= x->value;
    return 1;
  }
  if (op_is(x, "*")) {
    for (int k = 0; k < x->nargs; k++)
      if (!term_mul(t, x->args[k]))
        return 0;
    return 1;
  }
  if (op_is(x, "^") && x->args[1]->kind == ND_CONST &&
      x->args[1]->value == 2)
    return term_mul(t, x->args[0]) && term_mul(t, x->args[0]);
  if (op_is(x, "neg")) {
    t->coef = -t->coef;
    return term_mul(t, x->args[0]);
  }
  if (t->n == MAX_TERM_FACTORS)
    return 0;
  t->f[t->n++] = x;
  return 1;
}

static int expandable(const Node *x) {
  return op_is(x, "+") || op_is(x, "-");
}

/* A total order on expressions by structure (equal: the same value at
 * every point). */
static int node_cmp(const Node *a, const Node *b) {
  if (a == b)
    return 0;
  if (a->kind != b->kind)
    return a->kind < b->kind ? -1 : 1;
  switch (a->kind) {
  case ND_CONST:
    return a->value < b->value ? -1 : a->value > b->value ? 1 : 0;
  case ND_INPUT:
  case ND_ALIAS:
    if (a->tensor != b->tensor)
      return a->tensor < b->tensor ? -1 : 1;
    if (a->nidx != b->nidx)
      return a->nidx < b->nidx ? -1 : 1;
    for (int k = 0; k < a->nidx; k++)
      if (a->idx[k] != b->idx[k])
        return a->idx[k] < b->idx[k] ? -1 : 1;
    return 0;
  case ND_MAP:
    if (a->op != b->op)
      return strcmp(a->op->name, b->op->name) < 0 ? -1 : 1;
    if (a->nargs != b->nargs)
      return a->nargs < b->nargs ? -1 : 1;
    for (int k = 0; k < a->nargs; k++) {
      int c = node_cmp(a->args[k], b->args[k]);
      if (c)
        return c;
    }
    return 0;
  default:
    return a < b ? -1 : 1;
  }
}

/* Sort each term's factors and add up the terms with equal factors
 * (x*y - y*x vanishes; -x*u - u*x is -2*x*u). */
static void merge_terms(Terms *T) {
  for (int u = 0; u < T->n; u++) {
    Term *t = &T->t[u];
    for (int i = 1; i < t->n; i++)
      for (int j = i; j > 0 && node_cmp(t->f[j - 1], t->f[j]) > 0; j--) {
        const Node *x = t->f[j];
        t->f[j] = t->f[j - 1];
        t->f[j - 1] = x;
      }
  }
  int n = 0;
  for (int u = 0; u < T->n; u++) {
    int same = -1;
    for (int v = 0; v < n && same < 0; v++) {
      if (T->t[v].n != T->t[u].n || T->t[v].fresh != T->t[u].fresh)
        continue;
      int eq = 1;
      for (int k = 0; k < T->t[u].n && eq; k++)
        eq = node_cmp(T->t[v].f[k], T->t[u].f[k]) == 0;
      if (eq)
        same = v;
    }
    if (same >= 0)
      T->t[same].coef += T->t[u].coef;
    else
      T->t[n++] = T->t[u];
  }
  T->n = n;
}

/* *out = T with factor k of term ti expanded over its summands; 0 when
 * the result does not fit. */
static int expand_one(const Terms *T, int ti, int k, Terms *out) {
  const Node *x = T->t[ti].f[k];
  if (T->n - 1 + x->nargs > MAX_TERMS)
    return 0;
  out->n = 0;
  for (int u = 0; u < T->n; u++) {
    if (u != ti) {
      out->t[out->n++] = T->t[u];
      continue;
    }
    for (int a = 0; a < x->nargs; a++) {
      Term *nt = &out->t[out->n++];
      nt->coef = T->t[ti].coef * (op_is(x, "-") && a == 1 ? -1 : 1);
      nt->fresh = T->t[ti].fresh;
      nt->n = 0;
      for (int m = 0; m < T->t[ti].n; m++)
        if (m != k)
          nt->f[nt->n++] = T->t[ti].f[m];
      if (!term_mul(nt, x->args[a]))
        return 0;
    }
  }
  merge_terms(out);
  return 1;
}

/* ---- Inlining a summed alias (lifting its aggregate, Sec. 4.1) ----
 * x * sum(k: y) = sum(k: x * y) when * distributes over +: a factor that
 * reads the result of a sum-of-products query is replaced by that query's
 * expression, its reduced indices renamed to fresh ones that the term sums
 * over.  The ALS loss sum(i, j: (X - sum(k: U V))^2) then never builds the
 * dense U V^T: its terms are X X, X U V (linear in the entries of X) and
 * (U^T U)(V^T V). */

/* The lifted query the plan's query a realizes, or -1. */
static int lifted_of(const Opt *O, int a) {
  for (int l = 0; l < O->lift->nq; l++)
    if (O->map[l] == a)
      return l;
  return -1;
}

/* Whether factor x reads a finite sum-of-products result that can be
 * inlined into lq (room for its reduced indices). */
static int inlinable(const Opt *O, const LogicalQuery *xq, const Node *x) {
  if (x->kind != ND_ALIAS)
    return 0;
  const LogicalQuery *in = &O->lp->q[x->tensor];
  int l = lifted_of(O, x->tensor);
  if (l < 0 || !O->finite[l] || !in->agg || in->agg != xq->agg ||
      in->nred == 0 || in->nout != x->nidx ||
      xq->nindices + in->nred > STATS_MAX_INDICES)
    return 0;
  for (int k = 0; k < in->nout; k++)
    for (int m = 0; m < k; m++)
      if (in->out[k] == in->out[m])
        return 0; /* a diagonal: not a plain renaming */
  return in->nout + in->nred == in->nindices;
}

/* *out = T with factor k of term ti (inlinable) replaced by its query's
 * expression over fresh reduced indices added to xq; 0 when it does not
 * fit. */
static int inline_one(Opt *O, LogicalQuery *xq, const Terms *T, int ti, int k,
                      Terms *out) {
  const Node *x = T->t[ti].f[k];
  const LogicalQuery *in = &O->lp->q[x->tensor];
  int *idmap = arena_alloc(O->scratch, (size_t)(in->nindices + 1) * sizeof *idmap);
  for (int m = 0; m < in->nout; m++)
    idmap[in->out[m]] = x->idx[m];
  *out = *T;
  Term *t = &out->t[ti];
  for (int r = 0; r < in->nred; r++) {
    int id = xq->nindices++;
    xq->indices[id] = in->indices[in->red[r]];
    xq->indices[id].name =
        arena_printf(O->a, "%s'%d", in->indices[in->red[r]].name, id);
    idmap[in->red[r]] = id;
    t->fresh |= (IdxSet)1 << id;
  }
  for (int m = k; m + 1 < t->n; m++)
    t->f[m] = t->f[m + 1];
  t->n--;
  if (!term_mul(t, flatten(O, copy_node(O, in->expr, idmap, 0))))
    return 0;
  merge_terms(out);
  return 1;
}

/* Whether alias a is read by a factor of T. */
static int terms_read(const Terms *T, int a) {
  for (int u = 0; u < T->n; u++)
    for (int m = 0; m < T->t[u].n; m++)
      if (T->t[u].f[m]->kind == ND_ALIAS && T->t[u].f[m]->tensor == a)
        return 1;
  return 0;
}

static int count_reads(const Node *n, int l) {
  if (n->kind == ND_ALIAS)
    return n->tensor == l;
  int c = 0;
  if (n->kind == ND_MAP)
    for (int k = 0; k < n->nargs; k++)
      c += count_reads(n->args[k], l);
  return c;
}

/* The cost of the queries T no longer needs: summed results that only lq
 * read, all of whose reads were inlined (they are then dropped from the
 * plan, prune_unread). */
static double inline_credit(const Opt *O, const LogicalQuery *lq,
                            const Terms *T) {
  double credit = 0;
  for (int l = 0; l < O->lift->nq; l++) {
    int reads = count_reads(lq->expr, l);
    if (reads && reads == O->uses[l] && O->map[l] >= 0 &&
        !terms_read(T, O->map[l]))
      credit += O->lp->q[O->map[l]].cost;
  }
  return credit;
}

/* Expand every factor of every term (the fully distributed form). */
static int expand_all(Opt *O, LogicalQuery *xq, Terms *T) {
  for (int steps = 0; steps < 4 * MAX_TERMS; steps++) {
    /* sums first, so that like terms merge before inlining gives
     * their copies of an aggregate different fresh indices */
    int ti = -1, k = -1, inl = 0;
    for (int pass = 0; pass < 2 && ti < 0; pass++)
      for (int u = 0; u < T->n && ti < 0; u++)
        for (int m = 0; m < T->t[u].n && ti < 0; m++)
          if (pass == 0 ? expandable(T->t[u].f[m])
                        : inlinable(O, xq, T->t[u].f[m])) {
            ti = u;
            k = m;
            inl = pass;
          }
    if (ti < 0)
      return 1;
    Terms *next = arena_alloc(O->scratch, sizeof *next);
    if (!(inl ? inline_one(O, xq, T, ti, k, next)
              : expand_one(T, ti, k, next)))
      return 0;
    *T = *next;
  }
  return 0;
}

/* The query that sums term t over the reduced indices it holds. */
static void term_query(const Opt *O, const LogicalQuery *lq, const Term *t,
                       LogicalQuery *tq, Node **expr) {
  IdxSet idx = 0;
  Node **args = arena_alloc(O->a, (size_t)(t->n + 1) * sizeof *args);
  for (int k = 0; k < t->n; k++) {
    idx |= node_indices(t->f[k]);
    args[k] = (Node *)t->f[k];
  }
  *tq = *lq;
  tq->name = NULL;
  tq->user_query = -1;
  tq->out = arena_alloc(O->scratch, (size_t)(lq->nout + 1) * sizeof(int));
  tq->nout = 0;
  IdxSet seen = 0;
  for (int k = 0; k < lq->nout; k++) {
    IdxSet b = (IdxSet)1 << lq->out[k];
    if ((idx & b) && !(seen & b))
      tq->out[tq->nout++] = lq->out[k];
    seen |= b;
  }
  tq->red = arena_alloc(O->scratch, (size_t)(STATS_MAX_INDICES + 1) * sizeof(int));
  tq->nred = 0;
  IdxSet red = (red_set(lq) | t->fresh) & idx;
  for (int r = 0; r < STATS_MAX_INDICES; r++)
    if (red >> r & 1)
      tq->red[tq->nred++] = r;
  tq->agg = tq->nred ? lq->agg : NULL;
  *expr = t->n == 1 ? args[0]
                    : plan_map(O->a, (Loc){0, 0}, ops_find(&O->p->ops, "*"),
                               t->n, args);
}

/* The factor a term is scaled by: its coefficient times the size of every
 * reduced index it does not hold (the repeat of + ). */
static double term_scale(const LogicalQuery *lq, const Term *t) {
  IdxSet idx = 0;
  for (int k = 0; k < t->n; k++)
    idx |= node_indices(t->f[k]);
  double scale = t->coef;
  IdxSet missing = (red_set(lq) | t->fresh) & ~idx;
  for (int r = 0; r < STATS_MAX_INDICES; r++)
    if (missing >> r & 1)
      scale *= (double)(lq->indices[r].dim < 0 ? 0 : lq->indices[r].dim);
  return scale;
}

/* Whether T's one term can be lq's query itself: scale 1, every output
 * and reduced index held (an output it lacks needs the final query to
 * broadcast it). */
static int terms_are_query(const LogicalQuery *lq, const Terms *T) {
  if (T->n != 1 || term_scale(lq, &T->t[0]) != 1)
    return 0;
  IdxSet idx = 0;
  for (int k = 0; k < T->t[0].n; k++)
    idx |= node_indices(T->t[0].f[k]);
  for (int k = 0; k < lq->nout; k++)
    if (!(idx >> lq->out[k] & 1))
      return 0;
  return (red_set(lq) & ~idx) == 0;
}

/* The cost of a final pointwise query combining parts of `in` estimated
 * entries in all: each read once, the result (*est: at most their union,
 * at most the output space) written dense or sparse. */
static double combine_cost(const Opt *O, const Work *W, double in,
                           double *est) {
  double space = 1;
  for (int k = 0; k < W->lq->nout; k++)
    space *= (double)W->dims[W->lq->out[k]];
  *est = in < space ? in : space;
  int dense = space > 0 && *est / space > 0.5;
  return in * O->o.cost_compute +
         *est * (dense ? O->o.cost_dense_write : O->o.cost_sparse_write);
}

/* ---- The cost cache of the distributivity search ----
 * Candidates share most of their terms, so each term query's cost (and
 * its result's estimated size) is kept under a hash of its canonical form:
 * its factors' structures (in sorted order), its reduced and output
 * indices.  A collision could only mislead the search, never change a
 * result: every candidate computes the same values. */

#define TERM_CACHE_SIZE 1024 /* a power of two */

typedef struct TermCache {
  uint64_t key[TERM_CACHE_SIZE]; /* 0: empty */
  double cost[TERM_CACHE_SIZE];
  double size[TERM_CACHE_SIZE];
} TermCache;

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xBF58476D1CE4E5B9ull;
}

static uint64_t node_hash(const Node *n) {
  uint64_t h = mix(0x51ED27, (uint64_t)n->kind);
  switch (n->kind) {
  case ND_CONST: {
    uint64_t bits;
    memcpy(&bits, &n->value, sizeof bits);
    return mix(h, bits);
  }
  case ND_INPUT:
  case ND_ALIAS:
    h = mix(mix(h, (uint64_t)n->tensor), (uint64_t)n->nidx);
    for (int k = 0; k < n->nidx; k++)
      h = mix(h, (uint64_t)n->idx[k]);
    return h;
  case ND_MAP:
    h = mix(h, (uint64_t)(uintptr_t)n->op);
    for (int k = 0; k < n->nargs; k++)
      h = mix(h, node_hash(n->args[k]));
    return h;
  default:
    return h;
  }
}

/* The canonical hash of term t summed over red into the indices out. */
static uint64_t term_hash(const Term *t, IdxSet red, IdxSet out) {
  uint64_t f[MAX_TERM_FACTORS];
  for (int k = 0; k < t->n; k++) {
    f[k] = node_hash(t->f[k]);
    for (int j = k; j > 0 && f[j - 1] > f[j]; j--) {
      uint64_t x = f[j];
      f[j] = f[j - 1];
      f[j - 1] = x;
    }
  }
  uint64_t h = mix(mix(0xC0FFEE, red), out);
  for (int k = 0; k < t->n; k++)
    h = mix(h, f[k]);
  return h ? h : 1;
}

static IdxSet id_set(const int *ids, int n) {
  IdxSet s = 0;
  for (int k = 0; k < n; k++)
    s |= (IdxSet)1 << ids[k];
  return s;
}

/* The cached slot of key (found or empty), or -1 when the probe is full. */
static int tc_slot(const TermCache *tc, uint64_t key) {
  size_t h = (size_t)(key >> 20) & (TERM_CACHE_SIZE - 1);
  for (int probe = 0; probe < 16; probe++, h = (h + 1) & (TERM_CACHE_SIZE - 1))
    if (tc->key[h] == key || tc->key[h] == 0)
      return (int)h;
  return -1;
}

/* The cost of T's plan; with emit_it, its queries are appended and the
 * last (realizing lq) returned in *number. */
/* A part's estimated entries, size over the indices `held`, broadcast
 * over the output indices it does not hold (x[i] in x[i] + y[j] fills a
 * whole row of O[i, j] per entry): a sum of parts with disjoint indices
 * is as large as their outer product, not the sum of their sizes. */
static double broadcast_size(const Work *W, const LogicalQuery *lq,
                             double size, IdxSet held) {
  IdxSet missing = id_set(lq->out, lq->nout) & ~held;
  return missing ? size * stats_dense(W->dims, missing) : size;
}

static double plan_terms(Opt *O, const LogicalQuery *lq, const Terms *T,
                         int emit_it, int *number) {
  if (terms_are_query(lq, T)) {
    LogicalQuery tq;
    Node *e;
    term_query(O, lq, &T->t[0], &tq, &e);
    tq.name = lq->name;
    tq.user_query = lq->user_query;
    tq.out = lq->out; /* all held; repeated ones too (C[i, i]) */
    tq.nout = lq->nout;
    return plan_ve(O, &tq, flatten(O, e), 1, emit_it, number);
  }
  Work W;
  setup_work(O, lq, &W);
  const Op *add = ops_find(&O->p->ops, "+"), *mul = ops_find(&O->p->ops, "*");
  Node **parts = arena_alloc(O->a, (size_t)(T->n + 1) * sizeof *parts);
  int stats_ok = lq->nindices <= STATS_MAX_INDICES;
  int np = 0;
  double cost = 0, in = 0; /* in: the estimated entries of the parts */
  for (int u = 0; u < T->n; u++) {
    double scale = term_scale(lq, &T->t[u]);
    if (scale == 0)
      continue;
    LogicalQuery tq;
    Node *e, *part;
    term_query(O, lq, &T->t[u], &tq, &e);
    if (T->t[u].n == 0) {
      part = plan_const(O->a, (Loc){0, 0}, 1);
    } else if (tq.nred == 0) {
      part = e; /* pointwise: computed inside the final query */
      if (stats_ok) {
        const TensorStats *ps = node_stats(&W, e);
        in += broadcast_size(&W, lq, est_all(&W, ps), stats_indices(ps));
      }
    } else {
      int q = -1, slot = -1;
      uint64_t key = 0;
      if (!emit_it && O->tc) {
        key = term_hash(&T->t[u], red_set(&tq), id_set(tq.out, tq.nout));
        slot = tc_slot(O->tc, key);
      }
      if (slot >= 0 && O->tc->key[slot] == key) {
        cost += O->tc->cost[slot];
        in += broadcast_size(&W, lq, O->tc->size[slot], id_set(tq.out, tq.nout));
      } else {
        double c = plan_ve(O, &tq, flatten(O, e), 1, emit_it, &q);
        double size = stats_ok ? est_all(&W, stats_aggregate(&W.sc, lq->agg,
                                                             node_stats(&W, e),
                                                             red_set(&tq)))
                               : 0;
        cost += c;
        in += broadcast_size(&W, lq, size, id_set(tq.out, tq.nout));
        if (slot >= 0) {
          O->tc->key[slot] = key;
          O->tc->cost[slot] = c;
          O->tc->size[slot] = size;
        }
      }
      part = plan_alias(O->a, (Loc){0, 0}, emit_it ? q : 0, tq.nout, tq.out);
    }
    if (scale != 1) {
      Node *args[2] = {plan_const(O->a, (Loc){0, 0}, scale), part};
      part = plan_map(O->a, (Loc){0, 0}, mul, 2, args);
    }
    parts[np++] = part;
  }
  Node *top = np == 0   ? plan_const(O->a, (Loc){0, 0}, 0)
              : np == 1 ? parts[0]
                        : plan_map(O->a, (Loc){0, 0}, add, np, parts);
  /* the final query: a pointwise sum of the parts */
  double est, top_cost = combine_cost(O, &W, in, &est);
  cost += top_cost;
  if (emit_it)
    *number = emit(&W, lq->user_query >= 0 ? lq->name : NULL, lq->user_query,
                   lq->nout, lq->out, NULL, 0, top, est, top_cost);
  return cost;
}

/* e as one term of coefficient 1 (its factors flattened), in the
 * scratch arena; NULL when it has too many factors. */
static Terms *single_term(Opt *O, const Node *e) {
  Terms *cur = arena_alloc(O->scratch, sizeof *cur);
  cur->n = 1;
  cur->t[0].coef = 1;
  cur->t[0].n = 0;
  cur->t[0].fresh = 0;
  return term_mul(&cur->t[0], e) ? cur : NULL;
}

/* Choose how far to distribute lq's expression e (finite data, a sum):
 * greedily one step at a time -- expand a sum factor, or inline a summed
 * alias -- while the cost drops, then the fully distributed form; emits
 * the cheapest.  0 when e is best as written (the caller plans it). */
static int distribute(Opt *O, const LogicalQuery *lq, Node *e, int *number) {
  const Op *agg = lq->agg;
  if ((agg && (lq->nred == 0 || !agg->is_builtin || strcmp(agg->name, "+"))) ||
      lq->nindices > STATS_MAX_INDICES)
    return 0;
  /* lq with room for the fresh indices of inlined aggregates; a
   * pointwise query (x * sum(k: y), the SDDMM) sums what it inlines */
  LogicalQuery *xq = arena_alloc(O->scratch, sizeof *xq);
  *xq = *lq;
  if (!agg)
    xq->agg = ops_find(&O->p->ops, "+");
  xq->indices = arena_alloc(O->a, (STATS_MAX_INDICES + 1) * sizeof(Index));
  memcpy(xq->indices, lq->indices, (size_t)lq->nindices * sizeof(Index));
  Terms *cur = single_term(O, e);
  if (!cur)
    return 0;
  int any = 0;
  for (int m = 0; m < cur->t[0].n; m++)
    any |= expandable(cur->t[0].f[m]) || inlinable(O, xq, cur->t[0].f[m]);
  if (!any)
    return 0;
  const Terms *start = cur;
  O->tc = arena_alloc(O->scratch, sizeof *O->tc);
  memset(O->tc, 0, sizeof *O->tc);
  double best = plan_terms(O, xq, cur, 0, NULL);
  for (;;) {
    Terms *pick = NULL;
    double pc = best;
    for (int u = 0; u < cur->n; u++)
      for (int m = 0; m < cur->t[u].n; m++) {
        const Node *f = cur->t[u].f[m];
        int inl = !expandable(f) && inlinable(O, xq, f);
        if (!expandable(f) && !inl)
          continue;
        Terms *c = arena_alloc(O->scratch, sizeof *c);
        if (!(inl ? inline_one(O, xq, cur, u, m, c) : expand_one(cur, u, m, c)))
          continue;
        double cc = plan_terms(O, xq, c, 0, NULL) - inline_credit(O, lq, c);
        if (cc < pc * (1 - 1e-9)) {
          pc = cc;
          pick = c;
        }
      }
    if (!pick)
      break;
    cur = pick;
    best = pc;
  }
  Terms *full = arena_alloc(O->scratch, sizeof *full);
  *full = *cur;
  if (expand_all(O, xq, full)) {
    double fc = plan_terms(O, xq, full, 0, NULL) - inline_credit(O, lq, full);
    if (fc < best * (1 - 1e-9) && full->n > 0) {
      cur = full;
      best = fc;
    }
  }
  O->tc = NULL;
  if (cur == start)
    return 0; /* as written (x^2 stays one power, not x*x) */
  plan_terms(O, xq, cur, 1, number);
  return 1;
}

/* The commutative-identical split (paper Sec. 4.4): an aggregate over a
 * map by the same op, op(red: op(x, y)), is op(op(red_x: x)^r, ...) --
 * each argument aggregated over the reduced indices it holds, then
 * repeated over the others (ops_fold_repeat: + as x*n, * as x^n,
 * idempotent ops not at all).  Costs only, or with emit_it, emits it. */
static double split_plan(Opt *O, const LogicalQuery *lq, const Node *e,
                         int finite, int emit_it, int *number) {
  const Op *op = lq->agg;
  Work W;
  setup_work(O, lq, &W);
  Node **parts = arena_alloc(O->a, (size_t)(e->nargs + 1) * sizeof *parts);
  double cost = 0, in = 0;
  for (int k = 0; k < e->nargs; k++) {
    Term t = {1, 1, 0, {e->args[k]}};
    LogicalQuery tq;
    Node *x, *part;
    term_query(O, lq, &t, &tq, &x);
    if (tq.nred == 0) {
      part = x;
      in += est_all(&W, node_stats(&W, x));
    } else {
      int q = -1;
      cost += plan_ve(O, &tq, flatten(O, x), finite, emit_it, &q);
      part = plan_alias(O->a, (Loc){0, 0}, emit_it ? q : 0, tq.nout, tq.out);
      in += est_all(&W, stats_aggregate(&W.sc, op, node_stats(&W, x),
                                        red_set(&tq)));
    }
    double n = term_scale(lq, &t); /* the sizes of the indices x lacks */
    if (n != 1 && op->repeat != REPEAT_SELF) {
      int times = op->repeat == REPEAT_TIMES;
      Node *c = plan_const(O->a, (Loc){0, 0}, n);
      Node *args[2] = {times ? c : part, times ? part : c};
      part = plan_map(O->a, (Loc){0, 0},
                      ops_find(&O->p->ops, times ? "*" : "^"), 2, args);
    }
    parts[k] = part;
  }
  Node *top = plan_map(O->a, (Loc){0, 0}, op, e->nargs, parts);
  double est, top_cost = combine_cost(O, &W, in, &est);
  if (emit_it)
    *number = emit(&W, lq->user_query >= 0 ? lq->name : NULL, lq->user_query,
                   lq->nout, lq->out, NULL, 0, top, est, top_cost);
  return cost + top_cost;
}

/* Split lq (expression e) when it is an aggregate over a map by the same
 * op and splitting is cheaper; 0 when it is not done. */
static int split_same_op(Opt *O, const LogicalQuery *lq, Node *e, int finite,
                         int *number) {
  const Op *op = lq->agg;
  if (!op || lq->nred == 0 || e->kind != ND_MAP || e->op != op ||
      !is_reorderable(op) || e->nargs < 2 || op->repeat == REPEAT_UNKNOWN ||
      lq->nindices > STATS_MAX_INDICES)
    return 0;
  /* a non-idempotent op repeats through arithmetic: finite data only */
  if (!(op->props & OP_IDEMPOTENT) && !finite)
    return 0;
  for (int k = 0; k < lq->nred; k++)
    if (lq->indices[lq->red[k]].dim < 1)
      return 0; /* an empty aggregate is its initial value, not a repeat */
  double whole = plan_ve(O, lq, e, finite, 0, NULL);
  double split = split_plan(O, lq, e, finite, 0, NULL);
  if (!(split < whole * (1 - 1e-9)))
    return 0;
  split_plan(O, lq, e, finite, 1, number);
  return 1;
}

/* ------------------------------------------------------------------ */
/* The fill split                                                      */
/* ------------------------------------------------------------------ */

/* agg(red: f) where f is c wherever one sparse operand is absent
 * (exp(A[i,j] * B[j,k]) is 1 there) and c is not the aggregate's
 * identity: no loop may skip those points, so every output point is
 * visited (m^2 work for three stored entries).  Counting the points that
 * differ from c instead, with e the aggregate's identity and n the number
 * of reduced points,
 *   M = agg(red: ifelse(f != c, f, e))      fill e
 *   N = sum(red: f != c)                    fill 0
 *   sum(red: f)      = M + c * (n - N)
 *   max(red: f)      = ifelse(N < n, max(M, c), M)     (min alike)
 * (the n - N points not counted hold c).  Both bodies are their
 * aggregate's identity where the operand is absent, so the physical
 * planner iterates stored entries only (Gustavson orders included), and
 * the result, fill agg over n copies of c, is a merge of M and N.  No
 * cancellation: f's points are summed as they are (a shift, sum(f - c) +
 * n c, would lose exp(-50) against n), the points equal to c are counted
 * exactly; NaN and inf stay (f != c holds for NaN, so M is NaN then).
 * Only for a sparse operand (at most half its points stored): dense data
 * gains nothing. */

/* The value of e when the access `absent` reads its fill and every other
 * access is unknown; 0 when not constant.  *zero_sign_unknown marks an
 * annihilated zero whose sign depends on the unknown operands. */
static int fold_absent(const Opt *O, const Node *e, const Node *absent,
                       double *v, int *zero_sign_unknown) {
  *zero_sign_unknown = 0;
  switch (e->kind) {
  case ND_CONST:
    *v = e->value;
    return 1;
  case ND_INPUT:
  case ND_ALIAS:
    if (e != absent)
      return 0;
    *v = node_fill(O, e);
    return 1;
  case ND_MAP:
    break;
  default:
    return 0;
  }
  double *args = arena_alloc(O->scratch, (size_t)(e->nargs + 1) * sizeof *args);
  int known = 1, annihilated = 0, unsafe = 0, amb = -1;
  for (int k = 0; k < e->nargs; k++) {
    int z;
    if (!fold_absent(O, e->args[k], absent, &args[k], &z)) {
      known = 0;
      unsafe |= !expr_finite(O, e->args[k]); /* 0 * inf is nan */
      continue;
    }
    if (z) {
      if (amb >= 0)
        return 0; /* two zeros of unknown sign: give up (never wrong) */
      amb = k;
    }
    if ((e->op->props & OP_HAS_ANNIHILATOR) && args[k] == e->op->annihilator)
      annihilated = 1;
    else if (!isfinite(args[k]))
      unsafe = 1;
  }
  if (known) {
    *v = ops_apply(e->op, args, e->nargs);
    if (amb < 0)
      return 1;
    args[amb] = -args[amb];
    double w = ops_apply(e->op, args, e->nargs);
    if (memcmp(&w, v, sizeof w) == 0)
      return 1;
    *zero_sign_unknown = *v == 0 && w == 0;
    return *zero_sign_unknown;
  }
  if (!annihilated || unsafe)
    return 0;
  *v = e->op->annihilator;
  *zero_sign_unknown = *v == 0;
  return 1;
}

/* The fraction of an access's points that it stores (an estimate for
 * an intermediate). */
static double access_density(const Opt *O, const Node *x) {
  double space = 1, stored;
  if (x->kind == ND_INPUT) {
    const galley_tensor *t = O->inputs[x->tensor];
    for (int m = 0; m < galley_tensor_order(t); m++)
      space *= (double)galley_tensor_dim(t, m);
    stored = (double)galley_tensor_nnz(t); /* kept facts: no scan */
  } else {
    const LogicalQuery *q = &O->lp->q[x->tensor];
    for (int m = 0; m < q->nout; m++)
      space *= (double)q->indices[q->out[m]].dim;
    stored = q->est_nnz;
  }
  return space > 0 ? stored / space : 1;
}

/* Whether some access of `e` alone makes the whole of `top` equal c when
 * it is absent, and is sparse (at most half its points stored). */
static int some_access_gives(const Opt *O, const Node *top, const Node *e,
                             double c) {
  if (e->kind == ND_INPUT || e->kind == ND_ALIAS) {
    double v;
    int z;
    return fold_absent(O, top, e, &v, &z) && v == c &&
           access_density(O, e) <= 0.5;
  }
  if (e->kind == ND_MAP)
    for (int k = 0; k < e->nargs; k++)
      if (some_access_gives(O, top, e->args[k], c))
        return 1;
  return 0;
}

/* The constant c for lq (expression e) when the split applies: sum, max
 * or min with outputs (a scalar's kernel already folds its skipped
 * points) over nonempty ranges of fewer than 2^53 points (N counts them
 * exactly), a body that is a finite c, not the identity, wherever a
 * sparse operand is absent, and a finite result fill. */
static int split_constant(const Opt *O, const LogicalQuery *lq, const Node *e,
                          double *c) {
  const Op *agg = lq->agg;
  if (!agg || !agg->is_builtin || lq->nred == 0 || lq->nout == 0 ||
      lq->nindices > STATS_MAX_INDICES || e->kind != ND_MAP ||
      !isfinite(lq->out_fill))
    return 0;
  if (strcmp(agg->name, "+") != 0 && strcmp(agg->name, "max") != 0 &&
      strcmp(agg->name, "min") != 0)
    return 0;
  double n = 1;
  for (int k = 0; k < lq->nred; k++) {
    if (lq->indices[lq->red[k]].dim < 1)
      return 0;
    n *= (double)lq->indices[lq->red[k]].dim;
  }
  *c = node_fill(O, e);
  return n < 9007199254740992.0 && isfinite(*c) && *c != agg->agg_init &&
         some_access_gives(O, e, e, *c);
}

/* The unique output indices of lq (C[i, i] reads T[i]) into tq. */
static void unique_outputs(const Opt *O, const LogicalQuery *lq,
                           LogicalQuery *tq) {
  tq->out = arena_alloc(O->scratch, (size_t)(lq->nout + 1) * sizeof(int));
  tq->nout = 0;
  IdxSet seen = 0;
  for (int k = 0; k < lq->nout; k++) {
    IdxSet b = (IdxSet)1 << lq->out[k];
    if (!(seen & b))
      tq->out[tq->nout++] = lq->out[k];
    seen |= b;
  }
}

static Node *map2(const Opt *O, const char *op, Node *x, Node *y) {
  Node *args[2] = {x, y};
  return plan_map(O->a, (Loc){0, 0}, ops_find(&O->p->ops, op), 2, args);
}

static Node *num(const Opt *O, double v) {
  return plan_const(O->a, (Loc){0, 0}, v);
}

/* Emit M, N and lq's result from them; 0 when the split does not apply. */
static int fill_split(Opt *O, const LogicalQuery *lq, Node *e, int *number) {
  double c;
  if (!split_constant(O, lq, e, &c))
    return 0;
  const Op *agg = lq->agg, *ifelse = ops_find(&O->p->ops, "ifelse");
  double n = 1;
  for (int k = 0; k < lq->nred; k++)
    n *= (double)lq->indices[lq->red[k]].dim;
  LogicalQuery *mq = arena_alloc(O->scratch, sizeof *mq);
  *mq = *lq;
  mq->name = NULL;
  mq->user_query = -1;
  unique_outputs(O, lq, mq);
  Node *sel_args[3] = {map2(O, "!=", e, num(O, c)), e, num(O, agg->agg_init)};
  int m = -1, cnt = -1;
  double cost = plan_ve(O, mq, plan_map(O->a, (Loc){0, 0}, ifelse, 3, sel_args),
                        0, 1, &m);
  LogicalQuery *nq = arena_alloc(O->scratch, sizeof *nq);
  *nq = *mq;
  nq->agg = ops_find(&O->p->ops, "+");
  cost += plan_ve(O, nq, map2(O, "!=", e, num(O, c)), 0, 1, &cnt);
  Node *M = plan_alias(O->a, (Loc){0, 0}, m, mq->nout, mq->out);
  Node *N = plan_alias(O->a, (Loc){0, 0}, cnt, mq->nout, mq->out);
  Node *top;
  if (strcmp(agg->name, "+") == 0) {
    top = map2(O, "+", M, map2(O, "*", num(O, c), map2(O, "-", num(O, n), N)));
  } else {
    Node *args[3] = {map2(O, "<", N, num(O, n)),
                     map2(O, agg->name, M, num(O, c)),
                     plan_alias(O->a, (Loc){0, 0}, m, mq->nout, mq->out)};
    top = plan_map(O->a, (Loc){0, 0}, ifelse, 3, args);
  }
  Work W;
  setup_work(O, lq, &W);
  double est;
  cost += combine_cost(O, &W, O->lp->q[m].est_nnz + O->lp->q[cnt].est_nnz,
                       &est);
  *number = emit(&W, lq->user_query >= 0 ? lq->name : NULL, lq->user_query,
                 lq->nout, lq->out, NULL, 0, top, est, cost);
  return 1;
}

/* ---- Distributing a split input into a sum (issue 12, the SDDMM) ----
 * C[i,j] = S[i,j] * sum(k: U[i,k] * V[j,k]) with S holding a few inf or
 * NaN values may not become sum(k: S * U * V) as it stands: inf * 0 is
 * NaN, so the dense U V^T would be built instead.  But the physical
 * planner splits such an S (default.c, choose_split): the kernel reads
 * its finite part, where distributing is exact, and the correction pass
 * (src/exec/exceptions.c) recomputes each exceptional entry.  Told that
 * S was distributed (LogicalQuery.factored_input), it computes there
 * S[i,j] * (the sum of the rest), the meaning as written.  Hence the
 * shape kept narrow: a product with no aggregate, of one splittable
 * input binding exactly the output indices (constant along the sum) and
 * finite factors, at least one a finite sum-of-products to inline. */

/* SPLIT_MAX_WORK of default.c: the correction's points per query. */
#define SPLIT_INLINE_MAX_WORK ((double)(1 << 26))

/* The non-finite entries of input k when the physical planner will split
 * them (default.c, check_inputs), else 0. */
static int64_t splittable_bad(const Opt *O, int k) {
  galley_facts f;
  rt_tensor_facts(O->inputs[k], &f);
  int64_t bad = f.nan + f.pos_inf + f.neg_inf;
  double fill = bind_input_fill(O->p, O->inputs, k);
  if (bad > 0 && isfinite(fill) && O->inputs[k]->order > 0 &&
      (bad <= 16 || bad * 16 <= f.stored))
    return bad;
  return 0;
}

/* Whether input access s binds exactly lq's output indices, once each. */
static int binds_outputs(const LogicalQuery *lq, const Node *s) {
  if (s->nidx != lq->nout)
    return 0;
  for (int m = 0; m < s->nidx; m++) {
    int found = 0;
    for (int o = 0; o < lq->nout; o++)
      found |= lq->out[o] == s->idx[m];
    for (int x = 0; x < m; x++)
      found &= s->idx[x] != s->idx[m];
    if (!found)
      return 0;
  }
  return 1;
}

/* Whether factor x reads a sum-of-products result (as inlinable) whose
 * factors are inputs, finite or splittable: U V^T with an inf in U.  A
 * finite x * (a + inf) and x * a + x * inf are both NaN when x is 0,
 * else the same infinity, so distributing a finite factor over such a
 * sum keeps the dense meaning; the physical planner then splits the
 * inputs in the sum (their correction lines: the row of U's inf). */
static int inlinable_split(const Opt *O, const LogicalQuery *xq,
                           const Node *x) {
  if (x->kind != ND_ALIAS)
    return 0;
  const LogicalQuery *in = &O->lp->q[x->tensor];
  int l = lifted_of(O, x->tensor);
  const Node *e = in->expr;
  /* (a sum whose split input was distributed into it means the factored
   * form, not this sum of products: not inlined again) */
  if (l < 0 || O->finite[l] || in->factored_input || !in->agg ||
      in->agg != xq->agg ||
      in->nred == 0 || in->nout != x->nidx || e->kind != ND_MAP ||
      !e->op->is_builtin || strcmp(e->op->name, "*") != 0 ||
      xq->nindices + in->nred > STATS_MAX_INDICES)
    return 0;
  for (int k = 0; k < e->nargs; k++)
    if (e->args[k]->kind != ND_INPUT ||
        !(expr_finite(O, e->args[k]) || splittable_bad(O, e->args[k]->tensor)))
      return 0;
  for (int k = 0; k < in->nout; k++)
    for (int m = 0; m < k; m++)
      if (in->out[k] == in->out[m])
        return 0;
  return in->nout + in->nred == in->nindices;
}

/* The correction's work for the splittable inputs of term t over xq's
 * indices: per input, its exceptions times the extents it leaves free. */
static double split_work(const Opt *O, const LogicalQuery *xq, const Term *t) {
  double work = 0;
  for (int m = 0; m < t->n; m++) {
    const Node *f = t->f[m];
    int64_t bad = f->kind == ND_INPUT ? splittable_bad(O, f->tensor) : 0;
    double w = (double)bad;
    for (int id = 0; bad && id < xq->nindices; id++) {
      int bound = 0;
      for (int x = 0; x < f->nidx; x++)
        bound |= f->idx[x] == id;
      if (!bound)
        w *= (double)xq->indices[id].dim;
    }
    work += w;
  }
  return work;
}

static int split_inline(Opt *O, const LogicalQuery *lq, Node *e, int *number) {
  if (lq->agg || O->o.no_split || !O->inputs || e->kind != ND_MAP ||
      !e->op->is_builtin || strcmp(e->op->name, "*") != 0 ||
      lq->nindices > STATS_MAX_INDICES)
    return 0;
  LogicalQuery *xq = arena_alloc(O->scratch, sizeof *xq);
  *xq = *lq;
  xq->agg = ops_find(&O->p->ops, "+");
  xq->indices = arena_alloc(O->a, (STATS_MAX_INDICES + 1) * sizeof(Index));
  memcpy(xq->indices, lq->indices, (size_t)lq->nindices * sizeof(Index));
  /* s: a splittable input outside the sums (then every other factor is
   * finite); else the sums may hold splittable inputs */
  const Node *s = NULL;
  int any = 0, inner = 0;
  for (int k = 0; k < e->nargs; k++) {
    const Node *a = e->args[k];
    int64_t b = !s && a->kind == ND_INPUT ? splittable_bad(O, a->tensor) : 0;
    if (b > 0 && binds_outputs(lq, a))
      s = a;
    else if (expr_finite(O, a))
      any |= inlinable(O, xq, a);
    else if (inlinable_split(O, xq, a))
      any = inner = 1;
    else
      return 0;
  }
  if ((!s && !inner) || (s && inner) || !any)
    return 0;
  Terms *cur = single_term(O, e);
  if (!cur)
    return 0;
  for (int m = 0; m < cur->t[0].n;) {
    const Node *f = cur->t[0].f[m];
    if (!inlinable(O, xq, f) && !(inner && inlinable_split(O, xq, f))) {
      m++;
      continue;
    }
    Terms *c = arena_alloc(O->scratch, sizeof *c);
    if (!inline_one(O, xq, cur, 0, m, c) || c->n != 1)
      return 0;
    cur = c;
    m = 0;
  }
  if (split_work(O, xq, &cur->t[0]) > SPLIT_INLINE_MAX_WORK)
    return 0;
  plan_terms(O, xq, cur, 1, number);
  O->lp->q[*number].factored_input = s ? s->tensor + 1 : 0;
  return 1;
}

static void optimize_query(Opt *O, int qi) {
  const LogicalQuery *lq = &O->lift->q[qi];
  Node *e = flatten(O, copy_node(O, lq->expr, NULL, 1));
  /* Variable elimination reorders sums of products (sum_i a*b = a *
   * sum_i b): exact on finite values, but with inf the two orders make nan
   * (inf - inf, 0 * inf) in different places, so a query over values that
   * may not be finite keeps its lifted form. */
  int finite = expr_finite(O, lq->expr);
  O->range[qi] = lifted_range(O, lq);
  O->finite[qi] = (unsigned char)range_finite(O->range[qi]);
  if (!(finite && distribute(O, lq, e, &O->map[qi])) &&
      !(!finite && split_inline(O, lq, e, &O->map[qi])) &&
      !split_same_op(O, lq, e, finite, &O->map[qi]) &&
      !fill_split(O, lq, e, &O->map[qi]))
    plan_ve(O, lq, e, finite, 1, &O->map[qi]);
  /* the result's fill as the lift (and the evaluator) computes it, not
   * re-derived through the intermediates (equal up to rounding) */
  O->lp->q[O->map[qi]].out_fill = lq->out_fill;
  /* adaptive planning: a result an earlier run measured is as large as
   * it was, whatever the estimate says; the queries after it read it so */
  int u = lq->user_query;
  if (O->o.actual_nnz && u >= 0 && O->o.actual_nnz[u] >= 0 &&
      O->lp->q[O->map[qi]].user_query == u)
    O->lp->q[O->map[qi]].est_nnz = O->o.actual_nnz[u];
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

static void mark_read(const LogicalPlan *lp, const Node *n,
                      unsigned char *live) {
  if (n->kind == ND_ALIAS && !live[n->tensor]) {
    live[n->tensor] = 1;
    mark_read(lp, lp->q[n->tensor].expr, live);
  } else if (n->kind == ND_MAP) {
    for (int k = 0; k < n->nargs; k++)
      mark_read(lp, n->args[k], live);
  }
}

static void renumber(Node *n, const int *to) {
  if (n->kind == ND_ALIAS)
    n->tensor = to[n->tensor];
  else if (n->kind == ND_MAP)
    for (int k = 0; k < n->nargs; k++)
      renumber(n->args[k], to);
}

/* Drop the queries no output needs (summed results whose every read was
 * inlined), keeping the order of the rest. */
static void prune_unread(Opt *O) {
  LogicalPlan *lp = O->lp;
  unsigned char *live = arena_alloc(O->scratch, (size_t)lp->nq + 1);
  int *to = arena_alloc(O->scratch, ((size_t)lp->nq + 1) * sizeof *to);
  memset(live, 0, (size_t)lp->nq + 1);
  for (int k = 0; k < lp->noutputs; k++)
    if (!live[lp->outputs[k]]) {
      live[lp->outputs[k]] = 1;
      mark_read(lp, lp->q[lp->outputs[k]].expr, live);
    }
  int n = 0;
  for (int q = 0; q < lp->nq; q++) {
    to[q] = live[q] ? n : -1;
    if (live[q])
      lp->q[n++] = lp->q[q];
  }
  if (n == lp->nq)
    return;
  lp->nq = n;
  for (int q = 0; q < n; q++)
    renumber(lp->q[q].expr, to);
  for (int k = 0; k < lp->noutputs; k++)
    lp->outputs[k] = to[lp->outputs[k]];
}

static void optimize_all(Opt *O) {
  O->stats_cache = O->o.stats_cache ? O->o.stats_cache
                                     : stats_cache_new(O->scratch);
  O->map = arena_alloc(O->scratch, (size_t)(O->lift->nq + 1) * sizeof(int));
  O->uses = arena_alloc(O->scratch, (size_t)(O->lift->nq + 1) * sizeof(int));
  for (int l = 0; l < O->lift->nq; l++) {
    O->map[l] = -1;
    O->uses[l] = 0;
    for (int q = 0; q < O->lift->nq; q++)
      O->uses[l] += count_reads(O->lift->q[q].expr, l);
    for (int k = 0; k < O->lift->noutputs; k++)
      O->uses[l] += O->lift->outputs[k] == l;
  }
  O->finite = arena_alloc(O->scratch, (size_t)O->lift->nq + 1);
  O->range = arena_alloc(O->scratch, ((size_t)O->lift->nq + 1) *
                                         sizeof *O->range);
  O->input_range = arena_alloc(O->scratch, ((size_t)O->p->ninputs + 1) *
                                               sizeof *O->input_range);
  for (int k = 0; k < O->p->ninputs; k++)
    O->input_range[k] = input_range(O, k);
  for (int qi = 0; qi < O->lift->nq; qi++)
    optimize_query(O, qi);
  set_outputs(O);
  prune_unread(O);
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
    snprintf(err->msg, sizeof err->msg, "%s",
           "out of memory planning the program (logical optimizer)");
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
  Opt O = {.p = p, .inputs = inputs, .o = opt ? *opt : opt_defaults(),
           .lift = lift, .lp = lp, .a = a, .scratch = scratch};
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
