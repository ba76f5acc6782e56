#!/usr/bin/env bash
# End-to-end checks of //models/gpt:sample: a tiny GPT trained on two
# repeated sentences continues them; checkpoints of one process, of fsdp,
# tp and pp ranks (read whole, whatever their sharding) and the same model
# as an llm.c file all give the same greedy text, and so does the sample
# printed while training (--sample_every); a seed repeats a sample;
# sampling with and without the key/value cache agrees; bad command lines
# are clear errors.
set -euo pipefail

root="$TEST_SRCDIR/weft"
train="$root/models/gpt/train"
sample="$root/models/gpt/sample"
config="$root/models/gpt/configs/tiny.textproto"
tmp="$TEST_TMPDIR"

for i in $(seq 1 300); do
  echo "the quick brown fox jumps over the lazy dog."
  echo "a stitch in time saves nine, said the old tailor."
done > "$tmp/corpus.txt"
common=(--config="$config" --data="$tmp/corpus.txt" --steps=120 --quiet --num_workers=1
        --eval_every=0 --checkpoint_every=120)

# --sample_every prints text from the model as it trains (checked below
# against sampling its checkpoint).
"$train" "${common[@]}" --checkpoint_dir="$tmp/one" --sample_every=60 --sample_prompt="the quick" \
    --sample_tokens=60 --sample_temperature=0 > "$tmp/one_train.txt"
"$train" "${common[@]}" --checkpoint_dir="$tmp/fsdp" --nproc_per_node=2 --strategy=fsdp --micro_batch=8
"$train" "${common[@]}" --checkpoint_dir="$tmp/tp" --nproc_per_node=2 --strategy=tp --tp=2
"$train" "${common[@]}" --checkpoint_dir="$tmp/pp" --nproc_per_node=2 --pp=2 --micro_batch=8

greedy=(--prompt="the quick" --tokens=60 --temperature=0)
"$sample" --checkpoint="$tmp/one" "${greedy[@]}" > "$tmp/one.txt" 2> "$tmp/one.err"
cat "$tmp/one.txt" "$tmp/one.err"
# What the corpus taught: the sentence, then the other one.
head -c 60 "$tmp/one.txt" | grep -q "^the quick brown fox jumps over the lazy dog.$" || {
  echo "FAIL: the greedy sample does not continue the corpus"; exit 1; }
grep -q "sampled 60 tokens .* from .*/one/step_120 (step 120), window 64, kv cache on" "$tmp/one.err" || {
  echo "FAIL: no closing line on stderr"; exit 1; }
# The sample printed while training, at the step of the checkpoint: the same
# text as sampling the checkpoint (the same weights, prompt and draws).
grep -q "^sample at step 60: the quick" "$tmp/one_train.txt" || {
  echo "FAIL: no sample at step 60 while training"; exit 1; }
lines=$(wc -l < "$tmp/one.txt")
awk -v n="$lines" '/^sample at step 120: /{c = n} c-- > 0' "$tmp/one_train.txt" \
    | sed '1s/^sample at step 120: //' > "$tmp/during.txt"
cmp "$tmp/one.txt" "$tmp/during.txt" || {
  echo "FAIL: the sample while training differs from sampling its checkpoint"; exit 1; }
# Sharded models are not whole on rank 0: a clear error before training.
if "$train" "${common[@]}" --checkpoint_dir="$tmp/fsdp_sample" --strategy=fsdp --sample_every=10 \
    > "$tmp/fsdp_sample.txt" 2>&1; then
  echo "FAIL: --sample_every with fsdp was accepted"; exit 1
fi
grep -q "sample_every with fsdp" "$tmp/fsdp_sample.txt" || {
  cat "$tmp/fsdp_sample.txt"; echo "FAIL: no clear error for --sample_every with fsdp"; exit 1; }
# dp keeps the whole model too (the master replica, under dp's wrapper,
# which the sampler took for another model and refused).
"$train" "${common[@]}" --steps=20 --checkpoint_dir="$tmp/dp" --strategy=dp --dp_devices=2 \
    --sample_every=20 --sample_prompt="the quick" --sample_tokens=30 --sample_temperature=0 \
    > "$tmp/dp_train.txt" || { echo "FAIL: --sample_every with dp"; exit 1; }
"$sample" --checkpoint="$tmp/dp" --prompt="the quick" --tokens=30 --temperature=0 \
    2>/dev/null | head -1 > "$tmp/dp.txt"
grep "^sample at step 20: " "$tmp/dp_train.txt" | sed 's/^sample at step 20: //' \
    | cmp - "$tmp/dp.txt" || { echo "FAIL: dp's sample while training differs from its checkpoint's"; exit 1; }
# The same for zero-3 set through --strategy_options, which wins over
# --zero_stage (the check read only the flag; 2 ranks trained, then the
# sample aborted on rank 0's shard).
if "$train" "${common[@]}" --checkpoint_dir="$tmp/zero3_sample" --strategy=zero \
    --strategy_options=zero_stage=3 --nproc_per_node=2 --micro_batch=8 --sample_every=10 \
    --sample_prompt="the quick" \
    > "$tmp/zero3_sample.txt" 2>&1; then
  echo "FAIL: --sample_every with zero_stage=3 was accepted"; exit 1
fi
grep -q "sample_every with zero" "$tmp/zero3_sample.txt" || {
  cat "$tmp/zero3_sample.txt"; echo "FAIL: no clear error for --sample_every with zero_stage=3"; exit 1; }
# A bad sampling temperature stops the job before training, not at the
# first sample step.
if "$train" "${common[@]}" --checkpoint_dir="$tmp/nan_sample" --sample_every=60 \
    --sample_temperature=nan > "$tmp/nan_sample.txt" 2>&1; then
  echo "FAIL: --sample_temperature=nan was accepted"; exit 1
fi
grep -q -- "--sample_temperature=nan" "$tmp/nan_sample.txt" && ! grep -q "^step " "$tmp/nan_sample.txt" || {
  cat "$tmp/nan_sample.txt"; echo "FAIL: no error before training for --sample_temperature=nan"; exit 1; }

# Without the key/value cache every token runs the whole window: the same
# text (69 tokens: the window fills, then slides).
"$sample" --checkpoint="$tmp/one" "${greedy[@]}" --kv_cache=false > "$tmp/nocache.txt" 2> "$tmp/nocache.err"
cmp "$tmp/one.txt" "$tmp/nocache.txt" || { echo "FAIL: the kv cache changed the sample"; exit 1; }
grep -q "kv cache off" "$tmp/nocache.err" || { echo "FAIL: --kv_cache=false not reported"; exit 1; }

# Sharded checkpoints are read whole: the same greedy text. (The layouts
# train the same model within float rounding; a trained model's greedy
# choices are far from ties.)
for layout in fsdp tp pp; do
  "$sample" --checkpoint="$tmp/$layout/step_120" "${greedy[@]}" 2>/dev/null > "$tmp/$layout.txt"
  cmp "$tmp/one.txt" "$tmp/$layout.txt" || { echo "FAIL: $layout's sample differs"; exit 1; }
done

# The same weights as an llm.c file, with a tokenizer file from prepare_data.
"$root/tools/ckpt/ckpt" export "$tmp/one" --format=llmc --out="$tmp/model.bin"
"$root/tools/prepare_data/prepare_data" --input="$tmp/corpus.txt" --tokenizer=char \
    --out="$tmp/shards" > /dev/null
"$sample" --init_from="$tmp/model.bin" --tokenizer="$tmp/shards/tokenizer.txt" "${greedy[@]}" \
    2>/dev/null > "$tmp/llmc.txt"
cmp "$tmp/one.txt" "$tmp/llmc.txt" || { echo "FAIL: the llm.c file samples differently"; exit 1; }
# A safetensors export carries the model and the tokenizer: no --tokenizer.
"$root/tools/ckpt/ckpt" export "$tmp/one" --format=safetensors --out="$tmp/model.safetensors"
"$sample" --init_from="$tmp/model.safetensors" "${greedy[@]}" 2>/dev/null > "$tmp/st.txt"
cmp "$tmp/one.txt" "$tmp/st.txt" || { echo "FAIL: the safetensors export samples differently"; exit 1; }
# inspect shows the tokenizer the checkpoint carries.
"$root/tools/ckpt/ckpt" inspect "$tmp/tp" > "$tmp/inspect.txt"
grep -q "^  tokenizer weft-tokenizer char" "$tmp/inspect.txt" || {
  echo "FAIL: inspect does not show the saved tokenizer"; exit 1; }

# A seed repeats a sample; another seed gives another (temperature 2
# flattens the trained distribution enough to differ within 200 tokens).
hot=(--checkpoint="$tmp/one" --prompt="a" --tokens=200 --temperature=2 --top_k=20)
"$sample" "${hot[@]}" --seed=1 2>/dev/null > "$tmp/s1a.txt"
"$sample" "${hot[@]}" --seed=1 2>/dev/null > "$tmp/s1b.txt"
"$sample" "${hot[@]}" --seed=2 2>/dev/null > "$tmp/s2.txt"
cmp "$tmp/s1a.txt" "$tmp/s1b.txt" || { echo "FAIL: seed 1 did not repeat"; exit 1; }
! cmp -s "$tmp/s1a.txt" "$tmp/s2.txt" || { echo "FAIL: seeds 1 and 2 gave the same text"; exit 1; }

# Errors say what was wrong.
expect_error() {
  local want="$1"; shift
  if out=$("$sample" "$@" 2>&1); then echo "FAIL: '$*' succeeded"; exit 1; fi
  echo "$out" | grep -q -- "$want" || { echo "FAIL: '$*' said: $out (wanted '$want')"; exit 1; }
}
expect_error "need exactly one" --prompt=x
expect_error "no checkpoint at .*nothing_here" --checkpoint="$tmp/nothing_here" --prompt=x
expect_error "carries no tokenizer" --init_from="$tmp/model.bin" --prompt=x
expect_error "no end-of-text token" --checkpoint="$tmp/one"
expect_error "not in the char vocabulary" --checkpoint="$tmp/one" --prompt="QZ#"
expect_error "max_seq_len=64" --checkpoint="$tmp/one" --prompt=a --seq_len=65
echo "PASS"
