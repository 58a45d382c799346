# Horovod 0.28.1 for the side-by-side comparisons with plait (docs/horovod-comparison.md,
# docs/performance.md), built from PyPI's source distribution into a venv of its own, one per
# framework. Never used by plait itself.
#
#   source ci/lib/horovod.sh; plait_horovod_python [FRAMEWORK]   (the caller's way)
#   ci/lib/horovod.sh FRAMEWORK                                 (by hand)
# FRAMEWORK is torch (the default), tensorflow or mxnet. Either prints the python of the
# framework's Horovod venv, building it when it is missing; progress goes to stderr, and when
# Horovod cannot be had it returns 1 with a one-line reason last on stderr.
#
#   FRAMEWORK   venv in $PLAIT_CI_VENV_DIR   made from                          framework           build
#   torch       horovod                      /usr/bin/python3, system packages  Debian's torch 1.13  ~8 min
#   tensorflow  horovod-tf                   ${PLAIT_CI_VENV_PYTHON:-python3}   tensorflow-cpu 2.21  ~10 min
#   mxnet       horovod-mxnet                /usr/bin/python3                   mxnet 1.9.1 (PyPI)   ~2 min
# ($PLAIT_CI_VENV_DIR: ~/.cache/plait/venvs unless set, as ci/lib/venv.sh. $PLAIT_CI_HOROVOD_DIR,
# when set, holds the Horovod venvs, their logs and failure markers instead, leaving the
# other venvs where they are: e.g. a folder with a horovod.failed marker to see what
# ci/test does when Horovod cannot be had.)
#
# The recipe, the same for the three: Horovod's sdist with the Gloo controller and CPU
# operations, that framework only (no MPI, no GPU operations); make -j1 (MAKEFLAGS, which also
# stops Horovod's setup.py from passing -j8; PLAIT_CI_HOROVOD_JOBS=N for more) under
# nice -n 19, so the machine stays usable; then `horovodrun --check-build`, the module's
# gloo_built(), and a 2-rank Gloo allreduce under horovodrun. Per framework:
#  - torch: the venv sees Debian's python3-torch (headers from libtorch-dev). Horovod 0.28.1
#    does not build against torch >= 2.1 (PyPI's torch): it compiles with -std=c++14 and
#    torch 2.1's headers require C++17 (horovod/horovod#3996, fixed after 0.28.1 by #3998,
#    never released).
#  - tensorflow: tensorflow-cpu from PyPI (it brings Keras 3) and wheel, then Horovod built
#    with --no-build-isolation (its setup.py imports the venv's TensorFlow) from an unpacked
#    copy of the sdist with one local build fix, never applied to plait:
#    horovod/tensorflow/CMakeLists.txt compiles xla_mpi_ops.cc, the XLA lowering of
#    HorovodAllreduce. With TF >= 2.6 that file includes XLA headers, and TF 2.21's
#    xla/printer.h includes highwayhash/arch_specific.h, which the tensorflow-cpu wheel does
#    not ship, so the build stops with
#      xla/printer.h:29:10: fatal error: highwayhash/arch_specific.h: No such file or directory
#    Everything in xla_mpi_ops.cc after its includes sits inside #if HAVE_GPU, so a CPU build
#    compiles nothing from it: the fix removes it from TF_SOURCES (one line).
#    horovod/tensorflow/mpi_ops.cc, the CPU ops, compiles against TF 2.21 unchanged.
#  - mxnet: mxnet 1.9.1 and numpy 1.23.5 from PyPI (import mxnet fails with numpy >= 1.24:
#    np.bool), setuptools and wheel, then Horovod with --no-build-isolation; Horovod's CMake
#    finds MXNet's headers and libmxnet.so through the venv's mxnet package.
#
# The build log goes to $PLAIT_CI_VENV_DIR/<venv>-build.log. A failed build that got as far
# as compiling leaves $PLAIT_CI_VENV_DIR/<venv>.failed: its first line says what was tried
# (Horovod, Python and the framework), its second why it failed; later calls with the same
# first line fail at once with that reason instead of compiling for minutes again.
# PLAIT_CI_HOROVOD_RETRY=1 tries again. Failures before compiling (no network, no venv) are
# quick and are not remembered.

PLAIT_HOROVOD_VERSION=0.28.1
# torch: the python whose Debian torch Horovod is built against.
PLAIT_HOROVOD_BASE_PYTHON=/usr/bin/python3
PLAIT_HOROVOD_DEBIAN_PACKAGES=(python3-torch libtorch-dev python3-dev python3-venv python3-pip pybind11-dev
  python3-numpy libopenblas0-pthread)
PLAIT_HOROVOD_TF_TENSORFLOW="tensorflow-cpu==2.21.0"
# The line of horovod/tensorflow/CMakeLists.txt the TensorFlow build fix removes.
PLAIT_HOROVOD_TF_FIX_LINE='list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc")'
PLAIT_HOROVOD_MXNET_REQUIREMENTS=(mxnet==1.9.1 numpy==1.23.5 setuptools wheel)
PLAIT_HOROVOD_MXNET_DEBIAN_PACKAGES=(python3-dev python3-venv python3-pip libquadmath0 libgomp1)

# Sets, in the caller's scope, what differs per framework: venv (the folder's name under
# $PLAIT_CI_VENV_DIR, also the stem of its log and failure marker), what (for messages), module
# (the binding), base (the python the venv is made from), minutes (the build's duration, for
# the progress line). Returns 1, saying why, for an unknown framework.
_plait_horovod_framework() {
  case "$1" in
    torch) venv=horovod what="" module=horovod.torch base="$PLAIT_HOROVOD_BASE_PYTHON" minutes=8 ;;
    tensorflow) venv=horovod-tf what=" (TensorFlow)" module=horovod.tensorflow
      base="${PLAIT_CI_VENV_PYTHON:-python3}" minutes=10 ;;
    mxnet) venv=horovod-mxnet what=" (MXNet)" module=horovod.mxnet
      base="$PLAIT_HOROVOD_BASE_PYTHON" minutes=2 ;;
    *) echo "ci: Horovod: unknown framework '$1' (torch, tensorflow or mxnet)" >&2; return 1 ;;
  esac
}

# The first line of the failure marker: what a build is tried with. Its text is the key of
# the remembered failures, so it reads as it always did for each framework.
_plait_horovod_tried() {
  local v="$PLAIT_HOROVOD_VERSION"
  case "$1" in
    torch) echo "horovod $v, $($base -c 'import sys, torch; print("python %s, torch %s" % (sys.version.split()[0], torch.__version__))' 2>/dev/null || echo "$base without torch")" ;;
    tensorflow) echo "horovod $v, $PLAIT_HOROVOD_TF_TENSORFLOW, $("$base" -c 'import sys; print("python %s" % sys.version.split()[0])' 2>/dev/null || echo "$base missing"), without xla_mpi_ops.cc" ;;
    mxnet) echo "horovod $v, python $("$base" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo "$base missing"), ${PLAIT_HOROVOD_MXNET_REQUIREMENTS[*]}" ;;
  esac
}

plait_horovod_python() {
  local framework="${1:-torch}" venv what module base minutes
  _plait_horovod_framework "$framework" || return 1
  local root="${PLAIT_CI_HOROVOD_DIR:-${PLAIT_CI_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plait/venvs}}"
  local dir="$root/$venv" log="$root/$venv-build.log" marker="$root/$venv.failed" tried reason
  if _plait_horovod_usable "$dir/bin/python" "$module"; then
    echo "$dir/bin/python"
    return 0
  fi
  local packages=()
  case "$framework" in
    torch) packages=("${PLAIT_HOROVOD_DEBIAN_PACKAGES[@]}") ;;
    mxnet) packages=("${PLAIT_HOROVOD_MXNET_DEBIAN_PACKAGES[@]}") ;;
  esac
  if [ ${#packages[@]} -gt 0 ] && ! plait_ensure_packages "${packages[@]}" >&2; then
    echo "ci: Horovod $PLAIT_HOROVOD_VERSION$what not built: Debian packages missing (above)" >&2
    return 1
  fi
  tried="$(_plait_horovod_tried "$framework")"
  if [ -f "$marker" ] && [ "$(head -n 1 "$marker")" = "$tried" ] && [ "${PLAIT_CI_HOROVOD_RETRY:-0}" != 1 ]; then
    echo "ci: Horovod$what not available: $(sed -n 2p "$marker") (cached failure for $tried; log $log; PLAIT_CI_HOROVOD_RETRY=1 builds again)" >&2
    return 1
  fi
  mkdir -p "$root"
  echo "ci: building Horovod $PLAIT_HOROVOD_VERSION$what from source into $dir ($tried; about $minutes minutes on 2 cores; log $log)" >&2
  local status=0
  reason=$(_plait_horovod_build "$framework" "$dir" "$base" "$log" "$module") || status=$?
  if [ "$status" = 0 ]; then
    rm -f "$marker"
    echo "$dir/bin/python"
    return 0
  fi
  [ "$status" = 2 ] && printf '%s\n%s\n' "$tried" "$reason" >"$marker"
  echo "ci: Horovod$what not available: $reason (log $log)" >&2
  return 1
}

# True when $1 is a python whose Horovod is the wanted version and whose binding $2
# (horovod.torch, horovod.tensorflow, horovod.mxnet) imports, built with Gloo.
_plait_horovod_usable() {
  [ -x "$1" ] && "$1" - "$PLAIT_HOROVOD_VERSION" "$2" <<'EOF' 2>/dev/null
import importlib, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import horovod
hvd = importlib.import_module(sys.argv[2])
sys.exit(0 if horovod.__version__ == sys.argv[1] and hvd.gloo_built() else 1)
EOF
}

# The 2-rank check: each rank allreduces 1000 copies of rank + 1, which must sum to 3.
_plait_horovod_check_script() {
  case "$1" in
    torch) echo '
import torch, horovod.torch as hvd
hvd.init()
t = hvd.allreduce(torch.full((1000,), float(hvd.rank() + 1)), op=hvd.Sum)
assert bool((t == 3).all()), t[:4]
print("allreduce ok on rank", hvd.rank())' ;;
    tensorflow) echo '
import tensorflow as tf, horovod.tensorflow as hvd
hvd.init()
t = hvd.allreduce(tf.fill([1000], float(hvd.rank() + 1)), op=hvd.Sum)
assert bool(tf.reduce_all(t == 3)), t[:4]
print("allreduce ok on rank", hvd.rank())' ;;
    mxnet) echo '
import mxnet as mx, horovod.mxnet as hvd
hvd.init()
t = hvd.allreduce(mx.nd.full((1000,), float(hvd.rank() + 1)), average=False, name="check")
assert bool((t == 3).asnumpy().all()), t[:4]
print("allreduce ok on rank", hvd.rank())' ;;
  esac
}

# _plait_horovod_build FRAMEWORK DIR BASE LOG MODULE: builds the venv DIR from python BASE,
# logging to LOG; on failure prints one line saying why and returns 2 when it failed compiling
# or after (worth remembering), 1 when it failed before.
_plait_horovod_build() {
  local framework="$1" dir="$2" base="$3" log="$4" module="$5" err src="" venv_args=() with
  rm -rf "$dir"
  : >"$log"
  [ "$framework" = torch ] && venv_args=(--system-site-packages)
  if ! "$base" -m venv "${venv_args[@]}" "$dir" >>"$log" 2>&1; then
    echo "$base -m venv${venv_args[*]:+ ${venv_args[*]}} failed"
    return 1
  fi
  # The framework, and what Horovod is installed from.
  local pip_args=(--no-build-isolation) target=(--no-binary horovod "horovod==$PLAIT_HOROVOD_VERSION")
  case "$framework" in
    torch)
      with=PYTORCH pip_args=()
      if ! "$dir/bin/python" -c "import torch" >>"$log" 2>&1; then
        echo "the venv does not see Debian's torch (python3-torch)"
        return 1
      fi ;;
    tensorflow)
      with=TENSORFLOW
      echo "== $(date -u) pip install $PLAIT_HOROVOD_TF_TENSORFLOW wheel" >>"$log"
      if ! nice -n 19 "$dir/bin/pip" install --disable-pip-version-check "$PLAIT_HOROVOD_TF_TENSORFLOW" wheel \
          >>"$log" 2>&1; then
        echo "pip install $PLAIT_HOROVOD_TF_TENSORFLOW failed"
        return 1
      fi
      _plait_horovod_tf_source "$dir" "$log" || return $?
      target=("$src") ;;
    mxnet)
      with=MXNET
      echo "== $(date -u) pip install ${PLAIT_HOROVOD_MXNET_REQUIREMENTS[*]}" >>"$log"
      if ! "$dir/bin/pip" install --disable-pip-version-check "${PLAIT_HOROVOD_MXNET_REQUIREMENTS[@]}" >>"$log" 2>&1; then
        echo "pip could not install ${PLAIT_HOROVOD_MXNET_REQUIREMENTS[*]} (network?)"
        return 1
      fi
      if ! "$dir/bin/python" -c "import mxnet" >>"$log" 2>&1; then
        echo "import mxnet fails in the venv: $(tail -1 "$log" | cut -c 1-200)"
        return 1
      fi ;;
  esac
  local without=() f
  for f in PYTORCH TENSORFLOW MXNET; do [ "$f" = "$with" ] || without+=("HOROVOD_WITHOUT_$f=1"); done
  echo "== $(date -u) pip install horovod==$PLAIT_HOROVOD_VERSION${src:+ from $src}" >>"$log"
  if ! env -u HOROVOD_GPU_OPERATIONS -u HOROVOD_GPU_ALLREDUCE -u HOROVOD_GPU_BROADCAST \
      "HOROVOD_WITH_$with=1" "${without[@]}" \
      HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_CPU_OPERATIONS=gloo \
      MAKEFLAGS="-j${PLAIT_CI_HOROVOD_JOBS:-1}" \
      nice -n 19 "$dir/bin/pip" install --no-cache-dir --disable-pip-version-check -v \
        "${pip_args[@]}" "${target[@]}" >>"$log" 2>&1; then
    err=$(grep -m 1 -E '(fatal )?error:|#error|CMake Error|^ERROR:' "$log" | sed -E 's/^[[:space:]]+//' | cut -c 1-240)
    [ -n "$src" ] && rm -rf "$(dirname "$src")"
    echo "pip install horovod==$PLAIT_HOROVOD_VERSION failed: ${err:-see the log}"
    grep -q -E 'Running CMake|CMAKE_BUILD_TYPE|Building CXX' "$log" && return 2
    return 1
  fi
  [ -n "$src" ] && rm -rf "$(dirname "$src")"
  echo "== $(date -u) checks: horovodrun --check-build, a 2-rank allreduce" >>"$log"
  if ! "$dir/bin/horovodrun" --check-build >>"$log" 2>&1 || ! _plait_horovod_usable "$dir/bin/python" "$module"; then
    echo "Horovod $PLAIT_HOROVOD_VERSION installed but $module with Gloo does not load"
    return 2
  fi
  if ! TF_CPP_MIN_LOG_LEVEL=2 timeout "$([ "$framework" = tensorflow ] && echo 180 || echo 120)" \
      "$dir/bin/horovodrun" -np 2 -H localhost:2 --gloo "$dir/bin/python" \
      -c "$(_plait_horovod_check_script "$framework")" >>"$log" 2>&1; then
    echo "Horovod $PLAIT_HOROVOD_VERSION built, but a 2-rank Gloo allreduce under horovodrun failed"
    return 2
  fi
  echo "== $(date -u) done" >>"$log"
}

# TensorFlow: downloads and unpacks Horovod's sdist into a new temporary folder, applies the
# local fix (the top of this file) and sets the caller's src to the unpacked source; on failure
# prints why and returns 2 when the fix did not apply (worth remembering), 1 before.
_plait_horovod_tf_source() {
  local dir="$1" log="$2" tmp cm
  tmp="$(mktemp -d)"
  echo "== $(date -u) pip download horovod==$PLAIT_HOROVOD_VERSION (sdist) into $tmp" >>"$log"
  if ! "$dir/bin/pip" download --disable-pip-version-check --no-deps --no-binary :all: \
      -d "$tmp" "horovod==$PLAIT_HOROVOD_VERSION" >>"$log" 2>&1 ||
     ! tar -xzf "$tmp/horovod-$PLAIT_HOROVOD_VERSION.tar.gz" -C "$tmp" >>"$log" 2>&1; then
    rm -rf "$tmp"
    echo "could not download and unpack horovod==$PLAIT_HOROVOD_VERSION's sdist"
    return 1
  fi
  cm="$tmp/horovod-$PLAIT_HOROVOD_VERSION/horovod/tensorflow/CMakeLists.txt"
  if [ "$(grep -c -F -x "$PLAIT_HOROVOD_TF_FIX_LINE" "$cm")" != 1 ]; then
    rm -rf "$tmp"
    echo "the local fix does not apply: $cm has no line '$PLAIT_HOROVOD_TF_FIX_LINE'"
    return 2
  fi
  grep -v -F -x "$PLAIT_HOROVOD_TF_FIX_LINE" "$cm" >"$cm.new" && mv "$cm.new" "$cm"
  echo "== $(date -u) local fix: removed from $cm: $PLAIT_HOROVOD_TF_FIX_LINE" >>"$log"
  src="$tmp/horovod-$PLAIT_HOROVOD_VERSION"
}

# Run by hand: ci/lib/horovod.sh FRAMEWORK prints that Horovod venv's python (building it
# when missing).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  [ $# = 1 ] || { echo "usage: ci/lib/horovod.sh torch|tensorflow|mxnet" >&2; exit 2; }
  source "$(dirname "$0")/deps.sh"
  plait_horovod_python "$1"
fi
