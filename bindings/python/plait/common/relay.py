"""The Ray actor that plait.ray.agent runs a command in, on the node it names.

`Relay.start` runs `sh -c REMOTE` in the actor's process, writes the agent's
first stdin line (the job secret) to the command's stdin, and collects its
output; the agent fetches the output with `poll`, forwards the rest of its
stdin with `write` and ends it with `close_stdin`. The command is plaitrun's
remote wrapper, which stops the job's process when its stdin ends: closing
it (or the actor dying, which closes it too) stops the command.

Standard library only: the class travels to Ray's workers by value, so the
nodes need no plait installed to run it. A threaded actor (max_concurrency),
so that a `poll` waiting for output does not hold up `close_stdin`.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

RESULT = "result.pkl"  # what plait.common.worker_main writes in PLAITRAY_WORKER_DIR
FUNCTION = "fn.pkl"    # what it reads there


PREFIX = "plait-ray-worker-"  # + the actor's pid: the folders of dead actors are swept


def _sweep():
    """Removes the folders of relays whose process is gone (an actor killed
    with its node or by ray.kill has no chance to remove its own)."""
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        pid = name[len(PREFIX):].split("-")[0]
        if not name.startswith(PREFIX) or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        except PermissionError:
            pass  # another user's relay, alive


class Relay:
    def __init__(self):
        self._cond = threading.Condition()
        self._out, self._err = [], []
        self._open = 0  # output pipes not at their end yet
        self._proc = None
        self._dir = None
        self._exited_at = None

    def where(self):
        """(node address as Ray knows it, pid of the actor)."""
        return os.environ.get("RAY_NODE_IP_ADDRESS", ""), os.getpid()

    def start(self, remote, first_line, payload=None, env=None):
        """Starts `sh -c remote`; payload (bytes) becomes fn.pkl in a private
        folder named by PLAITRAY_WORKER_DIR. Returns the command's pid."""
        child_env = dict(os.environ)
        child_env.update(env or {})
        if payload is not None:
            _sweep()
            self._dir = tempfile.mkdtemp(prefix="%s%d-" % (PREFIX, os.getpid()))  # 0700
            with open(os.path.join(self._dir, FUNCTION), "wb") as f:
                f.write(payload)
            child_env["PLAITRAY_WORKER_DIR"] = self._dir
        self._proc = subprocess.Popen(["sh", "-c", remote], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=child_env, start_new_session=True, close_fds=True)
        self.write(first_line)
        self._open = 2
        for pipe, chunks in ((self._proc.stdout, self._out), (self._proc.stderr, self._err)):
            threading.Thread(target=self._drain, args=(pipe, chunks), daemon=True).start()
        return self._proc.pid

    def _drain(self, pipe, chunks):
        while True:
            data = pipe.read1(65536)
            with self._cond:
                if not data:
                    self._open -= 1
                    self._cond.notify_all()
                    return
                chunks.append(data)
                self._cond.notify_all()

    def write(self, data):
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the command is gone or its stdin closed: poll says so

    def close_stdin(self):
        try:
            self._proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def _status(self):
        """The exit status once the command ended and its output was read
        (or 2 s after it ended, for a grandchild that holds the pipes)."""
        rc = self._proc.poll()
        if rc is None:
            return None
        if self._exited_at is None:
            self._exited_at = time.monotonic()
        if self._open > 0 and time.monotonic() - self._exited_at < 2:
            return None
        return 128 - rc if rc < 0 else rc

    def poll(self, wait_s):
        """(stdout bytes, stderr bytes, status or None, result bytes or None):
        what came since the last poll, waiting up to wait_s for something."""
        deadline = time.monotonic() + wait_s
        with self._cond:
            while not (self._out or self._err) and self._status() is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.2))
            out, err = b"".join(self._out), b"".join(self._err)
            self._out.clear()
            self._err.clear()
            status = self._status()
        result = None
        if status is not None and self._dir:
            try:
                with open(os.path.join(self._dir, RESULT), "rb") as f:
                    result = f.read()
            except OSError:
                pass
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        return out, err, status, result

    def stop(self, grace_s):
        """Closes the command's stdin (its wrapper stops it), then kills its
        process group if it still runs after grace_s."""
        self.close_stdin()
        deadline = time.monotonic() + grace_s
        while self._proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
        return self._proc.wait()
