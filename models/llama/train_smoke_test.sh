#!/usr/bin/env bash
# End-to-end checks of //models/llama:train and :sample on CPU: it trains
# (loss falls), is bitwise reproducible for a fixed seed, runs sharded over
# 2 ranks, samples the same greedy text from its checkpoint and from the
# checkpoint's safetensors export, with the key/value cache on and off, and
# refuses bad model shapes naming the flag and the rule; and the same for the
# mixture of experts (llama_moe_debug), with its experts over 2 ranks (--ep).
set -euo pipefail

train="$TEST_SRCDIR/weft/models/llama/train"
sample="$TEST_SRCDIR/weft/models/llama/sample"
ckpt="$TEST_SRCDIR/weft/tools/ckpt/ckpt"
config="$TEST_SRCDIR/weft/models/llama/configs/llama_debug.textproto"
tmp="$TEST_TMPDIR"

for i in $(seq 1 400); do
  echo "the quick brown fox $i jumps over the lazy dog; a stitch in time saves nine."
  echo "all that glitters is not gold, and every cloud has a silver lining $((i % 7))."
done > "$tmp/corpus.txt"

common=(--config="$config" --data="$tmp/corpus.txt" --steps=40 --log_every=1 --quiet
        --num_workers=1 --eval_batches=2)
"$train" "${common[@]}" --metrics_out="$tmp/a.jsonl" --checkpoint_dir="$tmp/ck"
"$train" "${common[@]}" --metrics_out="$tmp/b.jsonl"

loss_at() { grep "\"step\":$2,\"loss\"" "$1" | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/'; }
first=$(loss_at "$tmp/a.jsonl" 1)
last=$(loss_at "$tmp/a.jsonl" 40)
echo "loss: first $first last $last"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 1.0) }' || {
  echo "FAIL: loss did not fall by more than 1.0 nat"; exit 1; }
grep -q '"val_loss":' "$tmp/a.jsonl" || { echo "FAIL: no val_loss"; exit 1; }
for s in 1 20 40; do
  [ "$(loss_at "$tmp/a.jsonl" $s)" = "$(loss_at "$tmp/b.jsonl" $s)" ] || {
    echo "FAIL: step $s loss differs between two runs with one seed"; exit 1; }
done

# Two ranks, fully sharded: the same job trains.
"$train" "${common[@]}" --steps=6 --nproc_per_node=2 --strategy=fsdp --micro_batch=8 \
    --metrics_out="$tmp/fsdp.jsonl"
[ -n "$(loss_at "$tmp/fsdp.jsonl" 6)" ] || { echo "FAIL: fsdp run logged no step 6"; exit 1; }

# Greedy text past the 64-token window (the cache refills when it slides).
greedy=(--prompt="the quick" --tokens=80 --temperature=0 --stop_at_eot=false)
on=$("$sample" --checkpoint="$tmp/ck" "${greedy[@]}" 2>/dev/null)
off=$("$sample" --checkpoint="$tmp/ck" "${greedy[@]}" --kv_cache=false 2>/dev/null)
[ "$on" = "$off" ] || { echo "FAIL: greedy text differs with the cache:"; echo "$on"; echo "$off"; exit 1; }
grep -q "the quick brown fox" <<<"$on" || { echo "FAIL: the sample does not continue the corpus: $on"; exit 1; }
"$ckpt" export "$tmp/ck" --format=safetensors --out="$tmp/llama.safetensors" >/dev/null
exported=$("$sample" --init_from="$tmp/llama.safetensors" "${greedy[@]}" 2>/dev/null)
[ "$exported" = "$on" ] || { echo "FAIL: the export samples other text: $exported"; exit 1; }
# As a Hugging Face directory (LlamaForCausalLM): the same text from it,
# with weft's char tokenizer (it has no Hugging Face form).
"$ckpt" export "$tmp/ck" --format=tokenizer --out="$tmp/tok.txt" >/dev/null
"$ckpt" export "$tmp/ck" --format=hf --out="$tmp/hf_out" >/dev/null
grep -q '"LlamaForCausalLM"' "$tmp/hf_out/config.json" || { echo "FAIL: config.json:"; cat "$tmp/hf_out/config.json"; exit 1; }
from_hf=$("$sample" --init_from="$tmp/hf_out" --tokenizer="$tmp/tok.txt" "${greedy[@]}" 2>/dev/null)
[ "$from_hf" = "$on" ] || { echo "FAIL: the HF export samples other text: $from_hf"; exit 1; }
echo "sample: $on"

# A Hugging Face checkpoint (transformers' save_pretrained; testdata/): the
# shape from its config.json, fine-tuned on the corpus, and sampled.
hf="$TEST_SRCDIR/weft/models/llama/testdata/hf_llama_tiny"
hf_run=$("$train" --data="$tmp/corpus.txt" --init_from="$hf" --steps=3 --seq_len=16 \
         --global_batch=4 --micro_batch=4 --log_every=1 --quiet --num_workers=1 \
         --eval_batches=0 --metrics_out="$tmp/hf.jsonl" 2>&1)
grep -q "initialized from the Hugging Face checkpoint" <<<"$hf_run" || {
  echo "FAIL: no HF init line:"; echo "$hf_run"; exit 1; }
grep -q "Llama 2L 4H (2 KV) 32d ffn 48 vocab 64" <<<"$hf_run" || {
  echo "FAIL: the model is not config.json's:"; echo "$hf_run"; exit 1; }
[ -n "$(loss_at "$tmp/hf.jsonl" 3)" ] || { echo "FAIL: the HF run logged no step 3"; exit 1; }
if out=$("$train" --data="$tmp/corpus.txt" --init_from="$hf" --n_layer=3 --steps=1 2>&1); then
  echo "FAIL: --n_layer=3 against config.json's 2 was accepted"; exit 1
fi
grep -q -- "--n_layer=3 but" <<<"$out" || { echo "FAIL: $out"; exit 1; }

# The mixture of experts (llama_moe_debug: 4 SwiGLU experts, top-2): it
# trains and logs the routing, splits its experts over 2 ranks with --ep,
# and samples the same greedy text with the cache on and off.
moe_config="$TEST_SRCDIR/weft/models/llama/configs/llama_moe_debug.textproto"
"$train" --config="$moe_config" --data="$tmp/corpus.txt" --steps=30 --log_every=1 --quiet \
    --num_workers=1 --eval_batches=2 --metrics_out="$tmp/moe.jsonl" --checkpoint_dir="$tmp/moe_ck"
first=$(loss_at "$tmp/moe.jsonl" 1)
last=$(loss_at "$tmp/moe.jsonl" 30)
echo "moe loss: first $first last $last"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 1.0) }' || {
  echo "FAIL: the MoE loss did not fall by more than 1.0 nat"; exit 1; }
grep -q '"moe_aux_loss":' "$tmp/moe.jsonl" || { echo "FAIL: no moe_aux_loss metric"; exit 1; }
"$train" --config="$moe_config" --data="$tmp/corpus.txt" --steps=4 --log_every=1 --quiet \
    --num_workers=1 --eval_batches=0 --nproc_per_node=2 --ep=2 --micro_batch=8 \
    --metrics_out="$tmp/moe_ep.jsonl"
[ -n "$(loss_at "$tmp/moe_ep.jsonl" 4)" ] || { echo "FAIL: the ep=2 run logged no step 4"; exit 1; }
on=$("$sample" --checkpoint="$tmp/moe_ck" "${greedy[@]}" 2>/dev/null)
off=$("$sample" --checkpoint="$tmp/moe_ck" "${greedy[@]}" --kv_cache=false 2>/dev/null)
[ "$on" = "$off" ] || { echo "FAIL: MoE greedy text differs with the cache:"; echo "$on"; echo "$off"; exit 1; }
"$ckpt" export "$tmp/moe_ck" --format=hf --out="$tmp/moe_hf" >/dev/null
grep -q '"MixtralForCausalLM"' "$tmp/moe_hf/config.json" || { echo "FAIL: MoE config.json"; exit 1; }
"$ckpt" export "$tmp/moe_ck" --format=tokenizer --out="$tmp/moe_tok.txt" >/dev/null
from_hf=$("$sample" --init_from="$tmp/moe_hf" --tokenizer="$tmp/moe_tok.txt" "${greedy[@]}" 2>/dev/null)
[ "$from_hf" = "$on" ] || { echo "FAIL: the Mixtral export samples other text: $from_hf"; exit 1; }
echo "moe sample: $on"

expect_error() {  # expect_error WANT ARGS...: the run fails and prints WANT
  local want="$1"; shift
  if out=$("$train" --config="$config" --data="$tmp/corpus.txt" --steps=1 --quiet \
           --num_workers=1 "$@" 2>&1); then
    echo "FAIL: $* succeeded"; exit 1
  fi
  grep -qF -- "$want" <<<"$out" || { echo "FAIL: $* printed:"; echo "$out"; exit 1; }
}
expect_error "n_head=4 is not divisible by n_kv_head=3" --n_kv_head=3
expect_error "rotary table has max_seq_len positions" --seq_len=128
expect_error "heads, not divisible by tp=3" --nproc_per_node=3 --strategy=tp --tp=3
expect_error "--strategy=auto without --memory_budget" --strategy=auto
expect_error "--memory_budget only with --strategy=auto" --memory_budget=1GiB

# --strategy=auto plans a layout of the 2 ranks against the budget and trains it.
auto=$("$train" "${common[@]}" --steps=2 --nproc_per_node=2 --strategy=auto \
       --memory_budget=64MiB --metrics_out="$tmp/auto.jsonl" 2>&1)
grep -q -- "--strategy=auto on 2 ranks: " <<<"$auto" || { echo "FAIL: no plan line:"; echo "$auto"; exit 1; }
[ -n "$(loss_at "$tmp/auto.jsonl" 2)" ] || { echo "FAIL: the auto run logged no step 2"; exit 1; }
echo PASS
