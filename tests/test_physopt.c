/*
 * test_physopt.c -- the physical optimizer: its decisions on small real
 * data (loop orders and leaders, output formats against the estimates and
 * the memory budget, intermediates written in their consumer's order,
 * CSE, determinism) and differential runs of logical_lift +
 * physical_optimize + codegen + tcc + exec against the reference
 * evaluator on random programs (the generator is test_diff.c's).
 */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "ir.h"
#include "logical.h"
#include "phys.h"
#include "testutil.h"

/* The program generator and the comparison of entries. */
#include "randprog.h"

/* ------------------------------------------------------------------ */
/* Running plans                                                       */
/* ------------------------------------------------------------------ */

static long env_long(const char *name, long dflt);

static OptOptions test_options(void) {
  OptOptions o = {EST_CHAIN, SEARCH_GREEDY, 1.0, 0.5, 60.0, 1e9, NULL};
  return o;
}

static Program *parse(const char *text) {
  Program *p = NULL;
  char *diag = NULL;
  galley_error err;
  galley_status st = front_parse("t.tin", text, strlen(text), &p, &diag, &err);
  ck_assert_msg(st == GALLEY_OK, "parse failed: %s\n%s", diag ? diag : err.msg,
                text);
  free(diag);
  return p;
}

/* The optimized plan of p (lifted, then physical_optimize), or NULL with
 * err set. */
static PhysPlan *optimize_with(const Program *p, galley_tensor *const *in,
                               const OptOptions *o, int full,
                               galley_error *err) {
  LogicalPlan *lp = NULL;
  PhysPlan *pp = NULL;
  const galley_tensor *const *cin = (const galley_tensor *const *)in;
  galley_status st = full ? logical_optimize(p, cin, o, &lp, err)
                          : logical_lift(p, cin, &lp, err);
  if (st != GALLEY_OK)
    return NULL;
  physical_optimize(lp, cin, o, &pp, err);
  logical_plan_free(lp);
  return pp;
}

static PhysPlan *optimize(const Program *p, galley_tensor *const *in,
                          const OptOptions *o, galley_error *err) {
  return optimize_with(p, in, o, 0, err);
}

static char *plan_text(const PhysPlan *pp) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  phys_print(pp, f);
  fclose(f);
  return text;
}

/* Compile and run pp; results[k] for its outputs. */
static galley_status run_plan(const PhysPlan *pp, galley_tensor *const *in,
                              galley_tensor **results, galley_error *err) {
  char *src = NULL;
  size_t len = 0;
  galley_status st = cg_plan(pp, &src, &len, err);
  if (st != GALLEY_OK) {
    free(src);
    return st;
  }
  char (*names)[32] = calloc((size_t)pp->nq + 1, sizeof *names);
  const char **syms = calloc((size_t)pp->nq + 1, sizeof *syms);
  void **got = calloc((size_t)pp->nq + 1, sizeof *got);
  void **fns = calloc((size_t)pp->nq + 1, sizeof *fns);
  int nsym = 0;
  for (int n = 0; n < pp->nq; n++)
    if (pp->q[n].kind == PQ_KERNEL) {
      cg_kernel_name(n, names[n], sizeof names[n]);
      syms[nsym++] = names[n];
    }
  JitOptions jo = {JIT_TCC, NULL};
  JitModule *m = NULL;
  st = jit_compile(&jo, src, syms, nsym, got, &m, err);
  if (st == GALLEY_OK) {
    for (int n = 0, s = 0; n < pp->nq; n++)
      if (pp->q[n].kind == PQ_KERNEL)
        fns[n] = got[s++];
    st = exec_plan(pp, (const galley_tensor *const *)in, fns, results, err);
  }
  jit_free(m);
  free(src);
  free(names);
  free(syms);
  free(got);
  free(fns);
  return st;
}

static int same_tensor(const galley_tensor *a, const galley_tensor *b) {
  int order = galley_tensor_order(a);
  if (order != galley_tensor_order(b))
    return 0;
  int64_t n = 1;
  for (int m = 0; m < order; m++) {
    if (galley_tensor_dim(a, m) != galley_tensor_dim(b, m))
      return 0;
    n *= galley_tensor_dim(a, m);
  }
  double *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)n + 1, sizeof *y);
  galley_error err;
  int ok = galley_tensor_to_dense(a, x, n, &err) == GALLEY_OK &&
           galley_tensor_to_dense(b, y, n, &err) == GALLEY_OK;
  for (int64_t e = 0; ok && e < n; e++) {
    ok = same_value(x[e], y[e]);
    if (!ok && env_long("GALLEY_PHYSOPT_VERBOSE", 0))
      fprintf(stderr, "entry %lld: want %.17g got %.17g\n", (long long)e,
              x[e], y[e]);
  }
  free(x);
  free(y);
  return ok;
}

static int query_number(const Program *p, const char *name) {
  for (int q = 0; q < p->nqueries; q++)
    if (strcmp(p->queries[q].name, name) == 0)
      return q;
  return -1;
}

/* 1: pp's results equal the reference's; 0 with *why otherwise. */
static int matches_reference(const Program *p, const PhysPlan *pp,
                             galley_tensor *const *in, char **why) {
  galley_tensor *ref[16] = {0}, *got[16] = {0};
  galley_error err;
  *why = NULL;
  ck_assert_int_le(p->nqueries, 16);
  if (refeval_run(p, (const galley_tensor *const *)in, ref, &err) != GALLEY_OK) {
    *why = fmt("reference: %s", err.msg);
    return 1; /* nothing to compare against */
  }
  int ok = 1;
  if (run_plan(pp, in, got, &err) != GALLEY_OK) {
    *why = fmt("run: %s", err.msg);
    ok = 0;
  }
  for (int k = 0; ok && k < pp->noutputs; k++) {
    int q = query_number(p, pp->output_names[k]);
    if (q < 0 || !same_tensor(ref[q], got[k])) {
      *why = fmt("output %s differs", pp->output_names[k]);
      ok = 0;
    }
  }
  for (int k = 0; k < 16; k++) {
    galley_tensor_free(ref[k]);
    galley_tensor_free(got[k]);
  }
  return ok;
}

/* ------------------------------------------------------------------ */
/* Small real tensors                                                  */
/* ------------------------------------------------------------------ */

/* An n x m matrix holding (i*m+j) % mod == 0 entries (value 1 + i - j),
 * in the format given as text (NULL: default). */
static galley_tensor *mat(int64_t n, int64_t m, int mod, const char *fmt_) {
  int64_t *coords = malloc((size_t)(n * m * 2 + 1) * sizeof *coords);
  double *vals = malloc((size_t)(n * m + 1) * sizeof *vals);
  int64_t nnz = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++)
      if ((i * m + j) % mod == 0) {
        coords[2 * nnz] = i;
        coords[2 * nnz + 1] = j;
        vals[nnz++] = (double)(1 + i - j);
      }
  galley_format f;
  galley_error err;
  if (fmt_)
    ck_assert_int_eq(galley_format_parse(fmt_, 2, &f, &err), GALLEY_OK);
  galley_tensor *t = NULL;
  int64_t dims[2] = {n, m};
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, nnz, coords, vals, 0,
                                          fmt_ ? &f : NULL, &t, &err),
                   GALLEY_OK);
  free(coords);
  free(vals);
  return t;
}

static galley_tensor *vec(int64_t n, int mod, const char *fmt_) {
  int64_t *coords = malloc((size_t)(n + 1) * sizeof *coords);
  double *vals = malloc((size_t)(n + 1) * sizeof *vals);
  int64_t nnz = 0;
  for (int64_t i = 0; i < n; i++)
    if (i % mod == 0) {
      coords[nnz] = i;
      vals[nnz++] = (double)(i + 1);
    }
  galley_format f;
  galley_error err;
  if (fmt_)
    ck_assert_int_eq(galley_format_parse(fmt_, 1, &f, &err), GALLEY_OK);
  galley_tensor *t = NULL;
  ck_assert_int_eq(galley_tensor_from_coo(1, &n, nnz, coords, vals, 0,
                                          fmt_ ? &f : NULL, &t, &err),
                   GALLEY_OK);
  free(coords);
  free(vals);
  return t;
}

/* Plan p on in[] with o, check it against the reference, return it. */
static PhysPlan *plan_checked(const Program *p, galley_tensor *const *in,
                              const OptOptions *o) {
  galley_error err;
  PhysPlan *pp = optimize(p, in, o, &err);
  ck_assert_msg(pp != NULL, "optimize: %s", err.msg);
  char *why = NULL;
  int ok = matches_reference(p, pp, in, &why);
  char *text = plan_text(pp);
  ck_assert_msg(ok, "%s\n%s", why ? why : "", text);
  free(text);
  free(why);
  return pp;
}

static const PhysQuery *query_named(const PhysPlan *pp, const char *name) {
  for (int n = 0; n < pp->nq; n++)
    if (strcmp(pp->q[n].name, name) == 0)
      return &pp->q[n];
  ck_abort_msg("no query %s", name);
  return NULL;
}

static int count_kind(const PhysPlan *pp, PQueryKind kind) {
  int c = 0;
  for (int n = 0; n < pp->nq; n++)
    c += pp->q[n].kind == kind;
  return c;
}

/* ------------------------------------------------------------------ */
/* Decisions                                                           */
/* ------------------------------------------------------------------ */

/* SpMV with A in CSR: i then j, A leads j (x is a sparse vector with more
 * entries per fiber than A's rows), no transpose. */
START_TEST(spmv_loops_and_lead) {
  Program *p = parse("input A[i, j]\ninput x[j]\ny[i] = sum(j: A[i, j] * x[j])\n");
  galley_tensor *in[2] = {mat(40, 40, 13, "dense,list"), vec(40, 1, "list")};
  OptOptions o = test_options();
  PhysPlan *pp = plan_checked(p, in, &o);
  const PhysQuery *y = query_named(pp, "y");
  ck_assert_int_eq(count_kind(pp, PQ_TRANSPOSE), 0);
  ck_assert_int_eq(y->nloops, 2);
  ck_assert_int_eq(y->merge[1], MERGE_LEAD);
  /* access 0 is A: it iterates j, x looks up */
  ck_assert_int_eq(y->acc[0].proto[1], PROTO_ITERATE);
  ck_assert_int_eq(y->acc[1].proto[0], PROTO_LOOKUP);
  phys_plan_free(pp);
  /* x much sparser than A's rows: x leads */
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
  in[0] = mat(40, 40, 1, "dense,list");
  in[1] = vec(40, 20, "list");
  pp = plan_checked(p, in, &o);
  y = query_named(pp, "y");
  ck_assert_int_eq(y->acc[1].proto[0], PROTO_ITERATE);
  ck_assert_int_eq(y->acc[0].proto[1], PROTO_LOOKUP);
  phys_plan_free(pp);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
  program_free(p);
}
END_TEST

/* A stored column-major (CSC): the optimizer loops j outside i when the
 * output order allows it rather than transposing A. */
START_TEST(avoid_transpose) {
  Program *p = parse("input A[i, j]\ninput B[i, j]\nC[i, j] = A[i, j] * B[i, j]\n");
  galley_tensor *in[2] = {mat(30, 30, 7, "dense:1,list:0"),
                          mat(30, 30, 3, "dense:1,list:0")};
  OptOptions o = test_options();
  PhysPlan *pp = plan_checked(p, in, &o);
  ck_assert_int_eq(count_kind(pp, PQ_TRANSPOSE), 0);
  const PhysQuery *c = query_named(pp, "C");
  ck_assert_int_eq(c->out[1], 0); /* j is the outer loop */
  phys_plan_free(pp);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
  program_free(p);
}
END_TEST

/* A sorted list with every fiber full (a vector read from .tns, a
 * matrix with every entry stored) is laid out as a dense level: the
 * kernels look it up in O(1).  One entry missing: a list again. */
START_TEST(full_lists_read_as_dense) {
  Program *p = parse("input A[i, j], x[j]\ny[i] = sum(j: A[i, j] * x[j])\n");
  OptOptions o = test_options();
  for (int full = 0; full < 2; full++) {
    galley_tensor *in[2] = {mat(30, 40, full ? 1 : 3, "dense,list"),
                            vec(40, full ? 1 : 2, "list")};
    PhysPlan *pp = plan_checked(p, in, &o);
    const PhysQuery *y = query_named(pp, "y");
    for (int a = 0; a < y->nacc; a++)
      for (int l = 0; l < y->acc[a].order; l++)
        if (y->acc[a].is_input && (l > 0 || y->acc[a].tensor == 1))
          ck_assert_int_eq(y->acc[a].kind[l],
                           full ? GALLEY_DENSE : GALLEY_LIST);
    phys_plan_free(pp);
    galley_tensor_free(in[0]);
    galley_tensor_free(in[1]);
  }
  program_free(p);
}
END_TEST

static const char *SPGEMM =
    "input A[i, j]\ninput B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n";

static int is_interleaved(const PhysQuery *q);

/* Sparse SpGEMM: Gustavson's loop order (i, j, k); k is written out of
 * order, through a random-write bytemap workspace per row of C, then
 * appended in order to a sorted-list level; dense inputs: dense. */
START_TEST(spgemm_formats) {
  Program *p = parse(SPGEMM);
  OptOptions o = test_options();
  galley_tensor *in[2] = {mat(60, 60, 97, NULL), mat(60, 60, 89, NULL)};
  PhysPlan *pp = plan_checked(p, in, &o);
  const PhysQuery *c = query_named(pp, "C");
  ck_assert(is_interleaved(c));
  ck_assert_int_eq(phys_workspace_kind(c), GALLEY_BYTEMAP);
  ck_assert_int_eq(c->out_format.kinds[1], GALLEY_LIST);
  phys_plan_free(pp);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
  in[0] = mat(20, 20, 1, NULL);
  in[1] = mat(20, 20, 1, NULL);
  pp = plan_checked(p, in, &o);
  c = query_named(pp, "C");
  ck_assert_int_eq(c->out_format.kinds[0], GALLEY_DENSE);
  ck_assert_int_eq(c->out_format.kinds[1], GALLEY_DENSE);
  phys_plan_free(pp);
  /* the same dense result over a small memory budget: not dense */
  o.memory_budget = 1000;
  pp = plan_checked(p, in, &o);
  c = query_named(pp, "C");
  ck_assert_int_ne(c->out_format.kinds[1], GALLEY_DENSE);
  ck_assert(c->out_format.kinds[0] != GALLEY_DENSE ||
            c->out_format.kinds[1] != GALLEY_DENSE);
  phys_plan_free(pp);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
  program_free(p);
}
END_TEST

/* A tridiagonal n x n matrix plus one full row and one full column:
 * the chain bound of A*A is the whole n x n (the full row's degree times
 * the entries), the uniform estimate and the truth (about 9n) small. */
static galley_tensor *band_with_cross(int64_t n) {
  int64_t *coords = malloc((size_t)(10 * n) * sizeof *coords);
  double *vals = malloc((size_t)(5 * n) * sizeof *vals);
  int64_t nnz = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      if ((j >= i - 1 && j <= i + 1) || i == n / 2 || j == n / 2) {
        coords[2 * nnz] = i;
        coords[2 * nnz + 1] = j;
        vals[nnz++] = 1;
      }
  galley_tensor *t = NULL;
  int64_t dims[2] = {n, n};
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, nnz, coords, vals, 0, NULL,
                                          &t, NULL),
                   GALLEY_OK);
  free(coords);
  free(vals);
  return t;
}

/* A product that grows keeps its per-level estimates: a loose bound of
 * the whole result (here all n x n) must not make its rows dense. */
START_TEST(growing_product_not_dense) {
  Program *p = parse(SPGEMM);
  OptOptions o = test_options();
  galley_tensor *in[2] = {band_with_cross(2000), band_with_cross(2000)};
  PhysPlan *pp = plan_checked(p, in, &o);
  const PhysQuery *c = query_named(pp, "C");
  ck_assert_int_ne(c->out_format.kinds[1], GALLEY_DENSE);
  phys_plan_free(pp);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
  program_free(p);
}
END_TEST

/* The nested aggregate T[j,i] = sum(k: B[j,k] * C[k,i]) is read as
 * T[j, i] by a consumer looping i then j: it is written i-major (mode
 * order 1, 0) and not transposed. */
START_TEST(intermediate_in_consumer_order) {
  Program *p = parse("input A[i, j]\ninput B[j, k]\ninput C[k, i]\n"
                     "y[i] = sum(j: A[i, j] * sum(k: B[j, k] * C[k, i]))\n");
  galley_tensor *in[3] = {mat(12, 12, 3, NULL), mat(12, 12, 2, NULL),
                          mat(12, 12, 5, NULL)};
  OptOptions o = test_options();
  PhysPlan *pp = plan_checked(p, in, &o);
  const PhysQuery *y = query_named(pp, "y");
  int alias = -1;
  for (int k = 0; k < y->nacc; k++)
    if (!y->acc[k].is_input)
      alias = k;
  ck_assert_int_ge(alias, 0);
  const PhysQuery *t = &pp->q[y->acc[alias].tensor];
  ck_assert_int_eq(t->kind, PQ_KERNEL); /* not a transpose of it */
  for (int n = 0; n < pp->nq; n++)
    if (pp->q[n].kind == PQ_TRANSPOSE)
      ck_assert(pp->q[n].acc[0].is_input);
  phys_plan_free(pp);
  for (int k = 0; k < 3; k++)
    galley_tensor_free(in[k]);
  program_free(p);
}
END_TEST

/* C = A*B; D = A*B: one kernel computes both. */
START_TEST(cse_queries) {
  Program *p = parse("input A[i, j]\ninput B[j, k]\n"
                     "C[i, k] = sum(j: A[i, j] * B[j, k])\n"
                     "D[i, k] = sum(j: A[i, j] * B[j, k])\n");
  galley_tensor *in[2] = {mat(10, 10, 3, NULL), mat(10, 10, 2, NULL)};
  OptOptions o = test_options();
  PhysPlan *pp = plan_checked(p, in, &o);
  ck_assert_int_eq(count_kind(pp, PQ_KERNEL), 1);
  ck_assert_int_eq(pp->noutputs, 2);
  ck_assert_int_eq(pp->outputs[0], pp->outputs[1]);
  phys_plan_free(pp);
  program_free(p);
  /* the same aggregate used twice inside one query */
  p = parse("input A[i, j]\ninput x[j]\n"
            "y[i] = sum(j: A[i, j] * x[j]) + sum(j: A[i, j] * x[j])\n");
  galley_tensor_free(in[1]);
  in[1] = vec(10, 2, NULL);
  pp = plan_checked(p, in, &o);
  ck_assert_int_eq(count_kind(pp, PQ_KERNEL), 2);
  phys_plan_free(pp);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
  program_free(p);
}
END_TEST

/* The same program and data give the same plan. */
START_TEST(deterministic) {
  Program *p = parse("input A[i, j]\ninput B[j, k]\ninput C[k, l]\n"
                     "D[i, l] = sum(j, k: A[i, j] * B[j, k] * C[k, l])\n");
  galley_tensor *in[3] = {mat(15, 15, 4, "dense:1,list:0"),
                          mat(15, 15, 3, NULL), mat(15, 15, 7, NULL)};
  OptOptions o = test_options();
  galley_error err;
  char *first = NULL;
  for (int run = 0; run < 5; run++) {
    PhysPlan *pp = optimize(p, in, &o, &err);
    ck_assert_ptr_nonnull(pp);
    char *text = plan_text(pp);
    if (!first)
      first = text;
    else {
      ck_assert_str_eq(first, text);
      free(text);
    }
    phys_plan_free(pp);
  }
  free(first);
  for (int k = 0; k < 3; k++)
    galley_tensor_free(in[k]);
  program_free(p);
}
END_TEST

/* logical_lift + logical_print on a nested aggregate. */
START_TEST(lift_and_print) {
  Program *p = parse("input A[i, j]\ninput x[j]\n"
                     "y[i] = max(j: A[i, j] * sum(k: A[j, k] * x[k]))\n");
  galley_tensor *in[2] = {mat(6, 6, 2, NULL), vec(6, 2, NULL)};
  LogicalPlan *lp = NULL;
  galley_error err;
  ck_assert_int_eq(logical_lift(p, (const galley_tensor *const *)in, &lp, &err),
                   GALLEY_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  logical_print(lp, f);
  fclose(f);
  ck_assert_str_eq(text,
                   "Query(_l0[j], Agg(+, k, Map(*, A[j,k], x[k])))  est 0  cost 0\n"
                   "Query(y[i], Agg(max, j, Map(*, A[i,j], _l0[j])))  est 0  cost 0\n"
                   "Outputs(y)\n");
  free(text);
  logical_plan_free(lp);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
  program_free(p);
}
END_TEST


/* ------------------------------------------------------------------ */
/* In-place reductions: reduced loops before output loops              */
/* ------------------------------------------------------------------ */

/* A random n x m matrix of density d with fill `fill` (values small
 * integers, so sums are exact), rows r with r % empty == empty - 1 left
 * empty, in the format given as text (NULL: default). */
static galley_tensor *rand_mat(test_rng *r, int64_t n, int64_t m, double d,
                               double fill, int empty, const char *fmt_) {
  int64_t *coords = malloc((size_t)(n * m * 2 + 1) * sizeof *coords);
  double *vals = malloc((size_t)(n * m + 1) * sizeof *vals);
  int64_t nnz = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++)
      if (i % empty != empty - 1 && test_rng_double(r, 0, 1) < d) {
        coords[2 * nnz] = i;
        coords[2 * nnz + 1] = j;
        vals[nnz++] = (double)(1 + test_rng_below(r, 9)) *
                      (test_rng_below(r, 4) == 0 ? -1 : 1);
      }
  galley_format f;
  galley_error err;
  if (fmt_)
    ck_assert_int_eq(galley_format_parse(fmt_, 2, &f, &err), GALLEY_OK);
  galley_tensor *t = NULL;
  int64_t dims[2] = {n, m};
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, nnz, coords, vals, fill,
                                          fmt_ ? &f : NULL, &t, &err),
                   GALLEY_OK);
  free(coords);
  free(vals);
  return t;
}

/* Whether some reduced loop of q comes before some output loop. */
static int is_interleaved(const PhysQuery *q) {
  for (int d = 0; d < q->nout && d < q->nloops; d++)
    for (int k = 0; k < q->nred; k++)
      if (q->red[k] == q->loops[d])
        return 1;
  return 0;
}

static const char *MINPLUS =
    "input A[i, j] fill inf\ninput B[j, k] fill inf\n"
    "C[i, k] = min(j: A[i, j] + B[j, k])\n";

/* Gustavson's SpGEMM (i, j, k; A leads j, B leads k; each row of C
 * scatters into its dense row) and the min-plus product (fill +inf = the
 * identity of min; an absent A or B gives inf + x = inf), on random data
 * with empty rows in several formats, against the reference evaluator;
 * a dense result is accumulated in place, any other through the scatter
 * workspace into a random-write level. */
START_TEST(inplace_gustavson) {
  static const char *const fmts[] = {NULL, "dense,list", "list,list",
                                     "dense,bytemap", "dense,hash"};
  const char *progs[2] = {SPGEMM, MINPLUS};
  OptOptions o = test_options();
  int seen = 0;
  for (int pi = 0; pi < 2; pi++) {
    Program *p = parse(progs[pi]);
    double fill = pi ? INFINITY : 0;
    for (int seed = 0; seed < 10; seed++) {
      test_rng r = test_rng_seed(1000 + (uint64_t)seed);
      int64_t n = 10 + test_rng_below(&r, 40), m = 5 + test_rng_below(&r, 40),
              l = 10 + test_rng_below(&r, 40);
      double d = test_rng_double(&r, 0.1, 0.4);
      galley_tensor *in[2] = {
          rand_mat(&r, n, m, d, fill, 3 + seed % 4, fmts[seed % 5]),
          rand_mat(&r, m, l, d, fill, 4 + seed % 3, fmts[(seed + 2) % 5])};
      PhysPlan *pp = plan_checked(p, in, &o);
      const PhysQuery *c = query_named(pp, "C");
      if (is_interleaved(c)) {
        seen++;
        ck_assert_ptr_null(phys_inplace_problem(c));
        /* k is written out of order: in place into a dense result, or
         * through a random-write workspace */
        ck_assert(phys_workspace_kind(c) >= 0 ||
                  (c->out_format.kinds[0] == GALLEY_DENSE &&
                   c->out_format.kinds[1] == GALLEY_DENSE));
      }
      phys_plan_free(pp);
      galley_tensor_free(in[0]);
      galley_tensor_free(in[1]);
    }
    program_free(p);
  }
  ck_assert_int_ge(seen, 10); /* most cases take i, j, k */
  /* the decision itself: CSR inputs, dense result: i, j, k */
  Program *p = parse(SPGEMM);
  test_rng r = test_rng_seed(7);
  galley_tensor *in[2] = {rand_mat(&r, 40, 40, 0.3, 0, 5, "dense,list"),
                          rand_mat(&r, 40, 40, 0.3, 0, 6, "dense,list")};
  PhysPlan *pp = plan_checked(p, in, &o);
  const PhysQuery *c = query_named(pp, "C");
  ck_assert_int_eq(count_kind(pp, PQ_TRANSPOSE), 0);
  ck_assert_int_eq(c->nloops, 3);
  ck_assert_int_eq(c->loops[1], c->red[0]);      /* j in the middle */
  ck_assert_int_eq(c->acc[0].proto[1], PROTO_ITERATE); /* A leads j */
  ck_assert_int_eq(c->acc[1].proto[1], PROTO_ITERATE); /* B leads k */
  ck_assert_int_eq(c->merge[1], MERGE_LEAD);
  ck_assert_int_eq(c->merge[2], MERGE_LEAD);
  phys_plan_free(pp);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
  program_free(p);
}
END_TEST

/* cg_plan's verdict on pp. */
static galley_status codegen_status(const PhysPlan *pp, galley_error *err) {
  char *src = NULL;
  size_t len = 0;
  galley_status st = cg_plan(pp, &src, &len, err);
  free(src);
  return st;
}

/* Where accumulating in place would be wrong: a fill that is not the
 * aggregate's initial value (fill 1: an untouched C[i,k] is sum over j of
 * 1 * 1 = m, not 1) makes the optimizer keep the outputs-first order, and
 * the code generator refuses an interleaved plan whose result fill,
 * format or skipped points break the rule. */
/* A Gustavson plan writes its scattered points through the workspace, so
 * the result may be stored in any level kinds and mode order: every
 * combination equals the reference. */
START_TEST(scatter_into_any_format) {
  OptOptions o = test_options();
  Program *p = parse(SPGEMM);
  test_rng r = test_rng_seed(77);
  galley_tensor *in[2] = {rand_mat(&r, 60, 50, 0.08, 0, 5, "dense,list"),
                          rand_mat(&r, 50, 70, 0.08, 0, 6, "dense,list")};
  galley_error err;
  int tried = 0;
  for (int k0 = 0; k0 < GALLEY_NUM_LEVEL_KINDS; k0++)
    for (int k1 = 0; k1 < GALLEY_NUM_LEVEL_KINDS; k1++)
      for (int swap = 0; swap < 2; swap++) {
        PhysPlan *pp = optimize(p, in, &o, &err);
        ck_assert_ptr_nonnull(pp);
        PhysQuery *c = &pp->q[pp->outputs[0]];
        if (!is_interleaved(c) ||
            (k0 == GALLEY_BYTEMAP && k1 == GALLEY_BYTEMAP)) {
          phys_plan_free(pp);
          continue;
        }
        c->out_format.kinds[0] = (galley_level_kind)k0;
        c->out_format.kinds[1] = (galley_level_kind)k1;
        if (swap) { /* k-major storage: the sink sorts the points */
          int m = c->out_format.mode_order[0];
          c->out_format.mode_order[0] = c->out_format.mode_order[1];
          c->out_format.mode_order[1] = m;
        }
        phys_choose_output(c); /* the strategy follows the format */
        char *why = NULL;
        int all_dense = k0 == GALLEY_DENSE && k1 == GALLEY_DENSE;
        ck_assert(all_dense || phys_workspace_kind(c) == GALLEY_BYTEMAP);
        ck_assert_msg(matches_reference(p, pp, in, &why), "kinds %d,%d swap %d: %s",
                      k0, k1, swap, why ? why : "");
        free(why);
        tried++;
        phys_plan_free(pp);
      }
  ck_assert_int_ge(tried, 28);
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
  program_free(p);
}
END_TEST

START_TEST(inplace_rejected) {
  OptOptions o = test_options();
  Program *p = parse("input A[i, j] fill 1\ninput B[j, k] fill 1\n"
                     "C[i, k] = sum(j: A[i, j] * B[j, k])\n");
  for (int seed = 0; seed < 6; seed++) {
    test_rng r = test_rng_seed(50 + (uint64_t)seed);
    galley_tensor *in[2] = {rand_mat(&r, 30, 20, 0.3, 1, 4, "dense,list"),
                            rand_mat(&r, 20, 30, 0.3, 1, 5, "dense,list")};
    PhysPlan *pp = plan_checked(p, in, &o);
    ck_assert(!is_interleaved(query_named(pp, "C")));
    phys_plan_free(pp);
    galley_tensor_free(in[0]);
    galley_tensor_free(in[1]);
  }
  program_free(p);
  /* an interleaved plan, then broken in four ways */
  p = parse(SPGEMM);
  test_rng r = test_rng_seed(7);
  galley_tensor *in[2] = {rand_mat(&r, 40, 40, 0.3, 0, 5, "dense,list"),
                          rand_mat(&r, 40, 40, 0.3, 0, 6, "dense,list")};
  galley_error err;
  for (int how = 0; how < 4; how++) {
    PhysPlan *pp = optimize(p, in, &o, &err);
    ck_assert_ptr_nonnull(pp);
    PhysQuery *c = &pp->q[pp->outputs[0]];
    ck_assert(is_interleaved(c));
    ck_assert_int_eq(codegen_status(pp, &err), GALLEY_OK);
    if (how == 0)
      c->out_fill = 1; /* not sum's initial value */
    else if (how == 1)
      c->agg = NULL; /* no aggregate to fold with */
    else if (how == 2)
      c->acc[0].fill = 2; /* A absent: 2 * B, not constant */
    else { /* max with fill -inf: A absent leaves 0 * B = 0, not -inf */
      c->agg = ops_find_agg(&pp->prog->ops, "max");
      ck_assert_ptr_nonnull(c->agg);
      c->out_fill = c->agg->agg_init;
    }
    ck_assert_ptr_nonnull(phys_inplace_problem(c));
    ck_assert_int_eq(codegen_status(pp, &err), GALLEY_EINTERNAL);
    phys_plan_free(pp);
  }
  galley_tensor_free(in[0]);
  galley_tensor_free(in[1]);
  program_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Differential                                                        */
/* ------------------------------------------------------------------ */

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : dflt;
}

/* Whether the default planner's plan matches the reference (cases it
 * gets wrong are code generator bugs, not the optimizer's). */
static int default_ok(const Program *p, galley_tensor *const *in) {
  PhysPlan *pp = NULL;
  galley_error err;
  if (phys_default_plan(p, (const galley_tensor *const *)in, &pp, &err) !=
      GALLEY_OK)
    return 1;
  char *why = NULL;
  int ok = matches_reference(p, pp, in, &why);
  free(why);
  phys_plan_free(pp);
  return ok;
}

static int check_random(uint64_t seed, const OptOptions *o, int full,
                        int *skipped) {
  test_rng mix = test_rng_seed(seed);
  test_rng r = test_rng_seed(test_rng_next(&mix));
  Gen g;
  memset(&g, 0, sizeof g);
  g.r = &r;
  g.inf_values = chance(&g, 0.1);
  if (full) /* distributing * over + turns inf - inf (nan) into +-inf:
               the logical optimizer is checked on finite values */
    g.inf_values = 0;
  g.defer_fills = 1;
  char *text = gen_program(&g);
  galley_tensor *in[MAX_INPUTS] = {0};
  for (int k = 0; k < g.ninputs; k++)
    in[k] = gen_tensor(&g, &g.in[k], gen_density(&g));
  Program *p = parse(text);
  galley_error err;
  int ok = 1;
  PhysPlan *pp = optimize_with(p, in, o, full, &err);
  if (env_long("GALLEY_PHYSOPT_VERBOSE", 0) > 1 && pp) {
    char *plan = plan_text(pp);
    fprintf(stderr, "case %llu:\n%s%s", (unsigned long long)seed, text, plan);
    free(plan);
  }
  if (pp) {
    char *why = NULL;
    ok = matches_reference(p, pp, in, &why);
    if (!ok && !default_ok(p, in)) {
      ok = 1;
      (*skipped)++;
    } else if (!ok) {
      char *plan = plan_text(pp);
      fprintf(stderr, "case %llu: %s\n%s%s", (unsigned long long)seed, why, text,
              plan);
      free(plan);
    }
    free(why);
    phys_plan_free(pp);
  } else {
    /* only bind errors, as the reference reports them */
    galley_tensor *ref[16] = {0};
    galley_error rerr;
    ok = refeval_run(p, (const galley_tensor *const *)in, ref, &rerr) != GALLEY_OK &&
         err.status == GALLEY_EBIND;
    for (int k = 0; k < 16; k++)
      galley_tensor_free(ref[k]);
    if (!ok)
      fprintf(stderr, "case %llu: %s\n%s", (unsigned long long)seed, err.msg,
              text);
  }
  program_free(p);
  for (int k = 0; k < g.ninputs; k++)
    galley_tensor_free(in[k]);
  free(text);
  return ok;
}

static void run_random(const OptOptions *o, int full, uint64_t base) {
  long n = env_long("GALLEY_PHYSOPT_CASES", 300);
  int bad = 0, skipped = 0;
  for (long k = 0; k < n; k++)
    bad += !check_random(base + (uint64_t)k, o, full, &skipped);
  if (skipped || env_long("GALLEY_PHYSOPT_VERBOSE", 0))
    fprintf(stderr, "physopt: %ld cases, %d skipped (the default plan fails "
            "too)\n", n, skipped);
  ck_assert_msg(bad == 0, "%d of %ld random programs differ", bad, n);
}

START_TEST(random_chain) {
  OptOptions o = test_options();
  run_random(&o, 0, 5000);
}
END_TEST

/* Through the logical optimizer too (both searches). */
START_TEST(random_logical_optimize) {
  OptOptions o = test_options();
  run_random(&o, 1, 13000);
  o.search = SEARCH_EXACT;
  o.estimator = EST_UNIFORM;
  run_random(&o, 1, 17000);
}
END_TEST

START_TEST(random_uniform_small_budget) {
  OptOptions o = test_options();
  o.estimator = EST_UNIFORM;
  o.memory_budget = 64;
  run_random(&o, 0, 9000);
}
END_TEST

/* A result whose pattern is an input's (SDDMM, masked maps) is written
 * into a copy of that input's levels (OUT_PATTERN), values only, and
 * equals the reference in every storage format of the pattern, with
 * empty rows, negative values and a non-zero fill elsewhere. */
START_TEST(pattern_outputs) {
  OptOptions o = test_options();
  static const char *progs[] = {
      "input S[i, j], U[i, k], V[j, k]\n"
      "C[i, j] = S[i, j] * sum(k: U[i, k] * V[j, k])\n",
      "input A[i, j], B[i, j]\nC[i, j] = A[i, j] * exp(B[i, j])\n",
      "input A[i, j], B[i, j] fill 2\nC[i, j] = A[i, j] * (B[i, j] - 2)\n",
      "input A[i, j], x[j]\nC[i, j] = max(A[i, j] * x[j], -1)\n"};
  static const char *fmts[] = {"dense,list", "dense:1,list:0", "list,list",
                               "dense,dense"};
  int patterns = 0;
  for (size_t k = 0; k < sizeof progs / sizeof progs[0]; k++)
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
      Program *p = parse(progs[k]);
      test_rng r = test_rng_seed(300 + 10 * k + f);
      galley_tensor *in[3] = {NULL, NULL, NULL};
      for (int x = 0; x < p->ninputs; x++) {
        int64_t m = p->inputs[x].order == 2 ? 30 : 1;
        double fill = p->inputs[x].fill;
        if (p->inputs[x].order == 1)
          in[x] = vec(30, 2, NULL);
        else if (x == 0)
          in[x] = rand_mat(&r, 30, m, 0.15, fill, 4, fmts[f]);
        else /* dense factors, or a second sparse matrix */
          in[x] = rand_mat(&r, 30, k == 0 ? 6 : 30, k == 0 ? 1.0 : 0.3,
                           fill, k == 0 ? 1000 : 3, "dense,list");
      }
      PhysPlan *pp = plan_checked(p, in, &o);
      const PhysQuery *c = query_named(pp, "C");
      patterns += c->out_kind == OUT_PATTERN;
      if (k == 0 && f == 0)
        ck_assert_msg(c->out_kind == OUT_PATTERN, "SDDMM on CSR: %s",
                      phys_out_kind_name(c->out_kind));
      phys_plan_free(pp);
      for (int x = 0; x < p->ninputs; x++)
        galley_tensor_free(in[x]);
      program_free(p);
    }
  ck_assert_int_ge(patterns, 4);
}
END_TEST

/* A result whose first indices follow a sparse input's pattern and
 * whose last ones are dense (TransE's X[h,r,t,d] = T[h,r,t] * ...) is
 * written into a copy of the input's levels followed by a dense level
 * (OUT_PATTERN with a dense suffix), and equals the reference: with
 * factors that visit every point of the suffix, with a sparse factor that
 * skips some (they keep the fill), and with a non-zero input fill; its
 * reader Y (a sum over the dense index) is written on X's first two
 * levels (a pattern prefix: the rest are on reduced loops). */
START_TEST(pattern_dense_suffix) {
  OptOptions o = test_options();
  static const char *progs[] = {
      "input S[i, j], U[i, k], V[j, k]\n"
      "X[i, j, k] = S[i, j] * (U[i, k] - V[j, k])\n"
      "Y[i, j] = sum(k: X[i, j, k]^2)\n",
      "input S[i, j], U[i, k], V[j, k]\n"
      "X[i, j, k] = S[i, j] * V[j, k]\n"
      "Y[i, j] = sum(k: X[i, j, k] * U[i, k])\n",
      "input S[i, j] fill 2, U[i, k], V[j, k]\n"
      "X[i, j, k] = (S[i, j] - 2) * exp(U[i, k])\n"
      "Y[i, j] = sum(k: X[i, j, k])\n"};
  static const char *fmts[] = {"dense,list", "dense:1,list:0", "list,list"};
  int suffixes = 0, prefixes = 0;
  for (size_t k = 0; k < sizeof progs / sizeof progs[0]; k++)
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
      Program *p = parse(progs[k]);
      test_rng r = test_rng_seed(700 + 10 * k + f);
      galley_tensor *in[3] = {
          rand_mat(&r, 40, 30, 0.1, p->inputs[0].fill, 4, fmts[f]),
          rand_mat(&r, 40, 5, 1.0, 0, 1000, "dense,dense"),
          /* program 1: V sparse, so the k loop skips points */
          rand_mat(&r, 30, 5, k == 1 ? 0.4 : 1.0, 0, 1000,
                   k == 1 ? "dense,list" : "dense,dense")};
      PhysPlan *pp = plan_checked(p, in, &o);
      const PhysQuery *x = query_named(pp, "X");
      if (x->out_kind == OUT_PATTERN && x->acc[x->pattern].order == 2) {
        ck_assert_int_eq(x->out_format.order, 3);
        ck_assert_int_eq(x->out_format.kinds[2], GALLEY_DENSE);
        ck_assert_int_eq(x->out[x->out_format.mode_order[2]], x->loops[2]);
        suffixes++;
      }
      /* Y, a sum over X's dense level, on X's first two levels */
      const PhysQuery *y = query_named(pp, "Y");
      if (y->out_kind == OUT_PATTERN && y->acc[y->pattern].order == 3) {
        ck_assert_int_eq(y->out_format.order, 2);
        prefixes++;
      }
      phys_plan_free(pp);
      for (int n = 0; n < 3; n++)
        galley_tensor_free(in[n]);
      program_free(p);
    }
  ck_assert_int_ge(suffixes, 5);
  ck_assert_int_ge(prefixes, 3);
}
END_TEST

/* A random symmetric n x n matrix: each pair i < j stored with
 * probability d, the same value both ways (integers of either sign);
 * `diag` also stores A[i,i] = 2 on every fifth row, `inf` puts +inf on
 * one pair. */
static galley_tensor *rand_sym(test_rng *r, int64_t n, double d, int diag,
                               int inf, double fill, const char *fmt_) {
  int64_t *coords = malloc((size_t)(n * n * 2 + 1) * sizeof *coords);
  double *vals = malloc((size_t)(n * n + 1) * sizeof *vals);
  int64_t nnz = 0;
  uint64_t salt = (uint64_t)test_rng_below(r, (int64_t)1 << 30);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      int stored = i == j ? diag && i % 5 == 0 : 0;
      double v = 2;
      if (i != j) {
        /* one draw per pair, the same from both sides */
        test_rng pr = test_rng_seed(salt + 1000003 * (uint64_t)(i < j ? i : j) +
                                    (uint64_t)(i < j ? j : i));
        stored = test_rng_double(&pr, 0, 1) < d;
        v = (double)(1 + test_rng_below(&pr, 3)) *
            (test_rng_below(&pr, 3) == 0 ? -1 : 1);
        if (inf && ((i == 1 && j == 2) || (i == 2 && j == 1))) {
          stored = 1;
          v = INFINITY;
        }
      }
      if (!stored)
        continue;
      coords[2 * nnz] = i;
      coords[2 * nnz + 1] = j;
      vals[nnz++] = v;
    }
  galley_format f;
  galley_error err;
  ck_assert_int_eq(galley_format_parse(fmt_, 2, &f, &err), GALLEY_OK);
  galley_tensor *t = NULL;
  int64_t dims[2] = {n, n};
  ck_assert_int_eq(galley_tensor_from_coo(2, dims, nnz, coords, vals, fill,
                                          &f, &t, &err), GALLEY_OK);
  free(coords);
  free(vals);
  return t;
}

/* Sums over a symmetric matrix whose index pairs form a complete graph
 * (triangles, 4-cliques) count each unordered tuple once, with bounded
 * loops and no transpose, and equal the reference; the same programs on
 * matrices that are not symmetric, have a diagonal, an inf or a fill of 1
 * are planned as written and equal it too.  Merge intersections run in
 * all of them. */
START_TEST(symmetric_sums) {
  OptOptions o = test_options();
  static const char *progs[] = {
      "input E[i, j]\nt = sum(i, j, k: E[i, j] * E[j, k] * E[i, k]) / 6\n",
      "input E[i, j]\nt = sum(i, j, k, l: E[i, j] * E[i, k] * E[i, l] * "
      "E[j, k] * E[j, l] * E[k, l])\n",
      "input E[i, j]\nt = sum(i, j: E[i, j] * E[j, i])\n",
      "input E[i, j]\nt = sum(i, j, k, l: E[i, j] * E[j, k] * E[k, l] * "
      "E[l, i])\n",
      "input E[i, j]\nt[i] = sum(j, k: E[i, j] * E[j, k] * E[i, k])\n"};
  static const int complete[] = {1, 1, 1, 0, 0};
  static const char *fmts[] = {"dense,list", "dense:1,list:0", "list,list",
                               "dense,dense"};
  int rewritten = 0;
  for (size_t k = 0; k < sizeof progs / sizeof progs[0]; k++)
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++)
      for (int variant = 0; variant < 4; variant++) {
        /* 0: hollow and symmetric; 1: a diagonal; 2: an inf; 3: fill 1 */
        Program *p = parse(progs[k]);
        if (variant == 3)
          p->inputs[0].fill = 1;
        test_rng r = test_rng_seed(700 + 16 * k + 4 * f + (uint64_t)variant);
        int64_t n = k == 1 ? 14 : 24;
        galley_tensor *in[1] = {rand_sym(&r, n, 0.3, variant == 1,
                                         variant == 2, variant == 3 ? 1 : 0,
                                         fmts[f])};
        PhysPlan *pp = plan_checked(p, in, &o);
        char *text = plan_text(pp);
        int bounded = strchr(text, '<') != NULL;
        int want = complete[k] && variant == 0;
        ck_assert_msg(bounded == want, "%s variant %d format %s:\n%s",
                      progs[k], variant, fmts[f], text);
        if (variant <= 2)
          ck_assert_msg(count_kind(pp, PQ_TRANSPOSE) == 0, "%s", text);
        rewritten += bounded;
        free(text);
        phys_plan_free(pp);
        galley_tensor_free(in[0]);
        program_free(p);
      }
  ck_assert_int_ge(rewritten, 9);
}
END_TEST

/* Triangles on the strict lower triangle L: an intersection of two rows
 * of L, equal to the reference, in every format of L. */
START_TEST(intersections_lower_triangle) {
  OptOptions o = test_options();
  Program *p = parse("input L[i, j]\n"
                     "t = sum(i, j, k: L[i, j] * L[j, k] * L[i, k])\n");
  static const char *fmts[] = {"dense,list", "dense:1,list:0", "list,list"};
  int intersected = 0;
  for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
    test_rng r = test_rng_seed(900 + f);
    galley_tensor *e = rand_sym(&r, 40, 0.25, 0, 0, 0, "dense,list");
    int64_t n = 0, *coords = malloc(2 * 40 * 40 * sizeof *coords);
    double *vals = malloc(40 * 40 * sizeof *vals);
    for (int64_t i = 0; i < 40; i++)
      for (int64_t j = 0; j < i; j++) {
        int64_t c[2] = {i, j};
        double v = galley_tensor_get(e, c, NULL);
        if (v == 0)
          continue;
        coords[2 * n] = i;
        coords[2 * n + 1] = j;
        vals[n++] = v;
      }
    galley_format fm;
    ck_assert_int_eq(galley_format_parse(fmts[f], 2, &fm, NULL), GALLEY_OK);
    galley_tensor *in[1] = {NULL};
    int64_t dims[2] = {40, 40};
    ck_assert_int_eq(galley_tensor_from_coo(2, dims, n, coords, vals, 0, &fm,
                                            &in[0], NULL), GALLEY_OK);
    PhysPlan *pp = plan_checked(p, in, &o);
    char *text = plan_text(pp);
    /* a merge, or the row of the outer loop marked in a table */
    intersected += strstr(text, ":intersect") != NULL || strstr(text, ":mark") != NULL;
    free(text);
    phys_plan_free(pp);
    galley_tensor_free(in[0]);
    galley_tensor_free(e);
    free(coords);
    free(vals);
  }
  ck_assert_int_ge(intersected, 2);
  program_free(p);
}
END_TEST

int main(void) {
  Suite *s = suite_create("physopt");
  TCase *tc = tcase_create("decisions");
  tcase_add_test(tc, full_lists_read_as_dense);
  tcase_add_test(tc, spmv_loops_and_lead);
  tcase_add_test(tc, avoid_transpose);
  tcase_add_test(tc, spgemm_formats);
  tcase_add_test(tc, growing_product_not_dense);
  tcase_add_test(tc, intermediate_in_consumer_order);
  tcase_add_test(tc, cse_queries);
  tcase_add_test(tc, deterministic);
  tcase_add_test(tc, lift_and_print);
  tcase_add_test(tc, inplace_gustavson);
  tcase_add_test(tc, inplace_rejected);
  tcase_add_test(tc, scatter_into_any_format);
  tcase_add_test(tc, pattern_outputs);
  tcase_add_test(tc, pattern_dense_suffix);
  tcase_add_test(tc, symmetric_sums);
  tcase_add_test(tc, intersections_lower_triangle);
  suite_add_tcase(s, tc);
  TCase *tr = tcase_create("random");
  tcase_set_timeout(tr, 600);
  tcase_add_test(tr, random_chain);
  tcase_add_test(tr, random_uniform_small_budget);
  tcase_add_test(tr, random_logical_optimize);
  suite_add_tcase(s, tr);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
