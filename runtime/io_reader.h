/*
 * io_reader.h -- the line reader and number parsers under the tensor file
 * readers (io_mtx.c, io_tns.c), and the parsers' internal entry points.
 *
 * A reader hands out one line at a time from a plain file, a gzip file
 * (zlib, transparently) or a memory buffer (for the fuzz targets).  Lines
 * are parsed in place in a big buffer: no per-line allocation, no sscanf.
 * Every error is reported as "FILE:LINE: error: MESSAGE" through
 * rt_data_error (GALLEY_EDATA), or "FILE: error: ..." with GALLEY_EIO for
 * an unreadable file.
 */
#ifndef GALLEY_IO_READER_H
#define GALLEY_IO_READER_H

#include <stddef.h>
#include <stdint.h>

#include "rt_internal.h"

/* Where a reader's bytes come from. */
typedef enum rt_source {
  RT_SRC_FILE = 0, /* stdio FILE, read in big blocks with fread */
  RT_SRC_GZ = 1,   /* zlib gzFile, read with gzread */
  RT_SRC_MEM = 2   /* a caller-owned memory buffer */
} rt_source;

typedef struct rt_reader {
  const char *name;   /* the path as given, for messages */
  rt_source src;      /* kind of source */
  void *fp;           /* RT_SRC_FILE: FILE *; RT_SRC_GZ: gzFile */
  const char *mem;    /* RT_SRC_MEM: the bytes */
  size_t mem_len;     /* RT_SRC_MEM: number of bytes */
  size_t mem_pos;     /* RT_SRC_MEM: bytes already handed to the buffer */
  char *buf;          /* cap+1 bytes: lines are NUL-terminated in place */
  size_t cap;         /* buffer capacity (without the extra byte) */
  size_t beg;         /* first unconsumed byte in buf */
  size_t end;         /* one past the last valid byte in buf */
  size_t scan;        /* bytes after beg known to hold no newline */
  int eof;            /* the source is exhausted */
  int newline;        /* the last line handed out ended with '\n' */
  int64_t line;       /* 1-based number of the last line handed out */
  int64_t size_hint;  /* size of the input in bytes, -1 when unknown (gz) */
} rt_reader;

/* Open path for reading (gzip when the name ends in ".gz").  On failure
 * returns GALLEY_EIO with "PATH: error: cannot open: <strerror>" (or
 * GALLEY_ENOMEM) and the reader needs no rt_reader_close. */
galley_status rt_reader_open_file(rt_reader *r, const char *path,
                                  galley_error *err);

/* Read from the len bytes at data (not copied; must outlive the reader).
 * name is used in messages. */
galley_status rt_reader_open_mem(rt_reader *r, const char *name,
                                 const void *data, size_t len,
                                 galley_error *err);

/* Release the buffer and close the source. */
void rt_reader_close(rt_reader *r);

/* Next line: returns 1 with *line (NUL-terminated in place, without its
 * '\n' and a '\r' before it) and *len set, 0 at end of input, or a
 * negative status (GALLEY_EIO read error, GALLEY_EDATA corrupt gzip data
 * or an over-long line, GALLEY_ENOMEM) with err set.  The line stays valid
 * until the next call.  r->line is its number. */
int rt_reader_next(rt_reader *r, char **line, size_t *len, galley_error *err);

/* The next up to n bytes of the input not yet handed out as lines (the
 * buffered ones first) into dst: the count, 0 at end of input, or a
 * negative status.  After it, the reader hands out no more lines. */
long long rt_reader_raw(rt_reader *r, char *dst, size_t n, galley_error *err);

/* Threads of its own for a reading that has no pool (galley_tensor_read):
 * an rt_par whose run starts nthreads - 1 threads for the job and joins
 * them (serially when they cannot be started).  The thread count is
 * $GALLEY_THREADS when it is a number in 1 .. 256, else the number of
 * online processors. */
int rt_read_threads(void);
void rt_run_on_threads(void *nthreads, int64_t nparts, rt_task fn, void *ctx);

/* galley_tensor_write with par's threads (NULL: serially): the same
 * bytes for every thread count. */
galley_status rt_tensor_write_par(const galley_tensor *t, const char *path,
                                  galley_file_kind kind, const rt_par *par,
                                  galley_error *err);

/* ---- text parsed in parts on threads (io_mtx.c, io_tns.c) ----
 *
 * The rest of a reader's input is taken in chunks of `chunk` bytes
 * ending at a line end (a longer line makes a longer chunk), each cut at
 * line ends into parts of about part_min bytes (at most
 * RT_CHUNK_MAX_PARTS: the cut depends on the text alone, never on the
 * thread count).  For each chunk, parse(ctx, k) runs on par's threads
 * for every part k (its bytes in s[k], len[k]) while part 0 of the same
 * job reads the next chunk, then merge(ctx, n) on the caller, which
 * takes the parts in order and adds their lines to `line` (the lines
 * before the chunk; the reader's line count when it starts). */
#define RT_CHUNK_MAX_PARTS 64
typedef struct rt_chunks {
  rt_reader *r;
  const rt_par *par;
  size_t chunk, part_min; /* bytes, at least 1 */
  void (*parse)(void *ctx, int k);
  galley_status (*merge)(void *ctx, int nparts);
  void *ctx;
  galley_error *err;
  const char *s[RT_CHUNK_MAX_PARTS]; /* the current chunk's parts */
  size_t len[RT_CHUNK_MAX_PARTS];
  int64_t line;
} rt_chunks;

/* Parse the rest of c->r as above: the first failure of a merge or of
 * reading, or GALLEY_OK. */
galley_status rt_read_chunks(rt_chunks *c);

/* The line number to report for an error found at end of input. */
int64_t rt_reader_eof_line(const rt_reader *r);

/* ---- fields and numbers ---- */

/* Results of the number parsers. */
enum {
  RT_NUM_OK = 0,      /* parsed */
  RT_NUM_BAD = 1,     /* not a number of the expected form */
  RT_NUM_OVERFLOW = 2 /* an integer outside int64_t, or a decimal real
                         beyond the largest double (1e999) */
};

static inline int rt_is_blank(char c) { return c == ' ' || c == '\t'; }

/* Next blank-separated field of [*p, end): returns 1 with [*s, *e) set and
 * *p moved past it, 0 when only blanks remain. */
static inline int rt_next_field(const char **p, const char *end,
                                const char **s, const char **e) {
  const char *q = *p;
  while (q < end && rt_is_blank(*q))
    q++;
  if (q == end) {
    *p = q;
    return 0;
  }
  *s = q;
  while (q < end && !rt_is_blank(*q))
    q++;
  *e = q;
  *p = q;
  return 1;
}

/* Number of blank-separated fields in [p, end). */
int rt_count_fields(const char *p, const char *end);

/* A decimal integer with optional sign, the whole of [s, e). */
int rt_parse_int64(const char *s, const char *e, int64_t *out);

/* A real number, the whole of [s, e): decimal with optional fraction and
 * exponent (rounded exactly as strtod does), or inf, infinity, nan in any
 * case with an optional sign.  The byte at e must not continue a number
 * (a blank or the line's NUL), which is always so for a field.
 * RT_NUM_OVERFLOW (with *out = +-inf) for a decimal too large for a
 * double: the callers refuse it, as the .tin lexer does. */
int rt_parse_double(const char *s, const char *e, double *out);

/* The message of a real value that is too large for a double. */
#define RT_TOO_LARGE_MSG                                                     \
  "value '%s' is too large for a double (the largest is about 1.8e308; "   \
  "write inf for infinity)"

/* Copy [s, e) into buf (size >= 48) for a message: at most 40 bytes,
 * unprintable bytes as '?', "..." appended when cut.  Returns buf. */
const char *rt_quote(char *buf, const char *s, const char *e);

/* ---- file parsers (io_mtx.c, io_tns.c) ---- */

/* What a Matrix Market header said. */
typedef struct rt_mtx_info {
  int array;    /* 1 for the dense `array` format, 0 for `coordinate` */
  int pattern;  /* field `pattern` */
  int integer;  /* field `integer` */
  int symmetry; /* 0 general, 1 symmetric, 2 skew-symmetric */
  int64_t stored; /* entries the size line announced (array: values) */
} rt_mtx_info;

/* Parse a Matrix Market file into coo (initialized here, order 2, fill 0;
 * the caller frees it with rt_coo_free on success and on failure).
 * info may be NULL. */
galley_status rt_read_mtx(rt_reader *r, rt_coo *coo, rt_mtx_info *info,
                          galley_error *err);

/* rt_read_mtx, a coordinate file's entries parsed on par's threads (NULL:
 * serially) in parts cut at line ends: the same entries in the same
 * order, and the same first error, for every thread count. */
galley_status rt_read_mtx_par(rt_reader *r, rt_coo *coo, rt_mtx_info *info,
                              const rt_par *par, galley_error *err);

/* rt_read_mtx_par in chunks of `chunk` bytes cut into parts of about
 * part_min bytes (both: bytes, at least 1; a file of fewer than 2 *
 * part_min bytes is parsed serially), for the tests to cut small inputs
 * into many chunks and parts. */
galley_status rt_read_mtx_sized(rt_reader *r, rt_coo *coo, rt_mtx_info *info,
                                const rt_par *par, size_t chunk,
                                size_t part_min, galley_error *err);

/* Parse a FROSTT .tns file into coo (initialized here; the caller frees
 * it).  Sizes come from '# dims:' or, without it, the largest coordinate
 * of each mode; the fill from '# fill:' (default 0). */
galley_status rt_read_tns(rt_reader *r, rt_coo *coo, galley_error *err);

/* rt_read_tns, the entries after the first parsed on par's threads (NULL:
 * serially) as rt_read_mtx_par's; _sized with the chunk and part sizes
 * (for the tests). */
galley_status rt_read_tns_par(rt_reader *r, rt_coo *coo, const rt_par *par,
                              galley_error *err);
galley_status rt_read_tns_sized(rt_reader *r, rt_coo *coo, const rt_par *par,
                                size_t chunk, size_t part_min,
                                galley_error *err);

/* Whether [s, e) equals the lower-case word w, ignoring ASCII case. */
int rt_word_is(const char *s, const char *e, const char *w);

#endif /* GALLEY_IO_READER_H */
