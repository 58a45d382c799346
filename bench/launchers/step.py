"""The training step every launcher benchmark runs (bench/launchers/run.sh).

Started as each rank by an engine (plaitrun, Ray, Slurm, Spark) or called
as step.main() inside an engine's worker function. Trains a small MLP with
plait.torch's DistributedOptimizer over random data (the same data and
model on every engine), and rank 0 prints one JSON line:

  {"bench": "launcher_step", "size": N, "init_done": <epoch s>,
   "step_ms_median": M, "steps": S}

init_done is the wall clock (time.time()) when plait.init returned on
rank 0: the engine's script takes its start-up time as init_done minus the
moment it launched the job. STEPS (default 300) after 10 warm-up steps.
"""
import json
import os
import statistics
import sys
import time


def main(steps=None):
    import torch
    import plait.torch as hvd

    hvd.init()
    init_done = time.time()
    steps = int(steps or os.environ.get("PLAIT_BENCH_STEPS", "300"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    x = torch.randn(64, 512)
    y = torch.randint(0, 10, (64,))
    times = []
    for i in range(steps + 10):
        t0 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if i >= 10:
            times.append((time.perf_counter() - t0) * 1e3)
    record = {"bench": "launcher_step", "size": hvd.size(), "init_done": init_done,
              "step_ms_median": statistics.median(times), "steps": steps}
    if hvd.rank() == 0:
        print(json.dumps(record), flush=True)
    hvd.shutdown()
    return record


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
