/*
 * aot_runtime.c -- the run-time support of ahead-of-time drivers
 * (`galleyc compile`): everything a compiled program needs besides its
 * kernels, as plain C over the layout of galley_rt.h (libc only).
 *
 * The build embeds this file's text (without the include of galley_rt.h,
 * whose text the kernel source already carries, and with galley_rt_ws.h's
 * text in place of its include: the workspace memory the executor shares)
 * into every file galleyc
 * compile writes (src/aot/aot.c), so it is the one source of this code;
 * tests/test_compile.sh builds those files with gcc, clang and tcc under
 * -Wall -Wextra -pedantic -Werror.
 * Everything here is static: two compiled programs link into one binary.
 *
 * A driver describes its plan in the tables below (aotrt_plan) and calls
 * aotrt_run, which does what the executor (src/exec/exec.c) does for a
 * run: check the inputs, compute every query's index sizes from the
 * tensors it reads, allocate dense results or collect a sparse result's
 * entries from the kernel's sink and lay them out in any level format,
 * copy transposed inputs and intermediates, free intermediates after
 * their last reader, and hand the outputs over.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GALLEY_AOT_NO_THREADS
#include <pthread.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <sys/resource.h> /* getrlimit: the default memory budget */
#include <unistd.h>       /* sysconf */
#endif
#if defined(__linux__) && !defined(GALLEY_AOT_NO_MADVISE)
#include <sys/mman.h> /* madvise, with _DEFAULT_SOURCE (the file's top) */
#endif

#include "galley_rt.h"
#include "galley_rt_blocks.h"
#include "galley_rt_sink.h"
#include "galley_rt_sliced.h"
#include "galley_rt_ws.h"

/* Status codes of aotrt_run (the driver's header names them). */
#define AOTRT_OK 0
#define AOTRT_ENOMEM (-1) /* out of memory */
#define AOTRT_EINPUT (-2) /* an input's layout, format, sizes or fill */
#define AOTRT_ESIZE (-3)  /* a result too large for the compiled plan */
#define AOTRT_EARG (-4)   /* a NULL inputs or outputs array, or a
                             negative thread count */
#define AOTRT_EBUDGET (-5) /* a query would need more memory than the
                              budget (aotrt_default_budget, or the
                              caller's handle's) */

/* A rows-mode sink got an entry out of level order (internal: the
 * kernel runs again in the plain mode). */
#define AOTRT_DISORDER (-100)

/* Flags of aotrt_run_opts. */
#define AOTRT_CHECK_FULL 1u /* validate every input's contents, O(nnz) */
#define AOTRT_TRUST_VALUES 2u /* skip the O(nnz) checks of the values the
                                 plan relies on (finite, symmetric) */
#define AOTRT_PREPARE (1u << 30) /* internal (aotrt_prepare): stop before
                                    the first kernel, making what the
                                    caller's pool keeps */

/* Where a query's index gets its size at run time: mode `mode` of the
 * tensor in `slot` (inputs first, then the queries' results), or `fixed`
 * when slot < 0. */
typedef struct aotrt_dimsrc {
  int index;   /* the query's index id */
  int slot;
  int mode;
  int64_t fixed;
} aotrt_dimsrc;

/* How a kernel writes its result (phys.h's OutKind, grouped). */
#define AOTRT_OUT_DENSE 0   /* a preallocated all-dense result */
#define AOTRT_OUT_PATTERN 1 /* the levels of access `pattern`, copied */
#define AOTRT_OUT_SINK 2    /* entries appended to a sink */

typedef struct aotrt_query {
  const char *name;
  int transpose;      /* 1: a copy of acc[0]'s tensor in the format */
  int (*kernel)(const galley_kernel_args *a);
  int out_kind;
  int scatter;        /* a scatter workspace over the scatter indices */
  int nscatter;
  const int *scatter_ids;
  int pattern;        /* AOTRT_OUT_PATTERN: the access copied */
  int order;          /* the result's order */
  const int *out;     /* the index id of each result mode */
  const int *kinds;   /* the result's format: kind and mode per level */
  const int *modes;
  double fill;        /* the result's fill (a transpose: the fill the
                         plan reads its source with) */
  unsigned w32;       /* index widths the plan's readers expect */
  int nindices;
  int loop0;          /* the outermost loop's index id, -1: none */
  int nsrc;
  const aotrt_dimsrc *src;
  int nacc;
  const int *acc;     /* the slot each access reads */
  double est;         /* expected entries (a sink's first capacity) */
  int split;          /* the outermost loop splits into blocks that own
                         disjoint result points or entries (phys.h's
                         PART_DISJOINT, PART_CONCAT): run on threads */
  int concat;         /* ... PART_CONCAT: entries concatenated */
  const int *lead;    /* per access: AOTRT_LEAD_* bits (the accesses a
                         block's work is measured on) */
  double (*combine)(double, double); /* a reduction over the outermost
                         loop (PART_REDUCE) that runs in blocks: its
                         aggregate, folding partial results; else NULL */
  double room;        /* bytes the partial results of a reduction may
                         take */
  int mark;           /* the index whose size the table of a marked
                         intersection (MERGE_MARK) has, -1: none */
  int rows;           /* a sink result of dense levels over one list,
                         written in level order (PhysQuery.out_rows):
                         the sink lays out the list (rows mode) */
  int rows_split;     /* rows mode holds across blocks: the result's
                         first level stores the outermost loop's index */
  int every;          /* the kernel stores every point of its dense
                         result (phys_stores_every_point): no fill
                         first */
  int sliced;         /* the sliced strategy (PhysQuery.sliced): 1 + the
                         access whose sliced copy its chunk loop walks,
                         0: none */
  double sliced_fill; /* the fill of the copy's padding (the access's) */
} aotrt_query;

typedef struct aotrt_input {
  const char *name;
  const char *format; /* the format as text, for messages */
  int order;
  const int *kinds;
  const int *modes;
  unsigned w32;       /* bit l: level l is read with 32-bit indices */
  double fill;        /* the fill the plan reads it with */
  int fill0_ok;       /* a tensor with fill 0 takes `fill` (a declared
                         fill, as galleyc run binds it) */
  int need_finite;    /* the plan skips entries assuming finite values */
  int need_symmetric; /* the plan relies on its symmetry: bit 1, it is
                         its own transpose; bit 2, also a zero diagonal */
  const int64_t *sizes; /* per mode: the size the plan compiled in (a
                           constant or fill counting its coordinates),
                           -1 for any */
} aotrt_input;

typedef struct aotrt_plan {
  int ninputs;
  const aotrt_input *inputs;
  int nq;
  const aotrt_query *q;
  int noutputs;
  const int *outputs;  /* the query of each output */
  const char *prefix;  /* the entry points' prefix, for messages */
} aotrt_plan;

/* ------------------------------------------------------------------ */
/* Messages                                                            */
/* ------------------------------------------------------------------ */

/* The caller's message buffer (msg may be NULL). */
typedef struct aotrt_msg {
  char *buf;
  size_t size;
} aotrt_msg;

static int aotrt_fail(aotrt_msg *m, int code, const char *what,
                      const char *name, const char *detail, long long a,
                      long long b) {
  if (m->buf && m->size > 0) {
    char num[64];
    num[0] = '\0';
    if (a >= 0 || b >= 0)
      snprintf(num, sizeof num, " (%lld, expected %lld)", a, b);
    snprintf(m->buf, m->size, "error: %s '%s': %s%s", what, name ? name : "",
             detail, num);
  }
  return code;
}

static int aotrt_nomem(aotrt_msg *m, const char *name) {
  return aotrt_fail(m, AOTRT_ENOMEM, "query", name, "out of memory", -1, -1);
}

/* ------------------------------------------------------------------ */
/* Tensors                                                             */
/* ------------------------------------------------------------------ */

/* Free a tensor this runtime made (every array it points to). */
static void aotrt_free(struct galley_tensor *t) {
  if (!t)
    return;
  if (!t->borrowed) {
    for (int l = 0; l < t->order && l < GALLEY_RT_MAX_ORDER; l++) {
      galley_level *L = &t->lvl[l];
      free(L->pos);
      free(L->crd);
      free(L->qos);
      free(L->key);
      free(L->slot);
      free(L->tbl);
      free(L->pos32);
      free(L->crd32);
      free(L->qos32);
      free(L->key32);
      free(L->slot32);
    }
    free(t->val);
  }
  free(t);
}

static int aotrt_is_fill(double v, double fill) {
  return v == fill || (v != v && fill != fill);
}

/* a * b into *out unless it reaches 2^62 (the largest level). */
static int aotrt_mul(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0)
    return -1;
  if (a != 0 && b > (((int64_t)1 << 62) - 1) / a)
    return -1;
  *out = a * b;
  return 0;
}

static void *aotrt_alloc(int64_t n, size_t size) {
  if (n < 1)
    n = 1;
  if ((uint64_t)n > (uint64_t)(SIZE_MAX / size))
    return 0;
  return malloc((size_t)n * size);
}

/* nval values a kernel that stores every point will set: left unset,
 * NaN when AOTRT_POISON_UNSET is defined (tests: a point the kernel
 * misses then shows). */
static double *aotrt_unset_values(int64_t nval) {
  double *v = aotrt_alloc(nval, sizeof *v);
#ifdef AOTRT_POISON_UNSET
  if (v)
    memset(v, 0xff, (size_t)(nval > 0 ? nval : 1) * sizeof *v);
#endif
  return v;
}

/* The values array of t: nval values, each the fill. */
static int aotrt_fill_values(struct galley_tensor *t, int64_t nval) {
  t->nval = nval;
  t->val = aotrt_alloc(nval, sizeof *t->val);
  if (!t->val)
    return -1;
  for (int64_t q = 0; q < nval; q++)
    t->val[q] = t->fill;
  return 0;
}

/* A new all-dense tensor of the format (kinds ignored), every value the
 * fill; AOTRT_OK, AOTRT_ENOMEM or AOTRT_ESIZE. */
static int aotrt_dense(int order, const int64_t *dims, const int *modes,
                       double fill, int every, struct galley_tensor **out) {
  struct galley_tensor *t = calloc(1, sizeof *t);
  int64_t n = 1;
  if (!t)
    return AOTRT_ENOMEM;
  t->order = order;
  t->fill = fill;
  for (int k = 0; k < order; k++)
    t->dims[k] = dims[k];
  for (int l = 0; l < order; l++) {
    galley_level *L = &t->lvl[l];
    L->kind = GALLEY_RT_DENSE;
    L->mode = modes[l];
    L->dim = dims[modes[l]];
    L->npar = n;
    if (aotrt_mul(n, L->dim, &n) != 0) {
      free(t);
      return AOTRT_ESIZE;
    }
    L->nchild = L->nset = n;
  }
  /* a kernel that stores every point needs no fill first */
  if (every ? !(t->val = aotrt_unset_values(n))
            : aotrt_fill_values(t, n) != 0) {
    aotrt_free(t);
    return AOTRT_ENOMEM;
  }
  t->nval = n;
  *out = t;
  return AOTRT_OK;
}

/* ------------------------------------------------------------------ */
/* Index widths                                                        */
/* ------------------------------------------------------------------ */

static int aotrt_level_fits32(const galley_level *L) {
  if (L->dim > GALLEY_RT_IDX32_MAX_DIM || L->nset > GALLEY_RT_IDX32_MAX_NSET ||
      L->npar >= GALLEY_RT_IDX32_MAX_NSET)
    return 0;
  /* a hash level's keys p*dim + i too */
  return L->kind != GALLEY_RT_HASH || L->dim == 0 ||
         L->npar <= GALLEY_RT_IDX32_MAX_KEYS / L->dim;
}

/* n values at *from as a new array of the other width (w: to 32 bits),
 * in *to; -1 when out of memory. */
static int aotrt_width_copy(const void *from, int64_t n, int w, void **to) {
  *to = aotrt_alloc(n, w ? sizeof(int32_t) : sizeof(int64_t));
  if (!*to)
    return -1;
  for (int64_t k = 0; k < n; k++) {
    if (w)
      ((int32_t *)*to)[k] = (int32_t)((const int64_t *)from)[k];
    else
      ((int64_t *)*to)[k] = ((const int32_t *)from)[k];
  }
  return 0;
}

/* Store level L's index arrays (pos and crd; a hash level's qos, key and
 * slot too, whose table keeps its layout) with 32-bit (w = 1) or 64-bit
 * indices; 0, or -1 when out of memory (L unchanged).  Dense levels have
 * no width; the caller checked that 32 bits fit. */
static int aotrt_level_set_width(galley_level *L, int w) {
  if (L->kind == GALLEY_RT_DENSE || L->idx32 == w)
    return 0;
  void **a64[5] = {(void **)&L->pos, (void **)&L->crd, (void **)&L->qos,
                   (void **)&L->key, (void **)&L->slot};
  void **a32[5] = {(void **)&L->pos32, (void **)&L->crd32,
                   (void **)&L->qos32, (void **)&L->key32,
                   (void **)&L->slot32};
  int64_t n[5] = {L->npar + 1, L->nset, L->nset, L->hcap, L->hcap};
  int narr = L->kind == GALLEY_RT_HASH ? 5 : 2, ok = 1;
  void *copy[5] = {0};
  for (int k = 0; k < narr && ok; k++)
    ok = aotrt_width_copy(w ? *a64[k] : *a32[k], n[k], w, &copy[k]) == 0;
  for (int k = 0; k < narr; k++) {
    if (!ok) {
      free(copy[k]);
      continue;
    }
    void **from = w ? a64[k] : a32[k], **to = w ? a32[k] : a64[k];
    free(*from);
    *from = 0;
    *to = copy[k];
  }
  if (!ok)
    return -1;
  L->idx32 = w;
  return 0;
}

/* Give t's levels the widths w32 (bit l: level l 32-bit).  strict: a
 * level that cannot be 32-bit fails with AOTRT_ESIZE; otherwise such a
 * level stays 64-bit. */
static int aotrt_set_widths(struct galley_tensor *t, unsigned w32,
                            int strict) {
  for (int l = 0; l < t->order; l++) {
    galley_level *L = &t->lvl[l];
    if (L->kind == GALLEY_RT_DENSE)
      continue;
    int w = (int)(w32 >> l & 1);
    if (w && !aotrt_level_fits32(L)) {
      if (strict)
        return AOTRT_ESIZE;
      w = 0;
    }
    if (aotrt_level_set_width(L, w) != 0)
      return AOTRT_ENOMEM;
  }
  return AOTRT_OK;
}

/* ------------------------------------------------------------------ */
/* Entries: a tensor's stored entries, sorted and laid out             */
/* ------------------------------------------------------------------ */

/* Entries with logical coordinates, entry-major (crd[e*order + m]). */
typedef struct aotrt_entries {
  int order;
  int64_t n, cap;
  int64_t *crd;
  double *val;
} aotrt_entries;

static int aotrt_entries_grow(aotrt_entries *E, int64_t need) {
  int64_t cap = E->cap < 64 ? 64 : E->cap;
  while (cap < need) {
    if (cap > ((int64_t)1 << 56))
      return -1;
    cap *= 2;
  }
  int w = E->order > 0 ? E->order : 1;
  int64_t *crd = realloc(E->crd, (size_t)cap * (size_t)w * sizeof *crd);
  if (!crd)
    return -1;
  E->crd = crd;
  double *val = realloc(E->val, (size_t)cap * sizeof *val);
  if (!val)
    return -1;
  E->val = val;
  E->cap = cap;
  return 0;
}

/* Append the stored entries of t under position p of level l (c holds
 * the coordinates of the levels above), skipping values equal to fill. */
static int aotrt_collect(const struct galley_tensor *t, int l, galley_pos p,
                         int64_t *c, double fill, aotrt_entries *E) {
  if (l == t->order) {
    if (aotrt_is_fill(t->val[p], fill))
      return 0;
    if (E->n == E->cap && aotrt_entries_grow(E, E->n + 1) != 0)
      return -1;
    for (int m = 0; m < t->order; m++)
      E->crd[E->n * t->order + m] = c[m];
    E->val[E->n++] = t->val[p];
    return 0;
  }
  const galley_level *L = &t->lvl[l];
  galley_pos end = galley_rt_walk_end(L, p);
  for (galley_pos k = galley_rt_walk_begin(L, p); k < end; k++) {
    c[L->mode] = galley_rt_walk_crd(L, k);
    if (aotrt_collect(t, l + 1, galley_rt_walk_child(L, p, k), c, fill, E))
      return -1;
  }
  return 0;
}

/* Compare entries a and b in the level order `modes`. */
static int aotrt_cmp(const int64_t *a, const int64_t *b, int order,
                     const int *modes) {
  for (int l = 0; l < order; l++) {
    int64_t x = a[modes[l]], y = b[modes[l]];
    if (x != y)
      return x < y ? -1 : 1;
  }
  return 0;
}

/* Sort the entries into level order (stable merge sort of a
 * permutation); 0, or -1 when out of memory. */
static int aotrt_sort(aotrt_entries *E, const int *modes) {
  int64_t n = E->n, ord = E->order;
  int sorted = 1;
  for (int64_t e = 1; e < n && sorted; e++)
    sorted = aotrt_cmp(E->crd + (e - 1) * ord, E->crd + e * ord, E->order,
                       modes) <= 0;
  if (sorted)
    return 0;
  int64_t *perm = aotrt_alloc(n, sizeof *perm);
  int64_t *tmp = aotrt_alloc(n, sizeof *tmp);
  int64_t *crd = aotrt_alloc(n * ord, sizeof *crd);
  double *val = aotrt_alloc(n, sizeof *val);
  if (!perm || !tmp || !crd || !val) {
    free(perm);
    free(tmp);
    free(crd);
    free(val);
    return -1;
  }
  for (int64_t e = 0; e < n; e++)
    perm[e] = e;
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n;
      int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi)
        tmp[k++] = aotrt_cmp(E->crd + perm[j] * ord, E->crd + perm[i] * ord,
                             E->order, modes) < 0
                       ? perm[j++]
                       : perm[i++];
      while (i < mid)
        tmp[k++] = perm[i++];
      while (j < hi)
        tmp[k++] = perm[j++];
    }
    int64_t *s = perm;
    perm = tmp;
    tmp = s;
  }
  for (int64_t e = 0; e < n; e++) {
    memcpy(crd + e * ord, E->crd + perm[e] * ord, (size_t)ord * sizeof *crd);
    val[e] = E->val[perm[e]];
  }
  free(perm);
  free(tmp);
  free(E->crd);
  free(E->val);
  E->crd = crd;
  E->val = val;
  E->cap = n;
  return 0;
}

/* Sum entries with equal coordinates (sorted: they are adjacent) and
 * drop those equal to the fill. */
static void aotrt_merge_duplicates(aotrt_entries *E, double fill) {
  int64_t m = 0, ord = E->order;
  for (int64_t e = 0; e < E->n; e++) {
    if (m > 0 && memcmp(E->crd + (m - 1) * ord, E->crd + e * ord,
                        (size_t)ord * sizeof *E->crd) == 0) {
      E->val[m - 1] += E->val[e];
      continue;
    }
    if (m != e) {
      memmove(E->crd + m * ord, E->crd + e * ord,
              (size_t)ord * sizeof *E->crd);
      E->val[m] = E->val[e];
    }
    m++;
  }
  int64_t k = 0;
  for (int64_t e = 0; e < m; e++) {
    if (aotrt_is_fill(E->val[e], fill))
      continue;
    if (k != e) {
      memmove(E->crd + k * ord, E->crd + e * ord,
              (size_t)ord * sizeof *E->crd);
      E->val[k] = E->val[e];
    }
    k++;
  }
  E->n = k;
}

/* Level l of t over the entries' parents par[] (updated to children):
 * kind `kind`, storing mode `mode` of size dim. */
static int aotrt_build_level(struct galley_tensor *t, int l, int kind,
                             int mode, const aotrt_entries *E, int64_t *par,
                             int64_t npar) {
  galley_level *L = &t->lvl[l];
  int64_t dim = t->dims[mode], n = E->n, ord = E->order, cells;
  L->kind = kind;
  L->mode = mode;
  L->dim = dim;
  L->npar = npar;
  if (aotrt_mul(npar, dim, &cells) != 0)
    return AOTRT_ESIZE;
  if (kind == GALLEY_RT_DENSE) {
    L->nchild = L->nset = cells;
    for (int64_t e = 0; e < n; e++)
      par[e] = par[e] * dim + E->crd[e * ord + mode];
    return AOTRT_OK;
  }
  /* the distinct (parent, coordinate) pairs, in order */
  int64_t pairs = 0;
  for (int64_t e = 0; e < n; e++)
    if (e == 0 || par[e] != par[e - 1] ||
        E->crd[e * ord + mode] != E->crd[(e - 1) * ord + mode])
      pairs++;
  L->nset = pairs;
  L->pos = aotrt_alloc(npar + 1, sizeof *L->pos);
  L->crd = aotrt_alloc(pairs, sizeof *L->crd);
  if (!L->pos || !L->crd)
    return AOTRT_ENOMEM;
  memset(L->pos, 0, (size_t)(npar + 1) * sizeof *L->pos);
  int64_t t_ = -1, prev_par = -1, prev_c = -1;
  for (int64_t e = 0; e < n; e++) {
    int64_t c = E->crd[e * ord + mode], p = par[e];
    if (p != prev_par || c != prev_c) {
      L->crd[++t_] = c;
      L->pos[p + 1]++;
      prev_par = p;
      prev_c = c;
    }
    par[e] = kind == GALLEY_RT_BYTEMAP ? p * dim + c : t_;
  }
  for (int64_t p = 0; p < npar; p++)
    L->pos[p + 1] += L->pos[p];
  if (kind == GALLEY_RT_LIST) {
    L->nchild = pairs;
    return AOTRT_OK;
  }
  if (kind == GALLEY_RT_BYTEMAP) {
    L->nchild = cells;
    L->tbl = calloc((size_t)(cells > 0 ? cells : 1), 1);
    if (!L->tbl)
      return AOTRT_ENOMEM;
    for (int64_t p = 0; p < npar; p++)
      for (int64_t k = L->pos[p]; k < L->pos[p + 1]; k++)
        L->tbl[p * dim + L->crd[k]] = 1;
    return AOTRT_OK;
  }
  /* hash: children in insertion (= sorted) order, so qos[t] = t */
  int64_t hcap = 2;
  while (hcap < 2 * pairs + 2)
    hcap *= 2;
  L->nchild = pairs;
  L->hcap = hcap;
  L->key = aotrt_alloc(hcap, sizeof *L->key);
  L->slot = aotrt_alloc(hcap, sizeof *L->slot);
  L->qos = aotrt_alloc(pairs, sizeof *L->qos);
  if (!L->key || !L->slot || !L->qos)
    return AOTRT_ENOMEM;
  for (int64_t h = 0; h < hcap; h++)
    L->key[h] = -1;
  for (int64_t p = 0; p < npar; p++)
    for (int64_t k = L->pos[p]; k < L->pos[p + 1]; k++) {
      int64_t key = p * dim + L->crd[k];
      galley_pos h = galley_rt_hash_start(key, hcap);
      while (L->key[h] != -1)
        h = (h + 1) & (hcap - 1);
      L->key[h] = key;
      L->slot[h] = k;
      L->qos[k] = k;
    }
  return AOTRT_OK;
}

/* A new tensor of the format (kinds, modes), dims and fill holding the
 * entries (sorted here; duplicates summed, fills dropped). */
static int aotrt_build(int order, const int64_t *dims, const int *kinds,
                       const int *modes, double fill, aotrt_entries *E,
                       struct galley_tensor **out) {
  if (aotrt_sort(E, modes) != 0)
    return AOTRT_ENOMEM;
  aotrt_merge_duplicates(E, fill);
  struct galley_tensor *t = calloc(1, sizeof *t);
  int64_t *par = aotrt_alloc(E->n, sizeof *par);
  int rc = t && par ? AOTRT_OK : AOTRT_ENOMEM;
  if (rc == AOTRT_OK) {
    t->order = order;
    t->fill = fill;
    for (int m = 0; m < order; m++)
      t->dims[m] = dims[m];
    for (int64_t e = 0; e < E->n; e++)
      par[e] = 0;
  }
  int64_t npar = 1;
  for (int l = 0; l < order && rc == AOTRT_OK; l++) {
    rc = aotrt_build_level(t, l, kinds[l], modes[l], E, par, npar);
    npar = t->lvl[l].nchild;
  }
  if (rc == AOTRT_OK && aotrt_fill_values(t, npar) != 0)
    rc = AOTRT_ENOMEM;
  if (rc == AOTRT_OK) {
    for (int64_t e = 0; e < E->n; e++)
      t->val[par[e]] = E->val[e];
    *out = t;
  } else if (t) {
    aotrt_free(t);
  }
  free(par);
  return rc;
}

/* A copy of src in the format, reading src's unstored entries as fill. */
static int aotrt_convert(const struct galley_tensor *src, const int *kinds,
                         const int *modes, double fill,
                         struct galley_tensor **out) {
  aotrt_entries E = {src->order, 0, 0, 0, 0};
  int64_t c[GALLEY_RT_MAX_ORDER] = {0};
  int rc = aotrt_entries_grow(&E, 64) == 0 &&
                   aotrt_collect(src, 0, 0, c, fill, &E) == 0
               ? AOTRT_OK
               : AOTRT_ENOMEM;
  if (rc == AOTRT_OK)
    rc = aotrt_build(src->order, src->dims, kinds, modes, fill, &E, out);
  free(E.crd);
  free(E.val);
  return rc;
}

/* The format of t (level kinds and modes). */
static void aotrt_format_of(const struct galley_tensor *t, int *kinds,
                            int *modes) {
  for (int l = 0; l < t->order; l++) {
    kinds[l] = t->lvl[l].kind;
    modes[l] = t->lvl[l].mode;
  }
}

/* A result whose levels are those of access src as the format lays them
 * out (dense or list: list arrays copied; levels past src's order are
 * dense, of the result's sizes), every value the fill (or left unset when
 * every: the kernel stores every point). */
static int aotrt_pattern(const struct galley_tensor *src, int order,
                         const int *kinds, const int *modes,
                         const int64_t *dims, double fill, int every,
                         struct galley_tensor **out) {
  struct galley_tensor *t = calloc(1, sizeof *t);
  if (!t)
    return AOTRT_ENOMEM;
  t->order = order;
  for (int m = 0; m < t->order; m++)
    t->dims[m] = dims[m];
  t->fill = fill;
  int64_t npar = 1;
  for (int l = 0; l < t->order; l++) {
    const galley_level *S = &src->lvl[l];
    galley_level *L = &t->lvl[l];
    L->kind = kinds[l] == GALLEY_RT_DENSE ? GALLEY_RT_DENSE : GALLEY_RT_LIST;
    L->mode = modes[l];
    L->dim = l < src->order ? S->dim : dims[modes[l]];
    L->npar = npar;
    if (L->kind == GALLEY_RT_DENSE) {
      L->nchild = L->nset = npar * L->dim; /* as the source (bounded) */
    } else {
      L->nchild = L->nset = galley_rt_pos(S, npar);
      L->idx32 = S->idx32;
      size_t w = S->idx32 ? sizeof(int32_t) : sizeof(int64_t);
      void *pos = aotrt_alloc(npar + 1, w), *crd = aotrt_alloc(L->nset, w);
      if (S->idx32) {
        L->pos32 = pos;
        L->crd32 = crd;
      } else {
        L->pos = pos;
        L->crd = crd;
      }
      if (!pos || !crd) {
        aotrt_free(t);
        return AOTRT_ENOMEM;
      }
      memcpy(pos, S->idx32 ? (void *)S->pos32 : (void *)S->pos,
             (size_t)(npar + 1) * w);
      if (L->nset > 0)
        memcpy(crd, S->idx32 ? (void *)S->crd32 : (void *)S->crd,
               (size_t)L->nset * w);
    }
    npar = L->nchild;
  }
  if (every ? !(t->val = aotrt_unset_values(npar))
            : aotrt_fill_values(t, npar) != 0) {
    aotrt_free(t);
    return AOTRT_ENOMEM;
  }
  t->nval = npar;
  *out = t;
  return AOTRT_OK;
}

/* ------------------------------------------------------------------ */
/* Sinks and scatter workspaces (galley_rt.h)                          */
/* ------------------------------------------------------------------ */

/* A block's sink with the bytes it may grow to (the executor's
 * BudgetSink): the kernel sees the galley_rt_sink, its first member. */
typedef struct aotrt_sink {
  galley_rt_sink s;
  double room;   /* bytes its arrays may take, 0: any */
  double wanted; /* a growth refused for the room: the bytes it asked */
} aotrt_sink;

/* The sink's grow callback: room for `need` entries (doubling); in rows
 * mode one coordinate an entry, 32-bit while rows32; -1 when out of
 * memory or over the sink's room (then `wanted` says how much). */
static int aotrt_sink_grow(galley_rt_sink *s, int64_t need) {
  aotrt_sink *b = (aotrt_sink *)(void *)s;
  int64_t cap = s->cap < 64 ? 64 : s->cap;
  while (cap < need) {
    if (cap > ((int64_t)1 << 56))
      return -1;
    cap *= 2;
  }
  if (s->rows32 && need > GALLEY_RT_IDX32_MAX_NSET && galley_rt_sink_widen(s))
    return -1;
  int w = s->rows || s->order < 1 ? 1 : s->order;
  double bytes = (double)cap * (double)(8 + (s->rows32 ? 4 : 8 * w));
  if (b->room > 0 && bytes > b->room) {
    b->wanted = bytes;
    return -1;
  }
  return galley_rt_sink_realloc(s, cap);
}

/* Rows mode (galley_rt.h; phys.h's PhysQuery.out_rows): a result of
 * dense levels over one sorted list, whose kernel emits its entries in
 * level order, is laid out as it is written -- the sink's arrays become
 * the list level's, with no sort and no copy, as the executor does.  The
 * sinks of all blocks share one count array: the blocks own disjoint
 * parents (aotrt_query.rows_split).  0, or -1 when out of memory. */
static int aotrt_sinks_rows_mode(aotrt_sink *sinks, int64_t nb,
                                 const aotrt_query *q, const int64_t *odims) {
  int64_t npar = 1;
  for (int l = 0; l + 1 < q->order; l++)
    if (aotrt_mul(npar, odims[q->modes[l]], &npar) != 0)
      return -1;
  int64_t *pos = aotrt_alloc(npar + 1, sizeof *pos);
  if (!pos)
    return -1;
  memset(pos, 0, (size_t)(npar + 1) * sizeof *pos);
  for (int64_t b = 0; b < nb; b++) {
    galley_rt_sink *s = &sinks[b].s;
    for (int l = 0; l < q->order; l++) {
      s->modes[l] = q->modes[l];
      s->ldims[l] = odims[q->modes[l]];
    }
    s->pos = pos;
    s->rows = 1;
    s->rows32 = s->ldims[q->order - 1] <= GALLEY_RT_IDX32_MAX_DIM;
    s->disorder = 0;
    s->last_p = s->last_c = -1;
  }
  return 0;
}

/* Back to the plain mode, empty (entries arrived out of level order: the
 * kernels run again); 0, or -1 when out of memory. */
static int aotrt_sinks_plain_mode(aotrt_sink *sinks, int64_t nb) {
  free(sinks[0].s.pos);
  int ok = 1;
  for (int64_t b = 0; b < nb; b++) {
    galley_rt_sink *s = &sinks[b].s;
    s->pos = 0;
    s->rows = s->disorder = s->rows32 = 0;
    free(s->crd32);
    s->crd32 = 0;
    free(s->crd);
    s->crd = 0;
    s->n = 0;
    int64_t cap = s->cap;
    s->cap = 0;
    if (aotrt_sink_grow(s, cap) != 0)
      ok = 0;
  }
  return ok ? 0 : -1;
}

/* The tensor a rows-mode sink holds (every block's entries gathered in
 * it), in *out, taking its arrays. */
static int aotrt_rows_tensor(galley_rt_sink *s, const aotrt_query *q,
                             const int64_t *odims,
                             struct galley_tensor **out) {
  struct galley_tensor *t = calloc(1, sizeof *t);
  if (!t)
    return AOTRT_ENOMEM;
  if (galley_rt_sink_rows_levels(s, q->order, q->modes, q->fill, odims, t)) {
    aotrt_free(t);
    return AOTRT_ENOMEM;
  }
  *out = t;
  return AOTRT_OK;
}

/* Workspaces over at most this many keys are dense arrays (phys.h's
 * PHYS_WS_DENSE_MAX); larger ones hash. */
#define AOTRT_WS_DENSE_MAX ((int64_t)1 << 21)

static int aotrt_ws_init(const aotrt_query *q, const int64_t *dims,
                         galley_rt_ws *w) {
  int64_t size = 1;
  memset(w, 0, sizeof *w);
  for (int k = 0; k < q->nscatter; k++) {
    int64_t d = dims[q->scatter_ids[k]];
    if (aotrt_mul(size, d > 0 ? d : 1, &size) != 0)
      return AOTRT_ESIZE;
  }
  w->size = size;
  if (size <= AOTRT_WS_DENSE_MAX) {
    w->val = aotrt_alloc(size, sizeof *w->val);
    w->seen = calloc((size_t)size, 1);
    w->keys = aotrt_alloc(size, sizeof *w->keys);
    return w->val && w->seen && w->keys ? AOTRT_OK : AOTRT_ENOMEM;
  }
  w->hashed = 1;
  w->grow = galley_rt_ws_grow;
  return galley_rt_ws_alloc_slots(w, GALLEY_RT_WS_HASH_BITS) == 0
             ? AOTRT_OK
             : AOTRT_ENOMEM;
}

/* ------------------------------------------------------------------ */
/* Input checks                                                        */
/* ------------------------------------------------------------------ */

/* pos[p] of a list-like level, bounds already checked. */
static int64_t aotrt_pos(const galley_level *L, int64_t p) {
  return L->idx32 ? (int64_t)L->pos32[p] : L->pos[p];
}

static int64_t aotrt_crd(const galley_level *L, int64_t t) {
  return L->idx32 ? (int64_t)L->crd32[t] : L->crd[t];
}

/* Whether a list-like level's pos and crd are well formed: pos from 0
 * up to nset (O(1)), and with `full` every fiber's coordinates strictly
 * increasing in [0, dim) (O(nset)). */
static const char *aotrt_check_lists(const galley_level *L, int full) {
  if (L->idx32 ? !L->pos32 : !L->pos)
    return "a list level without pos";
  if (L->nset > 0 && (L->idx32 ? !L->crd32 : !L->crd))
    return "a list level without crd";
  if (L->nset < 0 || aotrt_pos(L, 0) != 0 ||
      aotrt_pos(L, L->npar) != L->nset)
    return "pos[0] is not 0 or pos[npar] is not nset";
  for (int64_t p = 0; full && p < L->npar; p++) {
    int64_t lo = aotrt_pos(L, p), hi = aotrt_pos(L, p + 1), last = -1;
    if (hi < lo || hi > L->nset)
      return "pos is not increasing";
    for (int64_t t = lo; t < hi; t++) {
      int64_t c = aotrt_crd(L, t);
      if (c <= last || c >= L->dim)
        return "a fiber's coordinates are out of range or not increasing";
      last = c;
    }
  }
  return 0;
}

/* Level l of t checked against the kind it is read as; NULL or why not.
 * Without `full` only what takes O(1): sizes, counts, arrays present,
 * pos's ends; with it also the coordinates and tables, O(entries). */
static const char *aotrt_check_level(const struct galley_tensor *t, int l,
                                     int kind, int64_t npar, int full) {
  const galley_level *L = &t->lvl[l];
  int64_t cells;
  if (L->npar != npar)
    return "a level's npar is not its parent level's nchild";
  if (L->dim < 0 || aotrt_mul(npar, L->dim, &cells) != 0)
    return "a level has a bad or too large dim";
  if (L->kind == GALLEY_RT_DENSE) {
    if (kind != GALLEY_RT_DENSE)
      return "a dense level where the compiled format has another kind";
    return L->nchild == cells ? 0 : "a dense level's nchild is not npar*dim";
  }
  const char *why = 0;
  if (L->kind == GALLEY_RT_LIST) {
    if ((why = aotrt_check_lists(L, full)) != 0)
      return why;
    if (L->nchild != L->nset)
      return "a list level's nchild is not nset";
    /* a list with every fiber full is laid out as dense */
    if (kind == GALLEY_RT_DENSE && L->nset == cells)
      return 0;
  } else if (L->kind == GALLEY_RT_BYTEMAP) {
    if (!L->tbl)
      return "a bytemap level without tbl";
    if ((why = aotrt_check_lists(L, full)) != 0)
      return why;
    if (L->nchild != cells)
      return "a bytemap level's nchild is not npar*dim";
    if (!full)
      return L->kind == kind ? 0 : "a level kind differs from the compiled "
                                   "format";
    int64_t set = 0;
    for (int64_t q = 0; q < cells; q++)
      set += L->tbl[q] != 0;
    if (set != L->nset)
      return "a bytemap level's tbl does not match its set list";
    for (int64_t p = 0; p < npar; p++)
      for (int64_t k = aotrt_pos(L, p); k < aotrt_pos(L, p + 1); k++)
        if (!L->tbl[p * L->dim + aotrt_crd(L, k)])
          return "a bytemap level's tbl does not match its set list";
  } else if (L->kind == GALLEY_RT_HASH) {
    if ((L->idx32 ? !L->key32 || !L->slot32 || !L->qos32
                  : !L->key || !L->slot || !L->qos) ||
        L->hcap < 2 || (L->hcap & (L->hcap - 1)) != 0 || L->hcap <= L->nset)
      return "a hash level without its table or with a bad hcap";
    if (L->idx32 && L->dim > 0 && npar > GALLEY_RT_IDX32_MAX_KEYS / L->dim)
      return "a 32-bit hash level whose keys do not fit 32 bits";
    if ((why = aotrt_check_lists(L, full)) != 0)
      return why;
    if (L->nchild != L->nset)
      return "a hash level's nchild is not nset";
    if (!full)
      return L->kind == kind ? 0 : "a level kind differs from the compiled "
                                   "format";
    int64_t used = 0;
    for (int64_t h = 0; h < L->hcap; h++)
      used += (L->idx32 ? L->key32[h] : L->key[h]) != -1;
    if (used != L->nset)
      return "a hash level's table does not hold nset keys";
    for (int64_t p = 0; p < npar; p++)
      for (int64_t k = aotrt_pos(L, p); k < aotrt_pos(L, p + 1); k++) {
        galley_pos q = galley_rt_qos(L, k);
        if (q < 0 || q >= L->nchild ||
            galley_rt_hash_locate(L, p, aotrt_crd(L, k)) != q)
          return "a hash level's table does not match its sorted view";
      }
  } else {
    return "a level of unknown kind";
  }
  return L->kind == kind ? 0
                         : "a level kind differs from the compiled format";
}

/* The value of t at logical coordinates c (its fill when not stored). */
static double aotrt_get(const struct galley_tensor *t, const int64_t *c) {
  galley_pos p = 0;
  for (int l = 0; l < t->order; l++) {
    p = galley_rt_locate(&t->lvl[l], p, c[t->lvl[l].mode]);
    if (p < 0)
      return t->fill;
  }
  return t->val[p];
}

/* aotrt_symmetry_holds for a dense level over a list (CSR or CSC) in
 * O(nnz) with a cursor per fiber instead of a search per entry (the
 * library's runtime/facts.c does the same): walking fibers a = 0, 1, ...
 * in order, the mirror of (a, b) is looked for in fiber b at or after
 * at[b], which therefore only moves forward.  -1 when out of memory. */
#define AOTRT_SYMMETRIC_BY_CURSORS(POS, CRD)                                 \
  do {                                                                      \
    for (int64_t a = 0; a <= n; a++)                                        \
      at[a] = (POS)[a];                                                     \
    for (int64_t a = 0; a < n && ok; a++)                                   \
      for (int64_t k = (POS)[a]; k < (POS)[a + 1] && ok; k++) {             \
        int64_t b = (CRD)[k], m = at[b], end = (POS)[b + 1];                \
        while (m < end && (CRD)[m] < a)                                     \
          m++;                                                              \
        at[b] = m;                                                          \
        ok = aotrt_is_fill(t->val[k],                                       \
                           m < end && (CRD)[m] == a ? t->val[m] : t->fill) && \
             (!(need & 2) || a != b || t->val[k] == 0);                     \
      }                                                                     \
  } while (0)

static int aotrt_symmetric_by_cursors(const struct galley_tensor *t,
                                      int need) {
  const galley_level *L = &t->lvl[1];
  int64_t n = t->lvl[0].dim;
  int64_t *at = aotrt_alloc(n + 1, sizeof *at);
  if (!at)
    return -1;
  int ok = 1;
  if (L->idx32)
    AOTRT_SYMMETRIC_BY_CURSORS(L->pos32, L->crd32);
  else
    AOTRT_SYMMETRIC_BY_CURSORS(L->pos, L->crd);
  free(at);
  return ok;
}
#undef AOTRT_SYMMETRIC_BY_CURSORS

/* Whether the matrix has the symmetry the plan relied on (need: bit 1,
 * square and t[i,j] == t[j,i] everywhere; bit 2, also every stored
 * diagonal value 0), as rt_tensor_symmetry computes it. */
static int aotrt_symmetry_holds(const struct galley_tensor *t, int need) {
  if (t->order != 2 || t->dims[0] != t->dims[1])
    return 0;
  if (t->lvl[0].kind == GALLEY_RT_DENSE && t->lvl[1].kind == GALLEY_RT_LIST) {
    int ok = aotrt_symmetric_by_cursors(t, need);
    if (ok >= 0)
      return ok;
  }
  aotrt_entries E = {2, 0, 0, 0, 0};
  int64_t c[GALLEY_RT_MAX_ORDER] = {0};
  /* every stored entry, fills included (NaN never equals the fill) */
  int ok = aotrt_collect(t, 0, 0, c, 0.0 / 0.0, &E) == 0;
  for (int64_t e = 0; ok && e < E.n; e++) {
    int64_t *x = E.crd + 2 * e, y[2];
    y[0] = x[1];
    y[1] = x[0];
    double v = E.val[e];
    ok = aotrt_is_fill(aotrt_get(t, y), v) &&
         (!(need & 2) || x[0] != x[1] || v == 0);
  }
  free(E.crd);
  free(E.val);
  return ok;
}

/* Whether the n values are all finite: a NaN or an infinity has every
 * exponent bit set.  Branch-free in chunks, so compilers vectorize it. */
static int aotrt_all_finite(const double *val, int64_t n) {
  const uint64_t exp = (uint64_t)0x7ff << 52;
  for (int64_t lo = 0; lo < n; lo += 4096) {
    int64_t hi = n - lo < 4096 ? n : lo + 4096;
    uint64_t bad = 0;
    for (int64_t q = lo; q < hi; q++) {
      uint64_t bits;
      memcpy(&bits, &val[q], sizeof bits);
      bad |= (uint64_t)((bits & exp) == exp);
    }
    if (bad)
      return 0;
  }
  return 1;
}

/* Check input k (the host's tensor t) against the compiled format; *conv
 * = 1 when only its index widths differ (a copy is then made).  Its
 * structure in O(1) per level, its contents too with AOTRT_CHECK_FULL;
 * the properties the plan relies on (finite values, symmetry) in O(nnz)
 * unless flags has AOTRT_TRUST_VALUES. */
static int aotrt_check_input(const aotrt_input *d,
                             const struct galley_tensor *t, unsigned flags,
                             int *conv, aotrt_msg *m) {
  int full = (flags & AOTRT_CHECK_FULL) != 0;
  int trust = (flags & AOTRT_TRUST_VALUES) != 0;
  *conv = 0;
  if (!t)
    return aotrt_fail(m, AOTRT_EINPUT, "input", d->name, "is NULL", -1, -1);
  if (t->order != d->order)
    return aotrt_fail(m, AOTRT_EINPUT, "input", d->name, "has another order",
                      t->order, d->order);
  for (int k = 0; k < t->order; k++)
    if (d->sizes[k] >= 0 && t->dims[k] != d->sizes[k])
      return aotrt_fail(m, AOTRT_EINPUT, "input", d->name,
                        "a mode has another size than the plan compiled in "
                        "(compile with sample data of the sizes run on)",
                        t->dims[k], d->sizes[k]);
  int64_t npar = 1;
  for (int l = 0; l < t->order; l++) {
    const galley_level *L = &t->lvl[l];
    if (L->mode != d->modes[l])
      return aotrt_fail(m, AOTRT_EINPUT, "input", d->name,
                        "a level stores another mode than in the compiled "
                        "format (the level's mode, the format's)",
                        L->mode, d->modes[l]);
    if (L->dim != t->dims[L->mode])
      return aotrt_fail(m, AOTRT_EINPUT, "input", d->name,
                        "a level's dim differs from the tensor's dims",
                        L->dim, t->dims[L->mode]);
    const char *why = aotrt_check_level(t, l, d->kinds[l], npar, full);
    if (why)
      return aotrt_fail(m, AOTRT_EINPUT, "input", d->name, why, -1, -1);
    if (L->kind != GALLEY_RT_DENSE && d->kinds[l] != GALLEY_RT_DENSE &&
        L->idx32 != (int)(d->w32 >> l & 1))
      *conv = 1;
    npar = L->nchild;
  }
  if (t->nval != npar || (!t->val && npar > 0))
    return aotrt_fail(m, AOTRT_EINPUT, "input", d->name,
                      "nval is not the last level's nchild", t->nval, npar);
  if (!aotrt_is_fill(t->fill, d->fill) && !(d->fill0_ok && t->fill == 0))
    return aotrt_fail(m, AOTRT_EINPUT, "input", d->name,
                      "has another fill than compiled for", -1, -1);
  if (d->need_finite && !trust && !aotrt_all_finite(t->val, t->nval))
    return aotrt_fail(m, AOTRT_EINPUT, "input", d->name,
                      "stores an infinity or a NaN: the plan was made "
                      "for finite values (compile with --nonfinite)",
                      -1, -1);
  if (d->need_symmetric && !trust &&
      !aotrt_symmetry_holds(t, d->need_symmetric))
    return aotrt_fail(m, AOTRT_EINPUT, "input", d->name,
                      d->need_symmetric & 2
                          ? "is not a symmetric matrix with a zero diagonal, "
                            "which the plan was made for (compile without "
                            "sample data for a plan that does not rely on it)"
                          : "is not a symmetric matrix, which the plan was "
                            "made for (compile without sample data for a "
                            "plan that does not rely on it)",
                      -1, -1);
  return AOTRT_OK;
}

/* ------------------------------------------------------------------ */
/* Blocks of the outermost loop and threads (opt-in)                   */
/* ------------------------------------------------------------------ */

/* A kernel's outermost loop runs in blocks of about AOTRT_BLOCK_WORK
 * units of work -- positions of the walked access's first level plus the
 * entries under them, or the multiplies of a product -- cut as the
 * library's executor cuts it (galley_rt_blocks.h, the executor's own
 * code; src/exec/blocks.c picks the accesses as aotrt_work_access does):
 *   - blocks that own disjoint points of a dense result, or append to
 *     their own sink concatenated in block order, give the same result
 *     however the loop is cut: they split only when threads run, a
 *     concatenated result into 8 blocks a thread at most;
 *   - a reduction over the loop (aotrt_query.combine) runs in blocks
 *     whose partial results the aggregate folds in block order; its cut
 *     depends on the data alone, never on the thread count, so that its
 *     result is the same, bit for bit, on every thread count.
 * Threads are made per run, only when asked for (aotrt_run_opts) and a
 * job has several blocks; built with GALLEY_AOT_NO_THREADS the runtime
 * has no pthreads and always runs on the caller. */
#ifndef AOTRT_BLOCK_WORK /* tests make it tiny, for many blocks */
#define AOTRT_BLOCK_WORK ((int64_t)1 << 14)
#endif
#define AOTRT_MAX_BLOCKS ((int64_t)1 << 12)
#define AOTRT_MAX_THREADS 256
#define AOTRT_CONCAT_BLOCKS_PER_THREAD 8

/* aotrt_query.lead bits of an access */
#define AOTRT_LEAD_WALKS 1  /* its first level reads the outermost loop */
#define AOTRT_LEAD_SECOND 2 /* order 2, its second level reads loop 2 */
#define AOTRT_LEAD_TIMES 4  /* order >= 2, its first level reads loop 2 */

/* Whether t has a sorted-list level. */
static int aotrt_has_list(const struct galley_tensor *t) {
  for (int l = 0; l < t->order; l++)
    if (t->lvl[l].kind == GALLEY_RT_LIST)
      return 1;
  return 0;
}

/* The access whose first level the outermost loop reads, dense or a
 * sorted list: a sparse one before a dense one, then the one storing the
 * most values; -1 when none (blocks.c's work_access). */
static int aotrt_work_access(const aotrt_query *q,
                             const struct galley_tensor *const *in) {
  int best = -1;
  for (int x = 0; x < q->nacc; x++) {
    const struct galley_tensor *t = in[x];
    if (!(q->lead[x] & AOTRT_LEAD_WALKS) || !t || t->order < 1)
      continue;
    int k = t->lvl[0].kind;
    if (k != GALLEY_RT_DENSE && k != GALLEY_RT_LIST)
      continue;
    if (best < 0 || aotrt_has_list(t) > aotrt_has_list(in[best]) ||
        (aotrt_has_list(t) == aotrt_has_list(in[best]) &&
         t->nval > in[best]->nval))
      best = x;
  }
  return best;
}

/* The weights of multiplies when access x = A[i,j] (a list second
 * level) meets B[j,k] (a dense first level over a list) in the next
 * loop: a new prefix array (galley_rt_multiply_prefix), or NULL when no
 * such pair; *oom set when out of memory (blocks.c's multiply_prefix). */
static int64_t *aotrt_multiply_prefix(const aotrt_query *q,
                                      const struct galley_tensor *const *in,
                                      int x, int *oom) {
  *oom = 0;
  if (!(q->lead[x] & AOTRT_LEAD_SECOND) ||
      in[x]->lvl[1].kind != GALLEY_RT_LIST)
    return 0;
  for (int k = 0; k < q->nacc; k++) {
    const struct galley_tensor *tb = in[k];
    if (k == x || !(q->lead[k] & AOTRT_LEAD_TIMES) || !tb)
      continue;
    if (tb->lvl[0].kind == GALLEY_RT_DENSE &&
        tb->lvl[1].kind == GALLEY_RT_LIST) {
      int64_t *w = galley_rt_multiply_prefix(in[x], tb);
      *oom = !w;
      return w;
    }
  }
  return 0;
}

/* The most blocks q's loop may split into on `threads` threads, and
 * *work, the work of one (blocks.c's blocks_max and blocks_unit_work):
 * a reduction into `cells` values does at least twice that in a block,
 * and its partial results (one per block after the first) fit q->room
 * bytes. */
static int64_t aotrt_max_blocks(const aotrt_query *q, int threads,
                                double cells, int64_t *work) {
  *work = AOTRT_BLOCK_WORK;
  if (q->combine) {
    if (cells * 2 > (double)*work)
      *work = cells * 2 >= (double)INT64_MAX / 2 ? INT64_MAX / 2
                                                 : (int64_t)(cells * 2);
    double more = q->room / (8 * (cells > 1 ? cells : 1));
    return more >= (double)AOTRT_MAX_BLOCKS ? AOTRT_MAX_BLOCKS
                                            : 1 + (int64_t)more;
  }
  if (!q->split || threads <= 1)
    return 1;
  return q->concat ? AOTRT_CONCAT_BLOCKS_PER_THREAD * (int64_t)threads
                   : AOTRT_MAX_BLOCKS;
}

/* The blocks of [lo, hi) when the result has `cells` values: *n and
 * cut[0 .. *n] (cut holds AOTRT_MAX_BLOCKS + 1); AOTRT_OK or
 * AOTRT_ENOMEM. */
static int aotrt_blocks(const aotrt_query *q,
                        const struct galley_tensor *const *in, int threads,
                        double cells, int64_t lo, int64_t hi, int64_t *cut,
                        int64_t *n) {
  cut[0] = lo;
  cut[1] = hi;
  *n = 1;
  int64_t work;
  int64_t most = q->loop0 < 0 || hi - lo <= 1
                     ? 1
                     : aotrt_max_blocks(q, threads, cells, &work);
  if (most <= 1)
    return AOTRT_OK;
  galley_rt_work w = {0, 0};
  int64_t *prefix = 0;
  int x = aotrt_work_access(q, in), oom = 0;
  if (x >= 0) {
    w.t = in[x];
    w.prefix = prefix = aotrt_multiply_prefix(q, in, x, &oom);
    if (oom)
      return AOTRT_ENOMEM;
  }
  int64_t base, total;
  int64_t nb = galley_rt_blocks_count(&w, lo, hi, work,
                                      most < AOTRT_MAX_BLOCKS
                                          ? most
                                          : AOTRT_MAX_BLOCKS,
                                      &base, &total);
  if (nb > 1)
    *n = galley_rt_blocks_cut(&w, lo, hi, base, total, nb, cut);
  free(prefix);
  return AOTRT_OK;
}

/* One query's blocks as a job. */
typedef struct aotrt_job {
  const aotrt_query *q;
  const galley_kernel_args *base; /* all but lo, hi, sink, ws */
  const int64_t *cut;
  aotrt_sink *sinks;              /* per block, or NULL (a dense result) */
  galley_rt_ws *ws;               /* per thread, or NULL */
  unsigned char *ws_ready;        /* per thread: ws[w] is set up */
  int *rc;                        /* per block: AOTRT_OK or an error */
  double **marks;                 /* per thread: its MERGE_MARK table
                                     (made by its first block), or NULL */
  int64_t nmark;                  /* values per mark table */
  const int64_t *at;              /* concatenating: per block, its first
                                     entry in sinks[0], else NULL */
  struct galley_tensor *views;    /* a reduction in blocks: per block, the
                                     result it writes (block 0: the
                                     result's values, others a partial
                                     copy), else NULL */
  /* folding partial results: chunks of `chunk` values of fold_val, each
   * folded with the nfold partial arrays of fold_cells values in
   * fold_partial, in block order */
  double *fold_val;
  const double *fold_partial;
  int64_t nfold, fold_cells, chunk;
} aotrt_job;

/* Fold chunk c of the partial results into the result's values. */
static void aotrt_fold_chunk(aotrt_job *j, int64_t c) {
  int64_t end = (c + 1) * j->chunk < j->fold_cells ? (c + 1) * j->chunk
                                                   : j->fold_cells;
  for (int64_t p = c * j->chunk; p < end; p++) {
    double v = j->fold_val[p];
    for (int64_t b = 0; b < j->nfold; b++)
      v = j->q->combine(v, j->fold_partial[b * j->fold_cells + p]);
    j->fold_val[p] = v;
  }
}

/* Concatenating: block b + 1's entries copied into sinks[0] at at[b + 1]
 * (disjoint ranges: the copies run on threads too). */
static void aotrt_copy_block(aotrt_job *j, int64_t b) {
  const galley_rt_sink *x = &j->sinks[b + 1].s;
  galley_rt_sink *d = &j->sinks[0].s;
  size_t w = d->order > 0 && !d->rows ? (size_t)d->order : 1;
  if (d->rows32)
    memcpy(d->crd32 + j->at[b + 1], x->crd32,
           (size_t)x->n * sizeof *x->crd32);
  else
    memcpy(d->crd + (size_t)j->at[b + 1] * w, x->crd,
           (size_t)x->n * w * sizeof *x->crd);
  memcpy(d->val + j->at[b + 1], x->val, (size_t)x->n * sizeof *x->val);
}

static void aotrt_block(aotrt_job *j, int64_t b, int w) {
  if (j->at) {
    aotrt_copy_block(j, b);
    return;
  }
  if (j->fold_val) {
    aotrt_fold_chunk(j, b);
    return;
  }
  galley_kernel_args a = *j->base;
  if (j->views)
    a.out = &j->views[b];
  a.lo = j->cut[b];
  a.hi = j->cut[b + 1];
  a.sink = j->sinks ? &j->sinks[b].s : 0;
  a.ws = 0;
  if (j->ws) {
    /* a workspace is empty between outer iterations: one per thread */
    if (!j->ws_ready[w]) {
      j->rc[b] = aotrt_ws_init(j->q, a.dims, &j->ws[w]);
      if (j->rc[b] != AOTRT_OK)
        return;
      j->ws_ready[w] = 1;
    }
    a.ws = &j->ws[w];
  }
  a.mark = 0;
  if (j->marks) {
    /* all 0 again after every kernel call that succeeds: one per thread
     * serves all its blocks */
    if (!j->marks[w] &&
        !(j->marks[w] = calloc((size_t)j->nmark, sizeof *j->marks[w]))) {
      j->rc[b] = AOTRT_ENOMEM;
      return;
    }
    a.mark = j->marks[w];
  }
  int k = j->q->kernel(&a);
  j->rc[b] = k == GALLEY_RT_OK         ? AOTRT_OK
             : k == GALLEY_RT_DISORDER ? AOTRT_DISORDER
                                       : AOTRT_ENOMEM;
  if (k != GALLEY_RT_OK && a.ws) { /* left mid-row: the thread's next
                                      block starts from a new one */
    galley_rt_ws_free(&j->ws[w]);
    j->ws_ready[w] = 0;
  }
  if (k != GALLEY_RT_OK && a.mark)
    memset(a.mark, 0, (size_t)j->nmark * sizeof *a.mark);
}

/* The sliced copies a caller's handle keeps (aotrt_kept_sliced): one
 * per input matrix a sliced loop walked, known by the tensor's address,
 * its arrays' addresses, sizes and the padding's fill.  The caller
 * frees the handle when it changes a tensor in place (the generated
 * header says so): the AOT keeps no state between plain runs, so only a
 * handle can keep a copy that costs a pass over the matrix to make. */
typedef struct aotrt_kept {
  const struct galley_tensor *t;
  const void *pos, *crd;
  const double *val;
  int64_t dim, nset;
  double fill;
  galley_rt_sliced *s; /* NULL: t cannot be sliced (the list is walked) */
} aotrt_kept;

typedef struct aotrt_slices {
  aotrt_kept *k;
  int n;
} aotrt_slices;

static void aotrt_slices_free(aotrt_slices *c) {
  for (int i = 0; i < c->n; i++)
    free(c->k[i].s);
  free(c->k);
  c->k = 0;
  c->n = 0;
}

#ifndef GALLEY_AOT_NO_THREADS
/* The threads of one run: workers sleep on `work` until a job has blocks
 * left, claim blocks under the mutex (blocks are coarse) and run them;
 * the caller (thread 0) claims blocks too, then waits on `done`. */
typedef struct aotrt_pool {
  int nthreads;      /* asked for, >= 2 */
  int started;       /* 1: tried to start the workers */
  int nworkers;
  pthread_t *tid;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  int stop;
  aotrt_job *job;    /* the current job, or NULL */
  int64_t next, nblocks;
  int running;       /* workers inside a block */
  int busy;          /* a caller's pool (aotrt_threads_new): a run holds
                        it */
  aotrt_slices slices; /* a caller's pool: the sliced copies it keeps */
  double budget;       /* a caller's pool: its memory budget, 0: the
                          default (aotrt_default_budget) */
} aotrt_pool;

typedef struct aotrt_worker {
  aotrt_pool *p;
  int w;
} aotrt_worker;

static void *aotrt_worker_main(void *arg) {
  aotrt_worker *me = arg;
  aotrt_pool *p = me->p;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && !(p->job && p->next < p->nblocks))
      pthread_cond_wait(&p->work, &p->mu);
    if (p->stop)
      break;
    aotrt_job *j = p->job;
    int64_t b = p->next++;
    p->running++;
    pthread_mutex_unlock(&p->mu);
    aotrt_block(j, b, me->w);
    pthread_mutex_lock(&p->mu);
    if (--p->running == 0 && p->next >= p->nblocks)
      pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return 0;
}

/* A pool of `threads` threads (none started yet), or NULL. */
static aotrt_pool *aotrt_pool_new(int threads) {
  aotrt_pool *p = calloc(1, sizeof *p);
  if (!p)
    return 0;
  p->nthreads = threads;
  if (pthread_mutex_init(&p->mu, 0) != 0) {
    free(p);
    return 0;
  }
  if (pthread_cond_init(&p->work, 0) != 0) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return 0;
  }
  if (pthread_cond_init(&p->done, 0) != 0) {
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return 0;
  }
  return p;
}

/* Start the workers once (mutex held); fewer than asked is still
 * correct, none means the caller runs every block. */
static void aotrt_pool_start(aotrt_pool *p) {
  if (p->started)
    return;
  p->started = 1;
  p->tid = calloc((size_t)p->nthreads, sizeof *p->tid + sizeof(aotrt_worker));
  if (!p->tid)
    return;
  aotrt_worker *ws = (aotrt_worker *)(void *)(p->tid + p->nthreads);
  for (int w = 1; w < p->nthreads; w++) {
    ws[w].p = p;
    ws[w].w = w;
    if (pthread_create(&p->tid[p->nworkers], 0, aotrt_worker_main,
                       &ws[w]) != 0)
      break;
    p->nworkers++;
  }
}

static void aotrt_pool_free(aotrt_pool *p) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  for (int k = 0; k < p->nworkers; k++)
    pthread_join(p->tid[k], 0);
  free(p->tid);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->work);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

/* Run the job's nb blocks on the pool's threads and the caller. */
static void aotrt_pool_run(aotrt_pool *p, aotrt_job *j, int64_t nb) {
  pthread_mutex_lock(&p->mu);
  aotrt_pool_start(p);
  p->job = j;
  p->next = 0;
  p->nblocks = nb;
  pthread_cond_broadcast(&p->work);
  while (p->next < p->nblocks) {
    int64_t b = p->next++;
    pthread_mutex_unlock(&p->mu);
    aotrt_block(j, b, 0);
    pthread_mutex_lock(&p->mu);
  }
  while (p->running > 0)
    pthread_cond_wait(&p->done, &p->mu);
  p->job = 0;
  pthread_mutex_unlock(&p->mu);
}

/* The number of online processors (threads = 0 asks for them). */
static int aotrt_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > AOTRT_MAX_THREADS ? AOTRT_MAX_THREADS : (int)n;
}
#else
typedef struct aotrt_pool {
  int nthreads;
  int busy;
  aotrt_slices slices;
  double budget;
} aotrt_pool;
static int aotrt_cores(void) { return 1; }
#endif

/* A caller's pool of `threads` threads (0: one per online processor),
 * kept across runs: its workers start with the first job of several
 * blocks and sleep between jobs, so that runs do not pay for making
 * threads.  NULL when out of memory or threads < 0. */
static aotrt_pool *aotrt_threads_new(int threads) {
  if (threads < 0)
    return 0;
  int n = threads == 0 ? aotrt_cores()
          : threads > AOTRT_MAX_THREADS ? AOTRT_MAX_THREADS
                                        : threads;
#ifndef GALLEY_AOT_NO_THREADS
  return aotrt_pool_new(n);
#else
  aotrt_pool *p = calloc(1, sizeof *p);
  if (p)
    p->nthreads = 1; /* calloc: no slices */
  (void)n;
  return p;
#endif
}

static void aotrt_threads_free(aotrt_pool *p) {
  if (p)
    aotrt_slices_free(&p->slices);
#ifndef GALLEY_AOT_NO_THREADS
  aotrt_pool_free(p);
#else
  free(p);
#endif
}

/* Take the caller's pool for a run: 1, or 0 when another run holds it
 * (this run then computes its blocks on its own thread, keeping
 * nothing).  Built with GALLEY_AOT_NO_THREADS there is no lock: the
 * header says a handle then serves one thread. */
static int aotrt_pool_take(aotrt_pool *p) {
#ifndef GALLEY_AOT_NO_THREADS
  pthread_mutex_lock(&p->mu);
#endif
  int got = !p->busy;
  p->busy = 1;
#ifndef GALLEY_AOT_NO_THREADS
  pthread_mutex_unlock(&p->mu);
#endif
  return got;
}

static void aotrt_pool_give(aotrt_pool *p) {
#ifndef GALLEY_AOT_NO_THREADS
  pthread_mutex_lock(&p->mu);
#endif
  p->busy = 0;
#ifndef GALLEY_AOT_NO_THREADS
  pthread_mutex_unlock(&p->mu);
#endif
}

/* ------------------------------------------------------------------ */
/* Running a plan                                                      */
/* ------------------------------------------------------------------ */

typedef struct aotrt_state {
  const aotrt_plan *plan;
  const struct galley_tensor **slot; /* inputs, then results */
  struct galley_tensor **owned;      /* per slot: what to free */
  int *last_use;                     /* per query: its last reader */
  unsigned char *keep;               /* per query: an output */
  aotrt_msg *msg;
  int threads;                       /* >= 1 */
  unsigned flags;                    /* AOTRT_CHECK_FULL, AOTRT_TRUST_VALUES */
  aotrt_pool *pool;                  /* the caller's, or made by the
                                        first job of several blocks, or
                                        NULL */
  int own_pool;                      /* 1: made for this run */
  int serial;                        /* 1: every block on the caller */
  aotrt_slices *slices;              /* the held caller's handle's kept
                                        sliced copies, or NULL: sliced
                                        loops walk their lists */
  double budget;                     /* bytes a run may hold */
  double live;                       /* bytes held: inputs copied at
                                        entry and results not yet freed */
  double *bytes;                     /* per slot: its bytes (estimated
                                        before the run, then actual) */
  int64_t (*sdims)[GALLEY_RT_MAX_ORDER]; /* per slot: its logical sizes */
} aotrt_state;

/* ------------------------------------------------------------------ */
/* The memory budget                                                   */
/* ------------------------------------------------------------------ */

/* The budget of a run without a caller's setting: half the physical
 * memory (the library's default), at most half an address-space limit
 * (ulimit -v); 8 GiB when neither is known. */
static double aotrt_default_budget(void) {
  double b = 8.0 * 1024 * 1024 * 1024;
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && size > 0)
    b = (double)pages * (double)size / 2;
#endif
#ifdef RLIMIT_AS
  struct rlimit r;
  if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
      (double)r.rlim_cur / 2 < b)
    b = (double)r.rlim_cur / 2;
#endif
  return b;
}

/* The bytes t's arrays take (hash and bytemap levels roughly). */
static double aotrt_tensor_bytes(const struct galley_tensor *t) {
  if (!t)
    return 0;
  double b = 8.0 * (double)t->nval;
  for (int l = 0; l < t->order && l < GALLEY_RT_MAX_ORDER; l++) {
    const galley_level *L = &t->lvl[l];
    double w = L->idx32 ? 4 : 8, npar = (double)L->npar;
    double nset = (double)L->nset;
    if (L->kind == GALLEY_RT_LIST)
      b += w * (npar + 1 + nset);
    else if (L->kind == GALLEY_RT_HASH)
      b += 8 * (npar + 1) + 24 * nset + 16 * (double)L->hcap;
    else if (L->kind == GALLEY_RT_BYTEMAP)
      b += w * (npar + 1 + nset) + npar * (double)L->dim;
  }
  return b;
}

/* Refuse query `name`: it would hold `bytes` more (what for), over the
 * budget with what the run holds already. */
static int aotrt_over(aotrt_state *S, const char *name, double bytes,
                      const char *what) {
  aotrt_msg *m = S->msg;
  if (m->buf && m->size > 0)
    snprintf(m->buf, m->size,
             "error: query '%s': needs an estimated %.4g bytes (%s, with "
             "%.4g held by earlier results and copied inputs), over the "
             "memory budget of %.4g bytes (%s_threads_set_memory_budget)",
             name, bytes + S->live, what, S->live, S->budget,
             S->plan->prefix);
  return AOTRT_EBUDGET;
}

/* The entries a sink has room for up front, in all: the planned
 * estimate (so that it is not grown by repeated doubling), at most 2^24
 * (pages are touched only as entries arrive) and at most the result's
 * points at the run's sizes; at least 64. */
static double aotrt_first_room(const aotrt_query *q, const int64_t *odims) {
  double want = q->est > (double)(1 << 24) ? (double)(1 << 24) : q->est;
  double cells = 1;
  for (int m = 0; m < q->order; m++)
    cells *= (double)odims[m];
  want = want < cells ? want : cells;
  return want > 64 ? want : 64;
}

/* The bytes query q holds at its peak beyond what the run holds (its
 * result, a reduction's partial results, its workspaces and tables, a
 * sink's first room), from the sizes of its indices and of the tensors
 * it reads (S->bytes); *what says which. */
static double aotrt_query_bytes(const aotrt_state *S, const aotrt_query *q,
                                const int64_t *dims, const int64_t *odims,
                                const char **what) {
  if (q->transpose) { /* entries collected, sorted and laid out */
    *what = "a transposed copy";
    return 3 * S->bytes[q->acc[0]];
  }
  double cells = 1, b;
  for (int m = 0; m < q->order; m++)
    cells *= (double)odims[m];
  if (q->out_kind == AOTRT_OUT_DENSE) {
    *what = "a dense result";
    b = 8 * cells;
    if (q->combine) { /* at most q->room of partial results */
      double parts = 8 * cells * (double)(AOTRT_MAX_BLOCKS - 1);
      b += parts < q->room ? parts : q->room;
    }
  } else if (q->out_kind == AOTRT_OUT_PATTERN) {
    *what = "a result on its pattern's levels";
    b = S->bytes[q->acc[q->pattern]];
  } else {
    *what = "a sparse result's first room";
    b = aotrt_first_room(q, odims) * 8 *
        (1 + (double)(q->order ? q->order : 1));
  }
  double threads = (double)S->threads;
  if (q->scatter) {
    double keys = 1;
    for (int k = 0; k < q->nscatter; k++)
      keys *= dims[q->scatter_ids[k]] > 0 ? (double)dims[q->scatter_ids[k]]
                                          : 1;
    if (keys <= (double)AOTRT_WS_DENSE_MAX)
      b += 17 * keys * threads;
  }
  if (q->mark >= 0)
    b += 8 * (double)dims[q->mark] * threads;
  return b;
}

/* What query q's result is expected to hold (a sparse result: unknown
 * before it runs, 0). */
static double aotrt_result_bytes(const aotrt_state *S, const aotrt_query *q,
                                 const int64_t *odims) {
  if (q->transpose)
    return S->bytes[q->acc[0]];
  if (q->out_kind == AOTRT_OUT_PATTERN)
    return S->bytes[q->acc[q->pattern]];
  if (q->out_kind != AOTRT_OUT_DENSE)
    return 0;
  double cells = 8;
  for (int m = 0; m < q->order; m++)
    cells *= (double)odims[m];
  return cells;
}

/* The sliced copy of input t with padding `fill` kept in c, made on the
 * first use; NULL (the kernel walks the list, never an error) when t
 * cannot be sliced or memory runs out. */
static const galley_rt_sliced *aotrt_sliced(aotrt_slices *c,
                                            const struct galley_tensor *t,
                                            double fill) {
  if (!galley_rt_sliced_fits(t))
    return 0;
  const galley_level *L = &t->lvl[1];
  const void *pos = L->idx32 ? (const void *)L->pos32 : (const void *)L->pos;
  const void *crd = L->idx32 ? (const void *)L->crd32 : (const void *)L->crd;
  for (int i = 0; i < c->n; i++) {
    const aotrt_kept *k = &c->k[i];
    if (k->t == t && k->pos == pos && k->crd == crd && k->val == t->val &&
        k->dim == t->lvl[0].dim && k->nset == L->nset &&
        memcmp(&k->fill, &fill, sizeof fill) == 0)
      return k->s;
  }
  aotrt_kept *grown = realloc(c->k, (size_t)(c->n + 1) * sizeof *grown);
  if (!grown)
    return 0;
  c->k = grown;
  aotrt_kept *k = &c->k[c->n++];
  k->t = t;
  k->pos = pos;
  k->crd = crd;
  k->val = t->val;
  k->dim = t->lvl[0].dim;
  k->nset = L->nset;
  k->fill = fill;
  k->s = galley_rt_sliced_make(t, fill, GALLEY_RT_SLICED_F32_MIN_BYTES);
#ifdef AOTRT_TRACE_SLICED /* tests: a copy is made, once per handle */
  fprintf(stderr, "aotrt: made a sliced copy (%s)\n",
          k->s ? (k->s->val32 ? "floats" : "doubles") : "none");
#endif
  return k->s;
}

/* The size of each index of query q; AOTRT_EINPUT when two tensors that
 * share an index disagree. */
static int aotrt_query_dims(aotrt_state *S, const aotrt_query *q,
                            int64_t *dims) {
  for (int id = 0; id < q->nindices; id++)
    dims[id] = -1;
  for (int k = 0; k < q->nsrc; k++) {
    const aotrt_dimsrc *s = &q->src[k];
    int64_t d = s->slot < 0 ? s->fixed : S->sdims[s->slot][s->mode];
    if (dims[s->index] >= 0 && dims[s->index] != d) {
      int in = s->slot >= 0 && s->slot < S->plan->ninputs;
      return aotrt_fail(S->msg, AOTRT_EINPUT, in ? "input" : "query",
                        in ? S->plan->inputs[s->slot].name : q->name,
                        "a mode's size differs from the size of another "
                        "tensor's mode with the same index",
                        d, dims[s->index]);
    }
    dims[s->index] = d;
  }
  for (int id = 0; id < q->nindices; id++)
    if (dims[id] < 0)
      dims[id] = 0;
  return AOTRT_OK;
}

/* Run job j's nb blocks (kernel blocks or copies), on the run's threads
 * when there are several. */
static void aotrt_run_job(aotrt_state *S, aotrt_job *j, int64_t nb) {
#ifndef GALLEY_AOT_NO_THREADS
  if (nb > 1 && !S->pool && !S->serial && S->threads > 1) {
    S->pool = aotrt_pool_new(S->threads);
    S->own_pool = 1;
  }
  if (nb > 1 && S->pool && !S->serial) {
    aotrt_pool_run(S->pool, j, nb);
    return;
  }
#else
  (void)S;
#endif
  for (int64_t b = 0; b < nb; b++)
    aotrt_block(j, b, 0);
}

/* Run query q's blocks; the first failure in block order (the same for
 * every thread count). */
static int aotrt_run_blocks(aotrt_state *S, const aotrt_query *q,
                            const galley_kernel_args *a, const int64_t *cut,
                            int64_t nb, aotrt_sink *sinks,
                            struct galley_tensor *out) {
  int nw = S->threads;
  int *rc = calloc((size_t)nb, sizeof *rc);
  galley_rt_ws *ws = q->scatter ? calloc((size_t)nw, sizeof *ws) : 0;
  unsigned char *ready = calloc((size_t)nw, 1);
  /* a marked intersection's table per thread, over the marked loop */
  int64_t nmark = q->mark >= 0 ? a->dims[q->mark] : 0;
  double **marks = nmark > 0 ? calloc((size_t)nw, sizeof *marks) : 0;
  /* a reduction in blocks: block 0 into the result, every other block
   * into a partial copy of it (its values as they start: the fill) */
  int reduce = q->combine && out && nb > 1;
  struct galley_tensor *views = reduce ? calloc((size_t)nb, sizeof *views) : 0;
  int64_t cells = reduce ? out->nval : 0, nparts;
  double *partial = reduce && aotrt_mul(nb - 1, cells, &nparts) == 0
                        ? aotrt_alloc(nparts, sizeof *partial)
                        : 0;
  int code = rc && ready && (!q->scatter || ws) && (nmark <= 0 || marks) &&
                     (!reduce || (views && partial)) &&
                     (uint64_t)nmark < (uint64_t)SIZE_MAX / sizeof(double)
                 ? AOTRT_OK
                 : AOTRT_ENOMEM;
  for (int64_t b = 0; code == AOTRT_OK && reduce && b < nb; b++) {
    views[b] = *out;
    if (b > 0) {
      views[b].val = partial + (b - 1) * cells;
      memcpy(views[b].val, out->val, (size_t)cells * sizeof *out->val);
    }
  }
  aotrt_job j;
  memset(&j, 0, sizeof j);
  j.q = q;
  if (code == AOTRT_OK) {
    j.base = a;
    j.cut = cut;
    j.sinks = sinks;
    j.ws = ws;
    j.ws_ready = ready;
    j.rc = rc;
    j.marks = marks;
    j.nmark = nmark;
    j.views = views;
    aotrt_run_job(S, &j, nb);
    for (int64_t b = 0; b < nb && code == AOTRT_OK; b++)
      code = rc[b];
  }
  if (code == AOTRT_OK && reduce) {
    /* fold the partial results in block order, in chunks of values (on
     * the threads only when the fold is long) */
    aotrt_job f;
    memset(&f, 0, sizeof f);
    f.q = q;
    f.fold_val = out->val;
    f.fold_partial = partial;
    f.nfold = nb - 1;
    f.fold_cells = cells;
    f.chunk = (int64_t)1 << 12;
    int64_t nchunks = (cells + f.chunk - 1) / f.chunk;
    if ((double)cells * (double)(nb - 1) >= (double)(1 << 20))
      aotrt_run_job(S, &f, nchunks);
    else
      for (int64_t c = 0; c < nchunks; c++)
        aotrt_fold_chunk(&f, c);
  }
  for (int w = 0; ws && w < nw; w++)
    galley_rt_ws_free(&ws[w]);
  for (int w = 0; marks && w < nw; w++)
    free(marks[w]);
  free((void *)marks);
  free(ws);
  free(ready);
  free(rc);
  free(views);
  free(partial);
  return code;
}

/* Append the entries of sinks 1 .. nb-1 to sinks[0], in block order
 * (rows mode: 32-bit coordinates when every block's are and the total
 * fits a 32-bit list). */
static int aotrt_sinks_concat(aotrt_state *S, aotrt_sink *sinks,
                              int64_t nb) {
  if (nb <= 1)
    return AOTRT_OK;
  int64_t *at = aotrt_alloc(nb, sizeof *at), total = 0;
  if (!at)
    return AOTRT_ENOMEM;
  int all32 = 1;
  for (int64_t b = 0; b < nb; b++) {
    at[b] = total;
    total += sinks[b].s.n;
    all32 &= sinks[b].s.rows32;
  }
  int rc = AOTRT_OK;
  if (sinks[0].s.rows && (!all32 || total > GALLEY_RT_IDX32_MAX_NSET))
    for (int64_t b = 0; b < nb && rc == AOTRT_OK; b++)
      if (sinks[b].s.rows32 && galley_rt_sink_widen(&sinks[b].s) != 0)
        rc = AOTRT_ENOMEM;
  if (rc == AOTRT_OK && total > sinks[0].s.cap &&
      aotrt_sink_grow(&sinks[0].s, total) != 0)
    rc = AOTRT_ENOMEM;
  if (rc == AOTRT_OK) {
    aotrt_job j;
    memset(&j, 0, sizeof j);
    j.sinks = sinks;
    j.at = at;
    aotrt_run_job(S, &j, nb - 1);
    sinks[0].s.n = total;
  }
  free(at);
  return rc;
}

/* Free the blocks' sinks (their shared count array once). */
static void aotrt_sinks_free(aotrt_sink *sinks, int64_t nb) {
  free(sinks[0].s.pos);
  for (int64_t b = 0; b < nb; b++) {
    free(sinks[b].s.crd);
    free(sinks[b].s.crd32);
    free(sinks[b].s.val);
  }
  free(sinks);
}

/* OUT_APPEND, OUT_SCATTER: a sink per block (in rows mode when the plan
 * says so, run again plainly should entries arrive out of level order),
 * concatenated in block order, then laid out. */
static int aotrt_run_sink(aotrt_state *S, const aotrt_query *q,
                          galley_kernel_args *a, const int64_t *odims,
                          const int64_t *cut, int64_t nb,
                          struct galley_tensor **out) {
  aotrt_sink *sinks = calloc((size_t)nb, sizeof *sinks);
  if (!sinks)
    return AOTRT_ENOMEM;
  int rc = AOTRT_OK;
  int rows = q->rows && (nb == 1 || q->rows_split);
  if (rows && aotrt_sinks_rows_mode(sinks, nb, q, odims) != 0)
    rc = AOTRT_ENOMEM;
  double want = aotrt_first_room(q, odims) / (double)nb;
  double room = S->budget - S->live;
  for (int64_t b = 0; b < nb; b++) {
    sinks[b].room = room > 1 ? room : 1;
    sinks[b].s.order = q->order;
    sinks[b].s.grow = aotrt_sink_grow;
    if (rc == AOTRT_OK &&
        aotrt_sink_grow(&sinks[b].s, want > 64 ? (int64_t)want : 64))
      rc = AOTRT_ENOMEM;
  }
  if (rc == AOTRT_OK)
    rc = aotrt_run_blocks(S, q, a, cut, nb, sinks, 0);
  if (rc == AOTRT_DISORDER && rows) {
    rows = 0;
    rc = aotrt_sinks_plain_mode(sinks, nb) == 0
             ? aotrt_run_blocks(S, q, a, cut, nb, sinks, 0)
             : AOTRT_ENOMEM;
  }
  if (rc == AOTRT_DISORDER) /* only a rows-mode sink refuses entries */
    rc = AOTRT_ENOMEM;
  if (rc == AOTRT_OK)
    rc = aotrt_sinks_concat(S, sinks, nb);
  if (rc == AOTRT_OK && rows) {
    rc = aotrt_rows_tensor(&sinks[0].s, q, odims, out);
  } else if (rc == AOTRT_OK) {
    galley_rt_sink *s = &sinks[0].s;
    aotrt_entries E = {s->order, s->n, s->cap, s->crd, s->val};
    rc = aotrt_build(q->order, odims, q->kinds, q->modes, q->fill, &E, out);
    s->crd = E.crd;
    s->val = E.val;
  }
  double wanted = 0; /* a growth refused for the budget: say so */
  for (int64_t b = 0; rc != AOTRT_OK && b < nb; b++)
    wanted = sinks[b].wanted > wanted ? sinks[b].wanted : wanted;
  if (wanted > 0)
    rc = aotrt_over(S, q->name, wanted, "its sparse result's entries");
  aotrt_sinks_free(sinks, nb);
  return rc;
}

/* Query n's kernel into *out: a dense or pattern result every block
 * writes its own points of, or a sink per block. */
static int aotrt_run_kernel(aotrt_state *S, const aotrt_query *q,
                            galley_kernel_args *a, const int64_t *odims,
                            struct galley_tensor **out) {
  int64_t *cut = aotrt_alloc(AOTRT_MAX_BLOCKS + 1, sizeof *cut), nb = 1;
  if (!cut)
    return AOTRT_ENOMEM;
  int rc;
  if (q->out_kind == AOTRT_OUT_SINK) {
    rc = aotrt_blocks(q, a->in, S->threads, 1, a->lo, a->hi, cut, &nb);
    if (rc == AOTRT_OK)
      rc = aotrt_run_sink(S, q, a, odims, cut, nb, out);
  } else {
    rc = q->out_kind == AOTRT_OUT_PATTERN
             ? aotrt_pattern(a->in[q->pattern], q->order, q->kinds,
                             q->modes, odims, q->fill, q->every, out)
             : aotrt_dense(q->order, odims, q->modes, q->fill, q->every,
                           out);
    if (rc == AOTRT_OK)
      rc = aotrt_blocks(q, a->in, S->threads, (double)(*out)->nval, a->lo,
                        a->hi, cut, &nb);
    if (rc == AOTRT_OK) {
      a->out = *out;
      rc = aotrt_run_blocks(S, q, a, cut, nb, 0, *out);
    }
    if (rc != AOTRT_OK) {
      aotrt_free(*out);
      *out = 0;
    }
  }
  free(cut);
  return rc;
}

/* The sizes of query q's indices (dims, q->nindices + 1) and of its
 * result's modes (odims), from the sizes of the slots it reads. */
static int aotrt_query_sizes(aotrt_state *S, const aotrt_query *q,
                             int64_t *dims, int64_t *odims) {
  for (int m = 0; m < GALLEY_RT_MAX_ORDER; m++)
    odims[m] = 0;
  if (q->transpose) { /* the same logical sizes as its source */
    for (int m = 0; m < GALLEY_RT_MAX_ORDER; m++)
      odims[m] = S->sdims[q->acc[0]][m];
    return AOTRT_OK;
  }
  int rc = aotrt_query_dims(S, q, dims);
  for (int m = 0; rc == AOTRT_OK && m < q->order; m++)
    odims[m] = dims[q->out[m]];
  return rc;
}

/* Whether the plan fits the budget, as far as the sizes at entry tell
 * (every dense result and workspace, pattern copies and transposes of
 * inputs, a sparse result's first room; sparse results' entries are
 * checked as they arrive): AOTRT_OK, or AOTRT_EBUDGET naming the first
 * query over it before any kernel runs.  Sets every result slot's
 * sizes. */
static int aotrt_plan_fits(aotrt_state *S) {
  const aotrt_plan *P = S->plan;
  int64_t *dims = 0;
  double live = S->live;
  int rc = AOTRT_OK;
  for (int n = 0; n < P->nq && rc == AOTRT_OK; n++) {
    const aotrt_query *q = &P->q[n];
    int64_t odims[GALLEY_RT_MAX_ORDER];
    int64_t *grown = realloc(dims, (size_t)(q->nindices + 1) * sizeof *dims);
    if (!grown) {
      rc = aotrt_nomem(S->msg, q->name);
      break;
    }
    dims = grown;
    rc = aotrt_query_sizes(S, q, dims, odims);
    if (rc != AOTRT_OK)
      break;
    const char *what;
    double need = aotrt_query_bytes(S, q, dims, odims, &what);
    if (live + need > S->budget) {
      double held = S->live;
      S->live = live;
      rc = aotrt_over(S, q->name, need, what);
      S->live = held;
      break;
    }
    int slot = P->ninputs + n;
    for (int m = 0; m < GALLEY_RT_MAX_ORDER; m++)
      S->sdims[slot][m] = odims[m];
    S->bytes[slot] = aotrt_result_bytes(S, q, odims);
    live += S->bytes[slot];
    for (int k = 0; k < q->nacc; k++) {
      int r = q->acc[k] - P->ninputs;
      if (r >= 0 && S->last_use[r] == n && !S->keep[r])
        live -= S->bytes[q->acc[k]];
    }
  }
  free(dims);
  return rc;
}

/* Query n: a transpose or a kernel, its result in *out. */
static int aotrt_run_query(aotrt_state *S, int n,
                           struct galley_tensor **out) {
  const aotrt_query *q = &S->plan->q[n];
  int64_t *dims = aotrt_alloc(q->nindices + 1, sizeof *dims);
  const struct galley_tensor **in = aotrt_alloc(q->nacc + 1, sizeof *in);
  int64_t odims[GALLEY_RT_MAX_ORDER] = {0};
  int rc = dims && in ? aotrt_query_sizes(S, q, dims, odims) : AOTRT_ENOMEM;
  if (rc == AOTRT_OK) { /* with the actual bytes of what it reads */
    const char *what;
    double need = aotrt_query_bytes(S, q, dims, odims, &what);
    if (S->live + need > S->budget)
      rc = aotrt_over(S, q->name, need, what);
  }
  if (rc == AOTRT_OK && q->transpose) {
    rc = aotrt_convert(S->slot[q->acc[0]], q->kinds, q->modes, q->fill,
                       out);
  } else if (rc == AOTRT_OK) {
    galley_kernel_args a;
    memset(&a, 0, sizeof a);
    for (int k = 0; k < q->nacc; k++)
      in[k] = S->slot[q->acc[k]];
    a.in = in;
    a.dims = dims;
    a.lo = 0;
    a.hi = q->loop0 >= 0 ? dims[q->loop0] : 1;
    /* an input's copy only: an intermediate, or an input copied to the
     * compiled widths, is new each run (kept, the copies would pile up) */
    if (q->sliced > 0 && S->slices &&
        q->acc[q->sliced - 1] < S->plan->ninputs &&
        !S->owned[q->acc[q->sliced - 1]])
      a.sliced = aotrt_sliced(S->slices, in[q->sliced - 1], q->sliced_fill);
    rc = aotrt_run_kernel(S, q, &a, odims, out);
  }
  free(dims);
  free((void *)in);
  return rc;
}

/* The status of a failed query as the caller's message. */
static int aotrt_query_failed(aotrt_state *S, int n, int rc) {
  const char *name = S->plan->q[n].name;
  if (rc == AOTRT_ENOMEM)
    return aotrt_nomem(S->msg, name);
  if (rc == AOTRT_ESIZE)
    return aotrt_fail(S->msg, rc, "query", name,
                      "its result is too large (more than 2^62 positions, "
                      "or more entries than the 32-bit indices the kernels "
                      "reading it were compiled for)",
                      -1, -1);
  return rc; /* the message is set */
}

static int aotrt_run_queries(aotrt_state *S) {
  const aotrt_plan *P = S->plan;
  for (int n = 0; n < P->nq; n++) {
    struct galley_tensor *t = 0;
    int rc = aotrt_run_query(S, n, &t);
    /* readers expect the compiled widths; an output only is as narrow
     * as it fits */
    if (rc == AOTRT_OK)
      rc = aotrt_set_widths(t, S->last_use[n] >= 0 ? P->q[n].w32 : ~0u,
                            S->last_use[n] >= 0);
    if (rc != AOTRT_OK) {
      aotrt_free(t);
      return aotrt_query_failed(S, n, rc);
    }
    S->slot[P->ninputs + n] = t;
    S->owned[P->ninputs + n] = t;
    S->bytes[P->ninputs + n] = aotrt_tensor_bytes(t);
    S->live += S->bytes[P->ninputs + n];
    /* free what no later query reads */
    for (int k = 0; k < P->q[n].nacc; k++) {
      int s = P->q[n].acc[k] - P->ninputs;
      if (s >= 0 && S->last_use[s] == n && !S->keep[s]) {
        S->live -= S->bytes[P->ninputs + s];
        aotrt_free(S->owned[P->ninputs + s]);
        S->owned[P->ninputs + s] = 0;
        S->slot[P->ninputs + s] = 0;
      }
    }
  }
  return AOTRT_OK;
}

/* Check the inputs; those whose widths differ are copied. */
static int aotrt_take_inputs(aotrt_state *S,
                             const struct galley_tensor *const *inputs) {
  const aotrt_plan *P = S->plan;
  for (int k = 0; k < P->ninputs; k++) {
    int conv = 0;
    int rc = aotrt_check_input(&P->inputs[k], inputs[k], S->flags, &conv,
                               S->msg);
    if (rc != AOTRT_OK)
      return rc;
    S->slot[k] = inputs[k];
    for (int m = 0; m < GALLEY_RT_MAX_ORDER; m++)
      S->sdims[k][m] = m < inputs[k]->order ? inputs[k]->dims[m] : 0;
    S->bytes[k] = aotrt_tensor_bytes(inputs[k]);
    if (!conv)
      continue;
    int kinds[GALLEY_RT_MAX_ORDER], modes[GALLEY_RT_MAX_ORDER];
    struct galley_tensor *t = 0;
    aotrt_format_of(inputs[k], kinds, modes);
    rc = aotrt_convert(inputs[k], kinds, modes, inputs[k]->fill, &t);
    if (rc == AOTRT_OK)
      rc = aotrt_set_widths(t, P->inputs[k].w32, 1);
    if (rc != AOTRT_OK) {
      aotrt_free(t);
      return aotrt_fail(S->msg, rc, "input", P->inputs[k].name,
                        rc == AOTRT_ESIZE
                            ? "too large for the 32-bit indices compiled for"
                            : "out of memory copying it to the compiled "
                              "index widths",
                        -1, -1);
    }
    S->slot[k] = S->owned[k] = t;
    S->live += aotrt_tensor_bytes(t);
  }
  return AOTRT_OK;
}

/* Make what the held caller's pool keeps for the inputs (aotrt_prepare):
 * the sliced copy of every input a sliced loop walks, unless it was
 * copied at entry (new each run: its kernels walk the list). */
static void aotrt_keep_all(aotrt_state *S) {
  const aotrt_plan *P = S->plan;
  for (int n = 0; S->slices && n < P->nq; n++) {
    const aotrt_query *q = &P->q[n];
    int k = q->sliced > 0 ? q->acc[q->sliced - 1] : -1;
    if (k >= 0 && k < P->ninputs && !S->owned[k])
      (void)aotrt_sliced(S->slices, S->slot[k], q->sliced_fill);
  }
}

/* Hand the outputs over (moved, or copied when a query is named twice). */
static int aotrt_give_outputs(aotrt_state *S,
                              struct galley_tensor **outputs) {
  const aotrt_plan *P = S->plan;
  for (int k = 0; k < P->noutputs; k++) {
    int s = P->ninputs + P->outputs[k];
    if (S->owned[s]) {
      outputs[k] = S->owned[s];
      S->owned[s] = 0;
      continue;
    }
    int kinds[GALLEY_RT_MAX_ORDER], modes[GALLEY_RT_MAX_ORDER];
    aotrt_format_of(S->slot[s], kinds, modes);
    int rc = aotrt_convert(S->slot[s], kinds, modes, S->slot[s]->fill,
                           &outputs[k]);
    if (rc != AOTRT_OK)
      return aotrt_query_failed(S, P->outputs[k], rc);
  }
  return AOTRT_OK;
}

/* Run the plan on `threads` threads (0: one per online processor; 1:
 * the caller alone), or on the caller's pool `shared` (its threads; NULL:
 * threads made for the run), with the input checks of `flags`: AOTRT_OK with
 * outputs[] set (new tensors, freed with aotrt_free), or an error with
 * outputs[] NULL and the message in msg. */
static int aotrt_run_with(const aotrt_plan *P,
                          const struct galley_tensor *const *inputs,
                          struct galley_tensor **outputs, int threads,
                          aotrt_pool *shared, unsigned flags, char *msg,
                          size_t size) {
  aotrt_msg m;
  m.buf = msg;
  m.size = size;
  if (msg && size > 0)
    msg[0] = '\0';
  int prepare = (flags & AOTRT_PREPARE) != 0;
  if ((!outputs && !prepare) || (!inputs && P->ninputs > 0))
    return aotrt_fail(&m, AOTRT_EARG, "argument", "inputs/outputs",
                      "is NULL", -1, -1);
  if (threads < 0)
    return aotrt_fail(&m, AOTRT_EARG, "argument", "threads",
                      "is negative", threads, 0);
  for (int k = 0; outputs && k < P->noutputs; k++)
    outputs[k] = 0;
  int nslot = P->ninputs + P->nq;
  aotrt_state S;
  S.plan = P;
  S.msg = &m;
  S.threads = threads == 0 ? aotrt_cores()
              : threads > AOTRT_MAX_THREADS ? AOTRT_MAX_THREADS
                                            : threads;
#ifdef GALLEY_AOT_NO_THREADS
  S.threads = 1;
#endif
  S.flags = flags;
  S.pool = 0;
  S.own_pool = 0;
  S.serial = 0;
  S.slices = 0;
  S.budget = shared && shared->budget > 0 ? shared->budget
                                          : aotrt_default_budget();
  S.live = 0;
  int held = shared && aotrt_pool_take(shared);
  if (shared) { /* its threads; computed alone when another run holds it */
    S.threads = shared->nthreads;
    S.pool = held ? shared : 0;
    S.serial = !held;
    S.slices = held ? &shared->slices : 0;
  }
  S.slot = calloc((size_t)nslot + 1, sizeof *S.slot);
  S.owned = calloc((size_t)nslot + 1, sizeof *S.owned);
  S.last_use = calloc((size_t)P->nq + 1, sizeof *S.last_use);
  S.keep = calloc((size_t)P->nq + 1, 1);
  S.bytes = calloc((size_t)nslot + 1, sizeof *S.bytes);
  S.sdims = calloc((size_t)nslot + 1, sizeof *S.sdims);
  int rc = S.slot && S.owned && S.last_use && S.keep && S.bytes && S.sdims
               ? AOTRT_OK
               : aotrt_nomem(&m, "(driver)");
  if (rc == AOTRT_OK) {
    for (int n = 0; n < P->nq; n++)
      S.last_use[n] = -1;
    for (int n = 0; n < P->nq; n++)
      for (int k = 0; k < P->q[n].nacc; k++)
        if (P->q[n].acc[k] >= P->ninputs)
          S.last_use[P->q[n].acc[k] - P->ninputs] = n;
    for (int k = 0; k < P->noutputs; k++)
      S.keep[P->outputs[k]] = 1;
    rc = aotrt_take_inputs(&S, inputs);
  }
  if (rc == AOTRT_OK)
    rc = aotrt_plan_fits(&S);
  if (rc == AOTRT_OK && prepare)
    aotrt_keep_all(&S);
  if (rc == AOTRT_OK && !prepare)
    rc = aotrt_run_queries(&S);
  if (rc == AOTRT_OK && !prepare)
    rc = aotrt_give_outputs(&S, outputs);
#ifndef GALLEY_AOT_NO_THREADS
  if (S.own_pool)
    aotrt_pool_free(S.pool);
#endif
  if (held)
    aotrt_pool_give(shared);
  for (int s = 0; S.owned && s < nslot; s++)
    aotrt_free(S.owned[s]);
  if (rc != AOTRT_OK && outputs)
    for (int k = 0; k < P->noutputs; k++) {
      aotrt_free(outputs[k]);
      outputs[k] = 0;
    }
  free((void *)S.slot);
  free(S.owned);
  free(S.last_use);
  free(S.keep);
  free(S.bytes);
  free((void *)S.sdims);
  return rc;
}

/* aotrt_run_with on threads made for the run. */
static int aotrt_run_opts(const aotrt_plan *P,
                          const struct galley_tensor *const *inputs,
                          struct galley_tensor **outputs, int threads,
                          unsigned flags, char *msg, size_t size) {
  return aotrt_run_with(P, inputs, outputs, threads, 0, flags, msg, size);
}

/* Check the inputs as a run on the caller's pool `pool` does (flags:
 * their structure, sizes and the memory budget's estimate at entry) and
 * make now what the pool keeps for them (the sliced copies of the plan's
 * sliced loops), so that its first run does not pay for them: AOTRT_OK
 * (also when a run holds the pool: then nothing is made), or the error
 * a run would give before its first kernel. */
static int aotrt_prepare(const aotrt_plan *P, aotrt_pool *pool,
                         const struct galley_tensor *const *inputs,
                         unsigned flags, char *msg, size_t size) {
  if (!pool) {
    aotrt_msg m;
    m.buf = msg;
    m.size = size;
    return aotrt_fail(&m, AOTRT_EARG, "argument", "threads", "is NULL", -1,
                      -1);
  }
  return aotrt_run_with(P, inputs, 0, 1, pool, flags | AOTRT_PREPARE, msg,
                        size);
}

/* The default run: the caller's thread alone, structural input checks. */
static int aotrt_run(const aotrt_plan *P,
                     const struct galley_tensor *const *inputs,
                     struct galley_tensor **outputs, char *msg,
                     size_t size) {
  return aotrt_run_opts(P, inputs, outputs, 1, 0, msg, size);
}
