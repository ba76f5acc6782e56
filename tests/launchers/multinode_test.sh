#!/usr/bin/env bash
# Two hosts over a real network interface: two network namespaces joined by
# a veth pair stand in for two machines. In the first, the host name
# resolves to 127.0.1.1, as on Debian. tools/launch runs 2 ranks in each;
# ddp, fsdp and HSDP (replicate across the hosts, shard inside each) must
# match one process. A job started with torchrun's variables set by hand
# must too. Then the link is cut mid-run: every rank on both sides must exit
# non-zero within the timeout, naming the peer. Needs root (CI is root).
set -euo pipefail
source "$TEST_SRCDIR/weft/tests/launchers/common.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v ip > /dev/null; then
  echo "FAIL: needs root and iproute2 (tools/setup.sh installs it)"; exit 1
fi
id=$(( $$ % 200 + 20 ))
ns0="weft_h0_$$"; ns1="weft_h1_$$"
a0="10.99.$id.1"; a1="10.99.$id.2"
cleanup() {
  for ns in "$ns0" "$ns1"; do
    ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
    ip netns del "$ns" 2> /dev/null || true
    rm -rf "/etc/netns/$ns"
  done
}
trap cleanup EXIT
ip netns add "$ns0"
ip netns add "$ns1"
ip link add "v0_$$" type veth peer name "v1_$$"
ip link set "v0_$$" netns "$ns0"
ip link set "v1_$$" netns "$ns1"
ip -n "$ns0" addr add "$a0/24" dev "v0_$$"
ip -n "$ns1" addr add "$a1/24" dev "v1_$$"
for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
ip -n "$ns0" link set "v0_$$" up
ip -n "$ns1" link set "v1_$$" up
# Per-host name resolution: on host 0 the name is loopback (Debian style).
host=$(hostname)
mkdir -p "/etc/netns/$ns0" "/etc/netns/$ns1"
printf '127.0.0.1 localhost\n127.0.1.1 %s\n%s host1\n' "$host" "$a1" > "/etc/netns/$ns0/hosts"
printf '127.0.0.1 localhost\n%s %s\n%s host0\n' "$a1" "$host" "$a0" > "/etc/netns/$ns1/hosts"

reference
port=$(( 29600 + $$ % 300 ))

# two_hosts LABEL ARGS...: tools/launch on both hosts, 2 ranks each.
two_hosts() {
  local label="$1"; shift
  port=$((port + 1))
  local start=$SECONDS
  for r in 0 1; do
    local ns=$ns0; [ $r = 1 ] && ns=$ns1
    ip netns exec "$ns" "$launch" --nproc_per_node=2 --nnodes=2 --node_rank=$r \
      --master_addr="$a0" --master_port=$port --output=rank0 -- \
      "$train" "${job[@]}" --micro_batch=2 --metrics_out="$tmp/$label.jsonl" "$@" \
      > "$tmp/$label.$r.log" 2>&1 &
  done
  local rc=0
  wait %1 || rc=$?
  wait %2 || rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL: $label exited $rc"; tail -20 "$tmp/$label.0.log" "$tmp/$label.1.log"; exit 1
  fi
  expect_same_losses "$label (two hosts, $((SECONDS - start)) s)" "$tmp/$label.jsonl"
}

two_hosts ddp --strategy=ddp
two_hosts fsdp --strategy=fsdp
two_hosts hsdp --strategy=fsdp --dp_replicate=2

# torchrun's environment by hand: 4 processes, 2 per host.
port=$((port + 1))
for rank in 0 1 2 3; do
  ns=$ns0; [ $rank -ge 2 ] && ns=$ns1
  ip netns exec "$ns" env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) LOCAL_WORLD_SIZE=2 \
    GROUP_RANK=$((rank / 2)) MASTER_ADDR="$a0" MASTER_PORT=$port \
    "$train" "${job[@]}" --micro_batch=2 --strategy=ddp --metrics_out="$tmp/byhand.jsonl" \
    > "$tmp/byhand.$rank.log" 2>&1 &
done
rc=0
for j in 1 2 3 4; do wait %$j || rc=$?; done
[ $rc -eq 0 ] || { echo "FAIL: torchrun-style job exited $rc"; tail -5 "$tmp"/byhand.*.log; exit 1; }
expect_same_losses "ddp (torchrun variables by hand)" "$tmp/byhand.jsonl"

# A wrong interface ends at once with a clear error, never a hang.
expect_fast_error() {
  local label="$1" want="$2" ifname="$3" flag="$4"
  local start=$SECONDS rc=0 out
  out=$(ip netns exec "$ns1" env RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 \
        MASTER_ADDR="$a0" MASTER_PORT=$((port + 50)) GLOO_SOCKET_IFNAME="$ifname" timeout 60 \
        "$train" "${job[@]}" --micro_batch=2 --strategy=ddp $flag 2>&1) || rc=$?
  local took=$((SECONDS - start))
  if [ $rc -eq 0 ] || [ $rc -eq 124 ] || [ $took -ge 30 ] || ! grep -q -- "$want" <<<"$out"; then
    echo "FAIL: $label: rc=$rc after ${took}s, expected an error containing '$want':"
    echo "$out" | tail -5; exit 1
  fi
  echo "$label: exit $rc after ${took}s: $(grep -m1 -o "network interface[^;]*" <<<"$out")"
}
expect_fast_error "--gloo_iface=nosuch0" "network interface 'nosuch0'" "" --gloo_iface=nosuch0
expect_fast_error "GLOO_SOCKET_IFNAME=nosuch1" "from GLOO_SOCKET_IFNAME" nosuch1 ""

# Cut the link mid-run: both sides fail within the timeout, naming a peer.
port=$((port + 1))
start=$SECONDS
for r in 0 1; do
  ns=$ns0; [ $r = 1 ] && ns=$ns1
  ip netns exec "$ns" "$launch" --nproc_per_node=2 --nnodes=2 --node_rank=$r \
    --master_addr="$a0" --master_port=$port -- \
    "$train" "${job[@]}" --steps=100000 --micro_batch=2 --strategy=ddp --timeout_s=15 \
    --metrics_out="$tmp/cut.jsonl" > "$tmp/cut.$r.log" 2>&1 &
done
for _ in $(seq 1 60); do
  grep -q '"step":3,' "$tmp/cut.jsonl" 2> /dev/null && break
  sleep 0.5
done
grep -q "\"step\":3," "$tmp/cut.jsonl" || { echo "FAIL: the job never got going"; cat "$tmp/cut.0.log"; exit 1; }
ip -n "$ns0" link set "v0_$$" down
rc0=0; rc1=0
wait %1 || rc0=$?
wait %2 || rc1=$?
elapsed=$((SECONDS - start))
echo "link cut: launchers exited $rc0 and $rc1 after ${elapsed}s"
[ $rc0 -ne 0 ] && [ $rc1 -ne 0 ] || { echo "FAIL: a side exited 0"; tail -5 "$tmp"/cut.*.log; exit 1; }
[ $elapsed -lt 90 ] || { echo "FAIL: took ${elapsed}s to fail"; exit 1; }
for r in 0 1; do
  grep -qE "peer rank [0-9]|peers on other hosts \(rank [0-9]" "$tmp/cut.$r.log" ||
    { echo "FAIL: host $r's error names no peer:"; tail -10 "$tmp/cut.$r.log"; exit 1; }
done
grep -iE "error|fail" "$tmp/cut.0.log" | head -3
echo "PASS"
