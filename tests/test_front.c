/*
 * test_front.c -- the .tin front end: lexer, parser, semantic checks.
 *
 * Error cases are a table of (program, complete diagnostics text): the
 * exact messages, their order, the source line and the caret.  Good
 * programs are checked through the input-plan printer and by walking the
 * Program (kinds, ops, index ids, where the implicit sum goes, dims,
 * outputs, user ops).
 */
#define _GNU_SOURCE /* open_memstream in older glibc headers */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "galley.h"
#include "ir.h"
#include "testutil.h"

/* Parse src as "t.tin"; the diagnostics text ("" on success). */
static char *diagnostics_of(const char *src) {
  Program *p = NULL;
  char *diags = NULL;
  galley_error err;
  galley_status st = front_parse("t.tin", src, strlen(src), &p, &diags, &err);
  if (st == GALLEY_OK) {
    ck_assert_ptr_null(diags);
    program_free(p);
    return strdup("");
  }
  ck_assert_int_eq(st, GALLEY_EPROGRAM);
  ck_assert_ptr_null(p);
  ck_assert_ptr_nonnull(diags);
  /* err holds the first diagnostic's first line */
  size_t n = strcspn(diags, "\n");
  ck_assert_uint_eq(strlen(err.msg), n);
  ck_assert(strncmp(err.msg, diags, n) == 0);
  return diags;
}

/* Parse a program that must be correct. */
static Program *parse_ok(const char *src) {
  Program *p = NULL;
  char *diags = NULL;
  galley_error err;
  galley_status st = front_parse("t.tin", src, strlen(src), &p, &diags, &err);
  if (st != GALLEY_OK)
    ck_abort_msg("unexpected failure on\n%s\n%s", src, diags ? diags : "");
  ck_assert_ptr_null(diags);
  ck_assert_int_eq(err.status, GALLEY_OK);
  return p;
}

/* The printed input plan of a correct program. */
static char *plan_of(const char *src) {
  Program *p = parse_ok(src);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ck_assert_ptr_nonnull(f);
  plan_print(p, f);
  fclose(f);
  program_free(p);
  return buf;
}

/* ---- errors, by exact diagnostics ---- */

typedef struct ErrCase {
  const char *src;
  const char *diags;
} ErrCase;

static const ErrCase err_cases[] = {
    {"input A[i, j]\n"
     "C[i] = A[i, j, k]",
     "t.tin:2:8: error: 'A' has 2 modes but is used with 3 indices\n"
     "C[i] = A[i, j, k]\n"
     "       ^\n"},
    {"input alpha\n"
     "t = alpha[i]",
     "t.tin:2:5: error: 'alpha' is a scalar and takes no indices\n"
     "t = alpha[i]\n"
     "    ^\n"},
    {"input A[i, j]\n"
     "t = A + 1",
     "t.tin:2:5: error: 'A' has 2 modes but is used without indices\n"
     "t = A + 1\n"
     "    ^\n"},
    {"input A[i]\n"
     "C[i] = B[i]",
     "t.tin:2:8: error: unknown tensor 'B'\n"
     "C[i] = B[i]\n"
     "       ^\n"},
    {"t = x + 1",
     "t.tin:1:5: error: unknown name 'x'\n"
     "t = x + 1\n"
     "    ^\n"},
    /* an unknown name is reported once, at its first use */
    {"t = sum(i, j: E[i,j] * E[j,i]) + x * x",
     "t.tin:1:15: error: unknown tensor 'E'\n"
     "t = sum(i, j: E[i,j] * E[j,i]) + x * x\n"
     "              ^\n"
     "t.tin:1:34: error: unknown name 'x'\n"
     "t = sum(i, j: E[i,j] * E[j,i]) + x * x\n"
     "                                 ^\n"},
    /* a tensor declared by a later statement says where */
    {"t = sum(i: v[i]) + w\n"
     "input v[i]\n"
     "w = 2",
     "t.tin:1:12: error: tensor 'v' is used before its declaration at 2:7\n"
     "t = sum(i: v[i]) + w\n"
     "           ^\n"
     "t.tin:1:20: error: name 'w' is used before its declaration at 3:1\n"
     "t = sum(i: v[i]) + w\n"
     "                   ^\n"},
    {"input A[i]\n"
     "C[i] = foo(A[i])",
     "t.tin:2:8: error: unknown function 'foo'\n"
     "C[i] = foo(A[i])\n"
     "       ^\n"},
    {"input A[i]\n"
     "C[i] = exp(A[i], 2)",
     "t.tin:2:8: error: 'exp' takes 1 argument but is given 2\n"
     "C[i] = exp(A[i], 2)\n"
     "       ^\n"},
    {"input A[i]\n"
     "C[i] = max(A[i])",
     "t.tin:2:8: error: 'max' takes at least 2 arguments but is given 1\n"
     "C[i] = max(A[i])\n"
     "       ^\n"},
    {"input A[i]\n"
     "C[i] = ifelse(A[i], 1)",
     "t.tin:2:8: error: 'ifelse' takes 3 arguments but is given 2\n"
     "C[i] = ifelse(A[i], 1)\n"
     "       ^\n"},
    {"input A[i]\n"
     "t = mean(i: A[i])",
     "t.tin:2:5: error: unknown aggregate 'mean'; the aggregates are sum, "
     "prod, max, min, any, all, count and defs of two parameters declared "
     "associative and commutative with an identity\n"
     "t = mean(i: A[i])\n"
     "    ^\n"},
    {"input A[i]\n"
     "t = exp(i: A[i])",
     "t.tin:2:5: error: 'exp' is not an aggregate (the aggregates are sum, "
     "prod, max, min, any, all, count and defs of two parameters declared "
     "associative and commutative with an identity)\n"
     "t = exp(i: A[i])\n"
     "    ^\n"},
    {"input A[i]\n"
     "t = sum(A[i])",
     "t.tin:2:5: error: 'sum' is an aggregate; write sum(INDEX, ...: EXPR)\n"
     "t = sum(A[i])\n"
     "    ^\n"},
    {"input A[i]\n"
     "t = A(i)",
     "t.tin:2:5: error: 'A' is a tensor; index it with [ ], not ( )\n"
     "t = A(i)\n"
     "    ^\n"},
    {"input A[i]\n"
     "C[i, j] = A[i]",
     "t.tin:2:6: error: index 'j' on the left does not occur on the right and has no dim\n"
     "C[i, j] = A[i]\n"
     "     ^\n"},
    {"input A[i]\n"
     "C[i, i] = A[i]",
     "t.tin:2:6: error: index 'i' is repeated on the left\n"
     "C[i, i] = A[i]\n"
     "     ^\n"},
    {"input A[i]\n"
     "C[i] = sum(i: A[i])",
     "t.tin:2:3: error: index 'i' on the left does not occur on the right and has no dim\n"
     "C[i] = sum(i: A[i])\n"
     "  ^\n"},
    {"input A[i]\n"
     "t = sum(i, i: A[i])",
     "t.tin:2:12: error: index 'i' is listed twice in 'sum'\n"
     "t = sum(i, i: A[i])\n"
     "           ^\n"},
    {"t = sum(n: 1)",
     "t.tin:1:9: error: cannot infer the size of index 'n': it indexes no "
     "tensor and has no dim (add 'dim n = N' to give it the size N)\n"
     "t = sum(n: 1)\n"
     "        ^\n"},
    {"input A[i]\n"
     "t = sum(i, n: A[i])",
     "t.tin:2:12: error: cannot infer the size of index 'n': it indexes no "
     "tensor and has no dim (add 'dim n = N' to give it the size N)\n"
     "t = sum(i, n: A[i])\n"
     "           ^\n"},
    {"input A[i]\n"
     "input A[j]",
     "t.tin:2:7: error: 'A' is already defined (an input at 1:7)\n"
     "input A[j]\n"
     "      ^\n"},
    {"input A[i]\n"
     "A = 1",
     "t.tin:2:1: error: 'A' is already defined (an input at 1:7)\n"
     "A = 1\n"
     "^\n"},
    {"dim n = 3\n"
     "def n(x) = x",
     "t.tin:2:5: error: 'n' is already defined (a dim at 1:5)\n"
     "def n(x) = x\n"
     "    ^\n"},
    {"def f(x) = x\n"
     "f[i] = 1",
     "t.tin:2:1: error: 'f' is already defined (a def at 1:5)\n"
     "f[i] = 1\n"
     "^\n"},
    {"input A[i]\n"
     "output Z",
     "t.tin:2:8: error: unknown query 'Z' in output\n"
     "output Z\n"
     "       ^\n"},
    {"input A[i]\n"
     "C[i] = A[i]\n"
     "output A",
     "t.tin:3:8: error: 'A' is an input, not a query\n"
     "output A\n"
     "       ^\n"},
    {"input A[i]\n"
     "C[i] = A[i]\n"
     "output C, C",
     "t.tin:3:11: error: 'C' is already an output\n"
     "output C, C\n"
     "          ^\n"},
    {"def f(x, y) = x - y\n"
     "input A[i]\n"
     "t = f(i: A[i])",
     "t.tin:3:5: error: 'f' cannot be used as an aggregate: it must be declared associative and commutative with an identity (missing: associative, commutative, identity)\n"
     "t = f(i: A[i])\n"
     "    ^\n"},
    {"def f(x, y) = x + y [associative, commutative]\n"
     "input A[i]\n"
     "t = f(i: A[i])",
     "t.tin:3:5: error: 'f' cannot be used as an aggregate: it must be declared associative and commutative with an identity (missing: identity)\n"
     "t = f(i: A[i])\n"
     "    ^\n"},
    {"def f(x) = x + 1\n"
     "input A[i]\n"
     "t = f(i: A[i])",
     "t.tin:3:5: error: 'f' cannot be used as an aggregate: it takes 1 argument, not 2\n"
     "t = f(i: A[i])\n"
     "    ^\n"},
    {"def f(x, y) = x + y [associative, associative]",
     "t.tin:1:35: error: property 'associative' is listed twice\n"
     "def f(x, y) = x + y [associative, associative]\n"
     "                                  ^\n"},
    {"def f(x, y) = x * y [identity = 1, annihilator = 1]",
     "t.tin:1:36: error: identity and annihilator cannot both be 1 (f(e, x) would be both x and e)\n"
     "def f(x, y) = x * y [identity = 1, annihilator = 1]\n"
     "                                   ^\n"},
    {"def f(x, y) = x + y [commutative, sorted]",
     "t.tin:1:35: error: unknown property 'sorted' (expected associative, commutative, idempotent, identity = V, annihilator = V or distributes over OP)\n"
     "def f(x, y) = x + y [commutative, sorted]\n"
     "                                  ^\n"},
    {"def f(x, y) = x * y [distributes over plus]",
     "t.tin:1:39: error: unknown operator 'plus' after 'distributes over'\n"
     "def f(x, y) = x * y [distributes over plus]\n"
     "                                      ^\n"},
    {"def f(x, y) = x * y [distributes over exp]",
     "t.tin:1:39: error: 'exp' is not a binary operator\n"
     "def f(x, y) = x * y [distributes over exp]\n"
     "                                      ^\n"},
    {"def f(x) = x [commutative]",
     "t.tin:1:14: error: properties need a def of two parameters, but 'f' has 1\n"
     "def f(x) = x [commutative]\n"
     "             ^\n"},
    {"dim n = -3",
     "t.tin:1:9: error: the size of a dim must be a non-negative integer, not -3\n"
     "dim n = -3\n"
     "        ^\n"},
    {"dim n = 2.5",
     "t.tin:1:9: error: the size of a dim must be a non-negative integer, not 2.5\n"
     "dim n = 2.5\n"
     "        ^\n"},
    {"dim n = inf",
     "t.tin:1:9: error: the size of a dim must be a non-negative integer, not inf\n"
     "dim n = inf\n"
     "        ^\n"},
    {"def f(x, y) = x + z",
     "t.tin:1:19: error: 'z' is not a parameter of 'f'\n"
     "def f(x, y) = x + z\n"
     "                  ^\n"},
    {"def f(x, x) = x",
     "t.tin:1:10: error: parameter 'x' is listed twice\n"
     "def f(x, x) = x\n"
     "         ^\n"},
    {"def f(x, y) = x - y [commutative]",
     "t.tin:1:22: error: 'f' is declared commutative, but f(-2, -0.5) = -1.5 and f(-0.5, -2) = 1.5\n"
     "def f(x, y) = x - y [commutative]\n"
     "                     ^\n"},
    {"def f(x, y) = x - y [associative]",
     "t.tin:1:22: error: 'f' is declared associative, but f(f(-2, -2), -2) = 2 and f(-2, f(-2, -2)) = -2\n"
     "def f(x, y) = x - y [associative]\n"
     "                     ^\n"},
    {"def f(x, y) = x + y [idempotent]",
     "t.tin:1:22: error: 'f' is declared idempotent, but f(-2, -2) = -4\n"
     "def f(x, y) = x + y [idempotent]\n"
     "                     ^\n"},
    {"def f(x, y) = max(x, y) [identity = 0]",
     "t.tin:1:26: error: 'f' is declared with identity 0, but f(0, -2) = 0\n"
     "def f(x, y) = max(x, y) [identity = 0]\n"
     "                         ^\n"},
    {"def f(x, y) = x + y [annihilator = 0]",
     "t.tin:1:22: error: 'f' is declared with annihilator 0, but f(0, -2) = -2\n"
     "def f(x, y) = x + y [annihilator = 0]\n"
     "                     ^\n"},
    {"def f(x, y) = x + y [distributes over *]",
     "t.tin:1:22: error: 'f' is declared to distribute over '*', but f(-2, *(-2, -2)) = 2 and *(f(-2, -2), f(-2, -2)) = 16\n"
     "def f(x, y) = x + y [distributes over *]\n"
     "                     ^\n"},
    {"def exp(x) = x",
     "t.tin:1:5: error: 'exp' is a built-in function and cannot be redefined\n"
     "def exp(x) = x\n"
     "    ^\n"},
    {"def sum(x, y) = x + y",
     "t.tin:1:5: error: 'sum' is a built-in aggregate and cannot be redefined\n"
     "def sum(x, y) = x + y\n"
     "    ^\n"},
    {"input A[i, j\n"
     "C[i] = A[i, j]",
     "t.tin:1:14: error: expected ',' or ']' to close the '[' at 1:8, found "
     "'C' on a later line\n"
     "input A[i, j\n"
     "             ^\n"},
    {"input A[i]\n"
     "C[i] = (A[i] + 1",
     "t.tin:2:8: error: unclosed '(' at end of input\n"
     "C[i] = (A[i] + 1\n"
     "       ^\n"},
    {"input A[i]\n"
     "C[i] = A[i] +\n",
     "t.tin:2:14: error: expected an expression, found end of line\n"
     "C[i] = A[i] +\n"
     "             ^\n"},
    {"input A[i]\n"
     "C[i] = A[i] A[i]",
     "t.tin:2:13: error: unexpected 'A'\n"
     "C[i] = A[i] A[i]\n"
     "            ^\n"},
    {"input A[i]\n"
     "C[i] = A[i] $ 2",
     "t.tin:2:13: error: unexpected character '$'\n"
     "C[i] = A[i] $ 2\n"
     "            ^\n"},
    {"input A[i]\n"
     "C[i] = A[i] & A[i]",
     "t.tin:2:13: error: unexpected character '&' (did you mean '&&'?)\n"
     "C[i] = A[i] & A[i]\n"
     "            ^\n"},
    {"t = 1e",
     "t.tin:1:5: error: malformed number '1e'\n"
     "t = 1e\n"
     "    ^\n"},
    /* an empty text (length 0, an empty file) or one of comments only */
    {"",
     "t.tin:1:1: error: the program is empty: it has no statements\n"
     "\n"
     "^\n"},
    {"# a comment\n\n",
     "t.tin:1:1: error: the program is empty: it has no statements\n"
     "# a comment\n"
     "^\n"},
    /* did you mean: the nearest known name of the same kind */
    {"input Amat[i, j]\n"
     "B[i] = Amt[i, j]\n"
     "C = summ(i: B[i])\n"
     "D[i] = exq(Amat[i, i])\n"
     "E = SUM(i: B[i]) + Bq\n"
     "output Cc",
     "t.tin:2:8: error: unknown tensor 'Amt' (did you mean 'Amat'?)\n"
     "B[i] = Amt[i, j]\n"
     "       ^\n"
     "t.tin:3:5: error: unknown aggregate 'summ' (did you mean 'sum'?); the "
     "aggregates are sum, prod, max, min, any, all, count and defs of two "
     "parameters declared associative and commutative with an identity\n"
     "C = summ(i: B[i])\n"
     "    ^\n"
     "t.tin:4:8: error: unknown function 'exq' (did you mean 'exp'?)\n"
     "D[i] = exq(Amat[i, i])\n"
     "       ^\n"
     "t.tin:5:5: error: unknown aggregate 'SUM' (did you mean 'sum'?); the "
     "aggregates are sum, prod, max, min, any, all, count and defs of two "
     "parameters declared associative and commutative with an identity\n"
     "E = SUM(i: B[i]) + Bq\n"
     "    ^\n"
     "t.tin:5:20: error: unknown name 'Bq' (did you mean 'B'?)\n"
     "E = SUM(i: B[i]) + Bq\n"
     "                   ^\n"
     "t.tin:6:8: error: unknown query 'Cc' in output (did you mean 'C'?)\n"
     "output Cc\n"
     "       ^\n"},
    /* defs are suggested too, and nothing far away */
    {"def smooth(x) = x * x\n"
     "t = smoth(2) + mean(3)",
     "t.tin:2:5: error: unknown function 'smoth' (did you mean 'smooth'?)\n"
     "t = smoth(2) + mean(3)\n"
     "    ^\n"
     "t.tin:2:16: error: unknown function 'mean'\n"
     "t = smoth(2) + mean(3)\n"
     "               ^\n"},
    /* count is an aggregate, not a function */
    {"t = count(3)",
     "t.tin:1:5: error: 'count' is an aggregate; write count(INDEX, ...: "
     "EXPR)\n"
     "t = count(3)\n"
     "    ^\n"},
    /* a missing ')' found on the next line: reported where it is missing,
     * naming the '(' left open */
    {"input A[i, j]\n"
     "s = sum(i, j: exp(A[i, j]\n"
     "t = 1",
     "t.tin:2:27: error: expected ',' or ')' to close the '(' at 2:18, found "
     "'t' on a later line\n"
     "s = sum(i, j: exp(A[i, j]\n"
     "                          ^\n"},
    {"t = 1e999",
     "t.tin:1:5: error: number '1e999' is too large for a double (the "
     "largest is about 1.8e308; write inf for infinity)\n"
     "t = 1e999\n"
     "    ^\n"},
    {"= 3",
     "t.tin:1:1: error: unexpected '='\n"
     "= 3\n"
     "^\n"},
    {"input 3",
     "t.tin:1:7: error: expected an input name, found '3'\n"
     "input 3\n"
     "      ^\n"},
    {"C[0] = 1",
     "t.tin:1:3: error: expected an index name, found '0'\n"
     "C[0] = 1\n"
     "  ^\n"},
    {"def f(x, y) = x + y [identity 0]",
     "t.tin:1:31: error: expected '=', found '0'\n"
     "def f(x, y) = x + y [identity 0]\n"
     "                              ^\n"},
    {"def f(x, y) = x + y [distributes under +]",
     "t.tin:1:34: error: expected 'over', found 'under'\n"
     "def f(x, y) = x + y [distributes under +]\n"
     "                                 ^\n"},
    {"t = 1)",
     "t.tin:1:6: error: unexpected ')'\n"
     "t = 1)\n"
     "     ^\n"},
    {"input A[i]\n"
     "input B[i]\n"
     "C[i] = A[i] * X[i]\n"
     "D[i] = C[i, j] + B\n"
     "output C, E",
     "t.tin:3:15: error: unknown tensor 'X'\n"
     "C[i] = A[i] * X[i]\n"
     "              ^\n"
     "t.tin:4:8: error: 'C' has 1 mode but is used with 2 indices\n"
     "D[i] = C[i, j] + B\n"
     "       ^\n"
     "t.tin:4:18: error: 'B' has 1 mode but is used without indices\n"
     "D[i] = C[i, j] + B\n"
     "                 ^\n"
     "t.tin:5:11: error: unknown query 'E' in output\n"
     "output C, E\n"
     "          ^\n"},
    {"input A[i, j]\n"
     "C[i = A[i, j]\n"
     "D[i] = C[i]\n"
     "E[i] = D[i] + F[i]",
     "t.tin:2:5: error: expected ',' or ']' to close the '[' at 2:2, found "
     "'='\n"
     "C[i = A[i, j]\n"
     "    ^\n"
     "t.tin:4:15: error: unknown tensor 'F'\n"
     "E[i] = D[i] + F[i]\n"
     "              ^\n"},
    {"def f(x, y) = x + [associative]\n"
     "t = f(1, 2, 3)\n"
     "u = g(1)",
     "t.tin:1:19: error: expected an expression, found '['\n"
     "def f(x, y) = x + [associative]\n"
     "                  ^\n"
     "t.tin:3:5: error: unknown function 'g'\n"
     "u = g(1)\n"
     "    ^\n"},
    {"input A[i]\n"
     "t = sum(i: A[i]\n",
     "t.tin:2:8: error: unclosed '(' at end of input\n"
     "t = sum(i: A[i]\n"
     "       ^\n"},
    {"def f(x, y) = sum(i: x)",
     "t.tin:1:15: error: an aggregate cannot be used in the body of def 'f'\n"
     "def f(x, y) = sum(i: x)\n"
     "              ^\n"},
    {"input A[i]\n"
     "def f(x) = A",
     "t.tin:2:12: error: 'A' is not a parameter of 'f'\n"
     "def f(x) = A\n"
     "           ^\n"},
    {"input A[i]\n"
     "C[i] = A[i] fill 2",
     "t.tin:2:13: error: unexpected 'fill'\n"
     "C[i] = A[i] fill 2\n"
     "            ^\n"},
    {"output",
     "t.tin:1:7: error: expected a query name, found end of input\n"
     "output\n"
     "      ^\n"},
    {"input A[i] fill",
     "t.tin:1:16: error: expected a number, found end of input\n"
     "input A[i] fill\n"
     "               ^\n"},
    {"t = n\n"
     "dim n = 3",
     "t.tin:1:5: error: unknown name 'n'\n"
     "t = n\n"
     "    ^\n"},
    {"input A[i]\n"
     "C[i] = A[i]\n"
     "C[j] = A[j]\n"
     "C = 2",
     "t.tin:3:1: error: 'C' is already defined (a query at 2:1)\n"
     "C[j] = A[j]\n"
     "^\n"
     "t.tin:4:1: error: 'C' is already defined (a query at 2:1)\n"
     "C = 2\n"
     "^\n"},
    {"input A[i]\n"
     "t = 1 +* 2",
     "t.tin:2:8: error: expected an expression, found '*'\n"
     "t = 1 +* 2\n"
     "       ^\n"},
    {"input A[i]\r\n"
     "t = B[i]\r\n",
     "t.tin:2:5: error: unknown tensor 'B'\n"
     "t = B[i]\n"
     "    ^\n"},
    {"input A[i]\n"
     "\tt = B[i]  # tab counts as one column",
     "t.tin:2:6: error: unknown tensor 'B'\n"
     "\tt = B[i]  # tab counts as one column\n"
     "     ^\n"},
    {"input A[i]\n"
     "t = A(i) + B[i]",
     "t.tin:2:5: error: 'A' is a tensor; index it with [ ], not ( )\n"
     "t = A(i) + B[i]\n"
     "    ^\n"},
    {"t = 1 ; u = v ; w = t + u",
     "t.tin:1:13: error: unknown name 'v'\n"
     "t = 1 ; u = v ; w = t + u\n"
     "            ^\n"},
    {"input A[i, j], B[j]\n"
     "C[i] = A[i, j] * B[j, k] + G(j: A[i, j])",
     "t.tin:2:18: error: 'B' has 1 mode but is used with 2 indices\n"
     "C[i] = A[i, j] * B[j, k] + G(j: A[i, j])\n"
     "                 ^\n"
     "t.tin:2:28: error: unknown aggregate 'G'; the aggregates are sum, "
     "prod, max, min, any, all, count and defs of two parameters declared "
     "associative and commutative with an identity\n"
     "C[i] = A[i, j] * B[j, k] + G(j: A[i, j])\n"
     "                           ^\n"},
    {"input A[i]\n"
     "t = neg(A[i])",
     "t.tin:2:5: error: unknown function 'neg'\n"
     "t = neg(A[i])\n"
     "    ^\n"},
};

enum { NERR = sizeof err_cases / sizeof err_cases[0] };

START_TEST(error_case) {
  const ErrCase *c = &err_cases[_i];
  char *d = diagnostics_of(c->src);
  if (strcmp(d, c->diags) != 0)
    ck_abort_msg("case %d:\n%s\n--- expected ---\n%s--- got ---\n%s", _i,
                 c->src, c->diags, d);
  free(d);
}
END_TEST

START_TEST(error_table_is_large) { ck_assert_int_ge(NERR, 40); }
END_TEST

/* err carries the first diagnostic with its line and column; the
 * diagnostics pointer may be NULL. */
START_TEST(error_struct) {
  const char *src = "input A[i]\nt = B[i] + C[i]\n";
  Program *p = (Program *)1;
  galley_error err;
  galley_status st = front_parse("dir/x.tin", src, strlen(src), &p, NULL,
                                 &err);
  ck_assert_int_eq(st, GALLEY_EPROGRAM);
  ck_assert_ptr_null(p);
  ck_assert_int_eq(err.status, GALLEY_EPROGRAM);
  ck_assert_int_eq(err.line, 2);
  ck_assert_int_eq(err.col, 5);
  ck_assert_str_eq(err.msg, "dir/x.tin:2:5: error: unknown tensor 'B'");
  /* and with a NULL err too */
  st = front_parse("x.tin", src, strlen(src), &p, NULL, NULL);
  ck_assert_int_eq(st, GALLEY_EPROGRAM);
}
END_TEST

/* Every error of a larger program in one pass, in source order, even
 * when found out of order (the output check runs last). */
START_TEST(errors_in_one_pass) {
  const char *src = "output Z\n"
                    "input A[i, j]\n"
                    "dim n = -1\n"
                    "C[i] = A[i] * foo(A[i, j])\n"
                    "D[i, k] = A[i, j]\n"
                    "def g(x, y) = x + y [identity = 1]\n";
  char *d = diagnostics_of(src);
  const char *want =
      "t.tin:1:8: error: unknown query 'Z' in output\n"
      "output Z\n"
      "       ^\n"
      "t.tin:3:9: error: the size of a dim must be a non-negative integer, "
      "not -1\n"
      "dim n = -1\n"
      "        ^\n"
      "t.tin:4:8: error: 'A' has 2 modes but is used with 1 index\n"
      "C[i] = A[i] * foo(A[i, j])\n"
      "       ^\n"
      "t.tin:4:15: error: unknown function 'foo'\n"
      "C[i] = A[i] * foo(A[i, j])\n"
      "              ^\n"
      "t.tin:5:6: error: index 'k' on the left does not occur on the right "
      "and has no dim\n"
      "D[i, k] = A[i, j]\n"
      "     ^\n"
      "t.tin:6:22: error: 'g' is declared with identity 1, but g(1, -2) = "
      "-1\n"
      "def g(x, y) = x + y [identity = 1]\n"
      "                     ^\n";
  ck_assert_str_eq(d, want);
  free(d);
}
END_TEST

/* A hostile nesting depth is an error, not a stack overflow. */
START_TEST(deep_nesting) {
  size_t n = 100000;
  char *src = malloc(2 * n + 8);
  memcpy(src, "t = ", 4);
  memset(src + 4, '(', n);
  src[4 + n] = '1';
  memset(src + 5 + n, ')', n);
  src[5 + 2 * n] = '\0';
  Program *p;
  galley_error err;
  ck_assert_int_eq(front_parse("t.tin", src, strlen(src), &p, NULL, &err),
                   GALLEY_EPROGRAM);
  ck_assert(strstr(err.msg, "error: expression nested too deeply") != NULL);
  /* a long chain of minus signs, and of additions */
  memset(src + 4, '-', n);
  src[4 + n] = '1';
  src[5 + n] = '\0';
  ck_assert_int_eq(front_parse("t.tin", src, strlen(src), &p, NULL, &err),
                   GALLEY_EPROGRAM);
  ck_assert(strstr(err.msg, "expression nested too deeply") != NULL);
  for (size_t k = 0; k < n; k++)
    src[4 + k] = k % 2 ? '+' : '1';
  src[4 + n] = '1';
  ck_assert_int_eq(front_parse("t.tin", src, strlen(src), &p, NULL, &err),
                   GALLEY_EPROGRAM);
  ck_assert(strstr(err.msg, "expression nested too deeply") != NULL);
  free(src);
  /* moderate nesting is fine */
  char ok[600] = "t = ";
  for (int k = 0; k < 100; k++)
    strcat(ok, "(");
  strcat(ok, "1");
  for (int k = 0; k < 100; k++)
    strcat(ok, ")");
  program_free(parse_ok(ok));
}
END_TEST

/* NUL and other control bytes are errors shown as '?' in the line. */
START_TEST(binary_bytes) {
  const char src[] = "t = 1 \0 + \x01\n";
  Program *p;
  char *d = NULL;
  galley_error err;
  ck_assert_int_eq(front_parse("t.tin", src, sizeof src - 1, &p, &d, &err),
                   GALLEY_EPROGRAM);
  ck_assert_str_eq(d, "t.tin:1:7: error: unexpected byte 0x00\n"
                      "t = 1 ? + ?\n"
                      "      ^\n"
                      "t.tin:1:11: error: unexpected byte 0x01\n"
                      "t = 1 ? + ?\n"
                      "          ^\n");
  free(d);
}
END_TEST

/* ---- good programs, by their printed plan ---- */

static const ErrCase good_cases[] = {
    /* count(i: e) is sum(i: e != 0) */
    {"input A[i, j]\n"
     "c[i] = count(j: A[i, j] > 1)\n"
     "n = count(i, j: A[i, j])",
     "Query(c[i], Agg(+, j, Map(!=, Map(>, A[i,j], 1), 0)))\n"
     "Query(n, Agg(+, i, j, Map(!=, A[i,j], 0)))\n"
     "Outputs(c, n)\n"},
    /* a def named count is the def */
    {"def count(x, y) = x + y [associative, commutative, identity = 0]\n"
     "input A[i]\n"
     "n = count(i: A[i])",
     "Query(n, Agg(count, i, A[i]))\n"
     "Outputs(n)\n"},
    {"input A[i, j], B[j, k]\n"
     "C[i, k] = A[i, j] * B[j, k]",
     "Query(C[i,k], Agg(+, j, Map(*, A[i,j], B[j,k])))\n"
     "Outputs(C)\n"},
    {"input X[i, j], theta[j]\n"
     "P[i] = sigmoid(sum(j: X[i, j] * theta[j]))",
     "Query(P[i], Map(sigmoid, Agg(+, j, Map(*, X[i,j], theta[j]))))\n"
     "Outputs(P)\n"},
    {"input X[i, j], theta[j]\n"
     "P[i] = sigmoid(X[i, j] * theta[j])",
     "Query(P[i], Agg(+, j, Map(sigmoid, Map(*, X[i,j], theta[j]))))\n"
     "Outputs(P)\n"},
    {"input A[i, j], b[j], c[i]\n"
     "X[i] = A[i,j]*b[j] + c[i]",
     "Query(X[i], Agg(+, j, Map(+, Map(*, A[i,j], b[j]), c[i])))\n"
     "Outputs(X)\n"},
    {"input A[i, i]\n"
     "t = A[i, i]",
     "Query(t, Agg(+, i, A[i,i]))\n"
     "Outputs(t)\n"},
    {"input E[i, j]\n"
     "t = sum(i, j, k: E[i,j] * E[j,k] * E[i,k])",
     "Query(t, Agg(+, i, j, k, Map(*, Map(*, E[i,j], E[j,k]), E[i,k])))\n"
     "Outputs(t)\n"},
    {"input A[i, j]\n"
     "m[i] = max(j: A[i, j])\n"
     "n[i] = min(j: A[i, j])\n"
     "p = prod(i, j: A[i, j])\n"
     "q = any(i, j: A[i, j] > 0)\n"
     "r = all(i, j: A[i, j] != 0)",
     "Query(m[i], Agg(max, j, A[i,j]))\n"
     "Query(n[i], Agg(min, j, A[i,j]))\n"
     "Query(p, Agg(*, i, j, A[i,j]))\n"
     "Query(q, Agg(||, i, j, Map(>, A[i,j], 0)))\n"
     "Query(r, Agg(&&, i, j, Map(!=, A[i,j], 0)))\n"
     "Outputs(m, n, p, q, r)\n"},
    {"input D[i, j] fill inf\n"
     "R[i, k] = min(j: D[i, j] + D[j, k])",
     "Query(R[i,k], Agg(min, j, Map(+, D[i,j], D[j,k])))\n"
     "Outputs(R)\n"},
    {"input A[i, j]\n"
     "B[i, j] = exp(A[i, j])\n"
     "C[i] = B[i, j]",
     "Query(B[i,j], Map(exp, A[i,j]))\n"
     "Query(C[i], Agg(+, j, Alias(B[i,j])))\n"
     "Outputs(C)\n"},
    {"input alpha, A[i]\n"
     "t = alpha * 2\n"
     "u[i] = t * A[i] + alpha",
     "Query(t, Map(*, alpha, 2))\n"
     "Query(u[i], Map(+, Map(*, Alias(t), A[i]), alpha))\n"
     "Outputs(u)\n"},
    {"x = 1 ; t = -3 + -x ^ 2 - -(2)",
     "Query(x, 1)\n"
     "Query(t, Map(-, Map(+, -3, Map(neg, Map(^, Alias(x), 2))), -2))\n"
     "Outputs(t)\n"},
    {"x = 2\n"
     "t = -x ^ 2 + 2 ^ 3 ^ 2 - !x + 2 ^ -1",
     "Query(x, 2)\n"
     "Query(t, Map(+, Map(-, Map(+, Map(neg, Map(^, Alias(x), 2)), Map(^, 2, Map(^, 3, 2))), Map(!, Alias(x))), Map(^, 2, -1)))\n"
     "Outputs(t)\n"},
    {"input a, b, c\n"
     "t = a || b && c == a + b * c / a ^ b\n"
     "u = (a < b) + (a <= b) + (a > b) + (a >= b) + (a != b)",
     "Query(t, Map(||, a, Map(&&, b, Map(==, c, Map(+, a, Map(/, Map(*, b, c), Map(^, a, b)))))))\n"
     "Query(u, Map(+, Map(+, Map(+, Map(+, Map(<, a, b), Map(<=, a, b)), Map(>, a, b)), Map(>=, a, b)), Map(!=, a, b)))\n"
     "Outputs(t, u)\n"},
    {"input a, b, c\n"
     "t = max(a, b, c) + min(a, b) + ifelse(a, b, c) + pow(a, 2) + abs(a) + exp(a) + log(a) + sqrt(a) + sin(a) + cos(a) + tanh(a) + sigmoid(a) + relu(a)",
     "Query(t, Map(+, Map(+, Map(+, Map(+, Map(+, Map(+, Map(+, Map(+, Map(+, Map(+, Map(+, Map(+, Map(max, a, b, c), Map(min, a, b)), Map(ifelse, a, b, c)), Map(^, a, 2)), Map(abs, a)), Map(exp, a)), Map(log, a)), Map(sqrt, a)), Map(sin, a)), Map(cos, a)), Map(tanh, a)), Map(sigmoid, a)), Map(relu, a)))\n"
     "Outputs(t)\n"},
    {"def f(x, y) = sin(1 + x*y)\n"
     "input A[i, j], B[i, j]\n"
     "C[i, j] = f(A[i, j], B[i, j])",
     "Query(C[i,j], Map(f, A[i,j], B[i,j]))\n"
     "Outputs(C)\n"},
    {"def smax(x, y) = max(x, y) [associative, commutative, idempotent, identity = -inf]\n"
     "input A[i, j]\n"
     "m[i] = smax(j: A[i, j])",
     "Query(m[i], Agg(smax, j, A[i,j]))\n"
     "Outputs(m)\n"},
    {"input A[i, j]\n"
     "C[i] = A[i, j] + sum(i: A[i, i])",
     "Query(C[i], Agg(+, j, Map(+, A[i,j], Agg(+, i#2, A[i#2,i#2]))))\n"
     "Outputs(C)\n"},
    {"dim n = 4\n"
     "v[n] = 1\n"
     "t = sum(n: v[n])",
     "Query(v[n], 1)\n"
     "Query(t, Agg(+, n, Alias(v[n])))\n"
     "Outputs(t)\n"},
    {"input A[i, j]  # comment\n"
     "\n"
     "# another\n"
     "B[i, j] = A[i, j] ; C[j, i] = B[i, j]\n"
     "output C, B",
     "Query(B[i,j], A[i,j])\n"
     "Query(C[j,i], Alias(B[i,j]))\n"
     "Outputs(C, B)\n"},
    {"input A[i, j], B[j]\n"
     "C[i] = A[i,\n"
     "  j] * (B[j]\n"
     "  + 1)",
     "Query(C[i], Agg(+, j, Map(*, A[i,j], Map(+, B[j], 1))))\n"
     "Outputs(C)\n"},
    {"input A[i]\n"
     "t = .5 * A[i] + 1e-3 + 2.5E+2 + inf + nan",
     "Query(t, Agg(+, i, Map(+, Map(+, Map(+, Map(+, Map(*, 0.5, A[i]), 0.001), 250), inf), nan)))\n"
     "Outputs(t)\n"},
    {"input A[i, j]\n"
     "S[i] = sum(j: A[i, j] * sum(k: A[j, k] * A[k, i]))",
     "Query(S[i], Agg(+, j, Map(*, A[i,j], Agg(+, k, Map(*, A[j,k], A[k,i])))))\n"
     "Outputs(S)\n"},
};

enum { NGOOD = sizeof good_cases / sizeof good_cases[0] };

START_TEST(good_case) {
  const ErrCase *c = &good_cases[_i];
  char *plan = plan_of(c->src);
  if (strcmp(plan, c->diags) != 0)
    ck_abort_msg("case %d:\n%s\n--- expected ---\n%s--- got ---\n%s", _i,
                 c->src, c->diags, plan);
  free(plan);
}
END_TEST

/* Every statement and expression form of tin.md sections 2-4. */
START_TEST(all_forms_accepted) {
  const char *src =
      "# section 3\n"
      "input A[i, j]                # an input tensor with two modes\n"
      "input theta[j], y[i]         # several at once\n"
      "input D[i, j] fill inf       # an input whose unstored entries are +inf\n"
      "input alpha                  # a scalar (0-mode) input\n"
      "input B[j, k], E[i, j], X[i, j]\n"
      "dim n = 100                  # fixes the size of index n\n"
      "def f(x, y) = sin(1 + x*y)   # a user-defined pointwise function\n"
      "def smax(x, y) = max(x, y) [associative, commutative, idempotent, "
      "identity = -inf]\n"
      "C[i, k] = A[i, j] * B[j, k]  # a query; j is summed\n"
      "t = sum(i, j, k: E[i,j] * E[j,k] * E[i,k])   # a scalar query\n"
      "X2[i] = A[i,j]*theta[j] + y[i]\n"
      "tr = A[i,i]; s = t * 2       # alias of t\n"
      "# section 4\n"
      "e[i] = a1[i] || a1[i] && a1[i] == a1[i] != a1[i] < a1[i] <= a1[i]"
      " > a1[i] >= a1[i] + a1[i] - a1[i] * a1[i] / -a1[i] ^ !a1[i]\n"
      "a1[i] = y[i]\n"
      "fns = exp(alpha) + log(alpha) + sqrt(alpha) + abs(alpha) + "
      "sin(alpha) + cos(alpha) + tanh(alpha) + sigmoid(alpha) + "
      "relu(alpha) + pow(alpha, 2) + min(alpha, 1, 2) + max(alpha, 1) + "
      "ifelse(alpha, 1, 2)\n"
      "aggs[i] = sum(j: A[i,j]) + prod(j: A[i,j]) + max(j: A[i,j]) + "
      "min(j: A[i,j]) + any(j: A[i,j]) + all(j: A[i,j]) + smax(j: "
      "D[i,j])\n"
      "g[i] = f(A[i, j], 0.5) + 1e-3 + 3 + inf + -inf + nan + n2[i]\n"
      "n2[n] = 1\n"
      "output C, t, s\n";
  /* e and a1 are in the wrong order on purpose: a1 must exist first */
  char *d = diagnostics_of(src);
  ck_assert(strstr(d, "tensor 'a1' is used before its declaration at 16:1") != NULL);
  free(d);
  /* the same with the queries in order */
  char *fixed = strdup(src);
  char *e = strstr(fixed, "e[i] = ");
  char *a = strstr(fixed, "a1[i] = y[i]\n");
  size_t elen = (size_t)(a - e), alen = strlen("a1[i] = y[i]\n");
  char *tmp = malloc(elen);
  memcpy(tmp, e, elen);
  memmove(e, a, alen);
  memcpy(e + alen, tmp, elen);
  free(tmp);
  char *g = strstr(fixed, "g[i] = ");
  char *n2 = strstr(fixed, "n2[n] = 1\n");
  size_t glen = (size_t)(n2 - g), nlen = strlen("n2[n] = 1\n");
  tmp = malloc(glen);
  memcpy(tmp, g, glen);
  memmove(g, n2, nlen);
  memcpy(g + nlen, tmp, glen);
  free(tmp);
  Program *p = parse_ok(fixed);
  ck_assert_int_eq(p->ninputs, 8);
  ck_assert_int_eq(p->ndims, 1);
  ck_assert_int_eq(p->noutputs, 3);
  program_free(p);
  free(fixed);
}
END_TEST

/* ---- structure ---- */

static int index_named(const Query *q, const char *name) {
  for (int k = 0; k < q->nindices; k++)
    if (strcmp(q->indices[k].name, name) == 0)
      return k;
  return -1;
}

START_TEST(structure_matmul) {
  Program *p = parse_ok("input A[i, j], B[j, k]\nC[i, k] = A[i, j] * B[j, k]\n");
  ck_assert_int_eq(p->ninputs, 2);
  ck_assert_str_eq(p->inputs[1].name, "B");
  ck_assert_int_eq(p->inputs[1].order, 2);
  ck_assert_int_eq(p->inputs[1].loc.line, 1);
  ck_assert_int_eq(p->inputs[1].loc.col, 16);
  ck_assert_int_eq(p->nqueries, 1);
  const Query *q = &p->queries[0];
  ck_assert_str_eq(q->name, "C");
  ck_assert_int_eq(q->nout, 2);
  int i = index_named(q, "i"), j = index_named(q, "j"),
      k = index_named(q, "k");
  ck_assert_int_eq(q->nindices, 3);
  ck_assert_int_eq(q->out[0], i);
  ck_assert_int_eq(q->out[1], k);
  ck_assert_int_eq(q->indices[j].dim, -1);
  ck_assert_int_eq(q->indices[j].loc.line, 2);
  ck_assert_int_eq(q->indices[j].loc.col, 16);
  const Node *n = q->expr;
  ck_assert_int_eq(n->kind, ND_AGG);
  ck_assert_ptr_eq(n->op, ops_find_agg(&p->ops, "sum"));
  ck_assert_int_eq(n->nidx, 1);
  ck_assert_int_eq(n->idx[0], j);
  const Node *m = n->arg;
  ck_assert_int_eq(m->kind, ND_MAP);
  ck_assert_ptr_eq(m->op, ops_find(&p->ops, "*"));
  ck_assert_int_eq(m->nargs, 2);
  ck_assert_int_eq(m->loc.col, 19);
  const Node *a = m->args[0], *b = m->args[1];
  ck_assert_int_eq(a->kind, ND_INPUT);
  ck_assert_int_eq(a->tensor, 0);
  ck_assert_int_eq(a->nidx, 2);
  ck_assert_int_eq(a->idx[0], i);
  ck_assert_int_eq(a->idx[1], j);
  ck_assert_int_eq(b->tensor, 1);
  ck_assert_int_eq(b->idx[0], j);
  ck_assert_int_eq(b->idx[1], k);
  ck_assert_int_eq(q->is_output, 1);
  ck_assert_int_eq(p->noutputs, 1);
  ck_assert_int_eq(p->outputs[0], 0);
  ck_assert_str_eq(p->filename, "t.tin");
  program_free(p);
}
END_TEST

/* An aggregate binds its indices afresh; the implicit sum wraps the
 * whole right-hand side over the free indices in order of appearance. */
START_TEST(structure_scopes) {
  Program *p = parse_ok("input A[i, j]\n"
                        "C[i] = A[k, j] + sum(i: A[i, i]) + A[i, k]\n");
  const Query *q = &p->queries[0];
  ck_assert_int_eq(q->nindices, 4);
  ck_assert_str_eq(q->indices[0].name, "i"); /* the left's */
  ck_assert_str_eq(q->indices[1].name, "k");
  ck_assert_str_eq(q->indices[2].name, "j");
  ck_assert_str_eq(q->indices[3].name, "i"); /* the aggregate's */
  const Node *n = q->expr;
  ck_assert_int_eq(n->kind, ND_AGG);
  ck_assert_int_eq(n->nidx, 2);
  ck_assert_int_eq(n->idx[0], 1);
  ck_assert_int_eq(n->idx[1], 2);
  const Node *plus = n->arg; /* (A[k,j] + sum) + A[i,k] */
  ck_assert_ptr_eq(plus->op, ops_find(&p->ops, "+"));
  ck_assert_int_eq(plus->nargs, 2); /* not flattened */
  const Node *inner = plus->args[0]->args[1];
  ck_assert_int_eq(inner->kind, ND_AGG);
  ck_assert_int_eq(inner->nidx, 1);
  ck_assert_int_eq(inner->idx[0], 3);
  ck_assert_int_eq(inner->arg->idx[0], 3);
  ck_assert_int_eq(inner->arg->idx[1], 3);
  ck_assert_int_eq(plus->args[1]->idx[0], 0);
  program_free(p);
}
END_TEST

START_TEST(structure_dims_scalars_aliases) {
  Program *p = parse_ok("dim n = 4\ninput alpha fill -2.5, A[i]\n"
                        "v[n, i] = alpha * A[i]\nw[i] = v[n, i] * alpha\n"
                        "u = w[m]\ndim unused = 0\n");
  ck_assert_int_eq(p->ndims, 2);
  ck_assert_str_eq(p->dims[0].name, "n");
  ck_assert_int_eq(p->dims[0].size, 4);
  ck_assert_int_eq(p->dims[1].size, 0);
  ck_assert_int_eq(p->inputs[0].order, 0);
  ck_assert(p->inputs[0].fill == -2.5);
  ck_assert(p->inputs[1].fill == 0);
  const Query *v = &p->queries[0], *w = &p->queries[1], *u = &p->queries[2];
  ck_assert_int_eq(v->indices[index_named(v, "n")].dim, 4);
  ck_assert_int_eq(v->indices[index_named(v, "i")].dim, -1);
  /* v reads the scalar input as a 0-index access */
  const Node *m = v->expr;
  ck_assert_int_eq(m->kind, ND_MAP);
  ck_assert_int_eq(m->args[0]->kind, ND_INPUT);
  ck_assert_int_eq(m->args[0]->nidx, 0);
  /* w sums n (dim 4) implicitly; v is read as an alias */
  ck_assert_int_eq(w->expr->kind, ND_AGG);
  ck_assert_int_eq(w->indices[w->expr->idx[0]].dim, 4);
  ck_assert_int_eq(w->expr->arg->args[0]->kind, ND_ALIAS);
  ck_assert_int_eq(w->expr->arg->args[0]->tensor, 0);
  ck_assert_int_eq(u->nout, 0);
  ck_assert_int_eq(u->expr->kind, ND_AGG);
  ck_assert_int_eq(u->expr->arg->kind, ND_ALIAS);
  ck_assert_int_eq(u->expr->arg->tensor, 1);
  ck_assert_int_eq(p->noutputs, 1);
  ck_assert_int_eq(p->outputs[0], 2);
  program_free(p);
}
END_TEST

START_TEST(structure_def_op) {
  Program *p = parse_ok(
      "def smax(x, y) = max(x, y) [associative, commutative, idempotent, "
      "identity = -inf, annihilator = inf, distributes over min]\n"
      "def g(a, b, c) = ifelse(a, b, c) * 2\n"
      "def h(x, y) = x + y [distributes over max, distributes over smax]\n"
      "input A[i, j]\nm[i] = smax(j: A[i, j])\nk[i] = g(m[i], 1, 2)\n");
  const Op *s = ops_find(&p->ops, "smax");
  ck_assert_ptr_nonnull(s);
  ck_assert_ptr_eq(ops_find_agg(&p->ops, "smax"), s);
  ck_assert_int_eq(s->arity, 2);
  ck_assert_uint_eq(s->props, OP_ASSOCIATIVE | OP_COMMUTATIVE |
                                  OP_IDEMPOTENT | OP_HAS_IDENTITY |
                                  OP_HAS_ANNIHILATOR);
  ck_assert(s->identity == -INFINITY && s->agg_init == -INFINITY);
  ck_assert(s->annihilator == INFINITY);
  ck_assert_int_eq(s->repeat, REPEAT_SELF);
  ck_assert_str_eq(s->distributes_over[0], "min");
  ck_assert_ptr_null(s->distributes_over[1]);
  ck_assert_ptr_null(s->c_template);
  ck_assert_ptr_null(s->eval);
  ck_assert_int_eq(s->is_builtin, 0);
  ck_assert_int_eq(s->body->kind, ND_MAP);
  ck_assert_ptr_eq(s->body->op, ops_find(&p->ops, "max"));
  ck_assert_int_eq(s->body->args[0]->kind, ND_PARAM);
  ck_assert_int_eq(s->body->args[0]->tensor, 0);
  ck_assert_int_eq(s->body->args[1]->tensor, 1);
  double v[2] = {3, -1};
  ck_assert(ops_apply(s, v, 2) == 3);
  const Op *g = ops_find(&p->ops, "g");
  ck_assert_int_eq(g->arity, 3);
  ck_assert_uint_eq(g->props, 0);
  ck_assert_int_eq(g->repeat, REPEAT_UNKNOWN);
  ck_assert_ptr_null(ops_find_agg(&p->ops, "g"));
  const Op *h = ops_find(&p->ops, "h");
  ck_assert_str_eq(h->distributes_over[0], "max");
  ck_assert_str_eq(h->distributes_over[1], "smax");
  ck_assert(ops_distributes(h, ops_find(&p->ops, "max")));
  ck_assert(!ops_distributes(h, ops_find(&p->ops, "+")));
  const Node *k = p->queries[1].expr;
  ck_assert_int_eq(k->kind, ND_MAP);
  ck_assert_ptr_eq(k->op, g);
  ck_assert_int_eq(k->nargs, 3);
  ck_assert_int_eq(k->args[0]->kind, ND_ALIAS);
  ck_assert_int_eq(k->args[0]->tensor, 0);
  program_free(p);
}
END_TEST

/* Without `output`, every query no later query reads is a result; with
 * it, the listed ones in the listed order (output may come first). */
START_TEST(structure_outputs) {
  Program *p = parse_ok("input A[i]\na[i] = A[i]\nb[i] = a[i]\nc = 1\n");
  ck_assert_int_eq(p->noutputs, 2);
  ck_assert_int_eq(p->outputs[0], 1);
  ck_assert_int_eq(p->outputs[1], 2);
  ck_assert_int_eq(p->queries[0].is_output, 0);
  program_free(p);
  p = parse_ok("output c, a\ninput A[i]\na[i] = A[i]\nb[i] = a[i]\nc = 1\n"
               "output b\n");
  ck_assert_int_eq(p->noutputs, 3);
  ck_assert_int_eq(p->outputs[0], 2);
  ck_assert_int_eq(p->outputs[1], 0);
  ck_assert_int_eq(p->outputs[2], 1);
  program_free(p);
  /* declarations alone are a program (explain prints its input plan);
   * an empty text is not (see the error cases) */
  p = parse_ok("input A[i]  # only a declaration");
  ck_assert_int_eq(p->nqueries, 0);
  ck_assert_int_eq(p->noutputs, 0);
  program_free(p);
}
END_TEST

/* Numbers, the minus of a literal, tabs, CRLF, ';' and continuation. */
START_TEST(lexical) {
  Program *p = parse_ok("t = -.5e1\r\n\tu = 1e+2;v=2.\nw = (1 +\n 2)\n");
  ck_assert_int_eq(p->queries[0].expr->kind, ND_CONST);
  ck_assert(p->queries[0].expr->value == -5);
  ck_assert_int_eq(p->queries[0].expr->loc.col, 5);
  ck_assert(p->queries[1].expr->value == 100);
  ck_assert_int_eq(p->queries[1].loc.line, 2);
  ck_assert_int_eq(p->queries[1].loc.col, 2);
  ck_assert(p->queries[2].expr->value == 2);
  ck_assert_int_eq(p->queries[3].expr->kind, ND_MAP);
  program_free(p);
  p = parse_ok("x = -nan; y = -inf; z = 2 ^ -x");
  ck_assert(isnan(p->queries[0].expr->value));
  ck_assert(p->queries[1].expr->value == -INFINITY);
  program_free(p);
}
END_TEST

/* Parsing is all or nothing and leaks nothing on many random inputs made
 * of the language's tokens (the fuzz target does this at scale). */
START_TEST(random_token_soup) {
  static const char *toks[] = {
      "input ", "dim ", "def ", "output ", "A", "B", "i", "j", "f", "x",
      "[", "]", "(", ")", ",", ":", ";", "\n", "=", "+", "-", "*", "^",
      "==", "&&", "!", "1", "2.5", "inf", "sum", "max", "fill ", " "};
  test_rng r = test_rng_seed(7);
  char src[256];
  int ok = 0;
  for (int iter = 0; iter < 3000; iter++) {
    src[0] = '\0';
    int n = (int)test_rng_below(&r, 24);
    for (int k = 0; k < n; k++)
      strcat(src, toks[test_rng_below(&r, sizeof toks / sizeof toks[0])]);
    Program *p = NULL;
    char *d = NULL;
    galley_error err;
    galley_status st = front_parse("r.tin", src, strlen(src), &p, &d, &err);
    if (st == GALLEY_OK) {
      ok++;
      program_free(p);
    } else {
      ck_assert_int_eq(st, GALLEY_EPROGRAM);
      ck_assert(strncmp(err.msg, "r.tin:", 6) == 0);
      free(d);
    }
  }
  ck_assert_int_gt(ok, 0);
}
END_TEST

/* ---- the property checks of defs that call each other ---- */

static double test_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A chain of n defs, each calling the previous one `calls` times (three
 * calls: 3^n evaluations per application without memoization), all
 * declared commutative with identity 0; the last claims `last_props`. */
static char *def_chain(int n, const char *last_props) {
  size_t cap = 256 + (size_t)n * 160;
  char *src = malloc(cap), *p = src;
  ck_assert_ptr_nonnull(src);
  p += sprintf(p, "def f0(x, y) = x + y [associative, commutative, "
                  "identity = 0]\n");
  for (int k = 1; k < n; k++)
    p += sprintf(p, "def f%d(x, y) = f%d(x, y) + f%d(y, x) - f%d(x, y) "
                    "[%s]\n", k, k - 1, k - 1, k - 1,
                 k == n - 1 ? last_props : "commutative, identity = 0");
  sprintf(p, "input A[i]\ns = sum(i: A[i])\n");
  return src;
}

/* 3^40 evaluations unmemoized: without the memo this test never ends
 * (its tcase timeout fails it); with it, the chain is linear. */
START_TEST(def_chain_checks_are_polynomial) {
  double t0 = test_now();
  char *src = def_chain(40, "commutative, associative, identity = 0");
  char *d = diagnostics_of(src);
  ck_assert_str_eq(d, "");
  free(d);
  free(src);
  /* a false claim at the end of the chain is still refuted */
  src = def_chain(40, "commutative, annihilator = 5");
  d = diagnostics_of(src);
  ck_assert_msg(strstr(d, "error: 'f39' is declared with annihilator 5, "
                          "but f39(5, -2) = 3") != NULL, "%s", d);
  free(d);
  free(src);
  ck_assert_double_lt(test_now() - t0, 5.0);
}
END_TEST

/* A body that calls its predecessor on ever new values (2x and 2x+1: 2^n
 * distinct arguments) cannot be memoized: the checks stop at their budget
 * with an error, in bounded time. */
START_TEST(def_checks_are_bounded) {
  char src[4096], *p = src;
  p += sprintf(p, "def g0(x, y) = x + y\n");
  for (int k = 1; k < 30; k++)
    p += sprintf(p, "def g%d(x, y) = g%d(2*x, y) + g%d(2*x + 1, y)%s\n",
                 k, k - 1, k - 1, k == 29 ? " [identity = 0]" : "");
  double t0 = test_now();
  char *d = diagnostics_of(src);
  ck_assert_str_eq(d, "t.tin:30:47: error: cannot check the properties "
                      "declared for 'g29': trying them evaluates more than "
                      "1000000 operations (its body calls defs that call "
                      "defs many times); simplify the body or declare "
                      "fewer properties\n"
                      "def g29(x, y) = g28(2*x, y) + g28(2*x + 1, y) "
                      "[identity = 0]\n"
                      "                                              ^\n");
  free(d);
  ck_assert_double_lt(test_now() - t0, 10.0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("front");
  TCase *tc = tcase_create("errors");
  tcase_add_loop_test(tc, error_case, 0, NERR);
  tcase_add_test(tc, error_table_is_large);
  tcase_add_test(tc, error_struct);
  tcase_add_test(tc, errors_in_one_pass);
  tcase_add_test(tc, deep_nesting);
  tcase_add_test(tc, binary_bytes);
  suite_add_tcase(s, tc);
  tc = tcase_create("good");
  tcase_add_loop_test(tc, good_case, 0, NGOOD);
  tcase_add_test(tc, all_forms_accepted);
  tcase_add_test(tc, structure_matmul);
  tcase_add_test(tc, structure_scopes);
  tcase_add_test(tc, structure_dims_scalars_aliases);
  tcase_add_test(tc, structure_def_op);
  tcase_add_test(tc, structure_outputs);
  tcase_add_test(tc, lexical);
  tcase_add_test(tc, random_token_soup);
  suite_add_tcase(s, tc);
  tc = tcase_create("def checks");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, def_chain_checks_are_polynomial);
  tcase_add_test(tc, def_checks_are_bounded);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
