/*
 * read.c -- a tensor file read in byte ranges by every rank (read.h says
 * the contract and the fallbacks).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io_reader.h"
#include "read.h"
#include "relation.h"
#include "rt_internal.h"

static galley_status nomem(galley_error *err) {
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
}

/* ---- the old path: rank 0 reads, every rank receives ---- */

static galley_status read_whole(DistComm *c, const char *path,
                                galley_tensor **out, DistReadInfo *info,
                                galley_error *err) {
  galley_tensor *t = NULL;
  galley_status st = GALLEY_OK;
  if (c->rank == 0)
    st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, err);
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK)
    return st;
  DistBlob b = {0};
  if (c->rank == 0)
    st = dist_pack(t, -1, 0, 0, 0, 0, &b, err);
  st = dist_agree(c, st, err);
  int64_t before = c->bytes_sent;
  if (st == GALLEY_OK)
    st = dist_bcast_blob(c, &b.data, &b.len, 0, err);
  info->sent += c->bytes_sent - before;
  if (st == GALLEY_OK && c->rank != 0) {
    const void *data = b.data;
    st = dist_unpack(1, &data, &b.len, -1, 0, NULL, NULL, NULL, 0, &t, err);
  }
  free(b.data);
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK)
    t = galley_tensor_free(t);
  *out = t;
  return st;
}

/* ---- rank 0 looks at the file ---- */

enum { MODE_WHOLE = 0, MODE_PLAIN = 1, MODE_GZ = 2 };

/* What rank 0 tells every rank before the ranges are read. */
typedef struct ReadPlan {
  int64_t mode;      /* MODE_* */
  int64_t mtx;       /* 1: Matrix Market, 0: .tns */
  int64_t size;      /* bytes of text */
  int64_t head;      /* bytes of the header (the data start there) */
  int64_t size_line; /* .mtx: where the size line starts */
  int64_t rows, cols, stored; /* .mtx: the size line */
} ReadPlan;

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Whether [p, end) is blank or a comment of the given kind. */
static int skip_line(const char *p, const char *end, int mtx) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
    p++;
  return p == end || *p == (mtx ? '%' : '#');
}

/* Find the header's end in the len bytes at buf: 1 with the plan's
 * head (and the .mtx size line) set, 0 when the buffer ends first, -1
 * when the file is not one to split (an `array` .mtx). */
static int find_header(const char *buf, int64_t len, ReadPlan *rp) {
  int64_t at = 0, lines = 0;
  while (at < len) {
    const char *nl = memchr(buf + at, '\n', (size_t)(len - at));
    if (!nl)
      return 0;
    int64_t end = nl - buf;
    const char *p = buf + at, *e = buf + end;
    if (rp->mtx && lines == 0) { /* the banner */
      char ban[256];
      size_t n = (size_t)(e - p) < sizeof ban - 1 ? (size_t)(e - p)
                                                 : sizeof ban - 1;
      memcpy(ban, p, n);
      ban[n] = '\0';
      for (size_t k = 0; k < n; k++)
        ban[k] = (char)(ban[k] >= 'A' && ban[k] <= 'Z' ? ban[k] + 32
                                                       : ban[k]);
      if (!strstr(ban, "coordinate"))
        return -1;
    } else if (!skip_line(p, e, rp->mtx)) {
      if (!rp->mtx) { /* the first entry line starts the data */
        rp->head = at;
        return 1;
      }
      long long r = 0, cl = 0, s = 0;
      char tmp[256];
      size_t n = (size_t)(e - p) < sizeof tmp - 1 ? (size_t)(e - p)
                                                 : sizeof tmp - 1;
      memcpy(tmp, p, n);
      tmp[n] = '\0';
      if (sscanf(tmp, "%lld %lld %lld", &r, &cl, &s) != 3)
        return -1; /* the one-process reader says what is wrong */
      rp->size_line = at;
      rp->rows = r, rp->cols = cl, rp->stored = s;
      rp->head = end + 1;
      return 1;
    }
    at = end + 1;
    lines++;
  }
  return 0;
}

/* The whole decompressed text of a gzip file (rank 0). */
static char *gz_slurp(const char *path, int64_t *len) {
  gzFile gz = gzopen(path, "rb");
  if (!gz)
    return NULL;
  int64_t cap = 1 << 20, n = 0;
  char *buf = malloc((size_t)cap);
  int got = 0;
  while (buf && (got = gzread(gz, buf + n, (unsigned)(cap - n))) > 0) {
    n += got;
    if (n == cap) {
      char *b = realloc(buf, (size_t)(cap *= 2));
      if (!b)
        free(buf);
      buf = b;
    }
  }
  gzclose(gz);
  if (got < 0) {
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}

/* At least the decompressed size of a gzip file: its trailer's ISIZE
 * (the size modulo 2^32) or its compressed size, whichever is larger
 * (-1 when unreadable). */
static int64_t gz_size_hint(const char *path) {
  FILE *f = fopen(path, "rb");
  unsigned char t[4];
  int64_t n = -1;
  if (f && fseek(f, -4, SEEK_END) == 0 && fread(t, 1, 4, f) == 4) {
    long end = ftell(f);
    n = (int64_t)t[0] | (int64_t)t[1] << 8 | (int64_t)t[2] << 16 |
        (int64_t)t[3] << 24;
    if (end > n)
      n = end;
  }
  if (f)
    fclose(f);
  return n;
}

/* Rank 0: the plan, and (gzip) the text, or (plain) the header bytes. */
static void plan_read(const char *path, int64_t split_min, ReadPlan *rp,
                      char **text, char **header) {
  memset(rp, 0, sizeof *rp);
  *text = *header = NULL;
  int gz = ends_with(path, ".gz");
  char base[4096];
  snprintf(base, sizeof base, "%s", path);
  if (gz)
    base[strlen(base) - 3] = '\0';
  rp->mtx = ends_with(base, ".mtx");
  if (!rp->mtx && !ends_with(base, ".tns"))
    return;
  int64_t len = 0;
  char *buf = NULL;
  if (gz) {
    if (gz_size_hint(path) < split_min || !(buf = gz_slurp(path, &len)))
      return; /* small: rank 0 reads it whole, decompressing it once */
  } else {
    struct stat sb;
    FILE *f = fopen(path, "rb");
    if (!f || fstat(fileno(f), &sb) != 0 || sb.st_size < split_min) {
      if (f)
        fclose(f);
      return;
    }
    len = sb.st_size;
    /* the header is small: read a growing prefix until it ends */
    int64_t want = 1 << 16;
    for (;;) {
      int64_t n = want < len ? want : len;
      char *b = realloc(buf, (size_t)n + 1);
      if (!b)
        break;
      buf = b;
      if (fseek(f, 0, SEEK_SET) != 0 ||
          fread(buf, 1, (size_t)n, f) != (size_t)n)
        break;
      int found = find_header(buf, n, rp);
      if (found != 0 || n == len) {
        rp->mode = found == 1 ? MODE_PLAIN : MODE_WHOLE;
        break;
      }
      want *= 4;
    }
    fclose(f);
    rp->size = len;
    if (rp->mode == MODE_PLAIN) {
      *header = buf;
      return;
    }
    free(buf);
    rp->mode = MODE_WHOLE;
    return;
  }
  rp->size = len;
  if (len >= split_min && find_header(buf, len, rp) == 1) {
    rp->mode = MODE_GZ;
    *text = buf;
    return;
  }
  free(buf);
}

/* ---- the ranges ---- */

/* The first line start at or after x in [head, size): a line starts at
 * x when the byte before it is a newline.  at(k) reads byte k. */
typedef int (*byte_at_fn)(void *ctx, int64_t at, char *out);

static int64_t line_start(byte_at_fn at, void *ctx, int64_t x, int64_t head,
                          int64_t size) {
  if (x <= head)
    return head;
  char ch;
  for (int64_t p = x - 1; p < size; p++) {
    if (!at(ctx, p, &ch))
      return -1;
    if (ch == '\n')
      return p + 1;
  }
  return size;
}

/* pread one byte, buffered in blocks. */
typedef struct FileBytes {
  int fd;
  int64_t base, n;
  char buf[1 << 14];
} FileBytes;

static int file_byte(void *ctx, int64_t at, char *out) {
  FileBytes *fb = ctx;
  if (at < fb->base || at >= fb->base + fb->n) {
    ssize_t got = pread(fb->fd, fb->buf, sizeof fb->buf, (off_t)at);
    if (got <= 0)
      return 0;
    fb->base = at;
    fb->n = got;
  }
  *out = fb->buf[at - fb->base];
  return 1;
}

static int mem_byte(void *ctx, int64_t at, char *out) {
  *out = ((const char *)ctx)[at];
  return 1;
}

/* Range k of P: [start, end) of the data, each at a line start. */
static int range_of(byte_at_fn at, void *ctx, const ReadPlan *rp, int k,
                    int P, int64_t *start, int64_t *end) {
  int64_t data = rp->size - rp->head;
  int64_t a = rp->head + (int64_t)((double)data * k / P);
  int64_t b = k + 1 == P ? rp->size
                         : rp->head + (int64_t)((double)data * (k + 1) / P);
  *start = line_start(at, ctx, a, rp->head, rp->size);
  *end = k + 1 == P ? rp->size : line_start(at, ctx, b, rp->head, rp->size);
  return *start >= 0 && *end >= *start;
}

/* This rank's range of a plain file, read with pread. */
static galley_status read_range(const char *path, const ReadPlan *rp,
                                int rank, int P, char **chunk, int64_t *len,
                                galley_error *err) {
  FileBytes *fb = malloc(sizeof *fb);
  if (!fb)
    return nomem(err);
  fb->fd = open(path, O_RDONLY);
  fb->base = fb->n = 0;
  int64_t s = 0, e = 0;
  galley_status st = GALLEY_OK;
  if (fb->fd < 0 || !range_of(file_byte, fb, rp, rank, P, &s, &e))
    st = rt_error(err, GALLEY_EIO, "%s: error: cannot read its range on "
                  "rank %d", path, rank);
  char *buf = st == GALLEY_OK ? malloc((size_t)(e - s) + 1) : NULL;
  if (st == GALLEY_OK && !buf)
    st = nomem(err);
  for (int64_t got = 0; st == GALLEY_OK && got < e - s;) {
    ssize_t n = pread(fb->fd, buf + got, (size_t)(e - s - got),
                      (off_t)(s + got));
    if (n <= 0)
      st = rt_error(err, GALLEY_EIO, "%s: error: read failed on rank %d",
                    path, rank);
    got += n > 0 ? n : 0;
  }
  if (fb->fd >= 0)
    close(fb->fd);
  free(fb);
  if (st != GALLEY_OK) {
    free(buf);
    return st;
  }
  *chunk = buf;
  *len = e - s;
  return GALLEY_OK;
}

/* Rank 0 of a gzip file: every rank's range of text, scattered. */
static galley_status scatter_ranges(DistComm *c, const ReadPlan *rp,
                                    const char *text, char **chunk,
                                    int64_t *len, galley_error *err) {
  int P = c->size;
  int64_t *v = calloc(4 * (size_t)P, sizeof *v);
  galley_status st = v ? GALLEY_OK : nomem(err);
  for (int k = 0; st == GALLEY_OK && c->rank == 0 && k < P; k++) {
    int64_t s, e;
    range_of(mem_byte, (void *)text, rp, k, P, &s, &e);
    v[k] = e - s;      /* counts */
    v[P + k] = s;      /* displacements into the text */
  }
  st = dist_agree(c, st, err);
  void *recv = NULL;
  if (st == GALLEY_OK)
    st = dist_alltoallv(c, text, v, v + P, &recv, v + 2 * P, v + 3 * P,
                        err);
  if (st == GALLEY_OK) {
    *chunk = recv;
    *len = v[2 * P]; /* all of it from rank 0 */
  }
  free(v);
  return st;
}

/* ---- parsing a range ---- */

/* Whether the line [p, e) of a .tns is a '# dims:' or '# fill:' header:
 * one in the data is the one-process reader's to refuse. */
static int tns_header_line(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\t'))
    p++;
  if (p == e || *p != '#')
    return 0;
  for (p++; p < e && (*p == ' ' || *p == '\t'); p++)
    ;
  return (e - p >= 5 && (memcmp(p, "dims:", 5) == 0 ||
                         memcmp(p, "fill:", 5) == 0));
}

/* The entry lines of [p, p + len); -1 when a .tns range holds a header
 * line (which only the whole file's reader may judge). */
static int64_t data_lines(const char *p, int64_t len, int mtx) {
  int64_t n = 0;
  const char *end = p + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *e = nl ? nl : end;
    if (!mtx && tns_header_line(p, e))
      return -1;
    n += !skip_line(p, e, mtx);
    p = nl ? nl + 1 : end;
  }
  return n;
}

/* What a rank's range held, sent ahead of its entries. */
typedef struct ChunkHead {
  int64_t ok;     /* parsed (or empty) */
  int64_t order;  /* -1: no entries and no '# dims:' to say */
  int64_t nnz;    /* entries (a symmetric .mtx: with the mirrored ones) */
  int64_t lines;  /* entry lines */
  int64_t dims[GALLEY_MAX_ORDER];
  double fill;
} ChunkHead;

/* Parse header + range into coo (head->ok 0 when it fails). */
static void parse_range(const char *path, const ReadPlan *rp,
                        const char *header, const char *chunk, int64_t len,
                        rt_coo *coo, ChunkHead *h) {
  memset(h, 0, sizeof *h);
  h->order = -1;
  h->lines = data_lines(chunk, len, (int)rp->mtx);
  rt_coo_init(coo, 0);
  if (h->lines < 0)
    return; /* not ok: the file is read whole */
  int64_t keep = rp->mtx ? rp->size_line : rp->head;
  char size_line[96] = "";
  if (rp->mtx)
    snprintf(size_line, sizeof size_line, "%lld %lld %lld\n",
             (long long)rp->rows, (long long)rp->cols, (long long)h->lines);
  size_t sl = strlen(size_line);
  char *text = malloc((size_t)(keep + (int64_t)sl + len) + 1);
  if (!text)
    return;
  memcpy(text, header, (size_t)keep);
  memcpy(text + keep, size_line, sl);
  memcpy(text + keep + (int64_t)sl, chunk, (size_t)len);
  rt_reader r;
  galley_error e = {0};
  galley_status st = rt_reader_open_mem(&r, path, text,
                                        (size_t)(keep + (int64_t)sl + len), &e);
  if (st == GALLEY_OK) {
    rt_coo_free(coo);
    st = rp->mtx ? rt_read_mtx(&r, coo, NULL, &e) : rt_read_tns(&r, coo, &e);
    rt_reader_close(&r);
  }
  free(text);
  if (st != GALLEY_OK) {
    /* no entries and no '# dims:' is no failure: others say the order */
    h->ok = !rp->mtx && h->lines == 0;
    return;
  }
  h->ok = 1;
  h->order = coo->order;
  h->nnz = coo->nnz;
  h->fill = coo->fill;
  for (int k = 0; k < coo->order; k++)
    h->dims[k] = coo->dims[k];
}

/* ---- the entries of every range, to every rank ---- */

static galley_status share_entries(DistComm *c, const ChunkHead *h,
                                   const rt_coo *coo, void **recv,
                                   int64_t *rc, int64_t *rd,
                                   galley_error *err) {
  int order = h->order > 0 ? (int)h->order : 0;
  int64_t n = h->ok ? h->nnz : 0;
  int64_t cb = n * order * 8, len = (int64_t)sizeof *h + cb + n * 8;
  char *buf = malloc((size_t)len);
  galley_status st = buf ? GALLEY_OK : nomem(err);
  if (buf) {
    ChunkHead hh = *h;
    hh.nnz = n;
    memcpy(buf, &hh, sizeof hh);
    if (cb) /* a scalar (order 0) has no coordinates */
      memcpy(buf + sizeof hh, coo->crd, (size_t)cb);
    if (n)
      memcpy(buf + sizeof hh + cb, coo->val, (size_t)n * 8);
  }
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK)
    st = dist_gather(c, buf, len, -1, recv, rc, rd, err);
  free(buf);
  return st;
}

/* The tensor from every range's entries (the same on every rank), or
 * 0 when the ranges disagree (then the file is read whole). */
static int build_whole(int P, const char *recv, const int64_t *rd,
                       const ReadPlan *rp, galley_tensor **out,
                       galley_status *st, galley_error *err) {
  ChunkHead h, first = {0};
  int order = -1;
  int64_t total = 0, lines = 0, dims[GALLEY_MAX_ORDER] = {0};
  for (int s = 0; s < P; s++) {
    memcpy(&h, recv + rd[s], sizeof h);
    if (!h.ok)
      return 0;
    lines += h.lines;
    if (h.order < 0)
      continue;
    if (order < 0) {
      order = (int)h.order;
      first = h;
    }
    if (h.order != order || (h.nnz > 0 && h.fill != first.fill &&
                             h.fill == h.fill))
      return 0;
    for (int k = 0; k < order; k++)
      dims[k] = h.dims[k] > dims[k] ? h.dims[k] : dims[k];
    total += h.nnz;
  }
  if (order < 0 || (rp->mtx && lines != rp->stored))
    return 0;
  rt_coo coo;
  rt_coo_init(&coo, order);
  coo.fill = first.fill;
  for (int k = 0; k < order; k++)
    coo.dims[k] = dims[k];
  if (rt_coo_reserve(&coo, total > 0 ? total : 1) != 0) {
    rt_coo_free(&coo);
    *st = nomem(err);
    return 1;
  }
  for (int s = 0; s < P; s++) {
    memcpy(&h, recv + rd[s], sizeof h);
    if (h.order < 0 || h.nnz == 0)
      continue;
    const char *p = recv + rd[s] + sizeof h;
    if (order > 0)
      memcpy(coo.crd + coo.nnz * order, p, (size_t)(h.nnz * order) * 8);
    memcpy(coo.val + coo.nnz, p + h.nnz * order * 8, (size_t)h.nnz * 8);
    coo.nnz += h.nnz;
  }
  galley_format f = rt_format_for_entries(order, coo.dims, coo.nnz);
  *st = rt_tensor_from_coo(&coo, &f, out, err);
  rt_coo_free(&coo);
  return 1;
}

/* Every rank's range parsed into *coo and *h (rp->mode MODE_WHOLE: the
 * file is to be read whole, nothing parsed).  Collective. */
static galley_status parse_mine(DistComm *c, const char *path,
                                int64_t split_min, ReadPlan *rp,
                                rt_coo *coo, ChunkHead *h,
                                DistReadInfo *info, galley_error *err) {
  char *text = NULL, *header = NULL;
  memset(rp, 0, sizeof *rp);
  memset(h, 0, sizeof *h);
  rt_coo_init(coo, 0);
  if (c->rank == 0 && c->size > 1) {
    plan_read(path, split_min, rp, &text, &header);
    if (rp->mode == MODE_GZ)
      header = text; /* the header is the text's start */
  }
  dist_bcast(c, rp, (int64_t)sizeof *rp, 0);
  if (rp->mode == MODE_WHOLE)
    return GALLEY_OK;
  /* every rank gets the header (the bytes before the data) */
  void *hb = header;
  int64_t hlen = rp->head;
  galley_status st = GALLEY_OK;
  if (c->rank == 0 && rp->mode == MODE_GZ) {
    hb = malloc((size_t)hlen + 1);
    if (hb)
      memcpy(hb, text, (size_t)hlen);
    else
      st = nomem(err);
  }
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK)
    st = dist_bcast_blob(c, &hb, &hlen, 0, err);
  char *chunk = NULL;
  int64_t len = 0;
  if (st == GALLEY_OK && rp->mode == MODE_PLAIN)
    st = read_range(path, rp, c->rank, c->size, &chunk, &len, err);
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK && rp->mode == MODE_GZ)
    st = scatter_ranges(c, rp, text, &chunk, &len, err);
  free(text);
  if (st == GALLEY_OK)
    parse_range(path, rp, hb, chunk, len, coo, h);
  info->text_bytes = len;
  free(chunk);
  free(hb);
  return dist_agree(c, st, err);
}

galley_status dist_read_tensor(DistComm *c, const char *path,
                               int64_t split_min, galley_tensor **out,
                               DistReadInfo *info, galley_error *err) {
  *out = NULL;
  memset(info, 0, sizeof *info);
  ReadPlan rp;
  rt_coo coo;
  ChunkHead h;
  int64_t before = c->bytes_sent;
  galley_status st = parse_mine(c, path, split_min, &rp, &coo, &h, info, err);
  if (st == GALLEY_OK && rp.mode == MODE_WHOLE) {
    rt_coo_free(&coo);
    st = read_whole(c, path, out, info, err);
    info->sent = c->bytes_sent - before;
    return st;
  }
  void *recv = NULL;
  int64_t *v = calloc(2 * (size_t)c->size, sizeof *v);
  if (st == GALLEY_OK && !v)
    st = nomem(err);
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK)
    st = share_entries(c, &h, &coo, &recv, v, v + c->size, err);
  rt_coo_free(&coo);
  int built = 0;
  if (st == GALLEY_OK)
    built = build_whole(c->size, recv, v + c->size, &rp, out, &st, err);
  free(recv);
  free(v);
  info->split = built;
  /* every rank made the same decision from the same heads */
  if (st == GALLEY_OK && !built) {
    st = read_whole(c, path, out, info, err);
  } else {
    st = dist_agree(c, st, err);
    if (st != GALLEY_OK)
      *out = galley_tensor_free(*out);
  }
  info->sent = c->bytes_sent - before;
  return st;
}

/* ---- a relation of row blocks, each rank keeping its own ---- */

/* Whether the heads of every range agree (the file need not be read
 * whole): the order, the largest sizes and the fill. */
static int heads_agree(int P, const ChunkHead *heads, const ReadPlan *rp,
                       int *order, int64_t *dims, double *fill) {
  int64_t lines = 0;
  *order = -1;
  for (int s = 0; s < P; s++) {
    const ChunkHead *h = &heads[s];
    if (!h->ok)
      return 0;
    lines += h->lines;
    if (h->order < 0)
      continue;
    if (*order < 0) {
      *order = (int)h->order;
      *fill = h->fill;
    }
    if (h->order != *order || (h->nnz > 0 && h->fill != *fill &&
                               h->fill == h->fill))
      return 0;
    for (int k = 0; k < *order; k++)
      dims[k] = h->dims[k] > dims[k] ? h->dims[k] : dims[k];
  }
  return *order > 0 && !(rp->mtx && lines != rp->stored);
}

/* The rank owning row r of the blocks. */
static int owner_of(const int64_t *bounds, int P, int64_t r) {
  int lo = 0, hi = P - 1;
  while (lo < hi) { /* the last block whose start is <= r */
    int mid = (lo + hi + 1) / 2;
    if (bounds[mid] <= r)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* Shuffle this rank's entries to the owners of their rows and build its
 * tile.  Entries travel as order coordinates and a value. */
static galley_status shuffle_rows(DistComm *c, const rt_coo *coo, int order,
                                  const int64_t *dims, double fill,
                                  DistRelation *rel, galley_error *err) {
  int P = c->size;
  int64_t w = (int64_t)(order + 1) * 8, n = coo->nnz;
  int64_t *v = calloc(5 * (size_t)P, sizeof *v);
  char *send = malloc((size_t)(n * w + 1));
  galley_status st = v && send ? GALLEY_OK : nomem(err);
  for (int64_t e = 0; st == GALLEY_OK && e < n; e++)
    v[owner_of(rel->bounds, P, coo->crd[e * order])]++;
  int64_t at = 0;
  for (int d = 0; st == GALLEY_OK && d < P; d++) {
    v[4 * P + d] = at;
    v[P + d] = at * w;
    at += v[d];
    v[d] *= w;
  }
  for (int64_t e = 0; st == GALLEY_OK && e < n; e++) {
    int d = owner_of(rel->bounds, P, coo->crd[e * order]);
    char *p = send + v[4 * P + d]++ * w;
    memcpy(p, &coo->crd[e * order], (size_t)order * 8);
    memcpy(p + order * 8, &coo->val[e], 8);
  }
  st = dist_agree(c, st, err);
  void *recv = NULL;
  if (st == GALLEY_OK)
    st = dist_alltoallv(c, send, v, v + P, &recv, v + 2 * P, v + 3 * P, err);
  free(send);
  if (st == GALLEY_OK) {
    int64_t got = 0, lo = rel->bounds[c->rank];
    for (int s = 0; s < P; s++)
      got += v[2 * P + s] / w;
    rt_coo t;
    rt_coo_init(&t, order);
    t.fill = fill;
    for (int k = 0; k < order; k++)
      t.dims[k] = dims[k];
    t.dims[0] = rel->bounds[c->rank + 1] - lo;
    if (rt_coo_reserve(&t, got > 0 ? got : 1) != 0)
      st = nomem(err);
    for (int64_t e = 0; st == GALLEY_OK && e < got; e++) {
      const char *p = (const char *)recv + e * w;
      memcpy(&t.crd[e * order], p, (size_t)order * 8);
      t.crd[e * order] -= lo; /* tile-local rows */
      memcpy(&t.val[e], p + order * 8, 8);
      t.nnz++;
    }
    galley_format f = rt_format_for_entries(order, t.dims, t.nnz);
    if (st == GALLEY_OK)
      st = rt_tensor_from_coo(&t, &f, &rel->tile, err);
    rt_coo_free(&t);
  }
  free(recv);
  free(v);
  return dist_agree(c, st, err);
}

/* The file read by rank 0 and scattered in row blocks. */
static galley_status relation_whole(DistComm *c, const char *path,
                                    DistRelation *rel, galley_error *err) {
  galley_tensor *t = NULL;
  galley_status st = GALLEY_OK;
  if (c->rank == 0)
    st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, err);
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK)
    st = dist_relation_scatter(c, 0, t, 0, rel, err);
  galley_tensor_free(t);
  return st;
}

galley_status dist_read_relation(DistComm *c, const char *path,
                                 int64_t split_min, DistRelation *rel,
                                 DistReadInfo *info, galley_error *err) {
  memset(rel, 0, sizeof *rel);
  memset(info, 0, sizeof *info);
  int P = c->size;
  int64_t before = c->bytes_sent;
  ReadPlan rp;
  rt_coo coo;
  ChunkHead h;
  galley_status st = parse_mine(c, path, split_min, &rp, &coo, &h, info, err);
  int split = 0, order = -1;
  int64_t dims[GALLEY_MAX_ORDER] = {0};
  double fill = 0;
  ChunkHead *heads = NULL;
  int64_t *v = calloc(2 * (size_t)P, sizeof *v);
  if (st == GALLEY_OK && !v)
    st = nomem(err);
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK && rp.mode != MODE_WHOLE) {
    void *recv = NULL;
    st = dist_gather(c, &h, (int64_t)sizeof h, -1, &recv, v, v + P, err);
    heads = recv;
    split = st == GALLEY_OK && heads_agree(P, heads, &rp, &order, dims, &fill);
  }
  int64_t *prefix = split ? calloc((size_t)dims[0] + 2, sizeof *prefix) : NULL;
  if (split && !prefix)
    st = nomem(err);
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK && split) {
    /* the work of each row (1 + its entries), summed over the ranks */
    for (int64_t e = 0; e < coo.nnz; e++)
      prefix[coo.crd[e * order] + 1]++;
    dist_sum_i64_array(c, prefix + 1, dims[0]);
    for (int64_t r = 0; r < dims[0]; r++)
      prefix[r + 1] += prefix[r] + 1;
    rel->order = order;
    memcpy(rel->dims, dims, sizeof rel->dims);
    rel->key = 0;
    rel->ntiles = P;
    rel->bounds = calloc((size_t)P + 1, sizeof *rel->bounds);
    rel->owner = calloc((size_t)P, sizeof *rel->owner);
    if (!rel->bounds || !rel->owner)
      st = nomem(err);
    else
      dist_split(prefix, dims[0], P, rel->bounds);
    for (int k = 0; rel->owner && k < P; k++)
      rel->owner[k] = k;
    st = dist_agree(c, st, err);
    if (st == GALLEY_OK)
      st = shuffle_rows(c, &coo, order, dims, fill, rel, err);
  }
  free(prefix);
  free(heads);
  free(v);
  rt_coo_free(&coo);
  if (st == GALLEY_OK && !split) {
    dist_relation_free(rel);
    st = relation_whole(c, path, rel, err);
  }
  if (st != GALLEY_OK)
    dist_relation_free(rel);
  info->split = split;
  info->sent = c->bytes_sent - before;
  return st;
}
