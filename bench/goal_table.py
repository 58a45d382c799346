#!/usr/bin/python3
"""Issue 37's goals 1-8 in one table, judged from the results stored in
bench/results/ (nothing is run): one row per goal and rank count, transport
or host layout as the goal states it, with the rule, the measured figures, a
verdict (PASS, MISS, or NOT MEASURED with the reason) and the file the
figures came from. A goal whose input is missing is a NOT MEASURED row,
never dropped.

    bench/goals.py --issue37 [--results DIR] [--markdown FILE] [--check FILE]

  --results DIR   the stored results (default bench/results)
  --markdown FILE write the table there (ci/bench goals: docs/performance/goals.md)
  --check FILE    exit 1 unless FILE holds exactly the table DIR gives now

Inputs (each looked up in DIR) and rules:
  1  latency-vs-mpi.txt (bench/latency_vs_mpi.sh: its table of medians over
     rounds; the "N epoch" rows, the default PLAIT_CACHED_EPOCH=1, where the
     file has them, else the plain rows), else comparison.jsonl (ci/bench
     all): a lone 4 KiB allreduce over ofi/shm within 2x Open MPI's time,
     from C and from plait.torch, at 2 and 3 ranks: plait C against Open
     MPI from C, plait.torch against Open MPI from Python (mpi4py, as the
     issue's own table measured it) where the file has that column, with
     the C figure beside it;
  2  small-vs-mpi.txt (bench/small_vs_mpi.sh; its latest rerun
     small-vs-mpi-N.txt), else comparison.jsonl (ci/bench all), 200 x 64 KiB
     per step: plait.torch at least 1.5x as fast as Open MPI's nonblocking
     allreduces, at 2 and 3 ranks: from Python (mpi4py, the binding beside
     plait.torch, as the issue's table measured it) where the file has it,
     with the C figure beside it; comparison.jsonl has Open MPI from C only;
  3  hier-hosts.jsonl (bench/hosts/hier.sh's summaries): hierarchical at
     least 1.7x the flat ring at 1 Gbit/s, 64 MiB and the ResNet-50 mix, on
     2 x 2 and 3 x 2 hosts (a row per transport and placement measured: its
     latest run, saying what the steps within a host ran on); and
     ahead of Open MPI and Horovod on the same hosts (records whose "system"
     is openmpi or horovod, with "what", "hosts" and "time_ms");
  4  auto-vs-explicit.jsonl (ci/bench auto): the default transport within 5%
     of the best explicit one on every workload, at 2 and 3 ranks;
  5  tuning.jsonl and the fusion sweeps fusion-TRANSPORT[-Nranks].jsonl:
     goals.py's table (c), its rules as goals.py states them; a row per rank
     count and transport, PASS when every mix there passes (a mix NOT
     MEASURED is a MISS: goal 5 asks for every row measured);
  6  stack-vs-plugin.jsonl (ci/bench stack): plait C at least 0.95x the
     plugin alone at 64 MiB, at 2 and 3 ranks, per transport;
  7  scale*.jsonl (bench/scale/scale.py): rank 0's negotiation per cached
     operation below 1 ms at 256 ranks, as wall time (negotiate_s) and,
     where the record has it, as rank 0's coordinator-thread CPU time in
     the same intervals (negotiate_cpu_s: a row of its own, the wall time
     beside it), and control bytes per rank per operation constant in N
     from 16 ranks (within 10%), per file, label and transport (a label
     with only a 256-rank point, a rerun, has no bytes row);
  8  frameworks.jsonl (ci/bench frameworks): a step time for each framework
     (torch, tensorflow, mxnet) with plait over gloo and over ofi, with
     Horovod and with the framework's own distribution; records with
     "framework", "system" and "step_s_median" ({"kind": "missing"} records
     with "framework", "system", "reason" name what could not run).
"""

import argparse
import glob
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402  (the same rows, the same medians as goals.py)
import goals  # noqa: E402  (its constants and table (c), called, never copied)

RANKS = (2, 3)
SMALL_TENSORS_X_MPI = 1.5  # goal 2
HIER_X_FLAT = 1.7  # goal 3
NEGOTIATION_MS = 1.0  # goal 7, at SCALE_RANKS
SCALE_RANKS = 256
BYTES_FROM_RANKS = 16  # goal 7's bytes rule: below k+2 ranks a tree is the star (no series)
EPHEMERAL_PORTS = 28232  # goal 7: this VM's ip_local_port_range (performance.md, scale section)
CONSTANT_SLACK = 1.10  # goal 7: "constant in N", within 10%
FRAMEWORKS = ("torch", "tensorflow", "mxnet")
FW_SYSTEMS = ("plait-gloo", "plait-ofi", "horovod", "native")
FW_ALIASES = {"pytorch": "torch", "tf": "tensorflow", "keras": "tensorflow",
              "ddp": "native", "mwms": "native", "kvstore": "native",
              "multiworkermirroredstrategy": "native", "dist_sync": "native"}


class Row:
    def __init__(self, goal, where, rule, measured, verdict, source):
        self.goal, self.where, self.rule = goal, where, rule
        self.measured, self.verdict, self.source = measured, verdict, source

    def cells(self):
        return [str(self.goal), self.where, self.rule, self.measured, self.verdict, self.source]


def judged(ok):
    return "PASS" if ok else "MISS"


def not_measured(why):
    return "NOT MEASURED: " + why


def ms(s):
    return goals.fmt_t(s)


def absent(goal, src, rule, wheres):
    """The rows of a goal whose input file is not stored: NOT MEASURED, saying so."""
    return [Row(goal, w, rule, "-", not_measured("no %s stored" % src), src) for w in wheres]


def per_rank(fmt="%d ranks"):
    return [fmt % n for n in RANKS]


def exists(results, name):
    return os.path.exists(os.path.join(results, name))


def figures_of(results, name):
    """goals.Figures of a stored JSON lines file, or None when it is absent."""
    if not exists(results, name):
        return None
    data, missing = compare.load([os.path.join(results, name)])
    return goals.Figures(data, missing)


# --- goal 1 -----------------------------------------------------------------

LAT_RULE = "<= %gx Open MPI, same run" % goals.LATENCY_GOAL_X_MPI
LAT_RULE_PY = "<= %gx Open MPI from Python (mpi4py), same run" % goals.LATENCY_GOAL_X_MPI


def newest_txt(results, stem):
    """STEM.txt, or its latest rerun STEM-N.txt (the highest N), or None."""
    best, name = -1, None
    for p in glob.glob(os.path.join(results, stem + "*.txt")):
        m = re.fullmatch(re.escape(stem) + r"(?:-(\d+))?\.txt", os.path.basename(p))
        if m and int(m.group(1) or 0) > best:
            best, name = int(m.group(1) or 0), os.path.basename(p)
    return name


def latency_txt(path):
    """{ranks: (plait C s, plait.torch s, Open MPI s, Open MPI from mpi4py s
    or None)} and whether they are the epoch rows, from
    bench/latency_vs_mpi.sh's output: the default's figures, its "N epoch"
    rows (PLAIT_CACHED_EPOCH=1, the default since 2026-12-07) where the file
    has them, else its plain rows (files measured before the epoch existed,
    when they were the default). The mpi4py column (the seventh) is there
    in files measured since 2026-12-07's last session."""
    out = {"": {}, " epoch": {}}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\|\s*(\d+)( epoch)?\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|"
                         r"\s*([\d.]+)\s*\|", line)
            if m:
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                py = float(cells[6]) * 1e-6 if len(cells) > 6 and \
                    re.fullmatch(r"[\d.]+", cells[6]) else None
                out[m.group(2) or ""][int(m.group(1))] = tuple(
                    float(m.group(i)) * 1e-6 for i in (3, 4, 5)) + (py,)
    epoch = bool(out[" epoch"])
    return out[" epoch" if epoch else ""], epoch


def newest_latency_txt(results):
    """latency-vs-mpi.txt, or its latest rerun latency-vs-mpi-N.txt (the
    highest N), the file goal 1 judges."""
    return newest_txt(results, "latency-vs-mpi") or "latency-vs-mpi.txt"


def goal1(results):
    """plait C against Open MPI from C; plait.torch against Open MPI from
    Python (mpi4py, the binding beside it, as issue 37's table measured
    Open MPI) where the file has that column, with the C figure beside it,
    else against Open MPI from C."""
    rows, name = [], newest_latency_txt(results)
    txt, epoch = latency_txt(os.path.join(results, name)) if exists(results, name) else ({}, 0)
    f = figures_of(results, "comparison.jsonl")
    for n in RANKS:
        for i, (flavour, system) in enumerate((("plait C", "plait-ofi-shm"),
                                               ("plait.torch", "plait.torch-ofi-shm"))):
            where = "%d ranks, %s, ofi/shm" % (n, flavour)
            py = None
            if n in txt:
                t, mpi, src = txt[n][i], txt[n][2], name
                py = txt[n][3] if i == 1 else None
            elif f is not None:
                t, mpi = f.get("latency-4K", n, system), f.get("latency-4K", n, "openmpi")
                py = f.get("latency-4K", n, "openmpi-mpi4py") if i == 1 else None
                src = "comparison.jsonl"
            else:
                rows.append(Row(1, where, LAT_RULE, "-", not_measured(
                    "neither latency-vs-mpi.txt nor comparison.jsonl is stored"), name))
                continue
            if t is None or mpi is None:
                why = f.why(system if t is None else "openmpi", "latency-4K", n)
                rows.append(Row(1, where, LAT_RULE, "-", why, src))
                continue
            tail = " (cached epoch)" if src == name and epoch else ""
            if py is not None:
                rows.append(Row(1, where, LAT_RULE_PY, "%s vs Open MPI from Python %s: %.1fx; "
                                "from C %s: %.1fx%s" % (ms(t), ms(py), t / py, ms(mpi), t / mpi,
                                                        tail),
                                judged(t <= goals.LATENCY_GOAL_X_MPI * py), src))
                continue
            rows.append(Row(1, where, LAT_RULE, "%s vs Open MPI %s: %.1fx%s" % (
                ms(t), ms(mpi), t / mpi, tail), judged(t <= goals.LATENCY_GOAL_X_MPI * mpi), src))
    return rows


# --- goal 2 -----------------------------------------------------------------

SMALL_RULE = ">= %gx as fast as Open MPI nonblocking" % SMALL_TENSORS_X_MPI
SMALL_RULE_PY = ">= %gx as fast as Open MPI nonblocking from Python (mpi4py), same run" % \
    SMALL_TENSORS_X_MPI


def small_txt(path):
    """{ranks: (plait.torch s, Open MPI from C s or None, from mpi4py s or
    None)} from bench/small_vs_mpi.sh's table (cells "median (low-high)")."""
    out = {}
    num = lambda c: float(c.split()[0]) * 1e-3 if re.match(r"[\d.]+( |$)", c) else None
    with open(path, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 4 and re.fullmatch(r"\d+", cells[0]) and num(cells[1]):
                out[int(cells[0])] = (num(cells[1]), num(cells[2]), num(cells[3]))
    return out


def small_row(n, where, t, system, c, py, src):
    """Goal 2's row: plait.torch's step t against Open MPI from Python (py)
    where measured, with the C figure (c) beside it, else against C."""
    ref = py if py is not None else c
    text = "%s (%s) vs Open MPI %s%s: %.2fx as fast" % (
        ms(t), system, "from Python " if py is not None else "", ms(ref), ref / t)
    if py is not None and c is not None:
        text += "; from C %s: %.2fx" % (ms(c), c / t)
    return Row(2, where, SMALL_RULE_PY if py is not None else SMALL_RULE, text,
               judged(ref / t >= SMALL_TENSORS_X_MPI), src)


def goal2(results):
    """From the latest small-vs-mpi[-N].txt (bench/small_vs_mpi.sh: plait.torch
    against Open MPI from Python, the binding beside it, with Open MPI from
    C beside it) where stored, else from comparison.jsonl (ci/bench all:
    plait.torch's fastest transport against Open MPI from C)."""
    name = newest_txt(results, "small-vs-mpi")
    if name:
        rows, txt = [], small_txt(os.path.join(results, name))
        for n in RANKS:
            where = "%d ranks, plait.torch, 200 x 64 KiB" % n
            t, c, py = txt.get(n, (None, None, None))
            if t is None or (c is None and py is None):
                rows.append(Row(2, where, SMALL_RULE_PY, "-", not_measured(
                    "%s has no plait.torch and Open MPI figures at %d ranks" % (name, n)), name))
                continue
            rows.append(small_row(n, where, t, "plait.torch-ofi-shm-hvdbench", c, py, name))
        return rows
    rows, src, rule = [], "comparison.jsonl", SMALL_RULE
    f = figures_of(results, src)
    if f is None:
        return absent(2, src, rule, per_rank("%d ranks, plait.torch, 200 x 64 KiB"))
    for n in RANKS:
        where = "%d ranks, plait.torch, 200 x 64 KiB" % n
        t, system = f.best("200x64K", n, goals.is_torch)
        mpi = f.get("200x64K", n, "openmpi-nonblocking")
        py = f.get("200x64K", n, "openmpi-mpi4py-nonblocking")
        if t is None or (mpi is None and py is None):
            why = f.why("plait.torch" if t is None else "openmpi-nonblocking", "200x64K", n)
            rows.append(Row(2, where, rule, "-", why, src))
            continue
        rows.append(small_row(n, where, t, system, mpi, py, src))
    return rows


# --- goal 3 -----------------------------------------------------------------

HIER_WHAT = (("allreduce 64M", "64 MiB"), ("fusion resnet50.txt", "ResNet-50 mix"))


def goal3(results):
    src = "hier-hosts.jsonl"
    rule = ">= %gx the flat ring, 1 Gbit/s" % HIER_X_FLAT
    recs = goals.read_jsonl([os.path.join(results, src)]) if exists(results, src) else None
    rows = []
    for hosts in (2, 3):
        for what, name in HIER_WHAT:
            where = "%d x 2 hosts, %s" % (hosts, name)
            if recs is None:
                rows += absent(3, src, rule, [where])
                continue
            found = [r for r in recs if r.get("bench") == "hier-hosts-summary"
                     and r.get("hosts") == hosts and r.get("what") == what
                     and r.get("link") == "tbf 1gbit"]
            if not found:
                rows.append(Row(3, where, rule, "-", not_measured(
                    "no summary at 1 Gbit/s for it in %s (bench/hosts/hier.sh not run so)" % src),
                    src))
            # the latest run of each transport and placement: the code as it is
            latest = {}
            for r in found:
                k = (r["transport"], r["placement"])
                if k not in latest or r.get("when", "") >= latest[k].get("when", ""):
                    latest[k] = r
            for k in sorted(latest):
                r = latest[k]
                ratio = r["flat_ms"] / r["hierarchical_ms"]
                local = r.get("local", r["transport"])  # what the steps within a host ran on
                local = "" if local == r["transport"] else ", within a host %s" % local
                got = "flat %.1f ms, hierarchical %.1f ms: %.2fx" % (
                    r["flat_ms"], r["hierarchical_ms"], ratio)
                if r.get("auto_ms"):  # the default beside it (hier.sh since 2026-12-07)
                    got += "; auto (the default) %.1f ms: %.2fx, %s" % (
                        r["auto_ms"], r["flat_ms"] / r["auto_ms"], r.get("auto_path", "?"))
                rows.append(Row(3, "%s, %s%s, %s placement" % (where, r["transport"], local,
                                                                r["placement"]), rule, got,
                                judged(ratio >= HIER_X_FLAT), src))
    return rows + hier_peers(recs, src)


def hier_peers(recs, src):
    """Goal 3's second rule: plait hierarchical ahead of Open MPI and Horovod."""
    rule = "hierarchical faster than it, same hosts"
    if recs is None:
        return absent(3, src, rule, ["Open MPI and Horovod"])
    rows = []
    # bench/hosts/hier.sh with PEERS: one summary per run with every system's median
    runs = [r for r in recs if r.get("bench") == "hier-hosts-peers-summary"]
    for peer, name in (("openmpi", "Open MPI"), ("horovod", "Horovod")):
        mine = [r for r in runs if isinstance(r.get(peer + "_ms"), (int, float))]
        for r in sorted(mine, key=lambda r: (r.get("hosts", 0), r.get("what", ""),
                                             r.get("placement", ""))):
            where = "%s, %s x %s hosts, %s, %s, %s placement" % (
                name, r.get("hosts"), r.get("ranks_per_host", 2), r.get("what"),
                r.get("link"), r.get("placement"))
            h, p = r["hierarchical_ms"], r[peer + "_ms"]
            rows.append(Row(3, where, rule, "plait hierarchical %.1f ms vs %s %.1f ms: %.2fx" % (
                h, name, p, p / h), judged(h < p), src))
        if mine:
            continue
        theirs = [r for r in recs if r.get("system") == peer and "time_ms" in r]
        if not theirs:
            rows.append(Row(3, name, rule, "-", not_measured(
                "no %s records in %s (bench/hosts/hier.sh runs plait alone)" % (name, src)), src))
        for r in theirs:
            ours = [s for s in recs if s.get("bench") == "hier-hosts-summary"
                    and s.get("what") == r.get("what") and s.get("hosts") == r.get("hosts")
                    and s.get("link") == r.get("link")
                    and s.get("placement", "block") == r.get("placement", "block")]
            where = "%s, %s x 2 hosts, %s, %s" % (name, r.get("hosts"), r.get("what"),
                                                 r.get("link"))
            if not ours:
                rows.append(Row(3, where, rule, "%s %.1f ms" % (name, r["time_ms"]),
                                not_measured("no plait summary of the same run"), src))
                continue
            h = min(s["hierarchical_ms"] for s in ours)
            rows.append(Row(3, where, rule, "plait %.1f ms vs %s %.1f ms" % (
                h, name, r["time_ms"]), judged(h < r["time_ms"]), src))
    return rows


# --- goals 4 and 6 ----------------------------------------------------------

def goal4(results):
    src, rows = "auto-vs-explicit.jsonl", []
    rule = "default <= %.2fx the best explicit transport, every workload" % goals.DEFAULT_NOISE
    f = figures_of(results, src)
    if f is None:
        return absent(4, src, rule, per_rank())
    for n in RANKS:
        where = "%d ranks" % n
        parts, ok, gaps = [], True, []
        for w, name in goals.DEFAULT_WORKLOADS:
            auto = f.get(w, n, "plait-auto")
            have = [(f.get(w, n, "plait-" + t), t) for t in goals.TRANSPORTS
                    if f.get(w, n, "plait-" + t) is not None]
            if auto is None or not have:
                gaps.append(name)
                continue
            best, bt = min(have)
            twice = goals.same_twice(f, w, n)  # the run's noise, where it timed it
            parts.append("%s %.2fx (%s best%s)" % (name, auto / best, bt, "" if twice is None
                                                   else "; same settings twice %.2fx" % twice))
            ok = ok and auto / best <= goals.DEFAULT_NOISE
        measured = "; ".join(parts) or "-"
        if gaps and ok:  # a workload measured slower is a MISS whatever is missing
            rows.append(Row(4, where, rule, measured, not_measured(
                "no default or explicit figure for " + ", ".join(gaps)), src))
        else:
            rows.append(Row(4, where, rule, measured + "".join(
                "; %s: not measured" % g for g in gaps), judged(ok), src))
    return rows


def goal6(results):
    src, rows = "stack-vs-plugin.jsonl", []
    rule = "plait C >= %.2fx the plugin alone, 64 MiB, same kernels" % goals.WHOLE_VS_PLUGIN
    f = figures_of(results, src)
    if f is None:
        return absent(6, src, rule, per_rank())
    for n in RANKS:
        found = False
        for t in goals.TRANSPORTS:
            plug, c = f.get("allreduce-64M", n, "plugin-" + t), f.get("allreduce-64M", n,
                                                                       "plait-" + t)
            if plug is None and c is None:
                continue
            found, where = True, "%d ranks, %s" % (n, t)
            if plug is None or c is None:
                why = f.why("plugin-" + t if plug is None else "plait-" + t, "allreduce-64M", n)
                rows.append(Row(6, where, rule, "-", why, src))
                continue
            rows.append(Row(6, where, rule, "plait C %s, plugin %s: %.2fx" % (
                ms(c), ms(plug), plug / c), judged(plug / c >= goals.WHOLE_VS_PLUGIN), src))
        if not found:
            rows.append(Row(6, "%d ranks" % n, rule, "-", not_measured(
                "no 64 MiB figures at %d ranks in %s" % (n, src)), src))
    return rows


# --- goal 5 -----------------------------------------------------------------

SWEEP = re.compile(r"fusion-(%s)(-\dranks)?\.jsonl$" % "|".join(goals.TRANSPORTS))


def tuning_verdicts(results):
    """{(ranks, transport): [(mix, verdict cell)]} from goals.py's table (c)
    on the stored tuning records and sweeps."""
    sweeps = sorted(p for p in glob.glob(os.path.join(results, "fusion-*.jsonl"))
                    if SWEEP.search(os.path.basename(p)))
    sweep = [r for r in goals.read_jsonl(sweeps) if r.get("kind") == "fusion"]
    tuning = goals.read_jsonl([os.path.join(results, "tuning.jsonl")])
    lines = goals.tuning_table(sweep, tuning, os.path.abspath(results), list(RANKS))
    head = next((x for x in lines if x.startswith("| ranks |")), None)
    names = [c.strip() for c in (head or "").strip().strip("|").split("|")]
    if not {"ranks", "transport", "mix", "verdict"} <= set(names):
        raise ValueError("goals.py's table (c) has no header with ranks, transport, mix "
                         "and verdict columns")
    out = {}
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != len(names) or not cells[0].isdigit():
            continue
        row = dict(zip(names, cells))
        out.setdefault((int(row["ranks"]), row["transport"]), []).append(
            (row["mix"], row["verdict"].replace("**", "")))
    return out


def goal5(results):
    # `ci/bench tune --docs` stores its run in results/tune/; `ci/bench all --docs` in
    # results/ itself: the tune suite's, where there is one, is the one to judge
    folder = results
    if exists(os.path.join(results, "tune"), "tuning.jsonl"):
        folder = os.path.join(results, "tune")
    src = os.path.relpath(os.path.join(folder, "tuning.jsonl"), results)
    rule = "goals.py (c): every mix measured, converged, within 10% where it counts"
    if not exists(folder, "tuning.jsonl"):
        return absent(5, src, rule, per_rank())
    found, rows = tuning_verdicts(folder), []
    for n in RANKS:
        keys = sorted(k for k in found if k[0] == n)
        if not keys:
            rows.append(Row(5, "%d ranks" % n, rule, "-", not_measured(
                "no sweep or autotune record at %d ranks" % n), src))
        for k in keys:
            groups = {"PASS": [], "MISS": [], "NOT MEASURED": []}
            for mix, cell in found[k]:
                kind = "NOT MEASURED" if "NOT MEASURED" in cell else \
                    "MISS" if "MISS" in cell else "PASS"
                groups[kind].append(mix if kind != "MISS" else "%s (%s)" % (mix, cell))
            measured = "; ".join("%s: %s" % (g, ", ".join(v)) for g, v in groups.items() if v)
            ok = not groups["MISS"] and not groups["NOT MEASURED"]
            rows.append(Row(5, "%d ranks, %s" % k, rule, measured, judged(ok), src))
    return rows


# --- goal 7 -----------------------------------------------------------------

def goal7(results):
    rule_n = "rank 0 negotiation per cached op < %g ms at %d ranks" % (NEGOTIATION_MS,
                                                                     SCALE_RANKS)
    rule_c = "rank 0 negotiation CPU per cached op < %g ms at %d ranks (its coordinator " \
        "thread's CPU clock; the wall time waits for a CPU among %d processes on this VM)" % (
            NEGOTIATION_MS, SCALE_RANKS, SCALE_RANKS)
    rule_b = "control bytes per rank per op constant in N from %d ranks (within 10%%; the most " \
        "any rank sent)" % BYTES_FROM_RANKS
    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(results, "scale*.jsonl")))
    if not files:
        why = not_measured("no scale*.jsonl stored (bench/scale/scale.py)")
        return [Row(7, "%d ranks" % SCALE_RANKS, rule_n, "-", why, "scale.jsonl"),
                Row(7, "16-%d ranks" % SCALE_RANKS, rule_b, "-", why, "scale.jsonl")]
    rows = []
    for src in files:
        groups = {}
        for r in goals.read_jsonl([os.path.join(results, src)]):
            if r.get("kind") == "scale":  # a star and a tree of one run: rows of their own
                key = (r.get("label", "-"), r.get("transport", "-"), r.get("fanout", -1))
                groups.setdefault(key, []).append(r)
        for (label, t, k), recs in sorted(groups.items()):
            # no fanout: the variable was unset, and every such run stored
            # predates the tree's default (fan-out 8 since 2026-12-07): a star
            where = "%s, %s" % (label, t) + (", star (unset, the default then)" if k < 0 else
                                             ", star" if k == 0 else ", fan-out %d" % k)
            at = [r for r in recs if r.get("ranks") == SCALE_RANKS]
            ok = [r for r in at if "negotiate_s" in r]
            if ok:
                neg = ok[-1]["negotiate_s"] * 1e3
                rows.append(Row(7, "%d ranks, %s" % (SCALE_RANKS, where), rule_n,
                                "%.3f ms" % neg, judged(neg < NEGOTIATION_MS), src))
                if "negotiate_cpu_s" in ok[-1]:
                    cpu = ok[-1]["negotiate_cpu_s"] * 1e3
                    rows.append(Row(7, "%d ranks, %s" % (SCALE_RANKS, where), rule_c,
                                    "%.3f ms CPU (wall %.3f ms)" % (cpu, neg),
                                    judged(cpu < NEGOTIATION_MS), src))
            else:
                rows.append(Row(7, "%d ranks, %s" % (SCALE_RANKS, where), rule_n, "-",
                                not_measured(failed_why(at[-1] if at else None)), src))
            sizes = {r.get("ranks") for r in recs}
            if sizes == {SCALE_RANKS} and ok:  # a rerun of the 256-rank point: no series
                continue
            rows.append(constant_bytes_row(recs, where, rule_b, src))
    return rows


def failed_why(rec):
    """Why the SCALE_RANKS point of a series has no figure."""
    if rec is None:
        return "no %d-rank run" % SCALE_RANKS
    err, n = rec.get("error", ""), rec.get("ranks", SCALE_RANKS)
    why = "the %d-rank run failed: %s" % (n, err.split(";")[0][:90])
    if rec.get("transport") == "gloo" and n * (n - 1) > EPHEMERAL_PORTS:
        why += " (Gloo binds a port per pair of ranks: %d x %d = %d on one host, more than " \
            "its %d ephemeral ports; on real hosts each binds its own ranks' pairs)" % (
                n, n - 1, n * (n - 1), EPHEMERAL_PORTS)
    return why.replace("|", "/")


def rank_bytes(r):
    """The control bytes per op of the rank that sent the most, rank 0
    included (a star's rank 0 and a tree's relaying ranks are ranks too):
    the largest of control_bytes_rank0 and control_bytes_rank_max (or the
    median control_bytes_rank in records older than those fields)."""
    got = [r[f] for f in ("control_bytes_rank0", "control_bytes_rank_max") if f in r]
    if "control_bytes_rank_max" not in r and "control_bytes_rank" in r:
        got.append(r["control_bytes_rank"])
    return max(got) if got else None


def constant_bytes_row(recs, where, rule, src):
    by_n = {r["ranks"]: rank_bytes(r) for r in recs
            if rank_bytes(r) is not None and r["ranks"] >= BYTES_FROM_RANKS}
    if len(by_n) < 2:
        return Row(7, where, rule, "-", not_measured("fewer than 2 rank counts measured"), src)
    lo, hi = min(by_n.values()), max(by_n.values())
    ns = sorted(by_n)
    measured = "%g-%g bytes at %d-%d ranks" % (lo, hi, ns[0], ns[-1]) if lo != hi else \
        "%g bytes at %d-%d ranks" % (lo, ns[0], ns[-1])
    return Row(7, "%d-%d ranks, %s" % (ns[0], ns[-1], where), rule, measured,
               judged(lo > 0 and hi / lo <= CONSTANT_SLACK), src)


# --- goal 8 -----------------------------------------------------------------

def step_times(r):
    """A record's step times in seconds: [step_s_median], or the per-step list
    step_s (ci/bench frameworks' "run" records, one per round, whose table
    takes the median over the steps of all rounds); None when it has neither."""
    if isinstance(r.get("step_s_median"), (int, float)):
        return [r["step_s_median"]]
    steps = r.get("step_s")
    if isinstance(steps, list) and steps and all(isinstance(x, (int, float)) for x in steps):
        return steps
    return None


def fw_name(x):
    x = str(x or "").lower()
    return FW_ALIASES.get(x, x)


def fw_system(x):
    x = str(x or "").lower().replace("_", "-").replace(".", "-")
    if x.startswith("plait") and "ofi" in x:
        return "plait-ofi"
    if x.startswith("plait"):
        return "plait-gloo" if "gloo" in x else x
    return FW_ALIASES.get(x, x)


def goal8(results):
    src = "frameworks.jsonl"
    rule = "step time per framework x {plait gloo, plait ofi, Horovod, its own}"
    if not exists(results, src):
        return [Row(8, "2 ranks", rule, "-", not_measured(
            "no frameworks.jsonl: ci/bench frameworks not run"), src)]
    # ci/bench frameworks' run of all three, then runs of one framework
    # (frameworks-<fw>.jsonl) that fill a system the main run could not measure
    files = [src] + sorted(os.path.basename(p) for p in
                           glob.glob(os.path.join(results, "frameworks-*.jsonl")))
    recs = []
    for name in files:
        recs += [dict(r, _file=name) for r in goals.read_jsonl([os.path.join(results, name)])]
    rows = []
    for fw in FRAMEWORKS:
        mine = [r for r in recs if fw_name(r.get("framework")) == fw]
        times = {}
        for r in mine:
            s, t = fw_system(r.get("system")), step_times(r)
            if r.get("kind") != "missing" and t is not None and \
                    times.get(s, (r["_file"], []))[0] == r["_file"]:
                times.setdefault(s, (r["_file"], []))[1].extend(t)
        mine = [r for r in mine if r.get("kind") != "missing" or
                fw_system(r.get("system")) not in times]
        gaps = [s for s in FW_SYSTEMS if s not in times]
        measured = ", ".join("%s %s%s" % (s, ms(statistics.median(times[s][1])),
                                          "" if times[s][0] == src else " (%s)" % times[s][0])
                             for s in FW_SYSTEMS if s in times) or "-"
        if not mine:
            rows.append(Row(8, fw, rule, "-", not_measured("no %s records in %s" % (fw, src)),
                            src))
        else:
            why = [r.get("reason", "") for r in mine if r.get("kind") == "missing"]
            verdict = judged(True) if not gaps else "MISS: no step time for %s%s" % (
                ", ".join(gaps), " (%s)" % why[0][:80] if why else "")
            rows.append(Row(8, fw, rule, measured, verdict.replace("|", "/"), src))
    return rows


# --- the table --------------------------------------------------------------

GOALS = ((goal1, "latency-vs-mpi.txt"), (goal2, "comparison.jsonl"), (goal3, "hier-hosts.jsonl"),
         (goal4, "auto-vs-explicit.jsonl"), (goal5, "tuning.jsonl"),
         (goal6, "stack-vs-plugin.jsonl"), (goal7, "scale.jsonl"), (goal8, "frameworks.jsonl"))


def all_rows(results):
    """Every goal's rows; a stored file a goal cannot read (a record without a
    field its rule needs) is a NOT MEASURED row naming the goal, the file and
    what is wrong, and the other goals are still judged."""
    rows = []
    for i, (g, src) in enumerate(GOALS, 1):
        try:
            rows += g(results)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            rows.append(Row(i, "-", "-", "-", not_measured(
                "goal %d cannot read its records (%s, or the files beside it): %s: %s" % (
                    i, src, type(e).__name__, e)).replace("|", "/"), src))
    return rows


def markdown(rows, link_base, results):
    counts = {v: sum(r.verdict.startswith(v) for r in rows) for v in ("PASS", "MISS",
                                                                     "NOT MEASURED")}
    out = ["# Issue 37's goals, measured", "",
           "<!-- generated by `ci/bench goals` (bench/goal_table.py) from bench/results/; "
           "do not edit: a test (goal_table_fresh) fails when it is stale -->", "",
           "Each row: a goal of issue 37 at one rank count, transport or host layout, its rule, "
           "the figures stored in bench/results/ (medians over interleaved rounds on the "
           "2-core VM; how loaded it was is said where performance.md quotes each file), and "
           "the verdict. A goal without its input is NOT MEASURED with the reason; nothing is "
           "left out. How each figure was measured: [performance.md](../performance.md).", "",
           "Goal 3 is judged per placement: with ranks placed by block (a host's ranks "
           "adjacent, as `plaitrun -H` places them) the flat ring crosses each link with "
           "1.5 N at 2 hosts x 2 ranks, so no hierarchical algorithm can reach 1.7x there; "
           "placed cyclically it crosses with 3 N ([performance.md](../performance.md#"
           "across-hosts-the-hierarchical-allreduce)). Goal 5's rows take table (c)'s verdicts "
           "as `bench/goals.py` gives them; a mix it could not measure is a MISS there. Goals 1 "
           "and 2 hold plait C to Open MPI called from C and plait.torch to Open MPI called "
           "from Python (mpi4py, the binding beside it, as issue 37's own table measured Open "
           "MPI), with the C figure beside it ([performance.md](../performance.md#"
           "open-mpi-from-python-the-binding-beside-plaittorch-goals-1-and-2)).", "",
           "%d PASS, %d MISS, %d NOT MEASURED." % (counts["PASS"], counts["MISS"],
                                                   counts["NOT MEASURED"]), "",
           "| goal | where | rule | measured | verdict | from |", "|---|---|---|---|---|---|"]
    for r in rows:
        c = r.cells()
        c[4] = "**%s**" % c[4] if c[4] in ("PASS", "MISS") else c[4]
        if exists(results, c[5]):  # an absent input is named, not linked
            c[5] = "[%s](%s%s)" % (c[5], link_base, c[5])
        out.append("| " + " | ".join(x.replace("|", "/") for x in c) + " |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(os.path.dirname(HERE), "bench", "results"))
    ap.add_argument("--markdown", help="write the table to this file")
    ap.add_argument("--check", help="exit 1 unless this file holds the table as of now")
    ap.add_argument("--link-base", default="../../bench/results/",
                    help="the links' prefix to the stored files (default: from docs/performance/)")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.results):
        sys.exit("goal_table.py: --results %s is not a folder" % args.results)
    text = markdown(all_rows(args.results), args.link_base, args.results)
    if args.check:
        try:
            with open(args.check, encoding="utf-8") as f:
                old = f.read()
        except OSError as e:
            sys.exit("goal_table.py: %s" % e)
        if old != text:
            print("goal_table.py: %s is stale against %s: run `ci/bench goals` and commit it"
                  % (args.check, args.results), file=sys.stderr)
            return 1
        print("goal_table.py: %s matches %s" % (args.check, args.results))
        return 0
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
