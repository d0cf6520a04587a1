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

static galley_status parse_lines(tns_parse *tp) {
  char *line;
  size_t len;
  int got;
  while ((got = rt_reader_next(tp->r, &line, &len, tp->err)) == 1) {
    const char *p = line, *end = line + len;
    while (p < end && rt_is_blank(*p))
      p++;
    if (p == end)
      continue;
    galley_status st = *p == '#' ? parse_hash_line(tp, p + 1, end)
                                 : parse_entry(tp, p, end);
    if (st != GALLEY_OK)
      return st;
  }
  return got < 0 ? (galley_status)got : GALLEY_OK;
}

galley_status rt_read_tns(rt_reader *r, rt_coo *coo, galley_error *err) {
  tns_parse tp;
  memset(&tp, 0, sizeof tp);
  tp.r = r;
  tp.coo = coo;
  tp.err = err;
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
