/*
 * fuzz_tns.c -- libFuzzer target for the FROSTT .tns parser.
 *
 * Parses the input from memory into an rt_coo and checks what must hold
 * for any input: either success with an order of 0..GALLEY_MAX_ORDER and
 * every coordinate inside the sizes, or GALLEY_EDATA with a
 * "fuzz.tns:LINE: error: ..." message.  Anything else aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rt_reader r;
  rt_coo coo;
  galley_error err;
  rt_error_clear(&err);
  if (rt_reader_open_mem(&r, "fuzz.tns", data, size, &err) != GALLEY_OK)
    return 0;
  galley_status st = rt_read_tns(&r, &coo, &err);
  rt_reader_close(&r);
  if (st == GALLEY_OK) {
    int order = coo.order;
    if (order < 0 || order > GALLEY_MAX_ORDER)
      abort();
    if (order == 0 && coo.nnz != 1)
      abort();
    for (int k = 0; k < order; k++)
      if (coo.dims[k] < 0)
        abort();
    for (int64_t e = 0; e < coo.nnz; e++)
      for (int k = 0; k < order; k++)
        if (coo.crd[order * e + k] < 0 || coo.crd[order * e + k] >= coo.dims[k])
          abort();
  } else if (st == GALLEY_EDATA) {
    if (strncmp(err.msg, "fuzz.tns:", 9) != 0 || !strstr(err.msg, ": error: "))
      abort();
  } else if (st != GALLEY_ENOMEM) {
    abort();
  }
  rt_coo_free(&coo);
  return 0;
}
