"""Broadcasting model and optimizer state, and moving Python objects between
ranks: horovod.torch's broadcast_parameters, broadcast_optimizer_state,
broadcast_object and allgather_object.

Every function here is collective: all ranks call it, in the same order.
"""

from collections.abc import Mapping

import torch

from plait.torch import _cuda
from plait.torch._handles import synchronize
from plait.common import ops as _ops
from plait.common.process_sets import _id as _process_set_id
from plait.torch.basics import Min, global_process_set, rank, size
from plait.torch.mpi_ops import allgather_async, allreduce, broadcast_, broadcast_async_

def _check_root(root_rank, what):
    _ops.check_root(root_rank, "plait.torch." + what)


def _check_process_set(process_set, what):
    _process_set_id(process_set, "plait.torch." + what)


def _wait_all(handles):
    """Waits for every handle, then raises the first error met, if any (so
    that no operation is left in flight behind an early error)."""
    error = None
    for h in handles:
        try:
            synchronize(h)
        except Exception as e:  # noqa: BLE001 - re-raised below
            if error is None:
                error = e
    if error is not None:
        raise error


def _broadcast_named(pairs, root_rank):
    """Broadcasts (plait name, tensor) pairs in place, all in flight at once.
    Under a device-only transport (nccl) CPU tensors (Adam's 'step', a model
    kept on the CPU) travel through the current CUDA device and back."""
    handles, staged = [], []
    try:
        for name, t in pairs:
            # detach(): the same storage, written without autograd's leaf check.
            t = t.detach()
            sent = _cuda.placed(t)
            if sent is not t:
                staged.append((t, sent))
            handles.append(broadcast_async_(sent, root_rank, name=name))
    finally:
        _wait_all(handles)
    for t, sent in staged:
        t.copy_(sent)


def broadcast_parameters(params, root_rank):
    """Overwrites params on every rank with root_rank's, in place.

    Arguments:
        params: model.state_dict() (or any mapping of name -> tensor; the
            tensors are broadcast in sorted-key order), or an iterable of
            (name, tensor) pairs such as model.named_parameters(), or of
            tensors such as model.parameters().
        root_rank: the rank whose values every rank receives.

    Raises TypeError/ValueError for anything that is not a tensor or a
    duplicated name.
    """
    _check_root(root_rank, "broadcast_parameters")
    if isinstance(params, Mapping):
        items = sorted(params.items(), key=lambda kv: str(kv[0]))
    elif isinstance(params, (str, bytes)) or not hasattr(params, "__iter__"):
        raise ValueError("plait.torch.broadcast_parameters: invalid params of type %s; give "
                         "model.state_dict(), model.named_parameters() or model.parameters()"
                         % type(params).__name__)
    else:
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    pairs, seen = [], set()
    for i, item in enumerate(items):
        if len(item) != 2:
            raise ValueError("plait.torch.broadcast_parameters: item %d is a tuple of %d, "
                             "expected (name, tensor)" % (i, len(item)))
        key, t = item
        if not isinstance(t, torch.Tensor):
            raise TypeError("plait.torch.broadcast_parameters: %s is a %s, not a tensor"
                            % ("'%s'" % key if key is not None else "item %d" % i,
                               type(t).__name__))
        if key is None:
            name = "parameters.%d" % i  # the operation: 'broadcast.parameters.<i>'
        else:
            name = str(key)  # Horovod's: the operation is 'broadcast.<key>'
            if name in seen:
                raise ValueError("plait.torch.broadcast_parameters: the name '%s' appears "
                                 "twice" % (key,))
        seen.add(name)
        pairs.append((name, t))
    _broadcast_named(pairs, root_rank)


# ----------------------------------------------------------------------------
# Optimizer state
# ----------------------------------------------------------------------------

def _has_state(optimizer):
    return any(optimizer.state.get(p) for g in optimizer.param_groups for p in g['params'])


def _initialize_state(optimizer, sparse_params=()):
    """Horovod's trick: an optimizer that has not stepped yet has no state to
    broadcast into, so take one step with zero gradients to create it. As
    Horovod's, a trainable parameter without a gradient keeps that zero
    gradient (scripts then use p.grad; sparse for SparseAdam and for a
    sparse embedding under SGD). Unlike Horovod's, the step moves no
    parameter (weight decay is switched off for it and the parameters are
    restored afterwards) and a gradient that was there is kept."""
    from plait.torch.optimizer import _DistributedOptimizer
    saved = []
    for group in optimizer.param_groups:
        for p in group['params']:
            if p.requires_grad:
                saved.append((p, p.detach().clone(), p.grad))
                g = torch.zeros_like(p)
                if isinstance(optimizer, torch.optim.SparseAdam) or (
                        isinstance(optimizer, torch.optim.SGD) and id(p) in sparse_params):
                    g = g.to_sparse()
                p.grad = g
    decays = [g.get('weight_decay') for g in optimizer.param_groups]
    try:
        for g in optimizer.param_groups:
            if 'weight_decay' in g:
                g['weight_decay'] = 0
        if isinstance(optimizer, _DistributedOptimizer):
            # The wrapped optimizer's own step: no allreduce (the other ranks
            # may not be taking this path).
            super(_DistributedOptimizer, optimizer).step()
        else:
            optimizer.step()
    finally:
        for g, d in zip(optimizer.param_groups, decays):
            if d is not None:
                g['weight_decay'] = d
        with torch.no_grad():
            for p, data, grad in saved:
                p.copy_(data)
                if grad is not None:
                    p.grad = grad


def _state_manifest(optimizer):
    """What the root sends: every param group's options, and for each
    parameter with state, each entry as a value (pickled) or a tensor's
    description (broadcast as a tensor afterwards)."""
    options = []
    state = {}
    for gi, group in enumerate(optimizer.param_groups):
        options.append({k: v for k, v in group.items() if k != 'params'})
        for pi, p in enumerate(group['params']):
            st = optimizer.state.get(p)
            if not st:
                continue
            entry = {}
            for key, v in st.items():
                if isinstance(v, torch.Tensor):
                    entry[key] = ("tensor", tuple(v.shape), v.dtype, v.device == p.device)
                else:
                    entry[key] = ("value", v)
            state[(gi, pi)] = entry
    return {"sizes": [len(g['params']) for g in optimizer.param_groups],
            "options": options, "state": state}


def broadcast_optimizer_state(optimizer, root_rank, model=None):
    """Gives every rank root_rank's optimizer state: the param groups'
    options (lr, momentum, betas, ...) and each parameter's state (momentum
    buffers, Adam's moments and step, whether 'step' is a tensor or an int).

    An optimizer without state is first given one (Horovod's zero-gradient
    step, here without moving the parameters). Non-tensor entries travel
    pickled in one broadcast_object; tensors are broadcast in place. A rank
    whose state lacks an entry the root has gets it; entries the root lacks
    are dropped. Works on a DistributedOptimizer as well (without allreduce).

    model: as Horovod's, only used to find nn.Embedding(sparse=True)
    parameters, which get a sparse zero gradient for the initialisation step
    of a torch.optim.SGD (SparseAdam's are always sparse).

    Raises ValueError for torch.optim.LBFGS (as Horovod) or when the ranks'
    param groups differ in shape.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("plait.torch.broadcast_optimizer_state: expected a "
                        "torch.optim.Optimizer, got %s" % type(optimizer).__name__)
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("plait.torch.broadcast_optimizer_state: cannot broadcast "
                         "torch.optim.LBFGS state")
    _check_root(root_rank, "broadcast_optimizer_state")
    if not _has_state(optimizer):
        sparse = set()
        if model is not None:
            for m in model.modules():
                if isinstance(m, torch.nn.Embedding) and m.sparse:
                    sparse.update(id(p) for p in m.parameters())
        _initialize_state(optimizer, sparse)

    manifest = broadcast_object(_state_manifest(optimizer) if rank() == root_rank else None,
                                root_rank, name="broadcast_optimizer_state.manifest")
    groups = optimizer.param_groups
    mine = [len(g['params']) for g in groups]
    # Every rank learns whether any rank's groups differ from the root's, so
    # that they all raise; otherwise the root would wait for ever in the
    # state's broadcasts that a rank which raised never submits.
    ok = _cuda.placed(torch.tensor([1 if manifest["sizes"] == mine else 0], dtype=torch.int32))
    ok = allreduce(ok, op=Min, name="broadcast_optimizer_state.check")
    if manifest["sizes"] != mine:
        raise ValueError("plait.torch.broadcast_optimizer_state: rank %d's param groups hold "
                         "%s parameters but root rank %d's hold %s"
                         % (rank(), mine, root_rank, manifest["sizes"]))
    if int(ok.item()) == 0:
        raise ValueError("plait.torch.broadcast_optimizer_state: another rank's param groups "
                         "differ in shape from root rank %d's (%s parameters); that rank "
                         "names its own" % (root_rank, manifest["sizes"]))
    if rank() != root_rank:
        for group, opts in zip(groups, manifest["options"]):
            group.update(opts)

    pairs = []
    root_state = manifest["state"]
    for gi, group in enumerate(groups):
        for pi, p in enumerate(group['params']):
            entry = root_state.get((gi, pi))
            if entry is None:
                optimizer.state.pop(p, None)
                continue
            st = optimizer.state[p]
            for key in [k for k in st if k not in entry]:
                del st[key]
            for key, desc in entry.items():
                if desc[0] == "value":
                    st[key] = desc[1]
                    continue
                _, shape, dtype, on_param_device = desc
                device = p.device if on_param_device else torch.device("cpu")
                t = st.get(key)
                if not (isinstance(t, torch.Tensor) and tuple(t.shape) == shape
                        and t.dtype == dtype and t.device == device):
                    t = torch.empty(shape, dtype=dtype, device=device)
                    st[key] = t
                pairs.append(("optimizer_state.%d.%d.%s" % (gi, pi, key), t))
    _broadcast_named(pairs, root_rank)


# ----------------------------------------------------------------------------
# Python objects
# ----------------------------------------------------------------------------

_NOT_PICKLED = _ops.NOT_PICKLED


def _to_bytes_tensor(obj):
    data = bytearray(_ops.dumps(obj))
    return torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)


def _from_bytes(t):
    return _ops.loads(t.cpu().numpy())


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's obj on every rank (pickled with cloudpickle when
    it is installed, else pickle; the size is broadcast first).

    Arguments:
        obj: any picklable object (only root_rank's is used).
        root_rank: the rank whose object is sent (a rank of the job, a member
            of process_set, as in Horovod).
        process_set: the ranks that take part (all of them call it).
        name: names the broadcasts, as Horovod: '<name>.sz' and
            '<name>.t' (the operations 'broadcast.<name>.sz', ...). Unlike
            Horovod's (type(obj).__name__), the default, 'broadcast_object',
            does not depend on obj (which other ranks often pass as None), so
            the ranks always match.
    """
    _check_process_set(process_set, "broadcast_object")
    _check_root(root_rank, "broadcast_object")
    base = "broadcast_object" if name is None else str(name)
    if rank() == root_rank:
        try:
            payload = _cuda.placed(_to_bytes_tensor(obj))
        except Exception:
            # The others wait for the size: tell them (-1), so that every
            # rank raises rather than the others waiting for ever.
            n = _cuda.placed(torch.tensor([_NOT_PICKLED], dtype=torch.int64))
            broadcast_(n, root_rank, name=base + ".sz", process_set=process_set)
            raise
        n = _cuda.placed(torch.tensor([payload.numel()], dtype=torch.int64))
        broadcast_(n, root_rank, name=base + ".sz", process_set=process_set)
        broadcast_(payload, root_rank, name=base + ".t", process_set=process_set)
        return obj
    n = _cuda.placed(torch.zeros(1, dtype=torch.int64))
    broadcast_(n, root_rank, name=base + ".sz", process_set=process_set)
    if int(n.item()) == _NOT_PICKLED:
        raise ValueError("plait.torch.broadcast_object: root rank %d could not pickle its "
                         "object (it raised the reason)" % root_rank)
    payload = _cuda.placed(torch.empty(int(n.item()), dtype=torch.uint8))
    broadcast_(payload, root_rank, name=base + ".t", process_set=process_set)
    return _from_bytes(payload)


def allgather_object(obj, name=None):
    """Returns the list of every rank's obj, in rank order (each pickled as
    by broadcast_object and gathered as bytes).

    name: names the allgathers as Horovod ('<name>.sz' and '<name>.t');
    the default, 'allgather_object', does not depend on obj."""
    base = "allgather_object" if name is None else str(name)
    try:
        payload, failure = _cuda.placed(_to_bytes_tensor(obj)), None
    except Exception as e:  # noqa: BLE001 - raised below, after the others are told
        payload, failure = _cuda.placed(torch.empty(0, dtype=torch.uint8)), e
    size = _NOT_PICKLED if failure is not None else payload.numel()
    h_sizes = allgather_async(_cuda.placed(torch.tensor([size], dtype=torch.int64)),
                              name=base + ".sz")
    h_data = allgather_async(payload, name=base + ".t")
    sizes = synchronize(h_sizes).tolist()
    data = synchronize(h_data)
    if failure is not None:
        raise failure
    if _NOT_PICKLED in sizes:
        raise ValueError("plait.torch.allgather_object: rank %d could not pickle its object "
                         "(it raised the reason)" % sizes.index(_NOT_PICKLED))
    return _ops.unpack(data.cpu().numpy(), sizes)
