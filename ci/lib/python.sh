# Sourced by the ci/ scripts: the Python interpreters plait's Python suite
# runs with.
#
#  - Debian's /usr/bin/python3 with python3-torch (torch 1.13, CPU) and
#    libopenblas0-pthread (without it that torch uses the reference BLAS and
#    is about 10x slower);
#  - a venv with torch 2.x from PyPI (a CUDA build that also runs on the CPU),
#    created on first use in $PLAIT_CI_VENV_DIR and reused while it works.

source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"

# cloudpickle: what Horovod (and plait when it is there) pickles broadcast_object
# with, so lambdas and local classes travel; the compatibility suite checks it.
PLAIT_PYTHON_DEBIAN_PACKAGES=(python3-torch python3-numpy python3-pytest libopenblas0-pthread
  python3-cloudpickle)
PLAIT_TORCH2_REQUIREMENTS=("torch>=2,<3" numpy pytest "setuptools>=70.1" cloudpickle)

# Prints the torch 2 venv's python, creating or completing the venv when
# needed (ci/lib/venv.sh). Returns 1 with the reason on stderr when it cannot.
plait_torch2_python() {
  plait_venv torch2 "torch 2 from PyPI, several GB" \
    "import torch, pytest, numpy, cloudpickle" "${PLAIT_TORCH2_REQUIREMENTS[@]}"
}
