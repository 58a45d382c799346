# Sourced by the ci/ scripts: the Python interpreters plait's Python suite
# runs with.
#
#  - Debian's /usr/bin/python3 with python3-torch (torch 1.13, CPU) and
#    libopenblas0-pthread (without it that torch uses the reference BLAS and
#    is about 10x slower);
#  - a venv with torch 2.x from PyPI (a CUDA build that also runs on the CPU),
#    created on first use in $PLAIT_CI_VENV_DIR and reused while it works.
#
# $PLAIT_CI_VENV_DIR defaults to ~/.cache/plait/venvs (XDG_CACHE_HOME), outside
# the checkout, so that every clone on a machine (CI's included) shares the
# framework venvs instead of downloading gigabytes again.
: "${PLAIT_CI_VENV_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/plait/venvs}"
export PLAIT_CI_VENV_DIR

# cloudpickle: what Horovod (and plait when it is there) pickles broadcast_object
# with, so lambdas and local classes travel; the compatibility suite checks it.
PLAIT_PYTHON_DEBIAN_PACKAGES=(python3-torch python3-numpy python3-pytest libopenblas0-pthread
  python3-cloudpickle)
PLAIT_TORCH2_REQUIREMENTS=("torch>=2,<3" numpy pytest "setuptools>=70.1" cloudpickle)

# Prints the torch 2 venv's python, creating the venv when missing. Progress
# goes to stderr; returns 1 (with the reason on stderr) when it cannot.
plait_torch2_python() {
  local dir="$PLAIT_CI_VENV_DIR/torch2" base="${PLAIT_CI_VENV_PYTHON:-python3}"
  if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "import torch, pytest, numpy, cloudpickle" 2>/dev/null; then
    echo "$dir/bin/python"
    return 0
  fi
  # A working torch with a small requirement missing (one added since the venv
  # was made) is completed in place rather than downloaded again.
  if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "import torch" 2>/dev/null &&
      "$dir/bin/pip" install -q --disable-pip-version-check "${PLAIT_TORCH2_REQUIREMENTS[@]}" >&2 &&
      "$dir/bin/python" -c "import torch, pytest, numpy, cloudpickle" 2>/dev/null; then
    echo "$dir/bin/python"
    return 0
  fi
  echo "ci: creating $dir (torch 2 from PyPI, several GB; a few minutes)" >&2
  rm -rf "$dir"
  if ! "$base" -m venv "$dir" >&2; then
    echo "ci: $base cannot create a venv (python3 -m venv failed)" >&2
    return 1
  fi
  if ! "$dir/bin/pip" install -q --disable-pip-version-check "${PLAIT_TORCH2_REQUIREMENTS[@]}" >&2; then
    echo "ci: pip could not install ${PLAIT_TORCH2_REQUIREMENTS[*]} into $dir" >&2
    return 1
  fi
  echo "$dir/bin/python"
}
