"""plait.torch against horovod.torch 0.28.1 (issue 10): the public surface
(every name and signature, from data/horovod_0.28.1_api.json, taken from a
Horovod build by data/dump_horovod_api.py), the exception classes, the life
cycle, the timeline, the build queries, process sets and elastic's names.

What Horovod does in each case was measured by running Horovod 0.28.1 (built
with Gloo, without MPI, as ci builds it) and is written next to each check.
Jobs run in subprocesses (one rank, or two for a lost rank), so this session
never initializes plait itself.
"""

import inspect
import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from ranks import clean_env, free_port  # noqa: E402

import plait
import plait.common.elastic
import plait.common.exceptions
import plait.common.process_sets
import plait.torch
import plait.torch.elastic
from plait import _core
from plait.common.exceptions import HorovodInternalError

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BUILD = os.environ.get("PLAIT_TEST_BUILD_DIR")

with open(os.path.join(HERE, "data", "horovod_0.28.1_api.json")) as _f:
    HOROVOD = json.load(_f)

MODULES = {
    "horovod.torch": plait.torch,
    "horovod.torch.elastic": plait.torch.elastic,
    "horovod.common.exceptions": plait.common.exceptions,
    "horovod.common.process_sets": plait.common.process_sets,
    "horovod.common.elastic": plait.common.elastic,
}

# Names of Horovod's modules plait does not have, on purpose (each also in
# docs/horovod-comparison.md).
OMITTED = {
    "horovod.torch.check_extension": "Horovod's check that its compiled torch extension was "
                                     "built; plait's bindings compile nothing against torch",
    "horovod.torch.mpi_lib_v2": "Horovod's compiled torch extension module; plait calls its C "
                                "library through ctypes",
    "horovod.common.process_sets.HorovodBasics": "Horovod's internal ctypes wrapper, imported "
                                                 "into the module",
    "horovod.common.process_sets.MPI": "a placeholder class for type annotations",
    "horovod.common.process_sets.is_iterable": "Horovod's util helper, imported into the module",
    "horovod.common.elastic.WorkerNotificationManager": "Horovod's service pushing host "
                                                        "changes to workers; plait's rank 0 "
                                                        "asks the driver at commit",
    "horovod.common.elastic.notification_manager": "the instance of that service",
}

OPS = ["Average", "Sum", "Adasum", "Min", "Max", "Product"]


def _default_text(param):
    """The default as dump_horovod_api.py writes Horovod's."""
    d = param.default
    if d is inspect.Parameter.empty:
        return None
    if param.name == "op" and isinstance(d, int) and not isinstance(d, bool):
        for op in OPS:
            if getattr(plait.torch, op) == d:
                return op
    if d is plait.torch.global_process_set:
        return "global_process_set"
    if d is plait.torch.Compression.none:
        return "Compression.none"
    return repr(d)


def _signature(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, _default_text(p)] for p in sig.parameters.values()]


# horovod.torch's init and shutdown (and horovod.torch.elastic's) are
# (*args, **kwargs) wrappers of HorovodBasics.init and .shutdown: plait's
# spell out the signature of what they wrap.
_BASICS = HOROVOD["modules"]["horovod.common.basics"]["HorovodBasics"]["methods"]
WRAPPED = {"init": _BASICS["init"][1:], "shutdown": _BASICS["shutdown"][1:]}


def _entries():
    for mod, names in sorted(HOROVOD["modules"].items()):
        if mod not in MODULES:
            continue
        for name, desc in sorted(names.items()):
            if "%s.%s" % (mod, name) in OMITTED:
                continue
            if (desc["kind"] == "function" and name in WRAPPED
                    and mod in ("horovod.torch", "horovod.torch.elastic")):
                assert [p[1] for p in desc["signature"]] == ["VAR_POSITIONAL", "VAR_KEYWORD"]
                desc = dict(desc, signature=WRAPPED[name])
            yield mod, name, desc


@pytest.mark.parametrize("mod,name,desc", list(_entries()),
                         ids=["%s.%s" % (m, n) for m, n, _ in _entries()])
def test_horovod_name_has_same_signature(mod, name, desc):
    full = "%s.%s" % (mod, name)
    plait_mod = MODULES[mod]
    where = "%s.%s" % (plait_mod.__name__, name)
    assert hasattr(plait_mod, name), "%s is missing (Horovod has %s)" % (where, full)
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
            if base.startswith("builtins."):
                builtin = getattr(__import__("builtins"), base.split(".", 1)[1])
                assert issubclass(obj, builtin), "%s should derive from %s" % (where, base)
    else:
        assert not callable(obj) or isinstance(obj, plait.torch.ProcessSet), where


def test_omissions_are_horovods_names_and_documented():
    with open(os.path.join(ROOT, "docs", "horovod-comparison.md")) as f:
        doc = f.read()
    for full in OMITTED:
        mod, name = full.rsplit(".", 1)
        assert name in HOROVOD["modules"][mod], "%s is not a name of Horovod's" % full
        assert "`%s`" % name in doc, "docs/horovod-comparison.md does not mention %s" % full


def test_api_data_is_horovod_0_28_1():
    assert HOROVOD["horovod_version"] == "0.28.1"
    assert len(HOROVOD["modules"]["horovod.torch"]) > 70


# --------------------------------------------------------------------------
# Exception classes
# --------------------------------------------------------------------------

# Each result code's class and the classes Horovod 0.28.1 raises in the same
# situation (measured): a name already in flight, a root rank out of range,
# bad alltoall splits, an unsupported tensor type -> ValueError; an operation
# before init -> HorovodInternalError, rank() before init -> ValueError;
# mismatched shapes/dtypes/ops/roots at synchronize, a lost rank ("Horovod
# has been shut down") -> HorovodInternalError; a failed init -> ValueError.
EXPECTED_BASES = {
    "PLAIT_ERR_INVALID_ARGUMENT": [ValueError],
    "PLAIT_ERR_NOT_INITIALIZED": [HorovodInternalError, ValueError],
    "PLAIT_ERR_ALREADY_INITIALIZED": [ValueError],
    "PLAIT_ERR_CONFIG": [ValueError],
    "PLAIT_ERR_NO_MEMORY": [HorovodInternalError, MemoryError],
    "PLAIT_ERR_SYSTEM": [HorovodInternalError],
    "PLAIT_ERR_TIMEOUT": [HorovodInternalError, TimeoutError],
    "PLAIT_ERR_PEER_LOST": [HorovodInternalError],
    "PLAIT_ERR_AUTH": [HorovodInternalError],
    "PLAIT_ERR_PROTOCOL": [HorovodInternalError],
    "PLAIT_ERR_PLUGIN": [ValueError],
    "PLAIT_ERR_TRANSPORT": [HorovodInternalError],
    "PLAIT_ERR_UNSUPPORTED": [ValueError],
    "PLAIT_ERR_BUFFER_TOO_SMALL": [ValueError],
    "PLAIT_ERR_INTERNAL": [HorovodInternalError],
    "PLAIT_ERR_SHUTDOWN": [HorovodInternalError],
    "PLAIT_ERR_MISMATCH": [HorovodInternalError],
    "PLAIT_ERR_STALLED": [HorovodInternalError],
}


@pytest.mark.parametrize("result", sorted(EXPECTED_BASES))
def test_error_class_derives_from_horovods(result):
    cls = _core.ERRORS[_core.RESULTS[result]]
    assert issubclass(cls, plait.PlaitError)
    for base in EXPECTED_BASES[result]:
        assert issubclass(cls, base), "%s should be a %s" % (cls.__name__, base.__name__)
    # A bad argument is not a failure of the job: Horovod's elastic mode
    # resets on HorovodInternalError, and must not for these.
    if HorovodInternalError not in EXPECTED_BASES[result]:
        assert not issubclass(cls, HorovodInternalError), cls
        assert not issubclass(cls, RuntimeError), cls
    e = cls(_core.RESULTS[result], "the message")
    assert str(e) == "the message" and e.name == result


def test_every_result_code_is_mapped():
    assert set(EXPECTED_BASES) == set(_core.RESULTS) - {"PLAIT_SUCCESS"}


def test_horovod_exception_modules():
    from plait.common.exceptions import HostsUpdatedInterrupt, HorovodVersionMismatchError
    assert issubclass(HorovodInternalError, RuntimeError)
    assert issubclass(HostsUpdatedInterrupt, RuntimeError)
    assert HostsUpdatedInterrupt(True).skip_sync is True
    assert issubclass(HorovodVersionMismatchError, ImportError)
    assert plait.torch.HorovodInternalError is HorovodInternalError
    assert plait.common.elastic.HorovodInternalError is HorovodInternalError
    assert plait.common.elastic.HostsUpdatedInterrupt is HostsUpdatedInterrupt
    assert plait.torch.basics.HorovodInternalError is HorovodInternalError


# --------------------------------------------------------------------------
# One-rank jobs in subprocesses
# --------------------------------------------------------------------------

PRELUDE = """
import json, os, sys, warnings
import torch
import plait
import plait.torch as hvd
from plait.common.exceptions import HorovodInternalError
warnings.simplefilter("error")   # shutdown must not warn when all is well

def raises(f, *classes):
    try:
        f()
    except BaseException as e:
        assert isinstance(e, classes), "%r is not a %s" % (e, classes)
        return e
    raise AssertionError("%s did not raise" % (f,))
"""


def run_job(code, env=None, timeout=120):
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                       env=env or clean_env(), capture_output=True, text=True, timeout=timeout)
    return p


def check_ok(p):
    assert p.returncode == 0 and p.stdout.strip().endswith("OK"), (p.stdout, p.stderr)


def test_life_cycle_as_horovod():
    check_ok(run_job("""
        # Before init (Horovod: queries and timeline ValueError, ops HorovodInternalError,
        # shutdown a no-op, is_initialized False).
        assert hvd.is_initialized() is False
        for q in (hvd.rank, hvd.size, hvd.local_rank, hvd.local_size, hvd.cross_rank,
                  hvd.cross_size, hvd.stop_timeline, lambda: hvd.start_timeline("/tmp/x")):
            raises(q, ValueError)
        e = raises(lambda: hvd.allreduce(torch.ones(2), name="before"), HorovodInternalError)
        assert isinstance(e, plait.NotInitializedError)
        hvd.shutdown(); hvd.shutdown()
        assert hvd.is_initialized() is False

        hvd.init()
        assert hvd.is_initialized() is True and (hvd.rank(), hvd.size()) == (0, 1)
        # A second init is a no-op, whatever comm says (Horovod ignores it) ...
        h = hvd.allreduce_async(torch.ones(3), name="in.flight")
        hvd.init(); hvd.init(comm=[0]); hvd.init(comm=[0, 5])
        assert hvd.is_initialized() and hvd.rank() == 0
        # ... and leaves operations in flight alone.
        assert hvd.synchronize(h).tolist() == [1.0, 1.0, 1.0]
        # An MPI communicator needs MPI (Horovod without MPI: ValueError).
        raises(lambda: hvd.init(comm=object()), ValueError)
        assert hvd.is_initialized()

        hvd.shutdown()
        assert hvd.is_initialized() is False
        hvd.shutdown()  # twice: nothing
        raises(hvd.rank, ValueError)
        raises(lambda: hvd.allreduce(torch.ones(2), name="after"), HorovodInternalError)

        # init after shutdown starts a new session.
        hvd.init()
        assert hvd.rank() == 0 and hvd.allreduce(torch.ones(2), name="again").tolist() == [1, 1]
        hvd.shutdown()

        # comm on a first init: all ranks is fine, a subset is refused.
        hvd.init(comm=[0]); hvd.shutdown()
        raises(lambda: hvd.init(comm=[0, 1]), NotImplementedError)
        hvd.shutdown()
        print("OK")
        """))


def test_failed_init_is_value_error_of_plaits_class():
    """Horovod: a failed init raises ValueError. plait keeps its class (here
    the rendezvous timing out) and makes it a ValueError too."""
    port = free_port()
    p = run_job("""
        e = raises(hvd.init, ValueError)
        assert isinstance(e, plait.PlaitTimeoutError) and isinstance(e, TimeoutError), type(e)
        assert type(e).__name__ == "PlaitTimeoutError" and e.name == "PLAIT_ERR_TIMEOUT"
        assert "rank 1" in str(e), str(e)
        assert not hvd.is_initialized()
        print("OK")
        """, clean_env(PLAIT_SIZE="2", PLAIT_RANK="0", PLAIT_SECRET="s" * 32,
                       PLAIT_RENDEZVOUS="127.0.0.1:%d" % port, PLAIT_START_TIMEOUT_S="1.5"))
    check_ok(p)


def test_shutdown_after_a_lost_rank_does_not_raise(tmp_path):
    """Two ranks; rank 1 leaves without shutdown. Rank 0's next operation
    raises PeerLostError, a HorovodInternalError (Horovod: "Horovod has been
    shut down ..." HorovodInternalError); shutdown() then returns (Horovod's
    never raises), reporting the loss as a RuntimeWarning."""
    port = free_port()
    code = PRELUDE + textwrap.dedent("""
        warnings.simplefilter("always")
        hvd.init()
        hvd.barrier()
        if hvd.rank() == 1:
            os._exit(0)
        e = raises(lambda: hvd.allreduce(torch.ones(2), name="lost"), HorovodInternalError)
        assert isinstance(e, plait.PeerLostError) and isinstance(e, RuntimeError), type(e).__mro__
        assert not isinstance(e, ValueError)
        assert "rank 1" in str(e), str(e)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            hvd.shutdown()
        assert not hvd.is_initialized()
        print("WARNINGS", [str(x.message)[:80] for x in w])
        print("OK")
        """)
    secret = secrets.token_hex(16)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=clean_env(PLAIT_RANK=str(r), PLAIT_SIZE="2",
                                            PLAIT_LOCAL_RANK=str(r), PLAIT_LOCAL_SIZE="2",
                                            PLAIT_RENDEZVOUS="127.0.0.1:%d" % port,
                                            PLAIT_SECRET=secret, PLAIT_TIMEOUT_S="5"))
             for r in range(2)]
    try:
        out, err = procs[0].communicate(timeout=120)
        procs[1].communicate(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert procs[0].returncode == 0 and out.strip().endswith("OK"), (out, err)


def test_timeline_as_horovod(tmp_path):
    check_ok(run_job("""
        d = %r
        hvd.init()
        def run(tag, n=4):
            for i in range(n):
                hvd.allreduce(torch.ones(4), name="%%s.%%d" %% (tag, i))
        def events(path):
            with open(path) as f:
                return json.load(f)   # valid JSON once stopped
        # mark_cycles is honoured: CYCLE instants only when asked for.
        hvd.start_timeline(os.path.join(d, "marked.json"), mark_cycles=True)
        run("m")
        hvd.stop_timeline()
        hvd.start_timeline(os.path.join(d, "plain.json"))
        run("p")
        hvd.stop_timeline()
        marked = [e for e in events(os.path.join(d, "marked.json")) if e.get("name") == "CYCLE"]
        plain = events(os.path.join(d, "plain.json"))
        assert marked, "mark_cycles=True wrote no CYCLE"
        assert not [e for e in plain if e.get("name") == "CYCLE"], "mark_cycles=False wrote CYCLE"
        assert any("ALLREDUCE" in str(e.get("name")) for e in plain)
        # Started twice: the second file replaces the first (Horovod switches files).
        hvd.start_timeline(os.path.join(d, "first.json"))
        run("f")
        hvd.start_timeline(os.path.join(d, "second.json"))
        run("s")
        hvd.stop_timeline(); hvd.stop_timeline()   # twice: nothing
        first = str(events(os.path.join(d, "first.json")))
        second = str(events(os.path.join(d, "second.json")))
        assert "f.0" in first and "s.0" not in first and "s.0" in second
        # "%%r" becomes the rank (plait's extension, as in PLAIT_TIMELINE).
        hvd.start_timeline(os.path.join(d, "tl.%%r.json"))
        run("r")
        hvd.stop_timeline()
        assert "r.0" in str(events(os.path.join(d, "tl.0.json")))
        raises(lambda: hvd.start_timeline(""), ValueError)
        raises(lambda: hvd.start_timeline(42), TypeError)
        hvd.shutdown()
        print("OK")
        """ % str(tmp_path)))


def test_build_queries():
    check_ok(run_job("""
        # Horovod (Gloo, no MPI): mpi_built False, mpi_enabled False, gloo_built True,
        # nccl_built 0 (an int: NCCL_VERSION_CODE when built), ddl/ccl/cuda/rocm False,
        # mpi_threads_supported ValueError; gloo_enabled False before init, True after.
        assert hvd.mpi_built() is False and hvd.mpi_enabled() is False
        assert hvd.gloo_built() is True
        n = hvd.nccl_built()
        assert type(n) is int
        assert (n != 0) == plait.common.basics.transport_built("nccl")
        assert hvd.ddl_built() is False and hvd.ccl_built() is False and hvd.rocm_built() is False
        assert type(hvd.cuda_built()) is bool
        raises(hvd.mpi_threads_supported, ValueError)
        assert hvd.gloo_enabled() is False
        hvd.init()
        assert hvd.gloo_enabled() is True
        raises(hvd.mpi_threads_supported, ValueError)
        hvd.shutdown()
        assert hvd.gloo_enabled() is False
        print("OK")
        """, env=clean_env(PLAIT_TRANSPORT="gloo")))  # gloo by name: auto may pick ofi


@pytest.fixture
def lonely_library(tmp_path):
    """A copy of libplait in a folder of its own, with no plugin beside it."""
    lib = os.path.realpath(_core.library_path)
    dest = tmp_path / "lib"
    dest.mkdir()
    shutil.copy2(lib, dest / "libplait.so")
    return dest


def test_gloo_built_false_without_the_plugin(lonely_library):
    """Issue 17 item 11: gloo_built() was True even without the Gloo plugin."""
    env = clean_env(PLAIT_LIBRARY=str(lonely_library / "libplait.so"))
    env.pop("PLAIT_PLUGIN_PATH", None)
    check_ok(run_job("""
        assert hvd.gloo_built() is False
        assert hvd.cuda_built() is False and hvd.nccl_built() == 0
        e = raises(hvd.init, ValueError)
        assert isinstance(e, plait.PluginError) and "gloo" in str(e), e
        print("OK")
        """, env))


@pytest.mark.parametrize("plugin,found", [("nosymbol", False), ("badabi", False),
                                          ("gloo", True)])
def test_gloo_built_loads_the_plugin_as_init_would(lonely_library, plugin, found):
    """A file named libplait-transport-gloo.so that plait_init would refuse
    (no transport table, a wrong ABI version) is not a built Gloo."""
    if plugin == "gloo":
        src = os.path.join(os.path.dirname(os.path.realpath(_core.library_path)),
                           "libplait-transport-gloo.so")
    else:
        if not BUILD:
            pytest.skip("PLAIT_TEST_BUILD_DIR is not set (ctest sets it): the test plugins "
                        "of tests/plugins/fixtures are not at hand")
        src = os.path.join(BUILD, "tests", "plugins", "libplait-transport-%s.so" % plugin)
    if not os.path.exists(src):
        pytest.skip("%s is not built" % src)
    plugins = lonely_library / "plugins"
    plugins.mkdir()
    shutil.copy2(src, plugins / "libplait-transport-gloo.so")
    env = clean_env(PLAIT_LIBRARY=str(lonely_library / "libplait.so"),
                    PLAIT_PLUGIN_PATH=str(plugins))
    check_ok(run_job("""
        assert hvd.gloo_built() is %r
        if not %r:
            e = raises(hvd.init, ValueError)
            assert isinstance(e, plait.PluginError), e
        else:
            hvd.init(); assert hvd.gloo_enabled(); hvd.shutdown()
        print("OK")
        """ % (found, found), env))


def test_process_sets_as_horovod_in_one_process():
    check_ok(run_job("""
        ps = hvd.global_process_set
        # Before init (Horovod): id 0, no ranks yet, included() ValueError.
        assert ps.process_set_id == 0 and ps.ranks == []
        raises(ps.included, ValueError)
        raises(lambda: hvd.ProcessSet(object()), ValueError)   # a communicator needs MPI
        raises(lambda: hvd.ProcessSet("ab"), ValueError)
        s = hvd.ProcessSet([2, 0])
        assert s.ranks == [0, 2] and s.process_set_id is None and s.size() is None
        assert str(s) == "ProcessSet(process_set_id=None, ranks=[0, 2], mpi_comm=None)"
        raises(lambda: hvd.init(process_sets=[ps]), ValueError)   # the global set is always there
        assert not hvd.is_initialized()

        hvd.init()
        assert ps.ranks == [0] and ps.size() == 1 and ps.rank() == 0 and ps.included() is True
        x = torch.arange(4.0)
        assert hvd.allreduce(x, process_set=ps).tolist() == x.tolist()
        assert hvd.allgather(x, process_set=ps).tolist() == x.tolist()
        assert hvd.broadcast(x, 0, process_set=ps).tolist() == x.tolist()
        assert hvd.alltoall(x, process_set=ps).tolist() == x.tolist()
        assert hvd.reducescatter(x, process_set=ps).tolist() == x.tolist()
        assert hvd.grouped_allreduce([x], process_set=ps)[0].tolist() == x.tolist()
        hvd.barrier(process_set=ps)
        other = hvd.ProcessSet([0])   # never registered: refused before anything is sent
        for op in (lambda: hvd.allreduce(x, process_set=other),
                   lambda: hvd.allreduce_async(x, process_set=other),
                   lambda: hvd.allgather(x, process_set=other),
                   lambda: hvd.broadcast(x, 0, process_set=other),
                   lambda: hvd.alltoall(x, process_set=other),
                   lambda: hvd.reducescatter(x, process_set=other),
                   lambda: hvd.grouped_allreduce([x], process_set=other),
                   lambda: hvd.barrier(process_set=other)):
            e = raises(op, ValueError)
            assert "not registered" in str(e), e
        # Horovod: adding needs dynamic process sets (ValueError); removing the global
        # set or one never registered is False.
        raises(lambda: hvd.add_process_set([0]), ValueError)
        assert hvd.remove_process_set(ps) is False and hvd.remove_process_set(other) is False
        hvd.init(process_sets="dynamic")   # a second init changes nothing (Horovod too)
        raises(lambda: hvd.add_process_set([0]), ValueError)
        hvd.shutdown()
        raises(lambda: hvd.add_process_set([0]), ValueError)   # before init

        hvd.init(process_sets="dynamic")
        raises(lambda: hvd.add_process_set([5]), ValueError)   # no rank 5
        e = raises(lambda: hvd.add_process_set([0]), ValueError)   # the global set's ranks
        assert "exists already" in str(e)
        hvd.shutdown()
        print("OK")
        """))


def test_elastic_names_work_without_init():
    """Horovod's elastic names at their module paths; making a state or
    decorating a function needs no init and runs nothing (ElasticSampler
    needs the job's size: ValueError before init, as Horovod's)."""
    from plait.torch.elastic import ElasticSampler, TorchState, run
    assert plait.torch.elastic.sampler.ElasticSampler is ElasticSampler
    assert plait.torch.elastic.state.TorchState is TorchState
    assert plait.torch.elastic.run_fn is plait.common.elastic.run_fn
    assert issubclass(TorchState, plait.common.elastic.ObjectState)
    assert plait.common.elastic.HostUpdateResult.removed == 1
    assert plait.common.elastic.HostUpdateResult.added == 2

    @run
    def train(state):
        return 1

    assert train.__name__ == "train"
    state = TorchState(model=None, epoch=3)
    assert (state.model, state.optimizer, state.epoch) == (None, None, 3)
    with pytest.raises(ValueError):
        ElasticSampler([1, 2, 3])
    assert plait.common.elastic.enabled() is False


def test_op_constants_have_horovods_values():
    """Horovod 0.28.1's horovod.torch: Average 0, Sum 1, Adasum 2, Min 3, Max 4,
    Product 5 (printed by the Horovod build of ci/lib/horovod.sh); a script
    that stores or compares them as integers sees the same numbers."""
    hvd = plait.torch
    got = (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product)
    assert got == (0, 1, 2, 3, 4, 5), got
    from plait.common.basics import c_op
    for op, name in ((hvd.Average, "average"), (hvd.Sum, "sum"), (hvd.Min, "min"),
                     (hvd.Max, "max"), (hvd.Product, "product")):
        assert c_op(op) == _core.op_code(name)
