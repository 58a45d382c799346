#!/usr/bin/env python3
"""The layering rule of src/ (docs/design.md, "Layers"), checked.

    api -> engine -> control -> util      (arrows point down only)

A file in one of these four folders may include the public headers
("plait/...") and headers of its own layer or a lower one, written from src/
("util/log.h"). Tools beside them (plaitrun/, bench/) include their own
headers, the public ones and util/ only: they reach the core through the
public ABI; plaitrun/ also includes the headers of plait_base (BASE below, the
frames, messages, authentication and sockets its elastic rendezvous serves,
linked in as a static library: src/CMakeLists.txt).

Inside engine/ (docs/coordinator.md, "The engine's files: a hall and its wings"):

    hall    engine/engine.{c,h}, engine/coordinator.{c,h}: the only files at
            the top of engine/; they may include every wing.
    wings   engine/<wing>/, one concern each. A wing includes its own headers
            and those of the wings below it in WINGS, never another one;
            engine/engine.h (the engine object) is the one hall header a
            wing may include: never coordinator.h. A wing's <name>_internal.h
            is its own: no other file includes it, the hall neither.

        execute   -> negotiate, submit, transport, observe
        tune      -> negotiate, observe
        health    -> negotiate
        negotiate -> submit, transport, observe
        submit    -> observe
        transport, observe -> (no wing)

Layers above the engine (api/) may include any engine header.

Calls point down too: util/, control/ and engine/ never call a function that
api/ defines (PLAIT_API ... name( at a line's start in api/*.c), although
include/plait/plait.h declares it (the engine takes dtype names and sizes
from the inlines of plait/dtypes.h, not from api/types.c). Comments and
strings are not read. Anything else is reported with file:line, and the exit
status is 1.

    check_layers.py SRC_DIR     check a tree (the ctest 'layers')
    check_layers.py --self-test check that the checker catches violations
"""
import os
import re
import sys
import tempfile

LAYERS = {"util": 0, "control": 1, "engine": 2, "api": 3}
TOOLS = ("plaitrun", "bench")
# plait_base's headers, which plaitrun (its elastic rendezvous) may include
BASE = ("control/wire.h", "control/auth.h", "control/net.h", "control/messages.h",
        "control/elastic_wire.h")
# engine/'s hall: the only files at its top, above every wing
HALL = ("engine.c", "engine.h", "coordinator.c", "coordinator.h", "coordinator_epoch.c",
        "coordinator_internal.h")
# engine/'s wings, each with the wings it may include (its own is implied)
WINGS = {
    "submit": ("observe",),  # table, handles, entries, name map: what threads hand in
    "negotiate": ("submit", "transport", "observe"),  # rank 0's agreement and its messages
    "execute": ("negotiate", "submit", "transport", "observe"),  # running a response
    "tune": ("negotiate", "observe"),  # run-time settings and the autotuner
    "health": ("negotiate",),  # heartbeats, and blame when a collective failed
    "transport": (),  # the plugin: loading, choice, defaults, per-set states
    "observe": (),  # the counters of plait_stats and the timeline
}
# the one hall header a wing may include: the engine object
HALL_SEEN = "engine/engine.h"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
API_DEF = re.compile(r'^PLAIT_API\b[^(;]*?\b([A-Za-z_]\w*)\s*\(', re.M)
# comments, string and character literals: blanked, newlines kept
NOT_CODE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def violations(src):
    found = []
    for folder in sorted(os.listdir(src)):
        top = os.path.join(src, folder)
        if not os.path.isdir(top) or (folder not in LAYERS and folder not in TOOLS):
            continue
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith((".c", ".h", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, src)
                if folder == "engine":
                    why = engine_place(rel)
                    if why:
                        found.append("%s: %s" % (rel, why))
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m:
                            why = judge(folder, m.group(1), rel)
                            if why:
                                found.append('%s:%d: #include "%s": %s' % (
                                    rel, lineno, m.group(1), why))
    return found + upward_calls(src)


def upward_calls(src):
    """Calls from util/, control/ or engine/ to a function api/ defines."""
    api = os.path.join(src, "api")
    names = set()
    if os.path.isdir(api):
        for name in sorted(os.listdir(api)):
            if name.endswith(".c"):
                with open(os.path.join(api, name), encoding="utf-8", errors="replace") as f:
                    names.update(API_DEF.findall(f.read()))
    if not names:
        return []
    call = re.compile(r'\b(%s)\s*\(' % "|".join(sorted(names)))
    found = []
    for folder in ("util", "control", "engine"):
        for dirpath, _, files in os.walk(os.path.join(src, folder)):
            for name in sorted(files):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    code = NOT_CODE.sub(lambda m: "\n" * m.group(0).count("\n"), f.read())
                for lineno, line in enumerate(code.split("\n"), 1):
                    for m in call.finditer(line):
                        found.append("%s:%d: calls %s(), a function of api/ (a higher layer)" % (
                            os.path.relpath(path, src), lineno, m.group(1)))
    return found


def engine_place(rel):
    """Why a file of engine/ (rel: from src/) is in the wrong place, or None."""
    parts = rel.split(os.sep)
    if len(parts) == 2:
        if parts[1] in HALL:
            return None
        return "engine/'s hall holds %s only: put it in a wing (%s)" % (
            ", ".join(HALL), ", ".join(sorted(WINGS)))
    if len(parts) == 3 and parts[1] in WINGS:
        return None
    return "engine/ has one level of wings (%s); no other folder" % ", ".join(sorted(WINGS))


def judge_engine(rel, inc):
    """Why a file of engine/ (rel) including inc ("engine/...") breaks the
    wings' rule, or None."""
    parts = rel.split(os.sep)
    wing = parts[1] if len(parts) == 3 else None  # None: the hall
    iparts = inc.split("/")
    if len(iparts) == 2:  # a hall header
        if wing is None or inc == HALL_SEEN:
            return None
        return "a wing (%s/) sees the hall through %s only" % (wing, HALL_SEEN)
    target = iparts[1]
    if len(iparts) != 3 or target not in WINGS:
        return "'engine/%s' is not a wing of the engine (%s)" % (
            target, ", ".join(sorted(WINGS)))
    if iparts[2].endswith("_internal.h") and wing != target:
        return "%s is the %s wing's own: include its interface instead" % (inc, target)
    if wing is None or target == wing or target in WINGS.get(wing, ()):
        return None
    return "the %s wing may not include the %s wing (it may: %s)" % (
        wing, target, ", ".join(WINGS[wing]) or "no other wing")


def judge(folder, inc, rel):
    """Why including inc from the file rel (from src/) of folder breaks the
    rule, or None."""
    while inc.startswith("../"):
        inc = inc[3:]
    if inc.startswith("plait/"):
        return None
    target = inc.split("/", 1)[0] if "/" in inc else None
    if folder in TOOLS:
        if target is None or target == "util" or target == folder:
            return None
        if folder == "plaitrun" and inc in BASE:
            return None
        return "a tool (%s/) reaches the core through the public ABI and util/ only" % folder
    if target is None:
        return "write includes from src/ with their layer folder (e.g. \"util/log.h\")"
    if target not in LAYERS:
        return "'%s' is not a layer (api, engine, control, util)" % target
    if LAYERS[target] > LAYERS[folder]:
        return "%s/ may not include %s/, a higher layer (api -> engine -> control -> util)" % (
            folder, target)
    if folder == "engine" and target == "engine":
        return judge_engine(rel, inc)
    return None


def self_test():
    cases = [
        ("util/a.c", '#include "control/control.h"\n', True),
        ("control/a.c", '#include "engine/engine.h"\n', True),
        ("engine/a.c", '#include "api/current.h"\n', True),
        ("engine/a.h", '#include "table.h"\n', True),
        ("plaitrun/a.c", '#include "engine/engine.h"\n', True),
        ("plaitrun/a.c", '#include "control/control.h"\n', True),
        ("plaitrun/a.c", '#include "control/auth.h"\n#include "control/elastic_wire.h"\n', False),
        ("bench/a.c", '#include "control/auth.h"\n', True),
        ("api/a.c", '#include "engine/engine.h"\n#include "util/log.h"\n'
                    '#include "plait/plait.h"\n', False),
        ("engine/negotiate/b.c", '#include "control/control.h"\n#include "engine/submit/table.h"\n', False),
        # the engine's wings
        ("engine/engine.c", '#include "engine/execute/execute.h"\n#include "engine/tune/a.h"\n'
                            '#include "engine/coordinator.h"\n', False),
        ("engine/extra.c", '#include "util/log.h"\n', True),  # not of the hall
        ("engine/misc/a.c", '#include "util/log.h"\n', True),  # not a wing
        ("engine/execute/x/a.c", '#include "util/log.h"\n', True),  # too deep
        ("engine/execute/a.c", '#include "engine/negotiate/messages.h"\n'
                               '#include "engine/execute/b.h"\n#include "engine/engine.h"\n'
                               '#include "control/control.h"\n', False),
        ("engine/negotiate/a.c", '#include "engine/execute/execute.h"\n', True),  # upward
        ("engine/submit/a.h", '#include "engine/negotiate/messages.h"\n', True),
        ("engine/health/a.c", '#include "engine/coordinator.h"\n', True),  # the hall's own
        ("engine/tune/a.c", '#include "engine/misc/a.h"\n', True),  # no such wing
        ("engine/observe/a.c", '#include "engine/table.h"\n', True),  # the old flat path
        ("api/a.c", '#include "engine/execute/execute.h"\n', False),
        ("engine/coordinator.c", '#include "engine/execute/execute_internal.h"\n', True),
        ("engine/execute/b.c", '#include "engine/execute/execute_internal.h"\n', False),
        ("engine/tune/a.c", '#include "engine/negotiate/x_internal.h"\n', True),

        ("bench/a.c", '#include "../util/half.h"\n#include "bench.h"\n', False),
    ]
    types = ("api/types.c", "PLAIT_API size_t plait_dtype_size(plait_dtype_t dtype) {\n"
             "  return plait_dtype_size_inline(dtype);\n}\n")
    cases += [  # calls up into api/: (files, bad)
        ([types, ("engine/execute/a.c", "size_t b = 2 * plait_dtype_size(t);\n")], True),
        ([types, ("util/a.h", "#define SZ(t) plait_dtype_size (t)\n")], True),
        ([types, ("engine/submit/a.c", "size_t b = plait_dtype_size_inline(t);\n"
                                       "/* not plait_dtype_size(t) */ // plait_dtype_size(t)\n"
                                       "const char *s = \"plait_dtype_size(t)\";\n")], False),
        ([types, ("api/b.c", "size_t b = plait_dtype_size(t);\n")], False),
    ]
    failures = 0
    for case in cases:
        files, bad = (case[0], case[1]) if len(case) == 2 else ([case[:2]], case[2])
        rel, text = files[-1]
        with tempfile.TemporaryDirectory() as root:
            for frel, ftext in files:
                os.makedirs(os.path.join(root, os.path.dirname(frel)), exist_ok=True)
                with open(os.path.join(root, frel), "w") as f:
                    f.write(ftext)
            got = bool(violations(root))
            if got != bad:
                failures += 1
                print("self-test: %s with %r: %s, expected %s" % (
                    rel, text, "violation" if got else "clean", "violation" if bad else "clean"))
    print("self-test: %d of %d cases right" % (len(cases) - failures, len(cases)))
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    found = violations(argv[1])
    for v in found:
        print(v)
    print("layers: %d include(s), place(s) or call(s) against the layering of src/" % len(found)
          if found
          else "layers: every include of src/ points down (api -> engine -> control -> util), "
          "and every wing of engine/ includes only the wings below it; no call up into api/")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
