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
 * the cost model's predicted bytes, the measured bytes and the time, the
 * planner's choice marked (only with BENCH_DIST_GRIDS=1: slow on big
 * matrices).  Each repetition runs the whole program with
 * galley_program_run (clang kernels, compiled before timing, one thread
 * per rank as PETSc has): every rank's block of rows (cut by work:
 * SpGEMM's rows weigh their multiply-adds), twice: the result left in
 * the ranks' row blocks (result=distributed, as PETSc leaves its
 * products: DistRun.keep_blocks) and gathered to rank 0 (result=rank0,
 * as `galleyc run` writes it).  Printed: the median wall time of a run
 * (the slowest rank's), and the bytes the layer sent per run.
 */
#include <math.h>
#include <stdint.h>
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
    if (dist_matmul(c, &rel, &rel, cost[k].g, NULL, &out, &err) != GALLEY_OK)
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

/* ---- the planner study: every grid on generated matrices ----
 * `bench_dist --grids`: for shapes x densities x structures (uniform,
 * skewed rows, a band), both factors generated alike on every rank (a
 * fixed seed), scattered into row blocks cut by work; for every grid of
 * the ranks the join (dist_matmul) and the gather of C to rank 0 are run
 * and their bytes measured; the cost model (tile histograms, sampled
 * rows, the gather counted: as `galleyc run` plans) picks one.  A line
 * per grid, then per case whether the choice sent the fewest bytes. */

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 17;
}

/* m x n: structure 0 uniform, 1 skewed rows (a tenth of the rows hold
 * most entries), 2 a band of the density's width. */
static galley_tensor *gen_matrix(int64_t m, int64_t n, double density,
                                 int structure, uint64_t seed) {
  int64_t want = (int64_t)((double)m * (double)n * density) + 1, k = 0;
  int64_t *crd = malloc((size_t)want * 2 * sizeof *crd);
  double *val = malloc((size_t)want * sizeof *val);
  uint64_t s = seed;
  for (int64_t e = 0; e < want; e++) {
    int64_t i = (int64_t)(lcg(&s) % (uint64_t)m), j;
    if (structure == 1 && lcg(&s) % 10 < 8)
      i = (int64_t)(lcg(&s) % (uint64_t)(m / 10 + 1));
    if (structure == 2) {
      int64_t w = (int64_t)(density * (double)n) + 1;
      int64_t c = i * n / m - w / 2 + (int64_t)(lcg(&s) % (uint64_t)w);
      j = c < 0 ? 0 : c >= n ? n - 1 : c;
    } else {
      j = (int64_t)(lcg(&s) % (uint64_t)n);
    }
    crd[2 * k] = i;
    crd[2 * k + 1] = j;
    val[k++] = (double)(1 + lcg(&s) % 9);
  }
  galley_tensor *t = NULL;
  galley_tensor_from_coo(2, (int64_t[]){m, n}, k, crd, val, 0, NULL, &t,
                         NULL);
  free(crd);
  free(val);
  return t;
}

static void grid_study(DistComm *c) {
  static const struct {
    int64_t m, n, p;
  } shapes[] = {{2000, 2000, 2000}, {8000, 300, 8000}, {300, 8000, 300},
                {6000, 2000, 200}, {200, 2000, 6000}};
  static const double densities[] = {0.02, 0.002, 0.3};
  static const char *const structs[] = {"uniform", "skewed", "band"};
  int cases = 0, fewest = 0, near = 0;
  galley_error err;
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
    for (size_t dn = 0; dn < sizeof densities / sizeof densities[0]; dn++)
      for (int st = 0; st < 3; st++) {
        int64_t m = shapes[sh].m, n = shapes[sh].n, p = shapes[sh].p;
        double d = densities[dn];
        double flops = d * d * (double)m * (double)n * (double)p;
        double cnnz = flops < (double)m * (double)p ? flops
                                                    : (double)m * (double)p;
        if (d * (double)m * (double)n > 2e6 ||
            d * (double)n * (double)p > 2e6 || cnnz > 1.5e6)
          continue; /* small enough for 9 ranks on 2 cores */
        galley_tensor *A = gen_matrix(m, n, d, st, 11 + sh * 7 + dn);
        galley_tensor *B = gen_matrix(n, p, d, st, 97 + sh * 7 + dn);
        DistRelation ra, rb;
        if (dist_relation_scatter(c, 0, A, 0, &ra, &err) != GALLEY_OK ||
            dist_relation_scatter(c, 0, B, 0, &rb, &err) != GALLEY_OK)
          dist_comm_abort(c, 1);
        DistMatmulIn in;
        if (dist_matmul_in(c, &ra, &rb, &in, &err) != GALLEY_OK)
          dist_comm_abort(c, 1);
        DistJoinSample *S = dist_join_sample_new(A, B);
        in.sample = S;
        in.gather = 1;
        DistCost cost[64];
        int ng = 0, pick = dist_matmul_plan(&in, cost, &ng);
        double got[64], best = INFINITY;
        for (int k = 0; k < ng; k++) {
          DistMatmulOut out;
          galley_tensor *C = NULL;
          int64_t b0 = c->bytes_sent;
          if (dist_matmul(c, &ra, &rb, cost[k].g, NULL, &out, &err) != GALLEY_OK ||
              dist_matmul_gather(c, &out, 0, &C, &err) != GALLEY_OK)
            dist_comm_abort(c, 1);
          got[k] = (double)dist_sum_i64(c, c->bytes_sent - b0);
          best = got[k] < best ? got[k] : best;
          double est = cost[k].bytes + dist_gather_cost(&cost[k], c->size, 0);
          if (c->rank == 0)
            printf("grid-study ranks=%d shape=%lldx%lldx%lld density=%g "
                   "structure=%s grid=%dx%dx%d method=%s est_bytes=%.0f "
                   "measured_bytes=%.0f max_flops=%.0f%s\n", c->size,
                   (long long)m, (long long)n, (long long)p, d, structs[st],
                   cost[k].g.pi, cost[k].g.pj, cost[k].g.pk,
                   dist_grid_method(cost[k].g), est, got[k],
                   cost[k].max_flops, k == pick ? " chosen" : "");
          galley_tensor_free(C);
          dist_matmul_out_free(&out);
        }
        cases++;
        fewest += got[pick] <= best;
        near += got[pick] <= 1.05 * best;
        if (c->rank == 0)
          printf("grid-case ranks=%d shape=%lldx%lldx%lld density=%g "
                 "structure=%s chosen=%dx%dx%d(%s) chosen_bytes=%.0f "
                 "fewest_bytes=%.0f %s\n", c->size, (long long)m,
                 (long long)n, (long long)p, d, structs[st],
                 cost[pick].g.pi, cost[pick].g.pj, cost[pick].g.pk,
                 dist_grid_method(cost[pick].g), got[pick], best,
                 got[pick] <= best ? "FEWEST" : "not-fewest");
        fflush(stdout);
        dist_join_sample_free(S);
        dist_matmul_in_free(&in);
        dist_relation_free(&ra);
        dist_relation_free(&rb);
        galley_tensor_free(A);
        galley_tensor_free(B);
      }
  if (c->rank == 0)
    printf("grid-summary ranks=%d cases=%d chosen_fewest=%d "
           "chosen_within_5pct=%d\n", c->size, cases, fewest, near);
}

/* ---- `bench_dist --model P MATRIX`: the cost model at P ranks ----
 * One process models C = A A over P virtual ranks: A's row blocks cut by
 * work, their column histograms counted from the whole matrix, the
 * partial products from sampled rows; every grid's bytes, busiest rank's
 * received bytes and multiply-adds, and the modelled time at 10 Gb/s;
 * then the choice with C gathered to rank 0 and left in its tiles. */
static int model_hist_entry(void *ud, const int64_t *crd, double v) {
  (void)v;
  void **u = ud;
  const DistMatmulIn *in = u[0];
  int64_t **h = u[1];
  int P = in->P, s = 0;
  while (s + 1 < P && in->a_bounds[s + 1] <= crd[0])
    s++;
  for (int q = 1; q <= P; q++)
    if (h[q]) {
      int64_t b = crd[1] * q / in->n;
      while (b + 1 < q && in->n * (b + 1) / q <= crd[1])
        b++;
      while (b > 0 && in->n * b / q > crd[1])
        b--;
      h[q][s * q + b]++;
    }
  return 0;
}

static void cost_model(int P, const char *path) {
  galley_error err;
  galley_tensor *A = NULL;
  if (galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &A, &err) != GALLEY_OK) {
    fprintf(stderr, "bench_dist: %s\n", err.msg);
    return;
  }
  int64_t m = A->dims[0], n = A->dims[1];
  int64_t *bounds = calloc((size_t)P + 1, sizeof *bounds);
  int64_t *nnz = calloc((size_t)P, sizeof *nnz);
  int64_t *prefix = NULL;
  dist_work_prefix(A, 0, &prefix, &err);
  dist_split(prefix, m, P, bounds);
  for (int s = 0; s < P; s++)
    nnz[s] = prefix[bounds[s + 1]] - prefix[bounds[s]] -
             (bounds[s + 1] - bounds[s]);
  free(prefix);
  DistMatmulIn in = {.P = P, .m = m, .n = n, .p = n};
  in.a_bounds = in.b_bounds = bounds;
  in.a_nnz = in.b_nnz = nnz;
  int64_t **h = calloc((size_t)P + 1, sizeof *h);
  for (int q = 1; q <= P; q++)
    if (P % q == 0)
      h[q] = calloc((size_t)P * q, sizeof **h);
  void *u[2] = {&in, h};
  galley_tensor_foreach(A, model_hist_entry, u);
  in.a_cols = in.b_cols = h;
  in.sample = dist_join_sample_new(A, A);
  in.gather = 1;
  DistCost cost[64];
  int ng = 0, pick = dist_matmul_plan(&in, cost, &ng);
  for (int k = 0; k < ng; k++)
    printf("model %s ranks=%d grid=%dx%dx%d method=%s bytes=%.0f "
           "gather=%.0f max_recv=%.0f flops=%.0f max_flops=%.0f "
           "net_ms_10Gbps=%.2f%s\n", path, P, cost[k].g.pi, cost[k].g.pj,
           cost[k].g.pk, dist_grid_method(cost[k].g), cost[k].bytes,
           dist_gather_cost(&cost[k], P, 0), cost[k].max_recv,
           cost[k].flops, cost[k].max_flops, cost[k].max_recv / 1.25e6,
           k == pick ? " chosen" : "");
  /* C left in its tiles (no gather): the busiest rank alone decides */
  in.gather = 0;
  int kept = dist_matmul_plan(&in, cost, &ng);
  printf("model-choice %s ranks=%d gathered=%dx%dx%d(%s) left_in_tiles="
         "%dx%dx%d(%s) max_recv=%.0f net_ms_10Gbps=%.2f flops_ms=%.2f\n",
         path, P, cost[pick].g.pi, cost[pick].g.pj, cost[pick].g.pk,
         dist_grid_method(cost[pick].g), cost[kept].g.pi, cost[kept].g.pj,
         cost[kept].g.pk, dist_grid_method(cost[kept].g),
         cost[kept].max_recv, cost[kept].max_recv / 1.25e6,
         cost[kept].max_flops / 1e6);
  dist_join_sample_free(in.sample);
  for (int q = 0; q <= P; q++)
    free(h[q]);
  free(h);
  free(bounds);
  free(nnz);
  galley_tensor_free(A);
}

int main(int argc, char **argv) {
  DistComm c;
  galley_error err;
  if (dist_comm_init(&c, &argc, &argv, &err) != GALLEY_OK || argc < 2) {
    fprintf(stderr, "usage: mpirun -np N bench_dist MATRIX.mtx [REPS]\n"
                    "       mpirun -np N bench_dist --grids\n"
                    "       bench_dist --model P MATRIX.mtx\n");
    return 2;
  }
  if (strcmp(argv[1], "--model") == 0 && argc > 3) {
    if (c.rank == 0)
      cost_model(atoi(argv[2]), argv[3]);
    dist_comm_finish(&c);
    return 0;
  }
  if (strcmp(argv[1], "--grids") == 0) {
    grid_study(&c);
    dist_comm_finish(&c);
    return 0;
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
    galley_program_set_threads(p, 1, NULL); /* a core per rank, as PETSc */
    p->parts = &run.parts;
    for (int keep = 1; keep >= 0; keep--) {
      int64_t bytes = 0;
      run.keep_blocks = keep;
      double ms = timed_runs(&c, &run, p, k == 0 ? reps : reps / 4 + 1,
                             &bytes);
      if (c.rank == 0)
        printf("galleyc %s %s ranks=%d result=%s median_ms=%.3f "
               "bytes_per_run=%lld\n", names[k], argv[1], c.size,
               keep ? "distributed" : "rank0", ms, (long long)bytes);
    }
    galley_program_free(p);
  }
  dist_run_free(&run);
  const char *grids = getenv("BENCH_DIST_GRIDS");
  if (c.size > 1 && grids && *grids == '1')
    grid_joins(&c, argv[1]);
  galley_tensor_free(A);
  galley_tensor_free(x);
  dist_comm_finish(&c);
  return 0;
}
