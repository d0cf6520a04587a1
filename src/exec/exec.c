/*
 * exec.c -- the executor: runs a physical plan query by query with the
 * compiled kernels.
 *
 * Each query produces one tensor.  A transpose copies its source into the
 * planned format (galley_tensor_convert); the copy of an input is made
 * once and kept with the input (rt_tensor_converted), so later runs
 * reuse it.  A kernel query gets its
 * accesses' tensors (bound inputs or earlier results) and either a
 * preallocated all-dense result (every value = the fill, unless the
 * kernel stores every value: phys_stores_every_point; the kernel stores
 * into it) or a sink it appends entries to, from which the result
 * is laid out in the planned format.  Intermediates are freed right after
 * their last reader has run; the program's outputs are handed to the
 * caller.
 */
#define _DEFAULT_SOURCE 1 /* madvise's MADV_HUGEPAGE (a Linux hint) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <stdint.h>

#include "config.h"
#include "blocks.h"
#include "phys.h"
#include "pool.h"
#include "recycle.h"
#include "galley_rt_sink.h"
#include "galley_rt_ws.h"
#include "rt_internal.h"

/* A kernel as the executor calls it (galley_rt.h's ABI). */
typedef int (*kernel_fn)(const galley_kernel_args *a);

/* The state of one run: every query's result while it is alive. */
typedef struct ExecRun {
  const PhysPlan *pp;
  const galley_tensor *const *inputs;
  galley_tensor **res;  /* per query: its result, owned, or NULL */
  const galley_tensor **kept; /* per query: a transpose of an input kept
                                 with the input (not owned), or NULL */
  int *last_use;        /* per query: the last query reading it, or -1 */
  unsigned char *keep;  /* per query: a program output (never freed here) */
  GalleyPool *pool;     /* runs the blocks of each kernel (NULL: serially) */
  int64_t block_work;   /* work units per block (blocks.h) */
  const ExecParts *parts; /* several processes (issue 15), or NULL */
  struct MarkTables *marks; /* the running kernel's MERGE_MARK tables */
  Recycle *recycle;     /* value arrays kept between runs, or NULL */
} ExecRun;

/* The dense tables of a kernel with a MERGE_MARK loop: one per thread,
 * made when the thread first needs it, all 0 between blocks (a kernel
 * leaves its table as it found it, unless it fails). */
typedef struct MarkTables {
  int64_t n;   /* values per table (the marked loop's size); 0: none */
  int nw;
  double **t;  /* per worker */
} MarkTables;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static galley_status nomem(galley_error *err) {
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
}

/* The tensor an access reads: a bound input or an earlier result. */
static const galley_tensor *access_tensor(const ExecRun *r,
                                          const PAccess *a) {
  if (a->is_input) /* a split access reads the finite part */
    return exc_input(r->inputs[a->tensor], a);
  return r->res[a->tensor] ? r->res[a->tensor] : r->kept[a->tensor];
}

/* last_use[q] = the last query that reads q's result, computed once so
 * that each intermediate is freed as early as possible. */
static void compute_last_use(ExecRun *r) {
  const PhysPlan *pp = r->pp;
  for (int n = 0; n < pp->nq; n++)
    r->last_use[n] = -1;
  for (int n = 0; n < pp->nq; n++)
    for (int k = 0; k < pp->q[n].nacc; k++) {
      const PAccess *a = &pp->q[n].acc[k];
      if (!a->is_input && a->tensor >= 0 && a->tensor < n)
        r->last_use[a->tensor] = n;
    }
  for (int k = 0; k < pp->noutputs; k++)
    r->keep[pp->outputs[k]] = 1;
}

/* Check what the plan promises before trusting it: every access names an
 * existing tensor computed before the query that reads it. */
static galley_status check_plan(const ExecRun *r, galley_error *err) {
  const PhysPlan *pp = r->pp;
  for (int n = 0; n < pp->nq; n++) {
    const PhysQuery *q = &pp->q[n];
    for (int k = 0; k < q->nacc; k++) {
      const PAccess *a = &q->acc[k];
      int ok = a->is_input ? a->tensor >= 0 && a->tensor < pp->prog->ninputs &&
                                 r->inputs[a->tensor] != NULL
                           : a->tensor >= 0 && a->tensor < n;
      if (!ok)
        return rt_error(err, GALLEY_EINTERNAL,
                        "physical query %d reads %s %d, which is not "
                        "available",
                        n, a->is_input ? "input" : "query", a->tensor);
    }
    if (q->kind == PQ_TRANSPOSE && q->nacc != 1)
      return rt_error(err, GALLEY_EINTERNAL,
                      "transpose query %d has %d accesses", n, q->nacc);
  }
  for (int k = 0; k < pp->noutputs; k++)
    if (pp->outputs[k] < 0 || pp->outputs[k] >= pp->nq)
      return rt_error(err, GALLEY_EINTERNAL, "output %d is not a query", k);
  return GALLEY_OK;
}

/* ------------------------------------------------------------------ */
/* Transposes                                                          */
/* ------------------------------------------------------------------ */

/* The runtime's large copies (rt_par) on the run's pool. */
static void par_on_pool(void *pool, int64_t nparts, rt_task fn, void *ctx) {
  pool_run(pool, nparts, fn, ctx);
}

static rt_par run_par(const ExecRun *r) {
  rt_par par = {.run = r->pool ? par_on_pool : NULL, .pool = r->pool};
  return par;
}

static galley_status run_transpose(ExecRun *r, int n, galley_error *err) {
  const PhysQuery *q = &r->pp->q[n];
  const PAccess *a = &q->acc[0];
  /* The copy must hold the fill the plan reads the source with: a bound
   * tensor with fill 0 takes its declared fill (tin.md section 1).  It
   * is set before converting, so that stored entries equal to the
   * file's fill (0 in a dense level) are kept as the values they are
   * rather than dropped as fills.  An input's copy is made once and
   * kept with the input for later runs. */
  rt_par par = run_par(r);
  if (a->is_input && !r->keep[n])
    return rt_tensor_converted_par(access_tensor(r, a), &q->out_format,
                                   a->fill, &par, &r->kept[n], err);
  return rt_tensor_convert_fill_par(access_tensor(r, a), &q->out_format,
                                    a->fill, &par, &r->res[n], err);
}

/* ------------------------------------------------------------------ */
/* Kernel queries                                                      */
/* ------------------------------------------------------------------ */

#define SINK_PRESIZE_MAX ((double)((int64_t)1 << 24))

/* A sink with the memory budget it may grow to (the kernel sees only the
 * first member). */
typedef struct BudgetSink {
  galley_rt_sink s;
  double budget; /* bytes, 0: none */
  int over;      /* a growth was refused for the budget */
  double wanted; /* the bytes that growth asked for */
  int view;      /* its arrays lie inside a Placement's (not its own) */
} BudgetSink;

/* Room for cap >= need entries in s (its entries kept), within the
 * budget; 0, or -1 when out of memory or over the budget (then `over` is
 * set). */
static int sink_resize(galley_rt_sink *s, int64_t cap, int64_t need) {
  int width = s->rows || s->order < 1 ? 1 : s->order;
  BudgetSink *b = (BudgetSink *)s;
  if (b->budget > 0 && (double)cap * (width + 1) * 8 > b->budget) {
    b->over = 1;
    b->wanted = (double)cap * (width + 1) * 8;
    return -1;
  }
  if (s->rows32 && need > GALLEY_RT_IDX32_MAX_NSET && galley_rt_sink_widen(s) != 0)
    return -1;
  return galley_rt_sink_realloc(s, cap);
}

/* The sink's grow callback: double the capacity (at least `need`), within
 * the budget. */
static int sink_grow(galley_rt_sink *s, int64_t need) {
  int64_t cap = s->cap < 64 ? 64 : s->cap;
  while (cap < need) {
    if (cap > INT64_MAX / 2)
      return -1;
    cap *= 2;
  }
  return sink_resize(s, cap, need);
}

static void sink_free(galley_rt_sink *s) {
  free(s->crd32);
  s->crd32 = NULL;
  free(s->crd);
  free(s->val);
  free(s->pos);
  s->crd = NULL;
  s->val = NULL;
  s->pos = NULL;
}

/* Put s in rows mode for q's result (PhysQuery.out_rows: dense levels
 * over one sorted list); 0, or -1 when out of memory. */
static int sink_rows_mode(galley_rt_sink *s, const PhysQuery *q,
                          const int64_t *odims) {
  const galley_format *f = &q->out_format;
  int64_t npar = 1;
  for (int l = 0; l + 1 < f->order; l++)
    npar *= odims[f->mode_order[l]]; /* bounded by the planner */
  for (int l = 0; l < f->order; l++) {
    s->modes[l] = f->mode_order[l];
    s->ldims[l] = odims[f->mode_order[l]];
  }
  s->pos = calloc((size_t)npar + 1, sizeof *s->pos);
  if (!s->pos)
    return -1;
  s->rows = 1;
  s->rows32 = s->ldims[f->order - 1] <= GALLEY_RT_IDX32_MAX_DIM;
  s->disorder = 0;
  s->last_p = s->last_c = -1;
  return 0;
}

/* The tensor a rows-mode sink holds, in *out, taking its arrays (and
 * *pos32, then NULL: the 32-bit offsets, or NULL to make them), its
 * offsets made (`offsets`) or its counts still in s->pos. */
static galley_status sink_rows_tensor(galley_rt_sink *s, const PhysQuery *q,
                                      const int64_t *odims, int offsets,
                                      int32_t **pos32, galley_tensor **out,
                                      galley_error *err) {
  galley_tensor *t = calloc(1, sizeof *t);
  if (!t)
    return nomem(err);
  const galley_format *f = &q->out_format;
  int32_t *p32 = s->rows32 ? *pos32 : NULL;
  if (p32)
    *pos32 = NULL; /* t's now, even on failure */
  if (galley_rt_sink_rows_levels_ex(s, f->order, f->mode_order, q->out_fill,
                                    odims, offsets, p32, t) != 0) {
    galley_tensor_free(t);
    return nomem(err);
  }
  /* the kernel appended 64-bit coordinates; 32-bit when they fit (out of
   * memory leaves the level 64-bit, as valid) */
  galley_level *L = &t->lvl[f->order - 1];
  if (!L->idx32 && rt_level_fits32(L))
    (void)rt_level_set_width(L, 1);
  *out = t;
  return GALLEY_OK;
}

/* Drop the entries equal to the fill (kernels may append them), keeping
 * the order. */
static void sink_drop_fills(galley_rt_sink *s, double fill) {
  int64_t m = 0;
  for (int64_t e = 0; e < s->n; e++) {
    if (rt_is_fill(s->val[e], fill))
      continue;
    if (m != e) {
      memmove(s->crd + m * s->order, s->crd + e * s->order,
              (size_t)s->order * sizeof *s->crd);
      s->val[m] = s->val[e];
    }
    m++;
  }
  s->n = m;
}

/* Whether the sink's entries are strictly increasing in the format's
 * level order (the order the loops emit them in when the output indices
 * lead the loop order in the format's mode order). */
static int sink_sorted(const galley_rt_sink *s, const galley_format *fmt) {
  for (int64_t e = 1; e < s->n; e++) {
    const int64_t *a = s->crd + (e - 1) * s->order, *b = a + s->order;
    int l = 0;
    while (l < s->order && a[fmt->mode_order[l]] == b[fmt->mode_order[l]])
      l++;
    if (l == s->order || a[fmt->mode_order[l]] > b[fmt->mode_order[l]])
      return 0;
  }
  return 1;
}

/* Lay out the sink's entries (logical coordinates) in the query's format.
 * Entries that arrive out of level order (a random-write loop order) are
 * sorted first; duplicates would be summed. */
static galley_status build_from_sink(const PhysQuery *q, const int64_t *dims,
                                     galley_rt_sink *s, galley_tensor **out,
                                     galley_error *err) {
  const galley_format *fmt = &q->out_format;
  sink_drop_fills(s, q->out_fill);
  if (sink_sorted(s, fmt))
    return rt_build_rows(q->nout, dims, fmt, q->out_fill, s->n, q->nout,
                         s->crd, fmt->mode_order, s->val, out, err);
  int64_t cdims[GALLEY_MAX_ORDER], n = 0, *rows = NULL;
  double *vals = NULL;
  for (int l = 0; l < q->nout; l++)
    cdims[l] = dims[fmt->mode_order[l]];
  galley_status st = rt_sort_rows(s->n, q->nout, s->crd, s->val, q->nout,
                                  fmt->mode_order, cdims, &n, &rows, &vals,
                                  err);
  if (st == GALLEY_OK)
    st = rt_build_sorted(q->nout, dims, fmt, q->out_fill, n, rows, vals, out,
                         err);
  free(rows);
  free(vals);
  return st;
}

/* Index sizes of the query by id, and the result's logical dims. */
static galley_status query_dims(const PhysQuery *q, int64_t *dims,
                                int64_t *out_dims, galley_error *err) {
  for (int id = 0; id < q->nindices; id++) {
    dims[id] = q->indices[id].dim;
    if (dims[id] < 0)
      return rt_error(err, GALLEY_EINTERNAL,
                      "index '%s' of query '%s' has no size",
                      q->indices[id].name, q->name);
  }
  for (int k = 0; k < q->nout; k++)
    out_dims[k] = dims[q->out[k]];
  return GALLEY_OK;
}

/* ------------------------------------------------------------------ */
/* Scatter workspaces (galley_rt_ws)                                   */
/* ------------------------------------------------------------------ */

/* (the hashed slots, their growth and freeing: galley_rt_ws.h) */

/* n bytes from the pool's kept scratch (pool_scratch_take; NULL when
 * none holds n), else from malloc. */
static void *scratch_alloc(GalleyPool *pool, size_t n) {
  size_t got;
  void *p = pool_scratch_take(pool, n, &got);
  if (p && got < n) {
    pool_scratch_give(pool, p, got);
    p = NULL;
  }
  return p ? p : malloc(n);
}

/* Set up query q's workspace over the scattered indices' key space (a
 * bytemap's arrays from the pool's kept scratch when it has them). */
static galley_status ws_init(const PhysQuery *q, const int64_t *dims,
                             GalleyPool *pool, galley_rt_ws *w,
                             galley_error *err) {
  int ids[GALLEY_MAX_ORDER];
  int n = phys_scatter_indices(q, ids);
  int64_t size = 1;
  for (int k = 0; k < n; k++)
    if (rt_mul_overflows(size, dims[ids[k]] > 0 ? dims[ids[k]] : 1, &size) ||
        size >= ((int64_t)1 << 62))
      return rt_error(err, GALLEY_EINVAL,
                      "query '%s' scatters into a key space of more than "
                      "2^62 points", q->name);
  memset(w, 0, sizeof *w);
  w->size = size;
  if (q->ws_kind == GALLEY_BYTEMAP) {
    w->val = scratch_alloc(pool, (size_t)size * sizeof *w->val);
    w->seen = scratch_alloc(pool, (size_t)size);
    w->keys = scratch_alloc(pool, (size_t)size * sizeof *w->keys);
    if (!w->val || !w->seen || !w->keys)
      return nomem(err);
    memset(w->seen, 0, (size_t)size);
    galley_rt_hint_huge(w->val, (size_t)size * sizeof *w->val);
    galley_rt_hint_huge(w->keys, (size_t)size * sizeof *w->keys);
    return GALLEY_OK;
  }
  w->hashed = 1;
  w->grow = galley_rt_ws_grow;
  return galley_rt_ws_alloc_slots(w, GALLEY_RT_WS_HASH_BITS) == 0
             ? GALLEY_OK
             : nomem(err);
}

/* Free w, keeping a bytemap's arrays in the pool for the next run. */
static void ws_release(GalleyPool *pool, galley_rt_ws *w) {
  if (!w->hashed) {
    pool_scratch_give(pool, w->val, (size_t)w->size * sizeof *w->val);
    pool_scratch_give(pool, w->seen, (size_t)w->size);
    pool_scratch_give(pool, w->keys, (size_t)w->size * sizeof *w->keys);
    w->val = NULL;
    w->seen = NULL;
    w->keys = NULL;
  }
  galley_rt_ws_free(w);
}

/* A kernel's return code as a status. */
static galley_status kernel_status(int rc, const PhysQuery *q,
                                   galley_error *err) {
  if (rc == GALLEY_RT_OK)
    return GALLEY_OK;
  if (rc == GALLEY_RT_NOMEM)
    return nomem(err);
  return rt_error(err, GALLEY_EINTERNAL, "the kernel of query '%s' stopped "
                  "with code %d", q->name, rc);
}

/* GALLEY_ENOMEM naming query n when `bytes` for its `what` pass the plan's
 * memory budget (checked before allocating, so that a result too large
 * is refused rather than the process killed for memory). */
static galley_status over_budget(const ExecRun *r, int n, double bytes,
                                 const char *what, galley_error *err) {
  double budget = r->pp->memory_budget;
  if (budget <= 0 || bytes <= budget)
    return GALLEY_OK;
  return rt_error(err, GALLEY_ENOMEM, "query '%s' needs %.3g bytes for its "
                  "%s, over the memory budget of %.3g bytes "
                  "(--memory-budget, galley_program_set_memory_budget)",
                  r->pp->q[n].name, bytes, what, budget);
}

/* ------------------------------------------------------------------ */
/* Blocks of the outermost loop, on the pool's threads                 */
/* ------------------------------------------------------------------ */

/* Where a block appended its entries: n of them from start in sink
 * `sink`.  The blocks run through pool_run_owned: a worker w appends the
 * blocks of its own range (in increasing order, one after another) to
 * sink w, and the blocks it takes from other ranges to sink nw + w, so
 * that sink 0 starts with blocks 0, 1, ... exactly where the result
 * wants them. */
typedef struct SinkSeg {
  int sink;
  int64_t start, n;
} SinkSeg;

/* One kernel's blocks as a pool job: block b runs the kernel over
 * [cut[b], cut[b + 1]) of the outermost loop into its own target. */
typedef struct BlockJob {
  kernel_fn fn;
  const galley_kernel_args *base; /* all but lo, hi, out, sink, ws */
  const PhysQuery *q;
  const int64_t *cut;
  galley_tensor **out;     /* per block: the tensor it writes, or NULL */
  BudgetSink *sinks;       /* per worker: its 2 sinks (SinkSeg), or NULL */
  int nw;                  /* workers */
  int64_t nb;              /* blocks */
  SinkSeg *seg;            /* per block: where its entries went */
  galley_rt_ws *ws;        /* per worker: its scatter workspace, or NULL */
  unsigned char *ws_ready; /* per worker: ws[w] is set up */
  MarkTables *marks;       /* the kernel's tables, or NULL */
  int *rc;                 /* per block: the kernel's return code */
} BlockJob;

static void block_task(void *ctx, int64_t b, int w) {
  BlockJob *j = ctx;
  galley_kernel_args a = *j->base;
  a.lo = j->cut[b];
  a.hi = j->cut[b + 1];
  a.out = j->out ? j->out[b] : NULL;
  a.sink = NULL;
  if (j->sinks) {
    int own = b >= pool_range_start(j->nb, j->nw, w) &&
              b < pool_range_start(j->nb, j->nw, w + 1);
    int k = own ? w : j->nw + w;
    a.sink = &j->sinks[k].s;
    /* blocks own disjoint rows (rows_split), so a rows-mode sink checks
     * the order within each block; a taken block may precede the one
     * before it in the sink (ranges are taken from their top) */
    a.sink->last_p = a.sink->last_c = -1;
    j->seg[b].sink = k;
    j->seg[b].start = a.sink->n;
    j->seg[b].n = 0;
  }
  a.ws = NULL;
  if (j->ws) {
    /* a workspace is empty between blocks (flushed after each iteration
     * of the outermost loop), so one per thread serves all its blocks */
    if (!j->ws_ready[w]) {
      if (ws_init(j->q, a.dims, NULL, &j->ws[w], NULL) != GALLEY_OK) {
        galley_rt_ws_free(&j->ws[w]);
        j->rc[b] = GALLEY_RT_NOMEM;
        return;
      }
      j->ws_ready[w] = 1;
    }
    a.ws = &j->ws[w];
  }
  MarkTables *m = j->marks;
  a.mark = NULL;
  if (m && m->n > 0) {
    if (!m->t[w] && !(m->t[w] = calloc((size_t)m->n, sizeof *m->t[w]))) {
      j->rc[b] = GALLEY_RT_NOMEM;
      return;
    }
    a.mark = m->t[w];
  }
  j->rc[b] = j->fn(&a);
  if (a.sink)
    j->seg[b].n = a.sink->n - j->seg[b].start;
  if (j->rc[b] != GALLEY_RT_OK && a.ws)
    galley_rt_ws_clear(a.ws);
  if (j->rc[b] != GALLEY_RT_OK && a.mark)
    memset(a.mark, 0, (size_t)m->n * sizeof *a.mark);
}

/* Run the blocks of one kernel: on the caller alone when there is one,
 * with sleeping workers woken only when there are enough (blocks.h). */
static void run_block_job(const ExecRun *r, const ExecBlocks *bl,
                          BlockJob *job) {
  GalleyPool *pool = bl->n > 1 ? r->pool : NULL;
  if (job->sinks)
    pool_run_owned(pool, bl->n, block_task, job, bl->n >= EXEC_WAKE_BLOCKS);
  else
    pool_run_ex(pool, bl->n, block_task, job, bl->n >= EXEC_WAKE_BLOCKS);
}

/* The first block's failure, in block order (the same for every thread
 * count), or GALLEY_RT_OK. */
static int first_failure(const int *rc, int64_t n) {
  for (int64_t b = 0; b < n; b++)
    if (rc[b] != GALLEY_RT_OK)
      return rc[b];
  return GALLEY_RT_OK;
}

/* The most blocks query q's outermost loop may split into when its
 * result has `cells` values (blocks.c, which explain shares). */
static int64_t max_blocks(const ExecRun *r, const PhysQuery *q,
                          double cells) {
  return blocks_max(q, cells, r->pp->memory_budget, pool_threads(r->pool));
}

/* The blocks of query n's outermost loop; GALLEY_OK or out of memory. */
static galley_status plan_blocks(const ExecRun *r, int n,
                                 const galley_kernel_args *a, double cells,
                                 ExecBlocks *bl, galley_error *err) {
  const PhysQuery *q = &r->pp->q[n];
  int64_t work = blocks_unit_work(
      q, r->block_work > 0 ? r->block_work : EXEC_BLOCK_WORK, cells);
  if (blocks_plan(r->pool, q, a->in, a->lo, a->hi, work,
                  max_blocks(r, q, cells), bl) != 0)
    return nomem(err);
  return GALLEY_OK;
}

/* Fold the partial results of blocks 1.. into t (block 0's), value by
 * value, in block order. */
typedef struct Combine {
  const Op *agg;
  double *val;            /* t's values */
  const double *partial;  /* (nblocks - 1) arrays of cells values */
  int64_t nblocks, cells, chunk;
} Combine;

static void combine_task(void *ctx, int64_t c, int w) {
  const Combine *cb = ctx;
  int64_t end = (c + 1) * cb->chunk < cb->cells ? (c + 1) * cb->chunk
                                                : cb->cells;
  for (int64_t p = c * cb->chunk; p < end; p++) {
    double args[2] = {cb->val[p], 0};
    for (int64_t b = 1; b < cb->nblocks; b++) {
      args[1] = cb->partial[(b - 1) * cb->cells + p];
      args[0] = ops_apply(cb->agg, args, 2);
    }
    cb->val[p] = args[0];
  }
}

/* Run query n's kernel into the preallocated result t: every block into
 * t (DISJOINT: blocks own disjoint points), or block 0 into t and every
 * other block into a partial copy of t, combined afterwards (REDUCE). */
static galley_status run_blocks_into(ExecRun *r, int n, kernel_fn fn,
                                     const galley_kernel_args *a,
                                     galley_tensor *t, galley_error *err) {
  const PhysQuery *q = &r->pp->q[n];
  ExecBlocks bl = {0};
  galley_status st = plan_blocks(r, n, a, (double)t->nval, &bl, err);
  if (st != GALLEY_OK)
    return st;
  int reduce = q->part.combine == PART_REDUCE && bl.n > 1;
  int *rc = calloc((size_t)bl.n, sizeof *rc);
  galley_tensor **out = calloc((size_t)bl.n, sizeof *out);
  galley_tensor *views = reduce ? calloc((size_t)bl.n, sizeof *views) : NULL;
  double *partial = reduce ? malloc((size_t)(bl.n - 1) * (size_t)t->nval *
                                    sizeof *partial)
                           : NULL;
  if (!rc || !out || (reduce && (!views || !partial)))
    st = nomem(err);
  for (int64_t b = 0; st == GALLEY_OK && b < bl.n; b++) {
    out[b] = t;
    if (reduce && b > 0) {
      /* a view of t over its own values, starting as t's (the fill) */
      views[b] = *t;
      views[b].cache = NULL;
      views[b].val = partial + (b - 1) * t->nval;
      memcpy(views[b].val, t->val, (size_t)t->nval * sizeof *t->val);
      out[b] = &views[b];
    }
  }
  if (st == GALLEY_OK) {
    BlockJob job = {.fn = fn, .base = a, .q = q, .cut = bl.cut, .out = out,
                    .marks = r->marks, .rc = rc};
    run_block_job(r, &bl, &job);
    st = kernel_status(first_failure(rc, bl.n), q, err);
  }
  if (st == GALLEY_OK && reduce) {
    Combine cb = {.agg = q->agg, .val = t->val, .partial = partial,
                  .nblocks = bl.n, .cells = t->nval, .chunk = 1 << 12};
    /* sleeping workers are woken only for a long fold */
    pool_run_ex(r->pool, (t->nval + cb.chunk - 1) / cb.chunk, combine_task,
                &cb, (double)t->nval * (double)(bl.n - 1) >= (1 << 20));
  }
  free(partial);
  free(views);
  free(out);
  free(rc);
  blocks_free(&bl);
  return st;
}

/* Run query n's kernel into the preallocated result t, which becomes the
 * query's result (or is freed when the kernel fails). */
static galley_status run_into(ExecRun *r, int n, kernel_fn fn,
                              galley_kernel_args *a, galley_tensor *t,
                              galley_error *err) {
  galley_status st = run_blocks_into(r, n, fn, a, t, err);
  if (st != GALLEY_OK)
    galley_tensor_free(t);
  else
    r->res[n] = t;
  return st;
}

/* Values a kernel is trusted to store: under the sanitizers, NaN first,
 * so that a point it misses shows in the differential tests (malloc's
 * memory is often zero, which is most results' fill). */
static void poison_unset(double *val, int64_t n) {
#ifdef GALLEY_SANITIZERS
  memset(val, 0xff, (size_t)n * sizeof *val);
#else
  (void)val;
  (void)n;
#endif
}

/* Whether the kernel of query n stores every value of its result in
 * this run (phys_stores_every_point, over the whole outermost loop: not
 * one process's part of it), so its values need no fill first. */
static int stores_every_point(const ExecRun *r, int n,
                              const galley_kernel_args *a) {
  const PhysQuery *q = &r->pp->q[n];
  return phys_stores_every_point(q) && a->lo == 0 &&
         a->hi == a->dims[q->loops[0]];
}

/* An all-dense result in format f with its values left unset, for a
 * kernel that stores every one of them; cells (the product of odims) is
 * below 2^62, as rt_build_sorted checks. */
static galley_status dense_unset(Recycle *rc, const galley_format *f,
                                 const int64_t *odims, double fill,
                                 galley_tensor **out, galley_error *err) {
  galley_tensor *t = calloc(1, sizeof *t);
  if (!t)
    return nomem(err);
  t->order = f->order;
  t->fill = fill;
  for (int m = 0; m < f->order; m++)
    t->dims[m] = odims[m];
  int64_t npar = 1;
  for (int l = 0; l < f->order; l++) {
    galley_level *L = &t->lvl[l];
    L->kind = GALLEY_RT_DENSE;
    L->mode = f->mode_order[l];
    L->dim = t->dims[L->mode];
    L->npar = npar;
    L->nchild = L->nset = npar * L->dim;
    npar = L->nchild;
  }
  t->nval = npar;
  t->val = recycle_take(rc, npar);
  if (!t->val)
    t->val = malloc((size_t)(npar > 0 ? npar : 1) * sizeof *t->val);
  if (!t->val) {
    galley_tensor_free(t);
    return nomem(err);
  }
  poison_unset(t->val, npar);
  *out = t;
  return GALLEY_OK;
}

/* OUT_DENSE, OUT_ACCUMULATE: a preallocated all-dense result. */
static galley_status run_dense(ExecRun *r, int n, kernel_fn fn,
                               galley_kernel_args *a, const int64_t *odims,
                               galley_error *err) {
  const PhysQuery *q = &r->pp->q[n];
  galley_tensor *t = NULL;
  double cells = 1;
  for (int m = 0; m < q->nout; m++)
    cells *= (double)odims[m];
  galley_status st = over_budget(r, n, 8 * cells, "dense result", err);
  if (st == GALLEY_OK && cells < 0x1p62 && stores_every_point(r, n, a))
    st = dense_unset(r->recycle, &q->out_format, odims, q->out_fill, &t, err);
  else if (st == GALLEY_OK)
    st = rt_build_sorted(q->nout, odims, &q->out_format, q->out_fill, 0, NULL,
                         NULL, &t, err);
  return st == GALLEY_OK ? run_into(r, n, fn, a, t, err) : st;
}

/* Setting values to one value, in chunks on the pool. */
typedef struct Fill {
  double *val;
  double value;
  int64_t n, chunk;
} Fill;

static void fill_task(void *ctx, int64_t c, int w) {
  const Fill *f = ctx;
  int64_t end = (c + 1) * f->chunk < f->n ? (c + 1) * f->chunk : f->n;
  for (int64_t p = c * f->chunk; p < end; p++)
    f->val[p] = f->value;
}

#define FILL_CHUNK ((int64_t)1 << 16)

/* Fills and copies of fewer values run on the caller alone. */
#define PARALLEL_COPY_MIN ((int64_t)1 << 20)

/* A copy of bytes from src to dst in chunks on the pool (one job per
 * array; a short copy on the caller alone). */
typedef struct Copy {
  char *dst;
  const char *src;
  size_t bytes, chunk;
} Copy;

#define COPY_CHUNK ((size_t)1 << 18)

static void copy_task(void *ctx, int64_t c, int w) {
  (void)w;
  const Copy *cp = ctx;
  size_t at = (size_t)c * cp->chunk;
  size_t n = cp->bytes - at < cp->chunk ? cp->bytes - at : cp->chunk;
  memcpy(cp->dst + at, cp->src + at, n);
}

static void copy_on_pool(GalleyPool *pool, void *dst, const void *src,
                         size_t bytes) {
  Copy cp = {dst, src, bytes, COPY_CHUNK};
  int64_t chunks = (int64_t)((bytes + COPY_CHUNK - 1) / COPY_CHUNK);
  pool_run_ex(chunks >= 2 ? pool : NULL, chunks, copy_task, &cp,
              chunks >= EXEC_WAKE_BLOCKS);
}

/* A new tensor with the levels of src as the result format f lays them
 * out (kinds dense or list: the list arrays copied; f's levels past
 * src's order are dense, of the result's sizes) and, when preset,
 * every value the fill (else unset: the kernel stores every one), for a
 * kernel that writes its values at src's positions. */
static galley_status pattern_result(GalleyPool *pool, Recycle *rc,
                                    const galley_tensor *src,
                                    const galley_format *f,
                                    const int64_t *odims, double fill,
                                    int preset, galley_tensor **out,
                                    galley_error *err) {
  galley_tensor *t = calloc(1, sizeof *t);
  if (!t)
    return nomem(err);
  t->order = f->order;
  for (int m = 0; m < f->order; m++)
    t->dims[m] = odims[m];
  t->fill = fill;
  int64_t npar = 1;
  int ok = 1;
  for (int l = 0; l < f->order && ok; l++) {
    const galley_level *S = &src->lvl[l];
    galley_level *L = &t->lvl[l];
    L->kind = f->kinds[l] == GALLEY_DENSE ? GALLEY_RT_DENSE : GALLEY_RT_LIST;
    L->mode = f->mode_order[l];
    /* levels past the source's: the dense suffix (output.c) */
    L->dim = l < src->order ? S->dim : odims[L->mode];
    L->npar = npar;
    if (L->kind == GALLEY_RT_DENSE) {
      L->nchild = L->nset = npar * L->dim; /* as the source (bounded) */
    } else {
      /* a copy of the source's arrays, of the source's width */
      size_t w = S->idx32 ? sizeof(int32_t) : sizeof(int64_t);
      void *pos = malloc((size_t)(npar + 1) * w);
      L->nchild = L->nset = galley_rt_pos(S, npar);
      void *crd = malloc((size_t)(L->nset > 0 ? L->nset : 1) * w);
      L->idx32 = S->idx32;
      if (S->idx32) {
        L->pos32 = pos;
        L->crd32 = crd;
      } else {
        L->pos = pos;
        L->crd = crd;
      }
      ok = pos && crd;
      if (ok) {
        copy_on_pool(pool, pos, S->idx32 ? (void *)S->pos32 : (void *)S->pos,
                     (size_t)(npar + 1) * w);
        copy_on_pool(pool, crd, S->idx32 ? (void *)S->crd32 : (void *)S->crd,
                     (size_t)L->nset * w);
      }
    }
    npar = L->nchild;
  }
  t->nval = npar;
  t->val = ok ? recycle_take(rc, npar) : NULL;
  if (ok && !t->val)
    t->val = malloc((size_t)(npar > 0 ? npar : 1) * sizeof *t->val);
  if (!t->val) {
    galley_tensor_free(t);
    return nomem(err);
  }
  /* on the pool only when large: each job waits for its slowest thread */
  Fill fl = {.val = t->val, .value = fill, .n = npar, .chunk = FILL_CHUNK};
  if (preset)
    pool_run(npar >= PARALLEL_COPY_MIN ? pool : NULL,
             (npar + FILL_CHUNK - 1) / FILL_CHUNK, fill_task, &fl);
  else
    poison_unset(t->val, npar);
  *out = t;
  return GALLEY_OK;
}

/* OUT_PATTERN: the result copies the pattern access's levels (and
 * repeats its values for each point of a dense suffix). */
static galley_status run_pattern(ExecRun *r, int n, kernel_fn fn,
                                 galley_kernel_args *a, const int64_t *odims,
                                 galley_error *err) {
  const PhysQuery *q = &r->pp->q[n];
  galley_tensor *t = NULL;
  double bytes = (double)galley_tensor_bytes(a->in[q->pattern]);
  for (int l = a->in[q->pattern]->order; l < q->out_format.order; l++)
    bytes *= (double)odims[q->out_format.mode_order[l]];
  galley_status st = over_budget(r, n, bytes, "result (a copy of its pattern)", err);
  if (st == GALLEY_OK)
    st = pattern_result(r->pool, r->recycle, a->in[q->pattern], &q->out_format, odims,
                        q->out_fill, !stores_every_point(r, n, a), &t, err);
  return st == GALLEY_OK ? run_into(r, n, fn, a, t, err) : st;
}

/* Whether a rows-mode result may be split into blocks that share the
 * count per parent: its first level stores the outermost loop's index,
 * so blocks count disjoint parents, in order. */
static int rows_split(const PhysQuery *q) {
  const galley_format *f = &q->out_format;
  return f->order >= 2 && q->nloops > 0 &&
         q->out[f->mode_order[0]] == q->loops[0];
}

/* Put every block's sink in rows mode over one count array (sinks[0]'s). */
static int sinks_rows_mode(BudgetSink *sinks, int64_t nb, const PhysQuery *q,
                           const int64_t *odims) {
  if (sink_rows_mode(&sinks[0].s, q, odims) != 0)
    return -1;
  for (int64_t b = 1; b < nb; b++) {
    galley_rt_sink *s = &sinks[b].s;
    memcpy(s->modes, sinks[0].s.modes, sizeof s->modes);
    memcpy(s->ldims, sinks[0].s.ldims, sizeof s->ldims);
    s->pos = sinks[0].s.pos;
    s->rows = 1;
    s->rows32 = sinks[0].s.rows32;
    s->disorder = 0;
    s->last_p = s->last_c = -1;
  }
  return 0;
}

/* Back to the plain mode, empty, for a rerun (the coordinates of an
 * entry take order slots again); 0, or -1 when out of memory. */
static int sinks_plain_mode(BudgetSink *sinks, int64_t nb) {
  free(sinks[0].s.pos);
  int ok = 1;
  for (int64_t b = 0; b < nb; b++) {
    galley_rt_sink *s = &sinks[b].s;
    s->pos = NULL;
    s->rows = s->disorder = s->rows32 = 0;
    free(s->crd32);
    s->crd32 = NULL;
    s->n = 0;
    if (s->cap > 0 && sink_grow(s, s->cap) != 0)
      ok = 0;
  }
  return ok ? 0 : -1;
}

/* Bytes of one entry's coordinates in s. */
static size_t sink_crd_bytes(const galley_rt_sink *s) {
  if (s->rows32)
    return sizeof *s->crd32;
  return (size_t)(s->rows || s->order < 1 ? 1 : s->order) * sizeof *s->crd;
}

/* Arrays for a worker's sink s from the pool's kept scratch (the pages
 * a previous run faulted in), when it keeps two; s is empty. */
static void sink_adopt(GalleyPool *pool, galley_rt_sink *s, int64_t want) {
  size_t cb = sink_crd_bytes(s), gv, gc;
  void *val = pool_scratch_take(pool, (size_t)want * sizeof *s->val, &gv);
  void *crd = pool_scratch_take(pool, (size_t)want * cb, &gc);
  if (!val || !crd || s->cap > 0) {
    pool_scratch_give(pool, val, gv);
    pool_scratch_give(pool, crd, gc);
    return;
  }
  s->val = val;
  if (s->rows32)
    s->crd32 = crd;
  else
    s->crd = crd;
  s->cap = (int64_t)(gv / sizeof *s->val < gc / cb ? gv / sizeof *s->val
                                                   : gc / cb);
}

/* Give a worker's sink's arrays back to the pool's kept scratch. */
static void sink_release(GalleyPool *pool, galley_rt_sink *s) {
  size_t cap = (size_t)(s->cap > 0 ? s->cap : 0);
  pool_scratch_give(pool, s->val, cap * sizeof *s->val);
  pool_scratch_give(pool, s->rows32 ? (void *)s->crd32 : (void *)s->crd,
                    cap * sink_crd_bytes(s));
  if (s->rows32)
    free(s->crd);
  else
    free(s->crd32);
  s->val = NULL;
  s->crd = NULL;
  s->crd32 = NULL;
}

static void sinks_free(BudgetSink *sinks, int64_t nb) {
  for (int64_t b = 1; b < nb; b++)
    sinks[b].s.pos = NULL; /* block 0's counts (or none) */
  for (int64_t b = 0; b < nb; b++)
    sink_free(&sinks[b].s);
}

typedef struct Placement Placement;

/* A rows-mode result's offsets, made by the blocks' concatenation: the
 * parents of block b are [cut[b] * inner, cut[b + 1] * inner) (its first
 * level is the outermost loop's index: rows_split), so each block turns
 * its own counts into offsets from its first entry in the result, on its
 * thread, and writes the 32-bit copy when the result is rows32. */
typedef struct RowsOffsets {
  int64_t *pos;         /* npar + 1: counts per parent in, offsets out */
  int32_t *pos32;       /* npar + 1 32-bit offsets out, or NULL */
  const int64_t *cut;   /* the blocks' coordinates */
  int64_t inner, npar;  /* parents per coordinate, parents */
} RowsOffsets;

/* The offsets a split rows-mode sink's blocks make (RowsOffsets). */
static RowsOffsets rows_offsets(galley_rt_sink *s, const PhysQuery *q,
                                const int64_t *cut) {
  int order = q->out_format.order;
  RowsOffsets ro = {.pos = s->pos, .cut = cut, .inner = 1, .npar = 1};
  for (int l = 0; l + 1 < order; l++) {
    ro.npar *= s->ldims[l];
    if (l > 0)
      ro.inner *= s->ldims[l];
  }
  return ro;
}

/* Copying the blocks' entries to their offsets in the result's arrays,
 * those of one sink (`target`: its blocks are in place already) or new
 * ones (target -1) of the exact total size (one pool job: the copies are
 * disjoint), and making a rows-mode result's offsets. */
typedef struct Concat {
  const BudgetSink *sinks;
  const SinkSeg *seg;
  const int64_t *at; /* per block: its first entry in the result */
  int target;        /* the sink that becomes the result, or -1 */
  int width;         /* coordinates per entry */
  int64_t *crd;      /* the result's coordinates: 64-bit ... */
  int32_t *crd32;    /* ... or 32-bit (rows mode, every sink rows32) */
  double *val;
  const RowsOffsets *ro; /* or NULL */
  const struct Placement *pl; /* blocks placed already are not copied,
                                 or NULL */
} Concat;

static int block_placed(const BudgetSink *sinks, const SinkSeg *seg,
                        const int64_t *at, const struct Placement *pl,
                        int64_t b);

/* Block b's counts to offsets (Concat.ro). */
static void block_offsets(const Concat *c, int64_t b) {
  const RowsOffsets *ro = c->ro;
  int64_t lo = ro->cut[b] * ro->inner, hi = ro->cut[b + 1] * ro->inner;
  int64_t off = c->at[b];
  for (int64_t p = lo; p < hi; p++) {
    off += ro->pos[p + 1];
    ro->pos[p + 1] = off;
  }
  for (int64_t p = lo; ro->pos32 && p < hi; p++)
    ro->pos32[p + 1] = (int32_t)ro->pos[p + 1];
}

static void concat_task(void *ctx, int64_t b, int w) {
  (void)w;
  const Concat *c = ctx;
  const SinkSeg *g = &c->seg[b];
  const galley_rt_sink *t = &c->sinks[g->sink].s;
  int64_t at = c->at[b], from = g->start, n = g->n;
  if (c->ro)
    block_offsets(c, b);
  if (n == 0 || g->sink == c->target ||
      (c->pl && block_placed(c->sinks, c->seg, c->at, c->pl, b)))
    return;
  if (c->crd32)
    memcpy(c->crd32 + at, t->crd32 + from, (size_t)n * sizeof *t->crd32);
  else if (t->rows32)
    for (int64_t e = 0; e < n; e++)
      c->crd[at + e] = t->crd32[from + e];
  else
    memcpy(c->crd + at * c->width, t->crd + from * c->width,
           (size_t)(n * c->width) * sizeof *t->crd);
  memcpy(c->val + at, t->val + from, (size_t)n * sizeof *t->val);
}

/* Whether every block in sink k lies at its place in the result. */
static int sink_in_place(int k, const SinkSeg *seg, const int64_t *at,
                         int64_t nb) {
  for (int64_t b = 0; b < nb; b++)
    if (seg[b].sink == k && seg[b].n > 0 && seg[b].start != at[b])
      return 0;
  return 1;
}

/* The sink whose arrays become the result's, its blocks in place and its
 * coordinates wide enough for every entry: sink 0 (holding the first
 * blocks) or the one sink holding every entry; -1 when none. */
static int sinks_target(const BudgetSink *sinks, int ns, const SinkSeg *seg,
                        const int64_t *at, int64_t nb, int64_t total) {
  int single = -1, all32 = total <= GALLEY_RT_IDX32_MAX_NSET;
  for (int k = 0; k < ns; k++) {
    all32 &= sinks[k].s.rows32 || sinks[k].s.n == 0;
    if (sinks[k].s.n > 0)
      single = single == -1 ? k : -2;
  }
  int k = single >= 0 ? single : 0;
  if (!sink_in_place(k, seg, at, nb) || (sinks[k].s.rows32 && !all32))
    return -1;
  return k;
}

/* ------------------------------------------------------------------ */
/* Placing the blocks' entries where the result wants them             */
/* ------------------------------------------------------------------ */

/* Copying the entries of the other threads' blocks after theirs (the
 * concatenation) reads and writes the whole result once more; for
 * SpGEMM on two threads half the result, 43 MB for pgp-strong-2009.  A
 * repeated run knows better: each thread's own blocks (pool_run_owned's
 * ranges) appended as many entries last time, noted with an input
 * (rt_tensor_note_sizes), so the result's arrays are made at that size
 * and each thread's sink starts as a view at its range's offset in
 * them.  A view that would pass its end moves out first (its own arrays:
 * sink_grow_view), so views never overlap; after the run every block
 * whose entries lie where the result wants them stays, the others are
 * copied in, and when the guess was wrong anywhere (a view moved out, or
 * a range shorter than noted) the views are copied out and the plain
 * concatenation runs: only the time differs, never the result. */
/* Placement is measured off for now: in the lead's quiet run (session 7,
 * load ~1.5, 2 threads) it took pgp-strong-2009's A*A from 29.5 to
 * 25.8-27.0 ms but xenon1's from 23.6 to 33.7-36.8 ms, with every guess
 * right, so the plain concatenation runs until the cause is found. */
#define PLACEMENT_ON 0

struct Placement {
  double *val;           /* the result's arrays, NULL: no placement */
  int32_t *crd32;
  int64_t cap;           /* entries they hold */
  const galley_tensor *anchor; /* the input the sizes are noted with */
  int64_t tag;           /* what they depend on (the cut, threads) */
  int wrong;             /* the guess was wrong: the views were copied
                            out before the plain concatenation */
};

/* Moving a view sink out into arrays of its own, then growing it. */
static int sink_grow_view(galley_rt_sink *s, int64_t need) {
  BudgetSink *b = (BudgetSink *)s;
  if (b->view) {
    int64_t cap = s->cap > 64 ? s->cap : 64;
    double *val = malloc((size_t)cap * sizeof *val);
    int32_t *crd32 = malloc((size_t)cap * sizeof *crd32);
    if (!val || !crd32) {
      free(val);
      free(crd32);
      return -1;
    }
    memcpy(val, s->val, (size_t)s->n * sizeof *val);
    memcpy(crd32, s->crd32, (size_t)s->n * sizeof *crd32);
    s->val = val;
    s->crd32 = crd32;
    s->cap = cap;
    b->view = 0;
  }
  s->grow = sink_grow;
  return sink_grow(s, need);
}

/* The tag of the sizes: the blocks' coordinates and the thread count. */
static int64_t placement_tag(const ExecBlocks *bl, int nw) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)nw;
  for (int64_t b = 0; b <= bl->n; b++)
    h = (h ^ (uint64_t)bl->cut[b]) * 1099511628211ull;
  return (int64_t)(h >> 1); /* never -1 */
}

/* The input whose cache keeps query q's sizes: its first bound one. */
static const galley_tensor *placement_anchor(const PhysQuery *q,
                                             const galley_kernel_args *a) {
  for (int k = 0; k < q->nacc; k++)
    if (q->acc[k].is_input && a->in[k])
      return a->in[k];
  return NULL;
}

/* Results of fewer entries are concatenated. */
#define PLACE_MIN ((int64_t)1 << 16)

/* Make the own sinks of the nw workers views into the result's arrays at
 * the offsets last run's sizes give (sinks empty, rows32); pl->val NULL
 * when there are none or no memory. */
static void placement_setup(const PhysQuery *q, const galley_kernel_args *a,
                            const ExecBlocks *bl, BudgetSink *sinks, int nw,
                            Recycle *recycle, Placement *pl) {
  memset(pl, 0, sizeof *pl);
  pl->anchor = placement_anchor(q, a);
  pl->tag = placement_tag(bl, nw);
  int64_t size[64], total = 0;
  if (!PLACEMENT_ON || !pl->anchor || nw > 64 ||
      !rt_tensor_noted_sizes(pl->anchor, q, pl->tag, size, nw))
    return;
  for (int w = 0; w < nw; w++) {
    if (size[w] < 0) /* a guess was wrong before (placement_give_up) */
      return;
    total += size[w];
  }
  if (total < PLACE_MIN || total > GALLEY_RT_IDX32_MAX_NSET)
    return;
  /* (the last run's result values, pages already faulted, when they
   * are there) */
  pl->val = recycle ? recycle_take(recycle, total) : NULL;
  if (!pl->val)
    pl->val = malloc((size_t)total * sizeof *pl->val);
  pl->crd32 = malloc((size_t)total * sizeof *pl->crd32);
  if (!pl->val || !pl->crd32) {
    free(pl->val);
    free(pl->crd32);
    pl->val = NULL;
    pl->crd32 = NULL;
    return;
  }
  galley_rt_hint_huge(pl->val, (size_t)total * sizeof *pl->val);
  galley_rt_hint_huge(pl->crd32, (size_t)total * sizeof *pl->crd32);
  pl->cap = total;
  int64_t off = 0;
  for (int w = 0; w < nw; w++) {
    galley_rt_sink *s = &sinks[w].s;
    s->val = pl->val + off;
    s->crd32 = pl->crd32 + off;
    s->cap = size[w] > 0 ? size[w] : 0;
    s->n = 0;
    s->grow = sink_grow_view;
    sinks[w].view = 1;
    off += s->cap;
  }
}

/* Forget the views (their arrays are the placement's) and free the
 * placement's arrays unless the result took them. */
static void placement_drop(BudgetSink *sinks, int nw, Placement *pl) {
  for (int w = 0; w < nw; w++)
    if (sinks[w].view) {
      sinks[w].s.val = NULL;
      sinks[w].s.crd32 = NULL;
      sinks[w].s.cap = sinks[w].s.n = 0;
      sinks[w].s.grow = sink_grow;
      sinks[w].view = 0;
    }
  free(pl->val);
  free(pl->crd32);
  pl->val = NULL;
  pl->crd32 = NULL;
}

/* Move every view's entries into arrays of its own (a wrong guess: the
 * plain concatenation follows); 0, or -1 when out of memory. */
static int placement_detach(BudgetSink *sinks, int nw, Placement *pl) {
  int rc = 0;
  for (int w = 0; w < nw; w++)
    if (sinks[w].view) {
      galley_rt_sink *s = &sinks[w].s;
      if (sink_grow_view(s, s->n > 0 ? s->n : 1) != 0)
        rc = -1;
    }
  placement_drop(sinks, nw, pl);
  return rc;
}

/* Note the entries of each thread's range of blocks for the next run. */
static void placement_note(const Placement *pl, const PhysQuery *q,
                           const SinkSeg *seg, int64_t nb, int nw) {
  if (!pl->anchor || nw > 64)
    return;
  int64_t size[64];
  for (int w = 0; w < nw; w++) {
    size[w] = 0;
    for (int64_t b = pool_range_start(nb, nw, w);
         b < pool_range_start(nb, nw, w + 1); b++)
      size[w] += seg[b].n;
  }
  rt_tensor_note_sizes(pl->anchor, q, pl->tag, size, nw);
}

/* A wrong guess costs a copy of the views more than no guess: when the
 * threads took other blocks than last time (stealing that varies from
 * run to run, as on xenon1's A*A), later runs of this query and cut do
 * not place again (their noted sizes are -1). */
static void placement_give_up(const Placement *pl, const PhysQuery *q,
                              int nw) {
  if (!pl->anchor || nw > 64)
    return;
  int64_t never[64];
  for (int w = 0; w < nw; w++)
    never[w] = -1;
  rt_tensor_note_sizes(pl->anchor, q, pl->tag, never, nw);
}

/* Whether block b's entries lie where the result wants them (at[b] of
 * the placement's arrays). */
static int block_placed(const BudgetSink *sinks, const SinkSeg *seg,
                        const int64_t *at, const Placement *pl, int64_t b) {
  const BudgetSink *k = &sinks[seg[b].sink];
  return k->view && k->s.val + seg[b].start == pl->val + at[b];
}

/* Entries copied by one thread below which a concatenation stays on the
 * caller, and from which it wakes sleeping workers (those still spinning
 * after the kernel's blocks take part either way). */
#define CONCAT_SHARE_MIN ((int64_t)1 << 14)

/* Run the concatenation job c over the nb blocks: on the pool when it
 * moves enough (`work`: entries copied plus offsets made). */
static void concat_run(GalleyPool *pool, Concat *c, int64_t nb,
                       int64_t work) {
  pool_run_ex(work >= CONCAT_SHARE_MIN ? pool : NULL, nb, concat_task, c,
              work >= PARALLEL_COPY_MIN);
}

/* The offsets of the parents outside every block (a process's part of
 * the loop: none of its entries), after concat_run made the others. */
static void outside_offsets(const RowsOffsets *ro, int64_t nb,
                            int64_t total) {
  for (int64_t p = 0; p < ro->cut[0] * ro->inner; p++)
    ro->pos[p + 1] = 0;
  for (int64_t p = ro->cut[nb] * ro->inner; p < ro->npar; p++)
    ro->pos[p + 1] = total;
  ro->pos[0] = 0;
  if (!ro->pos32)
    return;
  ro->pos32[0] = 0;
  for (int64_t p = 0; p < ro->cut[0] * ro->inner; p++)
    ro->pos32[p + 1] = 0;
  for (int64_t p = ro->cut[nb] * ro->inner; p < ro->npar; p++)
    ro->pos32[p + 1] = (int32_t)total;
}

/* sinks_concat with a placement: 0 when the result is in pl's arrays
 * (sinks[0] holds them), -1 when out of memory, 1 when the guess was
 * wrong (the views moved out into arrays of their own, pl freed). */
static int placed_concat(GalleyPool *pool, BudgetSink *sinks, int nw,
                         const SinkSeg *seg, int64_t nb, const int64_t *at,
                         int64_t total, RowsOffsets *ro, int32_t **pos32,
                         Placement *pl) {
  int ok = total <= pl->cap;
  for (int64_t b = 0; ok && b < nb; b++)
    ok = seg[b].n == 0 || (sinks[seg[b].sink].s.rows32 &&
                           (!sinks[seg[b].sink].view ||
                            block_placed(sinks, seg, at, pl, b)));
  if (!ok) {
    pl->wrong = 1;
    return placement_detach(sinks, nw, pl) == 0 ? 1 : -1;
  }
  if (ro) {
    ro->pos32 = malloc((size_t)(ro->npar + 1) * sizeof *ro->pos32);
    if (!ro->pos32)
      return -1;
    *pos32 = ro->pos32;
  }
  Concat c = {.sinks = sinks, .seg = seg, .at = at, .target = -1,
              .width = 1, .crd32 = pl->crd32, .val = pl->val, .ro = ro,
              .pl = pl};
  int64_t moved = ro ? ro->npar : 0;
  for (int64_t b = 0; b < nb; b++)
    moved += block_placed(sinks, seg, at, pl, b) ? 0 : seg[b].n;
  concat_run(pool, &c, nb, moved);
  if (ro)
    outside_offsets(ro, nb, total);
  /* sinks[0] takes the arrays (its own, when it moved out, freed) */
  galley_rt_sink *s = &sinks[0].s;
  if (!sinks[0].view) {
    free(s->val);
    free(s->crd32);
  }
  free(s->crd);
  s->crd = NULL;
  sinks[0].view = 0;
  double *val = pl->val;
  int32_t *crd32 = pl->crd32;
  pl->val = NULL;
  pl->crd32 = NULL;
  placement_drop(sinks, nw, pl); /* the other views */
  s->val = val;
  s->crd32 = crd32;
  s->cap = pl->cap;
  s->n = total;
  s->rows32 = 1;
  s->grow = sink_grow;
  return 0;
}

/* Gather the blocks' entries into sinks[0], in block order: into the
 * arrays of sinks_target's sink, grown to the total, else into arrays of
 * the exact size (32-bit coordinates when every sink's are and the total
 * fits).  With ro (rows mode), also the offsets in ro->pos and, when the
 * result is rows32, in *pos32 (made here; NULL otherwise).  0, or -1
 * when out of memory or over the budget (sinks[0].over says which). */
static int sinks_concat(GalleyPool *pool, BudgetSink *sinks, int ns,
                        SinkSeg *seg, int64_t nb, RowsOffsets *ro,
                        int32_t **pos32, Placement *pl) {
  int64_t *at = malloc((size_t)nb * sizeof *at);
  if (!at)
    return -1;
  int64_t total = 0;
  for (int64_t b = 0; b < nb; b++) {
    at[b] = total;
    total += seg[b].n;
  }
  if (pl->val) {
    int rc = placed_concat(pool, sinks, ns / 2, seg, nb, at, total, ro,
                           pos32, pl);
    if (rc <= 0) {
      free(at);
      return rc;
    }
    /* a wrong guess: the views' entries moved out, concatenated below */
  }
  int target = sinks_target(sinks, ns, seg, at, nb, total);
  if (target > 0) { /* the same count array (rows mode) in both */
    BudgetSink t = sinks[0];
    sinks[0] = sinks[target];
    sinks[target] = t;
    for (int64_t b = 0; b < nb; b++)
      if (seg[b].sink == 0 || seg[b].sink == target)
        seg[b].sink = seg[b].sink == 0 ? target : 0;
    target = 0;
  }
  galley_rt_sink *s = &sinks[0].s;
  int width = s->rows || s->order < 1 ? 1 : s->order;
  Concat c = {.sinks = sinks, .seg = seg, .at = at, .target = target,
              .width = width, .ro = ro};
  int all32 = total <= GALLEY_RT_IDX32_MAX_NSET;
  for (int w = 0; w < ns; w++)
    all32 &= sinks[w].s.rows32;
  int rows32 = target == 0 ? s->rows32 : all32 && s->rows;
  if (ro && rows32) {
    ro->pos32 = malloc((size_t)(ro->npar + 1) * sizeof *ro->pos32);
    if (!ro->pos32) {
      free(at);
      return -1;
    }
    *pos32 = ro->pos32;
  }
  int64_t offsets = ro ? ro->npar : 0;
  if (target == 0) {
    int rc = total > s->cap ? sink_resize(s, total, total) : 0;
    if (rc == 0 && (total > s->n || ro)) {
      c.crd = s->crd;
      c.crd32 = s->rows32 ? s->crd32 : NULL;
      c.val = s->val;
      concat_run(pool, &c, nb, total - s->n + offsets);
      s->n = total;
    }
    if (rc == 0 && ro)
      outside_offsets(ro, nb, total);
    free(at);
    return rc;
  }
  double bytes = (double)(total > 0 ? total : 1) * (8 + (all32 ? 4 : 8 * width));
  if (sinks[0].budget > 0 && bytes > sinks[0].budget) {
    sinks[0].over = 1;
    sinks[0].wanted = bytes;
    free(at);
    return -1;
  }
  size_t cap = (size_t)(total > 0 ? total : 1);
  c.val = malloc(cap * sizeof *c.val);
  if (all32)
    c.crd32 = malloc(cap * sizeof *c.crd32);
  else
    c.crd = malloc(cap * (size_t)width * sizeof *c.crd);
  galley_rt_hint_huge(c.val, cap * sizeof *c.val);
  galley_rt_hint_huge(c.crd32, cap * sizeof *c.crd32);
  galley_rt_hint_huge(c.crd, cap * (size_t)width * sizeof *c.crd);
  if (!c.val || (!c.crd32 && !c.crd)) {
    free(c.val);
    free(c.crd32);
    free(c.crd);
    free(at);
    return -1;
  }
  concat_run(pool, &c, nb, total + offsets);
  if (ro)
    outside_offsets(ro, nb, total);
  free(s->crd);
  free(s->crd32);
  free(s->val);
  s->crd = c.crd;
  s->crd32 = c.crd32;
  s->val = c.val;
  s->rows32 = all32 && s->rows;
  s->n = total;
  s->cap = (int64_t)cap;
  free(at);
  return 0;
}

/* OUT_APPEND, OUT_SCATTER: a sink per block (in rows mode when the plan
 * says so, rerun plainly should entries arrive out of order), and for a
 * scatter a workspace per thread; the blocks' entries concatenated in
 * block order, then laid out. */
static galley_status run_sink(ExecRun *r, int n, kernel_fn fn,
                              galley_kernel_args *a, const int64_t *odims,
                              galley_error *err) {
  const PhysQuery *q = &r->pp->q[n];
  ExecBlocks bl = {0};
  galley_status st = plan_blocks(r, n, a, 1, &bl, err);
  if (st != GALLEY_OK)
    return st;
  int64_t nb = bl.n;
  int nw = pool_threads(r->pool);
  /* two sinks per worker: for its own blocks and the ones it takes */
  int ns = 2 * nw;
  BudgetSink *sinks = calloc((size_t)ns, sizeof *sinks);
  SinkSeg *seg = calloc((size_t)nb, sizeof *seg);
  int *rc = calloc((size_t)nb, sizeof *rc);
  galley_rt_ws *ws = q->out_kind == OUT_SCATTER ? calloc((size_t)nw, sizeof *ws)
                                                : NULL;
  unsigned char *ws_ready = calloc((size_t)nw, 1);
  if (!sinks || !seg || !rc || !ws_ready ||
      (q->out_kind == OUT_SCATTER && !ws))
    st = nomem(err);
  /* the caller's workspace first, for the error of a key space too
   * large; then those of the workers that will run blocks, made here
   * too: memory the caller's thread allocates comes back to it when
   * freed and is reused by the next run without page faults, while a
   * worker's own arena returns it to the system */
  for (int w = 0; st == GALLEY_OK && ws && w < nw && w < nb; w++) {
    st = ws_init(q, a->dims, r->pool, &ws[w], err);
    ws_ready[w] = st == GALLEY_OK;
  }
  for (int w = 0; st == GALLEY_OK && w < ns; w++) {
    sinks[w].s.order = q->nout;
    sinks[w].s.grow = sink_grow;
    sinks[w].budget = r->pp->memory_budget;
  }
  /* room for the estimated entries up front (at most 2^24: the pages are
   * touched only as entries arrive), so that large results are not
   * copied by repeated doubling */
  double want = q->has_est && q->est_nnz > 0
                    ? q->est_nnz / (double)(nb < nw ? nb : nw) : 0;
  if (want > SINK_PRESIZE_MAX)
    want = SINK_PRESIZE_MAX;
  int rows = q->out_rows && (nb == 1 || rows_split(q));
  if (st == GALLEY_OK && rows && sinks_rows_mode(sinks, ns, q, odims) != 0)
    st = nomem(err);
  /* a repeated run places each thread's entries in the result's arrays
   * (Placement) */
  Placement pl = {0};
  int split_rows = rows && rows_split(q);
  int32_t *pos32 = NULL;
  if (st == GALLEY_OK && split_rows && nb > 1 && nw > 1 && sinks[0].s.rows32)
    placement_setup(q, a, &bl, sinks, nw, r->recycle, &pl);
  /* room up front for the sinks that will be used (the others grow if
   * a worker takes more blocks than expected) */
  for (int w = 1; st == GALLEY_OK && !pl.val && want > 64 && w < nw && w < nb;
       w++)
    sink_adopt(r->pool, &sinks[w].s, (int64_t)want); /* faulted pages */
  for (int w = 0; st == GALLEY_OK && !pl.val && want > 64 && w < nw && w < nb;
       w++) {
    /* sink 0 becomes the result (sinks_concat): room for all of it */
    double room = w == 0 && q->has_est ? q->est_nnz : want;
    if (room > SINK_PRESIZE_MAX)
      room = SINK_PRESIZE_MAX;
    if (sinks[w].s.cap >= (int64_t)room) /* adopted */
      continue;
    if (sink_grow(&sinks[w].s, (int64_t)room) != 0) {
      if (sinks[w].over) /* room up front is a guess: grow as entries come */
        sinks[w].over = 0;
      else
        st = nomem(err);
    }
  }
  /* the sinks of taken blocks: room for two blocks' share (a growing
   * sink copies its entries), from the kept scratch when it has it; and
   * a little for the others, so that they too grow in the caller's arena
   * (realloc keeps a block in the arena that made it) */
  double taken = want > 64 ? 2 * want * (double)(nb < nw ? nb : nw) / nb : 0;
  for (int k = nw; st == GALLEY_OK && taken > 64 && nb > 1 && k < ns; k++) {
    sink_adopt(r->pool, &sinks[k].s, (int64_t)taken);
    if (sinks[k].s.cap < (int64_t)taken &&
        sink_grow(&sinks[k].s, (int64_t)taken) != 0)
      sinks[k].over = 0; /* a guess: grow as entries come */
  }
  for (int k = 0; st == GALLEY_OK && nb > 1 && k < ns; k++)
    if (sinks[k].s.cap == 0 && !sinks[k].view &&
        sink_grow(&sinks[k].s, 64) != 0)
      st = nomem(err);
  BlockJob job = {.fn = fn, .base = a, .q = q, .cut = bl.cut,
                  .sinks = sinks, .nw = nw, .nb = nb, .seg = seg, .ws = ws,
                  .ws_ready = ws_ready,
                  .marks = r->marks, .rc = rc};
  int code = GALLEY_RT_OK;
  if (st == GALLEY_OK) {
    run_block_job(r, &bl, &job);
    code = first_failure(rc, nb);
  }
  if (st == GALLEY_OK && code == GALLEY_RT_DISORDER && rows) {
    /* entries out of level order: again, in the plain mode */
    rows = 0;
    split_rows = 0;
    placement_drop(sinks, nw, &pl);
    if (sinks_plain_mode(sinks, ns) != 0) {
      st = nomem(err);
    } else {
      memset(rc, 0, (size_t)nb * sizeof *rc);
      run_block_job(r, &bl, &job);
      code = first_failure(rc, nb);
    }
  }
  int over = 0;
  double wanted = 0;
  for (int w = 0; w < ns && sinks; w++)
    if (sinks[w].over && !over) {
      over = 1;
      wanted = sinks[w].wanted;
    }
  if (st == GALLEY_OK && code == GALLEY_RT_NOMEM && over)
    st = over_budget(r, n, wanted, "sparse result", err);
  if (st == GALLEY_OK)
    st = kernel_status(code, q, err);
  /* a split rows-mode result's offsets are made by the blocks, in the
   * concatenation's job */
  RowsOffsets ro = {0};
  if (st == GALLEY_OK && split_rows)
    ro = rows_offsets(&sinks[0].s, q, bl.cut);
  if (st == GALLEY_OK && split_rows && nb > 1 && nw > 1)
    placement_note(&pl, q, seg, nb, nw);
  if (st == GALLEY_OK && sinks_concat(r->pool, sinks, ns, seg, nb,
                                      split_rows ? &ro : NULL, &pos32,
                                      &pl) != 0)
    st = sinks[0].over ? over_budget(r, n, sinks[0].wanted, "sparse result",
                                     err)
                       : nomem(err);
  if (st == GALLEY_OK && pl.wrong)
    placement_give_up(&pl, q, nw);
  if (st == GALLEY_OK && rows)
    st = sink_rows_tensor(&sinks[0].s, q, odims, split_rows, &pos32,
                          &r->res[n], err);
  else if (st == GALLEY_OK)
    st = build_from_sink(q, odims, &sinks[0].s, &r->res[n], err);
  free(pos32);
  for (int w = 0; ws && w < nw; w++)
    ws_release(r->pool, &ws[w]);
  if (sinks)
    placement_drop(sinks, nw, &pl);
  for (int k = 1; sinks && nb > 1 && k < ns; k++)
    sink_release(r->pool, &sinks[k].s);
  if (sinks)
    sinks_free(sinks, ns);
  free(ws);
  free(ws_ready);
  free(sinks);
  free(seg);
  free(rc);
  blocks_free(&bl);
  return st;
}

/* Call the kernel as its output strategy needs. */
static galley_status call_kernel(ExecRun *r, int n, kernel_fn fn,
                                 galley_kernel_args *a, const int64_t *odims,
                                 galley_error *err) {
  switch (r->pp->q[n].out_kind) {
  case OUT_DENSE:
  case OUT_ACCUMULATE:
    return run_dense(r, n, fn, a, odims, err);
  case OUT_PATTERN:
    return run_pattern(r, n, fn, a, odims, err);
  case OUT_APPEND:
  case OUT_SCATTER:
    break;
  }
  return run_sink(r, n, fn, a, odims, err);
}

/* Whether tensor t has the index widths the kernel of access a was
 * compiled for (levels the plan reads as dense have no index arrays). */
static int widths_fit(const galley_tensor *t, const PAccess *a) {
  for (int l = 0; l < t->order && l < a->order; l++) {
    const galley_level *L = &t->lvl[l];
    if (a->kind[l] == GALLEY_DENSE || L->kind == GALLEY_RT_DENSE)
      continue;
    if (L->idx32 != (int)(a->w32 >> l & 1))
      return 0;
  }
  return 1;
}

/* Lay out query n's result with the index widths the plan promised the
 * queries that read it (out_w32): in place when it is owned; an input's
 * kept transpose whose widths differ is copied for this run. */
static galley_status conform_widths(ExecRun *r, int n, galley_error *err) {
  const PhysQuery *q = &r->pp->q[n];
  if (r->last_use[n] < 0)
    return GALLEY_OK; /* only returned: as built, 32-bit where it fits */
  rt_par par = run_par(r);
  if (r->res[n])
    return rt_tensor_set_widths_par(r->res[n], q->out_w32, &par, err);
  const galley_tensor *k = r->kept[n];
  if (!k || rt_tensor_widths(k) == q->out_w32)
    return GALLEY_OK;
  galley_format fmt;
  galley_tensor_format(k, &fmt);
  galley_status st = galley_tensor_convert(k, &fmt, &r->res[n], err);
  if (st == GALLEY_OK)
    st = rt_tensor_set_widths_par(r->res[n], q->out_w32, &par, err);
  return st;
}

/* The tables of query n's MERGE_MARK loop (none without one), within
 * the memory budget. */
static galley_status mark_tables_init(const ExecRun *r, int n,
                                      const int64_t *dims, MarkTables *m,
                                      galley_error *err) {
  const PhysQuery *q = &r->pp->q[n];
  int d = phys_mark_loop(q);
  if (d < 0 || dims[q->loops[d]] <= 0)
    return GALLEY_OK;
  m->nw = pool_threads(r->pool);
  galley_status st = over_budget(r, n, 8.0 * (double)dims[q->loops[d]] * m->nw,
                                 "marked intersection's tables", err);
  if (st != GALLEY_OK)
    return st;
  m->t = calloc((size_t)m->nw, sizeof *m->t);
  if (!m->t)
    return nomem(err);
  m->n = dims[q->loops[d]];
  return GALLEY_OK;
}

static galley_status run_kernel(ExecRun *r, int n, kernel_fn fn,
                                galley_error *err) {
  const PhysQuery *q = &r->pp->q[n];
  if (!fn)
    return rt_error(err, GALLEY_EINTERNAL, "no kernel for query %d ('%s')",
                    n, q->name);
  if (q->factored_unsplit)
    return rt_error(err, GALLEY_EINTERNAL,
                    "internal error: query '%s' distributes an input that "
                    "holds inf or NaN into its sum, but the plan does not "
                    "split that input out: refused rather than give NaN "
                    "where the result is inf",
                    q->name);
  int64_t *dims = calloc((size_t)q->nindices + 1, sizeof *dims);
  const galley_tensor **in = calloc((size_t)q->nacc + 1, sizeof *in);
  int64_t odims[GALLEY_MAX_ORDER] = {0};
  galley_status st = !dims || !in ? nomem(err)
                                  : query_dims(q, dims, odims, err);
  if (st == GALLEY_OK) {
    for (int k = 0; k < q->nacc && st == GALLEY_OK; k++) {
      in[k] = access_tensor(r, &q->acc[k]);
      /* never run a kernel over arrays of another width than it was
       * compiled for (the re-run rule replans for new widths) */
      if (!widths_fit(in[k], &q->acc[k]))
        st = rt_error(err, GALLEY_EINTERNAL,
                      "internal error: query '%s' was compiled for other "
                      "index widths of access %d",
                      q->name, k);
    }
  }
  if (st == GALLEY_OK) {
    /* The whole outermost loop; a query without loops runs once. */
    galley_kernel_args a = {.in = in, .dims = dims, .lo = 0,
                            .hi = q->nloops > 0 ? dims[q->loops[0]] : 1};
    if (r->parts && r->parts->range && q->nloops > 0)
      r->parts->range(r->parts->ctx, r->pp, n, in, dims, &a.lo, &a.hi);
    if (q->sliced > 0) /* kept with the input; NULL: the kernel walks rows */
      a.sliced = rt_tensor_sliced(in[q->sliced - 1], q->acc[q->sliced - 1].fill);
    MarkTables marks = {0};
    st = mark_tables_init(r, n, dims, &marks, err);
    r->marks = &marks;
    if (st == GALLEY_OK)
      st = call_kernel(r, n, fn, &a, odims, err);
    r->marks = NULL;
    for (int w = 0; marks.t && w < marks.nw; w++)
      free(marks.t[w]);
    free(marks.t);
  }
  free(dims);
  free(in);
  return st;
}

/* Free the results that no query after n reads (and that are not
 * outputs). */
static void free_dead(ExecRun *r, int n) {
  for (int k = 0; k < r->pp->q[n].nacc; k++) {
    const PAccess *a = &r->pp->q[n].acc[k];
    if (!a->is_input && r->last_use[a->tensor] == n && !r->keep[a->tensor])
      r->res[a->tensor] = recycle_tensor(r->recycle, r->res[a->tensor]);
  }
}

static void record_stats(const galley_tensor *t, int output, double seconds,
                         ExecStats *s) {
  if (!s)
    return;
  s->seconds = seconds;
  s->stored = galley_tensor_stored(t);
  /* an output's count is left to whoever asks for it (the caller keeps
   * the tensor); an intermediate's is a count, cheaper than the facts
   * galley_tensor_nnz would make for a tensor about to be freed */
  s->nnz = output ? -1 : rt_tensor_nnz_quick(t);
}

/* Whether every value t stores is finite (a pass over its values). */
static int result_finite(const galley_tensor *t) {
  for (galley_pos q = 0; q < t->nval; q++)
    if (!isfinite(t->val[q]))
      return 0;
  return 1;
}

/* ------------------------------------------------------------------ */
/* In place: a pointwise update of an input handed over by the caller  */
/* ------------------------------------------------------------------ */

/* An iterative host feeds a result back as the next run's input and
 * hands it over (galley_program_bind_owned).  A query that updates that
 * input X pointwise, out[i] = op(X[i], Y[i]), where op leaves X's values
 * as they are wherever Y holds its fill, then changes X only where Y is
 * stored: it takes X's arrays as its result and walks Y's stored
 * entries, O(stored(Y)) instead of the kernel's O(size(X)) (BFS's
 * visited set: max(v[j], next[j]) over a small frontier).  Legal only
 * when nothing after the query reads X and no run restarts after it
 * (the adaptive re-plan and the finiteness check restart a run from its
 * first query, which would read X again). */

/* In place only when Y stores at most this share of X's points. */
#define IN_PLACE_SHARE 4

/* Whether access node x reads its tensor at exactly the output's indices,
 * mode by mode. */
static int reads_output_point(const PhysQuery *q, const Node *x) {
  if ((x->kind != ND_INPUT && x->kind != ND_ALIAS) || x->nidx != q->nout)
    return 0;
  for (int m = 0; m < q->nout; m++)
    if (x->idx[m] != q->out[m])
      return 0;
  return 1;
}

/* Whether op(x, fy) == x for every value x of a tensor with facts f
 * (and no NaN): fy is op's identity, or op is a built-in max or min
 * (monotone: its two extreme values decide). */
static int keeps_values(const Op *op, double fy, const galley_facts *f) {
  if (!op->is_builtin || op->arity != 2 || f->nan > 0)
    return 0;
  if ((op->props & OP_HAS_IDENTITY) && fy == op->identity)
    return 1;
  if (!(op->props & OP_IDEMPOTENT) || !(op->props & OP_HAS_IDENTITY) ||
      (op->identity != INFINITY && op->identity != -INFINITY))
    return 0;
  double lo = f->neg_inf ? -INFINITY : f->min;
  double hi = f->pos_inf ? INFINITY : f->max;
  double args[2] = {lo, fy};
  int ok = lo > hi || ops_apply(op, args, 2) == lo;
  args[0] = hi;
  return ok && (lo > hi || ops_apply(op, args, 2) == hi);
}

/* Whether every level of t is dense, in the mode order of fmt. */
static int dense_like(const galley_tensor *t, const galley_format *fmt) {
  if (t->order < 1 || t->order != fmt->order)
    return 0;
  for (int l = 0; l < t->order; l++)
    if (t->lvl[l].kind != GALLEY_RT_DENSE || fmt->kinds[l] != GALLEY_DENSE ||
        t->lvl[l].mode != fmt->mode_order[l])
      return 0;
  return 1;
}

/* Whether any query after n reads input k, or any from n on may restart
 * the run (a result read later is measured and may re-plan, and checked
 * when it was assumed finite), or any result is borrowed from a cache of
 * an input (touching X could free it). */
static int in_place_blocked(const ExecRun *r, int n, int k) {
  const PhysPlan *pp = r->pp;
  for (int m = 0; m < pp->nq; m++) {
    if (r->kept[m])
      return 1;
    if (m < n)
      continue;
    if (r->last_use[m] > m) /* measured (re-plans), or checked finite */
      return 1;
    for (int a = 0; m > n && a < pp->q[m].nacc; a++)
      if (pp->q[m].acc[a].is_input && pp->q[m].acc[a].tensor == k)
        return 1;
  }
  for (int j = 0; j < pp->prog->ninputs; j++)
    if (j != k && r->inputs[j] == r->inputs[k])
      return 1;
  return 0;
}

/* The owned input that query n may update in place (its access number in
 * *xa, the other operand's in *ya), or -1. */
static int in_place_input(const ExecRun *r, int n, int *xa, int *ya) {
  const PhysQuery *q = &r->pp->q[n];
  const Node *e = q->expr;
  if (!r->parts || !r->parts->owned || q->kind != PQ_KERNEL || q->split ||
      q->agg || q->nred || q->nacc != 2 || !e || e->kind != ND_MAP ||
      e->nargs != 2 || !reads_output_point(q, e->args[0]) ||
      !reads_output_point(q, e->args[1]))
    return -1;
  for (int s = 0; s < 2; s++) {
    const PAccess *x = &q->acc[e->args[s]->access];
    const PAccess *y = &q->acc[e->args[1 - s]->access];
    galley_tensor *X = x->is_input ? r->parts->owned[x->tensor] : NULL;
    if (!X || X != r->inputs[x->tensor] || x == y ||
        !dense_like(X, &q->out_format) || X->fill != q->out_fill ||
        in_place_blocked(r, n, x->tensor))
      continue;
    const galley_tensor *Y = access_tensor(r, y);
    const galley_facts *f = rt_tensor_cached_facts(X);
    /* the walk below applies op through a call per entry: worth it
     * while Y stores a small part of X's points (a dense Y runs the
     * compiled kernel, a pass at memory speed) */
    if (!Y || Y->order != X->order || !f ||
        galley_tensor_stored(Y) > galley_tensor_stored(X) / IN_PLACE_SHARE ||
        !keeps_values(e->op, Y->fill, f))
      continue;
    *xa = e->args[s]->access;
    *ya = e->args[1 - s]->access;
    return x->tensor;
  }
  return -1;
}

/* The facts of a tensor as an in-place update changes its values one at
 * a time (old value o, new w): the counts exactly; the extremes while
 * no value that was one is overwritten, except a stored fill value when
 * another one stays (then the extreme is still there); `integer` while
 * it was 1.  lost: they can no longer be told without a pass. */
typedef struct FactsUpdate {
  galley_facts f;
  double fill;
  int lost, fill_extreme; /* an extreme was a fill value overwritten */
} FactsUpdate;

static void facts_count(galley_facts *f, double v, double fill, int64_t d) {
  f->nnz += d * !rt_is_fill(v, fill);
  f->nan += d * (v != v);
  f->pos_inf += d * (v == INFINITY);
  f->neg_inf += d * (v == -INFINITY);
}

static void facts_update(FactsUpdate *u, double o, double w) {
  galley_facts *f = &u->f;
  if (memcmp(&o, &w, sizeof o) == 0)
    return;
  facts_count(f, o, u->fill, -1);
  facts_count(f, w, u->fill, 1);
  if (isfinite(o) && (o == f->min || o == f->max) && o != w) {
    if (rt_is_fill(o, u->fill))
      u->fill_extreme = 1;
    else
      u->lost = 1;
  }
  if (isfinite(w)) {
    f->min = w < f->min ? w : f->min;
    f->max = w > f->max ? w : f->max;
    f->integer &= fabs(w) >= 0x1p52 || (double)(int64_t)w == w;
  }
}

/* Whether the tracked facts hold: no extreme lost, or only fill values
 * of which one is still stored. */
static int facts_hold(const FactsUpdate *u, const galley_tensor *t) {
  return !u->lost && u->f.integer != 0 &&
         (!u->fill_extreme || galley_tensor_stored(t) > u->f.nnz);
}

/* Run query n in place when in_place_input allows it: 1 (result in
 * r->res[n]), else 0 and nothing done. */
static int run_in_place(ExecRun *r, int n) {
  int xa, ya, k = in_place_input(r, n, &xa, &ya);
  if (k < 0)
    return 0;
  const PhysQuery *q = &r->pp->q[n];
  galley_tensor *X = r->parts->owned[k];
  const galley_tensor *Y = access_tensor(r, &q->acc[ya]);
  int x_first = q->expr->args[0]->access == xa;
  FactsUpdate u = {.f = *rt_tensor_cached_facts(X), .fill = X->fill};
  galley_tensor_touch(X); /* its facts and kept copies describe old values */
  r->parts->owned[k] = NULL;
  int64_t crd[GALLEY_MAX_ORDER] = {0};
  rt_cursor c;
  memset(&c, 0, sizeof c); /* (set by RT_FOR_EACH_STORED; gcc cannot tell) */
  RT_FOR_EACH_STORED(Y, c, i, qy, {
    if (rt_is_fill(Y->val[qy], Y->fill))
      continue; /* op keeps X's value there */
    for (int l = 0; l + 1 < Y->order; l++)
      crd[Y->lvl[l].mode] = c.crd[l];
    crd[Y->lvl[Y->order - 1].mode] = i;
    int64_t p = 0;
    for (int l = 0; l < X->order; l++)
      p = p * X->dims[X->lvl[l].mode] + crd[X->lvl[l].mode];
    double args[2] = {x_first ? X->val[p] : Y->val[qy],
                      x_first ? Y->val[qy] : X->val[p]};
    double w = ops_apply(q->expr->op, args, 2);
    facts_update(&u, X->val[p], w);
    X->val[p] = w;
  });
  if (facts_hold(&u, X))
    rt_tensor_set_facts(X, &u.f);
  r->res[n] = X;
  return 1;
}

static galley_status run_queries(ExecRun *r, void *const *fns,
                                 ExecStats *stats, galley_error *err) {
  for (int n = 0; n < r->pp->nq; n++) {
    double t0 = now_seconds();
    galley_status st;
    const galley_tensor *reused =
        r->parts && r->parts->reuse && !r->keep[n]
            ? r->parts->reuse(r->parts->ctx, r->pp, n)
            : NULL;
    if (reused) { /* kept from an earlier run (ExecParts.reuse) */
      r->kept[n] = reused;
      record_stats(reused, 0, now_seconds() - t0, stats ? &stats[n] : NULL);
      if (stats)
        stats[n].reused = 1;
      free_dead(r, n);
      continue;
    }
    int in_place = 0;
    if (r->pp->q[n].kind == PQ_TRANSPOSE) {
      st = run_transpose(r, n, err);
    } else if (run_in_place(r, n)) {
      st = GALLEY_OK;
      in_place = 1;
    } else {
      kernel_fn fn;
      /* Data and function pointers share a representation on every
       * POSIX system (dlsym relies on it). */
      memcpy(&fn, &fns[n], sizeof fn);
      st = run_kernel(r, n, fn, err);
      if (st == GALLEY_OK && r->pp->q[n].split) /* exceptions.c */
        st = exc_correct(r->pp, n, r->inputs, r->res, r->kept, &r->res[n],
                         err);
    }
    if (r->parts && r->parts->finish)
      st = r->parts->finish(r->parts->ctx, r->pp, n, st, &r->res[n], err);
    if (st == GALLEY_OK)
      st = conform_widths(r, n, err);
    if (st == GALLEY_ENOMEM && !(err && strstr(err->msg, "memory budget")))
      /* a resource error: say which query (over_budget already did) */
      return rt_error(err, st, "out of memory running query '%s': its "
                      "result or workspace does not fit in memory",
                      r->pp->q[n].name);
    if (st != GALLEY_OK)
      return st;
    if (r->pp->q[n].assumed_finite && r->last_use[n] > n && r->res[n] &&
        !result_finite(r->res[n]))
      return rt_error(err, EXEC_ASSUMPTION, "query '%s' was planned as "
                      "finite but holds an infinity or a NaN",
                      r->pp->q[n].name);
    record_stats(r->res[n] ? r->res[n] : r->kept[n], r->keep[n],
                 now_seconds() - t0, stats ? &stats[n] : NULL);
    if (stats)
      stats[n].in_place = in_place;
    /* (an in-place result is no copy to keep with its input: it is it) */
    if (r->parts && r->parts->computed && r->res[n] && !in_place)
      r->parts->computed(r->parts->ctx, r->pp, n, r->res[n]);
    free_dead(r, n);
  }
  return GALLEY_OK;
}

/* Hand the outputs to the caller: moved, or copied when one query is
 * named by two outputs. */
static galley_status take_outputs(ExecRun *r, galley_tensor **results,
                                  galley_error *err) {
  const PhysPlan *pp = r->pp;
  for (int k = 0; k < pp->noutputs; k++) {
    int o = pp->outputs[k];
    if (r->res[o]) {
      results[k] = r->res[o];
      r->res[o] = NULL;
      continue;
    }
    int first = 0;
    while (pp->outputs[first] != o)
      first++;
    galley_format fmt;
    galley_tensor_format(results[first], &fmt);
    galley_status st = galley_tensor_convert(results[first], &fmt,
                                             &results[k], err);
    if (st != GALLEY_OK)
      return st;
  }
  return GALLEY_OK;
}

/* Refuse, before any kernel runs, a plan whose results alive at once
 * need more than the budget for sure (phys_peak_memory's floor): it
 * would otherwise fail half-way, after the work before it. */
static galley_status check_peak(const PhysPlan *pp, galley_error *err) {
  PhysPeak peak;
  if (pp->memory_budget <= 0)
    return GALLEY_OK;
  if (phys_peak_memory(pp, &peak) != GALLEY_OK)
    return nomem(err);
  if (peak.floor_bytes <= pp->memory_budget)
    return GALLEY_OK;
  char alive[200] = ""; /* the peak, when other results add to it */
  if (peak.floor_bytes > peak.largest_bytes)
    snprintf(alive, sizeof alive, " (%.3g with the results alive at query "
             "'%s')", peak.floor_bytes, pp->q[peak.floor_query].name);
  return rt_error(err, GALLEY_ENOMEM, "query '%s' needs %s%.3g bytes%s, "
                  "over the memory budget of %.3g bytes (--memory-budget, "
                  "galley_program_set_memory_budget)",
                  pp->q[peak.largest_query].name,
                  peak.estimated ? "an estimated " : "", peak.largest_bytes,
                  alive, pp->memory_budget);
}

galley_status exec_plan_stats(const PhysPlan *pp,
                              const galley_tensor *const *inputs,
                              void *const *fns, galley_tensor **results,
                              ExecStats *stats, galley_error *err) {
  return exec_plan_threads(pp, inputs, fns, results, stats, NULL, NULL, 0,
                           err);
}

galley_status exec_plan_parts(const PhysPlan *pp,
                              const galley_tensor *const *inputs,
                              void *const *fns, galley_tensor **results,
                              ExecStats *stats, const ExecParts *parts,
                              galley_error *err) {
  return exec_plan_threads(pp, inputs, fns, results, stats, parts, NULL, 0,
                           err);
}

galley_status exec_plan_threads(const PhysPlan *pp,
                                const galley_tensor *const *inputs,
                                void *const *fns, galley_tensor **results,
                                ExecStats *stats, const ExecParts *parts,
                                GalleyPool *pool, int64_t block_work,
                                galley_error *err) {
  return exec_plan_recycled(pp, inputs, fns, results, stats, parts, pool,
                            block_work, NULL, err);
}

galley_status exec_plan_recycled(const PhysPlan *pp,
                                 const galley_tensor *const *inputs,
                                 void *const *fns, galley_tensor **results,
                                 ExecStats *stats, const ExecParts *parts,
                                 GalleyPool *pool, int64_t block_work,
                                 Recycle *recycle, galley_error *err) {
  rt_error_clear(err);
  for (int k = 0; k < pp->noutputs; k++)
    results[k] = NULL;
  ExecRun r = {.pp = pp, .inputs = inputs, .parts = parts, .pool = pool,
               .block_work = block_work, .recycle = recycle};
  recycle_begin(recycle, pp->memory_budget);
  r.res = calloc((size_t)pp->nq + 1, sizeof *r.res);
  r.kept = calloc((size_t)pp->nq + 1, sizeof *r.kept);
  r.last_use = calloc((size_t)pp->nq + 1, sizeof *r.last_use);
  r.keep = calloc((size_t)pp->nq + 1, 1);
  galley_status st =
      !r.res || !r.kept || !r.last_use || !r.keep ? nomem(err) : GALLEY_OK;
  if (st == GALLEY_OK)
    st = check_plan(&r, err);
  if (st == GALLEY_OK)
    st = check_peak(pp, err);
  if (st == GALLEY_OK)
    st = exc_prepare(pp, inputs, err);
  if (st == GALLEY_OK) {
    compute_last_use(&r);
    st = run_queries(&r, fns, stats, err);
  }
  if (st == GALLEY_OK)
    st = take_outputs(&r, results, err);
  if (parts && parts->done)
    st = parts->done(parts->ctx, st, err);
  for (int n = 0; r.res && n < pp->nq; n++)
    recycle_tensor(r.recycle, r.res[n]);
  if (st != GALLEY_OK)
    for (int k = 0; k < pp->noutputs; k++)
      results[k] = galley_tensor_free(results[k]);
  recycle_end(r.recycle);
  free(r.res);
  free(r.kept);
  free(r.last_use);
  free(r.keep);
  return st;
}

galley_status exec_plan(const PhysPlan *pp, const galley_tensor *const *inputs,
                        void *const *fns, galley_tensor **results,
                        galley_error *err) {
  return exec_plan_stats(pp, inputs, fns, results, NULL, err);
}
