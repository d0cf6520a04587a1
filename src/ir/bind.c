/*
 * bind.c -- whether bound data fits a program: the checks of each bound
 * input and the inference of every query's index sizes.  The reference
 * evaluator and the planners all call these, so a mismatch is reported
 * with the same located message whichever path runs.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

galley_status prog_vfail_at(galley_error *err, galley_status status,
                            const Program *p, Loc loc, const char *fmt,
                            va_list ap) {
  if (!err)
    return status;
  const char *file = p->filename ? p->filename : "<program>";
  int n = loc.line > 0 ? snprintf(err->msg, sizeof err->msg,
                                  "%s:%d:%d: error: ", file, loc.line, loc.col)
                       : snprintf(err->msg, sizeof err->msg, "%s: error: ", file);
  if (n >= 0 && (size_t)n < sizeof err->msg)
    vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
  err->status = status;
  err->line = loc.line;
  err->col = loc.col;
  return status;
}

galley_status prog_fail_at(galley_error *err, galley_status status,
                           const Program *p, Loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  prog_vfail_at(err, status, p, loc, fmt, ap);
  va_end(ap);
  return status;
}

/* Fills compare equal when both are the same number or both NaN. */
static int same_fill(double a, double b) {
  return a == b || (isnan(a) && isnan(b));
}

/* A bound tensor fits its declaration when the orders agree and its fill
 * is the declared one, or 0: formats that cannot record a fill (Matrix
 * Market, .tns without a '# fill:' line) give 0, and then the declaration
 * says what the unstored entries are (`input D[i,j] fill inf`).  An input
 * declared without a fill takes the bound tensor's. */
galley_status bind_check_input(const Program *p,
                               const galley_tensor *const *inputs, int k,
                               galley_error *err) {
  const InputDecl *d = &p->inputs[k];
  const galley_tensor *t = inputs ? inputs[k] : NULL;
  if (!t)
    return prog_fail_at(err, GALLEY_EBIND, p, d->loc,
                        "input '%s' is not bound", d->name);
  int order = galley_tensor_order(t);
  if (order != d->order)
    return prog_fail_at(err, GALLEY_EBIND, p, d->loc,
                        "input '%s' is declared with %d mode%s but the bound "
                        "tensor has %d",
                        d->name, d->order, d->order == 1 ? "" : "s", order);
  double fill = galley_tensor_fill(t);
  if (d->has_fill && !same_fill(fill, d->fill) && fill != 0)
    return prog_fail_at(err, GALLEY_EBIND, p, d->loc,
                        "input '%s' is declared with fill %.17g but the bound "
                        "tensor has fill %.17g (declare it with 'fill %.17g')",
                        d->name, d->fill, fill, fill);
  return GALLEY_OK;
}

double bind_input_fill(const Program *p, const galley_tensor *const *inputs,
                       int k) {
  const InputDecl *d = &p->inputs[k];
  const galley_tensor *t = inputs ? inputs[k] : NULL;
  if (d->has_fill || !t)
    return d->fill;
  return galley_tensor_fill(t);
}

galley_status bind_check_inputs(const Program *p,
                                const galley_tensor *const *inputs,
                                galley_error *err) {
  galley_status st = GALLEY_OK;
  for (int k = 0; k < p->ninputs && st == GALLEY_OK; k++)
    st = bind_check_input(p, inputs, k, err);
  return st;
}

/* What fixed an index's size first: an access (node, mode), or `dim`
 * (node NULL). */
typedef struct SizeSource {
  const Node *node;
  int mode;
} SizeSource;

/* The state of inferring one query's index sizes. */
typedef struct Sizing {
  const Program *p;
  const Query *q;
  const galley_tensor *const *inputs; /* bound inputs */
  const int64_t (*qdims)[GALLEY_MAX_ORDER]; /* dims of earlier results */
  int64_t *sizes;                     /* per index id, -1 = unknown */
  SizeSource *src;                    /* per index id */
  galley_error *err;
} Sizing;

/* The name of the tensor an access reads. */
static const char *access_name(const Program *p, const Node *n) {
  return n->kind == ND_INPUT ? p->inputs[n->tensor].name
                             : p->queries[n->tensor].name;
}

static const DimDecl *find_dim(const Program *p, const char *name) {
  for (int d = 0; d < p->ndims; d++)
    if (strcmp(p->dims[d].name, name) == 0)
      return &p->dims[d];
  return NULL;
}

/* The error for index id having size `size` at mode `mode` of access n
 * when an earlier source gave it another size. */
static galley_status size_conflict(Sizing *s, int id, const Node *n, int mode,
                                   int64_t size) {
  const Program *p = s->p;
  const Index *ix = &s->q->indices[id];
  const SizeSource *was = &s->src[id];
  long long now = (long long)size, before = (long long)s->sizes[id];
  const char *name = access_name(p, n);
  if (!was->node) {
    const DimDecl *d = find_dim(p, ix->name);
    Loc dl = d ? d->loc : ix->loc;
    return prog_fail_at(s->err, GALLEY_EBIND, p, n->loc,
                        "index '%s' has size %lld here (mode %d of '%s') but "
                        "'dim %s = %lld' at %d:%d fixes it",
                        ix->name, now, mode, name, ix->name, before, dl.line,
                        dl.col);
  }
  if (was->node == n)
    return prog_fail_at(s->err, GALLEY_EBIND, p, n->loc,
                        "index '%s' has size %lld here (mode %d of '%s') but "
                        "size %lld in mode %d of the same access",
                        ix->name, now, mode, name, before, was->mode);
  return prog_fail_at(s->err, GALLEY_EBIND, p, n->loc,
                      "index '%s' has size %lld here (mode %d of '%s') but "
                      "size %lld at %d:%d (mode %d of '%s')",
                      ix->name, now, mode, name, before, was->node->loc.line,
                      was->node->loc.col, was->mode,
                      access_name(p, was->node));
}

/* Take the sizes of an access's indices from the tensor it reads. */
static galley_status size_access(Sizing *s, const Node *n) {
  for (int k = 0; k < n->nidx; k++) {
    int id = n->idx[k];
    int64_t size = n->kind == ND_INPUT
                       ? galley_tensor_dim(s->inputs[n->tensor], k)
                       : s->qdims[n->tensor][k];
    if (s->sizes[id] < 0) {
      s->sizes[id] = size;
      s->src[id] = (SizeSource){n, k};
    } else if (s->sizes[id] != size) {
      return size_conflict(s, id, n, k, size);
    }
  }
  return GALLEY_OK;
}

/* Walk the expression in source order (arguments left to right), so that
 * a conflict is reported at the later of the two accesses. */
static galley_status size_walk(Sizing *s, const Node *n) {
  galley_status st = GALLEY_OK;
  switch (n->kind) {
  case ND_INPUT:
  case ND_ALIAS:
    return size_access(s, n);
  case ND_MAP:
    for (int a = 0; a < n->nargs && st == GALLEY_OK; a++)
      st = size_walk(s, n->args[a]);
    return st;
  case ND_AGG:
    return size_walk(s, n->arg);
  case ND_CONST:
  case ND_PARAM:
    break;
  }
  return GALLEY_OK;
}

galley_status bind_query_sizes(const Program *p, int qi,
                               const galley_tensor *const *inputs,
                               const int64_t (*qdims)[GALLEY_MAX_ORDER],
                               int64_t *sizes, galley_error *err) {
  const Query *q = &p->queries[qi];
  SizeSource small[64];
  SizeSource *src = q->nindices <= 64
                        ? small
                        : malloc((size_t)q->nindices * sizeof *src);
  if (!src) {
    if (err) {
      err->status = GALLEY_ENOMEM;
      err->line = err->col = 0;
      snprintf(err->msg, sizeof err->msg, "out of memory");
    }
    return GALLEY_ENOMEM;
  }
  Sizing s = {p, q, inputs, qdims, sizes, src, err};
  for (int id = 0; id < q->nindices; id++) {
    sizes[id] = q->indices[id].dim;
    src[id] = (SizeSource){NULL, 0};
  }
  galley_status st = size_walk(&s, q->expr);
  for (int id = 0; id < q->nindices && st == GALLEY_OK; id++)
    if (sizes[id] < 0)
      st = prog_fail_at(err, GALLEY_EBIND, p, q->indices[id].loc,
                        "cannot infer the size of index '%s' in query '%s': "
                        "it indexes no tensor and no 'dim %s = N' fixes it",
                        q->indices[id].name, q->name, q->indices[id].name);
  if (src != small)
    free(src);
  return st;
}
