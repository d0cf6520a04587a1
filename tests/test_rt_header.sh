#!/bin/sh
# The kernel-facing header must compile cleanly with every compiler that
# will see it: gcc, clang and tcc (warnings are errors where supported).
set -u
src=${GALLEY_TEST_SRCDIR:-tests}
inc="$src/../runtime"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0
compiled=0
try() { # NAME COMMAND...
  name=$1; shift
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "skip: $name not installed"
    return
  fi
  if "$@" -I"$inc" -c "$src/kernel_sample.c" -o "$tmp/$name.o" 2>"$tmp/$name.err"; then
    echo "ok: $name"
    compiled=$((compiled + 1))
  else
    echo "FAIL: $name"; cat "$tmp/$name.err"; status=1
  fi
}
try gcc gcc -std=c99 -pedantic -Wall -Wextra -Werror -O2
try gcc-c11 gcc -std=c11 -pedantic -Wall -Wextra -Werror -O2
try clang clang -std=c99 -pedantic -Wall -Wextra -Werror -O2
try tcc tcc -Wall -Werror
# gcc alone is not enough: the point is the three compilers.
[ $compiled -ge 3 ] || { echo "FAIL: fewer than 3 compilers ran"; status=1; }
exit $status
