#ifdef __clang__
#pragma clang diagnostic pop
#endif

#if defined(__GNUC__) && !defined(__TINYC__)
typedef double galley_lanes __attribute__((vector_size(4 * sizeof(double))));
#define GALLEY_LANES_FOLD(v, op, a, b, c, d) ((v) = (v) op (galley_lanes){a, b, c, d})
#else
typedef double galley_lanes[4];
#define GALLEY_LANES_FOLD(v, op, a, b, c, d) \
  ((v)[0] = (v)[0] op (a), (v)[1] = (v)[1] op (b), (v)[2] = (v)[2] op (c), (v)[3] = (v)[3] op (d))
#endif


/* y[j] = Agg(+, i, Map(*, _t0[j::it, i::it], x[i::lu]))
 *   loops j = i0:lead, i = i1:lead
 */
int galley_q1(const galley_kernel_args *a) {
  const galley_crd lo = a->lo, hi = a->hi;
  const int32_t *restrict A0_1_pos = a->in[0]->lvl[1].pos32;
  const int32_t *restrict A0_1_crd = a->in[0]->lvl[1].crd32;
  const double *restrict A0_val = a->in[0]->val;
  const double *restrict A1_val = a->in[1]->val;
  double *O_val = a->out->val;
  /* loop i0 (lead) */
  for (galley_crd i0 = lo; i0 < hi; i0++) {
    galley_pos pA0_0 = i0;
    double acc = 0.0;
    /* loop i1 (lead, 4 accumulators) */
    {
      galley_pos eA0_1 = A0_1_pos[pA0_0 + 1];
      galley_pos tA0_1 = A0_1_pos[pA0_0];
      if (eA0_1 - tA0_1 < 8) {
        #ifdef __clang__
        #pragma clang loop unroll(disable)
        #endif
        for (; tA0_1 < eA0_1; tA0_1++) {
          galley_crd i1 = A0_1_crd[tA0_1];
          galley_pos pA0_1 = tA0_1;
          galley_pos pA1_0 = i1;
          acc = (acc + (A0_val[pA0_1] * A1_val[pA1_0]));
        }
      }
      else {
        double acc_1 = 0.0, acc_2 = 0.0, acc_3 = 0.0;
        galley_lanes acc4 = {acc, acc_1, acc_2, acc_3};
        for (; tA0_1 + 4 <= eA0_1; tA0_1 += 4) {
          double t_0, t_1, t_2, t_3;
          {
            galley_crd i1 = A0_1_crd[tA0_1 + 0];
            galley_pos pA0_1 = tA0_1 + 0;
            galley_pos pA1_0 = i1;
            t_0 = (A0_val[pA0_1] * A1_val[pA1_0]);
          }
          {
            galley_crd i1 = A0_1_crd[tA0_1 + 1];
            galley_pos pA0_1 = tA0_1 + 1;
            galley_pos pA1_0 = i1;
            t_1 = (A0_val[pA0_1] * A1_val[pA1_0]);
          }
          {
            galley_crd i1 = A0_1_crd[tA0_1 + 2];
            galley_pos pA0_1 = tA0_1 + 2;
            galley_pos pA1_0 = i1;
            t_2 = (A0_val[pA0_1] * A1_val[pA1_0]);
          }
          {
            galley_crd i1 = A0_1_crd[tA0_1 + 3];
            galley_pos pA0_1 = tA0_1 + 3;
            galley_pos pA1_0 = i1;
            t_3 = (A0_val[pA0_1] * A1_val[pA1_0]);
          }
          GALLEY_LANES_FOLD(acc4, +, t_0, t_1, t_2, t_3);
        }
        acc = acc4[0]; acc_1 = acc4[1]; acc_2 = acc4[2]; acc_3 = acc4[3];
        acc = ((acc + acc_1) + (acc_2 + acc_3));
        for (; tA0_1 < eA0_1; tA0_1++) {
          galley_crd i1 = A0_1_crd[tA0_1];
          galley_pos pA0_1 = tA0_1;
          galley_pos pA1_0 = i1;
          acc = (acc + (A0_val[pA0_1] * A1_val[pA1_0]));
        }
      }
    }
    O_val[i0] = acc;
  }
  return 0;
}

