/*
 * default.c -- the default physical planner: simple, correct, replaceable.
 *
 * It plans the trivial logical plan (logical_lift, src/logical/lift.c:
 * the bound sizes, nested aggregates lifted into queries of their own,
 * each query's index table with its outputs first, then its reduced
 * indices) query by query, in order:
 *   1. The loop order is the index table's: ids ARE the loop positions.
 *      A loop order is then just 0..nloops-1, and "an access's levels
 *      follow the loop order" is "its level_idx are non-decreasing".
 *   2. Number the accesses (left to right) and take each one's level
 *      indices from the storage mode order of the tensor it reads.  An
 *      access whose levels are out of loop order reads instead a
 *      PQ_TRANSPOSE query that copies the tensor into a mode order that
 *      follows the loops (shared by every access that needs the same
 *      copy), unless the tensor is a symmetric matrix.
 *   3. Per loop d choose the merge (the execution model of phys.h): with
 *      S_d the accesses that have loop d at their next level, a member
 *      whose sole absence makes the expression constant is a conjunct;
 *      the sparsest conjunct leads (MERGE_LEAD), or sorted lists of
 *      similar lengths are intersected (MERGE_INTERSECT), else, when all
 *      of S_d absent gives a constant, MERGE_UNION, else MERGE_DENSE;
 *      then a marked intersection where one qualifies (MERGE_MARK).
 *   4. Dense output in identity mode order; the fill as refeval_fill.
 * A lifted query is named "_t<N>" after its place N in the plan.
 *
 * The physical optimizer (optimize.c) shares steps 2-4 through the
 * PhysBuilder.  Everything lives in the plan's arena; running out of
 * memory longjmps to the single catch in default_plan (style.md rule 5).
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "logical.h"
#include "rt_internal.h"

/* Factors of one query that exception splitting may take apart. */
#define GALLEY_SPLIT_MAX 16

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

typedef struct Planner {
  Arena *a;
  const Program *p;
  const galley_tensor *const *inputs;
  galley_error *err;
  PhysPlan *pp;
  int cap;                            /* room in pp->q */
  const LogicalPlan *lp;              /* the lifted plan being planned */
  int *phys_of;                       /* logical query -> physical query */
  unsigned char *input_finite;        /* per input: stored values finite */
  Range *input_range;                 /* per input: its values, coarse */
  Range *input_stored;                /* per input: the values it reads at
                                         every coordinate -- without the
                                         fill when it stores a non-fill
                                         value at each (sure_entries) */
  unsigned char *input_split_ok;      /* per input: splittable exceptions */
  int no_split;                       /* PhysBuilder.no_split */
  const Node *split_nodes[GALLEY_SPLIT_MAX]; /* the query being planned:
                                         the factors read split */
  int nsplit_nodes;
  signed char *input_symmetric;       /* per input: phys_matrix_symmetry,
                                         -1 until asked */
  int assume_finite;                  /* PhysBuilder.assume_finite */
  const Range *actual_range;          /* PhysBuilder.actual_range */
  const unsigned char *actual_range_known;
  /* the leader rule (PhysBuilder.lead_cost); NULL: fewest stored */
  double (*lead_cost)(void *ctx, const PhysQuery *q, int access, int loop);
  void *lead_ctx;
} Planner;

/* ------------------------------------------------------------------ */
/* Physical queries                                                    */
/* ------------------------------------------------------------------ */

/* A new, zeroed physical query at the end of the plan. */
static int push_query(Planner *P) {
  PhysPlan *pp = P->pp;
  if (pp->nq == P->cap) {
    int cap = P->cap ? 2 * P->cap : 8;
    PhysQuery *q = arena_alloc(P->a, (size_t)cap * sizeof *q);
    if (pp->nq)
      memcpy(q, pp->q, (size_t)pp->nq * sizeof *q);
    pp->q = q;
    P->cap = cap;
  }
  return pp->nq++;
}

/* The storage format of the tensor an access reads. */
static galley_format access_format(const Planner *P, int is_input, int t) {
  galley_format f;
  if (is_input)
    phys_input_format(P->inputs[t], &f);
  else
    f = P->pp->q[t].out_format;
  return f;
}

/* Stored entries of a tensor: exact for inputs (and their transposed
 * copies), the dense size as an upper bound for intermediates. */
static double tensor_stored(const Planner *P, int is_input, int t) {
  if (is_input)
    return (double)galley_tensor_stored(P->inputs[t]);
  const PhysQuery *q = &P->pp->q[t];
  if (q->kind == PQ_TRANSPOSE)
    return tensor_stored(P, q->acc[0].is_input, q->acc[0].tensor);
  double n = 1;
  for (int k = 0; k < q->nout; k++)
    n *= (double)q->indices[q->out[k]].dim;
  return n;
}

/* ------------------------------------------------------------------ */
/* Accesses and transposes                                             */
/* ------------------------------------------------------------------ */

static int count_accesses(const Node *n) {
  if (n->kind == ND_INPUT || n->kind == ND_ALIAS)
    return 1;
  int c = 0;
  if (n->kind == ND_MAP)
    for (int k = 0; k < n->nargs; k++)
      c += count_accesses(n->args[k]);
  return c;
}

/* level_idx of access node n reading a tensor stored in format f. */
static void set_levels(PAccess *acc, const Node *n, const galley_format *f) {
  acc->order = n->nidx;
  for (int l = 0; l < n->nidx; l++) {
    acc->level_idx[l] = n->idx[f->mode_order[l]];
    acc->kind[l] = f->kinds[l];
  }
}

/* Whether the levels follow the loop order (ids are loop positions). */
static int levels_in_order(const PAccess *acc) {
  for (int l = 1; l < acc->order; l++)
    if (acc->level_idx[l] < acc->level_idx[l - 1])
      return 0;
  return 1;
}

/* The physical query copying (is_input, t) into mode order `mo` (an
 * existing one when some access already needed the same copy). */
static int find_or_add_transpose(Planner *P, const PhysQuery *user,
                                 const Node *n, const PAccess *src,
                                 const int *mo) {
  PhysPlan *pp = P->pp;
  for (int k = 0; k < pp->nq; k++) {
    const PhysQuery *t = &pp->q[k];
    if (t->kind == PQ_TRANSPOSE && t->acc[0].is_input == src->is_input &&
        t->acc[0].tensor == src->tensor && t->acc[0].split == src->split &&
        memcmp(t->out_format.mode_order, mo, (size_t)n->nidx * sizeof *mo) ==
            0)
      return k;
  }
  int number = push_query(P);
  PhysQuery *t = &pp->q[number];
  Arena *a = P->a;
  t->kind = PQ_TRANSPOSE;
  t->name = arena_printf(a, "_t%d", number);
  t->user_query = -1;
  /* its indices: the access's distinct indices, named as there */
  int ids[GALLEY_MAX_ORDER], nids = 0;
  t->out = arena_alloc(a, ((size_t)n->nidx + 1) * sizeof *t->out);
  for (int k = 0; k < n->nidx; k++) {
    int m = 0;
    while (m < nids && ids[m] != n->idx[k])
      m++;
    if (m == nids)
      ids[nids++] = n->idx[k];
    t->out[k] = m;
  }
  t->nout = n->nidx;
  t->nindices = nids;
  t->indices = arena_alloc(a, ((size_t)nids + 1) * sizeof *t->indices);
  for (int m = 0; m < nids; m++)
    t->indices[m] = user->indices[ids[m]];
  t->out_format = galley_format_default(n->nidx);
  memcpy(t->out_format.mode_order, mo, (size_t)n->nidx * sizeof *mo);
  /* an all-dense source stays all dense: a list copy would turn every
   * O(1) lookup of it into a search */
  galley_format sf = access_format(P, src->is_input, src->tensor);
  int all_dense = 1;
  for (int l = 0; l < n->nidx; l++)
    all_dense &= sf.kinds[l] == GALLEY_DENSE;
  if (all_dense)
    for (int l = 0; l < n->nidx; l++)
      t->out_format.kinds[l] = GALLEY_DENSE;
  Node *e = arena_alloc(a, sizeof *e);
  *e = (Node){.kind = src->is_input ? ND_INPUT : ND_ALIAS, .loc = n->loc,
              .nidx = n->nidx, .idx = arena_ints(a, n->nidx, t->out),
              .tensor = src->tensor, .access = 0};
  t->expr = e;
  t->nacc = 1;
  t->acc = arena_alloc(a, sizeof *t->acc);
  t->acc[0] = *src;
  set_levels(&t->acc[0], e, &sf);
  for (int l = 0; l < n->nidx; l++)
    t->acc[0].proto[l] = PROTO_ITERATE;
  t->out_fill = src->fill;
  t->finite = src->finite;
  t->range = src->range;
  return number;
}

/* Modes of access n sorted by the loop position of their index (stably:
 * a repeated index keeps its modes in order, on consecutive levels). */
static void loop_mode_order(const Node *n, int *mo) {
  for (int m = 0; m < n->nidx; m++)
    mo[m] = m;
  for (int i = 1; i < n->nidx; i++)
    for (int j = i; j > 0 && n->idx[mo[j - 1]] > n->idx[mo[j]]; j--) {
      int t = mo[j];
      mo[j] = mo[j - 1];
      mo[j - 1] = t;
    }
}

static int input_symmetric(void *ctx, int k);

/* Whether node n is a factor the query being planned reads split. */
static int split_node(const Planner *P, const Node *n) {
  for (int k = 0; k < P->nsplit_nodes; k++)
    if (P->split_nodes[k] == n)
      return 1;
  return 0;
}

/* Number access nodes left to right and set their PAccess; accesses out
 * of loop order are redirected to transposed copies (appended to the
 * plan before q, whose number is not taken yet). */
static void set_accesses(Planner *P, PhysQuery *q, Node *n) {
  if (n->kind == ND_MAP) {
    for (int k = 0; k < n->nargs; k++)
      set_accesses(P, q, n->args[k]);
    return;
  }
  if (n->kind != ND_INPUT && n->kind != ND_ALIAS)
    return;
  PAccess *acc = &q->acc[q->nacc];
  n->access = q->nacc++;
  acc->is_input = n->kind == ND_INPUT;
  acc->tensor = n->tensor;
  acc->fill = acc->is_input ? bind_input_fill(P->p, P->inputs, n->tensor)
                            : P->pp->q[n->tensor].out_fill;
  acc->finite = acc->is_input ? P->input_finite[n->tensor]
                              : P->pp->q[n->tensor].finite;
  acc->range = acc->is_input ? P->input_range[n->tensor]
                             : P->pp->q[n->tensor].range;
  acc->has_range = 1;
  if (acc->is_input && split_node(P, n)) {
    /* the kernel reads the finite part: the values without the
     * exceptions, which read 0 (the correction pass adds their terms) */
    acc->split = 1;
    acc->split_input = n->tensor;
    acc->finite = 1;
    acc->range.nan = acc->range.pinf = acc->range.ninf = 0;
    acc->range = range_join(acc->range, range_point(0));
  } else if (!acc->is_input && P->pp->q[n->tensor].kind == PQ_TRANSPOSE &&
             P->pp->q[n->tensor].acc[0].split) {
    acc->split = 1; /* (set_accesses runs once per node) */
    acc->split_input = P->pp->q[n->tensor].acc[0].split_input;
  }
  galley_format f = access_format(P, acc->is_input, acc->tensor);
  set_levels(acc, n, &f);
  if (levels_in_order(acc))
    return;
  if (acc->is_input && n->nidx == 2 && input_symmetric(P, n->tensor)) {
    /* a symmetric matrix is its own transpose: read E[j,i] as E[i,j] */
    int t = n->idx[0];
    n->idx[0] = n->idx[1];
    n->idx[1] = t;
    set_levels(acc, n, &f);
    if (levels_in_order(acc))
      return;
    n->idx[1] = n->idx[0];
    n->idx[0] = t;
    set_levels(acc, n, &f);
  }
  int mo[GALLEY_MAX_ORDER];
  loop_mode_order(n, mo);
  int t = find_or_add_transpose(P, q, n, acc, mo);
  n->kind = ND_ALIAS;
  n->tensor = t;
  acc->is_input = 0;
  acc->tensor = t;
  f = P->pp->q[t].out_format;
  set_levels(acc, n, &f);
}

/* ------------------------------------------------------------------ */
/* Merges and protocols                                                */
/* ------------------------------------------------------------------ */

/* The first storage level of acc reading loop d, or -1. */
static int level_of_loop(const PAccess *acc, int d) {
  for (int l = 0; l < acc->order; l++)
    if (acc->level_idx[l] == d)
      return l;
  return -1;
}

static galley_level_kind level_kind(const Planner *P, const PAccess *acc,
                                    int l) {
  galley_format f = access_format(P, acc->is_input, acc->tensor);
  return f.kinds[l];
}

/* The conjunct that should lead loop d, or -1: fewest stored entries,
 * a sparse level before any dense one, ties to the first access. */
static int choose_leader(const Planner *P, const PhysQuery *q, int d,
                         const int *lvl, unsigned char *absent) {
  int best = -1, best_sparse = 0;
  double best_stored = 0;
  for (int k = 0; k < q->nacc; k++) {
    if (lvl[k] < 0)
      continue;
    double v;
    absent[k] = 1;
    int conjunct = phys_absent_value(q, q->expr, absent, &v);
    absent[k] = 0;
    if (!conjunct)
      continue;
    const PAccess *acc = &q->acc[k];
    int sparse = level_kind(P, acc, lvl[k]) != GALLEY_DENSE;
    double stored = P->lead_cost ? P->lead_cost(P->lead_ctx, q, k, d)
                                 : tensor_stored(P, acc->is_input, acc->tensor);
    if (best < 0 || sparse > best_sparse ||
        (sparse == best_sparse && stored < best_stored)) {
      best = k;
      best_sparse = sparse;
      best_stored = stored;
    }
  }
  return best;
}

/* The mean length of access k's fibers at level l (stored entries over
 * the product of the sizes of the levels above). */
static double mean_fiber(const Planner *P, const PhysQuery *q, int k, int l) {
  const PAccess *acc = &q->acc[k];
  double fibers = 1;
  for (int m = 0; m < l; m++)
    fibers *= (double)q->indices[acc->level_idx[m]].dim;
  return tensor_stored(P, acc->is_input, acc->tensor) / (fibers > 0 ? fibers : 1);
}

/* The stored entries of tensor t at its levels below `levels` when it
 * is known: an input's or its transpose's; a result written on the
 * pattern of an access (PhysQuery.pattern: its first levels are the
 * access's), that access's tensor's when `levels` are among the copied
 * ones; else -1 (tensor_stored's dense bound is all there is). */
static double pattern_stored(const Planner *P, int is_input, int t,
                             int levels) {
  if (is_input)
    return (double)galley_tensor_stored(P->inputs[t]);
  const PhysQuery *q = &P->pp->q[t];
  if (q->kind == PQ_TRANSPOSE)
    return tensor_stored(P, 0, t);
  if (q->kind != PQ_KERNEL || q->pattern < 0 ||
      levels > q->acc[q->pattern].order)
    return -1;
  const PAccess *src = &q->acc[q->pattern];
  return pattern_stored(P, src->is_input, src->tensor, levels);
}

/* The mean fiber of access k at level l: mean_fiber, but for a result
 * written on another tensor's pattern, whose stored size here would be
 * the dense bound, the pattern's stored entries: with the dense bound,
 * TransE's X[h, r, t, d] and dL/dS[h, r, t], both on T's pattern, had
 * lists 10^4 times longer than T's, and the gradient's products looked
 * them up entry by entry along T instead of intersecting the three. */
static double access_fiber(const Planner *P, const PhysQuery *q, int k,
                           int l) {
  const PAccess *acc = &q->acc[k];
  double stored = acc->is_input ? -1
                                : pattern_stored(P, 0, acc->tensor, l + 1);
  if (stored < 0)
    return mean_fiber(P, q, k, l);
  double fibers = 1;
  for (int m = 0; m < l; m++)
    fibers *= (double)q->indices[acc->level_idx[m]].dim;
  return stored / (fibers > 0 ? fibers : 1);
}

/* Two-finger merging pays off over galloping lookups while the lists are
 * of similar length; past this ratio the shortest leads and the others
 * gallop. */
#define INTERSECT_MAX_RATIO 32.0

/* With `leader` leading loop d: mark in it[] the sorted-list conjuncts to
 * intersect with it (it[leader] included), and return how many, when a
 * merge intersection suits them better than lookups; 0 otherwise. */
static int choose_intersection(const Planner *P, const PhysQuery *q, int d,
                               int leader, const int *lvl,
                               unsigned char *absent, unsigned char *it) {
  if (level_kind(P, &q->acc[leader], lvl[leader]) != GALLEY_LIST)
    return 0;
  double c, v, lo = access_fiber(P, q, leader, lvl[leader]), hi = lo;
  absent[leader] = 1;
  phys_absent_value(q, q->expr, absent, &c);
  absent[leader] = 0;
  int n = 0;
  for (int k = 0; k < q->nacc; k++) {
    it[k] = k == leader;
    if (k == leader || lvl[k] < 0 ||
        level_kind(P, &q->acc[k], lvl[k]) != GALLEY_LIST ||
        (lvl[k] + 1 < q->acc[k].order && q->acc[k].level_idx[lvl[k] + 1] == d))
      continue; /* dense, hashed, or a repeated index */
    absent[k] = 1;
    int conjunct = phys_absent_value(q, q->expr, absent, &v) &&
                   ((isnan(c) && isnan(v)) || c == v);
    absent[k] = 0;
    if (!conjunct)
      continue;
    double f = access_fiber(P, q, k, lvl[k]);
    lo = f < lo ? f : lo;
    hi = f > hi ? f : hi;
    it[k] = 1;
    n++;
  }
  return n > 0 && hi <= INTERSECT_MAX_RATIO * (lo > 1 ? lo : 1) ? n + 1 : 0;
}

/* Merge of loop d and the protocols of the levels it resolves. */
static void plan_loop(Planner *P, PhysQuery *q, int d, int *lvl,
                      unsigned char *absent) {
  int members = 0;
  for (int k = 0; k < q->nacc; k++) {
    lvl[k] = level_of_loop(&q->acc[k], d);
    members += lvl[k] >= 0;
  }
  int leader = members ? choose_leader(P, q, d, lvl, absent) : -1;
  unsigned char *it = arena_alloc(P->a, (size_t)q->nacc + 1);
  Merge m = MERGE_DENSE;
  if (leader >= 0) {
    m = choose_intersection(P, q, d, leader, lvl, absent, it) ? MERGE_INTERSECT
                                                              : MERGE_LEAD;
  } else if (members) {
    double v;
    for (int k = 0; k < q->nacc; k++)
      absent[k] = lvl[k] >= 0;
    if (phys_absent_value(q, q->expr, absent, &v))
      m = MERGE_UNION;
    memset(absent, 0, (size_t)q->nacc);
  }
  q->merge[d] = m;
  for (int k = 0; k < q->nacc; k++) {
    if (lvl[k] < 0)
      continue;
    PAccess *acc = &q->acc[k];
    int iterates = m == MERGE_UNION || (m == MERGE_LEAD && k == leader) ||
                   (m == MERGE_INTERSECT && it[k]);
    acc->proto[lvl[k]] = iterates ? PROTO_ITERATE : PROTO_LOOKUP;
    /* a repeated index: the next levels locate the same coordinate */
    for (int l = lvl[k] + 1; l < acc->order && acc->level_idx[l] == d; l++)
      acc->proto[l] = PROTO_LOOKUP;
  }
}

/* ------------------------------------------------------------------ */
/* Marked intersections (MERGE_MARK)                                   */
/* ------------------------------------------------------------------ */

/* Tables of more coordinates than this are not made: the kernel's table
 * is a dense array of doubles per thread. */
#define PHYS_MARK_MAX ((int64_t)1 << 22)

/* The depth of the innermost loop over the indices of access x's levels
 * above l (what fixes its fiber at level l), -1 when none does. */
static int fiber_depth(const PhysQuery *q, int x, int l) {
  int depth = -1;
  for (int m = 0; m < l; m++)
    for (int d = 0; d < q->nloops; d++)
      if (q->loops[d] == q->acc[x].level_idx[m] && d > depth)
        depth = d;
  return depth;
}

/* Whether access x resolves loop d at exactly one sorted-list level that
 * it walks or looks up; *l its level. */
static int one_list_level(const PhysQuery *q, int x, int d, int *l) {
  int l0, l1;
  phys_loop_levels(q, x, d, &l0, &l1);
  *l = l0;
  return l1 == l0 + 1 && q->acc[x].kind[l0] == GALLEY_LIST &&
         q->acc[x].proto[l0] != PROTO_MARK;
}

/* Whether access x's fiber at loop d can be scattered into a table once
 * per point of a loop at depth <= d - 2: its last level, fill +0 (the
 * table's absent value), fixed early enough. */
static int markable(const PhysQuery *q, int x, int d) {
  int l;
  const PAccess *A = &q->acc[x];
  return one_list_level(q, x, d, &l) && l + 1 == A->order && A->fill == 0 &&
         !signbit(A->fill) && fiber_depth(q, x, l) <= d - 2;
}

double phys_list_lookup_cost(double fiber) {
  return 1 + PHYS_LIST_STEP * log2(1 + fiber);
}

double phys_intersect_cost(double a, double b) {
  double lo = a < b ? a : b, hi = a < b ? b : a;
  double gallop = lo * phys_list_lookup_cost(hi / (lo > 1 ? lo : 1));
  return a + b < gallop ? a + b : gallop;
}

double phys_mark_cost(double marked, double walked, double reuse) {
  return walked * (1 + PHYS_MARK_PROBE) +
         PHYS_MARK_FILL * marked / (reuse > 1 ? reuse : 1);
}

/* The points loop e visits per point of the loops outside it: the
 * length of the fiber it walks (the shortest of an intersection, the
 * longest of a union), its dimension when dense; 0 when unknown. */
static double loop_points(const PhysQuery *q, int e, MarkFiber fiber,
                          void *ctx) {
  double points = -1;
  for (int x = 0; x < q->nacc; x++) {
    int l0, l1;
    phys_loop_levels(q, x, e, &l0, &l1);
    if (l0 == l1 || q->acc[x].proto[l0] != PROTO_ITERATE)
      continue;
    double f = q->acc[x].kind[l0] == GALLEY_DENSE
                   ? (double)q->indices[q->loops[e]].dim
                   : fiber(ctx, q, x, l0);
    if (points < 0 || (q->merge[e] == MERGE_UNION ? f > points : f < points))
      points = f;
  }
  return points < 0 ? (double)q->indices[q->loops[e]].dim : points;
}

/* Whether marking access x (at level lx) and walking y (at ly) at loop d
 * costs less than the merge plan_loop chose (an intersection, or a lead
 * with lookups); unknown lengths never mark. */
static int mark_pays(const PhysQuery *q, int d, int x, int lx, int y, int ly,
                     MarkFiber fiber, void *ctx) {
  if (!fiber)
    return 0;
  double fx = fiber(ctx, q, x, lx), fy = fiber(ctx, q, y, ly), reuse = 1;
  if (!(fx > 0))
    return 0;
  if (!(fy > 0))
    fy = fx; /* a result's lengths are not known here: as the marked */
  for (int e = fiber_depth(q, x, lx) + 1; e < d; e++)
    reuse *= loop_points(q, e, fiber, ctx);
  if (!(reuse > 0))
    return 0;
  double merge;
  if (q->merge[d] == MERGE_INTERSECT)
    merge = phys_intersect_cost(fx, fy);
  else if (q->acc[x].proto[lx] == PROTO_ITERATE) /* x leads, y looked up */
    merge = fx * phys_list_lookup_cost(fy);
  else
    merge = fy * phys_list_lookup_cost(fx);
  return phys_mark_cost(fx, fy, reuse) < merge;
}

/* The constant of q's expression when access x alone is absent; 0 when
 * it is not a conjunct.  absent[] is all 0 (room for q->nacc). */
static int conjunct_const(const PhysQuery *q, int x, unsigned char *absent,
                          double *c) {
  absent[x] = 1;
  int ok = phys_absent_value(q, q->expr, absent, c);
  absent[x] = 0;
  return ok;
}

/* Whether the terms of a marked loop d at the table's zeros may be added
 * instead of skipped: the innermost loop, summed by + from +0 into a
 * register accumulator (every loop before it that is reduced comes after
 * the outputs), each such term +-0.  A sum that starts at +0 never
 * becomes -0 (x + y is -0 only when both are), and x + +-0 is x for every
 * other x: the result is bitwise the skipping loop's. */
static int mark_may_sum(const PhysQuery *q, int d, const Op *plus, double c) {
  const Op *agg = q->agg;
  return plus && agg == plus && d == q->nloops - 1 &&
         phys_is_reduced(q, q->loops[d]) && !phys_interleaved(q) &&
         (agg->props & OP_HAS_IDENTITY) && agg->identity == 0 &&
         agg->agg_init == 0 && !signbit(agg->agg_init) && c == 0;
}

/* Loop d as MERGE_MARK when it qualifies (phys.h); 1 when it does. */
static int try_mark(PhysQuery *q, int d, const Op *plus,
                    unsigned char *absent, MarkFiber fiber, void *ctx) {
  if ((q->merge[d] != MERGE_INTERSECT && q->merge[d] != MERGE_LEAD) ||
      q->indices[q->loops[d]].dim > PHYS_MARK_MAX)
    return 0;
  int xs[2], n = 0;
  for (int x = 0; x < q->nacc; x++) {
    int l0, l1;
    phys_loop_levels(q, x, d, &l0, &l1);
    if (l0 == l1)
      continue;
    if (n == 2)
      return 0;
    xs[n++] = x;
  }
  int l[2];
  if (n != 2 || !one_list_level(q, xs[0], d, &l[0]) ||
      !one_list_level(q, xs[1], d, &l[1]))
    return 0;
  double c0, c1;
  if (!conjunct_const(q, xs[0], absent, &c0) ||
      !conjunct_const(q, xs[1], absent, &c1) ||
      !(c0 == c1 || (isnan(c0) && isnan(c1))))
    return 0;
  /* mark the fiber fixed furthest out: its table serves the most walks */
  int m = -1;
  for (int k = 0; k < 2; k++)
    if (markable(q, xs[k], d) &&
        (m < 0 || fiber_depth(q, xs[k], l[k]) < fiber_depth(q, xs[m], l[m])))
      m = k;
  if (m < 0 || !mark_pays(q, d, xs[m], l[m], xs[1 - m], l[1 - m], fiber, ctx))
    return 0;
  int x = xs[m], y = xs[1 - m];
  q->merge[d] = MERGE_MARK;
  q->acc[y].proto[l[1 - m]] = PROTO_ITERATE;
  q->acc[x].proto[l[m]] = PROTO_MARK;
  q->mark[d] = x;
  q->mark_sum = mark_may_sum(q, d, plus, c0);
  return 1;
}

void phys_choose_marks(Arena *a, PhysQuery *q, const Op *plus,
                       MarkFiber fiber, void *ctx) {
  q->mark = NULL;
  q->mark_sum = 0;
  if (q->nloops < 3)
    return;
  int *mark = arena_alloc(a, (size_t)q->nloops * sizeof *mark);
  unsigned char *absent = arena_alloc(a, (size_t)q->nacc + 1);
  memset(absent, 0, (size_t)q->nacc + 1);
  for (int d = 0; d < q->nloops; d++)
    mark[d] = -1;
  q->mark = mark;
  /* the innermost loop that qualifies: it runs the most often */
  int done = 0;
  for (int d = q->nloops - 1; d >= 2 && !done; d--)
    done = try_mark(q, d, plus, absent, fiber, ctx);
  if (!done)
    q->mark = NULL;
}

int phys_mark_loop(const PhysQuery *q) {
  for (int d = 0; q->mark && d < q->nloops; d++)
    if (q->merge[d] == MERGE_MARK)
      return d;
  return -1;
}

int phys_mark_scatter_depth(const PhysQuery *q) {
  int d = phys_mark_loop(q);
  if (d < 0)
    return -1;
  int x = q->mark[d], l0, l1;
  phys_loop_levels(q, x, d, &l0, &l1);
  return fiber_depth(q, x, l0);
}

/* ------------------------------------------------------------------ */
/* Fills                                                               */
/* ------------------------------------------------------------------ */

/* The expression's value when every access reads its fill. */
/* The fill an access of q's expression reads: its access's. */
static double access_fill(const void *ctx, const Node *n) {
  const PhysQuery *q = ctx;
  return q->acc[n->access].fill;
}

static double query_fill(const PhysQuery *q) {
  double v = ops_expr_fill(q->expr, access_fill, q);
  if (!q->agg)
    return v;
  double count = 1;
  for (int k = 0; k < q->nred; k++)
    count *= (double)q->indices[q->red[k]].dim;
  return ops_fold_aggregate(q->agg, v, count);
}

/* ------------------------------------------------------------------ */
/* One physical query                                                  */
/* ------------------------------------------------------------------ */

/* Plan a kernel query computing agg over red of expr (program ids) with
 * output indices out; name NULL means "_t<N>".  Transposes it needs come
 * first; *number is its place in the plan. */
/* Whether a query's results are all finite: its expression is, its fill
 * is, and its aggregate keeps finite values finite (the built-in sum,
 * prod, max, min, any, all -- up to overflow). */
static int query_finite(const PhysQuery *q) {
  return range_finite(q->range);
}

/* q's range with the full inputs: a split access counts with the
 * exceptions it left to the correction pass. */
static Range full_query_range(const Planner *P, PhysQuery *q) {
  Range *saved = malloc(((size_t)q->nacc + 1) * sizeof *saved);
  if (!saved)
    return range_top();
  for (int k = 0; k < q->nacc; k++) {
    saved[k] = q->acc[k].range;
    if (q->acc[k].split)
      q->acc[k].range = P->input_range[q->acc[k].split_input];
  }
  Range r = phys_query_range(q);
  for (int k = 0; k < q->nacc; k++)
    q->acc[k].range = saved[k];
  free(saved);
  return r;
}

/* ---- exception splitting: which queries, which factors ---- */

/* Correction work allowed per split query: points visited. */
#define SPLIT_MAX_WORK ((double)(1 << 26))

/* The factors of e's top-level product (nested built-in `*` flattened)
 * into f[0..max); their number, or -1 when there are more. */
static int product_factors(Node *e, Node **f, int n, int max) {
  if (e->kind == ND_MAP && e->op->is_builtin && strcmp(e->op->name, "*") == 0) {
    for (int k = 0; k < e->nargs && n >= 0; k++)
      n = product_factors(e->args[k], f, n, max);
    return n;
  }
  if (n < 0 || n >= max)
    return -1;
  f[n] = e;
  return n + 1;
}

/* A node's range before accesses are set: inputs by their facts,
 * earlier queries by their ranges. */
static Range planner_leaf(void *ctx, const Node *n) {
  const Planner *P = ctx;
  if (n->kind == ND_INPUT)
    return P->input_range[n->tensor];
  if (n->kind == ND_ALIAS)
    return P->pp->q[n->tensor].range;
  return range_top();
}

/* Decide whether q splits the exceptions of its inputs out (issue 12),
 * setting P->split_nodes.  Sound shapes only: q sums (or only maps) a
 * product; every factor is either an input with a few non-finite values
 * (split: the kernel reads its finite part) or of finite range, so that
 * the finite part's terms holding a split-out entry are exactly 0; and
 * the correction's work (per split entry, the extents of the indices
 * the factor does not bind) stays small. */
/* Whether input k stores inf or NaN values (that exception splitting
 * would take out). */
static int split_input_holds_exceptions(const Planner *P, int k) {
  if (!P->inputs || k < 0 || k >= P->p->ninputs || !P->inputs[k])
    return 0;
  galley_facts facts;
  rt_tensor_facts(P->inputs[k], &facts);
  return facts.nan + facts.pos_inf + facts.neg_inf > 0;
}

static void choose_split(Planner *P, PhysQuery *q) {
  P->nsplit_nodes = 0;
  if (P->no_split || q->upper || !P->input_split_ok ||
      (q->agg && !(q->agg->is_builtin && strcmp(q->agg->name, "+") == 0)))
    return;
  Node *f[GALLEY_SPLIT_MAX];
  int nf = product_factors(q->expr, f, 0, GALLEY_SPLIT_MAX);
  if (nf < 2)
    return;
  double work = 0;
  int nsplit = 0;
  const Node *split[GALLEY_SPLIT_MAX];
  for (int k = 0; k < nf; k++) {
    if (f[k]->kind == ND_INPUT && P->input_split_ok[f[k]->tensor]) {
      galley_facts facts;
      rt_tensor_facts(P->inputs[f[k]->tensor], &facts);
      double free_extent = 1;
      for (int id = 0; id < q->nindices; id++) {
        int bound = 0;
        for (int m = 0; m < f[k]->nidx; m++)
          bound |= f[k]->idx[m] == id;
        if (!bound)
          free_extent *= (double)q->indices[id].dim;
      }
      work += (double)(facts.nan + facts.pos_inf + facts.neg_inf) *
              free_extent;
      split[nsplit++] = f[k];
    } else if (!range_finite(ops_range_expr(f[k], planner_leaf, P))) {
      return;
    }
  }
  if (nsplit == 0 || work > SPLIT_MAX_WORK)
    return;
  /* an input the logical planner distributed into the sum
   * (split_inline) is the one split: the correction then multiplies
   * its exception by the sum of the rest (exceptions.c) */
  if (q->split_factored)
    q->split_factored = nsplit == 1 && split[0]->kind == ND_INPUT &&
                        split[0]->tensor == q->split_factored - 1;
  for (int k = 0; k < nsplit; k++)
    P->split_nodes[k] = split[k];
  P->nsplit_nodes = nsplit;
}


/* Accesses (and the transposes they need, appended first), merges,
 * fill and finiteness of q, whose index ids are loop positions and whose
 * out_format is set; then q joins the plan as *number. */
/* phys_matrix_symmetry of input k (checked once per plan, only for
 * matrices a symmetric sum or a transpose would read). */
static int input_symmetric(void *ctx, int k) {
  Planner *P = ctx;
  if (!P->input_symmetric) {
    P->input_symmetric = arena_alloc(P->a, (size_t)P->p->ninputs + 1);
    memset(P->input_symmetric, -1, (size_t)P->p->ninputs + 1);
  }
  if (P->input_symmetric[k] < 0) {
    int s = phys_matrix_symmetry(P->inputs[k]);
    /* a declared fill wins over the tensor's (tin(5)): hollow needs the
     * fill that is read to be 0, not the one stored with the tensor */
    if (bind_input_fill(P->p, P->inputs, k) != 0)
      s &= ~PHYS_HOLLOW;
    P->input_symmetric[k] = (signed char)s;
  }
  return P->input_symmetric[k];
}

/* An input's values at every coordinate (input_stored), an earlier
 * query's range. */
static Range stored_leaf(void *ctx, const Node *n) {
  const Planner *P = ctx;
  if (n->kind == ND_INPUT)
    return P->input_stored[n->tensor];
  return planner_leaf(ctx, n);
}

/* The entries q's result stores for sure (issue 17: a result that cannot
 * fit is refused before it runs, phys_peak_memory): every point when
 * dense loops visit them all and no value the expression takes there
 * can be the fill -- x[i] + y[j] over two vectors that store every
 * entry, of positive values -- or every output point of a built-in
 * aggregate whose value cannot be the fill (sum(k: U V) of full
 * positive factors); else 0 (not known). */
static double sure_entries(const Planner *P, const PhysQuery *q) {
  if (!P->input_stored || q->upper || q->nout == 0 ||
      (q->agg && !q->agg->is_builtin))
    return 0;
  Range r = ops_range_expr(q->expr, stored_leaf, (void *)P);
  if (q->agg) {
    /* a sum over inputs that store every point, of values that cannot
     * make the fill (the dense U V^T of positive factors, with an inf
     * in U: issue 12's SDDMM that ran for minutes): every output point
     * of the dense meaning is stored, whatever the loops skip (split
     * or not: the ranges are the full inputs') */
    double count = 1;
    for (int k = 0; k < q->nred; k++)
      count *= (double)q->indices[q->red[k]].dim;
    r = ops_range_aggregate(q->agg, r, count);
  } else {
    if (q->split)
      return 0;
    for (int d = 0; d < q->nloops; d++)
      if (q->merge[d] != MERGE_DENSE)
        return 0;
  }
  if (range_contains(r, range_point(q->out_fill)))
    return 0;
  double points = 1;
  for (int k = 0; k < q->nout; k++)
    points *= (double)q->indices[q->out[k]].dim;
  return points;
}

/* The size-biased mean length of level l's fibers of bound tensor t
 * (sum of squared lengths over their sum: the length the fiber of a
 * random stored entry has -- what a marked table serves, hubs counted as
 * often as they are met), from at most 4096 fibers evenly spaced. */
static double biased_fiber(const galley_tensor *t, int l) {
  const galley_level *L = &t->lvl[l];
  if (L->kind != GALLEY_RT_LIST || L->npar < 1)
    return 0;
  int64_t step = L->npar > 4096 ? L->npar / 4096 : 1;
  double sum = 0, squares = 0;
  for (int64_t p = 0; p < L->npar; p += step) {
    double d = (double)(galley_rt_pos(L, p + 1) - galley_rt_pos(L, p));
    sum += d;
    squares += d * d;
  }
  return sum > 0 ? squares / sum : 0;
}

/* MarkFiber for phys_choose_marks: a bound input's fibers by their
 * biased mean; a transposed input's by their plain mean (a lower bound
 * of the biased one, which would need a pass over its coordinates);
 * other results' are unknown here: 0. */
static double marked_fiber(void *ctx, const PhysQuery *q, int x, int l) {
  const Planner *P = ctx;
  const PAccess *A = &q->acc[x];
  if (A->is_input)
    return biased_fiber(P->inputs[A->tensor], l);
  const PhysQuery *t = &P->pp->q[A->tensor];
  if (t->kind != PQ_TRANSPOSE || !t->acc[0].is_input)
    return 0;
  double fibers = 1;
  for (int m = 0; m < l; m++)
    fibers *= (double)q->indices[A->level_idx[m]].dim;
  return tensor_stored(P, 1, t->acc[0].tensor) / (fibers > 0 ? fibers : 1);
}

/* r, q's range, narrowed to what an earlier run measured in the result
 * of the program query q realizes (adaptive planning, issue 12): the
 * runs check that the data stays inside it (src/api/program.c). */
static Range measured_range(const Planner *P, const PhysQuery *q,
                            const char *name, Range r) {
  int u = q->user_query;
  if (!P->actual_range_known || u < 0 || !P->actual_range_known[u] ||
      q->split || !name || strcmp(name, P->p->queries[u].name) != 0)
    return r;
  Range m = range_meet(r, P->actual_range[u]);
  return range_contains(m, range_point(q->out_fill)) ? m : r;
}

static void finish_kernel(Planner *P, PhysQuery *qp, const char *name,
                          int *number) {
  Arena *a = P->a;
  PhysQuery q = *qp;
  q.nacc = 0;
  /* (not with an input distributed while split: its correction needs
   * the whole result's points) */
  if (!q.upper && !q.split_factored) /* before the accesses: it may
                                        reorder their indices */
    phys_symmetric_sum(a, &q, ops_find(&P->p->ops, "*"), input_symmetric, P);
  q.acc = arena_alloc(a, ((size_t)count_accesses(q.expr) + 1) * sizeof *q.acc);
  int factored = q.split_factored;
  choose_split(P, &q);
  q.factored_unsplit = factored && !q.split_factored &&
                       split_input_holds_exceptions(P, factored - 1);
  set_accesses(P, &q, q.expr);
  q.merge = arena_alloc(a, ((size_t)q.nloops + 1) * sizeof *q.merge);
  int *lvl = arena_alloc(a, ((size_t)q.nacc + 1) * sizeof *lvl);
  unsigned char *absent = arena_alloc(a, (size_t)q.nacc + 1);
  for (int d = 0; d < q.nloops; d++)
    plan_loop(P, &q, d, lvl, absent);
  phys_choose_marks(a, &q, ops_find(&P->p->ops, "+"), marked_fiber, P);
  q.out_fill = query_fill(&q);
  q.split = P->nsplit_nodes > 0;
  P->nsplit_nodes = 0;
  q.range = measured_range(P, &q, name, full_query_range(P, &q));
  q.sure_nnz = sure_entries(P, &q);
  q.finite = query_finite(&q);
  if (!q.finite && P->assume_finite && isfinite(q.out_fill) && !q.split) {
    /* optimistic: what reads it may skip its absent entries; the
     * executor checks its values when it runs */
    q.finite = 1;
    q.assumed_finite = 1;
    q.range.nan = q.range.pinf = q.range.ninf = 0;
    if (!(q.range.lo <= q.range.hi)) { /* only specials: any finite */
      q.range.lo = -DBL_MAX;
      q.range.hi = DBL_MAX;
      q.range.integer = 0;
    }
  }
  phys_choose_output(&q);
  *number = push_query(P);
  q.name = name ? name : arena_printf(a, "_t%d", *number);
  P->pp->q[*number] = q;
  *qp = q;
}

/* A copy of logical expression n in the plan's arena, its aliases
 * naming physical queries (its index ids are already loop positions). */
static Node *lower(Planner *P, const Node *n) {
  Node *c = arena_alloc(P->a, sizeof *c);
  *c = *n;
  c->access = 0;
  if (n->kind == ND_INPUT || n->kind == ND_ALIAS) {
    c->idx = arena_ints(P->a, n->nidx, n->idx);
    if (n->kind == ND_ALIAS)
      c->tensor = P->phys_of[n->tensor];
  } else if (n->kind == ND_MAP) {
    c->args = arena_alloc(P->a, ((size_t)n->nargs + 1) * sizeof *c->args);
    for (int k = 0; k < n->nargs; k++)
      c->args[k] = lower(P, n->args[k]);
  }
  return c;
}

/* Plan lifted query li in its index table's order (ids are loops). */
static void plan_query(Planner *P, int li) {
  const LogicalQuery *lq = &P->lp->q[li];
  PhysQuery q = {0};
  q.kind = PQ_KERNEL;
  q.user_query = lq->user_query;
  q.nindices = q.nloops = lq->nindices;
  q.indices = arena_alloc(P->a, ((size_t)q.nindices + 1) * sizeof *q.indices);
  if (q.nindices)
    memcpy(q.indices, lq->indices, (size_t)q.nindices * sizeof *q.indices);
  q.loops = arena_alloc(P->a, ((size_t)q.nloops + 1) * sizeof *q.loops);
  for (int k = 0; k < q.nloops; k++)
    q.loops[k] = k;
  q.nout = lq->nout;
  q.out = arena_ints(P->a, lq->nout, lq->out);
  q.agg = lq->agg;
  q.nred = lq->nred;
  q.red = arena_ints(P->a, lq->nred, lq->red);
  q.expr = lower(P, lq->expr);
  q.split_factored = lq->factored_input;
  q.out_format = galley_format_dense(lq->nout);
  finish_kernel(P, &q, lq->user_query >= 0 ? lq->name : NULL,
                &P->phys_of[li]);
}

/* The lifted plan's outputs (program.c's order). */
static void set_outputs(Planner *P) {
  const LogicalPlan *lp = P->lp;
  PhysPlan *pp = P->pp;
  pp->outputs = arena_alloc(P->a, ((size_t)lp->noutputs + 1) * sizeof(int));
  pp->output_names =
      arena_alloc(P->a, ((size_t)lp->noutputs + 1) * sizeof(const char *));
  for (int k = 0; k < lp->noutputs; k++) {
    pp->outputs[k] = P->phys_of[lp->outputs[k]];
    pp->output_names[k] = lp->output_names[k];
  }
  pp->noutputs = lp->noutputs;
}

/* Check the bound inputs and note which store only finite values. */
static galley_status check_inputs(Planner *P) {
  const Program *p = P->p;
  galley_status st = GALLEY_OK;
  for (int k = 0; k < p->ninputs && st == GALLEY_OK; k++)
    st = bind_check_input(p, P->inputs, k, P->err);
  P->input_finite = arena_alloc(P->a, (size_t)p->ninputs + 1);
  P->input_range = arena_alloc(P->a, ((size_t)p->ninputs + 1) *
                                         sizeof *P->input_range);
  P->input_split_ok = arena_alloc(P->a, (size_t)p->ninputs + 1);
  P->input_stored = arena_alloc(P->a, ((size_t)p->ninputs + 1) *
                                          sizeof *P->input_stored);
  for (int k = 0; k < p->ninputs && st == GALLEY_OK; k++) {
    galley_facts f;
    rt_tensor_facts(P->inputs[k], &f); /* kept: no scan after binding */
    double fill = bind_input_fill(p, P->inputs, k);
    P->input_finite[k] = (unsigned char)rt_facts_finite(&f);
    P->input_range[k] = range_of_facts(&f, fill, 1);
    P->input_stored[k] = P->input_range[k];
    double cells = 1;
    for (int m = 0; m < P->inputs[k]->order; m++)
      cells *= (double)P->inputs[k]->dims[m];
    if ((double)f.nnz == cells && f.min <= f.max) /* the fill never shows */
      P->input_stored[k] = range_of_facts(&f, f.min, 1);
    int64_t bad = f.nan + f.pos_inf + f.neg_inf;
    /* a few non-finite values among many (and a finite fill) */
    P->input_split_ok[k] = (unsigned char)(
        bad > 0 && isfinite(fill) && P->inputs[k]->order > 0 &&
        (bad <= 16 || bad * 16 <= f.stored));
  }
  return st;
}

static galley_status plan_all(Planner *P) {
  galley_status st = check_inputs(P);
  P->phys_of = arena_alloc(P->a, ((size_t)P->lp->nq + 1) * sizeof *P->phys_of);
  for (int li = 0; li < P->lp->nq && st == GALLEY_OK; li++)
    plan_query(P, li);
  if (st == GALLEY_OK)
    set_outputs(P);
  return st;
}

/* plan_all under the arena's out-of-memory catch; *status is
 * GALLEY_ENOMEM when memory ran out. */
static void plan_guarded(Planner *P, galley_status *status) {
  jmp_buf oom;
  P->a->oom = &oom;
  if (setjmp(oom)) {
    *status = GALLEY_ENOMEM;
    return;
  }
  *status = plan_all(P);
  P->a->oom = NULL;
}

static galley_status default_plan(const Program *p,
                                  const galley_tensor *const *inputs,
                                  int assume_finite, PhysPlan **out,
                                  galley_error *err) {
  *out = NULL;
  if (err)
    memset(err, 0, sizeof *err);
  LogicalPlan *lp;
  galley_status st = logical_lift(p, inputs, &lp, err);
  if (st != GALLEY_OK && st != GALLEY_ENOMEM)
    return st;
  Arena *a = st == GALLEY_OK ? arena_new() : NULL;
  PhysPlan *pp = a ? arena_alloc(a, sizeof *pp) : NULL;
  st = GALLEY_ENOMEM;
  if (pp) {
    pp->arena = a;
    pp->prog = p;
    /* the simple planner never splits exceptions out: its plans run
     * as they are (tests call its kernels directly) */
    Planner P = {.a = a, .p = p, .inputs = inputs, .err = err, .pp = pp,
                 .lp = lp, .no_split = 1, .assume_finite = assume_finite};
    plan_guarded(&P, &st);
  }
  logical_plan_free(lp); /* NULL when the lift ran out of memory */
  if (st == GALLEY_ENOMEM && err) {
    err->status = GALLEY_ENOMEM;
    err->line = err->col = 0;
    snprintf(err->msg, sizeof err->msg, "out of memory");
  }
  if (st != GALLEY_OK) {
    arena_free(a);
    return st;
  }
  a->oom = NULL;
  phys_assign_widths(pp, inputs);
  *out = pp;
  return GALLEY_OK;
}

galley_status phys_default_plan(const Program *p,
                                const galley_tensor *const *inputs,
                                PhysPlan **out, galley_error *err) {
  return default_plan(p, inputs, 0, out, err);
}

galley_status phys_simple_plan(const Program *p,
                               const galley_tensor *const *inputs,
                               int assume_finite, PhysPlan **out,
                               galley_error *err) {
  return default_plan(p, inputs, assume_finite, out, err);
}

/* ------------------------------------------------------------------ */
/* The builder shared with the physical optimizer                      */
/* ------------------------------------------------------------------ */

static Planner builder_planner(const PhysBuilder *b, galley_error *err) {
  return (Planner){.a = b->a, .p = b->p, .inputs = b->inputs, .err = err,
                   .pp = b->pp, .cap = b->cap,
                   .input_finite = b->input_finite,
                   .input_range = b->input_range,
                   .input_stored = b->input_stored,
                   .input_split_ok = b->input_split_ok,
                   .no_split = b->no_split,
                   .assume_finite = b->assume_finite,
                   .actual_range = b->actual_range,
                   .actual_range_known = b->actual_range_known,
                   .lead_cost = b->lead_cost, .lead_ctx = b->lead_ctx};
}

galley_status phys_builder_init(PhysBuilder *b, Arena *a, const Program *p,
                                const galley_tensor *const *inputs,
                                PhysPlan *pp, galley_error *err) {
  *b = (PhysBuilder){.a = a, .p = p, .inputs = inputs, .pp = pp};
  Planner P = builder_planner(b, err);
  galley_status st = check_inputs(&P);
  b->input_finite = P.input_finite;
  b->input_range = P.input_range;
  b->input_stored = P.input_stored;
  b->input_split_ok = P.input_split_ok;
  return st;
}

void phys_builder_add_kernel(PhysBuilder *b, PhysQuery *q, const char *name,
                             int *number) {
  Planner P = builder_planner(b, NULL);
  finish_kernel(&P, q, name, number);
  b->cap = P.cap;
}
