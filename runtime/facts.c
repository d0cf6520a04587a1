/*
 * facts.c -- what a tensor keeps about its stored values: its facts (one
 * pass: nnz, value range, non-finite counts, integrality), whether it is
 * symmetric (only when asked: it costs more), and the converted copies
 * (transposes) that runs ask for.
 *
 * A tensor is logically const once built, so all of this hangs off one
 * pointer, t->cache, made the first time it is needed.  Reading threads
 * may race to make it: each computes the facts, and the first to install
 * its cache with an atomic compare-and-swap wins (the others free
 * theirs).  The symmetry flag is a word written once per value; the
 * copies form a list that only grows, by compare-and-swap at its head.
 * So any number of threads may read a tensor, bind it and run programs on
 * it at once.  galley_tensor_touch drops the whole cache and must not run
 * concurrently with anything else on the tensor.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "rt_stats.h"

/* A converted copy of a tensor, kept for the next run that needs it. */
typedef struct rt_conversion {
  struct rt_conversion *next;
  galley_format fmt;   /* its format */
  double fill;         /* the fill it was made with */
  galley_tensor *t;    /* owned */
} rt_conversion;

/* At most this many results are kept with one tensor. */
#define RT_MEMO_MAX 16

/* A result derived from the tensor alone, kept for the next run that
 * computes it again (rt_tensor_memo). */
typedef struct rt_memo {
  struct rt_memo *next;
  uint64_t key[2];
  galley_tensor *t;    /* owned */
} rt_memo;

/* Degree statistics made for one sample size. */
typedef struct rt_kept_stats {
  int64_t sample;
  galley_degree_stats ds;
} rt_kept_stats;

typedef struct rt_kept_sliced {
  double fill;           /* the fill of its padding */
  galley_rt_sliced *s;   /* NULL: t cannot be sliced (rt_sliced_make) */
} rt_kept_sliced;

/* An array of work weights kept with a tensor, for one partner
 * (rt_tensor_kept_weights). */
typedef struct rt_kept_weights {
  const void *key;
  int64_t n;
  int64_t *w;
} rt_kept_weights;

/* Sizes a run noted with a tensor for the next run (rt_tensor_note_sizes):
 * every field atomic, so that runs on two threads may note at once; a
 * reader checks key and tag before and after it reads. */
#define RT_NOTED_MAX 64
typedef struct rt_noted_sizes {
  const void *key;
  int64_t tag;
  int n;
  int64_t v[RT_NOTED_MAX];
} rt_noted_sizes;

typedef struct rt_cache {
  galley_facts facts;   /* computed when the cache is made, then fixed */
  int symmetry;         /* -1 not known yet, else rt_tensor_symmetry */
  rt_conversion *conv;  /* the copies, newest first */
  rt_exceptions *exc;   /* the non-finite entries, made when asked for */
  rt_kept_stats *stats; /* degree statistics, installed once, or NULL */
  rt_memo *memo;        /* results kept (rt_tensor_memo), newest first */
  rt_kept_sliced *sliced; /* the sliced copy, installed once, or NULL */
  rt_kept_weights *weights; /* work weights, installed once, or NULL */
  rt_noted_sizes *noted;    /* installed once, then rewritten, or NULL */
} rt_cache;

static void exceptions_free(rt_exceptions *e);

static rt_cache *cache_load(const galley_tensor *t) {
  return __atomic_load_n((void *const *)&t->cache, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ */
/* The pass                                                            */
/* ------------------------------------------------------------------ */

/* Running totals of the pass; fills counts values equal to the fill. */
typedef struct FactsAcc {
  int64_t fills, nonfinite;
  double min, max;
  int integer;
} FactsAcc;

/* Whether finite v is a whole number: always from 2^52 on, where a
 * double has no fraction bits; below, when truncation keeps it. */
static inline int whole(double v) {
  return fabs(v) >= 0x1p52 || (double)(int64_t)v == v;
}

static inline void acc_value(FactsAcc *a, double v, double fill) {
  a->fills += rt_is_fill(v, fill);
  if (v - v != 0) { /* NaN or an infinity: counted in a second pass */
    a->nonfinite++;
    return;
  }
  a->min = v < a->min ? v : a->min;
  a->max = v > a->max ? v : a->max;
  a->integer &= whole(v);
}

/* Two lanes of doubles and of their compare masks (0 or -1), as GCC's
 * vector extension: one SSE2 register on x86-64. */
typedef double v2d __attribute__((vector_size(16)));
typedef long long v2l __attribute__((vector_size(16)));

/* Lane by lane: m ? x : y. */
#define V2D_SELECT(m, x, y) ((v2d)(((v2l)(x) & (m)) | ((v2l)(y) & ~(m))))

/* One step of acc_flat on the two values at p into one set of lanes;
 * WHOLE says whether to look for fractions. */
#define V2_STEP(p, L, WHOLE)                                                  \
  do {                                                                        \
    v2d x_;                                                                   \
    memcpy(&x_, (p), sizeof x_);                                              \
    v2l fin_ = (x_ - x_) == zero; /* not NaN, not an infinity */             \
    (L).fills -= x_ == f;                                                     \
    (L).finite -= fin_;                                                       \
    if (WHOLE) {                                                              \
      v2d ax_ = (v2d)((v2l)x_ & abs_mask);                                    \
      v2l whole_ = (((ax_ + big) - big) == ax_) | (ax_ >= big);               \
      (L).fraction |= fin_ & ~whole_;                                         \
    }                                                                         \
    (L).lo = V2D_SELECT(fin_ & (x_ < (L).lo), x_, (L).lo);                    \
    (L).hi = V2D_SELECT(fin_ & (x_ > (L).hi), x_, (L).hi);                    \
  } while (0)

/* Two lanes' running totals of acc_flat. */
typedef struct Lanes {
  v2l fills, finite, fraction;
  v2d lo, hi;
} Lanes;

/* Values per block of acc_flat: after a block with a fraction, the rest
 * skips the search for fractions. */
#define FLAT_BLOCK 4096

/* Values val[0 .. n), all stored: the common case, four values at a time
 * in two independent sets of lanes, without branches.  A finite x is
 * whole when |x| >= 2^52 (no fraction bits) or when rounding it to an
 * integer, by adding and subtracting 2^52, gives it back.  NaN fills go
 * the scalar way. */
static void acc_flat(FactsAcc *a, const double *val, int64_t n, double fill) {
  int64_t q = 0;
  if (fill == fill && n >= 4) {
    const v2d f = {fill, fill}, big = {0x1p52, 0x1p52}, zero = {0, 0};
    const v2l abs_mask = {INT64_MAX, INT64_MAX};
    Lanes L0 = {{0, 0}, {0, 0}, {0, 0}, {a->min, a->min}, {a->max, a->max}};
    Lanes L1 = L0;
    while (q + 4 <= n) {
      int64_t end = n - q > FLAT_BLOCK ? q + FLAT_BLOCK : n;
      if ((L0.fraction[0] | L0.fraction[1] | L1.fraction[0] |
           L1.fraction[1]) == 0)
        for (; q + 4 <= end; q += 4) {
          V2_STEP(val + q, L0, 1);
          V2_STEP(val + q + 2, L1, 1);
        }
      else
        for (; q + 4 <= end; q += 4) {
          V2_STEP(val + q, L0, 0);
          V2_STEP(val + q + 2, L1, 0);
        }
    }
    a->nonfinite += q; /* less the finite ones, lane by lane: */
    for (int k = 0; k < 2; k++) {
      a->fills += L0.fills[k] + L1.fills[k];
      a->nonfinite -= L0.finite[k] + L1.finite[k];
      double lo = L0.lo[k] < L1.lo[k] ? L0.lo[k] : L1.lo[k];
      double hi = L0.hi[k] > L1.hi[k] ? L0.hi[k] : L1.hi[k];
      a->min = lo < a->min ? lo : a->min;
      a->max = hi > a->max ? hi : a->max;
      a->integer &= (L0.fraction[k] | L1.fraction[k]) == 0;
    }
  }
  for (; q < n; q++)
    acc_value(a, val[q], fill);
}

/* Classify the non-finite stored values (rare: a second pass only when
 * the first met some). */
static inline void count_nonfinite(galley_facts *f, double v) {
  if (v != v)
    f->nan++;
  else if (v - v != 0)
    *(v > 0 ? &f->pos_inf : &f->neg_inf) += 1;
}

/* Whether every value slot of t is a stored entry (no slot under an
 * unset bytemap entry), so that the pass may read val[] straight. */
static int all_slots_stored(const galley_tensor *t, int64_t stored) {
  return stored == t->nval;
}

/* Run STMT for every stored value v of t (declared by the macro). */
#define FOR_EACH_STORED_VALUE(t, flat, v, STMT)                               \
  do {                                                                        \
    if (flat) {                                                               \
      for (int64_t q_ = 0; q_ < (t)->nval; q_++) {                            \
        double v = (t)->val[q_];                                              \
        STMT;                                                                 \
      }                                                                       \
    } else {                                                                  \
      rt_cursor cur_;                                                         \
      RT_FOR_EACH_STORED(t, cur_, i_, q_, {                                   \
        (void)i_;                                                             \
        double v = (t)->val[q_];                                              \
        STMT;                                                                 \
      });                                                                     \
    }                                                                         \
  } while (0)

/* How many of val[0 .. n) from the start all hold the bits of val[0]
 * (the 1s of a pattern or of a 0/1 join table), counted in whole blocks
 * (n when all do): one compare a value, in blocks that vectorize and end
 * the test at the first block that varies.  The values counted need no
 * other look (acc_same); the rest go through acc_flat. */
static int64_t same_bits_prefix(const double *val, int64_t n) {
  uint64_t first;
  memcpy(&first, val, sizeof first);
  for (int64_t q = 0; q < n; q += FLAT_BLOCK) {
    int64_t end = n - q > FLAT_BLOCK ? q + FLAT_BLOCK : n;
    uint64_t diff = 0;
    for (int64_t x = q; x < end; x++) {
      uint64_t b;
      memcpy(&b, val + x, sizeof b);
      diff |= b ^ first;
    }
    if (diff)
      return q;
  }
  return n;
}

/* The facts pass over n stored values that are all val[0]: one value's
 * worth, n times. */
static void acc_same(FactsAcc *a, double v, int64_t n, double fill) {
  FactsAcc one = {0, 0, INFINITY, -INFINITY, 1};
  acc_value(&one, v, fill);
  a->fills += one.fills * n;
  a->nonfinite += one.nonfinite * n;
  a->min = one.min < a->min ? one.min : a->min;
  a->max = one.max > a->max ? one.max : a->max;
  a->integer &= one.integer;
}

void rt_facts_compute(const galley_tensor *t, galley_facts *out) {
  galley_facts f = {0};
  FactsAcc a = {0, 0, INFINITY, -INFINITY, 1};
  double fill = t->fill;
  f.stored = galley_tensor_stored(t);
  int flat = t->order == 0 || all_slots_stored(t, f.stored);
  if (flat) {
    int64_t same = t->nval > 0 ? same_bits_prefix(t->val, t->nval) : 0;
    if (same > 0)
      acc_same(&a, t->val[0], same, fill);
    acc_flat(&a, t->val + same, t->nval - same, fill);
  } else {
    FOR_EACH_STORED_VALUE(t, 0, v, acc_value(&a, v, fill));
  }
  if (a.nonfinite > 0) {
    FOR_EACH_STORED_VALUE(t, flat, v, count_nonfinite(&f, v));
    a.integer = 0;
  }
  f.nnz = f.stored - a.fills;
  f.min = a.min;
  f.max = a.max;
  f.integer = a.integer;
  *out = f;
}

/* How many of v[0 .. n) are the fill (rt_is_fill): one compare a value,
 * which the compiler vectorizes, against the cursor walk of a count. */
static int64_t count_fills_flat(const double *v, int64_t n, double fill) {
  int64_t fills = 0;
  if (fill == fill) {
    for (int64_t q = 0; q < n; q++)
      fills += v[q] == fill;
    return fills;
  }
  uint64_t bits;
  memcpy(&bits, &fill, sizeof bits);
  for (int64_t q = 0; q < n; q++) {
    uint64_t b;
    memcpy(&b, v + q, sizeof b);
    fills += b == bits;
  }
  return fills;
}

int64_t rt_tensor_nnz_quick(const galley_tensor *t) {
  const galley_facts *f = rt_tensor_cached_facts(t);
  if (f)
    return f->nnz;
  int64_t stored = galley_tensor_stored(t);
  if (t->order == 0 || !all_slots_stored(t, stored))
    return rt_tensor_count_nnz(t);
  return stored - count_fills_flat(t->val, t->nval, t->fill);
}

/* ------------------------------------------------------------------ */
/* Degree statistics of the levels                                     */
/* ------------------------------------------------------------------ */

static inline int64_t level_pos(const galley_level *L, int64_t p) {
  return L->idx32 ? L->pos32[p] : L->pos[p];
}

void rt_tensor_level_degrees(const galley_tensor *t, rt_level_degrees *out) {
  memset(out, 0, sizeof *out);
  out->nlevels = t->order;
  for (int l = 0; l < t->order; l++) {
    const galley_level *L = &t->lvl[l];
    out->mode[l] = L->mode;
    out->children[l] = L->nset;
    if (L->kind == GALLEY_RT_DENSE) {
      out->known[l] = 1;
      out->fibers[l] = L->dim > 0 ? L->npar : 0;
      out->max_fiber[l] = L->dim;
      continue;
    }
    if (!(L->idx32 ? L->pos32 != NULL : L->pos != NULL))
      continue; /* an unfrozen hash: no offsets to read */
    int64_t nonempty = 0, most = 0;
    for (int64_t p = 0; p < L->npar; p++) {
      int64_t len = level_pos(L, p + 1) - level_pos(L, p);
      nonempty += len > 0;
      most = len > most ? len : most;
    }
    out->known[l] = 1;
    out->fibers[l] = nonempty;
    out->max_fiber[l] = most;
  }
}

/* ------------------------------------------------------------------ */
/* The cache                                                           */
/* ------------------------------------------------------------------ */

void rt_cache_free(void *cache) {
  rt_cache *c = cache;
  if (!c)
    return;
  for (rt_conversion *v = c->conv, *next; v; v = next) {
    next = v->next;
    galley_tensor_free(v->t);
    free(v);
  }
  exceptions_free(c->exc);
  free(c->stats);
  for (rt_memo *m = c->memo, *next; m; m = next) {
    next = m->next;
    galley_tensor_free(m->t);
    free(m);
  }
  if (c->sliced) free(c->sliced->s);
  free(c->sliced);
  if (c->weights) free(c->weights->w);
  free(c->weights);
  free(c->noted);
  free(c);
}

/* t's cache, made (with the facts) when missing; NULL when out of
 * memory. */
static rt_cache *cache_with(const galley_tensor *t, const galley_facts *f) {
  rt_cache *c = cache_load(t);
  if (c)
    return c;
  c = malloc(sizeof *c);
  if (!c)
    return NULL;
  if (f)
    c->facts = *f;
  else
    rt_facts_compute(t, &c->facts);
  c->symmetry = -1;
  c->conv = NULL;
  c->exc = NULL;
  c->stats = NULL;
  c->memo = NULL;
  c->sliced = NULL;
  c->weights = NULL;
  c->noted = NULL;
  void *expected = NULL;
  if (__atomic_compare_exchange_n((void **)&t->cache, &expected, c, 0,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return c;
  free(c); /* another thread installed its cache first */
  return expected;
}

static rt_cache *cache_get(const galley_tensor *t) {
  return cache_with(t, NULL);
}

void rt_tensor_set_facts(const galley_tensor *t, const galley_facts *f) {
  (void)cache_with(t, f); /* no memory: computed when asked for */
}

galley_status rt_tensor_cache_facts(const galley_tensor *t,
                                    galley_error *err) {
  return cache_get(t) ? GALLEY_OK
                      : rt_error(err, GALLEY_ENOMEM, "out of memory");
}

void rt_tensor_facts(const galley_tensor *t, galley_facts *out) {
  const rt_cache *c = cache_get(t);
  if (c)
    *out = c->facts;
  else
    rt_facts_compute(t, out); /* no memory to keep them: compute anyway */
}

const galley_facts *rt_tensor_cached_facts(const galley_tensor *t) {
  const rt_cache *c = cache_load(t);
  return c ? &c->facts : NULL;
}

galley_status galley_tensor_facts(const galley_tensor *t, galley_facts *out,
                                  galley_error *err) {
  rt_error_clear(err);
  if (!t || !out)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_tensor_facts: %s is NULL", t ? "out" : "t");
  rt_tensor_facts(t, out);
  return GALLEY_OK;
}

int64_t galley_tensor_nnz(const galley_tensor *t) {
  const rt_cache *c = cache_get(t);
  return c ? c->facts.nnz : rt_tensor_count_nnz(t);
}

void galley_tensor_touch(galley_tensor *t) {
  if (!t)
    return;
  rt_cache_free(t->cache);
  t->cache = NULL;
}

/* ------------------------------------------------------------------ */
/* Symmetry                                                            */
/* ------------------------------------------------------------------ */

/* The value at level-order coordinates (a, b) of matrix t. */
static double value_at(const galley_tensor *t, galley_crd a, galley_crd b) {
  galley_pos p = galley_rt_locate(&t->lvl[0], 0, a);
  if (p >= 0)
    p = galley_rt_locate(&t->lvl[1], p, b);
  return p >= 0 ? t->val[p] : t->fill;
}

static int same_value(double v, double w) {
  return v == w || memcmp(&v, &w, sizeof v) == 0;
}

/* compute_symmetric for a dense level over a list level (CSR or CSC), in
 * O(nnz) with a cursor per fiber instead of a search per entry: walking
 * fibers a = 0, 1, ... in order, the mirror of (a, b) is looked for in
 * fiber b at or after at[b], which therefore only moves forward.
 * Returns -1 when out of memory. */
#define SYMMETRIC_BY_CURSORS(POS, CRD)                                        \
  do {                                                                        \
    for (galley_pos a = 0; a <= n; a++)                                       \
      at[a] = (POS)[a];                                                       \
    for (galley_crd a = 0; a < n && sym; a++)                                 \
      for (galley_pos k = (POS)[a]; k < (POS)[a + 1] && sym; k++) {           \
        galley_crd b = (CRD)[k];                                              \
        galley_pos m = at[b], end = (POS)[b + 1];                             \
        while (m < end && (CRD)[m] < a)                                       \
          m++;                                                                \
        at[b] = m;                                                            \
        sym = same_value(val[k], m < end && (CRD)[m] == a ? val[m] : fill);   \
      }                                                                       \
  } while (0)

static int symmetric_by_cursors(const galley_tensor *t) {
  const galley_level *L = &t->lvl[1];
  const double *val = t->val, fill = t->fill;
  int64_t n = t->lvl[0].dim;
  galley_pos *at = rt_malloc_array(n + 1, sizeof *at);
  if (!at)
    return -1;
  int sym = 1;
  if (L->idx32)
    SYMMETRIC_BY_CURSORS(L->pos32, L->crd32);
  else
    SYMMETRIC_BY_CURSORS(L->pos, L->crd);
  free(at);
  return sym;
}
#undef SYMMETRIC_BY_CURSORS

/* Every stored entry that is not the fill must be matched by its mirror
 * image (stored or not); an entry whose mirror is not the fill is itself
 * checked when its turn comes, so one pass over the stored entries
 * covers every pair.  Swapping the two logical modes swaps the two
 * level-order coordinates too, whatever the mode order. */
static int compute_symmetric(const galley_tensor *t) {
  if (t->order != 2 || t->dims[0] != t->dims[1])
    return 0;
  if (t->lvl[0].kind == GALLEY_RT_DENSE && t->lvl[1].kind == GALLEY_RT_LIST) {
    int sym = symmetric_by_cursors(t);
    if (sym >= 0)
      return sym;
  }
  rt_cursor c;
  galley_pos q;
  rt_cursor_init(&c, t, 2);
  while ((q = rt_cursor_next(&c)) >= 0) {
    double v = t->val[q];
    if (rt_is_fill(v, t->fill))
      continue;
    if (!same_value(v, value_at(t, c.crd[1], c.crd[0])))
      return 0;
  }
  return 1;
}

/* Whether every stored diagonal entry of square matrix t holds 0. */
static int zero_diagonal(const galley_tensor *t) {
  for (galley_crd i = 0; i < t->dims[0]; i++) {
    galley_pos p = galley_rt_locate(&t->lvl[0], 0, i);
    if (p >= 0)
      p = galley_rt_locate(&t->lvl[1], p, i);
    if (p >= 0 && t->val[p] != 0)
      return 0;
  }
  return 1;
}

static int compute_symmetry(const galley_tensor *t) {
  if (t->order != 2 || t->dims[0] != t->dims[1])
    return 0;
  return (compute_symmetric(t) ? RT_SYMMETRIC : 0) |
         (zero_diagonal(t) ? RT_ZERO_DIAGONAL : 0);
}

int rt_tensor_symmetry(const galley_tensor *t) {
  rt_cache *c = cache_get(t);
  if (!c)
    return compute_symmetry(t);
  int s = __atomic_load_n(&c->symmetry, __ATOMIC_RELAXED);
  if (s < 0) {
    s = compute_symmetry(t);
    __atomic_store_n(&c->symmetry, s, __ATOMIC_RELAXED);
  }
  return s;
}

int rt_tensor_symmetry_known(const galley_tensor *t) {
  const rt_cache *c = cache_load(t);
  return c ? __atomic_load_n(&c->symmetry, __ATOMIC_RELAXED) : -1;
}

int rt_tensor_symmetric(const galley_tensor *t) {
  return (rt_tensor_symmetry(t) & RT_SYMMETRIC) != 0;
}

int galley_tensor_is_symmetric(const galley_tensor *t) {
  return t ? rt_tensor_symmetric(t) : 0;
}

/* ------------------------------------------------------------------ */
/* Converted copies                                                    */
/* ------------------------------------------------------------------ */

int rt_format_same(const galley_format *a, const galley_format *b) {
  if (a->order != b->order)
    return 0;
  for (int l = 0; l < a->order; l++)
    if (a->mode_order[l] != b->mode_order[l] || a->kinds[l] != b->kinds[l])
      return 0;
  return 1;
}

/* The copy in fmt with fill among list .. stop (exclusive), or NULL. */
static rt_conversion *find_copy(rt_conversion *list, rt_conversion *stop,
                                const galley_format *fmt, double fill) {
  for (rt_conversion *v = list; v != stop; v = v->next)
    if (rt_format_same(&v->fmt, fmt) &&
        memcmp(&v->fill, &fill, sizeof fill) == 0)
      return v;
  return NULL;
}

const galley_tensor *rt_tensor_converted_kept(const galley_tensor *t,
                                              const galley_format *fmt,
                                              double fill) {
  const rt_cache *c = cache_load(t);
  const rt_conversion *v =
      c ? find_copy(__atomic_load_n(&c->conv, __ATOMIC_ACQUIRE), NULL, fmt,
                    fill)
        : NULL;
  return v ? v->t : NULL;
}

/* Convert t, read with fill `fill`, into fmt: on a view sharing t's
 * arrays, with its own (empty) cache. */
galley_status rt_tensor_convert_fill(const galley_tensor *t,
                                     const galley_format *fmt, double fill,
                                     galley_tensor **out, galley_error *err) {
  return rt_tensor_convert_fill_par(t, fmt, fill, NULL, out, err);
}

galley_status rt_tensor_convert_fill_par(const galley_tensor *t,
                                         const galley_format *fmt,
                                         double fill, const rt_par *par,
                                         galley_tensor **out,
                                         galley_error *err) {
  galley_tensor view = *t;
  view.cache = NULL;
  view.fill = fill;
  galley_status st = rt_tensor_convert_par(&view, fmt, par, out, err);
  rt_cache_free(view.cache); /* should conversion have made one */
  return st;
}

/* Add node to c's list unless another thread added the same copy
 * meanwhile; returns the copy that is in the list. */
static rt_conversion *push_copy(rt_cache *c, rt_conversion *node) {
  rt_conversion *seen = NULL, *head = __atomic_load_n(&c->conv,
                                                      __ATOMIC_ACQUIRE);
  for (;;) {
    rt_conversion *dup = find_copy(head, seen, &node->fmt, node->fill);
    if (dup) {
      galley_tensor_free(node->t);
      free(node);
      return dup;
    }
    node->next = head;
    seen = head;
    if (__atomic_compare_exchange_n(&c->conv, &head, node, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      return node;
  }
}

galley_status rt_tensor_converted(const galley_tensor *t,
                                  const galley_format *fmt, double fill,
                                  const galley_tensor **out,
                                  galley_error *err) {
  return rt_tensor_converted_par(t, fmt, fill, NULL, out, err);
}

galley_status rt_tensor_converted_par(const galley_tensor *t,
                                      const galley_format *fmt, double fill,
                                      const rt_par *par,
                                      const galley_tensor **out,
                                      galley_error *err) {
  *out = NULL;
  rt_cache *c = cache_get(t);
  if (!c)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  rt_conversion *v =
      find_copy(__atomic_load_n(&c->conv, __ATOMIC_ACQUIRE), NULL, fmt, fill);
  if (!v) {
    galley_tensor *copy = NULL;
    galley_status st =
        rt_tensor_convert_fill_par(t, fmt, fill, par, &copy, err);
    if (st != GALLEY_OK)
      return st;
    /* its facts too, once, so that runs that count its nnz read them
     * (without memory for them they are only not kept) */
    (void)rt_tensor_cache_facts(copy, NULL);
    v = malloc(sizeof *v);
    if (!v) {
      galley_tensor_free(copy);
      return rt_error(err, GALLEY_ENOMEM, "out of memory");
    }
    v->fmt = *fmt;
    v->fill = fill;
    v->t = copy;
    v = push_copy(c, v);
  }
  *out = v->t;
  return GALLEY_OK;
}

/* The result kept for key among list .. stop (exclusive), or NULL. */
static rt_memo *find_memo(rt_memo *list, rt_memo *stop, const uint64_t *key) {
  for (rt_memo *m = list; m != stop; m = m->next)
    if (m->key[0] == key[0] && m->key[1] == key[1])
      return m;
  return NULL;
}

const galley_tensor *rt_tensor_memo(const galley_tensor *t,
                                    const uint64_t key[2]) {
  const rt_cache *c = cache_load(t);
  rt_memo *m = c ? find_memo(__atomic_load_n(&c->memo, __ATOMIC_ACQUIRE),
                             NULL, key)
                 : NULL;
  return m ? m->t : NULL;
}

galley_status rt_tensor_memo_keep(const galley_tensor *t,
                                  const uint64_t key[2], galley_tensor *value,
                                  galley_error *err) {
  rt_cache *c = cache_get(t);
  rt_memo *node = c ? malloc(sizeof *node) : NULL;
  if (!node) {
    galley_tensor_free(value);
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  node->key[0] = key[0];
  node->key[1] = key[1];
  node->t = value;
  rt_memo *seen = NULL, *head = __atomic_load_n(&c->memo, __ATOMIC_ACQUIRE);
  int kept = 0;
  for (rt_memo *m = head; m; m = m->next)
    kept++;
  for (;;) {
    if (kept >= RT_MEMO_MAX || find_memo(head, seen, key)) {
      /* enough kept (each plan keeps its own), or another thread kept
       * it first */
      galley_tensor_free(value);
      free(node);
      return GALLEY_OK;
    }
    node->next = head;
    seen = head;
    if (__atomic_compare_exchange_n(&c->memo, &head, node, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      return GALLEY_OK;
  }
}

int rt_tensor_num_converted(const galley_tensor *t) {
  const rt_cache *c = cache_load(t);
  int n = 0;
  for (const rt_conversion *v = c ? c->conv : NULL; v; v = v->next)
    n++;
  return n;
}

/* ------------------------------------------------------------------ */
/* Non-finite entries (exception splitting, issue 12)                  */
/* ------------------------------------------------------------------ */

static void exceptions_free(rt_exceptions *e) {
  if (!e)
    return;
  free(e->crd);
  free(e->val);
  if (e->finite) {
    free(e->finite->val); /* the view's own values; its levels are t's */
    galley_tensor_free(e->finite);
  }
  free(e);
}

/* Record the non-finite stored entries of t (logical coordinates) and
 * make the view of t whose values have them replaced by 0. */
static galley_status exceptions_make(const galley_tensor *t, int64_t count,
                                     rt_exceptions **out, galley_error *err) {
  rt_exceptions *e = calloc(1, sizeof *e);
  galley_tensor *view = e ? malloc(sizeof *view) : NULL;
  double *val = view ? rt_malloc_array(t->nval > 0 ? t->nval : 1,
                                       sizeof *val)
                     : NULL;
  if (e)
    e->finite = view;
  if (view) {
    *view = *t;
    view->cache = NULL;
    view->borrowed = 1; /* the levels are t's; val is freed above */
    view->val = val;
  }
  if (e) {
    e->crd = rt_malloc_array(count * (t->order > 0 ? t->order : 1) + 1,
                             sizeof *e->crd);
    e->val = rt_malloc_array(count + 1, sizeof *e->val);
  }
  if (!e || !view || !val || !e->crd || !e->val) {
    if (view && !val) {
      e->finite = NULL;
      free(view);
    }
    exceptions_free(e);
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  e->order = t->order;
  if (t->nval > 0)
    memcpy(val, t->val, (size_t)t->nval * sizeof *val);
  int64_t n = 0;
  if (t->order == 0) {
    if (!isfinite(t->val[0])) {
      e->val[n++] = t->val[0];
      val[0] = 0;
    }
  } else {
    rt_cursor c;
    int last = t->order - 1;
    RT_FOR_EACH_STORED(t, c, i, q, {
      double v = t->val[q];
      if (v - v == 0 || n >= count)
        continue;
      for (int l = 0; l < last; l++)
        e->crd[n * t->order + t->lvl[l].mode] = c.crd[l];
      e->crd[n * t->order + t->lvl[last].mode] = i;
      e->val[n++] = v;
      val[q] = 0;
    });
  }
  e->n = n;
  *out = e;
  return GALLEY_OK;
}

galley_status rt_tensor_exceptions(const galley_tensor *t,
                                   const rt_exceptions **out,
                                   galley_error *err) {
  *out = NULL;
  rt_cache *c = cache_get(t);
  if (!c)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  rt_exceptions *e = __atomic_load_n(&c->exc, __ATOMIC_ACQUIRE);
  if (!e) {
    int64_t count = c->facts.nan + c->facts.pos_inf + c->facts.neg_inf;
    galley_status st = exceptions_make(t, count, &e, err);
    if (st != GALLEY_OK)
      return st;
    rt_exceptions *expected = NULL;
    if (!__atomic_compare_exchange_n(&c->exc, &expected, e, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      exceptions_free(e); /* another thread made them first */
      e = expected;
    }
  }
  *out = e;
  return GALLEY_OK;
}

const rt_exceptions *rt_tensor_exceptions_kept(const galley_tensor *t) {
  const rt_cache *c = cache_load(t);
  return c ? __atomic_load_n(&c->exc, __ATOMIC_ACQUIRE) : NULL;
}

/* ------------------------------------------------------------------ */
/* Degree statistics kept with the tensor                              */
/* ------------------------------------------------------------------ */

const galley_degree_stats *rt_tensor_degree_stats_kept(const galley_tensor *t,
                                                       int64_t sample) {
  rt_cache *c = cache_get(t);
  if (!c)
    return NULL;
  rt_kept_stats *k = __atomic_load_n(&c->stats, __ATOMIC_ACQUIRE);
  if (k)
    return k->sample == sample ? &k->ds : NULL;
  rt_kept_stats *mine = malloc(sizeof *mine);
  if (!mine || rt_degree_stats(t, sample, &mine->ds, NULL, NULL) != GALLEY_OK) {
    free(mine);
    return NULL;
  }
  mine->sample = sample;
  rt_kept_stats *expected = NULL;
  if (__atomic_compare_exchange_n(&c->stats, &expected, mine, 0,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return &mine->ds;
  free(mine); /* another thread kept its statistics first */
  return expected->sample == sample ? &expected->ds : NULL;
}

/* ------------------------------------------------------------------ */
/* The sliced copy kept with the tensor                                */
/* ------------------------------------------------------------------ */

const galley_rt_sliced *rt_tensor_sliced(const galley_tensor *t, double fill) {
  return rt_tensor_sliced_ex(t, fill, RT_SLICED_F32_MIN_BYTES);
}

const galley_rt_sliced *rt_tensor_sliced_ex(const galley_tensor *t, double fill,
                                            int64_t f32_min_bytes) {
  if (!rt_sliced_fits(t))
    return NULL;
  rt_cache *c = cache_get(t);
  if (!c)
    return NULL;
  rt_kept_sliced *k = __atomic_load_n(&c->sliced, __ATOMIC_ACQUIRE);
  if (!k) {
    rt_kept_sliced *mine = malloc(sizeof *mine);
    if (!mine)
      return NULL;
    mine->fill = fill;
    mine->s = rt_sliced_make(t, fill, f32_min_bytes);
    rt_kept_sliced *expected = NULL;
    if (__atomic_compare_exchange_n(&c->sliced, &expected, mine, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      k = mine;
    } else { /* another thread kept its copy first */
      free(mine->s);
      free(mine);
      k = expected;
    }
  }
  /* bitwise: a padding of -0 for a fill of +0 is another value */
  return memcmp(&k->fill, &fill, sizeof fill) == 0 ? k->s : NULL;
}

/* ------------------------------------------------------------------ */
/* Work weights kept with the tensor                                   */
/* ------------------------------------------------------------------ */

const int64_t *rt_tensor_kept_weights(const galley_tensor *t, const void *key,
                                      int64_t n) {
  const rt_cache *c = cache_load(t);
  const rt_kept_weights *k =
      c ? __atomic_load_n(&c->weights, __ATOMIC_ACQUIRE) : NULL;
  return k && k->key == key && k->n == n ? k->w : NULL;
}

int rt_tensor_keep_weights(const galley_tensor *t, const void *key,
                           int64_t *w, int64_t n) {
  rt_cache *c = cache_get(t);
  rt_kept_weights *mine = c ? malloc(sizeof *mine) : NULL;
  if (!mine)
    return 0;
  *mine = (rt_kept_weights){key, n, w};
  rt_kept_weights *expected = NULL;
  if (__atomic_compare_exchange_n(&c->weights, &expected, mine, 0,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return 1;
  free(mine); /* weights for another partner, or another thread's */
  return 0;
}

/* ------------------------------------------------------------------ */
/* Sizes noted with the tensor                                         */
/* ------------------------------------------------------------------ */

void rt_tensor_note_sizes(const galley_tensor *t, const void *key,
                          int64_t tag, const int64_t *v, int n) {
  rt_cache *c = n <= RT_NOTED_MAX ? cache_get(t) : NULL;
  if (!c)
    return;
  rt_noted_sizes *k = __atomic_load_n(&c->noted, __ATOMIC_ACQUIRE);
  if (!k) {
    rt_noted_sizes *mine = calloc(1, sizeof *mine);
    if (!mine)
      return;
    rt_noted_sizes *expected = NULL;
    if (__atomic_compare_exchange_n(&c->noted, &expected, mine, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      k = mine;
    } else {
      free(mine);
      k = expected;
    }
  }
  __atomic_store_n(&k->tag, (int64_t)-1, __ATOMIC_RELEASE); /* writing */
  __atomic_store_n(&k->key, key, __ATOMIC_RELEASE);
  __atomic_store_n(&k->n, n, __ATOMIC_RELEASE);
  for (int i = 0; i < n; i++)
    __atomic_store_n(&k->v[i], v[i], __ATOMIC_RELAXED);
  __atomic_store_n(&k->tag, tag, __ATOMIC_RELEASE);
}

int rt_tensor_noted_sizes(const galley_tensor *t, const void *key,
                          int64_t tag, int64_t *v, int n) {
  const rt_cache *c = cache_load(t);
  rt_noted_sizes *k = c ? __atomic_load_n(&c->noted, __ATOMIC_ACQUIRE) : NULL;
  if (!k || tag == -1 || __atomic_load_n(&k->tag, __ATOMIC_ACQUIRE) != tag ||
      __atomic_load_n(&k->key, __ATOMIC_ACQUIRE) != key ||
      __atomic_load_n(&k->n, __ATOMIC_ACQUIRE) != n)
    return 0;
  for (int i = 0; i < n; i++)
    v[i] = __atomic_load_n(&k->v[i], __ATOMIC_RELAXED);
  /* another run rewrote them meanwhile: not to be trusted */
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&k->tag, __ATOMIC_ACQUIRE) == tag &&
         __atomic_load_n(&k->key, __ATOMIC_ACQUIRE) == key;
}
