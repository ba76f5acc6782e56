#!/bin/sh
# Runs //tools/bench:cpu_step (weft) and cpu_step_torch.py (PyTorch eager)
# alternately, shape by shape, ROUNDS times, and prints the median ms of each
# and the ratio torch/weft (> 1: weft is faster). Machine noise hits both.
#   bazel build -c opt //tools/bench:cpu_step   (or WEFT_BIN=path/to/cpu_step)
#   tools/bench/cpu_step_compare.sh [ROUNDS=3] [THREADS=2] [extra flags: --full, --dropout=P]
set -eu
ROUNDS=${1:-3}
THREADS=${2:-2}
shift 2 2>/dev/null || shift $#
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WEFT="${WEFT_BIN:-$ROOT/bazel-out/k8-opt/bin/tools/bench/cpu_step}"
TORCH="$ROOT/tools/bench/cpu_step_torch.py"
DROPOUT=$(printf '%s\n' "$@" | sed -n 's/^--dropout=//p' | tail -1)
DROPOUT=${DROPOUT:-0}
SHAPES=$(python3 -c "
import sys; sys.argv=['x']+sys.argv[1:]
exec(open('$TORCH').read().split('VOCAB = 65')[0])
full='--full' in sys.argv[1:]
print(' '.join(s[0] for s in SHAPES if full or not s[5]))" "$@")
OUT=$(mktemp)
for r in $(seq "$ROUNDS"); do
  for s in $SHAPES; do
    "$WEFT" --only="$s" --threads="$THREADS" --dropout="$DROPOUT" | grep '^{' >>"$OUT"
    python3 "$TORCH" --only "$s" --threads "$THREADS" --dropout "$DROPOUT" | grep '^{' >>"$OUT"
  done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    rows.setdefault(j["shape"], {}).setdefault(j["impl"], []).append(j["step_ms_median"])
print(f"{'shape':<26s} {'weft ms':>9s} {'torch ms':>9s} {'torch/weft':>10s}")
for shape, r in rows.items():
    w, t = statistics.median(r["weft"]), statistics.median(r["torch-eager"])
    print(f"{shape:<26s} {w:9.2f} {t:9.2f} {t / w:10.2f}")
PY
rm -f "$OUT"
