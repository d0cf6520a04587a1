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
#include <stdlib.h>
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
  size_t chunk, part_min; /* parse_entries_par's sizes */
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

/* ------------------------------------------------------------------ */
/* Coordinate entries on threads                                       */
/* ------------------------------------------------------------------ */

/* The entries after the size line are parsed in parts on threads
 * (rt_read_chunks: chunks of MTX_CHUNK bytes cut at line ends into parts
 * of about MTX_PART_MIN bytes), each part by the serial parser over a
 * memory reader (the same checks, the same messages) into a list of its
 * own; the parts are then appended in order.  A part counts its lines,
 * so the line numbers of the parts after it are known only then: a part
 * that fails is parsed again, serially, from its true first line, for
 * the message. */
#define MTX_CHUNK ((size_t)1 << 25)
#define MTX_PART_MIN ((size_t)1 << 20)

typedef struct MtxPart {
  const char *s;      /* its bytes */
  size_t len;
  int64_t line0;      /* lines before it (0 until known) */
  int64_t lines;      /* lines it holds */
  int64_t found;      /* entries parsed before its error (the error's
                         line is its entry found + 1) */
  rt_coo coo;         /* its entries */
  galley_status st;   /* of its parse */
  galley_error err;
} MtxPart;

typedef struct MtxChunk {
  const mtx_parse *mp; /* the header, the file's name */
  rt_chunks *chunks;   /* the parts' bytes */
  MtxPart part[RT_CHUNK_MAX_PARTS];
  int64_t found;       /* entries so far */
} MtxChunk;

/* Parse part pt (lines numbered from its line0). */
static void parse_part(const MtxChunk *c, MtxPart *pt) {
  rt_reader r;
  rt_coo_init(&pt->coo, 2);
  pt->found = 0;
  pt->st = rt_reader_open_mem(&r, c->mp->r->name, pt->s, pt->len, &pt->err);
  if (pt->st != GALLEY_OK)
    return;
  r.line = pt->line0;
  mtx_parse mp = *c->mp;
  mp.r = &r;
  mp.coo = &pt->coo;
  mp.err = &pt->err;
  int64_t per = mp.info.symmetry == SYM_GENERAL ? 1 : 2;
  if (rt_coo_reserve(&pt->coo, per * (int64_t)(pt->len / 16 + 16)) != 0)
    pt->st = rt_error(&pt->err, GALLEY_ENOMEM, "%s: error: out of memory",
                      r.name);
  char *line;
  size_t len;
  int got = 0;
  while (pt->st == GALLEY_OK &&
         (got = next_data_line(&r, &line, &len, &pt->err)) == 1) {
    pt->st = parse_coord_entry(&mp, line, len);
    if (pt->st == GALLEY_OK)
      pt->found++;
  }
  if (pt->st == GALLEY_OK && got < 0)
    pt->st = (galley_status)got;
  pt->lines = r.line - pt->line0;
  rt_reader_close(&r);
}

static void part_task(void *ctx, int k) {
  MtxChunk *c = ctx;
  MtxPart *pt = &c->part[k];
  memset(pt, 0, sizeof *pt);
  pt->s = c->chunks->s[k];
  pt->len = c->chunks->len[k];
  parse_part(c, pt);
}

/* The line of the k-th entry (1-based) of part pt, counting from its
 * true first line (for "more entries than ..."). */
static int64_t part_entry_line(const MtxChunk *c, const MtxPart *pt,
                               int64_t k) {
  rt_reader r;
  galley_error e;
  if (rt_reader_open_mem(&r, c->mp->r->name, pt->s, pt->len, &e) !=
      GALLEY_OK)
    return pt->line0 + 1;
  r.line = pt->line0;
  char *line;
  size_t len;
  while (k > 0 && next_data_line(&r, &line, &len, &e) == 1)
    k--;
  int64_t at = r.line;
  rt_reader_close(&r);
  return at;
}

/* Append the parts of one chunk, in order, to the list; the first error
 * in file order wins. */
static galley_status merge_parts(MtxChunk *c, int nparts) {
  const mtx_parse *mp = c->mp;
  int64_t *line = &c->chunks->line, add = 0;
  galley_status st = GALLEY_OK;
  for (int k = 0; k < nparts && st == GALLEY_OK; k++) {
    MtxPart *pt = &c->part[k];
    pt->line0 = *line;
    if (c->found + pt->found + (pt->st != GALLEY_OK) > mp->info.stored) {
      int64_t at = part_entry_line(c, pt, mp->info.stored - c->found + 1);
      st = rt_data_error(mp->err, mp->r->name, at,
                         "more entries than the %lld on the size line",
                         (long long)mp->info.stored);
    } else if (pt->st != GALLEY_OK) { /* again, for its true lines */
      rt_coo_free(&pt->coo);
      parse_part(c, pt);
      if (mp->err)
        *mp->err = pt->err;
      st = pt->st;
    } else {
      c->found += pt->found;
      *line += pt->lines;
      add += pt->coo.nnz;
    }
  }
  if (st == GALLEY_OK && rt_coo_reserve(mp->coo, add) != 0)
    st = rt_error(mp->err, GALLEY_ENOMEM, "%s: error: out of memory",
                  mp->r->name);
  for (int k = 0; k < nparts; k++) {
    rt_coo *from = &c->part[k].coo, *to = mp->coo;
    if (st == GALLEY_OK) {
      memcpy(to->crd + 2 * to->nnz, from->crd,
             (size_t)from->nnz * 2 * sizeof *to->crd);
      memcpy(to->val + to->nnz, from->val,
             (size_t)from->nnz * sizeof *to->val);
      to->nnz += from->nnz;
    }
    rt_coo_free(from);
  }
  return st;
}

static galley_status merge_task(void *ctx, int nparts) {
  return merge_parts(ctx, nparts);
}

/* The coordinate entries, parsed on par's threads. */
static galley_status parse_entries_par(mtx_parse *mp, const rt_par *par) {
  MtxChunk *c = calloc(1, sizeof *c);
  if (!c)
    return rt_error(mp->err, GALLEY_ENOMEM, "%s: error: out of memory",
                    mp->r->name);
  rt_chunks ch = {.r = mp->r, .par = par, .chunk = mp->chunk,
                  .part_min = mp->part_min, .parse = part_task,
                  .merge = merge_task, .ctx = c, .err = mp->err,
                  .line = mp->r->line};
  c->mp = mp;
  c->chunks = &ch;
  galley_status st = rt_read_chunks(&ch);
  if (st == GALLEY_OK && c->found != mp->info.stored)
    st = rt_data_error(mp->err, mp->r->name, ch.line > 0 ? ch.line : 1,
                       "expected %lld entries, found %lld",
                       (long long)mp->info.stored, (long long)c->found);
  free(c);
  return st;
}

galley_status rt_read_mtx(rt_reader *r, rt_coo *coo, rt_mtx_info *info,
                          galley_error *err) {
  return rt_read_mtx_par(r, coo, info, NULL, err);
}

galley_status rt_read_mtx_par(rt_reader *r, rt_coo *coo, rt_mtx_info *info,
                              const rt_par *par, galley_error *err) {
  return rt_read_mtx_sized(r, coo, info, par, MTX_CHUNK, MTX_PART_MIN, err);
}

galley_status rt_read_mtx_sized(rt_reader *r, rt_coo *coo, rt_mtx_info *info,
                                const rt_par *par, size_t chunk,
                                size_t part_min, galley_error *err) {
  mtx_parse mp;
  memset(&mp, 0, sizeof mp);
  mp.chunk = chunk > 0 ? chunk : 1;
  mp.part_min = part_min > 0 ? part_min : 1;
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
  /* in parts: a coordinate file's entries, when there are threads and
   * the file is large (its size unknown, a gzip file, counts as large) */
  int big = r->size_hint < 0 || r->size_hint >= (int64_t)(2 * mp.part_min);
  if (st == GALLEY_OK && !mp.info.array && par && par->run && big)
    st = parse_entries_par(&mp, par);
  else if (st == GALLEY_OK)
    st = parse_entries(&mp);
  if (info)
    *info = mp.info;
  return st;
}
