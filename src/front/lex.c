/*
 * lex.c -- the .tin lexer (tin.md section 2) and the front end's
 * diagnostics list.
 *
 * The lexer turns the whole source into one token array before parsing;
 * newlines are always tokens (the parser skips them inside brackets,
 * because only it knows the nesting after an error).  Lines and columns
 * are 1-based; a column counts bytes, so a tab counts 1.  A byte the
 * language has no use for becomes a TK_BAD token after its diagnostic, so
 * that the parser skips the statement without a second message.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front_internal.h"

/* ---- arrays and diagnostics ---- */

void *front_grow(Front *F, void *arr, int n, int *cap, size_t elem) {
  if (n < *cap)
    return arr;
  int ncap = *cap ? 2 * *cap : 16;
  void *bigger = arena_alloc(F->a, elem * (size_t)ncap);
  if (n > 0)
    memcpy(bigger, arr, elem * (size_t)n);
  *cap = ncap;
  return bigger;
}

void front_error(Front *F, Loc loc, const char *fmt, ...) {
  if (F->ndiags >= FRONT_MAX_DIAGS)
    return;
  va_list ap;
  va_start(ap, fmt);
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  F->diags = front_grow(F, F->diags, F->ndiags, &F->capdiags, sizeof(Diag));
  Diag *d = &F->diags[F->ndiags++];
  d->loc = loc;
  d->msg = arena_strndup(F->a, buf, strlen(buf));
  d->seq = F->seq++;
}

static int diag_cmp(const void *x, const void *y) {
  const Diag *a = x, *b = y;
  if (a->loc.line != b->loc.line)
    return a->loc.line < b->loc.line ? -1 : 1;
  if (a->loc.col != b->loc.col)
    return a->loc.col < b->loc.col ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

void front_sort_diags(Front *F) {
  if (F->ndiags > 1)
    qsort(F->diags, (size_t)F->ndiags, sizeof(Diag), diag_cmp);
}

/* A growable malloc()ed text. */
typedef struct Text {
  char *s;
  size_t n, cap;
  int failed;
} Text;

static void text_add(Text *t, const char *s, size_t n) {
  if (t->failed)
    return;
  if (t->n + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->n + n + 1)
      cap *= 2;
    char *bigger = realloc(t->s, cap);
    if (!bigger) {
      t->failed = 1;
      return;
    }
    t->s = bigger;
    t->cap = cap;
  }
  memcpy(t->s + t->n, s, n);
  t->n += n;
  t->s[t->n] = '\0';
}

/* The source line `line` (1-based) without its line end; control bytes
 * other than tab are shown as '?' so the caret line stays aligned. */
static void text_add_line(Text *t, const Front *F, int line) {
  size_t at = 0;
  for (int l = 1; l < line && at < F->len; at++)
    if (F->src[at] == '\n')
      l++;
  size_t end = at;
  while (end < F->len && F->src[end] != '\n')
    end++;
  if (end > at && F->src[end - 1] == '\r')
    end--;
  for (size_t k = at; k < end; k++) {
    unsigned char c = (unsigned char)F->src[k];
    char ch = (c < 0x20 && c != '\t') || c == 0x7f ? '?' : (char)c;
    text_add(t, &ch, 1);
  }
  text_add(t, "\n", 1);
}

char *front_render_diags(const Front *F) {
  Text t = {0};
  text_add(&t, "", 0);
  for (int k = 0; k < F->ndiags; k++) {
    const Diag *d = &F->diags[k];
    char head[640];
    int n = snprintf(head, sizeof head, "%s:%d:%d: error: %s\n", F->file,
                     d->loc.line, d->loc.col, d->msg);
    text_add(&t, head, n < (int)sizeof head ? (size_t)n : sizeof head - 1);
    text_add_line(&t, F, d->loc.line);
    for (int c = 1; c < d->loc.col; c++)
      text_add(&t, " ", 1);
    text_add(&t, "^\n", 2);
  }
  if (t.failed) {
    free(t.s);
    return NULL;
  }
  return t.s;
}

const char *lex_describe(Front *F, const Token *t) {
  switch (t->kind) {
  case TK_EOF:
    return "end of input";
  case TK_NEWLINE:
    return "end of line";
  default:
    if (t->len > 40)
      return arena_printf(F->a, "'%.40s...'", t->text);
    return arena_printf(F->a, "'%.*s'", t->len, t->text);
  }
}

/* ---- the lexer ---- */

typedef struct Lexer {
  Front *F;
  size_t at;  /* next byte */
  int line;   /* of byte `at` */
  size_t bol; /* offset of the start of `line` */
} Lexer;

static Loc lex_loc(const Lexer *L, size_t at) {
  Loc loc = {L->line, (int)(at - L->bol) + 1};
  return loc;
}

static Token *lex_push(Lexer *L, TokKind kind, size_t start, size_t end) {
  Front *F = L->F;
  F->toks = front_grow(F, F->toks, F->ntoks, &F->captoks, sizeof(Token));
  Token *t = &F->toks[F->ntoks++];
  t->kind = kind;
  t->loc = lex_loc(L, start);
  t->text = F->src + start;
  t->len = (int)(end - start);
  return t;
}

static int is_ident_start(int c) { return isalpha(c) || c == '_'; }
static int is_ident_char(int c) { return isalnum(c) || c == '_'; }

/* The byte at `at`, or 0 past the end (the source may hold NUL bytes, so
 * callers that care compare against F->len). */
static int lex_byte(const Lexer *L, size_t at) {
  return at < L->F->len ? (unsigned char)L->F->src[at] : 0;
}

/* number = digits [ "." digits ] [ ("e"|"E") ["+"|"-"] digits ]
 *        | "." digits [ exponent ]
 * A number running into letters, digits or dots ("1e", "3x", "1.2.3") is
 * malformed as a whole rather than split into surprising tokens. */
static void lex_number(Lexer *L) {
  size_t s = L->at, e = s;
  while (isdigit(lex_byte(L, e)))
    e++;
  if (lex_byte(L, e) == '.')
    for (e++; isdigit(lex_byte(L, e));)
      e++;
  int c = lex_byte(L, e);
  if (c == 'e' || c == 'E') {
    size_t x = e + 1;
    if (lex_byte(L, x) == '+' || lex_byte(L, x) == '-')
      x++;
    if (isdigit(lex_byte(L, x))) {
      while (isdigit(lex_byte(L, x)))
        x++;
      e = x;
    }
  }
  size_t good = e;
  while (is_ident_char(lex_byte(L, e)) || lex_byte(L, e) == '.')
    e++;
  Front *F = L->F;
  char *text = arena_strndup(F->a, F->src + s, e - s);
  if (e != good) {
    front_error(F, lex_loc(L, s), "malformed number '%s'", text);
    lex_push(L, TK_BAD, s, e);
  } else {
    double v = strtod(text, NULL);
    if (isinf(v)) {
      front_error(F, lex_loc(L, s), "number '%s' is too large for a double "
                  "(the largest is about 1.8e308; write inf for infinity)",
                  text);
      lex_push(L, TK_BAD, s, e);
    } else {
      lex_push(L, TK_NUM, s, e)->num = v;
    }
  }
  L->at = e;
}

/* identifier = [A-Za-z_][A-Za-z0-9_]*; the words inf and nan are numbers */
static void lex_ident(Lexer *L) {
  size_t s = L->at, e = s;
  while (is_ident_char(lex_byte(L, e)))
    e++;
  const char *t = L->F->src + s;
  if (e - s == 3 && memcmp(t, "inf", 3) == 0)
    lex_push(L, TK_NUM, s, e)->num = INFINITY;
  else if (e - s == 3 && memcmp(t, "nan", 3) == 0)
    lex_push(L, TK_NUM, s, e)->num = NAN;
  else
    lex_push(L, TK_IDENT, s, e);
  L->at = e;
}

typedef struct Punct {
  const char *text;
  TokKind kind;
} Punct;

/* Longest match first: two-byte operators precede their prefixes. */
static const Punct puncts[] = {
    {"==", TK_EQ},     {"!=", TK_NE},     {"<=", TK_LE},     {">=", TK_GE},
    {"&&", TK_AND},    {"||", TK_OR},     {"(", TK_LPAREN},  {")", TK_RPAREN},
    {"[", TK_LBRACK},  {"]", TK_RBRACK},  {",", TK_COMMA},   {":", TK_COLON},
    {";", TK_SEMI},    {"=", TK_ASSIGN},  {"+", TK_PLUS},    {"-", TK_MINUS},
    {"*", TK_STAR},    {"/", TK_SLASH},   {"^", TK_CARET},   {"<", TK_LT},
    {">", TK_GT},      {"!", TK_NOT}};

/* An operator or punctuation token at L->at; 0 when there is none. */
static int lex_punct(Lexer *L) {
  for (size_t k = 0; k < sizeof puncts / sizeof puncts[0]; k++) {
    size_t n = strlen(puncts[k].text);
    if (L->at + n <= L->F->len &&
        memcmp(L->F->src + L->at, puncts[k].text, n) == 0) {
      lex_push(L, puncts[k].kind, L->at, L->at + n);
      L->at += n;
      return 1;
    }
  }
  return 0;
}

/* A byte no token starts with: reported once per run of such bytes. */
static void lex_bad_byte(Lexer *L) {
  Front *F = L->F;
  int c = lex_byte(L, L->at);
  Token *prev = F->ntoks ? &F->toks[F->ntoks - 1] : NULL;
  if (prev && prev->kind == TK_BAD &&
      prev->text + prev->len == F->src + L->at) {
    prev->len++;
    L->at++;
    return;
  }
  if (c == '&' || c == '|')
    front_error(F, lex_loc(L, L->at), "unexpected character '%c' (did you "
                "mean '%c%c'?)", c, c, c);
  else if (isprint(c))
    front_error(F, lex_loc(L, L->at), "unexpected character '%c'", c);
  else
    front_error(F, lex_loc(L, L->at), "unexpected byte 0x%02x", c);
  lex_push(L, TK_BAD, L->at, L->at + 1);
  L->at++;
}

/* One token (or skip blanks and comments) at L->at. */
static void lex_one(Lexer *L) {
  int c = lex_byte(L, L->at);
  if (c == '\n') {
    lex_push(L, TK_NEWLINE, L->at, L->at + 1);
    L->at++;
    L->line++;
    L->bol = L->at;
  } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
    L->at++;
  } else if (c == '#') {
    while (L->at < L->F->len && L->F->src[L->at] != '\n')
      L->at++;
  } else if (isdigit(c) || (c == '.' && isdigit(lex_byte(L, L->at + 1)))) {
    lex_number(L);
  } else if (is_ident_start(c)) {
    lex_ident(L);
  } else if (!lex_punct(L)) {
    lex_bad_byte(L);
  }
}

void lex_tokens(Front *F) {
  Lexer L = {F, 0, 1, 0};
  while (L.at < F->len)
    lex_one(&L);
  /* End of input: at the end of the last line, so that a message about
   * it shows that line rather than an empty one. */
  Token *last = F->ntoks ? &F->toks[F->ntoks - 1] : NULL;
  Token *eof = lex_push(&L, TK_EOF, L.at, L.at);
  if (last && last->kind == TK_NEWLINE &&
      last->text + 1 == F->src + F->len)
    eof->loc = last->loc;
  eof->len = 0;
}
