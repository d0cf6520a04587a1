/*
 * dist_cli.c -- the galleyc command under mpirun (dist_cli.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "dist_cli.h"
#include "relation.h"
#include "rt_internal.h"
#include "run.h"

struct DistCli {
  DistComm c;
  DistRun run;
  int64_t input_bytes; /* packed bytes of the inputs rank 0 broadcast */
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

galley_status dist_cli_read(DistCli *d, const char *path, galley_tensor **out,
                            galley_error *err) {
  *out = NULL;
  galley_tensor *t = NULL;
  galley_status st = GALLEY_OK;
  if (d->c.rank == 0)
    st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, err);
  st = dist_agree(&d->c, st, err);
  if (st != GALLEY_OK)
    return st;
  DistBlob b = {0};
  if (d->c.rank == 0)
    st = dist_pack(t, -1, 0, 0, 0, 0, &b, err);
  st = dist_agree(&d->c, st, err);
  if (st == GALLEY_OK)
    st = dist_bcast_blob(&d->c, &b.data, &b.len, 0, err);
  d->input_bytes += b.len;
  if (st == GALLEY_OK && d->c.rank != 0) {
    const void *data = b.data;
    st = dist_unpack(1, &data, &b.len, -1, 0, NULL, NULL, NULL, 0, &t, err);
  }
  free(b.data);
  st = dist_agree(&d->c, st, err);
  if (st != GALLEY_OK)
    t = galley_tensor_free(t);
  *out = t;
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

void dist_cli_attach(DistCli *d, galley_program *gp) {
  gp->parts = &d->run.parts;
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
  dist_run_print(&d->run, gp->plan, measured, d->input_bytes,
                 d->c.rank == 0 ? f : NULL);
}
