/*
 * rt_stats.h -- the degree statistics the optimizer reads
 * (runtime/stats.c, used by src/stats/stats.c): the same figures as the
 * public galley_tensor_degree_stats, found in one pass over the tensor's
 * structure where they can be, the others by grouping the entries (small
 * inputs) or from a sample of them (large ones).
 */
#ifndef GALLEY_RT_STATS_H
#define GALLEY_RT_STATS_H

#include <stdint.h>

#include "galley.h"

/* The sample's seed (splitmix64): fixed, so that plans are reproducible. */
#define RT_STATS_SEED 0x243F6A8885A308D3ull

/* How each figure of a galley_degree_stats was found. */
typedef struct rt_degree_info {
  /* exact[S] = 1: distinct[S] and max_degree[S] are exact.  Otherwise
   * (only when a sample was drawn) max_degree[S] is still a guaranteed
   * upper bound, and distinct[S] lies between the bounds that the exact
   * figures imply (rt_degree_limits) and is an upper bound with high
   * probability (see runtime/stats.c). */
  unsigned char exact[1 << GALLEY_MAX_ORDER];
  int64_t sampled; /* entries in the sample; 0 when none was drawn */
  double rate;     /* the probability each entry had of being drawn */
} rt_degree_info;

/* Degree statistics of t for the optimizer.  sample = 0: every figure
 * exact (as galley_tensor_degree_stats).  sample > 0 and more than 2 *
 * sample non-fill entries: the figures the one structural pass does not
 * give exactly come from about `sample` entries drawn with probability
 * sample / nnz each (seed RT_STATS_SEED).  info may be NULL. */
galley_status rt_degree_stats(const galley_tensor *t, int64_t sample,
                              galley_degree_stats *out, rt_degree_info *info,
                              galley_error *err);

/* rt_degree_stats(t, sample) made on first use and kept with t, in the
 * cache that holds its facts and conversions, until t is touched
 * (galley_tensor_touch) or freed: a tensor bound to several programs, or
 * bound again, is not walked again.  The same pointer every time; NULL
 * when out of memory, when the statistics fail, or when statistics for
 * another sample size are kept (the caller then makes its own).  Safe to
 * call from several threads. */
const galley_degree_stats *rt_tensor_degree_stats_kept(const galley_tensor *t,
                                                       int64_t sample);

/* The bounds on distinct[S] that the exact figures of ds imply (their
 * subsets' counts below, nnz, their supersets' counts and the product of
 * the single modes' counts above): *lo <= true distinct[S] <= *hi. */
void rt_degree_limits(const galley_degree_stats *ds, const rt_degree_info *info,
                      unsigned S, int64_t *lo, int64_t *hi);

#endif /* GALLEY_RT_STATS_H */
