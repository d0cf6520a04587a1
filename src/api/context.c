/*
 * context.c -- galley_context: the options programs are made with.
 *
 * A context is a plain record of options with setters that check their
 * values; galley_context_program_parse / _read make a program and copy
 * the options into it through the program's own setters, so a program
 * never points back at its context (the context may be freed first) and
 * contexts share nothing (one per thread is safe).
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "rt_internal.h"
#include "api_internal.h"

struct galley_context {
  galley_backend backend;     /* GALLEY_BACKEND_DEFAULT = tcc when built in */
  galley_planner planner;
  galley_estimator estimator;
  galley_search search;
  char *cache_dir;            /* owned copy, NULL = the default */
  int log_level;              /* 0..3, 0 = no log */
  FILE *log;                  /* borrowed; NULL when log_level is 0 */
  int64_t memory_budget;      /* bytes, 0 = the planner's default */
  int threads;                /* as set, 0 = the default */
  GalleyPool *pool;           /* shared with the programs made from the
                                 context (each holds a reference); its
                                 threads start with the first run that
                                 splits a kernel into blocks */
  int fcomm;                  /* MPI communicator (Fortran handle) or
                                 GALLEY_NO_COMM */
  api_dist_attach_fn attach;  /* gives it to each new program, or NULL */
};

/* The error of a setter called on a NULL context. */
static galley_status no_context(const char *fn, galley_error *err) {
  return rt_error(err, GALLEY_EINVAL, "%s: the context is NULL", fn);
}

galley_status galley_context_create(galley_context **out, galley_error *err) {
  rt_error_clear(err);
  if (!out)
    return rt_error(err, GALLEY_EINVAL, "galley_context_create: out is NULL");
  *out = calloc(1, sizeof **out); /* zero is every default but fcomm */
  if (*out)
    (*out)->fcomm = GALLEY_NO_COMM;
  if (*out && !((*out)->pool = pool_new(0)))
    *out = galley_context_free(*out);
  if (!*out)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  return GALLEY_OK;
}

galley_context *galley_context_free(galley_context *ctx) {
  if (ctx) {
    free(ctx->cache_dir);
    pool_unref(ctx->pool); /* programs may hold it longer */
  }
  free(ctx);
  return NULL;
}

galley_status galley_context_set_backend(galley_context *ctx,
                                         galley_backend backend,
                                         galley_error *err) {
  rt_error_clear(err);
  if (!ctx)
    return no_context("galley_context_set_backend", err);
  galley_status st = api_check_backend(backend, err);
  if (st == GALLEY_OK)
    ctx->backend = backend;
  return st;
}

galley_backend galley_context_backend(const galley_context *ctx) {
  return ctx ? ctx->backend : GALLEY_BACKEND_DEFAULT;
}

galley_status galley_context_set_planner(galley_context *ctx,
                                         galley_planner planner,
                                         galley_error *err) {
  rt_error_clear(err);
  if (!ctx)
    return no_context("galley_context_set_planner", err);
  if (planner != GALLEY_PLANNER_COST && planner != GALLEY_PLANNER_SIMPLE)
    return rt_error(err, GALLEY_EINVAL, "unknown planner %d", (int)planner);
  ctx->planner = planner;
  return GALLEY_OK;
}

galley_planner galley_context_planner(const galley_context *ctx) {
  return ctx ? ctx->planner : GALLEY_PLANNER_COST;
}

galley_status galley_context_set_estimator(galley_context *ctx,
                                           galley_estimator estimator,
                                           galley_error *err) {
  rt_error_clear(err);
  if (!ctx)
    return no_context("galley_context_set_estimator", err);
  if (estimator != GALLEY_ESTIMATOR_CHAIN &&
      estimator != GALLEY_ESTIMATOR_UNIFORM)
    return rt_error(err, GALLEY_EINVAL, "unknown estimator %d",
                    (int)estimator);
  ctx->estimator = estimator;
  return GALLEY_OK;
}

galley_estimator galley_context_estimator(const galley_context *ctx) {
  return ctx ? ctx->estimator : GALLEY_ESTIMATOR_CHAIN;
}

galley_status galley_context_set_search(galley_context *ctx,
                                        galley_search search,
                                        galley_error *err) {
  rt_error_clear(err);
  if (!ctx)
    return no_context("galley_context_set_search", err);
  if (search != GALLEY_SEARCH_GREEDY && search != GALLEY_SEARCH_EXACT)
    return rt_error(err, GALLEY_EINVAL, "unknown search %d", (int)search);
  ctx->search = search;
  return GALLEY_OK;
}

galley_search galley_context_search(const galley_context *ctx) {
  return ctx ? ctx->search : GALLEY_SEARCH_GREEDY;
}

galley_status galley_context_set_cache_dir(galley_context *ctx,
                                           const char *dir,
                                           galley_error *err) {
  rt_error_clear(err);
  if (!ctx)
    return no_context("galley_context_set_cache_dir", err);
  char *copy = NULL;
  if (dir && !(copy = strdup(dir)))
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  free(ctx->cache_dir);
  ctx->cache_dir = copy;
  return GALLEY_OK;
}

const char *galley_context_cache_dir(const galley_context *ctx) {
  return ctx ? ctx->cache_dir : NULL;
}

galley_status galley_context_set_log(galley_context *ctx, int level, FILE *f,
                                     galley_error *err) {
  rt_error_clear(err);
  if (!ctx)
    return no_context("galley_context_set_log", err);
  if (level < 0 || level > 3)
    return rt_error(err, GALLEY_EINVAL, "log level %d is not in 0..3", level);
  ctx->log_level = f ? level : 0;
  ctx->log = ctx->log_level ? f : NULL;
  return GALLEY_OK;
}

int galley_context_log_level(const galley_context *ctx) {
  return ctx ? ctx->log_level : 0;
}

FILE *galley_context_log_file(const galley_context *ctx) {
  return ctx ? ctx->log : NULL;
}

galley_status galley_context_set_memory_budget(galley_context *ctx,
                                               int64_t bytes,
                                               galley_error *err) {
  rt_error_clear(err);
  if (!ctx)
    return no_context("galley_context_set_memory_budget", err);
  if (bytes < 0)
    return rt_error(err, GALLEY_EINVAL, "negative memory budget %lld",
                    (long long)bytes);
  ctx->memory_budget = bytes;
  return GALLEY_OK;
}

int64_t galley_context_memory_budget(const galley_context *ctx) {
  return ctx ? ctx->memory_budget : 0;
}

galley_status galley_context_set_threads(galley_context *ctx, int n,
                                         galley_error *err) {
  rt_error_clear(err);
  if (!ctx)
    return no_context("galley_context_set_threads", err);
  if (n < 0 || n > POOL_MAX_THREADS)
    return rt_error(err, GALLEY_EINVAL, "thread count %d is not in 0..%d",
                    n, POOL_MAX_THREADS);
  if (n == ctx->threads)
    return GALLEY_OK;
  /* programs already made keep the pool they share */
  GalleyPool *pool = pool_new(n);
  if (!pool)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  pool_unref(ctx->pool);
  ctx->pool = pool;
  ctx->threads = n;
  return GALLEY_OK;
}

int galley_context_threads(const galley_context *ctx) {
  return ctx ? pool_threads(ctx->pool) : pool_default_threads();
}

void api_context_set_comm(galley_context *ctx, int fcomm,
                          api_dist_attach_fn attach) {
  ctx->fcomm = attach ? fcomm : GALLEY_NO_COMM;
  ctx->attach = attach;
}

int galley_context_mpi_comm(const galley_context *ctx) {
  return ctx ? ctx->fcomm : GALLEY_NO_COMM;
}

#ifndef GALLEY_HAVE_MPI
/* Without MPI (configure found no mpicc) no communicator can be set;
 * MPI builds define this in src/dist/api_dist.c. */
galley_status galley_context_set_mpi_comm(galley_context *ctx, int fcomm,
                                          galley_error *err) {
  rt_error_clear(err);
  if (!ctx)
    return no_context("galley_context_set_mpi_comm", err);
  if (fcomm == GALLEY_NO_COMM) {
    api_context_set_comm(ctx, GALLEY_NO_COMM, NULL);
    return GALLEY_OK;
  }
  return rt_error(err, GALLEY_EINVAL, "galley_context_set_mpi_comm: this "
                  "libgalley was built without MPI");
}
#endif

/* Copy the context's options into a new program; on failure free it. */
static galley_status apply(const galley_context *ctx, galley_program **out,
                           galley_error *err) {
  galley_program *p = *out;
  galley_program_set_planner(p, ctx->planner);
  galley_program_set_estimator(p, ctx->estimator);
  galley_program_set_search(p, ctx->search);
  galley_program_set_log(p, ctx->log_level, ctx->log);
  api_program_use_pool(p, ctx->pool, ctx->threads);
  galley_status st = galley_program_set_backend(p, ctx->backend, err);
  if (st == GALLEY_OK)
    st = galley_program_set_cache_dir(p, ctx->cache_dir, err);
  if (st == GALLEY_OK)
    st = galley_program_set_memory_budget(p, ctx->memory_budget, err);
  if (st == GALLEY_OK && ctx->attach)
    st = ctx->attach(p, ctx->fcomm, err);
  if (st != GALLEY_OK)
    *out = galley_program_free(p);
  return st;
}

galley_status galley_context_program_parse(const galley_context *ctx,
                                           const char *filename,
                                           const char *source, size_t length,
                                           galley_program **out,
                                           char **diagnostics,
                                           galley_error *err) {
  rt_error_clear(err);
  if (diagnostics)
    *diagnostics = NULL;
  if (!out)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_context_program_parse: out is NULL");
  *out = NULL;
  if (!ctx || !source)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_context_program_parse: %s is NULL",
                    ctx ? "the source" : "the context");
  galley_status st = galley_program_parse(filename, source, length, out,
                                          diagnostics, err);
  return st == GALLEY_OK ? apply(ctx, out, err) : st;
}

galley_status galley_context_program_read(const galley_context *ctx,
                                          const char *path,
                                          galley_program **out,
                                          char **diagnostics,
                                          galley_error *err) {
  rt_error_clear(err);
  if (diagnostics)
    *diagnostics = NULL;
  if (!out)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_context_program_read: out is NULL");
  *out = NULL;
  if (!ctx || !path)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_context_program_read: %s is NULL",
                    ctx ? "the path" : "the context");
  galley_status st = galley_program_read(path, out, diagnostics, err);
  return st == GALLEY_OK ? apply(ctx, out, err) : st;
}
