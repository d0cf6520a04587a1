#!/bin/sh
# test_examples.sh -- every program in examples/ runs and gives the answer
# worked out independently: by hand (the arithmetic is in the comments) or,
# for the bigger data, with numpy/scipy once while writing this test (the
# script is quoted; its results are hard-coded, so the test needs no python).
# Each example also runs with --backend=clang (when clang is installed) and
# --backend=reference (unless too slow for the data), and their result files
# must agree with the default backend's entry for entry.
set -u
# Run by `make check`, or by hand from the source tree (`sh tests/test_examples.sh`
# then uses the galleyc in the current directory, else the one in build/).
srcdir=${GALLEY_TEST_SRCDIR:-$(cd "$(dirname "$0")" && pwd)}
if [ -n "${GALLEY_BUILDDIR:-}" ]; then bin=$GALLEY_BUILDDIR/galleyc
elif [ -x ./galleyc ]; then bin=./galleyc
else bin=$srcdir/../build/galleyc; fi
ex=$srcdir/../examples
exd=$ex/data
data=${GALLEY_DATA_DIR:-$ex/../../shared/data}
# shellcheck source=tests/shlib.sh
. "$srcdir/shlib.sh" # sets tmp, ok, fail, passes, fails
[ -x "$bin" ] || { echo "test_examples: no galleyc at $bin (set GALLEY_BUILDDIR)"; exit 1; }
skips=0
backends=reference
if [ -n "${CLANG:-}" ] || command -v clang >/dev/null 2>&1; then backends="clang reference"; fi
mkdir "$tmp/cache"

# value FILE KEY WANT [TOL]: the entry of result FILE at coordinates KEY
# ("" for a scalar; the fill when the entry is not written) equals WANT to
# the relative tolerance TOL (default 1e-12). inf, -inf and nan must match
# exactly (spelled as galleyc writes them).
value() {
  awk -v key="$2" -v want="$3" -v tol="${4:-1e-12}" '
    function special(s) { return s == "inf" || s == "-inf" || s == "nan" }
    function same(a, b,   d, m) {
      if (special(a) || special(b)) return a == b
      d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b
      return d <= tol * m + 1e-15 }
    /^# fill: / { fill = $3; next }
    /^#/ { next }
    { coords = ""; for (k = 1; k < NF; k++) coords = coords (k > 1 ? " " : "") $k
      if (coords == key) { found = 1; got = $NF } }
    END { if (!found) got = fill; exit !same(got, want) }' "$1"
}
near() { value "$@"; } # the older name
# entries FILE N: the result file holds N written entries
entries() { [ "$(grep -vc '^#' "$1")" -eq "$2" ]; }
# coords FILE LIST: the written entries of a vector are exactly at LIST
coords() { [ "$(grep -v '^#' "$1" | awk '{ printf "%s%s", (NR > 1 ? " " : ""), $1 }')" = "$2" ]; }
# absent PATTERN FILE: no line of FILE matches
absent() { ! grep -q -- "$1" "$2"; }
# check DESCRIPTION CMD...: one pass or one failure
check() { d=$1; shift; if "$@"; then ok; else fail "$d"; fi; }

# agree A B: two result files hold the same tensor: the same dims, and at
# every coordinate written in either the same value (to 1e-9 relative; a
# missing entry is the fill); if some coordinate is written in neither (the
# file is not full), the same fill.
agree() {
  awk '
    function special(s) { return s == "inf" || s == "-inf" || s == "nan" }
    function same(a, b,   d, m) {
      if (special(a) || special(b)) return a == b
      d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); if ((b < 0 ? -b : b) > m) m = (b < 0 ? -b : b)
      return d <= 1e-9 * m + 1e-15 }
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

# example NAME PROG [noref] NAME=FILE...: run PROG with the default backend
# into $tmp/NAME (sets $out), then with the other backends (the reference
# only without noref), and compare every result file. Fails (and returns
# non-zero) when the default run fails.
example() {
  name=$1 prog=$2; shift 2
  others=$backends
  if [ "$1" = noref ]; then others=$(echo "$backends" | sed 's/reference//'); shift; fi
  out=$tmp/$name
  mkdir -p "$out"
  if ! "$bin" run "$ex/$prog" "$@" -o "$out" 2>"$tmp/err"; then
    fail "$name: galleyc run $prog: $(cat "$tmp/err")"; return 1; fi
  ok
  for b in $others; do
    mkdir -p "$out.$b"
    if ! "$bin" run "$ex/$prog" "$@" -o "$out.$b" --backend="$b" --cache-dir="$tmp/cache" 2>"$tmp/err"; then
      fail "$name: --backend=$b: $(cat "$tmp/err")"; continue; fi
    for f in "$out"/*.tns; do
      if agree "$f" "$out.$b/${f##*/}"; then ok; else
        fail "$name: --backend=$b gives another ${f##*/}"; fi
    done
  done
}
# have FILE...: the shared data files exist; else the example is skipped
have() {
  for f; do [ -f "$f" ] || { echo "skip: $f not found (set GALLEY_DATA_DIR)"; skips=$((skips + 1)); return 1; }; done
}

# ---- logistic.tin: rows of X . theta are -0.75, -0.5, 0.25 and an empty
# row (0); P = sigmoid of those, positives = rows with P > 0.5 ----
if example logistic logistic.tin X="$exd/X.mtx" theta="$exd/theta.tns"; then
  check "P fill is not sigmoid(0) = 0.5" grep -qx '# fill: 0.5' "$out/P.tns"
  check "P[1]" value "$out/P.tns" 1 0.320821300824607
  check "P[2]" value "$out/P.tns" 2 0.3775406687981454
  check "P[3]" value "$out/P.tns" 3 0.5621765008857981
  check "P[4] equals the fill but is written" absent '^4 ' "$out/P.tns"
  check "positives" value "$out/positives.tns" "" 1
fi

# ---- logistic_grad.tin: the same X and theta with labels y = (1, 0, 1, 0);
# by hand (python's math): z = (-0.75, -0.5, 0.25, 0), L = sum log(1 + e^z)
# - y z, G = X^T (sigmoid(z) - y), step = theta - G / 2, L2 the loss there:
#   import math; X=[[1,0,-2],[0,.5,0],[3,1,1],[0,0,0]]; y=[1,0,1,0]
#   def loss(t): z=[sum(a*b for a,b in zip(r,t)) for r in X]; return
#     sum(math.log(1+math.exp(v))-w*v for v,w in zip(z,y)), z
#   s = [1/(1+math.exp(-v)) for v in z]; G[j] = sum(X[i][j]*(s[i]-y[i])) ----
if example logistic_grad logistic_grad.tin X="$exd/X.mtx" theta="$exd/theta.tns" y="$exd/y.tns"; then
  check "logistic_grad: L" value "$out/L.tns" "" 2.8800345907337954
  check "logistic_grad: G[1]" value "$out/G.tns" 1 -1.9926491965179989
  check "logistic_grad: G[2]" value "$out/G.tns" 2 -0.24905316471512923
  check "logistic_grad: G[3]" value "$out/G.tns" 3 0.920533899236584
  check "logistic_grad: step[1]" value "$out/step.tns" 1 1.2463245982589994
  check "logistic_grad: L2" value "$out/L2.tns" "" 1.5156354435644994
fi

# ---- triangles.tin: karate has 45 (data/matrices/README.md) ----
karate=$data/matrices/karate.mtx
if have "$karate" && example triangles triangles.tin E="$karate"; then
  check "triangles on karate" value "$out/triangles.tns" "" 45
fi

# ---- fourcycles.tin on karate: 3500 closed 4-walks and 154 4-cycles.
# Independently, by enumerating every 4-cycle as a vertex sequence
# a-b-c-d-a and keeping one per rotation/reflection class, and trace(A^4)
# with numpy:
#   A = scipy.io.mmread('karate.mtx').tocsr(); adj = [set(A[i].indices) ...]
#   for a, b in adj[a], c in adj[b] - {a}, d in adj[c] - {a, b}, a in adj[d]:
#     cycles.add(min of the 8 rotations/reflections of (a, b, c, d))
#   len(cycles) = 154; trace(matrix_power(A.toarray(), 4)) = 3500
if have "$karate" && example fourcycles fourcycles.tin E="$karate"; then
  check "closed 4-walks of karate" value "$out/walks.tns" "" 3500
  check "4-cycles of karate" value "$out/cycles.tns" "" 154
fi

# ---- bfs.tin on karate from the level-1 frontier (the 16 neighbours of
# vertex 1, visited = those and vertex 1): a BFS in python over the
# adjacency lists gives level 2 = {10, 17, 25, 26, 28, 29, 31, 33, 34} ----
if have "$karate" && example bfs bfs.tin A="$karate" f="$exd/karate_frontier.tns" v="$exd/karate_visited.tns"; then
  check "bfs: next frontier" coords "$out/next.tns" "10 17 25 26 28 29 31 33 34"
  check "bfs: next is 0/1" value "$out/next.tns" 34 1
  check "bfs: count" value "$out/count.tns" "" 9
  check "bfs: 26 visited" entries "$out/visited.tns" 26
  check "bfs: vertex 1 still visited" value "$out/visited.tns" 1 1
  check "bfs: vertex 15 not visited" value "$out/visited.tns" 15 0
fi

# ---- starjoin.tin: linear regression over the star join of 20 TPC-H
# lineitems with their suppliers and parts (examples/data/tpch_*.tns).
# By hand for lineitem 1 (quantity 17, discount 0.04, tax 0.02, flag N;
# supplier 93 acctbal 368.76; part 1552 price 1453.55, size 10):
#   1.5 + 0.5*17 - 20*0.04 + 10*0.02 + 2*1 + 0.25*0.36876 + 4*1.45355
#   - 0.1*10 = 16.30639
# The rest with numpy, loading the .tns files into dense arrays:
#   X = F + einsum('isp,sj->ij', L, S) + einsum('isp,pj->ij', L, P)
#   pred = b + X @ w   -> pred[3] 7.6786224999999995, pred[9] 30.1418525,
#   pred[20] 11.10999, pred.mean() 19.81261075 ----
tpch="F=$exd/tpch_F.tns L=$exd/tpch_L.tns S=$exd/tpch_S.tns P=$exd/tpch_P.tns"
# shellcheck disable=SC2086
if example starjoin starjoin.tin $tpch w="$exd/tpch_w.tns" b="$exd/tpch_b.tns"; then
  check "starjoin: pred[1]" value "$out/pred.tns" 1 16.30639
  check "starjoin: pred[3]" value "$out/pred.tns" 3 7.6786224999999995
  check "starjoin: pred[9]" value "$out/pred.tns" 9 30.1418525
  check "starjoin: pred[20]" value "$out/pred.tns" 20 11.10999
  check "starjoin: mean" value "$out/mean.tns" "" 19.81261075
fi

# ---- covariance.tin on the same join: numpy on the X above,
#   X.mean(0) -> mu[1] 26.95, mu[7] 3.8250029999999997
#   C = np.cov(X, rowvar=False) -> C[1,1] 182.3657894736842,
#   C[1,9] = C[9,1] -51.47368421052632, C[7,8] -0.3458059436842104,
#   C[2,3] -0.00016078947368421053, C[9,9] 231.05263157894734 ----
# shellcheck disable=SC2086
if example covariance covariance.tin $tpch; then
  check "covariance: n" value "$out/n.tns" "" 20
  check "covariance: mu[1]" value "$out/mu.tns" 1 26.95
  check "covariance: mu[7]" value "$out/mu.tns" 7 3.8250029999999997
  check "covariance: C[1,1]" value "$out/C.tns" "1 1" 182.3657894736842 1e-10
  check "covariance: C[1,9]" value "$out/C.tns" "1 9" -51.47368421052632 1e-10
  check "covariance: C[9,1]" value "$out/C.tns" "9 1" -51.47368421052632 1e-10
  check "covariance: C[7,8]" value "$out/C.tns" "7 8" -0.3458059436842104 1e-10
  check "covariance: C[2,3]" value "$out/C.tns" "2 3" -0.00016078947368421053 1e-10
  check "covariance: C[9,9]" value "$out/C.tns" "9 9" 231.05263157894734 1e-10
fi

# ---- chain.tin by hand: A B = [1 0 2; 0 -1 0] [0 1 0 0; 3 0 0 1; 0 0 2 0]
# = [0 1 4 0; -3 0 0 -1]; times C = [1 0; 0 2; 0 0; -1 1] gives
# [0 2; -2 -1] ----
if example chain chain.tin A="$exd/chain_A.mtx" B="$exd/chain_B.mtx" C="$exd/chain_C.mtx"; then
  check "chain: D[1,1] = 0" value "$out/D.tns" "1 1" 0
  check "chain: D[1,2]" value "$out/D.tns" "1 2" 2
  check "chain: D[2,1]" value "$out/D.tns" "2 1" -2
  check "chain: D[2,2]" value "$out/D.tns" "2 2" -1
fi
# ---- chain.tin on west0067 three times (no reference: 67^4 dense loops),
# against scipy: D = (W @ W @ W).toarray() -> count_nonzero 2827,
# D.sum() 77.12879999104948, D[1,1] -0.18877109791523647,
# D[48,38] -3.5303421507552, D[67,67] -0.5783408999999999 ----
west=$data/matrices/west0067.mtx
if have "$west" && example chain_west chain.tin noref A="$west" B="$west" C="$west"; then
  check "west0067^3: entries" entries "$out/D.tns" 2827
  s=$(grep -v '^#' "$out/D.tns" | awk '{ s += $3 } END { printf "%.17g", s }')
  check "west0067^3: sum $s" awk -v s="$s" 'BEGIN { d = s - 77.12879999104948; exit !(d < 1e-9 && d > -1e-9) }'
  check "west0067^3: D[1,1]" value "$out/D.tns" "1 1" -0.18877109791523647 1e-10
  check "west0067^3: D[48,38]" value "$out/D.tns" "48 38" -3.5303421507552 1e-10
  check "west0067^3: D[67,67]" value "$out/D.tns" "67 67" -0.5783408999999999 1e-10
fi

# ---- als.tin by hand: U V^T = [4.5 2 2; 4 1.5 2.75; 2 0 4; 3 1 2.5];
# the residuals at the 7 ratings are 0.5 -1 0 0.5 1 1 1.5, squares
# 0.25 + 1 + 0 + 0.25 + 1 + 1 + 2.25 = 5.75 (observed); the 5 unrated
# entries add 2^2 + 2.75^2 + 2^2 + 3^2 + 1^2 = 25.5625 (full 31.3125) ----
if example als als.tin X="$exd/als_X.mtx" U="$exd/als_U.tns" V="$exd/als_V.tns"; then
  check "als: full loss" value "$out/full.tns" "" 31.3125
  check "als: observed loss" value "$out/observed.tns" "" 5.75
fi

# ---- mttkrp.tin by hand on splatt_small (entries (i,j,k) value: 221 6,
# 131 2, 121 1, 231 5, 112 3, 211 4) with B = [1 2; 0 1; -1 0.5] and
# C = [1 -1; 2 0.5]:
#   M[1,:] = 2 B3.*C1 + 1 B2.*C1 + 3 B1.*C2 = [-2+0+6, -1-1+3] = [4, 1]
#   M[2,:] = 6 B2.*C2 + 5 B3.*C1 + 4 B1.*C1 = [0-5+4, 3-2.5-8] = [-1, -7.5]
splatt=$data/tensors/library-tests/splatt_small.tns
if have "$splatt" && example mttkrp mttkrp.tin T="$splatt" B="$exd/mttkrp_B.tns" C="$exd/mttkrp_C.tns"; then
  check "mttkrp: M[1,1]" value "$out/M.tns" "1 1" 4
  check "mttkrp: M[1,2]" value "$out/M.tns" "1 2" 1
  check "mttkrp: M[2,1]" value "$out/M.tns" "2 1" -1
  check "mttkrp: M[2,2]" value "$out/M.tns" "2 2" -7.5
fi
# taco_3tensor (736 1 1: 1, 1073 1 6: 1.1, 881 1 7: 1) with B = [1 2] and
# C[k,:] = [k 1]: M[736] = [1 2], M[881] = [7 2], M[1073] = 1.1 [6 2];
# the other 1070 rows are empty (a sparse result)
taco=$data/tensors/library-tests/taco_3tensor.tns
if have "$taco" && example mttkrp_taco mttkrp.tin T="$taco" B="$exd/taco_B.tns" C="$exd/taco_C.tns"; then
  check "mttkrp taco: 6 entries" entries "$out/M.tns" 6
  check "mttkrp taco: M[736,2]" value "$out/M.tns" "736 2" 2
  check "mttkrp taco: M[881,1]" value "$out/M.tns" "881 1" 7
  check "mttkrp taco: M[1073,1]" value "$out/M.tns" "1073 1" 6.6
  check "mttkrp taco: M[1073,2]" value "$out/M.tns" "1073 2" 2.2
  check "mttkrp taco: M[1,1]" value "$out/M.tns" "1 1" 0
fi

# ---- bellman_ford.tin on ldbc-directed-example (17 weighted edges) from
# d = {1: 0, 6: 0.2}, by hand:
#   d1: 1 0, 3 min(0+0.5, 0.2+0.23) = 0.43, 4 0.2+0.39 = 0.59, 5 0.3, 6 0.2
#   d2: 8 min(0.43+0.21, 0.3+0.1) = 0.4, 10 0.43+0.52 = 0.95; the others
#   keep their d1 (3->1 0.96, 5->3 0.99, 5->4 0.83, 3->5 1.05 are worse);
#   2, 7 and 9 have no path from 1 or 6: inf ----
ldbc=$data/matrices/ldbc-directed-example.mtx
if have "$ldbc" && example bellman_ford bellman_ford.tin W="$ldbc" d="$exd/sssp_d.tns"; then
  check "bellman_ford: the fill of d1 is not inf" grep -qx '# fill: inf' "$out/d1.tns"
  check "bellman_ford: the fill of d2 is not inf" grep -qx '# fill: inf' "$out/d2.tns"
  check "bellman_ford: d1 written" coords "$out/d1.tns" "1 3 4 5 6"
  check "bellman_ford: d1[1] = 0 stays" value "$out/d1.tns" 1 0
  check "bellman_ford: d1[3]" value "$out/d1.tns" 3 0.43
  check "bellman_ford: d1[4]" value "$out/d1.tns" 4 0.59
  check "bellman_ford: d1[8] = inf" value "$out/d1.tns" 8 inf
  check "bellman_ford: d2 written" coords "$out/d2.tns" "1 3 4 5 6 8 10"
  check "bellman_ford: d2[5]" value "$out/d2.tns" 5 0.3
  check "bellman_ford: d2[6]" value "$out/d2.tns" 6 0.2
  check "bellman_ford: d2[8]" value "$out/d2.tns" 8 0.4
  check "bellman_ford: d2[10]" value "$out/d2.tns" 10 0.95
  check "bellman_ford: d2[7] = inf" value "$out/d2.tns" 7 inf
  check "bellman_ford: reached" value "$out/reached.tns" "" 7
fi

# ---- noisyor.tin by hand: seeds 1 (prob. 1) and 4 (0.5); reach[2] = 0.5
# (1->2), reach[3] = por(0.2, 0.5*0.4) = 0.2 + 0.2 - 0.04 = 0.36,
# reach[5] = 0.5*0.1 = 0.05 (2 is no seed), reach[1] = reach[4] = 0;
# score = log(p / (1 - p)): 0, log(0.5625) = -0.5753641449035618,
# log(1/19) = -2.9444389791664403 (python's math.log), fill log(0) = -inf;
# expected = 0.5 + 0.36 + 0.05 = 0.91 ----
if example noisyor noisyor.tin P="$exd/cascade_P.mtx" s="$exd/cascade_s.tns"; then
  check "noisyor: reach written" coords "$out/reach.tns" "2 3 5"
  check "noisyor: reach[2]" value "$out/reach.tns" 2 0.5
  check "noisyor: reach[3]" value "$out/reach.tns" 3 0.36
  check "noisyor: reach[5]" value "$out/reach.tns" 5 0.05
  check "noisyor: score fill is not logit(0) = -inf" grep -qx '# fill: -inf' "$out/score.tns"
  check "noisyor: score[1] = -inf" value "$out/score.tns" 1 -inf
  check "noisyor: score[2]" value "$out/score.tns" 2 0
  check "noisyor: score[3]" value "$out/score.tns" 3 -0.5753641449035618
  check "noisyor: score[5]" value "$out/score.tns" 5 -2.9444389791664403
  check "noisyor: expected" value "$out/expected.tns" "" 0.91
fi

# ---- pagerank.tin iterated by pagerank.sh (each step's rnew.tns, with
# its fill line, is the next step's r) on celegansneural (weighted, 297
# nodes, some without out-edges), 30 steps from the uniform ranks.  numpy
# (scipy.io.mmread; d = A.sum(1); x = where(d > 0, r / d, 0); r = 0.15/n +
# 0.85 * (A.T @ x + r[d == 0].sum() / n), 30 times) gives r[1] =
# 0.00131473128417267, r[2] = 0.008042723961258724, r[45] =
# 0.1676643451445096 (the largest), r[297] = 0.0010680028453255545, and
# sum 1 within 1e-15.
celegans=$data/matrices/celegansneural.mtx
if have "$celegans"; then
  if GALLEYC=$bin sh "$ex/pagerank.sh" "$celegans" 30 "$tmp/pr" >/dev/null 2>"$tmp/pr.err"; then
    ok
    check "pagerank: r[1]" value "$tmp/pr/r.tns" 1 0.00131473128417267 1e-12
    check "pagerank: r[2]" value "$tmp/pr/r.tns" 2 0.008042723961258724 1e-12
    check "pagerank: r[45]" value "$tmp/pr/r.tns" 45 0.1676643451445096 1e-12
    check "pagerank: r[297]" value "$tmp/pr/r.tns" 297 0.0010680028453255545 1e-12
  else
    fail "pagerank.sh: $(cat "$tmp/pr.err")"
  fi
fi

echo "test_examples: $passes passed, $fails failed, $skips skipped"
[ "$fails" -eq 0 ]
