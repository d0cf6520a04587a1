/*
 * recycle.h -- value arrays kept from one run of a program to the next.
 *
 * A training loop runs the same plan again and again; each run used to
 * allocate its large results afresh and free them, so that every run
 * paid the kernel's page faults again (TransE's profile was led by
 * them).  The executor instead hands the value arrays of the results it
 * frees (dead intermediates, and the previous run's outputs, which live
 * only until the next run) to a Recycle owned by the program, and takes
 * an array of exactly the size it needs from there before it allocates.
 * Arrays that no allocation took during a whole run are freed at its end,
 * so what is kept is bounded by one run's results, and by a quarter of
 * the memory budget (galley_program_set_memory_budget).  Outputs the caller
 * took (galley_program_take_output) are the caller's and never enter it.
 */
#ifndef GALLEY_RECYCLE_H
#define GALLEY_RECYCLE_H

#include <stdint.h>

#include "galley.h"
#include "galley_rt.h"

enum { RECYCLE_SLOTS = 32 };

/* Arrays of fewer values are left to malloc (its own free lists). */
#define RECYCLE_MIN_VALUES ((int64_t)1 << 14)

typedef struct Recycle {
  double *val[RECYCLE_SLOTS]; /* NULL: an empty slot */
  int64_t n[RECYCLE_SLOTS];   /* values in val[k] */
  int64_t run[RECYCLE_SLOTS]; /* the run that put it */
  int64_t runs;               /* runs started */
  double bytes;               /* kept */
  double max_bytes;           /* at most kept (<= 0: no limit) */
} Recycle;

/* A run begins under a memory budget of budget bytes (<= 0: none):
 * arrays put from now on belong to it. */
void recycle_begin(Recycle *rc, double budget);

/* A run ended: free the arrays that the run neither put nor took. */
void recycle_end(Recycle *rc);

/* Free tensor t (NULL: nothing), its value array kept in rc when it is
 * large, owned and a slot is free (rc NULL: a plain free).  NULL. */
galley_tensor *recycle_tensor(Recycle *rc, galley_tensor *t);

/* A kept array of exactly n values, now the caller's, or NULL. */
double *recycle_take(Recycle *rc, int64_t n);

/* Free every kept array. */
void recycle_clear(Recycle *rc);

#endif /* GALLEY_RECYCLE_H */
