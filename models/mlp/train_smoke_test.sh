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
# 3 ranks pad the test order to 10002 by repeating images: each is still
# counted once (the repeats were counted as well).
out3="$TEST_TMPDIR/m3.jsonl"
"$train" --steps=5 --eval_every=0 --eval_batches=1 --num_workers=1 --quiet \
  --nproc_per_node=3 --strategy=ddp --global_batch=63 --micro_batch=21 --metrics_out="$out3"
total3=$(grep '"test_total"' "$out3" | sed 's/.*"test_total":\([0-9]*\).*/\1/')
[ "$total3" = "10000" ] || { echo "FAIL: 3 ranks evaluated $total3 test images, expected 10000"; exit 1; }
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
# Refused before training, each of which used to be ignored or to fail only
# after the whole run (--pp).
for bad in "--pp=2 --nproc_per_node=2:does not run as a pipeline" "--init_std=-1:init_std=-1" \
           "--seq_len=32:--seq_len for the MLP" "--tokenizer=char:--tokenizer for the MLP"; do
  set +e
  # shellcheck disable=SC2086  # the flags are a list
  msg=$(timeout 60 "$train" --steps=50 ${bad%%:*} 2>&1); rc=$?
  set -e
  [ $rc -ne 0 ] && grep -q -- "${bad#*:}" <<<"$msg" || { echo "FAIL: ${bad%%:*}: rc=$rc: $msg"; exit 1; }
done
echo PASS
