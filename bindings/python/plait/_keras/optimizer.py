"""DistributedOptimizer for Keras optimizers (horovod._keras's
create_distributed_optimizer), on both Keras generations:

- Keras 3 (tf.keras in TensorFlow 2.16+, and `import keras`): Keras 3 applies
  gradients through Optimizer.apply(grads, trainable_variables) (fit's
  train_step calls apply_gradients, which calls apply), so that is where the
  gradients are allreduced. Horovod 0.28 overrides the Keras 2 methods only
  (get_gradients, _compute_gradients, apply_gradients), which Keras 3 never
  calls with gradients to reduce: its optimizer trains each rank alone.
- tf_keras (Keras 2, TF_USE_LEGACY_KERAS=1), both its optimizers and the
  legacy OptimizerV2 ones: as Horovod, gradients are allreduced where they
  are computed (compute_gradients / _compute_gradients / get_gradients).

In both, the optimizer is an instance of a class made on the fly that
derives from the given optimizer's class and has its name, built from the
given optimizer's config, so a saved model loads without plait.
"""

import tensorflow as tf

from plait._keras.gradients import GradientAggregator, GradientReducer


def is_keras3_optimizer(optimizer):
    """True for a Keras 3 optimizer (keras.src.optimizers.BaseOptimizer)."""
    try:
        from keras.src.optimizers.base_optimizer import BaseOptimizer
    except ImportError:  # no Keras 3 installed
        return False
    return isinstance(optimizer, BaseOptimizer)


class _PlaitState:
    """What a distributed optimizer adds to the one it wraps."""

    def __init__(self, name, reducer, aggregator):
        self.name = name
        self.reducer = reducer
        self.aggregator = aggregator

    def reduce(self, grads, vars_):
        return self.reducer(grads, vars_)


def _init_plait(opt, name, settings):
    reducer = GradientReducer(name, settings["device_dense"], settings["device_sparse"],
                              settings["compression"], settings["sparse_as_dense"],
                              settings["op"], settings["gradient_predivide_factor"],
                              settings["groups"], settings["process_set"],
                              settings["scale_local_gradients"])
    aggregator = None
    if settings["backward_passes_per_step"] > 1:
        aggregator = GradientAggregator(settings["backward_passes_per_step"], reducer,
                                        settings["sparse_as_dense"],
                                        settings["average_aggregated_gradients"])
    # object.__setattr__: Keras 3 and tf_keras track attributes; this is no
    # Keras state and must not be saved with the optimizer.
    object.__setattr__(opt, "_plait", _PlaitState(name, reducer, aggregator))
    object.__setattr__(opt, "process_set", settings["process_set"])
    object.__setattr__(opt, "scale_local_gradients", settings["scale_local_gradients"])


# --------------------------------------------------------------------------
# Horovod's hooks, on both generations (horovod._keras's _DistributedOptimizer)
# --------------------------------------------------------------------------

class CallableList(list):
    """Horovod's shim: opt.variables and opt.variables() both give the list."""

    def __call__(self):
        return self


def _common_methods(base):
    """What Horovod's wrapper defines whatever Keras runs: register_local_var,
    _allreduce (the reduction every hook goes through), the attributes scripts
    read (_agg_helper, _allreduce_grads, _local_vars) and variables."""

    def register_local_var(self, var):
        """Keeps var's gradient on this rank (not allreduced); it is scaled by
        1/size when scale_local_gradients (Horovod's semantics)."""
        self._plait.reducer.register_local_var(var)

    def _allreduce(self, grads, vars_):
        """grads reduced over the process set (None stays None); with
        backward_passes_per_step > 1, accumulated here and reduced (then the
        accumulators cleared) every backward_passes_per_step calls, the
        running sums returned in between (Horovod's _allreduce)."""
        object.__setattr__(self, "_aggregated_gradients", True)
        agg = self._plait.aggregator
        if agg is None:
            return self._plait.reduce(grads, vars_)
        values = agg.accumulate(grads, vars_)
        flags = [g is not None for g in values]
        present = [v for v in values if v is not None]

        def reduce_now():
            red = agg.reduce_and_clear(values, vars_)
            return [r for r in red if r is not None]
        out = tf.cond(agg.is_boundary(), reduce_now, lambda: list(present)) if present else []
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        it = iter(out)
        return [next(it) if f else None for f in flags]

    def variables(self):
        attr = super(type(self), self).variables
        return CallableList(attr() if callable(attr) and not isinstance(attr, list) else attr)

    return {"register_local_var": register_local_var, "_allreduce": _allreduce,
            "_plait_allreduce": _allreduce, "variables": property(variables),
            "_agg_helper": property(lambda self: self._plait.aggregator),
            "_allreduce_grads": property(lambda self: self._plait.reducer),
            "_local_vars": property(lambda self: self._plait.reducer.local_keys),
            "_HAS_AGGREGATE_GRAD": True}


def _tape_gradients(loss, var_list, grad_loss, tape):
    """(grads, variables) of loss: a callable run under tape (a new one when
    None), or a tensor that tape recorded; var_list may be a callable."""
    tape = tf.GradientTape() if tape is None else tape
    if callable(loss):
        with tape:
            loss = loss()
    if callable(var_list):
        var_list = var_list()
    var_list = tf.nest.flatten(var_list)
    return list(tape.gradient(loss, var_list, output_gradients=grad_loss)), var_list


def _graph_gradients(loss, params, what):
    """tf.gradients of loss (Keras 2's get_gradients), in a graph only."""
    if tf.executing_eagerly():
        raise RuntimeError("plait: %s.get_gradients needs a graph (tf.function or "
                           "tf.compat.v1); eagerly, use _compute_gradients(loss, var_list, "
                           "tape=tape) or a DistributedGradientTape" % what)
    params = tf.nest.flatten(params)
    grads = tf.gradients(loss, params)
    for g, p in zip(grads, params):
        if g is None:
            raise ValueError("Variable {} has `None` for gradient.".format(p))
    return grads


# --------------------------------------------------------------------------
# Keras 3: the hook is apply(grads, trainable_variables)
# --------------------------------------------------------------------------

def _keras3_step(self, base, grads, variables, reduce):
    """base.apply of grads (reduced first when reduce), through the
    aggregator when backward_passes_per_step > 1."""
    agg = self._plait.aggregator
    if agg is None:
        grads = self._plait.reduce(grads, variables) if reduce else grads
        return base.apply(self, grads, variables)
    if reduce:
        values = agg.accumulate(grads, variables)
        boundary = agg.is_boundary()

        def step():
            base.apply(self, agg.reduce_and_clear(values, variables), variables)
            return tf.constant(True)
    else:  # from _compute_gradients: reduced (and the counter cleared) at a boundary
        boundary = tf.equal(agg.counter, 0)

        def step():
            base.apply(self, grads, variables)
            return tf.constant(True)

    def skip():
        # Horovod counts every backward pass as an iteration.
        self.iterations.assign_add(1)
        return tf.constant(False)
    tf.cond(boundary, step, skip)


def _keras3_methods(base, settings):
    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        _init_plait(self, settings["name"] or "Distributed%s" % base.__name__, settings)
        object.__setattr__(self, "_aggregated_gradients", False)
        object.__setattr__(self, "_plait_reduced", ())

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        """Horovod's hook: the gradients of loss, allreduced. apply_gradients
        does not reduce them again when they come to it unchanged."""
        grads, variables = _tape_gradients(loss, var_list, grad_loss, tape)
        reduced = self._allreduce(grads, variables)
        object.__setattr__(self, "_plait_reduced", tuple(g for g in reduced if g is not None))
        return list(zip(reduced, variables))

    def compute_gradients(self, loss, var_list, tape=None):
        return self._compute_gradients(loss, var_list, None, tape)

    def get_gradients(self, loss, params):
        """tf.gradients of loss (in a graph), allreduced (Keras 2's hook)."""
        grads = self._allreduce(_graph_gradients(loss, params, type(self).__name__), params)
        object.__setattr__(self, "_plait_reduced", tuple(g for g in grads if g is not None))
        return grads

    def _aggregate_gradients(self, grads_and_vars):
        # Keras 3 has no cross-replica aggregation hook: nothing to do here.
        return list(grads_and_vars)

    def minimize(self, loss, var_list, tape=None):
        """tf.keras 2's minimize (Keras 3 has none): gradients of loss applied,
        allreduced once."""
        return self.apply_gradients(self._compute_gradients(loss, var_list, None, tape))

    def apply_gradients(self, grads_and_vars, name=None, skip_gradients_aggregation=False,
                        experimental_aggregate_gradients=True):
        # Keras 2's keywords are accepted (Horovod-era scripts pass them); they
        # concern tf.distribute's aggregation, which Keras 3's apply does itself.
        grads, variables = zip(*grads_and_vars)
        self.apply(grads, variables)
        return self._iterations

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        pending, reduced = self._plait_reduced, ()
        object.__setattr__(self, "_plait_reduced", ())
        if pending:
            # Gradients passed on unchanged from _compute_gradients / get_gradients.
            ids = {id(t) for t in pending}
            present = [g for g in grads if g is not None]
            reduced = bool(present) and all(id(g) in ids for g in present)
        if trainable_variables is None:
            if not self.built:
                # Keras's own message for this case.
                return base.apply(self, grads, trainable_variables)
            variables = list(self._trainable_variables)
        else:
            variables = list(trainable_variables)
            if not self.built:
                # Built here, outside the tf.cond below, which may not create variables.
                self.build(variables)
                self.built = True
        if not grads:
            return base.apply(self, grads, trainable_variables)
        return _keras3_step(self, base, grads, variables, reduce=not reduced)

    methods = _common_methods(base)
    methods.update({"__init__": __init__, "_compute_gradients": _compute_gradients,
                    "compute_gradients": compute_gradients, "get_gradients": get_gradients,
                    "_aggregate_gradients": _aggregate_gradients, "minimize": minimize,
                    "apply_gradients": apply_gradients, "apply": apply,
                    "_plait_flavour": "keras3"})
    return methods


# --------------------------------------------------------------------------
# tf_keras (Keras 2): the hooks are where gradients are computed
# --------------------------------------------------------------------------

def _keras2_methods(base, settings):
    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        _init_plait(self, settings["name"] or "Distributed%s" % base.__name__, settings)
        self._aggregated_gradients = False

    def compute_gradients(self, loss, var_list, tape=None):
        return self._compute_gradients(loss, var_list, None, tape)

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        """Horovod's hook: the base's gradients of loss, allreduced."""
        tape = tf.GradientTape() if tape is None else tape
        if hasattr(base, "_compute_gradients"):  # OptimizerV2
            grads_and_vars = base._compute_gradients(self, loss, var_list, grad_loss, tape=tape)
        else:  # tf_keras's Optimizer: compute_gradients(loss, var_list, tape)
            grads_and_vars = base.compute_gradients(self, loss, var_list, tape=tape)
        grads, vars_ = zip(*grads_and_vars)
        return list(zip(self._allreduce(grads, vars_), vars_))

    def get_gradients(self, loss, params):
        return self._allreduce(base.get_gradients(self, loss, params), params)

    def _aggregate_gradients(self, grads_and_vars):
        # tf.distribute's aggregation across replicas, as Horovod (no allreduce).
        if hasattr(base, "_aggregate_gradients"):
            return base._aggregate_gradients(self, grads_and_vars)
        return base.aggregate_gradients(self, grads_and_vars)

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        agg = self._plait.aggregator
        if agg is None:
            return base.apply_gradients(self, grads_and_vars, *args, **kwargs)
        grads_and_vars = list(grads_and_vars)
        if hasattr(self, "build") and not getattr(self, "_built", True):
            # tf_keras optimizers build their variables on first apply; not inside tf.cond.
            self.build([v for _, v in grads_and_vars])

        def step():
            base.apply_gradients(self, grads_and_vars, *args, **kwargs)
            return tf.constant(True)

        def skip():
            self.iterations.assign_add(1)
            return tf.constant(False)
        # The aggregator's counter went back to 0 when the gradients were reduced.
        return tf.cond(tf.equal(agg.counter, 0), step, skip)

    methods = _common_methods(base)
    methods.update({"__init__": __init__, "apply_gradients": apply_gradients,
                    "compute_gradients": compute_gradients,
                    "_compute_gradients": _compute_gradients, "get_gradients": get_gradients,
                    "_aggregate_gradients": _aggregate_gradients, "_plait_flavour": "keras2"})
    return methods


def distributed_class(base, settings):
    """The class of a distributed optimizer wrapping optimizers of class base."""
    if getattr(base, "_plait_flavour", None):
        raise ValueError("plait: %s is already a DistributedOptimizer; wrap the original "
                         "optimizer once" % base.__name__)
    try:
        from keras.src.optimizers.base_optimizer import BaseOptimizer
        keras3 = issubclass(base, BaseOptimizer)
    except ImportError:
        keras3 = False
    methods = _keras3_methods(base, settings) if keras3 else _keras2_methods(base, settings)
    methods["__module__"] = base.__module__
    methods["__doc__"] = base.__doc__
    # The same name as the class it wraps, so a saved model loads without plait.
    return type(base.__name__, (base,), methods)


def create_distributed_optimizer(optimizer, settings):
    if isinstance(optimizer, type):
        raise TypeError("plait: DistributedOptimizer takes an optimizer instance, not the "
                        "class %s" % optimizer.__name__)
    if not (hasattr(optimizer, "get_config") and
            (hasattr(optimizer, "apply_gradients") or hasattr(optimizer, "apply"))):
        raise TypeError("plait: DistributedOptimizer wraps a Keras optimizer (keras.optimizers."
                        "Optimizer or tf_keras's), not %s" % type(optimizer).__name__)
    cls = distributed_class(type(optimizer), settings)
    return cls.from_config(optimizer.get_config())
