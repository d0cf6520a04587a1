/*
 * exceptions.c -- exception splitting's correction pass (issue 12).
 *
 * A bound input that stores a few non-finite values (a collaboration
 * network with 4 infs among 190k entries) would make every product it
 * takes part in dense: 0 * inf is NaN, so no absent entry of another
 * factor may be skipped.  The planner (src/physical/default.c,
 * choose_split) instead splits such inputs in queries of the shape
 *
 *     out[O] = sum(R: F_1 * F_2 * ... * F_m)     (or no sum)
 *
 * whose factors are accesses of split inputs or of finite range.  With
 * E_p the non-finite entries of factor p, the points of the index space
 * fall into S_0 (no factor reads an entry of its E) and S_p (factor p
 * does, factors before p do not), so
 *
 *     out = sum over S_0 + sum_p sum over S_p.
 *
 * The kernel computes the first sum: it reads each split input's finite
 * part (the values with E replaced by 0, rt_tensor_exceptions), where a
 * point outside S_0 has a factor 0 and only finite factors, hence adds
 * exactly 0.  This file adds the rest: for each factor p and each entry
 * of E_p it binds the entry's coordinates, loops the indices the factor
 * does not bind over their whole extents (the dense meaning: inf * 0 is
 * NaN too), skips the points where an earlier split factor is
 * non-finite (they belong to that factor's S), and evaluates the whole
 * expression there on the full tensors.  Its cost is the number of
 * exceptional entries times the extents they touch.  The sums are added
 * to the result: in place where it stores the point, else by laying out
 * a new result with the points added (out_fill + terms).
 *
 * Only signs of zeros may differ from the dense evaluation (a term the
 * finite part makes +0 instead of -0), as tin.md allows for skipped
 * entries.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phys.h"
#include "rt_internal.h"

#define EXC_MAX_FACTORS 16

galley_status exc_prepare(const PhysPlan *pp,
                          const galley_tensor *const *inputs,
                          galley_error *err) {
  for (int n = 0; n < pp->nq; n++)
    for (int k = 0; k < pp->q[n].nacc; k++) {
      const PAccess *a = &pp->q[n].acc[k];
      if (!a->split || !a->is_input)
        continue;
      const rt_exceptions *e;
      galley_status st = rt_tensor_exceptions(inputs[a->tensor], &e, err);
      if (st != GALLEY_OK)
        return st;
    }
  return GALLEY_OK;
}

const galley_tensor *exc_input(const galley_tensor *t, const PAccess *a) {
  if (!a->split)
    return t;
  const rt_exceptions *e = rt_tensor_exceptions_kept(t);
  return e ? e->finite : t; /* exc_prepare made them before the run */
}

/* ------------------------------------------------------------------ */
/* Evaluating the expression at one point, on the full tensors          */
/* ------------------------------------------------------------------ */

typedef struct Corrector {
  const PhysQuery *q;
  const galley_tensor **full; /* per access: the tensor with exceptions */
  const rt_exceptions **exc;  /* per split access: its input's exceptions */
  /* per access: where the last lookup in its last level's list ended,
   * so that lookups in increasing order (the free index's loop) gallop
   * on instead of searching from scratch */
  galley_pos *par, *from;
  galley_crd *last;
  int64_t *at;                /* per index id: its coordinate, -1 free */
  /* the factor bound to the exception being corrected and its value
   * (known: no lookup at each point) */
  const Node *fixed;
  double fixed_val;
  int product2;               /* expr is a * b of two accesses */
  int level_mode[GALLEY_MAX_ORDER]; /* the result's levels' output modes */
  /* the sums found, by output point: nout coordinates then the value */
  int64_t n, cap;
  int64_t *crd;
  double *val;
} Corrector;

/* The value of t (read with fill `fill`) at logical coordinates c. */
static double value_at(const galley_tensor *t, double fill, const int64_t *c) {
  galley_pos p = 0;
  for (int l = 0; l < t->order && p >= 0; l++)
    p = galley_rt_locate(&t->lvl[l], p, c[t->lvl[l].mode]);
  return p >= 0 ? t->val[p] : fill;
}

static double access_value(Corrector *C, const Node *n) {
  if (n == C->fixed)
    return C->fixed_val;
  int64_t c[GALLEY_MAX_ORDER];
  for (int m = 0; m < n->nidx; m++)
    c[m] = C->at[n->idx[m]];
  const galley_tensor *t = C->full[n->access];
  int k = n->access, last = t->order - 1;
  if (t->order == 0 || t->lvl[last].kind != GALLEY_RT_LIST)
    return value_at(t, C->q->acc[k].fill, c);
  galley_pos p = 0;
  for (int l = 0; l < last && p >= 0; l++)
    p = galley_rt_locate(&t->lvl[l], p, c[t->lvl[l].mode]);
  if (p < 0)
    return C->q->acc[k].fill;
  const galley_level *L = &t->lvl[last];
  galley_crd i = c[L->mode];
  if (i < 0 || i >= L->dim)
    return C->q->acc[k].fill;
  if (C->par[k] != p || i < C->last[k]) { /* another fiber, or backwards */
    C->par[k] = p;
    C->from[k] = galley_rt_pos(L, p);
  }
  C->last[k] = i;
  galley_pos q = L->idx32 ? galley_rt_list_locate_from32(L, p, &C->from[k], i)
                          : galley_rt_list_locate_from64(L, p, &C->from[k], i);
  return q >= 0 ? t->val[q] : C->q->acc[k].fill;
}

static double eval(Corrector *C, const Node *n) {
  switch (n->kind) {
  case ND_CONST:
    return n->value;
  case ND_INPUT:
  case ND_ALIAS:
    return access_value(C, n);
  case ND_MAP: {
    if (n->nargs == 2) { /* the common case, without an array */
      double two[2] = {eval(C, n->args[0]), eval(C, n->args[1])};
      return ops_apply(n->op, two, 2);
    }
    double small[8] = {0};
    double *v = n->nargs <= 8 ? small : malloc((size_t)n->nargs * sizeof *v);
    if (!v)
      return NAN; /* unreachable in practice: maps take few arguments */
    for (int k = 0; k < n->nargs; k++)
      v[k] = eval(C, n->args[k]);
    double r = ops_apply(n->op, v, n->nargs);
    if (v != small)
      free(v);
    return r;
  }
  default:
    return NAN;
  }
}

/* The factors of the top-level product (as default.c's choose_split). */
static int factors(const Node *e, const Node **f, int n) {
  if (e->kind == ND_MAP && e->op->is_builtin && strcmp(e->op->name, "*") == 0) {
    for (int k = 0; k < e->nargs && n >= 0; k++)
      n = factors(e->args[k], f, n);
    return n;
  }
  if (n < 0 || n >= EXC_MAX_FACTORS)
    return -1;
  f[n] = e;
  return n + 1;
}

static int is_split_factor(const PhysQuery *q, const Node *f) {
  return (f->kind == ND_INPUT || f->kind == ND_ALIAS) && q->acc[f->access].split;
}

/* Every correction term is non-finite: the expression is the product
 * of the factors (choose_split), one of which is the exception, and
 * inf or NaN times anything is inf or NaN.  A sum of such terms is NaN
 * when one is NaN or both infinities occur, else the one infinity, in
 * any order and however often each term is added.  So a point's
 * correction is a class (CLS_POS | CLS_NEG, NaN both), a term counted
 * twice (a point where two factors are exceptional) changes nothing,
 * and the terms of a summed index stop mattering once the class is
 * NaN. */
enum { CLS_POS = 1, CLS_NEG = 2, CLS_NAN = 3 };

static unsigned char class_of(double v) {
  return isnan(v) ? CLS_NAN : v > 0 ? CLS_POS : CLS_NEG;
}

static double class_value(unsigned char c) {
  return c == CLS_POS ? INFINITY : c == CLS_NEG ? -INFINITY : NAN;
}

/* Record value v at the current point's output coordinates. */
static int push(Corrector *C, double v) {
  int nout = C->q->nout;
  if (C->n == C->cap) {
    int64_t cap = C->cap ? 2 * C->cap : 256;
    int64_t *crd = realloc(C->crd, (size_t)(cap * (nout ? nout : 1)) *
                                       sizeof *crd);
    if (crd)
      C->crd = crd;
    double *val = crd ? realloc(C->val, (size_t)cap * sizeof *val) : NULL;
    if (!crd || !val)
      return -1;
    C->val = val;
    C->cap = cap;
  }
  for (int m = 0; m < nout; m++)
    C->crd[C->n * nout + m] = C->at[C->q->out[m]];
  C->val[C->n++] = v;
  return 0;
}

/* The term at the current point (every index bound). */
static double term(Corrector *C) {
  const Node *e = C->q->expr;
  if (C->product2) /* what eval gives, without its walk */
    return access_value(C, e->args[0]) * access_value(C, e->args[1]);
  return eval(C, e);
}

/* OR into *cls the classes of the terms over the free summed indices
 * sum[0..ns) at the current output point, stopping at NaN; 1 when NaN
 * was reached, -1 when a term was finite (the invariant above broken:
 * an internal error, never a silently wrong result). */
/* The sum of the terms over sum[0..ns) at the current point. */
static double summed_value(Corrector *C, const int *sum, int ns) {
  if (ns == 0)
    return term(C);
  int id = sum[0];
  double s = 0;
  for (int64_t x = 0; x < C->q->indices[id].dim; x++) {
    C->at[id] = x;
    s += summed_value(C, sum + 1, ns - 1);
  }
  C->at[id] = -1;
  return s;
}

/* A split input distributed into the sum (PhysQuery.split_factored, the
 * SDDMM S * sum(k: U V)): the term as written is the exception times
 * the sum of the rest (finite factors), inf * dot: NaN where dot is 0,
 * its sign by dot's.  O(extent of the sum) per exception. */
static int factored_class(Corrector *C, const int *sum, int ns,
                          unsigned char *cls) {
  double v = C->fixed_val;
  C->fixed_val = 1;
  double t = v * summed_value(C, sum, ns);
  C->fixed_val = v;
  if (isfinite(t))
    return -1;
  *cls |= class_of(t);
  return *cls == CLS_NAN;
}

static int summed_class(Corrector *C, const int *sum, int ns,
                        unsigned char *cls) {
  if (C->q->split_factored && C->fixed)
    return factored_class(C, sum, ns, cls);
  if (ns == 0) {
    double v = term(C);
    if (isfinite(v))
      return -1;
    *cls |= class_of(v);
    return *cls == CLS_NAN;
  }
  int id = sum[0], st = 0;
  int64_t dim = C->q->indices[id].dim;
  for (int64_t x = 0; x < dim && st == 0; x++) {
    C->at[id] = x;
    st = summed_class(C, sum + 1, ns - 1, cls);
  }
  C->at[id] = -1;
  return st;
}

/* The free indices of the current exception (at[id] < 0): the output
 * ones into out[] (in the result's level order), the summed ones into
 * sum[]; their numbers. */
static void free_indices(const Corrector *C, int *out, int *nout_free,
                         int *sum, int *nsum) {
  const PhysQuery *q = C->q;
  *nout_free = *nsum = 0;
  for (int m = 0; m < q->nout; m++) {
    int id = q->out[C->level_mode[m]];
    if (C->at[id] < 0)
      out[(*nout_free)++] = id;
  }
  for (int id = 0; id < q->nindices; id++) {
    int is_out = 0;
    for (int m = 0; m < q->nout; m++)
      is_out |= q->out[m] == id;
    if (!is_out && C->at[id] < 0)
      sum[(*nsum)++] = id;
  }
}

/* The general path: every output point of the free output indices
 * out[0..no) gets one point, the class of its summed terms. */
static int visit_out(Corrector *C, const int *out, int no, const int *sum,
                     int ns) {
  if (no == 0) {
    unsigned char cls = 0;
    if (summed_class(C, sum, ns, &cls) < 0)
      return -2;
    return push(C, class_value(cls));
  }
  int id = out[0], st = 0;
  int64_t dim = C->q->indices[id].dim;
  for (int64_t x = 0; x < dim && st == 0; x++) {
    C->at[id] = x;
    st = visit_out(C, out + 1, no - 1, sum, ns);
  }
  C->at[id] = -1;
  return st;
}

/* Bind exception j of factor n: 0 when its coordinates contradict a
 * repeated index (A[i,i] reads the diagonal only), else 1. */
static int bind_exception(Corrector *C, const Node *n, const rt_exceptions *e,
                          int64_t j) {
  const PhysQuery *q = C->q;
  for (int id = 0; id < q->nindices; id++)
    C->at[id] = -1;
  int ok = 1;
  for (int m = 0; m < n->nidx && ok; m++) {
    int64_t c = e->crd[j * e->order + m];
    int id = n->idx[m];
    ok = C->at[id] < 0 || C->at[id] == c;
    C->at[id] = c;
  }
  C->fixed = n;
  C->fixed_val = e->val[j];
  return ok;
}

/* The terms of factor n's exceptions, as points (the general path).  A
 * scalar result stops once its class is NaN. */
static int correct_factor(Corrector *C, const Node *n, const rt_exceptions *e) {
  int out[GALLEY_MAX_ORDER], sum[GALLEY_MAX_ORDER * 4], no, ns;
  for (int64_t j = 0; j < e->n; j++) {
    if (C->q->nout == 0 && C->n > 0 && isnan(C->val[C->n - 1]))
      break; /* a scalar already NaN: nothing can change it */
    if (!bind_exception(C, n, e, j))
      continue;
    free_indices(C, out, &no, sum, &ns);
    int st = visit_out(C, out, no, sum, ns);
    C->fixed = NULL;
    if (st < 0)
      return st;
  }
  return 0;
}

/* ---- the rows path: a result of a dense level over one list (CSR) ---- */

/* The exceptions of a factor that binds the result's row index make
 * whole rows (every column gets a term), those of a factor that binds
 * the column index whole columns, those of one binding both single
 * points.  Their classes go to byte tables, one per distinct row or
 * column touched, and one backward pass over the result merges them
 * into its rows in place: no per-point records, no sorting. */
typedef struct Lines {
  int64_t n, cap;
  int64_t *at;          /* the row (or column) of each table, distinct */
  unsigned char **cls;  /* each table: a class per column (or row) */
} Lines;

static unsigned char *line_table(Lines *L, int64_t at, int64_t len) {
  for (int64_t k = 0; k < L->n; k++)
    if (L->at[k] == at)
      return L->cls[k];
  if (L->n == L->cap) {
    int64_t cap = L->cap ? 2 * L->cap : 8;
    int64_t *a = realloc(L->at, (size_t)cap * sizeof *a);
    if (a)
      L->at = a;
    unsigned char **c = a ? realloc(L->cls, (size_t)cap * sizeof *c) : NULL;
    if (!c)
      return NULL;
    L->cls = c;
    L->cap = cap;
  }
  unsigned char *t = calloc((size_t)len + 1, 1);
  if (!t)
    return NULL;
  L->at[L->n] = at;
  L->cls[L->n++] = t;
  return t;
}

static void lines_free(Lines *L) {
  for (int64_t k = 0; k < L->n; k++)
    free(L->cls[k]);
  free(L->at);
  free(L->cls);
}

/* Sort the tables by their row (column): few, by insertion. */
static void lines_sort(Lines *L) {
  for (int64_t x = 1; x < L->n; x++) {
    int64_t a = L->at[x], y = x;
    unsigned char *c = L->cls[x];
    for (; y > 0 && L->at[y - 1] > a; y--) {
      L->at[y] = L->at[y - 1];
      L->cls[y] = L->cls[y - 1];
    }
    L->at[y] = a;
    L->cls[y] = c;
  }
}

typedef struct RowsFix {
  int row_id, col_id;   /* the index ids of the result's row and column */
  int row_mode, col_mode; /* their output modes */
  int64_t nrows, ncols;
  Lines rows, cols;     /* whole rows, whole columns */
  unsigned char *row_scratch, *col_scratch; /* a row's, a column's length */
} RowsFix;

/* Writing the list level's arrays, either width (galley_rt_crd and
 * galley_rt_pos read them). */
static inline void set_crd(galley_level *L, int64_t a, int64_t c) {
  if (L->idx32)
    L->crd32[a] = (int32_t)c;
  else
    L->crd[a] = c;
}

static inline void set_pos(galley_level *L, int64_t r, int64_t p) {
  if (L->idx32)
    L->pos32[r] = (int32_t)p;
  else
    L->pos[r] = p;
}

/* The other access of a product of two (product2) when it is a matrix
 * stored as rows (a dense level over one list), else NULL. */
static const Node *other_rows_factor(const Corrector *C) {
  const Node *e = C->q->expr;
  if (!C->product2)
    return NULL;
  const Node *g = e->args[0] == C->fixed ? e->args[1] : e->args[0];
  const galley_tensor *T = C->full[g->access];
  if (g->nidx != 2 || T->order != 2 || T->lvl[0].kind != GALLEY_RT_DENSE ||
      T->lvl[1].kind != GALLEY_RT_LIST)
    return NULL;
  return g;
}

/* Binary search of column c in row r's sorted list [b, e). */
static galley_pos find_in_row(const galley_level *L, galley_pos b,
                              galley_pos e, int64_t c) {
  while (b < e) {
    galley_pos m = b + (e - b) / 2;
    int64_t x = galley_rt_crd(L, m);
    if (x == c)
      return m;
    if (x < c)
      b = m + 1;
    else
      e = m;
  }
  return -1;
}

/* A product of two accesses with no summed free index, whose other
 * factor g is stored as rows: the exception's line without per-point
 * lookups.  Along g's list level it walks g's one row: every point
 * takes the class of the exception times g's fill, then the row's
 * stored entries their own (into scratch, then OR-ed into t: t may
 * hold another exception's classes).  Along g's dense level (a column
 * of g) it searches each row for the one column, in row order.  1 when
 * done, 0 when the shape needs the general walk. */
static int line_walk(Corrector *C, int along, int64_t len, unsigned char *t,
                     unsigned char *scratch) {
  const Node *g = other_rows_factor(C);
  if (!g)
    return 0;
  const galley_tensor *T = C->full[g->access];
  const galley_level *L0 = &T->lvl[0], *L = &T->lvl[1];
  int id0 = g->idx[L0->mode], id1 = g->idx[L->mode];
  double x = C->fixed_val, fill = C->q->acc[g->access].fill;
  unsigned char gap = class_of(x * fill);
  if (id0 == id1 || id0 < 0 || id1 < 0)
    return 0;
  if (id1 == along && C->at[id0] >= 0) { /* one row of g */
    int64_t r = C->at[id0];
    memset(scratch, gap, (size_t)len);
    if (r < L0->dim)
      for (galley_pos p = galley_rt_pos(L, r), e = galley_rt_pos(L, r + 1); p < e; p++) {
        int64_t c = galley_rt_crd(L, p);
        if (c < len)
          scratch[c] = class_of(x * T->val[p]);
      }
    for (int64_t k = 0; k < len; k++)
      t[k] |= scratch[k];
    return 1;
  }
  if (id0 == along && C->at[id1] >= 0) { /* one column of g */
    int64_t c = C->at[id1];
    for (int64_t r = 0; r < len; r++) {
      galley_pos p = r < L0->dim ? find_in_row(L, galley_rt_pos(L, r),
                                               galley_rt_pos(L, r + 1), c)
                                 : -1;
      t[r] |= p >= 0 ? class_of(x * T->val[p]) : gap;
    }
    return 1;
  }
  return 0;
}

/* One exception on the rows path: the terms of its line (a row when
 * `along` is the column index, a column when it is the row index) into
 * table t, each point's summed terms folded into its class.  A point
 * (both bound) goes to C's points. */
static int line_terms(Corrector *C, int along, int64_t len,
                      unsigned char *t, unsigned char *scratch,
                      const int *sum, int ns) {
  if (ns == 0 && line_walk(C, along, len, t, scratch))
    return 0;
  for (int64_t x = 0; x < len; x++) {
    C->at[along] = x;
    if (summed_class(C, sum, ns, &t[x]) < 0)
      return -2;
  }
  C->at[along] = -1;
  return 0;
}

static int rows_factor(Corrector *C, RowsFix *R, const Node *n,
                       const rt_exceptions *e) {
  int out[GALLEY_MAX_ORDER], sum[GALLEY_MAX_ORDER * 4], no, ns;
  for (int64_t j = 0; j < e->n; j++) {
    if (!bind_exception(C, n, e, j))
      continue;
    free_indices(C, out, &no, sum, &ns);
    int64_t r = C->at[R->row_id], c = C->at[R->col_id];
    int st = 0;
    if (r >= 0 && c >= 0) {
      unsigned char cls = 0;
      st = summed_class(C, sum, ns, &cls) < 0 ? -2 : push(C, class_value(cls));
    } else if (r >= 0 || c >= 0) {
      Lines *L = r >= 0 ? &R->rows : &R->cols;
      int64_t len = r >= 0 ? R->ncols : R->nrows;
      unsigned char *t = line_table(L, r >= 0 ? r : c, len);
      unsigned char *scratch = r >= 0 ? R->row_scratch : R->col_scratch;
      st = !t || !scratch ? -1
                          : line_terms(C, r >= 0 ? R->col_id : R->row_id, len,
                                       t, scratch, sum, ns);
    }
    C->fixed = NULL;
    if (st < 0)
      return st;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* Adding the sums to the result                                       */
/* ------------------------------------------------------------------ */

/* Lay out a new result: t's stored entries merged with the n points
 * rows[] (level order, sorted, distinct) valued vals[] (out_fill + the
 * sum; those t stores have been added in place and are marked in
 * done[]). */
static galley_status rebuild(galley_tensor **result, const int64_t *prow,
                             const double *pval, const unsigned char *done,
                             int64_t np, galley_error *err) {
  const galley_tensor *t = *result;
  int order = t->order;
  int64_t n = 0, *rows = NULL;
  double *vals = NULL;
  galley_status st = rt_tensor_rows(t, 0, &n, &rows, &vals, err);
  int64_t total = n + np;
  int64_t *orows = st == GALLEY_OK ? rt_malloc_array(total * order + 1,
                                                     sizeof *orows)
                                   : NULL;
  double *ovals = orows ? rt_malloc_array(total + 1, sizeof *ovals) : NULL;
  if (st == GALLEY_OK && (!orows || !ovals))
    st = rt_error(err, GALLEY_ENOMEM, "out of memory");
  if (st == GALLEY_OK) {
    int64_t i = 0, j = 0, k = 0;
    while (i < n || j < np) {
      if (j < np && done[j]) {
        j++;
        continue;
      }
      int c = j == np ? -1 : 0;
      for (int l = 0; l < order && c == 0 && i < n; l++)
        c = rows[i * order + l] < prow[j * order + l]   ? -1
            : rows[i * order + l] > prow[j * order + l] ? 1
                                                          : 0;
      if (i < n && c <= 0) {
        memcpy(orows + k * order, rows + i * order,
               (size_t)order * sizeof *orows);
        ovals[k++] = vals[i++];
      } else {
        memcpy(orows + k * order, prow + j * order,
               (size_t)order * sizeof *orows);
        ovals[k++] = pval[j++];
      }
    }
    galley_format fmt;
    galley_tensor_format(t, &fmt);
    galley_tensor *out = NULL;
    st = rt_build_sorted(order, t->dims, &fmt, t->fill, k, orows, ovals, &out,
                         err);
    if (st == GALLEY_OK) {
      galley_tensor_free(*result);
      *result = out;
    }
  }
  free(rows);
  free(vals);
  free(orows);
  free(ovals);
  return st;
}

static int is_rows_layout(const galley_tensor *t) {
  return t->order == 2 && !t->borrowed &&
         t->lvl[0].kind == GALLEY_RT_DENSE && t->lvl[1].kind == GALLEY_RT_LIST;
}

/* Grow the list level's coordinates and t's values to n entries. */
static int grow_rows(galley_tensor *t, int64_t n) {
  galley_level *L = &t->lvl[1];
  if (L->idx32 && n > GALLEY_RT_IDX32_MAX_NSET && rt_level_set_width(L, 0) < 0)
    return -1;
  if (L->idx32) {
    int32_t *c = realloc(L->crd32, (size_t)(n + 1) * sizeof *c);
    if (!c)
      return -1;
    L->crd32 = c;
  } else {
    int64_t *c = realloc(L->crd, (size_t)(n + 1) * sizeof *c);
    if (!c)
      return -1;
    L->crd = c;
  }
  double *v = realloc(t->val, (size_t)(n + 1) * sizeof *v);
  if (!v)
    return -1;
  t->val = v;
  return 0;
}

/* The points (both indices bound: one per exception of such a
 * factor) in row-then-column order, as indices into C's points: a
 * merge sort (tmp: n entries). */
static int point_before(const Corrector *C, const RowsFix *R, int64_t u,
                        int64_t v) {
  int rm = R->row_mode, cm = R->col_mode;
  int64_t ru = C->crd[2 * u + rm], rv = C->crd[2 * v + rm];
  return ru < rv || (ru == rv && C->crd[2 * u + cm] <= C->crd[2 * v + cm]);
}

static void sort_points(const Corrector *C, const RowsFix *R, int64_t *perm,
                        int64_t *tmp, int64_t n) {
  if (n < 2)
    return;
  int64_t h = n / 2;
  sort_points(C, R, perm, tmp, h);
  sort_points(C, R, perm + h, tmp, n - h);
  int64_t a = 0, b = h, k = 0;
  while (a < h || b < n)
    tmp[k++] = b == n || (a < h && point_before(C, R, perm[a], perm[b]))
                   ? perm[a++]
                   : perm[b++];
  memcpy(perm, tmp, (size_t)n * sizeof *perm);
}

/* Fold the whole columns and the points of a whole row into that row's
 * table, so that the merge reads one table there. */
static void fold_into_rows(const Corrector *C, RowsFix *R) {
  for (int64_t x = 0; x < R->rows.n; x++) {
    int64_t r = R->rows.at[x];
    unsigned char *t = R->rows.cls[x];
    for (int64_t y = 0; y < R->cols.n; y++)
      t[R->cols.at[y]] |= R->cols.cls[y][r];
    for (int64_t v = 0; v < C->n; v++)
      if (C->crd[2 * v + R->row_mode] == r)
        t[C->crd[2 * v + R->col_mode]] |= class_of(C->val[v]);
  }
}

/* A stored or fill value with a correction of class cls (0: none). */
static inline double corrected(double v, unsigned char cls) {
  return cls ? v + class_value(cls) : v;
}

/* Merge the corrections into t's rows in place, from the last row
 * backwards into arrays grown to an upper bound of the new size (an
 * entry moves right by the points inserted before it, so the writes
 * stay ahead of the reads), then shift everything down to offset 0:
 * one pass over the result plus the touched lines. */
/* Only points, each stored by t already (the SDDMM: the result has
 * S's pattern, the finite part's 0 included): add them in place, a
 * binary search each, instead of a pass over the whole result.  1 when
 * done, 0 when a point is not stored (nothing changed then). */
static int rows_apply_in_place(const Corrector *C, const RowsFix *R,
                               galley_tensor *t) {
  const galley_level *L = &t->lvl[1];
  if (R->rows.n || R->cols.n)
    return 0;
  int rm = R->row_mode, cm = R->col_mode;
  for (int pass = 0; pass < 2; pass++)
    for (int64_t v = 0; v < C->n; v++) {
      int64_t r = C->crd[2 * v + rm];
      galley_pos a = find_in_row(L, galley_rt_pos(L, r), galley_rt_pos(L, r + 1),
                                 C->crd[2 * v + cm]);
      if (a < 0)
        return 0; /* (found in the first pass, or never) */
      if (pass == 1)
        t->val[a] += C->val[v];
    }
  galley_tensor_touch(t); /* its values changed */
  return 1;
}

static galley_status rows_apply(const Corrector *C, RowsFix *R,
                                galley_tensor *t, galley_error *err) {
  if (rows_apply_in_place(C, R, t))
    return GALLEY_OK;
  galley_level *L = &t->lvl[1];
  int64_t nrows = R->nrows, ncols = R->ncols, np = C->n;
  int64_t bound = L->nset + R->rows.n * ncols + R->cols.n * nrows + np;
  int64_t *perm = rt_malloc_array(np + 1, sizeof *perm);
  int64_t *tmp = rt_malloc_array(np + 1, sizeof *tmp);
  if (!perm || !tmp || grow_rows(t, bound) < 0) {
    free(perm);
    free(tmp);
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  for (int64_t v = 0; v < np; v++)
    perm[v] = v;
  sort_points(C, R, perm, tmp, np);
  lines_sort(&R->rows);
  lines_sort(&R->cols);
  fold_into_rows(C, R);
  double *val = t->val, fill = t->fill;
  int rm = R->row_mode, cm = R->col_mode;
  int64_t k = bound, ri = R->rows.n - 1, pj = np - 1;
  for (int64_t r = nrows - 1; r >= 0; r--) {
    int64_t end = k, a = galley_rt_pos(L, r + 1) - 1, a0 = galley_rt_pos(L, r);
    if (ri >= 0 && R->rows.at[ri] == r) { /* a whole row */
      const unsigned char *tbl = R->rows.cls[ri--];
      for (int64_t c = ncols - 1; c >= 0; c--) {
        double v = a >= a0 && galley_rt_crd(L, a) == c ? val[a--] : fill;
        set_crd(L, --k, c);
        val[k] = corrected(v, tbl[c]);
      }
      while (pj >= 0 && C->crd[2 * perm[pj] + rm] == r)
        pj--;
    } else {
      int64_t kc = R->cols.n - 1;
      for (;;) {
        int64_t cc = kc >= 0 ? R->cols.at[kc] : -1;
        int in_row = pj >= 0 && C->crd[2 * perm[pj] + rm] == r;
        int64_t cp = in_row ? C->crd[2 * perm[pj] + cm] : -1;
        int64_t next = cp > cc ? cp : cc; /* the next corrected column */
        /* the stored entries right of it move as they are */
        for (int64_t cs; a >= a0 && (cs = galley_rt_crd(L, a)) > next; a--) {
          set_crd(L, --k, cs);
          val[k] = val[a];
        }
        if (next < 0)
          break;
        int64_t cs = a >= a0 ? galley_rt_crd(L, a) : -1, c = next;
        unsigned char cls = 0;
        double v = cs == c ? val[a--] : fill;
        if (cc == c)
          cls |= R->cols.cls[kc--][r];
        while (pj >= 0 && C->crd[2 * perm[pj] + rm] == r &&
               C->crd[2 * perm[pj] + cm] == c)
          cls |= class_of(C->val[perm[pj--]]);
        set_crd(L, --k, c);
        val[k] = corrected(v, cls);
      }
    }
    set_pos(L, r + 1, end);
  }
  int64_t total = bound - k;
  if (k > 0) { /* shift down to offset 0 */
    if (L->idx32)
      memmove(L->crd32, L->crd32 + k, (size_t)total * sizeof *L->crd32);
    else
      memmove(L->crd, L->crd + k, (size_t)total * sizeof *L->crd);
    memmove(val, val + k, (size_t)total * sizeof *val);
    for (int64_t r = 1; r <= nrows; r++)
      set_pos(L, r, galley_rt_pos(L, r) - k);
  }
  set_pos(L, 0, 0);
  L->nset = L->nchild = t->nval = total;
  free(perm);
  free(tmp);
  galley_tensor_touch(t); /* its values changed */
  return GALLEY_OK;
}

/* Add the points' sums to *result (the general path): sorted into the
 * result's level order and summed per point (an O(n) radix sort),
 * added in place where the result stores the point; the others make a
 * new layout. */
static galley_status apply(Corrector *C, galley_tensor **result,
                           galley_error *err) {
  galley_tensor *t = *result;
  int order = t->order;
  if (order == 0) { /* a scalar: one point */
    double sum = 0;
    for (int64_t j = 0; j < C->n; j++)
      sum += C->val[j];
    t->val[0] += sum;
    galley_tensor_touch(t);
    return GALLEY_OK;
  }
  int colmap[GALLEY_MAX_ORDER];
  int64_t cdims[GALLEY_MAX_ORDER];
  for (int l = 0; l < order; l++) {
    colmap[l] = t->lvl[l].mode;
    cdims[l] = t->dims[t->lvl[l].mode];
  }
  int64_t np = 0, *prow = NULL;
  double *pval = NULL;
  galley_status st = rt_sort_rows(C->n, order, C->crd, C->val, order, colmap,
                                  cdims, &np, &prow, &pval, err);
  unsigned char *done = st == GALLEY_OK ? calloc((size_t)np + 1, 1) : NULL;
  if (st == GALLEY_OK && !done)
    st = rt_error(err, GALLEY_ENOMEM, "out of memory");
  int64_t nmiss = 0;
  for (int64_t j = 0; st == GALLEY_OK && j < np; j++) {
    galley_pos p = 0;
    for (int l = 0; l < order && p >= 0; l++)
      p = galley_rt_locate(&t->lvl[l], p, prow[j * order + l]);
    if (p >= 0) {
      t->val[p] += pval[j];
      done[j] = 1;
    } else {
      pval[j] += t->fill;
      nmiss++;
    }
  }
  if (st == GALLEY_OK && nmiss > 0)
    st = rebuild(result, prow, pval, done, np, err);
  if (st == GALLEY_OK)
    galley_tensor_touch(*result); /* its values changed */
  free(prow);
  free(pval);
  free(done);
  return st;
}

/* Whether every split factor binds the result's row or column index
 * (then the rows path serves: no exception touches the whole result). */
static int rows_path_fits(const PhysQuery *q, const Node *const *f, int nf,
                          const RowsFix *R) {
  for (int p = 0; p < nf; p++) {
    if (!is_split_factor(q, f[p]))
      continue;
    int binds = 0;
    for (int m = 0; m < f[p]->nidx; m++)
      binds |= f[p]->idx[m] == R->row_id || f[p]->idx[m] == R->col_id;
    if (!binds)
      return 0;
  }
  return 1;
}

static galley_status corrector_error(int st, const PhysQuery *q,
                                     galley_error *err) {
  if (st == -2)
    return rt_error(err, GALLEY_EINTERNAL, "internal error: a correction "
                    "term of query '%s' is finite", q->name);
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
}

galley_status exc_correct(const PhysPlan *pp, int n,
                          const galley_tensor *const *inputs,
                          galley_tensor *const *res,
                          const galley_tensor *const *kept,
                          galley_tensor **result, galley_error *err) {
  const PhysQuery *q = &pp->q[n];
  const Node *f[EXC_MAX_FACTORS];
  int nf = factors(q->expr, f, 0);
  Corrector C = {.q = q};
  const Node *x = q->expr;
  C.product2 = x->kind == ND_MAP && x->op->is_builtin && x->nargs == 2 &&
               strcmp(x->op->name, "*") == 0 &&
               (x->args[0]->kind == ND_INPUT || x->args[0]->kind == ND_ALIAS) &&
               (x->args[1]->kind == ND_INPUT || x->args[1]->kind == ND_ALIAS);
  for (int m = 0; m < q->nout; m++)
    C.level_mode[m] = m < (*result)->order ? (*result)->lvl[m].mode : m;
  RowsFix R = {.row_id = -1};
  int rows = q->nout == 2 && is_rows_layout(*result);
  if (rows) {
    R.row_mode = (*result)->lvl[0].mode;
    R.col_mode = (*result)->lvl[1].mode;
    R.row_id = q->out[R.row_mode];
    R.col_id = q->out[R.col_mode];
    R.nrows = (*result)->lvl[0].dim;
    R.ncols = (*result)->lvl[1].dim;
    rows = rows_path_fits(q, f, nf, &R);
    R.row_scratch = rows ? malloc((size_t)R.ncols + 1) : NULL;
    R.col_scratch = rows ? malloc((size_t)R.nrows + 1) : NULL;
  }
  C.full = calloc((size_t)q->nacc + 1, sizeof *C.full);
  C.at = calloc((size_t)q->nindices + 1, sizeof *C.at);
  C.exc = calloc((size_t)q->nacc + 1, sizeof *C.exc);
  C.par = malloc(((size_t)q->nacc + 1) * sizeof *C.par);
  C.from = calloc((size_t)q->nacc + 1, sizeof *C.from);
  C.last = calloc((size_t)q->nacc + 1, sizeof *C.last);
  for (int k = 0; C.par && k < q->nacc; k++)
    C.par[k] = -1;
  galley_status st = GALLEY_OK;
  if (!C.full || !C.at || !C.exc || !C.par || !C.from || !C.last)
    st = rt_error(err, GALLEY_ENOMEM, "out of memory");
  for (int k = 0; st == GALLEY_OK && k < q->nacc; k++) {
    const PAccess *a = &q->acc[k];
    C.full[k] = a->split ? inputs[a->split_input]
                : a->is_input ? inputs[a->tensor]
                : res[a->tensor] ? res[a->tensor] : kept[a->tensor];
    if (a->split && !(C.exc[k] = rt_tensor_exceptions_kept(C.full[k])))
      st = rt_error(err, GALLEY_EINTERNAL, "internal error: the exceptions "
                    "of query '%s' were not prepared", q->name);
  }
  for (int p = 0; st == GALLEY_OK && p < nf; p++) {
    if (!is_split_factor(q, f[p]))
      continue;
    const rt_exceptions *e = C.exc[f[p]->access];
    int s = rows ? rows_factor(&C, &R, f[p], e) : correct_factor(&C, f[p], e);
    if (s < 0)
      st = corrector_error(s, q, err);
  }
  if (st == GALLEY_OK && rows)
    st = rows_apply(&C, &R, *result, err);
  else if (st == GALLEY_OK && C.n > 0)
    st = apply(&C, result, err);
  lines_free(&R.rows);
  lines_free(&R.cols);
  free(R.row_scratch);
  free(R.col_scratch);
  free(C.full);
  free(C.exc);
  free(C.par);
  free(C.from);
  free(C.last);
  free(C.at);
  free(C.crd);
  free(C.val);
  return st;
}
