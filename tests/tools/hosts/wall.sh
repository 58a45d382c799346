# The wall clock of running ranks jumped by libfaketime, without touching the
# machine's clock (sourced by matrix.sh's walljump/wallskew cells and by
# wall_local.sh; not run on its own). The caller defines skip, die and tmp.
#
#   wall_setup            libfaketime installed (ci/lib/deps.sh, as root) or a
#                         skip: sets faketime_lib
#   wall_set OFF1 OFF2    group 1's and group 2's offsets (+0, +1d, -1h) into
#                         their timestamp files, each checked through `date`
#                         under the same preload against the real clock
#   wall_vars N           the variables of a rank of group N (WALL_VARS array):
#                         FAKETIME_NO_CACHE=1 (the file is read on every
#                         call), DONT_FAKE_MONOTONIC=1 and
#                         FAKETIME_FORCE_MONOTONIC_FIX=0 (the monotonic clock
#                         and the waits on it stay real: docs/chaos.md;
#                         not with WALL_EARLY_TIMEOUTS=1),
#                         PLAIT_LOG_LEVEL=info, PLAIT_TIMELINE in $tmp
#   wall_check_rank R OUT OFF_S   rank R's timeline is whole JSON, and its
#                         log's line at shutdown bears the hour of a clock
#                         OFF_S seconds off the real one; else prints why
#                         and returns 1
wall_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

wall_setup() {
  # shellcheck source=../../../ci/lib/deps.sh
  . "$wall_here/../../../ci/lib/deps.sh"
  plait_ensure_packages faketime >"$tmp/apt.log" 2>&1 ||
    skip "libfaketime (Debian package faketime) could not be installed: $(tail -n 1 "$tmp/apt.log")"
  faketime_lib="$(dpkg -L libfaketime 2>/dev/null | grep -m1 '/libfaketimeMT\.so\.1$' || true)"
  [ -n "$faketime_lib" ] || skip "no libfaketimeMT.so.1 in Debian's libfaketime"
}

wall_set() {
  local n off want seen real
  for n in 1 2; do
    off="$1"; [ $n = 2 ] && off="$2"
    echo "$off" >"$tmp/faketime.h$n.new" && mv "$tmp/faketime.h$n.new" "$tmp/faketime.h$n"
    case "$off" in +0) want=0 ;; +1d) want=86400 ;; -1h) want=-3600 ;; *) die "offset $off?" ;; esac
    seen="$(LD_PRELOAD="$faketime_lib" FAKETIME_TIMESTAMP_FILE="$tmp/faketime.h$n" \
      FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1 date +%s)"
    real="$(date +%s)"
    awk -v d=$((seen - real)) -v w="$want" 'BEGIN { exit !(d - w < 5 && w - d < 5) }' ||
      die "libfaketime did not fake the wall clock: $off read $((seen - real)) s off"
  done
}

wall_vars() {
  WALL_VARS=(LD_PRELOAD="$faketime_lib" FAKETIME_TIMESTAMP_FILE="$tmp/faketime.h$1"
    FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1 PLAIT_LOG_LEVEL=info
    PLAIT_TIMELINE="$tmp/timeline.%r.json")
  # WALL_EARLY_TIMEOUTS=1 keeps libfaketime's wrapper, whose waits on the
  # monotonic clock return ETIMEDOUT at once (plait_cond_wait_until's test; plait_wait
  # sleeps on a futex word with relative timeouts since 2026-12-07, which it does not wrap)
  [ "${WALL_EARLY_TIMEOUTS:-0}" = 1 ] || WALL_VARS+=(FAKETIME_FORCE_MONOTONIC_FIX=0)
}

wall_check_rank() {
  local r="$1" out="$2" off="$3" n last want was
  n="$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' \
    "$tmp/timeline.$r.json" 2>&1)" || { echo "rank $r: timeline not whole JSON: $n"; return 1; }
  [ "$n" -gt 4 ] || { echo "rank $r: timeline has $n events"; return 1; }
  # the timeline's closing line ("... N events written"), at shutdown
  last="$(grep 'events written' "$out" | grep -o '^\[plait [0-9][0-9]:' | tail -n 1 |
    grep -o '[0-9][0-9]' || true)"
  want="$(date -u -d "@$(($(date +%s) + off))" +%H)"
  was="$(date -u -d "@$(($(date +%s) + off - 60))" +%H)" # the line may be from the last hour
  if [ -z "$last" ]; then
    echo "rank $r: no log line at shutdown"; return 1
  elif [ "$((10#$last))" != "$((10#$want))" ] && [ "$((10#$last))" != "$((10#$was))" ]; then
    echo "rank $r: its log line at shutdown says hour $last, the faked clock's $want"; return 1
  fi
}
