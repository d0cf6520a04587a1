/*
 * api_internal.h -- what the files of the public API share (program.c,
 * explain.c, context.c): the galley_program object.  Not installed.
 */
#ifndef GALLEY_API_INTERNAL_H
#define GALLEY_API_INTERNAL_H

#include "galley.h"
#include "logical.h"
#include "phys.h"
#include "pool.h"
#include "recycle.h"
#include "rt_internal.h"

/* What a plan was made for, per input (the re-run rule of
 * galley_program_run): kernels are valid for any data that agrees on the
 * format, dims and fill; the plan is kept while nnz also stays within a
 * factor of 2, the values stay finite (or not) as they were, and the
 * symmetry stays as it was if the planner looked at it.  Read from the
 * facts the tensor keeps (computed at bind), so that checking costs O(1)
 * per input. */
typedef struct PlanKey {
  galley_format fmt;
  int64_t dims[GALLEY_MAX_ORDER];
  double fill;
  int64_t nnz;                  /* non-fill entries (galley_tensor_nnz) */
  int64_t nnz_lo, nnz_hi;       /* the nnz the plan was made for, or
                                   found the same at (a re-plan that gave
                                   the same source widens them; an
                                   all-dense input's to every nnz): it
                                   fits data within a factor of 2 of
                                   them */
  int finite;                   /* every stored value finite */
  Range range;                  /* its values, coarsened (range_of_facts):
                                   plans rely on value ranges, so data
                                   whose values leave it replans */
  int symmetry;                 /* rt_tensor_symmetry when the planner
                                   asked for it (it was known after
                                   planning), else -1 */
  unsigned w32;                 /* its 32-bit index levels (bit l): the
                                   kernels are compiled for them */
} PlanKey;

/* Adaptive planning (issue 12): what a run learned of one program
 * query's result that a later query reads -- its real nnz against the
 * plan's estimate -- and what came of it.  Kept until the data changes
 * past the re-run rule; every plan made meanwhile uses the real nnz
 * instead of an estimate (OptOptions.actual_nnz). */
typedef enum AdaptOutcome {
  ADAPT_NONE = 0,      /* not looked at */
  ADAPT_WITHIN = 1,    /* the estimate was within ADAPT_FACTOR */
  ADAPT_SAME = 2,      /* off, but the plan with the real facts plans
                          the queries after it the same: the run went
                          on */
  ADAPT_REPLANNED = 3  /* off: the later queries were planned again and
                          the run started again with the new plan */
} AdaptOutcome;

typedef struct AdaptFact {
  AdaptOutcome outcome;
  double est;          /* the estimate of the plan that ran it */
  int64_t nnz;         /* the real non-fill entries */
  Range planned;       /* the values the plan that ran it expected */
  Range range;         /* the real values (coarse, fill included): plans
                          made meanwhile narrow the query's range to
                          them (OptOptions.actual_range) */
  int why;             /* what was off: ADAPT_WHY_* bits */
  int has_degrees;     /* deg holds the result's level degrees */
  rt_level_degrees deg; /* its fibers per level (rt_tensor_level_degrees):
                          plans made meanwhile give the planner its
                          degree constraints (OptOptions.actual_degrees) */
  int range_planned;   /* a plan made since these facts were taken (or
                          one kept from before, which may have been) had
                          range to narrow the query's range with: its
                          runs must check that the values stay inside.
                          Without it the query's planned range follows
                          from the inputs' (the re-run rule checks them)
                          and holds its values: no facts pass is owed */
} AdaptFact;
#define ADAPT_WHY_NNZ 1     /* nnz off by more than ADAPT_FACTOR */
#define ADAPT_WHY_FINITE 2  /* planned as maybe inf or NaN, finite */
#define ADAPT_WHY_LEFT 4    /* left the range measured before */
#define ADAPT_WHY_DEGREE 8  /* a fiber far fuller than its level's
                               entries spread evenly: skewed degrees */

/* The options a plan was made with (a kept plan serves only the same). */
typedef struct PlanOptions {
  galley_planner planner;
  galley_estimator estimator;
  galley_search search;
  int64_t memory_budget;
  int pessimistic, no_split, adapt_off, parts;
} PlanOptions;

/* Earlier plans of the program and their kernels, kept for when the data
 * comes back to facts they were made for (a BFS whose frontier grows and
 * shrinks switches between a push and a pull plan): a plan cache keyed
 * by the inputs' facts (keys[], PlanKey), taken again without planning;
 * and for a re-plan that gives one's source again, whose kernels are
 * taken without compiling.  Up to RECENT_KERNELS, the most recent
 * first.  (plan, lplan and keys may be NULL: kernels alone.) */
#define RECENT_KERNELS 4
typedef struct RecentKernels {
  char *source;
  JitModule *jit;
  void **fns;                   /* per physical query of that plan */
  int nfns;
  galley_backend backend;
  size_t source_len;
  PhysPlan *plan;
  LogicalPlan *lplan;
  PlanKey *keys;                /* per input */
  PlanOptions opts;
} RecentKernels;

struct galley_program {
  Program *prog;                /* the checked program (owns its arena) */
  const galley_tensor **bound;  /* per input: the borrowed tensor or NULL */
  galley_tensor **owned;        /* per input: the bound tensor when the
                                   program owns it (galley_program_bind_
                                   owned), else NULL */
  galley_tensor **results;      /* per query: result of the last run or NULL */
  Recycle recycle;              /* value arrays kept between runs
                                   (src/exec/recycle.h) */
  int *outputs;                 /* the outputs as query numbers, in order */
  int noutputs;
  galley_backend backend;       /* as set; GALLEY_BACKEND_DEFAULT = choose */
  galley_planner planner;       /* how to plan (set_planner) */
  galley_estimator estimator;   /* the cost-based planner's estimator */
  galley_search search;         /* and its elimination-order search */
  int64_t memory_budget;        /* bytes, 0 = the planner's default */
  int threads;                  /* as set, 0 = the default */
  int no_keep;                  /* galley_program_set_keep_invariants(0):
                                   loop-invariant results not kept */
  GalleyPool *pool;             /* the threads runs use (a reference,
                                   shared with the context the program
                                   was made from), or NULL until a run
                                   makes one */
  int64_t block_work;           /* work units per block, 0 = the default
                                   (api_program_set_block_work) */
  char *cache_dir;              /* clang kernel cache, NULL = default */
  int log_level;                /* galley_program_set_log: 0 = no log */
  FILE *log;                    /* borrowed */
  /* The last plan, valid for the data described by key[] (per input),
   * and the logical plan it came from (NULL with the simple planner). */
  PhysPlan *plan;
  LogicalPlan *lplan;
  PlanKey *key;
  PlanOptions plan_opts;        /* the options it was made with */
  char *source;                 /* its kernels' C source (cg_plan) */
  size_t source_len;
  JitModule *jit;               /* the compiled kernels, or NULL */
  galley_backend jit_backend;   /* the backend that compiled them */
  void **fns;                   /* per physical query: its kernel */
  /* The default backend's background clang compile (ensure_tiered), for
   * the source it holds a copy of; kept when it failed, so that it is not
   * started again for that source. */
  JitJob *job;
  int job_logged;               /* its failure was logged */
  int upgraded;                 /* clang code installed since the last run */
  double upgrade_seconds;       /* the wall time of that compile */
  char replan_reason[256];      /* why the last ensure_plan planned */
  int no_split;                 /* plan without exception splitting (for
                                   galleyc compile's driver) */
  int pessimistic;              /* plan without assuming that results the
                                   planner cannot prove finite are: a run
                                   found one that is not (EXEC_ASSUMPTION);
                                   cleared when the data changes */
  /* The bound inputs' statistics (stats.h), kept across plans: planning
   * again after an option changes does not read the data again.  Dropped
   * when an input is bound to another tensor; NULL until the first plan. */
  Arena *stats_arena;
  StatsCache *stats_cache;
  /* What the last run did (galley_program_run_info / _query_info). */
  galley_run_info info;
  galley_query_info *qinfo;     /* info.nqueries entries */
  AdaptFact *actual;            /* per program query (adaptive planning) */
  int64_t facts_passes;         /* results whose facts the adaptive runs
                                   measured (adapt_after), over the
                                   program's life: tests check that a run
                                   whose plan relies on no measured fact
                                   makes none */
  RecentKernels recent[RECENT_KERNELS];
  int adapt_off;                /* no adaptive re-planning (tests compare
                                   plans with and without it) */
  const ExecParts *parts;       /* runs split over processes (issue 15,
                                   set by galleyc under mpirun or by a
                                   context's communicator), or NULL */
  void *dist;                   /* what parts points into when the
                                   program owns it (src/dist/api_dist.c),
                                   freed with the program by dist_free */
  void (*dist_free)(void *dist);
  unsigned char *qinfo_kept;    /* per entry: its result was kept from an
                                   earlier run (loop-invariant: memo_reuse
                                   in program.c), not computed */
  int *qinfo_result;            /* per entry: the program query whose
                                   result (in results[]) is its own, for
                                   an nnz counted only when asked (the
                                   entry's nnz is -1 until then), or -1 */
};

/* Plan for the bound data unless the last plan still fits it (the re-run
 * rule); *replanned (may be NULL) says which.  Every input must be bound
 * (GALLEY_EBIND). */
galley_status api_ensure_plan(galley_program *gp, int *replanned,
                              galley_error *err);

/* explain --analyze: per program query the last runs measured, its
 * estimate, its real nnz and whether it re-planned (adaptive planning),
 * an `analyze: adaptive:` line each. */
void api_print_adaptive(const galley_program *gp, FILE *f);

/* The names of the planning options ("cost", "chain", "greedy", ...). */
const char *api_planner_name(galley_planner planner);

/* GALLEY_OK when this libgalley can run backend, else GALLEY_EINVAL with
 * the reason (an unknown value, tcc not built in). */
galley_status api_check_backend(galley_backend backend, galley_error *err);
const char *api_estimator_name(galley_estimator estimator);
const char *api_search_name(galley_search search);

/* Run p's kernels on pool (a new reference; NULL: make one on the next
 * run) with `threads` threads: what a context hands its programs. */
void api_program_use_pool(galley_program *p, GalleyPool *pool, int threads);

/* The work units per block of every kernel's outermost loop (0: the
 * default, src/exec/blocks.h).  Tests make it small so that small data
 * runs in many blocks; the results do not depend on the thread count
 * for any value. */
void api_program_set_block_work(galley_program *p, int64_t units);

/* Make p's runs distributed over the MPI communicator of Fortran handle
 * fcomm (src/dist/api_dist.c, in MPI builds only). */
typedef galley_status (*api_dist_attach_fn)(galley_program *p, int fcomm,
                                            galley_error *err);

/* Set the context's communicator (GALLEY_NO_COMM: none) and the function
 * that attaches it to each new program: called by
 * galley_context_set_mpi_comm, which lives with the MPI code, so that
 * programs that never set a communicator do not link MPI. */
void api_context_set_comm(galley_context *ctx, int fcomm,
                          api_dist_attach_fn attach);

/* The memory budget in bytes: `bytes` when set (> 0), else half the
 * machine's physical memory. */
int64_t api_memory_budget(int64_t bytes);

#endif /* GALLEY_API_INTERNAL_H */
