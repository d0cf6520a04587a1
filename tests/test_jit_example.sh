#!/bin/sh
# test_jit_example.sh -- examples/jit/jit, the host program that uses the
# context API, prints the answers worked out in examples/jit/jit.c:
# logistic-regression probabilities and positives (the same as
# examples/logistic.tin in test_examples.sh), kernels reused on new
# weights, and the 45 triangles of karate.mtx.
set -u
jit=${GALLEY_BUILDDIR:-.}/examples/jit/jit
data=${GALLEY_DATA_DIR:-${GALLEY_TEST_SRCDIR:-tests}/../../shared/data}
. "${GALLEY_TEST_SRCDIR:-tests}/shlib.sh"

expect_status 0 "$jit" "$data/matrices/karate.mtx"
expect_file "$tmp/out" "logistic regression: P = sigmoid(X theta)
  P[0] = 0.320821
  P[1] = 0.377541
  P[2] = 0.562177
  P[3] = 0.500000
  positives = 1
  with theta[1] = 1: positives = 2 (kernels reused)
triangles in karate.mtx: 45"
[ -s "$tmp/err" ] && fail "stderr without -v: $(cat "$tmp/err")" || ok

# -v: the library logs every run to stderr; stdout is unchanged
cp "$tmp/out" "$tmp/quiet"
expect_status 0 "$jit" -v "$data/matrices/karate.mtx"
cmp -s "$tmp/out" "$tmp/quiet" && ok || fail "-v changed stdout"
[ "$(grep -c '^backend [a-z]*: planned in ' "$tmp/err")" -eq 3 ] && ok || fail "-v: $(cat "$tmp/err")"
grep -q '(kernels reused)' "$tmp/err" && ok || fail "-v: no reuse logged: $(cat "$tmp/err")"
expect_err_has "query triangles"

# errors: usage, and a file that cannot be read
expect_status 2 "$jit"
expect_err "usage: jit [-v] GRAPH.mtx"
expect_status 1 "$jit" "$tmp/missing.mtx"
expect_err_has "cannot open"

echo "test_jit_example: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
