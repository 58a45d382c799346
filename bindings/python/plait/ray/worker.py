"""The Ray actor that is one plait rank (plait.ray.runner makes them).

The driver ships this class by value, so a node whose Python cannot import
plait yet still starts it; `hello` then makes plait importable (the driver's
package folder is appended to sys.path, the library found through
PLAIT_LIBRARY or the package's own lookup) and reports the node and the
plait versions there. The job's layout and secret arrive as arguments of
`setup`, which puts them into os.environ before any user function imports
plait: never on a command line, never in Ray's runtime_env.
"""
import os
import socket
import sys


class PlaitRayWorker:
    def __init__(self):
        self.executable = None

    def hello(self, package_dir, env):
        """Makes plait importable; returns where this actor runs and its plait."""
        os.environ.update(env)
        if package_dir and package_dir not in sys.path:
            sys.path.append(package_dir)
        import ray
        info = {"node_id": ray.get_runtime_context().get_node_id(),
                "ip": ray.util.get_node_ip_address(), "hostname": socket.gethostname(),
                "pid": os.getpid(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}
        try:
            import plait
            from plait import _core
            info.update(version=plait.__version__, library_version=int(_core.lib.plait_version()),
                        library_path=plait.library_path)
        except Exception as e:  # reported by the driver with the node's name
            info["import_error"] = "%s: %s" % (type(e).__name__, e)
        return info

    def listen_address(self, ip, nics=None):
        """(ip, port, nic) free on this node now, for rank 0 to listen on
        (PLAIT_RENDEZVOUS): on the node's Ray address (nic None), or on the
        first of nics (interface names) that has an IPv4 address here."""
        chosen = None
        for nic in nics or ():
            try:
                ip, chosen = _nic_address(nic), nic
                break
            except OSError:
                continue
        else:
            if nics:
                raise ValueError("plait.ray: none of the interfaces %s has an IPv4 address on "
                                 "node %s" % (sorted(nics), socket.gethostname()))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((ip, 0))
            return ip, s.getsockname()[1], chosen

    def setup(self, env, executable_cls=None, args=None, kwargs=None):
        os.environ.update(env)
        if executable_cls is not None:
            self.executable = executable_cls(*(args or ()), **(kwargs or {}))
        return True

    def execute(self, fn):
        return fn(self.executable)

    def run(self, fn, args, kwargs):
        return fn(*(args or ()), **(kwargs or {}))


def _nic_address(name):
    """The IPv4 address of interface name (SIOCGIFADDR)."""
    import fcntl
    import struct
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("256s", name[:15].encode())
        return socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, req)[20:24])
