#!/usr/bin/env bash
# The bundle's run script (run.sh) against fake CUDA installs: tiny
# libraries with the real sonames in a toolkit layout, in pip's nvidia-*
# wheel layouts (CUDA 12 and 13) and in the caller's LD_LIBRARY_PATH. run
# must print what libnccl, libcublasLt and libcudart resolve to before the
# binary's own output, start the binary with its arguments, and refuse to
# start it, saying MISSING and how to fix it, when a library resolves nowhere.
set -euo pipefail

src="${TEST_SRCDIR}/weft/tools/bundle"
tmp="$(cd "${TEST_TMPDIR}" && pwd -P)"
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

expect_line() {  # expect_line <output> <line number> <exact text>
  local got
  got="$(sed -n "${2}p" <<<"$1")"
  [ "$got" = "$3" ] || fail "line $2: want '$3', got '$got'"$'\n'"--- output:"$'\n'"$1"
}

expect_contains() {
  grep -qF -- "$2" <<<"$1" || fail "want '$2' in:"$'\n'"$1"
}

expect_not_contains() {
  if grep -qF -- "$2" <<<"$1"; then fail "did not want '$2' in:"$'\n'"$1"; fi
}

# A bundle: run, bin/<apps>, an empty lib/ (as when CUDA is not bundled).
bundle="$tmp/bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$src/run.sh" "$bundle/run"
cp -L "$src/fake_cuda_app" "$src/fake_cuda_app_missing" "$bundle/bin/"
chmod +x "$bundle/run" "$bundle/bin/"*

put() {  # put <dir> <lib...>: copies fake libraries into a folder
  local dir="$1"
  shift
  mkdir -p "$dir"
  for lib in "$@"; do cp -L "$src/$lib" "$dir/$lib"; done
}

# A python3 that has no nvidia package, so pip's real wheels on this host
# (if any) stay out of the cases that do not test them.
nopip="$tmp/nopip"
mkdir -p "$nopip"
printf '#!/bin/sh\nexit 1\n' >"$nopip/python3"
chmod +x "$nopip/python3"

run() {  # run <env assignments...> -- <run args...>; sets out and rc
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  rc=0
  out="$(env -u LD_LIBRARY_PATH -u CUDA_HOME -u PYTHONPATH "${envs[@]}" "$bundle/run" "$@" 2>&1)" || rc=$?
}

# 1. CUDA from a toolkit folder: lib64, lib and targets/<arch>/lib.
cuda="$tmp/cuda"
put "$cuda/lib64" libnccl.so.2
put "$cuda/lib" libcublasLt.so.13
put "$cuda/targets/x86_64-linux/lib" libcudart.so.13
run CUDA_HOME="$cuda" PATH="$nopip:$PATH" -- fake_cuda_app a "b c"
[ "$rc" -eq 3 ] || fail "toolkit: want the app's exit code 3, got $rc:"$'\n'"$out"
# ldd lists them in the binary's DT_NEEDED order, which is its link order.
expect_contains "$(sed -n 1,3p <<<"$out")" "run: libnccl.so.2 => $cuda/lib64/libnccl.so.2"
expect_contains "$(sed -n 1,3p <<<"$out")" "run: libcublasLt.so.13 => $cuda/lib/libcublasLt.so.13"
expect_contains "$(sed -n 1,3p <<<"$out")" \
  "run: libcudart.so.13 => $cuda/targets/x86_64-linux/lib/libcudart.so.13"
expect_line "$out" 4 "fake_cuda_app ran: a b c"

# 2. CUDA from pip's wheels, found through python3 (skipped without one).
if command -v python3 >/dev/null 2>&1 && python3 -c 'import glob, os' 2>/dev/null; then
  # CUDA 12 wheels: one folder per package.
  site12="$tmp/site12"
  put "$site12/nvidia/nccl/lib" libnccl.so.2
  put "$site12/nvidia/cublas/lib" libcublasLt.so.13
  put "$site12/nvidia/cuda_runtime/lib" libcudart.so.13
  run CUDA_HOME="$tmp/no_cuda" PYTHONPATH="$site12" -- fake_cuda_app
  [ "$rc" -eq 3 ] || fail "pip (cu12 layout): want exit code 3, got $rc:"$'\n'"$out"
  expect_contains "$out" "run: libnccl.so.2 => $site12/nvidia/nccl/lib/libnccl.so.2"
  expect_contains "$out" "run: libcublasLt.so.13 => $site12/nvidia/cublas/lib/libcublasLt.so.13"
  expect_contains "$out" "run: libcudart.so.13 => $site12/nvidia/cuda_runtime/lib/libcudart.so.13"
  expect_line "$out" 4 "fake_cuda_app ran:"

  # CUDA 13 wheels: the toolkit's libraries share nvidia/cu13/lib.
  site13="$tmp/site13"
  put "$site13/nvidia/nccl/lib" libnccl.so.2
  put "$site13/nvidia/cu13/lib" libcublasLt.so.13 libcudart.so.13
  run CUDA_HOME="$tmp/no_cuda" PYTHONPATH="$site13" -- fake_cuda_app
  [ "$rc" -eq 3 ] || fail "pip (cu13 layout): want exit code 3, got $rc:"$'\n'"$out"
  expect_contains "$out" "run: libnccl.so.2 => $site13/nvidia/nccl/lib/libnccl.so.2"
  expect_contains "$out" "run: libcublasLt.so.13 => $site13/nvidia/cu13/lib/libcublasLt.so.13"
  expect_contains "$out" "run: libcudart.so.13 => $site13/nvidia/cu13/lib/libcudart.so.13"
else
  echo "SKIP: no python3 here, so pip's layout is not tested"
fi

# 3. The caller's LD_LIBRARY_PATH still counts (after the bundle's folders).
mine="$tmp/mine"
put "$mine" libnccl.so.2 libcublasLt.so.13 libcudart.so.13
run CUDA_HOME="$tmp/no_cuda" PATH="$nopip:$PATH" LD_LIBRARY_PATH="$mine" -- fake_cuda_app
[ "$rc" -eq 3 ] || fail "LD_LIBRARY_PATH: want exit code 3, got $rc:"$'\n'"$out"
expect_contains "$out" "run: libnccl.so.2 => $mine/libnccl.so.2"
expect_contains "$out" "run: libcudart.so.13 => $mine/libcudart.so.13"

# 4. A library found nowhere: MISSING, a hint, exit 127, and no start.
run CUDA_HOME="$cuda" PATH="$nopip:$PATH" -- fake_cuda_app_missing
[ "$rc" -eq 127 ] || fail "missing: want exit code 127, got $rc:"$'\n'"$out"
expect_contains "$out" "run: MISSING libcudart.so.999"
expect_contains "$out" "run: libnccl.so.2 => $cuda/lib64/libnccl.so.2"
expect_contains "$out" "fake_cuda_app_missing cannot start: no libcudart.so.999 in LD_LIBRARY_PATH=$bundle/lib:$cuda/lib64"
expect_contains "$out" "run: hint: install CUDA and NCCL under /usr/local/cuda (or set CUDA_HOME"
expect_not_contains "$out" "fake_cuda_app ran"

# 5. --check prints and exits without starting the binary.
run CUDA_HOME="$cuda" PATH="$nopip:$PATH" -- --check fake_cuda_app
[ "$rc" -eq 0 ] || fail "--check: want exit code 0, got $rc:"$'\n'"$out"
expect_contains "$out" "run: libnccl.so.2 => $cuda/lib64/libnccl.so.2"
expect_not_contains "$out" "fake_cuda_app ran"

# 6. WEFT_RUN_QUIET=1 hides the resolved libraries, not the binary's output.
run CUDA_HOME="$cuda" PATH="$nopip:$PATH" WEFT_RUN_QUIET=1 -- fake_cuda_app q
[ "$rc" -eq 3 ] || fail "quiet: want exit code 3, got $rc:"$'\n'"$out"
expect_line "$out" 1 "fake_cuda_app ran: q"
expect_not_contains "$out" "run: lib"

# 7. An unknown binary lists the ones there are.
run PATH="$nopip:$PATH" -- no_such_binary
[ "$rc" -eq 2 ] || fail "unknown binary: want exit code 2, got $rc"
expect_contains "$out" "run: no binary 'no_such_binary' in $bundle/bin; have: fake_cuda_app fake_cuda_app_missing"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS"
