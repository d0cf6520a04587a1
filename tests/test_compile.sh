#!/bin/sh
# test_compile.sh -- `galleyc compile` end to end.
#  - every examples/*.tin program, compiled without data (data-free plans)
#    and with sample data, builds warning-free with gcc, clang and tcc
#    (-Wall -Wextra -pedantic -Werror, no libgalley), and run on the
#    examples' data (other sizes than planned for) gives what `galleyc run`
#    gives;
#  - random programs of the differential generator (randprog.h: any level
#    formats, fills, user functions, several outputs) the same;
#  - a hand-written host builds tensors through the header's layout only
#    (32- and 64-bit CSR and CSC, lists) and compares with galleyc run;
#  - two programs, and one program twice, with prefixes link into one C
#    and one C++ program;
#  - bad inputs at the entry points get error codes and messages, never a
#    crash (this test also runs under ASan in the sanitizer build);
#  - command line errors are clear; examples/aot builds and runs.
set -u
bin=${GALLEY_BUILDDIR:-.}/galleyc
build=${GALLEY_BUILDDIR:-.}
src=${GALLEY_TEST_SRCDIR:-tests}/..
ex=$src/examples
exd=$ex/data
data=${GALLEY_DATA_DIR:-$src/../shared/data}
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "test_compile: no C compiler, skipped"; exit 77; }
. "${GALLEY_TEST_SRCDIR:-tests}/shlib.sh"
hostflags=${GALLEY_HOST_CFLAGS:-"-I$src/include"}
hostlibs=${GALLEY_HOST_LIBS:-"$build/libgalley.a -ltcc -lz -lm -ldl -lpthread"}
# the compilers every generated file must build with, warning-free
compilers=""
for c in gcc clang tcc; do command -v $c >/dev/null 2>&1 && compilers="$compilers $c"; done
strict="-std=c99 -Wall -Wextra -pedantic -Werror"

# agree A B: two result files hold the same tensor (test_examples.sh's
# comparison): the same dims, at every coordinate written in either the
# same value to 1e-9 relative (a missing entry is the fill), and when
# some coordinate is written in neither, the same fill.
agree() {
  awk '
    function special(s) { return s == "inf" || s == "-inf" || s == "nan" || s == "-nan" }
    function same(a, b,   d, m) {
      if (special(a) || special(b)) return a == b || (a ~ /nan/ && b ~ /nan/)
      d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); if ((b < 0 ? -b : b) > m) m = (b < 0 ? -b : b)
      return d <= 1e-9 * m + 1e-12 }
    FNR == 1 { f++ }
    /^# dims:/ { dims[f] = $0; if (f == 1) { full = 1; for (k = 3; k <= NF; k++) full *= $k }; next }
    /^# fill: / { fill[f] = $3; next }
    /^#/ { next }
    { c = ""; for (k = 1; k < NF; k++) c = c (k > 1 ? " " : "") $k
      v[f, c] = $NF; has[f, c] = 1; if (!(c in all)) { all[c] = 1; n++ } }
    END {
      if (dims[1] != dims[2]) { print "  dims differ: " dims[1] " / " dims[2]; exit 1 }
      for (c in all) {
        a = (1, c) in has ? v[1, c] : fill[1]; b = (2, c) in has ? v[2, c] : fill[2]
        if (!same(a, b)) { print "  at (" c "): " a " / " b; bad = 1 } }
      if (n < full && !same(fill[1], fill[2])) { print "  fills differ: " fill[1] " / " fill[2]; bad = 1 }
      exit bad }' "$1" "$2"
}

# strict_build DIR NAME: DIR/prog.c builds alone with every compiler
strict_build() {
  for c in $compilers; do
    if $c $strict -c "$1/prog.c" -o "$1/prog.$c.o" 2>"$tmp/ccerr"; then ok; else
      fail "$2: the generated C does not build warning-free with $c"; head -5 "$tmp/ccerr" | sed 's/^/  /'; fi
  done
}

# aot_case NAME PROG [COMPILE-ARGS...] -- NAME=FILE...: compile PROG with
# the arguments, build tests/aot_host.c with it, run it on the files and
# compare every output with `galleyc run` on the same files.
aot_case() {
  name=$1 prog=$2; shift 2
  d=$tmp/case/$name
  mkdir -p "$d/aot" "$d/run"
  cargs=""
  while [ $# -gt 0 ] && [ "$1" != -- ]; do cargs="$cargs $1"; shift; done
  [ $# -gt 0 ] && shift
  # shellcheck disable=SC2086
  if ! "$bin" compile "$prog" -o "$d/prog.c" --header "$d/prog.h" $cargs 2>"$tmp/err"; then
    fail "$name: galleyc compile: $(cat "$tmp/err")"; return 1; fi
  ok
  [ -n "${STRICT:-}" ] && strict_build "$d" "$name"
  # shellcheck disable=SC2086
  if ! $cc -I"$d" $hostflags "$src/tests/aot_host.c" "$d/prog.c" -o "$d/host" $hostlibs 2>"$tmp/ccerr"; then
    fail "$name: the host does not build"; head -5 "$tmp/ccerr" | sed 's/^/  /'; return 1; fi
  files=""
  for b; do files="$files ${b#*=}"; done
  # shellcheck disable=SC2086
  if ! "$d/host" ${HOSTARG:-} "$d/aot" $files >"$tmp/hout" 2>&1; then
    fail "$name: the compiled program failed: $(cat "$tmp/hout")"; return 1; fi
  ok
  if ! "$bin" run "$prog" "$@" -o "$d/run" -q 2>"$tmp/err"; then
    fail "$name: galleyc run: $(cat "$tmp/err")"; return 1; fi
  for f in "$d"/run/*.tns; do
    if agree "$f" "$d/aot/${f##*/}" >"$tmp/agree"; then ok; else
      fail "$name: the compiled program gives another ${f##*/}"; head -5 "$tmp/agree"; fi
  done
  [ -n "${THREADED:-}" ] && aot_threads "$d" "$name" "$files"
  return 0
}

# aot_threads DIR NAME FILES: the case's program built with blocks of 8
# work units (many blocks even on small data; a reduction's partial
# results then fold in another order than with the default blocks) and
# unset values poisoned, run through galley_aot_run_ex on 1, 2 and 7
# threads with the full input validation, and through a handle of 2 and
# 7 threads kept across three runs (galley_aot_run_threads): every
# output bitwise (as %.17g text) the one-thread run's, and that one
# agrees with the default run.
aot_threads() {
  # shellcheck disable=SC2086
  if ! $cc -DAOTRT_BLOCK_WORK=8 -DAOTRT_POISON_UNSET -DAOTRT_TRACE_SLICED -I"$1" $hostflags "$src/tests/aot_host.c" "$1/prog.c" -o "$1/host_t" $hostlibs 2>"$tmp/ccerr"; then
    fail "$2: the host with tiny blocks does not build"; head -5 "$tmp/ccerr" | sed 's/^/  /'; return 1; fi
  for n in 1 2 7; do
    mkdir -p "$1/t$n"
    # shellcheck disable=SC2086
    if ! "$1/host_t" ${HOSTARG:-} --threads $n --full "$1/t$n" $3 >"$tmp/hout" 2>&1; then
      fail "$2: $n threads: $(cat "$tmp/hout")"; continue; fi
    for f in "$1"/aot/*.tns; do
      if [ $n -eq 1 ]; then
        agree "$f" "$1/t1/${f##*/}" >"$tmp/agree" && ok || { fail "$2: tiny blocks give another ${f##*/}"; head -5 "$tmp/agree"; }
      else
        cmp -s "$1/t1/${f##*/}" "$1/t$n/${f##*/}" && ok || fail "$2: $n threads in tiny blocks give another ${f##*/} than one thread"
      fi
    done
  done
  # the same through a handle of threads kept across runs
  for n in 2 7; do
    mkdir -p "$1/p$n"
    # shellcheck disable=SC2086
    if ! "$1/host_t" ${HOSTARG:-} --pool $n "$1/p$n" $3 >"$tmp/hout" 2>&1; then
      fail "$2: a pool of $n threads: $(cat "$tmp/hout")"; continue; fi
    for f in "$1"/aot/*.tns; do
      if grep -q 'S_start' "$1/prog.c"; then
        # the sliced loop (only with a handle) sums a row in order, the
        # plain loop a row of 8+ entries in 4 lanes: bitwise across
        # thread counts, the plain loop's within rounding
        agree "$1/t1/${f##*/}" "$1/p$n/${f##*/}" >"$tmp/agree" && ok || { fail "$2: a pool of $n threads (sliced) gives another ${f##*/}"; head -5 "$tmp/agree"; }
        [ $n -eq 2 ] || { cmp -s "$1/p2/${f##*/}" "$1/p$n/${f##*/}" && ok || fail "$2: pools of 2 and $n threads give another ${f##*/}"; }
      else
        cmp -s "$1/t1/${f##*/}" "$1/p$n/${f##*/}" && ok || fail "$2: a pool of $n threads gives another ${f##*/} than one thread"
      fi
    done
  done
}

karate=$data/matrices/karate.mtx
tpch="F=$exd/tpch_F.tns L=$exd/tpch_L.tns S=$exd/tpch_S.tns P=$exd/tpch_P.tns"

# a square matrix that is not symmetric, and vectors for it and chain_A
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 5\n1 2 1\n2 1 2\n2 3 1.5\n3 1 1\n3 3 -2\n' >"$tmp/S.mtx"
printf '# dims: 3\n1 1.5\n2 -2\n3 4\n' >"$tmp/x3.tns"
printf '# dims: 2\n1 3\n2 0.5\n' >"$tmp/x2.tns"
# ---- every example, data-free (default formats) and strict builds ----
# (and every case also on threads: THREADED)
THREADED=1
STRICT=1
aot_case logistic "$ex/logistic.tin" -- X="$exd/X.mtx" theta="$exd/theta.tns"
aot_case logistic_grad "$ex/logistic_grad.tin" -- X="$exd/X.mtx" theta="$exd/theta.tns" y="$exd/y.tns"
aot_case chain "$ex/chain.tin" -- A="$exd/chain_A.mtx" B="$exd/chain_B.mtx" C="$exd/chain_C.mtx"
# als's data-free plan holds constants the program does not write, so
# it conservatively compiles its summed sizes in: planned for its data
aot_case als "$ex/als.tin" X="$exd/als_X.mtx" U="$exd/als_U.tns" V="$exd/als_V.tns" -- X="$exd/als_X.mtx" U="$exd/als_U.tns" V="$exd/als_V.tns"
aot_case noisyor "$ex/noisyor.tin" -- P="$exd/cascade_P.mtx" s="$exd/cascade_s.tns"
# shellcheck disable=SC2086
aot_case starjoin "$ex/starjoin.tin" -- $tpch w="$exd/tpch_w.tns" b="$exd/tpch_b.tns"
# shellcheck disable=SC2086
aot_case covariance "$ex/covariance.tin" -- $tpch
STRICT=
splatt=$data/tensors/library-tests/splatt_small.tns
ldbc=$data/matrices/ldbc-directed-example.mtx
if [ -f "$splatt" ] && [ -f "$ldbc" ]; then
  STRICT=1
  aot_case mttkrp "$ex/mttkrp.tin" -- T="$splatt" B="$exd/mttkrp_B.tns" C="$exd/mttkrp_C.tns"
  aot_case bellman_ford "$ex/bellman_ford.tin" -- W="$ldbc" d="$exd/sssp_d.tns"
  STRICT=
else
  echo "skip: $splatt or $ldbc not found (set GALLEY_DATA_DIR)"
fi
if [ -f "$karate" ]; then
  STRICT=1
  aot_case triangles "$ex/triangles.tin" -- E="$karate"
  aot_case fourcycles "$ex/fourcycles.tin" -- E="$karate"
  aot_case bfs "$ex/bfs.tin" -- A="$karate" f="$exd/karate_frontier.tns" v="$exd/karate_visited.tns"
  awk 'BEGIN { printf "# dims: 34\n# fill: %.17g\n", 1 / 34 }' >"$tmp/r34.tns"
  # r's fill (1/34, no `fill` declared) comes from sample data
  aot_case pagerank "$ex/pagerank.tin" r="$tmp/r34.tns" -- A="$karate" r="$tmp/r34.tns"
  STRICT=
  # with sample data: the symmetric sum of the cost planner, checked at entry
  aot_case triangles_sample "$ex/triangles.tin" E="$karate" -- E="$karate"
  grep -q 'a symmetric matrix with a zero diagonal' "$tmp/case/triangles_sample/prog.h" && ok || fail "triangles: the header does not say E must be symmetric"
  # a non-symmetric matrix is refused by that plan, accepted by the data-free one
  if "$tmp/case/triangles_sample/host" "$tmp/case/triangles_sample/aot" "$tmp/S.mtx" >"$tmp/hout" 2>&1; then
    fail "triangles: a non-symmetric E accepted by a plan relying on symmetry"; else
    grep -q 'rc -2.*is not a symmetric matrix' "$tmp/hout" && ok || fail "triangles: $(cat "$tmp/hout")"; fi
  aot_case triangles_other "$ex/triangles.tin" -- E="$tmp/S.mtx"
  # the sliced strategy (planned on karate's short rows): a handle keeps
  # the sliced copy, made once across its three runs, and its outputs
  # are bitwise those of the plain loop (run_ex, no handle); on other
  # data too (an A without whole chunks: the rows loop alone)
  awk 'BEGIN { print "# dims: 34"; for (i = 1; i <= 34; i++) printf "%d %.17g\n", i, (i * 7 % 11) / 3 - 1.3 }' >"$tmp/x34.tns"
  STRICT=1
  aot_case spmv_sliced "$ex/aot/spmv.tin" A="$karate" x="$tmp/x34.tns" -- A="$karate" x="$tmp/x34.tns"
  STRICT=
  d=$tmp/case/spmv_sliced
  grep -q 'galley_q0_rows' "$d/prog.c" && ok || fail "spmv_sliced: the plan does not take the sliced loop"
  if "$d/host_t" --pool 2 "$d/p2" "$karate" "$tmp/x34.tns" >"$tmp/hout" 2>&1; then
    [ "$(grep -c 'aotrt: made a sliced copy (doubles)' "$tmp/hout")" = 1 ] && ok || fail "spmv_sliced: a handle should make one sliced copy over three runs: $(cat "$tmp/hout")"
  else fail "spmv_sliced: $(cat "$tmp/hout")"; fi
  if "$d/host_t" "$d/t1" "$karate" "$tmp/x34.tns" >"$tmp/hout" 2>&1; then
    grep -q 'sliced copy' "$tmp/hout" && fail "spmv_sliced: a run without a handle made a sliced copy" || ok
  else fail "spmv_sliced: $(cat "$tmp/hout")"; fi
  # a handle of one thread is the entry point for repeated calls, also
  # built without pthreads: galley_aot_prepare makes the one sliced copy
  # before the runs, and the outputs are bitwise the same in both builds
  # and agree with galleyc run
  for variant in threads nothreads; do
    defs=""; [ $variant = nothreads ] && defs=-DGALLEY_AOT_NO_THREADS
    mkdir -p "$d/h_$variant"
    # shellcheck disable=SC2086
    if $cc $defs -DAOTRT_TRACE_SLICED -I"$d" $hostflags "$src/tests/aot_host.c" "$d/prog.c" -o "$d/host_$variant" $hostlibs 2>"$tmp/ccerr" &&
       "$d/host_$variant" --prepare "$d/h_$variant" "$karate" "$tmp/x34.tns" >"$tmp/hout" 2>&1; then
      awk '/made a sliced copy \(doubles\)/ { n++; if (p) late = 1 } /aot_host: prepared/ { p = 1 }
        END { exit !(n == 1 && !late) }' "$tmp/hout" && ok || fail "spmv_sliced ($variant): prepare should make the one sliced copy: $(cat "$tmp/hout")"
      [ $variant = threads ] || { cmp -s "$d/h_threads/y.tns" "$d/h_$variant/y.tns" && ok || fail "spmv_sliced: a prepared handle gives another y built without threads"; }
      agree "$d/run/y.tns" "$d/h_$variant/y.tns" >"$tmp/agree" && ok || { fail "spmv_sliced ($variant): a prepared handle gives another y than galleyc run"; head -5 "$tmp/agree"; }
    else fail "spmv_sliced ($variant): $(cat "$tmp/ccerr" "$tmp/hout" 2>/dev/null | head -5)"; fi
  done
  # inputs that disagree on a size are refused by prepare as by a run
  if "$d/host_threads" --prepare "$d/h_threads" "$tmp/S.mtx" "$tmp/x34.tns" >"$tmp/hout" 2>&1; then
    fail "spmv_sliced: prepare accepted a 3 x 3 A with a 34-vector x"; else
    grep -q "prepare: rc -2.*a mode's size differs" "$tmp/hout" && ok || fail "spmv_sliced: prepare: $(cat "$tmp/hout")"; fi
  aot_case spmv_sliced_other "$ex/aot/spmv.tin" A="$karate" x="$tmp/x34.tns" -- A="$tmp/S.mtx" x="$tmp/x3.tns"
  # rows whose sum depends on the order (1e16 + 1 + 1 + 1 - 1e16 + 4 ones:
  # 4 in order, 7 in the plain loop's 4 lanes): with a handle the AOT
  # runs the JIT's sliced loop, so it gives galleyc run's 4 exactly
  awk 'BEGIN { print "%%MatrixMarket matrix coordinate real general"; print "8 10 72"
    split("1e16 1 1 1 -1e16 1 1 1 1", v, " ")
    for (i = 1; i <= 8; i++) for (k = 1; k <= 9; k++) print i, k, v[k] }' >"$tmp/order.mtx"
  printf '# dims: 10\n' >"$tmp/ones10.tns"
  for i in 1 2 3 4 5 6 7 8 9 10; do echo "$i 1" >>"$tmp/ones10.tns"; done
  d=$tmp/case/spmv_order
  mkdir -p "$d/run" "$d/p1" "$d/p2" "$d/nt"
  if "$bin" compile "$ex/aot/spmv.tin" A="$tmp/order.mtx" x="$tmp/ones10.tns" -o "$d/prog.c" --header "$d/prog.h" 2>"$tmp/err" &&
     $cc -I"$d" $hostflags "$src/tests/aot_host.c" "$d/prog.c" -o "$d/host" $hostlibs 2>"$tmp/ccerr" &&
     "$bin" run "$ex/aot/spmv.tin" A="$tmp/order.mtx" x="$tmp/ones10.tns" -o "$d/run" -q 2>"$tmp/err" &&
     "$d/host" --pool 1 "$d/p1" "$tmp/order.mtx" "$tmp/ones10.tns" >"$tmp/hout" 2>&1 &&
     "$d/host" --pool 2 "$d/p2" "$tmp/order.mtx" "$tmp/ones10.tns" >>"$tmp/hout" 2>&1 &&
     $cc -DGALLEY_AOT_NO_THREADS -I"$d" $hostflags "$src/tests/aot_host.c" "$d/prog.c" -o "$d/host_nt" $hostlibs 2>"$tmp/ccerr" &&
     "$d/host_nt" --pool 1 "$d/nt" "$tmp/order.mtx" "$tmp/ones10.tns" >>"$tmp/hout" 2>&1; then
    grep -q '^1 4$' "$d/run/y.tns" && ok || fail "spmv_order: galleyc run no longer sums the rows in order: $(head -3 "$d/run/y.tns")"
    cmp -s "$d/run/y.tns" "$d/p1/y.tns" && ok || fail "spmv_order: a handle's run gives another y than galleyc run"
    cmp -s "$d/run/y.tns" "$d/p2/y.tns" && ok || fail "spmv_order: a handle of 2 threads gives another y than galleyc run"
    cmp -s "$d/run/y.tns" "$d/nt/y.tns" && ok || fail "spmv_order: a handle built without threads gives another y than galleyc run"
  else fail "spmv_order: $(cat "$tmp/err" "$tmp/hout")"; fi
else
  echo "skip: $karate not found (set GALLEY_DATA_DIR)"
fi

# ---- finite values checked only where the plan relies on them ----
# y = A x with a dense x walks A's entries: A's missing entries multiply
# x, so x must be finite and A need not be (the plan is the same when A
# holds an infinity): an infinite A runs and equals galleyc run
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 4\n1 2 inf\n2 1 2\n2 3 1.5\n3 3 -2\n' >"$tmp/Sinf.mtx"
printf '# dims: 3\n1 1.5\n2 inf\n3 4\n' >"$tmp/x3inf.tns"
aot_case spmv_inf "$ex/aot/spmv.tin" --format x=dense -- A="$tmp/Sinf.mtx" x="$tmp/x3.tns"
awk '/inputs\[0\] A/ { a = 1 } /inputs\[1\] x/ { a = 0; x = 1 } /finite stored values/ { if (a) bad = 1; if (x) good = 1 }
  END { exit !(good && !bad) }' "$tmp/case/spmv_inf/prog.h" && ok || fail "spmv_inf: the header should ask a finite x, not a finite A"
if "$tmp/case/spmv_inf/host" "$tmp/case/spmv_inf/aot" "$tmp/S.mtx" "$tmp/x3inf.tns" >"$tmp/hout" 2>&1; then
  fail "spmv_inf: an infinite x accepted by a plan relying on a finite x"; else
  grep -q "rc -2.*input 'x': stores an infinity" "$tmp/hout" && ok || fail "spmv_inf: $(cat "$tmp/hout")"; fi

# ---- the memory budget ----
# an outer product whose dense result is 8 bytes x n^2: refused before any
# kernel runs, naming the query and its bytes, by a handle's budget; the
# same with a budget it fits runs and equals galleyc run
printf 'input x[i], y[j]\nO[i, j] = x[i] * y[j]\noutput O\n' >"$tmp/outer.tin"
awk 'BEGIN { print "# dims: 8000"; for (i = 1; i <= 8000; i++) print i, i % 7 + 1 }' >"$tmp/d8.tns"
aot_case outer "$tmp/outer.tin" x="$tmp/d8.tns" y="$tmp/d8.tns" -- x="$tmp/x3.tns" y="$tmp/x3.tns"
d=$tmp/case/outer
grep -q 'outputs\[0\] O: levels dense:0,dense:1' "$d/prog.h" && ok || fail "outer: the plan's O is not dense: $(grep 'outputs\[0\]' "$d/prog.h")"
mkdir -p "$d/b"
if "$d/host" --budget 64 "$d/b" "$tmp/x3.tns" "$tmp/x3.tns" >"$tmp/hout" 2>&1; then
  fail "outer: a budget of 64 bytes allowed a 72-byte result"; else
  grep -q "rc -5 .*error: query 'O': needs an estimated 72 bytes.*over the memory budget of 64 bytes (galley_aot_threads_set_memory_budget)" "$tmp/hout" && ok || fail "outer: $(cat "$tmp/hout")"; fi
"$d/host" --budget 72 "$d/b" "$tmp/x3.tns" "$tmp/x3.tns" >"$tmp/hout" 2>&1 && cmp -s "$d/aot/O.tns" "$d/b/O.tns" && ok || fail "outer: a budget it fits: $(cat "$tmp/hout")"
# the default budget (half an address-space limit): 512 MB under
# `ulimit -v 250000` is refused with the code and message, never killed
# (the sanitizers reserve far more address space: plain build only)
if ! grep -q '^#define GALLEY_SANITIZERS 1' "$build/config.h" 2>/dev/null; then
  printf 'ulimit -v 250000 && exec "$@"\n' >"$tmp/vlimit.sh"
  sh "$tmp/vlimit.sh" "$d/host" "$d/b" "$tmp/d8.tns" "$tmp/d8.tns" >"$tmp/hout" 2>&1
  st=$?
  [ $st -eq 1 ] && grep -q "rc -5 .*query 'O': needs an estimated 5.12e+08 bytes" "$tmp/hout" && ok || fail "outer under ulimit -v: status $st: $(cat "$tmp/hout")"
fi
# a sparse result is checked as its entries arrive: a product whose
# entries outgrow a budget its first room fits
printf 'input A[i, j], B[j, k]\nC[i, k] = A[i, j] * B[j, k]\noutput C\n' >"$tmp/spgemm.tin"
awk 'BEGIN { print "%%MatrixMarket matrix coordinate real general"; print "2000 2000 40000"
  for (e = 0; e < 40000; e++) print int(e / 20) + 1, (e * 37) % 2000 + 1, e % 5 + 1 }' >"$tmp/g2k.mtx"
aot_case spgemm "$tmp/spgemm.tin" -- A="$tmp/g2k.mtx" B="$tmp/g2k.mtx"
d=$tmp/case/spgemm
mkdir -p "$d/b"
if "$d/host" --budget 5e6 "$d/b" "$tmp/g2k.mtx" "$tmp/g2k.mtx" >"$tmp/hout" 2>&1; then
  fail "spgemm: a budget of 5 MB allowed its entries"; else
  grep -q "rc -5 .*query 'C': needs an estimated .* bytes (its sparse result's entries" "$tmp/hout" && ok || fail "spgemm: $(cat "$tmp/hout")"; fi

# ---- sample data of one size, run on data of another ----
aot_case spmv_sizes "$ex/aot/spmv.tin" A="$ex/aot/A.mtx" x="$ex/aot/x.tns" -- A="$exd/chain_A.mtx" x="$tmp/x3.tns"
# formats from --format: CSC A and a dense x; a transpose in the plan
cat >"$tmp/tr.tin" <<'EOF'
input A[i, j], x[i]
y[j] = A[i, j] * x[i]
z[i, j] = A[j, i] * 2 + A[i, j]   # a transposed read and a sparse result
output y, z
EOF
aot_case transpose "$tmp/tr.tin" --format A=dense:1,list:0 --format x=dense -- A="$tmp/S.mtx" x="$tmp/x3.tns"
grep -q '"dense\\0721\\054list\\0720"' "$tmp/case/transpose/prog.c" && ok || fail "--format A=CSC not compiled in"
# 64-bit inputs to a program compiled for 32-bit indices: copied at entry
HOSTARG=--w64 aot_case spmv_w64 "$ex/aot/spmv.tin" -- A="$exd/chain_A.mtx" x="$tmp/x3.tns"
# sparse intermediates and results in other level kinds
cat >"$tmp/kinds.tin" <<'EOF'
input A[i, j], B[j, k]
C[i, k] = A[i, j] * B[j, k]
D[i, k] = C[i, k] + 1
n = sum(i, k: C[i, k])
output C, D, n
EOF
aot_case kinds "$tmp/kinds.tin" --format A=hash,bytemap --format B=dense,hash -- A="$exd/chain_A.mtx" B="$exd/chain_B.mtx"
# hash levels are compiled 32-bit (they fit); 64-bit ones are copied at entry
grep -q 'inputs\[1\] B: .*levels dense:0,hash:1' "$tmp/case/kinds/prog.h" &&
  grep -A1 'inputs\[1\] B' "$tmp/case/kinds/prog.h" | grep -q '32-bit indices at level 1' &&
  ok || fail "kinds: B's hash level not compiled 32-bit"
HOSTARG=--w64 aot_case kinds_w64 "$tmp/kinds.tin" --format A=hash,bytemap --format B=dense,hash -- A="$exd/chain_A.mtx" B="$exd/chain_B.mtx"
aot_case kinds_sample "$tmp/kinds.tin" A="$exd/chain_A.mtx" B="$exd/chain_B.mtx" -- A="$exd/chain_A.mtx" B="$exd/chain_B.mtx"

# sizes a plan compiles in (a fill that counts the coordinates a sum
# skips): said in the header, refused on other sizes, fine with sample
# data of the sizes run on
cat >"$tmp/cnt.tin" <<'EOF'
input A[i, j], x[j]
n = sum(i, j: A[i, j] * 0 + 1)
y[j] = sum(i: A[i, j] + 1)
z[i] = sum(j: A[i, j] * x[j] + x[j])
output n, y, z
EOF
if aot_case cnt_free "$tmp/cnt.tin" -- A="$exd/chain_A.mtx" x="$tmp/x3.tns" >"$tmp/cnt.out" 2>&1; then
  fail "a plan with a size compiled in ran on other sizes"; else
  fails=$((fails - 1)) # the expected failure aot_case counted
  grep -q "a mode has another size than the plan compiled in" "$tmp/cnt.out" && ok || fail "cnt: $(cat "$tmp/cnt.out")"
fi
grep -q 'mode 0 of size 1000 exactly (compiled in)' "$tmp/case/cnt_free/prog.h" && ok || fail "cnt: the header does not say which size is compiled in"
aot_case cnt_sample "$tmp/cnt.tin" A="$exd/chain_A.mtx" x="$tmp/x3.tns" -- A="$exd/chain_A.mtx" x="$tmp/x3.tns"

# ---- random programs of the differential generator ----
# each case links a host with libgalley: fewer under the sanitizers
case $hostflags in *sanitize*) dflt=8 ;; *) dflt=16 ;; esac
seeds=${GALLEY_AOT_CASES:-$dflt}
s=0
if [ -x "$build/tests/aot_randprog" ]; then
  while [ $s -lt "$seeds" ]; do
    seed=$((20261125 + s))
    g=$tmp/rand$s
    mkdir -p "$g"
    if ! "$build/tests/aot_randprog" $seed "$g" >"$g/spec" 2>"$tmp/err"; then
      fail "randprog $seed: $(cat "$tmp/err")"; s=$((s + 1)); continue; fi
    fmts="" binds=""
    while read -r n f fm; do
      [ -z "${f:-}" ] && continue
      binds="$binds $n=$f"
      [ "$fm" != scalar ] && fmts="$fmts --format $n=$fm"
    done <"$g/spec"
    nf=""; grep -qx nonfinite "$g/spec" && nf=--nonfinite
    # even seeds data-free, odd ones with the data as sample; a data-free
    # plan that compiles sizes in (its header says so) runs only on data
    # of the assumed sizes: then the data is the sample too
    fixed=0
    if [ $((s % 2)) -eq 0 ]; then
      # shellcheck disable=SC2086
      "$bin" compile "$g/prog.tin" -o "$g/probe.c" --header "$g/probe.h" $fmts $nf 2>/dev/null
      grep -q '(compiled in)' "$g/probe.h" && fixed=1
    fi
    if [ $((s % 2)) -eq 0 ] && [ $fixed -eq 0 ]; then
      # shellcheck disable=SC2086
      aot_case "rand$seed" "$g/prog.tin" $fmts $nf -- $binds || sed 's/^/  /' "$g/prog.tin"
    else
      # shellcheck disable=SC2086
      aot_case "rand$seed" "$g/prog.tin" $binds -- $binds || sed 's/^/  /' "$g/prog.tin"
    fi
    s=$((s + 1))
  done
else
  echo "skip: random programs (no tests/aot_randprog: Check missing)"
fi

# ---- a host that builds its tensors through the header's layout only ----
cat >"$tmp/hand.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include "prog.h"

static int32_t A_pos[5] = {0, 2, 3, 5, 6};
static int32_t A_crd[6] = {0, 2, 1, 0, 3, 3};
static double A_val[6] = {2, 1, 3, -1, 4, 5};
static int64_t A_pos64[5] = {0, 2, 3, 5, 6};
static int64_t A_crd64[6] = {0, 2, 1, 0, 3, 3};
static int32_t T_pos[5] = {0, 2, 3, 4, 6}; /* the same A as CSC */
static int32_t T_crd[6] = {0, 2, 1, 0, 2, 3};
static double T_val[6] = {2, -1, 3, 1, 4, 5};
static int32_t x_pos[2] = {0, 3};
static int32_t x_crd[3] = {0, 1, 3};
static double x_val[3] = {1, 2, 4};

static void walk(const struct galley_tensor *t, int l, galley_pos p,
                 int64_t *c) {
  if (l == t->order) {
    if (t->val[p] != t->fill) {
      for (int m = 0; m < t->order; m++)
        printf("%lld ", (long long)c[m] + 1);
      printf("%.17g\n", t->val[p]);
    }
    return;
  }
  const galley_level *L = &t->lvl[l];
  for (galley_pos k = galley_rt_walk_begin(L, p); k < galley_rt_walk_end(L, p); k++) {
    c[L->mode] = galley_rt_walk_crd(L, k);
    walk(t, l + 1, galley_rt_walk_child(L, p, k), c);
  }
}

int main(int argc, char **argv) {
  struct galley_tensor A, x;
  int csc = argc > 1 && strcmp(argv[1], "csc") == 0;
  int w64 = argc > 1 && strcmp(argv[1], "w64") == 0;
  memset(&A, 0, sizeof A);
  memset(&x, 0, sizeof x);
  A.order = 2;
  A.dims[0] = A.dims[1] = 4;
  A.lvl[0].kind = GALLEY_RT_DENSE;
  A.lvl[0].mode = csc;
  A.lvl[0].dim = 4;
  A.lvl[0].npar = 1;
  A.lvl[0].nchild = A.lvl[0].nset = 4;
  A.lvl[1].kind = GALLEY_RT_LIST;
  A.lvl[1].mode = !csc;
  A.lvl[1].dim = 4;
  A.lvl[1].npar = 4;
  A.lvl[1].nchild = A.lvl[1].nset = 6;
  if (w64) {
    A.lvl[1].pos = A_pos64;
    A.lvl[1].crd = A_crd64;
  } else {
    A.lvl[1].idx32 = 1;
    A.lvl[1].pos32 = csc ? T_pos : A_pos;
    A.lvl[1].crd32 = csc ? T_crd : A_crd;
  }
  A.val = csc ? T_val : A_val;
  A.nval = 6;
  x.order = 1;
  x.dims[0] = 4;
  x.lvl[0].kind = GALLEY_RT_LIST;
  x.lvl[0].dim = 4;
  x.lvl[0].npar = 1;
  x.lvl[0].nchild = x.lvl[0].nset = 3;
  x.lvl[0].idx32 = 1;
  x.lvl[0].pos32 = x_pos;
  x.lvl[0].crd32 = x_crd;
  x.val = x_val;
  x.nval = 3;
  const struct galley_tensor *in[] = {&A, &x};
  struct galley_tensor *out[GALLEY_AOT_NUM_OUTPUTS];
  char msg[256];
  int rc = galley_aot_run_msg(in, out, msg, sizeof msg);
  if (rc != GALLEY_AOT_OK) {
    printf("host: %d %s\n", rc, msg);
    return 1;
  }
  for (int k = 0; k < GALLEY_AOT_NUM_OUTPUTS; k++) {
    int64_t c[GALLEY_RT_MAX_ORDER] = {0};
    printf("# output: %s\n# dims:", galley_aot_output_names[k]);
    for (int m = 0; m < out[k]->order; m++)
      printf(" %lld", (long long)out[k]->dims[m]);
    printf("\n# fill: %.17g\n", out[k]->fill);
    walk(out[k], 0, 0, c);
    galley_aot_free(out[k]);
  }
  return 0;
}
EOF
# A (4 x 4) and a sparse x as files, for galleyc run
printf '%%%%MatrixMarket matrix coordinate real general\n4 4 6\n1 1 2\n1 3 1\n2 2 3\n3 1 -1\n3 4 4\n4 4 5\n' >"$tmp/A.mtx"
printf '# dims: 4\n1 1\n2 2\n4 4\n' >"$tmp/x.tns"
# hand NAME PROG FORMAT-ARGS HOST-ARG: compile data-free, build with cc
# alone, compare with galleyc run --print
hand() {
  name=$1 prog=$2 fargs=$3 harg=$4
  # shellcheck disable=SC2086
  expect_status 0 "$bin" compile "$prog" -o "$tmp/prog.c" --header "$tmp/prog.h" $fargs
  if $cc -std=c99 -Wall -I"$tmp" "$tmp/hand.c" "$tmp/prog.c" -o "$tmp/hand" -lm 2>"$tmp/ccerr"; then ok; else
    fail "$name: the host does not build with $cc alone"; head -5 "$tmp/ccerr"; return; fi
  "$tmp/hand" $harg >"$tmp/hand.out" 2>&1 || { fail "$name: $(cat "$tmp/hand.out")"; return; }
  "$bin" run "$prog" A="$tmp/A.mtx" x="$tmp/x.tns" --print >"$tmp/run.out" 2>"$tmp/err" || fail "$name: galleyc run"
  # --print names outputs only when there are several
  grep -v '^# output' "$tmp/hand.out" | sort >"$tmp/h.sorted"
  grep -v '^# output' "$tmp/run.out" | sort >"$tmp/r.sorted"
  if cmp -s "$tmp/h.sorted" "$tmp/r.sorted"; then ok; else
    fail "$name: the hand host differs from galleyc run"; diff "$tmp/r.sorted" "$tmp/h.sorted" | head | sed 's/^/  /'; fi
}
hand spmv "$ex/aot/spmv.tin" "" ""
hand spmv_w64 "$ex/aot/spmv.tin" "" w64
hand spmv_csc "$ex/aot/spmv.tin" "--format A=dense:1,list:0" csc
hand transpose "$tmp/tr.tin" "" ""
# a CSC A given to a program compiled for CSR: refused, said so
hand spmv "$ex/aot/spmv.tin" "" "" >/dev/null
if "$tmp/hand" csc >"$tmp/hand.out" 2>&1; then fail "CSC A accepted by a CSR program"; else
  grep -q "^host: -2 error: input 'A': a level stores another mode than in the compiled format (the level's mode, the format's) (1, expected 0)" "$tmp/hand.out" && ok || fail "CSC A: $(cat "$tmp/hand.out")"; fi
# the header: prefix, guard, extern "C", layout documentation
grep -q '^#ifndef GALLEY_AOT_H$' "$tmp/prog.h" && ok || fail "header guard"
grep -q 'extern "C"' "$tmp/prog.h" && ok || fail "header lacks extern \"C\""
grep -q 'int galley_aot_run(const struct galley_tensor \*const \*inputs' "$tmp/prog.h" && ok || fail "header lacks galley_aot_run"
grep -q 'CSR  m x n' "$tmp/prog.h" && ok || fail "header does not document CSR"
grep -q '#define GALLEY_AOT_EINPUT (-2)' "$tmp/prog.h" && ok || fail "header lacks the error codes"

# ---- every external symbol carries the prefix ----
"$bin" compile "$ex/logistic.tin" -o "$tmp/p.c" --prefix my_lr >/dev/null 2>&1
$cc -c "$tmp/p.c" -o "$tmp/p.o" 2>/dev/null
bad=$(nm -g --defined-only "$tmp/p.o" | awk '{ print $3 }' | grep -v '^my_lr_')
[ -z "$bad" ] && ok || fail "external symbols without the prefix: $bad"
[ "$(nm -g --defined-only "$tmp/p.o" | wc -l)" -ge 7 ] && ok || fail "entry points missing from p.o"

# ---- two programs, and one program twice, in one C and one C++ program ----
mkdir "$tmp/link"
"$bin" compile "$ex/aot/spmv.tin" -o "$tmp/link/a.c" --header "$tmp/link/a.h" --prefix spmv_a &&
"$bin" compile "$ex/aot/spmv.tin" -o "$tmp/link/b.c" --header "$tmp/link/b.h" --prefix spmv_b --format A=dense:1,list:0 &&
"$bin" compile "$ex/logistic.tin" -o "$tmp/link/l.c" --header "$tmp/link/l.h" --prefix lr && ok || fail "compile for linking"
cat >"$tmp/link/main.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include "a.h"
#include "b.h"
#include "l.h"
/* y = A x for a 2 x 2 CSR and CSC identity times 3, x = (1, 2) */
int main(void) {
  int32_t pos[3] = {0, 1, 2}, crd[2] = {0, 1}, xpos[2] = {0, 2};
  double val[2] = {3, 3}, xv[2] = {1, 2};
  struct galley_tensor A, x;
  memset(&A, 0, sizeof A);
  memset(&x, 0, sizeof x);
  A.order = 2;
  A.dims[0] = A.dims[1] = 2;
  A.lvl[0].kind = GALLEY_RT_DENSE;
  A.lvl[0].dim = 2;
  A.lvl[0].npar = 1;
  A.lvl[0].nchild = A.lvl[0].nset = 2;
  A.lvl[1].kind = GALLEY_RT_LIST;
  A.lvl[1].mode = 1;
  A.lvl[1].dim = 2;
  A.lvl[1].npar = 2;
  A.lvl[1].nchild = A.lvl[1].nset = 2;
  A.lvl[1].idx32 = 1;
  A.lvl[1].pos32 = pos;
  A.lvl[1].crd32 = crd;
  A.val = val;
  A.nval = 2;
  x.order = 1;
  x.dims[0] = 2;
  x.lvl[0].kind = GALLEY_RT_LIST;
  x.lvl[0].dim = 2;
  x.lvl[0].npar = 1;
  x.lvl[0].nchild = x.lvl[0].nset = 2;
  x.lvl[0].idx32 = 1;
  x.lvl[0].pos32 = xpos;
  x.lvl[0].crd32 = crd;
  x.val = xv;
  x.nval = 2;
  const struct galley_tensor *in[2];
  in[0] = &A;
  in[1] = &x;
  struct galley_tensor *ya[1], *yb[1], *lo[LR_NUM_OUTPUTS];
  if (spmv_a_run(in, ya) != SPMV_A_OK) return 1;
  A.lvl[0].mode = 1; /* the identity is its own transpose: CSC too */
  A.lvl[1].mode = 0;
  if (spmv_b_run(in, yb) != SPMV_B_OK) return 2;
  A.lvl[0].mode = 0;
  A.lvl[1].mode = 1;
  if (lr_run(in, lo) != LR_OK) return 3;
  int64_t c0[1] = {0}, c1[1] = {1};
  (void)c0; (void)c1;
  printf("%g %g %g %g %s\n", ya[0]->val[0], ya[0]->val[1], yb[0]->val[0],
         yb[0]->val[1], lr_output_names[0]);
  spmv_a_free(ya[0]);
  spmv_b_free(yb[0]);
  for (int k = 0; k < LR_NUM_OUTPUTS; k++) lr_free(lo[k]);
  return 0;
}
EOF
if $cc -std=c99 -Wall -I"$tmp/link" "$tmp/link/main.c" "$tmp/link/a.c" "$tmp/link/b.c" "$tmp/link/l.c" -o "$tmp/link/c" -lm 2>"$tmp/ccerr"; then ok; else
  fail "three compiled programs do not link into one C program"; head -5 "$tmp/ccerr"; fi
[ "$("$tmp/link/c" 2>&1)" = "3 6 3 6 P" ] && ok || fail "linked C program: $("$tmp/link/c" 2>&1)"
if command -v g++ >/dev/null 2>&1; then
  cp "$tmp/link/main.c" "$tmp/link/main.cpp"
  for f in a b l; do $cc -c "$tmp/link/$f.c" -o "$tmp/link/$f.o" || fail "cc $f.c"; done
  if g++ -Wall -Wextra -pedantic -I"$tmp/link" "$tmp/link/main.cpp" "$tmp/link/a.o" "$tmp/link/b.o" "$tmp/link/l.o" -o "$tmp/link/cpp" -lm 2>"$tmp/ccerr"; then ok; else
    fail "three compiled programs do not link into one C++ program"; head -5 "$tmp/ccerr"; fi
  [ "$("$tmp/link/cpp" 2>&1)" = "3 6 3 6 P" ] && ok || fail "linked C++ program: $("$tmp/link/cpp" 2>&1)"
else
  echo "skip: no g++ (C++ link)"
fi

# ---- bad inputs at the entry points: codes and messages, never a crash ----
"$bin" compile "$ex/aot/spmv.tin" -o "$tmp/prog.c" --header "$tmp/prog.h" >/dev/null 2>&1
cat >"$tmp/bad.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include "prog.h"
static int32_t pos[3] = {0, 1, 2}, crd[2] = {0, 1}, xpos[2] = {0, 2};
static double val[2] = {3, 3}, xv[2] = {1, 2};
static struct galley_tensor A, x;
static void make(void) {
  memset(&A, 0, sizeof A);
  memset(&x, 0, sizeof x);
  A.order = 2;
  A.dims[0] = A.dims[1] = 2;
  A.lvl[0].kind = GALLEY_RT_DENSE;
  A.lvl[0].dim = 2;
  A.lvl[0].npar = 1;
  A.lvl[0].nchild = A.lvl[0].nset = 2;
  A.lvl[1].kind = GALLEY_RT_LIST;
  A.lvl[1].mode = 1;
  A.lvl[1].dim = 2;
  A.lvl[1].npar = 2;
  A.lvl[1].nchild = A.lvl[1].nset = 2;
  A.lvl[1].idx32 = 1;
  A.lvl[1].pos32 = pos;
  A.lvl[1].crd32 = crd;
  A.val = val;
  A.nval = 2;
  x.order = 1;
  x.dims[0] = 2;
  x.lvl[0].kind = GALLEY_RT_LIST;
  x.lvl[0].dim = 2;
  x.lvl[0].npar = 1;
  x.lvl[0].nchild = x.lvl[0].nset = 2;
  x.lvl[0].idx32 = 1;
  x.lvl[0].pos32 = xpos;
  x.lvl[0].crd32 = crd;
  x.val = xv;
  x.nval = 2;
}
/* the full validation (run_ex), then, unless the contents are bad (the
 * default check is structural, O(1): it trusts them), the default run */
static void run_one(const char *what, const struct galley_tensor *const *in,
                    int full) {
  struct galley_tensor *out[1] = {(struct galley_tensor *)&A};
  char msg[300];
  int rc = full ? galley_aot_run_ex(in, out, 2, GALLEY_AOT_CHECK_FULL, msg,
                                    sizeof msg)
                : galley_aot_run_msg(in, out, msg, sizeof msg);
  printf("%s%s: %d %s%s\n", what, full ? "" : " (default)", rc, msg,
         out[0] ? " (output set)" : "");
  if (rc == 0) galley_aot_free(out[0]);
}
static void run(const char *what, const struct galley_tensor *const *in) {
  run_one(what, in, 1);
  if (strncmp(what, "crd", 3) != 0)
    run_one(what, in, 0);
}
int main(void) {
  const struct galley_tensor *in[2] = {&A, &x};
  const struct galley_tensor *none[2] = {0, &x};
  int32_t badpos[3] = {0, 2, 1}, pos2[3] = {0, 2, 2}, badcrd[2] = {1, 0},
          bigcrd[2] = {0, 7};
  double inf = 1.0 / 0.0;
  make(); run("good", in);
  make(); run("null input", none);
  make(); {
    struct galley_tensor *out[1];
    printf("null inputs: %d\n", galley_aot_run(0, out));
    printf("null outputs: %d\n", galley_aot_run(in, 0));
    printf("negative threads: %d\n", galley_aot_run_ex(in, out, -1, 0, 0, 0));
  }
  make(); A.order = 3; run("order", in);
  make(); A.lvl[1].pos32 = badpos; run("pos", in);
  make(); A.lvl[1].pos32 = pos2; A.lvl[1].crd32 = badcrd; run("crd order", in);
  make(); A.lvl[1].crd32 = bigcrd; run("crd range", in);
  make(); A.lvl[1].pos32 = 0; run("no pos", in);
  make(); A.lvl[1].kind = GALLEY_RT_HASH; run("kind", in);
  make(); A.lvl[1].kind = 9; run("unknown kind", in);
  make(); A.lvl[1].npar = 3; run("npar", in);
  make(); A.lvl[0].dim = -5; run("dim", in);
  make(); A.dims[1] = 3; A.lvl[1].dim = 3; run("sizes", in);
  make(); A.nval = 5; run("nval", in);
  make(); A.val = 0; run("no val", in);
  make(); A.fill = 1; run("fill", in);
  make(); val[1] = inf; run("inf", in);
  { /* vouched for by the host: not scanned (the result holds the inf) */
    struct galley_tensor *out[1];
    int rc = galley_aot_run_ex(in, out, 1, GALLEY_AOT_TRUST_VALUES, 0, 0);
    printf("inf trusted: %d %g\n", rc, rc == 0 ? out[0]->val[0] + out[0]->val[1] : 0.0);
    if (rc == 0) galley_aot_free(out[0]);
  }
  val[1] = 3;
  make(); A.lvl[1].nset = -1; run("nset", in);
  make(); x.lvl[0].mode = 3; run("mode", in);
  printf("strerror: %s\n", galley_aot_strerror(GALLEY_AOT_EINPUT));
  return 0;
}
EOF
# shellcheck disable=SC2086
if $cc -std=c99 -I"$tmp" $hostflags "$tmp/bad.c" "$tmp/prog.c" -o "$tmp/bad" $hostlibs 2>"$tmp/ccerr"; then ok; else
  fail "bad.c does not build"; head -5 "$tmp/ccerr"; fi
"$tmp/bad" >"$tmp/bad.out" 2>&1 && ok || { fail "bad inputs crashed the driver"; tail -5 "$tmp/bad.out"; }
grep -q '^good: 0  (output set)$' "$tmp/bad.out" && ok || fail "good input: $(grep '^good' "$tmp/bad.out")"
for what in "null input" order pos "crd order" "crd range" "no pos" kind "unknown kind" npar dim sizes nval "no val" fill inf nset mode; do
  line=$(grep "^$what: " "$tmp/bad.out")
  case $line in
    "$what: -2 error: "*"(output set)"*) fail "$what: an output is set after an error" ;;
    "$what: -2 error: "*) ok ;;
    *) fail "bad input '$what' not refused with -2 and a message: $line" ;;
  esac
done
grep -q '^null inputs: -4$' "$tmp/bad.out" && ok || fail "NULL inputs array"
grep -q '^null outputs: -4$' "$tmp/bad.out" && ok || fail "NULL outputs array"
grep -q '^negative threads: -4$' "$tmp/bad.out" && ok || fail "negative thread count"
# the default (structural, O(1)) check refuses all but bad coordinates
for what in "null input" order pos "no pos" kind "unknown kind" npar dim sizes nval "no val" fill inf nset mode; do
  line=$(grep "^$what (default): " "$tmp/bad.out")
  case $line in
    "$what (default): -2 error: "*"(output set)"*) fail "$what: an output is set after an error (default check)" ;;
    "$what (default): -2 error: "*) ok ;;
    *) fail "bad input '$what' not refused by the default check: $line" ;;
  esac
done
grep -q '^good (default): 0  (output set)$' "$tmp/bad.out" && ok || fail "good input, default check: $(grep '^good (default)' "$tmp/bad.out")"
grep -q "^inf: -2 error: input 'A': stores an infinity or a NaN" "$tmp/bad.out" && ok || fail "inf message: $(grep '^inf' "$tmp/bad.out")"
grep -q "^inf trusted: 0 inf$" "$tmp/bad.out" && ok || fail "TRUST_VALUES: $(grep '^inf trusted' "$tmp/bad.out")"
grep -q "^sizes: -2 error: .*size differs" "$tmp/bad.out" && ok || fail "size mismatch message: $(grep '^sizes' "$tmp/bad.out")"

# ---- examples/aot: two compiled programs in one plain C build ----
mkdir "$tmp/ex"
if command -v make >/dev/null 2>&1; then
  if make -s -C "$ex/aot" GALLEYC="$(cd "$(dirname "$bin")" && pwd)/galleyc" CC="$cc" OUT="$tmp/ex" run >"$tmp/out" 2>"$tmp/err"; then ok; else
    fail "examples/aot: make run"; sed 's/^/  /' "$tmp/err" | head; fi
  grep -q '^spmv and logistic agree with their plain loops$' "$tmp/out" && ok || { fail "examples/aot output"; cat "$tmp/out"; }
fi

# ---- command line errors ----
mkdir "$tmp/none"
cd "$tmp/none" || exit 1
expect_status 2 "$bin" compile "$ex/aot/spmv.tin" A="$ex/aot/A.mtx"
expect_err "galleyc: error: compile needs -o OUT.c"
expect_status 2 "$bin" compile "$ex/aot/spmv.tin" -o
expect_status 2 "$bin" compile "$ex/aot/spmv.tin" -o a.c --bogus
expect_err "galleyc: error: unknown option '--bogus'"
expect_status 2 "$bin" compile "$ex/aot/spmv.tin" -o a.c --stats x
expect_err "galleyc: error: bad binding 'x': expected NAME=FILE"
expect_status 2 "$bin" compile "$ex/aot/spmv.tin" -o a.c --format x
expect_err "galleyc: error: bad --format 'x': expected NAME=FMT"
expect_status 2 "$bin" compile "$ex/aot/spmv.tin" -o a.c --format q=dense
expect_err_has "'q' is not an input of the program"
expect_status 2 "$bin" compile "$ex/aot/spmv.tin" -o a.c --format A=dense
expect_err_has "--format A=dense:"
expect_status 3 "$bin" compile "$ex/aot/spmv.tin" -o a.c --prefix 9lives
expect_err "galleyc: error: cannot compile $ex/aot/spmv.tin ahead of time: bad prefix '9lives': expected a C identifier of at most 64 characters"
# --stats NAME=FILE binds like NAME=FILE
expect_status 0 "$bin" compile "$ex/aot/spmv.tin" -o "$tmp/s.c" --stats A="$ex/aot/A.mtx" --stats x="$ex/aot/x.tns"
[ -s "$tmp/s.c" ] && ok || fail "--stats bindings wrote nothing"
# an unwritable output: data error, nothing left behind
expect_status 3 "$bin" compile "$ex/aot/spmv.tin" -o "$tmp/no/such/dir/a.c"
expect_empty_dir "$tmp/none"

echo "test_compile: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
