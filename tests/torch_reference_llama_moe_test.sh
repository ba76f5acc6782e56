#!/usr/bin/env bash
# The Llama mixture of experts against PyTorch (Debian's python3-torch; the
# reference model is written in torch_llama.py): the same weights and
# batches, every step's loss within 2e-5, the weights after 12 steps.
# Dropless: with a capacity, one near-tie that f32 rounding flips in a
# router's top-k moves a token's drop and the runs part (seen at step 7;
# capacity drops are checked against one process in llama_moe_parity_test
# and against PyTorch for GPT's experts, which share the routing code).
#  1. Mixtral's router (softmax, top-2 renormalised), dropless, with the
#     balance and z-losses and two routing groups: one process, ep2 x
#     fsdp, tp2 (every expert's gate, up and down split) and ep2 x tp2 x fsdp
#     (each data-parallel rank's micro-batch is one of the reference's groups).
#  2. Qwen3-MoE's: 8 experts, top-4, raw gates (norm_topk_prob false).
#  3. Sigmoid scores with a shared expert.
set -euo pipefail
python=/usr/bin/python3
"$python" -c "import torch" 2>/dev/null || {
  echo "FAIL: $python cannot import torch; install Debian's python3-torch (tools/setup.sh does)"
  exit 1
}
# Weights within 3e-3 of each tensor's largest (1e-3 elsewhere): an expert
# few tokens reach has tiny gradients in most elements, where Adam's
# division by sqrt(v) turns f32 rounding into 1.4e-3 after 12 steps; every
# step's loss stays within 2e-5 (seen: 5e-7).
reference() {
  local work="$1"; shift
  "$python" "$TEST_SRCDIR/weft/tests/torch_reference.py" --model=llama \
    --train="$TEST_SRCDIR/weft/models/llama/train" \
    --ckpt="$TEST_SRCDIR/weft/tools/ckpt/ckpt" \
    --workdir="$TEST_TMPDIR/$work" --weight_rtol=3e-3 "$@"
}
ep="--nproc_per_node=2 --ep=2 --strategy=fsdp --micro_batch=2 --moe_routing_groups=1"
layouts=(
  ""
  "$ep"
  "--nproc_per_node=2 --strategy=tp --tp=2"
  "--nproc_per_node=4 --ep=2 --tp=2 --strategy=tp,fsdp --micro_batch=2 --moe_routing_groups=1"
)
reference mixtral --llama_experts=4 --micro_batch=4 --routing_groups=2 \
  --z_coef=0.001 --weft_runs="$(IFS=';'; echo "${layouts[*]}")"
reference qwen3 --llama_experts=8 --top_k=4 --moe_ffn_hidden=16 --norm_topk_prob=0 \
  --micro_batch=4 --routing_groups=2 --weft_runs=";$ep"
reference sigmoid --llama_experts=4 --router_score=sigmoid --shared_hidden=24 \
  --micro_batch=4 --routing_groups=2 --weft_runs=";$ep"
