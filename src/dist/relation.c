/*
 * relation.c -- tensor relations: packing tensors for the wire, the
 * partition of a mode by work, and the scatter and gather of row-block
 * tiles (relation.h says the contract).
 */
#include <stdlib.h>
#include <string.h>

#include "galley_rt.h"
#include "relation.h"
#include "rt_internal.h"

#define PACK_MAGIC 0x31524c4559474c47LL /* "GLGYELR1" */

/* The header of a packed tensor; the coordinates (n * order int64, entry
 * after entry, logical modes) and the n values follow it. */
typedef struct PackHeader {
  int64_t magic;
  int64_t order;
  int64_t n;
  int64_t dims[GALLEY_MAX_ORDER];
  double fill;
  int32_t kinds[GALLEY_MAX_ORDER];
  int32_t modes[GALLEY_MAX_ORDER];
} PackHeader;

static galley_status nomem(galley_error *err) {
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
}

/* The entries being packed: a growing byte buffer after the header. */
typedef struct Packer {
  int mode;
  int64_t lo, hi, shift;
  int order;
  int64_t n, cap;
  int64_t *crd;
  double *val;
  int oom;
} Packer;

static int pack_entry(void *ud, const int64_t *coord, double value) {
  Packer *p = ud;
  if (p->mode >= 0 && (coord[p->mode] < p->lo || coord[p->mode] >= p->hi))
    return 0;
  if (p->n == p->cap) {
    int64_t cap = p->cap ? 2 * p->cap : 1024;
    int64_t *c = realloc(p->crd, (size_t)(cap * (p->order ? p->order : 1)) *
                                     sizeof *c);
    if (c)
      p->crd = c;
    double *v = c ? realloc(p->val, (size_t)cap * sizeof *v) : NULL;
    if (!v) {
      p->oom = 1;
      return 1;
    }
    p->val = v;
    p->cap = cap;
  }
  for (int k = 0; k < p->order; k++)
    p->crd[p->n * p->order + k] = coord[k];
  if (p->mode >= 0)
    p->crd[p->n * p->order + p->mode] -= p->shift;
  p->val[p->n++] = value;
  return 0;
}

galley_status dist_pack(const galley_tensor *t, int mode, int64_t lo,
                        int64_t hi, int64_t shift, int64_t dim,
                        DistBlob *out, galley_error *err) {
  out->data = NULL;
  out->len = 0;
  Packer p = {.mode = mode, .lo = lo, .hi = hi, .shift = shift,
              .order = t->order};
  galley_tensor_foreach(t, pack_entry, &p);
  galley_status st = p.oom ? nomem(err) : GALLEY_OK;
  size_t cbytes = (size_t)(p.n * t->order) * sizeof(int64_t);
  size_t vbytes = (size_t)p.n * sizeof(double);
  char *buf = st == GALLEY_OK ? malloc(sizeof(PackHeader) + cbytes + vbytes)
                              : NULL;
  if (st == GALLEY_OK && !buf)
    st = nomem(err);
  if (st == GALLEY_OK) {
    PackHeader h;
    memset(&h, 0, sizeof h);
    galley_format f;
    galley_tensor_format(t, &f);
    h.magic = PACK_MAGIC;
    h.order = t->order;
    h.n = p.n;
    h.fill = t->fill;
    for (int k = 0; k < t->order; k++) {
      h.dims[k] = t->dims[k];
      h.kinds[k] = f.kinds[k];
      h.modes[k] = f.mode_order[k];
    }
    if (mode >= 0)
      h.dims[mode] = dim;
    memcpy(buf, &h, sizeof h);
    if (cbytes)
      memcpy(buf + sizeof h, p.crd, cbytes);
    if (vbytes)
      memcpy(buf + sizeof h + cbytes, p.val, vbytes);
    out->data = buf;
    out->len = (int64_t)(sizeof h + cbytes + vbytes);
  }
  free(p.crd);
  free(p.val);
  return st;
}

/* Block k's header, checked. */
static galley_status read_header(const void *data, int64_t len,
                                 PackHeader *h, galley_error *err) {
  if (len < (int64_t)sizeof *h)
    return rt_error(err, GALLEY_EINTERNAL, "a packed tensor of %lld bytes "
                    "is too short", (long long)len);
  memcpy(h, data, sizeof *h);
  if (h->magic != PACK_MAGIC || h->order < 0 ||
      h->order > GALLEY_MAX_ORDER || h->n < 0 ||
      len != (int64_t)sizeof *h + h->n * (h->order + 1) * 8)
    return rt_error(err, GALLEY_EINTERNAL, "a packed tensor is malformed");
  return GALLEY_OK;
}

/* The gathered entries being folded: sorted by coordinates, ties in
 * block order (the index breaks them). */
typedef struct FoldSort {
  const int64_t *crd;
  int order;
} FoldSort;

static int cmp_entry(const void *a, const void *b, void *ud) {
  const FoldSort *s = ud;
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  for (int k = 0; k < s->order; k++) {
    int64_t u = s->crd[x * s->order + k], v = s->crd[y * s->order + k];
    if (u != v)
      return u < v ? -1 : 1;
  }
  return x < y ? -1 : x > y;
}

/* A merge sort of idx[0..n) by cmp (stable, no qsort_r needed). */
static void sort_idx(int64_t *idx, int64_t *tmp, int64_t n, void *ud) {
  if (n < 2)
    return;
  int64_t h = n / 2;
  sort_idx(idx, tmp, h, ud);
  sort_idx(idx + h, tmp, n - h, ud);
  int64_t i = 0, j = h, k = 0;
  while (i < h && j < n)
    tmp[k++] = cmp_entry(&idx[j], &idx[i], ud) < 0 ? idx[j++] : idx[i++];
  while (i < h)
    tmp[k++] = idx[i++];
  while (j < n)
    tmp[k++] = idx[j++];
  memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

/* Fold the entries at equal coordinates (in block order) in place; the
 * new number of entries. */
static int same_value(double x, double y) {
  return x == y || (x != x && y != y);
}

static int64_t fold_entries(int64_t *crd, double *val, int64_t n, int order,
                            dist_fold_fn fold, void *ctx, const double *drop,
                            int *oom) {
  int64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
  int64_t *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
  int64_t *c2 = malloc((size_t)(n * order > 0 ? n * order : 1) * sizeof *c2);
  double *v2 = malloc((size_t)(n ? n : 1) * sizeof *v2);
  if (!idx || !tmp || !c2 || !v2) {
    *oom = 1;
    n = 0;
  }
  for (int64_t e = 0; e < n; e++)
    idx[e] = e;
  FoldSort s = {crd, order};
  sort_idx(idx, tmp, n, &s);
  int64_t m = 0;
  for (int64_t e = 0; e < n; e++) {
    int64_t x = idx[e];
    if (m > 0 && memcmp(&c2[(m - 1) * order], &crd[x * order],
                        (size_t)order * sizeof *crd) == 0) {
      v2[m - 1] = fold(ctx, v2[m - 1], val[x]);
      continue;
    }
    memcpy(&c2[m * order], &crd[x * order], (size_t)order * sizeof *crd);
    v2[m++] = val[x];
  }
  if (drop) { /* folded entries equal to the fill are not stored */
    int64_t k = 0;
    for (int64_t e = 0; e < m; e++) {
      if (same_value(v2[e], *drop))
        continue;
      memmove(&c2[k * order], &c2[e * order], (size_t)order * sizeof *c2);
      v2[k++] = v2[e];
    }
    m = k;
  }
  if (!*oom) {
    memcpy(crd, c2, (size_t)(m * order) * sizeof *crd);
    memcpy(val, v2, (size_t)m * sizeof *val);
  }
  free(idx);
  free(tmp);
  free(c2);
  free(v2);
  return m;
}

galley_status dist_unpack(int n, const void *const *data, const int64_t *len,
                          int mode, int64_t dim, const int64_t *shift,
                          dist_fold_fn fold, void *ctx, int drop_fill,
                          galley_tensor **out, galley_error *err) {
  *out = NULL;
  PackHeader h0 = {0}, h = {0};
  int64_t total = 0;
  galley_status st = n > 0 ? GALLEY_OK
                           : rt_error(err, GALLEY_EINTERNAL, "no blocks");
  for (int k = 0; k < n && st == GALLEY_OK; k++) {
    st = read_header(data[k], len[k], k ? &h : &h0, err);
    if (st == GALLEY_OK && k && h.order != h0.order)
      st = rt_error(err, GALLEY_EINTERNAL, "packed blocks of different "
                    "orders");
    if (st == GALLEY_OK)
      total += k ? h.n : h0.n;
  }
  if (st != GALLEY_OK)
    return st;
  int order = (int)h0.order;
  int64_t *crd = malloc((size_t)(total * order > 0 ? total * order : 1) *
                        sizeof *crd);
  double *val = malloc((size_t)(total ? total : 1) * sizeof *val);
  if (!crd || !val) {
    free(crd);
    free(val);
    return nomem(err);
  }
  int64_t at = 0;
  for (int k = 0; k < n; k++) {
    const char *p = data[k];
    memcpy(&h, p, sizeof h);
    memcpy(&crd[at * order], p + sizeof h,
           (size_t)(h.n * order) * sizeof *crd);
    memcpy(&val[at], p + sizeof h + (size_t)(h.n * order) * sizeof *crd,
           (size_t)h.n * sizeof *val);
    if (shift && mode >= 0)
      for (int64_t e = at; e < at + h.n; e++)
        crd[e * order + mode] += shift[k];
    at += h.n;
  }
  int oom = 0;
  if (fold && total > 0)
    total = fold_entries(crd, val, total, order, fold, ctx,
                         drop_fill ? &h0.fill : NULL, &oom);
  galley_format f = {.order = order};
  int64_t dims[GALLEY_MAX_ORDER] = {0};
  for (int k = 0; k < order; k++) {
    f.kinds[k] = (galley_level_kind)h0.kinds[k];
    f.mode_order[k] = h0.modes[k];
    dims[k] = h0.dims[k];
  }
  if (mode >= 0)
    dims[mode] = dim;
  st = oom ? nomem(err)
           : galley_tensor_from_coo(order, dims, total, crd, val, h0.fill,
                                    &f, out, err);
  free(crd);
  free(val);
  return st;
}

/* ---- partition by work ---- */

/* The first child position of parent position p at level l (levels l..
 * dense, list or bytemap: children of consecutive parents are
 * consecutive). */
static int64_t first_child(const galley_tensor *t, int l, int64_t p) {
  const galley_level *L = &t->lvl[l];
  if (L->kind == GALLEY_RT_LIST)
    return galley_rt_pos(L, p);
  return p * L->dim; /* dense, bytemap */
}

/* The first leaf (value position) under position p of level 0. */
static int64_t first_leaf(const galley_tensor *t, int64_t p) {
  for (int l = 1; l < t->order; l++)
    p = first_child(t, l, p);
  return p;
}

typedef struct Counter {
  int mode;
  int64_t *count;
} Counter;

static int count_entry(void *ud, const int64_t *coord, double value) {
  (void)value;
  Counter *c = ud;
  c->count[coord[c->mode] + 1]++;
  return 0;
}

galley_status dist_work_prefix(const galley_tensor *t, int mode,
                               int64_t **prefix, galley_error *err) {
  int64_t n = t->dims[mode];
  int64_t *w = calloc((size_t)n + 2, sizeof *w);
  if (!w)
    return nomem(err);
  int fast = t->order > 0 && t->lvl[0].mode == mode;
  for (int l = 0; l < t->order && fast; l++)
    fast = t->lvl[l].kind != GALLEY_RT_HASH;
  const galley_level *L0 = &t->lvl[0];
  if (fast && L0->kind == GALLEY_RT_LIST) {
    /* the coordinates of level 0 are its crd; the others hold nothing */
    for (int64_t q = 0; q < L0->nset; q++)
      w[galley_rt_crd(L0, q) + 1] = first_leaf(t, q + 1) - first_leaf(t, q);
  } else if (fast) {
    for (int64_t i = 0; i < n; i++)
      w[i + 1] = first_leaf(t, i + 1) - first_leaf(t, i);
  } else {
    Counter c = {mode, w};
    galley_tensor_foreach(t, count_entry, &c);
  }
  for (int64_t i = 0; i < n; i++)
    w[i + 1] += w[i] + 1;
  *prefix = w;
  return GALLEY_OK;
}

/* The work of the coordinates before level-0 position q: the positions
 * (coordinates of a dense level) plus the leaves under them. */
static int64_t work_before(const galley_tensor *t, int64_t q) {
  const galley_level *L0 = &t->lvl[0];
  int64_t coords = L0->kind == GALLEY_RT_LIST
                       ? (q < L0->nset ? galley_rt_crd(L0, q) : L0->dim)
                       : q;
  return coords + first_leaf(t, q);
}

int dist_split_fast(const galley_tensor *t, int mode, int parts,
                    int64_t *bounds) {
  if (t->order == 0 || t->lvl[0].mode != mode)
    return 0;
  for (int l = 0; l < t->order; l++)
    if (t->lvl[l].kind == GALLEY_RT_HASH ||
        (l == 0 && t->lvl[l].kind == GALLEY_RT_BYTEMAP))
      return 0;
  const galley_level *L0 = &t->lvl[0];
  int64_t npos = L0->kind == GALLEY_RT_LIST ? L0->nset : L0->dim;
  int64_t total = work_before(t, npos);
  bounds[0] = 0;
  for (int k = 1; k < parts; k++) {
    /* the first position whose work before it reaches k/parts */
    double goal = (double)total * k / parts;
    int64_t lo = 0, hi = npos;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if ((double)work_before(t, mid) < goal)
        lo = mid + 1;
      else
        hi = mid;
    }
    int64_t c = L0->kind == GALLEY_RT_LIST
                    ? (lo < L0->nset ? galley_rt_crd(L0, lo) : L0->dim)
                    : lo;
    bounds[k] = c < bounds[k - 1] ? bounds[k - 1] : c;
  }
  bounds[parts] = t->dims[mode];
  return 1;
}

void dist_split(const int64_t *prefix, int64_t n, int parts, int64_t *bounds) {
  bounds[0] = 0;
  int64_t c = 0;
  for (int k = 1; k < parts; k++) {
    if (!prefix) {
      bounds[k] = n / parts * k + (n % parts) * k / parts;
      continue;
    }
    /* the first c whose prefix reaches k/parts of the total */
    double goal = (double)prefix[n] * k / parts;
    while (c < n && (double)prefix[c] < goal)
      c++;
    bounds[k] = c;
  }
  bounds[parts] = n;
}

/* ---- tensor relations ---- */

void dist_relation_free(DistRelation *rel) {
  free(rel->bounds);
  free(rel->owner);
  galley_tensor_free(rel->tile);
  memset(rel, 0, sizeof *rel);
}

/* The relation's shape (order, dims) from root, to everyone. */
static void share_shape(DistComm *c, int root, const galley_tensor *t,
                        DistRelation *rel) {
  int64_t shape[GALLEY_MAX_ORDER + 1] = {0};
  if (c->rank == root) {
    shape[0] = t->order;
    for (int k = 0; k < t->order; k++)
      shape[k + 1] = t->dims[k];
  }
  dist_bcast(c, shape, (int64_t)sizeof shape, root);
  rel->order = (int)shape[0];
  for (int k = 0; k < rel->order; k++)
    rel->dims[k] = shape[k + 1];
}

/* Root packs tile k of every rank: blobs[k]. */
static galley_status pack_tiles(const galley_tensor *t, int key,
                                const int64_t *bounds, int P, DistBlob *blobs,
                                galley_error *err) {
  galley_status st = GALLEY_OK;
  for (int k = 0; k < P && st == GALLEY_OK; k++)
    st = dist_pack(t, key, bounds[k], bounds[k + 1], bounds[k],
                   bounds[k + 1] - bounds[k], &blobs[k], err);
  return st;
}

static galley_status scatter_tiles(DistComm *c, int root,
                                   const galley_tensor *t, int key,
                                   DistRelation *rel, galley_error *err) {
  int P = c->size;
  DistBlob *blobs = calloc((size_t)P, sizeof *blobs);
  int64_t *v = calloc(4 * (size_t)P, sizeof *v);
  int64_t *prefix = NULL;
  galley_status st = blobs && v ? GALLEY_OK : nomem(err);
  if (st == GALLEY_OK && c->rank == root)
    st = dist_work_prefix(t, key, &prefix, err);
  if (st == GALLEY_OK && c->rank == root) {
    dist_split(prefix, t->dims[key], P, rel->bounds);
    st = pack_tiles(t, key, rel->bounds, P, blobs, err);
  }
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK) {
    dist_bcast(c, rel->bounds, (int64_t)(P + 1) * 8, root);
    /* one shuffle: root's blocks go out, nothing comes from the others */
    int64_t *sc = v, *sd = v + P, *rc = v + 2 * P, *rd = v + 3 * P;
    char *send = NULL;
    int64_t total = 0;
    for (int k = 0; c->rank == root && k < P; k++)
      total += blobs[k].len;
    if (c->rank == root && !(send = malloc((size_t)total + 1)))
      st = nomem(err);
    int64_t off = 0;
    for (int k = 0; send && k < P; k++) {
      memcpy(send + off, blobs[k].data, (size_t)blobs[k].len);
      sc[k] = blobs[k].len;
      sd[k] = off;
      off += blobs[k].len;
    }
    st = dist_agree(c, st, err);
    void *recv = NULL;
    if (st == GALLEY_OK)
      st = dist_alltoallv(c, send, sc, sd, &recv, rc, rd, err);
    if (st == GALLEY_OK) {
      const void *d = (char *)recv + rd[root];
      int64_t len = rc[root];
      st = dist_unpack(1, &d, &len, -1, 0, NULL, NULL, NULL, 0, &rel->tile,
                       err);
    }
    free(recv);
    free(send);
  }
  for (int k = 0; blobs && k < P; k++)
    free(blobs[k].data);
  free(blobs);
  free(v);
  free(prefix);
  return st;
}

galley_status dist_relation_scatter(DistComm *c, int root,
                                    const galley_tensor *t, int key,
                                    DistRelation *rel, galley_error *err) {
  memset(rel, 0, sizeof *rel);
  share_shape(c, root, t, rel);
  rel->key = key;
  rel->ntiles = key >= 0 ? c->size : 1;
  rel->bounds = calloc((size_t)rel->ntiles + 1, sizeof *rel->bounds);
  rel->owner = calloc((size_t)rel->ntiles, sizeof *rel->owner);
  galley_status st = rel->bounds && rel->owner ? GALLEY_OK : nomem(err);
  if (st == GALLEY_OK && key >= rel->order)
    st = rt_error(err, GALLEY_EINVAL, "no mode %d to partition", key);
  st = dist_agree(c, st, err);
  for (int k = 0; st == GALLEY_OK && k < rel->ntiles; k++)
    rel->owner[k] = key >= 0 ? k : -1;
  if (st == GALLEY_OK && key >= 0) {
    st = scatter_tiles(c, root, t, key, rel, err);
  } else if (st == GALLEY_OK) {
    rel->bounds[1] = rel->order > 0 ? rel->dims[0] : 1;
    DistBlob b = {0};
    if (c->rank == root)
      st = dist_pack(t, -1, 0, 0, 0, 0, &b, err);
    st = dist_agree(c, st, err);
    if (st == GALLEY_OK)
      st = dist_bcast_blob(c, &b.data, &b.len, root, err);
    const void *d = b.data;
    if (st == GALLEY_OK)
      st = dist_unpack(1, &d, &b.len, -1, 0, NULL, NULL, NULL, 0, &rel->tile,
                       err);
    free(b.data);
  }
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK)
    dist_relation_free(rel);
  return st;
}

galley_status dist_relation_gather(DistComm *c, int root,
                                   const DistRelation *rel,
                                   galley_tensor **out, galley_error *err) {
  *out = NULL;
  int P = c->size;
  DistBlob b = {0};
  galley_status st = GALLEY_OK;
  int key = rel->key;
  if (key < 0) { /* replicated: root has it whole */
    if (c->rank == root) {
      galley_format f;
      galley_tensor_format(rel->tile, &f);
      st = galley_tensor_convert(rel->tile, &f, out, err);
    }
    return dist_agree(c, st, err);
  }
  st = dist_pack(rel->tile, -1, 0, 0, 0, 0, &b, err);
  st = dist_agree(c, st, err);
  void *recv = NULL;
  int64_t *v = calloc(3 * (size_t)P, sizeof *v);
  if (st == GALLEY_OK && !v)
    st = nomem(err);
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK)
    st = dist_gather(c, b.data, b.len, root, &recv, v, v + P, err);
  if (st == GALLEY_OK && c->rank == root) {
    const void **d = calloc((size_t)P, sizeof *d);
    if (!d)
      st = nomem(err);
    for (int k = 0; d && k < P; k++) {
      d[k] = (char *)recv + v[P + k];
      v[2 * P + k] = rel->bounds[k];
    }
    if (d)
      st = dist_unpack(P, (const void *const *)d, v, key, rel->dims[key],
                       v + 2 * P, NULL, NULL, 0, out, err);
    free(d);
  }
  free(recv);
  free(v);
  free(b.data);
  return dist_agree(c, st, err);
}

/* ---- re-partition (SHUF) ---- */

/* This rank's tile with the key coordinate made global again (a copy). */
static galley_status global_tile(const DistComm *c, const DistRelation *rel,
                                 galley_tensor **out, galley_error *err) {
  DistBlob b = {0};
  galley_status st = dist_pack(rel->tile, -1, 0, 0, 0, 0, &b, err);
  const void *d = b.data;
  int64_t shift = rel->key >= 0 ? rel->bounds[c->rank] : 0;
  if (st == GALLEY_OK)
    st = dist_unpack(1, &d, &b.len, rel->key,
                     rel->key >= 0 ? rel->dims[rel->key] : 0, &shift, NULL,
                     NULL, 0, out, err);
  free(b.data);
  return st;
}

galley_status dist_relation_shuffle(DistComm *c, const DistRelation *rel,
                                    int key, DistRelation *out,
                                    galley_error *err) {
  memset(out, 0, sizeof *out);
  int P = c->size;
  galley_status st = key >= 0 && key < rel->order && rel->key >= 0
                         ? GALLEY_OK
                         : rt_error(err, GALLEY_EINVAL, "dist_relation_shuffle: "
                                    "a partitioned relation and a mode of it");
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK)
    return st;
  *out = *rel;
  out->tile = NULL;
  out->key = key;
  out->ntiles = P;
  out->bounds = calloc((size_t)P + 1, sizeof *out->bounds);
  out->owner = calloc((size_t)P, sizeof *out->owner);
  int64_t *v = calloc(4 * (size_t)P, sizeof *v);
  DistBlob *blobs = calloc((size_t)P, sizeof *blobs);
  galley_tensor *g = NULL;
  if (!out->bounds || !out->owner || !v || !blobs)
    st = nomem(err);
  int64_t n = rel->dims[key];
  for (int d = 0; st == GALLEY_OK && d < P; d++) {
    out->bounds[d + 1] = n * (d + 1) / P; /* equal blocks */
    out->owner[d] = d;
  }
  if (st == GALLEY_OK)
    st = global_tile(c, rel, &g, err);
  /* each destination's entries, its key coordinate made tile-local */
  int64_t total = 0;
  for (int d = 0; st == GALLEY_OK && d < P; d++) {
    int64_t lo = out->bounds[d], hi = out->bounds[d + 1];
    st = dist_pack(g, key, lo, hi, lo, hi - lo, &blobs[d], err);
    v[d] = blobs[d].len;
    v[P + d] = total;
    total += blobs[d].len;
  }
  char *send = st == GALLEY_OK ? malloc((size_t)total + 1) : NULL;
  if (st == GALLEY_OK && !send)
    st = nomem(err);
  for (int d = 0; st == GALLEY_OK && d < P; d++)
    memcpy(send + v[P + d], blobs[d].data, (size_t)blobs[d].len);
  for (int d = 0; blobs && d < P; d++)
    free(blobs[d].data);
  free(blobs);
  galley_tensor_free(g);
  st = dist_agree(c, st, err);
  void *recv = NULL;
  if (st == GALLEY_OK)
    st = dist_alltoallv(c, send, v, v + P, &recv, v + 2 * P, v + 3 * P, err);
  free(send);
  const void **d = st == GALLEY_OK ? calloc((size_t)P, sizeof *d) : NULL;
  if (st == GALLEY_OK && !d)
    st = nomem(err);
  for (int s = 0; st == GALLEY_OK && s < P; s++)
    d[s] = (const char *)recv + v[3 * P + s];
  if (st == GALLEY_OK)
    st = dist_unpack(P, d, v + 2 * P, key,
                     out->bounds[c->rank + 1] - out->bounds[c->rank], NULL,
                     NULL, NULL, 0, &out->tile, err);
  free(d);
  free(recv);
  free(v);
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK)
    dist_relation_free(out);
  return st;
}
