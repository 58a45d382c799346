#!/usr/bin/env python3
"""The layering rule of src/ (docs/design.md, "Layers"), checked.

    api -> engine -> control -> util      (arrows point down only)

A file in one of these four folders may include the public headers
("plait/...") and headers of its own layer or a lower one, written from src/
("util/log.h"). Tools beside them (plaitrun/, bench/) include their own
headers, the public ones and util/ only: they reach the core through the
public ABI. Anything else is reported with file:line, and the exit status is 1.

    check_layers.py SRC_DIR     check a tree (the ctest 'layers')
    check_layers.py --self-test check that the checker catches violations
"""
import os
import re
import sys
import tempfile

LAYERS = {"util": 0, "control": 1, "engine": 2, "api": 3}
TOOLS = ("plaitrun", "bench")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


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
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m:
                            why = judge(folder, m.group(1), dirpath == top)
                            if why:
                                rel = os.path.relpath(path, src)
                                found.append('%s:%d: #include "%s": %s' % (
                                    rel, lineno, m.group(1), why))
    return found


def judge(folder, inc, at_top):
    """Why including inc from a file of folder breaks the rule, or None."""
    while inc.startswith("../"):
        inc = inc[3:]
    if inc.startswith("plait/"):
        return None
    target = inc.split("/", 1)[0] if "/" in inc else None
    if folder in TOOLS:
        if target is None or target == "util" or target == folder:
            return None
        return "a tool (%s/) reaches the core through the public ABI and util/ only" % folder
    if target is None:
        return "write includes from src/ with their layer folder (e.g. \"util/log.h\")"
    if target not in LAYERS:
        return "'%s' is not a layer (api, engine, control, util)" % target
    if LAYERS[target] > LAYERS[folder]:
        return "%s/ may not include %s/, a higher layer (api -> engine -> control -> util)" % (
            folder, target)
    return None


def self_test():
    cases = [
        ("util/a.c", '#include "control/control.h"\n', True),
        ("control/a.c", '#include "engine/engine.h"\n', True),
        ("engine/a.c", '#include "api/current.h"\n', True),
        ("engine/a.h", '#include "table.h"\n', True),
        ("plaitrun/a.c", '#include "engine/engine.h"\n', True),
        ("api/a.c", '#include "engine/engine.h"\n#include "util/log.h"\n'
                    '#include "plait/plait.h"\n', False),
        ("engine/b.c", '#include "control/control.h"\n#include "engine/table.h"\n', False),
        ("bench/a.c", '#include "../util/half.h"\n#include "bench.h"\n', False),
    ]
    failures = 0
    for rel, text, bad in cases:
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, os.path.dirname(rel)))
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
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
    print("layers: %d include(s) against the layering of src/" % len(found) if found
          else "layers: every include of src/ points down (api -> engine -> control -> util)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
