"""ci/bench, the one entry of the benchmarks: --list names every suite of
ci/lib/bench/, each suite answers --help with its own text, and bad input is
refused with a clear message before anything is built or installed."""

import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SUITES = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "ci", "lib", "bench"))
                if f.endswith(".sh") and f != "common.sh")


def ci_bench(tmp_path, *args):
    env = dict(os.environ, PLAIT_BENCH_OUT=str(tmp_path))
    return subprocess.run([os.path.join(ROOT, "ci", "bench")] + list(args), env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_suites_are_there():
    assert {"all", "fusion", "horovod", "mxnet", "tensorflow", "torch", "transport"} <= set(SUITES)


def test_list_names_every_suite_with_its_summary(tmp_path):
    p = ci_bench(tmp_path, "--list")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert [line.split()[0] for line in lines] == SUITES
    for line in lines:
        assert len(line.split(None, 1)) == 2, "no summary: %r" % line


def test_help_lists_every_suite(tmp_path):
    p = ci_bench(tmp_path, "--help")
    assert p.returncode == 0, p.stderr
    for s in SUITES:
        assert "\n  %s " % s in p.stdout, s


@pytest.mark.parametrize("suite", SUITES)
def test_each_suite_has_its_own_help(tmp_path, suite):
    p = ci_bench(tmp_path, suite, "--help")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(suite + ": "), p.stdout[:200]
    assert "ci/bench %s" % ("" if suite == "all" else suite) in p.stdout


@pytest.mark.parametrize("args, words", [
    (["nope"], "no suite 'nope'"),
    (["--rounds", "0"], "--rounds '0' is not a count"),
    (["fusion", "--bogus"], "ci/bench fusion: unknown option '--bogus'"),
    (["horovod", "--steps", "3"], "ci/bench horovod: unknown option '--steps'"),
    (["all", "--ranks", "1"], "--ranks '1' is not a list of rank counts"),
    (["transport", "extra"], "ci/bench transport: unknown option 'extra'"),
])
def test_bad_input_is_refused_clearly(tmp_path, args, words):
    p = ci_bench(tmp_path, *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert words in p.stderr
    assert not [f for _, _, files in os.walk(tmp_path) for f in files], "a refused run wrote results"
