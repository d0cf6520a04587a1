/*
 * aot_host.c -- a test host for any program compiled by `galleyc compile`
 * (default prefix), built by tests/test_compile.sh with the program's C
 * file and libgalley (only to read the input files and lay them out in
 * the formats the compiled program takes: galley_aot_input_formats[]).
 *
 *   aot_host OUTDIR FILE...     the inputs in declaration order
 *
 * Writes every output to OUTDIR/NAME.tns as `galleyc run` does (1-based
 * coordinates, %.17g values, only entries that differ from the fill) with
 * its own writer, so the outputs are read only through galley_rt.h's
 * layout.  On an error of the entry point prints its code and message
 * and exits 1 (with AOT_HOST_TIME set, prints the run's wall time to
 * stderr; AOT_HOST_REPS=N runs it N - 1 times more before and prints
 * the fastest of those).  Options before OUTDIR: --w64 passes every input with
 * 64-bit indices (the driver copies them to the compiled widths);
 * --threads N runs galley_aot_run_ex on N threads; --pool N runs
 * galley_aot_run_threads three times on one galley_aot_threads_new(N)
 * handle (its workers kept between the runs) and writes the last
 * outputs; --full adds its GALLEY_AOT_CHECK_FULL input validation;
 * --prepare calls galley_aot_prepare on the handle first; --budget B
 * sets the handle's memory budget to B bytes (galley_aot_threads_set_
 * memory_budget).  A handle's options without --pool use a handle of 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "galley.h"
#include "prog.h"

/* Write the entries of t under position p of level l. */
static void write_entries(FILE *f, const struct galley_tensor *t, int l,
                          galley_pos p, int64_t *c) {
  if (l == t->order) {
    double v = t->val[p];
    if (v == t->fill || (v != v && t->fill != t->fill))
      return;
    for (int m = 0; m < t->order; m++)
      fprintf(f, "%lld ", (long long)c[m] + 1);
    if (v != v)
      fprintf(f, "nan\n");
    else
      fprintf(f, "%.17g\n", v);
    return;
  }
  const galley_level *L = &t->lvl[l];
  galley_pos end = galley_rt_walk_end(L, p);
  for (galley_pos k = galley_rt_walk_begin(L, p); k < end; k++) {
    c[L->mode] = galley_rt_walk_crd(L, k);
    write_entries(f, t, l + 1, galley_rt_walk_child(L, p, k), c);
  }
}

static int write_tns(const struct galley_tensor *t, const char *dir,
                     const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.tns", dir, name);
  FILE *f = fopen(path, "w");
  if (!f)
    return -1;
  int64_t c[GALLEY_RT_MAX_ORDER] = {0};
  fprintf(f, "# dims:");
  for (int m = 0; m < t->order; m++)
    fprintf(f, " %lld", (long long)t->dims[m]);
  if (t->fill != t->fill)
    fprintf(f, "\n# fill: nan\n");
  else
    fprintf(f, "\n# fill: %.17g\n", t->fill);
  write_entries(f, t, 0, 0, c);
  return fclose(f);
}

/* The n values of *a32 as a new 64-bit array; frees *a32 (set NULL). */
static int64_t *widen(int32_t **a32, int64_t n) {
  int64_t *a = malloc((size_t)(n + 1) * sizeof *a);
  if (!a)
    abort();
  for (int64_t k = 0; k < n; k++)
    a[k] = (*a32)[k];
  free(*a32);
  *a32 = NULL;
  return a;
}

/* Input k read from path, laid out in the compiled format. */
static galley_tensor *load_input(int k, const char *path, int w64) {
  galley_error err = {0};
  galley_tensor *c = NULL;
  galley_format fmt;
  const char *text = galley_aot_input_formats[k];
  /* read straight into the format: explicit entries equal to the file's
   * fill stay stored (a conversion would drop them, but a declared fill
   * gives them meaning) */
  int order = strcmp(text, "scalar") != 0; /* one level per comma more */
  for (const char *p = text; order > 0 && *p; p++)
    order += *p == ',';
  if (order > 0 &&
      galley_format_parse(text, order, &fmt, &err) != GALLEY_OK)
    goto fail;
  if (galley_tensor_read(path, GALLEY_FILE_AUTO, order > 0 ? &fmt : NULL, &c,
                         &err) != GALLEY_OK)
    goto fail;
  if (w64) { /* widen every list, bytemap and hash level by hand */
    for (int l = 0; l < c->order; l++) {
      galley_level *L = &c->lvl[l];
      if (!L->idx32)
        continue;
      L->pos = widen(&L->pos32, L->npar + 1);
      L->crd = widen(&L->crd32, L->nset);
      if (L->kind == GALLEY_RT_HASH) {
        L->qos = widen(&L->qos32, L->nset);
        L->key = widen(&L->key32, L->hcap);
        L->slot = widen(&L->slot32, L->hcap);
      }
      L->idx32 = 0;
    }
    galley_tensor_touch(c);
  }
  return c;
fail:
  fprintf(stderr, "aot_host: %s: %s\n", path, err.msg);
  exit(2);
}

int main(int argc, char **argv) {
  int a = 1, w64 = 0, threads = -1, pool = -1, prepare = 0;
  double budget = -1;
  unsigned flags = 0;
  for (; a < argc && strncmp(argv[a], "--", 2) == 0; a++) {
    if (strcmp(argv[a], "--w64") == 0)
      w64 = 1;
    else if (strcmp(argv[a], "--full") == 0)
      flags |= GALLEY_AOT_CHECK_FULL;
    else if (strcmp(argv[a], "--threads") == 0 && a + 1 < argc)
      threads = atoi(argv[++a]);
    else if (strcmp(argv[a], "--pool") == 0 && a + 1 < argc)
      pool = atoi(argv[++a]);
    else if (strcmp(argv[a], "--prepare") == 0)
      prepare = 1;
    else if (strcmp(argv[a], "--budget") == 0 && a + 1 < argc)
      budget = atof(argv[++a]);
    else
      break;
  }
  if (argc - a - 1 != GALLEY_AOT_NUM_INPUTS) {
    fprintf(stderr, "usage: aot_host [--w64] [--threads N] [--pool N] "
            "[--full] [--prepare] [--budget BYTES] OUTDIR "
            "FILE... (%d inputs)\n",
            GALLEY_AOT_NUM_INPUTS);
    return 2;
  }
  const char *dir = argv[a++];
  galley_tensor *in[GALLEY_AOT_NUM_INPUTS + 1];
  struct galley_tensor *out[GALLEY_AOT_NUM_OUTPUTS + 1];
  for (int k = 0; k < GALLEY_AOT_NUM_INPUTS; k++)
    in[k] = load_input(k, argv[a + k], w64);
  char msg[512];
  struct timespec t0, t1;
  /* AOT_HOST_REPS=N: N - 1 runs before the timed one (by hand) */
  const char *reps_env = getenv("AOT_HOST_REPS");
  double best = -1;
  for (long r = reps_env ? atol(reps_env) : 1; r > 1; r--) {
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (galley_aot_run_ex((const struct galley_tensor *const *)in, out,
                          threads < 0 ? 1 : threads, flags, msg,
                          sizeof msg) != GALLEY_AOT_OK)
      break;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = 1e3 * (double)(t1.tv_sec - t0.tv_sec) +
                1e-6 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (best < 0 || ms < best)
      best = ms;
    for (int k = 0; k < GALLEY_AOT_NUM_OUTPUTS; k++)
      galley_aot_free(out[k]);
  }
  if (best >= 0)
    fprintf(stderr, "aot_host: fastest earlier run %.3f ms\n", best);
  if (pool < 0 && (prepare || budget >= 0))
    pool = 1;
  struct galley_aot_threads *th = pool >= 0 ? galley_aot_threads_new(pool) : 0;
  if (pool >= 0 && !th) {
    printf("galley_aot_threads_new(%d) failed\n", pool);
    return 1;
  }
  if (budget >= 0 && galley_aot_threads_set_memory_budget(th, budget) !=
                         GALLEY_AOT_OK) {
    printf("galley_aot_threads_set_memory_budget(%g) failed\n", budget);
    galley_aot_threads_free(th);
    return 1;
  }
  if (prepare) {
    int rc = galley_aot_prepare(th, (const struct galley_tensor *const *)in,
                                flags, msg, sizeof msg);
    if (rc != GALLEY_AOT_OK) {
      printf("prepare: rc %d (%s): %s\n", rc, galley_aot_strerror(rc), msg);
      galley_aot_threads_free(th);
      for (int k = 0; k < GALLEY_AOT_NUM_INPUTS; k++)
        galley_tensor_free(in[k]);
      return 1;
    }
    fprintf(stderr, "aot_host: prepared\n");
  }
  for (int r = 0; th && r < 2; r++) { /* the handle kept across runs */
    if (galley_aot_run_threads(th, (const struct galley_tensor *const *)in,
                               out, flags, msg, sizeof msg) != GALLEY_AOT_OK)
      break;
    for (int k = 0; k < GALLEY_AOT_NUM_OUTPUTS; k++)
      galley_aot_free(out[k]);
  }
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = th ? galley_aot_run_threads(th,
                                       (const struct galley_tensor *const *)in,
                                       out, flags, msg, sizeof msg)
           : threads < 0 && !flags
               ? galley_aot_run_msg((const struct galley_tensor *const *)in,
                                    out, msg, sizeof msg)
               : galley_aot_run_ex((const struct galley_tensor *const *)in,
                                   out, threads < 0 ? 1 : threads, flags, msg,
                                   sizeof msg);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  galley_aot_threads_free(th);
  if (getenv("AOT_HOST_TIME")) /* for measurements by hand */
    fprintf(stderr, "aot_host: run in %.3f ms\n",
            1e3 * (double)(t1.tv_sec - t0.tv_sec) +
                1e-6 * (double)(t1.tv_nsec - t0.tv_nsec));
  if (rc != GALLEY_AOT_OK) {
    printf("rc %d (%s): %s\n", rc, galley_aot_strerror(rc), msg);
    for (int k = 0; k < GALLEY_AOT_NUM_OUTPUTS; k++)
      if (out[k])
        printf("output %d not NULL after an error\n", k);
  }
  for (int k = 0; rc == GALLEY_AOT_OK && k < GALLEY_AOT_NUM_OUTPUTS; k++) {
    if (write_tns(out[k], dir, galley_aot_output_names[k]) != 0)
      rc = 3;
  }
  for (int k = 0; rc == GALLEY_AOT_OK && k < GALLEY_AOT_NUM_OUTPUTS; k++)
    galley_aot_free(out[k]);
  for (int k = 0; k < GALLEY_AOT_NUM_INPUTS; k++)
    galley_tensor_free(in[k]);
  return rc == GALLEY_AOT_OK ? 0 : 1;
}
