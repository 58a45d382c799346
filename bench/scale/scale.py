#!/usr/bin/python3
"""Control-plane scale by simulation: 16 to 256 light ranks on one machine.

Starts N processes of build/bin/scale_rank directly (PLAIT_RANK, PLAIT_SIZE,
PLAIT_LOCAL_RANK, PLAIT_LOCAL_SIZE, PLAIT_RENDEZVOUS on a free loopback port
and PLAIT_SECRET set as plaitrun would), releases them at once (they wait on
a pipe), and each runs tiny one-float allreduces one at a time: the
collective costs next to nothing, so what grows with N is the star at rank 0
(every rank announces to rank 0, rank 0 answers every rank) and the
transport's latency. Printed per N, from plait_stats:

  init_s       rank 0's plait_init (the slowest rank's in brackets)
  op_ms        wall time per allreduce at rank 0
  cpu_ms       rank 0's CPU time (all threads, user + system) per allreduce
  neg_ms       rank 0's negotiation time per allreduce (negotiate_s / ops):
               wall time, waiting for a CPU included
  negcpu_ms    rank 0's coordinator thread's CPU time in those same
               intervals (negotiate_cpu_s / ops): the negotiation's own work
  neg_us/rank  the same divided by N - 1: flat while the star costs linearly
  ctl_B/op r0  control bytes rank 0 sends per allreduce (to all ranks)
  ctl_B/op r>0 control bytes each other rank sends per allreduce (median;
               the records also keep the most any rank sent: a relaying
               rank of the control tree, PLAIT_CONTROL_FANOUT)

With --fanouts 0,8 every point runs as a star and as a tree of fan-out 8,
side by side in the same round (--rounds N: N rounds, interleaved).
--slow-rank r --slow-ms t: rank r sleeps t ms before each timed allreduce
(what a rank descheduled that long does to the others' control traffic).
Every rank runs with PLAIT_CACHED_EPOCH=0 unless --epoch: the control plane
is what this measures, and with the epoch (the library's default) a
steady-state cached allreduce does not reach it.

Raises RLIMIT_NOFILE to its hard limit (rank 0 holds one socket per rank,
gloo one per pair) and says so.

    bench/scale/scale.py --build-dir build/dev --ranks 16,32,64,128,256 \\
        --transports ofi-shm,gloo --out scale.jsonl --plot scale.png
"""
import argparse
import json
import os
import resource
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TRANSPORTS = {
    "gloo": {"PLAIT_TRANSPORT": "gloo"},
    "ofi-shm": {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "shm"},
    "ofi-tcp": {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "tcp;ofi_rxm"},
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        print("scale: RLIMIT_NOFILE raised from %d to %d (the ranks inherit it)" % (soft, want))
    else:
        print("scale: RLIMIT_NOFILE is %d" % soft)
    if want < need:
        print("scale: warning: %d descriptors may not be enough for %d" % (want, need))


def run_point(args, transport, n, fanout=None):
    """One job of n ranks (PLAIT_CONTROL_FANOUT=fanout when given); returns
    the record, or one with "error"."""
    port, secret = free_port(), secrets.token_hex(32)
    exe = os.path.join(args.build_dir, "bin", "scale_rank")
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    go_r, go_w = os.pipe()
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PLAIT_", "FI_", "OMPI_", "PMI_", "SLURM_"))}
    base.update(TRANSPORTS[transport])
    base.update({"PLAIT_SIZE": str(n), "PLAIT_LOCAL_SIZE": str(n),
                 "PLAIT_RENDEZVOUS": "127.0.0.1:%d" % port, "PLAIT_SECRET": secret,
                 "PLAIT_PLUGIN_PATH": os.path.join(args.build_dir, "lib"),
                 "PLAIT_TIMEOUT_S": str(args.plait_timeout),
                 "PLAIT_START_TIMEOUT_S": str(args.plait_timeout),
                 "SCALE_GO_FD": str(go_r), "SCALE_ITERS": str(args.iters),
                 "SCALE_WARMUP": str(args.warmup),
                 "SCALE_SLOW_RANK": str(args.slow_rank), "SCALE_SLOW_MS": str(args.slow_ms),
                 # the control plane is what this measures: with the cached epoch
                 # (on by default) a steady-state cached allreduce never reaches it
                 "PLAIT_CACHED_EPOCH": "1" if args.epoch else "0"})
    if fanout is not None:
        base["PLAIT_CONTROL_FANOUT"] = str(fanout)
    procs = []
    t0 = time.monotonic()
    try:
        for r in range(n):
            env = dict(base, PLAIT_RANK=str(r), PLAIT_LOCAL_RANK=str(r))
            cmd = [exe]
            if r == 0:
                env.update(x.split("=", 1) for x in args.rank0_env)
                cmd = args.rank0_wrap.split() + cmd if args.rank0_wrap else cmd
            procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=err, pass_fds=(go_r,)))
        spawn_s = time.monotonic() - t0
        os.close(go_w)
        go_w = -1
        deadline = time.monotonic() + args.job_timeout
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            if any(p.poll() not in (None, 0) for p in procs):  # one failed: the rest soon
                deadline = min(deadline, time.monotonic() + args.fail_grace)
            time.sleep(0.2)
        job_s = time.monotonic() - t0 - spawn_s
        bad = [(r, p.poll()) for r, p in enumerate(procs) if p.poll() != 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        os.close(go_r)
        if go_w >= 0:
            os.close(go_w)
    out.seek(0)
    err.seek(0)
    lines = [json.loads(x) for x in out.read().decode().splitlines() if x.startswith("{")]
    errors = err.read().decode("utf-8", "replace")
    if args.stderr:
        with open(args.stderr, "a") as f:
            f.write(errors)
    rec = {"kind": "scale", "label": args.label, "transport": transport, "ranks": n,
           "cached_epoch": bool(args.epoch),
           "iters": args.iters,
           "spawn_s": round(spawn_s, 3), "job_s": round(job_s, 3)}
    if fanout is not None:
        rec["fanout"] = fanout
    if args.slow_ms > 0:
        rec["slow_rank"], rec["slow_ms"] = args.slow_rank, args.slow_ms
    if bad or len(lines) != n:
        rec["error"] = "%d of %d ranks failed or hung (first: %s); stderr: %s" % (
            len(bad), n, bad[:3], errors[-800:])
        return rec
    by = {x["rank"]: x for x in lines}
    r0, others = by[0], [by[r] for r in range(1, n)]
    most = max(others, key=lambda x: x["control_bytes"])
    rec.update({
        "init_s": r0["init_s"], "init_s_max": max(x["init_s"] for x in lines),
        "op_s": r0["op_s"], "cpu_s": r0["cpu_s"], "negotiate_s": r0["negotiate_s"],
        "negotiate_s_per_rank": r0["negotiate_s"] / (n - 1),
        "control_bytes_rank0": r0["control_bytes"] / args.iters,
        "control_bytes_rank": statistics.median(x["control_bytes"] for x in others) / args.iters,
        "control_bytes_rank_max": most["control_bytes"] / args.iters,
        "control_bytes_rank_max_at": most["rank"],
        "control_messages_rank0": r0["control_messages"] / args.iters,
        "busy_cycles_rank0": r0["busy_cycles"] / args.iters,
    })
    if "negotiate_cpu_s" in r0:  # scale_rank of a libplait with plait_stats.negotiate_cpu_s
        rec["negotiate_cpu_s"] = r0["negotiate_cpu_s"]
    return rec


def row(rec):
    tr = rec["transport"] + ("/k%d" % rec["fanout"] if "fanout" in rec else "")
    if "error" in rec:
        return "%-8s %5d  FAILED: %s" % (tr, rec["ranks"], rec["error"])
    return "%-8s %5d %7.2f (%6.2f) %8.3f %8.3f %8.3f %9.3f %11.2f %11.0f %12.0f %8.0f" % (
        tr, rec["ranks"], rec["init_s"], rec["init_s_max"], rec["op_s"] * 1e3,
        rec["cpu_s"] * 1e3,
        rec["negotiate_s"] * 1e3, rec.get("negotiate_cpu_s", float("nan")) * 1e3,
        rec["negotiate_s_per_rank"] * 1e6,
        rec["control_bytes_rank0"], rec["control_bytes_rank"], rec["control_bytes_rank_max"])


HEAD = "%-8s %5s %7s %8s %8s %8s %8s %9s %11s %11s %12s %8s" % (
    "", "ranks", "init_s", "(max)", "op_ms", "cpu_ms", "neg_ms", "negcpu_ms", "neg_us/rank",
    "ctl_B/op r0", "ctl_B/op r>0", "(most)")


def series(rec):
    """transport, and the fan-out when set (k0: the star)."""
    return rec["transport"] + ("/k%d" % rec["fanout"] if "fanout" in rec else "")


def plot(records, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("scale: no plot: matplotlib is not installed (apt-get install python3-matplotlib)")
        return
    good = [r for r in records if "error" not in r]
    if not good:
        return
    panels = [("negotiate_s", 1e3, "rank 0 negotiation per allreduce (ms)"),
              ("op_s", 1e3, "wall time per tiny allreduce (ms)"),
              ("cpu_s", 1e3, "rank 0 CPU per allreduce (ms)"),
              ("control_bytes_rank0", 1, "control bytes rank 0 sends per allreduce"),
              ("control_bytes_rank", 1, "control bytes each other rank sends per allreduce"),
              ("init_s", 1, "rank 0 plait_init (s)")]
    fig, axes = plt.subplots(2, 3, figsize=(12.6, 7.6))
    for ax, (field, scale, title) in zip(axes.flat, panels):
        for tr in sorted({series(r) for r in good}):
            rs = sorted((r for r in good if series(r) == tr), key=lambda r: r["ranks"])
            xs = [r["ranks"] for r in rs]
            ys = [r[field] * scale for r in rs]
            ax.plot(xs, ys, marker="o", label=tr)
            if len(xs) > 1:  # a linear reference through the first point
                ax.plot(xs, [ys[0] * x / xs[0] for x in xs], linestyle=":", color="#999999")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks (dotted: linear from the first point)")
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("scale: wrote %s" % path)


def main(argv):
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--build-dir", default="build/dev")
    a.add_argument("--ranks", default="16,32,64,128,256")
    a.add_argument("--transports", default="ofi-shm,gloo")
    a.add_argument("--iters", type=int, default=100, help="timed allreduces")
    a.add_argument("--warmup", type=int, default=20)
    a.add_argument("--plait-timeout", type=float, default=300,
                   help="PLAIT_TIMEOUT_S and PLAIT_START_TIMEOUT_S (generous: 2 cores)")
    a.add_argument("--job-timeout", type=float, default=900, help="seconds per job")
    a.add_argument("--fail-grace", type=float, default=60,
                   help="once a rank failed, the others get this long before they are killed")
    a.add_argument("--rank0-env", action="append", default=[], metavar="VAR=VALUE",
                   help="set this for rank 0 only (e.g. PLAIT_LOG_LEVEL=debug)")
    a.add_argument("--rank0-wrap", help="run rank 0 under this command "
                   "(e.g. 'perf record -g -o rank0.data --')")
    a.add_argument("--fanouts", default="",
                   help="comma-separated PLAIT_CONTROL_FANOUT values run for every point, "
                   "interleaved (0: the star); empty: the variable left unset (the default: "
                   "a tree of fan-out 8 above 9 ranks)")
    a.add_argument("--rounds", type=int, default=1,
                   help="repeat every point this many times, interleaved round by round")
    a.add_argument("--slow-rank", type=int, default=-1,
                   help="this rank sleeps --slow-ms before each timed allreduce")
    a.add_argument("--slow-ms", type=int, default=0)
    a.add_argument("--epoch", action="store_true",
                   help="leave the cached epoch on (PLAIT_CACHED_EPOCH=1, the library's "
                   "default); without it every rank runs with PLAIT_CACHED_EPOCH=0, so each "
                   "cached allreduce goes through rank 0's control plane, which is what "
                   "this measures")
    a.add_argument("--stderr", help="write the ranks' stderr here")
    a.add_argument("--label", default="", help="a label for the records (e.g. the build)")
    a.add_argument("--out", help="append the JSON records to this file")
    a.add_argument("--plot", help="write the plot here (PNG)")
    a.add_argument("--replot", help="only plot the records in this JSON lines file")
    args = a.parse_args(argv)
    if args.replot:
        with open(args.replot) as f:
            plot([json.loads(x) for x in f if x.strip()], args.plot or "scale.png")
        return 0
    ranks = [int(x) for x in args.ranks.split(",") if x]
    trs = [x for x in args.transports.split(",") if x]
    for tr in trs:
        if tr not in TRANSPORTS:
            a.error("unknown transport %r (have %s)" % (tr, ", ".join(TRANSPORTS)))
    if any(n < 2 for n in ranks):
        a.error("every rank count must be at least 2")
    raise_nofile(4 * max(ranks) + 64)
    print("scale: %s, %d CPUs, ranks %s, transports %s, %d timed tiny allreduces "
          "(1 float32) after %d warm-up, one at a time" % (
              os.uname().nodename, os.cpu_count(), ranks, trs, args.iters, args.warmup))
    print(HEAD, flush=True)
    records = []
    fanouts = [int(x) for x in args.fanouts.split(",") if x] or [None]
    for n in ranks:
        for rnd in range(args.rounds):
            for tr in trs:
                for k in fanouts:  # star and tree side by side, the same round
                    rec = run_point(args, tr, n, k)
                    rec["round"] = rnd
                    records.append(rec)
                    print(row(rec), flush=True)
                    if args.out:
                        with open(args.out, "a") as f:
                            f.write(json.dumps(rec) + "\n")
    if args.plot:
        plot(records, args.plot)
    return 1 if any("error" in r for r in records) else 0


def on_signal(signum, frame):
    raise SystemExit(128 + signum)  # the finally blocks kill the ranks


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sys.exit(main(sys.argv[1:]))
