/*
 * front_internal.h -- what the three files of the .tin front end share:
 * tokens (lex.c), the diagnostics list (lex.c), the parser state (parse.c)
 * and the name/index resolution and checks (sema.c).
 *
 * Everything here lives in the Program's arena, so an error anywhere (or
 * an out-of-memory longjmp) is cleaned up by one arena_free.
 */
#ifndef GALLEY_FRONT_INTERNAL_H
#define GALLEY_FRONT_INTERNAL_H

#include "ir.h"

enum {
  FRONT_MAX_DIAGS = 100,  /* diagnostics kept; later ones are dropped */
  FRONT_MAX_DEPTH = 500,  /* expression tree depth limit (stack safety) */
  FRONT_MAX_PROPS_DIST = 3 /* `distributes over` entries (Op has room for 3) */
};

/* ---- tokens (lex.c) ---- */

typedef enum TokKind {
  TK_EOF,     /* end of input */
  TK_NEWLINE, /* a statement separator outside brackets */
  TK_SEMI,    /* ; */
  TK_IDENT,   /* [A-Za-z_][A-Za-z0-9_]* (keywords are identifiers too) */
  TK_NUM,     /* a number, `inf` or `nan`: value in num */
  TK_BAD,     /* a run of bytes the lexer refused (already reported) */
  TK_LPAREN,  /* ( */
  TK_RPAREN,  /* ) */
  TK_LBRACK,  /* [ */
  TK_RBRACK,  /* ] */
  TK_COMMA,   /* , */
  TK_COLON,   /* : */
  TK_ASSIGN,  /* = */
  TK_PLUS,    /* + */
  TK_MINUS,   /* - */
  TK_STAR,    /* * */
  TK_SLASH,   /* / */
  TK_CARET,   /* ^ */
  TK_EQ,      /* == */
  TK_NE,      /* != */
  TK_LT,      /* < */
  TK_LE,      /* <= */
  TK_GT,      /* > */
  TK_GE,      /* >= */
  TK_AND,     /* && */
  TK_OR,      /* || */
  TK_NOT      /* ! */
} TokKind;

typedef struct Token {
  TokKind kind;
  Loc loc;          /* line and byte column of the first byte */
  const char *text; /* into the program's source copy */
  int len;          /* bytes of text */
  double num;       /* TK_NUM */
} Token;

/* ---- names of the program (sema.c) ---- */

typedef enum NameKind {
  NM_INPUT, /* id = input number */
  NM_QUERY, /* id = query number */
  NM_DEF,   /* id = unused; op = the user's Op */
  NM_DIM    /* id = dim number */
} NameKind;

typedef struct Name {
  const char *name;
  NameKind kind;
  int id;
  const Op *op; /* NM_DEF */
  Loc loc;      /* where it was defined */
} Name;

/* Per-index facts of one query, kept for the checks after parsing. */
typedef struct IndexInfo {
  unsigned char query_level; /* not bound by an aggregate */
  unsigned char on_lhs;      /* one of the query's output indices */
  unsigned char used_rhs;    /* occurs on the right at query level */
  unsigned char accessed;    /* indexes some tensor access */
} IndexInfo;

/* What the checks after parsing need to know of each query. */
typedef struct QueryExtra {
  IndexInfo *info; /* per index of the query; NULL for a query made by
                      grad (checked when it was made) */
  int used;        /* read by a later query (an alias); always 1 for the
                      hidden queries of grad, which are never results */
} QueryExtra;

/* A gradient already made (grad.c): dL/dT for loss query `loss` and
 * tensor T, so that several grads of one loss share it. */
typedef struct GradMemo {
  int loss;                    /* query number of the loss */
  int is_input;                /* T is an input (else a query) */
  int tensor;                  /* T's input or query number */
  int query;                   /* the query holding dL/dT; -1: no
                                  gradient flows (structurally zero) */
  int pos[GALLEY_MAX_ORDER];   /* mode m of T is output pos[m] of query */
} GradMemo;

/* The elements of a max or min aggregate, materialized once per program
 * (grad.c): the hidden query `query` holds node->arg over the source
 * indices free[0..nfree) (ids of the aggregate's query). */
typedef struct ElemMemo {
  const Node *agg; /* the aggregate in a forward query */
  int query;
  int nfree;
  int *free;
} ElemMemo;

/* A partial derivative made once per program (grad.c): d op / d arg k
 * for an op applied to nargs arguments, as a body over ND_PARAM leaves
 * (parameter GRAD_VALUE_PARAM is the op's value); NULL when no gradient
 * flows through that argument. */
typedef struct PartialMemo {
  const Op *op;
  int k, nargs;
  Node *body;
} PartialMemo;

typedef struct OutputRef {
  const char *name;
  Loc loc;
} OutputRef;

typedef struct Diag {
  Loc loc;
  const char *msg;
  int seq; /* order of discovery, to keep the sort stable */
} Diag;

/* The whole front-end state of one front_parse call. */
typedef struct Front {
  Program *p;
  Arena *a;
  const char *file; /* for messages */
  const char *src;  /* the source copy */
  size_t len;

  Token *toks; /* ends with TK_EOF */
  int ntoks, captoks;
  int pos;     /* next token */
  int nest;    /* open ( and [ of this statement: newlines are skipped */
  int panic;   /* a syntax error in this statement: the rest is skipped */
  int depth;   /* expression nesting, against FRONT_MAX_DEPTH */
  Token stop;  /* what peek returns in panic mode: ends every loop */

  Diag *diags;
  int ndiags, capdiags, seq;

  Name *names;
  int nnames, capnames;
  int capinputs, capdims, capqueries;

  /* the query being parsed */
  Index *qidx;
  IndexInfo *qinfo;
  int nqidx, capqidx, capqinfo;
  int *aggstack; /* index ids bound by the enclosing aggregates */
  int naggstack, capaggstack;
  QueryExtra *qextra; /* per query of the program */
  int capqextra;

  /* the def being parsed (in_def != 0) */
  int in_def;
  const char *def_name;
  const char **params;
  int nparams;

  OutputRef *outs;
  int nouts, capouts;

  const char **unknown; /* unknown names already reported */
  int nunknown, capunknown;
  int saw_output; /* an `output` statement exists */

  GradMemo *gmemo;   /* gradients made so far (grad.c) */
  int ngmemo, capgmemo;
  PartialMemo *pmemo; /* partial derivatives made so far (grad.c) */
  int npmemo, cappmemo;
  ElemMemo *ememo;    /* max/min elements materialized so far (grad.c) */
  int nememo, capememo;
} Front;

/* ---- lex.c ---- */

/* Tokenize F->src into F->toks (errors become diagnostics). */
void lex_tokens(Front *F);
/* Record a diagnostic at loc (printf-style message). */
void front_error(Front *F, Loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sort the diagnostics into source order. */
void front_sort_diags(Front *F);
/* Render every diagnostic with its source line and caret; malloc()ed,
 * NULL when out of memory. */
char *front_render_diags(const Front *F);
/* Grow an arena array so that it holds at least n + 1 elements. */
void *front_grow(Front *F, void *arr, int n, int *cap, size_t elem);
/* A token's spelling for messages: 'x', end of line, end of input. */
const char *lex_describe(Front *F, const Token *t);

/* ---- sema.c ---- */

const Name *sema_lookup(const Front *F, const char *name);
/* Check that name is new (error when not); returns 1 when it is. */
int sema_check_new(Front *F, const char *name, Loc loc);
void sema_declare(Front *F, const char *name, NameKind kind, int id,
                  const Op *op, Loc loc);

void sema_query_begin(Front *F);
/* An output index on the left; -1 (after an error) when repeated. */
int sema_lhs_index(Front *F, const char *name, Loc loc);
/* An index in an access on the right (innermost binding, else the
 * query's own, created on first use). */
int sema_access_index(Front *F, const char *name, Loc loc);
/* Bind an aggregate's indices (pushed on the scope); returns how many
 * were pushed, their ids in ids[]. */
int sema_agg_bind(Front *F, const Token *op, int n, const Token *names,
                  int *ids);
void sema_agg_unbind(Front *F, int n);
/* Finish the query: wrap the implicit sum, store it in the program. */
void sema_query_end(Front *F, const Token *name, int nout, const int *out,
                    Node *rhs);

Node *sema_access(Front *F, const Token *name, int nidx, const int *idx);
Node *sema_bare_name(Front *F, const Token *name);
/* Whether name( is a tensor used like a function (reported: the
 * arguments would only add confusing errors, so the caller skips them). */
int sema_tensor_called(Front *F, const Token *name);
Node *sema_call(Front *F, const Token *name, int nargs, Node **args);
Node *sema_aggregate(Front *F, const Token *name, int nidx, const int *idx,
                     Node *arg);
Node *sema_unary(Front *F, const Token *op, Node *x);
Node *sema_binary(Front *F, const Token *op, Node *x, Node *y);
Node *sema_error_node(Front *F, Loc loc);

/* A def's declared properties, as parsed. */
typedef struct DefProps {
  unsigned props;   /* OP_COMMUTATIVE | ... as listed */
  double identity, annihilator;
  Loc loc_of[5];    /* where each of the first five OP_ bits was listed */
  const char *dist[FRONT_MAX_PROPS_DIST + 1];
  Loc dist_loc[FRONT_MAX_PROPS_DIST];
  int ndist;
  Loc list_loc;     /* the "[" of the list */
  int bad;          /* an error in the list: skip the value checks */
} DefProps;

/* Check the property list against itself and the body, build the Op and
 * register it (when the name is new). */
/* Declare a name whose statement had a syntax error, so that its uses
 * do not produce more errors. */
void sema_declare_broken(Front *F, const Token *name, NameKind kind);
void sema_def_end(Front *F, const Token *name, int nparams, Node *body,
                  const DefProps *dp, int ok);

/* All checks that need the whole program (dims may come late, outputs
 * may name later queries). */
void sema_finish(Front *F);

/* `name[lhs] = grad(loss, theta[idx])` (the whole right-hand side): check
 * the names and indices, then have grad.c add the gradient's queries.
 * has_idx: the theta access had an index list (idx may be empty after an
 * error in it). */
void sema_grad(Front *F, const Token *name, int nlhs, const Token *lhs,
               const Token *kw, const Token *loss, const Token *theta,
               int has_idx, int nidx, const Token *idx);
/* Append a query made by grad.c (hidden: a gradient intermediate that is
 * never a result and whose name is not declared); returns its number. */
int sema_append_query(Front *F, const Query *q, int hidden);

/* ---- parse.c, for grad.c ---- */

/* Parse `text` (one .tin expression over the names x, y, z, v, as in the
 * registry's partial derivatives) as a def body: x, y, z, v become
 * parameters 0, 1, 2, 3.  NULL when it does not parse (a bug in the
 * registry). */
Node *front_parse_formula(Front *F, const char *text);

/* ---- grad.c ---- */

enum { GRAD_VALUE_PARAM = 1000 }; /* the op's value in a partial body */

/* What sema_grad has checked: G[...] = grad(L, T[...]). */
typedef struct GradRequest {
  const char *name;   /* the gradient query's name */
  Loc loc;            /* of that name */
  Loc at;             /* of `grad`, where errors point */
  int loss;           /* query number of L (a scalar query) */
  int is_input;       /* T is an input (else a query) */
  int tensor;         /* T's number */
  int order;          /* T's modes */
  const char *mode_name[GALLEY_MAX_ORDER]; /* index name of each mode */
  Loc mode_loc[GALLEY_MAX_ORDER];
  int pos[GALLEY_MAX_ORDER]; /* mode m is output pos[m] of the gradient */
} GradRequest;

/* Add the queries computing dL/dT (hidden intermediates first, then the
 * gradient itself, named rq->name); returns the gradient's query number,
 * or -1 after reporting why it cannot be differentiated. */
int grad_build(Front *F, const GradRequest *rq);

#endif /* GALLEY_FRONT_INTERNAL_H */
