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

/* Whether split factor f reads one of its input's exceptions at the
 * current point: a scan of the few exceptions (cheaper than a lookup)
 * when there are few, else a lookup. */
static int is_exception(Corrector *C, const Node *f) {
  const rt_exceptions *e = C->exc[f->access];
  if (e->n > 16)
    return !isfinite(access_value(C, f));
  for (int64_t j = 0; j < e->n; j++) {
    int m = 0;
    while (m < f->nidx && e->crd[j * e->order + m] == C->at[f->idx[m]])
      m++;
    if (m == f->nidx)
      return 1;
  }
  return 0;
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

/* Room for the points the exceptions will visit (at most: an entry on
 * a repeated index visits fewer), so that push never grows. */
static int reserve(Corrector *C, const Node *const *f, int nf) {
  const PhysQuery *q = C->q;
  double points = 0;
  for (int p = 0; p < nf; p++) {
    if (!is_split_factor(q, f[p]))
      continue;
    double extent = 1;
    for (int id = 0; id < q->nindices; id++) {
      int bound = 0;
      for (int m = 0; m < f[p]->nidx; m++)
        bound |= f[p]->idx[m] == id;
      if (!bound)
        extent *= (double)q->indices[id].dim;
    }
    points += (double)C->exc[f[p]->access]->n * extent;
  }
  if (points < 1 || points > 1e9)
    return 0; /* push grows as needed */
  int nout = q->nout ? q->nout : 1;
  C->crd = malloc((size_t)points * (size_t)nout * sizeof *C->crd);
  C->val = malloc((size_t)points * sizeof *C->val);
  if (!C->crd || !C->val)
    return -1;
  C->cap = (int64_t)points;
  return 0;
}

/* Every point with factor p bound to the current exception: the free
 * indices (at[id] < 0 on entry) loop over their extents. */
/* One point: its term, unless an earlier factor is exceptional there
 * (then it was counted with that factor). */
static inline int point(Corrector *C, const Node *const *f, int p) {
  for (int k = 0; k < p; k++)
    if (is_split_factor(C->q, f[k]) && is_exception(C, f[k]))
      return 0;
  const Node *e = C->q->expr;
  if (C->product2) /* what eval gives, without its walk */
    return push(C, access_value(C, e->args[0]) * access_value(C, e->args[1]));
  return push(C, eval(C, e));
}

static int visit(Corrector *C, const Node *const *f, int p, int id) {
  const PhysQuery *q = C->q;
  while (id < q->nindices && C->at[id] >= 0)
    id++;
  if (id == q->nindices)
    return point(C, f, p);
  int next = id + 1;
  while (next < q->nindices && C->at[next] >= 0)
    next++;
  int64_t dim = q->indices[id].dim;
  int st = 0;
  for (int64_t x = 0; x < dim && st == 0; x++) {
    C->at[id] = x;
    st = next == q->nindices ? point(C, f, p) : visit(C, f, p, next);
  }
  C->at[id] = -1;
  return st;
}

/* The terms of factor p's exceptions. */
static int correct_factor(Corrector *C, const Node *const *f, int p,
                          const rt_exceptions *e) {
  const PhysQuery *q = C->q;
  const Node *n = f[p];
  for (int64_t j = 0; j < e->n; j++) {
    for (int id = 0; id < q->nindices; id++)
      C->at[id] = -1;
    int ok = 1;
    for (int m = 0; m < n->nidx && ok; m++) {
      int64_t c = e->crd[j * e->order + m];
      int id = n->idx[m];
      ok = C->at[id] < 0 || C->at[id] == c; /* A[i,i] reads the diagonal */
      C->at[id] = c;
    }
    C->fixed = n;
    C->fixed_val = e->val[j];
    int st = ok ? visit(C, f, p, 0) : 0;
    C->fixed = NULL;
    if (st < 0)
      return -1;
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

/* A result of a dense level over one sorted list (CSR and the like):
 * merge the new points into each row's list in place, from the last
 * entry backwards (an entry moves right by the points inserted before
 * it), after growing the arrays: one pass, no second copy (the general
 * rebuild would sort everything again). */
#define MERGE_ROWS(POS, CRD, T)                                               \
  do {                                                                        \
    T *crd = realloc(CRD, (size_t)(total + 1) * sizeof *crd);                 \
    if (!crd)                                                                 \
      return rt_error(err, GALLEY_ENOMEM, "out of memory");                   \
    CRD = crd;                                                                \
    double *val = realloc(t->val, (size_t)(total + 1) * sizeof *val);         \
    if (!val)                                                                 \
      return rt_error(err, GALLEY_ENOMEM, "out of memory");                   \
    t->val = val;                                                             \
    int64_t k = total, j = np - 1;                                            \
    for (int64_t r = L->npar - 1; r >= 0; r--) {                              \
      int64_t end = k, a = (POS)[r + 1] - 1, a0 = (POS)[r];                   \
      for (;;) { /* k > a always: the writes stay ahead of the reads */       \
        while (j >= 0 && done[j])                                             \
          j--;                                                                \
        int in_row = j >= 0 && prow[2 * j] == r;                              \
        if (a >= a0 && (!in_row || crd[a] > prow[2 * j + 1])) {               \
          crd[--k] = crd[a];                                                  \
          val[k] = val[a--];                                                  \
        } else if (in_row) {                                                  \
          crd[--k] = (T)prow[2 * j + 1];                                      \
          val[k] = pval[j--];                                                 \
        } else {                                                              \
          break;                                                              \
        }                                                                     \
      }                                                                       \
      (POS)[r + 1] = (T)end;                                                  \
    }                                                                         \
    L->nset = L->nchild = t->nval = total;                                    \
  } while (0)

static int is_rows_layout(const galley_tensor *t) {
  return t->order == 2 && !t->borrowed &&
         t->lvl[0].kind == GALLEY_RT_DENSE && t->lvl[1].kind == GALLEY_RT_LIST;
}

static galley_status merge_rows(galley_tensor *t, const int64_t *prow,
                                const double *pval,
                                const unsigned char *done, int64_t np,
                                int64_t nmiss, galley_error *err) {
  galley_level *L = &t->lvl[1];
  int64_t total = L->nset + nmiss;
  if (L->idx32 && total > GALLEY_RT_IDX32_MAX_NSET)
    return rt_level_set_width(L, 0) < 0
               ? rt_error(err, GALLEY_ENOMEM, "out of memory")
               : merge_rows(t, prow, pval, done, np, nmiss, err);
  if (L->idx32)
    MERGE_ROWS(L->pos32, L->crd32, int32_t);
  else
    MERGE_ROWS(L->pos, L->crd, int64_t);
  return GALLEY_OK;
}

/* The points of one row, perm[b .. e) (indices into C's points, in the
 * order found), sorted by column and summed per column into (*prow,
 * *pval) from m on; the new m.  A short row: a stable insertion sort
 * (the points of one exception come in column order, so such rows are
 * nearly sorted already).  A long one -- an exception's row, or two in
 * the same row, whose runs an insertion sort would merge in quadratic
 * time -- is summed in a dense table of the row's columns (scratch,
 * zeroed, with seen[]; left zeroed) and read back in column order: its
 * cost is the columns, what the exceptions touch anyway; a long row
 * with few columns touched (not in dense tables' favour) is sorted by
 * merging.  Equal points are summed in the order found either way. */
typedef struct RowScratch {
  int64_t ncols;
  double *sum;          /* ncols, or NULL until a long row needs it */
  unsigned char *seen;
  int64_t *tmp;         /* merge sort's buffer */
} RowScratch;

#define SHORT_ROW 32

static int64_t point_col(const Corrector *C, int cmode, int64_t v) {
  return C->crd[v * C->q->nout + cmode];
}

/* Stable merge sort of perm[0 .. n) by column (tmp: n entries). */
static void sort_by_col(const Corrector *C, int cmode, int64_t *perm,
                        int64_t *tmp, int64_t n) {
  if (n <= SHORT_ROW) {
    for (int64_t x = 1; x < n; x++) {
      int64_t v = perm[x], y = x, c = point_col(C, cmode, v);
      while (y > 0 && point_col(C, cmode, perm[y - 1]) > c) {
        perm[y] = perm[y - 1];
        y--;
      }
      perm[y] = v;
    }
    return;
  }
  int64_t h = n / 2;
  sort_by_col(C, cmode, perm, tmp, h);
  sort_by_col(C, cmode, perm + h, tmp, n - h);
  int64_t a = 0, b = h, k = 0;
  while (a < h || b < n)
    tmp[k++] = b == n || (a < h && point_col(C, cmode, perm[a]) <=
                                       point_col(C, cmode, perm[b]))
                   ? perm[a++]
                   : perm[b++];
  memcpy(perm, tmp, (size_t)n * sizeof *perm);
}

static int64_t emit_row(const Corrector *C, int cmode, int64_t r,
                        int64_t *perm, int64_t b, int64_t e,
                        RowScratch *S, int64_t *prow, double *pval,
                        int64_t m) {
  int64_t len = e - b;
  if (len > SHORT_ROW && 4 * len >= S->ncols && S->sum) {
    for (int64_t x = b; x < e; x++) {
      int64_t v = perm[x], c = point_col(C, cmode, v);
      S->sum[c] = S->seen[c] ? S->sum[c] + C->val[v] : C->val[v];
      S->seen[c] = 1;
    }
    for (int64_t c = 0; c < S->ncols; c++)
      if (S->seen[c]) {
        prow[2 * m] = r;
        prow[2 * m + 1] = c;
        pval[m++] = S->sum[c];
        S->seen[c] = 0;
        S->sum[c] = 0;
      }
    return m;
  }
  sort_by_col(C, cmode, perm + b, S->tmp, len);
  for (int64_t x = b; x < e; x++) {
    int64_t v = perm[x], c = point_col(C, cmode, v);
    if (m > 0 && prow[2 * m - 2] == r && prow[2 * m - 1] == c) {
      pval[m - 1] += C->val[v];
      continue;
    }
    prow[2 * m] = r;
    prow[2 * m + 1] = c;
    pval[m++] = C->val[v];
  }
  return m;
}

/* rt_sort_rows for a result of a dense level over a list (rows): a
 * counting sort by row, then each row by column (emit_row). */
static galley_status sort_by_rows(const Corrector *C, const galley_tensor *t,
                                  int64_t *np, int64_t **prow, double **pval,
                                  galley_error *err) {
  int rmode = t->lvl[0].mode, cmode = t->lvl[1].mode, nout = C->q->nout;
  int64_t nrows = t->lvl[0].dim, n = C->n, longest = 0;
  int64_t *start = calloc((size_t)nrows + 2, sizeof *start);
  int64_t *perm = rt_malloc_array(n + 1, sizeof *perm);
  *prow = rt_malloc_array(2 * n + 1, sizeof **prow);
  *pval = rt_malloc_array(n + 1, sizeof **pval);
  RowScratch S = {.ncols = t->lvl[1].dim};
  galley_status st = GALLEY_OK;
  if (!start || !perm || !*prow || !*pval)
    st = rt_error(err, GALLEY_ENOMEM, "out of memory");
  const int64_t *crd = C->crd;
  for (int64_t j = 0; st == GALLEY_OK && j < n; j++)
    start[crd[j * nout + rmode] + 2]++;
  for (int64_t r = 0; st == GALLEY_OK && r < nrows; r++) {
    longest = start[r + 2] > longest ? start[r + 2] : longest;
    start[r + 2] += start[r + 1];
  }
  if (st == GALLEY_OK && longest > SHORT_ROW) {
    S.tmp = rt_malloc_array(longest + 1, sizeof *S.tmp);
    if (4 * longest >= S.ncols) { /* a dense table serves some row */
      S.sum = calloc((size_t)S.ncols + 1, sizeof *S.sum);
      S.seen = calloc((size_t)S.ncols + 1, 1);
    }
    if (!S.tmp || (4 * longest >= S.ncols && (!S.sum || !S.seen)))
      st = rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  for (int64_t j = 0; st == GALLEY_OK && j < n; j++)
    perm[start[crd[j * nout + rmode] + 1]++] = j;
  int64_t m = 0;
  for (int64_t r = 0; st == GALLEY_OK && r < nrows; r++)
    if (start[r + 1] > start[r])
      m = emit_row(C, cmode, r, perm, start[r], start[r + 1], &S, *prow,
                   *pval, m);
  free(start);
  free(perm);
  free(S.sum);
  free(S.seen);
  free(S.tmp);
  *np = m;
  return st;
}

/* Add the corrections to *result: sorted into the result's level order
 * and summed per point (an O(n) radix sort), added in place where the
 * result stores the point; the others make a new layout. */
static galley_status apply(Corrector *C, galley_tensor **result,
                           galley_error *err) {
  galley_tensor *t = *result;
  int order = t->order;
  int colmap[GALLEY_MAX_ORDER];
  int64_t cdims[GALLEY_MAX_ORDER];
  for (int l = 0; l < order; l++) {
    colmap[l] = t->lvl[l].mode;
    cdims[l] = t->dims[t->lvl[l].mode];
  }
  int64_t np = 0, *prow = NULL;
  double *pval = NULL;
  galley_status st = GALLEY_OK;
  int rows = is_rows_layout(t);
  if (rows)
    st = sort_by_rows(C, t, &np, &prow, &pval, err);
  else if (order > 0)
    st = rt_sort_rows(C->n, order, C->crd, C->val, order, colmap, cdims, &np,
                      &prow, &pval, err);
  else { /* a scalar: one point */
    double sum = 0;
    for (int64_t j = 0; j < C->n; j++)
      sum += C->val[j];
    t->val[0] += sum;
    galley_tensor_touch(t);
    return GALLEY_OK;
  }
  unsigned char *done = st == GALLEY_OK ? calloc((size_t)np + 1, 1) : NULL;
  if (st == GALLEY_OK && !done)
    st = rt_error(err, GALLEY_ENOMEM, "out of memory");
  int64_t nmiss = 0;
  galley_pos from = 0;
  for (int64_t j = 0; st == GALLEY_OK && j < np; j++) {
    galley_pos p = 0;
    if (rows) { /* in row order: gallop along each row */
      if (j == 0 || prow[2 * j] != prow[2 * j - 2])
        from = galley_rt_pos(&t->lvl[1], prow[2 * j]);
      p = galley_rt_list_locate_from(&t->lvl[1], prow[2 * j], &from,
                                     prow[2 * j + 1]);
    }
    for (int l = 0; !rows && l < order && p >= 0; l++)
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
    st = rows ? merge_rows(t, prow, pval, done, np, nmiss, err)
             : rebuild(result, prow, pval, done, np, err);
  if (st == GALLEY_OK)
    galley_tensor_touch(*result); /* its values changed */
  free(prow);
  free(pval);
  free(done);
  return st;
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
  if (st == GALLEY_OK && reserve(&C, f, nf) < 0)
    st = rt_error(err, GALLEY_ENOMEM, "out of memory");
  for (int p = 0; st == GALLEY_OK && p < nf; p++) {
    if (!is_split_factor(q, f[p]))
      continue;
    if (correct_factor(&C, f, p, C.exc[f[p]->access]) < 0)
      st = rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  if (st == GALLEY_OK && C.n > 0)
    st = apply(&C, result, err);
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
