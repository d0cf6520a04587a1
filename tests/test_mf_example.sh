#!/bin/sh
# test_mf_example.sh -- examples/mf/mf, a matrix factorization of the real
# matrix celegansneural (297 x 297, 2345 weighted edges) over its observed
# entries, trained by gradient descent through the context API with
# gradients from grad: the loss goes down at every step, every run after
# the first reuses the plan and kernels, and the independent numpy/scipy
# implementation (examples/mf/mf_numpy.py: the textbook gradients -2 E V,
# -2 E^T U from the same starting point) prints the same losses step by
# step and the same final factors' sums, to 1e-9.
set -u
mf=${GALLEY_BUILDDIR:-.}/examples/mf/mf
src=${GALLEY_TEST_SRCDIR:-tests}/..
data=${GALLEY_DATA_DIR:-$src/../shared/data}
. "${GALLEY_TEST_SRCDIR:-tests}/shlib.sh"
matrix=$data/matrices/celegansneural.mtx
if [ ! -f "$matrix" ]; then
  echo "test_mf_example: skip: $matrix not found (set GALLEY_DATA_DIR)"
  exit 77
fi
python=
for p in ${PYTHON_SCIPY:-} /usr/bin/python3 python3; do
  if "$p" -c 'import numpy, scipy.io, scipy.sparse' 2>/dev/null; then
    python=$p
    break
  fi
done
if [ -z "$python" ]; then
  echo "test_mf_example: skip: no python3 with numpy and scipy"
  exit 77
fi

expect_status 0 "$mf" -s 20 -k 6 "$matrix"
cp "$tmp/out" "$tmp/galley"
awk '/^step/ { if (n++ && $4 >= last) bad = 1; last = $4 } END { exit bad || n != 21 }' "$tmp/galley" \
  && ok || fail "the loss does not go down: $(cat "$tmp/galley")"
sed -n 's/.* in 20 steps (kernels reused in \([0-9]*\) runs)$/\1/p' "$tmp/galley" | awk '{ exit !($1 >= 19) }' \
  && ok || fail "reuse: $(cat "$tmp/galley")"

expect_status 0 "$python" "$src/examples/mf/mf_numpy.py" -s 20 -k 6 "$matrix"
cp "$tmp/out" "$tmp/numpy"
# the same lines, numbers equal to a relative 1e-9 (the last digits of a
# sum differ with its order)
compare() { # WHAT: the lines of both runs starting with WHAT
  grep "^$1" "$tmp/galley" >"$tmp/a"
  grep "^$1" "$tmp/numpy" >"$tmp/b"
  paste -d '\n' "$tmp/a" "$tmp/b" | awk -v what="$1" '
    NR % 2 == 1 { n = split($0, a, " "); next }
    { m = split($0, b, " "); if (m != n) { bad = 1; next }
      for (k = 1; k <= n; k++) {
        if (a[k] == b[k]) continue
        x = a[k] + 0; y = b[k] + 0; d = x - y; if (d < 0) d = -d
        s = (x < 0 ? -x : x); if ((y < 0 ? -y : y) > s) s = (y < 0 ? -y : y)
        if (!(d <= 1e-9 * s)) bad = 1 } rows++ }
    END { exit bad || rows == 0 }' && ok ||
    fail "mf and mf_numpy.py differ on '$1':
$(paste "$tmp/a" "$tmp/b")"
}
compare rate
compare step
compare "sum U"

# errors: usage, a missing file, a tensor that is not a matrix
expect_status 2 "$mf"
expect_err "usage: mf [-v] [-s STEPS] [-k RANK] [-r RATE] [-l LAMBDA] MATRIX.mtx"
expect_status 2 "$mf" -k 0 "$matrix"
expect_status 1 "$mf" "$tmp/nowhere.mtx"
expect_err_has "error:"
printf '# dims: 2 2 2\n1 1 1 1.5\n' >"$tmp/t.tns"
expect_status 1 "$mf" "$tmp/t.tns"
expect_err "mf: $tmp/t.tns: not a matrix"

echo "test_mf_example: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
