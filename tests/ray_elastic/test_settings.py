"""plait.ray.ElasticRayExecutor's arguments, without a Ray cluster: Horovod's
names and their synonyms, and each bad value refused by name (run by the Ray
venv's python; tests/ray_elastic/CMakeLists.txt)."""
import os
import stat

import pytest

from plait.ray import ElasticRayExecutor
from plait.ray import elastic

create = ElasticRayExecutor.create_settings


def test_horovod_names_and_synonyms():
    assert create().min_np == 1 and create().max_np is None
    for kw in ({"min_np": 2, "max_np": 4}, {"min_num_proc": 2, "max_num_proc": 4},
               {"min_workers": 2, "max_workers": 4}):
        s = create(**kw)
        assert (s.min_np, s.max_np, s.min_num_proc, s.max_num_proc, s.num_proc) == (2, 4, 2, 4, 2)
    s = create(reset_limit=3, elastic_timeout=20, timeout_s=5, cooldown_range=(1, 9))
    assert (s.reset_limit, s.elastic_timeout, s.timeout_s, s.cooldown_range) == (3, 20, 5, (1, 9))


@pytest.mark.parametrize("kw, words", [
    ({"min_np": 0}, "min_np=0"),
    ({"min_np": 3, "max_np": 2}, "max_np=2 is below min_np=3"),
    ({"min_np": 2, "min_workers": 3}, "given twice"),
    ({"reset_limit": -1}, "reset_limit=-1"),
    ({"elastic_timeout": 0}, "elastic_timeout=0"),
    ({"timeout_s": "x"}, "timeout_s='x'"),
    ({"cooldown_range": (5, 1)}, "cooldown_range=(5, 1)"),
])
def test_bad_settings_named(kw, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        create(**kw)


def test_bad_executor_arguments_named():
    with pytest.raises(ValueError, match="gpus_per_slot is set, but use_gpu is False"):
        ElasticRayExecutor(create(), gpus_per_slot=1)
    with pytest.raises(ValueError, match="cpus_per_slot must be above 0"):
        ElasticRayExecutor(create(), cpus_per_slot=0)
    with pytest.raises(TypeError, match="create_settings"):
        ElasticRayExecutor({"min_np": 1})
    with pytest.raises(RuntimeError, match=r"start\(\) before run\(\)"):
        ElasticRayExecutor(create()).run(lambda: 0)


class Hosts:
    """A discovery object as horovod.ray's override_discovery=False takes."""

    def find_available_hosts_and_slots(self):
        return {"10.0.0.1": 2, "10.0.0.2": 0, "10.0.0.3": 1}


def test_own_discovery_and_its_script(tmp_path):
    s = create()
    s.discovery = Hosts()
    ex = ElasticRayExecutor(s, override_discovery=False)
    ex._dir = str(tmp_path)
    ex._write_hosts(ex._hosts())
    assert (tmp_path / "hosts").read_text() == "10.0.0.1:2\n10.0.0.3:1\n"
    script = ex._script()
    assert stat.S_IMODE(os.stat(script).st_mode) == 0o700
    import subprocess
    r = subprocess.run([script], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, "10.0.0.1:2\n10.0.0.3:1\n")
    old = 1000000000  # the executor stopped updating the list: the script fails, saying so
    os.utime(tmp_path / "hosts", (old, old))
    r = subprocess.run([script], capture_output=True, text=True)
    assert r.returncode != 0 and "stopped updating" in r.stderr


def test_failure_reason_from_plaitrun_lines():
    tail = ["[0]: step", "plaitrun elastic: the job was reset 2 times: --reset-limit 2 reached; "
            "stopping", "plaitrun elastic: 1 worker(s) still running"]
    assert elastic._reason(tail, None) == "the job was reset 2 times: --reset-limit 2 reached"


def _worker(tmp_path, version, fn):
    import subprocess
    import sys
    import cloudpickle
    import plait
    (tmp_path / "fn.pkl").write_bytes(cloudpickle.dumps((fn, (20,), {"b": 1}, version or
                                                         plait.__version__)))
    env = dict(os.environ, PLAITRAY_WORKER_DIR=str(tmp_path))
    return subprocess.run([sys.executable, "-m", "plait.common.worker_main"], env=env,
                          capture_output=True, text=True, timeout=120)


def test_worker_main_runs_the_function_and_keeps_its_value(tmp_path):
    import pickle
    r = _worker(tmp_path, None, lambda a, b: a + b)
    assert r.returncode == 0, r.stderr
    assert pickle.loads((tmp_path / "result.pkl").read_bytes()) == (None, 21)  # no plait job


def test_worker_main_refuses_another_plait_version(tmp_path):
    r = _worker(tmp_path, "0.0.1-elsewhere", lambda a, b: a + b)
    assert r.returncode == 1 and not (tmp_path / "result.pkl").exists()
    assert "plait version mismatch: the driver runs plait 0.0.1-elsewhere" in r.stderr


def test_worker_main_failing_function_exits_1(tmp_path):
    def boom(a, b):
        raise KeyError("no such sample")
    r = _worker(tmp_path, None, boom)
    assert r.returncode == 1 and "KeyError: 'no such sample'" in r.stderr
