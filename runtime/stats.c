/*
 * stats.c -- degree statistics of a tensor (galley_tensor_degree_stats),
 * the input of the chain-bound sparsity estimator (Galley paper, 6.3.2).
 *
 * What is computed.  For a tensor of order k and every subset S of its
 * logical modes (a bit mask): distinct[S], the number of distinct
 * projections of the non-fill entries onto S, and max_degree[S], the size
 * of the largest group of non-fill entries that agree on S.  Both come
 * from one grouping of the entries by their coordinates on S.
 *
 * How.  If the entries are sorted lexicographically by the modes
 * (m0, m1, ..., m(L-1)), then the entries agreeing on every prefix
 * {m0..m(p-1)} are contiguous, and one linear scan yields the groups of
 * all L prefixes at once: for consecutive entries, the first key position
 * j where they differ (their common prefix length) closes the current
 * group of every prefix longer than j.  So one sort serves a whole chain
 * of subsets S1 < S2 < ... of the subset lattice.
 *
 * A symmetric chain decomposition (de Bruijn, Tengbergen, Kruyswijk)
 * partitions the 2^k subsets into C(k, floor(k/2)) chains, each a run of
 * subsets that grow by one element: k = 2 needs 2 chains, 3 needs 3,
 * 4 needs 6, 8 needs 70.  It is built recursively: each chain
 * C1 < ... < Cm over k-1 elements gives C1 < ... < Cm < Cm+{e} and, when
 * m > 1, C1+{e} < ... < C(m-1)+{e}.  The elements are the tensor's levels
 * (storage order), so the first chain is {} < {lvl0} < {lvl0, lvl1} < ...,
 * whose sort order is the storage order itself: pass 1 walks the fibertree
 * and scans it directly, with no sort and no buffer (and also counts nnz
 * and the largest coordinate of each mode).
 *
 * Every other chain only needs its top subset's modes as the sort key
 * (base subset first, then the added modes in order): for matrices the
 * second chain is {col} alone.  Each such chain takes one further walk and
 * one of two paths:
 *   - counting, when the key space (product of largest coordinate + 1 over
 *     the key modes) is at most nnz + 65536: count the entries per key
 *     value in an array and scan it in order with a mixed-radix counter;
 *     the most significant digit that changed between two non-empty
 *     buckets is their common prefix length.  O(nnz + space), one array of
 *     uint32 counts, no sort (the column chain of a matrix always ends
 *     here unless it has more columns than nonzeros);
 *   - sorting otherwise: pack each non-fill entry's key coordinates into
 *     64-bit words, each field as wide as the largest coordinate in that
 *     mode needs (a field never straddles two words, so dims up to 2^62
 *     are fine and nothing overflows; most keys fit in one word), sort the
 *     rows with an LSD radix sort (digits of at most 11 bits over only the
 *     bits in use, passes where every row has the same digit skipped) and
 *     scan them; the first differing field of two rows comes from their
 *     highest differing bit.  O(nnz * words * passes), no comparisons;
 *     two arrays of nnz * words uint64, reused across chains.
 * For xenon1 (1.18M entries, CSR) the whole computation takes ~8 ms; for
 * a uniform random 1M x 1M matrix with 5M entries ~150 ms (bound by the
 * random count increments).
 *
 * "Non-fill" means value != fill and not bitwise equal to it (so NaN fills
 * work); stored entries equal to the fill (dense levels store everything)
 * are skipped.
 */
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

#define MAXK GALLEY_MAX_ORDER
#define MAX_CHAINS 70 /* C(8, 4) */
#define RADIX_BITS 11

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
        if (!is_fill(val_[L_->qos[i_]], fill_)) {                              \
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
    if (L->kind == GALLEY_RT_HASH && !L->qos)
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
    s->count[p]++;
  }
}

/* Store the results for the prefixes of key (level indices). */
static void scan_store(const scanner *s, const galley_tensor *t, const int *key,
                       galley_degree_stats *out) {
  unsigned mask = 0;
  for (int p = 1; p <= s->L; p++) {
    mask |= 1u << t->lvl[key[p - 1]].mode;
    out->distinct[mask] = s->count[p];
    out->max_degree[mask] = s->maxsz[p];
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

/* Any other chain: pack the key of every entry into words, radix sort
 * the rows, scan them.  *buf and *tmp (of *cap words) are reused across
 * chains and freed by the caller. */
static galley_status sort_chain(const galley_tensor *t, const int *key, int L,
                                const int64_t *maxc, int64_t n, uint64_t **buf,
                                uint64_t **tmp, int64_t *cap, scanner *sc) {
  int k = t->order;
  layout lay;
  make_layout(&lay, L, key, maxc);
  int W = lay.W;
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
  radix_sort(buf, tmp, n, W, lay.lowbit);
  rows = *buf;
  scan_init(sc, L);
  scan_row(sc, 0);
  for (int64_t i = 1; i < n; i++)
    scan_row(sc, packed_lcp(&lay, rows + (i - 1) * W, rows + i * W));
  scan_finish(sc);
  return GALLEY_OK;
}

/* ---- the entry point ---- */

galley_status galley_tensor_degree_stats(const galley_tensor *t,
                                         galley_degree_stats *out,
                                         galley_error *err) {
  if (!t || !out)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_tensor_degree_stats: NULL argument");
  int k = t->order;
  if (k < 0 || k > MAXK)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_tensor_degree_stats: bad order %d", k);
  memset(out, 0, sizeof *out);
  out->order = k;
  for (int m = 0; m < k; m++)
    out->dims[m] = t->dims[m];

  if (k == 0) {
    int64_t n = (t->nval > 0 && t->val && !is_fill(t->val[0], t->fill));
    out->nnz = n;
    out->distinct[0] = n;
    out->max_degree[0] = n;
    rt_error_clear(err);
    return GALLEY_OK;
  }
  if (!walkable(t))
    return rt_error(err, GALLEY_EINTERNAL,
                    "galley_tensor_degree_stats: a level has no ordered view");

  chain ch[MAX_CHAINS];
  int nch = build_chains(k, ch);
  int key[MAXK];

  /* Pass 1: the storage-order chain, nnz and the largest coordinates. */
  const galley_level *last = &t->lvl[k - 1];
  int64_t maxc[MAXK] = {0};
  galley_crd prev[MAXK] = {0};
  scanner sc;
  int L0 = chain_key(&ch[0], k, key);
  scan_init(&sc, L0);
  walker w;
  walk_init(&w, t);
  galley_pos fp;
  while (walk_fiber(&w, &fp)) {
    int first = 1;
    FIBER_LOOP(t, last, fp, {
      int j = k - 1;
      if (first) {
        first = 0;
        j = 0;
        while (j < k - 1 && w.crd[j] == prev[j])
          j++;
        for (int l = 0; l < k - 1; l++) {
          prev[l] = w.crd[l];
          if (w.crd[l] > maxc[l])
            maxc[l] = w.crd[l];
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
  int64_t n = sc.rows;
  scan_store(&sc, t, key, out);
  out->nnz = n;
  if (n == 0) {
    memset(out->distinct, 0, sizeof out->distinct);
    memset(out->max_degree, 0, sizeof out->max_degree);
    rt_error_clear(err);
    return GALLEY_OK;
  }

  /* The other chains: by counting when the key space is small, else by
   * packing, sorting and scanning. */
  int64_t dense_limit = n + 65536;
  uint64_t *buf = NULL, *tmp = NULL;
  int64_t cap = 0; /* words in buf and tmp */
  for (int c = 1; c < nch; c++) {
    int L = chain_key(&ch[c], k, key);
    int64_t space = 1;
    for (int f = 0; f < L && space <= dense_limit; f++)
      if (rt_mul_overflows(space, maxc[key[f]] + 1, &space))
        space = INT64_MAX;
    galley_status st =
        space <= dense_limit && n <= (int64_t)UINT32_MAX
            ? count_chain(t, key, L, maxc, space, &sc)
            : sort_chain(t, key, L, maxc, n, &buf, &tmp, &cap, &sc);
    if (st != GALLEY_OK) {
      free(buf);
      free(tmp);
      memset(out, 0, sizeof *out);
      return rt_error(
          err, st, "galley_tensor_degree_stats: %s for %lld entries",
          st == GALLEY_ENOMEM ? "out of memory" : "too large", (long long)n);
    }
    scan_store(&sc, t, key, out);
  }
  free(buf);
  free(tmp);

  unsigned all = (1u << k) - 1;
  out->distinct[0] = 1;
  out->max_degree[0] = n;
  out->distinct[all] = n;
  out->max_degree[all] = 1;
  rt_error_clear(err);
  return GALLEY_OK;
}
