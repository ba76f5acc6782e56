#!/usr/bin/env bash
# The benchmarks' --help lists their own flags, and values they would loop
# on, misreport or destroy data with are refused (exit 2) before any work.
set -uo pipefail
b="$TEST_SRCDIR/weft/tools/bench"
tmp="$TEST_TMPDIR"
fail() { echo "FAIL: $*"; exit 1; }

for bin in comm dataloader ddp_overlap ep_overlap pp_bubble checkpoint; do
  "$b/$bin" --help > "$tmp/help.txt" 2>&1
  grep -q "Flags from tools/bench/${bin}_benchmark.cc" "$tmp/help.txt" ||
    { cat "$tmp/help.txt"; fail "$bin --help lists no flags of its own"; }
done

refused() {  # refused "expected text" binary flags...
  local want="$1"; shift
  timeout 20 "$@" > "$tmp/out.txt" 2>&1
  local rc=$?
  [ "$rc" -eq 2 ] || { cat "$tmp/out.txt"; fail "$* exited $rc, expected 2"; }
  grep -q -- "$want" "$tmp/out.txt" || { cat "$tmp/out.txt"; fail "$*: no '$want'"; }
}
refused "expected at least 2" "$b/comm" --step_factor=1      # looped forever
refused "min_bytes=0" "$b/comm" --min_bytes=0                # looped forever
refused "at least --min_bytes=10" "$b/comm" --min_bytes=10 --max_bytes=5
refused "iters=0" "$b/comm" --iters=0                        # printed inf
refused "world=-3" "$b/ddp_overlap" --world=-3               # std::length_error
refused "world=1" "$b/ddp_overlap" --world=1                 # printed -332%
refused "repeats=0" "$b/pp_bubble" --repeats=0
refused "pp=0" "$b/pp_bubble" --pp=0
refused "seconds=0" "$b/dataloader" --seconds=0
refused "multiple of --world=2" "$b/ep_overlap" --experts=3
refused "one of gpt_" "$b/cpu_step" --only=bogus             # printed nothing, exit 0
refused "threads=-1" "$b/cpu_step" --threads=-1

# The checkpoint benchmark removes its directory at the end: one holding
# anything else is refused, never cleared (it used to delete it all).
mkdir -p "$tmp/mine/sub" && echo keep > "$tmp/mine/sub/data.bin"
refused "not an empty directory" "$b/checkpoint" --dir="$tmp/mine" --n_layer=1 --d_model=64 --vocab=128
[ "$(cat "$tmp/mine/sub/data.bin")" = keep ] || fail "the checkpoint benchmark touched --dir"
echo "PASS"
