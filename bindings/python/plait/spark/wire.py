"""Frames and the key check between plait.spark.run_elastic's pieces: the
driver's registry, the relay tasks on the executors, and the start agents.

A frame is one type byte, a 4-byte big-endian length and that many bytes.
Whoever accepts a connection proves nothing; whoever connects proves it holds
the job's key: the acceptor sends a random nonce, the connector answers
HMAC-SHA256(key, role + nonce), compared in constant time. The key is made
on the driver for each job and reaches the tasks in their closure and the
agents in a 0600 file of the driver's private job folder, never on a command
line. Standard library only.
"""
import hashlib
import hmac
import json
import os
import socket
import struct

NONCE = 32
MAX_FRAME = 1 << 30
_HEAD = struct.Struct(">cI")

# frame types
REGISTER = b"H"   # task -> registry: json {name, address, host, executor, pid}
RUN = b"R"        # agent -> task: json {remote, env}
FIRST = b"S"      # agent -> task: the first stdin line (the job secret)
PAYLOAD = b"P"    # agent -> task: fn.pkl's bytes
STDIN = b"I"      # agent -> task: more of the command's stdin
CLOSE = b"C"      # agent -> task: the command's stdin ends
OUT = b"O"        # task -> agent: the command's stdout
ERR = b"E"        # task -> agent: the command's stderr
VALUE = b"V"      # task -> agent: the worker's result.pkl
EXIT = b"X"       # task -> agent: json {status}
BUSY = b"B"       # task -> agent: json {why}: it runs another worker


class Closed(ConnectionError):
    """The other end closed the connection (or it broke)."""


def send(sock, kind, data=b""):
    if isinstance(data, str):
        data = data.encode()
    sock.sendall(_HEAD.pack(kind, len(data)) + data)


def send_json(sock, kind, value):
    send(sock, kind, json.dumps(value).encode())


def _read(sock, n):
    chunks = []
    while n:
        try:
            chunk = sock.recv(min(n, 1 << 20))
        except OSError as e:
            raise Closed(str(e)) from e
        if not chunk:
            raise Closed("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv(sock):
    """(type, bytes); Closed at the end."""
    kind, length = _HEAD.unpack(_read(sock, _HEAD.size))
    if length > MAX_FRAME:
        raise Closed("a frame of %d bytes: not a plait.spark peer" % length)
    return kind, _read(sock, length)


def _mac(key, role, nonce):
    return hmac.new(key, role + nonce, hashlib.sha256).digest()


def challenge(sock, key, role, timeout_s=10.0):
    """Acceptor side: True when the peer holds key (for role)."""
    nonce = os.urandom(NONCE)
    old = sock.gettimeout()
    sock.settimeout(timeout_s)
    try:
        sock.sendall(nonce)
        answer = _read(sock, 32)
    except (Closed, OSError):
        return False
    finally:
        sock.settimeout(old)
    return hmac.compare_digest(answer, _mac(key, role, nonce))


def answer(sock, key, role):
    """Connector side: proves it holds key."""
    sock.sendall(_mac(key, role, _read(sock, NONCE)))


def connect(address, key, role, timeout_s=10.0):
    """A connection to 'host:port' ('[v6]:port'), key proven."""
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host.strip("[]"), int(port)), timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    answer(sock, key, role)
    sock.settimeout(None)
    return sock


def format_address(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)
