/*
 * test_width.c -- index width per level (galley_rt.h, idx32): builders
 * store 32-bit positions and coordinates where they fit; tensors of
 * either width (forced with rt_tensor_set_widths) hold the same entries
 * through every conversion; kernels compiled for the widths of their
 * inputs agree with the reference evaluator on mixed widths; a plan never
 * runs on arrays of another width (the re-run rule replans); and
 * galley_tensor_wrap_csr32/_csc32 read the caller's arrays in place.
 */
#define _GNU_SOURCE /* open_memstream, mkdtemp */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The list, bytemap and hash levels of t, as a mask (every one fits 32
 * bits in these small tensors). */
static unsigned narrowable(const galley_tensor *t) {
  unsigned w = 0;
  for (int l = 0; l < t->order; l++)
    if (t->lvl[l].kind != GALLEY_RT_DENSE)
      w |= 1u << l;
  return w;
}

/* Whether level L holds its arrays at exactly the width idx32 says: the
 * arrays of that width present, those of the other NULL. */
static int arrays_of_width(const galley_level *L) {
  if (L->kind == GALLEY_RT_DENSE)
    return !L->pos && !L->pos32 && !L->idx32;
  int hash = L->kind == GALLEY_RT_HASH;
  if (L->idx32)
    return L->pos32 && L->crd32 && !L->pos && !L->crd &&
           (!hash || (L->qos32 && L->key32 && L->slot32 && !L->qos &&
                      !L->key && !L->slot));
  return L->pos && L->crd && !L->pos32 && !L->crd32 &&
         (!hash || (L->qos && L->key && L->slot && !L->qos32 && !L->key32 &&
                    !L->slot32));
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
        ck_assert(arrays_of_width(&t->lvl[l]));
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

/* A tensor of format text from n entries (coordinates c, values v). */
static galley_tensor *from_entries(int order, const int64_t *dims, int64_t n,
                                   const int64_t *c, const double *v,
                                   const char *text) {
  galley_format f;
  galley_error err;
  ck_assert_int_eq(galley_format_parse(text, order, &f, &err), GALLEY_OK);
  galley_tensor *t = NULL;
  ck_assert_msg(galley_tensor_from_coo(order, dims, n, c, v, 0, &f, &t,
                                       &err) == GALLEY_OK,
                "%s", err.msg);
  return t;
}

/* A level that does not fit cannot be made 32-bit: a list over more than
 * 2^31 columns, a hash level whose keys p*dim + i pass 2^31 - 1 (decided
 * on the level's own npar, so a hash under a sparse level of few fibers
 * fits where its dims' product does not); dense levels have no width. */
START_TEST(narrowing_refused) {
  int64_t c[4] = {0, 1, 2, ((int64_t)1 << 30) - 1};
  double v[2] = {1, 2};
  galley_error err;
  /* 3 x 2^30 keys under a dense level: 64-bit, and refused 32-bit */
  int64_t dims[2] = {3, (int64_t)1 << 30};
  galley_tensor *t = from_entries(2, dims, 2, c, v, "dense,hash");
  ck_assert_uint_eq(rt_tensor_widths(t), 0);
  ck_assert(arrays_of_width(&t->lvl[1]));
  ck_assert_int_eq(rt_tensor_set_widths(t, 2, &err), GALLEY_EINTERNAL);
  ck_assert_int_eq(rt_tensor_set_widths(t, 1, &err), GALLEY_EINTERNAL);
  int64_t at[2] = {2, ((int64_t)1 << 30) - 1};
  ck_assert_double_eq(galley_tensor_get(t, at, NULL), 2);
  galley_tensor_free(t);
  /* 2 x 2^30 = 2^31 keys: the largest key, 2^31 - 1, fits */
  dims[0] = 2;
  c[2] = 1;
  t = from_entries(2, dims, 2, c, v, "dense,hash");
  ck_assert_uint_eq(rt_tensor_widths(t), 2);
  ck_assert(arrays_of_width(&t->lvl[1]));
  at[0] = 1;
  ck_assert_double_eq(galley_tensor_get(t, at, NULL), 2);
  galley_tensor_free(t);
  /* 2^20 x 2^12 under a list of 2 fibers: 2 * 2^12 keys, 32-bit */
  int64_t tall[2] = {(int64_t)1 << 20, (int64_t)1 << 12};
  int64_t ct[4] = {5, 7, ((int64_t)1 << 20) - 1, ((int64_t)1 << 12) - 1};
  t = from_entries(2, tall, 2, ct, v, "list,hash");
  ck_assert_uint_eq(rt_tensor_widths(t), 3);
  ck_assert_double_eq(galley_tensor_get(t, ct + 2, NULL), 2);
  galley_tensor_free(t);
  /* a list level over 2^31 columns keeps 64-bit indices */
  int64_t wide[2] = {2, (int64_t)1 << 32}, cw[4] = {0, 5, 1, ((int64_t)1 << 32) - 1};
  ck_assert_int_eq(galley_tensor_from_coo(2, wide, 2, cw, v, 0, NULL, &t, NULL),
                   GALLEY_OK);
  ck_assert_int_eq(t->lvl[1].idx32, 0);
  ck_assert_int_eq(rt_tensor_set_widths(t, 2, &err), GALLEY_EINTERNAL);
  at[1] = ((int64_t)1 << 32) - 1;
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

/* The hash formats the tests below use: hash levels over dense, list and
 * hash parents, and other levels under them. */
static const char *const hash_formats[] = {
    "dense,hash", "hash,hash", "list,hash", "hash,list", "hash:1,hash:0",
    "hash,bytemap"};
#define NHASH (sizeof hash_formats / sizeof *hash_formats)

/* A 40 x 50 matrix (one entry in one_in stored, values in [-2, 2)) in
 * format text. */
static galley_tensor *sparse_matrix(uint64_t seed, int one_in,
                                    const char *text) {
  test_rng r = test_rng_seed(seed);
  int64_t dims[2] = {40, 50}, c[2 * 2000], n = 0;
  double v[2000];
  for (int64_t i = 0; i < 40; i++)
    for (int64_t j = 0; j < 50; j++)
      if (test_rng_below(&r, (uint64_t)one_in) == 0) {
        c[2 * n] = i;
        c[2 * n + 1] = j;
        v[n++] = test_rng_double(&r, -2, 2);
      }
  return from_entries(2, dims, n, c, v, text);
}

/* About 20% stored. */
static galley_tensor *hash_matrix(uint64_t seed, const char *text) {
  return sparse_matrix(seed, 5, text);
}

/* The .tns text of t. */
static char *tns_text(const galley_tensor *t) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_assert_int_eq(galley_tensor_write_tns_stream(t, f, NULL), GALLEY_OK);
  fclose(f);
  return text;
}

/* Hash levels at both widths: built 32-bit with all five arrays narrow
 * (pos, crd, qos, key, slot), widened and narrowed again by copies that
 * keep the table's layout; every lookup (galley_tensor_get probes the
 * table), every conversion to each other format from either width, the
 * written .tns text and the tensor read back from it agree; the memory
 * of a 32-bit hash level is smaller. */
START_TEST(hash_levels_both_widths) {
  static const char *const others[] = {"dense,list", "list,list",
                                       "dense:1,list:0", "bytemap,hash",
                                       "hash,dense", "dense,dense"};
  int64_t n = 40 * 50;
  for (size_t k = 0; k < NHASH; k++) {
    galley_tensor *t = hash_matrix(31 + k, hash_formats[k]);
    unsigned all = narrowable(t);
    ck_assert_uint_eq(rt_tensor_widths(t), all);
    double *want = dense_of(t, n);
    int64_t bytes32 = galley_tensor_bytes(t);
    char *text32 = tns_text(t);
    for (int wide = 0; wide < 2; wide++) {
      unsigned w = wide ? 0 : all;
      ck_assert_int_eq(rt_tensor_set_widths(t, w, NULL), GALLEY_OK);
      ck_assert_uint_eq(rt_tensor_widths(t), w);
      for (int l = 0; l < 2; l++)
        ck_assert(arrays_of_width(&t->lvl[l]));
      if (wide)
        ck_assert_int_lt(bytes32, galley_tensor_bytes(t));
      for (int64_t i = 0; i < 40; i++)
        for (int64_t j = 0; j < 50; j++) {
          int64_t at[2] = {i, j};
          ck_assert_double_eq(galley_tensor_get(t, at, NULL),
                              want[i * 50 + j]);
        }
      char *text = tns_text(t);
      ck_assert_str_eq(text, text32);
      free(text);
      for (size_t o = 0; o < sizeof others / sizeof *others; o++) {
        galley_format g;
        ck_assert_int_eq(galley_format_parse(others[o], 2, &g, NULL),
                         GALLEY_OK);
        galley_tensor *c = NULL;
        ck_assert_int_eq(galley_tensor_convert(t, &g, &c, NULL), GALLEY_OK);
        double *got = dense_of(c, n);
        assert_same(want, got, n);
        free(got);
        /* and back into this hash format: built at its own width */
        galley_format h;
        galley_tensor_format(t, &h);
        galley_tensor *b = NULL;
        ck_assert_int_eq(galley_tensor_convert(c, &h, &b, NULL), GALLEY_OK);
        ck_assert_uint_eq(rt_tensor_widths(b), all);
        got = dense_of(b, n);
        assert_same(want, got, n);
        free(got);
        galley_tensor_free(b);
        galley_tensor_free(c);
      }
    }
    /* written and read back in the hash format: 32-bit again */
    char dir[] = "/tmp/galley_hash32_XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.tns", dir);
    galley_error err;
    ck_assert_msg(galley_tensor_write(t, path, GALLEY_FILE_TNS, &err) ==
                      GALLEY_OK, "%s", err.msg);
    galley_format h;
    galley_tensor_format(t, &h);
    galley_tensor *r = NULL;
    ck_assert_msg(galley_tensor_read(path, GALLEY_FILE_TNS, &h, &r, &err) ==
                      GALLEY_OK, "%s", err.msg);
    unlink(path);
    rmdir(dir);
    ck_assert_uint_eq(rt_tensor_widths(r), all);
    double *got = dense_of(r, n);
    assert_same(want, got, n);
    free(got);
    galley_tensor_free(r);
    free(text32);
    free(want);
    galley_tensor_free(t);
  }
}
END_TEST

/* The kernels of p's plan for its bound inputs (explain --c, after the
 * runtime header, which defines every form of every helper). */
static char *kernel_source(galley_program *p) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  galley_error err;
  ck_assert_msg(galley_program_explain(p, f, GALLEY_EXPLAIN_C, &err) ==
                    GALLEY_OK, "%s", err.msg);
  fclose(f);
  const char *end = strstr(text, "#endif /* GALLEY_RT_H */");
  ck_assert_ptr_nonnull(end);
  char *kernels = strdup(end);
  free(text);
  return kernels;
}

/* Kernels that probe a hash level (a lookup of A's (i, j) for each of
 * the few entries of S) and kernels that walk its frozen view (A's
 * entries leading B's lookups, the row sums of A, A times a dense
 * matrix), over A at each width and in each hash format, equal the
 * reference evaluator; the probe is compiled for the width
 * (galley_rt_hash_locate32 or ...64, no test of the width per entry). */
START_TEST(hash_kernels_match_reference) {
  static const char tin[] =
      "input A[i, j], B[i, j], S[i, j], X[j, k]\n"
      "C[i, j] = A[i, j] * B[i, j]\n"
      "s = sum(i, j: A[i, j] * S[i, j])\n"
      "r[i] = sum(j: A[i, j])\n"
      "Y[i, k] = sum(j: A[i, j] * X[j, k])\n"
      "output C, s, r, Y\n";
  static const int64_t sizes[4] = {40 * 50, 1, 40, 40 * 3};
  int probed[2] = {0, 0};
  galley_tensor *Xt = NULL; /* a 50 x 3 dense matrix */
  int64_t xd[2] = {50, 3};
  double xv[150];
  for (int e = 0; e < 150; e++)
    xv[e] = (double)(e % 7) - 3;
  galley_format fd = galley_format_dense(2);
  ck_assert_int_eq(galley_tensor_from_dense(2, xd, xv, 0, &fd, &Xt, NULL),
                   GALLEY_OK);
  for (size_t k = 0; k < NHASH; k++) {
    for (int wide = 0; wide < 2; wide++) {
      galley_tensor *A = hash_matrix(61 + k, hash_formats[k]);
      galley_tensor *B = hash_matrix(91 + k, "dense,list");
      galley_tensor *S = sparse_matrix(7 + k, 60, "dense,list");
      if (wide)
        ck_assert_int_eq(rt_tensor_set_widths(A, 0, NULL), GALLEY_OK);
      galley_program *p = program(tin, GALLEY_BACKEND_TCC);
      bind(p, "A", A);
      bind(p, "B", B);
      bind(p, "S", S);
      bind(p, "X", Xt);
      galley_error err;
      ck_assert_msg(galley_program_run_reference(p, &err) == GALLEY_OK, "%s",
                    err.msg);
      double want[4][2000], got[2000];
      for (int o = 0; o < 4; o++)
        ck_assert_int_eq(galley_tensor_to_dense(galley_program_output(p, o),
                                                want[o], sizes[o], NULL),
                         GALLEY_OK);
      run(p);
      for (int o = 0; o < 4; o++) {
        ck_assert_int_eq(galley_tensor_to_dense(galley_program_output(p, o),
                                                got, sizes[o], NULL),
                         GALLEY_OK);
        for (int64_t e = 0; e < sizes[o]; e++)
          ck_assert_msg(fabs(got[e] - want[o][e]) <=
                            1e-12 * fmax(1, fabs(want[o][e])),
                        "%s wide %d output %d entry %lld: %g != %g",
                        hash_formats[k], wide, o, (long long)e, got[e],
                        want[o][e]);
      }
      char *kern = kernel_source(p);
      ck_assert_msg(!strstr(kern, wide ? "galley_rt_hash_locate32("
                                       : "galley_rt_hash_locate64("),
                    "%s wide %d: a probe of the other width",
                    hash_formats[k], wide);
      ck_assert_msg(!strstr(kern, "galley_rt_hash_locate("),
                    "%s wide %d: a probe testing the width",
                    hash_formats[k], wide);
      probed[wide] += strstr(kern, wide ? "galley_rt_hash_locate64("
                                        : "galley_rt_hash_locate32(") != NULL;
      free(kern);
      galley_program_free(p);
      galley_tensor_free(A);
      galley_tensor_free(B);
      galley_tensor_free(S);
    }
  }
  galley_tensor_free(Xt);
  /* some plan of each width probes the table */
  ck_assert_int_gt(probed[0], 0);
  ck_assert_int_gt(probed[1], 0);
}
END_TEST

/* A hash level too large for 32-bit keys (3 x 2^30 under a dense level)
 * is probed by a kernel compiled for 64 bits, next to the same entries
 * in a 32-bit hash level (2 x 2^30 keys): both equal the reference. */
START_TEST(hash_wide_keys_kernel) {
  static const char tin[] =
      "input A[i, j], B[i, j]\ns = sum(i, j: A[i, j] * B[i, j])\n"
      "t = sum(i, j: A[i, j])\n";
  int64_t c[6] = {0, 3, 1, 77, 1, ((int64_t)1 << 30) - 1};
  double v[3] = {1.5, -2, 4}, w[3] = {2, 3, -1};
  for (int rows = 2; rows <= 3; rows++) {
    int64_t dims[2] = {rows, (int64_t)1 << 30};
    galley_tensor *A = from_entries(2, dims, 3, c, v, "dense,hash");
    galley_tensor *B = from_entries(2, dims, 3, c, w, "dense,list");
    ck_assert_int_eq(A->lvl[1].idx32, rows == 2);
    galley_program *p = program(tin, GALLEY_BACKEND_TCC);
    bind(p, "A", A);
    bind(p, "B", B);
    run(p);
    ck_assert_double_eq(galley_tensor_get(galley_program_output(p, 0), NULL,
                                          NULL),
                        1.5 * 2 - 2 * 3 - 4);
    ck_assert_double_eq(galley_tensor_get(galley_program_output(p, 1), NULL,
                                          NULL),
                        1.5 - 2 + 4);
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
  tcase_add_test(tc, hash_levels_both_widths);
  tcase_add_test(tc, hash_kernels_match_reference);
  tcase_add_test(tc, hash_wide_keys_kernel);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
