/*
 * iterate.c -- iterative graph algorithms driven from a C loop through
 * the context API: each program is one step, parsed and bound once, run
 * again and again with its results handed back as the next step's
 * inputs, until a fixed point.
 *
 * README
 *   iterate [-t] [-v] [-w] [-b BACKEND] [-n MAX] [-e TOL] [-o FILE] [-d DIR]
 *           pagerank|pagerank1|bellman-ford|bfs GRAPH.mtx [SOURCE]
 *
 *   pagerank      PageRank with dangling nodes, damping 0.85, from the
 *                 uniform ranks (an empty vector whose fill is 1/n) until
 *                 the L1 change delta is below TOL (default 1e-10): the
 *                 out-edge weights once (DIR/iterate/pagerank_weights.tin),
 *                 then DIR/iterate/pagerank_step.tin (A, w, r -> rnew,
 *                 delta) step after step;
 *   pagerank1     the same with DIR/pagerank.tin (A, r -> rnew, delta), the
 *                 one-program step that examples/pagerank.sh iterates: it
 *                 sums A's rows again at every step;
 *   bellman-ford  DIR/iterate/bellman_ford_step.tin (W, d -> dnew,
 *                 changed): shortest path lengths from SOURCE (1-based,
 *                 default 1) over the (min, +) semiring with fill inf,
 *                 until no distance improves (an error after n steps:
 *                 a negative cycle);
 *   bfs           DIR/bfs.tin (A, f, v -> next, count, visited):
 *                 breadth-first levels from SOURCE until the frontier is
 *                 empty; the levels are collected here from each `next`.
 *
 *   Every step binds the previous step's results and runs the same
 *   program again: the plan and the kernels are reused while the data
 *   fits them (galley_program_run says when; a frontier that grows past
 *   twice its planned size is planned again, for its new size).  A
 *   result belongs to the program only until its next run, so the loop
 *   takes the ranks from the program as they are (galley_program_take_
 *   output) and keeps a copy of the others, O(stored entries): the BFS
 *   frontier in a bytemap, the distances with only their finite
 *   entries, in a bytemap (copy_as says why).  The BFS visited set is
 *   handed back to the program (galley_program_bind_owned): the next
 *   step's max(v[j], next[j]) then writes only the new frontier's
 *   entries into it, in place, instead of a pass over every vertex.  The
 *   inputs declared without `fill` take the fill of the tensor bound to
 *   them (tin(5), "Fills from data"): pagerank's r starts as an empty
 *   vector of fill 1/n and then is rnew, whose fill is the teleport
 *   share.
 *
 *   Writes the final vector (ranks, distances or levels, fill inf for
 *   unreached vertices) to FILE as .tns (default: none) and prints the
 *   number of steps.  -t prints one line per step ("step K MS ms
 *   replanned|reused BACKEND (plan P, compile C, run R)": the whole
 *   step from its binds to its results fed back, then what
 *   galley_run_info says of its run), then the median and the mean over
 *   the steps after the first; -n caps the steps (default 1000); -b
 *   chooses the backend (default, tcc, clang, reference); -w waits after
 *   each run of the default backend until clang's code for its kernels
 *   is compiled (so every run that reuses a plan runs clang's code, and
 *   the kernel cache holds them: later loops load them at once;
 *   benchmarks/iterate.py warms up so); -v logs each
 *   run, its queries and why it planned again to stderr; DIR holds the
 *   programs (default: the source tree's examples/ when built by make,
 *   else ..).
 *
 *       cc iterate.c $(pkg-config --cflags --libs galley) -o iterate
 *       ./iterate -o ranks.tns pagerank \
 *           ../../../shared/data/matrices/celegansneural.mtx
 *
 *   (`make check` builds it as examples/iterate/iterate and runs it from
 *   tests/test_iterate.sh, which checks every answer against SciPy.)
 */
#include <galley.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef ITERATE_TIN_DIR
#define ITERATE_TIN_DIR ".."
#endif

typedef struct Options {
  int timing, verbose, wait, max_steps;
  double tol;
  const char *out, *dir, *backend, *algo, *graph;
  int64_t source; /* 0-based */
} Options;

/* One program being iterated, with what the loop measures. */
typedef struct Loop {
  const Options *opt;
  galley_program *p;
  double *ms;   /* time of each step */
  int steps;
  /* copies fed back that the program is still bound to: freed once the
   * new ones are bound (so that a new copy never reuses the address of
   * one the program still holds) */
  galley_tensor *retired[4];
  int nretired;
  double t0;            /* when the step began */
  galley_run_info info; /* its run */
} Loop;

static int failed(galley_status st, const galley_error *err) {
  if (st != GALLEY_OK)
    fprintf(stderr, "iterate: %s\n",
            err->msg[0] ? err->msg : galley_status_name(st));
  return st != GALLEY_OK;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* Parse DIR/NAME with the context's options; 1 on failure. */
static int open_program(const galley_context *ctx, const Options *o,
                        const char *name, Loop *loop) {
  char path[4096], *diag = NULL;
  galley_error err;
  snprintf(path, sizeof path, "%s/%s", o->dir, name);
  memset(loop, 0, sizeof *loop);
  loop->opt = o;
  loop->ms = malloc(sizeof *loop->ms * (size_t)(o->max_steps + 1));
  if (!loop->ms || failed(galley_context_program_read(ctx, path, &loop->p,
                                                      &diag, &err), &err)) {
    if (diag)
      fputs(diag, stderr);
    free(diag);
    return 1;
  }
  return 0;
}

static void free_retired(Loop *loop) {
  while (loop->nretired > 0)
    galley_tensor_free(loop->retired[--loop->nretired]);
}

static void close_program(Loop *loop) {
  galley_program_free(loop->p);
  free_retired(loop);
  free(loop->ms);
}

/* A step begins: bind each NAME to its tensor (a NULL-terminated list
 * of pairs). */
static int bind_all(Loop *loop, const char *const *names,
                    galley_tensor *const *tensors) {
  galley_error err;
  loop->t0 = now_ms();
  for (int k = 0; names[k]; k++)
    if (failed(galley_program_bind(loop->p, names[k], tensors[k], &err), &err))
      return 1;
  free_retired(loop);
  return 0;
}

/* Run the step's program (binds are O(1) after the first: a bound
 * tensor's facts are made once). */
static int run_step(Loop *loop) {
  galley_error err;
  if (failed(galley_program_run(loop->p, &err), &err))
    return 1;
  galley_program_run_info(loop->p, &loop->info);
  /* -w: clang's code for these kernels, into its cache, before going on
   * (no clang is not an error here: the kernels stay tcc's) */
  if (loop->opt->wait &&
      galley_program_wait_compiled(loop->p, &err) != GALLEY_OK)
    fprintf(stderr, "iterate: %s\n", err.msg);
  return 0;
}

/* A step ends, its results fed back: its time, from the first bind on,
 * is that of the whole step (binding, running, copying the results). */
static void end_step(Loop *loop) {
  double ms = now_ms() - loop->t0;
  const galley_run_info *i = &loop->info;
  loop->ms[loop->steps++] = ms;
  if (loop->opt->timing)
    printf("step %d %.4f ms %s %s (plan %.4f, compile %.4f, run %.4f)\n",
           loop->steps, ms, i->replanned ? "replanned" : "reused",
           galley_backend_name(i->backend), 1e3 * i->plan_seconds,
           1e3 * i->compile_seconds, 1e3 * i->exec_seconds);
}

/* The output called name of the last run. */
static const galley_tensor *output(const Loop *loop, const char *name) {
  for (int k = 0; k < galley_program_num_outputs(loop->p); k++)
    if (strcmp(galley_program_output_name(loop->p, k), name) == 0)
      return galley_program_output(loop->p, k);
  return NULL;
}

static double scalar(const Loop *loop, const char *name) {
  return galley_tensor_get(output(loop, name), NULL, NULL);
}

/* How a result is fed back. */
typedef enum Feed {
  FEED_AS_IS,  /* taken from the program as it is (the ranks: dense) */
  FEED_DENSE,  /* all-dense: the BFS visited set, 0/1 with fill 0 */
  FEED_SPARSE  /* only the entries other than the fill, in a bytemap: the
                  distances (fill inf), the BFS frontier (fill 0) */
} Feed;

/* Why these formats.  The plans look the fed-back vectors up while they
 * walk the graph (d[i], f[i] and v[j] are lookups), so they should be
 * dense or bytemaps: O(1), where a sorted list needs a binary search.
 * The visited set is dense.  The frontier and the distances are
 * bytemaps, which can also be walked by their entries alone: while they
 * are small, the planner picks a push plan (f[i] and d[i] lead the
 * outer loop and their rows of the graph are scattered), then, past half
 * the vertices, a pull plan (the graph walked once, f looked up).  The
 * distances cannot be dense: a dense result stores its fill values too,
 * and a stored inf makes the planner take d for a vector that may hold
 * inf or NaN, so that it no longer skips the absent edges (explain says
 * so) and visits every pair. */
static int copy_as(const galley_tensor *t, Feed feed, galley_tensor **copy,
                   galley_error *err) {
  galley_format fmt;
  galley_tensor_format(t, &fmt);
  if (feed == FEED_DENSE)
    fmt = galley_format_dense(1);
  if (feed != FEED_SPARSE)
    return galley_tensor_convert(t, &fmt, copy, err);
  int64_t nnz, *coords = NULL, dim = galley_tensor_dim(t, 0);
  double *vals = NULL;
  galley_format bytemap = {.order = 1, .kinds = {GALLEY_BYTEMAP}};
  galley_status st = galley_tensor_to_coo(t, GALLEY_EXPORT_SKIP_FILL, &nnz,
                                          &coords, &vals, err);
  if (st == GALLEY_OK)
    st = galley_tensor_from_coo(1, &dim, nnz, coords, vals,
                                galley_tensor_fill(t), &bytemap, copy, err);
  free(coords);
  free(vals);
  return st;
}

/* Whether t is already in the form feed asks for (then it is taken as
 * it is, without a copy): all dense for FEED_DENSE; for FEED_SPARSE a
 * bytemap that stores no more than twice its non-fill entries
 * (a bytemap result may keep a few entries that became the fill; a list
 * is copied too: the plans look the vector up, and one format for every
 * step keeps the plans). */
static int fed_as_is(const galley_tensor *t, Feed feed) {
  galley_format fmt;
  galley_tensor_format(t, &fmt);
  if (feed == FEED_DENSE)
    return fmt.kinds[0] == GALLEY_DENSE;
  return fmt.kinds[0] == GALLEY_BYTEMAP &&
         galley_tensor_stored(t) <= 2 * galley_tensor_nnz(t) + 16;
}

/* The output called name taken from the program (galley_program_take_
 * output: no copy), or NULL. */
static galley_tensor *take(Loop *loop, const char *name) {
  for (int k = 0; k < galley_program_num_outputs(loop->p); k++)
    if (strcmp(galley_program_output_name(loop->p, k), name) == 0)
      return galley_program_take_output(loop->p, k);
  return NULL;
}

/* The output called name, to bind for the next step: taken as it is, or
 * a copy in the format feed asks for; it replaces *slot (freed after the
 * next bind).  1 on failure. */
static int feed_back(Loop *loop, const char *name, Feed feed,
                     galley_tensor **slot) {
  galley_tensor *copy = NULL;
  galley_error err;
  if (feed != FEED_AS_IS && fed_as_is(output(loop, name), feed))
    feed = FEED_AS_IS;
  if (feed == FEED_AS_IS) {
    copy = take(loop, name);
    if (!copy) {
      fprintf(stderr, "iterate: error: no output '%s' to feed back\n", name);
      return 1;
    }
  } else if (failed(copy_as(output(loop, name), feed, &copy, &err), &err))
    return 1;
  loop->retired[loop->nretired++] = *slot;
  *slot = copy;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* With -t: the median time of the steps after the first (which plans
 * and compiles). */
static void report_timing(const Loop *loop) {
  if (!loop->opt->timing || loop->steps < 2)
    return;
  int n = loop->steps - 1;
  double *t = malloc(sizeof *t * (size_t)n);
  if (!t)
    return;
  memcpy(t, loop->ms + 1, sizeof *t * (size_t)n);
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  double total = 0;
  for (int k = 0; k < n; k++)
    total += t[k];
  printf("median %.4f ms mean %.4f ms over %d steps after the first "
         "(first %.4f ms)\n",
         n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]), total / n, n,
         loop->ms[0]);
  free(t);
}

static int write_result(const Options *o, const galley_tensor *t) {
  galley_error err;
  return o->out && failed(galley_tensor_write(t, o->out, GALLEY_FILE_TNS,
                                              &err), &err);
}

/* A vector of n entries with nnz stored ones (coords, vals) and a fill,
 * stored in the level kind fed back later (see copy_as). */
static galley_tensor *vector(int64_t n, int64_t nnz, const int64_t *coords,
                             const double *vals, double fill,
                             galley_level_kind kind) {
  galley_format fmt = {.order = 1, .kinds = {kind}};
  galley_tensor *t = NULL;
  galley_error err;
  if (failed(galley_tensor_from_coo(1, &n, nnz, coords, vals, fill, &fmt, &t,
                                    &err), &err))
    return NULL;
  return t;
}

/* ---- PageRank: r = rnew until the L1 change is below tol ---- */

/* The out-edge weights w of A (pagerank_weights.tin, run once): a copy
 * in *w; 1 on failure. */
static int pagerank_weights(const galley_context *ctx, const Options *o,
                            galley_tensor *A, galley_tensor **w) {
  Loop loop = {.opt = o};
  const char *names[] = {"A", NULL};
  galley_tensor *bound[] = {A};
  int bad = open_program(ctx, o, "iterate/pagerank_weights.tin", &loop) ||
            bind_all(&loop, names, bound);
  galley_error err;
  double t0 = now_ms();
  bad = bad || failed(galley_program_run(loop.p, &err), &err) ||
        feed_back(&loop, "w", FEED_AS_IS, w);
  if (!bad && o->timing)
    printf("weights %.4f ms (once)\n", now_ms() - t0);
  close_program(&loop); /* frees the NULL *w it replaced */
  return bad;
}

/* one_program: examples/pagerank.tin, which recomputes the out-degrees
 * at every step; else the weights once and iterate/pagerank_step.tin. */
static int pagerank(const galley_context *ctx, const Options *o,
                    galley_tensor *A, int one_program) {
  Loop loop = {.opt = o};
  int64_t n = galley_tensor_dim(A, 0);
  galley_tensor *r = vector(n, 0, NULL, NULL, 1.0 / (double)n,
                          GALLEY_DENSE), *w = NULL;
  int bad = !r || (!one_program && pagerank_weights(ctx, o, A, &w)) ||
            open_program(ctx, o, one_program ? "pagerank.tin"
                                             : "iterate/pagerank_step.tin",
                         &loop);
  double delta = INFINITY;
  const char *names[] = {"A", "r", one_program ? NULL : "w", NULL};
  while (!bad && loop.steps < o->max_steps && !(delta < o->tol)) {
    galley_tensor *bound[] = {A, r, w};
    bad = bind_all(&loop, names, bound) || run_step(&loop) ||
          feed_back(&loop, "rnew", FEED_AS_IS, &r);
    if (!bad) {
      delta = scalar(&loop, "delta");
      end_step(&loop);
    }
  }
  if (!bad) {
    printf("pagerank: %d steps, L1 change %.3g\n", loop.steps, delta);
    report_timing(&loop);
    bad = write_result(o, r);
  }
  close_program(&loop);
  galley_tensor_free(r);
  galley_tensor_free(w);
  return bad;
}

/* ---- Bellman-Ford: d = dnew until no distance improves ---- */

static int bellman_ford(const galley_context *ctx, const Options *o,
                        galley_tensor *W) {
  Loop loop = {.opt = o};
  int64_t n = galley_tensor_dim(W, 0);
  double zero = 0;
  galley_tensor *d = vector(n, 1, &o->source, &zero, INFINITY,
                           GALLEY_BYTEMAP);
  int bad = !d || open_program(ctx, o, "iterate/bellman_ford_step.tin", &loop);
  double changed = 1;
  const char *names[] = {"W", "d", NULL};
  /* without a negative cycle, at most n - 1 steps improve a distance */
  int64_t cap = o->max_steps < n ? o->max_steps : n;
  while (!bad && loop.steps < cap && changed > 0) {
    galley_tensor *bound[] = {W, d};
    bad = bind_all(&loop, names, bound) || run_step(&loop) ||
          feed_back(&loop, "dnew", FEED_SPARSE, &d);
    if (!bad) {
      changed = scalar(&loop, "changed");
      end_step(&loop);
    }
  }
  if (!bad && changed > 0 && loop.steps == n) {
    fprintf(stderr, "iterate: a negative cycle is reachable from vertex "
                    "%lld: distances still improve after %d steps\n",
            (long long)o->source + 1, loop.steps);
    bad = 1;
  } else if (!bad) {
    if (changed > 0)
      printf("bellman-ford: stopped after %d steps (-n), still improving\n",
             loop.steps);
    else
      printf("bellman-ford: %d steps to the fixed point\n", loop.steps);
    report_timing(&loop);
    bad = write_result(o, d);
  }
  close_program(&loop);
  galley_tensor_free(d);
  return bad;
}

/* ---- BFS: f = next, v = visited until the frontier is empty ---- */

/* Hand the output called name to the program as its input `input`
 * (galley_program_bind_owned), all dense: taken as it is when it is,
 * else a dense copy.  The program owns it from now on and may update it
 * in place at the next run (the visited set: only the new frontier's
 * entries are written).  1 on failure. */
static int hand_back(Loop *loop, const char *name, const char *input) {
  galley_error err;
  galley_tensor *t = NULL;
  if (fed_as_is(output(loop, name), FEED_DENSE))
    t = take(loop, name);
  else if (failed(copy_as(output(loop, name), FEED_DENSE, &t, &err), &err))
    return 1;
  if (!t) {
    fprintf(stderr, "iterate: error: no output '%s' to feed back\n", name);
    return 1;
  }
  if (failed(galley_program_bind_owned(loop->p, input, t, &err), &err)) {
    galley_tensor_free(t);
    return 1;
  }
  return 0;
}

typedef struct Levels {
  double *level;   /* per vertex; inf when not reached */
  double *scratch; /* a dense copy of the frontier */
  int64_t n;
  double depth;
} Levels;

static int record_level(void *ud, const int64_t *c, double v) {
  Levels *l = ud;
  if (v != 0)
    l->level[c[0]] = l->depth;
  return 0;
}

/* The vertices of the frontier `next` are at the current depth: a walk
 * over its stored entries when it is sparse, else a plain loop over a
 * dense copy (a call per entry of a dense vector costs more than the
 * step's kernel on a large graph). */
static int record_frontier(const galley_tensor *next, Levels *l) {
  galley_format fmt;
  galley_error err;
  galley_tensor_format(next, &fmt);
  if (fmt.kinds[0] != GALLEY_DENSE)
    return galley_tensor_foreach(next, record_level, l);
  if (failed(galley_tensor_to_dense(next, l->scratch, l->n, &err), &err))
    return 1;
  for (int64_t k = 0; k < l->n; k++)
    if (l->scratch[k] != 0)
      l->level[k] = l->depth;
  return 0;
}

static int bfs(const galley_context *ctx, const Options *o,
               galley_tensor *A) {
  Loop loop = {.opt = o};
  int64_t n = galley_tensor_dim(A, 0);
  double one = 1;
  galley_tensor *f = vector(n, 1, &o->source, &one, 0, GALLEY_BYTEMAP);
  galley_tensor *v = vector(n, 1, &o->source, &one, 0, GALLEY_DENSE);
  Levels lv = {malloc(sizeof(double) * (size_t)n),
               malloc(sizeof(double) * (size_t)n), n, 0};
  int bad = !f || !v || !lv.level || !lv.scratch ||
            open_program(ctx, o, "bfs.tin", &loop);
  for (int64_t k = 0; !bad && k < n; k++)
    lv.level[k] = k == o->source ? 0 : INFINITY;
  double count = 1;
  const char *names[] = {"A", "f", NULL};
  galley_error err;
  if (!bad && failed(galley_program_bind_owned(loop.p, "v", v, &err), &err))
    bad = 1;
  else if (!bad)
    v = NULL; /* the program's now */
  while (!bad && loop.steps < o->max_steps && count > 0) {
    galley_tensor *bound[] = {A, f};
    bad = bind_all(&loop, names, bound) || run_step(&loop);
    lv.depth++;
    bad = bad || record_frontier(output(&loop, "next"), &lv) ||
          feed_back(&loop, "next", FEED_SPARSE, &f) ||
          hand_back(&loop, "visited", "v");
    if (!bad) {
      count = scalar(&loop, "count");
      end_step(&loop);
    }
  }
  galley_tensor *levels = NULL;
  if (!bad) {
    printf("bfs: %d steps, depth %g\n", loop.steps, lv.depth - 1);
    report_timing(&loop);
    galley_format dense = galley_format_dense(1);
    bad = failed(galley_tensor_from_dense(1, &n, lv.level, INFINITY, &dense,
                                          &levels, &err), &err) ||
          write_result(o, levels);
  }
  close_program(&loop);
  galley_tensor_free(levels);
  galley_tensor_free(f);
  galley_tensor_free(v);
  free(lv.level);
  free(lv.scratch);
  return bad;
}

/* ---- the command line ---- */

static int usage(void) {
  fprintf(stderr, "usage: iterate [-t] [-v] [-w] [-b BACKEND] [-n MAX] "
                  "[-e TOL] [-o FILE] [-d DIR]\n"
                  "               pagerank|pagerank1|bellman-ford|bfs "
                  "GRAPH.mtx [SOURCE]\n");
  return 2;
}

/* 1 when the arguments make sense; fills o. */
static int parse_args(int argc, char **argv, Options *o) {
  *o = (Options){.max_steps = 1000, .tol = 1e-10, .dir = ITERATE_TIN_DIR};
  int k = 1;
  for (; k < argc && argv[k][0] == '-'; k++) {
    const char *a = argv[k];
    int takes = strchr("bneod", a[1]) && a[1] && !a[2];
    if (takes && k + 1 == argc)
      return 0;
    if (strcmp(a, "-t") == 0)
      o->timing = 1;
    else if (strcmp(a, "-w") == 0)
      o->wait = 1;
    else if (strcmp(a, "-v") == 0)
      o->verbose = 1;
    else if (!takes)
      return 0;
    else if (a[1] == 'b')
      o->backend = argv[++k];
    else if (a[1] == 'n')
      o->max_steps = atoi(argv[++k]);
    else if (a[1] == 'e')
      o->tol = atof(argv[++k]);
    else if (a[1] == 'o')
      o->out = argv[++k];
    else
      o->dir = argv[++k];
  }
  if (argc - k < 2 || argc - k > 3 || o->max_steps < 1)
    return 0;
  o->algo = argv[k];
  o->graph = argv[k + 1];
  o->source = argc - k == 3 ? atoll(argv[k + 2]) - 1 : 0;
  return strcmp(o->algo, "pagerank") == 0 ||
         strcmp(o->algo, "pagerank1") == 0 ||
         strcmp(o->algo, "bellman-ford") == 0 || strcmp(o->algo, "bfs") == 0;
}

/* The context: the backend of -b and the log of -v. */
static int make_context(const Options *o, galley_context **ctx) {
  galley_backend backend = GALLEY_BACKEND_DEFAULT;
  galley_error err;
  return failed(galley_context_create(ctx, &err), &err) ||
         (o->backend &&
          (failed(galley_backend_parse(o->backend, &backend, &err), &err) ||
           failed(galley_context_set_backend(*ctx, backend, &err), &err))) ||
         failed(galley_context_set_log(*ctx, o->verbose ? 3 : 0, stderr, &err),
                &err);
}

int main(int argc, char **argv) {
  Options o;
  if (!parse_args(argc, argv, &o))
    return usage();
  galley_context *ctx = NULL;
  galley_tensor *G = NULL;
  galley_error err;
  int bad = failed(galley_tensor_read(o.graph, GALLEY_FILE_AUTO, NULL, &G,
                                      &err), &err);
  if (!bad && (galley_tensor_order(G) != 2 ||
               galley_tensor_dim(G, 0) != galley_tensor_dim(G, 1))) {
    fprintf(stderr, "iterate: %s is not a square matrix\n", o.graph);
    bad = 1;
  }
  if (!bad && (o.source < 0 || o.source >= galley_tensor_dim(G, 0))) {
    fprintf(stderr, "iterate: source %lld is not a vertex of %s (1..%lld)\n",
            (long long)o.source + 1, o.graph,
            (long long)galley_tensor_dim(G, 0));
    bad = 1;
  }
  bad = bad || make_context(&o, &ctx);
  if (!bad && strncmp(o.algo, "pagerank", 8) == 0)
    bad = pagerank(ctx, &o, G, strcmp(o.algo, "pagerank1") == 0);
  else if (!bad && strcmp(o.algo, "bellman-ford") == 0)
    bad = bellman_ford(ctx, &o, G);
  else if (!bad)
    bad = bfs(ctx, &o, G);
  galley_context_free(ctx);
  galley_tensor_free(G);
  return bad ? 1 : 0;
}
