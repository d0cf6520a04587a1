/*
 * test_io.c -- tests of the tensor file readers and writers: the exact
 * error message of every kind of malformed file, good files of every
 * Matrix Market field/symmetry/format and FROSTT header combination, the
 * number parsers against strtod, writing (text, gzip, atomic rename,
 * refusals), and every real matrix and tensor under $GALLEY_DATA_DIR
 * (loads, known nonzero counts, bit-exact round trip through .tns).
 */
#define _DEFAULT_SOURCE /* DT_DIR, mkdtemp */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "galley.h"
#include "io_reader.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

/* A fresh temporary directory (removed with rm_tree). */
static char *make_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  char tmpl[512];
  snprintf(tmpl, sizeof tmpl, "%s/galley_io_XXXXXX", base ? base : "/tmp");
  char *d = mkdtemp(tmpl);
  ck_assert_msg(d != NULL, "mkdtemp: %s", strerror(errno));
  return strdup(d);
}

static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *de;
  char p[1024];
  while ((de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
      rm_tree(p);
    else
      unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static void write_bytes(const char *path, const char *data, size_t len) {
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
  ck_assert_uint_eq(fwrite(data, 1, len, f), len);
  ck_assert_int_eq(fclose(f), 0);
}

/* The whole content of a file (malloc()ed, NUL-terminated). */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
  size_t cap = 4096, n = 0, k;
  char *b = malloc(cap + 1);
  while ((k = fread(b + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap)
      b = realloc(b, (cap *= 2) + 1);
  }
  fclose(f);
  b[n] = '\0';
  if (len)
    *len = n;
  return b;
}

/* Number of entries in a directory (without . and ..). */
static int count_dir(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
  closedir(d);
  return n;
}

/* Read text given as a file named NAME in a temp dir. */
static galley_status read_text(const char *dir, const char *name,
                               const char *text, size_t len,
                               const galley_format *fmt, galley_tensor **t,
                               galley_error *err, char *path, size_t psize) {
  snprintf(path, psize, "%s/%s", dir, name);
  write_bytes(path, text, len);
  return galley_tensor_read(path, GALLEY_FILE_AUTO, fmt, t, err);
}

static int same_bits(double a, double b) { return !memcmp(&a, &b, sizeof a); }

/* ------------------------------------------------------------------ */
/* Malformed files: content and the exact message after "PATH:"        */
/* ------------------------------------------------------------------ */

typedef struct bad_case {
  const char *name; /* file name (its extension selects the reader) */
  const char *text; /* content */
  size_t len;       /* length when the content holds NULs, else 0 */
  const char *msg;  /* expected message after "PATH:" */
} bad_case;

#define MM "%%MatrixMarket matrix "
#define MMCRG MM "coordinate real general\n"

static const bad_case bad_cases[] = {
    /* ---- Matrix Market: banner ---- */
    {"empty.mtx", "", 0,
     "1: error: missing '%%MatrixMarket' banner (empty file)"},
    {"nobanner.mtx", "3 3 1\n1 1 1\n", 0,
     "1: error: missing '%%MatrixMarket' banner"},
    {"shortbanner.mtx", MM "coordinate real\n3 3 0\n", 0,
     "1: error: bad banner: expected '%%MatrixMarket matrix FORMAT FIELD "
     "SYMMETRY'"},
    {"vector.mtx", "%%MatrixMarket vector coordinate real general\n", 0,
     "1: error: unsupported object 'vector' (expected 'matrix')"},
    {"format.mtx", MM "sparse real general\n", 0,
     "1: error: unknown format 'sparse' (expected 'coordinate' or 'array')"},
    {"field.mtx", MM "coordinate float general\n", 0,
     "1: error: unknown field 'float' (expected 'real', 'integer' or "
     "'pattern')"},
    {"complex.mtx", MM "coordinate complex general\n2 2 1\n1 1 1 0\n", 0,
     "1: error: complex matrices are not supported"},
    {"hermitian.mtx", MM "coordinate real hermitian\n", 0,
     "1: error: hermitian matrices are not supported"},
    {"symmetry.mtx", MM "coordinate real upper\n", 0,
     "1: error: unknown symmetry 'upper' (expected 'general', 'symmetric' "
     "or 'skew-symmetric')"},
    {"patarray.mtx", MM "array pattern general\n2 2\n", 0,
     "1: error: a pattern matrix cannot be in array format"},
    {"patskew.mtx", MM "coordinate pattern skew-symmetric\n2 2 0\n", 0,
     "1: error: a pattern matrix cannot be skew-symmetric"},
    /* ---- Matrix Market: size line ---- */
    {"nosize.mtx", MMCRG "% only a comment\n\n", 0,
     "3: error: missing size line"},
    {"sizefields.mtx", MMCRG "3 3\n", 0,
     "2: error: bad size line: expected 'ROWS COLS NNZ'"},
    {"arraysize.mtx", MM "array real general\n3 3 9\n", 0,
     "2: error: bad size line: expected 'ROWS COLS'"},
    {"sizeword.mtx", MMCRG "3 x 1\n", 0, "2: error: bad size 'x'"},
    {"sizeneg.mtx", MMCRG "-3 3 1\n", 0, "2: error: negative size -3"},
    {"sizenegnnz.mtx", MMCRG "3 3 -1\n", 0, "2: error: negative size -1"},
    {"sizeover.mtx", MMCRG "99999999999999999999 3 1\n", 0,
     "2: error: size '99999999999999999999' overflows int64"},
    {"arrayhuge.mtx", MM "array real general\n4294967296 4294967296\n", 0,
     "2: error: dense matrix of 4294967296 x 4294967296 is too large"},
    {"arraybig.mtx", MM "array real general\n2147483648 2147483648\n", 0,
     "2: error: dense matrix of 2147483648 x 2147483648 is too large"},
    {"nonsquare.mtx", MM "coordinate real symmetric\n3 4 1\n", 0,
     "2: error: a symmetric matrix must be square, not 3 x 4"},
    /* ---- Matrix Market: entries ---- */
    {"fewfields.mtx", MMCRG "3 3 2\n1 1\n2 2 2\n", 0,
     "3: error: expected 3 fields, found 2"},
    {"manyfields.mtx", MMCRG "3 3 1\n1 1 1 1\n", 0,
     "3: error: expected 3 fields, found 4"},
    {"patfields.mtx", MM "coordinate pattern general\n3 3 1\n1 1 1\n", 0,
     "3: error: expected 2 fields, found 3"},
    {"value.mtx", MMCRG "3 3 1\n1 1 abc\n", 0, "3: error: bad value 'abc'"},
    {"huge.mtx", MMCRG "3 3 1\n1 1 1e999\n", 0,
     "3: error: value '1e999' is too large for a double (the largest is "
     "about 1.8e308; write inf for infinity)"},
    {"value2.mtx", MMCRG "3 3 1\n1 1 1.5.2\n", 0,
     "3: error: bad value '1.5.2'"},
    {"intvalue.mtx", MM "coordinate integer general\n3 3 1\n1 1 1.5\n", 0,
     "3: error: bad integer value '1.5'"},
    {"rowword.mtx", MMCRG "3 3 1\nx 1 1\n", 0,
     "3: error: bad row index 'x'"},
    {"rowzero.mtx", MMCRG "3 3 1\n0 1 1\n", 0,
     "3: error: row index 0 out of range 1..3"},
    {"rowneg.mtx", MMCRG "3 3 1\n-1 1 1\n", 0,
     "3: error: row index -1 out of range 1..3"},
    {"colbig.mtx", MMCRG "3 3 1\n1 4 1\n", 0,
     "3: error: column index 4 out of range 1..3"},
    {"colover.mtx", MMCRG "3 3 1\n1 99999999999999999999 1\n", 0,
     "3: error: column index '99999999999999999999' overflows int64"},
    {"truncated.mtx", MMCRG "3 3 2\n1 1 1\n2 2", 0,
     "4: error: truncated last line: expected 3 fields, found 2"},
    {"fewentries.mtx", MMCRG "3 3 3\n1 1 1\n2 2 2\n", 0,
     "4: error: expected 3 entries, found 2"},
    {"noentries.mtx", MMCRG "3 3 1\n", 0,
     "2: error: expected 1 entries, found 0"},
    {"manyentries.mtx", MMCRG "3 3 1\n1 1 1\n% comment\n2 2 2\n", 0,
     "5: error: more entries than the 1 on the size line"},
    {"skewdiag.mtx", MM "coordinate real skew-symmetric\n3 3 1\n2 2 1\n", 0,
     "3: error: diagonal entry (2, 2) in a skew-symmetric matrix"},
    {"symupper.mtx", MM "coordinate real symmetric\n3 3 1\n1 2 1\n", 0,
     "3: error: entry (1, 2) above the diagonal of a symmetric matrix "
     "(only the lower triangle may be stored)"},
    {"skewupper.mtx", MM "coordinate real skew-symmetric\n3 3 1\n1 3 1\n", 0,
     "3: error: entry (1, 3) above the diagonal of a skew-symmetric matrix "
     "(only the lower triangle may be stored)"},
    {"arrayfew.mtx", MM "array real general\n2 2\n1\n2\n3\n", 0,
     "5: error: expected 4 entries, found 3"},
    {"arraymany.mtx", MM "array real symmetric\n2 2\n1\n2\n3\n4\n", 0,
     "6: error: more entries than the 3 on the size line"},
    {"arrayfields.mtx", MM "array real general\n2 2\n1 2\n", 0,
     "3: error: expected 1 field, found 2"},
    {"nul.mtx", MMCRG "3 3 1\n1 1\0 1\n", sizeof(MMCRG "3 3 1\n1 1\0 1\n") - 1,
     "3: error: bad column index '1?'"},
    {"cr.mtx", MMCRG "3 3 1\n1 1\r1\n", 0,
     "3: error: expected 3 fields, found 2"},
    /* ---- FROSTT ---- */
    {"empty.tns", "", 0, "1: error: no entries and no '# dims:' header"},
    {"comments.tns", "# just a comment\n\n", 0,
     "2: error: no entries and no '# dims:' header"},
    {"ragged.tns", "1 1 1\n1 2 3 1\n", 0,
     "2: error: expected 3 fields like the first entry, found 4"},
    {"ragged2.tns", "1 1 1 1\n1 2 1\n", 0,
     "2: error: expected 4 fields like the first entry, found 3"},
    {"dimscount.tns", "# dims: 2 2 2\n1 1 1\n", 0,
     "2: error: '# dims:' gives 3 sizes but the entry has 3 fields "
     "(expected 4)"},
    {"fillword.tns", "# dims: 2\n# fill: x\n", 0,
     "2: error: bad '# fill:' value 'x'"},
    {"fillempty.tns", "# fill:\n1 1\n", 0,
     "1: error: bad '# fill:' header: expected one value"},
    {"filltwo.tns", "# fill: 1 2\n", 0,
     "1: error: bad '# fill:' header: expected one value"},
    {"fillafter.tns", "1 1 1\n# fill: 2\n", 0,
     "2: error: '# fill:' header after the first entry"},
    {"crdzero.tns", "1 0 5\n", 0,
     "1: error: coordinate 0 in field 2 is below 1"},
    {"crdneg.tns", "1 1 1\n-2 1 5\n", 0,
     "2: error: coordinate -2 in field 1 is below 1"},
    {"crdbig.tns", "# dims: 2 2\n1 3 5\n", 0,
     "2: error: coordinate 3 in field 2 out of range 1..2"},
    {"crdover.tns", "1 99999999999999999999 1\n", 0,
     "1: error: coordinate '99999999999999999999' overflows int64"},
    {"crdreal.tns", "1 1.5 1\n", 0, "1: error: bad coordinate '1.5'"},
    {"value.tns", "1 1 abc\n", 0, "1: error: bad value 'abc'"},
    /* too large for a double: refused as in a program, not read as inf */
    {"huge.tns", "1 1 2\n2 2 -1e999\n", 0,
     "2: error: value '-1e999' is too large for a double (the largest is "
     "about 1.8e308; write inf for infinity)"},
    {"hugefill.tns", "# fill: 1e400\n1 1 2\n", 0,
     "1: error: bad '# fill:' value '1e400' is too large for a double (the "
     "largest is about 1.8e308; write inf for infinity)"},
    {"dimsafter.tns", "1 1 1\n# dims: 2 2\n", 0,
     "2: error: '# dims:' header after the first entry"},
    {"dimstwice.tns", "# dims: 2 2\n# dims: 2 2\n", 0,
     "2: error: duplicate '# dims:' header"},
    {"filltwice.tns", "# fill: 1\n# fill: 1\n", 0,
     "2: error: duplicate '# fill:' header"},
    {"dimsneg.tns", "# dims: 2 -1\n", 0,
     "1: error: negative size -1 in '# dims:'"},
    {"dimsword.tns", "# dims: 2 x\n", 0, "1: error: bad size 'x' in '# dims:'"},
    {"dimsover.tns", "# dims: 99999999999999999999\n", 0,
     "1: error: size '99999999999999999999' in '# dims:' overflows int64"},
    {"dimsmany.tns", "# dims: 1 1 1 1 1 1 1 1 1\n", 0,
     "1: error: '# dims:' gives 9 sizes, more than the maximum order 8"},
    {"order9.tns", "1 1 1 1 1 1 1 1 1 1\n", 0,
     "1: error: entry has 9 coordinates, more than the maximum order 8"},
    {"onefield.tns", "5\n", 0,
     "1: error: an entry needs coordinates and a value (or a '# dims:' "
     "header with no sizes for a scalar)"},
    {"scalarnone.tns", "# dims:\n# fill: 0\n", 0,
     "2: error: missing the value line of a scalar ('# dims:' with no "
     "sizes)"},
    {"scalartwo.tns", "# dims:\n1\n2\n", 0,
     "3: error: more than one value line in a scalar file"},
    {"scalarcrd.tns", "# dims:\n1 2\n", 0,
     "2: error: '# dims:' gives 0 sizes but the entry has 2 fields "
     "(expected 1)"},
    {"truncated.tns", "1 1 1\n2 2", 0,
     "2: error: truncated last line: expected 3 fields, found 2"},
    {"longtoken.tns", "1 1 1\n1 1 0123456789012345678901234567890123456789xyz\n",
     0, "2: error: bad value '0123456789012345678901234567890123456789...'"},
};

#define N_BAD_CASES ((int)(sizeof bad_cases / sizeof bad_cases[0]))

START_TEST(malformed_file) {
  const bad_case *c = &bad_cases[_i];
  char *dir = make_tmpdir(), path[1024], want[2048];
  galley_error err;
  galley_tensor *t = (galley_tensor *)&err; /* must be reset to NULL */
  size_t len = c->len ? c->len : strlen(c->text);
  galley_status st =
      read_text(dir, c->name, c->text, len, NULL, &t, &err, path, sizeof path);
  snprintf(want, sizeof want, "%s:%s", path, c->msg);
  ck_assert_msg(st == GALLEY_EDATA, "%s: status %d (%s)", c->name, st,
                err.msg);
  ck_assert_int_eq(err.status, GALLEY_EDATA);
  ck_assert_str_eq(err.msg, want);
  ck_assert_ptr_null(t);
  /* the same through the parser on memory, as the fuzz targets call it */
  rt_reader r;
  rt_coo coo;
  galley_error err2;
  ck_assert_int_eq(rt_reader_open_mem(&r, path, c->text, len, &err2), 0);
  if (strstr(c->name, ".mtx"))
    st = rt_read_mtx(&r, &coo, NULL, &err2);
  else
    st = rt_read_tns(&r, &coo, &err2);
  rt_reader_close(&r);
  rt_coo_free(&coo);
  ck_assert_int_eq(st, GALLEY_EDATA);
  ck_assert_str_eq(err2.msg, want);
  rm_tree(dir);
  free(dir);
}
END_TEST

START_TEST(missing_file) {
  char *dir = make_tmpdir(), path[1024], want[1200];
  galley_error err;
  galley_tensor *t = NULL;
  snprintf(path, sizeof path, "%s/nope.mtx", dir);
  ck_assert_int_eq(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err),
                   GALLEY_EIO);
  snprintf(want, sizeof want, "%s: error: cannot open: %s", path,
           strerror(ENOENT));
  ck_assert_str_eq(err.msg, want);
  ck_assert_ptr_null(t);
  /* a directory is not a tensor file */
  snprintf(path, sizeof path, "%s/sub.tns", dir);
  ck_assert_int_eq(mkdir(path, 0777), 0);
  ck_assert_int_eq(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err),
                   GALLEY_EIO);
  snprintf(want, sizeof want, "%s: error: cannot open: %s", path,
           strerror(EISDIR));
  ck_assert_str_eq(err.msg, want);
  /* an unknown extension */
  snprintf(path, sizeof path, "%s/x.txt", dir);
  ck_assert_int_eq(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err),
                   GALLEY_EINVAL);
  rm_tree(dir);
  free(dir);
}
END_TEST

/* Sizes that fit int64 but not memory in a dense-rooted format are
 * refused before any allocation; without a format, a hypersparse file
 * (most rows empty) is read with a sorted-list root and loads. */
START_TEST(huge_dense_default) {
  char *dir = make_tmpdir(), path[1024];
  galley_error err;
  galley_tensor *t = NULL;
  galley_format csr, dcsr;
  ck_assert_int_eq(galley_format_parse("dense,list", 2, &csr, &err), 0);
  ck_assert_int_eq(galley_format_parse("list,list", 2, &dcsr, &err), 0);
  galley_status st =
      read_text(dir, "huge.tns", "# dims: 4611686018427387904 4\n1 1 1\n",
                strlen("# dims: 4611686018427387904 4\n1 1 1\n"), &csr, &t,
                &err, path, sizeof path);
  ck_assert_int_eq(st, GALLEY_EOVERFLOW);
  ck_assert_ptr_null(t);
  ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0 &&
                    strstr(err.msg, "too large"),
                "%s", err.msg);
  /* 2^62 rows do not fit even a list root (positions stay below 2^62) */
  st = read_text(dir, "huge.tns", "# dims: 4611686018427387904 4\n1 1 1\n",
                 strlen("# dims: 4611686018427387904 4\n1 1 1\n"), NULL, &t,
                 &err, path, sizeof path);
  ck_assert_int_eq(st, GALLEY_EOVERFLOW);
  ck_assert_ptr_null(t);
  ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0, "%s", err.msg);
  const char *m = MMCRG "1099511627776 2 1\n1 1 1\n";
  st = read_text(dir, "huge.mtx", m, strlen(m), &csr, &t, &err, path,
                 sizeof path);
  ck_assert_int_eq(st, GALLEY_EOVERFLOW);
  ck_assert_ptr_null(t);
  /* by default, and with an explicit list root, the same file loads */
  for (int k = 0; k < 2; k++) {
    st = read_text(dir, "huge.mtx", m, strlen(m), k ? &dcsr : NULL, &t, &err,
                   path, sizeof path);
    ck_assert_msg(st == GALLEY_OK, "%s", err.msg);
    ck_assert_int_eq(galley_tensor_dim(t, 0), (int64_t)1 << 40);
    galley_format f;
    galley_tensor_format(t, &f);
    ck_assert_int_eq(f.kinds[0], GALLEY_LIST);
    ck_assert_int_eq(f.kinds[1], GALLEY_LIST);
    ck_assert_int_lt(galley_tensor_bytes(t), 4096);
    galley_tensor_free(t);
  }
  /* not hypersparse: the dense root of CSR stays */
  const char *small = MMCRG "32 2 2\n1 1 1\n32 2 1\n";
  st = read_text(dir, "small.mtx", small, strlen(small), NULL, &t, &err, path,
                 sizeof path);
  ck_assert_msg(st == GALLEY_OK, "%s", err.msg);
  galley_format f;
  galley_tensor_format(t, &f);
  ck_assert_int_eq(f.kinds[0], GALLEY_DENSE);
  galley_tensor_free(t);
  rm_tree(dir);
  free(dir);
}
END_TEST

/* A gzip file with corrupt or missing data is malformed, not a crash. */
START_TEST(corrupt_gzip) {
  char *dir = make_tmpdir(), path[1024];
  snprintf(path, sizeof path, "%s/bad.mtx.gz", dir);
  /* a valid gz of a file big enough to span several deflate blocks */
  gzFile gz = gzopen(path, "wb");
  ck_assert_ptr_nonnull(gz);
  gzputs(gz, MMCRG "1000 1000 20000\n");
  test_rng rng = test_rng_seed(7);
  for (int k = 0; k < 20000; k++)
    gzprintf(gz, "%d %d %.17g\n", (int)test_rng_below(&rng, 1000) + 1,
             (int)test_rng_below(&rng, 1000) + 1,
             test_rng_double(&rng, -1, 1));
  ck_assert_int_eq(gzclose(gz), Z_OK);
  size_t len;
  char *data = slurp(path, &len);
  galley_error err;
  galley_tensor *t = NULL;
  galley_status st0 = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err);
  ck_assert_msg(st0 == GALLEY_OK, "%s", err.msg);
  t = galley_tensor_free(t);
  /* flip bytes in the middle of the compressed stream */
  for (size_t i = len / 2; i < len / 2 + 64; i++)
    data[i] ^= 0x5a;
  write_bytes(path, data, len);
  galley_status st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err);
  ck_assert_int_eq(st, GALLEY_EDATA);
  ck_assert_ptr_null(t);
  ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0 &&
                    strstr(err.msg, ": error: corrupt gzip data ("),
                "%s", err.msg);
  /* cut the stream short */
  data[len / 2] ^= 0x5a; /* (still corrupt; write an intact prefix instead) */
  free(data);
  gz = gzopen(path, "wb");
  gzputs(gz, MMCRG "3 3 2\n1 1 1\n2 2 2\n");
  gzclose(gz);
  data = slurp(path, &len);
  write_bytes(path, data, len - 6); /* drop part of the CRC/size trailer */
  st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err);
  ck_assert_int_eq(st, GALLEY_EDATA);
  ck_assert_msg(strstr(err.msg, "corrupt gzip data"), "%s", err.msg);
  free(data);
  rm_tree(dir);
  free(dir);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Good files                                                          */
/* ------------------------------------------------------------------ */

typedef struct good_entry {
  int64_t i, j, k; /* 0-based coordinates (unused modes 0) */
  double v;        /* expected value */
} good_entry;

typedef struct good_case {
  const char *name;        /* file name */
  const char *text;        /* content */
  int order;               /* expected order */
  int64_t dims[3];         /* expected sizes */
  double fill;             /* expected fill */
  int dense;               /* expected all-dense format (mtx array) */
  int n;                   /* entries listed (the non-fill ones) */
  good_entry e[10];        /* expected non-fill entries */
} good_case;

static const good_case good_cases[] = {
    {"real.mtx",
     MMCRG "% comment\n\n2 3 3\n1 1 1.5\n  2 3\t-2e3  \n% inside\n1 3 inf\n",
     2, {2, 3}, 0, 0, 3, {{0, 0, 0, 1.5}, {0, 2, 0, INFINITY},
                          {1, 2, 0, -2000}}},
    {"intsym.mtx",
     "%%matrixmarket MATRIX Coordinate INTEGER Symmetric\n3 3 3\n1 1 4\n3 1 "
     "7\n3 2 -1\n",
     2, {3, 3}, 0, 0, 5, {{0, 0, 0, 4}, {0, 2, 0, 7}, {1, 2, 0, -1},
                          {2, 0, 0, 7}, {2, 1, 0, -1}}},
    {"patsym.mtx", MM "coordinate pattern symmetric\n3 3 2\n2 1\n3 3\n", 2,
     {3, 3}, 0, 0, 3, {{0, 1, 0, 1}, {1, 0, 0, 1}, {2, 2, 0, 1}}},
    {"patgen.mtx", MM "coordinate pattern general\n2 4 2\n1 4\n2 1\n", 2,
     {2, 4}, 0, 0, 2, {{0, 3, 0, 1}, {1, 0, 0, 1}}},
    {"intgen.mtx", MM "coordinate integer general\n2 2 2\n1 2 -7\n2 2 +3\n",
     2, {2, 2}, 0, 0, 2, {{0, 1, 0, -7}, {1, 1, 0, 3}}},
    {"realsym.mtx", MM "coordinate real symmetric\n2 2 2\n1 1 .5\n2 1 2.\n",
     2, {2, 2}, 0, 0, 3, {{0, 0, 0, 0.5}, {0, 1, 0, 2}, {1, 0, 0, 2}}},
    {"skew.mtx",
     MM "coordinate real skew-symmetric\n3 3 2\n2 1 5\n3 2 -1.25\n", 2,
     {3, 3}, 0, 0, 4, {{0, 1, 0, -5}, {1, 0, 0, 5}, {1, 2, 0, 1.25},
                       {2, 1, 0, -1.25}}},
    {"intskew.mtx", MM "coordinate integer skew-symmetric\n2 2 1\n2 1 3\n",
     2, {2, 2}, 0, 0, 2, {{0, 1, 0, -3}, {1, 0, 0, 3}}},
    {"array.mtx", MM "array real general\n2 3\n1\n2\n0\n4\n5\n6\n", 2, {2, 3},
     0, 1, 5, {{0, 0, 0, 1}, {0, 2, 0, 5}, {1, 0, 0, 2}, {1, 1, 0, 4},
               {1, 2, 0, 6}}},
    {"arraysym.mtx", MM "array integer symmetric\n3 3\n1\n2\n3\n4\n5\n6\n", 2,
     {3, 3}, 0, 1, 9, {{0, 0, 0, 1}, {0, 1, 0, 2}, {0, 2, 0, 3}, {1, 0, 0, 2},
                       {1, 1, 0, 4}, {1, 2, 0, 5}, {2, 0, 0, 3}, {2, 1, 0, 5},
                       {2, 2, 0, 6}}},
    {"arrayskew.mtx", MM "array real skew-symmetric\n3 3\n1\n2\n3\n", 2,
     {3, 3}, 0, 1, 6, {{0, 1, 0, -1}, {0, 2, 0, -2}, {1, 0, 0, 1},
                       {1, 2, 0, -3}, {2, 0, 0, 2}, {2, 1, 0, 3}}},
    {"arrayempty.mtx", MM "array real general\n0 5\n", 2, {0, 5}, 0, 1, 0,
     {{0}}},
    {"crlf.mtx", MMCRG "% c\r\n2 2 1\r\n2 2 3.5\r\n", 2, {2, 2}, 0, 0, 1,
     {{1, 1, 0, 3.5}}},
    {"nonl.mtx", MMCRG "2 2 1\n1 2 7", 2, {2, 2}, 0, 0, 1, {{0, 1, 0, 7}}},
    {"dups.mtx", MMCRG "2 2 3\n1 1 1\n2 1 4\n1 1 2\n", 2, {2, 2}, 0, 0, 2,
     {{0, 0, 0, 3}, {1, 0, 0, 4}}},
    {"zero.mtx", MMCRG "3 4 0\n", 2, {3, 4}, 0, 0, 0, {{0}}},
    {"special.mtx", MMCRG "1 4 4\n1 1 -INF\n1 2 Infinity\n1 3 1e-320\n"
                          "1 4 +inf\n",
     2, {1, 4}, 0, 0, 4, {{0, 0, 0, -INFINITY}, {0, 1, 0, INFINITY},
                          {0, 2, 0, 1e-320}, {0, 3, 0, INFINITY}}},
    {"headers.tns", "# dims: 3 4\n# fill: 2.5\n1 1 1\n3 4 -1\n", 2, {3, 4},
     2.5, 0, 2, {{0, 0, 0, 1}, {2, 3, 0, -1}}},
    {"plain.tns", "# a comment\n2\t3  1 7\n\n   1 1 1 -0.25\n", 3, {2, 3, 1},
     0, 0, 2, {{0, 0, 0, -0.25}, {1, 2, 0, 7}}},
    {"fillfirst.tns", "# fill: -inf\n# dims: 2 2 2\n2 2 2 1\n", 3, {2, 2, 2},
     -INFINITY, 0, 1, {{1, 1, 1, 1}}},
    {"fillnan.tns", "#dims: 2\n#fill: NaN\n2 4\n", 1, {2}, NAN, 0, 1,
     {{1, 0, 0, 4}}},
    {"dups.tns", "1 1 1\n1 1 2.5\n2 2 1\n", 2, {2, 2}, 0, 0, 2,
     {{0, 0, 0, 3.5}, {1, 1, 0, 1}}},
    {"crlf.tns", "# dims: 2 2\r\n# fill: 0\r\n1 2 3\r\n", 2, {2, 2}, 0, 0, 1,
     {{0, 1, 0, 3}}},
    {"nonl.tns", "1 2 3", 2, {1, 2}, 0, 0, 1, {{0, 1, 0, 3}}},
    {"emptydims.tns", "# dims: 5 5\n# fill: 1\n", 2, {5, 5}, 1, 0, 0, {{0}}},
    {"zerosize.tns", "# dims: 0 3\n", 2, {0, 3}, 0, 0, 0, {{0}}},
    {"order1.tns", "3 1\n1 2\n", 1, {3}, 0, 0, 2, {{0, 0, 0, 2}, {2, 0, 0, 1}}},
};

#define N_GOOD_CASES ((int)(sizeof good_cases / sizeof good_cases[0]))

START_TEST(good_file) {
  const good_case *c = &good_cases[_i];
  char *dir = make_tmpdir(), path[1024];
  galley_error err;
  galley_tensor *t = NULL;
  galley_status st = read_text(dir, c->name, c->text, strlen(c->text), NULL,
                               &t, &err, path, sizeof path);
  ck_assert_msg(st == GALLEY_OK, "%s: %s", c->name, err.msg);
  ck_assert_int_eq(galley_tensor_order(t), c->order);
  for (int k = 0; k < c->order; k++)
    ck_assert_int_eq(galley_tensor_dim(t, k), c->dims[k]);
  ck_assert_msg(same_bits(galley_tensor_fill(t), c->fill) ||
                    (isnan(c->fill) && isnan(galley_tensor_fill(t))),
                "%s: fill", c->name);
  galley_format f;
  galley_tensor_format(t, &f);
  galley_format want = c->dense ? galley_format_dense(c->order)
                                : galley_format_default(c->order);
  for (int l = 0; l < c->order; l++)
    ck_assert_int_eq(f.kinds[l], want.kinds[l]);
  int64_t nnz, *crd;
  double *val;
  ck_assert_int_eq(
      galley_tensor_to_coo(t, GALLEY_EXPORT_SKIP_FILL, &nnz, &crd, &val, &err),
      GALLEY_OK);
  ck_assert_int_eq(nnz, c->n);
  for (int e = 0; e < c->n; e++) {
    int64_t want_c[3] = {c->e[e].i, c->e[e].j, c->e[e].k};
    for (int k = 0; k < c->order; k++)
      ck_assert_int_eq(crd[e * c->order + k], want_c[k]);
    ck_assert_msg(same_bits(val[e], c->e[e].v), "%s: entry %d: %.17g != %.17g",
                  c->name, e, val[e], c->e[e].v);
  }
  free(crd);
  free(val);
  galley_tensor_free(t);
  rm_tree(dir);
  free(dir);
}
END_TEST

START_TEST(scalar_file) {
  char *dir = make_tmpdir(), path[1024];
  galley_error err;
  galley_tensor *t = NULL;
  const char *s = "# dims:\n# fill: 0\n42.5\n";
  ck_assert_int_eq(
      read_text(dir, "s.tns", s, strlen(s), NULL, &t, &err, path, sizeof path),
      GALLEY_OK);
  ck_assert_int_eq(galley_tensor_order(t), 0);
  int64_t none[1] = {0};
  ck_assert(galley_tensor_get(t, none, NULL) == 42.5);
  /* and it writes back the same text */
  snprintf(path, sizeof path, "%s/out.tns", dir);
  ck_assert_int_eq(galley_tensor_write(t, path, GALLEY_FILE_AUTO, &err), 0);
  char *text = slurp(path, NULL);
  ck_assert_str_eq(text, s);
  free(text);
  galley_tensor_free(t);
  rm_tree(dir);
  free(dir);
}
END_TEST

/* An explicit format is used; a format of the wrong order is refused. */
START_TEST(explicit_format) {
  char *dir = make_tmpdir(), path[1024];
  galley_error err;
  galley_tensor *t = NULL;
  const char *s = MMCRG "2 3 2\n1 3 1\n2 1 2\n";
  galley_format f;
  ck_assert_int_eq(galley_format_parse("dense:1,list:0", 2, &f, &err), 0);
  ck_assert_int_eq(
      read_text(dir, "a.mtx", s, strlen(s), &f, &t, &err, path, sizeof path),
      GALLEY_OK);
  galley_format g;
  galley_tensor_format(t, &g);
  ck_assert_int_eq(g.mode_order[0], 1);
  int64_t c[2] = {0, 2};
  ck_assert(galley_tensor_get(t, c, NULL) == 1);
  t = galley_tensor_free(t);
  f = galley_format_default(3);
  ck_assert_int_eq(
      read_text(dir, "a.mtx", s, strlen(s), &f, &t, &err, path, sizeof path),
      GALLEY_EINVAL);
  ck_assert_ptr_null(t);
  rm_tree(dir);
  free(dir);
}
END_TEST

/* A line longer than the reader's buffer, and lines across buffer
 * boundaries. */
START_TEST(long_lines) {
  char *dir = make_tmpdir(), path[1024];
  size_t n = (3u << 20) + 100;
  char *s = malloc(n + 1000);
  size_t k = 0;
  s[k++] = '#';
  while (k < n)
    s[k++] = 'x';
  k += (size_t)sprintf(s + k, "\n# dims: 4 4\n");
  for (int i = 0; i < 10; i++) /* a long run of blanks inside an entry */
    k += (size_t)sprintf(s + k, "%d        %d         %d\n", i % 4 + 1, 2, i);
  galley_error err;
  galley_tensor *t = NULL;
  galley_status st =
      read_text(dir, "long.tns", s, k, NULL, &t, &err, path, sizeof path);
  ck_assert_msg(st == GALLEY_OK, "%s", err.msg);
  int64_t c[2] = {1, 1};
  ck_assert(galley_tensor_get(t, c, NULL) == 1 + 5 + 9);
  galley_tensor_free(t);
  free(s);
  rm_tree(dir);
  free(dir);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Number parsers                                                      */
/* ------------------------------------------------------------------ */

static int parse_d(const char *s, double *v) {
  return rt_parse_double(s, s + strlen(s), v);
}

START_TEST(parse_numbers) {
  int64_t x;
  const char *s;
#define INT_OK(str, val)                                                     \
  s = str;                                                                   \
  ck_assert_int_eq(rt_parse_int64(s, s + strlen(s), &x), RT_NUM_OK);         \
  ck_assert(x == (val))
  INT_OK("0", 0);
  INT_OK("+5", 5);
  INT_OK("-17", -17);
  INT_OK("9223372036854775807", INT64_MAX);
  INT_OK("-9223372036854775808", INT64_MIN);
  INT_OK("000000000000000000000000012", 12);
#undef INT_OK
  const char *bad_int[] = {"", "-", "+", "1a", "1.0", " 1", "0x1", "--1"};
  for (size_t i = 0; i < sizeof bad_int / sizeof *bad_int; i++)
    ck_assert_int_eq(rt_parse_int64(bad_int[i], bad_int[i] + strlen(bad_int[i]),
                                    &x),
                     RT_NUM_BAD);
  const char *over[] = {"9223372036854775808", "-9223372036854775809",
                        "99999999999999999999999"};
  for (size_t i = 0; i < sizeof over / sizeof *over; i++)
    ck_assert_int_eq(rt_parse_int64(over[i], over[i] + strlen(over[i]), &x),
                     RT_NUM_OVERFLOW);

  double v;
  const char *good[] = {"0", "-0", "1", "0.1", ".5", "5.", "-2.5e-3",
                        "1E23", "9007199254740993", "4.9e-324", "1e-400",
                        "1.7976931348623157e308", "2.2250738585072011e-308",
                        "123456789012345678901234567890",
                        "0.000000000000000000000000000001", "1e+22", "1e22",
                        "3.14159265358979323846264338327950288",
                        "+7", "00012.5000"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    ck_assert_msg(parse_d(good[i], &v) == RT_NUM_OK, "%s", good[i]);
    ck_assert_msg(same_bits(v, strtod(good[i], NULL)), "%s", good[i]);
  }
  const char *special[] = {"inf", "INF", "-Infinity", "+inf", "nan", "NaN",
                           "-nan"};
  for (size_t i = 0; i < sizeof special / sizeof *special; i++)
    ck_assert_msg(parse_d(special[i], &v) == RT_NUM_OK, "%s", special[i]);
  ck_assert(parse_d("-inf", &v) == 0 && isinf(v) && v < 0);
  ck_assert(parse_d("nan", &v) == 0 && isnan(v));
  const char *bad[] = {"", "-", ".", "e5", "1e", "1e+", "0x10", "1.2.3",
                       "--1", "infx", "nan(1)", "1,5", "in", "1 ", "1d5",
                       "+-1", ".e1", "infinit"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    ck_assert_msg(parse_d(bad[i], &v) == RT_NUM_BAD, "%s", bad[i]);
  /* decimals beyond the largest double: overflow, not inf */
  const char *huge[] = {"1e400", "-1e999", "1.7976931348623159e308",
                        "1000000000000000000000e300"};
  for (size_t i = 0; i < sizeof huge / sizeof *huge; i++)
    ck_assert_msg(parse_d(huge[i], &v) == RT_NUM_OVERFLOW, "%s", huge[i]);

  /* random decimals round exactly like strtod */
  test_rng rng = test_rng_seed(42);
  char buf[64];
  for (int it = 0; it < 200000; it++) {
    int k = 0;
    if (test_rng_below(&rng, 4) == 0)
      buf[k++] = '-';
    int nd = 1 + (int)test_rng_below(&rng, 22);
    int dot = (int)test_rng_below(&rng, nd + 2) - 1;
    for (int d = 0; d < nd; d++) {
      if (d == dot)
        buf[k++] = '.';
      buf[k++] = (char)('0' + test_rng_below(&rng, 10));
    }
    if (test_rng_below(&rng, 3) == 0)
      k += sprintf(buf + k, "e%d", (int)test_rng_below(&rng, 700) - 350);
    buf[k] = '\0';
    int want = isinf(strtod(buf, NULL)) ? RT_NUM_OVERFLOW : RT_NUM_OK;
    ck_assert_msg(parse_d(buf, &v) == want, "%s", buf);
    ck_assert_msg(same_bits(v, strtod(buf, NULL)), "%s: %.17g vs %.17g", buf,
                  v, strtod(buf, NULL));
  }
  /* random doubles printed with %.17g and %.15g come back exactly */
  for (int it = 0; it < 100000; it++) {
    uint64_t bits = test_rng_next(&rng);
    double d;
    memcpy(&d, &bits, sizeof d);
    if (!isfinite(d))
      continue;
    snprintf(buf, sizeof buf, it & 1 ? "%.17g" : "%.15g", d);
    ck_assert_msg(parse_d(buf, &v) == RT_NUM_OK, "%s", buf);
    ck_assert_msg(same_bits(v, strtod(buf, NULL)), "%s", buf);
  }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Writing                                                             */
/* ------------------------------------------------------------------ */

static galley_tensor *small_matrix(double fill) {
  int64_t dims[2] = {2, 3}, crd[] = {0, 0, 0, 1, 1, 2, 1, 0, 0, 2};
  double val[] = {0.1, -INFINITY, 1e300, NAN, 5e-324};
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(
      galley_tensor_from_coo(2, dims, 5, crd, val, fill, NULL, &t, &err), 0);
  return t;
}

START_TEST(write_tns_text) {
  char *dir = make_tmpdir(), path[1024];
  galley_error err;
  galley_tensor *t = small_matrix(0.0);
  snprintf(path, sizeof path, "%s/m.tns", dir);
  ck_assert_int_eq(galley_tensor_write(t, path, GALLEY_FILE_AUTO, &err), 0);
  char *text = slurp(path, NULL);
  ck_assert_str_eq(text, "# dims: 2 3\n# fill: 0\n"
                         "1 1 0.1\n"
                         "1 2 -inf\n"
                         "1 3 4.94065645841247e-324\n"
                         "2 1 nan\n"
                         "2 3 1e+300\n");
  free(text);
  ck_assert_int_eq(count_dir(dir), 1); /* no temporary left behind */
  /* the stream writer prints the same */
  FILE *f = tmpfile();
  ck_assert_int_eq(galley_tensor_write_tns_stream(t, f, &err), 0);
  rewind(f);
  char sbuf[512];
  size_t n = fread(sbuf, 1, sizeof sbuf - 1, f);
  sbuf[n] = '\0';
  fclose(f);
  ck_assert(strstr(sbuf, "2 1 nan\n") != NULL);
  ck_assert(strncmp(sbuf, "# dims: 2 3\n# fill: 0\n", 22) == 0);
  /* round trip, bit-exact (the NaN included) */
  galley_tensor *u = NULL;
  ck_assert_int_eq(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &u, &err),
                   0);
  int64_t c[2] = {1, 2};
  ck_assert(galley_tensor_get(u, c, NULL) == 1e300);
  c[0] = 0;
  ck_assert(galley_tensor_get(u, c, NULL) == 5e-324);
  galley_tensor_free(u);
  /* a fill of nan: nan entries are left out */
  galley_tensor_free(t);
  t = small_matrix(NAN);
  ck_assert_int_eq(galley_tensor_write(t, path, GALLEY_FILE_AUTO, &err), 0);
  text = slurp(path, NULL);
  ck_assert(strstr(text, "# fill: nan\n") != NULL);
  ck_assert(strstr(text, "2 1") == NULL);
  free(text);
  galley_tensor_free(t);
  rm_tree(dir);
  free(dir);
}
END_TEST

/* The significant digits of a number's text: from its first nonzero
 * digit to its last (sign, point, exponent aside). */
static int sig_digits(const char *t) {
  int n = 0, last = 0, started = 0;
  for (; *t && *t != 'e'; t++)
    if (*t >= '0' && *t <= '9' && (started |= *t != '0')) {
      n++;
      if (*t != '0')
        last = n;
    }
  return last;
}

/* The fewest digits n among 15, 16, 17 with which printf's correctly
 * rounded %.{n}g reads back as v (trailing zeros dropped, as %g does). */
static int ref_digits(double v) {
  char t[40];
  for (int n = 15; n < 17; n++) {
    snprintf(t, sizeof t, "%.*g", n, v);
    if (strtod(t, NULL) == v)
      return sig_digits(t);
  }
  snprintf(t, sizeof t, "%.17g", v);
  return sig_digits(t);
}

/* Values are written in the fewest digits that read back exactly: random
 * bit patterns (every exponent), decimals of a few digits, sums with
 * rounding error, and edges (powers of ten and two, 2^53, the largest and
 * smallest doubles, subnormals); each text reads back bit for bit and
 * has as many significant digits as printf's shortest of 15, 16, 17. */
START_TEST(write_shortest_numbers) {
  enum { N = 200000 };
  double *val = malloc(N * sizeof *val);
  int64_t *crd = malloc(N * sizeof *crd);
  ck_assert(val && crd);
  test_rng r = test_rng_seed(7);
  int n = 0;
  const double edges[] = {0.1, 0.15, 0.3, 0.1 + 0.2, 1.0 / 3, 2.0 / 3, 1e-5,
                          123456.789, 1e15 + 0.5, 1e16, 1e17, 1e22, 1e23,
                          9007199254740993.0, 9007199254740992.0 * 3,
                          4503599627370497.5, DBL_MAX, DBL_MIN, 5e-324,
                          2.2250738585072009e-308, 1.7976931348623157e308,
                          0.99999999999999989, 9.9999999999999995e-8,
                          1e-7, 1e-8, 1e36, 1e37, 1e38, 5e-5, 1e21 + 4096};
  for (size_t k = 0; k < sizeof edges / sizeof *edges; k++) {
    val[n++] = edges[k];
    val[n++] = -edges[k];
  }
  while (n < N) {
    double v;
    switch (test_rng_below(&r, 4)) {
    case 0: { /* any finite bit pattern */
      uint64_t b = test_rng_next(&r);
      memcpy(&v, &b, sizeof v);
      if (!isfinite(v))
        continue;
      break;
    }
    case 1: /* a short decimal */
      v = (double)(int64_t)test_rng_below(&r, 2000000) /
          pow(10, (double)test_rng_below(&r, 12));
      break;
    case 2: /* arithmetic with rounding error */
      v = test_rng_double(&r, -1e3, 1e3) * test_rng_double(&r, -1, 1);
      break;
    default: /* every decade */
      v = test_rng_double(&r, 1, 10) *
          pow(10, (double)test_rng_below(&r, 600) - 300);
      break;
    }
    val[n++] = v;
  }
  for (int k = 0; k < N; k++)
    crd[k] = k;
  int64_t dims[1] = {N};
  galley_tensor *t = NULL;
  galley_error err;
  ck_assert_int_eq(galley_tensor_from_coo(1, dims, N, crd, val, NAN, NULL,
                                          &t, &err), 0);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ck_assert_int_eq(galley_tensor_write_tns_stream(t, f, &err), 0);
  fclose(f);
  /* what it looks like */
  ck_assert(strstr(buf, " 0.15\n") && strstr(buf, " 0.30000000000000004\n") &&
            strstr(buf, " 0.3333333333333333\n") && strstr(buf, " 1e-05\n") &&
            strstr(buf, " 123456.789\n") && strstr(buf, " 1e+22\n") &&
            strstr(buf, " 1.7976931348623157e+308\n"));
  char *line = strchr(strchr(buf, '\n') + 1, '\n') + 1; /* the headers */
  for (int k = 0; k < N; k++) {
    char *sp = strchr(line, ' '), *nl = strchr(line, '\n');
    ck_assert(sp && nl);
    *nl = '\0';
    int64_t c = strtoll(line, NULL, 10) - 1;
    double v = val[c], back = strtod(sp + 1, NULL);
    ck_assert_msg(same_bits(back, v), "%.17g written as %s", v, sp + 1);
    if (v != floor(v) || fabs(v) >= 1e15)
      ck_assert_msg(sig_digits(sp + 1) == ref_digits(v),
                    "%.17g written as %s, %d digits where %d read back", v,
                    sp + 1, sig_digits(sp + 1), ref_digits(v));
    line = nl + 1;
  }
  free(buf);
  free(val);
  free(crd);
  galley_tensor_free(t);
}
END_TEST

START_TEST(write_mtx_text) {
  char *dir = make_tmpdir(), path[1024];
  galley_error err;
  int64_t dims[2] = {2, 3}, crd[] = {0, 0, 1, 2, 1, 1};
  double val[] = {1.5, -2, 0};
  galley_tensor *t = NULL;
  ck_assert_int_eq(
      galley_tensor_from_coo(2, dims, 3, crd, val, 0, NULL, &t, &err), 0);
  snprintf(path, sizeof path, "%s/m.mtx", dir);
  ck_assert_int_eq(galley_tensor_write(t, path, GALLEY_FILE_AUTO, &err), 0);
  char *text = slurp(path, NULL);
  ck_assert_str_eq(text, "%%MatrixMarket matrix coordinate real general\n"
                         "2 3 2\n1 1 1.5\n2 3 -2\n");
  free(text);
  galley_tensor_free(t);
  rm_tree(dir);
  free(dir);
}
END_TEST

START_TEST(write_refusals) {
  char *dir = make_tmpdir(), path[1024], want[1200];
  galley_error err;
  int64_t dims[3] = {2, 2, 2}, crd[3] = {0, 1, 1};
  double val[1] = {3};
  galley_tensor *t3 = NULL;
  ck_assert_int_eq(
      galley_tensor_from_coo(3, dims, 1, crd, val, 0, NULL, &t3, &err), 0);
  snprintf(path, sizeof path, "%s/t.mtx", dir);
  ck_assert_int_eq(galley_tensor_write(t3, path, GALLEY_FILE_AUTO, &err),
                   GALLEY_EINVAL);
  snprintf(want, sizeof want,
           "%s: error: a Matrix Market file holds a matrix (order 2), not an "
           "order-3 tensor; write .tns instead",
           path);
  ck_assert_str_eq(err.msg, want);
  galley_tensor *t2 = small_matrix(1.0);
  ck_assert_int_eq(galley_tensor_write(t2, path, GALLEY_FILE_MTX, &err),
                   GALLEY_EINVAL);
  ck_assert(strstr(err.msg, "fill 0") != NULL);
  snprintf(path, sizeof path, "%s/t.txt", dir);
  ck_assert_int_eq(galley_tensor_write(t2, path, GALLEY_FILE_AUTO, &err),
                   GALLEY_EINVAL);
  ck_assert_int_eq(count_dir(dir), 0);
  /* a missing directory: EIO, nothing created */
  snprintf(path, sizeof path, "%s/missing/t.tns", dir);
  ck_assert_int_eq(galley_tensor_write(t3, path, GALLEY_FILE_AUTO, &err),
                   GALLEY_EIO);
  snprintf(want, sizeof want, "%s: error: cannot write: %s", path,
           strerror(ENOENT));
  ck_assert_str_eq(err.msg, want);
  ck_assert_int_eq(count_dir(dir), 0);
  /* overwriting keeps exactly one file */
  snprintf(path, sizeof path, "%s/t.tns", dir);
  ck_assert_int_eq(galley_tensor_write(t3, path, GALLEY_FILE_AUTO, &err), 0);
  ck_assert_int_eq(galley_tensor_write(t3, path, GALLEY_FILE_AUTO, &err), 0);
  ck_assert_int_eq(count_dir(dir), 1);
  galley_tensor_free(t2);
  galley_tensor_free(t3);
  rm_tree(dir);
  free(dir);
}
END_TEST

/* Export sorted, fill left out; compare two tensors bit for bit. */
static void assert_same_entries(const galley_tensor *a, const galley_tensor *b,
                                const char *what) {
  galley_error err;
  int64_t na, nb, *ca, *cb;
  double *va, *vb;
  ck_assert_int_eq(galley_tensor_order(a), galley_tensor_order(b));
  int order = galley_tensor_order(a);
  for (int k = 0; k < order; k++)
    ck_assert_int_eq(galley_tensor_dim(a, k), galley_tensor_dim(b, k));
  ck_assert(same_bits(galley_tensor_fill(a), galley_tensor_fill(b)));
  ck_assert_int_eq(
      galley_tensor_to_coo(a, GALLEY_EXPORT_SKIP_FILL, &na, &ca, &va, &err), 0);
  ck_assert_int_eq(
      galley_tensor_to_coo(b, GALLEY_EXPORT_SKIP_FILL, &nb, &cb, &vb, &err), 0);
  ck_assert_msg(na == nb, "%s: %lld vs %lld entries", what, (long long)na,
                (long long)nb);
  ck_assert_msg(na == 0 || !memcmp(ca, cb, (size_t)(na * order) * sizeof *ca),
                "%s: coordinates differ", what);
  ck_assert_msg(na == 0 || !memcmp(va, vb, (size_t)na * sizeof *va),
                "%s: values differ", what);
  free(ca);
  free(cb);
  free(va);
  free(vb);
}

START_TEST(write_gzip) {
  char *dir = make_tmpdir(), path[1024];
  galley_error err;
  galley_tensor *t = small_matrix(0.0), *u = NULL;
  snprintf(path, sizeof path, "%s/m.tns.gz", dir);
  ck_assert_int_eq(galley_tensor_write(t, path, GALLEY_FILE_AUTO, &err), 0);
  size_t len;
  char *data = slurp(path, &len);
  ck_assert((unsigned char)data[0] == 0x1f && (unsigned char)data[1] == 0x8b);
  free(data);
  ck_assert_int_eq(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &u, &err),
                   0);
  assert_same_entries(t, u, "tns.gz");
  u = galley_tensor_free(u);
  galley_tensor_free(t);
  int64_t dims[2] = {3, 3}, crd[] = {0, 0, 2, 1};
  double val[] = {1.25, -3};
  ck_assert_int_eq(
      galley_tensor_from_coo(2, dims, 2, crd, val, 0, NULL, &t, &err), 0);
  snprintf(path, sizeof path, "%s/m.mtx.gz", dir);
  ck_assert_int_eq(galley_tensor_write(t, path, GALLEY_FILE_AUTO, &err), 0);
  ck_assert_int_eq(galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &u, &err),
                   0);
  assert_same_entries(t, u, "mtx.gz");
  ck_assert_int_eq(count_dir(dir), 2);
  galley_tensor_free(u);
  galley_tensor_free(t);
  rm_tree(dir);
  free(dir);
}
END_TEST

/* ------------------------------------------------------------------ */
/* tests/data and the real data                                        */
/* ------------------------------------------------------------------ */

typedef void (*file_fn)(const char *path, void *ud);

static int has_ext(const char *name, const char *a, const char *b) {
  size_t n = strlen(name);
  size_t la = strlen(a), lb = strlen(b);
  return (n > la && !strcmp(name + n - la, a)) ||
         (n > lb && !strcmp(name + n - lb, b));
}

/* Call fn on every file under dir (recursively) ending in ext or ext.gz,
 * in sorted order; returns the count. */
static int walk(const char *dir, const char *ext, file_fn fn, void *ud) {
  struct dirent **list;
  int n = scandir(dir, &list, NULL, alphasort), count = 0;
  if (n < 0)
    return 0;
  char gz[16], p[2048];
  snprintf(gz, sizeof gz, "%s.gz", ext);
  for (int i = 0; i < n; i++) {
    const char *name = list[i]->d_name;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    if (name[0] != '.' && stat(p, &st) == 0) {
      if (S_ISDIR(st.st_mode))
        count += walk(p, ext, fn, ud);
      else if (has_ext(name, ext, gz)) {
        fn(p, ud);
        count++;
      }
    }
    free(list[i]);
  }
  free(list);
  return count;
}

/* Known nonzero counts (data/matrices/README.md). */
static int64_t known_nnz(const char *path) {
  static const struct {
    const char *name;
    int64_t nnz;
  } known[] = {{"/karate.mtx", 156},        {"/west0067.mtx", 294},
               {"/xenon1.mtx.gz", 1181120}, {"/mdual.mtx.gz", 1026264},
               {"/lp_afiro.mtx", 102},      {"/jagmesh7.mtx", 7450},
               {"/bcsstk13.mtx", 83883},    {"/cora_adj.mtx", 10556}};
  size_t n = strlen(path);
  for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
    size_t m = strlen(known[i].name);
    if (n >= m && !strcmp(path + n - m, known[i].name))
      return known[i].nnz;
  }
  return -1;
}

typedef struct data_ctx {
  char *tmp;    /* temp dir for round trips */
  int known;    /* files with a known count checked */
} data_ctx;

static void check_data_file(const char *path, void *ud) {
  data_ctx *dc = ud;
  galley_error err;
  galley_tensor *t = NULL, *u = NULL;
  galley_status st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err);
  ck_assert_msg(st == GALLEY_OK, "%s: %s", path, err.msg);
  int64_t want = known_nnz(path);
  if (want >= 0) {
    ck_assert_msg(galley_tensor_nnz(t) == want, "%s: nnz %lld, expected %lld",
                  path, (long long)galley_tensor_nnz(t), (long long)want);
    dc->known++;
  }
  char out[2048];
  snprintf(out, sizeof out, "%s/rt.tns", dc->tmp);
  st = galley_tensor_write(t, out, GALLEY_FILE_AUTO, &err);
  ck_assert_msg(st == GALLEY_OK, "%s: %s", out, err.msg);
  st = galley_tensor_read(out, GALLEY_FILE_AUTO, NULL, &u, &err);
  ck_assert_msg(st == GALLEY_OK, "%s: %s", out, err.msg);
  assert_same_entries(t, u, path);
  galley_tensor_free(t);
  galley_tensor_free(u);
  unlink(out);
}

static void load_only(const char *path, void *ud) {
  galley_error err;
  galley_tensor *t = NULL;
  galley_status st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err);
  ck_assert_msg(st == GALLEY_OK, "%s: %s", path, err.msg);
  ck_assert(galley_tensor_nnz(t) > 0);
  ++*(int *)ud;
  galley_tensor_free(t);
}

START_TEST(data_matrices) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/matrices", test_data_dir());
  struct stat st;
  if (stat(dir, &st) != 0) {
    fprintf(stderr, "test_io: %s not found, real matrices not tested\n", dir);
    return;
  }
  data_ctx dc = {make_tmpdir(), 0};
  int n = walk(dir, ".mtx", check_data_file, &dc);
  ck_assert_msg(n >= 20, "only %d matrices found under %s", n, dir);
  ck_assert_int_eq(dc.known, 8);
  rm_tree(dc.tmp);
  free(dc.tmp);
}
END_TEST

START_TEST(data_tensors) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tensors", test_data_dir());
  struct stat st;
  if (stat(dir, &st) != 0) {
    fprintf(stderr, "test_io: %s not found, real tensors not tested\n", dir);
    return;
  }
  data_ctx dc = {make_tmpdir(), 0};
  int n = walk(dir, ".tns", check_data_file, &dc);
  ck_assert_msg(n >= 10, "only %d tensors found under %s", n, dir);
  rm_tree(dc.tmp);
  free(dc.tmp);
}
END_TEST

static void expect_bad(const char *path, void *ud) {
  galley_error err;
  galley_tensor *t = NULL;
  galley_status st = galley_tensor_read(path, GALLEY_FILE_AUTO, NULL, &t, &err);
  ck_assert_msg(st == GALLEY_EDATA, "%s: status %d", path, st);
  ck_assert_msg(strncmp(err.msg, path, strlen(path)) == 0 &&
                    strstr(err.msg, ": error: "),
                "%s", err.msg);
  ck_assert_ptr_null(t);
  ++*(int *)ud;
}

/* tests/data/good loads, tests/data/bad is refused. */
START_TEST(test_data_files) {
  char dir[1024];
  int good = 0, bad = 0;
  snprintf(dir, sizeof dir, "%s/data/good", test_src_dir());
  walk(dir, ".mtx", load_only, &good);
  walk(dir, ".tns", load_only, &good);
  snprintf(dir, sizeof dir, "%s/data/bad", test_src_dir());
  walk(dir, ".mtx", expect_bad, &bad);
  walk(dir, ".tns", expect_bad, &bad);
  ck_assert_int_ge(good, 5);
  ck_assert_int_ge(bad, 5);
}
END_TEST

int main(void) {
  Suite *s = suite_create("io");
  TCase *tc = tcase_create("malformed");
  tcase_add_loop_test(tc, malformed_file, 0, N_BAD_CASES);
  tcase_add_test(tc, missing_file);
  tcase_add_test(tc, huge_dense_default);
  tcase_add_test(tc, corrupt_gzip);
  suite_add_tcase(s, tc);
  tc = tcase_create("good");
  tcase_add_loop_test(tc, good_file, 0, N_GOOD_CASES);
  tcase_add_test(tc, scalar_file);
  tcase_add_test(tc, explicit_format);
  tcase_add_test(tc, long_lines);
  tcase_add_test(tc, parse_numbers);
  suite_add_tcase(s, tc);
  tc = tcase_create("write");
  tcase_add_test(tc, write_tns_text);
  tcase_add_test(tc, write_shortest_numbers);
  tcase_add_test(tc, write_mtx_text);
  tcase_add_test(tc, write_refusals);
  tcase_add_test(tc, write_gzip);
  suite_add_tcase(s, tc);
  tc = tcase_create("data");
  tcase_add_test(tc, test_data_files);
  tcase_add_test(tc, data_matrices);
  tcase_add_test(tc, data_tensors);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
