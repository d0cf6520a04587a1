/*
 * program.c -- the public program API of galley.h: parse or read a .tin
 * program, bind its inputs to tensors, run it with the reference
 * evaluator, and hand out its results.
 *
 * A galley_program wraps the checked internal Program (which owns its
 * arena) with what the API adds: the borrowed input tensors, the result
 * tensors of the last run (owned), and the list of outputs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

struct galley_program {
  Program *prog;                /* the checked program (owns its arena) */
  const galley_tensor **bound;  /* per input: the borrowed tensor or NULL */
  galley_tensor **results;      /* per query: result of the last run or NULL */
  int *outputs;                 /* the outputs as query numbers, in order */
  int noutputs;
};

static galley_status fail(galley_error *err, galley_status status,
                          const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static galley_status fail(galley_error *err, galley_status status,
                          const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->status = status;
    err->line = err->col = 0;
  }
  return status;
}

static void clear_error(galley_error *err) {
  if (err)
    memset(err, 0, sizeof *err);
}

/* The outputs: the order of the `output` statement when the front end
 * recorded it, else every query marked as an output, in query order. */
static int collect_outputs(galley_program *gp) {
  const Program *p = gp->prog;
  gp->outputs = calloc((size_t)p->nqueries + 1, sizeof *gp->outputs);
  if (!gp->outputs)
    return -1;
  if (p->outputs) {
    for (int k = 0; k < p->noutputs; k++)
      gp->outputs[gp->noutputs++] = p->outputs[k];
    return 0;
  }
  for (int q = 0; q < p->nqueries; q++)
    if (p->queries[q].is_output)
      gp->outputs[gp->noutputs++] = q;
  return 0;
}

/* Wrap a checked Program (taking it over). */
static galley_status wrap_program(Program *prog, galley_program **out,
                                  galley_error *err) {
  galley_program *gp = calloc(1, sizeof *gp);
  if (gp) {
    gp->prog = prog;
    gp->bound = calloc((size_t)prog->ninputs + 1, sizeof *gp->bound);
    gp->results = calloc((size_t)prog->nqueries + 1, sizeof *gp->results);
  }
  if (!gp || !gp->bound || !gp->results || collect_outputs(gp) != 0) {
    if (gp)
      galley_program_free(gp);
    else
      program_free(prog);
    return fail(err, GALLEY_ENOMEM, "out of memory");
  }
  *out = gp;
  return GALLEY_OK;
}

galley_status galley_program_parse(const char *filename, const char *source,
                                   size_t length, galley_program **out,
                                   char **diagnostics, galley_error *err) {
  clear_error(err);
  *out = NULL;
  if (diagnostics)
    *diagnostics = NULL;
  Program *prog = NULL;
  galley_status st = front_parse(filename ? filename : "<program>", source,
                                 length, &prog, diagnostics, err);
  if (st != GALLEY_OK)
    return st;
  return wrap_program(prog, out, err);
}

/* Read a whole file into a malloc()ed, NUL-terminated buffer. */
static galley_status read_text(const char *path, char **text, size_t *length,
                               galley_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return fail(err, GALLEY_EIO, "%s: error: cannot open: %s", path,
                strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - 1 - n, f);
    if (n < cap - 1)
      break;
    char *bigger = realloc(buf, cap * 2);
    if (!bigger)
      free(buf);
    buf = bigger;
    cap *= 2;
  }
  int bad = buf && ferror(f);
  int saved = errno;
  fclose(f);
  if (!buf)
    return fail(err, GALLEY_ENOMEM, "out of memory");
  if (bad) {
    free(buf);
    return fail(err, GALLEY_EIO, "%s: error: cannot read: %s", path,
                strerror(saved));
  }
  buf[n] = '\0';
  *text = buf;
  *length = n;
  return GALLEY_OK;
}

galley_status galley_program_read(const char *path, galley_program **out,
                                  char **diagnostics, galley_error *err) {
  clear_error(err);
  *out = NULL;
  if (diagnostics)
    *diagnostics = NULL;
  char *text = NULL;
  size_t length = 0;
  galley_status st = read_text(path, &text, &length, err);
  if (st != GALLEY_OK)
    return st;
  st = galley_program_parse(path, text, length, out, diagnostics, err);
  free(text); /* front_parse keeps its own copy of the source */
  return st;
}

static void free_results(galley_program *gp) {
  for (int q = 0; q < gp->prog->nqueries; q++)
    gp->results[q] = galley_tensor_free(gp->results[q]);
}

galley_program *galley_program_free(galley_program *p) {
  if (!p)
    return NULL;
  if (p->results)
    free_results(p);
  free(p->results);
  free(p->bound);
  free(p->outputs);
  program_free(p->prog);
  free(p);
  return NULL;
}

int galley_program_num_inputs(const galley_program *p) {
  return p->prog->ninputs;
}

const char *galley_program_input_name(const galley_program *p, int k) {
  return k >= 0 && k < p->prog->ninputs ? p->prog->inputs[k].name : NULL;
}

int galley_program_input_order(const galley_program *p, int k) {
  return k >= 0 && k < p->prog->ninputs ? p->prog->inputs[k].order : -1;
}

void galley_program_input_loc(const galley_program *p, int k, int64_t *line,
                              int64_t *col) {
  int ok = k >= 0 && k < p->prog->ninputs;
  *line = ok ? p->prog->inputs[k].loc.line : 0;
  *col = ok ? p->prog->inputs[k].loc.col : 0;
}

galley_status galley_program_bind(galley_program *p, const char *name,
                                  const galley_tensor *t, galley_error *err) {
  clear_error(err);
  const Program *prog = p->prog;
  int k = 0;
  while (k < prog->ninputs && strcmp(prog->inputs[k].name, name) != 0)
    k++;
  if (k == prog->ninputs)
    return fail(err, GALLEY_EBIND, "no input named '%s'", name);
  if (!t)
    return fail(err, GALLEY_EINVAL, "galley_program_bind: tensor for '%s' "
                "must not be NULL", name);
  const InputDecl *d = &prog->inputs[k];
  int order = galley_tensor_order(t);
  if (order != d->order)
    return fail(err, GALLEY_EBIND,
                "input '%s' is declared with %d mode%s (at %s:%d:%d) but "
                "the bound tensor has %d",
                d->name, d->order, d->order == 1 ? "" : "s", prog->filename,
                d->loc.line, d->loc.col, order);
  p->bound[k] = t;
  return GALLEY_OK;
}

galley_status galley_program_run_reference(galley_program *p,
                                           galley_error *err) {
  clear_error(err);
  free_results(p);
  return refeval_run(p->prog, p->bound, p->results, err);
}

int galley_program_num_outputs(const galley_program *p) {
  return p->noutputs;
}

const char *galley_program_output_name(const galley_program *p, int k) {
  if (k < 0 || k >= p->noutputs)
    return NULL;
  return p->prog->queries[p->outputs[k]].name;
}

const galley_tensor *galley_program_output(const galley_program *p, int k) {
  if (k < 0 || k >= p->noutputs)
    return NULL;
  return p->results[p->outputs[k]];
}

void galley_program_print_plan(const galley_program *p, FILE *f) {
  plan_print(p->prog, f);
}
