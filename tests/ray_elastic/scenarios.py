"""Elastic training on a real local Ray cluster (plait.ray.ElasticRayExecutor,
docs/elastic.md "Elastic on Ray").

    scenarios.py --build-dir BUILD --ray-python PY SCENARIO

Each scenario starts its own Ray cluster (tests/ray_elastic/ray_cluster.py: a
head with no CPUs, and worker nodes at 127.0.0.2, 127.0.0.3 with 1 CPU each,
i.e. one slot each), runs tests/ray_elastic/elastic_driver.py (the executor
running examples/elastic_torch.py's training) and changes the cluster while
it trains:
- node-lost: the node 127.0.0.3 is stopped (its `ray start` process, raylet
  and workers) mid-training: the job re-forms on 127.0.0.2 and finishes;
- node-added: the job starts on 127.0.0.2 alone, 127.0.0.3 joins the cluster
  mid-training: the job grows to 2 workers at a commit; then the actor
  running 127.0.0.3's worker is killed (kill -9): the agent names it, the
  job shrinks back to 1 worker and finishes;
  both end with every rank's parameters equal to a run without plait;
- too-few-slots: min_np 3 on 2 slots: an error naming --min-np and
  --elastic-timeout once elastic_timeout (10 s) has passed;
- no-ray: no cluster at the address: an error naming Ray, within a bound;
- agent-plain: plait.ray.agent as PLAITRUN_AGENT of a plain `plaitrun -H`
  job on both nodes; a rank's exit status comes back through it.
Exits 77 (skip) with the reason when Ray's python or torch is missing.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "faults", "elastic"))
import ray_cluster  # noqa: E402
from elastic_job import Failed, compare_params, run_reference  # noqa: E402

TRAIN = ["--samples", "192", "--batch-size", "8", "--commit-every", "3", "--step-delay", "0.2"]
FORMED = re.compile(r"plaitrun elastic: epoch (\d+) formed: (\d+) workers?")
STEP = re.compile(r"^\[0\]: step: epoch (\d+) batch (\d+) on (\d+) workers")
N1, N2 = "127.0.0.2", "127.0.0.3"


def log(text):
    print("%s %s" % (time.strftime("%H:%M:%S"), text), flush=True)


class Driver:
    """elastic_driver.py under Ray's python; its output read line by line."""

    def __init__(self, ctx, tmp, address, flags, train, env=None):
        self.lines, self.cond = [], threading.Condition()
        self.marker = tmp
        env_extra = env
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"),
                   PLAITRUN=os.path.join(ctx.build, "bin", "plaitrun"),
                   PLAIT_LIBRARY=os.path.join(ctx.build, "lib", "libplait.so"),
                   PLAIT_TIMEOUT_S="5", PLAIT_TRANSPORT="gloo", PYTHONUNBUFFERED="1",
                   PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", RAYEL_TEST_JOB=tmp)
        env.update(env_extra or {})
        argv = [ctx.python, os.path.join(HERE, "elastic_driver.py"), "--address", address] + \
            flags + ["--"] + train
        log("$ " + " ".join(argv))
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=env, cwd=tmp, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            print("%7.2f %s" % (time.monotonic() - self.t0, line), flush=True)
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)
            self.cond.notify_all()

    def wait_line(self, rx, timeout, since=0, test=None):
        deadline = time.monotonic() + timeout
        i = since
        with self.cond:
            while True:
                while i < len(self.lines):
                    line = self.lines[i]
                    if line is None:
                        raise Failed("the driver ended (status %s) before a line matching %r"
                                     % (self.proc.wait(), rx.pattern))
                    m = rx.search(line)
                    if m and (test is None or test(m)):
                        return i, m
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Failed("waited %.0f s in vain for %r" % (timeout, rx.pattern))
                self.cond.wait(left)

    def finish(self, timeout):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise Failed("the driver still runs after %.0f s (a hang)" % timeout)
        with self.cond:
            self.cond.wait_for(lambda: self.lines and self.lines[-1] is None, 30)
            return rc, [x for x in self.lines if x is not None]

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()


def leftovers(marker):
    """pids of this job's workers or agents still running."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read()
        except OSError:
            continue
        if (b"plait.common.worker_main" in cmd or b"plait.ray.agent" in cmd) and \
                ("RAYEL_TEST_JOB=" + marker).encode() in env:
            found.append(int(pid))
    return found


def check_no_leftovers(marker, within=30):
    deadline = time.monotonic() + within
    while leftovers(marker) and time.monotonic() < deadline:
        time.sleep(1)
    left = leftovers(marker)
    if left:
        raise Failed("processes of the job left running: %s" % left)


def training(ctx, tmp, scenario, cluster, flags, final, event, epochs=3):
    train = ["--epochs", str(epochs), "--out", os.path.join(tmp, "out")] + TRAIN
    ref = run_reference(tmp, train[:2] + TRAIN, 300)
    d = Driver(ctx, tmp, cluster.address, flags, train)
    try:
        event(d)
        rc, lines = d.finish(400)
        if rc != 0:
            raise Failed("the driver exited %d, expected 0 (training finished)" % rc)
        results = [x for x in lines if x.startswith("RESULTS ")]
        if not results:
            raise Failed("no RESULTS line")
        values = eval(results[-1][len("RESULTS "):])  # our own driver's repr of tuples
        if sorted(r for _, r in values) != list(range(final)) or any(s != 0 for s, _ in values):
            raise Failed("run returned %r, expected (0, rank) for ranks 0..%d" % (values, final - 1))
        worst = compare_params(os.path.join(tmp, "out"), ref, final)
        log("PASS %s: %d ranks hold the same parameters, equal to the reference run's (largest "
            "difference %.3g); run returned %r" % (scenario, final, worst, values))
    finally:
        d.kill()
    check_no_leftovers(tmp)


def grow(ctx, cluster, ip):
    """Starts a 1-CPU node at ip and waits until it is alive (one at a time:
    Ray's node start times out when the GCS is busy starting another)."""
    cluster.start_node(ip, 1)
    cluster.wait_started(ip)


def node_lost(ctx, tmp, cluster):
    grow(ctx, cluster, N1)
    grow(ctx, cluster, N2)

    def event(d):
        d.wait_line(FORMED, 240, test=lambda m: int(m.group(2)) == 2)
        i, _ = d.wait_line(STEP, 240, test=lambda m: (int(m.group(1)), int(m.group(2))) >= (0, 4))
        log(">>> stopping the Ray node %s" % N2)
        cluster.stop_node(N2)
        d.wait_line(FORMED, 120, i, test=lambda m: int(m.group(2)) == 1)
    training(ctx, tmp, "node-lost", cluster, ["--min-np", "1", "--max-np", "2"], 1, event)


def actor_of(pid):
    """The Ray actor process (its name "ray::...") above pid."""
    while pid > 1:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if f.read().startswith(b"ray::"):
                return pid
        with open("/proc/%d/stat" % pid) as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    raise Failed("no Ray actor process above the worker")


def node_added(ctx, tmp, cluster):
    grow(ctx, cluster, N1)
    worker = re.compile(r"elastic worker %s/0 pid (\d+): rank (\d+) of 2" % re.escape(N2))

    def event(d):
        i, _ = d.wait_line(STEP, 240, test=lambda m: (int(m.group(1)), int(m.group(2))) >= (0, 3))
        log(">>> adding the Ray node %s" % N2)
        grow(ctx, cluster, N2)
        i, _ = d.wait_line(FORMED, 180, i, test=lambda m: int(m.group(2)) == 2)
        i, m = d.wait_line(worker, 60, i)
        i, _ = d.wait_line(STEP, 60, i, test=lambda m: int(m.group(3)) == 2)
        actor = actor_of(int(m.group(1)))
        log(">>> kill -9 of the actor (pid %d) running the worker on %s" % (actor, N2))
        os.kill(actor, 9)
        d.wait_line(re.compile(r"plait.ray.agent: the actor running the worker on the Ray node "
                               + re.escape(N2) + " died"), 60, i)
        d.wait_line(FORMED, 60, i, test=lambda m: int(m.group(2)) == 1)
    # long enough for the node to start and its worker to join (about 20 s)
    training(ctx, tmp, "node-added", cluster, ["--min-np", "1", "--max-np", "2"], 1, event,
             epochs=10)


def too_few_slots(ctx, tmp, cluster):
    grow(ctx, cluster, N1)
    grow(ctx, cluster, N2)
    t = time.monotonic()
    d = Driver(ctx, tmp, cluster.address, ["--min-np", "3", "--elastic-timeout", "10"],
               ["--epochs", "1"] + TRAIN)
    try:
        rc, lines = d.finish(180)
    finally:
        d.kill()
    took = time.monotonic() - t
    err = [x for x in lines if x.startswith("ERROR ")]
    want = "fewer than --min-np 3 slots for 10 seconds (--elastic-timeout)"
    if rc == 0 or not err or want not in err[-1]:
        raise Failed("expected an ERROR line with %r, got status %d and %r" % (want, rc, err))
    if took < 10:
        raise Failed("the error came after %.1f s, before elastic_timeout 10 s" % took)
    log("PASS too-few-slots: %s (after %.1f s)" % (err[-1], took))
    check_no_leftovers(tmp)


def no_ray(ctx, tmp, cluster):
    port = ray_cluster.free_port()  # nothing listens there
    t = time.monotonic()
    d = Driver(ctx, tmp, "-", ["--min-np", "1"], ["--epochs", "1"] + TRAIN,
               env={"RAY_ADDRESS": "127.0.0.1:%d" % port})  # start() connects
    try:
        rc, lines = d.finish(60)
    finally:
        d.kill()
    err = [x for x in lines if x.startswith("ERROR ")]
    if rc == 0 or not err or "Ray cluster" not in err[-1]:
        raise Failed("expected an ERROR line naming Ray, got status %d and %r" % (rc, err))
    log("PASS no-ray: %s (after %.1f s)" % (err[-1], time.monotonic() - t))


def agent_plain(ctx, tmp, cluster):
    """plait.ray.agent under a plain (not elastic) plaitrun -H job: ranks on
    both nodes, their output relayed; a rank's status comes back."""
    grow(ctx, cluster, N1)
    grow(ctx, cluster, N2)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"),
               PLAIT_TIMEOUT_S="5", PLAIT_TRANSPORT="gloo", RAYEL_TEST_JOB=tmp,
               PLAITRUN_AGENT="%s -m plait.ray.agent --address %s" % (ctx.python, cluster.address))
    plaitrun = [os.path.join(ctx.build, "bin", "plaitrun"), "-np", "2", "-H",
                "%s:1,%s:1" % (N1, N2)]
    code = ("import plait.torch as hvd, torch; hvd.init(); "
            "print('rank %d of %d: sum %g' % (hvd.rank(), hvd.size(), "
            "hvd.allreduce(torch.ones(1), op=hvd.Sum).item()))")
    r = subprocess.run(plaitrun + [ctx.python, "-c", code], env=env, capture_output=True,
                       text=True, timeout=300)
    log("$ plaitrun ... python -c ...: status %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    for rank in (0, 1):
        if "[%d]: rank %d of 2: sum 2" % (rank, rank) not in r.stdout or r.returncode != 0:
            raise Failed("rank %d's line missing or status %d" % (rank, r.returncode))
    r = subprocess.run(plaitrun + ["sh", "-c", "exit 3"], env=env, capture_output=True,
                       text=True, timeout=300)
    log("$ plaitrun ... sh -c 'exit 3': status %d\n%s" % (r.returncode, r.stderr))
    if r.returncode != 3 or "exited with status 3" not in r.stderr:
        raise Failed("expected status 3 named, got %d" % r.returncode)
    log("PASS agent-plain: ranks on both nodes through plait.ray.agent; a rank's status 3 "
        "comes back")
    check_no_leftovers(tmp)


SCENARIOS = {"agent-plain": agent_plain, "node-lost": node_lost, "node-added": node_added, "too-few-slots": too_few_slots,
             "no-ray": no_ray}


class Context:
    def __init__(self, args):
        self.build = os.path.abspath(args.build_dir)
        self.python = args.ray_python


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--ray-python", default="")
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    args = ap.parse_args()
    if not args.ray_python or not os.access(args.ray_python, os.X_OK):
        print("SKIP: no Ray python (PLAIT_RAY_PYTHON; ci/test installs it via ci/lib/ray.sh)")
        return 77
    probe = subprocess.run([args.ray_python, "-c", "import ray, torch"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        print("SKIP: %s cannot import ray and torch: %s"
              % (args.ray_python, (probe.stderr.strip().splitlines() or ["?"])[-1]))
        return 77
    ctx = Context(args)
    ray_bin = os.path.join(os.path.dirname(args.ray_python), "ray")
    tmp = tempfile.mkdtemp(prefix="rayel-job-")
    cluster = ray_cluster.Cluster(ray_bin, log)
    try:
        if args.scenario != "no-ray":
            cluster.start_node("127.0.0.1", 0, head=True)
            cluster.wait_started("127.0.0.1")
        SCENARIOS[args.scenario](ctx, tmp, cluster)
        return 0
    except Failed as e:
        log("FAIL %s: %s" % (args.scenario, e))
        return 1
    finally:
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
