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
# Keras 3: the hook is apply(grads, trainable_variables)
# --------------------------------------------------------------------------

def _keras3_methods(base, settings):
    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        _init_plait(self, settings["name"] or "Distributed%s" % base.__name__, settings)

    def register_local_var(self, var):
        """Keeps var's gradient on this rank (not allreduced); it is scaled by
        1/size when scale_local_gradients (Horovod's semantics)."""
        self._plait.reducer.register_local_var(var)

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
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
        agg = self._plait.aggregator
        if agg is None:
            return base.apply(self, self._plait.reduce(grads, variables), variables)

        values = agg.accumulate(grads, variables)

        def step():
            base.apply(self, agg.reduce_and_clear(values, variables), variables)
            return tf.constant(True)

        def skip():
            # Horovod counts every backward pass as an iteration.
            self.iterations.assign_add(1)
            return tf.constant(False)
        tf.cond(agg.is_boundary(), step, skip)

    return {"__init__": __init__, "register_local_var": register_local_var, "apply": apply,
            "_plait_flavour": "keras3"}


# --------------------------------------------------------------------------
# tf_keras (Keras 2): the hooks are where gradients are computed
# --------------------------------------------------------------------------

def _keras2_methods(base, settings):
    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        _init_plait(self, settings["name"] or "Distributed%s" % base.__name__, settings)
        self._aggregated_gradients = False

    def register_local_var(self, var):
        """Keeps var's gradient on this rank (not allreduced); it is scaled by
        1/size when scale_local_gradients (Horovod's semantics)."""
        self._plait.reducer.register_local_var(var)

    def _plait_allreduce(self, grads, vars_):
        self._aggregated_gradients = True
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

    def compute_gradients(self, loss, var_list, tape=None):
        grads_and_vars = base.compute_gradients(self, loss, var_list, tape=tape)
        grads, vars_ = zip(*grads_and_vars)
        return list(zip(self._plait_allreduce(grads, vars_), vars_))

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        tape = tf.GradientTape() if tape is None else tape
        grads_and_vars = base._compute_gradients(self, loss, var_list, grad_loss, tape=tape)
        grads, vars_ = zip(*grads_and_vars)
        return list(zip(self._plait_allreduce(grads, vars_), vars_))

    def get_gradients(self, loss, params):
        return self._plait_allreduce(base.get_gradients(self, loss, params), params)

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

    methods = {"__init__": __init__, "register_local_var": register_local_var,
               "_plait_allreduce": _plait_allreduce, "apply_gradients": apply_gradients,
               "get_gradients": get_gradients, "_plait_flavour": "keras2"}
    if hasattr(base, "_compute_gradients"):  # OptimizerV2 (tf_keras.optimizers.legacy)
        methods["_compute_gradients"] = _compute_gradients
    if hasattr(base, "compute_gradients"):
        methods["compute_gradients"] = compute_gradients
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
