#!/usr/bin/env bash
# End-to-end checks of //models/gpt:train on CPU: it trains (loss falls),
# writes JSON metrics, is bitwise reproducible for a fixed seed, and rejects
# bad configurations with clear errors and exit code 2 or 1.
set -euo pipefail

train="$TEST_SRCDIR/weft/models/gpt/train"
config="$TEST_SRCDIR/weft/models/gpt/configs/tiny.textproto"
tmp="$TEST_TMPDIR"

# A small real-looking corpus, so the test does not depend on /usr/share.
python_free_corpus() {
  for i in $(seq 1 400); do
    echo "the quick brown fox $i jumps over the lazy dog; a stitch in time saves nine."
    echo "all that glitters is not gold, and every cloud has a silver lining $((i % 7))."
  done
}
python_free_corpus > "$tmp/corpus.txt"

common=(--config="$config" --data="$tmp/corpus.txt" --steps=40 --log_every=1 --quiet
        --num_workers=1 --eval_batches=2)

"$train" "${common[@]}" --metrics_out="$tmp/a.jsonl"
"$train" "${common[@]}" --metrics_out="$tmp/b.jsonl"

first=$(grep -m1 '"step":1,' "$tmp/a.jsonl" | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
last=$(grep '"step":40,"loss"' "$tmp/a.jsonl" | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
echo "loss: first $first last $last"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 1.0) }' || {
  echo "FAIL: loss did not fall by more than 1.0 nat"; exit 1; }

for key in step loss lr step_ms tokens_per_s mfu peak_mem_mb grad_norm; do
  grep -q "\"$key\":" "$tmp/a.jsonl" || { echo "FAIL: metric $key missing"; exit 1; }
done
grep -q '"val_loss":' "$tmp/a.jsonl" || { echo "FAIL: no val_loss"; exit 1; }
# --eval_batches=0 evaluates nothing (it used to log val_loss NaN).
"$train" --config="$config" --data="$tmp/corpus.txt" --steps=2 --quiet --num_workers=1 \
    --eval_batches=0 --metrics_out="$tmp/noeval.jsonl"
if grep -q '"val_loss"' "$tmp/noeval.jsonl"; then
  echo "FAIL: --eval_batches=0 still evaluated: $(grep val_loss "$tmp/noeval.jsonl")"; exit 1
fi

# --quiet drops the per-step lines, not the results: the banner, the
# evaluation and the checkpoint still print (it used to hide them all).
quiet=$("$train" --config="$config" --data="$tmp/corpus.txt" --steps=3 --log_every=1 --quiet \
        --num_workers=1 --eval_batches=1 --checkpoint_dir="$tmp/quiet_ck" 2>&1)
for want in "world 1 (dp 1)" "val_loss" "ckpt_saved_step 3"; do
  grep -q "$want" <<<"$quiet" || { echo "FAIL: --quiet hid '$want':"; echo "$quiet"; exit 1; }
done
if grep -q "step 2 | loss" <<<"$quiet"; then echo "FAIL: --quiet printed a step line"; exit 1; fi
# A negative period is an error, not "never".
for flag in --log_every=-1 --eval_every=-5 --sample_every=-1; do
  if "$train" --config="$config" --data="$tmp/corpus.txt" --steps=1 $flag > "$tmp/neg.txt" 2>&1; then
    echo "FAIL: $flag ran"; exit 1
  fi
  grep -q -- "${flag%%=*}" "$tmp/neg.txt" || { echo "FAIL: $flag not named:"; cat "$tmp/neg.txt"; exit 1; }
done

# Under `bazel run` (BUILD_WORKING_DIRECTORY) a relative tokenizer file is
# found where the command was typed, as a relative --data is.
mkdir -p "$tmp/wd"
cp "$tmp/corpus.txt" "$tmp/wd/corpus.txt"
units=$(od -An -tu1 -v "$tmp/corpus.txt" | tr -s ' ' '\n' | grep -v '^$' | sort -n -u)
{ echo "weft-tokenizer char v1"; wc -l <<<"$units"; echo "$units"; } > "$tmp/wd/tok.txt"
(cd "$tmp" && BUILD_WORKING_DIRECTORY="$tmp/wd" "$train" --config="$config" --data=corpus.txt \
    --tokenizer=tok.txt --steps=1 --quiet --num_workers=1 --eval_batches=0) || {
  echo "FAIL: relative --tokenizer not resolved against BUILD_WORKING_DIRECTORY"; exit 1; }

# The console: an unknown MFU (CPU, no --peak_tflops) reads "mfu -", never
# nan; the banner names where the ranks came from.
console=$("$train" --config="$config" --data="$tmp/corpus.txt" --steps=2 --log_every=1 \
          --num_workers=1 --eval_batches=1 2>&1)
grep -q "mfu - " <<<"$console" || { echo "FAIL: no 'mfu -' in:"; echo "$console"; exit 1; }
if grep -qi "nan" <<<"$console"; then echo "FAIL: nan on the console:"; echo "$console"; exit 1; fi
grep -q "world 1 (dp 1) via single process" <<<"$console" || {
  echo "FAIL: banner without its launcher:"; echo "$console"; exit 1; }
# A launcher's size without its rank is an error, not an independent job.
set +e
out=$(OMPI_COMM_WORLD_SIZE=2 "$train" "${common[@]}" --steps=1 2>&1); rc=$?
set -e
if [ $rc -eq 0 ] || ! grep -q "independent single process" <<<"$out"; then
  echo "FAIL: silent split: rc=$rc"; echo "$out"; exit 1
fi

# Same seed: identical losses, gradient norms and learning rates, bit for bit
# (timings and the config line, which names the metrics file, aside).
timing='step_ms|tokens_per_s|mfu|peak_mem_mb|data_wait_ms|host_issue_ms'
timing+='|forward_ms|backward_ms|exposed_comm_ms|optimizer_ms|other_ms'
strip_timing() { grep -v '^{"config":' "$1" | sed -E "s/\"($timing)\":[^,}]*,?//g"; }
if ! diff <(strip_timing "$tmp/a.jsonl") <(strip_timing "$tmp/b.jsonl"); then
  echo "FAIL: two runs with the same seed differ"; exit 1
fi
"$train" "${common[@]}" --steps=3 --seed=7 --metrics_out="$tmp/c.jsonl"
if [ "$(grep -m1 '"step":3,' "$tmp/c.jsonl" | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')" = \
     "$(grep -m1 '"step":3,' "$tmp/a.jsonl" | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')" ]; then
  echo "FAIL: a different seed gave the same loss"; exit 1
fi

# Bad configurations: clear messages, non-zero exit, never a crash.
expect_error() {
  local want="$1"; shift
  set +e
  out=$("$train" "${common[@]}" "$@" 2>&1)
  rc=$?
  set -e
  if [ $rc -eq 0 ] || [ $rc -gt 2 ] || ! grep -q -- "$want" <<<"$out"; then
    echo "FAIL: $* -> rc=$rc, expected an error containing '$want':"; echo "$out"; exit 1
  fi
}
expect_error "does not divide d_model" --n_head=5
expect_error "max_seq_len" --seq_len=128
expect_error "global_batch=0" --global_batch=0
expect_error "cannot open" --data="$tmp/missing.txt"
: > "$tmp/empty.txt"
expect_error "empty" --data="$tmp/empty.txt"
expect_error "not divisible by micro_batch" --global_batch=24
expect_error "unknown flag --stepz" --stepz=3
expect_error "dtype=bf16 on CPU" --dtype=bf16
# A model no host holds is refused before it allocates (it ran out of memory
# minutes later): 161 B parameters.
expect_error "B parameters need" --n_layer=200 --d_model=8192 --n_head=64

# A strategy flag no applied strategy reads is noted, not silently dropped.
"$train" "${common[@]}" --steps=1 --zero_stage=2 --metrics_out="$tmp/unread.jsonl"
grep -q '"note":"--zero_stage=2 is read by no applied strategy (none) and changes nothing; it is an option of zero"' \
  "$tmp/unread.jsonl" || { echo "FAIL: --zero_stage=2 alone not noted"; cat "$tmp/unread.jsonl"; exit 1; }
echo "PASS"
