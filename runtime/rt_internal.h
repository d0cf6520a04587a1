/*
 * rt_internal.h -- helpers shared by the runtime's source files.  Not
 * installed, not part of the API.  Internal functions carry the rt_ prefix.
 */
#ifndef GALLEY_RT_INTERNAL_H
#define GALLEY_RT_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

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
galley_status rt_format_check(const galley_format *fmt, int order,
                              galley_error *err);

/* Build a tensor from the entries of coo (consumed: its arrays may be
 * reordered; the caller still frees it). */
galley_status rt_tensor_from_coo(rt_coo *coo, const galley_format *fmt,
                                 galley_tensor **out, galley_error *err);

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

/* ---- walking stored entries (iterate.c) ---- */

/* The stored entries as rows of level-order coordinates, in storage order,
 * optionally without those equal to the fill.  The caller frees *rows and
 * *vals. */
galley_status rt_tensor_rows(const galley_tensor *t, int skip_fill,
                             int64_t *n, int64_t **rows, double **vals,
                             galley_error *err);

/* Number of stored entries whose value differs from the fill. */
int64_t rt_tensor_count_nnz(const galley_tensor *t);

#endif /* GALLEY_RT_INTERNAL_H */
