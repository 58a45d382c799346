"""The driver side of plait.spark.run_elastic's relay tasks: where they
register, and the host list plaitrun's discovery script reads.

A TCP server on the Spark driver's address (spark.driver.host, which every
executor reaches). Each relay task (plait.spark.relay_task) connects, proves
the job's key and registers its name and address; it is a live host of one
slot for as long as its connection lasts. Every second, and at every change,
the registry rewrites in the job's private folder
- `hosts` (plait.common.elastic_launch.HostsFile): `name:1` per live task,
  what the discovery script prints for plaitrun;
- `relays.json`: name -> {address, host, executor, pid}, what the start
  agents (plait.spark.agent) read to reach a task.
A task's connection that ends (its executor lost, the task killed) removes
its host. `close` ends every connection, which ends the tasks.
"""
import json
import os
import socket
import threading

from plait.common.elastic_launch import HostsFile
from plait.spark import wire

REFRESH_S = 1.0
RELAYS = "relays.json"


class Registry:
    def __init__(self, folder, key, bind_host):
        self.folder, self.key = folder, key
        self.hosts_file = HostsFile(folder, "plait.spark.run_elastic")
        self.live = {}    # name -> what the task registered
        self.lock = threading.Condition()
        self.write_lock = threading.Lock()  # one writer of the files at a time
        self.conns = []
        self.closed = threading.Event()
        infos = socket.getaddrinfo(bind_host, 0, type=socket.SOCK_STREAM)
        family, _, _, _, addr = infos[0]
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(addr)
        self.sock.listen(64)
        self.sock.settimeout(REFRESH_S)
        self.address = wire.format_address(addr[0], self.sock.getsockname()[1])
        self._write()
        self.thread = threading.Thread(target=self._accept, name="plait.spark registry",
                                       daemon=True)
        self.thread.start()

    def _write(self):
        with self.write_lock:
            self._write_files()

    def _write_files(self):
        with self.lock:
            live = dict(self.live)
        self.hosts_file.write({name: 1 for name in sorted(live, key=_order)})
        path = os.path.join(self.folder, RELAYS)
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(live, f)
        os.replace(path + ".tmp", path)

    def _accept(self):
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                self._write()  # keeps the list fresh for the discovery script
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        conn.settimeout(None)
        name = None
        try:
            if not wire.challenge(conn, self.key, b"task"):
                return
            kind, data = wire.recv(conn)
            if kind != wire.REGISTER:
                return
            info = json.loads(data)
            name = info["name"]
            with self.lock:
                if self.closed.is_set():
                    return
                self.conns.append(conn)
                self.live[name] = info
                self.lock.notify_all()
            self._write()
            while True:
                wire.recv(conn)  # nothing is sent: this waits for the end
        except (wire.Closed, ValueError, KeyError):
            pass
        finally:
            conn.close()
            if name is not None:
                with self.lock:
                    self.live.pop(name, None)
                    if conn in self.conns:
                        self.conns.remove(conn)
                    self.lock.notify_all()
                if not self.closed.is_set():
                    self._write()

    def wait_for(self, count, timeout_s):
        """Waits until count tasks are live (or timeout_s); how many are."""
        with self.lock:
            self.lock.wait_for(lambda: len(self.live) >= count, timeout_s)
            return len(self.live)

    def close(self):
        self.closed.set()
        self.sock.close()
        with self.lock:
            conns, self.conns = self.conns, []
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        self.thread.join(5)


def _order(name):
    """spark-task-P.A -> (P, A): hosts listed in partition order."""
    try:
        part, attempt = name.rsplit("-", 1)[1].split(".")
        return int(part), int(attempt)
    except (ValueError, IndexError):
        return (1 << 30, 0)
