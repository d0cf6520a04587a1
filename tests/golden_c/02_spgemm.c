#ifdef __clang__
#pragma clang diagnostic pop
#endif


/* C[i,k] = Agg(+, j, Map(*, A[i::it, j::it], B[j::lu, k::it]))
 *   loops i = i0:lead, j = i1:lead, k = i2:lead
 */
int galley_q0(const galley_kernel_args *a) {
  const galley_crd lo = a->lo, hi = a->hi;
  const int32_t *restrict A0_1_pos = a->in[0]->lvl[1].pos32;
  const int32_t *restrict A0_1_crd = a->in[0]->lvl[1].crd32;
  const double *restrict A0_val = a->in[0]->val;
  const int32_t *restrict A1_1_pos = a->in[1]->lvl[1].pos32;
  const int32_t *restrict A1_1_crd = a->in[1]->lvl[1].crd32;
  const double *restrict A1_val = a->in[1]->val;
  unsigned char *const ws_seen = a->ws->seen;
  double *const ws_val = a->ws->val;
  int64_t *const ws_keys = a->ws->keys;
  int64_t ws_n = a->ws->n;
  /* loop i0 (lead) */
  for (galley_crd i0 = lo; i0 < hi; i0++) {
    galley_pos pA0_0 = i0;
    /* loop i1 (lead) */
    galley_pos eA0_1 = A0_1_pos[pA0_0 + 1];
    galley_pos tA0_1 = A0_1_pos[pA0_0];
    for (; tA0_1 < eA0_1; tA0_1++) {
      galley_crd i1 = A0_1_crd[tA0_1];
      galley_pos pA0_1 = tA0_1;
      galley_pos pA1_0 = i1;
      /* loop i2 (lead) */
      galley_pos eA1_1 = A1_1_pos[pA1_0 + 1];
      galley_pos tA1_1 = A1_1_pos[pA1_0];
      for (; tA1_1 < eA1_1; tA1_1++) {
        galley_crd i2 = A1_1_crd[tA1_1];
        galley_pos pA1_1 = tA1_1;
        double v = (A0_val[pA0_1] * A1_val[pA1_1]);
        int64_t wk = i2;
        if (!ws_seen[wk]) {
          ws_seen[wk] = 1;
          ws_val[wk] = 0.0;
          ws_keys[ws_n++] = wk;
        }
        double *w = &ws_val[wk];
        *w = ((*w) + v);
      }
    }
    /* flush the workspace: the scattered points in order */
    a->ws->n = ws_n;
    galley_rt_ws_sort(a->ws);
    if (a->sink->rows && ws_n > 0) {
      /* rows mode: the row's entries straight into the list's arrays */
      galley_rt_sink *const sk = a->sink;
      const int64_t rp = i0;
      int r = galley_rt_sink_rows_reserve(sk, rp, ws_keys[0], ws_n);
      if (r != GALLEY_RT_OK) return r;
      int64_t sn = sk->n;
      double *const sv = sk->val;
      if (sk->rows32) {
        int32_t *const sc = sk->crd32;
        for (int64_t wt = 0; wt < ws_n; wt++) {
          int64_t wk = ws_keys[wt];
          double wv = ws_val[wk];
          ws_seen[wk] = 0;
          sc[sn] = (int32_t)wk;
          sv[sn] = wv;
          sn += wv != 0.0;
        }
      }
      else {
        int64_t *const sc = sk->crd;
        for (int64_t wt = 0; wt < ws_n; wt++) {
          int64_t wk = ws_keys[wt];
          double wv = ws_val[wk];
          ws_seen[wk] = 0;
          sc[sn] = wk;
          sv[sn] = wv;
          sn += wv != 0.0;
        }
      }
      galley_rt_sink_rows_commit(sk, rp, sn);
      a->ws->n = 0;
    }
    else {
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
    ws_n = 0;
  }
  return 0;
}

