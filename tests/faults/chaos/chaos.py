#!/usr/bin/env python3
"""Fault injection for plait: kill -9 or SIGSTOP one rank of a running job.

Each trial starts N ranks by hand (PLAIT_RANK, PLAIT_SIZE, PLAIT_RENDEZVOUS,
PLAIT_SECRET set as plaitrun would, but no plaitrun: the survivors decide
for themselves), lets them run the chaos workload (tests/faults/chaos/worker.c or
worker.py: small fused allreduces, 16 MiB allreduces, broadcasts,
allgathers), and at a random moment kills (SIGKILL) or stops (SIGSTOP) a
random rank, rank 0 included. Every survivor must then fail its operation
with PLAIT_ERR_PEER_LOST naming exactly the victim, within PLAIT_TIMEOUT_S
plus a stated margin, shut down and exit.

One JSON line per trial (stdout, and --json FILE), then a summary per
transport. The seed is printed; --seed replays the same trials.

    tests/faults/chaos/chaos.py --build-dir build/dev 40          # usually via ci/chaos
    tests/faults/chaos/chaos.py --build-dir build/dev --bounded   # what ctest runs

Exit status: 0 when no trial hung, crashed or blamed wrongly (and, with
--fail-late, none was late; with --fail-no-start, every trial started;
--bounded sets both); 1 otherwise; 2 bad usage or nothing could run.
"""
import argparse
import glob
import json
import os
import random
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
import ranks as harness  # noqa: E402  (tests/harness/ranks.py)
import hosts_matrix  # noqa: E402  (the across-hosts matrix: --hosts)

TRANSPORTS = {
    "gloo": {"PLAIT_TRANSPORT": "gloo"},
    "ofi-shm": {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "shm"},
    "ofi-tcp": {"PLAIT_TRANSPORT": "ofi", "FI_PROVIDER": "tcp;ofi_rxm"},
}
FAULTS = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP}
BLAME = re.compile(r"\branks? (\d+(?:, \d+)*(?:, \.\.\.)?) (?:was|were) lost")
LIVE = set()  # every process this harness started and has not reaped


def blamed_ranks(text):
    """The ranks an error names as lost: its first "rank N was lost" or
    "ranks N, M were lost" (the verdict, before the transport's own words)."""
    m = BLAME.search(text or "")
    if not m:
        return []
    return [int(x) for x in m.group(1).split(", ") if x.isdigit()]


def stop_process(p):
    """Ends a process this harness started (a stopped one too) and reaps it."""
    if p.poll() is None:
        try:
            p.send_signal(signal.SIGCONT)
            p.kill()
        except ProcessLookupError:
            pass
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    LIVE.discard(p)


def stop_all():
    for p in list(LIVE):
        stop_process(p)


class Load:
    """CPU load: busy loops that compete with the ranks; always stopped."""

    def __init__(self, n):
        self.procs = []
        for _ in range(n):
            p = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                 stdin=subprocess.DEVNULL)
            LIVE.add(p)
            self.procs.append(p)

    def stop(self):
        for p in self.procs:
            stop_process(p)
        self.procs = []


def worker_command(args, lang):
    if lang == "c":
        return [os.path.join(args.build_dir, "tests", "chaos_worker")]
    return [args.python, os.path.join(HERE, "worker.py")]


def rank_env(args, transport, lang, rank, n, port, secret, seed):
    env = harness.clean_env(keep=(), drop=("FI_",))
    env.update(TRANSPORTS[transport])
    env.update(harness.rank_env(rank, n, port, secret))
    env.update({
        "PLAIT_TIMEOUT_S": str(args.timeout),
        "PLAIT_START_TIMEOUT_S": str(args.start_timeout),
        "PLAIT_PLUGIN_PATH": os.path.join(args.build_dir, "lib"),
        "CHAOS_SEED": str(seed), "CHAOS_MAX_S": str(args.max_workload),
    })
    if lang == "python":
        env["PLAIT_LIBRARY"] = os.path.join(args.build_dir, "lib", "libplait.so")
        env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["OMP_NUM_THREADS"] = "1"
    return env


class Rank:
    def __init__(self, rank, proc, errfile):
        self.rank, self.proc, self.errfile = rank, proc, errfile
        self.buf = b""
        self.ready = None     # monotonic time it said ready
        self.init_failed = None
        self.report = None    # the JSON failure line
        self.shutdown = None  # "RESULT seconds"
        self.exit = None      # exit status (negative: killed by that signal)

    def feed(self, data):
        self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            self.line(line.decode("utf-8", "replace").strip())

    def line(self, text):
        if text.startswith("ready "):
            self.ready = float(text.split()[1])
        elif text.startswith("init-failed "):
            self.init_failed = text[len("init-failed "):]
        elif text.startswith("shutdown "):
            self.shutdown = text[len("shutdown "):]
        elif text.startswith("{"):
            try:
                self.report = json.loads(text)
            except ValueError:
                self.report = {"result": "?", "error": "unreadable line: " + text}

    def stderr_tail(self, n=1500):
        try:
            self.errfile.seek(0)
            return self.errfile.read().decode("utf-8", "replace")[-n:]
        except (OSError, ValueError):
            return ""


def pump(sel, ranks, until, done):
    """Reads the ranks' output and notes their exits until done() or the
    monotonic deadline."""
    while True:
        for r in ranks:
            if r.exit is None and r.proc.poll() is not None and r.proc.stdout.closed:
                r.exit = r.proc.returncode
        if done() or time.monotonic() >= until:
            return
        if not sel.get_map():
            time.sleep(0.05)
            continue
        events = sel.select(timeout=max(0.0, min(0.2, until - time.monotonic())))
        for key, _ in events:
            r = key.data
            try:
                data = os.read(key.fd, 65536)
            except OSError:
                data = b""
            if data:
                r.feed(data)
            else:
                sel.unregister(key.fd)
                r.proc.stdout.close()


def run_trial(args, t):
    """One trial, described by t (transport, lang, victim, fault, moment,
    seed); returns the trial's record."""
    n = args.ranks
    port, secret = harness.free_port(), "%032x" % random.getrandbits(128)
    ranks, sel = [], selectors.DefaultSelector()
    rec = dict(t, ranks=n, timeout_s=args.timeout)
    try:
        for r in range(n):
            err = tempfile.TemporaryFile()
            p = subprocess.Popen(worker_command(args, t["lang"]), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=err,
                                 env=rank_env(args, t["transport"], t["lang"], r, n, port,
                                              secret, t["seed"]))
            LIVE.add(p)
            rk = Rank(r, p, err)
            ranks.append(rk)
            sel.register(p.stdout.fileno(), selectors.EVENT_READ, rk)
        start_deadline = time.monotonic() + args.start_timeout + 30
        pump(sel, ranks, start_deadline, lambda: all(
            rk.ready or rk.init_failed or rk.exit is not None for rk in ranks))
        if not all(rk.ready for rk in ranks):
            rec["outcome"] = "no-start"
            rec["why"] = "; ".join(
                "rank %d: %s" % (rk.rank, rk.init_failed or (
                    "exited %s" % rk.exit if rk.exit is not None else "not ready") +
                    (" " + rk.stderr_tail(300) if rk.stderr_tail(300) else ""))
                for rk in ranks if not rk.ready)
            return rec
        started = max(rk.ready for rk in ranks)
        # the fault: at a random moment of the workload
        pump(sel, ranks, started + t["moment"], lambda: False)
        victim = ranks[t["victim"]]
        t_fault = time.monotonic()
        victim_state = "running" if victim.proc.poll() is None else "gone"
        if victim_state == "running":
            os.kill(victim.proc.pid, FAULTS[t["fault"]])
        rec["victim_state"] = victim_state
        survivors = [rk for rk in ranks if rk is not victim]
        hang_deadline = t_fault + args.hang_after
        pump(sel, ranks, hang_deadline, lambda: all(rk.exit is not None for rk in survivors))
        # a stopped victim is killed only now, so it cannot unblock a hang
        stop_process(victim.proc)
        rec["survivors"] = [judge(args, rk, t, t_fault) for rk in survivors]
        for rk in survivors:
            if rk.exit is None:
                stop_process(rk.proc)
        rec["outcome"] = trial_outcome(rec["survivors"])
        return rec
    finally:
        for rk in ranks:
            stop_process(rk.proc)
            if rk.proc.stdout and not rk.proc.stdout.closed:
                rk.proc.stdout.close()
            rk.errfile.close()
        sel.close()
        left = remove_shm_regions(ranks)
        if left:
            rec["shm_left"] = left


def remove_shm_regions(ranks):
    """libfabric's shm provider names each rank's region /dev/shm/<pid>:N:M
    and a killed rank never removes its own: a later process that gets the
    same pid then cannot start ("fi_enable failed: Device or resource busy").
    Removes those of this trial's ranks and returns their names."""
    left = []
    for rk in ranks:
        for name in glob.glob("/dev/shm/%d:*" % rk.proc.pid):
            try:
                os.unlink(name)
                left.append(name)
            except OSError:
                pass
    return left


def judge(args, rk, t, t_fault):
    """What one survivor did, and what was wrong with it."""
    rep = rk.report or {}
    s = {"rank": rk.rank, "exit": rk.exit, "result": rep.get("result"),
         "error": rep.get("error"), "blamed": blamed_ranks(rep.get("error")),
         "time_to_error": round(rep["t_err"] - t_fault, 3) if "t_err" in rep else None,
         "iters": rep.get("iters"), "shutdown": rk.shutdown}
    problems = []
    if rk.report is None and rk.exit is not None:
        problems.append("crash: %s without reporting an error" % (
            "killed by signal %d" % -rk.exit if rk.exit < 0 else "exit status %d" % rk.exit))
    elif rk.report is None:
        problems.append("hang: no error within %g s of the fault" % args.hang_after)
    elif rk.exit is None:
        problems.append("hang: plait_shutdown did not return within %g s of the fault"
                        % args.hang_after)
    elif rk.exit < 0:
        problems.append("crash: killed by signal %d" % -rk.exit)
    elif rk.exit == 2:
        problems.append("wrong data: a result was wrong")
    elif rk.exit == 3:
        problems.append("hang: the workload ran %g s without an error" % args.max_workload)
    elif rk.exit != 0:
        problems.append("crash: exit status %d" % rk.exit)
    if rk.report is not None:
        if s["result"] != "PLAIT_ERR_PEER_LOST" or s["blamed"] != [t["victim"]]:
            problems.append("blame: %s naming %s, not rank %d" % (
                s["result"], s["blamed"] or "no rank", t["victim"]))
        if s["time_to_error"] is not None and s["time_to_error"] > args.timeout + args.margin:
            problems.append("late: %.1f s > PLAIT_TIMEOUT_S %g + margin %g" % (
                s["time_to_error"], args.timeout, args.margin))
        if s["time_to_error"] is not None and s["time_to_error"] < 0:
            problems.append("early: failed %.2f s before the fault" % -s["time_to_error"])
    if problems:
        s["stderr"] = rk.stderr_tail()
        if args.logs:
            path = os.path.join(args.logs, "trial%d-rank%d.err" % (t["trial"], rk.rank))
            try:
                rk.errfile.seek(0)
                with open(path, "wb") as f:
                    f.write(rk.errfile.read())
                s["stderr_file"] = path
            except OSError:
                pass
    s["problems"] = problems
    return s


def trial_outcome(survivors):
    kinds = set()
    for s in survivors:
        for p in s["problems"]:
            kinds.add(p.split(":")[0])
    for k in ("hang", "crash", "wrong data", "blame", "early", "late"):
        if k in kinds:
            return k
    return "ok"


def plan(args, rng):
    """The trials: per transport, alternating languages; victims, faults
    and moments drawn from rng."""
    trials = []
    for i in range(args.trials):
        for tr in args.transports:
            lang = args.langs[i % len(args.langs)]
            trials.append({"transport": tr, "lang": lang, "fault": rng.choice(args.faults),
                           "victim": rng.randrange(args.ranks),
                           "moment": round(rng.uniform(args.moment_min, args.moment_max), 3),
                           "seed": rng.getrandbits(48)})
    return trials


def summarize(args, records):
    """Per transport and in all: trials, hangs, crashes, correct blame,
    time to error; returns the text and whether the goal was met."""
    lines, bad = [], False
    groups = [(tr, [r for r in records if r["transport"] == tr]) for tr in args.transports]
    groups.append(("all", records))
    head = "%-8s %6s %6s %6s %6s %6s %6s %8s %8s %8s" % (
        "", "trials", "ran", "hangs", "crash", "wrong", "late", "blame%", "max_tte", "bound")
    lines.append(head)
    for name, rs in groups:
        ran = [r for r in rs if r["outcome"] != "no-start"]
        surv = [s for r in ran for s in r["survivors"]]
        count = lambda kind: sum(1 for r in ran if any(
            p.startswith(kind) for s in r["survivors"] for p in s["problems"]))
        right = sum(1 for s in surv if s["result"] == "PLAIT_ERR_PEER_LOST" and
                    s["blamed"] == [r_victim(ran, s)])
        ttes = [s["time_to_error"] for s in surv if s["time_to_error"] is not None]
        lines.append("%-8s %6d %6d %6d %6d %6d %6d %7.1f%% %7.2fs %7.1fs" % (
            name, len(rs), len(ran), count("hang"), count("crash"), count("blame"),
            count("late"), 100.0 * right / len(surv) if surv else 0.0,
            max(ttes) if ttes else 0.0, args.timeout + args.margin))
    failed = [r for r in records if r["outcome"] != "ok"]
    bad = bool(failing(args, records))
    lines.append("time to error: from the signal to the survivor's failed operation; "
                 "bound = PLAIT_TIMEOUT_S %g + margin %g s" % (args.timeout, args.margin))
    for r in failed:
        lines.append("  trial %d %s/%s %s rank %d at %.2f s: %s%s" % (
            r["trial"], r["transport"], r["lang"], r["fault"], r["victim"], r["moment"],
            r["outcome"], "" if r["outcome"] == "no-start" else ": " + " | ".join(
                "rank %d: %s" % (s["rank"], "; ".join(s["problems"]))
                for s in r["survivors"] if s["problems"])))
        if r["outcome"] == "no-start":
            lines[-1] += ": " + r.get("why", "")[:400]
    return "\n".join(lines), bad


def failing(args, records):
    """The trials that fail the run: every hang, crash, wrong data, wrong
    blame or early error; a late error with --fail-late, a trial that never
    started with --fail-no-start (--bounded sets both: in CI a trial that did
    not run or ran late is a failure, not a note); and without them, every
    trial when none started."""
    hard = ("hang", "crash", "wrong data", "blame", "early")
    out = [r for r in records if r["outcome"] in hard
           or (args.fail_late and r["outcome"] == "late")
           or (args.fail_no_start and r["outcome"] == "no-start")]
    if not out and records and all(r["outcome"] == "no-start" for r in records):
        out = list(records)
    return out


def r_victim(ran, s):
    for r in ran:
        if any(x is s for x in r["survivors"]):
            return r["victim"]
    return None


def python_ok(python):
    try:
        return subprocess.run([python, "-c", "import torch"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def parse(argv):
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("trials", nargs="?", type=int, default=3, help="trials per transport")
    a.add_argument("--bounded", action="store_true",
                   help="the CI version: 2 trials per transport, C and Python, "
                        "kill and stop of rank 0 and another; --fail-late and "
                        "--fail-no-start")
    a.add_argument("--build-dir", default=os.path.join(ROOT, "build", "chaos"))
    a.add_argument("--seed", type=int, help="replays a run (printed at the start)")
    a.add_argument("--transports", default="gloo,ofi-shm,ofi-tcp")
    a.add_argument("--langs", default="c,python")
    a.add_argument("--faults", default="kill,stop")
    a.add_argument("--ranks", type=int, default=3)
    a.add_argument("--timeout", type=float, default=3, help="PLAIT_TIMEOUT_S")
    a.add_argument("--margin", type=float, default=5.0,
                   help="seconds allowed past PLAIT_TIMEOUT_S for the time to error "
                        "(default 5: rank 0's blame round of min(PLAIT_TIMEOUT_S, 3) s "
                        "after a failed collective, and 2 s for a loaded machine)")
    a.add_argument("--start-timeout", type=float, default=60, help="PLAIT_START_TIMEOUT_S")
    a.add_argument("--hang-after", type=float, default=None,
                   help="a survivor still running this long after the fault hangs "
                        "(default: 4 x PLAIT_TIMEOUT_S + 30)")
    a.add_argument("--moment-min", type=float, default=0.05)
    a.add_argument("--moment-max", type=float, default=2.0)
    a.add_argument("--max-workload", type=float, default=300)
    a.add_argument("--load", type=int, default=0, help="busy loops to run meanwhile")
    a.add_argument("--python", default="/usr/bin/python3")
    a.add_argument("--only", type=int, action="append",
                   help="run only this trial of the plan (with --seed: replay one trial)")
    a.add_argument("--logs", help="keep the whole stderr of every survivor with a problem "
                   "in this folder (default: a new folder under /tmp, printed)")
    a.add_argument("--json", help="also append the JSON lines to this file")
    a.add_argument("--hosts", type=int, default=0, metavar="ROUNDS",
                   help="then run the across-hosts fault matrix (tests/tools/hosts/matrix.sh: "
                   "every fault x gloo, ofi) ROUNDS rounds; a cell that fails fails the run; "
                   "without root or namespaces every cell is a counted skip (ci/chaos: 1)")
    a.add_argument("--fail-late", action="store_true", help="a late error fails the run too")
    a.add_argument("--fail-no-start", action="store_true",
                   help="a trial whose ranks never all started fails the run too")
    args = a.parse_args(argv)
    if args.bounded:
        args.fail_late = args.fail_no_start = True
    args.transports = [x for x in args.transports.split(",") if x]
    args.langs = [x for x in args.langs.split(",") if x]
    args.faults = [x for x in args.faults.split(",") if x]
    for x in args.transports:
        if x not in TRANSPORTS:
            a.error("unknown transport %r (have %s)" % (x, ", ".join(TRANSPORTS)))
    for x in args.langs:
        if x not in ("c", "python"):
            a.error("unknown language %r (have c, python)" % x)
    for x in args.faults:
        if x not in FAULTS:
            a.error("unknown fault %r (have kill, stop)" % x)
    if args.ranks < 2 or args.trials < 1 or args.timeout <= 0 or args.hosts < 0:
        a.error("--ranks must be at least 2, trials at least 1, --timeout positive, "
                "--hosts not negative")
    if args.hang_after is None:
        args.hang_after = 4 * args.timeout + 30
    return args


def bounded_plan(args, rng):
    """The CI version: per transport a C and a Python trial; over the three
    transports kill and stop each hit rank 0 and another rank."""
    cases = [("c", "kill", 0), ("python", "stop", 1), ("c", "stop", 0),
             ("python", "kill", args.ranks - 1), ("c", "stop", args.ranks - 1),
             ("python", "kill", 0)]
    trials = []
    for i, tr in enumerate(args.transports):
        for lang, fault, victim in cases[2 * (i % 3): 2 * (i % 3) + 2]:
            if lang in args.langs:
                trials.append({"transport": tr, "lang": lang, "fault": fault, "victim": victim,
                               "moment": round(rng.uniform(args.moment_min, args.moment_max), 3),
                               "seed": rng.getrandbits(48)})
    return trials


def available(args):
    """Drops what cannot run here, saying why."""
    lib = os.path.join(args.build_dir, "lib")
    keep = []
    for tr in args.transports:
        so = os.path.join(lib, "libplait-transport-%s.so" % TRANSPORTS[tr]["PLAIT_TRANSPORT"])
        if os.path.exists(so):
            keep.append(tr)
        else:
            print("chaos: SKIPPED transport %s: %s was not built" % (tr, so), flush=True)
    args.transports = keep
    if "c" in args.langs and not os.access(worker_command(args, "c")[0], os.X_OK):
        print("chaos: SKIPPED C trials: %s was not built" % worker_command(args, "c")[0])
        args.langs.remove("c")
    if "python" in args.langs and not python_ok(args.python):
        print("chaos: SKIPPED Python trials: %s cannot import torch" % args.python, flush=True)
        args.langs.remove("python")


def main(argv):
    args = parse(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(32)
    rng = random.Random(seed)
    available(args)
    if not args.transports or not args.langs:
        print("chaos: nothing can run here (see above)")
        return 77 if args.bounded else 2
    trials = bounded_plan(args, rng) if args.bounded else plan(args, rng)
    trials = [dict(trial=i, **t) for i, t in enumerate(trials) if not args.only or i in args.only]
    print("chaos: seed %d (--seed %d replays), %d trials, %d ranks, PLAIT_TIMEOUT_S=%g, "
          "margin %g s, hang after %g s, load %d, transports %s, languages %s" % (
              seed, seed, len(trials), args.ranks, args.timeout, args.margin, args.hang_after,
              args.load, ",".join(args.transports), ",".join(args.langs)), flush=True)
    made_logs = not args.logs
    if made_logs:
        args.logs = tempfile.mkdtemp(prefix="plait-chaos-%d-" % seed)
    os.makedirs(args.logs, exist_ok=True)
    print("chaos: the stderr of ranks with a problem is kept in %s" % args.logs)
    out = open(args.json, "a") if args.json else None
    load = Load(args.load) if args.load else None
    records, cells = [], []
    t0 = time.monotonic()
    try:
        for t in trials:
            rec = run_trial(args, t)
            records.append(rec)
            line = json.dumps(rec, sort_keys=False)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
                out.flush()
        if args.hosts:
            print("chaos: the across-hosts matrix, %d round(s)" % args.hosts, flush=True)
            cells = hosts_matrix.run(args.build_dir, args.hosts, lambda x: print(x, flush=True))
    finally:
        if load:
            load.stop()
        stop_all()
        if out:
            out.close()
        if made_logs and not os.listdir(args.logs):
            os.rmdir(args.logs)  # nothing went wrong: leave nothing behind
    text, bad = summarize(args, records)
    if args.hosts:
        lines, hosts_bad = hosts_matrix.summarize(cells)
        text, bad = text + "\n" + "\n".join(lines), bad or hosts_bad
    print("chaos: summary (seed %d, %.0f s%s)" % (seed, time.monotonic() - t0,
                                                  ", under load %d" % args.load if args.load
                                                  else ""))
    print(text, flush=True)
    print("chaos: %s" % ("FAILED (see the trials above)" if bad else "passed"))
    return 1 if bad else 0


def on_signal(signum, frame):
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        sys.exit(main(sys.argv[1:]))
    finally:
        stop_all()
