"""A real Ray cluster of this test's own on this machine (tests/bindings/ray).

Cluster(nodes=2, cpus=2) starts `ray start --head --block` and then
`ray start --address=HEAD --block` for each further node, every one in a
session of its own with its own --temp-dir and free ports, so that other Ray
clusters on the machine (other tests, other users) are never touched:
`ray stop` would stop every Ray here, so stop() ends only this cluster's
sessions (SIGTERM, then SIGKILL) and checks that none of their processes is
left. Used as a context manager, it stops even when the test fails.
"""
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

RAY = os.path.join(os.path.dirname(sys.executable), "ray")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ports():
    return ["--node-manager-port=%d" % free_port(), "--object-manager-port=%d" % free_port(),
            "--metrics-export-port=%d" % free_port(),
            "--dashboard-agent-listen-port=%d" % free_port(),
            "--dashboard-agent-grpc-port=%d" % free_port(),
            "--runtime-env-agent-port=%d" % free_port()]


def _client_port():
    """A free port for the Ray Client server where Ray can run one (grpcio,
    ray[client], is installed: Ray then starts it on 10001 by default, which
    two clusters at once would share); nothing where it cannot: `ray start`
    refuses --ray-client-server-port without grpcio, and these tests never
    connect through ray://."""
    if importlib.util.find_spec("grpc") is None:
        return []
    return ["--ray-client-server-port=%d" % free_port()]


class Cluster:
    def __init__(self, nodes=2, cpus=2, env=None, ip="127.0.0.2", wrap=None, gpus=None):
        """ip: the nodes' address (Ray refuses 127.0.0.1 and would take the
        machine's own; all of 127/8 is loopback), or one per node. wrap(i): a
        command prefix for node i (e.g. `ip netns exec NS`). gpus: each
        node's GPU count for Ray (`--num-gpus`: Ray's own accounting and
        CUDA_VISIBLE_DEVICES, with or without real GPUs)."""
        self.nodes, self.cpus, self.gpus = nodes, cpus, gpus
        self.ips = ip if isinstance(ip, list) else [ip] * nodes
        self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **(env or {}))
        self.wrap = wrap or (lambda i: [])
        self.procs = []
        self.dirs = []
        self.address = None

    def _start(self, i, args):
        tmp = tempfile.mkdtemp(prefix="pr%d" % i, dir="/tmp")  # short: Ray's socket paths
        self.dirs.append(tmp)
        cmd = self.wrap(i) + [RAY, "start", "--block", "--disable-usage-stats",
                              "--num-cpus=%d" % self.cpus, "--temp-dir=%s" % tmp,
                              "--include-log-monitor=false"] + _ports() + args
        if self.gpus is not None:
            cmd.append("--num-gpus=%d" % self.gpus)
        log = open(os.path.join(tmp, "start.log"), "w")
        self.procs.append(subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))

    def start(self, timeout=240):
        port = free_port()
        self._start(0, ["--head", "--port=%d" % port, "--node-ip-address=%s" % self.ips[0],
                        "--include-dashboard=false"] + _client_port())
        self.address = "%s:%d" % (self.ips[0], port)
        self._wait_nodes(1, timeout)
        for i in range(1, self.nodes):
            self._start(i, ["--address=%s" % self.address, "--node-ip-address=%s" % self.ips[i]])
        self._wait_nodes(self.nodes, timeout)
        return self

    def _wait_nodes(self, n, timeout):
        deadline = time.monotonic() + timeout
        code = ("import ray; ray.init(address=%r, logging_level='error');"
                "print(sum(1 for x in ray.nodes() if x['Alive']))" % self.address)
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("ray start exited with %d: %s" % (p.returncode, self.log()))
            # one probe (a Ray driver) may take a minute on a loaded machine:
            # a slow probe is "not yet", never the end of the test
            left = max(1.0, deadline - time.monotonic())
            try:
                r = subprocess.run([sys.executable, "-c", code], env=self.env,
                                   capture_output=True, text=True, timeout=left)
            except subprocess.TimeoutExpired:
                continue
            if r.returncode == 0 and r.stdout.strip().isdigit() and int(r.stdout) >= n:
                return
            time.sleep(1)
        raise RuntimeError("the Ray cluster did not get %d nodes in %ds: %s" % (n, timeout, self.log()))

    def log(self):
        out = []
        for d in self.dirs:
            try:
                out.append(open(os.path.join(d, "start.log")).read()[-2000:])
            except OSError:
                pass
        return "\n".join(out)

    def session_pids(self):
        """Every live process in this cluster's sessions."""
        sids = {p.pid for p in self.procs}
        pids = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    if os.getsid(int(name)) in sids:
                        pids.append(int(name))
                except OSError:
                    pass
        return pids

    def processes_titled(self, word):
        """(pid, title) of this cluster's processes whose command line has word."""
        out = []
        for pid in self.session_pids():
            try:
                cmd = open("/proc/%d/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if word in cmd:
                out.append((pid, cmd.strip()))
        return out

    def stop(self):
        if "ray" in sys.modules:  # a driver left connected dies with the cluster
            sys.modules["ray"].shutdown()
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            for p in self.procs:
                try:
                    os.killpg(p.pid, sig)
                except OSError:
                    pass
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.session_pids():
                time.sleep(0.2)
            if not self.session_pids():
                break
        for pid in self.session_pids():  # members that left the process group
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        left = self.session_pids()
        for d in self.dirs:
            if not os.environ.get("PLAIT_TEST_KEEP_RAY_DIRS"):
                shutil.rmtree(d, ignore_errors=True)
        if left:
            raise RuntimeError("Ray processes left after stop: %s" % left)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()


def run_cases(cluster, cases, names):
    """Runs the test functions cases (case_NAME(cluster); only those named in
    names, when any) on cluster, connected with ray.init; PASS/FAIL per case,
    then a check that no PlaitRayWorker actor is left. Returns the exit status."""
    import traceback
    import ray
    cases = [c for c in cases if not names or c.__name__[5:] in names]
    passed = failed = 0
    with cluster:
        ray.init(address=cluster.address, logging_level="error")
        for case in cases:
            t0 = time.monotonic()
            try:
                case(cluster)
                passed += 1
                print("PASS %s (%.1fs)" % (case.__name__[5:], time.monotonic() - t0), flush=True)
            except Exception:
                failed += 1
                traceback.print_exc()
                print("FAIL %s (%.1fs)" % (case.__name__[5:], time.monotonic() - t0), flush=True)
        deadline = time.monotonic() + 30
        while cluster.processes_titled("PlaitRayWorker") and time.monotonic() < deadline:
            time.sleep(0.5)
        left = [t for _, t in cluster.processes_titled("PlaitRayWorker")]
        if left:
            failed += 1
            print("FAIL worker actors left at the end: %s" % left)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0
