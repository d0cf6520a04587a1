/*
 * plan.c -- physical plans: the printer, constant folding over absent
 * accesses (phys_absent_value), and freeing.
 *
 * Printed form.  One line per physical query, in plan order:
 *
 *   Query(C[i,k], Mat(dense:0,dense:1, Agg(+, j, Map(*, A[i::it,j::it],
 *         B[j::lu,k::it]))), loops(i:lead, j:lead, k:lead), fill 0)
 *
 * (on one line).  In detail:
 *   - `Query(NAME[out], BODY, loops(...), fill V)` for a kernel query:
 *     NAME is the program query's name or "_t<N>" for a lifted aggregate
 *     (N = its number in the plan); [out] lists the output indices in the
 *     result's logical mode order (a scalar prints as NAME alone).
 *   - BODY = `Mat(FORMAT, EXPR)` with the result's storage format in
 *     galley_format_print's syntax (`dense:0,list:1`; a scalar `scalar`);
 *     EXPR starts with `Agg(OP, red..., ...)` when the query aggregates
 *     (OP as the pointwise name: +, *, max, min, ||, &&, user name).
 *   - Expressions: `Map(OP, args...)`, constants with %.17g (`nan`), and
 *     accesses `NAME[i::it,j::lu]`: the tensor read (input, program query
 *     or "_t<N>"), its indices in LOGICAL mode order as written in the
 *     program, each with the protocol of the storage level holding that
 *     mode (`it` iterate, `lu` lookup).  A scalar access prints as NAME.
 *   - `loops(i:M, ...)`: the loop order, outermost first, each with its
 *     merge: dense, lead, union or intersect (the leader of a `lead` loop
 *     is the one access iterating that index; an `intersect` loop merges
 *     the sorted lists of every access iterating it), and `<j` when the
 *     loop only visits coordinates below loop j's (a symmetric sum).
 *   - `scatter(bytemap|hash)` after the loops when reduced loops precede
 *     output loops and the result is not all dense: the random-write
 *     workspace the kernel accumulates each outer iteration's points in
 *     (phys_workspace_kind) before appending them in order.
 *   - `pattern(S)` when the result copies the levels of access S and the
 *     kernel writes its values at S's positions (OUT_PATTERN); `rows`
 *     when a sink writes a result of dense levels over one sorted list
 *     as that list's arrays directly (PhysQuery.out_rows).
 *   - `sliced(A)` when the row loop walks the sliced copy of input A,
 *     four rows at a time (PhysQuery.sliced).
 *   - `fill V`: the result's fill (%.17g; nan, inf, -inf).
 *   - A transpose query: `Query(_t<N>[i,j], Transpose(SRC, FORMAT),
 *     fill V)`: SRC (an input or earlier query) copied into FORMAT, the
 *     new storage format over the same logical modes.
 *   - Plans of the physical optimizer: after the closing parenthesis,
 *     `  est N` (%.6g), the estimated non-fill entries of the result
 *     (PhysQuery.has_est; never in plans of the default planner).
 *   - Last, when the program has results, one line `Outputs(C, t)`
 *     naming the physical queries that hold them, in output order.
 * Index names are the program's; a name shared by two distinct indices
 * of one physical query (shadowing) prints as NAME#2, NAME#3, ... in id
 * order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phys.h"
#include "rt_internal.h"

/* ------------------------------------------------------------------ */
/* Constant folding over absent accesses                               */
/* ------------------------------------------------------------------ */


/* Whether every value of e is finite or equal to the annihilator a (the
 * values for which f(a, x) = a holds), by e's range: min(A, 100) is
 * finite even when A holds +inf, and a +inf fill under + (min-plus) is
 * absorbed. */
static int safe_for_annihilator(const PhysQuery *q, const Node *e, double a) {
  return range_absorbed_by(phys_expr_range(q, e), a);
}

/* A folded constant: its value, and whether it is a zero whose sign the
 * folding cannot know (0 * x is +0 or -0 with the sign of x, and
 * -1.5 / (0 * x) is then -inf or +inf). */
typedef struct Folded {
  double value;
  int any_sign_zero;
} Folded;

static int fold(const PhysQuery *q, const Node *e, const unsigned char *absent,
                Folded *out);

enum { FOLD_MAX_SIGNED_ZEROS = 4 }; /* sign combinations tried: 2^4 */

/* op applied to constant arguments, some of them zeros of unknown sign:
 * every sign combination is tried; 1 when all give the same bits (or all
 * give zeros, then of unknown sign), 0 when the sign matters. */
static int apply_folded(const Op *op, const Folded *f, double *args, int n,
                        Folded *out) {
  int amb[FOLD_MAX_SIGNED_ZEROS], namb = 0;
  for (int k = 0; k < n; k++)
    if (f[k].any_sign_zero) {
      if (namb == FOLD_MAX_SIGNED_ZEROS)
        return 0;
      amb[namb++] = k;
    }
  double first = 0;
  int zeros = 1, same = 1;
  for (unsigned m = 0; m < (1u << namb); m++) {
    for (int t = 0; t < namb; t++)
      args[amb[t]] = (m >> t) & 1 ? -0.0 : 0.0;
    double v = ops_apply(op, args, n);
    zeros = zeros && v == 0;
    if (m == 0)
      first = v;
    else if (memcmp(&v, &first, sizeof v) != 0)
      same = 0;
  }
  if (!same && !zeros)
    return 0;
  out->value = same ? first : 0.0; /* keeps the sign of a zero when known */
  out->any_sign_zero = !same;
  return 1;
}

/* Folding a map: every argument constant gives op(args); otherwise an
 * argument equal to the op's annihilator gives the annihilator -- but only
 * when every unknown argument is finite, since 0 * inf and 0 * nan are
 * nan, not 0 (the caveat in ir.h).  With data holding inf or nan the
 * shortcut is not taken and the loop visits those points instead, so the
 * kernels keep the dense meaning exactly.  An annihilating zero has the
 * sign of the unknown arguments, so it is a zero of unknown sign (except
 * for the logical ops, whose 0 is exact). */
static int fold_map(const PhysQuery *q, const Node *n,
                    const unsigned char *absent, Folded *out) {
  Folded fsmall[16];
  double small[16] = {0};
  Folded *f = n->nargs <= 16 ? fsmall : malloc((size_t)n->nargs * sizeof *f);
  double *args = n->nargs <= 16 ? small : malloc((size_t)n->nargs * sizeof *args);
  int known = 0;
  if (!f || !args)
    goto done; /* "not constant" is always a safe answer */
  int all = 1, annihilated = 0, shortcut_safe = 1;
  int has_ann = (n->op->props & OP_HAS_ANNIHILATOR) != 0;
  double ann = n->op->annihilator;
  for (int k = 0; k < n->nargs; k++) {
    if (!fold(q, n->args[k], absent, &f[k])) {
      all = 0;
      shortcut_safe = shortcut_safe && safe_for_annihilator(q, n->args[k], ann);
      continue;
    }
    args[k] = f[k].value;
    if (has_ann && args[k] == ann)
      annihilated = 1;
    else if (!isfinite(args[k]))
      shortcut_safe = 0; /* 0 * inf is nan: no annihilation shortcut */
  }
  if (all) {
    known = apply_folded(n->op, f, args, n->nargs, out);
  } else if (annihilated && shortcut_safe) {
    int logical = n->op->is_builtin && (strcmp(n->op->name, "&&") == 0 ||
                                        strcmp(n->op->name, "||") == 0);
    out->value = ann;
    out->any_sign_zero = ann == 0 && !logical;
    known = 1;
  }
done:
  if (f != fsmall)
    free(f);
  if (args != small)
    free(args);
  return known;
}

void phys_input_format(const galley_tensor *t, galley_format *f) {
  galley_tensor_format(t, f);
  for (int l = 0; l < t->order; l++) {
    const galley_level *L = &t->lvl[l];
    if (L->kind == GALLEY_LIST && L->npar > 0 &&
        galley_rt_pos(L, L->npar) == L->npar * L->dim)
      f->kinds[l] = GALLEY_DENSE;
  }
}

/* An access's range, for ops_range_expr. */
static Range access_range(void *ctx, const Node *n) {
  const PhysQuery *q = ctx;
  if ((n->kind != ND_INPUT && n->kind != ND_ALIAS) || n->access < 0 ||
      n->access >= q->nacc)
    return range_top();
  const PAccess *a = &q->acc[n->access];
  if (a->has_range)
    return a->range;
  Range r = range_top(); /* what `finite` and `fill` alone say */
  r.nan = r.pinf = r.ninf = !a->finite;
  return range_join(r, range_point(a->fill));
}

Range phys_expr_range(const PhysQuery *q, const Node *expr) {
  return ops_range_expr(expr, access_range, (void *)q);
}

int phys_plan_uses_bounds(const PhysPlan *pp) {
  for (int n = 0; n < pp->nq; n++)
    if (pp->q[n].range.dep)
      return 1;
  return 0;
}

int phys_expr_finite(const PhysQuery *q, const Node *expr) {
  return range_finite(phys_expr_range(q, expr));
}

Range phys_query_range(const PhysQuery *q) {
  Range r = phys_expr_range(q, q->expr);
  if (q->agg) {
    double count = 1;
    for (int k = 0; k < q->nred; k++)
      count *= (double)q->indices[q->red[k]].dim;
    r = ops_range_aggregate(q->agg, r, count);
  }
  return range_join(r, range_point(q->out_fill));
}

static int fold(const PhysQuery *q, const Node *e, const unsigned char *absent,
                Folded *out) {
  out->any_sign_zero = 0;
  switch (e->kind) {
  case ND_CONST:
    out->value = e->value;
    return 1;
  case ND_INPUT:
  case ND_ALIAS:
    if (!absent[e->access])
      return 0;
    out->value = q->acc[e->access].fill;
    return 1;
  case ND_MAP:
    return fold_map(q, e, absent, out);
  case ND_AGG:
  case ND_PARAM:
    break;
  }
  return 0;
}

int phys_absent_value(const PhysQuery *q, const Node *expr,
                      const unsigned char *absent, double *value) {
  Folded f;
  if (!fold(q, expr, absent, &f))
    return 0;
  *value = f.value;
  return 1;
}

/* ------------------------------------------------------------------ */
/* Printing                                                            */
/* ------------------------------------------------------------------ */

static void print_num(double v, FILE *f) {
  if (isnan(v))
    fputs("nan", f);
  else
    fprintf(f, "%.17g", v);
}

/* NAME, or NAME#k for the k-th index of that name (id order). */
static void print_index(const PhysQuery *q, int id, FILE *f) {
  if (id < 0 || id >= q->nindices) {
    fprintf(f, "?%d", id);
    return;
  }
  const char *name = q->indices[id].name;
  int k = 1;
  for (int m = 0; m < id; m++)
    k += strcmp(q->indices[m].name, name) == 0;
  fputs(name, f);
  if (k > 1)
    fprintf(f, "#%d", k);
}

static const char *tensor_name(const PhysPlan *pp, int is_input, int t) {
  if (is_input)
    return pp->prog->inputs[t].name;
  return pp->q[t].name;
}

/* NAME[i,j] (a scalar: NAME). */
static void print_target(const PhysQuery *q, FILE *f) {
  fputs(q->name, f);
  if (q->nout == 0)
    return;
  fputc('[', f);
  for (int k = 0; k < q->nout; k++) {
    if (k)
      fputc(',', f);
    print_index(q, q->out[k], f);
  }
  fputc(']', f);
}

/* The storage level holding mode m of access n: modes with the same
 * index occupy consecutive levels (the planner keeps them in mode order),
 * so the r-th mode with index x is the r-th level reading x. */
static int level_of_mode(const PAccess *acc, const Node *n, int m) {
  int x = n->idx[m], r = 0;
  for (int k = 0; k < m; k++)
    r += n->idx[k] == x;
  for (int l = 0; l < acc->order; l++)
    if (acc->level_idx[l] == x && r-- == 0)
      return l;
  return -1;
}

static void print_access(const PhysPlan *pp, const PhysQuery *q,
                         const Node *n, FILE *f) {
  const PAccess *acc = &q->acc[n->access];
  fputs(tensor_name(pp, acc->is_input, acc->tensor), f);
  if (n->nidx == 0)
    return;
  fputc('[', f);
  for (int m = 0; m < n->nidx; m++) {
    if (m)
      fputc(',', f);
    print_index(q, n->idx[m], f);
    int l = level_of_mode(acc, n, m);
    fputs(l < 0                           ? "::?"
          : acc->proto[l] == PROTO_ITERATE ? "::it"
          : acc->proto[l] == PROTO_MARK    ? "::mk"
                                           : "::lu",
          f);
  }
  fputc(']', f);
}

static void print_expr(const PhysPlan *pp, const PhysQuery *q, const Node *n,
                       FILE *f) {
  switch (n->kind) {
  case ND_CONST:
    print_num(n->value, f);
    return;
  case ND_INPUT:
  case ND_ALIAS:
    print_access(pp, q, n, f);
    return;
  case ND_MAP:
    fprintf(f, "Map(%s", n->op->name);
    for (int k = 0; k < n->nargs; k++) {
      fputs(", ", f);
      print_expr(pp, q, n->args[k], f);
    }
    fputc(')', f);
    return;
  default:
    fputs("?", f);
    return;
  }
}

static void print_format(const galley_format *fmt, FILE *f) {
  if (fmt->order == 0) {
    fputs("scalar", f);
    return;
  }
  char buf[256];
  galley_format_print(fmt, buf, sizeof buf);
  fputs(buf, f);
}

const char *phys_merge_name(Merge m) {
  switch (m) {
  case MERGE_DENSE:
    return "dense";
  case MERGE_LEAD:
    return "lead";
  case MERGE_UNION:
    return "union";
  case MERGE_INTERSECT:
    return "intersect";
  case MERGE_MARK:
    return "mark";
  }
  return "?";
}

static void print_kernel(const PhysPlan *pp, const PhysQuery *q, FILE *f) {
  fputs("Mat(", f);
  print_format(&q->out_format, f);
  fputs(", ", f);
  if (q->agg) {
    fprintf(f, "Agg(%s", q->agg->name);
    for (int k = 0; k < q->nred; k++) {
      fputs(", ", f);
      print_index(q, q->red[k], f);
    }
    fputs(", ", f);
  }
  print_expr(pp, q, q->expr, f);
  if (q->agg)
    fputc(')', f);
  fputs("), loops(", f);
  for (int d = 0; d < q->nloops; d++) {
    if (d)
      fputs(", ", f);
    print_index(q, q->loops[d], f);
    fprintf(f, ":%s", phys_merge_name(q->merge[d]));
    if (q->upper && q->upper[d] >= 0) {
      fputc('<', f);
      print_index(q, q->loops[q->upper[d]], f);
    }
  }
  fputc(')', f);
  int ws = phys_workspace_kind(q);
  if (ws >= 0)
    fprintf(f, ", scatter(%s)", galley_level_kind_name((galley_level_kind)ws));
  if (q->out_kind == OUT_PATTERN) {
    const PAccess *A = &q->acc[q->pattern];
    fprintf(f, ", pattern(%s)", tensor_name(pp, A->is_input, A->tensor));
  }
  if (q->out_rows)
    fputs(", rows", f);
  if (q->sliced > 0) {
    const PAccess *A = &q->acc[q->sliced - 1];
    fprintf(f, ", sliced(%s)", tensor_name(pp, A->is_input, A->tensor));
  }
}

static void print_transpose(const PhysPlan *pp, const PhysQuery *q, FILE *f) {
  const PAccess *src = &q->acc[0];
  fprintf(f, "Transpose(%s, ", tensor_name(pp, src->is_input, src->tensor));
  print_format(&q->out_format, f);
  fputc(')', f);
}

void phys_print_query(const PhysPlan *pp, int n, FILE *f) {
  const PhysQuery *q = &pp->q[n];
  fputs("Query(", f);
  print_target(q, f);
  fputs(", ", f);
  if (q->kind == PQ_TRANSPOSE)
    print_transpose(pp, q, f);
  else
    print_kernel(pp, q, f);
  fputs(", fill ", f);
  print_num(q->out_fill, f);
  fputc(')', f);
}

void phys_print(const PhysPlan *pp, FILE *f) {
  for (int n = 0; n < pp->nq; n++) {
    phys_print_query(pp, n, f);
    if (pp->q[n].has_est)
      fprintf(f, "  est %.6g", pp->q[n].est_nnz);
    fputc('\n', f);
  }
  for (int k = 0; k < pp->noutputs; k++) {
    fputs(k ? ", " : "Outputs(", f);
    fputs(pp->q[pp->outputs[k]].name, f);
  }
  if (pp->noutputs)
    fputs(")\n", f);
}

/* ------------------------------------------------------------------ */
/* Why a plan is as it is (explain's notes)                            */
/* ------------------------------------------------------------------ */

/* Whether access x's absence alone would make q's expression a constant
 * if every access were finite (allfinite: q with a copy of its accesses,
 * all marked finite). */
static int conjunct_if_finite(const PhysQuery *allfinite, int x,
                              unsigned char *absent) {
  double v;
  absent[x] = 1;
  int c = phys_absent_value(allfinite, allfinite->expr, absent, &v);
  absent[x] = 0;
  return c;
}

/* The accesses of q other than x that may hold inf or NaN, ", "-joined;
 * ranges: instead, their value ranges, the reason ("; x: [1, 2] or
 * +inf"). */
static void print_unfinite(const PhysPlan *pp, const PhysQuery *q, int x,
                           int ranges, FILE *f) {
  int any = 0;
  for (int k = 0; k < q->nacc; k++) {
    const PAccess *A = &q->acc[k];
    if (k == x || (A->finite && isfinite(A->fill)))
      continue;
    const char *name = tensor_name(pp, A->is_input, A->tensor);
    if (!ranges) {
      fprintf(f, "%s%s", any++ ? ", " : "", name);
    } else if (A->has_range) {
      char buf[96];
      range_format(A->range, buf, sizeof buf);
      fprintf(f, "; %s's values: %s", name, buf);
    }
  }
  if (!any && !ranges)
    fputs("another operand", f);
}

/* Notes on loop d of q: an access whose absent entries are looked up
 * rather than skipped because another operand may be inf or NaN. */
static int note_loop(const PhysPlan *pp, const PhysQuery *q,
                     const PhysQuery *allfinite, int d,
                     unsigned char *absent, FILE *f) {
  if (q->merge[d] == MERGE_LEAD || q->merge[d] == MERGE_INTERSECT ||
      q->merge[d] == MERGE_MARK)
    return 0;
  int notes = 0;
  for (int x = 0; x < q->nacc; x++) {
    int l0, l1;
    phys_loop_levels(q, x, d, &l0, &l1);
    double v;
    absent[x] = 1;
    int conjunct = l0 < l1 && phys_absent_value(q, q->expr, absent, &v);
    absent[x] = 0;
    if (l0 == l1 || conjunct || !conjunct_if_finite(allfinite, x, absent))
      continue;
    const PAccess *A = &q->acc[x];
    fprintf(f, "note: %s, loop ", q->name);
    print_index(q, q->loops[d], f);
    fprintf(f, " (%s): %s's absent entries cannot be skipped: ",
            phys_merge_name(q->merge[d]), tensor_name(pp, A->is_input, A->tensor));
    print_unfinite(pp, q, x, 0, f);
    fputs(" may hold inf or NaN (0 * inf is NaN", f);
    print_unfinite(pp, q, x, 1, f);
    fputs(")\n", f);
    notes++;
  }
  return notes;
}

/* A note on a query that splits exceptions out (issue 12). */
static int note_split(const PhysPlan *pp, const PhysQuery *q, FILE *f) {
  if (!q->split)
    return 0;
  fprintf(f, "note: %s splits out the non-finite entries of ", q->name);
  int any = 0;
  for (int k = 0; k < q->nacc; k++) {
    const PAccess *A = &q->acc[k];
    int seen = 0;
    for (int m = 0; m < k; m++)
      seen |= q->acc[m].split && q->acc[m].split_input == A->split_input;
    if (!A->split || seen)
      continue;
    fprintf(f, "%s%s", any++ ? ", " : "", pp->prog->inputs[A->split_input].name);
  }
  fputs(": the kernel reads them as 0 (so absent entries are skipped) and "
        "a correction pass adds their terms (NaN where 0 * inf occurs)\n",
        f);
  return 1;
}

/* Whether e is finite by the rule without value ranges: finite accesses
 * and constants under ops that keep finite values finite. */
static int finite_without_ranges(const PhysQuery *q, const Node *e) {
  switch (e->kind) {
  case ND_CONST:
    return isfinite(e->value);
  case ND_INPUT:
  case ND_ALIAS:
    return q->acc[e->access].finite && isfinite(q->acc[e->access].fill) &&
           (!q->acc[e->access].has_range ||
            range_finite(q->acc[e->access].range));
  case ND_MAP:
    if (!ops_keeps_finite(e->op))
      return 0;
    for (int k = 0; k < e->nargs; k++)
      if (!finite_without_ranges(q, e->args[k]))
        return 0;
    return 1;
  default:
    return 0;
  }
}

/* A note when only value ranges prove q's result finite (min(A, 100)
 * with A holding inf; ifelse(d > 0, r / d, 0) with d whole). */
static int note_range(const PhysPlan *pp, const PhysQuery *q, FILE *f) {
  (void)pp;
  if (!q->finite || q->assumed_finite || q->split ||
      finite_without_ranges(q, q->expr))
    return 0;
  char buf[96];
  range_format(q->range, buf, sizeof buf);
  fprintf(f, "note: %s is finite by value ranges: its values are %s\n",
          q->name, buf);
  return 1;
}

int phys_print_notes(const PhysPlan *pp, FILE *f) {
  int notes = 0;
  for (int n = 0; n < pp->nq; n++) {
    const PhysQuery *q = &pp->q[n];
    if (q->kind != PQ_KERNEL)
      continue;
    unsigned char *absent = calloc((size_t)q->nacc + 1, 1);
    PhysQuery allfinite = *q;
    allfinite.acc = malloc(((size_t)q->nacc + 1) * sizeof *allfinite.acc);
    for (int k = 0; allfinite.acc && k < q->nacc; k++) {
      allfinite.acc[k] = q->acc[k];
      allfinite.acc[k].finite = 1;
      allfinite.acc[k].range.nan = allfinite.acc[k].range.pinf =
          allfinite.acc[k].range.ninf = 0;
    }
    for (int d = 0; absent && allfinite.acc && d < q->nloops; d++)
      notes += note_loop(pp, q, &allfinite, d, absent, f);
    free(absent);
    free(allfinite.acc);
    notes += note_split(pp, q, f);
    notes += note_range(pp, q, f);
    if (q->assumed_finite) {
      fprintf(f, "note: %s is planned as finite (not provable from the "
              "program): a run checks it and plans again if it is not\n",
              q->name);
      notes++;
    }
    if (isnan(q->out_fill) && q->user_query >= 0) {
      fprintf(f, "note: %s's fill is NaN: every entry it does not store "
              "is NaN\n", q->name);
      notes++;
    }
  }
  return notes;
}

void phys_plan_free(PhysPlan *pp) {
  if (pp)
    arena_free(pp->arena); /* the plan itself lives in its arena */
}

/* ------------------------------------------------------------------ */
/* Index widths                                                        */
/* ------------------------------------------------------------------ */

/* The widths of a bound input's levels (bit l: level l is 32-bit). */
static unsigned input_widths(const galley_tensor *t) {
  unsigned w = 0;
  for (int l = 0; t && l < t->order; l++)
    if (t->lvl[l].idx32)
      w |= 1u << l;
  return w;
}

/* The levels of query q's result that surely fit 32-bit indices; bound
 * caps every level's entries (-1: no cap beyond the sizes). */
static unsigned result_widths(const PhysQuery *q, int64_t bound) {
  unsigned w = 0;
  int64_t reach = 1; /* positions under the levels above: a cap on nset */
  for (int l = 0; l < q->out_format.order; l++) {
    int mode = q->out_format.mode_order[l];
    int64_t dim = mode < q->nout ? q->indices[q->out[mode]].dim : -1;
    if (dim < 0 || dim > GALLEY_RT_IDX32_MAX_DIM)
      return w;
    reach = reach > 0 && dim > INT64_MAX / reach ? INT64_MAX : reach * dim;
    int64_t cap = bound >= 0 && bound < reach ? bound : reach;
    galley_level_kind k = q->out_format.kinds[l];
    if ((k == GALLEY_LIST || k == GALLEY_BYTEMAP) &&
        cap <= GALLEY_RT_IDX32_MAX_NSET)
      w |= 1u << l;
    /* a hash level's keys p*dim + i are below npar*dim <= reach */
    if (k == GALLEY_HASH && cap <= GALLEY_RT_IDX32_MAX_NSET &&
        reach <= GALLEY_RT_IDX32_MAX_KEYS)
      w |= 1u << l;
  }
  return w;
}

/* The list, bytemap and hash levels of q's result, as a mask. */
static unsigned sparse_levels(const PhysQuery *q) {
  unsigned w = 0;
  for (int l = 0; l < q->out_format.order; l++)
    if (q->out_format.kinds[l] != GALLEY_DENSE)
      w |= 1u << l;
  return w;
}

void phys_assign_widths(PhysPlan *pp, const galley_tensor *const *inputs) {
  for (int n = 0; n < pp->nq; n++) {
    PhysQuery *q = &pp->q[n];
    for (int k = 0; k < q->nacc; k++) {
      PAccess *a = &q->acc[k];
      if (a->is_input)
        a->w32 = inputs ? input_widths(inputs[a->tensor]) : 0;
      else if (a->tensor >= 0 && a->tensor < n)
        a->w32 = pp->q[a->tensor].out_w32;
    }
    int64_t bound = -1;
    if (q->kind == PQ_TRANSPOSE && q->nacc == 1 && q->acc[0].is_input &&
        inputs && inputs[q->acc[0].tensor])
      bound = galley_tensor_stored(inputs[q->acc[0].tensor]);
    if (q->kind == PQ_KERNEL && q->out_kind == OUT_PATTERN &&
        q->pattern >= 0 && q->pattern < q->nacc)
      q->out_w32 = q->acc[q->pattern].w32 & sparse_levels(q); /* copied */
    else
      q->out_w32 = result_widths(q, bound);
  }
  if (inputs)
    phys_choose_sliced(pp, inputs);
}

/* ------------------------------------------------------------------ */
/* The sliced row loop                                                 */
/* ------------------------------------------------------------------ */

/* Whether access x of q is all dense over the inner loop's index alone
 * (or a scalar). */
static int dense_over(const PhysQuery *q, const PAccess *A, int inner) {
  if (A->order > 1)
    return 0;
  return A->order == 0 ||
         (A->kind[0] == GALLEY_DENSE && A->level_idx[0] == inner);
}

const char *phys_sliced_problem(const PhysQuery *q, int x) {
  if (q->kind != PQ_KERNEL || q->nloops != 2 || q->nout != 1 ||
      q->out_kind != OUT_DENSE || q->out[0] != q->loops[0])
    return "not a dense result over the outer of two loops";
  const Op *agg = q->agg;
  if (!agg || q->nred != 1 || q->red[0] != q->loops[1] ||
      agg->repeat != REPEAT_TIMES ||
      (agg->props & (OP_ASSOCIATIVE | OP_COMMUTATIVE)) !=
          (OP_ASSOCIATIVE | OP_COMMUTATIVE))
    return "not a sum-like reduction of the inner loop";
  if ((q->upper && (q->upper[0] >= 0 || q->upper[1] >= 0)) ||
      (q->mark && (q->mark[0] >= 0 || q->mark[1] >= 0)) ||
      q->merge[1] != MERGE_LEAD ||
      (q->merge[0] != MERGE_LEAD && q->merge[0] != MERGE_DENSE))
    return "the loops are not a dense or led row loop over a led inner loop";
  if (x < 0 || x >= q->nacc)
    return "no such access";
  const PAccess *A = &q->acc[x];
  if (!A->is_input || A->split || A->order != 2 ||
      A->kind[0] != GALLEY_DENSE || A->kind[1] != GALLEY_LIST ||
      A->level_idx[0] != q->loops[0] || A->level_idx[1] != q->loops[1] ||
      A->proto[1] != PROTO_ITERATE)
    return "the access is not a bound dense-over-list matrix walked by the loops";
  for (int k = 0; k < q->nacc; k++)
    if (k != x && !dense_over(q, &q->acc[k], q->loops[1]))
      return "another access is not dense over the inner index alone";
  unsigned char absent[64];
  if (q->nacc > (int)sizeof absent)
    return "too many accesses";
  memset(absent, 0, sizeof absent);
  absent[x] = 1;
  double c, neutral;
  if (!phys_absent_value(q, q->expr, absent, &c) ||
      !ops_fold_neutral(agg, &neutral) || neutral != c ||
      agg->agg_init != c)
    return "the expression at the matrix's fill is not the aggregate's identity";
  return NULL;
}

/* Padded slots per stored entry and the mean row of t, from at most 4096
 * chunks spread over its rows; 0 when t has fewer than two chunks or no
 * entries. */
static int sliced_shape(const galley_tensor *t, double *pad, double *row) {
  const galley_level *L = &t->lvl[1];
  int64_t nchunk = t->lvl[0].dim / GALLEY_RT_SLICE;
  if (nchunk < 2 || L->nset <= 0)
    return 0;
  int64_t stride = nchunk > 4096 ? nchunk / 4096 : 1;
  double slots = 0, stored = 0;
  for (int64_t c = 0; c < nchunk; c += stride) {
    int64_t w = 0, i0 = c * GALLEY_RT_SLICE;
    for (int r = 0; r < GALLEY_RT_SLICE; r++) {
      int64_t len = galley_rt_pos(L, i0 + r + 1) - galley_rt_pos(L, i0 + r);
      w = len > w ? len : w;
      stored += (double)len;
    }
    slots += (double)(w * GALLEY_RT_SLICE);
  }
  if (stored <= 0)
    return 0;
  *pad = slots / stored;
  *row = (double)L->nset / (double)t->lvl[0].dim;
  return 1;
}

void phys_choose_sliced(PhysPlan *pp, const galley_tensor *const *inputs) {
  for (int n = 0; n < pp->nq; n++) {
    PhysQuery *q = &pp->q[n];
    q->sliced = 0;
    if (q->kind != PQ_KERNEL || q->nloops != 2)
      continue;
    for (int x = 0; x < q->nacc; x++) {
      const PAccess *A = &q->acc[x];
      if (phys_sliced_problem(q, x) || !inputs[A->tensor] ||
          !rt_sliced_fits(inputs[A->tensor]))
        continue;
      double pad, row;
      if (sliced_shape(inputs[A->tensor], &pad, &row) &&
          pad <= PHYS_SLICED_MAX_PAD && row < PHYS_SLICED_MAX_ROW)
        q->sliced = x + 1;
      break;
    }
  }
}
