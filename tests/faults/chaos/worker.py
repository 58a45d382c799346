"""chaos worker: one rank of a ci/chaos trial, in Python (plait.torch).

The same workload and output as tests/faults/chaos/worker.c (read that file's
comment): seeded small allreduce bursts, 16 MiB allreduces, broadcasts and
allgathers, each checked, until an operation fails or CHAOS_MAX_S passes.
Lines on stdout: "ready <monotonic s>", one JSON line with the failure,
"shutdown <result> <s>". Exit status: 0 failure reported, 1 init failed,
2 a wrong result, 3 no failure within CHAOS_MAX_S.
"""
import json
import os
import sys
import time

import torch
import plait.torch as hvd

BIG = 4 * 1024 * 1024
SMALL_MAX = 256
BURST_MAX = 4
MASK = (1 << 64) - 1


class SplitMix:
    """splitmix64, the same sequence as worker.c's next()."""

    def __init__(self, seed):
        self.s = seed & MASK

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def step(rng, rank, size, big):
    """One step of the workload; True when every result was right."""
    pick = rng.next() % 100
    total = size * (size + 1) / 2
    if pick < 70:  # a burst of small allreduces, fused
        n = 1 + rng.next() % BURST_MAX
        handles = []
        for k in range(n):
            count = 1 + rng.next() % SMALL_MAX
            t = torch.full((count,), float(rank + 1))
            handles.append((t, hvd.allreduce_async_(t, name="small.%d.%d" % (k, count % 8),
                                                    op=hvd.Sum)))
        ok = True
        for t, h in handles:
            hvd.synchronize(h)
            ok = ok and float(t[0]) == total
        return ok
    if pick < 85:  # a large allreduce
        big[0] = big[-1] = float(rank + 1)
        hvd.synchronize(hvd.allreduce_async_(big, name="big", op=hvd.Sum))
        return float(big[0]) == total and float(big[-1]) == total
    if pick < 95:  # a broadcast from a random root
        root = rng.next() % size
        t = torch.full((64,), float(root + 7 if rank == root else -1))
        hvd.broadcast_(t, root, name="bcast")
        return float(t[63]) == root + 7
    out = hvd.allgather(torch.tensor([rank], dtype=torch.int32), name="gather")
    return out.tolist() == list(range(size))


def main():
    rng = SplitMix(int(os.environ.get("CHAOS_SEED", "1")))
    max_s = float(os.environ.get("CHAOS_MAX_S", "120"))
    big = torch.zeros(BIG)
    try:
        hvd.init()
    except hvd.PlaitError as e:
        print("init-failed %s %s" % (e.name, json.dumps(str(e))), flush=True)
        return 1
    rank, size = hvd.rank(), hvd.size()
    print("ready %.6f" % time.monotonic(), flush=True)
    end = time.monotonic() + max_s
    iters, wrong, result, error = 0, False, "PLAIT_SUCCESS", ""
    try:
        while time.monotonic() < end:
            if not step(rng, rank, size, big):
                wrong = True
                break
            iters += 1
    except hvd.PlaitError as e:
        result, error = e.name, str(e)
    t_err = time.monotonic()
    print(json.dumps({"rank": rank, "result": result, "error": error, "t_err": t_err,
                      "iters": iters, "wrong": int(wrong)}), flush=True)
    t0 = time.monotonic()
    try:
        hvd.shutdown()
        sd = "PLAIT_SUCCESS"
    except hvd.PlaitError as e:
        sd = e.name
    print("shutdown %s %.3f" % (sd, time.monotonic() - t0), flush=True)
    return 2 if wrong else 3 if result == "PLAIT_SUCCESS" else 0


if __name__ == "__main__":
    sys.exit(main())
