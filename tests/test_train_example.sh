#!/bin/sh
# test_train_example.sh -- examples/train/train, softmax regression on Cora
# trained by gradient descent through the context API with gradients from
# grad: the loss goes down at every printed step, galleyc's loss and
# gradient agree with the example's own loops (the textbook gradient
# X^T (softmax(Z) - Y), written independently), every run after the first
# reuses the plan and kernels (same formats and sizes), and after 8 steps
# the model fits most of its training papers.
set -u
train=${GALLEY_BUILDDIR:-.}/examples/train/train
data=${GALLEY_DATA_DIR:-${GALLEY_TEST_SRCDIR:-tests}/../../shared/data}
. "${GALLEY_TEST_SRCDIR:-tests}/shlib.sh"
gcn=$data/matrices/gcn
if [ ! -f "$gcn/cora_features.mtx" ]; then
  echo "test_train_example: skip: $gcn not found (set GALLEY_DATA_DIR)"
  exit 77
fi

expect_status 0 "$train" "$gcn" 8
# step 0 is log 7 (W = 0: every class equally likely)
grep -q '^step   0  loss 1.945910$' "$tmp/out" && ok || fail "step 0: $(cat "$tmp/out")"
awk '/^step/ { if (n++ && $4 >= last) bad = 1; last = $4 } END { exit bad || n != 9 }' "$tmp/out" \
  && ok || fail "the loss does not go down: $(cat "$tmp/out")"
awk '/^largest relative difference/ { found = 1; if ($NF + 0 > 1e-12) bad = 1 } END { exit bad || !found }' \
  "$tmp/out" && ok || fail "galleyc and the loops disagree: $(cat "$tmp/out")"
sed -n 's/.* in 8 steps (kernels reused in \([0-9]*\) runs)$/\1/p' "$tmp/out" | awk '{ exit !($1 >= 7) }' \
  && ok || fail "reuse: $(cat "$tmp/out")"
awk '/^accuracy/ { train = $3 + 0 } END { exit !(train >= 0.9) }' "$tmp/out" \
  && ok || fail "training accuracy: $(cat "$tmp/out")"

# errors: usage, and a directory without the data
expect_status 2 "$train"
expect_err "usage: train [-v] GCN_DATA_DIR [STEPS]"
expect_status 1 "$train" "$tmp/nowhere"
expect_err_has "cannot open"

echo "test_train_example: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
