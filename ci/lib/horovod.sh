# Sourced by the ci/ scripts: Horovod, built from PyPI's source distribution
# into its own venv, for side-by-side comparisons with plait
# (docs/horovod-comparison.md).
#
# The recipe (the only one that builds here without patching Horovod):
#  - a venv of Debian's /usr/bin/python3 made with --system-site-packages,
#    so that it uses Debian's torch 1.13 (python3-torch; headers from
#    libtorch-dev, Python.h from python3-dev);
#  - pip install --no-cache-dir --no-binary horovod horovod==0.28.1 with the
#    Gloo controller and CPU operations, PyTorch only, no MPI, no GPU
#    operations; make -j1 (MAKEFLAGS, which also stops Horovod's setup.py
#    from passing -j8) under nice -n 19, so the machine stays usable;
#    about 8 minutes on 2 cores.
# Horovod 0.28.1 does not build against torch >= 2.1 (PyPI's torch): it
# compiles with -std=c++14 and torch 2.1's headers require C++17
# (horovod/horovod#3996, fixed after 0.28.1 by #3998, never released).
#
# The build log goes to $PLAIT_CI_VENV_DIR/horovod-build.log. A failed build
# that got as far as compiling leaves $PLAIT_CI_VENV_DIR/horovod.failed (what it
# was tried with, and why it failed); later calls with the same Horovod,
# Python and torch fail at once with that reason instead of compiling for
# minutes again. PLAIT_CI_HOROVOD_RETRY=1 tries again. Failures before compiling
# (no network, no venv) are quick and are not remembered.

PLAIT_HOROVOD_VERSION=0.28.1
PLAIT_HOROVOD_BASE_PYTHON=/usr/bin/python3
PLAIT_HOROVOD_DEBIAN_PACKAGES=(python3-torch libtorch-dev python3-dev python3-venv python3-pip pybind11-dev
  python3-numpy libopenblas0-pthread)

# Prints the python of the Horovod venv, building it when missing. Progress
# goes to stderr; returns 1 with a one-line reason on stderr when Horovod is
# not available.
plait_horovod_python() {
  local root="${PLAIT_CI_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plait/venvs}"
  local dir="$root/horovod" log="$root/horovod-build.log" marker="$root/horovod.failed"
  local base="$PLAIT_HOROVOD_BASE_PYTHON" tried reason
  if _plait_horovod_usable "$dir/bin/python"; then
    echo "$dir/bin/python"
    return 0
  fi
  if ! plait_ensure_packages "${PLAIT_HOROVOD_DEBIAN_PACKAGES[@]}" >&2; then
    echo "ci: Horovod $PLAIT_HOROVOD_VERSION not built: Debian packages missing (above)" >&2
    return 1
  fi
  tried="horovod $PLAIT_HOROVOD_VERSION, $($base -c 'import sys, torch; print("python %s, torch %s" % (sys.version.split()[0], torch.__version__))' 2>/dev/null || echo "$base without torch")"
  if [ -f "$marker" ] && [ "$(head -n 1 "$marker")" = "$tried" ] && [ "${PLAIT_CI_HOROVOD_RETRY:-0}" != 1 ]; then
    echo "ci: Horovod not available: $(sed -n 2p "$marker") (cached failure for $tried; log $log; PLAIT_CI_HOROVOD_RETRY=1 builds again)" >&2
    return 1
  fi
  mkdir -p "$root"
  echo "ci: building Horovod $PLAIT_HOROVOD_VERSION from source into $dir ($tried; about 8 minutes on 2 cores; log $log)" >&2
  local status=0
  reason=$(_plait_horovod_build "$dir" "$base" "$log") || status=$?
  if [ "$status" = 0 ]; then
    rm -f "$marker"
    echo "$dir/bin/python"
    return 0
  fi
  [ "$status" = 2 ] && printf '%s\n%s\n' "$tried" "$reason" >"$marker"
  echo "ci: Horovod not available: $reason (log $log)" >&2
  return 1
}

# True when $1 is a python with a working horovod.torch of the wanted version.
_plait_horovod_usable() {
  [ -x "$1" ] && "$1" - "$PLAIT_HOROVOD_VERSION" <<'EOF' 2>/dev/null
import sys
import horovod, horovod.torch as hvd
sys.exit(0 if horovod.__version__ == sys.argv[1] and hvd.gloo_built() else 1)
EOF
}

# Builds the venv $1 from python $2, logging to $3; on failure prints one
# line saying why and returns 2 when it failed compiling or after (worth
# remembering), 1 when it failed before.
_plait_horovod_build() {
  local dir="$1" base="$2" log="$3" err
  rm -rf "$dir"
  : >"$log"
  if ! "$base" -m venv --system-site-packages "$dir" >>"$log" 2>&1; then
    echo "$base -m venv --system-site-packages failed"
    return 1
  fi
  if ! "$dir/bin/python" -c "import torch" >>"$log" 2>&1; then
    echo "the venv does not see Debian's torch (python3-torch)"
    return 1
  fi
  echo "== $(date -u) pip install horovod==$PLAIT_HOROVOD_VERSION" >>"$log"
  if ! env -u HOROVOD_GPU_OPERATIONS -u HOROVOD_GPU_ALLREDUCE -u HOROVOD_GPU_BROADCAST \
      HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
      HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_CPU_OPERATIONS=gloo \
      MAKEFLAGS="-j${PLAIT_CI_HOROVOD_JOBS:-1}" \
      nice -n 19 "$dir/bin/pip" install --no-cache-dir --disable-pip-version-check -v \
        --no-binary horovod "horovod==$PLAIT_HOROVOD_VERSION" >>"$log" 2>&1; then
    err=$(grep -m 1 -E '(fatal )?error:|#error|CMake Error|^ERROR:' "$log" | sed -E 's/^[[:space:]]+//' | cut -c 1-240)
    echo "pip install horovod==$PLAIT_HOROVOD_VERSION failed: ${err:-see the log}"
    grep -q -E 'Running CMake|CMAKE_BUILD_TYPE|Building CXX' "$log" && return 2
    return 1
  fi
  echo "== $(date -u) checks: horovodrun --check-build, a 2-rank allreduce" >>"$log"
  if ! "$dir/bin/horovodrun" --check-build >>"$log" 2>&1 || ! _plait_horovod_usable "$dir/bin/python"; then
    echo "Horovod $PLAIT_HOROVOD_VERSION installed but horovod.torch with Gloo does not load"
    return 2
  fi
  if ! timeout 120 "$dir/bin/horovodrun" -np 2 -H localhost:2 --gloo "$dir/bin/python" -c '
import torch, horovod.torch as hvd
hvd.init()
t = hvd.allreduce(torch.full((1000,), float(hvd.rank() + 1)), op=hvd.Sum)
assert bool((t == 3).all()), t[:4]
print("allreduce ok on rank", hvd.rank())' >>"$log" 2>&1; then
    echo "Horovod $PLAIT_HOROVOD_VERSION built, but a 2-rank Gloo allreduce under horovodrun failed"
    return 2
  fi
  echo "== $(date -u) done" >>"$log"
}
