#!/bin/sh
# test_readme.sh -- every `build/galleyc ...` line of README.md's "Using
# it" block runs as written and exits 0, from a scratch directory laid out
# like a checkout (examples/, build/galleyc, ../shared/data), so that what
# the README tells a new user is true.
set -u
bin=${GALLEY_BUILDDIR:-.}/galleyc
. "${GALLEY_TEST_SRCDIR:-tests}/shlib.sh"
src=${GALLEY_TEST_SRCDIR:-tests}/..
data=${GALLEY_DATA_DIR:-$src/../shared/data}
mkdir -p "$tmp/shared" "$tmp/w/build"
ln -s "$data" "$tmp/shared/data"
ln -s "$src/examples" "$tmp/w/examples"
ln -s "$(cd "$(dirname "$bin")" && pwd)/galleyc" "$tmp/w/build/galleyc"
awk '/^## Using it/ { f = 1 } f && /^```sh/ { c = 1; next } c && /^```/ { exit }
     c && /^build\/galleyc / { print }' "$src/README.md" >"$tmp/lines"
[ -s "$tmp/lines" ] && ok || fail "no galleyc lines in README.md's Using it block"
export GALLEY_CACHE_DIR="$tmp/cache"
while IFS= read -r line; do
  if (cd "$tmp/w" && eval "$line") >"$tmp/out" 2>"$tmp/err" </dev/null; then ok; else
    fail "README line failed: $line"; sed 's/^/  stderr: /' "$tmp/err"; fi
done <"$tmp/lines"
echo "test_readme: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
