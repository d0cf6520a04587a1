#ifdef __clang__
#pragma clang diagnostic pop
#endif


/* C[i,k] = Agg(+, j, Map(*, H[i::it, j::it], K[j::lu, k::it]))
 *   loops i = i0:lead, j = i1:lead, k = i2:lead
 */
int galley_q0(const galley_kernel_args *a) {
  const galley_crd lo = a->lo, hi = a->hi;
  const int32_t *restrict A0_1_pos = a->in[0]->lvl[1].pos32;
  const int32_t *restrict A0_1_crd = a->in[0]->lvl[1].crd32;
  const double *restrict A0_val = a->in[0]->val;
  const galley_level *A1_0 = &a->in[1]->lvl[0];
  const int32_t *restrict A1_1_pos = a->in[1]->lvl[1].pos32;
  const int32_t *restrict A1_1_crd = a->in[1]->lvl[1].crd32;
  const double *restrict A1_val = a->in[1]->val;
  /* loop i0 (lead) */
  for (galley_crd i0 = lo; i0 < hi; i0++) {
    galley_pos pA0_0 = i0;
    /* loop i1 (lead) */
    galley_pos gA1_0 = A1_0->pos32[0];
    galley_pos eA0_1 = A0_1_pos[pA0_0 + 1];
    galley_pos tA0_1 = A0_1_pos[pA0_0];
    for (; tA0_1 < eA0_1; tA0_1++) {
      galley_crd i1 = A0_1_crd[tA0_1];
      galley_pos pA0_1 = tA0_1;
      galley_pos pA1_0 = galley_rt_list_locate_from32(A1_0, 0, &gA1_0, i1);
      if (pA1_0 < 0) continue;
      /* loop i2 (lead) */
      galley_pos eA1_1 = A1_1_pos[pA1_0 + 1];
      galley_pos tA1_1 = A1_1_pos[pA1_0];
      for (; tA1_1 < eA1_1; tA1_1++) {
        galley_crd i2 = A1_1_crd[tA1_1];
        galley_pos pA1_1 = tA1_1;
        double v = (A0_val[pA0_1] * A1_val[pA1_1]);
        double *w = galley_rt_ws_at(a->ws, i2, 0.0);
        if (!w) return GALLEY_RT_NOMEM;
        *w = ((*w) + v);
      }
    }
    /* flush the workspace: the scattered points in order */
    galley_rt_ws_sort(a->ws);
    for (int64_t wt = 0; wt < a->ws->n; wt++) {
      int64_t wk = a->ws->keys[wt];
      double wv = galley_rt_ws_get(a->ws, wk);
      galley_crd i2 = wk;
      if (wv != 0.0) {
        const int64_t crd[2] = {i0, i2};
        int r = galley_rt_sink_push(a->sink, crd, wv);
        if (r != GALLEY_RT_OK) return r;
      }
    }
    galley_rt_ws_clear(a->ws);
  }
  return 0;
}

