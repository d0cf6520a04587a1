/*
 * stats.c -- the sparsity-statistics interface (Galley paper Sec. 6.2):
 * construction from tensors and constants, the two kinds of map, the
 * aggregate and the estimate, dispatched to the uniform estimator
 * (uniform.c) and the chain bound (chain.c).
 *
 * A statistic always carries the uniform estimate (one double, cheap);
 * the degree constraints are built only for EST_CHAIN.  Every operation
 * returns a new statistic in the context's arena; inputs are never
 * modified.  A statistic may be known empty (no non-fill entry): every
 * estimate of it is 0.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "galley_rt.h"
#include "rt_stats.h"
#include "stats.h"

/* ---- shared helpers ---- */

/* Product of the sizes of the indices in s, clamped to STATS_MAX_ESTIMATE
 * (negative sizes count as 0). */
double stats_dense(const int64_t *dims, IdxSet s) {
  double p = 1;
  for (; s; s &= s - 1) {
    int64_t n = dims[__builtin_ctzll(s)];
    p *= n > 0 ? (double)n : 0.0;
    if (p > STATS_MAX_ESTIMATE) p = STATS_MAX_ESTIMATE;
  }
  return p;
}

int stats_same_value(double a, double b) {
  return a == b || (isnan(a) && isnan(b));
}

/* A set with a size-0 index has no coordinates at all. */
static int has_zero_dim(const int64_t *dims, IdxSet s) {
  for (; s; s &= s - 1)
    if (dims[__builtin_ctzll(s)] <= 0) return 1;
  return 0;
}

TensorStats *stats_alloc(const StatsContext *c, IdxSet indices, double fill) {
  TensorStats *s = arena_alloc(c->arena, sizeof *s);
  if (!s) return NULL;
  s->indices = indices;
  s->dims = c->dims;
  s->fill = fill;
  s->lnnz = -INFINITY;
  s->empty = has_zero_dim(c->dims, indices);
  return s;
}

/* Mark s empty when its uniform estimate says there is nothing (keeps the
 * two views consistent). */
static void settle(TensorStats *s) {
  if (s->empty) s->lnnz = -INFINITY;
  if (s->lnnz == -INFINITY) s->empty = 1;
}

IdxSet stats_indices(const TensorStats *s) { return s ? s->indices : 0; }
double stats_fill(const TensorStats *s) { return s ? s->fill : 0.0; }
int stats_num_constraints(const TensorStats *s) { return s ? s->ndc : 0; }

/* ---- 1. construction ---- */

TensorStats *stats_new(const StatsContext *c, IdxSet indices, double nnz,
                       double fill) {
  TensorStats *s = stats_alloc(c, indices, fill);
  if (!s) return NULL;
  double space = stats_dense(c->dims, indices);
  if (isnan(nnz) || nnz > space) nnz = space; /* unknown: dense */
  if (nnz < 0) nnz = 0;
  if (nnz == 0) s->empty = 1;
  s->lnnz = s->empty ? -INFINITY : log(nnz);
  if (c->kind == EST_CHAIN && !s->empty && indices && nnz < space)
    chain_add(c, s, 0, indices, nnz);
  settle(s);
  return s;
}

void stats_add_constraint(const StatsContext *c, TensorStats *s, IdxSet cond,
                          IdxSet counted, double d) {
  if (!s || c->kind != EST_CHAIN) return;
  cond &= s->indices;
  counted &= s->indices & ~cond;
  if (!counted || isnan(d)) return; /* says nothing */
  if (d < 1) {                      /* a count below 1 is 0: no entries */
    s->empty = 1;
    settle(s);
    return;
  }
  chain_add(c, s, cond, counted, d);
}

TensorStats *stats_const(const StatsContext *c, double value) {
  TensorStats *s = stats_alloc(c, 0, value);
  if (!s) return NULL;
  s->empty = 1; /* every entry (the only one) is the fill */
  settle(s);
  return s;
}

/* ---- the inputs' statistics, computed once ---- */

/* The degree constraints chain_from_degree_stats made of a tensor read
 * with index ids idx[] of sizes dim[]: the same every time a plan reads
 * it so (each elimination step and loop order the optimizers try builds
 * the statistic of the same access again). */
typedef struct ChainProto {
  struct ChainProto *next;
  int idx[GALLEY_MAX_ORDER];
  int64_t dim[GALLEY_MAX_ORDER];
  int ndc;
  StatsDC *dc;
} ChainProto;

typedef struct CachedTensor {
  const galley_tensor *t;
  uint64_t print;            /* fingerprint(t) when cached */
  unsigned checked;          /* the cache's epoch it was last checked in */
  int nnz_ok;                /* nnz known */
  int64_t nnz;
  int ds_ok;                 /* degree statistics computed (nnz too) */
  const galley_degree_stats *ds;
  ChainProto *protos;        /* chain constraints made of ds, per reading */
} CachedTensor;

/* A chain bound kept for every statistic of the same key (chain.c). */
typedef struct KeptBound {
  uint64_t key; /* 0: free */
  IdxSet target, cond;
  double bound;
} KeptBound;

/* Entries of the table of bounds (a power of two): a plan of TPC-H's
 * covariance asks about 2,000 chain bounds, of a few hundred kinds. */
#define KEPT_BOUNDS 2048

struct StatsCache {
  Arena *arena;
  unsigned epoch;            /* advanced by stats_cache_recheck */
  int n, cap;
  CachedTensor *e;
  KeptBound *bounds;         /* KEPT_BOUNDS, made at the first bound kept */
};

StatsCache *stats_cache_new(Arena *a) {
  StatsCache *sc = arena_alloc(a, sizeof *sc);
  if (sc) memset(sc, 0, sizeof *sc), sc->arena = a;
  return sc;
}

static size_t bound_slot(uint64_t key, IdxSet target, IdxSet cond) {
  uint64_t h = (key ^ (target * 0x9E3779B97F4A7C15ull)) +
               cond * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return (size_t)(h * 0xff51afd7ed558ccdULL >> 40) & (KEPT_BOUNDS - 1);
}

/* Probes of the table: a slot and the next three. */
#define BOUND_PROBES 4

int stats_cache_find_bound(StatsCache *sc, uint64_t key, IdxSet target,
                           IdxSet cond, double *bound) {
  if (!sc || !sc->bounds) return 0;
  size_t at = bound_slot(key, target, cond);
  for (int p = 0; p < BOUND_PROBES; p++) {
    const KeptBound *b = &sc->bounds[(at + p) & (KEPT_BOUNDS - 1)];
    if (b->key == 0) return 0;
    if (b->key == key && b->target == target && b->cond == cond) {
      *bound = b->bound;
      return 1;
    }
  }
  return 0;
}

void stats_cache_keep_bound(StatsCache *sc, uint64_t key, IdxSet target,
                            IdxSet cond, double bound) {
  if (!sc) return;
  if (!sc->bounds) {
    sc->bounds = arena_alloc(sc->arena, KEPT_BOUNDS * sizeof *sc->bounds);
    if (!sc->bounds) return; /* searched again next time */
  }
  size_t at = bound_slot(key, target, cond);
  KeptBound *slot = &sc->bounds[at]; /* replaced when the probes are full */
  for (int p = 0; p < BOUND_PROBES; p++) {
    KeptBound *b = &sc->bounds[(at + p) & (KEPT_BOUNDS - 1)];
    if (b->key == 0) {
      slot = b;
      break;
    }
  }
  *slot = (KeptBound){key, target, cond, bound};
}

void stats_cache_recheck(StatsCache *sc) {
  if (sc) sc->epoch++;
}

static uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

static uint64_t mix_ptr(uint64_t h, const void *p) {
  return mix(h, (uint64_t)(uintptr_t)p);
}

/* Up to 8 evenly spaced elements of an array of n, each `size` bytes
 * (8 for 64-bit arrays, 4 for the 32-bit index arrays). */
static uint64_t mix_elems(uint64_t h, const void *a, int64_t n, size_t size) {
  if (!a) return h;
  for (int64_t k = 0; k < 8 && k < n; k++) {
    uint64_t x = 0;
    int64_t at = n <= 8 ? k : k * (n - 1) / 7;
    memcpy(&x, (const char *)a + (size_t)at * size, size);
    h = mix(h, x);
  }
  return h;
}

static uint64_t mix_words(uint64_t h, const void *a, int64_t n) {
  return mix_elems(h, a, n, 8);
}

/* Its facts (galley_tensor_facts: kept with the tensor, so O(1) but the
 * first time), which galley_tensor_touch recomputes after values change
 * in place. */
static uint64_t mix_facts(uint64_t h, const galley_tensor *t) {
  galley_facts f;
  if (galley_tensor_facts(t, &f, NULL) != GALLEY_OK) return h;
  uint64_t lo, hi;
  memcpy(&lo, &f.min, sizeof lo);
  memcpy(&hi, &f.max, sizeof hi);
  h = mix(mix(mix(h, (uint64_t)f.stored), (uint64_t)f.nnz), (uint64_t)f.nan);
  h = mix(mix(mix(h, (uint64_t)f.pos_inf), (uint64_t)f.neg_inf), lo);
  return mix(mix(h, hi), (uint64_t)f.integer);
}

/* What identifies a tensor's data cheaply: its shape, layout, array
 * addresses, facts, and a few of its positions, coordinates and values.
 * A cache entry whose tensor no longer matches (freed, another made at
 * its address; values changed and the tensor touched) is computed
 * again. */
static uint64_t fingerprint(const galley_tensor *t) {
  uint64_t h = mix_facts(mix(0, (uint64_t)t->order), t), fill;
  memcpy(&fill, &t->fill, sizeof fill);
  h = mix(mix(mix(h, fill), (uint64_t)t->nval), (uint64_t)t->borrowed);
  h = mix_words(mix_ptr(h, t->val), t->val, t->nval);
  for (int l = 0; l < t->order; l++) {
    const galley_level *L = &t->lvl[l];
    h = mix(mix(h, (uint64_t)t->dims[l]), (uint64_t)(L->kind * 8 + L->mode));
    h = mix(mix(mix(h, (uint64_t)L->dim), (uint64_t)L->npar),
            (uint64_t)L->nchild);
    h = mix(mix(mix(h, (uint64_t)L->nset), (uint64_t)L->hcap), 0);
    h = mix_ptr(mix_ptr(mix_ptr(h, L->pos), L->crd), L->qos);
    h = mix_ptr(mix_ptr(mix_ptr(h, L->key), L->slot), L->tbl);
    h = mix_words(h, L->pos, L->pos ? L->npar + 1 : 0);
    h = mix_words(h, L->crd, L->crd ? L->nset : 0);
    /* 32-bit levels keep their indices here instead: a tensor re-made
     * with other 32-bit arrays must not match the old entry. */
    h = mix_ptr(mix_ptr(h, L->pos32), L->crd32);
    h = mix_ptr(mix_ptr(mix_ptr(h, L->key32), L->slot32), L->qos32);
    h = mix_elems(h, L->pos32, L->pos32 ? L->npar + 1 : 0, 4);
    h = mix_elems(h, L->crd32, L->crd32 ? L->nset : 0, 4);
  }
  return h;
}

/* t's cache entry (checked against t's fingerprint once per epoch, and
 * emptied when t changed); NULL without a cache or when out of memory.
 * The fingerprint reads a few words of every array: a cache miss each in
 * a large tensor, too many to pay on every one of a plan's lookups. */
static CachedTensor *cached(StatsCache *sc, const galley_tensor *t) {
  if (!sc) return NULL;
  for (int k = 0; k < sc->n; k++)
    if (sc->e[k].t == t) {
      CachedTensor *ct = &sc->e[k];
      if (ct->checked != sc->epoch) {
        uint64_t print = fingerprint(t);
        if (ct->print != print)
          *ct = (CachedTensor){t, print, sc->epoch, 0, 0, 0, NULL, NULL};
        ct->checked = sc->epoch;
      }
      return ct;
    }
  if (sc->n == sc->cap) {
    int cap = sc->cap ? 2 * sc->cap : 8;
    CachedTensor *e = arena_alloc(sc->arena, (size_t)cap * sizeof *e);
    if (!e) return NULL;
    if (sc->n) memcpy(e, sc->e, (size_t)sc->n * sizeof *e);
    sc->e = e;
    sc->cap = cap;
  }
  CachedTensor *ct = &sc->e[sc->n++];
  *ct = (CachedTensor){t, fingerprint(t), sc->epoch, 0, 0, 0, NULL, NULL};
  return ct;
}

/* t's degree statistics: kept with t itself (rt_tensor_degree_stats_kept,
 * so a tensor bound again or to another program is not walked again),
 * else computed into the cache's arena or into *own without a cache;
 * NULL when they cannot be had. */
static const galley_degree_stats *degree_stats(StatsCache *sc,
                                               CachedTensor *ct,
                                               const galley_tensor *t,
                                               galley_degree_stats **own) {
  if (ct && ct->ds_ok) return ct->ds;
  const galley_degree_stats *ds = rt_tensor_degree_stats_kept(t, STATS_SAMPLE);
  if (!ds) {
    galley_degree_stats *mine = ct ? arena_alloc(sc->arena, sizeof *mine)
                                   : (*own = malloc(sizeof *mine));
    if (!mine || rt_degree_stats(t, STATS_SAMPLE, mine, NULL, NULL) != GALLEY_OK)
      return NULL;
    ds = mine;
  }
  if (ct) {
    ct->ds = ds;
    ct->ds_ok = 1;
    ct->nnz = ds->nnz;
    ct->nnz_ok = 1;
  }
  return ds;
}

/* t's non-fill entries (kept in ct). */
static int64_t tensor_nnz(CachedTensor *ct, const galley_tensor *t) {
  if (!ct) return galley_tensor_nnz(t);
  if (!ct->nnz_ok) {
    ct->nnz = galley_tensor_nnz(t);
    ct->nnz_ok = 1;
  }
  return ct->nnz;
}

int64_t stats_cache_nnz(StatsCache *sc, const galley_tensor *t) {
  return tensor_nnz(cached(sc, t), t);
}

/* The constraints kept in ct for reading t as idx[] in context c, or
 * NULL. */
static const ChainProto *find_proto(const StatsContext *c,
                                    const CachedTensor *ct, int order,
                                    const int *idx) {
  for (const ChainProto *p = ct ? ct->protos : NULL; p; p = p->next) {
    int same = 1;
    for (int m = 0; m < order && same; m++)
      same = p->idx[m] == idx[m] && p->dim[m] == c->dims[idx[m]];
    if (same) return p;
  }
  return NULL;
}

/* Keep s's constraints in ct for the next reading of t as idx[]
 * (nothing when out of memory: they are made again). */
static void keep_proto(StatsCache *sc, CachedTensor *ct, const StatsContext *c,
                       int order, const int *idx, const TensorStats *s) {
  ChainProto *p = arena_alloc(sc->arena, sizeof *p);
  StatsDC *dc = arena_alloc(sc->arena, ((size_t)s->ndc + 1) * sizeof *dc);
  if (!p || !dc) return;
  for (int m = 0; m < order; m++) {
    p->idx[m] = idx[m];
    p->dim[m] = c->dims[idx[m]];
  }
  if (s->ndc) memcpy(dc, s->dc, (size_t)s->ndc * sizeof *dc);
  p->dc = dc;
  p->ndc = s->ndc;
  p->next = ct->protos;
  ct->protos = p;
}

/* s's constraints from the degree statistics ds of t read as idx[]:
 * a copy of those kept in ct when there are, else made (and kept). */
static void chain_of_tensor(const StatsContext *c, CachedTensor *ct,
                            TensorStats *s, const galley_degree_stats *ds,
                            int order, const int *idx) {
  const ChainProto *p = find_proto(c, ct, order, idx);
  if (!p) {
    chain_from_degree_stats(c, s, ds, idx);
    if (ct) keep_proto(c->cache, ct, c, order, idx, s);
    return;
  }
  StatsDC *dc = arena_alloc(c->arena, ((size_t)p->ndc + 1) * sizeof *dc);
  if (!dc) { /* as chain_add out of room: fewer constraints, still bounds */
    chain_add(c, s, 0, s->indices, (double)ds->nnz);
    return;
  }
  if (p->ndc) memcpy(dc, p->dc, (size_t)p->ndc * sizeof *dc);
  s->dc = dc;
  s->ndc = s->cap = p->ndc;
}

TensorStats *stats_from_tensor(const StatsContext *c, const galley_tensor *t,
                               const int *idx, double fill) {
  int order = galley_tensor_order(t);
  IdxSet indices = 0;
  for (int m = 0; m < order; m++) indices |= (IdxSet)1 << idx[m];
  TensorStats *s = stats_alloc(c, indices, fill);
  if (!s) return NULL;
  /* A tensor whose own fill is 0 bound to another declared fill keeps its
   * stored entries as the non-fill ones (man/tin.5): its own statistics. */
  CachedTensor *ct = cached(c->cache, t);
  galley_degree_stats *own = NULL;
  const galley_degree_stats *ds =
      c->kind == EST_CHAIN ? degree_stats(c->cache, ct, t, &own) : NULL;
  int64_t nnz = ds ? ds->nnz : tensor_nnz(ct, t);
  if (nnz <= 0) s->empty = 1;
  if (!s->empty) {
    /* The diagonal of repeated indices, uniformly: the fraction of the
     * tensor's own space that the index space keeps. */
    double lmodes = 0;
    for (int m = 0; m < order; m++)
      lmodes += log((double)galley_tensor_dim(t, m));
    double l = log((double)nnz) - lmodes + uni_lspace(c, indices);
    double lspace = uni_lspace(c, indices);
    s->lnnz = l < lspace ? l : lspace;
  }
  if (c->kind == EST_CHAIN && !s->empty) {
    if (ds)
      chain_of_tensor(c, ct, s, ds, order, idx);
    else if (indices) /* still a bound: the non-fill entries */
      chain_add(c, s, 0, indices, (double)nnz);
  }
  free(own);
  settle(s);
  return s;
}

/* ---- 2, 3. maps ---- */

/* join(args...) with the index set widened by `extra` (broadcast indices
 * of union-like arguments, which do not restrict the result). */
static TensorStats *join_extra(const StatsContext *c,
                               const TensorStats *const *args, int n,
                               IdxSet extra, double fill) {
  IdxSet u = extra;
  int empty = 0;
  for (int k = 0; k < n; k++) {
    u |= args[k]->indices;
    empty |= args[k]->empty;
  }
  TensorStats *s = stats_alloc(c, u, fill);
  if (!s) return NULL;
  s->empty |= empty;
  if (!s->empty) {
    s->lnnz = uni_join(c, args, n, u);
    if (c->kind == EST_CHAIN) chain_join(c, s, args, n);
  }
  settle(s);
  return s;
}

TensorStats *stats_join(const StatsContext *c, const TensorStats *const *args,
                        int n, double fill) {
  return join_extra(c, args, n, 0, fill);
}

TensorStats *stats_union(const StatsContext *c, const TensorStats *const *args,
                         int n, double fill) {
  IdxSet u = 0;
  int empty = 1;
  for (int k = 0; k < n; k++) {
    u |= args[k]->indices;
    empty &= args[k]->empty;
  }
  TensorStats *s = stats_alloc(c, u, fill);
  if (!s) return NULL;
  s->empty |= empty;
  if (!s->empty) {
    s->lnnz = uni_union(c, args, n, u);
    if (c->kind == EST_CHAIN) chain_union(c, s, args, n);
  }
  settle(s);
  return s;
}

/* The result's non-fill entries lie where some argument is non-fill (at a
 * point where every argument is its fill the result is op(fills), the
 * result's fill): the union is always a bound.  When an argument's fill is
 * the annihilator and so is op(fills), the result is non-fill only where
 * that argument is: the join-like arguments bound it, the others only
 * broadcast. */
TensorStats *stats_map(const StatsContext *c, const Op *op,
                       const TensorStats *const *args, int n) {
  double fills_buf[16] = {0};
  double *fills = n <= 16 ? fills_buf : arena_alloc(c->arena, n * sizeof *fills);
  const TensorStats *join_buf[16];
  const TensorStats **jl =
      n <= 16 ? join_buf : arena_alloc(c->arena, n * sizeof *jl);
  if (!fills || !jl) return NULL;
  for (int k = 0; k < n; k++) fills[k] = args[k]->fill;
  double fill = ops_apply(op, fills, n);
  int nj = 0;
  IdxSet extra = 0;
  int annihilates = (op->props & OP_HAS_ANNIHILATOR) &&
                    stats_same_value(fill, op->annihilator);
  for (int k = 0; k < n; k++) {
    if (annihilates && stats_same_value(args[k]->fill, op->annihilator))
      jl[nj++] = args[k];
    else
      extra |= args[k]->indices;
  }
  if (nj == 0) return stats_union(c, args, n, fill);
  return join_extra(c, jl, nj, extra, fill);
}

/* ---- 4. aggregate ---- */

TensorStats *stats_aggregate(const StatsContext *c, const Op *op,
                             const TensorStats *s, IdxSet reduced) {
  reduced &= s->indices;
  IdxSet keep = s->indices & ~reduced;
  double count = stats_dense(c->dims, reduced);
  double fill = op ? ops_fold_repeat(op, s->fill, count) : s->fill;
  TensorStats *r = stats_alloc(c, keep, fill);
  if (!r) return NULL;
  r->empty |= s->empty;
  if (!r->empty) {
    r->lnnz = uni_aggregate(c, s, keep);
    if (c->kind == EST_CHAIN) chain_aggregate(c, r, s);
  }
  settle(r);
  return r;
}

/* ---- 5. estimate ---- */

double stats_estimate(const StatsContext *c, const TensorStats *s,
                      IdxSet indices, IdxSet conditional) {
  if (!s || s->empty) return 0;
  indices &= s->indices; /* indices outside the statistic are ignored */
  conditional &= indices;
  double e = c->kind == EST_CHAIN
                 ? chain_bound(s, indices, conditional, c->arena, c->cache)
                 : uni_estimate(c, s, indices, conditional);
  double dense = stats_dense(c->dims, indices & ~conditional);
  if (!(e <= dense)) e = dense; /* also catches nan */
  return e > 0 ? e : 0;
}

/* ---- printing ---- */

static void print_set(FILE *f, IdxSet s) {
  if (!s) fputs("∅", f);
  for (int first = 1; s; s &= s - 1, first = 0)
    fprintf(f, "%s%d", first ? "" : ",", __builtin_ctzll(s));
}

void stats_print(const StatsContext *c, const TensorStats *s, FILE *f) {
  fputs("stats {", f);
  print_set(f, s->indices);
  fprintf(f, "} fill %g nnz %g%s\n", s->fill,
          stats_estimate(c, s, s->indices, 0), s->empty ? " (empty)" : "");
  for (int k = 0; k < s->ndc; k++) {
    fputs("  (", f);
    print_set(f, s->dc[k].cond);
    fputs("|", f);
    print_set(f, s->dc[k].counted);
    fprintf(f, ") = %.17g\n", s->dc[k].d);
  }
}
