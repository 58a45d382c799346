"""`python -m plait.info`: what this install of plait holds and where each
piece is loaded from: libplait (the one `import plait` loads), the transport
plugins and framework adapters beside it (or in PLAIT_PLUGIN_PATH), the
frameworks this Python can import and their versions, the bundled plaitrun,
and, for a pip install, the build's own report (plait/build_info.txt,
written by cmake/pip_report.cmake: what was built and why the rest was not).
Exit status 0; 1 when libplait cannot be loaded (the error says why)."""

import importlib.util
import os
import sys

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
# (name shown, module, distributions that may provide it, adapter file or None)
_FRAMEWORKS = [
    ("PyTorch", "torch", ["torch"], None),
    ("TensorFlow", "tensorflow", ["tensorflow-cpu", "tensorflow"], "libplait_tensorflow.so"),
    ("MXNet", "mxnet", ["mxnet"], "libplait_mxnet.so"),
]
_TRANSPORTS = [("Gloo", "gloo"), ("libfabric", "ofi"), ("NCCL", "nccl")]


def _version(dists, module):
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        metadata = None
    for d in dists if metadata else []:
        try:
            return metadata.version(d)
        except Exception:
            pass
    try:  # a framework installed without metadata (Debian's python3-torch)
        return getattr(__import__(module), "__version__", "?")
    except Exception as e:
        return "? (import fails: %s)" % str(e).splitlines()[0]


def _find(file_name, lib_dir, with_path):
    dirs = [d for d in os.environ.get("PLAIT_PLUGIN_PATH", "").split(":") if d] if with_path else []
    for d in dirs + [lib_dir]:
        path = os.path.join(d, file_name)
        if os.path.exists(path):
            return path
    return None


def _build_info():
    path = os.path.join(_PACKAGE, "build_info.txt")
    if not os.path.exists(path):
        return ["    (no %s: not a pip install; see docs/install.md)" % path]
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3:
                rows.append("    [%s] %s: %s" % ("X" if parts[1] == "yes" else " ", parts[0], parts[2]))
    return rows


def report():
    """The lines `python -m plait.info` prints; raises ImportError when
    libplait cannot be loaded."""
    import plait
    lib_dir = os.path.dirname(os.path.realpath(plait.library_path))
    lines = ["plait %s" % plait.__version__,
             "    package:  %s" % _PACKAGE,
             "    libplait: %s" % os.path.realpath(plait.library_path),
             "    python:   %s %s" % (sys.executable, sys.version.split()[0]),
             "", "Frameworks:"]
    for name, module, dists, adapter in _FRAMEWORKS:
        spec = importlib.util.find_spec(module)
        if spec is None:
            lines.append("    [ ] %s: %s is not importable by this Python" % (name, module))
            continue
        where = os.path.dirname(spec.origin or "")
        text = "%s %s (%s)" % (module, _version(dists, module), where)
        if adapter is None:
            lines.append("    [X] %s: %s; plait.torch is pure Python" % (name, text))
            continue
        path = _find(adapter, lib_dir, False)
        lines.append("    [%s] %s: %s; adapter %s" % ("X" if path else " ", name, text,
                                                     path or "not built (%s)" % adapter))
    lines += ["", "Transports (plugins: PLAIT_PLUGIN_PATH, then beside libplait):"]
    for name, short in _TRANSPORTS:
        path = _find("libplait-transport-%s.so" % short, lib_dir, True)
        lines.append("    [%s] %s (%s): %s" % ("X" if path else " ", name, short,
                                              path or "not found"))
    plaitrun = os.path.join(_PACKAGE, "_bin", "plaitrun")
    lines += ["", "Launcher:", "    plaitrun: %s" % (plaitrun if os.path.exists(plaitrun) else
                                                   "not bundled (a build tree's bin/plaitrun)")]
    lines += ["", "Build (plait/build_info.txt):"] + _build_info()
    return lines


def main():
    try:
        lines = report()
    except ImportError as e:
        sys.stderr.write("plait.info: %s\n" % e)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
