#!/usr/bin/env bash
# The transport benchmark of the libfabric issue, side by side in one run:
# 2 ranks, float32 sum allreduce from 4 KiB to 256 MiB over ofi/shm, ofi/tcp
# and gloo, plus single-thread memcpy as the ceiling; interleaved rounds
# (shm tcp gloo memcpy, shm tcp gloo memcpy, ...) so machine noise hits all
# alike, medians printed. Then, with SWITCH=1, the sweeps behind the ofi
# plugin's switch points: each small-message algorithm against the large one,
# forced with the PLAIT_OFI_*_MIN variables.
#
#   ci/bench-transport [ROUNDS]          (default 5)
#   SWITCH=1 ci/bench-transport 3        (also the switch-point sweeps)
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/lib/deps.sh
plait_ensure_packages
cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLAIT_BUILD_TESTS=OFF >/dev/null
cmake --build build/bench >/dev/null
bench=build/bench/bin/bench_transport
if [ ! -x "$bench" ]; then
  echo "ci/bench-transport: $bench was not built" >&2
  exit 1
fi
rounds="${1:-5}"
"$bench" -r "$rounds" -s 4K:256M
[ "${SWITCH:-0}" = 1 ] || exit 0
for prov in shm tcp; do
  "$bench" -r "$rounds" -s 1K:4M -o allreduce \
    "rd/$prov=ofi,FI_PROVIDER=$prov,PLAIT_OFI_ALLREDUCE_RING_MIN=1T" \
    "ring/$prov=ofi,FI_PROVIDER=$prov,PLAIT_OFI_ALLREDUCE_RING_MIN=0"
  "$bench" -r "$rounds" -s 1K:4M -o broadcast \
    "tree/$prov=ofi,FI_PROVIDER=$prov,PLAIT_OFI_BROADCAST_CHAIN_MIN=1T" \
    "chain/$prov=ofi,FI_PROVIDER=$prov,PLAIT_OFI_BROADCAST_CHAIN_MIN=0"
  "$bench" -r "$rounds" -s 1K:4M -o allgatherv \
    "direct/$prov=ofi,FI_PROVIDER=$prov,PLAIT_OFI_ALLGATHERV_RING_MIN=1T" \
    "ring/$prov=ofi,FI_PROVIDER=$prov,PLAIT_OFI_ALLGATHERV_RING_MIN=0"
  "$bench" -r "$rounds" -s 1K:4M -o reducescatter \
    "direct/$prov=ofi,FI_PROVIDER=$prov,PLAIT_OFI_REDUCESCATTER_RING_MIN=1T" \
    "ring/$prov=ofi,FI_PROVIDER=$prov,PLAIT_OFI_REDUCESCATTER_RING_MIN=0"
done
