#!/usr/bin/env bash
# 200 x 64 KiB per step (issue 37, goal 2) side by side in one run:
# plait.torch (bench/horovod_bench.py --impl plait --workloads fused, the
# script Horovod runs: allreduce_async_ of all, then synchronize of all),
# Open MPI's nonblocking allreduces from C (bench/mpi_allreduce.c --many:
# MPI_Iallreduce of each, then MPI_Waitall) and from Python (mpi4py in the
# torch venv, bench/mpi4py_bench.py --workloads small: the binding beside
# plait.torch, as issue 37's own table measured Open MPI), at 2 and 3 ranks,
# in interleaved rounds (the order rotates each round); medians of the
# rounds' medians, and how far apart a system's rounds came.
#
#   bench/small_vs_mpi.sh [BUILD_DIR] [ROUNDS] > bench/results/small-vs-mpi.txt
#
# plait runs over ofi/shm (PLAIT_TRANSPORT=ofi FI_PROVIDER=shm, what auto picks
# on one host) with its defaults; the torch venv is ~/.cache/plait/venvs/torch2
# (PLAIT_TORCH_PYTHON overrides it). bench/goal_table.py judges goal 2 from the
# latest small-vs-mpi[-N].txt: plait.torch at least 1.5x as fast as Open MPI
# from Python, with Open MPI from C beside it.
set -euo pipefail
build="${1:-build}"
rounds="${2:-5}"
steps=20
py="${PLAIT_TORCH_PYTHON:-$HOME/.cache/plait/venvs/torch2/bin/python}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "small_vs_mpi.sh: ROUNDS '$rounds' is not a count" >&2; exit 2; }
source bench/vs_mpi_lib.sh
# Each prints the step's median in ms, or "- (why)" when it did not run.
plait_torch() {
  local line
  line="$(PLAIT_TRANSPORT=ofi FI_PROVIDER=shm PLAIT_LIBRARY="$PWD/$build/lib/libplait.so" \
    PLAIT_PLUGIN_PATH="$PWD/$build/lib" PYTHONPATH="$PWD/bindings/python" \
    timeout 300 "$build/bin/plaitrun" -np "$1" --no-prefix "$py" bench/horovod_bench.py \
    --impl plait --workloads fused --steps "$steps" 2>&1 | grep -m1 '^fused ' || true)"
  case "$line" in
    *"median "*) sed 's/.*median \([0-9.]*\) ms.*/\1/' <<<"$line" ;;
    *) echo "- (horovod_bench.py did not print its step)" ;;
  esac
}
openmpi() {
  local line
  line="$(mpirun_ "$1" "$tmp/mpi_allreduce" --min 4K --max 4K --many 200x65536 \
    --steps "$steps" 2>&1 | grep -m1 '^openmpi-nonblocking:' || true)"
  case "$line" in
    *" ms") sed 's/.*: \([0-9.]*\) ms$/\1/' <<<"$line" ;;
    *) echo "- (mpi_allreduce did not print its step)" ;;
  esac
}
mpi4py() { mpi4py_median "$1" ms --workloads small --steps "$steps"; }
systems=(plait.torch openmpi openmpi-mpi4py)
run() {
  case "$1" in
    plait.torch) plait_torch "$2" ;;
    openmpi) openmpi "$2" ;;
    openmpi-mpi4py) mpi4py "$2" ;;
  esac
}
vs_mpi_head "200 x 64 KiB float32 sums per step, $steps steps per launch"
echo "# ms per step: plait.torch and mpi4py the slowest rank's per step (median),"
echo "# mpi_allreduce the same after a barrier per step"
for r in $(seq 1 "$rounds"); do
  for n in 2 3; do
    k=$(( (r - 1) % ${#systems[@]} ))
    for s in "${systems[@]:k}" "${systems[@]:0:k}"; do
      echo "round $r ranks $n $s: $(run "$s" "$n")"
    done
  done
done | tee "$tmp/rounds"
echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# medians over the rounds, ms per step (lowest-highest round); as fast: the MPI's time / plait.torch's"
python3 - "$tmp/rounds" <<'PY'
import re, statistics, sys
v = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \d+ ranks (\d+) (\S+): ([\d.]+)$", line.strip())
    if m:
        v.setdefault((int(m.group(1)), m.group(2)), []).append(float(m.group(3)))
print("| ranks | plait.torch | Open MPI (C) | Open MPI (mpi4py) | vs C: as fast | vs mpi4py: as fast |")
print("|---|---|---|---|---|---|")
for n in (2, 3):
    med = {k: statistics.median(v[(n, k)]) for k in ("plait.torch", "openmpi", "openmpi-mpi4py")
           if v.get((n, k))}
    cell = lambda k: ("%.2f (%.2f-%.2f)" % (med[k], min(v[(n, k)]), max(v[(n, k)]))
                      if k in med else "-")
    fast = lambda k: ("%.2fx" % (med[k] / med["plait.torch"])
                      if k in med and "plait.torch" in med else "-")
    print("| %d | %s | %s | %s | %s | %s |" % (n, cell("plait.torch"), cell("openmpi"),
          cell("openmpi-mpi4py"), fast("openmpi"), fast("openmpi-mpi4py")))
PY
