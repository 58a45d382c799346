#!/usr/bin/env python3
"""Horovod's elastic PyTorch synthetic benchmark
(horovod/horovod examples/elastic/pytorch/pytorch_synthetic_benchmark_elastic.py)
in its shape, flags and elastic calls, written for plait: the import is
`import plait.torch as hvd`; the model is a small one defined here, since
torchvision is not installed where the tests run (Horovod's takes one from
torchvision.models). What the script asks of the elastic API is Horovod's
example's, call for call: `hvd.elastic.TorchState(model, optimizer,
img_secs=[], iter=0, batch=0, warm=False)`, `state.commit()` every
--num-batches-per-commit steps and after each iteration, a reset callback
that scales the learning rate to the new size, `@hvd.elastic.run` around the
benchmark, and the results from `state.img_secs` after it.

    plaitrun -np 3 --min-np 2 --max-np 3 --host-discovery-script ./hosts.sh \\
        python3 tests/faults/elastic/horovod/pytorch_synthetic_benchmark_elastic.py
"""
import argparse
import timeit

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import plait.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch Synthetic Benchmark",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--model", type=str, default="mlp", help="model to benchmark: mlp")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size")
parser.add_argument("--num-warmup-batches", type=int, default=10,
                    help="number of warm-up batches that don't count towards benchmark")
parser.add_argument("--num-batches-per-iter", type=int, default=10,
                    help="number of batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=10, help="number of benchmark iterations")
parser.add_argument("--num-batches-per-commit", type=int, default=1,
                    help="number of batches per commit of the elastic state object")
parser.add_argument("--no-cuda", action="store_true", default=False,
                    help="disables CUDA training")
parser.add_argument("--use-adasum", action="store_true", default=False,
                    help="use adasum algorithm to do reduction")
args = parser.parse_args()
args.cuda = not args.no_cuda and torch.cuda.is_available()

hvd.init()
torch.set_num_threads(1)
if args.cuda:
    torch.cuda.set_device(hvd.local_rank())

if args.model != "mlp":
    parser.error("--model: only mlp here (no torchvision)")
model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 512), nn.ReLU(),
                      nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1000))


def lr_scaler():
    return hvd.size() if not args.use_adasum else 1


if args.cuda:
    model.cuda()

lr = 0.01
optimizer = optim.SGD(model.parameters(), lr=lr * lr_scaler())
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     compression=compression,
                                     op=hvd.Adasum if args.use_adasum else hvd.Average)

data = torch.randn(args.batch_size, 3, 32, 32)
target = torch.LongTensor(args.batch_size).random_() % 1000
if args.cuda:
    data, target = data.cuda(), target.cuda()


def benchmark_step(state):
    optimizer.zero_grad()
    output = model(data)
    loss = F.cross_entropy(output, target)
    loss.backward()
    optimizer.step()
    state.batch += 1
    if state.batch == args.num_batches_per_commit:
        state.batch = 0
        state.commit()


def log(s, nl=True):
    if hvd.rank() != 0:
        return
    print(s, end="\n" if nl else "", flush=True)


log("Model: %s" % args.model)
log("Batch size: %d" % args.batch_size)
device = "GPU" if args.cuda else "CPU"
log("Number of %ss: %d" % (device, hvd.size()))


@hvd.elastic.run
def run_benchmark(state):
    if not state.warm:
        log("Running warmup...")
        timeit.timeit(lambda: benchmark_step(state), number=args.num_warmup_batches)
        state.warm = True
        state.commit()
    if state.iter == 0:
        log("Running benchmark...")
    for x in range(state.iter, args.num_iters):
        time = timeit.timeit(lambda: benchmark_step(state), number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / time
        log("Iter #%d: %.1f img/sec per %s (%d workers)" % (x, img_sec, device, hvd.size()))
        state.img_secs.append(img_sec)
        state.iter = x + 1
        state.commit()


def on_state_reset():
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr * lr_scaler()


state = hvd.elastic.TorchState(model, optimizer, img_secs=[], iter=0, batch=0, warm=False)
state.register_reset_callbacks([on_state_reset])
run_benchmark(state)

img_sec_mean = np.mean(state.img_secs)
img_sec_conf = 1.96 * np.std(state.img_secs)
log("Img/sec per %s: %.1f +-%.1f" % (device, img_sec_mean, img_sec_conf))
log("Total img/sec on %d %s(s): %.1f +-%.1f"
    % (hvd.size(), device, hvd.size() * img_sec_mean, hvd.size() * img_sec_conf))
