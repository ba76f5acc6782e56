#!/usr/bin/env bash
# //models/gpt:train refuses flag combinations that would silently do
# something else, before it reads any data.
set -uo pipefail

train="$TEST_SRCDIR/weft/models/gpt/train"
config="$TEST_SRCDIR/weft/models/gpt/configs/tiny.textproto"
tmp="$TEST_TMPDIR"

# Fails with a message matching every later argument (grep -E patterns).
expect_error() {
  local args=$1; shift
  if "$train" --config="$config" --data=/nonexistent $args > "$tmp/out" 2> "$tmp/err"; then
    echo "FAIL: train $args succeeded"; exit 1
  fi
  for want in "$@"; do
    grep -qE -- "$want" "$tmp/err" || { echo "FAIL: train $args: no '$want' in:"; cat "$tmp/err"; exit 1; }
  done
}

# --memory_budget feeds only auto's planner.
expect_error "--memory_budget=100MiB" "--memory_budget=100MiB without --strategy=auto"
expect_error "--strategy=fsdp --memory_budget=100MiB" "without --strategy=auto"
# auto plans every strategy itself: with others it is a conflict, named as one.
expect_error "--strategy=auto,fsdp --memory_budget=100MiB" "auto combined with other strategies"
if grep -q "this program does not run" "$tmp/err"; then
  echo "FAIL: says the planner is not in //models/gpt:train:"; cat "$tmp/err"; exit 1
fi
# auto sets the mesh axes itself: one given is refused (it was replaced
# by the pick without a word), before any data is read.
expect_error "--strategy=auto --memory_budget=100MiB --tp=2" "--strategy=auto with --tp=2"
echo "PASS"
