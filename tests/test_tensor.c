/*
 * test_tensor.c -- unit tests of the fibertree tensor runtime: formats,
 * building from COO and dense arrays, lookup, iteration, export and
 * conversion between every pair of level kinds and mode orders.
 *
 * Expected results are computed naively here (quadratic de-duplication,
 * qsort, dense images), independently of the runtime's radix sort and
 * level builders.  Every random input comes from a fixed seed.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* Naive reference                                                     */
/* ------------------------------------------------------------------ */

/* A list of entries in logical coordinates. */
typedef struct ref {
  int order;
  int64_t dims[GALLEY_MAX_ORDER];
  double fill;
  int64_t n;    /* entries */
  int64_t *crd; /* n*order */
  double *val;  /* n */
} ref;

static int ref_order; /* mode order used by cmp_perm (qsort has no ud) */
static const int *ref_perm;

/* Lexicographic compare of two coordinate rows in the order ref_perm. */
static int cmp_perm(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  for (int l = 0; l < ref_order; l++) {
    int m = ref_perm[l];
    if (x[m] != y[m])
      return x[m] < y[m] ? -1 : 1;
  }
  return 0;
}

static int bits_equal(double a, double b) {
  return a == b || memcmp(&a, &b, sizeof a) == 0;
}

/* Random COO input: unsorted, with repeated coordinates, negative values
 * and values that may equal the fill; values are multiples of 0.5 so
 * every sum is exact. */
static ref random_input(test_rng *r, int order, const int64_t *dims,
                        int64_t n, double fill) {
  ref in = {.order = order, .fill = fill, .n = n};
  memcpy(in.dims, dims, (size_t)order * sizeof *dims);
  in.crd = malloc((size_t)(n * order + 1) * sizeof *in.crd);
  in.val = malloc((size_t)(n + 1) * sizeof *in.val);
  for (int64_t e = 0; e < n; e++) {
    int repeat = e > 0 && test_rng_below(r, 4) == 0;
    int64_t src = repeat ? test_rng_below(r, e) : 0;
    for (int k = 0; k < order; k++)
      in.crd[e * order + k] =
          repeat ? in.crd[src * order + k] : test_rng_below(r, dims[k]);
    in.val[e] = (double)(test_rng_below(r, 17) - 8) * 0.5;
  }
  return in;
}

/* The sorted, de-duplicated (summed in input order) form of in. */
static ref naive_sorted(const ref *in) {
  ref out = *in;
  int order = in->order;
  int64_t row = order + 1; /* coords, then the value's bits */
  int64_t *tmp = malloc((size_t)(in->n * row + 1) * sizeof *tmp);
  out.n = 0;
  for (int64_t e = 0; e < in->n; e++) {
    int64_t j = 0;
    for (; j < out.n; j++)
      if (memcmp(tmp + j * row, in->crd + e * order,
                 (size_t)order * sizeof *tmp) == 0)
        break;
    double v = in->val[e];
    if (j < out.n) {
      double old;
      memcpy(&old, tmp + j * row + order, sizeof old);
      v += old;
    } else {
      memcpy(tmp + j * row, in->crd + e * order, (size_t)order * sizeof *tmp);
      out.n++;
    }
    memcpy(tmp + j * row + order, &v, sizeof v);
  }
  int ident[GALLEY_MAX_ORDER] = {0, 1, 2, 3, 4, 5, 6, 7};
  ref_order = order;
  ref_perm = ident;
  qsort(tmp, (size_t)out.n, (size_t)row * sizeof *tmp, cmp_perm);
  out.crd = malloc((size_t)(out.n * order + 1) * sizeof *out.crd);
  out.val = malloc((size_t)(out.n + 1) * sizeof *out.val);
  for (int64_t j = 0; j < out.n; j++) {
    memcpy(out.crd + j * order, tmp + j * row, (size_t)order * sizeof *tmp);
    memcpy(out.val + j, tmp + j * row + order, sizeof(double));
  }
  free(tmp);
  return out;
}

/* ref without the entries equal to the fill. */
static ref without_fill(const ref *s) {
  ref out = *s;
  out.crd = malloc((size_t)(s->n * s->order + 1) * sizeof *out.crd);
  out.val = malloc((size_t)(s->n + 1) * sizeof *out.val);
  out.n = 0;
  for (int64_t j = 0; j < s->n; j++)
    if (!bits_equal(s->val[j], s->fill)) {
      memcpy(out.crd + out.n * s->order, s->crd + j * s->order,
             (size_t)s->order * sizeof *out.crd);
      out.val[out.n++] = s->val[j];
    }
  return out;
}

static void ref_free(ref *r) {
  free(r->crd);
  free(r->val);
}

static int64_t dims_product(int order, const int64_t *dims) {
  int64_t p = 1;
  for (int k = 0; k < order; k++)
    p *= dims[k];
  return p;
}

static int64_t linear_index(int order, const int64_t *dims, const int64_t *c) {
  int64_t j = 0;
  for (int k = 0; k < order; k++)
    j = j * dims[k] + c[k];
  return j;
}

/* ------------------------------------------------------------------ */
/* Checking one tensor against its reference                           */
/* ------------------------------------------------------------------ */

static int fmt_has_dense(const galley_format *f) {
  for (int l = 0; l < f->order; l++)
    if (f->kinds[l] == GALLEY_DENSE)
      return 1;
  return 0;
}

/* to_coo with SKIP_FILL gives exactly want (sorted, no fill values). */
static void check_coo_exact(const galley_tensor *t, unsigned flags,
                            const ref *want) {
  int64_t n = -1, *c = NULL;
  double *v = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_to_coo(t, flags, &n, &c, &v, &err),
                   GALLEY_OK);
  ck_assert_int_eq(n, want->n);
  if (n > 0) {
    ck_assert(memcmp(c, want->crd, (size_t)(n * want->order) * sizeof *c) ==
              0);
    for (int64_t j = 0; j < n; j++)
      ck_assert(bits_equal(v[j], want->val[j]));
  }
  free(c);
  free(v);
}

/* to_coo without flags: strictly sorted, a superset of the reference
 * whose extra entries hold the fill, as many as galley_tensor_stored. */
static void check_coo_all(const galley_tensor *t, const ref *s) {
  int64_t n = -1, *c = NULL, j = 0, order = s->order;
  double *v = NULL;
  galley_error err;
  int ident[GALLEY_MAX_ORDER] = {0, 1, 2, 3, 4, 5, 6, 7};
  ck_assert_int_eq(galley_tensor_to_coo(t, 0, &n, &c, &v, &err), GALLEY_OK);
  ck_assert_int_eq(n, galley_tensor_stored(t));
  ref_order = (int)order;
  ref_perm = ident;
  for (int64_t e = 0; e < n; e++) {
    if (e > 0)
      ck_assert_int_lt(cmp_perm(c + (e - 1) * order, c + e * order), 0);
    if (j < s->n && cmp_perm(c + e * order, s->crd + j * order) == 0)
      ck_assert(bits_equal(v[e], s->val[j++]));
    else
      ck_assert(bits_equal(v[e], s->fill));
  }
  ck_assert_int_eq(j, s->n); /* every reference entry was found */
  free(c);
  free(v);
}

/* foreach: visits entries in storage order and agrees with get. */
typedef struct visit {
  const galley_tensor *t;
  galley_format fmt;
  int64_t count;
  int64_t prev[GALLEY_MAX_ORDER];
} visit;

static int on_entry(void *ud, const int64_t *coord, double value) {
  visit *vs = ud;
  int order = vs->fmt.order, present = 0;
  if (vs->count > 0 && order > 0) {
    ref_order = order;
    ref_perm = vs->fmt.mode_order;
    ck_assert_int_lt(cmp_perm(vs->prev, coord), 0);
  }
  memcpy(vs->prev, coord, (size_t)order * sizeof *coord);
  ck_assert(bits_equal(galley_tensor_get(vs->t, coord, &present), value));
  ck_assert_int_eq(present, 1);
  vs->count++;
  return 0;
}

static int stop_at_two(void *ud, const int64_t *coord, double value) {
  (void)coord;
  (void)value;
  return ++*(int *)ud == 2 ? 7 : 0;
}

static void check_foreach(const galley_tensor *t) {
  visit vs = {.t = t};
  galley_tensor_format(t, &vs.fmt);
  ck_assert_int_eq(galley_tensor_foreach(t, on_entry, &vs), 0);
  ck_assert_int_eq(vs.count, galley_tensor_stored(t));
  int calls = 0;
  int r = galley_tensor_foreach(t, stop_at_two, &calls);
  ck_assert_int_eq(r, vs.count >= 2 ? 7 : 0);
}

/* get of every reference coordinate, of random coordinates and of
 * coordinates just out of range. */
static void check_get(const galley_tensor *t, const ref *s, test_rng *r) {
  int order = s->order, present;
  int sparse_only = 1;
  galley_format f;
  galley_tensor_format(t, &f);
  sparse_only = !fmt_has_dense(&f);
  for (int64_t j = 0; j < s->n; j++) {
    ck_assert(bits_equal(galley_tensor_get(t, s->crd + j * order, &present),
                         s->val[j]));
    ck_assert_int_eq(present, 1);
  }
  for (int trial = 0; trial < 8 && order > 0; trial++) {
    int64_t c[GALLEY_MAX_ORDER];
    for (int k = 0; k < order; k++)
      c[k] = test_rng_below(r, s->dims[k] > 0 ? s->dims[k] : 1);
    int64_t j = 0;
    while (j < s->n && memcmp(c, s->crd + j * order, order * sizeof *c))
      j++;
    if (j < s->n || dims_product(order, s->dims) == 0)
      continue;
    ck_assert(bits_equal(galley_tensor_get(t, c, &present), s->fill));
    if (sparse_only)
      ck_assert_int_eq(present, 0);
    int k = (int)test_rng_below(r, order);
    int64_t keep = c[k];
    c[k] = test_rng_below(r, 2) ? s->dims[k] : -1;
    ck_assert(bits_equal(galley_tensor_get(t, c, &present), s->fill));
    ck_assert_int_eq(present, 0);
    c[k] = keep;
  }
}

static void check_dense(const galley_tensor *t, const ref *s) {
  int64_t size = dims_product(s->order, s->dims);
  double *img = malloc((size_t)(size + 1) * sizeof *img);
  double *want = malloc((size_t)(size + 1) * sizeof *want);
  galley_error err;
  for (int64_t j = 0; j < size; j++)
    want[j] = s->fill;
  for (int64_t j = 0; j < s->n; j++)
    want[linear_index(s->order, s->dims, s->crd + j * s->order)] = s->val[j];
  ck_assert_int_eq(galley_tensor_to_dense(t, img, size, &err), GALLEY_OK);
  for (int64_t j = 0; j < size; j++)
    ck_assert(bits_equal(img[j], want[j]));
  ck_assert_int_eq(galley_tensor_to_dense(t, img, size + 1, &err),
                   GALLEY_EINVAL);
  free(img);
  free(want);
}

/* All read-side checks of t against s (sorted, de-duplicated reference
 * that may contain fill values, all of them stored). */
static void check_tensor(const galley_tensor *t, const ref *s, test_rng *r) {
  ref nf = without_fill(s);
  galley_format f;
  galley_tensor_format(t, &f);
  ck_assert_int_eq(galley_tensor_order(t), s->order);
  for (int k = 0; k < s->order; k++)
    ck_assert_int_eq(galley_tensor_dim(t, k), s->dims[k]);
  ck_assert(bits_equal(galley_tensor_fill(t), s->fill));
  check_coo_exact(t, GALLEY_EXPORT_SKIP_FILL, &nf);
  if (!fmt_has_dense(&f) && s->order > 0)
    check_coo_exact(t, 0, s);
  check_coo_all(t, s);
  ck_assert_int_eq(galley_tensor_nnz(t), nf.n);
  check_get(t, s, r);
  check_foreach(t);
  check_dense(t, s);
  ck_assert_int_gt(galley_tensor_bytes(t), 0);
  ref_free(&nf);
}

/* Convert t to f and check the result holds the non-fill entries of s,
 * no fill values in an all-sparse format; returns it. */
static galley_tensor *convert_checked(const galley_tensor *t,
                                      const galley_format *f, const ref *s,
                                      test_rng *r) {
  galley_tensor *u = NULL;
  galley_error err;
  galley_format def = galley_format_default(s->order);
  ck_assert_int_eq(galley_tensor_convert(t, f, &u, &err), GALLEY_OK);
  if (!f)
    f = &def;
  ref nf = without_fill(s);
  check_tensor(u, &nf, r);
  if (!fmt_has_dense(f) && s->order > 0)
    ck_assert_int_eq(galley_tensor_stored(u), nf.n);
  galley_format g;
  galley_tensor_format(u, &g);
  ck_assert(memcmp(&g, f, sizeof g) == 0);
  ref_free(&nf);
  return u;
}

/* ------------------------------------------------------------------ */
/* Format enumeration                                                  */
/* ------------------------------------------------------------------ */

/* Format number `code` (base-4 digits are the kinds) with mode order
 * perm. */
static galley_format make_format(int order, int code, const int *perm) {
  galley_format f;
  memset(&f, 0, sizeof f);
  f.order = order;
  for (int l = 0; l < order; l++, code /= 4) {
    f.kinds[l] = (galley_level_kind)(code % 4);
    f.mode_order[l] = perm[l];
  }
  return f;
}

static void random_perm(test_rng *r, int order, int *perm) {
  for (int k = 0; k < order; k++)
    perm[k] = k;
  for (int k = order - 1; k > 0; k--) {
    int j = (int)test_rng_below(r, k + 1), t = perm[k];
    perm[k] = perm[j];
    perm[j] = t;
  }
}

/* The p-th permutation of 0..order-1 in lexicographic order (p below
 * order!), by the factorial number system. */
static void nth_perm(int order, int p, int *perm) {
  int left[GALLEY_MAX_ORDER];
  for (int k = 0; k < order; k++)
    left[k] = k;
  for (int k = 0; k < order; k++) {
    int fact = 1, n = order - k;
    for (int j = 2; j < n; j++)
      fact *= j;
    int j = p / fact;
    p %= fact;
    perm[k] = left[j];
    memmove(left + j, left + j + 1, (size_t)(n - j - 1) * sizeof *left);
  }
}

static const double test_fills[] = {0.0, 1.5, -INFINITY, INFINITY};

/* Random dims for a test of the given order, including 1s. */
static void random_dims(test_rng *r, int order, int64_t max, int64_t *dims) {
  for (int k = 0; k < order; k++)
    dims[k] = test_rng_below(r, 4) == 0 ? 1 : 1 + test_rng_below(r, max);
}

/* Build every format of `order` levels (with nperm random mode orders)
 * from random inputs; check each, and convert it to every format
 * (all_pairs) or to a few random targets and all mode orders. */
static void run_formats(int order, int kind_filter, uint64_t seed, int nperm,
                        int all_pairs) {
  test_rng r = test_rng_seed(seed);
  int ncode = 1;
  for (int l = 0; l < order; l++)
    ncode *= 4;
  for (int code = 0; code < ncode; code++) {
    if (kind_filter >= 0 && code % 4 != kind_filter && order > 0)
      continue; /* this suite: formats whose first level is one kind */
    for (int pi = 0; pi < nperm; pi++) {
      int perm[GALLEY_MAX_ORDER], perm2[GALLEY_MAX_ORDER];
      int64_t dims[GALLEY_MAX_ORDER];
      random_perm(&r, order, perm);
      random_dims(&r, order, order == 3 ? 5 : 9, dims);
      double fill = test_fills[test_rng_below(&r, 4)];
      int64_t n = test_rng_below(&r, 3 * dims_product(order, dims) / 2 + 2);
      ref in = random_input(&r, order, dims, n, fill);
      ref s = naive_sorted(&in);
      galley_format f = make_format(order, code, perm);
      galley_tensor *t = NULL;
      galley_error err;
      ck_assert_int_eq(galley_tensor_from_coo(order, dims, in.n, in.crd,
                                              in.val, fill, &f, &t, &err),
                       GALLEY_OK);
      check_tensor(t, &s, &r);
      if (all_pairs) {
        for (int c2 = 0; c2 < ncode; c2++)
          for (int p2 = 0; p2 < (order == 2 ? 2 : 1); p2++) {
            nth_perm(order, p2, perm2);
            galley_format g = make_format(order, c2, perm2);
            galley_tensor *u = convert_checked(t, &g, &s, &r);
            galley_tensor *back = convert_checked(u, &f, &s, &r);
            galley_tensor_free(back);
            galley_tensor_free(u);
          }
      } else {
        for (int p2 = 0; p2 < 6; p2++) {
          nth_perm(order, p2, perm2);
          galley_format g =
              make_format(order, (int)test_rng_below(&r, ncode), perm2);
          galley_tensor *u = convert_checked(t, &g, &s, &r);
          galley_tensor_free(u);
        }
      }
      galley_tensor_free(t);
      ref_free(&s);
      ref_free(&in);
    }
  }
}

/* One suite per level kind: formats whose outermost level is that kind
 * (order 1..3), which together cover all 4^k combinations. */
START_TEST(formats_order1) { run_formats(1, _i, 100 + _i, 4, 1); }
END_TEST
START_TEST(formats_order2) { run_formats(2, _i, 200 + _i, 3, 1); }
END_TEST
START_TEST(formats_order3) { run_formats(3, _i, 300 + _i, 3, 0); }
END_TEST

START_TEST(formats_order0) { run_formats(0, -1, 7, 6, 1); }
END_TEST

/* ------------------------------------------------------------------ */
/* Transposition and dense input                                       */
/* ------------------------------------------------------------------ */

static int collect(void *ud, const int64_t *coord, double value) {
  int64_t **p = ud;
  (*p)[0] = coord[0];
  (*p)[1] = coord[1];
  (*p)[2] = (int64_t)value;
  *p += 3;
  return 0;
}

/* CSR -> CSC walks the entries in column-major order: the naive transpose. */
START_TEST(transpose_matches_naive) {
  test_rng r = test_rng_seed(11);
  int64_t dims[2] = {37, 23};
  ref in = random_input(&r, 2, dims, 300, 0.0);
  for (int64_t e = 0; e < in.n; e++)
    in.val[e] = (double)(e + 1); /* distinct, to follow entries */
  ref s = naive_sorted(&in);
  galley_tensor *a = NULL, *b = NULL;
  galley_format csc;
  galley_error err;
  ck_assert_int_eq(galley_format_parse("dense:1,list:0", 2, &csc, &err),
                   GALLEY_OK);
  ck_assert_int_eq(
      galley_tensor_from_coo(2, dims, in.n, in.crd, in.val, 0, NULL, &a, &err),
      GALLEY_OK);
  ck_assert_int_eq(galley_tensor_convert(a, &csc, &b, &err), GALLEY_OK);
  /* naive transpose: swap, sort by (j, i) */
  int64_t *tr = malloc((size_t)s.n * 3 * sizeof *tr), *got = NULL, *cur;
  for (int64_t j = 0; j < s.n; j++) {
    tr[3 * j] = s.crd[2 * j];
    tr[3 * j + 1] = s.crd[2 * j + 1];
    tr[3 * j + 2] = (int64_t)s.val[j];
  }
  int colmajor[2] = {1, 0};
  ref_order = 2;
  ref_perm = colmajor;
  qsort(tr, (size_t)s.n, 3 * sizeof *tr, cmp_perm);
  got = cur = malloc((size_t)s.n * 3 * sizeof *got);
  galley_tensor_foreach(b, collect, &cur);
  ck_assert_int_eq((cur - got) / 3, s.n);
  ck_assert(memcmp(got, tr, (size_t)s.n * 3 * sizeof *tr) == 0);
  /* the level arrays of b are exactly the CSR of the transpose */
  ck_assert_int_eq(galley_tensor_stored(b), s.n);
  free(tr);
  free(got);
  galley_tensor_free(a);
  galley_tensor_free(b);
  ref_free(&s);
  ref_free(&in);
}
END_TEST

/* A scalar from its one value, dims NULL as for order 0 elsewhere (UBSan
 * caught a memcpy from NULL here). */
START_TEST(from_dense_scalar) {
  double v = 2.5;
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_dense(0, NULL, &v, 0, NULL, &t, &err),
                   GALLEY_OK);
  ck_assert(galley_tensor_get(t, NULL, NULL) == 2.5);
  galley_tensor_free(t);
}
END_TEST

START_TEST(from_dense_drops_fill) {
  int64_t dims[2] = {3, 4};
  double nan_fill = NAN;
  double v[12] = {0, 1, 0, 0, 2, 0, 0, 3, 0, 0, 0, -0.0};
  galley_tensor *t = NULL, *u = NULL;
  galley_error err;
  galley_format csr = galley_format_default(2);
  ck_assert_int_eq(galley_tensor_from_dense(2, dims, v, 0, &csr, &t, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_stored(t), 3);
  ck_assert_int_eq(galley_tensor_nnz(t), 3);
  double back[12];
  ck_assert_int_eq(galley_tensor_to_dense(t, back, 12, &err), GALLEY_OK);
  for (int j = 0; j < 11; j++)
    ck_assert(back[j] == v[j]);
  galley_tensor_free(t);
  /* a dense tensor converted to CSR stores only its nonzeros */
  galley_format dd = galley_format_dense(2);
  ck_assert_int_eq(galley_tensor_from_dense(2, dims, v, 0, &dd, &t, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_stored(t), 12);
  ck_assert_int_eq(galley_tensor_nnz(t), 3);
  ck_assert_int_eq(galley_tensor_convert(t, &csr, &u, &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_stored(u), 3);
  galley_tensor_free(t);
  galley_tensor_free(u);
  /* NaN fill: bitwise-equal NaNs are not stored */
  double w[12];
  for (int j = 0; j < 12; j++)
    w[j] = j % 5 ? nan_fill : (double)j;
  ck_assert_int_eq(
      galley_tensor_from_dense(2, dims, w, nan_fill, &csr, &t, &err),
      GALLEY_OK);
  ck_assert_int_eq(galley_tensor_stored(t), 3);
  ck_assert_int_eq(galley_tensor_nnz(t), 3);
  galley_tensor_free(t);
}
END_TEST

START_TEST(explicit_fill_entries_stay) {
  int64_t dims[2] = {2, 2}, c[6] = {0, 1, 1, 1, 0, 1};
  double v[3] = {1.0, 0.0, -1.0}; /* (0,1) sums to 0 */
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, 3, c, v, 0, NULL, &t, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_stored(t), 2);
  ck_assert_int_eq(galley_tensor_nnz(t), 0);
  int64_t n;
  int64_t *cc;
  double *vv;
  ck_assert_int_eq(galley_tensor_to_coo(t, GALLEY_EXPORT_SKIP_FILL, &n, &cc,
                                        &vv, &err),
                   GALLEY_OK);
  ck_assert_int_eq(n, 0);
  free(cc);
  free(vv);
  /* a pattern (vals NULL) counts duplicates */
  galley_tensor_free(t);
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, 3, c, NULL, 0, NULL, &t,
                                          &err),
                   GALLEY_OK);
  int64_t at[2] = {0, 1};
  ck_assert(galley_tensor_get(t, at, NULL) == 2.0);
  galley_tensor_free(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Transposition fast paths                                            */
/* ------------------------------------------------------------------ */

/* Entries of t in storage order, as (logical coords, value) rows. */
typedef struct walk_rows {
  int order;
  int64_t n;
  int64_t *crd;
  double *val;
} walk_rows;

static int walk_collect(void *ud, const int64_t *coord, double value) {
  walk_rows *w = ud;
  memcpy(w->crd + w->n * w->order, coord, (size_t)w->order * sizeof *coord);
  w->val[w->n++] = value;
  return 0;
}

/* u (converted to format g) holds exactly the non-fill entries of s
 * (sorted reference), in storage order: the naive transpose, i.e. nf
 * sorted by g's mode order with qsort; sparse-last formats whose upper
 * levels are dense store nothing else. */
static void check_naive_transpose(const galley_tensor *u,
                                  const galley_format *g, const ref *s) {
  ref nf = without_fill(s);
  int order = s->order, row = order + 1;
  int64_t *tr = malloc((size_t)(nf.n * row + 1) * sizeof *tr);
  for (int64_t j = 0; j < nf.n; j++) {
    memcpy(tr + j * row, nf.crd + j * order, (size_t)order * sizeof *tr);
    memcpy(tr + j * row + order, &nf.val[j], sizeof(double));
  }
  ref_order = order;
  ref_perm = g->mode_order;
  qsort(tr, (size_t)nf.n, (size_t)row * sizeof *tr, cmp_perm);
  int64_t stored = galley_tensor_stored(u);
  walk_rows w = {order, 0, malloc((size_t)(stored * order + 1) * 8),
                 malloc((size_t)(stored + 1) * 8)};
  galley_tensor_foreach(u, walk_collect, &w);
  int64_t j = 0;
  for (int64_t e = 0; e < w.n; e++) {
    if (j < nf.n &&
        memcmp(w.crd + e * order, tr + j * row, (size_t)order * 8) == 0) {
      double v;
      memcpy(&v, tr + j * row + order, sizeof v);
      ck_assert(bits_equal(w.val[e], v));
      j++;
    } else {
      ck_assert(bits_equal(w.val[e], s->fill)); /* only dense levels */
    }
  }
  ck_assert_int_eq(j, nf.n);
  int upper_dense = 1;
  for (int l = 0; l + 1 < order; l++)
    upper_dense &= g->kinds[l] == GALLEY_DENSE;
  if (order > 0 && upper_dense && g->kinds[order - 1] != GALLEY_DENSE)
    ck_assert_int_eq(stored, nf.n); /* fill values were dropped */
  free(w.crd);
  free(w.val);
  free(tr);
  ref_free(&nf);
}

/* Random tensors of order 2..4 in random formats (with explicitly stored
 * fill values, empty fibers and dims of 1), transposed to every mode
 * order and to formats that take each conversion path: dense above a
 * last level of each kind (the counting transpose), random kinds (the
 * counting sort of rows), the same order (the walk), and back. */
START_TEST(transpose_random) {
  int order = _i;
  test_rng r = test_rng_seed(500 + (uint64_t)order);
  int nperm = 1;
  for (int k = 2; k <= order; k++)
    nperm *= k;
  for (int trial = 0; trial < (order == 4 ? 3 : 6); trial++) {
    int perm[GALLEY_MAX_ORDER], perm2[GALLEY_MAX_ORDER];
    int64_t dims[GALLEY_MAX_ORDER];
    random_perm(&r, order, perm);
    random_dims(&r, order, order == 2 ? 12 : order == 3 ? 6 : 4, dims);
    double fill = test_fills[trial % 4];
    int64_t n = test_rng_below(&r, dims_product(order, dims) / 2 + 2);
    ref in = random_input(&r, order, dims, n, fill);
    for (int64_t e = 0; e < in.n; e++) { /* leave some fibers empty */
      in.crd[e * order] -= in.crd[e * order] % 2;
      if (test_rng_below(&r, 5) == 0)
        in.val[e] = fill; /* stored explicitly: a fill value */
    }
    ref s = naive_sorted(&in);
    int ncode = 1;
    for (int l = 0; l < order; l++)
      ncode *= 4;
    galley_format f = make_format(order, (int)test_rng_below(&r, ncode), perm);
    galley_tensor *t = NULL;
    galley_error err;
    ck_assert_int_eq(galley_tensor_from_coo(order, dims, in.n, in.crd, in.val,
                                            fill, &f, &t, &err),
                     GALLEY_OK);
    for (int p2 = 0; p2 < nperm; p2++) {
      nth_perm(order, p2, perm2);
      for (int variant = 0; variant < 6; variant++) {
        galley_format g = make_format(order, 0, perm2); /* all dense */
        if (variant < 4)
          g.kinds[order - 1] = (galley_level_kind)variant;
        else
          g = make_format(order, (int)test_rng_below(&r, ncode), perm2);
        galley_tensor *u = convert_checked(t, &g, &s, &r);
        check_naive_transpose(u, &g, &s);
        galley_tensor *back = convert_checked(u, &f, &s, &r);
        check_naive_transpose(back, &f, &s);
        galley_tensor_free(back);
        galley_tensor_free(u);
      }
    }
    galley_tensor_free(t);
    ref_free(&s);
    ref_free(&in);
  }
}
END_TEST

/* A CSR with explicit fill values, empty rows and columns, and a single
 * row or column, transposed to CSC and to the other kinds. */
START_TEST(transpose_fill_and_empty) {
  static const char *const targets[] = {
      "dense:1,list:0", "dense:1,hash:0", "dense:1,bytemap:0",
      "dense:1,dense:0", "list:1,list:0", "hash:1,list:0",
      "dense:0,hash:1", "list:0,list:1", "dense:0,bytemap:1"};
  static const int64_t shapes[][2] = {{5, 7}, {1, 9}, {9, 1}, {1, 1}};
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
    const int64_t *dims = shapes[sh];
    int64_t c[16];
    double v[8];
    int n = 0;
    for (int64_t i = 0; i < dims[0]; i += 2) /* even rows, odd columns */
      for (int64_t j = dims[1] > 1 ? 1 : 0; j < dims[1] && n < 8; j += 3) {
        c[2 * n] = i;
        c[2 * n + 1] = j;
        v[n] = n % 3 == 1 ? 0.0 : (double)(n + 1); /* some explicit zeros */
        n++;
      }
    ref in = {.order = 2, .fill = 0.0, .n = n};
    memcpy(in.dims, dims, sizeof in.dims[0] * 2);
    in.crd = malloc(sizeof c);
    in.val = malloc(sizeof v);
    memcpy(in.crd, c, sizeof c);
    memcpy(in.val, v, sizeof v);
    ref s = naive_sorted(&in);
    galley_tensor *t = NULL;
    galley_error err;
    test_rng r = test_rng_seed(77);
    ck_assert_int_eq(galley_tensor_from_coo(2, dims, n, c, v, 0.0, NULL, &t,
                                            &err),
                     GALLEY_OK);
    ck_assert_int_eq(galley_tensor_stored(t), n); /* zeros stored */
    for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
      galley_format g;
      ck_assert_int_eq(galley_format_parse(targets[k], 2, &g, &err),
                       GALLEY_OK);
      galley_tensor *u = convert_checked(t, &g, &s, &r);
      check_naive_transpose(u, &g, &s);
      galley_tensor_free(u);
    }
    galley_tensor_free(t);
    ref_free(&s);
    ref_free(&in);
  }
}
END_TEST

/* Unsorted input with wide coordinates (several radix passes) and with
 * duplicates, in every mode order: against the naive sort. */
START_TEST(build_radix_passes) {
  test_rng r = test_rng_seed(91);
  int64_t dims[3] = {3000, 70001, 5};
  ref in = random_input(&r, 3, dims, 1500, 0.0);
  ref s = naive_sorted(&in);
  ref nf = without_fill(&s);
  for (int p = 0; p < 6; p++) {
    int perm[3];
    nth_perm(3, p, perm);
    galley_format f = make_format(3, 1 + 4 * (p % 2) + 16 * 2, perm);
    galley_tensor *t = NULL;
    galley_error err;
    ck_assert_int_eq(galley_tensor_from_coo(3, dims, in.n, in.crd, in.val, 0,
                                            &f, &t, &err),
                     GALLEY_OK);
    check_coo_exact(t, 0, &s);
    check_coo_exact(t, GALLEY_EXPORT_SKIP_FILL, &nf);
    check_foreach(t);
    galley_tensor_free(t);
  }
  ref_free(&nf);
  ref_free(&s);
  ref_free(&in);
  /* two radix passes (12 + 7 key bits), so the sort ends where it began */
  int64_t d2[2] = {3000, 70};
  in = random_input(&r, 2, d2, 700, 0.0);
  s = naive_sorted(&in);
  for (int p = 0; p < 2; p++) {
    int perm[2] = {p, 1 - p};
    galley_format f = make_format(2, 5 + 4 * p, perm); /* list,list|hash */
    galley_tensor *t = NULL;
    ck_assert_int_eq(galley_tensor_from_coo(2, d2, in.n, in.crd, in.val, 0,
                                            &f, &t, NULL),
                     GALLEY_OK);
    check_coo_exact(t, 0, &s);
    galley_tensor_free(t);
  }
  ref_free(&s);
  ref_free(&in);
}
END_TEST

/* Reading hands the coordinate list over to the builder, which sorts in
 * it: unsorted files of order 1 and 3, with duplicates, in several
 * formats. */
START_TEST(read_unsorted_tns) {
  static const char *const texts[] = {
      "# dims: 9\n7 1.5\n2 -1\n9 4\n2 3\n1 0.5\n7 -1.5\n",
      "# dims: 3 4 2\n3 4 2 1\n1 1 1 2\n3 1 2 3\n1 1 1 -2\n2 4 1 5\n"
      "1 2 2 6\n3 4 1 7\n",
      /* wider keys: two radix passes */
      "# dims: 3000\n2999 1\n17 2\n1500 3\n17 4\n1 5\n",
      "# dims: 3000 70\n2999 5 1\n1 69 2\n1500 5 3\n1 1 4\n1 69 5\n"};
  static const char *const formats[4][3] = {
      {"list", "hash", "dense"},
      {"dense:0,list:1,list:2", "list:2,hash:0,list:1",
       "dense:1,dense:2,bytemap:0"},
      {"list", "hash", "bytemap"},
      {"dense:0,list:1", "list:1,list:0", "dense:0,hash:1"}};
  static const int orders[4] = {1, 3, 1, 2};
  const char *base = getenv("TMPDIR");
  for (int k = 0; k < 4; k++) {
    char path[512];
    snprintf(path, sizeof path, "%s/galley_tt_XXXXXX", base ? base : "/tmp");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(texts[k], f);
    fclose(f);
    int order = orders[k];
    for (int j = 0; j < 3; j++) {
      galley_format fmt;
      galley_error err;
      galley_tensor *t = NULL;
      ck_assert_int_eq(galley_format_parse(formats[k][j], order, &fmt, &err),
                       GALLEY_OK);
      ck_assert_int_eq(galley_tensor_read(path, GALLEY_FILE_TNS, &fmt, &t,
                                          &err),
                       GALLEY_OK);
      if (k == 0) {
        int64_t at[1] = {1};
        ck_assert(galley_tensor_get(t, at, NULL) == 2.0); /* -1 + 3 */
        at[0] = 6;
        ck_assert(galley_tensor_get(t, at, NULL) == 0.0); /* 1.5 - 1.5 */
        ck_assert_int_eq(galley_tensor_nnz(t), 3);
      } else if (k == 2) {
        int64_t at[1] = {16};
        ck_assert(galley_tensor_get(t, at, NULL) == 6.0); /* 2 + 4 */
        at[0] = 2998;
        ck_assert(galley_tensor_get(t, at, NULL) == 1.0);
        ck_assert_int_eq(galley_tensor_nnz(t), 4);
      } else if (k == 3) {
        int64_t at[2] = {0, 68};
        ck_assert(galley_tensor_get(t, at, NULL) == 7.0); /* 2 + 5 */
        at[0] = 2998;
        at[1] = 4;
        ck_assert(galley_tensor_get(t, at, NULL) == 1.0);
        ck_assert_int_eq(galley_tensor_nnz(t), 4);
        visit vs = {.t = t};
        galley_tensor_format(t, &vs.fmt);
        ck_assert_int_eq(galley_tensor_foreach(t, on_entry, &vs), 0);
      } else {
        int64_t at[3] = {0, 0, 0};
        ck_assert(galley_tensor_get(t, at, NULL) == 0.0); /* 2 - 2 */
        at[0] = 2;
        at[1] = 3;
        at[2] = 1;
        ck_assert(galley_tensor_get(t, at, NULL) == 1.0);
        at[2] = 0;
        ck_assert(galley_tensor_get(t, at, NULL) == 7.0);
        ck_assert_int_eq(galley_tensor_nnz(t), 5);
        visit vs = {.t = t};
        galley_tensor_format(t, &vs.fmt);
        ck_assert_int_eq(galley_tensor_foreach(t, on_entry, &vs), 0);
      }
      galley_tensor_free(t);
    }
    remove(path);
  }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Edge cases                                                          */
/* ------------------------------------------------------------------ */

START_TEST(scalar) {
  double v[3] = {1.5, 2.0, -0.5};
  galley_tensor *t = NULL, *u = NULL;
  galley_error err;
  int present = 0;
  ck_assert_int_eq(galley_tensor_from_coo(0, NULL, 3, NULL, v, 0, NULL, &t,
                                          &err),
                   GALLEY_OK);
  ck_assert(galley_tensor_get(t, NULL, &present) == 3.0);
  ck_assert_int_eq(present, 1);
  ck_assert_int_eq(galley_tensor_stored(t), 1);
  ck_assert_int_eq(galley_tensor_nnz(t), 1);
  double d = 0;
  ck_assert_int_eq(galley_tensor_to_dense(t, &d, 1, &err), GALLEY_OK);
  ck_assert(d == 3.0);
  ck_assert_int_eq(galley_tensor_convert(t, NULL, &u, &err), GALLEY_OK);
  ck_assert(galley_tensor_get(u, NULL, NULL) == 3.0);
  galley_tensor_free(u);
  galley_tensor_free(t);
  ck_assert_int_eq(galley_tensor_from_coo(0, NULL, 0, NULL, NULL, 4.0, NULL,
                                          &t, &err),
                   GALLEY_OK);
  ck_assert(galley_tensor_get(t, NULL, NULL) == 4.0);
  ck_assert_int_eq(galley_tensor_nnz(t), 0);
  galley_tensor_free(t);
}
END_TEST

START_TEST(order8) {
  test_rng r = test_rng_seed(8);
  int64_t dims[8] = {2, 3, 1, 2, 3, 2, 2, 3};
  for (int trial = 0; trial < 6; trial++) {
    int perm[8];
    random_perm(&r, 8, perm);
    galley_format f = make_format(8, (int)test_rng_below(&r, 65536), perm);
    ref in = random_input(&r, 8, dims, 200, test_fills[trial % 4]);
    ref s = naive_sorted(&in);
    galley_tensor *t = NULL;
    galley_error err;
    ck_assert_int_eq(galley_tensor_from_coo(8, dims, in.n, in.crd, in.val,
                                            in.fill, &f, &t, &err),
                     GALLEY_OK);
    check_tensor(t, &s, &r);
    galley_tensor *u = convert_checked(t, NULL, &s, &r);
    galley_tensor_free(u);
    galley_tensor_free(t);
    ref_free(&s);
    ref_free(&in);
  }
}
END_TEST

START_TEST(empty_tensors) {
  int64_t dims[2] = {4, 3};
  int perm[2] = {1, 0};
  for (int code = 0; code < 16; code++) {
    galley_format f = make_format(2, code, perm);
    galley_tensor *t = NULL;
    galley_error err;
    ck_assert_int_eq(galley_tensor_from_coo(2, dims, 0, NULL, NULL, 0.5, &f,
                                            &t, &err),
                     GALLEY_OK);
    ck_assert_int_eq(galley_tensor_nnz(t), 0);
    int64_t n;
    int64_t *c;
    double *v;
    ck_assert_int_eq(galley_tensor_to_coo(t, GALLEY_EXPORT_SKIP_FILL, &n, &c,
                                          &v, &err),
                     GALLEY_OK);
    ck_assert_int_eq(n, 0);
    free(c);
    free(v);
    galley_tensor_free(t);
  }
  /* a zero-sized mode */
  int64_t zd[2] = {0, 5};
  galley_tensor *t = NULL;
  ck_assert_int_eq(
      galley_tensor_from_coo(2, zd, 0, NULL, NULL, 0, NULL, &t, NULL),
      GALLEY_OK);
  ck_assert_int_eq(galley_tensor_stored(t), 0);
  galley_tensor_free(t);
}
END_TEST

START_TEST(huge_sparse_dims) {
  int64_t big = (int64_t)1 << 40, dims[2] = {big, big};
  int64_t c[4] = {big - 1, big - 1, 5, 0};
  double v[2] = {2.0, 3.0};
  galley_format f;
  galley_error err;
  for (int k = 0; k < 3; k++) {
    const char *text[] = {"list,list", "hash,hash", "list:1,hash:0"};
    galley_tensor *t = NULL, *u = NULL;
    ck_assert_int_eq(galley_format_parse(text[k], 2, &f, &err), GALLEY_OK);
    ck_assert_int_eq(galley_tensor_from_coo(2, dims, 2, c, v, 0, &f, &t, &err),
                     GALLEY_OK);
    ck_assert(galley_tensor_get(t, c, NULL) == 2.0);
    ck_assert(galley_tensor_get(t, c + 2, NULL) == 3.0);
    int64_t n, *cc;
    double *vv;
    ck_assert_int_eq(galley_tensor_to_coo(t, 0, &n, &cc, &vv, &err),
                     GALLEY_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(cc[0], 5);
    ck_assert_int_eq(cc[2], big - 1);
    ck_assert_int_eq(cc[3], big - 1);
    free(cc);
    free(vv);
    ck_assert_int_eq(galley_tensor_convert(t, &f, &u, &err), GALLEY_OK);
    ck_assert_int_eq(galley_tensor_nnz(u), 2);
    galley_tensor_free(u);
    galley_tensor_free(t);
  }
  /* one list level of dim 2^40 */
  galley_tensor *t = NULL;
  int64_t d1 = big, c1 = big - 1;
  ck_assert_int_eq(galley_tensor_from_coo(1, &d1, 1, &c1, v, 0, NULL, &t,
                                          &err),
                   GALLEY_OK);
  ck_assert(galley_tensor_get(t, &c1, NULL) == 2.0);
  galley_tensor_free(t);
}
END_TEST

/* Dims whose bits do not fit one 64-bit key: the multi-key radix sort,
 * checked against the naive sort in several mode orders. */
START_TEST(wide_keys_sort) {
  test_rng r = test_rng_seed(40);
  int64_t dims[3] = {(int64_t)1 << 40, 5, (int64_t)1 << 35};
  int64_t pool[3][4];
  for (int k = 0; k < 3; k++)
    for (int j = 0; j < 4; j++)
      pool[k][j] = test_rng_below(&r, dims[k]);
  ref in = random_input(&r, 3, dims, 400, 0.0);
  for (int64_t e = 0; e < in.n; e++) /* few distinct values per mode */
    for (int k = 0; k < 3; k++)
      in.crd[e * 3 + k] = pool[k][in.crd[e * 3 + k] % 4];
  ref s = naive_sorted(&in);
  ref nf = without_fill(&s);
  for (int p = 0; p < 6; p++) {
    int perm[3];
    nth_perm(3, p, perm);
    galley_format f = make_format(3, (int)test_rng_below(&r, 64), perm);
    for (int l = 0; l < 3; l++)
      if (f.kinds[l] != GALLEY_HASH)
        f.kinds[l] = GALLEY_LIST; /* no dense/bytemap of 2^40 */
    galley_tensor *t = NULL, *u = NULL;
    galley_error err;
    ck_assert_int_eq(galley_tensor_from_coo(3, dims, in.n, in.crd, in.val, 0,
                                            &f, &t, &err),
                     GALLEY_OK);
    check_coo_exact(t, 0, &s);
    check_coo_exact(t, GALLEY_EXPORT_SKIP_FILL, &nf);
    check_foreach(t);
    nth_perm(3, 5 - p, perm);
    galley_format g = make_format(3, 25, perm); /* list, hash, list */
    ck_assert_int_eq(galley_tensor_convert(t, &g, &u, &err), GALLEY_OK);
    check_coo_exact(u, 0, &nf);
    check_foreach(u);
    galley_tensor_free(u);
    galley_tensor_free(t);
  }
  ref_free(&nf);
  ref_free(&s);
  ref_free(&in);
}
END_TEST

START_TEST(overflow_refused) {
  int64_t big = (int64_t)1 << 40, dims[2] = {big, big};
  galley_format dd = galley_format_dense(2);
  galley_tensor *t = (galley_tensor *)&dims; /* must be reset to NULL */
  galley_error err;
  ck_assert_int_eq(
      galley_tensor_from_coo(2, dims, 0, NULL, NULL, 0, &dd, &t, &err),
      GALLEY_EOVERFLOW);
  ck_assert_ptr_null(t);
  ck_assert_int_eq(err.status, GALLEY_EOVERFLOW);
  ck_assert_str_eq(err.msg, "level 1 (dense, mode 1) would need "
                            "1208925819614629174706176 positions");
  galley_format bb;
  ck_assert_int_eq(galley_format_parse("b:1,b:0", 2, &bb, &err), GALLEY_OK);
  ck_assert_int_eq(
      galley_tensor_from_coo(2, dims, 0, NULL, NULL, 0, &bb, &t, &err),
      GALLEY_EOVERFLOW);
  ck_assert_str_eq(err.msg, "level 1 (bytemap, mode 0) would need "
                            "1208925819614629174706176 positions");
}
END_TEST

START_TEST(bad_coordinates) {
  int64_t dims[2] = {4, 5}, c[6] = {0, 0, 3, 4, 1, 5};
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, 3, c, NULL, 0, NULL, &t,
                                          &err),
                   GALLEY_EINVAL);
  ck_assert_ptr_null(t);
  ck_assert_str_eq(err.msg,
                   "entry 2: coordinate 5 is out of range for mode 1 of size 5");
  c[4] = -1;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, 3, c, NULL, 0, NULL, &t,
                                          &err),
                   GALLEY_EINVAL);
  ck_assert_str_eq(
      err.msg, "entry 2: coordinate -1 is out of range for mode 0 of size 4");
  int64_t neg[2] = {4, -1};
  ck_assert_int_eq(galley_tensor_from_coo(2, neg, 0, NULL, NULL, 0, NULL, &t,
                                          &err),
                   GALLEY_EINVAL);
  ck_assert_str_eq(err.msg, "mode 1 has negative size -1");
  ck_assert_int_eq(galley_tensor_from_coo(9, dims, 0, NULL, NULL, 0, NULL, &t,
                                          &err),
                   GALLEY_EINVAL);
  ck_assert_str_eq(err.msg, "order 9 is not in 0..8");
  galley_format f = galley_format_default(2);
  f.mode_order[1] = 0;
  ck_assert_int_eq(
      galley_tensor_from_coo(2, dims, 0, NULL, NULL, 0, &f, &t, NULL),
      GALLEY_EINVAL);
  /* errors need no galley_error */
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, 3, c, NULL, 0, NULL, &t,
                                          NULL),
                   GALLEY_EINVAL);
}
END_TEST

START_TEST(format_text) {
  galley_format f;
  galley_error err;
  char buf[128];
  ck_assert_int_eq(galley_format_parse("dense:1,list:0", 2, &f, &err),
                   GALLEY_OK);
  ck_assert_int_eq(f.mode_order[0], 1);
  ck_assert_int_eq(f.kinds[1], GALLEY_LIST);
  galley_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "dense:1,list:0");
  ck_assert_int_eq(galley_format_parse("d,s,h,b", 4, &f, &err), GALLEY_OK);
  galley_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "dense:0,list:1,hash:2,bytemap:3");
  ck_assert_int_eq(galley_format_parse("sparse", 1, &f, &err), GALLEY_OK);
  ck_assert_int_eq(galley_format_parse("", 0, &f, &err), GALLEY_OK);
  galley_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "");
  static const struct {
    const char *text;
    int order;
    const char *msg;
  } bad[] = {
      {"dense,foo", 2, "unknown level kind 'foo' in format"},
      {"dense", 2, "format 'dense' has 1 levels but the tensor has order 2"},
      {"d:0,d:0", 2, "mode 0 is stored by more than one level"},
      {"d:2,s:0", 2, "level 0 stores mode 2, not in 0..1"},
      {"d:x,s:0", 2, "bad mode in format token 'd:x'"},
      {"d:,s:0", 2, "missing mode after ':' in 'd:'"},
      {"d:1,s", 2, "format 'd:1,s' gives modes for some levels but not all"},
      {"d,", 2, "format 'd,' ends with ','"},
      {"d,,s", 3, "unknown level kind '' in format"},
      {"d", 9, "order 9 is not in 0..8"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    ck_assert_int_eq(galley_format_parse(bad[k].text, bad[k].order, &f, &err),
                     GALLEY_EINVAL);
    ck_assert_int_eq(err.status, GALLEY_EINVAL);
    ck_assert_str_eq(err.msg, bad[k].msg);
  }
  galley_format_print(&f, buf, 4); /* truncation stays terminated */
  ck_assert_uint_lt(strlen(buf), 4);
}
END_TEST

START_TEST(formats_and_caps) {
  galley_format f = galley_format_default(2);
  ck_assert_int_eq(f.kinds[0], GALLEY_DENSE);
  ck_assert_int_eq(f.kinds[1], GALLEY_LIST);
  f = galley_format_default(1);
  ck_assert_int_eq(f.kinds[0], GALLEY_LIST);
  f = galley_format_default(3);
  ck_assert_int_eq(f.kinds[2], GALLEY_LIST);
  ck_assert_int_eq(f.mode_order[2], 2);
  f = galley_format_dense(3);
  ck_assert_int_eq(f.kinds[2], GALLEY_DENSE);
  ck_assert_str_eq(galley_level_kind_name(GALLEY_BYTEMAP), "bytemap");
  ck_assert_str_eq(galley_level_kind_name(GALLEY_HASH), "hash");
  ck_assert(galley_level_caps(GALLEY_LIST) & GALLEY_CAP_SEQ_APPEND);
  ck_assert(!(galley_level_caps(GALLEY_LIST) & GALLEY_CAP_RANDOM_LOOKUP));
  ck_assert(galley_level_caps(GALLEY_HASH) & GALLEY_CAP_RANDOM_INSERT);
  ck_assert(galley_level_caps(GALLEY_BYTEMAP) & GALLEY_CAP_RANDOM_LOOKUP);
  for (int k = 0; k < GALLEY_NUM_LEVEL_KINDS; k++)
    ck_assert(galley_level_caps((galley_level_kind)k) &
              GALLEY_CAP_ORDERED_ITER);
  ck_assert_ptr_null(galley_tensor_free(NULL));
}
END_TEST

START_TEST(describe_text) {
  int64_t dims[2] = {34, 34}, c[4] = {0, 1, 33, 2};
  galley_tensor *t = NULL;
  ck_assert_int_eq(
      galley_tensor_from_coo(2, dims, 2, c, NULL, 0, NULL, &t, NULL),
      GALLEY_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  galley_tensor_describe(t, f);
  fclose(f);
  ck_assert_str_eq(text, "order 2, dims 34 x 34, stored 2, nnz 2, fill 0\n"
                         "format dense:0,list:1 (level 0: dense mode 0; "
                         "level 1: list mode 1)\n"
                         "memory 1.4 KiB\n");
  free(text);
  galley_tensor_free(t);
}
END_TEST

/* The 4^k formats of one test: suites grouped by the outermost kind. */
static Suite *kind_suite(galley_level_kind kind) {
  static const char *const names[GALLEY_NUM_LEVEL_KINDS] = {
      "level-dense", "level-list", "level-hash", "level-bytemap"};
  Suite *s = suite_create(names[kind]); /* Check keeps the pointer */
  TCase *tc = tcase_create("formats");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, formats_order1, (int)kind, (int)kind + 1);
  tcase_add_loop_test(tc, formats_order2, (int)kind, (int)kind + 1);
  tcase_add_loop_test(tc, formats_order3, (int)kind, (int)kind + 1);
  suite_add_tcase(s, tc);
  return s;
}

static Suite *edge_suite(void) {
  Suite *s = suite_create("tensor-edges");
  TCase *tc = tcase_create("edges");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, formats_order0);
  tcase_add_test(tc, transpose_matches_naive);
  tcase_add_test(tc, from_dense_drops_fill);
  tcase_add_test(tc, from_dense_scalar);
  tcase_add_test(tc, explicit_fill_entries_stay);
  tcase_add_test(tc, scalar);
  tcase_add_test(tc, order8);
  tcase_add_test(tc, empty_tensors);
  tcase_add_test(tc, huge_sparse_dims);
  tcase_add_test(tc, wide_keys_sort);
  tcase_add_test(tc, overflow_refused);
  tcase_add_test(tc, bad_coordinates);
  tcase_add_test(tc, format_text);
  tcase_add_test(tc, formats_and_caps);
  tcase_add_test(tc, describe_text);
  tcase_add_loop_test(tc, transpose_random, 2, 5);
  tcase_add_test(tc, transpose_fill_and_empty);
  tcase_add_test(tc, build_radix_passes);
  tcase_add_test(tc, read_unsorted_tns);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(edge_suite());
  for (int k = 0; k < GALLEY_NUM_LEVEL_KINDS; k++)
    srunner_add_suite(sr, kind_suite((galley_level_kind)k));
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
