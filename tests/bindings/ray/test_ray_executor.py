"""plait.ray.RayExecutor on a real Ray cluster of two nodes on this machine.

    python tests/bindings/ray/test_ray_executor.py [CASE...]

Run with the ray venv's python (ci/lib/ray.sh), PLAIT_LIBRARY and
PYTHONPATH=bindings/python set (ctest does: tests/bindings/ray/CMakeLists.txt).
Starts its own cluster (cluster.py: two `ray start` nodes of 2 CPUs each,
private temp dirs and ports) and stops it at the end, even on failure. Each
case prints PASS/FAIL; the last line is "N passed, N failed". Functions
sent to the workers are defined in this script (__main__), so Ray ships them
by value.
"""
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)

try:
    import ray
    import torch  # noqa: F401  (the workers need it: say so here first)
except ImportError as e:
    print("SKIP: %s (run with the ray venv: ci/lib/ray.sh)" % e)
    sys.exit(77)

from cluster import Cluster, run_cases  # noqa: E402
from plait.ray import RayExecutor  # noqa: E402
from plait.ray.runner import WorkerLostError  # noqa: E402

TIMEOUT_S = 5  # PLAIT_TIMEOUT_S of the jobs: a lost peer fails the others within it
ENV = {"PLAIT_TIMEOUT_S": str(TIMEOUT_S), "OMP_NUM_THREADS": "1"}


def settings(**kw):
    kw.setdefault("timeout_s", 120)
    kw.setdefault("placement_group_timeout_s", 60)
    return RayExecutor.create_settings(verbose=0, **kw)


def collectives():
    import torch
    import plait.torch as hvd
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    total = hvd.allreduce(torch.arange(4, dtype=torch.float32) + r, op=hvd.Sum, name="sum")
    bcast = hvd.broadcast(torch.full((3,), float(r)), root_rank=n - 1, name="bcast")
    out = {"layout": (r, n, hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size()),
           "sum": total.tolist(), "bcast": bcast.tolist(), "pid": os.getpid(),
           "secret_in_cmdline": "PLAIT_SECRET" in open("/proc/self/cmdline").read()}
    hvd.shutdown()
    return out


def check_collectives(results, n):
    expect_sum = [float(n * i + n * (n - 1) // 2) for i in range(4)]
    for rank, res in enumerate(results):
        assert res["layout"][:2] == (rank, n), res["layout"]
        assert res["sum"] == expect_sum, (rank, res["sum"], expect_sum)
        assert res["bcast"] == [float(n - 1)] * 3, (rank, res["bcast"])
        assert not res["secret_in_cmdline"]


def check_layout(ex, results):
    """Each node's ranks contiguous; local/cross ranks as plait derives them."""
    nodes = [s["node_id"] for s in ex.layout]
    for i in range(1, len(nodes)):  # a node's ranks never resume after another node's
        assert nodes[i] == nodes[i - 1] or nodes[i] not in nodes[:i], nodes
    for s, res in zip(ex.layout, results):
        assert res["layout"] == (s["rank"], s["size"], s["local_rank"], s["local_size"],
                                 s["cross_rank"], s["cross_size"]), (s, res["layout"])
        assert res["pid"] == s["pid"]


def case_two_workers(cluster):
    ex = RayExecutor(settings(), num_workers=2)
    ex.start(extra_env_vars=ENV)
    try:
        results = ex.run(collectives)
        check_collectives(results, 2)
        check_layout(ex, results)
        again = ex.run(lambda x: x * 2, args=(21,))  # the executor runs more than once
        assert again == [42, 42], again
    finally:
        ex.shutdown()


def case_two_hosts_two_each(cluster):
    ex = RayExecutor(settings(), num_hosts=2, num_workers_per_host=2)
    ex.start(extra_env_vars=ENV)
    try:
        results = ex.run(collectives)
        check_collectives(results, 4)
        check_layout(ex, results)
        assert len({s["node_id"] for s in ex.layout}) == 2, ex.layout
        print("  ranks on %s" % ", ".join("%d: %s %s" % (s["rank"], s["hostname"], s["ip"])
                                          for s in ex.layout))
        assert [r["layout"][2:] for r in results] == [(0, 2, 0, 2), (1, 2, 0, 2),
                                                      (0, 2, 1, 2), (1, 2, 1, 2)], results
        refs = ex.run_remote(lambda a, b=0: a + b + int(os.environ["PLAIT_RANK"]),
                             args=(1,), kwargs={"b": 10})
        assert ray.get(refs) == [11, 12, 13, 14], ray.get(refs)
    finally:
        ex.shutdown()


class Counter:
    """An executable_cls: made on every worker after its environment is set."""

    def __init__(self, start, step=1):
        self.value, self.step = start, step
        self.rank = int(os.environ["PLAIT_RANK"])

    def bump(self):
        self.value += self.step
        return self.rank, self.value


def case_execute(cluster):
    ex = RayExecutor(settings(), num_workers=3)
    ex.start(executable_cls=Counter, executable_args=[100], executable_kwargs={"step": 5},
             extra_env_vars=ENV)
    try:
        assert ex.execute(lambda c: c.bump()) == [(0, 105), (1, 105), (2, 105)]
        assert ex.execute_single(lambda c: c.bump()) == (0, 110)
        seen = []
        assert ex.execute(lambda c: c.bump(), callbacks=[seen.append]) == \
            [(0, 115), (1, 110), (2, 110)]
        assert sorted(seen) == [(0, 115), (1, 110), (2, 110)], seen
    finally:
        ex.shutdown()


def case_example_ray_train(cluster):
    env = dict(os.environ, RAY_ADDRESS=cluster.address, PLAIT_TIMEOUT_S="30")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "ray_train.py"),
                        "--hosts", "2", "--workers-per-host", "2", "--epochs", "3"],
                       env=env, capture_output=True, text=True, timeout=300)
    print(r.stdout[-2000:])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "parameters identical on all ranks, loss went down" in r.stdout, r.stdout


def train_until_killed(victim_rank):
    """Allreduces until a peer is lost; the victim never returns."""
    import torch
    import plait.torch as hvd
    hvd.init()
    t = torch.ones(1000)
    for i in range(1000000):
        hvd.allreduce(t, name="t%d" % (i % 8))
        if i == 20 and hvd.rank() == victim_rank:
            open(os.environ["VICTIM_READY"], "w").write(str(os.getpid()))
    return "finished"


def worker_titles(cluster):
    return [t for _, t in cluster.processes_titled("PlaitRayWorker")]


def kill_mid_job(cluster, how):
    ready = "/tmp/plait-ray-victim-%d" % os.getpid()
    if os.path.exists(ready):
        os.unlink(ready)
    ex = RayExecutor(settings(), num_hosts=2, num_workers_per_host=2)
    ex.start(extra_env_vars=dict(ENV, VICTIM_READY=ready))
    try:
        victim = 2
        refs = ex.run_remote(train_until_killed, args=(victim,))
        deadline = time.monotonic() + 120
        while not os.path.exists(ready) or not open(ready).read():
            assert time.monotonic() < deadline, "the job did not get going"
            ready_refs, _ = ray.wait(refs, timeout=0.2)
            assert not ready_refs, ray.get(ready_refs)
        pid = ex.layout[victim]["pid"]
        t0 = time.monotonic()
        if how == "sigkill":
            os.kill(pid, signal.SIGKILL)
        else:
            ray.kill(ex.workers[victim], no_restart=True)
        try:
            ex._collect(refs)
            raise AssertionError("no error after worker %d was killed" % victim)
        except WorkerLostError as e:
            took = time.monotonic() - t0
            msg = str(e)
            print("  %s after %.1fs: %s" % (type(e).__name__, took, msg[:400]))
            assert "worker rank %d" % victim in msg, msg
            assert ex.layout[victim]["node_id"][:12] in msg, msg
            assert "PeerLostError: rank %d was lost" % victim in msg, msg
            assert took < TIMEOUT_S + 5, "%.1fs > PLAIT_TIMEOUT_S + 5" % took
        try:
            ex.run(lambda: 1)
            raise AssertionError("a broken executor ran again")
        except RuntimeError as e:
            assert "shutdown() and start()" in str(e), e
    finally:
        ex.shutdown()
        if os.path.exists(ready):
            os.unlink(ready)
    deadline = time.monotonic() + 30
    while worker_titles(cluster) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not worker_titles(cluster), "orphans: %s" % worker_titles(cluster)


def case_actor_sigkilled_mid_job(cluster):
    kill_mid_job(cluster, "sigkill")


def case_actor_ray_killed_mid_job(cluster):
    kill_mid_job(cluster, "ray.kill")


def case_too_few_cpus(cluster):
    ex = RayExecutor(settings(placement_group_timeout_s=3), num_workers=5)
    t0 = time.monotonic()
    try:
        ex.start(extra_env_vars=ENV)
        raise AssertionError("5 workers placed on 4 CPUs")
    except TimeoutError as e:
        took = time.monotonic() - t0
        print("  after %.1fs: %s" % (took, e))
        assert took < 3 + 30, took
        assert "5 bundle(s) {CPU: 1}" in str(e) and "CPU: 5" in str(e), e
        assert "free of {CPU: 4" in str(e), e
    finally:
        ex.shutdown()
    spread = RayExecutor(settings(placement_group_timeout_s=3), num_hosts=3)
    try:
        spread.start()
        raise AssertionError("3 hosts placed on 2 nodes")
    except TimeoutError as e:
        assert "STRICT_SPREAD" in str(e) and "2 alive node(s)" in str(e), e
    finally:
        spread.shutdown()


def case_version_mismatch(cluster):
    import plait
    lib = open(plait.library_path, "rb").read()
    old = plait.__version__.encode() + b"\0"
    assert lib.count(old) == 1, "the version string is not once in %s" % plait.library_path
    other = "/tmp/plait-ray-other-%d.so" % os.getpid()
    bumped = b"9" + old[1:]  # what another release's library says
    open(other, "wb").write(lib.replace(old, bumped))
    ex = RayExecutor(settings(), num_workers=2)
    try:
        ex.start(extra_env_vars=dict(ENV, PLAIT_LIBRARY=other))
        raise AssertionError("workers with plait %s accepted" % bumped[:-1].decode())
    except RuntimeError as e:
        msg = str(e)
        print("  " + msg[:300])
        assert "version mismatch" in msg and plait.__version__ in msg, msg
        assert bumped[:-1].decode() in msg and other in msg, msg
    finally:
        ex.shutdown()
        os.unlink(other)


def case_no_ray_at_address(cluster):
    code = ("import ray\nfrom plait.ray import RayExecutor\n"
            "ex = RayExecutor(RayExecutor.create_settings(), num_workers=1)\n"
            "try:\n    ex.start()\nexcept ConnectionError as e:\n    print('ERR', e)\n")
    from cluster import free_port
    address = "127.0.0.2:%d" % free_port()
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, RAY_ADDRESS=address))
    print("  after %.1fs: %s" % (time.monotonic() - t0, r.stdout.strip()[:300]))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ERR plait.ray: no Ray cluster answers at RAY_ADDRESS=%s" % address in r.stdout and "ray start --head" in r.stdout, (r.stdout, r.stderr[-2000:])


def case_layout_of_interleaved_nodes(cluster):
    """Actors created alternating between nodes still get contiguous ranks."""
    from plait.ray.layout import assign_ranks
    slots = assign_ranks(["n2", "n1", "n2", "n1", "n2"])
    assert [s["actor"] for s in slots] == [0, 2, 4, 1, 3], slots
    assert [(s["local_rank"], s["local_size"]) for s in slots] == \
        [(0, 3), (1, 3), (2, 3), (0, 2), (1, 2)], slots
    assert [(s["cross_rank"], s["cross_size"]) for s in slots] == \
        [(0, 2), (0, 2), (0, 1), (1, 2), (1, 2)], slots


def case_bad_arguments(cluster):
    def refuses(what, fn, *args, **kw):
        try:
            fn(*args, **kw)
        except ValueError as e:
            assert what in str(e), (what, e)
            return
        raise AssertionError("accepted: %s" % what)
    refuses("either num_workers", RayExecutor, settings(), num_workers=2, num_hosts=2)
    refuses("either num_workers", RayExecutor, settings())
    refuses("num_workers=0", RayExecutor, settings(), num_workers=0)
    refuses("ElasticRayExecutor", RayExecutor, settings(), num_workers=2, min_workers=1)
    refuses("timeout_s=-1", RayExecutor.create_settings, timeout_s=-1)
    refuses("gpus_per_worker=1 needs use_gpu", RayExecutor, settings(), num_workers=1,
            gpus_per_worker=1)
    ex = RayExecutor(settings(), num_workers=1)
    refuses("may not set PLAIT_SECRET", ex.start, extra_env_vars={"PLAIT_SECRET": "x"})
    try:
        ex.run(lambda: 1)
        raise AssertionError("ran before start()")
    except RuntimeError as e:
        assert "call start() first" in str(e), e


CASES = [v for k, v in sorted(globals().items()) if k.startswith("case_")]


def cluster_here():
    """Two nodes on loopback; with PLAIT_RAY_TEST_NETNS="NS1 NS2" (hosts_ray.sh,
    which runs this script in NS1), one node per network-namespace host at
    PLAIT_RAY_TEST_IPS."""
    spaces = os.environ.get("PLAIT_RAY_TEST_NETNS", "").split()
    if not spaces:
        return Cluster(nodes=2, cpus=2)
    ips = os.environ["PLAIT_RAY_TEST_IPS"].split()
    return Cluster(nodes=len(spaces), cpus=2, ip=ips, wrap=lambda i: [
        "ip", "netns", "exec", spaces[i], "unshare", "--uts", "sh", "-c",
        'hostname "$0"; exec "$@"', "h%d" % (i + 1)])


def main(names):
    return run_cases(cluster_here(), CASES, names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
