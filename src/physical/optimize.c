/*
 * optimize.c -- the physical optimizer (paper Sec. 5, galley-notes.md
 * section 3): from a logical plan and the bound inputs' statistics, per
 * logical query a loop order, an output format, merges, and CSE.
 *
 * Three passes over the logical queries:
 *   1. forward: estimate every result's nnz (the estimator of opt, and
 *      never above the logical optimizer's estimate), so that a consumer
 *      can see its intermediates' sizes;
 *   2. backward (consumers first): choose each loop order -- output
 *      indices, then reduced ones (the code generator's rule), each group
 *      by greedy search, then an exact DP over prefix sets (<= 10
 *      variables) bounded by the greedy cost.  When the result can
 *      accumulate in place (fill = the aggregate's initial value = its
 *      identity), a second search over all the loops (an output first)
 *      may put reduced loops before output loops (Gustavson), taken when
 *      strictly cheaper counting the scatter workspace's writes
 *      (try_interleaved; pass 3 falls back to the outputs-first order
 *      when the merges break the in-place rule).  A step costs the
 *      iterations of its prefix (the join of the accesses projected on
 *      it) times the leader's walk times one plus the followers' lookups
 *      (step_cost, lookup_cost: constants measured on this machine), or
 *      a merge of sorted lists, or a marked intersection of two
 *      (mark_step_cost, phys_mark_cost), whichever is cheapest; an
 *      input (or an intermediate already bound to another consumer's
 *      order) stored out of loop order costs nnz * TRANSPOSE_COST.  The
 *      first consumer of an intermediate then fixes the mode order the
 *      intermediate is written in: its own loop order, so intermediates
 *      are not transposed;
 *   3. forward: build the physical queries with default.c's builder
 *      (accesses, transposes of inputs, merges with the conjunct of
 *      smallest expected fan-out leading), output formats per level from
 *      the estimated fill fraction per parent within the memory budget
 *      (for products, the smaller of the chain and uniform estimates),
 *      and CSE against the queries already built.
 *
 * The statistics live in a scratch arena freed at the end; everything
 * the plan points to lives in the plan's arena.  Out of memory in either
 * longjmps to the catch in physical_optimize.
 */
#include <math.h>
#include <string.h>

#include "logical.h"
#include "rt_internal.h"

/* Costs in units of one loop iteration that walks a stored entry (a
 * CSR walk with a dense lookup: ~0.7 ns here).  Galley's constants are
 * 60 for a transpose and 1 for any sparse lookup; measured on this
 * machine (benchmarks/RESULTS.md, "cost constants"), a transpose costs
 * ~11 ns an entry and a binary search ~5 ns a halving, so both are
 * recalibrated. */
#define TRANSPOSE_COST 15.0 /* per stored entry of a transposed tensor */
#define DENSE_LOOKUP 0.2    /* lookup factor of a dense level (1/5) */
#define BYTEMAP_LOOKUP 0.4  /* of a bytemap level (1/2.5) */
#define HASH_LOOKUP 3.0     /* of a hash level: hash, probe, compare */
/* a sorted list: PHYS_LIST_STEP per halving of its fiber (phys.h) */
#define DP_MAX_VARS 10      /* exact search up to this many variables */
#define DENSE_FRACTION 0.5  /* a level fuller than this is dense */
#define BYTEMAP_FRACTION 0.05
#define SCATTER_WRITE 1.0   /* per write into a scatter workspace */
/* build_order: the interleaved order cannot accumulate in place */
#define BUILD_FALLBACK ((galley_status)100)

typedef struct Opt {
  Arena *a;  /* the plan's */
  Arena *s;  /* scratch: statistics */
  const LogicalPlan *lp;
  const galley_tensor *const *inputs;
  const OptOptions *opt;
  double *est;    /* per logical query: estimated nnz of its result */
  int **order;    /* per logical query: loop order (logical ids) */
  int **plain;    /* per logical query: the outputs-first order when
                     order[] interleaves reduced and output loops (an
                     in-place reduction), else NULL */
  int *nloops;
  int *has_mo;    /* per logical query: a consumer fixed its mode order */
  int (*mo)[GALLEY_MAX_ORDER];
  int *phys_of;   /* logical query -> physical query */
  StatsCache *stats_cache; /* the inputs' nnz and degree statistics */
  char *memo;     /* choose_order's memo of estimates, one block per plan */
  double *sampled; /* per logical query: its sampled size (sampled_size),
                      -1 when none, NaN until asked */
  PhysBuilder b;
} Opt;

/* One logical query's estimation context. */
typedef struct QStats {
  StatsContext c;
  int64_t *dims;
  int nacc;
  const Node **acc;      /* access nodes, left to right */
  TensorStats **acc_s;   /* their statistics */
  TensorStats *expr;     /* the pointwise expression */
  TensorStats *result;   /* after the aggregate */
  StatsContext uc;       /* the uniform estimator, when c is the chain's */
  TensorStats *uresult;  /* the result by the uniform estimator, or NULL */
  int usable;            /* at most 64 indices */
} QStats;

static IdxSet node_set(const Node *n) {
  IdxSet s = 0;
  for (int k = 0; k < n->nidx; k++)
    s |= (IdxSet)1 << n->idx[k];
  return s;
}

static int count_acc(const Node *n) {
  if (n->kind == ND_INPUT || n->kind == ND_ALIAS)
    return 1;
  int c = 0;
  if (n->kind == ND_MAP)
    for (int k = 0; k < n->nargs; k++)
      c += count_acc(n->args[k]);
  return c;
}

/* Statistics of expression n in context c; with S, its accesses are
 * recorded in S->acc / S->acc_s. */
static TensorStats *node_stats(const Opt *O, QStats *S, const StatsContext *c,
                               const Node *n) {
  TensorStats *t;
  switch (n->kind) {
  case ND_INPUT:
    t = stats_from_tensor(c, O->inputs[n->tensor], n->idx,
                          bind_input_fill(O->lp->prog, O->inputs, n->tensor));
    break;
  case ND_ALIAS:
    t = stats_new(c, node_set(n), O->est[n->tensor],
                  O->lp->q[n->tensor].out_fill);
    break;
  case ND_MAP: {
    TensorStats **args =
        arena_alloc(O->s, ((size_t)n->nargs + 1) * sizeof *args);
    for (int k = 0; k < n->nargs; k++)
      args[k] = node_stats(O, S, c, n->args[k]);
    return stats_map(c, n->op, (const TensorStats *const *)args, n->nargs);
  }
  case ND_CONST:
    return stats_const(c, n->value);
  default:
    return stats_const(c, NAN);
  }
  if (S) {
    S->acc[S->nacc] = n;
    S->acc_s[S->nacc++] = t;
  }
  return t;
}

/* Index position of id j in access n (2 indices), or -1. */
static int position_of(const Node *n, int j) {
  return n->idx[0] == j ? 0 : n->idx[1] == j ? 1 : -1;
}

/* A product of two bound matrices over one reduced index, C[i,k] =
 * agg(j: A[i,j] * B[j,k]) in any access order, whose factors' fills the
 * op annihilates: its size from a sample of its rows (stats_product_nnz),
 * else -1. */
static double product_sample(const Opt *O, const LogicalQuery *q) {
  const Node *e = q->expr;
  if (!q->agg || q->nred != 1 || q->nout != 2 || e->kind != ND_MAP ||
      e->nargs != 2 || !(e->op->props & OP_HAS_ANNIHILATOR))
    return -1;
  const Node *x = e->args[0], *y = e->args[1];
  if (x->kind != ND_INPUT || y->kind != ND_INPUT || x->nidx != 2 ||
      y->nidx != 2)
    return -1;
  for (int k = 0; k < 2; k++)
    if (!stats_same_value(bind_input_fill(O->lp->prog, O->inputs,
                                          e->args[k]->tensor),
                          e->op->annihilator))
      return -1;
  int j = q->red[0], xj = position_of(x, j), yj = position_of(y, j);
  if (xj < 0 || yj < 0)
    return -1;
  int xi = x->idx[1 - xj], yk = y->idx[1 - yj];
  if (xi == j || yk == j || xi == yk || position_of(x, yk) >= 0 ||
      !((q->out[0] == xi && q->out[1] == yk) ||
        (q->out[0] == yk && q->out[1] == xi)))
    return -1;
  const galley_tensor *a = O->inputs[x->tensor], *b = O->inputs[y->tensor];
  double est = stats_product_nnz(a, 1 - xj, b, 1 - yj);
  return est >= 0 ? est : stats_product_nnz(b, 1 - yj, a, 1 - xj);
}

/* Query qi's sampled size (product_sample), found once a plan, when the
 * uniform estimate u of its result (of `space` points) is fuller than
 * a sorted list's: the uniform estimate takes the factors' patterns as
 * independent and so overstates a product of correlated ones (banded,
 * clustered), which then gets a dense or bytemap level for a result far
 * sparser (bcsstk13's A*A: 57% by the uniform estimate, 10% in truth).
 * -1 when not sampled. */
static double sampled_size(const Opt *O, int qi, double u, double space) {
  if (!O->sampled)
    return -1;
  if (isnan(O->sampled[qi]))
    O->sampled[qi] = u > BYTEMAP_FRACTION * space
                         ? product_sample(O, &O->lp->q[qi])
                         : -1;
  return O->sampled[qi];
}

static void query_stats(const Opt *O, int qi, QStats *S) {
  const LogicalQuery *q = &O->lp->q[qi];
  memset(S, 0, sizeof *S);
  S->usable = q->nindices <= STATS_MAX_INDICES;
  if (!S->usable)
    return;
  S->dims = arena_alloc(O->s, ((size_t)q->nindices + 1) * sizeof *S->dims);
  for (int k = 0; k < q->nindices; k++)
    S->dims[k] = q->indices[k].dim;
  S->c = (StatsContext){O->opt->estimator, O->s, S->dims, q->nindices,
                        O->stats_cache,
                        stats_log_dims(O->s, S->dims, q->nindices)};
  int n = count_acc(q->expr);
  S->acc = arena_alloc(O->s, ((size_t)n + 1) * sizeof *S->acc);
  S->acc_s = arena_alloc(O->s, ((size_t)n + 1) * sizeof *S->acc_s);
  S->expr = node_stats(O, S, &S->c, q->expr);
  IdxSet red = 0;
  for (int k = 0; k < q->nred; k++)
    red |= (IdxSet)1 << q->red[k];
  red &= stats_indices(S->expr);
  S->result = q->agg && red ? stats_aggregate(&S->c, q->agg, S->expr, red)
                            : S->expr;
  /* The chain bound of a projected join (a product's result) is an upper
   * bound set by maximum degrees, often far above the truth (A*A of a
   * banded FEM matrix: 30x); the format choice takes the smaller of it
   * and the uniform estimate, since a dense level for a sparse result
   * costs far more than the reverse. */
  if (O->opt->estimator == EST_CHAIN && q->agg && red) {
    S->uc = S->c;
    S->uc.kind = EST_UNIFORM;
    TensorStats *ue = node_stats(O, NULL, &S->uc, q->expr);
    S->uresult = stats_aggregate(&S->uc, q->agg, ue, red);
  }
  /* a product's sampled size, where the uniform estimate would make its
   * result fuller than a list, replaces the uniform estimate */
  const StatsContext *uc = S->uresult ? &S->uc : &S->c;
  TensorStats *u = S->uresult ? S->uresult : S->result;
  if (q->agg && red && uc->kind == EST_UNIFORM && u) {
    IdxSet in = stats_indices(u);
    double space = stats_dense(S->dims, in);
    double sampled = sampled_size(O, qi, stats_estimate(uc, u, in, 0), space);
    if (sampled >= 0 && sampled < stats_estimate(uc, u, in, 0)) {
      u = stats_new(uc, in, sampled, stats_fill(u));
      if (S->uresult)
        S->uresult = u;
      else
        S->result = u;
    }
  }
}

static IdxSet out_set(const LogicalQuery *q) {
  IdxSet s = 0;
  for (int k = 0; k < q->nout; k++)
    s |= (IdxSet)1 << q->out[k];
  return s;
}

/* Pass 1: estimated nnz of every result. */
static void estimate_all(Opt *O) {
  for (int qi = 0; qi < O->lp->nq; qi++) {
    const LogicalQuery *q = &O->lp->q[qi];
    QStats S;
    query_stats(O, qi, &S);
    double dense = 1;
    for (int k = 0; k < q->nout; k++)
      dense *= (double)q->indices[q->out[k]].dim;
    O->est[qi] = dense;
    if (S.usable) {
      IdxSet keep = out_set(q) & stats_indices(S.result);
      O->est[qi] = keep ? stats_estimate(&S.c, S.result, keep, 0) : 1;
    }
    /* Here an intermediate's statistic is its size alone; the logical
     * optimizer estimated it through the expressions that made it, with
     * the inputs' degree constraints.  Both are upper bounds (chain):
     * keep the tighter (a self-join on a key is near-diagonal, not the
     * cross product its sizes allow). */
    if (q->est_nnz > 0 && q->est_nnz < O->est[qi])
      O->est[qi] = q->est_nnz;
    /* a product's sampled size (an estimate, not a bound, but far
     * closer than the bounds where it is taken) */
    double sampled = O->sampled ? O->sampled[qi] : -1;
    if (sampled >= 0 && sampled < O->est[qi])
      O->est[qi] = sampled;
    /* a result an earlier run measured (adaptive planning) */
    const double *real = O->opt->actual_nnz;
    if (real && q->user_query >= 0 && real[q->user_query] >= 0)
      O->est[qi] = real[q->user_query];
  }
}

/* ------------------------------------------------------------------ */
/* Loop order                                                          */
/* ------------------------------------------------------------------ */

/* The storage order of an access: the loop-independent sequence of
 * indices at its levels, and what a transpose of it would cost. */
typedef struct AccOrder {
  int known;      /* 0: an intermediate whose order is still free */
  int nlev;
  int idx[GALLEY_MAX_ORDER];
  galley_level_kind kind[GALLEY_MAX_ORDER];
  double fiber[GALLEY_MAX_ORDER]; /* mean stored entries of a fiber */
  double nnz;
} AccOrder;

typedef struct Search {
  const Opt *O;
  int qi;         /* the logical query */
  QStats *S;
  AccOrder *ao;   /* per access */
  /* Constraints of the interleaved search (nfix < 0: none): the first
   * loop is in first_ok, and fix[0..nfix-1] appear in that order. */
  int nfix;
  const int *fix;
  IdxSet first_ok;
  /* iterations() per prefix set, open addressing; a slot is in use
   * when its stamp is this query's (so no table is cleared per query) */
  unsigned stamp;
  unsigned *memo_stamp;
  IdxSet *memo_key;
  double *memo_val;
  /* fanout() per (access, target set, condition) */
  unsigned *fan_stamp;
  IdxSet *fan_key, *fan_cond;
  int *fan_acc;
  double *fan_val;
} Search;

#define MEMO_SIZE 4096 /* a power of two; more prefixes are not cached */

static void access_order(const Opt *O, const LogicalQuery *q, const Node *n,
                         AccOrder *ao) {
  memset(ao, 0, sizeof *ao);
  galley_format f;
  if (n->kind == ND_INPUT) {
    phys_input_format(O->inputs[n->tensor], &f);
    ao->nnz = (double)galley_tensor_stored(O->inputs[n->tensor]);
  } else if (O->has_mo[n->tensor]) {
    f = galley_format_default(n->nidx);
    memcpy(f.mode_order, O->mo[n->tensor], sizeof f.mode_order);
    ao->nnz = O->est[n->tensor];
  } else {
    return;
  }
  ao->known = 1;
  ao->nlev = n->nidx;
  for (int l = 0; l < n->nidx; l++) {
    ao->idx[l] = n->idx[f.mode_order[l]];
    ao->kind[l] = f.kinds[l];
    double dim = (double)q->indices[ao->idx[l]].dim;
    ao->fiber[l] = ao->nnz < dim ? ao->nnz : dim;
    if (n->kind == ND_INPUT) {
      const galley_level *L = &O->inputs[n->tensor]->lvl[l];
      if (L->npar > 0 && L->kind != GALLEY_DENSE)
        ao->fiber[l] = (double)L->nset / (double)L->npar;
    }
  }
}

/* The cost of looking up one coordinate in a level of kind k whose
 * fibers hold `fiber` entries on average. */
static double lookup_cost(galley_level_kind k, double fiber) {
  switch (k) {
  case GALLEY_DENSE:
    return DENSE_LOOKUP;
  case GALLEY_BYTEMAP:
    return BYTEMAP_LOOKUP;
  case GALLEY_HASH:
    return HASH_LOOKUP;
  default:
    return phys_list_lookup_cost(fiber);
  }
}

static double iterations(const Search *X, IdxSet P);

/* Expected entries of access k's fiber along index i once the indices of
 * P are fixed (its conditional fan-out), memoized. */
static double fanout(const Search *X, int k, IdxSet P, int i) {
  const TensorStats *s = X->S->acc_s[k];
  IdxSet in = stats_indices(s), cond = P & in;
  IdxSet target = (cond | (IdxSet)1 << i) & in;
  if (target == cond)
    return 1;
  size_t mask = MEMO_SIZE - 1;
  uint64_t mix = (target * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(k + 1) << 32) ^
                 (uint64_t)i;
  size_t h = (size_t)((mix * 0xC2B2AE3D27D4EB4Full) >> 40) & mask;
  for (size_t probe = 0; probe < 16; probe++, h = (h + 1) & mask) {
    if (X->fan_stamp[h] != X->stamp)
      break;
    if (X->fan_key[h] == target && X->fan_cond[h] == cond &&
        X->fan_acc[h] == k)
      return X->fan_val[h];
  }
  double f = stats_estimate(&X->S->c, s, target, cond);
  if (X->fan_stamp[h] != X->stamp) {
    X->fan_stamp[h] = X->stamp;
    X->fan_key[h] = target;
    X->fan_cond[h] = cond;
    X->fan_acc[h] = k;
    X->fan_val[h] = f;
  }
  return f;
}

/* Access k's fan-out along i after prefix P, as the leader walks it:
 * fanout()'s bound (the chain bound uses maximum degrees), but when P
 * holds only k's own indices every point of P is a distinct fiber of k,
 * so the walks of all the points together read at most k's entries
 * projected on P and i: the mean per point is at most that over
 * iterations(P).  Without this, TransE's gradient loop r, h, a over
 * T[h, r, a] (mean fiber 1.4, largest 442) looked 300 times dearer than
 * it is, and a 2.8M-entry transpose that avoids it looked cheap. */
static double walked_fanout(const Search *X, int k, IdxSet P, int i) {
  double w = fanout(X, k, P, i);
  IdxSet own = stats_indices(X->S->acc_s[k]);
  if (!P || (P & ~own) || !(own & ((IdxSet)1 << i)))
    return w;
  double iters = iterations(X, P);
  if (!(iters > 0))
    return w;
  double total = stats_estimate(&X->S->c, X->S->acc_s[k],
                                P | (IdxSet)1 << i, 0);
  return total / iters < w ? total / iters : w;
}

/* The cost of loop i after prefix P as a marked intersection
 * (MERGE_MARK, phys_mark_cost) of the two sorted lists k[0], k[1] that
 * alone hold it, INFINITY when neither can be marked: the marked one
 * reads i at its last level and its other indices are fixed by a part of
 * P (assumed outermost: then its fiber is scattered once per point of
 * that part, and reused across the loops of the rest, which must not be
 * empty).  Its fiber is counted at its fan-out given its own indices,
 * the walked one's at its fan-out given P. */
static double mark_step_cost(const Search *X, IdxSet P, int i, const int *k,
                             double iters) {
  double best = INFINITY;
  for (int m = 0; m < 2; m++) {
    const AccOrder *ao = &X->ao[k[m]];
    IdxSet own = node_set(X->S->acc[k[m]]), fix = own & ~((IdxSet)1 << i);
    if (ao->idx[ao->nlev - 1] != i || (fix & ~P) || !(P & ~own))
      continue;
    double fills = iterations(X, fix), marked = fanout(X, k[m], fix, i);
    double walked = fanout(X, k[1 - m], P, i);
    double reuse = fills > 0 ? iters / fills : 1;
    double c = iters * phys_mark_cost(marked, walked, reuse);
    best = c < best ? c : best;
  }
  return best;
}

/* The cost of adding loop i after the prefix set P: for every point of
 * P, the leader -- the holder of i with the fewest entries to walk (a
 * dense level walks its whole dimension) -- walks its fiber, and every
 * other holder is looked up once per entry walked (lookup_cost); or
 * sorted lists are merged (each walked once), or two of them intersected
 * by marking one (mark_step_cost), when cheaper.  An access whose
 * storage order disagrees with the loop order pays its transpose. */
static double step_cost(const Search *X, IdxSet P, int i) {
  if (X->nfix >= 0) {
    if (P == 0 && !(X->first_ok & ((IdxSet)1 << i)))
      return INFINITY;
    for (int k = 0; k < X->nfix; k++) {
      if (X->fix[k] != i)
        continue;
      for (int e = 0; e < k; e++)
        if (!(P & ((IdxSet)1 << X->fix[e])))
          return INFINITY;
    }
  }
  double dim = (double)X->O->lp->q[X->qi].indices[i].dim;
  double walk = INFINITY, walk_lookup = 0, lookups = 0, transpose = 0;
  double list_walks = 0, other_lookups = 0;
  int lists = 0, holders = 0, list_acc[2] = {-1, -1};
  for (int k = 0; k < X->S->nacc; k++) {
    const AccOrder *ao = &X->ao[k];
    const Node *n = X->S->acc[k];
    if (!(node_set(n) & ((IdxSet)1 << i)))
      continue;
    double c = 1, w = walked_fanout(X, k, P, i);
    int list = 0;
    if (ao->known) {
      int first = 0;
      while (ao->idx[first] != i)
        first++;
      c = lookup_cost(ao->kind[first], ao->fiber[first]);
      if (ao->kind[first] == GALLEY_DENSE)
        w = dim;
      list = ao->kind[first] == GALLEY_LIST;
      for (int l = 0; l < first; l++)
        if (!(P & ((IdxSet)1 << ao->idx[l]))) {
          transpose = ao->nnz * TRANSPOSE_COST; /* charged per step: a bound */
          list = 0;
        }
    }
    lookups += c;
    holders++;
    if (list) {
      list_walks += w;
      if (lists < 2)
        list_acc[lists] = k;
      lists++;
    } else {
      other_lookups += c;
    }
    if (w < walk) {
      walk = w;
      walk_lookup = c;
    }
  }
  if (walk == INFINITY) { /* no access holds i: a dense range */
    walk = dim;
    walk_lookup = 0;
  }
  double lead = walk * (1 + lookups - walk_lookup);
  /* sorted lists may be merged instead: each walked once, the others
   * looked up at the points they share (phys default.c chooses) */
  if (lists >= 2 && list_walks + walk * other_lookups < lead)
    lead = list_walks + walk * other_lookups;
  double iters = iterations(X, P), cost = iters * lead;
  if (lists == 2 && holders == 2) {
    double mark = mark_step_cost(X, P, i, list_acc, iters);
    cost = mark < cost ? mark : cost;
  }
  return cost + transpose;
}

/* The statistics of expression n with every access projected onto P
 * (accesses numbered left to right from *k). */
static TensorStats *prefix_stats(const Search *X, const Node *n, IdxSet P,
                                 int *k) {
  const StatsContext *c = &X->S->c;
  switch (n->kind) {
  case ND_INPUT:
  case ND_ALIAS: {
    TensorStats *t = X->S->acc_s[(*k)++];
    IdxSet drop = stats_indices(t) & ~P;
    return drop ? stats_aggregate(c, NULL, t, drop) : t;
  }
  case ND_MAP: {
    TensorStats **args =
        arena_alloc(X->O->s, ((size_t)n->nargs + 1) * sizeof *args);
    for (int a = 0; a < n->nargs; a++)
      args[a] = prefix_stats(X, n->args[a], P, k);
    return stats_map(c, n->op, (const TensorStats *const *)args, n->nargs);
  }
  case ND_CONST:
    return stats_const(c, n->value);
  default:
    return stats_const(c, NAN);
  }
}

/* The iterations of the loops over prefix set P: the join of the
 * accesses projected onto P (galley-notes.md 3.1, get_loop_lookups) --
 * loops over indices of different accesses with no shared index between
 * them in P visit the product of what each walks, not the expression's
 * projection onto P. */
static double iterations(const Search *X, IdxSet P) {
  IdxSet s = P & stats_indices(X->S->expr);
  if (!s)
    return 1;
  size_t mask = MEMO_SIZE - 1;
  size_t h = (size_t)((s * 0x9E3779B97F4A7C15ull) >> 40) & mask;
  for (size_t probe = 0; probe < 16; probe++, h = (h + 1) & mask) {
    if (X->memo_stamp[h] != X->stamp)
      break;
    if (X->memo_key[h] == s)
      return X->memo_val[h];
  }
  int k = 0;
  const LogicalQuery *q = &X->O->lp->q[X->qi];
  TensorStats *t = prefix_stats(X, q->expr, s, &k);
  double e = stats_estimate(&X->S->c, t, s & stats_indices(t), 0);
  if (X->memo_stamp[h] != X->stamp) {
    X->memo_stamp[h] = X->stamp;
    X->memo_key[h] = s;
    X->memo_val[h] = e;
  }
  return e;
}

/* Greedy: the cheapest next index, ties to the first in vars[]. */
static double greedy(const Search *X, IdxSet base, const int *vars, int n,
                     int *order) {
  IdxSet P = base;
  double total = 0;
  for (int step = 0; step < n; step++) {
    int best = -1;
    double best_cost = 0;
    for (int v = 0; v < n; v++) {
      if (P & ((IdxSet)1 << vars[v]))
        continue;
      double c = step_cost(X, P, vars[v]);
      if (best < 0 || c < best_cost) {
        best = v;
        best_cost = c;
      }
    }
    order[step] = vars[best];
    P |= (IdxSet)1 << vars[best];
    total += best_cost;
  }
  return total;
}

/* Exact DP over subsets of vars[] (prefix base fixed), bounded by the
 * greedy cost: a subset costlier than the bound is not extended. */
static void exact(const Search *X, Arena *s, IdxSet base, const int *vars,
                  int n, double bound, int *order) {
  size_t m = (size_t)1 << n;
  double *cost = arena_alloc(s, m * sizeof *cost);
  int *from = arena_alloc(s, m * sizeof *from);
  for (size_t S = 1; S < m; S++)
    cost[S] = INFINITY;
  for (size_t S = 0; S < m; S++) {
    if (cost[S] > bound * 1.000001 + 1e-9)
      continue;
    IdxSet P = base;
    for (int v = 0; v < n; v++)
      if (S & ((size_t)1 << v))
        P |= (IdxSet)1 << vars[v];
    for (int v = 0; v < n; v++) {
      if (S & ((size_t)1 << v))
        continue;
      size_t T = S | (size_t)1 << v;
      double c = cost[S] + step_cost(X, P, vars[v]);
      if (c < cost[T]) {
        cost[T] = c;
        from[T] = v;
      }
    }
  }
  if (!(cost[m - 1] < INFINITY))
    return; /* keep the greedy order */
  size_t S = m - 1;
  for (int step = n - 1; step >= 0; step--) {
    order[step] = vars[from[S]];
    S &= ~((size_t)1 << from[S]);
  }
}

static void order_group(const Search *X, Arena *s, IdxSet base,
                        const int *vars, int n, int *order) {
  if (n == 0)
    return;
  double bound = greedy(X, base, vars, n, order);
  if (n <= DP_MAX_VARS)
    exact(X, s, base, vars, n, bound, order);
}

/* The output indices in the order the fixed mode order lists them, or 0
 * when no consumer fixed one. */
static int fixed_out_order(const Opt *O, int qi, int *vars) {
  const LogicalQuery *q = &O->lp->q[qi];
  if (!O->has_mo[qi])
    return 0;
  int n = 0;
  for (int l = 0; l < q->nout; l++) {
    int id = q->out[O->mo[qi][l]];
    int seen = 0;
    for (int v = 0; v < n; v++)
      seen |= vars[v] == id;
    if (!seen)
      vars[n++] = id;
  }
  return n;
}

/* The modes of an access sorted stably by the loop position of their
 * index (pos[] per logical id). */
static void modes_by_loop(const Node *n, const int *pos, int *mo) {
  for (int m = 0; m < n->nidx; m++)
    mo[m] = m;
  for (int i = 1; i < n->nidx; i++)
    for (int j = i; j > 0 && pos[n->idx[mo[j - 1]]] > pos[n->idx[mo[j]]];
         j--) {
      int t = mo[j];
      mo[j] = mo[j - 1];
      mo[j - 1] = t;
    }
}

/* Whether the consumer's wanted order mo for query t is one t can write:
 * t's loops list its outputs in the order of mo's first appearances, so
 * mo must keep the modes of a repeated output index together. */
static int mode_order_writable(const LogicalQuery *t, const int *mo) {
  for (int l = 1; l < t->nout; l++) {
    if (t->out[mo[l]] == t->out[mo[l - 1]])
      continue;
    for (int e = 0; e < l - 1; e++)
      if (t->out[mo[e]] == t->out[mo[l]])
        return 0;
  }
  return 1;
}

/* Fix the storage order of the intermediates q reads that no later
 * consumer fixed yet: q's loop order. */
static void bind_intermediates(Opt *O, const LogicalQuery *q, const Node *n,
                               const int *pos) {
  if (n->kind == ND_MAP) {
    for (int k = 0; k < n->nargs; k++)
      bind_intermediates(O, q, n->args[k], pos);
    return;
  }
  if (n->kind != ND_ALIAS || O->has_mo[n->tensor])
    return;
  int mo[GALLEY_MAX_ORDER];
  modes_by_loop(n, pos, mo);
  if (!mode_order_writable(&O->lp->q[n->tensor], mo))
    return;
  memcpy(O->mo[n->tensor], mo, sizeof mo);
  O->has_mo[n->tensor] = 1;
}

static void distinct_add(int *vars, int *n, int id) {
  for (int v = 0; v < *n; v++)
    if (vars[v] == id)
      return;
  vars[(*n)++] = id;
}

/* The cost of a whole loop order under the step model. */
static double path_cost(const Search *X, const int *order, int n) {
  IdxSet P = 0;
  double total = 0;
  for (int k = 0; k < n; k++) {
    IdxSet Q = P | (IdxSet)1 << order[k];
    total += step_cost(X, P, order[k]);
    P = Q;
  }
  return total;
}

static void choose_kinds(const Opt *O, const QStats *S, const LogicalQuery *q,
                         const int *lv, int n, IdxSet random,
                         galley_level_kind *kinds);
static void modes_by_loop(const Node *n, const int *pos, int *mo);
static int same_double(double a, double b);

/* The output indices whose loops follow the first reduced loop of
 * `order`: written at random (through the scatter workspace). */
static IdxSet scattered(const LogicalQuery *q, const int *order, int n) {
  IdxSet red = 0, out = 0;
  for (int k = 0; k < q->nred; k++)
    red |= (IdxSet)1 << q->red[k];
  int d = 0;
  while (d < n && !(red & ((IdxSet)1 << order[d])))
    d++;
  for (; d < n; d++)
    if (!(red & ((IdxSet)1 << order[d])))
      out |= (IdxSet)1 << order[d];
  return out;
}

/* The level kinds the result gets under loop order `order`: whether they
 * are all dense. */
static int result_all_dense(const Opt *O, const QStats *S,
                            const LogicalQuery *q, const int *order, int n) {
  int *pos = arena_alloc(O->s, ((size_t)q->nindices + 1) * sizeof *pos);
  for (int k = 0; k < q->nindices; k++)
    pos[k] = n;
  for (int k = 0; k < n; k++)
    pos[order[k]] = k;
  int mo[GALLEY_MAX_ORDER], lv[GALLEY_MAX_ORDER];
  galley_level_kind kinds[GALLEY_MAX_ORDER];
  Node probe = {.kind = ND_ALIAS, .nidx = q->nout, .idx = q->out};
  modes_by_loop(&probe, pos, mo);
  for (int l = 0; l < q->nout; l++)
    lv[l] = q->out[mo[l]];
  choose_kinds(O, S, q, lv, q->nout, scattered(q, order, n), kinds);
  for (int l = 0; l < q->nout; l++)
    if (kinds[l] != GALLEY_DENSE)
      return 0;
  return 1;
}

/* Whether loop order `order` reads an intermediate (an alias whose
 * storage order is fixed) out of its storage order: a transpose paid on
 * every run, unlike an input's, which a run keeps with the input. */
static int transposes_intermediate(const Search *X, const int *order, int n) {
  int nv = X->O->lp->q[X->qi].nindices;
  int *pos = arena_alloc(X->O->s, ((size_t)nv + 1) * sizeof *pos);
  for (int k = 0; k < nv; k++)
    pos[k] = n;
  for (int k = 0; k < n; k++)
    pos[order[k]] = k;
  for (int k = 0; k < X->S->nacc; k++) {
    const AccOrder *ao = &X->ao[k];
    if (X->S->acc[k]->kind != ND_ALIAS || !ao->known)
      continue;
    for (int l = 1; l < ao->nlev; l++)
      if (pos[ao->idx[l]] < pos[ao->idx[l - 1]])
        return 1;
  }
  return 0;
}

/* The best order whose first loop is a reduced index (an all-dense
 * result accumulates in place, the executor folding the partial results
 * of the outer loop's blocks; another goes through the scatter
 * workspace), else NULL: a push plan,
 * e.g. a BFS step any(i: f[i] * A[i, j]) walks the frontier f's entries
 * and scatters their rows, where a pull plan walks every row of A.  Only
 * when the first loop walks at most half of its index, or when the pull
 * order `plain` would transpose an intermediate on every run (TransE's
 * gradient: sum(r, t: dL/dX[a, r, t, b] * T[a, r, t]) with dL/dX stored
 * r, a, t, b: pulling transposes its 2.8M entries per step, pushing
 * walks them in order and adds into the dense result). */
static int *reduced_first(Opt *O, Search *X, const LogicalQuery *q,
                          const int *vars, int n, const int *redv, int nred,
                          const int *plain) {
  IdxSet first = X->first_ok;
  X->first_ok = 0;
  for (int r = 0; r < nred; r++)
    X->first_ok |= (IdxSet)1 << redv[r];
  int *push = arena_alloc(O->a, ((size_t)n + 1) * sizeof *push);
  order_group(X, O->s, 0, vars, n, push);
  X->first_ok = first;
  int reduced = 0;
  for (int r = 0; r < nred; r++)
    reduced |= push[0] == redv[r];
  (void)q;
  /* only over a sparse set (a frontier): over all of the reduced index
   * (A^T x with a dense x) the pull order reads a transpose that a run
   * keeps with the input, and writes no partial results */
  if (!reduced)
    return NULL;
  if (iterations(X, (IdxSet)1 << push[0]) > 0.5 * (double)X->S->dims[push[0]] &&
      (!transposes_intermediate(X, plain, n) ||
       transposes_intermediate(X, push, n)))
    return NULL;
  return push;
}

/* The order an aggregate over free intermediates reads them in, when
 * one of them, `cover`, has every loop's index: the order cover's
 * indices are written (which its producer, itself free, keeps by
 * order_outputs' rule), provided the inputs are read in their storage
 * order under it; else NULL.  A consumer that binds such an
 * intermediate's storage order binds its producer's loops, and through
 * them the producer's own intermediates: TransE's gradient GR[a, b] =
 * sum(h, t: M[h, a, t, b]), the first consumer of M (the backward pass
 * takes consumers first), ordered its loops a, b, h, t by its own cost,
 * so M, and the X read by M's producer, were written r, d, h, t: the
 * producers walked T's pattern under a dense d loop with lookups, and
 * the other consumers of M read it through 2.8M-entry transposes, 30x
 * slower in all.  Reading in written order keeps every query on its
 * producer's order; the result accumulates in place (the caller's
 * rule), so any order is correct.  (The same for sum(r, t: dL/dS[a, r,
 * t] * X[a, r, t, b] * T[a, r, t]): X covers the loops, T is read in
 * order.) */
static int *written_order(const Opt *O, const Search *X, int n) {
  const Node *cover = NULL;
  for (int k = 0; k < X->S->nacc; k++) {
    const Node *acc = X->S->acc[k];
    if (acc->kind == ND_ALIAS && X->ao[k].known)
      return NULL; /* an intermediate already bound: the search's */
    if (acc->kind != ND_ALIAS || acc->nidx != n || cover)
      continue;
    int distinct = 1;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < i; j++)
        distinct &= acc->idx[j] != acc->idx[i];
    if (distinct)
      cover = acc;
  }
  if (!cover)
    return NULL;
  /* the inputs must be read in their storage order under it (no
   * transpose): T[h, r, t] beside X[h, r, t, d] */
  int pos[64];
  int nv = X->O->lp->q[X->qi].nindices;
  if (nv > 64)
    return NULL;
  for (int k = 0; k < nv; k++)
    pos[k] = n;
  for (int k = 0; k < n; k++)
    pos[cover->idx[k]] = k;
  for (int k = 0; k < X->S->nacc; k++) {
    const AccOrder *ao = &X->ao[k];
    for (int l = 1; ao->known && l < ao->nlev; l++)
      if (pos[ao->idx[l]] < pos[ao->idx[l - 1]])
        return NULL;
  }
  int *w = arena_alloc(O->a, ((size_t)n + 1) * sizeof *w);
  memcpy(w, cover->idx, (size_t)n * sizeof *w);
  return w;
}

/* Orders that put reduced loops before output loops (Gustavson's SpGEMM)
 * when the result can accumulate in place (phys_inplace_problem: an
 * all-dense result whose fill is the aggregate's initial value, which is
 * its identity; build_query checks the merges and falls back to the
 * outputs-first order): an exact (or greedy) search over all the loops,
 * the first loop an output (room for parallel outer loops), the output
 * indices in a fixed mode order's order.  Taken only when strictly
 * cheaper than the outputs-first order `order`; returns the order used. */
static int *try_interleaved(Opt *O, int qi, Search *X, const int *outv,
                            int nout, int fixed, const int *redv, int nred,
                            int *order) {
  const LogicalQuery *q = &O->lp->q[qi];
  const Op *agg = q->agg;
  double neutral; /* ops_fold_neutral: the identity, or any's 0 */
  if (!agg || nred == 0 || nout == 0 || nout != q->nout ||
      !ops_fold_neutral(agg, &neutral) ||
      !same_double(agg->agg_init, q->out_fill) ||
      !same_double(neutral, agg->agg_init))
    return order;
  int n = nout + nred;
  int *written = written_order(O, X, n);
  if (written) {
    O->plain[qi] = order;
    return written;
  }
  int *vars = arena_alloc(O->s, ((size_t)n + 1) * sizeof *vars);
  int *alt = arena_alloc(O->a, ((size_t)n + 1) * sizeof *alt);
  memcpy(vars, outv, (size_t)nout * sizeof *vars);
  memcpy(vars + nout, redv, (size_t)nred * sizeof *vars);
  X->nfix = fixed ? nout : 0;
  X->fix = outv;
  X->first_ok = 0;
  for (int k = 0; k < nout; k++)
    if (!fixed || k == 0)
      X->first_ok |= (IdxSet)1 << outv[k];
  order_group(X, O->s, 0, vars, n, alt);
  double c_alt = path_cost(X, alt, n);
  int *push = reduced_first(O, X, q, vars, n, redv, nred, order);
  X->nfix = -1;
  double c_plain = path_cost(X, order, n);
  int inter = 0;
  for (int k = 0; k < nout; k++)
    for (int r = 0; r < nred; r++)
      inter |= alt[k] == redv[r];
  if (!inter)
    c_alt = INFINITY;
  /* a result that is not all dense goes through the scatter workspace:
   * one random write per innermost iteration */
  if (inter && !result_all_dense(O, X->S, q, alt, n)) {
    IdxSet all = 0;
    for (int k = 0; k < n; k++)
      all |= (IdxSet)1 << alt[k];
    c_alt += SCATTER_WRITE * iterations(X, all);
  }
  double c_push = push ? path_cost(X, push, n) : INFINITY;
  if (push && !result_all_dense(O, X->S, q, push, n)) {
    IdxSet all = 0;
    for (int k = 0; k < n; k++)
      all |= (IdxSet)1 << push[k];
    c_push += SCATTER_WRITE * iterations(X, all);
  }
  if (c_push < c_alt * (1 - 1e-9)) {
    alt = push;
    c_alt = c_push;
  }
  if (!(c_alt < c_plain * (1 - 1e-9)))
    return order;
  O->plain[qi] = order;
  return alt;
}

/* The order of the output loops of a query no consumer fixed: the
 * search's; but when every access is an intermediate whose storage
 * order is still free, the logical order unless the search's is cheaper
 * by more than OUT_ORDER_SLACK.  Free accesses make the costs nearly
 * equal (the smaller dimension outermost saves one short walk) while
 * the choice binds the intermediates' storage order and, through it,
 * their producers' loops: TransE's GE[a, b] = _t9[a, b] + _t10[a, b]
 * put b outermost, which forced both producers to read dL/dX[h, r, t, d]
 * through a 2.8M-entry transpose with d outermost. */
#define OUT_ORDER_SLACK 0.1
static void order_outputs(Search *X, Arena *s, const int *outv, int nout,
                          int *order) {
  order_group(X, s, 0, outv, nout, order);
  for (int k = 0; k < X->S->nacc; k++)
    if (X->ao[k].known)
      return;
  double searched = path_cost(X, order, nout);
  double logical = path_cost(X, outv, nout);
  if (logical <= searched * (1 + OUT_ORDER_SLACK))
    memcpy(order, outv, (size_t)nout * sizeof *order);
}

/* Pass 2 for one query: its loop order, then its intermediates' orders. */
static void choose_order(Opt *O, int qi) {
  const LogicalQuery *q = &O->lp->q[qi];
  int nv = q->nindices;
  int *outv = arena_alloc(O->s, ((size_t)nv + 1) * sizeof *outv);
  int *redv = arena_alloc(O->s, ((size_t)nv + 1) * sizeof *redv);
  int nout = fixed_out_order(O, qi, outv), fixed = nout > 0 || q->nout == 0;
  if (!fixed)
    for (int k = 0; k < q->nout; k++)
      distinct_add(outv, &nout, q->out[k]);
  int nred = 0;
  for (int k = 0; k < q->nred && q->agg; k++)
    distinct_add(redv, &nred, q->red[k]);
  int *order = arena_alloc(O->a, ((size_t)nv + 1) * sizeof *order);
  memcpy(order, outv, (size_t)nout * sizeof *order);
  memcpy(order + nout, redv, (size_t)nred * sizeof *order);
  QStats S;
  query_stats(O, qi, &S);
  O->plain[qi] = NULL;
  if (S.usable) {
    /* the memo tables once per plan (zeroed by the arena: no stamp is
     * 0), their slots stamped per query: 176 KB of fresh memory per
     * query, or clearing 64 KB of it, cost more than the search itself */
    size_t w = MEMO_SIZE * sizeof(IdxSet), ws = MEMO_SIZE * sizeof(unsigned);
    if (!O->memo)
      O->memo = arena_alloc(O->s, 6 * w + 2 * ws);
    char *m = O->memo;
    Search X = {O, qi, &S,
                arena_alloc(O->s, ((size_t)S.nacc + 1) * sizeof(AccOrder)),
                -1, NULL, 0, (unsigned)qi + 1, (unsigned *)(m + 6 * w),
                (IdxSet *)m, (double *)(m + w), (unsigned *)(m + 6 * w + ws),
                (IdxSet *)(m + 2 * w), (IdxSet *)(m + 3 * w),
                (int *)(m + 5 * w), (double *)(m + 4 * w)};
    for (int k = 0; k < S.nacc; k++)
      access_order(O, q, S.acc[k], &X.ao[k]);
    if (!fixed)
      order_outputs(&X, O->s, outv, nout, order);
    IdxSet base = 0;
    for (int k = 0; k < nout; k++)
      base |= (IdxSet)1 << outv[k];
    order_group(&X, O->s, base, redv, nred, order + nout);
    order = try_interleaved(O, qi, &X, outv, nout, fixed, redv, nred, order);
  }
  O->order[qi] = order;
  O->nloops[qi] = nout + nred;
  int *pos = arena_alloc(O->s, ((size_t)nv + 1) * sizeof *pos);
  for (int k = 0; k < nv; k++)
    pos[k] = nv; /* not a loop: never read (checked in pass 3) */
  for (int k = 0; k < nout + nred; k++)
    pos[order[k]] = k;
  bind_intermediates(O, q, q->expr, pos);
}

/* ------------------------------------------------------------------ */
/* Output formats                                                      */
/* ------------------------------------------------------------------ */

/* Level kinds for the output levels (loop order lv[0..n-1], logical
 * ids): dense when fuller than half per parent and the dense footprint
 * fits the budget, bytemap when fuller than 5% (not under a bytemap,
 * footprint within the budget), else a sorted list.  The levels of the
 * indices in `random` are written out of loop order, through the
 * kernel's scatter workspace (a bytemap or hash table of one outer
 * iteration, which does the random writes Galley gives such levels a
 * hash or bytemap format for, galley-notes.md 3.3) and appended in order
 * after each iteration: they are dense when fuller than half, else a
 * sorted list -- a stored bytemap or hash level would only cost memory
 * and a slower build. */
/* Whether a result written at random (an order with reduced loops
 * before output loops) should accumulate in place, all dense: its whole
 * estimate is tight (no larger than its largest input: a projection or
 * a masked product, not a growing product whose bound can be 30x the
 * truth) and fills more than BYTEMAP_FRACTION of the dense array, within
 * the budget.  A sparse result would go through the scatter workspace, a
 * hash or a bytemap then a sort: TransE's gradient at doubled entity
 * count, sum(h, r: ... X[h, r, a, b]) with half its rows touched, took
 * 8x the dense accumulation's time that way. */
static int all_dense_accumulation(const Opt *O, const LogicalQuery *q,
                                  const int *lv, int n, double largest) {
  double all = 1;
  for (int l = 0; l < n; l++)
    all *= (double)q->indices[lv[l]].dim;
  double total = O->est[q - O->lp->q];
  return n > 0 && all > 0 && total <= largest &&
         total > BYTEMAP_FRACTION * all &&
         all * 8 <= O->opt->memory_budget;
}

static void choose_kinds(const Opt *O, const QStats *S, const LogicalQuery *q,
                         const int *lv, int n, IdxSet random,
                         galley_level_kind *kinds) {
  double positions = 1; /* allocated positions of the parent level */
  IdxSet P = 0;
  double budget = O->opt->memory_budget;
  double largest = 0; /* the most entries of one input */
  for (int x = 0; S->usable && x < S->nacc; x++) {
    if (!S->acc_s[x])
      continue;
    double e = stats_estimate(&S->c, S->acc_s[x],
                              stats_indices(S->acc_s[x]), 0);
    if (e > largest)
      largest = e;
  }
  if (random && all_dense_accumulation(O, q, lv, n, largest)) {
    for (int l = 0; l < n; l++)
      kinds[l] = GALLEY_DENSE;
    return;
  }
  for (int l = 0; l < n; l++) {
    double dim = (double)q->indices[lv[l]].dim;
    IdxSet Q = P | (IdxSet)1 << lv[l];
    double frac = 1, nnz = positions * dim;
    if (S->usable) {
      IdxSet in = stats_indices(S->result);
      if (Q & in) {
        double per = stats_estimate(&S->c, S->result, Q & in, P & in);
        nnz = stats_estimate(&S->c, S->result, Q & in, 0);
        if (S->uresult) {
          double uper = stats_estimate(&S->uc, S->uresult, Q & in, P & in);
          double unnz = stats_estimate(&S->uc, S->uresult, Q & in, 0);
          per = uper < per ? uper : per;
          nnz = unnz < nnz ? unnz : nnz;
        }
        frac = dim > 0 ? per / dim : 1;
      }
    }
    double slots = positions * dim;
    /* no prefix holds more than the whole result (est_all's estimate,
     * the tighter of the logical and the physical one) */
    double total = O->est[q - O->lp->q];
    if (nnz > total)
      nnz = total;
    if (slots > 0 && frac > total / slots)
      frac = total / slots;
    /* nor less than the whole result spread over the levels below, when
     * the result is no larger than an input (a projection or a masked
     * product, whose bound is tight): the uniform estimate of a product
     * of correlated patterns can be far too small (TransE's gradient
     * sum(r, t: dL/dX[a, r, t, b] * T[a, r, t]), dL/dX's pattern inside
     * T's: 13 rows of 40943 for a result of 1.27M entries, which then got
     * sorted lists, not dense).  A product that grows (A*A on a banded
     * matrix: the bound 76M, the truth 2.6M) keeps the per-level
     * estimates: its bound is loose, and a dense result of its size
     * would cost 30x the list's memory and time. */
    double rest = 1;
    for (int m = l + 1; m < n; m++)
      rest *= (double)q->indices[lv[m]].dim;
    if (slots > 0 && rest > 0 && total <= largest &&
        frac < total / (slots * rest)) {
      frac = total / (slots * rest);
      if (nnz < total / rest)
        nnz = total / rest;
    }
    int under_bytemap = l > 0 && kinds[l - 1] == GALLEY_BYTEMAP;
    if (frac > DENSE_FRACTION && slots * 8 <= budget) {
      kinds[l] = GALLEY_DENSE;
      positions = slots;
    } else if (frac > BYTEMAP_FRACTION && !under_bytemap &&
               slots * 9 <= budget && !(random & ((IdxSet)1 << lv[l]))) {
      kinds[l] = GALLEY_BYTEMAP;
      positions = slots;
    } else {
      kinds[l] = GALLEY_LIST;
      positions = nnz < slots ? nnz : slots;
    }
    P = Q;
  }
}

/* ------------------------------------------------------------------ */
/* Building the physical queries                                       */
/* ------------------------------------------------------------------ */

static galley_status internal(galley_error *err, const char *what) {
  if (err) {
    memset(err, 0, sizeof *err);
    err->status = GALLEY_EINTERNAL;
    snprintf(err->msg, sizeof err->msg, "physical optimizer: %s", what);
  }
  return GALLEY_EINTERNAL;
}

/* A copy of the logical expression with ids renumbered to loop positions
 * and aliases naming physical queries; 0 when an index is not a loop. */
static Node *lower_node(Opt *O, const Node *n, const int *pos, int nloops) {
  Node *c = arena_alloc(O->a, sizeof *c);
  *c = *n;
  c->access = 0;
  if (n->kind == ND_INPUT || n->kind == ND_ALIAS) {
    c->idx = arena_alloc(O->a, ((size_t)n->nidx + 1) * sizeof *c->idx);
    for (int k = 0; k < n->nidx; k++) {
      if (pos[n->idx[k]] >= nloops)
        return NULL;
      c->idx[k] = pos[n->idx[k]];
    }
    if (n->kind == ND_ALIAS)
      c->tensor = O->phys_of[n->tensor];
  } else if (n->kind == ND_MAP) {
    c->args = arena_alloc(O->a, ((size_t)n->nargs + 1) * sizeof *c->args);
    for (int k = 0; k < n->nargs; k++)
      if (!(c->args[k] = lower_node(O, n->args[k], pos, nloops)))
        return NULL;
  }
  return c;
}

/* The merge rule's expected fan-out of an access at a loop: its entries
 * over the loops so far and this one, per point of the loops so far (a
 * mean: the work of leading, summed over the outer points, is the
 * entries walked, not the outer points times the largest fiber, which
 * the chain bound's conditional estimate gives). */
typedef struct LeadCtx {
  const QStats *S;
  const int *order; /* loop position -> logical id */
} LeadCtx;

static double lead_cost(void *ctx, const PhysQuery *q, int access, int loop) {
  const LeadCtx *L = ctx;
  (void)q;
  if (!L->S->usable || access >= L->S->nacc)
    return 0;
  const TensorStats *s = L->S->acc_s[access];
  IdxSet prefix = 0;
  for (int d = 0; d < loop; d++)
    prefix |= (IdxSet)1 << L->order[d];
  IdxSet in = stats_indices(s);
  IdxSet ind = (prefix | (IdxSet)1 << L->order[loop]) & in;
  if (!ind)
    return 0;
  IdxSet cond = prefix & in;
  double entries = stats_estimate(&L->S->c, s, ind, 0);
  double points = cond ? stats_estimate(&L->S->c, s, cond, 0) : 1;
  return entries / (points > 1 ? points : 1);
}

static int same_double(double a, double b) {
  return a == b || (isnan(a) && isnan(b));
}

static int same_node(const Node *a, const Node *b) {
  if (a->kind != b->kind || a->nidx != b->nidx || a->access != b->access)
    return 0;
  switch (a->kind) {
  case ND_CONST:
    return same_double(a->value, b->value);
  case ND_INPUT:
  case ND_ALIAS:
    return memcmp(a->idx, b->idx, (size_t)a->nidx * sizeof *a->idx) == 0;
  case ND_MAP:
    if (a->op != b->op || a->nargs != b->nargs)
      return 0;
    for (int k = 0; k < a->nargs; k++)
      if (!same_node(a->args[k], b->args[k]))
        return 0;
    return 1;
  default:
    return 0;
  }
}

static int same_access(const PAccess *a, const PAccess *b) {
  return a->is_input == b->is_input && a->tensor == b->tensor &&
         a->order == b->order &&
         memcmp(a->level_idx, b->level_idx, (size_t)a->order * sizeof(int)) ==
             0 &&
         memcmp(a->proto, b->proto, (size_t)a->order * sizeof(Protocol)) == 0 &&
         memcmp(a->kind, b->kind,
                (size_t)a->order * sizeof(galley_level_kind)) == 0 &&
         same_double(a->fill, b->fill) && a->finite == b->finite;
}

/* Whether two kernel queries compute the same tensor the same way (the
 * canonical form: ids are loop positions, accesses resolved to the
 * tensors they read, names ignored). */
static int same_query(const PhysQuery *a, const PhysQuery *b) {
  if (a->kind != b->kind || a->nloops != b->nloops || a->nout != b->nout ||
      a->agg != b->agg || a->nred != b->nred || a->nacc != b->nacc ||
      !rt_format_same(&a->out_format, &b->out_format) ||
      !same_double(a->out_fill, b->out_fill))
    return 0;
  for (int k = 0; k < a->nloops; k++)
    if (a->indices[k].dim != b->indices[k].dim || a->merge[k] != b->merge[k])
      return 0;
  if (memcmp(a->out, b->out, (size_t)a->nout * sizeof(int)) ||
      memcmp(a->red, b->red, (size_t)a->nred * sizeof(int)))
    return 0;
  for (int k = 0; k < a->nacc; k++)
    if (!same_access(&a->acc[k], &b->acc[k]))
      return 0;
  return same_node(a->expr, b->expr);
}

/* The earlier kernel query equal to query n, or -1. */
static int find_equal(const PhysPlan *pp, int n) {
  for (int k = 0; k < n; k++)
    if (pp->q[k].kind == PQ_KERNEL && same_query(&pp->q[k], &pp->q[n]))
      return k;
  return -1;
}

/* Names may live in the logical plan's arena: the physical plan outlives
 * it, so it keeps copies. */
static const char *copy_name(Arena *a, const char *name) {
  return name ? arena_strndup(a, name, strlen(name)) : NULL;
}

/* For explain: the estimates of the queries first..number just appended
 * (the transposes the kernel `number` needs, then the kernel).  A
 * transpose stores its source's entries: an input's are known exactly. */
static void set_estimates(Opt *O, int first, int number, double est,
                          double cost) {
  PhysPlan *pp = O->b.pp;
  for (int n = first; n < number; n++) {
    PhysQuery *t = &pp->q[n];
    const PAccess *src = &t->acc[0];
    if (t->kind != PQ_TRANSPOSE)
      continue;
    t->has_est = src->is_input || pp->q[src->tensor].has_est;
    t->est_nnz = src->is_input
                     ? (double)galley_tensor_nnz(O->inputs[src->tensor])
                     : pp->q[src->tensor].est_nnz;
    t->est_cost = -1;
  }
  pp->q[number].has_est = 1;
  pp->q[number].est_nnz = est;
  pp->q[number].est_cost = cost;
}

/* Pass 3 for one query in loop order `order`; *built (when not NULL) is
 * set to the number of the physical query appended, or -1 when the
 * interleaved order cannot accumulate in place (nothing is kept). */
static galley_status build_order(Opt *O, int qi, const int *order,
                                 int check_inplace, galley_error *err) {
  const LogicalQuery *lq = &O->lp->q[qi];
  int nl = O->nloops[qi], nv = lq->nindices;
  int *pos = arena_alloc(O->a, ((size_t)nv + 1) * sizeof *pos);
  for (int k = 0; k < nv; k++)
    pos[k] = nl;
  for (int k = 0; k < nl; k++)
    pos[order[k]] = k;
  PhysQuery q = {0};
  q.kind = PQ_KERNEL;
  q.user_query = lq->user_query;
  q.nindices = q.nloops = nl;
  q.indices = arena_alloc(O->a, ((size_t)nl + 1) * sizeof *q.indices);
  q.loops = arena_alloc(O->a, ((size_t)nl + 1) * sizeof *q.loops);
  for (int k = 0; k < nl; k++) {
    q.indices[k] = lq->indices[order[k]];
    q.indices[k].name = copy_name(O->a, q.indices[k].name);
    q.loops[k] = k;
  }
  q.nout = lq->nout;
  q.out = arena_alloc(O->a, ((size_t)lq->nout + 1) * sizeof *q.out);
  for (int k = 0; k < lq->nout; k++)
    q.out[k] = pos[lq->out[k]];
  q.agg = lq->agg && lq->nred ? lq->agg : NULL;
  q.nred = q.agg ? lq->nred : 0;
  q.red = arena_alloc(O->a, ((size_t)q.nred + 1) * sizeof *q.red);
  for (int k = 0; k < q.nred; k++)
    q.red[k] = pos[lq->red[k]];
  q.expr = lower_node(O, lq->expr, pos, nl);
  if (!q.expr)
    return internal(err, "an index is neither an output nor reduced");
  /* the result: modes sorted by loop position, kinds from the estimates */
  q.out_format = galley_format_dense(lq->nout);
  int lv[GALLEY_MAX_ORDER];
  Node probe = {.kind = ND_ALIAS, .nidx = lq->nout, .idx = lq->out};
  modes_by_loop(&probe, pos, q.out_format.mode_order);
  for (int l = 0; l < lq->nout; l++)
    lv[l] = lq->out[q.out_format.mode_order[l]];
  QStats S;
  query_stats(O, qi, &S);
  choose_kinds(O, &S, lq, lv, lq->nout, scattered(lq, order, nl),
               q.out_format.kinds);
  LeadCtx L = {&S, order};
  O->b.lead_cost = lead_cost;
  O->b.lead_ctx = &L;
  int number, first = O->b.pp->nq;
  phys_builder_add_kernel(&O->b, &q,
                          lq->user_query >= 0 ? copy_name(O->a, lq->name)
                                              : NULL,
                          &number);
  O->b.lead_cost = NULL;
  O->b.lead_ctx = NULL;
  if (check_inplace && phys_inplace_problem(&O->b.pp->q[number])) {
    O->b.pp->nq = first; /* drop it and its transposes */
    return BUILD_FALLBACK;
  }
  O->phys_of[qi] = number;
  set_estimates(O, first, number, O->est[qi], lq->cost);
  int same = find_equal(O->b.pp, number);
  if (same >= 0 && number == O->b.pp->nq - 1) {
    O->b.pp->nq--;
    O->phys_of[qi] = same;
    if (O->b.pp->q[same].user_query < 0 && lq->user_query >= 0) {
      O->b.pp->q[same].user_query = lq->user_query;
      O->b.pp->q[same].name = copy_name(O->a, lq->name);
    }
  }
  return GALLEY_OK;
}

static galley_status build_query(Opt *O, int qi, galley_error *err) {
  if (O->plain[qi]) {
    galley_status st = build_order(O, qi, O->order[qi], 1, err);
    if (st != BUILD_FALLBACK)
      return st;
  }
  return build_order(O, qi, O->plain[qi] ? O->plain[qi] : O->order[qi], 0,
                     err);
}

static void set_outputs(Opt *O) {
  PhysPlan *pp = O->b.pp;
  const LogicalPlan *lp = O->lp;
  pp->noutputs = lp->noutputs;
  pp->outputs = arena_alloc(O->a, ((size_t)lp->noutputs + 1) * sizeof(int));
  pp->output_names =
      arena_alloc(O->a, ((size_t)lp->noutputs + 1) * sizeof(const char *));
  for (int k = 0; k < lp->noutputs; k++) {
    pp->outputs[k] = O->phys_of[lp->outputs[k]];
    pp->output_names[k] = copy_name(O->a, lp->output_names[k]);
  }
}

static galley_status optimize_all(Opt *O, galley_error *err) {
  int nq = O->lp->nq;
  size_t n = (size_t)nq + 1;
  O->stats_cache = O->opt->stats_cache ? O->opt->stats_cache
                                        : stats_cache_new(O->s);
  O->est = arena_alloc(O->s, n * sizeof *O->est);
  O->order = arena_alloc(O->s, n * sizeof *O->order);
  O->plain = arena_alloc(O->s, n * sizeof *O->plain);
  O->nloops = arena_alloc(O->s, n * sizeof *O->nloops);
  O->has_mo = arena_alloc(O->s, n * sizeof *O->has_mo);
  O->mo = arena_alloc(O->s, n * sizeof *O->mo);
  O->phys_of = arena_alloc(O->s, n * sizeof *O->phys_of);
  O->sampled = arena_alloc(O->s, n * sizeof *O->sampled);
  for (int qi = 0; O->sampled && qi < nq; qi++)
    O->sampled[qi] = NAN;
  estimate_all(O);
  for (int qi = nq - 1; qi >= 0; qi--)
    choose_order(O, qi);
  galley_status st = GALLEY_OK;
  for (int qi = 0; qi < nq && st == GALLEY_OK; qi++)
    st = build_query(O, qi, err);
  if (st == GALLEY_OK)
    set_outputs(O);
  return st;
}

static void optimize_guarded(Opt *O, galley_error *err, galley_status *st) {
  jmp_buf oom;
  O->a->oom = &oom;
  O->s->oom = &oom;
  if (setjmp(oom)) {
    *st = GALLEY_ENOMEM;
    return;
  }
  *st = phys_builder_init(&O->b, O->a, O->lp->prog, O->inputs, O->b.pp, err);
  O->b.assume_finite = O->opt->assume_finite;
  O->b.no_split = O->opt->no_split;
  O->b.actual_range = O->opt->actual_range;
  O->b.actual_range_known = O->opt->actual_range_known;
  if (*st == GALLEY_OK)
    *st = optimize_all(O, err);
  O->a->oom = NULL;
  O->s->oom = NULL;
}

galley_status physical_optimize(const LogicalPlan *lp,
                                const galley_tensor *const *inputs,
                                const OptOptions *opt, PhysPlan **out,
                                galley_error *err) {
  *out = NULL;
  if (err)
    memset(err, 0, sizeof *err);
  Arena *a = arena_new(), *s = arena_new();
  PhysPlan *pp = a && s ? arena_alloc(a, sizeof *pp) : NULL;
  galley_status st = GALLEY_ENOMEM;
  if (pp) {
    pp->arena = a;
    pp->prog = lp->prog;
    Opt O = {.a = a, .s = s, .lp = lp, .inputs = inputs, .opt = opt};
    O.b.pp = pp;
    optimize_guarded(&O, err, &st);
  }
  arena_free(s);
  if (st == GALLEY_ENOMEM && err) {
    err->status = GALLEY_ENOMEM;
    snprintf(err->msg, sizeof err->msg, "out of memory");
  }
  if (st != GALLEY_OK) {
    arena_free(a);
    return st;
  }
  phys_assign_widths(pp, inputs);
  *out = pp;
  return GALLEY_OK;
}
