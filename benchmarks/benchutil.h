/*
 * benchutil.h -- small helpers the benchmark programs share: a monotonic
 * clock in ms, medians, file base names and CSV-safe notes; and for the
 * kernel servers of `benchmarks/run kernels` (bench_kernels.c,
 * baseline_graphblas.c) the binary operand files, the deterministic dense
 * operands, the checksums and the command protocol, so that every tool
 * computes exactly the same thing on exactly the same arrays.
 * Header-only (static, possibly unused in one program); plain C11 and the
 * C library, no galley.h.
 */
#ifndef GALLEY_BENCHUTIL_H
#define GALLEY_BENCHUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_UNUSED __attribute__((unused))

BENCH_UNUSED
static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

BENCH_UNUSED
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of n > 0 values (sorts them in place). */
BENCH_UNUSED
static double median_of(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

BENCH_UNUSED
static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* Notes go in the last CSV field: no commas there. */
BENCH_UNUSED
static const char *clean(const char *note, char *buf, size_t size) {
  snprintf(buf, size, "%s", note ? note : "");
  for (char *p = buf; *p; p++)
    if (*p == ',' || *p == '\n')
      *p = ' ';
  return buf;
}

/* ------------------------------------------------------------------ */
/* Operand files: the same arrays for every tool                       */
/* ------------------------------------------------------------------ */
/*
 * `bench_kernels prep` reads a matrix or tensor file with libgalley and
 * writes its arrays once; the GraphBLAS server and the SciPy side
 * (baseline_kernels.py, with numpy.fromfile) read the same bytes.  Native
 * byte order, all fields 8 bytes:
 *   CSR: "GLYCSR01", nrows, ncols, nnz, rowptr[nrows + 1], colidx[nnz]
 *        (int64, sorted and unique within a row), vals[nnz] (double)
 *   COO: "GLYCOO01", order, nnz, dims[order], coords[nnz * order] (int64,
 *        entry after entry, sorted), vals[nnz] (double)
 */
#define BENCH_CSR_MAGIC "GLYCSR01"
#define BENCH_COO_MAGIC "GLYCOO01"

typedef struct BenchCsr {
  int64_t nrows, ncols, nnz;
  int64_t *ptr, *idx;
  double *val;
} BenchCsr;

typedef struct BenchCoo {
  int64_t order, nnz, dims[8];
  int64_t *coords;
  double *val;
} BenchCoo;

BENCH_UNUSED
static void bench_csr_free(BenchCsr *m) {
  free(m->ptr);
  free(m->idx);
  free(m->val);
  memset(m, 0, sizeof *m);
}

BENCH_UNUSED
static void bench_coo_free(BenchCoo *t) {
  free(t->coords);
  free(t->val);
  memset(t, 0, sizeof *t);
}

/* Allocates *m's arrays (malloc()); 0 on success, -1 when out of memory. */
BENCH_UNUSED
static int bench_csr_alloc(BenchCsr *m, int64_t nrows, int64_t ncols,
                           int64_t nnz) {
  m->nrows = nrows;
  m->ncols = ncols;
  m->nnz = nnz;
  m->ptr = malloc((size_t)(nrows + 1) * sizeof *m->ptr);
  m->idx = malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof *m->idx);
  m->val = malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof *m->val);
  if (!m->ptr || !m->idx || !m->val) {
    bench_csr_free(m);
    return -1;
  }
  return 0;
}

BENCH_UNUSED
static int bench_write_all(FILE *f, const void *p, size_t size, size_t n) {
  return fwrite(p, size, n, f) == n ? 0 : -1;
}

BENCH_UNUSED
static int bench_read_all(FILE *f, void *p, size_t size, size_t n) {
  return fread(p, size, n, f) == n ? 0 : -1;
}

BENCH_UNUSED
static int bench_csr_write(const char *path, const BenchCsr *m) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return -1;
  int64_t head[3] = {m->nrows, m->ncols, m->nnz};
  int bad = bench_write_all(f, BENCH_CSR_MAGIC, 1, 8) ||
            bench_write_all(f, head, 8, 3) ||
            bench_write_all(f, m->ptr, 8, (size_t)m->nrows + 1) ||
            bench_write_all(f, m->idx, 8, (size_t)m->nnz) ||
            bench_write_all(f, m->val, 8, (size_t)m->nnz);
  return fclose(f) || bad ? -1 : 0;
}

BENCH_UNUSED
static int bench_coo_write(const char *path, const BenchCoo *t) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return -1;
  int64_t head[2] = {t->order, t->nnz};
  int bad = bench_write_all(f, BENCH_COO_MAGIC, 1, 8) ||
            bench_write_all(f, head, 8, 2) ||
            bench_write_all(f, t->dims, 8, (size_t)t->order) ||
            bench_write_all(f, t->coords, 8, (size_t)(t->nnz * t->order)) ||
            bench_write_all(f, t->val, 8, (size_t)t->nnz);
  return fclose(f) || bad ? -1 : 0;
}

/* The magic of an operand file ("" when unreadable). */
BENCH_UNUSED
static void bench_file_magic(const char *path, char magic[9]) {
  magic[0] = '\0';
  FILE *f = fopen(path, "rb");
  if (!f)
    return;
  if (fread(magic, 1, 8, f) == 8)
    magic[8] = '\0';
  else
    magic[0] = '\0';
  fclose(f);
}

BENCH_UNUSED
static int bench_csr_read(const char *path, BenchCsr *m) {
  memset(m, 0, sizeof *m);
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  char magic[8];
  int64_t head[3];
  int bad = bench_read_all(f, magic, 1, 8) ||
            memcmp(magic, BENCH_CSR_MAGIC, 8) ||
            bench_read_all(f, head, 8, 3) || head[0] < 0 || head[1] < 0 ||
            head[2] < 0 || bench_csr_alloc(m, head[0], head[1], head[2]) ||
            bench_read_all(f, m->ptr, 8, (size_t)m->nrows + 1) ||
            bench_read_all(f, m->idx, 8, (size_t)m->nnz) ||
            bench_read_all(f, m->val, 8, (size_t)m->nnz);
  fclose(f);
  if (bad)
    bench_csr_free(m);
  return bad ? -1 : 0;
}

BENCH_UNUSED
static int bench_coo_read(const char *path, BenchCoo *t) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  char magic[8];
  int64_t head[2];
  int bad = bench_read_all(f, magic, 1, 8) ||
            memcmp(magic, BENCH_COO_MAGIC, 8) ||
            bench_read_all(f, head, 8, 2) || head[0] < 1 || head[0] > 8 ||
            head[1] < 0;
  if (!bad) {
    t->order = head[0];
    t->nnz = head[1];
    t->coords = malloc((size_t)(t->nnz * t->order + 1) * sizeof *t->coords);
    t->val = malloc((size_t)(t->nnz + 1) * sizeof *t->val);
    bad = !t->coords || !t->val ||
          bench_read_all(f, t->dims, 8, (size_t)t->order) ||
          bench_read_all(f, t->coords, 8, (size_t)(t->nnz * t->order)) ||
          bench_read_all(f, t->val, 8, (size_t)t->nnz);
  }
  fclose(f);
  if (bad)
    bench_coo_free(t);
  return bad ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Dense operands, the same values in every tool                       */
/* ------------------------------------------------------------------ */

#define BENCH_K 32    /* columns of the SDDMM factors U and V */
#define BENCH_RANK 16 /* columns of the MTTKRP factors C and D */

/* SpMV's x[j]. */
BENCH_UNUSED
static double bench_x_value(int64_t j) { return 1.0 + (double)(j % 7) / 8.0; }

/* A factor F[i, k] = ((a i + b k) mod 13) / 13 - 0.5: U (a, b) = (31, 17),
 * V (7, 5), MTTKRP's C (7, 5) and D (3, 11). */
BENCH_UNUSED
static double bench_factor_value(int64_t i, int64_t k, int64_t a, int64_t b) {
  return (double)((i * a + k * b) % 13) / 13.0 - 0.5;
}

/* A dense row-major rows x cols factor (malloc()ed; NULL when out of
 * memory). */
BENCH_UNUSED
static double *bench_factor(int64_t rows, int64_t cols, int64_t a, int64_t b) {
  double *v = malloc((size_t)(rows * cols + 1) * sizeof *v);
  if (v)
    for (int64_t i = 0; i < rows; i++)
      for (int64_t k = 0; k < cols; k++)
        v[i * cols + k] = bench_factor_value(i, k, a, b);
  return v;
}

/* ------------------------------------------------------------------ */
/* Checksums: compared between the tools                               */
/* ------------------------------------------------------------------ */

/* sum of the entries, a position-weighted sum (an entry at a wrong place
 * changes it) and the sum of magnitudes (the scale of rounding errors).
 * The weight of entry (i, j) of a matrix with ncols columns is
 * 1 + (i * ncols + j) mod 11; of entry i of a vector, 1 + i mod 11. */
typedef struct BenchSums {
  double sum, wsum, asum;
  int64_t count;
} BenchSums;

BENCH_UNUSED
static void bench_sums_add(BenchSums *s, int64_t i, int64_t j, int64_t ncols,
                           double v) {
  s->sum += v;
  s->wsum += v * (double)(1 + (i * ncols + j) % 11);
  s->asum += v < 0 ? -v : v;
  s->count++;
}

/* ------------------------------------------------------------------ */
/* The server protocol                                                 */
/* ------------------------------------------------------------------ */
/*
 * The kernel servers read one command a line on stdin and answer one line
 * on stdout, "ok KEY=VALUE ..." or "error MESSAGE", flushed at once:
 *   load KEY FILE               read an operand file under a name
 *   prep ID KERNEL KEY [ARGS]   make job ID (first call timed: "first_ms")
 *   run ID N                    N whole calls, each timed with a wall
 *                               clock: "call_ms" (median) and checksums
 *   free ID | quit
 */
#define BENCH_MAX_ARGS 16

/* Split a command line into at most max blank-separated words; returns
 * how many. */
BENCH_UNUSED
static int bench_split(char *line, char **argv, int max) {
  int n = 0;
  for (char *s = strtok(line, " \t\r\n"); s && n < max;
       s = strtok(NULL, " \t\r\n"))
    argv[n++] = s;
  return n;
}

/* An error reply: one line, no newlines inside. */
BENCH_UNUSED
static void bench_reply_error(const char *msg) {
  char buf[1200];
  snprintf(buf, sizeof buf, "%s", msg);
  for (char *p = buf; *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  printf("error %s\n", buf);
  fflush(stdout);
}

#endif /* GALLEY_BENCHUTIL_H */
