/*
 * test_phys.c -- physical plans and the default planner: exact printed
 * plans for the basic kernels, the structure behind them (merges,
 * protocols, loops, fills, accesses), phys_absent_value on hand-made
 * expressions, determinism and bind errors.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "galley.h"
#include "ir.h"
#include "phys.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static Program *parse(const char *text) {
  Program *p = NULL;
  char *diag = NULL;
  galley_error err;
  galley_status st = front_parse("t.tin", text, strlen(text), &p, &diag, &err);
  ck_assert_msg(st == GALLEY_OK, "parse failed: %s", diag ? diag : err.msg);
  free(diag);
  return p;
}

/* A tensor of the given dims from entries (coords entry after entry) in
 * the format given as text (NULL: default). */
static galley_tensor *tensor(int order, const int64_t *dims, int64_t nnz,
                             const int64_t *coords, double fill,
                             const char *fmt) {
  galley_format f;
  galley_error err;
  if (fmt)
    ck_assert_int_eq(galley_format_parse(fmt, order, &f, &err), GALLEY_OK);
  double vals[64];
  for (int64_t e = 0; e < nnz; e++)
    vals[e] = (double)(e + 2);
  galley_tensor *t = NULL;
  galley_status st = galley_tensor_from_coo(order, dims, nnz, coords, vals,
                                            fill, fmt ? &f : NULL, &t, &err);
  ck_assert_msg(st == GALLEY_OK, "tensor: %s", err.msg);
  return t;
}

/* 3x4 matrix with 3 entries; 4x5 with 5; vectors of 4 with 2 and 4. */
static const int64_t D34[] = {3, 4}, D45[] = {4, 5}, D55[] = {5, 5};
static const int64_t C3[] = {0, 1, 1, 3, 2, 0};
static const int64_t C5[] = {0, 0, 1, 2, 2, 4, 3, 1, 3, 3};
static const int64_t D4[] = {4}, D3[] = {3}, D5[] = {5}, V2[] = {1, 3},
                     V4[] = {0, 1, 2, 3};

/* Plan p with inputs; the printed plan (malloc()ed) in *text. */
static PhysPlan *plan_ok(const Program *p, const galley_tensor *const *in,
                         char **text) {
  PhysPlan *pp = NULL;
  galley_error err;
  galley_status st = phys_default_plan(p, in, &pp, &err);
  ck_assert_msg(st == GALLEY_OK, "plan: %s", err.msg);
  size_t len = 0;
  FILE *f = open_memstream(text, &len);
  phys_print(pp, f);
  fclose(f);
  return pp;
}

static void expect_plan(const Program *p, const galley_tensor *const *in,
                        const char *want) {
  char *text = NULL;
  PhysPlan *pp = plan_ok(p, in, &text);
  ck_assert_msg(strcmp(text, want) == 0, "plan\n%s\nwanted\n%s", text, want);
  free(text);
  phys_plan_free(pp);
}

/* Tensors used below (values 2, 3, 4, ... in entry order). */
static galley_tensor *mat_a(const char *fmt) { /* 3x4, 3 entries */
  return tensor(2, D34, 3, C3, 0, fmt);
}
static galley_tensor *mat_b(const char *fmt) { /* 4x5, 5 entries */
  return tensor(2, D45, 5, C5, 0, fmt);
}
static galley_tensor *mat_a5(const char *fmt) { /* 3x4, 5 entries */
  static const int64_t c[] = {0, 0, 0, 1, 1, 1, 1, 3, 2, 2};
  return tensor(2, D34, 5, c, 0, fmt);
}
static galley_tensor *sq(const char *fmt) { /* 5x5, 5 entries */
  return tensor(2, D55, 5, C5, 0, fmt);
}
static galley_tensor *vec4(const char *fmt) { /* 2 entries */
  return tensor(1, D4, 2, V2, 0, fmt);
}
static galley_tensor *vec4_full(const char *fmt) { /* 4 entries */
  return tensor(1, D4, 4, V4, 0, fmt);
}
static galley_tensor *vec3(const char *fmt) { /* 2 entries */
  static const int64_t c[] = {0, 2};
  return tensor(1, D3, 2, c, 0, fmt);
}
static galley_tensor *scalar(void) {
  return tensor(0, NULL, 1, NULL, 0, NULL);
}

static void free_all(galley_tensor **t, int n) {
  for (int k = 0; k < n; k++)
    galley_tensor_free(t[k]);
}

#define IN(t) ((const galley_tensor *const *)(t))

/* ------------------------------------------------------------------ */
/* Basic kernels                                                       */
/* ------------------------------------------------------------------ */

START_TEST(spmv) {
  Program *p = parse("input A[i,j], x[j]\ny[i] = A[i,j] * x[j]\noutput y\n");
  galley_tensor *in[] = {mat_a(NULL), vec4_full("dense")};
  expect_plan(p, IN(in),
              "Query(y[i], Mat(dense:0, Agg(+, j, Map(*, A[i::it,j::it], "
              "x[j::lu]))), loops(i:lead, j:lead), fill 0)\n"
              "Outputs(y)\n");
  char *text;
  PhysPlan *pp = plan_ok(p, IN(in), &text);
  free(text);
  ck_assert_int_eq(pp->nq, 1);
  const PhysQuery *q = &pp->q[0];
  ck_assert_int_eq(q->kind, PQ_KERNEL);
  ck_assert_str_eq(q->name, "y");
  ck_assert_int_eq(q->user_query, 0);
  ck_assert_int_eq(q->nloops, 2);
  ck_assert_int_eq(q->loops[0], q->out[0]);
  ck_assert_int_eq(q->loops[1], q->red[0]);
  ck_assert_str_eq(q->indices[q->loops[0]].name, "i");
  ck_assert_int_eq(q->indices[q->loops[0]].dim, 3);
  ck_assert_int_eq(q->indices[q->loops[1]].dim, 4);
  ck_assert_int_eq(q->merge[0], MERGE_LEAD);
  ck_assert_int_eq(q->merge[1], MERGE_LEAD);
  ck_assert_ptr_eq(q->agg, ops_find_agg(&p->ops, "sum"));
  ck_assert_int_eq(q->nred, 1);
  ck_assert_int_eq(q->nacc, 2);
  ck_assert_int_eq(q->acc[0].is_input, 1);
  ck_assert_int_eq(q->acc[0].tensor, 0);
  ck_assert_int_eq(q->acc[0].order, 2);
  ck_assert_int_eq(q->acc[0].level_idx[0], q->loops[0]);
  ck_assert_int_eq(q->acc[0].level_idx[1], q->loops[1]);
  ck_assert_int_eq(q->acc[0].proto[0], PROTO_ITERATE);
  ck_assert_int_eq(q->acc[0].proto[1], PROTO_ITERATE);
  ck_assert_int_eq(q->acc[1].tensor, 1);
  ck_assert_int_eq(q->acc[1].proto[0], PROTO_LOOKUP);
  ck_assert_int_eq(q->expr->kind, ND_MAP);
  ck_assert_int_eq(q->expr->args[0]->access, 0);
  ck_assert_int_eq(q->expr->args[1]->access, 1);
  /* the program's nodes are not touched */
  ck_assert_ptr_ne(q->expr, p->queries[0].expr->arg);
  ck_assert_int_eq(p->queries[0].expr->arg->args[1]->access, 0);
  ck_assert_int_eq(q->out_format.order, 1);
  ck_assert_int_eq(q->out_format.kinds[0], GALLEY_DENSE);
  ck_assert_int_eq(q->out_fill, 0);
  ck_assert_int_eq(pp->noutputs, 1);
  ck_assert_int_eq(pp->outputs[0], 0);
  ck_assert_str_eq(pp->output_names[0], "y");
  ck_assert_ptr_eq(pp->prog, p);
  phys_plan_free(pp);
  free_all(in, 2);
  program_free(p);
}
END_TEST

/* Loop order i, k, j: B (CSR) is read as B[j,k] with k outside j, so it
 * is transposed first; the j loop intersects A and the copy, A leads. */
START_TEST(matmul) {
  Program *p =
      parse("input A[i,j], B[j,k]\nC[i,k] = A[i,j] * B[j,k]\noutput C\n");
  galley_tensor *in[] = {mat_a(NULL), mat_b(NULL)};
  expect_plan(p, IN(in),
              "Query(_t0[j,k], Transpose(B, dense:1,list:0), fill 0)\n"
              "Query(C[i,k], Mat(dense:0,dense:1, Agg(+, j, Map(*, "
              "A[i::it,j::mk], _t0[j::it,k::it]))), loops(i:lead, k:lead, "
              "j:mark), fill 0)\n"
              "Outputs(C)\n");
  char *text;
  PhysPlan *pp = plan_ok(p, IN(in), &text);
  free(text);
  ck_assert_int_eq(pp->nq, 2);
  const PhysQuery *t = &pp->q[0], *q = &pp->q[1];
  ck_assert_int_eq(t->kind, PQ_TRANSPOSE);
  ck_assert_int_eq(t->user_query, -1);
  ck_assert_int_eq(t->nacc, 1);
  ck_assert_int_eq(t->acc[0].is_input, 1);
  ck_assert_int_eq(t->acc[0].tensor, 1);
  ck_assert_int_eq(t->out_format.mode_order[0], 1);
  ck_assert_int_eq(t->out_format.mode_order[1], 0);
  ck_assert_int_eq(t->out_format.kinds[0], GALLEY_DENSE);
  ck_assert_int_eq(t->out_format.kinds[1], GALLEY_LIST);
  ck_assert_int_eq(q->acc[1].is_input, 0);
  ck_assert_int_eq(q->acc[1].tensor, 0);
  /* levels of the copy: k then j, in loop order */
  ck_assert_int_eq(q->acc[1].level_idx[0], q->loops[1]);
  ck_assert_int_eq(q->acc[1].level_idx[1], q->loops[2]);
  ck_assert_int_eq(q->acc[1].proto[0], PROTO_ITERATE);
  /* A's row is scattered once per i and read by each of the 5 columns
   * k of B (phys_mark_cost 1.6 against a merge's 2) */
  ck_assert_int_eq(q->acc[1].proto[1], PROTO_ITERATE);
  ck_assert_int_eq(q->acc[0].proto[1], PROTO_MARK);
  ck_assert_int_eq(pp->outputs[0], 1);
  phys_plan_free(pp);
  free_all(in, 2);
  program_free(p);
}
END_TEST

/* An n x n matrix in dense,list storing `per_row` entries of each row
 * (columns (i + 1) .. (i + per_row) mod n). */
static galley_tensor *rows_of(int64_t n, int64_t per_row) {
  int64_t coords[2 * 64], dims[2] = {n, n}, nnz = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 1; k <= per_row; k++) {
      coords[2 * nnz] = i;
      coords[2 * nnz + 1] = (i + k) % n;
      nnz++;
    }
  /* coordinates in row-major order */
  for (int64_t a = 1; a < nnz; a++)
    for (int64_t b = a; b > 0 && (coords[2 * b - 2] > coords[2 * b] ||
                                  (coords[2 * b - 2] == coords[2 * b] &&
                                   coords[2 * b - 1] > coords[2 * b + 1]));
         b--) {
      int64_t r = coords[2 * b], c = coords[2 * b + 1];
      coords[2 * b] = coords[2 * b - 2];
      coords[2 * b + 1] = coords[2 * b - 1];
      coords[2 * b - 2] = r;
      coords[2 * b - 1] = c;
    }
  return tensor(2, dims, nnz, coords, 0, "dense,list");
}

/* An inner product C[i,k] = sum(j: A[i,j] * B[k,j]): A's row i is fixed
 * two loops out of j, so it is scattered into a table once per i and B's
 * rows walk it (MERGE_MARK, a sum: the table's zeros are added).  In a
 * triangle count the table of L's row i serves only the j of that row:
 * with rows of 2 the lists merge (phys_mark_cost 4.4 against 4), with
 * rows of 4 they are marked (6.8 against 8). */
START_TEST(marked_intersection) {
  Program *p = parse("input A[i,j], B[k,j]\nC[i,k] = A[i,j] * B[k,j]\n");
  galley_tensor *in[] = {rows_of(8, 4), rows_of(8, 4)};
  expect_plan(p, IN(in),
              "Query(C[i,k], Mat(dense:0,dense:1, Agg(+, j, Map(*, "
              "A[i::it,j::mk], B[k::it,j::it]))), loops(i:lead, k:lead, "
              "j:mark), fill 0)\n"
              "Outputs(C)\n");
  char *text;
  PhysPlan *pp = plan_ok(p, IN(in), &text);
  free(text);
  const PhysQuery *q = &pp->q[0];
  ck_assert_int_eq(q->merge[2], MERGE_MARK);
  ck_assert_int_eq(q->mark[2], 0);
  ck_assert_int_eq(q->acc[0].proto[1], PROTO_MARK);
  ck_assert_int_eq(q->acc[1].proto[1], PROTO_ITERATE);
  ck_assert_int_eq(q->mark_sum, 1);
  ck_assert_int_eq(phys_mark_loop(q), 2);
  ck_assert_int_eq(phys_mark_scatter_depth(q), 0);
  phys_plan_free(pp);
  free_all(in, 2);
  program_free(p);
  p = parse("input L[i,j]\nt = sum(i, j, k: L[i,j] * L[j,k] * L[i,k])\n");
  galley_tensor *few[] = {rows_of(8, 2)}, *more[] = {rows_of(8, 4)};
  pp = plan_ok(p, IN(few), &text);
  ck_assert_msg(strstr(text, "k:intersect") != NULL, "%s", text);
  ck_assert_int_eq(phys_mark_loop(&pp->q[0]), -1);
  free(text);
  phys_plan_free(pp);
  pp = plan_ok(p, IN(more), &text);
  ck_assert_msg(strstr(text, "k:mark") != NULL, "%s", text);
  ck_assert_int_eq(phys_mark_loop(&pp->q[0]), 2);
  free(text);
  phys_plan_free(pp);
  free_all(few, 1);
  free_all(more, 1);
  program_free(p);
}
END_TEST

START_TEST(elementwise_add_union) {
  Program *p =
      parse("input A[i,j], B[i,j]\nC[i,j] = A[i,j] + B[i,j]\noutput C\n");
  galley_tensor *in[] = {mat_a(NULL), mat_a5(NULL)};
  expect_plan(p, IN(in),
              "Query(C[i,j], Mat(dense:0,dense:1, Map(+, A[i::it,j::it], "
              "B[i::it,j::it])), loops(i:union, j:union), fill 0)\n"
              "Outputs(C)\n");
  free_all(in, 2);
  program_free(p);
}
END_TEST

/* Both are conjuncts: the one with fewer stored entries leads, whatever
 * its place in the expression. */
START_TEST(elementwise_mul_lead_sparser) {
  Program *p = parse("input A[i,j], B[i,j]\nC[i,j] = A[i,j] * B[i,j]\n"
                     "D[i,j] = B[i,j] * A[i,j]\noutput C, D\n");
  galley_tensor *in[] = {mat_a(NULL), mat_a5(NULL)};
  expect_plan(p, IN(in),
              "Query(C[i,j], Mat(dense:0,dense:1, Map(*, A[i::it,j::it], "
              "B[i::lu,j::it])), loops(i:lead, j:intersect), fill 0)\n"
              "Query(D[i,j], Mat(dense:0,dense:1, Map(*, B[i::lu,j::it], "
              "A[i::it,j::it])), loops(i:lead, j:intersect), fill 0)\n"
              "Outputs(C, D)\n");
  galley_tensor *in2[] = {mat_a5(NULL), mat_a(NULL)};
  expect_plan(p, IN(in2),
              "Query(C[i,j], Mat(dense:0,dense:1, Map(*, A[i::lu,j::it], "
              "B[i::it,j::it])), loops(i:lead, j:intersect), fill 0)\n"
              "Query(D[i,j], Mat(dense:0,dense:1, Map(*, B[i::it,j::it], "
              "A[i::lu,j::it])), loops(i:lead, j:intersect), fill 0)\n"
              "Outputs(C, D)\n");
  free_all(in, 2);
  free_all(in2, 2);
  program_free(p);
}
END_TEST

/* A sparse level leads over a dense one even with more entries. */
START_TEST(sparse_leads_over_dense) {
  Program *p = parse("input A[i,j], B[i,j]\nC[i,j] = A[i,j] * B[i,j]\n"
                     "output C\n");
  galley_tensor *in[] = {mat_a5(NULL), mat_a("dense,dense")};
  expect_plan(p, IN(in),
              "Query(C[i,j], Mat(dense:0,dense:1, Map(*, A[i::it,j::it], "
              "B[i::lu,j::lu])), loops(i:lead, j:lead), fill 0)\n"
              "Outputs(C)\n");
  galley_tensor *in2[] = {mat_a5("dense,dense"), mat_a("list,list")};
  expect_plan(p, IN(in2),
              "Query(C[i,j], Mat(dense:0,dense:1, Map(*, A[i::lu,j::lu], "
              "B[i::it,j::it])), loops(i:lead, j:lead), fill 0)\n"
              "Outputs(C)\n");
  free_all(in, 2);
  free_all(in2, 2);
  program_free(p);
}
END_TEST

/* exp(0) = 1 is a constant: A alone decides, so A leads and the result's
 * fill is 1 (what the skipped points hold). */
START_TEST(exp_leads) {
  Program *p = parse("input A[i,j]\nC[i,j] = exp(A[i,j])\noutput C\n");
  galley_tensor *in[] = {mat_a(NULL)};
  expect_plan(p, IN(in),
              "Query(C[i,j], Mat(dense:0,dense:1, Map(exp, A[i::it,j::it])), "
              "loops(i:lead, j:lead), fill 1)\n"
              "Outputs(C)\n");
  free_all(in, 1);
  program_free(p);
}
END_TEST

/* With A absent the summand is x[i], not a constant: j is dense. */
START_TEST(sum_plus_dense) {
  Program *p = parse("input A[i,j], x[i]\ny[i] = sum(j: A[i,j] + x[i])\n"
                     "output y\n");
  galley_tensor *in[] = {mat_a(NULL), vec3(NULL)};
  expect_plan(p, IN(in),
              "Query(y[i], Mat(dense:0, Agg(+, j, Map(+, A[i::it,j::lu], "
              "x[i::it]))), loops(i:union, j:dense), fill 0)\n"
              "Outputs(y)\n");
  char *text;
  PhysPlan *pp = plan_ok(p, IN(in), &text);
  free(text);
  ck_assert_int_eq(pp->q[0].merge[0], MERGE_UNION);
  ck_assert_int_eq(pp->q[0].merge[1], MERGE_DENSE);
  ck_assert_int_eq(pp->q[0].acc[0].proto[0], PROTO_ITERATE);
  ck_assert_int_eq(pp->q[0].acc[0].proto[1], PROTO_LOOKUP);
  ck_assert_int_eq(pp->q[0].acc[1].proto[0], PROTO_ITERATE);
  phys_plan_free(pp);
  free_all(in, 2);
  program_free(p);
}
END_TEST

/* min-plus: +inf annihilates +, so both operands are conjuncts; the
 * declared fill inf applies to tensors bound with fill 0. */
START_TEST(min_plus) {
  Program *p = parse("input D[i,j] fill inf, x[j] fill inf\n"
                     "y[i] = min(j: D[i,j] + x[j])\noutput y\n");
  galley_tensor *in[] = {mat_a5(NULL), vec4(NULL)};
  expect_plan(p, IN(in),
              "Query(y[i], Mat(dense:0, Agg(min, j, Map(+, D[i::it,j::it], "
              "x[j::it]))), loops(i:lead, j:intersect), fill inf)\n"
              "Outputs(y)\n");
  char *text;
  PhysPlan *pp = plan_ok(p, IN(in), &text);
  free(text);
  ck_assert(isinf(pp->q[0].acc[0].fill) && pp->q[0].acc[0].fill > 0);
  ck_assert(isinf(pp->q[0].acc[1].fill));
  phys_plan_free(pp);
  free_all(in, 2);
  program_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Lifting, aliases, outputs                                           */
/* ------------------------------------------------------------------ */

START_TEST(nested_aggregates) {
  Program *p = parse("input A[i,j], x[j]\n"
                     "y[i] = exp(sum(j: A[i,j] * x[j])) + sum(k: A[i,k])\n"
                     "z = sum(i: y[i] * y[i])\n"
                     "output z, y\n");
  galley_tensor *in[] = {mat_a(NULL), vec4(NULL)};
  expect_plan(p, IN(in),
              "Query(_t0[i], Mat(dense:0, Agg(+, j, Map(*, A[i::it,j::it], "
              "x[j::it]))), loops(i:lead, j:intersect), fill 0)\n"
              "Query(_t1[i], Mat(dense:0, Agg(+, k, A[i::it,k::it])), "
              "loops(i:lead, k:lead), fill 0)\n"
              "Query(y[i], Mat(dense:0, Map(+, Map(exp, _t0[i::it]), "
              "_t1[i::it])), loops(i:union), fill 1)\n"
              "Query(z, Mat(scalar, Agg(+, i, Map(*, y[i::it], y[i::it]))), "
              "loops(i:union), fill 3)\n"
              "Outputs(z, y)\n");
  char *text;
  PhysPlan *pp = plan_ok(p, IN(in), &text);
  free(text);
  ck_assert_int_eq(pp->nq, 4);
  for (int k = 0; k < 2; k++) {
    ck_assert_int_eq(pp->q[k].kind, PQ_KERNEL);
    ck_assert_int_eq(pp->q[k].user_query, -1);
    ck_assert_int_eq(pp->q[k].nout, 1);
  }
  ck_assert_int_eq(pp->q[2].user_query, 0);
  ck_assert_int_eq(pp->q[3].user_query, 1);
  ck_assert_ptr_null(pp->q[2].agg);
  ck_assert_int_eq(pp->q[2].nred, 0);
  /* y reads the lifted queries through aliases */
  ck_assert_int_eq(pp->q[2].acc[0].is_input, 0);
  ck_assert_int_eq(pp->q[2].acc[0].tensor, 0);
  ck_assert_int_eq(pp->q[2].acc[1].tensor, 1);
  ck_assert_int_eq(pp->q[2].expr->args[1]->kind, ND_ALIAS);
  /* z's alias names y's physical query */
  ck_assert_int_eq(pp->q[3].acc[0].tensor, 2);
  ck_assert(pp->q[3].acc[0].fill == 1);
  ck_assert_int_eq(pp->q[3].nout, 0);
  ck_assert_int_eq(pp->q[3].out_format.order, 0);
  ck_assert_int_eq(pp->noutputs, 2);
  ck_assert_int_eq(pp->outputs[0], 3);
  ck_assert_int_eq(pp->outputs[1], 2);
  ck_assert_str_eq(pp->output_names[0], "z");
  ck_assert_str_eq(pp->output_names[1], "y");
  /* every physical expression is free of aggregates */
  phys_plan_free(pp);
  free_all(in, 2);
  program_free(p);
}
END_TEST

/* A lifted aggregate's outputs: its free indices in order of first
 * appearance; the inner sum of a double aggregate is its own query. */
START_TEST(lifted_free_indices) {
  Program *p = parse("input A[i,j], B[j,k]\n"
                     "C[k,i] = max(j: B[j,k] * sum(l: A[i,l] * B[l,k]) + "
                     "A[i,j])\noutput C\n");
  galley_tensor *in[] = {tensor(2, D55, 5, C5, 0, NULL),
                         tensor(2, D55, 5, C5, 0, NULL)};
  char *text;
  PhysPlan *pp = plan_ok(p, IN(in), &text);
  ck_assert_msg(strstr(text, "Query(_t1[i,k], Mat(dense:0,dense:1, Agg(+, l, "
                             "Map(*, A[i::it,l::mk], _t0[l::it,k::it]))), "
                             "loops(i:lead, k:lead, l:mark), fill 0)\n"),
                "%s", text);
  ck_assert_int_eq(pp->q[1].nout, 2);
  ck_assert_str_eq(pp->q[1].indices[pp->q[1].out[0]].name, "i");
  ck_assert_str_eq(pp->q[1].indices[pp->q[1].out[1]].name, "k");
  free(text);
  phys_plan_free(pp);
  free_all(in, 2);
  program_free(p);
}
END_TEST

/* A program query read out of loop order is transposed too.  _t1 + 1 is
 * the constant 1 where _t1 is absent, so _t1 leads and C's fill is 1.
 * B is all dense, so its copy is too (a list copy would make every
 * lookup a search). */
START_TEST(alias_transposed) {
  Program *p = parse("input A[i,j]\nB[i,j] = A[i,j] * 2\nC[j,i] = B[i,j] + 1\n"
                     "output C\n");
  galley_tensor *in[] = {mat_a(NULL)};
  expect_plan(p, IN(in),
              "Query(B[i,j], Mat(dense:0,dense:1, Map(*, A[i::it,j::it], 2)), "
              "loops(i:lead, j:lead), fill 0)\n"
              "Query(_t1[i,j], Transpose(B, dense:1,dense:0), fill 0)\n"
              "Query(C[j,i], Mat(dense:0,dense:1, Map(+, _t1[i::it,j::it], 1)), "
              "loops(j:lead, i:lead), fill 1)\n"
              "Outputs(C)\n");
  free_all(in, 1);
  program_free(p);
}
END_TEST

/* Without an `output` statement: every result in query order. */
START_TEST(outputs_default_order) {
  Program *p = parse("input x[i]\na[i] = x[i] * 2\nb = sum(i: x[i])\n");
  galley_tensor *in[] = {vec4(NULL)};
  char *text;
  PhysPlan *pp = plan_ok(p, IN(in), &text);
  ck_assert_str_eq(text,
                   "Query(a[i], Mat(dense:0, Map(*, x[i::it], 2)), "
                   "loops(i:lead), fill 0)\n"
                   "Query(b, Mat(scalar, Agg(+, i, x[i::it])), loops(i:lead), "
                   "fill 0)\n"
                   "Outputs(a, b)\n");
  ck_assert_int_eq(pp->noutputs, 2);
  ck_assert_int_eq(pp->outputs[0], 0);
  ck_assert_int_eq(pp->outputs[1], 1);
  free(text);
  phys_plan_free(pp);
  free_all(in, 1);
  program_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Repeated indices, scalars, transposes                               */
/* ------------------------------------------------------------------ */

START_TEST(repeated_index) {
  Program *p = parse("input A[i,j]\nt = sum(i: A[i,i])\nd[i] = A[i,i] * 2\n"
                     "e[i,j] = A[i,i] + A[i,j]\noutput t, d, e\n");
  galley_tensor *in[] = {sq(NULL)};
  expect_plan(p, IN(in),
              "Query(t, Mat(scalar, Agg(+, i, A[i::it,i::lu])), "
              "loops(i:lead), fill 0)\n"
              "Query(d[i], Mat(dense:0, Map(*, A[i::it,i::lu], 2)), "
              "loops(i:lead), fill 0)\n"
              "Query(e[i,j], Mat(dense:0,dense:1, Map(+, A[i::it,i::lu], "
              "A[i::it,j::lu])), loops(i:union, j:dense), fill 0)\n"
              "Outputs(t, d, e)\n");
  char *text;
  PhysPlan *pp = plan_ok(p, IN(in), &text);
  free(text);
  const PAccess *a = &pp->q[0].acc[0];
  ck_assert_int_eq(a->level_idx[0], a->level_idx[1]);
  ck_assert_int_eq(a->proto[0], PROTO_ITERATE);
  ck_assert_int_eq(a->proto[1], PROTO_LOOKUP);
  ck_assert_int_eq(pp->q[0].nloops, 1);
  phys_plan_free(pp);
  free_all(in, 1);
  program_free(p);
}
END_TEST

START_TEST(scalars) {
  Program *p = parse("input A[i,j], s\nC[i,j] = A[i,j] * s\nt = s + 1\n"
                     "u = sum(i, j: A[i,j]) * s\noutput C, t, u\n");
  galley_tensor *in[] = {mat_a(NULL), scalar()};
  expect_plan(p, IN(in),
              "Query(C[i,j], Mat(dense:0,dense:1, Map(*, A[i::it,j::it], s)), "
              "loops(i:lead, j:lead), fill 0)\n"
              "Query(t, Mat(scalar, Map(+, s, 1)), loops(), fill 1)\n"
              "Query(_t2, Mat(scalar, Agg(+, i, j, A[i::it,j::it])), "
              "loops(i:lead, j:lead), fill 0)\n"
              "Query(u, Mat(scalar, Map(*, _t2, s)), loops(), fill 0)\n"
              "Outputs(C, t, u)\n");
  char *text;
  PhysPlan *pp = plan_ok(p, IN(in), &text);
  free(text);
  ck_assert_int_eq(pp->q[1].nloops, 0);
  ck_assert_int_eq(pp->q[1].nacc, 1);
  ck_assert_int_eq(pp->q[1].acc[0].order, 0);
  ck_assert_int_eq(pp->q[2].nred, 2);
  phys_plan_free(pp);
  free_all(in, 2);
  program_free(p);
}
END_TEST

/* A CSR input read as A[j,i] under loops i, j is copied to CSC once (both
 * accesses share the copy); a CSC input needs no copy. */
START_TEST(transposed_input) {
  Program *p = parse("input A[i,j]\nC[i,j] = A[j,i] + A[j,i] * 2\n"
                     "output C\n");
  galley_tensor *in[] = {sq(NULL)};
  expect_plan(p, IN(in),
              "Query(_t0[j,i], Transpose(A, dense:1,list:0), fill 0)\n"
              "Query(C[i,j], Mat(dense:0,dense:1, Map(+, _t0[j::it,i::it], "
              "Map(*, _t0[j::it,i::it], 2))), loops(i:union, j:union), "
              "fill 0)\n"
              "Outputs(C)\n");
  galley_tensor *in2[] = {sq("dense:1,list:0")};
  expect_plan(p, IN(in2),
              "Query(C[i,j], Mat(dense:0,dense:1, Map(+, A[j::it,i::it], "
              "Map(*, A[j::it,i::it], 2))), loops(i:union, j:union), "
              "fill 0)\n"
              "Outputs(C)\n");
  char *text;
  PhysPlan *pp = plan_ok(p, IN(in2), &text);
  free(text);
  /* CSC: level 0 holds mode 1 (i), level 1 mode 0 (j) */
  ck_assert_int_eq(pp->q[0].acc[0].level_idx[0], pp->q[0].loops[0]);
  ck_assert_int_eq(pp->q[0].acc[0].level_idx[1], pp->q[0].loops[1]);
  ck_assert_int_eq(pp->q[0].acc[0].is_input, 1);
  phys_plan_free(pp);
  free_all(in, 1);
  free_all(in2, 1);
  program_free(p);
}
END_TEST

/* Order 3: two accesses needing two different copies; equal sizes, so
 * the first access leads every loop. */
START_TEST(transposed_order3) {
  static const int64_t dims[] = {3, 3, 3};
  static const int64_t c[] = {0, 1, 2, 1, 1, 0, 2, 0, 1};
  Program *p = parse("input A[i,j,k]\nC[k,j,i] = A[i,j,k] * A[k,i,j]\n"
                     "output C\n");
  galley_tensor *in[] = {tensor(3, dims, 3, c, 0, NULL)};
  expect_plan(p, IN(in),
              "Query(_t0[i,j,k], Transpose(A, dense:2,list:1,list:0), fill 0)\n"
              "Query(_t1[k,i,j], Transpose(A, dense:0,list:2,list:1), fill 0)\n"
              "Query(C[k,j,i], Mat(dense:0,dense:1,dense:2, Map(*, "
              "_t0[i::it,j::it,k::it], _t1[k::lu,i::it,j::it])), "
              "loops(k:lead, j:intersect, i:intersect), fill 0)\n"
              "Outputs(C)\n");
  free_all(in, 1);
  program_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* phys_absent_value                                                   */
/* ------------------------------------------------------------------ */

/* A query with three accesses a0, a1, a2 (fills 0, 1, inf) for
 * hand-made expressions. */
typedef struct Hand {
  Arena *a;
  OpRegistry ops;
  PAccess acc[3];
  PhysQuery q;
} Hand;

static void hand_init(Hand *h) {
  memset(h, 0, sizeof *h);
  h->a = arena_new();
  ops_init(&h->ops);
  h->acc[0].fill = 0;
  h->acc[1].fill = 1;
  h->acc[2].fill = INFINITY;
  for (int k = 0; k < 3; k++)
    h->acc[k].finite = 1; /* stored values finite */
  h->q.nacc = 3;
  h->q.acc = h->acc;
}

static Node *acc_node(Hand *h, int k) {
  Node *n = plan_input(h->a, (Loc){0, 0}, k, 0, NULL);
  n->access = k;
  return n;
}

static Node *map2(Hand *h, const char *op, Node *x, Node *y) {
  Node *args[2] = {x, y};
  const Op *o = ops_find(&h->ops, op);
  ck_assert_msg(o != NULL, "no op %s", op);
  return plan_map(h->a, (Loc){0, 0}, o, 2, args);
}

static Node *map1(Hand *h, const char *op, Node *x) {
  const Op *o = ops_find(&h->ops, op);
  ck_assert_msg(o != NULL, "no op %s", op);
  return plan_map(h->a, (Loc){0, 0}, o, 1, &x);
}

static Node *cnst(Hand *h, double v) {
  return plan_const(h->a, (Loc){0, 0}, v);
}

/* The value with accesses in `mask` (bit k = access k) absent; returns
 * whether constant. */
static int absent(Hand *h, const Node *e, unsigned mask, double *v) {
  unsigned char ab[3] = {mask & 1, (mask >> 1) & 1, (mask >> 2) & 1};
  *v = -12345;
  return phys_absent_value(&h->q, e, ab, v);
}

START_TEST(absent_builtins) {
  Hand h;
  hand_init(&h);
  double v;
  Node *mul = map2(&h, "*", acc_node(&h, 0), acc_node(&h, 1));
  ck_assert(!absent(&h, mul, 0, &v));
  ck_assert(absent(&h, mul, 1, &v) && v == 0); /* 0 annihilates * */
  ck_assert(!absent(&h, mul, 2, &v));          /* 1 does not */
  ck_assert(absent(&h, mul, 3, &v) && v == 0);
  Node *add = map2(&h, "+", acc_node(&h, 0), acc_node(&h, 1));
  ck_assert(!absent(&h, add, 1, &v));
  ck_assert(!absent(&h, add, 2, &v));
  ck_assert(absent(&h, add, 3, &v) && v == 1);
  /* +inf annihilates + (min-plus) */
  Node *addinf = map2(&h, "+", acc_node(&h, 2), acc_node(&h, 0));
  ck_assert(absent(&h, addinf, 4, &v) && isinf(v) && v > 0);
  ck_assert(!absent(&h, addinf, 1, &v));
  Node *ex = map1(&h, "exp", acc_node(&h, 0));
  ck_assert(absent(&h, ex, 1, &v) && v == 1);
  ck_assert(!absent(&h, ex, 0, &v));
  /* constants fold; nested annihilation: (a1 - 1) * a0 with a1 absent */
  Node *nest = map2(&h, "*", map2(&h, "-", acc_node(&h, 1), cnst(&h, 1)),
                    acc_node(&h, 0));
  ck_assert(absent(&h, nest, 2, &v) && v == 0);
  ck_assert(absent(&h, nest, 1, &v) && v == 0);
  Node *nest2 = map2(&h, "*", map2(&h, "+", acc_node(&h, 1), cnst(&h, 1)),
                     acc_node(&h, 2));
  ck_assert(!absent(&h, nest2, 2, &v)); /* 2 * x */
  ck_assert(absent(&h, cnst(&h, 7), 0, &v) && v == 7);
  /* 0 * x is a zero with the sign of x: -1.5 / (x * 0) is -inf or +inf,
   * so it is not a constant; exp(x * 0) is 1 either way */
  Node *zx = map2(&h, "*", acc_node(&h, 1), acc_node(&h, 0));
  ck_assert(!absent(&h, map2(&h, "/", cnst(&h, -1.5), zx), 1, &v));
  ck_assert(absent(&h, map1(&h, "exp", zx), 1, &v) && v == 1);
  /* a known sign of zero is kept: 1 / -(0) is -inf */
  ck_assert(absent(&h, map2(&h, "/", cnst(&h, 1), map1(&h, "neg", acc_node(&h, 0))),
                   1, &v) && isinf(v) && v < 0);
  ck_assert(absent(&h, map2(&h, "+", zx, cnst(&h, 2)), 1, &v) && v == 2);
  ck_assert(absent(&h, map2(&h, "/", cnst(&h, 1), map2(&h, "&&", acc_node(&h, 1),
                                                       acc_node(&h, 0))),
                   1, &v) && isinf(v) && v > 0); /* && gives an exact +0 */
  /* max: +inf annihilates; min: -inf; &&: 0; ||: 1 */
  ck_assert(absent(&h, map2(&h, "max", acc_node(&h, 0), acc_node(&h, 2)), 4,
                   &v) && isinf(v));
  ck_assert(!absent(&h, map2(&h, "min", acc_node(&h, 0), acc_node(&h, 2)), 4,
                    &v));
  ck_assert(absent(&h, map2(&h, "&&", acc_node(&h, 0), acc_node(&h, 1)), 1,
                   &v) && v == 0);
  ck_assert(!absent(&h, map2(&h, "&&", acc_node(&h, 0), acc_node(&h, 1)), 2,
                    &v));
  ck_assert(absent(&h, map2(&h, "||", acc_node(&h, 0), acc_node(&h, 1)), 2,
                   &v) && v == 1);
  /* non-annihilating ops: / and - need every argument */
  ck_assert(!absent(&h, map2(&h, "/", acc_node(&h, 0), acc_node(&h, 1)), 1,
                    &v));
  ck_assert(absent(&h, map2(&h, "/", acc_node(&h, 0), acc_node(&h, 1)), 3,
                   &v) && v == 0);
  arena_free(h.a);
}
END_TEST

/* Variadic maps: any annihilating argument decides. */
START_TEST(absent_variadic) {
  Hand h;
  hand_init(&h);
  const Op *mul = ops_find(&h.ops, "*");
  ck_assert(mul->props & OP_VARIADIC);
  Node *args[3] = {acc_node(&h, 1), acc_node(&h, 2), acc_node(&h, 0)};
  Node *e = plan_map(h.a, (Loc){0, 0}, mul, 3, args);
  double v;
  /* access 2 reads its +inf fill where it is absent, so 0 does not
   * annihilate it (0 * inf is nan): not constant while it is unknown */
  ck_assert(!absent(&h, e, 1, &v));
  ck_assert(!absent(&h, e, 3, &v));
  ck_assert(!absent(&h, e, 5, &v)); /* 0 * inf: no shortcut (it is nan) */
  h.acc[2].fill = 2.5; /* a finite fill: now 0 annihilates */
  ck_assert(absent(&h, e, 1, &v) && v == 0);
  ck_assert(absent(&h, e, 3, &v) && v == 0);
  h.acc[2].finite = 0; /* ... unless a stored value may be inf or nan */
  ck_assert(!absent(&h, e, 1, &v));
  h.acc[2].finite = 1;
  h.acc[2].fill = INFINITY;
  ck_assert(!absent(&h, e, 2, &v));
  ck_assert(!absent(&h, e, 6, &v));
  ck_assert(absent(&h, e, 7, &v) && isnan(v)); /* 1 * inf * 0 */
  arena_free(h.a);
}
END_TEST

/* User ops: the declared annihilator is used; without one, only all
 * arguments constant give a constant (the body evaluated). */
START_TEST(absent_user_ops) {
  Program *p = parse("def f(x, y) = x * y * 3 [commutative, annihilator = 0]\n"
                     "def g(x, y) = x * y + 1\n"
                     "input a[i]\nr[i] = f(a[i], a[i]) + g(a[i], a[i])\n");
  Hand h;
  hand_init(&h);
  const Op *f = ops_find(&p->ops, "f"), *g = ops_find(&p->ops, "g");
  ck_assert(f && g);
  ck_assert(f->props & OP_HAS_ANNIHILATOR);
  ck_assert(!(g->props & OP_HAS_ANNIHILATOR));
  Node *fa[2] = {acc_node(&h, 1), acc_node(&h, 0)};
  Node *ga[2] = {acc_node(&h, 0), acc_node(&h, 1)};
  Node *fe = plan_map(h.a, (Loc){0, 0}, f, 2, fa);
  Node *ge = plan_map(h.a, (Loc){0, 0}, g, 2, ga);
  double v;
  ck_assert(absent(&h, fe, 1, &v) && v == 0);
  ck_assert(!absent(&h, fe, 2, &v));
  ck_assert(absent(&h, fe, 3, &v) && v == 0);
  ck_assert(!absent(&h, ge, 1, &v)); /* 0 * y + 1 is 1 but g declares nothing */
  ck_assert(absent(&h, ge, 3, &v) && v == 1);
  arena_free(h.a);
  program_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Determinism and bind errors                                         */
/* ------------------------------------------------------------------ */

START_TEST(deterministic) {
  const char *src = "input A[i,j], B[j,k], x[k]\n"
                    "C[k,i] = sum(j: A[i,j] * B[j,k]) + max(j: A[i,j])\n"
                    "y[i] = sum(k: C[k,i] * x[k])\n"
                    "t = sum(i: exp(y[i]))\noutput t, C\n";
  galley_tensor *in[] = {tensor(2, D55, 5, C5, 0, NULL),
                         tensor(2, D55, 5, C5, 0, "dense:1,list:0"),
                         tensor(1, D5, 2, V2, 0, NULL)};
  char *first = NULL;
  for (int round = 0; round < 3; round++) {
    Program *p = parse(src);
    char *text;
    PhysPlan *pp = plan_ok(p, IN(in), &text);
    if (!first)
      first = text;
    else {
      ck_assert_str_eq(text, first);
      free(text);
    }
    for (int n = 0; n < pp->nq; n++)
      ck_assert(pp->q[n].kind == PQ_TRANSPOSE || pp->q[n].expr->kind != ND_AGG);
    phys_plan_free(pp);
    program_free(p);
  }
  free(first);
  free_all(in, 3);
}
END_TEST

/* The planner's bind errors are the reference evaluator's, word for word. */
static void expect_same_error(const char *src, galley_tensor **in, int nin) {
  galley_program *gp = NULL;
  galley_error e1, e2;
  ck_assert_msg(galley_program_parse("t.tin", src, strlen(src), &gp, NULL,
                                     &e1) == GALLEY_OK,
                "%s", e1.msg);
  for (int k = 0; k < nin; k++)
    if (in[k])
      ck_assert_int_eq(galley_program_bind(gp, galley_program_input_name(gp, k),
                                           in[k], &e1),
                       GALLEY_OK);
  ck_assert_msg(galley_program_run_reference(gp, &e1) == GALLEY_EBIND,
                "%s: %s", src, e1.msg);
  Program *p = parse(src);
  PhysPlan *pp = (PhysPlan *)1;
  ck_assert_int_eq(phys_default_plan(p, IN(in), &pp, &e2), GALLEY_EBIND);
  ck_assert_ptr_null(pp);
  ck_assert_str_eq(e2.msg, e1.msg);
  ck_assert_int_eq(e2.line, e1.line);
  ck_assert_int_eq(e2.col, e1.col);
  program_free(p);
  galley_program_free(gp);
}

START_TEST(bind_errors) {
  galley_tensor *a = mat_a(NULL), *b = mat_b(NULL), *x4 = vec4(NULL),
                *x3 = vec3(NULL);
  galley_tensor *in1[] = {a, x3};
  expect_same_error("input A[i,j], x[j]\ny[i] = A[i,j] * x[j]\n", in1, 2);
  galley_tensor *in2[] = {a, a};
  expect_same_error("input A[i,j], B[j,k]\nC[i,k] = A[i,j] * B[j,k]\n", in2, 2);
  galley_tensor *in3[] = {a};
  expect_same_error("input A[i,j]\ndim i = 7\nC[i,j] = A[i,j]\n", in3, 1);
  expect_same_error("input A[i,j]\nt = sum(i: A[i,i])\n", in3, 1);
  galley_tensor *in5[] = {a, x4};
  expect_same_error("input A[i,j], x[j]\ny[i] = A[i,j] * x[j]\n"
                    "z[j] = y[j] + x[j]\n", in5, 2);
  galley_tensor *in6[] = {a, NULL};
  expect_same_error("input A[i,j], x[j]\ny[i] = A[i,j] * x[j]\n", in6, 2);
  /* a bound fill that is neither 0 nor the declared one */
  galley_tensor *one = tensor(1, D4, 2, V2, 1, NULL);
  galley_tensor *in7[] = {one};
  expect_same_error("input x[i] fill 2\ny[i] = x[i]\n", in7, 1);
  /* order mismatch (the API refuses it at bind; the planner at plan) */
  Program *p = parse("input x[i]\ny[i] = x[i]\n");
  PhysPlan *pp;
  galley_error err;
  galley_tensor *in8[] = {a};
  ck_assert_int_eq(phys_default_plan(p, IN(in8), &pp, &err), GALLEY_EBIND);
  ck_assert_str_eq(err.msg, "t.tin:1:7: error: input 'x' is declared with 1 "
                            "mode but the bound tensor has 2");
  ck_assert_int_eq(phys_default_plan(p, NULL, &pp, &err), GALLEY_EBIND);
  ck_assert_str_eq(err.msg, "t.tin:1:7: error: input 'x' is not bound");
  program_free(p);
  galley_tensor *all[] = {a, b, x4, x3, one};
  free_all(all, 5);
}
END_TEST

int main(void) {
  Suite *s = suite_create("phys");
  TCase *tc = tcase_create("kernels");
  tcase_add_test(tc, spmv);
  tcase_add_test(tc, matmul);
  tcase_add_test(tc, marked_intersection);
  tcase_add_test(tc, elementwise_add_union);
  tcase_add_test(tc, elementwise_mul_lead_sparser);
  tcase_add_test(tc, sparse_leads_over_dense);
  tcase_add_test(tc, exp_leads);
  tcase_add_test(tc, sum_plus_dense);
  tcase_add_test(tc, min_plus);
  suite_add_tcase(s, tc);
  tc = tcase_create("structure");
  tcase_add_test(tc, nested_aggregates);
  tcase_add_test(tc, lifted_free_indices);
  tcase_add_test(tc, alias_transposed);
  tcase_add_test(tc, outputs_default_order);
  tcase_add_test(tc, repeated_index);
  tcase_add_test(tc, scalars);
  tcase_add_test(tc, transposed_input);
  tcase_add_test(tc, transposed_order3);
  suite_add_tcase(s, tc);
  tc = tcase_create("absent");
  tcase_add_test(tc, absent_builtins);
  tcase_add_test(tc, absent_variadic);
  tcase_add_test(tc, absent_user_ops);
  suite_add_tcase(s, tc);
  tc = tcase_create("bind");
  tcase_add_test(tc, deterministic);
  tcase_add_test(tc, bind_errors);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
