#!/usr/bin/env bash
# The launcher benchmark's Ray row (bench/launchers/run.sh): step.py's main()
# inside plait.ray.RayExecutor.run on NP workers (default 2) of a one-node
# Ray cluster started here for the run (tests/bindings/ray/cluster.py: its own
# temp dir and ports, stopped at the end). Prints one JSON line:
# {"engine": "ray", "hosts": 1, "ranks": NP, "startup_s": S,
# "step_ms_median": M}; startup_s runs from just before RayExecutor.start() to
# plait.init done on rank 0 (the Ray cluster's own start is left out and
# printed to stderr). Exits 77 (with the reason) when it cannot run here.
#   bench/launchers/ray.sh BUILD_DIR PYTHON [NP]
# PYTHON without Ray: the ray venv of ci/lib/ray.sh is used (made if needed).
# Ray gives an actor OMP_NUM_THREADS=its CPUs (1), where plaitrun's ranks
# get torch's default (every core): an OMP_NUM_THREADS set by the caller is
# passed to the workers, so `OMP_NUM_THREADS=1 bench/launchers/run.sh ...`
# runs both rows with the same threads and only the launcher differs.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,12p "$0"; exit 2; }
BUILD=$(realpath "$1") PY=$2 NP=${3:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
if ! "$PY" -c 'import ray, torch' 2>/dev/null; then
  source "$ROOT/ci/lib/ray.sh"
  PY=$(plait_ray_python) || { echo "no Python with Ray and torch (ci/lib/ray.sh failed)" >&2; exit 77; }
fi
export PLAIT_LIBRARY="$BUILD/lib/libplait.so" PLAIT_PLUGIN_PATH="$BUILD/lib"
export PYTHONPATH="$ROOT/bindings/python:$HERE${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" - "$NP" "$ROOT/tests/bindings/ray" <<'PY'
import json, os, sys, time
np_, helpers = int(sys.argv[1]), sys.argv[2]
sys.path.insert(0, helpers)
from cluster import Cluster
import ray
import step
from plait.ray import RayExecutor

t = time.time()
with Cluster(nodes=1, cpus=np_) as cluster:
    print("ray.sh: the Ray cluster started in %.1f s" % (time.time() - t), file=sys.stderr)
    ray.init(address=cluster.address, logging_level="error", log_to_driver=False)
    ex = RayExecutor(RayExecutor.create_settings(timeout_s=120, verbose=0), num_workers=np_)
    t0 = time.time()
    threads = os.environ.get("OMP_NUM_THREADS")
    ex.start(extra_env_vars={"OMP_NUM_THREADS": threads} if threads else None)
    try:
        rec = ex.run(step.main)[0]
    finally:
        ex.shutdown()
    print(json.dumps({"engine": "ray", "hosts": 1, "ranks": np_,
                      "startup_s": round(rec["init_done"] - t0, 3),
                      "step_ms_median": round(rec["step_ms_median"], 3)}), flush=True)
PY
