#!/bin/sh
# test_golden_c.sh -- the C source of the kernels of every
# tests/golden_c/NAME.tin, planned for the data its first line binds
# ("# bind: A=A.mtx ..."), must equal the checked-in NAME.c (the output of
# `galleyc explain NAME.tin ... --c` after the embedded runtime header).
# These pin the code of representative kernels (SpMV, SpGEMM with each
# scatter kind, a union merge, triangles, a user function, SDDMM, a scalar
# reduction, min-plus, a row max, a transposed SpMV) so that every change
# to generated code shows in review.  Regenerate one only after reading
# the difference:  GALLEY_GOLDEN_UPDATE=1 make check TESTS=tests/test_golden_c.sh
set -u
bin=${GALLEY_BUILDDIR:-.}/galleyc
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
dir=${GALLEY_TEST_SRCDIR:-tests}/golden_c
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cd "$dir" || { echo "FAIL: no directory $dir"; exit 1; }
fails=0 passes=0
for tin in *.tin; do
  [ -e "$tin" ] || { echo "FAIL: no .tin files in $dir"; exit 1; }
  base=${tin%.tin}
  binds=$(sed -n '1s/^# bind: //p' "$tin")
  # shellcheck disable=SC2086 # the bindings are words
  "$bin" explain "$tin" $binds --c --backend=tcc >"$tmp/full" 2>&1
  status=$?
  # the kernels: everything after the runtime header's closing #endif
  sed '1,/^#endif \/\* GALLEY_RT_H \*\//d' "$tmp/full" >"$tmp/out"
  if [ "${GALLEY_GOLDEN_UPDATE:-0}" = 1 ]; then
    cp "$tmp/out" "$base.c"; continue
  fi
  if [ $status -ne 0 ] || [ ! -s "$tmp/out" ]; then
    echo "FAIL: $tin: galleyc explain --c exited $status"; sed 's/^/  /' "$tmp/full" | head -20
    fails=$((fails + 1))
  elif [ ! -f "$base.c" ]; then
    echo "FAIL: $tin: no $base.c"; fails=$((fails + 1))
  elif ! diff -u "$base.c" "$tmp/out" >"$tmp/diff"; then
    echo "FAIL: $tin: kernels differ from $base.c"; cat "$tmp/diff"
    fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
done
echo "golden_c: $passes passed, $fails failed"
[ $fails -eq 0 ]
