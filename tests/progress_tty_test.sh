#!/usr/bin/env bash
# The training binary's console on a terminal and off it: on a terminal
# (a pty from util-linux `script`) rank 0 redraws one progress bar and prints
# eval lines above it instead of a line per step; piped, or with --quiet on a
# terminal, it prints plain lines only.
set -euo pipefail

train="$TEST_SRCDIR/weft/models/gpt/train"
config="$TEST_SRCDIR/weft/models/gpt/configs/tiny.textproto"
tmp="$TEST_TMPDIR"
fail() { echo "FAIL: $*"; exit 1; }
command -v script > /dev/null || fail "util-linux 'script' is needed to give the run a terminal"

for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog."; done > "$tmp/c.txt"
args="--config=$config --data=$tmp/c.txt --steps=12 --log_every=1 --eval_every=5 \
--eval_batches=1 --num_workers=1 --metrics_out=$tmp/m.jsonl"

script -qec "$train $args" /dev/null > "$tmp/tty.txt" 2>&1
cr=$'\r'
esc=$'\033'
grep -qF "${cr}[####################] 12/12 100% | eta 0s | loss " "$tmp/tty.txt" ||
  fail "no final bar on the terminal: $(cat -v "$tmp/tty.txt")"
grep -qF "${cr}${esc}[Kstep 5 | val_loss " "$tmp/tty.txt" ||
  fail "the eval line does not clear the bar: $(cat -v "$tmp/tty.txt")"
if grep -q "step 3 | loss" "$tmp/tty.txt"; then fail "per-step lines under the bar"; fi
# The file still has every step.
[ "$(grep -c '"loss"' "$tmp/m.jsonl")" -eq 12 ] || fail "metrics file lost steps"

"$train" $args > "$tmp/pipe.txt" 2>&1
if grep -q "$cr" "$tmp/pipe.txt"; then fail "carriage returns in a pipe"; fi
grep -q "^progress \[" "$tmp/pipe.txt" || fail "no progress lines in a pipe"
grep -q "^step 3 | loss" "$tmp/pipe.txt" || fail "no metric lines in a pipe"

script -qec "$train $args --quiet" /dev/null > "$tmp/quiet.txt" 2>&1
if grep -qF "${cr}[" "$tmp/quiet.txt"; then fail "a bar despite --quiet"; fi
grep -q "^progress \[.* 12/12 100%" "$tmp/quiet.txt" || fail "no plain progress with --quiet"
if grep -q "step 3 | loss" "$tmp/quiet.txt"; then fail "metric lines despite --quiet"; fi
echo "PASS"
