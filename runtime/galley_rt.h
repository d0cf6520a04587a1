/*
 * galley_rt.h -- the kernel-facing layout of galleyc's fibertree tensors.
 *
 * Generated kernels include this header and nothing else but <stdint.h>, so
 * it must compile with tcc as well as gcc and clang (C99, no libc calls, no
 * function pointers).  It defines the storage layout of a tensor and level
 * access as small static inline functions that compile to the loads a
 * hand-written CSR loop would do.
 *
 * A tensor of order k has k levels; level l (0 = outermost) stores logical
 * mode `mode` of the tensor.  A level maps a parent position p (0 <= p <
 * npar) and a coordinate i (0 <= i < dim) to a child position q (0 <= q <
 * nchild); the next level's parents are this level's children, and the
 * last level's children index the values array.  The root has npar = 1.
 *
 *   dense    q = p*dim + i                       nchild = npar*dim
 *   list     fiber p is crd[pos[p] .. pos[p+1]), strictly increasing;
 *            q is the position in crd            nchild = pos[npar]
 *   hash     open addressing over key = p*dim + i (linear probing,
 *            key -1 = empty slot); slot[h] is the child position, handed
 *            out in insertion order              nchild = number of keys
 *            Frozen view for ordered walks: fiber p is crd[pos[p] ..
 *            pos[p+1]) sorted, with child positions qos[...]
 *   bytemap  tbl[p*dim + i] != 0 marks a stored (p, i); children are laid
 *            out densely, q = p*dim + i          nchild = npar*dim
 *            Set indices of fiber p: crd[pos[p] .. pos[p+1]) sorted
 *
 * Positions and coordinates are computed as int64_t; the runtime refuses
 * any level with npar*dim >= 2^62, so p*dim + i never overflows.
 *
 * Index width.  A list or bytemap level whose pos and crd values all fit
 * in 32 bits (dim <= 2^31 and nset < 2^31) may store them as int32_t:
 * idx32 = 1, the arrays are pos32 and crd32, and pos and crd are NULL.
 * Otherwise idx32 = 0 and pos and crd (int64_t) hold them.  A hash level
 * may be 32-bit when, besides, every key p*dim + i fits (npar*dim <=
 * 2^31): then all of its arrays are -- key32, slot32, and its frozen
 * view pos32, crd32, qos32 -- and key, slot, pos, crd, qos are NULL.
 * The table's layout is the same at both widths (the start slot hashes
 * the key's value), so a width change copies it without rehashing.
 * Dense levels have no index arrays.  Code that does not know a level's
 * width reads it through galley_rt_pos, galley_rt_crd, galley_rt_qos and
 * galley_rt_hash_locate; a generated kernel knows it from its plan,
 * declares the arrays of that width and calls the ...32 or ...64 form.
 */
#ifndef GALLEY_RT_H
#define GALLEY_RT_H

#include <stdint.h>

#define GALLEY_RT_MAX_ORDER 8 /* equals GALLEY_MAX_ORDER in galley.h */

/* Level kinds; the values equal galley_level_kind in galley.h. */
#define GALLEY_RT_DENSE 0
#define GALLEY_RT_LIST 1
#define GALLEY_RT_HASH 2
#define GALLEY_RT_BYTEMAP 3

typedef int64_t galley_pos; /* a position in a level's storage (p, q) */
typedef int64_t galley_crd; /* a coordinate along one dimension (i) */

typedef struct galley_level {
  int kind;          /* GALLEY_RT_DENSE .. GALLEY_RT_BYTEMAP */
  int mode;          /* logical mode this level stores */
  galley_crd dim;    /* extent of the dimension */
  galley_pos npar;   /* number of parent positions (fibers) */
  galley_pos nchild; /* number of child positions */
  galley_pos nset;   /* stored (p, i) pairs: list/hash = nchild, bytemap =
                        set flags, dense = npar*dim */
  galley_pos *pos;   /* list, frozen hash, bytemap: npar+1 fiber offsets */
  galley_crd *crd;   /* list, frozen hash, bytemap: sorted coords, nset */
  galley_pos *qos;   /* frozen hash: child position of crd[t], nset */
  int64_t *key;      /* hash: hcap slots, p*dim + i or -1 when empty */
  galley_pos *slot;  /* hash: hcap slots, child position of key[h] */
  galley_pos hcap;   /* hash: number of slots, a power of two */
  uint8_t *tbl;      /* bytemap: npar*dim flags */
  int idx32;         /* 1: pos and crd are stored 32-bit, in pos32 and
                        crd32 (pos and crd are NULL) */
  int32_t *pos32;    /* idx32: the fiber offsets, npar+1 */
  int32_t *crd32;    /* idx32: the coordinates, nset */
  int32_t *qos32;    /* idx32 frozen hash: qos, nset */
  int32_t *key32;    /* idx32 hash: key, hcap slots (-1 empty) */
  int32_t *slot32;   /* idx32 hash: slot, hcap slots */
} galley_level;

/* The largest dim and nset of a level that may store 32-bit indices. */
#define GALLEY_RT_IDX32_MAX_DIM ((int64_t)1 << 31)
#define GALLEY_RT_IDX32_MAX_NSET (((int64_t)1 << 31) - 1)
/* The most keys (npar*dim) of a hash level that may be 32-bit: every
 * key p*dim + i is then at most 2^31 - 1. */
#define GALLEY_RT_IDX32_MAX_KEYS ((int64_t)1 << 31)

struct galley_tensor {
  int order;                            /* number of modes, 0..8 */
  int borrowed;                         /* 1: the level arrays and val are
                                           the caller's (wrapped CSR/CSC),
                                           not freed with the tensor */
  int64_t dims[GALLEY_RT_MAX_ORDER];    /* logical sizes, by logical mode */
  galley_level lvl[GALLEY_RT_MAX_ORDER]; /* storage levels, outermost first */
  double *val;                          /* nval values (last level's children) */
  galley_pos nval;                      /* 1 for a scalar */
  double fill;                          /* value of every unstored entry */
  void *cache;                          /* the runtime's facts and converted
                                           copies (runtime/facts.c); NULL
                                           until needed.  Kernels never touch
                                           it; a copy of the struct (a view)
                                           must set it to NULL */
};

/* The hash table slot where the search for key starts.  A strong 64-bit
 * mix so that the sequential keys of a CSR-like pattern spread out. */
static inline galley_pos galley_rt_hash_start(int64_t key, galley_pos hcap) {
  uint64_t x = (uint64_t)key;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return (galley_pos)(x & (uint64_t)(hcap - 1));
}

/* First t in [lo, hi) with crd[t] >= i (hi when none), by binary search. */
static inline galley_pos galley_rt_lower_bound(const galley_crd *crd,
                                               galley_pos lo, galley_pos hi,
                                               galley_crd i) {
  while (lo < hi) {
    galley_pos mid = lo + (hi - lo) / 2;
    if (crd[mid] < i)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* galley_rt_lower_bound over 32-bit coordinates. */
static inline galley_pos galley_rt_lower_bound32(const int32_t *crd,
                                                 galley_pos lo, galley_pos hi,
                                                 galley_crd i) {
  while (lo < hi) {
    galley_pos mid = lo + (hi - lo) / 2;
    if (crd[mid] < i)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Like galley_rt_lower_bound, but gallops (exponential search) from lo
 * first: O(log distance) when the answer is near lo, as in a merge. */
static inline galley_pos galley_rt_gallop(const galley_crd *crd, galley_pos lo,
                                          galley_pos hi, galley_crd i) {
  galley_pos step = 1, prev = lo;
  while (lo < hi && crd[lo] < i) {
    prev = lo + 1;
    lo += step;
    step <<= 1;
  }
  if (lo > hi)
    lo = hi;
  return galley_rt_lower_bound(crd, prev, lo, i);
}

/* galley_rt_gallop over 32-bit coordinates. */
static inline galley_pos galley_rt_gallop32(const int32_t *crd, galley_pos lo,
                                            galley_pos hi, galley_crd i) {
  galley_pos step = 1, prev = lo;
  while (lo < hi && crd[lo] < i) {
    prev = lo + 1;
    lo += step;
    step <<= 1;
  }
  if (lo > hi)
    lo = hi;
  return galley_rt_lower_bound32(crd, prev, lo, i);
}

/* pos[p] and crd[t] of a list, frozen hash or bytemap level of either
 * width. */
static inline galley_pos galley_rt_pos(const galley_level *L, galley_pos p) {
  return L->idx32 ? (galley_pos)L->pos32[p] : L->pos[p];
}

static inline galley_crd galley_rt_crd(const galley_level *L, galley_pos t) {
  return L->idx32 ? (galley_crd)L->crd32[t] : L->crd[t];
}

/* qos[t] of a frozen hash level of either width. */
static inline galley_pos galley_rt_qos(const galley_level *L, galley_pos t) {
  return L->idx32 ? (galley_pos)L->qos32[t] : L->qos[t];
}

/* Child position of (p, i) in a dense level. */
static inline galley_pos galley_rt_dense_locate(const galley_level *L,
                                                galley_pos p, galley_crd i) {
  return p * L->dim + i;
}

/* Child position of (p, i) in a sorted list, or -1 when not stored;
 * galley_rt_list_locate32 and galley_rt_list_locate64 are the same for a
 * level known to be 32-bit or 64-bit. */
static inline galley_pos galley_rt_list_locate64(const galley_level *L,
                                                 galley_pos p, galley_crd i) {
  galley_pos hi = L->pos[p + 1];
  galley_pos t = galley_rt_lower_bound(L->crd, L->pos[p], hi, i);
  return (t < hi && L->crd[t] == i) ? t : -1;
}

static inline galley_pos galley_rt_list_locate32(const galley_level *L,
                                                 galley_pos p, galley_crd i) {
  galley_pos hi = L->pos32[p + 1];
  galley_pos t = galley_rt_lower_bound32(L->crd32, L->pos32[p], hi, i);
  return (t < hi && L->crd32[t] == i) ? t : -1;
}

static inline galley_pos galley_rt_list_locate(const galley_level *L,
                                               galley_pos p, galley_crd i) {
  return L->idx32 ? galley_rt_list_locate32(L, p, i)
                  : galley_rt_list_locate64(L, p, i);
}

/* galley_rt_list_locate for coordinates looked up in increasing order in
 * one fiber p (a follower of a walk in coordinate order): the search
 * gallops from *from (at first pos[p]), which moves to the first
 * position >= i, so a whole walk costs about a merge of the two.  The
 * 32 and 64 forms are for a level of known width. */
static inline galley_pos galley_rt_list_locate_from64(const galley_level *L,
                                                      galley_pos p,
                                                      galley_pos *from,
                                                      galley_crd i) {
  galley_pos hi = L->pos[p + 1];
  galley_pos t = galley_rt_gallop(L->crd, *from, hi, i);
  *from = t;
  return (t < hi && L->crd[t] == i) ? t : -1;
}

static inline galley_pos galley_rt_list_locate_from32(const galley_level *L,
                                                      galley_pos p,
                                                      galley_pos *from,
                                                      galley_crd i) {
  galley_pos hi = L->pos32[p + 1];
  galley_pos t = galley_rt_gallop32(L->crd32, *from, hi, i);
  *from = t;
  return (t < hi && L->crd32[t] == i) ? t : -1;
}

static inline galley_pos galley_rt_list_locate_from(const galley_level *L,
                                                    galley_pos p,
                                                    galley_pos *from,
                                                    galley_crd i) {
  return L->idx32 ? galley_rt_list_locate_from32(L, p, from, i)
                  : galley_rt_list_locate_from64(L, p, from, i);
}

/* Child position of (p, i) in a hash level, or -1 when not stored;
 * galley_rt_hash_locate32 and galley_rt_hash_locate64 are the same for a
 * level known to be 32-bit or 64-bit. */
static inline galley_pos galley_rt_hash_locate64(const galley_level *L,
                                                 galley_pos p, galley_crd i) {
  int64_t key = p * L->dim + i;
  galley_pos mask = L->hcap - 1;
  galley_pos h = galley_rt_hash_start(key, L->hcap);
  const int64_t *keys = L->key;
  while (keys[h] != -1) {
    if (keys[h] == key)
      return L->slot[h];
    h = (h + 1) & mask;
  }
  return -1;
}

static inline galley_pos galley_rt_hash_locate32(const galley_level *L,
                                                 galley_pos p, galley_crd i) {
  int64_t key = p * L->dim + i;
  galley_pos mask = L->hcap - 1;
  galley_pos h = galley_rt_hash_start(key, L->hcap);
  const int32_t *keys = L->key32;
  while (keys[h] != -1) {
    if (keys[h] == key)
      return L->slot32[h];
    h = (h + 1) & mask;
  }
  return -1;
}

static inline galley_pos galley_rt_hash_locate(const galley_level *L,
                                               galley_pos p, galley_crd i) {
  return L->idx32 ? galley_rt_hash_locate32(L, p, i)
                  : galley_rt_hash_locate64(L, p, i);
}

/* Child position of (p, i) in a bytemap level, or -1 when not stored. */
static inline galley_pos galley_rt_bytemap_locate(const galley_level *L,
                                                  galley_pos p, galley_crd i) {
  galley_pos q = p * L->dim + i;
  return L->tbl[q] ? q : -1;
}

/* Child position of (p, i) in any level, or -1 when not stored.  Generated
 * code calls the kind-specific function directly; this is for the runtime. */
static inline galley_pos galley_rt_locate(const galley_level *L, galley_pos p,
                                          galley_crd i) {
  if (i < 0 || i >= L->dim)
    return -1;
  switch (L->kind) {
  case GALLEY_RT_DENSE:
    return galley_rt_dense_locate(L, p, i);
  case GALLEY_RT_LIST:
    return galley_rt_list_locate(L, p, i);
  case GALLEY_RT_HASH:
    return galley_rt_hash_locate(L, p, i);
  default:
    return galley_rt_bytemap_locate(L, p, i);
  }
}

/* Ordered walk over fiber p: for (t = begin; t < end; t++) visits
 * coordinate galley_rt_walk_crd(L, t) at child galley_rt_walk_child(L, p, t),
 * in increasing coordinate order.  Hash levels must be frozen. */
static inline galley_pos galley_rt_walk_begin(const galley_level *L,
                                              galley_pos p) {
  return L->kind == GALLEY_RT_DENSE ? 0 : galley_rt_pos(L, p);
}

static inline galley_pos galley_rt_walk_end(const galley_level *L,
                                            galley_pos p) {
  return L->kind == GALLEY_RT_DENSE ? L->dim : galley_rt_pos(L, p + 1);
}

static inline galley_crd galley_rt_walk_crd(const galley_level *L,
                                            galley_pos t) {
  return L->kind == GALLEY_RT_DENSE ? t : galley_rt_crd(L, t);
}

static inline galley_pos galley_rt_walk_child(const galley_level *L,
                                              galley_pos p, galley_pos t) {
  switch (L->kind) {
  case GALLEY_RT_DENSE:
    return p * L->dim + t;
  case GALLEY_RT_LIST:
    return t;
  case GALLEY_RT_HASH:
    return galley_rt_qos(L, t);
  default:
    return p * L->dim + galley_rt_crd(L, t);
  }
}

/* Pointwise helpers for the operator templates of src/ir/ops.c; they
 * compute exactly what the reference evaluator computes.  max and min
 * propagate NaN (unlike fmax/fmin): if either argument is NaN the result
 * is NaN, which keeps them commutative, associative and idempotent. */
static inline double galley_rt_max(double x, double y) {
  if (x != x || y != y) return x + y; /* a NaN */
  return y > x ? y : x;
}

static inline double galley_rt_min(double x, double y) {
  if (x != x || y != y) return x + y; /* a NaN */
  return y < x ? y : x;
}

/* max(x, 0), keeping NaN (NaN <= 0 is false) and mapping -0 to 0. */
static inline double galley_rt_relu(double x) {
  return x <= 0 ? 0.0 : x;
}

/* ------------------------------------------------------------------ */
/* The kernel ABI: how the executor calls a generated kernel.          */
/* ------------------------------------------------------------------ */

/* What a kernel returns: GALLEY_RT_OK, or why it stopped. */
#define GALLEY_RT_OK 0
#define GALLEY_RT_NOMEM 1    /* an allocation failed */
#define GALLEY_RT_DISORDER 2 /* a rows-mode sink got an entry out of order */

/* Where a kernel with a sparse result appends its entries, in the loop
 * order of the output indices (so they arrive sorted); the executor then
 * lays out the requested format.  grow is called only when the sink is
 * full: it makes room for at least `need` entries and returns 0, or -1
 * when out of memory (the kernel then returns GALLEY_RT_NOMEM). */
typedef struct galley_rt_sink {
  int order;     /* coordinates per entry */
  int64_t n;     /* entries held */
  int64_t cap;   /* capacity in entries */
  int64_t *crd;  /* n*order coordinates, entry-major, logical output modes
                    (rows mode: n last-level coordinates) */
  double *val;   /* n values */
  int (*grow)(struct galley_rt_sink *s, int64_t need);
  /* Rows mode (rows != 0), for a result stored as dense levels over one
   * sorted list: the entries are expected in the result's level order
   * and laid out as the list level directly -- crd keeps only the last
   * level's coordinate, pos[p + 1] counts the entries of parent p (the
   * position of the other coordinates in the dense levels).  An entry out
   * of that order sets disorder and fails the push; the executor then
   * runs the kernel again in the plain mode. */
  int rows;
  int disorder;
  int modes[GALLEY_RT_MAX_ORDER];     /* logical mode of each level */
  int64_t ldims[GALLEY_RT_MAX_ORDER]; /* size of each level */
  int64_t *pos;
  int64_t last_p, last_c;             /* the last entry (-1: none) */
  /* Rows mode with 32-bit coordinates (rows32 != 0; the executor sets it
   * when the last level's size fits): crd32 holds the n coordinates and
   * crd is unused, so the arrays become a 32-bit list level as they are.
   * grow may switch back to crd (rows32 = 0) when n would pass
   * GALLEY_RT_IDX32_MAX_NSET: read rows32 again after calling it. */
  int rows32;
  int32_t *crd32;
} galley_rt_sink;

/* Append one entry; GALLEY_RT_OK, GALLEY_RT_NOMEM, or (rows mode)
 * GALLEY_RT_DISORDER. */
static inline int galley_rt_sink_push(galley_rt_sink *s, const int64_t *crd,
                                      double v) {
  if (s->rows) {
    int last = s->order - 1;
    int64_t p = 0, c = crd[s->modes[last]];
    for (int l = 0; l < last; l++)
      p = p * s->ldims[l] + crd[s->modes[l]];
    if (p < s->last_p || (p == s->last_p && c <= s->last_c)) {
      s->disorder = 1;
      return GALLEY_RT_DISORDER;
    }
    if (s->n == s->cap && s->grow(s, s->n + 1) != 0)
      return GALLEY_RT_NOMEM;
    if (s->rows32)
      s->crd32[s->n] = (int32_t)c;
    else
      s->crd[s->n] = c;
    s->val[s->n++] = v;
    s->pos[p + 1]++;
    s->last_p = p;
    s->last_c = c;
    return 0;
  }
  if (s->n == s->cap && s->grow(s, s->n + 1) != 0)
    return GALLEY_RT_NOMEM;
  for (int k = 0; k < s->order; k++)
    s->crd[s->n * s->order + k] = crd[k];
  s->val[s->n++] = v;
  return GALLEY_RT_OK;
}

/* Rows mode: make room for `more` entries of parent p whose first
 * coordinate is c (a scatter workspace's flush of one row, in order);
 * GALLEY_RT_OK, GALLEY_RT_NOMEM, or GALLEY_RT_DISORDER when p and c do not
 * come after the last entry.  The caller then stores up to `more`
 * entries at n.. itself and ends with galley_rt_sink_rows_commit. */
static inline int galley_rt_sink_rows_reserve(galley_rt_sink *s, int64_t p,
                                              int64_t c, int64_t more) {
  if (p < s->last_p || (p == s->last_p && c <= s->last_c)) {
    s->disorder = 1;
    return GALLEY_RT_DISORDER;
  }
  if (s->n + more > s->cap && s->grow(s, s->n + more) != 0)
    return GALLEY_RT_NOMEM;
  return GALLEY_RT_OK;
}

/* Rows mode: the entries stored at s->n .. n_end belong to parent p. */
static inline void galley_rt_sink_rows_commit(galley_rt_sink *s, int64_t p,
                                              int64_t n_end) {
  if (n_end == s->n)
    return;
  s->pos[p + 1] += n_end - s->n;
  s->last_p = p;
  s->last_c = s->rows32 ? (int64_t)s->crd32[n_end - 1] : s->crd[n_end - 1];
  s->n = n_end;
}

/* A scatter workspace (levels.md section 4, rule 5): where a kernel whose
 * reduced loops come before some of its output loops (Gustavson's SpGEMM:
 * loops i, j, k for C[i,k] = sum(j: A[i,j] * B[j,k])) accumulates the
 * points of one iteration of its leading output loops, before flushing
 * them to the sink in order.  A key is the row-major linearization of the
 * scattered output indices' coordinates, 0 <= key < size.
 *   dense   (hashed == 0): the value of key is val[key], touched when
 *           seen[key] != 0; keys[] has room for size keys.
 *   hashed  (hashed == 1): open addressing with linear probing over cap
 *           slots (a power of two, 2^bits): slot_key[h] (-1 empty) and
 *           val[h]; grow keeps it at most half full and keys[] at least
 *           cap/2 long.
 * keys[0 .. n) lists the touched keys (first-touch order until sorted).
 * grow (hashed only) doubles cap and rehashes; 0, or -1 when out of
 * memory. */
typedef struct galley_rt_ws {
  int hashed;
  int bits;
  int64_t size;
  int64_t n;
  int64_t *keys;
  double *val;
  unsigned char *seen;
  int64_t *slot_key;
  int64_t cap;
  int (*grow)(struct galley_rt_ws *w);
} galley_rt_ws;

/* The hashed workspace's home slot of key (Fibonacci hashing). */
static inline int64_t galley_rt_ws_home(const galley_rt_ws *w, int64_t key) {
  return (int64_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> (64 - w->bits));
}

/* The slot holding key in a hashed workspace, or the empty slot where it
 * would go. */
static inline int64_t galley_rt_ws_probe(const galley_rt_ws *w, int64_t key) {
  int64_t h = galley_rt_ws_home(w, key), mask = w->cap - 1;
  while (w->slot_key[h] != -1 && w->slot_key[h] != key)
    h = (h + 1) & mask;
  return h;
}

/* The value of key, created with init when first touched; NULL when out
 * of memory.  The pointer is valid until the next call. */
static inline double *galley_rt_ws_at(galley_rt_ws *w, int64_t key,
                                      double init) {
  if (!w->hashed) {
    if (!w->seen[key]) {
      w->seen[key] = 1;
      w->val[key] = init;
      w->keys[w->n++] = key;
    }
    return &w->val[key];
  }
  if (2 * (w->n + 1) > w->cap && w->grow(w) != 0)
    return 0;
  int64_t h = galley_rt_ws_probe(w, key);
  if (w->slot_key[h] == -1) {
    w->slot_key[h] = key;
    w->val[h] = init;
    w->keys[w->n++] = key;
  }
  return &w->val[h];
}

/* The value of a touched key. */
static inline double galley_rt_ws_get(const galley_rt_ws *w, int64_t key) {
  return w->hashed ? w->val[galley_rt_ws_probe(w, key)] : w->val[key];
}

/* Sort a[0 .. n) ascending: quicksort (median of three, recursing into
 * the smaller part) down to short runs, then insertion sort. */
static inline void galley_rt_sort_keys(int64_t *a, int64_t n) {
  while (n > 24) {
    int64_t x = a[0], y = a[n / 2], z = a[n - 1];
    int64_t pivot = x < y ? (y < z ? y : (x < z ? z : x))
                          : (x < z ? x : (y < z ? z : y));
    int64_t i = -1, j = n;
    for (;;) {
      do i++; while (a[i] < pivot);
      do j--; while (a[j] > pivot);
      if (i >= j) break;
      int64_t t = a[i]; a[i] = a[j]; a[j] = t;
    }
    int64_t left = j + 1; /* a[0 .. left) <= pivot <= a[left .. n) */
    if (left < n - left) {
      galley_rt_sort_keys(a, left);
      a += left;
      n -= left;
    } else {
      galley_rt_sort_keys(a + left, n - left);
      n = left;
    }
  }
  for (int64_t i = 1; i < n; i++) {
    int64_t v = a[i], j = i;
    for (; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
    a[j] = v;
  }
}

/* Insertion sort of a[0 .. n): the fastest for a few keys. */
static inline void galley_rt_sort_few(int64_t *a, int64_t n) {
  for (int64_t i = 1; i < n; i++) {
    int64_t v = a[i], j = i;
    for (; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
    a[j] = v;
  }
}

/* LSD radix sort of a[0 .. n), whose values lie in [lo, lo + 2^bits)
 * with bits <= 22, through tmp[0 .. n): counting passes of at most 11
 * bits, fewer for few keys (a pass clears and sums its buckets), linear
 * in n where a comparison sort pays a log and its mispredicted branches. */
static inline void galley_rt_radix_keys(int64_t *a, int64_t *tmp, int64_t n,
                                        int64_t lo, int bits) {
  int64_t cnt[2048];
  int dmax = 2;
  while (dmax < 11 && ((int64_t)1 << (dmax - 1)) < n) dmax++;
  int passes = (bits + dmax - 1) / dmax;
  if (passes < 1) passes = 1;
  int d = (bits + passes - 1) / passes;
  int64_t nbk = (int64_t)1 << d, mask = nbk - 1;
  int64_t *src = a, *dst = tmp;
  for (int pass = 0; pass < passes; pass++) {
    int shift = pass * d;
    for (int64_t b = 0; b < nbk; b++) cnt[b] = 0;
    for (int64_t t = 0; t < n; t++) cnt[((src[t] - lo) >> shift) & mask]++;
    int64_t sum = 0;
    for (int64_t b = 0; b < nbk; b++) {
      int64_t c = cnt[b];
      cnt[b] = sum;
      sum += c;
    }
    for (int64_t t = 0; t < n; t++)
      dst[cnt[((src[t] - lo) >> shift) & mask]++] = src[t];
    int64_t *x = src;
    src = dst;
    dst = x;
  }
  if (src != a)
    for (int64_t t = 0; t < n; t++) a[t] = src[t];
}

/* The fewest touched keys that a dense workspace radix-sorts. */
#define GALLEY_RT_WS_RADIX_MIN 32

/* The longest range of keys per touched key that a dense workspace scans
 * instead of sorting: a branch-free pass over a flag costs about a cycle,
 * a sort some tens per key. */
#define GALLEY_RT_WS_SCAN_RATIO 16

/* Put the touched keys in increasing order.  A dense workspace whose
 * touched keys span a short range (banded and clustered products) lists
 * the set flags of that range instead of sorting. */
static inline void galley_rt_ws_sort(galley_rt_ws *w) {
  int64_t n = w->n, *keys = w->keys;
  if (n <= 16) {
    galley_rt_sort_few(keys, n);
    return;
  }
  if (!w->hashed) {
    int64_t lo = keys[0], hi = keys[0];
    for (int64_t t = 1; t < n; t++) {
      lo = keys[t] < lo ? keys[t] : lo;
      hi = keys[t] > hi ? keys[t] : hi;
    }
    if (hi - lo < GALLEY_RT_WS_SCAN_RATIO * n) {
      /* m reaches n only after the last flag (hi's): no write past n */
      const unsigned char *seen = w->seen;
      int64_t m = 0;
      for (int64_t k = lo; k <= hi; k++) {
        keys[m] = k;
        m += seen[k] != 0;
      }
      return;
    }
    /* keys[n .. 2n) is free scratch: size > hi - lo >= 16n */
    int bits = 0;
    while (bits < 23 && ((hi - lo) >> bits) != 0) bits++;
    if (n >= GALLEY_RT_WS_RADIX_MIN && bits <= 22) {
      galley_rt_radix_keys(keys, keys + n, n, lo, bits);
      return;
    }
  }
  galley_rt_sort_keys(keys, n);
}

/* Forget every touched key, in time proportional to their number. */
static inline void galley_rt_ws_clear(galley_rt_ws *w) {
  if (!w->hashed) {
    for (int64_t t = 0; t < w->n; t++) w->seen[w->keys[t]] = 0;
  } else {
    /* find every slot before emptying any: emptying breaks probe runs */
    for (int64_t t = 0; t < w->n; t++)
      w->keys[t] = galley_rt_ws_probe(w, w->keys[t]);
    for (int64_t t = 0; t < w->n; t++) w->slot_key[w->keys[t]] = -1;
  }
  w->n = 0;
}

/* A matrix of a dense level 0 over one list level 1 (CSR, CSC) sliced
 * for a row loop that walks its fibers (the sliced strategy, issue 11):
 * chunks of GALLEY_RT_SLICE consecutive level-0 coordinates ("rows"),
 * chunk c padded to the length of its longest row, w = start[c + 1] -
 * start[c] steps, and stored step-major: slot s * GALLEY_RT_SLICE + r
 * (start[c] <= s < start[c + 1]) holds entry s - start[c] of row
 * c * GALLEY_RT_SLICE + r.  A padding slot holds a coordinate the row
 * stores (or 0) and the tensor's fill, so a kernel may fold it when the
 * expression at the fill is the aggregate's identity.  Rows from
 * nchunk * GALLEY_RT_SLICE on are not in it.  Why: rows of 1-16 entries
 * of irregular length cost a mispredicted branch each; a chunk of four
 * runs four independent sums in one loop of predictable length (about
 * 2x faster on pgp-strong-2009 and luxembourg_osm in session 6). */
#define GALLEY_RT_SLICE 4
typedef struct galley_rt_sliced {
  int64_t nchunk;
  const int64_t *start; /* nchunk + 1 steps */
  const int32_t *crd;   /* start[nchunk] * GALLEY_RT_SLICE coordinates */
  const double *val;    /* and values; NULL when val32 holds them */
  const float *val32;   /* the values as floats when every value and the
                           fill is a float exactly (a pattern matrix's
                           1s, small integers): 8 bytes a slot instead of
                           12, the same sums bitwise; else NULL */
} galley_rt_sliced;

/* The arguments of every kernel `int galley_qN(const galley_kernel_args *)`,
 * which returns GALLEY_RT_OK or why it stopped (GALLEY_RT_NOMEM,
 * GALLEY_RT_DISORDER). */
typedef struct galley_kernel_args {
  const struct galley_tensor *const *in; /* the tensor of each access */
  struct galley_tensor *out; /* an all-dense result, or one with the
                                levels of a pattern access: preallocated
                                by the executor, every value set to the
                                fill */
  galley_rt_sink *sink;      /* any other result: entries in loop order */
  const int64_t *dims;       /* size of each index of the query, by id */
  int64_t lo, hi;            /* coordinates [lo, hi) of the outermost loop
                                (the whole range for now; a later issue
                                splits it across threads) */
  galley_rt_ws *ws;          /* the scatter workspace of a kernel whose
                                reduced loops precede output loops and
                                whose result is not all dense, else NULL */
  double *mark;              /* the dense table of a kernel with a marked
                                intersection (MERGE_MARK): one value per
                                coordinate of its loop, all 0 on entry,
                                left all 0 on GALLEY_RT_OK; else NULL */
  const galley_rt_sliced *sliced; /* the sliced copy of the matrix a
                                     query's sliced loop walks
                                     (PhysQuery.sliced), or NULL: the
                                     kernel then walks its list */
} galley_kernel_args;

#endif /* GALLEY_RT_H */
