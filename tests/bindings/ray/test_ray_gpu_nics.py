"""RayExecutor's use_gpu / gpus_per_worker and nics on a real Ray cluster.

    python tests/bindings/ray/test_ray_gpu_nics.py [CASE...]

Two `ray start` nodes on this machine (cluster.py), each with 2 CPUs and
`--num-gpus=2`: no GPU is needed, the counts are Ray's real accounting (the
placement group's bundles hold them, ray.available_resources() drops while
the job holds them, Ray gives each actor GPU ids and its
CUDA_VISIBLE_DEVICES). What is checked, against horovod.ray 0.28.1's
semantics (docs/ray.md):
  gpu_pack        num_workers=4, use_gpu: bundles {CPU: 1, GPU: 1}; each node's
                  workers see both of the node's GPUs in local-rank order
  gpu_two_each    num_hosts=2, gpus_per_worker=2: bundles {CPU: 1, GPU: 2}
  too_few_gpus    5 GPUs asked of 4, and 3 per worker of nodes with 2: a
                  TimeoutError naming asked and free within the bound
  nics            nics=["lo"]: rank 0 listens on lo's 127.0.0.1 (else on its
                  node's 127.0.0.2), FI_TCP_IFACE/NCCL_SOCKET_IFNAME set, the
                  ranks reach rank 0 there; an interface no node has: named
Run with the ray venv's python, PLAIT_LIBRARY and PYTHONPATH=bindings/python
(ctest does). Prints PASS/FAIL per case; the last line "N passed, N failed".
"""
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import ray
    import torch  # noqa: F401  (the workers need it: say so here first)
except ImportError as e:
    print("SKIP: %s (run with the ray venv: ci/lib/ray.sh)" % e)
    sys.exit(77)

from cluster import Cluster, run_cases  # noqa: E402
from plait.ray import RayExecutor  # noqa: E402

ENV = {"PLAIT_TIMEOUT_S": "5", "OMP_NUM_THREADS": "1"}
GPUS_PER_NODE = 2


def settings(**kw):
    kw.setdefault("timeout_s", 120)
    kw.setdefault("placement_group_timeout_s", 60)
    return RayExecutor.create_settings(verbose=0, **kw)


def what_a_worker_sees():
    """Run in every worker: its layout, Ray's GPU ids, and the environment."""
    import torch
    import plait.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="sum").tolist()
    out = {"rank": hvd.rank(), "local_rank": hvd.local_rank(), "sum": total,
           "ray_gpu_ids": [str(g) for g in ray.get_gpu_ids()],
           "node": ray.get_runtime_context().get_node_id(),
           "rendezvous": os.environ.get("PLAIT_RENDEZVOUS"),
           "connected_to": _connected_to(os.environ["PLAIT_RENDEZVOUS"])}
    for k in ("CUDA_VISIBLE_DEVICES", "FI_TCP_IFACE", "NCCL_SOCKET_IFNAME"):
        out[k] = os.environ.get(k)
    hvd.shutdown()
    return out


def _connected_to(rendezvous):
    """The local 'ip:port' of this process's TCP sockets connected to rendezvous."""
    host, port = rendezvous.rsplit(":", 1)
    want = "%s:%04X" % (socket.inet_aton(host)[::-1].hex().upper(), int(port))
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = []
    for line in open("/proc/self/net/tcp").readlines()[1:]:
        f = line.split()
        if f[2] == want and f[9] in inodes and f[3] == "01":  # ESTABLISHED
            a, p = f[1].split(":")
            out.append("%s:%d" % (socket.inet_ntoa(bytes.fromhex(a)[::-1]), int(p, 16)))
    return out


def bundles_of(ex):
    table = ray.util.placement_group_table(ex._placement.group)
    return [table["bundles"][i] for i in sorted(table["bundles"])]


def check_devices(ex, results, per_worker):
    """Each node's workers see all the node's workers' GPUs, in local-rank
    order; a worker's own GPUs come at local_rank * per_worker."""
    by_node = {}
    for r in results:
        by_node.setdefault(r["node"], []).append(r)
    for node, rs in by_node.items():
        rs.sort(key=lambda r: r["local_rank"])
        mine = [g for r in rs for g in r["ray_gpu_ids"]]
        assert len(mine) == len(set(mine)) == per_worker * len(rs), (node, mine)
        for r in rs:
            assert len(r["ray_gpu_ids"]) == per_worker, r
            assert r["CUDA_VISIBLE_DEVICES"] == ",".join(mine), (r, mine)
            at = r["local_rank"] * per_worker
            assert r["CUDA_VISIBLE_DEVICES"].split(",")[at:at + per_worker] == \
                r["ray_gpu_ids"], r
    for s, r in zip(ex.layout, results):
        assert s["gpu_ids"] == r["ray_gpu_ids"], (s, r)


def run_gpu_job(ex, per_worker, n):
    ex.start(extra_env_vars=ENV)
    try:
        bundles = bundles_of(ex)
        print("  bundles %s; GPUs free while running: %g" % (
            bundles, ray.available_resources().get("GPU", 0)))
        used = sum(b.get("GPU", 0) for b in bundles)
        assert used == per_worker * n, bundles
        assert ray.available_resources().get("GPU", 0) == 2 * GPUS_PER_NODE - used
        results = ex.run(what_a_worker_sees)
        for r in results:
            assert r["sum"] == [float(n)] * 3, r
        print("  " + "; ".join("rank %d local %d: Ray's %s, CUDA_VISIBLE_DEVICES=%s" % (
            r["rank"], r["local_rank"], r["ray_gpu_ids"], r["CUDA_VISIBLE_DEVICES"])
            for r in results))
        check_devices(ex, results, per_worker)
        return bundles
    finally:
        ex.shutdown()
        deadline = time.monotonic() + 30  # the GPUs go back to Ray
        while ray.available_resources().get("GPU", 0) < 2 * GPUS_PER_NODE:
            assert time.monotonic() < deadline, ray.available_resources()
            time.sleep(0.2)


def case_gpu_pack(cluster):
    ex = RayExecutor(settings(), num_workers=4, use_gpu=True)
    bundles = run_gpu_job(ex, 1, 4)
    assert all(b == {"CPU": 1.0, "GPU": 1.0} for b in bundles), bundles


def case_gpu_two_each(cluster):
    ex = RayExecutor(settings(), num_hosts=2, num_workers_per_host=1, use_gpu=True,
                     gpus_per_worker=2)
    bundles = run_gpu_job(ex, 2, 2)
    assert bundles == [{"CPU": 1.0, "GPU": 2.0}] * 2, bundles


def case_too_few_gpus(cluster):
    for kw, asked in ((dict(num_workers=5, use_gpu=True), "5 bundle(s) {CPU: 1, GPU: 1}"),
                      (dict(num_workers=1, use_gpu=True, gpus_per_worker=3),
                       "1 bundle(s) {CPU: 1, GPU: 3} with strategy PACK ({CPU: 1, GPU: 3} in all);"
                       " the cluster has {CPU: 4, GPU: 4} free of {CPU: 4, GPU: 4} on 2 alive"
                       " node(s); no node has more than GPU: 2")):
        ex = RayExecutor(settings(placement_group_timeout_s=3), **kw)
        t0 = time.monotonic()
        try:
            ex.start(extra_env_vars=ENV)
            raise AssertionError("placed: %s" % kw)
        except TimeoutError as e:
            took = time.monotonic() - t0
            print("  %s: after %.1fs: %s" % (kw, took, e))
            assert took < 3 + 30, took
            assert asked in str(e) and "free of {CPU: 4, GPU: 4}" in str(e), e
        finally:
            ex.shutdown()
    try:
        RayExecutor(settings(), num_workers=1, use_gpu=True, gpus_per_worker=0)
        raise AssertionError("gpus_per_worker=0 accepted")
    except ValueError as e:
        assert "gpus_per_worker=0" in str(e), e


def case_nics(cluster):
    ex = RayExecutor(settings(), num_hosts=2, num_workers_per_host=1)
    ex.start(extra_env_vars=ENV)
    try:  # without nics: rank 0 listens on its node's Ray address
        plain = ex.run(what_a_worker_sees)
    finally:
        ex.shutdown()
    assert plain[0]["rendezvous"].startswith("127.0.0.2:"), plain[0]
    assert plain[0]["FI_TCP_IFACE"] is None and plain[0]["NCCL_SOCKET_IFNAME"] is None
    ex = RayExecutor(settings(nics=["lo"]), num_hosts=2, num_workers_per_host=1)
    ex.start(extra_env_vars=ENV)
    try:
        results = ex.run(what_a_worker_sees)
    finally:
        ex.shutdown()
    for r in results:
        print("  rank %d: PLAIT_RENDEZVOUS=%s FI_TCP_IFACE=%s NCCL_SOCKET_IFNAME=%s, "
              "connected from %s" % (r["rank"], r["rendezvous"], r["FI_TCP_IFACE"],
                                     r["NCCL_SOCKET_IFNAME"], r["connected_to"]))
        assert r["rendezvous"].startswith("127.0.0.1:"), r
        assert r["FI_TCP_IFACE"] == "lo" and r["NCCL_SOCKET_IFNAME"] == "lo", r
        assert r["sum"] == [2.0] * 3, r
    assert results[1]["connected_to"], "rank 1 has no connection to rank 0's %s" % (
        results[1]["rendezvous"])
    assert all(a.startswith("127.0.0.1:") for a in results[1]["connected_to"]), results[1]
    ex = RayExecutor(settings(nics=["nosuch0"]), num_workers=2)
    t0 = time.monotonic()
    try:
        ex.start(extra_env_vars=ENV)
        raise AssertionError("nics=['nosuch0'] accepted")
    except RuntimeError as e:
        print("  after %.1fs: %s" % (time.monotonic() - t0, str(e)[:300]))
        assert "choosing rank 0's port failed on node" in str(e), e
        assert "ValueError: plait.ray: none of the interfaces ['nosuch0'] has an IPv4 " \
            "address on node" in str(e), e
    finally:
        ex.shutdown()


CASES = [v for k, v in sorted(globals().items()) if k.startswith("case_")]


def main(names):
    return run_cases(Cluster(nodes=2, cpus=2, gpus=GPUS_PER_NODE), CASES, names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
