#!/usr/bin/env bash
# End-to-end checks of //tools:estimate: the per-category table, the peak
# against what //models/gpt:train then reports as peak_mem_mb (within 10%),
# --strategy=auto with a budget (data-parallel and pp/cp/tp layouts), a
# pipeline's per-stage table and --rank, and clear errors.
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
for s in ddp zero-1 zero-2 zero-3 fsdp pp2 tp2 cp2; do
  grep -q "^$s .* MiB .* fits$" "$tmp/auto.txt" || { echo "FAIL: auto lists no $s that fits"; exit 1; }
done

# Four ranks: model-parallel splits with fsdp over the rest, each at its
# worst rank; a budget between the smallest and the largest peak.
"$estimate" "${common[@]}" --strategy=auto --nproc=4 | tee "$tmp/auto4.txt"
for s in "pp2 x fsdp2" "tp2 x fsdp2" "tp2 x pp2" "cp2 x pp2" pp4 tp4; do
  grep -q "^$s .* MiB" "$tmp/auto4.txt" || { echo "FAIL: auto --nproc=4 lists no '$s'"; exit 1; }
done
# Each row's peak is its last "N MiB".
budget=$(awk '/ MiB / { for (i = 1; i <= NF; ++i) if ($i == "MiB") v = $(i-1); print v }' \
         "$tmp/auto4.txt" | sort -g | awk '{ a[NR] = $1 } END { print (a[1] + a[NR]) / 2 }')
"$estimate" "${common[@]}" --strategy=auto --nproc=4 --memory_budget="${budget}MiB" > "$tmp/auto4b.txt"
grep -q " fits$" "$tmp/auto4b.txt" && grep -q " too big$" "$tmp/auto4b.txt" || {
  echo "FAIL: a budget of ${budget} MiB should split the layouts"; cat "$tmp/auto4b.txt"; exit 1; }

# The config's own micro-batch (16, the whole global batch) splits over no
# 4 data-parallel ranks: auto runs each layout at the largest micro-batch
# that does, says which, and the flags it suggests train as they are (the
# job's validation set, 8 batches of 16, kept in samples).
plain=(--config="$config" --data="$tmp/corpus.txt" --num_workers=1)
"$estimate" "${plain[@]}" --strategy=auto --nproc=4 --memory_budget=1GiB | tee "$tmp/auto_mb.txt"
grep -qE "^ddp .* MiB +0 +4  fits$" "$tmp/auto_mb.txt" || {
  echo "FAIL: ddp on 4 ranks not at micro-batch 4"; exit 1; }
grep -qE "^tp4 .* MiB +0 +16  fits$" "$tmp/auto_mb.txt" || {
  echo "FAIL: tp4 (one data-parallel rank) not at micro-batch 16"; exit 1; }
pick=$(sed -n 's/^fits with the least communication: ddp (\(.*\))$/\1/p' "$tmp/auto_mb.txt")
[[ "$pick" == "--strategy=ddp --micro_batch=4 --eval_samples=128" ]] || { echo "FAIL: suggested flags '$pick'"; exit 1; }
# shellcheck disable=SC2086  # the suggestion is a flag list
"$train" "${plain[@]}" --nproc_per_node=4 $pick --steps=2 --log_every=0 --quiet --eval_every=0 || {
  echo "FAIL: the suggested flags do not train"; exit 1; }

# Training with --strategy=auto: a budget just under ddp's peak must skip
# ddp, train the next layout that fits, and stay within the budget.
ddp_peak=$(awk '$1 == "ddp" { for (i = 1; i <= NF; ++i) if ($i == "MiB") v = $(i-1); print v }' \
           "$tmp/auto_mb.txt")
budget=$(awk -v p="$ddp_peak" 'BEGIN { print p - 0.05 }')
"$train" "${plain[@]}" --nproc_per_node=4 --strategy=auto --memory_budget="${budget}MiB" \
    --steps=2 --log_every=1 --quiet --eval_every=0 --metrics_out="$tmp/auto_m.jsonl" \
    > "$tmp/auto_train.txt" 2>&1 || { echo "FAIL: auto training"; cat "$tmp/auto_train.txt"; exit 1; }
grep -- "--strategy=auto on 4 ranks: " "$tmp/auto_train.txt" || {
  echo "FAIL: auto training names no layout"; cat "$tmp/auto_train.txt"; exit 1; }
if grep -q -- "--strategy=auto on 4 ranks: ddp " "$tmp/auto_train.txt"; then
  echo "FAIL: auto picked ddp (peak $ddp_peak MiB) under a $budget MiB budget"; exit 1
fi
# The worst rank's peak (the trainer gathers it at the end), not rank 0's.
trained=$(sed -n 's/.*"peak_mem_mb_max":\([0-9.e+-]*\).*/\1/p' "$tmp/auto_m.jsonl")
[[ -n "$trained" ]] || { echo "FAIL: no peak_mem_mb_max in $tmp/auto_m.jsonl"; exit 1; }
awk -v m="$trained" -v b="$budget" 'BEGIN { exit !(m <= b) }' || {
  echo "FAIL: auto's layout peaked at $trained MiB over the $budget MiB budget"; exit 1; }
echo "auto trained within the budget: peak $trained MiB of $budget MiB (ddp would peak at $ddp_peak)"
# A budget below every layout's peak as the job is: the planner adds
# recompute (then smaller micro-batches), the tool says so, and training
# with auto says so too and stays within the budget.
"$estimate" "${common[@]}" --strategy=auto --nproc=2 > "$tmp/auto2.txt"
smallest=$(awk '/ MiB / { for (i = 1; i <= NF; ++i) if ($i == "MiB") v = $(i-1); print v }' \
           "$tmp/auto2.txt" | sort -g | head -1)
tight=$(awk -v m="$smallest" 'BEGIN { print m - 0.1 }')  # below the shown peak's rounding
"$estimate" "${common[@]}" --strategy=auto --nproc=2 --memory_budget="${tight}MiB" | tee "$tmp/auto2b.txt"
grep -q "^fits with the least communication after .*recompute" "$tmp/auto2b.txt" &&
  grep -qE ", recompute=(attention|full) .* fits$" "$tmp/auto2b.txt" || {
  echo "FAIL: no recompute layout under ${tight} MiB"; exit 1; }
"$train" "${common[@]}" --nproc_per_node=2 --strategy=auto --memory_budget="${tight}MiB" \
    --steps=2 --log_every=1 --quiet --eval_every=0 --metrics_out="$tmp/auto2_m.jsonl" \
    > "$tmp/auto2_train.txt" 2>&1 || { echo "FAIL: auto training with recompute"; cat "$tmp/auto2_train.txt"; exit 1; }
grep -q -- "--recompute --strategy_options=recompute_policy=.*; no layout fits without" \
    "$tmp/auto2_train.txt" || { echo "FAIL: auto does not say it added recompute"; cat "$tmp/auto2_train.txt"; exit 1; }
# The worst rank's peak (the trainer gathers it at the end), not rank 0's.
trained=$(sed -n 's/.*"peak_mem_mb_max":\([0-9.e+-]*\).*/\1/p' "$tmp/auto2_m.jsonl")
[[ -n "$trained" ]] || { echo "FAIL: no peak_mem_mb_max in $tmp/auto2_m.jsonl"; exit 1; }
awk -v m="$trained" -v b="$tight" 'BEGIN { exit !(m <= b) }' || {
  echo "FAIL: the recompute layout peaked at $trained MiB over the $tight MiB budget"; exit 1; }
echo "auto with recompute: peak $trained MiB of $tight MiB (the smallest layout as given: $smallest)"

set +e
"$train" "${plain[@]}" --strategy=auto --steps=1 2> "$tmp/err_auto.txt"
code=$?
set -e
[[ $code != 0 ]] && grep -q -- "--memory_budget=70GiB" "$tmp/err_auto.txt" || {
  echo "FAIL: auto without a budget"; cat "$tmp/err_auto.txt"; exit 1; }

# A pipeline: one line per stage, the worst marked and shown in full; --rank picks one.
"$estimate" "${common[@]}" --pp=2 --strategy=fsdp --nproc=4 | tee "$tmp/pp.txt"
for row in "per pipeline stage" "<- worst" "the worst stage, rank" "peak while training"; do
  grep -q -- "$row" "$tmp/pp.txt" || { echo "FAIL: no '$row' in the pipeline estimate"; exit 1; }
done
[[ $(grep -cE "^  [02] " "$tmp/pp.txt") == 2 ]] || { echo "FAIL: not one line per stage (ranks 0, 2)"; exit 1; }
# --pp=0 (the ranks the other axes leave: 2 here) is estimated per stage too.
"$estimate" "${common[@]}" --pp=0 --dp_shard=2 --strategy=pp,fsdp --nproc=4 > "$tmp/pp0.txt"
[[ $(grep -cE "^  [02] " "$tmp/pp0.txt") == 2 ]] || {
  echo "FAIL: --pp=0 not one line per stage"; cat "$tmp/pp0.txt"; exit 1; }
"$estimate" "${common[@]}" --pp=2 --nproc=2 --rank=1 --pp_schedule=gpipe > "$tmp/pp1.txt"
grep -q "rank 1 of 2, strategy none \[pp=2 gpipe\]" "$tmp/pp1.txt" || {
  echo "FAIL: --rank=1 of a pipeline"; cat "$tmp/pp1.txt"; exit 1; }

# MoE under expert parallelism: an expert rank's rows follow the data. The
# estimate shows even routing and the bound; the worst rank trained (the
# trainer gathers it) must stay within the bound, and a budget is checked
# against the bound.
moe=(--config="${config%/*}/tiny_moe.textproto" --data="$tmp/corpus.txt" --num_workers=1
     --micro_batch=2 --strategy=expert,ddp --ep=4)
"$estimate" "${moe[@]}" --nproc=4 --memory_budget=1GiB > "$tmp/moe.txt"
even=$(awk '$1 == "peak" && $3 == "MiB" { print $2 }' "$tmp/moe.txt")
bound=$(sed -n 's/^MoE layers above route evenly .*, rank [0-9]* peaks at \([0-9.]*\) MiB$/\1/p' "$tmp/moe.txt")
[[ -n "$even" && -n "$bound" ]] && grep -q "^fits the budget of .* (at the routing bound)$" "$tmp/moe.txt" ||
  { echo "FAIL: MoE estimate without its routing bound"; cat "$tmp/moe.txt"; exit 1; }
"$train" "${moe[@]}" --nproc_per_node=4 --steps=3 --log_every=1 --quiet --eval_batches=0 \
    --metrics_out="$tmp/moe_m.jsonl" > "$tmp/moe_train.txt" 2>&1 ||
  { echo "FAIL: MoE training"; cat "$tmp/moe_train.txt"; exit 1; }
worst=$(sed -n 's/.*"peak_mem_mb_max":\([0-9.e+-]*\).*/\1/p' "$tmp/moe_m.jsonl")
awk -v w="$worst" -v b="$bound" 'BEGIN { exit !(w != "" && w <= b) }' ||
  { echo "FAIL: MoE worst rank peaked at '$worst' MiB over the routing bound $bound"; exit 1; }
echo "MoE ep4: worst rank $worst MiB; even routing $even, bound $bound"

# A job that checkpoints estimates (and plans) like one that does not: the
# dry run dropped the directory but kept --checkpoint_every and friends,
# which alone are refused, so auto found no layout.
ck=(--checkpoint_dir="$tmp/ck" --checkpoint_every=4 --keep_last=2 --checkpoint_async)
"$estimate" "${common[@]}" --strategy=fsdp --nproc=2 "${ck[@]}" > "$tmp/ck.txt" ||
  { echo "FAIL: estimate with checkpoint flags"; cat "$tmp/ck.txt"; exit 1; }
"$estimate" "${common[@]}" --strategy=auto --nproc=2 --memory_budget=1GiB "${ck[@]}" > "$tmp/ck_auto.txt" ||
  { echo "FAIL: auto with checkpoint flags"; cat "$tmp/ck_auto.txt"; exit 1; }
grep -q "fits with the least communication" "$tmp/ck_auto.txt" ||
  { echo "FAIL: auto with checkpoint flags picked nothing"; cat "$tmp/ck_auto.txt"; exit 1; }

set +e
"$estimate" "${common[@]}" --nproc=0 2> "$tmp/err.txt"
code=$?
set -e
[[ $code == 2 ]] || { echo "FAIL: --nproc=0 exited $code, expected 2"; exit 1; }
grep -q "N >= 1" "$tmp/err.txt" || { echo "FAIL: no hint for --nproc=0"; cat "$tmp/err.txt"; exit 1; }
# A train command line's --nproc_per_node is named, with --nproc.
set +e
"$estimate" "${common[@]}" --strategy=fsdp --nproc_per_node=4 2> "$tmp/err_launch.txt"
code=$?
set -e
[[ $code == 2 ]] && grep -q -- "--nproc_per_node=4: estimate launches nothing; expected --nproc=N" \
  "$tmp/err_launch.txt" || { echo "FAIL: --nproc_per_node exited $code"; cat "$tmp/err_launch.txt"; exit 1; }
set +e
"$estimate" "${common[@]}" --pp=2 --nproc=2 --pp_split=time 2> "$tmp/err_pp.txt"
code=$?
set -e
[[ $code == 1 ]] || { echo "FAIL: --pp_split=time exited $code, expected 1"; exit 1; }
grep -q "pp_split=params" "$tmp/err_pp.txt" || { echo "FAIL: no hint for --pp_split=time"; cat "$tmp/err_pp.txt"; exit 1; }
# --rank with auto (whose table shows each layout's worst rank) was ignored.
set +e
"$estimate" "${common[@]}" --strategy=auto --nproc=2 --rank=1 2> "$tmp/err_auto_rank.txt"
code=$?
set -e
[[ $code == 2 ]] && grep -q -- "--rank=1 with --strategy=auto" "$tmp/err_auto_rank.txt" ||
  { echo "FAIL: --rank with auto exited $code"; cat "$tmp/err_auto_rank.txt"; exit 1; }
echo PASS

# A Llama job (--model=llama): its estimate against the trainer's own peak.
llama_train="$TEST_SRCDIR/weft/models/llama/train"
llama=(--model=llama --config="$TEST_SRCDIR/weft/models/llama/configs/llama_debug.textproto"
       --data="$tmp/corpus.txt" --num_workers=1 --micro_batch=4)
"$estimate" "${llama[@]}" --nproc=1 > "$tmp/llama.txt"
estimated=$(awk '$1 == "peak" && $3 == "MiB" { print $4 }' "$tmp/llama.txt")
"$llama_train" "${llama[@]:1}" --steps=2 --log_every=1 --quiet --eval_batches=1 \
    --metrics_out="$tmp/llama.jsonl"
measured=$(grep '"step":2,' "$tmp/llama.jsonl" | sed 's/.*"peak_mem_mb":\([0-9.e+-]*\).*/\1/')
echo "llama peak: estimated $estimated B, measured $measured MiB"
awk -v e="$estimated" -v m="$measured" 'BEGIN { r = e / (m * 1048576); exit !(r > 0.9 && r < 1.1) }' || {
  echo "FAIL: the Llama estimate is more than 10% off the measured peak"; exit 1; }
"$estimate" "${llama[@]}" --strategy=auto --nproc=4 --memory_budget=64MiB | tee "$tmp/llama_auto.txt"
grep -q "fits with the least communication" "$tmp/llama_auto.txt" || {
  echo "FAIL: no pick for the Llama"; exit 1; }
# A Llama config read as a GPT's names the flag.
if out=$("$estimate" --config="$TEST_SRCDIR/weft/models/llama/configs/llama_debug.textproto" 2>&1); then
  echo "FAIL: a Llama config was read as a GPT's"; exit 1
fi
grep -q -- "--model=llama" <<<"$out" || { echo "FAIL: no --model hint: $out"; exit 1; }
echo PASS