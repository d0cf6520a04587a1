/*
 * plan.c -- input-plan nodes: constructors, structural hash and equality
 * (for CSE), and the printer in the Galley paper's notation (Fig. 4A).
 *
 * Nodes are immutable once built and live in the program's arena; the
 * constructors copy the idx/args arrays they are given, so callers may
 * pass stack buffers.
 *
 * Printing shadowed indices: an aggregate binds its indices afresh, so one
 * query may hold two Index entries with the same name (tin.md semantics
 * decision: `sum(i: ...)` inside an expression that already uses i).  The
 * index of a given name that the printout mentions first (reading left
 * to right, the LHS first) prints as the bare name; the k-th distinct
 * index of that name to be mentioned prints as NAME#k, e.g.
 * `Query(w[i], Map(*, v[i], Agg(+, i#2, A[i#2,j])))`.  `#` cannot occur
 * in an identifier, so the printout is unambiguous.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* A fresh node of the given kind; other fields zero. */
static Node *node_new(Arena *a, NodeKind kind, Loc loc) {
  Node *n = arena_alloc(a, sizeof(Node));
  if (!n) return NULL;
  n->kind = kind;
  n->loc = loc;
  return n;
}

/* A copy of idx[0..nidx) in the arena (NULL for nidx 0). */
static int *idx_copy(Arena *a, int nidx, const int *idx) {
  if (nidx <= 0) return NULL;
  int *d = arena_alloc(a, sizeof(int) * (size_t)nidx);
  if (d) memcpy(d, idx, sizeof(int) * (size_t)nidx);
  return d;
}

Node *plan_const(Arena *a, Loc loc, double value) {
  Node *n = node_new(a, ND_CONST, loc);
  if (n) n->value = value;
  return n;
}

/* An access (ND_INPUT or ND_ALIAS) of tensor `t` with idx[0..nidx). */
static Node *access_new(Arena *a, NodeKind kind, Loc loc, int t, int nidx,
                        const int *idx) {
  Node *n = node_new(a, kind, loc);
  if (!n) return NULL;
  n->tensor = t;
  n->nidx = nidx;
  n->idx = idx_copy(a, nidx, idx);
  if (nidx > 0 && !n->idx) return NULL;
  return n;
}

Node *plan_input(Arena *a, Loc loc, int input, int nidx, const int *idx) {
  return access_new(a, ND_INPUT, loc, input, nidx, idx);
}

Node *plan_alias(Arena *a, Loc loc, int query, int nidx, const int *idx) {
  return access_new(a, ND_ALIAS, loc, query, nidx, idx);
}

Node *plan_map(Arena *a, Loc loc, const Op *op, int nargs, Node *const *args) {
  Node *n = node_new(a, ND_MAP, loc);
  if (!n) return NULL;
  n->op = op;
  n->nargs = nargs;
  if (nargs > 0) {
    n->args = arena_alloc(a, sizeof(Node *) * (size_t)nargs);
    if (!n->args) return NULL;
    memcpy(n->args, args, sizeof(Node *) * (size_t)nargs);
  }
  return n;
}

Node *plan_agg(Arena *a, Loc loc, const Op *op, int nidx, const int *idx,
               Node *arg) {
  Node *n = node_new(a, ND_AGG, loc);
  if (!n) return NULL;
  n->op = op;
  n->arg = arg;
  n->nidx = nidx;
  n->idx = idx_copy(a, nidx, idx);
  if (nidx > 0 && !n->idx) return NULL;
  return n;
}

Node *plan_param(Arena *a, Loc loc, int param) {
  Node *n = node_new(a, ND_PARAM, loc);
  if (n) n->tensor = param;
  return n;
}

/* ---- structural hash and equality ---- */

/* Whether the order of a Map's arguments is irrelevant: a commutative
 * binary op, or a commutative and associative op of any arity. */
static int args_unordered(const Node *n) {
  unsigned p = n->op->props;
  return (p & OP_COMMUTATIVE) && (n->nargs == 2 || (p & OP_ASSOCIATIVE));
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ULL;
  return h ^ (h >> 31);
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* Constants are compared by bit pattern (so 0 and -0 differ: 1/x tells
 * them apart), except that every NaN equals every NaN. */
static uint64_t const_bits(double v) {
  uint64_t b;
  if (isnan(v)) return 0x7FF8000000000000ULL;
  memcpy(&b, &v, sizeof b);
  return b;
}

/* Aggregated indices form a set (aggregate ops are commutative and
 * associative), so their hash ignores order; access indices do not. */
static uint64_t hash_idx(const Node *n, int ordered) {
  uint64_t h = (uint64_t)n->nidx, set = 0;
  for (int k = 0; k < n->nidx; k++) {
    if (ordered)
      h = mix(h, (uint64_t)(int64_t)n->idx[k]);
    else
      set += mix(0x5EED, (uint64_t)(int64_t)n->idx[k]);
  }
  return ordered ? h : mix(h, set);
}

static uint64_t hash_args(const Node *n) {
  uint64_t h = (uint64_t)n->nargs, set = 0;
  int unordered = args_unordered(n);
  for (int k = 0; k < n->nargs; k++) {
    uint64_t c = plan_hash(n->args[k]);
    if (unordered)
      set += mix(0xC0FFEE, c);
    else
      h = mix(h, c);
  }
  return unordered ? mix(h, set) : h;
}

uint64_t plan_hash(const Node *n) {
  uint64_t h = mix(0, (uint64_t)n->kind + 1);
  switch (n->kind) {
  case ND_CONST:
    return mix(h, const_bits(n->value));
  case ND_INPUT:
  case ND_ALIAS:
    return mix(mix(h, (uint64_t)(int64_t)n->tensor), hash_idx(n, 1));
  case ND_PARAM:
    return mix(h, (uint64_t)(int64_t)n->tensor);
  case ND_MAP:
    return mix(mix(h, hash_str(n->op->name)), hash_args(n));
  case ND_AGG:
    h = mix(mix(h, hash_str(n->op->name)), hash_idx(n, 0));
    return mix(h, plan_hash(n->arg));
  }
  return h;
}

static int same_op(const Op *a, const Op *b) {
  return a == b || strcmp(a->name, b->name) == 0;
}

static int idx_equal(const Node *a, const Node *b) {
  if (a->nidx != b->nidx) return 0;
  for (int k = 0; k < a->nidx; k++)
    if (a->idx[k] != b->idx[k]) return 0;
  return 1;
}

/* The aggregated indices of a and b as sets (each list is distinct). */
static int idx_set_equal(const Node *a, const Node *b) {
  if (a->nidx != b->nidx) return 0;
  for (int k = 0; k < a->nidx; k++) {
    int found = 0;
    for (int m = 0; m < b->nidx && !found; m++) found = a->idx[k] == b->idx[m];
    if (!found) return 0;
  }
  return 1;
}

/* The args of a and b as multisets: greedy matching is exact because
 * plan_equal is an equivalence relation.  Argument lists are short. */
static int args_multiset_equal(const Node *a, const Node *b) {
  enum { MAX_MATCH = 64 };
  unsigned char used[MAX_MATCH] = {0};
  if (a->nargs > MAX_MATCH) return 0; /* conservative: never wrong */
  for (int k = 0; k < a->nargs; k++) {
    int m = 0;
    while (m < b->nargs && (used[m] || !plan_equal(a->args[k], b->args[m])))
      m++;
    if (m == b->nargs) return 0;
    used[m] = 1;
  }
  return 1;
}

static int args_equal(const Node *a, const Node *b) {
  if (a->nargs != b->nargs) return 0;
  if (args_unordered(a)) return args_multiset_equal(a, b);
  for (int k = 0; k < a->nargs; k++)
    if (!plan_equal(a->args[k], b->args[k])) return 0;
  return 1;
}

int plan_equal(const Node *a, const Node *b) {
  if (a == b) return 1;
  if (!a || !b || a->kind != b->kind) return 0;
  switch (a->kind) {
  case ND_CONST:
    return const_bits(a->value) == const_bits(b->value);
  case ND_INPUT:
  case ND_ALIAS:
    return a->tensor == b->tensor && idx_equal(a, b);
  case ND_PARAM:
    return a->tensor == b->tensor;
  case ND_MAP:
    return same_op(a->op, b->op) && args_equal(a, b);
  case ND_AGG:
    return same_op(a->op, b->op) && idx_set_equal(a, b) &&
           plan_equal(a->arg, b->arg);
  }
  return 0;
}

/* ---- printer ---- */

/* What printing one query needs: the program for names, and for each
 * index id the position where the printout first mentions it (so that
 * shadowed names are numbered in reading order). */
typedef struct Printer {
  const Program *p;
  const Query *q;
  FILE *f;
  int *seen; /* seen[id]: order of first mention, or NULL (use id order) */
  int nseen; /* mentions numbered so far */
} Printer;

static void mention(Printer *P, int nidx, const int *idx) {
  for (int k = 0; k < nidx; k++)
    if (idx[k] >= 0 && idx[k] < P->q->nindices && P->seen[idx[k]] < 0)
      P->seen[idx[k]] = P->nseen++;
}

/* Number the indices in the order the printout mentions them. */
static void mention_node(Printer *P, const Node *n) {
  switch (n->kind) {
  case ND_INPUT:
  case ND_ALIAS:
    mention(P, n->nidx, n->idx);
    return;
  case ND_AGG:
    mention(P, n->nidx, n->idx);
    mention_node(P, n->arg);
    return;
  case ND_MAP:
    for (int k = 0; k < n->nargs; k++) mention_node(P, n->args[k]);
    return;
  default:
    return;
  }
}

/* seen[] for q; without memory the numbering falls back to id order. */
static void number_indices(Printer *P) {
  int n = P->q->nindices;
  P->seen = n > 0 ? malloc(sizeof(int) * (size_t)n) : NULL;
  if (!P->seen) return;
  for (int k = 0; k < n; k++) P->seen[k] = -1;
  mention(P, P->q->nout, P->q->out);
  if (P->q->expr) mention_node(P, P->q->expr);
  for (int k = 0; k < n; k++) /* never printed: after the rest */
    if (P->seen[k] < 0) P->seen[k] = P->nseen++;
}

/* Whether index a is mentioned before index b. */
static int mentioned_before(const Printer *P, int a, int b) {
  return P->seen ? P->seen[a] < P->seen[b] : a < b;
}

/* Print index `id`: its name, with #k when it is the k-th distinct index
 * of that name in reading order (shadowing; see the top of this file). */
static void print_index(const Printer *P, int id) {
  const Query *q = P->q;
  if (id < 0 || id >= q->nindices) {
    fprintf(P->f, "?%d", id);
    return;
  }
  const char *name = q->indices[id].name;
  int k = 1;
  for (int m = 0; m < q->nindices; m++)
    if (m != id && strcmp(q->indices[m].name, name) == 0 &&
        mentioned_before(P, m, id))
      k++;
  fputs(name, P->f);
  if (k > 1) fprintf(P->f, "#%d", k);
}

/* NAME[i,j] or, for a scalar, NAME. */
static void print_access(const Printer *P, const char *name, int nidx,
                         const int *idx) {
  fputs(name, P->f);
  if (nidx == 0) return;
  fputc('[', P->f);
  for (int k = 0; k < nidx; k++) {
    if (k) fputc(',', P->f);
    print_index(P, idx[k]);
  }
  fputc(']', P->f);
}

/* %.17g, but NaN always as "nan" (glibc would print "-nan" for some). */
static void print_const(double v, FILE *f) {
  if (isnan(v))
    fputs("nan", f);
  else
    fprintf(f, "%.17g", v);
}

static void print_node(const Printer *P, const Node *n);

static void print_map(const Printer *P, const Node *n) {
  fprintf(P->f, "Map(%s", n->op->name);
  for (int k = 0; k < n->nargs; k++) {
    fputs(", ", P->f);
    print_node(P, n->args[k]);
  }
  fputc(')', P->f);
}

static void print_agg(const Printer *P, const Node *n) {
  fprintf(P->f, "Agg(%s", n->op->name);
  for (int k = 0; k < n->nidx; k++) {
    fputs(", ", P->f);
    print_index(P, n->idx[k]);
  }
  fputs(", ", P->f);
  print_node(P, n->arg);
  fputc(')', P->f);
}

static void print_node(const Printer *P, const Node *n) {
  switch (n->kind) {
  case ND_CONST:
    print_const(n->value, P->f);
    return;
  case ND_INPUT:
    print_access(P, P->p->inputs[n->tensor].name, n->nidx, n->idx);
    return;
  case ND_ALIAS:
    fputs("Alias(", P->f);
    print_access(P, P->p->queries[n->tensor].name, n->nidx, n->idx);
    fputc(')', P->f);
    return;
  case ND_PARAM:
    fprintf(P->f, "$%d", n->tensor);
    return;
  case ND_MAP:
    print_map(P, n);
    return;
  case ND_AGG:
    print_agg(P, n);
    return;
  }
}

void plan_print_query(const Program *p, const Query *q, FILE *f) {
  Printer P = {p, q, f, NULL, 0};
  number_indices(&P);
  fputs("Query(", f);
  print_access(&P, q->name, q->nout, q->out);
  fputs(", ", f);
  print_node(&P, q->expr);
  fputc(')', f);
  free(P.seen);
}

/* Outputs(C, t): the results, in p->outputs order when the front end
 * recorded it, else the queries marked is_output in query order. */
static void print_outputs(const Program *p, FILE *f) {
  int n = 0;
  for (int k = 0; k < (p->outputs ? p->noutputs : p->nqueries); k++) {
    int q = p->outputs ? p->outputs[k] : k;
    if (!p->outputs && !p->queries[q].is_output) continue;
    fputs(n++ ? ", " : "Outputs(", f);
    fputs(p->queries[q].name, f);
  }
  if (n) fputs(")\n", f);
}

void plan_print(const Program *p, FILE *f) {
  for (int k = 0; k < p->nqueries; k++) {
    plan_print_query(p, &p->queries[k], f);
    fputc('\n', f);
  }
  print_outputs(p, f);
}

/* The Program and everything it points to live in its own arena
 * (front_parse allocates the Program there), so one free releases all. */
void program_free(Program *p) {
  if (p) arena_free(p->arena);
}
