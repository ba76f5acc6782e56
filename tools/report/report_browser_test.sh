#!/usr/bin/env bash
# Opens a report of two real runs (testdata/) in headless Chromium and checks
# what a person would see: every chart rendered as an SVG of non-zero size,
# the plotted runs' lines and bars present, no console errors. The page's
# screenshot lands in the test outputs (bazel-testlogs/.../outputs.zip).
# Chromium comes from Debian (tools/setup.sh installs it).
set -euo pipefail

report_bin="$1"
runs="$2,$3"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
shots="${TEST_UNDECLARED_OUTPUTS_DIR:-$tmp}"
export HOME="$tmp"  # Chromium writes its profile under $HOME

fail() { echo "FAIL: $*"; exit 1; }
command -v chromium > /dev/null ||
  fail "chromium is not installed; expected Debian's chromium package (run tools/setup.sh)"

chrome() {
  timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run \
    --allow-file-access-from-files --enable-logging=stderr --v=0 \
    --virtual-time-budget=5000 "$@"
}

# A page that loads `report` in a frame and lists each SVG's size and marks.
probe() {
  local report="$1" page="$tmp/probe_$RANDOM.html"
  cat > "$page" << HTML
<!DOCTYPE html><html><body>
<iframe id="r" src="file://$report" width="1400" height="3200"></iframe><pre id="out">pending</pre>
<script>
document.getElementById('r').addEventListener('load', () => {
  const d = document.getElementById('r').contentDocument, lines = [];
  for (const svg of d.querySelectorAll('svg')) {
    const b = svg.getBoundingClientRect();
    const marks = svg.querySelectorAll('polyline,rect.segment,circle').length;
    lines.push('svg|' + svg.getAttribute('aria-label') + '|' + Math.round(b.width) + '|' +
               Math.round(b.height) + '|' + marks);
  }
  document.getElementById('out').textContent = lines.join('\n') + '\nprobe done';
});
</script></body></html>
HTML
  chrome --dump-dom "file://$page" 2> "$tmp/console.txt"
}

# The harness must see console errors, or "no console errors" proves nothing.
printf '<html><body><script>console.error("planted")</script></body></html>' > "$tmp/bad.html"
probe "$tmp/bad.html" > /dev/null
grep -q 'CONSOLE.*"planted"' "$tmp/console.txt" || fail "the probe does not see console errors"

"$report_bin" --metrics="$runs" --out="$tmp/report.html"
dom="$(probe "$tmp/report.html")"
grep -q "probe done" <<< "$dom" || fail "the page never finished loading: $dom"
if grep "CONSOLE" "$tmp/console.txt" | grep -q "report.html"; then
  fail "console messages: $(grep CONSOLE "$tmp/console.txt")"
fi

declare -A marks
count=0
while IFS='|' read -r tag title width height n; do
  [ "$tag" = "svg" ] || continue
  count=$((count + 1))
  [ "$width" -gt 100 ] && [ "$height" -gt 100 ] || fail "chart '$title' is ${width}x${height}"
  marks["$title"]=$n
done <<< "$(sed 's/^.*<pre id="out">//' <<< "$dom" | grep '^svg|')"
[ "$count" -eq 8 ] || fail "expected 8 charts, saw $count: $dom"
# Both runs' loss and val loss, throughput and memory lines; one bar of
# several segments per run; comm only for the ddp run's lines (and the
# single run's zeros).
[ "${marks[Loss]}" -ge 4 ] || fail "loss chart has ${marks[Loss]} series"
[ "${marks[Throughput]}" -eq 2 ] || fail "throughput chart has ${marks[Throughput]} series"
[ "${marks[Memory]}" -eq 2 ] || fail "memory chart has ${marks[Memory]} series"
[ "${marks[Step breakdown]}" -ge 6 ] || fail "breakdown has ${marks[Step breakdown]} segments"
[ "${marks[Exposed communication]}" -eq 2 ] || fail "exposed comm chart: ${marks[Exposed communication]}"

chrome --hide-scrollbars --window-size=1400,2600 --screenshot="$shots/report.png" \
  "file://$tmp/report.html" 2> /dev/null > /dev/null
size=$(stat -c %s "$shots/report.png")
[ "$size" -gt 50000 ] || fail "screenshot is only $size bytes: a blank page?"
echo "PASS: 8 charts rendered, no console errors; screenshot $shots/report.png ($size bytes)"
