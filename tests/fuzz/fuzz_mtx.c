/*
 * fuzz_mtx.c -- libFuzzer target for the Matrix Market parser.
 *
 * Parses the input from memory into an rt_coo and checks what must hold
 * for any input: either success with every coordinate inside the sizes,
 * or GALLEY_EDATA with a "fuzz.mtx:LINE: error: ..." message.  Anything
 * else (a crash, a sanitizer report, a broken invariant) aborts.
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
  if (rt_reader_open_mem(&r, "fuzz.mtx", data, size, &err) != GALLEY_OK)
    return 0;
  rt_mtx_info info;
  galley_status st = rt_read_mtx(&r, &coo, &info, &err);
  rt_reader_close(&r);
  if (st == GALLEY_OK) {
    if (coo.order != 2 || coo.dims[0] < 0 || coo.dims[1] < 0)
      abort();
    for (int64_t e = 0; e < coo.nnz; e++)
      for (int k = 0; k < 2; k++)
        if (coo.crd[2 * e + k] < 0 || coo.crd[2 * e + k] >= coo.dims[k])
          abort();
    if (!info.array && info.symmetry == 0 && coo.nnz != info.stored)
      abort();
  } else if (st == GALLEY_EDATA) {
    if (strncmp(err.msg, "fuzz.mtx:", 9) != 0 || !strstr(err.msg, ": error: "))
      abort();
  } else if (st != GALLEY_ENOMEM) {
    abort();
  }
  rt_coo_free(&coo);
  return 0;
}
