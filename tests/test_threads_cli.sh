#!/bin/sh
# test_threads_cli.sh -- `galleyc run --threads N` and GALLEY_THREADS: the
# result files of a product, a reduction to a scalar, one over the outer
# index and a sparse output are byte for byte the same for 1, 2, 3 and 7
# threads (on a matrix large enough for many blocks); a gzip matrix
# converted on 1, 2 and 7 threads is the same bytes; bad counts are
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
# reading and writing files on threads ($GALLEY_THREADS): a gzip matrix
# (its entries parsed in parts) written as .mtx.gz (deflated in pieces)
# is the same bytes for 1, 2 and 7 threads, and reads back as the text
# one thread writes plainly
gzmat=${GALLEY_DATA_DIR:-../shared/data}/matrices/copter2.mtx.gz
if [ -f "$gzmat" ]; then
  for t in 1 2 7; do
    expect_status 0 timeout 120 env GALLEY_THREADS=$t "$bin" convert "$gzmat" "$tmp/c$t.mtx.gz"
  done
  for t in 2 7; do
    if cmp -s "$tmp/c1.mtx.gz" "$tmp/c$t.mtx.gz"; then ok; else
      fail "c$t.mtx.gz differs from 1 thread's"; fi
  done
  expect_status 0 env GALLEY_THREADS=1 "$bin" convert "$gzmat" "$tmp/plain.mtx"
  expect_status 0 env GALLEY_THREADS=2 "$bin" convert "$tmp/c2.mtx.gz" "$tmp/back.mtx"
  if cmp -s "$tmp/plain.mtx" "$tmp/back.mtx"; then ok; else
    fail "the pieces of c2.mtx.gz do not read back as the plain text"; fi
fi
expect_status 2 "$bin" run "$prog" A="$mat" --threads=0
expect_err "galleyc: error: bad --threads '0' (expected a number 1..256)"
expect_status 2 "$bin" run "$prog" A="$mat" --threads=2x
expect_status 2 "$bin" compile "$prog" -o "$tmp/k.c" A="$mat" --threads=2
echo "test_threads_cli: $passes passed, $fails failed"
[ $fails -eq 0 ]
