#!/bin/sh
# build.sh -- compile spmv.tin ahead of time and build host.c against the
# generated C with a plain C compiler (no libgalley), then run it.
#
#   ./build.sh [OUTDIR]      (GALLEYC and CC may name the tools)
#
# compile needs every input bound to a file: the plan, and so the driver,
# is made for those formats, sizes and fills (here CSR A and a list x).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-.}
GALLEYC=${GALLEYC:-galleyc}
CC=${CC:-cc}
"$GALLEYC" compile "$here/spmv.tin" -o "$out/spmv.c" --header "$out/spmv.h" \
  A="$here/A.mtx" x="$here/x.tns"
# spmv uses no math functions; a program that does needs -lm
$CC -O2 -I"$out" "$here/host.c" "$out/spmv.c" -o "$out/spmv_host"
"$out/spmv_host"
