/*
 * fuzz_gz.c -- libFuzzer target for reading gzip-compressed tensor files.
 *
 * The first byte chooses the file kind (.mtx.gz or .tns.gz) and whether
 * the rest is gzip-compressed before it is written (so that the text
 * reaches the parsers) or written as it is (a corrupt or truncated gzip
 * stream).  galley_tensor_read must then succeed with a tensor whose
 * stored coordinates are in range, or fail with GALLEY_EDATA (a message
 * "PATH:LINE: error: ..." or "PATH: error: ...") -- nothing else.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "galley.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void remove_dir(void) { rmdir(dir); }

static int check_entry(void *ud, const int64_t *c, double v) {
  const galley_tensor *t = ud;
  (void)v;
  for (int k = 0; k < galley_tensor_order(t); k++)
    if (c[k] < 0 || c[k] >= galley_tensor_dim(t, k))
      abort();
  return 0;
}

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
  galley_tensor *t = NULL;
  galley_error err;
  galley_status st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err);
  if (st == GALLEY_OK) {
    galley_tensor_foreach(t, check_entry, t);
    galley_tensor_free(t);
  } else if (st == GALLEY_EDATA) {
    if (strncmp(err.msg, path, strlen(path)) != 0 || !strstr(err.msg, "error: "))
      abort();
  } else if (st != GALLEY_ENOMEM && st != GALLEY_EOVERFLOW) {
    abort();
  }
  unlink(path);
  return 0;
}
