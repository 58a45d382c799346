#!/usr/bin/env python3
"""Elastic training end to end, on one machine: plaitrun's elastic driver
(--min-np/--max-np/--host-discovery-script) runs examples/elastic_torch.py
on the "hosts" 127.0.0.1, 127.0.0.2 and 127.0.0.3, and each scenario hurts
the job while it trains (docs/elastic.md, "What is tested"):

  kill9            kill -9 of rank 1 mid-epoch: the others go on (3 -> 2 workers)
  kill9-rank0      the same for rank 0
  sigstop          SIGSTOP of rank 1 (a silent worker): found, killed, the others go on
  host-killed      every worker of one host (2 of 4) killed: the other host goes on
  host-added       a host added by the discovery script joins (2 -> 3 workers)
  join-stopped     the worker of an added host is stopped (SIGSTOP) as soon as the job with it
                   formed: the state broadcast does not stall, the job re-forms without it
  host-removed     a host removed from the discovery script leaves (3 -> 2 workers)
  tree             the control-plane tree (PLAIT_CONTROL_FANOUT=2) at 5 workers: a relaying
                   rank killed, the job re-forms as a tree of 4 and trains on
  below-min-rejoin Horovod issue 3494's schedule: a host leaves, the survivor is below
                   --min-np and waits; a new host comes; a job forms again and trains
  reset-limit      --reset-limit 1 and two failures: the job ends non-zero, naming the limit
  discovery-fail-start  a discovery script that fails at start: the job fails, saying why
  discovery-fail-mid    a discovery script that fails while training: one warning, the job goes on
  discovery-fail-long   it keeps failing past --elastic-timeout: the job ends non-zero, naming it
  horovod-torch    Horovod's elastic synthetic benchmark in shape (tests/faults/elastic/horovod/),
                   import changed: a worker killed, the benchmark ends on the others
  keras-kill       examples/elastic_keras.py (--tf-python): a worker killed, model.fit goes on
  horovod-keras    Horovod's elastic Keras MNIST example in shape (generated images): the same

Every training scenario ends with plaitrun's status 0, every rank holding the
same bytes, and those equal (within float tolerance) to a run without plait
over the same samples (elastic_torch.py --reference). Where a worker was lost
or a host came or went, the recovery is printed: signal -> the driver's next
"epoch N formed" line -> rank 0 training again, with the issue's bounds for
a lost worker (2 x PLAIT_TIMEOUT_S + 2 s after kill -9, PLAIT_TIMEOUT_S + 5 s
after SIGSTOP); a late recovery is reported, never failed (bench/elastic_recovery.sh
measures it over several trials).

    tests/faults/elastic/scenarios.py --build-dir build SCENARIO...   (ctest: elastic_*)
    tests/faults/elastic/scenarios.py --build-dir build --trials 5 --json r.json kill9 sigstop

Exit status: 0 every scenario passed; 1 one failed; 77 skipped (the reason
printed: plaitrun without an elastic driver, plait.torch.elastic refusing, no
torch); 2 bad usage.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elastic_job import (DISCOVERY_FAILS, FORMED, PYTHON, STEP, Failed, Job,  # noqa: E402
                         Skip, compare_params, probe, probe_tf, run_reference)

H1, H2, H3 = "127.0.0.1", "127.0.0.2", "127.0.0.3"
HERE = os.path.dirname(os.path.abspath(__file__))
KERAS_EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))),
                             "examples", "elastic_keras.py")
HOROVOD_TORCH = os.path.join(HERE, "horovod", "pytorch_synthetic_benchmark_elastic.py")
HOROVOD_KERAS = os.path.join(HERE, "horovod", "tensorflow2_keras_mnist_elastic.py")
TRAIN = ["--samples", "384", "--batch-size", "8", "--commit-every", "3", "--step-delay", "0.1"]
END_S = 300  # a job still running this long after its last event has hung


class Context:
    def __init__(self, args):
        self.plaitrun = os.path.join(args.build_dir, "bin", "plaitrun")
        self.timeout_s = args.timeout_s
        self.transport = args.transport
        self.build_dir = args.build_dir
        self.tf_python = args.tf_python
        self.records = []  # recovery records of this run

    def bound(self, kind):
        t = self.timeout_s
        return {"kill": 2 * t + 2, "stop": t + 5}.get(kind)


def recovery(ctx, job, scenario, kind, t_event, since, want_size=None):
    """Waits for the driver's next formed epoch after `since` (of want_size
    workers if given) and rank 0's next step; prints and keeps the times."""
    i = since
    while True:
        i, t_formed, m = job.wait_line(FORMED, 120, i, "a new epoch after the %s" % kind)
        if want_size is None or int(m.group(2)) == want_size:
            break
        i += 1
    _, t_train, _ = job.wait_line(STEP, 120, i, "rank 0 training again after the %s" % kind)
    rec = {"scenario": scenario, "event": kind, "epoch": int(m.group(1)),
           "workers": int(m.group(2)), "to_formed_s": round(t_formed - t_event, 2),
           "to_training_s": round(t_train - t_event, 2), "timeout_s": ctx.timeout_s}
    bound = ctx.bound(kind)
    verdict = ""
    if bound is not None:
        rec["bound_s"] = bound
        verdict = (", within the bound %.0f s" % bound if rec["to_training_s"] <= bound
                   else ", LATER than the bound %.0f s (reported, not failed)" % bound)
    print("recovery: %s: epoch %d formed (%d workers) %.2f s after it, training again after "
          "%.2f s%s" % (kind, rec["epoch"], rec["workers"], rec["to_formed_s"],
                        rec["to_training_s"], verdict), flush=True)
    ctx.records.append(rec)
    return rec


def training(ctx, tmp, scenario, hosts, flags, final_size, action, epochs=4, env=None):
    """Runs the example under the driver with `action(job)` hurting it, then
    checks the end: status 0, the parameters of every rank the reference's."""
    train = ["--epochs", str(epochs)] + TRAIN
    ref = run_reference(tmp, train, 300)
    job = Job(ctx.plaitrun, tmp, hosts, train, flags, ctx.timeout_s, ctx.transport, env=env)
    try:
        job.start()
        action(job)
        rc = job.finish(END_S)
        if rc != 0:
            raise Failed("plaitrun exited %d, expected 0 (training finished)" % rc)
        worst = compare_params(job.out, ref, final_size)
        print("PASS %s: %d ranks hold the same parameters, equal to the reference run's "
              "(largest difference %.3g)" % (scenario, final_size, worst), flush=True)
    finally:
        job.stop()


def fixed3():
    return ["-np", "3", "--min-np", "2", "--max-np", "3"]


def hurt_rank(ctx, scenario, rank, sig, kind):
    def action(job):
        i, _, _ = job.wait_step(1, 2, 300)
        name, pid = job.worker_of_rank(rank)
        print("hurting rank %d: worker %s, pid %d" % (rank, name, pid), flush=True)
        mark = job.mark()
        t = job.signal(pid, sig)
        recovery(ctx, job, scenario, kind, t, mark)
    return action


def s_kill9(ctx, tmp):
    training(ctx, tmp, "kill9", [H1 + ":1", H2 + ":1", H3 + ":1"], fixed3(), 2,
             hurt_rank(ctx, "kill9", 1, signal.SIGKILL, "kill"))


def s_kill9_rank0(ctx, tmp):
    training(ctx, tmp, "kill9-rank0", [H1 + ":1", H2 + ":1", H3 + ":1"], fixed3(), 2,
             hurt_rank(ctx, "kill9-rank0", 0, signal.SIGKILL, "kill"))


def s_sigstop(ctx, tmp):
    training(ctx, tmp, "sigstop", [H1 + ":1", H2 + ":1", H3 + ":1"], fixed3(), 2,
             hurt_rank(ctx, "sigstop", 1, signal.SIGSTOP, "stop"))


def s_host_killed(ctx, tmp):
    def action(job):
        job.wait_step(1, 2, 300)
        victims = job.workers(H2)
        if len(victims) != 2:
            raise Failed("expected 2 workers on %s, saw %s" % (H2, victims))
        mark = job.mark()
        t = [job.signal(pid, signal.SIGKILL) for _, pid in sorted(victims.items())][0]
        recovery(ctx, job, "host-killed", "kill", t, mark)
    training(ctx, tmp, "host-killed", [H1 + ":2", H2 + ":2"],
             ["-np", "4", "--min-np", "2", "--max-np", "4"], 2, action)


TREE = re.compile(r"a tree of fan-out 2 over (\d+) ranks")


def s_tree(ctx, tmp):
    # The control-plane tree (PLAIT_CONTROL_FANOUT=2) through an elastic job.
    # 5 workers: rank 0 sends each list to ranks 1 and 2, rank 1 relays it to
    # 3 and 4. Rank 1, a relaying rank, is killed; the job re-forms with 4
    # workers, a tree again (rank 1 relays to rank 3), and trains to the end.
    # Rank 0's info line says each time that the tree, not the star, carried
    # the lists.
    def action(job):
        i, _, _ = job.wait_step(1, 2, 300)
        _, _, m = job.wait_line(TREE, 10, 0, "rank 0's line on the control tree")
        if int(m.group(1)) != 5:
            raise Failed("the first tree spanned %s ranks, expected 5" % m.group(1))
        name, pid = job.worker_of_rank(1)
        print("killing rank 1, a relaying rank: worker %s, pid %d" % (name, pid), flush=True)
        mark = job.mark()
        t = job.signal(pid, signal.SIGKILL)
        recovery(ctx, job, "tree", "kill", t, mark, want_size=4)
        _, _, m = job.wait_line(TREE, 10, mark, "rank 0's line on the re-formed job's tree")
        if int(m.group(1)) != 4:
            raise Failed("the re-formed job's tree spanned %s ranks, expected 4" % m.group(1))
    training(ctx, tmp, "tree", [H1 + ":2", H2 + ":2", H3 + ":1"],
             ["-np", "5", "--min-np", "2", "--max-np", "5"], 4, action,
             env={"PLAIT_CONTROL_FANOUT": "2", "PLAIT_LOG_LEVEL": "info"})


def add_third_host(job):
    """Once rank 0 trains, 127.0.0.3 joins the discovery script's hosts:
    (the line index then, the time then)."""
    job.wait_step(0, 3, 300)
    mark = job.mark()
    job.set_hosts([H1 + ":1", H2 + ":1", H3 + ":1"])
    t = job.now()
    print("%7.2f >>> %s added to the discovery script's hosts" % (t, H3), flush=True)
    return mark, t


def s_host_added(ctx, tmp):
    def action(job):
        mark, t = add_third_host(job)
        recovery(ctx, job, "host-added", "host added", t, mark, want_size=3)
    training(ctx, tmp, "host-added", [H1 + ":1", H2 + ":1"],
             ["-np", "2", "--min-np", "2", "--max-np", "3"], 3, action, epochs=10)


def s_join_stopped(ctx, tmp):
    # A joining worker that goes silent while the new job forms and syncs
    # (SIGSTOP as soon as the driver formed the job with it): the job must
    # not stall in the state broadcast; it re-forms without it, bounded.
    def action(job):
        i, _ = add_third_host(job)
        while True:
            i, _, m = job.wait_line(FORMED, 300, i, "a job formed with the new worker")
            if int(m.group(2)) == 3:
                break
            i += 1
        new = {n: p for n, p in job.running_workers().items() if n.startswith(H3 + "/")}
        if len(new) != 1:
            raise Failed("expected one worker on %s, found %s" % (H3, new))
        t = job.signal(list(new.values())[0], signal.SIGSTOP)
        recovery(ctx, job, "join-stopped", "stop", t, i + 1, want_size=2)
    training(ctx, tmp, "join-stopped", [H1 + ":1", H2 + ":1"],
             ["-np", "2", "--min-np", "2", "--max-np", "3"], 2, action, epochs=10)


def s_host_removed(ctx, tmp):
    def action(job):
        job.wait_step(1, 2, 300)
        mark = job.mark()
        job.set_hosts([H1 + ":1", H2 + ":1"])
        t = job.now()
        print("%7.2f >>> %s removed from the discovery script's hosts" % (t, H3), flush=True)
        recovery(ctx, job, "host-removed", "host removed", t, mark, want_size=2)
    training(ctx, tmp, "host-removed", [H1 + ":1", H2 + ":1", H3 + ":1"], fixed3(), 2, action)


def s_below_min_rejoin(ctx, tmp):
    # Horovod #3494: n = min-np workers; a host leaves gracefully (removed), the
    # survivor is below min-np and waits, having skipped its state sync; a new
    # host joins, needing the sync. Horovod deadlocks there; plait must train.
    def action(job):
        job.wait_step(1, 2, 300)
        job.set_hosts([H1 + ":1"])
        t = job.now()
        print("%7.2f >>> %s removed: 1 worker left, --min-np 2" % (t, H2), flush=True)
        # the survivor stops training (it must wait for a second worker)
        since = job.mark()
        time.sleep(ctx.timeout_s + 3)
        mark = job.mark()
        below = [l for l in job.output()[since:mark] if FORMED.search(l)
                 and int(FORMED.search(l).group(2)) < 2]
        if below:
            raise Failed("a job formed below --min-np 2: %s" % below[0])
        job.set_hosts([H1 + ":1", H3 + ":1"])
        t = job.now()
        print("%7.2f >>> %s added: 2 workers again" % (t, H3), flush=True)
        recovery(ctx, job, "below-min-rejoin", "host added", t, mark, want_size=2)
        # Horovod's deadlock: the survivor skipped its sync, the new worker
        # waits in it. plait's deadlock detector would end it after
        # PLAIT_STALL_WARN_S, but it must not happen at all.
        stuck = [l for l in job.output()[mark:] if "deadlock" in l]
        if stuck:
            raise Failed("issue 3494's deadlock: %s" % stuck[0])
    training(ctx, tmp, "below-min-rejoin", [H1 + ":1", H2 + ":1"],
             ["-np", "2", "--min-np", "2", "--max-np", "2"], 2, action, epochs=6)


def s_reset_limit(ctx, tmp):
    train = ["--epochs", "20"] + TRAIN
    job = Job(ctx.plaitrun, tmp, [H1 + ":1", H2 + ":1", H3 + ":1"], train,
              ["-np", "3", "--min-np", "1", "--max-np", "3", "--reset-limit", "1"],
              ctx.timeout_s, ctx.transport)
    try:
        job.start()
        job.wait_step(1, 2, 300)
        for n in (1, 2):
            name, pid = job.worker_of_rank(1)
            mark = job.mark()
            job.signal(pid, signal.SIGKILL)
            if n == 2:
                break
            try:  # the first reset may already be past the limit
                i, _, _ = job.wait_line(FORMED, 120, mark, "a new epoch")
                job.wait_line(STEP, 120, i, "training again")
            except Failed:
                if job.proc.poll() is None:
                    raise
                break
        rc = job.finish(END_S)
        if rc == 0:
            raise Failed("plaitrun exited 0 after resets past --reset-limit 1")
        said = [l for l in job.output() if "reset limit" in l.lower() or "--reset-limit" in l]
        if not said:
            raise Failed("plaitrun exited %d but no line names the reset limit" % rc)
        print("PASS reset-limit: plaitrun exited %d: %s" % (rc, said[0]), flush=True)
    finally:
        job.stop()


def s_discovery_fail_start(ctx, tmp):
    job = Job(ctx.plaitrun, tmp, [H1 + ":1", H2 + ":1"], ["--epochs", "1"] + TRAIN,
              ["-np", "2", "--min-np", "2", "--max-np", "2"], ctx.timeout_s, ctx.transport)
    job.fail_discovery(True)
    try:
        job.start()
        rc = job.finish(120)
        if rc == 0:
            raise Failed("plaitrun exited 0 although its discovery script failed at start")
        said = [l for l in job.output() if DISCOVERY_FAILS in l]
        if not said:
            raise Failed("plaitrun exited %d without the script's stderr line '%s'"
                         % (rc, DISCOVERY_FAILS))
        if any(WORKER_LINE in l for l in job.output()):
            raise Failed("workers were started although discovery failed")
        print("PASS discovery-fail-start: plaitrun exited %d: %s" % (rc, said[0]), flush=True)
    finally:
        job.stop()


WORKER_LINE = "elastic worker "


def s_discovery_fail_mid(ctx, tmp):
    def action(job):
        job.wait_step(0, 3, 300)
        mark = job.mark()
        job.fail_discovery(True)
        print("%7.2f >>> the discovery script fails from now on" % job.now(), flush=True)
        job.wait_line(DISCOVERY_FAILS, 60, mark, "a warning that the discovery script failed")
        time.sleep(5)  # some polls fail; the job trains on
        i, _, _ = job.wait_line(STEP, 60, job.mark(), "training while discovery fails")
        job.fail_discovery(False)
        print("%7.2f >>> the discovery script works again" % job.now(), flush=True)
        warned = [l for l in job.output()[mark:] if DISCOVERY_FAILS in l]
        if len(warned) != 1:
            raise Failed("%d lines about the failing script during one run of failures, "
                         "expected one warning: %s" % (len(warned), warned[:3]))
    training(ctx, tmp, "discovery-fail-mid", [H1 + ":1", H2 + ":1", H3 + ":1"], fixed3(), 3,
             action, epochs=6)


LONG_TIMEOUT_S = 30


def s_discovery_fail_long(ctx, tmp):
    # failing for longer than --elastic-timeout: the job ends, naming the script.
    # The same timeout bounds the workers' first start (three torch imports):
    # 15 s was too short on a 2-core machine loaded by 8 other processes.
    job = Job(ctx.plaitrun, tmp, [H1 + ":1", H2 + ":1", H3 + ":1"], ["--epochs", "40"] + TRAIN,
              fixed3() + ["--elastic-timeout", str(LONG_TIMEOUT_S)], ctx.timeout_s,
              ctx.transport)
    try:
        job.start()
        job.wait_step(0, 3, 300)
        job.fail_discovery(True)
        t = job.now()
        print("%7.2f >>> the discovery script fails from now on" % t, flush=True)
        rc = job.finish(120)
        took = job.now() - t
        if rc == 0:
            raise Failed("plaitrun exited 0 although discovery failed for %.0f s" % took)
        said = [l for l in job.output() if "discover.sh" in l and "warning" not in l]
        if not said:
            raise Failed("plaitrun exited %d without a line naming the script" % rc)
        if took < LONG_TIMEOUT_S:
            raise Failed("plaitrun gave up after %.1f s, before --elastic-timeout %d"
                         % (took, LONG_TIMEOUT_S))
        print("PASS discovery-fail-long: plaitrun exited %d %.1f s after the script began to "
              "fail: %s" % (rc, took, said[-1]), flush=True)
    finally:
        job.stop()


def script_kill(ctx, tmp, name, script, python, train, ready, done):
    """`script` (any elastic training script) under the driver on 3 workers;
    once a line matches `ready` the worker of 127.0.0.2 is killed; the job
    must form a new epoch, end with status 0 and print `done` after it."""
    job = Job(ctx.plaitrun, tmp, [H1 + ":1", H2 + ":1", H3 + ":1"], train, fixed3(),
              ctx.timeout_s, ctx.transport, script, python)
    try:
        job.start()
        job.wait_line(ready, 600, 0, "the training under way")
        victims = {n: p for n, p in job.running_workers().items() if n.startswith(H2 + "/")}
        if len(victims) != 1:
            raise Failed("expected one worker on %s, found %s" % (H2, victims))
        mark = job.mark()
        t = job.signal(list(victims.values())[0], signal.SIGKILL)
        i, t_formed, _ = job.wait_line(FORMED, 120, mark, "a new epoch after the kill")
        print("recovery: kill: epoch formed %.2f s after it" % (t_formed - t), flush=True)
        rc = job.finish(END_S)
        if rc != 0:
            raise Failed("plaitrun exited %d, expected 0 (training finished)" % rc)
        job.wait_line(done, 5, i, "the end of training on the 2 workers left")
        print("PASS %s: training went on after a kill and ended on 2 workers" % name, flush=True)
    finally:
        job.stop()


def s_horovod_torch(ctx, tmp):
    # Horovod's elastic synthetic benchmark in shape (its calls, plait's import)
    script_kill(ctx, tmp, "horovod-torch", HOROVOD_TORCH, PYTHON,
                ["--num-iters", "20", "--num-batches-per-iter", "10", "--num-warmup-batches", "3",
                 "--batch-size", "64"], r"^\[0\]: Iter #2:", r"Total img/sec on 2 CPU")


def s_keras_kill(ctx, tmp):
    probe_tf(ctx.tf_python, ctx.build_dir)
    script_kill(ctx, tmp, "keras-kill", KERAS_EXAMPLE, ctx.tf_python,
                ["--epochs", "6", "--steps", "24", "--step-delay", "0.1"], r"^\[0\]: epoch 1:",
                r"the same weights on all 2 ranks")


def s_horovod_keras(ctx, tmp):
    probe_tf(ctx.tf_python, ctx.build_dir)
    script_kill(ctx, tmp, "horovod-keras", HOROVOD_KERAS, ctx.tf_python,
                ["--steps", "60", "--epochs", "6"], r"^\[0\]: Epoch 2/",
                r"trained 6 epochs, the last ones on 2 workers")


SCENARIOS = {
    "kill9": s_kill9, "kill9-rank0": s_kill9_rank0, "sigstop": s_sigstop,
    "host-killed": s_host_killed, "host-added": s_host_added, "join-stopped": s_join_stopped,
    "host-removed": s_host_removed, "tree": s_tree,
    "below-min-rejoin": s_below_min_rejoin, "reset-limit": s_reset_limit,
    "discovery-fail-start": s_discovery_fail_start, "discovery-fail-mid": s_discovery_fail_mid,
    "discovery-fail-long": s_discovery_fail_long, "horovod-torch": s_horovod_torch, "keras-kill": s_keras_kill,
    "horovod-keras": s_horovod_keras,
}


def summary(records):
    """Medians of the recovery times per event kind."""
    kinds = sorted(set(r["event"] for r in records))
    for kind in kinds:
        rs = [r for r in records if r["event"] == kind]
        formed = statistics.median(r["to_formed_s"] for r in rs)
        train = statistics.median(r["to_training_s"] for r in rs)
        line = ("median over %d: %s -> epoch formed %.2f s, -> training again %.2f s"
                % (len(rs), kind, formed, train))
        if "bound_s" in rs[0]:
            line += " (bound %.0f s: %s)" % (rs[0]["bound_s"],
                                             "within" if train <= rs[0]["bound_s"] else "ABOVE")
        print(line, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenarios", nargs="+", help="names, or 'all': " + ", ".join(SCENARIOS))
    ap.add_argument("--build-dir", required=True, help="a build tree with bin/plaitrun")
    ap.add_argument("--timeout-s", type=int, default=5, help="PLAIT_TIMEOUT_S of the workers")
    ap.add_argument("--transport", default="gloo", help="PLAIT_TRANSPORT of the workers")
    ap.add_argument("--tf-python", default="",
                    help="a Python with TensorFlow, for keras-kill and horovod-keras")
    ap.add_argument("--trials", type=int, default=1, help="runs of each scenario")
    ap.add_argument("--json", help="file for the recovery records (one JSON object a line)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folders")
    args = ap.parse_args()
    names = list(SCENARIOS) if args.scenarios == ["all"] else args.scenarios
    bad = [n for n in names if n not in SCENARIOS]
    if bad or args.trials < 1 or args.timeout_s < 1:
        ap.error("unknown scenario(s) %s (known: %s)" % (bad, ", ".join(SCENARIOS)) if bad
                 else "--trials and --timeout-s must be positive")
    ctx = Context(args)
    try:
        probe(ctx.plaitrun, args.build_dir)
    except Skip as e:
        print("SKIP: %s" % e, flush=True)
        return 77
    except Failed as e:
        print("FAIL: %s" % e, flush=True)
        return 1
    failed, skipped = [], []
    for name in names:
        for trial in range(args.trials):
            tmp = tempfile.mkdtemp(prefix="plait-elastic-%s-" % name)
            print("== %s (trial %d of %d, PLAIT_TIMEOUT_S=%d, %s, in %s)"
                  % (name, trial + 1, args.trials, args.timeout_s, args.transport, tmp), flush=True)
            try:
                SCENARIOS[name](ctx, tmp)
            except Skip as e:
                print("SKIP %s: %s" % (name, e), flush=True)
                skipped.append(name)
            except Failed as e:
                print("FAIL %s: %s" % (name, e), flush=True)
                failed.append(name)
            except Exception:  # the harness's own error: the scenario fails, the others run
                traceback.print_exc()
                print("FAIL %s: the harness failed (above)" % name, flush=True)
                failed.append(name)
            finally:
                if not args.keep:
                    shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            for r in ctx.records:
                f.write(json.dumps(r) + "\n")
    if ctx.records:
        summary(ctx.records)
    if failed:
        print("FAILED: %s" % ", ".join(failed), flush=True)
        return 1
    return 77 if skipped and len(skipped) == len(names) * args.trials else 0


if __name__ == "__main__":
    sys.exit(main())
