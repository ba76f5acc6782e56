#!/bin/sh
# Trains the tiny GPT for STEPS steps under each layout the parity tests
# cover and prints one line per layout: its name, the last loss and a hash
# of every step's loss (printed as %.9g). Run it before and after a change
# that should leave the numerics alone, and diff the two outputs: equal
# hashes mean bitwise-equal loss curves.
#   bazel build //models/gpt:train   (or TRAIN=path/to/train)
#   tools/bench/layout_losses.sh [STEPS=20] > before.txt
set -eu
STEPS=${1:-20}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TRAIN="${TRAIN:-$ROOT/bazel-bin/models/gpt/train}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
BASE="--config=$ROOT/models/gpt/configs/tiny.textproto --steps=$STEPS --log_every=1
  --eval_every=0 --eval_batches=0 --quiet --global_batch=8 --micro_batch=2"
MOE="--moe_every=1 --num_experts=4"
run() {  # name nproc flags...
  name=$1; n=$2; shift 2
  # shellcheck disable=SC2086
  if ! "$TRAIN" $BASE --nproc_per_node="$n" --metrics_out="$TMP/$name.jsonl" "$@" \
      >"$TMP/$name.log" 2>&1; then
    echo "$name FAILED: $(tail -1 "$TMP/$name.log")"; return
  fi
  python3 - "$name" "$TMP/$name.jsonl" <<'PY'
import hashlib, json, sys
losses = [json.loads(l)["loss"] for l in open(sys.argv[2]) if '"loss"' in l and '"step"' in l]
text = " ".join("%.9g" % x for x in losses)
print("%-22s steps %3d  last %.9g  hash %s" % (sys.argv[1], len(losses), losses[-1],
      hashlib.sha1(text.encode()).hexdigest()[:12]))
PY
}
run single       1
run dp           1 --strategy=dp
run ddp          2 --strategy=ddp
run zero1        2 --strategy=zero --zero_stage=1
run zero2        2 --strategy=zero --zero_stage=2
run zero3        2 --strategy=zero --zero_stage=3
run fsdp         2 --strategy=fsdp
run hsdp         4 --strategy=fsdp --dp_replicate=2
run tp           2 --strategy=tp --tp=2
run tp_fsdp      4 --strategy=tp,fsdp --tp=2
run sp_fsdp      4 --strategy=sp,fsdp --tp=2
run cp           2 --strategy=fsdp --cp=2
run cp_sp        4 --strategy=sp --cp=2 --tp=2
run pp           2 --pp=2
run pp_zero1     4 --pp=2 --strategy=zero --zero_stage=1
run pp_interl    4 --pp=2 --strategy=fsdp --pp_schedule=interleaved --pp_virtual_stages=2
run cp_pp        4 --pp=2 --cp=2 --strategy=fsdp
run recompute    2 --strategy=ddp --recompute
run moe          1 $MOE
run ep           2 $MOE --ep=2
run ep_fsdp      2 $MOE --ep=2 --strategy=fsdp
run ep_tp        4 $MOE --ep=2 --tp=2 --strategy=tp,fsdp
run ep_pp        4 $MOE --ep=2 --pp=2 --strategy=fsdp
run cp_moe       4 $MOE --ep=2 --cp=2 --strategy=fsdp
