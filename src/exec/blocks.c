/*
 * blocks.c -- split a kernel's outermost loop into blocks of about equal
 * work, independently of the thread count (see blocks.h).
 *
 * The cut by work itself (W(c), its quantiles by binary search, the
 * weights of multiplies) is runtime/galley_rt_blocks.h, which the
 * ahead-of-time runtime embeds too; here the accesses it measures are
 * picked from the physical plan.
 */
#include <stdlib.h>

#include "blocks.h"
#include "galley_rt_blocks.h"
#include "pool.h"
#include "rt_internal.h"

void blocks_free(ExecBlocks *b) {
  free(b->cut);
  b->cut = NULL;
  b->n = 0;
}

/* Whether t has a sorted-list level: its pattern, not its size, says
 * where the work is. */
static int has_list(const galley_tensor *t) {
  for (int l = 0; l < t->order; l++)
    if (t->lvl[l].kind == GALLEY_RT_LIST)
      return 1;
  return 0;
}

/* The access whose first level the outermost loop reads, dense or a
 * sorted list: a sparse one before a dense one (SDDMM's S, not its
 * dense factor U), then the one storing the most values; -1 when none. */
static int work_access(const PhysQuery *q, const galley_tensor *const *in) {
  int best = -1;
  for (int x = 0; x < q->nacc; x++) {
    const PAccess *A = &q->acc[x];
    const galley_tensor *t = in[x];
    if (A->order < 1 || A->level_idx[0] != q->loops[0] || !t)
      continue;
    int k = t->lvl[0].kind;
    if (k != GALLEY_RT_DENSE && k != GALLEY_RT_LIST)
      continue;
    if (best < 0 || has_list(t) > has_list(in[best]) ||
        (has_list(t) == has_list(in[best]) && t->nval > in[best]->nval))
      best = x;
  }
  return best;
}

/* Rows of the weighted work summed by one pool job. */
#define PREFIX_CHUNK ((int64_t)1 << 12)

/* galley_rt_multiply_prefix's array, made in chunks of rows on a pool:
 * each chunk first sums its own rows, then adds the work of the chunks
 * before it (integer sums: the same however they run). */
typedef struct Weigh {
  const galley_level *A1, *B1; /* A's second level, B's second level */
  int64_t rows, bdim;
  int64_t *w;    /* w[p + 1]: the work of rows [0, p] (after both jobs) */
  int64_t *base; /* per chunk: the work before it */
} Weigh;

static void weigh_task(void *ctx, int64_t c, int thread) {
  (void)thread;
  const Weigh *g = ctx;
  int64_t lo = c * PREFIX_CHUNK, hi = lo + PREFIX_CHUNK;
  if (hi > g->rows)
    hi = g->rows;
  int64_t acc = 0;
  for (int64_t p = lo; p < hi; p++) {
    int64_t sum = 1;
    for (int64_t e = galley_rt_pos(g->A1, p); e < galley_rt_pos(g->A1, p + 1);
         e++) {
      int64_t j = galley_rt_crd(g->A1, e);
      sum += 1;
      if (j >= 0 && j < g->bdim)
        sum += galley_rt_pos(g->B1, j + 1) - galley_rt_pos(g->B1, j);
    }
    acc += sum;
    g->w[p + 1] = acc;
  }
  g->base[c + 1] = acc;
}

static void rebase_task(void *ctx, int64_t c, int thread) {
  (void)thread;
  const Weigh *g = ctx;
  int64_t lo = c * PREFIX_CHUNK, hi = lo + PREFIX_CHUNK;
  if (hi > g->rows)
    hi = g->rows;
  for (int64_t p = lo; p < hi; p++)
    g->w[p + 1] += g->base[c];
}

/* galley_rt_multiply_prefix(ta, tb), weighed on pool when the matrix is
 * big enough to pay for waking it (pool may be NULL). */
static int64_t *weigh_on(GalleyPool *pool, const galley_tensor *ta,
                         const galley_tensor *tb) {
  int64_t rows = galley_rt_level0_positions(ta);
  if (!pool || rows < 2 * PREFIX_CHUNK)
    return galley_rt_multiply_prefix(ta, tb);
  int64_t chunks = (rows + PREFIX_CHUNK - 1) / PREFIX_CHUNK;
  Weigh g = {.A1 = &ta->lvl[1], .B1 = &tb->lvl[1], .rows = rows,
             .bdim = tb->lvl[0].dim};
  g.w = malloc((size_t)(rows + 1) * sizeof *g.w);
  g.base = calloc((size_t)chunks + 1, sizeof *g.base);
  if (!g.w || !g.base) {
    free(g.w);
    free(g.base);
    return NULL;
  }
  g.w[0] = 0;
  int wake = rows >= 8 * PREFIX_CHUNK;
  pool_run_ex(pool, chunks, weigh_task, &g, wake);
  for (int64_t c = 0; c < chunks; c++)
    g.base[c + 1] += g.base[c];
  pool_run_ex(pool, chunks, rebase_task, &g, wake);
  free(g.base);
  return g.w;
}

/* The weighted work: for the matrix x = A[i,j] (a list second level)
 * and a matrix y = B[j,k] read by the next loop (a dense first level over
 * a list), each entry (i, j) weighs 1 + the length of B's fiber j.
 * *out[p] for p in [0, level-0 positions] is the work before position p,
 * and *times is y.  With `keep`, the array is kept with A for the next
 * run (and taken from it: *kept 1, not the caller's to free); else it is
 * the caller's (*kept 0).  0 when there is no such pair (*out NULL), -1
 * when out of memory. */
static int multiply_prefix(GalleyPool *pool, const PhysQuery *q,
                           const galley_tensor *const *in, int x, int keep,
                           int64_t **out, int *times, int *kept) {
  *out = NULL;
  *kept = 0;
  const PAccess *A = &q->acc[x];
  const galley_tensor *ta = in[x];
  if (q->nloops < 2 || A->order != 2 || A->level_idx[1] != q->loops[1] ||
      ta->lvl[1].kind != GALLEY_RT_LIST)
    return 0;
  int y = -1;
  for (int k = 0; k < q->nacc && y < 0; k++) {
    const PAccess *B = &q->acc[k];
    if (k == x || B->order < 2 || B->level_idx[0] != q->loops[1] || !in[k])
      continue;
    const galley_tensor *tb = in[k];
    if (tb->lvl[0].kind == GALLEY_RT_DENSE &&
        tb->lvl[1].kind == GALLEY_RT_LIST)
      y = k;
  }
  if (y < 0)
    return 0;
  *times = y;
  int64_t n = galley_rt_level0_positions(ta) + 1;
  const int64_t *old = keep ? rt_tensor_kept_weights(ta, in[y], n) : NULL;
  if (old) {
    *out = (int64_t *)old;
    *kept = 1;
    return 0;
  }
  int64_t *w = weigh_on(pool, ta, in[y]);
  if (!w)
    return -1;
  *kept = keep && rt_tensor_keep_weights(ta, in[y], w, n);
  *out = w;
  return 0;
}

/* blocks_plan_how, with the work weighed on pool (may be NULL). */
static int plan_on(GalleyPool *pool, const PhysQuery *q,
                   const galley_tensor *const *in, int64_t lo, int64_t hi,
                   int64_t block_work, int64_t max_blocks, ExecBlocks *out,
                   BlocksHow *how) {
  BlocksHow own;
  if (!how)
    how = &own;
  *how = (BlocksHow){BLOCKS_COORDINATES, -1, -1, hi - lo};
  out->n = 1;
  out->cut = malloc(2 * sizeof *out->cut);
  if (!out->cut)
    return -1;
  out->cut[0] = lo;
  out->cut[1] = hi;
  if (max_blocks <= 1 || hi - lo <= 1 || q->nloops < 1 || block_work < 1)
    return 0;
  galley_rt_work w = {0};
  int64_t *prefix = NULL;
  int kept = 0;
  int x = work_access(q, in);
  if (x >= 0) {
    w.t = in[x];
    int y = -1;
    /* a concatenated result is the same however its loop is cut, so a
     * stale kept weighing (rt_tensor_kept_weights) could only unbalance
     * it: its weights are kept with the matrix, and a product of bound
     * matrices weighs its rows once, not at every run */
    int keep = pool && q->part.combine == PART_CONCAT;
    if (multiply_prefix(pool, q, in, x, keep, &prefix, &y, &kept) != 0) {
      blocks_free(out);
      return -1;
    }
    w.prefix = prefix;
    how->measure = prefix ? BLOCKS_MULTIPLIES : BLOCKS_ENTRIES;
    how->access = x;
    how->times = prefix ? y : -1;
  }
  int64_t base, total;
  int64_t n = galley_rt_blocks_count(
      &w, lo, hi, block_work,
      max_blocks < EXEC_MAX_BLOCKS ? max_blocks : EXEC_MAX_BLOCKS, &base,
      &total);
  how->work = total;
  int64_t *cut = n > 1 ? realloc(out->cut, (size_t)(n + 1) * sizeof *cut)
                       : out->cut;
  if (n > 1 && cut) {
    out->cut = cut;
    out->n = galley_rt_blocks_cut(&w, lo, hi, base, total, n, cut);
  }
  if (!kept)
    free(prefix);
  if (!cut) {
    blocks_free(out);
    return -1;
  }
  return 0;
}

int blocks_plan_how(const PhysQuery *q, const galley_tensor *const *in,
                    int64_t lo, int64_t hi, int64_t block_work,
                    int64_t max_blocks, ExecBlocks *out, BlocksHow *how) {
  return plan_on(NULL, q, in, lo, hi, block_work, max_blocks, out, how);
}

int blocks_plan(GalleyPool *pool, const PhysQuery *q,
                const galley_tensor *const *in, int64_t lo, int64_t hi,
                int64_t block_work, int64_t max_blocks, ExecBlocks *out) {
  return plan_on(pool, q, in, lo, hi, block_work, max_blocks, out, NULL);
}

static int same_double(double x, double y) {
  return (x != x && y != y) || x == y;
}

/* Whether a reduction over the outermost loop may run in blocks whose
 * partial results are combined by the aggregate afterwards: it must be
 * associative, start from its identity, and write a dense result. */
static int reduce_splits(const PhysQuery *q) {
  const Op *agg = q->agg;
  return agg && (agg->props & OP_ASSOCIATIVE) &&
         (agg->props & OP_HAS_IDENTITY) &&
         same_double(agg->agg_init, agg->identity) &&
         (q->out_kind == OUT_DENSE || q->out_kind == OUT_ACCUMULATE);
}

int64_t blocks_unit_work(const PhysQuery *q, int64_t block_work,
                         double cells) {
  if (q->part.combine != PART_REDUCE || !(cells * 2 > (double)block_work))
    return block_work;
  return cells * 2 >= (double)INT64_MAX / 2 ? INT64_MAX / 2
                                             : (int64_t)(cells * 2);
}

/* Blocks per thread of a concatenated result (PART_CONCAT). */
#define CONCAT_BLOCKS_PER_THREAD 8

/* Bytes all partial results of one reduction may take. */
#define REDUCE_PARTIAL_BYTES ((double)((int64_t)1 << 26))

int64_t blocks_max(const PhysQuery *q, double cells, double memory_budget,
                   int threads) {
  if (q->nloops < 1 || q->part.loop != 0)
    return 1;
  /* concatenated parts give the same result however the loop is cut:
   * one thread runs one block, with no copy of its entries, and more
   * threads a few blocks each (enough to balance them; every block pays
   * for a sink of its own and the copy of its entries) */
  if (q->part.combine == PART_CONCAT)
    return threads <= 1 ? 1 : CONCAT_BLOCKS_PER_THREAD * (int64_t)threads;
  if (q->part.combine != PART_REDUCE)
    return EXEC_MAX_BLOCKS;
  if (!reduce_splits(q))
    return 1;
  /* every block after the first holds a partial result */
  double room = REDUCE_PARTIAL_BYTES;
  if (memory_budget > 0 && memory_budget / 4 < room)
    room = memory_budget / 4;
  double more = room / (8 * (cells > 1 ? cells : 1));
  return more >= (double)EXEC_MAX_BLOCKS ? EXEC_MAX_BLOCKS : 1 + (int64_t)more;
}

int blocks_known(const PhysQuery *q, const galley_tensor *const *in,
                 int *missing) {
  for (int x = 0; q->nloops > 0 && x < q->nacc; x++) {
    const PAccess *A = &q->acc[x];
    int walks = A->order >= 1 && A->level_idx[0] == q->loops[0];
    int weighs = q->nloops > 1 && A->order >= 2 &&
                 A->level_idx[0] == q->loops[1];
    if ((walks || weighs) && !in[x]) {
      *missing = x;
      return 0;
    }
  }
  return 1;
}
