#!/usr/bin/env bash
# The launcher benchmark's Spark row (bench/launchers/run.sh): step.py's
# main() on NP ranks (default 2) started by plait.spark.run in a real
# local-cluster[2,1,1024] (two executor JVMs of one core each). Prints one
# JSON line: {"engine": "spark", "hosts": 1, "ranks": NP, "startup_s": S,
# "step_ms_median": M}; startup_s runs from just before plait.spark.run
# (SparkContext and executors already up: their start is excluded, and
# printed to stderr) to plait.init done on rank 0. Exits 77 (with the reason)
# when there is no Spark venv (ci/lib/spark.sh) or Java.
# As root with network namespaces (tests/tools/hosts/lib.sh), it prints a
# second line, "hosts": 2, "ranks": 4: a Spark standalone cluster on the
# namespace hosts h1, h2 (the master and the driver on h1, one worker of 2
# cores on each host, its executor JVM there) and plait.spark.run(num_proc=4),
# 2 barrier tasks per host. Without root that line is left out (stderr says why).
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
# The driver: NP [MASTER_URL HOSTS] -> one JSON line
driver="$(mktemp /tmp/plait-spark-bench-XXXXXX.py)"
trap 'rm -f "$driver"' EXIT
cat >"$driver" <<'PY'
import json, sys, time
import plait.spark
from plait.spark.runner import task_slots
import spark_cluster
import step

np_ = int(sys.argv[1])
hosts = int(sys.argv[3]) if len(sys.argv) > 3 else 1
t_ctx = time.time()
if len(sys.argv) > 2:  # a standalone cluster's master (the 2-host row)
    from pyspark.sql import SparkSession
    spark_cluster.environment()
    spark = (SparkSession.builder.master(sys.argv[2]).appName("plait-bench-launchers-2h")
             .config("spark.driver.host", "10.77.0.1").config("spark.driver.bindAddress", "10.77.0.1")
             .config("spark.executor.cores", "2").config("spark.cores.max", str(np_))
             .config("spark.executor.memory", "512m").config("spark.driver.memory", "512m")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
else:
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
print(json.dumps({"engine": "spark", "hosts": hosts, "ranks": np_,
                  "startup_s": round(rec["init_done"] - t0, 3),
                  "step_ms_median": round(rec["step_ms_median"], 3)}))
PY
"$SPY" "$driver" "$NP"

# The 2-host row: a standalone master and a worker per namespace host.
[ -f "$ROOT/tests/tools/hosts/lib.sh" ] || exit 0
(
  . "$ROOT/tests/tools/hosts/lib.sh"
  why="$( (hosts_require) 2>&1)" || { echo "spark: no 2-host row: ${why##*$'\n'}" >&2; exit 0; }
  hosts_make 2
  for n in 1 2; do
    mkdir -p "/etc/netns/plait-$id-h$n"
    printf '127.0.0.1 localhost\n10.77.0.1 h1\n10.77.0.2 h2\n' >"/etc/netns/plait-$id-h$n/hosts"
  done
  hosts_cleanup_hook() { rm -rf "/etc/netns/plait-$id-h1" "/etc/netns/plait-$id-h2" "$driver"; }
  cls="$SPARK_HOME/bin/spark-class"
  SPARK_LOCAL_IP=10.77.0.1 on_host 1 "$cls" org.apache.spark.deploy.master.Master \
    --host 10.77.0.1 --port 7077 --webui-port 18080 >"$tmp/master.log" 2>&1 &
  pids+=($!)
  for n in 1 2; do
    SPARK_LOCAL_IP=10.77.0.$n SPARK_WORKER_DIR="$tmp/work$n" on_host $n "$cls" \
      org.apache.spark.deploy.worker.Worker --host 10.77.0.$n --cores 2 --memory 1g \
      --webui-port 18081 spark://10.77.0.1:7077 >"$tmp/worker$n.log" 2>&1 &
    pids+=($!)
  done
  SPARK_LOCAL_IP=10.77.0.1 on_host 1 "$SPY" "$driver" 4 spark://10.77.0.1:7077 2 ||
    { tail -n 5 "$tmp"/*.log >&2; exit 1; }
)
