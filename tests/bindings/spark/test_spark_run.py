"""plait.spark.run against a real Spark cluster (local-cluster[2,1,1024]:
two executor JVMs): results in rank order, allreduce/broadcast across the
ranks, bad input refused by name, and a killed executor failing the job with
the lost rank named within PLAIT_TIMEOUT_S + 5 s, leaving no process behind.
One SparkContext for the file (a JVM start costs many seconds); the test
that kills an executor runs last."""
import os
import signal
import tempfile
import threading
import time

import pytest

import plait.spark
import spark_cluster


def test_no_spark_context_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no active SparkContext"):
        plait.spark.run(lambda: 0, num_proc=2)


def test_use_mpi_is_refused():
    with pytest.raises(ValueError, match="plait has no MPI mode"):
        plait.spark.run(lambda: 0, num_proc=2, use_mpi=True)


def test_run_elastic_bad_arguments_are_named():
    # checked before Spark is asked anything (elastic_scenarios.py runs the real jobs)
    run_elastic = plait.spark.run_elastic
    with pytest.raises(ValueError, match="min_num_proc=1 and min_np=2"):
        run_elastic(lambda: 0, min_num_proc=1, min_np=2)
    with pytest.raises(ValueError, match="max_num_proc must be an integer of at least 1"):
        run_elastic(lambda: 0, max_num_proc=0)
    with pytest.raises(ValueError, match="min_num_proc=3 is above max_num_proc=2"):
        run_elastic(lambda: 0, min_num_proc=3, max_num_proc=2)
    with pytest.raises(ValueError, match="reset_limit"):
        run_elastic(lambda: 0, reset_limit=-1)
    with pytest.raises(TypeError, match="fn must be callable"):
        run_elastic(3)


@pytest.fixture(scope="module")
def sc():
    spark = spark_cluster.start()
    yield spark.sparkContext
    spark.stop()


def _allreduce_fn(scale):
    import torch
    import plait.torch as hvd
    hvd.init()
    t = torch.tensor([float(hvd.rank() + 1)] * 4) * scale
    total = hvd.allreduce(t, op=hvd.Sum, name="sum")
    b = hvd.broadcast(torch.tensor([float(hvd.rank()) + 7.0]), root_rank=1, name="b")
    print("rank %d says hello" % hvd.rank())
    return (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(),
            total.tolist(), b.item(), os.environ["PLAIT_SPARK_TEST_VAR"])


def test_allreduce_and_broadcast_in_rank_order(sc, capsys):
    env = {"PLAIT_SPARK_TEST_VAR": "yes", "PLAIT_TRANSPORT": "gloo",
           "PLAIT_LIBRARY": os.environ["PLAIT_LIBRARY"],
           "PLAIT_PLUGIN_PATH": os.environ["PLAIT_PLUGIN_PATH"]}
    results = plait.spark.run(_allreduce_fn, args=(2.0,), num_proc=2, env=env,
                              start_timeout=60)
    assert results == [(0, 2, 0, 2, [6.0] * 4, 8.0, "yes"),
                       (1, 2, 1, 2, [6.0] * 4, 8.0, "yes")]
    out = capsys.readouterr().out
    assert "[0]:rank 0 says hello" in out and "[1]:rank 1 says hello" in out


def test_num_proc_defaults_to_default_parallelism(sc):
    results = plait.spark.run(lambda: os.environ["PLAIT_SIZE"], start_timeout=60)
    assert results == ["2", "2"]


def test_too_many_processes_fail_within_start_timeout(sc):
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"num_proc=3 needs 3 task slots.*offers 2"):
        plait.spark.run(lambda: 0, num_proc=3, start_timeout=3)
    assert time.monotonic() - start < 3 + 10


def test_a_failing_rank_is_named(sc):
    def fn():
        if os.environ["PLAIT_RANK"] == "1":
            raise ValueError("rank one gives up")
        return 0
    with pytest.raises(plait.spark.runner.SparkJobError, match="rank one gives up") as e:
        plait.spark.run(fn, num_proc=2, start_timeout=60)
    assert e.value.rank == 1


def _long_fn(folder):
    import torch
    import plait.torch as hvd
    hvd.init()
    with open(os.path.join(folder, "rank%d" % hvd.rank()), "w") as f:
        f.write(str(os.getpid()))
    t = torch.ones(4)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        hvd.allreduce(t, name="loop")
        time.sleep(0.05)
    return "not killed"


def test_killed_executor_fails_the_job_naming_the_lost_rank(sc):
    timeout_s = 5
    folder = tempfile.mkdtemp(prefix="plait-spark-kill-")
    box = {}

    def job():
        try:
            box["results"] = plait.spark.run(_long_fn, args=(folder,), num_proc=2,
                                             start_timeout=60,
                                             env={**_plait_env(), "PLAIT_TIMEOUT_S": str(timeout_s)})
        except Exception as e:  # noqa: BLE001
            box["error"] = e
            box["at"] = time.monotonic()

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    pids = {}
    deadline = time.monotonic() + 90
    while len(pids) < 2 and time.monotonic() < deadline:
        for r in (0, 1):
            path = os.path.join(folder, "rank%d" % r)
            if os.path.exists(path) and open(path).read():
                pids[r] = int(open(path).read())
        time.sleep(0.2)
    assert len(pids) == 2, "the ranks did not start within 90 s"
    time.sleep(1.0)  # a few allreduces in
    executors = spark_cluster.executor_pids(sc)
    victim = [p for p in spark_cluster.ancestors(pids[1]) if p in executors]
    assert victim, "rank 1's executor JVM not found among %s" % executors
    os.kill(victim[0], signal.SIGKILL)
    killed_at = time.monotonic()
    thread.join(timeout_s + 5 + 30)
    assert "error" in box, "plait.spark.run did not fail: %r" % box.get("results")
    elapsed = box["at"] - killed_at
    assert elapsed < timeout_s + 5, "failed after %.1f s" % elapsed
    assert box["error"].rank == 1, str(box["error"])
    assert "rank 1 of 2 was lost with its executor" in str(box["error"]), str(box["error"])
    deadline = time.monotonic() + 15
    while any(spark_cluster.alive(p) for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(spark_cluster.alive(p) for p in pids.values()), \
        "orphan rank processes: %s" % [p for p in pids.values() if spark_cluster.alive(p)]


def _plait_env():
    return {k: v for k, v in os.environ.items()
            if k.startswith("PLAIT_") and k not in ("PLAIT_RANK", "PLAIT_SIZE")}
