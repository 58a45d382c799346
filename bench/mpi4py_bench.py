#!/usr/bin/env python3
"""Open MPI from Python (mpi4py) on the two workloads issue 37 compares
plait.torch with, measured the way the plait.torch side is measured, so that
the ratio compares one Python binding with another (issue 37's own table
quotes Open MPI through mpi4py: 5.5 us and 3.71 ms):

  latency  a lone 4 KiB float32 sum, in place, waited for before the next:
           comm.Allreduce(MPI.IN_PLACE, t.numpy()) on a torch tensor, as
           bench/torch_bench.py --only l times plait.torch's hvd.allreduce_
           (rank 0's time per call, median over --iters calls);
  small    --count float32 tensors of --bytes each per step (default
           200 x 64 KiB): comm.Iallreduce(MPI.IN_PLACE, ...) of each, then
           MPI.Request.Waitall, as bench/horovod_bench.py's "fused" workload
           times allreduce_async_ of all then synchronize of all (per step
           the slowest rank's time, median over --steps steps).

Run under mpirun; rank 0 prints one line per workload and, with --json,
appends a record:
  {"kind":"latency","transport":"openmpi-mpi4py","bytes":4096,"time_s_median",...}
  {"kind":"comparison","system":"openmpi-mpi4py-nonblocking","workload":"200x64K",
   "median_s",...}
Results are checked (the sum of rank + 1 over the ranks) before timing;
a wrong sum exits 1.

    mpirun -np 2 python bench/mpi4py_bench.py [--workloads latency,small]
        [--iters 2000] [--count 200] [--bytes 65536] [--steps 20] [--json FILE]
"""

import argparse
import json
import statistics
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="latency,small")
    p.add_argument("--iters", type=int, default=2000, help="latency: calls timed")
    p.add_argument("--lone-bytes", type=int, default=4096, help="latency: bytes of the tensor")
    p.add_argument("--count", type=int, default=200, help="small: tensors per step")
    p.add_argument("--bytes", type=int, default=64 * 1024, help="small: bytes per tensor")
    p.add_argument("--steps", type=int, default=20, help="small: steps timed")
    p.add_argument("--warmup", type=int, default=3, help="small: untimed steps first")
    p.add_argument("--json", help="append the records to this file (rank 0)")
    args = p.parse_args()
    wanted = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(wanted) - {"latency", "small"})
    if unknown or not wanted:
        sys.exit("mpi4py_bench: unknown workload(s) %s; known: latency, small"
                 % ", ".join(unknown or ["(none)"]))
    if min(args.iters, args.steps, args.count, args.bytes // 4, args.lone_bytes // 4) < 1:
        sys.exit("mpi4py_bench: --iters, --steps, --count, --bytes and --lone-bytes must be "
                 "positive (bytes at least 4)")

    import torch
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(1)
    expect = size * (size + 1) / 2
    out = []

    def checked(name, tensors):
        bad = sum(1 for t in tensors if not bool((t == expect).all()))
        if comm.allreduce(bad, op=MPI.MAX):
            if rank == 0:
                print("mpi4py_bench: %s: wrong sums in %d tensor(s)" % (name, bad), flush=True)
            sys.exit(1)
        for t in tensors:
            t.zero_()

    if "latency" in wanted:
        lone = torch.zeros(args.lone_bytes // 4)
        buf = lone.numpy()  # shares the tensor's memory
        lone.fill_(rank + 1)
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        checked("latency", [lone])
        for _ in range(10):
            comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        comm.Barrier()
        times = []
        for _ in range(args.iters):
            t0 = time.perf_counter()
            comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
            times.append(time.perf_counter() - t0)
        # p10 and p90 (one call: itself)
        q = statistics.quantiles(times, n=10, method="inclusive") if len(times) > 1 else times * 9
        med = statistics.median(times)
        out.append(("lone %d KiB Allreduce (in place): median %.1f us (p10 %.1f, p90 %.1f) "
                    "over %d calls" % (args.lone_bytes // 1024, med * 1e6, q[0] * 1e6,
                                       q[8] * 1e6, args.iters),
                    {"kind": "latency", "collective": "allreduce", "transport": "openmpi-mpi4py",
                     "ranks": size, "bytes": args.lone_bytes, "dtype": "float32",
                     "iters": args.iters, "time_s_median": med, "time_s_p10": q[0],
                     "time_s_p90": q[8], "check": "ok"}))

    if "small" in wanted:
        small = [torch.zeros(args.bytes // 4) for _ in range(args.count)]
        bufs = [t.numpy() for t in small]

        def step():
            reqs = [comm.Iallreduce(MPI.IN_PLACE, b, op=MPI.SUM) for b in bufs]
            MPI.Request.Waitall(reqs)

        for t in small:
            t.fill_(rank + 1)
        step()
        checked("small", small)
        for _ in range(args.warmup):
            step()
        comm.Barrier()
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        # a step lasts until its slowest rank is done
        slowest = [max(ts) for ts in zip(*comm.allgather(times))]
        med = statistics.median(slowest)
        work = "%dx%dK" % (args.count, args.bytes // 1024)
        out.append(("%d x %d KiB Iallreduce then Waitall: median %.2f ms per step over %d steps"
                    % (args.count, args.bytes // 1024, med * 1e3, args.steps),
                    {"kind": "comparison", "system": "openmpi-mpi4py-nonblocking",
                     "workload": work, "ranks": size, "median_s": med, "steps": args.steps}))

    if rank == 0:
        import mpi4py
        for line, rec in out:
            print("mpi4py %s (%s), %d ranks: %s" % (
                mpi4py.__version__, MPI.Get_library_version().split(",")[0].strip(), size, line),
                flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
