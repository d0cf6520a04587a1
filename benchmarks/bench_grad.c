/*
 * bench_grad.c -- forward plus backward per training step with grad:
 * galleyc's side of `benchmarks/run grad` (the other is
 * benchmarks/grad_torch.py, PyTorch on the same data and the same
 * starting parameters).  Built by `make benchmarks`.
 *
 *   bench_grad [-n RUNS] [-b BACKEND] [-R ROUND] [-P] [-Q] [-S] [-C]
 *              WORKLOAD DATA_DIR
 *
 * Workloads (DATA_DIR is ../shared/data):
 *   lsq       least squares |A x - b|^2 on xenon1 (48600^2, 1.18M nnz),
 *             gradient in x
 *   logreg    logistic regression on Cora's features (2708 x 1433), labels
 *             y = (class < 3), gradient in theta
 *   mf        factorization R ~ U V^T over the 301498 observed entries of
 *             pgp-strong-2009, rank 16, gradients in U and V
 *   gcn       one GCN layer H = relu(Z), Z = A (X W), on Cora with a
 *             softmax cross-entropy over the 7 classes, gradient in W
 *   transe    TransE (L2 distance, dimension 32) over WN18RR's 86835
 *             training triples, gradients in E and R
 * Each program is written as a user would, one query per stage (X W,
 * then A (X W), then relu; the differences X apart from their squared
 * norms S): grad materializes the adjoint of every query, so stages give
 * the optimizer intermediates to plan (a nested aggregate inside relu or
 * sqrt would be recomputed inside the gradient's product, and the
 * gradient of a three-factor product is one three-factor contraction).
 * The parameters start at bench_param (below), the formula that
 * grad_torch.py uses too.  Two programs are parsed and bound once: the
 * loss with its gradients (grad) and the loss alone (forward); each is
 * run once cold (plan, compile), then, with the default backend, until
 * clang's kernels are installed (galley_program_wait_compiled), then RUNS
 * times (default 20) alternately, timed around galley_program_run.  A
 * third timing, host_io, is what a host loop adds per step: the
 * parameters made into tensors and bound, the gradients read back into
 * arrays.  The 10% rule (issue 16: at fixed nnz, doubling the
 * dimensions must not change gradient time by more than 10%), timed:
 * for mf and transe, whose inputs other than the parameters are sparse
 * and whose loss sums over stored entries, a third program, the same
 * gradient on the data with every dimension doubled (the same entries
 * at the same coordinates, the same format; the parameters' tables
 * doubled with them, so the loss and the gradients' sums are unchanged),
 * is run in the same alternation: variant grad_2x (-S skips it).
 * -P prints the physical plans of the programs to stderr, -Q the time
 * of every physical query in the last timed run of grad and forward; -C
 * times the process's CPU time instead of the wall clock (on a loaded
 * machine; host_io stays on the wall clock).
 * CSV lines on stdout:
 *   tool,workload,variant,round,runs,median_ms,min_ms,loss,grad_abs_sum,note
 * with grad_abs_sum the sum of |entries| of every gradient (the check
 * between the tools).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchutil.h"
#include "galley.h"

enum { MAX_RUNS = 10000, MAX_PARAMS = 2 };

static void die(const char *what, const galley_error *err) {
  fprintf(stderr, "bench_grad: %s: %s\n", what, err ? err->msg : "");
  exit(1);
}

/* A parameter's starting entry (row, k), parameter `which`: the same
 * integer arithmetic as grad_torch.py and examples/mf/mf.c. */
static double bench_param(int64_t row, int64_t k, int which) {
  uint64_t h = (uint64_t)row * 2654435761u + (uint64_t)k * 40503u +
               (uint64_t)which * 97u + 12345u;
  h = (h * 6364136223846793005u + 1442695040888963407u) >> 33;
  return 0.3 * ((double)(h % 1000000u) / 1000000.0 - 0.5);
}

typedef struct Param {
  const char *name; /* the input's name */
  int order;
  int64_t dims[2];
  double *v;        /* host values, row-major */
  galley_tensor *t; /* bound */
} Param;

typedef struct Workload {
  const char *name;
  const char *grad_src, *fwd_src;
  int nparams;
  Param p[MAX_PARAMS];
  galley_tensor *data[4];
  const char *data_name[4];
  int ndata;
  const char *grad_names[MAX_PARAMS]; /* outputs of grad_src after L */
} Workload;

static galley_tensor *read_file(const char *dir, const char *rel) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  galley_tensor *t = NULL;
  galley_error err;
  if (galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err) != GALLEY_OK)
    die(path, &err);
  return t;
}

/* t with every dimension multiplied by `scale` and the same entries at
 * the same coordinates (the new rows and columns empty), in t's format:
 * the 10% rule's "at fixed nnz, doubled dimensions". */
static galley_tensor *widen(galley_tensor *t, int scale) {
  if (scale == 1)
    return t;
  int order = galley_tensor_order(t);
  int64_t dims[8], nnz = 0, *coords = NULL;
  double *vals = NULL;
  for (int m = 0; m < order; m++)
    dims[m] = galley_tensor_dim(t, m) * scale;
  galley_format fmt;
  galley_tensor_format(t, &fmt);
  galley_tensor *w = NULL;
  galley_error err;
  if (galley_tensor_to_coo(t, 0, &nnz, &coords, &vals, &err) != GALLEY_OK ||
      galley_tensor_from_coo(order, dims, nnz, coords, vals,
                             galley_tensor_fill(t), &fmt, &w,
                             &err) != GALLEY_OK)
    die("widen", &err);
  free(coords);
  free(vals);
  galley_tensor_free(t);
  return w;
}

static galley_tensor *dense_tensor(int order, const int64_t *dims,
                                   const double *v) {
  galley_format fmt = galley_format_dense(order);
  galley_tensor *t = NULL;
  galley_error err;
  if (galley_tensor_from_dense(order, dims, v, 0, &fmt, &t, &err) != GALLEY_OK)
    die("from_dense", &err);
  return t;
}

static int64_t param_size(const Param *p) {
  int64_t n = 1;
  for (int m = 0; m < p->order; m++)
    n *= p->dims[m];
  return n;
}

static void add_param(Workload *w, const char *name, int order, int64_t d0,
                      int64_t d1, int which) {
  Param *p = &w->p[w->nparams++];
  p->name = name;
  p->order = order;
  p->dims[0] = d0;
  p->dims[1] = order > 1 ? d1 : 1;
  int64_t n = param_size(p);
  p->v = malloc(sizeof(double) * (size_t)n);
  if (!p->v)
    die("out of memory", NULL);
  for (int64_t e = 0; e < n; e++)
    p->v[e] = bench_param(e / p->dims[1], e % p->dims[1], which);
  p->t = dense_tensor(order, p->dims, p->v);
}

static void add_data(Workload *w, const char *name, galley_tensor *t) {
  w->data_name[w->ndata] = name;
  w->data[w->ndata++] = t;
}

/* y[i] = 1 for the papers of classes 0, 1, 2 (the labels' columns). */
static int label_low(void *ud, const int64_t *c, double v) {
  if (v != 0 && c[1] < 3)
    ((double *)ud)[c[0]] = 1;
  return 0;
}

/* Whether the workload's cost should not grow with its dimensions at
 * fixed nnz: every input but the parameters sparse and the loss a sum
 * over stored entries (lsq's b, logreg's y and GCN's per-node softmax
 * are dense over a dimension: their work grows with it by the dense
 * meaning). */
static int fixed_nnz_workload(const char *name) {
  return !strcmp(name, "mf") || !strcmp(name, "transe");
}

/* scale 2: the data's dimensions doubled at the same entries (only for
 * fixed_nnz_workload()s), the parameters with them (the new rows start
 * at bench_param like the others, and no entry reads them: the loss and
 * the gradients' sums are those of scale 1). */
static void setup(Workload *w, const char *name, const char *dir, int scale) {
  memset(w, 0, sizeof *w);
  w->name = name;
  if (!strcmp(name, "lsq")) {
    galley_tensor *A = read_file(dir, "matrices/xenon1.mtx.gz");
    add_data(w, "A", A);
    add_param(w, "x", 1, galley_tensor_dim(A, 1), 1, 0);
    int64_t m = galley_tensor_dim(A, 0);
    double *b = malloc(sizeof(double) * (size_t)m);
    for (int64_t i = 0; i < m; i++)
      b[i] = bench_param(i, 0, 1);
    add_data(w, "b", dense_tensor(1, &m, b));
    free(b);
    w->fwd_src = "input A[i, j], x[j], b[i]\n"
                 "r[i] = sum(j: A[i, j] * x[j]) - b[i]\n"
                 "L = sum(i: r[i]^2)\n"
                 "output L\n";
    w->grad_names[0] = "Gx";
  } else if (!strcmp(name, "logreg")) {
    galley_tensor *X = read_file(dir, "matrices/gcn/cora_features.mtx");
    galley_tensor *Y = read_file(dir, "matrices/gcn/cora_labels.mtx");
    int64_t n = galley_tensor_dim(X, 0);
    double *y = calloc((size_t)n, sizeof(double));
    galley_tensor_foreach(Y, label_low, y);
    galley_tensor_free(Y);
    add_data(w, "X", X);
    add_data(w, "y", dense_tensor(1, &n, y));
    free(y);
    add_param(w, "theta", 1, galley_tensor_dim(X, 1), 1, 0);
    w->fwd_src = "input X[i, j], theta[j], y[i]\n"
                 "z[i] = sum(j: X[i, j] * theta[j])\n"
                 "L = sum(i: log(1 + exp(z[i])) - y[i] * z[i])\n"
                 "output L\n";
    w->grad_names[0] = "G";
  } else if (!strcmp(name, "mf")) {
    galley_tensor *R =
        widen(read_file(dir, "matrices/pgp-strong-2009.mtx.gz"), scale);
    add_data(w, "R", R);
    add_param(w, "U", 2, galley_tensor_dim(R, 0), 16, 0);
    add_param(w, "V", 2, galley_tensor_dim(R, 1), 16, 1);
    w->fwd_src = "input R[i, j], U[i, k], V[j, k]\n"
                 "P[i, j] = (R[i, j] != 0) * U[i, k] * V[j, k]\n"
                 "L = sum(i, j: (R[i, j] - P[i, j])^2)\n"
                 "output L\n";
    w->grad_names[0] = "GU", w->grad_names[1] = "GV";
  } else if (!strcmp(name, "gcn")) {
    galley_tensor *A = read_file(dir, "matrices/gcn/cora_adj.mtx");
    galley_tensor *X = read_file(dir, "matrices/gcn/cora_features.mtx");
    galley_tensor *Y = read_file(dir, "matrices/gcn/cora_labels.mtx");
    add_data(w, "A", A);
    add_data(w, "X", X);
    add_data(w, "Y", Y);
    add_param(w, "W", 2, galley_tensor_dim(X, 1), galley_tensor_dim(Y, 1), 0);
    w->fwd_src =
        "input A[i, j], X[j, f], W[f, c], Y[i, c]\n"
        "XW[j, c] = X[j, f] * W[f, c]\n"
        "Z[i, c] = A[i, j] * XW[j, c]\n"
        "H[i, c] = relu(Z[i, c])\n"
        "L = sum(i: log(sum(c: exp(H[i, c]))) - sum(c: Y[i, c] * H[i, c]))\n"
        "output L\n";
    w->grad_names[0] = "G";
  } else if (!strcmp(name, "transe")) {
    galley_tensor *T =
        widen(read_file(dir, "tensors/kg/wn18rr/train.tns.gz"), scale);
    add_data(w, "T", T);
    add_param(w, "E", 2, galley_tensor_dim(T, 0), 32, 0);
    add_param(w, "R", 2, galley_tensor_dim(T, 1), 32, 1);
    w->fwd_src =
        "input T[h, r, t], E[e, d], R[r, d]\n"
        "X[h, r, t, d] = T[h, r, t] * (E[h, d] + R[r, d] - E[t, d])\n"
        "S[h, r, t] = sum(d: X[h, r, t, d]^2)\n"
        "L = sum(h, r, t: T[h, r, t] * sqrt(S[h, r, t] + 1e-6))\n"
        "output L\n";
    w->grad_names[0] = "GE", w->grad_names[1] = "GR";
  } else {
    fprintf(stderr, "bench_grad: unknown workload '%s' (lsq, logreg, mf, "
                    "gcn, transe)\n", name);
    exit(2);
  }
}

/* The forward program with the grads of every parameter added, and
 * `output L, G...`. */
static char *grad_program(const Workload *w) {
  size_t cap = strlen(w->fwd_src) + 1024;
  char *s = malloc(cap);
  const char *out = strstr(w->fwd_src, "output L");
  size_t n = (size_t)(out - w->fwd_src);
  memcpy(s, w->fwd_src, n);
  s[n] = 0;
  static const char *const idx[2][2] = {{"j", NULL}, {"a", "b"}};
  for (int k = 0; k < w->nparams; k++) {
    const Param *p = &w->p[k];
    const char *const *ix = idx[p->order - 1];
    if (p->order == 1)
      n += (size_t)snprintf(s + n, cap - n, "%s[%s] = grad(L, %s[%s])\n",
                            w->grad_names[k], ix[0], p->name, ix[0]);
    else
      n += (size_t)snprintf(s + n, cap - n,
                            "%s[%s, %s] = grad(L, %s[%s, %s])\n",
                            w->grad_names[k], ix[0], ix[1], p->name, ix[0],
                            ix[1]);
  }
  n += (size_t)snprintf(s + n, cap - n, "output L");
  for (int k = 0; k < w->nparams; k++)
    n += (size_t)snprintf(s + n, cap - n, ", %s", w->grad_names[k]);
  snprintf(s + n, cap - n, "\n");
  return s;
}

static galley_program *prepare(const Workload *w, const char *src,
                               const char *backend) {
  galley_program *p = NULL;
  char *diags = NULL;
  galley_error err;
  if (galley_program_parse(w->name, src, strlen(src), &p, &diags, &err) !=
      GALLEY_OK) {
    fprintf(stderr, "%s%s\n", src, diags ? diags : "");
    die("parse", &err);
  }
  for (int k = 0; k < w->ndata; k++)
    if (galley_program_bind(p, w->data_name[k], w->data[k], &err) != GALLEY_OK)
      die("bind", &err);
  for (int k = 0; k < w->nparams; k++)
    if (galley_program_bind(p, w->p[k].name, w->p[k].t, &err) != GALLEY_OK)
      die("bind", &err);
  galley_backend b = GALLEY_BACKEND_DEFAULT;
  if (backend && galley_backend_parse(backend, &b, &err) != GALLEY_OK)
    die("backend", &err);
  if (galley_program_set_backend(p, b, &err) != GALLEY_OK)
    die("backend", &err);
  return p;
}

/* -C: the process's CPU time instead of the wall clock (on a machine
 * shared with other work, the wall clock counts the time waited for a
 * core; the runs are single-threaded). */
static int cpu_clock;

static double clock_ms(void) {
  if (!cpu_clock)
    return now_ms();
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double run_ms(galley_program *p) {
  galley_error err;
  double t0 = clock_ms();
  if (galley_program_run(p, &err) != GALLEY_OK)
    die("run", &err);
  return clock_ms() - t0;
}

/* Cold run, then (default backend) runs until clang's code is in. */
static void warm_up(galley_program *p, int print_plan, const char *what) {
  run_ms(p);
  galley_error err;
  galley_program_wait_compiled(p, &err); /* EJIT: stays on tcc */
  run_ms(p);
  if (print_plan) {
    fprintf(stderr, "== %s\n", what);
    galley_program_print_physical_plan(p, stderr, &err);
  }
}

static double abs_sum(const galley_tensor *t) {
  int64_t n = 1;
  for (int m = 0; m < galley_tensor_order(t); m++)
    n *= galley_tensor_dim(t, m);
  double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  galley_error err;
  if (galley_tensor_to_dense(t, v, n, &err) != GALLEY_OK)
    die("to_dense", &err);
  double s = 0;
  for (int64_t e = 0; e < n; e++)
    s += fabs(v[e]);
  free(v);
  return s;
}

/* What a host loop adds per step: the parameters into tensors, bound;
 * the gradients back into arrays. */
static double host_io_ms(galley_program *p, galley_program *pf, Workload *w) {
  galley_error err;
  double t0 = now_ms();
  for (int k = 0; k < w->nparams; k++) {
    Param *q = &w->p[k];
    galley_tensor *t = dense_tensor(q->order, q->dims, q->v);
    if (galley_program_bind(p, q->name, t, &err) != GALLEY_OK)
      die("bind", &err);
    galley_tensor_free(q->t);
    q->t = t;
  }
  for (int k = 0; k < w->nparams; k++) {
    const galley_tensor *g = galley_program_output(p, 1 + k);
    if (galley_tensor_to_dense(g, w->p[k].v, param_size(&w->p[k]), &err) !=
        GALLEY_OK)
      die("to_dense", &err);
  }
  double ms = now_ms() - t0;
  for (int k = 0; k < w->nparams; k++) /* pf borrowed the freed tensor */
    if (galley_program_bind(pf, w->p[k].name, w->p[k].t, &err) != GALLEY_OK)
      die("bind", &err);
  /* restore the starting values (the gradient was read into them) */
  for (int k = 0; k < w->nparams; k++) {
    Param *q = &w->p[k];
    for (int64_t e = 0; e < param_size(q); e++)
      q->v[e] = bench_param(e / q->dims[1], e % q->dims[1], k);
  }
  return ms;
}

/* The physical queries of the last run, with their times, to stderr. */
static void print_queries(const galley_program *p, const char *what) {
  galley_run_info info;
  galley_program_run_info(p, &info);
  fprintf(stderr, "== %s: %d queries, exec %.3f ms\n", what, info.nqueries,
          1e3 * info.exec_seconds);
  for (int k = 0; k < info.nqueries; k++) {
    galley_query_info q;
    galley_error err;
    if (galley_program_query_info(p, k, &q, &err) == GALLEY_OK)
      fprintf(stderr, "  %-20s %10.3f ms  %10lld stored\n", q.name,
              1e3 * q.seconds, (long long)q.stored);
  }
}

static void emit(const char *workload, const char *variant, int round,
                 double *v, int n, double loss, double gsum,
                 const char *note) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  printf("galleyc,%s,%s,%d,%d,%.4f,%.4f,%.17g,%.17g,%s\n", workload, variant,
         round, n, median_of(v, n), v[0], loss, gsum, note);
}

int main(int argc, char **argv) {
  int runs = 20, round = 0, plans = 0, queries = 0, doubled = 1, c;
  const char *backend = NULL;
  while ((c = getopt(argc, argv, "n:b:R:PQSC")) != -1) {
    switch (c) {
    case 'n': runs = atoi(optarg); break;
    case 'b': backend = optarg; break;
    case 'R': round = atoi(optarg); break;
    case 'P': plans = 1; break;
    case 'Q': queries = 1; break;
    case 'S': doubled = 0; break;
    case 'C': cpu_clock = 1; break;
    default: goto usage;
    }
  }
  if (argc - optind != 2 || runs < 1 || runs > MAX_RUNS)
    goto usage;
  Workload w, w2;
  setup(&w, argv[optind], argv[optind + 1], 1);
  char *gsrc = grad_program(&w);
  galley_program *pg = prepare(&w, gsrc, backend);
  galley_program *pf = prepare(&w, w.fwd_src, backend);
  galley_program *p2 = NULL; /* the gradient at doubled dimensions */
  if (doubled && fixed_nnz_workload(w.name)) {
    setup(&w2, argv[optind], argv[optind + 1], 2);
    p2 = prepare(&w2, gsrc, backend);
  }
  warm_up(pg, plans, "grad");
  warm_up(pf, plans, "forward");
  if (p2)
    warm_up(p2, plans, "grad at doubled dimensions");
  static double tg[MAX_RUNS], tf[MAX_RUNS], t2[MAX_RUNS], tio[MAX_RUNS];
  for (int r = 0; r < runs; r++) {
    tg[r] = run_ms(pg);
    tf[r] = run_ms(pf);
    if (p2)
      t2[r] = run_ms(p2);
  }
  if (queries) {
    print_queries(pg, "grad");
    print_queries(pf, "forward");
  }
  double loss = galley_tensor_get(galley_program_output(pg, 0), NULL, NULL);
  double lossf = galley_tensor_get(galley_program_output(pf, 0), NULL, NULL);
  double gsum = 0;
  for (int k = 0; k < w.nparams; k++)
    gsum += abs_sum(galley_program_output(pg, 1 + k));
  galley_run_info info;
  galley_program_run_info(pg, &info);
  const char *be = galley_backend_name(info.backend);
  emit(w.name, "grad", round, tg, runs, loss, gsum, be);
  emit(w.name, "forward", round, tf, runs, lossf, 0, be);
  if (p2) {
    double gsum2 = 0;
    for (int k = 0; k < w2.nparams; k++)
      gsum2 += abs_sum(galley_program_output(p2, 1 + k));
    emit(w.name, "grad_2x", round, t2, runs,
         galley_tensor_get(galley_program_output(p2, 0), NULL, NULL), gsum2,
         be);
    galley_program_free(p2);
    for (int k = 0; k < w2.nparams; k++) {
      free(w2.p[k].v);
      galley_tensor_free(w2.p[k].t);
    }
    for (int k = 0; k < w2.ndata; k++)
      galley_tensor_free(w2.data[k]);
  }
  for (int r = 0; r < runs && r < 5; r++)
    tio[r] = host_io_ms(pg, pf, &w);
  emit(w.name, "host_io", round, tio, runs < 5 ? runs : 5, loss, 0, "");
  galley_program_free(pg);
  galley_program_free(pf);
  free(gsrc);
  for (int k = 0; k < w.nparams; k++) {
    free(w.p[k].v);
    galley_tensor_free(w.p[k].t);
  }
  for (int k = 0; k < w.ndata; k++)
    galley_tensor_free(w.data[k]);
  return 0;
usage:
  fprintf(stderr, "usage: bench_grad [-n RUNS] [-b BACKEND] [-R ROUND] [-P] [-Q] [-S] [-C] "
                  "WORKLOAD DATA_DIR\n");
  return 2;
}
