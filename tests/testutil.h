/*
 * testutil.h -- small helpers shared by the Check suites: a seeded random
 * generator (so every randomized test is reproducible) and the locations
 * of test data.
 */
#ifndef GALLEY_TESTUTIL_H
#define GALLEY_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* splitmix64: tiny, fast, good enough for test inputs, and the same on
 * every platform. */
typedef struct test_rng {
  uint64_t state;
} test_rng;

static inline test_rng test_rng_seed(uint64_t seed) {
  test_rng r = {seed * 0x9E3779B97F4A7C15ULL + 1};
  return r;
}

static inline uint64_t test_rng_next(test_rng *r) {
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Uniform integer in [0, n), n > 0. */
static inline int64_t test_rng_below(test_rng *r, int64_t n) {
  return (int64_t)(test_rng_next(r) % (uint64_t)n);
}

/* Uniform double in [lo, hi). */
static inline double test_rng_double(test_rng *r, double lo, double hi) {
  return lo + (hi - lo) * ((double)(test_rng_next(r) >> 11) / 9007199254740992.0);
}

/* Directory of ../shared/data (GALLEY_DATA_DIR, set by make check). */
static inline const char *test_data_dir(void) {
  const char *d = getenv("GALLEY_DATA_DIR");
  return d ? d : "../shared/data";
}

/* Directory of the project's tests/ (GALLEY_TEST_SRCDIR). */
static inline const char *test_src_dir(void) {
  const char *d = getenv("GALLEY_TEST_SRCDIR");
  return d ? d : "tests";
}

#endif /* GALLEY_TESTUTIL_H */
