#!/usr/bin/env bash
# Builds Bazel targets and packs them into a relocatable folder that runs on a
# machine without Bazel (a cluster compute node, a lent GPU box):
#
#   bazel run //tools:bundle -- --out=DIR [--mode=opt] [--include_cuda_libs] \
#       [--no_strip] [--bazel_arg=FLAG ...] //target [//target ...]
#
# DIR/bin/<name>            the binaries (stripped unless --no_strip)
# DIR/bin/<name>.runfiles/  their runfiles trees, when they have any
# DIR/lib/                  every shared library they load that is not part of
#                           the OS (libc, libstdc++, ...) or, by default, of the
#                           CUDA driver/toolkit/NCCL, which GPU machines provide
# DIR/run <name> [args]     runs a binary with LD_LIBRARY_PATH, RUNFILES_DIR and
#                           TEST_SRCDIR/TEST_TMPDIR set, so gtest binaries work too;
#                           it first prints where the CUDA libraries resolve (run.sh)
#
# Binaries are linked with --dynamic_mode=off so Bazel's own libraries are
# inside them; only system packages' .so files (absl, protobuf, gloo,
# openblas, ...) travel in lib/.
set -euo pipefail

out=""
mode="opt"
strip_bins=1
include_cuda=0
bazel_args=()
targets=()
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#--out=}" ;;
    --mode=*) mode="${arg#--mode=}" ;;
    --no_strip) strip_bins=0 ;;
    --include_cuda_libs) include_cuda=1 ;;
    --bazel_arg=*) bazel_args+=("${arg#--bazel_arg=}") ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
    //*|:*|@*) targets+=("$arg") ;;
    *) echo "bundle: unknown argument '$arg'; expected --out=DIR and //targets (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$out" ] || [ ${#targets[@]} -eq 0 ]; then
  echo "bundle: need --out=DIR and at least one //target (see --help)" >&2
  exit 2
fi

ws="${BUILD_WORKSPACE_DIRECTORY:-$PWD}"
cd "$ws"
case "$out" in /*) ;; *) out="$ws/$out" ;; esac

flags=(-c "$mode" --dynamic_mode=off "${bazel_args[@]}")
bazel build "${flags[@]}" "${targets[@]}"
execroot="$(bazel info "${flags[@]}" execution_root 2>/dev/null)"

mkdir -p "$out/bin" "$out/lib"

# System and driver/toolkit libraries are provided by the target machine.
is_provided() {
  local base="$1"
  case "$base" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libstdc++*|libgcc_s*|libpthread*|libdl.so*|librt.so*) return 0 ;;
  esac
  if [ "$include_cuda" -eq 0 ]; then
    case "$base" in
      libcuda.so*|libcudart*|libcublas*|libnccl*|libnvidia*|libnvrtc*|libcupti*) return 0 ;;
    esac
  fi
  return 1
}

for t in "${targets[@]}"; do
  rel="$(bazel cquery "${flags[@]}" "$t" --output=starlark \
          --starlark:expr='target.files_to_run.executable.path if target.files_to_run.executable else ""' 2>/dev/null)"
  if [ -z "$rel" ]; then
    echo "bundle: $t is not an executable target (cc_binary or cc_test)" >&2
    exit 2
  fi
  bin="$execroot/$rel"
  name="$(basename "$bin")"
  cp -fL "$bin" "$out/bin/$name"
  chmod u+w "$out/bin/$name"
  [ "$strip_bins" -eq 1 ] && strip --strip-unneeded "$out/bin/$name" 2>/dev/null || true
  if [ -d "$bin.runfiles" ]; then
    rm -rf "$out/bin/$name.runfiles"
    mkdir -p "$out/bin/$name.runfiles"
    # Shared libraries travel in lib/ (or come with the target machine), so
    # the runfiles' solib links and the CUDA toolkit are left out.
    tar -C "$bin.runfiles" -chf - --exclude='_solib_*' --exclude='local_cuda' . |
      tar -C "$out/bin/$name.runfiles" -xf -
    chmod -R u+w "$out/bin/$name.runfiles"
    # The runfiles tree holds the binary again: link it to bin/ instead of a
    # second (unstripped) copy, which doubled the bundle.
    find "$out/bin/$name.runfiles" -type f -name "$name" | while read -r copy; do
      rm -f "$copy"
      ln -s "$(realpath --relative-to="$(dirname "$copy")" "$out/bin/$name")" "$copy"
    done
  fi
  # ldd resolves what the binary really loads here; copy what the target lacks.
  while read -r lib path; do
    [ -n "$path" ] && [ -f "$path" ] || continue
    is_provided "$lib" && continue
    cp -fL "$path" "$out/lib/$lib"
  done < <(ldd "$bin" | awk '/=>/ {print $1, $3}')
  echo "bundle: $t -> $out/bin/$name"
done

cp -f "$(dirname "$(readlink -f "$0")")/run.sh" "$out/run"
chmod +x "$out/run"
du -sh "$out" | awk '{print "bundle: " $1 " in " $2}'
