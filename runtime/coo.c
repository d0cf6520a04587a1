/*
 * coo.c -- growable coordinate lists, the common currency between the file
 * readers and the tensor builders.
 */
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

void rt_coo_init(rt_coo *coo, int order) {
  memset(coo, 0, sizeof *coo);
  coo->order = order;
}

int rt_coo_reserve(rt_coo *coo, int64_t more) {
  int64_t need;
  if (rt_add_overflows(coo->nnz, more, &need))
    return -1;
  if (need <= coo->cap)
    return 0;
  int64_t ccap = coo->cap, vcap = coo->cap;
  int64_t crd_need;
  /* coordinates are order per entry; keep both arrays at the same
   * capacity in entries */
  if (rt_mul_overflows(need, coo->order > 0 ? coo->order : 1, &crd_need))
    return -1;
  if (rt_grow((void **)&coo->val, &vcap, sizeof *coo->val, need) != 0)
    return -1;
  if (coo->order > 0) {
    int64_t c = ccap * coo->order;
    if (rt_grow((void **)&coo->crd, &c, sizeof *coo->crd, vcap * coo->order))
      return -1;
  }
  coo->cap = vcap;
  return 0;
}

int rt_coo_push(rt_coo *coo, const int64_t *crd, double val) {
  if (coo->nnz == coo->cap && rt_coo_reserve(coo, 1) != 0)
    return -1;
  if (coo->order > 0)
    memcpy(coo->crd + coo->nnz * coo->order, crd,
           (size_t)coo->order * sizeof *crd);
  coo->val[coo->nnz++] = val;
  return 0;
}

void rt_coo_free(rt_coo *coo) {
  free(coo->crd);
  free(coo->val);
  coo->crd = NULL;
  coo->val = NULL;
  coo->nnz = coo->cap = 0;
}
