#!/usr/bin/env python3
"""Long-lived job soak: every multi-rank test file as ONE job.

A job is `plaitrun -np R python -m pytest FILE`: one long process per rank
runs every test of the file, as a training job lives (hundreds of
collectives, some failing on purpose, in one process). Jobs: the Horovod
compatibility suite (tests/bindings/torch/compat, plait.torch, with each
--compat-python), the TensorFlow (tests/bindings/tensorflow/mp) and MXNet
(tests/bindings/mxnet/mp) multi-rank suites; on gloo, ofi with the shm provider
and ofi with the tcp provider; at each rank count; the whole matrix --rounds
times, optionally with --load busy loops competing for the CPU.

No PLAIT_STALL_ABORT_S: a hang is bounded only by plait itself (a deadlock
is failed after PLAIT_STALL_WARN_S, 10 s here) and by the watchdog: a job
past its bound gets every rank's Python stacks (faulthandler on SIGUSR1)
and native stacks (py-spy dump --native, else gdb) printed, then its whole
process tree killed, and counts as a hang.

One line per job, then a table per transport, then `soak: N passed, M
failed` (jobs). Exit status 1 on any hang, desync or failure; 2 on bad
usage or when nothing could run.

    tests/faults/soak/soak.py --build-dir build/dev 3          # usually via ci/soak
"""
import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import results  # noqa: E402
import watchdog  # noqa: E402

TRANSPORTS = {
    "gloo": {"PLAIT_TRANSPORT": "gloo"},
    "ofi-shm": {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "shm"},
    "ofi-tcp": {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "tcp;ofi_rxm"},
}
# Seconds a job took at 2 ranks on the development machine (2 cores, load
# average 8-11 from other builds; the slowest of gloo, ofi shm, ofi tcp).
# A job's bound is max(BOUND_MIN_S, BOUND_FACTOR x this x ranks / 2) x
# --bound-scale; files not listed count DEFAULT_NORMAL_S. Every compat file
# took 3-15 s.
NORMAL_S = {
    "compat": 15,
    "tf/test_keras_callbacks.py": 121, "tf/test_keras_optimizer.py": 180,
    "tf/test_tf_errors.py": 39, "tf/test_tf_grad.py": 35, "tf/test_tf_ops.py": 44,
    "tf/test_tf_training.py": 79,
    "mx/test_engine.py": 18, "mx/test_errors.py": 9, "mx/test_ops.py": 9,
    "mx/test_training.py": 7,
}
DEFAULT_NORMAL_S = 60
BOUND_MIN_S = 180
BOUND_FACTOR = 4
# Errors plait gives when ranks ran different operations: a job whose
# failures say so has desynchronised (one rank ran ahead or fell behind).
# (The compat suite's "ranks could not meet after the test" is not one by
# itself: it quotes the error that kept the ranks from meeting.)
DESYNC = re.compile(r"mismatched .* across ranks|stalled for|deadlock|"
                    r"not submitted|never submitted", re.I)
# ctest's soak_bounded (--bounded) runs each suite's folder as ONE job per
# transport and rank count (every file in one long-lived process, as --whole
# does) instead of one job per file: the same tests and collectives on the
# same transports, without a torch/TF import and a plaitrun launch per file,
# which were most of a per-file job's time (compat on ofi-shm at 2 ranks:
# 269 s as 14 file jobs, 21 s as one folder job, same 280 tests, loaded).
# The TF and MXNet folders only on one transport each and at 2 ranks (ctest
# runs both suites on gloo already, as one process per suite): TF on ofi-tcp
# (309 s loaded as file jobs, against 492 s on ofi-shm), MXNet on ofi-shm.
# ci/soak keeps the file jobs and the whole matrix.
# Of the TF folder only the tf_* files (ops, errors, gradients, training: the
# collectives plait.tensorflow issues, failures on purpose): the Keras files'
# optimizer, callbacks and layers issue the same collectives through Keras,
# about two thirds of the folder's time (on ofi-tcp at 2 ranks, loaded: 601 s
# with them, 197 s without); ctest runs them on gloo (python_tf_mp2/3,
# python_tf_keras2_mp2/3) and ci/soak on every transport.
BOUNDED_FRAMEWORK_TRANSPORT = {"tf": "ofi-tcp", "mx": "ofi-shm"}
BOUNDED_IGNORE = {"tf": ["--ignore-glob=*/test_keras_*.py"]}
BOUNDED_LEAVES = ("one job per file (each file in a fresh job), tf, mx on other transports and "
                  "at 3 ranks, tf's Keras files, compat with the other interpreters")
CURRENT = {}  # the running job and load processes, for the signal handler


def parse_args(argv):
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("rounds", nargs="?", type=int, default=1,
                   help="how many times the whole matrix runs (default 1)")
    a.add_argument("--build-dir", required=True, help="a built plait tree")
    a.add_argument("--suites", default="compat,tf,mx")
    a.add_argument("--transports", default="gloo,ofi-shm,ofi-tcp")
    a.add_argument("--ranks", default="2,3")
    a.add_argument("--compat-python", action="append", default=[],
                   help="an interpreter with torch and pytest (repeatable; "
                   "default /usr/bin/python3)")
    a.add_argument("--tf-python", default="", help="the TensorFlow venv's python")
    a.add_argument("--mx-python", default="", help="the MXNet venv's python")
    a.add_argument("--files", default="",
                   help="a regular expression: only test files whose path matches")
    a.add_argument("--load", type=int, default=0, metavar="K",
                   help="K busy loops compete for the CPU while the soak runs")
    a.add_argument("--extra-file", action="append", default=[], metavar="PATH",
                   help="also run this pytest file as a job (suite 'extra', plait.torch with "
                   "the first --compat-python; repeatable)")
    a.add_argument("--whole", action="store_true",
                   help="also run each suite's folder as one job (every file in one process, "
                   "as ctest runs it, but without PLAIT_STALL_ABORT_S)")
    a.add_argument("--bound-s", type=float, default=0,
                   help="every job's bound in seconds, instead of the table's")
    a.add_argument("--bound-scale", type=float,
                   default=float(os.environ.get("PLAIT_SOAK_BOUND_SCALE", "1")),
                   help="multiplies every job's bound (PLAIT_SOAK_BOUND_SCALE)")
    a.add_argument("--pyspy", default=os.environ.get("PLAIT_SOAK_PYSPY", ""),
                   help="py-spy for native stacks (PLAIT_SOAK_PYSPY; else gdb)")
    a.add_argument("--out", default="", help="logs folder (default BUILD/soak)")
    a.add_argument("--bounded", action="store_true",
                   help="what ctest runs (soak_bounded): one round, each suite's folder as one "
                   "job; the compatibility suite with the first --compat-python on every "
                   "transport at 2 and 3 ranks; the TF suite's test_tf_* files on %(tf)s and "
                   "the MXNet suite on %(mx)s, at 2 ranks" % BOUNDED_FRAMEWORK_TRANSPORT)
    a.add_argument("--list", action="store_true", help="print the jobs and exit")
    args = a.parse_args(argv)
    if args.rounds < 1:
        a.error("rounds must be at least 1")
    args.compat_python = args.compat_python or ["/usr/bin/python3"]
    if args.bounded:
        args.rounds = 1
        args.compat_python = args.compat_python[:1]
        args.whole = True  # the folder jobs; main() leaves out the file jobs
    args.out = args.out or os.path.join(args.build_dir, "soak")
    return args


def _probe(python, module):
    """None when python imports module and pytest, else why not."""
    if not python:
        return "no interpreter given"
    try:
        p = subprocess.run([python, "-c", "import %s, pytest; print(%s.__version__)"
                            % (module, module)], capture_output=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "%s: %s" % (python, e)
    if p.returncode != 0:
        last = (p.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
        return "%s cannot import %s and pytest: %s" % (python, module, last)
    return None


def _version(python, module):
    p = subprocess.run([python, "-c", "import %s; print(%s.__version__)" % (module, module)],
                       capture_output=True, timeout=300, check=False)
    return p.stdout.decode().strip()


def suites(args):
    """[(suite label, python, files, extra env, pytest options)] and the
    skips [(what, reason)]."""
    lib = os.path.join(args.build_dir, "lib")
    out, skips = [], []
    wanted = args.suites.split(",")
    if "compat" in wanted:
        for py in args.compat_python:
            why = _probe(py, "torch")
            if why:
                skips.append(("compat (%s)" % py, why))
                continue
            label = "compat-torch" + ".".join(_version(py, "torch").split(".")[:2])
            out.append((label, py, sorted(glob.glob(os.path.join(ROOT, "tests/bindings/torch/compat/test_*.py"))),
                        {"PLAIT_COMPAT_IMPL": "plait"}, ["-p", "no:hypothesispytest", "--tb=short"]))
    if "tf" in wanted:
        tf_lib = os.path.join(lib, "libplait_tensorflow.so")
        why = _probe(args.tf_python, "tensorflow") or (
            None if os.path.exists(tf_lib) else "%s is not built" % tf_lib)
        if why:
            skips.append(("tf", why))
        else:
            out.append(("tf", args.tf_python, sorted(glob.glob(os.path.join(ROOT, "tests/bindings/tensorflow/mp/test_*.py"))),
                        {"PLAIT_TENSORFLOW_LIBRARY": tf_lib, "TF_CPP_MIN_LOG_LEVEL": "2",
                         "TF_NUM_INTEROP_THREADS": "2", "TF_NUM_INTRAOP_THREADS": "1"}, ["--tb=short"]))
    if "mx" in wanted:
        mx_lib = os.path.join(lib, "libplait_mxnet.so")
        why = _probe(args.mx_python, "mxnet") or (
            None if os.path.exists(mx_lib) else "%s is not built" % mx_lib)
        if why:
            skips.append(("mx", why))
        else:
            out.append(("mx", args.mx_python, sorted(glob.glob(os.path.join(ROOT, "tests/bindings/mxnet/mp/test_*.py"))),
                        {"PLAIT_MXNET_LIBRARY": mx_lib},
                        ["-W", "ignore::DeprecationWarning", "--tb=short"]))
    if args.whole:
        out = [(s, py, fs + [os.path.dirname(fs[0])] if fs else fs, e, o) for s, py, fs, e, o in out]
    if args.extra_file:
        out.append(("extra", args.compat_python[0], [os.path.abspath(f) for f in args.extra_file],
                    {}, ["--tb=short"]))
    if args.files:
        rx = re.compile(args.files)
        out = [(s, py, [f for f in fs if rx.search(os.path.relpath(f, ROOT))], e, o)
               for s, py, fs, e, o in out]
    return out, skips


def transports(args):
    """[(name, env)] and the skips [(what, reason)]."""
    out, skips = [], []
    for t in args.transports.split(","):
        if t not in TRANSPORTS:
            raise SystemExit("soak: unknown transport %r (known: %s)" % (t, ", ".join(TRANSPORTS)))
        plugin = os.path.join(args.build_dir, "lib",
                              "libplait-transport-%s.so" % TRANSPORTS[t]["PLAIT_TRANSPORT"])
        if not os.path.exists(plugin):
            skips.append((t, "%s is not built (libfabric missing at configure time?)" % plugin))
        else:
            out.append((t, TRANSPORTS[t]))
    return out, skips


def base_env(args):
    env = dict(os.environ)
    for k in list(env):
        # The soak's own settings only: no abort after a stall (that hid the
        # hang), no inherited launcher or job variables.
        if k.startswith(("PLAIT_", "HOROVOD_", "OMPI_", "PMI_", "SLURM_", "FI_")) \
                or k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            del env[k]
    b = os.path.abspath(args.build_dir)
    env.update({
        "PLAIT_LIBRARY": os.path.join(b, "lib", "libplait.so"),
        "PLAIT_PLUGIN_PATH": os.path.join(b, "lib"),
        "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "bindings", "python"), HERE]),
        "PLAIT_TEST_BUILD_DIR": b,
        "PLAIT_TEST_PLAITRUN": os.path.join(b, "bin", "plaitrun"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONFAULTHANDLER": "1",
        "OMP_NUM_THREADS": "1",
        "PLAIT_TIMEOUT_S": "20",
        "PLAIT_STALL_WARN_S": "10",
    })
    return env


def normal_s(suite, path):
    """The file's time in NORMAL_S; a folder (--whole) the sum of its files'."""
    if os.path.isdir(path):
        return sum(normal_s(suite, f) for f in glob.glob(os.path.join(path, "test_*.py")))
    kind = suite.split("-")[0]
    return NORMAL_S.get("%s/%s" % (kind, os.path.basename(path)),
                        NORMAL_S.get(kind, DEFAULT_NORMAL_S))


def bound_s(args, suite, path, np):
    if args.bound_s > 0:
        return args.bound_s
    return max(BOUND_MIN_S, BOUND_FACTOR * normal_s(suite, path) * np / 2.0) * args.bound_scale


def run_job(args, env, job, log_dir):
    """Runs one job under the watchdog; returns its record."""
    suite, py, path, extra, opts, tname, tenv, np, rnd = job
    name = "%s-%s-%s-np%d-r%d" % (suite, os.path.splitext(os.path.basename(path))[0], tname, np, rnd)
    report = os.path.join(log_dir, name)
    os.makedirs(report, exist_ok=True)
    for stale in glob.glob(os.path.join(report, "rank*")):
        os.unlink(stale)
    tag = uuid.uuid4().hex
    jenv = dict(env, **extra, **tenv, PLAIT_SOAK_REPORT=report, PLAIT_SOAK_JOB=tag)
    cmd = [os.path.join(args.build_dir, "bin", "plaitrun"), "-np", str(np), py, "-m", "pytest",
           "-q", "-p", "no:cacheprovider", "-p", "plait_soak_plugin", "-o",
           "console_output_style=classic"] + opts + [path]
    limit = bound_s(args, suite, path, np)
    log_path = report + ".log"
    t0 = time.monotonic()
    hung, dump, left = False, "", []
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=jenv,
                                cwd=ROOT, start_new_session=True)
        CURRENT["job"] = (tag, proc)
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            hung = True
            dump = watchdog.dump(tag, report, args.pyspy)
            rc = -9
        finally:
            left = watchdog.kill_all(tag, proc)
            CURRENT.pop("job", None)
    seconds = time.monotonic() - t0
    s = results.summarise(results.read_ranks(report), np, DESYNC)
    rec = dict(s, suite=suite, file=os.path.relpath(path, ROOT), transport=tname, np=np,
               round=rnd, seconds=seconds, rc=rc, log=log_path, bound=limit, left=left)
    rec["verdict"] = results.verdict(s, rc, hung)
    if left:
        rec["verdict"] = "fail" if rec["verdict"] == "ok" else rec["verdict"]
    if hung:
        with open(report + ".hang", "w") as f:
            f.write(dump)
    rec["dump"] = dump
    return rec


def report_job(rec):
    print("soak: %-40s %-7s np%d round %d: %3d passed %3d failed %3d skipped %6.1f s %7d ops -> %s"
          % (rec["suite"] + "/" + os.path.basename(rec["file"]), rec["transport"], rec["np"], rec["round"],
             rec["passed"], rec["failed"], rec["skipped"], rec["seconds"], rec["ops"],
             rec["verdict"].upper()), flush=True)
    if rec["verdict"] == "ok":
        return
    print("      %s (%s); exit status %s; log %s" % (rec["suite"], rec["file"], rec["rc"], rec["log"]))
    if rec["verdict"] == "hang":
        print("      HANG: no end after %.0f s (bound); ranks that did not finish: %s; "
              "stacks follow, then the job was killed" % (rec["bound"], rec["unfinished"]))
        print("      " + rec["dump"].rstrip().replace("\n", "\n      "))
    elif rec["unfinished"]:
        print("      ranks that did not finish their session: %s" % rec["unfinished"])
    shown = {}  # (test, reason) -> ranks: a reason shared by ranks is printed once
    for test, rank, reason in rec["failures"]:
        shown.setdefault((test, reason), []).append(rank)
    for n, ((test, reason), rks) in enumerate(shown.items()):
        if n == 20:
            print("      ... %d more in the log" % (len(shown) - n))
            break
        print("      rank%s %s %s: %s" % ("s" if len(rks) > 1 else "", ",".join(map(str, rks)),
                                        test.split("::", 1)[-1], reason[:300]))
    if rec["left"]:
        print("      LEFT BEHIND after the kill: pids %s" % rec["left"])
    if rec["verdict"] == "fail" and not rec["failures"]:
        try:
            with open(rec["log"], errors="replace") as f:
                tail = f.read().splitlines()[-25:]
        except OSError:
            tail = []
        print("      last lines of the log:\n        " + "\n        ".join(tail))
    sys.stdout.flush()


def plan(args, st, tr):
    """The jobs (suite, python, path, env, options, transport, its env,
    ranks, round) of suites st on transports tr; --bounded keeps the folder
    jobs: compat everywhere, TF and MXNet on their transport at 2 ranks."""
    nps = [int(n) for n in args.ranks.split(",")]
    jobs = [(s, py, f, e, o, tn, te, np, rnd)
            for rnd in range(1, args.rounds + 1) for tn, te in tr for np in nps
            for s, py, fs, e, o in st for f in fs]
    if args.bounded:
        jobs = [j[:4] + (j[4] + BOUNDED_IGNORE.get(j[0], []),) + j[5:] for j in jobs
                if os.path.isdir(j[2]) and (j[0].startswith("compat")
                or (j[5] == BOUNDED_FRAMEWORK_TRANSPORT.get(j[0]) and j[7] == 2))]
    return jobs


def _stop(signum, frame):
    raise KeyboardInterrupt("signal %d" % signum)


def main(argv):
    args = parse_args(argv)
    args.build_dir = os.path.abspath(args.build_dir)
    for f in ("bin/plaitrun", "lib/libplait.so"):
        if not os.path.exists(os.path.join(args.build_dir, f)):
            print("soak: %s is missing: not a built plait tree" % os.path.join(args.build_dir, f))
            return 2
    st, skips = suites(args)
    tr, tskips = transports(args)
    skips += tskips
    jobs = plan(args, st, tr)
    if args.bounded:
        skips.append((BOUNDED_LEAVES, "--bounded (ctest's soak_bounded); ci/soak runs them"))
    for what, why in skips:
        print("soak: SKIPPED %s: %s" % (what, why), flush=True)
    if args.list:
        for j in jobs:
            print("%s %s %s np%d round %d (bound %.0f s)" % (j[0], os.path.relpath(j[2], ROOT), j[5],
                                                              j[7], j[8], bound_s(args, j[0], j[2], j[7])))
        return 0
    if not jobs:
        print("soak: nothing to run")
        return 2
    print("soak: %d jobs (%d rounds; transports %s; ranks %s; suites %s); load %d busy loops; "
          "PLAIT_STALL_WARN_S=10, no PLAIT_STALL_ABORT_S; watchdog dumps with %s; logs in %s"
          % (len(jobs), args.rounds, ",".join(t for t, _ in tr), args.ranks,
             ",".join(s[0] for s in st), args.load, args.pyspy or "gdb", args.out), flush=True)
    signal.signal(signal.SIGTERM, _stop)
    env = base_env(args)
    loads = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    done = []
    t0 = time.monotonic()
    try:
        for job in jobs:
            rec = run_job(args, env, job, args.out)
            done.append(rec)
            report_job(rec)
    except KeyboardInterrupt:
        print("soak: interrupted after %d of %d jobs" % (len(done), len(jobs)))
        if "job" in CURRENT:
            watchdog.kill_all(*CURRENT["job"])
        raise
    finally:
        for p in loads:
            p.kill()
            p.wait()
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump([{k: v for k, v in r.items() if k != "dump"} for r in done], f, indent=1)
    print()
    print("== soak on %s (%d cores), %.0f s, load average %s" % (
        os.uname().nodename, os.cpu_count(), time.monotonic() - t0,
        open("/proc/loadavg").read().split()[:3]))
    print(results.table(done, skips))
    bad = [r for r in done if r["verdict"] != "ok"]
    for r in bad:
        print("soak: %s: %s %s np%d round %d" % (r["verdict"].upper(), r["file"], r["transport"],
                                                 r["np"], r["round"]))
    print("soak: %d passed, %d failed (jobs; %d skipped suites or transports, see above)"
          % (len(done) - len(bad), len(bad), len(skips)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
