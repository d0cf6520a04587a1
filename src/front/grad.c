/*
 * grad.c -- reverse-mode automatic differentiation of .tin programs: from
 * the input plan and a scalar loss L to new input-plan queries computing
 * dL/dT, which the optimizers then plan like any other query
 * (docs/ARCHITECTURE.md; the rules in man/tin.5, GRADIENTS).
 *
 * The gradient of the dense meaning.  A query Q[o] = e(o) reads a tensor
 * T through accesses T[idx] inside e.  By the chain rule, the adjoint of
 * T (dL/dT) is the sum, over every access of T in every query Q on a path
 * to L, of
 *
 *     sum(scope - idx: dL/dQ[o] * (product of the partial derivatives
 *                                  along the path from e's root to T[idx]))
 *
 * where the scope is Q's output indices and the indices of the aggregates
 * enclosing the access (those not in idx are summed: broadcasting), and
 * the partials are the registry's (ops.c: a map's partial in one argument,
 * an aggregate's partial in its element).  Aggregates run over the whole
 * dimension, fills included, so the fills get their share: it is the
 * dense meaning's gradient, entry by entry.
 *
 * What the generated program looks like, and why:
 *  - one query per intermediate adjoint (hidden, named dL/dQ: the name
 *    cannot be written in .tin, so it never collides), in the same
 *    granularity as the forward program: the adjoint of Q is materialized
 *    where Q is, so the gradient program is as sparse as the forward one;
 *  - inside a query everything is inlined: the partials are written as
 *    products, with the forward's factors copied in (the partial of
 *    W[i,j] * U[i,k] in U is W[i,j]), so a sparse factor stays a conjunct
 *    of the product and the physical planner iterates it: no
 *    densification;
 *  - forward values are reused rather than copied where they are whole
 *    queries (the value of a query's root is an alias of the query: the
 *    sigmoid in dP = P * (1 - P)); nested ones are copied, then lifted
 *    and shared by the optimizers' CSE;
 *  - a mask of a consumer C (a factor of C's root product that depends
 *    on C's output indices only, as (R[i, j] != 0) in P[i, j] = (R[i, j]
 *    != 0) * U[i, k] * V[j, k]) is multiplied into dL/dC once, in a
 *    hidden query dL/dC:masked, rather than into every term: the terms
 *    then read one sparse factor where they read two with the same
 *    pattern (one of them looked up entry by entry), e.g. GU[i, k] =
 *    sum(j: dL/dP:masked[i, j] * V[j, k]), a plain sparse-times-dense
 *    product (a reassociation of the same factors);
 *  - adjoints are memoized per (loss, tensor) in the program (Front), so
 *    several grads of one loss share their intermediates;
 *  - a contribution that is structurally zero (through a comparison, a
 *    logical op, any/all, ifelse's condition, or an argument that does not
 *    depend on T) is left out, not multiplied by 0: such contributions are
 *    exactly 0 even where the rest would be inf or nan.
 *
 * Index sizes.  Sizes are inferred from accesses (bind.c), so a generated
 * query must mention every index in some access.  When a contribution is
 * constant along an index (L = sum(j: theta[j]) has gradient 1), it is
 * multiplied by (X || 1), which is exactly 1, with X an access that
 * mentions the index.
 *
 * Not supported (located errors): an access of a tensor on the gradient's
 * path with a repeated index (T[i, i]: its gradient is zero off the
 * diagonal, which no generated query can write; the error says to take
 * the gradient with respect to a query Diag[i] = T[i, i] instead), and
 * user aggregates other than sum-, prod-, max- or min-like ones.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "front_internal.h"

/* ---- the index table of the query being built ---- */

typedef struct Target {
  Index *idx;
  int n, cap;
} Target;

typedef struct Grad {
  Front *F;
  Arena *a;
  Program *p;
  int loss;             /* query number of L */
  Loc at;               /* the grad call: where errors point */
  unsigned char *reach; /* per query <= loss: on a path to L */
  int **readset;        /* per reached query: the tensors it reads, as
                           tensor_key()s, ending with INT_MIN */
  const Node **path;    /* root .. access, while walking a query */
  int npath, cappath;
  int failed;           /* an error was reported */
} Grad;

/* Copying nodes of a consumer query C into the target's index space. */
typedef struct Walk {
  Grad *G;
  int cq;          /* C's query number */
  const Query *C;  /* valid while no query is appended */
  Target *t;
  int *map;        /* C's index id -> target id (-1: not mapped) */
} Walk;

static int new_index(Grad *G, Target *t, const char *name, Loc loc) {
  t->idx = front_grow(G->F, t->idx, t->n, &t->cap, sizeof(Index));
  t->idx[t->n].name = name;
  t->idx[t->n].dim = -1; /* set from `dim` by sema_finish, by name */
  t->idx[t->n].loc = loc;
  return t->n++;
}

/* A target index standing for C's index id. */
static int index_like(Walk *W, int id) {
  const Index *x = &W->C->indices[id];
  return new_index(W->G, W->t, x->name, x->loc);
}

/* ---- building nodes, with exact simplifications ---- */

static const Op *op_named(Grad *G, const char *name) {
  return ops_find(&G->p->ops, name);
}

static int is_op(const Op *op, const char *name) {
  return op->is_builtin && strcmp(op->name, name) == 0;
}

static int is_const(const Node *n, double v) {
  return n->kind == ND_CONST && n->value == v && !signbit(n->value);
}

static Node *konst(Grad *G, double v) {
  Loc none = {0, 0};
  return plan_const(G->a, none, v);
}

/* A product of args, nested products flattened (a reassociation: equal
 * up to rounding, as tin(5) allows) and factors 1 dropped (x * 1 is x
 * for every double). */
static Node *mk_product(Grad *G, const Op *times, int n, Node **args) {
  int total = 0;
  for (int k = 0; k < n; k++)
    total += args[k]->kind == ND_MAP && args[k]->op == times ? args[k]->nargs
                                                             : 1;
  Node **flat = arena_alloc(G->a, sizeof(Node *) * (size_t)(total + 1));
  int m = 0;
  for (int k = 0; k < n; k++) {
    Node *x = args[k];
    int inner = x->kind == ND_MAP && x->op == times;
    for (int j = 0; j < (inner ? x->nargs : 1); j++) {
      Node *y = inner ? x->args[j] : x;
      if (!is_const(y, 1))
        flat[m++] = y;
    }
  }
  if (m <= 1)
    return m ? flat[0] : konst(G, 1);
  Loc none = {0, 0};
  return plan_map(G->a, none, times, m, flat);
}

/* op(args) with only rewrites that give the same bits for every value
 * (and the reassociation of products): constants folded, ifelse of a
 * constant condition, x ^ 1, x / 1, x * 1. */
static Node *mk_map(Grad *G, const Op *op, int n, Node **args) {
  int all_const = n <= 16;
  for (int k = 0; k < n && all_const; k++)
    all_const = args[k]->kind == ND_CONST;
  if (all_const) {
    double v[16];
    for (int k = 0; k < n; k++)
      v[k] = args[k]->value;
    return konst(G, ops_apply(op, v, n));
  }
  if (is_op(op, "ifelse") && args[0]->kind == ND_CONST)
    return args[0]->value != 0 ? args[1] : args[2];
  if ((is_op(op, "^") || is_op(op, "/")) && is_const(args[1], 1))
    return args[0];
  if (is_op(op, "*"))
    return mk_product(G, op, n, args);
  Loc none = {0, 0};
  return plan_map(G->a, none, op, n, args);
}

static Node *mk2(Grad *G, const char *op, Node *x, Node *y) {
  Node *args[2] = {x, y};
  return mk_map(G, op_named(G, op), 2, args);
}

static Node *mk3(Grad *G, const char *op, Node *x, Node *y, Node *z) {
  Node *args[3] = {x, y, z};
  return mk_map(G, op_named(G, op), 3, args);
}

/* g * d, where a NULL g stands for 1 (the loss's own adjoint). */
static Node *mul(Grad *G, Node *g, Node *d) {
  return g ? mk2(G, "*", g, d) : d;
}

/* ---- copying forward nodes into the target ---- */

static Node *copy_node(Walk *W, const Node *n);

/* Bind fresh target indices for C's ids idx[0..n) (an aggregate being
 * copied); the old mapping goes to saved[] for unbind. */
static int *rebind(Walk *W, int n, const int *idx, int *saved) {
  int *fresh = arena_alloc(W->G->a, sizeof(int) * (size_t)(n + 1));
  for (int k = 0; k < n; k++) {
    saved[k] = W->map[idx[k]];
    fresh[k] = index_like(W, idx[k]);
    W->map[idx[k]] = fresh[k];
  }
  return fresh;
}

static void unbind(Walk *W, int n, const int *idx, const int *saved) {
  for (int k = n - 1; k >= 0; k--)
    W->map[idx[k]] = saved[k];
}

static int *mapped_idx(Walk *W, int n, const int *idx) {
  int *t = arena_alloc(W->G->a, sizeof(int) * (size_t)(n + 1));
  for (int k = 0; k < n; k++)
    t[k] = W->map[idx[k]];
  return t;
}

/* The value of C's root: an alias of C itself (computed once, shared). */
static Node *root_alias(Walk *W) {
  const Query *C = W->C;
  return plan_alias(W->G->a, C->loc, W->cq, C->nout,
                    mapped_idx(W, C->nout, C->out));
}

static Node *copy_agg(Walk *W, const Node *n) {
  int *saved = arena_alloc(W->G->a, sizeof(int) * (size_t)(n->nidx + 1));
  int *fresh = rebind(W, n->nidx, n->idx, saved);
  Node *arg = copy_node(W, n->arg);
  unbind(W, n->nidx, n->idx, saved);
  return plan_agg(W->G->a, n->loc, n->op, n->nidx, fresh, arg);
}

/* A copy of C's subexpression n over the target's indices (aggregates
 * bind fresh indices; C's root is read back from C). */
static Node *copy_node(Walk *W, const Node *n) {
  Grad *G = W->G;
  switch (n->kind) {
  case ND_CONST:
    return plan_const(G->a, n->loc, n->value);
  case ND_INPUT:
    return plan_input(G->a, n->loc, n->tensor, n->nidx,
                      mapped_idx(W, n->nidx, n->idx));
  case ND_ALIAS:
    return plan_alias(G->a, n->loc, n->tensor, n->nidx,
                      mapped_idx(W, n->nidx, n->idx));
  case ND_MAP: {
    if (n == W->C->expr)
      return root_alias(W);
    Node **args = arena_alloc(G->a, sizeof(Node *) * (size_t)(n->nargs + 1));
    for (int k = 0; k < n->nargs; k++)
      args[k] = copy_node(W, n->args[k]);
    return plan_map(G->a, n->loc, n->op, n->nargs, args);
  }
  case ND_AGG:
    return n == W->C->expr ? root_alias(W) : copy_agg(W, n);
  case ND_PARAM:
    break;
  }
  return konst(G, NAN); /* no parameters outside def bodies */
}

/* A plain deep copy of a def body (parameters stay parameters). */
static Node *copy_body(Grad *G, const Node *n) {
  if (n->kind == ND_PARAM)
    return plan_param(G->a, n->loc, n->tensor);
  if (n->kind != ND_MAP)
    return plan_const(G->a, n->loc, n->value);
  Node **args = arena_alloc(G->a, sizeof(Node *) * (size_t)(n->nargs + 1));
  for (int k = 0; k < n->nargs; k++)
    args[k] = copy_body(G, n->args[k]);
  return plan_map(G->a, n->loc, n->op, n->nargs, args);
}

/* ---- partial derivatives of ops ---- */

/* Where a partial's parameters come from: the arguments and the value of
 * one application `site` of the op, copied from a forward query (W) or
 * from a def body (W NULL). */
typedef struct Site {
  Walk *W;
  const Node *site; /* an ND_MAP */
} Site;

static Node *site_param(Grad *G, const Site *s, int param) {
  if (param != GRAD_VALUE_PARAM && (param < 0 || param >= s->site->nargs))
    return konst(G, NAN); /* a formula naming a missing argument */
  const Node *n = param == GRAD_VALUE_PARAM ? s->site : s->site->args[param];
  return s->W ? copy_node(s->W, n) : copy_body(G, n);
}

/* body with its parameters replaced by fresh copies of the site's
 * arguments and value. */
static Node *instantiate(Grad *G, const Node *body, const Site *s) {
  switch (body->kind) {
  case ND_PARAM:
    return site_param(G, s, body->tensor);
  case ND_MAP: {
    Node **args =
        arena_alloc(G->a, sizeof(Node *) * (size_t)(body->nargs + 1));
    for (int k = 0; k < body->nargs; k++)
      args[k] = instantiate(G, body->args[k], s);
    return mk_map(G, body->op, body->nargs, args);
  }
  default:
    return konst(G, body->value);
  }
}

static Node *param(Grad *G, int k) {
  Loc none = {0, 0};
  return plan_param(G->a, none, k);
}

/* The registry's formula for op's partial k, parsed; v (parameter 3 of
 * the formula) becomes GRAD_VALUE_PARAM.  NULL when it is "0". */
static Node *renumber_value(Grad *G, Node *n) {
  if (n->kind == ND_PARAM && n->tensor == 3)
    n->tensor = GRAD_VALUE_PARAM;
  for (int k = 0; n->kind == ND_MAP && k < n->nargs; k++)
    renumber_value(G, n->args[k]);
  return n;
}

static Node *formula_partial(Grad *G, const Op *op, int k) {
  const char *text = k < 3 ? op->partial[k] : NULL;
  Node *body = text ? front_parse_formula(G->F, text) : NULL;
  if (!body) {
    front_error(G->F, G->at, "internal error: no derivative of '%s' in "
                "argument %d in the registry", op->name, k + 1);
    G->failed = 1;
    return NULL;
  }
  if (is_const(body, 0))
    return NULL;
  return renumber_value(G, body);
}

/* The product of the parameters other than k (1 for a single one). */
static Node *product_partial(Grad *G, int k, int nargs) {
  if (nargs == 1)
    return konst(G, 1);
  Node **args = arena_alloc(G->a, sizeof(Node *) * (size_t)nargs);
  int m = 0;
  for (int j = 0; j < nargs; j++)
    if (j != k)
      args[m++] = param(G, j);
  return m == 1 ? args[0] : plan_map(G->a, args[0]->loc, op_named(G, "*"),
                                      m, args);
}

/* (x_k == v) / sum_j (x_j == v): ties share the gradient equally. */
static Node *select_partial(Grad *G, int k, int nargs) {
  Loc none = {0, 0};
  const Op *eq = op_named(G, "==");
  Node **ties = arena_alloc(G->a, sizeof(Node *) * (size_t)nargs);
  for (int j = 0; j < nargs; j++) {
    Node *a[2] = {param(G, j), param(G, GRAD_VALUE_PARAM)};
    ties[j] = plan_map(G->a, none, eq, 2, a);
  }
  Node *a[2] = {param(G, k), param(G, GRAD_VALUE_PARAM)};
  Node *mine = plan_map(G->a, none, eq, 2, a);
  Node *count = nargs == 1 ? konst(G, 1)
                           : plan_map(G->a, none, op_named(G, "+"), nargs,
                                      ties);
  Node *q[2] = {mine, count};
  return plan_map(G->a, none, op_named(G, "/"), 2, q);
}

static Node *body_partial(Grad *G, const Op *op, int k);

/* d op / d argument k for op applied to nargs arguments, as a body over
 * parameters (GRAD_VALUE_PARAM: the value); NULL when no gradient flows.
 * Made once per program (Front's pmemo). */
static Node *op_partial(Grad *G, const Op *op, int k, int nargs) {
  Front *F = G->F;
  for (int m = 0; m < F->npmemo; m++) {
    const PartialMemo *pm = &F->pmemo[m];
    if (pm->op == op && pm->k == k && pm->nargs == nargs)
      return pm->body;
  }
  Node *body = NULL;
  switch (op->deriv) {
  case DERIV_BODY:
    body = body_partial(G, op, k);
    break;
  case DERIV_FORMULA:
    body = formula_partial(G, op, k);
    break;
  case DERIV_ZERO:
    break;
  case DERIV_SUM:
    body = konst(G, 1);
    break;
  case DERIV_PRODUCT:
    body = product_partial(G, k, nargs);
    break;
  case DERIV_SELECT:
    body = select_partial(G, k, nargs);
    break;
  }
  F->pmemo = front_grow(F, F->pmemo, F->npmemo, &F->cappmemo,
                        sizeof(PartialMemo));
  PartialMemo *pm = &F->pmemo[F->npmemo++];
  pm->op = op;
  pm->k = k;
  pm->nargs = nargs;
  pm->body = body;
  return body;
}

/* d e / d parameter k of a def body e, symbolically (forward mode over
 * the body: the sum over e's arguments of the op's partial times the
 * argument's derivative); NULL when e does not depend on parameter k. */
static Node *diff_body(Grad *G, const Node *e, int k) {
  if (e->kind == ND_PARAM)
    return e->tensor == k ? konst(G, 1) : NULL;
  if (e->kind != ND_MAP)
    return NULL;
  Node **terms = arena_alloc(G->a, sizeof(Node *) * (size_t)(e->nargs + 1));
  int n = 0;
  Site s = {NULL, e};
  for (int m = 0; m < e->nargs; m++) {
    Node *dm = diff_body(G, e->args[m], k);
    Node *pm = dm ? op_partial(G, e->op, m, e->nargs) : NULL;
    if (pm)
      terms[n++] = mul(G, instantiate(G, pm, &s), dm);
  }
  if (n == 0)
    return NULL;
  return n == 1 ? terms[0] : mk_map(G, op_named(G, "+"), n, terms);
}

/* A user def's partial k, from its body. */
static Node *body_partial(Grad *G, const Op *op, int k) {
  return op->body ? diff_body(G, op->body, k) : NULL;
}

/* ---- partial derivatives of aggregates ---- */

/* The rule of an aggregate's op: a built-in's own; a user aggregate's
 * when its body is a built-in +, *, max or min (or && / ||) of its two
 * parameters; -1 for none. */
static int agg_rule(const Op *op) {
  if (op->is_builtin)
    return (int)op->deriv;
  const Node *b = op->body;
  if (!b || b->kind != ND_MAP || !b->op->is_builtin || b->nargs != 2 ||
      b->args[0]->kind != ND_PARAM || b->args[1]->kind != ND_PARAM ||
      b->args[0]->tensor + b->args[1]->tensor != 1 ||
      b->op->deriv == DERIV_FORMULA)
    return -1;
  return (int)b->op->deriv;
}

/* op(J': body(n)) with fresh indices J' standing for the aggregate n's
 * indices J inside body (a second pass over n's elements). */
static Node *fresh_agg(Walk *W, const Node *n, const Op *op,
                       Node *(*body)(Walk *W, const Node *n)) {
  int *saved = arena_alloc(W->G->a, sizeof(int) * (size_t)(n->nidx + 1));
  int *fresh = rebind(W, n->nidx, n->idx, saved);
  Node *arg = body(W, n);
  unbind(W, n->nidx, n->idx, saved);
  return plan_agg(W->G->a, n->loc, op, n->nidx, fresh, arg);
}

static const Op *agg_op(Walk *W, const char *name) {
  return ops_find_agg(&W->G->p->ops, name);
}

/* Mark the ids e's accesses use and the ids e's aggregates bind. */
static void ids_of(const Node *e, unsigned char *used, unsigned char *bound) {
  if (e->kind == ND_INPUT || e->kind == ND_ALIAS)
    for (int k = 0; k < e->nidx; k++)
      used[e->idx[k]] = 1;
  for (int k = 0; e->kind == ND_AGG && k < e->nidx; k++)
    bound[e->idx[k]] = 1;
  for (int k = 0; e->kind == ND_MAP && k < e->nargs; k++)
    ids_of(e->args[k], used, bound);
  if (e->kind == ND_AGG)
    ids_of(e->arg, used, bound);
}

/* The hidden query C:OP#N holding the elements of the max/min aggregate
 * n over their free indices (made once per program). */
static const ElemMemo *elements_query(Walk *W, const Node *n) {
  Front *F = W->G->F;
  for (int k = 0; k < F->nememo; k++)
    if (F->ememo[k].agg == n)
      return &F->ememo[k];
  Grad *G = W->G;
  int ni = W->C->nindices;
  unsigned char *used = arena_alloc(G->a, (size_t)ni + 1);
  unsigned char *bound = arena_alloc(G->a, (size_t)ni + 1);
  ids_of(n->arg, used, bound);
  Target t = {0};
  int *map = arena_alloc(G->a, sizeof(int) * (size_t)(ni + 1));
  int *free = arena_alloc(G->a, sizeof(int) * (size_t)(ni + 1));
  int *out = arena_alloc(G->a, sizeof(int) * (size_t)(ni + 1));
  int nfree = 0;
  Walk E = {G, W->cq, W->C, &t, map};
  for (int id = 0; id < ni; id++) {
    map[id] = -1;
    if (used[id] && !bound[id]) {
      free[nfree] = id;
      map[id] = out[nfree++] = index_like(&E, id);
    }
  }
  Query q = {.nout = nfree, .out = out, .expr = copy_node(&E, n->arg),
             .loc = n->loc};
  q.name = arena_printf(G->a, "%s:%s#%d", W->C->name,
                        n->op->agg_name ? n->op->agg_name : n->op->name,
                        F->nememo + 1);
  q.indices = t.idx;
  q.nindices = t.n;
  int made = sema_append_query(F, &q, 1);
  W->C = &G->p->queries[W->cq]; /* the queries may have moved */
  F->ememo = front_grow(F, F->ememo, F->nememo, &F->capememo,
                        sizeof(ElemMemo));
  ElemMemo *m = &F->ememo[F->nememo++];
  *m = (ElemMemo){n, made, nfree, free};
  return m;
}

/* An element of the max/min aggregate n at the walk's indices: the
 * access itself, or the materialized elements (an expression could be
 * computed with different rounding where it is compared with the
 * aggregate's value: max and min are exact only on the same values). */
static Node *element(Walk *W, const Node *n) {
  if (n->arg->kind == ND_INPUT || n->arg->kind == ND_ALIAS)
    return copy_node(W, n->arg);
  const ElemMemo *m = elements_query(W, n);
  return plan_alias(W->G->a, n->loc, m->query, m->nfree,
                    mapped_idx(W, m->nfree, m->free));
}

/* The value of the max/min aggregate n, from the same elements. */
static Node *select_value(Walk *W, const Node *n) {
  if (n->arg->kind == ND_INPUT || n->arg->kind == ND_ALIAS)
    return copy_node(W, n);
  return fresh_agg(W, n, n->op, element);
}

/* the element equals the aggregate's value (a tie candidate) */
static Node *elem_is_value(Walk *W, const Node *n) {
  return mk2(W->G, "==", element(W, n), select_value(W, n));
}

static Node *elem_is_zero(Walk *W, const Node *n) {
  return mk2(W->G, "==", copy_node(W, n->arg), konst(W->G, 0));
}

/* the element, or 1 where it is 0 */
static Node *elem_nonzero(Walk *W, const Node *n) {
  Grad *G = W->G;
  return mk3(G, "ifelse", elem_is_zero(W, n), konst(G, 1),
             copy_node(W, n->arg));
}

/* max/min: (a == Q) / sum(J': a' == Q): ties share equally. */
static Node *select_agg_partial(Walk *W, const Node *n) {
  return mk2(W->G, "/", elem_is_value(W, n),
             fresh_agg(W, n, agg_op(W, "sum"), elem_is_value));
}

/* prod: the product of the other elements without dividing by zero:
 * with Z zeros among the elements and P the product of the non-zero
 * ones, a non-zero element gets P / a when Z = 0 (else 0), a zero
 * element P when Z = 1 (else 0). */
static Node *product_agg_partial(Walk *W, const Node *n) {
  Grad *G = W->G;
  Node *zero_case = mk3(G, "ifelse",
                        mk2(G, "==", fresh_agg(W, n, agg_op(W, "sum"), elem_is_zero),
                            konst(G, 1)),
                        fresh_agg(W, n, agg_op(W, "prod"), elem_nonzero), konst(G, 0));
  Node *other_case = mk3(
      G, "ifelse",
      mk2(G, "==", fresh_agg(W, n, agg_op(W, "sum"), elem_is_zero), konst(G, 0)),
      mk2(G, "/", fresh_agg(W, n, agg_op(W, "prod"), elem_nonzero),
          copy_node(W, n->arg)),
      konst(G, 0));
  return mk3(G, "ifelse", elem_is_zero(W, n), zero_case, other_case);
}

/* Error: an aggregate grad has no rule for (at its use in the forward). */
static void no_agg_rule(Grad *G, const Node *n) {
  front_error(G->F, G->at, "cannot differentiate through the aggregate "
              "'%s' at %d:%d: grad has rules for sum, prod, max, min, any "
              "and all, and for user aggregates whose body is one of +, *, "
              "max, min, &&, || of their two parameters", n->op->name,
              n->loc.line, n->loc.col);
  G->failed = 1;
}

/* d n / d element, for the aggregate n; NULL when no gradient flows. */
static Node *agg_partial(Walk *W, const Node *n) {
  switch (agg_rule(n->op)) {
  case DERIV_SUM:
    return konst(W->G, 1);
  case DERIV_PRODUCT:
    return product_agg_partial(W, n);
  case DERIV_SELECT:
    return select_agg_partial(W, n);
  case DERIV_ZERO:
    return NULL;
  default:
    no_agg_rule(W->G, n);
    return NULL;
  }
}

/* d n / d argument a, for the map n; NULL when no gradient flows. */
static Node *map_partial(Walk *W, const Node *n, int a) {
  Node *body = op_partial(W->G, n->op, a, n->nargs);
  if (!body)
    return NULL;
  Site s = {W, n};
  return instantiate(W->G, body, &s);
}

/* ---- the memo of adjoints ---- */

static const GradMemo *memo_find(Front *F, int loss, int is_input, int t) {
  for (int k = 0; k < F->ngmemo; k++) {
    const GradMemo *m = &F->gmemo[k];
    if (m->loss == loss && m->is_input == is_input && m->tensor == t)
      return m;
  }
  return NULL;
}

static void memo_add(Front *F, int loss, int is_input, int t, int query,
                     const int *pos, int order) {
  F->gmemo = front_grow(F, F->gmemo, F->ngmemo, &F->capgmemo,
                        sizeof(GradMemo));
  GradMemo *m = &F->gmemo[F->ngmemo++];
  memset(m, 0, sizeof *m);
  m->loss = loss;
  m->is_input = is_input;
  m->tensor = t;
  m->query = query;
  for (int k = 0; k < order; k++)
    m->pos[k] = pos[k];
}

/* dL/dC as an alias in the walk's space, NULL (1) for the loss itself. */
static Node *adjoint_of_consumer(Walk *W) {
  Grad *G = W->G;
  if (W->cq == G->loss)
    return NULL;
  const GradMemo *m = memo_find(G->F, G->loss, 0, W->cq);
  const Query *C = W->C;
  int *idx = arena_alloc(G->a, sizeof(int) * (size_t)(C->nout + 1));
  for (int k = 0; k < C->nout; k++)
    idx[m->pos[k]] = W->map[C->out[k]];
  return plan_alias(G->a, C->loc, m->query, C->nout, idx);
}

/* ---- the adjoint of one tensor ---- */

/* The tensor whose adjoint is built, and its output indices. */
typedef struct AdjTarget {
  Target t;
  int is_input, tensor, order;
  int out[GALLEY_MAX_ORDER]; /* target id of each mode of the tensor */
} AdjTarget;

/* A tensor as one int: query q is q, input k is -1 - k. */
static int tensor_key(int is_input, int t) { return is_input ? -1 - t : t; }

/* Whether n is an access of the tensor. */
static int reads(const Node *n, int is_input, int t) {
  return (n->kind == ND_INPUT && is_input && n->tensor == t) ||
         (n->kind == ND_ALIAS && !is_input && n->tensor == t);
}

/* Mark in seen[0..size) the target ids of every access in n (indices
 * made after seen[] was sized are fresh aggregate indices: not needed). */
static void mentioned(const Node *n, unsigned char *seen, int size) {
  if (n->kind == ND_INPUT || n->kind == ND_ALIAS)
    for (int k = 0; k < n->nidx; k++)
      if (n->idx[k] < size)
        seen[n->idx[k]] = 1;
  for (int k = 0; n->kind == ND_MAP && k < n->nargs; k++)
    mentioned(n->args[k], seen, size);
  if (n->kind == ND_AGG)
    mentioned(n->arg, seen, size);
}

/* An access of C mentioning C's index id x, preferably one whose indices
 * are all mapped; NULL when none mentions it (a `dim` sizes it). */
static const Node *access_with(const Walk *W, const Node *n, int x,
                               int need_mapped) {
  if (n->kind == ND_INPUT || n->kind == ND_ALIAS) {
    int has = 0, all = 1;
    for (int k = 0; k < n->nidx; k++) {
      has |= n->idx[k] == x;
      all &= W->map[n->idx[k]] >= 0;
    }
    return has && (all || !need_mapped) ? n : NULL;
  }
  const Node *found = NULL;
  for (int k = 0; n->kind == ND_MAP && k < n->nargs && !found; k++)
    found = access_with(W, n->args[k], x, need_mapped);
  if (n->kind == ND_AGG)
    found = access_with(W, n->arg, x, need_mapped);
  return found;
}

/* (X || 1), exactly 1, with X an access of C mentioning index id x (its
 * indices outside the walk's scope summed), so the target query can size
 * the index; NULL when no access mentions x. */
static Node *shape_factor(Walk *W, int x) {
  Grad *G = W->G;
  const Node *acc = access_with(W, W->C->expr, x, 1);
  Node *f;
  if (acc) {
    f = copy_node(W, acc);
  } else if ((acc = access_with(W, W->C->expr, x, 0))) {
    int *unm = arena_alloc(G->a, sizeof(int) * (size_t)(acc->nidx + 1));
    int nu = 0;
    for (int k = 0; k < acc->nidx; k++)
      if (W->map[acc->idx[k]] < 0) {
        int dup = 0;
        for (int j = 0; j < nu; j++)
          dup |= unm[j] == acc->idx[k];
        if (!dup)
          unm[nu++] = acc->idx[k];
      }
    int *saved = arena_alloc(G->a, sizeof(int) * (size_t)(nu + 1));
    int *fresh = rebind(W, nu, unm, saved);
    f = plan_agg(G->a, acc->loc, ops_find_agg(&G->p->ops, "sum"), nu, fresh,
                 copy_node(W, acc));
    unbind(W, nu, unm, saved);
  } else {
    return NULL;
  }
  return plan_map(G->a, acc->loc, op_named(G, "||"), 2,
                  (Node *[]){f, konst(G, 1)});
}

/* g times shape factors for the listed target ids that no access of g
 * mentions: ids[k] stands for C's index src[k]. */
static Node *with_shape(Walk *W, Node *g, int n, const int *ids,
                        const int *src) {
  int size = W->t->n;
  unsigned char *seen = arena_alloc(W->G->a, (size_t)size + 1);
  mentioned(g, seen, size);
  for (int k = 0; k < n; k++) {
    if (seen[ids[k]])
      continue;
    Node *f = shape_factor(W, src[k]);
    if (!f)
      continue;
    g = mul(W->G, g, f);
    mentioned(f, seen, size);
  }
  return g;
}

/* Error: a repeated index in an access on the gradient's path.  The
 * gradient of a diagonal is zero off it, which a generated query cannot
 * write (no expression of .tin is nonzero only where two indices are
 * equal), so the message says what works instead: the gradient with
 * respect to a query holding the diagonal. */
static void diagonal_access(Walk *W, const Node *leaf) {
  Grad *G = W->G;
  const char *t = leaf->kind == ND_INPUT ? G->p->inputs[leaf->tensor].name
                                         : G->p->queries[leaf->tensor].name;
  char acc[256], dist[256];
  int n = snprintf(acc, sizeof acc, "%s[", t), nd = 0;
  dist[0] = 0;
  for (int m = 0; m < leaf->nidx && n < (int)sizeof acc; m++) {
    const char *x = W->C->indices[leaf->idx[m]].name;
    n += snprintf(acc + n, sizeof acc - (size_t)n, "%s%s", m ? ", " : "", x);
    int seen = 0;
    for (int k = 0; k < m; k++)
      seen |= leaf->idx[k] == leaf->idx[m];
    if (!seen && nd < (int)sizeof dist)
      nd += snprintf(dist + nd, sizeof dist - (size_t)nd, "%s%s",
                     nd ? ", " : "", x);
  }
  front_error(G->F, G->at, "cannot differentiate through '%s]' at %d:%d: "
              "grad does not support an access that repeats an index (a "
              "diagonal); read it into a query of its own, Diag[%s] = %s], "
              "and take grad(%s, Diag[%s])", acc, leaf->loc.line,
              leaf->loc.col, dist, acc, G->p->queries[G->loss].name, dist);
  G->failed = 1;
}

/* Map C's scope at the access G->path[last] (C's outputs, the indices
 * of the enclosing aggregates) into the target: the access's indices to
 * the target's outputs, the others to fresh indices (summed), listed in
 * sum[] (target ids) and src[] (C's ids).  Returns how many are summed,
 * or -1 (reported) on a repeated index. */
static int map_scope(Walk *W, const AdjTarget *tg, int *sum, int *src) {
  Grad *G = W->G;
  const Node *leaf = G->path[G->npath - 1];
  for (int k = 0; k < W->C->nindices; k++)
    W->map[k] = -1;
  for (int m = 0; m < leaf->nidx; m++) {
    if (W->map[leaf->idx[m]] >= 0) {
      diagonal_access(W, leaf);
      return -1;
    }
    W->map[leaf->idx[m]] = tg->out[m];
  }
  int ns = 0;
  for (int k = 0; k < W->C->nout; k++) {
    int x = W->C->out[k];
    if (W->map[x] < 0) {
      W->map[x] = sum[ns] = index_like(W, x);
      src[ns++] = x;
    }
  }
  for (int d = 0; d < G->npath - 1; d++) {
    const Node *n = G->path[d];
    for (int k = 0; n->kind == ND_AGG && k < n->nidx; k++)
      if (W->map[n->idx[k]] < 0) {
        W->map[n->idx[k]] = sum[ns] = index_like(W, n->idx[k]);
        src[ns++] = n->idx[k];
      }
  }
  return ns;
}

/* ---- masks folded into a consumer's adjoint ---- */

/* The memo kind (GradMemo.is_input) of a consumer's masked adjoint, next
 * to 1 (an input's gradient) and 0 (a query's adjoint). */
enum { MEMO_MASKED = 2 };

/* The product at the root of C: its root, or the element of a root sum;
 * NULL when there is none. */
static const Node *root_product(const Query *C) {
  const Node *e = C->expr;
  if (e->kind == ND_AGG && agg_rule(e->op) == DERIV_SUM)
    e = e->arg;
  return e->kind == ND_MAP && is_op(e->op, "*") ? e : NULL;
}

/* Whether every access under f uses only indices in `out` (of n), and f
 * has an access and no aggregate. */
static int only_outputs(const Node *f, const int *out, int n, int *accesses) {
  if (f->kind == ND_AGG || f->kind == ND_PARAM)
    return 0;
  if (f->kind == ND_INPUT || f->kind == ND_ALIAS) {
    ++*accesses;
    for (int k = 0; k < f->nidx; k++) {
      int found = 0;
      for (int m = 0; m < n; m++)
        found |= f->idx[k] == out[m];
      if (!found)
        return 0;
    }
  }
  for (int k = 0; f->kind == ND_MAP && k < f->nargs; k++)
    if (!only_outputs(f->args[k], out, n, accesses))
      return 0;
  return 1;
}

/* A mask of C: a factor of C's root product that is a function of C's
 * output indices alone (R[i, j] != 0 in P[i, j] = (R[i, j] != 0) *
 * U[i, k] * V[j, k]).  It multiplies every path through the product's
 * other factors, so it can be multiplied into dL/dC once, in a query of
 * its own over C's outputs, instead of into every term: the terms then
 * read one sparse factor (dL/dC times the mask, on the mask's pattern)
 * where they read two with the same pattern, one of them looked up. */
static int is_mask(const Query *C, const Node *f) {
  int accesses = 0;
  return only_outputs(f, C->out, C->nout, &accesses) && accesses > 0;
}

/* The factors of the product tree at prod (nested products flattened:
 * the parser makes a * b * c into (a * b) * c), into f (NULL: count). */
static int factors(const Node *prod, const Node **f, int n) {
  for (int k = 0; k < prod->nargs; k++) {
    const Node *x = prod->args[k];
    if (x->kind == ND_MAP && x->op == prod->op) {
      n = factors(x, f, n);
    } else {
      if (f)
        f[n] = x;
      n++;
    }
  }
  return n;
}

static const Node **factor_list(Grad *G, const Node *prod, int *n) {
  *n = factors(prod, NULL, 0);
  const Node **f = arena_alloc(G->a, sizeof(Node *) * (size_t)(*n + 1));
  factors(prod, f, 0);
  return f;
}

/* Whether e is pointwise: no aggregate anywhere in it. */
static int pointwise(const Node *e) {
  if (e->kind == ND_AGG)
    return 0;
  for (int k = 0; e->kind == ND_MAP && k < e->nargs; k++)
    if (!pointwise(e->args[k]))
      return 0;
  return 1;
}

/* dL/dC as a factor of C's masked adjoint, over the indices aidx (by
 * dL/dC's output position): its expression copied when it is a pointwise
 * map (the residual -2 (R - P) of a factorization), so that the masked
 * query computes it on the mask's pattern in one pass, an SDDMM-like
 * kernel, and dL/dC itself is not materialized where nothing else reads
 * it; else an alias of dL/dC. */
static Node *adjoint_factor(Grad *G, const GradMemo *adj, int *aidx,
                            Loc loc) {
  const Query *A = &G->p->queries[adj->query];
  const Node *e = A->expr;
  if (e->kind != ND_MAP || A->nindices != A->nout || !pointwise(e))
    return plan_alias(G->a, loc, adj->query, A->nout, aidx);
  int *map = arena_alloc(G->a, sizeof(int) * (size_t)(A->nindices + 1));
  for (int m = 0; m < A->nout; m++)
    map[A->out[m]] = aidx[m];
  Walk W = {G, adj->query, A, NULL, map};
  Node **args = arena_alloc(G->a, sizeof(Node *) * (size_t)(e->nargs + 1));
  for (int k = 0; k < e->nargs; k++) /* the root itself would be an alias */
    args[k] = copy_node(&W, e->args[k]);
  return plan_map(G->a, loc, e->op, e->nargs, args);
}

/* The number of accesses under e. */
static int count_accesses(const Node *e) {
  if (e->kind == ND_INPUT || e->kind == ND_ALIAS)
    return 1;
  int n = 0;
  for (int k = 0; e->kind == ND_MAP && k < e->nargs; k++)
    n += count_accesses(e->args[k]);
  return n + (e->kind == ND_AGG ? count_accesses(e->arg) : 0);
}

/* The hidden query dL/dC * masks over C's outputs (made once per loss
 * and consumer), named like dL/dC:masked. */
static int masked_adjoint_query(Walk *W, const Node *prod) {
  Grad *G = W->G;
  const GradMemo *m = memo_find(G->F, G->loss, MEMO_MASKED, W->cq);
  if (m)
    return m->query;
  const GradMemo *adj = memo_find(G->F, G->loss, 0, W->cq);
  const Query *C = W->C;
  Target t = {0};
  int *map = arena_alloc(G->a, sizeof(int) * (size_t)(C->nindices + 1));
  int *out = arena_alloc(G->a, sizeof(int) * (size_t)(C->nout + 1));
  int *aidx = arena_alloc(G->a, sizeof(int) * (size_t)(C->nout + 1));
  int pos[GALLEY_MAX_ORDER];
  Walk E = {G, W->cq, C, &t, map};
  for (int k = 0; k < C->nindices; k++)
    map[k] = -1;
  for (int k = 0; k < C->nout; k++) {
    out[k] = map[C->out[k]] = index_like(&E, C->out[k]);
    aidx[adj->pos[k]] = out[k];
    pos[k] = k;
  }
  int nf;
  const Node **fs = factor_list(G, prod, &nf);
  Node **f = arena_alloc(G->a, sizeof(Node *) * (size_t)(nf + 2));
  int n = 0;
  f[n++] = adjoint_factor(G, adj, aidx, C->loc);
  for (int k = 0; k < nf; k++)
    if (is_mask(C, fs[k]))
      f[n++] = copy_node(&E, fs[k]);
  const char *dq = G->p->queries[adj->query].name;
  Query q = {.name = arena_printf(G->a, "%s:masked", dq), .nout = C->nout,
             .out = out, .indices = t.idx, .nindices = t.n,
             .expr = mk_product(G, prod->op, n, f), .loc = C->loc};
  int made = sema_append_query(G->F, &q, 1);
  W->C = &G->p->queries[W->cq]; /* the queries may have moved */
  memo_add(G->F, G->loss, MEMO_MASKED, W->cq, made, pos, C->nout);
  return made;
}

/* dL/dC times every factor of C's pointwise root product but number
 * `excluded`, in the walk's index space, dL/dC's own expression copied
 * in when it is pointwise (adjoint_factor): the paths that leave by
 * factor `excluded` then read the forward's results (dL/dS and X in
 * TransE) and its masks (T) in one product on their common pattern,
 * which the planner intersects, where a materialized adjoint would be
 * written once and read back by each path. */
static Node *inline_masked(Walk *W, const Node *prod, int excluded) {
  Grad *G = W->G;
  const GradMemo *adj = memo_find(G->F, G->loss, 0, W->cq);
  const Query *C = W->C;
  int *aidx = arena_alloc(G->a, sizeof(int) * (size_t)(C->nout + 1));
  for (int k = 0; k < C->nout; k++)
    aidx[adj->pos[k]] = W->map[C->out[k]];
  int nf;
  const Node **fs = factor_list(G, prod, &nf);
  Node **f = arena_alloc(G->a, sizeof(Node *) * (size_t)(nf + 2));
  int n = 0;
  f[n++] = adjoint_factor(G, adj, aidx, C->loc);
  for (int k = 0; k < nf; k++)
    if (k != excluded)
      f[n++] = copy_node(W, fs[k]);
  return mk_product(G, prod->op, n, f);
}

/* The position of the factor f among fs[0..nf), -1 when absent. */
static int factor_pos(const Node **fs, int nf, const Node *f) {
  for (int k = 0; k < nf; k++)
    if (fs[k] == f)
      return k;
  return -1;
}

/* Where the path enters C's root product tree (at path[*start]) and
 * leaves it by a factor path[*factor] that is not a mask, and C has
 * masks: 1, with the masked adjoint's alias in *g; else 0.  When every
 * factor is a mask (a pointwise product over C's outputs, as X[h, r, t,
 * d] = T[h, r, t] * (E[h, d] + R[r, d] - E[t, d])) and the path leaves
 * by a factor with several accesses (several paths leave by it: the
 * E[h], R[r], E[t] of TransE's difference), the other factors are its
 * masks, multiplied with dL/dC's pointwise expression into the path's
 * own product (inline_masked): each path reads the forward's results
 * on their common pattern instead of looking dL/dC up entry by entry,
 * and nothing is materialized for it. */
static int masked_path(Walk *W, Node **g, int *start, int *factor) {
  Grad *G = W->G;
  const Query *C = W->C;
  const Node *prod = root_product(C);
  if (W->cq == G->loss || !prod)
    return 0;
  int d = G->path[0] == prod ? 0 : 1, e = d + 1;
  if (G->path[d] != prod)
    return 0;
  while (e < G->npath && G->path[e]->kind == ND_MAP &&
         G->path[e]->op == prod->op)
    e++;
  if (e >= G->npath)
    return 0;
  int nf, masks = 0, excluded = -1;
  const Node **fs = factor_list(G, prod, &nf);
  for (int k = 0; k < nf; k++)
    masks += is_mask(C, fs[k]);
  if (masks == nf && nf > 1 && count_accesses(G->path[e]) > 1)
    excluded = factor_pos(fs, nf, G->path[e]);
  else if (masks == 0 || is_mask(C, G->path[e]))
    return 0;
  *start = d;
  *factor = e;
  if (excluded >= 0) {
    *g = inline_masked(W, prod, excluded);
    return 1;
  }
  int q = masked_adjoint_query(W, prod);
  int *idx = arena_alloc(G->a, sizeof(int) * (size_t)(W->C->nout + 1));
  for (int k = 0; k < W->C->nout; k++)
    idx[k] = W->map[W->C->out[k]];
  *g = plan_alias(G->a, W->C->loc, q, W->C->nout, idx);
  return 1;
}

/* The partial of C's root product tree in its factor `child`, without
 * the masks (they are in the masked adjoint): the other factors'
 * product. */
static Node *unmasked_partial(Walk *W, const Node *prod, const Node *child) {
  Grad *G = W->G;
  int nf;
  const Node **fs = factor_list(G, prod, &nf);
  Node **f = arena_alloc(G->a, sizeof(Node *) * (size_t)(nf + 1));
  int n = 0, skipped = 0;
  for (int k = 0; k < nf; k++) {
    if (fs[k] == child && !skipped)
      skipped = 1; /* the factor differentiated (once, were it shared) */
    else if (!is_mask(W->C, fs[k]))
      f[n++] = copy_node(W, fs[k]);
  }
  return mk_product(G, prod->op, n, f);
}

/* The position of child among n's arguments. */
static int arg_pos(const Node *n, const Node *child) {
  int k = 0;
  while (k < n->nargs && n->args[k] != child)
    k++;
  return k;
}

/* The contribution of the access at the end of G->path (in query W->cq)
 * to dL/dT, or NULL when no gradient flows along that path. */
static Node *path_term(Walk *W, const AdjTarget *tg) {
  Grad *G = W->G;
  int cap = W->C->nindices + 1;
  int *sum = arena_alloc(G->a, sizeof(int) * (size_t)cap);
  int *src = arena_alloc(G->a, sizeof(int) * (size_t)cap);
  int ns = map_scope(W, tg, sum, src);
  if (ns < 0)
    return NULL;
  Node *g = NULL;
  int start = -1, factor = -1;
  if (!masked_path(W, &g, &start, &factor))
    g = adjoint_of_consumer(W);
  for (int d = 0; d + 1 < G->npath; d++) {
    const Node *n = G->path[d];
    Node *part;
    if (d == start) { /* the whole product tree at once */
      part = unmasked_partial(W, n, G->path[factor]);
      d = factor - 1;
    } else {
      part = n->kind == ND_AGG
                 ? agg_partial(W, n)
                 : map_partial(W, n, arg_pos(n, G->path[d + 1]));
    }
    if (!part)
      return NULL;
    g = mul(G, g, part);
  }
  if (!g)
    g = konst(G, 1);
  /* every index of the term must be sizable: the outputs by the access
   * itself, the summed ones by some access of C */
  const Node *leaf = G->path[G->npath - 1];
  unsigned char *seen = arena_alloc(G->a, (size_t)W->t->n + 1);
  mentioned(g, seen, W->t->n);
  int missing = 0;
  for (int m = 0; m < tg->order; m++)
    missing |= !seen[tg->out[m]];
  if (missing)
    g = mul(G, g, plan_map(G->a, leaf->loc, op_named(G, "||"), 2,
                           (Node *[]){copy_node(W, leaf), konst(G, 1)}));
  g = with_shape(W, g, ns, sum, src);
  if (ns == 0)
    return g;
  return plan_agg(G->a, leaf->loc, ops_find_agg(&G->p->ops, "sum"), ns, sum,
                  g);
}

typedef struct Terms {
  Node **v;
  int n, cap;
} Terms;

/* Walk n (in query W->cq), with the path from the root in G->path, and
 * add the contribution of every access of T. */
static void collect_terms(Walk *W, const AdjTarget *tg, const Node *n,
                          Terms *out) {
  Grad *G = W->G;
  G->path = front_grow(G->F, G->path, G->npath, &G->cappath,
                       sizeof(const Node *));
  G->path[G->npath++] = n;
  if ((n->kind == ND_INPUT || n->kind == ND_ALIAS) &&
      reads(n, tg->is_input, tg->tensor)) {
    Node *t = path_term(W, tg);
    if (t) {
      out->v = front_grow(G->F, out->v, out->n, &out->cap, sizeof(Node *));
      out->v[out->n++] = t;
    }
  }
  for (int k = 0; n->kind == ND_MAP && k < n->nargs && !G->failed; k++)
    collect_terms(W, tg, n->args[k], out);
  if (n->kind == ND_AGG && !G->failed)
    collect_terms(W, tg, n->arg, out);
  G->npath--;
}

static int ensure_adjoint(Grad *G, int q);

/* Whether query cq reads the tensor (from its read set). */
static int query_reads(const Grad *G, int cq, int is_input, int t) {
  int key = tensor_key(is_input, t);
  for (const int *r = G->readset[cq]; *r != INT_MIN; r++)
    if (*r == key)
      return 1;
  return 0;
}

/* Whether query cq can pass gradient from the loss to what it reads. */
static int live_consumer(Grad *G, int cq, const AdjTarget *tg) {
  if (!G->reach[cq] || !query_reads(G, cq, tg->is_input, tg->tensor))
    return 0;
  return cq == G->loss || ensure_adjoint(G, cq) >= 0;
}

/* dL/dT over tg's indices: the sum of every path's contribution; NULL
 * when none flows.  The adjoints of T's consumers are made first (they
 * append queries), then the consumers are walked. */
static Node *adjoint_expr(Grad *G, AdjTarget *tg) {
  int first = tg->is_input ? 0 : tg->tensor + 1;
  int n = G->loss + 1 - first;
  unsigned char *live = arena_alloc(G->a, (size_t)(n > 0 ? n : 1));
  for (int cq = first; cq <= G->loss && !G->failed; cq++)
    live[cq - first] = (unsigned char)live_consumer(G, cq, tg);
  Terms terms = {0};
  for (int cq = first; cq <= G->loss && !G->failed; cq++) {
    if (!live[cq - first])
      continue;
    const Query *C = &G->p->queries[cq];
    int *map = arena_alloc(G->a, sizeof(int) * (size_t)(C->nindices + 1));
    Walk W = {G, cq, C, &tg->t, map};
    collect_terms(&W, tg, C->expr, &terms);
  }
  if (G->failed || terms.n == 0)
    return NULL;
  if (terms.n == 1)
    return terms.v[0];
  Loc none = {0, 0};
  return plan_map(G->a, none, op_named(G, "+"), terms.n, terms.v);
}

/* Mark the target ids that e reads or binds. */
static void used_ids(const Node *e, unsigned char *used) {
  if (e->kind == ND_INPUT || e->kind == ND_ALIAS || e->kind == ND_AGG)
    for (int k = 0; k < e->nidx; k++)
      used[e->idx[k]] = 1;
  for (int k = 0; e->kind == ND_MAP && k < e->nargs; k++)
    used_ids(e->args[k], used);
  if (e->kind == ND_AGG)
    used_ids(e->arg, used);
}

static void renumber(Node *e, const int *to) {
  if (e->kind == ND_INPUT || e->kind == ND_ALIAS || e->kind == ND_AGG)
    for (int k = 0; k < e->nidx; k++)
      e->idx[k] = to[e->idx[k]];
  for (int k = 0; e->kind == ND_MAP && k < e->nargs; k++)
    renumber(e->args[k], to);
  if (e->kind == ND_AGG)
    renumber(e->arg, to);
}

/* Drop the target's indices that the finished query e does not use (a
 * path whose gradient turned out to be zero mapped its scope first): an
 * index no access mentions could not be sized.  The nodes of e were all
 * made for it, so they are renumbered in place; out[] too. */
static void drop_unused(Grad *G, Target *t, Node *e, int *out, int nout) {
  unsigned char *used = arena_alloc(G->a, (size_t)t->n + 1);
  int *to = arena_alloc(G->a, sizeof(int) * (size_t)(t->n + 1));
  used_ids(e, used);
  for (int k = 0; k < nout; k++)
    used[out[k]] = 1;
  int n = 0;
  for (int id = 0; id < t->n; id++) {
    to[id] = used[id] ? n : -1;
    if (used[id])
      t->idx[n++] = t->idx[id];
  }
  t->n = n;
  renumber(e, to);
  for (int k = 0; k < nout; k++)
    out[k] = to[out[k]];
}

/* A target whose outputs are named names[m]. */
static void target_init(Grad *G, AdjTarget *tg, int is_input, int tensor,
                        int order, const char *const *names, const Loc *locs) {
  memset(tg, 0, sizeof *tg);
  tg->is_input = is_input;
  tg->tensor = tensor;
  tg->order = order;
  for (int m = 0; m < order; m++)
    tg->out[m] = new_index(G, &tg->t, names[m], locs[m]);
}

/* The query number holding dL/dQ for the query q on a path to the loss
 * (made when missing, hidden, named dL/dQ), or -1 when none flows. */
static int ensure_adjoint(Grad *G, int q) {
  const GradMemo *m = memo_find(G->F, G->loss, 0, q);
  if (m)
    return m->query;
  const Query *Q = &G->p->queries[q]; /* not valid after adjoint_expr */
  const char *names[GALLEY_MAX_ORDER];
  Loc locs[GALLEY_MAX_ORDER];
  int pos[GALLEY_MAX_ORDER], order = Q->nout;
  for (int k = 0; k < order; k++) {
    names[k] = Q->indices[Q->out[k]].name;
    locs[k] = Q->indices[Q->out[k]].loc;
    pos[k] = k;
  }
  AdjTarget tg;
  target_init(G, &tg, 0, q, order, names, locs);
  /* d(dL/dz) when differentiating a gradient again */
  const char *ln = G->p->queries[G->loss].name;
  char *name = arena_printf(G->a, strchr(ln, '/') ? "d(%s)/" : "d%s/", ln);
  name = arena_printf(G->a, strchr(Q->name, '/') ? "%sd(%s)" : "%sd%s", name,
                      Q->name);
  Loc loc = Q->loc;
  Node *e = adjoint_expr(G, &tg);
  int made = -1;
  if (e) {
    int *out = arena_alloc(G->a, sizeof(int) * (size_t)(tg.order + 1));
    memcpy(out, tg.out, sizeof(int) * (size_t)tg.order);
    drop_unused(G, &tg.t, e, out, tg.order);
    Query nq = {.name = name, .nout = tg.order, .out = out,
                .indices = tg.t.idx, .nindices = tg.t.n, .expr = e,
                .loc = loc};
    made = sema_append_query(G->F, &nq, 1);
  }
  memo_add(G->F, G->loss, 0, q, made, pos, order);
  return made;
}

/* ---- the gradient query ---- */

/* 0 everywhere, over T's shape: 0 * (T || 1). */
static Node *zero_gradient(Grad *G, const AdjTarget *tg, Loc loc) {
  if (tg->order == 0)
    return konst(G, 0);
  Node *t = tg->is_input
                ? plan_input(G->a, loc, tg->tensor, tg->order, tg->out)
                : plan_alias(G->a, loc, tg->tensor, tg->order, tg->out);
  Node *one = plan_map(G->a, loc, op_named(G, "||"), 2,
                       (Node *[]){t, konst(G, 1)});
  return plan_map(G->a, loc, op_named(G, "*"), 2,
                  (Node *[]){konst(G, 0), one});
}

/* The gradient's expression when an earlier grad made dL/dT already. */
static Node *reuse(Grad *G, const GradMemo *m, const AdjTarget *tg, Loc loc) {
  if (m->query < 0)
    return zero_gradient(G, tg, loc);
  int *idx = arena_alloc(G->a, sizeof(int) * (size_t)(tg->order + 1));
  for (int k = 0; k < tg->order; k++)
    idx[m->pos[k]] = tg->out[k];
  return plan_alias(G->a, loc, m->query, tg->order, idx);
}

/* Add the tensors n reads to the growing set *set (of *n used, *cap). */
static void collect_reads(Grad *G, const Node *n, int **set, int *len,
                          int *cap) {
  if (n->kind == ND_INPUT || n->kind == ND_ALIAS) {
    int key = tensor_key(n->kind == ND_INPUT, n->tensor);
    for (int k = 0; k < *len; k++)
      if ((*set)[k] == key)
        return;
    *set = front_grow(G->F, *set, *len, cap, sizeof(int));
    (*set)[(*len)++] = key;
  }
  for (int k = 0; n->kind == ND_MAP && k < n->nargs; k++)
    collect_reads(G, n->args[k], set, len, cap);
  if (n->kind == ND_AGG)
    collect_reads(G, n->arg, set, len, cap);
}

/* reach[q]: q is the loss or read by a query on a path to it; the read
 * set of every such query (one walk of each expression). */
static void compute_reach(Grad *G) {
  G->reach = arena_alloc(G->a, (size_t)G->loss + 1);
  G->readset = arena_alloc(G->a, sizeof(int *) * (size_t)(G->loss + 1));
  G->reach[G->loss] = 1;
  for (int q = G->loss; q >= 0; q--) {
    if (!G->reach[q])
      continue;
    int *set = NULL, len = 0, cap = 0;
    collect_reads(G, G->p->queries[q].expr, &set, &len, &cap);
    set = front_grow(G->F, set, len, &cap, sizeof(int));
    set[len] = INT_MIN;
    G->readset[q] = set;
    for (int k = 0; k < len; k++)
      if (set[k] >= 0)
        G->reach[set[k]] = 1;
  }
}

int grad_build(Front *F, const GradRequest *rq) {
  Grad G = {.F = F, .a = F->a, .p = F->p, .loss = rq->loss, .at = rq->at};
  compute_reach(&G);
  AdjTarget tg;
  target_init(&G, &tg, rq->is_input, rq->tensor, rq->order, rq->mode_name,
              rq->mode_loc);
  Node *e;
  const GradMemo *m = memo_find(F, rq->loss, rq->is_input, rq->tensor);
  if (!rq->is_input && rq->tensor == rq->loss)
    e = konst(&G, 1); /* dL/dL */
  else if (m)
    e = reuse(&G, m, &tg, rq->at);
  else
    e = adjoint_expr(&G, &tg);
  if (G.failed)
    return -1;
  if (!e)
    e = zero_gradient(&G, &tg, rq->at);
  int *out = arena_alloc(G.a, sizeof(int) * (size_t)(rq->order + 1));
  for (int k = 0; k < rq->order; k++)
    out[rq->pos[k]] = tg.out[k];
  drop_unused(&G, &tg.t, e, out, rq->order);
  Query q = {.name = rq->name, .nout = rq->order, .out = out,
             .indices = tg.t.idx, .nindices = tg.t.n, .expr = e,
             .loc = rq->loc};
  int made = sema_append_query(F, &q, 0);
  if (!m)
    memo_add(F, rq->loss, rq->is_input, rq->tensor, made, rq->pos, rq->order);
  return made;
}
