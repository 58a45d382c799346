"""A real local Ray cluster for the tests: a head node and extra nodes, each
a `ray start --block` process of its own (its own --temp-dir and ports, so
that clusters of other tests on this machine are never touched), on loopback
addresses of their own (127.0.0.2, 127.0.0.3, ...; Ray gives the head this
machine's address whatever it is told) so that each node is a host of its
own to plaitrun. Stopped by pid: SIGTERM to a node's `ray start
--block` process group (it stops that node's raylet and workers), SIGKILL
after a grace. Never `ray stop`, which stops every cluster of the machine.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def free_port(avoid=range(0)):
    """A port free now, outside avoid (a node's worker port range: Ray
    refuses to start when one of its ports falls inside it)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid:
            return port


class Cluster:
    def __init__(self, ray_bin, log=print):
        self.ray = ray_bin
        self.log = log
        self.tmp = tempfile.mkdtemp(prefix="rayel-")  # short: Ray's socket paths must fit
        self.port = None
        self.head = None
        self.nodes = {}  # ip -> Popen of its `ray start --block`

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def _ports(self):
        ports = ["--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
                 "--dashboard-agent-grpc-port", "--runtime-env-agent-port",
                 "--metrics-export-port"]
        lo = free_port() // 100 * 100
        lo = min(max(lo, 20000), 60000)
        self.worker_ports = range(lo, lo + 100)
        argv = []
        for p in ports:
            argv += [p, str(free_port(self.worker_ports))]
        return argv + ["--min-worker-port", str(lo), "--max-worker-port", str(lo + 99)]

    def _has_client(self):
        """Whether this Ray can run its Client server (grpcio, ray[client]; then
        it starts one on 10001 by default, which two clusters at once would
        share, so the head gets a port of its own). Without grpcio `ray start`
        refuses --ray-client-server-port; these tests never use ray://."""
        py = os.path.join(os.path.dirname(self.ray), "python")
        if not os.path.exists(py):
            return False
        return subprocess.run([py, "-c", "import grpc"], capture_output=True).returncode == 0

    def start_node(self, ip, cpus, head=False):
        argv = [self.ray, "start", "--block", "--node-ip-address", ip, "--num-cpus", str(cpus),
                "--num-gpus", "0", "--disable-usage-stats"] + self._ports()
        if head:
            self.head = ip
            avoid = self.worker_ports
            self.port = free_port(avoid)
            argv += ["--head", "--port", str(self.port), "--temp-dir", self.tmp,
                     "--include-dashboard", "false", "--dashboard-port", str(free_port(avoid))]
            if self._has_client():
                argv += ["--ray-client-server-port", str(free_port(avoid))]
        else:
            argv += ["--address", self.address]
        log = open(os.path.join(self.tmp, "node-%s.log" % ip), "ab")
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAYEL_CLUSTER=self.tmp)
        self.nodes[ip] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True, cwd=self.tmp)
        self.log("ray node %s started (pid %d, %d CPUs%s)"
                 % (ip, self.nodes[ip].pid, cpus, ", head at %s" % self.address if head else ""))

    def wait_started(self, ip, timeout=180):
        """Waits for the node's "Ray runtime started." (printed once it has
        joined the cluster): reading its log costs nothing, where asking
        through a Ray driver would start one more process every time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            p = self.nodes[ip]
            if p.poll() is not None:
                raise RuntimeError("ray node %s exited with status %d: %s"
                                   % (ip, p.returncode, self.node_log(ip)))
            if "Ray runtime started" in self.node_log(ip):
                return
            time.sleep(0.5)
        raise RuntimeError("the ray node %s did not start in %d s: %s"
                           % (ip, timeout, self.node_log(ip)))

    def node_log(self, ip):
        try:
            with open(os.path.join(self.tmp, "node-%s.log" % ip), "rb") as f:
                return f.read()[-4000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop_node(self, ip, grace=5):
        p = self.nodes.pop(ip, None)
        if p is None:
            return
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # whatever of the node is left in its group
        except ProcessLookupError:
            pass
        p.wait()
        self.log("ray node %s stopped" % ip)

    def leftovers(self):
        """pids of processes of this cluster (RAYEL_CLUSTER in their
        environment: the nodes' daemons and Ray's workers, which live in
        sessions of their own and rename themselves "ray::IDLE")."""
        mark = ("RAYEL_CLUSTER=" + self.tmp).encode()
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/environ" % pid, "rb") as f:
                    if mark in f.read().split(b"\0"):
                        found.append(int(pid))
            except OSError:
                pass
        return found

    def stop(self):
        for ip in [ip for ip in self.nodes if ip != self.head] + [self.head]:
            self.stop_node(ip)
        deadline = time.monotonic() + 10  # workers end when their raylet is gone
        while self.leftovers() and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
                self.log("killed pid %d left by the Ray cluster" % pid)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)
