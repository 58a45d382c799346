"""What Horovod 0.28 computes on the CPU, written out so that tests can
compare results with torch.equal, from Horovod's source
(horovod/common/ops/gloo_operations.cc, collective_operations.{h,cc}):

- Average is a sum followed by a postscale of postscale_factor / size, the
  division done in double;
- a scale factor other than 1.0 multiplies each element: integers in double,
  converted back by truncation toward zero; float16 in float32 (the factor
  rounded to float32), rounded to float16 to nearest even; float32 with the
  factor rounded to float32; float64 in double;
- prescale applies to each rank's input before the sum, postscale to the sum.

Inputs in these tests are chosen so that sums are exact in every dtype, so
the order in which ranks are added cannot matter.
"""

import torch

INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def scale(t, factor):
    if factor == 1.0:
        return t.clone()
    if t.dtype in INTS:
        return (t.double() * factor).trunc().to(t.dtype)
    if t.dtype == torch.float16:
        return (t.float() * torch.tensor(factor, dtype=torch.float32)).half()
    if t.dtype == torch.float32:
        return t * torch.tensor(factor, dtype=torch.float32)
    if t.dtype == torch.float64:
        return t * factor
    raise TypeError(t.dtype)


def total(tensors):
    """The exact sum (inputs are chosen so that it is exact in their dtype)."""
    acc = torch.stack([t.double() for t in tensors]).sum(0)
    return acc.to(tensors[0].dtype)


def allreduce(hvd, tensors, op, prescale=1.0, postscale=1.0):
    """Horovod's allreduce of tensors[r] (rank r's input) with op."""
    xs = [scale(t, prescale) for t in tensors]
    if op == hvd.Sum or op == hvd.Average:
        out = total(xs)
        post = postscale / len(tensors) if op == hvd.Average else postscale
    elif op == hvd.Min:
        out, post = torch.stack(xs).min(0).values, postscale
    elif op == hvd.Max:
        out, post = torch.stack(xs).max(0).values, postscale
    elif op == hvd.Product:
        out = xs[0].clone()
        for x in xs[1:]:
            out = out * x
        post = postscale
    else:
        raise ValueError(op)
    return scale(out, post)


def reducescatter_rows(rows, size):
    """Rows each rank receives: the first rows % size ranks one more."""
    return [rows // size + (1 if r < rows % size else 0) for r in range(size)]


def reducescatter(hvd, tensors, op, rank, prescale=1.0, postscale=1.0):
    full = allreduce(hvd, tensors, op, prescale, postscale)
    counts = reducescatter_rows(tensors[0].shape[0], len(tensors))
    start = sum(counts[:rank])
    return full[start:start + counts[rank]]
