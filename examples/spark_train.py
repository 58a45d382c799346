#!/usr/bin/env python3
"""Data-parallel training with plait.torch inside Spark tasks: plait.spark.run
starts one plait rank per Spark task (barrier mode) and returns each rank's
result to the driver (docs/spark.md).

    spark-submit --master spark://host:7077 examples/spark_train.py --num-proc 4
    python3 examples/spark_train.py --master 'local-cluster[2,1,1024]'   # tests

A small network learns a generated regression task, each rank on its own
shard, with Horovod's API (`import plait.torch as hvd`): parameters broadcast
from rank 0, gradients averaged by DistributedOptimizer. Every rank returns
its final loss and a digest of its parameters; the driver prints them and
exits non-zero unless the digests are identical on all ranks and the loss
went down, so this script is also a check (tests/bindings/spark runs it).
"""
import argparse
import os
import sys

import plait.spark

parser = argparse.ArgumentParser(description="Train with plait.torch inside plait.spark.run")
parser.add_argument("--master", default=None,
                    help="Spark master (default: spark-submit's, else local[2])")
parser.add_argument("--num-proc", type=int, default=None,
                    help="ranks (default: spark.default.parallelism)")
parser.add_argument("--steps", type=int, default=60, help="optimizer steps")
parser.add_argument("--start-timeout", type=float, default=120, help="seconds to wait for slots")


def train(steps):
    """One rank's training; runs inside a Spark task."""
    import hashlib

    import torch
    import plait.torch as hvd

    hvd.init()
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    w_true = torch.arange(1.0, 9.0)
    x = torch.randn(256 * hvd.size(), 8)[hvd.rank()::hvd.size()]
    y = x @ w_true + 0.01 * torch.randn(len(x))
    torch.manual_seed(hvd.rank())  # different starting points: broadcast fixes that
    model = torch.nn.Linear(8, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                   named_parameters=model.named_parameters())
    first = None
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                     for p in model.parameters())).hexdigest()
    print("rank %d/%d: loss %.4f -> %.4f" % (hvd.rank(), hvd.size(), first, loss.item()))
    return hvd.rank(), first, loss.item(), digest


def main():
    args = parser.parse_args()
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName("plait spark_train")
    if args.master:
        builder = builder.master(args.master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit
        builder = builder.master("local[2]")
    if args.master and args.master.startswith("local-cluster"):
        builder = builder.config("spark.executor.memory", "512m")
    spark = (builder.config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        results = plait.spark.run(train, args=(args.steps,), num_proc=args.num_proc,
                                  start_timeout=args.start_timeout)
    finally:
        spark.stop()
    digests = {digest for _rank, _first, _last, digest in results}
    ok = len(digests) == 1 and all(last < first for _r, first, last, _d in results)
    for rank, first, last, digest in results:
        print("driver: rank %d loss %.4f -> %.4f parameters %s" % (rank, first, last, digest[:16]))
    print("driver: %d ranks, parameters %s" % (len(results),
          "identical" if len(digests) == 1 else "DIFFER"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
