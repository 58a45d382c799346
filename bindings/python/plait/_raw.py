"""Converter-free twins of the two calls on plait.torch's hot path.

_core's GIL-held twins (_core.gil) have argtypes, so ctypes calls each
argument type's from_param before every call: a Python-level call and, for
an int address, a new argument object, per argument (8 per in-place
allreduce and its synchronize; with these twins 1: the two together went
from 29806 to 22870 instructions, bench/results/torch-percall-entries.txt,
which includes plait.torch._fast's entries; 24026 with the out slots per
thread, bench/results/torch-percall-thread-slots.txt). The twins
here have argtypes only where an argument needs converting, and take their
other arguments as objects ctypes passes as they are:

    bytes           const char *                    (a name)
    a byref()       a pointer                       (built once: ref)
    a PyCArgObject  its C type                      (from_param, built once:
                                                     carg_double, ...)
    None            NULL

A Python int without a converter would be passed as a C int, cut to 32
bits: an address never goes through them unconverted (allreduce_async
takes none as an int; wait_release converts its first argument, the
handle). tests/bindings/torch/test_bindings.py checks the argument types
against _core's twins."""

import ctypes

from plait import _core


def _twin(name, argtypes):
    # _gil_lib[name] is a new function object (getattr would return the one
    # _core configured); the same library, the GIL held.
    fn = _core._gil_lib[name]
    fn.restype = getattr(_core.lib, name).restype
    fn.argtypes = argtypes
    return fn


def ref(obj):
    """A pointer argument to obj (kept alive by it) for these twins."""
    return ctypes.byref(obj)


def carg_int(value):
    """value as a C int argument, converted once."""
    return ctypes.c_int.from_param(value)


def carg_double(value):
    """value as a C double argument, converted once."""
    return ctypes.c_double.from_param(value)


# plait_allreduce_async(name: bytes, input: ref, output: ref, op: carg_int,
#                       options: None or ref, handle out: ref)
allreduce_async = _twin("plait_allreduce_async", None)
# plait_wait_release(handle: its address, an int (converted), timeout:
#                    carg_double, released: ref)
wait_release = _twin("plait_wait_release", (ctypes.c_void_p,))
