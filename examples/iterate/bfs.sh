#!/bin/sh
# bfs.sh GRAPH.mtx[.gz] [SOURCE] [DIR] -- breadth-first levels from
# SOURCE (1-based, default 1) by iterating examples/bfs.tin with galleyc
# run: each step's next.tns and visited.tns are the next step's f and v,
# until the frontier is empty (count is 0).  Writes DIR/levels.tns (the
# level of every reached vertex, fill inf for the others) and prints the
# steps and its path.
set -eu
graph=$1 source=${2:-1} dir=${3:-bfs.out}
here=$(cd "$(dirname "$0")" && pwd)
galleyc=${GALLEYC:-galleyc}
. "$here/loop.sh" # size_of, scalar_of
mkdir -p "$dir"
n=$(size_of "$graph")
printf '# dims: %d\n%d 1\n' "$n" "$source" >"$dir/f.tns"
cp "$dir/f.tns" "$dir/v.tns"
printf '%d 0\n' "$source" >"$dir/levels.txt"
depth=0
while :; do
  "$galleyc" run "$here/../bfs.tin" A="$graph" f="$dir/f.tns" v="$dir/v.tns" -o "$dir" -q
  depth=$((depth + 1))
  [ "$(scalar_of "$dir/count.tns")" = 0 ] && break
  # the vertices first reached now (next is 0/1 with fill 0)
  awk -v k="$depth" '!/^#/ && $2 != 0 { print $1, k }' "$dir/next.tns" >>"$dir/levels.txt"
  mv "$dir/next.tns" "$dir/f.tns"
  mv "$dir/visited.tns" "$dir/v.tns"
done
{ printf '# dims: %d\n# fill: inf\n' "$n"; sort -n "$dir/levels.txt"; } >"$dir/levels.tns"
echo "bfs: $depth steps, depth $((depth - 1))"
echo "$dir/levels.tns"
