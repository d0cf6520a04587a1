/*
 * logical.h -- logical plans (the Galley paper's Fig. 4B dialect) and the
 * optimizers that produce and consume them (issue 5).
 *
 *   Program (input plan) --logical_optimize--> LogicalPlan
 *   LogicalPlan --physical_optimize--> PhysPlan (phys.h), then codegen/JIT
 *
 * A logical query is one aggregate (or none) over a pointwise expression:
 * Query(NAME, Agg(op, reduced..., MapExpr)) where MapExpr is built of
 * ND_MAP / ND_CONST / ND_INPUT / ND_ALIAS nodes (aliases name earlier
 * logical queries by number).  The logical optimizer decides the order in
 * which indices are aggregated (variable elimination), which intermediate
 * each step materializes, and how far pointwise ops are distributed; the
 * physical optimizer then decides loop orders, formats, merges and CSE.
 *
 * Everything a LogicalPlan points to lives in its arena.
 */
#ifndef GALLEY_LOGICAL_H
#define GALLEY_LOGICAL_H

#include "galley.h"
#include "ir.h"
#include "phys.h"
#include "stats.h"

typedef enum SearchKind {
  SEARCH_GREEDY = 0, /* cheapest reducible index first (Galley default) */
  SEARCH_EXACT = 1   /* branch and bound with the greedy cost as bound */
} SearchKind;

/* Options shared by both optimizers; the defaults are {EST_CHAIN,
 * SEARCH_GREEDY, cost constants of cost_defaults()}. */
struct rt_level_degrees; /* rt_internal.h */

typedef struct OptOptions {
  EstimatorKind estimator;
  SearchKind search;
  double cost_compute;     /* a: cost per computed nonzero per index */
  double cost_dense_write; /* b for a dense result, per entry */
  double cost_sparse_write;/* b for a sparse result, per entry */
  double memory_budget;    /* bytes: no dense intermediate larger */
  int assume_finite;       /* plan intermediates the planner cannot prove
                              finite as finite, checked when run
                              (PhysBuilder.assume_finite) */
  int no_split;            /* never split exceptions out (PhysBuilder.
                              no_split: AOT drivers run no correction) */
  const Range *actual_range; /* per program query: the values its result
                              held in an earlier run (coarse, fill
                              included), used to narrow the planner's
                              range when actual_range_known[q]; the run
                              checks that later data stays inside */
  const unsigned char *actual_range_known;
  const double *actual_nnz; /* per program query: the real nnz of its
                              result in an earlier run (adaptive
                              planning, issue 12), used instead of the
                              estimate; < 0 or NULL: unknown */
  const struct rt_level_degrees *actual_degrees; /* per program query:
                              its result's level degrees in an earlier
                              run, when actual_degrees_known[q]; the
                              physical optimizer adds them to the
                              intermediate's statistic as degree
                              constraints */
  const unsigned char *actual_degrees_known;
  StatsCache *stats_cache; /* the inputs' statistics, shared by the
                              logical and physical optimizers (it must
                              outlive both); NULL: each keeps its own */
} OptOptions;

OptOptions opt_defaults(void);

typedef struct LogicalQuery {
  const char *name;   /* the program query's name, or "_lN" */
  int user_query;     /* the program query it realizes, or -1 */
  int nindices;       /* the query's indices (ids used by nodes) */
  Index *indices;     /* with bound sizes */
  int nout;           /* output indices, in the result's logical order */
  int *out;
  const Op *agg;      /* NULL when nothing is reduced */
  int factored_input; /* 1 + the input distributed into the sum while it
                         holds a few non-finite values (split_inline in
                         optimize.c), else 0 */
  int nred;
  int *red;
  Node *expr;         /* Map / Const / Input / Alias(logical query #) */
  double est_nnz;     /* estimated non-fill entries of the result */
  double cost;        /* estimated cost of computing it */
  double out_fill;
} LogicalQuery;

typedef struct LogicalPlan {
  Arena *arena;
  const Program *prog;
  int nq;
  LogicalQuery *q;
  int noutputs;
  int *outputs;             /* logical query numbers of the outputs */
  const char **output_names;
} LogicalPlan;

/* The logical optimizer: normalization, annotated expression trees,
 * elimination order (greedy or exact), pointwise distributivity, cost
 * model, from the statistics of the bound inputs.  Deterministic.
 * GALLEY_EBIND for data that does not fit (the evaluator's messages). */
galley_status logical_optimize(const Program *p,
                               const galley_tensor *const *inputs,
                               const OptOptions *opt, LogicalPlan **out,
                               galley_error *err);

/* The trivial logical plan: every nested aggregate lifted into its own
 * query, nothing reordered (what phys_default_plan does first). */
galley_status logical_lift(const Program *p, const galley_tensor *const *inputs,
                           LogicalPlan **out, galley_error *err);

void logical_plan_free(LogicalPlan *lp);

/* Print in the paper's notation with estimates, one query a line:
 *   Query(A0[i,k], Agg(+, j, Map(*, A[i,j], B[j,k]))) est 1234 cost 5678 */
void logical_print(const LogicalPlan *lp, FILE *f);

/* The physical optimizer: loop order (greedy, then branch-and-bound DP
 * over prefix sets with transposition costs), output formats per level
 * from estimated fill fractions and write patterns within the memory
 * budget, merges (the conjunct with the smallest expected fan-out leads),
 * intermediates written in their consumer's order, CSE over canonical
 * hashes.  Deterministic. */
galley_status physical_optimize(const LogicalPlan *lp,
                                const galley_tensor *const *inputs,
                                const OptOptions *opt, PhysPlan **out,
                                galley_error *err);

#endif /* GALLEY_LOGICAL_H */
