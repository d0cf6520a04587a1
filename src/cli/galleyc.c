/*
 * galleyc.c -- the galleyc command.
 *
 * Subcommands available now: `info` (load a tensor file and describe it)
 * and `convert` (load, change format, write).  `run`, `explain` and
 * `compile` of tin.md section 7 arrive with the front end and code
 * generator; until then they say so and exit with the usage status.
 *
 * Exit status: 0 success, 1 program error (.tin), 2 usage error, 3 data
 * error (unreadable or malformed file, bad format), 4 internal error or
 * out of memory.  The same table is in man/galleyc.1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "galley.h"

enum {
  EXIT_PROGRAM = 1, /* malformed or meaningless .tin program */
  EXIT_USAGE = 2,   /* bad command line */
  EXIT_DATA = 3,    /* unreadable or malformed data, bad format */
  EXIT_INTERNAL = 4 /* bug or out of memory */
};

static const char *usage_text =
    "usage: galleyc info FILE [--format=FMT] [--stats] [-v]\n"
    "       galleyc convert IN OUT [--format=FMT]\n"
    "       galleyc --help | --version\n"
    "\n"
    "Commands:\n"
    "  info      read a tensor file (.mtx, .tns, optionally .gz) and print its\n"
    "            order, dims, stored entries, nnz, fill, format and memory\n"
    "  convert   read IN, store it in FMT, and write OUT (.tns or .mtx by\n"
    "            extension, .gz compresses)\n"
    "  run, explain, compile\n"
    "            run a .tin program (tin.md section 7): not available yet in\n"
    "            this version; they arrive with the .tin front end\n"
    "\n"
    "Options:\n"
    "  --format=FMT  storage format, one level kind per mode, outermost first:\n"
    "                dense|d, list|s, hash|h, bytemap|b, each optionally with\n"
    "                :MODE for the logical mode it stores, e.g. dense:1,list:0\n"
    "                (CSC).  Default: dense then sorted lists (CSR/CSF).\n"
    "  --stats       also print the degree statistics of the non-fill entries\n"
    "  -v            also print the time taken to read and convert\n"
    "  -h, --help    print this help and exit\n"
    "  --version     print the version and exit\n"
    "\n"
    "Exit status: 0 success, 1 program error, 2 usage error, 3 data error,\n"
    "4 internal error or out of memory.\n";

/* Options shared by the subcommands. */
typedef struct cli_opts {
  const char *format; /* --format text, or NULL */
  int stats;          /* --stats */
  int verbose;        /* -v */
  const char *args[2]; /* positional arguments */
  int nargs;
} cli_opts;

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "galleyc: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nTry 'galleyc --help' for more information.\n");
  return EXIT_USAGE;
}

/* Exit status for a runtime failure, after printing its message. */
static int report(const galley_error *err) {
  fprintf(stderr, "%s\n", err->msg[0] ? err->msg : galley_status_name(err->status));
  switch (err->status) {
  case GALLEY_EIO:
  case GALLEY_EDATA:
  case GALLEY_EINVAL:
  case GALLEY_EOVERFLOW:
    return EXIT_DATA;
  default:
    return EXIT_INTERNAL;
  }
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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
      return usage_error("unknown option '%s'", s);
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
    fprintf(stderr, "galleyc: out of memory\n");
    return EXIT_INTERNAL;
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
  if (galley_tensor_write(t, o.args[1], GALLEY_FILE_AUTO, &err) != GALLEY_OK)
    rc = report(&err);
  galley_tensor_free(t);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return usage_error("%s", "missing command");
  const char *cmd = argv[1];
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
    if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
      fputs(usage_text, stdout);
      return 0;
    }
  if (strcmp(cmd, "info") == 0)
    return cmd_info(argc - 2, argv + 2);
  if (strcmp(cmd, "convert") == 0)
    return cmd_convert(argc - 2, argv + 2);
  if (strcmp(cmd, "run") == 0 || strcmp(cmd, "explain") == 0 ||
      strcmp(cmd, "compile") == 0)
    return usage_error("'%s' is not available yet in this version (the .tin "
                       "front end is not built yet)",
                       cmd);
  return usage_error("unknown command '%s'", cmd);
}
