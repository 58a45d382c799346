#!/usr/bin/env python3
"""plait.torch against torch.distributed (Gloo), side by side in one run.

    python3 bench/torch_bench.py [--rounds 5] [--python /path/to/python]

One launch measures everything: this script starts the ranks itself (2 by
default, on this host), and every rank joins both plait (PLAIT_RANK,
PLAIT_RENDEZVOUS, PLAIT_SECRET, ...) and torch.distributed's Gloo backend
(MASTER_ADDR/MASTER_PORT, RANK, WORLD_SIZE), on two free ports. Each round runs
every variant in turn (the order rotates from round to round), so load on a
shared machine hits all variants alike; the table gives the median over the
rounds of each round's median time per iteration, and ratios.

  (a) 200 float32 tensors of 64 KiB (the gradients of one backward pass):
      plait allreduce_async_ of all, then synchronize (fused by plait) vs
      torch.distributed all_reduce per tensor, blocking, vs all_reduce with
      async_op=True for all, then wait.
  (b) one 64 MiB float32 allreduce: plait (sum, and average) vs
      torch.distributed (sum).
  (l) a lone 4 KiB float32 allreduce, waited for before the next (latency):
      plait allreduce_ vs torch.distributed all_reduce.
  (c) one training step (forward, backward, optimizer step) of a 10.5M
      parameter MLP, batch 32 per rank: plait's DistributedOptimizer vs
      torch's DistributedDataParallel vs one process without communication
      (rank 0 alone while the others wait: the compute-only time of a step).

Sums everywhere (Gloo has no average), except plait's average variant of (b)
and (c), where both average the gradients. Rank 0 prints the table, then what plait's coordinator did in each
plait variant (plait.stats()).

Under a launcher of your own, start `torch_bench.py --worker` on every rank
with PLAIT_* set (plaitrun does that) and MASTER_ADDR/MASTER_PORT agreed.
"""

import argparse
import os
import platform
import secrets
import socket
import statistics
import subprocess
import sys
import time

parser = argparse.ArgumentParser(
    description="plait.torch vs torch.distributed (Gloo) vs DDP, interleaved",
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--np", type=int, default=2, help="ranks to start on this host")
parser.add_argument("--python", default=sys.executable,
                    help="interpreter the ranks run (chooses the torch)")
parser.add_argument("--rounds", type=int, default=5, help="rounds; each runs every variant")
parser.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads per rank (0: cores / ranks)")
parser.add_argument("--small-count", type=int, default=200, help="(a) tensors per iteration")
parser.add_argument("--small-bytes", type=int, default=64 * 1024, help="(a) bytes per tensor")
parser.add_argument("--small-iters", type=int, default=20, help="(a) iterations per round")
parser.add_argument("--large-bytes", type=int, default=64 * 2**20, help="(b) bytes of the tensor")
parser.add_argument("--large-iters", type=int, default=5, help="(b) iterations per round")
parser.add_argument("--batch-size", type=int, default=32, help="(c) samples per rank per step")
parser.add_argument("--train-iters", type=int, default=10, help="(c) steps per round")
parser.add_argument("--warmup", type=int, default=2, help="untimed iterations before each")
parser.add_argument("--lone-bytes", type=int, default=4096, help="(l) bytes of the tensor")
parser.add_argument("--lone-iters", type=int, default=300, help="(l) iterations per round")
parser.add_argument("--only", default="abc", help="which benchmarks to run: any of a, b, l, c")
parser.add_argument("--plait-only", action="store_true",
                    help="run only plait's variants (e.g. again over another PLAIT_TRANSPORT)")
parser.add_argument("--label", default=None,
                    help="name plait's rows in --json plait.torch-LABEL (e.g. the transport)")
parser.add_argument("--timeout", type=float, default=1800, help="seconds before the job is stopped")
parser.add_argument("--json", default=None,
                    help="append each round's median per variant to this file as JSON lines "
                         "(kind \"comparison\", for ci/bench)")
parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)


# --------------------------------------------------------------------------
# The launcher: starts the ranks, each with plait's and torch's environment
# --------------------------------------------------------------------------

def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (held open until all are found)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def launch(args):
    here = os.path.dirname(os.path.abspath(__file__))
    plait_port, torch_port = free_ports(2)
    env = dict(os.environ)
    # Run from a source tree: find the bindings in it.
    bindings = os.path.join(os.path.dirname(here), "bindings", "python")
    if os.path.isdir(bindings):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (bindings, env.get("PYTHONPATH")) if p)
    env.update(PLAIT_SIZE=str(args.np), PLAIT_LOCAL_SIZE=str(args.np),
               PLAIT_RENDEZVOUS="127.0.0.1:%d" % plait_port,
               PLAIT_SECRET=secrets.token_hex(32),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(torch_port),
               WORLD_SIZE=str(args.np), LOCAL_WORLD_SIZE=str(args.np))
    argv = [a for a in sys.argv[1:]]
    procs = []
    for r in range(args.np):
        e = dict(env, PLAIT_RANK=str(r), PLAIT_LOCAL_RANK=str(r), RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen([args.python, os.path.abspath(__file__), "--worker"] + argv,
                                      env=e))
    # Wait for all; the first failure (or the timeout) stops the others.
    deadline = time.monotonic() + args.timeout
    status = 0
    while any(p.poll() is None for p in procs):
        failed = [p for p in procs if p.returncode not in (None, 0)]
        if failed or time.monotonic() > deadline:
            status = failed[0].returncode if failed else 124
            print("torch_bench: %s; stopping the other ranks"
                  % ("rank %d failed with status %d" % (procs.index(failed[0]), status)
                     if failed else "timed out after %g s" % args.timeout), file=sys.stderr)
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
            return status or 1
        time.sleep(0.1)
    return next((p.returncode for p in procs if p.returncode), 0)


# --------------------------------------------------------------------------
# The ranks
# --------------------------------------------------------------------------

def worker(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    import plait
    import plait.torch as hvd
    # plait_fusion_report.py is shared with the PyTorch examples
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "examples"))
    from plait_fusion_report import fusion_report

    rank = int(os.environ.get("RANK") or os.environ["PLAIT_RANK"])
    world = int(os.environ.get("WORLD_SIZE") or os.environ["PLAIT_SIZE"])
    threads = args.threads or max(1, (os.cpu_count() or 1) // world)
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    hvd.init()
    if (hvd.rank(), hvd.size()) != (rank, world):
        raise SystemExit("torch_bench: plait says rank %d of %d, torch.distributed rank %d of %d"
                         % (hvd.rank(), hvd.size(), rank, world))

    def log(s=""):
        if rank == 0:
            print(s, flush=True)

    # ---- (a) many small tensors ------------------------------------------
    small = [torch.zeros(args.small_bytes // 4) for _ in range(args.small_count)]

    def a_plait():
        handles = [hvd.allreduce_async_(t, name="bench.small.%d" % i, op=hvd.Sum)
                   for i, t in enumerate(small)]
        for h in handles:
            hvd.synchronize(h)

    def a_torch_blocking():
        for t in small:
            dist.all_reduce(t)

    def a_torch_async():
        works = [dist.all_reduce(t, async_op=True) for t in small]
        for w in works:
            w.wait()

    # ---- (b) one large tensor --------------------------------------------
    large = torch.zeros(args.large_bytes // 4)

    def b_plait():
        hvd.allreduce_(large, name="bench.large", op=hvd.Sum)

    def b_plait_average():
        hvd.allreduce_(large, name="bench.large.average", op=hvd.Average)

    def b_torch():
        dist.all_reduce(large)

    # ---- (l) a lone small tensor -------------------------------------------
    lone = torch.zeros(args.lone_bytes // 4)

    def l_plait():
        hvd.allreduce_(lone, name="bench.lone", op=hvd.Sum)

    def l_torch():
        dist.all_reduce(lone)

    # Check the results once before timing (then the buffers are zeroed, so
    # that repeated sums cannot overflow; the cost of a sum does not depend
    # on the values).
    expect = world * (world + 1) / 2
    for fn, bufs in ((a_plait, small), (a_torch_blocking, small), (a_torch_async, small),
                     (b_plait, [large]), (b_torch, [large]), (l_plait, [lone]),
                     (l_torch, [lone])):
        for t in bufs:
            t.fill_(rank + 1)
        fn()
        bad = [i for i, t in enumerate(bufs) if not bool((t == expect).all())]
        if bad:
            raise SystemExit("torch_bench: %s gave wrong sums in %d tensors" % (fn.__name__, len(bad)))
        for t in bufs:
            t.zero_()
    large.fill_(rank + 1)
    b_plait_average()
    if not bool((large == expect / world).all()):
        raise SystemExit("torch_bench: b_plait_average gave a wrong average")
    large.zero_()

    # ---- (c) a training step -----------------------------------------------
    def make_mlp():
        widths = (3 * 32 * 32, 2048, 1024, 1024, 1024)
        layers = []
        for a, b in zip(widths, widths[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(nn.Flatten(), *layers, nn.Linear(widths[-1], 10))

    torch.manual_seed(1234)
    reference = make_mlp()
    nparams = sum(p.numel() for p in reference.parameters())

    def copy_of_reference():
        m = make_mlp()
        m.load_state_dict(reference.state_dict())
        return m

    model_p = copy_of_reference()
    opt_p = hvd.DistributedOptimizer(torch.optim.SGD(model_p.parameters(), lr=0.01, momentum=0.9),
                                     named_parameters=model_p.named_parameters(), op=hvd.Average)
    model_d = DDP(copy_of_reference())
    opt_d = torch.optim.SGD(model_d.parameters(), lr=0.01, momentum=0.9)
    model_s = copy_of_reference()
    opt_s = torch.optim.SGD(model_s.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator().manual_seed(rank)
    data = torch.randn(args.batch_size, 3, 32, 32, generator=gen)
    target = torch.randint(0, 10, (args.batch_size,), generator=gen)

    def train_step(model, opt):
        opt.zero_grad()
        F.cross_entropy(model(data), target).backward()
        opt.step()

    def c_plait():
        train_step(model_p, opt_p)

    def c_ddp():
        train_step(model_d, opt_d)

    def c_single():
        train_step(model_s, opt_s)

    # name, function, iterations, ranks that run it, plait variant?
    groups = [
        ("(a) %d x %d KiB float32 allreduce" % (args.small_count, args.small_bytes // 1024), [
            ("plait allreduce_async_ all + synchronize", a_plait, args.small_iters, True),
            ("torch.distributed all_reduce per tensor", a_torch_blocking, args.small_iters, False),
            ("torch.distributed async_op=True all + wait", a_torch_async, args.small_iters, False),
        ]),
        ("(b) one %d MiB float32 allreduce" % (args.large_bytes // 2**20), [
            ("plait allreduce_", b_plait, args.large_iters, True),
            ("plait allreduce_ average", b_plait_average, args.large_iters, True),
            ("torch.distributed all_reduce", b_torch, args.large_iters, False),
        ]),
        ("(l) lone %d KiB float32 allreduce" % (args.lone_bytes // 1024), [
            ("plait allreduce_ lone", l_plait, args.lone_iters, True),
            ("torch.distributed all_reduce lone", l_torch, args.lone_iters, False),
        ]),
        ("(c) training step, MLP %.1fM parameters, batch %d" % (nparams / 1e6, args.batch_size), [
            ("plait DistributedOptimizer", c_plait, args.train_iters, True),
            ("torch DistributedDataParallel", c_ddp, args.train_iters, False),
            ("one process, no communication", c_single, args.train_iters, None),
        ]),
    ]

    log("torch_bench: %d ranks on %s (%d cores), Python %s (%s), torch %s, plait %s over %s, "
        "%d torch thread(s) per rank"
        % (world, platform.node(), os.cpu_count(), platform.python_version(), sys.executable,
           torch.__version__, plait.__version__, hvd.transport_name(), threads))
    log("%d rounds, each running every variant (order rotating); per round: %d + %d warm-up "
        "iterations of (a), %d + %d of (b), %d + %d of (c); load average at start %s"
        % (args.rounds, args.small_iters, args.warmup, args.large_iters, args.warmup,
           args.train_iters, args.warmup, " ".join("%.2f" % x for x in os.getloadavg())))

    groups = [g for g in groups if g[0][1] in args.only]
    if args.plait_only:
        groups = [(g, [v for v in vs if v[3]]) for g, vs in groups]
    medians = {}      # variant -> [median seconds per iteration, one per round]
    stats = {}        # plait variant -> (summed plait.stats(), iterations)
    for rnd in range(args.rounds):
        for gname, variants in groups:
            k = rnd % len(variants)
            for name, fn, iters, uses_plait in variants[k:] + variants[:k]:
                dist.barrier()
                if uses_plait is None and rank != 0:
                    continue            # one process: rank 0 alone; the others wait
                for _ in range(args.warmup):
                    fn()
                if uses_plait:
                    plait.stats_reset()
                times = []
                for _ in range(iters):
                    t0 = time.perf_counter()
                    fn()
                    times.append(time.perf_counter() - t0)
                medians.setdefault(name, []).append(statistics.median(times))
                if uses_plait:
                    s = plait.stats()
                    total, n = stats.get(name, ({}, 0))
                    stats[name] = ({k2: total.get(k2, 0) + v for k2, v in s.items()}, n + iters)
        dist.barrier()
        if rank == 0:
            print("  round %d of %d: %s" % (rnd + 1, args.rounds, ", ".join(
                "%s %.1f ms" % (short, 1e3 * medians[name][-1])
                for name, short in SHORT_NAMES if name in medians)), flush=True)

    # The plait and DDP models saw the same data for the same number of steps.
    diff = None
    if any(g[0].startswith("(c)") for g in groups):
        diff = max((a - b).abs().max().item()
                   for a, b in zip(model_p.parameters(), model_d.module.parameters()))

    if rank == 0:
        if args.json:
            write_json(args, medians, world)
        print_table(groups, medians, args)
        if diff is not None:
            log("plait DistributedOptimizer and DDP models after the same steps: largest "
                "parameter difference %.2e" % diff)
        log()
        for name, (s, n) in stats.items():
            log("plait statistics, %s (rank 0, %d timed iterations):" % (name, n))
            for line in fusion_report(s, n, unit="iteration"):
                log("  " + line)
    dist.barrier()
    hvd.shutdown()
    dist.destroy_process_group()
    return 0


# Short names for the progress line of each round.
SHORT_NAMES = [
    ("plait allreduce_async_ all + synchronize", "a/plait"),
    ("torch.distributed all_reduce per tensor", "a/torch"),
    ("torch.distributed async_op=True all + wait", "a/torch-async"),
    ("plait allreduce_", "b/plait"),
    ("plait allreduce_ average", "b/plait-avg"),
    ("torch.distributed all_reduce", "b/torch"),
    ("plait allreduce_ lone", "l/plait"),
    ("torch.distributed all_reduce lone", "l/torch"),
    ("plait DistributedOptimizer", "c/plait"),
    ("torch DistributedDataParallel", "c/ddp"),
    ("one process, no communication", "c/single"),
]


# Variant -> (system, workload) in ci/bench's comparison records.
JSON_NAMES = {
    "plait allreduce_async_ all + synchronize": ("plait.torch", "200x64K"),
    "torch.distributed all_reduce per tensor": ("torch.distributed-blocking", "200x64K"),
    "torch.distributed async_op=True all + wait": ("torch.distributed-async", "200x64K"),
    "plait allreduce_": ("plait.torch", "allreduce-64M"),
    "plait allreduce_ average": ("plait.torch", "allreduce-64M-average"),
    "torch.distributed all_reduce": ("torch.distributed", "allreduce-64M"),
    "plait allreduce_ lone": ("plait.torch", "latency-4K"),
    "torch.distributed all_reduce lone": ("torch.distributed", "latency-4K"),
    "plait DistributedOptimizer": ("plait.torch", "mlp-10m-train-step"),
    "torch DistributedDataParallel": ("torch-ddp", "mlp-10m-train-step"),
    "one process, no communication": ("one-process", "mlp-10m-train-step"),
}


def write_json(args, medians, world):
    import json
    import torch
    with open(args.json, "a") as f:
        for name, per_round in medians.items():
            system, workload = JSON_NAMES[name]
            if system == "plait.torch" and args.label:
                system += "-" + args.label
            if args.lone_bytes != 4096:
                workload = workload.replace("latency-4K", "latency-%dK" % (args.lone_bytes // 1024))
            if args.small_count != 200 or args.small_bytes != 64 * 1024:
                workload = workload.replace("200x64K", "%dx%dK" % (args.small_count,
                                                                  args.small_bytes // 1024))
            for rnd, m in enumerate(per_round):
                f.write(json.dumps({"kind": "comparison", "system": system, "workload": workload,
                                    "ranks": world, "round": rnd, "median_s": m,
                                    "torch": torch.__version__}) + "\n")


def print_table(groups, medians, args):
    """The results as a Markdown table, then the ratios the goals are about."""
    def med(name):
        return statistics.median(medians[name])

    print()
    print("| benchmark | variant | time per iteration (median of %d rounds) | round medians "
          "(min - max) | relative to plait |" % args.rounds)
    print("|---|---|---|---|---|")
    for gname, variants in groups:
        base = med(variants[0][0])
        for name, _, _, _ in variants:
            m = med(name)
            extra = ""
            if gname.startswith("(l)"):
                extra = " (%.1f us)" % (1e6 * m)
            if gname.startswith("(b)"):
                extra = ", %.2f GB/s" % (args.large_bytes / m / 1e9)
            print("| %s | %s | %.2f ms%s | %.2f - %.2f ms | %.2fx |"
                  % (gname, name, 1e3 * m, extra, 1e3 * min(medians[name]),
                     1e3 * max(medians[name]), m / base))
    print()
    if all(n in medians for n in ("plait allreduce_async_ all + synchronize",
                                  "torch.distributed all_reduce per tensor")):
        a, b, c = (med(n) for n in ("plait allreduce_async_ all + synchronize",
                                    "torch.distributed all_reduce per tensor",
                                    "torch.distributed async_op=True all + wait"))
        print("(a) plait is %.2fx as fast as torch.distributed blocking, %.2fx as fast as "
              "async_op=True" % (b / a, c / a))
    if "plait allreduce_" in medians and "torch.distributed all_reduce" in medians:
        p, t = med("plait allreduce_"), med("torch.distributed all_reduce")
        print("(b) plait is %.2fx as fast as torch.distributed" % (t / p))
    if "plait allreduce_ lone" in medians and "torch.distributed all_reduce lone" in medians:
        p, t = med("plait allreduce_ lone"), med("torch.distributed all_reduce lone")
        print("(l) a lone allreduce: plait %.1f us, torch.distributed %.1f us" % (1e6 * p, 1e6 * t))
    if "plait DistributedOptimizer" in medians and "one process, no communication" in medians:
        p, d, s = (med(n) for n in ("plait DistributedOptimizer", "torch DistributedDataParallel",
                                    "one process, no communication"))
        print("(c) plait is %.2fx as fast as DDP; scaling efficiency (one process / step) "
              "plait %.0f%%, DDP %.0f%%" % (d / p, 100 * s / p, 100 * s / d))


def main():
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
