#!/usr/bin/env bash
# Install time, cold: `pip install .` of this checkout into a fresh venv (Debian's python
# with its torch 1.13, so the same framework as Horovod's torch build), no ccache, a fresh
# build folder, CMAKE_BUILD_PARALLEL_LEVEL=JOBS (default 2).
#
# With --horovod, the same run also times Horovod 0.28.1's source install the way
# ci/lib/horovod.sh builds its torch venv (fresh venv of /usr/bin/python3 seeing Debian's
# torch; HOROVOD_WITH_PYTORCH=1, HOROVOD_WITHOUT_TENSORFLOW/MXNET/MPI=1, HOROVOD_WITH_GLOO=1,
# HOROVOD_CPU_OPERATIONS=gloo; `pip install --no-cache-dir --no-binary horovod
# horovod==0.28.1`) with MAKEFLAGS=-jJOBS, the same -j as plait's, and no ccache. The two
# alternate (plait, Horovod; ROUNDS times, default 1), both under the same `nice -n NICE`
# (default 0); it prints every round, the medians and Horovod/plait. Without --horovod
# Horovod's time is the one ci/lib/horovod.sh stored in its build log (the "== <date> pip
# install horovod==0.28.1" line and the next "== <date>" line), said to be stored.
#
#   bench/install_time.sh [--jobs N] [--python PY] [--horovod] [--rounds N] [--nice N]
#
# Needs network access or pip's cache for scikit-build-core (pip's isolated build) and,
# with --horovod, for Horovod's sdist and its build requirements.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=2 python=/usr/bin/python3 horovod_run=0 rounds=1 niceness=0
hv=0.28.1
usage="usage: $0 [--jobs N] [--python PY] [--horovod] [--rounds N] [--nice N]"
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs=${2:?$usage}; shift 2 ;;
    --python) python=${2:?$usage}; shift 2 ;;
    --horovod) horovod_run=1; shift ;;
    --rounds) rounds=${2:?$usage}; shift 2 ;;
    --nice) niceness=${2:?$usage}; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
for n in "$jobs" "$rounds"; do
  case "$n" in ''|*[!0-9]*|0) echo "install_time: --jobs and --rounds take a positive integer, not '$n'" >&2; exit 2 ;; esac
done
case "$niceness" in ''|*[!0-9]*) echo "install_time: --nice takes 0..19, not '$niceness'" >&2; exit 2 ;; esac
log_dir=${PLAIT_CI_VENV_DIR:-$HOME/.cache/plait/venvs}
hlog=$log_dir/horovod-build.log

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# time_install NAME LOG CMD...: runs CMD, prints its wall time in seconds; on failure
# prints the log's tail to stderr and exits.
time_install() {
  local name="$1" log="$2" start end
  shift 2
  start=$(date +%s.%N)
  if ! "$@" >"$log" 2>&1; then
    echo "install_time: $name failed (log $log):" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

plait_round() {
  local d="$work/plait-$1"
  "$python" -m venv --system-site-packages "$d/venv"
  time_install "pip install ." "$d/pip.log" \
    env -u CMAKE_ARGS CCACHE_DISABLE=1 CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
    SKBUILD_BUILD_DIR="$d/build" nice -n "$niceness" "$d/venv/bin/pip" install --no-cache-dir -q "$root"
  "$d/venv/bin/plaitrun" --check-build >/dev/null
  rm -rf "$d/build"
}

horovod_round() {
  local d="$work/horovod-$1"
  /usr/bin/python3 -m venv --system-site-packages "$d/venv"
  time_install "pip install horovod==$hv" "$d/pip.log" \
    env -u CMAKE_ARGS -u HOROVOD_GPU_OPERATIONS -u HOROVOD_GPU_ALLREDUCE -u HOROVOD_GPU_BROADCAST \
    CCACHE_DISABLE=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
    HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1 HOROVOD_CPU_OPERATIONS=gloo MAKEFLAGS="-j$jobs" \
    nice -n "$niceness" "$d/venv/bin/pip" install --no-cache-dir --disable-pip-version-check \
    --no-binary horovod "horovod==$hv"
  "$d/venv/bin/horovodrun" --check-build >/dev/null
  rm -rf "$d"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
plait_times=() horovod_times=()
for r in $(seq 1 "$rounds"); do
  t=$(plait_round "$r")
  plait_times+=("$t")
  if [ "$horovod_run" = 1 ]; then
    t=$(horovod_round "$r")
    horovod_times+=("$t")
  fi
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

version=$(grep -m1 -oE 'project\(plait VERSION [0-9.]+' "$root/CMakeLists.txt" | awk '{print $3}')
pyver=$("$python" -c 'import sys; print("python " + sys.version.split()[0])')
echo "cold install, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'), load average at start $load0, at end $load1"
echo "plait $version: pip install . (-j$jobs, no ccache, nice -n $niceness, $pyver)"
[ "$horovod_run" = 1 ] && echo "Horovod $hv: pip install --no-cache-dir --no-binary horovod horovod==$hv (torch, Gloo, MAKEFLAGS=-j$jobs, no ccache, nice -n $niceness)"
for r in $(seq 1 "$rounds"); do
  if [ "$horovod_run" = 1 ]; then
    printf 'round %d: plait %.0f s, Horovod %.0f s\n' "$r" "${plait_times[r-1]}" "${horovod_times[r-1]}"
  else
    printf 'round %d: plait %.0f s\n' "$r" "${plait_times[r-1]}"
  fi
done
plait_s=$(printf '%s\n' "${plait_times[@]}" | median)
printf 'median: plait %.0f s' "$plait_s"
if [ "$horovod_run" = 1 ]; then
  h_s=$(printf '%s\n' "${horovod_times[@]}" | median)
  printf ', Horovod %.0f s, Horovod/plait %.2f\n' "$h_s" "$(echo "$h_s / $plait_s" | bc -l)"
  exit 0
fi
echo
horovod="no record ($hlog absent: ci/lib/horovod.sh builds it; --horovod times it in this run)"
if [ -f "$hlog" ]; then
  t0=$(grep -m 1 -E '^== .* pip install horovod==' "$hlog" | sed -E 's/^== (.*) pip install.*/\1/')
  t1=$(grep -E '^== ' "$hlog" | grep -A1 -m 1 'pip install horovod==' | tail -1 |
       sed -E 's/^== (.*UTC [0-9]{4}).*/\1/')
  if [ -n "$t0" ] && [ -n "$t1" ] && [ "$t0" != "$t1" ]; then
    h_s=$(( $(date -d "$t1" +%s) - $(date -d "$t0" +%s) ))
    horovod="${h_s} s (stored, not this run: $hlog, $t0; make -j${PLAIT_CI_HOROVOD_JOBS:-1}, nice -n 19)"
  fi
fi
echo "Horovod $hv (torch, Gloo): $horovod"
