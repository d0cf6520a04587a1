/*
 * csr.c -- matrices from compressed sparse row (CSR) and column (CSC)
 * arrays of 64-bit or 32-bit indices: wrapped without copying (the
 * tensor borrows the caller's arrays; 32-bit arrays become a 32-bit list
 * level, see galley_rt.h), or copied from 32-bit index arrays.
 *
 * CSR is exactly the runtime's default matrix format dense:0,list:1
 * (galley_rt.h): level 0 is dense over the rows (one parent, nrows
 * children), level 1 a sorted list whose fiber r is crd[pos[r] ..
 * pos[r+1]), and the values follow the list's positions.  CSC is
 * dense:1,list:0, the same with rows and columns swapped.  So wrapping is
 * checking the arrays and pointing the list level and the values at them;
 * the tensor is marked borrowed so that galley_tensor_free leaves them.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

/* The words of messages: CSR and CSC name their arrays differently. */
typedef struct Names {
  const char *fn;    /* the API function */
  const char *ptr;   /* "rowptr" or "colptr" */
  const char *idx;   /* "colidx" or "rowidx" */
  const char *fiber; /* "row" or "column" */
  const char *inner; /* "columns" or "rows" */
} Names;

static Names names_of(const char *fn, int csc) {
  Names n = {fn, "rowptr", "colidx", "row", "columns"};
  if (csc) {
    n.ptr = "colptr";
    n.idx = "rowidx";
    n.fiber = "column";
    n.inner = "rows";
  }
  return n;
}

/* The sizes: non-negative, and nrows*ncols positions within the
 * runtime's limit (as for any tensor built from entries). */
static galley_status check_dims(const Names *n, int64_t nrows, int64_t ncols,
                                galley_error *err) {
  int64_t cells;
  if (nrows < 0 || ncols < 0)
    return rt_error(err, GALLEY_EINVAL, "%s: negative size %lld x %lld",
                    n->fn, (long long)nrows, (long long)ncols);
  if (nrows >= RT_MAX_POSITIONS || ncols >= RT_MAX_POSITIONS ||
      rt_mul_overflows(nrows, ncols, &cells) || cells >= RT_MAX_POSITIONS)
    return rt_error(err, GALLEY_EOVERFLOW,
                    "%s: %lld x %lld is too large (2^62 positions or more)",
                    n->fn, (long long)nrows, (long long)ncols);
  return GALLEY_OK;
}

/* An index array of either width (exactly one of w, n is non-NULL, or
 * neither for a NULL array). */
typedef struct Idx {
  const int64_t *w;
  const int32_t *n;
} Idx;

static Idx idx64(const int64_t *a) { return (Idx){a, NULL}; }
static Idx idx32(const int32_t *a) { return (Idx){NULL, a}; }
static int idx_null(Idx a) { return !a.w && !a.n; }
static int64_t at(Idx a, int64_t k) { return a.n ? a.n[k] : a.w[k]; }

/* ptr[0 .. nouter]: starts at 0 and never decreases. */
static galley_status check_ptr(const Names *n, int64_t nouter, Idx ptr,
                               galley_error *err) {
  if (idx_null(ptr))
    return rt_error(err, GALLEY_EINVAL, "%s: %s is NULL", n->fn, n->ptr);
  if (at(ptr, 0) != 0)
    return rt_error(err, GALLEY_EINVAL, "%s: %s[0] = %lld: it must be 0",
                    n->fn, n->ptr, (long long)at(ptr, 0));
  for (int64_t r = 0; r < nouter; r++)
    if (at(ptr, r + 1) < at(ptr, r))
      return rt_error(err, GALLEY_EINVAL,
                      "%s: %s[%lld] = %lld is less than %s[%lld] = %lld: "
                      "%s must not decrease",
                      n->fn, n->ptr, (long long)(r + 1),
                      (long long)at(ptr, r + 1), n->ptr, (long long)r,
                      (long long)at(ptr, r), n->ptr);
  return GALLEY_OK;
}

/* idx: in 0..ninner-1 and strictly increasing within each fiber of ptr
 * (already checked); NULL only when there are no entries. */
static galley_status check_idx(const Names *n, int64_t nouter, int64_t ninner,
                               Idx ptr, Idx idx, galley_error *err) {
  if (idx_null(idx) && at(ptr, nouter) > 0)
    return rt_error(err, GALLEY_EINVAL, "%s: %s is NULL but %s[%lld] = %lld",
                    n->fn, n->idx, n->ptr, (long long)nouter,
                    (long long)at(ptr, nouter));
  for (int64_t r = 0; r < nouter; r++)
    for (int64_t k = at(ptr, r); k < at(ptr, r + 1); k++) {
      int64_t c = at(idx, k);
      if (c < 0 || c >= ninner)
        return rt_error(err, GALLEY_EINVAL,
                        "%s: %s[%lld] = %lld (%s %lld) is out of range: "
                        "there are %lld %s",
                        n->fn, n->idx, (long long)k, (long long)c,
                        n->fiber, (long long)r, (long long)ninner, n->inner);
      if (k > at(ptr, r) && c <= at(idx, k - 1))
        return rt_error(err, GALLEY_EINVAL,
                        "%s: %s[%lld] = %lld is not greater than %s[%lld] = "
                        "%lld (%s %lld): indices must increase strictly "
                        "within a %s",
                        n->fn, n->idx, (long long)k, (long long)c,
                        n->idx, (long long)(k - 1), (long long)at(idx, k - 1),
                        n->fiber, (long long)r, n->fiber);
    }
  return GALLEY_OK;
}

/* A matrix over checked arrays: ptr has nouter+1 entries, idx and vals
 * ptr[nouter]; ptr and idx both 64-bit or both 32-bit (the list level's
 * width).  borrowed says whether the tensor frees them. */
static galley_status assemble(int csc, int64_t nrows, int64_t ncols, Idx ptr,
                              Idx idx, double *vals, double fill,
                              int borrowed, galley_tensor **out,
                              galley_error *err) {
  galley_tensor *t = calloc(1, sizeof *t);
  if (!t)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  int64_t nouter = csc ? ncols : nrows, ninner = csc ? nrows : ncols;
  int64_t nnz = at(ptr, nouter);
  t->order = 2;
  t->dims[0] = nrows;
  t->dims[1] = ncols;
  t->fill = fill;
  t->borrowed = borrowed;
  galley_level *D = &t->lvl[0], *L = &t->lvl[1];
  D->kind = GALLEY_RT_DENSE;     /* the rows (CSC: columns) */
  D->mode = csc ? 1 : 0;
  D->dim = nouter;
  D->npar = 1;
  D->nchild = D->nset = nouter;
  L->kind = GALLEY_RT_LIST;      /* the entries of each row */
  L->mode = csc ? 0 : 1;
  L->dim = ninner;
  L->npar = nouter;
  L->nchild = L->nset = nnz;
  /* the library never writes through a tensor's index arrays after
   * building it, so dropping const here is safe */
  L->idx32 = ptr.n != NULL;
  L->pos = (int64_t *)ptr.w;
  L->crd = (int64_t *)idx.w;
  L->pos32 = (int32_t *)ptr.n;
  L->crd32 = (int32_t *)idx.n;
  t->val = vals;
  t->nval = nnz;
  *out = t;
  return GALLEY_OK;
}

/* Never written: what an empty wrapped matrix points at when the caller
 * passed NULL arrays (every array of a tensor is non-NULL). */
static const int64_t no_idx[1];
static const int32_t no_idx32[1];
static const double no_vals[1];

/* Check the arrays of a wrap, which borrows them (ptr and idx of one
 * width). */
static galley_status wrap(const char *fn, int csc, int64_t nrows,
                          int64_t ncols, Idx ptr, Idx idx, const double *vals,
                          double fill, galley_tensor **out,
                          galley_error *err) {
  Names n = names_of(fn, csc);
  rt_error_clear(err);
  if (!out)
    return rt_error(err, GALLEY_EINVAL, "%s: out is NULL", fn);
  *out = NULL;
  int64_t nouter = csc ? ncols : nrows, ninner = csc ? nrows : ncols;
  galley_status st = check_dims(&n, nrows, ncols, err);
  if (st == GALLEY_OK && ptr.n && ninner > GALLEY_RT_IDX32_MAX_DIM)
    st = rt_error(err, GALLEY_EINVAL,
                  "%s: %lld %s do not fit 32-bit indices", fn,
                  (long long)ninner, n.inner);
  if (st == GALLEY_OK)
    st = check_ptr(&n, nouter, ptr, err);
  if (st == GALLEY_OK)
    st = check_idx(&n, nouter, ninner, ptr, idx, err);
  if (st != GALLEY_OK)
    return st;
  if (!vals && at(ptr, nouter) > 0)
    return rt_error(err, GALLEY_EINVAL, "%s: vals is NULL but %s[%lld] = %lld",
                    fn, n.ptr, (long long)nouter, (long long)at(ptr, nouter));
  if (idx_null(idx))
    idx = ptr.n ? idx32(no_idx32) : idx64(no_idx);
  /* the library never writes the values of a borrowed tensor */
  return assemble(csc, nrows, ncols, ptr, idx,
                  (double *)(vals ? vals : no_vals), fill, 1, out, err);
}

galley_status galley_tensor_wrap_csr(int64_t nrows, int64_t ncols,
                                     const int64_t *rowptr,
                                     const int64_t *colidx,
                                     const double *vals, double fill,
                                     galley_tensor **out, galley_error *err) {
  return wrap("galley_tensor_wrap_csr", 0, nrows, ncols, idx64(rowptr),
              idx64(colidx), vals, fill, out, err);
}

galley_status galley_tensor_wrap_csc(int64_t nrows, int64_t ncols,
                                     const int64_t *colptr,
                                     const int64_t *rowidx,
                                     const double *vals, double fill,
                                     galley_tensor **out, galley_error *err) {
  return wrap("galley_tensor_wrap_csc", 1, nrows, ncols, idx64(colptr),
              idx64(rowidx), vals, fill, out, err);
}

galley_status galley_tensor_wrap_csr32(int64_t nrows, int64_t ncols,
                                       const int32_t *rowptr,
                                       const int32_t *colidx,
                                       const double *vals, double fill,
                                       galley_tensor **out,
                                       galley_error *err) {
  return wrap("galley_tensor_wrap_csr32", 0, nrows, ncols, idx32(rowptr),
              idx32(colidx), vals, fill, out, err);
}

galley_status galley_tensor_wrap_csc32(int64_t nrows, int64_t ncols,
                                       const int32_t *colptr,
                                       const int32_t *rowidx,
                                       const double *vals, double fill,
                                       galley_tensor **out,
                                       galley_error *err) {
  return wrap("galley_tensor_wrap_csc32", 1, nrows, ncols, idx32(colptr),
              idx32(rowidx), vals, fill, out, err);
}

/* n 32-bit indices copied (NULL: out of memory). */
static int32_t *copy_idx32(const int32_t *a, int64_t n) {
  int32_t *w = rt_malloc_array(n > 0 ? n : 1, sizeof *w);
  if (w && n > 0)
    memcpy(w, a, (size_t)n * sizeof *w);
  return w;
}

static galley_status copy32(const char *fn, int csc, int64_t nrows,
                            int64_t ncols, const int32_t *ptr32,
                            const int32_t *idx32_, const double *vals,
                            double fill, galley_tensor **out,
                            galley_error *err) {
  Names n = names_of(fn, csc);
  rt_error_clear(err);
  if (!out)
    return rt_error(err, GALLEY_EINVAL, "%s: out is NULL", fn);
  *out = NULL;
  int64_t nouter = csc ? ncols : nrows, ninner = csc ? nrows : ncols;
  galley_status st = check_dims(&n, nrows, ncols, err);
  if (st == GALLEY_OK && ninner > GALLEY_RT_IDX32_MAX_DIM)
    st = rt_error(err, GALLEY_EINVAL,
                  "%s: %lld %s do not fit 32-bit indices", fn,
                  (long long)ninner, n.inner);
  if (st == GALLEY_OK)
    st = check_ptr(&n, nouter, idx32(ptr32), err);
  if (st == GALLEY_OK)
    st = check_idx(&n, nouter, ninner, idx32(ptr32), idx32(idx32_), err);
  if (st != GALLEY_OK)
    return st;
  int64_t nnz = ptr32[nouter];
  int32_t *ptr = copy_idx32(ptr32, nouter + 1);
  int32_t *idx = idx32_ ? copy_idx32(idx32_, nnz) : copy_idx32(NULL, 0);
  double *val = rt_malloc_array(nnz > 0 ? nnz : 1, sizeof *val);
  if (!ptr || !idx || !val)
    st = rt_error(err, GALLEY_ENOMEM, "out of memory");
  if (st == GALLEY_OK) {
    for (int64_t k = 0; k < nnz; k++)
      val[k] = vals ? vals[k] : 1.0;
    st = assemble(csc, nrows, ncols, idx32(ptr), idx32(idx), val, fill, 0,
                  out, err);
  }
  if (st != GALLEY_OK) {
    free(ptr);
    free(idx);
    free(val);
  }
  return st;
}
galley_status galley_tensor_from_csr32(int64_t nrows, int64_t ncols,
                                       const int32_t *rowptr,
                                       const int32_t *colidx,
                                       const double *vals, double fill,
                                       galley_tensor **out,
                                       galley_error *err) {
  return copy32("galley_tensor_from_csr32", 0, nrows, ncols, rowptr, colidx,
                vals, fill, out, err);
}

galley_status galley_tensor_from_csc32(int64_t nrows, int64_t ncols,
                                       const int32_t *colptr,
                                       const int32_t *rowidx,
                                       const double *vals, double fill,
                                       galley_tensor **out,
                                       galley_error *err) {
  return copy32("galley_tensor_from_csc32", 1, nrows, ncols, colptr, rowidx,
                vals, fill, out, err);
}

/* ------------------------------------------------------------------ */
/* The sliced copy of a matrix (galley_rt_sliced)                      */
/* ------------------------------------------------------------------ */

/* Whether t has the levels a sliced copy is made of: a dense level 0
 * over one list level 1 whose coordinates fit 32 bits. */
int rt_sliced_fits(const galley_tensor *t) {
  return t->order == 2 && t->lvl[0].kind == GALLEY_RT_DENSE &&
         t->lvl[1].kind == GALLEY_RT_LIST &&
         t->lvl[1].dim <= GALLEY_RT_IDX32_MAX_DIM;
}

/* The slots (steps times GALLEY_RT_SLICE) a sliced copy of t holds:
 * every chunk padded to its longest row. */
int64_t rt_sliced_slots(const galley_tensor *t) {
  const galley_level *L = &t->lvl[1];
  int64_t nrows = t->lvl[0].dim, nchunk = nrows / GALLEY_RT_SLICE, steps = 0;
  for (int64_t c = 0; c < nchunk; c++) {
    int64_t w = 0;
    for (int r = 0; r < GALLEY_RT_SLICE; r++) {
      int64_t i = c * GALLEY_RT_SLICE + r;
      int64_t len = galley_rt_pos(L, i + 1) - galley_rt_pos(L, i);
      w = len > w ? len : w;
    }
    steps += w;
  }
  return steps * GALLEY_RT_SLICE;
}

/* Whether the n values and the fill are each a float exactly (bitwise
 * the same double after the round trip). */
static int exact_float(double v) {
  if (isfinite(v) && fabs(v) > FLT_MAX) return 0; /* no float: undefined */
  double back = (double)(float)v;
  return memcmp(&back, &v, sizeof back) == 0;
}

static int exact_floats(const double *v, int64_t n, double fill) {
  if (!exact_float(fill)) return 0;
  for (int64_t k = 0; k < n; k++)
    if (!exact_float(v[k])) return 0;
  return 1;
}

/* The sliced copy of t (rt_sliced_fits) with fill `fill` in its padding,
 * one allocation (free() it), its values floats when they are floats
 * exactly and the copy would take f32_min_bytes or more with doubles;
 * NULL when out of memory or when padding would more than triple the
 * stored entries (the layout would cost more than it saves; the kernel
 * then walks the list). */
galley_rt_sliced *rt_sliced_make(const galley_tensor *t, double fill,
                                 int64_t f32_min_bytes) {
  const galley_level *L = &t->lvl[1];
  int64_t nchunk = t->lvl[0].dim / GALLEY_RT_SLICE;
  int64_t slots = rt_sliced_slots(t);
  if (slots > 3 * L->nset + 64) return NULL;
  int64_t f64_bytes = slots * (int64_t)(sizeof(double) + sizeof(int32_t));
  int f32 = f64_bytes >= f32_min_bytes && exact_floats(t->val, L->nset, fill);
  size_t vbytes = f32 ? sizeof(float) : sizeof(double);
  size_t bytes = sizeof(galley_rt_sliced) + (size_t)(nchunk + 1) * sizeof(int64_t) +
                 (size_t)slots * (vbytes + sizeof(int32_t));
  galley_rt_sliced *s = malloc(bytes);
  if (!s) return NULL;
  int64_t *start = (int64_t *)(s + 1);
  double *val = f32 ? NULL : (double *)(start + nchunk + 1);
  float *val32 = f32 ? (float *)(start + nchunk + 1) : NULL;
  int32_t *crd = (int32_t *)((char *)(start + nchunk + 1) + (size_t)slots * vbytes);
  start[0] = 0;
  for (int64_t c = 0; c < nchunk; c++) {
    int64_t w = 0, i0 = c * GALLEY_RT_SLICE;
    for (int r = 0; r < GALLEY_RT_SLICE; r++) {
      int64_t len = galley_rt_pos(L, i0 + r + 1) - galley_rt_pos(L, i0 + r);
      w = len > w ? len : w;
    }
    for (int r = 0; r < GALLEY_RT_SLICE; r++) {
      int64_t p = galley_rt_pos(L, i0 + r), e = galley_rt_pos(L, i0 + r + 1);
      int32_t pad = e > p ? (int32_t)galley_rt_crd(L, e - 1) : 0;
      for (int64_t k = 0; k < w; k++) {
        int64_t q = (start[c] + k) * GALLEY_RT_SLICE + r;
        crd[q] = p + k < e ? (int32_t)galley_rt_crd(L, p + k) : pad;
        double v = p + k < e ? t->val[p + k] : fill;
        if (f32) val32[q] = (float)v;
        else val[q] = v;
      }
    }
    start[c + 1] = start[c] + w;
  }
  s->nchunk = nchunk;
  s->start = start;
  s->crd = crd;
  s->val = val;
  s->val32 = val32;
  return s;
}
