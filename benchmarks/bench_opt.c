/*
 * bench_opt.c -- benchmarks of the cost-based optimizer (issue 5,
 * "## Benchmarks").  Built by `make benchmarks`; run by `benchmarks/run opt`.
 *
 *   bench_opt chain [-r REPS] [-c CAP_S] [-d DIR]
 *     Matrix chain E[i,l] = sum(j,k: A[i,j]*B[j,k]*C[k,l]), 2000x2000, A and
 *     B density 0.1, C density 1, 0.1, 1e-2, 1e-3, 1e-4, 1e-5 (seeded).
 *     "cost": the one-statement program with GALLEY_PLANNER_COST;
 *     "ltr": AB[i,k] = sum(j: A*B); E = sum(k: AB*C) with
 *     GALLEY_PLANNER_SIMPLE (the fixed left-to-right plan).  Every
 *     configuration runs in a forked child killed after CAP_S seconds
 *     (default 60).  One cold run (plan + codegen, compile, exec), then
 *     REPS-1 reused runs; the median exec time is reported.  With -d the
 *     matrices are also written to DIR/{A,B,C<k>}.bin for
 *     benchmarks/baseline_chain.py (int64 n, int64 nnz, nnz int64 rows,
 *     nnz int64 cols, nnz doubles).
 *     CSV: chain,CONFIG,C_DENSITY,C_NNZ,plan_ms,compile_ms,exec_ms_median,
 *          reps,checksum,E_nnz,note
 *
 *   bench_opt subgraph [-n NEXEC] [-c CAP_S] [-p NPLAN] DATA_DIR
 *     DATA_DIR = ../shared/data/subgraph/fastest-yeast.  Queries: an
 *     unlabeled triangle and 4-cycle, and the labeled query sets dense_4,
 *     dense_8, sparse_8 (the first NPLAN of each, default 200), written as
 *     .tin programs count = sum(v0..vK: prod E[u,v] * prod Llab[v]).
 *     Optimizer time: front_parse once, then logical_optimize +
 *     physical_optimize timed (repeated until >= 20 ms, mean), for chain
 *     and uniform estimators with greedy search, and chain with exact
 *     search.  Then for chain, greedy, as a program plans (the two
 *     optimizers sharing a StatsCache), in thread CPU time: the first
 *     plan, the mean of plans with a new cache each (cold), and with one
 *     cache kept across plans (warm); see `tin` below.  Execution (the first NEXEC of each set, default 10, each in
 *     a child capped at CAP_S, default 10 s) with each estimator: the
 *     count (checked against derived_hom_counts.txt), plan/compile/exec
 *     times, and per logical intermediate its est_nnz and real nnz (from
 *     galley_program_query_info, non-transpose queries matched in order to
 *     the logical queries; a plan whose counts differ is not matched).
 *     -P FILE: instead of timing, write every query's logical and
 *     physical plan (chain, greedy) to FILE (and run nothing).
 *     CSV: opt,SET,QUERY,EST,SEARCH,nq,mean_ms
 *          plan,SET,QUERY,nq,first_ms,cold_ms,warm_ms
 *          run,SET,QUERY,EST,status,count,expected,plan_ms,compile_ms,exec_ms
 *          est,SET,QUERY,EST,LQNAME,est_nnz,real_nnz,qerror
 *
 *   bench_opt tin [-t MS] [-D DIR] PROG.tin ...
 *     Optimizer time of .tin programs on real data (e.g. the TPC-H star
 *     join of benchmarks/tpch/ *.tin on the tensors of convert.py: -D
 *     OUTDIR).  Each declared input NAME is read from DIR/NAME.tns,
 *     .mtx (or either .gz) in the default format of its order; loading
 *     is not timed.  Then, with the default estimator and search, each
 *     timing repeated until MS (default 200) are spent, at least 3 times
 *     (times are the thread's CPU time, which other processes on a shared
 *     machine do not inflate as much as wall time):
 *       first   the first plan (logical_optimize + physical_optimize
 *               sharing one new StatsCache, as galley_program_run plans
 *               new data), in a process that has not planned these
 *               tensors before;
 *       cold    mean and max of the same, repeated with a new
 *               StatsCache each time (what each input keeps, its
 *               degree statistics and facts, is reused);
 *       fresh   mean and max of first plans, repeated: every input
 *               touched (galley_tensor_touch) before each plan, so its
 *               facts and degree statistics are computed again;
 *       warm    mean and max with one StatsCache kept across the plans
 *               (as a galley_program plans its bound inputs again):
 *               the optimizers alone;
 *       nocache  the mean with no shared cache (each optimizer gathers
 *               its own statistics: what bench_tin's opt_ms measures);
 *       bound   mean and max of the same as fresh, but with every
 *               input's facts made (untimed) before each plan, as
 *               galley_program_bind makes them: what planning new data
 *               costs a program, its statistics included;
 *       facts   galley_tensor_facts of every input (the values pass
 *               binding makes), the least of 3 times;
 *       stats   rt_degree_stats of every input as the optimizer asks for
 *               them (sample STATS_SAMPLE), the least of 3 times;
 *       exact   galley_tensor_degree_stats (every figure exact), once.
 *     -K KIND: only plans of one kind (0 cold, 1 warm, 3 fresh, 4 bound), repeated
 *     for MS, for a profiler (CSV: kind,PROG,KIND,nq,mean_ms,max_ms).
 *     CSV: tin,PROG,nq,first_ms,cold_mean_ms,cold_max_ms,warm_mean_ms,
 *          warm_max_ms,nocache_ms,stats_ms,exact_ms,fresh_mean_ms,
 *          fresh_max_ms,bound_mean_ms,bound_max_ms,facts_ms
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "galley.h"
#include "ir.h"
#include "logical.h"
#include "phys.h"
#include "rt_stats.h"
#include "stats.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This thread's CPU time: the optimizer timings of `tin` mode use it, so
 * that other work on a shared machine does not inflate them. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const galley_error *e) {
  fprintf(stderr, "bench_opt: %s: %s\n", what, e ? e->msg : "");
  exit(1);
}

/* ---- forked child with a time cap: the child writes text to a pipe ---- */

/* Runs fn(ud, fd) in a child; returns its output (malloc'ed) and sets
 * *status: 0 ok, 1 timed out (killed), 2 failed. */
static char *run_capped(void (*fn)(void *, FILE *), void *ud, double cap,
                        int *status) {
  int pfd[2];
  if (pipe(pfd))
    die("pipe", NULL);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0)
    die("fork", NULL);
  if (pid == 0) {
    close(pfd[0]);
    struct rlimit rl = {(rlim_t)12 << 30, (rlim_t)12 << 30}; /* 12 GiB */
    setrlimit(RLIMIT_AS, &rl);
    FILE *f = fdopen(pfd[1], "w");
    fn(ud, f);
    fclose(f);
    _exit(0);
  }
  close(pfd[1]);
  size_t len = 0, cap_b = 4096;
  char *buf = malloc(cap_b);
  double t0 = now_s();
  int timed_out = 0;
  for (;;) {
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(pfd[0], &rs);
    double left = cap - (now_s() - t0);
    if (left <= 0) {
      kill(pid, SIGKILL);
      timed_out = 1;
      break;
    }
    struct timeval tv = {(time_t)left, (suseconds_t)((left - (time_t)left) * 1e6)};
    int r = select(pfd[0] + 1, &rs, NULL, NULL, &tv);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      continue;
    if (len + 4096 > cap_b) {
      cap_b *= 2;
      buf = realloc(buf, cap_b);
    }
    ssize_t n = read(pfd[0], buf + len, cap_b - len - 1);
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  close(pfd[0]);
  int ws = 0;
  waitpid(pid, &ws, 0);
  buf[len] = 0;
  *status = timed_out ? 1 : (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) ? 0 : 2;
  return buf;
}

/* ---- random matrices ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}
static double urand(void) { return ((double)(rng() >> 11) + 1.0) / 9007199254740993.0; }

typedef struct Coo {
  int64_t n, nnz;
  int64_t *rc; /* interleaved */
  double *v;
} Coo;

static Coo gen(int64_t n, double p, uint64_t seed) {
  rng_state = seed * 0x2545F4914F6CDD1Dull + 1;
  Coo c = {n, 0, NULL, NULL};
  int64_t capn = (int64_t)(p * n * n * 1.2) + 64;
  if (capn > n * n)
    capn = n * n;
  c.rc = malloc((size_t)capn * 2 * sizeof(int64_t));
  c.v = malloc((size_t)capn * sizeof(double));
  if (p >= 1e-2) { /* Bernoulli per entry: no duplicates */
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++)
        if (p >= 1.0 || urand() < p) {
          if (c.nnz == capn)
            break;
          c.rc[2 * c.nnz] = i;
          c.rc[2 * c.nnz + 1] = j;
          c.v[c.nnz++] = urand();
        }
  } else { /* random coordinates (duplicates are summed; rare) */
    int64_t m = (int64_t)llround(p * (double)n * (double)n);
    if (m < 1)
      m = 1;
    for (int64_t e = 0; e < m; e++) {
      c.rc[2 * e] = (int64_t)(rng() % (uint64_t)n);
      c.rc[2 * e + 1] = (int64_t)(rng() % (uint64_t)n);
      c.v[e] = urand();
    }
    c.nnz = m;
  }
  return c;
}

static galley_tensor *coo_tensor(const Coo *c) {
  int64_t dims[2] = {c->n, c->n};
  galley_tensor *t = NULL;
  galley_error e;
  if (galley_tensor_from_coo(2, dims, c->nnz, c->rc, c->v, 0.0, NULL, &t, &e))
    die("from_coo", &e);
  return t;
}

static void write_bin(const char *path, const galley_tensor *t) {
  int64_t nnz = 0, *rc = NULL;
  double *v = NULL;
  galley_error e;
  if (galley_tensor_to_coo(t, GALLEY_EXPORT_SKIP_FILL, &nnz, &rc, &v, &e))
    die("to_coo", &e);
  FILE *f = fopen(path, "wb");
  if (!f)
    die(path, NULL);
  int64_t n = galley_tensor_dim(t, 0);
  fwrite(&n, 8, 1, f);
  fwrite(&nnz, 8, 1, f);
  for (int64_t k = 0; k < nnz; k++)
    fwrite(&rc[2 * k], 8, 1, f);
  for (int64_t k = 0; k < nnz; k++)
    fwrite(&rc[2 * k + 1], 8, 1, f);
  fwrite(v, 8, (size_t)nnz, f);
  fclose(f);
  free(rc);
  free(v);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  if (n <= 0)
    return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double checksum(const galley_tensor *t, int64_t *nnz) {
  int64_t n = 0, *c = NULL;
  double *v = NULL, s = 0;
  galley_tensor_to_coo(t, GALLEY_EXPORT_SKIP_FILL, &n, &c, &v, NULL);
  for (int64_t k = 0; k < n; k++)
    s += v[k];
  free(c);
  free(v);
  *nnz = n;
  return s;
}

/* ---- matrix chain ---- */

static const char *CHAIN_COST =
    "input A[i, j], B[j, k], C[k, l]\n"
    "E[i, l] = sum(j, k: A[i, j] * B[j, k] * C[k, l])\n";
static const char *CHAIN_LTR =
    "input A[i, j], B[j, k], C[k, l]\n"
    "AB[i, k] = sum(j: A[i, j] * B[j, k])\n"
    "E[i, l] = sum(k: AB[i, k] * C[k, l])\n"
    "output E\n";

typedef struct ChainJob {
  const char *src;
  galley_planner planner;
  const galley_tensor *A, *B, *C;
  int reps;
  double cap;
} ChainJob;

static void chain_child(void *ud, FILE *out) {
  ChainJob *j = ud;
  galley_program *p = NULL;
  galley_error e;
  if (galley_program_parse("chain.tin", j->src, strlen(j->src), &p, NULL, &e))
    die("parse", &e);
  galley_program_set_planner(p, j->planner);
  galley_program_bind(p, "A", j->A, &e);
  galley_program_bind(p, "B", j->B, &e);
  galley_program_bind(p, "C", j->C, &e);
  double ex[64];
  int n = 0;
  double t0 = now_s();
  double plan = 0, comp = 0;
  for (int r = 0; r < j->reps && r < 64; r++) {
    if (galley_program_run(p, &e)) {
      fprintf(out, "ERR %s\n", e.msg);
      return;
    }
    galley_run_info info;
    galley_program_run_info(p, &info);
    if (r == 0) {
      plan = info.plan_seconds;
      comp = info.compile_seconds;
      int64_t nnz;
      int k = galley_program_num_outputs(p) - 1;
      double cs = checksum(galley_program_output(p, k), &nnz);
      fprintf(out, "FIRST %.6f %.6f %.6f %.10g %lld\n", plan * 1e3, comp * 1e3,
              info.exec_seconds * 1e3, cs, (long long)nnz);
      if (j->planner == GALLEY_PLANNER_COST) {
        fprintf(stderr, "-- physical plan (cost planner, C nnz %lld):\n",
                (long long)galley_tensor_nnz(j->C));
        galley_program_print_physical_plan(p, stderr, &e);
      }
    }
    ex[n++] = info.exec_seconds * 1e3;
    fprintf(out, "EXEC %.6f\n", info.exec_seconds * 1e3);
    fflush(out);
    if (now_s() - t0 > j->cap * 0.5)
      break;
  }
  (void)median(ex, n);
  galley_program_free(p);
}

static void bench_chain(int reps, double cap, const char *dir) {
  const int64_t n = 2000;
  Coo a = gen(n, 0.1, 1), b = gen(n, 0.1, 2);
  galley_tensor *A = coo_tensor(&a), *B = coo_tensor(&b);
  free(a.rc), free(a.v), free(b.rc), free(b.v);
  if (dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/A.bin", dir);
    write_bin(path, A);
    snprintf(path, sizeof path, "%s/B.bin", dir);
    write_bin(path, B);
  }
  static const double dens[] = {1, 0.1, 1e-2, 1e-3, 1e-4, 1e-5};
  printf("# chain,config,c_density,c_nnz,plan_ms,compile_ms,exec_ms_median,"
         "reps,checksum,e_nnz,note\n");
  for (int di = 0; di < 6; di++) {
    Coo c = gen(n, dens[di], 3 + (uint64_t)di);
    galley_tensor *C = coo_tensor(&c);
    free(c.rc), free(c.v);
    if (dir) {
      char path[4096];
      snprintf(path, sizeof path, "%s/C%d.bin", dir, di);
      write_bin(path, C);
    }
    for (int cfg = 0; cfg < 2; cfg++) {
      ChainJob j = {cfg ? CHAIN_LTR : CHAIN_COST,
                    cfg ? GALLEY_PLANNER_SIMPLE : GALLEY_PLANNER_COST,
                    A, B, C, reps, cap};
      int st;
      char *o = run_capped(chain_child, &j, cap, &st);
      double plan = NAN, comp = NAN, first = NAN, cs = NAN, ex[64];
      long long enz = -1;
      int ne = 0;
      char note[256] = "";
      for (char *line = strtok(o, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "FIRST", 5))
          sscanf(line + 6, "%lf %lf %lf %lf %lld", &plan, &comp, &first, &cs,
                 &enz);
        else if (!strncmp(line, "EXEC", 4) && ne < 64)
          ex[ne++] = atof(line + 5);
        else if (!strncmp(line, "ERR", 3))
          snprintf(note, sizeof note, "error: %.200s", line + 4);
      }
      /* the first (cold) run's exec counts only when it is the only one */
      double med = ne > 1 ? median(ex + 1, ne - 1) : ne == 1 ? ex[0] : NAN;
      if (st == 1)
        snprintf(note, sizeof note, "capped at %.0f s after %d run(s)", cap,
                 ne);
      else if (st == 2 && !note[0])
        snprintf(note, sizeof note, "child failed");
      printf("chain,%s,%g,%lld,%.3f,%.3f,%.3f,%d,%.10g,%lld,%s\n",
             cfg ? "ltr" : "cost", dens[di], (long long)galley_tensor_nnz(C),
             plan, comp, med, ne > 1 ? ne - 1 : ne, cs, enz, note);
      fflush(stdout);
      free(o);
    }
    galley_tensor_free(C);
  }
  galley_tensor_free(A);
  galley_tensor_free(B);
}

/* ---- subgraph queries ---- */

typedef struct Graph {
  int n, m;
  int *label;
  int *eu, *ev;
} Graph;

static int read_graph(const char *path, Graph *g) {
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  char line[256];
  int ne = 0;
  memset(g, 0, sizeof *g);
  while (fgets(line, sizeof line, f)) {
    if (line[0] == 't') {
      sscanf(line + 1, "%d %d", &g->n, &g->m);
      g->label = calloc((size_t)g->n + 1, sizeof(int));
      g->eu = calloc((size_t)g->m + 1, sizeof(int));
      g->ev = calloc((size_t)g->m + 1, sizeof(int));
    } else if (line[0] == 'v') {
      int id, lab;
      sscanf(line + 1, "%d %d", &id, &lab);
      if (id >= 0 && id < g->n)
        g->label[id] = lab;
    } else if (line[0] == 'e' && ne < g->m) {
      sscanf(line + 1, "%d %d", &g->eu[ne], &g->ev[ne]);
      ne++;
    }
  }
  fclose(f);
  g->m = ne;
  return 0;
}

typedef struct BQuery {
  char set[32], name[96];
  char *src;            /* the .tin program */
  int nlab, labs[16];   /* distinct labels used, input k+1 = L<labs[k]> */
  long long expected;   /* -1 unknown */
} QueryT;

/* A .tin program counting homomorphisms of q (labels when labeled). */
static char *query_tin(const Graph *q, int labeled, QueryT *Q) {
  size_t cap = 8192;
  char *s = malloc(cap);
  int len = 0;
  Q->nlab = 0;
  if (labeled)
    for (int v = 0; v < q->n; v++) {
      int k;
      for (k = 0; k < Q->nlab; k++)
        if (Q->labs[k] == q->label[v])
          break;
      if (k == Q->nlab && Q->nlab < 16)
        Q->labs[Q->nlab++] = q->label[v];
    }
  len += snprintf(s + len, cap - len, "input E[a, b]");
  for (int k = 0; k < Q->nlab; k++)
    len += snprintf(s + len, cap - len, ", L%d[a]", Q->labs[k]);
  len += snprintf(s + len, cap - len, "\ncount = sum(");
  for (int v = 0; v < q->n; v++)
    len += snprintf(s + len, cap - len, "%sv%d", v ? ", " : "", v);
  len += snprintf(s + len, cap - len, ": ");
  for (int e = 0; e < q->m; e++)
    len += snprintf(s + len, cap - len, "%sE[v%d, v%d]", e ? " * " : "",
                    q->eu[e], q->ev[e]);
  if (labeled)
    for (int v = 0; v < q->n; v++)
      len += snprintf(s + len, cap - len, " * L%d[v%d]", q->label[v], v);
  len += snprintf(s + len, cap - len, ")\n");
  return s;
}

typedef struct Data {
  galley_tensor *E;
  galley_tensor **L; /* per label value, or NULL */
  int maxlab;
} Data;

static galley_tensor *label_vec(const Graph *g, int lab) {
  int64_t *c = malloc(((size_t)g->n + 1) * sizeof *c);
  int64_t nnz = 0, dims[1] = {g->n};
  for (int v = 0; v < g->n; v++)
    if (g->label[v] == lab)
      c[nnz++] = v;
  galley_tensor *t = NULL;
  galley_error e;
  if (galley_tensor_from_coo(1, dims, nnz, c, NULL, 0.0, NULL, &t, &e))
    die("label vector", &e);
  free(c);
  return t;
}

/* The inputs of a query's program, in declaration order. */
static void query_inputs(const Data *D, const QueryT *Q,
                         const galley_tensor **in) {
  in[0] = D->E;
  for (int k = 0; k < Q->nlab; k++)
    in[k + 1] = Q->labs[k] <= D->maxlab ? D->L[Q->labs[k]] : NULL;
}

typedef struct RunJob {
  const Data *D;
  const QueryT *Q;
  galley_estimator est;
} RunJob;

static void run_child(void *ud, FILE *out) {
  RunJob *j = ud;
  const galley_tensor *in[17];
  query_inputs(j->D, j->Q, in);
  galley_error e;
  /* the logical plan, as the run will compute it */
  Program *prog = NULL;
  if (front_parse(j->Q->name, j->Q->src, strlen(j->Q->src), &prog, NULL, &e))
    die("front_parse", &e);
  OptOptions o = opt_defaults();
  o.estimator = j->est == GALLEY_ESTIMATOR_UNIFORM ? EST_UNIFORM : EST_CHAIN;
  LogicalPlan *lp = NULL;
  if (logical_optimize(prog, in, &o, &lp, &e))
    die("logical_optimize", &e);
  galley_program *p = NULL;
  if (galley_program_parse(j->Q->name, j->Q->src, strlen(j->Q->src), &p, NULL,
                           &e))
    die("parse", &e);
  galley_program_set_estimator(p, j->est);
  for (int k = 0; k < galley_program_num_inputs(p); k++)
    galley_program_bind(p, galley_program_input_name(p, k), in[k], &e);
  if (galley_program_run(p, &e)) {
    fprintf(out, "ERR %s\n", e.msg);
    return;
  }
  galley_run_info info;
  galley_program_run_info(p, &info);
  double cnt = galley_tensor_get(galley_program_output(p, 0), NULL, NULL);
  fprintf(out, "RUN %.0f %.6f %.6f %.6f\n", cnt, info.plan_seconds * 1e3,
          info.compile_seconds * 1e3, info.exec_seconds * 1e3);
  int nk = 0;
  for (int k = 0; k < info.nqueries; k++) {
    galley_query_info qi;
    galley_program_query_info(p, k, &qi, &e);
    nk += !qi.transpose;
  }
  if (nk == lp->nq) {
    int l = 0;
    for (int k = 0; k < info.nqueries; k++) {
      galley_query_info qi;
      galley_program_query_info(p, k, &qi, &e);
      if (qi.transpose)
        continue;
      const LogicalQuery *lq = &lp->q[l++];
      if (lq->user_query < 0) /* intermediates only */
        fprintf(out, "EST %s %.6g %lld\n", lq->name, lq->est_nnz,
                (long long)qi.nnz);
    }
  } else
    fprintf(out, "NOMAP %d %d\n", nk, lp->nq);
  logical_plan_free(lp);
  program_free(prog);
  galley_program_free(p);
}

/* -P FILE: the logical and physical plan of every query planned by
 * `subgraph` mode (chain, greedy) written to FILE, to check that a
 * change to the optimizer's speed leaves its plans alone. */
static FILE *plans_out = NULL;

static void print_plans(const char *name, const Program *prog,
                        const galley_tensor *const *in) {
  OptOptions o = opt_defaults();
  LogicalPlan *lp = NULL;
  PhysPlan *pp = NULL;
  galley_error e;
  if (logical_optimize(prog, in, &o, &lp, &e))
    die("logical_optimize", &e);
  if (physical_optimize(lp, in, &o, &pp, &e))
    die("physical_optimize", &e);
  fprintf(plans_out, "== %s\n", name);
  logical_print(lp, plans_out);
  phys_print(pp, plans_out);
  logical_plan_free(lp);
  phys_plan_free(pp);
}

/* One plan: both optimizers sharing `cache` (NULL: each its own). */
static double plan_once(const Program *prog, const galley_tensor *const *in,
                        StatsCache *cache, int *nq) {
  OptOptions o = opt_defaults();
  o.stats_cache = cache;
  LogicalPlan *lp = NULL;
  PhysPlan *pp = NULL;
  galley_error e;
  double t0 = cpu_s();
  if (logical_optimize(prog, in, &o, &lp, &e))
    die("logical_optimize", &e);
  if (physical_optimize(lp, in, &o, &pp, &e))
    die("physical_optimize", &e);
  double t = cpu_s() - t0;
  *nq = lp->nq;
  logical_plan_free(lp);
  phys_plan_free(pp);
  return t * 1e3;
}

/* kind 0: a new cache per plan; 1: one cache for all; 2: none; 3: a new
 * cache per plan, every input touched first (galley_tensor_touch drops
 * what it keeps: facts, degree statistics), as a first plan of new data. */
static double plan_once_kind(const Program *prog,
                             const galley_tensor *const *in, int kind,
                             StatsCache *kept, int *nq) {
  if (kind == 3 || kind == 4) {
    for (int k = 0; k < prog->ninputs; k++)
      if (in[k])
        galley_tensor_touch((galley_tensor *)in[k]); /* ours: see callers */
    /* 4: then their facts, untimed, as galley_program_bind makes them
     * (the re-run rule's nnz and the finiteness checks need them before
     * any plan): what a program's plan of new data costs */
    for (int k = 0; kind == 4 && k < prog->ninputs; k++) {
      galley_facts f;
      if (in[k])
        (void)galley_tensor_facts(in[k], &f, NULL);
    }
    kind = 0;
  }
  if (kind == 1)
    stats_cache_recheck(kept); /* as a program does before each plan */
  if (kind != 0)
    return plan_once(prog, in, kind == 1 ? kept : NULL, nq);
  Arena *a = arena_new();
  double t = plan_once(prog, in, a ? stats_cache_new(a) : NULL, nq);
  arena_free(a);
  return t;
}

/* Mean and max of repeated plans of one kind. */
static void plan_repeat(const Program *prog, const galley_tensor *const *in,
                        int kind, StatsCache *kept, double budget,
                        double *mean, double *max, int *nq) {
  double sum = 0, mx = 0, t0 = now_s();
  int n = 0;
  while (n < 3 || ((now_s() - t0) * 1e3 < budget && n < 10000)) {
    double t = plan_once_kind(prog, in, kind, kept, nq);
    sum += t;
    mx = t > mx ? t : mx;
    n++;
  }
  *mean = sum / n;
  *max = mx;
}

static double opt_time(const Program *prog, const galley_tensor *const *in,
                       EstimatorKind est, SearchKind search, int *nq) {
  OptOptions o = opt_defaults();
  o.estimator = est;
  o.search = search;
  double t0 = now_s(), t;
  int reps = 0;
  galley_error e;
  do {
    LogicalPlan *lp = NULL;
    PhysPlan *pp = NULL;
    if (logical_optimize(prog, in, &o, &lp, &e))
      die("logical_optimize", &e);
    if (physical_optimize(lp, in, &o, &pp, &e))
      die("physical_optimize", &e);
    *nq = lp->nq;
    logical_plan_free(lp);
    phys_plan_free(pp);
    reps++;
    t = now_s() - t0;
  } while (t < 0.02 && reps < 1000);
  return t / reps * 1e3;
}

static long long lookup_expected(const char *data_dir, const char *qname) {
  char path[4096];
  snprintf(path, sizeof path, "%s/derived_hom_counts.txt", data_dir);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  char line[512], name[256], pub[64], hom[64];
  long long r = -1;
  while (fgets(line, sizeof line, f))
    if (line[0] != '#' && sscanf(line, "%255s %63s %63s", name, pub, hom) == 3 &&
        !strcmp(name, qname)) {
      r = hom[0] == '-' ? -1 : atoll(hom);
      break;
    }
  fclose(f);
  return r;
}

static void bench_subgraph(const char *dir, int nplan, int nexec, double cap) {
  char path[4096];
  snprintf(path, sizeof path, "%s/yeast.graph", dir);
  Graph g;
  if (read_graph(path, &g))
    die(path, NULL);
  Data D = {0};
  {
    int64_t *c = malloc((size_t)g.m * 4 * sizeof *c), dims[2] = {g.n, g.n};
    for (int e = 0; e < g.m; e++) {
      c[4 * e] = g.eu[e], c[4 * e + 1] = g.ev[e];
      c[4 * e + 2] = g.ev[e], c[4 * e + 3] = g.eu[e];
    }
    /* a pattern: duplicates would sum, so drop self loops twice-counted */
    galley_error e;
    if (galley_tensor_from_coo(2, dims, 2 * (int64_t)g.m, c, NULL, 0.0, NULL,
                               &D.E, &e))
      die("adjacency", &e);
    free(c);
    D.maxlab = 0;
    for (int v = 0; v < g.n; v++)
      if (g.label[v] > D.maxlab)
        D.maxlab = g.label[v];
    D.L = calloc((size_t)D.maxlab + 1, sizeof *D.L);
    for (int l = 0; l <= D.maxlab; l++)
      D.L[l] = label_vec(&g, l);
    fprintf(stderr, "yeast: %d vertices, %d edges, adjacency nnz %lld\n", g.n,
            g.m, (long long)galley_tensor_nnz(D.E));
  }
  /* the workload */
  int nQ = 0, capQ = 2 + 3 * nplan;
  QueryT *Q = calloc((size_t)capQ, sizeof *Q);
  {
    Graph tri = {3, 3, (int[]){0, 0, 0}, (int[]){0, 1, 0}, (int[]){1, 2, 2}};
    Graph c4 = {4, 4, (int[]){0, 0, 0, 0}, (int[]){0, 1, 2, 3},
                (int[]){1, 2, 3, 0}};
    strcpy(Q[nQ].set, "triangle");
    strcpy(Q[nQ].name, "triangle");
    Q[nQ].src = query_tin(&tri, 0, &Q[nQ]);
    Q[nQ++].expected = -1;
    strcpy(Q[nQ].set, "4-cycle");
    strcpy(Q[nQ].name, "4-cycle");
    Q[nQ].src = query_tin(&c4, 0, &Q[nQ]);
    Q[nQ++].expected = -1;
  }
  static const char *sets[] = {"dense_4", "dense_8", "sparse_8"};
  for (int s = 0; s < 3; s++)
    for (int i = 1; i <= nplan; i++) {
      char qn[128];
      snprintf(qn, sizeof qn, "query_%s_%d.graph", sets[s], i);
      snprintf(path, sizeof path, "%s/query_graph/%s", dir, qn);
      Graph q;
      if (read_graph(path, &q))
        continue;
      strcpy(Q[nQ].set, sets[s]);
      strcpy(Q[nQ].name, qn);
      Q[nQ].src = query_tin(&q, 1, &Q[nQ]);
      Q[nQ].expected = lookup_expected(dir, qn);
      nQ++;
      free(q.label), free(q.eu), free(q.ev);
    }
  fprintf(stderr, "example program (%s):\n%s", Q[nQ - 1].name, Q[nQ - 1].src);
  /* hom counts of the unlabeled patterns, for the check: trace(A^3) and
   * trace(A^4) computed directly */
  {
    int n = g.n;
    int *deg = calloc((size_t)n, sizeof *deg);
    int **adj = calloc((size_t)n, sizeof *adj);
    for (int e = 0; e < g.m; e++)
      deg[g.eu[e]]++, deg[g.ev[e]]++;
    for (int v = 0; v < n; v++)
      adj[v] = malloc(((size_t)deg[v] + 1) * sizeof(int)), deg[v] = 0;
    for (int e = 0; e < g.m; e++) {
      adj[g.eu[e]][deg[g.eu[e]]++] = g.ev[e];
      adj[g.ev[e]][deg[g.ev[e]]++] = g.eu[e];
    }
    long long tr3 = 0, tr4 = 0;
    long long *w = calloc((size_t)n, sizeof *w);
    char *mark = calloc((size_t)n, 1);
    for (int v = 0; v < n; v++) {
      /* walks of length 2 from v: w[x] */
      for (int a = 0; a < deg[v]; a++)
        for (int b = 0; b < deg[adj[v][a]]; b++)
          w[adj[adj[v][a]][b]]++;
      for (int x = 0; x < n; x++) {
        tr4 += w[x] * w[x];
        w[x] = 0;
      }
      for (int a = 0; a < deg[v]; a++)
        mark[adj[v][a]] = 1;
      for (int a = 0; a < deg[v]; a++) {
        int u = adj[v][a];
        for (int b = 0; b < deg[u]; b++)
          tr3 += mark[adj[u][b]];
      }
      for (int a = 0; a < deg[v]; a++)
        mark[adj[v][a]] = 0;
    }
    Q[0].expected = tr3;
    Q[1].expected = tr4;
  }
  /* optimizer time */
  printf("# opt,set,query,estimator,search,logical_queries,mean_ms\n"
         "# plan,set,query,logical_queries,first_ms,cold_ms,warm_ms\n");
  for (int k = 0; k < nQ; k++) {
    const galley_tensor *in[17];
    query_inputs(&D, &Q[k], in);
    Program *prog = NULL;
    galley_error e;
    if (front_parse(Q[k].name, Q[k].src, strlen(Q[k].src), &prog, NULL, &e))
      die("front_parse", &e);
    if (plans_out) {
      print_plans(Q[k].name, prog, in);
      program_free(prog);
      continue;
    }
    static const struct {
      EstimatorKind est;
      SearchKind search;
      const char *en, *sn;
    } cf[] = {{EST_CHAIN, SEARCH_GREEDY, "chain", "greedy"},
              {EST_UNIFORM, SEARCH_GREEDY, "uniform", "greedy"},
              {EST_CHAIN, SEARCH_EXACT, "chain", "exact"}};
    for (int c = 0; c < 3; c++) {
      int nq = 0;
      double ms = opt_time(prog, in, cf[c].est, cf[c].search, &nq);
      printf("opt,%s,%s,%s,%s,%d,%.4f\n", Q[k].set, Q[k].name, cf[c].en,
             cf[c].sn, nq, ms);
    }
    /* the default (chain, greedy) as a program plans, in CPU time */
    int nq = 0;
    double first = plan_once_kind(prog, in, 0, NULL, &nq), cmean, cmax,
           wmean, wmax;
    plan_repeat(prog, in, 0, NULL, 20, &cmean, &cmax, &nq);
    Arena *a = arena_new();
    StatsCache *kept = stats_cache_new(a);
    plan_once(prog, in, kept, &nq);
    plan_repeat(prog, in, 1, kept, 20, &wmean, &wmax, &nq);
    arena_free(a);
    printf("plan,%s,%s,%d,%.4f,%.4f,%.4f\n", Q[k].set, Q[k].name, nq, first,
           cmean, wmean);
    program_free(prog);
  }
  fflush(stdout);
  if (plans_out) {
    fclose(plans_out);
    return;
  }
  /* execution + estimator quality */
  printf("# run,set,query,estimator,status,count,expected,plan_ms,compile_ms,"
         "exec_ms\n# est,set,query,estimator,logical_query,est_nnz,real_nnz,"
         "qerror\n");
  for (int k = 0; k < nQ; k++) {
    int idx_in_set = 0;
    for (int j = 0; j < k; j++)
      idx_in_set += !strcmp(Q[j].set, Q[k].set);
    if (idx_in_set >= nexec)
      continue;
    for (int es = 0; es < 2; es++) {
      RunJob j = {&D, &Q[k],
                  es ? GALLEY_ESTIMATOR_UNIFORM : GALLEY_ESTIMATOR_CHAIN};
      const char *en = es ? "uniform" : "chain";
      int st;
      char *o = run_capped(run_child, &j, cap, &st);
      double cnt = NAN, pl = NAN, co = NAN, ex = NAN;
      const char *status = st == 1 ? "capped" : st == 2 ? "failed" : "ok";
      for (char *line = strtok(o, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "RUN ", 4))
          sscanf(line + 4, "%lf %lf %lf %lf", &cnt, &pl, &co, &ex);
        else if (!strncmp(line, "ERR ", 4)) {
          status = "error";
          fprintf(stderr, "%s (%s): %s\n", Q[k].name, en, line + 4);
        } else if (!strncmp(line, "NOMAP", 5))
          fprintf(stderr, "%s (%s): plan not matched (%s)\n", Q[k].name, en,
                  line);
        else if (!strncmp(line, "EST ", 4) && st == 0) {
          char nm[64];
          double est;
          long long real;
          if (sscanf(line + 4, "%63s %lf %lld", nm, &est, &real) == 3) {
            double a = est < 1 ? 1 : est, b = real < 1 ? 1 : (double)real;
            printf("est,%s,%s,%s,%s,%.6g,%lld,%.6g\n", Q[k].set, Q[k].name, en,
                   nm, est, real, a > b ? a / b : b / a);
          }
        }
      }
      if (st == 0 && !isnan(cnt) && Q[k].expected >= 0 &&
          (long long)cnt != Q[k].expected)
        status = "WRONG";
      printf("run,%s,%s,%s,%s,%.0f,%lld,%.3f,%.3f,%.3f\n", Q[k].set, Q[k].name,
             en, status, cnt, Q[k].expected, pl, co, ex);
      fflush(stdout);
      free(o);
    }
  }
}

/* ---- optimizer time of .tin programs on files ---- */

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  *len = fread(s, 1, (size_t)n, f);
  s[*len] = 0;
  fclose(f);
  return s;
}

/* -K KIND: only repeated plans of one kind (0 cold, 1 warm, 3 fresh) for
 * BUDGET ms, their mean printed: what a profiler should see. */
static int only_kind = -1;

static void bench_tin_file(const char *path, const char *dir, double budget) {
  size_t len = 0;
  char *src = slurp(path, &len);
  if (!src)
    die(path, NULL);
  Program *prog = NULL;
  galley_error e;
  if (front_parse(path, src, len, &prog, NULL, &e))
    die("front_parse", &e);
  const galley_tensor *in[64] = {0};
  galley_tensor *own[64] = {0};
  for (int k = 0; k < prog->ninputs && k < 64; k++) {
    static const char *ext[] = {".tns", ".mtx", ".tns.gz", ".mtx.gz"};
    char file[4096];
    int found = 0;
    for (int x = 0; x < 4 && !found; x++) {
      snprintf(file, sizeof file, "%s/%s%s", dir, prog->inputs[k].name,
               ext[x]);
      found = access(file, R_OK) == 0;
    }
    if (!found)
      die(prog->inputs[k].name, NULL);
    if (galley_tensor_read(file, GALLEY_FILE_AUTO, NULL, &own[k], &e))
      die(file, &e);
    in[k] = own[k];
  }
  int nq = 0;
  if (only_kind >= 0) {
    Arena *ka = arena_new();
    StatsCache *kc = stats_cache_new(ka);
    double kmean, kmax;
    plan_repeat(prog, in, only_kind, kc, budget, &kmean, &kmax, &nq);
    printf("kind,%s,%d,%d,%.4f,%.4f\n", path, only_kind, nq, kmean, kmax);
    arena_free(ka);
    for (int k = 0; k < prog->ninputs && k < 64; k++)
      galley_tensor_free(own[k]);
    program_free(prog);
    free(src);
    return;
  }
  double first = plan_once_kind(prog, in, 0, NULL, &nq);
  double cmean, cmax, wmean, wmax, nmean, nmax;
  plan_repeat(prog, in, 0, NULL, budget, &cmean, &cmax, &nq);
  Arena *a = arena_new();
  StatsCache *kept = stats_cache_new(a);
  plan_once(prog, in, kept, &nq); /* fill it */
  plan_repeat(prog, in, 1, kept, budget, &wmean, &wmax, &nq);
  arena_free(a);
  plan_repeat(prog, in, 2, NULL, budget, &nmean, &nmax, &nq);
  double fmean, fmax, bmean, bmax;
  plan_repeat(prog, in, 3, NULL, budget, &fmean, &fmax, &nq);
  plan_repeat(prog, in, 4, NULL, budget, &bmean, &bmax, &nq);
  double facts_ms = 0;
  for (int k = 0; k < prog->ninputs; k++) {
    double best = INFINITY;
    for (int r = 0; r < 3; r++) {
      galley_tensor_touch(own[k]);
      galley_facts f;
      double s0 = cpu_s();
      (void)galley_tensor_facts(in[k], &f, NULL);
      double ms = (cpu_s() - s0) * 1e3;
      best = ms < best ? ms : best;
    }
    facts_ms += best;
  }
  double stats_ms = 0, exact_ms = 0;
  galley_degree_stats *ds = malloc(sizeof *ds);
  rt_degree_info *info = malloc(sizeof *info);
  for (int k = 0; k < prog->ninputs; k++) {
    double best = INFINITY;
    for (int r = 0; r < 3; r++) {
      double s0 = cpu_s();
      if (rt_degree_stats(in[k], STATS_SAMPLE, ds, info, &e))
        die("degree stats", &e);
      double ms = (cpu_s() - s0) * 1e3;
      best = ms < best ? ms : best;
    }
    double s0 = cpu_s();
    if (galley_tensor_degree_stats(in[k], ds, &e))
      die("degree stats", &e);
    double ems = (cpu_s() - s0) * 1e3;
    stats_ms += best;
    exact_ms += ems;
    fprintf(stderr,
            "  %s: order %d, nnz %lld, degree stats %.3f ms (sample %lld), "
            "exact %.3f ms\n",
            prog->inputs[k].name, ds->order, (long long)ds->nnz, best,
            (long long)info->sampled, ems);
  }
  free(ds);
  free(info);
  printf("tin,%s,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,"
         "%.4f,%.4f\n",
         path, nq, first, cmean, cmax, wmean, wmax, nmean, stats_ms, exact_ms,
         fmean, fmax, bmean, bmax, facts_ms);
  fflush(stdout);
  for (int k = 0; k < prog->ninputs && k < 64; k++)
    galley_tensor_free(own[k]);
  program_free(prog);
  free(src);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_opt chain [-r REPS] [-c CAP_S] [-d DIR]\n"
                    "       bench_opt subgraph [-n NEXEC] [-p NPLAN] [-c CAP_S] "
                    "DATA_DIR\n"
                    "       bench_opt tin [-t MS] [-D DIR] PROG.tin ...\n");
    return 2;
  }
  const char *mode = argv[1];
  int reps = 5, nexec = 10, nplan = 200;
  double cap = !strcmp(mode, "chain") ? 60 : 10;
  const char *dir = NULL, *data = ".";
  double budget = 200;
  int c;
  optind = 2;
  while ((c = getopt(argc, argv, "r:c:d:n:p:t:D:K:P:")) != -1)
    switch (c) {
    case 't': budget = atof(optarg); break;
    case 'D': data = optarg; break;
    case 'K': only_kind = atoi(optarg); break;
    case 'P':
      plans_out = fopen(optarg, "w");
      if (!plans_out)
        die(optarg, NULL);
      break;
    case 'r': reps = atoi(optarg) + 1; break; /* + the cold run */
    case 'c': cap = atof(optarg); break;
    case 'd': dir = optarg; break;
    case 'n': nexec = atoi(optarg); break;
    case 'p': nplan = atoi(optarg); break;
    default: return 2;
    }
  if (!strcmp(mode, "chain"))
    bench_chain(reps < 2 ? 2 : reps, cap, dir);
  else if (!strcmp(mode, "subgraph") && optind < argc)
    bench_subgraph(argv[optind], nplan, nexec, cap);
  else if (!strcmp(mode, "tin") && optind < argc) {
    printf("# tin,program,logical_queries,first_ms,cold_mean_ms,cold_max_ms,"
           "warm_mean_ms,warm_max_ms,nocache_ms,stats_ms,exact_ms,"
           "fresh_mean_ms,fresh_max_ms,bound_mean_ms,bound_max_ms,"
           "facts_ms\n");
    for (int k = optind; k < argc; k++)
      bench_tin_file(argv[k], data, budget);
  }
  else {
    fprintf(stderr, "bench_opt: unknown mode\n");
    return 2;
  }
  return 0;
}
