#!/usr/bin/env python3
"""Data-parallel training on a Ray cluster: plait.torch inside RayExecutor.run.

    python3 examples/ray_train.py --workers 2       # a Ray of its own on this machine
    RAY_ADDRESS=HEAD:6379 python3 examples/ray_train.py --hosts 2 --workers-per-host 2

The driver (this script) starts one plait rank per Ray actor
(plait.ray.RayExecutor, docs/ray.md) and runs train() on every one of them;
train() is an ordinary plait.torch training loop (what a Ray Train
TorchTrainer's train_loop_per_worker would be, with Horovod's API in place
of torch.distributed). Each worker returns its loss history and a digest of
its final parameters; the driver prints them and exits non-zero unless every
rank ends with bit-for-bit the same parameters and the loss went down, so
this script is also a check (tests/bindings/ray runs it).
"""
import argparse
import os
import sys

import ray

from plait.ray import RayExecutor


def train(epochs, steps, lr, seed):
    """One rank's training loop: runs inside a Ray actor."""
    import hashlib

    import torch
    import plait.torch as hvd

    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(seed)  # the data generator: every rank draws the same task
    centres = torch.randn(8, 16)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr * hvd.size()),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    gen = torch.Generator().manual_seed(seed + 1 + hvd.rank())  # this rank's own shard
    losses = []
    for _ in range(epochs):
        total = 0.0
        for _ in range(steps):
            y = torch.randint(0, 8, (32,), generator=gen)
            x = centres[y] + 0.8 * torch.randn(32, 16, generator=gen)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        losses.append(hvd.allreduce(torch.tensor(total / steps), name="epoch_loss").item())
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                     for p in model.parameters())).hexdigest()
    layout = (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank())
    hvd.shutdown()
    return {"layout": layout, "losses": losses, "digest": digest}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=None, help="workers, packed (PACK)")
    p.add_argument("--hosts", type=int, default=None, help="nodes, with --workers-per-host each")
    p.add_argument("--workers-per-host", type=int, default=1)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--steps", type=int, default=20, help="steps per epoch")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.workers is None and args.hosts is None:
        args.workers = 2
    ray.init(address=os.environ.get("RAY_ADDRESS"), logging_level="warning")
    settings = RayExecutor.create_settings(timeout_s=60, placement_group_timeout_s=60)
    executor = RayExecutor(settings, num_workers=args.workers, num_hosts=args.hosts,
                           num_workers_per_host=args.workers_per_host)
    executor.start()
    try:
        results = executor.run(train, args=(args.epochs, args.steps, args.lr, args.seed))
    finally:
        executor.shutdown()
    for r in results:
        print("rank %d/%d local %d/%d cross %d: loss %s, parameters %s" % (
            *r["layout"], " ".join("%.3f" % x for x in r["losses"]), r["digest"][:16]))
    same = len({r["digest"] for r in results}) == 1
    better = results[0]["losses"][-1] < results[0]["losses"][0]
    print("ray_train: %d workers, parameters %s on all ranks, loss %s" % (
        len(results), "identical" if same else "DIFFERENT",
        "went down" if better else "did NOT go down"))
    return 0 if same and better else 1


if __name__ == "__main__":
    sys.exit(main())
