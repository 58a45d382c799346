"""A worker started as the elastic driver would start it (PLAIT_ELASTIC_DRIVER
set), in a subprocess, against what this session can run without the
driver: plait.common.elastic sees it elastic before init, and init fails
with the library's named error (ValueError, as Horovod's failed init)
rather than exiting, since the driver did not remove the worker. The runs
with the driver are tests/faults/elastic/."""

import os
import socket
import subprocess
import sys
import textwrap
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from ranks import clean_env  # noqa: E402

WORKER = """
import plait.common.elastic as elastic
import plait.torch as hvd
assert elastic.enabled() is True
try:
    hvd.init()
except ValueError as e:
    assert not hvd.is_initialized()
    assert elastic.removed() is False
    print("INIT FAILED:", type(e).__name__, e)
else:
    raise AssertionError("init succeeded without a driver")
"""


def run_worker(**env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(WORKER)],
                          env=clean_env(**env), capture_output=True, text=True, timeout=120)


def test_not_elastic_by_default():
    p = subprocess.run([sys.executable, "-c",
                        "import plait.common.elastic as e; print(e.enabled(), e.removed())"],
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "False"]


def test_worker_without_its_name_fails_naming_it():
    p = run_worker(PLAIT_ELASTIC_DRIVER="127.0.0.1:9", PLAIT_SECRET="s" * 32)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "INIT FAILED" in p.stdout and "PLAIT_ELASTIC_WORKER" in p.stdout, p.stdout


def test_driver_that_closes_the_connection_is_a_named_error():
    """A peer that accepts and closes at once: init fails (bounded), naming
    the driver, and the worker is not taken as removed."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    stop = threading.Event()

    def close_everyone():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    t = threading.Thread(target=close_everyone, daemon=True)
    t.start()
    try:
        p = run_worker(PLAIT_ELASTIC_DRIVER="127.0.0.1:%d" % port,
                       PLAIT_ELASTIC_WORKER="127.0.0.1/0", PLAIT_SECRET="s" * 32,
                       PLAIT_ELASTIC_TIMEOUT_S="5")
    finally:
        stop.set()
        t.join()
        server.close()
    assert p.returncode == 0, p.stdout + p.stderr
    assert "INIT FAILED" in p.stdout and "elastic driver" in p.stdout, p.stdout
