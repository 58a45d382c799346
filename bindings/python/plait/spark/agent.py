"""plaitrun's start agent on Spark: runs a command in a relay task.

    PLAITRUN_AGENT="python -m plait.spark.agent --job-dir DIR" plaitrun ...
    python -m plait.spark.agent --job-dir DIR HOST 'REMOTE'

plaitrun's elastic driver, run by plait.spark.run_elastic on the Spark
driver, starts each worker as `$PLAITRUN_AGENT HOST 'REMOTE'` with the job
secret as the first line of the agent's stdin (docs/plaitrun.md, "Ranks on
other hosts"). HOST is a relay task's name (spark-task-P.A, what the
discovery script lists). The agent finds the task's address in
DIR/relays.json (plait.spark.registry), proves the job's key (DIR/key), and
sends REMOTE, the secret line, DIR/fn.pkl and the variables of DIR/env.json;
the task runs `sh -c REMOTE` on its executor (plait.spark.relay_task). The
agent streams the command's output to its own, forwards the rest of its
stdin, writes the worker's result into DIR/results/ and exits with REMOTE's
status. When its stdin ends or it gets SIGTERM, it closes the command's
stdin (plaitrun's wrapper in REMOTE then stops the command) and drops the
connection after a grace (the task then kills it). When the task is gone
(its executor lost) the agent exits 255 naming the task and its executor:
a failed worker to plaitrun's driver, which blacklists that host.
"""
import argparse
import json
import os
import signal
import sys
import threading

from plait.common import elastic_launch as _launch
from plait.spark import wire
from plait.spark.registry import RELAYS

GRACE_S = 15.0
KEY_FILE = "key"
ENV_FILE = "env.json"


def _say(text):
    sys.stderr.write("plait.spark.agent: %s\n" % text)
    sys.stderr.flush()


def _parse(argv):
    ap = argparse.ArgumentParser(prog="python -m plait.spark.agent",
                                 description="Runs plaitrun's REMOTE in a plait.spark relay task")
    ap.add_argument("--job-dir", required=True, help="plait.spark.run_elastic's folder")
    ap.add_argument("host", help="the relay task's name (spark-task-P.A)")
    ap.add_argument("remote", help="the command, run with sh -c on the task's executor")
    return ap.parse_args(argv)


def _read(folder, name, mode="rb"):
    with open(os.path.join(folder, name), mode) as f:
        return f.read()


def _where(info, host):
    return "%s (executor %s on %s)" % (host, info.get("executor"), info.get("host"))


def _forward_stdin(sock, stopping):
    stdin = sys.stdin.buffer
    try:
        while True:
            data = stdin.read1(65536)
            if not data:
                break
            wire.send(sock, wire.STDIN, data)
    except OSError:
        pass
    stopping.set()


def _closer(sock, stopping, done):
    """Once told to stop: the command's stdin closed, then after GRACE_S
    the connection dropped (the task kills the command)."""
    stopping.wait()
    try:
        wire.send(sock, wire.CLOSE)
    except OSError:
        return
    if not done.wait(GRACE_S):
        _say("the worker still runs %.0f s after it was told to stop: dropping it" % GRACE_S)
        try:
            sock.shutdown(2)
        except OSError:
            pass


def _relay(sock, args, where):
    out, err = sys.stdout.buffer, sys.stderr.buffer
    while True:
        try:
            kind, data = wire.recv(sock)
        except wire.Closed as e:
            _say("the Spark task relaying the worker on %s is gone (its executor lost or the "
                 "task killed): %s" % (where, e))
            return 255
        if kind == wire.OUT:
            out.write(data)
            out.flush()
        elif kind == wire.ERR:
            err.write(data)
            err.flush()
        elif kind == wire.VALUE:
            _launch.write_result(args.job_dir, data)
        elif kind == wire.EXIT:
            return int(json.loads(data)["status"])
        elif kind == wire.BUSY:
            _say("the Spark task %s runs another worker: %s" % (where, data.decode()))
            return 255


def main(argv=None):
    args = _parse(sys.argv[1:] if argv is None else argv)
    first = sys.stdin.buffer.readline()  # the secret, first
    stopping, done = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    try:
        relays = json.loads(_read(args.job_dir, RELAYS, "r"))
        key = bytes.fromhex(_read(args.job_dir, KEY_FILE, "r").strip())
        payload = _read(args.job_dir, "fn.pkl")
        env = json.loads(_read(args.job_dir, ENV_FILE, "r"))
    except (OSError, ValueError) as e:
        _say("cannot read the job's folder %s: %s" % (args.job_dir, e))
        return 255
    info = relays.get(args.host)
    if info is None:
        _say("no live Spark relay task is named %s (live: %s)"
             % (args.host, ", ".join(sorted(relays)) or "none"))
        return 255
    where = _where(info, args.host)
    try:
        sock = wire.connect(info["address"], key, b"agent")
        wire.send_json(sock, wire.RUN, {"remote": args.remote, "env": env})
        wire.send(sock, wire.FIRST, first)
        wire.send(sock, wire.PAYLOAD, payload)
    except (OSError, wire.Closed) as e:
        _say("cannot reach the Spark task %s at %s: %s" % (where, info["address"], e))
        return 255
    threading.Thread(target=_forward_stdin, args=(sock, stopping), daemon=True).start()
    threading.Thread(target=_closer, args=(sock, stopping, done), daemon=True).start()
    try:
        return _relay(sock, args, where)
    finally:
        done.set()
        sock.close()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
