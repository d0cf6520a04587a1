/*
 * test_tier.c -- the default backend's tiered JIT through the program API:
 * kernels run at once on tcc code; a background clang compile starts when
 * the plan is costly or the kernels are run again, and its code replaces
 * tcc's between runs (galley_program_wait_compiled waits for it) with the
 * same results; a later program finds the clang code in the cache on its
 * first run; a replanned program never installs a stale compile; freeing a
 * program during a compile kills it and leaves nothing behind; without
 * clang the kernels stay on tcc; explicit backends keep their meaning;
 * programs on several threads tier at once.
 * Every check compares the results with values computed here.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "galley.h"
#include "testutil.h"

#ifdef HAVE_LIBTCC

/* ---- helpers ---- */

/* The clang the build found (CLANG from make check), or NULL. */
static const char *test_clang(void) {
  const char *c = getenv("CLANG");
  if (c && *c)
    return c;
  return access("/usr/bin/clang", X_OK) == 0 ? "/usr/bin/clang" : NULL;
}

static char *make_temp_dir(void) {
  const char *t = getenv("TMPDIR");
  char *path = malloc(4096);
  snprintf(path, 4096, "%s/galley-tier-XXXXXX", t && *t ? t : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(path));
  return path;
}

static void remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
        continue;
      char sub[4096];
      snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
      remove_tree(sub);
    }
    if (d)
      closedir(d);
    rmdir(path);
  } else {
    unlink(path);
  }
}

/* Count the cache's entries (*.so) and temporary files (tmp-*). */
static void scan_cache(const char *dir, int *so, int *tmp) {
  *so = *tmp = 0;
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    *tmp += !strncmp(e->d_name, "tmp-", 4);
    *so += n > 3 && !strcmp(e->d_name + n - 3, ".so");
  }
  closedir(d);
}

/* y = A x and m = max(y), with y computed here in the same order. */
static const char mv_source[] = "input A[i, j], x[j]\n"
                                "y[i] = A[i, j] * x[j]\n"
                                "m = max(i: y[i])\n"
                                "output y, m\n";

enum { R = 300, C = 200, NNZ = 3000 };

typedef struct Data {
  galley_tensor *A, *x_dense, *x_sparse;
  double dense[R][C], xv[C];
} Data;

static Data *make_data(void) {
  Data *d = calloc(1, sizeof *d);
  test_rng rng = test_rng_seed(17);
  int64_t dims[2] = {R, C}, coords[2 * NNZ];
  double vals[NNZ];
  for (int e = 0; e < NNZ; e++) {
    coords[2 * e] = test_rng_below(&rng, R);
    coords[2 * e + 1] = test_rng_below(&rng, C);
    vals[e] = test_rng_double(&rng, -2, 2);
  }
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, NNZ, coords, vals, 0.0,
                                          NULL, &d->A, &err), GALLEY_OK);
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      int64_t c[2] = {i, j};
      d->dense[i][j] = galley_tensor_get(d->A, c, NULL);
    }
  for (int j = 0; j < C; j++) /* a third of x is zero */
    d->xv[j] = j % 3 ? test_rng_double(&rng, -1, 1) : 0.0;
  int64_t n = C;
  galley_format fd = galley_format_dense(1);
  ck_assert_int_eq(galley_tensor_from_dense(1, &n, d->xv, 0, &fd,
                                            &d->x_dense, &err), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_from_dense(1, &n, d->xv, 0, NULL,
                                            &d->x_sparse, &err), GALLEY_OK);
  return d;
}

static void free_data(Data *d) {
  galley_tensor_free(d->A);
  galley_tensor_free(d->x_dense);
  galley_tensor_free(d->x_sparse);
  free(d);
}

/* The program with the default backend, the cache in dir, logging at
 * level 1 into log (may be NULL), A and x bound. */
static galley_program *make_program(const char *dir, const Data *d,
                                    const galley_tensor *x, FILE *log) {
  galley_context *ctx = NULL;
  galley_program *p = NULL;
  galley_error err;
  ck_assert_int_eq(galley_context_create(&ctx, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_set_cache_dir(ctx, dir, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_set_log(ctx, log ? 1 : 0, log, &err),
                   GALLEY_OK);
  ck_assert_msg(galley_context_program_parse(ctx, "mv.tin", mv_source,
                                             strlen(mv_source), &p, NULL,
                                             &err) == GALLEY_OK,
                "%s", err.msg);
  galley_context_free(ctx);
  ck_assert_int_eq(galley_program_bind(p, "A", d->A, &err), GALLEY_OK);
  ck_assert_int_eq(galley_program_bind(p, "x", x, &err), GALLEY_OK);
  return p;
}

/* Run p and check y and m against values computed here (to rounding);
 * the run's info into *info, y into y[R] (exact, for comparing tiers). */
static void run_check(galley_program *p, const Data *d, galley_run_info *info,
                      double *y) {
  galley_error err;
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
  galley_program_run_info(p, info);
  const galley_tensor *Y = galley_program_output(p, 0);
  double m = -INFINITY;
  for (int64_t i = 0; i < R; i++) {
    double want = 0;
    for (int j = 0; j < C; j++)
      want += d->dense[i][j] * d->xv[j];
    y[i] = galley_tensor_get(Y, &i, NULL);
    ck_assert_msg(fabs(y[i] - want) <= 1e-12 * (1 + fabs(want)),
                  "y[%lld] = %.17g, want %.17g", (long long)i, y[i], want);
    m = fmax(m, y[i]);
  }
  ck_assert_double_eq(galley_tensor_get(galley_program_output(p, 1), NULL,
                                        NULL), m);
}

/* ---- tests ---- */

/* First runs on tcc code; the second starts clang in the background;
 * after waiting, the next run is on clang code with the same results; a
 * new program then gets the clang code from the cache on its first run. */
START_TEST(tiers_tcc_then_clang) {
  if (!test_clang())
    return;
  char *dir = make_temp_dir();
  Data *d = make_data();
  char *text = NULL;
  size_t len = 0;
  FILE *log = open_memstream(&text, &len);
  galley_program *p = make_program(dir, d, d->x_dense, log);
  galley_run_info info;
  double y1[R], y[R];
  run_check(p, d, &info, y1);
  ck_assert_int_eq(info.backend, GALLEY_BACKEND_TCC);
  ck_assert_int_eq(info.compiling, 0); /* a cheap plan run once */
  ck_assert_int_eq(info.upgraded, 0);
  run_check(p, d, &info, y);
  ck_assert_int_eq(info.backend, GALLEY_BACKEND_TCC);
  ck_assert_int_eq(info.reused, 1);
  ck_assert_int_eq(info.compiling, 1); /* run again: now hot */
  galley_error err;
  ck_assert_msg(galley_program_wait_compiled(p, &err) == GALLEY_OK, "%s",
                err.msg);
  run_check(p, d, &info, y);
  ck_assert_int_eq(info.backend, GALLEY_BACKEND_CLANG);
  ck_assert_int_eq(info.upgraded, 1);
  ck_assert_int_eq(info.reused, 1);
  ck_assert_int_eq(info.compiling, 0);
  ck_assert(info.background_seconds > 0);
  ck_assert_mem_eq(y, y1, sizeof y); /* the same operations, in order */
  run_check(p, d, &info, y);
  ck_assert_int_eq(info.backend, GALLEY_BACKEND_CLANG);
  ck_assert_int_eq(info.upgraded, 0);
  ck_assert_int_eq(galley_program_wait_compiled(p, &err), GALLEY_OK);
  galley_program_free(p);
  fclose(log);
  ck_assert_msg(strstr(text, "(clang compiling in the background)\n"), "%s",
                text);
  ck_assert_msg(strstr(text, "\nbackend clang: ") &&
                    strstr(text, "(clang code of the background compile, "),
                "%s", text);
  free(text);
  int so, tmp;
  scan_cache(dir, &so, &tmp);
  ck_assert_int_eq(so, 1);
  ck_assert_int_eq(tmp, 0);
  /* A later program (or process) with the same source: clang at once. */
  p = make_program(dir, d, d->x_dense, NULL);
  run_check(p, d, &info, y);
  ck_assert_int_eq(info.backend, GALLEY_BACKEND_CLANG);
  ck_assert_int_eq(info.compiling, 0);
  ck_assert_mem_eq(y, y1, sizeof y);
  galley_program_free(p);
  free_data(d);
  remove_tree(dir);
  free(dir);
}
END_TEST

/* A costly plan starts the background compile on its first run. */
START_TEST(tiers_costly_plan_starts_at_once) {
  if (!test_clang())
    return;
  enum { N = 120 };
  static double ones[N * N];
  for (int k = 0; k < N * N; k++)
    ones[k] = 1;
  char *dir = make_temp_dir();
  int64_t dims[2] = {N, N};
  galley_tensor *A = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_dense(2, dims, ones, 0, NULL, &A, &err),
                   GALLEY_OK);
  static const char src[] =
      "input A[i, j]\nt = sum(i, j, k: A[i, j] * A[j, k] * A[i, k])\n";
  galley_context *ctx = NULL;
  galley_program *p = NULL;
  ck_assert_int_eq(galley_context_create(&ctx, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_set_cache_dir(ctx, dir, &err), GALLEY_OK);
  ck_assert_int_eq(galley_context_program_parse(ctx, "t.tin", src,
                                                strlen(src), &p, NULL, &err),
                   GALLEY_OK);
  galley_context_free(ctx);
  ck_assert_int_eq(galley_program_bind(p, "A", A, &err), GALLEY_OK);
  galley_run_info info;
  for (int run = 0; run < 2; run++) {
    ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
    galley_program_run_info(p, &info);
    ck_assert_double_eq(galley_tensor_get(galley_program_output(p, 0), NULL,
                                          NULL), (double)N * N * N);
    if (run == 0) {
      ck_assert_int_eq(info.backend, GALLEY_BACKEND_TCC);
      ck_assert_int_eq(info.compiling, 1);
      ck_assert_msg(galley_program_wait_compiled(p, &err) == GALLEY_OK,
                    "%s", err.msg);
    }
  }
  ck_assert_int_eq(info.backend, GALLEY_BACKEND_CLANG);
  ck_assert_int_eq(info.upgraded, 1);
  galley_program_free(p);
  galley_tensor_free(A);
  remove_tree(dir);
  free(dir);
}
END_TEST

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A program replanned while (or after) clang compiled its old source
 * never installs that code: the new plan runs on tcc, right, then on its
 * own clang code. */
START_TEST(tiers_replan_ignores_stale_compile) {
  if (!test_clang())
    return;
  char *dir = make_temp_dir();
  Data *d = make_data();
  galley_program *p = make_program(dir, d, d->x_dense, NULL);
  galley_run_info info;
  double y[R];
  run_check(p, d, &info, y);
  char *old_source = strdup(galley_program_source(p));
  run_check(p, d, &info, y);
  ck_assert_int_eq(info.compiling, 1);
  /* Let the old source's compile finish (its entry appears, then the job
   * loads it) without a run or a wait seeing it. */
  int so = 0, tmp = 0;
  for (int t = 0; t < 600 && so == 0; t++) {
    sleep_ms(100);
    scan_cache(dir, &so, &tmp);
  }
  ck_assert_int_eq(so, 1);
  sleep_ms(300);
  galley_error err;
  ck_assert_int_eq(galley_program_bind(p, "x", d->x_sparse, &err), GALLEY_OK);
  run_check(p, d, &info, y);
  ck_assert_int_eq(info.replanned, 1);
  ck_assert_str_ne(galley_program_source(p), old_source);
  ck_assert_int_eq(info.backend, GALLEY_BACKEND_TCC);
  ck_assert_int_eq(info.upgraded, 0);
  ck_assert_msg(galley_program_wait_compiled(p, &err) == GALLEY_OK, "%s",
                err.msg);
  run_check(p, d, &info, y);
  ck_assert_int_eq(info.backend, GALLEY_BACKEND_CLANG);
  ck_assert_int_eq(info.upgraded, 1);
  free(old_source);
  galley_program_free(p);
  scan_cache(dir, &so, &tmp);
  ck_assert_int_eq(so, 2);
  free_data(d);
  remove_tree(dir);
  free(dir);
}
END_TEST

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This process's threads (/proc/self/status), 0 when unknown or under
 * ThreadSanitizer (whose own background thread comes and goes). */
static int count_threads(void) {
#if defined(__SANITIZE_THREAD__)
  return 0;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return 0;
#endif
#endif
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int n = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %d", &n) == 1)
      break;
  if (f)
    fclose(f);
  return n;
}

/* Freeing a program while clang compiles in the background kills the
 * compiler and joins the thread: quick, no child process, thread or
 * temporary file left, nothing leaked (the sanitizer build checks). */
START_TEST(tiers_free_during_compile) {
  if (!test_clang())
    return;
  char *dir = make_temp_dir();
  Data *d = make_data();
  int threads_before = count_threads(); /* sanitizers may run their own */
  for (int k = 0; k < 3; k++) {
    galley_program *p = make_program(dir, d, d->x_dense, NULL);
    galley_run_info info;
    double y[R];
    run_check(p, d, &info, y);
    run_check(p, d, &info, y);
    ck_assert_int_eq(info.compiling, 1);
    if (k == 1) /* the compiler may be at any point: let it start */
      sleep_ms(10);
    double t0 = now_seconds();
    galley_program_free(p);
    double t = now_seconds() - t0;
    ck_assert_msg(t < 5, "free took %g s", t);
    /* no compiler left running, no thread but this one */
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
    ck_assert_int_eq(errno, ECHILD);
    int threads = count_threads();
    ck_assert_msg(threads <= threads_before, "%d threads, %d before",
                  threads, threads_before);
    int so, tmp;
    scan_cache(dir, &so, &tmp);
    ck_assert_int_eq(tmp, 0);
    ck_assert_int_eq(so, 0); /* killed, not waited for */
  }
  free_data(d);
  remove_tree(dir);
  free(dir);
}
END_TEST

/* Without clang the kernels stay on tcc: runs succeed, the failure is
 * logged once, wait_compiled says why. */
START_TEST(tiers_without_clang_stay_on_tcc) {
  char *dir = make_temp_dir();
  Data *d = make_data();
  setenv("GALLEY_CLANG", "/nonexistent/clang", 1);
  char *text = NULL;
  size_t len = 0;
  FILE *log = open_memstream(&text, &len);
  galley_program *p = make_program(dir, d, d->x_dense, log);
  galley_run_info info;
  double y[R];
  for (int run = 0; run < 4; run++) {
    run_check(p, d, &info, y);
    ck_assert_int_eq(info.backend, GALLEY_BACKEND_TCC);
    ck_assert_int_eq(info.compiling, 0);
  }
  galley_error err;
  ck_assert_int_eq(galley_program_wait_compiled(p, &err), GALLEY_EJIT);
  ck_assert_msg(strstr(err.msg, "not available"), "%s", err.msg);
  run_check(p, d, &info, y);
  ck_assert_int_eq(info.backend, GALLEY_BACKEND_TCC);
  galley_program_free(p);
  unsetenv("GALLEY_CLANG");
  fclose(log);
  const char *first = strstr(text, "stay on tcc");
  ck_assert_msg(first && !strstr(first + 1, "stay on tcc"), "%s", text);
  free(text);
  free_data(d);
  remove_tree(dir);
  free(dir);
}
END_TEST

/* --backend=tcc never moves to clang; --backend=clang compiles at once. */
START_TEST(tiers_explicit_backends) {
  char *dir = make_temp_dir();
  Data *d = make_data();
  galley_program *p = make_program(dir, d, d->x_dense, NULL);
  galley_error err;
  ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_TCC, &err),
                   GALLEY_OK);
  galley_run_info info;
  double y[R];
  for (int run = 0; run < 3; run++) {
    run_check(p, d, &info, y);
    ck_assert_int_eq(info.backend, GALLEY_BACKEND_TCC);
    ck_assert_int_eq(info.compiling, 0);
    ck_assert_int_eq(galley_program_wait_compiled(p, &err), GALLEY_OK);
  }
  if (test_clang()) {
    ck_assert_int_eq(galley_program_set_backend(p, GALLEY_BACKEND_CLANG, &err),
                     GALLEY_OK);
    run_check(p, d, &info, y);
    ck_assert_int_eq(info.backend, GALLEY_BACKEND_CLANG);
    ck_assert_int_eq(info.compiling, 0);
    ck_assert_int_eq(info.upgraded, 0);
  }
  galley_program_free(p);
  int so, tmp;
  scan_cache(dir, &so, &tmp);
  ck_assert_int_eq(so, test_clang() ? 1 : 0);
  free_data(d);
  remove_tree(dir);
  free(dir);
}
END_TEST

/* One thread's program: tiered runs, a wait, a run on clang code. */
typedef struct ThreadJob {
  const char *dir;
  const Data *d;
  int ok;
} ThreadJob;

static void *tier_thread(void *arg) {
  ThreadJob *job = arg;
  galley_context *ctx = NULL;
  galley_program *p = NULL;
  galley_error err;
  int ok = galley_context_create(&ctx, &err) == GALLEY_OK &&
           galley_context_set_cache_dir(ctx, job->dir, &err) == GALLEY_OK &&
           galley_context_program_parse(ctx, "mv.tin", mv_source,
                                        strlen(mv_source), &p, NULL,
                                        &err) == GALLEY_OK &&
           galley_program_bind(p, "A", job->d->A, &err) == GALLEY_OK &&
           galley_program_bind(p, "x", job->d->x_dense, &err) == GALLEY_OK;
  double first = 0;
  for (int run = 0; ok && run < 4; run++) {
    if (run == 3)
      ok = galley_program_wait_compiled(p, &err) == GALLEY_OK;
    ok = ok && galley_program_run(p, &err) == GALLEY_OK;
    double m = ok ? galley_tensor_get(galley_program_output(p, 1), NULL, NULL)
                  : 0;
    if (run == 0)
      first = m;
    ok = ok && m == first;
  }
  galley_run_info info;
  if (ok)
    galley_program_run_info(p, &info);
  job->ok = ok && info.backend == GALLEY_BACKEND_CLANG;
  galley_program_free(p);
  galley_context_free(ctx);
  return NULL;
}

/* Programs tiering on several threads at once, sharing one cache. */
START_TEST(tiers_from_threads) {
  if (!test_clang())
    return;
  enum { NTHREADS = 3 };
  char *dir = make_temp_dir();
  Data *d = make_data();
  pthread_t th[NTHREADS];
  ThreadJob jobs[NTHREADS];
  for (int k = 0; k < NTHREADS; k++) {
    jobs[k] = (ThreadJob){dir, d, 0};
    ck_assert_int_eq(pthread_create(&th[k], NULL, tier_thread, &jobs[k]), 0);
  }
  for (int k = 0; k < NTHREADS; k++) {
    ck_assert_int_eq(pthread_join(th[k], NULL), 0);
    ck_assert_msg(jobs[k].ok, "thread %d failed", k);
  }
  int so, tmp;
  scan_cache(dir, &so, &tmp);
  ck_assert_int_eq(so, 1);
  ck_assert_int_eq(tmp, 0);
  free_data(d);
  remove_tree(dir);
  free(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tier");
  TCase *tc = tcase_create("tier");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, tiers_tcc_then_clang);
  tcase_add_test(tc, tiers_costly_plan_starts_at_once);
  tcase_add_test(tc, tiers_replan_ignores_stale_compile);
  tcase_add_test(tc, tiers_free_during_compile);
  tcase_add_test(tc, tiers_without_clang_stay_on_tcc);
  tcase_add_test(tc, tiers_explicit_backends);
  tcase_add_test(tc, tiers_from_threads);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#else /* !HAVE_LIBTCC: no tiers (the default backend is clang) */

int main(void) {
  fprintf(stderr, "test_tier: built without libtcc, nothing to test\n");
  return 77;
}

#endif
