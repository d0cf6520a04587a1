/*
 * program.c -- the public program API of galley.h: parse or read a .tin
 * program, bind its inputs to tensors, run it (planned, compiled to
 * kernels and executed, or with the reference evaluator), and hand out
 * its results.
 *
 * A galley_program wraps the checked internal Program (which owns its
 * arena) with what the API adds: the borrowed input tensors, the result
 * tensors of the last run (owned), the list of outputs, and the last
 * physical plan with its generated source and compiled kernels.  The plan
 * is specialized to the shapes, formats, fills and statistics of the
 * bound data (planning happens at bind time, as in Galley); a run with
 * data that differs in shape, format or fill, or whose nnz moved by more
 * than a factor of 2, plans again, otherwise it reuses the kernels (the
 * re-run rule of galley.h).  The struct lives in api_internal.h, shared
 * with explain.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "aot.h"
#include "api_internal.h"
#include "config.h"
#include "rt_internal.h"


static void clear_error(galley_error *err) {
  if (err)
    memset(err, 0, sizeof *err);
}

/* The outputs: the order of the `output` statement when the front end
 * recorded it, else every query marked as an output, in query order. */
static int collect_outputs(galley_program *gp) {
  const Program *p = gp->prog;
  gp->outputs = calloc((size_t)p->nqueries + 1, sizeof *gp->outputs);
  if (!gp->outputs)
    return -1;
  if (p->outputs) {
    for (int k = 0; k < p->noutputs; k++)
      gp->outputs[gp->noutputs++] = p->outputs[k];
    return 0;
  }
  for (int q = 0; q < p->nqueries; q++)
    if (p->queries[q].is_output)
      gp->outputs[gp->noutputs++] = q;
  return 0;
}

/* Wrap a checked Program (taking it over). */
static galley_status wrap_program(Program *prog, galley_program **out,
                                  galley_error *err) {
  galley_program *gp = calloc(1, sizeof *gp);
  if (gp) {
    gp->prog = prog;
    gp->bound = calloc((size_t)prog->ninputs + 1, sizeof *gp->bound);
    gp->owned = calloc((size_t)prog->ninputs + 1, sizeof *gp->owned);
    gp->results = calloc((size_t)prog->nqueries + 1, sizeof *gp->results);
    gp->key = calloc((size_t)prog->ninputs + 1, sizeof *gp->key);
    gp->actual = calloc((size_t)prog->nqueries + 1, sizeof *gp->actual);
  }
  if (!gp || !gp->bound || !gp->owned || !gp->results || !gp->key || !gp->actual ||
      collect_outputs(gp) != 0) {
    if (gp)
      galley_program_free(gp);
    else
      program_free(prog);
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  *out = gp;
  return GALLEY_OK;
}

galley_status galley_program_parse(const char *filename, const char *source,
                                   size_t length, galley_program **out,
                                   char **diagnostics, galley_error *err) {
  clear_error(err);
  *out = NULL;
  if (diagnostics)
    *diagnostics = NULL;
  Program *prog = NULL;
  galley_status st = front_parse(filename ? filename : "<program>", source,
                                 length, &prog, diagnostics, err);
  if (st != GALLEY_OK)
    return st;
  return wrap_program(prog, out, err);
}

/* Read a whole file into a malloc()ed, NUL-terminated buffer. */
static galley_status read_text(const char *path, char **text, size_t *length,
                               galley_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return rt_error(err, GALLEY_EIO, "%s: error: cannot open: %s", path,
                strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - 1 - n, f);
    if (n < cap - 1)
      break;
    char *bigger = realloc(buf, cap * 2);
    if (!bigger)
      free(buf);
    buf = bigger;
    cap *= 2;
  }
  int bad = buf && ferror(f);
  int saved = errno;
  fclose(f);
  if (!buf)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  if (bad) {
    free(buf);
    return rt_error(err, GALLEY_EIO, "%s: error: cannot read: %s", path,
                strerror(saved));
  }
  buf[n] = '\0';
  *text = buf;
  *length = n;
  return GALLEY_OK;
}

galley_status galley_program_read(const char *path, galley_program **out,
                                  char **diagnostics, galley_error *err) {
  clear_error(err);
  *out = NULL;
  if (diagnostics)
    *diagnostics = NULL;
  char *text = NULL;
  size_t length = 0;
  galley_status st = read_text(path, &text, &length, err);
  if (st != GALLEY_OK)
    return st;
  st = galley_program_parse(path, text, length, out, diagnostics, err);
  free(text); /* front_parse keeps its own copy of the source */
  return st;
}

/* The last run's results, their value arrays kept for the next run (the
 * caller's hold on them ends with it: galley_program_output). */
static void free_results(galley_program *gp) {
  for (int q = 0; q < gp->prog->nqueries; q++)
    gp->results[q] = recycle_tensor(&gp->recycle, gp->results[q]);
}

static void free_kernels(RecentKernels *k) {
  jit_free(k->jit);
  free(k->fns);
  free(k->source);
  phys_plan_free(k->plan);
  logical_plan_free(k->lplan);
  free(k->keys);
  memset(k, 0, sizeof *k);
}

/* Forget the plan, its source and kernels (the data changed shape). */
static void drop_plan(galley_program *gp) {
  jit_free(gp->jit);
  gp->jit = NULL;
  free(gp->fns);
  gp->fns = NULL;
  free(gp->source);
  gp->source = NULL;
  gp->source_len = 0;
  phys_plan_free(gp->plan);
  gp->plan = NULL;
  logical_plan_free(gp->lplan);
  gp->lplan = NULL;
}

/* Forget what runs learned of the results (adaptive planning): the data
 * changed past the re-run rule. */
static void forget_actuals(galley_program *gp) {
  memset(gp->actual, 0, (size_t)gp->prog->nqueries * sizeof *gp->actual);
}

/* The plan now installed was made with the facts measured so far (or,
 * all: perhaps with any, a plan kept from before): which queries' ranges
 * it may have narrowed to measured values, so that their runs check the
 * values stay inside (adapt_after). */
static void note_planned_ranges(galley_program *gp, int all) {
  for (int q = 0; q < gp->prog->nqueries; q++)
    gp->actual[q].range_planned =
        all || gp->actual[q].outcome != ADAPT_NONE;
}

/* Forget the inputs' statistics (an input is bound to another tensor). */
static void drop_stats(galley_program *gp) {
  arena_free(gp->stats_arena);
  gp->stats_arena = NULL;
  gp->stats_cache = NULL;
}

galley_program *galley_program_free(galley_program *p) {
  if (!p)
    return NULL;
  drop_plan(p);
  p->job = jit_job_free(p->job); /* kills its compiler, joins its thread */
  drop_stats(p);
  free(p->key);
  free(p->actual);
  for (int r = 0; r < RECENT_KERNELS; r++)
    free_kernels(&p->recent[r]);
  free(p->qinfo);
  free(p->qinfo_result);
  free(p->qinfo_kept);
  free(p->cache_dir);
  p->pool = pool_unref(p->pool); /* the last reference joins the threads */
  if (p->dist_free) /* its communicator (issue 15) */
    p->dist_free(p->dist);
  if (p->results)
    free_results(p);
  recycle_clear(&p->recycle);
  free(p->results);
  for (int k = 0; p->owned && k < p->prog->ninputs; k++)
    galley_tensor_free(p->owned[k]);
  free(p->owned);
  free(p->bound);
  free(p->outputs);
  program_free(p->prog);
  free(p);
  return NULL;
}

int galley_program_num_inputs(const galley_program *p) {
  return p->prog->ninputs;
}

const char *galley_program_input_name(const galley_program *p, int k) {
  return k >= 0 && k < p->prog->ninputs ? p->prog->inputs[k].name : NULL;
}

int galley_program_input_order(const galley_program *p, int k) {
  return k >= 0 && k < p->prog->ninputs ? p->prog->inputs[k].order : -1;
}

void galley_program_input_loc(const galley_program *p, int k, int64_t *line,
                              int64_t *col) {
  int ok = k >= 0 && k < p->prog->ninputs;
  *line = ok ? p->prog->inputs[k].loc.line : 0;
  *col = ok ? p->prog->inputs[k].loc.col : 0;
}

galley_status galley_program_bind(galley_program *p, const char *name,
                                  const galley_tensor *t, galley_error *err) {
  clear_error(err);
  const Program *prog = p->prog;
  int k = 0;
  while (k < prog->ninputs && strcmp(prog->inputs[k].name, name) != 0)
    k++;
  if (k == prog->ninputs)
    return rt_error(err, GALLEY_EBIND, "no input named '%s'", name);
  if (!t)
    return rt_error(err, GALLEY_EINVAL, "galley_program_bind: tensor for '%s' "
                "must not be NULL", name);
  const InputDecl *d = &prog->inputs[k];
  int order = galley_tensor_order(t);
  if (order != d->order)
    return rt_error(err, GALLEY_EBIND,
                "input '%s' is declared with %d mode%s (at %s:%d:%d) but "
                "the bound tensor has %d",
                d->name, d->order, d->order == 1 ? "" : "s", prog->filename,
                d->loc.line, d->loc.col, order);
  /* the one pass over the values that runs would otherwise repeat (the
   * re-run rule's nnz): made now, kept with the tensor */
  galley_status st = rt_tensor_cache_facts(t, err);
  if (st != GALLEY_OK)
    return st;
  if (p->bound[k] != t)
    drop_stats(p);
  p->bound[k] = t;
  if (p->owned[k] != t) /* the tensor handed over before is done with */
    p->owned[k] = galley_tensor_free(p->owned[k]);
  return GALLEY_OK;
}

galley_status galley_program_bind_owned(galley_program *p, const char *name,
                                        galley_tensor *t, galley_error *err) {
  /* one owner: not a result the program still holds (take it first),
   * nor a tensor another input owns */
  for (int q = 0; t && q < p->prog->nqueries; q++)
    if (p->results[q] == t)
      return rt_error(err, GALLEY_EINVAL, "galley_program_bind_owned: the "
                      "tensor for '%s' is a result the program holds: take "
                      "it first (galley_program_take_output)", name);
  for (int k = 0; t && k < p->prog->ninputs; k++)
    if (p->owned[k] == t && strcmp(p->prog->inputs[k].name, name) != 0)
      return rt_error(err, GALLEY_EINVAL, "galley_program_bind_owned: the "
                      "tensor for '%s' is owned by input '%s' already", name,
                      p->prog->inputs[k].name);
  galley_status st = galley_program_bind(p, name, t, err);
  if (st != GALLEY_OK)
    return st; /* t stays the caller's */
  int k = 0;
  while (strcmp(p->prog->inputs[k].name, name) != 0)
    k++;
  p->owned[k] = t;
  return GALLEY_OK;
}

/* After a run: the owned inputs that a query took as its result in place
 * (ExecParts.owned) are no longer bound. */
static void unbind_consumed(galley_program *gp,
                            const unsigned char *was_owned) {
  for (int k = 0; was_owned && k < gp->prog->ninputs; k++)
    if (was_owned[k] && !gp->owned[k]) {
      gp->bound[k] = NULL;
      drop_stats(gp);
    }
}

/* Which inputs the program owns now (NULL when none or out of memory:
 * then no input is handed to the run). */
static unsigned char *owned_now(const galley_program *gp) {
  int any = 0;
  for (int k = 0; k < gp->prog->ninputs; k++)
    any |= gp->owned[k] != NULL;
  unsigned char *o = any ? calloc((size_t)gp->prog->ninputs, 1) : NULL;
  for (int k = 0; o && k < gp->prog->ninputs; k++)
    o[k] = gp->owned[k] != NULL;
  return o;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The log of a successful run (galley_program_set_log): its phases at
 * level 1 (the text of `galleyc run -v`), each query at level 2, and
 * why it planned again at level 3. */
static void log_run(const galley_program *gp) {
  const galley_run_info *info = &gp->info;
  FILE *f = gp->log;
  if (gp->log_level < 1)
    return;
  if (info->backend == GALLEY_BACKEND_REFERENCE)
    fprintf(f, "backend reference: ran in %.3f ms\n",
            1e3 * info->exec_seconds);
  else {
    fprintf(f, "backend %s: planned in %.3f ms, compiled in %.3f ms%s, "
               "ran in %.3f ms",
            galley_backend_name(info->backend), 1e3 * info->plan_seconds,
            1e3 * info->compile_seconds,
            info->reused ? " (kernels reused)" : "",
            1e3 * info->exec_seconds);
    if (info->upgraded)
      fprintf(f, " (clang code of the background compile, %.3f ms)",
              1e3 * info->background_seconds);
    if (info->compiling)
      fprintf(f, " (clang compiling in the background)");
    fputc('\n', f);
  }
  if (gp->log_level >= 3 && info->replanned)
    fprintf(f, "re-planned: %s\n", gp->replan_reason);
  for (int k = 0; gp->log_level >= 2 && k < info->nqueries; k++) {
    galley_query_info qi_;
    galley_program_query_info(gp, k, &qi_, NULL); /* nnz counted */
    const galley_query_info *qi = &qi_;
    char time[32] = "-";
    if (qi->seconds >= 0)
      snprintf(time, sizeof time, "%.3f ms", 1e3 * qi->seconds);
    fprintf(f, "query %-12s %12s  nnz %lld  stored %lld%s%s%s\n", qi->name,
            time, (long long)qi->nnz, (long long)qi->stored,
            qi->transpose ? "  (transpose)" : "",
            qi->in_place ? "  (in place)" : "",
            gp->qinfo_kept && gp->qinfo_kept[k]
                ? "  (kept from an earlier run: it depends on one unchanged "
                  "input)"
                : "");
  }
}

/* Room for n query infos (the previous ones are dropped). */
static galley_status reset_info(galley_program *gp, galley_backend backend,
                                int n, galley_error *err) {
  free(gp->qinfo);
  free(gp->qinfo_result);
  free(gp->qinfo_kept);
  memset(&gp->info, 0, sizeof gp->info);
  gp->info.backend = backend;
  gp->qinfo = calloc((size_t)n + 1, sizeof *gp->qinfo);
  gp->qinfo_result = malloc(((size_t)n + 1) * sizeof *gp->qinfo_result);
  gp->qinfo_kept = calloc((size_t)n + 1, 1);
  if (!gp->qinfo || !gp->qinfo_result || !gp->qinfo_kept)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  for (int k = 0; k < n; k++)
    gp->qinfo_result[k] = -1;
  gp->info.nqueries = n;
  return GALLEY_OK;
}

galley_status galley_program_run_reference(galley_program *p,
                                           galley_error *err) {
  clear_error(err);
  free_results(p);
  const Program *prog = p->prog;
  galley_status st = reset_info(p, GALLEY_BACKEND_REFERENCE, prog->nqueries,
                                err);
  if (st != GALLEY_OK)
    return st;
  double t0 = now_seconds();
  st = refeval_run(prog, p->bound, p->results, err);
  p->info.exec_seconds = now_seconds() - t0;
  for (int q = 0; q < prog->nqueries; q++) {
    galley_query_info *qi = &p->qinfo[q];
    qi->name = prog->queries[q].name;
    qi->seconds = -1;
    if (st == GALLEY_OK) {
      qi->stored = galley_tensor_stored(p->results[q]);
      qi->nnz = galley_tensor_nnz(p->results[q]);
    }
  }
  if (st == GALLEY_OK)
    log_run(p);
  return st;
}

/* ------------------------------------------------------------------ */
/* Backends and the kernel path                                        */
/* ------------------------------------------------------------------ */

static const char *const backend_names[] = {"default", "tcc", "clang",
                                            "reference"};

const char *galley_backend_name(galley_backend backend) {
  return backend >= GALLEY_BACKEND_DEFAULT &&
                 backend <= GALLEY_BACKEND_REFERENCE
             ? backend_names[backend]
             : NULL;
}

galley_status galley_backend_parse(const char *name, galley_backend *out,
                                   galley_error *err) {
  clear_error(err);
  for (int b = GALLEY_BACKEND_DEFAULT; b <= GALLEY_BACKEND_REFERENCE; b++)
    if (strcmp(name, backend_names[b]) == 0) {
      *out = (galley_backend)b;
      return GALLEY_OK;
    }
  return rt_error(err, GALLEY_EINVAL,
              "unknown backend '%s' (expected tcc, clang or reference)", name);
}

galley_status api_check_backend(galley_backend backend, galley_error *err) {
  if (!galley_backend_name(backend))
    return rt_error(err, GALLEY_EINVAL, "unknown backend %d", (int)backend);
#ifndef HAVE_LIBTCC
  if (backend == GALLEY_BACKEND_TCC)
    return rt_error(err, GALLEY_EINVAL,
                    "the tcc backend is not available: libgalley was built "
                    "without libtcc");
#endif
  return GALLEY_OK;
}

galley_status galley_program_set_backend(galley_program *p,
                                         galley_backend backend,
                                         galley_error *err) {
  clear_error(err);
  galley_status st = api_check_backend(backend, err);
  if (st == GALLEY_OK)
    p->backend = backend;
  return st;
}

galley_status galley_program_set_cache_dir(galley_program *p, const char *dir,
                                           galley_error *err) {
  clear_error(err);
  char *copy = NULL;
  if (dir && !(copy = strdup(dir)))
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  free(p->cache_dir);
  p->cache_dir = copy;
  return GALLEY_OK;
}

/* The backend a run uses: the default is tcc when built in (tiered: see
 * ensure_tiered), else clang. */
static galley_backend effective_backend(const galley_program *gp) {
  if (gp->backend != GALLEY_BACKEND_DEFAULT)
    return gp->backend;
#ifdef HAVE_LIBTCC
  return GALLEY_BACKEND_TCC;
#else
  return GALLEY_BACKEND_CLANG;
#endif
}

/* Whether runs use the default backend's tiers: tcc code at once, clang's
 * code from a background compile when it is ready. */
static int tiered(const galley_program *gp) {
#ifdef HAVE_LIBTCC
  return gp->backend == GALLEY_BACKEND_DEFAULT;
#else
  (void)gp;
  return 0;
#endif
}

/* What the plan depends on in tensor t: O(1), from the facts kept with
 * it (computed when it was bound, or again after galley_tensor_touch). */
static PlanKey plan_key(const galley_tensor *t) {
  PlanKey key;
  galley_facts facts;
  memset(&key, 0, sizeof key); /* unused dims and levels compare equal */
  galley_tensor_format(t, &key.fmt);
  for (int m = 0; m < galley_tensor_order(t); m++)
    key.dims[m] = galley_tensor_dim(t, m);
  key.fill = galley_tensor_fill(t);
  rt_tensor_facts(t, &facts);
  key.nnz = key.nnz_lo = key.nnz_hi = facts.nnz;
  key.finite = rt_facts_finite(&facts);
  key.range = range_of_facts(&facts, key.fill, 1);
  key.symmetry = -1;
  key.w32 = rt_tensor_widths(t);
  return key;
}

/* How a symmetry (rt_tensor_symmetry) changed, in the user's terms. */
static const char *symmetry_change(int planned, int now) {
  if ((planned ^ now) & RT_SYMMETRIC)
    return now & RT_SYMMETRIC ? "it became symmetric"
                              : "it is no longer symmetric";
  return now & RT_ZERO_DIAGONAL ? "its diagonal became zero"
                                : "its diagonal is no longer zero";
}

/* Whether data described by `now` may run the plan made for `planned`
 * (the re-run rule); when not, a reason in why[size] naming input
 * `name`.  Fills compare by bits, so that a NaN fill matches itself. */
static int key_fits(const PlanKey *planned, const PlanKey *now, int bounds,
                    const char *name, char *why, size_t size) {
  /* a plan whose decisions used values' bounds (phys_plan_uses_bounds)
   * holds within them; any other only needs the same kinds of
   * non-finite values (no new NaN, +inf or -inf) */
  Range had = planned->range, has = now->range;
  if (!bounds) {
    had.lo = has.lo = 0;
    had.hi = has.hi = 0;
    had.integer = has.integer = 1;
  }
  const char *what = NULL;
  if (memcmp(&planned->fmt, &now->fmt, sizeof now->fmt) != 0)
    what = "its storage format changed";
  else if (memcmp(planned->dims, now->dims, sizeof now->dims) != 0)
    what = "its dims changed";
  else if (planned->w32 != now->w32)
    what = "its index width changed";
  else if (memcmp(&planned->fill, &now->fill, sizeof now->fill) != 0)
    what = "its fill changed";
  else if (planned->finite != now->finite)
    what = now->finite ? "its values became all finite"
                       : "its values are no longer all finite";
  else if (!range_contains(had, has))
    what = bounds ? "its values left the range planned for"
                  : "it holds other non-finite values (NaN, inf, -inf)";
  else if (planned->symmetry >= 0 && planned->symmetry != now->symmetry)
    what = symmetry_change(planned->symmetry, now->symmetry);
  if (what) {
    snprintf(why, size, "input '%s': %s", name, what);
    return 0;
  }
  double nnz = (double)now->nnz;
  if (nnz <= 2 * (double)planned->nnz_hi && (double)planned->nnz_lo <= 2 * nnz)
    return 1;
  if (planned->nnz_lo == planned->nnz_hi)
    snprintf(why, size, "input '%s': nnz %lld is not within a factor of 2 "
             "of the %lld planned for", name, (long long)now->nnz,
             (long long)planned->nnz);
  else
    snprintf(why, size, "input '%s': nnz %lld is not within a factor of 2 "
             "of the %lld..%lld planned for", name, (long long)now->nnz,
             (long long)planned->nnz_lo, (long long)planned->nnz_hi);
  return 0;
}

/* Whether every input is bound; otherwise refuse as the reference
 * evaluator does, naming the input. */
static galley_status check_bound(const galley_program *gp, galley_error *err) {
  const Program *p = gp->prog;
  for (int k = 0; k < p->ninputs; k++)
    if (!gp->bound[k]) {
      galley_status st = rt_error(err, GALLEY_EBIND,
                              "%s:%d:%d: error: input '%s' is not bound",
                              p->filename, p->inputs[k].loc.line,
                              p->inputs[k].loc.col, p->inputs[k].name);
      if (err) {
        err->line = p->inputs[k].loc.line;
        err->col = p->inputs[k].loc.col;
      }
      return st;
    }
  return GALLEY_OK;
}

int64_t api_memory_budget(int64_t bytes) {
  if (bytes > 0)
    return bytes;
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || size <= 0)
    return (int64_t)8 << 30; /* unknown: 8 GiB */
  return (int64_t)pages * size / 2;
}

/* Plan the program for the bound data with the chosen planner. */
static galley_status make_plan(galley_program *gp, galley_error *err) {
  if (gp->planner == GALLEY_PLANNER_SIMPLE)
    return phys_simple_plan(gp->prog, gp->bound, !gp->pessimistic,
                            &gp->plan, err);
  OptOptions o = opt_defaults();
  o.assume_finite = !gp->pessimistic;
  /* a distributed run combines each process's part of a query: the
   * correction pass of exception splitting would be added by each */
  o.no_split = gp->no_split || gp->parts != NULL;
  o.estimator =
      gp->estimator == GALLEY_ESTIMATOR_UNIFORM ? EST_UNIFORM : EST_CHAIN;
  o.search = gp->search == GALLEY_SEARCH_EXACT ? SEARCH_EXACT : SEARCH_GREEDY;
  o.memory_budget = (double)api_memory_budget(gp->memory_budget);
  /* the results earlier runs measured replace their estimates */
  double *real = calloc((size_t)gp->prog->nqueries + 1, sizeof *real);
  if (!real)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  Range *ranges = calloc((size_t)gp->prog->nqueries + 1, sizeof *ranges);
  unsigned char *known = calloc((size_t)gp->prog->nqueries + 1, 1);
  if (!ranges || !known) {
    free(real), free(ranges), free(known);
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  rt_level_degrees *degrees =
      calloc((size_t)gp->prog->nqueries + 1, sizeof *degrees);
  unsigned char *deg_known = calloc((size_t)gp->prog->nqueries + 1, 1);
  if (!degrees || !deg_known) {
    free(real), free(ranges), free(known), free(degrees), free(deg_known);
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  for (int q = 0; q < gp->prog->nqueries; q++) {
    int measured = gp->actual[q].outcome != ADAPT_NONE;
    real[q] = measured ? (double)gp->actual[q].nnz : -1;
    known[q] = (unsigned char)measured;
    ranges[q] = gp->actual[q].range;
    deg_known[q] = (unsigned char)(measured && gp->actual[q].has_degrees);
    degrees[q] = gp->actual[q].deg;
  }
  o.actual_degrees = degrees;
  o.actual_degrees_known = deg_known;
  o.actual_nnz = real;
  o.actual_range = ranges;
  o.actual_range_known = known;
  /* one pass over each input for its statistics, not one per optimizer
   * nor one per plan */
  if (!gp->stats_arena) {
    gp->stats_arena = arena_new();
    gp->stats_cache =
        gp->stats_arena ? stats_cache_new(gp->stats_arena) : NULL;
  }
  stats_cache_recheck(gp->stats_cache); /* the inputs may have been touched */
  o.stats_cache = gp->stats_cache;
  galley_status st = logical_optimize(gp->prog, gp->bound, &o, &gp->lplan,
                                      err);
  if (st == GALLEY_OK) /* lplan is kept for explain */
    st = physical_optimize(gp->lplan, gp->bound, &o, &gp->plan, err);
  free(real);
  free(ranges);
  free(known);
  free(degrees);
  free(deg_known);
  return st;
}

void galley_program_set_planner(galley_program *p, galley_planner planner) {
  if (p->planner != planner)
    drop_plan(p);
  p->planner = planner;
}

void galley_program_set_estimator(galley_program *p,
                                  galley_estimator estimator) {
  if (p->estimator != estimator)
    drop_plan(p);
  p->estimator = estimator;
}

void galley_program_set_search(galley_program *p, galley_search search) {
  if (p->search != search)
    drop_plan(p);
  p->search = search;
}

void galley_program_set_keep_invariants(galley_program *p, int on) {
  p->no_keep = !on;
}

galley_status galley_program_set_memory_budget(galley_program *p,
                                               int64_t bytes,
                                               galley_error *err) {
  clear_error(err);
  if (bytes < 0)
    return rt_error(err, GALLEY_EINVAL, "negative memory budget %lld",
                    (long long)bytes);
  if (p->memory_budget != bytes)
    drop_plan(p);
  p->memory_budget = bytes;
  return GALLEY_OK;
}

galley_status galley_program_set_threads(galley_program *p, int n,
                                         galley_error *err) {
  clear_error(err);
  if (n < 0 || n > POOL_MAX_THREADS)
    return rt_error(err, GALLEY_EINVAL, "thread count %d is not in 0..%d",
                    n, POOL_MAX_THREADS);
  if (n != p->threads || !p->pool)
    p->pool = pool_unref(p->pool); /* made again by the next run */
  p->threads = n;
  return GALLEY_OK;
}

int galley_program_threads(const galley_program *p) {
  if (p->pool)
    return pool_threads(p->pool);
  return p->threads > 0 ? p->threads : pool_default_threads();
}

void api_program_use_pool(galley_program *p, GalleyPool *pool, int threads) {
  pool_unref(p->pool);
  p->pool = pool_ref(pool);
  p->threads = threads;
}

void api_program_set_block_work(galley_program *p, int64_t units) {
  p->block_work = units > 0 ? units : 0;
}

void galley_program_set_log(galley_program *p, int level, FILE *f) {
  p->log_level = f && level > 0 ? level : 0;
  p->log = p->log_level ? f : NULL;
}

static const char *const planner_names[] = {"cost", "simple"};
static const char *const estimator_names[] = {"chain", "uniform"};
static const char *const search_names[] = {"greedy", "exact"};

/* Unknown values plan as the defaults (make_plan), so they print so. */
const char *api_planner_name(galley_planner planner) {
  return planner_names[planner == GALLEY_PLANNER_SIMPLE];
}

const char *api_estimator_name(galley_estimator estimator) {
  return estimator_names[estimator == GALLEY_ESTIMATOR_UNIFORM];
}

const char *api_search_name(galley_search search) {
  return search_names[search == GALLEY_SEARCH_EXACT];
}

/* Whether the last plan fits the bound data (the re-run rule), in
 * O(number of inputs) and without allocating.  When not,
 * gp->replan_reason says why. */
static int keys_fit(galley_program *gp, const PhysPlan *plan,
                    const PlanKey *keys, char *why, size_t size) {
  const Program *p = gp->prog;
  int bounds = phys_plan_uses_bounds(plan);
  for (int k = 0; k < p->ninputs; k++) {
    PlanKey now = plan_key(gp->bound[k]);
    if (keys[k].symmetry >= 0) /* the plan relied on it: O(1) but once */
      now.symmetry = rt_tensor_symmetry(gp->bound[k]);
    if (!key_fits(&keys[k], &now, bounds, p->inputs[k].name, why, size))
      return 0;
  }
  return 1;
}

static int plan_fits(galley_program *gp) {
  if (!gp->plan) {
    snprintf(gp->replan_reason, sizeof gp->replan_reason, "%s",
             "no plan yet (first run, or options changed)");
    return 0;
  }
  return keys_fit(gp, gp->plan, gp->key, gp->replan_reason,
                  sizeof gp->replan_reason);
}

/* The options gp plans with now. */
static PlanOptions plan_options(const galley_program *gp) {
  PlanOptions o;
  memset(&o, 0, sizeof o); /* compared with memcmp */
  o.planner = gp->planner;
  o.estimator = gp->estimator;
  o.search = gp->search;
  o.memory_budget = gp->memory_budget;
  o.pessimistic = gp->pessimistic;
  o.no_split = gp->no_split;
  o.adapt_off = gp->adapt_off;
  o.parts = gp->parts != NULL;
  return o;
}

/* The compiled kernels of a plan being replaced, kept until the new
 * plan's source is known (keep_same_kernels). */
typedef RecentKernels OldKernels;

/* Move gp's kernels and source out of it (drop_plan then leaves them). */
static OldKernels take_kernels(galley_program *gp) {
  OldKernels old;
  memset(&old, 0, sizeof old);
  old.source = gp->source;
  old.jit = gp->jit;
  old.fns = gp->fns;
  old.nfns = gp->plan ? gp->plan->nq : 0;
  old.backend = gp->jit_backend;
  old.source_len = gp->source_len;
  /* the plan too, with the facts it was made for, for plan_kept */
  size_t n = (size_t)gp->prog->ninputs + 1;
  old.keys = gp->plan ? malloc(n * sizeof *old.keys) : NULL;
  if (old.keys) {
    memcpy(old.keys, gp->key, (n - 1) * sizeof *old.keys);
    old.plan = gp->plan;
    old.lplan = gp->lplan;
    old.opts = gp->plan_opts;
    gp->plan = NULL;
    gp->lplan = NULL;
  }
  gp->jit = NULL;
  gp->fns = NULL;
  gp->source = NULL;
  gp->source_len = 0;
  return old;
}

static int all_dense(const galley_format *fmt) {
  for (int l = 0; l < fmt->order; l++)
    if (fmt->kinds[l] != GALLEY_DENSE)
      return 0;
  return 1;
}

/* The re-planned gp found k's source again: an all-dense input that k
 * was made for with other nnz, the rest of its key the same, fits every
 * nnz from now on.  Its loops walk every point whatever its nnz (only
 * the estimates of later results move with it, and runs measure those),
 * and the plan just came out the same for two nnz more than a factor of
 * 2 apart (PageRank's ranks: their nnz counts the ranks other than the
 * teleport share, which grows step after step). */
static void widen_keys(galley_program *gp, const RecentKernels *k) {
  if (!k->keys || memcmp(&k->opts, &gp->plan_opts, sizeof k->opts) != 0)
    return;
  for (int i = 0; i < gp->prog->ninputs; i++) {
    PlanKey *now = &gp->key[i], was = k->keys[i];
    if (!all_dense(&now->fmt))
      continue;
    was.nnz = was.nnz_lo = was.nnz_hi = now->nnz; /* compare the rest */
    was.symmetry = now->symmetry;
    if (memcmp(&was, now, sizeof was) != 0)
      continue;
    int64_t lo = k->keys[i].nnz_lo < now->nnz_lo ? k->keys[i].nnz_lo
                                                 : now->nnz_lo;
    int64_t hi = k->keys[i].nnz_hi > now->nnz_hi ? k->keys[i].nnz_hi
                                                 : now->nnz_hi;
    if (2 * lo < hi) {
      now->nnz_lo = 0;
      now->nnz_hi = INT64_MAX / 4;
    }
  }
}

/* Re-planning (new data past the re-run rule, the facts of a result, a
 * finite-or-not assumption) often yields the same kernels: when the new
 * plan's source is the old one byte for byte, its kernels are the old
 * ones (each kernel galley_qN is query N's in both plans), so they are
 * installed again instead of being compiled again (no tcc, no clang
 * look-up).  Whatever is not kept is freed. */
/* Install k's kernels for gp's plan when k was compiled from gp's
 * source (taking them from k); whether it was. */
static int install_same(galley_program *gp, RecentKernels *k) {
  const PhysPlan *pp = gp->plan;
  if (!k->jit || !k->fns || !k->source || !gp->source || !pp || gp->jit ||
      strcmp(k->source, gp->source) != 0)
    return 0;
  widen_keys(gp, k);
  void **fns = calloc((size_t)pp->nq + 1, sizeof *fns);
  if (!fns)
    return 0;
  for (int n = 0; n < pp->nq; n++)
    if (pp->q[n].kind == PQ_KERNEL && n < k->nfns)
      fns[n] = k->fns[n]; /* the same source: n was a kernel too */
  gp->jit = k->jit;
  gp->fns = fns;
  gp->jit_backend = k->backend;
  k->jit = NULL;
  free_kernels(k);
  return 1;
}

/* Re-planning (new data past the re-run rule, the facts of a result, a
 * finite-or-not assumption) often yields kernels compiled before: when
 * the new plan's source is the old one (or one of the RECENT_KERNELS
 * before it) byte for byte, its kernels are those (each kernel galley_qN
 * is query N's in both plans), installed again instead of being
 * compiled again (no tcc, no clang look-up).  The old kernels join the
 * recent ones; the oldest of those is freed. */
static void keep_recent(galley_program *gp, RecentKernels *k);

static void keep_same_kernels(galley_program *gp, OldKernels *old) {
  int found = install_same(gp, old);
  for (int r = 0; r < RECENT_KERNELS && !found; r++)
    if (install_same(gp, &gp->recent[r])) {
      memmove(&gp->recent[r], &gp->recent[r + 1],
              (size_t)(RECENT_KERNELS - 1 - r) * sizeof gp->recent[0]);
      memset(&gp->recent[RECENT_KERNELS - 1], 0, sizeof gp->recent[0]);
      found = 1;
    }
  if (found && gp->log_level >= 3)
    fprintf(gp->log, "re-planned to kernels compiled before: kept the "
                     "compiled code\n");
  keep_recent(gp, old);
}

/* Plan the bound data again into gp->plan and gp->source (the kernels
 * are the caller's to keep or drop). */
static galley_status plan_again(galley_program *gp, galley_error *err) {
  drop_plan(gp);
  galley_status st = GALLEY_OK;
  /* every input keeps its facts (touch may have dropped them), so that
   * what the planner asks (symmetry) is kept and the key records it */
  for (int k = 0; st == GALLEY_OK && k < gp->prog->ninputs; k++)
    st = rt_tensor_cache_facts(gp->bound[k], err);
  if (st == GALLEY_OK)
    st = make_plan(gp, err);
  gp->plan_opts = plan_options(gp);
  if (st == GALLEY_OK)
    gp->plan->memory_budget = (double)api_memory_budget(gp->memory_budget);
  if (st == GALLEY_OK)
    st = cg_plan(gp->plan, &gp->source, &gp->source_len, err);
  if (st == GALLEY_OK && gp->plan->noutputs != gp->noutputs)
    st = rt_error(err, GALLEY_EINTERNAL, "the plan has %d outputs, the program %d",
              gp->plan->noutputs, gp->noutputs);
  if (st != GALLEY_OK)
    drop_plan(gp);
  return st;
}

/* Keep k, the program's plan and kernels being replaced, as the most
 * recent (the oldest kept is freed); or free it when it has no kernels. */
static void keep_recent(galley_program *gp, RecentKernels *k) {
  if (!k->jit) {
    free_kernels(k);
    return;
  }
  free_kernels(&gp->recent[RECENT_KERNELS - 1]);
  memmove(&gp->recent[1], &gp->recent[0],
          (RECENT_KERNELS - 1) * sizeof gp->recent[0]);
  gp->recent[0] = *k;
  memset(k, 0, sizeof *k);
}

/* The plan cache: when a plan kept from before (gp->recent) was made
 * with the options of now for facts the bound data fits (the re-run
 * rule), make it gp's, with its kernels, without planning; whether one
 * was.  (A BFS frontier that grows and shrinks again comes back to the
 * facts of an earlier level.) */
static int plan_kept(galley_program *gp) {
  PlanOptions opts = plan_options(gp);
  char why[sizeof gp->replan_reason];
  for (int r = 0; r < RECENT_KERNELS; r++) {
    RecentKernels *e = &gp->recent[r];
    if (!e->plan || !e->keys || !e->jit ||
        memcmp(&e->opts, &opts, sizeof opts) != 0 ||
        !keys_fit(gp, e->plan, e->keys, why, sizeof why))
      continue;
    RecentKernels found = *e;
    memmove(&gp->recent[r], &gp->recent[r + 1],
            (size_t)(RECENT_KERNELS - 1 - r) * sizeof gp->recent[0]);
    memset(&gp->recent[RECENT_KERNELS - 1], 0, sizeof gp->recent[0]);
    OldKernels old = take_kernels(gp);
    drop_plan(gp);
    gp->plan = found.plan;
    gp->lplan = found.lplan;
    gp->plan_opts = found.opts;
    memcpy(gp->key, found.keys, (size_t)gp->prog->ninputs * sizeof *gp->key);
    free(found.keys);
    gp->source = found.source;
    gp->source_len = found.source_len;
    gp->jit = found.jit;
    gp->fns = found.fns;
    gp->jit_backend = found.backend;
    keep_recent(gp, &old);
    size_t len = strlen(gp->replan_reason);
    snprintf(gp->replan_reason + len, sizeof gp->replan_reason - len,
             "; a plan kept from before fits: taken without planning");
    return 1;
  }
  return 0;
}

/* Make sure gp->plan and gp->source fit the bound data: keep them when
 * the re-run rule allows, else plan and generate again (keeping the
 * kernels when the source is the same); *replanned (may be NULL) says
 * which. */
galley_status api_ensure_plan(galley_program *gp, int *replanned,
                              galley_error *err) {
  if (replanned)
    *replanned = 0;
  galley_status st = check_bound(gp, err);
  if (st != GALLEY_OK || plan_fits(gp))
    return st;
  if (replanned)
    *replanned = 1;
  if (gp->plan) { /* other data: results may be finite again, and the
                     facts of the old data's results no longer hold */
    gp->pessimistic = 0;
    forget_actuals(gp);
  }
  if (plan_kept(gp)) {
    note_planned_ranges(gp, 1);
    return GALLEY_OK;
  }
  OldKernels old = take_kernels(gp);
  st = plan_again(gp, err);
  note_planned_ranges(gp, 0);
  for (int k = 0; st == GALLEY_OK && k < gp->prog->ninputs; k++) {
    gp->key[k] = plan_key(gp->bound[k]); /* what the plan was made for */
    gp->key[k].symmetry = rt_tensor_symmetry_known(gp->bound[k]);
  }
  keep_same_kernels(gp, &old); /* may widen the keys (widen_keys) */
  return st;
}

/* The symbols of the plan's kernels, in query order: names[] holds the
 * text, symbols[] points into it; *nsym is their number. */
typedef struct KernelSymbols {
  char (*names)[32];
  const char **symbols;
  void **found; /* room for their addresses */
  int nsym;
} KernelSymbols;

static void kernel_symbols_free(KernelSymbols *ks) {
  free(ks->names);
  free(ks->symbols);
  free(ks->found);
}

static galley_status kernel_symbols(const PhysPlan *pp, KernelSymbols *ks,
                                    galley_error *err) {
  ks->names = calloc((size_t)pp->nq + 1, sizeof *ks->names);
  ks->symbols = calloc((size_t)pp->nq + 1, sizeof *ks->symbols);
  ks->found = calloc((size_t)pp->nq + 1, sizeof *ks->found);
  ks->nsym = 0;
  if (!ks->names || !ks->symbols || !ks->found) {
    kernel_symbols_free(ks);
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  for (int n = 0; n < pp->nq; n++)
    if (pp->q[n].kind == PQ_KERNEL) {
      cg_kernel_name(n, ks->names[ks->nsym], sizeof ks->names[ks->nsym]);
      ks->symbols[ks->nsym] = ks->names[ks->nsym];
      ks->nsym++;
    }
  return GALLEY_OK;
}

/* Make m the program's kernels (replacing and freeing the old ones), with
 * found[] the addresses of its symbols in kernel_symbols order. */
static galley_status install_kernels(galley_program *gp, JitModule *m,
                                     void *const *found, galley_error *err) {
  const PhysPlan *pp = gp->plan;
  void **fns = calloc((size_t)pp->nq + 1, sizeof *fns);
  if (!fns) {
    jit_free(m);
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  for (int n = 0, s = 0; n < pp->nq; n++)
    if (pp->q[n].kind == PQ_KERNEL)
      fns[n] = found[s++];
  jit_free(gp->jit);
  free(gp->fns);
  gp->jit = m;
  gp->fns = fns;
  gp->jit_backend = jit_module_backend(m) == JIT_CLANG ? GALLEY_BACKEND_CLANG
                                                       : GALLEY_BACKEND_TCC;
  return GALLEY_OK;
}

/* Compile the plan's kernels with an explicit backend (unless done). */
static galley_status ensure_kernels(galley_program *gp, galley_backend backend,
                                    galley_error *err) {
  if (gp->jit && gp->jit_backend == backend)
    return GALLEY_OK;
  KernelSymbols ks;
  galley_status st = kernel_symbols(gp->plan, &ks, err);
  if (st != GALLEY_OK)
    return st;
  JitOptions opt = {backend == GALLEY_BACKEND_CLANG ? JIT_CLANG : JIT_TCC,
                    gp->cache_dir};
  JitModule *m = NULL;
  st = jit_compile(&opt, gp->source, ks.symbols, ks.nsym, ks.found, &m, err);
  if (st == GALLEY_OK)
    st = install_kernels(gp, m, ks.found, err);
  kernel_symbols_free(&ks);
  return st;
}

/* Above this estimated cost (the logical cost model's units: about
 * 0.4 ns of clang-compiled work each, benchmarks/RESULTS.md) one run of a
 * plan is worth starting its background clang compile at once; cheaper
 * plans start it when their kernels are run again (the program is hot),
 * so a program run once cheaply never starts clang. */
#define TIER_COST 1e6

/* Above this one, a single run on tcc code (2-5 times slower) would
 * outlast clang's compile (0.1-0.3 s) several times over, and code is
 * never switched during a run: such a plan compiles with clang first. */
#define SYNC_CLANG_COST 1e9

static double plan_cost(const PhysPlan *pp) {
  double cost = 0;
  for (int n = 0; n < pp->nq; n++)
    if (pp->q[n].has_est && pp->q[n].est_cost > 0)
      cost += pp->q[n].est_cost;
  return cost;
}

/* Log (once, at level 1) why the job failed; nothing while it runs. */
static void log_job_failure(galley_program *gp) {
  galley_error err;
  rt_error_clear(&err);
  if (gp->job_logged || jit_job_error(gp->job, &err) == GALLEY_OK)
    return;
  if (gp->log_level >= 1)
    fprintf(gp->log, "clang: the background compile failed, the kernels "
                     "stay on tcc: %s\n", err.msg);
  gp->job_logged = 1;
}

/* Start the background clang compile of the plan's kernels.  Failing to
 * start (out of memory) only leaves the kernels on tcc. */
static void start_job(galley_program *gp) {
  KernelSymbols ks;
  if (kernel_symbols(gp->plan, &ks, NULL) != GALLEY_OK)
    return;
  JitOptions opt = {JIT_CLANG, gp->cache_dir};
  jit_job_start(&opt, gp->source, ks.symbols, ks.nsym, &gp->job, NULL);
  gp->job_logged = 0;
  if (gp->job) /* a job that could not start (no clang) is done at once */
    log_job_failure(gp);
  kernel_symbols_free(&ks);
}

/* Between runs: drop a job compiling an older source (a replanned
 * program must not install stale code), install the clang code of a
 * finished job for this source, and log (once, at -v) why a failed job
 * leaves the kernels on tcc.  The failed job stays, so that it is not
 * started again for the same source. */
static void settle_job(galley_program *gp) {
  if (!gp->job)
    return;
  if (!gp->source || !jit_job_is_for(gp->job, gp->source)) {
    gp->job = jit_job_free(gp->job);
    return;
  }
  if (!jit_job_done(gp->job, 0))
    return;
  if (jit_job_error(gp->job, NULL) != GALLEY_OK) {
    log_job_failure(gp); /* the failed job stays */
    return;
  }
  KernelSymbols ks;
  if (kernel_symbols(gp->plan, &ks, NULL) != GALLEY_OK)
    return;
  JitModule *m = NULL;
  double seconds = jit_job_seconds(gp->job);
  if (jit_job_take(gp->job, ks.found, &m, NULL) == GALLEY_OK &&
      install_kernels(gp, m, ks.found, NULL) == GALLEY_OK) {
    gp->upgraded = 1;
    gp->upgrade_seconds = seconds;
  }
  gp->job = jit_job_free(gp->job);
  kernel_symbols_free(&ks);
}

/* The first code of new kernels with the default backend: clang's when
 * a checked cache entry has it (a cheap, synchronous look-up) or when the
 * plan is very costly (SYNC_CLANG_COST; when that compile fails, the
 * reason is logged), else tcc's.  *tried_clang says whether clang was
 * run and failed. */
static galley_status first_code(galley_program *gp, const KernelSymbols *ks,
                                JitModule **m, int *tried_clang,
                                galley_error *err) {
  JitOptions opt = {JIT_CLANG, gp->cache_dir};
  *tried_clang = 0;
  if (jit_lookup(&opt, gp->source, ks->symbols, ks->nsym, ks->found, m))
    return GALLEY_OK;
  if (plan_cost(gp->plan) >= SYNC_CLANG_COST) {
    galley_error why;
    rt_error_clear(&why);
    if (jit_compile(&opt, gp->source, ks->symbols, ks->nsym, ks->found, m,
                    &why) == GALLEY_OK)
      return GALLEY_OK;
    *tried_clang = 1;
    if (gp->log_level >= 1)
      fprintf(gp->log, "clang: %s; running on tcc code\n", why.msg);
  }
  opt.backend = JIT_TCC;
  return jit_compile(&opt, gp->source, ks->symbols, ks->nsym, ks->found, m,
                     err);
}

/* The default backend's kernels: first_code for a new plan; on tcc code,
 * a background clang compile whose code settle_job installs between runs,
 * started at once for a costly plan (TIER_COST), else when the kernels
 * are reused. */
static galley_status ensure_tiered(galley_program *gp, galley_error *err) {
  settle_job(gp);
  if (gp->jit) {
    if (gp->jit_backend == GALLEY_BACKEND_TCC && !gp->job)
      start_job(gp);
    return GALLEY_OK;
  }
  KernelSymbols ks;
  galley_status st = kernel_symbols(gp->plan, &ks, err);
  if (st != GALLEY_OK)
    return st;
  JitModule *m = NULL;
  int tried_clang = 0;
  st = first_code(gp, &ks, &m, &tried_clang, err);
  if (st == GALLEY_OK)
    st = install_kernels(gp, m, ks.found, err);
  kernel_symbols_free(&ks);
  if (st == GALLEY_OK && gp->jit_backend == GALLEY_BACKEND_TCC && !gp->job &&
      !tried_clang && plan_cost(gp->plan) >= TIER_COST)
    start_job(gp);
  return st;
}

galley_status galley_program_wait_compiled(galley_program *p,
                                           galley_error *err) {
  clear_error(err);
  if (!tiered(p))
    return GALLEY_OK;
  settle_job(p);
  if (!p->jit || p->jit_backend != GALLEY_BACKEND_TCC)
    return GALLEY_OK;
  if (!p->job)
    start_job(p);
  if (!p->job)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  jit_job_done(p->job, 1);
  settle_job(p);
  if (p->jit_backend == GALLEY_BACKEND_CLANG)
    return GALLEY_OK;
  galley_status st = p->job ? jit_job_error(p->job, err) : GALLEY_OK;
  return st != GALLEY_OK ? st : rt_error(err, GALLEY_ENOMEM, "out of memory");
}

/* ------------------------------------------------------------------ */
/* Adaptive planning: the real facts of a result re-plan what follows  */
/* ------------------------------------------------------------------ */

/* A result whose real nnz differs from the plan's estimate by more than
 * this factor (either way) re-plans the queries after it: the re-run
 * rule's tolerance for inputs (PlanKey), and the Galley plan cache's
 * similarity threshold (galley-notes 3.7). */
#define ADAPT_FACTOR 2.0

/* What execute returns when the facts of a result changed the plan: the
 * new plan is in AdaptRun.plan, the run starts again with it. */
#define EXEC_REPLAN ((galley_status)101)

/* The plan made with the real facts, while the executor still runs the
 * old one (the executor's ExecParts context). */
typedef struct AdaptRun {
  galley_program *gp;
  ExecParts parts;
  PhysPlan *plan;      /* the new plan, its logical plan and source, */
  LogicalPlan *lplan;  /* owned here until installed (adapt_install) */
  char *source;
  size_t source_len;
  int query;           /* the program query whose facts made it */
  /* Loop-invariant queries (memo_reuse): per physical query of the
   * running plan, the one input its result depends on, or -1. */
  int *memo_input;
} AdaptRun;

/* ------------------------------------------------------------------ */
/* Loop-invariant queries                                              */
/* ------------------------------------------------------------------ */

/* A query whose result depends on one bound input alone (the out-degrees
 * of a graph, PageRank's n) is the same on every run that binds the same
 * tensor, unchanged: an iterative algorithm would compute it at every
 * step.  Its result is kept with that input (rt_tensor_memo, until the
 * input is freed or touched), under a key that says what computed it --
 * a hash of the plan's kernel source (constants, user defs and formats
 * included), of its printed plan and of the query's number -- and the
 * next run borrows it instead of running the query.  Outputs are left
 * out (the caller takes them), and so are transposes of inputs (kept
 * with the input already) and split queries. */
#define MEMO_MAX_INPUTS 64

static int read_later(const PhysPlan *pp, int n);

/* memo_input[n] for every query of pp (see AdaptRun); 0 when there is
 * none to keep.  *any says whether one is. */
static galley_status memo_inputs(const galley_program *gp, const PhysPlan *pp,
                                 int **out, galley_error *err) {
  *out = NULL;
  if (gp->no_keep || gp->prog->ninputs > MEMO_MAX_INPUTS || pp->nq == 0)
    return GALLEY_OK;
  uint64_t *deps = calloc((size_t)pp->nq, sizeof *deps);
  int *input = malloc((size_t)pp->nq * sizeof *input);
  if (!deps || !input) {
    free(deps), free(input);
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  int any = 0;
  for (int n = 0; n < pp->nq; n++) {
    const PhysQuery *q = &pp->q[n];
    for (int k = 0; k < q->nacc; k++)
      deps[n] |= q->acc[k].is_input ? (uint64_t)1 << q->acc[k].tensor
                                    : deps[q->acc[k].tensor];
    input[n] = -1;
    int one = deps[n] && !(deps[n] & (deps[n] - 1));
    if (!one || q->split || (q->kind == PQ_TRANSPOSE && q->acc[0].is_input))
      continue;
    for (int k = 0; k < pp->noutputs; k++)
      if (pp->outputs[k] == n)
        one = 0;
    if (!one || !read_later(pp, n))
      continue;
    input[n] = __builtin_ctzll(deps[n]);
    any = 1;
  }
  free(deps);
  if (any)
    *out = input;
  else
    free(input);
  return GALLEY_OK;
}

/* Two 64-bit hashes of len bytes, 8 at a time. */
static void hash_bytes(const char *s, size_t len, uint64_t h[2]) {
  uint64_t a = 0x9e3779b97f4a7c15u ^ len, b = 0xc2b2ae3d27d4eb4fu + len;
  size_t k = 0;
  for (; k + 8 <= len; k += 8) {
    uint64_t w;
    memcpy(&w, s + k, sizeof w);
    a = (a ^ w) * 0x100000001b3u;
    a ^= a >> 29;
    b = (b + w) * 0xff51afd7ed558ccdu;
    b ^= b >> 32;
  }
  for (; k < len; k++) {
    a = (a ^ (unsigned char)s[k]) * 0x100000001b3u;
    b = (b + (unsigned char)s[k]) * 0xff51afd7ed558ccdu;
  }
  h[0] = a ^ (a >> 31);
  h[1] = b ^ (b >> 29);
}

/* The key of query n's result in ar's plan (see above). */
static void memo_key(AdaptRun *ar, const PhysPlan *cpp, int n,
                     uint64_t key[2]) {
  const galley_program *gp = ar->gp;
  PhysPlan *pp = (PhysPlan *)cpp; /* the hash is kept with it, once */
  if (!pp->memo_hashed) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
      phys_print(pp, f);
      fclose(f);
    }
    uint64_t s[2], t[2] = {0, 0};
    hash_bytes(gp->source ? gp->source : "", gp->source_len, s);
    if (text)
      hash_bytes(text, len, t);
    free(text);
    pp->memo_hash[0] = s[0] ^ (t[0] * 0x9e3779b97f4a7c15u);
    pp->memo_hash[1] = s[1] ^ (t[1] * 0xc2b2ae3d27d4eb4fu);
    pp->memo_hashed = 1;
  }
  key[0] = pp->memo_hash[0] ^ ((uint64_t)n * 0xd6e8feb86659fd93u);
  key[1] = pp->memo_hash[1] + (uint64_t)n;
}

static const galley_tensor *memo_reuse(void *ctx, const PhysPlan *pp, int n) {
  AdaptRun *ar = ctx;
  if (!ar->memo_input || ar->memo_input[n] < 0)
    return NULL;
  uint64_t key[2];
  memo_key(ar, pp, n, key);
  return rt_tensor_memo(ar->gp->bound[ar->memo_input[n]], key);
}

static void memo_computed(void *ctx, const PhysPlan *pp, int n,
                          const galley_tensor *res) {
  AdaptRun *ar = ctx;
  if (!ar->memo_input || ar->memo_input[n] < 0)
    return;
  const galley_tensor *input = ar->gp->bound[ar->memo_input[n]];
  galley_format fmt;
  galley_tensor *copy = NULL;
  galley_tensor_format(res, &fmt);
  if (galley_tensor_convert(res, &fmt, &copy, NULL) != GALLEY_OK ||
      rt_tensor_set_widths(copy, rt_tensor_widths(res), NULL) != GALLEY_OK) {
    galley_tensor_free(copy); /* not kept: only slower */
    return;
  }
  uint64_t key[2];
  memo_key(ar, pp, n, key);
  (void)rt_tensor_memo_keep(input, key, copy, NULL);
}

/* Whether a query after n reads n's result (a kernel or a transpose). */
static int read_later(const PhysPlan *pp, int n) {
  for (int m = n + 1; m < pp->nq; m++)
    for (int a = 0; a < pp->q[m].nacc; a++)
      if (!pp->q[m].acc[a].is_input && pp->q[m].acc[a].tensor == n)
        return 1;
  return 0;
}

static int estimate_off(double est, int64_t real) {
  double e = est < 1 ? 1 : est, r = real < 1 ? 1 : (double)real;
  return e > ADAPT_FACTOR * r || r > ADAPT_FACTOR * e;
}

/* Plan again with the facts recorded so far into ar (gp keeps the plan
 * the executor runs); *same says whether the new source is the old. */
static galley_status adapt_plan(AdaptRun *ar, int *same, galley_error *err) {
  galley_program *gp = ar->gp;
  PhysPlan *plan = gp->plan;
  LogicalPlan *lplan = gp->lplan;
  char *source = gp->source;
  size_t source_len = gp->source_len;
  JitModule *jit = gp->jit;
  void **fns = gp->fns;
  gp->plan = NULL;
  gp->lplan = NULL;
  gp->source = NULL;
  gp->jit = NULL;
  gp->fns = NULL;
  galley_status st = plan_again(gp, err);
  *same = st == GALLEY_OK && strcmp(gp->source, source) == 0;
  if (st == GALLEY_OK && !*same) {
    ar->plan = gp->plan;
    ar->lplan = gp->lplan;
    ar->source = gp->source;
    ar->source_len = gp->source_len;
    gp->plan = NULL;
    gp->lplan = NULL;
    gp->source = NULL;
  }
  drop_plan(gp); /* the new plan when it is the same */
  gp->plan = plan;
  gp->lplan = lplan;
  gp->source = source;
  gp->source_len = source_len;
  gp->jit = jit;
  gp->fns = fns;
  return st;
}

/* The printed plans of pp's queries after n (malloc()ed), or NULL when
 * out of memory. */
static char *later_queries(const PhysPlan *pp, int n) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f)
    return NULL;
  for (int m = n + 1; m < pp->nq; m++) {
    phys_print_query(pp, m, f);
    fputc('\n', f);
  }
  if (fclose(f) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

/* Whether the new plan of ar plans the queries after program query u as
 * pp does after its query n (loop orders, merges, protocols, formats):
 * then only u's own plan changed, which this run has already computed,
 * and running on is as good as starting again. */
static int same_later_plans(const AdaptRun *ar, const PhysPlan *pp, int n,
                            int u) {
  int m = -1;
  for (int k = 0; k < ar->plan->nq; k++)
    if (ar->plan->q[k].kind == PQ_KERNEL && ar->plan->q[k].user_query == u)
      m = k;
  if (m < 0)
    return 0;
  char *old = later_queries(pp, n), *new = later_queries(ar->plan, m);
  int same = old && new && strcmp(old, new) == 0;
  free(old);
  free(new);
  return same;
}

/* Free the plan ar holds (not installed). */
static void adapt_discard(AdaptRun *ar) {
  phys_plan_free(ar->plan);
  logical_plan_free(ar->lplan);
  free(ar->source);
  ar->plan = NULL;
  ar->lplan = NULL;
  ar->source = NULL;
}

/* A fiber this many times fuller than its level's entries spread evenly
 * over their parents, and at least DEGREE_SKEW_MIN entries long, makes
 * the degrees worth planning with: the planner spreads an intermediate
 * evenly when it knows its size alone. */
#define DEGREE_SKEW 16.0
#define DEGREE_SKEW_MIN 64

/* The level of d whose fullest fiber is most skewed, or -1 when none is
 * skewed past DEGREE_SKEW. */
static int skewed_level(const rt_level_degrees *d) {
  int worst = -1;
  double most = DEGREE_SKEW;
  for (int l = 0; l < d->nlevels; l++) {
    int64_t parents = l == 0 ? 1 : d->children[l - 1];
    if (!d->known[l] || parents <= 0 || d->max_fiber[l] < DEGREE_SKEW_MIN)
      continue;
    double even = (double)d->children[l] / (double)parents;
    double skew = (double)d->max_fiber[l] / (even > 1 ? even : 1);
    if (skew > most) {
      most = skew;
      worst = l;
    }
  }
  return worst;
}

/* What the facts of query n's result (q, realizing program query u)
 * change: ADAPT_WHY_* bits.  f->range already holds them. */
static int facts_off(const PhysQuery *q, const AdaptFact *f) {
  int why = 0;
  if (f->has_degrees && skewed_level(&f->deg) >= 0)
    why |= ADAPT_WHY_DEGREE;
  if (q->has_est && estimate_off(q->est_nnz, f->nnz))
    why |= ADAPT_WHY_NNZ;
  /* a result the planner could not prove finite (nor assumed finite)
   * but whose values are: what reads it may skip its absent entries */
  if (!range_finite(q->range) && range_finite(f->range))
    why |= ADAPT_WHY_FINITE;
  return why;
}

/* The executor's hook after query n: the result of a program query that
 * a later query reads is measured once per data (its facts: nnz, value
 * range, non-finite counts, in one pass kept with the tensor, which the
 * run's nnz count then reads; and its level degrees): when the nnz
 * estimate was off by more than ADAPT_FACTOR, the degrees are skewed, or
 * the values are finite where the plan feared inf or NaN, the program is
 * planned again with the real facts, and when that plans the later
 * queries differently, the run stops (EXEC_REPLAN) to start again with
 * the new plan.  After that, a run measures the result again only when
 * the plan narrowed the query's range to values measured before
 * (range_planned): that holds only while the values stay inside it, and
 * when they leave it, the program is planned again with the new facts
 * before any later query reads them.  Other runs pay nothing here. */
static galley_status adapt_after(void *ctx, const PhysPlan *pp, int n,
                                 galley_status st, galley_tensor **res,
                                 galley_error *err) {
  AdaptRun *ar = ctx;
  const PhysQuery *q = &pp->q[n];
  int u = q->user_query;
  if (st != GALLEY_OK || !res || !*res || q->kind != PQ_KERNEL || u < 0 ||
      q->split || strcmp(q->name, ar->gp->prog->queries[u].name) != 0 ||
      !read_later(pp, n))
    return st;
  AdaptFact *f = &ar->gp->actual[u];
  /* looked at once per data; after that only a range narrowed to values
   * measured before can be left, and only a plan made with them has one:
   * any other planned range follows from the inputs' and holds */
  if (f->outcome != ADAPT_NONE && (!f->range_planned || q->assumed_finite))
    return GALLEY_OK;
  ar->gp->facts_passes++;
  galley_facts facts;
  rt_tensor_facts(*res, &facts);
  double fill = galley_tensor_fill(*res);
  Range real = range_of_facts(&facts, fill, 1); /* coarse: for plans */
  /* the exact values: within the plan's range unless the plan narrowed
   * it to values measured before (then a coarse range, which holds
   * them) and these left it */
  int left = !q->assumed_finite &&
             !range_contains(q->range, range_of_facts(&facts, fill, 0));
  if (f->outcome != ADAPT_NONE && !left)
    return GALLEY_OK;
  f->est = q->has_est ? q->est_nnz : -1;
  f->nnz = facts.nnz;
  f->planned = q->range;
  f->range = real;
  /* the degrees of its levels, off the positions the kernel wrote */
  rt_tensor_level_degrees(*res, &f->deg);
  f->has_degrees = 1;
  f->outcome = ADAPT_WITHIN;
  f->why = left ? ADAPT_WHY_LEFT : facts_off(q, f);
  if (!f->why)
    return GALLEY_OK;
  int same = 0;
  f->outcome = ADAPT_SAME;
  st = adapt_plan(ar, &same, err);
  if (st == GALLEY_OK && same && left) {
    /* the plan made for the new values is this one: it did not rely on
     * the old ones.  Its range widens to them, so that the next run does
     * not plan again (the kernels read nothing of it). */
    PhysQuery *mq = &((PhysPlan *)pp)->q[n];
    mq->range = range_join(mq->range, real);
  }
  if (st != GALLEY_OK || same)
    return st;
  if (!left && same_later_plans(ar, pp, n, u)) {
    adapt_discard(ar);
    return GALLEY_OK;
  }
  f->outcome = ADAPT_REPLANNED;
  ar->query = u;
  return EXEC_REPLAN;
}

/* Whether runs of gp measure results and re-plan: the cost planner's
 * plans, on one process (the processes of a distributed run must run
 * one plan). */
static int adaptive(const galley_program *gp) {
  return gp->planner != GALLEY_PLANNER_SIMPLE && !gp->parts &&
         !gp->adapt_off && !gp->no_split;
}

/* The skewed level of f's degrees, in the user's terms, into buf. */
static void skew_why(const AdaptFact *f, char *buf, size_t size) {
  int l = skewed_level(&f->deg);
  int64_t parents = l <= 0 ? 1 : f->deg.children[l - 1];
  snprintf(buf, size, "skewed degrees: a fiber of level %d holds %lld "
           "entries, %.3g on average", l, (long long)f->deg.max_fiber[l],
           (double)f->deg.children[l] / (double)(parents > 0 ? parents : 1));
}

/* What was off in f, in the user's terms, into buf[size]. */
static void adapt_why(const AdaptFact *f, char *buf, size_t size) {
  if ((f->why & ADAPT_WHY_DEGREE) && (f->why & ~ADAPT_WHY_DEGREE)) {
    char other[200], skew[128];
    AdaptFact g = *f;
    g.why &= ~ADAPT_WHY_DEGREE;
    adapt_why(&g, other, sizeof other);
    skew_why(f, skew, sizeof skew);
    snprintf(buf, size, "%.140s, and %.100s", other, skew); /* <= 250 */
    return;
  }
  char r[64];
  range_format(f->range, r, sizeof r);
  if (f->why & ADAPT_WHY_LEFT)
    snprintf(buf, size, "holds values %s, outside those measured before",
             r);
  else if (f->why & ADAPT_WHY_NNZ)
    snprintf(buf, size, "has %lld entries, %.6g estimated%s",
             (long long)f->nnz, f->est,
             f->why & ADAPT_WHY_FINITE ? ", and its values are finite" : "");
  else if (f->why & ADAPT_WHY_FINITE)
    snprintf(buf, size, "holds finite values %s, planned as maybe inf or "
             "NaN", r);
  else if (f->why & ADAPT_WHY_DEGREE) {
    char skew[128];
    skew_why(f, skew, sizeof skew);
    snprintf(buf, size, "has %lld entries, %.6g estimated, and %s",
             (long long)f->nnz, f->est, skew);
  } else
    snprintf(buf, size, "has %lld entries, %.6g estimated",
             (long long)f->nnz, f->est);
}

/* Make the plan of ar the program's (its kernels compiled by the run). */
static void adapt_install(galley_program *gp, AdaptRun *ar) {
  OldKernels old = take_kernels(gp);
  drop_plan(gp);
  gp->plan = ar->plan;
  gp->lplan = ar->lplan;
  gp->source = ar->source;
  gp->source_len = ar->source_len;
  ar->plan = NULL;
  ar->lplan = NULL;
  ar->source = NULL;
  note_planned_ranges(gp, 0);
  keep_same_kernels(gp, &old);
  const AdaptFact *f = &gp->actual[ar->query];
  char why[256];
  adapt_why(f, why, sizeof why);
  /* bounded so that it fits replan_reason (256) */
  snprintf(gp->replan_reason, sizeof gp->replan_reason,
           "query '%.32s' %.150s: the queries after it were planned with "
           "the real facts", gp->prog->queries[ar->query].name, why);
}

/* The measured degrees of a result's levels, one line. */
static void print_degrees(const char *name, const rt_level_degrees *d,
                          FILE *f) {
  fprintf(f, "analyze: degrees: query '%s':", name);
  for (int l = 0; l < d->nlevels; l++) {
    if (!d->known[l]) {
      fprintf(f, "%s level %d not known", l ? ";" : "", l);
      continue;
    }
    fprintf(f, "%s level %d (mode %d): %lld fibers hold entries, at most "
               "%lld, mean %.3g", l ? ";" : "", l, d->mode[l],
            (long long)d->fibers[l], (long long)d->max_fiber[l],
            d->fibers[l] ? (double)d->children[l] / (double)d->fibers[l] : 0);
  }
  fputc('\n', f);
}

void api_print_adaptive(const galley_program *gp, FILE *f) {
  static const char *const what[] = {
      "", "plan kept",
      "planned again with the real facts, the queries after it the same: "
      "plan kept",
      "the queries after it were planned again with the real facts"};
  for (int q = 0; q < gp->prog->nqueries; q++) {
    const AdaptFact *a = &gp->actual[q];
    if (a->outcome == ADAPT_NONE)
      continue;
    char why[256], planned[64], real[64];
    adapt_why(a, why, sizeof why);
    range_format(a->planned, planned, sizeof planned);
    range_format(a->range, real, sizeof real);
    fprintf(f, "analyze: adaptive: query '%s': %.6g estimated, %lld real; "
               "values %s planned, %s real: %s: %s\n",
            gp->prog->queries[q].name, a->est, (long long)a->nnz, planned,
            real, a->why ? why : "the facts are as planned",
            what[a->outcome]);
    if (a->has_degrees)
      print_degrees(gp->prog->queries[q].name, &a->deg, f);
  }
}

/* Run the plan; the outputs go to results[] of their program queries. */
static galley_status execute(galley_program *gp, AdaptRun *ar,
                             galley_error *err) {
  const PhysPlan *pp = gp->plan;
  const ExecParts *parts = gp->parts;
  unsigned char *was_owned = NULL;
  if (ar && !gp->parts) {
    galley_status st = memo_inputs(gp, pp, &ar->memo_input, err);
    if (st != GALLEY_OK)
      return st;
    was_owned = owned_now(gp);
    ar->parts = (ExecParts){.ctx = ar, .reuse = memo_reuse,
                            .computed = memo_computed,
                            .owned = was_owned ? gp->owned : NULL};
    if (adaptive(gp))
      ar->parts.finish = adapt_after;
    parts = &ar->parts;
  }
  galley_tensor **outs = calloc((size_t)pp->noutputs + 1, sizeof *outs);
  ExecStats *stats = calloc((size_t)pp->nq + 1, sizeof *stats);
  if (!gp->pool) /* threads start with the first job that has blocks */
    gp->pool = pool_new(gp->threads);
  galley_status st = !outs || !stats || !gp->pool
                         ? rt_error(err, GALLEY_ENOMEM, "out of memory")
                         : exec_plan_recycled(pp, gp->bound, gp->fns, outs,
                                              stats, parts, gp->pool,
                                              gp->block_work, &gp->recycle,
                                              err);
  unbind_consumed(gp, was_owned);
  free(was_owned);
  for (int k = 0; st == GALLEY_OK && k < pp->noutputs; k++) {
    galley_tensor **slot = &gp->results[gp->outputs[k]];
    if (*slot) /* an output named twice: the first copy serves both */
      galley_tensor_free(outs[k]);
    else
      *slot = outs[k];
  }
  for (int n = 0; st == GALLEY_OK && n < pp->nq; n++) {
    galley_query_info *qi = &gp->qinfo[n];
    qi->name = pp->q[n].name;
    qi->transpose = pp->q[n].kind == PQ_TRANSPOSE;
    qi->seconds = stats[n].seconds;
    qi->stored = stats[n].stored;
    qi->nnz = stats[n].nnz;
    qi->in_place = stats[n].in_place;
    gp->qinfo_kept[n] = (unsigned char)stats[n].reused;
  }
  /* an output's nnz (-1 in stats) is counted from it when asked for */
  for (int k = 0; st == GALLEY_OK && k < pp->noutputs; k++)
    gp->qinfo_result[pp->outputs[k]] = gp->outputs[k];
  free(outs);
  free(stats);
  if (ar) {
    free(ar->memo_input);
    ar->memo_input = NULL;
  }
  return st;
}

/* A result planned as finite was not: plan again without that
 * assumption (until the data changes) and run again. */
static galley_status run_pessimistic(galley_program *p, galley_error *err) {
  free_results(p);
  if (p->log)
    fprintf(p->log, "galleyc: re-planned: %s\n", err ? err->msg : "");
  char why[sizeof p->replan_reason];
  snprintf(why, sizeof why, "%.200s", err ? err->msg : "");
  p->pessimistic = 1;
  drop_plan(p);
  clear_error(err);
  galley_status st = galley_program_run(p, err);
  if (st == GALLEY_OK) {
    snprintf(p->replan_reason, sizeof p->replan_reason, "%s", why);
    p->info.replanned = 1;
  }
  return st;
}

/* A result's facts changed the plan: run again with the new plan (the
 * queries before it run again too; each run measures new queries only,
 * so this ends). */
static galley_status run_adapted(galley_program *p, AdaptRun *ar,
                                 galley_error *err) {
  free_results(p);
  adapt_install(p, ar);
  if (p->log)
    fprintf(p->log, "galleyc: re-planned: %s\n", p->replan_reason);
  char why[sizeof p->replan_reason];
  snprintf(why, sizeof why, "%s", p->replan_reason);
  clear_error(err);
  galley_status st = galley_program_run(p, err);
  if (st == GALLEY_OK && !p->info.replanned) {
    snprintf(p->replan_reason, sizeof p->replan_reason, "%s", why);
    p->info.replanned = 1;
  }
  return st;
}

galley_status galley_program_run(galley_program *p, galley_error *err) {
  galley_backend backend = effective_backend(p);
  if (!tiered(p)) /* an explicit backend: no background compile */
    p->job = jit_job_free(p->job);
  if (backend == GALLEY_BACKEND_REFERENCE)
    return galley_program_run_reference(p, err);
  clear_error(err);
  free_results(p);
  double t0 = now_seconds();
  int replanned = 0;
  galley_status st = api_ensure_plan(p, &replanned, err);
  double t1 = now_seconds();
  galley_run_info info = {.backend = backend};
  if (st == GALLEY_OK) {
    info.reused = !replanned && p->jit &&
                  (tiered(p) || p->jit_backend == backend);
    st = tiered(p) ? ensure_tiered(p, err) : ensure_kernels(p, backend, err);
  }
  /* clang code installed by this run or by galley_program_wait_compiled
   * since the last one */
  info.upgraded = st == GALLEY_OK && p->upgraded;
  info.background_seconds = info.upgraded ? p->upgrade_seconds : 0;
  p->upgraded = 0;
  double t2 = now_seconds();
  if (st == GALLEY_OK) {
    backend = info.backend = p->jit_backend; /* the code that runs */
    info.compiling = p->job && !jit_job_done(p->job, 0);
    st = reset_info(p, backend, p->plan->nq, err);
  }
  AdaptRun ar = {.gp = p, .query = -1};
  if (st == GALLEY_OK)
    st = execute(p, &ar, err);
  if (st == EXEC_ASSUMPTION)
    return run_pessimistic(p, err);
  if (st == EXEC_REPLAN)
    return run_adapted(p, &ar, err);
  if (st != GALLEY_OK) {
    free_results(p);
    return st;
  }
  info.replanned = replanned;
  info.plan_seconds = t1 - t0;
  info.compile_seconds = t2 - t1;
  info.exec_seconds = now_seconds() - t2;
  info.nqueries = p->info.nqueries;
  p->info = info;
  log_run(p);
  return GALLEY_OK;
}

const char *galley_program_source(const galley_program *p) {
  return p->source;
}

galley_status galley_program_print_physical_plan(galley_program *p, FILE *f,
                                                 galley_error *err) {
  clear_error(err);
  galley_status st = api_ensure_plan(p, NULL, err);
  if (st == GALLEY_OK)
    phys_print(p->plan, f);
  return st;
}

/* Bind a data-free stand-in (aot_placeholder) to every unbound input;
 * made[k] holds the ones made. */
static galley_status bind_placeholders(galley_program *p,
                                       const galley_aot_options *opt,
                                       galley_tensor **made,
                                       galley_error *err) {
  galley_status st = GALLEY_OK;
  for (int k = 0; k < p->prog->ninputs && st == GALLEY_OK; k++) {
    if (p->bound[k])
      continue;
    const galley_format *f = opt && opt->formats ? opt->formats[k] : NULL;
    st = aot_placeholder(p->prog, k, f, p->bound, opt && opt->nonfinite,
                         &made[k], err);
    if (st == GALLEY_OK)
      st = galley_program_bind(p, p->prog->inputs[k].name, made[k], err);
  }
  return st;
}

/* relied[k]: whether the plan made for the bound inputs relies on input
 * k storing only finite values, so that the compiled driver must check
 * them (O(nnz) a call): planned again with one of k's stored values made
 * +inf (a view of k over a copy of its values), the C file differs, or
 * that plan fails.  Inputs that are not finite, the plan was made for.
 * Leaves no plan. */
static galley_status finite_reliance(galley_program *p, const char *prefix,
                                     unsigned char *relied,
                                     galley_error *err) {
  int n = p->prog->ninputs;
  unsigned char *none = calloc((size_t)n + 1, 1);
  char *base = NULL;
  galley_status st = none ? api_ensure_plan(p, NULL, err)
                          : rt_error(err, GALLEY_ENOMEM, "out of memory");
  if (st == GALLEY_OK)
    st = aot_source(p->plan, p->bound, none, p->source, prefix, &base, err);
  for (int k = 0; k < n && st == GALLEY_OK; k++) {
    const galley_tensor *t = p->bound[k];
    galley_facts f;
    rt_tensor_facts(t, &f);
    relied[k] = (unsigned char)(rt_facts_finite(&f) != 0);
    if (!relied[k] || t->nval < 1)
      continue;
    galley_tensor *view = malloc(sizeof *view);
    double *val = malloc((size_t)t->nval * sizeof *val);
    if (!view || !val) {
      free(view);
      free(val);
      st = rt_error(err, GALLEY_ENOMEM, "out of memory");
      break;
    }
    *view = *t;
    view->cache = NULL;
    view->borrowed = 1;
    memcpy(val, t->val, (size_t)t->nval * sizeof *val);
    val[0] = 1.0 / 0.0;
    view->val = val;
    p->bound[k] = view;
    drop_stats(p);
    drop_plan(p);
    p->pessimistic = 1;
    galley_error e2;
    char *other = NULL;
    if (api_ensure_plan(p, NULL, &e2) == GALLEY_OK &&
        aot_source(p->plan, p->bound, none, p->source, prefix, &other,
                   &e2) == GALLEY_OK)
      relied[k] = strcmp(base, other) != 0;
    free(other);
    p->bound[k] = t;
    drop_stats(p);
    drop_plan(p);
    galley_tensor_free(view);
    free(val);
  }
  drop_plan(p);
  free(base);
  free(none);
  return st;
}

galley_status galley_program_compile_aot_with(galley_program *p,
                                              const galley_aot_options *opt,
                                              char **c_source, char **header,
                                              galley_error *err) {
  clear_error(err);
  *c_source = NULL;
  *header = NULL;
  const char *prefix = opt && opt->prefix ? opt->prefix : AOT_DEFAULT_PREFIX;
  if (!aot_prefix_valid(prefix))
    return rt_error(err, GALLEY_EINVAL, "bad prefix '%s': expected a C "
                    "identifier of at most 64 characters", prefix);
  galley_tensor **made = calloc((size_t)p->prog->ninputs + 1, sizeof *made);
  if (!made)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  unsigned char *finite = calloc((size_t)p->prog->ninputs + 1, 1);
  galley_status st = finite ? bind_placeholders(p, opt, made, err)
                            : rt_error(err, GALLEY_ENOMEM, "out of memory");
  /* a compiled driver cannot plan again: no optimistic assumptions; and
   * it runs kernels only: no correction pass of exception splitting */
  int pessimistic = p->pessimistic;
  drop_plan(p);
  p->pessimistic = 1;
  p->no_split = 1;
  if (st == GALLEY_OK)
    st = finite_reliance(p, prefix, finite, err);
  p->pessimistic = 1;
  if (st == GALLEY_OK)
    st = api_ensure_plan(p, NULL, err);
  if (st == GALLEY_OK)
    st = aot_source(p->plan, p->bound, finite, p->source, prefix, c_source,
                    err);
  if (st == GALLEY_OK)
    st = aot_header_text(p->plan, p->bound, finite, prefix, header, err);
  drop_plan(p);
  p->pessimistic = pessimistic;
  p->no_split = 0;
  for (int k = 0; k < p->prog->ninputs; k++)
    if (made[k]) {
      if (p->bound[k] == made[k])
        p->bound[k] = NULL;
      galley_tensor_free(made[k]);
    }
  drop_stats(p);
  free(made);
  free(finite);
  if (st != GALLEY_OK) {
    free(*c_source);
    free(*header);
    *c_source = *header = NULL;
  }
  return st;
}

galley_status galley_program_compile_aot(galley_program *p, char **c_source,
                                         char **header, galley_error *err) {
  return galley_program_compile_aot_with(p, NULL, c_source, header, err);
}

void galley_program_run_info(const galley_program *p, galley_run_info *out) {
  *out = p->info;
}

galley_status galley_program_query_info(const galley_program *p, int k,
                                        galley_query_info *out,
                                        galley_error *err) {
  clear_error(err);
  if (k < 0 || k >= p->info.nqueries)
    return rt_error(err, GALLEY_EINVAL, "no query %d in the last run", k);
  *out = p->qinfo[k];
  int q = p->qinfo_result ? p->qinfo_result[k] : -1;
  if (out->nnz < 0 && q >= 0 && p->results[q]) /* an output: count it */
    out->nnz = galley_tensor_nnz(p->results[q]);
  return GALLEY_OK;
}

int galley_program_num_outputs(const galley_program *p) {
  return p->noutputs;
}

const char *galley_program_output_name(const galley_program *p, int k) {
  if (k < 0 || k >= p->noutputs)
    return NULL;
  return p->prog->queries[p->outputs[k]].name;
}

const galley_tensor *galley_program_output(const galley_program *p, int k) {
  if (k < 0 || k >= p->noutputs)
    return NULL;
  return p->results[p->outputs[k]];
}

/* The runtime's parts (rt_par) on the program's pool. */
static void write_on_pool(void *pool, int64_t nparts, rt_task fn, void *ctx) {
  pool_run(pool, nparts, fn, ctx);
}

galley_status galley_program_write_output(const galley_program *p, int k,
                                          FILE *f, galley_error *err) {
  const galley_tensor *t = p ? galley_program_output(p, k) : NULL;
  if (!t)
    return rt_error(err, GALLEY_EINVAL, "galley_program_write_output: no "
                    "output %d of the last run", k);
  rt_par par = {.run = p->pool ? write_on_pool : NULL, .pool = p->pool};
  return rt_write_tns_stream_par(t, f, &par, err);
}

galley_tensor *galley_program_take_output(galley_program *p, int k) {
  if (!p || k < 0 || k >= p->noutputs)
    return NULL;
  galley_tensor **slot = &p->results[p->outputs[k]];
  galley_tensor *t = *slot;
  *slot = NULL; /* an output named twice is taken once */
  return t;
}

void galley_program_print_plan(const galley_program *p, FILE *f) {
  plan_print(p->prog, f);
}

/* ------------------------------------------------------------------ */
/* explain: the plans and their estimates                              */
/* ------------------------------------------------------------------ */

galley_status galley_program_plan(galley_program *p, galley_error *err) {
  clear_error(err);
  return api_ensure_plan(p, NULL, err);
}

int galley_program_plan_num_queries(const galley_program *p,
                                    galley_plan_level level) {
  if (level == GALLEY_PLAN_LOGICAL)
    return p->lplan ? p->lplan->nq : 0;
  return level == GALLEY_PLAN_PHYSICAL && p->plan ? p->plan->nq : 0;
}

static galley_status check_plan_query(const galley_program *p,
                                      galley_plan_level level, int k,
                                      galley_error *err) {
  clear_error(err);
  if (k < 0 || k >= galley_program_plan_num_queries(p, level))
    return rt_error(err, GALLEY_EINVAL, "no %s query %d in the last plan",
                level == GALLEY_PLAN_LOGICAL ? "logical" : "physical", k);
  return GALLEY_OK;
}

galley_status galley_program_plan_query(const galley_program *p,
                                        galley_plan_level level, int k,
                                        galley_plan_query *out,
                                        galley_error *err) {
  galley_status st = check_plan_query(p, level, k, err);
  if (st != GALLEY_OK)
    return st;
  memset(out, 0, sizeof *out);
  if (level == GALLEY_PLAN_LOGICAL) {
    const LogicalQuery *q = &p->lplan->q[k];
    out->name = q->name;
    out->est_nnz = q->est_nnz;
    out->cost = q->cost;
    return GALLEY_OK;
  }
  const PhysQuery *q = &p->plan->q[k];
  out->name = q->name;
  out->transpose = q->kind == PQ_TRANSPOSE;
  out->est_nnz = q->has_est ? q->est_nnz : -1;
  out->cost = q->has_est && q->est_cost >= 0 ? q->est_cost : -1;
  return GALLEY_OK;
}

/* Line k of the printed logical plan, without its "  est N  cost C"
 * suffix (logical_print prints whole plans only). */
static galley_status print_logical_query(const LogicalPlan *lp, int k,
                                         FILE *f, galley_error *err) {
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  if (!m)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  logical_print(lp, m);
  if (fclose(m) != 0 || !text) {
    free(text);
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  char *line = text;
  for (int n = 0; n < k && line; n++) {
    char *nl = strchr(line, '\n');
    line = nl ? nl + 1 : NULL;
  }
  size_t n = line ? strcspn(line, "\n") : 0;
  for (size_t c = n; line && c-- > 0;)
    if (strncmp(line + c, "  est ", 6) == 0) {
      n = c;
      break;
    }
  if (line)
    fwrite(line, 1, n, f);
  free(text);
  return GALLEY_OK;
}

galley_status galley_program_print_plan_query(const galley_program *p,
                                              galley_plan_level level, int k,
                                              FILE *f, galley_error *err) {
  galley_status st = check_plan_query(p, level, k, err);
  if (st != GALLEY_OK)
    return st;
  if (level == GALLEY_PLAN_LOGICAL)
    return print_logical_query(p->lplan, k, f, err);
  phys_print_query(p->plan, k, f);
  return GALLEY_OK;
}

galley_status galley_program_print_logical_plan(galley_program *p, FILE *f,
                                                galley_error *err) {
  clear_error(err);
  galley_status st = api_ensure_plan(p, NULL, err);
  if (st == GALLEY_OK && p->lplan)
    logical_print(p->lplan, f);
  return st;
}
