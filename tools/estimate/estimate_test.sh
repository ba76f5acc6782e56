#!/usr/bin/env bash
# End-to-end checks of //tools:estimate: the per-category table, the peak
# against what //models/gpt:train then reports as peak_mem_mb (within 10%),
# --strategy=auto with a budget, and clear errors with exit code 2.
set -euo pipefail

estimate="$TEST_SRCDIR/weft/tools/estimate/estimate"
train="$TEST_SRCDIR/weft/models/gpt/train"
config="$TEST_SRCDIR/weft/models/gpt/configs/tiny.textproto"
tmp="$TEST_TMPDIR"

for i in $(seq 1 300); do
  echo "the quick brown fox $i jumps over the lazy dog; a stitch in time saves nine."
done > "$tmp/corpus.txt"
common=(--config="$config" --data="$tmp/corpus.txt" --num_workers=1 --micro_batch=4)

"$estimate" "${common[@]}" --strategy=fsdp --nproc=4 | tee "$tmp/fsdp.txt"
for row in "rank 0 of 4, strategy fsdp, device cpu" parameters gradients "optimizer state" \
           activations "peak while training"; do
  grep -q "$row" "$tmp/fsdp.txt" || { echo "FAIL: no '$row' in the estimate"; exit 1; }
done

# One process: the estimate against the trainer's own peak_mem_mb.
"$estimate" "${common[@]}" --nproc=1 > "$tmp/one.txt"
estimated=$(awk '$1 == "peak" && $3 == "MiB" { print $4 }' "$tmp/one.txt")
"$train" "${common[@]}" --steps=2 --log_every=1 --quiet --eval_batches=1 \
    --metrics_out="$tmp/m.jsonl"
measured=$(grep '"step":2,' "$tmp/m.jsonl" | sed 's/.*"peak_mem_mb":\([0-9.e+-]*\).*/\1/')
echo "peak: estimated $estimated B, measured $measured MiB"
awk -v e="$estimated" -v m="$measured" 'BEGIN { r = e / (m * 1048576); exit !(r > 0.9 && r < 1.1) }' || {
  echo "FAIL: estimate $estimated B is not within 10% of the measured $measured MiB"; exit 1; }

"$estimate" "${common[@]}" --strategy=auto --nproc=2 --memory_budget=1GiB | tee "$tmp/auto.txt"
grep -q "fits with the least communication: ddp" "$tmp/auto.txt" || {
  echo "FAIL: auto did not pick ddp under a 1 GiB budget"; exit 1; }
for s in ddp zero-1 zero-2 zero-3 fsdp; do
  grep -q "^$s " "$tmp/auto.txt" || { echo "FAIL: auto lists no $s"; exit 1; }
done

set +e
"$estimate" "${common[@]}" --nproc=0 2> "$tmp/err.txt"
code=$?
set -e
[[ $code == 2 ]] || { echo "FAIL: --nproc=0 exited $code, expected 2"; exit 1; }
grep -q "N >= 1" "$tmp/err.txt" || { echo "FAIL: no hint for --nproc=0"; cat "$tmp/err.txt"; exit 1; }
set +e
"$estimate" "${common[@]}" --pp=2 --nproc=2 2> "$tmp/err_pp.txt"
code=$?
set -e
[[ $code == 1 ]] || { echo "FAIL: --pp=2 exited $code, expected 1"; exit 1; }
grep -q "drop --pp" "$tmp/err_pp.txt" || { echo "FAIL: no hint for --pp"; cat "$tmp/err_pp.txt"; exit 1; }
echo PASS
