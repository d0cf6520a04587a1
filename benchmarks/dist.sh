#!/bin/sh
# benchmarks/dist.sh [MATRIX.mtx[.gz] ...] -- galleyc's distributed SpMV
# and SpGEMM (bench_dist, src/dist) against PETSc's MatMult and
# MatMatMult (petsc_dist.c, Debian petsc-dev: benchmarks/setup installs
# it) at 1 and 2 ranks.  Run from the build directory after `make
# benchmarks`; builds petsc_dist itself.  Keep it short on a shared
# machine: REPS (default 20) repetitions of SpMV, REPS/4+1 of SpGEMM.
# galleyc runs one thread a rank (as PETSc) and prints each kernel twice:
# result=distributed (left in the ranks' row blocks, as PETSc leaves its
# products) and result=rank0 (gathered, as `galleyc run` writes it).
# Default matrix: xenon1 from ../shared/data.  COMBBLAS=1 also builds
# combblas_dist.cpp (Debian libcombblas-dev: SpMV and SpGEMM on its 2D
# grid, square rank counts only) and runs it and galleyc at 1 and 4 ranks
# (a .gz matrix is decompressed to a temporary file first: CombBLAS reads
# plain text).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${GALLEY_BUILDDIR:-$(pwd)}
data=${GALLEY_DATA_DIR:-$here/../../shared/data}
reps=${REPS:-20}
[ $# -gt 0 ] || set -- "$data/matrices/xenon1.mtx.gz"
pkg-config --exists petsc || { echo "dist.sh: no PETSc (benchmarks/setup)" >&2; exit 1; }
[ -x "$build/benchmarks/bench_dist" ] || make -C "$build" benchmarks/bench_dist >&2
# shellcheck disable=SC2046
mpicc -O2 $(pkg-config --cflags petsc) -I"$here/../include" "$here/petsc_dist.c" \
  -o "$build/benchmarks/petsc_dist" "$build/libgalley.a" $(pkg-config --libs petsc) \
  -ltcc -lz -lm -ldl -lpthread
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
for m; do
  for np in 1 2; do
    timeout 600 mpirun --oversubscribe -np "$np" "$build/benchmarks/bench_dist" "$m" "$reps"
    timeout 600 mpirun --oversubscribe -np "$np" "$build/benchmarks/petsc_dist" "$m" "$reps" -mat_no_inode
  done
done
[ "${COMBBLAS:-0}" = 1 ] || exit 0
[ -f /usr/include/CombBLAS/CombBLAS.h ] || { echo "dist.sh: no CombBLAS (apt-get install libcombblas-dev)" >&2; exit 1; }
mpicxx -O2 -std=c++14 -fopenmp -DTHREADED "$here/combblas_dist.cpp" -o "$build/benchmarks/combblas_dist" \
  -lCombBLAS -lGraphGenlib -lUsortlib
tmpd=$(mktemp -d); trap 'rm -rf "$tmpd"' EXIT
export OMP_NUM_THREADS=1
for m; do
  plain=$m
  case $m in *.gz) plain=$tmpd/$(basename "$m" .gz); gzip -dc "$m" >"$plain" ;; esac
  for np in 1 4; do
    timeout 600 mpirun --oversubscribe -np "$np" -x OMP_NUM_THREADS "$build/benchmarks/combblas_dist" "$plain" "$reps" | grep '^combblas'
    [ "$np" = 1 ] || timeout 600 mpirun --oversubscribe -np "$np" "$build/benchmarks/bench_dist" "$m" "$reps"
  done
done
