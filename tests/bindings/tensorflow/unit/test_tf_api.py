"""plait.tensorflow's public surface against horovod.tensorflow 0.28.1's
(data/horovod_0.28.1_tensorflow_api.json, read from Horovod's source by
data/dump_horovod_tf_api.py): every name exists, and every function takes
Horovod's parameters, in Horovod's order, with Horovod's defaults."""

import inspect
import json
import os

import pytest

import plait.tensorflow as hvd

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "..", "data", "horovod_0.28.1_tensorflow_api.json")) as f:
    HOROVOD = json.load(f)["modules"]["horovod.tensorflow"]

# Names plait.tensorflow does not have, on purpose (docs/tensorflow.md).
OMITTED = {
    "check_extension": "Horovod's check that its compiled TensorFlow extension was built "
                       "(plait's op library is checked when plait.tensorflow loads it)",
}
OPS = ["Average", "Sum", "Adasum", "Min", "Max", "Product"]


def _default_text(name, default):
    if default is inspect.Parameter.empty:
        return None
    if default is hvd.global_process_set:
        return "global_process_set"
    if default is hvd.Compression.none:
        return "Compression.none"
    if name == "op" and isinstance(default, int) and not isinstance(default, bool):
        return next(o for o in OPS if getattr(hvd, o) == default)
    return repr(default)


def _params(fn):
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            out.append(["*" + p.name, None])
        elif p.kind == p.VAR_KEYWORD:
            out.append(["**" + p.name, None])
        else:
            out.append([p.name, _default_text(p.name, p.default)])
    return out


@pytest.mark.parametrize("name", sorted(HOROVOD))
def test_name_and_signature(name):
    if name in OMITTED:
        pytest.skip("omitted on purpose: " + OMITTED[name])
    assert hasattr(hvd, name), "plait.tensorflow lacks horovod.tensorflow.%s" % name
    want = HOROVOD[name]
    if want["kind"] != "function" or want["params"] == [["*args", None], ["**kwargs", None]]:
        return  # Horovod's *args/**kwargs wrappers (init) take anything
    assert _params(getattr(hvd, name)) == want["params"], name


def test_module_exports_plait_extras():
    # what plait adds: barrier (as plait.torch), the statistics, the error classes
    for name in ("barrier", "stats", "PeerLostError", "MismatchError", "HorovodInternalError"):
        assert hasattr(hvd, name), name
