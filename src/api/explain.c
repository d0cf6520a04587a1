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
#include "blocks.h"
#include "rt_internal.h"

/* The q-error of an estimate: with e = max(est, 1) and r = max(real, 1),
 * max(e / r, r / e) -- 1 for an exact estimate, symmetric in over- and
 * under-estimation; the clamp makes empty results count as 1 entry. */
static double q_error(double est, int64_t real) {
  double e = est < 1 ? 1 : est, r = real < 1 ? 1 : (double)real;
  return e > r ? e / r : r / e;
}

static galley_status nomem(galley_error *err) {
  return rt_error(err, GALLEY_ENOMEM, "out of memory");
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

/* ------------------------------------------------------------------ */
/* The partition of each kernel's outermost loop into blocks           */
/* ------------------------------------------------------------------ */

/* The name of the tensor access A of plan pp reads. */
static const char *access_name(const PhysPlan *pp, const PAccess *A) {
  return A->is_input ? pp->prog->inputs[A->tensor].name : pp->q[A->tensor].name;
}

/* The tensor access A reads as the executor will, when it exists before
 * the run: a bound input (its finite part when A is split, once made),
 * or a transpose of one kept with it; NULL otherwise (an intermediate,
 * or what the run makes first). */
static const galley_tensor *known_tensor(const galley_program *gp,
                                         const PAccess *A) {
  const PhysPlan *pp = gp->plan;
  if (A->is_input) {
    const galley_tensor *t = gp->bound[A->tensor];
    if (!t || !A->split)
      return t;
    const rt_exceptions *e = rt_tensor_exceptions_kept(t);
    return e ? e->finite : NULL;
  }
  const PhysQuery *src = &pp->q[A->tensor];
  if (src->kind != PQ_TRANSPOSE || !src->acc[0].is_input ||
      src->acc[0].split || !gp->bound[src->acc[0].tensor])
    return NULL;
  return rt_tensor_converted_kept(gp->bound[src->acc[0].tensor],
                                  &src->out_format, src->acc[0].fill);
}

/* What the partition of query q is, for text and JSON: blocks < 0 when
 * it is counted at run time (from access `missing`). */
typedef struct Partition {
  int split;       /* q has an outermost loop that blocks may split */
  int64_t lo, hi;  /* the loop's range */
  int64_t blocks;  /* how many, or -1: counted at run time */
  int missing;     /* blocks < 0: the access not known before the run */
  BlocksHow how;
} Partition;

/* Query n's partition as the executor will make it (blocks.c on the
 * same tensors, with the same limits): it depends on the data only. */
static galley_status partition_of(const galley_program *gp, int n,
                                  Partition *P, galley_error *err) {
  const PhysQuery *q = &gp->plan->q[n];
  *P = (Partition){0, 0, 1, 1, -1, {BLOCKS_COORDINATES, -1, -1, 1}};
  if (q->kind != PQ_KERNEL || q->nloops < 1 || q->part.loop != 0)
    return GALLEY_OK;
  P->split = 1;
  P->hi = q->indices[q->loops[0]].dim;
  const galley_tensor **in = calloc((size_t)q->nacc + 1, sizeof *in);
  if (!in)
    return nomem(err);
  for (int x = 0; x < q->nacc; x++)
    in[x] = known_tensor(gp, &q->acc[x]);
  if (!blocks_known(q, in, &P->missing)) {
    P->blocks = -1;
    free(in);
    return GALLEY_OK;
  }
  double cells = 1;
  for (int m = 0; m < q->nout; m++)
    cells *= (double)q->indices[q->out[m]].dim;
  int64_t work = blocks_unit_work(
      q, gp->block_work > 0 ? gp->block_work : EXEC_BLOCK_WORK, cells);
  ExecBlocks bl = {0};
  int rc = blocks_plan_how(q, in, P->lo, P->hi, work,
                           blocks_max(q, cells, gp->plan->memory_budget,
                                      galley_program_threads(gp)),
                           &bl,
                           &P->how);
  free(in);
  if (rc != 0)
    return nomem(err);
  P->blocks = bl.n;
  blocks_free(&bl);
  return GALLEY_OK;
}

/* How the blocks' results recombine, in words. */
static const char *combine_words(const PhysQuery *q) {
  switch (q->part.combine) {
  case PART_DISJOINT:
    return "each block writes its own points";
  case PART_CONCAT:
    return "the blocks' entries concatenated in block order";
  case PART_REDUCE:
    return "partial results combined by the aggregate in block order";
  }
  return "?";
}

/* "by the entries of A" and the like. */
static void print_measure(const PhysPlan *pp, const PhysQuery *q,
                          const BlocksHow *h, FILE *f) {
  switch (h->measure) {
  case BLOCKS_COORDINATES:
    fputs("by coordinates", f);
    return;
  case BLOCKS_ENTRIES:
    fprintf(f, "by the entries of %s", access_name(pp, &q->acc[h->access]));
    return;
  case BLOCKS_MULTIPLIES:
    fprintf(f, "by the multiplies of %s", access_name(pp, &q->acc[h->access]));
    fprintf(f, " times %s", access_name(pp, &q->acc[h->times]));
    return;
  }
}

/* Every physical query's partition, computed before anything is written
 * (a failure leaves the stream untouched): an array the caller frees. */
static galley_status partitions(const galley_program *gp, Partition **out,
                                galley_error *err) {
  int nq = gp->plan->nq;
  *out = calloc((size_t)nq + 1, sizeof **out);
  if (!*out)
    return nomem(err);
  for (int n = 0; n < nq; n++) {
    galley_status st = partition_of(gp, n, &(*out)[n], err);
    if (st != GALLEY_OK) {
      free(*out);
      *out = NULL;
      return st;
    }
  }
  return GALLEY_OK;
}

/* One line per physical query: how its outermost loop is split into
 * blocks and on how many threads they run. */
static void print_partition(const galley_program *gp, const Partition *parts,
                            FILE *f) {
  const PhysPlan *pp = gp->plan;
  int threads = galley_program_threads(gp);
  int64_t work = gp->block_work > 0 ? gp->block_work : EXEC_BLOCK_WORK;
  fprintf(f, "partition: each outermost loop in blocks of about %lld units "
             "of work, run by up to %d thread%s\n",
          (long long)work, threads, threads == 1 ? "" : "s");
  for (int n = 0; n < pp->nq; n++) {
    const PhysQuery *q = &pp->q[n];
    const Partition *P = &parts[n];
    fprintf(f, "  %s: ", q->name);
    if (!P->split) {
      fputs(q->kind == PQ_TRANSPOSE ? "a transpose, in one piece\n"
                                    : "no loop: one call\n",
            f);
      continue;
    }
    fprintf(f, "loop %s over [%lld, %lld): ", q->indices[q->loops[0]].name,
            (long long)P->lo, (long long)P->hi);
    if (P->blocks < 0) {
      const PAccess *A = &q->acc[P->missing];
      fprintf(f, "blocks counted at run time, from %s%s%s\n",
              A->is_input && A->split ? "the finite part of " : "",
              access_name(pp, A),
              !A->is_input && pp->q[A->tensor].kind == PQ_TRANSPOSE
                  ? " (a transpose the run makes)"
                  : "");
      continue;
    }
    int64_t busy = P->blocks < threads ? P->blocks : threads;
    fprintf(f, "%lld block%s ", (long long)P->blocks,
            P->blocks == 1 ? "" : "s");
    print_measure(pp, q, &P->how, f);
    fprintf(f, " (%lld units) on %lld thread%s", (long long)P->how.work,
            (long long)busy, busy == 1 ? "" : "s");
    if (P->blocks > 1)
      fprintf(f, ", %s", combine_words(q));
    fputc('\n', f);
  }
}

/* The three plans, then the analyze table. */
static void explain_text(const galley_program *gp, FILE *f, int bound,
                         int analyze, const Partition *parts) {
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
  print_partition(gp, parts, f);
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

/* "partition": how physical query k's outermost loop is split (null
 * without a loop; blocks null when they are counted at run time). */
static void json_partition(const galley_program *gp, int k,
                           const Partition *P, FILE *f) {
  const PhysPlan *pp = gp->plan;
  const PhysQuery *q = &pp->q[k];
  fputs(", \"partition\": ", f);
  if (!P->split) {
    fputs("null", f);
    return;
  }
  static const char *const measure[] = {"coordinates", "entries",
                                        "multiplies"};
  int threads = galley_program_threads(gp);
  fputs("{\"loop\": ", f);
  json_string(q->indices[q->loops[0]].name, f);
  fprintf(f, ", \"lo\": %lld, \"hi\": %lld, \"combine\": \"%s\", ",
          (long long)P->lo, (long long)P->hi,
          phys_part_combine_name(q->part.combine));
  if (P->blocks < 0) {
    fputs("\"blocks\": null, \"from\": ", f);
    json_string(access_name(pp, &q->acc[P->missing]), f);
    fputs("}", f);
    return;
  }
  fprintf(f, "\"blocks\": %lld, \"measure\": \"%s\", \"of\": ",
          (long long)P->blocks, measure[P->how.measure]);
  if (P->how.access >= 0)
    json_string(access_name(pp, &q->acc[P->how.access]), f);
  else
    fputs("null", f);
  fputs(", \"times\": ", f);
  if (P->how.times >= 0)
    json_string(access_name(pp, &q->acc[P->how.times]), f);
  else
    fputs("null", f);
  fprintf(f, ", \"work\": %lld, \"threads\": %lld}",
          (long long)P->how.work,
          (long long)(P->blocks < threads ? P->blocks : threads));
}

/* The queries of one level as a JSON array. */
static galley_status json_queries(const galley_program *gp,
                                  galley_plan_level level, int analyze,
                                  const Partition *parts, FILE *f,
                                  galley_error *err) {
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
    if (level == GALLEY_PLAN_PHYSICAL && parts)
      json_partition(gp, k, &parts[k], f);
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
                                  int bound, int analyze,
                                  const Partition *parts, galley_error *err) {
  galley_status st = json_head(gp, f, err);
  if (st == GALLEY_OK && !bound)
    fputs(",\n  \"logical_plan\": null,\n  \"physical_plan\": null", f);
  if (st == GALLEY_OK && bound) {
    fputs(",\n  \"logical_plan\": ", f);
    st = json_queries(gp, GALLEY_PLAN_LOGICAL, 0, NULL, f, err);
  }
  if (st == GALLEY_OK && bound) {
    fputs(",\n  \"physical_plan\": ", f);
    st = json_queries(gp, GALLEY_PLAN_PHYSICAL, analyze, parts, f, err);
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
      fputs(acc->proto[l] == PROTO_LOOKUP ? "::lu"
            : acc->proto[l] == PROTO_MARK ? "::mk"
                                          : "::it",
            f);
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
  Partition *parts = NULL;
  if (bound && !(flags & (GALLEY_EXPLAIN_DOT | GALLEY_EXPLAIN_C)) &&
      (st = partitions(p, &parts, err)) != GALLEY_OK)
    return st;
  if (flags & GALLEY_EXPLAIN_JSON)
    st = explain_json(p, f, bound, analyze, parts, err);
  else if (flags & GALLEY_EXPLAIN_C)
    fputs(galley_program_source(p), f);
  else if (flags & GALLEY_EXPLAIN_DOT)
    explain_dot(p, f, analyze);
  else
    explain_text(p, f, bound, analyze, parts);
  free(parts);
  return st;
}
