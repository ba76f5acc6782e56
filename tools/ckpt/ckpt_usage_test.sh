#!/usr/bin/env bash
# //tools:ckpt's command-line mistakes, caught before any checkpoint is read:
# an unknown command is named with the valid ones, a missing checkpoint's
# hint speaks of this tool (not the trainer's --resume), and --dtype takes
# either case.
set -uo pipefail

ckpt="$TEST_SRCDIR/weft/tools/ckpt/ckpt"
tmp="$TEST_TMPDIR"

# Fails with a message matching every later argument (grep -E patterns):
# exit status 2 for a command line that does not parse, 1 for a missing
# checkpoint (the command itself failed).
expect_error() {
  local args=$1; shift
  $ckpt $args > "$tmp/out" 2> "$tmp/err"
  local code=$?
  local want_code=2
  grep -q "no checkpoint at" "$tmp/err" && want_code=1
  [[ $code == "$want_code" ]] || { echo "FAIL: ckpt $args exited $code, expected $want_code"; cat "$tmp/err"; exit 1; }
  for want in "$@"; do
    grep -qE -- "$want" "$tmp/err" || { echo "FAIL: ckpt $args: no '$want' in:"; cat "$tmp/err"; exit 1; }
  done
  if grep -q -- "--resume" "$tmp/err"; then echo "FAIL: ckpt $args mentions --resume:"; cat "$tmp/err"; exit 1; fi
}

expect_error "bogus $tmp" "unknown command 'bogus'" "inspect, verify, consolidate or export"
expect_error "verify /nonexistent" "no checkpoint at /nonexistent" "--checkpoint_every"
expect_error "export /nonexistent" "export without --out"
expect_error "export /nonexistent --out=x --format=onnx" "--format=onnx; expected safetensors, llmc, hf or tokenizer"
expect_error "export /nonexistent --out=x --dtype=fp8" "--dtype=fp8; expected f32, bf16 or f16"
# Flags a command does not read are refused (consolidate --dtype wrote f32).
expect_error "consolidate /nonexistent --out=x --dtype=bf16" "--dtype with consolidate"
expect_error "inspect /nonexistent --dtype=bf16" "--dtype with inspect; expected inspect's flags: none"
expect_error "verify /nonexistent --out=x" "--out with verify"
expect_error "export /nonexistent --out=x --format=llmc --dtype=f16" "llm.c's files hold no f16"
# Lowercase (the trainer's spelling) and uppercase pass the flag checks and
# fail only on the missing checkpoint.
for dtype in bf16 BF16 f16 F32; do
  expect_error "export /nonexistent --out=x --dtype=$dtype" "no checkpoint at /nonexistent"
done
# --help lists the commands and the usage, on stdout, and succeeds.
$ckpt --help > "$tmp/help" || { echo "FAIL: ckpt --help failed"; exit 1; }
grep -q "usage: ckpt inspect|verify CHECKPOINT" "$tmp/help" && grep -q "^  export " "$tmp/help" ||
  { echo "FAIL: ckpt --help:"; cat "$tmp/help"; exit 1; }
echo "PASS"
