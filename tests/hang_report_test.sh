#!/usr/bin/env bash
# Hang forensics end to end, with the real launcher and gloo ranks:
#   1. rank 1 of a 4-rank ddp job skips one all-reduce: the job ends within
#      the timeout plus 10 s, every rank dumps its flight recorder, and
#      //tools:hang_report names rank 1 and the op;
#   2. rank 2 issues one with another size (gloo aborts it): the report
#      names rank 2, its size and the others';
#   3. SIGUSR2 to the launcher makes every rank dump and the run go on.
set -uo pipefail

train="$TEST_SRCDIR/weft/models/gpt/train"
report="$TEST_SRCDIR/weft/tools/hang_report/hang_report"
config="$TEST_SRCDIR/weft/models/gpt/configs/tiny.textproto"
tmp="$TEST_TMPDIR"
fail() { echo "FAIL: $*"; exit 1; }
group="dp_replicate+dp_shard"
# ddp issues 28 parameter broadcasts, then about two all-reduces a step.
args=(--config="$config" --strategy=ddp --nproc_per_node=4 --micro_batch=4 --steps=40
      --timeout_s=5 --eval_batches=0 --quiet)

start=$(date +%s)
"$train" "${args[@]}" --flight_dir="$tmp/skip" \
  --debug_collective_fault=skip,rank=1,group=$group,seq=40 > "$tmp/skip.log" 2>&1 &&
  fail "the job with a skipped all-reduce succeeded"
took=$(( $(date +%s) - start ))
[ "$took" -le 15 ] || fail "the job took ${took}s to end (timeout 5 s + 10 s)"
for r in 0 1 2 3; do
  [ -s "$tmp/skip/rank_$r.json" ] || { cat "$tmp/skip.log"; fail "rank $r left no dump"; }
done
"$report" "$tmp/skip" > "$tmp/skip.txt"; rc=$?
[ "$rc" -eq 1 ] || fail "hang_report exited $rc on diverged ranks: $(cat "$tmp/skip.txt")"
head -1 "$tmp/skip.txt" | grep -q "^rank 1 never issued all_reduce #40 on group 'dp/$group#0'" ||
  fail "the report does not name rank 1 and all_reduce #40: $(cat "$tmp/skip.txt")"

"$train" "${args[@]}" --flight_dir="$tmp/resize" \
  --debug_collective_fault=resize,rank=2,group=$group,seq=41 > "$tmp/resize.log" 2>&1 &&
  fail "the job with a resized all-reduce succeeded"
"$report" "$tmp/resize" > "$tmp/resize.txt"
# (A rank the launcher stopped before it issued #41 is left out of the majority.)
head -1 "$tmp/resize.txt" | grep -q "^rank 2 issued all_reduce #41 on group .* as 'all_reduce sum f32 n=421375' (rank 2) where ranks\? [0-9, ]*issued 'all_reduce sum f32 n=421376'" ||
  fail "the report does not name rank 2's size: $(cat "$tmp/resize.txt"; tail -5 "$tmp/resize.log")"
grep -q "rank 2 .*SIGABRT" "$tmp/resize.txt" || fail "rank 2's abort left no dump: $(cat "$tmp/resize.txt")"

# SIGUSR2: a dump from every rank of a healthy run, which then finishes.
"$train" "${args[@]}" --steps=100000 --flight_dir="$tmp/usr2" > "$tmp/usr2.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do grep -q "progress\|step " "$tmp/usr2.log" && break; sleep 0.1; done
kill -USR2 "$pid"
for _ in $(seq 1 100); do [ "$(ls "$tmp/usr2" 2>/dev/null | grep -c json)" -eq 4 ] && break; sleep 0.1; done
kill -0 "$pid" 2> /dev/null || { cat "$tmp/usr2.log"; fail "SIGUSR2 ended the run"; }
kill -INT "$pid"; wait "$pid"
[ "$(ls "$tmp/usr2" | grep -c 'rank_.*json$')" -eq 4 ] || fail "not every rank dumped on SIGUSR2"
grep -q '"reason": "SIGUSR2"' "$tmp/usr2/rank_3.json" || fail "rank 3's dump does not say SIGUSR2"
"$report" "$tmp/usr2" > "$tmp/usr2.txt"
head -1 "$tmp/usr2.txt" | grep -q "agree\|stuck\|none finished" ||
  fail "a healthy run's dumps diverge: $(cat "$tmp/usr2.txt")"
echo PASS
