/*
 * error.c -- errors as values, checked arithmetic and allocation helpers.
 *
 * Every fallible runtime function reports through a caller-owned
 * galley_error; nothing here prints or exits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

const char *galley_status_name(galley_status status) {
  switch (status) {
  case GALLEY_OK:
    return "ok";
  case GALLEY_ENOMEM:
    return "out of memory";
  case GALLEY_EINVAL:
    return "invalid argument";
  case GALLEY_EIO:
    return "input/output error";
  case GALLEY_EDATA:
    return "malformed data";
  case GALLEY_EOVERFLOW:
    return "size overflow";
  case GALLEY_EINTERNAL:
    return "internal error";
  case GALLEY_EPROGRAM:
    return "program error";
  case GALLEY_EBIND:
    return "data does not fit the program";
  case GALLEY_EJIT:
    return "kernel compilation failed";
  }
  return "unknown status";
}

galley_status rt_error(galley_error *err, galley_status status,
                       const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->status = status;
    err->line = err->col = 0;
  }
  return status;
}

galley_status rt_data_error(galley_error *err, const char *file, int64_t line,
                            const char *fmt, ...) {
  if (err) {
    int n;
    if (line > 0)
      n = snprintf(err->msg, sizeof err->msg, "%s:%lld: error: ", file,
                   (long long)line);
    else
      n = snprintf(err->msg, sizeof err->msg, "%s: error: ", file);
    if (n < 0 || (size_t)n >= sizeof err->msg)
      n = (int)strlen(err->msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
    va_end(ap);
    err->status = GALLEY_EDATA;
    err->line = line > 0 ? line : 0;
    err->col = 0;
  }
  return GALLEY_EDATA;
}

void rt_error_clear(galley_error *err) {
  if (err) {
    err->status = GALLEY_OK;
    err->line = err->col = 0;
    err->msg[0] = '\0';
  }
}

int rt_mul_overflows(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0)
    return 1;
  return __builtin_mul_overflow(a, b, out);
}

int rt_add_overflows(int64_t a, int64_t b, int64_t *out) {
  return __builtin_add_overflow(a, b, out);
}

/* Bytes for count elements of size, or 0 with *ok = 0 on overflow. */
static size_t array_bytes(int64_t count, size_t size, int *ok) {
  size_t bytes;
  *ok = count >= 0 && (uint64_t)count <= SIZE_MAX &&
        !__builtin_mul_overflow((size_t)count, size, &bytes);
  return *ok ? (bytes ? bytes : 1) : 0;
}

void *rt_malloc_array(int64_t count, size_t size) {
  int ok;
  size_t bytes = array_bytes(count, size, &ok);
  return ok ? malloc(bytes) : NULL;
}

void *rt_calloc_array(int64_t count, size_t size) {
  int ok;
  (void)array_bytes(count, size, &ok);
  if (!ok)
    return NULL;
  return calloc(count ? (size_t)count : 1, size);
}

int rt_grow(void **buf, int64_t *cap, size_t size, int64_t need) {
  if (need <= *cap)
    return 0;
  int64_t ncap = *cap > 0 ? *cap : 16;
  while (ncap < need) {
    if (ncap > INT64_MAX / 2)
      return -1;
    ncap *= 2;
  }
  int ok;
  size_t bytes = array_bytes(ncap, size, &ok);
  if (!ok)
    return -1;
  void *p = realloc(*buf, bytes);
  if (!p)
    return -1;
  *buf = p;
  *cap = ncap;
  return 0;
}
