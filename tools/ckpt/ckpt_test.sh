#!/usr/bin/env bash
# Checkpoints through the binaries users run: //models/gpt:train saves,
# prunes and resumes bitwise from a step directory; //tools:ckpt inspects,
# verifies (and catches a flipped byte), consolidates and exports to
# safetensors and llm.c (a tp checkpoint in the model's own shapes), and
# train --init_from loads the llm.c export (with --resume=auto only on a
# first start).
set -euo pipefail

train="$TEST_SRCDIR/weft/models/gpt/train"
ckpt="$TEST_SRCDIR/weft/tools/ckpt/ckpt"
config="$TEST_SRCDIR/weft/models/gpt/configs/tiny.textproto"
tmp="$TEST_TMPDIR"
for i in $(seq 1 300); do
  echo "the quick brown fox $i jumps over the lazy dog; a stitch in time saves nine."
done > "$tmp/corpus.txt"
common=(--config="$config" --data="$tmp/corpus.txt" --steps=12 --log_every=1 --quiet
        --num_workers=1 --eval_batches=2 --n_layer=2 --d_model=64 --seq_len=32)
losses() { grep '"loss"' "$1" | sed 's/.*"step":\([0-9]*\),"loss":\([0-9.e+-]*\).*/\1 \2/'; }

# Straight 12 steps, saving at 6 and 12.
"$train" "${common[@]}" --checkpoint_dir="$tmp/ck" --checkpoint_every=6 --metrics_out="$tmp/a.jsonl"
[ -f "$tmp/ck/step_6/metadata.pb" ] && [ -f "$tmp/ck/step_12/rank_00000.bin" ] ||
  { echo "FAIL: expected step_6 and step_12"; ls -R "$tmp/ck"; exit 1; }
grep -q '"ckpt_write_ms"' "$tmp/a.jsonl" || { echo "FAIL: no ckpt_write_ms metric"; exit 1; }

# Resume from step 6 in a new process (async saves on): steps 7..12 equal.
"$train" "${common[@]}" --resume="$tmp/ck/step_6" --checkpoint_dir="$tmp/ck2" \
  --checkpoint_every=3 --checkpoint_async --keep_last=1 --metrics_out="$tmp/b.jsonl" 2> "$tmp/b.err" ||
  { cat "$tmp/b.err"; exit 1; }
diff <(losses "$tmp/a.jsonl" | awk '$1 > 6') <(losses "$tmp/b.jsonl") ||
  { echo "FAIL: resumed losses differ from the straight run"; exit 1; }
[ "$(ls "$tmp/ck2")" = "step_12" ] || { echo "FAIL: keep_last=1 left: $(ls "$tmp/ck2")"; exit 1; }
echo "resume from step 6: steps 7-12 bitwise equal; keep_last=1 kept $(ls "$tmp/ck2")"

# inspect / verify.
"$ckpt" inspect "$tmp/ck" > "$tmp/inspect.txt"
for want in "step 12, 1 rank" "embed.wte" "blocks.1.mlp.fc.weight:exp_avg_sq" "crc32c" "n_layer: 2"; do
  grep -q -- "$want" "$tmp/inspect.txt" || { echo "FAIL: inspect lacks '$want'"; cat "$tmp/inspect.txt"; exit 1; }
done
"$ckpt" verify "$tmp/ck/step_6" | grep -q "^OK" || { echo "FAIL: verify"; exit 1; }
cp -r "$tmp/ck/step_6" "$tmp/bad"
printf '\x55' | dd of="$tmp/bad/rank_00000.bin" bs=1 seek=5000 conv=notrunc status=none
if "$ckpt" verify "$tmp/bad" 2> "$tmp/verify.err"; then echo "FAIL: a flipped byte verified"; exit 1; fi
grep -q "checksum mismatch in rank_00000.bin" "$tmp/verify.err" || { cat "$tmp/verify.err"; exit 1; }
if "$train" "${common[@]}" --resume="$tmp/bad" 2> "$tmp/resume_bad.err"; then
  echo "FAIL: resumed from a corrupt checkpoint"; exit 1
fi
grep -q "checksum mismatch" "$tmp/resume_bad.err" || { cat "$tmp/resume_bad.err"; exit 1; }

# A different model is refused with the names that differ.
if "$train" "${common[@]}" --d_model=32 --resume="$tmp/ck/step_6" 2> "$tmp/mismatch.err"; then
  echo "FAIL: resumed a d_model=64 checkpoint into d_model=32"; exit 1
fi
grep -q "shapes differ: .*embed.wte" "$tmp/mismatch.err" || { cat "$tmp/mismatch.err"; exit 1; }

# consolidate / export.
"$ckpt" consolidate "$tmp/ck" --out="$tmp/full.safetensors"
"$ckpt" export "$tmp/ck" --format=safetensors --out="$tmp/w.safetensors"
"$ckpt" export "$tmp/ck" --format=llmc --out="$tmp/w.bin"
for f in full.safetensors w.safetensors w.bin; do [ -s "$tmp/$f" ] || { echo "FAIL: $f empty"; exit 1; }; done
grep -c "exp_avg" "$tmp/full.safetensors" > /dev/null || { echo "FAIL: consolidated file lacks optimizer state"; exit 1; }
if grep -q "exp_avg" "$tmp/w.safetensors"; then echo "FAIL: weights export holds optimizer state"; exit 1; fi
# The metadata says which: a weights export is not "consolidated" state.
grep -aq '"format":"weft-weights"' "$tmp/w.safetensors" || { echo "FAIL: export format"; exit 1; }
grep -aq '"format":"weft-consolidated"' "$tmp/full.safetensors" || { echo "FAIL: consolidate format"; exit 1; }
# --dtype in the trainer's lowercase.
"$ckpt" export "$tmp/ck" --format=safetensors --dtype=bf16 --out="$tmp/w16.safetensors"
grep -aq '"dtype":"BF16"' "$tmp/w16.safetensors" || { echo "FAIL: --dtype=bf16 wrote no BF16"; exit 1; }

# llm.c's file back into training: load it with --init_from, take one step
# with lr 1e-30 (below the last bit of every weight), save, export again:
# the same bytes.
"$train" "${common[@]}" --steps=1 --init_from="$tmp/w.bin" --lr=1e-30 --min_lr=0 --weight_decay=0 \
  --checkpoint_dir="$tmp/ck3" --checkpoint_every=1
"$ckpt" export "$tmp/ck3" --format=llmc --out="$tmp/w2.bin"
cmp "$tmp/w.bin" "$tmp/w2.bin" || { echo "FAIL: llm.c import/export is not exact"; exit 1; }
# --init_from under layouts where a rank holds part of the model (zero-1
# and fsdp shards, pipeline stages): the same first loss as one process.
# Each rank used to refuse the weights it did not hold itself ("weights for
# parameters this model lacks").
"$train" "${common[@]}" --steps=1 --init_from="$tmp/w.bin" --metrics_out="$tmp/init1.jsonl"
# --dtype=bf16: llm.c's version 5 (it wrote f32 whatever --dtype said), half
# the size, and it trains from within bf16's rounding of the f32 file.
"$ckpt" export "$tmp/ck" --format=llmc --dtype=bf16 --out="$tmp/w16.bin"
[ "$(od -An -t d4 -j 4 -N 4 "$tmp/w16.bin" | tr -d ' ')" = 5 ] || { echo "FAIL: bf16 llm.c file is not version 5"; exit 1; }
[ $(( ($(stat -c %s "$tmp/w.bin") - 1024) / 2 )) -eq $(( $(stat -c %s "$tmp/w16.bin") - 1024 )) ] ||
  { echo "FAIL: the bf16 llm.c file is not half the f32 one"; exit 1; }
"$train" "${common[@]}" --steps=1 --init_from="$tmp/w16.bin" --metrics_out="$tmp/init16.jsonl"
awk 'NR == FNR { a = $2; next } { d = a - $2; if (d < 0) d = -d; exit !(d > 0 && d <= 1e-2 * a) }' \
  <(losses "$tmp/init1.jsonl") <(losses "$tmp/init16.jsonl") ||
  { echo "FAIL: bf16 llm.c start: loss $(losses "$tmp/init16.jsonl") vs f32 $(losses "$tmp/init1.jsonl")"; exit 1; }
# The safetensors export starts a run like the llm.c file (and a run where
# the recorded model differs in what shapes hide is refused with the flag).
"$train" "${common[@]}" --steps=1 --init_from="$tmp/w.safetensors" --metrics_out="$tmp/init_st.jsonl"
[ "$(losses "$tmp/init_st.jsonl")" = "$(losses "$tmp/init1.jsonl")" ] ||
  { echo "FAIL: --init_from=w.safetensors: loss $(losses "$tmp/init_st.jsonl") vs llm.c's $(losses "$tmp/init1.jsonl")"; exit 1; }
# --resume=auto with --init_from, as a preemptible fine-tune runs: the first
# start loads the weights (the same first loss), a restart with the same
# command continues the checkpoint and leaves the weights unread.
"$train" "${common[@]}" --steps=1 --init_from="$tmp/w.bin" --resume=auto \
  --checkpoint_dir="$tmp/ck_auto" --metrics_out="$tmp/auto1.jsonl"
[ "$(losses "$tmp/auto1.jsonl")" = "$(losses "$tmp/init1.jsonl")" ] ||
  { echo "FAIL: --resume=auto --init_from: loss $(losses "$tmp/auto1.jsonl") vs $(losses "$tmp/init1.jsonl")"; exit 1; }
"$train" "${common[@]}" --steps=2 --init_from="$tmp/w.bin" --resume=auto \
  --checkpoint_dir="$tmp/ck_auto" --quiet=false > "$tmp/auto2.txt" 2>&1
grep -q "resumed from .*step_1 at step 1" "$tmp/auto2.txt" && grep -q "is not read: --resume continues" "$tmp/auto2.txt" ||
  { cat "$tmp/auto2.txt"; echo "FAIL: --resume=auto did not continue the checkpoint"; exit 1; }
if "$train" "${common[@]}" --steps=1 --init_from="$tmp/w.safetensors" --n_head=2 2> "$tmp/st_heads.err"; then
  echo "FAIL: a safetensors file of another n_head loaded"; exit 1
fi
grep -q -- "--model.n_head=" "$tmp/st_heads.err" || { cat "$tmp/st_heads.err"; exit 1; }
# Other data: upper case keeps the character set's size (the corpus is
# lower case), but each id now means another character. Refused: the
# export carries its tokenizer.
tr 'a-z' 'A-Z' < "$tmp/corpus.txt" > "$tmp/shifted.txt"
if "$train" "${common[@]}" --data="$tmp/shifted.txt" --steps=1 --init_from="$tmp/w.safetensors" \
    2> "$tmp/st_tok.err"; then
  echo "FAIL: a safetensors export loaded for data with another tokenizer"; exit 1
fi
grep -q "another tokenizer" "$tmp/st_tok.err" || { cat "$tmp/st_tok.err"; exit 1; }
# ...and with the weights' tokenizer (export --format=tokenizer) the same
# text trains from them (the hint's way out).
"$ckpt" export "$tmp/ck" --format=tokenizer --out="$tmp/tok.txt"
"$train" "${common[@]}" --data="$tmp/corpus.txt" --tokenizer="$tmp/tok.txt" --steps=1 \
  --init_from="$tmp/w.safetensors" --metrics_out="$tmp/init_tok.jsonl"
[ "$(losses "$tmp/init_tok.jsonl")" = "$(losses "$tmp/init1.jsonl")" ] ||
  { echo "FAIL: --tokenizer=exported: loss $(losses "$tmp/init_tok.jsonl") vs $(losses "$tmp/init1.jsonl")"; exit 1; }
# A resume into another n_head (not in any shape) is refused, not trained.
if "$train" "${common[@]}" --n_head=2 --resume="$tmp/ck/step_6" 2> "$tmp/resume_heads.err"; then
  echo "FAIL: resumed a 4-head checkpoint as a 2-head model"; exit 1
fi
grep -q -- "--model.n_head=4" "$tmp/resume_heads.err" || { cat "$tmp/resume_heads.err"; exit 1; }
# A resume at the last step says there is nothing left to train.
"$train" "${common[@]}" --quiet=false --resume="$tmp/ck/step_12" > "$tmp/resume_end.out" 2>&1 ||
  { cat "$tmp/resume_end.out"; exit 1; }
grep -q "no steps left to train (raise --steps to continue)" "$tmp/resume_end.out" ||
  { echo "FAIL: a resume at --steps says nothing"; cat "$tmp/resume_end.out"; exit 1; }
# ...and so is one with an untied lm_head, by the flag (not as a missing tensor).
if "$train" "${common[@]}" --tie_weights=false --resume="$tmp/ck/step_6" 2> "$tmp/resume_tie.err"; then
  echo "FAIL: resumed a tied checkpoint with an untied lm_head"; exit 1
fi
grep -q -- "--model.tie_weights=true" "$tmp/resume_tie.err" || { cat "$tmp/resume_tie.err"; exit 1; }
for layout in "--strategy=zero --zero_stage=1" "--strategy=fsdp" "--pp=2"; do
  # shellcheck disable=SC2086  # the layout is a flag list
  "$train" "${common[@]}" --steps=1 --init_from="$tmp/w.bin" --nproc_per_node=2 $layout \
    --micro_batch=4 --metrics_out="$tmp/init2.jsonl" 2> "$tmp/init2.err" ||
    { cat "$tmp/init2.err"; echo "FAIL: --init_from with $layout"; exit 1; }
  awk 'NR == FNR { a = $2; next } { d = a - $2; if (d < 0) d = -d; exit !(d <= 1e-5 * a) }' \
    <(losses "$tmp/init1.jsonl") <(losses "$tmp/init2.jsonl") ||
    { echo "FAIL: --init_from with $layout: loss $(losses "$tmp/init2.jsonl") vs $(losses "$tmp/init1.jsonl")"; exit 1; }
done
# A tp checkpoint exports in the model's own shapes: tp saves the fused qkv
# as (3, C, C); the export writes (3C, C) like every other layout.
"$train" "${common[@]}" --steps=2 --nproc_per_node=2 --strategy=tp --tp=2 \
  --checkpoint_dir="$tmp/ck_tp" --checkpoint_every=2
"$ckpt" inspect "$tmp/ck_tp" > "$tmp/inspect_tp.txt"
grep -q "^blocks.0.attn.qkv.weight \[3, 64, 64\]" "$tmp/inspect_tp.txt" ||
  { echo "FAIL: tp no longer saves qkv packed; this check needs another layout"; exit 1; }
"$ckpt" export "$tmp/ck_tp" --format=safetensors --out="$tmp/tp.safetensors"
grep -aq '"blocks.0.attn.qkv.weight":{"dtype":"F32","shape":\[192,64\]' "$tmp/tp.safetensors" ||
  { echo "FAIL: the tp export's qkv is not (192, 64)"; head -c 600 "$tmp/tp.safetensors"; exit 1; }
"$ckpt" export "$tmp/ck_tp" --format=llmc --out="$tmp/tp.bin"
echo "PASS"
