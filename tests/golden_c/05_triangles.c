#ifdef __clang__
#pragma clang diagnostic pop
#endif


/* _t0 = Agg(+, i j k, Map(*, 6, Map(*, E[i::it, j::it], E[j::lu, k::it], E[i::lu, k::lu])))
 *   loops i = i0:lead, j = i1:lead<i0, k = i2:mark<i1
 */
int galley_q0(const galley_kernel_args *a) {
  const galley_crd lo = a->lo, hi = a->hi;
  const int32_t *restrict A0_1_pos = a->in[0]->lvl[1].pos32;
  const int32_t *restrict A0_1_crd = a->in[0]->lvl[1].crd32;
  const double *restrict A0_val = a->in[0]->val;
  const int32_t *restrict A1_1_pos = a->in[1]->lvl[1].pos32;
  const int32_t *restrict A1_1_crd = a->in[1]->lvl[1].crd32;
  const double *restrict A1_val = a->in[1]->val;
  const int32_t *restrict A2_1_pos = a->in[2]->lvl[1].pos32;
  const int32_t *restrict A2_1_crd = a->in[2]->lvl[1].crd32;
  const double *restrict A2_val = a->in[2]->val;
  double *O_val = a->out->val;
  double acc = 0.0;
  /* loop i0 (lead) */
  for (galley_crd i0 = lo; i0 < hi; i0++) {
    galley_pos pA0_0 = i0;
    galley_pos pA2_0 = i0;
    /* mark: A2's fiber of i2 into the table */
    double *restrict mk = a->mark;
    galley_pos mA2_s = A2_1_pos[pA2_0];
    galley_pos mA2_e = A2_1_pos[pA2_0 + 1];
    for (galley_pos t = mA2_s; t < mA2_e; t++) {
      galley_crd c = A2_1_crd[t];
      if (c >= i0) {
        mA2_e = t;
        break;
      }
      mk[c] = A2_val[t];
    }
    /* loop i1 (lead) */
    galley_pos eA0_1 = A0_1_pos[pA0_0 + 1];
    galley_pos tA0_1 = A0_1_pos[pA0_0];
    for (; tA0_1 < eA0_1; tA0_1++) {
      galley_crd i1 = A0_1_crd[tA0_1];
      if (i1 >= i0) break;
      galley_pos pA0_1 = tA0_1;
      galley_pos pA1_0 = i1;
      /* loop i2 (mark) */
      galley_pos eA1_1 = A1_1_pos[pA1_0 + 1];
      galley_pos tA1_1 = A1_1_pos[pA1_0];
      for (; tA1_1 < eA1_1; tA1_1++) {
        galley_crd i2 = A1_1_crd[tA1_1];
        if (i2 >= i1) break;
        galley_pos pA1_1 = tA1_1;
        double mvA2 = mk[i2];
        acc = (acc + (6.0 * ((A0_val[pA0_1] * A1_val[pA1_1]) * mvA2)));
      }
    }
    for (galley_pos t = mA2_s; t < mA2_e; t++) mk[A2_1_crd[t]] = 0.0;
  }
  O_val[0] = acc;
  return 0;
}

/* triangles = Map(/, _t0, 6)
 *   loops
 */
int galley_q1(const galley_kernel_args *a) {
  const double *restrict A0_val = a->in[0]->val;
  double *O_val = a->out->val;
  double v = (A0_val[0] / 6.0);
  O_val[0] = v;
  return 0;
}

