/*
 * comm.c -- the communication layer: every MPI call of galleyc
 * (comm.h says the contract).
 *
 * MPI counts are ints: a transfer of more than c->chunk bytes per peer
 * goes in rounds, each round packed into a buffer of at most c->chunk
 * bytes in all, so no count or displacement passes INT_MAX whatever the
 * 64-bit totals are.  Errors inside MPI itself stay fatal
 * (MPI_ERRORS_ARE_FATAL): mpirun then stops every process, which is what
 * a failed transfer should do.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "rt_internal.h"

int dist_launched(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                                     "PMI_RANK", "PMI_SIZE"};
  for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++)
    if (getenv(vars[k]))
      return 1;
  return 0;
}

galley_status dist_comm_init(DistComm *c, int *argc, char ***argv,
                             galley_error *err) {
  memset(c, 0, sizeof *c);
  c->failed_rank = -1;
  c->chunk = INT_MAX;
  /* Open MPI's signal handlers print a backtrace with malloc, which can
   * deadlock in a rank whose heap is damaged instead of letting it die,
   * and mpirun then waits for it forever.  Without them (unless the user
   * set them) a crashing rank dies of its signal and mpirun stops the
   * others within a second. */
  setenv("OMPI_MCA_opal_signal", "", 0);
  if (MPI_Init(argc, argv) != MPI_SUCCESS)
    return rt_error(err, GALLEY_EINTERNAL, "MPI could not start");
  c->owns_mpi = 1;
  MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Comm_size(c->comm, &c->size);
  return GALLEY_OK;
}

galley_status dist_comm_from(DistComm *c, MPI_Comm comm, galley_error *err) {
  memset(c, 0, sizeof *c);
  c->failed_rank = -1;
  c->chunk = INT_MAX;
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin)
    return rt_error(err, GALLEY_EINVAL, "MPI is not initialized: call "
                    "MPI_Init before giving galley a communicator");
  if (comm == MPI_COMM_NULL)
    return rt_error(err, GALLEY_EINVAL, "the communicator is "
                    "MPI_COMM_NULL");
  if (MPI_Comm_dup(comm, &c->comm) != MPI_SUCCESS)
    return rt_error(err, GALLEY_EINTERNAL, "MPI_Comm_dup failed");
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Comm_size(c->comm, &c->size);
  return GALLEY_OK;
}

void dist_comm_finish(DistComm *c) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && c->comm != MPI_COMM_NULL)
    MPI_Comm_free(&c->comm);
  if (c->owns_mpi && !fin)
    MPI_Finalize();
}

void dist_comm_abort(DistComm *c, int code) { MPI_Abort(c->comm, code); }

/* What the failing rank tells the others. */
typedef struct Failure {
  int32_t status;
  int32_t pad;
  int64_t line, col;
  char msg[sizeof ((galley_error *)0)->msg];
} Failure;

galley_status dist_agree(DistComm *c, galley_status st, galley_error *err) {
  int mine = st != GALLEY_OK ? c->rank : c->size, first = c->size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, c->comm);
  if (first == c->size) {
    c->failed_rank = -1;
    c->agreed = 0;
    return GALLEY_OK;
  }
  Failure f;
  memset(&f, 0, sizeof f);
  if (c->rank == first) {
    f.status = st;
    if (err) {
      f.line = err->line;
      f.col = err->col;
      memcpy(f.msg, err->msg, sizeof f.msg);
      f.msg[sizeof f.msg - 1] = '\0';
    }
  }
  MPI_Bcast(&f, (int)sizeof f, MPI_BYTE, first, c->comm);
  c->failed_rank = first;
  c->agreed = 1;
  if (err) {
    err->status = (galley_status)f.status;
    err->line = f.line;
    err->col = f.col;
    memcpy(err->msg, f.msg, sizeof err->msg);
  }
  return (galley_status)f.status;
}

/* The number of bytes one round may carry per peer. */
static int64_t round_bytes(const DistComm *c) {
  int64_t per = c->chunk / (c->size > 0 ? c->size : 1);
  return per > 0 ? per : 1;
}

void dist_bcast(DistComm *c, void *buf, int64_t len, int root) {
  char *p = buf;
  int64_t step = c->chunk > 0 ? c->chunk : 1;
  for (int64_t off = 0; off < len; off += step) {
    int64_t n = len - off < step ? len - off : step;
    MPI_Bcast(p + off, (int)n, MPI_BYTE, root, c->comm);
  }
  if (c->rank == root && len > 0) {
    c->bytes_sent += len * (c->size - 1);
    c->messages++;
  }
}

galley_status dist_bcast_blob(DistComm *c, void **buf, int64_t *len,
                              int root, galley_error *err) {
  MPI_Bcast(len, 1, MPI_INT64_T, root, c->comm);
  galley_status st = GALLEY_OK;
  if (c->rank != root) {
    *buf = malloc((size_t)(*len > 0 ? *len : 1));
    if (!*buf)
      st = rt_error(err, GALLEY_ENOMEM, "out of memory receiving "
                    "%lld bytes", (long long)*len);
  }
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK) {
    if (c->rank != root) {
      free(*buf);
      *buf = NULL;
    }
    return st;
  }
  dist_bcast(c, *buf, *len, root);
  return GALLEY_OK;
}

/* One round of the shuffle: the bytes [off, off + step) of every block,
 * packed into sbuf, exchanged into rbuf, unpacked into recv.  The packed
 * buffers hold at most size * step <= chunk bytes, so ints suffice. */
static void alltoallv_round(DistComm *c, const char *send,
                            const int64_t *scount, const int64_t *sdispl,
                            char *recv, const int64_t *rcount,
                            const int64_t *rdispl, int64_t off, int64_t step,
                            char *sbuf, char *rbuf, int *ints) {
  int P = c->size;
  int *sc = ints, *sd = ints + P, *rc = ints + 2 * P, *rd = ints + 3 * P;
  int spos = 0, rpos = 0;
  for (int d = 0; d < P; d++) {
    int64_t s = scount[d] - off, r = rcount[d] - off;
    sc[d] = (int)(s <= 0 ? 0 : s < step ? s : step);
    rc[d] = (int)(r <= 0 ? 0 : r < step ? r : step);
    sd[d] = spos;
    rd[d] = rpos;
    if (sc[d] > 0)
      memcpy(sbuf + spos, send + sdispl[d] + off, (size_t)sc[d]);
    spos += sc[d];
    rpos += rc[d];
  }
  MPI_Alltoallv(sbuf, sc, sd, MPI_BYTE, rbuf, rc, rd, MPI_BYTE, c->comm);
  for (int d = 0; d < P; d++)
    if (rc[d] > 0)
      memcpy(recv + rdispl[d] + off, rbuf + rd[d], (size_t)rc[d]);
}

galley_status dist_alltoallv(DistComm *c, const void *send,
                             const int64_t *scount, const int64_t *sdispl,
                             void **recv, int64_t *rcount, int64_t *rdispl,
                             galley_error *err) {
  int P = c->size;
  *recv = NULL;
  /* the counts first: every process learns what it will receive */
  MPI_Alltoall(scount, 1, MPI_INT64_T, rcount, 1, MPI_INT64_T, c->comm);
  int64_t total = 0, most = 0;
  for (int s = 0; s < P; s++) {
    rdispl[s] = total;
    total += rcount[s];
    most = rcount[s] > most ? rcount[s] : most;
    if (scount[s] > most)
      most = scount[s];
  }
  /* rounds are decided from the largest block anywhere */
  MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_INT64_T, MPI_MAX, c->comm);
  int64_t step = round_bytes(c);
  int rounds = most > 0 ? (int)((most + step - 1) / step) : 0;
  galley_status st = GALLEY_OK;
  char *rb = malloc((size_t)(total > 0 ? total : 1));
  char *sbuf = NULL, *rbuf = NULL;
  int *ints = malloc(4 * (size_t)P * sizeof *ints);
  /* one direct call when no count or displacement passes the limit */
  int64_t send_end = 0;
  for (int d = 0; d < P; d++)
    if (scount[d] > 0 && sdispl[d] + scount[d] > send_end)
      send_end = sdispl[d] + scount[d];
  int local = send_end <= c->chunk && total <= c->chunk;
  int direct = 0;
  MPI_Allreduce(&local, &direct, 1, MPI_INT, MPI_MIN, c->comm);
  if (rounds > 0 && !direct) {
    /* a round carries at most min(step, most) bytes per peer */
    int64_t buf = (most < step ? most : step) * P;
    sbuf = malloc((size_t)buf);
    rbuf = malloc((size_t)buf);
  }
  if (!rb || !ints || (rounds > 0 && !direct && (!sbuf || !rbuf)))
    st = rt_error(err, GALLEY_ENOMEM, "out of memory receiving "
                  "%lld bytes", (long long)total);
  st = dist_agree(c, st, err);
  if (st == GALLEY_OK && direct) {
    /* everything fits MPI's ints: one call on the caller's buffers */
    for (int d = 0; d < P; d++) {
      ints[d] = (int)scount[d];
      ints[P + d] = (int)sdispl[d];
      ints[2 * P + d] = (int)rcount[d];
      ints[3 * P + d] = (int)rdispl[d];
    }
    MPI_Alltoallv(send, ints, ints + P, MPI_BYTE, rb, ints + 2 * P,
                  ints + 3 * P, MPI_BYTE, c->comm);
    rounds = 0;
  }
  for (int k = 0; st == GALLEY_OK && k < rounds; k++)
    alltoallv_round(c, send, scount, sdispl, rb, rcount, rdispl,
                    (int64_t)k * step, step, sbuf, rbuf, ints);
  free(sbuf);
  free(rbuf);
  free(ints);
  if (st != GALLEY_OK) {
    free(rb);
    return st;
  }
  int64_t sent = 0;
  for (int d = 0; d < P; d++)
    if (d != c->rank)
      sent += scount[d];
  c->bytes_sent += sent + (int64_t)(P - 1) * (int64_t)sizeof(int64_t);
  c->messages++;
  *recv = rb;
  return GALLEY_OK;
}

galley_status dist_gather(DistComm *c, const void *send, int64_t len,
                          int root, void **recv, int64_t *rcount,
                          int64_t *rdispl, galley_error *err) {
  int P = c->size;
  int64_t *sc = calloc(2 * (size_t)P, sizeof *sc);
  galley_status st = sc ? GALLEY_OK
                        : rt_error(err, GALLEY_ENOMEM, "out of memory");
  st = dist_agree(c, st, err);
  if (st != GALLEY_OK) {
    free(sc);
    return st;
  }
  int64_t *sd = sc + P;
  for (int d = 0; d < P; d++)
    if (root < 0 || d == root)
      sc[d] = len; /* the same block to every receiver (sd all 0) */
  st = dist_alltoallv(c, send, sc, sd, recv, rcount, rdispl, err);
  free(sc);
  if (st == GALLEY_OK && root >= 0 && c->rank != root) {
    free(*recv);
    *recv = NULL;
  }
  return st;
}

void dist_gather_into(DistComm *c, const void *send, int64_t len, int root,
                      void *const *dst, const int64_t *lens) {
  int64_t step = c->chunk > 0 ? c->chunk : 1;
  if (c->rank != root) {
    const char *p = send;
    for (int64_t off = 0; off < len; off += step) {
      int64_t n = len - off < step ? len - off : step;
      MPI_Send(p + off, (int)n, MPI_BYTE, root, 7, c->comm);
    }
    c->bytes_sent += len;
    c->messages += len > 0;
    return;
  }
  for (int s = 0; s < c->size; s++) {
    if (s == root)
      continue;
    char *p = dst[s];
    for (int64_t off = 0; off < lens[s]; off += step) {
      int64_t n = lens[s] - off < step ? lens[s] - off : step;
      MPI_Recv(p + off, (int)n, MPI_BYTE, s, 7, c->comm, MPI_STATUS_IGNORE);
    }
  }
}

int64_t dist_sum_i64(DistComm *c, int64_t v) {
  int64_t s = 0;
  MPI_Allreduce(&v, &s, 1, MPI_INT64_T, MPI_SUM, c->comm);
  return s;
}

void dist_sum_i64_array(DistComm *c, int64_t *v, int64_t n) {
  int64_t step = c->chunk / 8 > 0 ? c->chunk / 8 : 1;
  for (int64_t at = 0; at < n; at += step) {
    int64_t k = n - at < step ? n - at : step;
    MPI_Allreduce(MPI_IN_PLACE, v + at, (int)k, MPI_INT64_T, MPI_SUM,
                  c->comm);
  }
  if (c->size > 1 && n > 0) {
    c->bytes_sent += 16 * n * (c->size - 1) / c->size;
    c->messages++;
  }
}

double dist_max_f64(DistComm *c, double v) {
  double m = v;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, c->comm);
  return m;
}
