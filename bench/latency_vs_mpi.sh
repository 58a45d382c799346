#!/usr/bin/env bash
# A lone cached 4 KiB allreduce (issue 37, goal 1) side by side in one run:
# plait from C (plait-bench latency) and from plait.torch (torch_bench.py
# --only l), Open MPI's MPI_Allreduce from C (bench/mpi_allreduce.c --latency)
# and from Python (mpi4py in the torch venv, bench/mpi4py_bench.py: the
# Python binding beside plait.torch, as issue 37's own table measured Open MPI),
# at 2 and 3 ranks, interleaved rounds; then, once per rank count, the ofi plugin
# alone (bench_transport), plait at 1 rank (no control plane, no peer) and
# the timelines' breakdown (bench/latency_breakdown.py). plait runs twice in
# each round, with the cached epoch off (PLAIT_CACHED_EPOCH=0: the first
# table) and on (PLAIT_CACHED_EPOCH=1, the default: the second table, "epoch"
# rows, which bench/goal_table.py judges).
#
#   bench/latency_vs_mpi.sh [BUILD_DIR] [ROUNDS] > bench/results/latency-vs-mpi.txt
#
# plait runs over ofi/shm (PLAIT_TRANSPORT=ofi FI_PROVIDER=shm); the torch
# venv is ~/.cache/plait/venvs/torch2 (PLAIT_TORCH_PYTHON overrides it).
set -euo pipefail
build="${1:-build}"
rounds="${2:-3}"
iters=2000
py="${PLAIT_TORCH_PYTHON:-$HOME/.cache/plait/venvs/torch2/bin/python}"
source bench/vs_mpi_lib.sh
export PLAIT_TRANSPORT=ofi FI_PROVIDER=shm
plait_c() { timeout 300 "$build/bin/plaitrun" -np "$1" "$build/bin/plait-bench" latency \
  --iters "$iters" "${@:2}" 2>&1 | tail -1; }
mpi() { mpirun_ "$1" "$tmp/mpi_allreduce" --latency --iters "$iters" 2>&1 | tail -1; }
mpi4py() { mpi4py_median "$1" us --workloads latency --iters "$iters"; }
torch() {
  rm -f "$tmp/torch.jsonl"
  PLAIT_LIBRARY="$PWD/$build/lib/libplait.so" PYTHONPATH="$PWD/bindings/python" \
    timeout 300 "$py" bench/torch_bench.py --python "$py" --np "$1" --rounds 1 --only l \
    --plait-only --lone-iters "$iters" --json "$tmp/torch.jsonl" >/dev/null 2>&1
  "$py" -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d.get("workload") == "latency-4K": print("%.1f" % (d["median_s"] * 1e6))' "$tmp/torch.jsonl"
}
vs_mpi_head "PLAIT_CALLER_RUNS=${PLAIT_CALLER_RUNS:-auto (unset: the default)}"
echo "# median us per operation (slowest rank); plait-bench columns: size iters median p10 p90"
echo "# cycles negot(us) transp(us) ctl-msgs check (rank 0's plait_stats per operation)"
for r in $(seq 1 "$rounds"); do
  for n in 2 3; do
    echo "round $r ranks $n plait-c: $(PLAIT_CACHED_EPOCH=0 plait_c "$n")"
    echo "round $r ranks $n plait-c-epoch: $(PLAIT_CACHED_EPOCH=1 plait_c "$n")"
    echo "round $r ranks $n openmpi: $(mpi "$n")"
    echo "round $r ranks $n openmpi-mpi4py: $(mpi4py "$n")"
    echo "round $r ranks $n plait.torch: $(PLAIT_CACHED_EPOCH=0 torch "$n")"
    echo "round $r ranks $n plait.torch-epoch: $(PLAIT_CACHED_EPOCH=1 torch "$n")"
  done
done | tee "$tmp/rounds"
for n in 2 3; do
  echo "ranks $n ofi plugin alone:"
  timeout 300 "$build/bin/bench_transport" -r 3 -n "$n" -s 4K:4K shm=ofi,FI_PROVIDER=shm 2>&1 \
    | grep '^| 4 KiB'
  PLAIT_TIMELINE="$tmp/tl.%r.json" plait_c "$n" >/dev/null
  echo "ranks $n timeline breakdown (the timeline's own cost included):"
  python3 bench/latency_breakdown.py $(for i in $(seq 0 $((n - 1))); do echo "$tmp/tl.$i.json"; done)
done
echo "ranks 1 plait-c (no peer, no control plane): $(plait_c 1)"
echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# medians over the rounds, us per operation; ratio: to Open MPI's in the same rounds"
python3 - "$tmp/rounds" <<'PY'
import re, statistics, sys
v = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ ranks (\d+) (\S+): (.*)", line)
    if not m or m.group(3).startswith("-"):  # "- (why it did not run)"
        continue
    nums = re.findall(r"\d+(?:\.\d+)?", m.group(3).split("KiB")[-1])
    # plait-bench: iters then median; mpi_allreduce: bytes, iters, median; torch: median
    idx = {"plait-c": 1, "plait-c-epoch": 1, "openmpi": 2, "plait.torch": 0,
           "plait.torch-epoch": 0, "openmpi-mpi4py": 0}[m.group(2)]
    if len(nums) > idx:
        v.setdefault((int(m.group(1)), m.group(2)), []).append(float(nums[idx]))
def table(suffix, label):
    print("| ranks%s | plait C | plait.torch | Open MPI | C / MPI | torch / MPI "
          "| Open MPI (mpi4py) | torch / mpi4py |" % label)
    print("|---|---|---|---|---|---|---|---|")
    for n in (2, 3):
        keys = ("plait-c" + suffix, "plait.torch" + suffix, "openmpi", "openmpi-mpi4py")
        med = {k: statistics.median(v[(n, k)]) for k in keys if v.get((n, k))}
        cell = lambda k: "%.1f" % med[k] if k in med else "-"
        ratio = lambda k, ref: "%.1fx" % (med[k] / med[ref]) if k in med and med.get(ref) else "-"
        # the epoch's rows read "2 epoch": bench/goal_table.py takes them
        # (the default) where a file has them, else the plain rows
        print("| %d%s | %s | %s | %s | %s | %s | %s | %s |" % (
            n, suffix and " epoch", cell(keys[0]), cell(keys[1]), cell("openmpi"),
            ratio(keys[0], "openmpi"), ratio(keys[1], "openmpi"), cell("openmpi-mpi4py"),
            ratio(keys[1], "openmpi-mpi4py")))
table("", "")
print()
print("# the same rounds with PLAIT_CACHED_EPOCH=1")
table("-epoch", ", epoch on")
PY
