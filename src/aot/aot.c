/*
 * aot.c -- ahead of time (`galleyc compile`): the C text of a driver that
 * runs a physical plan's queries in order with the kernels codegen
 * emitted, and of its header.  The driver is the executor's run path
 * written out as C for a build without libgalley.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot.h"
#include "rt_internal.h"

static galley_status nomem(galley_error *err) {
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
}

static int all_dense(const galley_format *fmt) {
  for (int l = 0; l < fmt->order; l++)
    if (fmt->kinds[l] != GALLEY_DENSE)
      return 0;
  return 1;
}

/* last_use[q] = the last query that reads q's result; keep[q] = 1 for a
 * program output (never freed by the driver). */
static void compute_last_use(const PhysPlan *pp, int *last_use,
                             unsigned char *keep) {
  for (int n = 0; n < pp->nq; n++)
    last_use[n] = -1;
  for (int n = 0; n < pp->nq; n++)
    for (int k = 0; k < pp->q[n].nacc; k++) {
      const PAccess *a = &pp->q[n].acc[k];
      if (!a->is_input && a->tensor >= 0 && a->tensor < n)
        last_use[a->tensor] = n;
    }
  for (int k = 0; k < pp->noutputs; k++)
    keep[pp->outputs[k]] = 1;
}

/* ------------------------------------------------------------------ */
/* Ahead of time: the driver's C text                                  */
/* ------------------------------------------------------------------ */

/* A growing NUL-terminated text; a failed allocation sets `oom` and
 * makes later appends no-ops, so emitters check once at the end. */
typedef struct Text {
  char *s;
  size_t len, cap;
  int oom;
} Text;

static void text_printf(Text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void text_printf(Text *t, const char *fmt, ...) {
  if (t->oom)
    return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->s ? t->s + t->len : NULL,
                      t->s ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->oom = 1;
      return;
    }
    if (t->s && t->len + (size_t)n < t->cap) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = t->cap ? t->cap : 4096;
    while (cap <= t->len + (size_t)n)
      cap *= 2;
    char *s = realloc(t->s, cap);
    if (!s) {
      t->oom = 1;
      return;
    }
    t->s = s;
    t->cap = cap;
  }
}

/* A double as a C expression that reads back exactly (inf and nan have
 * no literal). */
static void text_double(Text *t, double v) {
  if (v != v) {
    text_printf(t, "(0.0 / 0.0)");
  } else if (v > 1.7976931348623157e308 || v < -1.7976931348623157e308) {
    text_printf(t, v > 0 ? "(1.0 / 0.0)" : "(-1.0 / 0.0)");
  } else {
    char buf[64];
    snprintf(buf, sizeof buf, "%.17g", v);
    text_printf(t, "%s%s", buf, strpbrk(buf, ".e") ? "" : ".0");
  }
}

/* A program name as a C string literal: anything but [A-Za-z0-9_] is an
 * octal escape, so no name can end the literal. */
static void text_cstring(Text *t, const char *s) {
  text_printf(t, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9') || c == '_')
      text_printf(t, "%c", c);
    else
      text_printf(t, "\\%03o", c);
  }
  text_printf(t, "\"");
}

/* A program name inside a comment: the same characters, others as '?'. */
static void text_comment_name(Text *t, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '_';
    text_printf(t, "%c", plain ? c : '?');
  }
}

/* `{a, b, c}` of int64 (a lone 0 for an empty list: C has no empty
 * initializers). */
static void text_i64s(Text *t, int n, const int64_t *v) {
  text_printf(t, "{");
  for (int k = 0; k < n; k++)
    text_printf(t, k ? ", %lld" : "%lld", (long long)v[k]);
  text_printf(t, n ? "}" : "0}");
}

static void text_ints(Text *t, int n, const int *v) {
  text_printf(t, "{");
  for (int k = 0; k < n; k++)
    text_printf(t, k ? ", %d" : "%d", v[k]);
  text_printf(t, n ? "}" : "0}");
}

static galley_status text_done(Text *t, galley_error *err) {
  if (!t->oom)
    return GALLEY_OK;
  free(t->s);
  t->s = NULL;
  return nomem(err);
}

/* The format the driver takes input k in: the one it is bound in, or,
 * when the plan reads it only through transposes into one format, that
 * format (the host passes it already transposed, so the driver needs no
 * sorting code).  GALLEY_EINVAL when it is read in two formats. */
static galley_status aot_input_format(const PhysPlan *pp,
                                      const galley_tensor *in, int k,
                                      galley_format *fmt, galley_error *err) {
  int direct = 0, transposed = 0;
  phys_input_format(in, fmt);
  for (int n = 0; n < pp->nq; n++) {
    const PhysQuery *q = &pp->q[n];
    for (int a = 0; a < q->nacc; a++) {
      if (!q->acc[a].is_input || q->acc[a].tensor != k)
        continue;
      if (q->kind == PQ_KERNEL) {
        direct = 1;
      } else if (!transposed++) {
        *fmt = q->out_format;
      } else if (memcmp(fmt, &q->out_format, sizeof *fmt) != 0) {
        direct = 1; /* two different transposes */
      }
    }
  }
  if (direct && transposed)
    return rt_error(err, GALLEY_EINVAL,
                    "the plan reads input '%s' in two storage formats; "
                    "ahead-of-time drivers take each input in one format",
                    pp->prog->inputs[k].name);
  return GALLEY_OK;
}

/* Whether query n is a transpose of an input (which the driver replaces
 * by the input, passed in the transposed format). */
static int aot_is_input_transpose(const PhysQuery *q) {
  return q->kind == PQ_TRANSPOSE && q->acc[0].is_input;
}

/* Refuse what the driver does not support, saying why. */
static galley_status aot_check_plan(const PhysPlan *pp,
                                    const galley_tensor *const *inputs,
                                    galley_error *err) {
  /* the inputs first: how the host must pass them */
  for (int k = 0; k < pp->prog->ninputs; k++) {
    galley_format fmt;
    galley_status st = aot_input_format(pp, inputs[k], k, &fmt, err);
    if (st != GALLEY_OK)
      return st;
  }
  for (int n = 0; n < pp->nq; n++) {
    const PhysQuery *q = &pp->q[n];
    char fmt[256];
    galley_format_print(&q->out_format, fmt, sizeof fmt);
    if (q->kind == PQ_TRANSPOSE && !aot_is_input_transpose(q))
      return rt_error(err, GALLEY_EINVAL,
                      "the plan transposes the intermediate '%s' into %s; "
                      "ahead-of-time drivers support transposes of inputs "
                      "only",
                      pp->q[q->acc[0].tensor].name, fmt);
    if (q->kind == PQ_KERNEL && !all_dense(&q->out_format))
      return rt_error(err, GALLEY_EINVAL,
                      "query '%s' is planned with a sparse result (%s); "
                      "ahead-of-time drivers support all-dense results and "
                      "intermediates only",
                      q->name, fmt);
  }
  for (int k = 0; k < pp->noutputs; k++) {
    if (pp->q[pp->outputs[k]].kind != PQ_KERNEL)
      return rt_error(err, GALLEY_EINVAL,
                      "output '%s' is planned as a copy of an input; "
                      "ahead-of-time drivers return computed results only",
                      pp->output_names[k]);
    for (int j = 0; j < k; j++)
      if (pp->outputs[j] == pp->outputs[k])
        return rt_error(err, GALLEY_EINVAL,
                        "output '%s' is named twice; ahead-of-time drivers "
                        "return each result once",
                        pp->output_names[k]);
  }
  return GALLEY_OK;
}

/* The helpers every driver carries (allocation of dense results, input
 * checks), written once per file. */
static const char aot_helpers[] =
    "\n/* ---- driver (galleyc compile) ---- */\n"
    "#include <stdlib.h>\n"
    "\n"
    "void galley_aot_free(struct galley_tensor *t) {\n"
    "  if (t) {\n"
    "    free(t->val);\n"
    "    free(t);\n"
    "  }\n"
    "}\n"
    "\n"
    "/* A new all-dense tensor (level l stores mode modes[l]), every value\n"
    " * fill; NULL when out of memory. */\n"
    "static struct galley_tensor *galley_aot_dense(int order,\n"
    "    const int64_t *dims, const int *modes, double fill) {\n"
    "  struct galley_tensor *t = calloc(1, sizeof *t);\n"
    "  int64_t n = 1;\n"
    "  if (!t)\n"
    "    return 0;\n"
    "  t->order = order;\n"
    "  t->fill = fill;\n"
    "  for (int k = 0; k < order; k++)\n"
    "    t->dims[k] = dims[k];\n"
    "  for (int l = 0; l < order; l++) {\n"
    "    galley_level *L = &t->lvl[l];\n"
    "    L->kind = GALLEY_RT_DENSE;\n"
    "    L->mode = modes[l];\n"
    "    L->dim = dims[modes[l]];\n"
    "    L->npar = n;\n"
    "    n *= L->dim;\n"
    "    L->nchild = L->nset = n;\n"
    "  }\n"
    "  t->nval = n;\n"
    "  t->val = malloc((size_t)(n > 0 ? n : 1) * sizeof *t->val);\n"
    "  if (!t->val) {\n"
    "    free(t);\n"
    "    return 0;\n"
    "  }\n"
    "  for (int64_t q = 0; q < n; q++)\n"
    "    t->val[q] = fill;\n"
    "  return t;\n"
    "}\n"
    "\n"
    "/* 0 when t has the order, dims, level kinds and modes, index widths\n"
    " * (bit l of w32: level l is 32-bit) and fill the kernels were compiled\n"
    " * for. */\n"
    "static int galley_aot_check(const struct galley_tensor *t, int order,\n"
    "    const int64_t *dims, const int *kinds, const int *modes,\n"
    "    unsigned w32, double fill) {\n"
    "  if (!t || t->order != order)\n"
    "    return -1;\n"
    "  for (int k = 0; k < order; k++)\n"
    "    if (t->dims[k] != dims[k])\n"
    "      return -1;\n"
    "  for (int l = 0; l < order; l++) {\n"
    "    const struct galley_level *L = &t->lvl[l];\n"
    "    /* a sorted list with every fiber full is laid out as dense */\n"
    "    int full = L->kind == GALLEY_RT_LIST && L->npar > 0 &&\n"
    "               galley_rt_pos(L, L->npar) == L->npar * L->dim;\n"
    "    if ((L->kind != kinds[l] && !(full && kinds[l] == GALLEY_RT_DENSE)) ||\n"
    "        L->mode != modes[l])\n"
    "      return -1;\n"
    "    if (kinds[l] != GALLEY_RT_DENSE && L->kind != GALLEY_RT_DENSE &&\n"
    "        L->idx32 != (int)(w32 >> l & 1))\n"
    "      return -1;\n"
    "  }\n"
    "  if (!(t->fill == fill || (t->fill != t->fill && fill != fill)))\n"
    "    return -1;\n"
    "  return 0;\n"
    "}\n";

/* The name tables: galley_aot_input_names[], galley_aot_output_names[]. */
static void aot_names(Text *t, const PhysPlan *pp) {
  const Program *p = pp->prog;
  text_printf(t, "\nconst char *const galley_aot_input_names[] = {");
  for (int k = 0; k < p->ninputs; k++) {
    text_printf(t, k ? ", " : "");
    text_cstring(t, p->inputs[k].name);
  }
  text_printf(t, "%s};\nconst char *const galley_aot_output_names[] = {",
              p->ninputs ? "" : "0");
  for (int k = 0; k < pp->noutputs; k++) {
    text_printf(t, k ? ", " : "");
    text_cstring(t, pp->output_names[k]);
  }
  text_printf(t, "%s};\n", pp->noutputs ? "" : "0");
}

/* The fill the kernels read input k with: the plan's (a bound tensor
 * with fill 0 takes its declared fill), else the tensor's own. */
static double aot_input_fill(const PhysPlan *pp, const galley_tensor *in,
                             int k) {
  for (int n = 0; n < pp->nq; n++)
    for (int a = 0; a < pp->q[n].nacc; a++)
      if (pp->q[n].acc[a].is_input && pp->q[n].acc[a].tensor == k)
        return pp->q[n].acc[a].fill;
  return in->fill;
}

/* Check input k against the tensor the plan was made for. */
/* The index widths the kernels read input k with: its own, or those of
 * its transpose (which the host passes instead). */
static unsigned aot_input_widths(const PhysPlan *pp, const galley_tensor *in,
                                 int k) {
  for (int n = 0; n < pp->nq; n++) {
    const PhysQuery *q = &pp->q[n];
    if (q->kind == PQ_TRANSPOSE && q->acc[0].is_input && q->acc[0].tensor == k)
      return q->out_w32;
  }
  return rt_tensor_widths(in);
}

static void aot_input_check(Text *t, const PhysPlan *pp,
                            const galley_tensor *in, int k) {
  int kinds[GALLEY_MAX_ORDER];
  galley_format fmt;
  (void)aot_input_format(pp, in, k, &fmt, NULL); /* checked before */
  for (int l = 0; l < in->order; l++)
    kinds[l] = fmt.kinds[l];
  double fill = aot_input_fill(pp, in, k);
  text_printf(t, "  { /* input %d: ", k);
  text_comment_name(t, pp->prog->inputs[k].name);
  text_printf(t, " */\n    static const int64_t dims[] = ");
  text_i64s(t, in->order, in->dims);
  text_printf(t, ";\n    static const int kinds[] = ");
  text_ints(t, in->order, kinds);
  text_printf(t, ";\n    static const int modes[] = ");
  text_ints(t, in->order, fmt.mode_order);
  text_printf(t, ";\n    if (galley_aot_check(inputs[%d], %d, dims, kinds, "
                 "modes, %uu, ", k, in->order, aot_input_widths(pp, in, k));
  text_double(t, fill);
  text_printf(t, ") != 0)\n      return -2;\n  }\n");
}

/* One kernel query: allocate its dense result, call its kernel. */
static void aot_query(Text *t, const PhysPlan *pp, int n) {
  const PhysQuery *q = &pp->q[n];
  int64_t odims[GALLEY_MAX_ORDER] = {0};
  for (int k = 0; k < q->nout; k++)
    odims[k] = q->indices[q->out[k]].dim;
  char kname[64];
  cg_kernel_name(n, kname, sizeof kname);
  text_printf(t, "  { /* query %d: ", n);
  text_comment_name(t, q->name);
  text_printf(t, " */\n    static const int64_t dims[] = {");
  for (int id = 0; id < q->nindices; id++)
    text_printf(t, id ? ", %lld" : "%lld", (long long)q->indices[id].dim);
  text_printf(t, q->nindices ? "}" : "0}");
  text_printf(t, ";\n    static const int64_t odims[] = ");
  text_i64s(t, q->nout, odims);
  text_printf(t, ";\n    static const int omodes[] = ");
  text_ints(t, q->nout, q->out_format.mode_order);
  text_printf(t, ";\n    const struct galley_tensor *in[] = {");
  for (int a = 0; a < q->nacc; a++) {
    const PAccess *acc = &q->acc[a];
    if (!acc->is_input && aot_is_input_transpose(&pp->q[acc->tensor]))
      acc = &pp->q[acc->tensor].acc[0]; /* passed transposed */
    text_printf(t, "%s%s[%d]", a ? ", " : "",
                acc->is_input ? "inputs" : "r", acc->tensor);
  }
  text_printf(t, "%s};\n    galley_kernel_args a = {0};\n", q->nacc ? "" : "0");
  text_printf(t, "    r[%d] = galley_aot_dense(%d, odims, omodes, ", n,
              q->nout);
  text_double(t, q->out_fill);
  text_printf(t, ");\n    if (!r[%d])\n      goto oom;\n", n);
  text_printf(t, "    a.in = in;\n    a.out = r[%d];\n    a.dims = dims;\n"
                 "    a.lo = 0;\n    a.hi = %lld;\n",
              n, (long long)(q->nloops > 0 ? q->indices[q->loops[0]].dim : 1));
  text_printf(t, "    if (%s(&a) != 0)\n      goto oom;\n  }\n", kname);
}

/* Free the intermediates whose last reader is query n. */
static void aot_free_dead(Text *t, const PhysPlan *pp, const int *last_use,
                          const unsigned char *keep, int n) {
  for (int m = 0; m < n; m++)
    if (last_use[m] == n && !keep[m] && !aot_is_input_transpose(&pp->q[m]))
      text_printf(t, "  galley_aot_free(r[%d]);\n  r[%d] = 0;\n", m, m);
}

static void aot_run(Text *t, const PhysPlan *pp,
                    const galley_tensor *const *inputs, const int *last_use,
                    const unsigned char *keep) {
  text_printf(t, "\nint galley_aot_run(const struct galley_tensor *const "
                 "*inputs,\n                   struct galley_tensor "
                 "**outputs) {\n");
  text_printf(t, "  struct galley_tensor *r[%d] = {0};\n", pp->nq + 1);
  for (int k = 0; k < pp->noutputs; k++)
    text_printf(t, "  outputs[%d] = 0;\n", k);
  for (int k = 0; k < pp->prog->ninputs; k++)
    aot_input_check(t, pp, inputs[k], k);
  for (int n = 0; n < pp->nq; n++) {
    if (aot_is_input_transpose(&pp->q[n]))
      continue;
    aot_query(t, pp, n);
    aot_free_dead(t, pp, last_use, keep, n);
  }
  for (int k = 0; k < pp->noutputs; k++)
    text_printf(t, "  outputs[%d] = r[%d];\n  r[%d] = 0;\n", k,
                pp->outputs[k], pp->outputs[k]);
  text_printf(t, "  return 0;\n");
  int kernels = 0;
  for (int n = 0; n < pp->nq; n++)
    kernels += pp->q[n].kind == PQ_KERNEL;
  if (kernels > 0) /* each may run out of memory */
    text_printf(t, "oom:\n  for (int n = 0; n < %d; n++)\n"
                   "    galley_aot_free(r[n]);\n  return -1;\n", pp->nq);
  text_printf(t, "}\n");
}

galley_status aot_driver(const PhysPlan *pp, const galley_tensor *const *inputs,
                         char **src, size_t *len, galley_error *err) {
  rt_error_clear(err);
  for (int k = 0; k < pp->prog->ninputs; k++)
    if (!inputs[k])
      return rt_error(err, GALLEY_EBIND, "input '%s' is not bound",
                      pp->prog->inputs[k].name);
  galley_status st = aot_check_plan(pp, inputs, err);
  if (st != GALLEY_OK)
    return st;
  int *last_use = calloc((size_t)pp->nq + 1, sizeof *last_use);
  unsigned char *keep = calloc((size_t)pp->nq + 1, 1);
  Text t = {.s = *src, .len = *len, .cap = *src ? *len + 1 : 0};
  if (!last_use || !keep) {
    st = nomem(err);
  } else {
    compute_last_use(pp, last_use, keep);
    text_printf(&t, "%s", aot_helpers);
    aot_names(&t, pp);
    aot_run(&t, pp, inputs, last_use, keep);
    if (t.oom)
      st = nomem(err);
  }
  free(last_use);
  free(keep);
  *src = t.s;
  *len = t.len;
  return st;
}

/* The kernel header's text (generated from runtime/galley_rt.h). */
static const char rt_header_text[] =
#include "rt_header.inc"
    ;

galley_status aot_header(const PhysPlan *pp, const galley_tensor *const *inputs,
                         char **text, galley_error *err) {
  rt_error_clear(err);
  const Program *p = pp->prog;
  Text t = {0};
  text_printf(&t, "/* Generated by galleyc %s (galleyc compile): the "
                  "driver of an ahead-of-time\n * compiled program.  Do not "
                  "edit. */\n#ifndef GALLEY_AOT_H\n#define GALLEY_AOT_H\n\n",
              GALLEY_VERSION_STRING);
  text_printf(&t, "%s\n", rt_header_text);
  text_printf(&t, "#define GALLEY_AOT_NUM_INPUTS %d\n"
                  "#define GALLEY_AOT_NUM_OUTPUTS %d\n"
                  "#define GALLEY_AOT_OK 0\n"
                  "#define GALLEY_AOT_ENOMEM (-1) /* out of memory */\n"
                  "#define GALLEY_AOT_EINPUT (-2) /* an input's order, dims, "
                  "format or fill differs\n"
                  "                                  from the data compiled "
                  "for */\n\n",
              p->ninputs, pp->noutputs);
  text_printf(&t, "/* The inputs, in declaration order, as the kernels "
                  "expect them (the level\n * formats may be a "
                  "transposition of the data compiled with):\n");
  for (int k = 0; k < p->ninputs; k++) {
    char fmt[256];
    galley_format f;
    (void)aot_input_format(pp, inputs[k], k, &f, NULL);
    galley_format_print(&f, fmt, sizeof fmt);
    text_printf(&t, " *   inputs[%d] ", k);
    text_comment_name(&t, p->inputs[k].name);
    text_printf(&t, ": dims");
    for (int m = 0; m < inputs[k]->order; m++)
      text_printf(&t, " %lld", (long long)inputs[k]->dims[m]);
    text_printf(&t, ", levels %s, fill %.17g", fmt[0] ? fmt : "(scalar)",
                aot_input_fill(pp, inputs[k], k));
    /* the list and bytemap levels the kernels read with 32-bit indices
     * (idx32, pos32, crd32 of galley_rt.h); the others are 64-bit */
    unsigned w = aot_input_widths(pp, inputs[k], k);
    for (int l = 0; l < inputs[k]->order; l++)
      if (w >> l & 1)
        text_printf(&t, l == __builtin_ctz(w) ? ", 32-bit indices: level %d"
                                              : ", %d", l);
    text_printf(&t, "\n");
  }
  text_printf(&t, " * The outputs, new all-dense tensors (free each with "
                  "galley_aot_free):\n");
  for (int k = 0; k < pp->noutputs; k++) {
    text_printf(&t, " *   outputs[%d] ", k);
    text_comment_name(&t, pp->output_names[k]);
    text_printf(&t, "\n");
  }
  text_printf(&t,
              " */\nextern const char *const galley_aot_input_names[];\n"
              "extern const char *const galley_aot_output_names[];\n\n"
              "/* Run the program: 0, GALLEY_AOT_ENOMEM or GALLEY_AOT_EINPUT "
              "(outputs[]\n * are then NULL).  The inputs are only read. */\n"
              "int galley_aot_run(const struct galley_tensor *const *inputs,\n"
              "                   struct galley_tensor **outputs);\n\n"
              "/* Free an output (NULL is fine). */\n"
              "void galley_aot_free(struct galley_tensor *t);\n\n"
              "#endif /* GALLEY_AOT_H */\n");
  galley_status st = text_done(&t, err);
  *text = t.s;
  return st;
}
