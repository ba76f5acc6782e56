#!/usr/bin/env bash
# Runs the CUDA kernels' real source on the CPU under a small emulator and
# checks them against double-precision references: a way to validate
# indexing, masking, fragment layouts and reductions on a machine without a
# GPU. It proves nothing about real hardware (timing, races the barrier
# emulation hides, shared-memory limits, cuBLASLt), so the gpu-tagged tests
# still decide. Needs g++ >= 12, python3, Debian's absl and the CUDA headers.
#
#   core/kernels/cuda/emulation/run.sh      (from anywhere)
#   EMU_CHECKS=attention_check core/kernels/cuda/emulation/run.sh   (one check)
#   bazel test //core/kernels/cuda:emulation_test
set -euo pipefail
# Under `bazel test` (//core/kernels/cuda:emulation_test) the sources are in
# the runfiles tree, and $0 is a copy named after the target.
if [ -n "${TEST_SRCDIR:-}" ]; then
  root="$TEST_SRCDIR/$TEST_WORKSPACE"
else
  root="$(cd "$(dirname "$0")/../../../.." && pwd)"
fi
here="$root/core/kernels/cuda/emulation"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cuda="${CUDA_PATH:-/usr/local/cuda}"
python3 "$here/transform.py" "$root/core/kernels/cuda" "$work/core/kernels/cuda"
flags=(-std=c++20 -O1 -w -I"$work" -I"$root" -I"$cuda/include")
# The prelude and the absl headers that every file includes, parsed once: a
# precompiled header (g++ reads $work/emu.h.gch for -include $work/emu.h),
# which halves each g++ below.
printf '#include "%s"\n#include "absl/status/statusor.h"\n' "$here/prelude.h" > "$work/emu.h"
g++ "${flags[@]}" -x c++-header "$work/emu.h" -o "$work/emu.h.gch" &
pch=$!
g++ -std=c++20 -O1 -I"$root" -c "$root/core/base/errors.cc" -o "$work/errors.o"
wait "$pch"
flags+=(-include "$work/emu.h")
libs=(-labsl_status -labsl_statusor -labsl_strings -labsl_cord -labsl_str_format_internal -pthread)
kernels=(device_info layernorm matmul_kernels attention_flash_fwd attention_flash_fwd_wgmma attention_flash_bwd attention_flash_bwd_wgmma wgmma_probe attention_flash_block_fwd attention_flash_block_bwd attention_simple
         cross_entropy reduce optimizer dropout elementwise embedding attention_block moe rope)
checks=(${EMU_CHECKS:-kernels_check llama_layers_check attention_check attention_block_check moe_check wgmma_check})
# One g++ per kernel file and per check program, EMU_JOBS (default: the
# cores, at most 4) at a time; xargs gets each command's "src -o obj" as
# three lines.
jobs="${EMU_JOBS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}"
{
  for k in "${kernels[@]}"; do printf '%s\n-o\n%s\n' "$work/core/kernels/cuda/$k.cu" "$work/$k.o"; done
  for c in "${checks[@]}"; do printf '%s\n-o\n%s\n' "$here/$c.cc" "$work/$c.o"; done
} | xargs -d '\n' -n 3 -P "$jobs" g++ "${flags[@]}" -x c++ -c
objs=("${kernels[@]/#/$work/}")
objs=("${objs[@]/%/.o}")
# Every check runs; the script fails after them if any failed.
failed=()
for check in "${checks[@]}"; do
  g++ -o "$work/$check" "$work/$check.o" "${objs[@]}" "$work/errors.o" "${libs[@]}"
  echo "== $check"
  start=$SECONDS
  "$work/$check" || failed+=("$check")
  echo "($check ran $((SECONDS - start))s)"
done
echo "run.sh took ${SECONDS}s"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
