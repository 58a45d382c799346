"""The Spark task side of plait.spark.run_elastic: a relay that runs
plaitrun's elastic workers on its executor when a start agent asks.

Each of the job's Spark tasks (plain, not barrier: one task's loss must not
end the others) runs `task` below for as long as the job lasts:
- it listens on its executor's address (the one its connection to the
  driver leaves from), connects to the driver's registry
  (plait.spark.registry), proves the job's key and registers as a host of
  one slot named spark-task-<partition>.<attempt> (one discovery host per
  task, as Horovod names every elastic Spark task a host of its own);
- it serves one start agent (plait.spark.agent) at a time: the agent proves
  the key and sends plaitrun's REMOTE, the secret line and the function;
  plait.common.relay.Relay runs `sh -c REMOTE` here and the task streams
  the output, the exit status and the worker's result back;
- it ends when the registry closes its connection (the job is over) or
  when its Python worker's parent is gone (the executor died); a command it
  still runs is stopped (its stdin closed, then killed).
A lost executor takes the task with it: its registry connection breaks, so
its host leaves discovery, and the agent's connection breaks, so plaitrun
counts that worker as failed.
"""
import json
import os
import socket
import sys
import threading
import time

from plait.common.relay import Relay
from plait.spark import wire

ACCEPT_POLL_S = 0.5
STOP_GRACE_S = 5.0


def _executor_id():
    """The executor's id from its JVM's command line (an ancestor), or '?'."""
    pid = os.getppid()
    for _ in range(4):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
            if b"--executor-id" in args:
                return args[args.index(b"--executor-id") + 1].decode()
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return "?"


class _Task:
    def __init__(self, registry, key, name):
        self.key, self.name = key, name
        self.stop = threading.Event()
        self.reg = wire.connect(registry, key, b"task")
        ip = self.reg.getsockname()[0]
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.bind((ip, 0))
        self.listener.listen(4)
        self.listener.settimeout(ACCEPT_POLL_S)
        self.address = wire.format_address(ip, self.listener.getsockname()[1])
        self.served = 0

    def register(self):
        wire.send_json(self.reg, wire.REGISTER, {
            "name": self.name, "address": self.address, "host": socket.gethostname(),
            "executor": _executor_id(), "pid": os.getpid()})
        threading.Thread(target=self._watch_registry, daemon=True).start()
        threading.Thread(target=self._watch_parent, args=(os.getppid(),), daemon=True).start()

    def _watch_registry(self):
        try:
            while True:
                wire.recv(self.reg)
        except wire.Closed:
            self.stop.set()

    def _watch_parent(self, ppid):
        while not self.stop.wait(1.0):
            if os.getppid() != ppid:
                self.stop.set()

    def serve_all(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                break
            conn.settimeout(None)
            try:
                self._serve(conn)
            except wire.Closed:
                pass
            finally:
                conn.close()
        self.listener.close()
        self.reg.close()

    def _serve(self, conn):
        if not wire.challenge(conn, self.key, b"agent"):
            return
        kind, data = wire.recv(conn)
        if kind != wire.RUN:
            return
        run = json.loads(data)
        first = payload = None
        while first is None or payload is None:
            kind, data = wire.recv(conn)
            if kind == wire.FIRST:
                first = data
            elif kind == wire.PAYLOAD:
                payload = data
        env = dict(run.get("env") or {})
        env["PLAITSPARK_PYTHON"] = sys.executable  # the worker runs on this Python
        env["PYTHONUNBUFFERED"] = "1"
        relay = Relay()
        relay.start(run["remote"], first, payload, env)
        self.served += 1
        gone = threading.Event()
        threading.Thread(target=self._agent_input, args=(conn, relay, gone), daemon=True).start()
        self._stream(conn, relay, gone)

    @staticmethod
    def _agent_input(conn, relay, gone):
        try:
            while True:
                kind, data = wire.recv(conn)
                if kind == wire.STDIN:
                    relay.write(data)
                elif kind == wire.CLOSE:
                    relay.close_stdin()
        except wire.Closed:
            gone.set()  # the agent is gone: nobody waits for this command

    def _stream(self, conn, relay, gone):
        stopping = None
        while True:
            if (self.stop.is_set() or gone.is_set()) and stopping is None:
                stopping = time.monotonic()
                relay.close_stdin()  # plaitrun's wrapper stops the command
            if stopping is not None and time.monotonic() - stopping > STOP_GRACE_S:
                relay.stop(0)
            out, err, status, result = relay.poll(0.5)
            try:
                if out:
                    wire.send(conn, wire.OUT, out)
                if err:
                    wire.send(conn, wire.ERR, err)
                if status is not None:
                    if result is not None:
                        wire.send(conn, wire.VALUE, result)
                    wire.send_json(conn, wire.EXIT, {"status": status})
            except OSError:
                gone.set()
            if status is not None:
                return


def make_task(registry, key):
    """The function given to rdd.mapPartitions: one relay per partition."""

    def task(_partition):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        name = "spark-task-%d.%d" % (ctx.partitionId(), ctx.attemptNumber())
        try:
            t = _Task(registry, key, name)
        except ConnectionRefusedError:
            # a task Spark started again after the job ended (its registry
            # closed): nothing to relay; failing would make Spark retry it
            sys.stderr.write("plait.spark relay task %s: the job's registry at %s is closed: "
                             "the job is over\n" % (name, registry))
            yield json.dumps({"name": name, "served": 0})
            return
        t.register()
        t.serve_all()
        yield json.dumps({"name": name, "served": t.served})

    return task
