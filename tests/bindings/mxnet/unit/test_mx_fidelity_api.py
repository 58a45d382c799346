"""plait.mxnet against horovod.mxnet 0.28.1: every public name and signature
(tests/bindings/mxnet/data/horovod_mxnet_0.28.1_api.json, dumped from Horovod
0.28.1 built against MXNet 1.9.1 by data/dump_horovod_mxnet_api.py)."""

import inspect
import json
import os

import pytest

import plait.mxnet
import plait.mxnet.compression
import plait.mxnet.functions
import plait.mxnet.mpi_ops

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(os.path.dirname(HERE), "data", "horovod_mxnet_0.28.1_api.json")) as _f:
    HOROVOD = json.load(_f)
with open(os.path.join(os.path.dirname(os.path.dirname(HERE)), "torch", "data",
                       "horovod_0.28.1_api.json")) as _f:
    _BASICS = json.load(_f)["modules"]["horovod.common.basics"]["HorovodBasics"]["methods"]

MODULES = {
    "horovod.mxnet": plait.mxnet,
    "horovod.mxnet.mpi_ops": plait.mxnet.mpi_ops,
    "horovod.mxnet.functions": plait.mxnet.functions,
    "horovod.mxnet.compression": plait.mxnet.compression,
}
# Names of Horovod's modules plait does not have, on purpose: Horovod's
# loading of its compiled extension (plait's adapter is loaded by
# plait.mxnet._engine) and helpers it imports into mpi_ops.
OMITTED = {"horovod.mxnet.check_extension", "horovod.mxnet.mpi_ops.MPI_MXNET_LIB_CTYPES",
           "horovod.mxnet.mpi_ops.dll_path", "horovod.mxnet.mpi_ops.get_ext_suffix",
           "horovod.mxnet.mpi_ops.check_installed_version",
           "horovod.mxnet.mpi_ops.get_average_backwards_compatibility_fun",
           "horovod.mxnet.mpi_ops.handle_average_backwards_compatibility",
           "horovod.mxnet.mpi_ops.string_types"}
# horovod.mxnet's init is an (*args, **kwargs) wrapper of HorovodBasics.init,
# and its shutdown is HorovodBasics.shutdown bound: plait's spell out the
# signature of what they are.
WRAPPED = {"init": _BASICS["init"][1:], "shutdown": _BASICS["shutdown"][1:]}
OPS = ["Average", "Sum", "Adasum", "Min", "Max", "Product"]


def _default_text(param):
    d = param.default
    if d is inspect.Parameter.empty:
        return None
    if param.name == "op" and isinstance(d, int) and not isinstance(d, bool):
        for op in OPS:
            if getattr(plait.mxnet, op) == d:
                return op
    if d is plait.mxnet.global_process_set:
        return "global_process_set"
    if d is plait.mxnet.Compression.none:
        return "Compression.none"
    return repr(d)


def _signature(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, _default_text(p)] for p in sig.parameters.values()]


def _entries():
    for mod, names in sorted(HOROVOD["modules"].items()):
        for name, desc in sorted(names.items()):
            if "%s.%s" % (mod, name) in OMITTED:
                continue
            if desc["kind"] == "function" and name in WRAPPED:
                desc = dict(desc, signature=WRAPPED[name])
            yield mod, name, desc


@pytest.mark.parametrize("mod,name,desc", list(_entries()),
                         ids=["%s.%s" % (m, n) for m, n, _ in _entries()])
def test_horovod_mxnet_name_has_same_signature(mod, name, desc):
    plait_mod = MODULES[mod]
    where = "%s.%s" % (plait_mod.__name__, name)
    assert hasattr(plait_mod, name), "%s is missing (Horovod has %s.%s)" % (where, mod, name)
    obj = getattr(plait_mod, name)
    kind = desc["kind"]
    if kind == "module":
        assert inspect.ismodule(obj), "%s should be a module" % where
    elif kind == "function":
        assert callable(obj) and not inspect.isclass(obj), "%s should be a function" % where
        assert _signature(obj) == desc["signature"], where
    elif kind == "class":
        assert inspect.isclass(obj), "%s should be a class" % where
        if desc["init"] is not None:
            assert _signature(obj.__init__) == desc["init"], where + ".__init__"
        for method, sig in desc["methods"].items():
            assert hasattr(obj, method), "%s.%s is missing" % (where, method)
            if sig is not None and not inspect.isclass(getattr(obj, method)):
                assert _signature(getattr(obj, method)) == sig, "%s.%s" % (where, method)
        for base in desc["bases"]:
            if base.startswith("builtins.") or base.startswith("mxnet."):
                modname, _, qual = base.rpartition(".")
                m = __import__(modname, fromlist=[qual])
                assert issubclass(obj, getattr(m, qual)), "%s should derive from %s" % (
                    where, base)
    else:
        assert not callable(obj) or isinstance(obj, plait.mxnet.ProcessSet), where
