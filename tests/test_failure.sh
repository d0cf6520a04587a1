#!/bin/sh
# test_failure.sh -- `galleyc run` writes its results all or none: a disk
# that fills up while writing the second of two results, or a rename that
# fails, leaves the previous results exactly as they were and no
# temporary; SIGTERM and SIGINT while writing remove the temporaries and
# exit 143 and 130; stale temporaries of a killed run are swept; and out
# of memory is a resource error (exit 3) that names the query.
set -u
bin=${GALLEY_BUILDDIR:-.}/galleyc
. "${GALLEY_TEST_SRCDIR:-tests}/shlib.sh"

# no_temps DIR: no NAME.tns.tmpXXXXXX left in DIR
no_temps() {
  if ls -A "$1" | grep -q '\.tmp'; then fail "temporaries left in $1: $(ls -A "$1")"; else ok; fi
}

# two results: a scalar s (written first, tiny) and a 40 x 40 matrix B
printf 'input x[i], y[j]\ns = sum(i: x[i])\nB[i, j] = x[i] * y[j]\noutput s, B\n' >"$tmp/two.tin"
awk 'BEGIN { print "# dims: 40"; for (i = 1; i <= 40; i++) print i, 1.5 }' >"$tmp/v.tns"
awk 'BEGIN { print "# dims: 40"; for (i = 1; i <= 40; i++) print i, 2.5 }' >"$tmp/w.tns"
d=$tmp/res
mkdir "$d"
expect_status 0 "$bin" run "$tmp/two.tin" x="$tmp/v.tns" y="$tmp/v.tns" -o "$d"
cp "$d/s.tns" "$tmp/s.before"
cp "$d/B.tns" "$tmp/B.before"
unchanged() { # the results of the first run, untouched
  cmp -s "$d/s.tns" "$tmp/s.before" && cmp -s "$d/B.tns" "$tmp/B.before" && ok ||
    fail "$1: the previous results changed"
}

# ---- the disk fills up while writing the second result ----
# A file size limit of 4 blocks (2 KiB) lets s through and stops B with
# EFBIG (SIGXFSZ ignored, as a full disk gives ENOSPC): exit 3, B named,
# and s is not replaced either.
cat >"$tmp/limit.sh" <<'EOF'
ulimit -f 4 && trap '' XFSZ && exec "$@"
EOF
expect_status 3 sh "$tmp/limit.sh" "$bin" run "$tmp/two.tin" x="$tmp/w.tns" y="$tmp/w.tns" -o "$d"
expect_err "galleyc: error: $d/B.tns: cannot write: File too large"
unchanged "disk full"
no_temps "$d"

# ---- a rename that fails: B's name is taken by a directory ----
# s is renamed first and must be put back; in a fresh directory it must
# be removed again.
mkdir "$tmp/d2" "$tmp/d2/B.tns"
cp "$tmp/s.before" "$tmp/d2/s.tns"
expect_status 3 "$bin" run "$tmp/two.tin" x="$tmp/w.tns" y="$tmp/w.tns" -o "$tmp/d2"
expect_err "galleyc: error: $tmp/d2/B.tns: cannot write: Is a directory (no result written)"
cmp -s "$tmp/d2/s.tns" "$tmp/s.before" && ok || fail "rename failure: s.tns was not put back"
no_temps "$tmp/d2"
rm "$tmp/d2/s.tns"
expect_status 3 "$bin" run "$tmp/two.tin" x="$tmp/w.tns" y="$tmp/w.tns" -o "$tmp/d2"
[ ! -e "$tmp/d2/s.tns" ] && ok || fail "rename failure: a new s.tns was left"
no_temps "$tmp/d2"

# ---- signals while writing: temporaries removed, 143 / 130 ----
# Two results of 1,500 x 1,500 entries take a good part of a second to
# write; the run is stopped as soon as a temporary appears, signalled,
# and continued, so the signal always lands while results are staged.
awk 'BEGIN { print "# dims: 1500"; for (i = 1; i <= 1500; i++) print i, i / 7 }' >"$tmp/big.tns"
printf 'input x[i], y[j]\nP[i, j] = x[i] * y[j]\nQ[i, j] = x[i] / y[j]\n' >"$tmp/big.tin"
# signal_run SIG WANT [COMMAND PREFIX...]
signal_run() {
  sig=$1 want=$2; shift 2
  rm -rf "$tmp/sig"
  mkdir "$tmp/sig"
  "$@" "$bin" run "$tmp/big.tin" x="$tmp/big.tns" y="$tmp/big.tns" -o "$tmp/sig" \
    >/dev/null 2>"$tmp/sigerr" &
  pid=$!
  n=0
  while [ $n -lt 3000 ] && ! ls -A "$tmp/sig" | grep -q '\.tmp'; do
    sleep 0.01
    n=$((n + 1))
  done
  kill -STOP "$pid" 2>/dev/null
  kill -"$sig" "$pid" 2>/dev/null
  kill -CONT "$pid" 2>/dev/null
  wait "$pid"
  got=$?
  [ "$got" -eq "$want" ] && ok || fail "SIG$sig while writing: exit $got, expected $want"
  no_temps "$tmp/sig"
  [ -z "$(ls -A "$tmp/sig")" ] && ok || fail "SIG$sig: results written: $(ls -A "$tmp/sig")"
}
signal_run TERM 143
# a background job of sh ignores SIGINT; env gives the run the default
if env --default-signal=INT true 2>/dev/null; then
  signal_run INT 130 env --default-signal=INT
fi

# ---- stale temporaries of a killed run are swept ----
mkdir "$tmp/d3"
echo stale >"$tmp/d3/old.tns.tmpAb12Cd"
echo stale >"$tmp/d3/old.mtx.gz.tmp0a1b2c"
echo fresh >"$tmp/d3/new.tns.tmpZz99Yy"
echo mine >"$tmp/d3/notes.tmp"
touch -d '20 minutes ago' "$tmp/d3/old.tns.tmpAb12Cd" "$tmp/d3/old.mtx.gz.tmp0a1b2c" "$tmp/d3/notes.tmp"
expect_status 0 "$bin" run "$tmp/two.tin" x="$tmp/v.tns" y="$tmp/v.tns" -o "$tmp/d3"
[ ! -e "$tmp/d3/old.tns.tmpAb12Cd" ] && [ ! -e "$tmp/d3/old.mtx.gz.tmp0a1b2c" ] && ok ||
  fail "stale temporaries kept: $(ls -A "$tmp/d3")"
[ -e "$tmp/d3/new.tns.tmpZz99Yy" ] && [ -e "$tmp/d3/notes.tmp" ] && ok ||
  fail "a fresh temporary or another file was removed: $(ls -A "$tmp/d3")"

# convert sweeps the directory it writes into as well
mkdir "$tmp/d5"
echo stale >"$tmp/d5/m.tns.tmp0f0f0f"
touch -d '20 minutes ago' "$tmp/d5/m.tns.tmp0f0f0f"
expect_status 0 "$bin" convert "$tmp/v.tns" "$tmp/d5/v.tns"
[ "$(ls -A "$tmp/d5")" = v.tns ] && ok || fail "convert: $(ls -A "$tmp/d5")"

# ---- out of memory: a resource error naming the query, exit 3 ----
# (a limit on address space; the sanitizers reserve far more, so only in
# the plain build)
if ! grep -q '^#define GALLEY_SANITIZERS 1' "${GALLEY_BUILDDIR:-.}/config.h" 2>/dev/null; then
  awk 'BEGIN { print "# dims: 8000"; for (i = 1; i <= 8000; i++) print i, i % 7 + 1 }' >"$tmp/d8.tns"
  printf 'input x[i], y[j]\nO[i, j] = x[i] + y[j]\n' >"$tmp/sum.tin"
  cat >"$tmp/vlimit.sh" <<'EOF'
ulimit -v 250000 && exec "$@"
EOF
  mkdir "$tmp/d4"
  expect_status 3 sh "$tmp/vlimit.sh" "$bin" run "$tmp/sum.tin" x="$tmp/d8.tns" y="$tmp/d8.tns" -o "$tmp/d4"
  case $(head -n 1 "$tmp/err") in
    "galleyc: error: "*"'O'"*) ok ;;
    *) fail "out of memory: $(cat "$tmp/err")" ;;
  esac
  expect_empty_dir "$tmp/d4"
  # values of both signs can cancel (x[i] + y[j] = 0 stores nothing), so
  # no entry is stored for sure; the outer sum at n = 1e5 is still refused
  # before any kernel runs, by its estimate (the product: 1e10 entries),
  # naming the query (issue 17)
  awk 'BEGIN { print "# dims: 100000"; for (i = 1; i <= 100000; i++) print i, (i % 7) - 3.5 }' >"$tmp/m100k.tns"
  expect_status 3 sh "$tmp/vlimit.sh" "$bin" run "$tmp/sum.tin" x="$tmp/m100k.tns" y="$tmp/m100k.tns" -o "$tmp/d4" -v
  grep -q "galleyc: error: query 'O' needs an estimated 1.2e+11 bytes" "$tmp/err" && ok ||
    fail "mixed-sign outer sum: $(cat "$tmp/err")"
  if grep -q "^query \|ran in" "$tmp/err"; then
    fail "mixed-sign outer sum: a kernel ran before the refusal"; else ok; fi
  expect_empty_dir "$tmp/d4"

  # ---- a hypersparse input: 10^9 x 10^9 with 2 entries ----
  # read with a sorted-list root (a dense one needs 7.5 GiB of row
  # positions), and planned and run by both planners within the limit
  printf '%%%%MatrixMarket matrix coordinate real general\n1000000000 1000000000 2\n1 5 1.5\n999999999 1000000000 2.5\n' >"$tmp/hyper.mtx"
  printf '# dims: 1000000000\n5 2\n1000000000 4\n' >"$tmp/hx.tns"
  expect_status 0 sh "$tmp/vlimit.sh" "$bin" info "$tmp/hyper.mtx"
  expect_out "format list:0,list:1"
  printf 'input A[i, j], x[j]\ny[i] = sum(j: A[i, j] * x[j])\nt = sum(i, j: A[i, j] * x[j])\noutput y, t\n' >"$tmp/hspmv.tin"
  expect_status 0 sh "$tmp/vlimit.sh" "$bin" run "$tmp/hspmv.tin" A="$tmp/hyper.mtx" x="$tmp/hx.tns" --print
  expect_out "999999999 10"
  expect_out "13"
  printf 'input A[i, j], x[j]\nt = sum(i, j: A[i, j] * x[j])\n' >"$tmp/hsum.tin"
  expect_status 0 sh "$tmp/vlimit.sh" "$bin" run "$tmp/hsum.tin" A="$tmp/hyper.mtx" x="$tmp/hx.tns" --print --planner=simple
  expect_out "13"
  # the simple planner's results are dense: y (8 GB) is refused with a
  # resource error naming it, nothing written
  mkdir "$tmp/d6"
  expect_status 3 sh "$tmp/vlimit.sh" "$bin" run "$tmp/hspmv.tin" A="$tmp/hyper.mtx" x="$tmp/hx.tns" --planner=simple -o "$tmp/d6"
  case $(head -n 1 "$tmp/err") in
    "galleyc: error: "*"'y'"*) ok ;;
    *) fail "simple planner, dense y: $(cat "$tmp/err")" ;;
  esac
  expect_empty_dir "$tmp/d6"
fi

echo "test_failure: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
