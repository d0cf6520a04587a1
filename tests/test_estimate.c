/*
 * test_estimate.c -- the sparsity estimators (src/stats/): the 13 chain
 * bound cases of galley-notes.md 5.3 with their exact values, the uniform
 * estimator against hand-computed formulas, a randomized check that the
 * chain bound is an upper bound of the true nnz (brute force over dense
 * evaluation of random maps and aggregates of real tensors, projections
 * and per-parent fan-outs included), karate.mtx triangles, degenerate
 * inputs (empty, scalars, size-0 and size-1 dims, huge spaces), the
 * constraint cap on dense and high-rank tensors, the speed of the
 * estimate, the bounds of an input large enough for sampled statistics,
 * a cache that notices a tensor touched after its values changed, and a
 * matrix product's size from sampled rows against its exact count.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "galley.h"
#include "ir.h"
#include "rt_stats.h"
#include "stats.h"
#include "testutil.h"

enum { I = 1, J = 2, K = 4, L = 8 };

/* ---- fixture: an arena, sizes and the operator registry ---- */

typedef struct Fix {
  Arena *arena;
  int64_t dims[STATS_MAX_INDICES];
  StatsContext c;  /* chain */
  StatsContext cu; /* uniform, same arena and sizes */
  OpRegistry ops;
} Fix;

static Fix *fix_new(int64_t size) {
  Fix *f = calloc(1, sizeof *f);
  ck_assert_ptr_nonnull(f);
  f->arena = arena_new();
  ck_assert_ptr_nonnull(f->arena);
  for (int k = 0; k < STATS_MAX_INDICES; k++) f->dims[k] = size;
  f->c = (StatsContext){EST_CHAIN, f->arena, f->dims, STATS_MAX_INDICES, NULL, NULL};
  f->cu = (StatsContext){EST_UNIFORM, f->arena, f->dims, STATS_MAX_INDICES, NULL, NULL};
  ops_init(&f->ops);
  return f;
}

static void fix_free(Fix *f) {
  arena_free(f->arena);
  free(f);
}

static const Op *op(Fix *f, const char *name) {
  const Op *o = ops_find(&f->ops, name);
  ck_assert_ptr_nonnull(o);
  return o;
}

/* A statistic with only the given constraints (nnz unknown). */
static TensorStats *dcs(Fix *f, IdxSet idx, double fill, int n,
                        const double (*dc)[3]) {
  TensorStats *s = stats_new(&f->c, idx, NAN, fill);
  for (int k = 0; k < n; k++)
    stats_add_constraint(&f->c, s, (IdxSet)dc[k][0], (IdxSet)dc[k][1],
                         dc[k][2]);
  return s;
}

static double total(const StatsContext *c, const TensorStats *s) {
  return stats_estimate(c, s, stats_indices(s), 0);
}

/* ---- the 13 cases of galley-notes.md 5.3 ---- */

static const double triangle[][3] = {
    {0, I | J, 50}, {I, J, 5}, {J, I, 5}, {0, J | K, 50}, {J, K, 5},
    {K, J, 5},      {0, I | K, 50}, {I, K, 5}, {K, I, 5}};
static const double triangle_small[][3] = {
    {0, I | J, 1}, {I, J, 1}, {J, I, 1}, {0, J | K, 50}, {J, K, 5},
    {K, J, 5},     {0, I | K, 50}, {I, K, 5}, {K, I, 5}};

START_TEST(single) {
  Fix *f = fix_new(1000);
  static const double d[][3] = {{I, J, 5}, {J, I, 25}, {0, I | J, 50}};
  ck_assert_double_eq(total(&f->c, dcs(f, I | J, 0, 3, d)), 50);
  fix_free(f);
}
END_TEST

START_TEST(join1) {
  Fix *f = fix_new(1000);
  static const double d[][3] = {{0, I | J, 50}, {J, K, 5}};
  ck_assert_double_eq(total(&f->c, dcs(f, I | J | K, 0, 2, d)), 250);
  fix_free(f);
}
END_TEST

START_TEST(join2) {
  Fix *f = fix_new(1000);
  static const double d[][3] = {{0, I | J, 50}, {J, K, 5}, {K, L, 5}};
  ck_assert_double_eq(total(&f->c, dcs(f, I | J | K | L, 0, 3, d)), 1250);
  fix_free(f);
}
END_TEST

START_TEST(triangle_card) {
  Fix *f = fix_new(1000);
  ck_assert_double_eq(total(&f->c, dcs(f, I | J | K, 0, 9, triangle)), 250);
  ck_assert_double_eq(total(&f->c, dcs(f, I | J | K, 0, 9, triangle_small)),
                      5);
  fix_free(f);
}
END_TEST

START_TEST(reduces) {
  Fix *f = fix_new(1000);
  const Op *plus = op(f, "+");
  TensorStats *t = dcs(f, I | J | K, 0, 9, triangle);
  TensorStats *r = stats_aggregate(&f->c, plus, t, I | J | K);
  ck_assert_uint_eq(stats_indices(r), 0);
  ck_assert_double_eq(total(&f->c, r), 1);

  TensorStats *ts = dcs(f, I | J | K, 0, 9, triangle_small);
  TensorStats *r1 = stats_aggregate(&f->c, plus, ts, I | J);
  ck_assert_uint_eq(stats_indices(r1), K);
  ck_assert_double_eq(total(&f->c, r1), 5);
  TensorStats *r2 = stats_aggregate(&f->c, plus, ts, I);
  ck_assert_uint_eq(stats_indices(r2), J | K);
  ck_assert_double_eq(total(&f->c, r2), 5);
  fix_free(f);
}
END_TEST

START_TEST(unions) {
  Fix *f = fix_new(1000);
  static const double di[][3] = {{0, I, 1}};
  static const double dij[][3] = {{0, I | J, 1}};
  const TensorStats *a[2] = {dcs(f, I, 0, 1, di), dcs(f, I, 0, 1, di)};
  ck_assert_double_eq(total(&f->c, stats_union(&f->c, a, 2, 0)), 2);
  /* the same through stats_map: + has no annihilator */
  ck_assert_double_eq(total(&f->c, stats_map(&f->c, op(f, "+"), a, 2)), 2);
  const TensorStats *b[2] = {dcs(f, I | J, 0, 1, dij),
                             dcs(f, I | J, 0, 1, dij)};
  ck_assert_double_eq(total(&f->c, stats_union(&f->c, b, 2, 0)), 2);
  fix_free(f);
}
END_TEST

START_TEST(disjoint_unions) {
  Fix *f = fix_new(1000);
  f->dims[1] = 100; /* |j| = 100 */
  static const double d5[][3] = {{0, I, 5}};
  static const double d10[][3] = {{0, J, 10}};
  const TensorStats *a[2] = {dcs(f, I, 0, 1, d5), dcs(f, J, 0, 1, d10)};
  TensorStats *u = stats_union(&f->c, a, 2, 0);
  ck_assert_uint_eq(stats_indices(u), I | J);
  ck_assert_double_eq(total(&f->c, u), 10 * 1000 + 5 * 100);

  f->dims[1] = 1000;
  static const double e5[][3] = {{0, I | J, 5}};
  static const double e10[][3] = {{0, J | K, 10}};
  const TensorStats *b[2] = {dcs(f, I | J, 0, 1, e5),
                             dcs(f, J | K, 0, 1, e10)};
  ck_assert_double_eq(total(&f->c, stats_union(&f->c, b, 2, 0)), 15000);
  fix_free(f);
}
END_TEST

START_TEST(mixture) {
  Fix *f = fix_new(1000);
  static const double a5[][3] = {{0, I | J, 5}};
  static const double b10[][3] = {{0, J | K, 10}};
  static const double c10[][3] = {{0, I | J | K, 10}};
  const TensorStats *a[3] = {dcs(f, I | J, 1, 1, a5), dcs(f, J | K, 1, 1, b10),
                             dcs(f, I | J | K, 0, 1, c10)};
  TensorStats *m = stats_map(&f->c, op(f, "*"), a, 3);
  ck_assert_double_eq(stats_fill(m), 0);
  ck_assert_uint_eq(stats_indices(m), I | J | K);
  ck_assert_double_eq(total(&f->c, m), 10);

  /* A[i,j] * B[i,j] with B of fill 1 is non-zero wherever A is: the
   * union-like argument must not shrink the join. */
  static const double a10[][3] = {{0, I | J, 10}};
  static const double b1[][3] = {{0, I | J, 1}};
  const TensorStats *p[2] = {dcs(f, I | J, 0, 1, a10), dcs(f, I | J, 1, 1, b1)};
  ck_assert_double_eq(total(&f->c, stats_map(&f->c, op(f, "*"), p, 2)), 10);
  /* a broadcast union-like argument widens the index set */
  static const double k1[][3] = {{0, K, 1}};
  const TensorStats *q[2] = {dcs(f, I | J, 0, 1, a10), dcs(f, K, 2, 1, k1)};
  TensorStats *m2 = stats_map(&f->c, op(f, "*"), q, 2);
  ck_assert_uint_eq(stats_indices(m2), I | J | K);
  ck_assert_double_eq(total(&f->c, m2), 10000);
  /* uniform too: 10 / 1e6 of the space of i, j, k */
  TensorStats *uq[2] = {stats_new(&f->cu, I | J, 10, 0),
                        stats_new(&f->cu, K, 1, 2)};
  TensorStats *um =
      stats_map(&f->cu, op(f, "*"), (const TensorStats *const *)uq, 2);
  ck_assert_double_eq_tol(total(&f->cu, um), 10000, 1e-6);
  fix_free(f);
}
END_TEST

/* 0 * inf is nan: with a union-like argument of fill inf the result fill
 * is nan, not the annihilator, and nothing may be treated as a join. */
START_TEST(nan_fill_is_no_join) {
  Fix *f = fix_new(1000);
  static const double a10[][3] = {{0, I | J, 10}};
  static const double b1[][3] = {{0, I | J, 1}};
  const TensorStats *p[2] = {dcs(f, I | J, 0, 1, a10),
                             dcs(f, I | J, INFINITY, 1, b1)};
  TensorStats *m = stats_map(&f->c, op(f, "*"), p, 2);
  ck_assert(isnan(stats_fill(m)));
  ck_assert_double_eq(total(&f->c, m), 11);
  fix_free(f);
}
END_TEST

/* Conditional estimates: per-parent fan-out. */
START_TEST(conditional) {
  Fix *f = fix_new(1000);
  static const double d[][3] = {{0, I | J, 50}, {I, J, 5}, {J, K, 7}};
  TensorStats *s = dcs(f, I | J | K, 0, 3, d);
  ck_assert_double_eq(stats_estimate(&f->c, s, I | J, I), 5);
  ck_assert_double_eq(stats_estimate(&f->c, s, I | J | K, I), 35);
  ck_assert_double_eq(stats_estimate(&f->c, s, I | J | K, I | J), 7);
  ck_assert_double_eq(stats_estimate(&f->c, s, J | K, J), 7);
  ck_assert_double_eq(stats_estimate(&f->c, s, I | K, 0), 350);
  /* nothing known about k given i alone but the chain through j */
  ck_assert_double_eq(stats_estimate(&f->c, s, I | K, I), 35);
  /* nothing known about i given k: its size */
  ck_assert_double_eq(stats_estimate(&f->c, s, I | K, K), 50);
  ck_assert_double_eq(stats_estimate(&f->c, s, K, 0), 350);
  fix_free(f);
}
END_TEST

/* ---- the uniform estimator, by hand ---- */

START_TEST(uniform_formulas) {
  Fix *f = fix_new(100);
  const StatsContext *c = &f->cu;
  TensorStats *a = stats_new(c, I | J, 1000, 0), *b = stats_new(c, J | K, 1000, 0);
  const TensorStats *ab[2] = {a, b};
  TensorStats *j = stats_join(c, ab, 2, 0);
  ck_assert_double_eq_tol(total(c, j), 1e6 * 0.1 * 0.1, 1e-6);

  TensorStats *a2 = stats_new(c, I | J, 1000, 0);
  const TensorStats *aa[2] = {a, a2};
  ck_assert_double_eq_tol(total(c, stats_union(c, aa, 2, 0)),
                          1e4 * (1 - 0.9 * 0.9), 1e-6);

  /* paper Example 7: nnz(A) = 1000, nnz(B) = 200, sum over j */
  TensorStats *b2 = stats_new(c, J | K, 200, 0);
  const TensorStats *ab2[2] = {a, b2};
  TensorStats *jj = stats_join(c, ab2, 2, 0);
  ck_assert_double_eq_tol(total(c, jj), 2000, 1e-6);
  double agg = 1e4 * (1 - pow(1 - 2000 / 1e6, 100));
  TensorStats *r = stats_aggregate(c, op(f, "+"), jj, J);
  ck_assert_double_eq_tol(total(c, r), agg, 1e-6);
  ck_assert_double_eq_tol(agg, 1814.3, 0.05);
  /* the estimate projects (the reference's estimate did not) */
  ck_assert_double_eq_tol(stats_estimate(c, jj, I | K, 0), agg, 1e-6);
  ck_assert_double_eq_tol(stats_estimate(c, jj, I | K, I), agg / 100, 1e-9);
  ck_assert_double_eq_tol(stats_estimate(c, a, I, 0),
                          100 * (1 - pow(0.9, 100)), 1e-6);
  ck_assert_double_eq_tol(stats_estimate(c, a, I | J, I), 10, 1e-9);
  /* fills of aggregates */
  TensorStats *ones = stats_new(c, I | J, 10, 1);
  ck_assert_double_eq(stats_fill(stats_aggregate(c, op(f, "+"), ones, J)), 100);
  ck_assert_double_eq(stats_fill(stats_aggregate(c, op(f, "*"), ones, J)), 1);
  /* tiny probabilities keep their precision */
  f->dims[0] = f->dims[1] = f->dims[2] = 1000000000;
  TensorStats *t = stats_new(c, I | J | K, 1, 0);
  double hit = 1e9 * -expm1(-1e-9); /* 1e9 rows, each hit w.p. 1e-27*1e18 */
  ck_assert_double_eq_tol(stats_estimate(c, t, I, 0), hit, 1e-12);
  ck_assert_double_eq_tol(total(c, stats_aggregate(c, op(f, "+"), t, J | K)),
                          hit, 1e-12);
  fix_free(f);
}
END_TEST

/* ---- degenerate inputs ---- */

static galley_tensor *from_coo(int order, const int64_t *dims, int64_t n,
                               const int64_t *coords, const double *vals,
                               double fill) {
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_msg(galley_tensor_from_coo(order, dims, n, coords, vals, fill,
                                       NULL, &t, &err) == GALLEY_OK,
                "from_coo: %s", err.msg);
  return t;
}

static void assert_sane(double e) {
  ck_assert(!isnan(e));
  ck_assert(e >= 0);
  ck_assert(e <= STATS_MAX_ESTIMATE);
}

START_TEST(degenerate) {
  Fix *f = fix_new(10);
  const StatsContext *cs[2] = {&f->c, &f->cu};
  int64_t d2[2] = {10, 10};
  int ij[2] = {0, 1};
  double five = 5;
  galley_tensor *empty = from_coo(2, d2, 0, NULL, NULL, 0);
  galley_tensor *scalar = from_coo(0, NULL, 1, NULL, &five, 0);
  galley_tensor *scalar0 = from_coo(0, NULL, 0, NULL, NULL, 0);
  for (int k = 0; k < 2; k++) {
    const StatsContext *c = cs[k];
    TensorStats *e = stats_from_tensor(c, empty, ij, 0);
    ck_assert_double_eq(total(c, e), 0);
    ck_assert_double_eq(stats_estimate(c, e, I, 0), 0);
    TensorStats *s = stats_from_tensor(c, scalar, NULL, 0);
    ck_assert_uint_eq(stats_indices(s), 0);
    ck_assert_double_eq(total(c, s), 1);
    ck_assert_double_eq(total(c, stats_from_tensor(c, scalar0, NULL, 0)), 0);
    TensorStats *k7 = stats_const(c, 7);
    ck_assert_double_eq(stats_fill(k7), 7);
    ck_assert_double_eq(total(c, k7), 0);
    /* joins with the empty, unions with it, aggregates of it */
    TensorStats *full = stats_new(c, I | J, 100, 0);
    const TensorStats *a[3] = {full, e, s};
    ck_assert_double_eq(total(c, stats_join(c, a, 2, 0)), 0);
    ck_assert_double_eq(total(c, stats_union(c, a, 2, 0)), 100);
    ck_assert_double_eq(total(c, stats_union(c, a + 1, 1, 0)), 0);
    ck_assert_double_eq(total(c, stats_aggregate(c, op(f, "+"), e, I)), 0);
    ck_assert_double_eq(total(c, stats_join(c, a, 0, 1)), 1);
    ck_assert_double_eq(total(c, stats_union(c, a, 0, 0)), 0);
    /* scalar times matrix: the scalar's fill 0 annihilates */
    const TensorStats *fs[2] = {full, s};
    ck_assert_double_eq(total(c, stats_map(c, op(f, "*"), fs, 2)), 100);
    /* A * 2: the constant is union-like (fill 2), A is join-like */
    const TensorStats *fk[2] = {full, k7};
    TensorStats *m = stats_map(c, op(f, "*"), fk, 2);
    ck_assert_double_eq(stats_fill(m), 0);
    ck_assert_double_eq(total(c, m), 100);
    /* A + 7: a union with an empty constant */
    TensorStats *p = stats_map(c, op(f, "+"), fk, 2);
    ck_assert_double_eq(stats_fill(p), 7);
    ck_assert_double_eq(total(c, p), 100);
    /* stats_new with nnz 0, negative, nan */
    ck_assert_double_eq(total(c, stats_new(c, I, 0, 0)), 0);
    ck_assert_double_eq(total(c, stats_new(c, I, -3, 0)), 0);
    ck_assert_double_eq(total(c, stats_new(c, I, NAN, 0)), 10);
  }
  /* size 0 and size 1 dimensions */
  f->dims[2] = 0;
  f->dims[3] = 1;
  for (int k = 0; k < 2; k++) {
    const StatsContext *c = cs[k];
    TensorStats *z = stats_new(c, I | K, 5, 0);
    ck_assert_double_eq(total(c, z), 0);
    TensorStats *one = stats_new(c, I | L, 5, 0);
    ck_assert_double_eq_tol(total(c, one), 5, 1e-9);
    ck_assert_double_eq_tol(stats_estimate(c, one, L, 0), 1, 0.01);
    const TensorStats *a[2] = {z, one};
    ck_assert_double_eq(total(c, stats_join(c, a, 2, 0)), 0);
    ck_assert_double_eq(total(c, stats_union(c, a, 2, 0)), 0);
    /* aggregating over a size-0 index: all fill, the op's start value */
    TensorStats *g = stats_aggregate(c, op(f, "*"), z, K);
    ck_assert_double_eq(total(c, g), 0);
    ck_assert_double_eq(stats_fill(g), 1);
    TensorStats *g1 = stats_aggregate(c, op(f, "+"), one, L);
    ck_assert_double_eq_tol(total(c, g1), 5, 1e-9);
  }
  /* huge spaces: 40 indices of 2^40: no inf, no nan */
  for (int k = 0; k < 40; k++) f->dims[k] = (int64_t)1 << 40;
  IdxSet big = ((IdxSet)1 << 40) - 1;
  for (int k = 0; k < 2; k++) {
    const StatsContext *c = cs[k];
    TensorStats *x = stats_new(c, big & 0xfffff, 1e9, 0);
    TensorStats *y = stats_new(c, big & ~(IdxSet)0xffff, 1e12, 0);
    stats_add_constraint(c, y, 1 << 16, big & ~(IdxSet)0x1ffff, 1e6);
    const TensorStats *xy[2] = {x, y};
    TensorStats *j = stats_join(c, xy, 2, 0), *u = stats_union(c, xy, 2, 0);
    TensorStats *g = stats_aggregate(c, op(f, "+"), j, 0xff);
    TensorStats *all[4] = {j, u, g, x};
    for (int q = 0; q < 4; q++) {
      IdxSet ix = stats_indices(all[q]);
      assert_sane(total(c, all[q]));
      assert_sane(stats_estimate(c, all[q], ix & 0xf0f0f0f0f0ULL, 0));
      assert_sane(stats_estimate(c, all[q], ix, ix & 0x3));
    }
    ck_assert(total(c, u) >= 1e12);
  }
  galley_tensor_free(empty);
  galley_tensor_free(scalar);
  galley_tensor_free(scalar0);
  fix_free(f);
}
END_TEST

/* ---- real tensors ---- */

/* Dense evaluation over a universe of NI indices of small sizes: every
 * expression is an array over the whole universe (constant along the
 * indices it lacks). */
#define NI 4
#define MAXPOS 625 /* 5^4 */

typedef struct Ev {
  double val[MAXPOS];
  IdxSet mask;
  double fill;
  TensorStats *chain, *uni;
} Ev;

typedef struct World {
  Fix *f;
  test_rng rng;
  int64_t npos;
  galley_tensor *owned[16];
  int nowned;
  int checks; /* upper-bound assertions made */
} World;

static void decode(const World *w, int64_t p, int64_t *pos) {
  for (int k = NI - 1; k >= 0; k--) {
    pos[k] = p % w->f->dims[k];
    p /= w->f->dims[k];
  }
}

static int64_t encode(const World *w, const int64_t *pos) {
  int64_t p = 0;
  for (int k = 0; k < NI; k++) p = p * w->f->dims[k] + pos[k];
  return p;
}

static Ev *leaf(World *w) {
  test_rng *r = &w->rng;
  Ev *e = calloc(1, sizeof *e);
  int order = 1 + (int)test_rng_below(r, 3);
  int idx[3];
  int64_t dims[3], space = 1;
  for (int m = 0; m < order; m++) {
    int dup;
    do { /* distinct modes, but now and then a diagonal */
      idx[m] = (int)test_rng_below(r, NI);
      dup = 0;
      for (int q = 0; q < m; q++) dup |= idx[q] == idx[m];
    } while (dup && test_rng_below(r, 5) != 0);
    dims[m] = w->f->dims[idx[m]];
    space *= dims[m];
  }
  double fill = test_rng_below(r, 10) < 7 ? 0 : 1;
  double density = test_rng_double(r, 0, 0.7);
  double *vals = malloc((size_t)space * sizeof *vals);
  for (int64_t q = 0; q < space; q++) {
    vals[q] = fill;
    if (test_rng_double(r, 0, 1) < density)
      vals[q] = fill == 0 ? (double)(1 + test_rng_below(r, 3))
                          : (double)(test_rng_below(r, 2) ? 0 : 3);
  }
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(
      galley_tensor_from_dense(order, dims, vals, fill, NULL, &t, &err),
      GALLEY_OK);
  free(vals);
  w->owned[w->nowned++] = t;
  for (int m = 0; m < order; m++) e->mask |= (IdxSet)1 << idx[m];
  e->fill = fill;
  for (int64_t p = 0; p < w->npos; p++) {
    int64_t pos[NI], coord[3];
    decode(w, p, pos);
    for (int m = 0; m < order; m++) coord[m] = pos[idx[m]];
    e->val[p] = galley_tensor_get(t, coord, NULL);
  }
  e->chain = stats_from_tensor(&w->f->c, t, idx, fill);
  e->uni = stats_from_tensor(&w->f->cu, t, idx, fill);
  return e;
}

static Ev *map(World *w, const Op *o, Ev **args, int n) {
  Ev *e = calloc(1, sizeof *e);
  const TensorStats *ch[3], *un[3];
  double x[3];
  for (int k = 0; k < n; k++) {
    e->mask |= args[k]->mask;
    ch[k] = args[k]->chain;
    un[k] = args[k]->uni;
  }
  for (int64_t p = 0; p < w->npos; p++) {
    for (int k = 0; k < n; k++) x[k] = args[k]->val[p];
    e->val[p] = ops_apply(o, x, n);
  }
  e->chain = stats_map(&w->f->c, o, ch, n);
  e->uni = stats_map(&w->f->cu, o, un, n);
  e->fill = stats_fill(e->chain);
  ck_assert_double_eq(stats_fill(e->uni), e->fill);
  return e;
}

static Ev *aggregate(World *w, const Op *o, Ev *a, IdxSet reduced) {
  Ev *e = calloc(1, sizeof *e);
  reduced &= a->mask;
  e->mask = a->mask & ~reduced;
  for (int64_t p = 0; p < w->npos; p++) {
    int64_t pos[NI];
    decode(w, p, pos);
    double acc = o->agg_init;
    int first = 1;
    /* every assignment of the reduced indices */
    int64_t cnt = 1;
    for (int k = 0; k < NI; k++)
      if (reduced >> k & 1) cnt *= w->f->dims[k];
    for (int64_t q = 0; q < cnt; q++) {
      int64_t rem = q, pp[NI];
      memcpy(pp, pos, sizeof pp);
      for (int k = 0; k < NI; k++)
        if (reduced >> k & 1) {
          pp[k] = rem % w->f->dims[k];
          rem /= w->f->dims[k];
        }
      double v = a->val[encode(w, pp)];
      double two[2] = {acc, v};
      acc = first ? v : ops_apply(o, two, 2);
      first = 0;
    }
    e->val[p] = acc;
  }
  e->chain = stats_aggregate(&w->f->c, o, a->chain, reduced);
  e->uni = stats_aggregate(&w->f->cu, o, a->uni, reduced);
  e->fill = stats_fill(e->chain);
  ck_assert_double_eq(stats_fill(e->uni), e->fill);
  return e;
}

/* The true max over values of `cond` of the number of distinct values of
 * `target` among e's non-fill entries (target ⊆ mask, cond ⊆ target). */
static double true_degree(const World *w, const Ev *e, IdxSet target,
                          IdxSet cond) {
  static unsigned char seen[MAXPOS];
  static int64_t per[MAXPOS];
  memset(seen, 0, sizeof seen);
  memset(per, 0, sizeof per);
  int64_t best = 0;
  for (int64_t p = 0; p < w->npos; p++) {
    int64_t pos[NI];
    decode(w, p, pos);
    int outside = 0;
    for (int k = 0; k < NI; k++) outside |= !(e->mask >> k & 1) && pos[k];
    if (outside || stats_same_value(e->val[p], e->fill)) continue;
    int64_t tp[NI], cp[NI];
    for (int k = 0; k < NI; k++) {
      tp[k] = (target >> k & 1) ? pos[k] : 0;
      cp[k] = (cond >> k & 1) ? pos[k] : 0;
    }
    int64_t tk = encode(w, tp), ck = encode(w, cp);
    if (seen[tk]) continue;
    seen[tk] = 1;
    if (++per[ck] > best) best = per[ck];
  }
  return (double)best;
}

static void check_bounds(World *w, const Ev *e) {
  const StatsContext *c = &w->f->c;
  ck_assert_uint_eq(stats_indices(e->chain), e->mask);
  double truth = true_degree(w, e, e->mask, 0);
  double est = total(c, e->chain);
  ck_assert_msg(est >= truth - 1e-9, "chain bound %g < true nnz %g", est,
                truth);
  w->checks++;
  /* every projection and conditional of the index set */
  for (IdxSet t = e->mask;; t = (t - 1) & e->mask) {
    for (IdxSet cnd = t;; cnd = (cnd - 1) & t) {
      double tr = true_degree(w, e, t, cnd);
      double es = stats_estimate(c, e->chain, t, cnd);
      ck_assert_msg(es >= tr - 1e-9, "chain (%llx|%llx) %g < true %g",
                    (unsigned long long)cnd, (unsigned long long)t, es, tr);
      w->checks++;
      assert_sane(stats_estimate(&w->f->cu, e->uni, t, cnd));
      if (!cnd) break;
    }
    if (!t) break;
  }
  double u = total(&w->f->cu, e->uni);
  assert_sane(u);
  ck_assert(u <= stats_dense(w->f->dims, e->mask) + 1e-9);
}

static Ev *keep(World *w, Ev *e, Ev **all, int *nall) {
  check_bounds(w, e);
  all[(*nall)++] = e;
  return e;
}

/* Now and then an aggregate over a random subset of e's indices. */
static Ev *maybe_agg(World *w, Ev *e, Ev **all, int *nall) {
  static const char *const names[] = {"+", "max", "*"};
  if (test_rng_below(&w->rng, 10) >= 3) return e;
  const Op *o = op(w->f, names[test_rng_below(&w->rng, 3)]);
  IdxSet r = (IdxSet)test_rng_below(&w->rng, 1 << NI);
  return keep(w, aggregate(w, o, e, r), all, nall);
}

static const Op *random_map_op(World *w) {
  return op(w->f, test_rng_below(&w->rng, 2) ? "*" : "+");
}

/* A random combination of 2 or 3 leaves: maps (join, union or mixture,
 * by their fills) and aggregates, every node checked. */
static void gen(World *w, Ev **all, int *nall) {
  int n = 2 + (int)test_rng_below(&w->rng, 2);
  Ev *lv[3];
  for (int k = 0; k < n; k++)
    lv[k] = maybe_agg(w, keep(w, leaf(w), all, nall), all, nall);
  Ev *e;
  if (n == 3 && test_rng_below(&w->rng, 2)) {
    Ev *ab = maybe_agg(w, keep(w, map(w, random_map_op(w), lv, 2), all, nall),
                       all, nall);
    Ev *args[2] = {ab, lv[2]};
    e = map(w, random_map_op(w), args, 2);
  } else {
    e = map(w, random_map_op(w), lv, n);
  }
  maybe_agg(w, keep(w, e, all, nall), all, nall);
}

START_TEST(random_upper_bounds) {
  World w = {0};
  w.rng = test_rng_seed(20240605);
  int trials = 200;
  for (int trial = 0; trial < trials; trial++) {
    w.f = fix_new(1);
    w.npos = 1;
    for (int k = 0; k < NI; k++) {
      w.f->dims[k] = 1 + test_rng_below(&w.rng, 5);
      w.npos *= w.f->dims[k];
    }
    w.nowned = 0;
    Ev *all[32];
    int nall = 0;
    gen(&w, all, &nall);
    for (int k = 0; k < nall; k++) free(all[k]);
    for (int k = 0; k < w.nowned; k++) galley_tensor_free(w.owned[k]);
    fix_free(w.f);
  }
  printf("random_upper_bounds: %d trials, %d bound checks\n", trials,
         w.checks);
}
END_TEST

/* The uniform estimate of a real tensor: its nnz; of a join, the
 * formula. */
START_TEST(uniform_from_tensors) {
  Fix *f = fix_new(4);
  int64_t d2[2] = {4, 4};
  int64_t ca[] = {0, 0, 1, 2, 3, 3}, cb[] = {0, 1, 2, 2};
  galley_tensor *a = from_coo(2, d2, 3, ca, NULL, 0);
  galley_tensor *b = from_coo(2, d2, 2, cb, NULL, 0);
  int ij[2] = {0, 1}, jk[2] = {1, 2}, ii[2] = {0, 0};
  TensorStats *sa = stats_from_tensor(&f->cu, a, ij, 0);
  TensorStats *sb = stats_from_tensor(&f->cu, b, jk, 0);
  ck_assert_double_eq_tol(total(&f->cu, sa), 3, 1e-12);
  const TensorStats *ab[2] = {sa, sb};
  ck_assert_double_eq_tol(total(&f->cu, stats_join(&f->cu, ab, 2, 0)),
                          64.0 * 3 / 16 * 2 / 16, 1e-12);
  /* the diagonal: 3 of 16 cells, 4 of them on the diagonal */
  ck_assert_double_eq_tol(total(&f->cu, stats_from_tensor(&f->cu, a, ii, 0)),
                          0.75, 1e-12);
  /* chain on the diagonal: a bound (true: 2, (0,0) and (3,3)) */
  double dg = total(&f->c, stats_from_tensor(&f->c, a, ii, 0));
  ck_assert(dg >= 2 && dg <= 3);
  galley_tensor_free(a);
  galley_tensor_free(b);
  fix_free(f);
}
END_TEST

/* ---- a product's size from sampled rows (stats_product_nnz) ---- */

/* The true number of entries of the pattern of A*A (A square, n x n):
 * a dense bitmap of C filled from A's entries, no sampling and no marks
 * by row (an algorithm apart from the estimator's). */
static double product_truth(const galley_tensor *a) {
  int64_t n = galley_tensor_dim(a, 0), nnz = 0, *crd = NULL;
  double *val = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_to_coo(a, 0, &nnz, &crd, &val, &err),
                   GALLEY_OK);
  int64_t *start = calloc((size_t)n + 1, sizeof *start); /* rows of the COO */
  for (int64_t e = 0; e < nnz; e++) start[crd[2 * e] + 1]++;
  for (int64_t i = 0; i < n; i++) start[i + 1] += start[i];
  unsigned char *c = calloc((size_t)(n * n), 1);
  ck_assert_ptr_nonnull(c);
  for (int64_t e = 0; e < nnz; e++) {
    int64_t i = crd[2 * e], j = crd[2 * e + 1];
    for (int64_t f = start[j]; f < start[j + 1]; f++)
      c[i * n + crd[2 * f + 1]] = 1;
  }
  double count = 0;
  for (int64_t x = 0; x < n * n; x++) count += c[x];
  free(c);
  free(start);
  free(crd);
  free(val);
  return count;
}

/* The uniform estimate of A*A's entries: sum(j: A[i,j] * A[j,k]). */
static double product_uniform(Fix *f, const galley_tensor *a) {
  int ij[2] = {0, 1}, jk[2] = {1, 2};
  const TensorStats *args[2] = {stats_from_tensor(&f->cu, a, ij, 0),
                                stats_from_tensor(&f->cu, a, jk, 0)};
  TensorStats *m = stats_map(&f->cu, op(f, "*"), args, 2);
  return total(&f->cu, stats_aggregate(&f->cu, op(f, "+"), m, J));
}

static galley_tensor *read_matrix(const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/%s", test_data_dir(), name);
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_msg(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err) ==
                    GALLEY_OK,
                "read %s: %s", path, err.msg);
  return t;
}

/* Within this factor of the truth: the sample's rows are counted exactly,
 * so only the spread of row sizes over the sample separates it (1-2% on
 * these matrices). */
#define PRODUCT_FACTOR 1.25

static void assert_within(double est, double truth, double factor,
                          const char *what) {
  ck_assert_msg(est <= truth * factor && est * factor >= truth,
                "%s: estimate %g, truth %g (factor %g allowed)", what, est,
                truth, factor);
}

/* Real matrices whose patterns are correlated (banded FEM bcsstk13,
 * cage8, the mesh jagmesh7): the uniform estimate is 2-10x too high
 * (bcsstk13: more than half full, which made A*A dense), the sampled
 * one within PRODUCT_FACTOR of the exact count. */
START_TEST(product_real_matrices) {
  static const struct {
    const char *file;
    double uniform_over; /* the uniform estimate is at least this x high */
  } m[] = {{"bcsstk13.mtx", 5}, {"cage8.mtx", 1.8}, {"jagmesh7.mtx", 2}};
  for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
    galley_tensor *a = read_matrix(m[k].file);
    int64_t n = galley_tensor_dim(a, 0);
    Fix *f = fix_new(n);
    double truth = product_truth(a);
    double sampled = stats_product_nnz(a, 0, a, 1);
    double uniform = product_uniform(f, a);
    assert_within(sampled, truth, PRODUCT_FACTOR, m[k].file);
    ck_assert_msg(uniform >= m[k].uniform_over * truth,
                  "%s: uniform %g, truth %g", m[k].file, uniform, truth);
    if (k == 0) /* what made bcsstk13's product dense */
      ck_assert_double_gt(uniform, 0.5 * (double)n * (double)n);
    fix_free(f);
    galley_tensor_free(a);
  }
}
END_TEST

/* Uniformly random entries: there the uniform estimate is right, and
 * the sampled one agrees with it and with the truth. */
START_TEST(product_random_matrix) {
  int64_t n = 1500, per_row = 12, dims[2] = {n, n};
  int64_t *crd = malloc((size_t)(2 * n * per_row) * sizeof *crd);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  int64_t nnz = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t e = 0; e < per_row; e++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      crd[2 * nnz] = i;
      crd[2 * nnz++ + 1] = (int64_t)(x % (uint64_t)n);
    }
  galley_tensor *a = NULL;
  galley_error err;
  /* a repeated coordinate sums into one entry */
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, nnz, crd, NULL, 0.0, NULL,
                                          &a, &err),
                   GALLEY_OK);
  free(crd);
  Fix *f = fix_new(n);
  double truth = product_truth(a);
  double sampled = stats_product_nnz(a, 0, a, 1);
  double uniform = product_uniform(f, a);
  assert_within(uniform, truth, 1.1, "uniform, random");
  assert_within(sampled, truth, 1.1, "sampled, random");
  fix_free(f);
  galley_tensor_free(a);
}
END_TEST

/* Storage the sampler cannot read by rows gives -1 (no estimate): A
 * stored by columns for its row index, and B's rows in a list level. */
START_TEST(product_needs_rows) {
  galley_tensor *a = read_matrix("cage8.mtx"), *csc = NULL, *dcsr = NULL;
  galley_format fmt;
  galley_error err;
  ck_assert_int_eq(galley_format_parse("dense:1,list:0", 2, &fmt, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_convert(a, &fmt, &csc, &err), GALLEY_OK);
  ck_assert_int_eq(galley_format_parse("list:0,list:1", 2, &fmt, &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_convert(a, &fmt, &dcsr, &err), GALLEY_OK);
  ck_assert_double_eq(stats_product_nnz(csc, 0, a, 1), -1);
  ck_assert_double_eq(stats_product_nnz(a, 0, dcsr, 1), -1);
  /* stored by rows of j, B read as B[j,k] with k its mode 0: a CSC B is
   * B's transpose by rows, so A * B^T's rows are fine */
  ck_assert_double_ge(stats_product_nnz(dcsr, 0, a, 1), 0);
  ck_assert_double_ge(stats_product_nnz(a, 0, csc, 0), 0);
  galley_tensor_free(dcsr);
  galley_tensor_free(csc);
  galley_tensor_free(a);
}
END_TEST

/* The physical plan of bcsstk13's A*A stores the result's rows as
 * sorted lists (10% full), no longer dense (the uniform estimate's
 * 57%), and its estimated size is the sampled one. */
START_TEST(product_plan_not_dense) {
  static const char src[] = "input A[i, j]\n"
                            "C[i, k] = sum(j: A[i, j] * A[j, k])\n"
                            "output C\n";
  galley_program *p = NULL;
  galley_error err;
  ck_assert_int_eq(galley_program_parse("p.tin", src, strlen(src), &p, NULL,
                                        &err),
                   GALLEY_OK);
  galley_tensor *a = read_matrix("bcsstk13.mtx");
  ck_assert_int_eq(galley_program_bind(p, "A", a, &err), GALLEY_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_assert_int_eq(galley_program_explain(p, f, 0, &err), GALLEY_OK);
  fclose(f);
  const char *phys = strstr(text, "physical plan:");
  ck_assert_ptr_nonnull(phys);
  ck_assert_msg(strstr(phys, "Mat(dense:0,list:1") != NULL, "%s", phys);
  const char *est = strstr(phys, " est ");
  ck_assert_ptr_nonnull(est);
  double e = atof(est + 5);
  assert_within(e, product_truth(a), PRODUCT_FACTOR, "plan's estimate");
  free(text);
  galley_program_free(p);
  galley_tensor_free(a);
}
END_TEST

/* A cache gives the same statistics as computing them afresh, and
 * reuses them: one entry per tensor however often it is read. */
START_TEST(cache_same_estimates) {
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/karate.mtx", test_data_dir());
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err),
                   GALLEY_OK);
  Fix *f = fix_new(34);
  StatsContext cached = f->c;
  cached.cache = stats_cache_new(f->arena);
  ck_assert_ptr_nonnull(cached.cache);
  int eij[2] = {0, 1}, ejk[2] = {1, 2}, eik[2] = {0, 2};
  for (int round = 0; round < 3; round++) {
    const TensorStats *a[3] = {stats_from_tensor(&f->c, t, eij, 0),
                               stats_from_tensor(&f->c, t, ejk, 0),
                               stats_from_tensor(&f->c, t, eik, 0)};
    const TensorStats *b[3] = {stats_from_tensor(&cached, t, eij, 0),
                               stats_from_tensor(&cached, t, ejk, 0),
                               stats_from_tensor(&cached, t, eik, 0)};
    TensorStats *ja = stats_join(&f->c, a, 3, 0);
    TensorStats *jb = stats_join(&cached, b, 3, 0);
    ck_assert_double_eq(total(&f->c, ja), total(&cached, jb));
    ck_assert_double_eq(stats_estimate(&f->c, ja, I | J, I),
                        stats_estimate(&cached, jb, I | J, I));
    ck_assert_int_eq(stats_num_constraints(a[0]),
                     stats_num_constraints(b[0]));
  }
  fix_free(f);
  galley_tensor_free(t);
}
END_TEST

START_TEST(karate_triangles) {
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/karate.mtx", test_data_dir());
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_msg(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err) ==
                    GALLEY_OK,
                "read %s: %s", path, err.msg);
  Fix *f = fix_new(34);
  /* true count of (i, j, k) with all three edges, by brute force */
  int64_t tri = 0;
  for (int64_t i = 0; i < 34; i++)
    for (int64_t j = 0; j < 34; j++) {
      int64_t ij[2] = {i, j};
      if (galley_tensor_get(t, ij, NULL) == 0) continue;
      for (int64_t k = 0; k < 34; k++) {
        int64_t jk[2] = {j, k}, ik[2] = {i, k};
        tri += galley_tensor_get(t, jk, NULL) != 0 &&
               galley_tensor_get(t, ik, NULL) != 0;
      }
    }
  ck_assert_int_eq(tri, 270); /* 45 triangles, 6 orderings */
  int eij[2] = {0, 1}, ejk[2] = {1, 2}, eik[2] = {0, 2};
  const StatsContext *cs[2] = {&f->c, &f->cu};
  for (int q = 0; q < 2; q++) {
    const StatsContext *c = cs[q];
    const TensorStats *e[3] = {stats_from_tensor(c, t, eij, 0),
                               stats_from_tensor(c, t, ejk, 0),
                               stats_from_tensor(c, t, eik, 0)};
    ck_assert_double_eq_tol(total(c, e[0]), 156, 1e-9);
    TensorStats *j = stats_map(c, op(f, "*"), e, 3);
    TensorStats *s = stats_aggregate(c, op(f, "+"), j, I | J | K);
    double bound = total(c, j);
    printf("karate triangle join: %s estimate %.1f (true %lld), scalar %g\n",
           q == 0 ? "chain" : "uniform", bound, (long long)tri, total(c, s));
    assert_sane(bound);
    if (q == 0) {
      ck_assert(bound >= (double)tri);
      ck_assert(bound <= 156.0 * 17); /* the best single chain */
      ck_assert_double_eq(total(c, s), 1);
    } else {
      ck_assert_double_eq_tol(bound, 156.0 * 156 * 156 / (34.0 * 34 * 34),
                              1e-9);
    }
  }
  galley_tensor_free(t);
  fix_free(f);
}
END_TEST

/* ---- dense and high-rank inputs ---- */

START_TEST(dense_bounded) {
  Fix *f = fix_new(1);
  int64_t d[4] = {3, 4, 5, 6};
  for (int k = 0; k < 4; k++) f->dims[k] = d[k];
  double vals[360];
  for (int k = 0; k < 360; k++) vals[k] = 1 + k % 7;
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_dense(4, d, vals, 0, NULL, &t, &err),
                   GALLEY_OK);
  int idx[4] = {0, 1, 2, 3};
  TensorStats *s = stats_from_tensor(&f->c, t, idx, 0);
  ck_assert_int_le(stats_num_constraints(s), STATS_MAX_TENSOR_CONSTRAINTS);
  ck_assert_int_eq(stats_num_constraints(s), 0); /* nothing beyond sizes */
  ck_assert_double_eq(total(&f->c, s), 360);
  ck_assert_double_eq(stats_estimate(&f->c, s, I | K, I), 5);
  galley_tensor_free(t);
  fix_free(f);
}
END_TEST

START_TEST(high_rank_capped) {
  Fix *f = fix_new(3);
  test_rng r = test_rng_seed(7);
  int64_t d[8] = {3, 3, 3, 3, 3, 3, 3, 3};
  int n = 400;
  int64_t *coords = malloc((size_t)n * 8 * sizeof *coords);
  for (int e = 0; e < n * 8; e++) coords[e] = test_rng_below(&r, 3);
  galley_tensor *t = from_coo(8, d, n, coords, NULL, 0);
  free(coords);
  int64_t nnz = galley_tensor_nnz(t);
  int idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  TensorStats *s = stats_from_tensor(&f->c, t, idx, 0);
  printf("rank 8: %d constraints\n", stats_num_constraints(s));
  ck_assert_int_le(stats_num_constraints(s), STATS_MAX_TENSOR_CONSTRAINTS);
  ck_assert_double_eq(total(&f->c, s), (double)nnz);
  galley_degree_stats ds;
  ck_assert_int_eq(galley_tensor_degree_stats(t, &ds, NULL), GALLEY_OK);
  for (unsigned m = 1; m < 256; m++) /* projections stay bounds */
    ck_assert(stats_estimate(&f->c, s, m, 0) >= (double)ds.distinct[m]);
  galley_tensor_free(t);
  fix_free(f);
}
END_TEST


/* ---- inputs large enough to be sampled ---- */

static int cmp3(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  for (int m = 0; m < 3; m++)
    if (x[m] != y[m]) return x[m] < y[m] ? -1 : 1;
  return 0;
}

static int cmp6(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  for (int m = 0; m < 6; m++)
    if (x[m] != y[m]) return x[m] < y[m] ? -1 : 1;
  return 0;
}

/* The true max over values of the modes in cond of the number of
 * distinct values of the modes in target (cond ⊆ target), by sorting
 * rows of (cond's coordinates, the rest of target's). */
static int64_t sorted_degree(const int64_t *c, int64_t n, unsigned target,
                             unsigned cond, int64_t *buf) {
  for (int64_t e = 0; e < n; e++)
    for (int m = 0; m < 3; m++) {
      buf[6 * e + m] = cond >> m & 1 ? c[3 * e + m] : 0;
      buf[6 * e + 3 + m] = (target & ~cond) >> m & 1 ? c[3 * e + m] : 0;
    }
  qsort(buf, (size_t)n, 6 * sizeof *buf, cmp6);
  int64_t best = 0, run = 0;
  for (int64_t e = 0; e < n; e++) {
    const int64_t *x = buf + 6 * e, *y = buf + 6 * (e - 1);
    if (e > 0 && memcmp(x, y, 6 * sizeof *x) == 0) continue; /* same target */
    if (e == 0 || memcmp(x, y, 3 * sizeof *x) != 0) run = 0; /* new cond */
    if (++run > best) best = run;
  }
  return best;
}

/* An order-3 input with correlated modes and ~100k entries, beyond
 * 2 * STATS_SAMPLE: its statistic (one exact pass, the pairs from a
 * sample) still bounds every projection and conditional fan-out. */
START_TEST(sampled_input_bounds) {
  test_rng r = test_rng_seed(31337);
  int64_t want = 100000, dims[3] = {4000, 300, 900};
  int64_t *c = malloc((size_t)want * 3 * sizeof *c);
  int64_t *buf = malloc((size_t)want * 6 * sizeof *buf);
  ck_assert(c && buf);
  for (int64_t e = 0; e < want; e++) {
    int64_t g = test_rng_below(&r, 1 + test_rng_below(&r, 20000));
    c[3 * e] = test_rng_below(&r, dims[0]);
    c[3 * e + 1] = (g * 13) % dims[1];
    c[3 * e + 2] = (g + test_rng_below(&r, 4)) % dims[2];
  }
  qsort(c, (size_t)want, 3 * sizeof *c, cmp3);
  int64_t n = 0;
  for (int64_t e = 0; e < want; e++)
    if (n == 0 || cmp3(c + 3 * e, c + 3 * (n - 1)) != 0)
      memmove(c + 3 * n++, c + 3 * e, 3 * sizeof *c);
  galley_tensor *t = from_coo(3, dims, n, c, NULL, 0);
  galley_degree_stats ds;
  rt_degree_info info;
  ck_assert_int_eq(rt_degree_stats(t, STATS_SAMPLE, &ds, &info, NULL),
                   GALLEY_OK);
  ck_assert_int_gt(info.sampled, 0); /* the sample is exercised */
  int open = 0;
  for (unsigned S = 0; S < 8; S++) open += !info.exact[S];
  ck_assert_int_gt(open, 0);
  Fix *f = fix_new(1);
  for (int m = 0; m < 3; m++) f->dims[m] = dims[m];
  int ijk[3] = {0, 1, 2};
  TensorStats *st = stats_from_tensor(&f->c, t, ijk, 0);
  int checks = 0;
  for (unsigned T = 1; T < 8; T++)
    for (unsigned C = T;; C = (C - 1) & T) {
      if (C != T) {
        int64_t truth = sorted_degree(c, n, T, C, buf);
        double est = stats_estimate(&f->c, st, T, C);
        ck_assert_msg(est >= (double)truth, "(%x|%x): %g < true %lld", C, T,
                      est, (long long)truth);
        checks++;
      }
      if (!C) break;
    }
  ck_assert_int_eq(checks, 19);
  fix_free(f);
  galley_tensor_free(t);
  free(c);
  free(buf);
}
END_TEST

/* A cache entry whose tensor changed under it is computed again: here
 * the values of a wrapped CSR changed in place, then the tensor touched
 * (galley_tensor_touch), as its contract asks. */
START_TEST(cache_sees_changes) {
  enum { N = 40 };
  int64_t rowptr[N + 1], colidx[3 * N];
  double vals[3 * N];
  for (int i = 0; i <= N; i++) rowptr[i] = 3 * i;
  for (int e = 0; e < 3 * N; e++) {
    colidx[e] = (e % 3) * 7 + (e / 3) % 5; /* 15 distinct columns */
    vals[e] = 1;
  }
  galley_tensor *t = NULL;
  ck_assert_int_eq(
      galley_tensor_wrap_csr(N, N, rowptr, colidx, vals, 0, &t, NULL),
      GALLEY_OK);
  Fix *f = fix_new(N);
  StatsContext cached = f->c;
  cached.cache = stats_cache_new(f->arena);
  int ij[2] = {0, 1};
  double before = stats_estimate(&cached, stats_from_tensor(&cached, t, ij, 0),
                                 J, 0);
  ck_assert_double_eq(before, 15);
  for (int e = 0; e < 3 * N; e++)
    if (e % 3) vals[e] = 0; /* the fill: 5 columns left */
  galley_tensor_touch(t);
  stats_cache_recheck(cached.cache); /* as a program's next plan does */
  double fresh = stats_estimate(&f->c, stats_from_tensor(&f->c, t, ij, 0), J, 0);
  double again = stats_estimate(&cached, stats_from_tensor(&cached, t, ij, 0),
                                J, 0);
  ck_assert_double_eq(fresh, 5);
  ck_assert_double_eq(again, fresh);
  ck_assert_int_eq(stats_cache_nnz(cached.cache, t), N);
  fix_free(f);
  galley_tensor_free(t);
}
END_TEST

/* ---- speed ---- */

START_TEST(speed) {
  Fix *f = fix_new(1000);
  const TensorStats *m[5];
  for (int k = 0; k < 5; k++) {
    IdxSet x = (IdxSet)1 << k, y = (IdxSet)1 << (k + 1);
    TensorStats *s = stats_new(&f->c, x | y, 5000 + 100 * k, 0);
    stats_add_constraint(&f->c, s, x, y, 10 + k);
    stats_add_constraint(&f->c, s, y, x, 20 - k);
    stats_add_constraint(&f->c, s, 0, x, 900);
    stats_add_constraint(&f->c, s, 0, y, 800);
    m[k] = s;
  }
  TensorStats *j = stats_join(&f->c, m, 5, 0);
  ck_assert_uint_eq(stats_indices(j), 63);
  /* the first search of j makes its memo of bounds (chain.c), once */
  double first = stats_estimate(&f->c, j, 1, 0);
  size_t before = f->arena->bytes;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  double sum = 0;
  for (int q = 0; q < 100000; q++) {
    IdxSet t = 1 + (IdxSet)(q % 63);
    IdxSet c = t & (IdxSet)(q / 63 % 64);
    sum += stats_estimate(&f->c, j, t, c);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  printf("speed: 100000 chain estimates on a 6-index chain join in %.3f s "
         "(%.2f us each, checksum %g, %zu arena bytes)\n",
         secs, secs * 10, sum, f->arena->bytes - before);
  ck_assert(secs < 2.0);
  ck_assert_uint_eq(f->arena->bytes, before); /* no allocation per call */
  ck_assert_double_eq(stats_estimate(&f->c, j, 1, 0), first);
  ck_assert_double_eq(total(&f->c, j),
                      5000.0 * 11 * 12 * 13 * 14); /* chain from the left */
  fix_free(f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("estimate");
  TCase *tc = tcase_create("notes_5_3");
  tcase_add_test(tc, single);
  tcase_add_test(tc, join1);
  tcase_add_test(tc, join2);
  tcase_add_test(tc, triangle_card);
  tcase_add_test(tc, reduces);
  tcase_add_test(tc, unions);
  tcase_add_test(tc, disjoint_unions);
  tcase_add_test(tc, mixture);
  tcase_add_test(tc, nan_fill_is_no_join);
  tcase_add_test(tc, conditional);
  suite_add_tcase(s, tc);

  tc = tcase_create("uniform");
  tcase_add_test(tc, uniform_formulas);
  tcase_add_test(tc, uniform_from_tensors);
  suite_add_tcase(s, tc);

  tc = tcase_create("edge");
  tcase_add_test(tc, degenerate);
  tcase_add_test(tc, dense_bounded);
  tcase_add_test(tc, high_rank_capped);
  suite_add_tcase(s, tc);

  tc = tcase_create("data");
  tcase_add_test(tc, random_upper_bounds);
  tcase_add_test(tc, karate_triangles);
  tcase_add_test(tc, cache_same_estimates);
  tcase_add_test(tc, cache_sees_changes);
  tcase_add_test(tc, sampled_input_bounds);
  tcase_add_test(tc, product_real_matrices);
  tcase_add_test(tc, product_random_matrix);
  tcase_add_test(tc, product_needs_rows);
  tcase_add_test(tc, product_plan_not_dense);
  tcase_add_test(tc, speed);
  suite_add_tcase(s, tc);

  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
