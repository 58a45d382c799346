"""plait.ray.RayExecutor: plait ranks as Ray actors, horovod.ray 0.28.1's API.

    import ray
    from plait.ray import RayExecutor

    ray.init(address="auto")
    settings = RayExecutor.create_settings(timeout_s=30)
    executor = RayExecutor(settings, num_workers=4)
    executor.start()
    ranks = executor.run(lambda: __import__("plait.torch").torch.init() or 0)
    executor.shutdown()

One actor per rank in one placement group (plait.ray.strategy); each node's
actors get contiguous ranks (plait.ray.layout); rank 0's actor picks the
rendezvous port on its node; the layout and a fresh job secret reach every
actor as arguments of an actor call (plait.ray.worker), never on a command
line or in Ray's runtime_env. docs/ray.md says what differs from Horovod.
"""
import dataclasses
import os
import secrets
import socket
import sys
import time

import ray
import ray.exceptions

from plait.ray import layout as _layout
from plait.ray import worker as _worker
from plait.ray.strategy import Placement


class WorkerLostError(RuntimeError):
    """A worker actor died (killed, its node lost) while the job ran."""


class WorkerFailedError(RuntimeError):
    """The job's function raised on some workers."""


@dataclasses.dataclass
class RaySettings:
    """What RayExecutor.create_settings returns (Horovod's settings' fields
    that mean something on Ray)."""
    timeout_s: float = 30
    placement_group_timeout_s: float = 100
    ssh_identity_file: str = None
    ssh_str: str = None
    nics: set = None
    verbose: int = 1


def _actor_class():
    # By value, so that a node whose Python cannot import plait still starts
    # the actor and says so (worker.hello).
    ray.cloudpickle.register_pickle_by_value(_worker)
    return ray.remote(_worker.PlaitRayWorker)


class RayExecutor:
    """A static plait job on a Ray cluster (horovod.ray.RayExecutor)."""

    @classmethod
    def create_settings(cls, timeout_s=30, ssh_identity_file=None, ssh_str=None,
                        placement_group_timeout_s=100, nics=None, verbose=1):
        """timeout_s bounds the workers' start (actors up, plait's start-up:
        PLAIT_START_TIMEOUT_S unless given); placement_group_timeout_s bounds
        the wait for Ray to place the workers. ssh_* are accepted for
        Horovod's signature and unused: Ray places the workers. nics: rank 0
        listens on the first of these interfaces it has."""
        for name, value in (("timeout_s", timeout_s),
                            ("placement_group_timeout_s", placement_group_timeout_s)):
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError("plait.ray: %s=%r must be a number of seconds > 0" % (name, value))
        return RaySettings(timeout_s=timeout_s, placement_group_timeout_s=placement_group_timeout_s,
                           ssh_identity_file=ssh_identity_file, ssh_str=ssh_str,
                           nics=set(nics) if nics else None, verbose=verbose)

    def __init__(self, settings, num_workers=None, num_hosts=None, num_workers_per_host=1,
                 cpus_per_worker=1, use_gpu=False, gpus_per_worker=None,
                 use_current_placement_group=True, min_workers=None, max_workers=None, **elastic):
        if min_workers is not None or max_workers is not None or elastic:
            raise ValueError("plait.ray.RayExecutor is the static executor: for min_workers/"
                             "max_workers use plait.ray.ElasticRayExecutor (docs/ray.md)")
        if (num_workers is None) == (num_hosts is None):
            raise ValueError("plait.ray: give either num_workers, or num_hosts with "
                             "num_workers_per_host (got num_workers=%r, num_hosts=%r)"
                             % (num_workers, num_hosts))
        for name, value in (("num_workers", num_workers), ("num_hosts", num_hosts),
                            ("num_workers_per_host", num_workers_per_host)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError("plait.ray: %s=%r must be an integer >= 1" % (name, value))
        if not isinstance(cpus_per_worker, (int, float)) or cpus_per_worker < 0:
            raise ValueError("plait.ray: cpus_per_worker=%r must be a number >= 0" % (cpus_per_worker,))
        if gpus_per_worker is not None and not use_gpu:
            raise ValueError("plait.ray: gpus_per_worker=%r needs use_gpu=True" % (gpus_per_worker,))
        self.settings = settings or RaySettings()
        if use_gpu and gpus_per_worker is not None and (
                not isinstance(gpus_per_worker, int) or gpus_per_worker < 1):
            raise ValueError("plait.ray: gpus_per_worker=%r must be an integer >= 1"
                             % (gpus_per_worker,))
        gpus = (gpus_per_worker or 1) if use_gpu else 0
        self._gpus_per_worker = gpus
        self.num_workers = num_workers if num_workers is not None else num_hosts * num_workers_per_host
        self._placement = Placement(num_workers, num_hosts, num_workers_per_host,
                                    cpus_per_worker, gpus)
        self.workers = []     # actor handles in rank order
        self.layout = []      # per rank: rank, local/cross rank and size, node id, ip, pid
        self._broken = None   # why run() can no longer be used

    # ------------------------------------------------------------------ start

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Places the workers, checks their plait, and hands each its rank.

        executable_cls(*executable_args, **executable_kwargs) is made on every
        worker after its environment is set (execute/execute_single get it).
        extra_env_vars: variables set on every worker before it runs anything
        of plait (PLAIT_TIMEOUT_S, PLAIT_LIBRARY, ...)."""
        if self.workers:
            raise RuntimeError("plait.ray: this executor is started already; shutdown() first")
        _connect()
        env = _forwarded_env(extra_env_vars)
        self._placement.create(self.settings.placement_group_timeout_s)
        try:
            self._start_workers(env, executable_cls, executable_args, executable_kwargs)
        except BaseException:
            self.shutdown()
            raise

    def _start_workers(self, env, executable_cls, executable_args, executable_kwargs):
        cls = _actor_class()
        actors = [cls.options(**self._placement.options(i)).remote()
                  for i in range(self.num_workers)]
        self.workers = actors  # so that shutdown() kills them whatever happens next
        import plait
        package_dir = os.path.dirname(os.path.dirname(os.path.abspath(plait.__file__)))
        infos = self._get([a.hello.remote(package_dir, env) for a in actors],
                          "starting the worker actors", names=None)
        _check_versions(infos)
        slots = _layout.assign_ranks([info["node_id"] for info in infos])
        self.workers = [actors[s["actor"]] for s in slots]
        self.layout = [dict(s, ip=infos[s["actor"]]["ip"], pid=infos[s["actor"]]["pid"],
                            hostname=infos[s["actor"]]["hostname"]) for s in slots]
        ip, port, nic = self._get([self.workers[0].listen_address.remote(
            self.layout[0]["ip"], sorted(self.settings.nics or ()))], "choosing rank 0's port")[0]
        job = dict(env, PLAIT_RENDEZVOUS="%s:%d" % (ip, port), PLAIT_SECRET=secrets.token_hex(32),
                   PLAIT_SIZE=str(self.num_workers))
        job.setdefault("PLAIT_START_TIMEOUT_S", "%g" % self.settings.timeout_s)
        if nic:  # horovod.ray's HOROVOD_GLOO_IFACE / NCCL_SOCKET_IFNAME: docs/ray.md
            job.setdefault("FI_TCP_IFACE", nic)
            job.setdefault("NCCL_SOCKET_IFNAME", ",".join(sorted(self.settings.nics)))
        per_rank = [{} for _ in self.layout]
        if self._gpus_per_worker:
            devices = _layout.visible_devices(
                self.layout, [infos[s["actor"]]["gpu_ids"] for s in slots], self._gpus_per_worker)
            for s, extra, visible in zip(self.layout, per_rank, devices):
                s["gpu_ids"] = infos[s["actor"]]["gpu_ids"]
                extra["CUDA_VISIBLE_DEVICES"] = visible
        self._get([w.setup.remote(dict(job, PLAIT_RANK=str(s["rank"]),
                                       PLAIT_LOCAL_RANK=str(s["local_rank"]),
                                       PLAIT_LOCAL_SIZE=str(s["local_size"]),
                                       PLAIT_HOSTNAME=s["node_id"], **extra),
                                  executable_cls, executable_args, executable_kwargs)
                   for w, s, extra in zip(self.workers, self.layout, per_rank)],
                  "setting the workers up")
        self._plait_timeout_s = float(job.get("PLAIT_TIMEOUT_S", "60"))
        if self.settings.verbose:
            print("plait.ray: %d workers on %d node(s), rank 0 listens on %s:%d" % (
                self.num_workers, len({s["node_id"] for s in self.layout}), ip, port),
                file=sys.stderr)

    def _get(self, refs, what, names=True):
        """ray.get of a start-up step, bounded by settings.timeout_s."""
        ready, pending = ray.wait(refs, num_returns=len(refs), timeout=self.settings.timeout_s)
        if pending:
            raise TimeoutError("plait.ray: %s took longer than timeout_s=%gs (%d of %d workers "
                               "answered)" % (what, self.settings.timeout_s, len(ready), len(refs)))
        out = []
        for i, ref in enumerate(refs):
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayError as e:
                who = self._describe(i) if names else "worker actor %d" % i
                raise RuntimeError("plait.ray: %s failed on %s: %s" % (what, who, _cause(e))) from e
        return out

    # ------------------------------------------------------------------- run

    def run_remote(self, fn, args=None, kwargs=None):
        """fn(*args, **kwargs) on every worker; the object refs, in rank order."""
        self._check_usable()
        return [w.run.remote(fn, args, kwargs) for w in self.workers]

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """fn(*args, **kwargs) on every worker; the results in rank order.

        callbacks: each is called on the driver with every worker's result as
        it arrives. A worker lost mid-job raises WorkerLostError naming its
        rank and node, once the others have failed too (plait fails them within
        PLAIT_TIMEOUT_S) or that long has passed; a function that raised on
        some workers raises WorkerFailedError naming them."""
        return self._collect(self.run_remote(fn, args, kwargs), callbacks)

    def execute(self, fn, callbacks=None):
        """fn(executable) on every worker (start's executable_cls); results in rank order."""
        self._check_usable()
        return self._collect([w.execute.remote(fn) for w in self.workers], callbacks)

    def execute_single(self, fn):
        """fn(executable) on rank 0's worker only; its result."""
        self._check_usable()
        return ray.get(self.workers[0].execute.remote(fn))

    def _check_usable(self):
        if not self.workers:
            raise RuntimeError("plait.ray: the executor is not started: call start() first")
        if self._broken:
            raise RuntimeError("plait.ray: the executor lost its job (%s): shutdown() and start() "
                               "a new one" % self._broken)

    def _collect(self, refs, callbacks=None):
        pending = {ref: rank for rank, ref in enumerate(refs)}
        results = [None] * len(refs)
        lost, failed, deadline = [], [], None
        while pending:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=timeout)
            if not ready:
                break
            rank = pending.pop(ready[0])
            try:
                results[rank] = ray.get(ready[0])
                for cb in callbacks or ():
                    cb(results[rank])
                continue
            except ray.exceptions.RayActorError as e:
                lost.append((rank, e))
            except ray.exceptions.RayError as e:  # the function raised on that worker
                failed.append((rank, e))
            if deadline is None:  # the others get plait's timeout to notice and fail
                deadline = time.monotonic() + self._plait_timeout_s + 1.0
        if not (lost or failed):
            return results
        self._fail(lost, failed, sorted(pending.values()))

    def _fail(self, lost, failed, hung):
        for rank in hung:  # stuck in a collective with a failed peer: of no use any more
            ray.kill(self.workers[rank], no_restart=True)
        parts = ["worker rank %d (%s) was lost: %s" % (r, self._describe(r), _first_line(e))
                 for r, e in lost]
        parts += ["rank %d (%s) raised %s" % (r, self._describe(r), _cause(e)) for r, e in failed]
        if hung:
            parts.append("rank(s) %s did not finish within PLAIT_TIMEOUT_S=%gs after that and "
                         "were stopped" % (", ".join(map(str, hung)), self._plait_timeout_s))
        if lost or hung:
            self._broken = "; ".join(parts[:1])
        cls = WorkerLostError if lost else WorkerFailedError
        raise cls("plait.ray: " + "; ".join(parts)) from (lost or failed)[0][1]

    def _describe(self, rank):
        if rank >= len(self.layout):
            return "worker actor %d" % rank
        s = self.layout[rank]
        return "node %s at %s, pid %d" % (s["node_id"][:12], s["ip"], s["pid"])

    # -------------------------------------------------------------- shutdown

    def shutdown(self):
        """Kills the worker actors (their processes end) and removes the placement group."""
        for w in self.workers:
            try:
                ray.kill(w, no_restart=True)
            except Exception:  # dead already, or the cluster is gone
                pass
        self.workers = []
        self.layout = []
        self._broken = None
        self._placement.remove()


def _connect():
    """ray.init unless done already; a clear error when no cluster answers."""
    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS", "auto")
    if address not in ("auto", "local") and not address.startswith("ray://"):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except (OSError, ValueError) as e:
            raise ConnectionError("plait.ray: no Ray cluster answers at RAY_ADDRESS=%s (%s): start "
                                  "one with `ray start --head` or call ray.init() first"
                                  % (address, e)) from e
    try:
        ray.init(address=address, log_to_driver=True)
    except ConnectionError as e:
        raise ConnectionError("plait.ray: no Ray cluster to run on (ray.init(address=%r): %s): "
                              "start one with `ray start --head`, set RAY_ADDRESS, or call "
                              "ray.init() before RayExecutor.start()" % (address, e)) from e


def _forwarded_env(extra_env_vars):
    """What every worker gets besides its layout: the driver's way to libplait
    and its plugins, then extra_env_vars."""
    env = {k: os.environ[k] for k in ("PLAIT_LIBRARY", "PLAIT_PLUGIN_PATH") if k in os.environ}
    for k, v in (extra_env_vars or {}).items():
        if k in ("PLAIT_SECRET", "PLAIT_RENDEZVOUS", "PLAIT_RANK", "PLAIT_SIZE"):
            raise ValueError("plait.ray: extra_env_vars may not set %s: the executor sets it" % k)
        env[str(k)] = str(v)
    return env


def _check_versions(infos):
    """Every worker must run the driver's plait (bindings and library)."""
    import plait
    from plait import _core
    mine = (plait.__version__, int(_core.lib.plait_version()))
    bad = []
    for i, info in enumerate(infos):
        where = "node %s (%s, worker pid %d)" % (info["node_id"][:12], info["ip"], info["pid"])
        if "import_error" in info:
            bad.append("%s cannot import plait: %s" % (where, info["import_error"]))
        elif (info["version"], info["library_version"]) != mine:
            bad.append("%s has plait %s (library %s, version code %d)" % (
                where, info["version"], info["library_path"], info["library_version"]))
    if bad:
        raise RuntimeError("plait.ray: plait version mismatch: the driver has plait %s (library %s,"
                           " version code %d) but %s" % (mine[0], plait.library_path, mine[1],
                                                         "; ".join(bad)))


def _first_line(e):
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _cause(e):
    cause = getattr(e, "cause", None)
    if cause is not None:
        return "%s: %s" % (type(cause).__name__, cause)
    return _first_line(e)
