#!/usr/bin/python3
"""The same small CNN trained in PyTorch, TensorFlow (Keras 3) and MXNet, by
every way of distributing it (driven by ci/bench frameworks; issue 37 goal 8).

    frameworks.py --python FW=PY... [--horovod-python FW=PY]... [--plaitrun P]
                  [--plait-env K=V]... [--frameworks LIST] [--systems LIST]
                  [--ranks N] [--rounds N] [--steps N] [--warmup N]
                  [--not-measured FW:SYSTEM=REASON]... --out DIR
    frameworks.py --report FILE.jsonl [--markdown FILE] [--png FILE]

The model, data and optimizer are frameworks_models.SPEC (conv 3x3x32, conv
3x3x64, max-pool, dense 128, dense 10 on 28x28x1 synthetic images, batch 32
per rank, SGD), built layer by layer by each framework. Per framework, the
systems:

  plait-gloo   plait's binding (DistributedOptimizer, DistributedGradientTape,
               DistributedTrainer) under plaitrun, PLAIT_TRANSPORT=gloo
  plait-ofi    the same over libfabric's shm provider (ofi, FI_PROVIDER=shm)
  horovod      Horovod 0.28.1's binding, the same code, horovodrun --gloo
  native       the framework's own distribution: torch DistributedDataParallel
               (gloo), tf.distribute.MultiWorkerMirroredStrategy (RING),
               MXNet kvstore dist_sync (a scheduler and one server process)
  single       one process, the same per-rank batch, no communication: the
               reference for scaling efficiency

Every process computes with one thread. The order of the runs rotates each
round. A step's time is the slowest rank's; the table gives the median over
the timed steps of all rounds, p10 - p90, images/s (ranks x batch / median),
the scaling efficiency (single's median / the system's median: 1.0 when 2
ranks each do a step in the time one process does, so twice the images),
whether the ranks ended with identical weights, and plait's fusion statistics (plait.stats()
over the timed steps on rank 0: tensors, collectives, bytes and the time in
the transport's collectives per step).
A second table sets the frameworks against each other per system, next to the
seed study's ratios (sync TensorFlow 2.65x PyTorch's step time, PyTorch 1.38x
MXNet's, on CPU clusters).

A run that cannot happen is never dropped: "NOT MEASURED: FW SYSTEM: REASON"
when it happens, again above the tables, and a row in them. Bad input (an
unknown framework or system, a bad count) is named, exit 2.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from frameworks_models import SPEC, spec_parameters  # noqa: E402
from mxnet_bench import RunFailed, free_port, pct, run_job, stop  # noqa: E402

FRAMEWORKS = ["torch", "tensorflow", "mxnet"]
SYSTEMS = ["plait-gloo", "plait-ofi", "horovod", "native", "single"]
TITLE = {"torch": "PyTorch", "tensorflow": "TensorFlow", "mxnet": "MXNet"}
NATIVE = {"torch": "DDP", "tensorflow": "MWMS", "mxnet": "kvstore dist_sync"}
SEED = {"tensorflow/torch": 2.65, "torch/mxnet": 1.38}


class UsageError(Exception):
    pass


def parse_list(text, allowed, what):
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise UsageError("%s is empty (choose from %s)" % (what, ",".join(allowed)))
    for x in items:
        if x not in allowed:
            raise UsageError("%s: unknown '%s' (choose from %s)" % (what, x, ",".join(allowed)))
    return items


def count(text, what, lo=1):
    try:
        n = int(text)
    except ValueError:
        n = None
    if n is None or n < lo:
        raise UsageError("%s '%s' is not a whole number >= %d" % (what, text, lo))
    return n


def pairs(items, what, sep="="):
    out = {}
    for item in items:
        k, s, v = item.partition(sep)
        if not s or not k or not v:
            raise UsageError("%s '%s' is not KEY%sVALUE" % (what, item, sep))
        out[k] = v
    return out


# ------------------------------------------------------------ the runs --

def system_label(fw, system):
    return "native (%s)" % NATIVE[fw] if system == "native" else system


def env_for(args, extra):
    env = dict(os.environ)
    for k in [k for k in env if k.startswith(("DMLC_", "PLAIT_TRANSPORT", "FI_PROVIDER",
                                             "TF_CONFIG", "MASTER_", "FW_"))]:
        del env[k]
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MXNET_CPU_WORKER_NTHREADS="1",
               TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def worker_cmd(args, py, fw, impl, tag):
    return [py, os.path.join(HERE, "frameworks.py"), "--worker", fw, "--impl", impl,
            "--tag", tag, "--work-dir", args.work_dir, "--steps", str(args.steps),
            "--warmup", str(args.warmup)]


def run_local(jobs, nworkers, timeout, log):
    """Starts JOBS [(name, cmd, env)], the first NWORKERS being the ranks;
    waits for the ranks, fails on the first process that fails; stops all."""
    procs = []
    try:
        for name, cmd, env in jobs:
            log.write("$ %s\n" % " ".join(cmd))
            log.flush()
            procs.append((name, subprocess.Popen(cmd, env=env, stdout=log,
                                                 stderr=subprocess.STDOUT,
                                                 start_new_session=True)))
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for _, p in procs[:nworkers]):
            if time.monotonic() > deadline:
                raise RunFailed("no result after %d s (stopped)" % timeout)
            for name, p in procs:
                if p.poll() not in (None, 0):
                    raise RunFailed("%s exited with status %d" % (name, p.returncode))
            time.sleep(0.1)
        for name, p in procs[:nworkers]:
            if p.returncode != 0:
                raise RunFailed("%s exited with status %d" % (name, p.returncode))
        for _, p in procs[nworkers:]:  # the parameter server ends with its workers
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                pass
    finally:
        for _, p in procs:
            stop(p)


def launch(args, fw, system, tag, log):
    py, n = args.python[fw], args.ranks
    if system.startswith("plait-"):
        t = {"PLAIT_TRANSPORT": "gloo"} if system == "plait-gloo" else \
            {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "shm"}
        env = env_for(args, dict(args.plait_env, **t))
        run_job([args.plaitrun, "-np", str(n), "--no-prefix"]
                + worker_cmd(args, py, fw, "plait", tag), env, args.timeout, log)
    elif system == "horovod":
        hpy = args.horovod_python[fw]
        env = env_for(args, {"HOROVOD_FUSION_THRESHOLD": str(64 << 20)})  # plait's default
        run_job([os.path.join(os.path.dirname(hpy), "horovodrun"), "-np", str(n), "-H",
                 "localhost:%d" % n, "--gloo"] + worker_cmd(args, hpy, fw, "horovod", tag),
                env, args.timeout, log)
    elif system == "single":
        run_local([("the process", worker_cmd(args, py, fw, "single", tag), env_for(args, {}))],
                  1, args.timeout, log)
    else:
        run_local(native_jobs(args, fw, tag), n, args.timeout, log)


def native_jobs(args, fw, tag):
    py, n = args.python[fw], args.ranks
    cmd = worker_cmd(args, py, fw, "native", tag)
    ports = [free_port() for _ in range(n)]
    jobs, common = [], {"FW_SIZE": str(n)}
    if fw == "mxnet":
        common.update(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(ports[0]),
                      DMLC_NODE_HOST="127.0.0.1", DMLC_NUM_SERVER="1", DMLC_NUM_WORKER=str(n))
    for r in range(n):
        e = dict(common, FW_RANK=str(r))
        if fw == "torch":
            e.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ports[0]))
        elif fw == "tensorflow":
            e["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["127.0.0.1:%d" % p for p in ports]},
                                         "task": {"type": "worker", "index": r}})
        else:
            e["DMLC_ROLE"] = "worker"
        jobs.append(("rank %d" % r, cmd, env_for(args, e)))
    if fw == "mxnet":
        for role in ("scheduler", "server"):
            jobs.append(("the dist_sync %s" % role, [py, "-c", "import mxnet"],
                         env_for(args, dict(common, DMLC_ROLE=role))))
    return jobs


def collect(args, fw, system, tag, rnd):
    n = 1 if system == "single" else args.ranks
    rows = []
    for r in range(n):
        path = os.path.join(args.work_dir, "result-%s-rank%d.json" % (tag, r))
        if not os.path.exists(path):
            raise RunFailed("rank %d wrote no result" % r)
        with open(path) as f:
            rows.append(json.load(f))
        os.unlink(path)
    rows.sort(key=lambda row: row["rank"])
    return {"kind": "run", "framework": fw, "system": system, "round": rnd, "ranks": n,
            "batch": SPEC["batch"], "step_s": [max(ts) for ts in zip(*[x["step_s"] for x in rows])],
            "final_loss": statistics.mean(x["losses"][-1] for x in rows),
            "identical": len({x["digest"] for x in rows}) == 1,
            "n_params": rows[0]["n_params"], "n_tensors": rows[0]["n_tensors"],
            "stats": rows[0].get("stats"), "version": rows[0]["version"]}


def driver(args):
    missing = dict(args.not_measured)
    for fw in args.frameworks:
        if fw not in args.python:
            for s in args.systems:
                missing.setdefault((fw, s), "no python given for %s (--python %s=PY)" % (fw, fw))
        for s in args.systems:
            if s.startswith("plait-") and not args.plaitrun:
                missing.setdefault((fw, s), "no plait build (--plaitrun)")
            if s == "horovod" and fw not in args.horovod_python:
                missing.setdefault((fw, s), "no Horovod for %s (--horovod-python %s=PY)" % (fw, fw))
    runs = [(fw, s) for fw in args.frameworks for s in args.systems if (fw, s) not in missing]
    os.makedirs(args.out, exist_ok=True)
    jsonl = os.path.join(args.out, "frameworks.jsonl")
    records = [{"kind": "setup", "spec": SPEC, "ranks": args.ranks, "rounds": args.rounds,
                "steps": args.steps, "warmup": args.warmup, "cores": os.cpu_count(),
                "load_before": list(os.getloadavg())}]
    for (fw, s), reason in sorted(missing.items()):
        print("NOT MEASURED: %s %s: %s" % (fw, s, reason), file=sys.stderr, flush=True)
    failed = {}
    with open(os.path.join(args.out, "frameworks-runs.log"), "w") as log, \
            tempfile.TemporaryDirectory(prefix="plait-fw-") as work:
        args.work_dir = work
        for rnd in range(1, args.rounds + 1):
            k = (rnd - 1) % max(1, len(runs))
            for fw, s in runs[k:] + runs[:k]:
                if (fw, s) in failed:
                    continue
                tag = "%s-%s-%d" % (fw, s, rnd)
                print("== round %d of %d: %s %s (load %.2f)" % (rnd, args.rounds, fw, s,
                                                               os.getloadavg()[0]), flush=True)
                try:
                    launch(args, fw, s, tag, log)
                    rec = collect(args, fw, s, tag, rnd)
                except RunFailed as e:
                    failed[(fw, s)] = "round %d: %s (log %s)" % (rnd, e, log.name)
                    print("NOT MEASURED: %s %s: %s" % (fw, s, failed[(fw, s)]), file=sys.stderr,
                          flush=True)
                    continue
                print("   median %.1f ms per step" % (1e3 * statistics.median(rec["step_s"])),
                      flush=True)
                records.append(rec)
    records[0]["load_after"] = list(os.getloadavg())
    for (fw, s), reason in list(missing.items()) + list(failed.items()):
        if not any(r.get("framework") == fw and r.get("system") == s for r in records[1:]):
            records.append({"kind": "missing", "framework": fw, "system": s, "reason": reason})
    with open(jsonl, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    return report(records, os.path.join(args.out, "frameworks.md"),
                  os.path.join(args.out, "frameworks.png"))


# ---------------------------------------------------------- the report --

def summarize(records):
    """{(fw, system): row} over the run records, and {(fw, system): reason}."""
    runs, missing = {}, {}
    for r in records:
        if r.get("kind") == "run":
            runs.setdefault((r["framework"], r["system"]), []).append(r)
        elif r.get("kind") == "missing":
            missing[(r["framework"], r["system"])] = r["reason"]
    rows = {}
    for key, rs in runs.items():
        ts = [t for r in rs for t in r["step_s"]]
        med = statistics.median(ts)
        row = {"median_s": med, "p10_s": pct(ts, 0.1), "p90_s": pct(ts, 0.9),
               "ranks": rs[0]["ranks"], "img_s": rs[0]["ranks"] * rs[0]["batch"] / med,
               "identical": all(r["identical"] for r in rs), "rounds": len(rs),
               "n_params": rs[0]["n_params"], "n_tensors": rs[0]["n_tensors"],
               "version": rs[0]["version"], "fusion": None}
        stats = [r["stats"] for r in rs if r.get("stats")]
        if stats:
            steps = sum(len(r["step_s"]) for r in rs if r.get("stats"))
            row["fusion"] = {k: sum(s[src] for s in stats) / steps for k, src in
                             (("tensors", "tensors"), ("collectives", "responses"),
                              ("bytes", "bytes"), ("transport_s", "transport_s"))}
        rows[key] = row
    for (fw, s), row in rows.items():
        single = rows.get((fw, "single"))
        row["efficiency"] = single["median_s"] / row["median_s"] if single else None
    return rows, missing


def model_check(rows):
    """'' when every run trained SPEC's network, else what differs."""
    want = spec_parameters()
    bad = ["%s %s: %d parameters in %d tensors" % (fw, s, r["n_params"], r["n_tensors"])
           for (fw, s), r in sorted(rows.items()) if (r["n_params"], r["n_tensors"]) != want]
    return ("MODEL DIFFERS from the spec (%d parameters in %d tensors): %s"
            % (want + ("; ".join(bad),))) if bad else ""


def ratios(rows, systems):
    """[(system, TF/torch, torch/MXNet)]: step-time ratios, None when a side is missing."""
    def r(a, b, s):
        x, y = rows.get((a, s)), rows.get((b, s))
        return x["median_s"] / y["median_s"] if x and y else None
    return [(s, r("tensorflow", "torch", s), r("torch", "mxnet", s)) for s in systems]


def fmt_ms(s):
    return "%.1f ms" % (1e3 * s)


def fmt_x(v):
    return "-" if v is None else "%.2fx" % v


def table(records):
    rows, missing = summarize(records)
    setup = next((r for r in records if r.get("kind") == "setup"), {})
    fws = [f for f in FRAMEWORKS if any(k[0] == f for k in list(rows) + list(missing))]
    systems = [s for s in SYSTEMS if any(k[1] == s for k in list(rows) + list(missing))]
    out = ["NOT MEASURED: %s %s: %s" % (fw, s, missing[(fw, s)])
           for fw in fws for s in systems if (fw, s) in missing]
    if out:
        out.append("")
    n_params, n_tensors = spec_parameters()
    out.append("The same CNN (%d parameters in %d tensors, %s per step) in each framework, "
               "batch %d per rank, %s ranks, %s rounds x %s timed steps (+%s warm-up), one "
               "thread per process, %s cores; load average %s before, %s after."
               % (n_params, n_tensors, "%.1f MB of gradients" % (4 * n_params / 1e6),
                  SPEC["batch"], setup.get("ranks", "?"), setup.get("rounds", "?"),
                  setup.get("steps", "?"), setup.get("warmup", "?"), setup.get("cores", "?"),
                  "/".join("%.2f" % x for x in setup.get("load_before", [])) or "?",
                  "/".join("%.2f" % x for x in setup.get("load_after", [])) or "?"))
    check = model_check(rows)
    out += ["", check] if check else []
    out += ["", "| framework | system | ranks | step time (median) | p10 - p90 | img/s | "
            "scaling efficiency | ranks' weights | plait tensors / step | "
            "plait collectives / step | MB allreduced / step | plait transport / step |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for fw in fws:
        for s in systems:
            name = "| %s | %s |" % (TITLE[fw], system_label(fw, s))
            if (fw, s) in missing and (fw, s) not in rows:
                out.append("%s - | NOT MEASURED: %s | - | - | - | - | - | - | - | - |"
                           % (name, missing[(fw, s)].replace("|", "/")))
                continue
            if (fw, s) not in rows:
                continue
            r = rows[(fw, s)]
            f = r["fusion"]
            out.append("%s %d | %s | %.1f - %.1f ms | %.0f | %s | %s | %s | %s | %s | %s |" % (
                name, r["ranks"], fmt_ms(r["median_s"]), 1e3 * r["p10_s"], 1e3 * r["p90_s"],
                r["img_s"], "%.2f" % r["efficiency"] if r["efficiency"] is not None else "-",
                "- (one process)" if r["ranks"] == 1 else
                ("identical" if r["identical"] else "DIFFER"),
                "%.1f" % f["tensors"] if f else "-", "%.1f" % f["collectives"] if f else "-",
                "%.2f" % (f["bytes"] / 1e6) if f else "-",
                fmt_ms(f["transport_s"]) if f else "-"))
    if len(fws) > 1:
        out += ratio_table(rows, systems)
    versions = sorted({"%s %s" % (TITLE[fw], r["version"]) for (fw, s), r in rows.items()
                       if s == "single"})
    if versions:
        out += ["", "Versions: " + ", ".join(versions) + "."]
    return "\n".join(out), rows, check


def ratio_table(rows, systems):
    out = ["", "Frameworks against each other (ratio of median step times; the seed study: "
           "sync TensorFlow %.2fx PyTorch, PyTorch %.2fx MXNet, on CPU clusters):"
           % (SEED["tensorflow/torch"], SEED["torch/mxnet"]), "",
           "| system | TensorFlow / PyTorch | PyTorch / MXNet |", "|---|---|---|",
           "| seed study | %.2fx | %.2fx |" % (SEED["tensorflow/torch"], SEED["torch/mxnet"])]
    for s, tt, tm in ratios(rows, systems):
        out.append("| `%s` | %s | %s |" % (s, fmt_x(tt), fmt_x(tm)))
    return out


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fws = [f for f in FRAMEWORKS if any(k[0] == f for k in rows)]
    systems = [s for s in SYSTEMS if any(k[1] == s for k in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / max(1, len(systems))
    for j, s in enumerate(systems):
        xs = [i + (j - (len(systems) - 1) / 2) * width for i in range(len(fws))]
        step = [1e3 * rows[(f, s)]["median_s"] if (f, s) in rows else 0 for f in fws]
        eff = [rows[(f, s)]["efficiency"] or 0 if (f, s) in rows else 0 for f in fws]
        axes[0].bar(xs, step, width, label=s)
        axes[1].bar(xs, eff, width, label=s)
    for ax, title in ((axes[0], "time per step, median (ms)"),
                      (axes[1], "scaling efficiency (single / system)")):
        ax.set_xticks(range(len(fws)))
        ax.set_xticklabels([TITLE[f] for f in fws])
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[1].axhline(1.0, color="k", lw=0.8)
    axes[0].legend(fontsize=8)
    fig.suptitle("The same CNN, batch %d per rank (ci/bench frameworks)" % SPEC["batch"])
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(records, markdown=None, png=None):
    text, rows, check = table(records)
    print(text)
    if markdown:
        with open(markdown, "w") as f:
            f.write(text + "\n")
    if png and rows:
        plot(rows, png)
        print("plot: %s" % png)
    differ = ["%s %s" % k for k, r in sorted(rows.items()) if r["ranks"] > 1 and not r["identical"]]
    if differ:
        print("frameworks.py: ranks ended with different weights: %s" % ", ".join(differ),
              file=sys.stderr)
    return 1 if differ or check else 0


def load(path):
    records = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except ValueError as e:
                    raise UsageError("%s:%d: not JSON (%s)" % (path, i, e))
    return records


# ---------------------------------------------------------------- main --

def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--ranks", default="2")
    p.add_argument("--rounds", default="3")
    p.add_argument("--steps", default="20")
    p.add_argument("--warmup", default="5")
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--python", action="append", default=[], help="FW=PY")
    p.add_argument("--horovod-python", action="append", default=[], help="FW=PY")
    p.add_argument("--plaitrun")
    p.add_argument("--plait-env", action="append", default=[], help="K=V")
    p.add_argument("--not-measured", action="append", default=[], help="FW:SYSTEM=REASON")
    p.add_argument("--out")
    p.add_argument("--report")
    p.add_argument("--markdown")
    p.add_argument("--png")
    p.add_argument("--worker", choices=FRAMEWORKS)
    p.add_argument("--impl", choices=["plait", "horovod", "native", "single"])
    p.add_argument("--tag")
    p.add_argument("--work-dir")
    args = p.parse_args(argv)
    if args.worker or args.report:
        args.steps, args.warmup = count(args.steps, "--steps"), count(args.warmup, "--warmup", 0)
        return args
    args.frameworks = parse_list(args.frameworks, FRAMEWORKS, "--frameworks")
    args.systems = parse_list(args.systems, SYSTEMS, "--systems")
    args.ranks = count(args.ranks, "--ranks", 2)
    for k in ("rounds", "steps"):
        setattr(args, k, count(getattr(args, k), "--" + k))
    args.warmup = count(args.warmup, "--warmup", 0)
    args.python = pairs(args.python, "--python")
    args.horovod_python = pairs(args.horovod_python, "--horovod-python")
    for what, d in (("--python", args.python), ("--horovod-python", args.horovod_python)):
        if d:
            parse_list(",".join(d), FRAMEWORKS, what)
    args.plait_env = pairs(args.plait_env, "--plait-env")
    nm = {}
    for key, reason in pairs(args.not_measured, "--not-measured").items():
        fw, s, sys_ = key.partition(":")
        if not s or fw not in FRAMEWORKS or sys_ not in SYSTEMS:
            raise UsageError("--not-measured '%s': want FW:SYSTEM=REASON (%s; %s)"
                             % (key, ",".join(FRAMEWORKS), ",".join(SYSTEMS)))
        nm[(fw, sys_)] = reason
    args.not_measured = nm
    if not args.out:
        raise UsageError("--out DIR is needed (or --report FILE)")
    return args


def main(argv):
    try:
        args = parse(argv)
        if args.report:
            return report(load(args.report), args.markdown, args.png)
    except UsageError as e:
        print("frameworks.py: %s" % e, file=sys.stderr)
        return 2
    if args.worker:
        import frameworks_models
        out = frameworks_models.run(args.worker, args.impl, args.steps, args.warmup)
        with open(os.path.join(args.work_dir, "result-%s-rank%d.json" % (args.tag, out["rank"])),
                  "w") as f:
            json.dump(out, f)
        return 0
    return driver(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
