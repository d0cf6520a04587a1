/*
 * dist_cli.c -- the galleyc command under mpirun (dist_cli.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "api_internal.h"
#include "dist_cli.h"
#include "read.h"
#include "relation.h"
#include "rt_internal.h"
#include "run.h"

struct DistCli {
  DistComm c;
  DistRun run;
  int64_t input_bytes; /* bytes all ranks sent reading the inputs */
  int inputs_split;    /* inputs read in byte ranges by every rank */
  int inputs_whole;    /* inputs read by rank 0 and broadcast */
};

DistCli *dist_cli_start(int *argc, char ***argv, int *failed,
                        galley_error *err) {
  *failed = 0;
  if (!dist_launched())
    return NULL;
  DistCli *d = calloc(1, sizeof *d);
  if (!d) {
    *failed = 1;
    rt_error(err, GALLEY_ENOMEM, "out of memory");
    return NULL;
  }
  if (dist_comm_init(&d->c, argc, argv, err) != GALLEY_OK) {
    *failed = 1;
    free(d);
    return NULL;
  }
  dist_run_init(&d->run, &d->c);
  if (d->c.rank != 0) { /* rank 0 speaks for all */
    if (!freopen("/dev/null", "w", stdout) ||
        !freopen("/dev/null", "w", stderr))
      clearerr(stderr);
  }
  return d;
}

void dist_cli_end(DistCli *d) {
  if (!d)
    return;
  dist_run_free(&d->run);
  dist_comm_finish(&d->c);
  free(d);
}

int dist_cli_rank(const DistCli *d) { return d->c.rank; }
int dist_cli_size(const DistCli *d) { return d->c.size; }
int dist_cli_failed_rank(const DistCli *d) { return d->c.failed_rank; }

/* The smallest file read in byte ranges: GALLEY_DIST_SPLIT_READ=BYTES
 * (0: every file; the tests use it on small files), else read.h's
 * default. */
static int64_t split_read_min(void) {
  const char *v = getenv("GALLEY_DIST_SPLIT_READ");
  char *end = NULL;
  long long n = v && *v ? strtoll(v, &end, 10) : -1;
  return n >= 0 && end && *end == '\0' ? (int64_t)n : DIST_SPLIT_READ_MIN;
}

galley_status dist_cli_read(DistCli *d, const char *path, galley_tensor **out,
                            galley_error *err) {
  DistReadInfo info;
  galley_status st = dist_read_tensor(&d->c, path, split_read_min(), out,
                                      &info, err);
  d->input_bytes += dist_sum_i64(&d->c, info.sent);
  d->inputs_split += info.split;
  d->inputs_whole += !info.split;
  return st;
}

galley_status dist_cli_agree(DistCli *d, galley_status st, galley_error *err) {
  return dist_agree(&d->c, st, err);
}

int dist_cli_agree_rc(DistCli *d, int rc) {
  int v = rc;
  dist_bcast(&d->c, &v, (int64_t)sizeof v, 0);
  return v;
}

/* The threads a rank runs when neither -j nor GALLEY_THREADS says: the
 * cores shared by the ranks on this machine (Open MPI names how many
 * there are), at least one -- 2 ranks on 2 cores run a thread each, not
 * two that fight for the cores. */
static int rank_threads(void) {
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  long n = local ? strtol(local, NULL, 10) : 0;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1 || cores < 1)
    return 0; /* the default */
  return cores / n > 1 ? (int)(cores / n) : 1;
}

void dist_cli_attach(DistCli *d, galley_program *gp) {
  gp->parts = &d->run.parts;
  const char *env = getenv("GALLEY_THREADS");
  if (gp->threads == 0 && !(env && *env))
    galley_program_set_threads(gp, rank_threads(), NULL);
}

galley_status dist_cli_after_run(DistCli *d, galley_status st,
                                 galley_error *err) {
  if (st != GALLEY_OK && d->c.agreed)
    return st;
  return dist_agree(&d->c, st, err);
}

void dist_cli_explain(DistCli *d, galley_program *gp, int measured, FILE *f) {
  if (!gp->plan)
    return;
  DistInputs in = {d->inputs_split, d->inputs_whole, d->input_bytes};
  dist_run_print(&d->run, gp->plan, measured, &in,
                 (const galley_tensor *const *)gp->bound,
                 d->c.rank == 0 ? f : NULL);
}
