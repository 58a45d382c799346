"""allreduce_async_'s short path: the DistributedOptimizer's call, once per
gradient per step (a named, contiguous, dense CPU tensor of a reducible
dtype, no factors, the global process set).

What a call needs besides the tensor's address is kept per name, since a
training step submits the same names every step: the name as the library
takes it ('allreduce.<name>', encoded; Horovod's name, built and checked
once), and the tensor's description with its pointer argument. An entry
serves a call only when the tensor's address, dtype and shape are the ones
it was made for (each read every call: a tensor's storage can be
re-allocated, resized or swapped by .data = under the same name); else it is
made anew. Layout, device and contiguity are checked every call before it
(they too can change under one name), so what an entry holds is only what
the address, dtype and shape settle.

The call then goes through plait._raw's converter-free twin with the
handle's out pointer, the op as a C int and the description as built once;
the record is plait.torch._handles' (one tuple: the result is the tensor)."""

import torch

from plait import _raw
from plait.torch import _handles
from plait.torch._tensors import _REDUCIBLE, _describe

# name -> (address, dtype, shape, pointer to the description, encoded name,
# full name, the description). Emptied when it grows past a model's worth of
# names.
_entries = {}
_ENTRIES_MAX = 8192

_Tensor = torch.Tensor
_strided = torch.strided
_allreduce_raw = _raw.allreduce_async
_slots = _handles._slots  # the out slot, per thread
_handles_table = _handles._handles
_handle_ids = _handles._handle_ids
_orphans = _handles._orphans
_reap_orphans = _handles._reap_orphans
_error = _handles._error


def _entry(tensor, name):
    """A new entry for tensor under name, or None when the short path does
    not take it (a dtype plait cannot reduce; a NUL in the name: the general
    path raises the error)."""
    code = _REDUCIBLE.get(tensor.dtype)
    if code is None or "\0" in name:
        return None
    d = _describe(tensor, code)
    full = "allreduce." + name
    e = (tensor.data_ptr(), tensor.dtype, tensor.shape, _raw.ref(d), full.encode("utf-8"),
         full, d)
    if len(_entries) >= _ENTRIES_MAX:
        _entries.clear()
    _entries[name] = e
    return e


def allreduce_async_(tensor, name, cop):
    """Submits the in-place allreduce of tensor (a torch.Tensor) under name
    (a str) with the C op argument cop; returns the integer handle, or None
    when tensor is not one the short path takes."""
    if not (tensor.layout is _strided and tensor.is_cpu and tensor.is_contiguous()):
        return None
    e = _entries.get(name)
    if (e is None or e[0] != tensor.data_ptr() or e[1] is not tensor.dtype
            or e[2] != tensor.shape):
        e = _entry(tensor, name)
        if e is None:
            return None
    if _orphans:  # cheap check first: submissions are on the hot path
        _reap_orphans()
    out, _address, out_ref = _slots.out  # this thread's
    rc = _allreduce_raw(e[4], e[3], e[3], cop, None, out_ref)
    if rc:
        raise _error(rc)
    hid = next(_handle_ids)  # one step each under the GIL: no lock needed
    _handles_table[hid] = (out.value, tensor, e[5], None)
    return hid
