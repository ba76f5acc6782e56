#!/usr/bin/env bash
# mpirun (Open MPI from Debian's openmpi-bin) as the launcher: 2 and 4
# ranks, ddp and fsdp, each matching one process. weft links no MPI; it
# reads OMPI_COMM_WORLD_* and picks the store on 127.0.0.1 with a port
# derived from the job, so no MASTER_ADDR is needed on one node.
set -euo pipefail
source "$TEST_SRCDIR/weft/tests/launchers/common.sh"

command -v mpirun > /dev/null || { echo "FAIL: mpirun missing (tools/setup.sh installs openmpi-bin)"; exit 1; }
reference
mpi=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
export OMPI_MCA_plm_rsh_agent=false  # one node: never try ssh

for np in 2 4; do
  for strategy in ddp fsdp; do
    start=$SECONDS
    label="mpirun -np $np $strategy"
    out="$tmp/mpi_${np}_$strategy"
    if ! "${mpi[@]}" -np $np "$train" "${job[@]}" --micro_batch=$((8 / np)) \
        --strategy=$strategy --metrics_out="$out.jsonl" > "$out.log" 2>&1; then
      echo "FAIL: $label"; tail -20 "$out.log"; exit 1
    fi
    grep -q "world $np (dp $np) via mpirun (Open MPI)" "$out.log" ||
      { echo "FAIL: $label: banner"; head -5 "$out.log"; exit 1; }
    expect_same_losses "$label ($((SECONDS - start)) s)" "$out.jsonl"
  done
done
# A stale RANK=0 WORLD_SIZE=1 would make each rank a job of its own.
if "${mpi[@]}" -np 2 -x RANK=0 -x WORLD_SIZE=1 "$train" "${job[@]}" --micro_batch=4 \
    > "$tmp/stale.log" 2>&1; then
  echo "FAIL: stale RANK under mpirun ran"; exit 1
fi
grep -q "disagrees with mpirun (Open MPI) (OMPI_COMM_WORLD_SIZE=2)" "$tmp/stale.log" ||
  { echo "FAIL: stale RANK under mpirun"; tail -5 "$tmp/stale.log"; exit 1; }
echo "PASS"
