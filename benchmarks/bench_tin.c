/*
 * bench_tin.c -- times one .tin program through the program API
 * (galley.h): optimization, planning, compilation and execution reported
 * separately.  Built by `make benchmarks`; run by `benchmarks/run subgraph`
 * and `benchmarks/run tpch`.
 *
 *   bench_tin [-r REPS] [-c CAP_MS] [-b BACKEND] [-D DIR] [-F NAME=FORMAT]
 *             [-w OUTDIR] [-l LABEL] [-n] PROG.tin [NAME=FILE ...]
 *
 * Each declared input NAME is read from the FILE given as NAME=FILE, else
 * from DIR/NAME.tns, DIR/NAME.mtx (or the same with .gz), in the default
 * format of its order unless -F NAME=FORMAT (galley_format_parse syntax,
 * e.g. "dense,dense") says otherwise.  Loading is not timed.  Then:
 *   opt      logical_optimize + physical_optimize on the parsed program
 *            with the bound inputs (as bench_opt measures it: the
 *            optimizer alone, default estimator and search; repeated until
 *            20 ms are spent, mean);
 *   cold     galley_program_run on a fresh program: plan (optimizer +
 *            code generation), compile (BACKEND: tcc or clang, default
 *            tcc; clang into a private cache under $TMPDIR, removed after),
 *            first execution;
 *   reps     up to REPS (default 5) reused runs (same plan and kernels),
 *            stopping once CAP_MS (default 60000) of execution is spent;
 *            when the cold execution alone took more than CAP_MS / 2, it
 *            is the only sample (note "cold exec only").
 * One CSV line:
 *
 *   tool,workload,status,reps,median_ms,p90_ms,max_ms,opt_ms,plan_ms,
 *   compile_ms,first_ms,result,note
 *
 * tool = galleyc-BACKEND, workload = LABEL (default the program's base
 * name), status ok or error, result = the value of the first output when
 * it is a scalar, else the sum of all its entries (fills included).  With
 * -w every output is also written to OUTDIR/NAME.tns (for the baselines'
 * element-wise checks).  The physical plan goes to stderr.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "benchutil.h"
#include "galley.h"
#include "ir.h"
#include "logical.h"

#define MAXIN 64

typedef struct Bind {
  char name[128];
  const char *value;
} Bind;

static Bind binds[MAXIN], formats[MAXIN];
static int nbinds, nformats;

static int add_pair(Bind *tab, int *n, const char *arg) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg || eq - arg >= 128 || *n >= MAXIN)
    return -1;
  memcpy(tab[*n].name, arg, (size_t)(eq - arg));
  tab[*n].name[eq - arg] = 0;
  tab[*n].value = eq + 1;
  (*n)++;
  return 0;
}

static const char *lookup(const Bind *tab, int n, const char *name) {
  for (int k = 0; k < n; k++)
    if (!strcmp(tab[k].name, name))
      return tab[k].value;
  return NULL;
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *s = malloc(cap);
  size_t r;
  while (s && (r = fread(s + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (cap - n < 2)
      s = realloc(s, cap *= 2);
  }
  fclose(f);
  if (s)
    s[n] = 0;
  *len = n;
  return s;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  return remove(path);
}

typedef struct SumState {
  double sum;
} SumState;

static int add_entry(void *ud, const int64_t *coord, double value) {
  ((SumState *)ud)->sum += value;
  return 0;
}

static double result_value(const galley_tensor *t) {
  if (galley_tensor_order(t) == 0)
    return galley_tensor_get(t, NULL, NULL);
  SumState s = {0};
  galley_tensor_foreach(t, add_entry, &s);
  double total = 1;
  for (int m = 0; m < galley_tensor_order(t); m++)
    total *= (double)galley_tensor_dim(t, m);
  double fill = galley_tensor_fill(t);
  if (fill != 0)
    s.sum += fill * (total - (double)galley_tensor_stored(t));
  return s.sum;
}

static double pct(double *v, int n, double q) {
  /* nearest-rank percentile of a sorted array */
  int k = (int)ceil(q * n) - 1;
  return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static void line(const char *tool, const char *wl, const char *status,
                 double *ms, int reps, double opt, double plan, double comp,
                 double first, double result, const char *note) {
  char nb[1300];
  clean(note, nb, sizeof nb);
  if (reps > 0) {
    qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
    double med = reps % 2 ? ms[reps / 2] : (ms[reps / 2 - 1] + ms[reps / 2]) / 2;
    printf("%s,%s,%s,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.17g,%s\n", tool,
           wl, status, reps, med, pct(ms, reps, 0.9), ms[reps - 1], opt, plan,
           comp, first, result, nb);
  } else {
    printf("%s,%s,%s,0,,,,", tool, wl, status);
    printf(isnan(opt) ? "," : "%.3f,", opt);
    printf(",,,,%s\n", nb);
  }
  fflush(stdout);
}

static void usage(FILE *f) {
  fprintf(f, "usage: bench_tin [-r REPS] [-c CAP_MS] [-b BACKEND] [-D DIR] "
             "[-F NAME=FORMAT] [-w OUTDIR] [-l LABEL] [-n] PROG.tin "
             "[NAME=FILE ...]\n");
}

int main(int argc, char **argv) {
  int reps = 5, header = 1, c;
  double cap = 60000;
  const char *backend_name = "tcc", *dir = NULL, *outdir = NULL, *label = NULL;
  while ((c = getopt(argc, argv, "r:c:b:D:F:w:l:nh")) != -1) {
    switch (c) {
    case 'r': reps = atoi(optarg); break;
    case 'c': cap = atof(optarg); break;
    case 'b': backend_name = optarg; break;
    case 'D': dir = optarg; break;
    case 'F':
      if (add_pair(formats, &nformats, optarg)) {
        usage(stderr);
        return 2;
      }
      break;
    case 'w': outdir = optarg; break;
    case 'l': label = optarg; break;
    case 'n': header = 0; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (reps < 1 || reps > 1000 || optind >= argc) {
    usage(stderr);
    return 2;
  }
  const char *path = argv[optind++];
  for (; optind < argc; optind++)
    if (add_pair(binds, &nbinds, argv[optind])) {
      usage(stderr);
      return 2;
    }
  if (!label) {
    static char lb[256];
    snprintf(lb, sizeof lb, "%s", base_name(path));
    char *dot = strrchr(lb, '.');
    if (dot)
      *dot = 0;
    label = lb;
  }
  galley_error err;
  galley_backend backend;
  if (galley_backend_parse(backend_name, &backend, &err) != GALLEY_OK) {
    fprintf(stderr, "bench_tin: %s\n", err.msg);
    return 2;
  }
  char tool[64];
  snprintf(tool, sizeof tool, "galleyc-%s", backend_name);
  if (header)
    printf("tool,workload,status,reps,median_ms,p90_ms,max_ms,opt_ms,plan_ms,"
           "compile_ms,first_ms,result,note\n");

  size_t len = 0;
  char *src = slurp(path, &len);
  galley_program *p = NULL;
  char note[1200];
  if (!src || galley_program_parse(path, src, len, &p, NULL, &err)) {
    snprintf(note, sizeof note, "error: %s", src ? err.msg : "unreadable");
    line(tool, label, "error", NULL, 0, NAN, 0, 0, 0, 0, note);
    return 1;
  }
  /* inputs */
  int nin = galley_program_num_inputs(p);
  galley_tensor *in[MAXIN] = {0};
  for (int k = 0; k < nin && k < MAXIN; k++) {
    const char *name = galley_program_input_name(p, k);
    const char *file = lookup(binds, nbinds, name);
    char buf[4096];
    if (!file && dir) {
      static const char *ext[] = {".tns", ".mtx", ".tns.gz", ".mtx.gz"};
      for (int e = 0; e < 4 && !file; e++) {
        snprintf(buf, sizeof buf, "%s/%s%s", dir, name, ext[e]);
        if (access(buf, R_OK) == 0)
          file = buf;
      }
    }
    if (!file) {
      snprintf(note, sizeof note, "error: no file for input %s", name);
      line(tool, label, "error", NULL, 0, NAN, 0, 0, 0, 0, note);
      return 1;
    }
    const char *ftext = lookup(formats, nformats, name);
    galley_format fmt;
    if (ftext && galley_format_parse(ftext, galley_program_input_order(p, k),
                                     &fmt, &err)) {
      fprintf(stderr, "bench_tin: -F %s: %s\n", name, err.msg);
      return 2;
    }
    if (galley_tensor_read(file, GALLEY_FILE_AUTO, ftext ? &fmt : NULL, &in[k],
                           &err) ||
        galley_program_bind(p, name, in[k], &err)) {
      snprintf(note, sizeof note, "error: %s", err.msg);
      line(tool, label, "error", NULL, 0, NAN, 0, 0, 0, 0, note);
      return 1;
    }
  }
  /* optimizer time, as bench_opt measures it */
  double opt_ms = NAN;
  {
    Program *prog = NULL;
    if (front_parse(path, src, len, &prog, NULL, &err) == GALLEY_OK) {
      OptOptions o = opt_defaults();
      double t0 = now_ms(), t;
      int n = 0, ok = 1;
      do {
        LogicalPlan *lp = NULL;
        PhysPlan *pp = NULL;
        ok = logical_optimize(prog, (const galley_tensor *const *)in, &o, &lp,
                              &err) == GALLEY_OK &&
             physical_optimize(lp, (const galley_tensor *const *)in, &o, &pp,
                               &err) == GALLEY_OK;
        logical_plan_free(lp);
        phys_plan_free(pp);
        n++;
        t = now_ms() - t0;
      } while (ok && t < 20 && n < 1000);
      if (ok)
        opt_ms = t / n;
      program_free(prog);
    }
  }
  /* cold run */
  char cache[4096] = "";
  if (backend == GALLEY_BACKEND_CLANG) {
    const char *tmp = getenv("TMPDIR");
    snprintf(cache, sizeof cache, "%s/galley-bench-cache.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(cache) || galley_program_set_cache_dir(p, cache, &err)) {
      perror("bench_tin: cache directory");
      return 1;
    }
  }
  int status = 0;
  if (galley_program_set_backend(p, backend, &err) ||
      galley_program_run(p, &err)) {
    snprintf(note, sizeof note, "error: %s", err.msg);
    fprintf(stderr, "bench_tin: %s: %s\n", label, err.msg);
    line(tool, label, "error", NULL, 0, opt_ms, 0, 0, 0, 0, note);
    status = 1;
    goto done;
  }
  galley_run_info ri;
  galley_program_run_info(p, &ri);
  fprintf(stderr, "== %s %s: physical plan\n", label, tool);
  galley_program_print_physical_plan(p, stderr, NULL);
  double plan = ri.plan_seconds * 1e3, comp = ri.compile_seconds * 1e3,
         first = ri.exec_seconds * 1e3;
  double *ms = calloc((size_t)reps + 1, sizeof *ms);
  int n = 0, reused = 1;
  const char *how = "";
  if (first > cap / 2) {
    ms[n++] = first;
    how = "; cold exec only";
  } else {
    double spent = 0;
    while (n < reps && spent <= cap) {
      if (galley_program_run(p, &err)) {
        snprintf(note, sizeof note, "error: timed run: %s", err.msg);
        line(tool, label, "error", NULL, 0, opt_ms, 0, 0, 0, 0, note);
        status = 1;
        goto done;
      }
      galley_program_run_info(p, &ri);
      reused &= ri.reused;
      ms[n] = ri.exec_seconds * 1e3;
      spent += ms[n++];
    }
  }
  double result = result_value(galley_program_output(p, 0));
  int written = 0;
  for (int k = 0; outdir && k < galley_program_num_outputs(p); k++) {
    char out[4096];
    snprintf(out, sizeof out, "%s/%s.tns", outdir,
             galley_program_output_name(p, k));
    if (galley_tensor_write(galley_program_output(p, k), out, GALLEY_FILE_AUTO,
                            &err) == GALLEY_OK)
      written++;
    else
      fprintf(stderr, "bench_tin: %s\n", err.msg);
  }
  snprintf(note, sizeof note, "%d queries%s%s; outputs %d%s",
           ri.nqueries, how, reused ? "" : "; NOT reused",
           galley_program_num_outputs(p),
           outdir ? (written == galley_program_num_outputs(p) ? " written"
                                                               : " NOT written")
                  : "");
  line(tool, label, "ok", ms, n, opt_ms, plan, comp, first, result, note);
  free(ms);
done:
  galley_program_free(p);
  for (int k = 0; k < nin && k < MAXIN; k++)
    galley_tensor_free(in[k]);
  free(src);
  if (cache[0])
    nftw(cache, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return status;
}
