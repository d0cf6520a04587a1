/*
 * galleyc.c -- the galleyc command.
 *
 * Subcommands: `info` (load a tensor file and describe it), `convert`
 * (load, change format, write), `run` (a .tin program planned, compiled
 * to kernels and run, or through the reference evaluator; results written
 * as .tns files), `explain` (the input plan and, with data, the logical
 * and physical plans with their estimates; --analyze runs them and adds
 * the real sizes, times and q-errors; --json, --dot: all printed by the
 * library's galley_program_explain) and `compile` (ahead of time: one C
 * file with the kernels and a driver, and its header).  `galleyc CMD
 * --help` prints one command's usage and options.
 *
 * Exit status: 0 success, 1 program error (.tin), 2 usage error, 3 data
 * or resource error (unreadable or malformed file, bad format, out of
 * memory), 4 internal error.  The same table is in --help and
 * man/galleyc.1.  Messages (msg.c) start "galleyc: error: " or
 * "FILE:LINE[:COL]: error: "; results are staged and renamed all or none
 * (stage.c).
 */
#define _GNU_SOURCE /* open_memstream in older glibc headers */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "galley.h"
#ifdef GALLEY_MPI
#include "dist_cli.h" /* under mpirun: src/dist (issue 15) */
#else
typedef struct DistCli DistCli;
#endif

/* ---- help: `galleyc --help` lists everything, `galleyc CMD --help`
 * (or `galleyc help CMD`) one command; the pieces they share are macros
 * so that the texts cannot drift apart. ---- */

#define HELP_FORMAT                                                           \
  "  --format=FMT  storage format, one level kind per mode, outermost first:\n" \
  "                dense|d, list|s, hash|h, bytemap|b, each optionally with\n" \
  "                :MODE for the logical mode it stores, e.g. dense:1,list:0\n" \
  "                (CSC).  Default: dense then sorted lists (CSR/CSF);\n" \
  "                all lists when hypersparse (over 16 rows per entry).\n"

#define HELP_PLANNING                                                         \
  "  --planner=P   cost (the default: the cost-based optimizer) or simple\n" \
  "                (the plain planner, no estimates)\n"                       \
  "  --estimator=E the cost-based planner's sparsity estimator: chain (the\n" \
  "                default: chain bound over degree statistics) or uniform\n" \
  "  --search=S    its elimination-order search: greedy (the default) or\n" \
  "                exact (branch and bound, bounded by the greedy cost)\n" \
  "  --memory-budget=BYTES  no dense intermediate over it is planned, and\n" \
  "                a run refuses a result or workspace over it before\n"    \
  "                allocating (K, M, G suffixes; default 0: half the\n"     \
  "                physical memory)\n"

#define HELP_THREADS                                                          \
  "  --threads=N   run kernels on N threads (default: $GALLEY_THREADS, else\n" \
  "                the online processors); results are bitwise the same\n"  \
  "                for every N\n"

#define HELP_BACKEND                                                          \
  "  --backend=B   compile kernels with tcc (fast to compile), clang (-O3,\n"  \
  "                cached on disk), or run the reference evaluator\n"        \
  "                instead (reference); default: clang's code when\n"      \
  "                cached, else tcc's while clang compiles in the\n"         \
  "                background (-v says whose code ran)\n"                    \
  "  --cache-dir=DIR  the clang backend's kernel cache (default:\n"          \
  "                $GALLEY_CACHE_DIR, else ~/.cache/galleyc)\n"

#define HELP_HELP "  -h, --help    print this help and exit\n"

#define HELP_EXIT                                                             \
  "\n"                                                                        \
  "Exit status:\n"                                                            \
  "  0  success\n"                                                            \
  "  1  program error: a malformed or meaningless .tin program\n"           \
  "  2  usage error: unknown command or option, missing argument, a\n"      \
  "     binding for a name that is not an input, an input bound twice\n"    \
  "  3  data or resource error: a file that cannot be read or written, a\n" \
  "     malformed file or format, an unbound input, data that does not\n"   \
  "     fit the program, a plan the ahead-of-time driver does not\n"       \
  "     support, out of memory\n"                                          \
  "  4  internal error, or a kernel that failed to compile\n"               \
  "  130, 143  interrupted by SIGINT or SIGTERM (nothing written)\n"

static const char *usage_text =
    "usage: galleyc info FILE [--format=FMT] [--stats] [-v]\n"
    "       galleyc convert IN OUT [--format=FMT]\n"
    "       galleyc run PROG.tin [NAME=FILE ...] [-o DIR] [--print]\n"
    "                   [--backend=B] [--cache-dir=DIR] [-v] [-q]\n"
    "                   [--planner=P] [--estimator=E] [--search=S]\n"
    "                   [--memory-budget=BYTES] [--threads=N]\n"
    "       galleyc explain PROG.tin [NAME=FILE ...] [--analyze]\n"
    "                   [--json | --dot | --c] [--backend=B] [--cache-dir=DIR]\n"
    "                   [--planner=P] [--estimator=E] [--search=S]\n"
    "                   [--memory-budget=BYTES] [--threads=N]\n"
    "       galleyc compile PROG.tin -o OUT.c [--header OUT.h] [--prefix NAME]\n"
    "                   [--format NAME=FMT ...] [NAME=FILE ...]\n"
    "       galleyc COMMAND --help | help COMMAND\n"
    "       galleyc --help | --version\n"
    "\n"
    "Commands:\n"
    "  info      read a tensor file (.mtx, .tns, optionally .gz) and print its\n"
    "            order, dims, stored entries, nnz, fill, format and memory\n"
    "  convert   read IN, store it in FMT, and write OUT (.tns or .mtx by\n"
    "            extension, .gz compresses)\n"
    "  run       run a .tin program with its inputs bound to tensor files\n"
    "            (NAME=FILE for every declared input): plan it for the data,\n"
    "            compile its kernels, run them, and write each result to\n"
    "            DIR/NAME.tns\n"
    "  explain   print the input plan of a .tin program and, when every\n"
    "            input is bound, the logical and physical plans made for\n"
    "            that data with each query's estimated nnz (and cost),\n"
    "            and how each query's outermost loop splits into blocks\n"
    "            for the threads\n"
    "  compile   ahead of time: write one self-contained C file (kernels, their\n"
    "            run-time support and entry points PREFIX_run...; builds with\n"
    "            a plain C compiler, no libgalley) and optionally its header;\n"
    "            planned for sample data (NAME=FILE) or data-free for the\n"
    "            formats given by --format; sizes are read at run time\n"
    "\n"
    "Options (`galleyc COMMAND --help` lists those of one command):\n"
    HELP_FORMAT
    "  --stats       also print the degree statistics of the non-fill entries\n"
    "  -v            info: also print the time taken to read and convert;\n"
    "                run: print to standard error the time of every part\n"
    "                (reading each file, planning, compiling, running, one\n"
    "                line per query with its nnz, writing) and the total\n"
    "  -q, --quiet   run: no warnings about results that look wrong (a nan\n"
    "                fill, all fill, integers beyond 2^53) and no progress\n"
    "                line\n"
    "  -o DIR        run: write the results to DIR/NAME.tns (default: .;\n"
    "                DIR is made when missing); all results or none\n"
    "  -o OUT.c      compile: the C file to write\n"
    "  --print       run: write the results to standard output instead; with\n"
    "                several outputs each is preceded by '# output: NAME'\n"
    "  --analyze     explain: also run the plan and print per physical query\n"
    "                the estimated and real nnz, the time, and the q-error\n"
    "                max(e/r, r/e) with e = max(est,1), r = max(real,1)\n"
    "  --json        explain: print the same as one JSON object\n"
    "  --dot         explain: print the physical plan as a Graphviz digraph\n"
    "                (render with `dot -Tsvg`)\n"
    "  --backend=B   run, explain --analyze: compile kernels with tcc (the\n"
    "                default: fast to compile), clang (-O3, cached on disk),\n"
    "                or run the reference evaluator instead (reference)\n"
    "  --planner=P   run, explain, compile: cost (the default: the cost-based\n"
    "                optimizer) or simple (the plain planner, no estimates)\n"
    "  --estimator=E the cost-based planner's sparsity estimator: chain (the\n"
    "                default: chain bound over degree statistics) or uniform\n"
    "  --search=S    its elimination-order search: greedy (the default) or\n"
    "                exact (branch and bound, bounded by the greedy cost)\n"
    "  --cache-dir=DIR  run, explain --analyze: the clang backend's kernel\n"
    "                cache (default: $GALLEY_CACHE_DIR, else ~/.cache/galleyc)\n"
    "  --header OUT.h   compile: also write the header\n"
    "  --prefix NAME compile: the prefix of every external symbol and macro\n"
    "                and of the include guard (default galley_aot)\n"
    "  --format NAME=FMT  compile: the format of input NAME (FMT as for\n"
    "                convert; default: dense then sorted lists)\n"
    "  --stats NAME=FILE  compile: the same as NAME=FILE (sample data whose\n"
    "                format and statistics the plan is made for)\n"
    HELP_HELP
    "  --version     print the version and exit\n"
    HELP_EXIT;

static const char *info_help =
    "usage: galleyc info FILE [--format=FMT] [--stats] [-v]\n"
    "\n"
    "Read a tensor file (.mtx, .tns, optionally .gz) and print its order,\n"
    "dims, stored entries, nnz (entries that differ from the fill), fill,\n"
    "the format of every level, and the memory it holds.\n"
    "\n"
    "Options:\n"
    HELP_FORMAT
    "  --stats       also print the degree statistics of the non-fill entries\n"
    "  -v            also print the time taken to read and convert\n"
    HELP_HELP
    HELP_EXIT;

static const char *convert_help =
    "usage: galleyc convert IN OUT [--format=FMT]\n"
    "\n"
    "Read the tensor file IN, store it in FMT, and write OUT: .tns or .mtx\n"
    "(matrices with fill 0) by extension; a further .gz compresses.  OUT is\n"
    "written to a temporary name and renamed, never left partial.\n"
    "\n"
    "Options:\n"
    HELP_FORMAT
    HELP_HELP
    HELP_EXIT;

static const char *run_help =
    "usage: galleyc run PROG.tin [NAME=FILE ...] [-o DIR] [--print]\n"
    "                   [--backend=B] [--cache-dir=DIR] [-v] [-q]\n"
    "                   [--planner=P] [--estimator=E] [--search=S]\n"
    "                   [--memory-budget=BYTES] [--threads=N]\n"
    "\n"
    "Run a .tin program with every declared input bound to a tensor file\n"
    "(NAME=FILE): plan it for the data, compile its kernels, run them, and\n"
    "write each result to DIR/NAME.tns.  The results are written only when\n"
    "the whole run succeeded, all of them or none (each to a temporary\n"
    "file, then all renamed); SIGINT and SIGTERM remove the temporaries.\n"
    "On a terminal, a run longer than a second shows a progress line.\n"
    "\n"
    "Options:\n"
    "  -o DIR        write the results to DIR/NAME.tns (default: .; made\n"
    "                when missing)\n"
    "  --print       write the results to standard output instead; with\n"
    "                several outputs each is preceded by '# output: NAME'\n"
    "  -v            print to standard error the time of every part\n"
    "                (reading each file, planning, compiling, running, one\n"
    "                line per query with its nnz, writing) and the total\n"
    "  -q, --quiet   no warnings about results that look wrong (a nan\n"
    "                fill, all fill, integers beyond 2^53), no progress line\n"
    HELP_BACKEND
    HELP_PLANNING
    HELP_THREADS
    HELP_HELP
    HELP_EXIT;

static const char *explain_help =
    "usage: galleyc explain PROG.tin [NAME=FILE ...] [--analyze]\n"
    "                   [--json | --dot | --c] [--backend=B] [--cache-dir=DIR]\n"
    "                   [--planner=P] [--estimator=E] [--search=S]\n"
    "                   [--memory-budget=BYTES] [--threads=N]\n"
    "\n"
    "Print the input plan of a .tin program and, when every input is bound\n"
    "(NAME=FILE), the logical and physical plans made for that data with\n"
    "each query's estimated nnz (and cost).\n"
    "\n"
    "Options:\n"
    "  --analyze     also run the plan and print per physical query the\n"
    "                estimated and real nnz, the time, and the q-error\n"
    "                max(e/r, r/e) with e = max(est,1), r = max(real,1)\n"
    "  --json        print the same as one JSON object\n"
    "  --dot         print the physical plan as a Graphviz digraph (render\n"
    "                with `dot -Tsvg`); every input must be bound\n"
    "  --c           print the C source of the plan's kernels; every input\n"
    "                must be bound\n"
    HELP_BACKEND
    "                (both only with --analyze)\n"
    HELP_PLANNING
    HELP_THREADS
    HELP_HELP
    HELP_EXIT;

static const char *compile_help =
    "usage: galleyc compile PROG.tin -o OUT.c [--header OUT.h] [--prefix NAME]\n"
    "                   [--format NAME=FMT ...] [--nonfinite] [NAME=FILE ...]\n"
    "\n"
    "Ahead of time: write OUT.c, one self-contained C file (the kernels,\n"
    "their run-time support and the entry points PREFIX_run, PREFIX_run_msg,\n"
    "PREFIX_free, PREFIX_strerror; builds with a plain C compiler, libc and\n"
    "libm only, no libgalley) and optionally its header.  Index sizes are\n"
    "read from the data at run time.  An input bound to sample data\n"
    "(NAME=FILE) is planned for its format (or --format's), fill and\n"
    "statistics; an unbound input is planned data-free for its --format\n"
    "(default dense then sorted lists), each index of size 1000 (or its\n"
    "`dim`), vectors half full, about 8 entries per outermost coordinate\n"
    "otherwise, its declared fill (else 0) and finite values.  The entry\n"
    "points check every input's format and fill and return an error code\n"
    "otherwise (see the header).\n"
    "\n"
    "Options:\n"
    "  -o OUT.c      the C file to write (required)\n"
    "  --header OUT.h   also write the header\n"
    "  --prefix NAME the prefix of every external symbol and macro and of the\n"
    "                include guard (default galley_aot)\n"
    "  --format NAME=FMT  the format input NAME is passed in (FMT as for\n"
    "                convert: e.g. dense:1,list:0 for CSC)\n"
    "  --stats NAME=FILE  the same as NAME=FILE (sample data whose format\n"
    "                and statistics the plan is made for)\n"
    "  --nonfinite   plan inputs without data as possibly holding infinities\n"
    "                or NaNs (by default they must be finite: checked)\n"
    HELP_PLANNING
    HELP_HELP
    HELP_EXIT;

/* Options shared by the subcommands. */
typedef struct cli_opts {
  const char *format; /* --format text, or NULL */
  int stats;          /* --stats */
  int verbose;        /* -v */
  const char *args[2]; /* positional arguments */
  int nargs;
} cli_opts;

static int usage_error(const char *fmt, const char *arg) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, arg);
  cli_error("%s", msg);
  cli_stderr("Try 'galleyc --help' for more information.\n");
  return EXIT_USAGE;
}

/* ---- "did you mean" for options ---- */

static int edit_distance(const char *a, const char *b);

/* A usage error for the unknown option s, suggesting the nearest of the
 * command's options (NULL-ended) within two edits of its name. */
static int unknown_option(const char *s, const char *const *known) {
  char name[64];
  size_t n = strcspn(s, "=");
  snprintf(name, sizeof name, "%.*s", (int)n, s);
  const char *best = NULL;
  int bd = 3;
  for (int k = 0; known[k]; k++) {
    int d = edit_distance(name, known[k]);
    if (d < bd && (size_t)d < n / 2) {
      best = known[k];
      bd = d;
    }
  }
  if (!best)
    return usage_error("unknown option '%s'", s);
  char msg[512];
  snprintf(msg, sizeof msg, "unknown option '%.300s' (did you mean '%s'?)", s,
           best);
  return usage_error("%s", msg);
}

#define PLANNING_OPTIONS "--planner", "--estimator", "--search", "--memory-budget"
#define BACKEND_OPTIONS "--backend", "--cache-dir"
static const char *const info_options[] = {"--format", "--stats", "-v", NULL};
static const char *const run_options[] = {
    "-o", "--print", "-v", "-q", "--quiet", BACKEND_OPTIONS, PLANNING_OPTIONS,
    NULL};
static const char *const explain_options[] = {
    "--analyze", "--json", "--dot", "--c", BACKEND_OPTIONS, PLANNING_OPTIONS,
    NULL};
static const char *const compile_options[] = {
    "-o", "--header", "--stats", "--prefix", "--format", "--nonfinite",
    PLANNING_OPTIONS, NULL};

static int exit_status(galley_status status) {
  return cli_exit_status(status);
}

/* Exit status for a runtime failure, after printing its message. */
static int report(const galley_error *err) {
  cli_report_text(err->msg[0] ? err->msg : galley_status_name(err->status));
  return exit_status(err->status);
}

static double now_seconds(void) { return cli_now(); }

/* Parse the options after the subcommand; max_args positional ones. */
static int parse_opts(int argc, char **argv, int max_args, cli_opts *o) {
  memset(o, 0, sizeof *o);
  for (int a = 0; a < argc; a++) {
    const char *s = argv[a];
    if (strncmp(s, "--format=", 9) == 0)
      o->format = s + 9;
    else if (strcmp(s, "--format") == 0 && a + 1 < argc)
      o->format = argv[++a];
    else if (strcmp(s, "--stats") == 0)
      o->stats = 1;
    else if (strcmp(s, "-v") == 0)
      o->verbose = 1;
    else if (s[0] == '-' && s[1] != '\0')
      return unknown_option(s, info_options);
    else if (o->nargs < max_args)
      o->args[o->nargs++] = s;
    else
      return usage_error("unexpected argument '%s'", s);
  }
  if (o->nargs < max_args)
    return usage_error("%s", max_args == 1 ? "missing FILE" : "missing IN or OUT");
  return 0;
}

/* Read a tensor, in the --format when given (which needs the order, so the
 * file is read in its default format first and converted). */
static int load(const cli_opts *o, const char *path, galley_tensor **out,
                double *seconds) {
  galley_error err = {0};
  double t0 = now_seconds();
  galley_tensor *t = NULL;
  if (galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err) != GALLEY_OK)
    return report(&err);
  if (o->format) {
    galley_format fmt;
    galley_tensor *c = NULL;
    if (galley_format_parse(o->format, galley_tensor_order(t), &fmt, &err) != GALLEY_OK ||
        galley_tensor_convert(t, &fmt, &c, &err) != GALLEY_OK) {
      galley_tensor_free(t);
      return report(&err);
    }
    galley_tensor_free(t);
    t = c;
  }
  *seconds = now_seconds() - t0;
  *out = t;
  return 0;
}

/* Write "{0,2}" for a mode mask into buf. */
static void format_modes(char *buf, size_t size, unsigned mask, int order) {
  size_t n = 0;
  n += (size_t)snprintf(buf + n, size - n, "{");
  for (int k = 0, first = 1; k < order && n < size; k++)
    if (mask & (1u << k)) {
      n += (size_t)snprintf(buf + n, size - n, first ? "%d" : ",%d", k);
      first = 0;
    }
  if (n < size)
    snprintf(buf + n, size - n, "}");
}

static int print_stats(const galley_tensor *t) {
  galley_degree_stats *st = malloc(sizeof *st);
  galley_error err = {0};
  if (!st) {
    cli_error("out of memory");
    return EXIT_DATA;
  }
  if (galley_tensor_degree_stats(t, st, &err) != GALLEY_OK) {
    free(st);
    return report(&err);
  }
  printf("degree statistics (non-fill entries):\n");
  printf("  %-16s %16s %16s\n", "modes S", "distinct(S)", "max per S-value");
  for (unsigned s = 0; s < (1u << st->order); s++) {
    char modes[32];
    format_modes(modes, sizeof modes, s, st->order);
    printf("  %-16s %16lld %16lld\n", modes, (long long)st->distinct[s],
           (long long)st->max_degree[s]);
  }
  free(st);
  return 0;
}

static int cmd_info(int argc, char **argv) {
  cli_opts o;
  int rc = parse_opts(argc, argv, 1, &o);
  if (rc)
    return rc;
  galley_tensor *t;
  double secs;
  if ((rc = load(&o, o.args[0], &t, &secs)) != 0)
    return rc;
  printf("%s\n", o.args[0]);
  galley_tensor_describe(t, stdout);
  if (o.verbose)
    printf("read%s in %.1f ms\n", o.format ? " and converted" : "", 1e3 * secs);
  if (o.stats)
    rc = print_stats(t);
  galley_tensor_free(t);
  return rc;
}

/* Sweep the stale temporaries of the directory that holds path. */
static void sweep_dir_of(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) : 0;
  if (n >= sizeof dir)
    return;
  memcpy(dir, path, n);
  dir[n] = '\0';
  cli_sweep_stale_temps(slash ? (n ? dir : "/") : ".");
}

static int cmd_convert(int argc, char **argv) {
  cli_opts o;
  int rc = parse_opts(argc, argv, 2, &o);
  if (rc)
    return rc;
  galley_tensor *t;
  double secs;
  if ((rc = load(&o, o.args[0], &t, &secs)) != 0)
    return rc;
  galley_error err = {0};
  sweep_dir_of(o.args[1]);
  if (galley_tensor_write(t, o.args[1], GALLEY_FILE_AUTO, &err) != GALLEY_OK)
    rc = report(&err);
  galley_tensor_free(t);
  return rc;
}

/* ------------------------------------------------------------------ */
/* run and explain                                                     */
/* ------------------------------------------------------------------ */

/* A NAME=FILE argument: bind input NAME to the tensor in FILE. */
typedef struct binding {
  char name[128];   /* the input's name */
  const char *file; /* the tensor file */
  int input;        /* the input's number in the program */
} binding;

/* Which of the program commands runs. */
typedef enum prog_cmd { CMD_RUN, CMD_EXPLAIN, CMD_COMPILE } prog_cmd;

/* The command line of run, explain and compile. */
typedef struct prog_opts {
  prog_cmd cmd;
  const char *prog;   /* PROG.tin */
  binding *binds;     /* NAME=FILE arguments, in order */
  int nbinds;
  const char *outdir; /* -o DIR (run), default "." */
  int print;          /* --print (run) */
  galley_backend backend; /* --backend (run) */
  const char *cache_dir;  /* --cache-dir (run), or NULL */
  int verbose;        /* -v (run) */
  int quiet;          /* -q, --quiet (run): no warnings, no progress line */
  const char *out_c;  /* -o OUT.c (compile) */
  const char *out_h;  /* --header OUT.h (compile), or NULL */
  const char *prefix; /* --prefix NAME (compile), or NULL */
  int nonfinite;      /* --nonfinite (compile) */
  binding *fmts;      /* --format NAME=FMT (compile): file is the format */
  int nfmts;
  galley_planner planner;     /* --planner */
  int64_t memory_budget;      /* --memory-budget, 0: the default */
  int threads;                /* --threads (run, explain), 0: the default */
  galley_estimator estimator; /* --estimator */
  galley_search search;       /* --search */
  int analyze;        /* --analyze (explain) */
  int json;           /* --json (explain) */
  int dot;            /* --dot (explain) */
  int csrc;           /* --c (explain) */
  DistCli *dist;      /* under mpirun (GALLEY_MPI builds), else NULL */
} prog_opts;

/* Whether s looks like an option ("-x", "--print"): never taken as the
 * value of the option before it (`-o --print` is a missing directory, not
 * a directory named --print; write ./-x for a file named -x). */
static int looks_like_option(const char *s) {
  return s[0] == '-' && s[1] != '\0';
}

/* The separate value of option `name` at argv[*a + 1]; NULL after a usage
 * message when it is missing or looks like an option.  `what` names it. */
static const char *next_value(int argc, char **argv, int *a,
                              const char *name, const char *what) {
  if (*a + 1 < argc && !looks_like_option(argv[*a + 1]))
    return argv[++*a];
  char msg[256];
  if (*a + 1 < argc)
    snprintf(msg, sizeof msg, "option '%s' needs %s, not the option '%s'",
             name, what, argv[*a + 1]);
  else
    snprintf(msg, sizeof msg, "option '%s' needs %s", name, what);
  usage_error("%s", msg);
  return NULL;
}

/* The value of an option given as --NAME=VALUE or --NAME VALUE; NULL
 * after a usage message when it is missing. */
static const char *option_value(int argc, char **argv, int *a,
                                const char *name) {
  size_t n = strlen(name);
  const char *s = argv[*a];
  if (strncmp(s, name, n) == 0 && s[n] == '=' && s[n + 1] != '\0')
    return s + n + 1;
  if (strcmp(s, name) == 0)
    return next_value(argc, argv, a, name, "a value");
  usage_error("option '%s' needs a value", name);
  return NULL;
}

/* Whether s is the option `name`, alone or as name=VALUE. */
static int is_option(const char *s, const char *name) {
  size_t n = strlen(name);
  return strncmp(s, name, n) == 0 && (s[n] == '\0' || s[n] == '=');
}

static int prog_binding(const char *s, prog_opts *o);

/* --backend and --cache-dir (run, explain --analyze); 1 when s is one of
 * them (*rc then holds the result), 0 otherwise. */
static int backend_option(int argc, char **argv, int *a, prog_opts *o,
                          int *rc) {
  const char *s = argv[*a], *v;
  *rc = 0;
  if (is_option(s, "--backend")) {
    galley_error err = {0};
    if (!(v = option_value(argc, argv, a, "--backend")))
      *rc = EXIT_USAGE;
    else if (galley_backend_parse(v, &o->backend, &err) != GALLEY_OK ||
             o->backend == GALLEY_BACKEND_DEFAULT)
      *rc = usage_error("unknown backend '%s' (expected tcc, clang or "
                        "reference)", v);
  } else if (is_option(s, "--cache-dir")) {
    if (!(o->cache_dir = option_value(argc, argv, a, "--cache-dir")))
      *rc = EXIT_USAGE;
  } else {
    return 0;
  }
  return 1;
}

/* The options of run. */
static int run_option(int argc, char **argv, int *a, prog_opts *o) {
  const char *s = argv[*a];
  int rc;
  if (backend_option(argc, argv, a, o, &rc))
    return rc;
  if (strcmp(s, "-o") == 0) {
    if (!(o->outdir = next_value(argc, argv, a, "-o", "a directory")))
      return EXIT_USAGE;
  } else if (strcmp(s, "--print") == 0) {
    o->print = 1;
  } else if (strcmp(s, "-v") == 0) {
    o->verbose = 1;
  } else if (strcmp(s, "-q") == 0 || strcmp(s, "--quiet") == 0) {
    o->quiet = 1;
  } else {
    return unknown_option(s, run_options);
  }
  return 0;
}

/* The options of explain. */
static int explain_option(int argc, char **argv, int *a, prog_opts *o) {
  const char *s = argv[*a];
  int rc;
  if (backend_option(argc, argv, a, o, &rc))
    return rc;
  if (strcmp(s, "--analyze") == 0)
    o->analyze = 1;
  else if (strcmp(s, "--json") == 0)
    o->json = 1;
  else if (strcmp(s, "--dot") == 0)
    o->dot = 1;
  else if (strcmp(s, "--c") == 0)
    o->csrc = 1;
  else
    return unknown_option(s, explain_options);
  return 0;
}

/* The options of compile. */
static int compile_option(int argc, char **argv, int *a, prog_opts *o) {
  const char *s = argv[*a];
  if (strcmp(s, "-o") == 0) {
    if (!(o->out_c = next_value(argc, argv, a, "-o", "a file name (OUT.c)")))
      return EXIT_USAGE;
  } else if (is_option(s, "--header")) {
    if (!(o->out_h = option_value(argc, argv, a, "--header")))
      return EXIT_USAGE;
  } else if (strcmp(s, "--nonfinite") == 0) {
    o->nonfinite = 1;
  } else if (is_option(s, "--prefix")) {
    if (!(o->prefix = option_value(argc, argv, a, "--prefix")))
      return EXIT_USAGE;
  } else if (is_option(s, "--format")) {
    const char *v = option_value(argc, argv, a, "--format");
    if (!v)
      return EXIT_USAGE;
    const char *eq = strchr(v, '=');
    size_t n = eq ? (size_t)(eq - v) : 0;
    if (n == 0 || n >= sizeof o->fmts[0].name || eq[1] == '\0')
      return usage_error("bad --format '%s': expected NAME=FMT", v);
    binding *f = &o->fmts[o->nfmts++];
    memcpy(f->name, v, n);
    f->name[n] = '\0';
    f->file = eq + 1;
    f->input = -1;
  } else if (is_option(s, "--stats")) {
    const char *v = option_value(argc, argv, a, "--stats");
    if (!v)
      return EXIT_USAGE;
    if (!strchr(v, '='))
      return usage_error("bad binding '%s': expected NAME=FILE", v);
    return prog_binding(v, o);
  } else {
    return unknown_option(s, compile_options);
  }
  return 0;
}

/* A byte count: digits with an optional K, M or G (powers of 1024). */
static int parse_bytes(const char *v, int64_t *out) {
  char *end = NULL;
  double x = strtod(v, &end);
  if (end == v || !(x >= 0))
    return -1;
  double unit = 1;
  if (*end == 'K' || *end == 'k')
    unit = 1024.0, end++;
  else if (*end == 'M' || *end == 'm')
    unit = 1024.0 * 1024, end++;
  else if (*end == 'G' || *end == 'g')
    unit = 1024.0 * 1024 * 1024, end++;
  if (*end != '\0' || x * unit >= 9.2e18)
    return -1;
  *out = (int64_t)(x * unit);
  return 0;
}

/* The planning options shared by run, explain and compile; 1 when s is
 * one of them (*rc then holds the result), 0 otherwise. */
static int planning_option(int argc, char **argv, int *a, prog_opts *o,
                           int *rc) {
  const char *s = argv[*a], *v;
  *rc = 0;
  if (is_option(s, "--planner")) {
    if (!(v = option_value(argc, argv, a, "--planner")))
      *rc = EXIT_USAGE;
    else if (strcmp(v, "cost") == 0)
      o->planner = GALLEY_PLANNER_COST;
    else if (strcmp(v, "simple") == 0)
      o->planner = GALLEY_PLANNER_SIMPLE;
    else
      *rc = usage_error("unknown planner '%s' (expected cost or simple)", v);
  } else if (is_option(s, "--estimator")) {
    if (!(v = option_value(argc, argv, a, "--estimator")))
      *rc = EXIT_USAGE;
    else if (strcmp(v, "chain") == 0)
      o->estimator = GALLEY_ESTIMATOR_CHAIN;
    else if (strcmp(v, "uniform") == 0)
      o->estimator = GALLEY_ESTIMATOR_UNIFORM;
    else
      *rc = usage_error("unknown estimator '%s' (expected chain or uniform)",
                        v);
  } else if (is_option(s, "--search")) {
    if (!(v = option_value(argc, argv, a, "--search")))
      *rc = EXIT_USAGE;
    else if (strcmp(v, "greedy") == 0)
      o->search = GALLEY_SEARCH_GREEDY;
    else if (strcmp(v, "exact") == 0)
      o->search = GALLEY_SEARCH_EXACT;
    else
      *rc = usage_error("unknown search '%s' (expected greedy or exact)", v);
  } else if (is_option(s, "--threads") && o->cmd != CMD_COMPILE) {
    char *end;
    long n;
    if (!(v = option_value(argc, argv, a, "--threads")))
      *rc = EXIT_USAGE;
    else if ((n = strtol(v, &end, 10)) < 1 || n > 256 || *end || end == v)
      *rc = usage_error("bad --threads '%s' (expected a number 1..256)", v);
    else
      o->threads = (int)n;
  } else if (is_option(s, "--memory-budget")) {
    if (!(v = option_value(argc, argv, a, "--memory-budget")))
      *rc = EXIT_USAGE;
    else if (parse_bytes(v, &o->memory_budget) != 0)
      *rc = usage_error("bad --memory-budget '%s' (expected bytes, e.g. "
                        "500M, 4G, 0 for half the physical memory)", v);
  } else {
    return 0;
  }
  return 1;
}

/* One option of a program command; *a advances past its value. */
static int prog_option(int argc, char **argv, int *a, prog_opts *o) {
  int rc;
  if (planning_option(argc, argv, a, o, &rc))
    return rc;
  if (o->cmd == CMD_RUN)
    return run_option(argc, argv, a, o);
  if (o->cmd == CMD_COMPILE)
    return compile_option(argc, argv, a, o);
  return explain_option(argc, argv, a, o);
}

/* A NAME=FILE argument into o->binds. */
static int prog_binding(const char *s, prog_opts *o) {
  const char *eq = strchr(s, '=');
  size_t n = (size_t)(eq - s);
  if (n == 0 || n >= sizeof o->binds[0].name || eq[1] == '\0')
    return usage_error("bad binding '%s': expected NAME=FILE", s);
  binding *b = &o->binds[o->nbinds++];
  memcpy(b->name, s, n);
  b->name[n] = '\0';
  b->file = eq + 1;
  b->input = -1;
  return 0;
}

/* Parse "PROG.tin [NAME=FILE ...] [options]"; o->binds is malloc()ed. */
static int parse_prog_opts(int argc, char **argv, prog_cmd cmd,
                           prog_opts *o) {
  memset(o, 0, sizeof *o);
  o->cmd = cmd;
  o->outdir = ".";
  o->backend = GALLEY_BACKEND_DEFAULT;
  o->binds = calloc((size_t)argc + 1, sizeof *o->binds);
  o->fmts = calloc((size_t)argc + 1, sizeof *o->fmts);
  if (!o->binds || !o->fmts) {
    cli_error("out of memory");
    return EXIT_DATA;
  }
  for (int a = 0; a < argc; a++) {
    const char *s = argv[a];
    int rc = 0;
    if (s[0] == '-' && s[1] != '\0') {
      rc = prog_option(argc, argv, &a, o);
    } else if (!o->prog) {
      o->prog = s;
    } else if (strchr(s, '=')) {
      rc = prog_binding(s, o);
    } else {
      rc = usage_error("unexpected argument '%s'", s);
    }
    if (rc)
      return rc;
  }
  if (!o->prog)
    return usage_error("%s", "missing PROG.tin");
  if (cmd == CMD_COMPILE && !o->out_c)
    return usage_error("%s", "compile needs -o OUT.c");
  if (o->json + o->dot + o->csrc > 1)
    return usage_error("%s", "--json, --dot and --c cannot be combined");
  return 0;
}

/* Print line `line` of the file and a caret under column `col` to stderr
 * (tabs are kept so that the caret lines up). */
static void print_source_line(const char *path, int64_t line, int64_t col) {
  FILE *f = fopen(path, "r");
  if (!f)
    return;
  char *text = NULL;
  size_t cap = 0;
  ssize_t len = 0;
  for (int64_t l = 1; l <= line && (len = getline(&text, &cap, f)) >= 0; l++)
    ;
  if (len >= 0 && text) {
    text[strcspn(text, "\r\n")] = '\0';
    size_t n = strlen(text);
    char *caret = malloc(n + (size_t)(col > 0 ? col : 1) + 2);
    if (caret) {
      int64_t c = 1;
      for (; c < col; c++)
        caret[c - 1] = c <= (int64_t)n && text[c - 1] == '\t' ? '\t' : ' ';
      memcpy(caret + c - 1, "^\n", 3);
    }
    cli_stderr(text);
    cli_stderr("\n");
    cli_stderr(caret ? caret : "^\n");
    free(caret);
  }
  free(text);
  fclose(f);
}

/* Parse the program: on failure print every diagnostic. */
static int load_program(const char *path, galley_program **out) {
  char *diag = NULL;
  galley_error err = {0};
  galley_status st = galley_program_read(path, out, &diag, &err);
  if (st == GALLEY_OK)
    return 0;
  if (diag && diag[0])
    cli_stderr(diag);
  else
    report(&err);
  free(diag);
  return exit_status(st);
}

/* Edit distance between two short names (insert, delete, substitute);
 * a large number for long ones. */
static int edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 63 || m > 63)
    return 1 << 20;
  int d[64][64];
  for (size_t i = 0; i <= n; i++)
    d[i][0] = (int)i;
  for (size_t j = 0; j <= m; j++)
    d[0][j] = (int)j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      v = d[i - 1][j] + 1 < v ? d[i - 1][j] + 1 : v;
      d[i][j] = d[i][j - 1] + 1 < v ? d[i][j - 1] + 1 : v;
    }
  return d[n][m];
}

/* A binding whose name is no input: say which inputs there are, and the
 * nearest one when it is close. */
static int unknown_binding(const galley_program *gp, const char *name) {
  int n = galley_program_num_inputs(gp), best = -1, best_d = 0;
  char list[512] = "";
  size_t len = 0;
  for (int k = 0; k < n; k++) {
    const char *in = galley_program_input_name(gp, k);
    int d = edit_distance(name, in);
    int len_name = (int)strlen(name);
    int limit = len_name <= 4 ? 1 : len_name <= 8 ? 2 : 3;
    if (d <= limit && d < len_name && (best < 0 || d < best_d))
      best = k, best_d = d;
    if (len < sizeof list)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                              k ? ", " : "", in);
  }
  char msg[768];
  if (n == 0)
    snprintf(msg, sizeof msg, "'%s' is not an input of the program (it "
             "declares none)", name);
  else if (best >= 0)
    snprintf(msg, sizeof msg, "'%s' is not an input of the program (did "
             "you mean '%s'? its inputs are %s)", name,
             galley_program_input_name(gp, best), list);
  else
    snprintf(msg, sizeof msg, "'%s' is not an input of the program (its "
             "inputs are %s)", name, list);
  return usage_error("%s", msg);
}

/* Match each binding to a declared input: an unknown or repeated name is
 * a usage error. */
static int match_bindings(const galley_program *gp, prog_opts *o) {
  int n = galley_program_num_inputs(gp);
  for (int b = 0; b < o->nbinds; b++) {
    binding *bd = &o->binds[b];
    for (int k = 0; k < n && bd->input < 0; k++)
      if (strcmp(galley_program_input_name(gp, k), bd->name) == 0)
        bd->input = k;
    if (bd->input < 0)
      return unknown_binding(gp, bd->name);
    for (int c = 0; c < b; c++)
      if (o->binds[c].input == bd->input)
        return usage_error("input '%s' is bound twice", bd->name);
  }
  return 0;
}

/* Every declared input must be bound (run): name each one that is not. */
static int check_all_bound(const galley_program *gp, const prog_opts *o) {
  int rc = 0;
  for (int k = 0; k < galley_program_num_inputs(gp); k++) {
    int found = 0;
    for (int b = 0; b < o->nbinds; b++)
      found |= o->binds[b].input == k;
    if (found)
      continue;
    int64_t line, col;
    const char *name = galley_program_input_name(gp, k);
    galley_program_input_loc(gp, k, &line, &col);
    cli_error("input '%s' (declared at %s:%lld:%lld) is not bound: add "
              "%s=FILE", name, o->prog, (long long)line, (long long)col,
              name);
    rc = EXIT_DATA;
  }
  if (rc && o->cmd == CMD_COMPILE)
    cli_error("compile plans for the formats, sizes and fills of the bound "
              "data: bind every input");
  return rc;
}

/* Where the time of a command goes (-v accounts for all of it). */
typedef struct run_times {
  double start;   /* the command began */
  double program; /* reading and checking the program */
  double read;    /* reading the bound files */
  double run;     /* galley_program_run: plan, compile, run kernels */
  double check;   /* looking over the results for warnings */
  double write;   /* writing the results */
} run_times;

/* "12.345 ms" or "3.21 s". */
static const char *fmt_time(char *buf, size_t size, double seconds) {
  if (seconds < 1)
    snprintf(buf, size, "%.3f ms", 1e3 * seconds);
  else
    snprintf(buf, size, "%.2f s", seconds);
  return buf;
}

/* A tensor file; under mpirun rank 0 reads it and broadcasts it. */
static galley_status read_input(const prog_opts *o, const char *path,
                                galley_tensor **out, galley_error *err) {
#ifdef GALLEY_MPI
  if (o->dist)
    return dist_cli_read(o->dist, path, out, err);
#endif
  return galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, out, err);
}

/* Under mpirun: every rank agrees on the status of a run (a no-op
 * otherwise). */
static galley_status agree_run(const prog_opts *o, galley_status st,
                               galley_error *err) {
#ifdef GALLEY_MPI
  if (o->dist)
    return dist_cli_after_run(o->dist, st, err);
#endif
  return st;
}

/* Whether this process prints and writes results: the only one, or
 * rank 0 under mpirun. */
static int speaks(const prog_opts *o) {
#ifdef GALLEY_MPI
  return !o->dist || dist_cli_rank(o->dist) == 0;
#else
  return 1;
#endif
}

/* Read every bound file and bind it; tensors[b] keeps them alive. */
static int bind_files(galley_program *gp, const prog_opts *o,
                      galley_tensor **tensors, run_times *tm) {
  for (int b = 0; b < o->nbinds; b++) {
    const binding *bd = &o->binds[b];
    galley_error err = {0};
    double t0 = now_seconds();
    cli_progress_set("reading %s=%s", bd->name, bd->file);
    if (read_input(o, bd->file, &tensors[b], &err) != GALLEY_OK)
      return report(&err);
    double secs = now_seconds() - t0;
    tm->read += secs;
    if (o->verbose) {
      char t[32];
      cli_progress_set("binding %s", bd->name);
      cli_printf("read %s=%s in %s (%lld entries stored)\n", bd->name,
              bd->file, fmt_time(t, sizeof t, secs),
              (long long)galley_tensor_stored(tensors[b]));
    }
    if (galley_program_bind(gp, bd->name, tensors[b], &err) != GALLEY_OK) {
      if (err.line > 0) /* located in the program */
        return report(&err);
      const char *m = strncmp(err.msg, "error: ", 7) == 0 ? err.msg + 7
                                                          : err.msg;
      cli_error("%s=%s: %s", bd->name, bd->file, m);
      return exit_status(err.status);
    }
  }
  return 0;
}

/* Write "DIR/NAME.tns" into buf; 0 when it does not fit. */
static int output_path(char *buf, size_t size, const char *dir,
                       const char *name) {
  size_t n = strlen(dir);
  const char *sep = n > 0 && dir[n - 1] == '/' ? "" : "/";
  int len = snprintf(buf, size, "%s%s%s.tns", dir, sep, name);
  return len > 0 && (size_t)len < size;
}

/* Make directory dir and its missing parents (mkdir -p); 0, or -1 with
 * errno set. */
static int make_dirs(const char *dir) {
  char path[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof path) {
    errno = n ? ENAMETOOLONG : ENOENT;
    return -1;
  }
  memcpy(path, dir, n + 1);
  for (size_t k = 1; k <= n; k++) {
    if (path[k] != '/' && path[k] != '\0')
      continue;
    char c = path[k];
    path[k] = '\0';
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
      return -1;
    path[k] = c;
  }
  struct stat st;
  if (stat(dir, &st) != 0)
    return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

/* --print: every output to standard output, each preceded by '# output:
 * NAME' when there are several. */
static int print_outputs(const galley_program *gp) {
  int n = galley_program_num_outputs(gp);
  for (int k = 0; k < n; k++) {
    galley_error err = {0};
    if (n > 1)
      printf("# output: %s\n", galley_program_output_name(gp, k));
    fflush(stdout);
    if (galley_program_write_output(gp, k, stdout, &err) != GALLEY_OK)
      return report(&err);
  }
  return 0;
}

/* Stage every output in DIR (made when missing), then rename them all:
 * all results or none (stage.c). */
static int write_output_files(const galley_program *gp, const prog_opts *o) {
  if (make_dirs(o->outdir) != 0) {
    cli_error("cannot make the output directory '%s': %s", o->outdir,
              strerror(errno));
    return EXIT_DATA;
  }
  int swept = cli_sweep_stale_temps(o->outdir);
  if (swept && o->verbose)
    cli_printf("removed %d stale temporar%s from %s\n", swept,
            swept == 1 ? "y" : "ies", o->outdir);
  int n = galley_program_num_outputs(gp), rc = 0;
  cli_staged *staged = calloc((size_t)n + 1, sizeof *staged);
  if (!staged) {
    cli_error("out of memory");
    return EXIT_DATA;
  }
  for (int k = 0; k < n && !rc; k++) {
    const char *name = galley_program_output_name(gp, k);
    char path[4096];
    if (!output_path(path, sizeof path, o->outdir, name)) {
      cli_error("output path for '%s' is too long", name);
      rc = EXIT_DATA;
    } else if (!(staged[k].path = strdup(path))) {
      cli_error("out of memory");
      rc = EXIT_DATA;
    } else {
      cli_progress_set("writing %s", path);
      double t0 = now_seconds();
      rc = cli_stage(&staged[k], gp, k);
      if (!rc && o->verbose) {
        char t[32];
        cli_printf("wrote %s in %s\n", path,
                fmt_time(t, sizeof t, now_seconds() - t0));
      }
    }
  }
  if (!rc)
    rc = cli_commit(staged, n);
  cli_discard(staged, n);
  return rc;
}

static int write_outputs(const galley_program *gp, const prog_opts *o,
                         run_times *tm) {
  double t0 = now_seconds();
  int rc = !speaks(o) ? 0 : o->print ? print_outputs(gp)
                                     : write_output_files(gp, o);
#ifdef GALLEY_MPI
  if (o->dist) /* every rank exits as rank 0 did */
    rc = dist_cli_agree_rc(o->dist, rc);
#endif
  tm->write = now_seconds() - t0;
  return rc;
}

/* ---- warnings about results that look wrong ---- */

/* What the values of a result say: whether all are integers, and the
 * largest magnitude among them. */
typedef struct value_scan {
  int integral;  /* every finite value is an integer */
  double maxabs; /* the largest finite |value| */
} value_scan;

static void scan_value(value_scan *v, double x) {
  if (!isfinite(x))
    return;
  if (x != floor(x))
    v->integral = 0;
  if (fabs(x) > v->maxabs)
    v->maxabs = fabs(x);
}

static int scan_entry(void *ud, const int64_t *coord, double x) {
  (void)coord;
  scan_value(ud, x);
  return 0;
}

/* 2^53: the integers above it are not all doubles. */
#define EXACT_INTEGERS 9007199254740992.0

/* Warn (standard error) about a result whose fill is nan, one that is all
 * fill, and integer values beyond 2^53, which float64 rounds (counts). */
static void warn_result(const char *name, const galley_tensor *t) {
  int order = galley_tensor_order(t);
  double fill = galley_tensor_fill(t);
  int64_t size = 1;
  for (int k = 0; k < order; k++)
    size *= galley_tensor_dim(t, k) > 0 ? 1 : 0;
  int all_fill = order > 0 && size > 0 && galley_tensor_nnz(t) == 0;
  if (isnan(fill) && all_fill)
    cli_warning("result '%s' is nan everywhere", name);
  else if (isnan(fill))
    cli_warning("result '%s' has fill nan: all its unstored entries are nan",
                name);
  else if (all_fill)
    cli_warning("result '%s' is entirely its fill %g: no entry differs "
                "from it", name, fill);
  value_scan v = {1, 0};
  scan_value(&v, fill);
  if (order == 0) {
    int64_t none[1] = {0};
    scan_value(&v, galley_tensor_get(t, none, NULL));
  } else {
    galley_tensor_foreach(t, scan_entry, &v);
  }
  if (v.integral && v.maxabs > EXACT_INTEGERS)
    cli_warning("result '%s' holds integers up to %.17g, beyond 2^53 = "
                "9007199254740992: float64 cannot represent every integer "
                "there, so they may be rounded (see tin(5))", name, v.maxabs);
}

static void warn_results(const galley_program *gp, const prog_opts *o) {
  if (o->quiet)
    return;
  for (int k = 0; k < galley_program_num_outputs(gp); k++)
    warn_result(galley_program_output_name(gp, k),
                galley_program_output(gp, k));
}

/* A failed library call: its message, with the source line when located. */
static int report_located(const prog_opts *o, const galley_error *err) {
  int rc = report(err);
  if (err->line > 0)
    print_source_line(o->prog, err->line, err->col);
  return rc;
}

/* The backend, cache directory and log of a run (run, explain
 * --analyze). */
static int set_run_options(galley_program *gp, const prog_opts *o,
                           FILE *log) {
  galley_error err = {0};
  if (galley_program_set_backend(gp, o->backend, &err) != GALLEY_OK ||
      galley_program_set_cache_dir(gp, o->cache_dir, &err) != GALLEY_OK)
    return report(&err);
  /* -v: the library logs the phases, then one line per query */
  galley_program_set_log(gp, o->verbose ? 2 : 0, log);
  return 0;
}

/* Run the whole program; print a located error with its source line.
 * The library's -v log is collected and printed after the run, so that
 * it never mixes with the progress line. */
static int run_program(galley_program *gp, const prog_opts *o,
                       run_times *tm) {
  galley_error err = {0};
  char *log_text = NULL;
  size_t log_len = 0;
  FILE *log = o->verbose ? open_memstream(&log_text, &log_len) : NULL;
  int rc = set_run_options(gp, o, log ? log : stderr);
  double t0 = now_seconds();
  cli_progress_set("running %s", o->prog);
  if (!rc && agree_run(o, galley_program_run(gp, &err), &err) != GALLEY_OK)
    rc = report_located(o, &err);
  tm->run = now_seconds() - t0;
  if (log) {
    galley_program_set_log(gp, 0, NULL);
    fclose(log);
    if (log_text)
      cli_stderr(log_text);
    free(log_text);
  }
  return rc;
}

/* -v: the whole time of the command, part by part. */
static void print_times(const galley_program *gp, const run_times *tm) {
  galley_run_info info;
  galley_program_run_info(gp, &info);
  double total = now_seconds() - tm->start;
  double parts[] = {tm->program,          tm->read,          info.plan_seconds,
                    info.compile_seconds, info.exec_seconds, tm->check,
                    tm->write};
  static const char *const names[] = {"program", "read",  "plan", "compile",
                                      "run",     "check", "write"};
  double other = total;
  char t[32], line[512];
  int n = snprintf(line, sizeof line, "total %s:",
                   fmt_time(t, sizeof t, total));
  for (int k = 0; k < 7; k++) {
    other -= parts[k];
    n += snprintf(line + n, sizeof line - (size_t)n, " %s %s,", names[k],
                  fmt_time(t, sizeof t, parts[k]));
  }
  snprintf(line + n, sizeof line - (size_t)n, " other %s\n",
           fmt_time(t, sizeof t, other > 0 ? other : 0));
  cli_stderr(line);
}

/* explain: galley_program_explain prints the input plan and, when the
 * data is bound, the logical and physical plans (--analyze runs them
 * first, --json prints JSON, --dot Graphviz).  It plans before printing
 * anything, so that a failure leaves stdout empty. */
static int explain_program(galley_program *gp, const prog_opts *o) {
  galley_error err = {0};
  unsigned flags = (o->analyze ? GALLEY_EXPLAIN_ANALYZE : 0) |
                   (o->json ? GALLEY_EXPLAIN_JSON : 0) |
                   (o->dot ? GALLEY_EXPLAIN_DOT : 0) |
                   (o->csrc ? GALLEY_EXPLAIN_C : 0);
  int rc = o->analyze ? set_run_options(gp, o, stderr) : 0;
  if (rc)
    return rc;
  galley_status st = galley_program_explain(gp, stdout, flags, &err);
  if (agree_run(o, st, &err) != GALLEY_OK)
    return report_located(o, &err);
#ifdef GALLEY_MPI
  if (o->dist && !o->json && !o->dot) {
    fflush(stdout);
    dist_cli_explain(o->dist, gp, o->analyze, stdout);
  }
#endif
  return 0;
}

/* Write text to path through a temporary file in the same directory and
 * a rename, so that a failure never leaves a partial file. */
static int write_file(const char *path, const char *text) {
  size_t n = strlen(path);
  char *tmp = malloc(n + 8);
  if (!tmp) {
    cli_error("out of memory");
    return EXIT_DATA;
  }
  memcpy(tmp, path, n);
  memcpy(tmp + n, ".XXXXXX", 8);
  int fd = mkstemp(tmp);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  int ok = f && fputs(text, f) >= 0;
  if (f)
    ok &= fclose(f) == 0;
  else if (fd >= 0)
    close(fd);
  if (ok) {
    /* mkstemp makes the file private; a source file is an ordinary one */
    mode_t mask = umask(0);
    umask(mask);
    ok = chmod(tmp, 0666 & ~mask) == 0 && rename(tmp, path) == 0;
  }
  if (!ok) {
    cli_error("%s: cannot write: %s", path, strerror(errno));
    if (fd >= 0)
      unlink(tmp);
  }
  free(tmp);
  return ok ? 0 : EXIT_DATA;
}

/* compile's --format NAME=FMT: each parsed into fmts[input] (formats[]
 * points at it); a bound sample is converted to it and bound again
 * (converted[] keeps the copies). */
static int compile_formats(galley_program *gp, const prog_opts *o,
                           galley_tensor **tensors, galley_format *fmts,
                           const galley_format **formats,
                           galley_tensor **converted) {
  int n = galley_program_num_inputs(gp);
  for (int f = 0; f < o->nfmts; f++) {
    const binding *fb = &o->fmts[f];
    int k = 0;
    while (k < n && strcmp(galley_program_input_name(gp, k), fb->name) != 0)
      k++;
    if (k == n)
      return unknown_binding(gp, fb->name);
    if (formats[k])
      return usage_error("input '%s' has two --format options", fb->name);
    galley_error err = {0};
    if (galley_format_parse(fb->file, galley_program_input_order(gp, k),
                            &fmts[k], &err) != GALLEY_OK) {
      cli_error("--format %s=%s: %s", fb->name, fb->file,
                strncmp(err.msg, "error: ", 7) == 0 ? err.msg + 7 : err.msg);
      return EXIT_USAGE;
    }
    formats[k] = &fmts[k];
    for (int b = 0; b < o->nbinds; b++) {
      if (o->binds[b].input != k)
        continue;
      if (galley_tensor_convert(tensors[b], &fmts[k], &converted[k], &err) !=
              GALLEY_OK ||
          galley_program_bind(gp, fb->name, converted[k], &err) != GALLEY_OK)
        return report(&err);
    }
  }
  return 0;
}

/* compile: OUT.c and, with --header, OUT.h. */
static int compile_program(galley_program *gp, const prog_opts *o,
                           galley_tensor **tensors) {
  galley_error err = {0};
  char *c_text = NULL, *h_text = NULL;
  int n = galley_program_num_inputs(gp);
  galley_format *fmts = calloc((size_t)n + 1, sizeof *fmts);
  const galley_format **formats = calloc((size_t)n + 1, sizeof *formats);
  galley_tensor **converted = calloc((size_t)n + 1, sizeof *converted);
  int rc = 0;
  if (!fmts || !formats || !converted) {
    cli_error("out of memory");
    rc = EXIT_DATA;
  }
  if (!rc)
    rc = compile_formats(gp, o, tensors, fmts, formats, converted);
  galley_aot_options opt = {o->prefix, formats, o->nonfinite};
  if (!rc &&
      galley_program_compile_aot_with(gp, &opt, &c_text, &h_text, &err) !=
          GALLEY_OK) {
    if (err.status == GALLEY_EINVAL)
      cli_error("cannot compile %s ahead of time: %s", o->prog,
                strncmp(err.msg, "error: ", 7) == 0 ? err.msg + 7 : err.msg);
    rc = err.status == GALLEY_EINVAL ? EXIT_DATA : report_located(o, &err);
  }
  if (!rc)
    rc = write_file(o->out_c, c_text);
  if (!rc && o->out_h)
    rc = write_file(o->out_h, h_text);
  free(c_text);
  free(h_text);
  /* the program borrows what is bound: give it back the samples first */
  for (int b = 0; converted && b < o->nbinds; b++)
    if (converted[o->binds[b].input])
      (void)galley_program_bind(gp, o->binds[b].name, tensors[b], NULL);
  for (int k = 0; converted && k < n; k++)
    galley_tensor_free(converted[k]);
  free(converted);
  free(formats);
  free(fmts);
  return rc;
}

/* run: bind, run, warn, write; -v accounts for the time. */
static int run_command(galley_program *gp, prog_opts *o,
                       galley_tensor **tensors, run_times *tm) {
  int rc = bind_files(gp, o, tensors, tm);
  if (!rc)
    rc = run_program(gp, o, tm);
  if (!rc) {
    double t0 = now_seconds();
    cli_progress_set("checking the results");
    if (speaks(o))
      warn_results(gp, o);
    tm->check = now_seconds() - t0;
  }
  if (!rc)
    rc = write_outputs(gp, o, tm);
  cli_progress_stop();
  if (!rc && o->verbose)
    print_times(gp, tm);
  return rc;
}

/* The steps shared by run, explain and compile, then the command's own
 * work. */
static int cmd_program(int argc, char **argv, prog_cmd cmd, double start,
                       DistCli *dist) {
  prog_opts o;
  galley_program *gp = NULL;
  galley_tensor **tensors = NULL;
  run_times tm = {start, 0, 0, 0, 0, 0};
  int rc = parse_prog_opts(argc, argv, cmd, &o);
  o.dist = dist;
  if (!rc && cmd == CMD_RUN) {
    cli_install_signal_cleanup();
    if (!o.quiet)
      cli_progress_start(start);
  }
  if (!rc) {
    cli_progress_set("reading %s", o.prog);
    rc = load_program(o.prog, &gp);
    tm.program = now_seconds() - start;
  }
  if (!rc) {
    galley_program_set_planner(gp, o.planner);
    galley_program_set_estimator(gp, o.estimator);
    galley_program_set_search(gp, o.search);
    galley_program_set_memory_budget(gp, o.memory_budget, NULL);
    galley_program_set_threads(gp, o.threads, NULL);
#ifdef GALLEY_MPI
    if (dist)
      dist_cli_attach(dist, gp);
#endif
    rc = match_bindings(gp, &o);
  }
  if (!rc && cmd == CMD_RUN)
    rc = check_all_bound(gp, &o);
  if (!rc && cmd == CMD_EXPLAIN && (o.analyze || o.dot || o.csrc))
    rc = check_all_bound(gp, &o);
  if (!rc && !(tensors = calloc((size_t)o.nbinds + 1, sizeof *tensors))) {
    cli_error("out of memory");
    rc = EXIT_DATA;
  }
  if (!rc && cmd == CMD_RUN)
    rc = run_command(gp, &o, tensors, &tm);
  else if (!rc)
    rc = bind_files(gp, &o, tensors, &tm);
  if (!rc && cmd == CMD_EXPLAIN)
    rc = explain_program(gp, &o);
  if (!rc && cmd == CMD_COMPILE)
    rc = compile_program(gp, &o, tensors);
  cli_progress_stop();
#ifdef GALLEY_MPI
  if (rc && dist && dist_cli_failed_rank(dist) > 0)
    cli_error("rank %d of %d failed first; every rank stopped",
              dist_cli_failed_rank(dist), dist_cli_size(dist));
#endif
  galley_program_free(gp);
  for (int b = 0; tensors && b < o.nbinds; b++)
    galley_tensor_free(tensors[b]);
  free(tensors);
  free(o.binds);
  free(o.fmts);
  return rc;
}

/* The help of one command: 0 after printing it, a usage error for an
 * unknown command. */
static int command_help(const char *cmd) {
  static const struct {
    const char *name;
    const char **text;
  } helps[] = {{"info", &info_help},       {"convert", &convert_help},
               {"run", &run_help},         {"explain", &explain_help},
               {"compile", &compile_help}};
  for (size_t k = 0; k < sizeof helps / sizeof helps[0]; k++)
    if (strcmp(cmd, helps[k].name) == 0) {
      fputs(*helps[k].text, stdout);
      return 0;
    }
  return usage_error("unknown command '%s'", cmd);
}

/* run and explain: on every rank under mpirun (MPI builds), else as one
 * process. */
static int cmd_many(int argc, char **argv, prog_cmd cmd, double start) {
  DistCli *dist = NULL;
#ifdef GALLEY_MPI
  galley_error err = {0};
  int failed = 0;
  dist = dist_cli_start(&argc, &argv, &failed, &err);
  if (failed)
    return report(&err);
#endif
  int rc = cmd_program(argc - 2, argv + 2, cmd, start, dist);
#ifdef GALLEY_MPI
  dist_cli_end(dist);
#endif
  return rc;
}

int main(int argc, char **argv) {
  double start = now_seconds();
  if (argc < 2)
    return usage_error("%s", "missing command");
  const char *cmd = argv[1];
  if (strcmp(cmd, "help") == 0 && argc > 2)
    return command_help(argv[2]);
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
      strcmp(cmd, "help") == 0) {
    fputs(usage_text, stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("galleyc %s\n", GALLEY_VERSION_STRING);
    return 0;
  }
  for (int a = 2; a < argc; a++)
    if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0)
      return command_help(cmd);
  if (strcmp(cmd, "info") == 0)
    return cmd_info(argc - 2, argv + 2);
  if (strcmp(cmd, "convert") == 0)
    return cmd_convert(argc - 2, argv + 2);
  if (strcmp(cmd, "run") == 0)
    return cmd_many(argc, argv, CMD_RUN, start);
  if (strcmp(cmd, "explain") == 0)
    return cmd_many(argc, argv, CMD_EXPLAIN, start);
  if (strcmp(cmd, "compile") == 0)
    return cmd_program(argc - 2, argv + 2, CMD_COMPILE, start, NULL);
  return usage_error("unknown command '%s'", cmd);
}
