/*
 * bench_stream.c -- a STREAM-like triad, the memory-bandwidth yardstick of
 * the kernel benchmarks (targets.md: "SpMV ... at >= 75% of the triad
 * figure").  Built by `make benchmarks`; run by `benchmarks/run stream`
 * and at the start of `benchmarks/run kernels`.
 *
 *   bench_stream [-n N] [-r REPS] [-t THREADS[,THREADS...]] [-h]
 *
 * a[i] = b[i] + s * c[i] over three arrays of N doubles (default 50M:
 * 400 MB each, 1.2 GB in all, far beyond the 105 MiB L3 of the machines
 * we run on), REPS times (default 10) after one untimed warm-up pass.
 * With THREADS > 1 the arrays are split in equal slices, one per thread
 * (pthreads), each slice first touched by its own thread, and the threads
 * meet at a barrier before and after every pass.  Bytes per pass are
 * counted as STREAM does: 3 * 8 * N (the write-allocate read of a is not
 * counted).  One CSV line per thread count, in the kernels CSV format:
 *
 *   stream,triad-Tt,triad,N,reps,median_ms,min_ms,bytes,best X GB/s; median Y GB/s; threads T
 *
 * The best (min-time) pass is the STREAM figure.  The result is checked
 * (every a[i] equals the expected value); a wrong value exits with 1.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchutil.h"

typedef struct Shared {
  double *a, *b, *c;
  int64_t n;
  int nthreads, reps;
  pthread_barrier_t bar;
  double *ms; /* reps + 1 pass times, written by thread 0 */
} Shared;

typedef struct Worker {
  Shared *s;
  int id;
} Worker;

static void *work(void *ud) {
  Worker *w = ud;
  Shared *s = w->s;
  int64_t lo = s->n * w->id / s->nthreads, hi = s->n * (w->id + 1) / s->nthreads;
  double *restrict a = s->a, *restrict b = s->b, *restrict c = s->c;
  for (int64_t i = lo; i < hi; i++) { /* first touch by the owner */
    a[i] = 0;
    b[i] = 1.0 + (double)(i & 7);
    c[i] = 2.0;
  }
  const double scalar = 3.0;
  for (int r = 0; r <= s->reps; r++) { /* pass 0: warm-up */
    pthread_barrier_wait(&s->bar);
    double t0 = w->id == 0 ? now_ms() : 0;
    for (int64_t i = lo; i < hi; i++)
      a[i] = b[i] + scalar * c[i];
    pthread_barrier_wait(&s->bar);
    if (w->id == 0)
      s->ms[r] = now_ms() - t0;
  }
  return NULL;
}

static int triad(int64_t n, int reps, int nthreads) {
  Shared s = {0};
  s.n = n;
  s.nthreads = nthreads;
  s.reps = reps;
  s.ms = calloc((size_t)reps + 1, sizeof *s.ms);
  if (posix_memalign((void **)&s.a, 64, (size_t)n * sizeof(double)) ||
      posix_memalign((void **)&s.b, 64, (size_t)n * sizeof(double)) ||
      posix_memalign((void **)&s.c, 64, (size_t)n * sizeof(double)) || !s.ms) {
    fprintf(stderr, "bench_stream: out of memory for 3 x %lld doubles\n",
            (long long)n);
    return 1;
  }
  pthread_barrier_init(&s.bar, NULL, (unsigned)nthreads);
  pthread_t *th = calloc((size_t)nthreads, sizeof *th);
  Worker *ws = calloc((size_t)nthreads, sizeof *ws);
  for (int t = 0; t < nthreads; t++) {
    ws[t] = (Worker){&s, t};
    if (t > 0)
      pthread_create(&th[t], NULL, work, &ws[t]);
  }
  work(&ws[0]);
  for (int t = 1; t < nthreads; t++)
    pthread_join(th[t], NULL);
  pthread_barrier_destroy(&s.bar);
  int bad = 0;
  for (int64_t i = 0; i < n && !bad; i++)
    bad = s.a[i] != 1.0 + (double)(i & 7) + 6.0;
  if (bad)
    fprintf(stderr, "bench_stream: WRONG triad result\n");
  double *ms = s.ms + 1;
  qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
  double med = reps % 2 ? ms[reps / 2] : (ms[reps / 2 - 1] + ms[reps / 2]) / 2;
  double bytes = 3.0 * 8.0 * (double)n;
  printf("stream,triad-%dt,triad,%lld,%d,%.3f,%.3f,%.0f,best %.2f GB/s; "
         "median %.2f GB/s; threads %d\n",
         nthreads, (long long)n, reps, med, ms[0], bytes,
         bytes / (ms[0] * 1e6), bytes / (med * 1e6), nthreads);
  fflush(stdout);
  free(s.a);
  free(s.b);
  free(s.c);
  free(s.ms);
  free(th);
  free(ws);
  return bad;
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_stream [-n N] [-r REPS] [-t THREADS[,THREADS...]]\n");
}

int main(int argc, char **argv) {
  int64_t n = 50000000;
  int reps = 10, c;
  const char *threads = "1";
  while ((c = getopt(argc, argv, "n:r:t:h")) != -1) {
    switch (c) {
    case 'n': n = atoll(optarg); break;
    case 'r': reps = atoi(optarg); break;
    case 't': threads = optarg; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (n < 1000 || reps < 1) {
    usage(stderr);
    return 2;
  }
  int status = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", threads);
  for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
    int nt = atoi(t);
    if (nt < 1 || nt > 256) {
      usage(stderr);
      return 2;
    }
    status |= triad(n, reps, nt);
  }
  return status;
}
