/*
 * host.c -- a plain C program using two .tin programs compiled ahead of
 * time (see Makefile): spmv.tin (y = A x, prefix spmv_) and logistic.tin
 * (P = sigmoid(X theta), prefix lr_).  No libgalley: the tensors are
 * built through the layout the headers declare (runtime/galley_rt.h):
 * a CSR matrix (a dense row level over a sorted list of columns, 32-bit
 * indices) and dense vectors, the formats given to galleyc compile with
 * --format.  The sizes are this program's own: compiled code reads them
 * at run time.  Checks both results against plain loops.  The first
 * program is called three times, as an iterative method calls it, so
 * through a handle (spmv_threads_new(1): the caller's thread), which
 * keeps what the plan's strategies reuse between calls and sets the
 * memory budget of its runs.  The second program runs once through
 * lr_run_ex: on two threads (the result is the same for any count) with
 * the full validation of its inputs.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lr.h"
#include "spmv.h"

enum { ROWS = 5, COLS = 4, NNZ = 7 };

/* A 5 x 4 matrix in CSR. */
static int32_t A_pos[ROWS + 1] = {0, 2, 3, 5, 6, 7};
static int32_t A_crd[NNZ] = {0, 2, 1, 0, 3, 3, 1};
static double A_val[NNZ] = {2, 1, 3, -1, 4, 5, -0.5};
static double x_val[COLS] = {1, 2, 3, 4};

static struct galley_tensor csr(void) {
  struct galley_tensor t;
  memset(&t, 0, sizeof t);
  t.order = 2;
  t.dims[0] = ROWS;
  t.dims[1] = COLS;
  t.lvl[0].kind = GALLEY_RT_DENSE; /* rows 0..ROWS-1 */
  t.lvl[0].mode = 0;
  t.lvl[0].dim = ROWS;
  t.lvl[0].npar = 1;
  t.lvl[0].nchild = t.lvl[0].nset = ROWS;
  t.lvl[1].kind = GALLEY_RT_LIST; /* the columns of each row */
  t.lvl[1].mode = 1;
  t.lvl[1].dim = COLS;
  t.lvl[1].npar = ROWS;
  t.lvl[1].nchild = t.lvl[1].nset = NNZ;
  t.lvl[1].idx32 = 1; /* 32-bit indices: pos32 and crd32 */
  t.lvl[1].pos32 = A_pos;
  t.lvl[1].crd32 = A_crd;
  t.val = A_val;
  t.nval = NNZ;
  return t;
}

static struct galley_tensor dense_vector(double *v, int n) {
  struct galley_tensor t;
  memset(&t, 0, sizeof t);
  t.order = 1;
  t.dims[0] = n;
  t.lvl[0].kind = GALLEY_RT_DENSE;
  t.lvl[0].dim = n;
  t.lvl[0].npar = 1;
  t.lvl[0].nchild = t.lvl[0].nset = n;
  t.val = v;
  t.nval = n;
  return t;
}

/* The value of a result vector at i, whatever format the plan chose. */
static double at(const struct galley_tensor *t, int64_t i) {
  galley_pos p = galley_rt_locate(&t->lvl[0], 0, i);
  return p < 0 ? t->fill : t->val[p];
}

int main(void) {
  struct galley_tensor A = csr(), x = dense_vector(x_val, COLS);
  const struct galley_tensor *in[2];
  struct galley_tensor *y[SPMV_NUM_OUTPUTS], *lr[LR_NUM_OUTPUTS];
  char msg[256];
  in[0] = &A;
  in[1] = &x;
  struct spmv_threads *h = spmv_threads_new(1);
  if (!h) {
    fprintf(stderr, "host: spmv: out of memory\n");
    return 1;
  }
  /* a run that would hold more than 16 MiB is refused (SPMV_EBUDGET);
   * prepare checks the inputs once and makes what the handle keeps */
  int rc = spmv_threads_set_memory_budget(h, 16 << 20);
  if (rc == SPMV_OK)
    rc = spmv_prepare(h, in, 0, msg, sizeof msg);
  for (int call = 0; call < 3 && rc == SPMV_OK; call++) {
    if (call > 0)
      spmv_free(y[0]);
    rc = spmv_run_threads(h, in, y, 0, msg, sizeof msg);
  }
  spmv_threads_free(h);
  if (rc != SPMV_OK) {
    fprintf(stderr, "host: spmv: %s (%s)\n", spmv_strerror(rc), msg);
    return 1;
  }
  /* theta = x; on two threads, validating every coordinate of the
   * inputs (the default checks their structure only) */
  rc = lr_run_ex(in, lr, 2, LR_CHECK_FULL, msg, sizeof msg);
  if (rc != LR_OK) {
    fprintf(stderr, "host: lr: %s (%s)\n", lr_strerror(rc), msg);
    spmv_free(y[0]);
    return 1;
  }
  int ok = 1, positives = 0;
  for (int i = 0; i < ROWS; i++) {
    double s = 0;
    for (int t = A_pos[i]; t < A_pos[i + 1]; t++)
      s += A_val[t] * x_val[A_crd[t]];
    double p = 1 / (1 + exp(-s));
    positives += p > 0.5;
    ok &= at(y[0], i) == s && fabs(at(lr[0], i) - p) < 1e-12;
    printf("y[%d] = %g, P[%d] = %.6f\n", i, at(y[0], i), i, at(lr[0], i));
  }
  ok &= lr[1]->val[0] == positives; /* a scalar: order 0, one value */
  spmv_free(y[0]);
  for (int k = 0; k < LR_NUM_OUTPUTS; k++)
    lr_free(lr[k]);
  printf("%s\n", ok ? "spmv and logistic agree with their plain loops"
                    : "MISMATCH with the plain loops");
  return ok ? 0 : 1;
}
