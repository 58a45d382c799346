"""The framework-neutral part of every binding's operations, written once
for plait.torch, plait.tensorflow and plait.mxnet (each keeps only what
touches its own tensor type):

- reduction ops: Horovod's average/op rules and one set of messages
  (resolve_op, check_op);
- argument checks: root ranks (check_root_type, check_root) and the first
  dimension of operations that split rows (check_rows);
- groups: Horovod's split_list and the names of a group's parts;
- object collectives: pickling (cloudpickle when installed, as Horovod),
  the size a rank sends when it could not pickle, unpacking gathered bytes;
- Compression: Horovod's Compressor, NoneCompressor and FP16Compressor over
  a framework's dtype test and cast;
- finding the native libraries: plait.common.library (load_library).

Where the bindings' copies differed, Horovod 0.28.1's words were kept
(horovod/common/util.py for average and op); the rest are plait's own, the
same for every framework (where names the call: "plait.torch.allreduce").
"""

import pickle
import warnings

from plait import _core
from plait.common.basics import Adasum, Average, Max, Min, Product, Sum
from plait.common.library import load as load_library  # noqa: F401 - one finder

try:  # Horovod pickles with cloudpickle (lambdas, local classes); plain pickle otherwise.
    import cloudpickle as pickler
except ImportError:  # pragma: no cover - depends on the environment
    pickler = pickle

__all__ = [
    "OP_NAMES", "average_compat", "resolve_op", "check_op", "check_root_type", "check_root", "check_rows",
    "split_list", "group_names", "pickler", "dumps", "loads", "NOT_PICKLED", "unpack",
    "Compressor", "NoneCompressor", "FP16Compressor", "Compression", "load_library",
]

# --------------------------------------------------------------------------
# Reduction ops
# --------------------------------------------------------------------------

OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max", Product: "Product",
            Adasum: "Adasum"}


def check_op(op, where):
    """op if plait runs it: NotImplementedError for Adasum, ValueError for
    anything that is not one of the op constants."""
    if op == Adasum:
        raise NotImplementedError("%s: Adasum is not implemented by plait; use Average or Sum"
                                  % where)
    if op not in OP_NAMES:
        raise ValueError("%s: unknown op %r; use Sum, Average, Min, Max or Product"
                         % (where, op))
    return op


def average_compat(op, average, stacklevel=3):
    """Horovod's handle_average_backwards_compatibility (its words and warning
    category, so filters written for Horovod apply): both given is a
    ValueError (Horovod's text, then plait.torch's former words in
    parentheses, which its tests match); average alone is Average (True) or Sum (False), with a
    DeprecationWarning (stacklevel: 3 names the caller of the public call
    that calls this); neither is Average; op alone is op (unchecked)."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one "
                             "of them (op or average, which is deprecated).")
        return op
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed "
                      "in v1.0", DeprecationWarning, stacklevel=stacklevel)
        return Average if average else Sum
    return Average


def resolve_op(op, average, where):
    """The op an operation runs: average_compat, then check_op. Called from a
    binding's own helper, called from the public call: the warning names the
    line of the user's code that made that call."""
    return check_op(average_compat(op, average, 5), where)


# --------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------

def check_root_type(root_rank, where):
    """TypeError unless root_rank is an int (bool refused); then a C int."""
    if isinstance(root_rank, bool) or not isinstance(root_rank, int):
        raise TypeError("%s: root_rank must be an int, not %s"
                        % (where, type(root_rank).__name__))
    return _core.c_integer(root_rank, "%s: root_rank" % where)


def check_root(root_rank, where, process_set_id=None, error=None):
    """root_rank is an int and a rank of the job (as in Horovod, also on a
    process set); with process_set_id (not None, not 0), a member of that set
    too. error(message) makes the exception (default: plait's
    InvalidArgumentError, a ValueError)."""
    check_root_type(root_rank, where)
    error = error or _core.invalid
    n = _core.size()
    if not 0 <= root_rank < n:
        raise error("%s: root_rank %d is not a rank of this job (0..%d)"
                    % (where, root_rank, n - 1))
    if process_set_id:
        members = _core.process_set_ranks(process_set_id)
        if root_rank not in members:
            raise error("%s: root_rank %d is not a member of process set %d (ranks %s)"
                        % (where, root_rank, process_set_id, members))
    return root_rank


def check_rows(ndim, where, error=ValueError):
    """An operation that splits first-dimension rows needs a tensor with at
    least one dimension (ndim: the tensor's number of dimensions)."""
    if ndim == 0:
        raise error("%s: the tensor needs at least one dimension (got a scalar)" % where)


# --------------------------------------------------------------------------
# Groups
# --------------------------------------------------------------------------

def split_list(l, n):  # noqa: E741 - Horovod's parameter names
    """Horovod's split_list: l in n consecutive parts of nearly equal length
    (the first len(l) % n ones one longer)."""
    d, r = divmod(len(l), n)
    return [l[i * d + min(i, r):(i + 1) * d + min(i + 1, r)] for i in range(n)]


def group_names(base, n):
    """Horovod's names for the n parts of a group: '<base>_<i>of<n>', i from 1."""
    return ["%s_%dof%d" % (base, i + 1, n) for i in range(n)]


# --------------------------------------------------------------------------
# Object collectives: pickled objects moved as bytes
# --------------------------------------------------------------------------

# The size a rank sends when its object could not be pickled: the others
# then raise too, instead of one rank raising while the others wait for it.
NOT_PICKLED = -1


def dumps(obj):
    """obj as bytes (cloudpickle when installed, else pickle)."""
    return pickler.dumps(obj)


def loads(data):
    """The object that dumps made data from (bytes, or anything with tobytes())."""
    return pickle.loads(data if isinstance(data, (bytes, bytearray)) else data.tobytes())


def unpack(data, sizes):
    """The objects of gathered bytes data (every rank's dumps, one after the
    other), given each rank's size in bytes, in rank order."""
    out, start = [], 0
    for n in sizes:
        n = int(n)
        out.append(loads(data[start:start + n]))
        start += n
    return out


# --------------------------------------------------------------------------
# Compression (horovod.<framework>.Compression)
# --------------------------------------------------------------------------

class Compressor:
    """Turns a tensor into what is sent, and back."""

    @staticmethod
    def compress(tensor):
        """Returns (tensor to send, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are (the default)."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16 (half the bytes), others as
    they are; the result comes back in the original dtype. The context is
    the original dtype, as Horovod's. A framework's subclass gives float16,
    is_float(dtype) and cast(tensor, dtype)."""

    float16 = None

    @staticmethod
    def is_float(dtype):
        raise NotImplementedError

    @staticmethod
    def cast(tensor, dtype):
        raise NotImplementedError

    @classmethod
    def compress(cls, tensor):
        if cls.is_float(tensor.dtype):
            return cls.cast(tensor, cls.float16), tensor.dtype
        return tensor, tensor.dtype

    @classmethod
    def decompress(cls, tensor, ctx):
        return cls.cast(tensor, ctx) if ctx is not None and cls.is_float(ctx) else tensor


class Compression:
    """Horovod's names: Compression.none and Compression.fp16 (a framework's
    subclass sets fp16 to its FP16Compressor)."""
    none = NoneCompressor
    fp16 = FP16Compressor
