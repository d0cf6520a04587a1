/*
 * pool.c -- the library's thread pool (see pool.h).
 *
 * Workers sleep on `work` until a job has blocks left; each claims the
 * next block under the mutex (blocks are coarse, thousands of entries,
 * so one lock per block costs nothing measurable) and runs it unlocked.
 * The submitter claims blocks too, then waits on `done` until no worker
 * is inside a block of its job.  `busy` (under `submit`) keeps a second
 * submitter out; it runs its job itself instead of waiting.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "pool.h"

struct GalleyPool {
  int nthreads;        /* as made, >= 1 */
  pthread_mutex_t mu;  /* everything below */
  pthread_cond_t work; /* a job was posted, or stop */
  pthread_cond_t done; /* running dropped to 0 */
  int refs;
  int started;         /* workers started (0: not yet, -1: failed) */
  int nworkers;        /* threads running worker_main */
  pthread_t *tid;
  int stop;
  int busy;            /* a job is being run through the pool */
  /* the current job (fn NULL: none) */
  pool_task fn;
  void *ctx;
  int64_t nblocks, next;
  int running;         /* workers inside a block of the job */
};

typedef struct WorkerStart {
  GalleyPool *p;
  int w;
} WorkerStart;

int pool_default_threads(void) {
  const char *s = getenv("GALLEY_THREADS");
  if (s && *s) {
    char *end;
    long n = strtol(s, &end, 10);
    if (*end == '\0' && n >= 1)
      return n > POOL_MAX_THREADS ? POOL_MAX_THREADS : (int)n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1)
    return 1;
  return n > POOL_MAX_THREADS ? POOL_MAX_THREADS : (int)n;
}

GalleyPool *pool_new(int nthreads) {
  GalleyPool *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  if (nthreads < 1)
    nthreads = pool_default_threads();
  p->nthreads = nthreads > POOL_MAX_THREADS ? POOL_MAX_THREADS : nthreads;
  p->refs = 1;
  if (pthread_mutex_init(&p->mu, NULL) != 0) {
    free(p);
    return NULL;
  }
  if (pthread_cond_init(&p->work, NULL) != 0) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
  }
  if (pthread_cond_init(&p->done, NULL) != 0) {
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
  }
  return p;
}

GalleyPool *pool_ref(GalleyPool *p) {
  if (p) {
    pthread_mutex_lock(&p->mu);
    p->refs++;
    pthread_mutex_unlock(&p->mu);
  }
  return p;
}

int pool_threads(const GalleyPool *p) { return p ? p->nthreads : 1; }

/* Claim the next block of the current job (mutex held); 0 when none. */
static int claim(GalleyPool *p, int64_t *b) {
  if (!p->fn || p->next >= p->nblocks)
    return 0;
  *b = p->next++;
  p->running++;
  return 1;
}

/* A block ran (mutex held): wake the submitter when it was the last. */
static void finished(GalleyPool *p) {
  if (--p->running == 0 && p->next >= p->nblocks)
    pthread_cond_broadcast(&p->done);
}

static void *worker_main(void *arg) {
  WorkerStart ws = *(WorkerStart *)arg;
  free(arg);
  GalleyPool *p = ws.p;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    int64_t b;
    while (!p->stop && !claim(p, &b))
      pthread_cond_wait(&p->work, &p->mu);
    if (p->stop)
      break;
    pool_task fn = p->fn;
    void *ctx = p->ctx;
    pthread_mutex_unlock(&p->mu);
    fn(ctx, b, ws.w);
    pthread_mutex_lock(&p->mu);
    finished(p);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* Start the workers once (mutex held); 1 when at least one runs. */
static int start_workers(GalleyPool *p) {
  if (p->started)
    return p->nworkers > 0;
  p->started = 1;
  p->tid = calloc((size_t)p->nthreads, sizeof *p->tid);
  if (!p->tid)
    return 0;
  for (int w = 1; w < p->nthreads; w++) {
    WorkerStart *ws = malloc(sizeof *ws);
    if (!ws)
      break;
    ws->p = p;
    ws->w = w;
    if (pthread_create(&p->tid[p->nworkers], NULL, worker_main, ws) != 0) {
      free(ws);
      break; /* fewer threads: still correct */
    }
    p->nworkers++;
  }
  return p->nworkers > 0;
}

static void run_serially(int64_t nblocks, pool_task fn, void *ctx) {
  for (int64_t b = 0; b < nblocks; b++)
    fn(ctx, b, 0);
}

void pool_run(GalleyPool *p, int64_t nblocks, pool_task fn, void *ctx) {
  if (!p || p->nthreads <= 1 || nblocks <= 1) {
    run_serially(nblocks, fn, ctx);
    return;
  }
  pthread_mutex_lock(&p->mu);
  if (p->busy || !start_workers(p)) {
    pthread_mutex_unlock(&p->mu);
    run_serially(nblocks, fn, ctx);
    return;
  }
  p->busy = 1;
  p->fn = fn;
  p->ctx = ctx;
  p->nblocks = nblocks;
  p->next = 0;
  pthread_cond_broadcast(&p->work);
  int64_t b;
  while (claim(p, &b)) {
    pthread_mutex_unlock(&p->mu);
    fn(ctx, b, 0);
    pthread_mutex_lock(&p->mu);
    finished(p);
  }
  while (p->running > 0)
    pthread_cond_wait(&p->done, &p->mu);
  p->fn = NULL;
  p->ctx = NULL;
  p->busy = 0;
  pthread_mutex_unlock(&p->mu);
}

GalleyPool *pool_unref(GalleyPool *p) {
  if (!p)
    return NULL;
  pthread_mutex_lock(&p->mu);
  int last = --p->refs == 0;
  if (last) {
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
  }
  pthread_mutex_unlock(&p->mu);
  if (!last)
    return NULL;
  for (int k = 0; k < p->nworkers; k++)
    pthread_join(p->tid[k], NULL);
  free(p->tid);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->work);
  pthread_mutex_destroy(&p->mu);
  free(p);
  return NULL;
}
