/*
 * uniform.c -- the uniform estimator (Galley paper Sec. 6.3.1): a tensor
 * is its number of non-fill entries, assumed spread uniformly over its
 * index space (System R with the whole dimension as active domain).
 *
 * Everything is kept in natural logs: a product of 64 sizes of 2^62
 * overflows a double, and 1 - (1 - p)^r needs log1p/expm1 to keep its
 * precision for tiny p.  log(0) = -inf stands for "no entries".
 *
 * Unlike the reference (galley-notes 4.1), the estimate honours its
 * projection: the expected number of distinct projections of uniformly
 * placed entries, not the full count.
 */
#include <math.h>

#include "stats.h"

/* log of the product of the sizes (-inf when one is 0): the context's
 * logs when it has them (the same figures, summed in the same order). */
double uni_lspace(const StatsContext *c, IdxSet s) {
  double l = 0;
  if (c->ldims) {
    for (; s; s &= s - 1) {
      double x = c->ldims[__builtin_ctzll(s)];
      if (x == -INFINITY) return -INFINITY;
      l += x;
    }
    return l;
  }
  for (; s; s &= s - 1) {
    int64_t n = c->dims[__builtin_ctzll(s)];
    if (n <= 0) return -INFINITY;
    l += log((double)n);
  }
  return l;
}

const double *stats_log_dims(Arena *a, const int64_t *dims, int n) {
  double *l = arena_alloc(a, ((size_t)n + 1) * sizeof *l);
  for (int k = 0; l && k < n; k++)
    l[k] = dims[k] > 0 ? log((double)dims[k]) : -INFINITY;
  return l;
}

/* log(1 - (1 - p)^r) for p = e^lp in [0, 1] and r = e^lratio >= 1: the
 * probability that at least one of r independent cells with probability p
 * is hit. */
double uni_log_hit(double lp, double lratio) {
  if (lp == -INFINITY) return -INFINITY;
  if (lp >= 0) return 0;
  if (lratio <= 0) return lp; /* r = 1: p itself */
  double y = -log1p(-exp(lp)); /* -log(1 - p) > 0 */
  double ly = log(y) + lratio; /* log(r * -log(1 - p)) */
  if (ly < -30) return ly;     /* 1 - e^-Y = Y to double precision */
  double hit = -expm1(-exp(ly));
  return hit > 0 ? log(hit) : ly;
}

/* log p of an argument: its nnz over its space (<= 0). */
static double lprob(const StatsContext *c, const TensorStats *a) {
  if (a->empty || a->lnnz == -INFINITY) return -INFINITY;
  double lp = a->lnnz - uni_lspace(c, a->indices);
  return lp < 0 ? lp : 0;
}

/* Annihilating map: every argument non-fill, independently. */
double uni_join(const StatsContext *c, const TensorStats *const *args, int n,
                IdxSet indices) {
  double lspace = uni_lspace(c, indices);
  double l = lspace;
  for (int k = 0; k < n; k++) l += lprob(c, args[k]);
  if (isnan(l) || lspace == -INFINITY) return -INFINITY;
  return l < lspace ? l : lspace;
}

/* Non-annihilating map: some argument non-fill. */
double uni_union(const StatsContext *c, const TensorStats *const *args, int n,
                 IdxSet indices) {
  double lspace = uni_lspace(c, indices);
  if (lspace == -INFINITY) return -INFINITY;
  double lmiss = 0; /* log prod(1 - p_k) */
  for (int k = 0; k < n; k++) {
    double lp = lprob(c, args[k]);
    if (lp == -INFINITY) continue;
    lmiss += lp >= 0 ? -INFINITY : log1p(-exp(lp));
  }
  double hit = -expm1(lmiss); /* 1 - prod(1 - p_k) */
  if (!(hit > 0)) return -INFINITY;
  double l = lspace + log(hit);
  return l < lspace ? l : lspace;
}

/* Aggregate keeping the indices `keep`: an output cell is non-fill when
 * one of its space_old/space_new input cells is. */
double uni_aggregate(const StatsContext *c, const TensorStats *s,
                     IdxSet keep) {
  double lnew = uni_lspace(c, keep);
  double lold = uni_lspace(c, s->indices);
  if (lnew == -INFINITY || lold == -INFINITY) return -INFINITY;
  double l = lnew + uni_log_hit(lprob(c, s), lold - lnew);
  return l < lnew ? l : lnew;
}

/* Expected distinct projections onto `indices`, per value of
 * `conditional`. */
double uni_estimate(const StatsContext *c, const TensorStats *s,
                    IdxSet indices, IdxSet conditional) {
  double lproj = uni_aggregate(c, s, indices);
  if (lproj == -INFINITY) return 0;
  double l = lproj - uni_lspace(c, conditional);
  if (isnan(l)) return 0;
  double e = exp(l);
  return e < STATS_MAX_ESTIMATE ? e : STATS_MAX_ESTIMATE;
}
