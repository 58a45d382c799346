"""Prescale, postscale and Average, bit for bit as Horovod 0.28.1 computes
them on the CPU (horovod/common/ops/collective_operations.h,
ScaleBufferCPUImpl, and the gloo allreduce and reducescatter):

- the input is multiplied by the prescale factor, reduced, and multiplied by
  the postscale factor; Average is a Sum whose postscale factor is first
  divided by the number of ranks, in double; a factor of exactly 1 is
  skipped;
- integers: (double)x * factor, truncated toward zero;
- float32 and float16: float(factor) * x in float32 (float16 converted to
  float32 and rounded back to nearest even); float64 in double;
- bfloat16 (which Horovod cannot scale on the CPU) as float16; uint16 and
  int16 (neither can Horovod) as the other integers.

The reference below models that in one process from every rank's input.
For the comparison to be exact whatever order the transport sums in, each
case keeps sums and products exact: with an inexact prescale factor only
rank 0 contributes a value (the others the op's identity after scaling);
with an exact one every rank contributes small integers."""

import pytest
import torch

import plait.torch as hvd

INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64] + (
    [torch.uint16] if hasattr(torch, "uint16") else [])
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
OPS = ["Sum", "Average", "Min", "Max", "Product"]
# (prescale, postscale, value v with v * prescale == 1 exactly in every dtype)
FACTORS = [(1.0, 1.0, 1), (0.25, 3.0, 4), (0.1, 3.0, 10), (1.0 / 3.0, 0.7, 3),
           (1.0, 0.1, 1), (0.25, 1.0 / 3.0, 4), (0.5, 2.0 / 3.0, 2)]
EXACT_PRE = (1.0, 0.25, 0.5)
CASES = [(d, op, f) for d in INTS + FLOATS for op in OPS for f in FACTORS]
IDS = ["%s-%s-pre%.4g-post%.4g" % (str(d)[6:], op, f[0], f[1]) for d, op, f in CASES]


def hv_scale(t, factor):
    """Horovod's ScaleBufferCPUImpl on t (skipped for a factor of 1)."""
    if factor == 1.0:
        return t
    if not t.dtype.is_floating_point:
        return (t.to(torch.float64) * factor).trunc().to(t.dtype)
    if t.dtype == torch.float64:
        return t * factor
    return (t.to(torch.float32) * torch.tensor(factor, dtype=torch.float32)).to(t.dtype)


def wide(t):
    """Integers as int64 (torch 2 has no arithmetic on uint16); the values
    here stay in range, so the results are the same."""
    return t if t.dtype.is_floating_point else t.to(torch.int64)


def hv_reduce(inputs, op, pre, post):
    dtype = inputs[0].dtype
    scaled = [wide(hv_scale(t, pre)) for t in inputs]
    acc = scaled[0]
    for t in scaled[1:]:
        acc = {"Sum": torch.add, "Average": torch.add, "Min": torch.minimum,
               "Max": torch.maximum, "Product": torch.mul}[op](acc, t)
    return hv_scale(acc.to(dtype), post / len(inputs) if op == "Average" else post)


def rank_values(dtype, k, n, op, pre, unit, shape, seed):
    g = torch.Generator().manual_seed(seed * 31 + k)
    signed = dtype.is_floating_point or dtype not in (torch.uint8,) and \
        not str(dtype).startswith("torch.uint")
    lo, hi = (-20, 21) if signed else (0, 41)

    def random():
        if dtype.is_floating_point:
            return (torch.randn(shape, generator=g, dtype=torch.float64) * 8).to(dtype)
        return torch.randint(lo, hi, shape, generator=g).to(dtype)

    if op in ("Sum", "Average"):
        if pre in EXACT_PRE:  # every rank contributes integers: exact sums
            return torch.randint(lo, hi, shape, generator=g).to(dtype)
        return random() if k == 0 else torch.zeros(shape, dtype=dtype)
    if k == 0 or op in ("Min", "Max"):
        return random()
    return torch.full(shape, unit, dtype=dtype)  # Product: pre * unit == 1


def assert_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.is_floating_point:
        same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    else:
        same = wide(got) == wide(want)
    bad = (~same).nonzero()
    assert bad.numel() == 0, "%d of %d differ, first at %s: got %s, want %s" % (
        bad.shape[0], got.numel(), bad[0].tolist(), got[tuple(bad[0])], want[tuple(bad[0])])


@pytest.mark.parametrize("dtype,op,factors", CASES, ids=IDS)
def test_scaling_is_horovods(hvd, dtype, op, factors):
    n, r = hvd.size(), hvd.rank()
    pre, post, unit = factors
    seed = CASES.index((dtype, op, factors))
    rows = 2 * n + 1
    inputs = [rank_values(dtype, k, n, op, pre, unit, (rows, 37), seed) for k in range(n)]
    if op == "Product":
        assert bool((wide(hv_scale(inputs[-1], pre)) == 1).all())  # the case is exact
    want = hv_reduce(inputs, op, pre, post)
    opv = getattr(hvd, op)
    name = "scale.%d" % seed
    got = hvd.allreduce(inputs[r], op=opv, name=name, prescale_factor=pre,
                        postscale_factor=post)
    assert_bits(got, want)
    # The fused path: two tensors negotiated as one unit.
    got_a, got_b = hvd.grouped_allreduce([inputs[r], inputs[r][:3]], op=opv, name=name,
                                         prescale_factor=pre, postscale_factor=post)
    assert_bits(got_a, want)
    assert_bits(got_b, want[:3])
    # reducescatter: this rank's block of the same reduction.
    block = hvd.reducescatter(inputs[r], op=opv, name=name, prescale_factor=pre,
                              postscale_factor=post)
    counts = [rows // n + (1 if k < rows % n else 0) for k in range(n)]
    assert_bits(block, torch.split(want, counts)[r])
