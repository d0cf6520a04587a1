#!/bin/sh
# pagerank.sh GRAPH.mtx[.gz] STEPS [DIR] [TOL] -- iterate examples/pagerank.tin
# with galleyc run: each step's rnew.tns (with its fill line) is the next
# step's r.  Starts from the uniform ranks; runs STEPS steps, or fewer
# when TOL is given and the L1 change of a step (delta) falls below it;
# prints the final ranks file.
set -eu
graph=$1 steps=$2 dir=${3:-pagerank.out} tol=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
galleyc=${GALLEYC:-galleyc}
mkdir -p "$dir"
n=$(case $graph in *.gz) gzip -dc "$graph" ;; *) cat "$graph" ;; esac |
  awk '!/^%/ { print $1; exit }')
# uniform start: every rank 1/n, written as the fill of an empty vector
awk -v n="$n" 'BEGIN { printf "# dims: %d\n# fill: %.17g\n", n, 1 / n }' >"$dir/r.tns"
k=0
while [ "$k" -lt "$steps" ]; do
  "$galleyc" run "$here/pagerank.tin" A="$graph" r="$dir/r.tns" -o "$dir" -q
  mv "$dir/rnew.tns" "$dir/r.tns"
  k=$((k + 1))
  if [ -n "$tol" ] && awk -v t="$tol" '!/^#/ { d = $1 } END { exit !(d < t) }' "$dir/delta.tns"; then
    break
  fi
done
echo "$dir/r.tns"
