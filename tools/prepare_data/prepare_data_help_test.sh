#!/usr/bin/env bash
# `prepare_data --help` shows --input, --out and --tokenizer (it once said
# "No flags matched" and needed --helpfull).
set -uo pipefail

bin="$TEST_SRCDIR/weft/tools/prepare_data/prepare_data"
help=$("$bin" --help 2>&1)
# Abseil lists a flag as "--name (description)"; the usage line names some too.
for flag in --input --out --tokenizer --val_fraction; do
  grep -q -- "$flag (" <<< "$help" || { echo "FAIL: --help lacks $flag:"; echo "$help"; exit 1; }
done
echo "PASS"
