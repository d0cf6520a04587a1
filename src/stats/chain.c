/*
 * chain.c -- degree constraints and the chain bound (Galley paper Sec.
 * 6.3.2, after Khamis et al.'s degree-constraint bounds).
 *
 * A constraint (X|Y) = d says: for each value of the indices X, at most d
 * distinct values of the indices Y among the non-fill entries.  A
 * statistic holds one constraint per key (X, Y), the smallest d seen.
 * Besides the stored constraints every index i has the implicit one
 * (∅|i) = size(i); it is never stored, the search applies it on the way.
 *
 * The chain bound is a shortest path over index sets: from the
 * conditional set (weight 1), a constraint (X|Y) = d moves x to
 * x ∪ X ∪ Y with weight w * size(X \ x) * d; every reached set x gives
 * the bound w(x) * size(T \ x) for the target T.  All factors are >= 1,
 * so a best-first (Dijkstra) search with the best bound so far as cutoff
 * finds the minimum exactly.  Every bound found on the way is valid, so
 * the search may stop early (a work limit) and still return an upper
 * bound.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

#define MAXW STATS_MAX_ESTIMATE

static double clampw(double w) { return w < MAXW ? w : MAXW; }

/* ---- the constraint set ---- */

/* The last CHAIN_MEMO bounds chain_bound found of one statistic: the
 * optimizers ask the same few of each input's statistic (a join's or
 * aggregate's constraints, the cost search's fan-outs) thousands of
 * times in a plan.  A bound is a function of the constraints, the sizes
 * and the question, so a kept one is the figure the search would find. */
#define CHAIN_MEMO 8
struct ChainMemo {
  IdxSet target[CHAIN_MEMO], cond[CHAIN_MEMO];
  double bound[CHAIN_MEMO];
  int n, next; /* entries in use; the one to replace next */
};

static void forget_bounds(TensorStats *s) {
  if (s->memo) s->memo->n = s->memo->next = 0;
  s->key = 0;
}

static uint64_t mix_key(uint64_t h, uint64_t x) {
  h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

/* What a bound of s depends on besides the question: its constraints in
 * order (the search's ties follow it) and the sizes of its indices (every
 * constraint's sets lie within them).  Never 0. */
static uint64_t chain_key(const TensorStats *cs) {
  TensorStats *s = (TensorStats *)cs; /* the key is a cache of s's own */
  if (s->key) return s->key;
  uint64_t h = mix_key(0x243F6A8885A308D3ull, s->indices);
  for (IdxSet x = s->indices; x; x &= x - 1)
    h = mix_key(h, (uint64_t)s->dims[__builtin_ctzll(x)]);
  h = mix_key(h, (uint64_t)s->ndc);
  for (int k = 0; k < s->ndc; k++) {
    uint64_t d;
    memcpy(&d, &s->dc[k].d, sizeof d);
    h = mix_key(mix_key(mix_key(h, s->dc[k].cond), s->dc[k].counted), d);
  }
  return s->key = h | 1;
}

void chain_add(const StatsContext *c, TensorStats *s, IdxSet cond,
               IdxSet counted, double d) {
  counted &= ~cond;
  if (!counted) return;
  forget_bounds(s);
  d = clampw(d);
  for (int k = 0; k < s->ndc; k++)
    if (s->dc[k].cond == cond && s->dc[k].counted == counted) {
      if (d < s->dc[k].d) s->dc[k].d = d;
      return;
    }
  if (s->ndc == s->cap) {
    int cap = s->cap ? 2 * s->cap : 8;
    StatsDC *dc = arena_alloc(c->arena, (size_t)cap * sizeof *dc);
    if (!dc) return; /* dropping a constraint keeps every bound valid */
    if (s->ndc) memcpy(dc, s->dc, (size_t)s->ndc * sizeof *dc);
    s->dc = dc;
    s->cap = cap;
  }
  s->dc[s->ndc++] = (StatsDC){cond, counted, d};
}

/* (X'|Y') = d' makes (X|Y) = d redundant when it applies wherever the
 * other does (X' ⊆ X), reaches at least as far (X'∪Y' ⊇ X∪Y) and costs
 * no more: the search only ever gains from a bigger set at lower weight. */
static int dominates(const StatsDC *a, const StatsDC *b) {
  return (a->cond & ~b->cond) == 0 &&
         ((b->cond | b->counted) & ~(a->cond | a->counted)) == 0 &&
         a->d <= b->d;
}

typedef struct Ranked {
  StatsDC dc;
  double score; /* log(size(counted) / d): what it says beyond the sizes */
} Ranked;

static int cmp_ranked(const void *pa, const void *pb) {
  const Ranked *a = pa, *b = pb;
  if (a->score != b->score) return a->score > b->score ? -1 : 1;
  if (a->dc.cond != b->dc.cond) return a->dc.cond < b->dc.cond ? -1 : 1;
  if (a->dc.counted != b->dc.counted)
    return a->dc.counted < b->dc.counted ? -1 : 1;
  return 0;
}

static int cmp_key(const void *pa, const void *pb) {
  const StatsDC *a = pa, *b = pb;
  if (a->cond != b->cond) return a->cond < b->cond ? -1 : 1;
  if (a->counted != b->counted) return a->counted < b->counted ? -1 : 1;
  return 0;
}

/* Drop constraints that say nothing beyond the sizes (d >= size of the
 * counted set) or that another dominates; keep at most `cap`, the most
 * informative first (the total count (∅|all) always); leave them sorted
 * by key, so that equal inputs give equal statistics. */
void chain_prune(const StatsContext *c, TensorStats *s, int cap) {
  forget_bounds(s);
  int n = 0;
  for (int k = 0; k < s->ndc; k++)
    if (s->dc[k].d < stats_dense(c->dims, s->dc[k].counted))
      s->dc[n++] = s->dc[k];
  s->ndc = n;
  n = 0;
  for (int k = 0; k < s->ndc; k++) {
    int drop = 0;
    for (int m = 0; m < s->ndc && !drop; m++)
      drop = m != k && dominates(&s->dc[m], &s->dc[k]);
    if (!drop) s->dc[n++] = s->dc[k];
  }
  s->ndc = n;
  if (n > cap) {
    Ranked *r = arena_alloc(c->arena, (size_t)n * sizeof *r);
    if (r) {
      for (int k = 0; k < n; k++) {
        r[k].dc = s->dc[k];
        int total = s->dc[k].cond == 0 && s->dc[k].counted == s->indices;
        r[k].score = total ? INFINITY
                           : log(stats_dense(c->dims, s->dc[k].counted)) -
                                 log(s->dc[k].d);
      }
      qsort(r, (size_t)n, sizeof *r, cmp_ranked);
      for (int k = 0; k < cap; k++) s->dc[k] = r[k].dc;
    }
    s->ndc = cap;
  }
  if (s->ndc > 1) qsort(s->dc, (size_t)s->ndc, sizeof *s->dc, cmp_key);
}

/* ---- construction: one routine for every rank ---- */

/* Index set of a set of logical modes. */
static IdxSet ids_of(const int *idx, unsigned modes) {
  IdxSet s = 0;
  for (; modes; modes &= modes - 1) s |= (IdxSet)1 << idx[__builtin_ctz(modes)];
  return s;
}

/* From the runtime's statistics, for every subset S of the modes
 * (∅|S) = distinct[S] and (S|rest) = max_degree[S].  Both stay valid
 * bounds on a diagonal (repeated index): the diagonal's entries are a
 * subset of the tensor's, and the values of the merged index are fixed by
 * any one of its modes, so projecting or fixing them can only lower the
 * counts.  Keys that coincide after merging keep the smaller d. */
void chain_from_degree_stats(const StatsContext *c, TensorStats *s,
                             const galley_degree_stats *ds, const int *idx) {
  unsigned full = (1u << ds->order) - 1;
  IdxSet all = ids_of(idx, full);
  for (unsigned m = 1; m <= full; m++)
    chain_add(c, s, 0, ids_of(idx, m), (double)ds->distinct[m]);
  for (unsigned m = 0; m < full; m++) {
    IdxSet cond = ids_of(idx, m);
    chain_add(c, s, cond, all & ~cond, (double)ds->max_degree[m]);
  }
  chain_prune(c, s, STATS_MAX_TENSOR_CONSTRAINTS);
}

/* ---- propagation ---- */

/* Annihilating map: the result's entries are a subset of every
 * argument's (broadcast), so every constraint stays valid. */
void chain_join(const StatsContext *c, TensorStats *out,
                const TensorStats *const *args, int n) {
  for (int k = 0; k < n; k++)
    for (int m = 0; m < args[k]->ndc; m++)
      chain_add(c, out, args[k]->dc[m].cond, args[k]->dc[m].counted,
                args[k]->dc[m].d);
  chain_prune(c, out, 1 << 30);
}

/* Non-annihilating map: argument k seen on the union's indices U is its
 * relation times the full domain of Z_k = U \ I_k.  Its degree for a key
 * (X|Y) is its own chain bound of (X∪Y)∩I_k given X∩I_k, times size(Y ∩
 * Z_k); the result's degree is at most the sum over the arguments.  The
 * keys are every argument's constraints extended by Z_k and (∅|U) -- the
 * reference keeps only keys all arguments have, with d * size(Z_k); the
 * chain bound is never larger, and fills in the other keys. */
void chain_union(const StatsContext *c, TensorStats *out,
                 const TensorStats *const *args, int n) {
  IdxSet u = out->indices;
  int nkeys = 1;
  for (int k = 0; k < n; k++) nkeys += args[k]->ndc;
  StatsDC *keys = arena_alloc(c->arena, (size_t)nkeys * sizeof *keys);
  if (!keys) return;
  int nk = 0;
  keys[nk++] = (StatsDC){0, u, 0};
  for (int k = 0; k < n; k++) {
    IdxSet z = u & ~args[k]->indices;
    for (int m = 0; m < args[k]->ndc; m++) {
      StatsDC key = {args[k]->dc[m].cond, args[k]->dc[m].counted | z, 0};
      int dup = 0;
      for (int q = 0; q < nk && !dup; q++)
        dup = keys[q].cond == key.cond && keys[q].counted == key.counted;
      if (!dup) keys[nk++] = key;
    }
  }
  for (int q = 0; q < nk; q++) {
    double total = 0;
    for (int k = 0; k < n && total < MAXW; k++) {
      const TensorStats *a = args[k];
      if (a->empty) continue;
      IdxSet z = u & ~a->indices;
      double b = chain_bound(a, (keys[q].cond | keys[q].counted) & a->indices,
                             keys[q].cond & a->indices, c->arena, c->cache);
      total = clampw(total + b * stats_dense(c->dims, keys[q].counted & z));
    }
    chain_add(c, out, keys[q].cond, keys[q].counted, total);
  }
  chain_prune(c, out, 1 << 30);
}

/* Aggregate onto R = out->indices: the result's entries are among the
 * projections of the input's.  Constraints conditioned on R only keep
 * their counts on R; and for every conditioning set X ⊆ R in use (and ∅)
 * the input's own chain bound of R given X is a new constraint (X|R\X),
 * which keeps what paths through the reduced indices knew. */
void chain_aggregate(const StatsContext *c, TensorStats *out,
                     const TensorStats *s) {
  IdxSet r = out->indices;
  for (int k = 0; k < s->ndc; k++)
    if ((s->dc[k].cond & ~r) == 0)
      chain_add(c, out, s->dc[k].cond, s->dc[k].counted & r, s->dc[k].d);
  for (int k = -1; k < s->ndc; k++) {
    IdxSet x = k < 0 ? 0 : s->dc[k].cond;
    if ((x & ~r) != 0 || (r & ~x) == 0) continue;
    int seen = 0; /* each conditioning set once */
    for (int m = 0; m < k && !seen; m++) seen = s->dc[m].cond == x;
    if (seen || (k >= 0 && x == 0)) continue;
    chain_add(c, out, x, r & ~x, chain_bound(s, r, x, c->arena, c->cache));
  }
  chain_prune(c, out, 1 << 30);
}

/* ---- the chain bound ---- */

typedef struct Slot {
  IdxSet set;  /* a reached index set */
  double w;    /* the least weight found for it */
  double rest; /* the size of the target's indices outside it */
  int used;
} Slot;

typedef struct HeapItem {
  double w;
  IdxSet set;
} HeapItem;

#define STACK_SLOTS 256 /* power of two */
#define FIRST_SLOTS 32  /* of them cleared at first: most searches reach
                           a few sets, and clearing is their main cost */
#define WORK_LIMIT 8192 /* sets expanded before settling for the best */

typedef struct Search {
  Slot *slot;
  Slot *stack;   /* the STACK_SLOTS on the stack, the table while it fits */
  unsigned mask; /* capacity - 1 */
  int nused;
  HeapItem *heap;
  int nheap, heapcap;
  Arena *arena;
} Search;

static unsigned hash_set(IdxSet s) {
  s ^= s >> 33;
  s *= 0xff51afd7ed558ccdULL;
  s ^= s >> 33;
  return (unsigned)s;
}

static Slot *lookup(Search *q, IdxSet set) {
  unsigned h = hash_set(set) & q->mask;
  while (q->slot[h].used && q->slot[h].set != set) h = (h + 1) & q->mask;
  return &q->slot[h];
}

/* Double the table in the arena; 0 when impossible (the caller stops). */
static int grow_table(Search *q) {
  unsigned cap = 2 * (q->mask + 1);
  if (q->slot == q->stack && cap <= STACK_SLOTS) { /* grow in place */
    Slot old[STACK_SLOTS / 2];
    unsigned oldcap = q->mask + 1, n = 0;
    for (unsigned k = 0; k < oldcap; k++)
      if (q->slot[k].used) old[n++] = q->slot[k];
    memset(q->slot, 0, cap * sizeof *q->slot);
    q->mask = cap - 1;
    for (unsigned k = 0; k < n; k++) *lookup(q, old[k].set) = old[k];
    return 1;
  }
  if (!q->arena || cap > 4 * WORK_LIMIT) return 0;
  Slot *old = q->slot;
  unsigned oldcap = q->mask + 1;
  q->slot = arena_alloc(q->arena, cap * sizeof *q->slot);
  if (!q->slot) {
    q->slot = old;
    return 0;
  }
  q->mask = cap - 1;
  for (unsigned k = 0; k < oldcap; k++)
    if (old[k].used) *lookup(q, old[k].set) = old[k];
  return 1;
}

static int heap_less(const HeapItem *a, const HeapItem *b) {
  return a->w < b->w || (a->w == b->w && a->set < b->set);
}

static int heap_push(Search *q, double w, IdxSet set) {
  if (q->nheap == q->heapcap) {
    if (!q->arena) return 0;
    HeapItem *h = arena_alloc(q->arena, 2 * (size_t)q->heapcap * sizeof *h);
    if (!h) return 0;
    memcpy(h, q->heap, (size_t)q->nheap * sizeof *h);
    q->heap = h;
    q->heapcap *= 2;
  }
  int k = q->nheap++;
  HeapItem it = {w, set};
  while (k > 0 && heap_less(&it, &q->heap[(k - 1) / 2])) {
    q->heap[k] = q->heap[(k - 1) / 2];
    k = (k - 1) / 2;
  }
  q->heap[k] = it;
  return 1;
}

static HeapItem heap_pop(Search *q) {
  HeapItem top = q->heap[0], last = q->heap[--q->nheap];
  int k = 0;
  for (;;) {
    int ch = 2 * k + 1;
    if (ch >= q->nheap) break;
    if (ch + 1 < q->nheap && heap_less(&q->heap[ch + 1], &q->heap[ch])) ch++;
    if (!heap_less(&q->heap[ch], &last)) break;
    q->heap[k] = q->heap[ch];
    k = ch;
  }
  if (q->nheap) q->heap[k] = last;
  return top;
}

/* Record weight w for set y (if better) and the bound it gives; 0 when
 * out of room.
 *
 * Most relaxations change nothing, and they are the search's work (a
 * 31-factor subgraph query: 150k of them a plan), so the cheap tests come
 * first, each giving what the plain order (bound, then table) gives:
 * every size is at least 1 (a statistic with a size-0 index is empty and
 * never searched), so the bound w * size(target \ y) >= w can lower
 * `best` only when w < best; a set already reached at a weight <= w gave
 * a bound <= this one.  The size of target \ y is kept with y's slot.
 * The table's growth (which may fail and stop the search) is tested
 * where the plain order tests it: before any lookup that may store. */
static int relax(Search *q, const TensorStats *s, IdxSet target, IdxSet y,
                 double w, double *best) {
  if (w >= *best) return 1;
  IdxSet outside = target & ~y;
  if (!outside) { /* the bound is w itself */
    *best = w;
    return 1;
  }
  int full = 2 * (q->nused + 1) > (int)q->mask + 1;
  Slot *sl = full ? NULL : lookup(q, y);
  if (sl && sl->used && sl->w <= w) return 1;
  double rest = sl && sl->used ? sl->rest : stats_dense(s->dims, outside);
  double b = clampw(w * rest);
  if (b < *best) *best = b;
  if (w >= *best) return 1;
  if (full) {
    if (!grow_table(q)) return 0;
    sl = lookup(q, y);
    if (sl->used && sl->w <= w) return 1;
  }
  if (!sl->used) q->nused++;
  *sl = (Slot){y, w, rest, 1};
  return heap_push(q, w, y);
}

/* The kept bound of (target | cond), or NULL. */
static const double *kept_bound(const TensorStats *s, IdxSet target,
                                IdxSet cond) {
  const struct ChainMemo *m = s->memo;
  for (int k = 0; m && k < m->n; k++)
    if (m->target[k] == target && m->cond[k] == cond) return &m->bound[k];
  return NULL;
}

/* Keep a bound found (s is logically const: the memo only repeats what
 * the search finds); nothing when out of memory. */
static void keep_bound(const TensorStats *cs, IdxSet target, IdxSet cond,
                       double bound, Arena *scratch) {
  TensorStats *s = (TensorStats *)cs;
  if (!s->memo) {
    s->memo = arena_alloc(scratch, sizeof *s->memo);
    if (!s->memo) return;
    s->memo->n = s->memo->next = 0;
  }
  struct ChainMemo *m = s->memo;
  int k = m->n < CHAIN_MEMO ? m->n++ : m->next;
  m->next = (k + 1) % CHAIN_MEMO;
  m->target[k] = target;
  m->cond[k] = cond;
  m->bound[k] = bound;
}

static double search_bound(const TensorStats *s, IdxSet target, IdxSet cond,
                           double best, Arena *scratch);

double chain_bound(const TensorStats *s, IdxSet target, IdxSet cond,
                   Arena *scratch, StatsCache *shared) {
  if (s->empty) return 0;
  target |= cond;
  double best = clampw(stats_dense(s->dims, target & ~cond));
  if (best <= 1 || s->ndc == 0) return best;
  if (!scratch) /* the search may stop short of room: not kept */
    return search_bound(s, target, cond, best, NULL);
  const double *kept = kept_bound(s, target, cond);
  if (kept) return *kept;
  uint64_t key = shared ? chain_key(s) : 0;
  double found;
  if (shared && stats_cache_find_bound(shared, key, target, cond, &found)) {
    keep_bound(s, target, cond, found, scratch);
    return found;
  }
  best = search_bound(s, target, cond, best, scratch);
  keep_bound(s, target, cond, best, scratch);
  if (shared) stats_cache_keep_bound(shared, key, target, cond, best);
  return best;
}

/* chain_bound's best-first search from the bound `best` of the sizes. */
static double search_bound(const TensorStats *s, IdxSet target, IdxSet cond,
                           double best, Arena *scratch) {
  Slot slots[STACK_SLOTS];
  HeapItem heap[STACK_SLOTS];
  memset(slots, 0, FIRST_SLOTS * sizeof *slots);
  Search q = {slots, slots, FIRST_SLOTS - 1, 0, heap, 0, STACK_SLOTS, scratch};
  int ok = relax(&q, s, target, cond, 1, &best);
  for (int work = 0; ok && q.nheap && work < WORK_LIMIT; work++) {
    HeapItem it = heap_pop(&q);
    if (it.w >= best) break; /* everything left weighs more */
    if (lookup(&q, it.set)->w < it.w) continue; /* stale entry */
    for (int k = 0; k < s->ndc && ok; k++) {
      const StatsDC *dc = &s->dc[k];
      IdxSet y = it.set | dc->cond | dc->counted;
      if (y == it.set) continue;
      double w = it.w * dc->d;
      if (w >= best) continue; /* as relax would: sizes only add */
      if (dc->cond & ~it.set) w *= stats_dense(s->dims, dc->cond & ~it.set);
      ok = relax(&q, s, target, y, clampw(w), &best);
    }
  }
  return best;
}
