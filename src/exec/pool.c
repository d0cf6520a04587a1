/*
 * pool.c -- the library's thread pool (see pool.h).
 *
 * A job is posted under the mutex and announced by bumping `gen`.  Each
 * thread claims the next block under the mutex (blocks are coarse,
 * thousands of entries, so one lock per block costs nothing measurable)
 * and runs it unlocked; the submitter claims blocks too, then waits until
 * no worker is inside a block of its job.  `busy` (under `mu`) keeps a
 * second submitter out; it runs its job itself instead of waiting.
 *
 * Short kernels (a SpMV of a tenth of a millisecond) are called in tight
 * loops, where a futex wake-up per call -- and a worker that the
 * scheduler runs only after the submitter has nearly finished alone --
 * would eat the second thread's gain.  So both sides spin briefly before
 * they sleep: a worker that finished a job watches `gen` for about
 * POOL_SPIN_NS before it waits on `work`, and the submitter watches
 * `running` before it waits on `done`.  Sleeping threads are counted
 * (`sleepers`, `waiting`), so that nobody makes a wake-up system call
 * when every thread it would wake is awake, and a short job may leave
 * sleeping workers asleep (pool_run_ex).  The fields read while
 * spinning are read and written with atomics (ThreadSanitizer sees them).
 *
 * An owned job (pool_run_owned) deals each thread a contiguous range of
 * the blocks (`lo`, `hi` per thread, under `mu`); a thread takes from the
 * top of the fullest range once its own is done.  Scratch blocks given
 * back after a run (pool_scratch_give) are kept under their own mutex
 * until the next run takes them or the pool is freed.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "pool.h"

/* How long a thread spins before it sleeps: several times a futex
 * round trip and a scheduler wake-up, far below a time slice. */
#define POOL_SPIN_NS 100000

/* Scratch blocks kept between jobs (pool_scratch_take). */
#define POOL_KEEP 16
#define POOL_KEEP_MIN_BYTES ((size_t)1 << 18)
#define POOL_KEEP_MAX_BYTES ((size_t)1 << 28)

typedef struct Kept {
  void *p;
  size_t bytes;
} Kept;

struct GalleyPool {
  int nthreads;        /* as made, >= 1 */
  pthread_mutex_t mu;  /* everything below */
  pthread_cond_t work; /* a job was posted, or stop */
  pthread_cond_t done; /* running dropped to 0 */
  int refs;
  int started;         /* workers started (0: not yet, -1: failed) */
  int nworkers;        /* threads running worker_main */
  pthread_t *tid;
  int stop;            /* atomic: read while spinning */
  int busy;            /* a job is being run through the pool */
  int sleepers;        /* workers waiting on `work` */
  int waiting;         /* the submitter waits on `done` */
  int gen;             /* atomic: bumped by every posted job (wraps) */
  /* the current job (fn NULL: none) */
  pool_task fn;
  void *ctx;
  int64_t nblocks, next;
  int owned;           /* the job's blocks are dealt in ranges (below) */
  int64_t *lo, *hi;    /* per thread: its range's unclaimed blocks */
  int running;         /* atomic: workers inside a block of the job */
  pthread_mutex_t keep_mu; /* the kept scratch blocks */
  Kept keep[POOL_KEEP];
  int nkeep;
  size_t kept_bytes;
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
  if (pthread_mutex_init(&p->keep_mu, NULL) != 0) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
  }
  if (pthread_cond_init(&p->work, NULL) != 0) {
    pthread_mutex_destroy(&p->keep_mu);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
  }
  if (pthread_cond_init(&p->done, NULL) != 0) {
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->keep_mu);
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

static int load_int(const int *x) {
  return __atomic_load_n(x, __ATOMIC_ACQUIRE);
}

/* In an owned job: the next block of thread w's range, else the last
 * unclaimed block of the range with the most left (-1: none). */
static int64_t claim_owned(GalleyPool *p, int w) {
  if (p->lo[w] < p->hi[w])
    return p->lo[w]++;
  int v = -1;
  for (int u = 0; u < p->nthreads; u++)
    if (p->hi[u] > p->lo[u] &&
        (v < 0 || p->hi[u] - p->lo[u] > p->hi[v] - p->lo[v]))
      v = u;
  return v < 0 ? -1 : --p->hi[v];
}

/* Claim the next block of the current job for thread w (mutex held); 0
 * when none. */
static int claim(GalleyPool *p, int w, int64_t *b) {
  if (!p->fn || p->next >= p->nblocks)
    return 0;
  if (p->owned) {
    *b = claim_owned(p, w);
    if (*b < 0)
      return 0;
    p->next++; /* counts the claimed blocks */
  } else {
    *b = p->next++;
  }
  __atomic_add_fetch(&p->running, 1, __ATOMIC_RELEASE);
  return 1;
}

/* A block ran (mutex held): wake the submitter when it was the last and
 * it sleeps. */
static void finished(GalleyPool *p) {
  if (__atomic_sub_fetch(&p->running, 1, __ATOMIC_RELEASE) == 0 &&
      p->next >= p->nblocks && p->waiting)
    pthread_cond_signal(&p->done);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A short pause between two looks at a spun-on word. */
static void spin_pause(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__ __volatile__("pause");
#endif
}

/* Spin (unlocked) until *word differs from `seen` (or, with `unless`
 * set, *unless is set) for at most POOL_SPIN_NS; 1 when it changed.  On
 * an overloaded machine spinning would steal the time slice of the
 * thread it waits for, so every few rounds it yields. */
static int spin_until_changed(const int *word, int seen, const int *unless) {
  int64_t start = 0;
  for (int k = 1;; k++) {
    if (load_int(word) != seen || (unless && load_int(unless)))
      return 1;
    spin_pause();
    if ((k & 255) == 0) {
      int64_t t = now_ns();
      if (!start)
        start = t;
      else if (t - start > POOL_SPIN_NS)
        return 0;
      sched_yield();
    }
  }
}

static void *worker_main(void *arg) {
  WorkerStart ws = *(WorkerStart *)arg;
  free(arg);
  GalleyPool *p = ws.p;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    int64_t b = 0;
    if (!load_int(&p->stop) && !claim(p, ws.w, &b)) {
      /* no block: spin on gen for the next job, then sleep */
      int seen = load_int(&p->gen);
      pthread_mutex_unlock(&p->mu);
      spin_until_changed(&p->gen, seen, &p->stop);
      pthread_mutex_lock(&p->mu);
      while (!load_int(&p->stop) && !claim(p, ws.w, &b)) {
        p->sleepers++;
        pthread_cond_wait(&p->work, &p->mu);
        p->sleepers--;
      }
    }
    if (load_int(&p->stop))
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
  p->lo = calloc((size_t)p->nthreads, sizeof *p->lo);
  p->hi = calloc((size_t)p->nthreads, sizeof *p->hi);
  if (!p->tid || !p->lo || !p->hi)
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

static void pool_run_job(GalleyPool *p, int64_t nblocks, pool_task fn,
                         void *ctx, int wake, int owned);

static void run_serially(int64_t nblocks, pool_task fn, void *ctx) {
  for (int64_t b = 0; b < nblocks; b++)
    fn(ctx, b, 0);
}

void pool_run(GalleyPool *p, int64_t nblocks, pool_task fn, void *ctx) {
  pool_run_ex(p, nblocks, fn, ctx, 1);
}

void pool_run_ex(GalleyPool *p, int64_t nblocks, pool_task fn, void *ctx,
                 int wake) {
  pool_run_job(p, nblocks, fn, ctx, wake, 0);
}

void pool_run_owned(GalleyPool *p, int64_t nblocks, pool_task fn, void *ctx,
                    int wake) {
  pool_run_job(p, nblocks, fn, ctx, wake, 1);
}

/* Deal thread w the blocks [w n / t, (w + 1) n / t) (mutex held). */
static void deal_ranges(GalleyPool *p, int64_t nblocks) {
  for (int w = 0; w < p->nthreads; w++) {
    p->lo[w] = pool_range_start(nblocks, p->nthreads, w);
    p->hi[w] = pool_range_start(nblocks, p->nthreads, w + 1);
  }
}

int64_t pool_range_start(int64_t nblocks, int nthreads, int w) {
  return nblocks * w / nthreads; /* nblocks is far below 2^50 */
}

static void pool_run_job(GalleyPool *p, int64_t nblocks, pool_task fn,
                         void *ctx, int wake, int owned) {
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
  p->owned = owned;
  if (owned)
    deal_ranges(p, nblocks);
  __atomic_add_fetch(&p->gen, 1, __ATOMIC_RELEASE);
  /* spinning workers see gen; only sleeping ones need a system call */
  if (p->sleepers > 0 && wake) {
    if (nblocks - 1 >= p->sleepers)
      pthread_cond_broadcast(&p->work);
    else
      for (int64_t k = 1; k < nblocks; k++)
        pthread_cond_signal(&p->work);
  }
  int64_t b;
  while (claim(p, 0, &b)) {
    pthread_mutex_unlock(&p->mu);
    fn(ctx, b, 0);
    pthread_mutex_lock(&p->mu);
    finished(p);
  }
  if (load_int(&p->running) > 0) {
    /* a worker is inside its last block: spin, then sleep */
    pthread_mutex_unlock(&p->mu);
    int seen = load_int(&p->running);
    while (seen > 0 && spin_until_changed(&p->running, seen, NULL))
      seen = load_int(&p->running);
    pthread_mutex_lock(&p->mu);
    p->waiting = 1;
    while (load_int(&p->running) > 0)
      pthread_cond_wait(&p->done, &p->mu);
    p->waiting = 0;
  }
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
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&p->work);
  }
  pthread_mutex_unlock(&p->mu);
  if (!last)
    return NULL;
  for (int k = 0; k < p->nworkers; k++)
    pthread_join(p->tid[k], NULL);
  free(p->tid);
  free(p->lo);
  free(p->hi);
  for (int k = 0; k < p->nkeep; k++)
    free(p->keep[k].p);
  pthread_mutex_destroy(&p->keep_mu);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->work);
  pthread_mutex_destroy(&p->mu);
  free(p);
  return NULL;
}

void *pool_scratch_take(GalleyPool *p, size_t bytes, size_t *got) {
  *got = 0;
  if (!p || bytes < POOL_KEEP_MIN_BYTES)
    return NULL;
  pthread_mutex_lock(&p->keep_mu);
  /* the smallest block that holds `bytes`, else the largest */
  int best = -1;
  for (int k = 0; k < p->nkeep; k++) {
    size_t b = p->keep[k].bytes, c = best < 0 ? 0 : p->keep[best].bytes;
    if (best < 0 || (b >= bytes ? c < bytes || b < c : c < bytes && b > c))
      best = k;
  }
  void *ptr = NULL;
  if (best >= 0) {
    ptr = p->keep[best].p;
    *got = p->keep[best].bytes;
    p->kept_bytes -= *got;
    p->keep[best] = p->keep[--p->nkeep];
  }
  pthread_mutex_unlock(&p->keep_mu);
  return ptr;
}

void pool_scratch_give(GalleyPool *p, void *ptr, size_t bytes) {
  if (!ptr)
    return;
  if (p && bytes >= POOL_KEEP_MIN_BYTES) {
    pthread_mutex_lock(&p->keep_mu);
    int ok = p->nkeep < POOL_KEEP && p->kept_bytes + bytes <= POOL_KEEP_MAX_BYTES;
    if (ok) {
      p->keep[p->nkeep++] = (Kept){ptr, bytes};
      p->kept_bytes += bytes;
    }
    pthread_mutex_unlock(&p->keep_mu);
    if (ok)
      return;
  }
  free(ptr);
}
