#!/bin/sh
# test_threads_cli.sh -- `galleyc run --threads N` and GALLEY_THREADS: the
# result files of a product, a reduction to a scalar, one over the outer
# index and a sparse output are byte for byte the same for 1, 2, 3 and 7
# threads (on a matrix large enough for many blocks); bad counts are
# usage errors.
set -u
bin=${GALLEY_BUILDDIR:-.}/galleyc
# a hung pool must fail the test, not stall make check: threaded runs are
# under timeout
. "${GALLEY_TEST_SRCDIR:-tests}/shlib.sh"
mat=${GALLEY_DATA_DIR:-../shared/data}/matrices/bcsstk13.mtx
[ -f "$mat" ] || { echo "SKIP: no $mat"; exit 77; }
prog=$tmp/k.tin
cat >"$prog" <<'EOF2'
input A[i, j]
C[i, k] = sum(j: A[i, j] * A[j, k])
s = sum(i, j: A[i, j] * A[i, j])
z[j] = sum(i: A[i, j])
P[i, j] = A[i, j] * sum(k: A[i, k])
EOF2
for t in 1 2 3 7; do
  mkdir "$tmp/o$t"
  expect_status 0 timeout 120 "$bin" run "$prog" A="$mat" -o "$tmp/o$t" --threads=$t --backend=tcc
done
mkdir "$tmp/env"
expect_status 0 timeout 120 env GALLEY_THREADS=2 "$bin" run "$prog" A="$mat" -o "$tmp/env" --backend=tcc
for f in C s z P; do
  for d in o2 o3 o7 env; do
    if cmp -s "$tmp/o1/$f.tns" "$tmp/$d/$f.tns"; then ok; else
      fail "$f.tns of $d differs from 1 thread"; fi
  done
done
expect_status 2 "$bin" run "$prog" A="$mat" --threads=0
expect_err "galleyc: error: bad --threads '0' (expected a number 1..256)"
expect_status 2 "$bin" run "$prog" A="$mat" --threads=2x
expect_status 2 "$bin" compile "$prog" -o "$tmp/k.c" A="$mat" --threads=2
echo "test_threads_cli: $passes passed, $fails failed"
[ $fails -eq 0 ]
