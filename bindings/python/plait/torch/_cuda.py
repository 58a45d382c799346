"""CUDA tensors in plait.torch: which path they take, the stream they are
ready on, and the outputs plait allocates on the device.

Two paths, chosen by the transport in use (its PLAIT_CAP_DEVICE_MEMORY):
 - a transport that takes device memory (nccl): the tensor's device pointer
   goes to plait with the current stream of its device as the ready stream
   (plait_op_options_t.stream), so plait's work waits for what the caller
   enqueued before the call, without blocking the host. plait_wait returns
   once the device work has finished, so everything the caller enqueues
   after synchronize() sees the result (Horovod's semantics).
 - a host-only transport (gloo, ofi): what Horovod 0.28 does when it is built
   without GPU operations (mpi_ops_v2.cc, Do*CudaOnCPU): the tensor is copied
   to host memory, the operation runs there, and the result is copied back to
   the tensor's device (into the tensor itself for the in-place forms).

Outputs plait allocates on the device (allgather, alltoall, reducescatter)
belong to the plait handle; they are copied into a torch CUDA tensor on the
current stream from a DLPack view of them (a DLManagedTensor built here,
read by torch.from_dlpack: no libcudart loaded by hand, no cupy, and no
numpy, which __cuda_array_interface__ would need for its typestr; the same
code wraps host memory, so it is tested without a GPU), and the handle is
released only once that copy has run (a CUDA event), never while the copy
may still read it.

Nothing here is called for CPU tensors: their path makes no torch.cuda call.
"""

import ctypes
import threading

import torch
import torch.utils.dlpack

from plait import _core
from plait.common import basics as _basics

_caps = {}  # transport name -> (takes host memory, takes device memory)
_held = []          # (torch.cuda.Event, _core.Handle): outputs being copied
_held_lock = threading.Lock()


def _memory():
    name = _core.transport_name()
    known = _caps.get(name)
    if known is None:
        info = _core.transport_query(name)  # the library answers (plait_transport_query)
        if not info.found:
            # A plugin plait runs but the query cannot find again: the core
            # decides (it refuses memory a transport does not take).
            known = (True, True)
        else:
            known = (bool(info.host_memory), bool(info.device_memory))
        _caps[name] = known
    return known


def device_transport():
    """True when the transport in use takes device memory (CUDA tensors go
    to it as they are); False for a host-only one (they are staged)."""
    return _memory()[1]


def host_transport():
    """True when the transport in use takes host memory (False for nccl:
    the core refuses CPU tensors there)."""
    return _memory()[0]


def placed(t):
    """t where the transport can take it, for plait.torch's own helpers
    (broadcast_object, allgather_object, optimizer state): a CPU tensor goes
    to the current CUDA device under a device-only transport; anything else
    is t itself."""
    if t.is_cuda or host_transport():
        return t
    return t.to(torch.device("cuda", torch.cuda.current_device()))


def ready_stream(t):
    """The current stream of t's device: where the caller's work on t is
    enqueued, so where t is ready."""
    return torch.cuda.current_stream(t.device)


def options(prescale, postscale, pset, stream):
    """(pointer to plait_op_options_t or None, what to keep alive) for an
    operation on device tensors ready on stream (a torch.cuda.Stream)."""
    reap()  # outputs copied since the last call: their handles go
    handle = stream.cuda_stream
    if handle == 0:  # the legacy default stream: what NULL means
        if prescale == 1.0 and postscale == 1.0 and not pset:
            return None, None
        o = _core.options(prescale, postscale, pset)
        return ctypes.byref(o), o
    o = _core.options(prescale, postscale, pset)
    o.stream = handle
    return ctypes.byref(o), (o, stream)


def to_host(t):
    """t (a CUDA tensor) copied to host memory, after the work enqueued on
    its device's current stream (a blocking copy)."""
    return t.detach().to("cpu")


def back_to(device):
    """What turns a host result into one on device."""
    def move(r):
        return r.to(device)
    return move


def into(tensor):
    """What copies a host result into the CUDA tensor (in place) and
    returns the tensor."""
    def copy(r):
        with torch.no_grad():
            tensor.copy_(r)
        return tensor
    return copy


# DLPack's C structs (dlpack.h, the layout torch.from_dlpack reads from a
# "dltensor" capsule).
_DL_CPU, _DL_CUDA, _DL_UINT = 1, 2, 1


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DL_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DL_DELETER)]
# The structs of the DLPack views torch holds, by address, until torch calls
# the deleter (the memory itself is the plait handle's, released by _hold).
_dl_live = {}


def _dl_forget(managed):
    _dl_live.pop(ctypes.cast(managed, ctypes.c_void_p).value, None)


_dl_deleter = _DL_DELETER(_dl_forget)
# A private prototype: setting ctypes.pythonapi's argtypes would change them
# for every other user of the process (docs: shared/frameworks.md).
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))


def wrap_bytes(ptr, nbytes, device_type, device_id):
    """A torch uint8 tensor of nbytes at ptr, without a copy (DLPack; no
    numpy needed, unlike __cuda_array_interface__). It must not outlive the
    memory, nor be used after the caller drops it."""
    shape = (ctypes.c_int64 * 1)(nbytes)
    managed = _DLManagedTensor()
    managed.dl_tensor = _DLTensor(ptr, _DLDevice(device_type, device_id), 1,
                                  _DLDataType(_DL_UINT, 8, 1),
                                  ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)), None, 0)
    managed.deleter = _dl_deleter
    _dl_live[ctypes.addressof(managed)] = (managed, shape)
    try:
        return torch.utils.dlpack.from_dlpack(
            _capsule_new(ctypes.addressof(managed), b"dltensor", None))
    except BaseException:
        _dl_live.pop(ctypes.addressof(managed), None)
        raise


def from_device_output(hh, ct, dtype):
    """A new torch CUDA tensor holding a copy of plait's device output ct of
    handle hh, copied on the current stream; hh's memory is kept until that
    copy has run, and hh itself is emptied (its release does nothing)."""
    shape = _core.tensor_shape(ct)
    nbytes = _core.tensor_nbytes(ct)
    device = torch.device("cuda", ct.device)
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    out = torch.empty(nbytes, dtype=torch.uint8, device=device)
    out.copy_(wrap_bytes(ct.data, nbytes, _DL_CUDA, ct.device))
    _hold(hh, device)
    return out.view(dtype).reshape(shape)


def _hold(hh, device):
    """Moves hh's plait handle into _held until an event recorded now on
    device's current stream has fired."""
    reap()
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(device))
    keeper = _core.Handle(hh._ptr, hh.keep, hh.name)
    keeper._result = hh._result
    hh._ptr = None
    hh.keep = None
    with _held_lock:
        _held.append((event, keeper))


def reap(block=False):
    """Releases the handles whose output copies have run (all of them, after
    waiting, with block)."""
    if not _held:
        return
    with _held_lock:
        keep = []
        for event, h in _held:
            if block:
                event.synchronize()
            if block or event.query():
                h.release()
            else:
                keep.append((event, h))
        _held[:] = keep


def _at_shutdown():
    reap(block=True)
    _caps.clear()


_basics.add_shutdown_hook(_at_shutdown)
