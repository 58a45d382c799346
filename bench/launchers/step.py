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

With PLAIT_BENCH_DIAG=FILE every rank appends one JSON line to FILE with
what could make one engine's step differ from another's: its threads
(/proc/self/status), allowed CPUs, torch's intra-op and inter-op threads,
OMP_NUM_THREADS, nice, scheduling policy, the transport, its parent's
command, and over the timed steps: CPU time, context switches and minor
page faults per step.
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
    diag = _diag_start() if os.environ.get("PLAIT_BENCH_DIAG") else None
    for i in range(steps + 10):
        if i == 10 and diag is not None:
            diag = _diag_start()
        t0 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if i >= 10:
            times.append((time.perf_counter() - t0) * 1e3)
    record = {"bench": "launcher_step", "size": hvd.size(), "init_done": init_done,
              "step_ms_median": statistics.median(times), "steps": steps}
    if diag is not None:
        _diag_write(diag, hvd, torch, steps, record)
    if hvd.rank() == 0:
        print(json.dumps(record), flush=True)
    hvd.shutdown()
    return record


def _status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _minflt():
    return int(_read("/proc/self/stat").rsplit(")", 1)[1].split()[7])


def _diag_start():
    st = _status()
    return {"cpu": time.process_time(), "minflt": _minflt(),
            "vol": int(st["voluntary_ctxt_switches"]),
            "invol": int(st["nonvoluntary_ctxt_switches"])}


def _diag_write(start, hvd, torch, steps, record):
    st = _status()
    try:
        parent = open("/proc/%d/cmdline" % os.getppid(), "rb").read()
        parent = parent.replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        parent = "?"
    line = {"rank": hvd.rank(), "pid": os.getpid(), "parent": parent,
            "step_ms_median": round(record["step_ms_median"], 3),
            "cpu_ms_per_step": round((time.process_time() - start["cpu"]) * 1e3 / steps, 3),
            "vol_ctxt_per_step": round((int(st["voluntary_ctxt_switches"]) - start["vol"])
                                       / steps, 2),
            "invol_ctxt_per_step": round((int(st["nonvoluntary_ctxt_switches"]) - start["invol"])
                                         / steps, 2),
            "minflt_per_step": round((_minflt() - start["minflt"]) / steps, 1),
            "threads": int(st["Threads"]), "cpus_allowed": st["Cpus_allowed_list"],
            "torch_threads": torch.get_num_threads(),
            "torch_interop_threads": torch.get_num_interop_threads(),
            "omp": os.environ.get("OMP_NUM_THREADS"), "nice": os.nice(0),
            "policy": os.sched_getscheduler(0), "gloo": bool(hvd.gloo_enabled()),
            "local_size": hvd.local_size(), "sid": os.getsid(0), "pgid": os.getpgid(0),
            "autogroup": _read("/proc/self/autogroup"), "plait_files": sorted(
                {ln.split()[-1] for ln in (_read("/proc/self/maps") or "").splitlines()
                 if "plait" in ln.split()[-1]}), "cgroup": _read("/proc/self/cgroup"),
            "env_plait": sorted(
                k for k in os.environ if k.startswith(("PLAIT_", "OMP_", "MKL_", "KMP_")))}
    with open(os.environ["PLAIT_BENCH_DIAG"], "a") as f:
        f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
