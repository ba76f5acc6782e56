#!/usr/bin/env bash
# A launcher SIGKILLed while its workers sit under a wrapper that does not
# exec them (`launch -- bash -c "train ...; true"`: the kernel's parent-death
# signal reaches the wrapper only; --output=raw, so no pipe breaks) used to
# leave the training processes running at full CPU, reparented to PID 1,
# unaware that the store was gone (seen: still training 10 s later). Their
# store watchdog (comm/env/store_watchdog.h) now ends them within seconds.
set -uo pipefail
source "$(dirname "$0")/common.sh"

marker="$tmp/killed_$$.jsonl"
WEFT_STORE_WATCHDOG_S=1 "$launch" --nproc_per_node=2 --output=raw -- bash -c \
  "\"$train\" ${job[*]} --steps=100000000 --micro_batch=4 --strategy=ddp --quiet --log_every=1 --metrics_out=$marker; true" \
  > "$tmp/killed.log" 2>&1 &
launcher=$!
for _ in $(seq 1 120); do
  grep -q '"step":3,' "$marker" 2>/dev/null && break
  sleep 0.5
done
grep -q '"step":3,' "$marker" || { cat "$tmp/killed.log"; echo "FAIL: the job never reached step 3"; exit 1; }
kill -9 "$launcher"
wait "$launcher" 2>/dev/null
start=$(date +%s)
while pgrep -f -- "--metrics_out=$marker" > /dev/null; do
  if [ $(( $(date +%s) - start )) -gt 30 ]; then
    pgrep -af -- "--metrics_out=$marker"
    pkill -9 -f -- "--metrics_out=$marker"
    echo "FAIL: workers still running 30 s after their launcher was killed"
    exit 1
  fi
  sleep 0.5
done
echo "PASS: the workers ended $(( $(date +%s) - start )) s after their launcher was SIGKILLed"
