#!/usr/bin/env bash
# The launcher benchmark's Spark row (bench/launchers/run.sh): step.py's
# main() on NP ranks (default 2) started by plait.spark.run in a real
# local-cluster[2,1,1024] (two executor JVMs of one core each). Prints one
# JSON line: {"engine": "spark", "hosts": 1, "ranks": NP, "startup_s": S,
# "step_ms_median": M}; startup_s runs from just before plait.spark.run
# (SparkContext and executors already up: their start is excluded, and
# printed to stderr) to plait.init done on rank 0. Exits 77 (with the reason)
# when there is no Spark venv (ci/lib/spark.sh) or Java.
#   bench/launchers/spark.sh BUILD_DIR PYTHON [NP]
# PYTHON is not used: Spark's workers run the Spark venv's python
# ($PLAIT_SPARK_PYTHON, default $PLAIT_CI_VENV_DIR/spark/bin/python), which
# sees the same Debian torch as /usr/bin/python3.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,13p "$0"; exit 2; }
BUILD=$(realpath "$1") NP=${3:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENVS=${PLAIT_CI_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plait/venvs}
SPY=${PLAIT_SPARK_PYTHON:-$VENVS/spark/bin/python}
if [ ! -x "$SPY" ] || ! "$SPY" -c 'import pyspark, torch' 2>/dev/null; then
  echo "spark: no Spark venv at $SPY (ci/lib/spark.sh makes it)" >&2; exit 77
fi
if ! command -v java >/dev/null && [ ! -x "${JAVA_HOME:-/nonexistent}/bin/java" ]; then
  echo "spark: no Java (openjdk-17-jre-headless)" >&2; exit 77
fi
export PLAIT_LIBRARY="$BUILD/lib/libplait.so" PLAIT_PLUGIN_PATH="$BUILD/lib"
export PYTHONPATH="$ROOT/bindings/python:$HERE:$ROOT/tests/bindings/spark${PYTHONPATH:+:$PYTHONPATH}"
export SPARK_HOME="$("$SPY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
export PYSPARK_PYTHON="$SPY" PYSPARK_DRIVER_PYTHON="$SPY" OMP_NUM_THREADS=1
exec "$SPY" - "$NP" <<'PY'
import json, sys, time
import plait.spark
from plait.spark.runner import task_slots
import spark_cluster
import step

np_ = int(sys.argv[1])
t_ctx = time.time()
spark = spark_cluster.start("plait-bench-launchers")
sc = spark.sparkContext
while task_slots(sc) < np_ and time.time() - t_ctx < 120:
    time.sleep(0.1)
t0 = time.time()
print("spark: SparkContext and %d executor slots up in %.1f s (excluded)"
      % (task_slots(sc), t0 - t_ctx), file=sys.stderr)
try:
    rec = plait.spark.run(step.main, num_proc=np_, start_timeout=120, verbose=0,
                          stdout=sys.stderr)[0]
finally:
    spark.stop()
print("spark: startup %.3f s (plait.spark.run -> init done on rank 0)"
      % (rec["init_done"] - t0), file=sys.stderr)
print(json.dumps({"engine": "spark", "hosts": 1, "ranks": np_,
                  "startup_s": round(rec["init_done"] - t0, 3),
                  "step_ms_median": round(rec["step_ms_median"], 3)}))
PY
