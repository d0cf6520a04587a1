/*
 * test_stats.c -- galley_tensor_degree_stats: exact statistics of small
 * hand-made tensors, a randomized differential test against a naive
 * reference (orders 1..8, every level kind, random mode orders, non-zero
 * fills, huge dims), format independence, and karate.mtx.  And the
 * optimizer's rt_degree_stats (runtime/rt_stats.h): its one structural
 * pass equal to the reference on table-like tensors (keys, single-child
 * levels, dense roots) in every path, and its sampled figures within their
 * stated bounds: exact where marked, guaranteed bounds always, upper
 * bounds of the distinct counts in all but a rare case, deterministic.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "galley_rt.h"
#include "rt_internal.h" /* rt_tensor_set_widths */
#include "rt_stats.h"
#include "testutil.h"

/* ---- helpers ---- */

static galley_tensor *build(int order, const int64_t *dims, int64_t n,
                            const int64_t *coords, const double *vals,
                            double fill, const galley_format *fmt) {
  galley_tensor *t = NULL;
  galley_error err;
  galley_status st =
      galley_tensor_from_coo(order, dims, n, coords, vals, fill, fmt, &t, &err);
  ck_assert_msg(st == GALLEY_OK, "from_coo: %s", err.msg);
  return t;
}

static void stats_of(const galley_tensor *t, galley_degree_stats *s) {
  galley_error err;
  galley_status st = galley_tensor_degree_stats(t, s, &err);
  ck_assert_msg(st == GALLEY_OK, "degree_stats: %s", err.msg);
  ck_assert_int_eq(err.status, GALLEY_OK);
}

static galley_format parse(const char *text, int order) {
  galley_format f;
  galley_error err;
  ck_assert_msg(galley_format_parse(text, order, &f, &err) == GALLEY_OK,
                "format %s: %s", text, err.msg);
  return f;
}

/* Naive reference: for every subset S, group the entries by their
 * projection onto S in O(n^2). */
static void naive_stats(int order, const int64_t *dims, int64_t n,
                        const int64_t *c, galley_degree_stats *o) {
  memset(o, 0, sizeof *o);
  o->order = order;
  o->nnz = n;
  for (int m = 0; m < order; m++)
    o->dims[m] = dims[m];
  for (unsigned S = 0; S < (1u << order); S++) {
    int64_t d = 0, mx = 0;
    for (int64_t a = 0; a < n; a++) {
      int first = 1;
      int64_t cnt = 0;
      for (int64_t b = 0; b < n; b++) {
        int eq = 1;
        for (int m = 0; m < order && eq; m++)
          if ((S >> m & 1) && c[a * order + m] != c[b * order + m])
            eq = 0;
        if (eq) {
          if (b < a)
            first = 0;
          cnt++;
        }
      }
      d += first;
      if (cnt > mx)
        mx = cnt;
    }
    o->distinct[S] = d;
    o->max_degree[S] = mx;
  }
}

static void assert_same(const galley_degree_stats *a,
                        const galley_degree_stats *b, const char *what) {
  ck_assert_msg(a->order == b->order, "%s: order %d vs %d", what, a->order,
                b->order);
  ck_assert_msg(a->nnz == b->nnz, "%s: nnz %lld vs %lld", what,
                (long long)a->nnz, (long long)b->nnz);
  for (int m = 0; m < GALLEY_MAX_ORDER; m++)
    ck_assert_msg(a->dims[m] == b->dims[m], "%s: dims[%d]", what, m);
  for (int S = 0; S < (1 << GALLEY_MAX_ORDER); S++) {
    ck_assert_msg(a->distinct[S] == b->distinct[S],
                  "%s: distinct[%d] = %lld, expected %lld", what, S,
                  (long long)a->distinct[S], (long long)b->distinct[S]);
    ck_assert_msg(a->max_degree[S] == b->max_degree[S],
                  "%s: max_degree[%d] = %lld, expected %lld", what, S,
                  (long long)a->max_degree[S], (long long)b->max_degree[S]);
  }
}

/* Expected stats from a table of {mask, distinct, max_degree}. */
static void expect(galley_degree_stats *e, int order, const int64_t *dims,
                   int64_t nnz, const int64_t (*rows)[3], int nrows) {
  memset(e, 0, sizeof *e);
  e->order = order;
  e->nnz = nnz;
  for (int m = 0; m < order; m++)
    e->dims[m] = dims[m];
  for (int r = 0; r < nrows; r++) {
    e->distinct[rows[r][0]] = rows[r][1];
    e->max_degree[rows[r][0]] = rows[r][2];
  }
}

static const char *const matrix_formats[] = {
    "dense:0,list:1",    "dense:1,list:0",   "list:0,list:1",
    "list:1,list:0",     "dense:0,hash:1",   "hash:1,hash:0",
    "dense:0,bytemap:1", "bytemap:1,list:0", "dense:0,dense:1",
    "dense:1,dense:0"};
#define NUM_MATRIX_FORMATS                                                     \
  (int)(sizeof matrix_formats / sizeof matrix_formats[0])

/* ---- hand-made tensors ---- */

/* 3x3 with rows of 2, 0 and 1 entries: (0,0) (0,2) (2,1). */
START_TEST(matrix_3x3) {
  int64_t dims[2] = {3, 3};
  int64_t coords[] = {0, 2, 2, 1, 0, 0};
  double vals[] = {1.5, -2, 7};
  static const int64_t rows[][3] = {{0, 1, 3}, {1, 2, 2}, {2, 3, 1}, {3, 3, 1}};
  galley_degree_stats want;
  expect(&want, 2, dims, 3, rows, 4);
  for (int f = 0; f < NUM_MATRIX_FORMATS; f++) {
    galley_format fmt = parse(matrix_formats[f], 2);
    galley_tensor *t = build(2, dims, 3, coords, vals, 0.0, &fmt);
    galley_degree_stats got;
    stats_of(t, &got);
    assert_same(&got, &want, matrix_formats[f]);
    galley_tensor_free(t);
  }
}
END_TEST

/* Order 3, dims 3x2x2: (0,0,0) (0,0,1) (0,1,0) (1,1,1) (2,1,1). */
START_TEST(order3) {
  int64_t dims[3] = {3, 2, 2};
  int64_t coords[] = {2, 1, 1, 0, 1, 0, 1, 1, 1, 0, 0, 1, 0, 0, 0};
  static const int64_t rows[][3] = {{0, 1, 5}, {1, 3, 3}, {2, 2, 3}, {4, 2, 3},
                                    {3, 4, 2}, {5, 4, 2}, {6, 4, 2}, {7, 5, 1}};
  static const char *const fmts[] = {
      "dense:0,list:1,list:2",   "list:2,list:0,list:1",
      "hash:1,hash:2,hash:0",    "dense:2,bytemap:1,list:0",
      "dense:0,dense:1,dense:2", "list:1,dense:0,hash:2"};
  galley_degree_stats want;
  expect(&want, 3, dims, 5, rows, 8);
  for (int f = 0; f < 6; f++) {
    galley_format fmt = parse(fmts[f], 3);
    galley_tensor *t = build(3, dims, 5, coords, NULL, 0.0, &fmt);
    galley_degree_stats got;
    stats_of(t, &got);
    assert_same(&got, &want, fmts[f]);
    galley_tensor_free(t);
  }
}
END_TEST

/* Fill 2: stored entries equal to 2 do not count, zeros do. */
START_TEST(nonzero_fill) {
  int64_t dims[2] = {2, 3};
  /* row-major dense values; non-fill: (0,0)=0, (0,2)=5, (1,2)=0 */
  double dense[6] = {0, 2, 5, 2, 2, 0};
  static const int64_t rows[][3] = {{0, 1, 3}, {1, 2, 2}, {2, 2, 2}, {3, 3, 1}};
  galley_degree_stats want;
  expect(&want, 2, dims, 3, rows, 4);
  for (int f = 0; f < NUM_MATRIX_FORMATS; f++) {
    galley_format fmt = parse(matrix_formats[f], 2);
    galley_tensor *t = NULL;
    galley_error err;
    ck_assert_int_eq(
        galley_tensor_from_dense(2, dims, dense, 2.0, &fmt, &t, &err),
        GALLEY_OK);
    galley_degree_stats got;
    stats_of(t, &got);
    assert_same(&got, &want, matrix_formats[f]);
    galley_tensor_free(t);
  }
  /* The same through COO, with explicit entries equal to the fill. */
  int64_t coords[] = {0, 0, 0, 1, 0, 2, 1, 0, 1, 2};
  double vals[] = {0, 2, 5, 2, 0};
  for (int f = 0; f < NUM_MATRIX_FORMATS; f++) {
    galley_format fmt = parse(matrix_formats[f], 2);
    galley_tensor *t = build(2, dims, 5, coords, vals, 2.0, &fmt);
    galley_degree_stats got;
    stats_of(t, &got);
    assert_same(&got, &want, matrix_formats[f]);
    galley_tensor_free(t);
  }
}
END_TEST

/* A dense matrix with fill 0 stores every entry; zeros do not count. */
START_TEST(dense_zeros) {
  int64_t dims[2] = {3, 4};
  double dense[12] = {0, 0, 0, 0, 1, 0, 3, 0, 0, 0, 0, 4};
  static const int64_t rows[][3] = {{0, 1, 3}, {1, 2, 2}, {2, 3, 1}, {3, 3, 1}};
  galley_degree_stats want;
  expect(&want, 2, dims, 3, rows, 4);
  galley_format fmt = galley_format_dense(2);
  galley_tensor *t = NULL;
  ck_assert_int_eq(
      galley_tensor_from_dense(2, dims, dense, 0.0, &fmt, &t, NULL), GALLEY_OK);
  galley_degree_stats got;
  stats_of(t, &got);
  assert_same(&got, &want, "dense");
  galley_tensor_free(t);
}
END_TEST

START_TEST(scalars) {
  galley_degree_stats got, want;
  double v = 3.5;
  galley_tensor *t = build(0, NULL, 1, NULL, &v, 0.0, NULL);
  stats_of(t, &got);
  static const int64_t one[][3] = {{0, 1, 1}};
  expect(&want, 0, NULL, 1, one, 1);
  assert_same(&got, &want, "scalar 3.5");
  galley_tensor_free(t);

  /* Equal to the fill: nothing. */
  t = build(0, NULL, 1, NULL, &v, 3.5, NULL);
  stats_of(t, &got);
  expect(&want, 0, NULL, 0, NULL, 0);
  assert_same(&got, &want, "scalar equal to fill");
  galley_tensor_free(t);

  /* No entries: the value is the fill. */
  t = build(0, NULL, 0, NULL, NULL, 1.0, NULL);
  stats_of(t, &got);
  assert_same(&got, &want, "empty scalar");
  galley_tensor_free(t);
}
END_TEST

START_TEST(empty) {
  int64_t dims[3] = {3, 4, 5};
  galley_degree_stats want;
  expect(&want, 3, dims, 0, NULL, 0);
  static const char *const fmts[] = {NULL, "list:2,list:1,list:0",
                                     "dense:0,dense:1,dense:2",
                                     "hash:0,bytemap:1,hash:2"};
  for (int f = 0; f < 4; f++) {
    galley_format fmt;
    if (fmts[f])
      fmt = parse(fmts[f], 3);
    galley_tensor *t =
        build(3, dims, 0, NULL, NULL, 0.0, fmts[f] ? &fmt : NULL);
    galley_degree_stats got;
    stats_of(t, &got);
    assert_same(&got, &want, fmts[f] ? fmts[f] : "default");
    galley_tensor_free(t);
  }
  /* Zero-sized dimensions. */
  int64_t zdims[2] = {0, 7};
  galley_tensor *t = build(2, zdims, 0, NULL, NULL, 0.0, NULL);
  galley_degree_stats got;
  stats_of(t, &got);
  expect(&want, 2, zdims, 0, NULL, 0);
  assert_same(&got, &want, "0x7");
  galley_tensor_free(t);
}
END_TEST

START_TEST(bad_arguments) {
  galley_degree_stats s;
  galley_error err;
  ck_assert_int_eq(galley_tensor_degree_stats(NULL, &s, &err), GALLEY_EINVAL);
  ck_assert_int_eq(err.status, GALLEY_EINVAL);
  ck_assert(err.msg[0] != '\0');
  int64_t dims[1] = {4};
  galley_tensor *t = build(1, dims, 0, NULL, NULL, 0.0, NULL);
  ck_assert_int_eq(galley_tensor_degree_stats(t, NULL, NULL), GALLEY_EINVAL);
  galley_tensor_free(t);
}
END_TEST

/* ---- randomized differential test ---- */

/* A random format for order k: random mode order and level kinds; only
 * list levels when the dims are huge. */
static galley_format random_format(test_rng *r, int k, int huge) {
  galley_format f;
  f.order = k;
  for (int l = 0; l < k; l++)
    f.mode_order[l] = l;
  for (int l = k - 1; l > 0; l--) {
    int j = (int)test_rng_below(r, l + 1);
    int x = f.mode_order[l];
    f.mode_order[l] = f.mode_order[j];
    f.mode_order[j] = x;
  }
  for (int l = 0; l < k; l++)
    f.kinds[l] =
        huge ? GALLEY_LIST
             : (galley_level_kind)test_rng_below(r, GALLEY_NUM_LEVEL_KINDS);
  return f;
}

/* Random distinct coordinates with values, some equal to the fill; the
 * non-fill ones go to nf (n_nf entries). */
static int64_t random_entries(test_rng *r, int k, const int64_t *dims,
                              int64_t want, int64_t spread, int64_t *coords,
                              double *vals, double fill, int64_t *nf,
                              int64_t *n_nf) {
  int64_t n = 0;
  *n_nf = 0;
  for (int64_t e = 0; e < want; e++) {
    int64_t *c = coords + n * k;
    for (int m = 0; m < k; m++) {
      int64_t lim = dims[m] < spread ? dims[m] : spread;
      int64_t x = test_rng_below(r, lim);
      /* with huge dims, use both ends of the range */
      if (dims[m] > spread && test_rng_below(r, 2))
        x = dims[m] - 1 - x;
      c[m] = x;
    }
    int dup = 0;
    for (int64_t f = 0; f < n && !dup; f++)
      dup = memcmp(coords + f * k, c, (size_t)k * sizeof *c) == 0;
    if (dup)
      continue;
    double v =
        test_rng_below(r, 5) == 0 ? fill : (double)(1 + test_rng_below(r, 9));
    vals[n] = v;
    if (v != fill) {
      memcpy(nf + *n_nf * k, c, (size_t)k * sizeof *c);
      (*n_nf)++;
    }
    n++;
  }
  return n;
}

static void differential(int k, int rounds, uint64_t seed) {
  test_rng r = test_rng_seed(seed);
  int64_t maxn = 90;
  int64_t *coords = malloc((size_t)(maxn * k) * sizeof *coords);
  int64_t *nf = malloc((size_t)(maxn * k) * sizeof *nf);
  double *vals = malloc((size_t)maxn * sizeof *vals);
  ck_assert(coords && nf && vals);
  for (int round = 0; round < rounds; round++) {
    int huge = test_rng_below(&r, 4) == 0;
    int64_t dims[GALLEY_MAX_ORDER];
    for (int m = 0; m < k; m++) {
      if (huge) {
        /* a level holds at most 2^62 positions (parents * dim), so
         * only an outermost level may be close to 2^62 */
        static const int64_t big[] = {1, 5, (int64_t)1 << 40,
                                      ((int64_t)1 << 55) - 1};
        dims[m] = big[test_rng_below(&r, 4)];
      } else {
        dims[m] = 1 + test_rng_below(&r, k <= 3 ? 8 : 4);
      }
    }
    double fill = test_rng_below(&r, 2) ? 0.0 : 2.0;
    int64_t want = test_rng_below(&r, maxn + 1);
    int64_t spread = 2 + test_rng_below(&r, 6);
    int64_t n_nf;
    int64_t n;
    galley_degree_stats ref, got;
    int top = huge && test_rng_below(&r, 2); /* mode 0 outermost, ~2^62 */
    if (top)
      dims[0] = ((int64_t)1 << 62) - 1 - test_rng_below(&r, 3);
    n = random_entries(&r, k, dims, want, spread, coords, vals, fill, nf,
                       &n_nf);
    naive_stats(k, dims, n_nf, nf, &ref);
    for (int rep = 0; rep < 3; rep++) {
      galley_format fmt = random_format(&r, k, huge);
      if (top)
        for (int l = 0; l < k; l++)
          if (fmt.mode_order[l] == 0) {
            fmt.mode_order[l] = fmt.mode_order[0];
            fmt.mode_order[0] = 0;
          }
      galley_tensor *t = build(k, dims, n, coords, vals, fill, &fmt);
      stats_of(t, &got);
      char what[200], ftext[160];
      galley_format_print(&fmt, ftext, sizeof ftext);
      snprintf(what, sizeof what, "order %d round %d format %s", k, round,
               ftext);
      assert_same(&got, &ref, what);
      galley_tensor_free(t);
    }
  }
  free(coords);
  free(nf);
  free(vals);
}

START_TEST(random_order1) { differential(1, 60, 101); }
END_TEST
START_TEST(random_order2) { differential(2, 80, 202); }
END_TEST
START_TEST(random_order3) { differential(3, 80, 303); }
END_TEST
START_TEST(random_order4) { differential(4, 60, 404); }
END_TEST
START_TEST(random_order5) { differential(5, 40, 505); }
END_TEST
START_TEST(random_order8) { differential(8, 6, 808); }
END_TEST

/* ---- larger inputs: counting and radix paths, format independence ---- */

static int cmp_pair(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  for (int i = 0; i < 2; i++)
    if (x[i] != y[i])
      return x[i] < y[i] ? -1 : 1;
  return 0;
}

/* Row and column stats of a random matrix, checked by sorting pairs; dims
 * small (key space counted) and huge (key space sorted). */
static void big_matrix(int64_t nrows, int64_t ncols, int64_t n, uint64_t seed) {
  test_rng r = test_rng_seed(seed);
  int64_t dims[2] = {nrows, ncols};
  int64_t *c = malloc((size_t)n * 2 * sizeof *c);
  int64_t *s = malloc((size_t)n * 2 * sizeof *s);
  ck_assert(c && s);
  for (int64_t e = 0; e < n; e++) {
    /* skewed rows, so that the max degree is interesting */
    int64_t row = test_rng_below(&r, 4) == 0 ? test_rng_below(&r, 16)
                                             : test_rng_below(&r, nrows);
    c[2 * e] = row;
    c[2 * e + 1] = test_rng_below(&r, ncols);
  }
  /* reference: distinct pairs, then rows and columns */
  galley_degree_stats want;
  memset(&want, 0, sizeof want);
  want.order = 2;
  want.dims[0] = nrows;
  want.dims[1] = ncols;
  int64_t u = 0;
  memcpy(s, c, (size_t)n * 2 * sizeof *s);
  qsort(s, (size_t)n, 2 * sizeof *s, cmp_pair);
  for (int64_t e = 0; e < n; e++)
    if (e == 0 || cmp_pair(s + 2 * e, s + 2 * (e - 1)) != 0) {
      s[2 * u] = s[2 * e];
      s[2 * u + 1] = s[2 * e + 1];
      u++;
    }
  want.nnz = u;
  want.distinct[0] = 1;
  want.max_degree[0] = u;
  want.distinct[3] = u;
  want.max_degree[3] = 1;
  for (int mode = 0; mode < 2; mode++) {
    int64_t *keys = malloc((size_t)u * 2 * sizeof *keys);
    ck_assert(keys != NULL);
    for (int64_t e = 0; e < u; e++) {
      keys[2 * e] = s[2 * e + mode];
      keys[2 * e + 1] = 0;
    }
    qsort(keys, (size_t)u, 2 * sizeof *keys, cmp_pair);
    int64_t d = 0, mx = 0, run = 0;
    for (int64_t e = 0; e < u; e++) {
      if (e == 0 || keys[2 * e] != keys[2 * (e - 1)]) {
        d++;
        run = 0;
      }
      if (++run > mx)
        mx = run;
    }
    want.distinct[1 << mode] = d;
    want.max_degree[1 << mode] = mx;
    free(keys);
  }
  static const char *const fmts[] = {"list:0,list:1", "list:1,list:0",
                                     "hash:0,list:1"};
  /* huge columns: only rows outermost (a level holds < 2^62 positions) */
  int nf = ncols > ((int64_t)1 << 40)                                    ? 1
           : (double)nrows * (double)ncols <= (double)((int64_t)1 << 24) ? 3
                                                                         : 2;
  /* the default CSR only when the rows fit a dense level */
  for (int f = -1; f < nf; f++) {
    if (f < 0 && nrows > (int64_t)1 << 24)
      continue;
    galley_format fmt = f < 0 ? galley_format_default(2) : parse(fmts[f], 2);
    galley_tensor *t = build(2, dims, n, c, NULL, 0.0, &fmt);
    galley_degree_stats got;
    stats_of(t, &got);
    assert_same(&got, &want, f < 0 ? "default" : fmts[f]);
    galley_tensor_free(t);
  }
  free(c);
  free(s);
}

START_TEST(big_small_dims) { big_matrix(3000, 2000, 100000, 7); }
END_TEST
START_TEST(big_huge_dims) {
  big_matrix(((int64_t)1 << 62) - 1, ((int64_t)1 << 45) + 12345, 60000, 8);
}
END_TEST
START_TEST(big_tall) { big_matrix(200000, 50, 80000, 9); }
END_TEST
START_TEST(big_wide) { big_matrix(3000, 10000000, 100000, 10); }
END_TEST

/* ---- real data ---- */

START_TEST(karate) {
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/karate.mtx", test_data_dir());
  galley_tensor *t = NULL;
  galley_error err;
  galley_status st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err);
  ck_assert_msg(st == GALLEY_OK, "read %s: %s", path, err.msg);
  galley_degree_stats s;
  stats_of(t, &s);
  ck_assert_int_eq(s.order, 2);
  ck_assert_int_eq(s.dims[0], 34);
  ck_assert_int_eq(s.dims[1], 34);
  ck_assert_int_eq(s.nnz, 156);
  ck_assert_int_eq(s.distinct[1], 34);
  ck_assert_int_eq(s.max_degree[1], 17);
  /* symmetric: columns like rows */
  ck_assert_int_eq(s.distinct[2], 34);
  ck_assert_int_eq(s.max_degree[2], 17);
  ck_assert_int_eq(s.distinct[3], 156);
  ck_assert_int_eq(s.max_degree[3], 1);
  ck_assert_int_eq(s.distinct[0], 1);
  ck_assert_int_eq(s.max_degree[0], 156);

  /* the same in CSC and hash formats */
  static const char *const fmts[] = {"dense:1,list:0", "hash:0,hash:1"};
  for (int f = 0; f < 2; f++) {
    galley_format fmt = parse(fmts[f], 2);
    galley_tensor *u = NULL;
    ck_assert_int_eq(galley_tensor_convert(t, &fmt, &u, &err), GALLEY_OK);
    galley_degree_stats s2;
    stats_of(u, &s2);
    assert_same(&s2, &s, fmts[f]);
    galley_tensor_free(u);
  }
  galley_tensor_free(t);
}
END_TEST


/* ---- the optimizer's statistics: one pass, keys, samples ---- */

static int cmp_rows_k; /* row length for cmp_rows (qsort has no context) */

static int cmp_rows(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  for (int m = 0; m < cmp_rows_k; m++)
    if (x[m] != y[m])
      return x[m] < y[m] ? -1 : 1;
  return 0;
}

/* Reference by sorting: for every subset S, the n rows projected onto S
 * (other modes zeroed), sorted and grouped. */
static void sorted_stats(int k, const int64_t *dims, int64_t n,
                         const int64_t *c, galley_degree_stats *o) {
  memset(o, 0, sizeof *o);
  o->order = k;
  o->nnz = n;
  for (int m = 0; m < k; m++)
    o->dims[m] = dims[m];
  int64_t *p = malloc((size_t)(n * k + 1) * sizeof *p);
  ck_assert_ptr_nonnull(p);
  cmp_rows_k = k;
  for (unsigned S = 0; S < (1u << k) && n > 0; S++) {
    for (int64_t e = 0; e < n; e++)
      for (int m = 0; m < k; m++)
        p[e * k + m] = S >> m & 1 ? c[e * k + m] : 0;
    qsort(p, (size_t)n, (size_t)k * sizeof *p, cmp_rows);
    int64_t d = 0, mx = 0, run = 0;
    for (int64_t e = 0; e < n; e++) {
      if (e == 0 || cmp_rows(p + e * k, p + (e - 1) * k) != 0) {
        d++;
        run = 0;
      }
      if (++run > mx)
        mx = run;
    }
    o->distinct[S] = d;
    o->max_degree[S] = mx;
  }
  free(p);
}

/* What the sampled figures promise, against the reference; counts the
 * distinct figures below the truth (*under) among the sampled ones
 * (*open) and sums their ratios to the truth (*ratio). */
static void check_sampled(const galley_degree_stats *got,
                          const rt_degree_info *info,
                          const galley_degree_stats *ref, const char *what,
                          int *open, int *under, double *ratio) {
  ck_assert_msg(got->nnz == ref->nnz, "%s: nnz", what);
  for (unsigned S = 0; S < (1u << ref->order); S++) {
    if (info->exact[S]) {
      ck_assert_msg(got->distinct[S] == ref->distinct[S] &&
                        got->max_degree[S] == ref->max_degree[S],
                    "%s: S=%u marked exact: %lld/%lld, expected %lld/%lld",
                    what, S, (long long)got->distinct[S],
                    (long long)got->max_degree[S],
                    (long long)ref->distinct[S],
                    (long long)ref->max_degree[S]);
      continue;
    }
    ck_assert_msg(info->sampled > 0, "%s: S=%u open without a sample", what,
                  S);
    int64_t lo, hi;
    rt_degree_limits(got, info, S, &lo, &hi);
    ck_assert_msg(lo <= ref->distinct[S] && ref->distinct[S] <= hi,
                  "%s: S=%u true distinct %lld outside the limits [%lld, "
                  "%lld]", what, S, (long long)ref->distinct[S],
                  (long long)lo, (long long)hi);
    ck_assert_msg(lo <= got->distinct[S] && got->distinct[S] <= hi,
                  "%s: S=%u distinct %lld outside [%lld, %lld]", what, S,
                  (long long)got->distinct[S], (long long)lo, (long long)hi);
    ck_assert_msg(got->max_degree[S] >= ref->max_degree[S],
                  "%s: S=%u max_degree %lld below the true %lld", what, S,
                  (long long)got->max_degree[S],
                  (long long)ref->max_degree[S]);
    (*open)++;
    *under += got->distinct[S] < ref->distinct[S];
    *ratio += (double)got->distinct[S] / (double)ref->distinct[S];
  }
}

static galley_tensor *build_fmt(int k, const int64_t *dims, int64_t n,
                                const int64_t *c, const char *fmt) {
  galley_format f = parse(fmt, k);
  return build(k, dims, n, c, NULL, 0.0, &f);
}

/* A table: mode 0 a row id (every row one entry: a key), the others
 * drawn from small skewed ranges; with `gaps`, a tenth of the rows left
 * out. */
static int64_t table_rows(test_rng *r, int k, int64_t rows, int gaps,
                          int64_t *dims, int64_t *c) {
  int64_t n = 0;
  dims[0] = rows;
  for (int m = 1; m < k; m++)
    dims[m] = 2 + test_rng_below(r, 40);
  for (int64_t i = 0; i < rows; i++) {
    if (gaps && test_rng_below(r, 10) == 0)
      continue; /* an empty row */
    c[n * k] = i;
    for (int m = 1; m < k; m++) {
      int64_t d = dims[m];
      c[n * k + m] = test_rng_below(r, 3) == 0 ? test_rng_below(r, 2)
                                               : test_rng_below(r, d);
    }
    n++;
  }
  return n;
}

static const char *const table_formats[] = {
    "dense,list,list,list", "list,list,list,list", "dense,dense,list,list",
    "list:1,list:0,list:2,list:3", "list:3,dense:2,list:1,list:0",
    "hash,list,list,list", "dense,bytemap,list,list"};

/* A format string of table_formats cut to order k (modes renumbered
 * by dropping those >= k). */
static void cut_format(const char *full, int k, char *out, size_t size) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", full);
  out[0] = 0;
  int n = 0;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    char *colon = strchr(tok, ':');
    if (colon && atoi(colon + 1) >= k)
      continue;
    if (!colon && n >= k)
      continue;
    size_t len = strlen(out);
    snprintf(out + len, size - len, "%s%s", n ? "," : "", tok);
    n++;
  }
}

/* The one pass (exact mode) equals the reference on tables in every
 * format: keys, single-child levels, dense roots, hash and bytemap. */
START_TEST(one_pass_tables) {
  test_rng r = test_rng_seed(4242);
  int64_t dims[4], *c = malloc(4 * 3000 * sizeof *c);
  ck_assert_ptr_nonnull(c);
  for (int round = 0; round < 8; round++) {
    int k = 2 + round % 3;
    int64_t n = table_rows(&r, k, 1000 + 250 * round, round % 2, dims, c);
    galley_degree_stats ref, got, big;
    sorted_stats(k, dims, n, c, &ref);
    for (size_t f = 0; f < sizeof table_formats / sizeof *table_formats;
         f++) {
      char fmt[128], what[200];
      cut_format(table_formats[f], k, fmt, sizeof fmt);
      galley_format parsed;
      galley_error err;
      if (galley_format_parse(fmt, k, &parsed, &err) != GALLEY_OK)
        continue; /* a cut that lost a mode */
      galley_tensor *t = build_fmt(k, dims, n, c, fmt);
      rt_degree_info info;
      snprintf(what, sizeof what, "round %d order %d format %s", round, k,
               fmt);
      ck_assert_int_eq(rt_degree_stats(t, 0, &got, &info, &err), GALLEY_OK);
      assert_same(&got, &ref, what);
      for (unsigned S = 0; S < (1u << k); S++)
        ck_assert_msg(info.exact[S], "%s: S=%u not marked exact", what, S);
      ck_assert_int_eq(info.sampled, 0);
      /* a sample as large as the data changes nothing */
      ck_assert_int_eq(rt_degree_stats(t, n, &big, &info, &err), GALLEY_OK);
      assert_same(&big, &ref, what);
      galley_tensor_free(t);
    }
  }
  free(c);
}
END_TEST

/* Tables whose column 1 does not decrease from row to row (the order of
 * each lineitem): the pass counts its runs instead of a histogram.  Runs
 * of 1..6 rows; then the same with one row out of order (at the start,
 * past the first block of 4096, at the end), where the pass must fall
 * back to the histogram.  Row counts that need byte, 16-bit and 32-bit
 * counters for the other columns' histograms. */
START_TEST(sorted_columns) {
  static const int64_t sizes[] = {200, 9000, 70000};
  static const char *const fmts[] = {"dense,list,list", "list,list,list",
                                     "dense:0,list:2,list:1"};
  test_rng r = test_rng_seed(9191);
  int64_t dims[3], *c = malloc(3 * 70000 * sizeof *c);
  ck_assert_ptr_nonnull(c);
  for (int z = 0; z < 3; z++)
    for (int breaks = 0; breaks < 4; breaks++) {
      int64_t n = sizes[z], v = 0;
      dims[0] = n;
      dims[2] = 2 + test_rng_below(&r, 300);
      for (int64_t i = 0; i < n; i++) {
        if (i > 0 && test_rng_below(&r, 6) == 0)
          v += 1 + test_rng_below(&r, 2);
        c[i * 3] = i;
        c[i * 3 + 1] = v;
        c[i * 3 + 2] = test_rng_below(&r, dims[2]);
      }
      int64_t at = breaks == 1 ? 1 : breaks == 2 ? 4200 % n : n - 1;
      if (breaks > 0)
        c[at * 3 + 1] = v + 1 - c[at * 3 + 1]; /* out of order */
      dims[1] = v + 2;
      galley_degree_stats ref, got;
      sorted_stats(3, dims, n, c, &ref);
      for (int f = 0; f < 3; f++) {
        char what[160];
        snprintf(what, sizeof what, "rows %lld, break %d, format %s",
                 (long long)n, breaks, fmts[f]);
        galley_tensor *t = build_fmt(3, dims, n, c, fmts[f]);
        galley_error err;
        rt_degree_info info;
        ck_assert_int_eq(rt_degree_stats(t, 0, &got, &info, &err), GALLEY_OK);
        assert_same(&got, &ref, what);
        /* the same with every level's indices 64-bit */
        ck_assert_int_eq(rt_tensor_set_widths(t, 0, &err), GALLEY_OK);
        ck_assert_int_eq(rt_degree_stats(t, 0, &got, &info, &err), GALLEY_OK);
        assert_same(&got, &ref, what);
        galley_tensor_free(t);
      }
    }
  free(c);
}
END_TEST

/* Degree statistics kept with a tensor: made once (the same pointer on
 * every later call, equal to a fresh computation), none for another
 * sample size, and made again from the new data after a touch. */
START_TEST(kept_with_tensor) {
  test_rng r = test_rng_seed(77);
  int64_t dims[4], *c = malloc(4 * 3000 * sizeof *c);
  ck_assert_ptr_nonnull(c);
  int64_t n = table_rows(&r, 3, 2000, 0, dims, c);
  galley_tensor *t = build_fmt(3, dims, n, c, "dense,list,list");
  galley_degree_stats fresh;
  galley_error err;
  ck_assert_int_eq(rt_degree_stats(t, 500, &fresh, NULL, &err), GALLEY_OK);
  const galley_degree_stats *k1 = rt_tensor_degree_stats_kept(t, 500);
  ck_assert_ptr_nonnull(k1);
  assert_same(k1, &fresh, "kept");
  ck_assert_ptr_eq(rt_tensor_degree_stats_kept(t, 500), k1);
  ck_assert_ptr_null(rt_tensor_degree_stats_kept(t, 0));
  /* new values, one of them the fill now: the kept figures go with a touch */
  t->val[0] = t->fill;
  galley_tensor_touch(t);
  ck_assert_int_eq(rt_degree_stats(t, 500, &fresh, NULL, &err), GALLEY_OK);
  const galley_degree_stats *k2 = rt_tensor_degree_stats_kept(t, 500);
  ck_assert_ptr_nonnull(k2);
  assert_same(k2, &fresh, "kept after touch");
  ck_assert_int_eq(k2->nnz, n - 1);
  galley_tensor_free(t);
  free(c);
}
END_TEST

/* Random tensors with skewed modes: the sampled figures keep their
 * promises (check_sampled) in the sweep and walk paths, are the same on
 * every call, and the distinct counts are upper bounds in all but a rare
 * case. */
static void sampled_round(test_rng *r, int k, int64_t want, int64_t sample,
                          int *open, int *under, double *ratio) {
  int64_t dims[4], *c = malloc((size_t)(want * k) * sizeof *c);
  ck_assert_ptr_nonnull(c);
  for (int m = 0; m < k; m++)
    dims[m] = 8 + test_rng_below(r, 600);
  /* entries: modes correlated through a hidden group, skewed sizes */
  for (int64_t e = 0; e < want; e++) {
    int64_t g = test_rng_below(r, 1 + test_rng_below(r, want / 4 + 1));
    for (int m = 0; m < k; m++)
      c[e * k + m] = m % 2 ? (g * 7 + m) % dims[m]
                           : (g + test_rng_below(r, 1 + m * 3)) % dims[m];
  }
  /* distinct entries, so that the reference sees what the tensor holds */
  cmp_rows_k = k;
  qsort(c, (size_t)want, (size_t)k * sizeof *c, cmp_rows);
  int64_t n = 0;
  for (int64_t e = 0; e < want; e++)
    if (n == 0 || cmp_rows(c + e * k, c + (n - 1) * k) != 0)
      memmove(c + n++ * k, c + e * k, (size_t)k * sizeof *c);
  galley_degree_stats ref, got, again;
  sorted_stats(k, dims, n, c, &ref);
  static const char *const fmts[] = {"list,list,list,list",
                                     "dense,list,list,list",
                                     "list:2,list:0,list:1,list:3",
                                     "hash,list,list,list"};
  for (int f = 0; f < 4; f++) {
    char fmt[128], what[200];
    cut_format(fmts[f], k, fmt, sizeof fmt);
    galley_tensor *t = build_fmt(k, dims, n, c, fmt);
    rt_degree_info info, info2;
    galley_error err;
    snprintf(what, sizeof what, "order %d n %lld sample %lld format %s", k,
             (long long)n, (long long)sample, fmt);
    ck_assert_int_eq(rt_degree_stats(t, sample, &got, &info, &err),
                     GALLEY_OK);
    if (n > 2 * sample) {
      ck_assert_msg(info.rate > 0 && fabs(info.rate * n - sample) < 1e-6 * n,
                    "%s: rate %g", what, info.rate);
      /* a Bernoulli sample: within 6 standard deviations of its mean */
      ck_assert_msg(llabs(info.sampled - sample) <= 6 * sqrt(sample) + 6,
                    "%s: %lld drawn", what, (long long)info.sampled);
    }
    check_sampled(&got, &info, &ref, what, open, under, ratio);
    ck_assert_int_eq(rt_degree_stats(t, sample, &again, &info2, &err),
                     GALLEY_OK);
    assert_same(&again, &got, what);
    ck_assert_int_eq(info2.sampled, info.sampled);
    galley_tensor_free(t);
  }
  free(c);
}

START_TEST(sampled_bounds) {
  test_rng r = test_rng_seed(777);
  int open = 0, under = 0;
  double ratio = 0;
  static const int64_t samples[] = {128, 512, 2048};
  for (int round = 0; round < 12; round++)
    sampled_round(&r, 3 + round % 2, 6000 + 1500 * (round % 4),
                  samples[round % 3], &open, &under, &ratio);
  printf("sampled_bounds: %d sampled distinct counts, %d below the truth, "
         "mean ratio to the truth %.3f\n",
         open, under, open ? ratio / open : 0);
  ck_assert_msg(open >= 100, "only %d sampled figures", open);
  ck_assert_msg(under * 100 <= open, "%d of %d below the truth", under, open);
}
END_TEST

/* Stored fills and a hash level: the walk draws the sample; the counts it
 * ignores are the fills'. */
START_TEST(sampled_walk_fills) {
  test_rng r = test_rng_seed(99);
  int64_t n = 9000, dims[3] = {300, 50, 70};
  int64_t *c = malloc((size_t)n * 3 * sizeof *c), *nf = malloc((size_t)n * 3 * sizeof *nf);
  double *v = malloc((size_t)n * sizeof *v);
  ck_assert(c && nf && v);
  int64_t m = 0, nn = 0;
  for (int64_t e = 0; e < n; e++) {
    int64_t x[3] = {test_rng_below(&r, 300), test_rng_below(&r, 50),
                    test_rng_below(&r, 70)};
    x[2] = test_rng_below(&r, 3) ? x[1] : x[2]; /* correlated modes */
    int dup = 0;
    for (int64_t f = m > 50 ? m - 50 : 0; f < m && !dup; f++)
      dup = memcmp(c + 3 * f, x, sizeof x) == 0;
    if (dup)
      continue;
    memcpy(c + 3 * m, x, sizeof x);
    v[m] = test_rng_below(&r, 4) == 0 ? 2.0 : 1.0; /* 2 is the fill */
    if (v[m] != 2.0)
      memcpy(nf + 3 * nn++, x, sizeof x);
    m++;
  }
  /* duplicates beyond the window are summed by from_coo: make them
   * unique for the reference by sorting */
  galley_degree_stats ref, got;
  galley_format f = parse("hash,list,list", 3);
  galley_tensor *t = build(3, dims, m, c, v, 2.0, &f);
  /* the reference from the tensor's own entries */
  int64_t cnt = 0, *rc = NULL;
  double *rv = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_to_coo(t, GALLEY_EXPORT_SKIP_FILL, &cnt, &rc,
                                        &rv, &err),
                   GALLEY_OK);
  sorted_stats(3, dims, cnt, rc, &ref);
  rt_degree_info info;
  ck_assert_int_eq(rt_degree_stats(t, 512, &got, &info, &err), GALLEY_OK);
  ck_assert_int_gt(info.sampled, 0);
  int open = 0, under = 0;
  double ratio = 0;
  check_sampled(&got, &info, &ref, "hash with fills", &open, &under, &ratio);
  ck_assert_int_gt(open, 0);
  free(rc);
  free(rv);
  galley_tensor_free(t);
  free(c);
  free(nf);
  free(v);
}
END_TEST

int main(void) {
  Suite *s = suite_create("stats");
  TCase *tc = tcase_create("exact");
  tcase_add_test(tc, matrix_3x3);
  tcase_add_test(tc, order3);
  tcase_add_test(tc, nonzero_fill);
  tcase_add_test(tc, dense_zeros);
  tcase_add_test(tc, scalars);
  tcase_add_test(tc, empty);
  tcase_add_test(tc, bad_arguments);
  suite_add_tcase(s, tc);

  tc = tcase_create("random");
  tcase_add_test(tc, random_order1);
  tcase_add_test(tc, random_order2);
  tcase_add_test(tc, random_order3);
  tcase_add_test(tc, random_order4);
  tcase_add_test(tc, random_order5);
  tcase_add_test(tc, random_order8);
  suite_add_tcase(s, tc);

  tc = tcase_create("large");
  tcase_add_test(tc, big_small_dims);
  tcase_add_test(tc, big_huge_dims);
  tcase_add_test(tc, big_tall);
  tcase_add_test(tc, big_wide);
  suite_add_tcase(s, tc);

  tc = tcase_create("data");
  tcase_add_test(tc, karate);
  suite_add_tcase(s, tc);

  tc = tcase_create("optimizer");
  tcase_add_test(tc, one_pass_tables);
  tcase_add_test(tc, sorted_columns);
  tcase_add_test(tc, sampled_bounds);
  tcase_add_test(tc, sampled_walk_fills);
  tcase_add_test(tc, kept_with_tensor);
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);

  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
