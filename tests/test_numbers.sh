#!/bin/sh
# test_numbers.sh -- numbers at their edges, end to end: a product whose
# skipped fills overflow next to a stored 0, the spelling of numbers in
# result files (shortest text that reads back), numbers too large for a
# double in programs and data files, and the warnings about results that
# look wrong (integers beyond 2^53, a NaN fill, a result that is all fill)
# and -q, which silences them.
set -u
bin=${GALLEY_BUILDDIR:-.}/galleyc
. "${GALLEY_TEST_SRCDIR:-tests}/shlib.sh"

backends="tcc reference"
if [ -n "${CLANG:-}" ] || command -v clang >/dev/null 2>&1; then backends="$backends clang"; fi

# ---- prod over skipped fills that overflow: 2^1999 * 0 is 0, not nan ----
# The kernel multiplies the stored entries, then folds the fill over the
# skipped points (pow(2, 1999) = inf); a stored 0 annihilates any finite
# value, so the product is 0 wherever the 0 stands.
printf '# dims: 2000\n# fill: 2\n5 0\n' >"$tmp/v0.tns"
printf '# dims: 2000\n# fill: 2\n1900 0\n1950 3\n' >"$tmp/v1.tns"
printf '# dims: 2000\n# fill: 2\n7 1\n' >"$tmp/v2.tns"
printf '# dims: 2000 2\n# fill: 2\n5 1 0\n5 2 1\n' >"$tmp/M.tns"
printf 'input v[i] fill 2\np = prod(i: v[i])\n' >"$tmp/prod.tin"
printf 'input M[i, j] fill 2\np[j] = prod(i: M[i, j])\n' >"$tmp/prodm.tin"
# (The reference evaluator folds left to right: 2^1899 overflows before
# the 0 at 1900 arrives, a documented overflow exception, so it is held to
# the first file only.)
for b in $backends; do
  files="v0 v1"
  [ $b = reference ] && files=v0
  for v in $files; do
    expect_status 0 "$bin" run "$tmp/prod.tin" v="$tmp/$v.tns" --print --backend=$b --cache-dir="$tmp/cache"
    expect_file "$tmp/out" '# dims:
# fill: inf
0'
  done
  # without a stored 0 the product truly overflows
  expect_status 0 "$bin" run "$tmp/prod.tin" v="$tmp/v2.tns" --print --backend=$b --cache-dir="$tmp/cache"
  expect_file "$tmp/out" '# dims:
# fill: inf
inf'
  expect_status 0 "$bin" run "$tmp/prodm.tin" M="$tmp/M.tns" --print --backend=$b --cache-dir="$tmp/cache"
  expect_file "$tmp/out" '# dims: 2
# fill: inf
1 0'
done

# ---- count(i: e) = sum(i: e != 0), on the dense meaning ----
# stored 2, a stored 0 (not counted), -1, and unstored zeros; then the
# same with fill 3: the 3 unstored entries count too
printf '# dims: 6\n1 2\n3 0\n4 -1\n' >"$tmp/c0.tns"
printf '# dims: 6\n# fill: 3\n1 2\n3 0\n4 -1\n' >"$tmp/c3.tns"
printf 'input v[i]\nn = count(i: v[i])\npos = count(i: v[i] > 0)\n' >"$tmp/count0.tin"
printf 'input v[i] fill 3\nn = count(i: v[i])\npos = count(i: v[i] > 0)\n' >"$tmp/count3.tin"
for b in $backends; do
  expect_status 0 "$bin" run "$tmp/count0.tin" v="$tmp/c0.tns" --print --backend=$b --cache-dir="$tmp/cache"
  expect_file "$tmp/out" '# output: n
# dims:
# fill: 0
2
# output: pos
# dims:
# fill: 0
1'
  expect_status 0 "$bin" run "$tmp/count3.tin" v="$tmp/c3.tns" --print --backend=$b --cache-dir="$tmp/cache"
  expect_file "$tmp/out" '# output: n
# dims:
# fill: 6
5
# output: pos
# dims:
# fill: 6
4'
done

# ---- warnings about results that look wrong; -q silences them ----
printf '# dims: 3\n1 2\n3 -1\n' >"$tmp/x.tns"
# a nan fill: 0 / 0 on the unstored entries
printf 'input x[i]\nr[i] = x[i] / x[i]\n' >"$tmp/nanfill.tin"
expect_status 0 "$bin" run "$tmp/nanfill.tin" x="$tmp/x.tns" --print
expect_err "galleyc: warning: result 'r' has fill nan: all its unstored entries are nan"
expect_status 0 "$bin" run "$tmp/nanfill.tin" x="$tmp/x.tns" --print -q
[ ! -s "$tmp/err" ] && ok || fail "-q: $(cat "$tmp/err")"
# entirely fill
printf 'input x[i]\nz[i] = x[i] * 0\n' >"$tmp/zero.tin"
expect_status 0 "$bin" run "$tmp/zero.tin" x="$tmp/x.tns" --print
expect_err "galleyc: warning: result 'z' is entirely its fill 0: no entry differs from it"
expect_status 0 "$bin" run "$tmp/zero.tin" x="$tmp/x.tns" --print --quiet
[ ! -s "$tmp/err" ] && ok || fail "--quiet: $(cat "$tmp/err")"
# nan everywhere
printf 'input x[i]\nn[i] = (x[i] - x[i]) / 0\n' >"$tmp/nan.tin"
expect_status 0 "$bin" run "$tmp/nan.tin" x="$tmp/x.tns" --print
expect_err "galleyc: warning: result 'n' is nan everywhere"
# integers beyond 2^53: a count that float64 may round (3^40 > 2^53)
printf '# dims: 40\n# fill: 3\n' >"$tmp/three.tns"
printf 'input t[i] fill 3\nc = prod(i: t[i])\nm = prod(i: t[i] / 2)\n' >"$tmp/count.tin"
expect_status 0 "$bin" run "$tmp/count.tin" t="$tmp/three.tns" --print
expect_err "galleyc: warning: result 'c' holds integers up to 1.2157665459056929e+19, beyond 2^53 = 9007199254740992: float64 cannot represent every integer there, so they may be rounded (see tin(5))"
# (1.5^40 is not an integer: no warning for m)
[ "$(grep -c warning "$tmp/err")" -eq 1 ] && ok || fail "2^53 warnings: $(cat "$tmp/err")"
# a result that is fine: no warning at all
printf 'input x[i]\ns = sum(i: x[i])\n' >"$tmp/fine.tin"
expect_status 0 "$bin" run "$tmp/fine.tin" x="$tmp/x.tns" --print
[ ! -s "$tmp/err" ] && ok || fail "warning for a fine result: $(cat "$tmp/err")"

echo "test_numbers: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
