# Sourced by the ci/ scripts: the MXNet venv plait.mxnet is built and tested
# with (docs/mxnet.md), created on first use in $PLAIT_CI_VENV_DIR/mxnet and
# reused while it works.
#
#  - mxnet 1.9.1 (its last release) from PyPI, with numpy pinned to 1.23.5:
#    pip would pick numpy 1.26 (mxnet asks only numpy<2), and `import mxnet`
#    fails with numpy >= 1.24 (np.bool is gone);
#  - the wheel bundles OpenBLAS and libgfortran; libquadmath0 and libgomp1
#    come from Debian (PLAIT_MXNET_DEBIAN_PACKAGES, for plait_ensure_packages).
: "${PLAIT_CI_VENV_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/plait/venvs}"
export PLAIT_CI_VENV_DIR

PLAIT_MXNET_DEBIAN_PACKAGES=(libquadmath0 libgomp1 python3-venv)
PLAIT_MXNET_REQUIREMENTS=(mxnet==1.9.1 numpy==1.23.5 pytest)

# Prints the MXNet venv's python, creating the venv when missing. Progress
# goes to stderr; returns 1 (with the reason on stderr) when it cannot.
plait_mxnet_python() {
  local dir="$PLAIT_CI_VENV_DIR/mxnet" base="${PLAIT_CI_VENV_PYTHON:-python3}"
  if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "import mxnet, pytest, numpy" 2>/dev/null; then
    echo "$dir/bin/python"
    return 0
  fi
  echo "ci: creating $dir (${PLAIT_MXNET_REQUIREMENTS[*]} from PyPI, about 70 MB)" >&2
  rm -rf "$dir"
  if ! "$base" -m venv "$dir" >&2; then
    echo "ci: $base cannot create a venv (python3 -m venv failed)" >&2
    return 1
  fi
  if ! "$dir/bin/pip" install -q --disable-pip-version-check "${PLAIT_MXNET_REQUIREMENTS[@]}" >&2; then
    echo "ci: pip could not install ${PLAIT_MXNET_REQUIREMENTS[*]} into $dir" >&2
    return 1
  fi
  if ! "$dir/bin/python" -c "import mxnet" >&2; then
    echo "ci: $dir has mxnet but it does not import (see above)" >&2
    return 1
  fi
  echo "$dir/bin/python"
}
