/*
 * sema.c -- name resolution, index scoping, plan-node construction and
 * the semantic checks of .tin programs.
 *
 * Scoping (tin.md sections 3-4 and the decisions in man/tin.5):
 *  - program names (inputs, queries, defs, dims) share one namespace and
 *    are assigned once; a query sees only earlier names;
 *  - indices belong to their query; an aggregate binds its indices afresh
 *    (a new Index entry, shadowing one of the same name), every other
 *    index on the right is the query's own, created at first use;
 *  - the query's own indices that are not on the left are summed over the
 *    whole right-hand side, in order of first appearance (einsum rule).
 *
 * Cascades.  A name whose statement failed is declared "broken" (id -1 or
 * a NULL op): its uses yield an error node silently, so one mistake gives
 * one message.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "front_internal.h"

/* ---- names ---- */

const Name *sema_lookup(const Front *F, const char *name) {
  for (int k = 0; k < F->nnames; k++)
    if (strcmp(F->names[k].name, name) == 0)
      return &F->names[k];
  return NULL;
}

static const char *kind_noun(NameKind kind) {
  switch (kind) {
  case NM_INPUT:
    return "an input";
  case NM_QUERY:
    return "a query";
  case NM_DEF:
    return "a def";
  case NM_DIM:
    return "a dim";
  }
  return "a name";
}

int sema_check_new(Front *F, const char *name, Loc loc) {
  const Name *n = sema_lookup(F, name);
  if (!n)
    return 1;
  front_error(F, loc, "'%s' is already defined (%s at %d:%d)", name,
              kind_noun(n->kind), n->loc.line, n->loc.col);
  return 0;
}

void sema_declare(Front *F, const char *name, NameKind kind, int id,
                  const Op *op, Loc loc) {
  F->names = front_grow(F, F->names, F->nnames, &F->capnames, sizeof(Name));
  Name *n = &F->names[F->nnames++];
  n->name = name;
  n->kind = kind;
  n->id = id;
  n->op = op;
  n->loc = loc;
}

void sema_declare_broken(Front *F, const Token *name, NameKind kind) {
  if (!name || name->kind != TK_IDENT)
    return;
  const char *s = arena_strndup(F->a, name->text, (size_t)name->len);
  if (!sema_lookup(F, s))
    sema_declare(F, s, kind, -1, NULL, name->loc);
}

static int is_broken(const Name *n) {
  return n->kind == NM_DEF ? n->op == NULL : n->id < 0;
}

static const char *tok_s(Front *F, const Token *t) {
  return arena_strndup(F->a, t->text, (size_t)t->len);
}

Node *sema_error_node(Front *F, Loc loc) { return plan_const(F->a, loc, 0); }

/* The op of a built-in spelling; its absence is a bug in the registry. */
static const Op *builtin_op(Front *F, const char *name, Loc loc) {
  const Op *op = ops_find(&F->p->ops, name);
  if (!op)
    front_error(F, loc, "internal error: no operator '%s' in the registry",
                name);
  return op;
}

/* ---- "did you mean": the nearest known name to a misspelt one ---- */

/* Edit distance (insertions, deletions, substitutions, and a swap of two
 * neighbours) between short names; names equal but for case are nearest
 * of all, and a letter in the other case costs half an edit.  Names
 * longer than 63 bytes never match. */
static double name_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 63 || m > 63)
    return 1e9;
  if (strcasecmp(a, b) == 0)
    return 0.25; /* SUM for sum: nearer than any real edit */
  double d[64][64];
  for (size_t i = 0; i <= n; i++)
    d[i][0] = (double)i;
  for (size_t j = 0; j <= m; j++)
    d[0][j] = (double)j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      char x = a[i - 1], y = b[j - 1];
      double sub = x == y ? 0
                   : (x | 0x20) == (y | 0x20) && isalpha((unsigned char)x)
                       ? 0.5
                       : 1;
      double v = fmin(d[i - 1][j - 1] + sub,
                      fmin(d[i - 1][j] + 1, d[i][j - 1] + 1));
      if (i > 1 && j > 1 && x == b[j - 2] && a[i - 2] == y)
        v = fmin(v, d[i - 2][j - 2] + 1);
      d[i][j] = v;
    }
  return d[n][m];
}

/* The nearest suggestion so far for `s`: a candidate within a third of
 * its length of edits: 1 up to 4 bytes, 2 up to 8, else 3 (mean is
 * not taken for min). */
typedef struct Nearest {
  const char *s;    /* the misspelt name */
  const char *best; /* the nearest candidate, or NULL */
  double dist;
} Nearest;

static void consider(Nearest *nb, const char *cand) {
  if (!cand || strcmp(cand, nb->s) == 0)
    return;
  size_t len = strlen(nb->s);
  double limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
  double d = name_distance(nb->s, cand);
  if (d <= limit && d < (double)len && (!nb->best || d < nb->dist)) {
    nb->best = cand;
    nb->dist = d;
  }
}

/* " (did you mean 'x'?)" or "", in the arena. */
static const char *did_you_mean(Front *F, const Nearest *nb) {
  if (!nb->best)
    return "";
  size_t n = strlen(nb->best) + 24;
  char *t = arena_alloc(F->a, n);
  snprintf(t, n, " (did you mean '%s'?)", nb->best);
  return t;
}

/* Candidates: the program's names of kind `kind` declared so far. */
static void consider_names(const Front *F, Nearest *nb, NameKind kind) {
  for (int k = 0; k < F->nnames; k++)
    if (F->names[k].kind == kind)
      consider(nb, F->names[k].name);
}

/* Candidates: the functions callable by name (built-ins and defs). */
static void consider_functions(const Front *F, Nearest *nb) {
  const OpRegistry *r = &F->p->ops;
  for (int k = 0; k < r->nbuiltin; k++)
    if (isalpha((unsigned char)r->builtin[k]->name[0]) &&
        strcmp(r->builtin[k]->name, "neg") != 0)
      consider(nb, r->builtin[k]->name);
  consider(nb, "pow");
  consider_names(F, nb, NM_DEF);
}

/* The aggregates a program may use, for messages. */
#define AGGREGATES_TEXT                                                      \
  "the aggregates are sum, prod, max, min, any, all, count and defs of two " \
  "parameters declared associative and commutative with an identity"

/* Candidates: the aggregate spellings (built-ins, count, aggregable
 * defs). */
static void consider_aggregates(const Front *F, Nearest *nb) {
  const OpRegistry *r = &F->p->ops;
  for (int k = 0; k < r->nbuiltin; k++)
    consider(nb, r->builtin[k]->agg_name);
  consider(nb, "count");
  for (int k = 0; k < r->nuser; k++)
    consider(nb, r->user[k]->agg_name);
}

/* ---- indices of the current query ---- */

void sema_query_begin(Front *F) {
  F->qidx = NULL;
  F->qinfo = NULL;
  F->nqidx = F->capqidx = F->capqinfo = 0;
  F->naggstack = 0;
}

static int new_index(Front *F, const char *name, Loc loc, int query_level) {
  F->qidx = front_grow(F, F->qidx, F->nqidx, &F->capqidx, sizeof(Index));
  F->qinfo = front_grow(F, F->qinfo, F->nqidx, &F->capqinfo,
                        sizeof(IndexInfo));
  int id = F->nqidx++;
  F->qidx[id].name = name;
  F->qidx[id].dim = -1;
  F->qidx[id].loc = loc;
  F->qinfo[id].query_level = (unsigned char)query_level;
  return id;
}

/* The query's own index called name, or -1. */
static int query_index(const Front *F, const char *name) {
  for (int id = 0; id < F->nqidx; id++)
    if (F->qinfo[id].query_level && strcmp(F->qidx[id].name, name) == 0)
      return id;
  return -1;
}

int sema_lhs_index(Front *F, const char *name, Loc loc) {
  if (query_index(F, name) >= 0) {
    front_error(F, loc, "index '%s' is repeated on the left", name);
    return -1;
  }
  int id = new_index(F, name, loc, 1);
  F->qinfo[id].on_lhs = 1;
  return id;
}

int sema_access_index(Front *F, const char *name, Loc loc) {
  for (int k = F->naggstack - 1; k >= 0; k--) {
    int id = F->aggstack[k];
    if (strcmp(F->qidx[id].name, name) == 0) {
      F->qinfo[id].accessed = 1;
      return id;
    }
  }
  int id = query_index(F, name);
  if (id < 0)
    id = new_index(F, name, loc, 1);
  F->qinfo[id].used_rhs = 1;
  F->qinfo[id].accessed = 1;
  return id;
}

int sema_agg_bind(Front *F, const Token *op, int n, const Token *names,
                  int *ids) {
  if (F->in_def) {
    front_error(F, op->loc, "an aggregate cannot be used in the body of "
                "def '%s'", F->def_name);
    return 0;
  }
  int nb = 0;
  for (int k = 0; k < n; k++) {
    const char *s = tok_s(F, &names[k]);
    int dup = 0;
    for (int j = 0; j < nb && !dup; j++)
      dup = strcmp(F->qidx[ids[j]].name, s) == 0;
    if (dup) {
      front_error(F, names[k].loc, "index '%s' is listed twice in '%.*s'",
                  s, op->len, op->text);
      continue;
    }
    ids[nb++] = new_index(F, s, names[k].loc, 0);
    F->aggstack = front_grow(F, F->aggstack, F->naggstack,
                             &F->capaggstack, sizeof(int));
    F->aggstack[F->naggstack++] = ids[nb - 1];
  }
  return nb;
}

void sema_agg_unbind(Front *F, int n) { F->naggstack -= n; }

/* Wrap rhs in the implicit sum over the query's own indices that are not
 * on the left, in order of first appearance (= id order). */
static Node *implicit_sum(Front *F, Node *rhs) {
  int *ids = arena_alloc(F->a, sizeof(int) * (size_t)(F->nqidx + 1));
  int n = 0;
  for (int id = 0; id < F->nqidx; id++)
    if (F->qinfo[id].query_level && !F->qinfo[id].on_lhs)
      ids[n++] = id;
  if (n == 0)
    return rhs;
  const Op *sum = ops_find_agg(&F->p->ops, "sum");
  return plan_agg(F->a, rhs->loc, sum, n, ids, rhs);
}

void sema_query_end(Front *F, const Token *name, int nout, const int *out,
                    Node *rhs) {
  const char *s = tok_s(F, name);
  if (sema_lookup(F, s))
    return; /* reported as defined twice */
  Program *p = F->p;
  int q = p->nqueries;
  p->queries = front_grow(F, p->queries, q, &F->capqueries, sizeof(Query));
  F->qextra = front_grow(F, F->qextra, q, &F->capqextra, sizeof(QueryExtra));
  Query *qu = &p->queries[q];
  memset(qu, 0, sizeof *qu);
  qu->name = s;
  qu->nout = nout;
  qu->out = arena_alloc(F->a, sizeof(int) * (size_t)(nout ? nout : 1));
  memcpy(qu->out, out, sizeof(int) * (size_t)nout);
  qu->indices = F->qidx;
  qu->nindices = F->nqidx;
  qu->expr = implicit_sum(F, rhs);
  qu->loc = name->loc;
  F->qextra[q].info = F->qinfo;
  F->qextra[q].used = 0;
  p->nqueries++;
  sema_declare(F, s, NM_QUERY, q, NULL, name->loc);
}

/* ---- expressions ---- */

/* The number of modes of an input or query. */
static int name_order(const Front *F, const Name *n) {
  return n->kind == NM_INPUT ? F->p->inputs[n->id].order
                             : F->p->queries[n->id].nout;
}

/* The node reading input or query n (marking queries as used). */
static Node *read_tensor(Front *F, const Name *n, Loc loc, int nidx,
                         const int *idx) {
  if (n->kind == NM_INPUT)
    return plan_input(F->a, loc, n->id, nidx, idx);
  F->qextra[n->id].used = 1;
  return plan_alias(F->a, loc, n->id, nidx, idx);
}

/* A name that is not a tensor where a tensor is needed; 0 when it is. */
static int not_a_tensor(Front *F, const Name *n, Loc loc) {
  if (n->kind == NM_DEF)
    front_error(F, loc, "'%s' is a function, not a tensor", n->name);
  else if (n->kind == NM_DIM)
    front_error(F, loc, "'%s' is a dim, not a tensor", n->name);
  else
    return 0;
  return 1;
}

/* Where tensor `s` is declared by a later statement (an input or a
 * query's left side), or a zero Loc: the tokens are all lexed before
 * parsing, so a use-before-declaration can say where the declaration is. */
static Loc later_declaration(const Front *F, const char *s) {
  size_t n = strlen(s);
  int start = 1; /* at the first token of a statement */
  int in_input = 0;
  for (int k = F->pos; k < F->ntoks; k++) {
    const Token *t = &F->toks[k], *next = &F->toks[k + 1 < F->ntoks ? k + 1 : k];
    if (t->kind == TK_NEWLINE || t->kind == TK_SEMI) {
      start = 1;
      in_input = 0;
      continue;
    }
    int named = t->kind == TK_IDENT && (size_t)t->len == n &&
                memcmp(t->text, s, n) == 0;
    if (named && (in_input || (start && (next->kind == TK_LBRACK ||
                                         next->kind == TK_ASSIGN))))
      return t->loc;
    if (start && t->kind == TK_IDENT && t->len == 5 &&
        memcmp(t->text, "input", 5) == 0)
      in_input = 1;
    start = 0;
  }
  Loc none = {0, 0};
  return none;
}

/* Report an unknown name once per program (later uses stay quiet), saying
 * where it is declared when a later statement declares it. */
static void unknown_name(Front *F, Loc loc, const char *what, const char *s) {
  for (int k = 0; k < F->nunknown; k++)
    if (strcmp(F->unknown[k], s) == 0)
      return;
  F->unknown = front_grow(F, F->unknown, F->nunknown, &F->capunknown,
                          sizeof *F->unknown);
  F->unknown[F->nunknown++] = s;
  Loc later = later_declaration(F, s);
  if (later.line > 0) {
    front_error(F, loc, "%s '%s' is used before its declaration at %d:%d",
                what, s, later.line, later.col);
    return;
  }
  Nearest nb = {s, NULL, 0};
  consider_names(F, &nb, NM_INPUT);
  consider_names(F, &nb, NM_QUERY);
  front_error(F, loc, "unknown %s '%s'%s", what, s, did_you_mean(F, &nb));
}

Node *sema_access(Front *F, const Token *name, int nidx, const int *idx) {
  const char *s = tok_s(F, name);
  const Name *n = sema_lookup(F, s);
  if (!n) {
    unknown_name(F, name->loc, "tensor", s);
    return sema_error_node(F, name->loc);
  }
  if (is_broken(n) || not_a_tensor(F, n, name->loc))
    return sema_error_node(F, name->loc);
  int order = name_order(F, n);
  if (order == 0) {
    front_error(F, name->loc, "'%s' is a scalar and takes no indices", s);
    return sema_error_node(F, name->loc);
  }
  if (nidx != order) {
    front_error(F, name->loc, "'%s' has %d mode%s but is used with %d "
                "ind%s", s, order, order == 1 ? "" : "s", nidx,
                nidx == 1 ? "ex" : "ices");
    return sema_error_node(F, name->loc);
  }
  return read_tensor(F, n, name->loc, nidx, idx);
}

/* A bare name in a def body: a parameter. */
static Node *def_param(Front *F, const Token *name) {
  const char *s = tok_s(F, name);
  for (int k = 0; k < F->nparams; k++)
    if (strcmp(F->params[k], s) == 0)
      return plan_param(F->a, name->loc, k);
  front_error(F, name->loc, "'%s' is not a parameter of '%s'", s,
              F->def_name);
  return sema_error_node(F, name->loc);
}

Node *sema_bare_name(Front *F, const Token *name) {
  if (F->in_def)
    return def_param(F, name);
  const char *s = tok_s(F, name);
  const Name *n = sema_lookup(F, s);
  if (!n) {
    unknown_name(F, name->loc, "name", s);
    return sema_error_node(F, name->loc);
  }
  if (is_broken(n) || not_a_tensor(F, n, name->loc))
    return sema_error_node(F, name->loc);
  int order = name_order(F, n);
  if (order > 0) {
    front_error(F, name->loc, "'%s' has %d mode%s but is used without "
                "indices", s, order, order == 1 ? "" : "s");
    return sema_error_node(F, name->loc);
  }
  return read_tensor(F, n, name->loc, 0, NULL);
}

/* Why name(...) is not a call of a known function (reported). */
static void unknown_function(Front *F, const Token *name, const char *s) {
  const Name *n = sema_lookup(F, s);
  if (n && is_broken(n))
    return;
  if (n && n->kind == NM_DIM)
    front_error(F, name->loc, "'%s' is a dim, not a function", s);
  else if (strcmp(s, "grad") == 0)
    front_error(F, name->loc, "grad(...) must be the whole right-hand side "
                "of a query, as in G[j] = grad(L, theta[j])");
  else if (ops_find_agg(&F->p->ops, s) || strcmp(s, "count") == 0)
    front_error(F, name->loc, "'%s' is an aggregate; write %s(INDEX, ...: "
                "EXPR)", s, s);
  else {
    Nearest nb = {s, NULL, 0};
    consider_functions(F, &nb);
    front_error(F, name->loc, "unknown function '%s'%s", s,
                did_you_mean(F, &nb));
  }
}

int sema_tensor_called(Front *F, const Token *name) {
  const char *s = tok_s(F, name);
  const Name *n = sema_lookup(F, s);
  if (ops_find(&F->p->ops, s) || !n || is_broken(n) ||
      (n->kind != NM_INPUT && n->kind != NM_QUERY))
    return 0;
  front_error(F, name->loc, "'%s' is a tensor; index it with [ ], not ( )",
              s);
  return 1;
}

Node *sema_call(Front *F, const Token *name, int nargs, Node **args) {
  const char *s = tok_s(F, name);
  const Op *op = ops_find(&F->p->ops, s);
  if (op && op->is_builtin && strcmp(op->name, "neg") == 0)
    op = NULL; /* the registry's name for unary minus, not a function */
  if (!op) {
    unknown_function(F, name, s);
    return sema_error_node(F, name->loc);
  }
  int variadic = (op->props & OP_VARIADIC) != 0;
  if (nargs != op->arity && !(variadic && nargs > op->arity)) {
    front_error(F, name->loc, "'%s' takes %s%d argument%s but is given %d",
                s, variadic ? "at least " : "", op->arity,
                op->arity == 1 ? "" : "s", nargs);
    return sema_error_node(F, name->loc);
  }
  return plan_map(F->a, name->loc, op, nargs, args);
}

/* Why a user def cannot be an aggregate (reported). */
static void not_aggregable(Front *F, const Token *name, const Op *op) {
  if (op->arity != 2) {
    front_error(F, name->loc, "'%s' cannot be used as an aggregate: it "
                "takes %d argument%s, not 2", op->name, op->arity,
                op->arity == 1 ? "" : "s");
    return;
  }
  char missing[64] = "";
  if (!(op->props & OP_ASSOCIATIVE))
    strcat(missing, ", associative");
  if (!(op->props & OP_COMMUTATIVE))
    strcat(missing, ", commutative");
  if (!(op->props & OP_HAS_IDENTITY))
    strcat(missing, ", identity");
  front_error(F, name->loc, "'%s' cannot be used as an aggregate: it must "
              "be declared associative and commutative with an identity "
              "(missing: %s)", op->name, missing + 2);
}

/* count(i, ...: e) is sum(i, ...: e != 0): how many points of the
 * aggregated indices have a true (non-zero) value, on the dense meaning
 * like every aggregate (unstored entries count when their fill is
 * non-zero).  A rewrite, so the registry needs no op of its own. */
static Node *count_aggregate(Front *F, const Token *name, int nidx,
                             const int *idx, Node *arg) {
  const Op *add = builtin_op(F, "+", name->loc);
  const Op *ne = builtin_op(F, "!=", name->loc);
  if (!add || !ne)
    return sema_error_node(F, name->loc);
  Node *args[2] = {arg, plan_const(F->a, name->loc, 0)};
  Node *test = plan_map(F->a, name->loc, ne, 2, args);
  return plan_agg(F->a, name->loc, add, nidx, idx, test);
}

Node *sema_aggregate(Front *F, const Token *name, int nidx, const int *idx,
                     Node *arg) {
  if (F->in_def || nidx == 0)
    return sema_error_node(F, name->loc); /* reported */
  const char *s = tok_s(F, name);
  const Op *op = ops_find_agg(&F->p->ops, s);
  if (op)
    return plan_agg(F->a, name->loc, op, nidx, idx, arg);
  const Name *user = sema_lookup(F, s);
  if (strcmp(s, "count") == 0 && !(user && user->kind == NM_DEF))
    return count_aggregate(F, name, nidx, idx, arg);
  const Name *n = sema_lookup(F, s);
  const Op *f = ops_find(&F->p->ops, s);
  if (n && is_broken(n))
    ;
  else if (f && !f->is_builtin)
    not_aggregable(F, name, f);
  else if (f)
    front_error(F, name->loc, "'%s' is not an aggregate (" AGGREGATES_TEXT
                ")", s);
  else {
    Nearest nb = {s, NULL, 0};
    consider_aggregates(F, &nb);
    front_error(F, name->loc, "unknown aggregate '%s'%s; " AGGREGATES_TEXT,
                s, did_you_mean(F, &nb));
  }
  return sema_error_node(F, name->loc);
}

Node *sema_unary(Front *F, const Token *op, Node *x) {
  if (op->kind == TK_MINUS && x->kind == ND_CONST) {
    x->value = -x->value; /* -3 is the constant -3: simpler plans */
    x->loc = op->loc;
    return x;
  }
  const Op *o = builtin_op(F, op->kind == TK_MINUS ? "neg" : "!", op->loc);
  if (!o)
    return sema_error_node(F, op->loc);
  return plan_map(F->a, op->loc, o, 1, &x);
}

Node *sema_binary(Front *F, const Token *op, Node *x, Node *y) {
  const Op *o = builtin_op(F, tok_s(F, op), op->loc);
  if (!o)
    return sema_error_node(F, op->loc);
  Node *args[2] = {x, y};
  return plan_map(F->a, op->loc, o, 2, args);
}

/* ---- defs ---- */

/* Equal up to rounding (bodies may call exp, sin, ...); NaN equals NaN,
 * since a property that holds "as NaN" on both sides is not refuted. */
static int same_value(double a, double b) {
  if (isnan(a) || isnan(b))
    return isnan(a) && isnan(b);
  if (a == b)
    return 1;
  return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

/* The property checks of one def: applications go through a memo with a
 * budget (ops_memo_apply: defs that call each other cost time linear in
 * the chain, never exponential), and the first refutation is kept as a
 * message to report once the memo is freed (front_error may longjmp out
 * of memory). */
typedef struct PropCheck {
  OpMemo *memo;   /* NULL when out of memory: plain ops_apply */
  char why[400];  /* the first refutation, or "" */
} PropCheck;

/* Expression nodes the checks of one def may evaluate: far more than any
 * honest def needs (a chain of 30 defs calling each other is a few
 * thousand with the memo), and still a fraction of a second. */
#define PROP_CHECK_BUDGET 1e6

static double apply2(PropCheck *pc, const Op *f, double x, double y) {
  double v[2] = {x, y};
  return pc->memo ? ops_memo_apply(pc->memo, f, v, 2) : ops_apply(f, v, 2);
}

/* Whether the budget is spent (no verdict can be drawn from the values). */
static int spent(const PropCheck *pc) {
  return pc->memo && ops_memo_exhausted(pc->memo);
}

/* Values on which declared properties are tried: small, exact in binary,
 * of both signs, so that most false claims show a counterexample. */
static const double samples[] = {-2, -0.5, 0, 1, 3};
enum { NSAMPLES = sizeof samples / sizeof samples[0] };

static int check_commutative(PropCheck *pc, const Op *f) {
  for (int i = 0; i < NSAMPLES; i++)
    for (int j = i + 1; j < NSAMPLES; j++) {
      double x = samples[i], y = samples[j];
      double a = apply2(pc, f, x, y), b = apply2(pc, f, y, x);
      if (spent(pc))
        return 0;
      if (!same_value(a, b)) {
        snprintf(pc->why, sizeof pc->why, "'%s' is declared commutative, "
                 "but %s(%g, %g) = %g and %s(%g, %g) = %g", f->name,
                 f->name, x, y, a, f->name, y, x, b);
        return 0;
      }
    }
  return 1;
}

static int check_associative(PropCheck *pc, const Op *f) {
  for (int i = 0; i < NSAMPLES; i++)
    for (int j = 0; j < NSAMPLES; j++)
      for (int k = 0; k < NSAMPLES; k++) {
        double x = samples[i], y = samples[j], z = samples[k];
        double a = apply2(pc, f, apply2(pc, f, x, y), z);
        double b = apply2(pc, f, x, apply2(pc, f, y, z));
        if (spent(pc))
          return 0;
        if (!same_value(a, b)) {
          const char *n = f->name;
          snprintf(pc->why, sizeof pc->why, "'%s' is declared associative, "
                   "but %s(%s(%g, %g), %g) = %g and %s(%g, %s(%g, %g)) = %g",
                   n, n, n, x, y, z, a, n, x, n, y, z, b);
          return 0;
        }
      }
  return 1;
}

static int check_idempotent(PropCheck *pc, const Op *f) {
  for (int i = 0; i < NSAMPLES; i++) {
    double x = samples[i], a = apply2(pc, f, x, x);
    if (spent(pc))
      return 0;
    if (!same_value(a, x)) {
      snprintf(pc->why, sizeof pc->why, "'%s' is declared idempotent, but "
               "%s(%g, %g) = %g", f->name, f->name, x, x, a);
      return 0;
    }
  }
  return 1;
}

static int check_identity(PropCheck *pc, const Op *f) {
  double e = f->identity;
  for (int i = 0; i < NSAMPLES; i++) {
    double x = samples[i], a = apply2(pc, f, e, x);
    if (spent(pc))
      return 0;
    if (!same_value(a, x)) {
      snprintf(pc->why, sizeof pc->why, "'%s' is declared with identity %g, "
               "but %s(%g, %g) = %g", f->name, e, f->name, e, x, a);
      return 0;
    }
  }
  return 1;
}

static int check_annihilator(PropCheck *pc, const Op *f) {
  double z = f->annihilator;
  for (int i = 0; i <= NSAMPLES; i++) {
    double x = i < NSAMPLES ? samples[i] : z;
    double a = apply2(pc, f, z, x);
    if (spent(pc))
      return 0;
    if (!same_value(a, z)) {
      snprintf(pc->why, sizeof pc->why, "'%s' is declared with annihilator "
               "%g, but %s(%g, %g) = %g", f->name, z, f->name, z, x, a);
      return 0;
    }
  }
  return 1;
}

/* f(x, g(y, z)) = g(f(x, y), f(x, z)) on the samples. */
static int check_distributes(PropCheck *pc, const Op *f, const Op *g) {
  for (int i = 0; i < NSAMPLES; i++)
    for (int j = 0; j < NSAMPLES; j++)
      for (int k = 0; k < NSAMPLES; k++) {
        double x = samples[i], y = samples[j], z = samples[k];
        double a = apply2(pc, f, x, apply2(pc, g, y, z));
        double b = apply2(pc, g, apply2(pc, f, x, y), apply2(pc, f, x, z));
        if (spent(pc))
          return 0;
        if (!same_value(a, b)) {
          const char *fn = f->name, *gn = g->name;
          snprintf(pc->why, sizeof pc->why, "'%s' is declared to distribute "
                   "over '%s', but %s(%g, %s(%g, %g)) = %g and %s(%s(%g, "
                   "%g), %s(%g, %g)) = %g", fn, gn, fn, x, gn, y, z, a, gn,
                   fn, x, y, fn, x, z, b);
          return 0;
        }
      }
  return 1;
}

/* A refuted property: where it was declared and why it fails. */
typedef struct Refuted {
  Loc loc;
  char why[400];
} Refuted;

enum { MAX_REFUTED = 5 + FRONT_MAX_PROPS_DIST };

/* Try every declared property of f; the refuted ones into out (their
 * number is returned), each with its counterexample. */
static int refute_props(PropCheck *pc, const Op *f, const DefProps *dp,
                        const Op *const *dist_ops, Refuted *out) {
  static const unsigned flag[5] = {OP_COMMUTATIVE, OP_ASSOCIATIVE,
                                   OP_IDEMPOTENT, OP_HAS_IDENTITY,
                                   OP_HAS_ANNIHILATOR};
  int (*const check[5])(PropCheck *, const Op *) = {
      check_commutative, check_associative, check_idempotent,
      check_identity, check_annihilator};
  int n = 0;
  for (int k = 0; k < 5 + dp->ndist && !spent(pc); k++) {
    pc->why[0] = '\0';
    int holds = k < 5 ? !(f->props & flag[k]) || check[k](pc, f)
                      : !dist_ops[k - 5] ||
                            check_distributes(pc, f, dist_ops[k - 5]);
    if (holds || spent(pc))
      continue;
    out[n].loc = k < 5 ? dp->loc_of[k] : dp->dist_loc[k - 5];
    memcpy(out[n].why, pc->why, sizeof out[n].why);
    n++;
  }
  return n;
}

/* Try every declared property of f on the samples; a false claim is an
 * error with its counterexample (the optimizer would rely on it), and so
 * is a body too costly to try. */
static void check_props_on_samples(Front *F, const Op *f, const DefProps *dp) {
  const Op *dist_ops[FRONT_MAX_PROPS_DIST] = {NULL};
  for (int k = 0; k < dp->ndist && k < FRONT_MAX_PROPS_DIST; k++)
    dist_ops[k] = strcmp(dp->dist[k], f->name) == 0
                      ? f
                      : ops_find(&F->p->ops, dp->dist[k]);
  PropCheck pc = {ops_memo_new(PROP_CHECK_BUDGET), ""};
  Refuted refuted[MAX_REFUTED];
  int n = refute_props(&pc, f, dp, dist_ops, refuted);
  int too_costly = spent(&pc);
  ops_memo_free(pc.memo); /* before front_error, which may longjmp */
  for (int k = 0; k < n; k++)
    front_error(F, refuted[k].loc, "%s", refuted[k].why);
  if (too_costly)
    front_error(F, dp->list_loc, "cannot check the properties declared "
                "for '%s': trying them evaluates more than %.0f operations "
                "(its body calls defs that call defs many times); simplify "
                "the body or declare fewer properties", f->name,
                PROP_CHECK_BUDGET);
}

/* Properties that contradict the def's shape or each other; 1 when none. */
static int props_consistent(Front *F, const char *name, int nparams,
                            const DefProps *dp) {
  if ((dp->props || dp->ndist) && nparams != 2) {
    front_error(F, dp->list_loc, "properties need a def of two parameters, "
                "but '%s' has %d", name, nparams);
    return 0;
  }
  unsigned both = OP_HAS_IDENTITY | OP_HAS_ANNIHILATOR;
  if ((dp->props & both) == both &&
      (dp->identity == dp->annihilator ||
       (isnan(dp->identity) && isnan(dp->annihilator)))) {
    front_error(F, dp->loc_of[4], "identity and annihilator cannot both be "
                "%g (f(e, x) would be both x and e)", dp->identity);
    return 0;
  }
  return 1;
}

/* The registry entry of a def, exactly as declared. */
static Op *def_op(Front *F, const char *name, int nparams, Node *body,
                  const DefProps *dp) {
  Op *op = arena_alloc(F->a, sizeof *op);
  op->name = name;
  op->arity = nparams;
  op->props = dp->props;
  op->identity = dp->identity;
  op->annihilator = dp->annihilator;
  op->agg_init = dp->identity;
  op->repeat = (dp->props & OP_IDEMPOTENT) ? REPEAT_SELF : REPEAT_UNKNOWN;
  for (int k = 0; k < dp->ndist; k++)
    op->distributes_over[k] = dp->dist[k];
  op->body = body;
  unsigned agg = OP_ASSOCIATIVE | OP_COMMUTATIVE | OP_HAS_IDENTITY;
  if (nparams == 2 && (dp->props & agg) == agg)
    op->agg_name = name;
  return op;
}

void sema_def_end(Front *F, const Token *name, int nparams, Node *body,
                  const DefProps *dp, int ok) {
  const char *s = tok_s(F, name);
  const Op *b = ops_find(&F->p->ops, s);
  if (!b)
    b = ops_find_agg(&F->p->ops, s);
  if (b && b->is_builtin) {
    front_error(F, name->loc, "'%s' is a built-in %s and cannot be "
                "redefined", s, ops_find(&F->p->ops, s) ? "function"
                                                         : "aggregate");
    return;
  }
  if (!sema_check_new(F, s, name->loc))
    return;
  int consistent = props_consistent(F, s, nparams, dp);
  Op *op = def_op(F, s, nparams, body, dp);
  if (ok && consistent && !dp->bad)
    check_props_on_samples(F, op, dp);
  ops_add_user(&F->p->ops, F->a, op);
  sema_declare(F, s, NM_DEF, 0, op, name->loc);
}

/* ---- gradients ---- */

int sema_append_query(Front *F, const Query *q, int hidden) {
  Program *p = F->p;
  int n = p->nqueries;
  p->queries = front_grow(F, p->queries, n, &F->capqueries, sizeof(Query));
  F->qextra = front_grow(F, F->qextra, n, &F->capqextra, sizeof(QueryExtra));
  p->queries[n] = *q;
  F->qextra[n].info = NULL;
  F->qextra[n].used = hidden;
  p->nqueries++;
  return n;
}

/* The loss of a grad: a scalar query; its number, or -1 (reported). */
static int grad_loss(Front *F, const Token *t) {
  const char *s = tok_s(F, t);
  const Name *n = sema_lookup(F, s);
  if (!n) {
    unknown_name(F, t->loc, "query", s);
    return -1;
  }
  if (is_broken(n))
    return -1;
  if (n->kind != NM_QUERY) {
    front_error(F, t->loc, "the loss of grad must be a scalar query, but "
                "'%s' is %s", s, kind_noun(n->kind));
    return -1;
  }
  int order = F->p->queries[n->id].nout;
  if (order > 0) {
    front_error(F, t->loc, "the loss of grad must be a scalar query, but "
                "'%s' has %d mode%s", s, order, order == 1 ? "" : "s");
    return -1;
  }
  return n->id;
}

/* The tensor differentiated against: an input or a query, indexed with
 * one index per mode; its name, or NULL (reported). */
static const Name *grad_theta(Front *F, const Token *t, int has_idx,
                              int nidx) {
  const char *s = tok_s(F, t);
  const Name *n = sema_lookup(F, s);
  if (!n) {
    unknown_name(F, t->loc, "tensor", s);
    return NULL;
  }
  if (is_broken(n) || not_a_tensor(F, n, t->loc))
    return NULL;
  int order = name_order(F, n);
  if (order == 0 && has_idx) {
    front_error(F, t->loc, "'%s' is a scalar and takes no indices", s);
    return NULL;
  }
  if (order > 0 && !has_idx) {
    front_error(F, t->loc, "'%s' has %d mode%s but is used without "
                "indices", s, order, order == 1 ? "" : "s");
    return NULL;
  }
  if (order != nidx) {
    front_error(F, t->loc, "'%s' has %d mode%s but is used with %d ind%s",
                s, order, order == 1 ? "" : "s", nidx,
                nidx == 1 ? "ex" : "ices");
    return NULL;
  }
  return n;
}

static int token_is(const Token *a, const Token *b) {
  return a->len == b->len && memcmp(a->text, b->text, (size_t)a->len) == 0;
}

/* Position of the token named like t in list[0..n), or -1. */
static int token_pos(const Token *list, int n, const Token *t) {
  for (int k = 0; k < n; k++)
    if (token_is(&list[k], t))
      return k;
  return -1;
}

/* "A[i, j]", for messages. */
static const char *access_text(Front *F, const Token *t, int nidx,
                               const Token *idx) {
  char buf[256];
  int n = snprintf(buf, sizeof buf, "%.*s[", t->len, t->text);
  for (int m = 0; m < nidx && n < (int)sizeof buf; m++)
    n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%.*s", m ? ", " : "",
                  idx[m].len, idx[m].text);
  if (n < (int)sizeof buf)
    snprintf(buf + n, sizeof buf - (size_t)n, "]");
  return arena_strndup(F->a, buf, strlen(buf));
}

/* The left side lists exactly the indices of the theta access, each
 * once (in any order: G[j, i] = grad(L, A[i, j]) is the transpose);
 * fills rq's mode names and positions.  0 when not (reported). */
static int grad_indices(Front *F, const Token *name, int nlhs,
                        const Token *lhs, const Token *theta, int nidx,
                        const Token *idx, GradRequest *rq) {
  const char *acc = access_text(F, theta, nidx, idx);
  for (int k = 0; k < nlhs; k++)
    if (token_pos(lhs, k, &lhs[k]) >= 0)
      return 0; /* repeated on the left: reported by sema_lhs_index */
  for (int m = 0; m < nidx; m++)
    if (token_pos(idx, m, &idx[m]) >= 0) {
      front_error(F, idx[m].loc, "index '%.*s' is repeated in '%s': the "
                  "tensor of a grad takes one index per mode", idx[m].len,
                  idx[m].text, acc);
      return 0;
    }
  int ok = 1;
  for (int m = 0; m < nidx; m++)
    if (token_pos(lhs, nlhs, &idx[m]) < 0) {
      front_error(F, idx[m].loc, "index '%.*s' of '%s' is missing on the "
                  "left of '%.*s'", idx[m].len, idx[m].text, acc, name->len,
                  name->text);
      ok = 0;
    }
  for (int k = 0; k < nlhs; k++)
    if (token_pos(idx, nidx, &lhs[k]) < 0) {
      front_error(F, lhs[k].loc, "index '%.*s' on the left is not an index "
                  "of '%s'", lhs[k].len, lhs[k].text, acc);
      ok = 0;
    }
  for (int m = 0; ok && m < nidx; m++) {
    rq->mode_name[m] = tok_s(F, &idx[m]);
    rq->mode_loc[m] = idx[m].loc;
    rq->pos[m] = token_pos(lhs, nlhs, &idx[m]);
  }
  return ok;
}

void sema_grad(Front *F, const Token *name, int nlhs, const Token *lhs,
               const Token *kw, const Token *loss, const Token *theta,
               int has_idx, int nidx, const Token *idx) {
  const char *s = tok_s(F, name);
  if (sema_lookup(F, s))
    return; /* reported as defined twice */
  GradRequest rq;
  memset(&rq, 0, sizeof rq);
  rq.loss = grad_loss(F, loss);
  const Name *t = grad_theta(F, theta, has_idx, nidx);
  int ok = rq.loss >= 0 && t &&
           grad_indices(F, name, nlhs, lhs, theta, nidx, idx, &rq);
  int q = -1;
  if (ok) {
    rq.name = s;
    rq.loc = name->loc;
    rq.at = kw->loc;
    rq.is_input = t->kind == NM_INPUT;
    rq.tensor = t->id;
    rq.order = nidx;
    q = grad_build(F, &rq);
  }
  sema_declare(F, s, NM_QUERY, q, NULL, name->loc); /* q < 0: broken */
}

/* ---- whole-program checks ---- */

static const DimDecl *find_dim(const Program *p, const char *name) {
  for (int k = 0; k < p->ndims; k++)
    if (strcmp(p->dims[k].name, name) == 0)
      return &p->dims[k];
  return NULL;
}

/* Sizes from `dim`, left-hand indices that nothing binds, and indices
 * whose size no access could ever give (not for the queries of grad,
 * whose indices all come from checked queries: info is NULL). */
static void check_query_indices(Front *F, Query *q, const IndexInfo *info) {
  for (int id = 0; id < q->nindices; id++) {
    Index *x = &q->indices[id];
    const DimDecl *d = find_dim(F->p, x->name);
    x->dim = d ? d->size : -1;
    if (d || !info)
      continue;
    if (info[id].on_lhs && !info[id].used_rhs)
      front_error(F, x->loc, "index '%s' on the left does not occur on the "
                  "right and has no dim", x->name);
    else if (!info[id].accessed)
      front_error(F, x->loc, "cannot infer the size of index '%s': it "
                  "indexes no tensor and has no dim (add 'dim %s = N' to "
                  "give it the size N)", x->name, x->name);
  }
}

/* One name of an `output` statement. */
static void add_output(Front *F, const OutputRef *o, int *outs, int *n) {
  Program *p = F->p;
  const Name *nm = sema_lookup(F, o->name);
  if (!nm) {
    Nearest nb = {o->name, NULL, 0};
    consider_names(F, &nb, NM_QUERY);
    front_error(F, o->loc, "unknown query '%s' in output%s", o->name,
                did_you_mean(F, &nb));
    return;
  }
  if (is_broken(nm))
    return;
  if (nm->kind != NM_QUERY) {
    front_error(F, o->loc, "'%s' is %s, not a query", o->name,
                kind_noun(nm->kind));
    return;
  }
  if (p->queries[nm->id].is_output) {
    front_error(F, o->loc, "'%s' is already an output", o->name);
    return;
  }
  p->queries[nm->id].is_output = 1;
  outs[(*n)++] = nm->id;
}

/* The results: as listed by `output`, else every query that no later
 * query reads. */
static void resolve_outputs(Front *F) {
  Program *p = F->p;
  int *outs = arena_alloc(F->a, sizeof(int) * (size_t)(p->nqueries + 1));
  int n = 0;
  if (F->saw_output) {
    for (int k = 0; k < F->nouts; k++)
      add_output(F, &F->outs[k], outs, &n);
  } else {
    for (int q = 0; q < p->nqueries; q++)
      if (!F->qextra[q].used) {
        p->queries[q].is_output = 1;
        outs[n++] = q;
      }
  }
  p->outputs = outs;
  p->noutputs = n;
}

void sema_finish(Front *F) {
  for (int q = 0; q < F->p->nqueries; q++)
    check_query_indices(F, &F->p->queries[q], F->qextra[q].info);
  resolve_outputs(F);
}
