/*
 * recycle.c -- value arrays kept between runs (recycle.h).
 */
#include <stdlib.h>

#include "recycle.h"

void recycle_begin(Recycle *rc, double budget) {
  if (!rc)
    return;
  rc->runs++;
  rc->max_bytes = budget / 4;
}

static void drop(Recycle *rc, int k) {
  free(rc->val[k]);
  rc->val[k] = NULL;
  rc->bytes -= 8.0 * (double)rc->n[k];
}

void recycle_end(Recycle *rc) {
  if (!rc)
    return;
  for (int k = 0; k < RECYCLE_SLOTS; k++)
    if (rc->val[k] && rc->run[k] < rc->runs)
      drop(rc, k);
}

galley_tensor *recycle_tensor(Recycle *rc, galley_tensor *t) {
  if (!t)
    return NULL;
  double bytes = 8.0 * (double)t->nval;
  if (rc && !t->borrowed && t->val && t->nval >= RECYCLE_MIN_VALUES &&
      (rc->max_bytes <= 0 || rc->bytes + bytes <= rc->max_bytes))
    for (int k = 0; k < RECYCLE_SLOTS; k++)
      if (!rc->val[k]) {
        rc->val[k] = t->val;
        rc->n[k] = t->nval;
        rc->run[k] = rc->runs;
        rc->bytes += bytes;
        t->val = NULL;
        break;
      }
  return galley_tensor_free(t);
}

double *recycle_take(Recycle *rc, int64_t n) {
  if (!rc || n < RECYCLE_MIN_VALUES)
    return NULL;
  for (int k = 0; k < RECYCLE_SLOTS; k++)
    if (rc->val[k] && rc->n[k] == n) {
      double *v = rc->val[k];
      rc->val[k] = NULL;
      rc->bytes -= 8.0 * (double)n;
      return v;
    }
  return NULL;
}

void recycle_clear(Recycle *rc) {
  if (!rc)
    return;
  for (int k = 0; k < RECYCLE_SLOTS; k++)
    if (rc->val[k])
      drop(rc, k);
}
