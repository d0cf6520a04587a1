/*
 * io_reader.c -- a buffered line reader over plain files, gzip files and
 * memory, and the hand-written number parsers the tensor file readers use.
 *
 * Speed matters (a 5-million-entry .mtx must load in a second or two), so
 * the reader fills a 1 MiB buffer with fread/gzread and hands out lines in
 * place (NUL-terminated where the newline was); the parsers work on
 * [start, end) ranges without copying.  Reals take an exact fast path
 * (Clinger's: at most 19 significant digits forming an integer m <= 2^53
 * and a power of ten |e| <= 22, so m * 10^e or m / 10^e is one correctly
 * rounded IEEE operation) and fall back to strtod otherwise, so every
 * value rounds exactly as strtod rounds it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io_reader.h"

#define RT_READ_CHUNK ((size_t)1 << 20)  /* bytes per fread / gzread */
#define RT_MAX_LINE ((size_t)1 << 26)    /* longest line accepted (64 MiB) */

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static galley_status reader_alloc(rt_reader *r, size_t cap,
                                  galley_error *err) {
  r->buf = malloc(cap + 1);
  if (!r->buf)
    return rt_error(err, GALLEY_ENOMEM, "%s: error: out of memory", r->name);
  r->cap = cap;
  return GALLEY_OK;
}

galley_status rt_reader_open_file(rt_reader *r, const char *path,
                                  galley_error *err) {
  memset(r, 0, sizeof *r);
  r->name = path;
  r->size_hint = -1;
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return rt_error(err, GALLEY_EIO, "%s: error: cannot open: %s", path,
                    strerror(errno));
  struct stat st;
  if (fstat(fd, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      close(fd);
      return rt_error(err, GALLEY_EIO, "%s: error: cannot open: %s", path,
                      strerror(EISDIR));
    }
    if (S_ISREG(st.st_mode))
      r->size_hint = (int64_t)st.st_size;
  }
  if (ends_with(path, ".gz")) {
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
      close(fd);
      return rt_error(err, GALLEY_ENOMEM, "%s: error: out of memory", path);
    }
    gzbuffer(gz, 1 << 17);
    r->src = RT_SRC_GZ;
    r->fp = gz;
    r->size_hint = -1; /* the uncompressed size is unknown */
  } else {
    FILE *f = fdopen(fd, "rb");
    if (!f) {
      int e = errno;
      close(fd);
      return rt_error(err, GALLEY_EIO, "%s: error: cannot open: %s", path,
                      strerror(e));
    }
    r->src = RT_SRC_FILE;
    r->fp = f;
  }
  galley_status st2 = reader_alloc(r, RT_READ_CHUNK, err);
  if (st2 != GALLEY_OK) {
    rt_reader_close(r);
    return st2;
  }
  return GALLEY_OK;
}

galley_status rt_reader_open_mem(rt_reader *r, const char *name,
                                 const void *data, size_t len,
                                 galley_error *err) {
  memset(r, 0, sizeof *r);
  r->name = name;
  r->src = RT_SRC_MEM;
  r->mem = data;
  r->mem_len = len;
  r->size_hint = (int64_t)len;
  /* a small buffer for small inputs keeps fuzzing fast */
  size_t cap = len < RT_READ_CHUNK ? len + 16 : RT_READ_CHUNK;
  return reader_alloc(r, cap, err);
}

void rt_reader_close(rt_reader *r) {
  if (r->fp) {
    if (r->src == RT_SRC_GZ)
      gzclose((gzFile)r->fp);
    else
      fclose((FILE *)r->fp);
  }
  free(r->buf);
  r->fp = NULL;
  r->buf = NULL;
}

static long long reader_fill(rt_reader *r, char *dst, size_t n,
                             galley_error *err);

long long rt_reader_raw(rt_reader *r, char *dst, size_t n,
                        galley_error *err) {
  size_t k = r->end - r->beg;
  if (k > 0) {
    if (k > n)
      k = n;
    memcpy(dst, r->buf + r->beg, k);
    r->beg += k;
    r->scan = 0;
    return (long long)k;
  }
  if (r->eof)
    return 0;
  long long got = reader_fill(r, dst, n, err);
  if (got == 0)
    r->eof = 1;
  return got;
}

/* ------------------------------------------------------------------ */
/* Threads of a reading                                                */
/* ------------------------------------------------------------------ */

int rt_read_threads(void) {
  const char *e = getenv("GALLEY_THREADS");
  if (e && *e) {
    char *end;
    long v = strtol(e, &end, 10);
    if (*end == '\0' && v >= 1 && v <= 256)
      return (int)v;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

/* One job: parts claimed in turn by every thread. */
typedef struct ReadJob {
  rt_task fn;
  void *ctx;
  int64_t nparts, next; /* next: atomic */
} ReadJob;

typedef struct ReadWorker {
  ReadJob *job;
  int w;
} ReadWorker;

static void read_job_work(ReadJob *j, int w) {
  int64_t p;
  while ((p = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->nparts)
    j->fn(j->ctx, p, w);
}

static void *read_worker_main(void *arg) {
  ReadWorker *rw = arg;
  read_job_work(rw->job, rw->w);
  return NULL;
}

void rt_run_on_threads(void *nthreads, int64_t nparts, rt_task fn,
                       void *ctx) {
  int t = nthreads ? *(const int *)nthreads : 1;
  if (t > nparts)
    t = (int)nparts;
  ReadJob job = {fn, ctx, nparts, 0};
  pthread_t tid[256];
  ReadWorker rw[256];
  int started = 0;
  for (int w = 1; w < t && w < 256; w++) {
    rw[started] = (ReadWorker){&job, w};
    if (pthread_create(&tid[started], NULL, read_worker_main,
                       &rw[started]) != 0)
      break; /* the threads started (and this one) do the rest */
    started++;
  }
  read_job_work(&job, 0);
  for (int k = 0; k < started; k++)
    pthread_join(tid[k], NULL);
}

/* ------------------------------------------------------------------ */
/* Text parsed in parts on threads                                     */
/* ------------------------------------------------------------------ */

/* Cut [s, s + len) at line ends into c's parts; their number. */
static int cut_parts(rt_chunks *c, const char *s, size_t len) {
  int n = (int)(len / c->part_min);
  if (n > RT_CHUNK_MAX_PARTS)
    n = RT_CHUNK_MAX_PARTS;
  if (n < 1)
    n = 1;
  size_t at = 0;
  int m = 0;
  for (int k = 1; k <= n && at < len; k++) {
    size_t end = len / (size_t)n * (size_t)k;
    if (end < at)
      end = at;
    const char *nl = k < n && end < len ? memchr(s + end, '\n', len - end)
                                        : NULL;
    end = nl ? (size_t)(nl - s) + 1 : len;
    c->s[m] = s + at;
    c->len[m] = end - at;
    m++;
    at = end;
  }
  return m;
}

/* One chunk's buffer. */
typedef struct ChunkBuf {
  char *buf;
  size_t cap, have; /* bytes held: the chunk, then a partial line */
  size_t len;       /* the chunk's bytes (ending at a line end) */
  int eof;          /* the input is used up */
  galley_status st; /* of filling it */
} ChunkBuf;

/* Fill b after its first `have` bytes from the reader up to a line end
 * (unless the input ends), growing it for a line longer than it. */
static galley_status fill_chunk(rt_chunks *c, ChunkBuf *b) {
  for (;;) {
    while (b->have < b->cap && !b->eof) {
      long long k = rt_reader_raw(c->r, b->buf + b->have, b->cap - b->have,
                                  c->err);
      if (k < 0)
        return (galley_status)k;
      if (k == 0)
        b->eof = 1;
      b->have += (size_t)k;
    }
    size_t e = b->have;
    while (e > 0 && b->buf[e - 1] != '\n')
      e--;
    if (b->eof || e > 0) {
      b->len = b->eof ? b->have : e;
      return GALLEY_OK;
    }
    char *nb = realloc(b->buf, b->cap * 2);
    if (!nb)
      return rt_error(c->err, GALLEY_ENOMEM, "%s: error: out of memory",
                      c->r->name);
    b->buf = nb;
    b->cap *= 2;
  }
}

/* A job: part 0 fills the next buffer (when there is one), part k > 0
 * parses the chunk's part k - 1. */
typedef struct ChunkJob {
  rt_chunks *c;
  ChunkBuf *next;
} ChunkJob;

static void chunk_task(void *ctx, int64_t k, int w) {
  (void)w;
  ChunkJob *j = ctx;
  if (k > 0)
    j->c->parse(j->c->ctx, (int)(k - 1));
  else if (j->next)
    j->next->st = fill_chunk(j->c, j->next);
}

galley_status rt_read_chunks(rt_chunks *c) {
  ChunkBuf b[2] = {{.cap = c->chunk}, {.cap = c->chunk}};
  b[0].buf = malloc(b[0].cap);
  b[1].buf = malloc(b[1].cap);
  galley_status st = GALLEY_OK;
  if (!b[0].buf || !b[1].buf)
    st = rt_error(c->err, GALLEY_ENOMEM, "%s: error: out of memory",
                  c->r->name);
  ChunkBuf *cur = &b[0], *nx = &b[1];
  c->r->line = c->line; /* for a read error's message */
  if (st == GALLEY_OK)
    st = fill_chunk(c, cur);
  while (st == GALLEY_OK && cur->len > 0) {
    int n = cut_parts(c, cur->buf, cur->len);
    ChunkJob j = {c, NULL};
    size_t rest = cur->have - cur->len;
    if (!cur->eof) { /* the partial line after the chunk starts the next */
      if (nx->cap < cur->cap) {
        char *nb = realloc(nx->buf, cur->cap);
        if (!nb) {
          st = rt_error(c->err, GALLEY_ENOMEM, "%s: error: out of memory",
                        c->r->name);
          break;
        }
        nx->buf = nb;
        nx->cap = cur->cap;
      }
      memcpy(nx->buf, cur->buf + cur->len, rest);
      nx->have = rest;
      nx->len = 0;
      nx->eof = 0;
      nx->st = GALLEY_OK;
      j.next = nx;
    }
    /* (par->run directly: the fuzz targets link this file without
     * tensor.c's rt_par_run) */
    if (c->par && c->par->run)
      c->par->run(c->par->pool, n + 1, chunk_task, &j);
    else
      for (int k = 0; k <= n; k++)
        chunk_task(&j, k, 0);
    st = c->merge(c->ctx, n);
    if (st == GALLEY_OK && j.next)
      st = nx->st;
    if (!j.next)
      break;
    ChunkBuf *t = cur;
    cur = nx;
    nx = t;
  }
  free(b[0].buf);
  free(b[1].buf);
  return st;
}

int64_t rt_reader_eof_line(const rt_reader *r) {
  return r->line > 0 ? r->line : 1;
}

/* Read up to n bytes into dst: the count, 0 at end, or a negative status. */
static long long reader_fill(rt_reader *r, char *dst, size_t n,
                             galley_error *err) {
  switch (r->src) {
  case RT_SRC_MEM: {
    size_t k = r->mem_len - r->mem_pos;
    if (k > n)
      k = n;
    memcpy(dst, r->mem + r->mem_pos, k);
    r->mem_pos += k;
    return (long long)k;
  }
  case RT_SRC_FILE: {
    FILE *f = r->fp;
    size_t k = fread(dst, 1, n, f);
    if (k == 0 && ferror(f))
      return rt_error(err, GALLEY_EIO, "%s: error: read error: %s", r->name,
                      strerror(errno));
    return (long long)k;
  }
  case RT_SRC_GZ: {
    gzFile gz = r->fp;
    int k = gzread(gz, dst, (unsigned)n);
    int errnum = Z_OK;
    const char *msg = gzerror(gz, &errnum);
    if (k > 0)
      return k;
    if (errnum == Z_ERRNO)
      return rt_error(err, GALLEY_EIO, "%s: error: read error: %s", r->name,
                      strerror(errno));
    if (k < 0 || errnum != Z_OK)
      return rt_data_error(err, r->name, r->line + 1,
                           "corrupt gzip data (%s)", msg ? msg : "unknown");
    return 0;
  }
  }
  return 0;
}

int rt_reader_next(rt_reader *r, char **line, size_t *len,
                   galley_error *err) {
  char *nl;
  for (;;) {
    size_t avail = r->end - r->beg;
    nl = avail > r->scan ? memchr(r->buf + r->beg + r->scan, '\n',
                                  avail - r->scan)
                         : NULL;
    if (nl || (r->eof && avail > 0))
      break;
    if (r->eof)
      return 0;
    r->scan = avail;
    if (r->beg > 0) { /* keep the partial line, make room behind it */
      memmove(r->buf, r->buf + r->beg, avail);
      r->beg = 0;
      r->end = avail;
    }
    if (r->end == r->cap) {
      if (r->cap >= RT_MAX_LINE)
        return rt_data_error(err, r->name, r->line + 1,
                             "line longer than %zu bytes", RT_MAX_LINE);
      size_t ncap = r->cap * 2 < RT_READ_CHUNK ? RT_READ_CHUNK : r->cap * 2;
      char *nb = realloc(r->buf, ncap + 1);
      if (!nb)
        return rt_error(err, GALLEY_ENOMEM, "%s: error: out of memory",
                        r->name);
      r->buf = nb;
      r->cap = ncap;
    }
    size_t want = r->cap - r->end;
    if (want > RT_READ_CHUNK)
      want = RT_READ_CHUNK;
    long long k = reader_fill(r, r->buf + r->end, want, err);
    if (k < 0)
      return (int)k;
    if (k == 0)
      r->eof = 1;
    r->end += (size_t)k;
  }
  char *s = r->buf + r->beg;
  size_t n;
  if (nl) {
    n = (size_t)(nl - s);
    r->beg += n + 1;
    r->newline = 1;
  } else {
    n = r->end - r->beg;
    r->beg = r->end;
    r->newline = 0;
  }
  r->scan = 0;
  if (n > 0 && s[n - 1] == '\r')
    n--;
  s[n] = '\0';
  r->line++;
  *line = s;
  *len = n;
  return 1;
}

/* ------------------------------------------------------------------ */
/* Numbers                                                             */
/* ------------------------------------------------------------------ */

int rt_count_fields(const char *p, const char *end) {
  const char *s, *e;
  int n = 0;
  while (rt_next_field(&p, end, &s, &e))
    n++;
  return n;
}

int rt_parse_int64(const char *s, const char *e, int64_t *out) {
  int neg = 0;
  if (s < e && (*s == '-' || *s == '+')) {
    neg = *s == '-';
    s++;
  }
  if (s == e)
    return RT_NUM_BAD;
  uint64_t v = 0;
  int over = 0;
  for (; s < e; s++) {
    unsigned d = (unsigned)(unsigned char)*s - '0';
    if (d > 9)
      return RT_NUM_BAD;
    if (v > (UINT64_MAX - d) / 10)
      over = 1;
    else
      v = v * 10 + d;
  }
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  if (over || v > limit)
    return RT_NUM_OVERFLOW;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return RT_NUM_OK;
}

int rt_word_is(const char *s, const char *e, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(e - s) != n)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z')
      c = (char)(c - 'A' + 'a');
    if (c != w[i])
      return 0;
  }
  return 1;
}

static const double pow10_exact[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

int rt_parse_double(const char *s, const char *e, double *out) {
  const char *p = s;
  int neg = 0;
  if (p < e && (*p == '-' || *p == '+')) {
    neg = *p == '-';
    p++;
  }
  if (p < e && !(*p >= '0' && *p <= '9') && *p != '.') {
    double v;
    if (rt_word_is(p, e, "inf") || rt_word_is(p, e, "infinity"))
      v = INFINITY;
    else if (rt_word_is(p, e, "nan"))
      v = NAN;
    else
      return RT_NUM_BAD;
    *out = neg ? -v : v;
    return RT_NUM_OK;
  }
  /* decimal: digits [. digits] [e [sign] digits], at least one digit */
  uint64_t m = 0;
  int sig = 0;        /* significant digits gathered into m */
  int dropped = 0;    /* nonzero digits that did not fit in m */
  int64_t exp10 = 0;  /* decimal exponent applied to m */
  int ndigits = 0;
  for (; p < e && *p >= '0' && *p <= '9'; p++, ndigits++) {
    unsigned d = (unsigned)(*p - '0');
    if (sig < 19) {
      if (m || d) {
        m = m * 10 + d;
        sig++;
      }
    } else {
      exp10++;
      dropped |= d != 0;
    }
  }
  if (p < e && *p == '.') {
    p++;
    for (; p < e && *p >= '0' && *p <= '9'; p++, ndigits++) {
      unsigned d = (unsigned)(*p - '0');
      if (sig < 19) {
        if (m || d) {
          m = m * 10 + d;
          sig++;
        }
        exp10--;
      } else {
        dropped |= d != 0;
      }
    }
  }
  if (ndigits == 0)
    return RT_NUM_BAD;
  if (p < e && (*p == 'e' || *p == 'E')) {
    p++;
    int eneg = 0;
    if (p < e && (*p == '-' || *p == '+')) {
      eneg = *p == '-';
      p++;
    }
    if (p == e)
      return RT_NUM_BAD;
    int64_t x = 0;
    for (; p < e && *p >= '0' && *p <= '9'; p++)
      if (x < 100000000)
        x = x * 10 + (*p - '0');
    exp10 += eneg ? -x : x;
  }
  if (p != e)
    return RT_NUM_BAD;
#if FLT_EVAL_METHOD == 0
  if (!dropped && m <= ((uint64_t)1 << 53) && exp10 >= -22 && exp10 <= 22) {
    double v = (double)m;
    if (m != 0) {
      if (exp10 < 0)
        v /= pow10_exact[-exp10];
      else
        v *= pow10_exact[exp10];
    }
    *out = neg ? -v : v;
    return RT_NUM_OK;
  }
#endif
  /* The range is a valid decimal and the byte at e cannot continue it, so
   * strtod stops exactly at e. */
  char *stop;
  double v = strtod(s, &stop);
  if (stop != e)
    return RT_NUM_BAD;
  *out = v;
  /* a decimal beyond the largest double (1e999) is refused as in a
   * program (lex.c), not silently read as inf: inf is spelled inf */
  return isinf(v) ? RT_NUM_OVERFLOW : RT_NUM_OK;
}

const char *rt_quote(char *buf, const char *s, const char *e) {
  size_t n = (size_t)(e - s), k = n > 40 ? 40 : n, i;
  for (i = 0; i < k; i++) {
    unsigned char c = (unsigned char)s[i];
    buf[i] = (c >= 32 && c < 127) ? (char)c : '?';
  }
  if (n > k) {
    memcpy(buf + i, "...", 3);
    i += 3;
  }
  buf[i] = '\0';
  return buf;
}
