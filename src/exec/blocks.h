/*
 * blocks.h -- the blocks a kernel's outermost loop is split into for
 * threads (PhysQuery.part): coordinate ranges [cut[b], cut[b + 1]) of
 * about equal work.
 *
 * The split depends only on the query and its data -- never on the
 * number of threads -- so that every thread count computes every block,
 * and combines the blocks, the same way: results are bitwise identical
 * for 1, 2 or 64 threads.
 *
 * Work is measured on the access that the outermost loop walks (its first
 * level reads the loop's index) and that stores the most: one unit per
 * position of its first level (the loop's iterations) plus one per stored
 * entry under them.  When the next loop's index leads a sparse matrix
 * (B[j,k] in Gustavson's C[i,k] = A[i,j] * B[j,k]), each entry (i, j)
 * weighs also the length of B's fiber j: the multiplies of row i.
 */
#ifndef GALLEY_BLOCKS_H
#define GALLEY_BLOCKS_H

#include "phys.h"

/* Work units per block: large enough that a block's fixed costs (a call,
 * a lower bound per walk, a sink) vanish, small enough that 2..64 threads
 * balance on matrices of a million entries. */
#define EXEC_BLOCK_WORK ((int64_t)1 << 14)

/* At most this many blocks per kernel. */
#define EXEC_MAX_BLOCKS ((int64_t)1 << 12)

/* A kernel of one block runs on the caller alone, and one of fewer than
 * EXEC_WAKE_BLOCKS blocks only on the caller and the workers still awake
 * from the previous job, never waking a sleeping one (a wake-up takes tens of
 * microseconds on a loaded machine).  Either way the blocks, and so the
 * results, are the same. */
#define EXEC_WAKE_BLOCKS 4

typedef struct ExecBlocks {
  int64_t n;    /* blocks, >= 1 */
  int64_t *cut; /* n + 1 increasing coordinates: cut[0] = lo, cut[n] = hi */
} ExecBlocks;

/* What a split measured (explain prints it). */
typedef enum BlocksMeasure {
  BLOCKS_COORDINATES = 0, /* no access walks the loop: a unit a coordinate */
  BLOCKS_ENTRIES = 1,     /* the walked access: a unit per position of its
                             first level and per entry under them */
  BLOCKS_MULTIPLIES = 2   /* entry (i, j) of the walked matrix weighs 1 +
                             the length of fiber j of the `times` access */
} BlocksMeasure;

typedef struct BlocksHow {
  BlocksMeasure measure;
  int access;   /* the walked access, or -1 (BLOCKS_COORDINATES) */
  int times;    /* BLOCKS_MULTIPLIES: the access whose fibers weigh */
  int64_t work; /* units of work in [lo, hi) (coordinates when the split
                   was not measured: one block by max_blocks) */
} BlocksHow;

/* Split [lo, hi) of q's outermost loop into at most max_blocks blocks of
 * about block_work units each (max_blocks 1: one block).  in[] are the
 * access tensors.  how (may be NULL): what measured the work.  0, or -1
 * when out of memory (*out then holds nothing to free). */
int blocks_plan_how(const PhysQuery *q, const galley_tensor *const *in,
                    int64_t lo, int64_t hi, int64_t block_work,
                    int64_t max_blocks, ExecBlocks *out, BlocksHow *how);

/* blocks_plan_how without how, weighing the work on pool's threads (NULL:
 * the caller's; the split is the same either way). */
struct GalleyPool;
int blocks_plan(struct GalleyPool *pool, const PhysQuery *q,
                const galley_tensor *const *in, int64_t lo, int64_t hi,
                int64_t block_work, int64_t max_blocks, ExecBlocks *out);

/* The work of one block of q's outermost loop: block_work, or for a
 * reduction whose blocks after the first each fill and fold a partial
 * result of `cells` values, at least twice that -- a block must do more
 * work than its partial result costs (Bellman-Ford's push step over a
 * 258k-vertex graph made 33 partial vectors for 1.3M edges and spent
 * 200 ms on them).  Data only: the same for every thread count. */
int64_t blocks_unit_work(const PhysQuery *q, int64_t block_work,
                         double cells);

/* The most blocks q's outermost loop may split into on `threads`
 * threads: 1 when it has no loop or may not be split; a concatenated
 * result one block on one thread (no copy of its entries), 8 per thread
 * on more; a reduction into a dense result of `cells` values only as far
 * as the partial results (one per block after the first) fit 64 MiB and
 * a quarter of memory_budget (0: none). */
int64_t blocks_max(const PhysQuery *q, double cells, double memory_budget,
                   int threads);

/* Whether every access that blocks_plan may measure q's work on has its
 * tensor in in[] (NULL: not known yet -- an intermediate, before the
 * run); when not, *missing is one such access. */
int blocks_known(const PhysQuery *q, const galley_tensor *const *in,
                 int *missing);

void blocks_free(ExecBlocks *b);

#endif /* GALLEY_BLOCKS_H */
