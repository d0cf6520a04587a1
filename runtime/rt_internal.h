/*
 * rt_internal.h -- helpers shared by the runtime's source files.  Not
 * installed, not part of the API.  Internal functions carry the rt_ prefix.
 */
#ifndef GALLEY_RT_INTERNAL_H
#define GALLEY_RT_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "galley.h"
#include "galley_rt.h"

/* Largest number of positions any one level may have (npar*dim), so that
 * p*dim + i never overflows int64_t. */
#define RT_MAX_POSITIONS ((int64_t)1 << 62)

/* ---- errors (error.c) ---- */

/* Record status and a printf-style message in err (which may be NULL);
 * returns status so that `return rt_error(err, GALLEY_EINVAL, ...)` reads
 * well. */
galley_status rt_error(galley_error *err, galley_status status,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record "FILE:LINE: error: MESSAGE" (LINE omitted when line <= 0) with
 * status GALLEY_EDATA. */
galley_status rt_data_error(galley_error *err, const char *file, int64_t line,
                            const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Set err to GALLEY_OK and an empty message. */
void rt_error_clear(galley_error *err);

/* ---- checked arithmetic and allocation (error.c) ---- */

/* *out = a*b; returns 1 when the product overflows int64_t (or either
 * factor is negative), 0 otherwise. */
int rt_mul_overflows(int64_t a, int64_t b, int64_t *out);

/* *out = a+b; returns 1 on overflow. */
int rt_add_overflows(int64_t a, int64_t b, int64_t *out);

/* malloc/calloc of count elements of size bytes; NULL when count*size
 * overflows size_t or memory runs out.  count 0 returns a valid pointer
 * that must be freed. */
void *rt_malloc_array(int64_t count, size_t size);
void *rt_calloc_array(int64_t count, size_t size);

/* Grow *buf (of *cap elements of size bytes) to hold at least need
 * elements, doubling; returns 0 on success, -1 when out of memory. */
int rt_grow(void **buf, int64_t *cap, size_t size, int64_t need);

/* ---- coordinate lists (coo.c) ---- */

/* A growable list of entries in logical coordinates, the common currency
 * between file readers and tensor builders. */
typedef struct rt_coo {
  int order;                         /* number of modes */
  int64_t dims[GALLEY_MAX_ORDER];    /* logical sizes */
  int64_t nnz;                       /* entries held */
  int64_t cap;                       /* capacity in entries */
  int64_t *crd;                      /* nnz*order coordinates, entry-major */
  double *val;                       /* nnz values */
  double fill;                       /* value of unlisted entries */
} rt_coo;

/* Start an empty list of the given order (dims all 0, fill 0). */
void rt_coo_init(rt_coo *coo, int order);

/* Make room for at least `more` further entries; -1 when out of memory. */
int rt_coo_reserve(rt_coo *coo, int64_t more);

/* Append one entry (coordinates copied from crd[0..order)); -1 when out of
 * memory. */
int rt_coo_push(rt_coo *coo, const int64_t *crd, double val);

/* Release the arrays; the list may be reused after rt_coo_init. */
void rt_coo_free(rt_coo *coo);

/* ---- tensors (tensor.c, build.c) ---- */

/* An empty (all-fill) tensor of the given order, dims and format: every
 * level allocated for zero stored entries (dense levels fully).  Used by
 * builders; NULL with err set on failure. */
galley_tensor *rt_tensor_new(int order, const int64_t *dims, double fill,
                             const galley_format *fmt, galley_error *err);

/* Check that fmt is a valid format for order (permutation, kinds);
 * GALLEY_EINVAL with a message otherwise. */
/* The format a tensor of nnz entries is built in when none is asked for:
 * galley_format_default, with a sorted-list root instead of a dense one
 * when the first mode has more than 16 coordinates per entry
 * (hypersparse). */
galley_format rt_format_for_entries(int order, const int64_t *dims,
                                    int64_t nnz);

galley_status rt_format_check(const galley_format *fmt, int order,
                              galley_error *err);

/* Build a tensor from the entries of coo, which is consumed: its arrays
 * serve as the sort's scratch and are freed (and set to NULL) as soon as
 * they are no longer needed, so reading holds one copy of the entries at a
 * time.  The caller still calls rt_coo_free. */
galley_status rt_tensor_from_coo(rt_coo *coo, const galley_format *fmt,
                                 galley_tensor **out, galley_error *err);

/* ---- index width (tensor.c; galley_rt.h says the layout) ---- */

/* Whether level L may store 32-bit indices (a list, bytemap or hash
 * level with dim <= 2^31 and nset < 2^31; a hash level's keys too:
 * npar*dim <= 2^31). */
int rt_level_fits32(const galley_level *L);

/* Store L's index arrays (pos and crd; a hash level's qos, key and slot
 * too) 32-bit (idx32 != 0; L must fit) or 64-bit, by a copy; 0, or -1
 * when L does not fit or memory runs out (L unchanged).  Dense levels
 * have no width. */
int rt_level_set_width(galley_level *L, int idx32);

/* The widths of t's levels as a mask (bit l: level l is 32-bit). */
unsigned rt_tensor_widths(const galley_tensor *t);

/* The levels of t that may be 32-bit, as a mask. */
unsigned rt_tensor_fit_widths(const galley_tensor *t);

/* ---- copies on threads ---- */

/* Large copies (format conversions, index narrowing) split their work
 * into parts whose results do not depend on which thread runs them, and
 * run them through `run` (the executor passes its thread pool; the
 * runtime has none of its own).  NULL, or run NULL: serially. */
typedef void (*rt_task)(void *ctx, int64_t part, int worker);
typedef struct rt_par { /* struct tag: rt_builder refers to it */
  void (*run)(void *pool, int64_t nparts, rt_task fn, void *ctx);
  void *pool;
} rt_par;

/* fn(ctx, p, w) for every p in [0, nparts), on par's threads or here. */
void rt_par_run(const rt_par *par, int64_t nparts, rt_task fn, void *ctx);

/* Copies of at least this many entries use the threads. */
#define RT_PAR_MIN ((int64_t)1 << 18)

/* galley_tensor_write_tns_stream, the entries of a tensor of RT_PAR_MIN
 * or more stored entries formatted on par's threads in parts, written in
 * order: the same text for every thread count. */
galley_status rt_write_tns_stream_par(const galley_tensor *t, FILE *f,
                                      const rt_par *par, galley_error *err);

/* Give an owned tensor's levels the widths of mask idx32 (bit l: level l
 * 32-bit).  Builders narrow every level that fits
 * (rt_tensor_fit_widths); tests and the executor use this to force a
 * width.  GALLEY_EINTERNAL for a borrowed tensor or a level that does not
 * fit, GALLEY_ENOMEM when memory runs out. */
galley_status rt_tensor_set_widths(galley_tensor *t, unsigned idx32,
                                   galley_error *err);
galley_status rt_tensor_set_widths_par(galley_tensor *t, unsigned idx32,
                                       const rt_par *par, galley_error *err);

/* rt_level_set_width with long copies on par's threads. */
int rt_level_set_width_par(galley_level *L, int idx32, const rt_par *par);

/* galley_tensor_convert with large transposes on par's threads (the
 * result is the same). */
galley_status rt_tensor_convert_par(const galley_tensor *src,
                                    const galley_format *fmt,
                                    const rt_par *par, galley_tensor **out,
                                    galley_error *err);

/* ---- sorting rows and building from sorted rows (build.c) ---- */

/* Sort n rows of `width` coordinates (rows[j*width + c]) by the `order`
 * columns colmap[0..order) (most significant first; cdims[l] bounds column
 * colmap[l]), sum duplicates, and return the distinct rows in *orows
 * (order coordinates each, in colmap order) with their values in *ovals
 * (vals NULL means every value is 1).  O(n) radix sort; *nout is the number
 * of distinct rows.  The caller frees *orows and *ovals. */
galley_status rt_sort_rows(int64_t n, int width, const int64_t *rows,
                           const double *vals, int order, const int *colmap,
                           const int64_t *cdims, int64_t *nout,
                           int64_t **orows, double **ovals, galley_error *err);

/* Build a tensor in fmt from n distinct rows already sorted in fmt's level
 * order (rows hold level-order coordinates). */
galley_status rt_build_sorted(int order, const int64_t *dims,
                              const galley_format *fmt, double fill,
                              int64_t n, const int64_t *rows,
                              const double *vals, galley_tensor **out,
                              galley_error *err);

/* ---- streaming builder (build.c) ---- */

/* Lays out a tensor from entries pushed in strictly increasing level order
 * (equal consecutive entries are summed), one entry at a time: every level
 * is written in the same pass, so no per-entry scratch is needed.  The
 * levels are allocated up front from opens[l], the number of distinct
 * level-order prefixes of length l+1 among the entries (only sparse levels
 * use it). */
typedef struct rt_builder {
  galley_tensor *t;
  int order;
  int pushed;                         /* whether an entry was pushed */
  galley_pos q[GALLEY_MAX_ORDER + 1]; /* q[l+1]: current position at level
                                         l; q[0] = 0 is the root */
  int64_t k[GALLEY_MAX_ORDER];        /* nodes opened so far per level */
  unsigned ready;                     /* bit l: level l's pos already holds
                                         fiber offsets (filled directly) */
  const struct rt_par *par;           /* threads for the final narrowing,
                                         or NULL (init sets NULL) */
} rt_builder;

/* Allocate the levels (opens may be NULL when every level is dense).
 * Refuses oversized levels with GALLEY_EOVERFLOW before allocating. */
galley_status rt_builder_init(rt_builder *b, int order, const int64_t *dims,
                              const galley_format *fmt, double fill,
                              const int64_t *opens, galley_error *err);

/* Reallocate the last level (list, hash or bytemap; its pos untouched)
 * for m nodes, for a caller that fills it directly. */
galley_status rt_builder_resize_last(rt_builder *b, int64_t m,
                                     galley_error *err);

/* Finish the levels (fiber offsets, hash tables) and hand the tensor over
 * in *out; after an error or instead of finishing, rt_builder_abort. */
void rt_builder_finish(rt_builder *b, galley_tensor **out);
void rt_builder_abort(rt_builder *b);

/* Append an entry: crd[0..order) in level order, d the first level where
 * it differs from the previous entry (0 for the first; order when equal,
 * and then v is added to the previous value). */
static inline __attribute__((always_inline)) void
rt_builder_push(rt_builder *b, int d, const int64_t *crd, double v) {
  galley_tensor *t = b->t;
  int order = b->order;
  if (d >= order && b->pushed) {
    t->val[b->q[order]] += v; /* a duplicate: summed in input order */
    return;
  }
  b->pushed = 1;
  for (int l = d; l < order; l++) {
    galley_level *L = &t->lvl[l];
    galley_pos p = b->q[l];
    if (L->kind == GALLEY_RT_DENSE) {
      b->q[l + 1] = p * L->dim + crd[l];
    } else {
      int64_t k = b->k[l]++;
      L->crd[k] = crd[l];
      L->pos[p + 1]++;
      if (L->kind == GALLEY_RT_BYTEMAP) {
        galley_pos qq = p * L->dim + crd[l];
        L->tbl[qq] = 1;
        b->q[l + 1] = qq;
      } else {
        b->q[l + 1] = k;
      }
    }
  }
  t->val[b->q[order]] = v;
}

/* Build from n rows sorted (non-strictly) in fmt's level order: row e's
 * level-l coordinate is rows[e*width + colmap[l]]; equal rows are summed;
 * vals NULL means every value is 1. */
galley_status rt_build_rows(int order, const int64_t *dims,
                            const galley_format *fmt, double fill, int64_t n,
                            int width, const int64_t *rows, const int *colmap,
                            const double *vals, galley_tensor **out,
                            galley_error *err);

/* ---- walking stored entries (iterate.c) ---- */

/* Whether v counts as the fill: equal, or the same bits (NaN fills). */
static inline int rt_is_fill(double v, double fill) {
  return v == fill || memcmp(&v, &fill, sizeof v) == 0;
}

/* A depth-first position in the fibertree.  At level l the cursor walks
 * t = at[l] .. end[l]-1 of fiber par[l]; crd[l] is the coordinate of the
 * entry last returned (in level order).  chg is the lowest level whose
 * coordinate was set since the caller last raised it: after a caller
 * sets chg = L, the next entry differs from the current one first at
 * level min(chg, L). */
typedef struct rt_cursor {
  const galley_tensor *t;
  int depth;                        /* levels walked: order, or fewer */
  int lvl;                          /* level being walked */
  int done;                         /* depth 0: the root was returned */
  int chg;                          /* lowest level set since reset */
  galley_pos par[GALLEY_MAX_ORDER]; /* fiber walked at each level */
  galley_pos at[GALLEY_MAX_ORDER];  /* next walk index */
  galley_pos end[GALLEY_MAX_ORDER]; /* end of the walk */
  galley_crd crd[GALLEY_MAX_ORDER]; /* current coordinates, level order */
} rt_cursor;

static inline void rt_cursor_open(rt_cursor *c, int l, galley_pos p) {
  const galley_level *L = &c->t->lvl[l];
  c->lvl = l;
  c->par[l] = p;
  c->at[l] = galley_rt_walk_begin(L, p);
  c->end[l] = galley_rt_walk_end(L, p);
}

/* Walk the first `depth` levels: rt_cursor_next then yields the positions
 * of level depth-1 (the root position 0 once when depth is 0). */
static inline void rt_cursor_init(rt_cursor *c, const galley_tensor *t,
                                  int depth) {
  c->t = t;
  c->depth = depth;
  c->done = 0;
  c->chg = 0;
  if (depth > 0)
    rt_cursor_open(c, 0, 0);
}

/* Advance to the next stored position at level depth-1 (for depth =
 * order, a value position); -1 when the walk is over. */
static inline galley_pos rt_cursor_next(rt_cursor *c) {
  const galley_tensor *t = c->t;
  if (c->depth == 0)
    return c->done++ ? -1 : 0;
  int l = c->lvl;
  for (;;) {
    if (c->at[l] < c->end[l]) {
      const galley_level *L = &t->lvl[l];
      galley_pos w = c->at[l]++;
      galley_pos q = galley_rt_walk_child(L, c->par[l], w);
      c->crd[l] = galley_rt_walk_crd(L, w);
      if (l < c->chg)
        c->chg = l;
      if (l == c->depth - 1) {
        c->lvl = l;
        return q;
      }
      rt_cursor_open(c, ++l, q);
    } else if (l == 0) {
      c->lvl = 0;
      return -1;
    } else {
      l--;
    }
  }
}

/* Run the statements in __VA_ARGS__ for every child of fiber p of level
 * L, in coordinate order, with i the coordinate and q the child position
 * (declared by the macro); one tight loop per level kind.  `continue`
 * skips to the next child. */
#define RT_FIBER_LOOP(L, p, i, q, ...)                                        \
  do {                                                                        \
    const galley_level *L_ = (L);                                             \
    galley_pos p_ = (p);                                                      \
    if (L_->kind == GALLEY_RT_DENSE) {                                        \
      galley_pos b_ = p_ * L_->dim;                                           \
      galley_crd n_ = L_->dim;                                                \
      for (galley_crd i = 0; i < n_; i++) {                                   \
        galley_pos q = b_ + i;                                                \
        __VA_ARGS__                                                           \
      }                                                                       \
      break;                                                                  \
    }                                                                         \
    if (L_->idx32)                                                            \
      RT_FIBER_LOOP_SPARSE_(L_, p_, L_->pos32, L_->crd32, i, q, __VA_ARGS__); \
    else                                                                      \
      RT_FIBER_LOOP_SPARSE_(L_, p_, L_->pos, L_->crd, i, q, __VA_ARGS__);     \
  } while (0)

/* RT_FIBER_LOOP over a list, hash or bytemap level whose index arrays
 * (of either width) are POS and CRD. */
#define RT_FIBER_LOOP_SPARSE_(L_, p_, POS, CRD, i, q, ...)                    \
  do {                                                                        \
    const __typeof__(*(CRD)) *c_ = (CRD);                                     \
    galley_pos w0_ = (POS)[p_], w1_ = (POS)[p_ + 1];                          \
    if (L_->kind == GALLEY_RT_LIST) {                                         \
      for (galley_pos w_ = w0_; w_ < w1_; w_++) {                             \
        galley_crd i = c_[w_];                                                \
        galley_pos q = w_;                                                    \
        __VA_ARGS__                                                           \
      }                                                                       \
    } else if (L_->kind == GALLEY_RT_HASH) {                                  \
      /* qos has the width of CRD: its 32-bit or 64-bit home */               \
      const __typeof__(*(CRD)) *o_ =                                          \
          sizeof *c_ == 4 ? (const void *)L_->qos32 : (const void *)L_->qos;  \
      for (galley_pos w_ = w0_; w_ < w1_; w_++) {                             \
        galley_crd i = c_[w_];                                                \
        galley_pos q = o_[w_];                                                \
        __VA_ARGS__                                                           \
      }                                                                       \
    } else {                                                                  \
      galley_pos b_ = p_ * L_->dim;                                           \
      for (galley_pos w_ = w0_; w_ < w1_; w_++) {                             \
        galley_crd i = c_[w_];                                                \
        galley_pos q = b_ + i;                                                \
        __VA_ARGS__                                                           \
      }                                                                       \
    }                                                                         \
  } while (0)

/* Run __VA_ARGS__ for every stored entry of t (order >= 1) in storage
 * order: c (an rt_cursor) holds the coordinates of levels 0..order-2 in
 * c.crd, i is the last level's coordinate and q the value position.  The
 * first entry differs from "the previous one" at level min(c.chg,
 * order-1); set c.chg = order-1 after using an entry to track the next. */
#define RT_FOR_EACH_STORED(t, c, i, q, ...)                                   \
  for (rt_cursor_init(&(c), (t), (t)->order - 1);;) {                         \
    galley_pos lp_ = rt_cursor_next(&(c));                                    \
    if (lp_ < 0)                                                              \
      break;                                                                  \
    RT_FIBER_LOOP(&(t)->lvl[(t)->order - 1], lp_, i, q, __VA_ARGS__);         \
  }

/* Whether some value slot of t holds the fill (conservative: unreachable
 * slots count too); when not, every stored entry is a nonzero. */
int rt_tensor_has_fill_value(const galley_tensor *t);

/* Whether stored fill values are rare in t: its last level is sparse, so
 * only entries put there explicitly are stored (a dense last level stores
 * every coordinate under a stored parent).  Then passes may assume no
 * fill values and check for them in the pass that writes. */
int rt_tensor_fill_rare(const galley_tensor *t);

/* Number of stored entries, optionally only those not equal to the fill. */
int64_t rt_tensor_count(const galley_tensor *t, int skip_fill);

/* The stored entries (optionally without those equal to the fill) as rows
 * of coordinates in the level order mode_order[0..order) (a permutation of
 * the logical modes), sorted strictly in that order, with their values.
 * A counting sort when the order differs from t's; the caller frees *rows
 * and *vals. */
galley_status rt_tensor_sorted_rows(const galley_tensor *t,
                                    const int *mode_order, int skip_fill,
                                    int64_t *n, int64_t **rows, double **vals,
                                    galley_error *err);

/* The stored entries as rows of level-order coordinates, in storage order,
 * optionally without those equal to the fill.  The caller frees *rows and
 * *vals. */
galley_status rt_tensor_rows(const galley_tensor *t, int skip_fill,
                             int64_t *n, int64_t **rows, double **vals,
                             galley_error *err);

/* Number of stored entries whose value differs from the fill: the
 * cached facts' nnz, else a scan (which caches nothing). */
int64_t rt_tensor_count_nnz(const galley_tensor *t);
/* The same count, without the cursor walk when every value slot is
 * stored (a dense result): a flat pass over the values (facts.c). */
int64_t rt_tensor_nnz_quick(const galley_tensor *t);

/* Whether two formats are the same: order, mode order and level kinds. */
int rt_format_same(const galley_format *a, const galley_format *b);

/* ---- what a tensor keeps about its values (facts.c) ---- */

/* The facts of t (galley.h's galley_facts), computed by one pass over
 * the stored values the first time, then kept in t->cache: O(1) after
 * that, until galley_tensor_touch.  When the cache cannot be allocated
 * they are computed anyway (and not kept).  Safe from several threads. */
void rt_tensor_facts(const galley_tensor *t, galley_facts *out);

/* Make sure t's facts are computed and kept (what binding a tensor to a
 * program does, so that runs only read them); GALLEY_ENOMEM. */
galley_status rt_tensor_cache_facts(const galley_tensor *t,
                                    galley_error *err);

/* The kept facts of t, or NULL when none are kept yet (computes
 * nothing). */
const galley_facts *rt_tensor_cached_facts(const galley_tensor *t);
/* Keep f as the facts of t, which keeps nothing yet (just touched): for
 * a writer that tracked what it changed (src/exec/exec.c, in place).
 * The caller vouches for them; when t keeps a cache already, nothing. */
void rt_tensor_set_facts(const galley_tensor *t, const galley_facts *f);

/* The pass itself, uncached. */
void rt_facts_compute(const galley_tensor *t, galley_facts *out);

/* Degree statistics of t's levels (issue 12: what adaptive planning
 * feeds back of an intermediate's shape), read off the position arrays
 * its writer laid out: O(fibers), not a pass over the entries.  Level l
 * stores logical mode mode[l] below the prefix of the levels above it;
 * fibers[l] of its parent positions hold at least one child, the
 * fullest holds max_fiber[l] (a dense level: every position, dim
 * each).  known[l] is 0 for a level whose fibers cannot be read this
 * way (an unfrozen hash level). */
typedef struct rt_level_degrees {
  int nlevels;
  int mode[GALLEY_RT_MAX_ORDER];
  int known[GALLEY_RT_MAX_ORDER];
  int64_t fibers[GALLEY_RT_MAX_ORDER];
  int64_t max_fiber[GALLEY_RT_MAX_ORDER];
  int64_t children[GALLEY_RT_MAX_ORDER];
} rt_level_degrees;

void rt_tensor_level_degrees(const galley_tensor *t, rt_level_degrees *out);

/* Whether every stored value is finite (no NaN, no infinity). */
static inline int rt_facts_finite(const galley_facts *f) {
  return f->nan == 0 && f->pos_inf == 0 && f->neg_inf == 0;
}

/* What rt_tensor_symmetry says about a matrix. */
#define RT_SYMMETRIC 1     /* square, t[i,j] equal to t[j,i] everywhere
                              (galley_tensor_is_symmetric) */
#define RT_ZERO_DIAGONAL 2 /* square, every stored diagonal value 0 */

/* The RT_ bits above of t (0 unless t is a square matrix): computed on
 * the first call (O(nnz) for CSR/CSC, a lookup per entry otherwise),
 * then kept with the facts.  The planners ask through it, so that the
 * re-run rule can tell what a plan relied on. */
int rt_tensor_symmetry(const galley_tensor *t);

/* rt_tensor_symmetry if it is known already (kept), else -1; computes
 * nothing. */
int rt_tensor_symmetry_known(const galley_tensor *t);

/* galley_tensor_is_symmetric: rt_tensor_symmetry's RT_SYMMETRIC bit. */
int rt_tensor_symmetric(const galley_tensor *t);

/* A copy of t in fmt, read with fill `fill` (which may differ from t's:
 * a bound tensor takes its declared fill; stored values equal to t's
 * own fill stay values), made on the first call and kept with t: later
 * calls with the same format and fill return the same tensor, valid
 * until t is freed or touched.  It belongs to t: never free it.
 * GALLEY_ENOMEM, or what galley_tensor_convert fails with. */
galley_status rt_tensor_converted(const galley_tensor *t,
                                  const galley_format *fmt, double fill,
                                  const galley_tensor **out,
                                  galley_error *err);

/* Results computed from t alone, kept with t (like its converted copies:
 * until t is freed or touched), each under a 128-bit key that says what
 * computation made it (a program's loop-invariant queries: src/api/
 * program.c).  rt_tensor_memo: the one kept for key, or NULL; it belongs
 * to t.  rt_tensor_memo_keep: keep value (owned by t from now on, freed
 * at once when one is kept for key already); GALLEY_ENOMEM. */
const galley_tensor *rt_tensor_memo(const galley_tensor *t,
                                    const uint64_t key[2]);
galley_status rt_tensor_memo_keep(const galley_tensor *t,
                                  const uint64_t key[2], galley_tensor *value,
                                  galley_error *err);

/* The copy rt_tensor_converted keeps for fmt and fill, or NULL when none
 * was made yet (nothing is made: for explain). */
const galley_tensor *rt_tensor_converted_kept(const galley_tensor *t,
                                              const galley_format *fmt,
                                              double fill);

/* The same copy, not kept: the caller owns *out. */
galley_status rt_tensor_convert_fill(const galley_tensor *t,
                                     const galley_format *fmt, double fill,
                                     galley_tensor **out, galley_error *err);

/* Both with the copy made on par's threads. */
galley_status rt_tensor_converted_par(const galley_tensor *t,
                                      const galley_format *fmt, double fill,
                                      const rt_par *par,
                                      const galley_tensor **out,
                                      galley_error *err);
galley_status rt_tensor_convert_fill_par(const galley_tensor *t,
                                         const galley_format *fmt,
                                         double fill, const rt_par *par,
                                         galley_tensor **out,
                                         galley_error *err);

/* How many converted copies t keeps (for tests). */
int rt_tensor_num_converted(const galley_tensor *t);

/* The sliced copy of a matrix (galley_rt.h's galley_rt_sliced;
 * runtime/csr.c): whether t has its levels (a dense level 0 over a list
 * level 1 of 32-bit coordinates), the slots it takes, and the copy with
 * `fill` in its padding (free() it; NULL when out of memory or when the
 * padding would more than triple the entries). */
int rt_sliced_fits(const galley_tensor *t);
int64_t rt_sliced_slots(const galley_tensor *t);
galley_rt_sliced *rt_sliced_make(const galley_tensor *t, double fill,
                                 int64_t f32_min_bytes);

/* From which size a copy keeps float values (runtime/csr.c: the value
 * galley_rt_sliced.h gives, shared with the AOT runtime). */
extern const int64_t rt_sliced_f32_min_bytes;
#define RT_SLICED_F32_MIN_BYTES rt_sliced_f32_min_bytes

/* The sliced copy of t with padding `fill`, made on the first call and
 * kept with t until it is freed or touched (it belongs to t); NULL when
 * t cannot be sliced, is out of memory, or its kept copy was made for
 * another fill: the kernel then walks the list, so NULL is never an
 * error. */
const galley_rt_sliced *rt_tensor_sliced(const galley_tensor *t, double fill);

/* The same with the size from which floats are kept (tests pass 0, so
 * that small matrices take the float form; the first call's copy is the
 * one kept). */
const galley_rt_sliced *rt_tensor_sliced_ex(const galley_tensor *t, double fill,
                                            int64_t f32_min_bytes);

/* Work weights kept with t (src/exec/blocks.c: the multiplies of each
 * row of t times the partner `key`), until t is freed or touched: the
 * kept array of n values when it was kept for that key and n, else
 * NULL.  rt_tensor_keep_weights keeps w (malloc'd, n values; t takes
 * it: 1) when t keeps none yet, else returns 0 and w stays the
 * caller's.  The key is only compared, never read: a partner freed or
 * touched since is not noticed, so the weights may only steer what a
 * stale value cannot change (how a loop whose result is the same for
 * any cut is cut).  Thread-safe. */
const int64_t *rt_tensor_kept_weights(const galley_tensor *t, const void *key,
                                      int64_t n);
int rt_tensor_keep_weights(const galley_tensor *t, const void *key,
                           int64_t *w, int64_t n);

/* Up to 64 sizes a run notes with t for the next run (src/exec/exec.c:
 * the entries each thread's blocks appended), under a key and a tag
 * (what they depend on), until t is freed or touched; one set per
 * tensor, the last noted.  rt_tensor_noted_sizes: 1 with v[0 .. n) when
 * the set noted has that key, tag (not -1) and n, else 0.  Only a guess
 * for the next run (another run may note between two reads): whoever
 * reads them must check what they predict.  Thread-safe. */
void rt_tensor_note_sizes(const galley_tensor *t, const void *key,
                          int64_t tag, const int64_t *v, int n);
int rt_tensor_noted_sizes(const galley_tensor *t, const void *key,
                          int64_t tag, int64_t *v, int n);

/* Free what t->cache points at (galley_tensor_free, _touch). */
void rt_cache_free(void *cache);

/* ---- non-finite entries, for exception splitting (facts.c) ---- */

/* The stored entries of a tensor whose values are not finite, and the
 * tensor with them replaced by 0 (a view sharing the original's levels,
 * with its own values: the same layout and index widths). */
typedef struct rt_exceptions {
  int64_t n;              /* entries */
  int order;
  int64_t *crd;           /* n * order logical coordinates, entry-major */
  double *val;            /* their values (NaN, +inf, -inf) */
  galley_tensor *finite;  /* t without them: kept, never free it */
} rt_exceptions;

/* t's non-finite entries, found by one walk on the first call and kept
 * with t (until galley_tensor_touch); GALLEY_ENOMEM. */
galley_status rt_tensor_exceptions(const galley_tensor *t,
                                   const rt_exceptions **out,
                                   galley_error *err);

/* The kept exceptions of t, or NULL when not made yet. */
const rt_exceptions *rt_tensor_exceptions_kept(const galley_tensor *t);

#endif /* GALLEY_RT_INTERNAL_H */
