#!/usr/bin/env python3
"""Elastic training with plait.torch: workers may die, hang, leave or join
while training goes on (docs/elastic.md).

    plaitrun -np 3 --min-np 2 --max-np 3 -H 127.0.0.1:1,127.0.0.2:1,127.0.0.3:1 \\
        python3 examples/elastic_torch.py
    plaitrun -np 2 --min-np 2 --max-np 4 --host-discovery-script ./hosts.sh \\
        python3 examples/elastic_torch.py --epochs 20
    python3 examples/elastic_torch.py --reference --out /tmp/ref   # no plait at all

Horovod's elastic API with `import plait.torch as hvd`: the training
function is wrapped by `hvd.elastic.run`; a `TorchState` holds the model, the
optimizer, an `ElasticSampler` and the loop counters, and is committed every
few batches. When a worker is lost the others roll back to the last commit,
the driver forms a new job ("epoch") from the workers left (and any new
ones), rank 0 of the new job broadcasts the state, and training goes on over
the samples of the epoch not yet processed.

The training is deterministic whatever happens to the workers, so that a
test can compare the final parameters with a run without plait (--reference):
each pass over the data computes the gradient of the loss over every sample
once, at the parameters of the start of the pass (gradients accumulated in
the state, summed over the workers with allreduce), and the optimizer takes
one step per pass (full-batch SGD with momentum, in float64). How many
workers there were, and when they changed, then only changes the order of
float64 additions. Every sample counts exactly once: each step gathers
every worker's batch indices (allgather_object), so every worker knows which
samples of the step are new; the pads ElasticSampler adds (so that every
worker gets as many batches) are skipped, and the new samples are recorded
(ElasticSampler.record_indices) the same on every rank. What was computed
after the last commit is rolled back with the state when a worker is lost,
and the sampler gives it out again.

With --out DIR every rank writes its final parameters to DIR/params.rank<R>
(raw float64) and the ranks check that they all hold the same bytes; the
exit status is non-zero when they differ or an epoch missed samples.
"""

import argparse
import hashlib
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser(
    description="Elastic training with plait.torch (deterministic, checkable)",
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--epochs", type=int, default=4, help="passes over the data")
parser.add_argument("--samples", type=int, default=384, help="training samples (all workers)")
parser.add_argument("--batch-size", type=int, default=8, help="samples per step per worker")
parser.add_argument("--commit-every", type=int, default=3, help="commit the state every N steps")
parser.add_argument("--features", type=int, default=16, help="input features")
parser.add_argument("--classes", type=int, default=4, help="classes")
parser.add_argument("--hidden", type=int, default=32, help="width of the hidden layers")
parser.add_argument("--lr", type=float, default=0.5, help="learning rate")
parser.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
parser.add_argument("--seed", type=int, default=7, help="seed of the data, the model, the shuffle")
parser.add_argument("--step-delay", type=float, default=0.0,
                    help="seconds each step sleeps (a slower job, to watch it or break it)")
parser.add_argument("--out", default="", help="folder for the final parameters")
parser.add_argument("--reference", action="store_true",
                    help="train in this process without plait, on the same samples")


def say(text):
    print(text, flush=True)


def make_data(args):
    """A generated task: each class a Gaussian blob around its own centre."""
    g = torch.Generator().manual_seed(args.seed)
    centres = torch.randn(args.classes, args.features, generator=g, dtype=torch.float64) * 2
    y = torch.randint(0, args.classes, (args.samples,), generator=g)
    x = centres[y] + torch.randn(args.samples, args.features, generator=g, dtype=torch.float64)
    return x, y


def make_model(args):
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(args.features, args.hidden), nn.Tanh(),
                          nn.Linear(args.hidden, args.hidden), nn.Tanh(),
                          nn.Linear(args.hidden, args.classes)).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    return model, optimizer


def gradient(model, x, y, indices):
    """Summed loss and its gradient over the samples `indices` (flat tensor,
    the loss last); zeros for no samples."""
    model.zero_grad()
    if indices:
        loss = F.cross_entropy(model(x[indices]), y[indices], reduction="sum")
        loss.backward()
        value = loss.detach().reshape(1)
    else:
        value = torch.zeros(1, dtype=torch.float64)
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
    return torch.cat([g.reshape(-1) for g in grads] + [value])


def take_step(model, optimizer, flat_sum, samples):
    """One optimizer step with the mean gradient of a pass."""
    offset = 0
    for p in model.parameters():
        n = p.numel()
        p.grad = (flat_sum[offset:offset + n] / samples).reshape(p.shape).clone()
        offset += n
    optimizer.step()


def flat_parameters(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def write_parameters(args, name, model):
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(flat_parameters(model).numpy().tobytes())


def reference(args):
    """The same passes in one process, batch by batch, without plait."""
    torch.set_num_threads(1)
    x, y = make_data(args)
    model, optimizer = make_model(args)
    for epoch in range(args.epochs):
        total = None
        for start in range(0, args.samples, args.batch_size):
            g = gradient(model, x, y, list(range(start, min(start + args.batch_size, args.samples))))
            total = g if total is None else total + g
        take_step(model, optimizer, total[:-1], args.samples)
        say("epoch %d: loss %.6f" % (epoch, total[-1].item() / args.samples))
    write_parameters(args, "reference", model)
    say("reference parameters: sha256 %s" % digest(model))


def digest(model):
    return hashlib.sha256(flat_parameters(model).numpy().tobytes()).hexdigest()[:16]


def elastic(args):
    import plait.torch as hvd

    hvd.init()
    torch.set_num_threads(1)
    x, y = make_data(args)
    model, optimizer = make_model(args)
    dataset = list(range(args.samples))
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=args.seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    worker = os.environ.get("PLAIT_ELASTIC_WORKER", "-")

    @hvd.elastic.run
    def train(state):
        say("elastic worker %s pid %d: rank %d of %d, epoch %d, step %d"
            % (worker, os.getpid(), hvd.rank(), hvd.size(), state.epoch, state.batch))
        while state.epoch < args.epochs:
            for batch in loader:
                step(state, batch.tolist())
            if len(state.seen) != args.samples:
                raise RuntimeError("epoch %d ended after %d of %d samples: the sampler lost some"
                                   % (state.epoch, len(state.seen), args.samples))
            take_step(model, optimizer, state.grad_sum[:-1], args.samples)
            if hvd.rank() == 0:
                say("epoch %d: loss %.6f on %d workers"
                    % (state.epoch, state.grad_sum[-1].item() / args.samples, hvd.size()))
            state.epoch += 1
            state.batch = 0
            state.grad_sum = None
            state.seen = frozenset()
            state.sampler.set_epoch(state.epoch)
            state.commit()
        return finish()

    def step(state, mine):
        # Every worker's batch: a sample counts once (pads are skipped), and
        # every rank records the same new samples.
        everyone = hvd.allgather_object(mine)
        seen, owned, new = set(state.seen), [], []
        for r, indices in enumerate(everyone):
            for i in indices:
                if i not in seen:
                    seen.add(i)
                    new.append(i)
                    if r == hvd.rank():
                        owned.append(i)
        total = hvd.allreduce(gradient(model, x, y, owned), op=hvd.Sum, name="elastic.gradient")
        # New objects, never changed in place: the state keeps the committed ones.
        state.grad_sum = total if state.grad_sum is None else state.grad_sum + total
        state.seen = frozenset(seen)
        state.sampler.record_indices(new)
        state.batch += 1
        if hvd.rank() == 0:
            say("step: epoch %d batch %d on %d workers, %d/%d samples"
                % (state.epoch, state.batch, hvd.size(), len(seen), args.samples))
        if args.step_delay:
            time.sleep(args.step_delay)
        if state.batch % args.commit_every == 0:
            state.commit()

    def finish():
        mine = digest(model)
        everyone = hvd.allgather_object(mine)
        write_parameters(args, "params.rank%d" % hvd.rank(), model)
        if any(d != mine for d in everyone):
            say("FAILED: the parameters differ between ranks: %s" % everyone)
            return 1
        say("final parameters: sha256 %s, the same on all %d ranks" % (mine, hvd.size()))
        return 0

    def on_reset():
        say("reset: now rank %d of %d" % (hvd.rank(), hvd.size()))

    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, sampler=sampler, epoch=0,
                                   batch=0, grad_sum=None, seen=frozenset())
    state.register_reset_callbacks([on_reset])
    return train(state)


def main():
    args = parser.parse_args()
    if args.samples < 1 or args.batch_size < 1 or args.commit_every < 1 or args.epochs < 0:
        parser.error("--samples, --batch-size and --commit-every must be positive, "
                     "--epochs not negative")
    if args.reference:
        reference(args)
        return 0
    return elastic(args)


if __name__ == "__main__":
    sys.exit(main())
