#!/usr/bin/env bash
# //models/gpt:train --init_from=DIR with a Hugging Face GPT2LMHeadModel
# directory (testdata/hf_gpt2_tiny, written by transformers): the model's
# shape comes from config.json, it fine-tunes in one process and over 2
# fsdp ranks, a contradicting flag is an error naming both, and the bare
# model.safetensors is refused with the directory to pass instead.
set -euo pipefail

train="$TEST_SRCDIR/weft/models/gpt/train"
hf="$TEST_SRCDIR/weft/models/gpt/testdata/hf_gpt2_tiny"
tmp="$TEST_TMPDIR"
for i in $(seq 1 300); do echo "abc def $i ghi jkl."; done > "$tmp/corpus.txt"

flags=(--data="$tmp/corpus.txt" --seq_len=16 --global_batch=4 --micro_batch=4 --log_every=1
       --quiet --num_workers=1 --eval_batches=0)
common=("${flags[@]}" --init_from="$hf")
loss_at() { grep "\"step\":$2,\"loss\"" "$1" | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/'; }

out=$("$train" "${common[@]}" --steps=3 --metrics_out="$tmp/one.jsonl" 2>&1)
grep -q "initialized from the Hugging Face checkpoint" <<<"$out" || {
  echo "FAIL: no HF init line:"; echo "$out"; exit 1; }
grep -qF "GPT 2L 4H 32d vocab 65 (padded 128)" <<<"$out" || {
  echo "FAIL: the model is not config.json's:"; echo "$out"; exit 1; }
[ -n "$(loss_at "$tmp/one.jsonl" 3)" ] || { echo "FAIL: logged no step 3"; exit 1; }

"$train" "${common[@]}" --steps=3 --nproc_per_node=2 --strategy=fsdp --micro_batch=2 \
    --metrics_out="$tmp/fsdp.jsonl" >/dev/null 2>&1
for s in 1 3; do
  a=$(loss_at "$tmp/one.jsonl" $s); b=$(loss_at "$tmp/fsdp.jsonl" $s)
  awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * a) }' || {
    echo "FAIL: step $s loss $a in one process, $b under fsdp"; exit 1; }
done

if out=$("$train" "${common[@]}" --steps=1 --n_head=8 2>&1); then
  echo "FAIL: --n_head=8 against config.json's 4 was accepted"; exit 1
fi
grep -q -- '--n_head=8 but .*"n_head": 4' <<<"$out" || { echo "FAIL: $out"; exit 1; }

if out=$("$train" "${flags[@]}" --init_from="$hf/model.safetensors" --steps=1 2>&1); then
  echo "FAIL: the bare HF model.safetensors was accepted"; exit 1
fi
grep -q "holds a Hugging Face GPT-2's tensors" <<<"$out" || { echo "FAIL: $out"; exit 1; }
grep -qF -- "--init_from=$hf" <<<"$out" || { echo "FAIL: no directory hint: $out"; exit 1; }
echo "PASS"
