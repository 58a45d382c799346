#!/usr/bin/env bash
# Two builds of plait side by side on a lone cached 4 KiB allreduce:
# plait-bench latency at 2 and 3 ranks over ofi/shm (the transport auto picks
# on one host), defaults otherwise, in rounds where the builds alternate and
# the one that goes first alternates too. Prints one line per run (median,
# p10 and p90 of rank 0, us) and then each build's median over the rounds
# with its lowest and highest round.
#
#   bench/ab_latency.sh LABEL_A BUILD_A LABEL_B BUILD_B [ROUNDS (7)] [ITERS (40000)]
#
# BUILD_*: build trees with bin/plaitrun, bin/plait-bench and lib/ (a Release
# build: ci/bench's build/bench). Extra environment (PLAIT_*) passes through.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 4 ]; then
  echo "usage: bench/ab_latency.sh LABEL_A BUILD_A LABEL_B BUILD_B [ROUNDS] [ITERS]" >&2
  exit 2
fi
labels=("$1" "$3")
builds=("$2" "$4")
rounds="${5:-7}"
iters="${6:-40000}"
for b in "${builds[@]}"; do
  for f in bin/plaitrun bin/plait-bench; do
    if [ ! -x "$b/$f" ]; then
      echo "bench/ab_latency.sh: $b/$f is missing: build that tree first" >&2
      exit 2
    fi
  done
done
case "$rounds$iters" in *[!0-9]*)
  echo "bench/ab_latency.sh: ROUNDS and ITERS are counts, not '$rounds' '$iters'" >&2
  exit 2 ;;
esac
export PLAIT_TRANSPORT=ofi FI_PROVIDER=shm
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# plait-bench latency (a lone 4 KiB allreduce, $iters operations, median us; then p10 and p90), ofi/shm, defaults;"
echo "# ${labels[0]} = ${builds[0]}, ${labels[1]} = ${builds[1]}; $rounds rounds, the builds alternating"
for ((k = 1; k <= rounds; k++)); do
  for np in 2 3; do
    order=(0 1)
    [ $((k % 2)) = 0 ] && order=(1 0)
    for i in "${order[@]}"; do
      b="${builds[$i]}"
      line="$(PLAIT_PLUGIN_PATH="$b/lib" timeout 600 "$b/bin/plaitrun" -np "$np" \
        "$b/bin/plait-bench" latency --iters "$iters" 2>&1 | grep '^\[0\]' | tail -1 || true)"
      # [0]: 4 KiB ITERS MEDIAN P10 P90 ...
      read -r _ _ _ _ med p10 p90 _ <<<"$line" || true
      if [ -z "${p90:-}" ]; then
        echo "round $k ranks $np ${labels[$i]}: FAILED: ${line:-no output}"
        continue
      fi
      echo "round $k ranks $np ${labels[$i]}: $med $p10 $p90 us"
      echo "$np ${labels[$i]} $med" >> "$out"
    done
  done
done
echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# medians over the $rounds rounds (lowest-highest), us:"
python3 - "$out" "${labels[@]}" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for np in ("2", "3"):
    for label in sys.argv[2:]:
        v = sorted(float(r[2]) for r in rows if r[0] == np and r[1] == label)
        if v:
            print(f"ranks {np} {label}: median {statistics.median(v):.1f} ({v[0]:.1f}-{v[-1]:.1f})")
        else:
            print(f"ranks {np} {label}: no run finished")
EOF
