/*
 * mf.c -- matrix factorization by gradient descent with gradients from
 * galleyc: R ~ U V^T fitted on the observed (nonzero) entries of a real
 * sparse matrix only, driven from this C loop through the context API.
 *
 * README
 *   The model: factors U (m x rank) and V (n x rank) of a matrix R read
 *   from a Matrix Market file; the loss is the squared error over R's
 *   nonzero entries plus an L2 penalty, and the gradients come from
 *   `grad`:
 *
 *       P[i, j] = (R[i, j] != 0) * U[i, k] * V[j, k]
 *       Fit = sum(i, j: (R[i, j] - P[i, j])^2)
 *       Size = sum(i, k: U[i, k]^2) + sum(j, k: V[j, k]^2)
 *       L = Fit + lam * Size
 *       GU[i, k] = grad(L, U[i, k])
 *       GV[j, k] = grad(L, V[j, k])
 *
 *   The factor (R != 0) keeps the predictions, and so the gradients'
 *   programs, on R's pattern: nothing of size m x n is ever made.  Every
 *   step binds the new factors and runs the program again (the plan and
 *   the kernels are reused: same formats and sizes), then U -= rate * GU,
 *   V -= rate * GV.  The starting factors are a fixed formula of (i, k)
 *   (init_value below), so that an independent implementation can start
 *   from the same point: examples/mf/mf_numpy.py does the same descent
 *   with numpy and scipy, and tests/test_mf_example.sh checks that both
 *   print the same losses.
 *
 *       cc mf.c $(pkg-config --cflags --libs galley) -o mf
 *       ./mf -s 20 ../../../shared/data/matrices/celegansneural.mtx
 *       python3 mf_numpy.py -s 20 ../../../shared/data/matrices/celegansneural.mtx
 *
 *   Options: -s STEPS (default 20), -k RANK (8), -r RATE (default 1 /
 *   (the most entries in a row or column * the mean |R|)), -l LAMBDA
 *   (1e-3), -v (log the planner).
 *   Prints the loss at every step, the numbers of runs that reused the
 *   kernels, the sums of the final factors and the time per step.
 */
#define _POSIX_C_SOURCE 200809L /* getopt, clock_gettime */
#include <galley.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char model_tin[] =
    "input R[i, j], U[i, k], V[j, k], lam\n"
    "P[i, j] = (R[i, j] != 0) * U[i, k] * V[j, k]\n"
    "Fit = sum(i, j: (R[i, j] - P[i, j])^2)\n"
    "Size = sum(i, k: U[i, k]^2) + sum(j, k: V[j, k]^2)\n"
    "L = Fit + lam * Size\n"
    "GU[i, k] = grad(L, U[i, k])\n"
    "GV[j, k] = grad(L, V[j, k])\n"
    "output L, GU, GV\n";

typedef struct Options {
  int steps, rank, verbose;
  double rate, lam; /* rate 0: chosen from the data */
  const char *path;
} Options;

static int failed(galley_status st, const galley_error *err) {
  if (st != GALLEY_OK)
    fprintf(stderr, "mf: %s\n",
            err->msg[0] ? err->msg : galley_status_name(st));
  return st != GALLEY_OK;
}

/* The starting factor entry (row, k) of factor `which` (0: U, 1: V): a
 * fixed pseudo-random value in [-0.5, 0.5) * 0.3, the same integer
 * arithmetic as mf_numpy.py. */
static double init_value(int64_t row, int k, int which) {
  uint64_t h = (uint64_t)row * 2654435761u + (uint64_t)k * 40503u +
               (uint64_t)which * 97u + 12345u;
  h = (h * 6364136223846793005u + 1442695040888963407u) >> 33;
  return 0.3 * ((double)(h % 1000000u) / 1000000.0 - 0.5);
}

/* The default step, 1 / (the most entries in a row or column * the mean
 * |R|): the squared error's curvature in a row of U is about 2 * sum_j
 * V_j V_j^T over the row's entries, and |V_j|^2 grows towards |R| as the
 * factors fit. */
typedef struct Stats {
  int64_t *rowcount, *colcount, m, n;
  double sumabs;
  int64_t nnz;
} Stats;

static int count_entry(void *ud, const int64_t *c, double v) {
  Stats *s = ud;
  if (v == 0)
    return 0;
  s->rowcount[c[0]]++;
  s->colcount[c[1]]++;
  s->sumabs += fabs(v);
  s->nnz++;
  return 0;
}

static double default_rate(const galley_tensor *R) {
  Stats s = {0};
  s.m = galley_tensor_dim(R, 0);
  s.n = galley_tensor_dim(R, 1);
  s.rowcount = calloc((size_t)s.m + 1, sizeof(int64_t));
  s.colcount = calloc((size_t)s.n + 1, sizeof(int64_t));
  galley_tensor_foreach(R, count_entry, &s);
  int64_t most = 1;
  for (int64_t i = 0; i < s.m; i++)
    most = s.rowcount[i] > most ? s.rowcount[i] : most;
  for (int64_t j = 0; j < s.n; j++)
    most = s.colcount[j] > most ? s.colcount[j] : most;
  free(s.rowcount);
  free(s.colcount);
  double mean = s.nnz ? s.sumabs / (double)s.nnz : 1;
  return 1 / ((double)most * mean);
}

/* A dense factor as a tensor (the program borrows it until the next
 * bind of its name); NULL on failure. */
static galley_tensor *factor_tensor(int64_t rows, int rank, const double *F) {
  int64_t dims[2] = {rows, rank};
  galley_format dense = galley_format_dense(2);
  galley_tensor *t = NULL;
  galley_error err;
  if (failed(galley_tensor_from_dense(2, dims, F, 0, &dense, &t, &err), &err))
    return NULL;
  return t;
}

/* Bind name to a new tensor of F, replacing (and freeing) *held. */
static int rebind(galley_program *p, const char *name, int64_t rows, int rank,
                  const double *F, galley_tensor **held) {
  galley_tensor *t = factor_tensor(rows, rank, F);
  galley_error err;
  if (!t || failed(galley_program_bind(p, name, t, &err), &err)) {
    galley_tensor_free(t);
    return 1;
  }
  galley_tensor_free(*held);
  *held = t;
  return 0;
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct Model {
  int64_t m, n;
  int rank;
  double *U, *V, *GU, *GV;
  galley_tensor *tU, *tV, *tlam;
} Model;

static int model_init(Model *md, const galley_tensor *R, const Options *o) {
  md->m = galley_tensor_dim(R, 0);
  md->n = galley_tensor_dim(R, 1);
  md->rank = o->rank;
  size_t su = sizeof(double) * (size_t)(md->m * o->rank) + 1;
  size_t sv = sizeof(double) * (size_t)(md->n * o->rank) + 1;
  md->U = malloc(su), md->GU = malloc(su);
  md->V = malloc(sv), md->GV = malloc(sv);
  if (!md->U || !md->V || !md->GU || !md->GV) {
    fprintf(stderr, "mf: out of memory\n");
    return 1;
  }
  for (int64_t i = 0; i < md->m; i++)
    for (int k = 0; k < o->rank; k++)
      md->U[i * o->rank + k] = init_value(i, k, 0);
  for (int64_t j = 0; j < md->n; j++)
    for (int k = 0; k < o->rank; k++)
      md->V[j * o->rank + k] = init_value(j, k, 1);
  galley_error err;
  galley_format scalar = galley_format_default(0);
  int64_t no_dims[1] = {0}; /* a scalar has none (not NULL: memcpy'd) */
  return failed(galley_tensor_from_dense(0, no_dims, &o->lam, 0, &scalar,
                                         &md->tlam, &err), &err);
}

static void model_free(Model *md) {
  galley_tensor_free(md->tU);
  galley_tensor_free(md->tV);
  galley_tensor_free(md->tlam);
  free(md->U), free(md->V), free(md->GU), free(md->GV);
}

/* One run: bind the factors, run, read L, GU and GV; 1 on failure. */
static int evaluate(galley_program *p, Model *md, double *loss) {
  galley_error err;
  if (rebind(p, "U", md->m, md->rank, md->U, &md->tU) ||
      rebind(p, "V", md->n, md->rank, md->V, &md->tV) ||
      failed(galley_program_run(p, &err), &err) ||
      failed(galley_tensor_to_dense(galley_program_output(p, 1), md->GU,
                                    md->m * md->rank, &err), &err) ||
      failed(galley_tensor_to_dense(galley_program_output(p, 2), md->GV,
                                    md->n * md->rank, &err), &err))
    return 1;
  *loss = galley_tensor_get(galley_program_output(p, 0), NULL, NULL);
  return 0;
}

static double sum_of(const double *v, int64_t n) {
  double s = 0;
  for (int64_t e = 0; e < n; e++)
    s += v[e];
  return s;
}

static int train(galley_program *p, const galley_tensor *R, const Options *o) {
  Model md = {0};
  galley_error err;
  int bad = model_init(&md, R, o) ||
            failed(galley_program_bind(p, "R", R, &err), &err) ||
            failed(galley_program_bind(p, "lam", md.tlam, &err), &err);
  double rate = o->rate > 0 ? o->rate : default_rate(R);
  int64_t nu = md.m * md.rank, nv = md.n * md.rank;
  int reused = 0;
  double first = 0, loss = 0, t0 = seconds(), tsteps = 0;
  if (!bad)
    printf("rate %.6e\n", rate);
  for (int t = 0; t <= o->steps && !bad; t++) {
    double ts = seconds();
    if ((bad = evaluate(p, &md, &loss)))
      break;
    if (t > 0)
      tsteps += seconds() - ts; /* the first run plans and compiles */
    galley_run_info info;
    galley_program_run_info(p, &info);
    reused += info.reused;
    first = t == 0 ? loss : first;
    printf("step %3d  loss %.12e\n", t, loss);
    for (int64_t e = 0; e < nu && t < o->steps; e++)
      md.U[e] -= rate * md.GU[e];
    for (int64_t e = 0; e < nv && t < o->steps; e++)
      md.V[e] -= rate * md.GV[e];
  }
  if (!bad) {
    printf("loss %.6e -> %.6e in %d steps (kernels reused in %d runs)\n",
           first, loss, o->steps, reused);
    printf("sum U %.12e  sum V %.12e\n", sum_of(md.U, nu), sum_of(md.V, nv));
    printf("time: %.3f s in all, %.2f ms a step after the first\n",
           seconds() - t0, o->steps ? 1e3 * tsteps / o->steps : 0.0);
  }
  model_free(&md);
  return bad;
}

static int run(const Options *o) {
  galley_context *ctx = NULL;
  galley_program *p = NULL;
  galley_tensor *R = NULL;
  char *diag = NULL;
  galley_error err;
  int bad =
      failed(galley_tensor_read(o->path, GALLEY_FILE_AUTO, NULL, &R, &err),
             &err) ||
      failed(galley_context_create(&ctx, &err), &err) ||
      failed(galley_context_set_log(ctx, o->verbose ? 2 : 0, stderr, &err),
             &err);
  if (!bad && galley_tensor_order(R) != 2) {
    fprintf(stderr, "mf: %s: not a matrix\n", o->path);
    bad = 1;
  }
  if (!bad && failed(galley_context_program_parse(ctx, "mf.tin", model_tin,
                                                  strlen(model_tin), &p,
                                                  &diag, &err), &err)) {
    if (diag)
      fputs(diag, stderr);
    bad = 1;
  }
  bad = bad || train(p, R, o);
  free(diag);
  galley_program_free(p);
  galley_tensor_free(R);
  galley_context_free(ctx);
  return bad;
}

static int usage(void) {
  fprintf(stderr, "usage: mf [-v] [-s STEPS] [-k RANK] [-r RATE] "
                  "[-l LAMBDA] MATRIX.mtx\n");
  return 2;
}

int main(int argc, char **argv) {
  Options o = {.steps = 20, .rank = 8, .rate = 0, .lam = 1e-3};
  int c;
  char *end = NULL;
  while ((c = getopt(argc, argv, "vs:k:r:l:")) != -1) {
    switch (c) {
    case 'v':
      o.verbose = 1;
      break;
    case 's':
      o.steps = (int)strtol(optarg, &end, 10);
      break;
    case 'k':
      o.rank = (int)strtol(optarg, &end, 10);
      break;
    case 'r':
      o.rate = strtod(optarg, &end);
      break;
    case 'l':
      o.lam = strtod(optarg, &end);
      break;
    default:
      return usage();
    }
    if (end && *end)
      return usage();
    end = NULL;
  }
  if (optind != argc - 1 || o.steps < 0 || o.rank < 1 || o.lam < 0)
    return usage();
  o.path = argv[optind];
  return run(&o) ? 1 : 0;
}
