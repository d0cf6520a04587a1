#!/bin/sh
# test_iterate.sh -- the iterative examples (examples/iterate/): PageRank
# with dangling nodes, Bellman-Ford shortest paths and BFS levels, each
# iterated to its fixed point from the C host loop (examples/iterate/
# iterate, through the context API) and from the shell loops through
# `galleyc run` (examples/pagerank.sh, examples/iterate/bellman_ford.sh
# and bfs.sh), on real graphs of ../shared/data.  Every answer is checked
# against an independent SciPy computation (tests/iterate_check.py:
# scipy.sparse.csgraph.shortest_path for the distances and levels, a numpy
# power iteration for the ranks), run here; skipped without SciPy.
set -u
[ -n "${TRACE:-}" ] && set -x
srcdir=${GALLEY_TEST_SRCDIR:-$(cd "$(dirname "$0")" && pwd)}
build=${GALLEY_BUILDDIR:-$srcdir/../build}
bin=$build/galleyc
host=$build/examples/iterate/iterate
ex=$srcdir/../examples
data=${GALLEY_DATA_DIR:-$srcdir/../../shared/data}/matrices
python=${PYTHON:-/usr/bin/python3}
# shellcheck source=tests/shlib.sh
. "$srcdir/shlib.sh" # sets tmp, ok, fail, passes, fails
if ! "$python" -c 'import scipy.sparse.csgraph' 2>/dev/null; then
  echo "test_iterate: skip: $python has no scipy"
  exit 77
fi
if [ ! -f "$data/as-22july06.mtx" ]; then
  echo "test_iterate: skip: $data not found (set GALLEY_DATA_DIR)"
  exit 77
fi
[ -x "$host" ] || { echo "test_iterate: no $host"; exit 1; }
# clang's kernels (the default backend compiles them in the background)
# go to a cache of this test's own
export GALLEY_CACHE_DIR="$tmp/cache"

# scipy ALGO GRAPH [SOURCE] RESULT: the result is to agree with SciPy's;
# the checks are collected and made at the end, by one Python process
: >"$tmp/checks"
scipy() { echo "$*" >>"$tmp/checks"; }
# iterate NAME [-w] ALGO GRAPH [SOURCE]: the C host loop writes
# $tmp/NAME.tns (its step lines, -t, in $tmp/NAME.out) and SciPy agrees
# with it
iterate() {
  name=$1 wait=; shift
  if [ "$1" = -w ]; then wait=-w; shift; fi
  if "$host" -t $wait -o "$tmp/$name.tns" "$@" >"$tmp/$name.out" 2>"$tmp/err"; then
    ok
    scipy "$(echo "$1" | sed "s/pagerank1/pagerank/")" "$2" ${3:+"$3"} "$tmp/$name.tns"
  else
    fail "iterate $*: $(cat "$tmp/err")"
  fi
}
# shell NAME SCRIPT ARGS...: a shell loop runs (output in $tmp/NAME.out)
shell() {
  name=$1 script=$2; shift 2
  if GALLEYC=$bin sh "$ex/$script" "$@" >"$tmp/$name.out" 2>"$tmp/err"; then ok; else
    fail "$script $*: $(cat "$tmp/err")"; return 1; fi
}

celegans=$data/celegansneural.mtx # weighted, directed, dangling nodes
polblogs=$data/polblogs.mtx       # directed, dangling nodes
as=$data/as-22july06.mtx          # 23k vertices, undirected, power law
pgp=$data/pgp-strong-2009.mtx.gz  # 40k vertices, directed, depth 27
cage8=$data/cage8.mtx             # real positive weights
ldbc=$data/ldbc-directed-example.mtx # 3 vertices unreachable from 1
power=$data/power.mtx             # a long-path grid

# ---- the C host loop ----
iterate pr_celegans -w pagerank "$celegans"
# -w: every step that reuses the plan runs clang's code (waited for)
if [ -n "${CLANG:-}" ] || command -v clang >/dev/null 2>&1; then
  [ "$(grep -c '^step .* reused clang ' "$tmp/pr_celegans.out")" -gt 10 ] &&
    [ "$(grep '^step .* reused ' "$tmp/pr_celegans.out" | grep -vc ' clang ')" -eq 0 ] && ok ||
    fail "pagerank -w: a step reused the plan without clang's code"
fi
iterate pr_as pagerank "$as"
iterate pr1_polblogs pagerank1 "$polblogs"
# after the first steps (the weights' format settles) every step reuses
# the plan and the kernels: no planning and no compiling per step
steps=$(grep -c '^step' "$tmp/pr_as.out")
reused=$(grep -c '^step .* reused' "$tmp/pr_as.out")
[ "$steps" -gt 20 ] && [ "$reused" -ge $((steps - 2)) ] && ok ||
  fail "pagerank on as-22july06: $reused of $steps steps reused the plan"
iterate bf_celegans bellman-ford "$celegans" 1
iterate bf_cage8 bellman-ford "$cage8" 5
iterate bf_ldbc bellman-ford "$ldbc" 1
iterate bf_as bellman-ford "$as" 1
iterate bfs_as bfs "$as" 1
iterate bfs_pgp bfs "$pgp" 1
iterate bfs_ldbc bfs "$ldbc" 1
grep -q '^bfs: 28 steps, depth 27$' "$tmp/bfs_pgp.out" && ok ||
  fail "bfs on pgp: $(tail -n 2 "$tmp/bfs_pgp.out")"
# the visited set is handed back (galley_program_bind_owned), so a
# step's visited = max(v, next) is written in place, at the new
# frontier's vertices only (-v says "(in place)"), whenever next stores
# at most a quarter of the 39796 vertices (a denser next runs the
# compiled kernel)
if "$host" -v bfs "$pgp" 1 >/dev/null 2>"$tmp/bfs_v.err"; then
  bad=$(awk '$1 == "query" && $2 == "next" { stored = $8 }
             $1 == "query" && $2 == "visited" {
               if (/\(in place\)/) inplace++
               else if (stored * 4 <= 39796) missed++ }
             END { print (inplace > 0 && missed == 0) ? 0 : 1 }' "$tmp/bfs_v.err")
  [ "$bad" = 0 ] && ok ||
    fail "bfs on pgp: a sparse frontier's visited set not updated in place"
else
  fail "bfs -v on pgp: $(tail -n 2 "$tmp/bfs_v.err")"
fi

# the step after one relaxation (224 reached vertices): a push plan, d's
# entries walked outermost and their rows of W scattered (O(the reached
# vertices' out-edges)), where the pull plan walks all of W with d looked
# up (O(nnz(W))); letting d lead the inner loop of the pull plan looked
# each of its entries up in every column of W (n x nnz(d): 40x slower)
if "$host" -n 1 -o "$tmp/d1.tns" bellman-ford "$as" 1 >/dev/null 2>"$tmp/err" &&
   "$bin" explain "$ex/iterate/bellman_ford_step.tin" W="$as" d="$tmp/d1.tns" >"$tmp/plan" 2>&1; then
  grep -q 'Map(+, d\[i::it\], W\[i::lu,j::it\]))), loops(i:lead, j:lead)' "$tmp/plan" && ok ||
    fail "Bellman-Ford's step with 224 reached vertices: $(grep '^Query(_t0' "$tmp/plan")"
else
  fail "Bellman-Ford's plan: $(cat "$tmp/err" "$tmp/plan")"
fi

# ---- the shell loops through galleyc run ----
if shell pr_sh pagerank.sh "$polblogs" 500 "$tmp/pr" 1e-10; then
  scipy pagerank "$polblogs" "$tmp/pr/r.tns"
fi
if shell bf_sh iterate/bellman_ford.sh "$celegans" 1 "$tmp/bf"; then
  scipy bellman-ford "$celegans" 1 "$tmp/bf/d.tns"
fi
if shell bf_ldbc_sh iterate/bellman_ford.sh "$ldbc" 1 "$tmp/bfl"; then
  scipy bellman-ford "$ldbc" 1 "$tmp/bfl/d.tns"
fi
if shell bfs_sh iterate/bfs.sh "$power" 1 "$tmp/bfs"; then
  scipy bfs "$power" 1 "$tmp/bfs/levels.tns"
fi
if shell bfs_ldbc_sh iterate/bfs.sh "$ldbc" 1 "$tmp/bfsl"; then
  scipy bfs "$ldbc" 1 "$tmp/bfsl/levels.tns"
fi

# ---- SciPy's answers ----
"$python" "$srcdir/iterate_check.py" - <"$tmp/checks" >"$tmp/check" 2>&1
while read -r verdict what; do
  if [ "$verdict" = ok ]; then ok; else fail "$verdict $what"; fi
done <"$tmp/check"
[ "$(grep -c '^ok ' "$tmp/check")" -eq "$(wc -l <"$tmp/checks")" ] ||
  fail "not every SciPy check passed"

# ---- the check can fail: one level off, one rank off ----
sed 's/^\(2 \)\([0-9]*\)$/\1 7\2/' "$tmp/bfs_as.tns" >"$tmp/wrong.tns"
if ! cmp -s "$tmp/bfs_as.tns" "$tmp/wrong.tns" &&
   ! "$python" "$srcdir/iterate_check.py" bfs "$as" 1 "$tmp/wrong.tns" >/dev/null 2>&1; then ok; else
  fail "iterate_check.py accepts a wrong level"; fi
awk '!/^#/ && !done { $2 = $2 * 1.001; done = 1 } { print }' "$tmp/pr_celegans.tns" >"$tmp/wrong.tns"
if ! "$python" "$srcdir/iterate_check.py" pagerank "$celegans" "$tmp/wrong.tns" >/dev/null 2>&1; then ok; else
  fail "iterate_check.py accepts a wrong rank"; fi

# ---- errors ----
# a negative cycle (2 -> 3 -> 2 weighs -1) reachable from vertex 1: both
# loops stop after n = 4 steps and say so, without a result
printf '%%%%MatrixMarket matrix coordinate real general\n4 4 4\n1 2 1\n2 3 -2\n3 2 1\n3 4 5\n' >"$tmp/negative.mtx"
expect_status 1 "$host" -o "$tmp/neg.tns" bellman-ford "$tmp/negative.mtx" 1
expect_err "iterate: a negative cycle is reachable from vertex 1: distances still improve after 4 steps"
[ ! -e "$tmp/neg.tns" ] && ok || fail "a result written despite the negative cycle"
expect_status 1 env GALLEYC="$bin" sh "$ex/iterate/bellman_ford.sh" "$tmp/negative.mtx" 1 "$tmp/neg"
expect_err "bellman_ford.sh: a negative cycle is reachable from vertex 1: distances still improve after 4 steps"
# -n stops early: not an error, the distances so far
expect_status 0 "$host" -n 2 bellman-ford "$tmp/negative.mtx" 1
expect_out "bellman-ford: stopped after 2 steps (-n), still improving"
expect_status 2 "$host"
expect_err_has "usage: iterate"
expect_status 2 "$host" dijkstra "$as"
expect_status 1 "$host" bfs "$as" 30000
expect_err "iterate: source 30000 is not a vertex of $as (1..22963)"
expect_status 1 "$host" bfs "$tmp/nowhere.mtx"
expect_err_has "nowhere.mtx"

echo "test_iterate: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
