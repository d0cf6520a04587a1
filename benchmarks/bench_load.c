/*
 * bench_load.c -- times loading and format conversion of matrix / tensor
 * files with libgalley.  Built by `make benchmarks` in a build directory;
 * run by benchmarks/run, which compares it with benchmarks/baseline_scipy.py.
 *
 *   bench_load [-r REPS] [-b MAX_BYTEMAP_POSITIONS] [-n] FILE...
 *
 * For every file, each operation runs REPS times (default 5):
 *   read_csr       galley_tensor_read into the default format (CSR for
 *                  matrices: dense:0,list:1)
 *   to_csc         convert CSR -> dense:1,list:0 (transpose)
 *   to_hash        convert CSR -> dense:0,hash:1
 *   to_bytemap     convert CSR -> dense:0,bytemap:1 (skipped when the
 *                  bytemap would need more than MAX positions: it stores a
 *                  flag byte and a value per (row, column) position)
 *   to_coo         galley_tensor_to_coo (export, sorted, coords + values)
 *   degree_stats   galley_tensor_degree_stats
 * and one line per operation is printed:
 *   tool,file,op,nnz,reps,median_ms,min_ms,bytes,note
 * where bytes is the memory of the result (tensor arrays, or the exported
 * COO arrays).  A last line per file, op peak_rss, gives the process's
 * peak resident set size so far in `bytes`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "galley.h"

static void report(const char *file, const char *op, int64_t nnz, double *ms,
                   int reps, int64_t bytes, const char *note) {
  char nb[256];
  qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
  double median =
      reps % 2 ? ms[reps / 2] : (ms[reps / 2 - 1] + ms[reps / 2]) / 2;
  printf("galleyc,%s,%s,%lld,%d,%.3f,%.3f,%lld,%s\n", base_name(file), op,
         (long long)nnz, reps, median, ms[0], (long long)bytes,
         clean(note, nb, sizeof nb));
  fflush(stdout);
}

static void report_skip(const char *file, const char *op, int64_t nnz,
                        const char *note) {
  char nb[256];
  printf("galleyc,%s,%s,%lld,0,,,,%s\n", base_name(file), op, (long long)nnz,
         clean(note, nb, sizeof nb));
  fflush(stdout);
}

static void fail(const char *file, const char *op, const galley_error *err) {
  fprintf(stderr, "bench_load: %s: %s: %s\n", file, op, err->msg);
  printf("galleyc,%s,%s,,0,,,,error: %s\n", base_name(file), op,
         galley_status_name(err->status));
  fflush(stdout);
}

/* Time galley_tensor_convert(t -> text) reps times. */
static void bench_convert(const char *file, const galley_tensor *t,
                          const char *op, const char *text, int reps,
                          int64_t max_positions, double *ms) {
  int order = galley_tensor_order(t);
  int64_t nnz = galley_tensor_nnz(t);
  galley_format fmt;
  galley_error err;
  if (galley_format_parse(text, order, &fmt, &err) != GALLEY_OK) {
    fail(file, op, &err);
    return;
  }
  /* A bytemap (or dense) level below the root holds prod(dims) positions:
   * refuse when that would not fit in memory in any reasonable way. */
  int needs_positions = 0;
  for (int l = 1; l < order; l++)
    if (fmt.kinds[l] == GALLEY_BYTEMAP || fmt.kinds[l] == GALLEY_DENSE)
      needs_positions = 1;
  if (needs_positions) {
    double positions = 1;
    for (int m = 0; m < order; m++)
      positions *= (double)galley_tensor_dim(t, m);
    if (positions > (double)max_positions) {
      char note[160];
      snprintf(
          note, sizeof note,
          "skipped: %.3g positions (%.1f GB of flags and values) > -b %lld",
          positions, positions * 9 / 1e9, (long long)max_positions);
      report_skip(file, op, nnz, note);
      return;
    }
  }
  int64_t bytes = 0;
  for (int r = 0; r < reps; r++) {
    galley_tensor *u = NULL;
    double t0 = now_ms();
    galley_status st = galley_tensor_convert(t, &fmt, &u, &err);
    ms[r] = now_ms() - t0;
    if (st != GALLEY_OK) {
      fail(file, op, &err);
      return;
    }
    bytes = galley_tensor_bytes(u);
    galley_tensor_free(u);
  }
  report(file, op, nnz, ms, reps, bytes, text);
}

static int bench_file(const char *file, int reps, int64_t max_positions) {
  double *ms = malloc((size_t)reps * sizeof *ms);
  if (!ms)
    return 1;
  galley_error err;
  galley_tensor *t = NULL;

  /* read into the default format (CSR for matrices) */
  for (int r = 0; r < reps; r++) {
    galley_tensor *u = NULL;
    double t0 = now_ms();
    galley_status st =
        galley_tensor_read(file, GALLEY_FILE_AUTO, NULL, &u, &err);
    ms[r] = now_ms() - t0;
    if (st != GALLEY_OK) {
      fail(file, "read_csr", &err);
      galley_tensor_free(t);
      free(ms);
      return 1;
    }
    galley_tensor_free(t);
    t = u;
  }
  int64_t nnz = galley_tensor_nnz(t);
  galley_format f;
  char ftext[256];
  galley_tensor_format(t, &f);
  galley_format_print(&f, ftext, sizeof ftext);
  report(file, "read_csr", nnz, ms, reps, galley_tensor_bytes(t), ftext);

  if (galley_tensor_order(t) == 2) {
    bench_convert(file, t, "to_csc", "dense:1,list:0", reps, max_positions, ms);
    bench_convert(file, t, "to_hash", "dense:0,hash:1", reps, max_positions,
                  ms);
    bench_convert(file, t, "to_bytemap", "dense:0,bytemap:1", reps,
                  max_positions, ms);
  }

  /* export to sorted COO */
  int64_t bytes = 0;
  for (int r = 0; r < reps; r++) {
    int64_t n = 0, *coords = NULL;
    double *vals = NULL;
    double t0 = now_ms();
    galley_status st = galley_tensor_to_coo(t, GALLEY_EXPORT_SKIP_FILL, &n,
                                            &coords, &vals, &err);
    ms[r] = now_ms() - t0;
    if (st != GALLEY_OK) {
      fail(file, "to_coo", &err);
      break;
    }
    bytes =
        n * (int64_t)(galley_tensor_order(t) * sizeof *coords + sizeof *vals);
    free(coords);
    free(vals);
    if (r == reps - 1)
      report(file, "to_coo", nnz, ms, reps, bytes, "");
  }

  /* degree statistics */
  galley_degree_stats *s = malloc(sizeof *s);
  if (s) {
    for (int r = 0; r < reps; r++) {
      double t0 = now_ms();
      galley_status st = galley_tensor_degree_stats(t, s, &err);
      ms[r] = now_ms() - t0;
      if (st != GALLEY_OK) {
        fail(file, "degree_stats", &err);
        break;
      }
      if (r == reps - 1) {
        char note[128];
        if (s->order == 2)
          snprintf(note, sizeof note,
                   "max row degree %lld; max col degree %lld",
                   (long long)s->max_degree[1], (long long)s->max_degree[2]);
        else
          snprintf(note, sizeof note, "order %d", s->order);
        report(file, "degree_stats", nnz, ms, reps, 0, note);
      }
    }
    free(s);
  }

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("galleyc,%s,peak_rss,%lld,,,,%lld,\n", base_name(file), (long long)nnz,
         (long long)ru.ru_maxrss * 1024);
  galley_tensor_free(t);
  free(ms);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_load [-r REPS] [-b MAX_BYTEMAP_POSITIONS] [-n] "
             "FILE...\n"
             "  -r REPS  repetitions of every operation (default 5)\n"
             "  -b N     skip bytemap conversions needing more than N "
             "positions (default 2^27)\n"
             "  -n       no CSV header line\n");
}

int main(int argc, char **argv) {
  int reps = 5, header = 1;
  int64_t max_positions = (int64_t)1 << 27;
  int c;
  while ((c = getopt(argc, argv, "r:b:nh")) != -1) {
    switch (c) {
    case 'r':
      reps = atoi(optarg);
      break;
    case 'b':
      max_positions = atoll(optarg);
      break;
    case 'n':
      header = 0;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (reps < 1 || optind >= argc) {
    usage(stderr);
    return 2;
  }
  if (header)
    printf("tool,file,op,nnz,reps,median_ms,min_ms,bytes,note\n");
  int bad = 0;
  for (int i = optind; i < argc; i++)
    bad |= bench_file(argv[i], reps, max_positions);
  return bad;
}
