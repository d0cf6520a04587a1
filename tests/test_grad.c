/*
 * test_grad.c -- reverse-mode gradients: G[j] = grad(L, theta[j]).
 *
 * Four layers, every expected value computed independently of grad:
 *  - workloads (least squares, logistic regression, softmax cross-entropy,
 *    matrix factorization over the observed entries, a GCN layer, TransE
 *    on the Kinship knowledge graph), each against a hand-written C loop
 *    of the textbook gradient, on the reference evaluator and on kernels
 *    compiled by tcc (the whole pipeline of `galleyc run`), and again, on
 *    smaller data (karate, a corner of Kinship), every gradient entry
 *    against central finite differences of the reference evaluator;
 *  - the conventions of man/tin.5 (prod with zeros, max/min ties, kinks,
 *    fills, zero gradients, grad of a query and of a gradient), each
 *    against a value worked out in a comment;
 *  - located errors, by their complete diagnostics text;
 *  - random differential programs: seeded smooth programs over inputs
 *    with fills and random storage formats, the gradient from the
 *    reference evaluator against central finite differences of the
 *    reference evaluator (Richardson-extrapolated; relative error <= 1e-6
 *    at points where the one-sided differences agree, i.e. away from
 *    kinks and ties), and the tcc kernels against the reference.
 * A sparsity test checks that the gradient program of a factorization
 * never materializes anything of the size of the dense matrix.
 *
 * Environment: GALLEY_GRAD_CASES (random programs, default 300),
 * GALLEY_GRAD_SEED (base seed), GALLEY_GRAD_ONLY (one case seed, printed),
 * GALLEY_GRAD_VERBOSE (print every program, its inputs and formats),
 * GALLEY_GRAD_EXPLAIN (also explain every gradient run, analyzed).
 */
#define _GNU_SOURCE /* open_memstream */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "ir.h"
#include "testutil.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "randprog.h" /* fmt, Buf, gen_format, same_value */
#pragma GCC diagnostic pop

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static long env_num(const char *name, long dflt) {
  const char *s = getenv(name);
  return s && *s ? strtol(s, NULL, 10) : dflt;
}

/* A dense row-major tensor: the expected values and the inputs. */
typedef struct Dense {
  int order;
  int64_t dims[3];
  double *v;
  double fill;
} Dense;

static int64_t dense_size(const Dense *d) {
  int64_t n = 1;
  for (int m = 0; m < d->order; m++)
    n *= d->dims[m];
  return n;
}

static Dense dense_new(int order, int64_t d0, int64_t d1, int64_t d2) {
  Dense d = {order, {d0, d1, d2}, NULL, 0};
  d.v = calloc((size_t)dense_size(&d) + 1, sizeof(double));
  ck_assert_ptr_nonnull(d.v);
  return d;
}

/* Random values in [lo, hi), a fraction `density` of them (the rest the
 * fill), seeded. */
static Dense dense_random(test_rng *r, int order, int64_t d0, int64_t d1,
                          double density, double lo, double hi) {
  Dense d = dense_new(order, d0, d1, 1);
  for (int64_t e = 0; e < dense_size(&d); e++)
    d.v[e] = test_rng_double(r, 0, 1) < density ? test_rng_double(r, lo, hi)
                                                : 0;
  return d;
}

/* The tensor of d in format fmt (NULL: default); entries equal to the
 * fill are not stored in sparse levels. */
static galley_tensor *tensor_of(const Dense *d, const galley_format *fmt) {
  galley_tensor *t = NULL;
  galley_error err;
  galley_format f = fmt ? *fmt : galley_format_default(d->order);
  galley_status st = galley_tensor_from_dense(d->order, d->dims, d->v,
                                              d->fill, &f, &t, &err);
  ck_assert_msg(st == GALLEY_OK, "from_dense: %s", err.msg);
  return t;
}

typedef struct Bind {
  const char *name;
  const galley_tensor *t;
} Bind;

static const galley_backend BACKENDS[2] = {GALLEY_BACKEND_REFERENCE,
                                           GALLEY_BACKEND_TCC};

/* Parse, bind and run src with the backend; the program (results kept). */
static galley_program *run_prog(const char *src, const Bind *b, int nb,
                                galley_backend backend) {
  galley_program *p = NULL;
  char *diags = NULL;
  galley_error err;
  galley_status st =
      galley_program_parse("g.tin", src, strlen(src), &p, &diags, &err);
  ck_assert_msg(st == GALLEY_OK, "parse:\n%s\n%s", src, diags ? diags : "");
  for (int k = 0; k < nb; k++) {
    st = galley_program_bind(p, b[k].name, b[k].t, &err);
    ck_assert_msg(st == GALLEY_OK, "bind %s: %s", b[k].name, err.msg);
  }
  st = galley_program_set_backend(p, backend, &err);
  ck_assert_msg(st == GALLEY_OK, "backend: %s", err.msg);
  st = galley_program_run(p, &err);
  ck_assert_msg(st == GALLEY_OK, "run (%s):\n%s\n%s",
                galley_backend_name(backend), src, err.msg);
  return p;
}

static const galley_tensor *output(const galley_program *p,
                                   const char *name) {
  for (int k = 0; k < galley_program_num_outputs(p); k++)
    if (strcmp(galley_program_output_name(p, k), name) == 0)
      return galley_program_output(p, k);
  ck_abort_msg("no output %s", name);
  return NULL;
}

/* The dense values of a result. */
static double *values_of(const galley_tensor *t, int64_t *n) {
  *n = 1;
  for (int m = 0; m < galley_tensor_order(t); m++)
    *n *= galley_tensor_dim(t, m);
  double *v = malloc(sizeof(double) * (size_t)(*n + 1));
  galley_error err;
  ck_assert(galley_tensor_to_dense(t, v, *n, &err) == GALLEY_OK);
  return v;
}

static int close_to(double got, double want, double rel) {
  if (isnan(got) || isnan(want))
    return isnan(got) && isnan(want);
  if (got == want)
    return 1;
  return fabs(got - want) <= rel * fmax(1e-12, fmax(fabs(got), fabs(want)));
}

/* Result `name` equals want[] (row-major) within rel, entry by entry. */
static void expect_values(const galley_program *p, const char *name,
                          const double *want, int64_t n, double rel) {
  const galley_tensor *t = output(p, name);
  int64_t got_n;
  double *got = values_of(t, &got_n);
  ck_assert_int_eq(got_n, n);
  for (int64_t e = 0; e < n; e++)
    ck_assert_msg(close_to(got[e], want[e], rel),
                  "%s[%lld] = %.17g, expected %.17g", name, (long long)e,
                  got[e], want[e]);
  free(got);
}

static double scalar_of(const galley_program *p, const char *name) {
  const galley_tensor *t = output(p, name);
  ck_assert_int_eq(galley_tensor_order(t), 0);
  return galley_tensor_get(t, NULL, NULL);
}

static double sigmoid(double x) { return 1 / (1 + exp(-x)); }

/* ------------------------------------------------------------------ */
/* Workloads against the textbook gradients                            */
/* ------------------------------------------------------------------ */

/* Least squares: L = |A x - b|^2; dL/dx = 2 A^T r, dL/dA = 2 r x^T,
 * dL/db = -2 r with r = A x - b. */
START_TEST(least_squares) {
  test_rng r = test_rng_seed(11);
  int64_t m = 7, n = 5;
  Dense A = dense_random(&r, 2, m, n, 0.4, -2, 2);
  Dense x = dense_random(&r, 1, n, 1, 1, -1, 1);
  Dense b = dense_random(&r, 1, m, 1, 0.6, -1, 1);
  double *res = calloc((size_t)m, sizeof *res), *gx = calloc((size_t)n, 8),
         *gA = calloc((size_t)(m * n), 8), *gb = calloc((size_t)m, 8);
  double loss = 0;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++)
      res[i] += A.v[i * n + j] * x.v[j];
    res[i] -= b.v[i];
    loss += res[i] * res[i];
    gb[i] = -2 * res[i];
    for (int64_t j = 0; j < n; j++) {
      gx[j] += 2 * A.v[i * n + j] * res[i];
      gA[i * n + j] = 2 * res[i] * x.v[j];
    }
  }
  galley_tensor *tA = tensor_of(&A, NULL), *tx = tensor_of(&x, NULL),
                *tb = tensor_of(&b, NULL);
  Bind bind[] = {{"A", tA}, {"x", tx}, {"b", tb}};
  const char *src = "input A[i, j], x[j], b[i]\n"
                    "r[i] = sum(j: A[i, j] * x[j]) - b[i]\n"
                    "L = sum(i: r[i]^2)\n"
                    "Gx[j] = grad(L, x[j])\n"
                    "GA[i, j] = grad(L, A[i, j])\n"
                    "Gb[i] = grad(L, b[i])\n"
                    "output L, Gx, GA, Gb\n";
  for (int k = 0; k < 2; k++) {
    galley_program *p = run_prog(src, bind, 3, BACKENDS[k]);
    ck_assert(close_to(scalar_of(p, "L"), loss, 1e-12));
    expect_values(p, "Gx", gx, n, 1e-12);
    expect_values(p, "GA", gA, m * n, 1e-12);
    expect_values(p, "Gb", gb, m, 1e-12);
    galley_program_free(p);
  }
  galley_tensor_free(tA);
  galley_tensor_free(tx);
  galley_tensor_free(tb);
  free(A.v), free(x.v), free(b.v), free(res), free(gx), free(gA), free(gb);
}
END_TEST

/* Logistic regression: L = sum_i log(1 + e^z_i) - y_i z_i with z = X
 * theta; dL/dtheta = X^T (sigmoid(z) - y). */
START_TEST(logistic_regression) {
  test_rng r = test_rng_seed(12);
  int64_t m = 9, n = 6;
  Dense X = dense_random(&r, 2, m, n, 0.3, -1, 2);
  Dense th = dense_random(&r, 1, n, 1, 1, -1, 1);
  Dense y = dense_new(1, m, 1, 1);
  for (int64_t i = 0; i < m; i++)
    y.v[i] = test_rng_below(&r, 2);
  double *g = calloc((size_t)n, sizeof *g), loss = 0;
  for (int64_t i = 0; i < m; i++) {
    double z = 0;
    for (int64_t j = 0; j < n; j++)
      z += X.v[i * n + j] * th.v[j];
    loss += log(1 + exp(z)) - y.v[i] * z;
    for (int64_t j = 0; j < n; j++)
      g[j] += X.v[i * n + j] * (sigmoid(z) - y.v[i]);
  }
  galley_tensor *tX = tensor_of(&X, NULL), *tt = tensor_of(&th, NULL),
                *ty = tensor_of(&y, NULL);
  Bind bind[] = {{"X", tX}, {"theta", tt}, {"y", ty}};
  const char *src = "input X[i, j], theta[j], y[i]\n"
                    "z[i] = X[i, j] * theta[j]\n"
                    "L = sum(i: log(1 + exp(z[i])) - y[i] * z[i])\n"
                    "G[j] = grad(L, theta[j])\n";
  for (int k = 0; k < 2; k++) {
    galley_program *p = run_prog(src, bind, 3, BACKENDS[k]);
    ck_assert(close_to(scalar_of(p, "L"), loss, 1e-12));
    expect_values(p, "G", g, n, 1e-10);
    galley_program_free(p);
  }
  galley_tensor_free(tX);
  galley_tensor_free(tt);
  galley_tensor_free(ty);
  free(X.v), free(th.v), free(y.v), free(g);
}
END_TEST

/* Softmax cross-entropy: Z = X W, L = sum_i logsumexp(Z_i) - <Y_i, Z_i>;
 * dL/dW = X^T (softmax(Z) - Y). */
START_TEST(softmax_cross_entropy) {
  test_rng r = test_rng_seed(13);
  int64_t m = 8, nf = 5, nc = 4;
  Dense X = dense_random(&r, 2, m, nf, 0.4, -1, 1);
  Dense W = dense_random(&r, 2, nf, nc, 1, -1, 1);
  Dense Y = dense_new(2, m, nc, 1);
  for (int64_t i = 0; i < m; i++)
    Y.v[i * nc + test_rng_below(&r, nc)] = 1;
  double *g = calloc((size_t)(nf * nc), sizeof *g), loss = 0;
  for (int64_t i = 0; i < m; i++) {
    double z[4] = {0}, s = 0;
    for (int64_t c = 0; c < nc; c++) {
      for (int64_t f = 0; f < nf; f++)
        z[c] += X.v[i * nf + f] * W.v[f * nc + c];
      s += exp(z[c]);
    }
    loss += log(s);
    for (int64_t c = 0; c < nc; c++) {
      loss -= Y.v[i * nc + c] * z[c];
      for (int64_t f = 0; f < nf; f++)
        g[f * nc + c] += X.v[i * nf + f] * (exp(z[c]) / s - Y.v[i * nc + c]);
    }
  }
  galley_tensor *tX = tensor_of(&X, NULL), *tW = tensor_of(&W, NULL),
                *tY = tensor_of(&Y, NULL);
  Bind bind[] = {{"X", tX}, {"W", tW}, {"Y", tY}};
  const char *src =
      "input X[i, f], W[f, c], Y[i, c]\n"
      "Z[i, c] = X[i, f] * W[f, c]\n"
      "L = sum(i: log(sum(c: exp(Z[i, c]))) - sum(c: Y[i, c] * Z[i, c]))\n"
      "G[f, c] = grad(L, W[f, c])\n";
  for (int k = 0; k < 2; k++) {
    galley_program *p = run_prog(src, bind, 3, BACKENDS[k]);
    ck_assert(close_to(scalar_of(p, "L"), loss, 1e-12));
    expect_values(p, "G", g, nf * nc, 1e-10);
    galley_program_free(p);
  }
  galley_tensor_free(tX);
  galley_tensor_free(tW);
  galley_tensor_free(tY);
  free(X.v), free(W.v), free(Y.v), free(g);
}
END_TEST

/* Matrix factorization over the observed entries of R only:
 * L = sum_{(i,j) observed} (R_ij - U_i . V_j)^2;
 * dL/dU_ik = -2 sum_j [observed] e_ij V_jk, and likewise for V. */
static const char *MF_SRC =
    "input R[i, j], U[i, k], V[j, k]\n"
    "P[i, j] = (R[i, j] != 0) * U[i, k] * V[j, k]\n"
    "L = sum(i, j: (R[i, j] - P[i, j])^2)\n"
    "GU[i, k] = grad(L, U[i, k])\n"
    "GV[j, k] = grad(L, V[j, k])\n";

START_TEST(factorization_observed) {
  test_rng r = test_rng_seed(14);
  int64_t m = 9, n = 7, rank = 3;
  Dense R = dense_random(&r, 2, m, n, 0.3, 1, 5);
  Dense U = dense_random(&r, 2, m, rank, 1, -1, 1);
  Dense V = dense_random(&r, 2, n, rank, 1, -1, 1);
  double *gU = calloc((size_t)(m * rank), 8), *gV = calloc((size_t)(n * rank), 8);
  double loss = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      if (R.v[i * n + j] == 0)
        continue;
      double pred = 0;
      for (int64_t k = 0; k < rank; k++)
        pred += U.v[i * rank + k] * V.v[j * rank + k];
      double e = R.v[i * n + j] - pred;
      loss += e * e;
      for (int64_t k = 0; k < rank; k++) {
        gU[i * rank + k] += -2 * e * V.v[j * rank + k];
        gV[j * rank + k] += -2 * e * U.v[i * rank + k];
      }
    }
  galley_tensor *tR = tensor_of(&R, NULL), *tU = tensor_of(&U, NULL),
                *tV = tensor_of(&V, NULL);
  Bind bind[] = {{"R", tR}, {"U", tU}, {"V", tV}};
  for (int k = 0; k < 2; k++) {
    galley_program *p = run_prog(MF_SRC, bind, 3, BACKENDS[k]);
    ck_assert(close_to(scalar_of(p, "L"), loss, 1e-12));
    expect_values(p, "GU", gU, m * rank, 1e-10);
    expect_values(p, "GV", gV, n * rank, 1e-10);
    galley_program_free(p);
  }
  galley_tensor_free(tR);
  galley_tensor_free(tU);
  galley_tensor_free(tV);
  free(R.v), free(U.v), free(V.v), free(gU), free(gV);
}
END_TEST

/* Sum of the stored entries of every physical query of the last run. */
static int64_t largest_result(const galley_program *p, char *which,
                              size_t size) {
  galley_run_info info;
  galley_program_run_info(p, &info);
  int64_t most = 0;
  for (int k = 0; k < info.nqueries; k++) {
    galley_query_info q;
    galley_error err;
    ck_assert(galley_program_query_info(p, k, &q, &err) == GALLEY_OK);
    if (q.stored > most) {
      most = q.stored;
      snprintf(which, size, "%s", q.name);
    }
  }
  return most;
}

/* No densification: the factorization's gradient program on a 3000 x
 * 2000 matrix with 400 observed entries stores nothing near 6e6 entries
 * (every result is O(nnz + (m + n) * rank)), and doubling both dimensions
 * at the same nnz doubles at most the dense factors' share. */
START_TEST(factorization_stays_sparse) {
  int64_t sizes[2][2] = {{3000, 2000}, {6000, 4000}}, rank = 2, nnz = 400;
  int64_t largest[2];
  for (int s = 0; s < 2; s++) {
    int64_t m = sizes[s][0], n = sizes[s][1];
    test_rng r = test_rng_seed(15);
    int64_t *coords = malloc(sizeof(int64_t) * (size_t)(2 * nnz));
    double *vals = malloc(sizeof(double) * (size_t)nnz);
    for (int64_t e = 0; e < nnz; e++) {
      coords[2 * e] = test_rng_below(&r, m);
      coords[2 * e + 1] = test_rng_below(&r, n);
      vals[e] = 1 + (double)test_rng_below(&r, 4);
    }
    galley_tensor *tR = NULL;
    galley_error err;
    int64_t dims[2] = {m, n};
    ck_assert(galley_tensor_from_coo(2, dims, nnz, coords, vals, 0, NULL,
                                     &tR, &err) == GALLEY_OK);
    Dense U = dense_random(&r, 2, m, rank, 1, -1, 1);
    Dense V = dense_random(&r, 2, n, rank, 1, -1, 1);
    galley_tensor *tU = tensor_of(&U, NULL), *tV = tensor_of(&V, NULL);
    Bind bind[] = {{"R", tR}, {"U", tU}, {"V", tV}};
    galley_program *p = run_prog(MF_SRC, bind, 3, GALLEY_BACKEND_TCC);
    char which[64] = "";
    largest[s] = largest_result(p, which, sizeof which);
    ck_assert_msg(largest[s] <= 2 * nnz + (m + n) * rank,
                  "query %s stores %lld entries (m = %lld, n = %lld)", which,
                  (long long)largest[s], (long long)m, (long long)n);
    galley_program_free(p);
    galley_tensor_free(tR);
    galley_tensor_free(tU);
    galley_tensor_free(tV);
    free(coords), free(vals), free(U.v), free(V.v);
  }
  ck_assert_int_le(largest[1], 2 * largest[0] + 2 * nnz);
}
END_TEST

/* One GCN layer with a softmax cross-entropy on karate:
 * H = relu((A X) W), L = sum_i logsumexp(H_i) - <Y_i, H_i>;
 * dL/dW = (A X)^T (relu'(Z) .* (softmax(H) - Y)) with Z = (A X) W. */
START_TEST(gcn_layer) {
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/karate.mtx", test_data_dir());
  galley_tensor *tA = NULL;
  galley_error err;
  galley_status st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &tA, &err);
  ck_assert_msg(st == GALLEY_OK, "%s", err.msg);
  int64_t n = galley_tensor_dim(tA, 0), nf = 6, nc = 3, cnt;
  double *A = values_of(tA, &cnt);
  test_rng r = test_rng_seed(16);
  Dense X = dense_random(&r, 2, n, nf, 0.3, 0, 1);
  Dense W = dense_random(&r, 2, nf, nc, 1, -1, 1);
  Dense Y = dense_new(2, n, nc, 1);
  for (int64_t i = 0; i < n; i++)
    Y.v[i * nc + test_rng_below(&r, nc)] = 1;
  double *AX = calloc((size_t)(n * nf), 8), *g = calloc((size_t)(nf * nc), 8);
  double loss = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      for (int64_t f = 0; f < nf; f++)
        AX[i * nf + f] += A[i * n + j] * X.v[j * nf + f];
  for (int64_t i = 0; i < n; i++) {
    double z[3] = {0}, h[3], s = 0;
    for (int64_t c = 0; c < nc; c++) {
      for (int64_t f = 0; f < nf; f++)
        z[c] += AX[i * nf + f] * W.v[f * nc + c];
      h[c] = z[c] > 0 ? z[c] : 0;
      s += exp(h[c]);
    }
    loss += log(s);
    for (int64_t c = 0; c < nc; c++) {
      loss -= Y.v[i * nc + c] * h[c];
      double dh = exp(h[c]) / s - Y.v[i * nc + c];
      for (int64_t f = 0; f < nf; f++)
        g[f * nc + c] += AX[i * nf + f] * (z[c] > 0 ? dh : 0);
    }
  }
  galley_tensor *tX = tensor_of(&X, NULL), *tW = tensor_of(&W, NULL),
                *tY = tensor_of(&Y, NULL);
  Bind bind[] = {{"A", tA}, {"X", tX}, {"W", tW}, {"Y", tY}};
  const char *src =
      "input A[i, j], X[j, f], W[f, c], Y[i, c]\n"
      "AX[i, f] = A[i, j] * X[j, f]\n"
      "H[i, c] = relu(sum(f: AX[i, f] * W[f, c]))\n"
      "L = sum(i: log(sum(c: exp(H[i, c]))) - sum(c: Y[i, c] * H[i, c]))\n"
      "G[f, c] = grad(L, W[f, c])\n";
  for (int k = 0; k < 2; k++) {
    galley_program *p = run_prog(src, bind, 4, BACKENDS[k]);
    ck_assert(close_to(scalar_of(p, "L"), loss, 1e-12));
    expect_values(p, "G", g, nf * nc, 1e-10);
    galley_program_free(p);
  }
  galley_tensor_free(tA);
  galley_tensor_free(tX);
  galley_tensor_free(tW);
  galley_tensor_free(tY);
  free(A), free(X.v), free(W.v), free(Y.v), free(AX), free(g);
}
END_TEST

/* TransE on Kinship (104 entities, 25 relations, 10686 triples): the
 * L2 distance |E_h + R_r - E_t| of every triple, smoothed by 1e-6 under
 * the square root; dL/dE and dL/dR by a loop over the triples. */
typedef struct Triples {
  int64_t n, cap;
  int64_t *hrt;
} Triples;

static int add_triple(void *ud, const int64_t *c, double v) {
  Triples *t = ud;
  if (v == 0)
    return 0;
  if (t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 1024;
    t->hrt = realloc(t->hrt, sizeof(int64_t) * 3 * (size_t)t->cap);
  }
  memcpy(&t->hrt[3 * t->n++], c, 3 * sizeof(int64_t));
  return 0;
}

/* src's L, GE and GR against the loop, over `runs` runs of one program
 * (later runs reuse the first's value arrays: src/exec/recycle.h). */
static void transe_check(const char *src, int runs) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tensors/kg/kinship/all.tns",
           test_data_dir());
  galley_tensor *tT = NULL;
  galley_error err;
  galley_status st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &tT, &err);
  ck_assert_msg(st == GALLEY_OK, "%s", err.msg);
  int64_t ne = galley_tensor_dim(tT, 0), nr = galley_tensor_dim(tT, 1), d = 4;
  Triples tr = {0};
  galley_tensor_foreach(tT, add_triple, &tr);
  ck_assert_int_gt(tr.n, 10000);
  test_rng r = test_rng_seed(17);
  Dense E = dense_random(&r, 2, ne, d, 1, -0.5, 0.5);
  Dense R = dense_random(&r, 2, nr, d, 1, -0.5, 0.5);
  double *gE = calloc((size_t)(ne * d), 8), *gR = calloc((size_t)(nr * d), 8);
  double loss = 0;
  for (int64_t e = 0; e < tr.n; e++) {
    int64_t h = tr.hrt[3 * e], rel = tr.hrt[3 * e + 1], t = tr.hrt[3 * e + 2];
    double diff[4], sq = 0;
    for (int64_t k = 0; k < d; k++) {
      diff[k] = E.v[h * d + k] + R.v[rel * d + k] - E.v[t * d + k];
      sq += diff[k] * diff[k];
    }
    double dist = sqrt(sq + 1e-6);
    loss += dist;
    for (int64_t k = 0; k < d; k++) {
      double gk = diff[k] / dist; /* d dist / d diff_k */
      gE[h * d + k] += gk;
      gR[rel * d + k] += gk;
      gE[t * d + k] -= gk;
    }
  }
  galley_tensor *tE = tensor_of(&E, NULL), *tR = tensor_of(&R, NULL);
  Bind bind[] = {{"T", tT}, {"E", tE}, {"R", tR}};
  /* the reference evaluator would loop over 104 * 25 * 104 * 4 points
   * per query: the kernels only, against the loop above */
  galley_program *p = run_prog(src, bind, 3, GALLEY_BACKEND_TCC);
  for (int run = 0; run < runs; run++) {
    if (run > 0)
      ck_assert_int_eq(galley_program_run(p, &err), GALLEY_OK);
    ck_assert(close_to(scalar_of(p, "L"), loss, 1e-10));
    expect_values(p, "GE", gE, ne * d, 1e-9);
    expect_values(p, "GR", gR, nr * d, 1e-9);
  }
  galley_program_free(p);
  galley_tensor_free(tT);
  galley_tensor_free(tE);
  galley_tensor_free(tR);
  free(tr.hrt), free(E.v), free(R.v), free(gE), free(gR);
}

START_TEST(transe_kinship) {
  transe_check("input T[h, r, t], E[e, d], R[r, d]\n"
               "D[h, r, t] = T[h, r, t] * (E[h, d] + R[r, d] - E[t, d])^2\n"
               "L = sum(h, r, t: T[h, r, t] * sqrt(D[h, r, t] + 1e-6))\n"
               "GE[e, d] = grad(L, E[e, d])\n"
               "GR[r, d] = grad(L, R[r, d])\n", 1);
}
END_TEST

/* As benchmarks/bench_grad writes it, one query per stage: the order-4
 * differences X (T's pattern times a dense d: an OUT_PATTERN result with
 * a dense suffix) apart from their squared norms S (on X's first three
 * levels); three runs of one program. */
START_TEST(transe_kinship_staged) {
  transe_check("input T[h, r, t], E[e, d], R[r, d]\n"
               "X[h, r, t, d] = T[h, r, t] * (E[h, d] + R[r, d] - E[t, d])\n"
               "S[h, r, t] = sum(d: X[h, r, t, d]^2)\n"
               "L = sum(h, r, t: T[h, r, t] * sqrt(S[h, r, t] + 1e-6))\n"
               "GE[e, d] = grad(L, E[e, d])\n"
               "GR[r, d] = grad(L, R[r, d])\n", 3);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Conventions (man/tin.5, GRADIENTS), value by value                  */
/* ------------------------------------------------------------------ */

typedef struct InSpec {
  const char *name;
  int order;
  int64_t d0, d1;
  double fill;
  double v[12]; /* dense, row-major; entries equal to fill are unstored */
} InSpec;

typedef struct ConvCase {
  const char *why;
  const char *src;
  InSpec in[3];
  const char *out; /* the result checked */
  int n;           /* its entries */
  double want[12];
} ConvCase;

static const ConvCase conv_cases[] = {
    {"prod: one zero gets the product of the others, the rest 0",
     "input x[i] fill 0.5\nL = prod(i: x[i])\nG[i] = grad(L, x[i])",
     {{"x", 1, 5, 1, 0.5, {2, 0, 0.5, -1, 0.5}}},
     "G", 5, {0, -0.5, 0, 0, 0}},
    {"prod: no zero, the product of the others (fills included)",
     "input x[i] fill 0.5\nL = prod(i: x[i])\nG[i] = grad(L, x[i])",
     {{"x", 1, 5, 1, 0.5, {2, 4, 0.5, -1, 0.5}}},
     "G", 5, {-1, -0.5, -4, 2, -4}},
    {"prod: two zeros, 0 everywhere",
     "input x[i]\nL = prod(i: x[i])\nG[i] = grad(L, x[i])",
     {{"x", 1, 4, 1, 0, {0, 3, 0, 2}}},
     "G", 4, {0, 0, 0, 0}},
    {"max: three tied maxima share the gradient equally",
     "input x[i]\nL = max(i: x[i])\nG[i] = grad(L, x[i])",
     {{"x", 1, 5, 1, 0, {1, 3, 3, 0, 3}}},
     "G", 5, {0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3}},
    {"max: the maximum is the fill, in two places",
     "input x[i]\nL = max(i: x[i])\nG[i] = grad(L, x[i])",
     {{"x", 1, 4, 1, 0, {-1, -2, 0, 0}}},
     "G", 4, {0, 0, 0.5, 0.5}},
    {"min(x, y) pointwise: a tie gives each 1/2",
     "input x[i], y[i]\nL = sum(i: min(x[i], y[i]))\nG[i] = grad(L, x[i])",
     {{"x", 1, 3, 1, 0, {1, 2, 5}}, {"y", 1, 3, 1, 0, {1, 3, 4}}},
     "G", 3, {0.5, 1, 0}},
    {"max(x, 0, x): ties among three arguments, two of them x",
     "input x[i]\nL = sum(i: max(x[i], 0, x[i]))\nG[i] = grad(L, x[i])",
     {{"x", 1, 3, 1, 0, {0, -1, 2}}},
     "G", 3, {2.0 / 3, 0, 1}},
    {"abs and relu have derivative 0 at 0",
     "input x[i]\nL = sum(i: abs(x[i]) + relu(x[i]))\nG[i] = grad(L, x[i])",
     {{"x", 1, 3, 1, 0, {0, -2, 3}}},
     "G", 3, {0, -1, 2}},
    {"a sum over fills: the fills get their share",
     "input x[i] fill 0.5\nL = sum(i: x[i]^2)\nG[i] = grad(L, x[i])",
     {{"x", 1, 4, 1, 0.5, {3, 0.5, -1, 0.5}}},
     "G", 4, {6, 1, -2, 1}},
    {"comparisons are locally constant",
     "input x[i]\nL = sum(i: (x[i] > 0) * x[i])\nG[i] = grad(L, x[i])",
     {{"x", 1, 3, 1, 0, {1.5, -2, 0}}},
     "G", 3, {1, 0, 0}},
    {"ifelse: the taken branch only",
     "input x[i]\nL = sum(i: ifelse(x[i] > 0, x[i]^2, 3 * x[i]))\n"
     "G[i] = grad(L, x[i])",
     {{"x", 1, 2, 1, 0, {2, -1}}},
     "G", 2, {4, 3}},
    {"any and all: no gradient",
     "input x[i, j]\nL = sum(i: any(j: x[i, j] > 1) + all(j: x[i, j]))\n"
     "G[i, j] = grad(L, x[i, j])",
     {{"x", 2, 2, 2, 0, {2, 1, 0, 3}}},
     "G", 4, {0, 0, 0, 0}},
    {"x ^ y in the exponent: 2^x log 2",
     "input x[i]\nL = sum(i: 2 ^ x[i])\nG[i] = grad(L, x[i])",
     {{"x", 1, 2, 1, 0, {1, 3}}},
     "G", 2, {2 * 0.69314718055994531, 8 * 0.69314718055994531}},
    {"x ^ 0 is constant",
     "input x[i]\nL = sum(i: x[i] ^ 0)\nG[i] = grad(L, x[i])",
     {{"x", 1, 2, 1, 0, {0, 3}}},
     "G", 2, {0, 0}},
    {"L does not depend on x: zeros of x's shape",
     "input x[i], y[i]\nL = sum(i: y[i])\nG[i] = grad(L, x[i])",
     {{"x", 1, 3, 1, 0, {1, 2, 3}}, {"y", 1, 2, 1, 0, {1, 1}}},
     "G", 3, {0, 0, 0}},
    {"constant along an index: each entry gets n_k",
     "input x[i], A[k, i]\nL = sum(k, i: A[k, i] + x[i])\n"
     "G[i] = grad(L, x[i])",
     {{"x", 1, 2, 1, 0, {1, 2}}, {"A", 2, 3, 2, 0, {1, 0, 0, 0, 0, 2}}},
     "G", 2, {3, 3}},
    {"broadcast: a scalar against a vector",
     "input x[i], a\nL = sum(i: a * x[i]^2)\nG = grad(L, a)",
     {{"x", 1, 3, 1, 0, {1, -2, 3}}, {"a", 0, 1, 1, 0, {0.5}}},
     "G", 1, {14}},
    {"the gradient with respect to a query",
     "input x[i]\nQ[i] = 3 * x[i]\nL = sum(i: Q[i]^2)\nG[i] = grad(L, Q[i])",
     {{"x", 1, 2, 1, 0, {1, -2}}},
     "G", 2, {6, -12}},
    {"a diagonal, through a query holding it (man/tin.5's advice)",
     "input A[i, j]\nDiag[i] = A[i, i]\nL = sum(i: Diag[i]^2)\n"
     "G[i] = grad(L, Diag[i])",
     {{"A", 2, 2, 2, 0, {1, 5, 7, 3}}},
     "G", 2, {2, 6}},
    {"through a query (an alias) to the input",
     "input x[i]\nQ[i] = 3 * x[i]\nL = sum(i: Q[i]^2)\nG[i] = grad(L, x[i])",
     {{"x", 1, 2, 1, 0, {1, -2}}},
     "G", 2, {18, -36}},
    {"dL/dL is 1",
     "input x[i]\nL = sum(i: x[i])\nG = grad(L, L)",
     {{"x", 1, 2, 1, 0, {1, -2}}},
     "G", 1, {1}},
    {"the left side in another order gives the transpose",
     "input A[i, j], w[j]\nL = sum(i, j: A[i, j] * w[j])\n"
     "GT[j, i] = grad(L, A[i, j])",
     {{"A", 2, 2, 3, 0, {1, 0, 2, 0, 0, 3}}, {"w", 1, 3, 1, 0, {1, 2, 3}}},
     "GT", 6, {1, 1, 2, 2, 3, 3}},
    {"a gradient of a gradient: Hessian-vector product 6 x v",
     "input x[i], v[i]\nL = sum(i: x[i]^3)\nG[i] = grad(L, x[i])\n"
     "L2 = sum(i: G[i] * v[i])\nH[i] = grad(L2, x[i])",
     {{"x", 1, 3, 1, 0, {1, -2, 0.5}}, {"v", 1, 3, 1, 0, {1, 1, 2}}},
     "H", 3, {6, -12, 6}},
    {"a user def, differentiated from its body (and one it calls)",
     "input x[i]\ndef f(a, b) = a * b + b\ndef g(a) = f(a, a) * 2\n"
     "L = sum(i: g(x[i]))\nG[i] = grad(L, x[i])",
     {{"x", 1, 2, 1, 0, {1, -2}}},
     "G", 2, {6, -6}},
    {"user aggregates like max and + follow max and sum",
     "input A[i, j]\n"
     "def smax(x, y) = max(x, y) [associative, commutative, identity = -inf]\n"
     "def tplus(x, y) = x + y [associative, commutative, identity = 0]\n"
     "L = tplus(i: smax(j: A[i, j]))\nG[i, j] = grad(L, A[i, j])",
     {{"A", 2, 2, 2, 0, {1, 3, 5, 5}}},
     "G", 4, {0, 1, 0.5, 0.5}},
    /* the optimizer distributes the min over the + (min(k: a + b) =
     * min(k: a) + b), so the minimum and the elements it is compared
     * with come out of different queries with different rounding: grad
     * materializes the elements so that the comparison is exact (this
     * gave NaN, 0/0 ties, before) */
    {"a min whose sum the optimizer rewrites: ties still found",
     "input A[k] fill 0.5\ninput B[i, j] fill 1.5\n"
     "Q1[i] = ifelse((sum(i, j: A[k] - B[i, j]) > A[k]), A[k], B[i, j])\n"
     "L = min(k: (((A[k] + A[k]) + sum(i: B[i, j])) + sum(i: Q1[i])))\n"
     "G[i, j] = grad(L, B[i, j])",
     {{"A", 1, 1, 1, 0.5, {0.16328605362383675}},
      {"B", 2, 4, 3, 1.5,
       {0.88885423417975828, 0.80909044412872144, -1.0163163548484486,
        0.44667745122085378, -0.87623582178977166, -0.69438082481058583,
        0.65432980095615578, 0.35571430620228606, -0.4132375941656552,
        0.84127849187133052, -1.0876229459299969, -0.98420093267423037}}},
     "G", 12, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
    {"nested aggregates: sum over rows of the row maximum of A x",
     "input A[i, j], x[j]\nL = sum(i: max(j: A[i, j] * x[j]))\n"
     "G[j] = grad(L, x[j])",
     {{"A", 2, 2, 2, 0, {1, 2, 3, -1}}, {"x", 1, 2, 1, 0, {1, 1}}},
     "G", 2, {3, 2}},
};
enum { NCONV = sizeof conv_cases / sizeof conv_cases[0] };

START_TEST(convention_case) {
  const ConvCase *c = &conv_cases[_i / 2];
  galley_tensor *t[3] = {NULL, NULL, NULL};
  Bind b[3];
  int nb = 0;
  for (; nb < 3 && c->in[nb].name; nb++) {
    const InSpec *s = &c->in[nb];
    Dense d = {s->order, {s->d0, s->d1, 1}, (double *)s->v, s->fill};
    t[nb] = tensor_of(&d, NULL);
    b[nb] = (Bind){s->name, t[nb]};
  }
  galley_program *p = run_prog(c->src, b, nb, BACKENDS[_i % 2]);
  const galley_tensor *r = output(p, c->out);
  int64_t n;
  double *got = values_of(r, &n);
  ck_assert_int_eq(n, c->n);
  for (int e = 0; e < c->n; e++)
    ck_assert_msg(close_to(got[e], c->want[e], 1e-14),
                  "%s (%s): %s[%d] = %.17g, expected %.17g", c->why,
                  galley_backend_name(BACKENDS[_i % 2]), c->out, e, got[e],
                  c->want[e]);
  free(got);
  galley_program_free(p);
  for (int k = 0; k < nb; k++)
    galley_tensor_free(t[k]);
}
END_TEST

/* The printed input plan of a program. */
static char *plan_text(const char *src) {
  galley_program *p = NULL;
  galley_error err;
  ck_assert(galley_program_parse("g.tin", src, strlen(src), &p, NULL, &err) ==
            GALLEY_OK);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  galley_program_print_plan(p, f);
  fclose(f);
  galley_program_free(p);
  return buf;
}

static int count_of(const char *text, const char *what) {
  int n = 0;
  for (const char *s = strstr(text, what); s; s = strstr(s + 1, what))
    n++;
  return n;
}

/* Two grads of one loss share the adjoint of their common intermediate,
 * and a grad asked twice reads the first; the loss stays a result. */
START_TEST(grads_share_intermediates) {
  char *plan = plan_text("input X[i, j], U[j, k], V[k]\n"
                         "H[i, k] = tanh(X[i, j] * U[j, k])\n"
                         "L = sum(i: sigmoid(sum(k: H[i, k] * V[k])))\n"
                         "GU[j, k] = grad(L, U[j, k])\n"
                         "GV[k] = grad(L, V[k])\n"
                         "GU2[j, k] = grad(L, U[j, k])\n");
  ck_assert_int_eq(count_of(plan, "Query(dL/dH[i,k]"), 1);
  ck_assert_int_eq(count_of(plan, "Alias(dL/dH[i,k])"), 1); /* GU only */
  ck_assert_int_eq(count_of(plan, "Query(GU2[j,k], Alias(GU[j,k]))"), 1);
  ck_assert_int_eq(count_of(plan, "Outputs(L, GU, GV, GU2)"), 1);
  free(plan);
}
END_TEST

/* The mask of the factorization goes into dL/dP once (dL/dP:masked),
 * shared by both gradients, each then a product of that one sparse
 * query with a dense factor; the pointwise residual dL/dP is computed
 * inside the masked query (one SDDMM-like pass on R's pattern), not read
 * back from a query of its own; a mask that is itself differentiated (R's
 * own gradient goes through R[i, j] != 0, a comparison: none) and a
 * loss with no mask keep the plain adjoint. */
START_TEST(masks_go_into_the_adjoint_once) {
  char *plan = plan_text(MF_SRC);
  ck_assert_int_eq(count_of(plan, "Query(dL/dP:masked[i,j], Map(*, 2, "
                                  "Map(-, R[i,j], Alias(P[i,j])), -1, "
                                  "Map(!=, R[i,j], 0)))"),
                   1);
  ck_assert_int_eq(count_of(plan, "Alias(dL/dP[i,j])"), 0);
  ck_assert_int_eq(count_of(plan, "Query(GU[i,k], Agg(+, j, Map(*, "
                                  "Alias(dL/dP:masked[i,j]), V[j,k])))"),
                   1);
  ck_assert_int_eq(count_of(plan, "Query(GV[j,k], Agg(+, i, Map(*, "
                                  "Alias(dL/dP:masked[i,j]), U[i,k])))"),
                   1);
  free(plan);
  /* the mask's own tensor, differentiated through a non-mask factor */
  plan = plan_text("input M[i], A[i, j], x[j]\n"
                   "Q[i] = M[i] * A[i, j] * x[j]\n"
                   "L = sum(i: Q[i]^2)\n"
                   "GM[i] = grad(L, M[i])\nGx[j] = grad(L, x[j])\n");
  ck_assert_int_eq(count_of(plan, "Query(dL/dQ:masked[i], "), 1);
  ck_assert_int_eq(count_of(plan, "Query(GM[i], Agg(+, j, Map(*, "
                                  "Alias(dL/dQ[i]), x[j], A[i,j])))"),
                   1);
  ck_assert_int_eq(count_of(plan, "Query(Gx[j], Agg(+, i, Map(*, "
                                  "Alias(dL/dQ:masked[i]), A[i,j])))"),
                   1);
  free(plan);
}
END_TEST

/* The generated program is an ordinary input plan: this is what explain
 * shows for logistic regression (the sigmoid's value read back from z). */
START_TEST(plan_of_logistic_regression) {
  char *plan = plan_text("input X[i, j], theta[j], y[i]\n"
                         "z[i] = X[i, j] * theta[j]\n"
                         "L = sum(i: log(1 + exp(z[i])) - y[i] * z[i])\n"
                         "G[j] = grad(L, theta[j])\n");
  const char *want =
      "Query(z[i], Agg(+, j, Map(*, X[i,j], theta[j])))\n"
      "Query(L, Agg(+, i, Map(-, Map(log, Map(+, 1, Map(exp, Alias(z[i])))), "
      "Map(*, y[i], Alias(z[i])))))\n"
      "Query(dL/dz[i], Map(+, Map(*, Map(/, 1, Map(+, 1, Map(exp, "
      "Alias(z[i])))), Map(exp, Alias(z[i]))), Map(*, -1, y[i])))\n"
      "Query(G[j], Agg(+, i, Map(*, Alias(dL/dz[i]), X[i,j])))\n"
      "Outputs(L, G)\n";
  ck_assert_str_eq(plan, want);
  free(plan);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Located errors                                                      */
/* ------------------------------------------------------------------ */

typedef struct ErrCase {
  const char *src;
  const char *diags;
} ErrCase;

static const ErrCase err_cases[] = {
    {"input A[i]\nP[i] = 2 * A[i]\nG[i] = grad(P, A[i])",
     "g.tin:3:13: error: the loss of grad must be a scalar query, but 'P' "
     "has 1 mode\nG[i] = grad(P, A[i])\n            ^\n"},
    {"input A[i], s\nG[i] = grad(s, A[i])",
     "g.tin:2:13: error: the loss of grad must be a scalar query, but 's' "
     "is an input\nG[i] = grad(s, A[i])\n            ^\n"},
    {"input A[i]\nG[i] = grad(Q, A[i])",
     "g.tin:2:13: error: unknown query 'Q'\nG[i] = grad(Q, A[i])\n"
     "            ^\n"},
    {"input A[i]\ndef f(x) = x\nL = sum(i: A[i])\nG = grad(L, f)",
     "g.tin:4:13: error: 'f' is a function, not a tensor\n"
     "G = grad(L, f)\n            ^\n"},
    {"input A[i]\ndim n = 3\nL = sum(i: A[i])\nG = grad(L, n)",
     "g.tin:4:13: error: 'n' is a dim, not a tensor\nG = grad(L, n)\n"
     "            ^\n"},
    {"input A[i]\nL = sum(i: A[i])\nG[i] = grad(L, B[i])",
     "g.tin:3:16: error: unknown tensor 'B'\nG[i] = grad(L, B[i])\n"
     "               ^\n"},
    {"input A[i, j]\nL = sum(i, j: A[i, j])\nG[i, j] = grad(L, A)",
     "g.tin:3:19: error: 'A' has 2 modes but is used without indices\n"
     "G[i, j] = grad(L, A)\n                  ^\n"},
    {"input A[i, j]\nL = sum(i, j: A[i, j])\nG[i] = grad(L, A[i])",
     "g.tin:3:16: error: 'A' has 2 modes but is used with 1 index\n"
     "G[i] = grad(L, A[i])\n               ^\n"},
    {"input a\nL = a * a\nG[i] = grad(L, a[i])",
     "g.tin:3:16: error: 'a' is a scalar and takes no indices\n"
     "G[i] = grad(L, a[i])\n               ^\n"},
    {"input A[i, j]\nL = sum(i, j: A[i, j])\nG[i, j] = grad(L, A[i, i])",
     "g.tin:3:24: error: index 'i' is repeated in 'A[i, i]': the tensor of "
     "a grad takes one index per mode\nG[i, j] = grad(L, A[i, i])\n"
     "                       ^\n"},
    {"input A[i, j]\nL = sum(i, j: A[i, j])\nG[i, k] = grad(L, A[i, j])",
     "g.tin:3:6: error: index 'k' on the left is not an index of 'A[i, j]'\n"
     "G[i, k] = grad(L, A[i, j])\n     ^\n"
     "g.tin:3:24: error: index 'j' of 'A[i, j]' is missing on the left of "
     "'G'\nG[i, k] = grad(L, A[i, j])\n                       ^\n"},
    {"input A[i]\nL = sum(i: A[i])\nG[i] = 2 * grad(L, A[i])",
     "g.tin:3:12: error: grad(...) must be the whole right-hand side of a "
     "query, as in G[j] = grad(L, theta[j])\nG[i] = 2 * grad(L, A[i])\n"
     "           ^\n"},
    {"input A[i]\nL = sum(i: A[i])\nG[i] = grad(L, A[i]) + 1",
     "g.tin:3:22: error: grad(...) must be the whole right-hand side of a "
     "query, as in G[j] = grad(L, theta[j])\nG[i] = grad(L, A[i]) + 1\n"
     "                     ^\n"},
    {"input A[i]\nL = sum(i: A[i])\nG[i] = grad(L A[i])",
     "g.tin:3:15: error: expected ',', found 'A'\nG[i] = grad(L A[i])\n"
     "              ^\n"},
    {"input A[i]\nL = sum(i: A[i])\nL[i] = grad(L, A[i])",
     "g.tin:3:1: error: 'L' is already defined (a query at 2:1)\n"
     "L[i] = grad(L, A[i])\n^\n"},
    {"input A[i, j]\n"
     "def lse(x, y) = log(exp(x) + exp(y)) [associative, commutative, "
     "identity = -inf]\n"
     "L = sum(i: lse(j: A[i, j]))\nG[i, j] = grad(L, A[i, j])",
     "g.tin:4:11: error: cannot differentiate through the aggregate 'lse' "
     "at 3:12: grad has rules for sum, prod, max, min, any and all, and for "
     "user aggregates whose body is one of +, *, max, min, &&, || of their "
     "two parameters\nG[i, j] = grad(L, A[i, j])\n          ^\n"},
    {"input A[i, j]\nL = sum(i: A[i, i])\nG[i, j] = grad(L, A[i, j])",
     "g.tin:3:11: error: cannot differentiate through 'A[i, i]' at 2:12: "
     "grad does not support an access that repeats an index (a diagonal); "
     "read it into a query of its own, Diag[i] = A[i, i], and take "
     "grad(L, Diag[i])\n"
     "G[i, j] = grad(L, A[i, j])\n          ^\n"},
    /* the hint keeps the other indices, and names the loss */
    {"input A[i, j, k]\nLoss = sum(i, k: A[i, k, i])\n"
     "G[i, j, k] = grad(Loss, A[i, j, k])",
     "g.tin:3:14: error: cannot differentiate through 'A[i, k, i]' at 2:18: "
     "grad does not support an access that repeats an index (a diagonal); "
     "read it into a query of its own, Diag[i, k] = A[i, k, i], and take "
     "grad(Loss, Diag[i, k])\n"
     "G[i, j, k] = grad(Loss, A[i, j, k])\n             ^\n"},
    /* a failed grad does not cascade into its uses */
    {"input A[i]\nG[i] = grad(Q, A[i])\nH[i] = G[i] + 1",
     "g.tin:2:13: error: unknown query 'Q'\nG[i] = grad(Q, A[i])\n"
     "            ^\n"},
};
enum { NERR = sizeof err_cases / sizeof err_cases[0] };

START_TEST(error_case) {
  const ErrCase *c = &err_cases[_i];
  galley_program *p = NULL;
  char *diags = NULL;
  galley_error err;
  galley_status st = galley_program_parse("g.tin", c->src, strlen(c->src), &p,
                                          &diags, &err);
  ck_assert_int_eq(st, GALLEY_EPROGRAM);
  ck_assert_ptr_null(p);
  ck_assert_str_eq(diags, c->diags);
  free(diags);
}
END_TEST

/* A def named grad is the user's function, as before grad existed. */
START_TEST(user_def_named_grad) {
  galley_tensor *t;
  Dense d = {1, {2, 1, 1}, (double[]){1, 2}, 0};
  t = tensor_of(&d, NULL);
  Bind b[] = {{"x", t}};
  galley_program *p = run_prog(
      "input x[i]\ndef grad(a, b) = a * b\nG[i] = grad(x[i], 3)", b, 1,
      GALLEY_BACKEND_REFERENCE);
  double want[] = {3, 6};
  expect_values(p, "G", want, 2, 0);
  galley_program_free(p);
  galley_tensor_free(t);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Workloads against finite differences of the reference evaluator     */
/* ------------------------------------------------------------------ */

/* The workloads above again, now checked against the definition of the
 * derivative rather than a textbook formula: every entry of the
 * parameter's gradient (the reference evaluator) against central finite
 * differences of the loss (the reference evaluator, Richardson-
 * extrapolated as in s_fd), relative error <= 1e-6 of the larger of the
 * entry and the gradient's scale, at points where L is smooth (relu's
 * kink is the only non-smooth point here; the test asserts that nearly
 * every entry is checked). */
typedef struct FdInput {
  const char *name;
  Dense d;
} FdInput;

typedef struct FdWork {
  const char *why;
  const char *src;   /* computes L and the gradient `grad` */
  const char *param; /* the input differentiated */
  const char *grad;
} FdWork;

static double fd_loss(const FdWork *w, FdInput *in, int nin) {
  galley_tensor *t[6];
  Bind b[6];
  for (int k = 0; k < nin; k++) {
    t[k] = tensor_of(&in[k].d, NULL);
    b[k] = (Bind){in[k].name, t[k]};
  }
  galley_program *p = run_prog(w->src, b, nin, GALLEY_BACKEND_REFERENCE);
  double loss = scalar_of(p, "L");
  galley_program_free(p);
  for (int k = 0; k < nin; k++)
    galley_tensor_free(t[k]);
  return loss;
}

static double fd_at(const FdWork *w, FdInput *in, int nin, double *x,
                    double h) {
  double keep = *x;
  *x = keep + h;
  double loss = fd_loss(w, in, nin);
  *x = keep;
  return loss;
}

static void fd_check_workload(const FdWork *w, FdInput *in, int nin) {
  galley_tensor *t[6];
  Bind b[6];
  int k = -1;
  for (int m = 0; m < nin; m++) {
    t[m] = tensor_of(&in[m].d, NULL);
    b[m] = (Bind){in[m].name, t[m]};
    k = strcmp(in[m].name, w->param) == 0 ? m : k;
  }
  ck_assert_int_ge(k, 0);
  galley_program *p = run_prog(w->src, b, nin, GALLEY_BACKEND_REFERENCE);
  double loss = scalar_of(p, "L");
  int64_t n;
  double *g = values_of(output(p, w->grad), &n);
  galley_program_free(p);
  for (int m = 0; m < nin; m++)
    galley_tensor_free(t[m]);
  ck_assert_int_eq(n, dense_size(&in[k].d));
  double scale = 1e-8, noise = 1e-10 * fmax(1, fabs(loss));
  for (int64_t e = 0; e < n; e++)
    scale = fmax(scale, fabs(g[e]));
  int checked = 0;
  for (int64_t e = 0; e < n; e++) {
    double *x = &in[k].d.v[e], h = 1e-3 * fmax(1, fabs(*x)), f[3][2];
    for (int s = 0; s < 3; s++)
      for (int sgn = 0; sgn < 2; sgn++)
        f[s][sgn] = fd_at(w, in, nin, x, (sgn ? -h : h) / (1 << s));
    double d1 = (f[0][0] - f[0][1]) / (2 * h), d2 = (f[1][0] - f[1][1]) / h,
           d4 = (f[2][0] - f[2][1]) / (h / 2);
    double r1 = (4 * d2 - d1) / 3, r2 = (4 * d4 - d2) / 3;
    double j1 = (f[0][0] - 2 * loss + f[0][1]) / h,
           j4 = (f[2][0] - 2 * loss + f[2][1]) / (h / 4);
    if (!(fabs(r1 - r2) <= 1e-7 * scale + noise &&
          fabs(j4) <= 0.5 * fabs(j1) + 1e-7 * scale + noise))
      continue; /* a kink within h */
    double tol = 1e-6 * fmax(fabs(r2), scale) + noise;
    ck_assert_msg(fabs(g[e] - r2) <= tol,
                  "%s: %s[%lld] = %.17g, finite differences %.17g", w->why,
                  w->grad, (long long)e, g[e], r2);
    checked++;
  }
  ck_assert_msg(checked >= n - n / 10, "%s: only %d of %lld entries smooth",
                w->why, checked, (long long)n);
  free(g);
}

static Dense labels_one_hot(test_rng *r, int64_t m, int64_t nc) {
  Dense Y = dense_new(2, m, nc, 1);
  for (int64_t i = 0; i < m; i++)
    Y.v[i * nc + test_rng_below(r, nc)] = 1;
  return Y;
}

START_TEST(least_squares_fd) {
  test_rng r = test_rng_seed(21);
  FdInput in[] = {{"A", dense_random(&r, 2, 6, 4, 0.5, -2, 2)},
                  {"x", dense_random(&r, 1, 4, 1, 1, -1, 1)},
                  {"b", dense_random(&r, 1, 6, 1, 0.6, -1, 1)}};
  const char *src = "input A[i, j], x[j], b[i]\n"
                    "r[i] = sum(j: A[i, j] * x[j]) - b[i]\n"
                    "L = sum(i: r[i]^2)\n"
                    "Gx[j] = grad(L, x[j])\nGA[i, j] = grad(L, A[i, j])\n";
  FdWork wx = {"least squares in x", src, "x", "Gx"};
  FdWork wa = {"least squares in A", src, "A", "GA"};
  fd_check_workload(&wx, in, 3);
  fd_check_workload(&wa, in, 3);
  for (int k = 0; k < 3; k++)
    free(in[k].d.v);
}
END_TEST

START_TEST(logistic_regression_fd) {
  test_rng r = test_rng_seed(22);
  FdInput in[] = {{"X", dense_random(&r, 2, 8, 5, 0.4, -1, 2)},
                  {"theta", dense_random(&r, 1, 5, 1, 1, -1, 1)},
                  {"y", dense_new(1, 8, 1, 1)}};
  for (int i = 0; i < 8; i++)
    in[2].d.v[i] = (double)test_rng_below(&r, 2);
  FdWork w = {"logistic regression",
              "input X[i, j], theta[j], y[i]\n"
              "z[i] = X[i, j] * theta[j]\n"
              "L = sum(i: log(1 + exp(z[i])) - y[i] * z[i])\n"
              "G[j] = grad(L, theta[j])\n",
              "theta", "G"};
  fd_check_workload(&w, in, 3);
  for (int k = 0; k < 3; k++)
    free(in[k].d.v);
}
END_TEST

START_TEST(softmax_cross_entropy_fd) {
  test_rng r = test_rng_seed(23);
  FdInput in[] = {{"X", dense_random(&r, 2, 7, 4, 0.5, -1, 1)},
                  {"W", dense_random(&r, 2, 4, 3, 1, -1, 1)},
                  {"Y", labels_one_hot(&r, 7, 3)}};
  FdWork w = {"softmax cross-entropy",
              "input X[i, f], W[f, c], Y[i, c]\n"
              "Z[i, c] = X[i, f] * W[f, c]\n"
              "L = sum(i: log(sum(c: exp(Z[i, c]))) - sum(c: Y[i, c] * Z[i, c]))\n"
              "G[f, c] = grad(L, W[f, c])\n",
              "W", "G"};
  fd_check_workload(&w, in, 3);
  for (int k = 0; k < 3; k++)
    free(in[k].d.v);
}
END_TEST

START_TEST(factorization_observed_fd) {
  test_rng r = test_rng_seed(24);
  FdInput in[] = {{"R", dense_random(&r, 2, 6, 5, 0.35, 1, 5)},
                  {"U", dense_random(&r, 2, 6, 2, 1, -1, 1)},
                  {"V", dense_random(&r, 2, 5, 2, 1, -1, 1)}};
  FdWork wu = {"factorization in U", MF_SRC, "U", "GU"};
  FdWork wv = {"factorization in V", MF_SRC, "V", "GV"};
  fd_check_workload(&wu, in, 3);
  fd_check_workload(&wv, in, 3);
  for (int k = 0; k < 3; k++)
    free(in[k].d.v);
}
END_TEST

/* The GCN layer on karate (34 nodes, the real graph). */
START_TEST(gcn_layer_fd) {
  char path[4096];
  snprintf(path, sizeof path, "%s/matrices/karate.mtx", test_data_dir());
  galley_tensor *tA = NULL;
  galley_error err;
  ck_assert_msg(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &tA, &err) ==
                    GALLEY_OK, "%s", err.msg);
  int64_t n = galley_tensor_dim(tA, 0), cnt;
  test_rng r = test_rng_seed(25);
  FdInput in[] = {{"A", dense_new(2, n, n, 1)},
                  {"X", dense_random(&r, 2, n, 3, 0.4, 0, 1)},
                  {"W", dense_random(&r, 2, 3, 2, 1, -1, 1)},
                  {"Y", labels_one_hot(&r, n, 2)}};
  free(in[0].d.v);
  in[0].d.v = values_of(tA, &cnt);
  galley_tensor_free(tA);
  FdWork w = {"GCN layer on karate",
              "input A[i, j], X[j, f], W[f, c], Y[i, c]\n"
              "Z[i, c] = A[i, j] * X[j, f] * W[f, c]\n"
              "H[i, c] = relu(Z[i, c])\n"
              "L = sum(i: log(sum(c: exp(H[i, c]))) - sum(c: Y[i, c] * H[i, c]))\n"
              "G[f, c] = grad(L, W[f, c])\n",
              "W", "G"};
  fd_check_workload(&w, in, 4);
  for (int k = 0; k < 4; k++)
    free(in[k].d.v);
}
END_TEST

/* TransE on the triples of Kinship among its first 8 entities and 6
 * relations (a corner of the real knowledge graph, small enough for the
 * reference evaluator's dense loops), dimension 3. */
static int add_corner(void *ud, const int64_t *c, double v) {
  Dense *T = ud;
  if (v != 0 && c[0] < T->dims[0] && c[1] < T->dims[1] && c[2] < T->dims[2])
    T->v[(c[0] * T->dims[1] + c[1]) * T->dims[2] + c[2]] = 1;
  return 0;
}

START_TEST(transe_kinship_fd) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tensors/kg/kinship/all.tns",
           test_data_dir());
  galley_tensor *tT = NULL;
  galley_error err;
  ck_assert_msg(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &tT, &err) ==
                    GALLEY_OK, "%s", err.msg);
  int64_t ne = 8, nr = 6, d = 3;
  Dense T = dense_new(3, ne, nr, ne);
  galley_tensor_foreach(tT, add_corner, &T);
  galley_tensor_free(tT);
  int64_t ntriples = 0;
  for (int64_t e = 0; e < dense_size(&T); e++)
    ntriples += T.v[e] != 0;
  ck_assert_int_ge(ntriples, 10);
  test_rng r = test_rng_seed(26);
  FdInput in[] = {{"T", T},
                  {"E", dense_random(&r, 2, ne, d, 1, -0.5, 0.5)},
                  {"R", dense_random(&r, 2, nr, d, 1, -0.5, 0.5)}};
  const char *src =
      "input T[h, r, t], E[e, d], R[r, d]\n"
      "D[h, r, t] = T[h, r, t] * (E[h, d] + R[r, d] - E[t, d])^2\n"
      "L = sum(h, r, t: T[h, r, t] * sqrt(D[h, r, t] + 1e-6))\n"
      "GE[e, d] = grad(L, E[e, d])\nGR[r, d] = grad(L, R[r, d])\n";
  FdWork we = {"TransE in E", src, "E", "GE"};
  FdWork wr = {"TransE in R", src, "R", "GR"};
  fd_check_workload(&we, in, 3);
  fd_check_workload(&wr, in, 3);
  for (int k = 0; k < 3; k++)
    free(in[k].d.v);
}
END_TEST

/* A pointwise product whose factor with several accesses carries the
 * paths (X = A * (A + B C - C)): those paths multiply dL/dX's pointwise
 * expression and the other factor into their own products (nothing
 * materialized for them), while the single access A in the first factor
 * keeps the plain path through dL/dX; every gradient against finite
 * differences of the reference evaluator, and the compiled program (the
 * optimizer's orders over those products) against the reference. */
START_TEST(pointwise_product_fd) {
  test_rng r = test_rng_seed(27);
  FdInput in[] = {{"A", dense_random(&r, 2, 5, 4, 0.5, -1.5, 1.5)},
                  {"B", dense_random(&r, 1, 4, 1, 1, -1, 1)},
                  {"C", dense_random(&r, 1, 5, 1, 1, -1, 1)}};
  const char *src =
      "input A[i, j], B[j], C[i]\n"
      "X[i, j] = A[i, j] * (A[i, j] + B[j] * C[i] - C[i])\n"
      "S[i] = sum(j: X[i, j]^2)\n"
      "L = sum(i: sqrt(S[i] + 1)) + sum(i, j: sin(X[i, j]))\n"
      "GA[i, j] = grad(L, A[i, j])\nGB[j] = grad(L, B[j])\n"
      "GC[i] = grad(L, C[i])\n";
  char *plan = plan_text(src);
  ck_assert_int_eq(count_of(plan, ":masked"), 0);
  ck_assert_int_eq(count_of(plan, "Alias(dL/dX["), 1); /* GA's first */
  ck_assert_int_eq(count_of(plan, "Query(GB[j], Agg(+, i, Map(*, Map(+, "
                                  "Map(*, Alias(dL/dS[i]), 2, "
                                  "Alias(X[i,j])), Map(cos, "
                                  "Alias(X[i,j]))), A[i,j], C[i])))"),
                   1);
  free(plan);
  FdWork w[] = {{"pointwise product in A", src, "A", "GA"},
                {"pointwise product in B", src, "B", "GB"},
                {"pointwise product in C", src, "C", "GC"}};
  for (int k = 0; k < 3; k++)
    fd_check_workload(&w[k], in, 3);
  galley_tensor *t[3];
  Bind b[3];
  for (int k = 0; k < 3; k++) {
    t[k] = tensor_of(&in[k].d, NULL);
    b[k] = (Bind){in[k].name, t[k]};
  }
  galley_program *ref = run_prog(src, b, 3, GALLEY_BACKEND_REFERENCE);
  galley_program *cc = run_prog(src, b, 3, GALLEY_BACKEND_TCC);
  const char *outs[] = {"L", "GA", "GB", "GC"};
  for (int k = 0; k < 4; k++) {
    int64_t n;
    double *want = values_of(output(ref, outs[k]), &n);
    expect_values(cc, outs[k], want, n, 1e-12);
    free(want);
  }
  galley_program_free(ref);
  galley_program_free(cc);
  for (int k = 0; k < 3; k++) {
    galley_tensor_free(t[k]);
    free(in[k].d.v);
  }
}
END_TEST

/* TransE as bench_grad writes it: the paths through the three accesses
 * E[h], R[r], E[t] of X's difference each sum dL/dX's expression times
 * T, dL/dS * 2 * X * T, on T's pattern; dL/dX itself is not read (nor
 * materialized: nothing reads it). */
START_TEST(pointwise_paths_multiply_their_masks) {
  char *plan = plan_text(
      "input T[h, r, t], E[e, d], R[r, d]\n"
      "X[h, r, t, d] = T[h, r, t] * (E[h, d] + R[r, d] - E[t, d])\n"
      "S[h, r, t] = sum(d: X[h, r, t, d]^2)\n"
      "L = sum(h, r, t: T[h, r, t] * sqrt(S[h, r, t] + 1e-6))\n"
      "GE[e, d] = grad(L, E[e, d])\nGR[r, d] = grad(L, R[r, d])\n");
  ck_assert_int_eq(count_of(plan, "Query(GR[r,d], Agg(+, h, t, Map(*, "
                                  "Alias(dL/dS[h,r,t]), 2, Alias(X[h,r,t,d]), "
                                  "T[h,r,t])))"),
                   1);
  ck_assert_int_eq(count_of(plan, "Agg(+, r, t, Map(*, Alias(dL/dS[e,r,t]), "
                                  "2, Alias(X[e,r,t,d]), T[e,r,t]))"),
                   1);
  ck_assert_int_eq(count_of(plan, "Map(*, Alias(dL/dS[h,r#2,e]), 2, "
                                  "Alias(X[h,r#2,e,d]), T[h,r#2,e], -1)"),
                   1);
  ck_assert_int_eq(count_of(plan, "Alias(dL/dX["), 0);
  ck_assert_int_eq(count_of(plan, ":masked"), 0);
  free(plan);
  /* one access in the factor: the plain path, no masked adjoint */
  plan = plan_text("input A[i, j], x[j]\n"
                   "Q[i, j] = A[i, j] * x[j]\n"
                   "L = sum(i, j: Q[i, j]^2)\nGx[j] = grad(L, x[j])\n");
  ck_assert_int_eq(count_of(plan, ":masked"), 0);
  free(plan);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Random smooth programs against finite differences                   */
/* ------------------------------------------------------------------ */

#define SN 3 /* index names i, j, k */
static const char *const SIDX[SN] = {"i", "j", "k"};

typedef struct STensor {
  char name[8];
  int order;
  int mode[2]; /* index name of each mode (distinct) */
  double fill;
  double density;
  unsigned deps; /* queries: the inputs (bits) they depend on */
} STensor;

typedef struct SGen {
  test_rng *r;
  int64_t size[SN];
  int nin;
  STensor in[3];
  int nq;
  STensor q[3]; /* queries readable as aliases */
  unsigned defs;
  unsigned deps; /* inputs read by the query being generated */
} SGen;

static const char *const SDEFS[4] = {
    "def f1(x, y) = x * y + sin(y)\n",
    "def f2(x) = f1(x, 0.5 * x) - cos(x)\n",
    "def smax(x, y) = max(x, y) [associative, commutative, identity = -inf]\n",
    "def tplus(x, y) = x + y [associative, commutative, identity = 0]\n"};

static int s_chance(SGen *g, double p) {
  return test_rng_double(g->r, 0, 1) < p;
}

static int s_below(SGen *g, int n) { return (int)test_rng_below(g->r, n); }

/* An access of t: each mode a name of its size, no name twice (a
 * repeated index on the gradient's path is refused by grad). */
static Ex s_access(SGen *g, const STensor *t) {
  Ex e = {NULL, 0, 1};
  g->deps |= t >= g->in && t < g->in + 3 ? 1u << (t - g->in) : t->deps;
  if (t->order == 0) {
    e.s = fmt("%s", t->name);
    return e;
  }
  Buf b = {0};
  buf_add(&b, "%s[", t->name);
  for (int m = 0; m < t->order; m++) {
    int cand[SN], nc = 0;
    for (int n = 0; n < SN; n++)
      if (g->size[n] == g->size[t->mode[m]] && !(e.free & (1u << n)))
        cand[nc++] = n;
    int n = nc ? cand[s_below(g, nc)] : t->mode[m];
    if (e.free & (1u << n)) /* no other name of that size is free */
      n = t->mode[m];
    e.free |= 1u << n;
    buf_add(&b, "%s%s", m ? ", " : "", SIDX[n]);
  }
  buf_add(&b, "]");
  e.s = b.s;
  return e;
}

static Ex s_expr(SGen *g, int depth);

static Ex s_leaf(SGen *g) {
  double u = test_rng_double(g->r, 0, 1);
  if (g->nq > 0 && u < 0.35)
    return s_access(g, &g->q[s_below(g, g->nq)]);
  if (u < 0.9)
    return s_access(g, &g->in[s_below(g, g->nin)]);
  static const char *const c[] = {"0.5", "2", "-1.5", "3"};
  Ex e = {fmt("%s", c[s_below(g, 4)]), 0, 1};
  return e;
}

static Ex s_unary(SGen *g, int depth) {
  static const char *const pre[] = {
      "sin(",  "cos(",        "tanh(",          "sigmoid(", "exp(tanh(",
      "log(1.5 + ", "sqrt(1 + ", "(", "(", "(-",    "abs(",     "relu("};
  static const char *const post[] = {")",  ")",  ")",     ")",    "))",
                                     "^2)", "^2)", ")^2", ")^3", ")",
                                     ")",  ")"};
  int k = s_below(g, 12);
  Ex x = s_expr(g, depth - 1);
  if (k == 5 || k == 6) { /* log(1.5 + x^2), sqrt(1 + x^2) */
    Ex w = ex_join("(", "", ")", 1, &x);
    x = w;
  }
  return ex_join(pre[k], "", post[k], 1, &x);
}

static Ex s_binary(SGen *g, int depth) {
  static const char *const ops[] = {" + ", " - ", " * ", " * ", " / "};
  int k = s_below(g, 5);
  Ex kids[2] = {s_expr(g, depth - 1), s_expr(g, depth - 1)};
  if (k == 4) { /* denominators away from 0 */
    Ex d = ex_join("(2 + (", "", ")^2)", 1, &kids[1]);
    kids[1] = d;
  }
  return ex_join("(", ops[k], ")", 2, kids);
}

static Ex s_call(SGen *g, int depth) {
  int k = s_below(g, 6);
  if (k <= 1) {
    int n = s_chance(g, 0.3) ? 3 : 2;
    Ex kids[3];
    for (int a = 0; a < n; a++)
      kids[a] = s_expr(g, depth - 1);
    return ex_join(k ? "min(" : "max(", ", ", ")", n, kids);
  }
  if (k == 2) {
    g->defs |= 1;
    Ex kids[2] = {s_expr(g, depth - 1), s_expr(g, depth - 1)};
    return ex_join("f1(", ", ", ")", 2, kids);
  }
  if (k == 3) {
    g->defs |= 3;
    Ex x = s_expr(g, depth - 1);
    return ex_join("f2(", "", ")", 1, &x);
  }
  if (k == 4) { /* both arguments of pow, base positive */
    Ex kids[2] = {s_expr(g, depth - 1), s_expr(g, depth - 1)};
    Ex base = ex_join("(1.5 + sigmoid(", "", "))", 1, &kids[0]);
    Ex pair[2] = {base, kids[1]};
    return ex_join("pow(", ", ", ")", 2, pair);
  }
  Ex kids[4] = {s_expr(g, depth - 1), s_expr(g, depth - 1),
                s_expr(g, depth - 1), s_expr(g, depth - 1)};
  Ex cond = ex_join("(", " > ", ")", 2, kids);
  Ex three[3] = {cond, kids[2], kids[3]};
  return ex_join("ifelse(", ", ", ")", 3, three);
}

static double s_volume(const SGen *g, unsigned names) {
  double v = 1;
  for (int n = 0; n < SN; n++)
    if (names & (1u << n))
      v *= (double)g->size[n];
  return v;
}

static Ex s_agg(SGen *g, int depth) {
  static const char *const ops[] = {"sum", "sum", "sum", "sum", "prod",
                                    "max", "min", "smax", "tplus", "any"};
  Ex x = s_expr(g, depth - 1);
  if (!x.free)
    return x;
  unsigned pick = 0;
  while (!pick)
    for (int n = 0; n < SN; n++)
      if ((x.free & (1u << n)) && s_chance(g, 0.6))
        pick |= 1u << n;
  int k = s_below(g, 10);
  if (k == 4 && s_volume(g, pick) > 8)
    k = 0;
  if (k == 7)
    g->defs |= 4;
  if (k == 8)
    g->defs |= 8;
  Buf b = {0};
  buf_add(&b, "%s(", ops[k]);
  int first = 1;
  for (int n = 0; n < SN; n++)
    if (pick & (1u << n)) {
      buf_add(&b, "%s%s", first ? "" : ", ", SIDX[n]);
      first = 0;
    }
  buf_add(&b, ": %s%s)", x.s, k == 9 ? " > 0" : "");
  free(x.s);
  Ex e = {b.s, x.free & ~pick, 1};
  return e;
}

static Ex s_expr(SGen *g, int depth) {
  if (depth <= 0 || s_chance(g, 0.2))
    return s_leaf(g);
  double u = test_rng_double(g->r, 0, 1);
  if (u < 0.35)
    return s_binary(g, depth);
  if (u < 0.55)
    return s_unary(g, depth);
  if (u < 0.7)
    return s_call(g, depth);
  return s_agg(g, depth);
}

static void s_inputs(SGen *g) {
  static const char *const names[] = {"A", "B", "x", "W"};
  static const double fills[] = {0, 0, 0, 0.5, -1, 1.5};
  g->nin = 1 + s_below(g, 3);
  for (int k = 0; k < g->nin; k++) {
    STensor *t = &g->in[k];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", names[k]);
    t->order = s_below(g, 3);
    int first = s_below(g, SN);
    for (int m = 0; m < t->order; m++)
      t->mode[m] = (first + m) % SN;
    t->fill = fills[s_below(g, 6)];
    t->density = s_chance(g, 0.2) ? 1 : test_rng_double(g->r, 0.3, 0.9);
  }
}

/* A query `name[lhs] = expr`; registered for later aliases unless it is
 * the loss. */
static unsigned s_query(SGen *g, Buf *body, const char *name, int loss) {
  g->deps = 0;
  Ex e = s_expr(g, loss ? 2 + s_below(g, 3) : 1 + s_below(g, 3));
  int lhs[SN], nlhs = 0;
  for (int n = 0; n < SN && !loss; n++)
    if ((e.free & (1u << n)) && nlhs < 2 && s_chance(g, 0.6))
      lhs[nlhs++] = n;
  buf_add(body, "%s", name);
  for (int k = 0; k < nlhs; k++)
    buf_add(body, "%s%s", k ? ", " : "[", SIDX[lhs[k]]);
  buf_add(body, "%s = %s\n", nlhs ? "]" : "", e.s);
  free(e.s);
  if (loss)
    return g->deps;
  STensor *q = &g->q[g->nq++];
  memset(q, 0, sizeof *q);
  snprintf(q->name, sizeof q->name, "%s", name);
  q->order = nlhs;
  for (int k = 0; k < nlhs; k++)
    q->mode[k] = lhs[k];
  q->deps = g->deps;
  return g->deps;
}

/* The forward program (defs, inputs, queries, the loss L); *deps: the
 * inputs L depends on. */
static char *s_program(SGen *g, unsigned *deps) {
  for (int n = 0; n < SN; n++)
    g->size[n] = 1 + s_below(g, 4);
  s_inputs(g);
  g->nq = 0;
  g->defs = 0;
  Buf body = {0}, text = {0};
  int nq = s_below(g, 3);
  for (int k = 0; k < nq; k++) {
    char name[8];
    snprintf(name, sizeof name, "Q%d", k);
    s_query(g, &body, name, 0);
  }
  *deps = s_query(g, &body, "L", 1);
  for (int d = 0; d < 4; d++)
    if (g->defs & (1u << d))
      buf_add(&text, "%s", SDEFS[d]);
  for (int k = 0; k < g->nin; k++) {
    const STensor *t = &g->in[k];
    buf_add(&text, "input %s", t->name);
    for (int m = 0; m < t->order; m++)
      buf_add(&text, "%s%s", m ? ", " : "[", SIDX[t->mode[m]]);
    buf_add(&text, "%s fill %g\n", t->order ? "]" : "", t->fill);
  }
  buf_add(&text, "%s", body.s);
  free(body.s);
  return text.s;
}

/* Dense values of input k: continuous (no ties but at fills), or fill. */
static Dense s_values(SGen *g, int k) {
  const STensor *t = &g->in[k];
  Dense d = dense_new(t->order, t->order > 0 ? g->size[t->mode[0]] : 1,
                      t->order > 1 ? g->size[t->mode[1]] : 1, 1);
  d.fill = t->fill;
  for (int64_t e = 0; e < dense_size(&d); e++)
    d.v[e] = s_chance(g, t->density) ? test_rng_double(g->r, -1.2, 1.2)
                                     : t->fill;
  return d;
}

/* Run src on the reference evaluator; L, and G (the dense values of the
 * result `gname`, malloc()ed) when gname is not NULL.  0 on a run error
 * (the program is then printed by the caller). */
typedef struct SRun {
  double loss;
  double *grad;
  int64_t n;
} SRun;

static SRun s_run(const char *src, Dense *vals, int nin, const SGen *g,
                  const galley_format *fmts, galley_backend backend,
                  const char *gname) {
  galley_tensor *t[3];
  Bind b[3] = {{0}};
  for (int k = 0; k < nin; k++) {
    t[k] = tensor_of(&vals[k], fmts ? &fmts[k] : NULL);
    b[k] = (Bind){g->in[k].name, t[k]};
  }
  galley_program *p = run_prog(src, b, nin, backend);
  if (getenv("GALLEY_GRAD_EXPLAIN") && gname)
    galley_program_explain(p, stdout, GALLEY_EXPLAIN_ANALYZE, NULL);
  SRun r = {scalar_of(p, "L"), NULL, 0};
  if (gname)
    r.grad = values_of(output(p, gname), &r.n);
  galley_program_free(p);
  for (int k = 0; k < nin; k++)
    galley_tensor_free(t[k]);
  return r;
}

typedef struct SStats {
  long checked, kinks, skipped_cases;
} SStats;

/* L of the forward program with entry e of input k moved by h. */
static double s_loss_at(const char *fwd, Dense *vals, const SGen *g, int k,
                        int64_t e, double h) {
  double keep = vals[k].v[e];
  vals[k].v[e] = keep + h;
  SRun r = s_run(fwd, vals, g->nin, g, NULL, GALLEY_BACKEND_REFERENCE, NULL);
  vals[k].v[e] = keep;
  return r.loss;
}

/* The finite-difference derivative of L in entry e of input k, and
 * whether L is smooth around that point.  With h = 1e-3 (relative),
 * central differences D(h), D(h/2), D(h/4) give two Richardson estimates
 * R1 = (4 D(h/2) - D(h)) / 3 and R2 = (4 D(h/4) - D(h/2)) / 3, equal to
 * O(h^4) when L is smooth on [x - h, x + h].  A kink or a tie at distance
 * d from x shows either in R1 != R2 (d >= h/7) or in the second
 * difference J(s) = (L(x+s) - 2 L(x) + L(x-s)) / s, which shrinks like s
 * for a smooth L and stays at the jump of the slope at a kink
 * (J(h/4) > J(h)/2 when d < h/7). */
typedef struct FdPoint {
  double deriv;   /* R2 */
  double r1;      /* R1 */
  double j1, j4;  /* J(h), J(h/4) */
} FdPoint;

static FdPoint s_fd(const char *fwd, Dense *vals, const SGen *g, int k,
                    int64_t e, double loss) {
  double h = 1e-3 * fmax(1, fabs(vals[k].v[e])), f[3][2];
  for (int t = 0; t < 3; t++)
    for (int sgn = 0; sgn < 2; sgn++)
      f[t][sgn] = s_loss_at(fwd, vals, g, k, e, (sgn ? -h : h) / (1 << t));
  double d1 = (f[0][0] - f[0][1]) / (2 * h), d2 = (f[1][0] - f[1][1]) / h,
         d4 = (f[2][0] - f[2][1]) / (h / 2);
  FdPoint p = {(4 * d4 - d2) / 3, (4 * d2 - d1) / 3,
               (f[0][0] - 2 * loss + f[0][1]) / h,
               (f[2][0] - 2 * loss + f[2][1]) / (h / 4)};
  return p;
}

/* Entry by entry: G[e] against the finite differences where L is smooth
 * (the others are counted as kinks), relative error <= 1e-6 of the
 * larger of the entry and the gradient's scale, plus the rounding of L
 * (1e-16 |L| over h, generously). */
static void s_check_fd(const char *fwd, const char *prog, Dense *vals,
                       const SGen *g, int k, const double *grad, double loss,
                       uint64_t seed, SStats *st) {
  int64_t n = dense_size(&vals[k]);
  double scale = 1e-8, lmag = fmax(1, fabs(loss));
  for (int64_t e = 0; e < n; e++)
    scale = fmax(scale, fabs(grad[e]));
  for (int64_t e = 0; e < n; e++) {
    FdPoint p = s_fd(fwd, vals, g, k, e, loss);
    double noise = 1e-10 * lmag;
    int smooth = isfinite(p.deriv) &&
                 fabs(p.r1 - p.deriv) <= 1e-7 * scale + noise &&
                 fabs(p.j4) <= 0.5 * fabs(p.j1) + 1e-7 * scale + noise;
    if (!smooth) {
      st->kinks++;
      continue;
    }
    double tol = 1e-6 * fmax(fabs(p.deriv), scale) + noise;
    ck_assert_msg(fabs(grad[e] - p.deriv) <= tol,
                  "case %llu: gradient of L with respect to %s, entry %lld: "
                  "grad %.17g, finite differences %.17g (tolerance %.3g)\n%s",
                  (unsigned long long)seed, g->in[k].name, (long long)e,
                  grad[e], p.deriv, tol, prog);
    st->checked++;
  }
}

/* One random case: the gradients with respect to one or two inputs. */
static void s_case(uint64_t seed, SStats *st, int verbose) {
  test_rng r = test_rng_seed(seed);
  SGen g = {.r = &r};
  unsigned deps;
  char *fwd = s_program(&g, &deps);
  int nth = g.nin > 1 && s_chance(&g, 0.4) ? 2 : 1;
  int th[2], swapped[2];
  th[0] = s_below(&g, g.nin); /* mostly an input that L depends on */
  for (int t = 0; t < 4 && !(deps & (1u << th[0])); t++)
    th[0] = s_below(&g, g.nin);
  th[1] = (th[0] + 1) % g.nin;
  Buf prog = {0};
  buf_add(&prog, "%s", fwd);
  for (int k = 0; k < nth; k++) {
    const STensor *t = &g.in[th[k]];
    int swap = swapped[k] = t->order == 2 && s_chance(&g, 0.3);
    buf_add(&prog, "G%d", k);
    for (int m = 0; m < t->order; m++)
      buf_add(&prog, "%s%s", m ? ", " : "[",
              SIDX[t->mode[swap ? 1 - m : m]]);
    buf_add(&prog, "%s = grad(L, %s", t->order ? "]" : "", t->name);
    for (int m = 0; m < t->order; m++)
      buf_add(&prog, "%s%s", m ? ", " : "[", SIDX[t->mode[m]]);
    buf_add(&prog, "%s)\n", t->order ? "]" : "");
  }
  if (verbose)
    printf("--- case %llu\n%s", (unsigned long long)seed, prog.s);
  /* max, min, abs and relu at a tie (equal fills in one max) or a kink
   * follow a convention (man/tin.5) that finite differences cannot see:
   * such programs get inputs with every entry stored, all different */
  static const char *const selecting[] = {"max(", "min(", "abs(", "relu("};
  for (int k = 0; k < 4; k++)
    if (strstr(fwd, selecting[k]))
      for (int t = 0; t < g.nin; t++)
        g.in[t].density = 1;
  Dense vals[3];
  galley_format fmts[3];
  Gen fg = {.r = &r};
  for (int k = 0; k < g.nin; k++) {
    vals[k] = s_values(&g, k);
    fmts[k] = gen_format(&fg, g.in[k].order);
    char ftext[128];
    galley_format_print(&fmts[k], ftext, sizeof ftext);
    for (int64_t e = 0; verbose && e < dense_size(&vals[k]); e++)
      printf("%s%.17g%s", e ? " " : "# values: ", vals[k].v[e],
             e + 1 == dense_size(&vals[k]) ? "" : "");
    if (verbose)
      printf(" (format %s)\n", ftext);
  }
  for (int k = 0; k < nth; k++) {
    char gname[4];
    snprintf(gname, sizeof gname, "G%d", k);
    SRun ref = s_run(prog.s, vals, g.nin, &g, fmts, GALLEY_BACKEND_REFERENCE,
                     gname);
    SRun jit = s_run(prog.s, vals, g.nin, &g, fmts, GALLEY_BACKEND_TCC, gname);
    ck_assert_int_eq(ref.n, jit.n);
    for (int64_t e = 0; e < ref.n; e++)
      ck_assert_msg(same_value(jit.grad[e], ref.grad[e]),
                    "case %llu: tcc %s[%lld] = %.17g, reference %.17g\n%s",
                    (unsigned long long)seed, gname, (long long)e,
                    jit.grad[e], ref.grad[e], prog.s);
    int finite = isfinite(ref.loss) && fabs(ref.loss) < 1e8;
    for (int64_t e = 0; e < ref.n; e++)
      finite &= isfinite(ref.grad[e]);
    if (!finite) {
      st->skipped_cases++;
    } else {
      /* G[k, i] = grad(L, A[i, k]) is laid out transposed: back to A's
       * row-major order */
      double *gt = ref.grad;
      if (swapped[k]) {
        int64_t d0 = vals[th[k]].dims[0], d1 = vals[th[k]].dims[1];
        gt = malloc(sizeof(double) * (size_t)(d0 * d1 + 1));
        for (int64_t a = 0; a < d0; a++)
          for (int64_t c = 0; c < d1; c++)
            gt[a * d1 + c] = ref.grad[c * d0 + a];
      }
      s_check_fd(fwd, prog.s, vals, &g, th[k], gt, ref.loss, seed, st);
      if (gt != ref.grad)
        free(gt);
    }
    free(ref.grad);
    free(jit.grad);
  }
  for (int k = 0; k < g.nin; k++)
    free(vals[k].v);
  free(fwd);
  free(prog.s);
}

START_TEST(random_against_finite_differences) {
  long cases = env_num("GALLEY_GRAD_CASES", 300);
  uint64_t seed = (uint64_t)env_num("GALLEY_GRAD_SEED", 16000);
  long only = env_num("GALLEY_GRAD_ONLY", -1);
  int verbose = (int)env_num("GALLEY_GRAD_VERBOSE", 0) || only >= 0;
  SStats st = {0};
  if (only >= 0)
    s_case((uint64_t)only, &st, verbose);
  else
    for (long c = 0; c < cases; c++)
      s_case(seed + (uint64_t)c, &st, verbose);
  printf("random gradients: %ld entries checked against finite "
         "differences, %ld at kinks or ties skipped, %ld cases not finite\n",
         st.checked, st.kinks, st.skipped_cases);
  fflush(stdout);
  if (only < 0) {
    /* not vacuous: most entries are checked, few are at kinks */
    ck_assert_int_ge(st.checked, 3 * cases);
    ck_assert_int_ge(st.checked, 10 * st.kinks);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("grad");
  TCase *tc = tcase_create("workloads");
  tcase_add_test(tc, least_squares);
  tcase_add_test(tc, logistic_regression);
  tcase_add_test(tc, softmax_cross_entropy);
  tcase_add_test(tc, factorization_observed);
  tcase_add_test(tc, factorization_stays_sparse);
  tcase_add_test(tc, gcn_layer);
  tcase_add_test(tc, transe_kinship);
  tcase_add_test(tc, transe_kinship_staged);
  suite_add_tcase(s, tc);
  tc = tcase_create("workloads_fd");
  tcase_add_test(tc, least_squares_fd);
  tcase_add_test(tc, logistic_regression_fd);
  tcase_add_test(tc, softmax_cross_entropy_fd);
  tcase_add_test(tc, factorization_observed_fd);
  tcase_add_test(tc, gcn_layer_fd);
  tcase_add_test(tc, transe_kinship_fd);
  tcase_add_test(tc, pointwise_product_fd);
  suite_add_tcase(s, tc);
  tc = tcase_create("conventions");
  tcase_add_loop_test(tc, convention_case, 0, 2 * NCONV);
  tcase_add_test(tc, grads_share_intermediates);
  tcase_add_test(tc, plan_of_logistic_regression);
  tcase_add_test(tc, masks_go_into_the_adjoint_once);
  tcase_add_test(tc, pointwise_paths_multiply_their_masks);
  tcase_add_test(tc, user_def_named_grad);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_add_loop_test(tc, error_case, 0, NERR);
  suite_add_tcase(s, tc);
  tc = tcase_create("random");
  tcase_add_test(tc, random_against_finite_differences);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
