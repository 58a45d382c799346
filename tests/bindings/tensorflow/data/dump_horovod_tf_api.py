"""Writes the public surface of horovod.tensorflow 0.28.1 (every public name
and, for functions, the parameter names and defaults) as JSON, read by
tests/bindings/tensorflow/unit/test_tf_api.py.

Horovod's TensorFlow binding does not build against TensorFlow 2.21 without
a patch, so this reads Horovod's source with the ast module instead of
importing it (any Horovod 0.28.1 source tree or installation will do; ci
builds one in ~/.cache/plait/venvs/horovod):

    python3 tests/bindings/tensorflow/data/dump_horovod_tf_api.py \\
        ~/.cache/plait/venvs/horovod/lib/python3.11/site-packages/horovod \\
        > tests/bindings/tensorflow/data/horovod_0.28.1_tensorflow_api.json

Names defined under `if` blocks (Horovod's TF1/TF2 guards) count; names
imported from outside horovod (tf, os, warnings) do not.
"""

import ast
import json
import os
import sys


def module_file(root, dotted):
    rel = dotted.split(".")[1:]
    base = os.path.join(root, *rel)
    return base + ".py" if os.path.exists(base + ".py") else os.path.join(base, "__init__.py")


def walk(body):
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            for part in (node.body, getattr(node, "orelse", []),
                         *[h.body for h in getattr(node, "handlers", [])]):
                yield from walk(part)


def signature(fn):
    a = fn.args
    params = []
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    for p, d in zip(pos, defaults):
        params.append([p.arg, None if d is None else ast.unparse(d)])
    if a.vararg:
        params.append(["*" + a.vararg.arg, None])
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append([p.arg, None if d is None else ast.unparse(d)])
    if a.kwarg:
        params.append(["**" + a.kwarg.arg, None])
    return params


_memo = {}


def surface(root, dotted):
    if dotted in _memo:  # done, or in progress (a cycle of imports)
        return _memo[dotted]
    out = _memo[dotted] = {}
    tree = ast.parse(open(module_file(root, dotted)).read())
    for node in walk(tree.body):
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            out[node.name] = {"kind": "function", "params": signature(node)}
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            out[node.name] = {"kind": "class"}
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name) and not t.id.startswith("_"):
                    out.setdefault(t.id, {"kind": "value"})
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith("horovod"):
            src = None
            for alias in node.names:
                name = alias.asname or alias.name
                if name.startswith("_") or name == "*":
                    continue
                if src is None:
                    try:
                        src = surface(root, node.module)
                    except (OSError, SyntaxError):
                        src = {}
                out[name] = src.get(alias.name, {"kind": "value"})
    return out


def main():
    root = sys.argv[1]
    mods = ["horovod.tensorflow"]
    json.dump({"horovod_version": "0.28.1",
               "modules": {m: surface(root, m) for m in mods}},
              sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
