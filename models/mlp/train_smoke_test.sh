#!/usr/bin/env bash
# //models/mlp:train on Fashion-MNIST (Debian's dataset-fashion-mnist, from
# tools/setup.sh): a short CPU run must reach a clearly-learned test accuracy
# and report it in the metrics file.
set -euo pipefail
train="$TEST_SRCDIR/weft/models/mlp/train"
out="$TEST_TMPDIR/m.jsonl"
"$train" --steps=300 --log_every=100 --eval_every=0 --eval_batches=5 --num_workers=1 \
  --quiet --metrics_out="$out"
acc=$(grep '"test_accuracy"' "$out" | sed 's/.*"test_accuracy":\([0-9.e+-]*\).*/\1/')
total=$(grep '"test_total"' "$out" | sed 's/.*"test_total":\([0-9]*\).*/\1/')
echo "test accuracy after 300 steps: $acc on $total images"
[ "$total" = "10000" ] || { echo "FAIL: expected the full 10000-image test set"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a > 0.78) }' || { echo "FAIL: accuracy $acc <= 0.78"; exit 1; }
# A wrong data directory is a clear error, not a crash.
set +e
msg=$("$train" --steps=1 --data="$TEST_TMPDIR/nope" 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "nope" <<<"$msg" || { echo "FAIL: rc=$rc: $msg"; exit 1; }
# A memory budget, which only the GPT trainer's planner holds, is refused
# (it was ignored).
set +e
msg=$("$train" --steps=1 --memory_budget=1GiB 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && grep -q "no layout planner" <<<"$msg" || { echo "FAIL: rc=$rc: $msg"; exit 1; }
echo PASS
