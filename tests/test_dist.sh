#!/bin/sh
# test_dist.sh -- galleyc under mpirun (issue 15), only in MPI builds:
#  1. tests/test_dist (the communication layer, tensor relations, random
#     programs cut across ranks vs one process) with 1, 2, 3 and 4 ranks;
#  2. every example run by `mpirun -np N galleyc run` with N = 1..4: the
#     result files equal the one-process run's (byte for byte for the
#     exact programs -- integer data, min/max, counts -- else within
#     1e-12 relative), and written once; with 2 and 4 ranks every input
#     file is read in byte ranges by every rank (GALLEY_DIST_SPLIT_READ=0),
#     with 1 and 3 small files are read by rank 0 (the default); a gzip
#     file is decompressed by rank 0 and its ranges scattered;
#  3. explain under mpirun prints the distributed plan with estimated and
#     measured bytes;
#  4. faults: bad data (read by rank 0), a rank that fails after a query,
#     a rank that dies of SIGKILL: every rank stops within seconds with a
#     non-zero exit, the error names what failed, nothing is written.
# Every mpirun runs under timeout; as root with the two OMPI_ALLOW
# variables; --oversubscribe (2 cores here).
set -u
srcdir=${GALLEY_TEST_SRCDIR:-$(cd "$(dirname "$0")" && pwd)}
build=${GALLEY_BUILDDIR:-$srcdir/../build}
bin=$build/galleyc
ex=$srcdir/../examples
exd=$ex/data
data=${GALLEY_DATA_DIR:-$srcdir/../../shared/data}
# shellcheck source=tests/shlib.sh
. "$srcdir/shlib.sh"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# Open MPI's own allocations are not ours to account for under ASan
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
export GALLEY_CACHE_DIR="$tmp/cache"
mpi() { np=$1; shift; timeout 60 mpirun --oversubscribe -np "$np" -x GALLEY_DIST_SPLIT_READ -x GALLEY_DIST_JOIN "$@"; }
export GALLEY_DIST_JOIN=
export GALLEY_DIST_SPLIT_READ=

# ---- 1. the unit and random-program test ----
if [ -x "$build/tests/test_dist" ]; then
  for np in 1 2 3 4; do
    # its own time limit: a few hundred programs, slower under ASan
    if timeout 240 mpirun --oversubscribe -np "$np" "$build/tests/test_dist" >"$tmp/out" 2>"$tmp/err"; then ok; else
      rc=$?; fail "test_dist with $np ranks (exit $rc)"; tail -n 20 "$tmp/err"; tail -n 5 "$tmp/out"; fi
  done
fi

# ---- 2. the examples ----
# same A B: result files agree (dims, fill, every written entry within
# 1e-12 relative; inf and nan exactly)
same() {
  awk '
    function special(s) { return s == "inf" || s == "-inf" || s == "nan" }
    function eq(a, b,   d, m) {
      if (special(a) || special(b)) return a == b
      d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); if ((b < 0 ? -b : b) > m) m = (b < 0 ? -b : b)
      return d <= 1e-12 * m + 1e-300 }
    FNR == 1 { f++ }
    /^# dims:/ { dims[f] = $0; next }
    /^# fill: / { fill[f] = $3; next }
    /^#/ { next }
    { c = ""; for (k = 1; k < NF; k++) c = c (k > 1 ? " " : "") $k
      v[f, c] = $NF; has[f, c] = 1; all[c] = 1 }
    END {
      if (dims[1] != dims[2] || fill[1] != fill[2]) { print "  dims or fill differ"; exit 1 }
      for (c in all) {
        a = (1, c) in has ? v[1, c] : fill[1]; b = (2, c) in has ? v[2, c] : fill[2]
        if (!eq(a, b)) { print "  at (" c "): " a " / " b; bad = 1 } }
      exit bad }' "$1" "$2"
}
karate=$data/matrices/karate.mtx
ldbc=$data/matrices/ldbc-directed-example.mtx
splatt=$data/tensors/library-tests/splatt_small.tns
tpch="F=$exd/tpch_F.tns L=$exd/tpch_L.tns S=$exd/tpch_S.tns P=$exd/tpch_P.tns"
# example NAME EXACT PROG NAME=FILE...: one process, then 1-4 ranks
example() {
  name=$1 exact=$2 prog=$3; shift 3
  for f in "$@"; do
    [ -f "${f#*=}" ] || { echo "skip $name: ${f#*=} not found"; return; }
  done
  one=$tmp/$name.one
  if ! "$bin" run "$ex/$prog" "$@" -o "$one" -q 2>"$tmp/err"; then
    fail "$name: one process: $(cat "$tmp/err")"; return; fi
  for np in 1 2 3 4; do
    many=$tmp/$name.$np
    # even rank counts read every file in byte ranges
    if [ $((np % 2)) -eq 0 ]; then GALLEY_DIST_SPLIT_READ=0; else GALLEY_DIST_SPLIT_READ=; fi
    if ! mpi "$np" "$bin" run "$ex/$prog" "$@" -o "$many" -q >"$tmp/out" 2>"$tmp/err"; then
      fail "$name: $np ranks: $(head -n 5 "$tmp/err")"; continue; fi
    for f in "$one"/*.tns; do
      g=$many/${f##*/}
      if [ ! -f "$g" ]; then fail "$name: $np ranks wrote no ${f##*/}"
      elif [ "$exact" = exact ] && ! cmp -s "$f" "$g"; then
        fail "$name: $np ranks: ${f##*/} differs (an exact program)"
      elif same "$f" "$g" >"$tmp/why"; then ok
      else fail "$name: $np ranks: ${f##*/}: $(cat "$tmp/why")"; fi
    done
    # written once: no temporaries left, as many files as one process
    [ "$(ls "$many" | wc -l)" -eq "$(ls "$one" | wc -l)" ] && ok ||
      fail "$name: $np ranks left other files: $(ls "$many")"
  done
}
example logistic near logistic.tin X="$exd/X.mtx" theta="$exd/theta.tns"
example logistic_grad near logistic_grad.tin X="$exd/X.mtx" theta="$exd/theta.tns" y="$exd/y.tns"
example triangles exact triangles.tin E="$karate"
example fourcycles exact fourcycles.tin E="$karate"
example bfs exact bfs.tin A="$karate" f="$exd/karate_frontier.tns" v="$exd/karate_visited.tns"
# shellcheck disable=SC2086
example starjoin near starjoin.tin $tpch w="$exd/tpch_w.tns" b="$exd/tpch_b.tns"
# shellcheck disable=SC2086
example covariance near covariance.tin $tpch
example chain exact chain.tin A="$exd/chain_A.mtx" B="$exd/chain_B.mtx" C="$exd/chain_C.mtx"
example als near als.tin X="$exd/als_X.mtx" U="$exd/als_U.tns" V="$exd/als_V.tns"
example mttkrp near mttkrp.tin T="$splatt" B="$exd/mttkrp_B.tns" C="$exd/mttkrp_C.tns"
example bellman_ford exact bellman_ford.tin W="$ldbc" d="$exd/sssp_d.tns"
example noisyor near noisyor.tin P="$exd/cascade_P.mtx" s="$exd/cascade_s.tns"
# one PageRank step from the uniform ranks (as examples/pagerank.sh starts)
if [ -f "$karate" ]; then
  n=$(awk '!/^%/ { print $1; exit }' "$karate")
  awk -v n="$n" 'BEGIN { printf "# dims: %d\n# fill: %.17g\n", n, 1 / n }' >"$tmp/r.tns"
  example pagerank near pagerank.tin A="$karate" r="$tmp/r.tns"
fi

GALLEY_DIST_SPLIT_READ=
# a gzip file read in ranges (rank 0 decompresses and scatters them)
if [ -f "$karate" ]; then
  gzip -c "$karate" >"$tmp/karate.mtx.gz"
  "$bin" run "$ex/triangles.tin" E="$karate" -o "$tmp/tri.one" -q 2>"$tmp/err" || fail "triangles: one process"
  if GALLEY_DIST_SPLIT_READ=0 mpi 3 "$bin" explain --analyze "$ex/triangles.tin" E="$tmp/karate.mtx.gz" >"$tmp/out" 2>"$tmp/err"; then
    expect_out "step 0: read the inputs: 1 in byte ranges on every rank"
  else fail "explain of a split gzip read: $(cat "$tmp/err")"; fi
  if GALLEY_DIST_SPLIT_READ=0 mpi 3 "$bin" run "$ex/triangles.tin" E="$tmp/karate.mtx.gz" -o "$tmp/tri.gz" -q 2>"$tmp/err" &&
     cmp -s "$tmp/tri.one/triangles.tns" "$tmp/tri.gz/triangles.tns"; then ok; else fail "triangles from a split gzip read: $(cat "$tmp/err")"; fi
fi

# ---- 3. explain under mpirun ----
chain="$ex/chain.tin A=$exd/chain_A.mtx B=$exd/chain_B.mtx C=$exd/chain_C.mtx"
# shellcheck disable=SC2086
if GALLEY_DIST_JOIN=1 mpi 3 "$bin" explain --analyze $chain >"$tmp/out" 2>"$tmp/err"; then
  expect_out "Distributed plan over 3 ranks"
  expect_out "step 0: read the inputs: 0 in byte ranges on every rank (entries allgathered), 3 by rank 0"
  # both products run by the join's grid (GALLEY_DIST_JOIN=1), measured
  expect_out "_t0: matrix multiply by the join's grid"
  expect_out "D: matrix multiply by the join's grid"
  expect_out "measured"
  # printed once (rank 0 speaks for all)
  [ "$(grep -c 'Distributed plan' "$tmp/out")" -eq 1 ] && ok || fail "explain printed the plan more than once"
else fail "explain under mpirun: $(cat "$tmp/err")"; fi
# by default each product is weighed: the join's grid, or the cut with
# the join's estimate beside it
# shellcheck disable=SC2086
if mpi 3 "$bin" explain --analyze $chain >"$tmp/out" 2>"$tmp/err"; then
  [ "$(grep -c "matrix multiply by the join's grid\|the join's best grid: est" "$tmp/out")" -eq 2 ] && ok ||
    fail "the products were not weighed: $(grep step "$tmp/out")"
else fail "explain under mpirun: $(cat "$tmp/err")"; fi

# the join of a matrix multiply: the cost model's grids, its choice, and
# (--analyze) the chosen grid's measured bytes, equal to the estimate for
# dense factors
awk 'BEGIN { print "%%MatrixMarket matrix coordinate real general"; print "12 10 120"
  for (i = 1; i <= 12; i++) for (j = 1; j <= 10; j++) print i, j, (i * j) % 7 + 1 }' >"$tmp/da.mtx"
awk 'BEGIN { print "%%MatrixMarket matrix coordinate real general"; print "10 8 80"
  for (i = 1; i <= 10; i++) for (j = 1; j <= 8; j++) print i, j, (i + j) % 5 + 1 }' >"$tmp/db.mtx"
printf 'input A[i, j], B[j, k]\nC[i, k] = sum(j: A[i, j] * B[j, k])\n' >"$tmp/mm.tin"
if GALLEY_DIST_JOIN=1 mpi 4 "$bin" explain --analyze "$tmp/mm.tin" A="$tmp/da.mtx" B="$tmp/db.mtx" >"$tmp/out" 2>"$tmp/err"; then
  expect_out "join by the implementation algebra"
  expect_out "<- chosen"
  est=$(sed -n 's/^ *\([0-9]*x[0-9]*x[0-9]*\) .* est \([0-9]*\) B .*<- chosen$/\1 \2/p' "$tmp/out")
  got=$(sed -n 's/^ *\([0-9]*x[0-9]*x[0-9]*\) measured \([0-9]*\) B$/\1 \2/p' "$tmp/out")
  [ -n "$est" ] && [ "$est" = "$got" ] && ok || fail "dense join: estimated '$est', measured '$got'"
  # the run's step: the chosen grid, its estimate (statistics, grid,
  # gather) equal to the measured bytes for dense factors
  step=$(grep "C: matrix multiply by the join's grid" "$tmp/out")
  e=$(echo "$step" | sed -n 's/.*: est \([0-9.]* [kM]*B\) (.*/\1/p')
  m=$(echo "$step" | sed -n 's/.*measured \([0-9.]* [kM]*B\) (.*/\1/p')
  [ -n "$e" ] && [ "$e" = "$m" ] && ok || fail "dense join step: est '$e', measured '$m': $step"
else fail "explain of a matrix multiply: $(cat "$tmp/err")"; fi
# a banded matrix (bcsstk13): the sampled rows keep the join step's
# estimate within 2x of the measured bytes on every grid (the uniform
# estimator was 4-6x high)
bcs=$data/matrices/bcsstk13.mtx
to_bytes() { echo "$1" | awk '{ v = $1; if ($2 == "kB") v *= 1e3; if ($2 == "MB") v *= 1e6; printf "%.0f\n", v }'; }
if [ -f "$bcs" ]; then
  for grid in 4x1x1 1x4x1 2x2x1; do
    if GALLEY_DIST_GRID=$grid mpi 4 -x GALLEY_DIST_GRID "$bin" explain --analyze "$tmp/mm.tin" A="$bcs" B="$bcs" >"$tmp/out" 2>"$tmp/err"; then
      step=$(grep "C: matrix multiply by the join's grid" "$tmp/out")
      e=$(to_bytes "$(echo "$step" | sed -n 's/.*: est \([0-9.]* [kM]*B\) (.*/\1/p')")
      m=$(to_bytes "$(echo "$step" | sed -n 's/.*measured \([0-9.]* [kM]*B\) (.*/\1/p')")
      [ "$e" -gt 0 ] && [ "$m" -gt 0 ] && [ "$e" -le $((2 * m)) ] && [ "$m" -le $((2 * e)) ] && ok ||
        fail "bcsstk13 on grid $grid: est $e, measured $m: $step"
    else fail "bcsstk13 explain: $(cat "$tmp/err")"; fi
  done
fi
# the run by the join's grid gives one process's product, on every grid
"$bin" run "$tmp/mm.tin" A="$tmp/da.mtx" B="$tmp/db.mtx" -o "$tmp/mm.one" -q 2>"$tmp/err" || fail "mm: one process"
for grid in 1x1x4 1x2x2 1x4x1 2x1x2 2x2x1 4x1x1; do
  rm -rf "$tmp/mm.4"
  if GALLEY_DIST_GRID=$grid mpi 4 -x GALLEY_DIST_GRID "$bin" run "$tmp/mm.tin" A="$tmp/da.mtx" B="$tmp/db.mtx" -o "$tmp/mm.4" -q 2>"$tmp/err" &&
     cmp -s "$tmp/mm.one/C.tns" "$tmp/mm.4/C.tns"; then ok; else fail "mm on grid $grid differs: $(cat "$tmp/err")"; fi
done

# ---- 4. faults ----
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n2 x 2\n' >"$tmp/bad.mtx"
# fault WHAT WANT-IN-STDERR NP ENV... -- ARGS: exits non-zero quickly,
# nothing written
fault() {
  what=$1 want=$2 np=$3; shift 3
  out=$tmp/fault.$np; rm -rf "$out"
  t0=$(date +%s)
  env "$@" timeout 30 mpirun --oversubscribe -np "$np" -x GALLEY_DIST_FAULT -x GALLEY_DIST_SPLIT_READ "$bin" run "$ex/chain.tin" \
    A="$exd/chain_A.mtx" B="${BMAT:-$exd/chain_B.mtx}" C="$exd/chain_C.mtx" -o "$out" -q >"$tmp/out" 2>"$tmp/err"
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then fail "$what: exit $rc"; else ok; fi
  [ "$secs" -le 20 ] && ok || fail "$what: took $secs s to stop"
  if [ -n "$want" ]; then expect_err_has "$want"; fi
  [ ! -e "$out" ] || [ -z "$(ls "$out")" ] && ok || fail "$what: wrote $(ls "$out")"
}
BMAT=$tmp/bad.mtx fault "bad data" "bad.mtx:4: error:" 3 GALLEY_DIST_FAULT=
# the same message when the ranks read the file in byte ranges
BMAT=$tmp/bad.mtx fault "bad data, split read" "bad.mtx:4: error:" 3 GALLEY_DIST_FAULT= GALLEY_DIST_SPLIT_READ=0
fault "rank 2 fails after query 0" "fault injected on rank 2 after query '_t0'" 3 GALLEY_DIST_FAULT=2:0
fault "rank 2 of 3 named" "rank 2 of 3 failed first; every rank stopped" 3 GALLEY_DIST_FAULT=2:0
fault "rank 1 fails at the end" "fault injected on rank 1" 2 GALLEY_DIST_FAULT=1:-1
fault "rank 1 dies of SIGKILL" "" 3 GALLEY_DIST_FAULT=1:0:kill
# the exit status of a data error, on every rank
BMAT=$tmp/bad.mtx env GALLEY_DIST_FAULT= timeout 30 mpirun --oversubscribe -np 2 "$bin" run "$ex/chain.tin" \
  A="$exd/chain_A.mtx" B="$tmp/bad.mtx" C="$exd/chain_C.mtx" -o "$tmp/x" -q >/dev/null 2>&1
[ $? -eq 3 ] && ok || fail "bad data: exit status is not 3"

# ---- without mpirun nothing changes: no MPI is started ----
if "$bin" run "$ex/chain.tin" A="$exd/chain_A.mtx" B="$exd/chain_B.mtx" C="$exd/chain_C.mtx" --print -q >"$tmp/out" 2>"$tmp/err" &&
   ! grep -q 'Distributed' "$tmp/out"; then ok; else fail "plain run"; fi

echo "test_dist.sh: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
