"""plait.spark.run_elastic on a real Spark local-cluster[2,1,1024] (two
executor JVMs of one core each), run with the Spark venv's python:

    elastic_scenarios.py SCENARIO

- train: 2 relay tasks, min=max=2: examples/elastic_torch.py's training
  to the end; run_elastic returns (0, rank) of ranks 0 and 1 in rank order
  and both ranks hold the parameters of a run without plait;
- executor-lost: min 1, max 2; once both workers train, the executor JVM
  under rank 1's worker is killed (kill -9): the agent names the task and
  its executor, plaitrun re-forms the job without that worker, the job
  ends with status ok (Spark may give the task's slot back on a new
  executor, and the job may grow again) and the parameters equal the
  reference's; prints the recovery time (kill -> epoch formed without it);
- too-few: min_num_proc=3 on 2 task slots: SparkJobError naming 3 and 2
  within start_timeout + a bound, no hang.
Every scenario ends with no process of the job left (worker, agent, relay
task, pyspark worker). Exits 0 (PASS), 1 (FAIL) or 77 (skipped, the reason
printed).
"""
import importlib.util
import os
import re
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
EXAMPLE = os.path.join(ROOT, "examples", "elastic_torch.py")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "faults", "elastic"))
import spark_cluster  # noqa: E402
from elastic_job import Failed, compare_params, run_reference  # noqa: E402

TRAIN = ["--samples", "192", "--batch-size", "8", "--commit-every", "3", "--step-delay", "0.15"]
FORMED = re.compile(r"plaitrun elastic: epoch (\d+) formed: (\d+) workers?")
STEP = re.compile(r"\[0\]: step: epoch (\d+) batch (\d+) on (\d+) workers")
MARK = "SPARKEL_TEST_JOB"


def log(text):
    print("%s %s" % (time.strftime("%H:%M:%S"), text), flush=True)


def train(example, train_args):
    """The worker function: the example's elastic training; (status, rank)."""
    spec = importlib.util.spec_from_file_location("elastic_torch", example)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rc = mod.elastic(mod.parser.parse_args(train_args))
    import plait.torch as hvd
    return rc, hvd.rank()


class Lines:
    """run_elastic's stdout: echoed with the time since start, kept."""

    def __init__(self):
        self.lines, self.cond, self.t0 = [], threading.Condition(), time.monotonic()
        self.buf = ""

    def write(self, text):
        sys.stdout.write("%7.2f %s" % (time.monotonic() - self.t0, text))
        with self.cond:
            self.buf += text
            while "\n" in self.buf:
                line, self.buf = self.buf.split("\n", 1)
                self.lines.append((time.monotonic(), line))
            self.cond.notify_all()

    def flush(self):
        sys.stdout.flush()

    def wait(self, rx, timeout, since=0, test=None):
        deadline = time.monotonic() + timeout
        with self.cond:
            i = since
            while True:
                for i in range(i, len(self.lines)):
                    m = rx.search(self.lines[i][1])
                    if m and (test is None or test(m)):
                        return i, m, self.lines[i][0]
                i = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Failed("waited %.0f s in vain for %r" % (timeout, rx.pattern))
                self.cond.wait(left)

    def text(self):
        with self.cond:
            return "\n".join(line for _, line in self.lines)


def _proc(pid, what):
    with open("/proc/%d/%s" % (pid, what), "rb") as f:
        return f.read()


def job_processes(mark):
    """pids (not ours) whose environment carries the test's mark."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            if b"org.apache.spark.deploy.SparkSubmit" in _proc(int(pid), "cmdline"):
                continue  # this test's own Spark gateway JVM, ended at exit
        except OSError:
            continue
        try:
            env = _proc(int(pid), "environ")
            cmd = _proc(int(pid), "cmdline")
        except OSError:
            continue
        if ("%s=%s" % (MARK, mark)).encode() in env.split(b"\0") and spark_cluster.alive(int(pid)):
            found.append((int(pid), cmd.replace(b"\0", b" ")[:120].decode(errors="replace")))
    return found


def executor_of_worker(name):
    """The executor JVM above the worker process plaitrun named `name`."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"plait.common.worker_main" not in _proc(int(pid), "cmdline"):
                continue
            if ("PLAIT_ELASTIC_WORKER=%s" % name).encode() not in \
                    _proc(int(pid), "environ").split(b"\0"):
                continue
        except OSError:
            continue
        for up in spark_cluster.ancestors(int(pid)):
            try:
                if b"CoarseGrainedExecutorBackend" in _proc(up, "cmdline"):
                    return up
            except OSError:
                break
    raise Failed("no executor JVM above the worker %s" % name)


def run_job(spark, out, train_args, **kw):
    from plait.spark import run_elastic
    box = {}

    def go():
        try:
            box["results"] = run_elastic(train, args=(EXAMPLE, train_args), stdout=out,
                                         elastic_timeout=60, start_timeout=60, **kw)
        except BaseException as e:  # noqa: BLE001
            box["error"] = e
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, box


def finish(t, box, timeout):
    t.join(timeout)
    if t.is_alive():
        raise Failed("run_elastic still runs after %.0f s (a hang)" % timeout)
    if "error" in box:
        raise Failed("run_elastic raised %s: %s" % (type(box["error"]).__name__, box["error"]))
    return box["results"]


def check_trained(tmp, ref, results):
    ranks = [r for _, r in results]
    if ranks != list(range(len(results))) or any(s != 0 for s, _ in results):
        raise Failed("run_elastic returned %r, expected [(0, 0), (0, 1), ...] in rank order"
                     % (results,))
    worst = compare_params(os.path.join(tmp, "out"), ref, len(results))
    log("the %d ranks hold the same parameters, equal to the reference's (largest difference "
        "%.3g); run_elastic returned %r" % (len(results), worst, results))


def scenario_train(spark, tmp):
    args = ["--epochs", "2", "--out", os.path.join(tmp, "out")] + TRAIN
    ref = run_reference(tmp, args[:2] + TRAIN, 120)
    out = Lines()
    t, box = run_job(spark, out, args, num_proc=2)
    results = finish(t, box, 150)
    if len(results) != 2:
        raise Failed("expected the values of 2 workers, got %r" % (results,))
    check_trained(tmp, ref, results)


def scenario_executor_lost(spark, tmp):
    args = ["--epochs", "3", "--out", os.path.join(tmp, "out")] + TRAIN
    ref = run_reference(tmp, args[:2] + TRAIN, 120)
    out = Lines()
    t, box = run_job(spark, out, args, num_proc=2, min_num_proc=1, max_num_proc=2)
    out.wait(FORMED, 90, test=lambda m: int(m.group(2)) == 2)
    i, _, _ = out.wait(STEP, 60, test=lambda m: (int(m.group(1)), int(m.group(2))) >= (0, 3))
    worker = re.compile(r"elastic worker (\S+) pid \d+: rank 1 of 2")
    _, m, _ = out.wait(worker, 5)
    victim = executor_of_worker(m.group(1))
    task = m.group(1).split("/")[0]
    log(">>> kill -9 of executor JVM %d (under worker %s, rank 1)" % (victim, m.group(1)))
    killed = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    # the promised bound is PLAIT_TIMEOUT_S + 5 s (10 s); 20 s: slack for a loaded machine
    _, m2, at = out.wait(FORMED, 20, i, test=lambda m: int(m.group(2)) == 1)
    log("RECOVERY %.2f s: kill -9 -> epoch %s formed on 1 worker" % (at - killed, m2.group(1)))
    results = finish(t, box, 150)
    text = out.text()
    blame = re.compile(r"plait\.spark\.agent: the Spark task relaying the worker on %s "
                       r"\(executor \S+ on .*\) is gone" % re.escape(task))
    if not blame.search(text):
        raise Failed("no line of the agent naming the lost task %s and its executor" % task)
    if not re.search(r"plaitrun elastic: .*%s" % re.escape(task), text):
        raise Failed("plaitrun named nothing about %s" % task)
    check_trained(tmp, ref, results)


def scenario_too_few(spark, tmp):
    from plait.spark import SparkJobError, run_elastic
    t0 = time.monotonic()
    try:
        run_elastic(train, args=(EXAMPLE, []), num_proc=3, min_num_proc=3, start_timeout=5)
    except SparkJobError as e:
        took = time.monotonic() - t0
        text = str(e)
        log("raised after %.1f s: %s" % (took, text))
        if "min_num_proc=3" not in text or "offers 2" not in text:
            raise Failed("the error does not name min_num_proc=3 and the 2 slots: %s" % text)
        if took > 5 + 30:
            raise Failed("the error came after %.0f s (start_timeout 5)" % took)
        return
    raise Failed("run_elastic with min_num_proc=3 on 2 slots did not raise")


SCENARIOS = {"train": scenario_train, "executor-lost": scenario_executor_lost,
             "too-few": scenario_too_few}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        print("usage: elastic_scenarios.py %s" % "|".join(SCENARIOS))
        return 2
    try:
        import pyspark  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print("skipped: %s" % e)
        return 77
    import tempfile
    tmp = tempfile.mkdtemp(prefix="plait-sparkel-")
    os.environ[MARK] = tmp
    os.environ.setdefault("PLAIT_TIMEOUT_S", "5")
    os.environ["PLAIT_TIMEOUT_S"] = "5"
    os.environ.setdefault("PLAIT_TRANSPORT", "gloo")
    os.environ["OMP_NUM_THREADS"] = "1"
    spark = spark_cluster.start("plait-spark-elastic-test")
    rc = 1
    try:
        SCENARIOS[sys.argv[1]](spark, tmp)
        rc = 0
    except Failed as e:
        log("FAIL %s: %s" % (sys.argv[1], e))
    finally:
        spark.stop()
    deadline = time.monotonic() + 30
    while job_processes(tmp) and time.monotonic() < deadline:
        time.sleep(1)
    left = job_processes(tmp)
    if left:
        log("FAIL %s: processes of the job left running: %s" % (sys.argv[1], left))
        for pid, _ in left:
            os.kill(pid, signal.SIGKILL)
        rc = 1
    if rc == 0:
        log("PASS %s" % sys.argv[1])
    return rc


if __name__ == "__main__":
    sys.exit(main())
