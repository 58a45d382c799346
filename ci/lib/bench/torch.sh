#!/usr/bin/env bash
# plait.torch against torch.distributed (Gloo) and DDP, side by side in one
# run per interpreter (bench/torch_bench.py, 2 ranks on this machine):
# (a) 200 x 64 KiB float32 allreduces, plait fused vs torch per tensor,
# blocking and async; (b) one 64 MiB allreduce; (c) a training step of a
# 10.5M-parameter MLP, plait DistributedOptimizer vs DDP vs one process.
# Rounds are interleaved; the table gives medians and ratios.
#
#   ci/bench-torch [PYTHON ...] [-- torch_bench.py options]
#     PYTHON: interpreters to run it with, one run each (chooses the torch);
#             default /usr/bin/python3 (Debian's python3-torch)
#   e.g. ci/bench-torch /usr/bin/python3 ~/venv-torch2/bin/python -- --rounds 7
set -euo pipefail
cd "$(dirname "$0")/.."
pythons=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do pythons+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ ${#pythons[@]} -eq 0 ] && pythons=(/usr/bin/python3)
source ci/lib/deps.sh
plait_ensure_packages python3-torch python3-numpy libopenblas0-pthread
cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLAIT_BUILD_TESTS=OFF >/dev/null
# Quiet unless the build fails; then its output says why.
if ! log="$(cmake --build build/bench 2>&1)"; then
  printf '%s\n' "$log" >&2
  echo "ci/bench-torch: the build failed (above)" >&2
  exit 1
fi
export PLAIT_LIBRARY="$PWD/build/bench/lib/libplait.so"
export PYTHONPATH="$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
for py in "${pythons[@]}"; do
  echo "== bench/torch_bench.py --python $py $*"
  /usr/bin/python3 bench/torch_bench.py --python "$py" "$@"
done
