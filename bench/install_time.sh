#!/usr/bin/env bash
# Install time, cold: `pip install .` of this checkout into a fresh venv (Debian's
# python with its torch 1.13, so the same framework as Horovod's torch build), no
# ccache, a fresh build folder, CMAKE_BUILD_PARALLEL_LEVEL=JOBS (default 2) - beside
# Horovod 0.28.1's source install time as ci/lib/horovod.sh recorded it in its build log
# (the "== <date> pip install horovod==0.28.1" line and the next "== <date>" line). That
# build is not run again here (about 8 minutes on an idle machine with -j2, longer under
# ci/lib/horovod.sh's make -j1 and nice -n 19): its stored time is printed with where it
# came from; when there is no log the Horovod column says so.
#
#   bench/install_time.sh [--jobs N] [--python PY]
#
# Needs network access or pip's cache for scikit-build-core (pip's isolated build).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=2 python=/usr/bin/python3
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    *) echo "usage: $0 [--jobs N] [--python PY]" >&2; exit 2 ;;
  esac
done
log_dir=${PLAIT_CI_VENV_DIR:-$HOME/.cache/plait/venvs}
hlog=$log_dir/horovod-build.log

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv"
start=$(date +%s.%N)
if ! env -u CMAKE_ARGS CCACHE_DISABLE=1 CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
    SKBUILD_BUILD_DIR="$work/build" "$work/venv/bin/pip" install --no-cache-dir -q "$root" \
    >"$work/pip.log" 2>&1; then
  echo "install_time: pip install . failed:" >&2
  tail -20 "$work/pip.log" >&2
  exit 1
fi
end=$(date +%s.%N)
plait_s=$(echo "$end - $start" | bc)
"$work/venv/bin/plaitrun" --check-build >/dev/null

horovod="no record ($hlog absent: ci/lib/horovod.sh builds it)"
if [ -f "$hlog" ]; then
  t0=$(grep -m 1 -E '^== .* pip install horovod==' "$hlog" | sed -E 's/^== (.*) pip install.*/\1/')
  t1=$(grep -E '^== ' "$hlog" | grep -A1 -m 1 'pip install horovod==' | tail -1 |
       sed -E 's/^== (.*UTC [0-9]{4}).*/\1/')
  if [ -n "$t0" ] && [ -n "$t1" ] && [ "$t0" != "$t1" ]; then
    h_s=$(( $(date -d "$t1" +%s) - $(date -d "$t0" +%s) ))
    horovod="${h_s} s (stored: $hlog, $t0; make -j${PLAIT_CI_HOROVOD_JOBS:-1}, nice -n 19)"
  fi
fi
load=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%-44s %s\n' "cold install, $(nproc) cores, load $load" "seconds"
printf '%-44s %.0f s (pip install ., -j%s, no ccache, %s)\n' "plait $(grep -m1 -oE 'project\(plait VERSION [0-9.]+' "$root/CMakeLists.txt" | awk '{print $3}')" \
  "$plait_s" "$jobs" "$("$python" -c 'import sys; print("python " + sys.version.split()[0])')"
printf '%-44s %s\n' "Horovod 0.28.1 (torch, Gloo)" "$horovod"
