/*
 * parse.c -- the recursive-descent parser of .tin (tin.md sections 2-4)
 * and the front end's entry point, front_parse.
 *
 * One function per grammar rule, the rule as its comment.  The parser
 * resolves as it goes (sema.c builds the plan nodes), so a statement is
 * finished when its last token is read; only the checks that need the
 * whole program (dims declared late, `output` of later queries) run after.
 *
 * Errors.  A syntax error puts the parser in panic mode: peek() then
 * returns a stop token that ends every loop and matches nothing, no further
 * syntax error is reported, and the statement loop skips to the next
 * newline or `;`.  Semantic errors do not panic: the offending piece is
 * replaced by an error node and parsing goes on, so that all errors of a
 * program are reported in one pass.
 */
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "front_internal.h"

/* ---- tokens ---- */

/* The next token; inside brackets newlines are not separators. */
static const Token *peek(Front *F) {
  if (F->panic)
    return &F->stop;
  while (F->nest > 0 && F->toks[F->pos].kind == TK_NEWLINE)
    F->pos++;
  return &F->toks[F->pos];
}

static const Token *advance(Front *F) {
  const Token *t = peek(F);
  if (!F->panic && t->kind != TK_EOF)
    F->pos++;
  return t;
}

static int at(Front *F, TokKind kind) { return peek(F)->kind == kind; }

static int accept(Front *F, TokKind kind) {
  if (!at(F, kind))
    return 0;
  advance(F);
  return 1;
}

/* Whether the next token is the identifier `word`. */
static int at_word(Front *F, const char *word) {
  const Token *t = peek(F);
  return t->kind == TK_IDENT && (size_t)t->len == strlen(word) &&
         memcmp(t->text, word, (size_t)t->len) == 0;
}

/* A syntax error at t: reported unless the statement already has one
 * (or t is a byte the lexer reported); the statement is then skipped. */
static void syntax_error(Front *F, const Token *t, const char *what) {
  if (F->panic)
    return;
  if (t->kind != TK_BAD) {
    if (what)
      front_error(F, t->loc, "expected %s, found %s", what,
                  lex_describe(F, t));
    else
      front_error(F, t->loc, "unexpected %s", lex_describe(F, t));
  }
  F->stop.loc = t->loc;
  F->panic = 1;
}

static int expect(Front *F, TokKind kind, const char *what) {
  if (accept(F, kind))
    return 1;
  syntax_error(F, peek(F), what);
  return 0;
}

/* An opening bracket: newlines stop separating until it is closed. */
static const Token *open_bracket(Front *F) {
  const Token *t = advance(F);
  F->nest++;
  return t;
}

/* The closing bracket of `open`; at the end of input the message points
 * at the bracket left open. */
static int close_bracket(Front *F, const Token *open, TokKind kind,
                         const char *what) {
  const Token *t = peek(F);
  if (t->kind == kind) {
    advance(F);
    F->nest--;
    return 1;
  }
  if (t->kind == TK_EOF && !F->panic) {
    front_error(F, open->loc, "unclosed '%c' at end of input", open->text[0]);
    F->panic = 1;
    F->stop.loc = t->loc;
    return 0;
  }
  if (!F->panic && t->kind != TK_BAD) {
    /* say which bracket is left open; when the statement ran on to the
     * next line (newlines do not end it inside brackets), point where
     * the closing bracket is missing: after the last token before it */
    const Token *prev = F->pos > 0 ? &F->toks[F->pos - 1] : t;
    Loc at = t->loc;
    if (prev->loc.line < t->loc.line) {
      at = prev->loc;
      at.col += prev->len;
    }
    front_error(F, at, "expected %s to close the '%c' at %d:%d, found %s%s",
                what, open->text[0], open->loc.line, open->loc.col,
                lex_describe(F, t),
                prev->loc.line < t->loc.line ? " on a later line" : "");
    F->stop.loc = t->loc;
    F->panic = 1;
    return 0;
  }
  syntax_error(F, t, what);
  return 0;
}

static const char *tok_str(Front *F, const Token *t) {
  return arena_strndup(F->a, t->text, (size_t)t->len);
}

/* ---- shared pieces ---- */

/* signed_number = [ "-" | "+" ] NUMBER      (NUMBER includes inf, nan) */
static int parse_signed_number(Front *F, double *v) {
  double sign = 1;
  if (accept(F, TK_MINUS))
    sign = -1;
  else
    accept(F, TK_PLUS);
  const Token *t = peek(F);
  if (t->kind != TK_NUM) {
    syntax_error(F, t, "a number");
    return 0;
  }
  advance(F);
  *v = sign * t->num;
  return 1;
}

/* A growable list of identifier tokens. */
typedef struct NameList {
  Token *t;
  int n, cap;
} NameList;

static void names_add(Front *F, NameList *l, const Token *t) {
  l->t = front_grow(F, l->t, l->n, &l->cap, sizeof(Token));
  l->t[l->n++] = *t;
}

/* index_list = "[" IDENT { "," IDENT } "]" */
static NameList parse_index_list(Front *F) {
  NameList l = {0};
  const Token *open = open_bracket(F);
  do {
    const Token *t = peek(F);
    if (t->kind != TK_IDENT) {
      syntax_error(F, t, "an index name");
      break;
    }
    names_add(F, &l, advance(F));
  } while (accept(F, TK_COMMA));
  close_bracket(F, open, TK_RBRACK, "',' or ']'");
  return l;
}

/* ---- expressions ---- */

static Node *parse_expr(Front *F);

/* Count one level of expression depth; 0 (after an error) when too deep,
 * so that a hostile input cannot exhaust the stack. */
static int depth_enter(Front *F) {
  if (++F->depth <= FRONT_MAX_DEPTH)
    return 1;
  if (!F->panic)
    front_error(F, peek(F)->loc, "expression nested too deeply");
  F->stop.loc = peek(F)->loc;
  F->panic = 1;
  return 0;
}

/* Whether "(" at F->pos starts an aggregate: IDENT { "," IDENT } ":" */
static int at_aggregate(Front *F) {
  int k = F->pos + 1; /* after "(" */
  for (;;) {
    while (F->toks[k].kind == TK_NEWLINE)
      k++;
    if (F->toks[k].kind != TK_IDENT)
      return 0;
    k++;
    while (F->toks[k].kind == TK_NEWLINE)
      k++;
    if (F->toks[k].kind == TK_COLON)
      return 1;
    if (F->toks[k].kind != TK_COMMA)
      return 0;
    k++;
  }
}

/* aggregate = IDENT "(" IDENT { "," IDENT } ":" expr ")" */
static Node *parse_aggregate(Front *F, const Token *name) {
  const Token *open = open_bracket(F);
  NameList l = {0};
  do
    names_add(F, &l, advance(F));
  while (accept(F, TK_COMMA));
  expect(F, TK_COLON, "':'");
  int *ids = arena_alloc(F->a, sizeof(int) * (size_t)l.n);
  int nb = sema_agg_bind(F, name, l.n, l.t, ids);
  Node *arg = parse_expr(F);
  sema_agg_unbind(F, nb);
  close_bracket(F, open, TK_RPAREN, "')'");
  if (F->panic)
    return sema_error_node(F, name->loc);
  return sema_aggregate(F, name, nb, ids, arg);
}

/* call = IDENT "(" expr { "," expr } ")" */
static Node *parse_call(Front *F, const Token *name) {
  const Token *open = open_bracket(F);
  Node **args = NULL;
  int n = 0, cap = 0;
  do {
    Node *x = parse_expr(F);
    args = front_grow(F, args, n, &cap, sizeof(Node *));
    args[n++] = x;
  } while (accept(F, TK_COMMA));
  close_bracket(F, open, TK_RPAREN, "',' or ')'");
  if (F->panic)
    return sema_error_node(F, name->loc);
  return sema_call(F, name, n, args);
}

/* access = IDENT [ index_list ]
 * (in a def body there are no tensors, so "[" after a name is the start
 * of the property list, not an access) */
static Node *parse_access(Front *F, const Token *name) {
  if (F->in_def || !at(F, TK_LBRACK))
    return sema_bare_name(F, name);
  NameList l = parse_index_list(F);
  if (F->panic)
    return sema_error_node(F, name->loc);
  int *ids = arena_alloc(F->a, sizeof(int) * (size_t)(l.n ? l.n : 1));
  for (int k = 0; k < l.n; k++)
    ids[k] = sema_access_index(F, tok_str(F, &l.t[k]), l.t[k].loc);
  return sema_access(F, name, l.n, ids);
}

/* primary = NUMBER | "(" expr ")" | aggregate | call | access */
static Node *parse_primary(Front *F) {
  const Token *t = peek(F);
  if (t->kind == TK_NUM) {
    advance(F);
    return plan_const(F->a, t->loc, t->num);
  }
  if (t->kind == TK_LPAREN) {
    const Token *open = open_bracket(F);
    Node *x = parse_expr(F);
    close_bracket(F, open, TK_RPAREN, "')'");
    return x;
  }
  if (t->kind != TK_IDENT) {
    syntax_error(F, t, "an expression");
    return sema_error_node(F, t->loc);
  }
  advance(F);
  if (at(F, TK_LPAREN) && at_aggregate(F))
    return parse_aggregate(F, t);
  if (at(F, TK_LPAREN) && !F->in_def && sema_tensor_called(F, t)) {
    F->panic = 1; /* skip the rest of the statement quietly */
    return sema_error_node(F, t->loc);
  }
  if (at(F, TK_LPAREN))
    return parse_call(F, t);
  return parse_access(F, t);
}

/* power = primary [ "^" unary ]      (right-associative: a^b^c = a^(b^c)) */
static Node *parse_unary(Front *F);
static Node *parse_power(Front *F) {
  Node *x = parse_primary(F);
  const Token *op = peek(F);
  if (op->kind != TK_CARET)
    return x;
  advance(F);
  return sema_binary(F, op, x, parse_unary(F));
}

/* unary = ( "-" | "!" ) unary | power
 * (so -x^2 is -(x^2); the minus of a literal folds into the constant) */
static Node *parse_unary(Front *F) {
  if (!depth_enter(F))
    return sema_error_node(F, peek(F)->loc);
  Node *x;
  const Token *op = peek(F);
  if (op->kind == TK_MINUS || op->kind == TK_NOT) {
    advance(F);
    x = sema_unary(F, op, parse_unary(F));
  } else {
    x = parse_power(F);
  }
  F->depth--;
  return x;
}

/* A left-associative binary level: operand { OP operand } with OP among
 * kinds[0..n).  Each operator deepens the tree, so it counts as depth. */
static Node *parse_binary_level(Front *F, Node *(*operand)(Front *),
                                const TokKind *kinds, int n) {
  int depth = F->depth;
  Node *x = operand(F);
  for (;;) {
    const Token *op = peek(F);
    int k = 0;
    while (k < n && op->kind != kinds[k])
      k++;
    if (k == n || !depth_enter(F))
      break;
    advance(F);
    x = sema_binary(F, op, x, operand(F));
  }
  F->depth = depth;
  return x;
}

/* mul_expr = unary { ( "*" | "/" ) unary } */
static Node *parse_mul(Front *F) {
  static const TokKind k[] = {TK_STAR, TK_SLASH};
  return parse_binary_level(F, parse_unary, k, 2);
}

/* add_expr = mul_expr { ( "+" | "-" ) mul_expr } */
static Node *parse_add(Front *F) {
  static const TokKind k[] = {TK_PLUS, TK_MINUS};
  return parse_binary_level(F, parse_mul, k, 2);
}

/* cmp_expr = add_expr { ( "==" | "!=" | "<" | "<=" | ">" | ">=" ) add_expr } */
static Node *parse_cmp(Front *F) {
  static const TokKind k[] = {TK_EQ, TK_NE, TK_LT, TK_LE, TK_GT, TK_GE};
  return parse_binary_level(F, parse_add, k, 6);
}

/* and_expr = cmp_expr { "&&" cmp_expr } */
static Node *parse_and(Front *F) {
  static const TokKind k[] = {TK_AND};
  return parse_binary_level(F, parse_cmp, k, 1);
}

/* expr = and_expr { "||" and_expr } */
static Node *parse_expr(Front *F) {
  static const TokKind k[] = {TK_OR};
  return parse_binary_level(F, parse_and, k, 1);
}

/* ---- statements ---- */

/* A name being defined: IDENT, not a keyword. */
static const Token *parse_new_name(Front *F, const char *what) {
  const Token *t = peek(F);
  if (t->kind != TK_IDENT) {
    syntax_error(F, t, what);
    return NULL;
  }
  return advance(F);
}

/* input_decl = IDENT [ index_list ] [ "fill" signed_number ] */
static void parse_input_decl(Front *F) {
  const Token *name = parse_new_name(F, "an input name");
  if (!name)
    return;
  int order = 0;
  if (at(F, TK_LBRACK))
    order = parse_index_list(F).n;
  double fill = 0;
  int has_fill = at_word(F, "fill");
  if (has_fill) {
    advance(F);
    parse_signed_number(F, &fill);
  }
  if (F->panic) {
    sema_declare_broken(F, name, NM_INPUT);
    return;
  }
  const char *s = tok_str(F, name);
  if (order > GALLEY_MAX_ORDER) {
    front_error(F, name->loc, "'%s' has %d modes; at most %d are supported",
                s, order, GALLEY_MAX_ORDER);
    return;
  }
  if (!sema_check_new(F, s, name->loc))
    return;
  Program *p = F->p;
  p->inputs = front_grow(F, p->inputs, p->ninputs, &F->capinputs,
                         sizeof(InputDecl));
  InputDecl *d = &p->inputs[p->ninputs];
  d->name = s;
  d->order = order;
  d->fill = fill;
  d->has_fill = has_fill;
  d->loc = name->loc;
  sema_declare(F, s, NM_INPUT, p->ninputs++, NULL, name->loc);
}

/* input_stmt = "input" input_decl { "," input_decl } */
static void parse_input_stmt(Front *F) {
  advance(F);
  do
    parse_input_decl(F);
  while (accept(F, TK_COMMA));
}

/* dim_stmt = "dim" IDENT "=" signed_number */
static void parse_dim_stmt(Front *F) {
  advance(F);
  const Token *name = parse_new_name(F, "an index name");
  expect(F, TK_ASSIGN, "'='");
  const Token *num = peek(F);
  double v = 0;
  if (!parse_signed_number(F, &v))
    return;
  if (!(v >= 0 && v <= 4611686018427387904.0 && v == floor(v))) {
    front_error(F, num->loc, "the size of a dim must be a non-negative "
                "integer, not %g", v);
    return;
  }
  const char *s = tok_str(F, name);
  if (!sema_check_new(F, s, name->loc))
    return;
  Program *p = F->p;
  p->dims = front_grow(F, p->dims, p->ndims, &F->capdims, sizeof(DimDecl));
  DimDecl *d = &p->dims[p->ndims];
  d->name = s;
  d->size = (int64_t)v;
  d->loc = name->loc;
  sema_declare(F, s, NM_DIM, p->ndims++, NULL, name->loc);
}

/* A property that stands alone: associative, commutative, idempotent. */
static int flag_property(const Token *t, unsigned *bit) {
  static const struct {
    const char *word;
    unsigned bit;
  } flags[] = {{"associative", OP_ASSOCIATIVE},
               {"commutative", OP_COMMUTATIVE},
               {"idempotent", OP_IDEMPOTENT}};
  for (int k = 0; k < 3; k++)
    if ((size_t)t->len == strlen(flags[k].word) &&
        memcmp(t->text, flags[k].word, (size_t)t->len) == 0) {
      *bit = flags[k].bit;
      return 1;
    }
  return 0;
}

/* Record a property bit; a property listed twice is an error. */
static void add_property(Front *F, DefProps *dp, unsigned bit,
                         const Token *t) {
  int k = 0;
  while ((1u << k) != bit)
    k++;
  if (dp->props & bit) {
    front_error(F, t->loc, "property '%.*s' is listed twice", t->len,
                t->text);
    dp->bad = 1;
    return;
  }
  dp->props |= bit;
  dp->loc_of[k] = t->loc;
}

/* op_name = IDENT | "+" | "-" | "*" | "/" | "^" | "==" | "!=" | "<" | "<="
 *         | ">" | ">=" | "&&" | "||" */
static const Token *parse_op_name(Front *F) {
  const Token *t = peek(F);
  if (t->kind == TK_IDENT || (t->kind >= TK_PLUS && t->kind <= TK_OR &&
                              t->kind != TK_NOT)) {
    advance(F);
    return t;
  }
  syntax_error(F, t, "an operator");
  return NULL;
}

/* "distributes" "over" op_name (after "distributes") */
static void parse_distributes(Front *F, DefProps *dp, const Token *kw) {
  if (!at_word(F, "over")) {
    syntax_error(F, peek(F), "'over'");
    return;
  }
  advance(F);
  const Token *g = parse_op_name(F);
  if (!g)
    return;
  const char *s = tok_str(F, g);
  const Op *op = ops_find(&F->p->ops, s);
  if (!op && strcmp(s, F->def_name) != 0) {
    front_error(F, g->loc, "unknown operator '%s' after 'distributes over'",
                s);
    dp->bad = 1;
    return;
  }
  if (op && op->arity != 2) {
    front_error(F, g->loc, "'%s' is not a binary operator", s);
    dp->bad = 1;
    return;
  }
  const char *name = op ? op->name : s;
  for (int k = 0; k < dp->ndist; k++)
    if (strcmp(dp->dist[k], name) == 0) {
      front_error(F, kw->loc, "property 'distributes over %s' is listed "
                  "twice", s);
      dp->bad = 1;
      return;
    }
  if (dp->ndist == FRONT_MAX_PROPS_DIST) {
    front_error(F, kw->loc, "at most %d 'distributes over' properties are "
                "supported", FRONT_MAX_PROPS_DIST);
    dp->bad = 1;
    return;
  }
  dp->dist_loc[dp->ndist] = kw->loc;
  dp->dist[dp->ndist++] = name;
}

/* property = "associative" | "commutative" | "idempotent"
 *          | "identity" "=" signed_number | "annihilator" "=" signed_number
 *          | "distributes" "over" op_name */
static void parse_property(Front *F, DefProps *dp) {
  const Token *t = peek(F);
  unsigned bit;
  if (t->kind != TK_IDENT) {
    syntax_error(F, t, "a property");
    return;
  }
  advance(F);
  if (flag_property(t, &bit)) {
    add_property(F, dp, bit, t);
  } else if (t->len == 8 && memcmp(t->text, "identity", 8) == 0) {
    expect(F, TK_ASSIGN, "'='");
    if (parse_signed_number(F, &dp->identity))
      add_property(F, dp, OP_HAS_IDENTITY, t);
  } else if (t->len == 11 && memcmp(t->text, "annihilator", 11) == 0) {
    expect(F, TK_ASSIGN, "'='");
    if (parse_signed_number(F, &dp->annihilator))
      add_property(F, dp, OP_HAS_ANNIHILATOR, t);
  } else if (t->len == 11 && memcmp(t->text, "distributes", 11) == 0) {
    parse_distributes(F, dp, t);
  } else {
    front_error(F, t->loc, "unknown property '%.*s' (expected associative, "
                "commutative, idempotent, identity = V, annihilator = V or "
                "distributes over OP)", t->len, t->text);
    dp->bad = 1;
  }
}

/* property_list = "[" property { "," property } "]" */
static void parse_property_list(Front *F, DefProps *dp) {
  const Token *open = open_bracket(F);
  dp->list_loc = open->loc;
  do
    parse_property(F, dp);
  while (accept(F, TK_COMMA));
  close_bracket(F, open, TK_RBRACK, "',' or ']'");
}

/* params = "(" IDENT { "," IDENT } ")" */
static void parse_params(Front *F) {
  const Token *open = open_bracket(F);
  int cap = 0;
  do {
    const Token *t = peek(F);
    if (t->kind != TK_IDENT) {
      syntax_error(F, t, "a parameter name");
      return;
    }
    advance(F);
    const char *s = tok_str(F, t);
    for (int k = 0; k < F->nparams; k++)
      if (strcmp(F->params[k], s) == 0)
        front_error(F, t->loc, "parameter '%s' is listed twice", s);
    F->params = front_grow(F, F->params, F->nparams, &cap, sizeof(char *));
    F->params[F->nparams++] = s;
  } while (accept(F, TK_COMMA));
  close_bracket(F, open, TK_RPAREN, "',' or ')'");
}

/* def_stmt = "def" IDENT params "=" expr [ property_list ] */
static void parse_def_stmt(Front *F) {
  advance(F);
  const Token *name = parse_new_name(F, "a function name");
  if (!name)
    return;
  F->def_name = tok_str(F, name);
  F->in_def = 1;
  F->nparams = 0;
  F->params = NULL;
  int errors = F->ndiags;
  if (at(F, TK_LPAREN))
    parse_params(F);
  else
    syntax_error(F, peek(F), "'('");
  expect(F, TK_ASSIGN, "'='");
  Node *body = parse_expr(F);
  DefProps dp;
  memset(&dp, 0, sizeof dp);
  if (at(F, TK_LBRACK))
    parse_property_list(F, &dp);
  F->in_def = 0;
  if (F->panic)
    sema_declare_broken(F, name, NM_DEF);
  else
    sema_def_end(F, name, F->nparams, body, &dp, F->ndiags == errors);
}

/* output_stmt = "output" IDENT { "," IDENT } */
static void parse_output_stmt(Front *F) {
  advance(F);
  F->saw_output = 1;
  do {
    const Token *t = parse_new_name(F, "a query name");
    if (!t)
      return;
    F->outs = front_grow(F, F->outs, F->nouts, &F->capouts,
                         sizeof(OutputRef));
    F->outs[F->nouts].name = tok_str(F, t);
    F->outs[F->nouts++].loc = t->loc;
  } while (accept(F, TK_COMMA));
}

/* Whether the right-hand side starts with grad( -- the gradient form,
 * unless the program defines its own function called grad. */
static int at_grad(Front *F) {
  return at_word(F, "grad") && F->toks[F->pos + 1].kind == TK_LPAREN &&
         !ops_find(&F->p->ops, "grad");
}

/* grad_rhs = "grad" "(" IDENT "," IDENT [ index_list ] ")"
 * (after "name[lhs] =", and the whole right-hand side) */
static void parse_grad(Front *F, const Token *name, const NameList *lhs) {
  const Token *kw = advance(F);
  const Token *open = open_bracket(F);
  const Token *loss = peek(F), *theta = NULL;
  NameList idx = {0};
  int has_idx = 0;
  if (loss->kind != TK_IDENT) {
    syntax_error(F, loss, "the name of a scalar query (the loss)");
  } else {
    advance(F);
    expect(F, TK_COMMA, "','");
    theta = peek(F);
    if (theta->kind != TK_IDENT) {
      syntax_error(F, theta, "the name of an input or a query");
    } else {
      advance(F);
      if (at(F, TK_LBRACK)) {
        has_idx = 1;
        idx = parse_index_list(F);
      }
    }
  }
  close_bracket(F, open, TK_RPAREN, "')'");
  const Token *after = peek(F);
  if (!F->panic && after->kind != TK_NEWLINE && after->kind != TK_SEMI &&
      after->kind != TK_EOF) {
    front_error(F, after->loc, "grad(...) must be the whole right-hand side "
                "of a query, as in G[j] = grad(L, theta[j])");
    F->stop.loc = after->loc;
    F->panic = 1;
  }
  if (F->panic) {
    sema_declare_broken(F, name, NM_QUERY);
    return;
  }
  sema_grad(F, name, lhs->n, lhs->t, kw, loss, theta, has_idx, idx.n, idx.t);
}

/* query = IDENT [ index_list ] "=" ( grad_rhs | expr ) */
static void parse_query(Front *F) {
  const Token *name = advance(F);
  sema_query_begin(F);
  NameList l = {0};
  if (at(F, TK_LBRACK))
    l = parse_index_list(F);
  int *out = arena_alloc(F->a, sizeof(int) * (size_t)(l.n ? l.n : 1));
  int nout = 0;
  for (int k = 0; k < l.n && !F->panic; k++) {
    int id = sema_lhs_index(F, tok_str(F, &l.t[k]), l.t[k].loc);
    if (id >= 0)
      out[nout++] = id;
  }
  if (!F->panic && l.n > GALLEY_MAX_ORDER)
    front_error(F, name->loc, "'%.*s' has %d modes; at most %d are "
                "supported", name->len, name->text, l.n, GALLEY_MAX_ORDER);
  if (!F->panic)
    sema_check_new(F, tok_str(F, name), name->loc);
  expect(F, TK_ASSIGN, "'='");
  if (!F->panic && at_grad(F)) {
    parse_grad(F, name, &l);
    return;
  }
  Node *rhs = parse_expr(F);
  if (F->panic)
    sema_declare_broken(F, name, NM_QUERY);
  else
    sema_query_end(F, name, nout, out, rhs);
}

/* statement = input_stmt | dim_stmt | def_stmt | output_stmt | query */
static void parse_statement(Front *F) {
  if (at_word(F, "input"))
    parse_input_stmt(F);
  else if (at_word(F, "dim"))
    parse_dim_stmt(F);
  else if (at_word(F, "def"))
    parse_def_stmt(F);
  else if (at_word(F, "output"))
    parse_output_stmt(F);
  else if (at(F, TK_IDENT))
    parse_query(F);
  else
    syntax_error(F, peek(F), NULL);
}

/* After a statement: the separator, or skip to it after an error. */
static void end_statement(Front *F) {
  if (!F->panic && !at(F, TK_NEWLINE) && !at(F, TK_SEMI) && !at(F, TK_EOF))
    syntax_error(F, peek(F), NULL);
  if (F->panic) {
    TokKind k = F->toks[F->pos].kind;
    while (k != TK_NEWLINE && k != TK_SEMI && k != TK_EOF)
      k = F->toks[++F->pos].kind;
  }
  F->panic = 0;
  F->nest = 0;
  F->depth = 0;
  F->in_def = 0;
}

/* program = { [ statement ] ( NEWLINE | ";" ) } EOF */
static void parse_program(Front *F) {
  F->stop.kind = TK_NEWLINE;
  F->stop.text = "";
  int statements = 0;
  for (;;) {
    F->nest = 0;
    if (at(F, TK_EOF))
      break;
    if (accept(F, TK_NEWLINE) || accept(F, TK_SEMI))
      continue;
    parse_statement(F);
    end_statement(F);
    statements++;
  }
  /* an empty text is a mistake (a length of 0 passed for a NUL-ended
   * string, an empty file), never a program that silently does nothing */
  if (statements == 0) {
    Loc start = {1, 1};
    front_error(F, start, "the program is empty: it has no statements");
  }
}

/* ---- derivative formulas (for grad.c) ---- */

Node *front_parse_formula(Front *F, const char *text) {
  static const char *const params[] = {"x", "y", "z", "v"};
  Front *S = arena_alloc(F->a, sizeof *S);
  S->p = F->p; /* the registry: the formula's functions */
  S->a = F->a;
  S->file = "<derivative>";
  S->src = text;
  S->len = strlen(text);
  S->stop.kind = TK_NEWLINE;
  S->stop.text = "";
  lex_tokens(S);
  S->in_def = 1;
  S->def_name = "a derivative";
  S->params = (const char **)params;
  S->nparams = 4;
  Node *body = parse_expr(S);
  if (S->ndiags > 0 || !at(S, TK_EOF))
    return NULL;
  return body;
}

/* ---- the entry point ---- */

static void set_error(galley_error *err, galley_status st, int64_t line,
                      int64_t col, const char *msg) {
  if (!err)
    return;
  err->status = st;
  err->line = line;
  err->col = col;
  snprintf(err->msg, sizeof err->msg, "%s", msg);
}

/* Report the diagnostics: err gets the first, *diagnostics all. */
static galley_status report(const Front *F, char **diagnostics,
                            galley_error *err) {
  const Diag *d = &F->diags[0];
  if (err) {
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s:%d:%d: error: %s", F->file, d->loc.line,
             d->loc.col, d->msg);
    set_error(err, GALLEY_EPROGRAM, d->loc.line, d->loc.col, msg);
  }
  if (diagnostics) {
    *diagnostics = front_render_diags(F);
    if (!*diagnostics) {
      set_error(err, GALLEY_ENOMEM, 0, 0, "out of memory");
      return GALLEY_ENOMEM;
    }
  }
  return GALLEY_EPROGRAM;
}

/* Lex, parse and check in the arena; the diagnostics are left in F. */
static void front_run(Front *F, const char *filename, const char *source,
                      size_t length) {
  Program *p = arena_alloc(F->a, sizeof *p);
  F->p = p;
  p->arena = F->a;
  F->file = arena_strndup(F->a, filename, strlen(filename));
  p->filename = F->file;
  char *src = arena_alloc(F->a, length + 1);
  if (length)
    memcpy(src, source, length);
  F->src = p->source = src;
  F->len = length;
  ops_init(&p->ops);
  lex_tokens(F);
  parse_program(F);
  sema_finish(F);
  front_sort_diags(F);
}

/* front_run under the arena's out-of-memory catch (style.md rule 5):
 * NULL when memory ran out. */
static Front *front_run_guarded(Arena *a, const char *filename,
                                const char *source, size_t length) {
  jmp_buf oom;
  a->oom = &oom;
  if (setjmp(oom))
    return NULL;
  Front *F = arena_alloc(a, sizeof *F);
  F->a = a;
  front_run(F, filename, source, length);
  a->oom = NULL;
  return F;
}

galley_status front_parse(const char *filename, const char *source,
                          size_t length, Program **out, char **diagnostics,
                          galley_error *err) {
  *out = NULL;
  if (diagnostics)
    *diagnostics = NULL;
  set_error(err, GALLEY_OK, 0, 0, "");
  if (!source && length) {
    set_error(err, GALLEY_EINVAL, 0, 0, "front_parse: no source text");
    return GALLEY_EINVAL;
  }
  if (length > (size_t)1 << 30) {
    set_error(err, GALLEY_EINVAL, 0, 0, "program text too large");
    return GALLEY_EINVAL;
  }
  Arena *a = arena_new();
  Front *F = a ? front_run_guarded(a, filename ? filename : "<program>",
                                   source, length)
               : NULL;
  if (!F) {
    arena_free(a);
    set_error(err, GALLEY_ENOMEM, 0, 0, "out of memory");
    return GALLEY_ENOMEM;
  }
  if (F->ndiags > 0) {
    galley_status st = report(F, diagnostics, err);
    arena_free(a);
    return st;
  }
  *out = F->p;
  return GALLEY_OK;
}
