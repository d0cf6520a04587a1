#!/bin/sh
# bellman_ford.sh GRAPH.mtx[.gz] [SOURCE] [DIR] -- shortest path lengths
# from SOURCE (1-based, default 1) by iterating bellman_ford_step.tin with
# galleyc run: each step's dnew.tns (fill inf: only the reached vertices
# are written) is the next step's d, until no distance improves (changed
# is 0).  Prints the steps and the path of the distances file.
set -eu
graph=$1 source=${2:-1} dir=${3:-bellman_ford.out}
here=$(cd "$(dirname "$0")" && pwd)
galleyc=${GALLEYC:-galleyc}
. "$here/loop.sh" # size_of, scalar_of
mkdir -p "$dir"
n=$(size_of "$graph")
# the start: 0 at the source, inf (the fill) elsewhere
printf '# dims: %d\n# fill: inf\n%d 0\n' "$n" "$source" >"$dir/d.tns"
steps=0
while :; do
  "$galleyc" run "$here/bellman_ford_step.tin" W="$graph" d="$dir/d.tns" -o "$dir" -q
  mv "$dir/dnew.tns" "$dir/d.tns"
  steps=$((steps + 1))
  [ "$(scalar_of "$dir/changed.tns")" = 0 ] && break
  if [ "$steps" -ge "$n" ]; then
    echo "bellman_ford.sh: a negative cycle is reachable from vertex $source: distances still improve after $n steps" >&2
    exit 1
  fi
done
echo "bellman-ford: $steps steps to the fixed point"
echo "$dir/d.tns"
