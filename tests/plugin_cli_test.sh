#!/usr/bin/env bash
# --plugin from the command line: --help lists the plugin's strategy and its
# options (it listed only the built-in ones), and a shared object that
# registers no strategy is refused where it is loaded (it loaded silently,
# and the job then failed on "unknown strategy ... load it with --plugin").
set -uo pipefail
train="$TEST_SRCDIR/weft/models/gpt/train"
plugin="$TEST_SRCDIR/weft/strategies/freeze/libweft_freeze.so"
config="$TEST_SRCDIR/weft/models/gpt/configs/tiny.textproto"
fail() { echo "FAIL: $*"; exit 1; }

"$train" --config="$config" --plugin="$plugin" --help > "$TEST_TMPDIR/help.txt" 2>&1 ||
  { cat "$TEST_TMPDIR/help.txt"; fail "--help with --plugin exited $?"; }
grep -q "^  freeze" "$TEST_TMPDIR/help.txt" || { cat "$TEST_TMPDIR/help.txt"; fail "no freeze in --help"; }
grep -q "freeze (string" "$TEST_TMPDIR/help.txt" ||
  { grep -A3 "^  freeze" "$TEST_TMPDIR/help.txt"; fail "freeze's option is not listed"; }

# libz registers nothing: refused at load, in --help and in a run.
for extra in --help "--steps=1"; do
  "$train" --config="$config" --plugin=libz.so.1 --strategy=freeze $extra \
      > "$TEST_TMPDIR/out.txt" 2>&1 && fail "libz.so.1 as a plugin was accepted ($extra)"
  grep -q "strategy plugin 'libz.so.1' registered no strategy" "$TEST_TMPDIR/out.txt" ||
    { cat "$TEST_TMPDIR/out.txt"; fail "no 'registered no strategy' error ($extra)"; }
done
echo PASS
