"""How a Keras DistributedOptimizer combines gradients across ranks
(horovod.tensorflow's _make_allreduce_grads_fn and its gradient aggregation
helpers, with Horovod 0.28's semantics), for Keras 3 and tf_keras alike.

Variables are told apart by var_key(): a Keras 3 variable by its path (it
has no ref()), a tf.Variable by its ref(), as Horovod does.
"""

import tensorflow as tf

import plait.tensorflow as _ptf
from plait.common.basics import Average


def var_key(var):
    """A hashable identity for a variable: Keras 3 variables have a unique
    path and no ref(); tf.Variables (tf_keras) have ref()."""
    if hasattr(var, "ref"):
        try:
            return var.ref()
        except (AttributeError, TypeError):
            pass
    path = getattr(var, "path", None)
    if path is not None:
        return ("path", path)
    return ("id", id(var))


def _var_label(var, index):
    """The part of a gradient's collective name that says which variable:
    the same on every rank (variables are built in the same order)."""
    label = getattr(var, "path", None) or getattr(var, "name", None) or "var"
    return "grad_%d.%s" % (index, str(label).replace(":", "_"))


def split_list(items, n):
    """items cut into n consecutive parts whose lengths differ by at most 1
    (the first len % n parts are the longer ones)."""
    d, r = divmod(len(items), n)
    return [items[i * d + min(i, r):(i + 1) * d + min(i + 1, r)] for i in range(n)]


def _process_set_size(process_set):
    """The set's size: read when the graph runs in elastic mode (a tensor)."""
    return _ptf._set_size_for(process_set if process_set is not None else
                              _ptf.global_process_set)


def _reduces_here(process_set):
    """Horovod's condition: this rank is in the set, which has more than one
    rank; otherwise the gradients pass through unchanged. In elastic mode
    always (as Horovod's HOROVOD_ELASTIC): a traced step must still reduce
    once the job has grown."""
    if _ptf._elastic_mode():
        return True
    if process_set is None:
        return _ptf.size() > 1
    return bool(process_set.included()) and process_set.size() > 1


class GradientReducer:
    """Allreduces a list of gradients (None entries pass through), keeping
    the gradients of registered local variables on this rank (scaled by
    1/size when scale_local_gradients), as Horovod's DistributedOptimizer."""

    def __init__(self, name, device_dense, device_sparse, compression, sparse_as_dense, op,
                 gradient_predivide_factor, groups, process_set, scale_local_gradients):
        self.name = name
        self.device_dense = device_dense
        self.device_sparse = device_sparse
        self.compression = compression
        self.sparse_as_dense = sparse_as_dense
        self.op = op
        if op == Average:
            # Average over size, split around the sum: grad / f summed, then * f / size.
            self.prescale = 1.0 / gradient_predivide_factor
            self.postscale = gradient_predivide_factor
        else:
            self.prescale, self.postscale = 1.0, 1.0
        self.groups = groups
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self.local_keys = set()
        self._local_vars = []  # keeps the registered variables alive

    def register_local_var(self, var):
        self.local_keys.add(var_key(var))
        self._local_vars.append(var)

    def _collective_kwargs(self):
        kw = dict(device_dense=self.device_dense, device_sparse=self.device_sparse,
                  compression=self.compression, op=self.op, process_set=self.process_set)
        if self.prescale != 1.0 or self.postscale != 1.0:
            kw.update(prescale_factor=self.prescale, postscale_factor=self.postscale)
        return kw

    def _allreduce_list(self, grads, vars_, indices):
        """The non-local gradients grads (all not None) of vars_ reduced; indices
        are their positions in the optimizer's list (used in names)."""
        if not _reduces_here(self.process_set):
            return list(grads)
        kw = self._collective_kwargs()
        prefix = self.name + "_Allreduce."
        if self.groups is None:
            return [_ptf.allreduce(g, name=prefix + _var_label(v, i), **kw)
                    for g, v, i in zip(grads, vars_, indices)]
        entries = list(zip(range(len(grads)), grads, vars_, indices))
        if isinstance(self.groups, list):
            where = {var_key(v): e for e in entries for v in [e[2]]}
            parts = []
            for group in self.groups:
                part = []
                for v in group:
                    e = where.pop(var_key(v), None)
                    if e is not None:
                        part.append(e)
                if part:
                    parts.append(part)
            leftover = {id(e) for e in where.values()}
            parts.extend([e] for e in entries if id(e) in leftover)
        else:
            parts = [p for p in split_list(entries, self.groups) if p]
        out = [None] * len(grads)
        for part in parts:
            dense = [e for e in part if not isinstance(e[1], tf.IndexedSlices)]
            sparse = [e for e in part if isinstance(e[1], tf.IndexedSlices)]
            if dense:
                first = _var_label(dense[0][2], dense[0][3])
                reduced = _ptf.grouped_allreduce([e[1] for e in dense],
                                                 name=prefix + "group." + first, **kw)
                for e, r in zip(dense, reduced):
                    out[e[0]] = r
            for e in sparse:
                out[e[0]] = _ptf.allreduce(e[1], name=prefix + _var_label(e[2], e[3]), **kw)
        return out

    def __call__(self, grads, vars_):
        grads = list(grads)
        vars_ = list(vars_)
        if self.sparse_as_dense:
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                     for g in grads]
        picked = [i for i, (g, v) in enumerate(zip(grads, vars_))
                  if g is not None and var_key(v) not in self.local_keys]
        with tf.name_scope(self.name + "_Allreduce"):
            reduced = self._allreduce_list([grads[i] for i in picked], [vars_[i] for i in picked],
                                           picked)
        out = list(grads)
        for i, r in zip(picked, reduced):
            out[i] = r
        if self.scale_local_gradients and self.local_keys:
            n = _process_set_size(self.process_set)
            for i, (g, v) in enumerate(zip(grads, vars_)):
                if g is not None and var_key(v) in self.local_keys:
                    if isinstance(g, tf.IndexedSlices):
                        out[i] = tf.IndexedSlices(g.values / tf.cast(n, g.values.dtype),
                                                  g.indices, g.dense_shape)
                    else:
                        out[i] = g / tf.cast(n, g.dtype)
        return out


class GradientAggregator:
    """backward_passes_per_step > 1: gradients are summed on this rank and
    allreduced once every backward_passes_per_step calls (divided by it when
    average_aggregated_gradients), as Horovod's LocalGradientAggregationHelper.
    The accumulators are plain tf.Variables: they are not the optimizer's
    Keras variables, so a saved model is the same as without plait."""

    def __init__(self, backward_passes_per_step, reducer, sparse_as_dense,
                 average_aggregated_gradients):
        if backward_passes_per_step <= 0:
            raise ValueError("backward_passes_per_step must be > 0")
        self.steps = int(backward_passes_per_step)
        self.reducer = reducer
        self.sparse_as_dense = sparse_as_dense
        self.average = average_aggregated_gradients
        with tf.init_scope():
            self.counter = tf.Variable(0, dtype=tf.int64, trainable=False,
                                       name="plait_backward_passes")
        self.accumulators = {}

    def _accumulator(self, index, grad, var):
        acc = self.accumulators.get(index)
        if acc is None:
            shape = grad.shape if grad.shape.is_fully_defined() else var.shape
            with tf.init_scope():
                acc = tf.Variable(tf.zeros(shape, dtype=grad.dtype), trainable=False,
                                  name="plait_aggregated_%d" % index)
            self.accumulators[index] = acc
        return acc

    def accumulate(self, grads, vars_):
        """Adds grads into the accumulators; returns their current values (None
        stays None) and counts one backward pass."""
        values = []
        for i, (g, v) in enumerate(zip(grads, vars_)):
            if g is None:
                values.append(None)
                continue
            if isinstance(g, tf.IndexedSlices):
                if not self.sparse_as_dense:
                    raise ValueError("IndexedSlices are not supported when "
                                     "`backward_passes_per_step` > 1 and "
                                     "`sparse_as_dense` is False (gradient of %s)"
                                     % (getattr(v, "path", None) or getattr(v, "name", v),))
                g = tf.convert_to_tensor(g)
            acc = self._accumulator(i, g, v)
            acc.assign_add(g)
            values.append(acc.read_value())
        self.counter.assign_add(1)
        return values

    def is_boundary(self):
        return tf.equal(self.counter, self.steps)

    def reduce_and_clear(self, values, vars_):
        """The accumulated values allreduced (and averaged over the passes when
        asked); the accumulators and the counter start again at zero."""
        reduced = self.reducer(values, vars_)
        if self.average:
            reduced = [None if r is None else r / self.steps for r in reduced]
        # Materialise before clearing: reads of the accumulators must not see the zeros.
        reduced = [None if r is None else tf.identity(r) for r in reduced]
        with tf.control_dependencies([r for r in reduced if r is not None]):
            self.counter.assign(0)
            for acc in self.accumulators.values():
                acc.assign(tf.zeros_like(acc))
        return reduced
