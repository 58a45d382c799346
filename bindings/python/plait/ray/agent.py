"""plaitrun's start agent on Ray: runs a command on a Ray node, in an actor.

    PLAITRUN_AGENT="python -m plait.ray.agent --address HOST:PORT" plaitrun ...
    python -m plait.ray.agent [--address A] [--cpus N] [--gpus N] HOST 'REMOTE'

plaitrun (its elastic driver, or a plain -H job) starts each worker as
`$PLAITRUN_AGENT HOST 'REMOTE'` with the job secret as the first line of the
agent's stdin (docs/plaitrun.md, "Ranks on other hosts"). This agent connects
to the Ray cluster, creates a `plait.common.relay.Relay` actor pinned to the node
whose address is HOST (its `node:HOST` resource), holding N CPUs (and GPUs)
as a worker's slot, runs `sh -c REMOTE` inside it with the secret on the
command's stdin, and streams the command's stdout and stderr back to its own
(polling the actor). It exits with REMOTE's status. When its stdin ends or it
gets SIGTERM, it closes the command's stdin (plaitrun's wrapper in REMOTE
then stops the command) and kills the actor after a grace. If the actor dies
(its node lost, ray.kill), the agent exits 255 naming it, a failure to
plaitrun's driver, which blacklists the host.

With --job-dir (plait.ray.elastic's private folder on this machine) it also
sends DIR/fn.pkl with the command, which plait.common.worker_main runs, sets
the variables of DIR/env.json (the executor's env_vars) for it, and writes
the value the function returned to DIR/results/.
"""
import argparse
import json
import os
import signal
import socket
import sys
import threading
import time

from plait.common import elastic_launch as _launch
from plait.common import relay as _relay

GRACE_S = 15.0  # after stdin ended: the wrapper's own grace is shorter
ENV_FILE = "env.json"  # with --job-dir: the executor's env_vars, set for the command
POLL_S = 0.5    # the longest a poll waits in the actor for output


def _say(text):
    sys.stderr.write("plait.ray.agent: %s\n" % text)
    sys.stderr.flush()


def _parse(argv):
    ap = argparse.ArgumentParser(prog="python -m plait.ray.agent",
                                 description="Runs plaitrun's REMOTE command on a Ray node")
    ap.add_argument("--address", default=os.environ.get("RAY_ADDRESS", "auto"),
                    help="the Ray cluster (GCS address), default $RAY_ADDRESS or auto")
    ap.add_argument("--cpus", type=float, default=1.0, help="CPUs the actor holds (a slot)")
    ap.add_argument("--gpus", type=float, default=0.0, help="GPUs the actor holds")
    ap.add_argument("--start-timeout", type=float, default=30.0,
                    help="seconds for the actor to be placed and started")
    ap.add_argument("--job-dir", default="", help="plait.ray.elastic's folder (fn.pkl, results/)")
    ap.add_argument("host", help="the node's address, as ray.nodes() says it")
    ap.add_argument("remote", help="the command, run with sh -c")
    return ap.parse_args(argv)


def reachable(address, timeout_s=10):
    """ConnectionError unless a host:port address (not "auto", not
    ray://) accepts a TCP connection within timeout_s."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout_s).close()
    except OSError as e:
        raise ConnectionError("nothing answers at %s: %s" % (address, e)) from e


def _connect(address):
    import ray
    try:
        reachable(address)  # ray.init retries a silent address for minutes
        ray.init(address=address, logging_level="ERROR", log_to_driver=False,
                 configure_logging=False)
    except Exception as e:  # ConnectionError, or whatever Ray says
        _say("cannot connect to the Ray cluster at %s: %s" % (address, str(e).splitlines()[0]))
        sys.exit(255)
    return ray


def _node_alive(ray, host):
    return any(n.get("Alive") and n.get("NodeManagerAddress") == host for n in ray.nodes())


def _start_actor(ray, args, secret):
    payload = None
    if args.job_dir:
        with open(os.path.join(args.job_dir, _relay.FUNCTION), "rb") as f:
            payload = f.read()
    try:
        ray.cloudpickle.register_pickle_by_value(_relay)
    except AttributeError:
        pass  # an older Ray: plait must then be importable on the nodes
    cls = ray.remote(_relay.Relay).options(
        num_cpus=args.cpus, num_gpus=args.gpus, resources={"node:%s" % args.host: 0.001},
        max_concurrency=4, max_restarts=0)
    actor = cls.remote()
    env = {"PYTHONUNBUFFERED": "1"}
    if args.job_dir and os.path.exists(os.path.join(args.job_dir, ENV_FILE)):
        with open(os.path.join(args.job_dir, ENV_FILE)) as f:
            env.update(json.load(f))
    ref = actor.start.remote(args.remote, secret, payload, env)
    try:
        ray.get(ref, timeout=args.start_timeout)
    except ray.exceptions.GetTimeoutError:
        ray.kill(actor)
        _say("no room for a worker on the Ray node %s within %.0f s (it needs %g CPUs, %g GPUs "
             "free)" % (args.host, args.start_timeout, args.cpus, args.gpus))
        sys.exit(255)
    return actor


def _forward_stdin(actor, stopping):
    """The rest of our stdin to the command's; at its end, stop."""
    stdin = sys.stdin.buffer
    while True:
        data = stdin.read1(65536)
        if not data:
            break
        actor.write.remote(data)
    stopping.set()


def _relay_output(ray, actor, args, stopping):
    """Polls the actor until the command ends; its status."""
    out, err = sys.stdout.buffer, sys.stderr.buffer
    stop_since = None
    while True:
        if stopping.is_set() and stop_since is None:
            stop_since = time.monotonic()
            actor.close_stdin.remote()
        if stop_since is not None and time.monotonic() - stop_since > GRACE_S:
            _say("REMOTE on %s still runs %.0f s after it was told to stop: killing its actor"
                 % (args.host, GRACE_S))
            ray.kill(actor)
            return 143
        try:
            o, e, status, result = ray.get(actor.poll.remote(POLL_S), timeout=POLL_S + 30)
        except ray.exceptions.GetTimeoutError:
            continue  # a busy node: ask again
        except ray.exceptions.RayActorError as exc:
            _say("the actor running the worker on the Ray node %s died (node lost or actor "
                 "killed): %s" % (args.host, str(exc).strip().splitlines()[0]))
            return 255
        if o:
            out.write(o)
            out.flush()
        if e:
            err.write(e)
            err.flush()
        if status is not None:
            if result is not None and args.job_dir:
                _launch.write_result(args.job_dir, result)
            try:
                ray.kill(actor)
            except Exception:
                pass
            return status


def main(argv=None):
    args = _parse(sys.argv[1:] if argv is None else argv)
    secret = sys.stdin.buffer.readline()  # first, before Ray prints or blocks anything
    stopping = threading.Event()
    ray = _connect(args.address)
    # after ray.init, whose own SIGTERM handler would end the agent at once
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    if not _node_alive(ray, args.host):
        _say("no alive Ray node has the address %s" % args.host)
        return 255
    actor = _start_actor(ray, args, secret)
    threading.Thread(target=_forward_stdin, args=(actor, stopping), daemon=True).start()
    return _relay_output(ray, actor, args, stopping)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # not Ray's atexit shutdown: the status is what counts
