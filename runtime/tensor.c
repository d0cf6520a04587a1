/*
 * tensor.c -- level kinds, storage formats and the tensor object itself:
 * creation of an empty tensor, freeing, accessors and the human summary.
 *
 * Building from entries lives in build.c, format conversion in convert.c,
 * lookup and iteration in iterate.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

/* ------------------------------------------------------------------ */
/* Level kinds                                                         */
/* ------------------------------------------------------------------ */

/* What each kind can do, as data (levels.md section 3): the optimizer and
 * the code generator consult this table, never the kind's name. */
static const unsigned level_caps[GALLEY_NUM_LEVEL_KINDS] = {
    [GALLEY_DENSE] = GALLEY_CAP_ORDERED_ITER | GALLEY_CAP_RANDOM_LOOKUP |
                     GALLEY_CAP_SEQ_APPEND | GALLEY_CAP_RANDOM_INSERT,
    [GALLEY_LIST] = GALLEY_CAP_ORDERED_ITER | GALLEY_CAP_SEQ_APPEND,
    [GALLEY_HASH] = GALLEY_CAP_ORDERED_ITER | GALLEY_CAP_RANDOM_LOOKUP |
                    GALLEY_CAP_RANDOM_INSERT,
    [GALLEY_BYTEMAP] = GALLEY_CAP_ORDERED_ITER | GALLEY_CAP_RANDOM_LOOKUP |
                       GALLEY_CAP_SEQ_APPEND | GALLEY_CAP_RANDOM_INSERT,
};

static const char *const level_names[GALLEY_NUM_LEVEL_KINDS] = {
    "dense", "list", "hash", "bytemap"};

static int kind_valid(galley_level_kind kind) {
  return (int)kind >= 0 && (int)kind < GALLEY_NUM_LEVEL_KINDS;
}

unsigned galley_level_caps(galley_level_kind kind) {
  return kind_valid(kind) ? level_caps[kind] : 0;
}

const char *galley_level_kind_name(galley_level_kind kind) {
  return kind_valid(kind) ? level_names[kind] : "unknown";
}

/* ------------------------------------------------------------------ */
/* Formats                                                             */
/* ------------------------------------------------------------------ */

/* Identity mode order with every level of one kind; a clamped order keeps
 * callers that pass nonsense from writing out of bounds. */
static galley_format format_uniform(int order, galley_level_kind kind) {
  galley_format f;
  memset(&f, 0, sizeof f);
  f.order = order < 0 ? 0 : order > GALLEY_MAX_ORDER ? GALLEY_MAX_ORDER : order;
  for (int l = 0; l < f.order; l++) {
    f.mode_order[l] = l;
    f.kinds[l] = kind;
  }
  return f;
}

galley_format galley_format_default(int order) {
  galley_format f = format_uniform(order, GALLEY_LIST);
  if (f.order >= 2)
    f.kinds[0] = GALLEY_DENSE;
  return f;
}

/* Most of the first mode's coordinates empty: a dense root would take
 * more memory than the entries (a 10^9 x 10^9 matrix with 2 entries:
 * 8 GB of row positions), so the root is a sorted list too (DCSR).  The
 * factor 16 is GraphBLAS's hypersparsity switch. */
#define HYPERSPARSE_FACTOR 16

galley_format rt_format_for_entries(int order, const int64_t *dims,
                                    int64_t nnz) {
  galley_format f = galley_format_default(order);
  if (order >= 2 && dims[0] / HYPERSPARSE_FACTOR > nnz)
    f.kinds[0] = GALLEY_LIST;
  return f;
}

galley_format galley_format_dense(int order) {
  return format_uniform(order, GALLEY_DENSE);
}

galley_status rt_format_check(const galley_format *fmt, int order,
                              galley_error *err) {
  if (order < 0 || order > GALLEY_MAX_ORDER)
    return rt_error(err, GALLEY_EINVAL, "order %d is not in 0..%d", order,
                    GALLEY_MAX_ORDER);
  if (fmt->order != order)
    return rt_error(err, GALLEY_EINVAL,
                    "format has %d levels but the tensor has order %d",
                    fmt->order, order);
  int seen[GALLEY_MAX_ORDER] = {0};
  for (int l = 0; l < order; l++) {
    int m = fmt->mode_order[l];
    if (!kind_valid(fmt->kinds[l]))
      return rt_error(err, GALLEY_EINVAL, "level %d has unknown kind %d", l,
                      (int)fmt->kinds[l]);
    if (m < 0 || m >= order)
      return rt_error(err, GALLEY_EINVAL,
                      "level %d stores mode %d, not in 0..%d", l, m,
                      order - 1);
    if (seen[m]++)
      return rt_error(err, GALLEY_EINVAL,
                      "mode %d is stored by more than one level", m);
  }
  return GALLEY_OK;
}

/* The kind named by text[0..len), or -1. */
static int parse_kind(const char *text, size_t len) {
  static const struct {
    const char *name;
    galley_level_kind kind;
  } names[] = {{"dense", GALLEY_DENSE}, {"d", GALLEY_DENSE},
               {"list", GALLEY_LIST},   {"sparse", GALLEY_LIST},
               {"s", GALLEY_LIST},      {"hash", GALLEY_HASH},
               {"h", GALLEY_HASH},      {"bytemap", GALLEY_BYTEMAP},
               {"b", GALLEY_BYTEMAP}};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
    if (strlen(names[k].name) == len && memcmp(names[k].name, text, len) == 0)
      return (int)names[k].kind;
  return -1;
}

/* Parse one token "KIND" or "KIND:MODE" into level l of out; *explicit_mode
 * says whether a mode was given. */
static galley_status parse_level(const char *tok, size_t len, int l,
                                 galley_format *out, int *explicit_mode,
                                 galley_error *err) {
  const char *colon = memchr(tok, ':', len);
  size_t klen = colon ? (size_t)(colon - tok) : len;
  int kind = parse_kind(tok, klen);
  if (kind < 0)
    return rt_error(err, GALLEY_EINVAL, "unknown level kind '%.*s' in format",
                    (int)klen, tok);
  out->kinds[l] = (galley_level_kind)kind;
  out->mode_order[l] = l;
  *explicit_mode = colon != NULL;
  if (colon) {
    const char *d = colon + 1, *end = tok + len;
    int mode = 0;
    if (d == end)
      return rt_error(err, GALLEY_EINVAL, "missing mode after ':' in '%.*s'",
                      (int)len, tok);
    for (; d < end; d++) {
      if (*d < '0' || *d > '9' || mode > GALLEY_MAX_ORDER)
        return rt_error(err, GALLEY_EINVAL, "bad mode in format token '%.*s'",
                        (int)len, tok);
      mode = mode * 10 + (*d - '0');
    }
    out->mode_order[l] = mode;
  }
  return GALLEY_OK;
}

galley_status galley_format_parse(const char *text, int order,
                                  galley_format *out, galley_error *err) {
  galley_format f;
  memset(&f, 0, sizeof f);
  if (!text)
    return rt_error(err, GALLEY_EINVAL, "no format text");
  if (order < 0 || order > GALLEY_MAX_ORDER)
    return rt_error(err, GALLEY_EINVAL, "order %d is not in 0..%d", order,
                    GALLEY_MAX_ORDER);
  int nlev = 0, nexplicit = 0;
  const char *s = text;
  while (*s) {
    const char *comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    int ex;
    if (nlev >= GALLEY_MAX_ORDER)
      return rt_error(err, GALLEY_EINVAL, "format '%s' has too many levels",
                      text);
    galley_status st = parse_level(s, len, nlev, &f, &ex, err);
    if (st != GALLEY_OK)
      return st;
    nlev++;
    nexplicit += ex;
    if (!comma)
      break;
    s = comma + 1;
    if (!*s)
      return rt_error(err, GALLEY_EINVAL, "format '%s' ends with ','", text);
  }
  if (nlev != order)
    return rt_error(err, GALLEY_EINVAL,
                    "format '%s' has %d levels but the tensor has order %d",
                    text, nlev, order);
  if (nexplicit != 0 && nexplicit != nlev)
    return rt_error(err, GALLEY_EINVAL,
                    "format '%s' gives modes for some levels but not all",
                    text);
  f.order = order;
  galley_status st = rt_format_check(&f, order, err);
  if (st == GALLEY_OK)
    *out = f;
  return st;
}

void galley_format_print(const galley_format *fmt, char *buf, size_t size) {
  size_t used = 0;
  if (size == 0)
    return;
  buf[0] = '\0';
  for (int l = 0; l < fmt->order && l < GALLEY_MAX_ORDER; l++) {
    int n = snprintf(buf + used, size - used, "%s%s:%d", l ? "," : "",
                     galley_level_kind_name(fmt->kinds[l]), fmt->mode_order[l]);
    if (n < 0 || (size_t)n >= size - used)
      return; /* truncated; snprintf left it NUL-terminated */
    used += (size_t)n;
  }
}

/* ------------------------------------------------------------------ */
/* Tensor lifetime and accessors                                       */
/* ------------------------------------------------------------------ */

galley_tensor *rt_tensor_new(int order, const int64_t *dims, double fill,
                             const galley_format *fmt, galley_error *err) {
  galley_tensor *t = NULL;
  (void)rt_build_sorted(order, dims, fmt, fill, 0, NULL, NULL, &t, err);
  return t;
}

galley_tensor *galley_tensor_free(galley_tensor *t) {
  if (!t)
    return NULL;
  rt_cache_free(t->cache); /* facts.c */
  for (int l = 0; l < GALLEY_RT_MAX_ORDER && !t->borrowed; l++) {
    galley_level *L = &t->lvl[l];
    free(L->pos);
    free(L->crd);
    free(L->pos32);
    free(L->crd32);
    free(L->qos);
    free(L->key);
    free(L->slot);
    free(L->qos32);
    free(L->key32);
    free(L->slot32);
    free(L->tbl);
  }
  if (!t->borrowed)
    free(t->val);
  free(t);
  return NULL;
}

int galley_tensor_order(const galley_tensor *t) { return t->order; }

int64_t galley_tensor_dim(const galley_tensor *t, int mode) {
  return mode >= 0 && mode < t->order ? t->dims[mode] : 0;
}

double galley_tensor_fill(const galley_tensor *t) { return t->fill; }

void galley_tensor_format(const galley_tensor *t, galley_format *out) {
  memset(out, 0, sizeof *out);
  out->order = t->order;
  for (int l = 0; l < t->order; l++) {
    out->mode_order[l] = t->lvl[l].mode;
    out->kinds[l] = (galley_level_kind)t->lvl[l].kind;
  }
}

/* ------------------------------------------------------------------ */
/* Index width                                                         */
/* ------------------------------------------------------------------ */

int rt_level_fits32(const galley_level *L) {
  if (L->dim > GALLEY_RT_IDX32_MAX_DIM || L->nset > GALLEY_RT_IDX32_MAX_NSET)
    return 0;
  if (L->kind == GALLEY_RT_HASH) /* every key p*dim + i, too */
    return L->dim == 0 || L->npar <= GALLEY_RT_IDX32_MAX_KEYS / L->dim;
  return L->kind == GALLEY_RT_LIST || L->kind == GALLEY_RT_BYTEMAP;
}

void rt_par_run(const rt_par *par, int64_t nparts, rt_task fn, void *ctx) {
  if (par && par->run && nparts > 1) {
    par->run(par->pool, nparts, fn, ctx);
    return;
  }
  for (int64_t p = 0; p < nparts; p++)
    fn(ctx, p, 0);
}

/* Index copies between widths, in parts of WIDTH_PART values. */
#define WIDTH_PART ((int64_t)1 << 16)

typedef struct WidthCopy {
  const void *src;
  void *dst;
  int64_t n;
  int narrow; /* 64 to 32 bits, else 32 to 64 */
} WidthCopy;

static void width_copy_part(void *ctx, int64_t part, int worker) {
  const WidthCopy *c = ctx;
  int64_t lo = part * WIDTH_PART;
  int64_t hi = lo + WIDTH_PART < c->n ? lo + WIDTH_PART : c->n;
  (void)worker;
  if (c->narrow) {
    const int64_t *a = c->src;
    int32_t *w = c->dst;
    for (int64_t k = lo; k < hi; k++)
      w[k] = (int32_t)a[k];
  } else {
    const int32_t *a = c->src;
    int64_t *w = c->dst;
    for (int64_t k = lo; k < hi; k++)
      w[k] = a[k];
  }
}

/* n values of a as a new array of the other width (narrowing: they fit),
 * on par's threads when long; NULL: out of memory. */
static void *width_copy(const void *a, int64_t n, int narrow,
                        const rt_par *par) {
  void *w = rt_malloc_array(n > 0 ? n : 1, narrow ? 4 : 8);
  if (!w)
    return NULL;
  WidthCopy c = {.src = a, .dst = w, .n = n, .narrow = narrow};
  rt_par_run(n >= RT_PAR_MIN ? par : NULL, (n + WIDTH_PART - 1) / WIDTH_PART,
             width_copy_part, &c);
  return w;
}

int rt_level_set_width(galley_level *L, int idx32) {
  return rt_level_set_width_par(L, idx32, NULL);
}

/* The index arrays of level L that have a width, at most 5: the homes of
 * their 64-bit (w64) and 32-bit (w32) forms and their lengths; returns
 * how many (pos and crd; a hash level's qos, key and slot too). */
#define WIDTH_ARRAYS_MAX 5
static int width_arrays(galley_level *L, void **w64[WIDTH_ARRAYS_MAX],
                        void **w32[WIDTH_ARRAYS_MAX],
                        int64_t n[WIDTH_ARRAYS_MAX]) {
  int k = 0;
  w64[k] = (void **)&L->pos, w32[k] = (void **)&L->pos32, n[k++] = L->npar + 1;
  w64[k] = (void **)&L->crd, w32[k] = (void **)&L->crd32, n[k++] = L->nset;
  if (L->kind == GALLEY_RT_HASH) {
    w64[k] = (void **)&L->qos, w32[k] = (void **)&L->qos32, n[k++] = L->nset;
    w64[k] = (void **)&L->key, w32[k] = (void **)&L->key32, n[k++] = L->hcap;
    w64[k] = (void **)&L->slot, w32[k] = (void **)&L->slot32,
    n[k++] = L->hcap;
  }
  return k;
}

/* Every index array is copied to the other width before any original is
 * freed, so out of memory leaves L as it was.  A hash table keeps its
 * layout: the start slot hashes the key's value, the same at both
 * widths (-1, the empty key, too). */
int rt_level_set_width_par(galley_level *L, int idx32, const rt_par *par) {
  if (L->kind == GALLEY_RT_DENSE)
    return idx32 ? -1 : 0;
  if (!!L->idx32 == !!idx32)
    return 0;
  if (idx32 && !rt_level_fits32(L))
    return -1;
  void **w64[WIDTH_ARRAYS_MAX], **w32[WIDTH_ARRAYS_MAX];
  void *copy[WIDTH_ARRAYS_MAX] = {0};
  int64_t n[WIDTH_ARRAYS_MAX];
  int narr = width_arrays(L, w64, w32, n), ok = 1;
  for (int k = 0; k < narr && ok; k++)
    ok = (copy[k] = width_copy(idx32 ? *w64[k] : *w32[k], n[k], !!idx32,
                               par)) != NULL;
  for (int k = 0; k < narr; k++) {
    if (!ok) {
      free(copy[k]);
      continue;
    }
    void **from = idx32 ? w64[k] : w32[k], **to = idx32 ? w32[k] : w64[k];
    free(*from);
    *from = NULL;
    *to = copy[k];
  }
  if (!ok)
    return -1;
  L->idx32 = !!idx32;
  return 0;
}

galley_status rt_tensor_set_widths(galley_tensor *t, unsigned idx32,
                                   galley_error *err) {
  return rt_tensor_set_widths_par(t, idx32, NULL, err);
}

galley_status rt_tensor_set_widths_par(galley_tensor *t, unsigned idx32,
                                       const rt_par *par, galley_error *err) {
  if (t->borrowed)
    return rt_error(err, GALLEY_EINTERNAL,
                    "internal error: the index width of a borrowed tensor "
                    "cannot change");
  for (int l = 0; l < t->order; l++) {
    int want = idx32 >> l & 1;
    if (rt_level_set_width_par(&t->lvl[l], want, par) == 0)
      continue;
    if (want && !rt_level_fits32(&t->lvl[l]))
      return rt_error(err, GALLEY_EINTERNAL,
                      "internal error: level %d cannot store 32-bit indices",
                      l);
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  }
  return GALLEY_OK;
}

unsigned rt_tensor_widths(const galley_tensor *t) {
  unsigned w = 0;
  for (int l = 0; l < t->order; l++)
    if (t->lvl[l].idx32)
      w |= 1u << l;
  return w;
}

unsigned rt_tensor_fit_widths(const galley_tensor *t) {
  unsigned w = 0;
  for (int l = 0; l < t->order; l++)
    if (rt_level_fits32(&t->lvl[l]))
      w |= 1u << l;
  return w;
}

/* Stored entries are the (p, i) pairs reachable from the root: a dense
 * level multiplies its parents' count by dim, a sparse level counts its
 * own set pairs (the builder never inserts under unreachable parents, but
 * a dense level under a bytemap also spans the bytemap's unset slots). */
int64_t galley_tensor_stored(const galley_tensor *t) {
  int64_t reach = 1;
  for (int l = 0; l < t->order; l++) {
    const galley_level *L = &t->lvl[l];
    reach = L->kind == GALLEY_RT_DENSE ? reach * L->dim : L->nset;
  }
  return reach;
}

/* Bytes held by the arrays of one level. */
static int64_t level_bytes(const galley_level *L) {
  int64_t b = 0;
  if (L->pos)
    b += (L->npar + 1) * (int64_t)sizeof(galley_pos);
  if (L->crd)
    b += L->nset * (int64_t)sizeof(galley_crd);
  if (L->pos32)
    b += (L->npar + 1) * (int64_t)sizeof(int32_t);
  if (L->crd32)
    b += L->nset * (int64_t)sizeof(int32_t);
  if (L->qos)
    b += L->nset * (int64_t)sizeof(galley_pos);
  if (L->key)
    b += L->hcap * (int64_t)(sizeof(int64_t) + sizeof(galley_pos));
  if (L->qos32)
    b += L->nset * (int64_t)sizeof(int32_t);
  if (L->key32)
    b += L->hcap * (int64_t)(2 * sizeof(int32_t));
  if (L->tbl)
    b += L->npar * L->dim;
  return b;
}

int64_t galley_tensor_bytes(const galley_tensor *t) {
  int64_t b = (int64_t)sizeof *t + t->nval * (int64_t)sizeof(double);
  for (int l = 0; l < t->order; l++)
    b += level_bytes(&t->lvl[l]);
  return b;
}

/* Print a byte count with a binary unit ("2.1 KiB"). */
static void print_bytes(FILE *f, int64_t bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    fprintf(f, "%lld B", (long long)bytes);
  else
    fprintf(f, "%.1f %s", v, units[u]);
}

void galley_tensor_describe(const galley_tensor *t, FILE *f) {
  char buf[256];
  galley_format fmt;
  fprintf(f, "order %d, dims ", t->order);
  for (int k = 0; k < t->order; k++)
    fprintf(f, "%s%lld", k ? " x " : "", (long long)t->dims[k]);
  if (t->order == 0)
    fprintf(f, "(scalar)");
  fprintf(f, ", stored %lld, nnz %lld, fill %g\n",
          (long long)galley_tensor_stored(t), (long long)galley_tensor_nnz(t),
          t->fill);
  galley_tensor_format(t, &fmt);
  galley_format_print(&fmt, buf, sizeof buf);
  fprintf(f, "format %s (", t->order ? buf : "scalar");
  for (int l = 0; l < t->order; l++)
    fprintf(f, "%slevel %d: %s mode %d", l ? "; " : "", l,
            galley_level_kind_name(fmt.kinds[l]), fmt.mode_order[l]);
  fprintf(f, ")\nmemory ");
  print_bytes(f, galley_tensor_bytes(t));
  fprintf(f, "\n");
}
