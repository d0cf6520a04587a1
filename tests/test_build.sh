#!/bin/sh
# test_build.sh -- a single target builds in a fresh build directory:
# `make galleyc` must generate the embedded kernel header
# (src/codegen/rt_header.inc) before compiling the objects that include
# it, although BUILT_SOURCES only covers `make all`, `check` and
# `install`.  A dry run (make -n) in a freshly configured directory shows
# the order without compiling anything.
set -u
src=${GALLEY_TEST_SRCDIR:?}/..
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && "$src/configure" -q >configure.log 2>&1) || {
  echo "FAIL: configure in a fresh directory"; cat "$tmp/configure.log"; exit 1; }
${MAKE:-make} -C "$tmp" -n galleyc >"$tmp/plan" 2>&1 || {
  echo "FAIL: make -n galleyc"; cat "$tmp/plan"; exit 1; }
status=0
gen=$(grep -n 'embed_header.awk' "$tmp/plan" | head -n 1 | cut -d: -f1)
for obj in src/codegen/codegen.o src/exec/exec.o; do
  cc_line=$(grep -n "CC *\" $obj" "$tmp/plan" | head -n 1 | cut -d: -f1)
  if [ -z "$cc_line" ]; then
    echo "FAIL: make -n galleyc does not compile $obj"; status=1
  elif [ -z "$gen" ] || [ "$gen" -gt "$cc_line" ]; then
    echo "FAIL: make galleyc compiles $obj before generating rt_header.inc"; status=1
  fi
done
[ $status -eq 0 ] && echo "build: 2 passed, 0 failed"
exit $status
