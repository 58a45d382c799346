"""plait.spark.run_elastic: horovod.spark.run_elastic 0.28.1's API on
plaitrun's elastic driver (docs/spark.md, "Elastic: run_elastic").

    results = plait.spark.run_elastic(train, num_proc=2, min_num_proc=1)
    # train uses plait.torch.elastic.run (or another binding's elastic.run)

No second driver in Python: run_elastic starts plaitrun's elastic driver
(docs/elastic.md) on the Spark driver's machine with
- max_num_proc long-running Spark tasks (plain tasks, not a barrier stage:
  losing one must not end the others), each a relay
  (plait.spark.relay_task) that registers with this process's registry
  (plait.spark.registry) as a host of one slot;
- a host discovery script printing the live relay tasks, so a lost
  executor is a host removed, and a task Spark starts again elsewhere (or
  a late one, once a slot frees) is a host added;
- PLAITRUN_AGENT set to plait.spark.agent, which has a relay task run each
  worker (`python -m plait.common.worker_main` on the executor's own
  Python) on its executor;
- fn pickled into a private folder (0700) on the driver and sent with each
  worker; each worker's return value comes back the same way, and
  run_elastic returns the values of the workers that ended the job, in
  rank order.
"""
import json
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
import uuid

from plait.common import elastic_launch as _launch
from plait.spark import agent as _agent
from plait.spark import relay_task as _relay_task
from plait.spark.registry import Registry
from plait.spark.runner import (SparkJobError, _forwarded_env, _spark_context, _start_timeout,
                                task_slots)

DEFAULT_ELASTIC_TIMEOUT_S = 600  # Horovod's default
WHO = "plait.spark.run_elastic"
_POLL_S = 0.5


def _count(name, value, low=1):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError("%s: %s must be an integer of at least %d, got %r"
                         % (WHO, name, low, value))


def _one(name, new, old, old_name):
    if new is not None and old is not None and new != old:
        raise ValueError("%s: %s=%r and %s=%r (its old name) disagree"
                         % (WHO, name, new, old_name, old))
    return new if new is not None else old


def _sizes(sc, num_proc, min_num_proc, max_num_proc):
    """Horovod's defaults: num_proc = spark.default.parallelism, min and
    max = num_proc; checked (their types by _check_sizes, before)."""
    if num_proc is None:
        num_proc = sc.defaultParallelism
    lo = num_proc if min_num_proc is None else min_num_proc
    hi = num_proc if max_num_proc is None else max_num_proc
    if lo > hi:
        raise ValueError("%s: min_num_proc=%d is above max_num_proc=%d" % (WHO, lo, hi))
    if not lo <= num_proc <= hi:
        raise ValueError("%s: num_proc=%d is outside min_num_proc=%d..max_num_proc=%d"
                         % (WHO, num_proc, lo, hi))
    return num_proc, lo, hi


def _check_sizes(num_proc, min_num_proc, max_num_proc, reset_limit):
    for name, v in (("num_proc", num_proc), ("min_num_proc", min_num_proc),
                    ("max_num_proc", max_num_proc)):
        _count(name, v)
    _count("reset_limit", reset_limit, 0)
    if min_num_proc is not None and max_num_proc is not None and min_num_proc > max_num_proc:
        raise ValueError("%s: min_num_proc=%d is above max_num_proc=%d"
                         % (WHO, min_num_proc, max_num_proc))


def _elastic_timeout(value):
    if value is None:
        value = int(os.environ.get("HOROVOD_ELASTIC_TIMEOUT", DEFAULT_ELASTIC_TIMEOUT_S))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
        raise ValueError("%s: elastic_timeout must be seconds (1 or more), got %r"
                         % (WHO, value))
    return int(value)


def _wait_for_slots(sc, min_num_proc, start_timeout):
    deadline = time.monotonic() + start_timeout
    while True:
        slots = task_slots(sc)
        if slots >= min_num_proc:
            return slots
        if time.monotonic() >= deadline:
            raise SparkJobError(
                "%s: min_num_proc=%d needs %d Spark task slots, the cluster offers %d after "
                "waiting start_timeout=%gs (executors' cores / spark.task.cpus): lower "
                "min_num_proc or add executors" % (WHO, min_num_proc, min_num_proc, slots,
                                                   start_timeout))
        time.sleep(_POLL_S)


def _run_tasks(sc, rdd_fn, count, group, box):
    try:
        sc.setJobGroup(group, "%s: %d relay tasks" % (WHO, count), interruptOnCancel=True)
        box["records"] = sc.parallelize(range(count), count).mapPartitions(rdd_fn).collect()
    except BaseException as e:  # noqa: BLE001 (handed to the calling thread)
        box["error"] = e


def _argv(plaitrun, script, num_proc, lo, hi, elastic_timeout, reset_limit):
    argv = [plaitrun, "-np", str(num_proc), "--min-np", str(lo), "--max-np", str(hi),
            "--host-discovery-script", script, "--elastic-timeout", str(elastic_timeout)]
    if reset_limit is not None:
        argv += ["--reset-limit", str(reset_limit)]
    # the executor's own Python (set by the relay task) runs the worker
    return argv + ["sh", "-c", 'exec "$PLAITSPARK_PYTHON" -m plait.common.worker_main']


def _plaitrun_env(folder, bind_host, verbose):
    for word in (sys.executable, folder):
        if any(c.isspace() for c in word):
            raise RuntimeError("%s: %r has a blank in it, which PLAITRUN_AGENT cannot carry "
                               "(its words are split at blanks)" % (WHO, word))
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in paths if p != here])
    env["PLAITRUN_AGENT"] = "%s -m plait.spark.agent --job-dir %s" % (sys.executable, folder)
    env["PLAITRUN_ELASTIC_HOST"] = bind_host  # what the executors reach this machine at
    env["PYTHONUNBUFFERED"] = "1"
    if verbose >= 2:
        env.setdefault("PLAIT_LOG_LEVEL", "debug")
    return env


def _private(folder, name, data):
    fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(data)


class _Job:
    """One run_elastic: the folder, the registry, the Spark job of relays."""

    def __init__(self, sc, count, env):
        self.sc, self.count = sc, count
        self.folder = tempfile.mkdtemp(prefix="plait-spark-elastic-")  # 0700
        key = secrets.token_bytes(32)
        _private(self.folder, _agent.KEY_FILE, key.hex())
        _private(self.folder, _agent.ENV_FILE, json.dumps(env))
        self.bind_host = sc.getConf().get("spark.driver.host") or "127.0.0.1"
        self.registry = Registry(self.folder, key, self.bind_host)
        self.group = "plait-spark-elastic-" + uuid.uuid4().hex
        self.box = {}
        rdd_fn = _relay_task.make_task(self.registry.address, key)
        self.thread = threading.Thread(target=_run_tasks, name=WHO, daemon=True,
                                       args=(sc, rdd_fn, count, self.group, self.box))
        self.thread.start()

    def wait_for_relays(self, lo, start_timeout):
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            if "error" in self.box:
                raise SparkJobError("%s: the Spark job of relay tasks failed before the "
                                    "training started: %s" % (WHO, _first_lines(self.box["error"])))
            if self.registry.wait_for(lo, _POLL_S) >= lo:
                return
        raise SparkJobError(
            "%s: only %d of min_num_proc=%d relay tasks started within start_timeout=%gs "
            "(%d task slots now): lower min_num_proc or add executors"
            % (WHO, len(self.registry.live), lo, start_timeout, task_slots(self.sc)))

    def close(self, verbose):
        self.registry.close()  # the relay tasks end when their connection does
        self.thread.join(10)
        if self.thread.is_alive():  # a task Spark started again is still pending
            self.sc.cancelJobGroup(self.group)
            self.thread.join(30)
        shutil.rmtree(self.folder, ignore_errors=True)
        if "error" in self.box and verbose >= 1:
            print("%s: the Spark job of relay tasks ended with: %s"
                  % (WHO, _first_lines(self.box["error"], 2)), file=sys.stderr)


def _first_lines(exc, n=6):
    return "\n".join(str(exc).strip().splitlines()[:n])


class _Stamped:
    """prefix_output_with_timestamp: each line (run_streamed writes whole
    lines) after the time, as horovod.spark.run's."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        self.stream.write(time.strftime("%a %b %d %H:%M:%S %Y ") + text)

    def flush(self):
        self.stream.flush()


def run_elastic(fn, args=(), kwargs={}, num_proc=None, min_num_proc=None, max_num_proc=None,
                start_timeout=None, elastic_timeout=None, reset_limit=None, env=None,
                stdout=None, stderr=None, verbose=1, nics=None,
                prefix_output_with_timestamp=False, min_np=None, max_np=None):
    """Runs fn(*args, **kwargs) as an elastic plait job over Spark tasks
    (horovod.spark.run_elastic) and returns the values of the workers that
    ended the job, in rank order.

    num_proc (default spark.default.parallelism) workers to start with,
    min_num_proc/max_num_proc (default num_proc; min_np/max_np are their
    old names) the bounds; max_num_proc relay tasks are asked of Spark.
    start_timeout (default $PLAIT_SPARK_START_TIMEOUT or
    $HOROVOD_SPARK_START_TIMEOUT, else 600 s): the wait for min_num_proc
    task slots and relay tasks. elastic_timeout (default
    $HOROVOD_ELASTIC_TIMEOUT, else 600 s): plaitrun's wait for min_num_proc
    workers after a change. reset_limit: plaitrun's --reset-limit. env:
    variables set in each worker (default: the driver's PLAIT_*/HOROVOD_*).
    Every worker's output, prefixed [rank]: by plaitrun, goes to stdout
    (default the driver's). nics is accepted and unused.
    SparkJobError naming plaitrun's reason when the job fails."""
    del nics, stderr  # accepted for horovod.spark.run_elastic's signature
    min_num_proc = _one("min_num_proc", min_num_proc, min_np, "min_np")
    max_num_proc = _one("max_num_proc", max_num_proc, max_np, "max_np")
    if not callable(fn):
        raise TypeError("%s: fn must be callable, got %r" % (WHO, fn))
    _check_sizes(num_proc, min_num_proc, max_num_proc, reset_limit)
    if env is not None and not isinstance(env, dict):
        raise TypeError("%s: env must be a dict, got %r" % (WHO, type(env).__name__))
    start_timeout = _start_timeout(start_timeout)
    elastic_timeout = _elastic_timeout(elastic_timeout)
    sc = _spark_context()
    num_proc, lo, hi = _sizes(sc, num_proc, min_num_proc, max_num_proc)
    plaitrun = _launch.find_plaitrun(WHO)
    if verbose >= 1:
        print("%s: %d workers (min %d, max %d)..." % (WHO, num_proc, lo, hi), file=sys.stderr)
    _wait_for_slots(sc, lo, start_timeout)
    job = _Job(sc, hi, _forwarded_env(env))
    try:
        job.wait_for_relays(lo, start_timeout)
        _launch.dump_function(os.path.join(job.folder, "fn.pkl"), fn, args, kwargs)
        argv = _argv(plaitrun, job.registry.hosts_file.script(), num_proc, lo, hi,
                     elastic_timeout, reset_limit)
        out = stdout or sys.stdout
        if prefix_output_with_timestamp:
            out = _Stamped(out)
        rc, tail = _launch.run_streamed(argv, _plaitrun_env(job.folder, job.bind_host, verbose),
                                        out=out)
        if rc != 0:
            raise SparkJobError("%s: the elastic job failed (plaitrun exited %d): %s"
                                % (WHO, rc, _launch.reason(tail)))
        return _launch.load_results(os.path.join(job.folder, "results"))
    finally:
        job.close(verbose)
