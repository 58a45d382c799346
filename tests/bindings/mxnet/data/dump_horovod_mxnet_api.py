"""Writes the public surface of horovod.mxnet as JSON
(tests/bindings/mxnet/data/horovod_mxnet_0.28.1_api.json, read by
tests/bindings/mxnet/unit/test_mx_fidelity_api.py).

Run with the Python of a Horovod 0.28.1 installation built with MXNet
(~/.cache/plait/venvs/horovod-mxnet):

    ~/.cache/plait/venvs/horovod-mxnet/bin/python tests/bindings/mxnet/data/dump_horovod_mxnet_api.py \\
        > tests/bindings/mxnet/data/horovod_mxnet_0.28.1_api.json

The format is tests/bindings/torch/data/dump_horovod_api.py's (torch): every public
name the module defines or takes from Horovod, its kind, and the signatures
of functions and of classes' __init__ and public methods defined in Horovod.
"""

import importlib
import inspect
import json
import sys

MODULES = ["horovod.mxnet", "horovod.mxnet.mpi_ops", "horovod.mxnet.functions",
           "horovod.mxnet.compression"]
OPS = ["Average", "Sum", "Adasum", "Min", "Max", "Product"]


def default_text(param):
    d = param.default
    if d is inspect.Parameter.empty:
        return None
    hvd = importlib.import_module("horovod.mxnet")
    if param.name == "op" and isinstance(d, int) and not isinstance(d, bool):
        for op in OPS:
            if getattr(hvd, op) == d:
                return op
    if d is hvd.global_process_set:
        return "global_process_set"
    if d is hvd.Compression.none:
        return "Compression.none"
    return repr(d)


def signature(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, default_text(p)] for p in sig.parameters.values()]


def describe(obj):
    if inspect.ismodule(obj):
        return {"kind": "module", "module": obj.__name__}
    if inspect.isclass(obj):
        methods = {m: signature(v) for m, v in vars(obj).items()
                   if not m.startswith("_") and callable(v)}
        return {"kind": "class", "init": signature(obj.__init__)
                if "__init__" in vars(obj) else None, "methods": methods,
                "bases": [b.__module__ + "." + b.__qualname__ for b in obj.__mro__[1:]]}
    if callable(obj):
        return {"kind": "function", "signature": signature(obj)}
    return {"kind": "value", "type": type(obj).__name__}


def from_horovod(obj):
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
        out["modules"][name] = {n: describe(getattr(mod, n)) for n in sorted(dir(mod))
                                if not n.startswith("_") and from_horovod(getattr(mod, n))}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
