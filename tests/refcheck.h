/*
 * refcheck.h -- a test's check of a bound program against the reference
 * evaluator (src/exec/refeval.c), for the Check-based tests that need it,
 * and the parse and bind that every such test starts with.
 */
#ifndef GALLEY_TEST_REFCHECK_H
#define GALLEY_TEST_REFCHECK_H

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"

/* The program of text, parsed (the test fails on an error). */
static galley_program *program(const char *text) {
  galley_program *p = NULL;
  galley_error err;
  ck_assert_msg(galley_program_parse("t.tin", text, strlen(text), &p, NULL,
                                     &err) == GALLEY_OK,
                "%s", err.msg);
  return p;
}

/* Bind t to input name (the test fails on an error). */
static void bind(galley_program *p, const char *name, const galley_tensor *t) {
  galley_error err;
  ck_assert_msg(galley_program_bind(p, name, t, &err) == GALLEY_OK, "%s",
                err.msg);
}

/* Run with the reference and with kernels; every output equal, NaN
 * where NaN (infinities exactly, others within 1e-9). */
static void check_against_reference(galley_program *p) {
  galley_error err;
  int n = galley_program_num_outputs(p);
  double *want[8];
  int64_t size[8];
  ck_assert_int_le(n, 8);
  ck_assert_msg(galley_program_run_reference(p, &err) == GALLEY_OK, "%s",
                err.msg);
  for (int k = 0; k < n; k++) {
    const galley_tensor *t = galley_program_output(p, k);
    size[k] = 1;
    for (int m = 0; m < galley_tensor_order(t); m++)
      size[k] *= galley_tensor_dim(t, m);
    want[k] = malloc((size_t)size[k] * sizeof *want[k]);
    ck_assert_int_eq(galley_tensor_to_dense(t, want[k], size[k], NULL),
                     GALLEY_OK);
  }
  ck_assert_msg(galley_program_run(p, &err) == GALLEY_OK, "%s", err.msg);
  for (int k = 0; k < n; k++) {
    double *got = malloc((size_t)size[k] * sizeof *got);
    ck_assert_int_eq(galley_tensor_to_dense(galley_program_output(p, k), got,
                                            size[k], NULL),
                     GALLEY_OK);
    for (int64_t e = 0; e < size[k]; e++) {
      double g = got[e], w = want[k][e];
      int same = isnan(w) ? isnan(g)
                 : isinf(w) ? g == w
                            : fabs(g - w) <= 1e-9 * fmax(1, fabs(w));
      ck_assert_msg(same, "output %d entry %lld: got %.17g want %.17g", k,
                    (long long)e, g, w);
    }
    free(got);
    free(want[k]);
  }
}

#endif /* GALLEY_TEST_REFCHECK_H */
