#ifdef __clang__
#pragma clang diagnostic pop
#endif


/* C[i,j] = Map(+, A[i::it, j::it], Map(*, 2, B[i::it, j::it]))
 *   loops i = i0:union, j = i1:union
 */
int galley_q0(const galley_kernel_args *a) {
  const galley_crd lo = a->lo, hi = a->hi;
  const galley_crd n1 = a->dims[1];
  const int32_t *restrict A0_1_pos = a->in[0]->lvl[1].pos32;
  const int32_t *restrict A0_1_crd = a->in[0]->lvl[1].crd32;
  const double *restrict A0_val = a->in[0]->val;
  const int32_t *restrict A1_1_pos = a->in[1]->lvl[1].pos32;
  const int32_t *restrict A1_1_crd = a->in[1]->lvl[1].crd32;
  const double *restrict A1_val = a->in[1]->val;
  /* loop i0 (union) */
  for (galley_crd i0 = lo; i0 < hi; i0++) {
    galley_pos pA0_0 = i0;
    galley_pos pA1_0 = i0;
    /* loop i1 (union) */
    galley_pos eA0_1 = A0_1_pos[pA0_0 + 1];
    galley_pos tA0_1 = A0_1_pos[pA0_0];
    galley_pos eA1_1 = A1_1_pos[pA1_0 + 1];
    galley_pos tA1_1 = A1_1_pos[pA1_0];
    for (;;) {
      galley_crd i1 = n1;
      if (tA0_1 < eA0_1 && A0_1_crd[tA0_1] < i1) i1 = A0_1_crd[tA0_1];
      if (tA1_1 < eA1_1 && A1_1_crd[tA1_1] < i1) i1 = A1_1_crd[tA1_1];
      if (i1 >= n1) break;
      galley_pos pA0_1 = -1;
      if (tA0_1 < eA0_1 && A0_1_crd[tA0_1] == i1) {
        pA0_1 = tA0_1;
        tA0_1++;
      }
      galley_pos pA1_1 = -1;
      if (tA1_1 < eA1_1 && A1_1_crd[tA1_1] == i1) {
        pA1_1 = tA1_1;
        tA1_1++;
      }
      double v = ((pA0_1 >= 0 ? A0_val[pA0_1] : 0.0) + (2.0 * (pA1_1 >= 0 ? A1_val[pA1_1] : 0.0)));
      if (v != 0.0) {
        const int64_t crd[2] = {i0, i1};
        int r = galley_rt_sink_push(a->sink, crd, v);
        if (r != GALLEY_RT_OK) return r;
      }
    }
  }
  return 0;
}

