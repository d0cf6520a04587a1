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
expect_out "Exit status:"
expect_out "  4  internal error"

# per-command help: the command's usage, its options and the exit
# statuses, status 0; `galleyc help CMD` prints the same
for cmd in info convert run explain compile; do
  expect_status 0 "$bin" "$cmd" --help
  case $(head -n 1 "$tmp/out") in "usage: galleyc $cmd "*) ok ;; *) fail "$cmd --help: $(head -n 1 "$tmp/out")" ;; esac
  expect_out "Exit status:"
  expect_out "  3  data or resource error"
  cp "$tmp/out" "$tmp/help_$cmd"
  expect_status 0 "$bin" help "$cmd"
  cmp -s "$tmp/out" "$tmp/help_$cmd" && ok || fail "'galleyc help $cmd' differs from '$cmd --help'"
  expect_status 0 "$bin" "$cmd" some/file -h
  cmp -s "$tmp/out" "$tmp/help_$cmd" && ok || fail "'galleyc $cmd FILE -h' differs from '$cmd --help'"
done
grep -q -- '--dot' "$tmp/help_explain" && ok || fail "explain --help lacks --dot"
grep -q -- '--print' "$tmp/help_run" && ok || fail "run --help lacks --print"
grep -q -- '--print' "$tmp/help_explain" && fail "explain --help lists run's --print" || ok
grep -q -- '--header' "$tmp/help_compile" && ok || fail "compile --help lacks --header"
grep -q -- '--stats' "$tmp/help_info" && ok || fail "info --help lacks --stats"
expect_status 2 "$bin" frobnicate --help
expect_err "galleyc: error: unknown command 'frobnicate'"
expect_status 2 "$bin" help frobnicate

# every option in --help (and in each command's help) is documented in
# the man page
"$bin" --help >"$tmp/help_all"
cat "$tmp"/help_* | grep -oE -- '(^|[ ,\[])--?[a-z][a-z-]*' | sed 's/^[ ,[]//' | sort -u >"$tmp/opts"
[ -s "$tmp/opts" ] || fail "no options found in --help"
while read -r opt; do
  esc=$(printf '%s' "$opt" | sed 's/-/\\\\-/g')
  if grep -q -- "$esc" "$src/man/galleyc.1"; then ok; else fail "option $opt of --help is not in man/galleyc.1"; fi
done <"$tmp/opts"
# the exit statuses of --help are the man page's
for st in 0 1 2 3 4; do
  grep -q "^  $st  " "$tmp/help_all" && ok || fail "--help does not list exit status $st"
  grep -qx ".B $st" "$src/man/galleyc.1" && ok || fail "galleyc.1 does not list exit status $st"
done

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
case $(head -n 1 "$tmp/err") in "galleyc: error: $tmp/missing.mtx: cannot open"*) ok ;; *) fail "missing file message: $(cat "$tmp/err")" ;; esac
expect_status 3 "$bin" convert "$small" "$tmp/no/such/dir/x.tns"
expect_status 3 "$bin" convert "$small" "$tmp/x.mtx"
expect_status 3 "$bin" info "$small" --format=dense,list
expect_status 3 "$bin" info "$small" --format=dense,list,cube

# usage errors: exit 2
expect_status 2 "$bin"
expect_status 2 "$bin" frobnicate
expect_err "galleyc: error: unknown command 'frobnicate'"
expect_status 2 "$bin" info
expect_status 2 "$bin" info "$small" --bogus
expect_err "galleyc: error: unknown option '--bogus'"
# a misspelt option: the nearest of the command's own options
expect_status 2 "$bin" info "$small" --stat
expect_err "galleyc: error: unknown option '--stat' (did you mean '--stats'?)"
expect_status 2 "$bin" run prog.tin --planer=simple
expect_err "galleyc: error: unknown option '--planer=simple' (did you mean '--planner'?)"
expect_status 2 "$bin" explain prog.tin --jsn
expect_err "galleyc: error: unknown option '--jsn' (did you mean '--json'?)"
expect_status 2 "$bin" compile prog.tin --headr x.h
expect_err "galleyc: error: unknown option '--headr' (did you mean '--header'?)"
expect_status 2 "$bin" compile prog.tin
expect_err "galleyc: error: compile needs -o OUT.c"
expect_status 2 "$bin" run

# explain --dot: a well-formed Graphviz digraph of the physical plan,
# rendered by dot when graphviz is installed
cat >"$tmp/mv.tin" <<'EOF'
input A[i, j], x[j]
y[i] = A[i, j] * x[j]
n = sum(i: y[i])
output y, n
EOF
printf '1 1 2\n1 3 1\n3 2 -1\n' >"$tmp/A.tns"
printf '1 1\n2 4\n3 0.5\n' >"$tmp/x.tns"
for extra in --planner=cost --analyze --planner=simple; do
  expect_status 0 "$bin" explain "$tmp/mv.tin" A="$tmp/A.tns" x="$tmp/x.tns" --dot "$extra"
  dot_out=$tmp/plan$extra.dot
  cp "$tmp/out" "$dot_out"
  [ "$(head -n 1 "$dot_out")" = "digraph \"$tmp/mv.tin\" {" ] && ok || fail "--dot $extra: first line: $(head -n 1 "$dot_out")"
  [ "$(tail -n 1 "$dot_out")" = "}" ] && ok || fail "--dot $extra: last line: $(tail -n 1 "$dot_out")"
  # one pair of braces, quotes in pairs, every edge joins declared nodes
  awk '{ o += gsub(/[{]/, "{"); c += gsub(/[}]/, "}"); line = $0; gsub(/\\./, "", line); q += gsub(/"/, "", line) }
       END { exit !(o == 1 && c == 1 && q % 2 == 0) }' "$dot_out" && ok || fail "--dot $extra: unbalanced: $(cat "$dot_out")"
  awk '$2 == "[shape=box," { node[$1] = 1 }
       $2 == "->" { e++; to = $3; sub(/;$/, "", to); if (!($1 in node) || !(to in node)) bad++ }
       END { exit !(e >= 3 && !bad) }' "$dot_out" && ok || fail "--dot $extra: edges: $(cat "$dot_out")"
  grep -qF '  in0 [shape=box, label="input A\n3 x 3, dense:0,list:1\nnnz 3"];' "$dot_out" && ok || fail "--dot $extra: input A: $(cat "$dot_out")"
  grep -qF '  in0 -> q0 [label="i::it,j::it"];' "$dot_out" && ok || fail "--dot $extra: edge A -> y: $(cat "$dot_out")"
  [ "$(grep -c 'peripheries=2' "$dot_out")" -eq 2 ] && ok || fail "--dot $extra: outputs not marked: $(cat "$dot_out")"
  if command -v dot >/dev/null 2>&1; then
    if dot -Tsvg "$dot_out" >"$tmp/plan.svg" 2>"$tmp/dot.err" && grep -q '<svg' "$tmp/plan.svg" &&
       [ ! -s "$tmp/dot.err" ]; then ok; else fail "dot -Tsvg of --dot $extra: $(cat "$tmp/dot.err")"; fi
  fi
done
command -v dot >/dev/null 2>&1 || echo "test_cli: dot (graphviz) is not installed: --dot not rendered"
grep -q 'est nnz 2' "$tmp/plan--planner=cost.dot" && ok || fail "--dot: no estimate: $(cat "$tmp/plan--planner=cost.dot")"
grep -q 'real nnz 2, ' "$tmp/plan--analyze.dot" && ok || fail "--dot --analyze: no real nnz: $(cat "$tmp/plan--analyze.dot")"
grep -q 'est nnz' "$tmp/plan--planner=simple.dot" && fail "--dot with the simple planner has estimates" || ok
# a Gustavson plan names its random-write workspace (west0067: A*A; on
# karate, 60% full, the result is dense and accumulates in place)
printf 'input A[i, j]\nC[i, k] = sum(j: A[i, j] * A[j, k])\n' >"$tmp/sq.tin"
west=${GALLEY_DATA_DIR:-$src/../shared/data}/matrices/west0067.mtx
if [ -f "$west" ]; then
  expect_status 0 "$bin" explain "$tmp/sq.tin" A="$west" --dot
  grep -qF 'loops i:lead, j:lead, k:lead\nscatter through a bytemap workspace' "$tmp/out" && ok ||
    fail "--dot: no scatter workspace: $(cat "$tmp/out")"
fi
expect_status 3 "$bin" explain "$tmp/mv.tin" A="$tmp/A.tns" --dot
expect_err_has "input 'x'"
[ -s "$tmp/out" ] && fail "explain --dot unbound wrote to stdout" || ok
expect_status 2 "$bin" explain "$tmp/mv.tin" A="$tmp/A.tns" x="$tmp/x.tns" --dot --json
expect_err "galleyc: error: --json, --dot and --c cannot be combined"
expect_status 2 "$bin" explain "$tmp/mv.tin" A="$tmp/A.tns" x="$tmp/x.tns" --dot --c
expect_err "galleyc: error: --json, --dot and --c cannot be combined"
# explain --c: the kernels' C source, which defines the plan's kernel
expect_status 0 "$bin" explain "$tmp/mv.tin" A="$tmp/A.tns" x="$tmp/x.tns" --c
grep -q '^int galley_q0(const galley_kernel_args \*a) {$' "$tmp/out" && ok || fail "explain --c: no kernel: $(head -c 300 "$tmp/out")"
expect_status 3 "$bin" explain "$tmp/mv.tin" A="$tmp/A.tns" --c
expect_err_has "input 'x'"
expect_status 2 "$bin" run "$tmp/mv.tin" A="$tmp/A.tns" x="$tmp/x.tns" --dot
expect_err "galleyc: error: unknown option '--dot'"

# ---- every error message has one of the two forms of tin.md section 7:
# "galleyc: error: ..." or "FILE:LINE[:COL]: error: ..." (binding,
# resource and file errors included), and a failing command prints one ----
printf 'input A[i, j], x[j]\ny[i] = A[i, j] * x[j]\n' >"$tmp/ef.tin"
printf 'input A[i, j]\nB[i] = A[i, j] + nosuch\n' >"$tmp/ef_bad.tin"
printf '1 1 1\n2 oops\n' >"$tmp/ef_bad.tns"
printf '# dims: 3\n1 1\n' >"$tmp/ef_x.tns"
printf '# dims: 3 3\n1 1 1\n' >"$tmp/ef_A.tns"
: >"$tmp/ef_file"
form_check() { # STATUS CMD...: exits STATUS; every error line has a form
  expect_status "$@"
  [ -s "$tmp/err" ] && ok || fail "'$*' printed no message"
  if grep -i 'error' "$tmp/err" | grep -vqE '^(galleyc: error: |[^ :][^:]*:[0-9]+(:[0-9]+)?: error: )'; then
    fail "'$*': an error message without its form: $(grep -i error "$tmp/err" | head -n 1)"
  else ok; fi
  head -n 1 "$tmp/err" | grep -qE '^(galleyc: error: |[^ :][^:]*:[0-9]+(:[0-9]+)?: error: )' && ok ||
    fail "'$*': first line without the form: $(head -n 1 "$tmp/err")"
}
form_check 2 "$bin" run "$tmp/ef.tin" --nope
form_check 2 "$bin" run "$tmp/ef.tin" Q="$tmp/ef_x.tns"
form_check 2 "$bin" run "$tmp/ef.tin" -o --print
form_check 1 "$bin" run "$tmp/ef_bad.tin" A="$tmp/ef_A.tns"
form_check 3 "$bin" run "$tmp/nosuch.tin"
form_check 3 "$bin" run "$tmp/ef.tin" A="$tmp/ef_A.tns"
form_check 3 "$bin" run "$tmp/ef.tin" A="$tmp/ef_A.tns" x="$tmp/ef_bad.tns"
form_check 3 "$bin" run "$tmp/ef.tin" A="$tmp/ef_A.tns" x="$tmp/nosuch.tns"
form_check 3 "$bin" run "$tmp/ef.tin" A="$tmp/ef_x.tns" x="$tmp/ef_x.tns"
form_check 3 "$bin" run "$tmp/ef.tin" A="$tmp/ef_A.tns" x="$tmp/ef_x.tns" -o "$tmp/ef_file/sub"
form_check 3 "$bin" info "$tmp/nosuch.mtx"
form_check 3 "$bin" info "$tmp/ef_bad.tns"
form_check 3 "$bin" info "$tmp/ef_x.tns" --format=dense,list
form_check 3 "$bin" convert "$tmp/ef_x.tns" "$tmp/ef.unknown"
form_check 3 "$bin" convert "$tmp/ef_A.tns" "$tmp/nosuch/dir/A.tns"
form_check 3 "$bin" compile "$tmp/ef.tin" -o "$tmp/ef.c" A="$tmp/ef_A.tns" --prefix 9x
form_check 2 "$bin" explain "$tmp/ef.tin" --json --dot

# explain's notes: why absent entries are looked up, what is assumed
# finite, and a re-plan when the assumption fails at run time (issue 12)
printf 'input A[i, j], r[i]\nx[i] = exp(r[i])\ny[j] = sum(i: A[i, j] * x[i])\noutput y\n' >"$tmp/notes.tin"
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n2 3 2\n' >"$tmp/A3.mtx"
printf '# dims: 3\n1 1000\n2 1\n' >"$tmp/rbig.tns"
printf '# dims: 3\n1 1\n2 1\n' >"$tmp/rsmall.tns"
expect_status 0 "$bin" explain "$tmp/notes.tin" A="$tmp/A3.mtx" r="$tmp/rsmall.tns"
expect_out "note: x is finite by value ranges: its values are [1, 2.71828]"
printf 'input A[i, j], r[i]\nx[i] = exp(r[i] * r[i])\ny[j] = sum(i: A[i, j] * x[i])\noutput y\n' >"$tmp/notes2.tin"
expect_status 0 "$bin" explain "$tmp/notes2.tin" A="$tmp/A3.mtx" r="$tmp/rbig.tns"
expect_out "note: x is planned as finite (not provable from the program): a run checks it and plans again if it is not"
expect_status 0 "$bin" explain "$tmp/notes.tin" A="$tmp/A3.mtx" r="$tmp/rbig.tns" --analyze
expect_out "analyze: re-planned: query 'x' was planned as finite but holds an infinity or a NaN"
# x's values as measured (adaptive planning feeds them back, widened to
# powers of 2), not all the doubles exp may give
expect_out "note: y, loop i (union): _t1's absent entries cannot be skipped: x may hold inf or NaN (0 * inf is NaN; x's values: [1, 16] or +inf)"
printf 'input A[i, j]\nB[i, j] = A[i, j] / 0\n' >"$tmp/nanfill.tin"
expect_status 0 "$bin" explain "$tmp/nanfill.tin" A="$tmp/A3.mtx"
expect_out "note: B's fill is NaN: every entry it does not store is NaN"
# the simple planner assumes finiteness too (A^T x stays linear in A's
# entries) and plans again when a run finds an inf; exp(r * r) is not
# provably finite from r's range
expect_status 0 "$bin" explain "$tmp/notes2.tin" A="$tmp/A3.mtx" r="$tmp/rbig.tns" --planner=simple
expect_out "note: x is planned as finite (not provable from the program): a run checks it and plans again if it is not"
expect_status 0 "$bin" explain "$tmp/notes2.tin" A="$tmp/A3.mtx" r="$tmp/rbig.tns" --planner=simple --analyze
expect_out "analyze: re-planned: query 'x' was planned as finite but holds an infinity or a NaN"
expect_out "note: y, loop j (dense): _t1's absent entries cannot be skipped: x may hold inf or NaN (0 * inf is NaN; x's values: [1, 1.79769e+308] or +inf)"

echo "test_cli: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
