#!/bin/sh
# The `run` script of a bundle (bundle.sh copies it to DIR/run):
#
#   ./run <name> [args...]     runs bin/<name>
#   ./run --check <name>       only prints what its libraries resolve to
#
# First, on stderr, it prints what the CUDA libraries the binary loads
# (libnccl, libcublas/libcublasLt, libcudart, libcuda) resolve to under the
# LD_LIBRARY_PATH it sets, as ldd sees them (WEFT_RUN_QUIET=1 hides these):
#
#   run: libnccl.so.2 => /usr/local/cuda/lib64/libnccl.so.2
#
# A library that resolves nowhere is printed as "run: MISSING <lib>" with the
# folders searched and a hint, and the binary is not started (exit 127).
#
# Library folders, first match wins: the bundle's lib/, the CUDA toolkit
# ($CUDA_HOME, default /usr/local/cuda: lib64, lib, targets/*/lib), the lib/
# folders of pip's nvidia-* wheels (site-packages/nvidia/*/lib, asked of
# python3 when there is one), the caller's LD_LIBRARY_PATH, then the system.

here="$(cd "$(dirname "$0")" && pwd)"
check_only=0
if [ "${1:-}" = "--check" ]; then
  check_only=1
  shift
fi
name="${1:-}"
[ $# -gt 0 ] && shift
if [ -z "$name" ] || [ ! -x "$here/bin/$name" ]; then
  echo "run: no binary '$name' in $here/bin; have: $(ls "$here/bin" | grep -v runfiles | tr '\n' ' ')" >&2
  exit 2
fi
bin="$here/bin/$name"

libpath="$here/lib"
add_dir() {
  [ -d "$1" ] || return 0
  case ":$libpath:" in
    *":$1:"*) ;;
    *) libpath="$libpath:$1" ;;
  esac
}

cuda_root="${CUDA_HOME:-/usr/local/cuda}"
for d in "$cuda_root/lib64" "$cuda_root/lib" "$cuda_root"/targets/*/lib; do
  add_dir "$d"
done

# pip's wheels put each library in nvidia/<package>/lib (nvidia/nccl/lib,
# nvidia/cublas/lib, nvidia/cuda_runtime/lib; CUDA 13 wheels nvidia/cu13/lib).
pip_dirs=""
if command -v python3 >/dev/null 2>&1; then
  pip_dirs="$(python3 -c '
import glob, os
import nvidia
for p in nvidia.__path__:
    for d in sorted(glob.glob(os.path.join(p, "*", "lib"))):
        print(d)
' 2>/dev/null)" || pip_dirs=""
fi
while read -r d; do
  [ -n "$d" ] && add_dir "$d"
done <<DIRS
$pip_dirs
DIRS

export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if ! command -v ldd >/dev/null 2>&1; then
  echo "run: no ldd here, so the libraries $name loads are not checked" >&2
else
  # "libx.so.1 => /path (0x...)" or "libx.so.1 => not found"
  resolved="$(ldd "$bin" 2>/dev/null | awk '$2 == "=>" { print $1, ($3 == "not" ? "MISSING" : $3) }')"
  missing=""
  shown=0
  while read -r lib path; do
    [ -n "$lib" ] || continue
    if [ "$path" = "MISSING" ]; then
      echo "run: MISSING $lib" >&2
      missing="$missing $lib"
      continue
    fi
    case "$lib" in
      libnccl*|libcublas*|libcudart*|libcuda.so*)
        [ "${WEFT_RUN_QUIET:-0}" = 1 ] || echo "run: $lib => $path" >&2
        shown=1
        ;;
    esac
  done <<LIBS
$resolved
LIBS
  if [ -n "$missing" ]; then
    echo "run: $name cannot start: no$missing in LD_LIBRARY_PATH=$LD_LIBRARY_PATH or the system's library cache" >&2
    echo "run: hint: install CUDA and NCCL under /usr/local/cuda (or set CUDA_HOME to the toolkit)," \
         "or pip install the nvidia-* wheels for python3 (CUDA 13: nvidia-nccl-cu13 nvidia-cublas" \
         "nvidia-cuda-runtime), or rebundle with --include_cuda_libs" >&2
    exit 127
  fi
  if [ "$shown" -eq 0 ] && [ "${WEFT_RUN_QUIET:-0}" != 1 ]; then
    echo "run: $name loads no libnccl, libcublas, libcudart or libcuda" >&2
  fi
fi
[ "$check_only" -eq 1 ] && exit 0

if [ -d "$bin.runfiles" ]; then
  export RUNFILES_DIR="$bin.runfiles"
  export TEST_SRCDIR="$RUNFILES_DIR"
fi
export TEST_TMPDIR="${TEST_TMPDIR:-$(mktemp -d)}"
exec "$bin" "$@"
