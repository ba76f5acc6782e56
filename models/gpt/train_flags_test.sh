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
# Values that used to be taken, abort or hang (issue 44), refused at once.
expect_error "--cpu_threads=-2" "--cpu_threads=-2" "0 \(OpenBLAS's default\) to 1024"
expect_error "--cpu_threads=100000000" "--cpu_threads=100000000"
expect_error "--beta1=1.5" "--beta1=1.5" "in \[0, 1\)"
expect_error "--timeout_s=nan" "--timeout_s=nan" "finite number of seconds"
mkdir -p "$tmp/a_dir"
if timeout 20 "$train" --config="$tmp/a_dir" > "$tmp/out" 2> "$tmp/err"; then
  echo "FAIL: a directory as --config ran"; exit 1
fi
grep -q "is a directory" "$tmp/err" || { echo "FAIL: --config=DIR:"; cat "$tmp/err"; exit 1; }
timeout 20 "$train" --config=/dev/zero > "$tmp/out" 2> "$tmp/err"
[ $? -ne 124 ] || { echo "FAIL: --config=/dev/zero hung"; exit 1; }
grep -q "not a regular file" "$tmp/err" || { echo "FAIL: --config=/dev/zero:"; cat "$tmp/err"; exit 1; }
timeout 20 "$train" --config="$config" --data=/dev/zero --steps=1 > "$tmp/out" 2> "$tmp/err"
[ $? -ne 124 ] || { echo "FAIL: --data=/dev/zero hung"; exit 1; }
grep -q "is not a regular file" "$tmp/err" || { echo "FAIL: --data=/dev/zero:"; cat "$tmp/err"; exit 1; }
echo "PASS"
