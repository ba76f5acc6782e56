#!/usr/bin/env bash
# Installs the Debian packages weft needs to build, test and train, and
# nothing else. Idempotent: packages already present are left alone, and the
# package index is refreshed only when something must be installed.
# The CUDA toolkit is not a Debian package: weft uses /usr/local/cuda when it
# exists (or $CUDA_PATH) and builds and tests its CPU parts when it does not.
set -euo pipefail

PACKAGES=(
  # Build: Bazel 4.2.3 and the rule repositories it needs offline.
  bazel-bootstrap bazel-rules-java bazel-rules-proto pkg-config g++
  # Libraries.
  libabsl-dev libgtest-dev libgmock-dev libprotobuf-dev protobuf-compiler
  libgloo-dev libbenchmark-dev libopenblas-dev zlib1g-dev
  # Data: the default text corpus and Fashion-MNIST.
  fortunes dataset-fashion-mnist
  # The launchers the tests run for real: Open MPI's mpirun, a one-node
  # Slurm (with munge), and network namespaces for the multi-host test.
  openmpi-bin slurm-wlm munge iproute2
  # The run report's browser test (//tools/report:report_browser_test).
  chromium
  # The independent reference //tests:torch_reference_test trains against.
  python3-torch
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
