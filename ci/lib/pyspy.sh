# Sourced by the ci/ scripts: py-spy, which the soak's watchdog (tests/faults/soak)
# uses to print a hung rank's Python and native stacks together
# (py-spy dump --native). It lives in its own small venv,
# $PLAIT_CI_VENV_DIR/pyspy (one 3 MB wheel from PyPI), made on first use.
# Without it the watchdog falls back to gdb plus faulthandler.
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"

# Prints the path of the py-spy executable, making the venv when needed.
# Returns 1 with the reason on stderr when it cannot.
plait_pyspy() {
  local py
  py=$(plait_venv pyspy "py-spy from PyPI, 3 MB" \
    "import os, sys; assert os.access(os.path.join(os.path.dirname(sys.executable), 'py-spy'), os.X_OK)" \
    py-spy) || return 1
  echo "$(dirname "$py")/py-spy"
}
