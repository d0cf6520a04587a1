#ifdef __clang__
#pragma clang diagnostic pop
#endif


/* C[i,j] = Agg(+, k_2, Map(*, S[i::it, j::it], U[i::lu, k_2::it], V[j::lu, k_2::lu]))
 *   loops i = i0:lead, j = i1:lead, k_2 = i2:lead
 */
int galley_q0(const galley_kernel_args *a) {
  const galley_crd lo = a->lo, hi = a->hi;
  const galley_crd n2 = a->dims[2];
  const int32_t *restrict A0_1_pos = a->in[0]->lvl[1].pos32;
  const int32_t *restrict A0_1_crd = a->in[0]->lvl[1].crd32;
  const double *restrict A0_val = a->in[0]->val;
  const double *restrict A1_val = a->in[1]->val;
  const double *restrict A2_val = a->in[2]->val;
  double *O_val = a->out->val;
  /* loop i0 (lead) */
  for (galley_crd i0 = lo; i0 < hi; i0++) {
    galley_pos pA0_0 = i0;
    galley_pos pA1_0 = i0;
    /* loop i1 (lead) */
    galley_pos eA0_1 = A0_1_pos[pA0_0 + 1];
    galley_pos tA0_1 = A0_1_pos[pA0_0];
    for (; tA0_1 < eA0_1; tA0_1++) {
      galley_crd i1 = A0_1_crd[tA0_1];
      galley_pos pA0_1 = tA0_1;
      galley_pos pA2_0 = i1;
      double acc = 0.0;
      /* loop i2 (lead, 4 accumulators) */
      {
        galley_crd u2 = 0;
        if (n2 - u2 < 8) {
          #ifdef __clang__
          #pragma clang loop unroll(disable)
          #endif
          for (galley_crd i2 = u2; i2 < n2; i2++) {
            galley_pos pA1_1 = pA1_0 * n2 + i2;
            galley_pos pA2_1 = pA2_0 * n2 + i2;
            acc = (acc + ((A0_val[pA0_1] * A1_val[pA1_1]) * A2_val[pA2_1]));
          }
        }
        else {
          double acc_1 = 0.0, acc_2 = 0.0, acc_3 = 0.0;
          for (; u2 + 4 <= n2; u2 += 4) {
            {
              galley_crd i2 = u2 + 0;
              galley_pos pA1_1 = pA1_0 * n2 + i2;
              galley_pos pA2_1 = pA2_0 * n2 + i2;
              acc = (acc + ((A0_val[pA0_1] * A1_val[pA1_1]) * A2_val[pA2_1]));
            }
            {
              galley_crd i2 = u2 + 1;
              galley_pos pA1_1 = pA1_0 * n2 + i2;
              galley_pos pA2_1 = pA2_0 * n2 + i2;
              acc_1 = (acc_1 + ((A0_val[pA0_1] * A1_val[pA1_1]) * A2_val[pA2_1]));
            }
            {
              galley_crd i2 = u2 + 2;
              galley_pos pA1_1 = pA1_0 * n2 + i2;
              galley_pos pA2_1 = pA2_0 * n2 + i2;
              acc_2 = (acc_2 + ((A0_val[pA0_1] * A1_val[pA1_1]) * A2_val[pA2_1]));
            }
            {
              galley_crd i2 = u2 + 3;
              galley_pos pA1_1 = pA1_0 * n2 + i2;
              galley_pos pA2_1 = pA2_0 * n2 + i2;
              acc_3 = (acc_3 + ((A0_val[pA0_1] * A1_val[pA1_1]) * A2_val[pA2_1]));
            }
          }
          acc = ((acc + acc_1) + (acc_2 + acc_3));
          for (galley_crd i2 = u2; i2 < n2; i2++) {
            galley_pos pA1_1 = pA1_0 * n2 + i2;
            galley_pos pA2_1 = pA2_0 * n2 + i2;
            acc = (acc + ((A0_val[pA0_1] * A1_val[pA1_1]) * A2_val[pA2_1]));
          }
        }
      }
      O_val[pA0_1] = acc;
    }
  }
  return 0;
}

