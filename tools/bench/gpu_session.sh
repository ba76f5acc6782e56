#!/usr/bin/env bash
# One GPU session's work in few device calls: build and pack everything here
# (no GPU needed), carry the pack to the lent GPU machine (no Bazel there),
# and run every gpu-tagged test, the sanitizers, the speed comparison with
# PyTorch, each strategy's overhead at world size 1 and the 200-step curve.
#
#   tools/bench/gpu_session.sh pack [--out=.gpub] [extra //targets]
#       builds with //tools:bundle into OUT/bundle, adds BPE-8192 tokens of
#       ../shared/data (or $WEFT_DATA_DIR) and the PyTorch scripts, and
#       writes OUT/bundle.tar.xz (must stay under the 64 MiB carry limit)
#   tools/bench/gpu_session.sh run [--pack=.gpub/bundle.tar.xz] [STAGE ...]
#       on the GPU machine, from the repository root: unpacks to /tmp/weft_gpu
#       and runs the stages (default: all, in this order), logging each to
#       $OUT (or /tmp/weft_gpu/out) and a one-line verdict per item to
#       summary.txt:
#         tests       every gpu test binary in the pack, and the trainer on
#                     CUDA (f32, bf16) against PyTorch step by step
#         sanitize    memcheck on kernels_parity_test, racecheck on attention_test
#         speed       gpt_throughput vs PyTorch eager and torch.compile, B=32 and 64
#         strategies  none, ddp, zero-1/2/3, fsdp, tp, cp at world size 1 (NCCL)
#         train       GPT-2 124M on BPE-8192 tokens, 200 steps (the loss curve)
#         breakdown   the trainer's step breakdown: plain, fsdp, zero-3
#         sample      greedy text from train's checkpoint, KV cache on and off
#         profile     ncu kernel time by family over 1200 launches at B=16
#                     (kernel_families.py)
#         gemmtune    gpt_throughput B=32 with and without WEFT_GEMM_AUTOTUNE=1
#                     (cuBLASLt candidates timed per GEMM shape)
#         tiling      flash attention per tiling (kernels_benchmark at B=16),
#                     then gpt_throughput B=32 with the fastest forward and backward
#                     tilings against the default, in one process each
#         graph       gpt_throughput with and without --cuda_graph (the step
#                     captured once and replayed): B=32 124M, and a small model
#                     where launches dominate
#         kernels     every kernel alone at B=32 (kernels_benchmark: ms, and
#                     TFLOP/s or GB/s) and PyTorch's ops at the same shapes
#                     (kernels_torch.py, SDPA per backend), then gpt_throughput
#                     B=32 with bias gradients from our column sums against
#                     cuBLASLt's BGRADB
#
# Each item has a timeout, so one hang cannot eat the session's device time,
# and WEFT_GPU_DEADLINE (seconds, default 540) caps the whole run: an item
# gets at most the time left and is skipped when too little is. The logs end
# up in $OUT/logs.tar.gz with $OUT/summary.txt beside it (the device tool
# returns at most 8 files). WEFT_GPU_BATCHES (default "32 64") picks the
# speed stage's batch sizes; WEFT_GPU_TILINGS (default "4x16 8x16
# fused-dq", or "all") the tilings stage `tiling` times.
set -uo pipefail

mode="${1:-}"
shift || true
root="$(cd "$(dirname "$0")/../.." && pwd)"

pack() {
  local out="$root/.gpub" extra=()
  for a in "$@"; do
    case "$a" in
      --out=*) out="${a#--out=}" ;;
      //*) extra+=("$a") ;;
      *) echo "gpu_session pack: unknown argument '$a'" >&2; exit 2 ;;
    esac
  done
  cd "$root" || exit 1
  mapfile -t tests < <(bazel query 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null)
  if [ ${#tests[@]} -eq 0 ]; then
    echo "gpu_session pack: bazel query found no gpu-tagged tests" >&2
    exit 1
  fi
  local targets=("${tests[@]}" //tools/bench:gpt_throughput //models/gpt:train //tools/ckpt
                 //models/gpt:sample
                 //core/kernels/cuda:kernels_benchmark "${extra[@]}")
  rm -rf "$out/bundle"
  bazel run -c opt //tools:bundle -- --out="$out/bundle" "${targets[@]}" || exit 1
  local data="${WEFT_DATA_DIR:-$root/../shared/data}"
  local inputs
  inputs="$(ls "$data"/tinyshakespeare/input.txt "$data"/wikitext-2/{valid,test}.txt 2>/dev/null \
            | paste -sd, -)"
  if [ -z "$inputs" ]; then
    echo "gpu_session pack: no corpora under $data (set WEFT_DATA_DIR)" >&2
    exit 1
  fi
  bazel run -c opt //tools:prepare_data -- --input="$inputs" --tokenizer=bpe:8192 \
      --progress=false --out="$out/bundle/data_bpe8k" || exit 1
  cp "$root"/tools/bench/*.py "$root"/tests/torch_reference.py "$root"/tests/torch_gpt.py "$0" \
      "$out/bundle/"
  cp "$data"/tinyshakespeare/input.txt "$out/bundle/corpus.txt" 2>/dev/null ||
      cp "$(echo "$inputs" | cut -d, -f1)" "$out/bundle/corpus.txt"
  # The binaries each hold the same CUDA fatbins (~20 MB): a dictionary
  # spanning the whole stream stores them once (56 MiB -> 14 MiB for 21
  # targets; unpacking needs 512 MiB of memory).
  tar -C "$out/bundle" -cf - . | xz -T1 --lzma2=preset=6,dict=512MiB > "$out/bundle.tar.xz"
  local mib=$(( $(stat -c %s "$out/bundle.tar.xz") / 1048576 ))
  echo "gpu_session pack: $out/bundle.tar.xz, $mib MiB, ${#targets[@]} targets"
  if [ "$mib" -ge 64 ]; then
    echo "gpu_session pack: over the 64 MiB carry limit; pack fewer targets" >&2
    exit 1
  fi
}

# Runs one item with a timeout; its log goes to $logs/<name>.log and its
# verdict (ok / FAILED rc=N / TIMEOUT) to the summary.
item() {
  local name="$1" limit="$2"
  shift 2
  local left=$(( ${WEFT_GPU_DEADLINE:-540} - SECONDS - 15 ))
  if [ "$left" -lt 10 ]; then
    printf '%-34s %-22s\n' "$name" "skipped (deadline)" | tee -a "$summary"
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  local verdict="ok"
  [ $rc -ne 0 ] && verdict="FAILED rc=$rc"
  [ $rc -eq 124 ] && verdict="TIMEOUT after ${limit}s"
  printf '%-34s %-22s %4ss\n' "$name" "$verdict" "$((SECONDS - t0))" | tee -a "$summary"
  return $rc
}

# The JSON summaries (weft's and PyTorch's benchmarks print one per run) as
# "impl: tok/s, median step ms, mfu" lines, and each run's ratio to `$2`'s
# tok/s when given.
throughput_of() {
  python3 - "$@" <<'PY'
import json, os, sys
rows = []
for path in sys.argv[1:]:
    if not os.path.exists(path):
        print(f"  (no log: {os.path.basename(path)})")
        continue
    for line in open(path, errors="replace"):
        if line.startswith('{"bench"'):
            rows.append(json.loads(line))
for r in rows:
    print(f"  {r['impl']:14s} B={r['global_batch']}: {r['tokens_per_s']:>10,.0f} tok/s  "
          f"{r['step_ms_median']:8.2f} ms  mfu {r.get('mfu')}")
weft = [r for r in rows if r["impl"] == "weft"]
for r in rows:
    if weft and r["impl"] != "weft":
        print(f"  weft / {r['impl']} = {weft[0]['tokens_per_s'] / r['tokens_per_s']:.3f}")
PY
}

# The weft tok/s of a gpt_throughput log (0 when the run printed none, or
# never ran: the deadline skipped it).
tok_s_of() {
  [ -f "$1" ] || { echo 0; return; }
  python3 - "$1" <<'PY'
import json, sys
best = 0
for line in open(sys.argv[1], errors="replace"):
    if line.startswith('{"bench"'):
        r = json.loads(line)
        if r["impl"] == "weft":
            best = r["tokens_per_s"]
print(int(best))
PY
}

# Exports `assignments` (VAR=value ...) for the stages after this one when
# the log `$2` ran faster than the log `$1`, so that `speed` compares the
# fastest configuration with PyTorch in this same session (the code's
# defaults change only after a human reads the figures).
keep_if_faster() {
  local base="$1" candidate="$2" a
  shift 2
  local b c
  b="$(tok_s_of "$base")" c="$(tok_s_of "$candidate")"
  if [ "$c" -gt "$b" ] && [ "$b" -gt 0 ]; then
    for a in "$@"; do export "${a?}"; done
    echo "  later stages run with $* ($c against $b tok/s)" | tee -a "$summary"
  else
    echo "  later stages keep the defaults ($c against $b tok/s for $*)" | tee -a "$summary"
  fi
}

stage_tests() {
  for t in bin/*_test; do
    [ -x "$t" ] || continue
    local n
    n="$(basename "$t")"
    item "test $n" 90 ./run "$n" --gtest_brief=1
    grep -E "Failure|Expected|Which is|FAILED" "$logs/test $n.log" | head -12 >> "$summary"
  done
  # weft on the GPU against PyTorch on the CPU (tests/torch_reference_test's
  # check): the same GPT, weights and batches, 12 steps. f32 runs full-f32
  # GEMMs, so it must agree as closely as the CPU does; bf16 compute with
  # f32 master weights only to bf16's precision.
  local ref=(python3 torch_reference.py --train="./run train" --ckpt="./run ckpt" --device=cuda
             --corpus=corpus.txt)
  item "torch reference cuda f32" 120 "${ref[@]}" --workdir=/tmp/weft_gpu_ref32 \
      --sample="./run sample"
  item "torch reference cuda bf16" 120 "${ref[@]}" --workdir=/tmp/weft_gpu_ref16 \
      --weft_runs=--dtype=bf16 --loss_rtol=2e-2 --norm_rtol=0.1 --weight_rtol=0.1
  grep -hE "PASS|FAIL|^  \[" "$logs"/"torch reference"*.log | head -12 >> "$summary"
}

stage_sanitize() {
  # The kernels changed since the last clean run first, then the broad one.
  # The binaries run directly (not through ./run), so they need the bundle's
  # libraries; compute-sanitizer lives beside nvcc.
  local t
  export LD_LIBRARY_PATH="$PWD/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$PATH:/usr/local/cuda/bin"
  for t in embedding_ce_test layernorm_test elementwise_test gemm_test; do
    item "memcheck $t" 120 \
        compute-sanitizer --tool memcheck --error-exitcode 9 ./bin/$t --gtest_brief=1
  done
  for t in attention_block_test attention_test layernorm_test; do
    item "racecheck $t" 120 \
        compute-sanitizer --tool racecheck --error-exitcode 9 ./bin/$t --gtest_brief=1
  done
  item "memcheck wgmma_test" 60 \
      compute-sanitizer --tool memcheck --error-exitcode 9 ./bin/wgmma_test --gtest_brief=1
  item "memcheck attention_block_test" 120 \
      compute-sanitizer --tool memcheck --error-exitcode 9 ./bin/attention_block_test --gtest_brief=1
  item "memcheck kernels_parity_test" 300 \
      compute-sanitizer --tool memcheck --error-exitcode 9 ./bin/kernels_parity_test --gtest_brief=1
}

stage_speed() {
  echo "  speed: tilings ${WEFT_FLASH_FWD_TILING:-default}/${WEFT_FLASH_BWD_TILING:-default}," \
       "GEMM autotune ${WEFT_GEMM_AUTOTUNE:-off}, bias grads ${WEFT_BIAS_GRAD:-epilogue}," \
       "flags '${WEFT_SPEED_FLAGS:-}'" | tee -a "$summary"
  for b in ${WEFT_GPU_BATCHES:-32 64}; do
    # shellcheck disable=SC2086  # WEFT_SPEED_FLAGS: flags `graph` found faster
    WEFT_GEMM_LOG=1 item "weft gpt_throughput B=$b" 240 ./run gpt_throughput --device=cuda \
        --global_batch=$b --micro_batch=$b --steps=30 ${WEFT_SPEED_FLAGS:-}
    # GEMM shapes whose fused epilogue cuBLASLt turned down (matmul.cc).
    grep "^weft gemm:" "$logs/weft gpt_throughput B=$b.log" | sort -u | head -8 >> "$summary"
    item "torch eager+compile B=$b" 400 python3 gpt_throughput_torch.py --batch=$b --steps=30
    throughput_of "$logs/weft gpt_throughput B=$b.log" "$logs/torch eager+compile B=$b.log" \
        | tee -a "$summary"
  done
}

stage_strategies() {
  export WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1
  local port=29700
  local -a cases=("none:" "ddp:--train.parallel.strategy=ddp"
                  "zero-1:--train.parallel.strategy=zero --train.parallel.zero_stage=1"
                  "zero-2:--train.parallel.strategy=zero --train.parallel.zero_stage=2"
                  "zero-3:--train.parallel.strategy=zero --train.parallel.zero_stage=3"
                  "fsdp:--train.parallel.strategy=fsdp"
                  "tp1:--train.parallel.strategy=tp --train.parallel.tp=1"
                  "cp1:--train.parallel.strategy=cp --train.parallel.cp=1")
  for c in "${cases[@]}"; do
    local name="${c%%:*}" flags="${c#*:}"
    port=$((port + 1))
    # shellcheck disable=SC2086
    MASTER_PORT=$port item "strategy $name B=16" 200 ./run gpt_throughput --device=cuda \
        --global_batch=16 --micro_batch=16 --steps=20 --train.parallel.backend=nccl $flags
    throughput_of "$logs/strategy $name B=16.log" | sed "s/weft /$name /" | tee -a "$summary"
  done
  unset WORLD_SIZE RANK LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR
}

stage_train() {
  item "train 124M bpe8k 200 steps" 400 ./run train \
      --config=bin/train.runfiles/weft/models/gpt/configs/gpt2_124m.textproto \
      --model.vocab_size=8192 --train.data.data=data_bpe8k --train.steps=200 \
      --train.optim.warmup_steps=20 --train.log_every=10 --train.metrics_out="$logs/train.jsonl" \
      --train.checkpoint_dir=/tmp/weft_gpu_ckpt
  grep -E "^step (1|10|20|50|100|150|200) \||val_loss" "$logs/train 124M bpe8k 200 steps.log" \
      | cut -c1-60 >> "$summary"
}

# Where the sharded strategies' time goes at world size 1: the trainer's
# step breakdown (forward, backward, exposed comm, optimizer) for plain,
# fsdp and zero-3 on the 124M model, 30 steps each, the last step's line.
stage_breakdown() {
  export WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1
  local -a cases=("none:" "fsdp:--train.parallel.strategy=fsdp"
                  "zero-3:--train.parallel.strategy=zero --train.parallel.zero_stage=3")
  local c port=29800
  for c in "${cases[@]}"; do
    local name="${c%%:*}" flags="${c#*:}"
    port=$((port + 1))
    # shellcheck disable=SC2086
    MASTER_PORT=$port item "breakdown $name" 90 ./run train \
        --config=bin/train.runfiles/weft/models/gpt/configs/gpt2_124m.textproto \
        --model.vocab_size=8192 --train.data.data=data_bpe8k --train.steps=30 \
        --train.log_every=10 --train.eval_every=0 --train.parallel.backend=nccl $flags
    grep "^step 30 |" "$logs/breakdown $name.log" | sed "s/^/  $name: /" | cut -c1-400 >> "$summary"
  done
  unset WORLD_SIZE RANK LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR
}

# Greedy text from the 200-step checkpoint (stage train) on the GPU, with
# and without the key/value cache: tokens/s each way, and whether they agree.
stage_sample() {
  local kv
  for kv in true false; do
    item "sample cuda kv_cache=$kv" 90 ./run sample --checkpoint=/tmp/weft_gpu_ckpt \
        --device=cuda --prompt="ROMEO:" --tokens=400 --temperature=0 --kv_cache=$kv
    grep -o "sampled [0-9]* tokens.*" "$logs/sample cuda kv_cache=$kv.log" >> "$summary"
  done
  # The text is stdout; the figures line (stderr) follows it on its line.
  local strip='s/sampled [0-9]* tokens in .*//'
  if cmp -s <(sed "$strip" "$logs/sample cuda kv_cache=true.log") \
            <(sed "$strip" "$logs/sample cuda kv_cache=false.log"); then
    echo "  sample: same text with and without the cache" >> "$summary"
  else
    echo "  sample: the text differs with and without the cache" >> "$summary"
  fi
}

stage_profile() {
  # ~600 launches per step at B=16: skip init and 8 steps, then time 1200.
  item "ncu gpt_throughput B=16" 150 ncu --clock-control none \
      --metrics gpu__time_duration.sum --csv --page raw --print-units base \
      --launch-skip 5000 --launch-count 1200 ./run gpt_throughput --device=cuda \
      --global_batch=16 --micro_batch=16 --steps=14
  python3 kernel_families.py "$logs/ncu gpt_throughput B=16.log" | tee -a "$summary"
}

# Flash attention's tilings (attention_internal.h): each one's kernel time,
# then the whole step with the fastest forward and backward tiling beside the
# default, so the default can follow the measurement.
stage_tiling() {
  # Only tilings that compute the right thing compete: a wgmma family whose
  # parity test fails is dropped (all of them when wgmma_test, which checks
  # their building blocks, fails).
  local mma="4x16 8x16 4x32" wg="wgmma-64 wgmma-128" nm="wgmma-64-nmajor wgmma-128-nmajor"
  local pipe="wgmma-64-pipe wgmma-128-pipe" nmpipe="wgmma-64-nmajor-pipe wgmma-128-nmajor-pipe"
  local wide="wgmma-64-pipe-k128 wgmma-128-pipe-k128" nmwide="wgmma-64-nmajor-pipe-k128"
  nmwide+=" wgmma-128-nmajor-pipe-k128"
  local fused="fused-dq"
  local t log fwd bwd tilings
  # One process per test: a kernel that faults takes only its own family.
  tiling_test() {
    item "attention_test $1" 90 ./run attention_test --gtest_filter="FlashTilingTest.$1" \
        --gtest_brief=1 && return 0
    grep -E "Failure|tiling|FAILED" "$logs/attention_test $1.log" | head -6 >> "$summary"
    return 1
  }
  tiling_test "EightWarpsOf16Rows:FlashTilingTest.FourWarpsOf32Rows" || mma="4x16"
  tiling_test FusedDqBackward || fused=""
  tiling_test WgmmaOnHopper || wg="" pipe="" wide=""
  tiling_test WgmmaNMajorOnHopper || nm="" nmpipe="" nmwide=""
  tiling_test PipelinedWgmmaOnHopper || pipe="" nmpipe="" wide="" nmwide=""
  tiling_test WideKeyTileWgmmaForwardOnHopper || wide="" nmwide=""
  if ! item "wgmma_test" 60 ./run wgmma_test --gtest_brief=1; then
    grep -E "Failure|wrong|FAILED" "$logs/wgmma_test.log" | head -8 >> "$summary"
    wg="" nm="" pipe="" nmpipe="" wide="" nmwide=""
  fi
  tilings="$(echo $mma $fused $wg $nm $pipe $nmpipe $wide $nmwide)"
  # Every family is tested above; the third session timed them all and
  # every wgmma tiling lost to 8x16 (GPU_RESULTS.md), so by default only
  # the contenders are timed (~25 s each): WEFT_GPU_TILINGS=all for all.
  if [ "${WEFT_GPU_TILINGS:-contenders}" != all ]; then
    local keep="${WEFT_GPU_TILINGS:-4x16 8x16 fused-dq}" t2 picked=""
    [ "$keep" = contenders ] && keep="4x16 8x16 fused-dq"
    for t2 in $keep; do
      [[ " $tilings " == *" $t2 "* ]] && picked+="$t2 "
    done
    tilings="$(echo $picked)"
  fi
  echo "  tilings timed: $tilings" >> "$summary"
  # One process per tiling: a kernel that faults takes only its own line.
  for t in $tilings; do
    item "kernels_benchmark attention $t" 60 ./run kernels_benchmark --batch=16 --iters=50 \
        --only="$t)"
    grep "^attention" "$logs/kernels_benchmark attention $t.log" | sed 's/^/  /' >> "$summary"
  done
  # "  attention fwd (flash, bf16, 8x16)   0.123 ms ..." -> the tiling of the least ms.
  log="$(cat "$logs"/kernels_benchmark\ attention\ *.log)"
  fwd="$(grep "^attention fwd" <<< "$log" | sort -t')' -k2 -g | head -1 | sed -E 's/.*, ([0-9a-z-]+)\).*/\1/')"
  bwd="$(grep "^attention bwd" <<< "$log" | sort -t')' -k2 -g | head -1 | sed -E 's/.*, ([0-9a-z-]+)\).*/\1/')"
  [ -n "$fwd" ] && [ -n "$bwd" ] || { echo "  tiling: no kernel times" >> "$summary"; return; }
  item "weft gpt_throughput B=32 default tiling" 240 ./run gpt_throughput --device=cuda \
      --global_batch=32 --micro_batch=32 --steps=30
  WEFT_FLASH_FWD_TILING=$fwd WEFT_FLASH_BWD_TILING=$bwd item \
      "weft gpt_throughput B=32 fwd $fwd bwd $bwd" 240 ./run gpt_throughput --device=cuda \
      --global_batch=32 --micro_batch=32 --steps=30
  throughput_of "$logs/weft gpt_throughput B=32 default tiling.log" | sed 's/weft /default /' \
      | tee -a "$summary"
  throughput_of "$logs/weft gpt_throughput B=32 fwd $fwd bwd $bwd.log" \
      | sed "s/weft /$fwd+$bwd /" | tee -a "$summary"
  # Same seed and tokens: the losses should agree to bf16 rounding.
  grep -h "^step  30" "$logs/weft gpt_throughput B=32 default tiling.log" \
      "$logs/weft gpt_throughput B=32 fwd $fwd bwd $bwd.log" | cut -c1-24 | sed 's/^/  /' \
      >> "$summary"
  keep_if_faster "$logs/weft gpt_throughput B=32 default tiling.log" \
      "$logs/weft gpt_throughput B=32 fwd $fwd bwd $bwd.log" \
      "WEFT_FLASH_FWD_TILING=$fwd" "WEFT_FLASH_BWD_TILING=$bwd"
}

# cuBLASLt's first heuristic choice against the fastest of its first 8
# (matmul.cc, WEFT_GEMM_AUTOTUNE), same process kind, back to back.
stage_gemmtune() {
  item "weft gpt_throughput B=32 heuristic GEMMs" 240 ./run gpt_throughput --device=cuda \
      --global_batch=32 --micro_batch=32 --steps=30
  WEFT_GEMM_AUTOTUNE=1 WEFT_GEMM_LOG=1 item "weft gpt_throughput B=32 autotuned GEMMs" 300 \
      ./run gpt_throughput --device=cuda --global_batch=32 --micro_batch=32 --steps=30
  throughput_of "$logs/weft gpt_throughput B=32 heuristic GEMMs.log" \
      | sed 's/weft /heuristic /' | tee -a "$summary"
  throughput_of "$logs/weft gpt_throughput B=32 autotuned GEMMs.log" \
      | sed 's/weft /autotuned /' | tee -a "$summary"
  grep "^weft gemm: autotuned" "$logs/weft gpt_throughput B=32 autotuned GEMMs.log" \
      | sort -u | head -16 | cut -c1-160 >> "$summary"
  keep_if_faster "$logs/weft gpt_throughput B=32 heuristic GEMMs.log" \
      "$logs/weft gpt_throughput B=32 autotuned GEMMs.log" WEFT_GEMM_AUTOTUNE=1
}

# The step as one graph launch (--cuda_graph, core/runtime/step_graph.h)
# against the eager step, back to back: GPT-2 124M at B=32, where the GPU
# work hides the host's launches, and a small model, where it does not.
stage_graph() {
  local small=(--n_layer=4 --n_head=4 --d_model=256 --seq_len=256 --vocab_size=4096
               --global_batch=16 --micro_batch=16 --steps=40)
  local mode flags
  for mode in eager cuda_graph; do
    flags=()
    [ "$mode" = cuda_graph ] && flags=(--cuda_graph)
    item "weft gpt_throughput B=32 $mode" 240 ./run gpt_throughput --device=cuda \
        --global_batch=32 --micro_batch=32 --steps=30 "${flags[@]}"
    item "weft gpt_throughput small $mode" 120 ./run gpt_throughput --device=cuda \
        "${small[@]}" "${flags[@]}"
  done
  for mode in eager cuda_graph; do
    throughput_of "$logs/weft gpt_throughput B=32 $mode.log" \
        | sed "s/weft /B=32 $mode /" | tee -a "$summary"
    throughput_of "$logs/weft gpt_throughput small $mode.log" \
        | sed "s/weft /small $mode /" | tee -a "$summary"
  done
  keep_if_faster "$logs/weft gpt_throughput B=32 eager.log" \
      "$logs/weft gpt_throughput B=32 cuda_graph.log" WEFT_SPEED_FLAGS=--cuda_graph
}

# Each kernel alone (kernels_benchmark at B=32: the memory-bound ones say how
# far they are from the bandwidth, the cross-entropy compares its two
# kernels), then the whole step with weight gradients' bias gradients from
# our column sums (WEFT_BIAS_GRAD=column-sum) against cuBLASLt's BGRADB
# epilogue, keeping the faster for the stages after.
stage_kernels() {
  item "kernels_benchmark B=32" 120 ./run kernels_benchmark --batch=32 --iters=20
  grep -E " ms" "$logs/kernels_benchmark B=32.log" | sed 's/^/  /' >> "$summary"
  # PyTorch's ops at the same shapes, SDPA with each backend it offers.
  item "kernels_torch B=32" 240 python3 kernels_torch.py --batch=32 --iters=20
  grep -E " ms|unavailable" "$logs/kernels_torch B=32.log" | sed 's/^/  /' >> "$summary"
  item "weft gpt_throughput B=32 bias grad epilogue" 240 ./run gpt_throughput --device=cuda \
      --global_batch=32 --micro_batch=32 --steps=30
  WEFT_BIAS_GRAD=column-sum item "weft gpt_throughput B=32 bias grad column-sum" 240 \
      ./run gpt_throughput --device=cuda --global_batch=32 --micro_batch=32 --steps=30
  local mode
  for mode in epilogue column-sum; do
    throughput_of "$logs/weft gpt_throughput B=32 bias grad $mode.log" \
        | sed "s/weft /dbias $mode /" | tee -a "$summary"
  done
  keep_if_faster "$logs/weft gpt_throughput B=32 bias grad epilogue.log" \
      "$logs/weft gpt_throughput B=32 bias grad column-sum.log" WEFT_BIAS_GRAD=column-sum
}

# The device tool returns at most 8 files: one archive of every log.
pack_logs() {
  [ -n "${OUT:-}" ] || return 0
  tar -C "$logs" -czf "$OUT/logs.tar.gz" . && cp "$summary" "$OUT/summary.txt"
}

run() {
  local packfile="$root/.gpub/bundle.tar.xz" stages=()
  for a in "$@"; do
    case "$a" in
      --pack=*) packfile="${a#--pack=}" ;;
      tests|sanitize|speed|strategies|train|sample|profile|breakdown|tiling|gemmtune|graph|kernels)
        stages+=("$a") ;;
      *) echo "gpu_session run: unknown argument '$a'" >&2; exit 2 ;;
    esac
  done
  [ ${#stages[@]} -eq 0 ] && stages=(tests sanitize speed profile strategies train sample)
  local dir=/tmp/weft_gpu
  rm -rf "$dir" && mkdir -p "$dir" && tar -C "$dir" -xJf "$packfile" || exit 1
  logs="$dir/out"
  mkdir -p "$logs"
  trap pack_logs EXIT
  summary="$logs/summary.txt"
  cd "$dir" || exit 1
  export TEST_TMPDIR=/tmp/weft_gpu_tmp WEFT_RUN_QUIET=1
  mkdir -p "$TEST_TMPDIR"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$summary"
  for s in "${stages[@]}"; do
    echo "== $s" | tee -a "$summary"
    "stage_$s"
  done
  echo "== summary ($summary)"
  cat "$summary"
}

case "$mode" in
  pack) pack "$@" ;;
  run) run "$@" ;;
  *) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 2 ;;
esac
