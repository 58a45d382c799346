# transport: the transport plugins alone (ofi/shm, ofi/tcp, gloo) against memcpy, 4 KiB .. 256 MiB.
#
# The transport benchmark of the libfabric issue, side by side in one run: 2 ranks, float32
# sum allreduce from 4 KiB to 256 MiB over ofi/shm, ofi/tcp and gloo, plus single-thread
# memcpy as the ceiling; interleaved rounds (shm tcp gloo memcpy, shm tcp gloo memcpy, ...) so
# machine noise hits all alike, medians printed (bench/transport/bench_transport.c). Then,
# with --switch (or SWITCH=1), the sweeps behind the ofi plugin's switch points: each
# small-message algorithm against the large one, forced with the PLAIT_OFI_*_MIN variables.
# The output is also kept in OUT/transport.txt.
#
#   ci/bench transport [--rounds N] [--switch]      (default 5 rounds)
switch="${SWITCH:-0}"
while [ $# -gt 0 ]; do
  case "$1" in
    --switch) switch=1; shift ;;
    *) bench_no_args "$@" ;;
  esac
done
plait_ensure_packages
bench_build build/bench
bench=build/bench/bin/bench_transport
if [ ! -x "$bench" ]; then
  echo "ci/bench transport: $bench was not built" >&2
  exit 1
fi
rounds="${rounds:-5}"
{
  "$bench" -r "$rounds" -s 4K:256M
  # per collective: the small-message algorithm, the large one, the variable that switches
  switches=("allreduce rd ring PLAIT_OFI_ALLREDUCE_RING_MIN"
            "broadcast tree chain PLAIT_OFI_BROADCAST_CHAIN_MIN"
            "allgatherv direct ring PLAIT_OFI_ALLGATHERV_RING_MIN"
            "reducescatter direct ring PLAIT_OFI_REDUCESCATTER_RING_MIN")
  if [ "$switch" = 1 ]; then
    for prov in shm tcp; do
      for sw in "${switches[@]}"; do
        read -r op small large var <<<"$sw"
        "$bench" -r "$rounds" -s 1K:4M -o "$op" "$small/$prov=ofi,FI_PROVIDER=$prov,$var=1T" \
          "$large/$prov=ofi,FI_PROVIDER=$prov,$var=0"
      done
    done
  fi
} | tee "$out/transport.txt"
bench_docs "$out/transport.txt"
