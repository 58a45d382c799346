"""Where plait.ray's worker actors go: one Ray placement group per job.

As horovod.ray 0.28.1 does: `num_workers` alone packs one bundle per worker
(strategy PACK: as few nodes as fit); `num_hosts` x `num_workers_per_host`
asks for one bundle per host holding that host's workers, on distinct nodes
(STRICT_SPREAD). A group that Ray cannot place within
`placement_group_timeout_s` is removed again and reported with what was
asked and what the cluster has free.
"""
import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


class Placement:
    """The placement group of one job and, per worker, its bundle index."""

    def __init__(self, num_workers=None, num_hosts=None, num_workers_per_host=1,
                 cpus_per_worker=1, gpus_per_worker=0):
        per_worker = {"CPU": float(cpus_per_worker)}
        if gpus_per_worker:
            per_worker["GPU"] = float(gpus_per_worker)
        self.per_worker = per_worker
        if num_workers is not None:
            self.strategy = "PACK"
            self.bundles = [dict(per_worker) for _ in range(num_workers)]
            self.bundle_of = list(range(num_workers))
        else:
            self.strategy = "STRICT_SPREAD"
            self.bundles = [{k: v * num_workers_per_host for k, v in per_worker.items()}
                            for _ in range(num_hosts)]
            self.bundle_of = [h for h in range(num_hosts) for _ in range(num_workers_per_host)]
        self.group = None

    def describe(self):
        total = {}
        for b in self.bundles:
            for k, v in b.items():
                total[k] = total.get(k, 0) + v
        return "%d bundle(s) %s with strategy %s (%s in all)" % (
            len(self.bundles), _fmt(self.bundles[0]), self.strategy, _fmt(total))

    def create(self, timeout_s):
        """Creates the group and waits for Ray to place it, at most timeout_s."""
        self.group = placement_group(self.bundles, strategy=self.strategy)
        ready, _ = ray.wait([self.group.ready()], timeout=timeout_s)
        if not ready:
            self.remove()
            raise TimeoutError(
                "plait.ray: Ray could not place the workers within placement_group_timeout_s="
                "%gs: asked for %s; the cluster has %s free of %s on %d alive node(s)%s" % (
                    timeout_s, self.describe(), _fmt(self._cpu_gpu(ray.available_resources())),
                    _fmt(self._cpu_gpu(ray.cluster_resources())), _alive_nodes(),
                    self._too_big()))

    def options(self, worker_index):
        """Actor options placing worker worker_index in its bundle."""
        opts = {"num_cpus": self.per_worker["CPU"],
                "scheduling_strategy": PlacementGroupSchedulingStrategy(
                    placement_group=self.group,
                    placement_group_bundle_index=self.bundle_of[worker_index])}
        if "GPU" in self.per_worker:
            opts["num_gpus"] = self.per_worker["GPU"]
        return opts

    def _too_big(self):
        """'; no node has more than GPU: 2' when a bundle is larger than every node."""
        most = {}
        for node in ray.nodes():
            if node.get("Alive"):
                for k, v in node.get("Resources", {}).items():
                    most[k] = max(most.get(k, 0), v)
        over = ["%s: %g" % (k, most.get(k, 0)) for k, v in sorted(self.bundles[0].items())
                if v > most.get(k, 0)]
        return "; no node has more than %s" % ", ".join(over) if over else ""

    def _cpu_gpu(self, resources):
        """CPUs, and GPUs when the cluster has some or the workers ask for them."""
        return {k: resources.get(k, 0) for k in ("CPU", "GPU")
                if k in resources or k in self.per_worker}

    def remove(self):
        if self.group is not None:
            try:
                remove_placement_group(self.group)
            except Exception:  # the cluster may be gone already
                pass
            self.group = None




def _fmt(resources):
    return "{%s}" % ", ".join("%s: %g" % (k, v) for k, v in sorted(resources.items()))


def _alive_nodes():
    return sum(1 for n in ray.nodes() if n.get("Alive"))
