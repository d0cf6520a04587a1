#!/usr/bin/env bash
# build.sh -- install what galleyc needs, build it, and run it or its tests.
#
#   ./build.sh          install packages, build, run the main job
#   ./build.sh check    install packages, build, run every test (plain and
#                       under AddressSanitizer + UndefinedBehaviorSanitizer)
#   ./build.sh build    install packages and build only
#
# Builds out of tree in build/ (and build-asan/ for the sanitizer run), so
# the source tree stays clean.  Needs root (or sudo) only to install
# missing Debian packages.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
jobs=$(nproc 2>/dev/null || echo 2)

packages=(build-essential autoconf automake pkg-config zlib1g-dev libtcc-dev tcc
          check clang libclang-rt-dev libopenmpi-dev openmpi-bin
          python3 python3-numpy python3-scipy libgraphblas-dev)

install_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "build.sh: installing ${missing[*]}"
  local sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

bootstrap() {
  if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
    autoreconf -fi >/dev/null
  fi
}

# configure_in DIR [configure options...]
configure_in() {
  local dir=$1; shift
  mkdir -p "$dir"
  if [ ! -f "$dir/Makefile" ] || [ configure -nt "$dir/config.status" ]; then
    (cd "$dir" && ../configure "$@")
  fi
}

build() {
  install_packages
  bootstrap
  configure_in build
  make -C build -s -j"$jobs"
}

# Run `make check` in DIR and print the suite's counts.
check_in() {
  local dir=$1 status=0
  make -C "$dir" -s -j"$jobs" check || status=$?
  if [ -f "$dir/test-suite.log" ]; then
    sed -n '1,12p' "$dir/test-suite.log" | grep -E '^# (TOTAL|PASS|FAIL|ERROR|SKIP)' || true
  fi
  [ $status -eq 0 ] || { echo "build.sh: tests failed in $dir (see $dir/test-suite.log)"; cat "$dir"/tests/*.log 2>/dev/null | grep -E 'FAIL|ERROR|error' | head -40; }
  return $status
}

case "${1:-run}" in
  run)
    build
    echo "== galleyc info on a bundled tensor"
    build/galleyc info examples/data/small.tns
    echo "== logistic regression inference (examples/logistic.tin)"
    build/galleyc run examples/logistic.tin X=examples/data/X.mtx \
      theta=examples/data/theta.tns --print
    if [ -f ../shared/data/matrices/karate.mtx ]; then
      echo "== triangles of the karate club graph (examples/triangles.tin)"
      build/galleyc info ../shared/data/matrices/karate.mtx
      build/galleyc run examples/triangles.tin \
        E=../shared/data/matrices/karate.mtx --print
    fi
    ;;
  build)
    build
    ;;
  check)
    build
    configure_in build-asan --enable-sanitizers
    plain=0 asan=0
    check_in build || plain=$?
    echo "== the same tests under ASan + UBSan"
    check_in build-asan || asan=$?
    echo "== the threaded tests under ThreadSanitizer"
    configure_in build-tsan --enable-tsan
    tsan=0
    make -C build-tsan -s -j"$jobs" check \
      TESTS="tests/test_threads tests/test_threads_cli.sh" || tsan=$?
    [ $tsan -eq 0 ] || cat build-tsan/tests/test_threads*.log | grep -E 'WARNING|FAIL|error' | head -40
    pass=0 fail=0
    for d in build build-asan build-tsan; do
      p=$(sed -n 's/^# PASS: *//p' "$d/test-suite.log" 2>/dev/null | head -n1)
      f=$(sed -n 's/^# FAIL: *//p' "$d/test-suite.log" 2>/dev/null | head -n1)
      e=$(sed -n 's/^# ERROR: *//p' "$d/test-suite.log" 2>/dev/null | head -n1)
      pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0} + ${e:-0}))
    done
    [ $plain -eq 0 ] && [ $asan -eq 0 ] && [ $tsan -eq 0 ] || fail=$((fail > 0 ? fail : 1))
    echo "tests: $pass passed, $fail failed"
    [ $fail -eq 0 ]
    ;;
  *)
    echo "usage: ./build.sh [run|build|check]" >&2
    exit 2
    ;;
esac
