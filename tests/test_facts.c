/*
 * test_facts.c -- what a tensor keeps about its values (runtime/facts.c)
 * and the lean run path built on it:
 *   - the facts (nnz, stored, min, max, NaN and infinity counts,
 *     integrality) of random tensors in every level format, with NaN,
 *     infinities, negative, whole and fractional values and non-zero
 *     (also NaN and infinite) fills, against a naive count over
 *     galley_tensor_foreach;
 *   - symmetry of symmetric and nearly symmetric matrices in every
 *     format, against the dense image;
 *   - facts computed once: binding computes them, later calls and runs
 *     read them (values changed behind the library's back go unnoticed
 *     until galley_tensor_touch, which is what proves no run re-scans);
 *   - the re-run rule on kept facts (nnz beyond a factor of 2 after
 *     touch, format, dims, finiteness);
 *   - the transpose of an input kept with it across runs, equal to a
 *     fresh conversion, dropped by touch;
 *   - several threads making the facts and copies of one tensor at once.
 * Every random input comes from a fixed seed.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "rt_internal.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static int same_value(double a, double b) {
  return a == b || memcmp(&a, &b, sizeof a) == 0;
}

static galley_format parse_format(const char *text, int order) {
  galley_format f;
  galley_error err;
  ck_assert_msg(galley_format_parse(text, order, &f, &err) == GALLEY_OK,
                "%s: %s", text, err.msg);
  return f;
}

/* A random value of one of the kinds the facts tell apart; whole only
 * picks whole numbers (some huge, some -0). */
static double random_value(test_rng *r, int whole, double fill) {
  static const double special[] = {NAN, INFINITY, -INFINITY};
  int64_t k = test_rng_below(r, whole ? 5 : 9);
  switch (k) {
  case 0:
    return (double)(test_rng_below(r, 21) - 10);
  case 1:
    return -0.0;
  case 2: /* odd 53-bit mantissas from 1 to 2^953: whole */
    return ldexp((double)((test_rng_next(r) >> 11) | 1),
                 (int)test_rng_below(r, 901) - 52);
  case 3:
    return fill; /* a stored fill */
  case 4:
    return (double)test_rng_below(r, 3);
  case 5:
  case 6:
    return test_rng_double(r, -100, 100);
  case 7:
    return (double)test_rng_below(r, 8) + 0.5;
  default:
    return special[test_rng_below(r, 3)];
  }
}

/* The facts counted naively from the stored entries (nnz apart). */
static int naive_entry(void *ud, const int64_t *coord, double v) {
  (void)coord;
  galley_facts *f = ud;
  f->stored++;
  if (isnan(v)) {
    f->nan++;
    f->integer = 0;
  } else if (isinf(v)) {
    *(v > 0 ? &f->pos_inf : &f->neg_inf) += 1;
    f->integer = 0;
  } else {
    if (v < f->min)
      f->min = v;
    if (v > f->max)
      f->max = v;
    if (floor(v) != v)
      f->integer = 0;
  }
  return 0;
}

typedef struct NnzCount {
  double fill;
  int64_t nnz;
} NnzCount;

static int naive_nnz(void *ud, const int64_t *coord, double v) {
  (void)coord;
  NnzCount *c = ud;
  c->nnz += !same_value(v, c->fill);
  return 0;
}

static galley_facts naive_facts(const galley_tensor *t) {
  galley_facts f = {0};
  f.min = INFINITY;
  f.max = -INFINITY;
  f.integer = 1;
  galley_tensor_foreach(t, naive_entry, &f);
  NnzCount c = {galley_tensor_fill(t), 0};
  galley_tensor_foreach(t, naive_nnz, &c);
  f.nnz = c.nnz;
  return f;
}

static void check_facts(const galley_tensor *t, const char *what) {
  galley_facts want = naive_facts(t), got;
  galley_error err;
  ck_assert_int_eq(galley_tensor_facts(t, &got, &err), GALLEY_OK);
  ck_assert_msg(got.stored == want.stored, "%s: stored %lld, want %lld", what,
                (long long)got.stored, (long long)want.stored);
  ck_assert_msg(got.nnz == want.nnz, "%s: nnz %lld, want %lld", what,
                (long long)got.nnz, (long long)want.nnz);
  ck_assert_msg(got.nan == want.nan && got.pos_inf == want.pos_inf &&
                    got.neg_inf == want.neg_inf,
                "%s: NaN/+inf/-inf %lld %lld %lld, want %lld %lld %lld", what,
                (long long)got.nan, (long long)got.pos_inf,
                (long long)got.neg_inf, (long long)want.nan,
                (long long)want.pos_inf, (long long)want.neg_inf);
  ck_assert_msg(got.min == want.min && got.max == want.max,
                "%s: range [%g, %g], want [%g, %g]", what, got.min, got.max,
                want.min, want.max);
  ck_assert_msg(got.integer == want.integer, "%s: integer %d, want %d", what,
                got.integer, want.integer);
  ck_assert_int_eq(galley_tensor_nnz(t), want.nnz);
  ck_assert_int_eq(galley_tensor_stored(t), want.stored);
}

/* A random tensor of the given order and dims in fmt: each cell stored
 * with probability density/8, distinct coordinates. */
static galley_tensor *random_tensor(test_rng *r, int order,
                                    const int64_t *dims, int density,
                                    int whole, double fill,
                                    const galley_format *fmt) {
  int64_t cells = 1;
  for (int k = 0; k < order; k++)
    cells *= dims[k];
  int64_t *crd = malloc((size_t)(cells * order + 1) * sizeof *crd);
  double *val = malloc((size_t)(cells + 1) * sizeof *val);
  int64_t n = 0;
  for (int64_t c = 0; c < cells; c++) {
    if (test_rng_below(r, 8) >= density)
      continue;
    for (int k = order - 1; k >= 0; k--) {
      int64_t div = 1;
      for (int m = k + 1; m < order; m++)
        div *= dims[m];
      crd[n * order + k] = (c / div) % dims[k];
    }
    val[n++] = random_value(r, whole, fill);
  }
  if (order == 0 && n > 1)
    n = 1; /* a scalar: one value, not a sum */
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_msg(galley_tensor_from_coo(order, dims, n, crd, val, fill, fmt,
                                       &t, &err) == GALLEY_OK,
                "%s", err.msg);
  free(crd);
  free(val);
  return t;
}

/* ------------------------------------------------------------------ */
/* Facts                                                               */
/* ------------------------------------------------------------------ */

static const struct {
  int order;
  const char *fmt;
} formats[] = {
    {0, ""},
    {1, "dense"},
    {1, "list"},
    {1, "hash"},
    {1, "bytemap"},
    {2, "dense,dense"},
    {2, "dense,list"},
    {2, "dense:1,list:0"},
    {2, "list,list"},
    {2, "list:1,hash:0"},
    {2, "hash,hash"},
    {2, "bytemap,list"},
    {2, "hash,bytemap"},
    {2, "bytemap,dense"}, /* dense slots under unset bytemap entries */
    {2, "list,dense"},
    {3, "dense,list,list"},
    {3, "list,bytemap,dense"},
    {3, "hash:2,dense:0,list:1"},
};
#define NFORMATS (int)(sizeof formats / sizeof formats[0])

static const double fills[] = {0, 1.5, -2, NAN, INFINITY};
#define NFILLS (int)(sizeof fills / sizeof fills[0])

START_TEST(facts_every_format) {
  test_rng r = test_rng_seed(11);
  static const int64_t dims[3] = {7, 5, 6};
  int cases = 0;
  for (int k = 0; k < NFORMATS; k++)
    for (int fi = 0; fi < NFILLS; fi++)
      for (int whole = 0; whole < 2; whole++)
        for (int density = 0; density <= 8; density += 2) {
          galley_format fmt = formats[k].order
                                  ? parse_format(formats[k].fmt,
                                                 formats[k].order)
                                  : galley_format_default(0);
          galley_tensor *t = random_tensor(&r, formats[k].order, dims,
                                           density, whole, fills[fi], &fmt);
          char what[128];
          snprintf(what, sizeof what, "format '%s' fill %g whole %d density %d",
                   formats[k].fmt, fills[fi], whole, density);
          check_facts(t, what);
          check_facts(t, what); /* kept: the same again */
          galley_tensor_free(t);
          cases++;
        }
  ck_assert_int_gt(cases, 100);
}
END_TEST

/* Long runs of values: the vector path's blocks, a fraction or a
 * non-finite value early, late or nowhere. */
START_TEST(facts_long_runs) {
  int64_t n = 20011; /* not a multiple of the block or of 4 */
  double *v = malloc((size_t)n * sizeof *v);
  static const int64_t where[] = {-1, 0, 3, 4097, 20010};
  static const double odd[] = {0.25, NAN, -INFINITY, 1e300,
                               -0x1.0000000000001p105};
  for (int w = 0; w < 5; w++)
    for (int o = 0; o < 5; o++) {
      for (int64_t q = 0; q < n; q++)
        v[q] = (double)((q * 7919) % 2001 - 1000);
      if (where[w] >= 0)
        v[where[w]] = odd[o];
      galley_tensor *t = NULL;
      galley_error err;
      galley_format dense = galley_format_dense(1);
      ck_assert_int_eq(galley_tensor_from_dense(1, &n, v, 3, &dense, &t,
                                                &err),
                       GALLEY_OK);
      check_facts(t, "long run");
      galley_facts f;
      galley_tensor_facts(t, &f, NULL);
      ck_assert_int_eq(f.integer, where[w] < 0 || o >= 3);
      galley_tensor_free(t);
    }
  free(v);
}
END_TEST

/* Runs of one value (the 1s of a 0/1 table: the pass counts whole blocks
 * of equal bits at once): all equal, or one other value at the start, at
 * a block's edges or at the end; the value being the fill, a NaN, -0 or
 * a fraction. */
START_TEST(facts_constant_runs) {
  int64_t n = 20011;
  double *v = malloc((size_t)n * sizeof *v);
  static const int64_t where[] = {-1, 0, 4095, 4096, 8200, 20010};
  static const double base[] = {1.0, 3.0 /* the fill */, NAN, -0.0, 0.5};
  static const double odd[] = {2.0, 3.0, NAN, INFINITY, 0.75};
  for (int b = 0; b < 5; b++)
    for (int w = 0; w < 6; w++)
      for (int o = 0; o < 5; o++) {
        for (int64_t q = 0; q < n; q++)
          v[q] = base[b];
        if (where[w] >= 0)
          v[where[w]] = odd[o];
        galley_tensor *t = NULL;
        galley_error err;
        galley_format dense = galley_format_dense(1);
        ck_assert_int_eq(
            galley_tensor_from_dense(1, &n, v, 3, &dense, &t, &err),
            GALLEY_OK);
        char what[64];
        snprintf(what, sizeof what, "constant run %d at %lld, odd %d", b,
                 (long long)where[w], o);
        check_facts(t, what);
        galley_tensor_free(t);
      }
  free(v);
}
END_TEST

START_TEST(facts_empty_and_errors) {
  int64_t dims[2] = {4, 4};
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, 0, NULL, NULL, 7, NULL,
                                          &t, &err),
                   GALLEY_OK);
  galley_facts f;
  ck_assert_int_eq(galley_tensor_facts(t, &f, &err), GALLEY_OK);
  ck_assert_int_eq(f.stored, 0);
  ck_assert_int_eq(f.nnz, 0);
  ck_assert(f.min == INFINITY && f.max == -INFINITY);
  ck_assert_int_eq(f.integer, 1);
  ck_assert_int_eq(galley_tensor_facts(NULL, &f, &err), GALLEY_EINVAL);
  ck_assert_int_eq(galley_tensor_facts(t, NULL, &err), GALLEY_EINVAL);
  ck_assert_int_eq(galley_tensor_is_symmetric(NULL), 0);
  galley_tensor_touch(NULL);
  galley_tensor_free(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Symmetry                                                            */
/* ------------------------------------------------------------------ */

static int naive_symmetric(const galley_tensor *t) {
  if (galley_tensor_order(t) != 2 ||
      galley_tensor_dim(t, 0) != galley_tensor_dim(t, 1))
    return 0;
  int64_t n = galley_tensor_dim(t, 0);
  double *d = malloc((size_t)(n * n + 1) * sizeof *d);
  ck_assert_int_eq(galley_tensor_to_dense(t, d, n * n, NULL), GALLEY_OK);
  int sym = 1;
  for (int64_t i = 0; i < n && sym; i++)
    for (int64_t j = 0; j < n && sym; j++)
      sym = same_value(d[i * n + j], d[j * n + i]);
  free(d);
  return sym;
}

/* A random symmetric n x n matrix as COO entries, then one of the
 * perturbations: 0 none, 1 one value changed, 2 an entry without its
 * mirror, 3 one entry of a pair removed, 4 a stored fill without its
 * mirror (still symmetric), 5 one NaN of a pair with other bits. */
static int64_t symmetric_entries(test_rng *r, int64_t n, double fill,
                                 int perturb, int64_t *crd, double *val) {
  int64_t m = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = i; j < n; j++) {
      if (test_rng_below(r, 3) != 0)
        continue;
      double v = test_rng_below(r, 6) == 0 ? NAN
                                           : (double)test_rng_below(r, 9) - 4;
      if (same_value(v, fill))
        v = fill + 1;
      crd[2 * m] = i, crd[2 * m + 1] = j, val[m++] = v;
      if (i != j)
        crd[2 * m] = j, crd[2 * m + 1] = i, val[m++] = v;
    }
  int64_t e = m > 0 ? test_rng_below(r, m) : 0;
  int64_t a = test_rng_below(r, n), b = (a + 1 + test_rng_below(r, n - 1)) % n;
  switch (m > 0 ? perturb : 0) {
  case 1:
    val[e] = isnan(val[e]) ? 1 : val[e] + 0.5;
    break;
  case 2:
  case 4: {
    int found = 0; /* (a, b) and (b, a) must be absent */
    for (int64_t k = 0; k < m; k++)
      found |= (crd[2 * k] == a && crd[2 * k + 1] == b) ||
               (crd[2 * k] == b && crd[2 * k + 1] == a);
    if (!found)
      crd[2 * m] = a, crd[2 * m + 1] = b,
      val[m++] = perturb == 4 ? fill : 3.25;
    break;
  }
  case 3:
    crd[2 * e] = crd[2 * (m - 1)], crd[2 * e + 1] = crd[2 * (m - 1) + 1];
    val[e] = val[m - 1];
    m--;
    break;
  case 5:
    for (int64_t k = 0; k < m; k++)
      if (isnan(val[k]) && crd[2 * k] != crd[2 * k + 1]) {
        uint64_t bits;
        memcpy(&bits, &val[k], sizeof bits);
        bits ^= 1; /* another NaN payload */
        memcpy(&val[k], &bits, sizeof bits);
        break;
      }
    break;
  default:
    break;
  }
  return m;
}

static const char *const matrix_formats[] = {
    "dense,list", "dense:1,list:0", "list,list", "list:1,list:0",
    "list:1,hash:0", "hash,hash", "bytemap,list", "dense,dense",
    "bytemap,dense", "hash,bytemap"};

START_TEST(symmetric_every_format) {
  test_rng r = test_rng_seed(23);
  int64_t crd[2 * 400], seen[2] = {0, 0};
  double val[400];
  for (int trial = 0; trial < 60; trial++) {
    int64_t n = 2 + test_rng_below(&r, 12), dims[2] = {n, n};
    double fill = trial % 3 == 0 ? 0 : trial % 3 == 1 ? 2 : NAN;
    int perturb = trial % 6;
    int64_t m = symmetric_entries(&r, n, fill, perturb, crd, val);
    for (size_t k = 0; k < sizeof matrix_formats / sizeof *matrix_formats;
         k++) {
      galley_format fmt = parse_format(matrix_formats[k], 2);
      galley_tensor *t = NULL;
      galley_error err;
      ck_assert_msg(galley_tensor_from_coo(2, dims, m, crd, val, fill, &fmt,
                                           &t, &err) == GALLEY_OK,
                    "%s", err.msg);
      int want = naive_symmetric(t);
      ck_assert_msg(galley_tensor_is_symmetric(t) == want,
                    "trial %d (perturbation %d, fill %g) format %s: "
                    "symmetric should be %d",
                    trial, perturb, fill, matrix_formats[k], want);
      ck_assert_int_eq(galley_tensor_is_symmetric(t), want); /* kept */
      ck_assert_int_eq(rt_tensor_symmetric(t), want);
      seen[want]++;
      galley_tensor_free(t);
    }
  }
  ck_assert_int_gt(seen[0], 50); /* both answers were exercised */
  ck_assert_int_gt(seen[1], 50);
}
END_TEST

START_TEST(symmetric_shapes) {
  galley_error err;
  galley_tensor *t = NULL;
  int64_t d2[2] = {3, 4}, d1 = 3, d3[3] = {2, 2, 2};
  ck_assert_int_eq(galley_tensor_from_coo(2, d2, 0, NULL, NULL, 0, NULL, &t,
                                          &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_is_symmetric(t), 0); /* not square */
  galley_tensor_free(t);
  ck_assert_int_eq(galley_tensor_from_coo(1, &d1, 0, NULL, NULL, 0, NULL, &t,
                                          &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_is_symmetric(t), 0);
  galley_tensor_free(t);
  ck_assert_int_eq(galley_tensor_from_coo(3, d3, 0, NULL, NULL, 0, NULL, &t,
                                          &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_is_symmetric(t), 0);
  galley_tensor_free(t);
  /* the empty square matrix is symmetric */
  int64_t sq[2] = {5, 5};
  ck_assert_int_eq(galley_tensor_from_coo(2, sq, 0, NULL, NULL, 0, NULL, &t,
                                          &err),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_is_symmetric(t), 1);
  galley_tensor_free(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Kept, and dropped by touch                                          */
/* ------------------------------------------------------------------ */

/* An n x n CSR matrix over caller arrays: row i holds columns i, i+1,
 * i+3 (mod n, sorted). */
typedef struct Csr {
  int64_t n, rowptr[65], colidx[3 * 64];
  double vals[3 * 64];
} Csr;

static void csr_init(Csr *c, int64_t n) {
  c->n = n;
  c->rowptr[0] = 0;
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t cols[3] = {i, (i + 1) % n, (i + 3) % n};
    for (int a = 0; a < 3; a++) /* sort the three */
      for (int b = a + 1; b < 3; b++)
        if (cols[b] < cols[a]) {
          int64_t x = cols[a];
          cols[a] = cols[b];
          cols[b] = x;
        }
    for (int a = 0; a < 3; a++)
      if (a == 0 || cols[a] != cols[a - 1]) {
        c->colidx[k] = cols[a];
        c->vals[k++] = (double)(1 + (i + a) % 4);
      }
    c->rowptr[i + 1] = k;
  }
}

static galley_tensor *csr_wrap(Csr *c) {
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_wrap_csr(c->n, c->n, c->rowptr, c->colidx,
                                          c->vals, 0, &t, &err),
                   GALLEY_OK);
  return t;
}

START_TEST(facts_kept_until_touch) {
  Csr c;
  csr_init(&c, 20);
  galley_tensor *A = csr_wrap(&c);
  ck_assert_ptr_null(rt_tensor_cached_facts(A));
  int64_t stored = c.rowptr[20];
  ck_assert_int_eq(galley_tensor_nnz(A), stored);
  ck_assert_ptr_nonnull(rt_tensor_cached_facts(A));
  for (int64_t k = 0; k < stored; k += 2)
    c.vals[k] = 0; /* behind the library's back */
  ck_assert_int_eq(galley_tensor_nnz(A), stored); /* kept: not re-counted */
  galley_tensor_touch(A);
  ck_assert_ptr_null(rt_tensor_cached_facts(A));
  ck_assert_int_eq(galley_tensor_nnz(A), stored / 2);
  check_facts(A, "after touch");
  galley_tensor_free(A);
}
END_TEST

static const char mv_tin[] = "input A[i, j], x[j]\ny[i] = A[i, j] * x[j]\n";
/* A read by columns: the plan transposes A */
static const char tmv_tin[] =
    "input A[i, j], x[i]\ny[j] = sum(i: A[i, j] * x[i])\n";

static galley_program *program(const char *text, galley_planner planner) {
  galley_program *p = NULL;
  galley_error err;
  ck_assert_int_eq(galley_program_parse("t.tin", text, strlen(text), &p, NULL,
                                        &err),
                   GALLEY_OK);
  galley_program_set_planner(p, planner);
  return p;
}

static galley_tensor *ones(int64_t n) {
  double v[64];
  for (int64_t k = 0; k < n; k++)
    v[k] = 1 + (double)(k % 3);
  galley_tensor *t = NULL;
  galley_format dense = galley_format_dense(1);
  ck_assert_int_eq(galley_tensor_from_dense(1, &n, v, 0, &dense, &t, NULL),
                   GALLEY_OK);
  return t;
}

/* Run p and return whether it planned again; its output 0 must equal
 * the reference evaluator's on the same data. */
static int run_checked(galley_program *p) {
  galley_error err;
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
  galley_run_info info;
  galley_program_run_info(p, &info);
  const galley_tensor *y = galley_program_output(p, 0);
  int64_t n = galley_tensor_dim(y, 0);
  double got[64], want[64];
  ck_assert_int_eq(galley_tensor_to_dense(y, got, n, NULL), GALLEY_OK);
  ck_assert_int_eq(galley_program_run_reference(p, &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_to_dense(galley_program_output(p, 0), want,
                                          n, NULL),
                   GALLEY_OK);
  for (int64_t k = 0; k < n; k++)
    ck_assert_msg(got[k] == want[k], "y[%lld] = %g, want %g", (long long)k,
                  got[k], want[k]);
  return info.replanned;
}

/* Run p and return whether it planned again, its output unchecked. */
static int run_unchecked(galley_program *p) {
  galley_error err;
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
  galley_run_info info;
  galley_program_run_info(p, &info);
  return info.replanned;
}

static void bind(galley_program *p, const char *name, const galley_tensor *t) {
  galley_error err;
  ck_assert_msg(galley_program_bind(p, name, t, &err) == GALLEY_OK, "%s",
                err.msg);
}

/* Runs read the facts kept since bind: values changed without touch go
 * unnoticed by the re-run rule (they would be noticed by any scan), and
 * noticed after touch. */
START_TEST(runs_do_not_rescan) {
  Csr c;
  csr_init(&c, 40);
  galley_tensor *A = csr_wrap(&c), *x = ones(40);
  galley_program *p = program(mv_tin, GALLEY_PLANNER_COST);
  ck_assert_ptr_null(rt_tensor_cached_facts(A));
  bind(p, "A", A);
  bind(p, "x", x);
  ck_assert_ptr_nonnull(rt_tensor_cached_facts(A)); /* made at bind */
  ck_assert_ptr_nonnull(rt_tensor_cached_facts(x));
  const galley_facts *kept = rt_tensor_cached_facts(A);
  ck_assert_int_eq(run_checked(p), 1);
  for (int k = 0; k < 100; k++)
    ck_assert_int_eq(run_checked(p), 0);
  ck_assert_ptr_eq(rt_tensor_cached_facts(A), kept); /* never remade */
  int64_t stored = c.rowptr[40];
  for (int64_t k = 0; k < stored; k++)
    if (k % 5)
      c.vals[k] = 0; /* nnz drops 5x */
  /* not scanned: not noticed (the values the run reads are outside the
   * contract, which asks for galley_tensor_touch: the sliced copy kept
   * with A still holds the old ones) */
  ck_assert_int_eq(run_unchecked(p), 0);
  galley_tensor_touch(A);
  ck_assert_int_eq(run_checked(p), 1); /* noticed */
  ck_assert_int_eq(run_checked(p), 0);
  for (int64_t k = 0; k < stored; k++)
    c.vals[k] = (double)(k % 3 + 1); /* back up 5x */
  galley_tensor_touch(A);
  ck_assert_int_eq(run_checked(p), 1);
  for (int64_t k = 0; k < stored; k++)
    c.vals[k] *= -2; /* same nnz: the plan stays */
  galley_tensor_touch(A);
  ck_assert_int_eq(run_checked(p), 0);
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(x);
}
END_TEST

/* Whether p's physical plan prints `what`. */
static int plan_has(galley_program *p, const char *what) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  galley_error err;
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(galley_program_print_physical_plan(p, f, &err), GALLEY_OK);
  fclose(f);
  int has = strstr(text, what) != NULL;
  free(text);
  return has;
}

/* The sliced copy of SpMV's row loop (issue 11) is made by the first run
 * and kept with the input, made again after a touch (with the new
 * values); data whose padding would triple the entries, bound under the
 * same plan, runs the kernel's plain row loop instead. */
START_TEST(sliced_copy_kept_with_input) {
  Csr c, d;
  csr_init(&c, 64); /* rows of 3 entries: 16 chunks, no padding */
  galley_tensor *A = csr_wrap(&c), *x = ones(64);
  galley_program *p = program(mv_tin, GALLEY_PLANNER_COST);
  bind(p, "A", A);
  bind(p, "x", x);
  ck_assert(plan_has(p, "sliced(A)"));
  /* floats at any size (the executor then reads this copy) */
  const galley_rt_sliced *s = rt_tensor_sliced_ex(A, 0, 0);
  run_checked(p);
  ck_assert_ptr_eq(rt_tensor_sliced(A, 0), s);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(s->nchunk, 16);
  ck_assert_int_eq(s->start[16], 3 * 16);
  ck_assert_ptr_nonnull(s->val32); /* whole values: floats */
  ck_assert_ptr_null(s->val);
  ck_assert(s->val32[0] == (float)c.vals[0]);
  ck_assert_int_eq(run_checked(p), 0);
  ck_assert_ptr_eq(rt_tensor_sliced(A, 0), s); /* kept */
  ck_assert_ptr_null(rt_tensor_sliced(A, 1)); /* made for fill 0 */
  for (int64_t k = 0; k < c.rowptr[64]; k++)
    c.vals[k] *= -0.1;
  galley_tensor_touch(A);
  galley_rt_sliced *made = rt_sliced_make(A, 0, 0);
  ck_assert_ptr_nonnull(made);
  ck_assert_ptr_null(made->val32); /* tenths are no floats */
  free(made);
  run_checked(p); /* the new values */
  s = rt_tensor_sliced(A, 0);
  ck_assert_ptr_nonnull(s);
  ck_assert_ptr_nonnull(s->val); /* not floats */
  ck_assert_ptr_null(s->val32);
  ck_assert(s->val[0] == c.vals[0]);
  /* every fourth row holds 12 entries, the others none: 4 slots an
   * entry, the copy is refused */
  d.n = 64;
  int64_t k = 0;
  for (int64_t i = 0; i < 64; i++) {
    d.rowptr[i] = k;
    for (int64_t t = 0; i % 4 == 0 && t < 12; t++) {
      d.colidx[k] = t * 5;
      d.vals[k++] = (double)(i + t) / 8;
    }
  }
  d.rowptr[64] = k;
  galley_tensor *B = csr_wrap(&d);
  bind(p, "A", B);
  ck_assert_int_eq(run_checked(p), 0); /* the same plan */
  ck_assert(plan_has(p, "sliced(A)"));
  ck_assert_ptr_null(rt_tensor_sliced(B, 0));
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(B);
  galley_tensor_free(x);
}
END_TEST

/* The re-run rule on kept facts: format, dims and finiteness. */
START_TEST(rerun_rule_on_facts) {
  Csr c, d;
  csr_init(&c, 30);
  csr_init(&d, 31);
  galley_tensor *A = csr_wrap(&c), *B = csr_wrap(&d), *x = ones(30),
                *x31 = ones(31), *Acsc = NULL;
  galley_format csc = parse_format("dense:1,list:0", 2);
  ck_assert_int_eq(galley_tensor_convert(A, &csc, &Acsc, NULL), GALLEY_OK);
  galley_program *p = program(mv_tin, GALLEY_PLANNER_COST);
  FILE *log = tmpfile();
  galley_program_set_log(p, 3, log);
  bind(p, "A", A);
  bind(p, "x", x);
  ck_assert_int_eq(run_checked(p), 1);
  ck_assert_int_eq(run_checked(p), 0);
  bind(p, "A", Acsc); /* format */
  ck_assert_int_eq(run_checked(p), 1);
  ck_assert_int_eq(run_checked(p), 0);
  bind(p, "A", B); /* dims */
  bind(p, "x", x31);
  ck_assert_int_eq(run_checked(p), 1);
  bind(p, "A", A);
  bind(p, "x", x);
  ck_assert_int_eq(run_checked(p), 1);
  c.vals[7] = INFINITY; /* finiteness */
  galley_tensor_touch(A);
  ck_assert_int_eq(run_checked(p), 1);
  ck_assert_int_eq(run_checked(p), 0);
  c.vals[7] = 2;
  galley_tensor_touch(A);
  ck_assert_int_eq(run_checked(p), 1);
  long n = ftell(log);
  char *text = calloc((size_t)n + 1, 1);
  rewind(log);
  ck_assert(fread(text, 1, (size_t)n, log) == (size_t)n);
  ck_assert_msg(strstr(text, "its storage format changed"), "%s", text);
  ck_assert_msg(strstr(text, "its dims changed"), "%s", text);
  ck_assert_msg(strstr(text, "its values are no longer all finite"), "%s",
                text);
  ck_assert_msg(strstr(text, "its values became all finite"), "%s", text);
  free(text);
  fclose(log);
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(B);
  galley_tensor_free(Acsc);
  galley_tensor_free(x);
  galley_tensor_free(x31);
}
END_TEST

/* A plan that relies on its input's symmetry (the triangle sum over
 * i > j > k, each access reading E as its own transpose) must not be
 * reused for a matrix of the same shape and nnz that is not symmetric,
 * or symmetric with a non-zero diagonal (then terms with equal indices
 * count): the re-run rule checks the symmetry the plan was made with,
 * kept with each tensor. */
START_TEST(rerun_rule_on_symmetry) {
  static const char text[] =
      "input E[i, j]\ntriangles = sum(i, j, k: E[i, j] * E[j, k] * E[i, k])\n";
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/karate.mtx", test_data_dir());
  galley_tensor *K = NULL;
  galley_error err;
  ck_assert_msg(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &K, &err) ==
                    GALLEY_OK,
                "%s", err.msg);
  int64_t m, *crd;
  double *val;
  ck_assert_int_eq(galley_tensor_to_coo(K, 0, &m, &crd, &val, NULL),
                   GALLEY_OK);
  /* variants with the same dims, format, fill and nnz */
  int64_t dims[2] = {34, 34};
  galley_tensor *asym = NULL, *diag = NULL;
  int64_t *c2 = malloc((size_t)(2 * m) * sizeof *c2);
  memcpy(c2, crd, (size_t)(2 * m) * sizeof *c2);
  for (int64_t e = 0; e < m; e++) /* move one entry off its mirror */
    if (c2[2 * e] == 0 && c2[2 * e + 1] == 1) {
      c2[2 * e + 1] = 33;
      for (int64_t f = 0; f < m; f++)
        ck_assert(!(crd[2 * f] == 0 && crd[2 * f + 1] == 33));
      break;
    }
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, m, c2, val, 0, NULL,
                                          &asym, NULL),
                   GALLEY_OK);
  memcpy(c2, crd, (size_t)(2 * m) * sizeof *c2);
  for (int64_t e = 0; e < m; e++) /* a mirrored pair onto the diagonal */
    if (c2[2 * e] == 0 && c2[2 * e + 1] == 1)
      c2[2 * e] = c2[2 * e + 1] = 5;
    else if (c2[2 * e] == 1 && c2[2 * e + 1] == 0)
      c2[2 * e] = c2[2 * e + 1] = 7;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, m, c2, val, 0, NULL,
                                          &diag, NULL),
                   GALLEY_OK);
  ck_assert_int_eq(galley_tensor_stored(diag), m);
  ck_assert_int_eq(galley_tensor_is_symmetric(K), 1);
  ck_assert_int_eq(galley_tensor_is_symmetric(asym), 0);
  ck_assert_int_eq(galley_tensor_is_symmetric(diag), 1); /* not hollow */
  galley_tensor_touch(diag);
  galley_tensor_touch(K); /* the planner must ask, not find it known */
  galley_tensor_touch(asym);
  const galley_tensor *order[] = {K, asym, K, diag, K};
  galley_program *p = program(text, GALLEY_PLANNER_COST);
  for (int r = 0; r < 5; r++) {
    bind(p, "E", order[r]);
    ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
    double got = galley_tensor_get(galley_program_output(p, 0), NULL, NULL);
    galley_run_info info;
    galley_program_run_info(p, &info);
    ck_assert_int_eq(galley_program_run_reference(p, &err), GALLEY_OK);
    double want = galley_tensor_get(galley_program_output(p, 0), NULL, NULL);
    ck_assert_msg(got == want, "binding %d: %g, want %g", r, got, want);
    ck_assert_int_eq(info.replanned, 1);
  }
  galley_program_free(p);
  free(c2);
  free(crd);
  free(val);
  galley_tensor_free(K);
  galley_tensor_free(asym);
  galley_tensor_free(diag);
}
END_TEST

/* Two tensors with the same entries, entry by entry. */
static void assert_same_entries(const galley_tensor *a,
                                const galley_tensor *b) {
  int64_t na, nb, *ca, *cb;
  double *va, *vb;
  ck_assert_int_eq(galley_tensor_to_coo(a, 0, &na, &ca, &va, NULL), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_to_coo(b, 0, &nb, &cb, &vb, NULL), GALLEY_OK);
  ck_assert_int_eq(na, nb);
  int order = galley_tensor_order(a);
  for (int64_t k = 0; k < na; k++) {
    ck_assert(same_value(va[k], vb[k]));
    for (int m = 0; m < order; m++)
      ck_assert_int_eq(ca[k * order + m], cb[k * order + m]);
  }
  ck_assert(same_value(galley_tensor_fill(a), galley_tensor_fill(b)));
  free(ca);
  free(cb);
  free(va);
  free(vb);
}

/* The plan transposes input A; the copy is made by the first run, kept
 * with A, reused by every later run, equal to a fresh conversion, and
 * made again after touch. */
START_TEST(transpose_kept_with_input) {
  galley_format csc = parse_format("dense:1,list:0", 2);
  for (int pl = 0; pl < 2; pl++) {
    Csr c;
    csr_init(&c, 25);
    galley_tensor *A = csr_wrap(&c), *x = ones(25);
    galley_program *p =
        program(tmv_tin, pl ? GALLEY_PLANNER_SIMPLE : GALLEY_PLANNER_COST);
    bind(p, "A", A);
    bind(p, "x", x);
    ck_assert_int_eq(rt_tensor_num_converted(A), 0);
    ck_assert_int_eq(run_checked(p), 1);
    galley_plan_query pq;
    int transposes = 0;
    for (int k = 0; k < galley_program_plan_num_queries(p, GALLEY_PLAN_PHYSICAL);
         k++) {
      ck_assert_int_eq(galley_program_plan_query(p, GALLEY_PLAN_PHYSICAL, k,
                                                 &pq, NULL),
                       GALLEY_OK);
      transposes += pq.transpose;
    }
    ck_assert_int_eq(transposes, 1);
    ck_assert_int_eq(rt_tensor_num_converted(A), 1);
    const galley_tensor *kept = NULL;
    ck_assert_int_eq(rt_tensor_converted(A, &csc, 0, &kept, NULL), GALLEY_OK);
    ck_assert_int_eq(rt_tensor_num_converted(A), 1); /* the runs' copy */
    galley_tensor *fresh = NULL;
    ck_assert_int_eq(galley_tensor_convert(A, &csc, &fresh, NULL), GALLEY_OK);
    assert_same_entries(kept, fresh);
    ck_assert_ptr_nonnull(rt_tensor_cached_facts(kept)); /* runs count it */
    galley_tensor_free(fresh);
    for (int k = 0; k < 20; k++) {
      ck_assert_int_eq(run_checked(p), 0);
      const galley_tensor *again = NULL;
      ck_assert_int_eq(rt_tensor_converted(A, &csc, 0, &again, NULL),
                       GALLEY_OK);
      ck_assert_ptr_eq(again, kept);
    }
    ck_assert_int_eq(rt_tensor_num_converted(A), 1);
    for (int64_t k = 0; k < c.rowptr[25]; k++)
      c.vals[k] = 5 - c.vals[k]; /* new values, the same nnz */
    galley_tensor_touch(A);
    ck_assert_int_eq(rt_tensor_num_converted(A), 0);
    ck_assert_int_eq(run_checked(p), 0); /* new copy, right answers */
    ck_assert_int_eq(rt_tensor_num_converted(A), 1);
    galley_program_free(p);
    galley_tensor_free(A); /* frees the copy (ASan would tell) */
    galley_tensor_free(x);
  }
}
END_TEST

/* A copy read with another fill is another copy. */
START_TEST(copies_keyed_by_fill) {
  Csr c;
  csr_init(&c, 10);
  galley_tensor *A = csr_wrap(&c);
  galley_format csc = parse_format("dense:1,list:0", 2);
  const galley_tensor *a = NULL, *b = NULL, *a2 = NULL;
  ck_assert_int_eq(rt_tensor_converted(A, &csc, 0, &a, NULL), GALLEY_OK);
  ck_assert_int_eq(rt_tensor_converted(A, &csc, 1, &b, NULL), GALLEY_OK);
  ck_assert_int_eq(rt_tensor_converted(A, &csc, 0, &a2, NULL), GALLEY_OK);
  ck_assert_ptr_eq(a, a2);
  ck_assert_ptr_ne(a, b);
  ck_assert(galley_tensor_fill(a) == 0 && galley_tensor_fill(b) == 1);
  int64_t ones = 0; /* read with fill 1, the values 1 are fills */
  for (int64_t k = 0; k < c.rowptr[10]; k++)
    ones += c.vals[k] == 1;
  ck_assert_int_gt(ones, 0);
  ck_assert_int_eq(galley_tensor_nnz(a), c.rowptr[10]);
  ck_assert_int_eq(galley_tensor_nnz(b), c.rowptr[10] - ones);
  ck_assert_int_eq(rt_tensor_num_converted(A), 2);
  galley_tensor_free(A);
}
END_TEST

/* The nnz of each query of a run: intermediates counted by the run,
 * outputs when asked for (the same numbers either way). */
START_TEST(query_info_counts_outputs) {
  static const char text[] = "input A[i, j], x[j]\n"
                             "y[i] = A[i, j] * x[j]\n"
                             "z[j] = sum(i: A[i, j] * y[i])\n"
                             "n = sum(i: y[i])\n"
                             "output z, n\n";
  Csr c;
  csr_init(&c, 30);
  for (int64_t k = 0; k < c.rowptr[30]; k += 3)
    c.vals[k] = 0; /* stored zeros: nnz below stored */
  galley_tensor *A = csr_wrap(&c), *x = ones(30);
  for (int pl = 0; pl < 2; pl++) {
    galley_program *p =
        program(text, pl ? GALLEY_PLANNER_SIMPLE : GALLEY_PLANNER_COST);
    bind(p, "A", A);
    bind(p, "x", x);
    FILE *log = tmpfile();
    galley_program_set_log(p, 2, log);
    galley_error err;
    ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
    galley_run_info info;
    galley_program_run_info(p, &info);
    int outputs = 0;
    for (int k = 0; k < info.nqueries; k++) {
      galley_query_info qi;
      ck_assert_int_eq(galley_program_query_info(p, k, &qi, NULL), GALLEY_OK);
      ck_assert_int_ge(qi.nnz, 0);
      ck_assert_int_le(qi.nnz, qi.stored);
      for (int o = 0; o < galley_program_num_outputs(p); o++)
        if (strcmp(qi.name, galley_program_output_name(p, o)) == 0) {
          ck_assert_int_eq(qi.nnz,
                           galley_tensor_nnz(galley_program_output(p, o)));
          outputs++;
        }
    }
    ck_assert_int_eq(outputs, 2);
    long n = ftell(log);
    char *logged = calloc((size_t)n + 1, 1);
    rewind(log);
    ck_assert(fread(logged, 1, (size_t)n, log) == (size_t)n);
    ck_assert_msg(strstr(logged, "  nnz ") && !strstr(logged, "nnz -1"),
                  "%s", logged);
    free(logged);
    fclose(log);
    galley_program_free(p);
  }
  galley_tensor_free(A);
  galley_tensor_free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Threads                                                             */
/* ------------------------------------------------------------------ */

typedef struct Reader {
  const galley_tensor *t;
  galley_facts facts;
  int64_t nnz;
  int symmetric;
  const galley_tensor *copy;
  galley_status st;
} Reader;

static void *read_tensor(void *arg) {
  Reader *r = arg;
  galley_format csc;
  galley_format_parse("dense:1,list:0", 2, &csc, NULL);
  r->nnz = galley_tensor_nnz(r->t);
  r->st = galley_tensor_facts(r->t, &r->facts, NULL);
  r->symmetric = galley_tensor_is_symmetric(r->t);
  if (r->st == GALLEY_OK)
    r->st = rt_tensor_converted(r->t, &csc, 0, &r->copy, NULL);
  return NULL;
}

START_TEST(threads_share_one_cache) {
  test_rng r = test_rng_seed(5);
  int64_t dims[2] = {300, 300};
  galley_format fmt = galley_format_default(2);
  for (int round = 0; round < 10; round++) {
    galley_tensor *t = random_tensor(&r, 2, dims, 1, 0, 0, &fmt);
    galley_facts want = naive_facts(t);
    enum { N = 4 };
    pthread_t th[N];
    Reader rd[N];
    for (int k = 0; k < N; k++) {
      memset(&rd[k], 0, sizeof rd[k]);
      rd[k].t = t;
      ck_assert_int_eq(pthread_create(&th[k], NULL, read_tensor, &rd[k]), 0);
    }
    for (int k = 0; k < N; k++)
      pthread_join(th[k], NULL);
    for (int k = 0; k < N; k++) {
      ck_assert_int_eq(rd[k].st, GALLEY_OK);
      ck_assert_int_eq(rd[k].nnz, want.nnz);
      ck_assert_int_eq(rd[k].facts.nan, want.nan);
      ck_assert_int_eq(rd[k].symmetric, rd[0].symmetric);
      ck_assert_ptr_eq(rd[k].copy, rd[0].copy); /* one copy for all */
    }
    ck_assert_int_eq(rt_tensor_num_converted(t), 1);
    galley_tensor_free(t);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("facts");
  TCase *tc = tcase_create("facts");
  tcase_add_test(tc, facts_every_format);
  tcase_add_test(tc, facts_long_runs);
  tcase_add_test(tc, facts_constant_runs);
  tcase_add_test(tc, facts_empty_and_errors);
  tcase_add_test(tc, symmetric_every_format);
  tcase_add_test(tc, symmetric_shapes);
  suite_add_tcase(s, tc);
  tc = tcase_create("kept");
  tcase_add_test(tc, facts_kept_until_touch);
  tcase_add_test(tc, runs_do_not_rescan);
  tcase_add_test(tc, sliced_copy_kept_with_input);
  tcase_add_test(tc, rerun_rule_on_facts);
  tcase_add_test(tc, rerun_rule_on_symmetry);
  tcase_add_test(tc, transpose_kept_with_input);
  tcase_add_test(tc, copies_keyed_by_fill);
  tcase_add_test(tc, query_info_counts_outputs);
  tcase_add_test(tc, threads_share_one_cache);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
