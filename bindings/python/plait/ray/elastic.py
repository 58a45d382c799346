"""Elastic training on a Ray cluster: horovod.ray 0.28.1's ElasticRayExecutor.

    import ray
    from plait.ray import ElasticRayExecutor
    ray.init(address="auto")
    settings = ElasticRayExecutor.create_settings(min_np=2, max_np=8)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    results = executor.run(train_fn)   # train_fn uses plait.torch.elastic.run

There is no second driver in Python: `run` starts plaitrun's elastic driver
(docs/elastic.md) on this machine with
- a host discovery script that prints `host:slots` from ray.nodes() (alive
  nodes; slots = CPUs // cpus_per_slot, or GPUs // gpus_per_slot), refreshed
  by a thread of this process every second, so a node added to or lost from
  the cluster is a host added or removed;
- PLAITRUN_AGENT set to plait.ray.agent, which starts each worker inside a
  Ray actor on its node (holding the slot's CPUs and GPUs);
- `python -m plait.common.worker_main` as the workers' command: it runs
  worker_fn, pickled with cloudpickle into a private folder (0700) and sent
  to the node with the actor; the values the workers return come back the
  same way and `run` returns them, in rank order (docs/elastic.md, "Elastic
  on Ray").
"""
import json
import os
import shutil
import sys
import tempfile
import threading

import ray

from plait.common import elastic_launch as _launch
from plait.ray.agent import reachable as _reachable

DISCOVERY_PERIOD_S = 1.0


class ElasticSettings:
    """What create_settings returns (Horovod's ElasticSettings' fields that
    plait uses). `discovery`: None (ray.nodes()) or an object with
    find_available_hosts_and_slots() -> {host: slots}."""

    def __init__(self, min_np, max_np, reset_limit, elastic_timeout, timeout_s, cooldown_range,
                 nics, verbose, ssh_identity_file):
        self.min_np, self.max_np = min_np, max_np
        self.reset_limit = reset_limit
        self.elastic_timeout = elastic_timeout
        self.timeout_s = timeout_s
        self.cooldown_range = cooldown_range
        self.nics = nics
        self.verbose = verbose
        self.ssh_identity_file = ssh_identity_file
        self.discovery = None

    # Horovod's names for the same fields
    @property
    def min_num_proc(self):
        return self.min_np

    @property
    def max_num_proc(self):
        return self.max_np

    @property
    def num_proc(self):
        return self.min_np


def _first(what, *values, default=None):
    given = [v for v in values if v is not None]
    if len(set(given)) > 1:
        raise ValueError("%s given twice with different values: %s" % (what, given))
    return given[0] if given else default


def _check_int(name, value, low, allow_none=True):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError("%s=%r: expected an integer of at least %d" % (name, value, low))


class ElasticRayExecutor:
    """Runs an elastic plait job over the nodes of a Ray cluster (see the
    module's text). The Ray cluster is found as ray.init finds it: call
    ray.init first, or set RAY_ADDRESS (default "auto")."""

    @staticmethod
    def create_settings(min_num_proc=None, max_num_proc=None, reset_limit=None,
                        elastic_timeout=600, timeout_s=30, ssh_identity_file=None, nics=None,
                        min_np=None, max_np=None, min_workers=None, max_workers=None,
                        cooldown_range=None, verbose=1):
        """Horovod 0.28.1's settings: min_num_proc (or min_np, min_workers:
        the same), max_num_proc (max_np, max_workers), reset_limit,
        elastic_timeout (s), timeout_s (s for a worker's actor to start),
        cooldown_range (min_s, max_s) of a failed host. ssh_identity_file
        and nics are accepted and unused: no ssh, and plait picks the
        interface itself (PLAIT_IFACE in env_vars)."""
        lo = _first("the fewest workers (min_num_proc/min_np/min_workers)",
                    min_num_proc, min_np, min_workers, default=1)
        hi = _first("the most workers (max_num_proc/max_np/max_workers)",
                    max_num_proc, max_np, max_workers)
        _check_int("min_np", lo, 1, allow_none=False)
        _check_int("max_np", hi, 1)
        if hi is not None and hi < lo:
            raise ValueError("max_np=%d is below min_np=%d" % (hi, lo))
        _check_int("reset_limit", reset_limit, 0)
        for name, v in (("elastic_timeout", elastic_timeout), ("timeout_s", timeout_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                raise ValueError("%s=%r: expected seconds above 0" % (name, v))
        if cooldown_range is not None:
            if (len(cooldown_range) != 2 or not all(isinstance(v, int) for v in cooldown_range)
                    or not 0 <= cooldown_range[0] <= cooldown_range[1]):
                raise ValueError("cooldown_range=%r: expected (min_s, max_s), integers, "
                                 "0 <= min_s <= max_s" % (cooldown_range,))
        return ElasticSettings(lo, hi, reset_limit, elastic_timeout, timeout_s, cooldown_range,
                               nics, verbose, ssh_identity_file)

    def __init__(self, settings, use_gpu=False, cpus_per_slot=1, gpus_per_slot=None,
                 env_vars=None, override_discovery=True):
        if not isinstance(settings, ElasticSettings):
            raise TypeError("settings: expected ElasticRayExecutor.create_settings(...), got %r"
                            % type(settings).__name__)
        if gpus_per_slot and not use_gpu:
            raise ValueError("gpus_per_slot is set, but use_gpu is False")
        gpus_per_slot = gpus_per_slot or int(bool(use_gpu))
        if use_gpu and gpus_per_slot < 1:
            raise ValueError("gpus_per_slot must be >= 1: got %r" % gpus_per_slot)
        if not cpus_per_slot or cpus_per_slot <= 0:
            raise ValueError("cpus_per_slot must be above 0: got %r" % cpus_per_slot)
        if override_discovery or settings.discovery is None:
            settings.discovery = None  # ray.nodes()
        self.settings = settings
        self.use_gpu = bool(use_gpu)
        self.cpus_per_slot = cpus_per_slot
        self.gpus_per_slot = gpus_per_slot if use_gpu else 0
        self.env_vars = {str(k): str(v) for k, v in (env_vars or {}).items()}
        self._dir = None
        self._address = None
        self._plaitrun = None
        self._stop = threading.Event()
        self._thread = None
        self._error = None

    # -- the Ray side -------------------------------------------------------

    def start(self):
        """Connects to Ray (if not yet), finds plaitrun, makes the job's
        private folder and starts the host discovery thread."""
        if not ray.is_initialized():
            address = os.environ.get("RAY_ADDRESS", "auto")
            try:
                _reachable(address)  # ray.init retries a silent address for minutes
                ray.init(address=address, logging_level="ERROR")
            except Exception as e:
                raise RuntimeError("plait.ray: cannot connect to a Ray cluster at %r (is Ray "
                                   "running? start it with `ray start --head`, or set "
                                   "RAY_ADDRESS): %s" % (address, str(e).splitlines()[0])) from e
        self._address = ray.get_runtime_context().gcs_address
        self._plaitrun = _launch.find_plaitrun("plait.ray")
        self._dir = tempfile.mkdtemp(prefix="plait-ray-elastic-")  # 0700
        self._write_hosts(self._hosts())
        self._thread = threading.Thread(target=self._discover, daemon=True)
        self._thread.start()

    def _hosts(self):
        if self.settings.discovery is not None:
            found = self.settings.discovery.find_available_hosts_and_slots()
            return {str(h): int(s) for h, s in found.items() if int(s) > 0}
        hosts = {}
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            res = node.get("Resources", {})
            slots = int(res.get("CPU", 0) // self.cpus_per_slot)
            if self.use_gpu:
                slots = min(slots, int(res.get("GPU", 0) // self.gpus_per_slot))
            if slots > 0:
                host = node["NodeManagerAddress"]
                hosts[host] = hosts.get(host, 0) + slots
        return hosts

    def _write_hosts(self, hosts):
        _launch.HostsFile(self._dir, "plait.ray.elastic").write(hosts)

    def _discover(self):
        while not self._stop.wait(DISCOVERY_PERIOD_S):
            try:
                self._write_hosts(self._hosts())
            except Exception as e:  # the script goes stale and says so
                self._error = "%s: %s" % (type(e).__name__, e)

    def _script(self):
        """The discovery script plaitrun runs: the host list this process
        keeps (ray.nodes()), failing when it is stale."""
        return _launch.HostsFile(self._dir, "plait.ray.elastic").script()

    # -- the job -------------------------------------------------------------

    def _argv(self):
        s = self.settings
        argv = [self._plaitrun, "--min-np", str(s.min_np), "--host-discovery-script",
                self._script(), "--elastic-timeout", str(int(s.elastic_timeout))]
        if s.max_np is not None:
            argv += ["--max-np", str(s.max_np)]
        if s.reset_limit is not None:
            argv += ["--reset-limit", str(s.reset_limit)]
        if s.cooldown_range is not None:
            argv += ["--blacklist-cooldown-range", str(s.cooldown_range[0]),
                     str(s.cooldown_range[1])]
        return argv + [sys.executable, "-m", "plait.common.worker_main"]

    def _env(self):
        for word in (sys.executable, self._dir, self._address):
            if any(c.isspace() for c in word):
                raise RuntimeError("plait.ray: %r has a blank in it, which PLAITRUN_AGENT cannot "
                                   "carry (its words are split at blanks)" % word)
        agent = [sys.executable, "-m", "plait.ray.agent", "--address", self._address,
                 "--cpus", str(self.cpus_per_slot), "--gpus", str(self.gpus_per_slot),
                 "--start-timeout", str(self.settings.timeout_s), "--job-dir", self._dir]
        env = dict(os.environ)
        env.update(self.env_vars)
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in paths if p != here])
        env["PLAITRUN_AGENT"] = " ".join(agent)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def run(self, worker_fn, callbacks=None, args=None, kwargs=None):
        """Runs worker_fn(*args, **kwargs) on every worker of the elastic job
        until the job ends; the values of the workers that returned, in rank
        order. RuntimeError naming plaitrun's reason when the job fails."""
        if self._dir is None:
            raise RuntimeError("plait.ray: call ElasticRayExecutor.start() before run()")
        if callbacks:
            raise NotImplementedError("plait.ray: callbacks (values rank 0 logs through "
                                      "horovod.ray's queue) are not supported: print from the "
                                      "worker, plaitrun streams every worker's output")
        if not callable(worker_fn):
            raise TypeError("worker_fn: expected a function, got %r" % type(worker_fn).__name__)
        results = os.path.join(self._dir, "results")
        shutil.rmtree(results, ignore_errors=True)
        _launch.dump_function(os.path.join(self._dir, "fn.pkl"), worker_fn, args or (),
                              kwargs or {})
        with open(os.path.join(self._dir, "env.json"), "w") as f:
            json.dump(self.env_vars, f)  # the workers' variables, set by plait.ray.agent
        rc, tail = _launch.run_streamed(self._argv(), self._env())
        if rc != 0:
            raise RuntimeError("plait.ray: the elastic job failed (plaitrun exited %d): %s"
                               % (rc, _reason(tail, self._error)))
        return _launch.load_results(results)

    def shutdown(self):
        """Stops the discovery thread and removes the job's folder."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _reason(tail, discovery_error):
    why = _launch.reason(tail)
    if discovery_error and not _launch.STOPPING.search("\n".join(tail)):
        why += " (the last ray.nodes() query failed: %s)" % discovery_error
    return why
