/*
 * test_jit.c -- the JIT (src/jit/jit.c): kernels that embed the kernel
 * header and call libm compile and run under both backends; compiler
 * errors, link errors and missing symbols are GALLEY_EJIT with the
 * compiler's words; the clang cache creates one entry per source, reuses
 * it without running clang (counted through a wrapper script named by
 * GALLEY_CLANG), rebuilds bad entries (untrusted, truncated, corrupted,
 * swapped), refuses unsafe directories, falls back to a private directory
 * when the cache cannot be created or written, sweeps stale temporaries,
 * and is shared safely by concurrent processes; tcc compiles from several
 * threads at once.  A backend that is not installed is checked to fail
 * cleanly instead.
 */
#define _GNU_SOURCE /* unshare, CLONE_NEWNS */
#include "config.h"

#include <check.h>
#include <sched.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "galley.h"
#include "galley_rt.h"
#include "phys.h"
#include "testutil.h"

/* In jit.c, exported for this test. */
void jit_sha256(const void *data, size_t n, unsigned char out[32]);

/* The kernel header's text, as the code generator embeds it. */
static const char rt_header[] =
#include "rt_header.inc"
    ;

/* ---- helpers ---- */

static const char *backend_name(int b) { return b == JIT_TCC ? "tcc" : "clang"; }

/* The clang the build found (CLANG from make check), or NULL. */
static const char *test_clang(void) {
  const char *c = getenv("CLANG");
  if (c && *c)
    return c;
  return access("/usr/bin/clang", X_OK) == 0 ? "/usr/bin/clang" : NULL;
}

static int backend_ready(int b) {
#ifdef HAVE_LIBTCC
  if (b == JIT_TCC)
    return 1;
#else
  if (b == JIT_TCC)
    return 0;
#endif
  return test_clang() != NULL;
}

static char *make_temp_dir(void) {
  const char *t = getenv("TMPDIR");
  char *path = malloc(4096);
  snprintf(path, 4096, "%s/galley-jit-XXXXXX", t && *t ? t : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(path));
  return path;
}

/* rm -r path (directories, files, symlinks). */
static void remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    chmod(path, 0700);
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

/* Count dir's entries: *so cache entries (64 hex digits + ".so"), *tmp
 * temporary files; the name of the last entry into last (if non-NULL). */
static void scan_cache(const char *dir, int *so, int *tmp, char *last) {
  *so = *tmp = 0;
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *n = e->d_name;
    if (!strncmp(n, "tmp-", 4))
      (*tmp)++;
    if (strlen(n) == 67 && !strcmp(n + 64, ".so") &&
        strspn(n, "0123456789abcdef") == 64) {
      (*so)++;
      if (last)
        snprintf(last, 80, "%s", n);
    }
  }
  closedir(d);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Lines in a file (the wrapper's count of clang runs). */
static int count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  int n = 0, c;
  while ((c = fgetc(f)) != EOF)
    n += c == '\n';
  fclose(f);
  return n;
}

/* A shell script in dir that logs each run to dir/count and runs the real
 * clang; GALLEY_CLANG names it.  Returns the count file's path. */
static char *install_counting_clang(const char *dir) {
  char *count = malloc(4096), script[4096];
  snprintf(count, 4096, "%s/count", dir);
  snprintf(script, sizeof script, "%s/clang-wrapper", dir);
  FILE *f = fopen(script, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "#!/bin/sh\necho run >> '%s'\nexec '%s' \"$@\"\n", count,
          test_clang());
  fclose(f);
  chmod(script, 0700);
  setenv("GALLEY_CLANG", script, 1);
  return count;
}

static char *concat(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  char *s = malloc(na + nb + 1);
  memcpy(s, a, na);
  memcpy(s + na, b, nb + 1);
  return s;
}

/* ---- the sample kernels ---- */

/* After the header: libm calls, a dense-times-CSR kernel through the
 * kernel ABI, and a kernel appending to a sink (a call back into the
 * host through sink->grow). */
static const char kernel_body[] =
    "extern double exp(double);\n"
    "extern double log(double);\n"
    "extern double sqrt(double);\n"
    "extern double fabs(double);\n"
    "extern double sin(double);\n"
    "extern double cos(double);\n"
    "extern double tanh(double);\n"
    "extern double pow(double, double);\n"
    "double t_math(double x) {\n"
    "  return exp(x) + log(x) + sqrt(x) + fabs(-x) + sin(x) + cos(x)\n"
    "         + tanh(x) + pow(x, 1.5) + galley_rt_max(x, 0.5) * 3.0 + 1.0;\n"
    "}\n"
    "/* y(i) = A(i,j) * x(j), A (dense, list), x dense, y dense */\n"
    "int galley_q0(const galley_kernel_args *a) {\n"
    "  const struct galley_tensor *A = a->in[0], *x = a->in[1];\n"
    "  const galley_level *A0 = &A->lvl[0], *A1 = &A->lvl[1];\n"
    "  for (galley_crd i = a->lo; i < a->hi; i++) {\n"
    "    galley_pos pA1 = galley_rt_dense_locate(A0, 0, i);\n"
    "    double acc = 0.0;\n"
    "    for (galley_pos t = A1->pos[pA1]; t < A1->pos[pA1 + 1]; t++)\n"
    "      acc += A->val[t] * x->val[A1->crd[t]];\n"
    "    a->out->val[i] = acc;\n"
    "  }\n"
    "  return 0;\n"
    "}\n"
    "/* the rows of A with a stored entry, with their sums */\n"
    "int galley_q1(const galley_kernel_args *a) {\n"
    "  const struct galley_tensor *A = a->in[0];\n"
    "  const galley_level *A1 = &A->lvl[1];\n"
    "  for (galley_crd i = a->lo; i < a->hi; i++) {\n"
    "    galley_pos lo = A1->pos[i], hi = A1->pos[i + 1];\n"
    "    if (lo == hi) continue;\n"
    "    double s = 0.0;\n"
    "    for (galley_pos t = lo; t < hi; t++) s += A->val[t];\n"
    "    int64_t c[1] = {i};\n"
    "    if (galley_rt_sink_push(a->sink, c, s) != 0) return -1;\n"
    "  }\n"
    "  return 0;\n"
    "}\n";

typedef double (*math_fn)(double);
typedef int (*kernel_fn)(const galley_kernel_args *);

static double expected_math(double x) {
  return exp(x) + log(x) + sqrt(x) + fabs(-x) + sin(x) + cos(x) + tanh(x) +
         pow(x, 1.5) + galley_rt_max(x, 0.5) * 3.0 + 1.0;
}

static int sink_grow(galley_rt_sink *s, int64_t need) {
  int64_t cap = s->cap ? s->cap : 1;
  while (cap < need)
    cap *= 2;
  int64_t *crd = realloc(s->crd, (size_t)(cap * s->order) * sizeof *crd);
  if (crd)
    s->crd = crd;
  double *val = realloc(s->val, (size_t)cap * sizeof *val);
  if (val)
    s->val = val;
  if (!crd || !val)
    return -1;
  s->cap = cap;
  return 0;
}

/* Run the three sample functions and check them against the host. */
static void check_sample_kernels(void *const *fns) {
  math_fn m = (math_fn)fns[0];
  for (double x = 0.25; x < 9.0; x += 0.625)
    ck_assert_double_eq(m(x), expected_math(x));

  enum { R = 23, C = 17, NNZ = 90 };
  test_rng rng = test_rng_seed(44);
  int64_t dims[2] = {R, C}, coords[2 * NNZ];
  double vals[NNZ], dense[R][C] = {{0}}, xv[C];
  for (int e = 0; e < NNZ; e++) {
    coords[2 * e] = test_rng_below(&rng, R - 3); /* last rows empty */
    coords[2 * e + 1] = test_rng_below(&rng, C);
    vals[e] = test_rng_double(&rng, -2, 2);
  }
  galley_tensor *A = NULL, *x = NULL, *y = NULL;
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, NNZ, coords, vals, 0.0,
                                          NULL, &A, NULL), GALLEY_OK);
  /* The dense matrix from the tensor itself (duplicates summed). */
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      int64_t c[2] = {i, j};
      dense[i][j] = galley_tensor_get(A, c, NULL);
    }
  int64_t xc[C];
  for (int j = 0; j < C; j++)
    xc[j] = j, xv[j] = test_rng_double(&rng, -1, 1);
  galley_format fd1 = galley_format_dense(1);
  int64_t dr = R, dc = C;
  ck_assert_int_eq(galley_tensor_from_coo(1, &dc, C, xc, xv, 0.0, &fd1, &x,
                                          NULL), GALLEY_OK);
  ck_assert_int_eq(galley_tensor_from_coo(1, &dr, 0, NULL, NULL, 0.0, &fd1,
                                          &y, NULL), GALLEY_OK);
  const struct galley_tensor *in[2] = {A, x};
  galley_rt_sink sink = {.order = 1, .grow = sink_grow};
  galley_kernel_args args = {.in = in, .out = y, .sink = &sink, .lo = 0,
                             .hi = R};
  ck_assert_int_eq(((kernel_fn)fns[1])(&args), 0);
  for (int i = 0; i < R; i++) {
    double want = 0.0;
    for (int j = 0; j < C; j++)
      if (dense[i][j] != 0.0)
        want += dense[i][j] * xv[j];
    int64_t c[1] = {i};
    ck_assert_double_eq(galley_tensor_get(y, c, NULL), want);
  }
  ck_assert_int_eq(((kernel_fn)fns[2])(&args), 0);
  int64_t k = 0;
  for (int i = 0; i < R; i++) {
    double s = 0.0;
    int any = 0;
    for (int j = 0; j < C; j++)
      if (dense[i][j] != 0.0)
        s += dense[i][j], any = 1;
    if (!any)
      continue;
    ck_assert_int_lt(k, sink.n);
    ck_assert_int_eq(sink.crd[k], i);
    ck_assert_double_eq(sink.val[k], s);
    k++;
  }
  ck_assert_int_eq(k, sink.n);
  free(sink.crd);
  free(sink.val);
  galley_tensor_free(A);
  galley_tensor_free(x);
  galley_tensor_free(y);
}

static const char *const sample_syms[3] = {"t_math", "galley_q0", "galley_q1"};

/* ---- tests ---- */

START_TEST(sha256_vectors) {
  static const struct {
    const char *in, *hex;
  } v[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc",
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmn"
       "opjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
  };
  for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
    unsigned char d[32];
    char hex[65];
    jit_sha256(v[k].in, strlen(v[k].in), d);
    for (int i = 0; i < 32; i++)
      snprintf(hex + 2 * i, 3, "%02x", d[i]);
    ck_assert_str_eq(hex, v[k].hex);
  }
  /* A million 'a's: many blocks through the streaming path. */
  char *m = malloc(1000000);
  memset(m, 'a', 1000000);
  unsigned char d[32];
  jit_sha256(m, 1000000, d);
  free(m);
  ck_assert_int_eq(d[0], 0xcd);
  ck_assert_int_eq(d[1], 0xc7);
  ck_assert_int_eq(d[31], 0xd0);
}
END_TEST

START_TEST(compiles_and_runs) {
  int b = _i;
  if (!backend_ready(b)) {
    fprintf(stderr, "test_jit: %s not available, checked its error only\n",
            backend_name(b));
    return;
  }
  char *dir = make_temp_dir();
  char *src = concat(rt_header, kernel_body);
  JitOptions opt = {.backend = (JitBackend)b, .cache_dir = dir};
  void *fns[3];
  JitModule *m = NULL;
  galley_error err = {0};
  ck_assert_msg(jit_compile(&opt, src, sample_syms, 3, fns, &m, &err) ==
                    GALLEY_OK, "%s: %s", backend_name(b), err.msg);
  check_sample_kernels(fns);
  jit_free(m);
  free(src);
  remove_tree(dir);
  free(dir);
}
END_TEST

START_TEST(unavailable_backend_fails_cleanly) {
  char *dir = make_temp_dir();
  JitOptions opt = {.backend = JIT_CLANG, .cache_dir = dir};
  const char *sym = "f";
  void *fn = (void *)1;
  JitModule *m = (JitModule *)1;
  galley_error err = {0};
  setenv("GALLEY_CLANG", "/nonexistent/clang", 1);
  ck_assert_int_eq(jit_compile(&opt, "int f(void){return 1;}", &sym, 1, &fn,
                               &m, &err), GALLEY_EJIT);
  ck_assert_ptr_null(m);
  ck_assert_ptr_null(fn);
  ck_assert_msg(strstr(err.msg, "not available") != NULL, "%s", err.msg);
  unsetenv("GALLEY_CLANG");
#ifndef HAVE_LIBTCC
  opt.backend = JIT_TCC;
  ck_assert_int_eq(jit_compile(&opt, "int f(void){return 1;}", &sym, 1, &fn,
                               &m, &err), GALLEY_EJIT);
  ck_assert_msg(strstr(err.msg, "tcc") != NULL, "%s", err.msg);
#endif
  opt.backend = (JitBackend)7;
  ck_assert_int_eq(jit_compile(&opt, "", &sym, 1, &fn, &m, &err),
                   GALLEY_EINVAL);
  opt.backend = JIT_TCC;
  ck_assert_int_eq(jit_compile(&opt, NULL, &sym, 1, &fn, &m, &err),
                   GALLEY_EINVAL);
  jit_free(NULL);
  remove_tree(dir);
  free(dir);
}
END_TEST

/* a*b + c with a*b = 1 - 2^-60 exactly: rounding the product first (as
 * the reference evaluator does) gives 0, a fused multiply-add -2^-60.
 * Clang with -march=native fuses unless -ffp-contract=off. */
START_TEST(no_fused_multiply_add) {
  if (!backend_ready(_i))
    return;
  char *dir = make_temp_dir();
  JitOptions opt = {.backend = (JitBackend)_i, .cache_dir = dir};
  const char *sym = "mad";
  void *fn;
  JitModule *m = NULL;
  galley_error err = {0};
  ck_assert_msg(jit_compile(&opt,
                            "double mad(double a, double b, double c) {\n"
                            "  return a * b + c;\n}\n",
                            &sym, 1, &fn, &m, &err) == GALLEY_OK,
                "%s", err.msg);
  volatile double a = 1.0 + ldexp(1.0, -30), b = 1.0 - ldexp(1.0, -30);
  double got = ((double (*)(double, double, double))fn)(a, b, -1.0);
  ck_assert_msg(got == 0.0, "%s: a*b+c = %a (fused)", backend_name(_i), got);
  jit_free(m);
  remove_tree(dir);
  free(dir);
}
END_TEST

/* Compile src, which must fail with GALLEY_EJIT mentioning `word`. */
static void expect_failure(int b, const char *src, const char *sym,
                           const char *word) {
  char *dir = make_temp_dir();
  JitOptions opt = {.backend = (JitBackend)b, .cache_dir = dir};
  void *fn = (void *)1;
  JitModule *m = (JitModule *)1;
  galley_error err = {0};
  ck_assert_int_eq(jit_compile(&opt, src, &sym, 1, &fn, &m, &err),
                   GALLEY_EJIT);
  ck_assert_int_eq(err.status, GALLEY_EJIT);
  ck_assert_ptr_null(m);
  ck_assert_ptr_null(fn);
  ck_assert_msg(strstr(err.msg, word) != NULL, "%s: '%s' not in: %s",
                backend_name(b), word, err.msg);
  /* The temporary source's name never shows, and nothing is left over. */
  ck_assert_msg(strstr(err.msg, "tmp-") == NULL, "%s", err.msg);
  if (b == JIT_CLANG) {
    int so, tmp;
    scan_cache(dir, &so, &tmp, NULL);
    ck_assert_int_eq(tmp, 0);
  }
  remove_tree(dir);
  free(dir);
}

START_TEST(compile_error_has_message) {
  if (!backend_ready(_i))
    return;
  expect_failure(_i,
                 "int f(void) {\n  int x = 1;\n  return undeclared_thing + x;\n}\n",
                 "f", "undeclared_thing");
  char *src = concat(rt_header, "int f(void) { return 1 }\n");
  expect_failure(_i, src, "f", "error");
  free(src);
}
END_TEST

START_TEST(missing_symbol_is_reported) {
  if (!backend_ready(_i))
    return;
  expect_failure(_i, "int f(void) { return 1; }\n", "galley_q9", "galley_q9");
}
END_TEST

START_TEST(unresolved_external_is_reported) {
  if (!backend_ready(_i))
    return;
  expect_failure(_i, "extern int galley_nowhere(void);\n"
                     "int f(void) { return galley_nowhere(); }\n",
                 "f", "galley_nowhere");
}
END_TEST

/* A tiny function whose answer identifies the source. */
static char *tiny_source(int k) {
  char *s = malloc(128);
  snprintf(s, 128, "int f(void) { return %d; }\n", k);
  return s;
}

/* Compile tiny_source(k) with clang into dir, check f() == k, free. */
static double clang_tiny(const char *dir, int k) {
  char *src = tiny_source(k);
  JitOptions opt = {.backend = JIT_CLANG, .cache_dir = dir};
  const char *sym = "f";
  void *fn;
  JitModule *m = NULL;
  galley_error err = {0};
  double t0 = now_seconds();
  ck_assert_msg(jit_compile(&opt, src, &sym, 1, &fn, &m, &err) == GALLEY_OK,
                "%s", err.msg);
  double t = now_seconds() - t0;
  ck_assert_int_eq(((int (*)(void))fn)(), k);
  jit_free(m);
  free(src);
  return t;
}

START_TEST(clang_cache_is_reused) {
  if (!backend_ready(JIT_CLANG))
    return;
  char *dir = make_temp_dir(), *cache = concat(dir, "/cache");
  char *count = install_counting_clang(dir);
  double cold = clang_tiny(cache, 1);
  /* Cold: one `--version` probe and one compile. */
  ck_assert_int_eq(count_lines(count), 2);
  int so, tmp;
  char name[80], path[4096];
  scan_cache(cache, &so, &tmp, name);
  ck_assert_int_eq(so, 1);
  ck_assert_int_eq(tmp, 0);
  struct stat st1, st2, sd;
  snprintf(path, sizeof path, "%s/%s", cache, name);
  ck_assert_int_eq(stat(path, &st1), 0);
  ck_assert_int_eq(st1.st_mode & 077, 0);
  ck_assert_int_eq(stat(cache, &sd), 0);
  ck_assert_int_eq(sd.st_mode & 0777, 0700);
  /* Warm: no process at all, the same file, and faster. */
  double warm = clang_tiny(cache, 1);
  ck_assert_int_eq(count_lines(count), 2);
  ck_assert_int_eq(stat(path, &st2), 0);
  ck_assert(st1.st_ino == st2.st_ino);
  scan_cache(cache, &so, &tmp, NULL);
  ck_assert_int_eq(so, 1);
  ck_assert_msg(warm < cold, "warm %g s, cold %g s", warm, cold);
  /* A changed source: a new key, one compile (the version is cached). */
  clang_tiny(cache, 2);
  ck_assert_int_eq(count_lines(count), 3);
  scan_cache(cache, &so, &tmp, NULL);
  ck_assert_int_eq(so, 2);
  ck_assert_int_eq(tmp, 0);
  unsetenv("GALLEY_CLANG");
  remove_tree(dir);
  free(dir);
  free(cache);
  free(count);
}
END_TEST

START_TEST(clang_bad_entries_are_rebuilt) {
  if (!backend_ready(JIT_CLANG))
    return;
  char *dir = make_temp_dir(), *cache = concat(dir, "/cache");
  char *count = install_counting_clang(dir);
  clang_tiny(cache, 5);
  ck_assert_int_eq(count_lines(count), 2);
  int so, tmp;
  char name[80], path[4096], junk[4096];
  scan_cache(cache, &so, &tmp, name);
  snprintf(path, sizeof path, "%s/%s", cache, name);
  /* A corrupt entry (a new file renamed over it, as a crash could not
   * produce but a disk error might): rebuilt. */
  snprintf(junk, sizeof junk, "%s/junk", cache);
  FILE *f = fopen(junk, "w");
  fputs("not an ELF file\n", f);
  fclose(f);
  chmod(junk, 0700);
  ck_assert_int_eq(rename(junk, path), 0);
  clang_tiny(cache, 5);
  ck_assert_int_eq(count_lines(count), 3);
  /* An entry writable by others is not trusted: rebuilt and replaced. */
  ck_assert_int_eq(chmod(path, 0777), 0);
  clang_tiny(cache, 5);
  ck_assert_int_eq(count_lines(count), 4);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_mode & 022, 0);
  clang_tiny(cache, 5);
  ck_assert_int_eq(count_lines(count), 4);
  unsetenv("GALLEY_CLANG");
  remove_tree(dir);
  free(dir);
  free(cache);
  free(count);
}
END_TEST

/* A cold compile removes temporary files older than ten minutes (left by
 * a process killed mid-compile), not younger ones (another compile's). */
START_TEST(clang_sweeps_stale_temps) {
  if (!backend_ready(JIT_CLANG))
    return;
  char *dir = make_temp_dir();
  char *old = concat(dir, "/tmp-old123"), *young = concat(dir, "/tmp-new123");
  fclose(fopen(old, "w"));
  fclose(fopen(young, "w"));
  struct timespec times[2] = {{time(NULL) - 20 * 60, 0},
                              {time(NULL) - 20 * 60, 0}};
  ck_assert_int_eq(utimensat(AT_FDCWD, old, times, 0), 0);
  times[0].tv_sec = times[1].tv_sec = time(NULL) - 60;
  ck_assert_int_eq(utimensat(AT_FDCWD, young, times, 0), 0);
  clang_tiny(dir, 9);
  ck_assert_int_ne(access(old, F_OK), 0);
  ck_assert_int_eq(access(young, F_OK), 0);
  remove_tree(dir);
  free(dir);
  free(old);
  free(young);
}
END_TEST

START_TEST(clang_refuses_unsafe_dir) {
  if (!backend_ready(JIT_CLANG))
    return;
  char *dir = make_temp_dir();
  ck_assert_int_eq(chmod(dir, 0777), 0);
  JitOptions opt = {.backend = JIT_CLANG, .cache_dir = dir};
  const char *sym = "f";
  void *fn;
  JitModule *m = NULL;
  galley_error err = {0};
  ck_assert_int_eq(jit_compile(&opt, "int f(void){return 3;}", &sym, 1, &fn,
                               &m, &err), GALLEY_EJIT);
  ck_assert_msg(strstr(err.msg, "refusing") != NULL, "%s", err.msg);
  remove_tree(dir);
  free(dir);
}
END_TEST

START_TEST(clang_default_cache_dirs) {
  if (!backend_ready(JIT_CLANG))
    return;
  char *dir = make_temp_dir();
  char *env = concat(dir, "/env/a/b"), *xdg = concat(dir, "/xdg");
  char *home = concat(dir, "/home");
  char *xdg_cache = concat(xdg, "/galleyc");
  char *home_cache = concat(home, "/.cache/galleyc");
  const char *want[3] = {env, xdg_cache, home_cache};
  setenv("GALLEY_CACHE_DIR", env, 1);
  setenv("XDG_CACHE_HOME", xdg, 1);
  setenv("HOME", home, 1);
  for (int k = 0; k < 3; k++) {
    if (k == 1)
      unsetenv("GALLEY_CACHE_DIR");
    if (k == 2)
      setenv("XDG_CACHE_HOME", "relative/ignored", 1);
    clang_tiny(NULL, 7);
    int so, tmp;
    scan_cache(want[k], &so, &tmp, NULL);
    ck_assert_int_eq(so, 1);
    struct stat st;
    ck_assert_int_eq(stat(want[k], &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
  }
  remove_tree(dir);
  free(dir);
  free(env);
  free(xdg);
  free(home);
  free(xdg_cache);
  free(home_cache);
}
END_TEST

START_TEST(clang_concurrent_processes) {
  if (!backend_ready(JIT_CLANG))
    return;
  enum { NPROC = 4 };
  char *dir = make_temp_dir();
  char *src = concat(rt_header, kernel_body);
  pid_t pids[NPROC];
  for (int k = 0; k < NPROC; k++) {
    pids[k] = fork();
    ck_assert_int_ge(pids[k], 0);
    if (pids[k] == 0) {
      JitOptions opt = {.backend = JIT_CLANG, .cache_dir = dir};
      void *fns[3];
      JitModule *m = NULL;
      galley_error err = {0};
      galley_status st = jit_compile(&opt, src, sample_syms, 3, fns, &m, &err);
      if (st != GALLEY_OK)
        fprintf(stderr, "child %d: %s\n", k, err.msg);
      int ok = st == GALLEY_OK && ((math_fn)fns[0])(2.0) == expected_math(2.0);
      _exit(ok ? 0 : 1);
    }
  }
  for (int k = 0; k < NPROC; k++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[k], &status, 0), pids[k]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child %d failed", k);
  }
  int so, tmp;
  scan_cache(dir, &so, &tmp, NULL);
  ck_assert_int_eq(so, 1);
  ck_assert_int_eq(tmp, 0);
  /* And the parent hits the entry they made. */
  JitOptions opt = {.backend = JIT_CLANG, .cache_dir = dir};
  void *fns[3];
  JitModule *m = NULL;
  galley_error err = {0};
  ck_assert_msg(jit_compile(&opt, src, sample_syms, 3, fns, &m, &err) ==
                    GALLEY_OK, "%s", err.msg);
  check_sample_kernels(fns);
  jit_free(m);
  free(src);
  remove_tree(dir);
  free(dir);
}
END_TEST

/* The path of dir's only cache entry into path (4096 bytes). */
static void only_entry(const char *dir, char *path) {
  int so, tmp;
  char name[80];
  scan_cache(dir, &so, &tmp, name);
  ck_assert_int_eq(so, 1);
  ck_assert_int_eq(tmp, 0);
  snprintf(path, 4096, "%s/%s", dir, name);
}

/* Compile the sample kernels with clang into dir and check them. */
static void clang_sample(const char *dir) {
  char *src = concat(rt_header, kernel_body);
  JitOptions opt = {.backend = JIT_CLANG, .cache_dir = dir};
  void *fns[3];
  JitModule *m = NULL;
  galley_error err = {0};
  ck_assert_msg(jit_compile(&opt, src, sample_syms, 3, fns, &m, &err) ==
                    GALLEY_OK, "%s", err.msg);
  check_sample_kernels(fns);
  jit_free(m);
  free(src);
}

static off_t file_size(const char *path) {
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  return st.st_size;
}

/* An entry truncated (a full disk, a copy cut short) is rebuilt, never
 * mapped: mapping it used to kill the process with SIGBUS. */
START_TEST(clang_truncated_entry_is_rebuilt) {
  if (!backend_ready(JIT_CLANG))
    return;
  char *dir = make_temp_dir(), *cache = concat(dir, "/cache");
  char *count = install_counting_clang(dir);
  clang_sample(cache);
  ck_assert_int_eq(count_lines(count), 2);
  char path[4096];
  only_entry(cache, path);
  off_t full = file_size(path);
  static const off_t cuts[] = {2048, 4096, 8192, 12288};
  int rebuilt = 0;
  for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
    if (cuts[k] >= full)
      continue;
    ck_assert_int_eq(truncate(path, cuts[k]), 0);
    clang_sample(cache);
    ck_assert_int_eq(count_lines(count), 2 + ++rebuilt);
    only_entry(cache, path);
    ck_assert_int_eq(file_size(path), full);
  }
  ck_assert_int_gt(rebuilt, 0);
  /* One byte short of whole: the seal catches it too. */
  ck_assert_int_eq(truncate(path, full - 1), 0);
  clang_sample(cache);
  ck_assert_int_eq(count_lines(count), 3 + rebuilt);
  unsetenv("GALLEY_CLANG");
  remove_tree(dir);
  free(dir);
  free(cache);
  free(count);
}
END_TEST

/* Two entries exchanged (loadable, but each the other's code: a max
 * program printed the min's result) are detected and rebuilt. */
START_TEST(clang_swapped_entries_are_rebuilt) {
  if (!backend_ready(JIT_CLANG))
    return;
  char *dir = make_temp_dir(), *cache = concat(dir, "/cache");
  char *count = install_counting_clang(dir);
  clang_tiny(cache, 1);
  char one[4096], two[4096], tmp[4096];
  only_entry(cache, one);
  clang_tiny(cache, 2);
  ck_assert_int_eq(count_lines(count), 3);
  int so, ntmp;
  scan_cache(cache, &so, &ntmp, NULL);
  ck_assert_int_eq(so, 2);
  /* the other entry is the one that is not `one` */
  DIR *d = opendir(cache);
  struct dirent *e;
  two[0] = '\0';
  while ((e = readdir(d)))
    if (strlen(e->d_name) == 67 && !strstr(one, e->d_name))
      snprintf(two, sizeof two, "%s/%s", cache, e->d_name);
  closedir(d);
  ck_assert(two[0] != '\0');
  snprintf(tmp, sizeof tmp, "%s/swap", cache);
  ck_assert_int_eq(rename(one, tmp), 0);
  ck_assert_int_eq(rename(two, one), 0);
  ck_assert_int_eq(rename(tmp, two), 0);
  clang_tiny(cache, 1); /* asserts f() == 1 */
  clang_tiny(cache, 2);
  ck_assert_int_eq(count_lines(count), 5);
  /* Rebuilt entries are hits again. */
  clang_tiny(cache, 1);
  clang_tiny(cache, 2);
  ck_assert_int_eq(count_lines(count), 5);
  unsetenv("GALLEY_CLANG");
  remove_tree(dir);
  free(dir);
  free(cache);
  free(count);
}
END_TEST

/* One flipped byte in the middle of an entry: its hash no longer
 * matches; rebuilt. */
START_TEST(clang_corrupted_entry_is_rebuilt) {
  if (!backend_ready(JIT_CLANG))
    return;
  char *dir = make_temp_dir(), *cache = concat(dir, "/cache");
  char *count = install_counting_clang(dir);
  clang_sample(cache);
  char path[4096];
  only_entry(cache, path);
  off_t full = file_size(path);
  int fd = open(path, O_RDWR);
  ck_assert_int_ge(fd, 0);
  unsigned char byte;
  ck_assert_int_eq(pread(fd, &byte, 1, full / 2), 1);
  byte ^= 0x40;
  ck_assert_int_eq(pwrite(fd, &byte, 1, full / 2), 1);
  close(fd);
  clang_sample(cache);
  ck_assert_int_eq(count_lines(count), 3);
  clang_sample(cache);
  ck_assert_int_eq(count_lines(count), 3);
  unsetenv("GALLEY_CLANG");
  remove_tree(dir);
  free(dir);
  free(cache);
  free(count);
}
END_TEST

/* Whether dir holds no entry at all. */
static int dir_empty(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d)))
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n == 0;
}

/* A cache directory that cannot be created (its parent is a regular
 * file): the kernel is compiled in a private directory under $TMPDIR,
 * which is removed again. */
START_TEST(clang_uncreatable_cache_falls_back) {
  if (!backend_ready(JIT_CLANG))
    return;
  char *dir = make_temp_dir(), *file = concat(dir, "/file");
  char *cache = concat(file, "/cache"), *tmp = concat(dir, "/tmp");
  fclose(fopen(file, "w"));
  ck_assert_int_eq(mkdir(tmp, 0700), 0);
  const char *saved = getenv("TMPDIR");
  char *saved_copy = saved ? strdup(saved) : NULL;
  setenv("TMPDIR", tmp, 1);
  clang_tiny(cache, 4);
  clang_sample(cache);
  ck_assert(dir_empty(tmp));
  if (saved_copy)
    setenv("TMPDIR", saved_copy, 1);
  else
    unsetenv("TMPDIR");
  free(saved_copy);
  remove_tree(dir);
  free(dir);
  free(file);
  free(cache);
  free(tmp);
}
END_TEST

/* Make dir read-only for this process: chmod for a user, a read-only
 * bind mount in a private mount namespace for root (whom modes do not
 * stop).  0, or -1 when this system allows neither. */
static int make_read_only(const char *dir) {
  if (geteuid() != 0)
    return chmod(dir, 0500);
#ifdef __linux__
  if (unshare(CLONE_NEWNS) != 0 ||
      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount(dir, dir, NULL, MS_BIND, NULL) != 0 ||
      mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0)
    return -1;
  return 0;
#else
  return -1;
#endif
}

/* Compile tiny_source(k) into dir; 1 when it loads and f() == k. */
static int tiny_works(const char *dir, int k) {
  char *src = tiny_source(k);
  JitOptions opt = {.backend = JIT_CLANG, .cache_dir = dir};
  const char *sym = "f";
  void *fn;
  JitModule *m = NULL;
  galley_error err = {0};
  int ok = jit_compile(&opt, src, &sym, 1, &fn, &m, &err) == GALLEY_OK &&
           ((int (*)(void))fn)() == k;
  if (!ok)
    fprintf(stderr, "tiny %d: %s\n", k, err.msg);
  jit_free(m);
  free(src);
  return ok;
}

/* A read-only cache directory: its entries still load (no compile), and
 * a new kernel is compiled privately instead of failing; the cache is
 * left as it was.  Checked in a child process (the mount namespace). */
START_TEST(clang_read_only_cache_falls_back) {
  if (!backend_ready(JIT_CLANG))
    return;
  char *dir = make_temp_dir(), *cache = concat(dir, "/cache");
  char *tmp = concat(dir, "/tmp");
  char *count = install_counting_clang(dir);
  ck_assert_int_eq(mkdir(tmp, 0700), 0);
  clang_tiny(cache, 6);
  ck_assert_int_eq(count_lines(count), 2);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    if (make_read_only(cache) != 0)
      _exit(77);
    setenv("TMPDIR", tmp, 1);
    /* the probe that a write would fail */
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/probe", cache);
    if (fopen(probe, "w"))
      _exit(3);
    int ok = tiny_works(cache, 6) && count_lines(count) == 2 &&
             tiny_works(cache, 7) && count_lines(count) == 3 &&
             tiny_works(cache, 7) && count_lines(count) == 4;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77)
    fprintf(stderr, "test_jit: cannot make a read-only directory here, "
                    "skipped\n");
  else
    ck_assert_int_eq(WEXITSTATUS(status), 0);
  chmod(cache, 0700);
  int so, ntmp;
  scan_cache(cache, &so, &ntmp, NULL);
  ck_assert_int_eq(so, 1);
  ck_assert_int_eq(ntmp, 0);
  ck_assert(dir_empty(tmp));
  unsetenv("GALLEY_CLANG");
  remove_tree(dir);
  free(dir);
  free(cache);
  free(tmp);
  free(count);
}
END_TEST

/* One tcc thread: compile and run several distinct sources. */
static void *tcc_thread(void *arg) {
  int id = (int)(intptr_t)arg;
  for (int r = 0; r < 6; r++) {
    char body[256];
    snprintf(body, sizeof body,
             "extern double sqrt(double);\n"
             "double g(double x) { return sqrt(x) + %d.0; }\n",
             100 * id + r);
    char *src = concat(rt_header, body);
    JitOptions opt = {.backend = JIT_TCC};
    const char *sym = "g";
    void *fn;
    JitModule *m = NULL;
    galley_status st = jit_compile(&opt, src, &sym, 1, &fn, &m, NULL);
    free(src);
    if (st != GALLEY_OK)
      return (void *)1;
    double got = ((double (*)(double))fn)(4.0);
    jit_free(m);
    if (got != 2.0 + 100 * id + r)
      return (void *)1;
  }
  return NULL;
}

START_TEST(tcc_from_threads) {
  if (!backend_ready(JIT_TCC))
    return;
  enum { NTHREADS = 4 };
  pthread_t th[NTHREADS];
  for (int k = 0; k < NTHREADS; k++)
    ck_assert_int_eq(pthread_create(&th[k], NULL, tcc_thread,
                                    (void *)(intptr_t)k), 0);
  for (int k = 0; k < NTHREADS; k++) {
    void *ret = (void *)1;
    ck_assert_int_eq(pthread_join(th[k], &ret), 0);
    ck_assert_ptr_null(ret);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("jit");
  TCase *tc = tcase_create("hash");
  tcase_add_test(tc, sha256_vectors);
  suite_add_tcase(s, tc);
  tc = tcase_create("backends");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, compiles_and_runs, JIT_TCC, JIT_CLANG + 1);
  tcase_add_loop_test(tc, no_fused_multiply_add, JIT_TCC, JIT_CLANG + 1);
  tcase_add_loop_test(tc, compile_error_has_message, JIT_TCC, JIT_CLANG + 1);
  tcase_add_loop_test(tc, missing_symbol_is_reported, JIT_TCC, JIT_CLANG + 1);
  tcase_add_loop_test(tc, unresolved_external_is_reported, JIT_TCC,
                      JIT_CLANG + 1);
  tcase_add_test(tc, unavailable_backend_fails_cleanly);
  tcase_add_test(tc, tcc_from_threads);
  suite_add_tcase(s, tc);
  tc = tcase_create("clang_cache");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, clang_cache_is_reused);
  tcase_add_test(tc, clang_bad_entries_are_rebuilt);
  tcase_add_test(tc, clang_truncated_entry_is_rebuilt);
  tcase_add_test(tc, clang_swapped_entries_are_rebuilt);
  tcase_add_test(tc, clang_corrupted_entry_is_rebuilt);
  tcase_add_test(tc, clang_uncreatable_cache_falls_back);
  tcase_add_test(tc, clang_read_only_cache_falls_back);
  tcase_add_test(tc, clang_sweeps_stale_temps);
  tcase_add_test(tc, clang_refuses_unsafe_dir);
  tcase_add_test(tc, clang_default_cache_dirs);
  tcase_add_test(tc, clang_concurrent_processes);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
