#!/bin/sh
# test_cli.sh -- the galleyc command: output, errors, exit codes, and that
# --help and the man page agree.
set -u
bin=${GALLEY_BUILDDIR:-.}/galleyc
src=${GALLEY_TEST_SRCDIR:-tests}/..
. "${GALLEY_TEST_SRCDIR:-tests}/shlib.sh"

# version and help
expect_status 0 "$bin" --version
expect_out "galleyc 0.1.0"
expect_status 0 "$bin" --help
expect_out "usage: galleyc info FILE"
expect_status 0 "$bin" info --help
expect_out "Exit status"

# every option in --help is documented in the man page
"$bin" --help | grep -oE -- '(^|[ ,\[])--?[a-z][a-z-]*' | sed 's/^[ ,[]//' | sort -u >"$tmp/opts"
[ -s "$tmp/opts" ] || fail "no options found in --help"
while read -r opt; do
  esc=$(printf '%s' "$opt" | sed 's/-/\\\\-/g')
  if grep -q -- "$esc" "$src/man/galleyc.1"; then ok; else fail "option $opt of --help is not in man/galleyc.1"; fi
done <"$tmp/opts"

# every function declared in galley.h is documented in galley(3)
grep -oE '\bgalley_[a-z0-9_]+\(' "$src/include/galley.h" | tr -d '(' | sort -u >"$tmp/funcs"
[ -s "$tmp/funcs" ] || fail "no functions found in galley.h"
while read -r fn; do
  if grep -q -- "$fn" "$src/man/galley.3"; then ok; else fail "$fn of galley.h is not in man/galley.3"; fi
done <"$tmp/funcs"

# info on the bundled example
small="$src/examples/data/small.tns"
expect_status 0 "$bin" info "$small"
expect_out "order 3"
expect_out "2 x 3 x 2"
expect_out "nnz 4"
expect_status 0 "$bin" info "$small" --format=hash:2,bytemap:0,list:1 --stats -v
expect_out "hash"
expect_out "degree statistics"
expect_out "read and converted in"

# convert round trip: any format writes the same logical entries
expect_status 0 "$bin" convert "$small" "$tmp/a.tns"
expect_status 0 "$bin" convert "$small" "$tmp/b.tns.gz" --format=bytemap:1,hash:2,dense:0
expect_status 0 "$bin" convert "$tmp/b.tns.gz" "$tmp/b.tns"
if cmp -s "$tmp/a.tns" "$tmp/b.tns"; then ok; else fail "conversions wrote different files"; diff "$tmp/a.tns" "$tmp/b.tns"; fi
if grep -qx '# dims: 2 3 2' "$tmp/a.tns" && grep -qx '# fill: 0' "$tmp/a.tns" &&
   [ "$(grep -vc '^#' "$tmp/a.tns")" -eq 4 ]; then ok; else fail "a.tns lacks headers or entries"; cat "$tmp/a.tns"; fi

# a matrix to Matrix Market and back
printf '%%%%MatrixMarket matrix coordinate real general\n3 4 3\n1 1 2.5\n3 4 -1\n2 2 7\n' >"$tmp/m.mtx"
expect_status 0 "$bin" convert "$tmp/m.mtx" "$tmp/m2.mtx" --format=dense:1,list:0
expect_status 0 "$bin" info "$tmp/m2.mtx"
expect_out "3 x 4"
expect_out "nnz 3"

# data errors: exit 3, FILE:LINE: error: message, nothing written
printf '1 1 1 2.0\n1 2 3.0\n' >"$tmp/bad.tns"
expect_status 3 "$bin" info "$tmp/bad.tns"
case $(head -n 1 "$tmp/err") in "$tmp/bad.tns:2: error: "*) ok ;; *) fail "bad.tns message: $(cat "$tmp/err")" ;; esac
expect_status 3 "$bin" convert "$tmp/bad.tns" "$tmp/never.tns"
[ ! -e "$tmp/never.tns" ] && ok || fail "a failed convert wrote never.tns"
expect_status 3 "$bin" info "$tmp/missing.mtx"
case $(head -n 1 "$tmp/err") in "$tmp/missing.mtx: error: cannot open"*) ok ;; *) fail "missing file message: $(cat "$tmp/err")" ;; esac
expect_status 3 "$bin" convert "$small" "$tmp/no/such/dir/x.tns"
expect_status 3 "$bin" convert "$small" "$tmp/x.mtx"
expect_status 3 "$bin" info "$small" --format=dense,list
expect_status 3 "$bin" info "$small" --format=dense,list,cube

# usage errors: exit 2
expect_status 2 "$bin"
expect_status 2 "$bin" frobnicate
expect_err "galleyc: unknown command 'frobnicate'"
expect_status 2 "$bin" info
expect_status 2 "$bin" info "$small" --bogus
expect_err "galleyc: unknown option '--bogus'"
expect_status 2 "$bin" compile prog.tin
expect_err "galleyc: compile needs -o OUT.c"
expect_status 2 "$bin" run

echo "test_cli: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
