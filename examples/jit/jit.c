/*
 * jit.c -- a host program that compiles and runs .tin programs at run
 * time through libgalley's context API.
 *
 * README
 *   (a) Logistic-regression inference: a 4 x 3 matrix X given as CSR
 *       arrays (wrapped, not copied: galley_tensor_wrap_csr) and a weight
 *       vector theta from a dense array; prints the probability of every
 *       row and how many rows are predicted positive, then runs again
 *       with new weights, which reuses the compiled kernels.
 *   (b) Triangle count of the undirected graph in a Matrix Market file
 *       (its symmetric adjacency matrix); karate.mtx has 45 triangles.
 *
 *   Build against an installed galleyc and run:
 *
 *       cc jit.c $(pkg-config --cflags --libs galley) -o jit
 *       ./jit ../../../shared/data/matrices/karate.mtx
 *
 *   (`make check` builds it as examples/jit/jit and runs it from
 *   tests/test_jit_example.sh.)  -v logs each run to standard error.
 */
#include <galley.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The .tin programs (examples/logistic.tin and examples/triangles.tin). */
static const char logistic_tin[] =
    "input X[i, j], theta[j]\n"
    "P[i] = sigmoid(sum(j: X[i, j] * theta[j]))\n"
    "positives = sum(i: P[i] > 0.5)\n"
    "output P, positives\n";

static const char triangles_tin[] =
    "input E[i, j]\n"
    "triangles = sum(i, j, k: E[i, j] * E[j, k] * E[i, k]) / 6\n";

/* Print a failed call's message; the status says whether it failed. */
static int failed(galley_status st, const galley_error *err) {
  if (st != GALLEY_OK)
    fprintf(stderr, "jit: %s\n",
            err->msg[0] ? err->msg : galley_status_name(st));
  return st != GALLEY_OK;
}

/* Parse a program's text with the context's options. */
static galley_program *parse(const galley_context *ctx, const char *name,
                             const char *text) {
  galley_program *p = NULL;
  char *diag = NULL;
  galley_error err;
  galley_status st = galley_context_program_parse(ctx, name, text,
                                                  strlen(text), &p, &diag,
                                                  &err);
  if (st != GALLEY_OK && diag)
    fputs(diag, stderr);
  free(diag);
  failed(st, &err);
  return p;
}

/* (a) P = sigmoid(X theta) for X in CSR, and the number of P > 0.5. */
static int logistic(const galley_context *ctx) {
  /* X = [1 0 -2; 0 0.5 0; 3 1 1; 0 0 0] */
  static const int64_t rowptr[] = {0, 2, 3, 6, 6};
  static const int64_t colidx[] = {0, 2, 1, 0, 1, 2};
  static const double vals[] = {1, -2, 0.5, 3, 1, 1};
  double weights[3] = {0.25, -1, 0.5};
  const int64_t nrows = 4, ncols = 3;
  galley_tensor *X = NULL, *theta = NULL, *theta2 = NULL;
  galley_error err;
  galley_program *p = parse(ctx, "logistic.tin", logistic_tin);
  int bad = !p ||
            failed(galley_tensor_wrap_csr(nrows, ncols, rowptr, colidx, vals,
                                          0, &X, &err), &err) ||
            failed(galley_tensor_from_dense(1, &ncols, weights, 0, NULL,
                                            &theta, &err), &err) ||
            failed(galley_program_bind(p, "X", X, &err), &err) ||
            failed(galley_program_bind(p, "theta", theta, &err), &err) ||
            failed(galley_program_run(p, &err), &err);
  if (!bad) {
    const galley_tensor *P = galley_program_output(p, 0);
    printf("logistic regression: P = sigmoid(X theta)\n");
    for (int64_t i = 0; i < nrows; i++)
      printf("  P[%lld] = %.6f\n", (long long)i, galley_tensor_get(P, &i, NULL));
    printf("  positives = %g\n",
           galley_tensor_get(galley_program_output(p, 1), NULL, NULL));
    /* new weights, same shapes: the plan and kernels are reused */
    weights[1] = 1;
    bad = failed(galley_tensor_from_dense(1, &ncols, weights, 0, NULL,
                                          &theta2, &err), &err) ||
          failed(galley_program_bind(p, "theta", theta2, &err), &err) ||
          failed(galley_program_run(p, &err), &err);
  }
  if (!bad) {
    galley_run_info info;
    galley_program_run_info(p, &info);
    printf("  with theta[1] = 1: positives = %g (kernels %s)\n",
           galley_tensor_get(galley_program_output(p, 1), NULL, NULL),
           info.reused ? "reused" : "compiled again");
  }
  galley_program_free(p);
  galley_tensor_free(X);
  galley_tensor_free(theta);
  galley_tensor_free(theta2);
  return bad;
}

/* (b) The triangles of the graph in path. */
static int triangles(const galley_context *ctx, const char *path) {
  galley_tensor *E = NULL;
  galley_error err;
  galley_program *p = parse(ctx, "triangles.tin", triangles_tin);
  int bad = !p ||
            failed(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &E, &err),
                   &err) ||
            failed(galley_program_bind(p, "E", E, &err), &err) ||
            failed(galley_program_run(p, &err), &err);
  if (!bad) {
    const char *base = strrchr(path, '/');
    printf("triangles in %s: %.0f\n", base ? base + 1 : path,
           galley_tensor_get(galley_program_output(p, 0), NULL, NULL));
  }
  galley_program_free(p);
  galley_tensor_free(E);
  return bad;
}

int main(int argc, char **argv) {
  int verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
  if (argc != 2 + verbose) {
    fprintf(stderr, "usage: jit [-v] GRAPH.mtx\n");
    return 2;
  }
  galley_context *ctx = NULL;
  galley_error err;
  if (failed(galley_context_create(&ctx, &err), &err) ||
      failed(galley_context_set_log(ctx, verbose ? 2 : 0, stderr, &err),
             &err))
    return 1;
  int bad = logistic(ctx);
  if (!bad)
    bad = triangles(ctx, argv[1 + verbose]);
  galley_context_free(ctx);
  return bad ? 1 : 0;
}
