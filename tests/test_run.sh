#!/bin/sh
# test_run.sh -- `galleyc run` and `galleyc explain` end to end: result files
# byte for byte, -o, --print, scalar results, several outputs, and every
# error case with its exact message, exit status, and no files written.
set -u
bin=${GALLEY_BUILDDIR:-.}/galleyc
. "${GALLEY_TEST_SRCDIR:-tests}/shlib.sh"

# ---- data and program ----
cat >"$tmp/A.tns" <<'EOF'
1 1 2
1 3 1
3 2 -1
EOF
cat >"$tmp/x.tns" <<'EOF'
1 1
2 4
3 0.5
EOF
printf '# dims: 4\n1 1\n' >"$tmp/x4.tns"
prog=$tmp/mv.tin
cat >"$prog" <<'EOF'
input A[i, j], x[j]
y[i] = A[i, j] * x[j]
n = sum(i: y[i])
output y, n
EOF
# y = [2*1 + 1*0.5, 0, -1*4] = [2.5, 0, -4]; n = -1.5
y_text='# dims: 3
# fill: 0
1 2.5
3 -4'
n_text='# dims:
# fill: 0
-1.5'

# ---- run: files in the current directory, then in -o DIR ----
mkdir "$tmp/cwd" "$tmp/o"
expect_status 0 sh -c "cd '$tmp/cwd' && '$bin' run '$prog' A='$tmp/A.tns' x='$tmp/x.tns'"
expect_file "$tmp/cwd/y.tns" "$y_text"
expect_file "$tmp/cwd/n.tns" "$n_text"
expect_status 0 "$bin" run "$prog" x="$tmp/x.tns" -o "$tmp/o" A="$tmp/A.tns"
expect_file "$tmp/o/y.tns" "$y_text"
expect_file "$tmp/o/n.tns" "$n_text"
[ "$(ls "$tmp/o" | wc -l)" -eq 2 ] && ok || fail "-o wrote other files: $(ls "$tmp/o")"

# ---- --print: each output preceded by '# output: NAME' ----
expect_status 0 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --print
expect_file "$tmp/out" "# output: y
$y_text
# output: n
$n_text"

# one output: exactly the file's text; fill of exp(A) is 1
cat >"$tmp/exp.tin" <<'EOF'
input A[i, j]
E[i, j] = exp(A[i, j]) * 0 + 2   # 2 everywhere: only the headers
t = sum(i, j: A[i, j])
output E
EOF
mkdir "$tmp/e"
expect_status 0 "$bin" run "$tmp/exp.tin" A="$tmp/A.tns" --print -o "$tmp/e"
expect_file "$tmp/out" '# dims: 3 3
# fill: 2'
expect_empty_dir "$tmp/e"

# a scalar output, and a program with a scalar input bound to a .tns scalar
printf '# dims:\n2.5\n' >"$tmp/alpha.tns"
cat >"$tmp/sc.tin" <<'EOF'
input alpha
input x[i]
s = alpha * sum(i: x[i])
EOF
expect_status 0 "$bin" run "$tmp/sc.tin" alpha="$tmp/alpha.tns" x="$tmp/x.tns" -o "$tmp/o"
expect_file "$tmp/o/s.tns" '# dims:
# fill: 0
13.75'

# ---- errors: exact messages, exit status, nothing written ----
mkdir "$tmp/none"
cd "$tmp/none" || exit 1

# a program error: every diagnostic with its source line and caret, exit 1
cat >"$tmp/bad.tin" <<'EOF'
input A[i, j]
B[i] = A[i, j] + foo
EOF
expect_status 1 "$bin" run "$tmp/bad.tin" A="$tmp/A.tns"
case $(head -n 1 "$tmp/err") in "$tmp/bad.tin:2:18: error: "*) ok ;; *) fail "program error: $(cat "$tmp/err")" ;; esac
[ "$(sed -n 2p "$tmp/err")" = "B[i] = A[i, j] + foo" ] && ok || fail "no source line: $(cat "$tmp/err")"
[ "$(sed -n 3p "$tmp/err")" = "                 ^" ] && ok || fail "no caret: $(cat "$tmp/err")"
expect_empty_dir "$tmp/none"

# an unreadable program file
expect_status 3 "$bin" run "$tmp/missing.tin"
expect_err "galleyc: error: $tmp/missing.tin: cannot open: No such file or directory"

# a declared input left unbound
expect_status 3 "$bin" run "$prog" A="$tmp/A.tns"
expect_err "galleyc: error: input 'x' (declared at $prog:1:16) is not bound: add x=FILE"
expect_empty_dir "$tmp/none"

# a binding for a name the program does not declare: usage error
expect_status 2 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" Z="$tmp/x.tns"
expect_err "galleyc: error: 'Z' is not an input of the program (its inputs are A, x)"
expect_status 2 "$bin" run "$prog" A="$tmp/A.tns" xx="$tmp/x.tns"
expect_err "galleyc: error: 'xx' is not an input of the program (did you mean 'x'? its inputs are A, x)"
expect_status 2 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" A="$tmp/A.tns"
expect_err "galleyc: error: input 'A' is bound twice"
expect_status 2 "$bin" run "$prog" A= x="$tmp/x.tns"
expect_err "galleyc: error: bad binding 'A=': expected NAME=FILE"
expect_status 2 "$bin" run
expect_err "galleyc: error: missing PROG.tin"
expect_status 2 "$bin" run "$prog" -o
expect_err "galleyc: error: option '-o' needs a directory"
# an option where a value is due is refused, not taken as a name
expect_status 2 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" -o --print
expect_err "galleyc: error: option '-o' needs a directory, not the option '--print'"
[ ! -e ./--print ] && ok || fail "-o --print made a directory named --print"
expect_status 2 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --cache-dir -v
expect_err "galleyc: error: option '--cache-dir' needs a value, not the option '-v'"
expect_status 2 "$bin" run "$prog" --bogus
expect_err "galleyc: error: unknown option '--bogus'"
expect_empty_dir "$tmp/none"

# a bound tensor of the wrong order
expect_status 3 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/A.tns"
expect_err "galleyc: error: x=$tmp/A.tns: input 'x' is declared with 1 mode (at $prog:1:16) but the bound tensor has 2"
expect_empty_dir "$tmp/none"

# index sizes that disagree: located in the program, with the source line
expect_status 3 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x4.tns"
expect_err "$prog:2:18: error: index 'j' has size 4 here (mode 0 of 'x') but size 3 at 2:8 (mode 1 of 'A')"
[ "$(sed -n 2p "$tmp/err")" = "y[i] = A[i, j] * x[j]" ] && ok || fail "no source line: $(cat "$tmp/err")"
[ "$(sed -n 3p "$tmp/err")" = "                 ^" ] && ok || fail "no caret: $(cat "$tmp/err")"
expect_empty_dir "$tmp/none"

# an unreadable or malformed data file
expect_status 3 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/nosuch.tns"
expect_err "galleyc: error: $tmp/nosuch.tns: cannot open: No such file or directory"
printf '1 1 2\n1 x\n' >"$tmp/bad.tns"
expect_status 3 "$bin" run "$prog" A="$tmp/bad.tns" x="$tmp/x.tns"
case $(head -n 1 "$tmp/err") in "$tmp/bad.tns:2: error: "*) ok ;; *) fail "malformed file: $(cat "$tmp/err")" ;; esac
expect_empty_dir "$tmp/none"

# an output directory that does not exist is made, parents too
expect_status 0 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" -o "$tmp/no/such/dir"
[ -f "$tmp/no/such/dir/y.tns" ] && ok || fail "-o did not make the missing directories"
# one that cannot be made (a file is in the way): data error, nothing written
: >"$tmp/afile"
expect_status 3 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" -o "$tmp/afile/sub"
expect_err "galleyc: error: cannot make the output directory '$tmp/afile/sub': Not a directory"
expect_empty_dir "$tmp/none"

# ---- explain: the input plan; bindings are optional ----
expect_status 0 "$bin" explain "$prog"
expect_file "$tmp/out" 'input plan:
Query(y[i], Agg(+, j, Map(*, A[i,j], x[j])))
Query(n, Agg(+, i, Alias(y[i])))
Outputs(y, n)'
expect_status 0 "$bin" explain "$prog" A="$tmp/A.tns"
[ "$(head -n 1 "$tmp/out")" = "input plan:" ] && ok || fail "explain heading: $(cat "$tmp/out")"
expect_status 1 "$bin" explain "$tmp/bad.tin"
expect_status 1 "$bin" explain "$tmp/bad.tin" --json
expect_status 3 "$bin" explain "$prog" x="$tmp/A.tns"
expect_status 2 "$bin" compile "$prog"
expect_empty_dir "$tmp/none"
# with every input bound: also the logical and physical plans, one query
# a line, in that order, each query with its estimates
expect_status 0 "$bin" explain "$prog" A="$tmp/A.tns" x="$tmp/x.tns"
[ "$(grep -n -e '^input plan:$' -e '^logical plan:$' -e '^physical plan:$' "$tmp/out" | cut -d: -f1 | tr '\n' ' ')" = "1 5 9 " ] &&
  ok || fail "explain: headings: $(cat "$tmp/out")"
[ "$(grep -c '^Query(' "$tmp/out")" -ge 6 ] && ok || fail "explain: queries missing: $(cat "$tmp/out")"
grep -q '::it' "$tmp/out" && ok || fail "explain: no protocols in the physical plan: $(cat "$tmp/out")"
# logical lines end in "  est N  cost C", physical ones in "  est N"
[ "$(sed -n '6,7p' "$tmp/out" | grep -c '^Query(.*)  est [0-9.e+]*  cost [0-9.e+]*$')" -eq 2 ] &&
  ok || fail "explain: logical estimates: $(cat "$tmp/out")"
[ "$(sed -n '10,$p' "$tmp/out" | grep -c '^Query(.*, fill [^ ]*)  est [0-9.e+]*$')" -eq 2 ] &&
  ok || fail "explain: physical estimates: $(cat "$tmp/out")"
# how each query's outermost loop is split into blocks for the threads:
# A's 3 rows and 3 entries are 6 units of work (one block); n's loop walks
# y, which only the run makes
expect_status 0 "$bin" explain "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --threads=3
[ "$(sed -n '/^partition:/,/^  n:/p' "$tmp/out")" = 'partition: each outermost loop in blocks of about 16384 units of work, run by up to 3 threads
  y: loop i over [0, 3): 1 block by the entries of A (6 units) on 1 thread
  n: loop i over [0, 3): blocks counted at run time, from y' ] &&
  ok || fail "explain: partition: $(cat "$tmp/out")"
# the simple planner: no logical plan, no estimates
expect_status 0 "$bin" explain "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --planner=simple
grep -qx '(none: the simple planner makes no logical plan)' "$tmp/out" && ok || fail "explain simple: $(cat "$tmp/out")"
grep -q '  est ' "$tmp/out" && fail "explain simple: estimates: $(cat "$tmp/out")" || ok

# ---- explain --analyze: real nnz, time and q-error per physical query ----
# row_field NAME COLUMN: a field of NAME's row of the analyze table
row_field() { sed -n '/^analyze: /,$p' "$tmp/out" | awk -v q="$1" -v c="$2" '$1 == q { print $c }'; }
for opts in "" "--backend=reference" "--planner=simple" "--estimator=uniform --search=exact"; do
  # shellcheck disable=SC2086
  expect_status 0 "$bin" explain "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --analyze $opts
  grep -q '^analyze: backend [a-z]*, ' "$tmp/out" && ok || fail "explain --analyze $opts: no analyze line: $(cat "$tmp/out")"
  # y = [2.5, 0, -4] has 2 non-fill entries, the scalar n one
  [ "$(row_field y 3)" = 2 ] && ok || fail "explain --analyze $opts: real nnz of y: $(cat "$tmp/out")"
  [ "$(row_field n 3)" = 1 ] && ok || fail "explain --analyze $opts: real nnz of n: $(cat "$tmp/out")"
done
expect_status 0 "$bin" explain "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --analyze
# the q-error is max(e/r, r/e) with e = max(est, 1), r = max(real, 1)
qe=$(row_field y 2 | awk '{ e = $1 < 1 ? 1 : $1; r = 2; q = e > r ? e / r : r / e; printf "%.3g", q }')
[ "$(row_field y 6)" = "$qe" ] && ok || fail "explain --analyze: q-error of y is not $qe: $(cat "$tmp/out")"
row_field y 4 | grep -qE '^[0-9]+\.[0-9]{3}$' && [ "$(row_field y 5)" = ms ] && ok ||
  fail "explain --analyze: time of y: $(cat "$tmp/out")"
# the simple planner estimates nothing: no q-error
expect_status 0 "$bin" explain "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --analyze --planner=simple
[ "$(row_field y 2)/$(row_field y 6)" = "-/-" ] && ok || fail "explain --analyze simple: $(cat "$tmp/out")"
# errors keep their exit codes, and print nothing on stdout
expect_status 3 "$bin" explain "$prog" A="$tmp/A.tns" --analyze
expect_err "galleyc: error: input 'x' (declared at $prog:1:16) is not bound: add x=FILE"
[ -s "$tmp/out" ] && fail "explain --analyze unbound: stdout: $(cat "$tmp/out")" || ok
expect_status 3 "$bin" explain "$prog" A="$tmp/A.tns" --analyze --json
[ -s "$tmp/out" ] && fail "explain --analyze --json unbound: stdout: $(cat "$tmp/out")" || ok
expect_status 3 "$bin" explain "$prog" A="$tmp/A.tns" x="$tmp/x4.tns" --analyze
expect_status 2 "$bin" explain "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --analyze --backend=gcc
expect_err "galleyc: error: unknown backend 'gcc' (expected tcc, clang or reference)"
expect_status 2 "$bin" explain "$prog" --cache-dir
expect_err "galleyc: error: option '--cache-dir' needs a value"
expect_status 2 "$bin" explain "$prog" --print
expect_err "galleyc: error: unknown option '--print'"
expect_status 2 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --analyze
expect_err "galleyc: error: unknown option '--analyze'"

# ---- explain --json: valid JSON with the same information ----
py=/usr/bin/python3
# json_check PYTHON-EXPR...: each must hold for d = the JSON in $tmp/out
json_check() {
  if "$py" -c 'import json, sys
d = json.load(open(sys.argv[1]))
for e in sys.argv[2:]:
    if not eval(e):
        sys.exit("does not hold: " + e)' "$tmp/out" "$@" 2>"$tmp/pyerr"; then ok; else
    fail "explain --json: $(cat "$tmp/pyerr")"; sed 's/^/  /' "$tmp/out"; fi
}
if [ -x "$py" ]; then
  expect_status 0 "$bin" explain "$prog" --json
  json_check 'd["input_plan"].startswith("Query(y[i], ")' 'd["outputs"] == ["y", "n"]' \
    'd["logical_plan"] is None' 'd["physical_plan"] is None' '"analyze" not in d'
  expect_status 0 "$bin" explain "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --json
  json_check 'set(d) == {"program", "planner", "estimator", "search", "input_plan", "outputs", "logical_plan", "physical_plan"}' \
    'd["planner"] == "cost" and d["estimator"] == "chain" and d["search"] == "greedy"' \
    'all(set(q) == {"name", "plan", "est_nnz", "cost"} for q in d["logical_plan"])' \
    'all(set(q) == {"name", "plan", "transpose", "est_nnz", "cost", "partition"} for q in d["physical_plan"])' \
    '[q["name"] for q in d["physical_plan"]][-2:] == ["y", "n"]' \
    '{q["name"]: q["partition"] for q in d["physical_plan"]}["y"] == {"loop": "i", "lo": 0, "hi": 3, "combine": "disjoint", "blocks": 1, "measure": "entries", "of": "A", "times": None, "work": 6, "threads": 1}' \
    '{q["name"]: q["partition"] for q in d["physical_plan"]}["n"] == {"loop": "i", "lo": 0, "hi": 3, "combine": "reduce", "blocks": None, "from": "y"}' \
    'all(q["plan"].startswith("Query(") and q["plan"].endswith(")") and q["est_nnz"] >= 0 for q in d["logical_plan"] + d["physical_plan"])'
  expect_status 0 "$bin" explain "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --json --analyze
  json_check 'set(d["analyze"]) == {"backend", "plan_seconds", "compile_seconds", "exec_seconds"}' \
    '{q["name"]: q["nnz"] for q in d["physical_plan"]}["y"] == 2' \
    '{q["name"]: q["nnz"] for q in d["physical_plan"]}["n"] == 1' \
    'all(q["seconds"] >= 0 and q["stored"] >= q["nnz"] for q in d["physical_plan"])' \
    'all(abs(q["q_error"] - max(max(q["est_nnz"], 1) / max(q["nnz"], 1), max(q["nnz"], 1) / max(q["est_nnz"], 1))) < 1e-9 for q in d["physical_plan"])'
  expect_status 0 "$bin" explain "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --json --analyze --planner=simple --backend=reference
  json_check 'd["logical_plan"] == []' 'd["analyze"]["backend"] == "reference"' \
    'all(q["est_nnz"] is None and q["q_error"] is None for q in d["physical_plan"])' \
    '{q["name"]: q["nnz"] for q in d["physical_plan"]}["y"] == 2'
  # names are escaped: a program file called a"b\c.tin
  weird="$tmp/a\"b\\c.tin"
  cp "$prog" "$weird"
  expect_status 0 "$bin" explain "$weird" A="$tmp/A.tns" x="$tmp/x.tns" --json
  json_check 'd["program"].endswith("a\"b\\c.tin")'
else
  echo "test_run: no $py: --json not checked"
fi

# ---- the kernel path: every backend equals the reference evaluator ----
# Integer-valued data keeps sums exact whatever the order of additions.
cat >"$tmp/B.tns" <<'EOF'
# dims: 3 3
1 2 3
2 1 -2
2 3 1
3 3 4
EOF
cat >"$tmp/ops.tin" <<'EOF'
input A[i, j], B[i, j], x[j]
S[i, j] = A[i, j] + B[i, j]                 # a union
P[i, k] = sum(j: A[i, j] * B[j, k])         # a product of sparse matrices
M[i] = max(j: A[i, j] - 1)                  # fill -1: every row counts it
Q = prod(i: sum(j: B[i, j] * x[j]) + 1)
T[j, i] = A[i, j] * 2                       # a transposed result
output S, P, M, Q, T
EOF
backends="tcc"
if [ -n "${CLANG:-}" ] || command -v clang >/dev/null 2>&1; then backends="tcc clang"; fi
mkdir "$tmp/cache"
for p in mv exp sc ops; do
  case $p in
    mv) args="A=$tmp/A.tns x=$tmp/x.tns" ;;
    exp) args="A=$tmp/A.tns" ;;
    sc) args="alpha=$tmp/alpha.tns x=$tmp/x.tns" ;;
    ops) args="A=$tmp/A.tns B=$tmp/B.tns x=$tmp/x.tns" ;;
  esac
  # shellcheck disable=SC2086
  "$bin" run "$tmp/$p.tin" $args --print --backend=reference >"$tmp/ref.out" 2>"$tmp/err" ||
    fail "$p: reference run failed: $(cat "$tmp/err")"
  for b in $backends; do
    # shellcheck disable=SC2086
    expect_status 0 "$bin" run "$tmp/$p.tin" $args --print --backend=$b --cache-dir="$tmp/cache"
    if cmp -s "$tmp/out" "$tmp/ref.out"; then ok; else
      fail "$p: --backend=$b differs from the reference"; diff "$tmp/ref.out" "$tmp/out" | sed 's/^/  /'; fi
  done
done
# the default backend writes the same files as the reference
mkdir "$tmp/k" "$tmp/r"
expect_status 0 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" -o "$tmp/k"
expect_status 0 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" -o "$tmp/r" --backend reference
cmp -s "$tmp/k/y.tns" "$tmp/r/y.tns" && cmp -s "$tmp/k/n.tns" "$tmp/r/n.tns" && ok || fail "default backend files differ"
# clang kept its kernels in the cache directory
case $backends in *clang*)
  [ -n "$(ls -A "$tmp/cache")" ] && ok || fail "--cache-dir holds nothing after clang runs" ;;
esac

# the default backend's tiers on a triangle sum over a dense n x n matrix
# of ones (a cycle: n^3 products, nothing to factor out, estimated cost
# 3 n^3): at n = 100 (cost 3e6) tcc code runs while clang compiles in the
# background; once the cache holds clang's code, a new process runs it at
# once; at n = 700 (cost 1e9) one run on tcc code would outlast clang's
# compile several times over, so clang compiles first
ones() { awk -v n="$1" 'BEGIN { print "# dims: " n " " n; for (i = 1; i <= n; i++)
  for (j = 1; j <= n; j++) printf "%d %d 1\n", i, j }' >"$2"; }
ones 100 "$tmp/D100.tns"
printf 'input A[i, j]\nt = sum(i, j, k: A[i, j] * A[j, k] * A[i, k])\n' >"$tmp/dd.tin"
case $backends in *clang*)
  expect_status 0 "$bin" run "$tmp/dd.tin" A="$tmp/D100.tns" --print -v --cache-dir="$tmp/tiers"
  grep -q '^backend tcc: .* ms (clang compiling in the background)$' "$tmp/err" && ok ||
    fail "tiers: not tcc while clang compiles: $(head -1 "$tmp/err")"
  [ "$(tail -1 "$tmp/out")" = 1000000 ] && ok || fail "tiers: $(tail -1 "$tmp/out"), expected 1000000"
  expect_status 0 "$bin" run "$tmp/dd.tin" A="$tmp/D100.tns" --print --backend=clang --cache-dir="$tmp/tiers"
  expect_status 0 "$bin" run "$tmp/dd.tin" A="$tmp/D100.tns" --print -v --cache-dir="$tmp/tiers"
  grep -q '^backend clang: .* ms$' "$tmp/err" && ok || fail "tiers: cached clang code not used: $(head -1 "$tmp/err")"
  [ "$(tail -1 "$tmp/out")" = 1000000 ] && ok || fail "tiers: $(tail -1 "$tmp/out"), expected 1000000"
  ones 700 "$tmp/D.tns"
  expect_status 0 "$bin" run "$tmp/dd.tin" A="$tmp/D.tns" --print -v --cache-dir="$tmp/cache"
  grep -q '^backend clang: .* ms$' "$tmp/err" && ok || fail "costly plan: not clang: $(head -1 "$tmp/err")"
  [ "$(tail -1 "$tmp/out")" = 343000000 ] && ok || fail "costly plan: $(tail -1 "$tmp/out"), expected 343000000"
  # a cache directory that cannot be created (its parent is a file): clang
  # compiles in a private directory instead of failing
  : >"$tmp/notadir"
  expect_status 0 "$bin" run "$tmp/dd.tin" A="$tmp/D100.tns" --print --backend=clang --cache-dir="$tmp/notadir/cache"
  [ "$(tail -1 "$tmp/out")" = 1000000 ] && ok || fail "unwritable cache: $(tail -1 "$tmp/out"), expected 1000000"
  # an existing directory that takes no new file, even for root (chmod
  # does not stop root; /proc/self refuses every new file): the same
  if [ -d /proc/self ]; then
    expect_status 0 "$bin" run "$tmp/dd.tin" A="$tmp/D100.tns" --print --backend=clang --cache-dir=/proc/self
    [ "$(tail -1 "$tmp/out")" = 1000000 ] && ok || fail "read-only cache: $(tail -1 "$tmp/out"), expected 1000000"
  fi ;;
esac

# -v: the phases, then one line per query with its time and nnz
expect_status 0 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --print -v
grep -q '^backend tcc: planned in [0-9.]* ms, compiled in [0-9.]* ms, ran in [0-9.]* ms$' "$tmp/err" && ok ||
  fail "-v: no phase line: $(cat "$tmp/err")"
grep -q '^query y  *[0-9.]* ms  nnz 2  stored [0-9]*$' "$tmp/err" && ok || fail "-v: no line for y: $(cat "$tmp/err")"
grep -q '^query n  *[0-9.]* ms  nnz 1  stored 1$' "$tmp/err" && ok || fail "-v: no line for n: $(cat "$tmp/err")"
expect_file "$tmp/out" "# output: y
$y_text
# output: n
$n_text"
# -v accounts for all the time: each file read, each result written, and
# a total whose parts (and "other") add up to it
mkdir "$tmp/vdir"
expect_status 0 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" -o "$tmp/vdir" -v
grep -q "^read A=$tmp/A.tns in [0-9.]* ms (3 entries stored)\$" "$tmp/err" && ok || fail "-v: no read line: $(cat "$tmp/err")"
grep -q "^read x=$tmp/x.tns in [0-9.]* ms (3 entries stored)\$" "$tmp/err" && ok || fail "-v: no read line for x: $(cat "$tmp/err")"
grep -q "^wrote $tmp/vdir/y.tns in [0-9.]* ms\$" "$tmp/err" && ok || fail "-v: no write line: $(cat "$tmp/err")"
tail -n 1 "$tmp/err" | grep -qE '^total [0-9.]+ m?s: program [0-9.]+ m?s, read [0-9.]+ m?s, plan [0-9.]+ m?s, compile [0-9.]+ m?s, run [0-9.]+ m?s, check [0-9.]+ m?s, write [0-9.]+ m?s, other [0-9.]+ m?s$' &&
  ok || fail "-v: no total line: $(tail -n 1 "$tmp/err")"
# the parts and "other" add up to the total (in ms, to rounding)
tail -n 1 "$tmp/err" | awk '{ t = $2 * ($3 == "s:" ? 1000 : 1); s = 0
  for (k = 5; k <= NF; k += 3) { u = $(k + 1); v = $k * (u ~ /^s/ ? 1000 : 1); s += v }
  exit !(s > t - 0.01 && s < t + 0.01) }' && ok || fail "-v: the parts do not add up: $(tail -n 1 "$tmp/err")"
expect_status 0 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --print -v --backend=reference
grep -q '^backend reference: ran in [0-9.]* ms$' "$tmp/err" && ok || fail "-v reference: $(cat "$tmp/err")"
grep -q '^query y  *-  nnz 2  stored 2$' "$tmp/err" && ok || fail "-v reference: no line for y: $(cat "$tmp/err")"

# a progress line on a terminal once a run takes a second (script(1)
# gives the run a terminal); none when standard error is not a terminal,
# none with -q
awk 'BEGIN { print "# dims: 1500"; for (i = 1; i <= 1500; i++) print i, i / 7 }' >"$tmp/big.tns"
printf 'input x[i], y[j]\nP[i, j] = x[i] * y[j]\nQ[i, j] = x[i] / (y[j] + 1)\nR[i, j] = x[i] - y[j]\n' >"$tmp/big.tin"
if command -v script >/dev/null 2>&1; then
  mkdir "$tmp/pdir"
  # (the line shows after GALLEY_PROGRESS_AFTER seconds, here at the
  # first quarter-second tick, so a fast machine still sees one)
  GALLEY_PROGRESS_AFTER=0 script -qec "'$bin' run '$tmp/big.tin' x='$tmp/big.tns' y='$tmp/big.tns' -o '$tmp/pdir'" /dev/null >"$tmp/pty" 2>&1 </dev/null
  grep -q 'galleyc: [a-z].* ([0-9]*\.[0-9] s)' "$tmp/pty" && ok || fail "no progress line on a terminal: $(head -c 300 "$tmp/pty")"
  GALLEY_PROGRESS_AFTER=0 script -qec "'$bin' run '$tmp/big.tin' x='$tmp/big.tns' y='$tmp/big.tns' -o '$tmp/pdir' -q" /dev/null >"$tmp/pty" 2>&1 </dev/null
  grep -q ' s)' "$tmp/pty" && fail "a progress line with -q" || ok
fi
expect_status 0 "$bin" run "$tmp/big.tin" x="$tmp/big.tns" y="$tmp/big.tns" -o "$tmp/pdir"
[ ! -s "$tmp/err" ] && ok || fail "progress or warnings without a terminal: $(head -c 300 "$tmp/err")"

# a bad backend is a usage error; nothing is written
expect_status 2 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --backend=gcc
expect_err "galleyc: error: unknown backend 'gcc' (expected tcc, clang or reference)"
expect_status 2 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --backend
expect_err "galleyc: error: option '--backend' needs a value"
expect_status 2 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --cache-dir
expect_empty_dir "$tmp/none"

# every planner, estimator and search gives the same results
for opts in "--planner=simple" "--planner=cost --estimator=uniform" \
            "--planner=cost --estimator=chain --search=exact"; do
  # shellcheck disable=SC2086
  expect_status 0 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --print $opts
  expect_file "$tmp/out" "# output: y
$y_text
# output: n
$n_text"
done
expect_status 2 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --planner=magic
expect_err "galleyc: error: unknown planner 'magic' (expected cost or simple)"
expect_status 2 "$bin" explain "$prog" --estimator=exact
expect_err "galleyc: error: unknown estimator 'exact' (expected chain or uniform)"
expect_status 2 "$bin" run "$prog" A="$tmp/A.tns" x="$tmp/x.tns" --search=bfs
expect_err "galleyc: error: unknown search 'bfs' (expected greedy or exact)"

# the memory budget: a result over it is refused before it is allocated
# (dense) or while it grows (sparse), naming the query, and nothing is
# written (issue 12, issue 17: never an OOM kill); x[i] + y[j] is as
# large as the outer product (9e6 entries), not nnz(x) + nnz(y)
awk 'BEGIN { print "# dims: 3000"; for (i = 1; i <= 3000; i++) print i, i % 7 + 1 }' >"$tmp/v3k.tns"
printf 'input x[i], y[j]\nO[i, j] = x[i] + y[j]\n' >"$tmp/outer.tin"
mkdir "$tmp/mb"
expect_status 0 "$bin" explain "$tmp/outer.tin" x="$tmp/v3k.tns" y="$tmp/v3k.tns"
expect_out "Query(O[i,j], Map(+, x[i], y[j]))  est 9e+06"
for pl in cost simple; do
  expect_status 3 "$bin" run "$tmp/outer.tin" x="$tmp/v3k.tns" y="$tmp/v3k.tns" -o "$tmp/mb" --memory-budget=10M --planner=$pl
  expect_err_has "error: query 'O' needs "
  expect_err_has "over the memory budget of 1.05e+07 bytes"
  [ ! -e "$tmp/mb/O.tns" ] && ok || fail "--memory-budget ($pl): a result was written"
done
# at n = 1e5 the result is sparse (a dense one would not fit): refused
# before any kernel runs, by the entries it stores for sure (every value
# of x[i] + y[j] is positive), not while it grows (issue 17)
awk 'BEGIN { print "# dims: 100000"; for (i = 1; i <= 100000; i++) print i, i % 7 + 1 }' >"$tmp/v100k.tns"
for pl in cost simple; do
  expect_status 3 "$bin" run "$tmp/outer.tin" x="$tmp/v100k.tns" y="$tmp/v100k.tns" -o "$tmp/mb" --memory-budget=8G --planner=$pl -v
  expect_err_has "error: query 'O' needs "
  expect_err_has " bytes, over the memory budget of 8.59e+09"
  if grep -q "^query \|ran in" "$tmp/err"; then
    fail "outer sum at 1e5 ($pl): a kernel ran before the refusal"; else ok; fi
done
expect_status 0 "$bin" run "$tmp/outer.tin" x="$tmp/v3k.tns" y="$tmp/v3k.tns" -o "$tmp/mb" --memory-budget=1G
[ -s "$tmp/mb/O.tns" ] && ok || fail "--memory-budget=1G: no result"
# two results that each fit but not together: refused before any kernel
# runs (the plan's peak), not after the first was computed
printf 'input x[i], y[j]\nP[i, j] = x[i] * y[j]\nS[i, j] = x[i] + y[j]\noutput P, S\n' >"$tmp/two.tin"
for pl in cost simple; do
  expect_status 3 "$bin" run "$tmp/two.tin" x="$tmp/v3k.tns" y="$tmp/v3k.tns" -o "$tmp/mb" --memory-budget=100M --planner=$pl -v
  expect_err_has "bytes (1.44e+08 with the results alive at query 'S'), over the memory budget of 1.05e+08 bytes"
  if grep -q "^query \|ran in" "$tmp/err"; then
    fail "peak ($pl): a kernel ran before the refusal"; else ok; fi
done
expect_status 0 "$bin" run "$tmp/two.tin" x="$tmp/v3k.tns" y="$tmp/v3k.tns" -o "$tmp/mb" --memory-budget=200M
[ -s "$tmp/mb/P.tns" ] && [ -s "$tmp/mb/S.tns" ] && ok || fail "--memory-budget=200M: no results"
expect_status 2 "$bin" run "$tmp/outer.tin" x="$tmp/v3k.tns" y="$tmp/v3k.tns" --memory-budget=lots
expect_err_has "bad --memory-budget 'lots'"

echo "test_run: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
