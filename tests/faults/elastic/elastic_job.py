"""One elastic job under test: `plaitrun --min-np/--max-np
--host-discovery-script` running examples/elastic_torch.py on "hosts"
127.0.0.1, 127.0.0.2, 127.0.0.3 of this machine (tests/faults/elastic/scenarios.py
drives it; docs/elastic.md says what is promised).

The job's output is read line by line by a thread that stamps each line with
the time it arrived, so a scenario can wait for a line ("epoch 3 formed",
"step: epoch 1 batch 4"), learn the workers' pids from the example's
"elastic worker HOST/SLOT pid P: rank R of S" lines, hurt them, and measure
how long the job took to train again. The discovery script is written for
each job: it prints the lines of a hosts file the scenario edits, and fails
(exit 3, a line on stderr) while a "fail" file exists.
"""
import array
import os
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
EXAMPLE = os.path.join(ROOT, "examples", "elastic_torch.py")
PYTHON = "/usr/bin/python3"

FORMED = re.compile(r"plaitrun elastic: epoch (\d+) formed: (\d+) workers?")
WORKER = re.compile(r"elastic worker (\S+) pid (\d+): rank (\d+) of (\d+)")
STEP = re.compile(r"^\[0\]: step: epoch (\d+) batch (\d+) on (\d+) workers")
DISCOVERY_FAILS = "discovery inventory unavailable"  # what the failing script says


class Failed(Exception):
    """A scenario's verdict: what went wrong, in words."""


class Skip(Exception):
    """The pieces a scenario needs are missing: the reason."""


class Job:
    """plaitrun's elastic driver and its workers, started in tmp."""

    def __init__(self, plaitrun, tmp, hosts, train_args, flags, timeout_s, transport="gloo",
                 script=None, python=PYTHON, env=None):
        self.plaitrun, self.tmp, self.train_args = plaitrun, tmp, list(train_args)
        self.hosts_file = os.path.join(tmp, "hosts")
        self.fail_file = os.path.join(tmp, "discovery.fail")
        self.script = os.path.join(tmp, "discover.sh")
        self.out = os.path.join(tmp, "out")
        self.lines = []  # (seconds since start, line)
        self.cond = threading.Condition()
        self.pids = {}  # worker name -> pid, from its latest "elastic worker" line
        self.proc = None
        self.t0 = None
        self.set_hosts(hosts)
        with open(self.script, "w") as f:
            f.write("#!/bin/sh\n# written by tests/faults/elastic: the hosts of this job\n"
                    "if [ -e '%s' ]; then echo '%s' >&2; exit 3; fi\nexec cat '%s'\n"
                    % (self.fail_file, DISCOVERY_FAILS, self.hosts_file))
        os.chmod(self.script, 0o755)
        self.env = dict(os.environ, PLAIT_TIMEOUT_S=str(timeout_s), PLAIT_TRANSPORT=transport,
                        PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
                        ELASTIC_TEST_JOB=tmp)  # marks this job's workers in /proc
        self.env.update(env or {})  # a scenario's own settings, for driver and workers
        # the worker: the example (its parameters to out), or `script` with train_args
        self.program = script or EXAMPLE
        worker = [python, self.program] + ([] if script else ["--out", self.out])
        self.argv = [plaitrun] + list(flags) + ["--host-discovery-script", self.script] + \
            worker + self.train_args

    def set_hosts(self, hosts):
        """What the discovery script prints from now on ("host:slots" each)."""
        tmp = self.hosts_file + ".new"
        with open(tmp, "w") as f:
            f.write("".join(h + "\n" for h in hosts))
        os.replace(tmp, self.hosts_file)  # the script never sees half a file

    def fail_discovery(self, failing):
        if failing:
            open(self.fail_file, "w").close()
        elif os.path.exists(self.fail_file):
            os.unlink(self.fail_file)

    def start(self):
        print("$ " + " ".join(self.argv), flush=True)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=self.env, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            t = time.monotonic() - self.t0
            print("%7.2f %s" % (t, line), flush=True)
            with self.cond:
                self.lines.append((t, line))
                m = WORKER.search(line)
                if m:
                    self.pids[m.group(1)] = int(m.group(2))
                self.cond.notify_all()
        with self.cond:
            self.lines.append((time.monotonic() - self.t0, None))  # end of output
            self.cond.notify_all()

    def now(self):
        return time.monotonic() - self.t0

    def wait_line(self, pattern, timeout, since=0, what=None):
        """The first (index, time, match) at or after line `since` whose line
        matches; Failed when the job ends or the time runs out first."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        i = since
        with self.cond:
            while True:
                while i < len(self.lines):
                    t, line = self.lines[i]
                    if line is None:
                        raise Failed("the job ended (status %s) before %s"
                                     % (self.proc.wait(), what or repr(rx.pattern)))
                    m = rx.search(line)
                    if m:
                        return i, t, m
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Failed("waited %.0f s in vain for %s" % (timeout, what or repr(rx.pattern)))
                self.cond.wait(left)

    def wait_step(self, epoch, batch, timeout, since=0):
        """Rank 0's line for step `batch` of `epoch` or any later step."""
        deadline = time.monotonic() + timeout
        i = since
        while True:
            i, t, m = self.wait_line(STEP, max(0.1, deadline - time.monotonic()), i,
                                     "step %d of epoch %d" % (batch, epoch))
            if (int(m.group(1)), int(m.group(2))) >= (epoch, batch):
                return i, t, m
            i += 1

    def mark(self):
        """The index the next line will have."""
        with self.cond:
            return len(self.lines)

    def workers(self, host=None):
        """{name: pid} of the workers seen, those of `host` only if given."""
        with self.cond:
            return {n: p for n, p in self.pids.items() if host is None or n.split("/")[0] == host}

    def running_workers(self):
        """{PLAIT_ELASTIC_WORKER: pid} of this job's processes running the
        worker program now, from /proc (for programs that do not print their
        pid): those with this job's ELASTIC_TEST_JOB."""
        found = {}
        mark = ("ELASTIC_TEST_JOB=" + self.tmp).encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or not _runs(int(entry), self.program):
                continue
            try:
                with open("/proc/%s/environ" % entry, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if mark not in env:
                continue
            for kv in env:
                if kv.startswith(b"PLAIT_ELASTIC_WORKER="):
                    found[kv.split(b"=", 1)[1].decode()] = int(entry)
        with self.cond:
            self.pids.update(found)
        return found

    def worker_of_rank(self, rank):
        """(name, pid) of the worker whose latest line says it is `rank`."""
        with self.cond:
            latest = {}  # name -> (line index, pid, rank) of its latest line
            for i, (_, line) in enumerate(self.lines):
                m = line and WORKER.search(line)
                if m:
                    latest[m.group(1)] = (i, int(m.group(2)), int(m.group(3)))
        claims = sorted((i, name, pid) for name, (i, pid, r) in latest.items() if r == rank)
        if not claims:
            raise Failed("no worker has said it is rank %d" % rank)
        _, name, pid = claims[-1]  # the newest claim: an older one is of an earlier job
        return name, pid

    def signal(self, pid, sig):
        os.kill(pid, sig)
        t = self.now()
        print("%7.2f >>> %s to pid %d" % (t, signal.Signals(sig).name, pid), flush=True)
        return t

    def finish(self, timeout):
        """plaitrun's exit status, once its output is read to the end;
        Failed if it runs past timeout."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Failed("plaitrun still runs after %.0f s (a hang)" % timeout)
        with self.cond:  # a worker left behind may hold the pipe: bounded
            self.cond.wait_for(lambda: self.lines and self.lines[-1][1] is None, 30)
        return rc

    def output(self):
        with self.cond:
            return [line for _, line in self.lines if line is not None]

    def stop(self):
        """Ends everything this job started: plaitrun's session, and every
        worker it reported or /proc shows (a stopped one is continued first)."""
        self.running_workers()
        for pid in list(self.pids.values()):
            if _runs(pid, self.program):
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


def _runs(pid, program):
    """pid runs program (not a process that reused the number)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return program.encode() in f.read().split(b"\0")
    except OSError:
        return False


def read_params(path):
    a = array.array("d")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def compare_params(out, reference, size, rtol=1e-9, atol=1e-12):
    """Every rank's final parameters the same bytes, and equal to the
    reference run's within float tolerance. Returns the largest difference."""
    ranks = sorted(n for n in os.listdir(out) if n.startswith("params.rank"))
    want = ["params.rank%d" % r for r in range(size)]
    if sorted(ranks) != sorted(want):
        raise Failed("final parameters from %s, expected from the %d ranks %s"
                     % (ranks or "no rank", size, want))
    ref = read_params(reference)
    first = None
    for name in want:
        with open(os.path.join(out, name), "rb") as f:
            data = f.read()
        if first is None:
            first = data
        elif data != first:
            raise Failed("%s differs from params.rank0: the ranks do not hold the same model"
                         % name)
    got = array.array("d")
    got.frombytes(first)
    if len(got) != len(ref):
        raise Failed("%d parameters, the reference has %d" % (len(got), len(ref)))
    worst = 0.0
    for i, (a, b) in enumerate(zip(got, ref)):
        d = abs(a - b)
        if d > atol + rtol * abs(b):
            raise Failed("parameter %d is %.17g, the reference run's %.17g: the job did not "
                         "train on every sample exactly once" % (i, a, b))
        worst = max(worst, d)
    return worst


def run_reference(tmp, train_args, timeout):
    """The example without plait on the same samples: tmp/ref/reference."""
    out = os.path.join(tmp, "ref")
    r = subprocess.run([PYTHON, EXAMPLE, "--reference", "--out", out] + list(train_args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    if r.returncode != 0:
        raise Failed("the reference run failed: %s" % r.stdout.decode(errors="replace"))
    return os.path.join(out, "reference")


def probe(plaitrun, build_dir):
    """Skip (with the reason) when the pieces are not there: plaitrun without
    an elastic driver, plait.torch.elastic refusing, no torch."""
    if not os.access(plaitrun, os.X_OK):
        raise Failed("no plaitrun at %s (build it)" % plaitrun)
    r = subprocess.run([PYTHON, "-c", "import torch"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise Skip("%s cannot import torch (Debian: python3-torch)" % PYTHON)
    try:
        r = subprocess.run([plaitrun, "--min-np", "1", "--max-np", "1", "-H", "127.0.0.1:1",
                            "true"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    except subprocess.TimeoutExpired:
        raise Failed("plaitrun --min-np 1 --max-np 1 -H 127.0.0.1:1 true: still running after "
                     "120 s (a worker that exits 0 at once must end the job)")
    text = r.stdout.decode(errors="replace")
    if "no elastic mode" in text or "unknown option" in text or "unrecognized option" in text:
        said = [l for l in text.splitlines() if "elastic" in l or "option" in l] or [text]
        raise Skip("plaitrun has no elastic driver: 'plaitrun --min-np 1 --max-np 1 ...' says: "
                   + said[0].strip())
    _probe_python(PYTHON, build_dir, "plait.torch.elastic", "ElasticSampler(list(range(4)))")
    return True


def _probe_python(python, build_dir, module, make):
    """Skip when `module`.`make` raises NotImplementedError (the refusing
    names of before elastic training); any other outcome means it is there
    (making it without init may fail otherwise). Failed if the import fails."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"),
               PLAIT_LIBRARY=os.path.join(build_dir, "lib", "libplait.so"),
               TF_CPP_MIN_LOG_LEVEL="2")
    code = ("import %s as e\n"
            "try:\n    e.%s\n"
            "except NotImplementedError as x:\n    print('REFUSED', x)\n"
            "except Exception:\n    pass\n" % (module, make))
    r = subprocess.run([python, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       env=env, timeout=300)
    text = r.stdout.decode(errors="replace")
    if "REFUSED" in text:
        raise Skip("%s refuses: %s" % (module, text.strip()[:200]))
    if r.returncode != 0:
        raise Failed("import %s failed: %s" % (module, text.strip()[-2000:]))


def probe_tf(python, build_dir):
    """Skip unless `python` has TensorFlow and plait's elastic Keras state."""
    if not python:
        raise Skip("no Python with TensorFlow given (--tf-python; CMake: -DPLAIT_TF_PYTHON)")
    _probe_python(python, build_dir, "plait.tensorflow.keras.elastic", "KerasState(None)")


if __name__ == "__main__":
    sys.exit("tests/faults/elastic/elastic_job.py is a module: run scenarios.py")
