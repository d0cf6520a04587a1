/*
 * fuzz_gz.c -- libFuzzer target for gzip-compressed tensor files.
 *
 * The first byte chooses the parser (.mtx or .tns) and whether the rest
 * is gzip-compressed before it is written to a .gz file (so that the text
 * reaches the parser) or written as it is (a corrupt or truncated gzip
 * stream).  The file is then read through the reader's gzip path and
 * parsed: success with every coordinate inside the sizes, or
 * GALLEY_EDATA with a "PATH:LINE: error: ..." or "PATH: error: ..."
 * message -- nothing else.  (Building the tensor is fuzz_build's: a
 * fuzzed file may declare sizes whose dense levels need gigabytes.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "io_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void remove_dir(void) { rmdir(dir); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/galley_fuzz_gz.XXXXXX");
    if (!mkdtemp(dir))
      abort();
    atexit(remove_dir);
  }
  char path[128];
  int tns = data[0] & 1, compress = data[0] & 2;
  snprintf(path, sizeof path, "%s/f.%s.gz", dir, tns ? "tns" : "mtx");
  if (compress) {
    gzFile gz = gzopen(path, "wb");
    if (!gz)
      abort();
    if (size > 1 && gzwrite(gz, data + 1, (unsigned)(size - 1)) <= 0)
      abort();
    gzclose(gz);
  } else {
    FILE *f = fopen(path, "wb");
    if (!f)
      abort();
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
  }
  rt_reader r;
  rt_coo coo;
  galley_error err;
  rt_error_clear(&err);
  memset(&coo, 0, sizeof coo);
  galley_status st = rt_reader_open_file(&r, path, &err);
  if (st == GALLEY_OK) {
    rt_mtx_info info;
    st = tns ? rt_read_tns(&r, &coo, &err) : rt_read_mtx(&r, &coo, &info, &err);
    rt_reader_close(&r);
  }
  if (st == GALLEY_OK) {
    for (int k = 0; k < coo.order; k++)
      if (coo.dims[k] < 0)
        abort();
    for (int64_t e = 0; e < coo.nnz; e++)
      for (int k = 0; k < coo.order; k++)
        if (coo.crd[coo.order * e + k] < 0 ||
            coo.crd[coo.order * e + k] >= coo.dims[k])
          abort();
  } else if (st == GALLEY_EDATA) {
    if (strncmp(err.msg, path, strlen(path)) != 0 || !strstr(err.msg, "error: "))
      abort();
  } else if (st != GALLEY_ENOMEM) {
    abort();
  }
  rt_coo_free(&coo); /* on success and on failure (a zeroed one: nothing) */
  unlink(path);
  return 0;
}
