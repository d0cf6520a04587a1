/*
 * comm.h -- the communication layer of the tensor relational layer
 * (issue 15): the one place that calls MPI.
 *
 * Everything above it (relation.c, run.c, the galleyc command) exchanges
 * bytes through these functions, which
 *   - count the bytes this process sends to other processes
 *     (DistComm.bytes_sent; a broadcast counts at its root, once per
 *     receiver: the algebra's bytes, not the wire's);
 *   - take 64-bit lengths and split transfers into rounds that keep every
 *     count and displacement MPI sees below its 32-bit limit
 *     (DistComm.chunk is that limit in bytes; tests lower it);
 *   - never leave a process waiting for one that failed: dist_agree is a
 *     collective every process reaches after each step with its own
 *     status, and all of them return the first failure (the lowest
 *     failing rank's status and message).  A transfer that needs memory
 *     agrees on the allocation before it moves data.
 *
 * Without mpirun nothing here is called: dist_launched() reads the
 * launcher's environment, so a plain `galleyc run` never initializes MPI.
 */
#ifndef GALLEY_DIST_COMM_H
#define GALLEY_DIST_COMM_H

#include <stdint.h>

#include <mpi.h>

#include "galley.h"

typedef struct DistComm {
  MPI_Comm comm;      /* a duplicate of MPI_COMM_WORLD */
  int rank, size;
  int64_t chunk;      /* most bytes one MPI call moves per peer (and in
                         all); INT_MAX by default */
  int64_t bytes_sent; /* payload bytes sent to other processes */
  int64_t messages;   /* collective calls that moved payload */
  int failed_rank;    /* after a failed dist_agree: the rank that failed
                         first (lowest), else -1 */
  int agreed;         /* the last dist_agree reported a failure to every
                         process: nothing more to agree on */
  int owns_mpi;       /* dist_comm_init started MPI: finish ends it */
} DistComm;

/* Whether this process was started by mpirun (or another MPI launcher):
 * its environment names a rank.  Without it galleyc stays one process. */
int dist_launched(void);

/* MPI_Init and a communicator of all processes.  GALLEY_EINTERNAL when
 * MPI cannot start. */
galley_status dist_comm_init(DistComm *c, int *argc, char ***argv,
                             galley_error *err);

/* Over a caller's communicator (MPI already initialized by the caller):
 * a duplicate of comm.  GALLEY_EINVAL when MPI is not initialized (or
 * already finalized) or comm is MPI_COMM_NULL. */
galley_status dist_comm_from(DistComm *c, MPI_Comm comm, galley_error *err);

/* Free the communicator, and MPI_Finalize when dist_comm_init started
 * MPI. */
void dist_comm_finish(DistComm *c);

/* Stop every process now (MPI_Abort) with exit status code: for a
 * process that cannot reach the next dist_agree. */
void dist_comm_abort(DistComm *c, int code);

/* The collective status check: every process passes its own status (and
 * err with its message when it failed).  All return GALLEY_OK when every
 * status was GALLEY_OK; else every process returns the status of the
 * lowest failing rank, whose message is copied into err (with line and
 * column), and c->failed_rank names it. */
galley_status dist_agree(DistComm *c, galley_status st, galley_error *err);

/* Broadcast len bytes at buf from root (len equal on every process). */
void dist_bcast(DistComm *c, void *buf, int64_t len, int root);

/* Broadcast a buffer whose length only root knows: *buf and *len at root;
 * the others receive a malloc()ed *buf and *len.  Collective on
 * failures: an allocation that fails anywhere fails everywhere. */
galley_status dist_bcast_blob(DistComm *c, void **buf, int64_t *len,
                              int root, galley_error *err);

/* The all-to-all shuffle: process p sends scount[d] bytes starting at
 * send + sdispl[d] to each process d (its own block included, copied
 * locally).  The counts are exchanged first; *recv (malloc()ed, freed by

 * the caller, receives from each source s rcount[s] bytes at rdispl[s],
 * in rank order.  rcount and rdispl have c->size entries.  Transfers
 * beyond c->chunk bytes go in rounds. */
galley_status dist_alltoallv(DistComm *c, const void *send,
                             const int64_t *scount, const int64_t *sdispl,
                             void **recv, int64_t *rcount, int64_t *rdispl,
                             galley_error *err);

/* Every process's len bytes, concatenated in rank order, to root (root
 * -1: to every process).  Processes that receive get a malloc()ed *recv
 * and rcount[], rdispl[] per source; others get *recv NULL. */
galley_status dist_gather(DistComm *c, const void *send, int64_t len,
                          int root, void **recv, int64_t *rcount,
                          int64_t *rdispl, galley_error *err);

/* Every process but root sends the len bytes at send to root, which
 * receives process s's bytes straight into dst[s] (lens[s] of them,
 * known to root from an earlier exchange; dst[root] and lens[root]
 * unused): no staging buffer, no copy.  Point-to-point, in pieces of at
 * most c->chunk bytes.  The caller agrees on the lengths first. */
void dist_gather_into(DistComm *c, const void *send, int64_t len, int root,
                      void *const *dst, const int64_t *lens);

/* Sum of v over all processes (a small allreduce, not counted as
 * payload). */
int64_t dist_sum_i64(DistComm *c, int64_t v);

/* Element-wise sums of the n int64 at v over all processes, in place on
 * every process (an allreduce, in pieces below MPI's int counts;
 * counted as a reduce-scatter and an allgather: 16 n (P - 1) / P bytes
 * a process). */
void dist_sum_i64_array(DistComm *c, int64_t *v, int64_t n);

/* The largest v of all processes (not counted as payload). */
double dist_max_f64(DistComm *c, double v);

#endif /* GALLEY_DIST_COMM_H */
