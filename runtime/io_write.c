/*
 * io_write.c -- reading a tensor file into a tensor (galley_tensor_read)
 * and writing tensors as .tns or .mtx files.
 *
 * Written files never appear half-written: the text goes to a temporary
 * file next to the destination (same directory, so rename is atomic), which
 * is renamed over the destination only when everything was written and
 * closed without error, and removed otherwise.
 *
 * Values are printed in the fewest significant digits (15, 16 or 17) that
 * read back as the same double through the reader (0.15, not %.17g's
 * 0.14999999999999999; see format_shortest); integral values below 10^15
 * take a faster path.  Infinities and NaNs are spelled inf, -inf and nan,
 * which the reader takes back.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "io_reader.h"

/* ------------------------------------------------------------------ */
/* File kinds                                                          */
/* ------------------------------------------------------------------ */

static int has_suffix(const char *s, size_t n, const char *suffix) {
  size_t m = strlen(suffix);
  return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* The kind a path names by its extension (.gz stripped), or AUTO. */
static galley_file_kind kind_of_path(const char *path) {
  size_t n = strlen(path);
  if (has_suffix(path, n, ".gz"))
    n -= 3;
  if (has_suffix(path, n, ".mtx"))
    return GALLEY_FILE_MTX;
  if (has_suffix(path, n, ".tns"))
    return GALLEY_FILE_TNS;
  return GALLEY_FILE_AUTO;
}

static galley_status resolve_kind(const char *path, galley_file_kind *kind,
                                  galley_error *err) {
  if (*kind == GALLEY_FILE_MTX || *kind == GALLEY_FILE_TNS)
    return GALLEY_OK;
  if (*kind != GALLEY_FILE_AUTO)
    return rt_error(err, GALLEY_EINVAL, "%s: error: invalid file kind %d",
                    path, (int)*kind);
  *kind = kind_of_path(path);
  if (*kind == GALLEY_FILE_AUTO)
    return rt_error(err, GALLEY_EINVAL,
                    "%s: error: unknown tensor file kind (expected a name "
                    "ending in .mtx or .tns, optionally followed by .gz)",
                    path);
  return GALLEY_OK;
}

/* ------------------------------------------------------------------ */
/* Reading                                                             */
/* ------------------------------------------------------------------ */

/* Refuse a format whose dense (or bytemap) levels would need more
 * positions than memory can hold, before the builder tries to allocate
 * them: a small file may declare enormous sizes. */
static galley_status check_storage(const char *path, const rt_coo *coo,
                                   const galley_format *fmt,
                                   galley_error *err) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t limit = RT_MAX_POSITIONS;
  if (pages > 0 && page > 0 && (int64_t)pages < RT_MAX_POSITIONS / page)
    limit = (int64_t)pages * page / (int64_t)sizeof(double);
  int64_t npar = 1;
  for (int l = 0; l < fmt->order; l++) {
    int mode = fmt->mode_order[l];
    if (mode < 0 || mode >= coo->order)
      return GALLEY_OK; /* the builder reports a bad format */
    int64_t prod;
    int over = rt_mul_overflows(npar, coo->dims[mode], &prod);
    if (fmt->kinds[l] == GALLEY_DENSE || fmt->kinds[l] == GALLEY_BYTEMAP) {
      if (over || prod > limit) {
        char f[128];
        galley_format_print(fmt, f, sizeof f);
        return rt_error(err, GALLEY_EOVERFLOW,
                        "%s: error: tensor too large for format %s: level "
                        "%d would hold more positions than fit in memory",
                        path, f, l);
      }
      npar = prod;
    } else {
      npar = (over || prod > coo->nnz) ? coo->nnz : prod;
    }
  }
  return GALLEY_OK;
}

/* Prefix a message from the builder, which knows no file name. */
static void prefix_path(galley_error *err, const char *path) {
  if (!err || strncmp(err->msg, path, strlen(path)) == 0)
    return;
  char old[sizeof err->msg];
  memcpy(old, err->msg, sizeof old);
  rt_error(err, err->status, "%s: error: %s", path, old);
}

galley_status galley_tensor_read(const char *path, galley_file_kind kind,
                                 const galley_format *fmt,
                                 galley_tensor **out, galley_error *err) {
  rt_error_clear(err);
  if (out)
    *out = NULL;
  if (!path || !out)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_tensor_read: path and out must not be NULL");
  galley_status st = resolve_kind(path, &kind, err);
  if (st != GALLEY_OK)
    return st;
  rt_reader r;
  st = rt_reader_open_file(&r, path, err);
  if (st != GALLEY_OK)
    return st;
  rt_coo coo;
  rt_mtx_info info;
  memset(&info, 0, sizeof info);
  /* large files are parsed on threads of the reading's own */
  int threads = rt_read_threads();
  rt_par par = {.run = threads > 1 ? rt_run_on_threads : NULL,
                .pool = &threads};
  if (kind == GALLEY_FILE_MTX)
    st = rt_read_mtx_par(&r, &coo, &info, &par, err);
  else
    st = rt_read_tns_par(&r, &coo, &par, err);
  rt_reader_close(&r);
  galley_format f;
  if (st == GALLEY_OK) {
    if (fmt)
      f = *fmt;
    else
      f = info.array ? galley_format_dense(coo.order)
                     : rt_format_for_entries(coo.order, coo.dims, coo.nnz);
    if (f.order != coo.order)
      st = rt_error(err, GALLEY_EINVAL,
                    "%s: error: the format has order %d but the file holds "
                    "an order-%d tensor",
                    path, f.order, coo.order);
  }
  if (st == GALLEY_OK)
    st = check_storage(path, &coo, &f, err);
  if (st == GALLEY_OK) {
    st = rt_tensor_from_coo(&coo, &f, out, err);
    if (st != GALLEY_OK)
      prefix_path(err, path);
  }
  rt_coo_free(&coo);
  return st;
}

/* ------------------------------------------------------------------ */
/* Output sinks                                                        */
/* ------------------------------------------------------------------ */

#define SINK_BUF (1 << 16)

/* Buffered text output to a FILE or a gzFile. */
typedef struct sink {
  FILE *f;        /* plain output, or NULL */
  gzFile gz;      /* gzip output, or NULL */
  size_t n;       /* bytes pending in buf */
  int failed;     /* a write failed */
  int errnum;     /* errno of the failure (0 when unknown) */
  /* a gzip file written in deflated pieces to f (gz_piece): */
  int pieces;     /* on */
  uLong crc;      /* of the text so far */
  uint64_t isize; /* its length */
  struct gz_piece *tmp; /* the piece of a flush (made on first use) */
  char buf[SINK_BUF]; /* pending bytes */
} sink;

static void sink_flush_piece(sink *s);

static void sink_flush(sink *s) {
  if (s->n == 0 || s->failed)
    return;
  if (s->pieces) {
    sink_flush_piece(s);
  } else if (s->f) {
    if (fwrite(s->buf, 1, s->n, s->f) != s->n) {
      s->failed = 1;
      s->errnum = errno;
    }
  } else if (gzwrite(s->gz, s->buf, (unsigned)s->n) != (int)s->n) {
    int zerr;
    gzerror(s->gz, &zerr);
    s->failed = 1;
    s->errnum = zerr == Z_ERRNO ? errno : 0;
  }
  s->n = 0;
}

static void sink_put(sink *s, const char *p, size_t n) {
  if (s->n + n > SINK_BUF)
    sink_flush(s);
  if (n > SINK_BUF) { /* never happens with the short pieces used here */
    s->failed = 1;
    return;
  }
  memcpy(s->buf + s->n, p, n);
  s->n += n;
}

static void sink_str(sink *s, const char *p) { sink_put(s, p, strlen(p)); }

/* Decimal digits of v into out; returns the length. */
static int format_int(char *out, int64_t v) {
  char tmp[24];
  int n = 0, k = 0;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    out[k++] = '-';
  while (n)
    out[k++] = tmp[--n];
  out[k] = '\0';
  return k;
}

/* ---- the shortest text that reads back ----
 *
 * A double a > 0 is printed as the fewest significant digits n in 15, 16,
 * 17 whose decimal D * 10^p reads back as a (17 always do).  The check
 * is the reader's own exact fast path: a mantissa D <= 2^53 times an
 * exact power of ten (|p| <= 22) is one correctly rounded IEEE operation,
 * the value strtod gives; other candidates go through the reader.
 *
 * Candidates come without printf where that is conclusive: x = a * 10^s
 * is a's mantissa to n digits with one rounding error, and a decimal of
 * n digits that reads back as a lies within 0.5 ulp(a) * 10^s of the
 * exact product: 0.11 for n = 15 (so D is round(x)) and 1.1 for n = 16
 * (D within 2 of round(x)).  Only a needing 17 digits, or out of the
 * range of the exact powers, takes printf's correctly rounded 17 digits
 * (tried again at 15 and 16 when out of range). */

static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,
                                     1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
                                     1e18, 1e19, 1e20, 1e21, 1e22};
static const uint64_t pow10_u64[] = {1ULL,
                                     10ULL,
                                     100ULL,
                                     1000ULL,
                                     10000ULL,
                                     100000ULL,
                                     1000000ULL,
                                     10000000ULL,
                                     100000000ULL,
                                     1000000000ULL,
                                     10000000000ULL,
                                     100000000000ULL,
                                     1000000000000ULL,
                                     10000000000000ULL,
                                     100000000000000ULL,
                                     1000000000000000ULL,
                                     10000000000000000ULL,
                                     100000000000000000ULL};

#define MANTISSA_EXACT ((uint64_t)1 << 53)

/* Whether d * 10^p reads back as a (the reader's rounding). */
static int reads_back(uint64_t d, int p, double a) {
#if FLT_EVAL_METHOD == 0
  if (d <= MANTISSA_EXACT && p >= -22 && p <= 22)
    return (p < 0 ? (double)d / pow10_exact[-p] : (double)d * pow10_exact[p]) ==
           a;
#endif
  char text[48];
  snprintf(text, sizeof text, "%llue%d", (unsigned long long)d, p);
  double back;
  return rt_parse_double(text, text + strlen(text), &back) == RT_NUM_OK &&
         back == a;
}

/* a scaled to n digits before the point (a * 10^(n-1-e), e the decimal
 * exponent of a's first digit), or -1 when the scale is not exact. */
static double scaled(double a, int n, int e) {
  int s = n - 1 - e;
  if (s < -22 || s > 22)
    return -1;
  return s >= 0 ? a * pow10_exact[s] : a / pow10_exact[-s];
}

/* The n-digit decimal (n = 15 or 16) that reads back as a, when the
 * candidates around round(a * 10^s) settle it: 1 with *d, *e set; 0 when
 * none does (then none exists), -1 when undecided (use printf). */
static int short_decimal(double a, int n, int *e, uint64_t *d) {
  double x = scaled(a, n, *e);
  if (x < 0)
    return -1;
  if (x < (double)pow10_u64[n - 1]) { /* log10 was one too high */
    --*e;
    x = scaled(a, n, *e);
  } else if (x >= (double)pow10_u64[n]) { /* one too low */
    ++*e;
    x = scaled(a, n, *e);
  }
  if (x < (double)pow10_u64[n - 1] || x >= (double)pow10_u64[n])
    return -1;
  uint64_t m = (uint64_t)(x + 0.5);
  int reach = n == 15 ? 0 : 2;
  if (m + (uint64_t)reach > MANTISSA_EXACT)
    return -1; /* the fast check cannot settle it */
  static const int order[] = {0, -1, 1, -2, 2}; /* nearest first */
  for (int k = 0; k < 2 * reach + 1; k++) {
    uint64_t c = m + (uint64_t)(int64_t)order[k];
    if (c >= pow10_u64[n - 1] && c < pow10_u64[n] &&
        reads_back(c, *e - (n - 1), a)) {
      *d = c;
      return 1;
    }
  }
  return 0;
}

/* printf's correctly rounded 17 digits of a > 0: the mantissa and the
 * exponent of its first digit. */
static uint64_t digits17(double a, int *e) {
  char t[40];
  snprintf(t, sizeof t, "%.16e", a); /* d.dddddddddddddddde[+-]XX */
  uint64_t m = (uint64_t)(t[0] - '0');
  for (int k = 2; k < 18; k++)
    m = m * 10 + (uint64_t)(t[k] - '0');
  *e = atoi(t + 19);
  return m;
}

/* The n-digit decimal (n = 15 or 16) next to the 17 digits m17 (exponent
 * e17) that reads back as a: the 17 digits cut to n, and one more (the
 * 17 digits are rounded already, so rounding them again might pick the
 * wrong neighbour: try both, nearest first).  1 with *d, *e set. */
static int near_decimal(double a, uint64_t m17, int e17, int n, uint64_t *d,
                        int *e) {
  uint64_t unit = pow10_u64[17 - n], lo = m17 / unit;
  int up_first = m17 % unit >= unit / 2;
  for (int k = 0; k < 2; k++) {
    uint64_t c = lo + (uint64_t)(k ^ up_first);
    int ce = e17;
    if (c == pow10_u64[n]) { /* 9.99... carried to 10.0... */
      c /= 10;
      ce++;
    }
    if (reads_back(c, ce - (n - 1), a)) {
      *d = c;
      *e = ce;
      return 1;
    }
  }
  return 0;
}

/* The n digits of d (exponent e of the first) laid out as printf's %.17g
 * would: trailing zeros dropped, plain notation for exponents -4..16,
 * else d.ddde+XX. */
static int emit_decimal(char *out, int neg, uint64_t d, int n, int e) {
  char r[20];
  for (int k = n - 1; k >= 0; k--) {
    r[k] = (char)('0' + d % 10);
    d /= 10;
  }
  while (n > 1 && r[n - 1] == '0')
    n--;
  char *p = out;
  if (neg)
    *p++ = '-';
  if (e < -4 || e >= 17) {
    *p++ = r[0];
    if (n > 1) {
      *p++ = '.';
      memcpy(p, r + 1, (size_t)n - 1);
      p += n - 1;
    }
    p += sprintf(p, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
  } else if (e < 0) {
    *p++ = '0';
    *p++ = '.';
    for (int k = 0; k < -e - 1; k++)
      *p++ = '0';
    memcpy(p, r, (size_t)n);
    p += n;
  } else {
    for (int k = 0; k <= e; k++)
      *p++ = k < n ? r[k] : '0';
    if (n > e + 1) {
      *p++ = '.';
      memcpy(p, r + e + 1, (size_t)(n - e - 1));
      p += n - e - 1;
    }
  }
  *p = '\0';
  return (int)(p - out);
}

/* a > 0 finite, in the fewest of 15, 16, 17 digits that read back. */
static int format_shortest(char *out, int neg, double a) {
  int e0 = (int)floor(log10(a));
  int undecided = 0;
  for (int n = 15; n <= 16; n++) {
    int e = e0;
    uint64_t d;
    int r = short_decimal(a, n, &e, &d);
    if (r == 1)
      return emit_decimal(out, neg, d, n, e);
    undecided |= r < 0;
  }
  int e17;
  uint64_t m17 = digits17(a, &e17);
  for (int n = 15; undecided && n <= 16; n++) {
    int e;
    uint64_t d;
    if (near_decimal(a, m17, e17, n, &d, &e))
      return emit_decimal(out, neg, d, n, e);
  }
  return emit_decimal(out, neg, m17, 17, e17);
}

/* v as the reader takes it back exactly, in the fewest digits that do so
 * (0.15, not 0.14999999999999999); inf, -inf and nan by name; integers
 * below 10^15 by a faster path. */
static int format_double(char *out, double v) {
  if (isnan(v))
    return (int)(strcpy(out, "nan"), 3);
  if (isinf(v))
    return v > 0 ? (int)(strcpy(out, "inf"), 3) : (int)(strcpy(out, "-inf"), 4);
  if (v == floor(v) && fabs(v) < 1e15) {
    if (v == 0 && signbit(v))
      return (int)(strcpy(out, "-0"), 2);
    return format_int(out, (int64_t)v);
  }
  return format_shortest(out, v < 0, fabs(v));
}

static void sink_int(sink *s, int64_t v) {
  char b[24];
  int n = format_int(b, v);
  sink_put(s, b, (size_t)n);
}

static void sink_double(sink *s, double v) {
  char b[40];
  int n = format_double(b, v);
  sink_put(s, b, (size_t)n);
}

/* ------------------------------------------------------------------ */
/* Writing entries                                                     */
/* ------------------------------------------------------------------ */

static int is_fill(double v, double fill) {
  return v == fill || (isnan(v) && isnan(fill));
}

/* What the entry callbacks need. */
typedef struct write_ctx {
  sink *out;     /* where the text goes */
  int order;     /* tensor order */
  double fill;   /* entries equal to it are left out */
  int64_t count; /* entries written or counted */
} write_ctx;

static int write_entry(void *ud, const int64_t *coord, double v) {
  write_ctx *w = ud;
  if (is_fill(v, w->fill))
    return 0;
  for (int k = 0; k < w->order; k++) {
    sink_int(w->out, coord[k] + 1);
    sink_put(w->out, " ", 1);
  }
  sink_double(w->out, v);
  sink_put(w->out, "\n", 1);
  w->count++;
  return w->out->failed; /* stop early once writing fails */
}

static int count_entry(void *ud, const int64_t *coord, double v) {
  write_ctx *w = ud;
  (void)coord;
  if (!is_fill(v, w->fill))
    w->count++;
  return 0;
}

/* Call fn for every stored entry in logical lexicographic order, so that
 * the text of a tensor does not depend on its storage format: storage
 * order when that is the logical order, else a sorted export (if that
 * export runs out of memory, storage order: the same entries). */
static void foreach_logical(const galley_tensor *t, galley_entry_fn fn,
                            void *ud) {
  galley_format f;
  galley_tensor_format(t, &f);
  int identity = 1;
  for (int l = 0; l < f.order; l++)
    identity &= f.mode_order[l] == l;
  int64_t n = 0, *crd = NULL;
  double *val = NULL;
  if (identity || galley_tensor_to_coo(t, GALLEY_EXPORT_SKIP_FILL, &n, &crd,
                                       &val, NULL) != GALLEY_OK) {
    galley_tensor_foreach(t, fn, ud);
    return;
  }
  for (int64_t e = 0; e < n; e++)
    if (fn(ud, crd + e * f.order, val[e]))
      break;
  free(crd);
  free(val);
}

/* The .tns text: '# dims:' and '# fill:' headers, then the entries (a
 * scalar: its value line). */
static void emit_header_tns(const galley_tensor *t, sink *s) {
  int order = galley_tensor_order(t);
  double fill = galley_tensor_fill(t);
  sink_str(s, "# dims:");
  for (int k = 0; k < order; k++) {
    sink_put(s, " ", 1);
    sink_int(s, galley_tensor_dim(t, k));
  }
  sink_str(s, "\n# fill: ");
  sink_double(s, fill);
  sink_put(s, "\n", 1);
}

static void emit_tns(const galley_tensor *t, sink *s) {
  int order = galley_tensor_order(t);
  double fill = galley_tensor_fill(t);
  emit_header_tns(t, s);
  if (order == 0) {
    int64_t none[1] = {0};
    sink_double(s, galley_tensor_get(t, none, NULL));
    sink_put(s, "\n", 1);
    return;
  }
  write_ctx w = {s, order, fill, 0};
  foreach_logical(t, write_entry, &w);
}

/* The banner and size line of a .mtx file of `count` entries. */
static void emit_header_mtx(const galley_tensor *t, sink *s, int64_t count) {
  sink_str(s, "%%MatrixMarket matrix coordinate real general\n");
  sink_int(s, galley_tensor_dim(t, 0));
  sink_put(s, " ", 1);
  sink_int(s, galley_tensor_dim(t, 1));
  sink_put(s, " ", 1);
  sink_int(s, count);
  sink_put(s, "\n", 1);
}

/* The values of val[0 .. n) that are not the fill. */
static int64_t count_stored(const double *val, int64_t n, double fill) {
  int64_t c = 0;
  for (int64_t e = 0; e < n; e++)
    c += !is_fill(val[e], fill);
  return c;
}

/* The .mtx text: coordinate real general (order 2, fill 0 checked). */
static void emit_mtx(const galley_tensor *t, sink *s) {
  write_ctx w = {s, 2, 0.0, 0};
  galley_tensor_foreach(t, count_entry, &w); /* order does not matter */
  emit_header_mtx(t, s, w.count);
  w.count = 0;
  foreach_logical(t, write_entry, &w);
}

/* ------------------------------------------------------------------ */
/* Formatting on threads                                               */
/* ------------------------------------------------------------------ */

/* Entries formatted by one part, and parts per round: a round's text
 * (at most WRITE_PARTS * WRITE_CHUNK lines) is written before the next
 * round is formatted, so the memory stays bounded. */
#define WRITE_CHUNK ((int64_t)1 << 13)
#define WRITE_PARTS 32

/* The longest line of an order-`order` entry: a coordinate is at most
 * 20 digits and a space, a value at most 40 characters and a newline. */
static size_t max_line(int order) { return (size_t)order * 21 + 41; }

/* A gzip file of a large tensor is one gzip member whose deflate stream
 * is made in pieces on the threads (as pigz does): every piece of text
 * is deflated on its own (zlib, raw deflate at level 1) and ended with a
 * sync flush, which leaves the stream byte-aligned with no final block;
 * the pieces are written in order, then an empty final block, and the
 * trailer's CRC-32 is combined from the pieces' (crc32_combine).  The
 * pieces are the formatting parts, so the bytes never depend on the
 * thread count. */
typedef struct gz_piece {
  unsigned char *z; /* deflated bytes */
  size_t zlen, zcap;
  uLong crc;        /* of the piece's text */
  int failed;       /* out of memory in zlib */
} gz_piece;

/* Deflate len bytes of text into g (raw, sync-flushed; finish: the
 * final empty block instead). */
static void gz_deflate(gz_piece *g, const char *text, size_t len,
                       int finish) {
  z_stream z;
  memset(&z, 0, sizeof z);
  g->zlen = 0;
  g->failed = 1;
  g->crc = crc32(0L, (const Bytef *)text, (uInt)len);
  if (deflateInit2(&z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return;
  size_t need = deflateBound(&z, (uLong)len) + 16;
  if (g->zcap < need) {
    unsigned char *nz = realloc(g->z, need);
    if (!nz) {
      deflateEnd(&z);
      return;
    }
    g->z = nz;
    g->zcap = need;
  }
  z.next_in = (Bytef *)text;
  z.avail_in = (uInt)len;
  z.next_out = g->z;
  z.avail_out = (uInt)g->zcap;
  int rc = deflate(&z, finish ? Z_FINISH : Z_SYNC_FLUSH);
  g->failed = finish ? rc != Z_STREAM_END : rc != Z_OK || z.avail_in != 0;
  g->zlen = g->zcap - z.avail_out;
  deflateEnd(&z);
}

/* Write piece g (of len bytes of text) to a pieces sink. */
static void sink_put_piece(sink *s, const gz_piece *g, size_t len) {
  if (s->failed)
    return;
  if (g->failed) {
    s->failed = 1;
    s->errnum = ENOMEM;
    return;
  }
  if (fwrite(g->z, 1, g->zlen, s->f) != g->zlen) {
    s->failed = 1;
    s->errnum = errno;
    return;
  }
  s->crc = crc32_combine(s->crc, g->crc, (z_off_t)len);
  s->isize += len;
}

static void sink_flush_piece(sink *s) {
  if (!s->tmp && !(s->tmp = calloc(1, sizeof *s->tmp))) {
    s->failed = 1;
    s->errnum = ENOMEM;
    return;
  }
  gz_deflate(s->tmp, s->buf, s->n, 0);
  sink_put_piece(s, s->tmp, s->n);
  s->n = 0;
}

/* A pieces sink starts with the gzip header (no name, no time: the
 * bytes depend on the text alone). */
static void pieces_begin(sink *s) {
  static const unsigned char head[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  s->pieces = 1;
  s->crc = crc32(0L, Z_NULL, 0);
  s->isize = 0;
  if (fwrite(head, 1, sizeof head, s->f) != sizeof head) {
    s->failed = 1;
    s->errnum = errno;
  }
}

/* ... and ends with the final empty block and the trailer: CRC-32 and
 * length mod 2^32, little-endian. */
static void pieces_end(sink *s) {
  sink_flush(s);
  if (s->failed)
    return;
  gz_piece g = {0};
  gz_deflate(&g, "", 0, 1);
  sink_put_piece(s, &g, 0);
  free(g.z);
  unsigned char tail[8];
  for (int k = 0; k < 4; k++) {
    tail[k] = (unsigned char)(s->crc >> (8 * k));
    tail[4 + k] = (unsigned char)(s->isize >> (8 * k));
  }
  if (!s->failed && fwrite(tail, 1, sizeof tail, s->f) != sizeof tail) {
    s->failed = 1;
    s->errnum = errno;
  }
}

/* One round: part p formats entries [first + p CHUNK, ...) below n
 * (and deflates its text when gz). */
typedef struct write_par {
  const int64_t *crd;
  const double *val;
  int order;
  double fill;
  int64_t first, n;
  char *buf[WRITE_PARTS];
  size_t len[WRITE_PARTS];
  int gz;                  /* deflate each part (gz_piece) */
  gz_piece piece[WRITE_PARTS];
} write_par;

static void format_part(void *ctx, int64_t p, int worker) {
  (void)worker;
  write_par *w = ctx;
  int64_t lo = w->first + p * WRITE_CHUNK, hi = lo + WRITE_CHUNK;
  if (hi > w->n)
    hi = w->n;
  char *out = w->buf[p];
  for (int64_t e = lo; e < hi; e++) {
    if (is_fill(w->val[e], w->fill))
      continue;
    for (int k = 0; k < w->order; k++) {
      out += format_int(out, w->crd[e * w->order + k] + 1);
      *out++ = ' ';
    }
    out += format_double(out, w->val[e]);
    *out++ = '\n';
  }
  w->len[p] = (size_t)(out - w->buf[p]);
  if (w->gz)
    gz_deflate(&w->piece[p], w->buf[p], w->len[p], 0);
}

/* Whether storage order is t's logical order (what foreach_logical
 * walks), so that a sorted export lists the same entries in the same
 * order: the identity mode order over dense and list levels. */
static int stores_sorted(const galley_tensor *t) {
  galley_format f;
  galley_tensor_format(t, &f);
  for (int l = 0; l < f.order; l++)
    if (f.mode_order[l] != l ||
        (f.kinds[l] != GALLEY_DENSE && f.kinds[l] != GALLEY_LIST))
      return 0;
  return 1;
}

/* The entries of the .tns text formatted on par's threads, in rounds,
 * written in order: the same text as write_entry's.  0, or -1 when out
 * of memory before anything was written (the caller writes serially). */
static int emit_entries_par(const galley_tensor *t, sink *s,
                            const rt_par *par, int mtx) {
  int order = galley_tensor_order(t);
  int sorted = stores_sorted(t);
  galley_format f;
  galley_tensor_format(t, &f);
  int identity = 1;
  for (int l = 0; l < f.order; l++)
    identity &= f.mode_order[l] == l;
  if (identity && !sorted)
    return -1; /* foreach's order (a hashed level's) is not the export's */
  write_par w = {.order = order, .fill = galley_tensor_fill(t),
                 .gz = s->pieces};
  int64_t n = 0, *crd = NULL;
  double *val = NULL;
  if (galley_tensor_to_coo(t, identity ? 0 : GALLEY_EXPORT_SKIP_FILL, &n,
                           &crd, &val, NULL) != GALLEY_OK)
    return -1;
  size_t room = (size_t)WRITE_CHUNK * max_line(order);
  int ok = 1;
  for (int p = 0; p < WRITE_PARTS && ok; p++)
    ok = (w.buf[p] = malloc(room)) != NULL;
  if (ok) {
    w.crd = crd;
    w.val = val;
    w.n = n;
    if (mtx)
      emit_header_mtx(t, s, count_stored(val, n, w.fill));
    sink_flush(s); /* the headers first */
    for (w.first = 0; w.first < n && !s->failed;
         w.first += WRITE_PARTS * WRITE_CHUNK) {
      int64_t left = n - w.first;
      int64_t parts = (left + WRITE_CHUNK - 1) / WRITE_CHUNK;
      rt_par_run(par, parts < WRITE_PARTS ? parts : WRITE_PARTS, format_part,
                 &w);
      for (int64_t p = 0; p < parts && p < WRITE_PARTS && !s->failed; p++) {
        /* straight from the part's text (as sink_flush writes) */
        if (s->pieces)
          sink_put_piece(s, &w.piece[p], w.len[p]);
        else if (s->f ? fwrite(w.buf[p], 1, w.len[p], s->f) != w.len[p]
                 : gzwrite(s->gz, w.buf[p], (unsigned)w.len[p]) !=
                       (int)w.len[p]) {
          s->failed = 1;
          s->errnum = errno;
        }
      }
    }
  }
  for (int p = 0; p < WRITE_PARTS; p++) {
    free(w.buf[p]);
    free(w.piece[p].z);
  }
  free(crd);
  free(val);
  return ok ? 0 : -1;
}

/* emit_tns, the entries of a large tensor formatted on par's threads. */
static void emit_tns_par(const galley_tensor *t, sink *s, const rt_par *par) {
  /* (a pieces sink's pieces are the parts', whether or not there are
   * threads) */
  if ((!s->pieces && (!par || !par->run)) || galley_tensor_order(t) == 0 ||
      galley_tensor_stored(t) < RT_PAR_MIN) {
    emit_tns(t, s);
    return;
  }
  emit_header_tns(t, s);
  if (emit_entries_par(t, s, par, 0) != 0) {
    write_ctx w = {s, galley_tensor_order(t), galley_tensor_fill(t), 0};
    foreach_logical(t, write_entry, &w);
  }
}

/* emit_mtx, the entries of a large matrix formatted on par's threads. */
static void emit_mtx_par(const galley_tensor *t, sink *s, const rt_par *par) {
  if (galley_tensor_stored(t) < RT_PAR_MIN ||
      emit_entries_par(t, s, par, 1) != 0)
    emit_mtx(t, s);
}

galley_status rt_write_tns_stream_par(const galley_tensor *t, FILE *f,
                                      const rt_par *par, galley_error *err) {
  rt_error_clear(err);
  if (!t || !f)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_tensor_write_tns_stream: tensor and stream "
                    "must not be NULL");
  sink *s = malloc(sizeof *s);
  if (!s)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  memset(s, 0, offsetof(sink, buf));
  s->f = f;
  emit_tns_par(t, s, par);
  sink_flush(s);
  if (!s->failed && fflush(f) != 0) {
    s->failed = 1;
    s->errnum = errno;
  }
  galley_status st = GALLEY_OK;
  if (s->failed)
    st = rt_error(err, GALLEY_EIO, "error: write failed: %s",
                  s->errnum ? strerror(s->errnum) : "unknown error");
  free(s);
  return st;
}

galley_status galley_tensor_write_tns_stream(const galley_tensor *t, FILE *f,
                                             galley_error *err) {
  return rt_write_tns_stream_par(t, f, NULL, err);
}

/* Create a new temporary file next to path; returns its descriptor (name
 * in tmp) or -1 with errno set. */
static int create_temp(const char *path, char *tmp, size_t size) {
  uint64_t x = (uint64_t)getpid() * 0x9E3779B97F4A7C15ULL ^
               (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)tmp;
  for (int attempt = 0; attempt < 100; attempt++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    int n = snprintf(tmp, size, "%s.tmp%06x", path,
                     (unsigned)(x >> 40) & 0xffffff);
    if (n < 0 || (size_t)n >= size) {
      errno = ENAMETOOLONG;
      return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
  return -1;
}

/* Write the text of t to the new file fd (gzip-compressed when gz) and
 * close it; failures are recorded in s. */
static void write_fd(const galley_tensor *t, galley_file_kind kind, int fd,
                     int gz, const rt_par *par, sink *s) {
  /* a large tensor's gzip text is deflated in pieces on the threads
   * (gz_piece), chosen by its size alone so that the bytes are the same
   * for every thread count */
  int pieces = gz && galley_tensor_order(t) > 0 &&
               galley_tensor_stored(t) >= RT_PAR_MIN;
  if (gz && !pieces) /* level 1: about five times faster than zlib's
                      * default 6 on tensor text, for files about 7%
                      * larger */
    s->gz = gzdopen(fd, "wb1");
  else
    s->f = fdopen(fd, "wb");
  if (!s->f && !s->gz) {
    s->failed = 1;
    s->errnum = errno;
    close(fd);
    return;
  }
  if (pieces)
    pieces_begin(s);
  if (kind == GALLEY_FILE_MTX)
    emit_mtx_par(t, s, par);
  else
    emit_tns_par(t, s, par);
  sink_flush(s);
  if (pieces)
    pieces_end(s);
  if (s->tmp)
    free(s->tmp->z);
  free(s->tmp);
  s->tmp = NULL;
  if (s->f && fclose(s->f) != 0 && !s->failed) {
    s->failed = 1;
    s->errnum = errno;
  }
  if (s->gz) {
    int zr = gzclose(s->gz);
    if (zr != Z_OK && !s->failed) {
      s->failed = 1;
      s->errnum = zr == Z_ERRNO ? errno : 0;
    }
  }
}

/* The refusals of .mtx: order 2 and fill 0 only. */
static galley_status check_mtx(const galley_tensor *t, const char *path,
                               galley_error *err) {
  int order = galley_tensor_order(t);
  if (order != 2)
    return rt_error(err, GALLEY_EINVAL,
                    "%s: error: a Matrix Market file holds a matrix "
                    "(order 2), not an order-%d tensor; write .tns instead",
                    path, order);
  if (galley_tensor_fill(t) != 0.0)
    return rt_error(err, GALLEY_EINVAL,
                    "%s: error: a Matrix Market file needs fill 0, not "
                    "%.17g; write .tns instead",
                    path, galley_tensor_fill(t));
  return GALLEY_OK;
}

galley_status galley_tensor_write(const galley_tensor *t, const char *path,
                                  galley_file_kind kind, galley_error *err) {
  /* large tensors are formatted (and deflated) on threads of the
   * writing's own */
  int threads = rt_read_threads();
  rt_par par = {.run = threads > 1 ? rt_run_on_threads : NULL,
                .pool = &threads};
  return rt_tensor_write_par(t, path, kind, &par, err);
}

galley_status rt_tensor_write_par(const galley_tensor *t, const char *path,
                                  galley_file_kind kind, const rt_par *par,
                                  galley_error *err) {
  rt_error_clear(err);
  if (!t || !path)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_tensor_write: tensor and path must not be NULL");
  galley_status st = resolve_kind(path, &kind, err);
  if (st == GALLEY_OK && kind == GALLEY_FILE_MTX)
    st = check_mtx(t, path, err);
  if (st != GALLEY_OK)
    return st;
  size_t tsize = strlen(path) + 32;
  char *tmp = malloc(tsize);
  sink *s = malloc(sizeof *s);
  if (!tmp || !s) {
    free(tmp);
    free(s);
    return rt_error(err, GALLEY_ENOMEM, "%s: error: out of memory", path);
  }
  memset(s, 0, offsetof(sink, buf));
  int fd = create_temp(path, tmp, tsize);
  if (fd < 0) {
    s->failed = 1;
    s->errnum = errno;
  } else {
    write_fd(t, kind, fd, has_suffix(path, strlen(path), ".gz"), par, s);
    if (!s->failed && rename(tmp, path) != 0) {
      s->failed = 1;
      s->errnum = errno;
    }
    if (s->failed)
      unlink(tmp);
  }
  if (s->failed)
    st = rt_error(err, GALLEY_EIO, "%s: error: cannot write: %s", path,
                  s->errnum ? strerror(s->errnum) : "write failed");
  free(tmp);
  free(s);
  return st;
}
