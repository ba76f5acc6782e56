#!/usr/bin/env bash
# //models/gpt:sample refuses bad sampling flags before it reads any
# weights (they once ran: a negative temperature acted greedy, NaN drew
# degenerate text), and its --help lists no empty "Strategies" section.
set -uo pipefail

sample="$TEST_SRCDIR/weft/models/gpt/sample"
tmp="$TEST_TMPDIR"

for bad in "--temperature=-1" "--temperature=nan" "--temperature=inf" "--tokens=-5" "--top_k=-3" "--seq_len=-3"; do
  if "$sample" --checkpoint=/nonexistent "$bad" > /dev/null 2> "$tmp/err"; then
    echo "FAIL: sample $bad succeeded"; exit 1
  fi
  flag=${bad%%=*}
  grep -q -- "$flag=" "$tmp/err" || { echo "FAIL: sample $bad: no '$flag=' in:"; cat "$tmp/err"; exit 1; }
done
# Good values pass the flag checks and fail on the missing checkpoint.
"$sample" --checkpoint=/nonexistent --temperature=0 --tokens=0 --top_k=0 2> "$tmp/err" && exit 1
grep -q "no checkpoint at /nonexistent" "$tmp/err" || { echo "FAIL:"; cat "$tmp/err"; exit 1; }

"$sample" --help > "$tmp/help" 2>&1
grep -q -- "--temperature" "$tmp/help" || { echo "FAIL: --help lacks the flags"; cat "$tmp/help"; exit 1; }
if grep -q "Strategies" "$tmp/help"; then echo "FAIL: --help shows an empty Strategies section"; exit 1; fi
echo "PASS"
