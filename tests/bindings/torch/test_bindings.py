"""The ctypes layer (plait._core) against the C headers and library, in one
process (a job of one rank)."""

import ctypes
import json
import os
import re
import subprocess
import sys
import textwrap
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from ranks import free_port  # noqa: E402

import plait
from plait import _core

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HEADER = os.path.join(ROOT, "include", "plait", "plait.h")
HEADERS = [HEADER, os.path.join(ROOT, "include", "plait", "elastic.h")]

PROBE = r"""
#include <plait/plait.h>
#include <plait/elastic.h>
#include <stddef.h>
#include <stdio.h>
#define FIELD(T, f) printf("\"%s.%s\": [%zu, %zu],", #T, #f, offsetof(T, f), sizeof(((T *)0)->f));
#define RESULT(n, v, m) printf("\"%s\": %d,", #n, v);
#define DTYPE(n, v, t, b) printf("\"%s\": [%d, %d],", t, v, b);
#define OP(n, v, t) printf("\"%s\": %d,", t, v);
int main(void) {
  printf("{\"sizes\": {\"plait_tensor_t\": %zu, \"plait_op_options_t\": %zu, \"plait_stats_t\": %zu, "
         "\"plait_transport_info_t\": %zu},", sizeof(plait_tensor_t), sizeof(plait_op_options_t),
         sizeof(plait_stats_t), sizeof(plait_transport_info_t));
  printf("\"constants\": {\"ABI_VERSION\": %d, \"MAX_DIMS\": %d, \"MAX_NAME\": %d, \"DEVICE_HOST\": %d, "
         "\"HOSTS_ADDED\": %u, \"HOSTS_REMOVED\": %u},", PLAIT_ABI_VERSION, PLAIT_MAX_DIMS,
         PLAIT_MAX_NAME, PLAIT_DEVICE_HOST, PLAIT_HOSTS_ADDED, PLAIT_HOSTS_REMOVED);
  printf("\"fields\": {");
  FIELDS
  printf("\"end\": 0}, \"results\": {");
  PLAIT_RESULT_LIST(RESULT)
  printf("\"end\": 0}, \"dtypes\": {");
  PLAIT_DTYPE_LIST(DTYPE)
  printf("\"end\": 0}, \"ops\": {");
  PLAIT_OP_LIST(OP)
  printf("\"end\": 0}}\n");
  return 0;
}
"""

STRUCTS = {"plait_tensor_t": _core.Tensor, "plait_op_options_t": _core.OpOptions,
           "plait_stats_t": _core.Stats, "plait_transport_info_t": _core.TransportInfo}


@pytest.fixture(scope="module")
def header_facts(tmp_path_factory):
    fields = "".join("FIELD(%s, %s)" % (c, f) for c, s in STRUCTS.items() for f, _ in s._fields_)
    src = tmp_path_factory.mktemp("probe") / "probe.c"
    src.write_text(PROBE.replace("FIELDS", fields))
    exe = str(src) + ".bin"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", exe],
                   check=True)
    facts = json.loads(subprocess.run([exe], check=True, capture_output=True,
                                      text=True).stdout)
    for group in ("fields", "results", "dtypes", "ops"):
        del facts[group]["end"]
    return facts


def test_struct_layouts_match_header(header_facts):
    for cname, struct in STRUCTS.items():
        assert ctypes.sizeof(struct) == header_facts["sizes"][cname], cname
        for field, _ in struct._fields_:
            desc = getattr(struct, field)
            assert [desc.offset, desc.size] == header_facts["fields"]["%s.%s" % (cname, field)], \
                "%s.%s" % (cname, field)


def test_constants_match_header(header_facts):
    for name, value in header_facts["constants"].items():
        assert getattr(_core, name) == value, name


def test_enums_come_from_the_library_and_match_header(header_facts):
    assert _core.RESULTS == header_facts["results"]
    assert {k: v[0] for k, v in header_facts["dtypes"].items()} == _core.DTYPES
    for name, (code, size) in header_facts["dtypes"].items():
        assert _core.dtype_size(code) == size
    assert _core.OPS == header_facts["ops"]


def test_every_function_in_header_is_declared():
    text = ""
    for path in HEADERS:  # plait.h and elastic.h
        with open(path) as f:
            text += f.read()
    declared = set(re.findall(r"PLAIT_API\s+[\w\s\*]+?\b(plait_\w+)\s*\(", text))
    assert declared, "no PLAIT_API functions found in the header"
    assert declared == set(_core._FUNCTIONS)
    for name in declared:
        fn = getattr(_core.lib, name)
        assert fn.argtypes is not None and fn.restype is not None, name


def test_calls_made_with_the_gil_held_match_their_declarations():
    """The PyDLL twins (addresses as ints, the GIL held) take what the
    header's declaration takes, argument for argument: a pointer where it
    has a pointer, the same scalar types elsewhere."""
    twins = {name: fn for name, fn in vars(_core.gil).items() if name.startswith("plait_")}
    assert {"plait_release", "plait_wait", "plait_allreduce_async",
            "plait_join_async"} <= set(twins)
    assert twins["plait_allreduce_async"] is _core.allreduce_async_gil
    for name, fast in twins.items():
        fn = getattr(_core.lib, name)
        assert fast.restype is fn.restype, name
        assert len(fast.argtypes) == len(fn.argtypes), name
        for slow_t, fast_t in zip(fn.argtypes, fast.argtypes):
            pointer = issubclass(slow_t, (ctypes._Pointer, ctypes.c_void_p))
            if pointer:
                assert fast_t is ctypes.c_void_p, (name, slow_t, fast_t)
            else:
                assert fast_t is slow_t, (name, slow_t, fast_t)
        # not the same function object: the twin holds the GIL, the other does not
        assert fast is not fn and fast._flags_ & ctypes._FUNCFLAG_PYTHONAPI, name
        assert not fn._flags_ & ctypes._FUNCFLAG_PYTHONAPI, name


def test_converter_free_twins_take_what_the_declaration_takes():
    """plait._raw's twins hold the GIL, return what the declaration returns
    and convert only the arguments that need it: plait_wait_release's
    handle address (an int, which unconverted ctypes would cut to a C int).
    The hot path's fixed arguments are argument objects of the declared
    C types, made once."""
    from plait import _raw
    for name, fn in (("plait_allreduce_async", _raw.allreduce_async),
                     ("plait_wait_release", _raw.wait_release)):
        slow = getattr(_core.lib, name)
        assert fn.restype is slow.restype, name
        assert fn._flags_ & ctypes._FUNCFLAG_PYTHONAPI, name
        assert fn is not getattr(_core.gil, name), name  # _core's twin keeps its argtypes
    assert _raw.allreduce_async.argtypes is None
    assert _raw.wait_release.argtypes == (ctypes.c_void_p,)
    assert _core.gil.plait_wait_release.argtypes[0] is ctypes.c_void_p  # not changed
    assert _core.lib.plait_wait_release.argtypes[1] is ctypes.c_double
    assert repr(_raw.carg_double(0.5)) == "<cparam 'd' (0.5)>"  # a C double
    assert repr(_raw.carg_int(3)) == "<cparam 'i' (3)>"  # a C int
    assert _core.lib.plait_allreduce_async.argtypes[3] is ctypes.c_int  # the op: a C int


def test_transport_query_answers_as_plait_init_would_load():
    """plait_transport_query: the library finds and checks the plugin (the
    bindings load none themselves); a missing one is found == 0."""
    names = _core.transport_list()
    assert "gloo" in names and names == sorted(set(names))
    info = _core.transport_query("gloo")
    assert info.found == 1 and info.device_memory == 0
    assert info.path.decode().endswith("/libplait-transport-gloo.so")
    assert info.caps & 1 and info.host_memory == 1  # PLAIT_CAP_HOST_MEMORY
    assert info.library_version == 0
    missing = _core.transport_query("nosuch")
    assert missing.found == 0 and missing.path == b"" and missing.caps == 0
    assert "nosuch" in _core._text(_core.lib.plait_last_error())
    assert _core.transport_query("Bad Name").found == 0
    from plait.common import basics
    assert basics.gloo_built() is True and basics.transport_built("nosuch") is False
    assert basics.cuda_built() == any(_core.transport_query(n).device_memory for n in names)


def test_transport_query_refuses_bad_arguments():
    info = _core.TransportInfo()
    info.struct_size = 8
    with pytest.raises(plait.InvalidArgumentError, match="struct_size is 8"):
        _core.check(_core.lib.plait_transport_query(b"gloo", None, ctypes.byref(info)))
    with pytest.raises(plait.InvalidArgumentError, match="name is NULL"):
        _core.check(_core.lib.plait_transport_query(None, None, ctypes.byref(info)))
    with pytest.raises(plait.InvalidArgumentError, match="buf is NULL"):
        _core.check(_core.lib.plait_transport_list(None, 4, None))


def test_transport_list_follows_the_plugin_path(tmp_path):
    """PLAIT_PLUGIN_PATH's folders come first; every libplait-transport-<name>.so
    there is listed (loadable or not), and the query then refuses a broken one."""
    (tmp_path / "libplait-transport-zzfake.so").write_bytes(b"not a library")
    p = run_python("""
        from plait import _core
        print(_core.transport_list())
        print(_core.transport_query("zzfake").found)
        """, {"PLAIT_PLUGIN_PATH": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    listed, found = p.stdout.split("\n")[:2]
    assert "'zzfake'" in listed and "'gloo'" in listed
    assert found == "0"


def test_error_classes_named_from_library():
    assert plait.PeerLostError is _core.ERRORS[_core.RESULTS["PLAIT_ERR_PEER_LOST"]]
    assert issubclass(plait.MismatchError, plait.PlaitError)
    assert issubclass(plait.PlaitTimeoutError, TimeoutError)  # never shadows the builtin
    assert len(_core.ERRORS) == len(_core.RESULTS) - 1


def test_not_initialized_error_has_library_message():
    with pytest.raises(plait.NotInitializedError) as err:
        plait.rank()
    assert "not initialized" in str(err.value)
    assert err.value.name == "PLAIT_ERR_NOT_INITIALIZED"


def run_python(code, env_extra=None, env_drop=(), timeout=60):
    env = dict(os.environ)
    for k in env_drop:
        env.pop(k, None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_plait_library_override_names_the_path():
    p = run_python("import plait", {"PLAIT_LIBRARY": "/nonexistent/libplait.so"})
    assert p.returncode != 0
    assert "/nonexistent/libplait.so (PLAIT_LIBRARY)" in p.stderr
    assert "ImportError" in p.stderr


def test_config_error_names_variable():
    p = run_python("""
        import plait
        try:
            plait.init()
        except plait.ConfigError as e:
            print("CONFIG", e)
        """, {"PLAIT_FUSION_THRESHOLD": "64Q"})
    assert "CONFIG" in p.stdout, p.stderr
    assert "PLAIT_FUSION_THRESHOLD='64Q'" in p.stdout


def test_integers_that_do_not_fit_a_c_type_are_refused():
    """ctypes wraps what does not fit (c_int(2**32) is 0): _core checks first,
    naming the argument (issue 16)."""
    assert _core.c_integer(-2**31, "x") == -2**31
    assert _core.c_integer(2**31 - 1, "x") == 2**31 - 1
    for bad in (2**31, -2**31 - 1, 2**32, 2**64):
        with pytest.raises(ValueError, match="root_rank %d is out of range" % bad) as e:
            _core.c_integer(bad, "root_rank")
        assert isinstance(e.value, plait.InvalidArgumentError)
    assert _core.c_integer(2**63 - 1, "x", _core.INT64_RANGE) == 2**63 - 1
    with pytest.raises(ValueError, match="splits"):
        _core.c_integer(2**63, "splits", _core.INT64_RANGE)
    with pytest.raises(TypeError, match="must be an int"):
        _core.c_integer(1.5, "root_rank")
    with pytest.raises(TypeError, match="not bool"):
        _core.c_integer(True, "root_rank")
    with pytest.raises(ValueError, match="nbytes -1"):
        plait.transport_algorithm("allreduce", -1)


def test_single_rank_job():
    p = run_python("""
        import os, plait, torch
        import plait.torch as hvd
        hvd.init()
        assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (0, 1, 0, 1)
        x = torch.arange(5.0)
        for op in (hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product):
            assert torch.equal(hvd.allreduce(x, op=op), x)
        assert torch.equal(hvd.allgather(x), x)
        assert torch.equal(hvd.broadcast(x, 0), x)
        try:  # ctypes would have made it root 0
            hvd.broadcast(x, 2**32)
            raise AssertionError("broadcast from root_rank 2**32 did not raise")
        except ValueError as e:
            assert "root_rank 4294967296" in str(e), e
        assert "PLAIT_TRANSPORT=auto" in plait.config_dump()  # the default
        built = os.path.exists(os.path.join(os.environ["PLAIT_PLUGIN_PATH"],
                                            "libplait-transport-ofi.so"))
        assert hvd.transport_name() == ("ofi" if built else "gloo"), hvd.transport_name()
        assert plait.stats()["tensors"] == 7, plait.stats()
        hvd.shutdown()
        assert not hvd.is_initialized()
        print("OK")
        """, env_drop=[k for k in os.environ if k.startswith("PLAIT_") and k not in
                       ("PLAIT_LIBRARY", "PLAIT_PLUGIN_PATH")])
    assert p.stdout.strip() == "OK", p.stderr


def test_gil_released_while_blocked():
    """plait_init waiting for a rank that never comes must not stop the
    other Python threads."""
    p = run_python("""
        import threading, time, plait
        result = {}
        def start():
            try:
                plait.init()
            except plait.PlaitError as e:
                result["error"] = e
        t = threading.Thread(target=start)
        t0 = time.time()
        t.start()
        ticks = 0
        while t.is_alive():
            ticks += 1
            time.sleep(0.001)
        print("TICKS", ticks, "ELAPSED", round(time.time() - t0, 2))
        print("ERROR", type(result["error"]).__name__, result["error"])
        """, {"PLAIT_SIZE": "2", "PLAIT_RANK": "0", "PLAIT_SECRET": "s" * 32,
              "PLAIT_RENDEZVOUS": "127.0.0.1:%d" % free_port(), "PLAIT_START_TIMEOUT_S": "1.5"})
    lines = dict(line.split(" ", 1) for line in p.stdout.splitlines())
    assert "ERROR" in lines, p.stderr
    ticks = int(lines["TICKS"].split()[0])
    assert ticks > 200, lines  # ~1500 if the GIL is free, ~0 if not
    assert lines["ERROR"].startswith("PlaitTimeoutError")
    assert "rank 1" in lines["ERROR"]


def test_unsynchronized_handle_at_shutdown():
    """A handle never synchronized is finished and freed by shutdown."""
    p = run_python("""
        import gc, torch, plait
        import plait.torch as hvd
        from plait import _core
        hvd.init()
        h = hvd.allreduce_async(torch.ones(1000), name="orphan")
        del h  # never synchronized
        gc.collect()
        hvd.shutdown()
        print("OK", len(_core._orphans))
        """, env_drop=[k for k in os.environ if k.startswith("PLAIT_") and k not in
                       ("PLAIT_LIBRARY", "PLAIT_PLUGIN_PATH")])
    assert p.stdout.strip() == "OK 0", p.stderr
