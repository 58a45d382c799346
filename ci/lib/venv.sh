# Sourced by the ci/ scripts: the framework venvs, one helper for all of them.
#
# $PLAIT_CI_VENV_DIR defaults to ~/.cache/plait/venvs (XDG_CACHE_HOME), outside
# the checkout, so that every clone on a machine (CI's included) shares the
# framework venvs instead of downloading gigabytes again.
: "${PLAIT_CI_VENV_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/plait/venvs}"
export PLAIT_CI_VENV_DIR

# plait_venv [--system-site-packages] NAME WHAT CHECK REQUIREMENT... [-- NO_DEPS_REQUIREMENT...]
# Prints the python of $PLAIT_CI_VENV_DIR/NAME once `python -c CHECK` passes
# there. A venv that fails CHECK is first completed in place (pip install of
# the requirements: a requirement added since it was made costs seconds, not
# a new download of the framework), and made anew only when that does not
# help. Requirements after `--` are installed with --no-deps. WHAT says what
# is downloaded, for the progress line. Progress goes to stderr; returns 1
# with the reason on stderr when it cannot. --system-site-packages makes a new
# venv from Debian's /usr/bin/python3 (unless PLAIT_CI_VENV_PYTHON says
# otherwise) that also sees its packages (python3-torch, numpy), so that an
# engine's venv need not download torch again.
plait_venv() {
  local site=() base="${PLAIT_CI_VENV_PYTHON:-python3}"
  if [ "$1" = --system-site-packages ]; then
    site=(--system-site-packages) base="${PLAIT_CI_VENV_PYTHON:-/usr/bin/python3}"
    shift
  fi
  local name="$1" what="$2" check="$3"
  shift 3
  local reqs=() nodeps=() r seen_sep=0
  for r in "$@"; do
    if [ "$r" = -- ]; then seen_sep=1; elif [ "$seen_sep" = 1 ]; then nodeps+=("$r"); else reqs+=("$r"); fi
  done
  local dir="$PLAIT_CI_VENV_DIR/$name"
  if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "$check" 2>/dev/null; then
    echo "$dir/bin/python"
    return 0
  fi
  if [ -x "$dir/bin/python" ] && _plait_venv_install "$dir" &&
      "$dir/bin/python" -c "$check" 2>/dev/null; then
    echo "ci: completed $dir in place (${reqs[*]} ${nodeps[*]})" >&2
    echo "$dir/bin/python"
    return 0
  fi
  echo "ci: creating $dir ($what; a few minutes at most)" >&2
  rm -rf "$dir"
  mkdir -p "$PLAIT_CI_VENV_DIR"
  if ! "$base" -m venv "${site[@]}" "$dir" >&2; then
    echo "ci: $base cannot create a venv (python3 -m venv failed)" >&2
    return 1
  fi
  if ! _plait_venv_install "$dir"; then
    echo "ci: pip could not install ${reqs[*]} ${nodeps[*]} into $dir" >&2
    return 1
  fi
  if ! "$dir/bin/python" -c "$check" >&2; then
    echo "ci: $dir was installed but fails its check: $check" >&2
    return 1
  fi
  echo "$dir/bin/python"
}

# Installs plait_venv's reqs, then nodeps, into the venv $1.
_plait_venv_install() {
  "$1/bin/pip" install -q --disable-pip-version-check "${reqs[@]}" >&2 || return 1
  [ ${#nodeps[@]} -eq 0 ] && return 0
  "$1/bin/pip" install -q --disable-pip-version-check --no-deps "${nodeps[@]}" >&2
}
