/*
 * run.h -- the first distributed plan (issue 15): every process holds
 * the inputs whole (broadcast from rank 0), runs each query's kernel on
 * its block of the outermost loop -- the blocks cut by work -- and the
 * blocks are recombined as the query's partition record says
 * (PhysQuery.part):
 *   DISJOINT, CONCAT  each rank's entries of its block, concatenated in
 *                     rank (= coordinate) order;
 *   REDUCE            each rank's partial result, folded with the
 *                     aggregate in rank order (so the answer never
 *                     depends on timing).
 * A result a later query reads goes to every rank (allgather); a result
 * only returned goes to rank 0 (gather).  A query that cannot be split
 * soundly (no loop, a transpose, an aggregate whose start value is not
 * its identity) runs whole on every rank.  A matrix multiply whose join
 * (join.h: a grid of the ranks chosen by the cost model) is estimated to
 * send fewer bytes than the cut runs as a join step instead: its kernel
 * gets an empty block and finish runs the grid and gathers C.  Every step ends with a status
 * agreement (dist_agree), so a failing rank stops all of them.
 *
 * The executor calls this layer through ExecParts (phys.h); the kernels
 * and their code are the single-process ones.
 */
#ifndef GALLEY_DIST_RUN_H
#define GALLEY_DIST_RUN_H

#include <stdio.h>

#include "comm.h"
#include "join.h"
#include "phys.h"

/* What one query's distributed step did or is expected to do. */
typedef struct DistStep {
  int split;          /* the outermost loop was cut across ranks */
  int to_all;         /* the result went to every rank (else rank 0) */
  int kept;           /* the result stayed in row blocks (keep_blocks) */
  int64_t lo, hi;     /* this rank's block */
  double est_bytes;   /* estimated bytes all ranks send for the step */
  int64_t bytes;      /* measured bytes this rank sent (-1: not run) */
  double seconds;     /* this rank's time recombining the blocks (or
                         running the join) */
  int joinable;       /* a matrix multiply whose join was planned */
  int plan_failed;    /* ... and planning it failed (out of memory) */
  double join_est;    /* its best grid's estimated bytes (and C's gather) */
  double cut_est;     /* the loop cut's (INFINITY: not cut soundly) */
  double join_time, cut_time; /* the modelled seconds of each (the
                         busiest rank's received bytes at 10 Gb/s plus
                         its multiply-adds at 1e9/s): the smaller runs */
  int join;           /* run by the join's grid (fewer bytes, or forced) */
  DistJoinRun jr;     /* ... what it chose, estimated and measured
                         (jr.result not kept) */
} DistStep;

/* What part_range decided for one query, kept for the next runs over
 * the same inputs (the same tensors, the same stored entries): pricing
 * the join's grids samples the factors and weighing the rows walks
 * them, O(nnz) each, which a repeated run need not pay again.  Only
 * decisions are kept, never data: a stale entry (inputs changed in place
 * without a new tensor) may cut less evenly or pick another grid, but
 * every cut of [0, dim) and every grid gives the same result. */
typedef struct DistMemo {
  int valid;
  int nacc;
#define DIST_MEMO_ACC 16 /* queries of more accesses are not kept */
  const galley_tensor *in[DIST_MEMO_ACC]; /* by access */
  int64_t stored[DIST_MEMO_ACC];
  const void *arrays[DIST_MEMO_ACC][3]; /* its values' and first list's
                         arrays: a tensor freed and another made at the
                         same address rarely has them at the same place */
  unsigned long forcing; /* the query's shape, GALLEY_DIST_GRID's and
                         GALLEY_DIST_JOIN's settings when made */
  int64_t dim;        /* the outermost loop's size */
  int to_all;
  int join;           /* run by the join's grid */
  int joinable;       /* a matrix multiply whose grids were priced */
  double join_est, cut_est, join_time, cut_time;
  DistGrid chosen;    /* the join's priced grids: the choice, */
  DistCost cost;      /* ... the grid to run, */
  double est_gather;  /* ... its gather */
  int forced;
  int64_t *bounds;    /* the loop cut into P blocks (P + 1), or NULL */
} DistMemo;

typedef struct DistRun {
  DistComm *c;
  ExecParts parts;    /* the executor's hooks, ctx = this */
  const PhysPlan *pp; /* the plan of the last run (borrowed) */
  int nsteps;
  DistStep *steps;    /* per physical query */
  int fault_rank;     /* GALLEY_DIST_FAULT: the rank that fails, or -1 */
  int fault_query;    /* ... after this query (or -1: at the end) */
  int fault_kill;     /* ... by dying of SIGKILL instead of an error */
  int keep_blocks;    /* a returned result (one no later query reads) cut
                         by rows stays in its blocks: each rank's result
                         holds its own rows (global coordinates, whole
                         dimensions), nothing is gathered -- as PETSc
                         leaves a product distributed */
  int all_results;    /* every result goes to every rank (the C API),
                         not only those a later query reads */
  DistJoinPlan plan;  /* the join step under way (range to finish) */
  int no_join;        /* GALLEY_DIST_JOIN=0: matrix multiplies cut by
                         rows like every kernel */
  DistMemo *memo;     /* per query of the last plan's size */
  DistKernels *kernels; /* the join's tile kernel, compiled once */
  int nmemo;
  int always_join;    /* GALLEY_DIST_JOIN=1: by the join's grid even when
                         the cut sends fewer bytes */
} DistRun;

/* Set up run's hooks over communicator c.  The environment variable
 * GALLEY_DIST_FAULT=RANK[:QUERY[:kill]] makes rank RANK fail after
 * physical query QUERY (a testing aid for the fault handling). */
void dist_run_init(DistRun *run, DistComm *c);
void dist_run_free(DistRun *run);

/* The estimated bytes of each step of plan pp over c->size ranks. */
galley_status dist_run_estimate(DistRun *run, const PhysPlan *pp,
                                galley_error *err);

/* How the inputs were read (read.h): files parsed in byte ranges by
 * every rank, files read by rank 0 and broadcast, and the bytes all
 * ranks sent doing it. */
typedef struct DistInputs {
  int split, whole;
  int64_t bytes;
} DistInputs;

/* Print the distributed plan: one line per step with its estimated bytes
 * (and, measured 1, the bytes measured by the last run, summed over the
 * ranks: collective); under a matrix multiply step, the grids of the
 * implementation algebra's join and the cost model's choice (join.h;
 * inputs: the bound inputs by number, or NULL). */
void dist_run_print(DistRun *run, const PhysPlan *pp, int measured,
                    const DistInputs *in, const galley_tensor *const *inputs,
                    FILE *f);

/* Summed over ranks: the measured bytes of step n (collective). */
int64_t dist_run_step_bytes(DistRun *run, int n);

#endif /* GALLEY_DIST_RUN_H */
