/*
 * dist_cli.h -- what the galleyc command calls under mpirun (issue 15).
 * Built into galleyc only when MPI is (GALLEY_MPI); without mpirun
 * dist_cli_start returns NULL and the command runs as one process.
 *
 * Under mpirun every rank runs the command: rank 0 reads each input and
 * broadcasts it, every rank plans and compiles the same kernels, runs its
 * blocks (run.h), and rank 0 alone prints and writes the results, after
 * every rank agreed that every step succeeded.  The other ranks' standard
 * output and error are silenced: rank 0 reports a failure of any rank,
 * naming the rank, and every rank exits with the same status.
 */
#ifndef GALLEY_DIST_CLI_H
#define GALLEY_DIST_CLI_H

#include <stdio.h>

#include "galley.h"

typedef struct DistCli DistCli;

/* NULL when this process was not started by an MPI launcher, or when MPI
 * does not start (then *err says why and *failed is set). */
DistCli *dist_cli_start(int *argc, char ***argv, int *failed,
                        galley_error *err);

/* MPI_Finalize and free. */
void dist_cli_end(DistCli *d);

int dist_cli_rank(const DistCli *d);
int dist_cli_size(const DistCli *d);

/* The lowest rank whose failure the last agreement reported, or -1. */
int dist_cli_failed_rank(const DistCli *d);

/* Read a tensor file at rank 0 and broadcast it: every rank gets an
 * equal tensor (collective; the status is every rank's). */
galley_status dist_cli_read(DistCli *d, const char *path, galley_tensor **out,
                            galley_error *err);

/* Agree on a step's status (collective): every rank returns the first
 * failure, with its message. */
galley_status dist_cli_agree(DistCli *d, galley_status st, galley_error *err);

/* The exit status rank 0 decided, on every rank (collective). */
int dist_cli_agree_rc(DistCli *d, int rc);

/* Make the program's runs distributed (its kernels run on blocks), each
 * rank on its share of the machine's cores unless -j or GALLEY_THREADS
 * set the threads. */
void dist_cli_attach(DistCli *d, galley_program *gp);

/* After galley_program_run (or explain): agree when the run has not
 * already made every rank agree (collective). */
galley_status dist_cli_after_run(DistCli *d, galley_status st,
                                 galley_error *err);

/* Print the distributed plan of gp's current plan to f (rank 0), with
 * the measured bytes of the last run when measured (collective). */
void dist_cli_explain(DistCli *d, galley_program *gp, int measured, FILE *f);

#endif /* GALLEY_DIST_CLI_H */
