/*
 * csr.c -- matrices from compressed sparse row (CSR) and column (CSC)
 * arrays: wrapped without copying (the tensor borrows the caller's
 * arrays), or copied from 32-bit index arrays.
 *
 * CSR is exactly the runtime's default matrix format dense:0,list:1
 * (galley_rt.h): level 0 is dense over the rows (one parent, nrows
 * children), level 1 a sorted list whose fiber r is crd[pos[r] ..
 * pos[r+1]), and the values follow the list's positions.  CSC is
 * dense:1,list:0, the same with rows and columns swapped.  So wrapping is
 * checking the arrays and pointing the list level and the values at them;
 * the tensor is marked borrowed so that galley_tensor_free leaves them.
 */
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

/* ptr[0 .. nouter]: starts at 0 and never decreases. */
static galley_status check_ptr(const Names *n, int64_t nouter,
                               const int64_t *ptr, galley_error *err) {
  if (!ptr)
    return rt_error(err, GALLEY_EINVAL, "%s: %s is NULL", n->fn, n->ptr);
  if (ptr[0] != 0)
    return rt_error(err, GALLEY_EINVAL, "%s: %s[0] = %lld: it must be 0",
                    n->fn, n->ptr, (long long)ptr[0]);
  for (int64_t r = 0; r < nouter; r++)
    if (ptr[r + 1] < ptr[r])
      return rt_error(err, GALLEY_EINVAL,
                      "%s: %s[%lld] = %lld is less than %s[%lld] = %lld: "
                      "%s must not decrease",
                      n->fn, n->ptr, (long long)(r + 1),
                      (long long)ptr[r + 1], n->ptr, (long long)r,
                      (long long)ptr[r], n->ptr);
  return GALLEY_OK;
}

/* idx: in 0..ninner-1 and strictly increasing within each fiber of ptr
 * (already checked); NULL only when there are no entries. */
static galley_status check_idx(const Names *n, int64_t nouter, int64_t ninner,
                               const int64_t *ptr, const int64_t *idx,
                               galley_error *err) {
  if (!idx && ptr[nouter] > 0)
    return rt_error(err, GALLEY_EINVAL, "%s: %s is NULL but %s[%lld] = %lld",
                    n->fn, n->idx, n->ptr, (long long)nouter,
                    (long long)ptr[nouter]);
  for (int64_t r = 0; r < nouter; r++)
    for (int64_t k = ptr[r]; k < ptr[r + 1]; k++) {
      if (idx[k] < 0 || idx[k] >= ninner)
        return rt_error(err, GALLEY_EINVAL,
                        "%s: %s[%lld] = %lld (%s %lld) is out of range: "
                        "there are %lld %s",
                        n->fn, n->idx, (long long)k, (long long)idx[k],
                        n->fiber, (long long)r, (long long)ninner, n->inner);
      if (k > ptr[r] && idx[k] <= idx[k - 1])
        return rt_error(err, GALLEY_EINVAL,
                        "%s: %s[%lld] = %lld is not greater than %s[%lld] = "
                        "%lld (%s %lld): indices must increase strictly "
                        "within a %s",
                        n->fn, n->idx, (long long)k, (long long)idx[k],
                        n->idx, (long long)(k - 1), (long long)idx[k - 1],
                        n->fiber, (long long)r, n->fiber);
    }
  return GALLEY_OK;
}

/* A matrix over checked arrays: ptr has nouter+1 entries, idx and vals
 * ptr[nouter].  borrowed says whether the tensor frees them. */
static galley_status assemble(int csc, int64_t nrows, int64_t ncols,
                              int64_t *ptr, int64_t *idx, double *vals,
                              double fill, int borrowed, galley_tensor **out,
                              galley_error *err) {
  galley_tensor *t = calloc(1, sizeof *t);
  if (!t)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  int64_t nouter = csc ? ncols : nrows, ninner = csc ? nrows : ncols;
  int64_t nnz = ptr[nouter];
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
  L->pos = ptr;
  L->crd = idx;
  t->val = vals;
  t->nval = nnz;
  *out = t;
  return GALLEY_OK;
}

/* Never written: what an empty wrapped matrix points at when the caller
 * passed NULL arrays (every array of a tensor is non-NULL). */
static const int64_t no_idx[1];
static const double no_vals[1];

static galley_status wrap(const char *fn, int csc, int64_t nrows,
                          int64_t ncols, const int64_t *ptr,
                          const int64_t *idx, const double *vals, double fill,
                          galley_tensor **out, galley_error *err) {
  Names n = names_of(fn, csc);
  rt_error_clear(err);
  if (!out)
    return rt_error(err, GALLEY_EINVAL, "%s: out is NULL", fn);
  *out = NULL;
  int64_t nouter = csc ? ncols : nrows, ninner = csc ? nrows : ncols;
  galley_status st = check_dims(&n, nrows, ncols, err);
  if (st == GALLEY_OK)
    st = check_ptr(&n, nouter, ptr, err);
  if (st == GALLEY_OK)
    st = check_idx(&n, nouter, ninner, ptr, idx, err);
  if (st != GALLEY_OK)
    return st;
  if (!vals && ptr[nouter] > 0)
    return rt_error(err, GALLEY_EINVAL, "%s: vals is NULL but %s[%lld] = %lld",
                    fn, n.ptr, (long long)nouter, (long long)ptr[nouter]);
  /* the library never writes through a tensor's arrays after building
   * it, so dropping const here is safe */
  return assemble(csc, nrows, ncols, (int64_t *)ptr,
                  (int64_t *)(idx ? idx : no_idx),
                  (double *)(vals ? vals : no_vals), fill, 1, out, err);
}

galley_status galley_tensor_wrap_csr(int64_t nrows, int64_t ncols,
                                     const int64_t *rowptr,
                                     const int64_t *colidx,
                                     const double *vals, double fill,
                                     galley_tensor **out, galley_error *err) {
  return wrap("galley_tensor_wrap_csr", 0, nrows, ncols, rowptr, colidx, vals,
              fill, out, err);
}

galley_status galley_tensor_wrap_csc(int64_t nrows, int64_t ncols,
                                     const int64_t *colptr,
                                     const int64_t *rowidx,
                                     const double *vals, double fill,
                                     galley_tensor **out, galley_error *err) {
  return wrap("galley_tensor_wrap_csc", 1, nrows, ncols, colptr, rowidx, vals,
              fill, out, err);
}

/* Copy n 32-bit indices into a new int64 array (NULL: out of memory). */
static int64_t *widen(const int32_t *a, int64_t n) {
  int64_t *w = rt_malloc_array(n, sizeof *w);
  for (int64_t k = 0; w && k < n; k++)
    w[k] = a[k];
  return w;
}

static galley_status copy32(const char *fn, int csc, int64_t nrows,
                            int64_t ncols, const int32_t *ptr32,
                            const int32_t *idx32, const double *vals,
                            double fill, galley_tensor **out,
                            galley_error *err) {
  Names n = names_of(fn, csc);
  rt_error_clear(err);
  if (!out)
    return rt_error(err, GALLEY_EINVAL, "%s: out is NULL", fn);
  *out = NULL;
  int64_t nouter = csc ? ncols : nrows, ninner = csc ? nrows : ncols;
  galley_status st = check_dims(&n, nrows, ncols, err);
  if (st != GALLEY_OK)
    return st;
  if (!ptr32)
    return rt_error(err, GALLEY_EINVAL, "%s: %s is NULL", fn, n.ptr);
  int64_t *ptr = widen(ptr32, nouter + 1), *idx = NULL;
  double *val = NULL;
  if (!ptr)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  st = check_ptr(&n, nouter, ptr, err);
  int64_t nnz = st == GALLEY_OK ? ptr[nouter] : 0;
  if (st == GALLEY_OK && !idx32 && nnz > 0)
    st = rt_error(err, GALLEY_EINVAL, "%s: %s is NULL but %s[%lld] = %lld",
                  fn, n.idx, n.ptr, (long long)nouter, (long long)nnz);
  if (st == GALLEY_OK) {
    idx = idx32 ? widen(idx32, nnz) : rt_malloc_array(0, sizeof *idx);
    val = rt_malloc_array(nnz, sizeof *val);
    if (!idx || !val)
      st = rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  if (st == GALLEY_OK)
    st = check_idx(&n, nouter, ninner, ptr, idx, err);
  if (st == GALLEY_OK) {
    for (int64_t k = 0; k < nnz; k++)
      val[k] = vals ? vals[k] : 1.0;
    st = assemble(csc, nrows, ncols, ptr, idx, val, fill, 0, out, err);
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
