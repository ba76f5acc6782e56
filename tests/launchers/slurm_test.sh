#!/usr/bin/env bash
# A real one-node Slurm cluster, started by the test from Debian's packages
# (munge, slurmctld, slurmd) with a throw-away config in the test's temp
# dir. It submits the repository's CPU sbatch example and checks the job's
# losses against one process, then kills one task mid-run and checks that
# the job ends within the timeout, naming the rank, and cancels a third
# (scancel, as preemption does) to check it saves a checkpoint first.
# Installs nothing.
set -euo pipefail
source "$TEST_SRCDIR/weft/tests/launchers/common.sh"

for tool in munged slurmctld slurmd sbatch squeue scontrol; do
  command -v $tool > /dev/null || { echo "FAIL: $tool missing (tools/setup.sh installs slurm-wlm and munge)"; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root to run slurmd"; exit 1; }

# Short: socket paths are limited to 108 bytes, and the test's temp dir is deep.
s=$(mktemp -d /tmp/weft-slurm.XXXXXX)
mkdir -p "$s/state" "$s/spool" "$s/log"
chmod 755 "$tmp" "$s"
host=$(hostname -s)
ctl_port=$(( 36000 + $$ % 1000 ))
cleanup() {
  [ -f "$s/slurmd.pid" ] && kill "$(cat "$s/slurmd.pid")" 2> /dev/null || true
  [ -f "$s/slurmctld.pid" ] && kill "$(cat "$s/slurmctld.pid")" 2> /dev/null || true
  [ -f "$s/munged.pid" ] && kill "$(cat "$s/munged.pid")" 2> /dev/null || true
  sleep 1
  pkill -9 -f "$s/slurm.conf" 2> /dev/null || true
  rm -rf "$s"
}
trap cleanup EXIT

dd if=/dev/urandom bs=1 count=1024 of="$s/munge.key" 2> /dev/null
chmod 400 "$s/munge.key"
munged --force --socket="$s/munge.sock" --key-file="$s/munge.key" --pid-file="$s/munged.pid" \
  --log-file="$s/log/munged.log" --seed-file="$s/munge.seed"

cat > "$s/slurm.conf" <<CONF
ClusterName=weft-test
SlurmctldHost=$host
SlurmctldPort=$ctl_port
SlurmdPort=$((ctl_port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$s/munge.sock
CredType=cred/munge
StateSaveLocation=$s/state
SlurmdSpoolDir=$s/spool
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd.pid
SlurmctldLogFile=$s/log/slurmctld.log
SlurmdLogFile=$s/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdTimeout=30
KillWait=5
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF="$s/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 1 60); do
  sinfo -h -o '%t' 2> /dev/null | grep -qE '^(idle|mix)' && break
  sleep 0.5
done
sinfo -h -o '%t' | grep -qE '^(idle|mix)' ||
  { echo "FAIL: the node never came up:"; sinfo; tail -20 "$s"/log/*.log; exit 1; }

reference
sbatch_file="$TEST_SRCDIR/weft/tools/slurm_example_cpu.sbatch"

# submit_long NAME [flags]: the CPU example as a long ddp job writing
# $tmp/NAME.jsonl and $tmp/NAME_<jobid>.out; waits for its step 3 and
# sets $jobid.
submit_long() {
  local name=$1; shift
  BIN="$train" CONFIG="$config" sbatch --oversubscribe --cpus-per-task=1 \
    --output="$tmp/${name}_%j.out" --chdir="$tmp" "$sbatch_file" \
    "${job[@]:1}" --steps=100000 --micro_batch=4 --strategy=ddp \
    --metrics_out="$tmp/$name.jsonl" "$@" > "$tmp/$name.sbatch" 2>&1
  jobid=$(grep -oE '[0-9]+' "$tmp/$name.sbatch" | tail -1)
  for _ in $(seq 1 120); do
    grep -q '"step":3,' "$tmp/$name.jsonl" 2> /dev/null && return 0
    sleep 0.5
  done
  echo "FAIL: job $jobid never started"; cat "$tmp/${name}"_*.out; exit 1
}
# Waits (up to 60 s) for $jobid to leave the queue.
wait_gone() {
  for _ in $(seq 1 120); do
    squeue -h -j "$jobid" 2> /dev/null | grep -q . || return 0
    sleep 0.5
  done
}

# The repository's CPU example, 2 tasks, ddp; --wait returns the job's exit code.
start=$SECONDS
if ! BIN="$train" CONFIG="$config" sbatch --wait --oversubscribe --cpus-per-task=1 \
    --output="$tmp/job_%j.out" --chdir="$tmp" "$sbatch_file" \
    "${job[@]:1}" --micro_batch=4 --strategy=ddp --metrics_out="$tmp/slurm_ddp.jsonl" \
    > "$tmp/sbatch.out" 2>&1; then
  echo "FAIL: sbatch"; cat "$tmp/sbatch.out" "$tmp"/job_*.out 2> /dev/null | tail -30; exit 1
fi
grep -q "world 2 (dp 2) via srun" "$tmp"/job_*.out || { echo "FAIL: banner"; cat "$tmp"/job_*.out; exit 1; }
expect_same_losses "sbatch slurm_example_cpu.sbatch ($((SECONDS - start)) s)" "$tmp/slurm_ddp.jsonl"

# The trainer run by the batch script itself (no srun) fails at once asking
# for srun; a launcher per task of a 2-task step is refused naming both.
printf '#!/bin/bash\n"$BIN" "$@"\n' > "$tmp/nosrun.sbatch"
start=$SECONDS
BIN="$train" sbatch --wait --ntasks=2 --oversubscribe --output="$tmp/nosrun.out" \
  "$tmp/nosrun.sbatch" "${job[@]}" --micro_batch=4 --strategy=ddp > /dev/null 2>&1 || true
grep -q "put srun in front" "$tmp/nosrun.out" && [ $((SECONDS - start)) -lt 20 ] ||
  { echo "FAIL: sbatch without srun"; cat "$tmp/nosrun.out"; exit 1; }
srun -n 2 --oversubscribe "$train" "${job[@]}" --micro_batch=4 --nproc_per_node=2 \
  > "$tmp/split.out" 2>&1 && { echo "FAIL: srun -n 2 --nproc_per_node=2 ran"; exit 1; }
grep -q "inside an srun step (SLURM_STEP_NUM_TASKS=2)" "$tmp/split.out" ||
  { echo "FAIL: srun -n 2 --nproc_per_node=2"; cat "$tmp/split.out"; exit 1; }

# Kill one task mid-run: the job ends within the timeout and names the rank.
rm -f "$tmp"/job_*.out
start=$SECONDS
submit_long slurm_kill --timeout_s=15
victim=$(pgrep -f -- "--metrics_out=$tmp/slurm_kill.jsonl" | while read -r pid; do
  grep -qz '^SLURM_PROCID=1$' "/proc/$pid/environ" 2> /dev/null && echo "$pid"; done | head -1)
[ -n "$victim" ] || { echo "FAIL: no rank 1 process found"; exit 1; }
kill -9 "$victim"
wait_gone
elapsed=$((SECONDS - start))
if squeue -h -j "$jobid" 2> /dev/null | grep -q .; then
  echo "FAIL: job $jobid still running ${elapsed}s after a task was killed"; exit 1
fi
echo "killed rank 1 (pid $victim): job $jobid ended after ${elapsed}s"
grep -E "rank 1|task 1" "$tmp"/slurm_kill_*.out | head -3 ||
  { echo "FAIL: the job's output does not name rank 1:"; cat "$tmp"/slurm_kill_*.out; exit 1; }

# Preemption: scancel sends every task SIGTERM (and SIGKILL KillWait=5 s
# later); the ranks finish the step, save a checkpoint there and stop.
start=$SECONDS
submit_long slurm_preempt --checkpoint_dir="$tmp/preempt_ck"
scancel "$jobid"
wait_gone
stopped=$(grep -oE '"step":[0-9]+,"stopped_by_signal":15' "$tmp/slurm_preempt.jsonl" | grep -oE '[0-9]+' | head -1)
[ -n "$stopped" ] && [ -f "$tmp/preempt_ck/step_$stopped/metadata.pb" ] ||
  { echo "FAIL: scancel: no checkpoint saved on SIGTERM"; ls "$tmp/preempt_ck"; cat "$tmp"/slurm_preempt_*.out | tail -20; exit 1; }
grep -q "stopped by SIGTERM after step $stopped of 100000" "$tmp"/slurm_preempt_*.out ||
  { echo "FAIL: scancel: no 'stopped by SIGTERM' line"; cat "$tmp"/slurm_preempt_*.out | tail -20; exit 1; }
echo "scancel: job $jobid saved step_$stopped and stopped after $((SECONDS - start))s"
echo "PASS"
