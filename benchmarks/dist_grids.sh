#!/bin/sh
# benchmarks/dist_grids.sh [RANKS...] -- the planner study of issue 15:
# for every grid of RANKS ranks (default 4 8 9: BMM rows and columns,
# CMM, 2D, RMM) over generated matrices (5 shapes x 3 densities x
# uniform, skewed and banded structures, those small enough for 9 ranks
# on 2 cores), `bench_dist --grids` runs the join and the gather of C to
# rank 0 and measures the bytes; the cost model (as `galleyc run` plans)
# picks one.  Prints each case and a summary line per rank count:
# how often the choice sent the fewest bytes.  Then `bench_dist --model
# 64` prices every grid of 64 ranks for the given matrices (default
# xenon1 and bcsstk13) from one process, with the busiest rank's bytes
# at 10 Gb/s.  Run from the build directory after `make benchmarks`.
# Bytes do not depend on speed: oversubscribing 2 cores is fine.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${GALLEY_BUILDDIR:-$(pwd)}
data=${GALLEY_DATA_DIR:-$here/../../shared/data}
[ -x "$build/benchmarks/bench_dist" ] || make -C "$build" benchmarks/bench_dist >&2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ $# -gt 0 ] || set -- 4 8 9
for np; do
  timeout 1800 mpirun --oversubscribe -np "$np" "$build/benchmarks/bench_dist" --grids
done
for m in ${MATRICES:-$data/matrices/xenon1.mtx.gz $data/matrices/bcsstk13.mtx}; do
  timeout 600 mpirun --oversubscribe -np 1 "$build/benchmarks/bench_dist" --model 64 "$m"
done
