/*
 * read.h -- reading a tensor file on many ranks (issue 15): each rank
 * parses only its share of the text.
 *
 * A plain .mtx (coordinate) or .tns file of at least `split_min` bytes is
 * cut into one byte range per rank after its header, each range moved to
 * the start of a line; every rank reads its range itself (pread) and
 * parses it with the single-process parser behind a copy of the header
 * (an .mtx size line then announces the range's entries).  A gzip file
 * is decompressed by rank 0 alone (gzip cannot be entered in the middle)
 * and its ranges are scattered.  The parsed entries are then exchanged
 * in rank (= file) order, so every rank builds the tensor from the same
 * entries in the same order as `galley_tensor_read` does: the result is
 * bitwise the one-process tensor (duplicates summed alike, the same
 * default format chosen from the total count).
 *
 * Small files, .mtx `array` files (their positions are implied by the
 * order of the lines) and any range that fails to parse take the old
 * path: rank 0 reads the whole file and broadcasts it, so a malformed
 * file's message (file, line, column) is exactly the one-process one.
 */
#ifndef GALLEY_DIST_READ_H
#define GALLEY_DIST_READ_H

#include <stdint.h>

#include "comm.h"
#include "galley.h"
#include "relation.h"

/* What a distributed read did (for explain and the tests). */
typedef struct DistReadInfo {
  int split;          /* 1: byte ranges parsed by every rank; 0: rank 0
                         read the file whole and broadcast it */
  int64_t text_bytes; /* the bytes of text this rank parsed */
  int64_t sent;       /* bytes this rank sent (ranges, entries, blob) */
} DistReadInfo;

/* The default of split_min: files below it are read by rank 0. */
#define DIST_SPLIT_READ_MIN ((int64_t)1 << 20)

/* Read path on every rank of c (collective): every rank gets an equal
 * tensor in *out, or every rank the same failure. */
galley_status dist_read_tensor(DistComm *c, const char *path,
                               int64_t split_min, galley_tensor **out,
                               DistReadInfo *info, galley_error *err);

/* Read path into a relation of row blocks (relation.h: key 0, blocks
 * cut by work, tile-local rows) in which each rank keeps only its own
 * tile: the ranges' entries are shuffled to the ranks owning their rows
 * (the rows' work summed over the ranks first), never gathered whole.
 * A file read whole (read.h's fallbacks) is scattered by rank 0.  Order
 * >= 1.  Collective. */
galley_status dist_read_relation(DistComm *c, const char *path,
                                 int64_t split_min, DistRelation *rel,
                                 DistReadInfo *info, galley_error *err);

#endif /* GALLEY_DIST_READ_H */
