/*
 * stats.c -- degree statistics of a tensor (galley_tensor_degree_stats,
 * and rt_degree_stats for the optimizer), the input of the chain-bound
 * sparsity estimator (Galley paper, 6.3.2).
 *
 * What is computed.  For a tensor of order k and every subset S of its
 * logical modes (a bit mask): distinct[S], the number of distinct
 * projections of the non-fill entries onto S, and max_degree[S], the size
 * of the largest group of non-fill entries that agree on S.  Both come
 * from one grouping of the entries by their coordinates on S.
 *
 * 1. One pass over the structure.  When every level is dense or a list
 *    and no stored value is the fill (the tensors read from files and
 *    wrapped CSR arrays), the entries under a position q of level l are
 *    the leaves from leaf_begin(q) to leaf_begin(q + 1) (the children of
 *    a position are contiguous at every level below).  One sweep over
 *    each level's positions then gives, without visiting a single entry,
 *    the storage prefixes {lvl0..lvl l} (count of non-empty positions,
 *    largest leaf count) and, through a histogram of the level's
 *    coordinates weighted by the leaf counts, the single mode of level l.
 *    A level with one leaf under each position (only single-child levels
 *    below: a table's columns) whose coordinates never decrease from one
 *    position to the next (a sorted column) needs no histogram: its
 *    groups are its runs.  Otherwise its histogram's counters are as
 *    narrow as its number of fibers allows (a coordinate occurs once a
 *    fiber).
 *    Otherwise (hash or bytemap levels, stored fills) pass 1 walks the
 *    fibertree in storage order and scans the storage-prefix chain of the
 *    entries as below.
 *
 * 2. Keys.  A subset K with max_degree[K] = 1 fixes every entry: every
 *    S containing K has distinct[S] = nnz and max_degree[S] = 1, with no
 *    further work (the row index of a table, a lineitem's number).
 *
 * 3. The other subsets, exactly.  If the entries are sorted
 *    lexicographically by the modes (m0, ..., m(L-1)), the entries
 *    agreeing on every prefix {m0..m(p-1)} are contiguous, and one linear
 *    scan yields the groups of all L prefixes at once: for consecutive
 *    entries, the first key position j where they differ closes the
 *    current group of every prefix longer than j.  A symmetric chain
 *    decomposition (de Bruijn, Tengbergen, Kruyswijk) partitions the 2^k
 *    subsets into C(k, floor(k/2)) chains of subsets that grow by one
 *    element (k = 2: 2 chains, 3: 3, 4: 6, 8: 70); a chain needs one sort
 *    by its top subset's modes.  A chain is cut after its last subset not
 *    yet known, and skipped when all are known: for matrices nothing is
 *    left after step 1.  Each chain takes one walk and one of two paths:
 *    - counting, when the key space (product of largest coordinate + 1
 *      over the key modes) is at most nnz + 65536: count the entries per
 *      key value in an array of uint32 and scan it in order with a
 *      mixed-radix counter; the most significant digit that changed
 *      between two non-empty buckets is their common prefix length;
 *    - sorting otherwise: pack each entry's key coordinates into 64-bit
 *      words, each field as wide as the largest coordinate in that mode
 *      needs (a field never straddles two words, so dims up to 2^62 are
 *      fine), sort the rows with an LSD radix sort (digits of at most 11
 *      bits over only the bits in use, passes where every row has the
 *      same digit skipped) and scan them; the first differing field of
 *      two rows comes from their highest differing bit.
 *
 * 4. The other subsets, from a sample (rt_degree_stats with sample = m,
 *    when nnz > 2m; galley_tensor_degree_stats never samples).  The
 *    single modes are made exact first (step 3 with one-field keys, when
 *    step 1 did not give them).  Then each non-fill entry is drawn
 *    independently with probability q = m / nnz (geometric skips from a
 *    splitmix64 stream seeded with RT_STATS_SEED: the same tensor always
 *    gives the same sample), and step 3 runs on the sample's rows.  For a
 *    subset S not yet known, with d groups in the sample of which f1
 *    hold a single sampled entry:
 *      max_degree[S] = the least max_degree of an exact subset of S: a
 *        guaranteed upper bound (a group on S lies inside a group on any
 *        subset of S);
 *      distinct[S] = d + (f1 + 3 sqrt(f1)) (1 - q) / q, clamped into the
 *        interval [lo, hi] the exact figures imply (rt_degree_limits).
 *    Why an upper bound: a group of s entries goes unseen with
 *    probability (1-q)^s and is seen exactly once with probability
 *    s q (1-q)^(s-1), so E[f1] (1-q)/q = sum s (1-q)^s >= sum (1-q)^s =
 *    E[unseen groups]: d + f1 (1-q)/q over-estimates distinct[S] on
 *    average (exactly so when every group is a single entry).  Its
 *    standard deviation is about sqrt(f1 (1-q)) / q; the margin of 3 of
 *    them makes a figure below the truth a ~0.1% event (normal
 *    approximation), and the clamp keeps every figure within the exact
 *    bounds always.  The price is over-estimation of subsets whose
 *    groups hold about 1/q entries (up to ~0.37/q times), never beyond
 *    hi.  Work: the structural pass, O(m) for the sample and one radix
 *    sort of m rows per chain left.
 *
 * "Non-fill" means value != fill and not bitwise equal to it (so NaN fills
 * work); stored entries equal to the fill (dense levels store everything)
 * are skipped.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "rt_stats.h"

#define MAXK GALLEY_MAX_ORDER
#define NSUB (1 << MAXK)
#define MAX_CHAINS 70 /* C(8, 4) */
#define RADIX_BITS 11
#define MARGIN_SIGMAS 3.0

static int is_fill(double v, double fill) {
  return v == fill || memcmp(&v, &fill, sizeof v) == 0;
}

/* ---- ordered walk over the fibers of the last level ---- */

/* Visits, in storage order, every fiber of the last level (k-1) with the
 * coordinates of levels 0..k-2 in crd[]; the entries of each fiber are
 * then walked by FIBER_LOOP, which is specialized per level kind. */
typedef struct walker {
  const galley_tensor *t;
  int k;
  int l;                /* level to resume at */
  int done;             /* order 1: the root fiber was handed out */
  galley_pos par[MAXK]; /* parent position of each level's fiber */
  galley_pos cur[MAXK]; /* walk index within the fiber */
  galley_pos end[MAXK];
  galley_crd crd[MAXK]; /* coordinates of levels 0..k-2 */
} walker;

static void walk_init(walker *w, const galley_tensor *t) {
  w->t = t;
  w->k = t->order;
  w->l = 0;
  w->done = 0;
  w->par[0] = 0;
  w->cur[0] = galley_rt_walk_begin(&t->lvl[0], 0);
  w->end[0] = galley_rt_walk_end(&t->lvl[0], 0);
}

/* The next last-level fiber: 1 with its parent position in *fp and
 * w->crd[0..k-2] set; 0 at the end. */
static int walk_fiber(walker *w, galley_pos *fp) {
  const galley_tensor *t = w->t;
  int l = w->l, top = w->k - 2;
  if (top < 0) {
    *fp = 0;
    return w->done ? 0 : (w->done = 1);
  }
  for (;;) {
    if (w->cur[l] >= w->end[l]) {
      if (l == 0) {
        w->l = 0;
        return 0;
      }
      l--;
      w->cur[l]++;
      continue;
    }
    const galley_level *L = &t->lvl[l];
    galley_pos i = w->cur[l];
    w->crd[l] = galley_rt_walk_crd(L, i);
    galley_pos q = galley_rt_walk_child(L, w->par[l], i);
    if (l == top) {
      w->cur[l]++;
      w->l = l;
      *fp = q;
      return 1;
    }
    l++;
    w->par[l] = q;
    w->cur[l] = galley_rt_walk_begin(&t->lvl[l], q);
    w->end[l] = galley_rt_walk_end(&t->lvl[l], q);
  }
}

/* Run the statements in ... for every non-fill entry of fiber P of the
 * last level LV of tensor T, with its coordinate in `c`. */
#define FIBER_LOOP(T, LV, P, ...)                                              \
  do {                                                                         \
    const galley_level *L_ = (LV);                                             \
    galley_pos p_ = (P);                                                       \
    galley_pos b_ = galley_rt_walk_begin(L_, p_);                              \
    galley_pos e_ = galley_rt_walk_end(L_, p_);                                \
    const double *val_ = (T)->val;                                             \
    double fill_ = (T)->fill;                                                  \
    switch (L_->kind) {                                                        \
    case GALLEY_RT_DENSE:                                                      \
      for (galley_pos i_ = b_; i_ < e_; i_++) {                                \
        galley_crd c = i_;                                                     \
        if (!is_fill(val_[p_ * L_->dim + i_], fill_)) {                        \
          __VA_ARGS__                                                          \
        }                                                                      \
      }                                                                        \
      break;                                                                   \
    case GALLEY_RT_LIST:                                                       \
      for (galley_pos i_ = b_; i_ < e_; i_++) {                                \
        galley_crd c = galley_rt_crd(L_, i_);                                            \
        if (!is_fill(val_[i_], fill_)) {                                       \
          __VA_ARGS__                                                          \
        }                                                                      \
      }                                                                        \
      break;                                                                   \
    case GALLEY_RT_HASH:                                                       \
      for (galley_pos i_ = b_; i_ < e_; i_++) {                                \
        galley_crd c = galley_rt_crd(L_, i_);                                            \
        if (!is_fill(val_[galley_rt_qos(L_, i_)], fill_)) {                    \
          __VA_ARGS__                                                          \
        }                                                                      \
      }                                                                        \
      break;                                                                   \
    default:                                                                   \
      for (galley_pos i_ = b_; i_ < e_; i_++) {                                \
        galley_crd c = galley_rt_crd(L_, i_);                                            \
        if (!is_fill(val_[p_ * L_->dim + c], fill_)) {                         \
          __VA_ARGS__                                                          \
        }                                                                      \
      }                                                                        \
      break;                                                                   \
    }                                                                          \
  } while (0)

/* Can every level be walked in order?  (Hash levels need their frozen
 * view, bytemaps their set indices.) */
static int walkable(const galley_tensor *t) {
  for (int l = 0; l < t->order; l++) {
    const galley_level *L = &t->lvl[l];
    if (L->kind == GALLEY_RT_DENSE)
      continue;
    if (L->idx32 ? !L->pos32 || !L->crd32 : !L->pos || !L->crd)
      return 0;
    if (L->kind == GALLEY_RT_HASH && (L->idx32 ? !L->qos32 : !L->qos))
      return 0;
  }
  return 1;
}

/* ---- grouping scan over rows sorted by L key positions ---- */

typedef struct scanner {
  int L;
  int64_t rows;
  int64_t start[MAXK + 1]; /* first row of the open group of prefix p */
  int64_t count[MAXK + 1]; /* groups of prefix p closed so far */
  int64_t maxsz[MAXK + 1]; /* largest group of prefix p */
  int64_t ones[MAXK + 1];  /* groups of prefix p of a single row */
} scanner;

static void scan_init(scanner *s, int L) {
  memset(s, 0, sizeof *s);
  s->L = L;
}

/* One more row; j = number of leading key positions it shares with the
 * previous row (ignored for the first row). */
static inline void scan_row(scanner *s, int j) {
  int64_t i = s->rows++;
  if (i == 0)
    return;
  for (int p = j + 1; p <= s->L; p++) {
    int64_t size = i - s->start[p];
    if (size > s->maxsz[p])
      s->maxsz[p] = size;
    s->ones[p] += size == 1;
    s->count[p]++;
    s->start[p] = i;
  }
}

/* m >= 1 rows, the first sharing j key positions with the previous row
 * and the others identical to it. */
static inline void scan_rows(scanner *s, int j, int64_t m) {
  scan_row(s, j);
  s->rows += m - 1;
}

static void scan_finish(scanner *s) {
  if (s->rows == 0)
    return;
  for (int p = 1; p <= s->L; p++) {
    int64_t size = s->rows - s->start[p];
    if (size > s->maxsz[p])
      s->maxsz[p] = size;
    s->ones[p] += size == 1;
    s->count[p]++;
  }
}

/* ---- symmetric chain decomposition of the subsets of {0..k-1} ---- */

typedef struct chain {
  int len; /* number of subsets */
  unsigned set[MAXK + 1];
} chain;

static int build_chains(int k, chain *ch) {
  int n = 1;
  ch[0].len = 1;
  ch[0].set[0] = 0;
  for (int e = 0; e < k; e++) {
    chain next[MAX_CHAINS];
    int m = 0;
    unsigned bit = 1u << e;
    for (int c = 0; c < n; c++) {
      chain a = ch[c];
      a.set[a.len] = a.set[a.len - 1] | bit;
      a.len++;
      next[m++] = a;
      if (ch[c].len > 1) {
        chain b;
        b.len = ch[c].len - 1;
        for (int i = 0; i < b.len; i++)
          b.set[i] = ch[c].set[i] | bit;
        next[m++] = b;
      }
    }
    memcpy(ch, next, (size_t)m * sizeof *ch);
    n = m;
  }
  return n;
}

/* Key order of a chain (level indices): the first subset's elements in
 * increasing order, then each added element.  Returns its length. */
static int chain_key(const chain *c, int k, int *key) {
  int L = 0;
  for (int e = 0; e < k; e++)
    if (c->set[0] & (1u << e))
      key[L++] = e;
  for (int i = 1; i < c->len; i++) {
    unsigned add = c->set[i] ^ c->set[i - 1];
    key[L++] = __builtin_ctz(add);
  }
  return L;
}

/* ---- packed keys ---- */

typedef struct layout {
  int L, W;
  int word[MAXK];              /* word of key field f */
  int shift[MAXK];             /* its lowest bit */
  int lowbit[MAXK];            /* lowest bit in use of word w (64 when none) */
  signed char field[MAXK][64]; /* field holding bit b of word w */
} layout;

static int bit_length(int64_t x) {
  return x > 0 ? 64 - __builtin_clzll((unsigned long long)x) : 0;
}

static void make_layout(layout *lay, int L, const int *key,
                        const int64_t *maxc) {
  int w = 0, used = 0;
  lay->L = L;
  for (int f = 0; f < L; f++) {
    int b = bit_length(maxc[key[f]]);
    if (used + b > 64) {
      w++;
      used = 0;
    }
    lay->word[f] = w;
    lay->shift[f] = b > 0 ? 64 - used - b : 0; /* a 0-bit field holds 0 */
    used += b;
  }
  lay->W = w + 1;
  for (int x = 0; x < lay->W; x++) {
    lay->lowbit[x] = 64;
    for (int b = 0; b < 64; b++)
      lay->field[x][b] = -1;
  }
  for (int f = 0; f < L; f++) {
    int b = bit_length(maxc[key[f]]);
    int x = lay->word[f];
    if (b > 0 && lay->shift[f] < lay->lowbit[x])
      lay->lowbit[x] = lay->shift[f];
    for (int i = 0; i < b; i++)
      lay->field[x][lay->shift[f] + i] = (signed char)f;
  }
}

/* LSD radix sort of n rows of W words each (lexicographic by word, each
 * word unsigned); the result ends in *a (the buffers may be swapped). */
static void radix_sort(uint64_t **a, uint64_t **b, int64_t n, int W,
                       const int *lowbit) {
  int64_t hist[1 << RADIX_BITS];
  uint64_t *src = *a, *dst = *b;
  for (int w = W - 1; w >= 0; w--) {
    int nb = 64 - lowbit[w];
    if (nb <= 0)
      continue;
    int passes = (nb + RADIX_BITS - 1) / RADIX_BITS;
    int width = (nb + passes - 1) / passes;
    uint64_t mask = ((uint64_t)1 << width) - 1;
    for (int d = 0; d < passes; d++) {
      int sh = lowbit[w] + d * width;
      memset(hist, 0, sizeof(int64_t) << width);
      for (int64_t i = 0; i < n; i++)
        hist[(src[i * W + w] >> sh) & mask]++;
      int trivial = 0;
      int64_t sum = 0;
      for (uint64_t v = 0; v <= mask; v++) {
        int64_t c = hist[v];
        if (c == n)
          trivial = 1;
        hist[v] = sum;
        sum += c;
      }
      if (trivial)
        continue;
      if (W == 1) {
        for (int64_t i = 0; i < n; i++) {
          uint64_t x = src[i];
          dst[hist[(x >> sh) & mask]++] = x;
        }
      } else {
        for (int64_t i = 0; i < n; i++) {
          const uint64_t *r = src + i * W;
          int64_t q = hist[(r[w] >> sh) & mask]++;
          memcpy(dst + q * W, r, (size_t)W * sizeof *r);
        }
      }
      uint64_t *tmp = src;
      src = dst;
      dst = tmp;
    }
  }
  *a = src;
  *b = dst;
}

/* Common key positions of two packed rows. */
static inline int packed_lcp(const layout *lay, const uint64_t *x,
                             const uint64_t *y) {
  for (int w = 0; w < lay->W; w++) {
    uint64_t d = x[w] ^ y[w];
    if (d)
      return lay->field[w][63 - __builtin_clzll(d)];
  }
  return lay->L;
}

/* Mixed-radix strides of a chain's key (last field fastest). */
static void key_strides(int L, const int *key, const int64_t *maxc,
                        int64_t *stride) {
  int64_t st = 1;
  for (int f = L - 1; f >= 0; f--) {
    stride[f] = st;
    st *= maxc[key[f]] + 1; /* the caller checked the product */
  }
}

/* A chain whose key space (product of the largest coordinates + 1) is
 * small: count the entries per key value and scan the counts in order,
 * tracking the most significant key position that changed.  32-bit
 * counters (the caller ensures n < 2^32): half the cache and TLB
 * footprint of the random increments, which dominate. */
static galley_status count_chain(const galley_tensor *t, const int *key, int L,
                                 const int64_t *maxc, int64_t space,
                                 scanner *sc) {
  int k = t->order;
  uint32_t *cnt = rt_calloc_array(space, sizeof *cnt); /* n < 2^32 */
  if (!cnt)
    return GALLEY_ENOMEM;
  int64_t stride[MAXK];
  key_strides(L, key, maxc, stride);
  int64_t last_stride = 0; /* of the last level, 0 when not in the key */
  for (int f = 0; f < L; f++)
    if (key[f] == k - 1)
      last_stride = stride[f];
  walker w;
  walk_init(&w, t);
  galley_pos fp;
  while (walk_fiber(&w, &fp)) {
    int64_t base = 0;
    for (int f = 0; f < L; f++)
      if (key[f] != k - 1)
        base += w.crd[key[f]] * stride[f];
    FIBER_LOOP(t, &t->lvl[k - 1], fp, { cnt[base + c * last_stride]++; });
  }
  scan_init(sc, L);
  int64_t digit[MAXK] = {0}, radix[MAXK];
  for (int f = 0; f < L; f++)
    radix[f] = maxc[key[f]] + 1;
  int chg = 0;
  for (int64_t v = 0; v < space; v++) {
    if (cnt[v]) {
      scan_rows(sc, chg, cnt[v]);
      chg = L;
    }
    int f = L - 1;
    while (f >= 0 && ++digit[f] == radix[f])
      digit[f--] = 0;
    if (f < chg)
      chg = f < 0 ? 0 : f;
  }
  scan_finish(sc);
  free(cnt);
  return GALLEY_OK;
}

/* Room for n rows of W words in *buf and *tmp (of *cap words), reused
 * across chains and freed by the caller. */
static galley_status key_buffers(int64_t n, int W, uint64_t **buf,
                                 uint64_t **tmp, int64_t *cap) {
  int64_t cells;
  if (rt_mul_overflows(n, W, &cells))
    return GALLEY_EOVERFLOW;
  if (cells > *cap) {
    free(*buf);
    free(*tmp);
    *cap = 0;
    *buf = rt_malloc_array(cells, sizeof **buf);
    *tmp = rt_malloc_array(cells, sizeof **tmp);
    if (!*buf || !*tmp)
      return GALLEY_ENOMEM;
    *cap = cells;
  }
  return GALLEY_OK;
}

/* Sort n packed rows (in *buf) and scan their groups into sc. */
static void sort_scan(const layout *lay, int64_t n, uint64_t **buf,
                      uint64_t **tmp, scanner *sc) {
  int W = lay->W;
  radix_sort(buf, tmp, n, W, lay->lowbit);
  const uint64_t *rows = *buf;
  scan_init(sc, lay->L);
  if (n > 0)
    scan_row(sc, 0);
  for (int64_t i = 1; i < n; i++)
    scan_row(sc, packed_lcp(lay, rows + (i - 1) * W, rows + i * W));
  scan_finish(sc);
}

/* Any other chain: pack the key of every entry into words, radix sort
 * the rows, scan them. */
static galley_status sort_chain(const galley_tensor *t, const int *key, int L,
                                const int64_t *maxc, int64_t n, uint64_t **buf,
                                uint64_t **tmp, int64_t *cap, scanner *sc) {
  int k = t->order;
  layout lay;
  make_layout(&lay, L, key, maxc);
  int W = lay.W;
  galley_status st = key_buffers(n, W, buf, tmp, cap);
  if (st != GALLEY_OK)
    return st;
  int lastf = -1;
  for (int f = 0; f < L; f++)
    if (key[f] == k - 1)
      lastf = f;
  int lw = lastf >= 0 ? lay.word[lastf] : 0;
  int ls = lastf >= 0 ? lay.shift[lastf] : 0;
  uint64_t lmul = lastf >= 0 ? 1 : 0;
  uint64_t *rows = *buf, outer[MAXK];
  int64_t r = 0;
  walker w;
  walk_init(&w, t);
  galley_pos fp;
  while (walk_fiber(&w, &fp)) {
    for (int x = 0; x < W; x++)
      outer[x] = 0;
    for (int f = 0; f < L; f++)
      if (f != lastf)
        outer[lay.word[f]] |= (uint64_t)w.crd[key[f]] << lay.shift[f];
    if (W == 1) {
      FIBER_LOOP(t, &t->lvl[k - 1], fp,
                 { rows[r++] = outer[0] | (((uint64_t)c * lmul) << ls); });
    } else {
      FIBER_LOOP(t, &t->lvl[k - 1], fp, {
        uint64_t *row = rows + r * W;
        for (int x = 0; x < W; x++)
          row[x] = outer[x];
        row[lw] |= ((uint64_t)c * lmul) << ls;
        r++;
      });
    }
  }
  sort_scan(&lay, n, buf, tmp, sc);
  return GALLEY_OK;
}

/* The same over n rows of k level-order coordinates (a sample). */
static galley_status sort_rows(const galley_crd *crd, int k, int64_t n,
                               const int *key, int L, const int64_t *maxc,
                               uint64_t **buf, uint64_t **tmp, int64_t *cap,
                               scanner *sc) {
  layout lay;
  make_layout(&lay, L, key, maxc);
  int W = lay.W;
  galley_status st = key_buffers(n, W, buf, tmp, cap);
  if (st != GALLEY_OK)
    return st;
  uint64_t *rows = *buf;
  /* the fields in locals (the stores into rows could alias lay and key
   * otherwise), and one word a row in a register: the common case */
  int kf[MAXK], sh[MAXK], wd[MAXK];
  for (int f = 0; f < L; f++) {
    kf[f] = key[f];
    sh[f] = lay.shift[f];
    wd[f] = lay.word[f];
  }
  if (W == 1) {
    for (int64_t r = 0; r < n; r++) {
      const galley_crd *c = crd + r * k;
      uint64_t v = 0;
      for (int f = 0; f < L; f++)
        v |= (uint64_t)c[kf[f]] << sh[f];
      rows[r] = v;
    }
  } else {
    for (int64_t r = 0; r < n; r++) {
      const galley_crd *c = crd + r * k;
      uint64_t v[MAXK] = {0};
      for (int f = 0; f < L; f++)
        v[wd[f]] |= (uint64_t)c[kf[f]] << sh[f];
      memcpy(rows + r * W, v, (size_t)W * sizeof *v);
    }
  }
  sort_scan(&lay, n, buf, tmp, sc);
  return GALLEY_OK;
}

/* ---- what is known so far ---- */

typedef struct work {
  const galley_tensor *t;
  int k;
  int64_t n;           /* non-fill entries */
  int64_t maxc[MAXK];  /* largest coordinate of each level among them */
  galley_degree_stats *out;
  unsigned char *exact; /* by mode mask */
  uint64_t *buf, *tmp;  /* packed keys, reused across chains */
  int64_t cap;          /* words in buf and tmp */
  int below[MAXK][MAXK]; /* step 1: levels under level l whose children */
  int nbelow[MAXK];      /* are not their parents' positions */
  galley_pos *drawn;    /* step 4, sweepable tensors: the leaves drawn, */
  galley_crd *row;      /* and their coordinates (ndrawn rows of k, */
  int64_t ndrawn;       /* filled in by the sweep) */
} work;

/* Mode mask of the first L levels of key (level indices). */
static unsigned key_modes(const galley_tensor *t, const int *key, int L) {
  unsigned m = 0;
  for (int f = 0; f < L; f++)
    m |= 1u << t->lvl[key[f]].mode;
  return m;
}

/* Mode mask of a set of levels. */
static unsigned level_modes(const galley_tensor *t, unsigned levels) {
  unsigned m = 0;
  for (; levels; levels &= levels - 1)
    m |= 1u << t->lvl[__builtin_ctz(levels)].mode;
  return m;
}

/* Record exact figures for S; a key (max degree 1) settles every
 * superset of S as well. */
static void set_exact(work *w, unsigned S, int64_t distinct, int64_t maxdeg) {
  w->out->distinct[S] = distinct;
  w->out->max_degree[S] = maxdeg;
  w->exact[S] = 1;
  if (maxdeg != 1)
    return;
  unsigned nsub = 1u << w->k;
  for (unsigned T = 0; T < nsub; T++)
    if ((T & S) == S && !w->exact[T]) {
      w->out->distinct[T] = w->n;
      w->out->max_degree[T] = 1;
      w->exact[T] = 1;
    }
}

/* Store the scanner's groups of every prefix of key as exact. */
static void store_exact(work *w, const scanner *sc, const int *key) {
  for (int p = 1; p <= sc->L; p++)
    set_exact(w, key_modes(w->t, key, p), sc->count[p], sc->maxsz[p]);
}

/* ---- step 1: one sweep over each level of a dense/list tensor ---- */

/* Whether the leaves under consecutive positions are consecutive and all
 * non-fill: every level dense or list, no stored fill (nnz = stored: one
 * scan of the values, or none once the tensor knows its nnz). */
static int sweepable(const galley_tensor *t) {
  galley_pos reach = 1;
  for (int l = 0; l < t->order; l++) {
    const galley_level *L = &t->lvl[l];
    if (L->kind != GALLEY_RT_DENSE &&
        (L->kind != GALLEY_RT_LIST ||
         (L->idx32 ? !L->pos32 || !L->crd32 : !L->pos || !L->crd)))
      return 0;
    if (L->npar != reach)
      return 0;
    reach = L->nchild;
  }
  return reach == t->nval && galley_tensor_nnz(t) == reach;
}

/* First child position of parent position p of level L. */
static inline galley_pos child_begin(const galley_level *L, galley_pos p) {
  return L->kind == GALLEY_RT_DENSE ? p * L->dim : galley_rt_pos(L, p);
}

/* Whether level L gives every parent exactly one child, at the parent's
 * own position (a list level of a table's columns, a dense level of
 * dim 1): its positions are its parents'. */
static int unary(const galley_level *L) {
  if (L->kind == GALLEY_RT_DENSE)
    return L->dim == 1;
  if (L->nchild != L->npar)
    return 0;
  /* in blocks, one loop per index width (32-bit: 16 bytes at a time,
   * GCC vector extensions as in SORTED_RUNS); a level that is not unary
   * is usually found in its first block */
  for (galley_pos p = 0; p <= L->npar; p += 4096) {
    galley_pos end = p + 4096 <= L->npar + 1 ? p + 4096 : L->npar + 1;
    uint64_t diff = 0;
    if (L->idx32) {
      typedef uint32_t v4u32 __attribute__((vector_size(16)));
      const int32_t *pos = L->pos32;
      galley_pos x = p;
      v4u32 vd = {0}, vx = {(uint32_t)x, (uint32_t)x + 1, (uint32_t)x + 2,
                            (uint32_t)x + 3};
      const v4u32 four = {4, 4, 4, 4};
      for (; x + 4 <= end; x += 4) {
        v4u32 v;
        memcpy(&v, pos + x, sizeof v);
        vd |= v ^ vx;
        vx += four;
      }
      diff = vd[0] | vd[1] | vd[2] | vd[3];
      for (; x < end; x++)
        diff |= (uint32_t)pos[x] ^ (uint32_t)x;
    } else {
      const int64_t *pos = L->pos;
      for (galley_pos x = p; x < end; x++)
        diff |= (uint64_t)(pos[x] ^ x);
    }
    if (diff)
      return 0;
  }
  return 1;
}

/* First leaf under position q of level l (q may be one past the end):
 * through the levels below that are not unary. */
static inline galley_pos leaf_begin(const work *w, int l, galley_pos q) {
  for (int j = 0; j < w->nbelow[l]; j++)
    q = child_begin(&w->t->lvl[w->below[l][j]], q);
  return q;
}

/* distinct and max_degree of a histogram of counts. */
static void histogram_figures(const uint32_t *cnt, int64_t size,
                              int64_t *distinct, int64_t *maxdeg) {
  int64_t d = 0, mx = 0;
  for (int64_t v = 0; v < size; v++) {
    d += cnt[v] != 0;
    if (cnt[v] > mx)
      mx = cnt[v];
  }
  *distinct = d;
  *maxdeg = mx;
}

/* Runs of equal coordinates of a flat list level whose coordinates do
 * not decrease from position to position (a table's sorted key column,
 * the order of each lineitem): then the groups of its mode are the runs,
 * and no histogram is needed.  Returns 0 at the first block that
 * decreases (usually the first block of a level that is not sorted).
 *
 * In blocks of SR_BLOCK positions, 16 bytes of coordinates at a time (GCC
 * vector extensions, as facts.c; -O2 does not vectorize these loops by
 * itself): first whether the block is sorted and how many values change
 * in it, then the longest run R so far.  With the coordinates sorted,
 * crd[x] == crd[x + R] says the run at x is longer than R, so a block
 * with no such x adds nothing, and one with some raises R by one and is
 * looked at again (R climbs once over the whole level).  A read past the
 * block is checked by the next blocks, or the result dropped. */
#define SR_BLOCK 1024
#define SORTED_RUNS(NAME, T, V)                                                \
  static int NAME(const T *crd, galley_pos n, int64_t *distinct,               \
                  int64_t *longest) {                                          \
    enum { W = 16 / sizeof(T) };                                               \
    typedef T V __attribute__((vector_size(16)));                              \
    if (n == 0)                                                                \
      return 0;                                                                \
    int64_t d = 1, R = 1;                                                      \
    galley_pos x0 = 0;                                                         \
    for (galley_pos q = 1; q < n; q += SR_BLOCK) {                             \
      galley_pos end = n - q > SR_BLOCK ? q + SR_BLOCK : n, y = q;             \
      V bad = {0}, chg = {0};                                                  \
      for (; y + W <= end; y += W) {                                           \
        V a, b;                                                                \
        memcpy(&a, crd + y - 1, sizeof a);                                     \
        memcpy(&b, crd + y, sizeof b);                                         \
        bad |= (V)(b < a);                                                     \
        chg -= (V)(a != b); /* -1 where it changes */                          \
      }                                                                        \
      int64_t changes = 0, worse = 0;                                          \
      for (int k = 0; k < W; k++) {                                            \
        changes += chg[k];                                                     \
        worse |= bad[k];                                                       \
      }                                                                        \
      for (; y < end; y++) {                                                   \
        worse |= crd[y] < crd[y - 1];                                          \
        changes += crd[y] != crd[y - 1];                                       \
      }                                                                        \
      if (worse)                                                               \
        return 0;                                                              \
      d += changes;                                                            \
      for (; x0 < end && x0 + R < n; x0 += SR_BLOCK) {                         \
        for (;;) { /* the runs starting in [x0, x0 + SR_BLOCK) */              \
          galley_pos stop = x0 + SR_BLOCK < n - R ? x0 + SR_BLOCK : n - R, x;  \
          V hit = {0};                                                         \
          for (x = x0; x + W <= stop; x += W) {                                \
            V a, b;                                                            \
            memcpy(&a, crd + x, sizeof a);                                     \
            memcpy(&b, crd + x + R, sizeof b);                                 \
            hit |= (V)(a == b);                                                \
          }                                                                    \
          int64_t longer = 0;                                                  \
          for (int k = 0; k < W; k++)                                          \
            longer |= hit[k];                                                  \
          for (; x < stop; x++)                                                \
            longer |= crd[x] == crd[x + R];                                    \
          if (!longer)                                                         \
            break;                                                             \
          if (x0 + ++R >= n)                                                   \
            break;                                                             \
        }                                                                      \
      }                                                                        \
    }                                                                          \
    *distinct = d;                                                             \
    *longest = R;                                                              \
    return 1;                                                                  \
  }
SORTED_RUNS(sorted_runs32, int32_t, v4i32)
SORTED_RUNS(sorted_runs64, int64_t, v2i64)

/* Level l flat and sorted (see SORTED_RUNS): its single mode's figures,
 * its largest coordinate and the drawn leaves' coordinates, and 1; 0 when
 * it is not sorted. */
static int sweep_sorted(work *w, int l) {
  const galley_level *L = &w->t->lvl[l];
  galley_pos n = L->nchild;
  int64_t d = 0, mx = 0;
  if (n == 0 || !(L->idx32 ? sorted_runs32(L->crd32, n, &d, &mx)
                           : sorted_runs64(L->crd, n, &d, &mx)))
    return 0;
  for (int64_t j = 0; j < w->ndrawn; j++)
    w->row[j * w->k + l] = galley_rt_crd(L, w->drawn[j]);
  w->maxc[l] = galley_rt_crd(L, n - 1);
  set_exact(w, 1u << L->mode, d, mx);
  return 1;
}

/* The histogram of a flat list level's coordinates (one leaf under each
 * position): one plain loop per index width and counter type, nothing
 * else in it (most of a large table's statistics).  A coordinate occurs
 * at most once in each of the level's npar fibers, so counters as narrow
 * as npar allows (a matrix of 139 rows needs a byte a coordinate: a
 * quarter of the memory to clear, fault in and keep in cache). */
#define FLAT_HIST(NAME, T, C)                                                  \
  static void NAME(const T *crd, galley_pos n, C *cnt) {                       \
    for (galley_pos q = 0; q < n; q++)                                         \
      cnt[crd[q]]++;                                                           \
  }
FLAT_HIST(flat_hist32_u8, int32_t, uint8_t)
FLAT_HIST(flat_hist32_u16, int32_t, uint16_t)
FLAT_HIST(flat_hist32_u32, int32_t, uint32_t)
FLAT_HIST(flat_hist64_u8, int64_t, uint8_t)
FLAT_HIST(flat_hist64_u16, int64_t, uint16_t)
FLAT_HIST(flat_hist64_u32, int64_t, uint32_t)

/* distinct and max_degree of a histogram of `size` counters (in blocks
 * whose counts fit 32 bits); returns the largest value counted (-1 when
 * none), found from the top down. */
#define HIST_FIGURES(NAME, C)                                                  \
  static int64_t NAME(const C *cnt, int64_t size, int64_t *distinct,           \
                      int64_t *maxdeg) {                                       \
    int64_t d = 0, last = size - 1;                                            \
    C mx = 0;                                                                  \
    for (int64_t v = 0; v < size; v += 1 << 20) {                              \
      int64_t end = size - v > 1 << 20 ? v + (1 << 20) : size;                 \
      uint32_t dd = 0;                                                         \
      for (int64_t x = v; x < end; x++) {                                      \
        dd += cnt[x] != 0;                                                     \
        mx = cnt[x] > mx ? cnt[x] : mx;                                        \
      }                                                                        \
      d += dd;                                                                 \
    }                                                                          \
    while (last >= 0 && cnt[last] == 0)                                        \
      last--;                                                                  \
    *distinct = d;                                                             \
    *maxdeg = mx;                                                              \
    return last;                                                               \
  }
HIST_FIGURES(hist_figures_u8, uint8_t)
HIST_FIGURES(hist_figures_u16, uint16_t)
HIST_FIGURES(hist_figures_u32, uint32_t)

/* The largest coordinate of a list level: the largest of its fibers'
 * last coordinates when it has few fibers (each fiber is sorted), else
 * one pass. */
static int64_t max_crd(const galley_level *L) {
  int64_t mx = -1;
  if (L->npar <= L->nchild / 4) {
    for (galley_pos p = 0; p < L->npar; p++) {
      galley_pos e = galley_rt_pos(L, p + 1);
      if (e > galley_rt_pos(L, p))
        mx = galley_rt_crd(L, e - 1) > mx ? galley_rt_crd(L, e - 1) : mx;
    }
  } else if (L->idx32) {
    int32_t m = -1;
    for (galley_pos q = 0; q < L->nchild; q++)
      m = L->crd32[q] > m ? L->crd32[q] : m;
    mx = m;
  } else {
    for (galley_pos q = 0; q < L->nchild; q++)
      mx = L->crd[q] > mx ? L->crd[q] : mx;
  }
  return mx;
}

/* A flat list level (one leaf under each position: the last level, or
 * only unary levels below): its counts are those of its coordinates.
 * The single mode's figures when hist (its dim fits a histogram), the
 * largest coordinate, and the drawn leaves' coordinates (their positions
 * increase: a forward gather) for their sample rows. */
static galley_status sweep_flat(work *w, int l, int hist) {
  const galley_level *L = &w->t->lvl[l];
  galley_pos n = L->nchild;
  int64_t mx, d = 0, md = 0;
  int width = L->npar <= UINT8_MAX ? 1 : L->npar <= UINT16_MAX ? 2 : 4;
  void *cnt = hist ? rt_calloc_array(L->dim, (size_t)width) : NULL;
  if (hist && !cnt)
    return GALLEY_ENOMEM;
  if (!hist) {
    mx = max_crd(L);
  } else if (width == 1) {
    if (L->idx32)
      flat_hist32_u8(L->crd32, n, cnt);
    else
      flat_hist64_u8(L->crd, n, cnt);
    mx = hist_figures_u8(cnt, L->dim, &d, &md);
  } else if (width == 2) {
    if (L->idx32)
      flat_hist32_u16(L->crd32, n, cnt);
    else
      flat_hist64_u16(L->crd, n, cnt);
    mx = hist_figures_u16(cnt, L->dim, &d, &md);
  } else {
    if (L->idx32)
      flat_hist32_u32(L->crd32, n, cnt);
    else
      flat_hist64_u32(L->crd, n, cnt);
    mx = hist_figures_u32(cnt, L->dim, &d, &md);
  }
  if (hist) {
    set_exact(w, 1u << L->mode, d, md);
    free(cnt);
  }
  w->maxc[l] = mx;
  for (int64_t j = 0; j < w->ndrawn; j++)
    w->row[j * w->k + l] = galley_rt_crd(L, w->drawn[j]);
  return GALLEY_OK;
}

/* Any dense or list level: the leaves under each position. */
static void sweep_any(work *w, int l, uint32_t *cnt, int64_t *nonempty,
                      int64_t *maxdeg, int64_t *maxc) {
  const galley_level *L = &w->t->lvl[l];
  int dense = L->kind == GALLEY_RT_DENSE, k = w->k;
  int64_t ne = 0, md = 0, mx = -1, j = 0;
  galley_crd i = 0; /* coordinate of a dense level's position */
  galley_pos lb = leaf_begin(w, l, 0);
  for (galley_pos q = 0; q < L->nchild; q++) {
    galley_crd crd = dense ? i : galley_rt_crd(L, q);
    if (dense && ++i == L->dim)
      i = 0;
    galley_pos next = leaf_begin(w, l, q + 1);
    int64_t c = next - lb;
    lb = next;
    if (c == 0)
      continue;
    for (; j < w->ndrawn && w->drawn[j] < next; j++)
      w->row[j * k + l] = crd; /* a drawn leaf under q */
    ne++;
    md = c > md ? c : md;
    mx = crd > mx ? crd : mx;
    if (cnt)
      cnt[crd] += (uint32_t)c;
  }
  *nonempty = ne;
  *maxdeg = md;
  *maxc = mx;
}

/* Level l's positions: the prefix {lvl0..lvl l} and, when its
 * coordinates fit a histogram, the single mode of level l. */
static galley_status sweep_level(work *w, int l, unsigned prefix) {
  const galley_level *L = &w->t->lvl[l];
  int flat = w->nbelow[l] == 0; /* one leaf under every position */
  int hist = l > 0 && L->dim <= w->n + 65536 && w->n <= (int64_t)UINT32_MAX;
  if (flat && L->kind == GALLEY_RT_LIST) {
    set_exact(w, prefix, L->nchild, 1);
    if (l > 0 && sweep_sorted(w, l))
      return GALLEY_OK;
    return sweep_flat(w, l, hist);
  }
  uint32_t *cnt = NULL;
  if (hist && !flat) {
    cnt = rt_calloc_array(L->dim, sizeof *cnt);
    if (!cnt)
      return GALLEY_ENOMEM;
  }
  int64_t nonempty = L->nchild, maxdeg = 1, maxc;
  if (flat) { /* dense: every coordinate, npar times */
    maxc = L->dim - 1;
    for (int64_t j = 0; j < w->ndrawn; j++)
      w->row[j * w->k + l] = w->drawn[j] % L->dim;
    if (l > 0)
      set_exact(w, 1u << L->mode, L->dim, L->npar);
  } else {
    sweep_any(w, l, cnt, &nonempty, &maxdeg, &maxc);
  }
  set_exact(w, prefix, nonempty, maxdeg);
  w->maxc[l] = maxc;
  if (cnt) {
    int64_t d, mx;
    histogram_figures(cnt, maxc + 1, &d, &mx);
    set_exact(w, 1u << L->mode, d, mx);
    free(cnt);
  }
  return GALLEY_OK;
}

static galley_status sweep(work *w) {
  w->n = w->t->nval;
  int k = w->k, plain[MAXK];
  for (int j = 1; j < k; j++)
    plain[j] = !unary(&w->t->lvl[j]);
  for (int l = 0; l < k; l++) {
    w->nbelow[l] = 0;
    for (int j = l + 1; j < k; j++)
      if (plain[j])
        w->below[l][w->nbelow[l]++] = j;
  }
  unsigned prefix = 0;
  for (int l = 0; l < w->k && w->n > 0; l++) {
    prefix |= 1u << w->t->lvl[l].mode;
    galley_status st = sweep_level(w, l, prefix);
    if (st != GALLEY_OK)
      return st;
  }
  return GALLEY_OK;
}

/* ---- step 1 otherwise: walk the storage-order chain ---- */

static void walk_prefix_chain(work *w) {
  const galley_tensor *t = w->t;
  int k = w->k;
  const galley_level *last = &t->lvl[k - 1];
  galley_crd prev[MAXK] = {0};
  int key[MAXK];
  for (int l = 0; l < k; l++)
    key[l] = l;
  scanner sc;
  scan_init(&sc, k);
  walker wk;
  walk_init(&wk, t);
  galley_pos fp;
  int64_t *maxc = w->maxc;
  while (walk_fiber(&wk, &fp)) {
    int first = 1;
    FIBER_LOOP(t, last, fp, {
      int j = k - 1;
      if (first) {
        first = 0;
        j = 0;
        while (j < k - 1 && wk.crd[j] == prev[j])
          j++;
        for (int l = 0; l < k - 1; l++) {
          prev[l] = wk.crd[l];
          if (wk.crd[l] > maxc[l])
            maxc[l] = wk.crd[l];
        }
      }
      if (j == k - 1 && c == prev[k - 1] && sc.rows > 0)
        j = k; /* a repeated entry: cannot happen in a valid tensor */
      prev[k - 1] = c;
      if (c > maxc[k - 1])
        maxc[k - 1] = c;
      scan_row(&sc, j);
    });
  }
  scan_finish(&sc);
  w->n = sc.rows;
  if (w->n > 0)
    store_exact(w, &sc, key);
}

/* ---- step 3: chains over the tensor ---- */

/* Group the tensor's entries by the first L levels of key. */
static galley_status tensor_chain(work *w, const int *key, int L,
                                  scanner *sc) {
  int64_t space = 1, dense_limit = w->n + 65536;
  for (int f = 0; f < L && space <= dense_limit; f++)
    if (rt_mul_overflows(space, w->maxc[key[f]] + 1, &space))
      space = INT64_MAX;
  if (space <= dense_limit && w->n <= (int64_t)UINT32_MAX)
    return count_chain(w->t, key, L, w->maxc, space, sc);
  return sort_chain(w->t, key, L, w->maxc, w->n, &w->buf, &w->tmp, &w->cap,
                    sc);
}

/* The key of chain c cut after its last subset not yet exact; 0 when
 * every subset of the chain is known. */
static int open_key(const work *w, const chain *c, int *key) {
  int last = -1;
  for (int j = 0; j < c->len; j++)
    if (!w->exact[level_modes(w->t, c->set[j])])
      last = j;
  if (last < 0)
    return 0;
  chain cut = *c;
  cut.len = last + 1;
  return chain_key(&cut, w->k, key);
}

static galley_status exact_chains(work *w) {
  chain ch[MAX_CHAINS];
  int nch = build_chains(w->k, ch);
  for (int c = 0; c < nch; c++) {
    int key[MAXK], L = open_key(w, &ch[c], key);
    if (L == 0)
      continue;
    scanner sc;
    galley_status st = tensor_chain(w, key, L, &sc);
    if (st != GALLEY_OK)
      return st;
    store_exact(w, &sc, key);
  }
  return GALLEY_OK;
}

/* Every single mode exact (step 4 bounds the others by them). */
static galley_status exact_singles(work *w) {
  for (int l = 0; l < w->k; l++) {
    if (w->exact[1u << w->t->lvl[l].mode])
      continue;
    int key[1] = {l};
    scanner sc;
    galley_status st = tensor_chain(w, key, 1, &sc);
    if (st != GALLEY_OK)
      return st;
    store_exact(w, &sc, key);
  }
  return GALLEY_OK;
}

/* ---- step 4: a sample ---- */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Entries to skip before the next one drawn with probability q:
 * geometric, so that each entry is drawn independently. */
static int64_t skip(uint64_t *s, double lq) {
  double u = ((double)(splitmix64(s) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
  double g = floor(log(u) / lq);
  return g < 9e18 ? (int64_t)g : INT64_MAX / 2;
}

typedef struct draw {
  galley_crd *row; /* n rows of k level-order coordinates */
  int64_t n, cap;
} draw;

static galley_crd *sample_add(draw *s, int k) {
  if (s->n == s->cap &&
      rt_grow((void **)&s->row, &s->cap, (size_t)k * sizeof *s->row,
              s->n + 1) != 0)
    return NULL;
  return s->row + s->n++ * k;
}

/* Draw leaves of a sweepable tensor (positions; the sweep fills in
 * their coordinates). */
static galley_status draw_leaves(work *w, double lq) {
  uint64_t seed = RT_STATS_SEED;
  int64_t cap = 0;
  for (int64_t x = skip(&seed, lq); x < w->n; x += 1 + skip(&seed, lq)) {
    if (w->ndrawn == cap &&
        rt_grow((void **)&w->drawn, &cap, sizeof *w->drawn, w->ndrawn + 1))
      return GALLEY_ENOMEM;
    w->drawn[w->ndrawn++] = x;
  }
  w->row = rt_malloc_array(w->ndrawn * w->k, sizeof *w->row);
  return w->row ? GALLEY_OK : GALLEY_ENOMEM;
}

/* Draw entries of any tensor during a walk. */
static galley_status sample_walk(const work *w, double lq, draw *s) {
  const galley_tensor *t = w->t;
  int k = w->k;
  uint64_t seed = RT_STATS_SEED;
  int64_t e = 0, next = skip(&seed, lq);
  walker wk;
  walk_init(&wk, t);
  galley_pos fp;
  while (walk_fiber(&wk, &fp)) {
    FIBER_LOOP(t, &t->lvl[k - 1], fp, {
      if (e++ == next) {
        galley_crd *row = sample_add(s, k);
        if (!row)
          return GALLEY_ENOMEM;
        memcpy(row, wk.crd, (size_t)(k - 1) * sizeof *row);
        row[k - 1] = c;
        next = e + skip(&seed, lq);
      }
    });
  }
  return GALLEY_OK;
}

void rt_degree_limits(const galley_degree_stats *ds, const rt_degree_info *info,
                      unsigned S, int64_t *lo, int64_t *hi) {
  int k = ds->order;
  unsigned nsub = 1u << k;
  int64_t n = ds->nnz;
  *lo = n > 0;
  *hi = n;
  for (unsigned T = 0; T < nsub; T++) {
    if (!info->exact[T])
      continue;
    if ((T & S) == T) {
      if (ds->distinct[T] > *lo)
        *lo = ds->distinct[T];
      /* distinct[S] <= distinct[T] * the sizes of the other modes */
      double p = (double)ds->distinct[T];
      for (unsigned R = S & ~T; R && p < (double)n; R &= R - 1) {
        int m = __builtin_ctz(R);
        p *= info->exact[1u << m] ? (double)ds->distinct[1u << m]
                                  : (double)ds->dims[m];
      }
      if (p < (double)*hi)
        *hi = (int64_t)p;
    }
    if ((T & S) == S && ds->distinct[T] < *hi)
      *hi = ds->distinct[T];
  }
  if (*hi < *lo) /* cannot happen with true figures; keep an interval */
    *hi = *lo;
}

/* The figures of the subsets still open, from their d[S] groups in a
 * sample drawn with probability q, f1[S] of them of a single entry (see
 * the header). */
static void sample_figures(work *w, const int64_t *d, const int64_t *f1,
                           double q) {
  galley_degree_stats *out = w->out;
  rt_degree_info known;
  memcpy(known.exact, w->exact, sizeof known.exact);
  unsigned nsub = 1u << w->k;
  for (unsigned S = 1; S < nsub; S++) {
    if (w->exact[S])
      continue;
    int64_t lo, hi, maxdeg = w->n;
    rt_degree_limits(out, &known, S, &lo, &hi);
    double g = (double)f1[S];
    double est = (double)d[S] + (g + MARGIN_SIGMAS * sqrt(g)) * (1 - q) / q;
    int64_t v = est < (double)hi ? (int64_t)ceil(est) : hi;
    out->distinct[S] = v < lo ? lo : v;
    for (unsigned T = 0; T < nsub; T++)
      if (known.exact[T] && (T & S) == T && out->max_degree[T] < maxdeg)
        maxdeg = out->max_degree[T];
    out->max_degree[S] = maxdeg;
  }
}

static galley_status sampled_chains(work *w, double q, int walked,
                                    rt_degree_info *info) {
  galley_status st = exact_singles(w);
  unsigned nsub = 1u << w->k, open = 0;
  for (unsigned S = 0; S < nsub; S++)
    open += !w->exact[S];
  if (st != GALLEY_OK || open == 0)
    return st;
  draw s = {w->row, w->ndrawn, w->ndrawn};
  w->row = NULL; /* s owns the rows now */
  if (walked)
    st = sample_walk(w, log1p(-q), &s);
  int64_t *d = calloc(2 * NSUB, sizeof *d), *f1 = d + NSUB;
  if (st == GALLEY_OK && !d)
    st = GALLEY_ENOMEM;
  chain ch[MAX_CHAINS];
  int nch = build_chains(w->k, ch);
  for (int c = 0; c < nch && st == GALLEY_OK; c++) {
    int key[MAXK], L = open_key(w, &ch[c], key);
    if (L == 0)
      continue;
    scanner sc;
    st = sort_rows(s.row, w->k, s.n, key, L, w->maxc, &w->buf, &w->tmp,
                   &w->cap, &sc);
    for (int p = 1; p <= L && st == GALLEY_OK; p++) {
      unsigned S = key_modes(w->t, key, p);
      d[S] = sc.count[p];
      f1[S] = sc.ones[p];
    }
  }
  if (st == GALLEY_OK) {
    sample_figures(w, d, f1, q);
    info->sampled = s.n;
    info->rate = q;
  }
  free(d);
  free(s.row);
  return st;
}

/* ---- the entry points ---- */

static galley_status compute(work *w, int64_t sample_size,
                             rt_degree_info *info) {
  int walked = !sweepable(w->t);
  galley_status st = GALLEY_OK;
  if (walked) {
    walk_prefix_chain(w);
  } else {
    /* draw before the sweep, which then reads the drawn leaves'
     * coordinates as it streams by (matrices need no sample) */
    int64_t n = w->n = w->t->nval;
    if (sample_size > 0 && n > 2 * sample_size && w->k > 2)
      st = draw_leaves(w, log1p(-(double)sample_size / (double)n));
    if (st == GALLEY_OK)
      st = sweep(w);
  }
  w->out->nnz = w->n;
  if (st != GALLEY_OK || w->n == 0)
    return st;
  set_exact(w, 0, 1, w->n);
  set_exact(w, (1u << w->k) - 1, w->n, 1);
  if (sample_size > 0 && w->n > 2 * sample_size)
    return sampled_chains(w, (double)sample_size / (double)w->n, walked, info);
  return exact_chains(w);
}

galley_status rt_degree_stats(const galley_tensor *t, int64_t sample,
                              galley_degree_stats *out, rt_degree_info *info,
                              galley_error *err) {
  if (!t || !out)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_tensor_degree_stats: NULL argument");
  int k = t->order;
  if (k < 0 || k > MAXK)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_tensor_degree_stats: bad order %d", k);
  rt_degree_info own;
  if (!info)
    info = &own;
  memset(info, 0, sizeof *info);
  memset(out, 0, sizeof *out);
  out->order = k;
  for (int m = 0; m < k; m++)
    out->dims[m] = t->dims[m];

  if (k == 0) {
    int64_t n = (t->nval > 0 && t->val && !is_fill(t->val[0], t->fill));
    out->nnz = n;
    out->distinct[0] = n;
    out->max_degree[0] = n;
    info->exact[0] = 1;
    rt_error_clear(err);
    return GALLEY_OK;
  }
  if (!walkable(t))
    return rt_error(err, GALLEY_EINTERNAL,
                    "galley_tensor_degree_stats: a level has no ordered view");
  work w = {.t = t, .k = k, .out = out, .exact = info->exact};
  for (int l = 0; l < k; l++)
    w.maxc[l] = 0;
  galley_status st = compute(&w, sample, info);
  free(w.buf);
  free(w.tmp);
  free(w.drawn);
  free(w.row);
  if (st != GALLEY_OK) {
    int64_t n = w.n;
    memset(out, 0, sizeof *out);
    memset(info, 0, sizeof *info);
    return rt_error(
        err, st, "galley_tensor_degree_stats: %s for %lld entries",
        st == GALLEY_ENOMEM ? "out of memory" : "too large", (long long)n);
  }
  if (w.n == 0) { /* no entry: every figure 0, and exact */
    memset(out->distinct, 0, sizeof out->distinct);
    memset(out->max_degree, 0, sizeof out->max_degree);
    memset(info->exact, 1, (size_t)1 << k);
  }
  rt_error_clear(err);
  return GALLEY_OK;
}

galley_status galley_tensor_degree_stats(const galley_tensor *t,
                                         galley_degree_stats *out,
                                         galley_error *err) {
  return rt_degree_stats(t, 0, out, NULL, err);
}
