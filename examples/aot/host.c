/*
 * host.c -- a host program for an ahead-of-time compiled .tin program.
 *
 * build.sh runs `galleyc compile spmv.tin -o spmv.c --header spmv.h
 * A=A.mtx x=x.tns` and builds this file with spmv.c using a plain C
 * compiler: no libgalley.  The tensors are built by hand through the
 * struct layout spmv.h declares (runtime/galley_rt.h): A as CSR (a dense
 * row level over a sorted list of columns) and x as a sorted list, the
 * formats the bound files had when the program was compiled (for an input
 * the plan transposes, that transposition: spmv.h lists each input's
 * format and which levels hold 32-bit indices -- idx32 with pos32 and
 * crd32, as here; the driver refuses other formats, widths, sizes or
 * fills).  Prints y in
 * the .tns form of `galleyc run --print` and checks it against a plain CSR
 * loop.
 */
#include <stdio.h>

#include "spmv.h"

enum { N = 4, NNZ = 6 };

/* A (4 x 4) in CSR: the same entries as A.mtx, 0-based. */
static int32_t A_pos[N + 1] = {0, 2, 3, 5, 6};
static int32_t A_crd[NNZ] = {0, 2, 1, 0, 3, 3};
static double A_val[NNZ] = {2, 1, 3, -1, 4, 5};

/* x (4) as a sorted list with every entry stored: as x.tns. */
static int32_t x_pos[2] = {0, N};
static int32_t x_crd[N] = {0, 1, 2, 3};
static double x_val[N] = {1, 2, 3, 4};

static struct galley_tensor csr_matrix(void) {
  struct galley_tensor t = {0};
  t.order = 2;
  t.dims[0] = t.dims[1] = N;
  t.lvl[0].kind = GALLEY_RT_DENSE; /* rows 0..N-1 */
  t.lvl[0].mode = 0;
  t.lvl[0].dim = N;
  t.lvl[0].npar = 1;
  t.lvl[0].nchild = t.lvl[0].nset = N;
  t.lvl[1].kind = GALLEY_RT_LIST; /* the columns of each row */
  t.lvl[1].mode = 1;
  t.lvl[1].dim = N;
  t.lvl[1].npar = N;
  t.lvl[1].nchild = t.lvl[1].nset = NNZ;
  t.lvl[1].idx32 = 1; /* 32-bit indices, as the header says */
  t.lvl[1].pos32 = A_pos;
  t.lvl[1].crd32 = A_crd;
  t.val = A_val;
  t.nval = NNZ;
  t.fill = 0;
  return t;
}

static struct galley_tensor list_vector(void) {
  struct galley_tensor t = {0};
  t.order = 1;
  t.dims[0] = N;
  t.lvl[0].kind = GALLEY_RT_LIST;
  t.lvl[0].mode = 0;
  t.lvl[0].dim = N;
  t.lvl[0].npar = 1;
  t.lvl[0].nchild = t.lvl[0].nset = N;
  t.lvl[0].idx32 = 1; /* 32-bit indices, as the header says */
  t.lvl[0].pos32 = x_pos;
  t.lvl[0].crd32 = x_crd;
  t.val = x_val;
  t.nval = N;
  t.fill = 0;
  return t;
}

/* Print an all-dense output as `galleyc run --print` would: headers, then
 * the entries that differ from the fill, 1-based, in logical order. */
static void print_tns(const struct galley_tensor *t) {
  int64_t c[GALLEY_RT_MAX_ORDER] = {0}, total = 1;
  printf("# dims:");
  for (int k = 0; k < t->order; k++) {
    printf(" %lld", (long long)t->dims[k]);
    total *= t->dims[k];
  }
  printf("\n# fill: %.17g\n", t->fill);
  for (int64_t e = 0; e < total; e++) {
    int64_t rest = e, p = 0;
    for (int k = t->order - 1; k >= 0; k--) {
      c[k] = rest % t->dims[k];
      rest /= t->dims[k];
    }
    for (int l = 0; l < t->order; l++) /* dense levels: p*dim + i */
      p = p * t->lvl[l].dim + c[t->lvl[l].mode];
    if (t->val[p] == t->fill)
      continue;
    for (int k = 0; k < t->order; k++)
      printf("%lld ", (long long)c[k] + 1);
    printf("%.17g\n", t->val[p]);
  }
}

int main(void) {
  struct galley_tensor A = csr_matrix(), x = list_vector();
  const struct galley_tensor *inputs[GALLEY_AOT_NUM_INPUTS] = {&A, &x};
  struct galley_tensor *outputs[GALLEY_AOT_NUM_OUTPUTS];
  int rc = galley_aot_run(inputs, outputs);
  if (rc != GALLEY_AOT_OK) {
    fprintf(stderr, "host: galley_aot_run failed: %s\n",
            rc == GALLEY_AOT_EINPUT ? "inputs differ from the compiled data"
                                    : "out of memory");
    return 1;
  }
  const struct galley_tensor *y = outputs[0];
  print_tns(y);
  /* The same product by a plain CSR loop (y is all-dense, level 0 = i). */
  int ok = y->order == 1 && y->dims[0] == N;
  for (int i = 0; ok && i < N; i++) {
    double s = 0;
    for (galley_pos t = A_pos[i]; t < A_pos[i + 1]; t++)
      s += A_val[t] * x_val[A_crd[t]];
    ok = y->val[i] == s;
  }
  galley_aot_free(outputs[0]);
  if (!ok) {
    fprintf(stderr, "host: %s differs from the CSR loop\n",
            galley_aot_output_names[0]);
    return 1;
  }
  return 0;
}
