#!/bin/sh
# Runs a bundled binary: ./run <name> [args...]  (copied into every bundle)
#
# Libraries come from, in order: the bundle's lib/, $CUDA_HOME/lib64 (default
# /usr/local/cuda), the lib/ folders of pip's nvidia-* wheels (nvidia/nccl/lib,
# nvidia/cublas/lib, nvidia/cuda_runtime/lib, ... of the python3 on PATH), and
# the caller's LD_LIBRARY_PATH. Before starting, it prints where the CUDA
# libraries resolve (WEFT_RUN_QUIET=1 hides that) and stops, naming them,
# when any library the binary needs is not found.
here="$(cd "$(dirname "$0")" && pwd)"
name="${1:-}"
[ $# -gt 0 ] && shift
if [ -z "$name" ] || [ ! -x "$here/bin/$name" ]; then
  echo "run: no binary '$name' in $here/bin; have: $(ls "$here/bin" | grep -v runfiles | tr '\n' ' ')" >&2
  exit 2
fi

wheels=""
if command -v python3 >/dev/null 2>&1; then
  wheels="$(python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
except Exception:
    raise SystemExit(0)
dirs = []
for root in list(getattr(nvidia, "__path__", [])):
    dirs += sorted(d for d in glob.glob(os.path.join(root, "*", "lib")) if os.path.isdir(d))
print(":".join(dirs))
PY
)"
fi
path="$here/lib:${CUDA_HOME:-/usr/local/cuda}/lib64"
[ -n "$wheels" ] && path="$path:$wheels"
export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if command -v ldd >/dev/null 2>&1; then
  resolved="$(ldd "$here/bin/$name" 2>/dev/null)"
  if [ "${WEFT_RUN_QUIET:-0}" != 1 ]; then
    echo "$resolved" | awk '/libnccl|libcublas|libcudart|libcuda\.so/ {print "run: " $1 " => " $3}' >&2
  fi
  missing="$(echo "$resolved" | awk '/not found/ {print $1}' | tr '\n' ' ')"
  if [ -n "$missing" ]; then
    echo "run: MISSING $missing(needed by $name); searched LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >&2
    echo "run: install the CUDA toolkit/NCCL there, set CUDA_HOME, pip install the nvidia-* wheels, or bundle with --include_cuda_libs" >&2
    exit 127
  fi
fi

if [ -d "$here/bin/$name.runfiles" ]; then
  export RUNFILES_DIR="$here/bin/$name.runfiles"
  export TEST_SRCDIR="$RUNFILES_DIR"
fi
export TEST_TMPDIR="${TEST_TMPDIR:-$(mktemp -d)}"
exec "$here/bin/$name" "$@"
