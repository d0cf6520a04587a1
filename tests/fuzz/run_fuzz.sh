#!/bin/sh
# run_fuzz.sh -- build the file-reader (plain and gzip), .tin front-end and
# tensor-builder fuzz targets with libFuzzer and run
# each briefly on a copy of its seed corpus; fail when a crash, sanitizer
# report or broken invariant is found (the reproducer is printed and kept
# under $GALLEY_BUILDDIR/fuzz-artifacts/).
#
# Environment (set by `make check`): CLANG (empty: skip, exit 77),
# GALLEY_TEST_SRCDIR (<src>/tests), GALLEY_BUILDDIR.  Optional:
# GALLEY_FUZZ_SECONDS (default 20 per target).
set -u

if [ -z "${CLANG:-}" ]; then
  echo "run_fuzz.sh: no clang, fuzzing skipped"
  exit 77
fi
tests=${GALLEY_TEST_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
top=$(cd "$tests/.." && pwd)
build=${GALLEY_BUILDDIR:-.}
secs=${GALLEY_FUZZ_SECONDS:-20}

work=$(mktemp -d "${TMPDIR:-/tmp}/galley_fuzz.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT INT TERM

rt=$top/runtime
io_sources="$rt/io_reader.c $rt/io_mtx.c $rt/io_tns.c $rt/error.c $rt/coo.c"
front_sources="$top/src/front/lex.c $top/src/front/parse.c $top/src/front/sema.c $top/src/front/grad.c
  $top/src/ir/arena.c $top/src/ir/ops.c $top/src/ir/plan.c $rt/error.c"
runtime_sources=$(ls "$rt"/*.c)
status=0
for target in mtx tns tin build gz; do
  exe=$work/fuzz_$target
  case $target in
    tin) sources=$front_sources ;;
    build) sources=$runtime_sources ;;
    *) sources=$io_sources ;;
  esac
  # shellcheck disable=SC2086
  if ! $CLANG -g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L \
      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
      -I"$top/include" -I"$rt" -I"$top/src/ir" -I"$build" \
      "$tests/fuzz/fuzz_$target.c" $sources -o "$exe" -lz -lm; then
    echo "run_fuzz.sh: cannot build fuzz_$target"
    exit 99
  fi
  corpus=$work/corpus_$target
  mkdir "$corpus"
  cp "$tests/fuzz/corpus/$target/"* "$corpus/"
  dict=
  [ -f "$tests/fuzz/$target.dict" ] && dict=-dict="$tests/fuzz/$target.dict"
  echo "run_fuzz.sh: fuzz_$target for ${secs}s"
  # shellcheck disable=SC2086
  (cd "$work" && "$exe" $dict -max_total_time="$secs" -timeout=10 \
      -rss_limit_mb=2048 -artifact_prefix="$work/crash_$target-" \
      -print_final_stats=1 "$corpus" >"$work/log_$target" 2>&1)
  rc=$?
  grep -E '^stat::number_of_executed_units|^#[0-9]+ *DONE' \
    "$work/log_$target" || true
  if [ $rc -ne 0 ]; then
    status=1
    echo "run_fuzz.sh: fuzz_$target FAILED (exit $rc); log tail:"
    tail -n 60 "$work/log_$target"
    mkdir -p "$build/fuzz-artifacts"
    for f in "$work"/crash_"$target"-*; do
      [ -f "$f" ] || continue
      cp "$f" "$build/fuzz-artifacts/"
      echo "reproducer $build/fuzz-artifacts/$(basename "$f") (od -c):"
      od -c "$f" | head -n 40
      echo "replay: $exe $f (rebuild as above)"
    done
  fi
done
exit $status
