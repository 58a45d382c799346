# Sourced by the ci/ scripts: Horovod 0.28.1 built from PyPI's source
# distribution against TensorFlow 2.21 (tensorflow-cpu from PyPI) in a venv of
# its own, $PLAIT_CI_VENV_DIR/horovod-tf, for the TensorFlow benchmark
# (ci/bench-tensorflow, docs/performance.md). Never used by plait itself.
#
# The recipe:
#  - a venv of ${PLAIT_CI_VENV_PYTHON:-python3} (python 3.11 here) with
#    tensorflow-cpu==2.21.0 from PyPI (it brings Keras 3) and wheel;
#  - Horovod 0.28.1's sdist, with the Gloo controller and CPU operations,
#    TensorFlow only, no MPI, no GPU operations, installed with
#    --no-build-isolation (Horovod's setup.py must import the venv's
#    TensorFlow); make -j1 (MAKEFLAGS) under nice -n 19; about 10 minutes on
#    2 cores.
#
# The local build fix (applied to an unpacked copy of the sdist, never to
# plait): horovod/tensorflow/CMakeLists.txt compiles xla_mpi_ops.cc, the XLA
# lowering of HorovodAllreduce. With TF >= 2.6 that file includes XLA headers,
# and TF 2.21's xla/printer.h includes highwayhash/arch_specific.h, which the
# tensorflow-cpu wheel does not ship, so the build stops with
#   xla/printer.h:29:10: fatal error: highwayhash/arch_specific.h: No such file or directory
# Everything in xla_mpi_ops.cc after its includes sits inside #if HAVE_GPU, so
# a CPU build compiles nothing from it: the fix removes it from TF_SOURCES
# (one line). horovod/tensorflow/mpi_ops.cc, the CPU ops, compiles against
# TF 2.21 unchanged (with deprecation warnings).
#
# As ci/lib/horovod.sh: the log goes to $PLAIT_CI_VENV_DIR/horovod-tf-build.log;
# a failure that got as far as compiling leaves
# $PLAIT_CI_VENV_DIR/horovod-tf.failed (what was tried, and why it failed),
# and later calls with the same Horovod, Python and TensorFlow fail at once
# with that reason. PLAIT_CI_HOROVOD_RETRY=1 tries again. Failures before
# compiling (no network, no venv) are quick and are not remembered.

PLAIT_HOROVOD_TF_VERSION=0.28.1
PLAIT_HOROVOD_TF_TENSORFLOW="tensorflow-cpu==2.21.0"
# The line of horovod/tensorflow/CMakeLists.txt the fix removes.
PLAIT_HOROVOD_TF_FIX_LINE='list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc")'

# Prints the python of the Horovod TensorFlow venv, building it when missing.
# Progress goes to stderr; returns 1 with a one-line reason on stderr when
# Horovod is not available.
plait_horovod_tf_python() {
  local root="${PLAIT_CI_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plait/venvs}"
  local dir="$root/horovod-tf" log="$root/horovod-tf-build.log" marker="$root/horovod-tf.failed"
  local base="${PLAIT_CI_VENV_PYTHON:-python3}" tried reason
  if _plait_horovod_tf_usable "$dir/bin/python"; then
    echo "$dir/bin/python"
    return 0
  fi
  tried="horovod $PLAIT_HOROVOD_TF_VERSION, $PLAIT_HOROVOD_TF_TENSORFLOW, $("$base" -c 'import sys; print("python %s" % sys.version.split()[0])' 2>/dev/null || echo "$base missing"), without xla_mpi_ops.cc"
  if [ -f "$marker" ] && [ "$(head -n 1 "$marker")" = "$tried" ] && [ "${PLAIT_CI_HOROVOD_RETRY:-0}" != 1 ]; then
    echo "ci: Horovod (TensorFlow) not available: $(sed -n 2p "$marker") (cached failure for $tried; log $log; PLAIT_CI_HOROVOD_RETRY=1 builds again)" >&2
    return 1
  fi
  mkdir -p "$root"
  echo "ci: building Horovod $PLAIT_HOROVOD_TF_VERSION for $PLAIT_HOROVOD_TF_TENSORFLOW into $dir (about 10 minutes on 2 cores; log $log)" >&2
  local status=0
  reason=$(_plait_horovod_tf_build "$dir" "$base" "$log") || status=$?
  if [ "$status" = 0 ]; then
    rm -f "$marker"
    echo "$dir/bin/python"
    return 0
  fi
  [ "$status" = 2 ] && printf '%s\n%s\n' "$tried" "$reason" >"$marker"
  echo "ci: Horovod (TensorFlow) not available: $reason (log $log)" >&2
  return 1
}

# True when $1 is a python with a working horovod.tensorflow of the wanted
# version, built with Gloo.
_plait_horovod_tf_usable() {
  [ -x "$1" ] && "$1" - "$PLAIT_HOROVOD_TF_VERSION" <<'EOF' 2>/dev/null
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import horovod, horovod.tensorflow as hvd
sys.exit(0 if horovod.__version__ == sys.argv[1] and hvd.gloo_built() else 1)
EOF
}

# Builds the venv $1 from python $2, logging to $3; on failure prints one
# line saying why and returns 2 when it failed compiling or after (worth
# remembering), 1 when it failed before.
_plait_horovod_tf_build() {
  local dir="$1" base="$2" log="$3" err src
  rm -rf "$dir"
  : >"$log"
  if ! "$base" -m venv "$dir" >>"$log" 2>&1; then
    echo "$base -m venv failed"
    return 1
  fi
  echo "== $(date -u) pip install $PLAIT_HOROVOD_TF_TENSORFLOW wheel" >>"$log"
  if ! nice -n 19 "$dir/bin/pip" install --disable-pip-version-check "$PLAIT_HOROVOD_TF_TENSORFLOW" wheel \
      >>"$log" 2>&1; then
    echo "pip install $PLAIT_HOROVOD_TF_TENSORFLOW failed"
    return 1
  fi
  src="$(mktemp -d)"
  echo "== $(date -u) pip download horovod==$PLAIT_HOROVOD_TF_VERSION (sdist) into $src" >>"$log"
  if ! "$dir/bin/pip" download --disable-pip-version-check --no-deps --no-binary :all: \
      -d "$src" "horovod==$PLAIT_HOROVOD_TF_VERSION" >>"$log" 2>&1 ||
     ! tar -xzf "$src/horovod-$PLAIT_HOROVOD_TF_VERSION.tar.gz" -C "$src" >>"$log" 2>&1; then
    rm -rf "$src"
    echo "could not download and unpack horovod==$PLAIT_HOROVOD_TF_VERSION's sdist"
    return 1
  fi
  src="$src/horovod-$PLAIT_HOROVOD_TF_VERSION"
  # The local fix (see the top of this file): drop xla_mpi_ops.cc, GPU-only
  # code whose XLA includes do not compile against TF 2.21's headers.
  local cm="$src/horovod/tensorflow/CMakeLists.txt"
  if [ "$(grep -c -F -x "$PLAIT_HOROVOD_TF_FIX_LINE" "$cm")" != 1 ]; then
    rm -rf "$(dirname "$src")"
    echo "the local fix does not apply: $cm has no line '$PLAIT_HOROVOD_TF_FIX_LINE'"
    return 2
  fi
  grep -v -F -x "$PLAIT_HOROVOD_TF_FIX_LINE" "$cm" >"$cm.new" && mv "$cm.new" "$cm"
  echo "== $(date -u) local fix: removed from $cm: $PLAIT_HOROVOD_TF_FIX_LINE" >>"$log"
  echo "== $(date -u) pip install horovod==$PLAIT_HOROVOD_TF_VERSION from $src" >>"$log"
  if ! env -u HOROVOD_GPU_OPERATIONS -u HOROVOD_GPU_ALLREDUCE -u HOROVOD_GPU_BROADCAST \
      HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
      HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_CPU_OPERATIONS=gloo \
      MAKEFLAGS="-j${PLAIT_CI_HOROVOD_JOBS:-1}" \
      nice -n 19 "$dir/bin/pip" install --no-cache-dir --disable-pip-version-check -v \
        --no-build-isolation "$src" >>"$log" 2>&1; then
    err=$(grep -m 1 -E '(fatal )?error:|#error|CMake Error|^ERROR:' "$log" | sed -E 's/^[[:space:]]+//' | cut -c 1-240)
    rm -rf "$(dirname "$src")"
    echo "pip install horovod==$PLAIT_HOROVOD_TF_VERSION failed: ${err:-see the log}"
    grep -q -E 'Running CMake|CMAKE_BUILD_TYPE|Building CXX' "$log" && return 2
    return 1
  fi
  rm -rf "$(dirname "$src")"
  echo "== $(date -u) checks: horovodrun --check-build, a 2-rank allreduce" >>"$log"
  if ! "$dir/bin/horovodrun" --check-build >>"$log" 2>&1 || ! _plait_horovod_tf_usable "$dir/bin/python"; then
    echo "Horovod $PLAIT_HOROVOD_TF_VERSION installed but horovod.tensorflow with Gloo does not load"
    return 2
  fi
  if ! TF_CPP_MIN_LOG_LEVEL=2 timeout 180 "$dir/bin/horovodrun" -np 2 -H localhost:2 --gloo "$dir/bin/python" -c '
import tensorflow as tf, horovod.tensorflow as hvd
hvd.init()
t = hvd.allreduce(tf.fill([1000], float(hvd.rank() + 1)), op=hvd.Sum)
assert bool(tf.reduce_all(t == 3)), t[:4]
print("allreduce ok on rank", hvd.rank())' >>"$log" 2>&1; then
    echo "Horovod $PLAIT_HOROVOD_TF_VERSION built, but a 2-rank Gloo allreduce under horovodrun failed"
    return 2
  fi
  echo "== $(date -u) done" >>"$log"
}
