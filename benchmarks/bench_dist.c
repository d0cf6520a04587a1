/*
 * bench_dist.c -- SpMV and SpGEMM through galleyc's distributed layer
 * (src/dist), to compare with PETSc's MatMult and MatMatMult
 * (benchmarks/petsc_dist.c) at the same rank counts:
 *
 *   mpirun -np N benchmarks/bench_dist MATRIX.mtx[.gz] [REPS]
 *
 * The matrix is read as `galleyc run` reads it under mpirun (read.h:
 * every rank parses its byte range; a gzip file is decompressed by rank
 * 0 and its ranges scattered); the time of that read and of rank 0
 * reading the whole file and broadcasting it (the old way) are printed
 * first (read_split_ms, read_whole_ms: the slowest rank's).  The vector
 * x is all ones.  With several ranks, SpGEMM is then also run by the
 * implementation algebra's grid join (join.h) on the matrix read into
 * row blocks (each rank keeping its own): every grid of the ranks, with
 * the cost model's predicted bytes, the measured bytes and the time (its
 * tile kernels are tcc's), the planner's choice marked.  Each repetition runs the whole program with
 * galley_program_run (clang kernels, compiled before timing): every
 * rank's block of rows (cut by work), the result gathered to rank 0.
 * Printed: the median wall time of a run (the slowest rank's), and the
 * bytes the layer sent per run.  PETSc leaves its results distributed;
 * ours ends on rank 0, so the gather is part of our time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "benchutil.h"
#include "comm.h"
#include "join.h"
#include "read.h"
#include "relation.h"
#include "run.h"

static double timed_runs(DistComm *c, DistRun *run, galley_program *p,
                         int reps, int64_t *bytes) {
  galley_error err;
  double *t = calloc((size_t)reps, sizeof *t);
  /* warm: plan, compile (clang, cached), first touch */
  if (galley_program_run(p, &err) != GALLEY_OK ||
      galley_program_wait_compiled(p, &err) != GALLEY_OK ||
      galley_program_run(p, &err) != GALLEY_OK) {
    fprintf(stderr, "bench_dist: %s\n", err.msg);
    dist_comm_abort(c, 1);
  }
  int64_t b0 = c->bytes_sent;
  for (int r = 0; r < reps; r++) {
    dist_sum_i64(c, 0); /* line the ranks up */
    double t0 = now_ms();
    galley_status st = galley_program_run(p, &err);
    double mine = now_ms() - t0;
    if (st != GALLEY_OK) {
      fprintf(stderr, "bench_dist: %s\n", err.msg);
      dist_comm_abort(c, 1);
    }
    t[r] = dist_max_f64(c, mine); /* the slowest rank's time */
  }
  *bytes = dist_sum_i64(c, c->bytes_sent - b0) / reps;
  double m = median_of(t, reps);
  free(t);
  (void)run;
  return m;
}

/* SpGEMM by every grid of the ranks (the relation read in row blocks). */
static void grid_joins(DistComm *c, const char *path) {
  galley_error err;
  DistRelation rel;
  DistReadInfo info;
  if (dist_read_relation(c, path, 0, &rel, &info, &err) != GALLEY_OK)
    dist_comm_abort(c, 1);
  DistMatmulIn in;
  if (dist_matmul_in(c, &rel, &rel, &in, &err) != GALLEY_OK)
    dist_comm_abort(c, 1);
  const char *chain = getenv("GALLEY_DIST_CHAIN"); /* the chain bound */
  in.chain = chain && *chain == '1';
  DistCost cost[64];
  int ng = 0, pick = dist_matmul_plan(&in, cost, &ng);
  for (int k = 0; k < ng; k++) {
    DistMatmulOut out;
    dist_sum_i64(c, 0);
    double t0 = now_ms();
    if (dist_matmul(c, &rel, &rel, cost[k].g, &out, &err) != GALLEY_OK)
      dist_comm_abort(c, 1);
    double ms = dist_max_f64(c, now_ms() - t0);
    if (c->rank == 0)
      printf("galleyc grid SpGEMM %s ranks=%d grid=%dx%dx%d method=%s "
             "predicted_bytes=%.0f measured_bytes=%lld ms=%.1f%s\n", path,
             c->size, cost[k].g.pi, cost[k].g.pj, cost[k].g.pk,
             dist_grid_method(cost[k].g), cost[k].bytes,
             (long long)(out.bytes_a + out.bytes_b + out.bytes_c), ms,
             k == pick ? " chosen" : "");
    dist_matmul_out_free(&out);
  }
  dist_matmul_in_free(&in);
  dist_relation_free(&rel);
}

int main(int argc, char **argv) {
  DistComm c;
  galley_error err;
  if (dist_comm_init(&c, &argc, &argv, &err) != GALLEY_OK || argc < 2) {
    fprintf(stderr, "usage: mpirun -np N bench_dist MATRIX.mtx [REPS]\n");
    return 2;
  }
  int reps = argc > 2 ? atoi(argv[2]) : 20;
  galley_tensor *A = NULL, *x = NULL, *W = NULL;
  DistReadInfo info;
  dist_sum_i64(&c, 0);
  double t0 = now_ms();
  galley_status st = dist_read_tensor(&c, argv[1], 0, &A, &info, &err);
  double split_ms = dist_max_f64(&c, now_ms() - t0);
  if (st == GALLEY_OK) { /* the old way, for comparison */
    dist_sum_i64(&c, 0);
    t0 = now_ms();
    st = dist_read_tensor(&c, argv[1], INT64_MAX, &W, &info, &err);
  }
  double whole_ms = dist_max_f64(&c, now_ms() - t0);
  galley_tensor_free(W);
  if (st != GALLEY_OK) {
    if (c.rank == 0)
      fprintf(stderr, "bench_dist: %s\n", err.msg);
    dist_comm_finish(&c);
    return 1;
  }
  if (c.rank == 0)
    printf("galleyc read %s ranks=%d read_split_ms=%.1f read_whole_ms=%.1f\n",
           argv[1], c.size, split_ms, whole_ms);
  int64_t n = A->dims[1];
  double *ones = malloc((size_t)n * sizeof *ones);
  for (int64_t j = 0; j < n; j++)
    ones[j] = 1;
  galley_format dense = galley_format_dense(1);
  galley_tensor_from_dense(1, &n, ones, 0, &dense, &x, &err);
  free(ones);
  static const char *const progs[2] = {
      "input A[i, j], x[j]\ny[i] = sum(j: A[i, j] * x[j])\n",
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n"};
  static const char *const names[2] = {"SpMV", "SpGEMM"};
  DistRun run;
  dist_run_init(&run, &c);
  for (int k = 0; k < 2; k++) {
    galley_program *p = NULL;
    if (galley_program_parse("bench.tin", progs[k], strlen(progs[k]), &p,
                             NULL, &err) != GALLEY_OK)
      dist_comm_abort(&c, 1);
    galley_program_bind(p, "A", A, &err);
    galley_program_bind(p, k == 0 ? "x" : "B", k == 0 ? x : A, &err);
    galley_program_set_backend(p, GALLEY_BACKEND_CLANG, NULL);
    p->parts = &run.parts;
    int64_t bytes = 0;
    double ms = timed_runs(&c, &run, p, k == 0 ? reps : reps / 4 + 1, &bytes);
    if (c.rank == 0)
      printf("galleyc %s %s ranks=%d median_ms=%.3f bytes_per_run=%lld\n",
             names[k], argv[1], c.size, ms, (long long)bytes);
    galley_program_free(p);
  }
  dist_run_free(&run);
  if (c.size > 1)
    grid_joins(&c, argv[1]);
  galley_tensor_free(A);
  galley_tensor_free(x);
  dist_comm_finish(&c);
  return 0;
}
