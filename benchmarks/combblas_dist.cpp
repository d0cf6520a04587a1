/*
 * combblas_dist.cpp -- the CombBLAS baseline of benchmarks/dist.sh
 * (issue 15): SpMV (A times a vector of ones) and SpGEMM (A times A) on
 * CombBLAS's 2D grid (Debian libcombblas-dev; square rank counts only:
 * 1, 4, 9, ...).  Built and run by dist.sh with COMBBLAS=1, never by
 * make check.
 *
 *   mpirun -np N combblas_dist MATRIX.mtx [REPS]   (plain text: gunzip
 *                                                   a .gz first)
 *
 * Printed like bench_dist and petsc_dist: the median wall time of an
 * operation (the slowest rank's) over REPS repetitions of SpMV and
 * REPS/4+1 of SpGEMM, after one warm-up of each.
 */
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <CombBLAS/CombBLAS.h>

using namespace combblas;
typedef SpParMat<int64_t, double, SpDCCols<int64_t, double>> Mat;
typedef PlusTimesSRing<double, double> Ring;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/* The slowest rank's time of f, in ms. */
template <class F> static double timed(F f) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  f();
  double mine = (MPI_Wtime() - t0) * 1e3, most = 0;
  MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return most;
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int nprocs = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int side = (int)std::lround(std::sqrt((double)nprocs));
  if (argc < 2 || side * side != nprocs) {
    if (rank == 0)
      std::fprintf(stderr, "usage: mpirun -np N combblas_dist MATRIX.mtx "
                           "[REPS] (N a square)\n");
    MPI_Finalize();
    return 2;
  }
  int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  {
    std::shared_ptr<CommGrid> grid(new CommGrid(MPI_COMM_WORLD, side, side));
    Mat A(grid);
    double read_ms = timed([&] {
      A.ParallelReadMM(std::string(argv[1]), true, maximum<double>());
    });
    Mat B(A);
    FullyDistVec<int64_t, double> x(grid, A.getncol(), 1.0);
    std::vector<double> t;
    FullyDistVec<int64_t, double> y = SpMV<Ring>(A, x); /* warm */
    for (int r = 0; r < reps; r++)
      t.push_back(timed([&] { y = SpMV<Ring>(A, x); }));
    double spmv = median(t);
    t.clear();
    Mat C = Mult_AnXBn_Synch<Ring, double, SpDCCols<int64_t, double>>(A, B);
    for (int r = 0; r < reps / 4 + 1; r++)
      t.push_back(timed([&] {
        C = Mult_AnXBn_Synch<Ring, double, SpDCCols<int64_t, double>>(A, B);
      }));
    double spgemm = median(t);
    int64_t nnz = C.getnnz();
    if (rank == 0) {
      std::printf("combblas read %s ranks=%d read_ms=%.1f\n", argv[1],
                  nprocs, read_ms);
      std::printf("combblas SpMV %s ranks=%d median_ms=%.3f\n", argv[1],
                  nprocs, spmv);
      std::printf("combblas SpGEMM %s ranks=%d median_ms=%.3f nnz=%lld\n",
                  argv[1], nprocs, spgemm, (long long)nnz);
    }
  }
  MPI_Finalize();
  return 0;
}
