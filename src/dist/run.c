/*
 * run.c -- the first distributed plan: each query's outermost loop cut
 * by work across the ranks, the parts recombined as the plan's partition
 * record says (run.h says the plan and why it is sound).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "galley_rt.h"
#include "blocks.h"
#include "join.h"
#include "relation.h"
#include "rt_internal.h"
#include "run.h"

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static galley_status nomem(galley_error *err) {
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
}

static int same_value(double x, double y) {
  return x == y || (isnan(x) && isnan(y));
}

/* The result mode that the outermost loop's index is, or -1. */
static int key_mode(const PhysQuery *q) {
  for (int m = 0; m < q->nout; m++)
    if (q->out[m] == q->loops[0])
      return m;
  return -1;
}

/* Whether query q may run in blocks of its outermost loop: a kernel with
 * a loop, and, when the blocks' results are folded, an associative and
 * commutative aggregate that starts from its identity over results whose
 * unvisited points hold it (so folding the partial results in any
 * grouping gives the whole fold). */
static int splittable(const PhysQuery *q) {
  if (q->kind != PQ_KERNEL || q->nloops == 0)
    return 0;
  if (q->part.combine != PART_REDUCE)
    return key_mode(q) >= 0;
  const Op *g = q->agg;
  unsigned need = OP_ASSOCIATIVE | OP_COMMUTATIVE | OP_HAS_IDENTITY;
  if (!g || (g->props & need) != need || !same_value(g->identity, g->agg_init))
    return 0;
  return q->nout == 0 || same_value(q->out_fill, g->identity);
}

/* Whether a later query reads query n's result. */
static int read_later(const PhysPlan *pp, int n) {
  for (int m = n + 1; m < pp->nq; m++)
    for (int x = 0; x < pp->q[m].nacc; x++)
      if (!pp->q[m].acc[x].is_input && pp->q[m].acc[x].tensor == n)
        return 1;
  return 0;
}

/* Whether query n's result, cut by rows, stays in its blocks: asked
 * (keep_blocks), returned only, and concatenated rather than folded. */
static int stays_in_blocks(const DistRun *run, const PhysPlan *pp, int n) {
  return run->keep_blocks && !run->all_results && !read_later(pp, n) &&
         pp->q[n].part.combine != PART_REDUCE;
}

/* Room for a step per query of pp.  A plan is known by its address and
 * size only: a program that plans again may get the address of the plan
 * it freed, so the steps are scratch that each run writes before it
 * reads them (range, then finish), never trusted across runs. */
static int ensure_steps(DistRun *run, const PhysPlan *pp) {
  if (run->pp == pp && run->steps && run->nsteps == pp->nq)
    return 0;
  free(run->steps);
  run->steps = calloc((size_t)pp->nq + 1, sizeof *run->steps);
  run->nsteps = run->steps ? pp->nq : 0;
  run->pp = run->steps ? pp : NULL;
  for (int n = 0; n < run->nsteps; n++)
    run->steps[n].bytes = -1;
  return run->steps ? 0 : -1;
}

static double cut_bytes(const PhysQuery *q, double E, double P, int to_all);
static double result_entries(const PhysQuery *q, double nnz);

/* What the join costs a rank per entry it receives beyond the bytes:
 * routing, packing and laying out tiles, folding partial products, and
 * rank 0 per entry of C: building C from the tiles and converting it to
 * the planned format (the cut's blocks arrive as whole arrays at memcpy
 * speed, in the planned format already).
 * The order measured on 2 ranks sharing a machine (xenon1, bcsstk13,
 * pgp-strong-2009: every grid slower than the cut). */
#define JOIN_ENTRY_SECONDS 5e-8

/* Whether query n runs as a join step (run.h): a matrix multiply of two
 * matrices of fill 0 whose join plan (dist_join_plan, made alike on
 * every rank from the whole factors) is estimated to finish sooner than
 * cutting its loop over the factors every rank holds -- the busiest
 * rank's bytes and multiply-adds, not only all ranks' bytes -- or a grid
 * is forced (GALLEY_DIST_GRID, or GALLEY_DIST_JOIN=1).  The plan is kept
 * for finish; m (when not NULL) keeps the grids' prices for the next
 * runs over the same inputs, and when it holds them already the plan
 * takes them instead of sampling the factors again. */
static int join_step(DistRun *run, const PhysPlan *pp, int n,
                     const galley_tensor *const *in, DistMemo *m) {
  DistStep *s = &run->steps[n];
  DistJoinFactors jf;
  dist_join_plan_free(&run->plan);
  if (run->no_join || !dist_join_factors(pp, n, &jf))
    return 0;
  const galley_tensor *a = in[jf.xa], *b = in[jf.xb];
  /* every rank decides alike: the tensors are equal on every rank */
  if (a->order != 2 || b->order != 2 || a->fill != 0 || b->fill != 0 ||
      a->dims[1 - jf.trans_a] != b->dims[jf.trans_b])
    return 0;
  const PhysQuery *q = &pp->q[n];
  int to_all = run->all_results || read_later(pp, n);
  if (stays_in_blocks(run, pp, n) && !run->always_join &&
      !getenv("GALLEY_DIST_GRID"))
    return 0; /* the cut moves nothing at all */
  int known = m && m->valid && m->joinable;
  if (known && !m->join) { /* the cut won before */
    s->joinable = 1;
    s->join_est = m->join_est;
    s->cut_est = m->cut_est;
    s->join_time = m->join_time;
    s->cut_time = m->cut_time;
    return 0;
  }
  galley_error e;
  DistJoinKnown k;
  memset(&k, 0, sizeof k);
  if (m) {
    k.chosen = m->chosen;
    k.cost = m->cost;
    k.forced = m->forced;
  }
  if (dist_join_plan(run->c->size, a, b, jf.trans_a, jf.trans_b, to_all,
                     known ? &k : NULL, &run->plan, &e) != GALLEY_OK) {
    s->plan_failed = 1; /* finish fails on every rank */
    return 0;
  }
  s->joinable = 1;
  s->join_est = run->plan.cost.bytes + run->plan.est_gather;
  double P = run->c->size, E = result_entries(q, run->plan.cost.nnz_c);
  s->cut_est = splittable(q) ? cut_bytes(q, E, P, to_all) : INFINITY;
  /* modelled seconds: the busiest rank's received bytes at 10 Gb/s and
   * its multiply-adds at 1e9/s.  The cut's rows are weighed by their
   * multiply-adds, so each rank does 1/P of them; rank 0 (or, to_all,
   * every rank) receives the other ranks' rows of C. */
  double cut_time = isinf(s->cut_est)
                        ? INFINITY
                        : run->plan.cost.flops / P / 1e9 +
                              s->cut_est / (to_all ? P : 1) / 1.25e9;
  double join_time = run->plan.cost.seconds +
                     run->plan.cost.max_recv / 12 * JOIN_ENTRY_SECONDS +
                     run->plan.est_gather / (to_all ? P : 1) / 1.25e9 +
                     run->plan.cost.nnz_c * JOIN_ENTRY_SECONDS;
  int join = run->plan.forced || run->always_join || join_time < cut_time;
  s->join_time = join_time;
  s->cut_time = cut_time;
  if (m) {
    m->joinable = 1;
    m->join = join;
    m->join_est = s->join_est;
    m->cut_est = s->cut_est;
    m->join_time = join_time;
    m->cut_time = cut_time;
    m->chosen = run->plan.chosen;
    m->cost = run->plan.cost;
    m->forced = run->plan.forced;
  }
  if (join)
    return 1;
  dist_join_plan_free(&run->plan);
  return 0;
}

/* What forces a join or a cut (the environment read now), hashed. */
static unsigned long forcing(const DistRun *run) {
  const char *g = getenv("GALLEY_DIST_GRID");
  unsigned long h = 5381u + (unsigned long)run->always_join * 2u +
                    (unsigned long)run->no_join;
  for (; g && *g; g++)
    h = h * 33u + (unsigned char)*g;
  return h;
}

/* The shape of query q as far as a cut or a join depends on it: its
 * loops, result indices and the indices each access reads, hashed. */
static unsigned long query_shape(const PhysQuery *q) {
  unsigned long h = 5381u + (unsigned long)q->kind * 7u +
                    (unsigned long)q->part.combine;
  for (int l = 0; l < q->nloops; l++)
    h = h * 33u + (unsigned long)q->loops[l];
  for (int m = 0; m < q->nout; m++)
    h = h * 31u + (unsigned long)q->out[m];
  for (int x = 0; x < q->nacc; x++)
    for (int l = 0; l < q->acc[x].order; l++)
      h = h * 37u + (unsigned long)q->acc[x].level_idx[l] * 3u +
          (unsigned long)q->acc[x].is_input;
  return h;
}

static void array_marks(const galley_tensor *t, const void **a) {
  a[0] = a[1] = a[2] = NULL;
  if (!t)
    return;
  a[0] = t->val;
  for (int l = 0; l < t->order; l++)
    if (t->lvl[l].kind == GALLEY_RT_LIST) {
      a[1] = t->lvl[l].idx32 ? (const void *)t->lvl[l].pos32
                             : (const void *)t->lvl[l].pos;
      a[2] = t->lvl[l].idx32 ? (const void *)t->lvl[l].crd32
                             : (const void *)t->lvl[l].crd;
      break;
    }
}


/* The memo of query n when it was made for these inputs (and the same
 * loop size, destination and forcing) on every rank, else a cleared one
 * to fill; NULL when the query is not memoized (too many accesses, out
 * of memory).  Collective: the ranks agree on taking the memo, so that
 * every rank cuts alike even if one rank's allocator gave a new tensor
 * an old one's addresses. */
static DistMemo *memo_for(DistRun *run, const PhysPlan *pp, int n,
                          const galley_tensor *const *in, int64_t dim) {
  const PhysQuery *q = &pp->q[n];
  int room = q->nacc <= DIST_MEMO_ACC;
  if (room && run->nmemo < pp->nq) {
    DistMemo *mm = realloc(run->memo, (size_t)pp->nq * sizeof *mm);
    room = mm != NULL;
    if (mm)
      run->memo = mm;
  }
  if (room && run->nmemo < pp->nq) {
    DistMemo *mm = run->memo;
    memset(mm + run->nmemo, 0,
           (size_t)(pp->nq - run->nmemo) * sizeof *mm);
    run->memo = mm;
    run->nmemo = pp->nq;
  }
  DistMemo *m = room ? &run->memo[n] : NULL;
  int to_all = run->all_results || read_later(pp, n);
  unsigned long f = forcing(run) * 1000003u + query_shape(q);
  int same = m && m->valid && m->nacc == q->nacc && m->dim == dim &&
             m->to_all == to_all && m->forcing == f;
  for (int x = 0; same && x < q->nacc; x++) {
    const void *a[3];
    array_marks(in[x], a);
    same = m->in[x] == in[x] &&
           m->stored[x] == (in[x] ? galley_tensor_stored(in[x]) : -1) &&
           a[0] == m->arrays[x][0] && a[1] == m->arrays[x][1] &&
           a[2] == m->arrays[x][2];
  }
  /* every rank takes the memo, or none does */
  int all = dist_sum_i64(run->c, same) == run->c->size;
  if (!m)
    return NULL;
  if (all)
    return m;
  free(m->bounds);
  memset(m, 0, sizeof *m);
  m->nacc = q->nacc;
  m->dim = dim;
  m->to_all = to_all;
  m->forcing = f;
  for (int x = 0; x < q->nacc; x++) {
    m->in[x] = in[x];
    m->stored[x] = in[x] ? galley_tensor_stored(in[x]) : -1;
    array_marks(in[x], m->arrays[x]);
  }
  return m;
}

/* Cut [0, dim) of q's outermost loop into P blocks of equal work: the
 * executor's own measure (blocks.h: a row of a matrix multiply weighs its
 * multiply-adds, others their stored entries), made into many blocks of
 * about equal work that the ranks take in runs of equal counts. */
static int work_cut(const PhysQuery *q, const galley_tensor *const *in,
                    int64_t dim, int P, int64_t *bounds) {
  ExecBlocks b;
  if (blocks_plan_how(q, in, 0, dim, 1, EXEC_MAX_BLOCKS, &b, NULL) != 0)
    return 0;
  for (int k = 0; k <= P; k++)
    bounds[k] = b.cut[(int64_t)k * b.n / P];
  blocks_free(&b);
  return 1;
}

/* The join step: C by the grid, whole at rank 0 (or every rank), in
 * the format the plan gave *res (the kernel's empty result). */
static galley_status run_join(DistRun *run, DistStep *s, galley_tensor **res,
                              galley_error *err) {
  if (!run->kernels)
    run->kernels = dist_kernels_new(); /* NULL: a program each time */
  galley_status st = dist_join_run(run->c, &run->plan, s->to_all,
                                   run->kernels, &s->jr,
                                   err);
  dist_join_plan_free(&run->plan);
  galley_tensor *c = s->jr.result;
  s->jr.result = NULL;
  if (st == GALLEY_OK && c && *res) {
    galley_format f;
    galley_tensor_format(*res, &f);
    galley_tensor *t = NULL;
    st = galley_tensor_convert(c, &f, &t, err);
    if (st == GALLEY_OK) {
      galley_tensor_free(*res);
      *res = t;
    }
  }
  galley_tensor_free(c);
  return dist_agree(run->c, st, err);
}

static void part_range(void *ctx, const PhysPlan *pp, int n,
                       const galley_tensor *const *in, const int64_t *dims,
                       int64_t *lo, int64_t *hi) {
  DistRun *run = ctx;
  DistComm *c = run->c;
  if (ensure_steps(run, pp) != 0)
    return; /* runs whole; finish reports the lack of memory */
  DistStep *s = &run->steps[n];
  const PhysQuery *q = &pp->q[n];
  s->split = 0;
  s->join = s->joinable = s->plan_failed = 0;
  if (c->size < 2)
    return;
  int64_t dim = q->nloops > 0 ? dims[q->loops[0]] : 0;
  DistMemo *m = memo_for(run, pp, n, in, dim);
  if (join_step(run, pp, n, in, m)) { /* finish runs the grid */
    s->join = 1;
    *lo = *hi = 0;
    if (m)
      m->valid = 1;
    return;
  }
  if (!splittable(q))
    return;
  if (m && m->valid && m->bounds) {
    s->split = 1;
    s->lo = *lo = m->bounds[c->rank];
    s->hi = *hi = m->bounds[c->rank + 1];
    return;
  }
  int64_t *bounds = malloc(((size_t)c->size + 1) * sizeof *bounds);
  if (!bounds)
    return;
  if (!work_cut(q, in, dim, c->size, bounds))
    dist_split(NULL, dim, c->size, bounds); /* an equal cut is as correct */
  s->split = 1;
  s->lo = *lo = bounds[c->rank];
  s->hi = *hi = bounds[c->rank + 1];
  if (m) {
    m->bounds = bounds;
    m->valid = 1;
  } else {
    free(bounds);
  }
}

static double fold_agg(void *ctx, double a, double b) {
  const Op *g = ctx;
  double args[2] = {a, b};
  return ops_apply(g, args, 2);
}

/* Whether the format stores any level sparsely. */
static int any_sparse(const galley_tensor *t) {
  for (int l = 0; l < t->order; l++)
    if (t->lvl[l].kind != GALLEY_RT_DENSE)
      return 1;
  return 0;
}

/* ---- row blocks moved as arrays ----
 * When the result's first level stores the cut mode, a rank's block is a
 * contiguous run of every level's arrays, and the blocks in rank order
 * are the whole arrays: an all-dense result moves only its values, a
 * dense-over-list one (CSR) a count per row, the coordinates and the
 * values.  No coordinates are packed and nothing is sorted. */

typedef enum RowShape { ROWS_NONE = 0, ROWS_DENSE = 1, ROWS_CSR = 2 } RowShape;

static RowShape row_shape(const galley_tensor *t, int m0) {
  if (t->order == 0 || t->lvl[0].kind != GALLEY_RT_DENSE ||
      t->lvl[0].mode != m0)
    return ROWS_NONE;
  int dense = 1;
  for (int l = 1; l < t->order; l++)
    dense &= t->lvl[l].kind == GALLEY_RT_DENSE;
  if (dense)
    return ROWS_DENSE;
  if (t->order == 2 && t->lvl[1].kind == GALLEY_RT_LIST)
    return ROWS_CSR;
  return ROWS_NONE;
}

/* The same from a planned format. */
static RowShape format_row_shape(const galley_format *f, int m0) {
  if (f->order == 0 || f->kinds[0] != GALLEY_DENSE || f->mode_order[0] != m0)
    return ROWS_NONE;
  int dense = 1;
  for (int l = 1; l < f->order; l++)
    dense &= f->kinds[l] == GALLEY_DENSE;
  if (dense)
    return ROWS_DENSE;
  return f->order == 2 && f->kinds[1] == GALLEY_LIST ? ROWS_CSR : ROWS_NONE;
}

/* The values of rows [lo, hi) of an all-dense t. */
static galley_status pack_dense_rows(const galley_tensor *t, int64_t lo,
                                     int64_t hi, DistBlob *b,
                                     galley_error *err) {
  int64_t inner = t->nval / (t->lvl[0].dim > 0 ? t->lvl[0].dim : 1);
  b->len = (hi - lo) * inner * (int64_t)sizeof(double);
  b->data = malloc((size_t)b->len + 1);
  if (!b->data)
    return nomem(err);
  memcpy(b->data, t->val + lo * inner, (size_t)b->len);
  return GALLEY_OK;
}

/* Rows [lo, hi) of a CSR t: the width w of the coordinates (4 or 8, as
 * t stores them), the hi - lo row counts, the values and the coordinates
 * of their entries, padded to 8 bytes. */
static galley_status pack_csr_rows(const galley_tensor *t, int64_t lo,
                                   int64_t hi, DistBlob *b,
                                   galley_error *err) {
  const galley_level *L = &t->lvl[1];
  int64_t p0 = galley_rt_pos(L, lo), p1 = galley_rt_pos(L, hi);
  int64_t k = p1 - p0, rows = hi - lo, w = L->idx32 ? 4 : 8;
  /* a multiple of 8 bytes, so that the next block in a gathered buffer
   * starts aligned */
  b->len = (8 + rows * 8 + k * (w + 8) + 7) / 8 * 8;
  char *buf = calloc((size_t)b->len + 1, 1);
  if (!(b->data = buf))
    return nomem(err);
  int64_t *head = (int64_t *)buf, *counts = head + 1;
  head[0] = w;
  for (int64_t i = 0; i < rows; i++)
    counts[i] = galley_rt_pos(L, lo + i + 1) - galley_rt_pos(L, lo + i);
  char *vals = buf + 8 + rows * 8; /* values first: 8-byte aligned */
  memcpy(vals, t->val + p0, (size_t)k * sizeof(double));
  if (L->idx32)
    memcpy(vals + k * 8, L->crd32 + p0, (size_t)k * 4);
  else
    memcpy(vals + k * 8, L->crd + p0, (size_t)k * 8);
  return GALLEY_OK;
}

/* Block s's entries and where its parts start. */
typedef struct CsrBlock {
  int64_t w, rows, k;
  const int64_t *counts;
  const char *crd;
  const double *val;
} CsrBlock;

static CsrBlock csr_block(const char *data, int64_t len, int64_t rows) {
  CsrBlock b;
  memcpy(&b.w, data, 8);
  b.rows = rows;
  b.k = (len - 8 - rows * 8) / (b.w + 8); /* the padding is < w + 8 */
  b.counts = (const int64_t *)(data + 8);
  b.val = (const double *)(data + 8 + rows * 8);
  b.crd = data + 8 + rows * 8 + b.k * 8;
  return b;
}

/* u becomes t's header (sizes, formats, fill, facts) with no arrays:
 * the caller lays out its own copy of the levels and values. */
static void empty_shell_of(galley_tensor *u, const galley_tensor *t) {
  *u = *t;
  u->cache = NULL;
  u->borrowed = 0;
  for (int l = 0; l < GALLEY_MAX_ORDER; l++) {
    galley_level *L = &u->lvl[l];
    L->pos = L->crd = L->qos = NULL;
    L->key = NULL, L->slot = NULL, L->tbl = NULL;
    L->pos32 = L->crd32 = L->qos32 = L->key32 = L->slot32 = NULL;
    L->idx32 = 0;
  }
}

/* The whole CSR tensor from the blocks in rank order (like t), its
 * indices 32-bit when they fit (as a builder lays them out). */
static galley_status unpack_csr_rows(const galley_tensor *t, const char *recv,
                                     const int64_t *rcount,
                                     const int64_t *rdispl, int P,
                                     const int64_t *bounds,
                                     galley_tensor **out, galley_error *err) {
  int64_t nrows = t->lvl[0].dim, total = 0;
  for (int s = 0; s < P; s++)
    total += csr_block(recv + rdispl[s], rcount[s], bounds[s + 1] - bounds[s]).k;
  int narrow = t->lvl[1].dim <= GALLEY_RT_IDX32_MAX_DIM &&
               total <= GALLEY_RT_IDX32_MAX_NSET;
  size_t w = narrow ? 4 : 8;
  galley_tensor *u = calloc(1, sizeof *u);
  char *pos = malloc(((size_t)nrows + 1) * w);
  char *crd = malloc(((size_t)total + 1) * w);
  double *val = malloc(((size_t)total + 1) * sizeof *val);
  if (!u || !pos || !crd || !val) {
    free(u), free(pos), free(crd), free(val);
    return nomem(err);
  }
  empty_shell_of(u, t);
  int64_t at = 0;
  int32_t *pos32 = (int32_t *)pos, *crd32 = (int32_t *)crd;
  int64_t *pos64 = (int64_t *)pos, *crd64 = (int64_t *)crd;
  if (narrow)
    pos32[0] = 0;
  else
    pos64[0] = 0;
  for (int s = 0; s < P; s++) {
    CsrBlock b = csr_block(recv + rdispl[s], rcount[s], bounds[s + 1] - bounds[s]);
    for (int64_t i = 0; i < b.rows; i++) {
      int64_t r = bounds[s] + i;
      if (narrow)
        pos32[r + 1] = pos32[r] + (int32_t)b.counts[i];
      else
        pos64[r + 1] = pos64[r] + b.counts[i];
    }
    if (b.w == (int64_t)w) {
      memcpy(crd + at * (int64_t)w, b.crd, (size_t)(b.k * b.w));
    } else { /* another width: element by element */
      for (int64_t q = 0; q < b.k; q++) {
        int64_t c;
        if (b.w == 4) {
          int32_t c32;
          memcpy(&c32, b.crd + q * 4, 4);
          c = c32;
        } else {
          memcpy(&c, b.crd + q * 8, 8);
        }
        if (narrow)
          crd32[at + q] = (int32_t)c;
        else
          crd64[at + q] = c;
      }
    }
    memcpy(val + at, b.val, (size_t)b.k * sizeof *val);
    at += b.k;
  }
  galley_level *L = &u->lvl[1];
  L->idx32 = narrow;
  if (narrow) {
    L->pos32 = pos32;
    L->crd32 = crd32;
  } else {
    L->pos = pos64;
    L->crd = crd64;
  }
  L->nchild = L->nset = total;
  u->val = val;
  u->nval = total;
  *out = u;
  return GALLEY_OK;
}

/* The bounds of every rank's block (each rank made the same cut and
 * knows its own block; the blocks tile the loop in rank order). */
static galley_status all_bounds(DistRun *run, int n, int64_t *bounds,
                                galley_error *err) {
  DistComm *c = run->c;
  int64_t mine[2] = {run->steps[n].lo, run->steps[n].hi};
  int64_t rc[64], rd[64], *rcount = rc, *rdispl = rd;
  if (c->size > 64) {
    rcount = malloc(2 * (size_t)c->size * sizeof *rcount);
    rdispl = rcount ? rcount + c->size : NULL;
  }
  galley_status st = rcount ? GALLEY_OK : nomem(err);
  st = dist_agree(c, st, err);
  void *recv = NULL;
  if (st == GALLEY_OK)
    st = dist_gather(c, mine, (int64_t)sizeof mine, -1, &recv, rcount,
                     rdispl, err);
  for (int s = 0; st == GALLEY_OK && s < c->size; s++)
    bounds[s] = ((const int64_t *)recv)[2 * s];
  if (st == GALLEY_OK)
    bounds[c->size] = ((const int64_t *)recv)[2 * c->size - 1];
  free(recv);
  if (rcount != rc)
    free(rcount);
  return st;
}

/* ---- row blocks gathered in place ----
 * To rank 0 alone (the common case: a result only returned), the other
 * ranks send their rows' arrays as they lie in their results, and rank 0
 * receives them straight into the whole result's arrays: no packing, no
 * staging buffer, no copy but rank 0's own block.  An all-dense result
 * needs only the values; a CSR one also the positions of each block's
 * rows, rebased on arrival. */

/* Rows [lo, hi) of an all-dense *res, received in place at rank 0. */
static galley_status dense_in_place(DistComm *c, galley_tensor *t,
                                    const int64_t *bounds,
                                    galley_error *err) {
  int P = c->size;
  int64_t inner = t->nval / (t->lvl[0].dim > 0 ? t->lvl[0].dim : 1);
  int64_t lo = bounds[c->rank], hi = bounds[c->rank + 1];
  void **dst = calloc((size_t)P, sizeof *dst);
  int64_t *lens = calloc((size_t)P, sizeof *lens);
  galley_status st = dst && lens ? GALLEY_OK : nomem(err);
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK) {
    for (int r = 0; r < P; r++) {
      dst[r] = t->val + bounds[r] * inner;
      lens[r] = (bounds[r + 1] - bounds[r]) * inner * (int64_t)sizeof(double);
    }
    dist_gather_into(c, t->val + lo * inner,
                     (hi - lo) * inner * (int64_t)sizeof(double), 0, dst,
                     lens);
  }
  free(dst);
  free(lens);
  return st;
}

/* What each rank tells rank 0 of its CSR block. */
typedef struct CsrInfo {
  int64_t lo, hi, p0, k;
} CsrInfo;

/* A CSR tensor like t with arrays of w-byte indices for `total` entries
 * (levels other than the list copied from t). */
static galley_tensor *csr_like(const galley_tensor *t, int64_t total,
                               int w) {
  int64_t nrows = t->lvl[0].dim;
  galley_tensor *u = calloc(1, sizeof *u);
  char *pos = malloc(((size_t)nrows + 1) * (size_t)w);
  char *crd = malloc(((size_t)total + 1) * (size_t)w);
  double *val = malloc(((size_t)total + 1) * sizeof *val);
  if (!u || !pos || !crd || !val) {
    free(u), free(pos), free(crd), free(val);
    return NULL;
  }
  empty_shell_of(u, t);
  galley_level *L = &u->lvl[1];
  L->idx32 = w == 4;
  if (w == 4) {
    L->pos32 = (int32_t *)pos;
    L->crd32 = (int32_t *)crd;
  } else {
    L->pos = (int64_t *)pos;
    L->crd = (int64_t *)crd;
  }
  L->nchild = L->nset = total;
  u->val = val;
  u->nval = total;
  return u;
}

/* Position r of a w-byte position array. */
static int64_t pos_at(const void *pos, int w, int64_t r) {
  return w == 4 ? ((const int32_t *)pos)[r] : ((const int64_t *)pos)[r];
}

static void pos_set(void *pos, int w, int64_t r, int64_t v) {
  if (w == 4)
    ((int32_t *)pos)[r] = (int32_t)v;
  else
    ((int64_t *)pos)[r] = v;
}

/* The CSR blocks gathered in place at rank 0: 1 when it applied (every
 * rank's indices of one width that holds the whole), with *st; 0 and
 * nothing sent otherwise (collective, alike on every rank). */
static int csr_in_place(DistComm *c, const int64_t *bounds,
                        galley_tensor **res, galley_status *st,
                        galley_error *err) {
  const galley_tensor *t = *res;
  const galley_level *L = &t->lvl[1];
  int P = c->size, w = L->idx32 ? 4 : 8;
  CsrInfo me = {bounds[c->rank], bounds[c->rank + 1], 0, 0};
  me.p0 = galley_rt_pos(L, me.lo);
  me.k = galley_rt_pos(L, me.hi) - me.p0;
  int64_t total = dist_sum_i64(c, me.k), narrow = dist_sum_i64(c, w == 4);
  if ((narrow != 0 && narrow != P) ||
      (w == 4 && total > GALLEY_RT_IDX32_MAX_NSET))
    return 0;
  CsrInfo *all = NULL;
  int64_t *v = calloc(2 * (size_t)P + 1, sizeof *v);
  void **dst = calloc(3 * (size_t)P + 1, sizeof *dst);
  int64_t *lens = calloc(3 * (size_t)P + 1, sizeof *lens);
  *st = v && dst && lens ? GALLEY_OK : nomem(err);
  *st = dist_agree(c, *st, err);
  if (*st == GALLEY_OK)
    *st = dist_gather(c, &me, (int64_t)sizeof me, 0, (void **)&all, v,
                      v + P, err);
  galley_tensor *u = NULL;
  if (*st == GALLEY_OK && c->rank == 0 && !(u = csr_like(t, total, w)))
    *st = nomem(err);
  *st = dist_agree(c, *st, err);
  if (*st == GALLEY_OK) {
    galley_level *U = u ? &u->lvl[1] : NULL;
    char *upos = u ? (char *)(w == 4 ? (void *)U->pos32 : (void *)U->pos)
                   : NULL;
    char *ucrd = u ? (char *)(w == 4 ? (void *)U->crd32 : (void *)U->crd)
                   : NULL;
    int64_t off = 0;
    for (int r = 0; u && r < P; r++) { /* where each block lands */
      dst[r] = u->val + off;
      lens[r] = all[r].k * 8;
      dst[P + r] = ucrd + off * w;
      lens[P + r] = all[r].k * w;
      dst[2 * P + r] = upos + all[r].lo * w;
      lens[2 * P + r] = (all[r].hi - all[r].lo) * w;
      off += all[r].k;
    }
    const char *tpos = w == 4 ? (const char *)L->pos32 : (const char *)L->pos;
    const char *tcrd = w == 4 ? (const char *)L->crd32 : (const char *)L->crd;
    dist_gather_into(c, t->val + me.p0, me.k * 8, 0, dst, lens);
    dist_gather_into(c, tcrd + me.p0 * w, me.k * w, 0, dst + P, lens + P);
    dist_gather_into(c, tpos + me.lo * w, (me.hi - me.lo) * w, 0,
                     dst + 2 * P, lens + 2 * P);
    if (u) { /* rank 0's own block, then every block's rows rebased */
      memcpy(dst[0], t->val + me.p0, (size_t)me.k * 8);
      memcpy(dst[P], tcrd + me.p0 * w, (size_t)(me.k * w));
      memcpy(dst[2 * P], tpos + me.lo * w, (size_t)((me.hi - me.lo) * w));
      off = 0;
      for (int r = 0; r < P; r++) {
        for (int64_t i = all[r].lo; i < all[r].hi; i++)
          pos_set(upos, w, i, pos_at(upos, w, i) - all[r].p0 + off);
        off += all[r].k;
      }
      pos_set(upos, w, t->lvl[0].dim, total);
      galley_tensor_free(*res);
      *res = u;
    }
  }
  free(all);
  free(v);
  free(dst);
  free(lens);
  return 1;
}

/* The row-block fast path: 1 when it applied (st says how it went). */
static int combine_rows(DistRun *run, const PhysPlan *pp, int n,
                        galley_tensor **res, galley_status *st,
                        galley_error *err) {
  DistComm *c = run->c;
  const PhysQuery *q = &pp->q[n];
  DistStep *s = &run->steps[n];
  RowShape shape = q->part.combine == PART_REDUCE || !*res
                       ? ROWS_NONE
                       : row_shape(*res, key_mode(q));
  /* every rank's shape is the same (the same plan, the same layout) */
  if (shape == ROWS_NONE)
    return 0;
  int P = c->size, root = s->to_all ? -1 : 0;
  if (root == 0) { /* in place at rank 0 */
    int64_t *bounds = malloc(((size_t)P + 1) * sizeof *bounds);
    *st = bounds ? GALLEY_OK : nomem(err);
    *st = dist_agree(c, *st, err);
    if (*st == GALLEY_OK)
      *st = all_bounds(run, n, bounds, err);
    int done = *st != GALLEY_OK;
    if (!done && shape == ROWS_DENSE) {
      *st = dense_in_place(c, *res, bounds, err);
      done = 1;
    } else if (!done) {
      done = csr_in_place(c, bounds, res, st, err);
    }
    free(bounds);
    if (done)
      return 1;
  }
  DistBlob b = {0};
  *st = shape == ROWS_DENSE ? pack_dense_rows(*res, s->lo, s->hi, &b, err)
                            : pack_csr_rows(*res, s->lo, s->hi, &b, err);
  int64_t *v = calloc(3 * (size_t)P + 1, sizeof *v);
  if (*st == GALLEY_OK && !v)
    *st = nomem(err);
  *st = dist_agree(c, *st, err);
  void *recv = NULL;
  if (*st == GALLEY_OK)
    *st = dist_gather(c, b.data, b.len, root, &recv, v, v + P, err);
  if (*st == GALLEY_OK && recv && shape == ROWS_DENSE) {
    int64_t total = v[P + P - 1] + v[P - 1];
    if (total != (*res)->nval * (int64_t)sizeof(double))
      *st = rt_error(err, GALLEY_EINTERNAL, "the blocks of '%s' do not "
                     "make its result", q->name);
    else
      memcpy((*res)->val, recv, (size_t)total);
  }
  if (*st == GALLEY_OK && shape == ROWS_CSR) {
    *st = all_bounds(run, n, v + 2 * P, err);
    galley_tensor *t = NULL;
    if (*st == GALLEY_OK && recv)
      *st = unpack_csr_rows(*res, recv, v, v + P, P, v + 2 * P, &t, err);
    if (t) {
      galley_tensor_free(*res);
      *res = t;
    }
  }
  free(recv);
  free(b.data);
  free(v);
  return 1;
}

/* Send this rank's part of query n's result to rank 0 (or to every rank)
 * and rebuild the whole there. */
static galley_status combine(DistRun *run, const PhysPlan *pp, int n,
                             galley_tensor **res, galley_error *err) {
  DistComm *c = run->c;
  const PhysQuery *q = &pp->q[n];
  DistStep *s = &run->steps[n];
  int reduce = q->part.combine == PART_REDUCE, m0 = key_mode(q);
  int P = c->size, root = s->to_all ? -1 : 0;
  DistBlob b = {0};
  galley_status st = GALLEY_OK;
  if (combine_rows(run, pp, n, res, &st, err))
    return st;
  if (!*res)
    st = rt_error(err, GALLEY_EINTERNAL, "query '%s' has no result to "
                  "combine", q->name);
  else if (reduce)
    st = dist_pack(*res, -1, 0, 0, 0, 0, &b, err);
  else
    st = dist_pack(*res, m0, s->lo, s->hi, 0, (*res)->dims[m0], &b, err);
  int64_t *v = calloc(2 * (size_t)P, sizeof *v);
  const void **d = calloc((size_t)P, sizeof *d);
  if (st == GALLEY_OK && (!v || !d))
    st = nomem(err);
  st = dist_agree(c, st, err);
  void *recv = NULL;
  if (st == GALLEY_OK)
    st = dist_gather(c, b.data, b.len, root, &recv, v, v + P, err);
  if (st == GALLEY_OK && recv) {
    for (int k = 0; k < P; k++)
      d[k] = (char *)recv + v[P + k];
    galley_tensor *t = NULL;
    st = dist_unpack(P, (const void *const *)d, v, -1, 0, NULL,
                     reduce ? fold_agg : NULL, (void *)q->agg,
                     reduce && any_sparse(*res), &t, err);
    if (st == GALLEY_OK) {
      galley_tensor_free(*res);
      *res = t;
    }
  }
  free(recv);
  free(b.data);
  free(v);
  free(d);
  return st;
}

/* GALLEY_DIST_FAULT: this rank fails after query n (-1: at the end). */
static galley_status maybe_fault(DistRun *run, const PhysPlan *pp, int n,
                                 galley_status st, galley_error *err) {
  if (st != GALLEY_OK || run->fault_rank != run->c->rank ||
      run->fault_query != n)
    return st;
  if (run->fault_kill)
    raise(SIGKILL);
  return rt_error(err, GALLEY_EDATA, "fault injected on rank %d after "
                  "query '%s' (GALLEY_DIST_FAULT)", run->c->rank,
                  n >= 0 && pp ? pp->q[n].name : "(end)");
}

static galley_status part_finish(void *ctx, const PhysPlan *pp, int n,
                                 galley_status st, galley_tensor **res,
                                 galley_error *err) {
  DistRun *run = ctx;
  DistComm *c = run->c;
  if (st == GALLEY_OK && ensure_steps(run, pp) != 0)
    st = nomem(err);
  st = maybe_fault(run, pp, n, st, err);
  if (st == GALLEY_OK && n < run->nsteps && run->steps[n].plan_failed)
    st = nomem(err);
  int64_t before = c->bytes_sent;
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK)
    return st;
  DistStep *s = &run->steps[n];
  const PhysQuery *q = &pp->q[n];
  if (q->kind != PQ_KERNEL || q->nloops == 0)
    s->split = s->join = 0;
  s->to_all = run->all_results || read_later(pp, n);
  double t0 = seconds_now();
  s->kept = s->split && !s->join && stays_in_blocks(run, pp, n);
  if (s->join)
    st = run_join(run, s, res, err);
  else if (s->split && !s->kept)
    st = combine(run, pp, n, res, err);
  s->seconds = seconds_now() - t0;
  s->bytes = c->bytes_sent - before;
  s->split = s->split && st == GALLEY_OK;
  return st;
}

static galley_status part_done(void *ctx, galley_status st,
                               galley_error *err) {
  DistRun *run = ctx;
  DistComm *c = run->c;
  st = maybe_fault(run, run->pp, -1, st, err);
  if (st == GALLEY_OK || !c->agreed)
    st = dist_agree(c, st, err);
  if (st == EXEC_ASSUMPTION)
    c->agreed = 0; /* the program plans again and runs again */
  return st;
}

void dist_run_init(DistRun *run, DistComm *c) {
  memset(run, 0, sizeof *run);
  run->c = c;
  run->parts.ctx = run;
  run->parts.range = part_range;
  run->parts.finish = part_finish;
  run->parts.done = part_done;
  run->fault_rank = run->fault_query = -1;
  const char *j = getenv("GALLEY_DIST_JOIN");
  run->no_join = j && strcmp(j, "0") == 0;
  run->always_join = j && strcmp(j, "1") == 0;
  const char *f = getenv("GALLEY_DIST_FAULT");
  if (f && *f) {
    char kill[8] = "";
    int r = -1, qn = -1;
    if (sscanf(f, "%d:%d:%7s", &r, &qn, kill) >= 1) {
      run->fault_rank = r;
      run->fault_query = qn;
      run->fault_kill = strcmp(kill, "kill") == 0;
    }
  }
}

void dist_run_free(DistRun *run) {
  dist_join_plan_free(&run->plan);
  dist_kernels_free(run->kernels);
  run->kernels = NULL;
  for (int n = 0; n < run->nmemo; n++)
    free(run->memo[n].bounds);
  free(run->memo);
  run->memo = NULL;
  run->nmemo = 0;
  free(run->steps);
  run->steps = NULL;
  run->nsteps = 0;
}

/* The entries a result of nnz nonzeros stores: every cell of an
 * all-dense result. */
static double result_entries(const PhysQuery *q, double nnz) {
  double cells = 1;
  int dense = 1;
  for (int m = 0; m < q->nout; m++)
    cells *= (double)q->indices[q->out[m]].dim;
  for (int l = 0; l < q->out_format.order; l++)
    dense &= q->out_format.kinds[l] == GALLEY_DENSE;
  return dense || nnz > cells ? cells : nnz;
}

/* The entries a result is estimated to store: the planner's estimate,
 * or every cell of an all-dense result. */
static double est_entries(const PhysQuery *q) {
  return result_entries(q, q->has_est ? q->est_nnz : INFINITY);
}

/* The estimated bytes of cutting query q's loop over the ranks and
 * recombining its E result entries. */
static double cut_bytes(const PhysQuery *q, double E, double P, int to_all) {
  const double header = 8 * 3 + 8 * GALLEY_MAX_ORDER + 8 + 4 * 2 *
                        GALLEY_MAX_ORDER; /* a packed block's header */
  double entry = 8.0 * (q->nout + 1), extra = header;
  RowShape shape = q->part.combine == PART_REDUCE
                       ? ROWS_NONE
                       : format_row_shape(&q->out_format, key_mode(q));
  if (shape == ROWS_DENSE) { /* values only */
    entry = 8;
    extra = 0;
  } else if (shape == ROWS_CSR) { /* a count a row, coordinate, value */
    entry = q->out_w32 & 2 || q->indices[q->out[1 - key_mode(q)]].dim <=
                                  GALLEY_RT_IDX32_MAX_DIM
                ? 12
                : 16;
    extra = 8.0 * (double)q->indices[q->loops[0]].dim / P;
  }
  /* each rank's block: 1/P of the entries (a fold: all of them) */
  double mine = q->part.combine == PART_REDUCE ? E : E / P;
  double receivers = to_all ? P - 1 : (P - 1) / P;
  double counts = 8 * P * (P - 1);
  if (shape == ROWS_CSR) /* and the blocks' bounds, to every rank */
    counts += 16 * P * (P - 1) + 8 * P * (P - 1);
  return (mine * entry + extra) * receivers * P + counts;
}

galley_status dist_run_estimate(DistRun *run, const PhysPlan *pp,
                                galley_error *err) {
  if (ensure_steps(run, pp) != 0)
    return nomem(err);
  double P = run->c->size;
  for (int n = 0; n < pp->nq; n++) {
    const PhysQuery *q = &pp->q[n];
    DistStep *s = &run->steps[n];
    s->split = P > 1 && splittable(q);
    s->to_all = run->all_results || read_later(pp, n);
    if (s->join) { /* run as a join step: its plan's estimate */
      s->split = 0;
      s->est_bytes = s->join_est;
      continue;
    }
    if (!s->split || stays_in_blocks(run, pp, n)) {
      s->est_bytes = 0;
      continue;
    }
    /* a matrix multiply the run cut by rows: from its join plan's
     * (sampled) size of C */
    s->est_bytes = s->joinable ? s->cut_est
                               : cut_bytes(q, est_entries(q), P, s->to_all);
  }
  return GALLEY_OK;
}

int64_t dist_run_step_bytes(DistRun *run, int n) {
  int64_t mine = n < run->nsteps ? run->steps[n].bytes : -1;
  if (mine < 0)
    mine = 0;
  return dist_sum_i64(run->c, mine);
}

/* One step's line; saved: the measured step (NULL: not measured), got
 * its bytes summed over the ranks. */
static void print_step(FILE *f, const PhysQuery *q, int n, const DistStep *s,
                       int P, int join, int kept, const DistStep *saved,
                       int64_t got) {
  char b1[32], b2[32];
  fprintf(f, "  step %d: %s: ", n + 1, q->name);
  if (saved && saved->join) {
    const DistJoinRun *j = &saved->jr;
    char b3[32], b4[32], b5[32], b6[32], b7[32];
    fprintf(f, "matrix multiply by the join's grid %dx%dx%d (%s%s), C "
               "gathered to %s: est %s (grid %s, gather %s; the loop cut "
               "%s), measured %s (grid %s, gather %s) in %.3f ms\n",
            j->cost.g.pi, j->cost.g.pj, j->cost.g.pk,
            dist_grid_method(j->cost.g),
            j->cost.g.pi == j->chosen.pi && j->cost.g.pj == j->chosen.pj &&
                    j->cost.g.pk == j->chosen.pk
                ? ", the cost model's choice"
                : ", forced by GALLEY_DIST_GRID",
            s->to_all ? "every rank" : "rank 0",
            dist_bytes_text(s->est_bytes, b1, sizeof b1),
            dist_bytes_text(j->cost.bytes, b4, sizeof b4),
            dist_bytes_text(j->est_gather, b5, sizeof b5),
            isinf(saved->cut_est)
                ? "impossible"
                : dist_bytes_text(saved->cut_est, b3, sizeof b3),
            dist_bytes_text((double)got, b2, sizeof b2),
            dist_bytes_text((double)j->bytes_join, b6, sizeof b6),
            dist_bytes_text((double)j->bytes_gather, b7, sizeof b7),
            saved->seconds * 1e3);
    return;
  }
  if (!s->split)
    fprintf(f, "whole on every rank (%s)",
            q->kind == PQ_TRANSPOSE ? "a transpose"
            : q->nloops == 0        ? "no loop"
                                    : "not split");
  else if (kept)
    fprintf(f, "loop %s cut by work into %d blocks, %s, left in the "
               "blocks on their ranks", q->indices[q->loops[0]].name, P,
            phys_part_combine_name(q->part.combine));
  else
    fprintf(f, "loop %s cut by work into %d blocks, %s, %s to %s",
            q->indices[q->loops[0]].name, P,
            phys_part_combine_name(q->part.combine),
            q->part.combine == PART_REDUCE ? "folded" : "concatenated",
            s->to_all ? "every rank" : "rank 0");
  fprintf(f, ", est %s", dist_bytes_text(s->est_bytes, b1, sizeof b1));
  if (saved && saved->joinable) /* a matrix multiply the cut won */
    fprintf(f, " (the join's best grid: est %s)",
            dist_bytes_text(saved->join_est, b2, sizeof b2));
  else if (join && !saved)
    fprintf(f, " (a matrix multiply: the run weighs this cut against the "
               "join's grids)");
  if (saved)
    fprintf(f, ", measured %s in %.3f ms",
            dist_bytes_text((double)got, b2, sizeof b2),
            saved->seconds * 1e3);
  fprintf(f, "\n");
}

void dist_run_print(DistRun *run, const PhysPlan *pp, int measured,
                    const DistInputs *in, const galley_tensor *const *inputs,
                    FILE *f) {
  galley_error e;
  DistStep *saved = NULL;
  if (measured && run->steps && run->pp == pp) {
    saved = malloc((size_t)pp->nq * sizeof *saved);
    if (saved)
      memcpy(saved, run->steps, (size_t)pp->nq * sizeof *saved);
  }
  int ok = dist_run_estimate(run, pp, &e) == GALLEY_OK;
  int P = run->c->size;
  char b1[32];
  if (f)
    fprintf(f, "Distributed plan over %d ranks (kernels in 1D row "
               "blocks cut by work, or matrix multiplies by the join's grid "
               "when it sends fewer bytes; inputs replicated):\n", P);
  if (f)
    fprintf(f, "  step 0: read the inputs: %d in byte ranges on every rank "
               "(entries allgathered), %d by rank 0 and broadcast; sent %s\n",
            in->split, in->whole,
            dist_bytes_text((double)in->bytes, b1, sizeof b1));
  for (int n = 0; ok && n < pp->nq; n++) {
    const PhysQuery *q = &pp->q[n];
    DistStep *s = &run->steps[n];
    int64_t got = 0;
    if (saved) {
      run->steps[n].bytes = saved[n].bytes;
      run->steps[n].seconds = saved[n].seconds;
      got = dist_run_step_bytes(run, n); /* collective: every rank */
    }
    DistJoinFactors jf;
    int join = P > 1 && !run->no_join && dist_join_factors(pp, n, &jf);
    if (f)
      print_step(f, q, n, s, P, join, s->split && stays_in_blocks(run, pp, n),
                 saved ? &saved[n] : NULL, got);
    dist_join_explain(run->c, pp, n, inputs, measured, f);
  }
  free(saved);
}
