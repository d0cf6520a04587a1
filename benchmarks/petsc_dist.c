/*
 * petsc_dist.c -- the PETSc anchor of issue 15: MatMult (SpMV) and
 * MatMatMult (SpGEMM, A*A) on an MPIAIJ matrix in PETSc's own 1D row
 * blocks (equal numbers of rows per rank), timed like bench_dist.c:
 *
 *   mpirun -np N benchmarks/petsc_dist MATRIX.mtx[.gz] [REPS] -mat_no_inode
 *
 * The matrix is read with libgalley (every rank reads the file and keeps
 * its own rows), x is all ones.  Printed: the median over REPS of the
 * slowest rank's time for one MatMult, and for one MatMatMult from
 * scratch (MAT_INITIAL_MATRIX: symbolic and numeric, as galleyc computes
 * the whole product every run).  Built by benchmarks/dist.sh against
 * Debian's petsc-dev, never by the main build.
 */
#include <petscmat.h>
#include <stdlib.h>

#include "galley.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The slowest rank's seconds for fn, REPS times: the median, in ms. */
#define TIME_MS(reps, stmt, out)                                              \
  do {                                                                        \
    double *t_ = malloc((size_t)(reps) * sizeof *t_);                         \
    for (int r_ = 0; r_ < (reps); r_++) {                                     \
      MPI_Barrier(PETSC_COMM_WORLD);                                          \
      double t0_ = MPI_Wtime();                                               \
      stmt;                                                                   \
      double mine_ = MPI_Wtime() - t0_, most_;                                \
      MPI_Allreduce(&mine_, &most_, 1, MPI_DOUBLE, MPI_MAX,                   \
                    PETSC_COMM_WORLD);                                        \
      t_[r_] = most_ * 1e3;                                                   \
    }                                                                         \
    (out) = median(t_, (reps));                                               \
    free(t_);                                                                 \
  } while (0)

int main(int argc, char **argv) {
  PetscCall(PetscInitialize(&argc, &argv, NULL, NULL));
  if (argc < 2) {
    PetscCall(PetscPrintf(PETSC_COMM_WORLD, "usage: petsc_dist MATRIX.mtx [REPS]\n"));
    PetscCall(PetscFinalize());
    return 2;
  }
  int reps = argc > 2 && argv[2][0] != '-' ? atoi(argv[2]) : 20;
  galley_tensor *T = NULL, *csr = NULL;
  galley_error err;
  galley_format f = galley_format_default(2);
  if (galley_tensor_read(argv[1], GALLEY_FILE_AUTO, NULL, &T, &err) != GALLEY_OK ||
      galley_tensor_convert(T, &f, &csr, &err) != GALLEY_OK) {
    fprintf(stderr, "petsc_dist: %s\n", err.msg);
    return 1;
  }
  int64_t m = galley_tensor_dim(csr, 0), n = galley_tensor_dim(csr, 1), nnz = 0;
  int64_t *crd = NULL;
  double *val = NULL;
  galley_tensor_to_coo(csr, 0, &nnz, &crd, &val, &err); /* sorted by row */
  Mat A;
  PetscCall(MatCreate(PETSC_COMM_WORLD, &A));
  PetscCall(MatSetSizes(A, PETSC_DECIDE, PETSC_DECIDE, (PetscInt)m, (PetscInt)n));
  PetscCall(MatSetType(A, MATAIJ));
  PetscCall(MatSetFromOptions(A));
  PetscInt lo, hi;
  PetscCall(MatSetUp(A));
  PetscCall(MatGetOwnershipRange(A, &lo, &hi));
  /* preallocate this rank's rows exactly (diagonal and off-diagonal) */
  PetscInt nloc = hi - lo, cl, ch;
  PetscCall(MatGetOwnershipRangeColumn(A, &cl, &ch));
  PetscInt *dnz = calloc((size_t)nloc + 1, sizeof *dnz);
  PetscInt *onz = calloc((size_t)nloc + 1, sizeof *onz);
  for (int64_t e = 0; e < nnz; e++) {
    int64_t i = crd[2 * e], j = crd[2 * e + 1];
    if (i < lo || i >= hi) continue;
    if (j >= cl && j < ch) dnz[i - lo]++; else onz[i - lo]++;
  }
  PetscCall(MatMPIAIJSetPreallocation(A, 0, dnz, 0, onz));
  PetscCall(MatSeqAIJSetPreallocation(A, 0, dnz));
  for (int64_t e = 0; e < nnz; e++) {
    PetscInt i = (PetscInt)crd[2 * e], j = (PetscInt)crd[2 * e + 1];
    if (i >= lo && i < hi)
      PetscCall(MatSetValues(A, 1, &i, 1, &j, &val[e], INSERT_VALUES));
  }
  PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
  Vec x, y;
  PetscCall(MatCreateVecs(A, &x, &y));
  PetscCall(VecSet(x, 1.0));
  PetscCall(MatMult(A, x, y)); /* warm */
  double spmv, spgemm;
  TIME_MS(reps, PetscCall(MatMult(A, x, y)), spmv);
  Mat C;
  PetscCall(MatMatMult(A, A, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &C)); /* warm */
  PetscCall(MatDestroy(&C));
  TIME_MS(reps / 4 + 1,
          PetscCall(MatMatMult(A, A, MAT_INITIAL_MATRIX, PETSC_DEFAULT, &C));
          PetscCall(MatDestroy(&C)),
          spgemm);
  int size;
  MPI_Comm_size(PETSC_COMM_WORLD, &size);
  PetscCall(PetscPrintf(PETSC_COMM_WORLD,
                        "petsc SpMV %s ranks=%d median_ms=%.3f\n"
                        "petsc SpGEMM %s ranks=%d median_ms=%.3f\n",
                        argv[1], size, spmv, argv[1], size, spgemm));
  PetscCall(VecDestroy(&x));
  PetscCall(VecDestroy(&y));
  PetscCall(MatDestroy(&A));
  free(dnz);
  free(onz);
  free(crd);
  free(val);
  galley_tensor_free(T);
  galley_tensor_free(csr);
  PetscCall(PetscFinalize());
  return 0;
}
