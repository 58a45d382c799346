"""ctypes bindings to libplait's C ABI (include/plait/plait.h).

Framework-neutral: buffers are described by address, dtype code and shape.
Every enum value and message comes from the library itself; the only things
written here are the struct layouts and the handful of #define constants of
the header, and tests/bindings/torch/test_bindings.py checks those against the header
by compiling a program that prints them.

ctypes.CDLL releases the GIL around every foreign call, so a rank blocked in
plait_wait or plait_init does not stop the program's other Python threads
(waits are sliced so that signal handlers run: wait_sliced);
calls that never block also have twins that keep it (allreduce_async_gil,
release_gil, and wait_gil and wait_release_gil for a wait of timeout 0: see
there).
"""

import builtins
import ctypes
import operator
import os
import threading
import time

from plait.common import library as _library
from plait.common.exceptions import HorovodInternalError
from plait._structs import (  # the layouts of plait.h
    _STATS_COUNTERS, _STATS_TIMES, MAX_DIMS, OpOptions, Stats, Tensor, TransportInfo)

# The header's constants (checked against the header by the tests).
ABI_VERSION = 1
MAX_NAME = 1024
DEVICE_HOST = -1
# include/plait/elastic.h: the bits of plait_elastic_host_updates' *update
HOSTS_ADDED = 1
HOSTS_REMOVED = 2

__all__ = [
    "ABI_VERSION", "MAX_DIMS", "MAX_NAME", "DEVICE_HOST", "PlaitError",
    "Tensor", "OpOptions", "Stats", "TransportInfo", "Handle", "lib", "library_path",
    "RESULTS", "DTYPES", "OPS", "dtype_code", "op_code", "check",
]


# --------------------------------------------------------------------------
# Finding and loading the library
# --------------------------------------------------------------------------

def _open(path):
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


lib, library_path = _library.load(
    "libplait.so", "PLAIT_LIBRARY", _open, OSError, "plait",
    "Set PLAIT_LIBRARY to the library's path, run under plaitrun (which "
    "sets it), or install plait (docs/python.md).", system="plait")


# --------------------------------------------------------------------------
# Function table: name -> (restype, argtypes). Every function gets both.
# --------------------------------------------------------------------------

_R = ctypes.c_int  # plait_result_t
_P = ctypes.c_void_p
_S = ctypes.c_char_p
_IP = ctypes.POINTER(ctypes.c_int)
_TP = ctypes.POINTER(Tensor)
_OP = ctypes.POINTER(OpOptions)
_HP = ctypes.POINTER(ctypes.c_void_p)

_FUNCTIONS = {
    "plait_version": (ctypes.c_uint, []),
    "plait_version_string": (_S, []),
    "plait_abi_version": (ctypes.c_uint, []),
    "plait_strerror": (_S, [ctypes.c_int]),
    "plait_result_name": (_S, [ctypes.c_int]),
    "plait_last_error": (_S, []),
    "plait_dtype_name": (_S, [ctypes.c_int]),
    "plait_op_name": (_S, [ctypes.c_int]),
    "plait_dtype_size": (ctypes.c_size_t, [ctypes.c_int]),
    "plait_init": (_R, []),
    "plait_shutdown": (_R, []),
    "plait_is_initialized": (_R, [_IP]),
    "plait_rank": (_R, [_IP]),
    "plait_size": (_R, [_IP]),
    "plait_local_rank": (_R, [_IP]),
    "plait_local_size": (_R, [_IP]),
    "plait_cross_rank": (_R, [_IP]),
    "plait_cross_size": (_R, [_IP]),
    "plait_transport_name": (_R, [ctypes.POINTER(_S)]),
    "plait_transport_algorithm": (_R, [_S, ctypes.c_uint64, ctypes.POINTER(_S)]),
    "plait_transport_query": (_R, [_S, _S, ctypes.POINTER(TransportInfo)]),
    "plait_transport_list": (_R, [_P, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "plait_config_dump": (_R, [_P, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "plait_config_help": (_R, [_P, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "plait_config_set": (_R, [_S, _S]),
    "plait_tensor_1d": (_R, [_TP, _P, ctypes.c_size_t, ctypes.c_int]),
    "plait_allreduce_async": (_R, [_S, _TP, _TP, ctypes.c_int, _OP, _HP]),
    "plait_grouped_allreduce_async": (_R, [ctypes.c_size_t, ctypes.POINTER(_S), _TP, _TP,
                                           ctypes.c_int, _OP, _HP]),
    "plait_allgather_async": (_R, [_S, _TP, _OP, _HP]),
    "plait_broadcast_async": (_R, [_S, _TP, ctypes.c_int, _OP, _HP]),
    "plait_alltoall_async": (_R, [_S, _TP, ctypes.POINTER(ctypes.c_int64), _OP, _HP]),
    "plait_reducescatter_async": (_R, [_S, _TP, ctypes.c_int, _OP, _HP]),
    "plait_barrier_async": (_R, [_OP, _HP]),
    "plait_join_async": (_R, [_OP, _HP]),
    "plait_poll": (_R, [_P, _IP]),
    "plait_wait": (_R, [_P, ctypes.c_double]),
    "plait_release": (_R, [_P]),
    "plait_wait_release": (_R, [_P, ctypes.c_double, _IP]),
    "plait_handle_output": (_R, [_P, _TP]),
    "plait_handle_splits": (_R, [_P, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t]),
    "plait_handle_join_rank": (_R, [_P, _IP]),
    "plait_process_set_add": (_R, [_IP, ctypes.c_int, ctypes.POINTER(ctypes.c_int32)]),
    "plait_process_set_remove": (_R, [ctypes.c_int32]),
    "plait_process_set_size": (_R, [ctypes.c_int32, _IP]),
    "plait_process_set_rank": (_R, [ctypes.c_int32, _IP]),
    "plait_process_set_ranks": (_R, [ctypes.c_int32, _IP, ctypes.c_int, _IP]),
    "plait_process_set_ids": (_R, [ctypes.POINTER(ctypes.c_int32), ctypes.c_int, _IP]),
    "plait_stats": (_R, [ctypes.POINTER(Stats)]),
    "plait_stats_reset": (_R, []),
    "plait_timeline_start": (_R, [_S]),
    "plait_timeline_stop": (_R, []),
    "plait_elastic_enabled": (_R, [_IP]),
    "plait_elastic_epoch": (_R, [ctypes.POINTER(ctypes.c_uint64)]),
    "plait_elastic_host_updates": (_R, [ctypes.POINTER(ctypes.c_uint64),
                                        ctypes.POINTER(ctypes.c_uint)]),
    "plait_elastic_removed": (_R, [_IP]),
}

for _name, (_res, _args) in _FUNCTIONS.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args

# Calls that never block, made with the GIL held (ctypes.PyDLL): they
# take only short internal locks, and no thread of the library ever waits for
# Python. CDLL's release and re-take of the GIL, and the conversion of
# pointer-typed arguments (addresses are passed as ints here), cost about
# 0.6-0.7 us of the ~3 us a ctypes submission took (measured at 1 rank, 200
# in-place allreduces a step): plait.torch submits every operation through
# them (plait.torch._handles.submit), and its synchronize and Handle.release
# use them.
# test_bindings.py checks they take the same arguments as their CDLL twins.
_gil_lib = ctypes.PyDLL(library_path, mode=ctypes.RTLD_GLOBAL)


def _gil_twin(name):
    """The GIL-held twin of a library function: the same arguments, each
    pointer as a c_void_p (an int address, byref() or an array)."""
    fn = getattr(_gil_lib, name)
    slow = getattr(lib, name)
    fn.restype = slow.restype
    fn.argtypes = [_P if issubclass(t, ctypes._Pointer) else t for t in slow.argtypes]
    return fn


class _Twins:
    """gil.plait_allreduce_async, ...: every submission (plait_*_async only
    enqueues: short internal locks, never a wait), plait_release, and
    plait_wait and plait_wait_release (timeout 0 only: they then never block;
    they answer PLAIT_ERR_TIMEOUT while the operation runs; synchronize()
    tries one first, since after a burst's first wait the others have
    finished: plait_wait_release where the result needs nothing more from
    the handle, one foreign call instead of a wait and a release)."""


gil = _Twins()
for _name in [n for n in _FUNCTIONS if n.endswith("_async")] + [
        "plait_release", "plait_wait", "plait_wait_release"]:
    setattr(gil, _name, _gil_twin(_name))
allreduce_async_gil = gil.plait_allreduce_async
release_gil = gil.plait_release
wait_gil = gil.plait_wait
wait_release_gil = gil.plait_wait_release

if lib.plait_abi_version() != ABI_VERSION:
    raise ImportError(
        "plait: %s has ABI version %d but these bindings were written for "
        "version %d; use the bindings installed with that library"
        % (library_path, lib.plait_abi_version(), ABI_VERSION))


def _text(b):
    return b.decode("utf-8", "replace") if b is not None else None


# --------------------------------------------------------------------------
# Enums and errors, read from the library
# --------------------------------------------------------------------------

def _read_enum(name_fn, unknown):
    out = {}
    code = 0
    while True:
        name = _text(name_fn(code))
        if name is None or name == unknown:
            return out
        out[name] = code
        code += 1


RESULTS = _read_enum(lib.plait_result_name, "PLAIT_RESULT_UNKNOWN")
"""Result names ("PLAIT_ERR_PEER_LOST") to codes, as the library numbers them."""
DTYPES = _read_enum(lib.plait_dtype_name, None)
"""dtype names ("float32") to codes."""
OPS = _read_enum(lib.plait_op_name, None)
"""Reduction op names ("sum") to codes."""
RESULT_NAMES = {v: k for k, v in RESULTS.items()}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
SUCCESS = RESULTS["PLAIT_SUCCESS"]


class PlaitError(Exception):
    """A plait call failed. str() is the library's message (plait_last_error),
    e.g. a mismatch message naming the tensor, each value and its ranks.
    .code is the plait_result_t, .name its name ("PLAIT_ERR_MISMATCH").

    Every result code has its own subclass (ERRORS), which also derives from
    the class Horovod 0.28.1 raises in the same situation (_HOROVOD_BASES)."""

    def __init__(self, code, message):
        self.code = code
        self.name = RESULT_NAMES.get(code, "PLAIT_RESULT_UNKNOWN")
        super().__init__(message)

    def __reduce__(self):
        # pickle: rebuilt from code and message (Ray and Spark send a
        # worker's exception to the driver this way)
        return (type(self), (self.code, str(self)))


def _class_name(result_name):
    words = result_name.replace("PLAIT_ERR_", "").lower().split("_")
    name = "".join(w.capitalize() for w in words) + "Error"
    # Never shadow a builtin: PLAIT_ERR_TIMEOUT -> PlaitTimeoutError.
    return "Plait" + name if hasattr(builtins, name) else name


# What Horovod 0.28.1 raises for the same situation (its torch binding turns
# C++ std::invalid_argument into ValueError, and every other failure of an
# enqueue or of synchronize() into HorovodInternalError; its queries raise
# ValueError before init). A code not listed (the failures of a running
# job, and codes the library appends later) is a HorovodInternalError.
_HOROVOD_BASES = {
    # bad arguments at submission: a name already in flight, bad splits,
    # a root rank out of range (Horovod: Status::InvalidArgument)
    "PLAIT_ERR_INVALID_ARGUMENT": (ValueError,),
    # ops before init: HorovodInternalError; rank()/size() before init: ValueError
    "PLAIT_ERR_NOT_INITIALIZED": (HorovodInternalError, ValueError),
    "PLAIT_ERR_ALREADY_INITIALIZED": (ValueError,),
    "PLAIT_ERR_CONFIG": (ValueError,),          # a bad setting: init fails (ValueError)
    "PLAIT_ERR_PLUGIN": (ValueError,),          # a transport not built: init fails
    "PLAIT_ERR_UNSUPPORTED": (ValueError,),     # "Tensor type ... is not supported"
    "PLAIT_ERR_BUFFER_TOO_SMALL": (ValueError,),
    "PLAIT_ERR_NO_MEMORY": (HorovodInternalError, MemoryError),
    "PLAIT_ERR_TIMEOUT": (HorovodInternalError, TimeoutError),
}


# One subclass per result code, named from the library's list:
# PLAIT_ERR_PEER_LOST -> PeerLostError, PLAIT_ERR_MISMATCH -> MismatchError,
# PLAIT_ERR_TIMEOUT -> PlaitTimeoutError (also a builtin TimeoutError).
ERRORS = {}
for _rname, _code in RESULTS.items():
    if _code == SUCCESS:
        continue
    _name = _class_name(_rname)
    _bases = (PlaitError,) + _HOROVOD_BASES.get(_rname, (HorovodInternalError,))
    ERRORS[_code] = type(_name, _bases, {"__module__": "plait"})


def error(code, message=None):
    """The exception for a result code, with the calling thread's last
    error text (or message) as its text."""
    if message is None:
        message = _text(lib.plait_last_error()) or ""
    if not message:
        message = _text(lib.plait_strerror(code))
    return ERRORS.get(code, PlaitError)(code, message)


def check(code):
    """Raises the PlaitError for a failed result; returns None on success."""
    if code != SUCCESS:
        raise error(code)


def dtype_code(name):
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError("plait has no dtype %r; it has %s"
                         % (name, ", ".join(DTYPES))) from None


def op_code(name):
    try:
        return OPS[name]
    except KeyError:
        raise ValueError("plait has no reduction op %r; it has %s"
                         % (name, ", ".join(OPS))) from None


def dtype_size(code):
    return lib.plait_dtype_size(code)


# --------------------------------------------------------------------------
# Tensors and handles
# --------------------------------------------------------------------------

def make_tensor(address, dtype, shape, device=DEVICE_HOST):
    """A plait_tensor_t for row-major contiguous memory at address."""
    if len(shape) > MAX_DIMS:
        raise ValueError("plait: a tensor may have at most %d dimensions, this "
                         "one has %d" % (MAX_DIMS, len(shape)))
    t = Tensor()
    t.struct_size = ctypes.sizeof(Tensor)
    t.data = address or None
    t.dtype = dtype
    t.device = device
    t.ndim = len(shape)
    for i, n in enumerate(shape):
        t.shape[i] = int(n)
    return t


def tensor_shape(t):
    return tuple(t.shape[i] for i in range(t.ndim))


def tensor_nbytes(t):
    n = 1
    for d in tensor_shape(t):
        n *= d
    return n * dtype_size(t.dtype)


def options(prescale=1.0, postscale=1.0, process_set=0):
    o = OpOptions()
    o.struct_size = ctypes.sizeof(OpOptions)
    o.prescale_factor = float(prescale)
    o.postscale_factor = float(postscale)
    o.process_set = int(process_set)
    return o


# Handles dropped before they finished: their buffers must outlive the
# operation, so they are kept here until the operation completes.
_orphans = []
_orphans_lock = threading.Lock()


def _reap_orphans(block=False):
    with _orphans_lock:
        keep = []
        for h in _orphans:
            if block or h._poll_raw():
                lib.plait_release(h._ptr)
                h._ptr = None
            else:
                keep.append(h)
        _orphans[:] = keep


def poll_ptr(ptr):
    """plait_poll of the core handle at address ptr: True once finished."""
    done = ctypes.c_int(0)
    check(lib.plait_poll(ptr, ctypes.byref(done)))
    return bool(done.value)


# How long one plait_wait sleeps in C before Python looks at its signals.
# plait_wait blocks in pthread_cond_timedwait, where Python's signal handlers
# cannot run (a signal only sets a flag that the interpreter reads between
# bytecodes), so a wait is cut into slices: Ctrl-C's KeyboardInterrupt, a
# SIGALRM or SIGTERM handler (pytest-timeout) raises in the waiting thread
# within a slice. A slice ends at once when the operation finishes; an idle
# wait costs one wake-up per slice.
WAIT_SLICE_S = 0.05
_TIMEOUT = RESULTS["PLAIT_ERR_TIMEOUT"]
_wait = lib.plait_wait
_monotonic = time.monotonic


def wait_sliced(ptr, timeout=-1.0):
    """plait_wait(ptr, timeout) (timeout < 0: no limit) in slices of
    WAIT_SLICE_S, the GIL released in each: returns the operation's result,
    or PLAIT_ERR_TIMEOUT when timeout >= 0 passed first. An exception a
    signal handler raises between slices propagates with the operation
    still in flight: the caller keeps (or orphans) its handle and buffers."""
    if timeout >= 0 and timeout <= WAIT_SLICE_S:
        return _wait(ptr, timeout)
    deadline = None if timeout < 0 else _monotonic() + timeout
    while True:
        step = WAIT_SLICE_S
        if deadline is not None:
            step = min(step, max(deadline - _monotonic(), 0.0))
        rc = _wait(ptr, step)
        if rc != _TIMEOUT or (deadline is not None and step < WAIT_SLICE_S):
            return rc


class Handle:
    """An operation in flight. Keeps the Python objects whose memory the
    operation reads or writes (keep) alive until it has finished."""

    __slots__ = ("_ptr", "keep", "name", "_result", "__weakref__")

    def __init__(self, ptr, keep, name):
        self._ptr = ptr
        self.keep = keep
        self.name = name
        self._result = None

    def _poll_raw(self):
        return poll_ptr(self._ptr)

    def poll(self):
        """True once the operation has finished (successfully or not)."""
        if self._ptr is None:
            return True
        return self._poll_raw()

    def wait(self, timeout=-1.0):
        """Waits (GIL released) and raises the operation's error if it
        failed. With a timeout >= 0, raises TimeoutError while it is still
        running."""
        if self._ptr is None:
            raise ValueError("plait: handle for %r was already released" % self.name)
        if self._result is None:
            rc = wait_sliced(self._ptr, float(timeout))
            if rc == _TIMEOUT and timeout >= 0 and not self._poll_raw():
                raise TimeoutError("plait: %r has not finished after %g s" % (self.name, timeout))
            msg = _text(lib.plait_last_error()) if rc != SUCCESS else None
            self._result = (rc, msg)
        rc, msg = self._result
        if rc != SUCCESS:
            raise error(rc, msg)

    def output(self):
        """The plait_tensor_t of the output (valid until release)."""
        t = Tensor()
        t.struct_size = ctypes.sizeof(Tensor)
        check(lib.plait_handle_output(self._ptr, ctypes.byref(t)))
        return t

    def splits(self, size):
        arr = (ctypes.c_int64 * size)()
        check(lib.plait_handle_splits(self._ptr, arr, size))
        return list(arr)

    def join_rank(self):
        r = ctypes.c_int(-1)
        check(lib.plait_handle_join_rank(self._ptr, ctypes.byref(r)))
        return r.value

    def release(self):
        if self._ptr is not None:
            # After wait() the operation is known to be over: no poll needed.
            if self._result is not None or self._poll_raw():
                release_gil(self._ptr)
                self._ptr = None
                self.keep = None
            else:
                self._orphan()

    def _orphan(self):
        with _orphans_lock:
            orphan = Handle(self._ptr, self.keep, self.name)
            _orphans.append(orphan)
        self._ptr = None
        self.keep = None

    def __del__(self):
        try:
            if self._ptr is not None:
                self.release()
        except Exception:  # interpreter shutting down: the library may be gone
            pass


def submit(fn, name, keep, *args):
    """Calls a plait_*_async function; returns a Handle or raises."""
    if _orphans:  # cheap check first: submissions are on the hot path
        _reap_orphans()
    h = ctypes.c_void_p()
    check(fn(*args, ctypes.byref(h)))
    # The address as an int: the c_void_p is gone at once, and an operation
    # in flight is one object fewer for Python's collector to scan.
    return Handle(h.value, keep, name)


def encode_name(name):
    if not isinstance(name, str):
        raise TypeError("plait: a tensor name must be a str, not %s" % type(name).__name__)
    check_name_has_no_nul(name, "plait")
    return name.encode("utf-8")


def check_name_has_no_nul(name, where):
    """Names cross the C ABI as NUL-terminated strings: one holding a NUL
    would be cut there, and "a\\0rank0" and "a\\0rank1" would both be "a",
    reduced together. Such a name is refused (InvalidArgumentError, a
    ValueError)."""
    if "\0" in name:
        raise invalid("%s: tensor name %r contains a NUL character ('\\0'), which the C "
                      "library cannot carry (it would be cut there and could collide with "
                      "another name); remove it" % (where, name))


# ctypes converts a Python int that does not fit a C integer silently
# (c_int(2**32) is 0, c_int64(2**64) is 0, c_uint64(-1) is 2**64 - 1), so
# every integer a caller gives is checked here first.
INT32_RANGE = (-2**31, 2**31 - 1)
INT64_RANGE = (-2**63, 2**63 - 1)
UINT64_RANGE = (0, 2**64 - 1)


def invalid(message):
    """plait's InvalidArgumentError (a ValueError) with message."""
    return error(RESULTS["PLAIT_ERR_INVALID_ARGUMENT"], message)


def c_integer(value, what, bounds=INT32_RANGE, make_error=invalid):
    """value as a Python int within bounds (a C int's range by default):
    TypeError when it is not an integer; when it does not fit,
    make_error(message naming what, e.g. "plait.torch.broadcast: root_rank"),
    by default an InvalidArgumentError, a ValueError."""
    if isinstance(value, bool):
        raise TypeError("%s must be an int, not bool" % what)
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__)) from None
    lo, hi = bounds
    if not lo <= v <= hi:
        raise make_error("%s %d is out of range: it must be from %d to %d"
                         % (what, v, lo, hi))
    return v


# --------------------------------------------------------------------------
# Life cycle and queries
# --------------------------------------------------------------------------

def _query(fn):
    v = ctypes.c_int()
    check(fn(ctypes.byref(v)))
    return v.value


def init():
    check(lib.plait_init())


def shutdown():
    check(lib.plait_shutdown())
    _reap_orphans(block=True)


def is_initialized():
    return bool(_query(lib.plait_is_initialized))


def rank():
    return _query(lib.plait_rank)


def size():
    return _query(lib.plait_size)


def local_rank():
    return _query(lib.plait_local_rank)


def local_size():
    return _query(lib.plait_local_size)


def cross_rank():
    return _query(lib.plait_cross_rank)


def cross_size():
    return _query(lib.plait_cross_size)


def process_set_add(ranks):
    """Adds the process set of ranks (collective: every rank, same order);
    returns its id."""
    ranks = [int(r) for r in ranks]
    arr = (ctypes.c_int * max(len(ranks), 1))(*ranks)
    out = ctypes.c_int32(-1)
    check(lib.plait_process_set_add(arr, len(ranks), ctypes.byref(out)))
    return out.value


def process_set_remove(process_set_id):
    check(lib.plait_process_set_remove(int(process_set_id)))


def process_set_size(process_set_id):
    v = ctypes.c_int()
    check(lib.plait_process_set_size(int(process_set_id), ctypes.byref(v)))
    return v.value


def process_set_rank(process_set_id):
    """This rank's position in the set, -1 when it is not a member."""
    v = ctypes.c_int()
    check(lib.plait_process_set_rank(int(process_set_id), ctypes.byref(v)))
    return v.value


def process_set_ranks(process_set_id):
    n = ctypes.c_int(0)
    rc = lib.plait_process_set_ranks(int(process_set_id), None, 0, ctypes.byref(n))
    if rc not in (SUCCESS, RESULTS["PLAIT_ERR_BUFFER_TOO_SMALL"]):
        check(rc)
    arr = (ctypes.c_int * max(n.value, 1))()
    check(lib.plait_process_set_ranks(int(process_set_id), arr, n.value, ctypes.byref(n)))
    return list(arr[:n.value])


def process_set_ids():
    n = ctypes.c_int(0)
    rc = lib.plait_process_set_ids(None, 0, ctypes.byref(n))
    if rc not in (SUCCESS, RESULTS["PLAIT_ERR_BUFFER_TOO_SMALL"]):
        check(rc)
    arr = (ctypes.c_int32 * max(n.value, 1))()
    check(lib.plait_process_set_ids(arr, n.value, ctypes.byref(n)))
    return list(arr[:n.value])


def transport_name():
    s = ctypes.c_char_p()
    check(lib.plait_transport_name(ctypes.byref(s)))
    return _text(s.value)


def transport_algorithm(collective, nbytes):
    """The algorithm the transport runs for a collective ("allreduce", ...) of
    nbytes bytes in all; "" when the transport does not say."""
    s = ctypes.c_char_p()
    nbytes = c_integer(nbytes, "plait.transport_algorithm: nbytes", UINT64_RANGE)
    check(lib.plait_transport_algorithm(str(collective).encode(), nbytes, ctypes.byref(s)))
    return _text(s.value)


def transport_query(name, version_symbol=None):
    """What plait_init would find for transport plugin name, as the library
    reports it (plait_transport_query: Python loads no plugin itself): a
    TransportInfo whose found is 1 when the plugin is there and loads."""
    info = TransportInfo()
    info.struct_size = ctypes.sizeof(TransportInfo)
    check(lib.plait_transport_query(str(name).encode(),
                                    version_symbol.encode() if version_symbol else None,
                                    ctypes.byref(info)))
    return info


def transport_list():
    """The names of the transport plugins installed where plait_init looks."""
    return _text_call(lib.plait_transport_list).split()


def _text_call(fn):
    needed = ctypes.c_size_t(0)
    rc = fn(None, 0, ctypes.byref(needed))
    if rc not in (SUCCESS, RESULTS["PLAIT_ERR_BUFFER_TOO_SMALL"]):
        check(rc)
    buf = ctypes.create_string_buffer(needed.value)
    check(fn(buf, needed.value, ctypes.byref(needed)))
    return _text(buf.value)


def config_dump():
    """The effective configuration, NAME=value per line."""
    return _text_call(lib.plait_config_dump)


def config_set(name, value):
    """Changes PLAIT_FUSION_THRESHOLD, PLAIT_FUSION_MAX_TENSOR, PLAIT_CYCLE_TIME_MS,
    PLAIT_LOG_LEVEL or PLAIT_TIMELINE_MARK_CYCLES while plait runs (value as in
    the environment: "4M", "2.5"). Set the fusion threshold on every rank, to
    the same value."""
    check(lib.plait_config_set(str(name).encode(), str(value).encode()))


def config_help():
    return _text_call(lib.plait_config_help)


def version():
    return _text(lib.plait_version_string())


def stats():
    s = Stats()
    s.struct_size = ctypes.sizeof(Stats)
    check(lib.plait_stats(ctypes.byref(s)))
    return s.as_dict()


def stats_reset():
    check(lib.plait_stats_reset())


def timeline_start(path):
    check(lib.plait_timeline_start(os.fsencode(path)))


def timeline_stop():
    check(lib.plait_timeline_stop())


# --------------------------------------------------------------------------
# Elastic training (include/plait/elastic.h; plait.common.elastic)
# --------------------------------------------------------------------------

def elastic_enabled():
    """True when started by plaitrun's elastic driver; needs no init."""
    return bool(_query(lib.plait_elastic_enabled))


def elastic_epoch():
    v = ctypes.c_uint64()
    check(lib.plait_elastic_epoch(ctypes.byref(v)))
    return v.value


def elastic_host_updates():
    """(timestamp, PLAIT_HOSTS_* bits) from the driver: (0, 0) when not elastic."""
    timestamp = ctypes.c_uint64()
    update = ctypes.c_uint()
    check(lib.plait_elastic_host_updates(ctypes.byref(timestamp), ctypes.byref(update)))
    return timestamp.value, update.value


def elastic_removed():
    """True when the last init failed because the driver left this worker out."""
    return bool(_query(lib.plait_elastic_removed))
