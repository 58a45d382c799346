# Sourced by the ci/ scripts: the MXNet venv plait.mxnet is built and tested
# with (docs/mxnet.md), created on first use in $PLAIT_CI_VENV_DIR/mxnet and
# reused while it works.
#
#  - mxnet 1.9.1 (its last release) from PyPI, with numpy pinned to 1.23.5:
#    pip would pick numpy 1.26 (mxnet asks only numpy<2), and `import mxnet`
#    fails with numpy >= 1.24 (np.bool is gone);
#  - the wheel bundles OpenBLAS and libgfortran; libquadmath0 and libgomp1
#    come from Debian (PLAIT_MXNET_DEBIAN_PACKAGES, for plait_ensure_packages).
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"

PLAIT_MXNET_DEBIAN_PACKAGES=(libquadmath0 libgomp1 python3-venv)
PLAIT_MXNET_REQUIREMENTS=(mxnet==1.9.1 numpy==1.23.5 pytest cloudpickle)

# Prints the MXNet venv's python, creating or completing the venv when needed
# (ci/lib/venv.sh). Returns 1 with the reason on stderr when it cannot.
plait_mxnet_python() {
  plait_venv mxnet "${PLAIT_MXNET_REQUIREMENTS[*]} from PyPI, about 70 MB" \
    "import mxnet, pytest, numpy, cloudpickle" "${PLAIT_MXNET_REQUIREMENTS[@]}"
}
