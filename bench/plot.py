#!/usr/bin/python3
"""Plot plait-bench results (JSON lines) as PNG files.

Usage: bench/plot.py RESULTS.jsonl [MORE.jsonl ...] --out-dir DIR

Writes, for the record kinds present in the input:

  fusion-threshold.png  time per step vs PLAIT_FUSION_THRESHOLD, one line per
                        gradient mix, one panel per cycle time    ("fusion")
  bandwidth.png         algorithm and bus bandwidth vs message size per
                        transport, memcpy as the ceiling          ("collective",
                                                                   "memcpy")
  breakdown.png         step time split into negotiation, copy in, transport,
                        copy out and other, per setting           ("fusion")

and prints the path of each file written. Records of other kinds are ignored.
A malformed line stops the script with its file, line number and what is
wrong, before anything is written. Runs with Debian's python3-matplotlib.
"""

import argparse
import collections
import json
import math
import os
import sys

PROG = "plot.py"

# Fields each plotted kind must carry, and what they must be.
NUM, POS, STR, INT = "number", "positive number", "string", "integer"
SCHEMA = {
    "collective": {
        "collective": STR, "transport": STR, "ranks": INT, "bytes": INT,
        "dtype": STR, "time_s_median": POS, "time_s_p10": POS,
        "time_s_p90": POS, "algbw_GBps": NUM, "busbw_GBps": NUM,
    },
    "memcpy": {"bytes": INT, "GBps": POS},
    "fusion": {
        "mix": STR, "transport": STR, "ranks": INT, "threshold_bytes": INT,
        "cycle_time_ms": NUM, "step_s_median": POS, "step_s_p10": POS,
        "step_s_p90": POS, "negotiate_s": NUM, "copy_in_s": NUM,
        "transport_s": NUM, "copy_out_s": NUM,
    },
}

PHASES = [("negotiate_s", "negotiation", "#4c72b0"),
          ("copy_in_s", "copy in", "#dd8452"),
          ("transport_s", "transport", "#55a868"),
          ("copy_out_s", "copy out", "#c44e52"),
          (None, "other", "#b0b0b0")]


class InputError(Exception):
    pass


def check_field(where, kind, rec, field, want):
    if field not in rec:
        raise InputError("%s: %s record has no field '%s'" % (where, kind, field))
    v = rec[field]
    if want == STR:
        if not isinstance(v, str) or not v:
            raise InputError("%s: %s field '%s' must be a non-empty string, "
                             "not %s" % (where, kind, field, json.dumps(v)))
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or \
            not math.isfinite(v):
        raise InputError("%s: %s field '%s' must be a number, not %s" % (
            where, kind, field, json.dumps(v)))
    if want == INT and (v != int(v) or v < 0):
        raise InputError("%s: %s field '%s' must be a whole number >= 0, "
                         "not %s" % (where, kind, field, json.dumps(v)))
    if want == POS and v <= 0:
        raise InputError("%s: %s field '%s' must be > 0, not %s" % (
            where, kind, field, json.dumps(v)))
    if want == NUM and v < 0:
        raise InputError("%s: %s field '%s' must be >= 0, not %s" % (
            where, kind, field, json.dumps(v)))


def load(paths):
    """{kind: [record]} for the kinds in SCHEMA; raises InputError."""
    out = collections.defaultdict(list)
    ignored = collections.Counter()
    for path in paths:
        try:
            f = open(path, encoding="utf-8")
        except OSError as e:
            raise InputError("cannot read %s: %s" % (path, e.strerror))
        with f:
            for n, line in enumerate(f, 1):
                where = "%s:%d" % (path, n)
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    raise InputError("%s: not valid JSON (%s)" % (where, e))
                if not isinstance(rec, dict):
                    raise InputError("%s: expected a JSON object, got %s" % (
                        where, type(rec).__name__))
                kind = rec.get("kind")
                if not isinstance(kind, str):
                    raise InputError("%s: record has no string field 'kind'"
                                     % where)
                if kind not in SCHEMA:
                    ignored[kind] += 1
                    continue
                for field, want in SCHEMA[kind].items():
                    check_field(where, kind, rec, field, want)
                if kind == "collective" and rec["bytes"] == 0:
                    raise InputError("%s: collective field 'bytes' must be > 0"
                                     % where)
                rec["_where"] = where
                out[kind].append(rec)
    for kind, n in sorted(ignored.items()):
        print("%s: ignored %d record(s) of kind '%s'" % (PROG, n, kind),
              file=sys.stderr)
    return out


# --- formatting helpers -----------------------------------------------------

def fmt_bytes(n):
    n = int(n)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            v = n / size
            return ("%d %s" if v == int(v) else "%.3g %s") % (v, unit)
    return "%d B" % n


def fmt_ms(ms):
    return ("%g" % ms) + " ms"


def varying(records, *fields):
    """The fields among `fields` that take more than one value."""
    return [f for f in fields if len({r[f] for r in records}) > 1]


def label_of(rec, fields):
    parts = []
    for f in fields:
        v = rec[f]
        parts.append("%d ranks" % v if f == "ranks" else str(v))
    return ", ".join(parts)


def common_title(records, fields):
    """'gloo, 2 ranks' for the fields that are the same in every record."""
    parts = []
    for f in fields:
        vals = {r[f] for r in records}
        if len(vals) == 1:
            v = vals.pop()
            parts.append("%d ranks" % v if f == "ranks" else str(v))
    return ", ".join(parts)


def dedup(points, key, what):
    """Keep the last record per key; say so when one is replaced."""
    seen = {}
    for r in points:
        k = key(r)
        if k in seen:
            print("%s: %s: repeats %s of %s; using the later one" % (
                PROG, r["_where"], what, seen[k]["_where"]), file=sys.stderr)
        seen[k] = r
    return list(seen.values())


def panel_grid(plt, n, width, height, max_cols=3):
    cols = min(n, max_cols)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows),
                             squeeze=False, layout="constrained")
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


# --- (a) step time vs fusion threshold --------------------------------------

def plot_threshold(plt, recs, path):
    from matplotlib import ticker
    series_fields = ["mix"] + varying(recs, "transport", "ranks")
    cycles = sorted({r["cycle_time_ms"] for r in recs})
    nonzero = sorted({r["threshold_bytes"] for r in recs if r["threshold_bytes"]})
    # Threshold 0 (fusion off) cannot sit on a log axis: draw it 16x
    # left of the smallest threshold, labelled "off".
    x_off = (nonzero[0] / 16) if nonzero else 1.0
    spread = [r["step_s_median"] for r in recs]
    log_y = max(spread) / min(spread) > 20

    fig, axes = panel_grid(plt, len(cycles), 6.4, 4.6)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    series_keys = sorted({tuple(r[f] for f in series_fields) for r in recs})
    color_of = {k: colors[i % len(colors)] for i, k in enumerate(series_keys)}
    handles = {}      # series -> a line, for one legend over all panels
    for ax, cyc in zip(axes, cycles):
        for key in series_keys:
            pts = sorted((r for r in recs if r["cycle_time_ms"] == cyc and
                          tuple(r[f] for f in series_fields) == key),
                         key=lambda r: r["threshold_bytes"])
            if not pts:
                continue
            x = [r["threshold_bytes"] or x_off for r in pts]
            med = [r["step_s_median"] * 1e3 for r in pts]
            lo = [r["step_s_p10"] * 1e3 for r in pts]
            hi = [r["step_s_p90"] * 1e3 for r in pts]
            c = color_of[key]
            # "off" is not on the threshold scale: an open marker, joined to
            # the rest by a dotted line.
            k = 1 if pts[0]["threshold_bytes"] == 0 else 0
            if k:
                ax.plot(x[:2], med[:2], "o:", color=c, ms=5, mfc="white")
            handles[key] = ax.plot(x[k:] or x, med[k:] or med, "o-", color=c, ms=4,
                                   label=label_of(pts[0], series_fields))[0]
            ax.fill_between(x, lo, hi, color=c, alpha=0.15, lw=0)
        ax.set_xscale("log", base=2)
        if log_y:
            ax.set_yscale("log")
        ticks = ([x_off] if any(r["threshold_bytes"] == 0 for r in recs) else []) \
            + nonzero
        if len(ticks) > 8:     # keep the labels readable
            step = math.ceil(len(ticks) / 8)
            ticks = ticks[:1] + ticks[1::step]
        ax.xaxis.set_major_locator(ticker.FixedLocator(ticks))
        ax.xaxis.set_minor_locator(ticker.NullLocator())
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(
            lambda v, _: "off" if v == x_off and v not in nonzero else fmt_bytes(v)))
        ax.tick_params(axis="x", labelrotation=45)
        ax.set_xlabel("fusion threshold (bytes, log scale)")
        ax.set_ylabel("time per step (ms%s)" % (", log scale" if log_y else ""))
        ax.set_title("cycle time %s" % fmt_ms(cyc))
        ax.grid(True, which="both", alpha=0.3)
    # One legend for all panels (the colours are the same), outside the data.
    axes[-1].legend(handles=[handles[k] for k in series_keys if k in handles],
                    fontsize="small", title="median; band: p10-p90;\n"
                    "open marker: fusion off", title_fontsize="small",
                    loc="upper left", bbox_to_anchor=(1.02, 1.0))
    ctx = common_title(recs, ["transport", "ranks"])
    fig.suptitle("Time per step vs fusion threshold" + (" (%s)" % ctx if ctx else ""))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- (b) bandwidth vs message size ------------------------------------------

def plot_bandwidth(plt, recs, memcpy, path):
    from matplotlib import ticker
    collectives = sorted({r["collective"] for r in recs})
    fig, axes = panel_grid(plt, len(collectives), 7.2, 5.0)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # The ceiling per size: a one-thread memcpy of that many bytes (caches
    # make small copies far faster than memory, so one line would mislead).
    ceiling = sorted(dedup(list(memcpy), lambda m: m["bytes"], "the memcpy size"),
                     key=lambda m: m["bytes"]) if memcpy else None
    for ax, coll in zip(axes, collectives):
        these = [r for r in recs if r["collective"] == coll]
        base = ["transport"] + varying(these, "ranks", "dtype")
        # Split a line by algorithm only where one size was run with several
        # (an automatic choice that changes with size stays one line).
        groups = collections.defaultdict(list)
        for r in these:
            groups[tuple(r[f] for f in base)].append(r)
        series = []
        for key, pts in sorted(groups.items()):
            sizes = [p["bytes"] for p in pts]
            if len(sizes) != len(set(sizes)) and all("algorithm" in p for p in pts):
                for alg in sorted({p["algorithm"] for p in pts}):
                    series.append((label_of(pts[0], base) + ", " + str(alg),
                                   [p for p in pts if p["algorithm"] == alg]))
            else:
                series.append((label_of(pts[0], base), pts))
        for i, (label, pts) in enumerate(series):
            pts = dedup(pts, lambda r: r["bytes"], "the message size")
            pts.sort(key=lambda r: r["bytes"])
            c = colors[i % len(colors)]
            x = [p["bytes"] for p in pts]
            alg = [p["algbw_GBps"] for p in pts]
            bus = [p["busbw_GBps"] for p in pts]
            # p10/p90 of the time, as a band around the algorithm bandwidth.
            lo = [a * p["time_s_median"] / p["time_s_p90"] for a, p in zip(alg, pts)]
            hi = [a * p["time_s_median"] / p["time_s_p10"] for a, p in zip(alg, pts)]
            ax.plot(x, alg, "o-", color=c, ms=4, label=label + ": algbw")
            ax.fill_between(x, lo, hi, color=c, alpha=0.15, lw=0)
            ax.plot(x, bus, "s--", color=c, ms=3, alpha=0.8,
                    label=label + ": busbw")
        if ceiling:
            ax.plot([m["bytes"] for m in ceiling], [m["GBps"] for m in ceiling], ":",
                    color="black", lw=1.4, label="memcpy, one thread (ceiling)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: fmt_bytes(v)))
        ax.tick_params(axis="x", labelrotation=45)
        ax.set_xlabel("message size (bytes, log scale)")
        ax.set_ylabel("bandwidth (GB/s = 1e9 B/s, log scale)")
        ctx = common_title(these, ["ranks", "dtype"])
        ax.set_title("%s%s" % (coll, " (%s)" % ctx if ctx else ""))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("Bandwidth vs message size per transport\n"
                 "solid: algorithm bandwidth (bytes / time), dashed: bus "
                 "bandwidth; band: p10-p90 of the time", fontsize="medium")
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- (c) time breakdown ------------------------------------------------------

def plot_breakdown(plt, recs, path):
    panel_fields = ["mix"] + varying(recs, "transport", "ranks")
    panels = sorted({tuple(r[f] for f in panel_fields) for r in recs})
    show_cycle = len({r["cycle_time_ms"] for r in recs}) > 1
    most = max(sum(1 for r in recs if tuple(r[f] for f in panel_fields) == p)
               for p in panels)
    fig, axes = panel_grid(plt, len(panels), max(4.8, 0.62 * most + 2.0), 4.2,
                           max_cols=1 if most > 6 else 3)
    over = []
    for ax, key in zip(axes, panels):
        pts = sorted((r for r in recs if tuple(r[f] for f in panel_fields) == key),
                     key=lambda r: (r["cycle_time_ms"], r["threshold_bytes"]))
        labels = []
        for r in pts:
            t = "off" if r["threshold_bytes"] == 0 else fmt_bytes(r["threshold_bytes"])
            labels.append(t + ("\n" + fmt_ms(r["cycle_time_ms"]) if show_cycle else ""))
        # A gap between the groups of bars for each cycle time.
        xs, x, prev = [], 0.0, None
        for r in pts:
            if prev is not None and r["cycle_time_ms"] != prev:
                x += 0.6
            xs.append(x)
            x, prev = x + 1, r["cycle_time_ms"]
        bottom = [0.0] * len(pts)
        for field, name, color in PHASES:
            if field is None:
                vals = []
                for r in pts:
                    rest = r["step_s_median"] - sum(r[f] for f, _, _ in PHASES if f)
                    if rest < 0:
                        over.append(r["_where"])
                    vals.append(max(rest, 0.0) * 1e3)
            else:
                vals = [r[field] * 1e3 for r in pts]
            ax.bar(xs, vals, bottom=bottom, color=color, label=name, width=0.75)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, rotation=45 if not show_cycle else 0,
                           fontsize="small")
        ax.set_xlabel("fusion threshold" + (" / cycle time" if show_cycle else ""))
        ax.set_ylabel("time per step (ms)")
        ax.set_title(label_of(pts[0], panel_fields))
        ax.grid(True, axis="y", alpha=0.3)
        if ax is axes[0]:
            ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if over:
        print("%s: the phases add up to more than the median step time at %s; "
              "'other' drawn as 0 there" % (PROG, ", ".join(over)), file=sys.stderr)
    ctx = common_title(recs, ["transport", "ranks"])
    if not show_cycle:
        ctx = ", ".join(x for x in (ctx, "cycle time " + fmt_ms(recs[0]["cycle_time_ms"])) if x)
    fig.suptitle("Where a step's time goes" + (" (%s)" % ctx if ctx else "") +
                 "\nother = median step time - the four phases",
                 fontsize="medium")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0],
        epilog="Plots: fusion-threshold.png, bandwidth.png, breakdown.png.")
    ap.add_argument("results", nargs="+", help="JSON-lines file(s) from plait-bench")
    ap.add_argument("--out-dir", required=True, help="directory for the PNG files")
    args = ap.parse_args(argv)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print("%s: matplotlib is not importable by %s (%s); install Debian's "
              "python3-matplotlib (apt-get install python3-matplotlib) and run "
              "this script with /usr/bin/python3" % (PROG, sys.executable, e),
              file=sys.stderr)
        return 2

    try:
        data = load(args.results)
    except InputError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 2

    data["fusion"] = dedup(
        data["fusion"], lambda r: (r["mix"], r["transport"], r["ranks"],
                                   r["cycle_time_ms"], r["threshold_bytes"]),
        "the setting")
    jobs = []
    if data["fusion"]:
        jobs.append(("fusion-threshold.png",
                     lambda p: plot_threshold(plt, data["fusion"], p)))
    else:
        print("%s: no fusion records; fusion-threshold.png and breakdown.png "
              "not written" % PROG, file=sys.stderr)
    if data["collective"]:
        jobs.append(("bandwidth.png",
                     lambda p: plot_bandwidth(plt, data["collective"],
                                              data["memcpy"], p)))
    else:
        print("%s: no collective records; bandwidth.png not written" % PROG,
              file=sys.stderr)
    if data["fusion"]:
        jobs.append(("breakdown.png",
                     lambda p: plot_breakdown(plt, data["fusion"], p)))
    if not jobs:
        print("%s: nothing to plot: no fusion or collective records in %s" % (
            PROG, " ".join(args.results)), file=sys.stderr)
        return 2

    os.makedirs(args.out_dir, exist_ok=True)
    for name, draw in jobs:
        path = os.path.join(args.out_dir, name)
        draw(path)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
