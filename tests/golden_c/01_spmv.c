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


/* y[i] = Agg(+, j, Map(*, A[i::it, j::it], x[j::lu]))
 *   loops i = i0:lead, j = i1:lead
 */
static int galley_q0_rows(const galley_kernel_args *a, const galley_crd lo, const galley_crd hi) {
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

int galley_q0(const galley_kernel_args *a) {
  const galley_crd lo = a->lo, hi = a->hi;
  const galley_rt_sliced *S = a->sliced;
  galley_crd c0 = (lo + GALLEY_RT_SLICE - 1) / GALLEY_RT_SLICE, c1 = hi / GALLEY_RT_SLICE;
  if (S && c1 > S->nchunk) c1 = S->nchunk;
  if (!S || c0 >= c1) return galley_q0_rows(a, lo, hi);
  galley_q0_rows(a, lo, c0 * GALLEY_RT_SLICE);
  const double *restrict A1_val = a->in[1]->val;
  double *O_val = a->out->val;
  if (S->val32) {
    const int64_t *restrict S_start = S->start;
    const int32_t *restrict S_crd = S->crd;
    const float *restrict S_val32 = S->val32;
    for (galley_crd c = c0; c < c1; c++) {
      galley_lanes acc4 = {0.0, 0.0, 0.0, 0.0};
      galley_pos e = S_start[c + 1] * GALLEY_RT_SLICE;
      for (galley_pos s = S_start[c] * GALLEY_RT_SLICE; s < e; s += GALLEY_RT_SLICE) {
        double t_0, t_1, t_2, t_3;
        {
          galley_crd i1 = S_crd[s + 0];
          galley_pos pA0_1 = s + 0;
          galley_pos pA1_0 = i1;
          t_0 = (((double)S_val32[pA0_1]) * A1_val[pA1_0]);
        }
        {
          galley_crd i1 = S_crd[s + 1];
          galley_pos pA0_1 = s + 1;
          galley_pos pA1_0 = i1;
          t_1 = (((double)S_val32[pA0_1]) * A1_val[pA1_0]);
        }
        {
          galley_crd i1 = S_crd[s + 2];
          galley_pos pA0_1 = s + 2;
          galley_pos pA1_0 = i1;
          t_2 = (((double)S_val32[pA0_1]) * A1_val[pA1_0]);
        }
        {
          galley_crd i1 = S_crd[s + 3];
          galley_pos pA0_1 = s + 3;
          galley_pos pA1_0 = i1;
          t_3 = (((double)S_val32[pA0_1]) * A1_val[pA1_0]);
        }
        GALLEY_LANES_FOLD(acc4, +, t_0, t_1, t_2, t_3);
      }
      O_val[c * GALLEY_RT_SLICE + 0] = acc4[0];
      O_val[c * GALLEY_RT_SLICE + 1] = acc4[1];
      O_val[c * GALLEY_RT_SLICE + 2] = acc4[2];
      O_val[c * GALLEY_RT_SLICE + 3] = acc4[3];
    }
  }
  else {
    const int64_t *restrict S_start = S->start;
    const int32_t *restrict S_crd = S->crd;
    const double *restrict S_val = S->val;
    for (galley_crd c = c0; c < c1; c++) {
      galley_lanes acc4 = {0.0, 0.0, 0.0, 0.0};
      galley_pos e = S_start[c + 1] * GALLEY_RT_SLICE;
      for (galley_pos s = S_start[c] * GALLEY_RT_SLICE; s < e; s += GALLEY_RT_SLICE) {
        double t_0, t_1, t_2, t_3;
        {
          galley_crd i1 = S_crd[s + 0];
          galley_pos pA0_1 = s + 0;
          galley_pos pA1_0 = i1;
          t_0 = (S_val[pA0_1] * A1_val[pA1_0]);
        }
        {
          galley_crd i1 = S_crd[s + 1];
          galley_pos pA0_1 = s + 1;
          galley_pos pA1_0 = i1;
          t_1 = (S_val[pA0_1] * A1_val[pA1_0]);
        }
        {
          galley_crd i1 = S_crd[s + 2];
          galley_pos pA0_1 = s + 2;
          galley_pos pA1_0 = i1;
          t_2 = (S_val[pA0_1] * A1_val[pA1_0]);
        }
        {
          galley_crd i1 = S_crd[s + 3];
          galley_pos pA0_1 = s + 3;
          galley_pos pA1_0 = i1;
          t_3 = (S_val[pA0_1] * A1_val[pA1_0]);
        }
        GALLEY_LANES_FOLD(acc4, +, t_0, t_1, t_2, t_3);
      }
      O_val[c * GALLEY_RT_SLICE + 0] = acc4[0];
      O_val[c * GALLEY_RT_SLICE + 1] = acc4[1];
      O_val[c * GALLEY_RT_SLICE + 2] = acc4[2];
      O_val[c * GALLEY_RT_SLICE + 3] = acc4[3];
    }
  }
  return galley_q0_rows(a, c1 * GALLEY_RT_SLICE, hi);
}

