/*
 * fuzz_build.c -- libFuzzer target for the tensor builder and converter.
 *
 * The input describes a small tensor: its order (0-3), dims (1-8), fill,
 * two storage formats (level kinds and mode orders) and a list of entries
 * (coordinates reduced into range, small integer values, duplicates
 * allowed).  The tensor is built in the first format and converted to the
 * second; what must hold for any input: both agree with a dense sum of
 * the entries at every coordinate, report the same nnz, and iterate
 * their stored entries in the order of their levels.  Anything else (a
 * crash, a sanitizer report, a broken invariant) aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAXN = 8 * 8 * 8 };

/* A format for order from two bytes: kinds, then a permutation. */
static galley_format format_of(int order, uint8_t kinds, uint8_t perm) {
  galley_format f = galley_format_default(order);
  for (int l = 0; l < order; l++)
    f.kinds[l] = (galley_level_kind)((kinds >> (2 * l)) & 3);
  for (int l = order - 1; l > 0; l--) { /* Fisher-Yates by the byte */
    int j = perm % (l + 1);
    perm /= (uint8_t)(l + 1);
    int t = f.mode_order[l];
    f.mode_order[l] = f.mode_order[j];
    f.mode_order[j] = t;
  }
  return f;
}

/* Linear index of coordinate c (row-major over logical modes). */
static int64_t linear(int order, const int64_t *dims, const int64_t *c) {
  int64_t p = 0;
  for (int k = 0; k < order; k++)
    p = p * dims[k] + c[k];
  return p;
}

/* Every coordinate of t equals want[] (fill where nothing was added). */
static void check_values(const galley_tensor *t, int order,
                         const int64_t *dims, const double *want,
                         const unsigned char *set, double fill) {
  int64_t space = 1, c[3] = {0, 0, 0};
  for (int k = 0; k < order; k++)
    space *= dims[k];
  for (int64_t e = 0; e < space; e++) {
    int64_t rest = e;
    for (int k = order - 1; k >= 0; k--) {
      c[k] = rest % dims[k];
      rest /= dims[k];
    }
    double v = galley_tensor_get(t, c, NULL);
    double w = set[e] ? want[e] : fill;
    if (v != w)
      abort();
  }
}

typedef struct Walk {
  int order;
  int mode_order[3];
  int64_t last[3];
  int64_t n;
} Walk;

/* foreach callback: entries arrive in strictly increasing level order. */
static int in_order(void *ud, const int64_t *c, double v) {
  (void)v;
  Walk *w = ud;
  if (w->n > 0) {
    int l = 0;
    while (l < w->order && c[w->mode_order[l]] == w->last[l])
      l++;
    if (l == w->order || c[w->mode_order[l]] < w->last[l])
      abort();
  }
  for (int l = 0; l < w->order; l++)
    w->last[l] = c[w->mode_order[l]];
  w->n++;
  return 0;
}

static void check_walk(const galley_tensor *t, int order) {
  galley_format f;
  galley_tensor_format(t, &f);
  Walk w = {.order = order};
  for (int l = 0; l < order; l++)
    w.mode_order[l] = f.mode_order[l];
  if (galley_tensor_foreach(t, in_order, &w) != 0)
    abort();
  if (w.n != galley_tensor_stored(t))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8)
    return 0;
  int order = data[0] % 4;
  int64_t dims[3] = {1, 1, 1};
  for (int k = 0; k < order; k++)
    dims[k] = 1 + data[1 + k] % 8;
  double fill = (double)((int8_t)data[4] % 3); /* -2 .. 2 */
  galley_format f1 = format_of(order, data[5], data[6]);
  galley_format f2 = format_of(order, data[7], (uint8_t)(data[5] ^ data[6]));
  size_t width = (size_t)order + 1, nnz = (size - 8) / width;
  if (nnz > 256)
    nnz = 256;
  int64_t *coords = malloc((nnz * (size_t)order + 1) * sizeof *coords);
  double *vals = malloc((nnz + 1) * sizeof *vals);
  double want[MAXN] = {0};
  unsigned char set[MAXN] = {0};
  if (!coords || !vals)
    abort();
  for (size_t e = 0; e < nnz; e++) {
    const uint8_t *b = data + 8 + e * width;
    for (int k = 0; k < order; k++)
      coords[e * (size_t)order + (size_t)k] = b[k] % dims[k];
    vals[e] = (double)((int8_t)b[order]) / 4;
    int64_t p = linear(order, dims, coords + e * (size_t)order);
    want[p] = set[p] ? want[p] + vals[e] : vals[e];
    set[p] = 1;
  }
  galley_tensor *t = NULL, *u = NULL;
  galley_error err;
  if (galley_tensor_from_coo(order, dims, (int64_t)nnz, coords, vals, fill,
                             &f1, &t, &err) != GALLEY_OK)
    abort(); /* every input here is valid */
  /* a summed duplicate may equal the fill: it is then not stored */
  check_values(t, order, dims, want, set, fill);
  check_walk(t, order);
  if (galley_tensor_convert(t, &f2, &u, &err) != GALLEY_OK)
    abort();
  check_values(u, order, dims, want, set, fill);
  check_walk(u, order);
  if (galley_tensor_nnz(t) != galley_tensor_nnz(u))
    abort();
  galley_tensor_free(t);
  galley_tensor_free(u);
  free(coords);
  free(vals);
  return 0;
}
