#!/usr/bin/env python3
"""pip install's end-to-end checks (docs/install.md), one ctest per case:

    pip_wheel.py build     pip wheel the checkout ONCE per run, with a Python where
                           TensorFlow is importable (a fresh venv reading the tf
                           venv's site-packages through a .pth file: that venv is
                           never modified), so the wheel holds the TF adapter
    pip_wheel.py torch     a fresh venv of Debian's python (torch 1.13 through
                           --system-site-packages), the wheel installed, no source
                           tree: a 2-rank plait.torch job from an empty folder, the
                           libraries loaded from the venv, plait.info, --check-build,
                           a C program built with pkg-config and CMake against the venv
    pip_wheel.py tf        the same for a 2-rank plait.tensorflow job
    pip_wheel.py switches  PLAIT_WITHOUT_OFI / HOROVOD_WITHOUT_MXNET / HOROVOD_WITHOUT_MPI
                           / PLAIT_WITH_NCCL honoured and reported in a second wheel (where
                           /usr/local/cuda holds nvcc and nccl.h, NCCL must be built)
    pip_wheel.py bad       PLAIT_WITH_TENSORFLOW=1 without TensorFlow, contradicting
                           switches, HOROVOD_WITH_MPI=1, CXX naming no compiler, an MXNet,
                           a TensorFlow and a torch outside the supported ranges,
                           PLAIT_WITH_OFI=1 without libfabric's pkg-config file (as
                           without libfabric-dev): the install fails naming why

Environment: PLAIT_PACKAGING_DIR (the work folder, in the build tree),
PLAIT_SOURCE_DIR, PLAIT_TF_VENV (the tf venv: $PLAIT_CI_VENV_DIR/tf, default
~/.cache/plait/venvs/tf, as ci/lib/tensorflow.sh makes it).
Exit 77 (skipped) only when the tf venv does not exist.
"""
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

WORK = os.environ["PLAIT_PACKAGING_DIR"]
SOURCE = os.environ["PLAIT_SOURCE_DIR"]
TF_VENV = os.environ.get("PLAIT_TF_VENV") or os.path.join(
    os.environ.get("PLAIT_CI_VENV_DIR") or os.path.expanduser("~/.cache/plait/venvs"), "tf")
DEBIAN_PYTHON = "/usr/bin/python3"
WHEELHOUSE = os.path.join(WORK, "wheelhouse")  # scikit-build-core and its dependencies
WHEELS = os.path.join(WORK, "wheels")
SKIP = 77
CUDA = "/usr/local/cuda"  # where CMake's FindCUDAToolkit looks last


def nccl_here():
    """The CUDA toolkit and NCCL are installed (no GPU needed): pip must build NCCL."""
    return os.path.exists(os.path.join(CUDA, "bin", "nvcc")) and \
        os.path.exists(os.path.join(CUDA, "include", "nccl.h"))


def run(cmd, env=None, cwd=None, timeout=900, check=True):
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        sys.exit("FAILED (%d): %s\n%s\n%s" % (p.returncode, " ".join(cmd), p.stdout[-6000:],
                                               p.stderr[-6000:]))
    return p


def expect(cond, what, text=""):
    if not cond:
        sys.exit("FAILED: %s\n%s" % (what, text[-6000:]))
    print("ok:", what)


def tf_base_python():
    """The Python the tf venv was made from (its pyvenv.cfg's home)."""
    cfg = os.path.join(TF_VENV, "pyvenv.cfg")
    if not os.path.exists(cfg):
        print("SKIP: no tf venv at %s (ci/lib/tensorflow.sh makes it)" % TF_VENV)
        sys.exit(SKIP)
    home = dict(l.split(" = ", 1) for l in open(cfg).read().splitlines() if " = " in l)["home"]
    return os.path.join(home, "python3")


def fresh_venv(path, base, system_site=False, pth=None):
    """A new venv at path; pth: a site-packages folder made importable in it."""
    shutil.rmtree(path, ignore_errors=True)
    run([base, "-m", "venv"] + (["--system-site-packages"] if system_site else []) + [path])
    if pth:
        site = run([os.path.join(path, "bin", "python"), "-c",
                    "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip()
        with open(os.path.join(site, "plait_test_tf.pth"), "w") as f:
            f.write(pth + "\n")
    return os.path.join(path, "bin", "python")


def tf_site():
    return glob.glob(os.path.join(TF_VENV, "lib", "python3*", "site-packages"))[0]


def build_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PLAIT_WITH", "HOROVOD_WITH", "PYTHONPATH"))}
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=WHEELHOUSE,
               CMAKE_ARGS="-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    env.update(extra or {})
    return env


def pip_wheel(python, out, build_dir, extra_env=None, check=True):
    os.makedirs(out, exist_ok=True)
    env = build_env(dict(extra_env or {}, SKBUILD_BUILD_DIR=build_dir))
    return run([python, "-m", "pip", "wheel", "-v", "--no-deps", "-w", out, SOURCE], env=env,
               check=check)


def the_wheel(folder=WHEELS):
    found = glob.glob(os.path.join(folder, "plait-*.whl"))
    expect(len(found) == 1, "one wheel in %s (the 'build' case makes it)" % folder, str(found))
    return found[0]


def case_build():
    os.makedirs(WHEELHOUSE, exist_ok=True)
    if not glob.glob(os.path.join(WHEELHOUSE, "scikit_build_core-*.whl")):  # once per build tree
        run([DEBIAN_PYTHON, "-m", "pip", "download", "-q", "-d", WHEELHOUSE,
             "scikit-build-core>=0.10"], env={k: v for k, v in os.environ.items()
                                              if k != "PIP_NO_INDEX"})
    builder = fresh_venv(os.path.join(WORK, "venv-builder"), tf_base_python(), pth=tf_site())
    shutil.rmtree(WHEELS, ignore_errors=True)
    p = pip_wheel(builder, WHEELS, os.path.join(WORK, "skbuild"))
    log = p.stdout + p.stderr
    with open(os.path.join(WORK, "build.log"), "w") as f:
        f.write(log)
    expect("pip build (component | built | detail)" in log, "the build prints its report", log)
    expect("TensorFlow | yes | TensorFlow 2.21.0" in log, "the TF adapter was built", log)
    names = zipfile.ZipFile(the_wheel()).namelist()
    for member in ["plait/_lib/libplait.so", "plait/_lib/libplait-transport-gloo.so",
                   "plait/_lib/libplait-transport-ofi.so", "plait/_lib/libplait_tensorflow.so",
                   "plait/_bin/plaitrun", "plait/_bin/plait-bench", "plait/include/plait/plait.h",
                   "plait/build_info.txt", "plait/torch/__init__.py", "plait/info.py"]:
        expect(member in names, "the wheel holds " + member)
    sdist_holds_the_build(builder)
    # every package under bindings/python/plait ships, without a hand list
    pkgs = sorted(os.path.relpath(d, os.path.join(SOURCE, "bindings", "python"))
                  for d, _, files in os.walk(os.path.join(SOURCE, "bindings", "python", "plait"))
                  if "__init__.py" in files)
    missing = [p for p in pkgs if p + "/__init__.py" not in names]
    expect(not missing, "every package of bindings/python/plait is in the wheel", str(missing))


def sdist_holds_the_build(builder):
    """The sdist (`pip install plait-*.tar.gz`) holds what the build reads."""
    run([builder, "-m", "pip", "install", "-q", "--no-index", "--find-links", WHEELHOUSE,
         "scikit-build-core"])
    out = os.path.join(WORK, "sdist")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    run([builder, "-c", "import sys; from scikit_build_core.build import build_sdist; "
         "build_sdist(sys.argv[1])", out], cwd=SOURCE)
    names = {n.split("/", 1)[1] for n in tarfile.open(glob.glob(out + "/plait-*.tar.gz")[0])
             .getnames() if "/" in n}
    for member in ["pyproject.toml", "CMakeLists.txt", "cmake/pip_switches.cmake",
                   "cmake/pip_preflight.cmake", "src/CMakeLists.txt",
                   "plugins/gloo/CMakeLists.txt", "bindings/tensorflow/CMakeLists.txt",
                   "bindings/python/plait/__init__.py", "include/plait/plait.h"]:
        expect(member in names, "the sdist holds " + member)
    expect(not any(n.startswith("build/") for n in names), "the sdist holds no build folder")


JOB = r"""
import os, sys
import plait.%(fw)s as hvd
%(imports)s
hvd.init()
out = %(allreduce)s
maps = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libplait' in l})
print('RANK', hvd.rank(), 'SUM', out, 'MAPS', ' '.join(maps))
hvd.shutdown()
"""


def job(venv, fw, imports, allreduce, expected):
    """A 2-rank job from an empty folder; every libplait* mapped from inside venv."""
    plaitrun = os.path.join(venv, "bin", "plaitrun")
    with tempfile.TemporaryDirectory() as empty:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_") and
               k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        code = JOB % dict(fw=fw, imports=imports, allreduce=allreduce)
        p = run([plaitrun, "-np", "2", "python", "-c", code], env=env, cwd=empty, timeout=300)
    lines = [l for l in p.stdout.splitlines() if "RANK" in l]
    expect(len(lines) == 2, "2 ranks of plait.%s ran from an empty folder" % fw, p.stdout + p.stderr)
    site = os.path.realpath(venv)
    for line in lines:
        expect(("SUM " + expected) in line, "the allreduce gives %s" % expected, line)
        maps = line.split("MAPS ", 1)[1].split()
        expect(any(m.endswith("/_lib/libplait.so") for m in maps) and
               any("libplait-transport-" in m for m in maps) and
               all(os.path.realpath(m).startswith(site + "/") for m in maps),
               "libplait and its plugin were loaded from the venv %s" % venv, line)


def install(venv_python):
    run([venv_python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", the_wheel()])


def c_user(venv):
    """A C program built against the venv with pkg-config, and CMake's find_package."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "main.c"), "w") as f:
            f.write('#include <plait/plait.h>\n#include <stdio.h>\n'
                    'int main(void) { printf("C %s\\n", plait_version_string()); return 0; }\n')
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(venv, "lib", "pkgconfig"))
        flags = run(["pkg-config", "--cflags", "--libs", "plait"], env=env).stdout.split()
        libdir = [f[2:] for f in flags if f.startswith("-L")][0]
        run(["cc", os.path.join(d, "main.c"), "-o", os.path.join(d, "m")] + flags +
            ["-Wl,-rpath," + libdir])
        out = run([os.path.join(d, "m")]).stdout
        expect(out.startswith("C 0.") and os.path.realpath(libdir).startswith(
            os.path.realpath(venv)), "a C program built with pkg-config against the venv runs", out)
        with open(os.path.join(d, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.18)\nproject(u C)\n"
                    "find_package(plait 0.1 REQUIRED)\nadd_executable(m main.c)\n"
                    "target_link_libraries(m plait::plait)\n")
        p = run(["cmake", "-S", d, "-B", os.path.join(d, "b"), "-DCMAKE_PREFIX_PATH=" + venv])
        expect("Configuring done" in p.stdout, "CMake's find_package(plait) finds the venv's", p.stdout)


def case_torch():
    venv = os.path.join(WORK, "venv-torch")
    python = fresh_venv(venv, DEBIAN_PYTHON, system_site=True)
    install(python)
    job(venv, "torch", "import torch",
        "hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum).tolist()", "[3.0, 3.0, 3.0]")
    # Without plaitrun or any PLAIT_ variable: a job of one rank finds the
    # bundled libplait and, beside it, its plugin.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    alone = run([python, "-c", "import torch, plait, plait.torch as hvd; hvd.init(); "
                 "print('ALONE', hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist(), "
                 "plait.library_path); hvd.shutdown()"], env=env, cwd="/").stdout
    expect("ALONE [1.0, 1.0] " + venv in alone and alone.rstrip().endswith("/_lib/libplait.so"),
           "one rank alone, without plaitrun, uses the bundled library", alone)
    info = run([python, "-m", "plait.info"], cwd="/").stdout
    expect("[X] PyTorch: torch 1.13" in info and "[X] Gloo (gloo): " + venv in info and
           "[ ] TensorFlow: tensorflow is not importable" in info and "Build (plait/build_info.txt):" in info and
           "    [X] TensorFlow: TensorFlow 2.21.0" in info, "python -m plait.info", info)
    cb = run([os.path.join(venv, "bin", "plaitrun"), "--check-build"], cwd="/").stdout
    expect(cb.startswith("plait v0.") and "Available Frameworks:\n    [X] TensorFlow: " + venv in cb
           and "    [X] Gloo: " + venv in cb, "plaitrun --check-build", cb)
    if nccl_here():  # found, so built without a switch, and said
        expect("    [X] NCCL: " + venv in cb, "--check-build shows the NCCL plugin", cb)
    c_user(venv)


def case_tf():
    venv = os.path.join(WORK, "venv-tf")
    python = fresh_venv(venv, tf_base_python(), pth=tf_site())
    install(python)
    job(venv, "tensorflow", "import tensorflow as tf",
        "hvd.allreduce(tf.ones([3]) * (hvd.rank() + 1), op=hvd.Sum).numpy().tolist()",
        "[3.0, 3.0, 3.0]")
    info = run([python, "-m", "plait.info"], cwd="/").stdout
    expect("[X] TensorFlow: tensorflow 2.21.0" in info and
           "adapter " + venv in info, "plait.info names the TF adapter in the venv", info)


def case_switches():
    builder = os.path.join(WORK, "venv-builder", "bin", "python")
    expect(os.path.exists(builder), "the 'build' case made " + builder)
    out = os.path.join(WORK, "wheels-switches")
    shutil.rmtree(out, ignore_errors=True)
    p = pip_wheel(builder, out, os.path.join(WORK, "skbuild-switches"), dict(
        PLAIT_WITHOUT_OFI="1", HOROVOD_WITHOUT_MXNET="1", HOROVOD_WITHOUT_MPI="1",
        PLAIT_WITHOUT_TENSORFLOW="1", PLAIT_WITH_NCCL="1"), check=False)
    log = p.stdout + p.stderr
    if p.returncode != 0 and not nccl_here():  # no CUDA or NCCL: the reason must be named
        expect("PLAIT_WITH_NCCL=1 but the NCCL transport cannot be built:" in log and
               "libnccl-dev" in log, "PLAIT_WITH_NCCL=1 fails naming what is missing", log)
        return
    expect(p.returncode == 0, "PLAIT_WITH_NCCL=1 builds (nvcc and nccl.h are in %s)" % CUDA, log)
    expect("libfabric | no | left out (PLAIT_WITHOUT_OFI=1)" in log, "WITHOUT_OFI reported", log)
    expect("MXNet | no | left out (HOROVOD_WITHOUT_MXNET=1)" in log, "HOROVOD_ alias read", log)
    expect("MPI | no | HOROVOD_WITHOUT_MPI=1 noted" in log, "HOROVOD_WITHOUT_MPI noted", log)
    expect("NCCL | yes |" in log, "PLAIT_WITH_NCCL=1 honoured", log)
    names = zipfile.ZipFile(the_wheel(out)).namelist()
    expect("plait/_lib/libplait-transport-ofi.so" not in names and
           "plait/_lib/libplait_tensorflow.so" not in names and
           "plait/_lib/libplait-transport-nccl.so" in names and
           "plait/_lib/libplait-transport-gloo.so" in names, "the wheel follows the switches",
           str(names))


def case_bad():
    # Debian's python has no TensorFlow: the configure step stops, naming it.
    venv = os.path.join(WORK, "venv-bad")
    python = fresh_venv(venv, DEBIAN_PYTHON, system_site=True)
    out = os.path.join(WORK, "wheels-bad")
    for env, says in [
        ({"PLAIT_WITH_TENSORFLOW": "1"}, "PLAIT_WITH_TENSORFLOW=1 but %s cannot import tensorflow"
         % python),
        ({"PLAIT_WITH_OFI": "1", "HOROVOD_WITHOUT_OFI": "1"}, "contradict each other"),
        ({"HOROVOD_WITH_MPI": "1"}, "HOROVOD_WITH_MPI=1 cannot be honoured: plait has no MPI"),
        ({"CXX": "/nonexistent/g++"}, "CXX=/nonexistent/g++ names no C++ compiler that exists: "
         "apt-get install g++"),
    ]:
        p = pip_wheel(python, out, os.path.join(WORK, "skbuild-bad"), env, check=False)
        log = p.stdout + p.stderr
        flat = " ".join(log.split())  # CMake wraps its error messages
        expect(p.returncode != 0 and says in flat, "%s: the install fails saying '%s'"
               % (env, says), log)
    # A framework outside the supported range (none is installed here: a package
    # that only says its version, enough for the build's probe; the venv's own
    # site-packages come before Debian's, so the fake torch hides torch 1.13).
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout
    for module, version, says in [
        ("mxnet", "2.1.0", "MXNet 2.1.0 (%s) is not supported: plait needs MXNet >= 1.6 and < 2.0 "
         "(tested: 1.9.1); pip install 'mxnet==1.9.1', or set PLAIT_WITHOUT_MXNET=1" % python),
        ("tensorflow", "2.11.0", "TensorFlow 2.11.0 (%s) is not supported: plait needs TensorFlow "
         ">= 2.12 and < 2.22 (tested: 2.21.0); pip install 'tensorflow-cpu==2.21.0', or set "
         "PLAIT_WITHOUT_TENSORFLOW=1" % python),
        ("torch", "1.12.1", "PyTorch 1.12.1 (%s) is not supported: plait needs PyTorch >= 1.13 and "
         "< 3 (tested: 1.13 (Debian) and 2.x); pip install 'torch>=2,<3', or set "
         "PLAIT_WITHOUT_PYTORCH=1" % python),
    ]:
        fake = os.path.join(site.strip(), module)
        os.makedirs(fake, exist_ok=True)
        with open(os.path.join(fake, "__init__.py"), "w") as f:
            f.write("__version__ = '%s'\n" % version)
        p = pip_wheel(python, out, os.path.join(WORK, "skbuild-bad"), check=False)
        shutil.rmtree(fake)
        flat = " ".join((p.stdout + p.stderr).split())
        expect(p.returncode != 0 and says in flat, "an unsupported %s stops the install: %s"
               % (module, says), p.stdout + p.stderr)
    # A missing Debian package: libfabric's pkg-config file hidden (pkg-config
    # searches only an empty folder), as on a machine without libfabric-dev.
    empty = tempfile.mkdtemp(dir=WORK)
    p = pip_wheel(python, out, os.path.join(WORK, "skbuild-bad"),
                  {"PLAIT_WITH_OFI": "1", "PKG_CONFIG_LIBDIR": empty}, check=False)
    os.rmdir(empty)
    flat = " ".join((p.stdout + p.stderr).split())
    says = ("PLAIT_WITH_OFI=1 but the libfabric transport cannot be built: libfabric-dev not "
            "found: apt-get install libfabric-dev")
    expect(p.returncode != 0 and says in flat, "a missing libfabric-dev stops the install: " + says,
           p.stdout + p.stderr)
    expect(not glob.glob(os.path.join(out, "*.whl")), "no wheel came out of the failed builds")


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    {"build": case_build, "torch": case_torch, "tf": case_tf, "switches": case_switches,
     "bad": case_bad}[sys.argv[1]]()
