/*
 * product.c -- the number of entries of a matrix product C[i,k] =
 * sum(j: A[i,j] * B[j,k]) from a sample of C's rows, each counted
 * exactly.
 *
 * Why: the uniform estimator takes A's and B's entries as independent,
 * so a product of banded or clustered patterns, whose rows of B that a
 * row of A reaches overlap heavily, looks far fuller than it is
 * (bcsstk13's A*A: 57% by the uniform estimate, 10% in truth), and the
 * chain bound of a growing product is looser still.  The union of the
 * rows of B that one row of A selects is C's row pattern: counting it
 * for a few rows of A and scaling by the number of rows is an unbiased
 * estimate of C's stored entries, with no assumption about the
 * patterns.  Values are not read: stored entries are counted (a stored
 * fill or a cancellation only makes C emptier).
 *
 * Which rows: R = a power of two at most SAMPLE_ROWS, spaced evenly over
 * A's stored rows and visited in bit-reversed order, so that the rows
 * done when the work budget runs out are still spread over the whole
 * matrix (a banded matrix's rows differ mostly from top to bottom).
 * Work: at most 2 * SAMPLE_WORK entries of B, plus one table of B's
 * columns (only the pages the sampled rows touch are written).
 */
#include <stdlib.h>

#include "galley_rt.h"
#include "stats.h"

#define SAMPLE_ROWS 1024     /* rows of A sampled at most */
#define SAMPLE_WORK 131072   /* entries of B visited at most (then stop) */
#define SAMPLE_MIN_ROWS 16   /* fewer finished rows: no estimate */
#define MAX_COLUMNS ((int64_t)1 << 24) /* a larger k: no estimate (the
                                           marks would take 64 MiB) */

/* A level the walk helpers can read: dense, or a list with its arrays. */
static int plain_level(const galley_level *L) {
  if (L->kind == GALLEY_RT_DENSE) return 1;
  if (L->kind != GALLEY_RT_LIST) return 0;
  return L->idx32 ? L->pos32 && L->crd32 : L->pos && L->crd;
}

/* t is a matrix stored by rows of logical mode `row` (its first level),
 * with plain levels. */
static int by_rows(const galley_tensor *t, int row) {
  return t && t->order == 2 && t->lvl[0].mode == row &&
         plain_level(&t->lvl[0]) && plain_level(&t->lvl[1]);
}

static unsigned bit_reverse(unsigned x, int bits) {
  unsigned r = 0;
  for (int b = 0; b < bits; b++, x >>= 1) r = (r << 1) | (x & 1);
  return r;
}

/* Distinct columns of the union of B's rows that A's row (position p of
 * A's first level) selects; adds the entries of B visited to *work, and
 * gives up (-1) when they pass 2 * SAMPLE_WORK: one row of a hub can
 * reach most of B.  seen[] holds `stamp` for the columns counted in this
 * row. */
static int64_t row_union(const galley_tensor *A, const galley_tensor *B,
                         galley_pos p, uint32_t *seen, uint32_t stamp,
                         int64_t *work) {
  const galley_level *A1 = &A->lvl[1], *B0 = &B->lvl[0], *B1 = &B->lvl[1];
  int64_t count = 0;
  for (galley_pos t = galley_rt_walk_begin(A1, p),
                  te = galley_rt_walk_end(A1, p);
       t < te; t++) {
    galley_crd j = galley_rt_walk_crd(A1, t);
    if (j < 0 || j >= B0->dim) continue;
    galley_pos q = galley_rt_walk_child(B0, 0, j); /* B's first level is
                                                      dense: row j */
    galley_pos u = galley_rt_walk_begin(B1, q), ue = galley_rt_walk_end(B1, q);
    *work += ue - u;
    if (*work > 2 * SAMPLE_WORK) return -1;
    for (; u < ue; u++) {
      galley_crd k = galley_rt_walk_crd(B1, u);
      if (seen[k] != stamp) {
        seen[k] = stamp;
        count++;
      }
    }
  }
  return count;
}

double stats_product_nnz(const galley_tensor *A, int a_row,
                         const galley_tensor *B, int b_col) {
  if (!by_rows(A, a_row) || !by_rows(B, 1 - b_col) ||
      B->lvl[0].kind != GALLEY_RT_DENSE)
    return -1;
  int64_t ncols = B->dims[b_col];
  galley_pos nrows = A->lvl[0].kind == GALLEY_RT_DENSE ? A->lvl[0].dim
                                                        : A->lvl[0].nchild;
  if (ncols <= 0 || ncols > MAX_COLUMNS || nrows <= 0) return -1;
  int bits = 0;
  while ((1 << (bits + 1)) <= SAMPLE_ROWS && (1 << (bits + 1)) <= nrows)
    bits++;
  unsigned R = 1u << bits;
  uint32_t *seen = calloc((size_t)ncols, sizeof *seen);
  if (!seen) return -1;
  int64_t work = 0, total = 0, done = 0;
  for (unsigned r = 0; r < R && work < SAMPLE_WORK; r++) {
    unsigned slot = bit_reverse(r, bits);
    galley_pos p = (galley_pos)(((double)slot + 0.5) * (double)nrows / R);
    if (p >= nrows) p = nrows - 1;
    int64_t row = row_union(A, B, p, seen, r + 1, &work);
    if (row < 0) break; /* the rows done so far, if enough, estimate */
    total += row;
    done++;
  }
  free(seen);
  if (done < SAMPLE_MIN_ROWS && done < (int64_t)R) return -1;
  double est = (double)total / (double)done * (double)nrows;
  double space = (double)A->dims[a_row] * (double)ncols;
  return est < space ? est : space;
}
