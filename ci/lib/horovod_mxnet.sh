# Sourced by the ci/ scripts: Horovod 0.28.1 with its MXNet binding, built
# from PyPI's source distribution into a venv of its own
# ($PLAIT_CI_VENV_DIR/horovod-mxnet), for the MXNet benchmark (ci/bench-mxnet).
# The shared venvs (horovod: torch; mxnet: plait's tests) are never touched.
#
# The recipe (Horovod builds against MXNet 1.9.1 unmodified):
#  - a plain venv of Debian's /usr/bin/python3 (3.11) with mxnet==1.9.1 and
#    numpy==1.23.5 from PyPI (import mxnet fails with numpy >= 1.24:
#    np.bool), plus setuptools and wheel for Horovod's setup.py;
#  - pip install --no-cache-dir --no-binary horovod horovod==0.28.1 with the
#    Gloo controller and CPU operations, MXNet only (no PyTorch, no
#    TensorFlow, no MPI, no GPU operations); Horovod's CMake finds MXNet's
#    headers and libmxnet.so through the venv's mxnet package. make -j1
#    (MAKEFLAGS, which also stops Horovod's setup.py from passing -j8) under
#    nice -n 19, so the machine stays usable; about 90 s on 2 cores.
#
# The build log goes to $PLAIT_CI_VENV_DIR/horovod-mxnet-build.log. A failed
# build that got as far as compiling leaves
# $PLAIT_CI_VENV_DIR/horovod-mxnet.failed (what it was tried with, and why it
# failed); later calls with the same Horovod, Python and MXNet fail at once
# with that reason instead of compiling again. PLAIT_CI_HOROVOD_RETRY=1 tries
# again. Failures before compiling (no network, no venv) are quick and are not
# remembered.

PLAIT_HOROVOD_MXNET_VERSION=0.28.1
PLAIT_HOROVOD_MXNET_BASE_PYTHON=/usr/bin/python3
PLAIT_HOROVOD_MXNET_REQUIREMENTS=(mxnet==1.9.1 numpy==1.23.5 setuptools wheel)
PLAIT_HOROVOD_MXNET_DEBIAN_PACKAGES=(python3-dev python3-venv python3-pip libquadmath0 libgomp1)

# Prints the python of the Horovod MXNet venv, building it when missing.
# Progress goes to stderr; returns 1 with a one-line reason on stderr when
# Horovod's MXNet binding is not available.
plait_horovod_mxnet_python() {
  local root="${PLAIT_CI_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plait/venvs}"
  local dir="$root/horovod-mxnet" log="$root/horovod-mxnet-build.log" marker="$root/horovod-mxnet.failed"
  local base="$PLAIT_HOROVOD_MXNET_BASE_PYTHON" tried reason
  if _plait_horovod_mxnet_usable "$dir/bin/python"; then
    echo "$dir/bin/python"
    return 0
  fi
  if ! plait_ensure_packages "${PLAIT_HOROVOD_MXNET_DEBIAN_PACKAGES[@]}" >&2; then
    echo "ci: Horovod $PLAIT_HOROVOD_MXNET_VERSION (MXNet) not built: Debian packages missing (above)" >&2
    return 1
  fi
  tried="horovod $PLAIT_HOROVOD_MXNET_VERSION, python $("$base" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo "$base missing"), ${PLAIT_HOROVOD_MXNET_REQUIREMENTS[*]}"
  if [ -f "$marker" ] && [ "$(head -n 1 "$marker")" = "$tried" ] && [ "${PLAIT_CI_HOROVOD_RETRY:-0}" != 1 ]; then
    echo "ci: Horovod (MXNet) not available: $(sed -n 2p "$marker") (cached failure for $tried; log $log; PLAIT_CI_HOROVOD_RETRY=1 builds again)" >&2
    return 1
  fi
  mkdir -p "$root"
  echo "ci: building Horovod $PLAIT_HOROVOD_MXNET_VERSION (MXNet) from source into $dir ($tried; about 2 minutes on 2 cores; log $log)" >&2
  local status=0
  reason=$(_plait_horovod_mxnet_build "$dir" "$base" "$log") || status=$?
  if [ "$status" = 0 ]; then
    rm -f "$marker"
    echo "$dir/bin/python"
    return 0
  fi
  [ "$status" = 2 ] && printf '%s\n%s\n' "$tried" "$reason" >"$marker"
  echo "ci: Horovod (MXNet) not available: $reason (log $log)" >&2
  return 1
}

# True when $1 is a python with a working horovod.mxnet of the wanted version
# built with Gloo.
_plait_horovod_mxnet_usable() {
  [ -x "$1" ] && "$1" - "$PLAIT_HOROVOD_MXNET_VERSION" <<'EOF' 2>/dev/null
import sys
import horovod, horovod.mxnet as hvd
sys.exit(0 if horovod.__version__ == sys.argv[1] and hvd.gloo_built() else 1)
EOF
}

# Builds the venv $1 from python $2, logging to $3; on failure prints one
# line saying why and returns 2 when it failed compiling or after (worth
# remembering), 1 when it failed before.
_plait_horovod_mxnet_build() {
  local dir="$1" base="$2" log="$3" err
  rm -rf "$dir"
  : >"$log"
  if ! "$base" -m venv "$dir" >>"$log" 2>&1; then
    echo "$base -m venv failed"
    return 1
  fi
  echo "== $(date -u) pip install ${PLAIT_HOROVOD_MXNET_REQUIREMENTS[*]}" >>"$log"
  if ! "$dir/bin/pip" install --disable-pip-version-check "${PLAIT_HOROVOD_MXNET_REQUIREMENTS[@]}" >>"$log" 2>&1; then
    echo "pip could not install ${PLAIT_HOROVOD_MXNET_REQUIREMENTS[*]} (network?)"
    return 1
  fi
  if ! "$dir/bin/python" -c "import mxnet" >>"$log" 2>&1; then
    echo "import mxnet fails in the venv: $(tail -1 "$log" | cut -c 1-200)"
    return 1
  fi
  echo "== $(date -u) pip install horovod==$PLAIT_HOROVOD_MXNET_VERSION" >>"$log"
  if ! env -u HOROVOD_GPU_OPERATIONS -u HOROVOD_GPU_ALLREDUCE -u HOROVOD_GPU_BROADCAST \
      HOROVOD_WITH_MXNET=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
      HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_CPU_OPERATIONS=gloo \
      MAKEFLAGS="-j${PLAIT_CI_HOROVOD_JOBS:-1}" \
      nice -n 19 "$dir/bin/pip" install --no-cache-dir --disable-pip-version-check -v \
        --no-build-isolation --no-binary horovod "horovod==$PLAIT_HOROVOD_MXNET_VERSION" >>"$log" 2>&1; then
    err=$(grep -m 1 -E '(fatal )?error:|#error|CMake Error|^ERROR:' "$log" | sed -E 's/^[[:space:]]+//' | cut -c 1-240)
    echo "pip install horovod==$PLAIT_HOROVOD_MXNET_VERSION failed: ${err:-see the log}"
    grep -q -E 'Running CMake|CMAKE_BUILD_TYPE|Building CXX' "$log" && return 2
    return 1
  fi
  echo "== $(date -u) checks: horovodrun --check-build, a 2-rank allreduce" >>"$log"
  if ! "$dir/bin/horovodrun" --check-build >>"$log" 2>&1 || ! _plait_horovod_mxnet_usable "$dir/bin/python"; then
    echo "Horovod $PLAIT_HOROVOD_MXNET_VERSION installed but horovod.mxnet with Gloo does not load"
    return 2
  fi
  if ! timeout 120 "$dir/bin/horovodrun" -np 2 -H localhost:2 --gloo "$dir/bin/python" -c '
import mxnet as mx, horovod.mxnet as hvd
hvd.init()
t = hvd.allreduce(mx.nd.full((1000,), float(hvd.rank() + 1)), average=False, name="check")
assert bool((t == 3).asnumpy().all()), t[:4]
print("allreduce ok on rank", hvd.rank())' >>"$log" 2>&1; then
    echo "Horovod $PLAIT_HOROVOD_MXNET_VERSION built, but a 2-rank Gloo allreduce under horovodrun failed"
    return 2
  fi
  echo "== $(date -u) done" >>"$log"
}
