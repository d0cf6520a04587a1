#!/bin/sh
# test_install.sh -- `make install` puts the library, headers, command, man
# pages and galley.pc in place, and a host program builds against them with
# nothing but pkg-config and cc (examples/host/row_degrees.c).
set -u
build=${GALLEY_BUILDDIR:?}
src=${GALLEY_TEST_SRCDIR:?}/..
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/root
prefix=$(sed -n 's/^prefix=//p' "$build/galley.pc")
${MAKE:-make} -s -C "$build" install DESTDIR="$dest" >"$tmp/install.log" 2>&1 || {
  echo "FAIL: make install"; cat "$tmp/install.log"; exit 1; }
root=$dest$prefix
status=0
for f in bin/galleyc lib/libgalley.a include/galley.h include/galleyc/galley_rt.h \
         share/man/man1/galleyc.1 share/man/man3/galley.3 share/man/man5/tin.5; do
  [ -f "$root/$f" ] || { echo "FAIL: $f not installed"; status=1; }
done
pc=$(find "$dest" -name galley.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: galley.pc not installed"; exit 1; }
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --define-variable=prefix="$root" \
        --cflags --libs galley) || { echo "FAIL: pkg-config galley"; exit 1; }
# The sanitizer build's library needs the sanitizer runtime at link time.
extra=
grep -q '^#define GALLEY_SANITIZERS 1' "$build/config.h" && extra="-fsanitize=address,undefined"
cc $extra "$src/examples/host/row_degrees.c" $flags -o "$tmp/row_degrees" 2>"$tmp/cc.log" || {
  echo "FAIL: host program does not build: cc ... $flags"; cat "$tmp/cc.log"; exit 1; }
data=${GALLEY_DATA_DIR:-$src/../shared/data}/matrices/karate.mtx
out=$("$tmp/row_degrees" "$data") || { echo "FAIL: row_degrees exited $?"; status=1; }
want="34 x 34, nnz 156
max row degree 17, max column degree 17
A[0,0] = 0"
[ "$out" = "$want" ] || { echo "FAIL: row_degrees printed:"; echo "$out"; status=1; }
"$root/bin/galleyc" --version >/dev/null || { echo "FAIL: installed galleyc"; status=1; }
[ $status -eq 0 ] && echo "install: ok"
exit $status
