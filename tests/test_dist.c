/*
 * test_dist.c -- the tensor relational layer (src/dist) under mpirun:
 * run by tests/test_dist.sh with 1, 2, 3 and 4 ranks.
 *
 *  - comm: the shuffle with counts exchanged first, in rounds of a few
 *    bytes (the 32-bit guard's path), against the bytes each rank knows
 *    it should get; gather and broadcast; a status agreement in which one
 *    rank fails and every rank learns it; bytes counted.
 *  - relations: random tensors in random formats scattered in row blocks
 *    cut by work (each tile in tile-local coordinates, of its block's
 *    size) and gathered back equal; the cut of a skewed matrix balances
 *    nonzeros, not rows.
 *  - runs: random programs (tests/randprog.h, fixed seeds) run by every
 *    rank with their queries cut across the ranks (the ExecParts hooks of
 *    run.c), equal at rank 0 to the same program run as one process.
 *  - the C API: a context's MPI communicator makes its programs' runs
 *    distributed, with the whole results on every rank.
 *
 * Every rank runs the same code; rank 0 reports.  Plain C with
 * assertions that print and exit (no forking test runner under MPI).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_internal.h"
#include "comm.h"
#include "join.h"
#include "read.h"
#include "relation.h"
#include "run.h"
#include "rt_internal.h"
#include "testutil.h"
#include "randprog.h"

static DistComm C;

static long env_long(const char *name, long dflt) {
  const char *s = getenv(name);
  return s && *s ? strtol(s, NULL, 10) : dflt;
}
static int failures;

#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "rank %d: FAIL %s:%d: ", C.rank, __FILE__, __LINE__);   \
      fprintf(stderr, __VA_ARGS__);                                           \
      fprintf(stderr, "\n");                                                  \
      failures++;                                                             \
    }                                                                         \
  } while (0)

/* The byte rank s sends rank d at offset k of their block. */
static unsigned char byte_of(int s, int d, int64_t k) {
  return (unsigned char)(s * 31 + d * 7 + k * 13);
}

static int64_t block_len(int s, int d) { return (s * 5 + d * 3) % 11 + (s == d); }

static void test_shuffle(int64_t chunk) {
  int P = C.size;
  C.chunk = chunk;
  int64_t *v = calloc(4 * (size_t)P, sizeof *v);
  int64_t *sc = v, *sd = v + P, *rc = v + 2 * P, *rd = v + 3 * P, tot = 0;
  for (int d = 0; d < P; d++) {
    sc[d] = block_len(C.rank, d);
    sd[d] = tot;
    tot += sc[d];
  }
  unsigned char *send = calloc((size_t)tot + 1, 1);
  for (int d = 0; d < P; d++)
    for (int64_t k = 0; k < sc[d]; k++)
      send[sd[d] + k] = byte_of(C.rank, d, k);
  void *recv = NULL;
  galley_error err;
  int64_t before = C.bytes_sent;
  CHECK(dist_alltoallv(&C, send, sc, sd, &recv, rc, rd, &err) == GALLEY_OK,
        "shuffle: %s", err.msg);
  int64_t want_sent = 0;
  for (int d = 0; d < P; d++)
    if (d != C.rank)
      want_sent += sc[d] + 8;
  CHECK(C.bytes_sent - before == want_sent, "bytes sent %lld, expected %lld",
        (long long)(C.bytes_sent - before), (long long)want_sent);
  for (int s = 0; s < P; s++) {
    CHECK(rc[s] == block_len(s, C.rank), "count from %d", s);
    for (int64_t k = 0; k < rc[s]; k++)
      if (((unsigned char *)recv)[rd[s] + k] != byte_of(s, C.rank, k)) {
        CHECK(0, "byte %lld from rank %d (chunk %lld)", (long long)k, s,
              (long long)chunk);
        break;
      }
  }
  free(recv);
  free(send);
  free(v);
  C.chunk = 2147483647;
}

static void test_gather_bcast(void) {
  int P = C.size;
  int64_t *v = calloc(2 * (size_t)P, sizeof *v);
  char mine[64];
  int len = snprintf(mine, sizeof mine, "rank %d says hi", C.rank);
  void *recv = NULL;
  galley_error err;
  CHECK(dist_gather(&C, mine, len, -1, &recv, v, v + P, &err) == GALLEY_OK,
        "gather");
  for (int s = 0; s < P && recv; s++) {
    char want[64];
    int n = snprintf(want, sizeof want, "rank %d says hi", s);
    CHECK(v[s] == n && memcmp((char *)recv + v[P + s], want, (size_t)n) == 0,
          "gathered block %d", s);
  }
  free(recv);
  void *blob = NULL;
  int64_t blen = 0;
  if (C.rank == P - 1) {
    blob = strdup("from the last rank");
    blen = (int64_t)strlen(blob) + 1;
  }
  C.chunk = 3; /* in rounds of three bytes */
  CHECK(dist_bcast_blob(&C, &blob, &blen, P - 1, &err) == GALLEY_OK, "bcast");
  C.chunk = 2147483647;
  CHECK(blob && strcmp(blob, "from the last rank") == 0, "broadcast text");
  free(blob);
  free(v);
}

static void test_agree(void) {
  galley_error err = {0};
  galley_status st = GALLEY_OK;
  int bad = C.size - 1; /* the last rank fails, then rank 1 */
  if (C.rank == bad)
    st = rt_error(&err, GALLEY_EDATA, "x.tns:3: error: bad value");
  st = dist_agree(&C, st, &err);
  CHECK(st == GALLEY_EDATA && strcmp(err.msg, "x.tns:3: error: bad value") == 0
            && C.failed_rank == bad,
        "agree on a failure: %d %s", st, err.msg);
  st = dist_agree(&C, GALLEY_OK, &err);
  CHECK(st == GALLEY_OK && C.failed_rank == -1, "agree on success");
  if (C.size > 2) { /* two fail: the lowest one is reported */
    st = C.rank >= 1 ? rt_error(&err, GALLEY_ENOMEM, "rank %d", C.rank)
                     : GALLEY_OK;
    st = dist_agree(&C, st, &err);
    CHECK(st == GALLEY_ENOMEM && strcmp(err.msg, "rank 1") == 0,
          "lowest failing rank: %s", err.msg);
  }
}

/* ---- relations ---- */

static int tensors_equal(const galley_tensor *a, const galley_tensor *b) {
  int64_t n = 1;
  if (a->order != b->order || a->fill != b->fill)
    return 0;
  for (int m = 0; m < a->order; m++) {
    if (a->dims[m] != b->dims[m])
      return 0;
    n *= a->dims[m];
  }
  double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  galley_tensor_to_dense(a, x, n, NULL);
  galley_tensor_to_dense(b, y, n, NULL);
  int same = 1;
  for (int64_t e = 0; e < n; e++)
    same &= x[e] == y[e] || (isnan(x[e]) && isnan(y[e]));
  free(x);
  free(y);
  return same;
}

static void test_relations(void) {
  test_rng r = test_rng_seed(15);
  for (int round = 0; round < 30; round++) {
    int order = 1 + (int)test_rng_below(&r, 3);
    int64_t dims[3];
    for (int m = 0; m < order; m++)
      dims[m] = 1 + test_rng_below(&r, 9);
    int64_t n = test_rng_below(&r, 40);
    int64_t *crd = malloc((size_t)(n * order + 1) * sizeof *crd);
    double *val = malloc((size_t)(n + 1) * sizeof *val);
    for (int64_t e = 0; e < n; e++) {
      for (int m = 0; m < order; m++)
        crd[e * order + m] = test_rng_below(&r, dims[m]);
      val[e] = (double)test_rng_below(&r, 7) - 3;
    }
    galley_format f = {.order = order};
    for (int l = 0; l < order; l++) {
      f.mode_order[l] = l;
      f.kinds[l] = (galley_level_kind)test_rng_below(&r, 4);
    }
    if (order > 1 && test_rng_below(&r, 2)) { /* another mode order */
      f.mode_order[0] = 1;
      f.mode_order[1] = 0;
    }
    int key = round % 5 == 4 ? -1 : (int)test_rng_below(&r, order);
    galley_tensor *t = NULL;
    galley_error err;
    CHECK(galley_tensor_from_coo(order, dims, n, crd, val, round % 3 ? 0 : 1,
                                 &f, &t, &err) == GALLEY_OK,
          "build: %s", err.msg);
    DistRelation rel;
    CHECK(dist_relation_scatter(&C, 0, C.rank == 0 ? t : NULL, key, &rel,
                                &err) == GALLEY_OK,
          "scatter: %s", err.msg);
    if (key >= 0) {
      int64_t lo = rel.bounds[C.rank], hi = rel.bounds[C.rank + 1];
      CHECK(rel.tile->dims[key] == hi - lo, "tile size");
      for (int64_t e = 0; e < n; e++) { /* tile-local coordinates */
        if (crd[e * order + key] < lo || crd[e * order + key] >= hi)
          continue;
        int64_t at[3];
        memcpy(at, &crd[e * order], (size_t)order * sizeof *at);
        at[key] -= lo;
        CHECK(galley_tensor_get(rel.tile, at, NULL) ==
                  galley_tensor_get(t, &crd[e * order], NULL),
              "tile entry");
      }
    }
    galley_tensor *back = NULL;
    CHECK(dist_relation_gather(&C, 0, &rel, &back, &err) == GALLEY_OK,
          "gather: %s", err.msg);
    if (C.rank == 0)
      CHECK(back && tensors_equal(t, back), "round %d: gathered tensor "
            "differs", round);
    galley_tensor_free(back);
    dist_relation_free(&rel);
    galley_tensor_free(t);
    free(crd);
    free(val);
  }
}

/* A skewed matrix (row 0 holds half the entries): the cut by work gives
 * each rank about the same number of entries. */
static void test_split_by_work(void) {
  enum { N = 1000 };
  int64_t *crd = malloc(4 * N * sizeof *crd), n = 0;
  for (int64_t j = 0; j < N; j++) {
    crd[2 * n] = 0, crd[2 * n + 1] = j, n++;
    crd[2 * n] = j, crd[2 * n + 1] = (j * 7) % N, n++;
  }
  galley_tensor *t = NULL;
  galley_tensor_from_coo(2, (int64_t[]){N, N}, n, crd, NULL, 0, NULL, &t,
                         NULL);
  int64_t *prefix = NULL, bounds[9];
  CHECK(dist_work_prefix(t, 0, &prefix, NULL) == GALLEY_OK, "prefix");
  int64_t stored = galley_tensor_stored(t);
  CHECK(prefix[N] == N + stored, "total work %lld", (long long)prefix[N]);
  dist_split(prefix, N, 4, bounds);
  for (int k = 0; k < 4; k++) {
    double w = (double)(prefix[bounds[k + 1]] - prefix[bounds[k]]);
    /* a block holds at most a quarter plus the heaviest row */
    CHECK(w <= (N + stored) / 4.0 + N + 2, "block %d has work %g", k, w);
  }
  CHECK(bounds[1] <= 1, "row 0 alone fills the first block");
  /* the binary search on the position arrays cuts at the same places,
   * in CSR and in DCSR (a list first level) */
  int64_t fast[9];
  CHECK(dist_split_fast(t, 0, 4, fast) == 1, "fast cut applies");
  for (int k = 0; k <= 4; k++)
    CHECK(fast[k] == bounds[k], "fast cut %d: %lld, expected %lld", k,
          (long long)fast[k], (long long)bounds[k]);
  galley_tensor *dcsr = NULL;
  galley_format lf = {.order = 2, .mode_order = {0, 1},
                      .kinds = {GALLEY_LIST, GALLEY_LIST}};
  galley_tensor_convert(t, &lf, &dcsr, NULL);
  CHECK(dist_split_fast(dcsr, 0, 4, fast) == 1, "fast cut applies (DCSR)");
  for (int k = 0; k <= 4; k++) /* every row is stored: the same cut */
    CHECK(fast[k] == bounds[k], "DCSR cut %d: %lld, expected %lld", k,
          (long long)fast[k], (long long)bounds[k]);
  galley_tensor_free(dcsr);
  free(prefix);
  free(crd);
  galley_tensor_free(t);
}

/* ---- random programs, distributed vs one process ---- */

/* Copies of a program's outputs (they die with the program). */
static int snap_outputs(const galley_program *p, galley_tensor **out) {
  int n = galley_program_num_outputs(p);
  for (int k = 0; k < n; k++) {
    const galley_tensor *t = galley_program_output(p, k);
    galley_format f;
    galley_tensor_format(t, &f);
    CHECK(galley_tensor_convert(t, &f, &out[k], NULL) == GALLEY_OK, "copy");
  }
  return n;
}

static int outputs_agree(galley_tensor *const *want, int n,
                         const galley_program *b, char *why, size_t size) {
  for (int k = 0; k < n; k++) {
    const galley_tensor *x = want[k], *y = galley_program_output(b, k);
    int64_t cells = 1;
    for (int m = 0; m < x->order; m++)
      cells *= x->dims[m];
    if (x->order != y->order || !same_value(x->fill, y->fill)) {
      snprintf(why, size, "output %d: order or fill", k);
      return 0;
    }
    double *u = malloc((size_t)cells * sizeof *u);
    double *w = malloc((size_t)cells * sizeof *w);
    galley_tensor_to_dense(x, u, cells, NULL);
    galley_tensor_to_dense(y, w, cells, NULL);
    int ok = 1;
    for (int64_t e = 0; e < cells && ok; e++)
      if (!same_value(u[e], w[e])) {
        snprintf(why, size, "output %d entry %lld: %.17g, expected %.17g",
                 k, (long long)e, w[e], u[e]);
        ok = 0;
      }
    free(u);
    free(w);
    if (!ok)
      return 0;
  }
  return 1;
}

static void make_inputs(Gen *g, galley_program *p, galley_program *q,
                        galley_tensor **ins) {
  for (int k = 0; k < g->ninputs; k++) {
    ins[k] = gen_tensor(g, &g->in[k], gen_density(g));
    galley_error err;
    CHECK(galley_program_bind(p, g->in[k].name, ins[k], &err) == GALLEY_OK &&
              galley_program_bind(q, g->in[k].name, ins[k], &err) ==
                  GALLEY_OK,
          "bind: %s", err.msg);
  }
}

static void test_programs(long cases) {
  /* tcc by default (fast to compile); GALLEY_DIST_BACKEND=clang */
  const char *b = getenv("GALLEY_DIST_BACKEND");
  galley_backend backend = b && strcmp(b, "clang") == 0
                               ? GALLEY_BACKEND_CLANG
                               : GALLEY_BACKEND_TCC;
  DistRun run;
  dist_run_init(&run, &C);
  long split = 0;
  long first = env_long("GALLEY_DIST_FIRST", 0); /* to reproduce one */
  for (long c = first; c < first + cases; c++) {
    test_rng mix = test_rng_seed(1500 + (uint64_t)c);
    test_rng r = test_rng_seed(test_rng_next(&mix));
    Gen g;
    memset(&g, 0, sizeof g);
    g.r = &r;
    g.inf_values = chance(&g, 0.1);
    char *text = gen_program(&g);
    if (env_long("GALLEY_DIST_VERBOSE", 0) && C.rank == 0)
      fprintf(stderr, "case %ld:\n%s", c, text);
    galley_program *one = NULL, *many = NULL;
    galley_error err;
    if (galley_program_parse("d.tin", text, strlen(text), &one, NULL, &err) !=
            GALLEY_OK ||
        galley_program_parse("d.tin", text, strlen(text), &many, NULL,
                             &err) != GALLEY_OK) {
      CHECK(0, "case %ld does not parse: %s", c, err.msg);
      free(text);
      continue;
    }
    galley_tensor *ins[MAX_INPUTS + 8] = {0};
    make_inputs(&g, one, many, ins);
    galley_program_set_backend(one, backend, NULL);
    galley_program_set_backend(many, backend, NULL);
    many->parts = &run.parts;
    /* one process first (its outputs copied, the program freed: two
     * programs holding libtcc states at once trip libtcc's globals) */
    galley_tensor *want[MAX_QUERIES + 8] = {0};
    int nwant = 0;
    galley_status s1 = C.rank == 0 ? galley_program_run(one, &err)
                                   : GALLEY_OK;
    if (C.rank == 0 && s1 == GALLEY_OK)
      nwant = snap_outputs(one, want);
    one = galley_program_free(one);
    galley_status s2 = galley_program_run(many, &err);
    s2 = dist_agree(&C, s2, &err);
    if (C.rank == 0) {
      char why[256] = "";
      if (s1 != s2)
        CHECK(0, "case %ld: status %d distributed, %d alone: %s\n%s", c, s2,
              s1, err.msg, text);
      else if (s1 == GALLEY_OK &&
               !outputs_agree(want, nwant, many, why, sizeof why))
        CHECK(0, "case %ld: %s\n%s", c, why, text);
    }
    for (int k = 0; k < nwant; k++)
      galley_tensor_free(want[k]);
    for (int n = 0; n < run.nsteps; n++)
      split += run.steps[n].split || run.steps[n].join;

    galley_program_free(many);
    for (int k = 0; k < g.ninputs; k++)
      galley_tensor_free(ins[k]);
    free(text);
  }
  /* the queries were really cut (with several ranks) */
  if (C.size > 1)
    CHECK(split > cases / 2, "only %ld queries were split", split);
  dist_run_free(&run);
}

/* Hand-picked programs over larger sparse matrices, so that results take
 * the formats the row-block paths move (CSR, dense rows), the folds run
 * over sparse and dense partial results, and rows are skewed. */
static galley_tensor *random_matrix(test_rng *r, int64_t m, int64_t n,
                                    double density, int skew) {
  int64_t cap = (int64_t)(m * n * density) + n + 1, k = 0;
  int64_t *crd = malloc((size_t)cap * 2 * sizeof *crd);
  double *val = malloc((size_t)cap * sizeof *val);
  for (int64_t e = 0; e + 1 < cap - n; e++, k++) {
    crd[2 * k] = test_rng_below(r, m);
    crd[2 * k + 1] = test_rng_below(r, n);
    val[k] = (double)(1 + test_rng_below(r, 9));
  }
  for (int64_t j = 0; skew && j < n; j++, k++) { /* a dense first row */
    crd[2 * k] = 0;
    crd[2 * k + 1] = j;
    val[k] = (double)(1 + test_rng_below(r, 9));
  }
  galley_tensor *t = NULL;
  galley_tensor_from_coo(2, (int64_t[]){m, n}, k, crd, val, 0, NULL, &t,
                         NULL);
  free(crd);
  free(val);
  return t;
}

static void test_targeted(void) {
  static const char *const progs[] = {
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n",
      "input A[i, j], B[j, k]\ny[i] = sum(j, k: A[i, j] * B[j, k])\n",
      "input A[i, j], B[j, k]\nc[j] = sum(i: A[i, j])\nm[k] = max(j: B[j, "
      "k])\n",
      "input A[i, j], B[j, k]\nt = sum(i, j: A[i, j] * B[j, i])\n",
      "input A[i, j], B[j, k]\nS[i, j] = A[i, j] * B[i, j]\nT[i, k] = "
      "sum(j: S[i, j] * B[j, k])\n",
      "input A[i, j] fill inf, B[j, k] fill inf\nD[i, k] = min(j: A[i, j] + "
      "B[j, k])\n",
  };
  test_rng r = test_rng_seed(77);
  DistRun run;
  dist_run_init(&run, &C);
  for (size_t k = 0; k < sizeof progs / sizeof progs[0]; k++) {
    galley_program *one = NULL, *many = NULL;
    galley_error err;
    if (galley_program_parse("t.tin", progs[k], strlen(progs[k]), &one, NULL,
                             &err) != GALLEY_OK ||
        galley_program_parse("t.tin", progs[k], strlen(progs[k]), &many,
                             NULL, &err) != GALLEY_OK) {
      CHECK(0, "program %zu: %s", k, err.msg);
      galley_program_free(one);
      continue;
    }
    int inf = strstr(progs[k], "inf") != NULL;
    galley_tensor *A = random_matrix(&r, 300, 200, 0.03, (int)k % 2);
    galley_tensor *B = random_matrix(&r, 200, 300, 0.03, 0);
    if (inf) { /* min-plus: fill inf */
      galley_tensor *A2 = NULL, *B2 = NULL;
      galley_format f = galley_format_default(2);
      int64_t n = 0, *crd = NULL;
      double *val = NULL;
      galley_tensor_to_coo(A, 0, &n, &crd, &val, NULL);
      galley_tensor_from_coo(2, A->dims, n, crd, val, INFINITY, &f, &A2, NULL);
      free(crd), free(val);
      galley_tensor_to_coo(B, 0, &n, &crd, &val, NULL);
      galley_tensor_from_coo(2, B->dims, n, crd, val, INFINITY, &f, &B2, NULL);
      free(crd), free(val);
      galley_tensor_free(A), galley_tensor_free(B);
      A = A2, B = B2;
    }
    galley_program_bind(one, "A", A, NULL);
    galley_program_bind(one, "B", B, NULL);
    galley_program_bind(many, "A", A, NULL);
    galley_program_bind(many, "B", B, NULL);
    galley_program_set_backend(one, GALLEY_BACKEND_TCC, NULL);
    galley_program_set_backend(many, GALLEY_BACKEND_TCC, NULL);
    many->parts = &run.parts;
    galley_tensor *want[8] = {0};
    int nwant = 0;
    galley_status s1 = C.rank == 0 ? galley_program_run(one, &err)
                                   : GALLEY_OK;
    if (C.rank == 0 && s1 == GALLEY_OK)
      nwant = snap_outputs(one, want);
    one = galley_program_free(one);
    galley_status s2 = dist_agree(&C, galley_program_run(many, &err), &err);
    char why[256] = "";
    if (C.rank == 0)
      CHECK(s1 == s2 && (s1 != GALLEY_OK ||
                         outputs_agree(want, nwant, many, why, sizeof why)),
            "targeted program %zu: %s %s", k, why, err.msg);
    int split = 0;
    for (int n = 0; n < run.nsteps; n++)
      split += run.steps[n].split || run.steps[n].join;
    if (C.size > 1)
      CHECK(split > 0, "targeted program %zu: nothing was split", k);
    if (C.size > 1 && k == 0) /* the matrix multiply: its join planned,
                                 and run by the grid when it sends fewer
                                 bytes than the cut */
      CHECK(run.nsteps == 1 && run.steps[0].joinable &&
                run.steps[0].join ==
                    (run.steps[0].join_est < run.steps[0].cut_est),
            "targeted program 0: the join was not weighed against the cut");
    for (int x = 0; x < nwant; x++)
      galley_tensor_free(want[x]);
    galley_program_free(many);
    galley_tensor_free(A);
    galley_tensor_free(B);
  }
  dist_run_free(&run);
}

/* The C API's communicator (galley_context_set_mpi_comm): programs made
 * from a context over MPI_COMM_WORLD's handle run split across the
 * ranks, and every rank gets the whole results, equal to a program of a
 * context without one (which stays one process: nothing sent). */
static void test_api_comm(void) {
  galley_context *ctx = NULL, *plain = NULL;
  galley_error err;
  CHECK(galley_context_create(&ctx, &err) == GALLEY_OK &&
            galley_context_create(&plain, &err) == GALLEY_OK,
        "contexts");
  CHECK(galley_context_mpi_comm(ctx) == GALLEY_NO_COMM, "no comm at first");
  CHECK(galley_context_set_mpi_comm(NULL, 0, &err) == GALLEY_EINVAL,
        "a NULL context is refused");
  CHECK(galley_context_set_mpi_comm(ctx, MPI_Comm_c2f(MPI_COMM_NULL),
                                    &err) == GALLEY_EINVAL &&
            strstr(err.msg, "MPI_COMM_NULL"),
        "MPI_COMM_NULL is refused: %s", err.msg);
  int f = MPI_Comm_c2f(MPI_COMM_WORLD);
  CHECK(galley_context_set_mpi_comm(ctx, f, &err) == GALLEY_OK, "set: %s",
        err.msg);
  CHECK(galley_context_mpi_comm(ctx) == f, "the handle set");
  galley_context_set_backend(ctx, GALLEY_BACKEND_TCC, NULL);
  galley_context_set_backend(plain, GALLEY_BACKEND_TCC, NULL);
  static const char prog[] =
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n"
      "y[i] = sum(k: C[i, k])\n";
  test_rng r = test_rng_seed(77);
  galley_tensor *A = random_matrix(&r, 300, 200, 0.02, 1);
  galley_tensor *B = random_matrix(&r, 200, 150, 0.03, 0);
  galley_program *many = NULL, *one = NULL;
  CHECK(galley_context_program_parse(ctx, "api.tin", prog, strlen(prog),
                                     &many, NULL, &err) == GALLEY_OK &&
            galley_context_program_parse(plain, "api.tin", prog,
                                         strlen(prog), &one, NULL,
                                         &err) == GALLEY_OK,
        "parse: %s", err.msg);
  if (!many || !one)
    goto out;
  galley_program_bind(many, "A", A, NULL);
  galley_program_bind(many, "B", B, NULL);
  galley_program_bind(one, "A", A, NULL);
  galley_program_bind(one, "B", B, NULL);
  galley_tensor *want[4] = {0};
  int nwant = 0;
  if (galley_program_run(one, &err) == GALLEY_OK)
    nwant = snap_outputs(one, want);
  CHECK(nwant >= 1, "one process: %s", err.msg);
  one = galley_program_free(one);
  CHECK(galley_program_run(many, &err) == GALLEY_OK, "run: %s", err.msg);
  char why[256] = "";
  CHECK(outputs_agree(want, nwant, many, why, sizeof why),
        "C API run on rank %d: %s", C.rank, why);
  const DistComm *dc = many->dist; /* api_dist.c: the communicator first */
  CHECK(dc && dc->size == C.size, "the program's communicator");
  if (C.size > 1)
    CHECK(dc && dc->bytes_sent > 0, "nothing was sent: not distributed");
  /* clearing it: the next program is one process again */
  CHECK(galley_context_set_mpi_comm(ctx, GALLEY_NO_COMM, &err) == GALLEY_OK &&
            galley_context_mpi_comm(ctx) == GALLEY_NO_COMM,
        "clear");
  for (int k = 0; k < nwant; k++)
    galley_tensor_free(want[k]);
out:
  galley_program_free(many);
  galley_program_free(one);
  galley_tensor_free(A);
  galley_tensor_free(B);
  galley_context_free(ctx);
  galley_context_free(plain);
}

/* A dense m x n matrix of values 1..9 (every entry stored). */
static galley_tensor *dense_matrix(test_rng *r, int64_t m, int64_t n) {
  int64_t *crd = malloc((size_t)(2 * m * n) * sizeof *crd);
  double *val = malloc((size_t)(m * n) * sizeof *val);
  for (int64_t e = 0; e < m * n; e++) {
    crd[2 * e] = e / n;
    crd[2 * e + 1] = e % n;
    val[e] = (double)(1 + test_rng_below(r, 9));
  }
  galley_tensor *t = NULL;
  galley_tensor_from_coo(2, (int64_t[]){m, n}, m * n, crd, val, 0, NULL, &t,
                         NULL);
  free(crd);
  free(val);
  return t;
}

/* The implementation algebra's matrix multiply on every grid of the
 * ranks (BMM both ways, CMM, 2D, RMM): the product equals one process's
 * exactly (integer values); the cost model's predicted bytes equal the
 * measured ones phase by phase for dense tiles and are within 2x for
 * sparse ones; the planner's grid sends the fewest bytes measured (dense)
 * or within 25% of the fewest (sparse). */
static void test_matmul(void) {
  static const struct {
    int64_t m, n, p;
    double density; /* 0: dense */
  } cases[] = {{24, 18, 20, 0}, {7, 30, 5, 0}, {90, 80, 70, 0.08},
               {40, 200, 30, 0.05}};
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    test_rng r = test_rng_seed(900 + t);
    int dense = cases[t].density == 0;
    galley_tensor *A = NULL, *B = NULL, *want = NULL;
    if (C.rank == 0) {
      A = dense ? dense_matrix(&r, cases[t].m, cases[t].n)
                : random_matrix(&r, cases[t].m, cases[t].n,
                                cases[t].density, 0);
      B = dense ? dense_matrix(&r, cases[t].n, cases[t].p)
                : random_matrix(&r, cases[t].n, cases[t].p,
                                cases[t].density, 0);
    }
    galley_error err;
    DistRelation ra, rb;
    CHECK(dist_relation_scatter(&C, 0, A, 0, &ra, &err) == GALLEY_OK &&
              dist_relation_scatter(&C, 0, B, 0, &rb, &err) == GALLEY_OK,
          "scatter: %s", err.msg);
    /* one process's product at rank 0: the whole inputs as one tile */
    if (C.rank == 0) {
      galley_program *gp = NULL;
      static const char prog[] = "input A[i, j], B[j, k]\n"
                                 "C[i, k] = sum(j: A[i, j] * B[j, k])\n";
      galley_program_parse("m.tin", prog, strlen(prog), &gp, NULL, &err);
      galley_program_set_backend(gp, GALLEY_BACKEND_TCC, NULL);
      galley_program_bind(gp, "A", A, NULL);
      galley_program_bind(gp, "B", B, NULL);
      CHECK(galley_program_run(gp, &err) == GALLEY_OK, "product: %s",
            err.msg);
      galley_format f;
      galley_tensor_format(galley_program_output(gp, 0), &f);
      galley_tensor_convert(galley_program_output(gp, 0), &f, &want, NULL);
      galley_program_free(gp);
    }
    DistMatmulIn in;
    CHECK(dist_matmul_in(&C, &ra, &rb, &in, &err) == GALLEY_OK, "in: %s",
          err.msg);
    DistCost cost[64];
    int ng = 0, pick = dist_matmul_plan(&in, cost, &ng);
    double measured[64], fewest = INFINITY;
    for (int k = 0; k < ng; k++) {
      DistMatmulOut out;
      galley_tensor *got = NULL;
      CHECK(dist_matmul(&C, &ra, &rb, cost[k].g, NULL, &out, &err) == GALLEY_OK &&
                dist_matmul_gather(&C, &out, 0, &got, &err) == GALLEY_OK,
            "case %zu grid %dx%dx%d: %s", t, cost[k].g.pi, cost[k].g.pj,
            cost[k].g.pk, err.msg);
      if (C.rank == 0)
        CHECK(got && want && tensors_equal(got, want),
              "case %zu grid %dx%dx%d (%s): the product differs", t,
              cost[k].g.pi, cost[k].g.pj, cost[k].g.pk,
              dist_grid_method(cost[k].g));
      double pa = cost[k].bytes_a, pb = cost[k].bytes_b, pc = cost[k].bytes_c;
      double ma = (double)out.bytes_a, mb = (double)out.bytes_b,
             mc = (double)out.bytes_c;
      measured[k] = ma + mb + mc;
      if (env_long("GALLEY_DIST_VERBOSE", 0) && C.rank == 0)
        fprintf(stderr, "matmul case %zu grid %dx%dx%d %-8s predicted "
                "%.0f/%.0f/%.0f measured %.0f/%.0f/%.0f flops %.0f max "
                "%.0f%s\n", t, cost[k].g.pi, cost[k].g.pj, cost[k].g.pk,
                dist_grid_method(cost[k].g), pa, pb, pc, ma, mb, mc,
                cost[k].flops, cost[k].max_flops, k == pick ? " <-" : "");
      fewest = measured[k] < fewest ? measured[k] : fewest;
      if (dense)
        CHECK(llround(pa) == out.bytes_a && llround(pb) == out.bytes_b &&
                  llround(pc) == out.bytes_c,
              "case %zu grid %dx%dx%d: predicted %.0f/%.0f/%.0f bytes, "
              "measured %.0f/%.0f/%.0f", t, cost[k].g.pi, cost[k].g.pj,
              cost[k].g.pk, pa, pb, pc, ma, mb, mc);
      else
        CHECK(cost[k].bytes <= 2 * measured[k] &&
                  measured[k] <= 2 * cost[k].bytes,
              "case %zu grid %dx%dx%d: predicted %.0f bytes, measured %.0f",
              t, cost[k].g.pi, cost[k].g.pj, cost[k].g.pk, cost[k].bytes,
              measured[k]);
      galley_tensor_free(got);
      dist_matmul_out_free(&out);
    }
    CHECK(measured[pick] <= (dense ? 1.0 : 1.25) * fewest,
          "case %zu: the planner's grid %dx%dx%d sent %.0f bytes, the "
          "fewest %.0f", t, cost[pick].g.pi, cost[pick].g.pj,
          cost[pick].g.pk, measured[pick], fewest);
    dist_matmul_in_free(&in);
    dist_relation_free(&ra);
    dist_relation_free(&rb);
    galley_tensor_free(A);
    galley_tensor_free(B);
    galley_tensor_free(want);
  }
}

/* The run path's matrix multiplies (run.c's join steps): programs whose
 * factors or result are read transposed, run on every grid of the ranks
 * (GALLEY_DIST_GRID) and on the cost model's own choice, equal one
 * process exactly (integer values); the step's predicted bytes (grid and
 * gather of C) equal the measured ones for dense factors and are within
 * 2x for sparse ones. */
static void test_run_join(void) {
  static const char *const progs[] = {
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n",
      "input A[i, j], B[j, k]\nC[k, i] = sum(j: A[i, j] * B[j, k])\n",
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: B[j, i] * A[k, j])\n",
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n"
      "D[i, l] = sum(k: C[i, k] * A[k, l])\n",
  };
  if (C.size < 2)
    return;
  DistRun run;
  dist_run_init(&run, &C);
  DistGrid grids[64];
  int ng = dist_grids(C.size, grids, 64);
  for (int dense = 0; dense < 2; dense++)
    for (size_t k = 0; k < sizeof progs / sizeof progs[0]; k++) {
      test_rng r = test_rng_seed(31 + k);
      int64_t m = dense ? 14 : 160, n = dense ? 14 : 160;
      galley_tensor *A = dense ? dense_matrix(&r, m, n)
                               : random_matrix(&r, m, n, 0.04, (int)k % 2);
      galley_tensor *B = dense ? dense_matrix(&r, n, m)
                               : random_matrix(&r, n, m, 0.04, 0);
      galley_tensor *want[4] = {0};
      int nwant = 0;
      galley_error err;
      for (int gk = -1; gk < ng; gk++) {
        char grid[32];
        if (gk >= 0)
          snprintf(grid, sizeof grid, "%dx%dx%d", grids[gk].pi,
                   grids[gk].pj, grids[gk].pk);
        if (gk >= 0)
          setenv("GALLEY_DIST_GRID", grid, 1);
        else
          unsetenv("GALLEY_DIST_GRID");
        galley_program *gp = NULL;
        CHECK(galley_program_parse("j.tin", progs[k], strlen(progs[k]), &gp,
                                   NULL, &err) == GALLEY_OK,
              "parse: %s", err.msg);
        galley_program_set_backend(gp, GALLEY_BACKEND_TCC, NULL);
        galley_program_bind(gp, "A", A, NULL);
        galley_program_bind(gp, "B", B, NULL);
        if (gk < 0 && C.rank == 0) { /* one process first */
          CHECK(galley_program_run(gp, &err) == GALLEY_OK, "one: %s",
                err.msg);
          nwant = snap_outputs(gp, want);
          galley_program_free(gp);
          CHECK(galley_program_parse("j.tin", progs[k], strlen(progs[k]),
                                     &gp, NULL, &err) == GALLEY_OK,
                "parse: %s", err.msg);
          galley_program_set_backend(gp, GALLEY_BACKEND_TCC, NULL);
          galley_program_bind(gp, "A", A, NULL);
          galley_program_bind(gp, "B", B, NULL);
        }
        gp->parts = &run.parts;
        galley_status st = dist_agree(&C, galley_program_run(gp, &err), &err);
        char why[256] = "";
        if (C.rank == 0)
          CHECK(st == GALLEY_OK &&
                    outputs_agree(want, nwant, gp, why, sizeof why),
                "join program %zu (%s, grid %s): %s %s", k,
                dense ? "dense" : "sparse", gk >= 0 ? grid : "chosen", why,
                err.msg);
        int joins = 0;
        for (int q = 0; q < run.nsteps; q++) {
          const DistStep *s = &run.steps[q];
          if (gk < 0 && s->joinable) /* the cost model's own choice */
            CHECK(s->join == (s->join_time < s->cut_time),
                  "join program %zu step %d: join %d, est %.0f (%g s), "
                  "cut %.0f (%g s)", k, q, s->join, s->join_est,
                  s->join_time, s->cut_est, s->cut_time);
          if (gk < 0 && s->joinable)
            joins++;
          if (!s->join)
            continue;
          if (gk >= 0)
            joins++;
          double est = s->jr.cost.bytes + s->jr.est_gather;
          double got = (double)(s->jr.bytes_join + s->jr.bytes_gather);
          if (gk >= 0)
            CHECK(s->jr.cost.g.pi == grids[gk].pi &&
                      s->jr.cost.g.pj == grids[gk].pj &&
                      s->jr.cost.g.pk == grids[gk].pk,
                  "GALLEY_DIST_GRID=%s not taken", grid);
          if (dense && q == 0) /* the second product's factor C is dense
                                  too, but D's cells may sum to 0 */
            CHECK(llround(est) == llround(got),
                  "join program %zu step %d (dense, grid %dx%dx%d): "
                  "predicted %.0f bytes, measured %.0f", k, q,
                  s->jr.cost.g.pi, s->jr.cost.g.pj, s->jr.cost.g.pk, est,
                  got);
          else if (!dense)
            CHECK(est <= 2 * got && got <= 2 * est,
                  "join program %zu step %d (sparse, grid %dx%dx%d): "
                  "predicted %.0f bytes, measured %.0f", k, q,
                  s->jr.cost.g.pi, s->jr.cost.g.pj, s->jr.cost.g.pk, est,
                  got);
        }
        CHECK(joins >= 1, "join program %zu: no join step", k);
        galley_program_free(gp);
      }
      unsetenv("GALLEY_DIST_GRID");
      for (int x = 0; x < nwant; x++)
        galley_tensor_free(want[x]);
      galley_tensor_free(A);
      galley_tensor_free(B);
    }
  dist_run_free(&run);
}

/* Results left in row blocks (DistRun.keep_blocks): each rank's output
 * holds only its own rows, and the blocks together are the one-process
 * result exactly; then the same program gathered to rank 0 (the in-place
 * gather of CSR and dense blocks) is that result too.  SpGEMM's rows are
 * cut by multiply-adds: a skewed matrix's blocks differ from equal
 * entries' blocks but still tile the rows. */
static void test_keep_blocks(void) {
  static const char *const progs[] = {
      "input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n",
      "input A[i, j], B[j, k]\ny[i] = sum(j: A[i, j] * B[j, j])\n",
  };
  DistRun run;
  dist_run_init(&run, &C);
  for (size_t k = 0; k < sizeof progs / sizeof progs[0]; k++)
    for (int skew = 0; skew < 2; skew++) {
      test_rng r = test_rng_seed(71 + k * 2 + (size_t)skew);
      galley_tensor *A = random_matrix(&r, 120, 90, 0.05, skew);
      galley_tensor *B = random_matrix(&r, 90, 90, 0.05, 0);
      galley_error err;
      galley_tensor *want[4] = {0};
      int nwant = 0;
      galley_program *gp = NULL;
      for (int pass = 0; pass < 3; pass++) { /* one process, kept, gathered */
        CHECK(galley_program_parse("k.tin", progs[k], strlen(progs[k]), &gp,
                                   NULL, &err) == GALLEY_OK, "parse: %s",
              err.msg);
        galley_program_set_backend(gp, GALLEY_BACKEND_TCC, NULL);
        galley_program_bind(gp, "A", A, NULL);
        galley_program_bind(gp, "B", B, NULL);
        if (pass == 0) {
          CHECK(galley_program_run(gp, &err) == GALLEY_OK, "one: %s",
                err.msg);
          nwant = snap_outputs(gp, want);
          galley_program_free(gp);
          continue;
        }
        run.keep_blocks = pass == 1;
        gp->parts = &run.parts;
        galley_status st = dist_agree(&C, galley_program_run(gp, &err), &err);
        CHECK(st == GALLEY_OK, "keep_blocks %d: %s", pass == 1, err.msg);
        const galley_tensor *out = galley_program_output(gp, 0);
        if (pass == 2) { /* gathered: whole at rank 0 */
          char why[256] = "";
          if (C.rank == 0)
            CHECK(outputs_agree(want, nwant, gp, why, sizeof why),
                  "program %zu gathered: %s", k, why);
          galley_program_free(gp);
          continue;
        }
        /* kept: this rank's rows only, and no bytes sent */
        const DistStep *s0 = &run.steps[0];
        CHECK(C.size < 2 || (s0->split && s0->kept && s0->bytes == 0),
              "program %zu: result not kept in blocks", k);
        int64_t nnz = 0, *crd = NULL;
        double *val = NULL;
        galley_tensor_to_coo(out, 0, &nnz, &crd, &val, &err);
        int order = out->order;
        int64_t mine = 0; /* this rank's rows; the others hold the fill */
        for (int64_t e = 0; e < nnz; e++) {
          int in_block = C.size < 2 || (crd[e * order] >= s0->lo &&
                                        crd[e * order] < s0->hi);
          CHECK(in_block || val[e] == out->fill,
                "program %zu: row %lld outside this rank's block [%lld, "
                "%lld) holds %g", k, (long long)crd[e * order],
                (long long)s0->lo, (long long)s0->hi, val[e]);
          if (!in_block)
            continue;
          memmove(crd + mine * order, crd + e * order,
                  (size_t)order * sizeof *crd);
          val[mine++] = val[e];
        }
        nnz = mine;
        /* the blocks' union at rank 0 equals one process */
        int64_t *rc = calloc(2 * (size_t)C.size, sizeof *rc);
        void *rv = NULL, *rcd = NULL;
        int64_t *rc2 = calloc(2 * (size_t)C.size, sizeof *rc2);
        dist_gather(&C, val, nnz * 8, 0, &rv, rc, rc + C.size, &err);
        dist_gather(&C, crd, nnz * order * 8, 0, &rcd, rc2, rc2 + C.size,
                    &err);
        if (C.rank == 0) {
          int64_t total = 0;
          for (int q = 0; q < C.size; q++)
            total += rc[q] / 8;
          galley_tensor *u = NULL;
          CHECK(galley_tensor_from_coo(order, out->dims, total, rcd, rv, 0,
                                       NULL, &u, &err) == GALLEY_OK,
                "union: %s", err.msg);
          int64_t cells = 1;
          for (int m = 0; m < order; m++)
            cells *= out->dims[m];
          double *x = calloc((size_t)cells, sizeof *x);
          double *y = calloc((size_t)cells, sizeof *y);
          galley_tensor_to_dense(want[0], x, cells, NULL);
          galley_tensor_to_dense(u, y, cells, NULL);
          for (int64_t e = 0; e < cells; e++)
            if (!same_value(x[e], y[e])) {
              CHECK(0, "program %zu kept: entry %lld %.17g, expected %.17g",
                    k, (long long)e, y[e], x[e]);
              break;
            }
          free(x), free(y);
          galley_tensor_free(u);
        }
        free(rc), free(rc2), free(rv), free(rcd), free(crd), free(val);
        galley_program_free(gp);
      }
      for (int x = 0; x < nwant; x++)
        galley_tensor_free(want[x]);
      galley_tensor_free(A);
      galley_tensor_free(B);
    }
  run.keep_blocks = 0;
  dist_run_free(&run);
}

/* Random matrix multiplies and chains (factors read transposed or not,
 * results in either order, random sizes and densities, integer values)
 * with every matrix multiply run as a join step (GALLEY_DIST_JOIN=1's
 * setting) on the cost model's grid, against one process: exactly. */
static void test_random_joins(long cases) {
  static const struct {
    const char *text;
    const char *in[3]; /* each input's index names, in its modes' order */
  } progs[] = {
      {"input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n",
       {"ij", "jk", NULL}},
      {"input A[j, i], B[j, k]\nC[i, k] = sum(j: A[j, i] * B[j, k])\n",
       {"ji", "jk", NULL}},
      {"input A[i, j], B[k, j]\nC[k, i] = sum(j: A[i, j] * B[k, j])\n",
       {"ij", "kj", NULL}},
      {"input A[i, j], B[j, k], C[k, l]\n"
       "D[i, l] = A[i, j] * B[j, k] * C[k, l]\n",
       {"ij", "jk", "kl"}},
      {"input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n"
       "y[i] = sum(k: C[i, k])\n",
       {"ij", "jk", NULL}},
  };
  static const char names[3][2] = {"A", "B", "C"};
  static const double density[] = {0.05, 0.3, 1.0};
  DistRun run;
  dist_run_init(&run, &C);
  run.always_join = 1;
  long joins = 0;
  for (long c = 0; c < cases; c++) {
    test_rng r = test_rng_seed(7000 + (uint64_t)c); /* alike on every rank */
    size_t k = (size_t)c % (sizeof progs / sizeof progs[0]);
    int64_t size[26] = {0};
    for (const char *x = "ijkl"; *x; x++)
      size[*x - 'a'] = 1 + (int64_t)test_rng_below(&r, 40);
    double d = density[test_rng_below(&r, 3)];
    galley_program *one = NULL, *many = NULL;
    galley_error err;
    galley_program_parse("j.tin", progs[k].text, strlen(progs[k].text),
                         &one, NULL, &err);
    galley_program_parse("j.tin", progs[k].text, strlen(progs[k].text),
                         &many, NULL, &err);
    CHECK(one && many, "case %ld: %s", c, err.msg);
    galley_tensor *ins[3] = {0};
    for (int x = 0; x < 3 && progs[k].in[x] && one && many; x++) {
      const char *ix = progs[k].in[x];
      ins[x] = random_matrix(&r, size[ix[0] - 'a'], size[ix[1] - 'a'], d, 0);
      galley_program_bind(one, names[x], ins[x], NULL);
      galley_program_bind(many, names[x], ins[x], NULL);
    }
    if (one && many) {
      galley_program_set_backend(one, GALLEY_BACKEND_TCC, NULL);
      galley_program_set_backend(many, GALLEY_BACKEND_TCC, NULL);
      many->parts = &run.parts;
      galley_tensor *want[4] = {0};
      int nwant = 0;
      galley_status s1 = C.rank == 0 ? galley_program_run(one, &err)
                                     : GALLEY_OK;
      if (C.rank == 0 && s1 == GALLEY_OK)
        nwant = snap_outputs(one, want);
      one = galley_program_free(one);
      galley_status s2 =
          dist_agree(&C, galley_program_run(many, &err), &err);
      char why[256] = "";
      if (C.rank == 0)
        CHECK(s1 == s2 && (s1 != GALLEY_OK ||
                           outputs_agree(want, nwant, many, why, sizeof why)),
              "random join %ld (program %zu, density %g): %s %s", c, k, d,
              why, err.msg);
      for (int n = 0; n < run.nsteps; n++)
        joins += run.steps[n].join;
      for (int x = 0; x < nwant; x++)
        galley_tensor_free(want[x]);
    }
    galley_program_free(one);
    galley_program_free(many);
    for (int x = 0; x < 3; x++)
      galley_tensor_free(ins[x]);
  }
  if (C.size > 1)
    CHECK(joins >= cases, "only %ld join steps in %ld programs", joins, cases);
  dist_run_free(&run);
}

/* The union of every rank's sparse vector (disjoint supports, integer
 * values) as a dense int64 array of n on every rank. */
static int64_t *union_vector(const galley_tensor *mine, int64_t n) {
  int64_t *all = calloc((size_t)n + 1, sizeof *all);
  double *d = calloc((size_t)n + 1, sizeof *d);
  galley_tensor_to_dense(mine, d, n, NULL);
  for (int64_t x = 0; x < n; x++)
    all[x] = llround(d[x]);
  free(d);
  dist_sum_i64_array(&C, all, n);
  return all;
}

/* TRA's rules R2-4 (no shuffle when the relation is partitioned by the
 * group-by key) and R2-1 (only the last of a sequence of shuffles): the
 * plan before and after each rule gives the same tensor, and the rule
 * sends fewer (or equal) bytes. */
static void test_rules(void) {
  test_rng r = test_rng_seed(515); /* the same matrix on every rank */
  galley_tensor *A = random_matrix(&r, 150, 60, 0.2, 1);
  galley_error err;
  DistRelation rows;
  CHECK(dist_relation_scatter(&C, 0, A, 0, &rows, &err) == GALLEY_OK,
        "scatter: %s", err.msg);
  /* R2-4: row sums of a relation in row blocks */
  static const unsigned rules[] = {0, DIST_RULE_R2_5, DIST_RULE_R2_4,
                                   DIST_RULE_R2_4 | DIST_RULE_R2_5};
  int64_t *want = NULL, bytes[4] = {0};
  for (int k = 0; k < 4; k++) {
    galley_tensor *mine = NULL;
    CHECK(dist_sum_relation(&C, &rows, 1, rules[k], &mine, &bytes[k],
                            &err) == GALLEY_OK,
          "sum with rules %u: %s", rules[k], err.msg);
    int64_t *got = mine ? union_vector(mine, 150) : NULL;
    if (k == 0)
      want = got;
    else
      CHECK(got && want && memcmp(got, want, 150 * sizeof *got) == 0,
            "row sums differ under rules %u", rules[k]);
    if (k > 0)
      free(got);
    galley_tensor_free(mine);
  }
  /* the reference: the row sums of A itself */
  int64_t ref[150] = {0};
  double *dense = calloc(150 * 60, sizeof *dense);
  galley_tensor_to_dense(A, dense, 150 * 60, NULL);
  for (int i = 0; i < 150; i++)
    for (int j = 0; j < 60; j++)
      ref[i] += llround(dense[i * 60 + j]);
  free(dense);
  CHECK(want && memcmp(want, ref, sizeof ref) == 0, "row sums are wrong");
  free(want);
  CHECK(bytes[2] == 0 && bytes[3] == 0, "R2-4 sent %lld bytes",
        (long long)bytes[2]);
  if (C.size > 1)
    CHECK(bytes[0] > 0 && bytes[1] > 0 && bytes[1] <= bytes[0],
          "without R2-4: %lld bytes, with R2-5 only %lld", (long long)bytes[0],
          (long long)bytes[1]);
  /* R2-1: SHUF(0, SHUF(1, R)) against SHUF(0, R) */
  DistRelation cols, back, direct;
  int64_t b0 = C.bytes_sent;
  CHECK(dist_relation_shuffle(&C, &rows, 1, &cols, &err) == GALLEY_OK &&
            dist_relation_shuffle(&C, &cols, 0, &back, &err) == GALLEY_OK,
        "two shuffles: %s", err.msg);
  int64_t two = dist_sum_i64(&C, C.bytes_sent - b0);
  b0 = C.bytes_sent;
  CHECK(dist_relation_shuffle(&C, &rows, 0, &direct, &err) == GALLEY_OK,
        "one shuffle: %s", err.msg);
  int64_t one = dist_sum_i64(&C, C.bytes_sent - b0);
  galley_tensor *g1 = NULL, *g2 = NULL, *gc = NULL;
  CHECK(dist_relation_gather(&C, 0, &back, &g1, &err) == GALLEY_OK &&
            dist_relation_gather(&C, 0, &direct, &g2, &err) == GALLEY_OK &&
            dist_relation_gather(&C, 0, &cols, &gc, &err) == GALLEY_OK,
        "gather: %s", err.msg);
  if (C.rank == 0)
    CHECK(g1 && g2 && gc && tensors_equal(g1, A) && tensors_equal(g2, A) &&
              tensors_equal(gc, A),
          "a shuffled relation is not the matrix");
  CHECK(one <= two, "R2-1: one shuffle sent %lld bytes, two %lld",
        (long long)one, (long long)two);
  if (C.size > 1)
    CHECK(one < two, "R2-1 saved nothing (%lld bytes)", (long long)one);
  galley_tensor_free(g1), galley_tensor_free(g2), galley_tensor_free(gc);
  dist_relation_free(&cols), dist_relation_free(&back);
  dist_relation_free(&direct), dist_relation_free(&rows);
  galley_tensor_free(A);
}

/* TRA's rule R2-5: SHUF then Sigma equals Sigma, SHUF, Sigma (the column
 * sums of a matrix held in row blocks), and the rewrite sends fewer
 * bytes when the rows share columns. */
static void test_sum_rewrite(void) {
  test_rng r = test_rng_seed(4242); /* the same matrix on every rank */
  galley_tensor *A = random_matrix(&r, 120, 40, 0.3, 1);
  /* this rank's share: its equal block of rows, global coordinates */
  int64_t lo = 120 * C.rank / C.size, hi = 120 * (C.rank + 1) / C.size;
  DistBlob b;
  galley_tensor *mine = NULL;
  galley_error err;
  dist_pack(A, 0, lo, hi, 0, 120, &b, &err);
  const void *d = b.data;
  dist_unpack(1, &d, &b.len, -1, 0, NULL, NULL, NULL, 0, &mine, &err);
  free(b.data);
  galley_tensor *before = NULL, *after = NULL;
  int64_t bytes_before = 0, bytes_after = 0;
  CHECK(dist_sum_rows(&C, mine, 0, 0, &before, &bytes_before, &err) ==
                GALLEY_OK &&
            dist_sum_rows(&C, mine, 0, 1, &after, &bytes_after, &err) ==
                GALLEY_OK,
        "sum: %s", err.msg);
  CHECK(before && after && tensors_equal(before, after),
        "R2-5: the plans before and after the rewrite differ");
  /* and both are the column sums of the whole, on this rank's block */
  double sums[40] = {0};
  double *dense = malloc(120 * 40 * sizeof *dense);
  galley_tensor_to_dense(A, dense, 120 * 40, NULL);
  for (int e = 0; e < 120 * 40; e++)
    sums[e % 40] += dense[e];
  double got[40];
  galley_tensor_to_dense(after, got, 40, NULL);
  for (int64_t x = 40 * C.rank / C.size; x < 40 * (C.rank + 1) / C.size; x++)
    CHECK(got[x] == sums[x], "column %lld: %g, expected %g", (long long)x,
          got[x], sums[x]);
  if (C.size > 1)
    CHECK(bytes_after < bytes_before, "R2-5 sent %lld bytes, without it "
          "%lld", (long long)bytes_after, (long long)bytes_before);
  free(dense);
  galley_tensor_free(before);
  galley_tensor_free(after);
  galley_tensor_free(mine);
  galley_tensor_free(A);
}

/* A file read in byte ranges straight into row blocks: each rank keeps
 * only its own tile (its rows, tile-local), the tiles together are the
 * file as one process reads it, and no rank held the whole. */
static void test_read_relation(void) {
  char path[256];
  int64_t id = (int64_t)getpid(); /* rank 0's: one file per run */
  dist_bcast(&C, &id, (int64_t)sizeof id, 0);
  const char *dir = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/galley_dist_rel_%lld.mtx",
           dir && *dir ? dir : "/tmp", (long long)id);
  test_rng r = test_rng_seed(31);
  galley_tensor *A = random_matrix(&r, 200, 90, 0.05, 1);
  galley_error err;
  if (C.rank == 0) /* with duplicates summed alike: written as read */
    CHECK(galley_tensor_write(A, path, GALLEY_FILE_MTX, &err) == GALLEY_OK,
          "write: %s", err.msg);
  dist_sum_i64(&C, 0); /* the file is there */
  for (int split_min = 0; split_min < 2; split_min++) {
    DistRelation rel;
    DistReadInfo info;
    int64_t min = split_min ? INT64_MAX : 0; /* ranges, then rank 0 */
    CHECK(dist_read_relation(&C, path, min, &rel, &info, &err) == GALLEY_OK,
          "read_relation: %s", err.msg);
    if (!rel.tile)
      continue;
    CHECK(info.split == (C.size > 1 && !split_min), "split %d", info.split);
    CHECK(rel.key == 0 && rel.tile->dims[0] ==
                              rel.bounds[C.rank + 1] - rel.bounds[C.rank],
          "the tile is this rank's block of rows");
    int64_t mine = galley_tensor_stored(rel.tile);
    CHECK(C.size == 1 || mine < galley_tensor_stored(A),
          "rank %d holds %lld of %lld entries", C.rank, (long long)mine,
          (long long)galley_tensor_stored(A));
    galley_tensor *back = NULL, *want = NULL;
    CHECK(dist_relation_gather(&C, 0, &rel, &back, &err) == GALLEY_OK,
          "gather: %s", err.msg);
    if (C.rank == 0) {
      galley_tensor_read(path, GALLEY_FILE_MTX, NULL, &want, &err);
      CHECK(back && want && tensors_equal(back, want),
            "the tiles are not the file (split_min %d)", split_min);
    }
    galley_tensor_free(back);
    galley_tensor_free(want);
    dist_relation_free(&rel);
  }
  dist_sum_i64(&C, 0);
  if (C.rank == 0)
    remove(path);
  galley_tensor_free(A);
}

/* randprog.h's generator asserts through Check: the tests run inside
 * one Check test case, without forking (each rank is an MPI process). */
START_TEST(everything) {
  test_shuffle(2147483647);
  test_shuffle(5); /* rounds of at most 5 bytes in all */
  test_gather_bcast();
  test_agree();
  test_relations();
  test_split_by_work();
  test_targeted();
  test_api_comm();
  test_matmul();
  test_run_join();
  test_keep_blocks();
  test_sum_rewrite();
  test_rules();
  test_read_relation();
  test_programs(env_long("GALLEY_DIST_CASES", 40));
  test_random_joins(env_long("GALLEY_DIST_JOIN_CASES", 30));
}
END_TEST

int main(int argc, char **argv) {
  galley_error err;
  if (dist_comm_init(&C, &argc, &argv, &err) != GALLEY_OK) {
    fprintf(stderr, "test_dist: %s\n", err.msg);
    return 1;
  }
  Suite *s = suite_create("dist");
  TCase *tc = tcase_create("dist");
  tcase_add_test(tc, everything);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_SILENT);
  failures += srunner_ntests_failed(sr);
  srunner_free(sr);
  int total = (int)dist_sum_i64(&C, failures);
  if (C.rank == 0)
    printf("test_dist: %d ranks, %d failures\n", C.size, total);
  dist_comm_finish(&C);
  return total != 0;
}
