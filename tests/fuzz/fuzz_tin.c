/*
 * fuzz_tin.c -- libFuzzer target for the .tin front end (lexer, parser,
 * semantic checks).
 *
 * Parses the input as a program named fuzz.tin and checks what must hold
 * for any input: success with a consistent Program (every output a
 * query, every node index inside its query's table), or GALLEY_EPROGRAM
 * with a "fuzz.tin:LINE:COL: error: ..." message whose line and column
 * match err, and a diagnostics text that starts with the same message.
 * Anything else aborts.  Leaks and hangs are caught by libFuzzer itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every index id of n and below lies in [0, nindices). */
static void check_node(const Program *p, const Query *q, const Node *n,
                       int depth) {
  if (!n || depth > 100000)
    abort();
  switch (n->kind) {
  case ND_CONST:
    break;
  case ND_INPUT:
  case ND_ALIAS:
    if (n->tensor < 0 ||
        n->tensor >= (n->kind == ND_INPUT ? p->ninputs : p->nqueries))
      abort();
    for (int k = 0; k < n->nidx; k++)
      if (n->idx[k] < 0 || n->idx[k] >= q->nindices)
        abort();
    break;
  case ND_MAP:
    if (!n->op || n->nargs < 1)
      abort();
    for (int k = 0; k < n->nargs; k++)
      check_node(p, q, n->args[k], depth + 1);
    break;
  case ND_AGG:
    if (!n->op || n->nidx < 1)
      abort();
    for (int k = 0; k < n->nidx; k++)
      if (n->idx[k] < 0 || n->idx[k] >= q->nindices)
        abort();
    check_node(p, q, n->arg, depth + 1);
    break;
  default:
    abort(); /* ND_PARAM outside a def body */
  }
}

static void check_program(const Program *p) {
  for (int k = 0; k < p->noutputs; k++)
    if (p->outputs[k] < 0 || p->outputs[k] >= p->nqueries)
      abort();
  for (int k = 0; k < p->nqueries; k++)
    check_node(p, &p->queries[k], p->queries[k].expr, 0);
  /* the printer walks every node too */
  FILE *f = fopen("/dev/null", "w");
  if (f) {
    plan_print(p, f);
    fclose(f);
  }
}

static void check_failure(const galley_error *err, const char *diags) {
  char head[64];
  snprintf(head, sizeof head, "fuzz.tin:%lld:%lld: error: ",
           (long long)err->line, (long long)err->col);
  if (err->line < 1 || err->col < 1 || strncmp(err->msg, head, strlen(head)))
    abort();
  if (!diags || strncmp(diags, err->msg, strlen(err->msg)) != 0)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Program *p = NULL;
  char *diags = NULL;
  galley_error err;
  galley_status st =
      front_parse("fuzz.tin", (const char *)data, size, &p, &diags, &err);
  if (st == GALLEY_OK) {
    if (!p || diags)
      abort();
    check_program(p);
    program_free(p);
  } else if (st == GALLEY_EPROGRAM) {
    if (p)
      abort();
    check_failure(&err, diags);
  } else if (st != GALLEY_ENOMEM) {
    abort();
  }
  free(diags);
  return 0;
}
