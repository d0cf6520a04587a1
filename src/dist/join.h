/*
 * join.h -- the implementation algebra's join of two matrices on MPI
 * (issue 15): C[i, k] = sum(j: A[i, j] * B[j, k]) over a grid of
 * pi x pj x pk = P ranks, with the cost model that chooses the grid, and
 * the two-phase aggregation rewrite (TRA Table 2, R2-5).
 *
 * Rank (I, J, K) of the grid joins the tile A[I, J] with the tile
 * B[J, K] by the existing compiled kernels (a galley program on the
 * tiles, in tile-local coordinates), so one grid covers TRA's methods:
 *   pi = P           BMM: A in 1D row blocks, B broadcast (replicated)
 *   pk = P           BMM: B in 1D column blocks, A broadcast
 *   pj = P           CMM: both co-partitioned on j by a shuffle, the
 *                    partial products aggregated by a shuffle on (i, k)
 *   pj = 1           2D blocks of C (pi x pk), A's row blocks and B's
 *                    column blocks replicated along the grid's rows and
 *                    columns
 *   otherwise        RMM: TRA's replication-based (3D) multiply.
 * A tile is sent to the pk ranks (B's to the pi ranks) that need it: the
 * replication.  Partial products (pj > 1) are aggregated locally by the
 * kernel before they are shuffled to rank (I, 0, K) (rule R2-5) and
 * folded there.  The inputs come as row-block relations (relation.h, as
 * read or scattered); the result stays in 2D blocks on the ranks
 * (I, 0, K).  Tiles travel as CSR messages (a header, a count per row,
 * each entry's value and 32-bit column: join.c) that the receiver lays
 * end to end with no sort; the partial products of one tile are merged
 * row by row and summed in rank order.  The tile kernel is compiled once
 * per process when the caller keeps a DistKernels (clang through the
 * kernel cache that processes share safely).
 *
 * The cost model (dist_matmul_cost) predicts every phase's bytes from
 * estimated tile sizes: the input tiles from the relations' tile
 * statistics (each row block's nonzeros per block of columns, counted
 * once per grid width when the relations are described; a row block's
 * rows share them uniformly), the partial products from
 * the estimators of src/stats (uniform, or the chain bound with the
 * tiles' degree constraints) -- never from dense sizes -- plus the
 * counts every shuffle exchanges.  For dense tiles the prediction is
 * exact.  It also estimates each rank's multiply-adds; the planner takes
 * the grid with the fewest bytes among those whose busiest rank's
 * multiply-adds (at 1e9/s) take at most twice the best grid's modelled
 * time (its busiest rank's received bytes at 10 Gb/s plus multiply-adds)
 * -- so no rank is left with the whole of a join big enough for it to
 * matter.
 */
#ifndef GALLEY_DIST_JOIN_H
#define GALLEY_DIST_JOIN_H

#include <stdint.h>
#include <stdio.h>

#include "comm.h"
#include "phys.h"
#include "relation.h"

typedef struct DistGrid {
  int pi, pj, pk;
} DistGrid;

/* The method a grid is ("BMM rows", "BMM cols", "CMM", "2D", "RMM"). */
const char *dist_grid_method(DistGrid g);

/* Every grid of P ranks (pi * pj * pk = P), at most max: how many. */
int dist_grids(int P, DistGrid *out, int max);

/* What the cost model knows of the inputs: the shapes, and each rank's
 * row block (bounds, P + 1 entries) and its nonzeros (P entries). */
/* Sampled rows of whole factors (join.c): exact symbolic products of a
 * few rows of each row block, scaled, for the tiles' estimates. */
typedef struct DistJoinSample DistJoinSample;
DistJoinSample *dist_join_sample_new(const galley_tensor *a,
                                     const galley_tensor *b);
void dist_join_sample_free(DistJoinSample *s);

typedef struct DistMatmulIn {
  int P;
  int64_t m, n, p; /* A is m x n, B is n x p */
  const int64_t *a_bounds, *a_nnz;
  const int64_t *b_bounds, *b_nnz;
  int64_t a_maxdeg[2], b_maxdeg[2]; /* chain: the most entries in a row,
                                       in a column (0: unknown) */
  /* Optional, the relations' tile statistics: for each q dividing P,
   * a_cols[q][s * q + b] = the entries of rank s's row block of A in
   * column block b of q equal blocks (b_cols: of B); NULL entries or
   * arrays: spread uniformly over the columns instead. */
  int64_t **a_cols, **b_cols;
  int chain;       /* estimate partial products with the chain bound */
  int gather;      /* the plan counts C's gather too: 1 to rank 0, 2 to
                      every rank (0: the grid's phases only) */
  DistJoinSample *sample; /* optional: the partial products and C's
                             tiles from sampled rows (not freed with in) */
} DistMatmulIn;

typedef struct DistCost {
  DistGrid g;
  double bytes_a, bytes_b, bytes_c; /* each phase's bytes, all ranks */
  double bytes;                     /* their sum */
  double flops, max_flops;          /* multiply-adds: all, largest rank */
  double max_recv;                  /* bytes the busiest rank receives */
  double seconds; /* modelled: max_recv at 10 Gb/s + max_flops at 1e9/s */
  double nnz_c;      /* C's estimated nonzeros, and those of the tile */
  double nnz_c_root; /* on rank 0 (which a gather to rank 0 keeps) */
  double c_head, c_head_root; /* C's tiles' message headers and row
                                 counts: all, rank 0's */
  int64_t p;         /* C's columns */
} DistCost;

/* The estimated bytes of gathering C (nonzeros nnz_c, nnz_c_root of
 * them on rank 0) once from its tiles to rank 0 (to_all 0) or to every
 * rank, over P ranks. */
double dist_gather_cost(const DistCost *k, int P, int to_all);

/* The estimated cost of grid g. */
void dist_matmul_cost(const DistMatmulIn *in, DistGrid g, DistCost *out);

/* The costs of every grid (costs: room for 64) and the index of the
 * planner's choice: the fewest bytes (with in->gather, C's gather
 * included) among the grids whose busiest rank's multiply-adds take at
 * most twice the best modelled time. */
int dist_matmul_plan(const DistMatmulIn *in, DistCost *costs, int *n);

/* The inputs' description (collective): the bounds of the row-block
 * relations and every rank's nonzeros.  Frees nothing of a or b;
 * dist_matmul_in_free frees what it allocated. */
galley_status dist_matmul_in(DistComm *c, const DistRelation *a,
                             const DistRelation *b, DistMatmulIn *in,
                             galley_error *err);
void dist_matmul_in_free(DistMatmulIn *in);

/* A result: this rank's 2D block of C (NULL when the rank holds none)
 * and where it lies. */
typedef struct DistMatmulOut {
  DistGrid g;
  int64_t dims[2];
  galley_tensor *tile; /* tile-local coordinates */
  int64_t i_lo, k_lo;  /* the tile's first row and column */
  int64_t bytes_a, bytes_b, bytes_c; /* measured, summed over ranks */
} DistMatmulOut;

/* The compiled tile kernels a process keeps between joins (NULL where
 * taken: a program made, run with tcc and freed every time). */
typedef struct DistKernels DistKernels;
DistKernels *dist_kernels_new(void);
void dist_kernels_free(DistKernels *k);

/* C = A B over grid g (collective).  a and b are row-block relations
 * (key 0) of matrices of matching inner size; kern may be NULL. */
galley_status dist_matmul(DistComm *c, const DistRelation *a,
                          const DistRelation *b, DistGrid g,
                          DistKernels *kern, DistMatmulOut *out,
                          galley_error *err);

/* The whole C at root (*out; NULL elsewhere), for checks (collective). */
galley_status dist_matmul_gather(DistComm *c, const DistMatmulOut *r,
                                 int root, galley_tensor **out,
                                 galley_error *err);

void dist_matmul_out_free(DistMatmulOut *r);

/* ---- aggregation (TRA's Sigma over a shuffle) ----
 * The sum over `mode` of a matrix relation (any partitioning: each rank
 * holds some entries in global coordinates), grouped by the other mode,
 * shuffled to the rank owning that coordinate in equal blocks.
 * local_first 0: SHUF then Sigma (each entry travels); 1: rule R2-5,
 * Sigma, SHUF, Sigma (each rank's partial sums travel).  Both give the
 * same vector (exactly for integer values).  *mine: this rank's block
 * (global coordinates) as a vector of length dims[other]. */
galley_status dist_sum_rows(DistComm *c, const galley_tensor *t,
                            int mode, int local_first,
                            galley_tensor **mine, int64_t *bytes,
                            galley_error *err);



/* The rules an aggregation over a relation may use (TRA Table 2). */
#define DIST_RULE_R2_4 1u /* no shuffle when the relation is partitioned
                             by the group-by key already */
#define DIST_RULE_R2_5 2u /* Sigma, SHUF, Sigma instead of SHUF, Sigma */

/* The sum over `mode` of a matrix relation rel (partitioned by either
 * mode, tile-local coordinates), grouped by the other mode (collective):
 * with no rules, each entry is shuffled to the owner of its group (equal
 * blocks) and summed there; with R2_5 each rank sums first (as
 * dist_sum_rows); with R2_4, when rel is partitioned by the group-by
 * mode, each rank sums its own whole groups and nothing moves.  *mine:
 * this rank's sums (global coordinates) as a vector of length
 * dims[other]; their union over the ranks is the same vector under every
 * rule (exactly, for integer values).  *bytes: sent, summed over ranks. */
galley_status dist_sum_relation(DistComm *c, const DistRelation *rel,
                                int mode, unsigned rules,
                                galley_tensor **mine, int64_t *bytes,
                                galley_error *err);

/* ---- the run: a matrix multiply query by the chosen grid ---- */

/* Whether query n of pp is C[i, k] = sum(j: A[i, j] * B[j, k]) with a
 * result of fill 0 and no split accesses, either factor possibly read
 * transposed (A[j, i], B[k, j]): the accesses of A and B, and which are
 * transposed. */
typedef struct DistJoinFactors {
  int xa, xb;
  int trans_a, trans_b;
} DistJoinFactors;
int dist_join_factors(const PhysPlan *pp, int n, DistJoinFactors *f);

/* The plan of a join step, made on every rank alike from the whole
 * factors without communication: each factor cut into row blocks by
 * work, each block's nonzeros and column histograms counted, the partial
 * products from sampled rows, every grid priced (C's gather counted) and
 * the cost model's grid chosen (GALLEY_DIST_GRID=PIxPJxPK forces
 * another). */
typedef struct DistJoinPlan {
  DistGrid chosen;          /* the cost model's choice */
  int forced;               /* cost is GALLEY_DIST_GRID's grid */
  DistCost cost;            /* the grid to run */
  double est_gather;        /* C's gather, estimated */
  const galley_tensor *a, *b; /* A and B as multiplied (borrowed, or at,
                                 bt: the transposes made) */
  galley_tensor *at, *bt;
  int64_t *bounds;          /* A's row blocks (P + 1), then B's */
} DistJoinPlan;

/* The grids' prices of an earlier plan over the same factors. */
typedef struct DistJoinKnown {
  DistGrid chosen;
  DistCost cost;
  int forced;
} DistJoinKnown;

/* Plan C = A B over P ranks (a, b whole; fill 0; trans_a: a holds A's
 * transpose, made here); to_all: C goes to every rank, else rank 0.
 * known (may be NULL): take its grid and prices instead of counting and
 * sampling the factors again (the row blocks are cut all the same). */
galley_status dist_join_plan(int P, const galley_tensor *a,
                             const galley_tensor *b, int trans_a,
                             int trans_b, int to_all,
                             const DistJoinKnown *known, DistJoinPlan *out,
                             galley_error *err);
void dist_join_plan_free(DistJoinPlan *p);

typedef struct DistJoinRun {
  DistGrid chosen;       /* the cost model's choice */
  DistCost cost;         /* the grid run: the choice, or GALLEY_DIST_GRID */
  double est_gather;     /* the estimated bytes of gathering C */
  int64_t bytes_join;    /* measured, summed over ranks: the grid's
                            phases (A, B, partial C), */
  int64_t bytes_gather;  /* the gather of C */
  galley_tensor *result; /* C whole (rank 0, or every rank), else NULL */
} DistJoinRun;

/* Run a join step's plan (collective): each rank takes its row blocks of
 * the whole factors (no bytes), the grid runs (dist_matmul: tiles
 * shuffled, the compiled kernel on matched tiles, partial products
 * aggregated locally before their shuffle; kern keeps the tile kernel,
 * may be NULL), and C is gathered once, to rank 0 or (to_all) to every
 * rank. */
galley_status dist_join_run(DistComm *c, const DistJoinPlan *plan,
                            int to_all, DistKernels *kern, DistJoinRun *out,
                            galley_error *err);

/* ---- explain: the grid a query would take ---- */

/* When query n of pp is a matrix multiply (C[i, k] = sum(j: A[i, j] *
 * B[j, k]), in either order of the factors), print the cost model's
 * grids for it -- the inputs as row blocks cut by work, each grid's
 * estimated bytes per phase, multiply-adds and largest per-rank load,
 * the planner's choice marked -- and, when measured (and both factors
 * are bound inputs, inputs[k] by input number), run the chosen grid
 * and print its measured bytes.  Collective when measured; f NULL on
 * the ranks that do not print. */
void dist_join_explain(DistComm *c, const PhysPlan *pp, int n,
                       const galley_tensor *const *inputs, int measured,
                       FILE *f);

/* b bytes as explain prints them ("812 B", "45.3 kB", "12.1 MB") in
 * buf[size], which it returns. */
const char *dist_bytes_text(double b, char *buf, size_t size);

#endif /* GALLEY_DIST_JOIN_H */
