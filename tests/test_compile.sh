#!/bin/sh
# test_compile.sh -- `galleyc compile` end to end: the generated C file and
# header build with a plain C compiler (no libgalley), the driver's results
# equal `galleyc run --print` byte for byte, examples/aot builds and runs,
# and errors (unbound inputs, plans the driver does not support, missing
# -o, inputs that differ from the compiled data) are clear.
set -u
bin=${GALLEY_BUILDDIR:-.}/galleyc
src=${GALLEY_TEST_SRCDIR:-tests}/..
ex=$src/examples/aot
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "test_compile: no C compiler, skipped"; exit 77; }
. "${GALLEY_TEST_SRCDIR:-tests}/shlib.sh"

# A host for programs over A[i, j] (4 x 4, CSR, or CSC with the argument
# `csc`) and x[j] (a sorted list): the data of examples/aot, built through
# the header's struct layout.  It prints every output as `galleyc run
# --print` does; with the argument `wrong` it passes an x of the wrong
# size, which the driver must refuse.
cat >"$tmp/host.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include "prog.h"

static galley_pos A_pos[5] = {0, 2, 3, 5, 6};
static galley_crd A_crd[6] = {0, 2, 1, 0, 3, 3};
static double A_val[6] = {2, 1, 3, -1, 4, 5};
static galley_pos T_pos[5] = {0, 2, 3, 4, 6}; /* the same A as CSC */
static galley_crd T_crd[6] = {0, 2, 1, 0, 2, 3};
static double T_val[6] = {2, -1, 3, 1, 4, 5};
static galley_pos x_pos[2] = {0, 4};
static galley_crd x_crd[4] = {0, 1, 2, 3};
static double x_val[4] = {1, 2, 3, 4};
static galley_pos xs_pos[2] = {0, 3}; /* `sparse`: x[2] not stored */
static galley_crd xs_crd[3] = {0, 1, 3};

static void print_tns(const struct galley_tensor *t) {
  int64_t c[GALLEY_RT_MAX_ORDER] = {0}, total = 1;
  printf("# dims:");
  for (int k = 0; k < t->order; k++) {
    printf(" %lld", (long long)t->dims[k]);
    total *= t->dims[k];
  }
  printf("\n# fill: %.17g\n", t->fill);
  for (int64_t e = 0; e < total; e++) {
    int64_t rest = e, p = 0;
    for (int k = t->order - 1; k >= 0; k--) {
      c[k] = rest % t->dims[k];
      rest /= t->dims[k];
    }
    for (int l = 0; l < t->order; l++)
      p = p * t->lvl[l].dim + c[t->lvl[l].mode];
    if (t->val[p] == t->fill)
      continue;
    for (int k = 0; k < t->order; k++)
      printf("%lld ", (long long)c[k] + 1);
    printf("%.17g\n", t->val[p]);
  }
}

int main(int argc, char **argv) {
  struct galley_tensor A = {0}, x = {0};
  int csc = 0, wrong = 0, sparse = 0;
  for (int a = 1; a < argc; a++) {
    csc |= strcmp(argv[a], "csc") == 0;
    wrong |= strcmp(argv[a], "wrong") == 0;
    sparse |= strcmp(argv[a], "sparse") == 0;
  }
  A.order = 2;
  A.dims[0] = A.dims[1] = 4;
  A.lvl[0].kind = GALLEY_RT_DENSE;
  A.lvl[0].mode = 0;
  A.lvl[0].dim = 4;
  A.lvl[0].npar = 1;
  A.lvl[0].nchild = A.lvl[0].nset = 4;
  A.lvl[1].kind = GALLEY_RT_LIST;
  A.lvl[1].mode = 1;
  A.lvl[1].dim = 4;
  A.lvl[1].npar = 4;
  A.lvl[1].nchild = A.lvl[1].nset = 6;
  A.lvl[1].pos = csc ? T_pos : A_pos;
  A.lvl[1].crd = csc ? T_crd : A_crd;
  A.val = csc ? T_val : A_val;
  A.lvl[0].mode = csc;
  A.lvl[1].mode = !csc;
  A.nval = 6;
  x.order = 1;
  x.dims[0] = wrong ? 5 : 4;
  x.lvl[0].kind = GALLEY_RT_LIST;
  x.lvl[0].dim = x.dims[0];
  x.lvl[0].npar = 1;
  x.lvl[0].nchild = x.lvl[0].nset = sparse ? 3 : 4;
  x.lvl[0].pos = sparse ? xs_pos : x_pos;
  x.lvl[0].crd = sparse ? xs_crd : x_crd;
  x.val = x_val;
  x.nval = sparse ? 3 : 4;
  const struct galley_tensor *in[] = {&A, &x};
  struct galley_tensor *out[GALLEY_AOT_NUM_OUTPUTS];
  int rc = galley_aot_run(in, out);
  if (rc != GALLEY_AOT_OK) {
    fprintf(stderr, "host: %d\n", rc);
    return 1;
  }
  for (int k = 0; k < GALLEY_AOT_NUM_OUTPUTS; k++) {
    if (GALLEY_AOT_NUM_OUTPUTS > 1)
      printf("# output: %s\n", galley_aot_output_names[k]);
    print_tns(out[k]);
    galley_aot_free(out[k]);
  }
  return 0;
}
EOF

A=$ex/A.mtx
x=$ex/x.tns

# compile_and_compare NAME PROG.tin [LIBS [HOST-ARG]]: compile, build with
# cc alone, run, and compare with `galleyc run --print`.
compile_and_compare() {
  name=$1 prog=$2 libs=${3:-} hostarg=${4:-}
  rm -f "$tmp/prog.c" "$tmp/prog.h"
  expect_status 0 "$bin" compile "$prog" -o "$tmp/prog.c" --header "$tmp/prog.h" A="$A" x="$x"
  if $cc -std=c99 -Wall -I"$tmp" "$tmp/host.c" "$tmp/prog.c" -o "$tmp/host" $libs 2>"$tmp/ccerr"; then ok; else
    fail "$name: the generated C does not build with $cc alone"; sed 's/^/  cc: /' "$tmp/ccerr" | head -20; return; fi
  if "$tmp/host" $hostarg >"$tmp/aot.out" 2>"$tmp/err"; then ok; else
    fail "$name: the host failed"; cat "$tmp/err"; return; fi
  "$bin" run "$prog" A="$A" x="$x" --print >"$tmp/run.out" 2>"$tmp/err" || fail "$name: galleyc run failed"
  if cmp -s "$tmp/aot.out" "$tmp/run.out"; then ok; else
    fail "$name: the compiled driver differs from galleyc run"; diff "$tmp/run.out" "$tmp/aot.out" | sed 's/^/  /'; fi
  "$bin" run "$prog" A="$A" x="$x" --print --backend=reference >"$tmp/ref.out" 2>/dev/null
  if cmp -s "$tmp/aot.out" "$tmp/ref.out"; then ok; else
    fail "$name: the compiled driver differs from the reference evaluator"; diff "$tmp/ref.out" "$tmp/aot.out" | sed 's/^/  /'; fi
}

# ---- the example program, and programs with intermediates and scalars ----
compile_and_compare spmv "$ex/spmv.tin"
cat >"$tmp/mvn.tin" <<'EOF'
input A[i, j], x[j]
y[i] = A[i, j] * x[j]
n = sum(i: y[i])
output y, n
EOF
compile_and_compare mvn "$tmp/mvn.tin"
cat >"$tmp/chain.tin" <<'EOF'
input A[i, j], x[j]
t[i] = A[i, j] * x[j]       # an intermediate, freed after u reads it
u[i] = max(t[i], 0) + 1
m = max(i, j: A[i, j])
output u, m
EOF
compile_and_compare chain "$tmp/chain.tin"
cat >"$tmp/exp.tin" <<'EOF'
input A[i, j], x[j]
z[i] = sum(j: exp(A[i, j]) * x[j])   # exp(A) has fill 1: a union
output z
EOF
compile_and_compare exp "$tmp/exp.tin" -lm
# a plan that transposes an input: the driver takes it transposed (CSC),
# as the header says, and refuses the CSR the file was read as
cat >"$tmp/tr.tin" <<'EOF'
input A[i, j], x[i]
y[j] = A[i, j] * x[i]
EOF
compile_and_compare transpose "$tmp/tr.tin" "" csc
grep -q 'inputs\[0\] A: dims 4 4, levels dense:1,list:0, fill 0' "$tmp/prog.h" && ok || fail "header: A's transposed format"
if "$tmp/host" >/dev/null 2>"$tmp/err"; then fail "CSR A accepted by a CSC driver"; else
  [ "$(cat "$tmp/err")" = "host: -2" ] && ok || fail "CSR A: $(cat "$tmp/err")"; fi

# the header declares the entry point and the tensor layout
grep -q 'int galley_aot_run(const struct galley_tensor \*const \*inputs' "$tmp/prog.h" && ok || fail "header lacks galley_aot_run"
grep -q 'struct galley_tensor {' "$tmp/prog.h" && ok || fail "header lacks struct galley_tensor"
# the C file needs no header: it builds alone
$cc -std=c99 -c "$tmp/prog.c" -o "$tmp/prog.o" 2>"$tmp/ccerr" && ok || { fail "prog.c alone"; head "$tmp/ccerr"; }
# kernels are named galley_qN, never after the program's queries
grep -q 'int galley_q[0-9]*(const galley_kernel_args' "$tmp/prog.c" && ok || fail "no kernel galley_qN"

# the driver refuses inputs that differ from the compiled data
compile_and_compare spmv "$ex/spmv.tin" >/dev/null
if "$tmp/host" wrong >/dev/null 2>"$tmp/err"; then fail "wrong x accepted"; else
  [ "$(cat "$tmp/err")" = "host: -2" ] && ok || fail "wrong x: $(cat "$tmp/err")"; fi
# x.tns stores every entry, so the kernels read its list as a dense level
# (O(1) lookups): a list with a missing entry must be refused
grep -q 'x: dims 4, levels dense:0, fill 0' "$tmp/prog.h" && ok || fail "header: x read as dense"
if "$tmp/host" sparse >/dev/null 2>"$tmp/err"; then fail "a sparse x accepted"; else
  [ "$(cat "$tmp/err")" = "host: -2" ] && ok || fail "sparse x: $(cat "$tmp/err")"; fi

# ---- examples/aot/build.sh: plain cc, the host checks its own result ----
mkdir "$tmp/ex"
if GALLEYC=$bin CC=$cc sh "$ex/build.sh" "$tmp/ex" >"$tmp/out" 2>"$tmp/err"; then ok; else
  fail "examples/aot/build.sh"; sed 's/^/  /' "$tmp/err"; fi
printf '# dims: 4\n# fill: 0\n1 5\n2 6\n3 15\n4 20\n' >"$tmp/want"
cmp -s "$tmp/out" "$tmp/want" && ok || { fail "examples/aot output"; diff "$tmp/want" "$tmp/out"; }

# ---- errors ----
mkdir "$tmp/none"
cd "$tmp/none" || exit 1
expect_status 3 "$bin" compile "$ex/spmv.tin" -o "$tmp/none/a.c" A="$A"
expect_err "galleyc: error: input 'x' (declared at $ex/spmv.tin:3:16) is not bound: add x=FILE"
expect_err_has "compile plans for the formats, sizes and fills of the bound data"
expect_status 2 "$bin" compile "$ex/spmv.tin" A="$A" x="$x"
expect_err "galleyc: error: compile needs -o OUT.c"
expect_status 2 "$bin" compile "$ex/spmv.tin" -o
expect_status 2 "$bin" compile "$ex/spmv.tin" -o a.c --bogus
expect_err "galleyc: error: unknown option '--bogus'"
expect_status 2 "$bin" compile "$ex/spmv.tin" -o a.c --stats x
expect_err "galleyc: error: bad binding 'x': expected NAME=FILE"
# --stats NAME=FILE binds like NAME=FILE
expect_status 0 "$bin" compile "$ex/spmv.tin" -o "$tmp/s.c" --stats A="$A" --stats x="$x"
[ -s "$tmp/s.c" ] && ok || fail "--stats bindings wrote nothing"
# a plan that reads an input in two formats: not supported, said so
cat >"$tmp/two.tin" <<'EOF'
input A[i, j]
y[i] = sum(j: A[i, j] * A[j, i]) + 1   # + 1: a dense result
EOF
expect_status 3 "$bin" compile "$tmp/two.tin" -o "$tmp/none/two.c" A="$A"
expect_err "galleyc: error: cannot compile $tmp/two.tin ahead of time: the plan reads input 'A' in two storage formats; ahead-of-time drivers take each input in one format"
# an unwritable output: data error, nothing left behind
expect_status 3 "$bin" compile "$ex/spmv.tin" -o "$tmp/no/such/dir/a.c" A="$A" x="$x"
[ -z "$(ls -A "$tmp/none")" ] && ok || fail "files written: $(ls -A "$tmp/none")"

echo "test_compile: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
