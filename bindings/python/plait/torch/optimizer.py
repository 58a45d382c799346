"""DistributedOptimizer: horovod.torch.DistributedOptimizer on plait.

The wrapper averages (or sums) every gradient over all ranks before the
wrapped optimizer applies it. Each parameter's allreduce is submitted from a
hook on its gradient accumulator the moment backward() has produced that
gradient, so communication overlaps the rest of backward and plait's
coordinator can fuse the small tensors that become ready together; step()
(or synchronize()) then waits for all of them.

The returned object is an instance of a class created on the fly that
derives from the wrapped optimizer's own class, and it shares the wrapped
optimizer's attributes (param_groups, state, defaults, hooks), so
isinstance(), state_dict(), load_state_dict() and learning-rate schedulers
behave as with the original optimizer.
"""

import warnings
from contextlib import contextmanager

import torch

from plait.torch.compression import Compression
from plait.torch._handles import synchronize
from plait.torch.basics import Adasum, Average, Max, Min, Product, Sum, global_process_set, size
from plait.common.process_sets import _id as _process_set_id
from plait.torch.mpi_ops import allreduce_async_, grouped_allreduce_async_, sparse_allreduce_async

# Horovod's wording, kept so that code matching on it keeps working.
_TOO_MANY_PASSES = ("Gradients were computed more than backward_passes_per_step times "
                    "before call to step(). Increase backward_passes_per_step to "
                    "accumulate gradients locally.")
_ZERO_GRAD_IN_FLIGHT = ("optimizer.zero_grad() was called after loss.backward() but before "
                        "optimizer.step() or optimizer.synchronize(). This is prohibited as "
                        "it can cause a race condition.")
_STEP_AFTER_SYNC = ("optimizer.step() called without optimizer.skip_synchronize() context "
                    "after optimizer.synchronize(). This can cause training slowdown. You "
                    "may want to consider using optimizer.skip_synchronize() context if you "
                    "use optimizer.synchronize() in your code.")


def _split_evenly(items, n):
    """items cut into n consecutive runs whose lengths differ by at most one
    (the first runs are the longer ones); empty runs are left out."""
    q, r = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + q + (1 if i < r else 0)
        if end > start:
            out.append(items[start:end])
        start = end
    return out


def _describe_param(index):
    gi, pi = index
    return "param_groups[%d]['params'][%d]" % (gi, pi)


class _DistributedOptimizer:
    """The methods DistributedOptimizer adds to the wrapped optimizer's class.
    Instances are made by DistributedOptimizer(); attributes of plait's own
    start with _plait_ so they cannot clash with the optimizer's."""

    # ------------------------------------------------------------------
    # Set-up
    # ------------------------------------------------------------------

    def _plait_setup(self, named_parameters, compression, backward_passes_per_step, op,
                     gradient_predivide_factor, groups, sparse_as_dense, process_set):
        # Horovod's public attributes.
        self.backward_passes_per_step = backward_passes_per_step
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set

        self._plait_compression = compression
        where = {}  # parameter -> (group index, index in group), for messages
        params = []
        for gi, group in enumerate(self.param_groups):
            for pi, p in enumerate(group['params']):
                where[p] = (gi, pi)
                params.append(p)
        if named_parameters is not None:
            named_parameters = list(named_parameters)  # read twice (a generator, usually)
        self._plait_names = self._plait_name_parameters(named_parameters, params, where)
        self._parameter_names = self._plait_horovod_names(named_parameters)

        # Parameters whose gradients are reduced, in the optimizer's order.
        self._plait_params = [p for p in params if p.requires_grad]
        self._plait_delay = {p: backward_passes_per_step for p in self._plait_params}
        self._plait_handles = {}       # tuple of parameters -> (handle, sent tensors, contexts)
        self._plait_touched = set()    # parameters with a gradient since the last synchronize
        self._plait_synchronized = False
        self._plait_should_synchronize = True
        self._plait_grad_accs = []     # keeps the hooked accumulators alive

        # The units of reduction: a tuple per group, a 1-tuple per other parameter.
        self._plait_units = self._plait_make_units(groups, params, where)
        self._plait_unit_of = {p: u for u in self._plait_units for p in u}
        self._plait_ready = {u: set() for u in self._plait_units}

        # One rank has nothing to reduce with, and a rank outside the process
        # set takes no part (Horovod skips the hooks in both cases too).
        self._plait_hooked = size() > 1 and bool(process_set.included())
        if self._plait_hooked:
            self._plait_register_hooks(where)

    def _plait_horovod_names(self, named_parameters):
        """Horovod's _parameter_names, which scripts and tools read:
        {parameter: name} for every (name, parameter) of named_parameters,
        in the order of the sorted names; without named_parameters, every
        parameter of the optimizer (trainable or not) as
        'allreduce.noname.<group>.<position>'. The same dict as Horovod
        0.28.1's ({v: k for k, v in sorted(named_parameters)})."""
        if named_parameters is None:
            named_parameters = [("allreduce.noname.%d.%d" % (gi, pi), p)
                                for gi, group in enumerate(self.param_groups)
                                for pi, p in enumerate(group['params'])]
        # Sorted by name alone: names are unique (checked before), and
        # comparing two tensors would not give a bool.
        return {p: name for name, p in sorted(named_parameters, key=lambda kv: kv[0])}

    @staticmethod
    def _plait_name_parameters(named_parameters, params, where):
        """parameter -> name of its allreduce (Horovod's: the name given in
        named_parameters, so the operation is 'allreduce.<name>'), checking
        named_parameters."""
        if named_parameters is None:
            # Horovod 0.28's names: 'allreduce.noname.<group>.<position>' (the
            # operation is then 'allreduce.allreduce.noname.<g>.<i>', as there).
            return {p: "allreduce.noname.%d.%d" % where[p] for p in params}
        named = list(named_parameters)
        for item in named:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], torch.Tensor)):
                raise ValueError("DistributedOptimizer: named_parameters should be a sequence "
                                 "of (name, parameter) tuples, usually produced by "
                                 "model.named_parameters(); found an item of type %s"
                                 % type(item).__name__)
        seen, dups = set(), []
        for name, _ in named:
            if name in seen and name not in dups:
                dups.append(name)
            seen.add(name)
        if dups:
            raise ValueError("DistributedOptimizer: parameter names in named_parameters must "
                             "be unique. Found duplicates: %s" % ", ".join(sorted(dups)))
        # A tensor named twice gets the name that sorts last, as in Horovod
        # ({v: k for k, v in sorted(named_parameters)}).
        names = {}
        for name, p in sorted(named, key=lambda kv: kv[0]):
            names[p] = name
        unnamed = [p for p in params if p not in names]
        if unnamed:
            raise ValueError("DistributedOptimizer: named_parameters was specified, but %d "
                             "parameter(s) of the optimizer are not named in it: %s"
                             % (len(unnamed), ", ".join(
                                 "%s (shape %s)" % (_describe_param(where[p]), tuple(p.shape))
                                 for p in unnamed[:5])))
        # Named tensors that the optimizer does not hold (e.g. frozen layers left out
        # of the optimizer) are simply not reduced, as in Horovod.
        return {p: names[p] for p in params}

    def _plait_make_units(self, groups, params, where):
        """The tuples of parameters reduced together: Horovod's `groups`."""
        reduced = self._plait_params
        if groups is None or not self.process_set.included():  # outside: nothing to reduce
            return [(p,) for p in reduced]
        if isinstance(groups, int):
            # The same split on every rank: rank 0's parameter order decides.
            from plait.torch.functions import broadcast_object
            mine = [self._plait_names[p] for p in reduced]
            # rank 0 of the process set decides (Horovod asks rank 0 of the
            # job, which may not be in the set)
            ps = self.process_set
            root = 0 if ps is global_process_set else ps.ranks[0]
            order = broadcast_object(mine, root_rank=root, process_set=ps,
                                     name="DistributedOptimizer.parameter_order")
            if sorted(order) != sorted(mine):
                raise ValueError("DistributedOptimizer: groups=%d needs the same parameter "
                                 "names on every rank; rank 0 has %d reduced parameters, this "
                                 "rank %d, and the names differ" % (groups, len(order), len(mine)))
            by_name = {self._plait_names[p]: p for p in reduced}
            return [tuple(u) for u in _split_evenly([by_name[n] for n in order], groups)]
        units, placed = [], set()
        for gi, group in enumerate(groups):
            unit = []
            for p in group:
                if p not in where:
                    raise ValueError("DistributedOptimizer: groups[%d] holds a tensor of shape "
                                     "%s that is not a parameter of the optimizer"
                                     % (gi, tuple(p.shape)))
                if p.requires_grad:
                    unit.append(p)
                placed.add(p)
            if unit:
                units.append(tuple(unit))
        units.extend((p,) for p in reduced if p not in placed)
        return units

    def _plait_register_hooks(self, where):
        with torch.enable_grad():
            for p in self._plait_params:
                if not p.is_leaf:
                    raise ValueError("DistributedOptimizer: %s is not a leaf tensor; "
                                     "optimizers update leaf tensors only"
                                     % _describe_param(where[p]))
                # The AccumulateGrad node of p: its hook runs once p.grad holds
                # this backward pass's gradient.
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._plait_make_hook(p))
                self._plait_grad_accs.append(acc)

    def _plait_make_hook(self, p):
        def hook(*_unused):
            self._plait_on_gradient(p)
        return hook

    # ------------------------------------------------------------------
    # Reduction
    # ------------------------------------------------------------------

    def _plait_on_gradient(self, p):
        """p.grad holds a new gradient (called during backward)."""
        if self._plait_delay[p] <= 0:
            raise AssertionError(_TOO_MANY_PASSES)
        if p.grad is not None and p.grad.requires_grad:
            raise RuntimeError("DistributedOptimizer: gradients that require grad "
                               "(backward(create_graph=True)) are not supported")
        self._plait_touched.add(p)
        self._plait_delay[p] -= 1
        if self._plait_delay[p] > 0:
            return  # still accumulating locally
        unit = self._plait_unit_of[p]
        ready = self._plait_ready[unit]
        ready.add(p)
        if len(ready) == len(unit):
            self._plait_submit(unit)

    def _plait_scaling(self):
        """(op, prescale, postscale) for a gradient allreduce: Horovod's split
        average, 1/f before the sum and f after it (the core then scales by
        f / size)."""
        if self.op == Average:
            f = self.gradient_predivide_factor
            return Average, 1.0 / f, float(f)
        return self.op, 1.0, 1.0

    def _plait_send_tensor(self, p):
        """The gradient of p to reduce (dense unless it is sparse and
        sparse_as_dense is off); a zero one where backward produced none (a
        parameter unused in this step) so that the ranks still submit the
        same allreduces."""
        if p.grad is None:
            p.grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
        g = p.grad
        if g.is_sparse and self.sparse_as_dense:
            g = g.to_dense()
        return g

    def _plait_submit(self, unit):
        tensors = [self._plait_send_tensor(p) for p in unit]
        if len(unit) == 1 and tensors[0].is_sparse:
            # Horovod's sparse allreduce: indices and values allgathered
            # (no compression, no predivide factor), a callable handle.
            h = sparse_allreduce_async(tensors[0], name=self._plait_names[unit[0]], op=self.op,
                                       process_set=self.process_set)
            self._plait_handles[unit] = (h, tensors, [None])
            return
        for p, t in zip(unit, tensors):
            if t.is_sparse:
                raise ValueError("DistributedOptimizer: parameter '%s' has a sparse gradient "
                                 "(e.g. nn.Embedding(sparse=True)) and is in a group; groups "
                                 "reduce dense tensors: pass sparse_as_dense=True or leave "
                                 "it out of groups" % self._plait_names[p])
        sent, ctxs = [], []
        for t in tensors:
            t, ctx = self._plait_compression.compress(t)
            sent.append(t)
            ctxs.append(ctx)
        op, pre, post = self._plait_scaling()
        if len(unit) == 1:
            h = allreduce_async_(sent[0], name=self._plait_names[unit[0]], op=op,
                                 prescale_factor=pre, postscale_factor=post,
                                 process_set=self.process_set)
        else:
            # Horovod names a group after its first parameter.
            h = grouped_allreduce_async_(sent, name=self._plait_names[unit[0]], op=op,
                                         prescale_factor=pre, postscale_factor=post,
                                         process_set=self.process_set)
        self._plait_handles[unit] = (h, sent, ctxs)

    @staticmethod
    def _plait_store(p, reduced):
        """Puts the reduced gradient into p.grad."""
        g = p.grad
        if g.is_sparse:  # Horovod: p.grad.zero_().add_(sparse result)
            reduced = reduced.to(g.dtype)
            g.zero_()
            g.add_(reduced if reduced.is_sparse else reduced.to_sparse())
        elif reduced is not g:
            g.copy_(reduced)

    def synchronize(self):
        """Waits until every gradient has been reduced into p.grad.

        Parameters whose allreduce has not started yet (no gradient in this
        step, or fewer than backward_passes_per_step backward passes) are
        submitted now, a zero gradient standing in for a missing one, so that
        every rank submits the same allreduces."""
        if not self._plait_hooked:
            self._plait_synchronized = True
            return
        started = set()
        for unit in self._plait_handles:
            started.update(unit)
        try:
            for unit in self._plait_units:
                if unit[0] not in started:  # units start whole or not at all
                    self._plait_submit(unit)
            for unit, (h, _sent, ctxs) in list(self._plait_handles.items()):
                out = h() if callable(h) else synchronize(h)  # callable: sparse
                outs = [out] if len(unit) == 1 else out
                for p, o, ctx in zip(unit, outs, ctxs):
                    self._plait_store(p, self._plait_compression.decompress(o, ctx))
        finally:
            self._plait_reset()
        self._plait_synchronized = True

    def _plait_reset(self):
        self._plait_handles.clear()
        self._plait_touched.clear()
        for ready in self._plait_ready.values():
            ready.clear()
        for p in self._plait_delay:
            self._plait_delay[p] = self.backward_passes_per_step

    # ------------------------------------------------------------------
    # The optimizer's interface
    # ------------------------------------------------------------------

    @contextmanager
    def skip_synchronize(self):
        """Makes step() inside the block skip synchronize(), for::

            optimizer.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            with optimizer.skip_synchronize():
                optimizer.step()
        """
        self._plait_should_synchronize = False
        try:
            yield
        finally:
            self._plait_should_synchronize = True

    def step(self, closure=None):
        """synchronize() (unless inside skip_synchronize()), then the wrapped
        optimizer's step()."""
        if self._plait_should_synchronize:
            if self._plait_synchronized:
                warnings.warn(_STEP_AFTER_SYNC)
            self.synchronize()
        self._plait_synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        """The wrapped optimizer's zero_grad(); raises AssertionError while
        gradients of this step are being accumulated or reduced."""
        if self._plait_handles or self._plait_touched:
            raise AssertionError(_ZERO_GRAD_IN_FLIGHT)
        return super().zero_grad(*args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        """Changes backward_passes_per_step (and restarts the count)."""
        _check_passes(passes)
        self.backward_passes_per_step = passes
        for p in self._plait_delay:
            self._plait_delay[p] = passes

    def load_state_dict(self, *args, **kwargs):
        """The wrapped optimizer's load_state_dict(); forgets the step in progress."""
        self._plait_reset()
        self._plait_synchronized = False
        self._plait_should_synchronize = True
        return super().load_state_dict(*args, **kwargs)


def _check_passes(passes):
    if not isinstance(passes, int) or isinstance(passes, bool) or passes < 1:
        raise ValueError("DistributedOptimizer: backward_passes_per_step must be an int >= 1, "
                         "not %r" % (passes,))


def _check_groups(groups):
    if groups is None:
        return
    if isinstance(groups, bool) or not isinstance(groups, (int, list, tuple)):
        raise ValueError("DistributedOptimizer: groups should be a positive int or a list "
                         "of lists of parameters, not %s" % type(groups).__name__)
    if isinstance(groups, int):
        if groups <= 0:
            raise ValueError("DistributedOptimizer: groups should be a positive int, not %d"
                             % groups)
        return
    seen = set()
    for gi, group in enumerate(groups):
        if isinstance(group, torch.Tensor) or not isinstance(group, (list, tuple)):
            raise ValueError("DistributedOptimizer: groups[%d] should be a list of parameters"
                             % gi)
        for p in group:
            if not isinstance(p, torch.Tensor):
                raise ValueError("DistributedOptimizer: groups must consist of torch.Tensor; "
                                 "groups[%d] holds a %s" % (gi, type(p).__name__))
            if id(p) in seen:
                raise ValueError("DistributedOptimizer: a parameter can only appear once in "
                                 "groups (groups[%d] repeats one)" % gi)
            seen.add(id(p))


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps a torch.optim.Optimizer so that gradients are reduced over all
    ranks before it applies them (horovod.torch.DistributedOptimizer).

    Each gradient's allreduce starts as soon as backward() has computed it;
    step() waits for them (synchronize()) and then runs the optimizer. To
    change gradients between the two, e.g. to clip them::

        loss.backward()
        optimizer.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        with optimizer.skip_synchronize():
            optimizer.step()

    Arguments:
        optimizer: the optimizer to wrap. The result shares its param_groups
            and state and is an instance of its class.
        named_parameters: (name, parameter) pairs, usually
            model.named_parameters(); gradient allreduces are named as in
            Horovod, 'allreduce.<name>' (without it:
            'allreduce.allreduce.noname.<group>.<i>', so every rank must then
            build its optimizer identically; a group: 'grouped_allreduce.<name
            of its first parameter>_<i>of<n>'). Names must be
            unique and must cover every parameter of the optimizer.
        compression: Compression.none or Compression.fp16 (gradients sent as
            float16 and restored to their dtype).
        backward_passes_per_step: backward passes accumulated locally before
            the gradients are reduced (gradient accumulation); a gradient
            computed more often before step() raises AssertionError.
        op: Average (default) or Sum (Min, Max and Product are accepted as
            well); Adasum raises NotImplementedError.
        gradient_predivide_factor: with op=Average, gradients are multiplied
            by 1/f before the sum and by f/size after it.
        num_groups: Horovod's deprecated spelling of groups=int.
        groups: an int n (parameters split into n groups of consecutive
            parameters, in rank 0's order) or a list of lists of parameters;
            each group is reduced as one grouped allreduce once all of its
            gradients are ready. Parameters in no list are reduced alone.
        sparse_as_dense: reduce sparse gradients as dense tensors; without
            it a sparse gradient (nn.Embedding(sparse=True)) is reduced as
            Horovod does, by allgathering every rank's indices and values
            (divided by size for Average), and p.grad becomes that
            uncoalesced sparse sum.
        process_set: the ranks that average their gradients (a registered
            ProcessSet; default: every rank). A rank outside it registers
            no hooks and its synchronize() does nothing, as in Horovod.

    Returns:
        The distributed optimizer (an instance of a subclass of
        type(optimizer)).
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("DistributedOptimizer: expected a torch.optim.Optimizer, got %s"
                        % type(optimizer).__name__)
    if isinstance(optimizer, _DistributedOptimizer):
        raise ValueError("DistributedOptimizer: the optimizer is already a DistributedOptimizer")
    if process_set is None:
        process_set = global_process_set
    _process_set_id(process_set, "DistributedOptimizer")
    if op == Adasum:
        raise NotImplementedError("DistributedOptimizer: op=Adasum is not implemented by "
                                  "plait; use op=Average or op=Sum")
    if op not in (Average, Sum, Min, Max, Product):
        raise ValueError("DistributedOptimizer: unknown op %r; use Average or Sum" % (op,))
    if not isinstance(gradient_predivide_factor, (int, float)) or gradient_predivide_factor <= 0:
        raise ValueError("DistributedOptimizer: gradient_predivide_factor must be a positive "
                         "number, not %r" % (gradient_predivide_factor,))
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("DistributedOptimizer: gradient_predivide_factor not supported with "
                         "op != Average")
    _check_passes(backward_passes_per_step)
    if num_groups:
        warnings.warn("DistributedOptimizer: num_groups is deprecated; use groups",
                      DeprecationWarning)
        if groups is None:
            groups = num_groups
    _check_groups(groups)
    if not hasattr(compression, "compress") or not hasattr(compression, "decompress"):
        raise TypeError("DistributedOptimizer: compression must be a Compression "
                        "(Compression.none or Compression.fp16), not %r" % (compression,))

    base = optimizer.__class__
    cls = type(base.__name__, (_DistributedOptimizer, base),
               {"__module__": _DistributedOptimizer.__module__})
    # The new object takes over the optimizer's attributes (a shallow copy: the
    # same param_groups, state and hook dictionaries) without running its
    # __init__ again, so state the optimizer already holds is kept. Instance
    # attributes that shadow methods stay behind: they are bound to the old
    # object (an LR scheduler made before wrapping sets optimizer.step to a
    # counting wrapper of the old step, which would skip synchronize()).
    dist = cls.__new__(cls)
    dist.__dict__.update({k: v for k, v in optimizer.__dict__.items()
                          if not callable(getattr(base, k, None))})
    dist._plait_setup(named_parameters, compression, backward_passes_per_step, op,
                      gradient_predivide_factor, groups, sparse_as_dense, process_set)
    return dist
