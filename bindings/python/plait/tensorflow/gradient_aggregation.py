"""Local gradient aggregation for TF1 graphs (Horovod's
LocalGradientAggregationHelper, backward_passes_per_step > 1): gradients are
summed into local variables for backward_passes_per_step passes and
allreduced on the last one; the optimizer applies them only then (the other
passes only advance its iteration count and global_step, as in Horovod).
"""

import os

import tensorflow as tf

from plait.tensorflow.mpi_ops import global_process_set, size_op
from plait.tensorflow.util import _key


def _not_none(tensors):
    return [t for t in tensors if t is not None]


class LocalGradientAggregationHelper:
    """Aggregates gradients locally over backward_passes_per_step passes."""

    _OPTIMIZER_TYPE_KERAS = "optimizer_type_keras"
    _OPTIMIZER_TYPE_LEGACY = "optimizer_type_legacy"

    def __init__(self, backward_passes_per_step, allreduce_func, sparse_as_dense,
                 average_aggregated_gradients, rank, optimizer_type,
                 process_set=global_process_set, scale_local_gradients=True, name=""):
        if backward_passes_per_step <= 0:
            raise ValueError("backward_passes_per_step must be > 0")
        self._allreduce_grads = allreduce_func
        self.name = name
        self.backward_passes_per_step = backward_passes_per_step
        self.average_aggregated_gradients = average_aggregated_gradients
        self.sparse_as_dense = sparse_as_dense
        self.rank = rank
        self.optimizer_type = optimizer_type
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self.locally_aggregated_grads = []
        self.counter = None
        self.not_none_indexes = {}
        self.num_none_grad_updates = 0
        self._local_vars = set()
        self._local_refs = []

    def register_local_var(self, var):
        """var's gradient stays local (not allreduced)."""
        self._local_vars.add(_key(var))
        self._local_refs.append(var)

    def _maybe_convert_grad(self, grad):
        if isinstance(grad, tf.IndexedSlices):
            if not self.sparse_as_dense:
                raise ValueError("IndexedSlices are not supported when `backward_passes_per_step` "
                                 "> 1 and `sparse_as_dense` is False.")
            return tf.convert_to_tensor(grad)
        return grad

    def _init_aggregation_vars(self, grads):
        scope = "aggregation_variables_" + self.name + str(self.rank)
        local = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
        with tf.compat.v1.variable_scope(scope, reuse=tf.compat.v1.AUTO_REUSE):
            self.counter = tf.compat.v1.get_variable(
                "aggregation_counter", shape=(), dtype=tf.int32, trainable=False,
                initializer=tf.compat.v1.zeros_initializer(), collections=local)
            for idx, grad in enumerate(grads):
                grad = self._maybe_convert_grad(grad)
                if grad is None:
                    self.num_none_grad_updates += 1
                    continue
                self.not_none_indexes[idx] = len(self.locally_aggregated_grads)
                self.locally_aggregated_grads.append(tf.compat.v1.get_variable(
                    str(idx), trainable=False,
                    initializer=tf.zeros(grad.get_shape().as_list(), dtype=grad.dtype),
                    collections=local + ["aggregating_collection"]))
        if self.optimizer_type == self._OPTIMIZER_TYPE_KERAS:
            session = tf.compat.v1.keras.backend.get_session(op_input_list=())
            session.run(tf.compat.v1.variables_initializer(
                [self.counter] + self.locally_aggregated_grads))

    def _clear_grads(self):
        return tf.group(*[g.assign(g.initial_value) for g in self.locally_aggregated_grads])

    def _aggregate_grads(self, grads):
        grads = _not_none(grads)
        return [acc.assign_add(self._maybe_convert_grad(g))
                for acc, g in zip(self.locally_aggregated_grads, grads)]

    def _reduce(self, grads, vars):
        """Allreduces the gradients of the non-local variables; local ones are
        divided by size when scale_local_gradients."""
        keep = [(v, g) for v, g in zip(vars, grads) if _key(v) not in self._local_vars]
        reduced = self._allreduce_grads([g for _, g in keep], [v for v, _ in keep])
        by_key = {_key(v): g for v, g in zip(vars, grads)}
        for (v, _), g in zip(keep, reduced):
            by_key[_key(v)] = g
        if self.scale_local_gradients and self._local_vars:
            n = (size_op(process_set_id=self.process_set.process_set_id)
                 if int(os.environ.get("HOROVOD_ELASTIC", 0)) else self.process_set.size())
            for k in self._local_vars:
                if by_key.get(k) is not None:
                    by_key[k] = by_key[k] / tf.cast(n, by_key[k].dtype)
        return [by_key[_key(v)] for v in vars]

    def _allreduce_grads_helper(self, vars):
        aggregated = [g.read_value() for g in self.locally_aggregated_grads]
        with tf.control_dependencies([tf.group(*aggregated)]):
            vars_not_none = [v for i, v in enumerate(vars) if i in self.not_none_indexes]
            reduced = self._reduce(aggregated, vars_not_none)
            with tf.control_dependencies([g.op for g in reduced if g is not None]):
                reset = self.counter.assign(tf.constant(0), use_locking=True)
            with tf.control_dependencies([reset]):
                divisor = self.backward_passes_per_step if self.average_aggregated_gradients \
                    else 1
                return [tf.divide(g, divisor) if g is not None else g for g in reduced]

    def compute_gradients(self, grads, vars):
        """The gradients to apply: allreduced aggregates on every
        backward_passes_per_step-th pass, this pass's gradients otherwise."""
        self._init_aggregation_vars(grads)
        clear = tf.cond(tf.equal(self.counter, 0), self._clear_grads, tf.no_op)
        with tf.control_dependencies([clear]):
            aggregate = tf.group(*self._aggregate_grads(grads))
        with tf.control_dependencies([aggregate]):
            count = self.counter.assign_add(tf.constant(1))
        with tf.control_dependencies([count]):
            present = _not_none(grads)
            out = tf.cond(tf.equal(self.counter, self.backward_passes_per_step),
                          lambda: self._allreduce_grads_helper(vars),
                          lambda: [self._maybe_convert_grad(g) for g in present])
            if not isinstance(out, (list, tuple)):
                out = (out,)
        total = len(self.locally_aggregated_grads) + self.num_none_grad_updates
        return [out[self.not_none_indexes[i]] if i in self.not_none_indexes else None
                for i in range(total)]

    def apply_gradients(self, apply_grads_closure, optimizer, *args, **kwargs):
        """Applies on the communication pass only; otherwise advances the
        optimizer's iterations and global_step."""
        flat = [x for pair in args[0] for x in pair]

        def count_iteration():
            if getattr(optimizer, "iterations", None) is not None:
                return optimizer.iterations.assign_add(1).op
            return tf.no_op()

        with tf.control_dependencies([tf.group(*_not_none(flat))]):
            train = tf.cond(tf.equal(self.counter, 0), apply_grads_closure, count_iteration)

        def count_global_step():
            step = kwargs.get("global_step")
            if step is None:
                return tf.no_op()
            return step.assign_add(tf.constant(1, dtype=tf.int64), use_locking=True,
                                   read_value=False)

        with tf.control_dependencies([train]):
            return tf.cond(tf.equal(self.counter, 0), tf.no_op, count_global_step)
