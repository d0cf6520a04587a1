/*
 * stats.h -- sparsity estimation (Galley paper Sec. 6): one interface of
 * five operations with two estimators behind it, the uniform estimator
 * (Sec. 6.3.1) and the chain bound over degree constraints (Sec. 6.3.2).
 * The optimizers never look inside a statistic: they build one per input
 * access, combine them along the expression, and ask for nnz estimates.
 *
 * Indices are the ids of one query (as in ir.h / phys.h), at most 64 per
 * query; index sets are bit masks (bit k = index id k).
 *
 * Everything is allocated in the caller's arena.
 */
#ifndef GALLEY_STATS_H
#define GALLEY_STATS_H

#include <stdint.h>

#include "galley.h"
#include "ir.h"

typedef uint64_t IdxSet; /* bit k = index id k */

#define STATS_MAX_INDICES 64

typedef enum EstimatorKind {
  EST_UNIFORM = 0, /* nnz only, entries uniform over the index space */
  EST_CHAIN = 1    /* degree constraints and the chain bound */
} EstimatorKind;

/* A statistic of a (possibly not yet computed) tensor expression: its index
 * set, the sizes of those indices, its fill, and estimator data. */
typedef struct TensorStats TensorStats;

typedef struct StatsContext {
  EstimatorKind kind;
  Arena *arena;         /* where statistics are allocated */
  const int64_t *dims;  /* size of each index id of the query */
  int nindices;         /* number of index ids (<= 64) */
} StatsContext;

/* 1. Statistics of an input tensor t read as t[idx[0], ..., idx[order-1]]
 * (idx[m] = the index id for logical mode m; a repeated index means the
 * diagonal: estimate it conservatively), with the fill `fill` (the declared
 * one).  The chain estimator derives its degree constraints from
 * galley_tensor_degree_stats with one generic rank-n routine, capped so
 * that dense inputs do not produce 3^n constraints. */
TensorStats *stats_from_tensor(const StatsContext *c, const galley_tensor *t,
                               const int *idx, double fill);

/* Statistics of a constant (no indices). */
TensorStats *stats_const(const StatsContext *c, double value);

/* 2. Annihilating map ("join"): the result is non-fill only where every
 * argument is (the args' fills annihilate the op). */
TensorStats *stats_join(const StatsContext *c, const TensorStats *const *args,
                        int n, double fill);

/* 3. Non-annihilating map ("union"): non-fill where any argument is. */
TensorStats *stats_union(const StatsContext *c, const TensorStats *const *args,
                         int n, double fill);

/* A map by op: classifies each argument as join-like (its fill is the op's
 * annihilator) or union-like, and returns join(join-like...,
 * union(union-like...)) with fill op(fills...), as Galley does. */
TensorStats *stats_map(const StatsContext *c, const Op *op,
                       const TensorStats *const *args, int n);

/* 4. Aggregate over the indices in `reduced` (removed from the index set);
 * fill = the fold of the fill over the reduced sizes. */
TensorStats *stats_aggregate(const StatsContext *c, const Op *op,
                             const TensorStats *s, IdxSet reduced);

/* 5. Estimated number of non-fill entries of s projected onto `indices`
 * (a subset of its index set), per fixed value of `conditional` (a subset
 * of `indices`; 0 for the total): the expected fan-out the loop-order
 * search needs.  Clamped to the product of the sizes involved; never NaN;
 * at least 0. */
double stats_estimate(const StatsContext *c, const TensorStats *s,
                      IdxSet indices, IdxSet conditional);

IdxSet stats_indices(const TensorStats *s);
double stats_fill(const TensorStats *s);

/* Build statistics directly (for tests and for callers that know a
 * tensor's shape only): an index set with the given nnz and, for the chain
 * estimator, degree constraints: "for each value of the indices in `cond`,
 * at most d distinct values of the indices in `counted`" -- the paper's
 * D(counted | cond), written (cond|counted) in galley-notes.md section 5.3,
 * whose table `(j|k) = 5` is stats_add_constraint(c, s, {j}, {k}, 5) and
 * `(∅|ij) = 50` is (c, s, 0, {i,j}, 50).  The uniform estimator ignores
 * constraints. */
TensorStats *stats_new(const StatsContext *c, IdxSet indices, double nnz,
                       double fill);
void stats_add_constraint(const StatsContext *c, TensorStats *s, IdxSet cond,
                          IdxSet counted, double d);

#endif /* GALLEY_STATS_H */
