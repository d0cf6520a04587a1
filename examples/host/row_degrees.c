/*
 * row_degrees.c -- a host program using the installed libgalley.
 *
 * Reads a matrix file, stores it as CSC (a transposition of the default
 * CSR), and prints its shape, the number of nonzeros, the largest row and
 * column degrees, and the value at one coordinate.  Build it against an
 * installed galleyc with
 *
 *     cc row_degrees.c $(pkg-config --cflags --libs galley) -o row_degrees
 */
#include <galley.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: row_degrees MATRIX.mtx\n");
    return 2;
  }
  galley_error err = {0};
  galley_tensor *A = NULL, *csc = NULL;
  galley_format fmt;
  galley_degree_stats *st = malloc(sizeof *st);
  int status = 1;
  if (!st)
    goto done;
  if (galley_tensor_read(argv[1], GALLEY_FILE_AUTO, NULL, &A, &err) != GALLEY_OK)
    goto done;
  if (galley_tensor_order(A) != 2) {
    fprintf(stderr, "%s: not a matrix\n", argv[1]);
    goto done;
  }
  if (galley_format_parse("dense:1,list:0", 2, &fmt, &err) != GALLEY_OK ||
      galley_tensor_convert(A, &fmt, &csc, &err) != GALLEY_OK ||
      galley_tensor_degree_stats(csc, st, &err) != GALLEY_OK)
    goto done;
  int64_t origin[2] = {0, 0};
  printf("%lld x %lld, nnz %lld\n", (long long)galley_tensor_dim(csc, 0),
         (long long)galley_tensor_dim(csc, 1), (long long)galley_tensor_nnz(csc));
  printf("max row degree %lld, max column degree %lld\n",
         (long long)st->max_degree[1], (long long)st->max_degree[2]);
  printf("A[0,0] = %g\n", galley_tensor_get(csc, origin, NULL));
  status = 0;
done:
  if (err.status != GALLEY_OK)
    fprintf(stderr, "%s\n", err.msg);
  galley_tensor_free(A);
  galley_tensor_free(csc);
  free(st);
  return status;
}
