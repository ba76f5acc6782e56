#!/bin/bash
# The bundle's run script, on a binary that needs a library the bundle does
# not carry (as a GPU binary needs libnccl): it names the missing library and
# exits 127 before starting; once the library sits in a pip-style
# nvidia/<pkg>/lib folder of python3's path, it finds it, prints where it
# resolved, and runs the binary.
set -euo pipefail
run_sh="$1"; app="$2"; dep="$3"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/bundle.XXXXXX")"
mkdir -p "$work/b/bin" "$work/b/lib"
cp "$run_sh" "$work/b/run"
cp "$app" "$work/b/bin/app"
chmod +x "$work/b/run" "$work/b/bin/app"
export CUDA_HOME="$work/no-cuda"   # no toolkit here either
unset LD_LIBRARY_PATH

set +e
out="$("$work/b/run" app 2>&1)"; rc=$?
set -e
echo "$out"
[ "$rc" -eq 127 ] || { echo "FAIL: expected exit 127 for a missing library, got $rc"; exit 1; }
echo "$out" | grep -q "run: MISSING libweft_fake_dep.so" || { echo "FAIL: missing library not named"; exit 1; }

if ! command -v python3 >/dev/null; then
  echo "no python3: the pip-wheel lookup is not testable here"; exit 0
fi
site="$work/site"
mkdir -p "$site/nvidia/fake_dep/lib"
touch "$site/nvidia/__init__.py"
cp "$dep" "$site/nvidia/fake_dep/lib/libweft_fake_dep.so"
out="$(PYTHONPATH="$site" "$work/b/run" app 2>&1)"
echo "$out"
echo "$out" | grep -q "MISSING" && { echo "FAIL: wheel library not found"; exit 1; }
echo "PASS"
