/*
 * benchutil.h -- small helpers every benchmark program uses: a monotonic
 * clock in ms, a comparator for medians, file base names and CSV-safe
 * notes.  Header-only (static, possibly unused in one program).
 */
#ifndef GALLEY_BENCHUTIL_H
#define GALLEY_BENCHUTIL_H

#include <stdio.h>
#include <string.h>
#include <time.h>

__attribute__((unused))
static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

__attribute__((unused))
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

__attribute__((unused))
static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* Notes go in the last CSV field: no commas there. */
__attribute__((unused))
static const char *clean(const char *note, char *buf, size_t size) {
  snprintf(buf, size, "%s", note ? note : "");
  for (char *p = buf; *p; p++)
    if (*p == ',' || *p == '\n')
      *p = ' ';
  return buf;
}

#endif /* GALLEY_BENCHUTIL_H */
