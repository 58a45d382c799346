"""The console entry points of a pip install (pyproject.toml): `plaitrun` and
`plait-bench` exec the binaries bundled in plait/_bin. They find libplait in
plait/_lib by their RPATH; plaitrun finds the transport plugins beside it and
puts the folder holding this package on the ranks' PYTHONPATH itself. The
folder of the Python that runs the entry point goes first on PATH, so that
`plaitrun -np 2 python train.py` runs the ranks with this environment's
Python even when the environment is not activated."""

import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin")


def _exec(name):
    path = os.path.join(_BIN, name)
    if not os.access(path, os.X_OK):
        sys.stderr.write("%s: %s is missing from this install of plait (reinstall it: "
                         "pip install --force-reinstall plait)\n" % (name, path))
        sys.exit(127)
    here = os.path.dirname(sys.executable)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if here and (not parts or parts[0] != here):
        os.environ["PATH"] = os.pathsep.join([here] + [p for p in parts if p])
    os.execv(path, [name] + sys.argv[1:])


def plaitrun():
    _exec("plaitrun")


def plait_bench():
    _exec("plait-bench")
