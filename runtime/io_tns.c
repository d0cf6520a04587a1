/*
 * io_tns.c -- the FROSTT .tns reader.
 *
 *   # dims: D1 ... Dk      optional; no sizes = an order-0 (scalar) tensor
 *   # fill: V              optional; the value of unlisted entries (0)
 *   # any other comment
 *   I1 ... Ik VALUE        one entry a line, 1-based, blank-separated
 *
 * Header lines must come before the first entry, each at most once.
 * Without '# dims:' the order is the number of fields of the first entry
 * line minus one and each size is the largest coordinate of its mode.
 * Every entry line has the same number of fields.  A scalar file holds
 * exactly one value line.  Blank lines are skipped.  A file with neither
 * entries nor '# dims:' is refused: its order cannot be known.
 * Duplicates are kept here; the tensor builder sums them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_reader.h"

/* State of one parse. */
typedef struct tns_parse {
  rt_reader *r;                     /* input */
  rt_coo *coo;                      /* output */
  galley_error *err;                /* where errors go */
  int order;                        /* -1 until known */
  int have_dims;                    /* a '# dims:' line was seen */
  int have_fill;                    /* a '# fill:' line was seen */
  int64_t entries;                  /* entry lines read */
  int64_t maxc[GALLEY_MAX_ORDER];   /* largest 1-based coordinate per mode */
  const rt_par *par;                /* entries after the first in parts on
                                       threads (rt_read_chunks), or NULL */
  size_t chunk, part_min;
} tns_parse;

static galley_status oom(tns_parse *tp) {
  return rt_error(tp->err, GALLEY_ENOMEM, "%s: error: out of memory",
                  tp->r->name);
}

/* dims header = "dims:" SIZE* (after the '#') */
static galley_status parse_dims(tns_parse *tp, const char *p,
                                const char *end) {
  rt_reader *r = tp->r;
  char q[48];
  if (tp->entries > 0)
    return rt_data_error(tp->err, r->name, r->line,
                         "'# dims:' header after the first entry");
  if (tp->have_dims)
    return rt_data_error(tp->err, r->name, r->line,
                         "duplicate '# dims:' header");
  int n = rt_count_fields(p, end);
  if (n > GALLEY_MAX_ORDER)
    return rt_data_error(tp->err, r->name, r->line,
                         "'# dims:' gives %d sizes, more than the maximum "
                         "order %d",
                         n, GALLEY_MAX_ORDER);
  double fill = tp->coo->fill; /* a '# fill:' line may come first */
  rt_coo_init(tp->coo, n);
  tp->coo->fill = fill;
  const char *s = NULL, *e = NULL;
  for (int k = 0; k < n; k++) {
    rt_next_field(&p, end, &s, &e);
    int64_t d;
    int rc = rt_parse_int64(s, e, &d);
    if (rc == RT_NUM_OVERFLOW)
      return rt_data_error(tp->err, r->name, r->line,
                           "size '%s' in '# dims:' overflows int64",
                           rt_quote(q, s, e));
    if (rc != RT_NUM_OK)
      return rt_data_error(tp->err, r->name, r->line,
                           "bad size '%s' in '# dims:'", rt_quote(q, s, e));
    if (d < 0)
      return rt_data_error(tp->err, r->name, r->line,
                           "negative size %lld in '# dims:'", (long long)d);
    tp->coo->dims[k] = d;
  }
  tp->have_dims = 1;
  tp->order = n;
  return GALLEY_OK;
}

/* fill header = "fill:" VALUE (after the '#') */
static galley_status parse_fill(tns_parse *tp, const char *p,
                                const char *end) {
  rt_reader *r = tp->r;
  char q[48];
  const char *s = NULL, *e = NULL;
  if (tp->entries > 0)
    return rt_data_error(tp->err, r->name, r->line,
                         "'# fill:' header after the first entry");
  if (tp->have_fill)
    return rt_data_error(tp->err, r->name, r->line,
                         "duplicate '# fill:' header");
  if (rt_count_fields(p, end) != 1)
    return rt_data_error(tp->err, r->name, r->line,
                         "bad '# fill:' header: expected one value");
  rt_next_field(&p, end, &s, &e);
  double v;
  int rc = rt_parse_double(s, e, &v);
  if (rc == RT_NUM_OVERFLOW)
    return rt_data_error(tp->err, r->name, r->line, "bad '# fill:' "
                         RT_TOO_LARGE_MSG, rt_quote(q, s, e));
  if (rc != RT_NUM_OK)
    return rt_data_error(tp->err, r->name, r->line,
                         "bad '# fill:' value '%s'", rt_quote(q, s, e));
  tp->have_fill = 1;
  tp->coo->fill = v;
  return GALLEY_OK;
}

/* A '#' line: a header or a comment.  p is just after the '#'. */
static galley_status parse_hash_line(tns_parse *tp, const char *p,
                                     const char *end) {
  while (p < end && rt_is_blank(*p))
    p++;
  if (end - p >= 5 && memcmp(p, "dims:", 5) == 0)
    return parse_dims(tp, p + 5, end);
  if (end - p >= 5 && memcmp(p, "fill:", 5) == 0)
    return parse_fill(tp, p + 5, end);
  return GALLEY_OK;
}

/* The first entry without '# dims:' fixes the order. */
static galley_status order_from_entry(tns_parse *tp, const char *line,
                                      const char *end) {
  int n = rt_count_fields(line, end);
  if (n < 2)
    return rt_data_error(tp->err, tp->r->name, tp->r->line,
                         "an entry needs coordinates and a value (or a "
                         "'# dims:' header with no sizes for a scalar)");
  if (n - 1 > GALLEY_MAX_ORDER)
    return rt_data_error(tp->err, tp->r->name, tp->r->line,
                         "entry has %d coordinates, more than the maximum "
                         "order %d",
                         n - 1, GALLEY_MAX_ORDER);
  double fill = tp->coo->fill;
  rt_coo_init(tp->coo, n - 1);
  tp->coo->fill = fill;
  tp->order = n - 1;
  return GALLEY_OK;
}

static galley_status field_count_error(tns_parse *tp, const char *line,
                                       const char *end) {
  int n = rt_count_fields(line, end), want = tp->order + 1;
  rt_reader *r = tp->r;
  if (!r->newline && n < want)
    return rt_data_error(tp->err, r->name, r->line,
                         "truncated last line: expected %d field%s, found %d",
                         want, want == 1 ? "" : "s", n);
  if (tp->have_dims)
    return rt_data_error(tp->err, r->name, r->line,
                         "'# dims:' gives %d sizes but the entry has %d "
                         "fields (expected %d)",
                         tp->order, n, want);
  return rt_data_error(tp->err, r->name, r->line,
                       "expected %d fields like the first entry, found %d",
                       want, n);
}

static galley_status coord_error(tns_parse *tp, const char *s, const char *e,
                                 int rc, int64_t x, int field) {
  char q[48];
  rt_reader *r = tp->r;
  if (rc == RT_NUM_OVERFLOW)
    return rt_data_error(tp->err, r->name, r->line,
                         "coordinate '%s' overflows int64", rt_quote(q, s, e));
  if (rc != RT_NUM_OK)
    return rt_data_error(tp->err, r->name, r->line, "bad coordinate '%s'",
                         rt_quote(q, s, e));
  if (x < 1)
    return rt_data_error(tp->err, r->name, r->line,
                         "coordinate %lld in field %d is below 1",
                         (long long)x, field);
  return rt_data_error(tp->err, r->name, r->line,
                       "coordinate %lld in field %d out of range 1..%lld",
                       (long long)x, field,
                       (long long)tp->coo->dims[field - 1]);
}

/* entry = COORD{order} VALUE */
static galley_status parse_entry(tns_parse *tp, const char *line,
                                 const char *end) {
  char q[48];
  if (tp->order < 0) {
    galley_status st = order_from_entry(tp, line, end);
    if (st != GALLEY_OK)
      return st;
  }
  if (tp->order == 0 && tp->entries > 0)
    return rt_data_error(tp->err, tp->r->name, tp->r->line,
                         "more than one value line in a scalar file");
  const char *p = line, *s, *e;
  int64_t c[GALLEY_MAX_ORDER];
  for (int k = 0; k < tp->order; k++) {
    if (!rt_next_field(&p, end, &s, &e))
      return field_count_error(tp, line, end);
    int64_t x = 0;
    int rc = rt_parse_int64(s, e, &x);
    if (rc != RT_NUM_OK || x < 1 || (tp->have_dims && x > tp->coo->dims[k]))
      return coord_error(tp, s, e, rc, x, k + 1);
    if (x > tp->maxc[k])
      tp->maxc[k] = x;
    c[k] = x - 1;
  }
  if (!rt_next_field(&p, end, &s, &e))
    return field_count_error(tp, line, end);
  const char *vs = s, *ve = e;
  if (rt_next_field(&p, end, &s, &e))
    return field_count_error(tp, line, end);
  double v;
  int rc = rt_parse_double(vs, ve, &v);
  if (rc == RT_NUM_OVERFLOW)
    return rt_data_error(tp->err, tp->r->name, tp->r->line,
                         RT_TOO_LARGE_MSG, rt_quote(q, vs, ve));
  if (rc != RT_NUM_OK)
    return rt_data_error(tp->err, tp->r->name, tp->r->line,
                         "bad value '%s'", rt_quote(q, vs, ve));
  if (rt_coo_push(tp->coo, c, v) != 0)
    return oom(tp);
  tp->entries++;
  return GALLEY_OK;
}

/* One line: blank, a '#' line or an entry. */
static galley_status parse_line(tns_parse *tp, const char *line,
                                size_t len) {
  const char *p = line, *end = line + len;
  while (p < end && rt_is_blank(*p))
    p++;
  if (p == end)
    return GALLEY_OK;
  return *p == '#' ? parse_hash_line(tp, p + 1, end)
                   : parse_entry(tp, p, end);
}

/* ---- the entries after the first on threads ----
 *
 * Once the first entry fixed the order (and the headers are done: they
 * may not follow it), the rest of a large file is parsed in parts
 * (rt_read_chunks), each by parse_line over a memory reader into a list
 * of its own with the largest coordinates of its own, appended in order;
 * a part that fails is parsed again from its true first line, for the
 * message (as io_mtx.c does). */
typedef struct TnsPart {
  int64_t line0, lines;
  rt_coo coo;
  int64_t entries;
  int64_t maxc[GALLEY_MAX_ORDER];
  galley_status st;
  galley_error err;
} TnsPart;

typedef struct TnsChunks {
  const tns_parse *tp;
  rt_chunks *chunks;
  TnsPart part[RT_CHUNK_MAX_PARTS];
} TnsChunks;

static void tns_parse_part(const TnsChunks *c, int k, TnsPart *pt) {
  const tns_parse *tp = c->tp;
  rt_reader r;
  pt->st = rt_reader_open_mem(&r, tp->r->name, c->chunks->s[k],
                              c->chunks->len[k], &pt->err);
  rt_coo_init(&pt->coo, tp->order);
  memcpy(pt->coo.dims, tp->coo->dims, sizeof pt->coo.dims);
  pt->coo.fill = tp->coo->fill;
  if (pt->st != GALLEY_OK)
    return;
  r.line = pt->line0;
  tns_parse mine = *tp;
  mine.r = &r;
  mine.coo = &pt->coo;
  mine.err = &pt->err;
  mine.par = NULL;
  memset(mine.maxc, 0, sizeof mine.maxc);
  if (rt_coo_reserve(&pt->coo, (int64_t)(c->chunks->len[k] / 16 + 16)) != 0)
    pt->st = oom(&mine);
  char *line;
  size_t len;
  int got = 0;
  while (pt->st == GALLEY_OK &&
         (got = rt_reader_next(&r, &line, &len, &pt->err)) == 1)
    pt->st = parse_line(&mine, line, len);
  if (pt->st == GALLEY_OK && got < 0)
    pt->st = (galley_status)got;
  pt->entries = mine.entries - tp->entries;
  memcpy(pt->maxc, mine.maxc, sizeof pt->maxc);
  pt->lines = r.line - pt->line0;
  rt_reader_close(&r);
}

static void tns_part_task(void *ctx, int k) {
  TnsChunks *c = ctx;
  memset(&c->part[k], 0, sizeof c->part[k]);
  tns_parse_part(c, k, &c->part[k]);
}

static galley_status tns_merge_task(void *ctx, int nparts) {
  TnsChunks *c = ctx;
  tns_parse *tp = (tns_parse *)c->tp;
  int64_t add = 0;
  galley_status st = GALLEY_OK;
  for (int k = 0; k < nparts && st == GALLEY_OK; k++) {
    TnsPart *pt = &c->part[k];
    pt->line0 = c->chunks->line;
    if (pt->st != GALLEY_OK) { /* again, for its true line numbers */
      rt_coo_free(&pt->coo);
      tns_parse_part(c, k, pt);
      if (tp->err)
        *tp->err = pt->err;
      st = pt->st;
      break;
    }
    c->chunks->line += pt->lines;
    tp->entries += pt->entries;
    for (int m = 0; m < tp->order; m++)
      if (pt->maxc[m] > tp->maxc[m])
        tp->maxc[m] = pt->maxc[m];
    add += pt->coo.nnz;
  }
  if (st == GALLEY_OK && rt_coo_reserve(tp->coo, add) != 0)
    st = oom(tp);
  for (int k = 0; k < nparts; k++) {
    rt_coo *from = &c->part[k].coo, *to = tp->coo;
    if (st == GALLEY_OK) {
      memcpy(to->crd + to->nnz * tp->order, from->crd,
             (size_t)(from->nnz * tp->order) * sizeof *to->crd);
      memcpy(to->val + to->nnz, from->val,
             (size_t)from->nnz * sizeof *to->val);
      to->nnz += from->nnz;
    }
    rt_coo_free(from);
  }
  return st;
}

static galley_status parse_rest_par(tns_parse *tp) {
  TnsChunks *c = calloc(1, sizeof *c);
  if (!c)
    return oom(tp);
  rt_chunks ch = {.r = tp->r, .par = tp->par, .chunk = tp->chunk,
                  .part_min = tp->part_min, .parse = tns_part_task,
                  .merge = tns_merge_task, .ctx = c, .err = tp->err,
                  .line = tp->r->line};
  c->tp = tp;
  c->chunks = &ch;
  galley_status st = rt_read_chunks(&ch);
  tp->r->line = ch.line; /* for a message at the end */
  free(c);
  return st;
}

static galley_status parse_lines(tns_parse *tp) {
  char *line;
  size_t len;
  int got;
  int big = tp->r->size_hint < 0 ||
            tp->r->size_hint >= (int64_t)(2 * tp->part_min);
  while ((got = rt_reader_next(tp->r, &line, &len, tp->err)) == 1) {
    galley_status st = parse_line(tp, line, len);
    if (st != GALLEY_OK)
      return st;
    if (tp->par && tp->par->run && big && tp->order > 0 && tp->entries == 1)
      return parse_rest_par(tp);
  }
  return got < 0 ? (galley_status)got : GALLEY_OK;
}

/* The chunks and parts of rt_read_tns_par, as io_mtx.c's. */
#define TNS_CHUNK ((size_t)1 << 25)
#define TNS_PART_MIN ((size_t)1 << 20)

galley_status rt_read_tns(rt_reader *r, rt_coo *coo, galley_error *err) {
  return rt_read_tns_sized(r, coo, NULL, TNS_CHUNK, TNS_PART_MIN, err);
}

galley_status rt_read_tns_par(rt_reader *r, rt_coo *coo, const rt_par *par,
                              galley_error *err) {
  return rt_read_tns_sized(r, coo, par, TNS_CHUNK, TNS_PART_MIN, err);
}

galley_status rt_read_tns_sized(rt_reader *r, rt_coo *coo, const rt_par *par,
                                size_t chunk, size_t part_min,
                                galley_error *err) {
  tns_parse tp;
  memset(&tp, 0, sizeof tp);
  tp.r = r;
  tp.coo = coo;
  tp.err = err;
  tp.par = par;
  tp.chunk = chunk > 0 ? chunk : 1;
  tp.part_min = part_min > 0 ? part_min : 1;
  tp.order = -1;
  rt_coo_init(coo, 0);
  galley_status st = parse_lines(&tp);
  if (st != GALLEY_OK)
    return st;
  if (tp.order < 0)
    return rt_data_error(err, r->name, rt_reader_eof_line(r),
                         "no entries and no '# dims:' header");
  if (tp.order == 0 && tp.entries == 0)
    return rt_data_error(err, r->name, rt_reader_eof_line(r),
                         "missing the value line of a scalar ('# dims:' "
                         "with no sizes)");
  if (!tp.have_dims)
    for (int k = 0; k < tp.order; k++)
      coo->dims[k] = tp.maxc[k];
  return GALLEY_OK;
}
