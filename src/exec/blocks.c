/*
 * blocks.c -- split a kernel's outermost loop into blocks of about equal
 * work, independently of the thread count (see blocks.h).
 *
 * The work before coordinate c, W(c), is monotone in c; block b ends at
 * the first coordinate where W reaches b/n of the total, found by binary
 * search, so the split costs O(n log dim) (plus one pass over the walked
 * matrix's entries when its entries are weighted by multiplies).
 */
#include <stdlib.h>

#include "blocks.h"
#include "pool.h"

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

/* The first position of level 0 of t whose coordinate is >= c. */
static int64_t first_position(const galley_tensor *t, int64_t c) {
  const galley_level *L = &t->lvl[0];
  if (L->kind == GALLEY_RT_DENSE)
    return c < L->dim ? c : L->dim;
  int64_t lo = galley_rt_pos(L, 0), hi = galley_rt_pos(L, 1);
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (galley_rt_crd(L, mid) < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The number of level-0 positions of t (the loop's iterations). */
static int64_t level0_positions(const galley_tensor *t) {
  const galley_level *L = &t->lvl[0];
  return L->kind == GALLEY_RT_DENSE ? L->dim : galley_rt_pos(L, 1);
}

/* Positions of the deepest level reachable through dense and list levels
 * that lie under level-0 positions before p0 (the entries of the first
 * p0 fibers). */
static int64_t entries_before(const galley_tensor *t, int64_t p0) {
  int64_t p = p0;
  for (int l = 1; l < t->order; l++) {
    const galley_level *L = &t->lvl[l];
    if (L->kind == GALLEY_RT_DENSE)
      p *= L->dim;
    else if (L->kind == GALLEY_RT_LIST)
      p = galley_rt_pos(L, p);
    else
      break; /* a hashed level: the entries above it measure well enough */
  }
  return p;
}

/* Rows of the weighted work summed by one task. */
#define PREFIX_CHUNK ((int64_t)1 << 12)

/* The weighted work's sums, chunk by chunk (one pool job). */
typedef struct Weigh {
  const galley_level *A1, *B1; /* A's second level, B's second level */
  int64_t rows, bdim;
  int64_t *w;     /* w[p + 1]: the work of rows [start of p's chunk, p] */
  int64_t *base;  /* per chunk: the work before it (after the job) */
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

/* The weighted work: for the matrix x = A[i,j] (a list second level)
 * and a matrix y = B[j,k] read by the next loop (a dense first level over
 * a list), each entry (i, j) weighs 1 + the length of B's fiber j.
 * The work before level-0 position p >= 1 is out->w[p] +
 * out->base[(p - 1) / PREFIX_CHUNK] (rows weighed in chunks on the pool:
 * integer sums, the same however they run), and *times is y.  0
 * when there is no such pair (out->w NULL), -1 when out of memory. */
static int multiply_prefix(GalleyPool *pool, const PhysQuery *q,
                           const galley_tensor *const *in, int x, Weigh *out,
                           int *times) {
  out->w = out->base = NULL;
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
  Weigh g = {.A1 = &ta->lvl[1], .B1 = &in[y]->lvl[1],
             .rows = level0_positions(ta), .bdim = in[y]->lvl[0].dim};
  int64_t chunks = g.rows / PREFIX_CHUNK + 1;
  g.w = malloc((size_t)(g.rows + 1) * sizeof *g.w);
  g.base = calloc((size_t)chunks + 1, sizeof *g.base);
  if (!g.w || !g.base) {
    free(g.w);
    free(g.base);
    return -1;
  }
  *times = y;
  g.w[0] = 0;
  pool_run_ex(g.rows >= 2 * PREFIX_CHUNK ? pool : NULL,
              (g.rows + PREFIX_CHUNK - 1) / PREFIX_CHUNK, weigh_task, &g,
              g.rows >= 8 * PREFIX_CHUNK);
  for (int64_t c = 0; c < chunks; c++)
    g.base[c + 1] += g.base[c];
  *out = g;
  return 0;
}

static void weigh_free(Weigh *g) {
  free(g->w);
  free(g->base);
  g->w = g->base = NULL;
}

/* What the work function reads. */
typedef struct Work {
  const galley_tensor *t; /* the walked access's tensor, or NULL */
  Weigh weigh;            /* weighted work (weigh.w NULL: none) */
} Work;

/* The work before coordinate c. */
static int64_t work_before(const Work *w, int64_t c) {
  if (!w->t)
    return c;
  int64_t p = first_position(w->t, c);
  if (w->weigh.w)
    return p == 0 ? 0
                  : w->weigh.w[p] + w->weigh.base[(p - 1) / PREFIX_CHUNK];
  return p + entries_before(w->t, p);
}

/* The first coordinate in [lo, hi] whose work before reaches target. */
static int64_t coordinate_at(const Work *w, int64_t lo, int64_t hi,
                             int64_t target) {
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (work_before(w, mid) < target)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
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
  Work w = {0};
  int x = work_access(q, in);
  if (x >= 0) {
    w.t = in[x];
    int y = -1;
    if (multiply_prefix(pool, q, in, x, &w.weigh, &y) != 0) {
      blocks_free(out);
      return -1;
    }
    how->measure = w.weigh.w ? BLOCKS_MULTIPLIES : BLOCKS_ENTRIES;
    how->access = x;
    how->times = w.weigh.w ? y : -1;
  }
  int64_t base = work_before(&w, lo), total = work_before(&w, hi) - base;
  how->work = total;
  int64_t n = total / block_work + (total % block_work != 0);
  if (n > max_blocks)
    n = max_blocks;
  if (n > EXEC_MAX_BLOCKS)
    n = EXEC_MAX_BLOCKS;
  if (n > hi - lo)
    n = hi - lo;
  if (n <= 1) {
    weigh_free(&w.weigh);
    return 0;
  }
  int64_t *cut = realloc(out->cut, (size_t)(n + 1) * sizeof *cut);
  if (!cut) {
    weigh_free(&w.weigh);
    blocks_free(out);
    return -1;
  }
  out->cut = cut;
  /* cut b at the b-th n-quantile of the work; empty blocks dropped */
  int64_t m = 0;
  for (int64_t b = 1; b < n; b++) {
    int64_t target =
        base + (int64_t)((double)total * (double)b / (double)n);
    int64_t c = coordinate_at(&w, cut[m], hi, target);
    if (c > cut[m] && c < hi)
      cut[++m] = c;
  }
  cut[++m] = hi;
  out->n = m;
  weigh_free(&w.weigh);
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
