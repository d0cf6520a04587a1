/*
 * pool.h -- the library's thread pool (pthreads), on which the executor
 * runs the blocks of a kernel's outermost loop.
 *
 * A pool is made with a thread count and starts no thread until its first
 * job that has more than one block.  It is shared by reference: a context
 * and every program made from it hold one reference each, and the last
 * reference joins the threads.  One job runs at a time; a caller that
 * finds the pool busy (two programs of one context run on two threads)
 * runs its job's blocks itself, in order -- which gives the same results,
 * because a block's result never depends on the thread that computed it.
 *
 * The pool knows nothing of kernels: a job is nblocks calls of one
 * function, each block exactly once, on some thread.  Worker numbers
 * (0 .. pool_threads() - 1; the caller is worker 0) let a job keep
 * per-thread scratch space (a scatter workspace) without locks.
 */
#ifndef GALLEY_POOL_H
#define GALLEY_POOL_H

#include <stdint.h>

typedef struct GalleyPool GalleyPool;

/* One block of a job: block b (0 <= b < nblocks) on worker w. */
typedef void (*pool_task)(void *ctx, int64_t b, int w);

/* A pool of nthreads threads (the caller counts as one; nthreads < 1 is
 * pool_default_threads()), holding one reference, or NULL when out of
 * memory.  No thread is started yet. */
GalleyPool *pool_new(int nthreads);

/* Another reference to p (NULL stays NULL). */
GalleyPool *pool_ref(GalleyPool *p);

/* Drop a reference; the last one stops and joins the threads and frees
 * the pool.  NULL. */
GalleyPool *pool_unref(GalleyPool *p);

/* The thread count the pool was made with (1 for NULL). */
int pool_threads(const GalleyPool *p);

/* Run fn(ctx, b, w) for every b in [0, nblocks) and return when all have
 * returned.  Serially on the caller (w = 0, b in order) when p is NULL,
 * has one thread, the job has one block, the pool is busy, or its threads
 * cannot be started. */
void pool_run(GalleyPool *p, int64_t nblocks, pool_task fn, void *ctx);

/* pool_run, but with `wake` 0 the job is shared only with workers that
 * are still awake (they spin for a while after each job) and no
 * sleeping one is woken: for jobs shorter than a wake-up.  Which thread
 * runs a block never changes its result. */
void pool_run_ex(GalleyPool *p, int64_t nblocks, pool_task fn, void *ctx,
                 int wake);

/* pool_run_ex, but every thread owns a contiguous range of the blocks,
 * thread w [pool_range_start(nblocks, t, w), pool_range_start(nblocks, t,
 * w + 1)) of t = pool_threads(p), and runs it in increasing order; a
 * thread whose range is used up takes the last unclaimed block of the
 * range with the most left.  So a thread's own blocks run in order, one
 * after another, and only taken blocks break the run: a job whose blocks
 * append to per-thread buffers finds thread 0's first blocks already in
 * place.  Serially (all on worker 0, in order) as pool_run. */
void pool_run_owned(GalleyPool *p, int64_t nblocks, pool_task fn, void *ctx,
                    int wake);
/* The first block of thread w's range in pool_run_owned (w = nthreads:
 * nblocks). */
int64_t pool_range_start(int64_t nblocks, int nthreads, int w);
/* Scratch memory kept by the pool between jobs, so that the per-thread
 * buffers of one run (a worker's sink, a scatter workspace) are the pages
 * the last run faulted in, not fresh ones: the caller's allocator returns
 * freed memory of a multithreaded run to the system, and each new page
 * costs a fault and a zeroing.  At most POOL_KEEP blocks of 256 KiB or
 * more, 256 MiB in all, freed with the pool.  Thread-safe.
 *
 * pool_scratch_take: a kept block (its size in *got; the smallest that
 * holds `bytes`, else the largest, which the caller may realloc), or
 * NULL (*got 0) when none is kept or p is NULL.  Its contents are
 * whatever its last user left.
 * pool_scratch_give: keep ptr (a malloc'd block of `bytes`), or free it
 * when the pool keeps enough (or p is NULL). */
void *pool_scratch_take(GalleyPool *p, size_t bytes, size_t *got);
void pool_scratch_give(GalleyPool *p, void *ptr, size_t bytes);
/* The default thread count: $GALLEY_THREADS when it is a number in
 * 1 .. POOL_MAX_THREADS, else the number of online processors. */
int pool_default_threads(void);

/* The largest thread count a pool takes (larger requests are clamped). */
#define POOL_MAX_THREADS 256

#endif /* GALLEY_POOL_H */
