#ifdef __clang__
#pragma clang diagnostic pop
#endif


/* total = Agg(+, i j, Map(*, A[i::it, j::it], A[i::lu, j::it]))
 *   loops i = i0:lead, j = i1:intersect
 */
int galley_q0(const galley_kernel_args *a) {
  const galley_crd lo = a->lo, hi = a->hi;
  const int32_t *restrict A0_1_pos = a->in[0]->lvl[1].pos32;
  const int32_t *restrict A0_1_crd = a->in[0]->lvl[1].crd32;
  const double *restrict A0_val = a->in[0]->val;
  const int32_t *restrict A1_1_pos = a->in[1]->lvl[1].pos32;
  const int32_t *restrict A1_1_crd = a->in[1]->lvl[1].crd32;
  const double *restrict A1_val = a->in[1]->val;
  double *O_val = a->out->val;
  double acc = 0.0;
  /* loop i0 (lead) */
  for (galley_crd i0 = lo; i0 < hi; i0++) {
    galley_pos pA0_0 = i0;
    galley_pos pA1_0 = i0;
    /* loop i1 (intersect) */
    galley_pos eA0_1 = A0_1_pos[pA0_0 + 1];
    galley_pos tA0_1 = A0_1_pos[pA0_0];
    galley_pos eA1_1 = A1_1_pos[pA1_0 + 1];
    galley_pos tA1_1 = A1_1_pos[pA1_0];
    for (;;) {
      if (tA0_1 >= eA0_1 || tA1_1 >= eA1_1) break;
      galley_crd c0 = A0_1_crd[tA0_1], c1 = A1_1_crd[tA1_1];
      if (c0 < c1) {
        if (++tA0_1 < eA0_1 && A0_1_crd[tA0_1] < c1) tA0_1 = galley_rt_gallop32(A0_1_crd, tA0_1, eA0_1, c1);
        continue;
      }
      if (c1 < c0) {
        if (++tA1_1 < eA1_1 && A1_1_crd[tA1_1] < c0) tA1_1 = galley_rt_gallop32(A1_1_crd, tA1_1, eA1_1, c0);
        continue;
      }
      galley_crd i1 = c0;
      galley_pos pA0_1 = tA0_1;
      galley_pos pA1_1 = tA1_1;
      tA0_1++;
      tA1_1++;
      acc = (acc + (A0_val[pA0_1] * A1_val[pA1_1]));
    }
  }
  O_val[0] = acc;
  return 0;
}

