#!/usr/bin/env bash
# The launcher benchmark's Slurm rows (bench/launchers/run.sh): the step of
# step.py on 2 ranks started by `srun -n2` on a private one-node Slurm cluster
# (ci/lib/slurm.sh starts it; its start-up is not counted), and, where
# network-namespace hosts can be made, by `srun -N2 -n4` on two hosts (2 x 2
# ranks). Prints one JSON line per row: {"engine": "slurm", "hosts": H,
# "ranks": N, "startup_s": S, "step_ms_median": M}, startup_s from just before
# srun to plait.init's return on rank 0; exits 77 (with the reason) when it
# cannot run here (not root, no Slurm).
#   bench/launchers/slurm.sh BUILD_DIR PYTHON
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,11p "$0"; exit 2; }
BUILD=$(realpath "$1") PY=$2
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=ci/lib/slurm.sh
. "$ROOT/ci/lib/slurm.sh"
why="$( (slurm_require) 2>&1)" || { echo "${why##*$'\n'}" >&2; exit 77; }
"$PY" -c 'import torch' 2>/dev/null || { echo "SKIP: $PY cannot import torch" >&2; exit 77; }
export PLAIT_LIBRARY="$BUILD/lib/libplait.so" PLAIT_PLUGIN_PATH="$BUILD/lib"
export PYTHONPATH="$ROOT/bindings/python" PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
unset PLAIT_RENDEZVOUS PLAIT_RANK PLAIT_SIZE
export PLAIT_SECRET
PLAIT_SECRET="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"

row() { # hosts ranks t0 output
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, sys
hosts, ranks, t0, path = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rec = next(json.loads(l) for l in open(path) if '"launcher_step"' in l)
print(json.dumps({"engine": "slurm", "hosts": hosts, "ranks": ranks,
                  "startup_s": round(rec["init_done"] - t0, 3),
                  "step_ms_median": round(rec["step_ms_median"], 3)}))
PY
}

out=$(mktemp -d /tmp/plait-slurm-bench-XXXXXX)
trap 'slurm_stop >/dev/null 2>&1; rm -rf "$out"' EXIT
slurm_start_one >&2
t0=$(python3 -c 'import time; print(time.time())')
timeout 300 srun -n2 "$PY" "$HERE/step.py" >"$out/one" 2>"$out/one.err" ||
  { tail -n 5 "$out/one.err" >&2; exit 1; }
row 1 2 "$t0" "$out/one"
slurm_stop >/dev/null 2>&1

# two hosts, 2 ranks each (skipped without network namespaces)
[ -x "$ROOT/tests/tools/hosts/lib.sh" ] || [ -f "$ROOT/tests/tools/hosts/lib.sh" ] || exit 0
(
  # shellcheck source=tests/tools/hosts/lib.sh
  . "$ROOT/tests/tools/hosts/lib.sh"
  (hosts_require) >/dev/null || exit 0
  hosts_make 2
  trap 'slurm_stop >/dev/null 2>&1; hosts_cleanup' EXIT
  slurm_start_two >&2
  t0=$(python3 -c 'import time; print(time.time())')
  on_host 1 timeout 300 env SLURM_CONF="$SLURM_CONF" srun -N2 -n4 "$PY" "$HERE/step.py" \
    >"$out/two" 2>"$out/two.err" || { tail -n 5 "$out/two.err" >&2; exit 1; }
  row 2 4 "$t0" "$out/two"
)
