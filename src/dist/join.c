/*
 * join.c -- the grid matrix multiply, its cost model, and the two-phase
 * aggregation (join.h says the algebra and the model).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "galley_rt.h"
#include "ir.h"
#include "join.h"
#include "rt_internal.h"
#include "stats.h"

static galley_status nomem(galley_error *err) {
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
}

/* ---- blocks of the grid ---- */

/* Block b of q equal blocks of [0, n): [lo(b), lo(b + 1)). */
static int64_t blk_lo(int64_t n, int q, int b) { return n * b / q; }

static int64_t blk_size(int64_t n, int q, int b) {
  return blk_lo(n, q, b + 1) - blk_lo(n, q, b);
}

static int blk_of(int64_t n, int q, int64_t x) {
  int b = n > 0 ? (int)((double)x * q / n) : 0;
  if (b >= q)
    b = q - 1;
  while (b + 1 < q && blk_lo(n, q, b + 1) <= x)
    b++;
  while (b > 0 && blk_lo(n, q, b) > x)
    b--;
  return b;
}

static int grid_rank(DistGrid g, int I, int J, int K) {
  return (I * g.pj + J) * g.pk + K;
}

static void grid_coords(DistGrid g, int r, int *I, int *J, int *K) {
  *K = r % g.pk;
  *J = (r / g.pk) % g.pj;
  *I = r / (g.pk * g.pj);
}

const char *dist_grid_method(DistGrid g) {
  int P = g.pi * g.pj * g.pk;
  if (P == 1)
    return "local";
  if (g.pi == P)
    return "BMM rows";
  if (g.pk == P)
    return "BMM cols";
  if (g.pj == P)
    return "CMM";
  if (g.pj == 1)
    return "2D";
  return "RMM";
}

int dist_grids(int P, DistGrid *out, int max) {
  int n = 0;
  for (int pi = 1; pi <= P; pi++)
    for (int pj = 1; pi * pj <= P; pj++)
      if (P % (pi * pj) == 0 && n < max)
        out[n++] = (DistGrid){pi, pj, P / (pi * pj)};
  return n;
}

/* ---- the cost model ---- */

/* A message of a tile's rows (the CSR messages below): a header of 24
 * bytes, 4 per row, and per entry its value and 4-byte column (8 for
 * tiles 2^31 columns wide or more). */
#define MSG_HEAD_BYTES 24.0
static double entry_bytes(int64_t cols) {
  return cols <= GALLEY_RT_IDX32_MAX_DIM ? 12.0 : 16.0;
}
static double msg_cost(int64_t rows, double entries, int64_t cols) {
  return rows > 0 ? MSG_HEAD_BYTES + 4.0 * (double)rows +
                        entries * entry_bytes(cols)
                  : 0;
}

static int64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  int64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
  return hi > lo ? hi - lo : 0;
}

/* Estimated entries source s sends of rows [r0, r1) x column block cb
 * of q (csize columns) of a matrix of `cols` columns held in row blocks:
 * its row block's nonzeros in that column block (hist, when counted;
 * else its nonzeros spread uniformly over the columns), shared
 * uniformly by its rows (exact when dense). */
static double tile_part(const int64_t *bounds, const int64_t *nnz,
                        int64_t *const *hist, int s, int64_t r0, int64_t r1,
                        int q, int cb, int64_t csize, int64_t cols) {
  int64_t rows = bounds[s + 1] - bounds[s];
  int64_t o = overlap(bounds[s], bounds[s + 1], r0, r1);
  if (rows <= 0 || o == 0 || cols <= 0)
    return 0;
  if (hist && hist[q])
    return (double)hist[q][s * q + cb] * (double)o / (double)rows;
  return (double)nnz[s] * (double)o / (double)rows * (double)csize /
         (double)cols;
}

/* Estimates of the partial product of tiles of nA and nB entries, sizes
 * I x J and J x K: multiply-adds (the join) and nonzeros (its sum over
 * j), by src/stats. */
static void tile_product(const DistMatmulIn *in, int64_t I, int64_t J,
                         int64_t K, double nA, double nB, double *flops,
                         double *nnz) {
  *flops = *nnz = 0;
  if (I <= 0 || J <= 0 || K <= 0 || nA <= 0 || nB <= 0)
    return;
  Arena *a = arena_new();
  if (!a)
    return;
  int64_t dims[3] = {I, J, K};
  StatsContext sc = {in->chain ? EST_CHAIN : EST_UNIFORM, a, dims, 3, NULL, NULL};
  const IdxSet i = 1, j = 2, k = 4;
  TensorStats *sa = stats_new(&sc, i | j, nA, 0);
  TensorStats *sb = stats_new(&sc, j | k, nB, 0);
  if (sa && sb && in->chain) {
    /* the degree constraints the tiles keep: at most the matrix's
     * fullest row, and at most the tile's width */
    double da = in->a_maxdeg[0] > 0 && in->a_maxdeg[0] < J
                    ? (double)in->a_maxdeg[0] : (double)J;
    double db = in->b_maxdeg[0] > 0 && in->b_maxdeg[0] < K
                    ? (double)in->b_maxdeg[0] : (double)K;
    stats_add_constraint(&sc, sa, i, j, da);
    stats_add_constraint(&sc, sb, j, k, db);
  }
  const TensorStats *args[2] = {sa, sb};
  TensorStats *jn = sa && sb ? stats_join(&sc, args, 2, 0) : NULL;
  if (jn) {
    *flops = stats_estimate(&sc, jn, i | j | k, 0);
    *nnz = stats_estimate(&sc, jn, i | k, 0);
  }
  arena_free(a);
}

struct DistJoinSample {
  int64_t m, n, p;
  int64_t *apos, *acrd, *bpos, *bcrd; /* CSR patterns of A and B */
  DistGrid g;                         /* the grid sampled last */
  double *flops, *partial, *ctile;    /* per grid rank; per (I, K) */
  int64_t *stamp;                     /* per column of C */
  int64_t *stamp_c;
};

static int sample_grid(DistJoinSample *S, DistGrid g);

void dist_matmul_cost(const DistMatmulIn *in, DistGrid g, DistCost *out) {
  memset(out, 0, sizeof *out);
  out->g = g;
  out->p = in->p;
  int P = in->P;
  double counts = 8.0 * P * (P - 1); /* each shuffle's counts */
  double *recv = calloc((size_t)P, sizeof *recv);
  double *ctile = calloc((size_t)g.pi * g.pk + 1, sizeof *ctile);
  if (!recv || !ctile) {
    free(recv);
    free(ctile);
    return;
  }
  /* the sampled rows' exact products, when the factors are at hand */
  DistJoinSample *S = in->sample && sample_grid(in->sample, g) == 0
                          ? in->sample : NULL;
  for (int d = 0; d < P; d++) {
    int I, J, K;
    grid_coords(g, d, &I, &J, &K);
    int64_t i0 = blk_lo(in->m, g.pi, I), i1 = blk_lo(in->m, g.pi, I + 1);
    int64_t j0 = blk_lo(in->n, g.pj, J), j1 = blk_lo(in->n, g.pj, J + 1);
    int64_t k0 = blk_lo(in->p, g.pk, K), k1 = blk_lo(in->p, g.pk, K + 1);
    double na = 0, nb = 0;
    for (int s = 0; s < P; s++) {
      double ea = tile_part(in->a_bounds, in->a_nnz, in->a_cols, s, i0, i1,
                            g.pj, J, j1 - j0, in->n);
      double eb = tile_part(in->b_bounds, in->b_nnz, in->b_cols, s, j0, j1,
                            g.pk, K, k1 - k0, in->p);
      na += ea;
      nb += eb;
      if (s != d) { /* one message of the rows s holds of each tile */
        double ma = msg_cost(overlap(in->a_bounds[s], in->a_bounds[s + 1],
                                     i0, i1), ea, j1 - j0);
        double mb = msg_cost(overlap(in->b_bounds[s], in->b_bounds[s + 1],
                                     j0, j1), eb, k1 - k0);
        out->bytes_a += ma;
        out->bytes_b += mb;
        recv[d] += ma + mb;
      }
    }
    double flops, partial;
    if (S) {
      flops = S->flops[d];
      partial = S->partial[d];
    } else {
      tile_product(in, i1 - i0, j1 - j0, k1 - k0, na, nb, &flops, &partial);
    }
    ctile[I * g.pk + K] += partial;
    out->flops += flops;
    if (flops > out->max_flops)
      out->max_flops = flops;
    if (g.pj > 1 && J != 0 && j1 > j0) { /* to rank (I, 0, K), folded */
      double mc = msg_cost(i1 - i0, partial, k1 - k0);
      out->bytes_c += k1 > k0 ? mc : 0;
      recv[grid_rank(g, I, 0, K)] += k1 > k0 ? mc : 0;
    }
  }
  if (P > 1) {
    out->bytes_a += counts;
    out->bytes_b += counts;
    if (g.pj > 1)
      out->bytes_c += counts;
  }
  out->bytes = out->bytes_a + out->bytes_b + out->bytes_c;
  for (int d = 0; d < P; d++)
    out->max_recv = recv[d] > out->max_recv ? recv[d] : out->max_recv;
  out->seconds = out->max_recv / 1.25e9 + out->max_flops / 1e9;
  /* C's tiles: the partial products folded, at most every cell */
  for (int I = 0; I < g.pi; I++)
    for (int K = 0; K < g.pk; K++) {
      double cells = (double)blk_size(in->m, g.pi, I) *
                     (double)blk_size(in->p, g.pk, K);
      double f = S ? S->ctile[I * g.pk + K] : ctile[I * g.pk + K];
      double e = f < cells ? f : cells;
      out->nnz_c += e;
      if (cells > 0) /* its message's header and row counts */
        out->c_head += MSG_HEAD_BYTES + 4.0 * (double)blk_size(in->m, g.pi, I);
      if (I == 0 && K == 0) {
        out->nnz_c_root = e;
        out->c_head_root = cells > 0 ? MSG_HEAD_BYTES +
                               4.0 * (double)blk_size(in->m, g.pi, I) : 0;
      }
    }
  free(recv);
  free(ctile);
}

/* How much slower than the best grid's busiest rank another grid's may
 * be and still win by its fewer bytes: imbalance below a few
 * milliseconds is noise beside a run's fixed costs. */
#define LOAD_SLACK_SECONDS 5e-3

/* The modelled seconds of grid k with the plan's gather of C: the
 * busiest rank's received bytes at 10 Gb/s -- rank 0 receiving C's
 * other tiles too (every rank, to_all) -- plus its multiply-adds. */
static double with_gather_seconds(const DistMatmulIn *in, const DistCost *k) {
  if (!in->gather)
    return k->seconds;
  double g = dist_gather_cost(k, in->P, in->gather == 2);
  double per = in->gather == 2 ? g / in->P : g; /* rank 0 gets it all */
  return k->seconds + per / 1.25e9;
}

int dist_matmul_plan(const DistMatmulIn *in, DistCost *costs, int *n) {
  DistGrid g[64];
  *n = dist_grids(in->P, g, 64);
  double best_time = INFINITY;
  for (int k = 0; k < *n; k++) {
    dist_matmul_cost(in, g[k], &costs[k]);
    double t = with_gather_seconds(in, &costs[k]);
    if (t < best_time)
      best_time = t;
  }
  /* the fewest bytes among the grids whose busiest rank (its received
   * bytes, C's gather included, and its multiply-adds) takes at most
   * twice the best grid's modelled time (or LOAD_SLACK_SECONDS more,
   * whichever is larger): a grid that sends the fewest
   * bytes but all of them to one rank (CMM at 64 ranks: rank 0 receives
   * every partial product), or leaves one rank most of the work, is
   * refused when that rank's load outweighs the bytes saved, not merely
   * for being unbalanced (ties: the modelled time) */
  int pick = -1;
  for (int k = 0; k < *n; k++) {
    double t = with_gather_seconds(in, &costs[k]);
    if (t > 2 * best_time + 1e-6 && t > best_time + LOAD_SLACK_SECONDS)
      continue;
    const DistCost *a = &costs[k];
    if (pick < 0) {
      pick = k;
      continue;
    }
    const DistCost *b = &costs[pick];
    double ba = a->bytes, bb = b->bytes;
    if (in->gather) { /* C's gather is part of the step */
      ba += dist_gather_cost(a, in->P, in->gather == 2);
      bb += dist_gather_cost(b, in->P, in->gather == 2);
    }
    if (ba < bb || (ba == bb && a->seconds < b->seconds))
      pick = k;
  }
  return pick < 0 ? 0 : pick;
}

static int64_t **col_hists(DistComm *c, const galley_tensor *t,
                           int64_t cols);

galley_status dist_matmul_in(DistComm *c, const DistRelation *a,
                             const DistRelation *b, DistMatmulIn *in,
                             galley_error *err) {
  memset(in, 0, sizeof *in);
  int P = c->size;
  in->P = P;
  in->m = a->dims[0];
  in->n = a->dims[1];
  in->p = b->dims[1];
  int64_t *v = calloc(4 * (size_t)P + 2, sizeof *v);
  int64_t *rc = calloc(2 * (size_t)P, sizeof *rc);
  galley_status st = v && rc ? GALLEY_OK : nomem(err);
  if (st == GALLEY_OK && (a->key != 0 || b->key != 0 || a->order != 2 ||
                          b->order != 2 || a->dims[1] != b->dims[0]))
    st = rt_error(err, GALLEY_EINVAL, "dist_matmul: two matrices in row "
                  "blocks of matching inner size");
  st = dist_agree(c, st, err);
  int64_t mine[2] = {0, 0};
  if (st == GALLEY_OK) {
    mine[0] = galley_tensor_stored(a->tile);
    mine[1] = galley_tensor_stored(b->tile);
  }
  void *recv = NULL;
  if (st == GALLEY_OK)
    st = dist_gather(c, mine, (int64_t)sizeof mine, -1, &recv, rc, rc + P,
                     err);
  if (st == GALLEY_OK) {
    int64_t *an = v, *bn = v + P, *ab = v + 2 * P, *bb = v + 3 * P + 1;
    for (int s = 0; s < P; s++) {
      an[s] = ((const int64_t *)recv)[2 * s];
      bn[s] = ((const int64_t *)recv)[2 * s + 1];
    }
    memcpy(ab, a->bounds, ((size_t)P + 1) * sizeof *ab);
    memcpy(bb, b->bounds, ((size_t)P + 1) * sizeof *bb);
    in->a_nnz = an, in->b_nnz = bn, in->a_bounds = ab, in->b_bounds = bb;
    /* the fullest rows (rows are whole in row blocks) */
    galley_degree_stats da, db;
    double ma = 0, mb = 0;
    if (galley_tensor_degree_stats(a->tile, &da, NULL) == GALLEY_OK)
      ma = (double)da.max_degree[1]; /* fixed row: entries in it */
    if (galley_tensor_degree_stats(b->tile, &db, NULL) == GALLEY_OK)
      mb = (double)db.max_degree[1];
    in->a_maxdeg[0] = (int64_t)dist_max_f64(c, ma);
    in->b_maxdeg[0] = (int64_t)dist_max_f64(c, mb);
    in->a_cols = col_hists(c, a->tile, in->n);
    in->b_cols = col_hists(c, b->tile, in->p);
    v = NULL; /* owned by in */
  }
  free(v);
  free(rc);
  free(recv);
  return st;
}

static void free_hists(int64_t **h, int P) {
  for (int q = 0; h && q <= P; q++)
    free(h[q]);
  free(h);
}

void dist_matmul_in_free(DistMatmulIn *in) {
  free((void *)in->a_nnz); /* the one allocation */
  free_hists(in->a_cols, in->P);
  free_hists(in->b_cols, in->P);
  memset(in, 0, sizeof *in);
}

typedef struct ColHist {
  int P, rank;
  int64_t cols;
  int64_t **h;
} ColHist;

static int hist_entry(void *ud, const int64_t *crd, double v) {
  (void)v;
  ColHist *ch = ud;
  for (int q = 1; q <= ch->P; q++)
    if (ch->h[q])
      ch->h[q][ch->rank * q + blk_of(ch->cols, q, crd[1])]++;
  return 0;
}

/* Every rank's nonzeros per column block, for each q dividing P: one
 * walk of this rank's tile, then summed (each rank fills its own
 * slots).  NULL when out of memory (the model then spreads uniformly). */
static int64_t **col_hists(DistComm *c, const galley_tensor *t,
                           int64_t cols) {
  int P = c->size, ok = 1;
  int64_t **h = calloc((size_t)P + 1, sizeof *h);
  for (int q = 1; h && q <= P; q++)
    if (P % q == 0 && !(h[q] = calloc((size_t)P * q, sizeof **h)))
      ok = 0;
  ok = h && ok;
  if ((int)dist_sum_i64(c, !ok) != 0) { /* all or none */
    free_hists(h, P);
    return NULL;
  }
  ColHist ch = {P, c->rank, cols, h};
  galley_tensor_foreach(t, hist_entry, &ch);
  for (int q = 1; q <= P; q++)
    if (h[q])
      dist_sum_i64_array(c, h[q], (int64_t)P * q);
  return h;
}

/* ---- moving tiles as CSR messages ----
 * One message from a source to a destination carries the source's rows
 * of the destination's tile: a header (the first row in the
 * destination's frame, the rows, the entries: three int64), the values,
 * a 32-bit count per row, and the columns in the destination's frame (w
 * bytes each: 4 unless the tile is 2^31 columns wide).  A source's rows
 * are contiguous and its columns sorted within each row, and the sources
 * of one destination hold disjoint rows in rank order (or, for C's
 * tiles, disjoint column ranges in rank order): the destination builds
 * its tile's CSR arrays by walking the messages in rank order, with no
 * sort.  Partial products of one tile (several sources, the same rows
 * and columns) are merged row by row and summed in rank order. */

#define MSG_HEAD 24

/* A message's bytes: header, values, counts, columns. */
static int64_t msg_bytes(int64_t rows, int64_t ents, int w) {
  return MSG_HEAD + 8 * ents + 4 * rows + (int64_t)w * ents;
}

/* The width of the columns of a tile `cols` wide on the wire. */
static int wire_width(int64_t cols) {
  return cols <= GALLEY_RT_IDX32_MAX_DIM ? 4 : 8;
}

/* t as CSR (rows, then sorted columns): t itself, or *own (a copy). */
static galley_status csr_view(const galley_tensor *t,
                              const galley_tensor **view,
                              galley_tensor **own, galley_error *err) {
  *own = NULL;
  *view = t;
  if (!t || (t->order == 2 && t->lvl[0].kind == GALLEY_RT_DENSE &&
             t->lvl[0].mode == 0 && t->lvl[1].kind == GALLEY_RT_LIST))
    return GALLEY_OK;
  galley_format f = galley_format_default(2);
  f.mode_order[0] = 0, f.mode_order[1] = 1;
  f.kinds[0] = GALLEY_DENSE, f.kinds[1] = GALLEY_LIST;
  galley_status st = galley_tensor_convert(t, &f, own, err);
  *view = *own;
  return st;
}

/* Where a message is being written. */
typedef struct MsgOut {
  char *base;        /* the message */
  int64_t row0;      /* the source's first row in it (source frame) */
  int64_t rows, ents;
  int64_t at;        /* entries written */
} MsgOut;

static void msg_head(MsgOut *o, int64_t dst_row0) {
  int64_t h[3] = {dst_row0, o->rows, o->ents};
  memcpy(o->base, h, sizeof h);
  memset(o->base + MSG_HEAD + 8 * o->ents, 0, (size_t)(4 * o->rows));
}

static void msg_put(MsgOut *o, int64_t src_row, int64_t col, double v,
                    int w) {
  char *vals = o->base + MSG_HEAD, *cnt = vals + 8 * o->ents;
  char *cols = cnt + 4 * o->rows;
  memcpy(vals + 8 * o->at, &v, 8);
  if (w == 4) {
    int32_t c32 = (int32_t)col;
    memcpy(cols + 4 * o->at, &c32, 4);
  } else {
    memcpy(cols + 8 * o->at, &col, 8);
  }
  int32_t k;
  memcpy(&k, cnt + 4 * (src_row - o->row0), 4);
  k++;
  memcpy(cnt + 4 * (src_row - o->row0), &k, 4);
  o->at++;
}

/* The messages a CSR tile sends: dest(ctx, row, col, dests) lists the
 * destinations of an entry (at most max) and where its row and column
 * land in each destination's frame.  Two passes: count, then write. */
typedef struct Route {
  DistGrid g;
  int b_side;       /* 0: A (rows i, columns j), 1: B (rows j, columns k);
                       2: a whole tile to `to` (partials, gathers) */
  int64_t row0;     /* the tile's first global row */
  int64_t nrows_g, ncols_g;
  int to;           /* b_side 2: the destination, or -2: every rank */
  int64_t dst_row0, col0; /* b_side 2: the tile's place in the
                             destination's frame */
  int skip_zero;    /* leave out entries equal to 0 */
} Route;

/* The destinations of row r (global) and column col: d[] ranks, with the
 * row and column offsets of their tiles.  How many. */
static int route_of(const Route *R, int P, int64_t r, int64_t col, int *d,
                    int64_t *r0, int64_t *c0) {
  DistGrid g = R->g;
  if (R->b_side == 2) {
    int n = 0;
    for (int x = 0; x < P; x++)
      if (R->to == -2 || x == R->to) {
        d[n] = x;
        r0[n] = -R->dst_row0;
        c0[n++] = -R->col0;
      }
    return n;
  }
  int rb, cb, n = R->b_side ? g.pi : g.pk;
  int64_t rlo, clo;
  if (!R->b_side) {
    rb = blk_of(R->nrows_g, g.pi, r);
    cb = blk_of(R->ncols_g, g.pj, col);
    rlo = blk_lo(R->nrows_g, g.pi, rb);
    clo = blk_lo(R->ncols_g, g.pj, cb);
  } else {
    rb = blk_of(R->nrows_g, g.pj, r);
    cb = blk_of(R->ncols_g, g.pk, col);
    rlo = blk_lo(R->nrows_g, g.pj, rb);
    clo = blk_lo(R->ncols_g, g.pk, cb);
  }
  for (int x = 0; x < n; x++) {
    d[x] = R->b_side ? grid_rank(g, x, rb, cb) : grid_rank(g, rb, cb, x);
    r0[x] = rlo;
    c0[x] = clo;
  }
  return n;
}

/* The rows of destination d's tile a source of global rows [lo, hi)
 * sends (all of them for whole tiles): *first, returned count. */
static int64_t route_rows(const Route *R, int d, int64_t lo, int64_t hi,
                          int64_t *first) {
  *first = lo;
  if (R->b_side == 2)
    return R->to == -2 || d == R->to ? hi - lo : 0;
  int I, J, K;
  grid_coords(R->g, d, &I, &J, &K);
  int q = R->b_side ? R->g.pj : R->g.pi, b = R->b_side ? J : I;
  int64_t r0 = blk_lo(R->nrows_g, q, b), r1 = blk_lo(R->nrows_g, q, b + 1);
  int64_t a = lo > r0 ? lo : r0, z = hi < r1 ? hi : r1;
  *first = a;
  return z > a ? z - a : 0;
}

/* Pack the CSR tile t (rows [row0, row0 + rows) globally) into one
 * message per destination: *send with counts v[0..P) and displacements
 * v[P..2P). */
static galley_status pack_route(const galley_tensor *t, const Route *R,
                                int P, int w, char **send, int64_t *v,
                                galley_error *err) {
  int64_t rows = t ? t->dims[0] : 0;
  const galley_level *L = t ? &t->lvl[1] : NULL;
  int64_t *ents = calloc((size_t)P, sizeof *ents);
  int64_t *first = calloc((size_t)P, sizeof *first);
  int64_t *nrow = calloc((size_t)P, sizeof *nrow);
  MsgOut *o = calloc((size_t)P, sizeof *o);
  int *d = malloc((size_t)P * sizeof *d);
  int64_t *r0 = malloc(2 * (size_t)P * sizeof *r0), *c0 = r0 ? r0 + P : NULL;
  galley_status st = ents && first && nrow && o && d && r0 ? GALLEY_OK
                                                           : nomem(err);
  for (int x = 0; st == GALLEY_OK && x < P; x++)
    nrow[x] = t ? route_rows(R, x, R->row0, R->row0 + rows, &first[x]) : 0;
  /* count */
  for (int64_t i = 0; st == GALLEY_OK && i < rows; i++)
    for (int64_t p = galley_rt_pos(L, i); p < galley_rt_pos(L, i + 1); p++) {
      if (R->skip_zero && t->val[p] == 0)
        continue;
      int n = route_of(R, P, R->row0 + i, galley_rt_crd(L, p), d, r0, c0);
      for (int x = 0; x < n; x++)
        ents[d[x]]++;
    }
  int64_t total = 0;
  for (int x = 0; st == GALLEY_OK && x < P; x++) {
    v[P + x] = total;
    v[x] = nrow[x] > 0 ? msg_bytes(nrow[x], ents[x], w) : 0;
    total += v[x];
  }
  *send = st == GALLEY_OK ? malloc((size_t)total + 1) : NULL;
  if (st == GALLEY_OK && !*send)
    st = nomem(err);
  for (int x = 0; st == GALLEY_OK && x < P; x++) {
    o[x] = (MsgOut){*send + v[P + x], first[x] - R->row0, nrow[x], ents[x],
                    0};
    if (nrow[x] > 0) {
      /* the destination's frame: rows from its tile's first */
      int64_t r0x = 0;
      if (R->b_side == 2) {
        r0x = first[x] + R->dst_row0;
      } else {
        int I, J, K;
        grid_coords(R->g, x, &I, &J, &K);
        int q = R->b_side ? R->g.pj : R->g.pi, b = R->b_side ? J : I;
        r0x = first[x] - blk_lo(R->nrows_g, q, b);
      }
      if (R->b_side == 2)
        r0x -= R->row0; /* whole tiles: the tile's own rows from 0 */
      msg_head(&o[x], r0x);
    }
  }
  /* write: rows in order, columns sorted, so each message is too */
  for (int64_t i = 0; st == GALLEY_OK && i < rows; i++)
    for (int64_t p = galley_rt_pos(L, i); p < galley_rt_pos(L, i + 1); p++) {
      if (R->skip_zero && t->val[p] == 0)
        continue;
      int64_t col = galley_rt_crd(L, p);
      int n = route_of(R, P, R->row0 + i, col, d, r0, c0);
      for (int x = 0; x < n; x++)
        msg_put(&o[d[x]], i, col - c0[x], t->val[p], w);
    }
  free(ents), free(first), free(nrow), free(o), free(d), free(r0);
  return st;
}

/* An empty CSR tensor of rows x cols whose list level takes the arrays
 * pos (rows + 1) and crd (w-byte indices) and the values val (nnz). */
static galley_tensor *csr_from_arrays(int64_t rows, int64_t cols, void *pos,
                                      void *crd, double *val, int64_t nnz,
                                      int w, galley_error *err) {
  galley_format f = galley_format_default(2);
  f.mode_order[0] = 0, f.mode_order[1] = 1;
  f.kinds[0] = GALLEY_DENSE, f.kinds[1] = GALLEY_LIST;
  galley_tensor *t = rt_tensor_new(2, (int64_t[]){rows, cols}, 0, &f, err);
  if (!t)
    return NULL;
  galley_level *L = &t->lvl[1];
  free(L->pos), free(L->crd), free(L->pos32), free(L->crd32);
  L->pos = L->crd = NULL;
  L->pos32 = L->crd32 = NULL;
  L->idx32 = w == 4;
  if (w == 4) {
    L->pos32 = pos;
    L->crd32 = crd;
  } else {
    L->pos = pos;
    L->crd = crd;
  }
  L->nchild = L->nset = nnz;
  free(t->val);
  t->val = val;
  t->nval = nnz;
  return t;
}

typedef struct ColVal {
  int64_t c;
  int64_t order; /* arrival, for a stable sort */
  double v;
} ColVal;

static int colval_cmp(const void *a, const void *b) {
  const ColVal *x = a, *y = b;
  if (x->c != y->c)
    return x->c < y->c ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

/* The tile of rows x cols from the messages received (one per source at
 * most, in rank order); fold: sources may repeat a row and a column (the
 * values summed in rank order), else each row's entries arrive sorted. */
static galley_status assemble(const char *recv, const int64_t *rcount,
                              const int64_t *rdispl, int P, int64_t rows,
                              int64_t cols, int w, int fold,
                              galley_tensor **out, galley_error *err) {
  *out = NULL;
  int64_t *pos = calloc((size_t)rows + 2, sizeof *pos);
  if (!pos)
    return nomem(err);
  int64_t total = 0;
  for (int s = 0; s < P; s++) {
    if (rcount[s] <= 0)
      continue;
    int64_t h[3];
    memcpy(h, recv + rdispl[s], sizeof h);
    const char *cnt = recv + rdispl[s] + MSG_HEAD + 8 * h[2];
    for (int64_t r = 0; r < h[1]; r++) {
      int32_t k;
      memcpy(&k, cnt + 4 * r, 4);
      pos[h[0] + r + 1] += k;
    }
    total += h[2];
  }
  for (int64_t r = 0; r < rows; r++)
    pos[r + 1] += pos[r];
  int ow = cols <= GALLEY_RT_IDX32_MAX_DIM &&
                   total <= GALLEY_RT_IDX32_MAX_NSET ? 4 : 8;
  int64_t *at = malloc(((size_t)rows + 1) * sizeof *at);
  char *crd = malloc(((size_t)total + 1) * (size_t)ow);
  double *val = malloc(((size_t)total + 1) * sizeof *val);
  void *opos = malloc(((size_t)rows + 1) * (size_t)ow);
  if (!at || !crd || !val || !opos) {
    free(pos), free(at), free(crd), free(val), free(opos);
    return nomem(err);
  }
  memcpy(at, pos, (size_t)rows * sizeof *at);
  for (int s = 0; s < P; s++) {
    if (rcount[s] <= 0)
      continue;
    int64_t h[3];
    memcpy(h, recv + rdispl[s], sizeof h);
    const char *vals = recv + rdispl[s] + MSG_HEAD;
    const char *cnt = vals + 8 * h[2], *cl = cnt + 4 * h[1];
    int64_t e = 0;
    for (int64_t r = 0; r < h[1]; r++) {
      int32_t k;
      memcpy(&k, cnt + 4 * r, 4);
      int64_t dst = at[h[0] + r];
      memcpy(val + dst, vals + 8 * e, 8 * (size_t)k);
      if (w == ow) {
        memcpy(crd + dst * ow, cl + e * w, (size_t)k * (size_t)w);
      } else {
        for (int64_t q = 0; q < k; q++) {
          int64_t c;
          if (w == 4) {
            int32_t c32;
            memcpy(&c32, cl + (e + q) * 4, 4);
            c = c32;
          } else {
            memcpy(&c, cl + (e + q) * 8, 8);
          }
          if (ow == 4) {
            int32_t c32 = (int32_t)c;
            memcpy(crd + (dst + q) * 4, &c32, 4);
          } else {
            memcpy(crd + (dst + q) * 8, &c, 8);
          }
        }
      }
      at[h[0] + r] += k;
      e += k;
    }
  }
  galley_status st = GALLEY_OK;
  if (fold) { /* sort each row by column (stably) and sum repeats */
    int64_t most = 0;
    for (int64_t r = 0; r < rows; r++)
      most = pos[r + 1] - pos[r] > most ? pos[r + 1] - pos[r] : most;
    ColVal *cv = malloc(((size_t)most + 1) * sizeof *cv);
    if (!cv)
      st = nomem(err);
    int64_t wr = 0;
    for (int64_t r = 0; st == GALLEY_OK && r < rows; r++) {
      int64_t a = pos[r], z = pos[r + 1];
      for (int64_t q = a; q < z; q++) {
        int64_t c;
        if (ow == 4) {
          int32_t c32;
          memcpy(&c32, crd + q * 4, 4);
          c = c32;
        } else {
          memcpy(&c, crd + q * 8, 8);
        }
        cv[q - a] = (ColVal){c, q, val[q]};
      }
      qsort(cv, (size_t)(z - a), sizeof *cv, colval_cmp);
      pos[r] = wr;
      for (int64_t q = 0; q < z - a; q++) {
        if (q > 0 && cv[q].c == cv[q - 1].c) {
          val[wr - 1] += cv[q].v;
          continue;
        }
        val[wr] = cv[q].v;
        if (ow == 4) {
          int32_t c32 = (int32_t)cv[q].c;
          memcpy(crd + wr * 4, &c32, 4);
        } else {
          memcpy(crd + wr * 8, &cv[q].c, 8);
        }
        wr++;
      }
    }
    pos[rows] = wr;
    total = wr;
    free(cv);
  }
  for (int64_t r = 0; r <= rows; r++) {
    if (ow == 4)
      ((int32_t *)opos)[r] = (int32_t)pos[r];
    else
      ((int64_t *)opos)[r] = pos[r];
  }
  free(pos);
  free(at);
  if (st == GALLEY_OK &&
      !(*out = csr_from_arrays(rows, cols, opos, crd, val, total, ow, err)))
    st = err ? err->status : GALLEY_ENOMEM;
  if (st != GALLEY_OK)
    free(opos), free(crd), free(val);
  return st;
}

/* Shuffle the CSR messages of tile t by the route; the destination
 * builds the tile of rows x cols it receives (*out; NULL when it
 * receives none, or rows or cols are 0, unless keep_empty). */
static galley_status shuffle_tile(DistComm *c, const galley_tensor *t0,
                                  const Route *R, int64_t rows, int64_t cols,
                                  int fold, int want, galley_tensor **out,
                                  galley_error *err) {
  int P = c->size, w = wire_width(cols > 0 ? cols : 1);
  *out = NULL;
  const galley_tensor *t = NULL;
  galley_tensor *own = NULL;
  galley_status st = csr_view(t0, &t, &own, err);
  int64_t *v = calloc(4 * (size_t)P, sizeof *v);
  if (st == GALLEY_OK && !v)
    st = nomem(err);
  char *send = NULL;
  if (st == GALLEY_OK)
    st = pack_route(t, R, P, w, &send, v, err);
  galley_tensor_free(own);
  st = dist_agree(c, st, err);
  void *recv = NULL;
  if (st == GALLEY_OK)
    st = dist_alltoallv(c, send, v, v + P, &recv, v + 2 * P, v + 3 * P, err);
  free(send);
  if (st == GALLEY_OK && want && rows > 0 && cols > 0)
    st = assemble(recv, v + 2 * P, v + 3 * P, P, rows, cols, w, fold, out,
                  err);
  free(recv);
  free(v);
  return dist_agree(c, st, err);
}

/* ---- the local join: the compiled kernel on the tiles ---- */

struct DistKernels {
  galley_program *matmul; /* parsed once; its plans and kernels kept */
  galley_tensor *a, *b;   /* the tiles it is bound to (borrowed by it,
                             so kept alive until the next bind) */
};

DistKernels *dist_kernels_new(void) { return calloc(1, sizeof(DistKernels)); }

void dist_kernels_free(DistKernels *k) {
  if (!k)
    return;
  galley_program_free(k->matmul);
  galley_tensor_free(k->a);
  galley_tensor_free(k->b);
  free(k);
}

/* The product of the tiles a and b, which it takes (frees, or keeps
 * with kern while the kept program borrows them). */
static galley_status local_product(DistKernels *kern, galley_tensor *a,
                                   galley_tensor *b, galley_tensor **out,
                                   galley_error *err) {
  static const char prog[] = "input A[i, j], B[j, k]\n"
                             "C[i, k] = sum(j: A[i, j] * B[j, k])\n";
  galley_program *gp = kern ? kern->matmul : NULL;
  galley_status st = GALLEY_OK;
  if (!gp) {
    st = galley_program_parse("dist_matmul.tin", prog, strlen(prog), &gp,
                              NULL, err);
    /* a kept program compiles once with the default backend (clang
     * through the kernel cache that processes share safely: entries are
     * renamed into place); a one-off one with tcc, fast to compile */
    if (st == GALLEY_OK && !kern)
      galley_program_set_backend(gp, GALLEY_BACKEND_TCC, NULL);
    if (st == GALLEY_OK && kern) {
      galley_program_set_threads(gp, 1, NULL);
      kern->matmul = gp;
    }
  }
  if (st == GALLEY_OK)
    st = galley_program_bind(gp, "A", a, err);
  if (st == GALLEY_OK)
    st = galley_program_bind(gp, "B", b, err);
  if (st == GALLEY_OK)
    st = galley_program_run(gp, err);
  if (st == GALLEY_OK && !(*out = galley_program_take_output(gp, 0)))
    st = nomem(err);
  if (kern && kern->matmul && st == GALLEY_OK) {
    /* the program borrows a and b until the next bind */
    galley_tensor_free(kern->a);
    galley_tensor_free(kern->b);
    kern->a = a;
    kern->b = b;
    return st;
  }
  if (kern && kern->matmul) { /* unknown state: start again next time */
    galley_program_free(kern->matmul);
    kern->matmul = NULL;
    galley_tensor_free(kern->a);
    galley_tensor_free(kern->b);
    kern->a = kern->b = NULL;
  } else {
    galley_program_free(gp);
  }
  galley_tensor_free(a);
  galley_tensor_free(b);
  return st;
}

galley_status dist_matmul(DistComm *c, const DistRelation *a,
                          const DistRelation *b, DistGrid g,
                          DistKernels *kern, DistMatmulOut *out,
                          galley_error *err) {
  memset(out, 0, sizeof *out);
  out->g = g;
  int I, J, K;
  galley_status st = g.pi * g.pj * g.pk == c->size &&
                             a->key == 0 && b->key == 0 && a->order == 2 &&
                             b->order == 2 && a->dims[1] == b->dims[0]
                         ? GALLEY_OK
                         : rt_error(err, GALLEY_EINVAL, "dist_matmul: a "
                                    "grid of every rank, and two matrices "
                                    "in row blocks of matching inner size");
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK)
    return st;
  grid_coords(g, c->rank, &I, &J, &K);
  int64_t m = a->dims[0], n = a->dims[1], p = b->dims[1];
  out->dims[0] = m, out->dims[1] = p;
  int64_t ni = blk_size(m, g.pi, I), nj = blk_size(n, g.pj, J),
          nk = blk_size(p, g.pk, K);
  out->i_lo = blk_lo(m, g.pi, I);
  out->k_lo = blk_lo(p, g.pk, K);
  /* 1. A's tiles to (I, J, every K), B's to (every I, J, K) */
  galley_tensor *ta = NULL, *tb = NULL, *part = NULL;
  int64_t b0 = c->bytes_sent;
  Route ra = {g, 0, a->bounds[c->rank], m, n, 0, 0, 0, 0};
  st = shuffle_tile(c, a->tile, &ra, ni, nj, 0, 1, &ta, err);
  out->bytes_a = dist_sum_i64(c, c->bytes_sent - b0);
  b0 = c->bytes_sent;
  Route rb = {g, 1, b->bounds[c->rank], n, p, 0, 0, 0, 0};
  if (st == GALLEY_OK)
    st = shuffle_tile(c, b->tile, &rb, nj, nk, 0, 1, &tb, err);
  out->bytes_b = dist_sum_i64(c, c->bytes_sent - b0);
  /* 2. the local join on the tiles */
  if (st == GALLEY_OK && ta && tb) {
    st = local_product(kern, ta, tb, &part, err);
    ta = tb = NULL; /* taken */
  }
  galley_tensor_free(ta);
  galley_tensor_free(tb);
  st = dist_agree(c, st, err);
  /* 3. the partial products, aggregated by the kernel over this rank's
   * j (R2-5's local Sigma), shuffled to (I, 0, K) and folded */
  if (st == GALLEY_OK && g.pj > 1) {
    b0 = c->bytes_sent;
    Route rc = {g, 2, 0, m, p, grid_rank(g, I, 0, K), 0, 0, 1};
    galley_tensor *folded = NULL;
    st = shuffle_tile(c, part, &rc, ni, nk, 1, J == 0, &folded, err);
    out->bytes_c = dist_sum_i64(c, c->bytes_sent - b0);
    galley_tensor_free(part);
    part = folded;
  }
  if (st == GALLEY_OK && J == 0 && !part && ni > 0 && nk > 0)
    st = assemble(NULL, (int64_t[1]){0}, (int64_t[1]){0}, 1, ni, nk, 4, 0,
                  &part, err);
  out->tile = J == 0 ? part : galley_tensor_free(part);
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK)
    dist_matmul_out_free(out);
  return st;
}

galley_status dist_matmul_gather(DistComm *c, const DistMatmulOut *r,
                                 int root, galley_tensor **out,
                                 galley_error *err) {
  *out = NULL;
  /* every tile (rows at i_lo, columns at k_lo of C) to root: the tiles
   * of one row block arrive in column order, so rows stay sorted */
  Route rc = {r->g, 2, 0, r->dims[0], r->dims[1], root < 0 ? -2 : root,
              r->i_lo, r->k_lo, 1};
  int want = root < 0 || c->rank == root;
  galley_status st = shuffle_tile(c, r->tile, &rc, r->dims[0], r->dims[1], 0,
                                  want, out, err);
  if (st == GALLEY_OK && want && !*out)
    st = assemble(NULL, (int64_t[1]){0}, (int64_t[1]){0}, 1, r->dims[0],
                  r->dims[1], 4, 0, out, err);
  return dist_agree(c, st, err);
}

void dist_matmul_out_free(DistMatmulOut *r) {
  r->tile = galley_tensor_free(r->tile);
}

/* ---- two-phase aggregation (R2-5) ---- */

typedef struct Pair {
  int64_t x;
  double v;
} Pair;

typedef struct SumAcc {
  int other;
  int64_t n;
  Pair *out;    /* first pass NULL: count */
  double *acc;  /* local_first: the partial sums per coordinate */
  unsigned char *seen;
} SumAcc;

static int sum_entry(void *ud, const int64_t *crd, double v) {
  SumAcc *s = ud;
  int64_t x = crd[s->other];
  if (s->acc) {
    s->acc[x] += v;
    s->seen[x] = 1;
  } else if (s->out) {
    s->out[s->n++] = (Pair){x, v};
  } else {
    s->n++;
  }
  return 0;
}

galley_status dist_sum_rows(DistComm *c, const galley_tensor *t, int mode,
                            int local_first, galley_tensor **mine,
                            int64_t *bytes, galley_error *err) {
  int P = c->size, other = 1 - mode;
  int64_t len = t->dims[other];
  *mine = NULL;
  SumAcc s = {other, 0, NULL, NULL, NULL};
  Pair *send = NULL;
  galley_status st = GALLEY_OK;
  if (local_first) { /* Sigma: one partial sum per coordinate met */
    s.acc = calloc((size_t)len + 1, sizeof *s.acc);
    s.seen = calloc((size_t)len + 1, 1);
    if (s.acc && s.seen) {
      galley_tensor_foreach(t, sum_entry, &s);
      int64_t k = 0;
      for (int64_t x = 0; x < len; x++)
        k += s.seen[x];
      send = malloc((size_t)(k + 1) * sizeof *send);
      for (int64_t x = 0; send && x < len; x++)
        if (s.seen[x])
          send[s.n++] = (Pair){x, s.acc[x]};
    }
    if (!s.acc || !s.seen || !send)
      st = nomem(err);
  } else { /* every entry as it is */
    galley_tensor_foreach(t, sum_entry, &s);
    send = malloc((size_t)(s.n + 1) * sizeof *send);
    s.out = send;
    s.n = 0;
    if (send)
      galley_tensor_foreach(t, sum_entry, &s);
    else
      st = nomem(err);
  }
  free(s.acc);
  free(s.seen);
  /* SHUF by the kept coordinate: in coordinate order, so the blocks of
   * each destination are contiguous */
  int64_t *v = calloc(4 * (size_t)P, sizeof *v);
  if (st == GALLEY_OK && !v)
    st = nomem(err);
  Pair *sorted = st == GALLEY_OK
                     ? malloc((size_t)(s.n + 1) * sizeof *sorted) : NULL;
  if (st == GALLEY_OK && !sorted)
    st = nomem(err);
  if (st == GALLEY_OK) {
    for (int64_t e = 0; e < s.n; e++)
      v[blk_of(len, P, send[e].x)]++;
    int64_t at = 0;
    for (int d = 0; d < P; d++) {
      v[P + d] = at;
      at += v[d];
    }
    for (int64_t e = 0; e < s.n; e++) /* stable: entry order kept */
      sorted[v[P + blk_of(len, P, send[e].x)]++] = send[e];
    for (int d = 0; d < P; d++) {
      v[P + d] = (v[P + d] - v[d]) * (int64_t)sizeof(Pair);
      v[d] *= (int64_t)sizeof(Pair);
    }
  }
  free(send);
  st = dist_agree(c, st, err);
  int64_t b0 = c->bytes_sent;
  void *recv = NULL;
  if (st == GALLEY_OK)
    st = dist_alltoallv(c, sorted, v, v + P, &recv, v + 2 * P, v + 3 * P,
                        err);
  *bytes = dist_sum_i64(c, c->bytes_sent - b0);
  free(sorted);
  /* Sigma at the owner, in rank order */
  if (st == GALLEY_OK) {
    int64_t nr = 0;
    for (int q = 0; q < P; q++)
      nr += v[2 * P + q] / (int64_t)sizeof(Pair);
    const Pair *pr = recv;
    int64_t lo = blk_lo(len, P, c->rank), hi = blk_lo(len, P, c->rank + 1);
    double *acc = calloc((size_t)(hi - lo) + 1, sizeof *acc);
    unsigned char *seen = calloc((size_t)(hi - lo) + 1, 1);
    int64_t *crd = malloc((size_t)(hi - lo + 1) * sizeof *crd);
    double *val = malloc((size_t)(hi - lo + 1) * sizeof *val);
    if (!acc || !seen || !crd || !val)
      st = nomem(err);
    for (int64_t e = 0; st == GALLEY_OK && e < nr; e++) {
      acc[pr[e].x - lo] += pr[e].v;
      seen[pr[e].x - lo] = 1;
    }
    int64_t k = 0;
    for (int64_t x = lo; st == GALLEY_OK && x < hi; x++)
      if (seen[x - lo]) {
        crd[k] = x;
        val[k++] = acc[x - lo];
      }
    if (st == GALLEY_OK)
      st = galley_tensor_from_coo(1, &len, k, crd, val, 0, NULL, mine, err);
    free(acc);
    free(seen);
    free(crd);
    free(val);
  }
  free(recv);
  free(v);
  return dist_agree(c, st, err);
}

/* ---- explain ---- */

/* The bound input an access reads (through a transpose of it), or -1. */
static int access_input(const PhysPlan *pp, const PhysQuery *q,
                        const Node *x) {
  if (x->kind != ND_INPUT && x->kind != ND_ALIAS)
    return -1;
  const PAccess *a = &q->acc[x->access];
  if (a->is_input)
    return a->tensor;
  const PhysQuery *t = &pp->q[a->tensor];
  if (t->kind == PQ_TRANSPOSE && t->nacc == 1 && t->acc[0].is_input)
    return t->acc[0].tensor;
  return -1;
}

/* Whether q is C[i, k] = sum(j: A[i, j] * B[j, k]): *fa, *fb the
 * factors' nodes, A's first. */
static int is_matmul(const PhysQuery *q, const Node **fa, const Node **fb) {
  if (q->kind != PQ_KERNEL || !q->agg || strcmp(q->agg->name, "+") != 0 ||
      q->nred != 1 || q->nout != 2 || !q->expr || q->expr->kind != ND_MAP ||
      !q->expr->op || strcmp(q->expr->op->name, "*") != 0 ||
      q->expr->nargs != 2)
    return 0;
  int i = q->out[0], k = q->out[1], j = q->red[0];
  for (int s = 0; s < 2; s++) {
    const Node *x = q->expr->args[s], *y = q->expr->args[1 - s];
    if ((x->kind != ND_INPUT && x->kind != ND_ALIAS) ||
        (y->kind != ND_INPUT && y->kind != ND_ALIAS) || x->nidx != 2 ||
        y->nidx != 2)
      continue;
    if (x->idx[0] == i && x->idx[1] == j && y->idx[0] == j &&
        y->idx[1] == k) {
      *fa = x;
      *fb = y;
      return 1;
    }
  }
  return 0;
}

/* A factor's row blocks as the cost model sees them: cut by work from
 * the tensor when it is a bound input, else equal rows of equal shares
 * of the estimate. */
static void factor_blocks(const galley_tensor *t, int64_t rows, double est,
                          int P, int64_t *bounds, int64_t *nnz) {
  int64_t *prefix = NULL;
  galley_error e;
  if (t && dist_work_prefix(t, 0, &prefix, &e) == GALLEY_OK) {
    dist_split(prefix, rows, P, bounds);
    for (int s = 0; s < P; s++) /* work = rows + entries */
      nnz[s] = prefix[bounds[s + 1]] - prefix[bounds[s]] -
               (bounds[s + 1] - bounds[s]);
    free(prefix);
    return;
  }
  dist_split(NULL, rows, P, bounds);
  for (int s = 0; s < P; s++)
    nnz[s] = (int64_t)(est / P);
}

const char *dist_bytes_text(double b, char *buf, size_t size) {
  if (b < 1e4)
    snprintf(buf, size, "%.0f B", b);
  else if (b < 1e7)
    snprintf(buf, size, "%.1f kB", b / 1e3);
  else
    snprintf(buf, size, "%.1f MB", b / 1e6);
  return buf;
}

/* Row-block relations of the factors a and b, whole on every rank, cut
 * at bd[0] and bd[1]: each rank takes its own block (no bytes). */
static galley_status row_relations(DistComm *c, const galley_tensor *a,
                                   const galley_tensor *b,
                                   const int64_t *const bd[2],
                                   DistRelation r[2], galley_error *err) {
  memset(r, 0, 2 * sizeof *r);
  const galley_tensor *t[2] = {a, b};
  galley_status st = GALLEY_OK;
  for (int x = 0; x < 2 && st == GALLEY_OK; x++) {
    int64_t lo = bd[x][c->rank], hi = bd[x][c->rank + 1];
    DistBlob blob = {0};
    r[x].order = 2;
    r[x].dims[0] = t[x]->dims[0];
    r[x].dims[1] = t[x]->dims[1];
    r[x].key = 0;
    r[x].ntiles = c->size;
    r[x].bounds = malloc(((size_t)c->size + 1) * sizeof *r[x].bounds);
    if (!r[x].bounds) {
      st = nomem(err);
      break;
    }
    memcpy(r[x].bounds, bd[x], ((size_t)c->size + 1) * sizeof *r[x].bounds);
    st = dist_pack(t[x], 0, lo, hi, lo, hi - lo, &blob, err);
    const void *d = blob.data;
    if (st == GALLEY_OK)
      st = dist_unpack(1, &d, &blob.len, -1, 0, NULL, NULL, NULL, 0,
                       &r[x].tile, err);
    free(blob.data);
  }
  return dist_agree(c, st, err);
}

/* The chosen grid run on the replicated factors (each rank takes its row
 * block: no bytes), its measured bytes summed over the ranks. */
static galley_status measure_grid(DistComm *c, const galley_tensor *a,
                                  const galley_tensor *b,
                                  const DistMatmulIn *in, DistGrid g,
                                  int64_t *bytes, galley_error *err) {
  DistRelation r[2];
  const int64_t *const bd[2] = {in->a_bounds, in->b_bounds};
  galley_status st = row_relations(c, a, b, bd, r, err);
  DistMatmulOut out;
  memset(&out, 0, sizeof out);
  if (st == GALLEY_OK)
    st = dist_matmul(c, &r[0], &r[1], g, NULL, &out, err);
  *bytes = out.bytes_a + out.bytes_b + out.bytes_c;
  dist_matmul_out_free(&out);
  dist_relation_free(&r[0]);
  dist_relation_free(&r[1]);
  return st;
}

void dist_join_explain(DistComm *c, const PhysPlan *pp, int n,
                       const galley_tensor *const *inputs, int measured,
                       FILE *f) {
  const PhysQuery *q = &pp->q[n];
  const Node *fa, *fb;
  if (c->size < 2 || !is_matmul(q, &fa, &fb))
    return;
  int xa = access_input(pp, q, fa), xb = access_input(pp, q, fb);
  const galley_tensor *ta = inputs && xa >= 0 ? inputs[xa] : NULL;
  const galley_tensor *tb = inputs && xb >= 0 ? inputs[xb] : NULL;
  int P = c->size;
  int64_t *v = calloc(4 * (size_t)P + 2, sizeof *v);
  if (!v)
    return;
  DistMatmulIn in = {.P = P};
  in.m = q->indices[q->out[0]].dim;
  in.n = q->indices[q->red[0]].dim;
  in.p = q->indices[q->out[1]].dim;
  double ea = fa->kind == ND_ALIAS && pp->q[q->acc[fa->access].tensor].has_est
                  ? pp->q[q->acc[fa->access].tensor].est_nnz
                  : (double)in.m * (double)in.n;
  double eb = fb->kind == ND_ALIAS && pp->q[q->acc[fb->access].tensor].has_est
                  ? pp->q[q->acc[fb->access].tensor].est_nnz
                  : (double)in.n * (double)in.p;
  factor_blocks(ta, in.m, ea, P, v + 2 * P, v);
  factor_blocks(tb, in.n, eb, P, v + 3 * P + 1, v + P);
  in.a_nnz = v, in.b_nnz = v + P;
  in.a_bounds = v + 2 * P, in.b_bounds = v + 3 * P + 1;
  DistCost cost[64];
  int ng = 0, pick = dist_matmul_plan(&in, cost, &ng);
  char b1[32], b2[32], b3[32], b4[32];
  if (f) {
    fprintf(f, "    join by the implementation algebra (factors in row "
               "blocks%s): grids of %d ranks, estimated bytes (A, B, "
               "partial C), multiply-adds, largest rank's:\n",
            ta && tb ? " cut by work" : ", estimated", P);
    for (int k = 0; k < ng; k++)
      fprintf(f, "      %dx%dx%d %-8s est %s (%s, %s, %s), %.3g flops, "
                 "max %.3g%s\n",
              cost[k].g.pi, cost[k].g.pj, cost[k].g.pk,
              dist_grid_method(cost[k].g),
              dist_bytes_text(cost[k].bytes, b1, sizeof b1),
              dist_bytes_text(cost[k].bytes_a, b2, sizeof b2),
              dist_bytes_text(cost[k].bytes_b, b3, sizeof b3),
              dist_bytes_text(cost[k].bytes_c, b4, sizeof b4),
              cost[k].flops, cost[k].max_flops, k == pick ? "  <- chosen" : "");
  }
  if (measured && ta && tb) {
    int64_t got = 0;
    galley_error e;
    galley_status st = measure_grid(c, ta, tb, &in, cost[pick].g, &got, &e);
    if (f && st == GALLEY_OK)
      fprintf(f, "      %dx%dx%d measured %s\n", cost[pick].g.pi,
              cost[pick].g.pj, cost[pick].g.pk,
              dist_bytes_text((double)got, b1, sizeof b1));
    else if (f)
      fprintf(f, "      not measured: %s\n", e.msg);
  }
  free(v);
}

/* ---- sampled rows: the tiles' products estimated from exact rows ----
 * Banded and clustered matrices break the uniform estimator (a row's
 * partial products fall into few columns, not spread over the tile), and
 * the chain bound is an upper bound, not an expectation.  When the
 * factors are whole on every rank, a few rows of each row block are
 * multiplied symbolically instead: for each sampled row, the distinct
 * columns of each (J, K) tile's partial product, of each K block of C,
 * and the multiply-adds; each block's counts scaled by its rows over its
 * sampled rows.  Every rank samples the same rows: no bytes. */


typedef struct CsrBuild {
  int64_t *pos, *crd;
  int fill;
} CsrBuild;

static int csr_entry(void *ud, const int64_t *crd, double v) {
  (void)v;
  CsrBuild *b = ud;
  if (b->fill)
    b->crd[b->pos[crd[0]]++] = crd[1];
  else
    b->pos[crd[0] + 1]++;
  return 0;
}

/* t's pattern as CSR arrays (rows, then columns in any order). */
static int csr_pattern(const galley_tensor *t, int64_t **pos,
                       int64_t **crd) {
  int64_t rows = t->dims[0];
  CsrBuild b = {calloc((size_t)rows + 2, sizeof(int64_t)), NULL, 0};
  if (!b.pos)
    return -1;
  galley_tensor_foreach(t, csr_entry, &b);
  for (int64_t i = 0; i < rows; i++)
    b.pos[i + 1] += b.pos[i];
  b.crd = malloc((size_t)(b.pos[rows] + 1) * sizeof *b.crd);
  if (!b.crd) {
    free(b.pos);
    return -1;
  }
  b.fill = 1;
  galley_tensor_foreach(t, csr_entry, &b); /* pos[i] moves to row i + 1 */
  for (int64_t i = rows; i > 0; i--)
    b.pos[i] = b.pos[i - 1];
  b.pos[0] = 0;
  *pos = b.pos;
  *crd = b.crd;
  return 0;
}

void dist_join_sample_free(DistJoinSample *S) {
  if (!S)
    return;
  free(S->apos), free(S->acrd), free(S->bpos), free(S->bcrd);
  free(S->flops), free(S->partial), free(S->ctile);
  free(S->stamp), free(S->stamp_c);
  free(S);
}

DistJoinSample *dist_join_sample_new(const galley_tensor *a,
                                     const galley_tensor *b) {
  DistJoinSample *S = calloc(1, sizeof *S);
  if (!S)
    return NULL;
  S->m = a->dims[0], S->n = a->dims[1], S->p = b->dims[1];
  S->stamp = malloc(((size_t)S->p + 1) * sizeof *S->stamp);
  S->stamp_c = malloc(((size_t)S->p + 1) * sizeof *S->stamp_c);
  if (!S->stamp || !S->stamp_c ||
      csr_pattern(a, &S->apos, &S->acrd) != 0 ||
      csr_pattern(b, &S->bpos, &S->bcrd) != 0) {
    dist_join_sample_free(S);
    return NULL;
  }
  return S;
}

/* Rows sampled per row block: enough for a few per cent of error on
 * smooth matrices, every row of a small one. */
#define SAMPLE_ROWS 512

/* The products of grid g's tiles, from sampled rows (0: done). */
static int sample_grid(DistJoinSample *S, DistGrid g) {
  if (S->flops && S->g.pi == g.pi && S->g.pj == g.pj && S->g.pk == g.pk)
    return 0;
  int P = g.pi * g.pj * g.pk;
  free(S->flops), free(S->partial), free(S->ctile);
  S->flops = calloc((size_t)P, sizeof *S->flops);
  S->partial = calloc((size_t)P, sizeof *S->partial);
  S->ctile = calloc((size_t)g.pi * g.pk + 1, sizeof *S->ctile);
  if (!S->flops || !S->partial || !S->ctile)
    return -1;
  S->g = g;
  for (int64_t k = 0; k <= S->p; k++)
    S->stamp[k] = S->stamp_c[k] = -1;
  int64_t mark = 0, per_block = SAMPLE_ROWS / g.pi + 1;
  double *f = calloc((size_t)P * 3 + 1, sizeof *f); /* one block's */
  if (!f)
    return -1;
  for (int I = 0; I < g.pi; I++) {
    int64_t i0 = blk_lo(S->m, g.pi, I), i1 = blk_lo(S->m, g.pi, I + 1);
    int64_t rows = i1 - i0, step = (rows + per_block - 1) / per_block;
    if (rows <= 0)
      continue;
    step = step < 1 ? 1 : step;
    int64_t taken = 0;
    memset(f, 0, ((size_t)P * 3 + 1) * sizeof *f);
    double *fl = f, *pa = f + P, *ct = f + 2 * P;
    for (int64_t i = i0; i < i1; i += step, taken++) {
      int64_t row_mark = mark++;
      for (int64_t x = S->apos[i]; x < S->apos[i + 1]; x++) {
        int64_t j = S->acrd[x];
        int J = blk_of(S->n, g.pj, j);
        /* a stamp per (row, J): the partial tile's distinct columns */
        int64_t tile_mark = row_mark * g.pj + J;
        for (int64_t y = S->bpos[j]; y < S->bpos[j + 1]; y++) {
          int64_t k = S->bcrd[y];
          int K = blk_of(S->p, g.pk, k);
          fl[J * g.pk + K] += 1;
          if (S->stamp[k] != tile_mark) {
            /* a column met under another J of this row is stamped
             * again: counts once per (J, K) tile */
            S->stamp[k] = tile_mark;
            pa[J * g.pk + K] += 1;
          }
          if (S->stamp_c[k] != row_mark) {
            S->stamp_c[k] = row_mark;
            ct[K] += 1;
          }
        }
      }
    }
    double scale = (double)rows / (double)taken;
    for (int J = 0; J < g.pj; J++)
      for (int K = 0; K < g.pk; K++) {
        int d = grid_rank(g, I, J, K);
        S->flops[d] = fl[J * g.pk + K] * scale;
        S->partial[d] = pa[J * g.pk + K] * scale;
      }
    for (int K = 0; K < g.pk; K++)
      S->ctile[I * g.pk + K] = ct[K] * scale;
  }
  free(f);
  return 0;
}

/* ---- the run's join: the chosen grid executed (run.c) ---- */

double dist_gather_cost(const DistCost *k, int P, int to_all) {
  if (P < 2)
    return 0;
  double counts = 8.0 * P * (P - 1);
  double e = entry_bytes(k->p);
  if (to_all) /* every tile to the P - 1 other ranks */
    return (k->nnz_c * e + k->c_head) * (P - 1) + counts;
  return (k->nnz_c - k->nnz_c_root) * e + k->c_head - k->c_head_root +
         counts;
}

/* Whether node x reads the indices {u, v} (in either order): 1 as
 * (u, v), 2 as (v, u), else 0. */
static int reads_pair(const Node *x, int u, int v) {
  if ((x->kind != ND_INPUT && x->kind != ND_ALIAS) || x->nidx != 2 || u == v)
    return 0;
  if (x->idx[0] == u && x->idx[1] == v)
    return 1;
  return x->idx[0] == v && x->idx[1] == u ? 2 : 0;
}

int dist_join_factors(const PhysPlan *pp, int n, DistJoinFactors *f) {
  const PhysQuery *q = &pp->q[n];
  if (q->kind != PQ_KERNEL || q->split || q->out_fill != 0 || !q->agg ||
      strcmp(q->agg->name, "+") != 0 || q->nred != 1 || q->nout != 2 ||
      !q->expr || q->expr->kind != ND_MAP || !q->expr->op ||
      strcmp(q->expr->op->name, "*") != 0 || q->expr->nargs != 2)
    return 0;
  int i = q->out[0], k = q->out[1], j = q->red[0];
  for (int s = 0; s < 2; s++) {
    const Node *x = q->expr->args[s], *y = q->expr->args[1 - s];
    int ox = reads_pair(x, i, j), oy = reads_pair(y, j, k);
    if (ox && oy) {
      f->xa = x->access;
      f->xb = y->access;
      f->trans_a = ox == 2;
      f->trans_b = oy == 2;
      return 1;
    }
  }
  return 0;
}

typedef struct Swap {
  int64_t n, *crd;
  double *val;
} Swap;

static int swap_entry(void *ud, const int64_t *crd, double v) {
  Swap *w = ud;
  if (w->crd) {
    w->crd[2 * w->n] = crd[1];
    w->crd[2 * w->n + 1] = crd[0];
    w->val[w->n] = v;
  }
  w->n++;
  return 0;
}

/* The logical transpose of a matrix (local: each rank its own copy). */
static galley_status transposed(const galley_tensor *t, galley_tensor **out,
                                galley_error *err) {
  Swap w = {0, NULL, NULL};
  galley_tensor_foreach(t, swap_entry, &w);
  w.crd = malloc((size_t)(2 * w.n + 2) * sizeof *w.crd);
  w.val = malloc((size_t)(w.n + 1) * sizeof *w.val);
  galley_status st = w.crd && w.val ? GALLEY_OK : nomem(err);
  int64_t n = w.n;
  w.n = 0;
  if (st == GALLEY_OK)
    galley_tensor_foreach(t, swap_entry, &w);
  if (st == GALLEY_OK)
    st = galley_tensor_from_coo(2, (int64_t[]){t->dims[1], t->dims[0]}, n,
                                w.crd, w.val, t->fill, NULL, out, err);
  free(w.crd);
  free(w.val);
  return st;
}

/* GALLEY_DIST_GRID=PIxPJxPK: the grid to take instead of the cost
 * model's choice (the benchmarks measure every method), when it is one
 * of the P-rank grids. */
static int forced_grid(const DistCost *cost, int ng) {
  const char *v = getenv("GALLEY_DIST_GRID");
  int pi, pj, pk;
  if (!v || sscanf(v, "%dx%dx%d", &pi, &pj, &pk) != 3)
    return -1;
  for (int k = 0; k < ng; k++)
    if (cost[k].g.pi == pi && cost[k].g.pj == pj && cost[k].g.pk == pk)
      return k;
  return -1;
}

/* Cut [0, rows) of t by work into P blocks. */
static galley_status work_bounds(const galley_tensor *t, int P,
                                 int64_t *bounds, galley_error *err) {
  if (t->lvl[0].mode == 0 && dist_split_fast(t, 0, P, bounds))
    return GALLEY_OK;
  int64_t *prefix = NULL;
  galley_status st = dist_work_prefix(t, 0, &prefix, err);
  if (st == GALLEY_OK)
    dist_split(prefix, t->dims[0], P, bounds);
  free(prefix);
  return st;
}

typedef struct HistWalk {
  int P;
  int64_t n;             /* columns */
  const int64_t *bounds; /* row blocks */
  int64_t *nnz;          /* per row block */
  int64_t **h;           /* per q dividing P: per (block, column block) */
} HistWalk;

static int hist_walk_entry(void *ud, const int64_t *crd, double v) {
  (void)v;
  HistWalk *w = ud;
  int lo = 0, hi = w->P - 1; /* the row block: a binary search */
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (w->bounds[mid] <= crd[0])
      lo = mid;
    else
      hi = mid - 1;
  }
  w->nnz[lo]++;
  for (int q = 1; q <= w->P; q++)
    if (w->h[q])
      w->h[q][lo * q + blk_of(w->n, q, crd[1])]++;
  return 0;
}

/* The model's view of a whole factor t cut at bounds: each block's
 * nonzeros and column histograms, counted locally (0: done). */
static int local_stats(const galley_tensor *t, int P, const int64_t *bounds,
                       int64_t **nnz, int64_t ***hist) {
  *nnz = calloc((size_t)P, sizeof **nnz);
  *hist = calloc((size_t)P + 1, sizeof **hist);
  int ok = *nnz && *hist;
  for (int q = 1; ok && q <= P; q++)
    if (P % q == 0 && !((*hist)[q] = calloc((size_t)P * q, sizeof(int64_t))))
      ok = 0;
  if (!ok)
    return -1;
  HistWalk w = {P, t->dims[1], bounds, *nnz, *hist};
  galley_tensor_foreach(t, hist_walk_entry, &w);
  return 0;
}

void dist_join_plan_free(DistJoinPlan *p) {
  galley_tensor_free(p->at);
  galley_tensor_free(p->bt);
  free(p->bounds);
  memset(p, 0, sizeof *p);
}

galley_status dist_join_plan(int P, const galley_tensor *a0,
                             const galley_tensor *b0, int trans_a,
                             int trans_b, int to_all,
                             const DistJoinKnown *known, DistJoinPlan *out,
                             galley_error *err) {
  memset(out, 0, sizeof *out);
  out->bounds = calloc(2 * ((size_t)P + 1), sizeof *out->bounds);
  galley_status st = out->bounds ? GALLEY_OK : nomem(err);
  if (st == GALLEY_OK && trans_a)
    st = transposed(a0, &out->at, err);
  if (st == GALLEY_OK && trans_b)
    st = transposed(b0, &out->bt, err);
  out->a = out->at ? out->at : a0;
  out->b = out->bt ? out->bt : b0;
  const galley_tensor *a = out->a, *b = out->b;
  if (st == GALLEY_OK && (a->order != 2 || b->order != 2 ||
                          a->dims[1] != b->dims[0] || a->fill != 0 ||
                          b->fill != 0))
    st = rt_error(err, GALLEY_EINTERNAL, "internal error: the join's "
                  "factors are not two matrices of fill 0 that multiply");
  int64_t *ab = out->bounds, *bb = out->bounds + P + 1;
  if (st == GALLEY_OK)
    st = work_bounds(a, P, ab, err);
  if (st == GALLEY_OK)
    st = work_bounds(b, P, bb, err);
  if (st == GALLEY_OK && known) {
    out->chosen = known->chosen;
    out->forced = known->forced;
    out->cost = known->cost;
    out->est_gather = dist_gather_cost(&out->cost, P, to_all);
    return GALLEY_OK;
  }
  DistMatmulIn in = {.P = P};
  int64_t *an = NULL, *bn = NULL, **ah = NULL, **bh = NULL;
  if (st == GALLEY_OK && (local_stats(a, P, ab, &an, &ah) != 0 ||
                          local_stats(b, P, bb, &bn, &bh) != 0))
    st = nomem(err);
  DistJoinSample *S = st == GALLEY_OK ? dist_join_sample_new(a, b) : NULL;
  if (st == GALLEY_OK && !S)
    st = nomem(err);
  if (st == GALLEY_OK) {
    in.m = a->dims[0], in.n = a->dims[1], in.p = b->dims[1];
    in.a_bounds = ab, in.b_bounds = bb, in.a_nnz = an, in.b_nnz = bn;
    in.a_cols = ah, in.b_cols = bh;
    in.sample = S;
    in.gather = to_all ? 2 : 1;
    DistCost cost[64];
    int ng = 0, pick = dist_matmul_plan(&in, cost, &ng);
    int forced = forced_grid(cost, ng);
    out->chosen = cost[pick].g;
    out->forced = forced >= 0;
    out->cost = cost[forced >= 0 ? forced : pick];
    out->est_gather = dist_gather_cost(&out->cost, P, to_all);
  }
  dist_join_sample_free(S);
  free(an), free(bn);
  free_hists(ah, P);
  free_hists(bh, P);
  if (st != GALLEY_OK)
    dist_join_plan_free(out);
  return st;
}

galley_status dist_join_run(DistComm *c, const DistJoinPlan *plan,
                            int to_all, DistKernels *kern, DistJoinRun *out,
                            galley_error *err) {
  memset(out, 0, sizeof *out);
  out->chosen = plan->chosen;
  out->cost = plan->cost;
  out->est_gather = plan->est_gather;
  int P = c->size;
  DistRelation r[2];
  memset(r, 0, sizeof r);
  const int64_t *const bounds[2] = {plan->bounds, plan->bounds + P + 1};
  galley_status st = row_relations(c, plan->a, plan->b, bounds, r, err);
  DistMatmulOut mo;
  memset(&mo, 0, sizeof mo);
  if (st == GALLEY_OK)
    st = dist_matmul(c, &r[0], &r[1], plan->cost.g, kern, &mo, err);
  out->bytes_join = mo.bytes_a + mo.bytes_b + mo.bytes_c;
  dist_relation_free(&r[0]);
  dist_relation_free(&r[1]);
  int64_t b0 = c->bytes_sent;
  if (st == GALLEY_OK)
    st = dist_matmul_gather(c, &mo, to_all ? -1 : 0, &out->result, err);
  out->bytes_gather = dist_sum_i64(c, c->bytes_sent - b0);
  dist_matmul_out_free(&mo);
  if (st != GALLEY_OK)
    out->result = galley_tensor_free(out->result);
  return st;
}

/* ---- the rules around an aggregation over a relation ---- */

galley_status dist_sum_relation(DistComm *c, const DistRelation *rel,
                                int mode, unsigned rules,
                                galley_tensor **mine, int64_t *bytes,
                                galley_error *err) {
  *mine = NULL;
  *bytes = 0;
  int other = 1 - mode;
  galley_tensor *g = NULL;
  galley_status st = rel->order == 2 && rel->key >= 0 && (mode == 0 ||
                                                         mode == 1)
                         ? GALLEY_OK
                         : rt_error(err, GALLEY_EINVAL, "dist_sum_relation: "
                                    "a partitioned matrix relation");
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK)
    return st;
  /* the tile in global coordinates */
  DistBlob b = {0};
  st = dist_pack(rel->tile, -1, 0, 0, 0, 0, &b, err);
  const void *d = b.data;
  int64_t shift = rel->bounds[c->rank];
  if (st == GALLEY_OK)
    st = dist_unpack(1, &d, &b.len, rel->key, rel->dims[rel->key], &shift,
                     NULL, NULL, 0, &g, err);
  free(b.data);
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK && (rules & DIST_RULE_R2_4) && rel->key == other) {
    /* R2-4: the relation is partitioned by the group-by key already:
     * every group is whole on one rank, Sigma needs no shuffle */
    int64_t len = g->dims[other];
    SumAcc s = {other, 0, NULL, calloc((size_t)len + 1, sizeof(double)),
                calloc((size_t)len + 1, 1)};
    int64_t *crd = malloc(((size_t)len + 1) * sizeof *crd);
    double *val = malloc(((size_t)len + 1) * sizeof *val);
    if (!s.acc || !s.seen || !crd || !val)
      st = nomem(err);
    if (st == GALLEY_OK)
      galley_tensor_foreach(g, sum_entry, &s);
    int64_t k = 0;
    for (int64_t x = 0; st == GALLEY_OK && x < len; x++)
      if (s.seen[x]) {
        crd[k] = x;
        val[k++] = s.acc[x];
      }
    if (st == GALLEY_OK)
      st = galley_tensor_from_coo(1, &len, k, crd, val, 0, NULL, mine, err);
    free(s.acc), free(s.seen), free(crd), free(val);
    galley_tensor_free(g);
    return dist_agree(c, st, err);
  }
  if (st == GALLEY_OK)
    st = dist_sum_rows(c, g, mode, (rules & DIST_RULE_R2_5) != 0, mine,
                       bytes, err);
  galley_tensor_free(g);
  return st;
}
