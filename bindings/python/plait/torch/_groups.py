"""Horovod's operation names ('<kind>.<name>', '<kind>.noname.<n>',
'<kind>.<name>_<i>of<n>' for a group) and groups of plait operations behind
one integer handle (plait.torch._handles), for plait.torch.mpi_ops."""

import contextlib

import torch

from plait.common import ops as _ops
from plait.common.names import AUTO_NAMES
from plait.torch._handles import _group, _take, synchronize
from plait.torch._tensors import _check_tensor


def _check_name(name):
    if name is not None and not isinstance(name, str):
        raise TypeError("plait.torch: name must be a str, not %s" % type(name).__name__)


def _op_name(kind, name, pset=0):
    """A context manager that yields Horovod's operation name,
    '<kind>.<name>' or '<kind>.noname.<n>' (kind None: name itself, a
    group's part). An automatic number is consumed only when the body
    returns (plait.common.names): enter it after every check, around the
    submission alone, so that a call refused in Python or in C on one rank
    leaves every rank's count where it was."""
    _check_name(name)
    if kind is None:
        return contextlib.nullcontext(name)
    return AUTO_NAMES.take(kind, name, pset)


def _grad_name(name):
    """The name of a backward pass's operation: '<name>.grad' (None stays
    None: unnamed operations are numbered in the order issued)."""
    return None if name is None else name + ".grad"


def _register_group(handles):
    """One handle for several *_async handles; synchronize() returns the
    tuple of their results."""
    return _group([_take(h) for h in handles])


def _check_group(tensors, what):
    if isinstance(tensors, torch.Tensor):
        raise TypeError("plait.torch.%s: expected a list of tensors, got a tensor" % what)
    tensors = list(tensors)
    if not tensors:
        raise ValueError("plait.torch.%s: the group is empty" % what)
    for t in tensors:
        _check_tensor(t, what)
    return tensors


_group_names = _ops.group_names  # '<base>_<i>of<n>', i from 1 (base from _op_name)


def _submit_parts(tensors, kind, name, pset, submit):
    """Submits each part of a group ('<kind>.<name>_<i>of<n>') with
    submit(tensor, part_name); one handle for all of them. The automatic
    number is consumed once any part was accepted (that part runs under
    it on the other ranks too); a part refused is raised after the parts
    already submitted have finished."""
    handles, failure = [], None
    with _op_name(kind, name, pset) as base:
        try:
            for t, nm in zip(tensors, _group_names(base, len(tensors))):
                handles.append(submit(t, nm))
        except Exception as e:  # noqa: BLE001 - raised below
            if not handles:
                raise  # nothing submitted: the number is not consumed
            failure = e
    if failure is not None:
        _drain(handles)
        raise failure
    return _register_group(handles)


def _drain(handles):
    for h in handles:
        try:
            synchronize(h)
        except Exception:  # noqa: BLE001 - the first error is being raised
            pass
