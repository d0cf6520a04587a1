#!/bin/sh
# test_examples.sh -- every program in examples/ runs and gives the answer
# worked out by hand in this file.
set -u
bin=${GALLEY_BUILDDIR:?}/galleyc
ex=${GALLEY_TEST_SRCDIR:?}/../examples
data=${GALLEY_DATA_DIR:-$ex/../../shared/data}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# near FILE LINE_PATTERN VALUE: the entry line starting with the given
# coordinates (or the value line of a scalar) holds VALUE to 1e-12.
near() {
  awk -v key="$2" -v want="$3" '
    /^#/ { next }
    { coords = ""; for (k = 1; k < NF; k++) coords = coords (k > 1 ? " " : "") $k
      if (coords == key) { found = 1; d = $NF - want; if (d < 0) d = -d
        exit !(d <= 1e-12 * (want < 0 ? -want : want) + 1e-15) } }
    END { if (!found) exit 1 }' "$1"
}

# triangles: karate has 45 (data/matrices/README.md)
if "$bin" run "$ex/triangles.tin" E="$data/matrices/karate.mtx" -o "$tmp" &&
   near "$tmp/triangles.tns" "" 45; then ok; else fail "triangles.tin on karate"; fi

# logistic: rows of X . theta are -0.75, -0.5, 0.25 and an empty row (0)
if "$bin" run "$ex/logistic.tin" X="$ex/data/X.mtx" theta="$ex/data/theta.tns" -o "$tmp"; then
  ok
  grep -qx '# fill: 0.5' "$tmp/P.tns" && ok || fail "P fill is not sigmoid(0) = 0.5"
  near "$tmp/P.tns" 1 0.320821300824607 && ok || fail "P[1]"
  near "$tmp/P.tns" 2 0.3775406687981454 && ok || fail "P[2]"
  near "$tmp/P.tns" 3 0.5621765008857981 && ok || fail "P[3]"
  grep -q '^4 ' "$tmp/P.tns" && fail "P[4] equals the fill but is written" || ok
  near "$tmp/positives.tns" "" 1 && ok || fail "positives"
else
  fail "logistic.tin"
fi

echo "test_examples: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
