"""Core-level rank launching from Python, the counterpart of ranks.c: the
Python tests that start plait jobs by hand (one process per rank, the
variables plaitrun would set) take their ports, environments and processes
from here (tests/bindings/torch/test_launch.py, test_bindings.py,
test_fidelity_api.py, test_interrupt_exit.py, tensorflow/unit/
test_tf_interrupt.py; tests/faults/chaos/chaos.py).
"""

import os
import random
import secrets
import socket
import subprocess
import sys
import textwrap

# What makes a process part of a bigger job or changes plait's
# configuration: ranks.c's is_job_var, the same list.
JOB_PREFIXES = ("PLAIT_", "HOROVOD_", "OMPI_", "PMI_", "PMIX_", "SLURM_")
JOB_NAMES = frozenset(("MPI_LOCALRANKID", "MPI_LOCALNRANKS", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                       "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
                       "TORCHELASTIC_USE_AGENT_STORE"))


def _bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_ports(count):
    """count consecutive TCP ports on 127.0.0.1 that were free a moment ago,
    below the kernel's ephemeral range, as plaitrun picks (a port from that
    range may become an outgoing connection's local port before rank 0 binds
    it); returns the first."""
    for _ in range(100):
        base = random.randrange(10000, 32000)
        if all(_bindable(p) for p in range(base, base + count)):
            return base
    raise RuntimeError("no %d consecutive free ports on 127.0.0.1" % count)


def free_port():
    """One free port (free_ports(1))."""
    return free_ports(1)


def clean_env(keep=("PLAIT_LIBRARY", "PLAIT_PLUGIN_PATH"), drop=(), **extra):
    """This process's environment without the job variables (JOB_PREFIXES,
    JOB_NAMES, and names starting with one of drop), except those named in
    keep; then extra."""
    prefixes = JOB_PREFIXES + tuple(drop)
    env = {k: v for k, v in os.environ.items()
           if k in keep or not (k.startswith(prefixes) or k in JOB_NAMES)}
    env.update(extra)
    return env


def rank_env(rank, n, port, secret, **extra):
    """The variables plaitrun gives rank `rank` of an n-rank job on this host
    (rendezvous at 127.0.0.1:port), then extra."""
    env = {"PLAIT_RANK": str(rank), "PLAIT_SIZE": str(n), "PLAIT_LOCAL_RANK": str(rank),
           "PLAIT_LOCAL_SIZE": str(n), "PLAIT_RENDEZVOUS": "127.0.0.1:%d" % port,
           "PLAIT_SECRET": secret}
    env.update(extra)
    return env


def plait_env(n, timeout_s):
    """env_for_rank(r) for an n-rank job on a fresh port and secret."""
    port = free_port()
    secret = secrets.token_hex(16)

    def env(r):
        return clean_env(**rank_env(r, n, port, secret, PLAIT_TIMEOUT_S=str(timeout_s)))
    return env


def start_ranks(code, n, env_for_rank):
    """Starts n ranks of `python -c code`; env_for_rank(r) gives each one's
    environment. Their stdout and stderr are pipes (text)."""
    script = textwrap.dedent(code)
    return [subprocess.Popen([sys.executable, "-c", script], env=env_for_rank(r),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in range(n)]
