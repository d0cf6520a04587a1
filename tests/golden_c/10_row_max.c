#ifdef __clang__
#pragma clang diagnostic pop
#endif


/* m[i] = Agg(max, j, A[i::it, j::it])
 *   loops i = i0:lead, j = i1:lead
 */
int galley_q0(const galley_kernel_args *a) {
  const galley_crd lo = a->lo, hi = a->hi;
  const galley_crd n1 = a->dims[1];
  const int32_t *restrict A0_1_pos = a->in[0]->lvl[1].pos32;
  const int32_t *restrict A0_1_crd = a->in[0]->lvl[1].crd32;
  const double *restrict A0_val = a->in[0]->val;
  double *O_val = a->out->val;
  /* loop i0 (lead) */
  for (galley_crd i0 = lo; i0 < hi; i0++) {
    galley_pos pA0_0 = i0;
    double acc = (-1.0 / 0.0);
    /* loop i1 (lead) */
    int64_t k1 = 0; /* points visited */
    galley_pos eA0_1 = A0_1_pos[pA0_0 + 1];
    galley_pos tA0_1 = A0_1_pos[pA0_0];
    for (; tA0_1 < eA0_1; tA0_1++) {
      galley_crd i1 = A0_1_crd[tA0_1];
      galley_pos pA0_1 = tA0_1;
      k1++;
      acc = galley_rt_max(acc, A0_val[pA0_1]);
    }
    /* the skipped points of i1 each hold 0.0 */
    if ((double)(n1 - k1) > 0) {
      acc = galley_rt_max(acc, 0.0);
    }
    O_val[i0] = acc;
  }
  return 0;
}

