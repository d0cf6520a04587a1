/*
 * explain.c -- galley_program_explain: the plans of a program and their
 * estimates, as text (what `galleyc explain` prints), as one JSON object,
 * or as a Graphviz digraph of the physical plan; with ANALYZE, after
 * running the program, also the real sizes, the times and the q-errors.
 *
 * The text and JSON forms are pinned by tests/test_run.sh and described
 * in galleyc(1); the DOT form by tests/test_cli.sh and tests/test_api.c.
 * Everything is planned (and run) before the first byte is written, so a
 * failure leaves the stream untouched.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "rt_internal.h"

/* The q-error of an estimate: with e = max(est, 1) and r = max(real, 1),
 * max(e / r, r / e) -- 1 for an exact estimate, symmetric in over- and
 * under-estimation; the clamp makes empty results count as 1 entry. */
static double q_error(double est, int64_t real) {
  double e = est < 1 ? 1 : est, r = real < 1 ? 1 : (double)real;
  return e > r ? e / r : r / e;
}

/* The last run's numbers for physical query k (name): query k of the run,
 * or with the reference backend (which runs the program's queries, not
 * the plan) the program query of that name; 0 when there is none. */
static int actual_for(const galley_program *gp, int k, const char *name,
                      galley_query_info *qi) {
  galley_run_info info;
  galley_program_run_info(gp, &info);
  if (info.backend != GALLEY_BACKEND_REFERENCE)
    return galley_program_query_info(gp, k, qi, NULL) == GALLEY_OK;
  for (int n = 0; n < info.nqueries; n++)
    if (galley_program_query_info(gp, n, qi, NULL) == GALLEY_OK &&
        strcmp(qi->name, name) == 0)
      return 1;
  return 0;
}

/* ------------------------------------------------------------------ */
/* Text                                                                */
/* ------------------------------------------------------------------ */

/* One row of the analyze table. */
static void print_analyze_row(const galley_program *gp, int k, FILE *f) {
  galley_plan_query pq;
  galley_query_info qi;
  if (galley_program_plan_query(gp, GALLEY_PLAN_PHYSICAL, k, &pq, NULL) !=
      GALLEY_OK)
    return;
  int have = actual_for(gp, k, pq.name, &qi);
  char est[32] = "-", real[32] = "-", time[32] = "-", qe[32] = "-";
  if (pq.est_nnz >= 0)
    snprintf(est, sizeof est, "%.6g", pq.est_nnz);
  if (have)
    snprintf(real, sizeof real, "%lld", (long long)qi.nnz);
  if (have && qi.seconds >= 0)
    snprintf(time, sizeof time, "%.3f ms", 1e3 * qi.seconds);
  if (have && pq.est_nnz >= 0)
    snprintf(qe, sizeof qe, "%.3g", q_error(pq.est_nnz, qi.nnz));
  fprintf(f, "  %-12s %12s %12s %12s %10s\n", pq.name, est, real, time, qe);
}

/* ANALYZE: the run's phases, then per physical query the estimate, the
 * real nnz, the time and the q-error. */
static void print_analyze(const galley_program *gp, FILE *f) {
  galley_run_info info;
  galley_program_run_info(gp, &info);
  if (info.backend == GALLEY_BACKEND_REFERENCE)
    fprintf(f, "analyze: backend reference, ran in %.3f ms (the program's "
               "queries, not the plan: no times)\n",
            1e3 * info.exec_seconds);
  else
    fprintf(f, "analyze: backend %s, planned in %.3f ms, compiled in %.3f "
               "ms, ran in %.3f ms\n",
            galley_backend_name(info.backend), 1e3 * info.plan_seconds,
            1e3 * info.compile_seconds, 1e3 * info.exec_seconds);
  if (info.replanned && gp->replan_reason[0])
    fprintf(f, "analyze: re-planned: %s\n", gp->replan_reason);
  api_print_adaptive(gp, f);
  fprintf(f, "  %-12s %12s %12s %12s %10s\n", "query", "est nnz",
          "real nnz", "time", "q-error");
  int n = galley_program_plan_num_queries(gp, GALLEY_PLAN_PHYSICAL);
  for (int k = 0; k < n; k++)
    print_analyze_row(gp, k, f);
}

/* The three plans, then the analyze table. */
static void explain_text(const galley_program *gp, FILE *f, int bound,
                         int analyze) {
  fprintf(f, "input plan:\n");
  galley_program_print_plan(gp, f);
  if (!bound)
    return;
  fprintf(f, "logical plan:\n");
  if (galley_program_plan_num_queries(gp, GALLEY_PLAN_LOGICAL) == 0)
    fprintf(f, "(none: the simple planner makes no logical plan)\n");
  else
    logical_print(gp->lplan, f);
  fprintf(f, "physical plan:\n");
  phys_print(gp->plan, f);
  phys_print_notes(gp->plan, f);
  if (analyze)
    print_analyze(gp, f);
}

/* ------------------------------------------------------------------ */
/* JSON                                                                */
/* ------------------------------------------------------------------ */

/* s as a JSON string: quotes, backslashes and control characters
 * escaped (other bytes, UTF-8 included, pass through). */
static void json_string(const char *s, FILE *f) {
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)s; c && *c; c++) {
    if (*c == '"' || *c == '\\')
      fprintf(f, "\\%c", *c);
    else if (*c == '\n')
      fputs("\\n", f);
    else if (*c == '\t')
      fputs("\\t", f);
    else if (*c < 0x20 || *c == 0x7f)
      fprintf(f, "\\u%04x", *c);
    else
      fputc(*c, f);
  }
  fputc('"', f);
}

/* A number, or null when it is unknown (negative) or not finite. */
static void json_number(double v, FILE *f) {
  if (!isfinite(v) || v < 0)
    fputs("null", f);
  else
    fprintf(f, "%.17g", v);
}

/* What a print call writes, in a malloc()ed string. */
typedef struct Captured {
  char *text;
  size_t len;
  FILE *f;
} Captured;

static FILE *capture_begin(Captured *c) {
  c->text = NULL;
  c->len = 0;
  c->f = open_memstream(&c->text, &c->len);
  return c->f;
}

/* The text, or NULL when memory ran out. */
static char *capture_end(Captured *c) {
  if (!c->f || fclose(c->f) != 0) {
    free(c->text);
    return NULL;
  }
  return c->text;
}

static galley_status nomem(galley_error *err) {
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
}

/* "plan": query k's text at that level. */
static galley_status json_plan_text(const galley_program *gp,
                                    galley_plan_level level, int k, FILE *f,
                                    galley_error *err) {
  Captured c;
  FILE *m = capture_begin(&c);
  if (m)
    galley_program_print_plan_query(gp, level, k, m, NULL);
  char *text = capture_end(&c);
  if (!text)
    return nomem(err);
  fputs("\"plan\": ", f);
  json_string(text, f);
  free(text);
  return GALLEY_OK;
}

/* ANALYZE's fields of physical query k. */
static void json_actual(const galley_program *gp, int k,
                        const galley_plan_query *pq, FILE *f) {
  galley_query_info qi;
  if (!actual_for(gp, k, pq->name, &qi)) {
    fputs(", \"nnz\": null, \"stored\": null, \"seconds\": null, "
          "\"q_error\": null", f);
    return;
  }
  fprintf(f, ", \"nnz\": %lld, \"stored\": %lld, \"seconds\": ",
          (long long)qi.nnz, (long long)qi.stored);
  json_number(qi.seconds, f);
  fputs(", \"q_error\": ", f);
  json_number(pq->est_nnz >= 0 ? q_error(pq->est_nnz, qi.nnz) : -1, f);
}

/* The queries of one level as a JSON array. */
static galley_status json_queries(const galley_program *gp,
                                  galley_plan_level level, int analyze,
                                  FILE *f, galley_error *err) {
  int n = galley_program_plan_num_queries(gp, level);
  fputs("[", f);
  for (int k = 0; k < n; k++) {
    galley_plan_query pq;
    galley_status st = galley_program_plan_query(gp, level, k, &pq, err);
    if (st != GALLEY_OK)
      return st;
    fputs(k ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
    json_string(pq.name, f);
    fputs(", ", f);
    if ((st = json_plan_text(gp, level, k, f, err)) != GALLEY_OK)
      return st;
    if (level == GALLEY_PLAN_PHYSICAL)
      fprintf(f, ", \"transpose\": %s", pq.transpose ? "true" : "false");
    fputs(", \"est_nnz\": ", f);
    json_number(pq.est_nnz, f);
    fputs(", \"cost\": ", f);
    json_number(pq.cost, f);
    if (analyze)
      json_actual(gp, k, &pq, f);
    fputs("}", f);
  }
  fputs(n ? "\n  ]" : "]", f);
  return GALLEY_OK;
}

/* "analyze": the run's backend and phase times. */
static void json_run(const galley_program *gp, FILE *f) {
  galley_run_info info;
  galley_program_run_info(gp, &info);
  fputs(",\n  \"analyze\": {\"backend\": ", f);
  json_string(galley_backend_name(info.backend), f);
  fputs(", \"plan_seconds\": ", f);
  json_number(info.plan_seconds, f);
  fputs(", \"compile_seconds\": ", f);
  json_number(info.compile_seconds, f);
  fputs(", \"exec_seconds\": ", f);
  json_number(info.exec_seconds, f);
  fputs("}", f);
}

/* The head: program, planning options, input plan, outputs. */
static galley_status json_head(const galley_program *gp, FILE *f,
                               galley_error *err) {
  Captured c;
  FILE *m = capture_begin(&c);
  if (m)
    galley_program_print_plan(gp, m);
  char *text = capture_end(&c);
  if (!text)
    return nomem(err);
  fputs("{\n  \"program\": ", f);
  json_string(gp->prog->filename, f);
  fprintf(f, ",\n  \"planner\": \"%s\", \"estimator\": \"%s\", "
             "\"search\": \"%s\",\n  \"input_plan\": ",
          api_planner_name(gp->planner), api_estimator_name(gp->estimator),
          api_search_name(gp->search));
  json_string(text, f);
  free(text);
  fputs(",\n  \"outputs\": [", f);
  for (int k = 0; k < galley_program_num_outputs(gp); k++) {
    fputs(k ? ", " : "", f);
    json_string(galley_program_output_name(gp, k), f);
  }
  fputs("]", f);
  return GALLEY_OK;
}

/* The JSON form (documented in galleyc(1)); the plans are null when the
 * inputs are not all bound. */
static galley_status explain_json(const galley_program *gp, FILE *f,
                                  int bound, int analyze, galley_error *err) {
  galley_status st = json_head(gp, f, err);
  if (st == GALLEY_OK && !bound)
    fputs(",\n  \"logical_plan\": null,\n  \"physical_plan\": null", f);
  if (st == GALLEY_OK && bound) {
    fputs(",\n  \"logical_plan\": ", f);
    st = json_queries(gp, GALLEY_PLAN_LOGICAL, 0, f, err);
  }
  if (st == GALLEY_OK && bound) {
    fputs(",\n  \"physical_plan\": ", f);
    st = json_queries(gp, GALLEY_PLAN_PHYSICAL, analyze, f, err);
  }
  if (st == GALLEY_OK && analyze)
    json_run(gp, f);
  if (st == GALLEY_OK)
    fputs("\n}\n", f);
  return st;
}

/* ------------------------------------------------------------------ */
/* Graphviz                                                            */
/* ------------------------------------------------------------------ */

/* Text inside a DOT double-quoted string: quotes and backslashes
 * escaped, control characters dropped. */
static void dot_text(const char *s, FILE *f) {
  for (const unsigned char *c = (const unsigned char *)s; c && *c; c++) {
    if (*c == '"' || *c == '\\')
      fputc('\\', f);
    if (*c >= 0x20 && *c != 0x7f)
      fputc(*c, f);
  }
}


/* A result format as galley_format_print writes it ("scalar" for none). */
static void dot_format(const galley_format *fmt, FILE *f) {
  char buf[256];
  galley_format_print(fmt, buf, sizeof buf);
  fputs(fmt->order ? buf : "scalar", f);
}

/* A bound input: its name, dims, format and nnz (as planned for). */
static void dot_input(const galley_program *gp, int k, FILE *f) {
  const galley_tensor *t = gp->bound[k];
  galley_format fmt;
  galley_tensor_format(t, &fmt);
  fprintf(f, "  in%d [shape=box, label=\"input ", k);
  dot_text(gp->prog->inputs[k].name, f);
  fputs("\\n", f);
  for (int m = 0; m < galley_tensor_order(t); m++)
    fprintf(f, "%s%lld", m ? " x " : "", (long long)galley_tensor_dim(t, m));
  fputs(galley_tensor_order(t) ? ", " : "", f);
  dot_format(&fmt, f);
  fprintf(f, "\\nnnz %lld\"];\n", (long long)gp->key[k].nnz);
}

/* The program output that physical query n computes, or NULL. */
static const char *output_of(const PhysPlan *pp, int n) {
  for (int k = 0; k < pp->noutputs; k++)
    if (pp->outputs[k] == n)
      return pp->output_names[k];
  return NULL;
}

/* A physical query: name, kind, loops, result format, estimate, and with
 * ANALYZE the real nnz and time; an output has a double border. */
static void dot_query(const galley_program *gp, int n, int analyze,
                      FILE *f) {
  const PhysQuery *q = &gp->plan->q[n];
  const char *output = output_of(gp->plan, n);
  fprintf(f, "  q%d [shape=box, style=rounded%s, label=\"", n,
          output ? ", peripheries=2" : "");
  dot_text(q->name, f);
  if (output && strcmp(output, q->name) != 0) {
    fputs(" (output ", f);
    dot_text(output, f);
    fputs(")", f);
  } else if (output) {
    fputs(" (output)", f);
  }
  if (q->kind == PQ_TRANSPOSE) {
    fputs("\\ntranspose", f);
  } else {
    fputs(q->nloops ? "\\nloops" : "\\nno loops", f);
    for (int d = 0; d < q->nloops; d++) {
      fputs(d ? ", " : " ", f);
      dot_text(q->indices[q->loops[d]].name, f);
      fprintf(f, ":%s", phys_merge_name(q->merge[d]));
    }
    int ws = phys_workspace_kind(q);
    if (ws >= 0)
      fprintf(f, "\\nscatter through a %s workspace",
              galley_level_kind_name((galley_level_kind)ws));
  }
  fputs("\\nresult ", f);
  dot_format(&q->out_format, f);
  if (q->has_est)
    fprintf(f, "\\nest nnz %.6g", q->est_nnz);
  galley_query_info qi;
  if (analyze && actual_for(gp, n, q->name, &qi)) {
    fprintf(f, "\\nreal nnz %lld", (long long)qi.nnz);
    if (qi.seconds >= 0)
      fprintf(f, ", %.3f ms", 1e3 * qi.seconds);
  }
  fputs("\"];\n", f);
}

/* The edges into query n: one per access, labelled with the indices it
 * reads at each storage level and how ("it" iterate, "lu" look up). */
static void dot_edges(const PhysPlan *pp, int n, FILE *f) {
  const PhysQuery *q = &pp->q[n];
  for (int a = 0; a < q->nacc; a++) {
    const PAccess *acc = &q->acc[a];
    fprintf(f, "  %s%d -> q%d", acc->is_input ? "in" : "q", acc->tensor, n);
    for (int l = 0; l < acc->order; l++) {
      fputs(l ? "," : " [label=\"", f);
      dot_text(q->indices[acc->level_idx[l]].name, f);
      fputs(acc->proto[l] == PROTO_LOOKUP ? "::lu" : "::it", f);
    }
    fputs(acc->order ? "\"];\n" : ";\n", f);
  }
}

/* The physical plan as a Graphviz digraph. */
static void explain_dot(const galley_program *gp, FILE *f, int analyze) {
  const PhysPlan *pp = gp->plan;
  fputs("digraph \"", f);
  dot_text(gp->prog->filename, f);
  fputs("\" {\n  node [fontname=\"monospace\", fontsize=10];\n"
        "  edge [fontname=\"monospace\", fontsize=9];\n", f);
  for (int k = 0; k < gp->prog->ninputs; k++)
    dot_input(gp, k, f);
  for (int n = 0; n < pp->nq; n++)
    dot_query(gp, n, analyze, f);
  for (int n = 0; n < pp->nq; n++)
    dot_edges(pp, n, f);
  fputs("}\n", f);
}

/* ------------------------------------------------------------------ */
/* The entry point                                                     */
/* ------------------------------------------------------------------ */

static int all_bound(const galley_program *gp) {
  for (int k = 0; k < gp->prog->ninputs; k++)
    if (!gp->bound[k])
      return 0;
  return 1;
}

galley_status galley_program_explain(galley_program *p, FILE *f,
                                     unsigned flags, galley_error *err) {
  const unsigned known = GALLEY_EXPLAIN_JSON | GALLEY_EXPLAIN_ANALYZE |
                         GALLEY_EXPLAIN_DOT | GALLEY_EXPLAIN_C;
  const unsigned forms = GALLEY_EXPLAIN_JSON | GALLEY_EXPLAIN_DOT |
                         GALLEY_EXPLAIN_C;
  rt_error_clear(err);
  if (!p || !f)
    return rt_error(err, GALLEY_EINVAL, "galley_program_explain: %s is NULL",
                    p ? "the stream" : "the program");
  if (flags & ~known)
    return rt_error(err, GALLEY_EINVAL,
                    "galley_program_explain: unknown flags 0x%x",
                    flags & ~known);
  if ((flags & forms) & ((flags & forms) - 1)) /* two or more bits */
    return rt_error(err, GALLEY_EINVAL, "galley_program_explain: JSON, DOT "
                    "and C are different forms: choose one");
  int analyze = (flags & GALLEY_EXPLAIN_ANALYZE) != 0;
  int bound = all_bound(p);
  galley_status st = GALLEY_OK;
  if (analyze)
    st = galley_program_run(p, err);
  /* DOT and C need the plan: planning with an input unbound says which */
  if (st == GALLEY_OK &&
      (bound || (flags & (GALLEY_EXPLAIN_DOT | GALLEY_EXPLAIN_C))))
    st = api_ensure_plan(p, NULL, err);
  if (st != GALLEY_OK)
    return st;
  if (flags & GALLEY_EXPLAIN_JSON)
    return explain_json(p, f, bound, analyze, err);
  if (flags & GALLEY_EXPLAIN_C)
    fputs(galley_program_source(p), f);
  else if (flags & GALLEY_EXPLAIN_DOT)
    explain_dot(p, f, analyze);
  else
    explain_text(p, f, bound, analyze);
  return GALLEY_OK;
}
