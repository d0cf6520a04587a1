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
#include <stdio.h>

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

/* What stats_from_tensor computes of a bound tensor (its nnz, and for the
 * chain estimator its degree statistics: one pass over its structure and,
 * for large inputs of order 3 and more, a sample; runtime/stats.c), kept
 * for the next statistic of the same tensor: an optimizer reads each
 * input many times, and a program plans the same inputs again after its
 * options change.  Entries are keyed by the tensor's address and checked
 * against a fingerprint of its shape, layout, array addresses, facts
 * (galley_tensor_facts) and a few stored entries when first used after
 * stats_cache_recheck, so a tensor replaced at the same address, or
 * touched after its values changed, is computed again.  Lives in an
 * arena, which may outlive many plans. */
typedef struct StatsCache StatsCache;

/* An empty cache in arena a (NULL when out of memory). */
StatsCache *stats_cache_new(Arena *a);

/* Check every entry of sc against its tensor again at its next use: a
 * cache kept across plans is told so when a plan starts (the tensors may
 * have changed since the last); within one, entries are trusted. */
void stats_cache_recheck(StatsCache *sc);

/* t's non-fill entries, kept in sc (NULL: counted each time). */
int64_t stats_cache_nnz(StatsCache *sc, const galley_tensor *t);

/* Entries drawn from an input of more than 2 * STATS_SAMPLE non-fill
 * entries for the degree statistics its structure does not give
 * (rt_degree_stats). */
#define STATS_SAMPLE 16384

typedef struct StatsContext {
  EstimatorKind kind;
  Arena *arena;         /* where statistics are allocated */
  const int64_t *dims;  /* size of each index id of the query */
  int nindices;         /* number of index ids (<= 64) */
  StatsCache *cache;    /* NULL: compute per call */
  const double *ldims;  /* NULL, or the log of each size (-inf for a size
                           <= 0, stats_log_dims): the uniform estimator
                           sums them for every statistic */
} StatsContext;

/* The ldims of a context of n sizes, in arena a (NULL when out of
 * memory: then logs are taken as needed). */
const double *stats_log_dims(Arena *a, const int64_t *dims, int n);

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

/* Estimated stored entries of C[i,k] = sum(j: A[i,j] * B[j,k]) for
 * bound matrices A (its rows, logical mode a_row, stored first) and B
 * (stored by rows of the contracted mode, its first level dense; b_col
 * is its other, kept mode): the exact row patterns of C for a spread
 * sample of A's rows, scaled to all of them (src/stats/product.c).  Not
 * a bound: an estimate, unbiased over the choice of rows, that sees the
 * correlation of the two patterns (banded, clustered) the uniform
 * estimate cannot.  At most ~262k entries of B read.  -1 when the
 * storage does not allow it, or when too few rows fit that budget. */
double stats_product_nnz(const galley_tensor *A, int a_row,
                         const galley_tensor *B, int b_col);

/* ---- Additions (estimator layer) ---- */

/* Every estimate and every chain-bound weight is clamped to this (no inf,
 * no nan reaches a cost model). */
#define STATS_MAX_ESTIMATE 4611686018427387904.0 /* 2^62 */

/* At most this many degree constraints are derived from one input tensor
 * (chosen deterministically, most informative first). */
#define STATS_MAX_TENSOR_CONSTRAINTS 64

/* Note on stats_map: an argument counts as join-like only when the
 * result fill op(fills...) is itself the annihilator (0 * inf is nan: the
 * shortcut would be wrong).  With join-like arguments present, the
 * union-like ones contribute only their indices (broadcast): intersecting
 * with their union would undercount, e.g. A[i,j] * (B[i,j] + 1) is
 * non-zero wherever A is, whatever B holds. */

/* Number of degree constraints a chain statistic holds (0 for uniform);
 * for tests, explain and debugging. */
int stats_num_constraints(const TensorStats *s);

/* Print a statistic (indices, fill, nnz estimate, constraints) on f. */
void stats_print(const StatsContext *c, const TensorStats *s, FILE *f);

/* ---- Internal to src/stats/ (stats.c, uniform.c, chain.c) ---- */

typedef struct StatsDC {
  IdxSet cond;    /* the conditioning indices X */
  IdxSet counted; /* the counted indices Y (disjoint from cond, non-empty) */
  double d;       /* for each value of cond, at most d values of counted */
} StatsDC;

struct TensorStats {
  IdxSet indices;       /* the index set */
  const int64_t *dims;  /* size of each index id (the context's array) */
  double fill;          /* the value of the entries that are not counted */
  int empty;            /* 1: known to have no non-fill entry at all */
  double lnnz;          /* uniform: natural log of the expected nnz
                           (-inf for 0), at most the log of the space */
  StatsDC *dc;          /* chain: degree constraints, one per key */
  int ndc;              /* number of constraints in dc */
  int cap;              /* allocated length of dc */
  struct ChainMemo *memo; /* chain: bounds already found (chain_bound),
                           emptied by every new constraint; NULL: none */
  uint64_t key;         /* chain: hash of the constraints and the sizes
                           of the indices (chain_key), 0 until made;
                           reset with memo */
};

/* stats.c: shared helpers. */
TensorStats *stats_alloc(const StatsContext *c, IdxSet indices, double fill);
double stats_dense(const int64_t *dims, IdxSet s); /* clamped product */
int stats_same_value(double a, double b);          /* nan equals nan */

/* uniform.c */
double uni_lspace(const StatsContext *c, IdxSet s); /* log product; -inf if 0 */
double uni_log_hit(double lp, double lratio); /* log(1 - (1-p)^r) */
double uni_join(const StatsContext *c, const TensorStats *const *args, int n,
                IdxSet indices);
double uni_union(const StatsContext *c, const TensorStats *const *args, int n,
                 IdxSet indices);
double uni_aggregate(const StatsContext *c, const TensorStats *s, IdxSet keep);
double uni_estimate(const StatsContext *c, const TensorStats *s,
                    IdxSet indices, IdxSet conditional);

/* chain.c */
void chain_add(const StatsContext *c, TensorStats *s, IdxSet cond,
               IdxSet counted, double d);
void chain_from_degree_stats(const StatsContext *c, TensorStats *s,
                             const galley_degree_stats *ds, const int *idx);
void chain_join(const StatsContext *c, TensorStats *out,
                const TensorStats *const *args, int n);
void chain_union(const StatsContext *c, TensorStats *out,
                 const TensorStats *const *args, int n);
void chain_aggregate(const StatsContext *c, TensorStats *out,
                     const TensorStats *s);
void chain_prune(const StatsContext *c, TensorStats *s, int cap);
double chain_bound(const TensorStats *s, IdxSet indices, IdxSet conditional,
                   Arena *scratch, StatsCache *shared);

/* stats.c: chain bounds kept in a StatsCache for every statistic with
 * the same constraints (in the same order) over indices of the same
 * sizes: the optimizers build such statistics again and again (every
 * candidate step, every loop order, every logical query that reads the
 * same inputs), and a bound is a function of the constraints, the sizes
 * and the question alone.  key = chain_key of the statistic.  A table of
 * fixed size: a bound not found is searched again. */
int stats_cache_find_bound(StatsCache *sc, uint64_t key, IdxSet target,
                           IdxSet cond, double *bound);
void stats_cache_keep_bound(StatsCache *sc, uint64_t key, IdxSet target,
                            IdxSet cond, double bound);

#endif /* GALLEY_STATS_H */
