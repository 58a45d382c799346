#!/usr/bin/env bash
# plait.torch's per-operation cost, two trees of bindings/python side by side
# against one libplait: torch_bench.py's (a) 200 x 64 KiB step (async then
# synchronize) and (l) lone 4 KiB allreduce, plait's variants only, over
# ofi/shm, the two trees alternating round by round (the order flipping each
# round), medians over the rounds of each round's median.
#
#   bench/torch_bindings_ab.sh OLD_REV [BUILD_DIR] [ROUNDS] [RANKS] > bench/results/FILE.txt
#
# OLD_REV: the commit whose bindings/python is "old" (git archive); "new" is
# this tree's. BUILD_DIR (default build) has lib/libplait.so and the ofi
# plugin, built from this tree (a library with every function the old
# bindings declare). The torch venv is ~/.cache/plait/venvs/torch2
# (PLAIT_TORCH_PYTHON overrides it).
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,15p "$0"; exit 2; }
old_rev=$1
build=$(realpath "${2:-build}")
rounds=${3:-5}
ranks=${4:-2}
py="${PLAIT_TORCH_PYTHON:-$HOME/.cache/plait/venvs/torch2/bin/python}"
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/old"
git -C "$root" archive "$old_rev" bindings/python | tar -x -C "$tmp/old"
export PLAIT_TRANSPORT=ofi FI_PROVIDER=shm PLAIT_LIBRARY="$build/lib/libplait.so"
export PLAIT_PLUGIN_PATH="$build/lib"
run() { # run VERSION ROUND
  local src="$root/bindings/python"
  [ "$1" = old ] && src="$tmp/old/bindings/python"
  PYTHONPATH="$src" timeout 600 "$py" "$root/bench/torch_bench.py" --python "$py" --np "$ranks" \
    --rounds 1 --only al --plait-only --small-iters 50 --lone-iters 1000 \
    --label "$1" --json "$tmp/ab.jsonl" >"$tmp/log.$1.$2" 2>&1 ||
    { echo "torch_bindings_ab: $1 round $2 failed:" >&2; tail -20 "$tmp/log.$1.$2" >&2; exit 1; }
}
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, $ranks ranks, ofi/shm, old bindings" \
  "$old_rev ($(git -C "$root" rev-parse --short "$old_rev")), new $(git -C "$root" rev-parse --short HEAD)" \
  "(+ uncommitted: $(git -C "$root" status --porcelain bindings/python | wc -l) files)," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do run "$v" "$r"; done
done
echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp/ab.jsonl" <<'PY'
import json, statistics, sys
v = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    v.setdefault((d["workload"], d["system"]), []).append(d["median_s"])
for (w, s), xs in sorted(v.items()):
    print("round medians %s %s: %s" % (w, s, " ".join("%.1f" % (1e6 * x) for x in xs)))
print("| workload | old bindings | new bindings | new / old |")
print("|---|---|---|---|")
for w, unit, scale in (("200x64K", "ms", 1e3), ("latency-4K", "us", 1e6)):
    o, n = v.get((w, "plait.torch-old")), v.get((w, "plait.torch-new"))
    if o and n:
        mo, mn = statistics.median(o), statistics.median(n)
        print("| %s | %.2f %s | %.2f %s | %.3f |" % (w, scale * mo, unit, scale * mn, unit, mn / mo))
PY
