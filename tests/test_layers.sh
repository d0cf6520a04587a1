#!/bin/sh
# test_layers.sh -- layers call down only.  From the library's object
# files, every call from one directory to a function defined in another
# must go to a lower layer:
#   runtime < ir < front, stats < logical < physical < codegen, jit
#   < exec, aot < api, dist < cli
# (docs/ARCHITECTURE.md).  Any upward call fails the test, unless listed
# in `allowed` below with its reason (none is).
set -u
build=${GALLEY_BUILDDIR:-.}
command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm"; exit 77; }
rank() {
  case $1 in
    runtime) echo 0 ;; ir) echo 1 ;; front|stats) echo 2 ;; logical) echo 3 ;;
    physical) echo 4 ;; codegen|jit) echo 5 ;; exec|aot) echo 6 ;; api) echo 7 ;;
    dist) echo 7 ;; cli) echo 8 ;; *) echo 99 ;;
  esac
}
# Known upward calls, as "from->to:symbol" words with a comment saying why.
allowed=""
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
objs=$(find "$build/runtime" "$build/src" -name '*.o' ! -path '*/cli/*' 2>/dev/null)
[ -n "$objs" ] || { echo "FAIL: no object files under $build"; exit 1; }
for o in $objs; do
  dir=$(basename "$(dirname "$o")")
  nm -g --defined-only "$o" | awk -v d="$dir" '$2 ~ /[TDBR]/ { print $3, d }' >>"$tmp/defs"
done
fails=0 checked=0
for o in $objs; do
  dir=$(basename "$(dirname "$o")")
  for sym in $(nm -u "$o" | awk '{ print $2 }'); do
    def=$(awk -v s="$sym" '$1 == s { print $2; exit }' "$tmp/defs")
    [ -n "$def" ] && [ "$def" != "$dir" ] || continue
    checked=$((checked + 1))
    if [ "$(rank "$def")" -gt "$(rank "$dir")" ]; then
      case " $allowed " in
        *" $dir->$def:$sym "*) ;;
        *) echo "FAIL: $o ($dir) calls $sym of $def, a higher layer"; fails=$((fails + 1)) ;;
      esac
    fi
  done
done
echo "layers: $checked cross-directory calls checked, $fails upward"
[ "$checked" -gt 50 ] || { echo "FAIL: too few calls checked ($checked)"; exit 1; }
[ $fails -eq 0 ]
