# Sourced by the ci/ scripts: the venv plait.ray is tested with,
# $PLAIT_CI_VENV_DIR/ray: Ray from PyPI (the core package only: `ray start`,
# actors and placement groups; no dashboard) and pytest, made from Debian's
# python3 with --system-site-packages so that it reuses Debian's torch 1.13
# and numpy instead of downloading torch again (ci/lib/venv.sh). Created on
# first use (about 80 MB, a minute) and reused while it works.
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
PLAIT_RAY_VERSION=2.60.0
PLAIT_RAY_REQUIREMENTS=("ray==$PLAIT_RAY_VERSION")

# Prints the Ray venv's python, creating or completing the venv when needed.
# Returns 1 with the reason on stderr when it cannot.
plait_ray_python() {
  plait_venv --system-site-packages ray "ray $PLAIT_RAY_VERSION from PyPI, about 80 MB" \
    "import ray, torch, numpy; assert ray.__version__ == '$PLAIT_RAY_VERSION', ray.__version__" \
    "${PLAIT_RAY_REQUIREMENTS[@]}"
}
