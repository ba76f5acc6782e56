#!/usr/bin/env bash
# weft against PyTorch (Debian's python3-torch, installed by tools/setup.sh):
# the same GPT, weights and batches, step by step; one process and several
# layouts of 2 and 4 gloo ranks, AdamW and SGD; and the same for the Llama.
# See torch_reference.py.
set -euo pipefail
python=/usr/bin/python3
"$python" -c "import torch" 2>/dev/null || {
  echo "FAIL: $python cannot import torch; install Debian's python3-torch (tools/setup.sh does)"
  exit 1
}
# One run per entry, each against the same PyTorch run ("" = one process).
layouts=(
  ""
  "--nproc_per_node=2 --strategy=fsdp"
  "--nproc_per_node=2 --strategy=tp --tp=2"
  "--nproc_per_node=2 --cp=2"
  "--nproc_per_node=4 --strategy=sp,fsdp --tp=2 --dp_shard=2"
  "--nproc_per_node=4 --pp=2 --strategy=zero --zero_stage=1 --micro_batch=2"
  "--nproc_per_node=4 --pp=2 --pp_schedule=interleaved --pp_virtual_stages=2 --strategy=fsdp --micro_batch=2"
  "--nproc_per_node=4 --strategy=zero --zero_stage=2 --micro_batch=2"
)
reference() {
  "$python" "$TEST_SRCDIR/weft/tests/torch_reference.py" \
    --train="$TEST_SRCDIR/weft/models/gpt/train" \
    --ckpt="$TEST_SRCDIR/weft/tools/ckpt/ckpt" \
    --workdir="$TEST_TMPDIR/torch_reference" "$@"
}
# ...plus the validation loss, and //models/gpt:sample's greedy text past the
# window with the KV cache on and off.
reference --weft_runs="$(IFS=';'; echo "${layouts[*]}")" \
  --sample="$TEST_SRCDIR/weft/models/gpt/sample"
# A GPT with mixture-of-experts blocks (from a safetensors file in weft's
# names): capacity drops, the balance and z losses, two routing groups, and
# expert parallelism under fsdp, pp x fsdp, tp x fsdp and cp x fsdp (each rank's
# micro-batch is one routing group: the reference's groups of micro 4).
moe_layouts=(
  ""
  "--nproc_per_node=2 --ep=2 --strategy=fsdp --micro_batch=2 --moe_routing_groups=1"
  "--nproc_per_node=4 --ep=2 --pp=2 --strategy=expert,fsdp --micro_batch=2 --moe_routing_groups=1"
  "--nproc_per_node=4 --ep=2 --tp=2 --strategy=tp,fsdp --micro_batch=2 --moe_routing_groups=1"
  "--nproc_per_node=4 --ep=2 --cp=2 --strategy=fsdp --micro_batch=2 --moe_routing_groups=1"
)
reference --moe_every=2 --micro_batch=4 --routing_groups=2 --capacity_factor=1.25 \
  --z_coef=0.001 --weft_runs="$(IFS=';'; echo "${moe_layouts[*]}")"
# SGD with Nesterov momentum and coupled weight decay, linear decay.
reference --optimizer=sgd --schedule=linear --lr=0.3 \
  --weft_runs=";--nproc_per_node=2 --strategy=zero --zero_stage=3"
# The Llama (RMSNorm, RoPE, SwiGLU, 4 query heads over 2 K/V heads, untied
# head, from a safetensors file in weft's names) in one process and under
# fsdp, tp=2 (the K/V heads split), tp=4 (each K/V head replicated on 2
# ranks), pp and cp (rotary positions of the zigzag chunks).
llama_layouts=(
  ""
  "--nproc_per_node=2 --strategy=fsdp"
  "--nproc_per_node=2 --strategy=tp --tp=2"
  "--nproc_per_node=4 --strategy=tp --tp=4"
  "--nproc_per_node=2 --pp=2 --pp_split=layers --micro_batch=2"
  "--nproc_per_node=2 --cp=2"
)
"$python" "$TEST_SRCDIR/weft/tests/torch_reference.py" --model=llama \
  --train="$TEST_SRCDIR/weft/models/llama/train" \
  --ckpt="$TEST_SRCDIR/weft/tools/ckpt/ckpt" \
  --workdir="$TEST_TMPDIR/torch_reference_llama" \
  --weft_runs="$(IFS=';'; echo "${llama_layouts[*]}")"
# Qwen3's QK-norm (per-head RMSNorm of q and k before RoPE): one process,
# and tp, where each rank's heads give part of the norms' gradients.
"$python" "$TEST_SRCDIR/weft/tests/torch_reference.py" --model=llama --qk_norm \
  --train="$TEST_SRCDIR/weft/models/llama/train" \
  --ckpt="$TEST_SRCDIR/weft/tools/ckpt/ckpt" \
  --workdir="$TEST_TMPDIR/torch_reference_qk_norm" \
  --weft_runs=";--nproc_per_node=2 --strategy=tp --tp=2"
