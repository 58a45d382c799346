"""torch tensors as plait describes them: dtype mapping, contiguous views,
the byte view for dtypes plait cannot reduce, outputs plait allocated, and
argument checks shared by the operations."""

import ctypes

import torch

from plait import _core
from plait.torch import _cuda
from plait.common import ops as _ops
from plait.common.exceptions import HorovodInternalError
from plait.torch.basics import Average, Sum, _OP_NAMES

# torch dtype -> plait dtype code, for the dtypes plait can reduce.
_REDUCIBLE = {
    torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16",
    torch.int32: "int32", torch.int64: "int64", torch.float16: "float16",
    torch.bfloat16: "bfloat16", torch.float32: "float32",
    torch.float64: "float64", torch.bool: "bool",
}
if hasattr(torch, "uint16"):  # torch >= 2.3
    _REDUCIBLE[torch.uint16] = "uint16"
_REDUCIBLE = {k: _core.dtype_code(v) for k, v in _REDUCIBLE.items()}
_COMPLEX = {torch.complex64, torch.complex128}
_BYTES = _core.dtype_code("uint8")


# --------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------

def _device(t):
    if t.device.type == "cpu":
        return _core.DEVICE_HOST
    if t.device.type == "cuda":
        return t.device.index if t.device.index is not None else torch.cuda.current_device()
    raise TypeError("plait.torch: tensors on %s are not supported (CPU or CUDA)" % t.device)


def _check_tensor(t, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError("plait.torch.%s: expected a torch.Tensor, got %s"
                        % (what, type(t).__name__))
    if t.is_sparse:
        raise TypeError("plait.torch.%s: sparse tensors are not supported; "
                        "densify them first (tensor.to_dense())" % what)


def _reducible(t, op, what):
    """The view of contiguous t that plait reduces, and its dtype code."""
    if t.dtype in _COMPLEX:
        if op not in (Sum, Average):
            raise TypeError("plait.torch.%s: %s on %s is not defined (complex "
                            "tensors allow Sum and Average)" % (what, _OP_NAMES[op], t.dtype))
        t = torch.view_as_real(t)
    code = _REDUCIBLE.get(t.dtype)
    if code is None:
        raise TypeError("plait.torch.%s: plait cannot reduce %s; reducible dtypes: %s"
                        % (what, t.dtype, ", ".join(str(d) for d in _REDUCIBLE)))
    return t, code


def _as_bytes_rows(t):
    """Contiguous t as a 2-D uint8 tensor of its first-dimension rows (for
    operations that only move data), and how to turn such rows back."""
    if t.dim() == 0:
        t = t.reshape(1)
    rest = tuple(t.shape[1:])
    item = t.element_size()
    width = item
    for d in rest:
        width *= d
    flat = t.reshape(-1).view(torch.uint8) if t.numel() else \
        torch.empty(0, dtype=torch.uint8, device=t.device)
    rows = flat.reshape(t.shape[0], width)

    def back(raw):
        n = raw.shape[0]
        if n == 0 or width == 0:
            return torch.empty((n,) + rest, dtype=t.dtype, device=raw.device)
        return raw.reshape(-1).view(t.dtype).reshape((n,) + rest)
    return rows, back


def _movable(t):
    """(view, code, back): t as plait moves it: itself when plait knows its
    dtype, else as rows of bytes."""
    code = _REDUCIBLE.get(t.dtype)
    if code is not None:
        return t, code, None
    rows, back = _as_bytes_rows(t)
    return rows, _BYTES, back


# plait_tensor_t of CPU tensors by (address, dtype code, shape), which is
# all they hold: a training step describes the same gradients every step,
# and building the struct (1.9 us) was the largest part of submitting one.
# The library copies the struct when it takes an operation, so one may serve
# any number of operations in flight. Emptied when it grows past a model's
# worth of tensors (addresses of freed tensors are reused, never stale: the
# key is the whole content).
_described = {}
_DESCRIBED_MAX = 8192


def _describe(t, code):
    if not t.is_cpu:
        return _core.make_tensor(t.data_ptr() if t.numel() else 0, code, tuple(t.shape),
                                 _device(t))
    key = (t.data_ptr(), code, t.shape)
    d = _described.get(key)
    if d is None:
        d = _core.make_tensor(key[0] if t.numel() else 0, code, tuple(t.shape),
                              _core.DEVICE_HOST)
        if len(_described) >= _DESCRIBED_MAX:
            _described.clear()
        _described[key] = d
    return d


def _options(prescale_factor=1.0, postscale_factor=1.0, pset=0):
    """A pointer to plait_op_options_t, or None (the library's defaults) when
    both factors are 1 on the global process set: no struct to build on the
    common path."""
    if prescale_factor == 1.0 and postscale_factor == 1.0 and not pset:
        return None
    return ctypes.byref(_core.options(prescale_factor, postscale_factor, pset))


def _op_options(t, prescale_factor=1.0, postscale_factor=1.0, pset=0):
    """(options pointer or None, what to keep alive) for an operation on t:
    for a CUDA tensor with the current stream as the ready stream."""
    if t.is_cuda:
        return _cuda.options(prescale_factor, postscale_factor, pset, _cuda.ready_stream(t))
    return _options(prescale_factor, postscale_factor, pset), None


def _staged(t):
    """True for a CUDA tensor under a host-only transport: the operation
    runs on a host copy (plait.torch._cuda)."""
    return t.is_cuda and not _cuda.device_transport()


def _resolve_op(op, average, what):
    return _ops.resolve_op(op, average, "plait.torch." + what)


def _output(hh):
    """A new torch tensor (on the output's device) holding a copy of the
    output that plait allocated for handle hh."""
    ct = hh.output()
    if ct.device == _core.DEVICE_HOST:
        return _from_output(ct)
    dtype = next((k for k, v in _REDUCIBLE.items() if v == ct.dtype), None)
    return _cuda.from_device_output(hh, ct, dtype)


def _from_output(ct):
    """A new torch tensor holding a copy of plait's host output tensor ct."""
    dtype = next((k for k, v in _REDUCIBLE.items() if v == ct.dtype), None)
    out = torch.empty(_core.tensor_shape(ct), dtype=dtype)
    nbytes = _core.tensor_nbytes(ct)
    if nbytes:
        ctypes.memmove(out.data_ptr(), ct.data, nbytes)
    return out


class ScalarAllgatherError(ValueError, HorovodInternalError):
    """An allgather of a 0-d tensor: refused at the call (plait checks before
    it submits), and catchable both as ValueError and as the
    HorovodInternalError that Horovod 0.28.1's allgather_async raises for it
    at synchronize."""


def _check_rows(x, what, error=ValueError):
    _ops.check_rows(x.dim(), "plait.torch." + what, error)
