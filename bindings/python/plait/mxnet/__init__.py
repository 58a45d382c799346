"""plait.mxnet: a drop-in replacement for horovod.mxnet (0.28).

    import plait.mxnet as hvd
    hvd.init()
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)

Every operation on NDArrays runs inside MXNet's dependency engine
(docs/mxnet.md): it is ordered against other work on the same arrays, and
its result is there when MXNet reads it. Needs plait's MXNet adapter,
libplait_mxnet.so, built by CMake with -DPLAIT_MXNET_PYTHON.
"""

import warnings
from collections import OrderedDict, defaultdict

import mxnet as mx

from plait._core import PlaitError  # noqa: F401
from plait import stats, stats_reset, transport_name, config_dump  # noqa: F401
from plait import ERRORS as _ERRORS
from plait.common import ops as _ops
from plait.common.exceptions import HorovodInternalError  # noqa: F401
from plait.mxnet.compression import Compression
from plait.mxnet.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_parameters,
)
from plait.mxnet.mpi_ops import (  # noqa: F401
    allgather, grouped_allgather, allreduce, allreduce_, grouped_allreduce, grouped_allreduce_,
    alltoall, broadcast, broadcast_, reducescatter, grouped_reducescatter, barrier, join,
    init, shutdown, is_initialized, start_timeline, stop_timeline, size, local_size,
    cross_size, rank, local_rank, cross_rank, is_homogeneous, mpi_threads_supported,
    mpi_enabled, mpi_built, gloo_enabled, gloo_built, nccl_built, ddl_built, ccl_built,
    cuda_built, rocm_built, ProcessSet, global_process_set, add_process_set,
    remove_process_set, Average, Sum, Adasum, Min, Max, Product,
)


split_list = _ops.split_list  # Horovod's: n chunks of nearly equal length


def _average_in_framework():
    """Horovod 0.28 averages in the framework (a Sum allreduce, then the
    optimizer's rescale_grad) unless it was built with NCCL >= 2.10. plait
    decides on the transport the job runs on, not on what is installed: a
    job on gloo or ofi averages in the framework (Horovod's CPU build, bit
    for bit) even where the nccl plugin is also installed; a job on nccl
    >= 2.10 averages in plait (ncclAvg), as Horovod's NCCL build does."""
    if rocm_built():
        return True
    try:
        running = transport_name()
    except PlaitError:
        running = None
    if running is not None and running != "nccl":
        return True
    return nccl_built() < 21000


class DistributedOptimizer(mx.optimizer.Optimizer):
    """Wraps an mx.optimizer.Optimizer: update() first allreduces the gradient
    over all ranks (in place, in MXNet's engine), then lets the wrapped
    optimizer update the weight. gradient_predivide_factor: gradients are
    scaled by 1/factor before the sum and factor/size after it. num_groups > 0:
    the gradients of one multi-index update go in that many grouped
    allreduces."""

    def __init__(self, optimizer, gradient_predivide_factor=1.0, num_groups=0,
                 process_set=global_process_set):
        if gradient_predivide_factor != 1.0 and rocm_built():
            raise ValueError("gradient_predivide_factor not supported yet with ROCm")
        self._optimizer = optimizer
        self._gradient_predivide_factor = gradient_predivide_factor
        self._average_in_framework = False
        self._postscale_factor = gradient_predivide_factor
        if _average_in_framework():
            self._optimizer.rescale_grad *= (gradient_predivide_factor / process_set.size())
            self._postscale_factor = 1.0
            self._average_in_framework = True
        self._num_groups = num_groups
        self._process_set = process_set

    def __getattr__(self, item):
        return getattr(self._optimizer, item)

    def create_state(self, index, weight):
        return self._optimizer.create_state(index, weight)

    def create_state_multi_precision(self, index, weight):
        return self._optimizer.create_state_multi_precision(index, weight)

    def _op(self):
        return Sum if self._average_in_framework else Average

    def _do_allreduce(self, index, grad):
        if self._process_set.size() == 1:
            return
        pre = 1.0 / self._gradient_predivide_factor
        if isinstance(index, (tuple, list)):
            if self._num_groups > 0:
                grad_split = split_list(grad, self._num_groups)
                index_split = split_list(index, self._num_groups)
                for i, (grads, indices) in enumerate(zip(grad_split, index_split)):
                    if not grads:
                        continue
                    grouped_allreduce_(tensors=grads, op=self._op(),
                                       name="{}:{}".format(indices[0], indices[-1]),
                                       priority=-i, prescale_factor=pre,
                                       postscale_factor=self._postscale_factor,
                                       process_set=self._process_set)
            else:
                for i in range(len(index)):
                    allreduce_(grad[i], op=self._op(), name=str(index[i]), priority=-i,
                               prescale_factor=pre, postscale_factor=self._postscale_factor,
                               process_set=self._process_set)
        else:
            allreduce_(grad, op=self._op(), name=str(index), prescale_factor=pre,
                       postscale_factor=self._postscale_factor, process_set=self._process_set)

    def update(self, index, weight, grad, state):
        if self._process_set.included():
            self._do_allreduce(index, grad)
        self._optimizer.update(index, weight, grad, state)

    def update_multi_precision(self, index, weight, grad, state):
        if self._process_set.included():
            self._do_allreduce(index, grad)
        self._optimizer.update_multi_precision(index, weight, grad, state)

    def set_learning_rate(self, lr):
        self._optimizer.set_learning_rate(lr)

    def set_lr_mult(self, args_lr_mult):
        self._optimizer.set_lr_mult(args_lr_mult)

    def set_wd_mult(self, args_wd_mult):
        self._optimizer.set_wd_mult(args_wd_mult)


class DistributedTrainer(mx.gluon.Trainer):
    """gluon.Trainer whose step() allreduces the gradients with plait (in
    MXNet's engine) instead of a kvstore, and averages them over the ranks.

    params, optimizer, optimizer_params: as gluon.Trainer's.
    compression: Compression.none or Compression.fp16.
    gradient_predivide_factor: gradients are scaled by 1/factor before the
    sum and factor/size after it.
    prefix: prepended to the operation names; give different prefixes to
    several trainers in one program.
    num_groups > 0: the gradients go in that many grouped allreduces (one
    per dtype within each group)."""

    def __init__(self, params, optimizer, optimizer_params=None, compression=Compression.none,
                 gradient_predivide_factor=1.0, prefix=None, num_groups=0,
                 process_set=global_process_set):
        self._compression = compression
        self._process_set = process_set
        if gradient_predivide_factor != 1.0 and rocm_built():
            raise ValueError("gradient_predivide_factor not supported yet with ROCm")
        if isinstance(optimizer, DistributedOptimizer):
            optimizer = optimizer._optimizer
            warnings.warn("DistributedTrainer does not take DistributedOptimizer "
                          "as its optimizer. We have unwrapped it for you.")
        # The same parameter order on every rank (as Horovod does).
        if isinstance(params, dict):
            params = OrderedDict(params)
        elif isinstance(params, (list, tuple)):
            params = sorted(params)
        super(DistributedTrainer, self).__init__(
            params, optimizer, optimizer_params=optimizer_params, kvstore=None)
        self._gradient_predivide_factor = gradient_predivide_factor
        self._average_in_framework = False
        self._postscale_factor = gradient_predivide_factor
        if _average_in_framework():
            self._scale *= (gradient_predivide_factor / process_set.size())
            self._postscale_factor = 1.0
            self._average_in_framework = True
        if prefix is not None and not isinstance(prefix, str):
            raise ValueError("DistributedTrainer: prefix must be a str, not %r" % (prefix,))
        self._prefix = prefix if prefix else ""
        self._num_groups = num_groups

    def _op(self):
        return Sum if self._average_in_framework else Average

    def _allreduce_grads(self):
        if self._process_set.size() == 1:
            return
        if not self._process_set.included():
            return
        pre = 1.0 / self._gradient_predivide_factor
        if self._num_groups > 0:
            grads, names, compressed, ctxs = [], [], [], []
            for i, param in enumerate(self._params):
                if param.grad_req != "null":
                    t, ctx = self._compression.compress(param.list_grad()[0])
                    grads.append(t)
                    compressed.append(t)
                    ctxs.append(ctx)
                    names.append(self._prefix + str(i))
            for i, (group_grads, group_names) in enumerate(
                    zip(split_list(grads, self._num_groups),
                        split_list(names, self._num_groups))):
                by_dtype = defaultdict(list)
                for grad, name in zip(group_grads, group_names):
                    by_dtype[grad.dtype].append((grad, name))
                for entries in by_dtype.values():
                    gs, ns = zip(*entries)
                    grouped_allreduce_(tensors=list(gs), op=self._op(),
                                       name="{}:{}".format(ns[0], ns[-1]), priority=-i,
                                       prescale_factor=pre,
                                       postscale_factor=self._postscale_factor,
                                       process_set=self._process_set)
            if self._compression != Compression.none:
                for i, param in enumerate(self._params):
                    if param.grad_req != "null":
                        param.list_grad()[0][:] = self._compression.decompress(
                            compressed.pop(0), ctxs.pop(0))
        else:
            for i, param in enumerate(self._params):
                if param.grad_req != "null":
                    t, ctx = self._compression.compress(param.list_grad()[0])
                    allreduce_(t, op=self._op(), name=self._prefix + str(i), priority=-i,
                               prescale_factor=pre, postscale_factor=self._postscale_factor,
                               process_set=self._process_set)
                    if self._compression != Compression.none:
                        param.list_grad()[0][:] = self._compression.decompress(t, ctx)


# PeerLostError, MismatchError, ...: plait's class for each result code.
for _cls in _ERRORS.values():
    globals()[_cls.__name__] = _cls
del _cls
