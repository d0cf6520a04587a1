# shlib.sh -- what the shell tests share: a scratch directory removed on
# exit, pass/fail counting, and checks of a command's exit status, output
# and files.  Sourced by test_cli.sh, test_run.sh and test_compile.sh.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0

ok() { passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_status WANT CMD... : run CMD, keep stdout/stderr in $tmp/out, $tmp/err
expect_status() {
  want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -eq "$want" ]; then ok; else
    fail "'$*' exited $got, expected $want"; sed 's/^/  stderr: /' "$tmp/err"; fi
}
expect_out() { # PATTERN (fixed string) in stdout
  if grep -qF -- "$1" "$tmp/out"; then ok; else fail "stdout lacks '$1'"; sed 's/^/  stdout: /' "$tmp/out"; fi
}
expect_err() { # exact first line of stderr
  first=$(head -n 1 "$tmp/err")
  if [ "$first" = "$1" ]; then ok; else fail "stderr '$first', expected '$1'"; fi
}
expect_err_has() { # fixed string somewhere in stderr
  if grep -qF -- "$1" "$tmp/err"; then ok; else fail "stderr lacks '$1'"; sed 's/^/  stderr: /' "$tmp/err"; fi
}
expect_file() { # FILE EXPECTED-TEXT: byte for byte
  printf '%s\n' "$2" >"$tmp/want"
  if [ -f "$1" ] && cmp -s "$1" "$tmp/want"; then ok; else
    fail "$1 differs from the expected text"; diff "$tmp/want" "$1" 2>&1 | sed 's/^/  /'; fi
}
expect_empty_dir() { # DIR: nothing was written
  if [ -z "$(ls -A "$1")" ]; then ok; else fail "files written in $1: $(ls -A "$1")"; fi
}
