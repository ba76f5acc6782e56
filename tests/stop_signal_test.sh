#!/usr/bin/env bash
# SIGTERM and SIGUSR1 (Slurm's preemption and time-limit warnings) save a
# checkpoint and stop, as a user meets them: a signal to the launcher of 2
# gloo ranks (or to one of its workers only) stops every rank after the same
# step with a checkpoint there, exit status 128 + the signal, and a resume
# from it (--resume=auto, the command that started the run) trains the
# same losses as a run never stopped. Without
# --checkpoint_dir, or with --save_on_signal=false, the signal ends the
# process at once as before. A second job on a checkpoint directory in
# use is refused.
set -uo pipefail
train="$TEST_SRCDIR/weft/models/gpt/train"
config="$TEST_SRCDIR/weft/models/gpt/configs/tiny.textproto"
tmp="$TEST_TMPDIR"
fail() { echo "FAIL: $*"; exit 1; }
for i in $(seq 1 300); do echo "the quick brown fox jumps over the lazy dog."; done > "$tmp/corpus.txt"
steps=60
common=(--config="$config" --data="$tmp/corpus.txt" --micro_batch=4 --global_batch=8
        --log_every=1 --eval_every=0 --eval_batches=0 --num_workers=1 --steps=$steps)

# Starts a run in the background (pid in $run_pid), waits for its step 3.
start_run() {
  local out=$1; shift
  "$train" "${common[@]}" "$@" > "$out" 2>&1 &
  run_pid=$!
  for _ in $(seq 1 600); do
    grep -q "step 3 |" "$out" && return 0
    kill -0 "$run_pid" 2>/dev/null || { cat "$out"; fail "run ended before step 3"; }
    sleep 0.05
  done
  cat "$out"; fail "no step 3 within 30 s"
}
# The step the run stopped after, from its line; checks the directory.
stopped_step() {
  local out=$1 dir=$2 sig=$3
  local s
  s=$(grep -o "stopped by $sig after step [0-9]* of $steps" "$out" | awk '{print $6}')
  [ -n "$s" ] || { cat "$out"; fail "no 'stopped by $sig after step N' line"; }
  [ "$s" -lt "$steps" ] || fail "stopped at the last step"
  [ -d "$dir/step_$s" ] || { ls "$dir"; fail "no $dir/step_$s"; }
  echo "$s"
}
loss_at() { grep -o "step $2 | loss [0-9.e+-]*" "$1" | awk '{print $5}'; }

# 1. SIGTERM to the launcher: forwarded, both ranks save at one step. The
#    same command (--resume=auto) starts the run and continues it.
start_run "$tmp/term.txt" --nproc_per_node=2 --strategy=ddp --checkpoint_dir="$tmp/ck" --resume=auto
grep -q "resume=auto: no checkpoint under $tmp/ck yet, a new run from step 0" "$tmp/term.txt" ||
  { cat "$tmp/term.txt"; fail "no note that --resume=auto found nothing to resume"; }
kill -TERM "$run_pid"
wait "$run_pid"; rc=$?
[ "$rc" = 143 ] || { cat "$tmp/term.txt"; fail "exit $rc after SIGTERM, expected 143"; }
s=$(stopped_step "$tmp/term.txt" "$tmp/ck" SIGTERM) || exit 1

# The resume continues exactly: its losses are those of an unstopped run.
"$train" "${common[@]}" --nproc_per_node=2 --strategy=ddp --checkpoint_dir="$tmp/ck" \
    --resume=auto > "$tmp/resumed.txt" 2>&1 || { cat "$tmp/resumed.txt"; fail "resume"; }
grep -q "resumed from .*step_$s at step $s (saved by 2 ranks" "$tmp/resumed.txt" ||
  { cat "$tmp/resumed.txt"; fail "did not resume from step_$s"; }
"$train" "${common[@]}" --nproc_per_node=2 --strategy=ddp > "$tmp/whole.txt" 2>&1 ||
  { cat "$tmp/whole.txt"; fail "unstopped run"; }
for k in $((s + 1)) $steps; do
  a=$(loss_at "$tmp/resumed.txt" $k); b=$(loss_at "$tmp/whole.txt" $k)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "step $k: resumed loss '$a', unstopped '$b'"
done

# 2. SIGUSR1 to one worker only: the ranks agree within the step, and all
#    stop after the same one.
start_run "$tmp/usr1.txt" --nproc_per_node=2 --strategy=ddp --checkpoint_dir="$tmp/ck_usr1"
rank1=""
for p in $(pgrep -P "$run_pid"); do
  tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "RANK=1" && rank1=$p
done
[ -n "$rank1" ] || fail "no worker with RANK=1 under the launcher"
kill -USR1 "$rank1"
wait "$run_pid"; rc=$?
[ "$rc" = 138 ] || { cat "$tmp/usr1.txt"; fail "exit $rc after SIGUSR1 to rank 1, expected 138"; }
stopped_step "$tmp/usr1.txt" "$tmp/ck_usr1" SIGUSR1 > /dev/null || exit 1

# 3. One process, no launcher, saving every step: the stop step's save is
#    its periodic one (that save was skipped, and the line said "saved").
#    While it runs, a second job on its directory is refused naming it.
start_run "$tmp/one.txt" --checkpoint_dir="$tmp/ck_one" --checkpoint_every=1
"$train" "${common[@]}" --checkpoint_dir="$tmp/ck_one" --steps=2 > "$tmp/second.txt" 2>&1 &&
  fail "a second job on a directory in use ran"
grep -q "ck_one is in use by another job (pid $run_pid on host" "$tmp/second.txt" ||
  { cat "$tmp/second.txt"; fail "the second job's error does not name the first"; }
kill -TERM "$run_pid"
wait "$run_pid"; rc=$?
[ "$rc" = 143 ] || { cat "$tmp/one.txt"; fail "one process: exit $rc, expected 143"; }
stopped_step "$tmp/one.txt" "$tmp/ck_one" SIGTERM > /dev/null || exit 1

# 4. Ranks started by hand with torchrun's variables: rank 0 hosts the
#    store, so it must leave last; every rank stops with 143.
# A port of its own: RANDOM differs between concurrent runs, $$ may not.
port=$(( 20000 + (RANDOM * 32768 + RANDOM + 10#$(date +%N) / 1000) % 20000 ))
for rank in 0 1; do
  RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$port "$train" "${common[@]}" --strategy=ddp --checkpoint_dir="$tmp/ck_hand" \
    > "$tmp/hand.$rank.txt" 2>&1 &
  pids[$rank]=$!
done
for _ in $(seq 1 600); do grep -q "step 3 |" "$tmp/hand.0.txt" && break; sleep 0.05; done
grep -q "step 3 |" "$tmp/hand.0.txt" || { cat "$tmp"/hand.*.txt; fail "by hand: no step 3"; }
kill -TERM "${pids[0]}" "${pids[1]}"
for rank in 0 1; do
  wait "${pids[$rank]}"; rc=$?
  [ "$rc" = 143 ] || { cat "$tmp/hand.$rank.txt"; fail "by hand: rank $rank exited $rc, expected 143"; }
done
stopped_step "$tmp/hand.0.txt" "$tmp/ck_hand" SIGTERM > /dev/null || exit 1

# 5. Off: the default action ends the run at once, with no checkpoint.
start_run "$tmp/off.txt" --checkpoint_dir="$tmp/ck_off" --save_on_signal=false
kill -TERM "$run_pid"
wait "$run_pid"; rc=$?
[ "$rc" = 143 ] || { cat "$tmp/off.txt"; fail "--save_on_signal=false: exit $rc, expected 143"; }
grep -q "stopped by" "$tmp/off.txt" && fail "--save_on_signal=false still saved"
[ -z "$(ls "$tmp/ck_off" 2>/dev/null | grep '^step_')" ] || fail "a checkpoint with the handler off"
echo PASS
