/*
 * relation.h -- tensor relations (issue 15): a tensor partitioned by a
 * key into tiles, each tile a fibertree tensor of its own with
 * tile-local coordinates, placed on ranks.
 *
 * The key of this first layer is one logical mode cut into row blocks
 * (1D), the blocks chosen by work -- each coordinate weighs one plus the
 * stored entries under it -- not by equal numbers of rows, so a skewed
 * matrix splits into blocks of equal nonzeros; or no mode at all
 * (replicated).  Tile k of P holds the coordinates [bounds[k],
 * bounds[k+1]) of the key mode, shifted to start at 0, and lives on rank
 * k.
 *
 * Tensors travel as packed entry lists (pack.c's header, then the
 * coordinates and values of the stored entries) and are rebuilt in their
 * own format and fill on arrival: explicit entries equal to the fill stay
 * stored, so a rebuilt tensor has the structure of the original.
 */
#ifndef GALLEY_DIST_RELATION_H
#define GALLEY_DIST_RELATION_H

#include <stdint.h>

#include "comm.h"
#include "galley.h"

/* ---- packing (no communication) ---- */

/* A packed tensor (or part of one): malloc()ed bytes. */
typedef struct DistBlob {
  void *data;
  int64_t len;
} DistBlob;

/* Pack the stored entries of t whose coordinate of mode `mode` lies in
 * [lo, hi) (mode -1: every entry), with that coordinate shifted by
 * -shift; the header records t's format and fill and dims, with
 * dims[mode] replaced by `dim` when mode >= 0. */
galley_status dist_pack(const galley_tensor *t, int mode, int64_t lo,
                        int64_t hi, int64_t shift, int64_t dim,
                        DistBlob *out, galley_error *err);

/* How entries met under one coordinate in several blocks combine when
 * unpacked together: fold(ctx, a, b) with a from the earlier block. */
typedef double (*dist_fold_fn)(void *ctx, double a, double b);

/* Rebuild one tensor from n packed blocks (bytes data[k] of length
 * len[k]; same order, format and fill), the entries of each block after
 * the previous one's, with dims[mode] of the first block's header
 * replaced by `dim` (mode -1: as packed) and the key coordinate shifted
 * by +shift[k] for block k (shift NULL: none).  fold NULL: the blocks
 * hold different coordinates (concatenation); else entries at one
 * coordinate are folded in block order, and with drop_fill those whose
 * folded value is the fill are left out (as a kernel's sink leaves them
 * out). */
galley_status dist_unpack(int n, const void *const *data, const int64_t *len,
                          int mode, int64_t dim, const int64_t *shift,
                          dist_fold_fn fold, void *ctx, int drop_fill,
                          galley_tensor **out, galley_error *err);

/* ---- partition by work ---- */

/* The work of each coordinate c of `mode` in t: 1 + the entries stored
 * under c, as a prefix sum: prefix[c] = the work of coordinates < c
 * (dims[mode] + 1 entries, malloc()ed).  O(dims) through the position
 * arrays when mode is t's first level over dense, list or bytemap
 * levels; one walk over the entries otherwise. */
galley_status dist_work_prefix(const galley_tensor *t, int mode,
                               int64_t **prefix, galley_error *err);

/* Cut [0, n) into parts ranges of (nearly) equal work: bounds[0] = 0,
 * bounds[parts] = n, bounds[k] the first coordinate whose prefix reaches
 * k/parts of the total.  prefix NULL: equal numbers of coordinates. */
void dist_split(const int64_t *prefix, int64_t n, int parts, int64_t *bounds);

/* dist_split over dist_work_prefix(t, mode) without the prefix: a
 * binary search on the position arrays, O(parts * log(dims)), when mode
 * is t's first level and no level is a hash (nor the first a bytemap).
 * 0 when it does not apply. */
int dist_split_fast(const galley_tensor *t, int mode, int parts,
                    int64_t *bounds);

/* ---- tensor relations ---- */

typedef struct DistRelation {
  int order;
  int64_t dims[GALLEY_MAX_ORDER]; /* of the whole tensor */
  int key;          /* the partitioned mode, or -1: replicated */
  int ntiles;       /* = the number of ranks when partitioned, else 1 */
  int64_t *bounds;  /* ntiles + 1 split points over the key mode */
  int *owner;       /* tile k lives on rank owner[k] (= k) */
  galley_tensor *tile; /* this rank's tile (tile-local coordinates), or
                          the whole tensor when replicated */
} DistRelation;

/* Partition root's tensor t (ignored elsewhere) by mode `key` into one
 * row block per rank, cut by work, and send each rank its tile (the
 * shuffle of comm.h); key -1 broadcasts t whole.  Collective. */
galley_status dist_relation_scatter(DistComm *c, int root,
                                    const galley_tensor *t, int key,
                                    DistRelation *rel, galley_error *err);

/* The whole tensor at root (*out; NULL elsewhere) from the tiles of rel:
 * each tile's coordinates shifted back and the tiles concatenated in
 * key order.  Collective. */
galley_status dist_relation_gather(DistComm *c, int root,
                                   const DistRelation *rel,
                                   galley_tensor **out, galley_error *err);

/* SHUF: rel (partitioned by any mode) re-partitioned by mode `key` into
 * P equal blocks, tile d on rank d (collective).  TRA's rule R2-1 (only
 * the last of a sequence of shuffles is needed) holds by construction:
 * every entry goes straight from where it is to its last owner, so
 * shuffle(k2, shuffle(k1, R)) equals shuffle(k2, R) with fewer bytes;
 * test_dist checks both. */
galley_status dist_relation_shuffle(DistComm *c, const DistRelation *rel,
                                    int key, DistRelation *out,
                                    galley_error *err);

void dist_relation_free(DistRelation *rel);

#endif /* GALLEY_DIST_RELATION_H */
