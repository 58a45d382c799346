"""plait.tensorflow.keras and plait.keras have every public name of
horovod.tensorflow.keras and horovod.keras 0.28.1 (and their callbacks and
elastic modules), functions with Horovod's parameters in Horovod's order and
with Horovod's defaults; plait may add keyword parameters after them.

Horovod's surface (data/horovod_0.28.1_keras_api.json) was read from its
source with data/dump_horovod_tf_api.py's surface() for these six modules:

    python3 -c 'import json, sys; sys.path.insert(0, "tests/bindings/tensorflow/data");
      import dump_horovod_tf_api as d; root = sys.argv[1];
      mods = ["horovod.tensorflow.keras", "horovod.tensorflow.keras.callbacks",
              "horovod.tensorflow.keras.elastic", "horovod.keras",
              "horovod.keras.callbacks", "horovod.keras.elastic"];
      json.dump({"horovod_version": "0.28.1", "modules": {m: d.surface(root, m) for m in mods}},
                sys.stdout, indent=1, sort_keys=True); print()' \\
      ~/.cache/plait/venvs/horovod/lib/python3.11/site-packages/horovod \\
      > tests/bindings/tensorflow/data/horovod_0.28.1_keras_api.json
"""

import ast
import importlib
import inspect
import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "..", "data", "horovod_0.28.1_keras_api.json")) as f:
    HOROVOD = json.load(f)["modules"]

# Horovod's own helper imported into these modules from horovod.common.util;
# not part of the API.
NOT_API = {"is_version_greater_equal_than"}

CASES = [(m, name) for m in sorted(HOROVOD) for name in sorted(HOROVOD[m])
         if name not in NOT_API]


def plait_module(horovod_module):
    return importlib.import_module("plait" + horovod_module[len("horovod"):])


def _default(value):
    """A default as Horovod's source writes it, evaluated where it is a literal."""
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


@pytest.mark.parametrize("module,name", CASES, ids=["%s.%s" % c for c in CASES])
def test_name_and_signature(module, name):
    mod = plait_module(module)
    assert hasattr(mod, name), "%s lacks %s" % (mod.__name__, name)
    spec = HOROVOD[module][name]
    if spec["kind"] != "function":
        return
    params = list(inspect.signature(getattr(mod, name)).parameters.values())
    want = spec["params"]
    if all(w[0].startswith("*") for w in want):
        return  # Horovod's (*args, **kwargs) wrapper (init): nothing to compare
    got = [p.name for p in params][:len(want)]
    assert got == [w[0] for w in want], "%s.%s(%s), Horovod's (%s)" % (
        mod.__name__, name, ", ".join(p.name for p in params), ", ".join(w[0] for w in want))
    for p, (pname, default) in zip(params, want):
        if default is None:
            continue
        d = _default(default)
        if isinstance(d, str) and d == default and not default.startswith(("'", '"')):
            continue  # a name (Compression.none, Average, global_process_set): checked by kind
        assert p.default == d, "%s.%s: %s=%r, Horovod's %s" % (
            mod.__name__, name, pname, p.default, default)


def test_extra_parameters_are_keywords_after_horovods():
    import plait.keras as hk
    params = inspect.signature(hk.DistributedOptimizer).parameters
    for extra in ("backward_passes_per_step", "average_aggregated_gradients", "process_set",
                  "scale_local_gradients"):
        assert params[extra].kind is inspect.Parameter.KEYWORD_ONLY
