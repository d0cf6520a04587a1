#!/bin/sh
# test_golden.sh -- the printed input plan of every tests/golden/NN_name.tin
# must equal the checked-in NN_name.plan (the exact stdout of
# `galleyc explain NN_name.tin`, run inside tests/golden so that file names
# in messages are stable).  Every .plan file was reviewed line by line
# against tin.md; regenerate one only after reviewing the difference.
#
# GALLEY_GOLDEN_UPDATE=1 rewrites the .plan files instead of comparing.
set -u
bin=${GALLEY_BUILDDIR:-.}/galleyc
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
dir=${GALLEY_TEST_SRCDIR:-tests}/golden
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cd "$dir" || { echo "FAIL: no directory $dir"; exit 1; }
fails=0 passes=0
for tin in *.tin; do
  [ -e "$tin" ] || { echo "FAIL: no .tin files in $dir"; exit 1; }
  base=${tin%.tin}
  "$bin" explain "$tin" >"$tmp/out" 2>&1
  status=$?
  if [ "${GALLEY_GOLDEN_UPDATE:-0}" = 1 ]; then
    cp "$tmp/out" "$base.plan"; continue
  fi
  if [ $status -ne 0 ]; then
    echo "FAIL: $tin: galleyc explain exited $status"; sed 's/^/  /' "$tmp/out"
    fails=$((fails + 1))
  elif [ ! -f "$base.plan" ]; then
    echo "FAIL: $tin: no $base.plan"; fails=$((fails + 1))
  elif ! diff -u "$base.plan" "$tmp/out" >"$tmp/diff"; then
    echo "FAIL: $tin: plan differs from $base.plan"; cat "$tmp/diff"
    fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
done
echo "golden: $passes passed, $fails failed"
[ $fails -eq 0 ]
