/*
 * api_dist.c -- the C API's communicator (galley_context_set_mpi_comm,
 * issue 15): a program made from a context with a communicator owns a
 * duplicate of it and the distributed run's hooks (run.h).
 *
 * Built into libgalley only in MPI builds.  context.c reaches this file
 * only through the function pointer galley_context_set_mpi_comm stores,
 * so a program that never calls it links no MPI.
 */
#include <stdlib.h>

#include "api_internal.h"
#include "comm.h"
#include "rt_internal.h"
#include "run.h"

/* What a program owns: the communicator first (tests read its counters
 * through the program's dist pointer). */
typedef struct ApiDist {
  DistComm c;
  DistRun run;
} ApiDist;

static void api_dist_free(void *v) {
  ApiDist *d = v;
  if (!d)
    return;
  dist_run_free(&d->run);
  dist_comm_finish(&d->c); /* frees the duplicate; MPI stays the caller's */
  free(d);
}

static galley_status api_dist_attach(galley_program *p, int fcomm,
                                     galley_error *err) {
  ApiDist *d = calloc(1, sizeof *d);
  if (!d)
    return rt_error(err, GALLEY_ENOMEM, "out of memory");
  galley_status st = dist_comm_from(&d->c, MPI_Comm_f2c(fcomm), err);
  if (st != GALLEY_OK) {
    free(d);
    return st;
  }
  dist_run_init(&d->run, &d->c);
  d->run.all_results = 1; /* every process gets the whole results */
  if (p->dist_free)
    p->dist_free(p->dist);
  p->dist = d;
  p->dist_free = api_dist_free;
  p->parts = &d->run.parts;
  return GALLEY_OK;
}

galley_status galley_context_set_mpi_comm(galley_context *ctx, int fcomm,
                                          galley_error *err) {
  rt_error_clear(err);
  if (!ctx)
    return rt_error(err, GALLEY_EINVAL, "galley_context_set_mpi_comm: the "
                    "context is NULL");
  if (fcomm == GALLEY_NO_COMM) {
    api_context_set_comm(ctx, GALLEY_NO_COMM, NULL);
    return GALLEY_OK;
  }
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin)
    return rt_error(err, GALLEY_EINVAL, "galley_context_set_mpi_comm: MPI "
                    "is not initialized (call MPI_Init first)");
  if (MPI_Comm_f2c(fcomm) == MPI_COMM_NULL)
    return rt_error(err, GALLEY_EINVAL, "galley_context_set_mpi_comm: the "
                    "communicator is MPI_COMM_NULL");
  api_context_set_comm(ctx, fcomm, api_dist_attach);
  return GALLEY_OK;
}
