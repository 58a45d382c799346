"""The Spark task side of plait.spark.run: one plait rank per barrier task.

Runs inside the task's Python worker on an executor. The layout comes from
the barrier: rank = partition id, hosts from BarrierTaskContext's task infos,
rank 0's rendezvous address through allGather. The secret arrives in the
task's closure (made on the driver), never through Spark's conf or a
command line. PLAIT_* are set in os.environ before fn (and plait) run, and
put back afterwards, because Spark reuses its Python workers.
"""
import io
import os
import socket
import sys

import cloudpickle

# Layout variables a task sets itself; never taken from the executor's or
# the driver's environment (another launcher's leftovers would confuse init).
LAYOUT_VARS = ("PLAIT_RANK", "PLAIT_SIZE", "PLAIT_LOCAL_RANK", "PLAIT_LOCAL_SIZE",
               "PLAIT_RENDEZVOUS", "PLAIT_SECRET", "PLAIT_HOSTNAME",
               "PLAIT_ELASTIC_DRIVER", "PLAIT_ELASTIC_WORKER")


def host_of(address):
    """'host:port' (or '[v6]:port') of a task info -> host."""
    host = address.rsplit(":", 1)[0] if ":" in address else address
    return host


def layout(hosts, rank):
    """(local_rank, local_size) of rank among the ranks on its host."""
    same = [r for r, h in enumerate(hosts) if h == hosts[rank]]
    return same.index(rank), len(same)


def free_port(host):
    """A port free on host now (rank 0 binds it again at init, as Horovod's
    driver does with the ports it hands out)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host.strip("[]"), 0))
        return s.getsockname()[1]


class _Tee(io.TextIOBase):
    """Writes to the executor's stream (its log) and keeps a copy for the
    driver."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text):
        self.copy.write(text)
        try:
            return self.stream.write(text)
        except Exception:  # noqa: BLE001 (a closed executor stream must not fail fn)
            return len(text)

    def flush(self):
        self.stream.flush()


def _environment(rank, size, hosts, rendezvous, secret, env):
    local_rank, local_size = layout(hosts, rank)
    values = dict(env)
    values.update({
        "PLAIT_RANK": str(rank), "PLAIT_SIZE": str(size),
        "PLAIT_LOCAL_RANK": str(local_rank), "PLAIT_LOCAL_SIZE": str(local_size),
        "PLAIT_HOSTNAME": hosts[rank], "PLAIT_RENDEZVOUS": rendezvous,
        "PLAIT_SECRET": secret,
    })
    return values


def _check_version(driver_version, rank, host):
    import plait
    if driver_version is not None and plait.__version__ != driver_version:
        raise RuntimeError(
            "plait.spark.run: plait version mismatch: the driver has %s, rank %d's "
            "executor on %s has %s (library %s); install the same plait on every node"
            % (driver_version, rank, host, plait.__version__, plait.library_path()))


def _shutdown_plait():
    """Ends a plait job fn left initialized, so that the reused Python worker
    is clean for the next task."""
    core = sys.modules.get("plait._core")
    if core is not None:
        try:
            if core.is_initialized():
                core.shutdown()
        except Exception:  # noqa: BLE001 (fn's own error matters more)
            pass


def make_task(fn_bytes, size, secret, env, driver_version, capture):
    """The function given to rdd.barrier().mapPartitions."""

    def task(_partition):
        from pyspark import BarrierTaskContext
        ctx = BarrierTaskContext.get()
        rank = ctx.partitionId()
        if ctx.attemptNumber() > 0:
            # Spark does not retry a barrier result stage; should it ever
            # re-run a task, the job fails rather than silently running twice.
            raise RuntimeError(
                "plait.spark.run: Spark re-ran rank %d's task after a failure (attempt %d); "
                "a plait job is not re-run: see the first failure" % (rank, ctx.attemptNumber()))
        hosts = [host_of(info.address) for info in ctx.getTaskInfos()]
        if len(hosts) != size:
            raise RuntimeError("plait.spark.run: %d barrier tasks, expected %d"
                               % (len(hosts), size))
        mine = ""
        if rank == 0:
            mine = "%s:%d" % (hosts[0], free_port(hosts[0]))
        rendezvous = ctx.allGather(mine)[0]
        saved = {k: os.environ.get(k) for k in set(env) | set(LAYOUT_VARS)}
        os.environ.update(_environment(rank, size, hosts, rendezvous, secret, env))
        out = err = None
        saved_streams = sys.stdout, sys.stderr
        if capture:
            out, err = _Tee(sys.stdout), _Tee(sys.stderr)
            sys.stdout, sys.stderr = out, err
        try:
            _check_version(driver_version, rank, hosts[rank])
            fn, args, kwargs = cloudpickle.loads(fn_bytes)
            result = fn(*args, **kwargs)
        finally:
            sys.stdout, sys.stderr = saved_streams
            _shutdown_plait()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        yield cloudpickle.dumps((rank, result, out.copy.getvalue() if out else "",
                                 err.copy.getvalue() if err else ""))

    return task
