"""A real Spark cluster on this machine for the plait.spark tests:
local-cluster[2,1,1024] (a master and two workers inside the driver's JVM,
two executor JVMs of one core each), with the workers' Python = this
interpreter. Needs pyspark and Java 17+ (ci/lib/spark.sh)."""
import os
import subprocess
import sys


def environment():
    """SPARK_HOME (the pyspark package: its jars/ and bin/) and
    PYSPARK_PYTHON for executors launched by the local cluster's workers."""
    import pyspark
    os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def start(app="plait-spark-test"):
    environment()
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName(app)
             .config("spark.executor.memory", "512m")
             .config("spark.driver.memory", "512m")
             .config("spark.ui.enabled", "false")
             .config("spark.default.parallelism", "2")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def executor_pids(sc):
    """Pids of this application's executor JVMs."""
    app = sc.applicationId
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines()
            if "CoarseGrainedExecutorBackend" in line and app in line]


def ancestors(pid):
    """pid's ancestors, nearest first."""
    chain = []
    while pid > 1:
        try:
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
        chain.append(pid)
    return chain


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
