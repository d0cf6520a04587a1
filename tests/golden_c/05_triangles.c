#ifdef __clang__
#pragma clang diagnostic pop
#endif


/* _t0 = Agg(+, i j k, Map(*, 6, Map(*, E[i::it, j::it], E[j::lu, k::it], E[i::lu, k::it])))
 *   loops i = i0:lead, j = i1:lead<i0, k = i2:intersect<i1
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
    /* loop i1 (lead) */
    galley_pos eA0_1 = A0_1_pos[pA0_0 + 1];
    galley_pos tA0_1 = A0_1_pos[pA0_0];
    for (; tA0_1 < eA0_1; tA0_1++) {
      galley_crd i1 = A0_1_crd[tA0_1];
      if (i1 >= i0) break;
      galley_pos pA0_1 = tA0_1;
      galley_pos pA1_0 = i1;
      /* loop i2 (intersect) */
      galley_pos eA1_1 = A1_1_pos[pA1_0 + 1];
      galley_pos tA1_1 = A1_1_pos[pA1_0];
      galley_pos eA2_1 = A2_1_pos[pA2_0 + 1];
      galley_pos tA2_1 = A2_1_pos[pA2_0];
      for (;;) {
        if (tA1_1 >= eA1_1 || tA2_1 >= eA2_1) break;
        galley_crd c1 = A1_1_crd[tA1_1], c2 = A2_1_crd[tA2_1];
        if (c1 >= i1 || c2 >= i1) break;
        if (c1 < c2) {
          if (++tA1_1 < eA1_1 && A1_1_crd[tA1_1] < c2) tA1_1 = galley_rt_gallop32(A1_1_crd, tA1_1, eA1_1, c2);
          continue;
        }
        if (c2 < c1) {
          if (++tA2_1 < eA2_1 && A2_1_crd[tA2_1] < c1) tA2_1 = galley_rt_gallop32(A2_1_crd, tA2_1, eA2_1, c1);
          continue;
        }
        galley_crd i2 = c1;
        galley_pos pA1_1 = tA1_1;
        galley_pos pA2_1 = tA2_1;
        tA1_1++;
        tA2_1++;
        acc = (acc + (6.0 * ((A0_val[pA0_1] * A1_val[pA1_1]) * A2_val[pA2_1])));
      }
    }
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

