"""plait.spark.run: horovod.spark.run 0.28.1's API on plait (docs/spark.md).

The driver side: checks the arguments and the cluster's task slots, makes the
job's secret, runs one barrier task per rank (plait.spark.task) and returns
fn's results in rank order. A failed rank fails the Spark job at once
(Spark does not retry a barrier result stage), and the error names the rank.
"""
import os
import re
import secrets
import sys
import threading
import time
import uuid

import cloudpickle

from plait.spark import task as _task

DEFAULT_START_TIMEOUT_S = 600  # horovod.spark's default
_POLL_S = 0.5


class SparkJobError(RuntimeError):
    """The plait job run by plait.spark.run failed; .rank is the failed rank
    when Spark names one (None otherwise)."""

    def __init__(self, message, rank=None):
        super().__init__(message)
        self.rank = rank


def _spark_context():
    try:
        from pyspark import SparkContext
    except ImportError as e:
        raise ImportError("plait.spark needs pyspark (pip install pyspark): %s" % e) from None
    sc = SparkContext._active_spark_context
    if sc is None:
        raise RuntimeError(
            "plait.spark.run: no active SparkContext: start one first "
            "(SparkSession.builder.getOrCreate(), or run inside pyspark/spark-submit); "
            "a Spark Connect session has no SparkContext and cannot run barrier tasks")
    return sc


def _start_timeout(start_timeout):
    if start_timeout is None:
        start_timeout = float(os.environ.get("PLAIT_SPARK_START_TIMEOUT",
                                             os.environ.get("HOROVOD_SPARK_START_TIMEOUT",
                                                            DEFAULT_START_TIMEOUT_S)))
    if start_timeout <= 0:
        raise ValueError("plait.spark.run: start_timeout must be > 0, got %r" % start_timeout)
    return start_timeout


def _check_args(num_proc, use_mpi, extra_mpi_args, env, fn):
    if use_mpi:
        raise ValueError(
            "plait.spark.run: use_mpi=True: plait has no MPI mode; its ranks meet through "
            "plait's own control plane (use_gloo=True or the default)")
    if extra_mpi_args:
        raise ValueError("plait.spark.run: extra_mpi_args=%r: plait has no MPI mode; "
                         "set plait's options through env= (PLAIT_* variables)" % (extra_mpi_args,))
    if not callable(fn):
        raise TypeError("plait.spark.run: fn must be callable, got %r" % (fn,))
    if num_proc is not None and (not isinstance(num_proc, int) or num_proc < 1):
        raise ValueError("plait.spark.run: num_proc must be a positive int, got %r" % (num_proc,))
    if env is not None and not isinstance(env, dict):
        raise TypeError("plait.spark.run: env must be a dict, got %r" % (type(env).__name__,))


def task_slots(sc):
    """How many tasks the cluster can run at once now (what Spark's barrier
    check compares with: executors' cores / spark.task.cpus)."""
    jsc = sc._jsc.sc()
    profile = jsc.resourceProfileManager().defaultResourceProfile()
    return int(jsc.maxNumConcurrentTasks(profile))


def _wait_for_slots(sc, num_proc, start_timeout):
    deadline = time.monotonic() + start_timeout
    while True:
        slots = task_slots(sc)
        if slots >= num_proc:
            return
        if time.monotonic() >= deadline:
            raise SparkJobError(
                "plait.spark.run: num_proc=%d needs %d task slots at once (barrier mode); "
                "the cluster offers %d after waiting start_timeout=%gs (executors' cores / "
                "spark.task.cpus): lower num_proc or add executors"
                % (num_proc, num_proc, slots, start_timeout))
        time.sleep(_POLL_S)


def _forwarded_env(env):
    """env=None: the driver's PLAIT_* and HOROVOD_* settings (not its layout
    or secret); a dict: exactly that (str values)."""
    if env is None:
        env = {k: v for k, v in os.environ.items()
               if k.startswith(("PLAIT_", "HOROVOD_")) and k not in _task.LAYOUT_VARS}
    return {str(k): str(v) for k, v in env.items()}


def _driver_version():
    """The driver's plait version when its library loads here, else None (a
    driver without libplait checks nothing)."""
    try:
        import plait
        return plait.__version__
    except Exception:  # noqa: BLE001 (no library on the driver)
        return None


_LOST_TASK = re.compile(r"ResultTask\(\d+, (\d+)\)")


def _failure(exc, num_proc):
    """Names the failed rank in Spark's error (the partition of the task that
    failed first is the rank)."""
    text = str(exc)
    m = _LOST_TASK.search(text)
    rank = int(m.group(1)) if m else None
    lost = "ExecutorLostFailure" in text
    what = ("rank %d of %d failed" % (rank, num_proc)) if rank is not None else "a rank failed"
    if lost and rank is not None:
        what = "rank %d of %d was lost with its executor" % (rank, num_proc)
    detail = text.strip().splitlines()
    detail = "\n".join(detail[:40])
    return SparkJobError("plait.spark.run: %s; the job was stopped (not re-run). "
                         "Spark said:\n%s" % (what, detail), rank)


def _emit(records, stdout, stderr, prefix_ts):
    for rank, _result, out, err in records:
        for text, stream in ((out, stdout), (err, stderr)):
            if not text:
                continue
            for line in text.splitlines():
                stamp = time.strftime("%a %b %d %H:%M:%S %Y") + " " if prefix_ts else ""
                stream.write("%s[%d]:%s\n" % (stamp, rank, line))
            stream.flush()


def _run_job(sc, rdd_fn, num_proc, group, box):
    try:
        sc.setJobGroup(group, "plait.spark.run: %d ranks" % num_proc, interruptOnCancel=True)
        rdd = sc.parallelize(range(num_proc), num_proc)
        box["records"] = rdd.barrier().mapPartitions(rdd_fn).collect()
    except BaseException as e:  # noqa: BLE001 (handed to the calling thread)
        box["error"] = e


def _started_tasks(sc, group):
    tracker = sc.statusTracker()
    active = 0
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in (info.stageIds if info else []):
            sinfo = tracker.getStageInfo(stage)
            if sinfo:
                active += sinfo.numActiveTasks + sinfo.numCompletedTasks + sinfo.numFailedTasks
    return active


def _wait(sc, worker, group, num_proc, start_timeout):
    """Waits for the job; cancels it when its tasks have not all started
    within start_timeout (the slots went away after the check)."""
    deadline = time.monotonic() + start_timeout
    started = False
    while worker.is_alive():
        worker.join(_POLL_S)
        if not started and worker.is_alive():
            if _started_tasks(sc, group) >= num_proc:
                started = True
            elif time.monotonic() >= deadline:
                sc.cancelJobGroup(group)
                worker.join()
                raise SparkJobError(
                    "plait.spark.run: the %d barrier tasks did not all start within "
                    "start_timeout=%gs (%d task slots now): lower num_proc or add executors"
                    % (num_proc, start_timeout, task_slots(sc)))


def run(fn, args=(), kwargs={}, num_proc=None, start_timeout=None, use_mpi=None,
        use_gloo=None, extra_mpi_args=None, env=None, stdout=None, stderr=None, verbose=1,
        nics=None, prefix_output_with_timestamp=False):
    """Runs fn(*args, **kwargs) as num_proc plait ranks, one per Spark task,
    and returns its results in rank order (horovod.spark.run).

    num_proc defaults to spark.default.parallelism. start_timeout (default
    $PLAIT_SPARK_START_TIMEOUT, else 600 s) bounds the wait for num_proc task
    slots. use_gloo is accepted (plait's own transports), use_mpi=True is
    refused. env: variables set in each rank before fn runs (default: the
    driver's PLAIT_*/HOROVOD_* settings). What fn prints goes to the
    executors' logs and, once a rank ends, to stdout/stderr (default the
    driver's) prefixed with [rank]:. nics is accepted and unused (plait picks
    the interface of rank 0's address)."""
    del use_gloo, nics  # accepted for horovod.spark.run's signature
    _check_args(num_proc, use_mpi, extra_mpi_args, env, fn)
    start_timeout = _start_timeout(start_timeout)
    sc = _spark_context()
    if num_proc is None:
        num_proc = sc.defaultParallelism
    if verbose >= 1:
        print("Running %d processes..." % num_proc, file=sys.stderr)
    _wait_for_slots(sc, num_proc, start_timeout)
    secret = secrets.token_hex(32)
    payload = cloudpickle.dumps((fn, tuple(args), dict(kwargs)))
    rdd_fn = _task.make_task(payload, num_proc, secret, _forwarded_env(env),
                             _driver_version(), capture=True)
    group = "plait-spark-" + uuid.uuid4().hex
    box = {}
    worker = threading.Thread(target=_run_job, args=(sc, rdd_fn, num_proc, group, box),
                              name="plait.spark.run", daemon=True)
    worker.start()
    try:
        _wait(sc, worker, group, num_proc, start_timeout)
    except KeyboardInterrupt:
        sc.cancelJobGroup(group)
        raise
    if "error" in box:
        raise _failure(box["error"], num_proc) from None
    records = sorted(cloudpickle.loads(r) for r in box["records"])
    _emit(records, stdout or sys.stdout, stderr or sys.stderr, prefix_output_with_timestamp)
    return [result for _rank, result, _out, _err in records]
