"""What of plait.torch's CUDA path can be checked without a GPU, in one
process: CPU tensors never touch torch.cuda, a host-only transport is known
as one (CUDA tensors would be staged), and the ready stream of a CUDA tensor
reaches plait_op_options_t.stream. The CUDA tensors themselves:
test_torch_cuda.py (skipped without a device)."""

import ctypes
import os
import subprocess
import sys
import textwrap

from plait import _core
from plait.torch import _cuda


def run(code):
    env = dict(os.environ)
    env.setdefault("PLAIT_TRANSPORT", "gloo")
    for k in ("PLAIT_RANK", "PLAIT_SIZE", "PLAIT_RENDEZVOUS"):
        env.pop(k, None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_cpu_operations_make_no_torch_cuda_call():
    p = run("""
        import torch, plait.torch as hvd
        hvd.init()
        x = torch.ones(8)
        hvd.allreduce(x, name="a"); hvd.allreduce_(x, name="b", prescale_factor=2.0)
        hvd.grouped_allreduce([x, x], name="c"); hvd.allgather(x.reshape(2, 4), name="d")
        hvd.broadcast_(x, 0, name="e"); hvd.alltoall(x, name="f")
        hvd.reducescatter(x.reshape(4, 2), name="g"); hvd.barrier(); hvd.join()
        hvd.shutdown()
        print("cuda initialized:", torch.cuda.is_initialized())
        """)
    assert p.returncode == 0, p.stderr
    assert "cuda initialized: False" in p.stdout, p.stdout


def test_host_only_transports_are_known_as_such():
    p = run("""
        import plait.torch as hvd
        from plait.torch import _cuda
        hvd.init()
        print(hvd.transport_name(), _cuda.device_transport())
        hvd.shutdown()
        """)
    assert p.returncode == 0, p.stderr
    name, takes_device = p.stdout.split()
    assert name in ("gloo", "ofi") and takes_device == "False", p.stdout


class _Stream:
    """What _cuda.options reads of a torch.cuda.Stream: its handle."""

    def __init__(self, handle):
        self.cuda_stream = handle


def _struct(ptr):
    return ctypes.cast(ptr, ctypes.POINTER(_core.OpOptions)).contents


def test_the_default_stream_needs_no_options():
    assert _cuda.options(1.0, 1.0, 0, _Stream(0)) == (None, None)
    ptr, keep = _cuda.options(2.0, 1.0, 0, _Stream(0))
    assert _struct(ptr).prescale_factor == 2.0 and not _struct(ptr).stream  # NULL: legacy


def test_a_side_stream_is_the_ready_stream():
    s = _Stream(0x7f00dead0000)
    ptr, keep = _cuda.options(1.0, 0.5, 0, s)
    o = _struct(ptr)
    assert o.stream == 0x7f00dead0000 and o.postscale_factor == 0.5
    assert o.struct_size == ctypes.sizeof(_core.OpOptions)
    assert s in keep  # the stream lives until the operation is over


def test_dlpack_view_of_raw_memory():
    """The DLPack view plait.torch copies device outputs from, on host
    memory (the same code with kDLCUDA on a GPU): the bytes, no copy, and
    the structs released when torch lets the view go."""
    import gc
    import torch
    raw = (ctypes.c_uint8 * 300)(*[(i * 7) % 256 for i in range(300)])
    before = len(_cuda._dl_live)
    t = _cuda.wrap_bytes(ctypes.addressof(raw), 300, _cuda._DL_CPU, 0)
    assert t.dtype == torch.uint8 and t.shape == (300,) and t.device.type == "cpu"
    assert t.tolist() == [(i * 7) % 256 for i in range(300)]
    raw[5] = 99  # a view, not a copy
    assert int(t[5]) == 99
    copy = t.clone().view(torch.int16)
    assert copy.shape == (150,)
    del t
    gc.collect()
    assert len(_cuda._dl_live) == before  # torch called the deleter
    assert copy.view(torch.uint8)[5].item() == 99
