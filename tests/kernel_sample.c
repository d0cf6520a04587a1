/*
 * kernel_sample.c -- a kernel written the way generated code will be: it
 * includes only galley_rt.h and walks / locates levels through its inline
 * functions.  tests/test_rt_header.sh compiles it with gcc, clang and tcc
 * (warnings as errors); tests/test_kernel_header.c compiles it in memory
 * with libtcc and checks its answers against the runtime.
 */
#include "galley_rt.h"

/* A weighted sum over every stored entry of an order-2 tensor, so that a
 * wrong coordinate or child position changes the answer:
 * sum of val * (7*c0 + 3*c1 + 1), with c0, c1 the coordinates of the first
 * and second storage level. */
double sample_walk_sum2(const struct galley_tensor *A) {
  const galley_level *L0 = &A->lvl[0], *L1 = &A->lvl[1];
  double sum = 0.0;
  galley_pos end0 = galley_rt_walk_end(L0, 0);
  for (galley_pos t0 = galley_rt_walk_begin(L0, 0); t0 < end0; t0++) {
    galley_crd c0 = galley_rt_walk_crd(L0, t0);
    galley_pos p1 = galley_rt_walk_child(L0, 0, t0);
    galley_pos end1 = galley_rt_walk_end(L1, p1);
    for (galley_pos t1 = galley_rt_walk_begin(L1, p1); t1 < end1; t1++) {
      galley_crd c1 = galley_rt_walk_crd(L1, t1);
      galley_pos q = galley_rt_walk_child(L1, p1, t1);
      sum += A->val[q] * (double)(7 * c0 + 3 * c1 + 1);
    }
  }
  return sum;
}

/* The value at storage coordinates (c0, c1), or the fill. */
double sample_get2(const struct galley_tensor *A, galley_crd c0,
                   galley_crd c1) {
  galley_pos p1 = galley_rt_locate(&A->lvl[0], 0, c0);
  if (p1 < 0)
    return A->fill;
  galley_pos q = galley_rt_locate(&A->lvl[1], p1, c1);
  return q < 0 ? A->fill : A->val[q];
}

/* First position in crd[lo, hi) holding a value >= i, by galloping. */
galley_pos sample_gallop(const galley_crd *crd, galley_pos lo, galley_pos hi,
                         galley_crd i) {
  return galley_rt_gallop(crd, lo, hi, i);
}
