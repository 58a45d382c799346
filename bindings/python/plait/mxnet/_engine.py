"""The bridge to MXNet's dependency engine: loads plait's MXNet adapter
(libplait_mxnet.so, bindings/mxnet/plait_mxnet.h, found as plait.common.library
finds every native library of plait) and pushes plait
operations on NDArrays into MXNet's engine.

An operation pushed here runs on an MXNet engine thread once every earlier
write to its inputs is done; it only submits to plait and returns. plait's
completion callback tells the engine it is done, so later work on the
outputs (and wait_to_read, asnumpy) waits for it, and a write to an input
pushed afterwards waits until plait has sent it.

A failure of an operation with NDArray outputs (allreduce, broadcast) is
raised by MXNet when the output is next read (wait_to_read, asnumpy), as
Horovod's are; its class is plait's class for the failure (PeerLostError,
MismatchError: HorovodInternalError, a RuntimeError) and MXNet's MXNetError.
"""

import ctypes

import mxnet as mx
import numpy as np

from plait import _core
from plait.common import library as _library

lib, library_path = _library.load(
    "libplait_mxnet.so", "PLAIT_MXNET_LIBRARY",
    lambda path: ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL),
    OSError, "plait.mxnet",
    "It is built with plait when CMake is given a python with mxnet: "
    "cmake -DPLAIT_MXNET_PYTHON=/path/to/python ... (docs/mxnet.md); "
    "set PLAIT_MXNET_LIBRARY to its path otherwise.",
    what="plait's MXNet adapter", beside=_core.library_path)

ALLREDUCE, BROADCAST, ALLGATHER, ALLTOALL, REDUCESCATTER = range(5)


class Request(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("kind", ctypes.c_int),
        ("count", ctypes.c_int),
        ("names", ctypes.POINTER(ctypes.c_char_p)),
        ("inputs", ctypes.POINTER(ctypes.c_void_p)),
        ("outputs", ctypes.POINTER(ctypes.c_void_p)),
        ("tensors", ctypes.POINTER(_core.Tensor)),
        ("op", ctypes.c_int),
        ("prescale_factor", ctypes.c_double),
        ("postscale_factor", ctypes.c_double),
        ("root", ctypes.c_int),
        ("splits", ctypes.POINTER(ctypes.c_int64)),
        ("nsplits", ctypes.c_int),
        ("priority", ctypes.c_int),
        ("process_set", ctypes.c_int32),
    ]


lib.plait_mx_push.restype = ctypes.c_int
lib.plait_mx_push.argtypes = [ctypes.POINTER(Request), ctypes.POINTER(ctypes.c_void_p)]
lib.plait_mx_ticket_wait.restype = ctypes.c_int
lib.plait_mx_ticket_wait.argtypes = [ctypes.c_void_p, ctypes.c_double,
                                     ctypes.POINTER(ctypes.c_char_p)]
lib.plait_mx_ticket_submitted.restype = ctypes.c_int
lib.plait_mx_ticket_submitted.argtypes = [ctypes.c_void_p, ctypes.c_double]
lib.plait_mx_ticket_handle.restype = ctypes.c_void_p
lib.plait_mx_ticket_handle.argtypes = [ctypes.c_void_p]
lib.plait_mx_ticket_release.restype = None
lib.plait_mx_ticket_release.argtypes = [ctypes.c_void_p]
lib.plait_mx_last_error.restype = ctypes.c_char_p
lib.plait_mx_last_error.argtypes = []

# MXNet's own C API, through the library `import mxnet` loaded.
_MX = mx.base._LIB
_MX.MXNDArraySyncCopyFromCPU.restype = ctypes.c_int
_MX.MXNDArraySyncCopyFromCPU.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]


# --------------------------------------------------------------------------
# Errors raised by MXNet from wait_to_read(): "PLAIT_ERR_...: message"
# --------------------------------------------------------------------------

def _register_errors():
    for code, cls in _core.ERRORS.items():
        rname = _core.RESULT_NAMES[code]
        prefix = rname + ": "

        def __init__(self, message, _code=code, _prefix=prefix):
            text = str(message)
            if text.startswith(_prefix):
                text = text[len(_prefix):]
            _core.PlaitError.__init__(self, _code, text)

        mixed = type(cls.__name__, (cls, mx.base.MXNetError),
                     {"__init__": __init__, "__module__": "plait.mxnet"})
        mx.base.register_error(rname, mixed)


_register_errors()


def failure(code, message):
    """plait's class for result code (with MXNetError), as wait_to_read()
    raises it for the operations with NDArray outputs."""
    name = _core.RESULT_NAMES.get(code)
    cls = mx.base.error_types.get(name)
    if cls is None:
        return _core.error(code, message or None)
    return cls(message or _core.lib.plait_strerror(code).decode())


def invalid(message):
    """The error for bad arguments that Horovod's C++ refuses (an MXNetError
    there): plait's InvalidArgumentError, a ValueError, and an MXNetError."""
    return mx.base.error_types["PLAIT_ERR_INVALID_ARGUMENT"](message)


# --------------------------------------------------------------------------
# dtypes: every dtype an MXNet NDArray has
# --------------------------------------------------------------------------

_BFLOAT16 = np.dtype([("bfloat16", np.uint16)])
_DTYPES = {
    np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
    np.dtype(np.float16): "float16", np.dtype(np.uint8): "uint8",
    np.dtype(np.int32): "int32", np.dtype(np.int8): "int8",
    np.dtype(np.int64): "int64", np.dtype(np.bool_): "bool", _BFLOAT16: "bfloat16",
}


def dtype_code(arr, what):
    try:
        return _core.dtype_code(_DTYPES[np.dtype(arr.dtype)])
    except (KeyError, TypeError):
        raise invalid("plait.mxnet.%s: NDArray dtype %s is not supported (plait moves %s)"
                      % (what, arr.dtype, ", ".join(sorted(_DTYPES.values())))) from None


def check_array(arr, what):
    if not isinstance(arr, mx.nd.NDArray):
        raise TypeError("plait.mxnet.%s: expected an mxnet.nd.NDArray, got %s"
                        % (what, type(arr).__name__))
    if arr.stype != "default":
        raise invalid("plait.mxnet.%s: %s NDArrays are not supported (dense arrays only: "
                      "convert with .tostype('default'))" % (what, arr.stype))
    if arr.context.device_type != "cpu":
        raise invalid("plait.mxnet.%s: the NDArray is on %s; plait.mxnet runs on CPU "
                      "arrays" % (what, arr.context))


def describe(arr, code):
    return _core.make_tensor(None, code, arr.shape)


# --------------------------------------------------------------------------
# Pushing
# --------------------------------------------------------------------------

def push(kind, names, inputs, outputs, tensors, op=0, prescale=1.0, postscale=1.0, root=0,
         splits=None, priority=0, process_set=0):
    """Pushes one operation on process set id process_set; returns its
    ticket (a Ticket) for the kinds whose output plait allocates, else None."""
    n = len(names)
    req = Request()
    req.struct_size = ctypes.sizeof(Request)
    req.kind = kind
    req.count = n
    c_names = (ctypes.c_char_p * n)(*[_core.encode_name(s) for s in names])
    c_in = (ctypes.c_void_p * n)(*[a.handle.value for a in inputs])
    c_out = None
    if outputs is not None:
        c_out = (ctypes.c_void_p * n)(*[a.handle.value for a in outputs])
    c_t = (_core.Tensor * n)(*tensors)
    req.names = c_names
    req.inputs = c_in
    req.outputs = c_out
    req.tensors = c_t
    req.op = op
    req.prescale_factor = float(prescale)
    req.postscale_factor = float(postscale)
    # ctypes would wrap values that do not fit the C fields (2**32 -> 0)
    req.root = _core.c_integer(root, "plait.mxnet: root_rank", make_error=invalid)
    if splits is not None:
        checked = [_core.c_integer(v, "plait.mxnet: splits[%d]" % i, _core.INT64_RANGE,
                                   make_error=invalid)
                   for i, v in enumerate(splits)]
        c_splits = (ctypes.c_int64 * len(checked))(*checked)
        req.splits = c_splits
        req.nsplits = len(checked)
    req.priority = _core.c_integer(priority, "plait.mxnet: priority", make_error=invalid)
    req.process_set = process_set
    wants_ticket = kind in (ALLGATHER, ALLTOALL, REDUCESCATTER)
    ticket = ctypes.c_void_p()
    rc = lib.plait_mx_push(ctypes.byref(req), ctypes.byref(ticket) if wants_ticket else None)
    if rc != 0:
        raise _core.ERRORS[_core.RESULTS["PLAIT_ERR_INTERNAL"]](
            _core.RESULTS["PLAIT_ERR_INTERNAL"], lib.plait_mx_last_error().decode())
    return Ticket(ticket, names[0]) if wants_ticket else None


# Waits from Python are cut in slices this long (plait._core's, as for
# every wait of the bindings), the GIL released in each: between two slices
# Python runs its signal handlers (Ctrl-C raises KeyboardInterrupt in the
# waiting thread, a SIGALRM handler runs).
WAIT_SLICE_S = _core.WAIT_SLICE_S


class Ticket:
    """An operation whose output plait allocates: wait() blocks this thread
    (the GIL is released) until plait is done, then output() copies it."""

    __slots__ = ("_ptr", "name")

    def __init__(self, ptr, name):
        self._ptr = ptr
        self.name = name

    def submitted(self):
        """Waits until MXNet has run the operation and plait has accepted
        or refused it; True if accepted. A refusal is raised by wait()."""
        while True:
            state = lib.plait_mx_ticket_submitted(self._ptr, WAIT_SLICE_S)
            if state:
                return state == 1

    def wait(self):
        msg = ctypes.c_char_p()
        while True:
            rc = lib.plait_mx_ticket_wait(self._ptr, WAIT_SLICE_S, ctypes.byref(msg))
            if rc != _core.RESULTS["PLAIT_ERR_TIMEOUT"] or msg.value is not None:
                break
        if rc != _core.SUCCESS:
            text = msg.value.decode("utf-8", "replace") if msg.value else ""
            raise failure(rc, text)

    def handle(self):
        return lib.plait_mx_ticket_handle(self._ptr)

    def output(self):
        t = _core.Tensor()
        t.struct_size = ctypes.sizeof(_core.Tensor)
        _core.check(_core.lib.plait_handle_output(self.handle(), ctypes.byref(t)))
        return t

    def splits(self, n):
        arr = (ctypes.c_int64 * n)()
        _core.check(_core.lib.plait_handle_splits(self.handle(), arr, n))
        return list(arr)

    def release(self):
        if self._ptr:
            lib.plait_mx_ticket_release(self._ptr)
            self._ptr = None

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutting down
            pass


def wait_handle(h):
    """plait_wait on a plait._core.Handle (barrier, join): Handle.wait waits
    in slices (plait._core.wait_sliced), so signals raise in this thread."""
    return h.wait()


def to_ndarray(t, dtype, ctx):
    """A new NDArray holding a copy of plait's output tensor t."""
    shape = _core.tensor_shape(t)
    out = mx.nd.empty(shape, ctx=ctx, dtype=dtype)
    count = 1
    for d in shape:
        count *= d
    if count:
        mx.base.check_call(_MX.MXNDArraySyncCopyFromCPU(out.handle, t.data, count))
    return out
