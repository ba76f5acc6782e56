# Shared by the launcher tests: the binaries, a small corpus, the training
# flags every run uses, and the loss comparison against one process.
# Sourced, not run.

# Daemons (munged, slurmctld, slurmd) live in sbin, off the test PATH.
export PATH="$PATH:/usr/sbin:/sbin"
train="$TEST_SRCDIR/weft/models/gpt/train"
launch="$TEST_SRCDIR/weft/tools/launch/launch"
config="$TEST_SRCDIR/weft/models/gpt/configs/tiny.textproto"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
steps=${STEPS:-6}

for i in $(seq 1 300); do
  echo "the quick brown fox $i jumps over the lazy dog; a stitch in time saves nine."
  echo "all that glitters is not gold, and every cloud has a silver lining $((i % 7))."
done > "$tmp/corpus.txt"

# 8 sequences per step: 4 ranks x micro 2 or 2 ranks x micro 4; no dropout.
job=(--config="$config" --data="$tmp/corpus.txt" --steps="$steps" --log_every=1
     --num_workers=1 --eval_batches=1 --eval_every=0 --global_batch=8 --d_model=64
     --n_layer=2 --seq_len=32 --timeout_s=30)

# The reference: one process, no strategy.
reference() {
  "$train" "${job[@]}" --micro_batch=8 --metrics_out="$tmp/ref.jsonl" > "$tmp/ref.log" 2>&1 ||
    { cat "$tmp/ref.log"; echo "FAIL: reference run"; exit 1; }
}

# losses FILE: "step loss" per line from a metrics file.
losses() { grep '"loss"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([0-9.e+-]+).*/\1 \2/'; }

# expect_same_losses LABEL FILE: every step's loss within 1e-4 (relative) of
# the reference, and as many steps.
expect_same_losses() {
  local label="$1" file="$2"
  [ -s "$file" ] || { echo "FAIL: $label wrote no metrics ($file)"; exit 1; }
  if ! paste -d' ' <(losses "$tmp/ref.jsonl") <(losses "$file") | awk -v label="$label" -v n="$steps" '
      { d = $2 - $4; if (d < 0) d = -d; r = d / $2; if (r > worst) worst = r; rows++ }
      $1 != $3 { print "FAIL: " label ": step " $1 " vs " $3; bad = 1 }
      END {
        if (rows != n) { print "FAIL: " label ": " rows " steps, expected " n; exit 1 }
        printf "%s: %d steps, worst relative loss difference %.2e\n", label, rows, worst
        exit bad || worst > 1e-4 }'; then
    echo "reference:"; losses "$tmp/ref.jsonl"; echo "$label:"; losses "$file"; exit 1
  fi
}
