"""Writes the public surface of Horovod's modules that plait mirrors, as JSON
(tests/bindings/torch/data/horovod_0.28.1_api.json, read by
tests/bindings/torch/test_fidelity_api.py).

Run with the Python of a Horovod 0.28.1 installation (ci builds one in
~/.cache/plait/venvs/horovod):

    ~/.cache/plait/venvs/horovod/bin/python tests/bindings/torch/data/dump_horovod_api.py \\
        > tests/bindings/torch/data/horovod_0.28.1_api.json

For each module: every name dir() shows that does not start with "_" (but
not what the module merely imported from outside Horovod: typing's names,
stdlib modules and functions), its
kind (function, class, module, value) and, for functions and classes, the
signature (for a class, that of __init__ and of its public methods defined
in Horovod). A default is written as the name it has in the module when it is
one of the module's objects (global_process_set, Compression.none, an op
constant for a parameter named op), else as repr().
"""

import importlib
import inspect
import json
import sys
import typing

MODULES = ["horovod.torch", "horovod.torch.elastic", "horovod.common.exceptions",
           "horovod.common.process_sets", "horovod.common.elastic", "horovod.common.basics"]
OPS = ["Average", "Sum", "Adasum", "Min", "Max", "Product"]


def default_text(mod, param):
    d = param.default
    if d is inspect.Parameter.empty:
        return None
    hvd = importlib.import_module("horovod.torch")
    if param.name == "op" and isinstance(d, int) and not isinstance(d, bool):
        for op in OPS:
            if getattr(hvd, op) == d:
                return op
    if d is getattr(hvd, "global_process_set", object()):
        return "global_process_set"
    if d is hvd.Compression.none:
        return "Compression.none"
    return repr(d)


def signature(mod, fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, default_text(mod, p)] for p in sig.parameters.values()]


def describe(mod, name, obj):
    if inspect.ismodule(obj):
        return {"kind": "module", "module": obj.__name__}
    if inspect.isclass(obj):
        methods = {}
        for m, v in vars(obj).items():
            if m.startswith("_") or not callable(v):
                continue
            methods[m] = signature(mod, v)
        return {"kind": "class", "init": signature(mod, obj.__init__)
                if "__init__" in vars(obj) else None, "methods": methods,
                "bases": [b.__module__ + "." + b.__qualname__ for b in obj.__mro__[1:]]}
    if callable(obj):
        return {"kind": "function", "signature": signature(mod, obj)}
    return {"kind": "value", "type": type(obj).__name__}


def from_horovod(name, obj):
    if name in typing.__all__:
        return False
    if inspect.ismodule(obj):
        return obj.__name__.startswith("horovod")
    if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return (getattr(obj, "__module__", "") or "").startswith("horovod")
    return True


def main():
    import horovod
    out = {"horovod_version": horovod.__version__, "python": sys.version.split()[0],
           "modules": {}}
    for name in MODULES:
        mod = importlib.import_module(name)
        out["modules"][name] = {n: describe(mod, n, getattr(mod, n))
                                for n in sorted(dir(mod))
                                if not n.startswith("_") and from_horovod(n, getattr(mod, n))}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
