#!/usr/bin/env python3
"""The core never names a transport plugin (docs/plugins.md, "Traits").

What the core once decided by a plugin's name (ofi's piece size and fusion
default, the order of PLAIT_TRANSPORT=auto) the plugins now declare in their
tables' traits. This check keeps it so: no string literal in src/ is the name
of a plugin of this tree (a folder of plugins/, a test plugin of
tests/plugins/), outside comments. Each exception is listed below with its
reason. A violation is reported with file:line, and the exit status is 1.

    check_plugin_names.py ROOT       check a tree (the ctest 'plugin_names')
    check_plugin_names.py --self-test check that the checker catches one
"""
import os
import re
import sys
import tempfile

# (file under src/, literal): why it may name a plugin.
ALLOWED = {
    ("util/config_horovod.c", "gloo"):
        "HOROVOD_CPU_OPERATIONS=gloo is Horovod's vocabulary, read to say it is ignored",
    ("plaitrun/horovod_flags.c", "gloo"): "the launcher translates horovodrun's --gloo flag",
}

COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def plugin_names(root):
    names = set()
    plugins = os.path.join(root, "plugins")
    for d in os.listdir(plugins):
        if os.path.isdir(os.path.join(plugins, d)):
            names.add(d)
    tests = os.path.join(root, "tests", "plugins")
    for sub in ("", "older"):  # one plugin per file (devsim/ holds devsim's parts)
        d = os.path.join(tests, sub)
        for f in os.listdir(d) if os.path.isdir(d) else []:
            if f.endswith(".c"):
                names.add(f[:-2])
    return names


def strip_comments(text):
    # keep line numbers: a comment becomes as many newlines as it held
    return COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def violations(root, names):
    found = []
    src = os.path.join(root, "src")
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, src)
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = strip_comments(fh.read())
            for n, line in enumerate(text.split("\n"), 1):
                for lit in LITERAL.findall(line):
                    if lit in names and (rel, lit) not in ALLOWED:
                        found.append("src/%s:%d: names the plugin \"%s\" (declare it as a "
                                     "trait of the plugin's table instead)" % (rel, n, lit))
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "plugins", "ofi"))
        os.makedirs(os.path.join(root, "tests", "plugins"))
        os.makedirs(os.path.join(root, "src", "engine"))
        open(os.path.join(root, "tests", "plugins", "fakeofi.c"), "w").close()
        with open(os.path.join(root, "src", "engine", "x.c"), "w") as fh:
            fh.write('/* "ofi" in a comment is fine */\n'
                     'int a(const char *n) { return !strcmp(n, "ofi"); }\n'
                     'const char *b = "fakeofi";\nconst char *c = "ofi and more";\n')
        got = violations(root, plugin_names(root))
        want = ["src/engine/x.c:2:", "src/engine/x.c:3:"]
        ok = len(got) == 2 and all(g.startswith(w) for g, w in zip(got, want))
        print("self-test: %s" % ("ok" if ok else "wrong: %r" % got))
        return 0 if ok else 1


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    found = violations(argv[1], plugin_names(argv[1]))
    for v in found:
        print(v)
    print("%d place(s) in src/ name a plugin" % len(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
