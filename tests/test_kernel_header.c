/*
 * test_kernel_header.c -- generated kernels will be C compiled in memory by
 * libtcc against galley_rt.h.  This compiles tests/kernel_sample.c that way
 * and checks that its walks and lookups agree with the runtime, for every
 * pair of level kinds and both mode orders of a random matrix.  It also
 * checks the header's workspace sort on each of its paths.
 */
#include <check.h>
#include <libtcc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "galley_rt.h"
#include "testutil.h"

typedef double (*walk_fn)(const struct galley_tensor *);
typedef double (*get_fn)(const struct galley_tensor *, galley_crd, galley_crd);

/* The sample kernel's source, read from tests/. */
static char *read_sample(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/kernel_sample.c", test_src_dir());
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  char *buf = calloc(1, 1 << 16);
  size_t n = fread(buf, 1, (1 << 16) - 1, f);
  fclose(f);
  ck_assert(n > 0);
  return buf;
}

static void on_tcc_error(void *ud, const char *msg) {
  (void)ud;
  fprintf(stderr, "tcc: %s\n", msg);
}

/* Compile the sample in memory; the state owns the code. */
static TCCState *compile_sample(walk_fn *walk, get_fn *get) {
  char inc[4096];
  snprintf(inc, sizeof inc, "%s/../runtime", test_src_dir());
  TCCState *s = tcc_new();
  ck_assert(s != NULL);
  tcc_set_error_func(s, NULL, on_tcc_error);
  tcc_set_output_type(s, TCC_OUTPUT_MEMORY);
  tcc_add_include_path(s, inc);
  char *src = read_sample();
  ck_assert_int_eq(tcc_compile_string(s, src), 0);
  free(src);
  ck_assert_int_ge(tcc_relocate(s, TCC_RELOCATE_AUTO), 0);
  *walk = (walk_fn)tcc_get_symbol(s, "sample_walk_sum2");
  *get = (get_fn)tcc_get_symbol(s, "sample_get2");
  ck_assert(*walk && *get);
  return s;
}

typedef struct sum_state {
  const galley_format *fmt;
  double sum;
} sum_state;

/* The same weighted sum as the kernel, from the runtime's iteration. */
static int add_entry(void *ud, const int64_t *coord, double v) {
  sum_state *st = ud;
  int64_t c0 = coord[st->fmt->mode_order[0]], c1 = coord[st->fmt->mode_order[1]];
  st->sum += v * (double)(7 * c0 + 3 * c1 + 1);
  return 0;
}

START_TEST(tcc_kernel_agrees_with_runtime) {
  walk_fn walk;
  get_fn get;
  TCCState *s = compile_sample(&walk, &get);
  test_rng rng = test_rng_seed(2026);
  const int64_t dims[2] = {37, 23};
  enum { NNZ = 200 };
  int64_t coords[2 * NNZ];
  double vals[NNZ];
  for (int e = 0; e < NNZ; e++) {
    coords[2 * e] = test_rng_below(&rng, dims[0]);
    coords[2 * e + 1] = test_rng_below(&rng, dims[1]);
    vals[e] = (double)(test_rng_below(&rng, 19) - 9);
  }
  for (int kinds = 0; kinds < 16; kinds++)
    for (int transpose = 0; transpose < 2; transpose++) {
      galley_format fmt = {.order = 2,
                           .mode_order = {transpose, 1 - transpose},
                           .kinds = {kinds / 4, kinds % 4}};
      galley_tensor *A = NULL;
      galley_error err = {0};
      ck_assert_msg(galley_tensor_from_coo(2, dims, NNZ, coords, vals, 0.5,
                                           &fmt, &A, &err) == GALLEY_OK,
                    "%s", err.msg);
      sum_state st = {&fmt, 0.0};
      galley_tensor_foreach(A, add_entry, &st);
      ck_assert_double_eq(walk(A), st.sum);
      for (int64_t i = 0; i < dims[0]; i++)
        for (int64_t j = 0; j < dims[1]; j++) {
          int64_t c[2] = {i, j};
          double want = galley_tensor_get(A, c, NULL);
          double got = transpose ? get(A, j, i) : get(A, i, j);
          ck_assert_double_eq(got, want);
        }
      galley_tensor_free(A);
    }
  tcc_delete(s);
}
END_TEST

static int cmp_key(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* galley_rt_ws_sort puts the touched keys of a dense workspace in order
 * on each of its paths: insertion (few keys), the scan of a short range
 * (clustered keys), radix (many keys spread wide) and quicksort (some
 * keys spread wide); a wrong order would corrupt every SpGEMM row. */
START_TEST(ws_sort_orders_keys) {
  const int64_t sizes[] = {40, 5000, (int64_t)1 << 21};
  const int64_t counts[] = {0, 1, 2, 16, 17, 31, 32, 33, 60, 128, 700, 2500};
  uint64_t rng = 20261125;
  for (int si = 0; si < 3; si++)
    for (int ci = 0; ci < 12; ci++)
      for (int spread = 0; spread < 2; spread++) {
        int64_t size = sizes[si], n = counts[ci];
        if (n > size)
          continue;
        /* clustered: keys from a window of 2n; spread: from all of size */
        int64_t window = spread || 2 * n + 1 > size ? size : 2 * n + 1;
        int64_t base = (size - window) / 2;
        galley_rt_ws w;
        memset(&w, 0, sizeof w);
        w.size = size;
        w.seen = calloc((size_t)size, 1);
        w.keys = malloc((size_t)size * sizeof *w.keys);
        int64_t *want = malloc((size_t)(n > 0 ? n : 1) * sizeof *want);
        ck_assert(w.seen && w.keys && want);
        while (w.n < n) {
          rng = rng * 6364136223846793005ull + 1442695040888963407ull;
          int64_t k = base + (int64_t)((rng >> 33) % (uint64_t)window);
          if (w.seen[k])
            continue;
          w.seen[k] = 1;
          want[w.n] = k;
          w.keys[w.n++] = k;
        }
        qsort(want, (size_t)n, sizeof *want, cmp_key);
        galley_rt_ws_sort(&w);
        ck_assert_int_eq(w.n, n);
        for (int64_t t = 0; t < n; t++)
          ck_assert_msg(w.keys[t] == want[t],
                        "size %lld n %lld spread %d: key %lld is %lld, not "
                        "%lld", (long long)size, (long long)n, spread,
                        (long long)t, (long long)w.keys[t],
                        (long long)want[t]);
        free(w.seen);
        free(w.keys);
        free(want);
      }
}
END_TEST

int main(void) {
  Suite *suite = suite_create("kernel_header");
  TCase *tc = tcase_create("tcc");
  tcase_add_test(tc, tcc_kernel_agrees_with_runtime);
  tcase_add_test(tc, ws_sort_orders_keys);
  suite_add_tcase(suite, tc);
  SRunner *sr = srunner_create(suite);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
