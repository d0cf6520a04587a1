/*
 * io_mtx.c -- the Matrix Market reader.
 *
 *   %%MatrixMarket matrix FORMAT FIELD SYMMETRY     (keywords in any case)
 *   % comments and blank lines
 *   ROWS COLS NNZ        (coordinate)   or   ROWS COLS   (array)
 *   entries
 *
 * FORMAT is `coordinate` (one "ROW COL [VALUE]" line per entry, 1-based)
 * or `array` (one value a line, column-major, all of it dense; symmetric
 * and skew-symmetric arrays hold the lower triangle only, skew without the
 * diagonal).  FIELD is real, integer or pattern (value 1; coordinate
 * only); complex is refused.  SYMMETRY is general, symmetric or
 * skew-symmetric (expanded to both triangles, the mirrored value negated
 * for skew); hermitian is refused.  A symmetric coordinate file must store
 * the lower triangle (row >= col), a skew one the strict lower triangle.
 * The number of entries must match the size line exactly.  '%' lines and
 * blank lines are tolerated anywhere after the banner.
 */
#include <stdio.h>
#include <string.h>

#include "io_reader.h"

enum { SYM_GENERAL = 0, SYM_SYMMETRIC = 1, SYM_SKEW = 2 };

/* State of one parse, so that the helpers share it. */
typedef struct mtx_parse {
  rt_reader *r;       /* input */
  rt_coo *coo;        /* output */
  galley_error *err;  /* where errors go */
  rt_mtx_info info;   /* the header */
  int64_t rows, cols; /* the size line */
} mtx_parse;

static int is_comment_or_blank(const char *line, size_t len) {
  const char *p = line, *end = line + len;
  while (p < end && rt_is_blank(*p))
    p++;
  return p == end || *p == '%';
}

/* Next line that is not a comment or blank: 1, 0 at end, <0 on error. */
static int next_data_line(rt_reader *r, char **line, size_t *len,
                          galley_error *err) {
  int got;
  while ((got = rt_reader_next(r, line, len, err)) == 1)
    if (!is_comment_or_blank(*line, *len))
      return 1;
  return got;
}

/* Index of [s, e) (any case) in the NULL-terminated words, or -1. */
static int keyword(const char *s, const char *e, const char *const *words) {
  for (int k = 0; words[k]; k++)
    if (rt_word_is(s, e, words[k]))
      return k;
  return -1;
}

static const char *const formats[] = {"coordinate", "array", NULL};
static const char *const fields[] = {"real",    "double",  "integer",
                                     "pattern", "complex", NULL};
static const char *const symmetries[] = {"general", "symmetric",
                                         "skew-symmetric", "hermitian", NULL};

/* FORMAT FIELD SYMMETRY of the banner, w[k] = {start, end} of word k. */
static galley_status banner_keywords(mtx_parse *mp, const char *w[5][2]) {
  rt_reader *r = mp->r;
  rt_mtx_info *in = &mp->info;
  char q[48];
  int fmt = keyword(w[2][0], w[2][1], formats);
  int field = keyword(w[3][0], w[3][1], fields);
  int sym = keyword(w[4][0], w[4][1], symmetries);
  if (fmt < 0)
    return rt_data_error(
        mp->err, r->name, r->line,
        "unknown format '%s' (expected 'coordinate' or 'array')",
        rt_quote(q, w[2][0], w[2][1]));
  if (field == 4)
    return rt_data_error(mp->err, r->name, r->line,
                         "complex matrices are not supported");
  if (field < 0)
    return rt_data_error(
        mp->err, r->name, r->line,
        "unknown field '%s' (expected 'real', 'integer' or 'pattern')",
        rt_quote(q, w[3][0], w[3][1]));
  if (sym == 3)
    return rt_data_error(mp->err, r->name, r->line,
                         "hermitian matrices are not supported");
  if (sym < 0)
    return rt_data_error(mp->err, r->name, r->line,
                         "unknown symmetry '%s' (expected 'general', "
                         "'symmetric' or 'skew-symmetric')",
                         rt_quote(q, w[4][0], w[4][1]));
  in->array = fmt == 1;
  in->integer = field == 2;
  in->pattern = field == 3;
  in->symmetry = sym; /* SYM_GENERAL, SYM_SYMMETRIC, SYM_SKEW */
  if (in->pattern && in->array)
    return rt_data_error(mp->err, r->name, r->line,
                         "a pattern matrix cannot be in array format");
  if (in->pattern && in->symmetry == SYM_SKEW)
    return rt_data_error(mp->err, r->name, r->line,
                         "a pattern matrix cannot be skew-symmetric");
  return GALLEY_OK;
}

/* banner = "%%MatrixMarket" "matrix" FORMAT FIELD SYMMETRY */
static galley_status parse_banner(mtx_parse *mp) {
  rt_reader *r = mp->r;
  char *line, q[48];
  size_t len;
  int got = rt_reader_next(r, &line, &len, mp->err);
  if (got < 0)
    return (galley_status)got;
  if (got == 0)
    return rt_data_error(mp->err, r->name, 1,
                         "missing '%%%%MatrixMarket' banner (empty file)");
  const char *p = line, *end = line + len, *w[6][2], *s, *e;
  int n = 0;
  while (n < 6 && rt_next_field(&p, end, &s, &e)) {
    w[n][0] = s;
    w[n][1] = e;
    n++;
  }
  if (n == 0 || !rt_word_is(w[0][0], w[0][1], "%%matrixmarket"))
    return rt_data_error(mp->err, r->name, r->line,
                         "missing '%%%%MatrixMarket' banner");
  if (n != 5)
    return rt_data_error(
        mp->err, r->name, r->line,
        "bad banner: expected '%%%%MatrixMarket matrix FORMAT FIELD "
        "SYMMETRY'");
  if (!rt_word_is(w[1][0], w[1][1], "matrix"))
    return rt_data_error(mp->err, r->name, r->line,
                         "unsupported object '%s' (expected 'matrix')",
                         rt_quote(q, w[1][0], w[1][1]));
  return banner_keywords(mp, w);
}

/* One size on the size line: a non-negative int64. */
static galley_status parse_size(mtx_parse *mp, const char *s, const char *e,
                                int64_t *out) {
  char q[48];
  int rc = rt_parse_int64(s, e, out);
  if (rc == RT_NUM_OVERFLOW)
    return rt_data_error(mp->err, mp->r->name, mp->r->line,
                         "size '%s' overflows int64", rt_quote(q, s, e));
  if (rc != RT_NUM_OK)
    return rt_data_error(mp->err, mp->r->name, mp->r->line, "bad size '%s'",
                         rt_quote(q, s, e));
  if (*out < 0)
    return rt_data_error(mp->err, mp->r->name, mp->r->line,
                         "negative size %lld", (long long)*out);
  return GALLEY_OK;
}

/* size line = ROWS COLS NNZ (coordinate) | ROWS COLS (array) */
static galley_status parse_size_line(mtx_parse *mp) {
  rt_reader *r = mp->r;
  char *line;
  size_t len;
  int got = next_data_line(r, &line, &len, mp->err);
  if (got < 0)
    return (galley_status)got;
  if (got == 0)
    return rt_data_error(mp->err, r->name, rt_reader_eof_line(r),
                         "missing size line");
  const char *p = line, *end = line + len, *s = NULL, *e = NULL;
  int want = mp->info.array ? 2 : 3;
  int n = rt_count_fields(p, end);
  if (n != want)
    return rt_data_error(mp->err, r->name, r->line,
                         mp->info.array
                             ? "bad size line: expected 'ROWS COLS'"
                             : "bad size line: expected 'ROWS COLS NNZ'");
  int64_t v[3] = {0, 0, 0};
  for (int k = 0; k < want; k++) {
    rt_next_field(&p, end, &s, &e);
    galley_status st = parse_size(mp, s, e, &v[k]);
    if (st != GALLEY_OK)
      return st;
  }
  mp->rows = v[0];
  mp->cols = v[1];
  if (mp->info.symmetry != SYM_GENERAL && v[0] != v[1])
    return rt_data_error(mp->err, r->name, r->line,
                         "a %s matrix must be square, not %lld x %lld",
                         mp->info.symmetry == SYM_SKEW ? "skew-symmetric"
                                                       : "symmetric",
                         (long long)v[0], (long long)v[1]);
  if (mp->info.array) {
    /* values stored: the whole matrix or one triangle of it */
    int64_t n2, cnt;
    if (rt_mul_overflows(v[0], v[1], &n2) || n2 >= RT_MAX_POSITIONS)
      return rt_data_error(mp->err, r->name, r->line,
                           "dense matrix of %lld x %lld is too large",
                           (long long)v[0], (long long)v[1]);
    if (mp->info.symmetry == SYM_GENERAL)
      cnt = n2;
    else if (mp->info.symmetry == SYM_SYMMETRIC)
      cnt = (n2 + v[0]) / 2;
    else
      cnt = v[0] > 0 ? (n2 - v[0]) / 2 : 0;
    mp->info.stored = cnt;
  } else {
    mp->info.stored = v[2];
  }
  return GALLEY_OK;
}

/* Room for the entries: the announced count, but never more than the
 * input can hold (a short file may claim billions). */
static galley_status reserve_entries(mtx_parse *mp) {
  int64_t want = mp->info.stored;
  int64_t cap = mp->r->size_hint >= 0 ? mp->r->size_hint / 2 + 16
                                      : ((int64_t)1 << 20);
  if (want > cap)
    want = cap;
  if (mp->info.symmetry != SYM_GENERAL && want < INT64_MAX / 2)
    want *= 2;
  if (rt_coo_reserve(mp->coo, want) != 0)
    return rt_error(mp->err, GALLEY_ENOMEM, "%s: error: out of memory",
                    mp->r->name);
  return GALLEY_OK;
}

static galley_status push(mtx_parse *mp, int64_t i, int64_t j, double v) {
  int64_t c[2] = {i, j};
  if (rt_coo_push(mp->coo, c, v) != 0)
    return rt_error(mp->err, GALLEY_ENOMEM, "%s: error: out of memory",
                    mp->r->name);
  return GALLEY_OK;
}

/* Push (i, j) and, for a symmetric file, its mirror (j, i). */
static galley_status push_sym(mtx_parse *mp, int64_t i, int64_t j,
                              double v) {
  galley_status st = push(mp, i, j, v);
  if (st != GALLEY_OK || i == j || mp->info.symmetry == SYM_GENERAL)
    return st;
  return push(mp, j, i, mp->info.symmetry == SYM_SKEW ? -v : v);
}

/* The value field of an entry (real or integer field). */
static galley_status parse_value(mtx_parse *mp, const char *s, const char *e,
                                 double *v) {
  char q[48];
  if (mp->info.integer) {
    int64_t x;
    int rc = rt_parse_int64(s, e, &x);
    if (rc == RT_NUM_OK) {
      *v = (double)x;
      return GALLEY_OK;
    }
    return rt_data_error(mp->err, mp->r->name, mp->r->line,
                         rc == RT_NUM_OVERFLOW
                             ? "integer value '%s' overflows int64"
                             : "bad integer value '%s'",
                         rt_quote(q, s, e));
  }
  int rc = rt_parse_double(s, e, v);
  if (rc == RT_NUM_OVERFLOW)
    return rt_data_error(mp->err, mp->r->name, mp->r->line,
                         RT_TOO_LARGE_MSG, rt_quote(q, s, e));
  if (rc != RT_NUM_OK)
    return rt_data_error(mp->err, mp->r->name, mp->r->line,
                         "bad value '%s'", rt_quote(q, s, e));
  return GALLEY_OK;
}

/* A wrong number of fields on entry line; the last line of the input cut
 * short (no newline) is called truncated. */
static galley_status field_count_error(mtx_parse *mp, const char *line,
                                       size_t len, int want) {
  int n = rt_count_fields(line, line + len);
  if (!mp->r->newline && n < want)
    return rt_data_error(mp->err, mp->r->name, mp->r->line,
                         "truncated last line: expected %d field%s, found %d",
                         want, want == 1 ? "" : "s", n);
  return rt_data_error(mp->err, mp->r->name, mp->r->line,
                       "expected %d field%s, found %d", want,
                       want == 1 ? "" : "s", n);
}

static galley_status index_error(mtx_parse *mp, const char *what,
                                 const char *s, const char *e, int rc,
                                 int64_t x, int64_t size) {
  char q[48];
  if (rc == RT_NUM_OVERFLOW)
    return rt_data_error(mp->err, mp->r->name, mp->r->line,
                         "%s index '%s' overflows int64", what,
                         rt_quote(q, s, e));
  if (rc != RT_NUM_OK)
    return rt_data_error(mp->err, mp->r->name, mp->r->line,
                         "bad %s index '%s'", what, rt_quote(q, s, e));
  return rt_data_error(mp->err, mp->r->name, mp->r->line,
                       "%s index %lld out of range 1..%lld", what,
                       (long long)x, (long long)size);
}

/* coordinate entry = ROW COL [VALUE] */
static galley_status parse_coord_entry(mtx_parse *mp, char *line,
                                       size_t len) {
  const char *p = line, *end = line + len, *s[3], *e[3];
  int want = mp->info.pattern ? 2 : 3;
  for (int k = 0; k < want; k++)
    if (!rt_next_field(&p, end, &s[k], &e[k]))
      return field_count_error(mp, line, len, want);
  const char *t0, *t1;
  if (rt_next_field(&p, end, &t0, &t1))
    return field_count_error(mp, line, len, want);
  int64_t i, j;
  int rc = rt_parse_int64(s[0], e[0], &i);
  if (rc != RT_NUM_OK || i < 1 || i > mp->rows)
    return index_error(mp, "row", s[0], e[0], rc, i, mp->rows);
  rc = rt_parse_int64(s[1], e[1], &j);
  if (rc != RT_NUM_OK || j < 1 || j > mp->cols)
    return index_error(mp, "column", s[1], e[1], rc, j, mp->cols);
  double v = 1.0;
  if (!mp->info.pattern) {
    galley_status st = parse_value(mp, s[2], e[2], &v);
    if (st != GALLEY_OK)
      return st;
  }
  if (mp->info.symmetry != SYM_GENERAL && i < j)
    return rt_data_error(mp->err, mp->r->name, mp->r->line,
                         "entry (%lld, %lld) above the diagonal of a %s "
                         "matrix (only the lower triangle may be stored)",
                         (long long)i, (long long)j,
                         mp->info.symmetry == SYM_SKEW ? "skew-symmetric"
                                                       : "symmetric");
  if (mp->info.symmetry == SYM_SKEW && i == j)
    return rt_data_error(mp->err, mp->r->name, mp->r->line,
                         "diagonal entry (%lld, %lld) in a skew-symmetric "
                         "matrix",
                         (long long)i, (long long)j);
  return push_sym(mp, i - 1, j - 1, v);
}

/* array entry = VALUE, at (i, j) of the column-major walk */
static galley_status parse_array_entry(mtx_parse *mp, char *line, size_t len,
                                       int64_t *i, int64_t *j) {
  const char *p = line, *end = line + len, *s, *e, *t0, *t1;
  if (!rt_next_field(&p, end, &s, &e) || rt_next_field(&p, end, &t0, &t1))
    return field_count_error(mp, line, len, 1);
  double v;
  galley_status st = parse_value(mp, s, e, &v);
  if (st != GALLEY_OK)
    return st;
  st = push_sym(mp, *i, *j, v);
  if (st != GALLEY_OK)
    return st;
  /* advance down the column, then to the next column's first stored row */
  if (++*i == mp->rows) {
    ++*j;
    *i = mp->info.symmetry == SYM_GENERAL ? 0
         : mp->info.symmetry == SYM_SYMMETRIC ? *j
                                              : *j + 1;
  }
  return GALLEY_OK;
}

static galley_status parse_entries(mtx_parse *mp) {
  rt_reader *r = mp->r;
  int64_t found = 0, i = 0, j = 0;
  char *line;
  size_t len;
  int got;
  if (mp->info.array && mp->info.symmetry == SYM_SKEW)
    i = 1; /* the strict lower triangle starts at (1, 0) */
  while ((got = next_data_line(r, &line, &len, mp->err)) == 1) {
    if (found == mp->info.stored)
      return rt_data_error(mp->err, r->name, r->line,
                           "more entries than the %lld on the size line",
                           (long long)mp->info.stored);
    galley_status st = mp->info.array
                           ? parse_array_entry(mp, line, len, &i, &j)
                           : parse_coord_entry(mp, line, len);
    if (st != GALLEY_OK)
      return st;
    found++;
  }
  if (got < 0)
    return (galley_status)got;
  if (found != mp->info.stored)
    return rt_data_error(mp->err, r->name, rt_reader_eof_line(r),
                         "expected %lld entries, found %lld",
                         (long long)mp->info.stored, (long long)found);
  return GALLEY_OK;
}

galley_status rt_read_mtx(rt_reader *r, rt_coo *coo, rt_mtx_info *info,
                          galley_error *err) {
  mtx_parse mp;
  memset(&mp, 0, sizeof mp);
  mp.r = r;
  mp.coo = coo;
  mp.err = err;
  rt_coo_init(coo, 2);
  galley_status st = parse_banner(&mp);
  if (st == GALLEY_OK)
    st = parse_size_line(&mp);
  if (st == GALLEY_OK) {
    coo->dims[0] = mp.rows;
    coo->dims[1] = mp.cols;
    st = reserve_entries(&mp);
  }
  if (st == GALLEY_OK)
    st = parse_entries(&mp);
  if (info)
    *info = mp.info;
  return st;
}
