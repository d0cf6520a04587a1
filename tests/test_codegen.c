/*
 * test_codegen.c -- the generated kernels against the reference evaluator.
 *
 * Each case parses a small one-query program, plans it (a small planner
 * here that builds the PhysQuery by hand, so every merge and protocol can
 * be forced, or phys_default_plan), generates C with cg_plan, compiles it
 * in memory through jit_compile (libtcc; clang for a few), runs the kernel on random data in every level
 * kind and compares with refeval_run: exact for integer data, 1e-12
 * relative otherwise.
 */
#include <check.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "ir.h"
#include "phys.h"
#include "rt_internal.h"
#include "testutil.h"

typedef int (*kernel_fn)(const galley_kernel_args *);

/* ------------------------------------------------------------------ */
/* A hand planner for one query                                        */
/* ------------------------------------------------------------------ */

enum {
  PLAN_LEAD_FIRST = 0, /* lead with the first conjunct of each loop */
  PLAN_LEAD_LAST = 1,  /* ... with the last */
  PLAN_UNION = 2,      /* union instead of lead whenever valid */
  PLAN_DENSE = 3       /* every loop dense */
};

typedef struct TestCase {
  Program *prog;
  int qi;                    /* the query tested */
  galley_tensor **inputs;    /* bound to prog's inputs (owned) */
  galley_tensor **acc_t;     /* the tensor of each access (borrowed/owned) */
  unsigned char *acc_owned;
  PhysPlan *pp;
} TestCase;

static Program *parse(const char *text) {
  Program *p = NULL;
  galley_error err;
  galley_status st = front_parse("t.tin", text, strlen(text), &p, NULL, &err);
  ck_assert_msg(st == GALLEY_OK, "parse: %s", err.msg);
  return p;
}

static int count_acc(Node *n) {
  if (n->kind == ND_INPUT || n->kind == ND_ALIAS) return 1;
  int c = 0;
  if (n->kind == ND_MAP)
    for (int k = 0; k < n->nargs; k++) c += count_acc(n->args[k]);
  if (n->kind == ND_AGG) c += count_acc(n->arg);
  return c;
}

static void number_acc(Node *n, Node **list, int *k) {
  if (n->kind == ND_INPUT) {
    n->access = *k;
    list[(*k)++] = n;
  } else if (n->kind == ND_MAP) {
    for (int a = 0; a < n->nargs; a++) number_acc(n->args[a], list, k);
  }
}

static int depth_of(const PhysQuery *q, int id) {
  for (int d = 0; d < q->nloops; d++)
    if (q->loops[d] == id) return d;
  return -1;
}

/* Set access x from its tensor (converting it into loop order when its
 * mode order does not follow the loops, as a transpose query would). */
static void set_access(TestCase *tc, PhysQuery *q, int x, const Node *n) {
  galley_tensor *t = tc->inputs[n->tensor];
  galley_format f;
  galley_tensor_format(t, &f);
  PAccess *A = &q->acc[x];
  A->is_input = 1;
  A->tensor = n->tensor;
  A->order = n->nidx;
  A->fill = tc->prog->inputs[n->tensor].fill;
  A->finite = 1;
  for (galley_pos v = 0; v < t->nval; v++) A->finite &= isfinite(t->val[v]) != 0;
  int ok = 1;
  for (int l = 1; l < f.order; l++)
    ok &= depth_of(q, n->idx[f.mode_order[l]]) >= depth_of(q, n->idx[f.mode_order[l - 1]]);
  if (!ok) { /* sort the modes by loop depth, keep the level kinds */
    galley_format g = f;
    int used[GALLEY_MAX_ORDER] = {0};
    for (int l = 0; l < f.order; l++) {
      int best = -1;
      for (int m = 0; m < f.order; m++)
        if (!used[m] && (best < 0 || depth_of(q, n->idx[m]) < depth_of(q, n->idx[best]))) best = m;
      used[best] = 1;
      g.mode_order[l] = best;
    }
    galley_tensor *c = NULL;
    ck_assert_int_eq(galley_tensor_convert(t, &g, &c, NULL), GALLEY_OK);
    t = c;
    f = g;
    tc->acc_owned[x] = 1;
  }
  tc->acc_t[x] = t;
  A->w32 = rt_tensor_widths(t);
  for (int l = 0; l < f.order; l++) {
    A->level_idx[l] = n->idx[f.mode_order[l]];
    A->kind[l] = f.kinds[l];
  }
}

static int64_t stored(const galley_tensor *t) { return galley_tensor_stored(t); }

/* Merges and protocols per loop, as the execution model allows. */
static void plan_merges(TestCase *tc, PhysQuery *q, int how) {
  size_t nacc = (size_t)(q->nacc > 0 ? q->nacc : 0);
  unsigned char *absent = calloc(nacc + 1, 1);
  int lvl[64] = {0}; /* consumed levels per access */
  for (int d = 0; d < q->nloops; d++) {
    int S[64], ns = 0;
    for (int x = 0; x < q->nacc; x++)
      if (lvl[x] < q->acc[x].order && q->acc[x].level_idx[lvl[x]] == q->loops[d]) S[ns++] = x;
    double c;
    memset(absent, 0, nacc);
    for (int k = 0; k < ns; k++) absent[S[k]] = 1;
    int constant = phys_absent_value(q, q->expr, absent, &c);
    int lead = -1;
    if (constant && how != PLAN_UNION && how != PLAN_DENSE) {
      for (int k = 0; k < ns; k++) {
        memset(absent, 0, nacc);
        absent[S[k]] = 1;
        if (!phys_absent_value(q, q->expr, absent, &c)) continue;
        if (lead < 0 || how == PLAN_LEAD_LAST) lead = S[k];
      }
    }
    Merge m = !constant || how == PLAN_DENSE ? MERGE_DENSE : lead >= 0 ? MERGE_LEAD : MERGE_UNION;
    q->merge[d] = m;
    for (int k = 0; k < ns; k++) {
      int x = S[k];
      Protocol p = (m == MERGE_UNION || (m == MERGE_LEAD && x == lead)) ? PROTO_ITERATE : PROTO_LOOKUP;
      while (lvl[x] < q->acc[x].order && q->acc[x].level_idx[lvl[x]] == q->loops[d])
        q->acc[x].proto[lvl[x]++] = p;
    }
  }
  free(absent);
  (void)tc;
  (void)stored;
}

/* Plan query qi of tc->prog over tc->inputs; out_kinds NULL = dense. */
static void hand_plan(TestCase *tc, int how, const galley_level_kind *out_kinds) {
  Program *p = tc->prog;
  Query *Q = &p->queries[tc->qi];
  Arena *ar = arena_new();
  PhysPlan *pp = arena_alloc(ar, sizeof *pp);
  pp->arena = ar;
  pp->prog = p;
  pp->nq = tc->qi + 1;
  pp->q = arena_alloc(ar, sizeof(PhysQuery) * (size_t)pp->nq);
  for (int k = 0; k < tc->qi; k++) { /* earlier queries: not generated */
    pp->q[k].kind = PQ_TRANSPOSE;
    pp->q[k].name = p->queries[k].name;
  }
  PhysQuery *q = &pp->q[tc->qi];
  q->kind = PQ_KERNEL;
  q->name = Q->name;
  q->user_query = tc->qi;
  q->nindices = Q->nindices;
  q->indices = arena_alloc(ar, sizeof(Index) * (size_t)(Q->nindices + 1));
  if (Q->nindices) memcpy(q->indices, Q->indices, sizeof(Index) * (size_t)Q->nindices);
  Node *body = Q->expr;
  if (body->kind == ND_AGG) {
    q->agg = body->op;
    q->nred = body->nidx;
    q->red = body->idx;
    body = body->arg;
  }
  q->expr = body;
  q->nout = Q->nout;
  q->out = Q->out;
  q->nloops = q->nout + q->nred;
  q->loops = arena_alloc(ar, sizeof(int) * (size_t)(q->nloops + 1));
  q->merge = arena_alloc(ar, sizeof(Merge) * (size_t)(q->nloops + 1));
  for (int k = 0; k < q->nout; k++) q->loops[k] = q->out[k];
  for (int k = 0; k < q->nred; k++) q->loops[q->nout + k] = q->red[k];
  q->nacc = count_acc(body);
  q->acc = arena_alloc(ar, sizeof(PAccess) * (size_t)(q->nacc + 1));
  Node **list = arena_alloc(ar, sizeof(Node *) * (size_t)(q->nacc + 1));
  int k = 0;
  number_acc(body, list, &k);
  tc->acc_t = calloc((size_t)q->nacc + 1, sizeof *tc->acc_t);
  tc->acc_owned = calloc((size_t)q->nacc + 1, 1);
  for (int x = 0; x < q->nacc; x++) {
    set_access(tc, q, x, list[x]);
    for (int m = 0; m < list[x]->nidx; m++)
      q->indices[list[x]->idx[m]].dim = galley_tensor_dim(tc->inputs[list[x]->tensor], m);
  }
  plan_merges(tc, q, how);
  q->out_format = galley_format_dense(q->nout);
  if (out_kinds)
    for (int m = 0; m < q->nout; m++) q->out_format.kinds[m] = out_kinds[m];
  double fills[16];
  int64_t sizes[32];
  for (int in = 0; in < p->ninputs; in++) fills[in] = p->inputs[in].fill;
  for (int id = 0; id < q->nindices; id++) sizes[id] = q->indices[id].dim;
  q->out_fill = refeval_fill(p, Q, Q->expr, fills, NULL, sizes);
  phys_choose_output(q);
  tc->pp = pp;
}

/* ------------------------------------------------------------------ */
/* Compiling and running                                               */
/* ------------------------------------------------------------------ */

static char *gen_source(const PhysPlan *pp) {
  char *src = NULL;
  size_t len = 0;
  galley_error err;
  galley_status st = cg_plan(pp, &src, &len, &err);
  ck_assert_msg(st == GALLEY_OK, "cg_plan: %s", err.msg);
  ck_assert_uint_eq(strlen(src), len);
  if (getenv("GALLEY_CG_DUMP")) /* to read the kernels: the code after the header */
    fputs(strstr(src, "#endif /* GALLEY_RT_H */"), stderr);
  return src;
}

/* The clang cache of this run (made by main, removed at the end). */
static char clang_cache[64];

/* Compile with jit_compile; syms[k] into fns[k]. */
static JitModule *compile_jit(const char *src, JitBackend be, int nsym,
                              const char *const *syms, void **fns) {
  JitOptions opt = {.backend = be, .cache_dir = clang_cache};
  JitModule *m = NULL;
  galley_error err;
  galley_status st = jit_compile(&opt, src, syms, nsym, fns, &m, &err);
  if (st != GALLEY_OK) fputs(src, stderr);
  ck_assert_msg(st == GALLEY_OK, "jit_compile: %s", err.msg);
  return m;
}

/* Kernel qn of src, compiled by backend be. */
static JitModule *compile_kernel(const char *src, int qn, JitBackend be, kernel_fn *fn) {
  char name[32];
  cg_kernel_name(qn, name, sizeof name);
  const char *syms[1] = {name};
  void *fns[1] = {NULL};
  JitModule *m = compile_jit(src, be, 1, syms, fns);
  *fn = (kernel_fn)fns[0];
  ck_assert(*fn != NULL);
  return m;
}

typedef struct Sink {
  galley_rt_sink s;
} Sink;

static int sink_grow(galley_rt_sink *s, int64_t need) {
  int64_t cap = s->cap ? 2 * s->cap : 4;
  while (cap < need) cap *= 2;
  int64_t *crd = realloc(s->crd, sizeof *crd * (size_t)(cap * (s->order ? s->order : 1)));
  if (!crd) return -1;
  s->crd = crd;
  double *val = realloc(s->val, sizeof *val * (size_t)cap);
  if (!val) return -1;
  s->val = val;
  s->cap = cap;
  return 0;
}

static int close_enough(double got, double want) {
  if (isnan(got) || isnan(want)) return isnan(got) && isnan(want);
  if (got == want) return 1;
  return fabs(got - want) <= 1e-12 * fmax(1.0, fmax(fabs(got), fabs(want)));
}

/* The coordinate of flat row-major entry e over dims. */
static void unflatten(int64_t e, int order, const int64_t *dims, int64_t *crd) {
  for (int m = order - 1; m >= 0; m--) {
    crd[m] = e % dims[m];
    e /= dims[m];
  }
}

static int out_is_dense(const PhysQuery *q) {
  for (int l = 0; l < q->out_format.order; l++)
    if (q->out_format.kinds[l] != GALLEY_DENSE) return 0;
  return 1;
}

/* An OUT_PATTERN result: a copy of the pattern tensor's levels (its
 * first ones when it has more than the result; then dense levels when
 * the result has more), laid out as the result's modes, every value the
 * fill (as the executor makes it). */
static galley_tensor *pattern_copy(const PhysQuery *q, const galley_tensor *src,
                                   const int64_t *odims) {
  galley_format f;
  galley_tensor_format(src, &f);
  galley_tensor *t = NULL;
  ck_assert_int_eq(galley_tensor_convert(src, &f, &t, NULL), GALLEY_OK);
  int k = src->order < q->nout ? src->order : q->nout;
  for (int l = k; l < src->order; l++) { /* drop the reduced levels */
    galley_level *L = &t->lvl[l];
    free(L->pos), free(L->crd), free(L->pos32), free(L->crd32);
    memset(L, 0, sizeof *L);
  }
  int64_t n = t->lvl[k - 1].nchild;
  for (int l = k; l < q->nout; l++) { /* the dense suffix */
    galley_level *L = &t->lvl[l];
    memset(L, 0, sizeof *L);
    L->kind = GALLEY_RT_DENSE;
    L->dim = odims[q->out_format.mode_order[l]];
    L->npar = n;
    L->nchild = L->nset = n *= L->dim;
  }
  t->order = q->nout;
  for (int m = 0; m < q->nout; m++) t->dims[m] = odims[m];
  for (int l = 0; l < t->order; l++) t->lvl[l].mode = q->out_format.mode_order[l];
  t->fill = q->out_fill;
  t->nval = n;
  t->val = realloc(t->val, sizeof *t->val * (size_t)(n + 1));
  for (int64_t e = 0; e < t->nval; e++) t->val[e] = q->out_fill;
  return t;
}

/* Run the kernel and compare every output entry with the reference. */
static void run_and_compare(TestCase *tc, kernel_fn fn) {
  const PhysQuery *q = &tc->pp->q[tc->qi];
  int64_t dims[32], odims[GALLEY_MAX_ORDER], total = 1;
  for (int id = 0; id < q->nindices; id++) dims[id] = q->indices[id].dim;
  for (int m = 0; m < q->nout; m++) total *= odims[m] = dims[q->out[m]];
  galley_kernel_args a = {0};
  a.in = (const struct galley_tensor *const *)tc->acc_t;
  a.dims = dims;
  a.lo = 0;
  a.hi = q->nloops ? dims[q->loops[0]] : 0;
  galley_tensor *out = NULL;
  galley_rt_sink sink = {.order = q->nout, .grow = sink_grow};
  if (q->out_kind == OUT_PATTERN) {
    out = pattern_copy(q, tc->acc_t[q->pattern], odims);
    a.out = out;
  } else if (out_is_dense(q)) {
    double *vals = malloc(sizeof *vals * (size_t)(total + 1));
    for (int64_t e = 0; e < total; e++) vals[e] = q->out_fill;
    ck_assert_int_eq(galley_tensor_from_dense(q->nout, odims, vals, q->out_fill, &q->out_format, &out, NULL), GALLEY_OK);
    free(vals);
    a.out = out;
  } else {
    a.sink = &sink;
  }
  /* in two halves of the outermost loop, as a parallel split would */
  int64_t hi = a.hi;
  a.hi = q->nout > 0 ? hi / 2 : hi;
  ck_assert_int_eq(fn(&a), 0);
  if (a.hi < hi) {
    a.lo = a.hi;
    a.hi = hi;
    ck_assert_int_eq(fn(&a), 0);
  }

  galley_tensor **ref = calloc((size_t)tc->prog->nqueries, sizeof *ref);
  galley_error err;
  ck_assert_msg(refeval_run(tc->prog, (const galley_tensor *const *)tc->inputs, ref, &err) == GALLEY_OK, "%s", err.msg);
  const galley_tensor *want = ref[tc->qi];
  int64_t crd[GALLEY_MAX_ORDER];
  if (out) {
    for (int64_t e = 0; e < total; e++) {
      unflatten(e, q->nout, odims, crd);
      double g = galley_tensor_get(out, crd, NULL), w = galley_tensor_get(want, crd, NULL);
      ck_assert_msg(close_enough(g, w), "entry %lld: got %.17g want %.17g", (long long)e, g, w);
    }
  } else {
    unsigned char *seen = calloc((size_t)total + 1, 1);
    int64_t prev = -1;
    for (int64_t k = 0; k < sink.n; k++) {
      int64_t e = 0;
      for (int m = 0; m < q->nout; m++) e = e * odims[m] + sink.crd[k * q->nout + m];
      ck_assert_msg(e > prev, "sink entries out of order");
      prev = e;
      seen[e] = 1;
      unflatten(e, q->nout, odims, crd);
      double w = galley_tensor_get(want, crd, NULL);
      ck_assert_msg(close_enough(sink.val[k], w), "sink entry %lld: got %.17g want %.17g", (long long)e, sink.val[k], w);
    }
    for (int64_t e = 0; e < total; e++) {
      if (seen[e]) continue;
      unflatten(e, q->nout, odims, crd);
      double w = galley_tensor_get(want, crd, NULL);
      ck_assert_msg(close_enough(q->out_fill, w), "unpushed entry %lld: fill %.17g want %.17g", (long long)e, q->out_fill, w);
    }
    free(seen);
  }
  for (int k = 0; k < tc->prog->nqueries; k++) galley_tensor_free(ref[k]);
  free(ref);
  free(sink.crd);
  free(sink.val);
  galley_tensor_free(out);
}

static void free_case(TestCase *tc) {
  const PhysQuery *q = &tc->pp->q[tc->qi];
  for (int x = 0; x < q->nacc; x++)
    if (tc->acc_owned[x]) galley_tensor_free(tc->acc_t[x]);
  free(tc->acc_t);
  free(tc->acc_owned);
  tc->acc_t = NULL;
  tc->acc_owned = NULL;
  arena_free(tc->pp->arena);
  tc->pp = NULL;
}

/* Plan, generate, compile, run, compare; returns nothing, asserts. */
static void check_case(TestCase *tc, int how, const galley_level_kind *out_kinds) {
  hand_plan(tc, how, out_kinds);
  char *src = gen_source(tc->pp);
  kernel_fn fn;
  JitModule *m = compile_kernel(src, tc->qi, JIT_TCC, &fn);
  run_and_compare(tc, fn);
  jit_free(m);
  free(src);
  free_case(tc);
}

/* ------------------------------------------------------------------ */
/* Data                                                                */
/* ------------------------------------------------------------------ */

/* A random tensor: each entry stored with probability density, values
 * small integers (nonzero, either sign) or, with frac, quarters. */
static galley_tensor *rand_tensor_special(test_rng *r, int order, const int64_t *dims,
                                          double density, double fill,
                                          const galley_level_kind *kinds, double pinf) {
  int64_t total = 1;
  for (int m = 0; m < order; m++) total *= dims[m];
  int64_t *crd = malloc(sizeof *crd * (size_t)(total * (order ? order : 1) + 1));
  double *val = malloc(sizeof *val * (size_t)(total + 1));
  int64_t n = 0, c[GALLEY_MAX_ORDER];
  for (int64_t e = 0; e < total; e++) {
    if (test_rng_double(r, 0, 1) >= density) continue;
    unflatten(e, order, dims, c);
    /* leave some rows empty */
    if (order >= 2 && c[0] % 5 == 3) continue;
    memcpy(crd + n * order, c, sizeof *c * (size_t)order);
    double v = (double)(test_rng_below(r, 7) - 3);
    if (v == 0) v = 4;
    if (test_rng_double(r, 0, 1) < pinf) v = v > 0 ? INFINITY : -INFINITY;
    val[n++] = v;
  }
  galley_format f = galley_format_dense(order);
  for (int l = 0; l < order; l++) f.kinds[l] = kinds ? kinds[l] : GALLEY_LIST;
  galley_tensor *t = NULL;
  galley_error err;
  galley_status st = galley_tensor_from_coo(order, dims, n, crd, val, fill, &f, &t, &err);
  ck_assert_msg(st == GALLEY_OK, "%s", err.msg);
  free(crd);
  free(val);
  return t;
}

static galley_tensor *rand_tensor(test_rng *r, int order, const int64_t *dims,
                                  double density, double fill,
                                  const galley_level_kind *kinds) {
  return rand_tensor_special(r, order, dims, density, fill, kinds, 0.0);
}

static void free_inputs(TestCase *tc) {
  for (int k = 0; k < tc->prog->ninputs; k++) galley_tensor_free(tc->inputs[k]);
  free(tc->inputs);
  program_free(tc->prog);
}

/* Set up prog with random inputs: input k of order ord gets kinds
 * kinds[k] (NULL: lists), dims from dimsz by index name letter. */
static TestCase make_case(const char *text, int qi, test_rng *r,
                          const galley_level_kind (*kinds)[GALLEY_MAX_ORDER],
                          double density) {
  TestCase tc = {0};
  tc.prog = parse(text);
  tc.qi = qi;
  tc.inputs = calloc((size_t)tc.prog->ninputs + 1, sizeof *tc.inputs);
  /* sizes: every index of the same input mode shares a size table by
   * position: modes get 7, 5, 6 so shapes are not square unless the
   * program needs it (the sizes of all inputs are 6 for repeated use) */
  for (int k = 0; k < tc.prog->ninputs; k++) {
    int64_t dims[GALLEY_MAX_ORDER];
    for (int m = 0; m < tc.prog->inputs[k].order; m++) dims[m] = 6;
    tc.inputs[k] = rand_tensor(r, tc.prog->inputs[k].order, dims, density,
                               tc.prog->inputs[k].fill, kinds ? kinds[k] : NULL);
  }
  return tc;
}

static const galley_level_kind ALL_KINDS[4] = {GALLEY_DENSE, GALLEY_LIST, GALLEY_HASH, GALLEY_BYTEMAP};

/* Run program text over every combination of level kinds for its first
 * two inputs (up to order 2 each; other inputs lists) and the plans in
 * hows. */
static void sweep(const char *text, int qi, const int *hows, int nhow,
                  uint64_t seed) {
  test_rng r = test_rng_seed(seed);
  Program *p = parse(text);
  int o0 = p->ninputs > 0 ? p->inputs[0].order : 0;
  int o1 = p->ninputs > 1 ? p->inputs[1].order : 0;
  program_free(p);
  int n0 = o0 == 0 ? 1 : o0 == 1 ? 4 : 16, n1 = o1 == 0 ? 1 : o1 == 1 ? 4 : 16;
  for (int c0 = 0; c0 < n0; c0++) {
    for (int c1 = 0; c1 < n1; c1++) {
      if (n0 * n1 > 64 && (c0 * 7 + c1) % 4 != 0) continue; /* a quarter of 256 */
      galley_level_kind kinds[4][GALLEY_MAX_ORDER];
      for (int k = 0; k < 4; k++)
        for (int l = 0; l < GALLEY_MAX_ORDER; l++) kinds[k][l] = GALLEY_LIST;
      for (int l = 0; l < o0 && l < 2; l++) kinds[0][l] = ALL_KINDS[(c0 >> (2 * l)) & 3];
      for (int l = 0; l < o1 && l < 2; l++) kinds[1][l] = ALL_KINDS[(c1 >> (2 * l)) & 3];
      for (int h = 0; h < nhow; h++) {
        TestCase tc = make_case(text, qi, &r, (const galley_level_kind(*)[GALLEY_MAX_ORDER])kinds, 0.35);
        check_case(&tc, hows[h], NULL);
        free_inputs(&tc);
      }
    }
  }
}

static const int LEADS[] = {PLAN_LEAD_FIRST, PLAN_LEAD_LAST};
static const int ALL_PLANS[] = {PLAN_LEAD_FIRST, PLAN_LEAD_LAST, PLAN_UNION, PLAN_DENSE};

/* ------------------------------------------------------------------ */
/* Tests                                                               */
/* ------------------------------------------------------------------ */

START_TEST(spmv) {
  sweep("input A[i, j], x[j]\ny[i] = sum(j: A[i, j] * x[j])\n", 0, ALL_PLANS, 4, 1);
}
END_TEST

START_TEST(elementwise_mul_lead) {
  sweep("input A[i, j], B[i, j]\nC[i, j] = A[i, j] * B[i, j]\n", 0, ALL_PLANS, 4, 2);
}
END_TEST

START_TEST(elementwise_add_union) {
  static const int how[] = {PLAN_UNION, PLAN_DENSE};
  sweep("input A[i, j], B[i, j]\nC[i, j] = A[i, j] + B[i, j]\n", 0, how, 2, 3);
}
END_TEST

START_TEST(exp_fill_one) {
  static const int how[] = {PLAN_UNION};
  sweep("input A[i, j]\nE[i, j] = exp(A[i, j])\n", 0, how, 1, 4);
}
END_TEST

START_TEST(spgemm_dense_output) {
  sweep("input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n", 0, LEADS, 2, 5);
}
END_TEST

START_TEST(sddmm) {
  sweep("input S[i, j], U[i, k], V[j, k]\nC[i, j] = sum(k: S[i, j] * U[i, k] * V[j, k])\n", 0, LEADS, 2, 6);
}
END_TEST

START_TEST(max_min_partly_empty) {
  sweep("input A[i, j]\nm[i] = max(j: A[i, j])\n", 0, ALL_PLANS, 4, 7);
  sweep("input A[i, j]\nm[i] = min(j: A[i, j])\n", 0, ALL_PLANS, 4, 8);
  sweep("input A[i, j], B[i, j]\nm[i] = max(j: A[i, j] * B[i, j])\n", 0, LEADS, 2, 9);
}
END_TEST

START_TEST(sum_with_fill) {
  sweep("input A[i, j] fill 2\ns[i] = sum(j: A[i, j])\n", 0, ALL_PLANS, 4, 10);
  sweep("input A[i, j] fill 2\ns = sum(i, j: A[i, j])\n", 0, ALL_PLANS, 4, 11);
  sweep("input A[i, j] fill 2, B[i, j]\ns = sum(i, j: A[i, j] * B[i, j])\n", 0, ALL_PLANS, 4, 12);
}
END_TEST

START_TEST(prod_any_all) {
  sweep("input A[i, j] fill 1\np[i] = prod(j: A[i, j])\n", 0, ALL_PLANS, 4, 13);
  sweep("input A[i, j] fill 2\np[i] = prod(j: A[i, j] / 2)\n", 0, ALL_PLANS, 4, 14);
  sweep("input A[i, j]\np[i] = prod(j: A[i, j])\n", 0, ALL_PLANS, 4, 15);
  sweep("input A[i, j]\nb[i] = any(j: A[i, j])\n", 0, ALL_PLANS, 4, 16);
  sweep("input A[i, j]\nb[i] = all(j: A[i, j])\n", 0, ALL_PLANS, 4, 17);
  sweep("input A[i, j] fill 1\nb = all(i, j: A[i, j] > -2)\n", 0, ALL_PLANS, 4, 18);
}
END_TEST

START_TEST(user_defs) {
  sweep("def f(x, y) = sin(1 + x*y)\ndef sq(x) = x * x\ndef g(x) = f(x, 2) * sq(x)\n"
        "input A[i, j], B[i, j]\nC[i, j] = g(A[i, j]) + f(A[i, j], B[i, j])\n",
        0, ALL_PLANS, 4, 19);
  sweep("def smax(x, y) = max(x, y) [associative, commutative, idempotent, identity = -inf]\n"
        "input A[i, j]\nm[i] = smax(j: A[i, j])\n", 0, ALL_PLANS, 4, 20);
  sweep("def tplus(x, y) = x + y [associative, commutative, identity = 0]\n"
        "input A[i, j] fill 1, B[i, j]\ns = tplus(i, j: A[i, j] + B[i, j])\n", 0, ALL_PLANS, 4, 21);
}
END_TEST

START_TEST(repeated_index) {
  sweep("input A[i, j]\nd[i] = A[i, i]\n", 0, ALL_PLANS, 4, 22);
  sweep("input A[i, j], x[i]\nt = sum(i: A[i, i] * x[i])\n", 0, ALL_PLANS, 4, 23);
  sweep("input A[i, j] fill 3\nt = sum(i: A[i, i])\n", 0, ALL_PLANS, 4, 24);
}
END_TEST

START_TEST(scalars) {
  sweep("input s, A[i]\ny[i] = A[i] * s\n", 0, ALL_PLANS, 4, 25);
  sweep("input s\nz = s + 1\n", 0, ALL_PLANS, 1, 26);
  sweep("input A[i]\nc = 3\n", 0, ALL_PLANS, 1, 27);
  sweep("dim n = 4\ninput A[i]\nc[n] = 3\n", 0, ALL_PLANS, 4, 28);
  sweep("input A[i], s\nc = sum(i: A[i] * s)\n", 0, ALL_PLANS, 4, 29);
  sweep("input A[i], s fill 2\nc = sum(i: A[i] + s)\n", 0, ALL_PLANS, 4, 32);
}
END_TEST

START_TEST(order3) {
  sweep("input T[i, j, k], v[k]\nB[i, j] = sum(k: T[i, j, k] * v[k])\n", 0, ALL_PLANS, 4, 30);
  sweep("input T[i, j, k], U[i, j, k]\nB[i, j, k] = T[i, j, k] + U[k, j, i]\n", 0, ALL_PLANS, 4, 31);
}
END_TEST

/* Sparse results go through the sink, leaving out the fill. */
START_TEST(sparse_outputs) {
  test_rng r = test_rng_seed(40);
  static const char *progs[] = {
      "input A[i, j], B[i, j]\nC[i, j] = A[i, j] * B[i, j]\n",
      "input A[i, j], B[i, j]\nC[i, j] = A[i, j] + B[i, j]\n",
      "input A[i, j]\nE[i, j] = exp(A[i, j])\n",
      "input A[i, j], x[j]\ny[i] = sum(j: A[i, j] * x[j])\n",
      "input A[i, j] fill nan\ny[i] = sum(j: A[i, j])\n",
  };
  galley_level_kind ok[2] = {GALLEY_LIST, GALLEY_HASH};
  for (size_t p = 0; p < sizeof progs / sizeof progs[0]; p++)
    for (int how = 0; how < 4; how++) {
      TestCase tc = make_case(progs[p], 0, &r, NULL, 0.4);
      check_case(&tc, how, ok);
      free_inputs(&tc);
    }
}
END_TEST

/* Program names are C keywords and reserved identifiers the generator
 * never uses itself: none of them may appear as a token of the code. */
static int has_token(const char *code, const char *name) {
  size_t n = strlen(name);
  for (const char *c = strstr(code, name); c; c = strstr(c + 1, name)) {
    int before = c > code && (isalnum((unsigned char)c[-1]) || c[-1] == '_');
    int after = isalnum((unsigned char)c[n]) || c[n] == '_';
    if (!before && !after) return 1;
  }
  return 0;
}

START_TEST(names_do_not_leak) {
  const char *text = "def volatile(x, y) = x * y + 1\n"
                     "input switch[goto, union], __asm__[union]\n"
                     "auto[goto] = sum(union: volatile(switch[goto, union], __asm__[union]))\n";
  test_rng r = test_rng_seed(41);
  for (int how = 0; how < 4; how++) {
    TestCase tc = make_case(text, 0, &r, NULL, 0.5);
    hand_plan(&tc, how, NULL);
    char *src = gen_source(tc.pp);
    /* strip the header and the comments, then search the code */
    const char *body = strstr(src, "#endif /* GALLEY_RT_H */");
    ck_assert(body != NULL);
    char *code = strdup(body + 24);
    char *w = code;
    for (const char *c = code; *c;) {
      if (c[0] == '/' && c[1] == '*') {
        const char *e = strstr(c + 2, "*/");
        ck_assert(e != NULL);
        c = e + 2;
      } else {
        *w++ = *c++;
      }
    }
    *w = '\0';
    static const char *names[] = {"volatile", "switch", "goto", "union", "__asm__", "auto"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
      ck_assert_msg(!has_token(code, names[k]), "'%s' leaked into:\n%s", names[k], code);
    kernel_fn fn;
    JitModule *m = compile_kernel(src, 0, how == 0 ? JIT_CLANG : JIT_TCC, &fn);
    run_and_compare(&tc, fn);
    jit_free(m);
    free(code);
    free(src);
    free_case(&tc);
    free_inputs(&tc);
  }
}
END_TEST

/* The generated source compiles without a warning under gcc and clang. */
static void compile_warning_free(const char *src, const char *cc) {
  char path[] = "/tmp/galley_cg_XXXXXX";
  int fd = mkstemp(path);
  ck_assert(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs(src, f);
  fclose(f);
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "%s -std=c99 -pedantic -Wall -Wextra -Werror -Wshadow -O1 -x c -c %s -o /dev/null 2>&1", cc, path);
  FILE *p = popen(cmd, "r");
  ck_assert(p != NULL);
  char out[4096] = "";
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  int rc = pclose(p);
  remove(path);
  ck_assert_msg(rc == 0, "%s:\n%s", cc, out);
}

START_TEST(warning_free) {
  static const char *progs[] = {
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n",
      "def f(x, y) = pow(x, y) + tanh(x)\ninput A[i, j], B[i, j]\nC[i, j] = f(A[i, j], B[i, j]) + abs(A[i, j])\n",
      "input A[i, j]\nb[i] = any(j: A[i, j])\n",
      "input A[i, j] fill 2\ns = prod(i, j: A[i, j])\n",
      "input A[i, j], B[i, j]\nC[i, j] = A[i, j] + B[i, i]\n",
      "input s\nz = s + 1\n",
  };
  test_rng r = test_rng_seed(50);
  static const galley_level_kind kinds[4][GALLEY_MAX_ORDER] = {
      {GALLEY_HASH, GALLEY_BYTEMAP}, {GALLEY_LIST, GALLEY_HASH}};
  for (size_t p = 0; p < sizeof progs / sizeof progs[0]; p++) {
    for (int how = 0; how < 3; how += 2) {
      TestCase tc = make_case(progs[p], 0, &r, kinds, 0.4);
      galley_level_kind sparse[2] = {GALLEY_LIST, GALLEY_LIST};
      hand_plan(&tc, how, p % 2 ? sparse : NULL);
      char *src = gen_source(tc.pp);
      compile_warning_free(src, "gcc");
      compile_warning_free(src, "clang");
      free(src);
      free_case(&tc);
      free_inputs(&tc);
    }
  }
}
END_TEST

/* Stored infinities: 0 * inf is nan, so an absent operand no longer
 * annihilates and the loops must visit every point (finite = 0). */
START_TEST(nonfinite_data) {
  static const char *progs[] = {
      "input A[i, j], B[i, j]\nC[i, j] = A[i, j] * B[i, j]\n",
      "input A[i, j], x[j]\ny[i] = sum(j: A[i, j] * x[j])\n",
      "input A[i, j], B[i, j]\nm[i] = max(j: A[i, j] + B[i, j])\n",
  };
  test_rng r = test_rng_seed(70);
  for (size_t p = 0; p < sizeof progs / sizeof progs[0]; p++)
    for (int how = 0; how < 4; how++) {
      TestCase tc = make_case(progs[p], 0, &r, NULL, 0.4);
      for (int k = 0; k < tc.prog->ninputs; k++) {
        int64_t dims[2] = {6, 6};
        galley_tensor_free(tc.inputs[k]);
        tc.inputs[k] = rand_tensor_special(&r, tc.prog->inputs[k].order, dims, 0.4, 0.0, NULL, 0.2);
      }
      check_case(&tc, how, NULL);
      free_inputs(&tc);
    }
}
END_TEST

/* Plans the generator does not support fail with a message, not bad C. */
START_TEST(rejects_bad_plans) {
  test_rng r = test_rng_seed(60);
  TestCase tc = make_case("input A[i, j]\ns[i] = sum(j: A[i, j])\n", 0, &r, NULL, 0.5);
  hand_plan(&tc, PLAN_DENSE, NULL);
  PhysQuery *q = &tc.pp->q[0];
  int t = q->loops[0]; /* a reduced loop outside an output loop */
  q->loops[0] = q->loops[1];
  q->loops[1] = t;
  char *src = NULL;
  size_t len = 0;
  galley_error err;
  ck_assert_int_eq(cg_plan(tc.pp, &src, &len, &err), GALLEY_EINTERNAL);
  ck_assert_ptr_ne(strstr(err.msg, "query 0"), NULL);
  free(src);
  free_case(&tc);
  free_inputs(&tc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Plans of phys_default_plan, run by a tiny executor                  */
/* ------------------------------------------------------------------ */

/* The level kinds of every access, from the tensors it will read (the
 * planner may have filled them already; they must agree). */
static void set_kinds(PhysPlan *pp, const galley_tensor *const *inputs) {
  for (int k = 0; k < pp->nq; k++) {
    PhysQuery *q = &pp->q[k];
    for (int x = 0; x < q->nacc; x++) {
      PAccess *A = &q->acc[x];
      galley_format f;
      if (A->is_input) galley_tensor_format(inputs[A->tensor], &f);
      else f = pp->q[A->tensor].out_format;
      for (int l = 0; l < A->order; l++) A->kind[l] = f.kinds[l];
      A->w32 = A->is_input ? rt_tensor_widths(inputs[A->tensor]) : pp->q[A->tensor].out_w32;
    }
    if (q->kind == PQ_KERNEL) phys_choose_output(q); /* it follows the kinds */
  }
}

static const galley_tensor *access_tensor(const PAccess *A, const galley_tensor *const *inputs,
                                          galley_tensor **res) {
  return A->is_input ? inputs[A->tensor] : res[A->tensor];
}

/* Query k by kernel fn (or a transpose) into res[k]. */
static void run_query(const PhysPlan *pp, int k, kernel_fn fn,
                      const galley_tensor *const *inputs, galley_tensor **res) {
  const PhysQuery *q = &pp->q[k];
  if (q->kind == PQ_TRANSPOSE) {
    ck_assert_int_eq(galley_tensor_convert(access_tensor(&q->acc[0], inputs, res), &q->out_format, &res[k], NULL), GALLEY_OK);
    ck_assert_int_eq(rt_tensor_set_widths(res[k], q->out_w32, NULL), GALLEY_OK); /* as the executor */
    return;
  }
  const galley_tensor *in[64];
  int64_t dims[64], odims[GALLEY_MAX_ORDER], total = 1;
  for (int x = 0; x < q->nacc; x++) in[x] = access_tensor(&q->acc[x], inputs, res);
  for (int id = 0; id < q->nindices; id++) dims[id] = q->indices[id].dim;
  for (int m = 0; m < q->nout; m++) total *= odims[m] = dims[q->out[m]];
  galley_kernel_args a = {.in = (const struct galley_tensor *const *)in, .dims = dims};
  a.hi = q->nloops ? dims[q->loops[0]] : 0;
  /* a marked intersection's table, which the kernel must leave all 0 */
  int dm = phys_mark_loop(q);
  int64_t nmark = dm >= 0 ? dims[q->loops[dm]] : 0;
  if (dm >= 0) ck_assert_ptr_nonnull(a.mark = calloc((size_t)nmark + 1, sizeof *a.mark));
  galley_rt_sink sink = {.order = q->nout, .grow = sink_grow};
  if (q->out_kind == OUT_PATTERN) {
    res[k] = pattern_copy(q, in[q->pattern], odims);
    a.out = res[k];
    ck_assert_int_eq(fn(&a), 0);
  } else if (out_is_dense(q)) {
    double *vals = malloc(sizeof *vals * (size_t)(total + 1));
    for (int64_t e = 0; e < total; e++) vals[e] = q->out_fill;
    ck_assert_int_eq(galley_tensor_from_dense(q->nout, odims, vals, q->out_fill, &q->out_format, &res[k], NULL), GALLEY_OK);
    free(vals);
    a.out = res[k];
    ck_assert_int_eq(fn(&a), 0);
  } else {
    a.sink = &sink;
    ck_assert_int_eq(fn(&a), 0);
    ck_assert_int_eq(galley_tensor_from_coo(q->nout, odims, sink.n, sink.crd, sink.val, q->out_fill, &q->out_format, &res[k], NULL), GALLEY_OK);
    free(sink.crd);
    free(sink.val);
  }
  for (int64_t t = 0; t < nmark; t++) ck_assert_msg(a.mark[t] == 0, "query %d left its table dirty", k);
  free(a.mark);
  ck_assert_int_eq(rt_tensor_set_widths(res[k], q->out_w32, NULL), GALLEY_OK); /* as the executor */
}

/* Plan text with phys_default_plan over random inputs (every mode of
 * size 5, input kinds rotating by seed), run every query, compare the
 * outputs with the reference evaluator.  0 when the planner or the
 * reference refused the program (sizes that do not fit). */
static int check_default_plan(const char *text, uint64_t seed, JitBackend be) {
  Program *p = parse(text);
  test_rng r = test_rng_seed(seed);
  galley_tensor **inputs = calloc((size_t)p->ninputs + 1, sizeof *inputs);
  for (int k = 0; k < p->ninputs; k++) {
    int64_t dims[GALLEY_MAX_ORDER];
    galley_level_kind kinds[GALLEY_MAX_ORDER];
    for (int m = 0; m < p->inputs[k].order; m++) {
      dims[m] = 5;
      kinds[m] = ALL_KINDS[(seed + (uint64_t)(3 * k + m)) % 4];
    }
    inputs[k] = rand_tensor(&r, p->inputs[k].order, dims, 0.4, p->inputs[k].fill, kinds);
  }
  galley_tensor **ref = calloc((size_t)p->nqueries + 1, sizeof *ref);
  PhysPlan *pp = NULL;
  int ran = 0;
  galley_error err;
  if (refeval_run(p, (const galley_tensor *const *)inputs, ref, &err) != GALLEY_OK) goto done;
  galley_status st = phys_default_plan(p, (const galley_tensor *const *)inputs, &pp, &err);
  ck_assert_msg(st == GALLEY_OK, "plan: %s\n%s", err.msg, text);
  set_kinds(pp, (const galley_tensor *const *)inputs);
  char *src = gen_source(pp);
  char names[64][32];
  const char *syms[64];
  void *fns[64] = {NULL};
  int nsym = 0;
  ck_assert_int_le(pp->nq, 64);
  for (int k = 0; k < pp->nq; k++) {
    cg_kernel_name(k, names[k], sizeof names[k]);
    if (pp->q[k].kind == PQ_KERNEL) syms[nsym++] = names[k];
  }
  JitModule *mod = compile_jit(src, be, nsym, syms, fns);
  galley_tensor **res = calloc((size_t)pp->nq + 1, sizeof *res);
  for (int k = 0, f = 0; k < pp->nq; k++) {
    kernel_fn fn = pp->q[k].kind == PQ_KERNEL ? (kernel_fn)fns[f++] : NULL;
    ck_assert(pp->q[k].kind != PQ_KERNEL || fn != NULL);
    run_query(pp, k, fn, (const galley_tensor *const *)inputs, res);
  }
  for (int o = 0; o < pp->noutputs; o++) {
    const PhysQuery *q = &pp->q[pp->outputs[o]];
    const galley_tensor *got = res[pp->outputs[o]], *want = ref[q->user_query];
    int64_t total = 1, odims[GALLEY_MAX_ORDER], crd[GALLEY_MAX_ORDER];
    for (int m = 0; m < q->nout; m++) total *= odims[m] = galley_tensor_dim(want, m);
    for (int64_t e = 0; e < total; e++) {
      unflatten(e, q->nout, odims, crd);
      double g = galley_tensor_get(got, crd, NULL), w = galley_tensor_get(want, crd, NULL);
      ck_assert_msg(close_enough(g, w), "%s: output %d entry %lld: got %.17g want %.17g\n%s",
                    text, o, (long long)e, g, w, src);
    }
  }
  for (int k = 0; k < pp->nq; k++) galley_tensor_free(res[k]);
  free(res);
  jit_free(mod);
  free(src);
  ran = 1;
done:
  phys_plan_free(pp);
  for (int k = 0; k < p->nqueries; k++) galley_tensor_free(ref[k]);
  free(ref);
  for (int k = 0; k < p->ninputs; k++) galley_tensor_free(inputs[k]);
  free(inputs);
  program_free(p);
  return ran;
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = calloc(1, 1 << 16);
  size_t n = fread(buf, 1, (1 << 16) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

START_TEST(default_plans) {
  static const char *progs[] = {
      "input A[i, j], x[j]\ny[i] = sum(j: A[i, j] * x[j])\n",
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n",
      "input S[i, j], U[i, k], V[j, k]\nC[i, j] = S[i, j] * sum(k: U[i, k] * V[j, k])\n",
      "input A[i, j], B[i, j]\nC[i, j] = A[i, j] + B[j, i]\nD[i] = max(j: C[i, j] * A[i, j])\n",
      "input E[i, j]\ntriangles = sum(i, j, k: E[i, j] * E[j, k] * E[i, k]) / 6\n",
      "input X[i, j], theta[j]\nP[i] = sigmoid(sum(j: X[i, j] * theta[j]))\n"
      "positives = sum(i: P[i] > 0.5)\noutput P, positives\n",
      "input A[i, j] fill 2\nr[i] = prod(j: A[i, j] / 2) + sum(j: A[j, i])\n",
  };
  for (size_t k = 0; k < sizeof progs / sizeof progs[0]; k++)
    for (uint64_t seed = 0; seed < 4; seed++)
      ck_assert(check_default_plan(progs[k], 100 + 7 * k + seed, seed == 0 ? JIT_CLANG : JIT_TCC));
}
END_TEST

/* Every golden program whose inputs can all have size 5. */
START_TEST(default_plans_golden) {
  static const char *names[] = {"01_spmv", "02_matmul", "03_matrix_chain", "04_logistic_regression",
                                "10_row_max", "11_minplus", "12_exp_sparse", "16_user_pointwise",
                                "17_user_aggregate", "23_precedence", "29_sddmm", "30_bfs_step", "32_numbers"};
  int ran = 0;
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/%s.tin", test_src_dir(), names[k]);
    char *text = read_text(path);
    if (!text) continue;
    for (uint64_t seed = 0; seed < 2; seed++) ran += check_default_plan(text, 200 + seed, seed == 0 ? JIT_CLANG : JIT_TCC);
    free(text);
  }
  ck_assert_int_ge(ran, 10);
}
END_TEST

int main(void) {
  snprintf(clang_cache, sizeof clang_cache, "/tmp/galley_cg_cache_XXXXXX");
  if (!mkdtemp(clang_cache)) return EXIT_FAILURE;
  Suite *s = suite_create("codegen");
  TCase *tc = tcase_create("kernels");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, spmv);
  tcase_add_test(tc, elementwise_mul_lead);
  tcase_add_test(tc, elementwise_add_union);
  tcase_add_test(tc, exp_fill_one);
  tcase_add_test(tc, spgemm_dense_output);
  tcase_add_test(tc, sddmm);
  tcase_add_test(tc, max_min_partly_empty);
  tcase_add_test(tc, sum_with_fill);
  tcase_add_test(tc, prod_any_all);
  tcase_add_test(tc, user_defs);
  tcase_add_test(tc, repeated_index);
  tcase_add_test(tc, scalars);
  tcase_add_test(tc, order3);
  tcase_add_test(tc, sparse_outputs);
  tcase_add_test(tc, names_do_not_leak);
  tcase_add_test(tc, warning_free);
  tcase_add_test(tc, nonfinite_data);
  tcase_add_test(tc, rejects_bad_plans);
  tcase_add_test(tc, default_plans);
  tcase_add_test(tc, default_plans_golden);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", clang_cache);
  if (system(cmd) != 0) failed++;
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
