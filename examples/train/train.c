/*
 * train.c -- training a model with gradients from galleyc: softmax
 * (multinomial logistic) regression on the Cora citation graph's word
 * features, by gradient descent driven from this C loop through the
 * context API.
 *
 * README
 *   The model: class scores Z = X W for the 2708 papers' bag-of-words X
 *   (2708 x 1433, 49216 nonzeros) and weights W (1433 x 7); the loss is
 *   the mean cross-entropy over the 140 training papers (m[i] = 1/140 on
 *   them, 0 elsewhere), and the gradient comes from `grad`:
 *
 *       Z[i, c] = X[i, f] * W[f, c]
 *       L = sum(i: m[i] * (log(sum(c: exp(Z[i, c]))) - sum(c: Y[i, c] * Z[i, c])))
 *       G[f, c] = grad(L, W[f, c])
 *
 *   Every step binds the new weights and runs the program again (the
 *   plan and the kernels are reused: same formats and sizes), then
 *   W -= rate * G.  Because m is a factor of the loss, the gradient's
 *   program only visits the training rows of X.  As an independent check,
 *   the loss and the gradient are also computed by the plain loops at the
 *   end of this file (the textbook softmax gradient X^T (softmax(Z) - Y)
 *   over the training rows), and the largest difference is printed.
 *
 *       cc train.c $(pkg-config --cflags --libs galley) -o train
 *       ./train ../../../shared/data/matrices/gcn 100
 *
 *   prints the loss ten times along the way (it goes down), the largest relative
 *   difference from the loops, and the accuracy on the training papers
 *   and on the 1000 test papers.  (`make check` builds it as
 *   examples/train/train and runs it from tests/test_train_example.sh.)
 */
#include <galley.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NC = 7 };          /* Cora's classes */
static const double RATE = 2.0; /* gradient step */

static const char model_tin[] =
    "input X[i, f], W[f, c], Y[i, c], m[i]\n"
    "Z[i, c] = X[i, f] * W[f, c]\n"
    "L = sum(i: m[i] * (log(sum(c: exp(Z[i, c]))) - sum(c: Y[i, c] * Z[i, c])))\n"
    "G[f, c] = grad(L, W[f, c])\n"
    "output L, G\n";

/* The data: features as CSR, labels, the split. */
typedef struct Cora {
  galley_tensor *X, *Y, *m; /* bound to the program */
  int64_t n, nf;            /* papers, words */
  int64_t *rowptr, *col;    /* X as CSR, for the loops */
  int *label;               /* class of each paper, -1 without one */
  int64_t *train, *test;    /* 0-based paper ids */
  int ntrain, ntest;
} Cora;

static int failed(galley_status st, const galley_error *err) {
  if (st != GALLEY_OK)
    fprintf(stderr, "train: %s\n",
            err->msg[0] ? err->msg : galley_status_name(st));
  return st != GALLEY_OK;
}

/* 1-based ids, one a line. */
static int64_t *read_ids(const char *path, int *n) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "train: cannot open %s\n", path);
    return NULL;
  }
  int64_t *ids = NULL, id;
  int cap = 0;
  *n = 0;
  while (fscanf(f, "%lld", (long long *)&id) == 1) {
    if (*n == cap) {
      cap = cap ? 2 * cap : 256;
      ids = realloc(ids, sizeof *ids * (size_t)cap);
    }
    ids[(*n)++] = id - 1;
  }
  fclose(f);
  return ids;
}

static galley_tensor *read_mtx(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  galley_tensor *t = NULL;
  galley_error err;
  if (failed(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err), &err))
    return NULL;
  return t;
}

/* X's entries as CSR (the file's rows are sorted by the export). */
static int csr_of(Cora *d) {
  int64_t nnz, *coords = NULL;
  double *vals = NULL;
  galley_error err;
  if (failed(galley_tensor_to_coo(d->X, GALLEY_EXPORT_SKIP_FILL, &nnz,
                                  &coords, &vals, &err), &err))
    return 1;
  d->rowptr = calloc((size_t)d->n + 1, sizeof *d->rowptr);
  d->col = malloc(sizeof *d->col * (size_t)(nnz + 1));
  for (int64_t e = 0; e < nnz; e++) {
    d->rowptr[coords[2 * e] + 1]++;
    d->col[e] = coords[2 * e + 1];
  }
  for (int64_t i = 0; i < d->n; i++)
    d->rowptr[i + 1] += d->rowptr[i];
  free(coords);
  free(vals);
  return 0;
}

static int label_of(void *ud, const int64_t *c, double v) {
  ((int *)ud)[c[0]] = (int)c[1];
  return 0;
}

static int load(const char *dir, Cora *d) {
  char path[4096];
  d->X = read_mtx(dir, "cora_features.mtx");
  d->Y = read_mtx(dir, "cora_labels.mtx");
  if (!d->X || !d->Y)
    return 1;
  d->n = galley_tensor_dim(d->X, 0);
  d->nf = galley_tensor_dim(d->X, 1);
  snprintf(path, sizeof path, "%s/cora_train_idx.txt", dir);
  d->train = read_ids(path, &d->ntrain);
  snprintf(path, sizeof path, "%s/cora_test_idx.txt", dir);
  d->test = read_ids(path, &d->ntest);
  if (!d->train || !d->test || csr_of(d))
    return 1;
  d->label = malloc(sizeof *d->label * (size_t)d->n);
  for (int64_t i = 0; i < d->n; i++)
    d->label[i] = -1;
  galley_tensor_foreach(d->Y, label_of, d->label);
  /* m: 1/ntrain on the training papers */
  double *w = malloc(sizeof *w * (size_t)d->ntrain);
  int64_t *coords = malloc(sizeof *coords * (size_t)d->ntrain);
  for (int k = 0; k < d->ntrain; k++) {
    w[k] = 1.0 / d->ntrain;
    coords[k] = d->train[k];
  }
  galley_error err;
  int bad = failed(galley_tensor_from_coo(1, &d->n, d->ntrain, coords, w, 0,
                                          NULL, &d->m, &err), &err);
  free(w);
  free(coords);
  return bad;
}

/* ---- the independent loops: loss and gradient of the model ---- */

static void scores(const Cora *d, const double *W, int64_t i, double *z) {
  for (int c = 0; c < NC; c++)
    z[c] = 0;
  for (int64_t e = d->rowptr[i]; e < d->rowptr[i + 1]; e++)
    for (int c = 0; c < NC; c++)
      z[c] += W[d->col[e] * NC + c];
}

static double loops(const Cora *d, const double *W, double *G) {
  double loss = 0;
  memset(G, 0, sizeof *G * (size_t)(d->nf * NC));
  for (int k = 0; k < d->ntrain; k++) {
    int64_t i = d->train[k];
    double z[NC], s = 0;
    scores(d, W, i, z);
    for (int c = 0; c < NC; c++)
      s += exp(z[c]);
    loss += (log(s) - z[d->label[i]]) / d->ntrain;
    for (int c = 0; c < NC; c++) {
      double dz = (exp(z[c]) / s - (c == d->label[i])) / d->ntrain;
      for (int64_t e = d->rowptr[i]; e < d->rowptr[i + 1]; e++)
        G[d->col[e] * NC + c] += dz;
    }
  }
  return loss;
}

static double accuracy(const Cora *d, const double *W, const int64_t *ids,
                       int n) {
  int right = 0;
  for (int k = 0; k < n; k++) {
    double z[NC];
    scores(d, W, ids[k], z);
    int best = 0;
    for (int c = 1; c < NC; c++)
      if (z[c] > z[best])
        best = c;
    right += best == d->label[ids[k]];
  }
  return (double)right / n;
}

/* ---- the training loop ---- */

/* One step: bind W (*tW, which the program borrows until the next
 * bind, replaces the previous one), run, read L and G; 1 on failure. */
static int step(galley_program *p, const Cora *d, const double *W,
                galley_tensor **tW, double *loss, double *G) {
  int64_t dims[2] = {d->nf, NC};
  galley_format dense = galley_format_dense(2);
  galley_tensor *next = NULL;
  galley_error err;
  int bad = failed(galley_tensor_from_dense(2, dims, W, 0, &dense, &next,
                                            &err), &err) ||
            failed(galley_program_bind(p, "W", next, &err), &err);
  galley_tensor_free(bad ? next : *tW);
  if (bad)
    return 1;
  *tW = next;
  bad = failed(galley_program_run(p, &err), &err) ||
        failed(galley_tensor_to_dense(galley_program_output(p, 1), G,
                                      d->nf * NC, &err), &err);
  if (!bad)
    *loss = galley_tensor_get(galley_program_output(p, 0), NULL, NULL);
  return bad;
}

static int train(const galley_context *ctx, Cora *d, int steps) {
  galley_program *p = NULL;
  char *diag = NULL;
  galley_error err;
  if (failed(galley_context_program_parse(ctx, "model.tin", model_tin,
                                          strlen(model_tin), &p, &diag, &err),
             &err)) {
    if (diag)
      fputs(diag, stderr);
    free(diag);
    return 1;
  }
  size_t size = sizeof(double) * (size_t)(d->nf * NC);
  double *W = calloc(1, size), *G = malloc(size), *Gl = malloc(size);
  galley_tensor *tW = NULL;
  double worst = 0, loss = 0, first = 0;
  int bad = failed(galley_program_bind(p, "X", d->X, &err), &err) ||
            failed(galley_program_bind(p, "Y", d->Y, &err), &err) ||
            failed(galley_program_bind(p, "m", d->m, &err), &err);
  int reused = 0, every = steps > 10 ? steps / 10 : 1; /* ~10 lines */
  for (int t = 0; t <= steps && !bad; t++) {
    if ((bad = step(p, d, W, &tW, &loss, G)))
      break;
    galley_run_info info;
    galley_program_run_info(p, &info);
    reused += info.reused;
    double ll = loops(d, W, Gl), scale = 1e-300;
    for (int64_t k = 0; k < d->nf * NC; k++)
      scale = fmax(scale, fabs(Gl[k]));
    worst = fmax(worst, fabs(loss - ll) / fabs(ll));
    for (int64_t k = 0; k < d->nf * NC; k++)
      worst = fmax(worst, fabs(G[k] - Gl[k]) / scale);
    if (t == 0)
      first = loss;
    if (t % every == 0 || t == steps)
      printf("step %3d  loss %.6f\n", t, loss);
    for (int64_t k = 0; k < d->nf * NC && t < steps; k++)
      W[k] -= RATE * G[k];
  }
  if (!bad) {
    printf("loss %.6f -> %.6f in %d steps (kernels reused in %d runs)\n",
           first, loss, steps, reused);
    printf("largest relative difference from the loops: %.1e\n", worst);
    printf("accuracy: train %.3f, test %.3f\n",
           accuracy(d, W, d->train, d->ntrain),
           accuracy(d, W, d->test, d->ntest));
  }
  galley_program_free(p);
  galley_tensor_free(tW);
  free(W);
  free(G);
  free(Gl);
  return bad;
}

int main(int argc, char **argv) {
  int verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
  if (argc < 2 + verbose || argc > 3 + verbose) {
    fprintf(stderr, "usage: train [-v] GCN_DATA_DIR [STEPS]\n");
    return 2;
  }
  int steps = argc == 3 + verbose ? atoi(argv[2 + verbose]) : 100;
  Cora d;
  memset(&d, 0, sizeof d);
  galley_context *ctx = NULL;
  galley_error err;
  int bad = load(argv[1 + verbose], &d) ||
            failed(galley_context_create(&ctx, &err), &err) ||
            failed(galley_context_set_log(ctx, verbose ? 2 : 0, stderr, &err),
                   &err) ||
            train(ctx, &d, steps);
  galley_context_free(ctx);
  galley_tensor_free(d.X);
  galley_tensor_free(d.Y);
  galley_tensor_free(d.m);
  free(d.rowptr), free(d.col), free(d.label), free(d.train), free(d.test);
  return bad ? 1 : 0;
}
