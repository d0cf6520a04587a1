/*
 * test_width.c -- index width per level (galley_rt.h, idx32): builders
 * store 32-bit positions and coordinates where they fit; tensors of
 * either width (forced with rt_tensor_set_widths) hold the same entries
 * through every conversion; kernels compiled for the widths of their
 * inputs agree with the reference evaluator on mixed widths; a plan never
 * runs on arrays of another width (the re-run rule replans); and
 * galley_tensor_wrap_csr32/_csc32 read the caller's arrays in place.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "rt_internal.h"
#include "testutil.h"

/* Every entry of t, in a dense row-major array of n doubles (malloc). */
static double *dense_of(const galley_tensor *t, int64_t n) {
  double *d = malloc((size_t)n * sizeof *d);
  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(galley_tensor_to_dense(t, d, n, NULL), GALLEY_OK);
  return d;
}

static void assert_same(const double *a, const double *b, int64_t n) {
  for (int64_t k = 0; k < n; k++)
    ck_assert_msg(a[k] == b[k] || (isnan(a[k]) && isnan(b[k])),
                  "entry %lld: %g != %g", (long long)k, a[k], b[k]);
}

/* The list and bytemap levels of t, as a mask. */
static unsigned narrowable(const galley_tensor *t) {
  unsigned w = 0;
  for (int l = 0; l < t->order; l++)
    if (t->lvl[l].kind == GALLEY_RT_LIST || t->lvl[l].kind == GALLEY_RT_BYTEMAP)
      w |= 1u << l;
  return w;
}

/* An order-3 tensor (5 x 7 x 6, ~40% stored) in format fmt. */
static galley_tensor *random3(test_rng *r, const galley_format *fmt) {
  int64_t dims[3] = {5, 7, 6}, coords[3 * 210];
  double vals[210];
  int64_t n = 0;
  for (int64_t i = 0; i < 5; i++)
    for (int64_t j = 0; j < 7; j++)
      for (int64_t k = 0; k < 6; k++)
        if (test_rng_below(r, 10) < 4) {
          coords[3 * n] = i, coords[3 * n + 1] = j, coords[3 * n + 2] = k;
          vals[n++] = test_rng_double(r, -3, 3);
        }
  galley_tensor *t = NULL;
  ck_assert_int_eq(galley_tensor_from_coo(3, dims, n, coords, vals, 0.0, fmt,
                                          &t, NULL),
                   GALLEY_OK);
  return t;
}

/* Every format of order 3 (level kinds and a few mode orders): built
 * 32-bit where it fits, widened and narrowed by hand, converted to every
 * other format from either width: always the same entries. */
START_TEST(round_trip_every_format) {
  test_rng r = test_rng_seed(7);
  static const int orders[3][3] = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}};
  int64_t n = 5 * 7 * 6;
  for (int code = 0; code < 64; code++) {
    galley_format f = galley_format_default(3);
    for (int l = 0; l < 3; l++) {
      f.kinds[l] = (galley_level_kind)(code >> (2 * l) & 3);
      f.mode_order[l] = orders[code % 3][l];
    }
    galley_tensor *t = random3(&r, &f);
    double *want = dense_of(t, n);
    /* built narrow: every list and bytemap level */
    ck_assert_uint_eq(rt_tensor_widths(t), narrowable(t));
    for (unsigned mask = 0; mask < 8; mask++) {
      unsigned w = mask & narrowable(t);
      ck_assert_int_eq(rt_tensor_set_widths(t, w, NULL), GALLEY_OK);
      ck_assert_uint_eq(rt_tensor_widths(t), w);
      for (int l = 0; l < 3; l++)
        if (w >> l & 1)
          ck_assert(t->lvl[l].pos32 && t->lvl[l].crd32 && !t->lvl[l].pos &&
                    !t->lvl[l].crd);
      double *got = dense_of(t, n);
      assert_same(want, got, n);
      free(got);
      /* convert from this width to another format (a transposition) */
      galley_format g = galley_format_default(3);
      for (int l = 0; l < 3; l++) {
        g.kinds[l] = (galley_level_kind)((code + mask + l) % 4);
        g.mode_order[l] = orders[(code + mask) % 3][l];
      }
      galley_tensor *c = NULL;
      ck_assert_int_eq(galley_tensor_convert(t, &g, &c, NULL), GALLEY_OK);
      got = dense_of(c, n);
      assert_same(want, got, n);
      free(got);
      ck_assert_int_eq(galley_tensor_nnz(c), galley_tensor_nnz(t));
      galley_tensor_free(c);
    }
    free(want);
    galley_tensor_free(t);
  }
}
END_TEST

/* A level that does not fit cannot be made 32-bit; dense and hash levels
 * stay 64-bit. */
START_TEST(narrowing_refused) {
  galley_format f = galley_format_default(2);
  f.kinds[1] = GALLEY_HASH;
  int64_t dims[2] = {3, 4}, c[4] = {0, 1, 2, 3};
  double v[2] = {1, 2};
  galley_tensor *t = NULL;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, 2, c, v, 0, &f, &t, NULL),
                   GALLEY_OK);
  ck_assert_uint_eq(rt_tensor_widths(t), 0);
  galley_error err;
  ck_assert_int_eq(rt_tensor_set_widths(t, 2, &err), GALLEY_EINTERNAL);
  galley_tensor_free(t);
  /* a list level over 2^31 columns keeps 64-bit indices */
  int64_t wide[2] = {2, (int64_t)1 << 32}, cw[4] = {0, 5, 1, ((int64_t)1 << 32) - 1};
  ck_assert_int_eq(galley_tensor_from_coo(2, wide, 2, cw, v, 0, NULL, &t, NULL),
                   GALLEY_OK);
  ck_assert_int_eq(t->lvl[1].idx32, 0);
  ck_assert_int_eq(rt_tensor_set_widths(t, 2, &err), GALLEY_EINTERNAL);
  int64_t at[2] = {1, ((int64_t)1 << 32) - 1};
  ck_assert_double_eq(galley_tensor_get(t, at, NULL), 2);
  galley_tensor_free(t);
}
END_TEST

/* A 30 x 30 CSR matrix with about 8 entries per row. */
typedef struct Csr32 {
  int32_t ptr[31], idx[30 * 30];
  double val[30 * 30];
} Csr32;

static void csr32_init(Csr32 *c, uint64_t seed) {
  test_rng r = test_rng_seed(seed);
  int32_t n = 0;
  c->ptr[0] = 0;
  for (int i = 0; i < 30; i++) {
    for (int j = 0; j < 30; j++)
      if (test_rng_below(&r, 30) < 8) {
        c->idx[n] = j;
        c->val[n++] = test_rng_double(&r, -2, 2);
      }
    c->ptr[i + 1] = n;
  }
}

static galley_program *program(const char *text, galley_backend be) {
  galley_program *p = NULL;
  galley_error err;
  ck_assert_msg(galley_program_parse("w.tin", text, strlen(text), &p, NULL,
                                     &err) == GALLEY_OK,
                "%s", err.msg);
  /* tcc when built in (fast to compile), else the default */
  (void)galley_program_set_backend(p, be, &err);
  return p;
}

static void bind(galley_program *p, const char *name, const galley_tensor *t) {
  galley_error err;
  ck_assert_msg(galley_program_bind(p, name, t, &err) == GALLEY_OK, "%s",
                err.msg);
}

static void run(galley_program *p) {
  galley_error err;
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
}

static galley_tensor *ones(int64_t n) {
  galley_format fd = galley_format_dense(1);
  double *v = malloc((size_t)n * sizeof *v);
  for (int64_t k = 0; k < n; k++)
    v[k] = 1 + (double)(k % 5) / 4;
  galley_tensor *t = NULL;
  ck_assert_int_eq(galley_tensor_from_dense(1, &n, v, 0, &fd, &t, NULL),
                   GALLEY_OK);
  free(v);
  return t;
}

static const char spmv_tin[] =
    "input A[i, j]\ninput x[j]\ny[i] = sum(j: A[i, j] * x[j])\noutput y\n";

/* wrap_csr32 borrows the arrays: the level points at them, values
 * changed in place (and touched) are what the next run reads. */
START_TEST(wrap32_zero_copy) {
  Csr32 c;
  csr32_init(&c, 11);
  galley_tensor *A = NULL, *x = ones(30);
  ck_assert_int_eq(galley_tensor_wrap_csr32(30, 30, c.ptr, c.idx, c.val, 0,
                                            &A, NULL),
                   GALLEY_OK);
  ck_assert_int_eq(A->lvl[1].idx32, 1);
  ck_assert_ptr_eq(A->lvl[1].pos32, c.ptr);
  ck_assert_ptr_eq(A->lvl[1].crd32, c.idx);
  ck_assert_ptr_eq(A->val, c.val);
  galley_program *p = program(spmv_tin, GALLEY_BACKEND_TCC);
  bind(p, "A", A);
  bind(p, "x", x);
  for (int round = 0; round < 2; round++) {
    run(p);
    const galley_tensor *y = galley_program_output(p, 0);
    for (int64_t i = 0; i < 30; i++) {
      double want = 0;
      for (int32_t k = c.ptr[i]; k < c.ptr[i + 1]; k++)
        want += c.val[k] * x->val[c.idx[k]];
      ck_assert_double_eq_tol(galley_tensor_get(y, &i, NULL), want, 1e-12);
    }
    for (int32_t k = 0; k < c.ptr[30]; k++)
      c.val[k] *= -3; /* seen through the caller's array */
    galley_tensor_touch(A);
  }
  /* CSC: the same arrays read as columns give the transpose */
  galley_tensor *T = NULL;
  ck_assert_int_eq(galley_tensor_wrap_csc32(30, 30, c.ptr, c.idx, c.val, 0,
                                            &T, NULL),
                   GALLEY_OK);
  for (int64_t i = 0; i < 30; i++)
    for (int32_t k = c.ptr[i]; k < c.ptr[i + 1]; k++) {
      int64_t rc[2] = {c.idx[k], i};
      ck_assert_double_eq(galley_tensor_get(T, rc, NULL), c.val[k]);
    }
  galley_program_free(p);
  galley_tensor_free(T);
  galley_tensor_free(A); /* leaves the arrays */
  galley_tensor_free(x);
  ck_assert_int_eq(c.ptr[30] > 0, 1);
}
END_TEST

/* wrap_csr32 checks its arrays as wrap_csr does. */
START_TEST(wrap32_checks) {
  int32_t ptr[3] = {0, 2, 3}, idx[3] = {1, 1, 0};
  double val[3] = {1, 2, 3};
  galley_tensor *A = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_wrap_csr32(2, 4, ptr, idx, val, 0, &A, &err),
                   GALLEY_EINVAL);
  ck_assert_ptr_null(A);
  ck_assert_msg(strstr(err.msg, "galley_tensor_wrap_csr32: colidx[1] = 1 is "
                                "not greater than colidx[0] = 1"),
                "%s", err.msg);
  idx[1] = 4;
  ck_assert_int_eq(galley_tensor_wrap_csr32(2, 4, ptr, idx, val, 0, &A, &err),
                   GALLEY_EINVAL);
  ck_assert_msg(strstr(err.msg, "out of range"), "%s", err.msg);
  /* CSC over 2^33 rows: row indices do not fit 32 bits */
  ck_assert_int_eq(galley_tensor_wrap_csc32((int64_t)1 << 33, 2, ptr, idx,
                                            val, 0, &A, &err),
                   GALLEY_EINVAL);
  ck_assert_msg(strstr(err.msg, "do not fit 32-bit indices"), "%s", err.msg);
  ck_assert_int_eq(galley_tensor_wrap_csr32(2, 4, ptr, NULL, val, 0, &A, &err),
                   GALLEY_EINVAL);
}
END_TEST

/* Binding a tensor of the other width replans (the kernels are compiled
 * for their inputs' widths), and both give the same result. */
START_TEST(replan_on_width_change) {
  Csr32 c;
  csr32_init(&c, 5);
  galley_tensor *A = NULL, *W = NULL, *x = ones(30);
  ck_assert_int_eq(galley_tensor_from_csr32(30, 30, c.ptr, c.idx, c.val, 0,
                                            &A, NULL),
                   GALLEY_OK);
  ck_assert_int_eq(A->lvl[1].idx32, 1);
  galley_format f;
  galley_tensor_format(A, &f);
  ck_assert_int_eq(galley_tensor_convert(A, &f, &W, NULL), GALLEY_OK);
  ck_assert_int_eq(rt_tensor_set_widths(W, 0, NULL), GALLEY_OK);
  galley_program *p = program(spmv_tin, GALLEY_BACKEND_TCC);
  FILE *log = tmpfile();
  galley_program_set_log(p, 3, log);
  bind(p, "A", A);
  bind(p, "x", x);
  run(p);
  double y32[30], y64[30];
  ck_assert_int_eq(galley_tensor_to_dense(galley_program_output(p, 0), y32,
                                          30, NULL),
                   GALLEY_OK);
  galley_run_info info;
  bind(p, "A", W);
  run(p);
  galley_program_run_info(p, &info);
  ck_assert_int_eq(info.replanned, 1);
  ck_assert_int_eq(galley_tensor_to_dense(galley_program_output(p, 0), y64,
                                          30, NULL),
                   GALLEY_OK);
  assert_same(y32, y64, 30);
  run(p);
  galley_program_run_info(p, &info);
  ck_assert_int_eq(info.replanned, 0);
  bind(p, "A", A); /* and back */
  run(p);
  galley_program_run_info(p, &info);
  ck_assert_int_eq(info.replanned, 1);
  long n = ftell(log);
  char *text = calloc((size_t)n + 1, 1);
  rewind(log);
  ck_assert(fread(text, 1, (size_t)n, log) == (size_t)n);
  ck_assert_msg(strstr(text, "input 'A': its index width changed"), "%s",
                text);
  free(text);
  fclose(log);
  galley_program_free(p);
  galley_tensor_free(A);
  galley_tensor_free(W);
  galley_tensor_free(x);
}
END_TEST

/* Programs over operands of mixed widths (32-bit, 64-bit, and a
 * transpose and an intermediate the executor lays out) equal the
 * reference evaluator, and sparse results come back 32-bit. */
START_TEST(mixed_widths_match_reference) {
  static const char tin[] =
      "input A[i, j]\ninput B[j, k]\n"
      "C[i, k] = sum(j: A[i, j] * B[j, k])\n"
      "D[i, k] = C[i, k] + B[k, i]\n"
      "E[i] = sum(k: D[i, k] * B[i, k])\n"
      "output C, D, E\n";
  for (unsigned mask = 0; mask < 4; mask++) {
    galley_tensor *A = NULL, *B = NULL;
    Csr32 a, b;
    csr32_init(&a, 21 + mask);
    csr32_init(&b, 41 + mask);
    ck_assert_int_eq(galley_tensor_from_csr32(30, 30, a.ptr, a.idx, a.val, 0,
                                              &A, NULL),
                     GALLEY_OK);
    ck_assert_int_eq(galley_tensor_from_csr32(30, 30, b.ptr, b.idx, b.val, 0,
                                              &B, NULL),
                     GALLEY_OK);
    ck_assert_int_eq(rt_tensor_set_widths(A, (mask & 1) << 1, NULL), GALLEY_OK);
    ck_assert_int_eq(rt_tensor_set_widths(B, (mask & 2), NULL), GALLEY_OK);
    galley_program *p = program(tin, GALLEY_BACKEND_TCC);
    bind(p, "A", A);
    bind(p, "B", B);
    galley_error err;
    ck_assert_msg(galley_program_run_reference(p, &err) == GALLEY_OK, "%s",
                  err.msg);
    double want[3][900], got[900];
    int64_t sizes[3] = {900, 900, 30};
    for (int k = 0; k < 3; k++)
      ck_assert_int_eq(galley_tensor_to_dense(galley_program_output(p, k),
                                              want[k], sizes[k], NULL),
                       GALLEY_OK);
    run(p);
    for (int k = 0; k < 3; k++) {
      const galley_tensor *o = galley_program_output(p, k);
      ck_assert_int_eq(galley_tensor_to_dense(o, got, sizes[k], NULL),
                       GALLEY_OK);
      for (int64_t e = 0; e < sizes[k]; e++)
        ck_assert_msg(fabs(got[e] - want[k][e]) <=
                          1e-12 * fmax(1, fabs(want[k][e])),
                      "mask %u output %d entry %lld: %g != %g", mask, k,
                      (long long)e, got[e], want[k][e]);
      for (int l = 0; l < o->order; l++)
        if (o->lvl[l].kind == GALLEY_RT_LIST)
          ck_assert_int_eq(o->lvl[l].idx32, 1); /* results fit: narrow */
    }
    galley_program_free(p);
    galley_tensor_free(A);
    galley_tensor_free(B);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("width");
  TCase *tc = tcase_create("width");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, round_trip_every_format);
  tcase_add_test(tc, narrowing_refused);
  tcase_add_test(tc, wrap32_zero_copy);
  tcase_add_test(tc, wrap32_checks);
  tcase_add_test(tc, replan_on_width_change);
  tcase_add_test(tc, mixed_widths_match_reference);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
