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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        argv = []
        for p in ports:
            argv += [p, str(free_port())]
        lo = free_port() // 100 * 100
        lo = min(max(lo, 20000), 60000)
        return argv + ["--min-worker-port", str(lo), "--max-worker-port", str(lo + 99)]

    def start_node(self, ip, cpus, head=False):
        argv = [self.ray, "start", "--block", "--node-ip-address", ip, "--num-cpus", str(cpus),
                "--num-gpus", "0", "--disable-usage-stats"] + self._ports()
        if head:
            self.head = ip
            self.port = free_port()
            argv += ["--head", "--port", str(self.port), "--temp-dir", self.tmp,
                     "--include-dashboard", "false", "--dashboard-port", str(free_port()),
                     "--ray-client-server-port", str(free_port())]
        else:
            argv += ["--address", self.address]
        log = open(os.path.join(self.tmp, "node-%s.log" % ip), "ab")
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
        self.nodes[ip] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True, cwd=self.tmp)
        self.log("ray node %s started (pid %d, %d CPUs%s)"
                 % (ip, self.nodes[ip].pid, cpus, ", head at %s" % self.address if head else ""))

    def wait_nodes(self, python, count, timeout=90):
        """Waits until `count` nodes are alive (asked through a Ray driver)."""
        code = ("import ray,sys;ray.init(address=sys.argv[1],logging_level='ERROR');"
                "print(sum(1 for n in ray.nodes() if n['Alive']))")
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for ip, p in self.nodes.items():
                if p.poll() is not None:
                    raise RuntimeError("ray node %s exited with status %d: %s"
                                       % (ip, p.returncode, self.node_log(ip)))
            r = subprocess.run([python, "-c", code, self.address], capture_output=True,
                               text=True, timeout=60)
            last = (r.stdout + r.stderr).strip()
            if r.returncode == 0 and r.stdout.strip().isdigit() and int(r.stdout) >= count:
                return
            time.sleep(1)
        raise RuntimeError("the Ray cluster did not reach %d nodes in %d s: %s"
                           % (count, timeout, last[-500:]))

    def node_log(self, ip):
        try:
            with open(os.path.join(self.tmp, "node-%s.log" % ip), "rb") as f:
                return f.read()[-2000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop_node(self, ip, grace=20):
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

    def stop(self):
        for ip in [ip for ip in self.nodes if ip != self.head] + [self.head]:
            self.stop_node(ip)
        shutil.rmtree(self.tmp, ignore_errors=True)
