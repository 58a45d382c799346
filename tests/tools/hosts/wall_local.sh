#!/usr/bin/env bash
# A 2-rank job on this host whose ranks' wall clock (CLOCK_REALTIME) jumps
# mid-job by libfaketime (wall.sh), the machine's clock untouched: the
# one-host sibling of matrix.sh's walljump and wallskew cells, needing no
# root when Debian's faketime is installed.
#
#   tests/tools/hosts/wall_local.sh walljump|wallskew gloo|ofi-shm|ofi-tcp
#                                   (ctest: wall_<mode>_<transport>)
#
# walljump: both ranks +1 day at the fault, -1 hour 2 s later; wallskew: rank
# 0 at -1 hour and rank 1 at +1 day from the start, swapped at the fault. The
# job must go on (host_worker run 7: every result checked, every operation
# once more at the end, no error), each rank's timeline whole and its log's
# line at shutdown stamped with the faked hour. Exit 77 (a skip, with the
# reason) without libfaketime.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mode="${1:?walljump or wallskew}"
transport="${2:?gloo, ofi-shm or ofi-tcp}"
: "${HOST_WORKER:?path of host_worker}"
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }
case "$mode" in walljump | wallskew) ;; *) die "unknown mode '$mode' (walljump, wallskew)" ;; esac
tmp="$(mktemp -d /tmp/plait-wall-XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
job=(PLAIT_RANK PLAIT_SIZE=2 PLAIT_LOCAL_SIZE=2 PLAIT_TIMEOUT_S=5 PLAIT_START_TIMEOUT_S=60)
case "$transport" in
gloo) job+=(PLAIT_TRANSPORT=gloo) ;;
ofi-shm) job+=(PLAIT_TRANSPORT=ofi FI_PROVIDER=shm) ;;
ofi-tcp) job+=(PLAIT_TRANSPORT=ofi "FI_PROVIDER=tcp;ofi_rxm" FI_TCP_IFACE=lo) ;;
*) die "unknown transport '$transport' (gloo, ofi-shm, ofi-tcp)" ;;
esac
# shellcheck source=wall.sh
. "$here/wall.sh"
wall_setup
if [ "$mode" = walljump ]; then wall_set "+0" "+0"; else wall_set "-1h" "+1d"; fi
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
secret="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
for r in 0 1; do
  wall_vars $((r + 1))
  env "${job[@]/#PLAIT_RANK/PLAIT_RANK=$r}" PLAIT_LOCAL_RANK=$r PLAIT_RENDEZVOUS=127.0.0.1:$port \
    PLAIT_SECRET="$secret" "${WALL_VARS[@]}" "$HOST_WORKER" run 7 >"$tmp/out.$r" 2>&1 &
  pids+=($!)
done
for r in 0 1; do
  for _ in $(seq 1 600); do grep -q '^ready' "$tmp/out.$r" 2>/dev/null && break; sleep 0.1; done
  grep -q '^ready' "$tmp/out.$r" || { tail -n 5 "$tmp"/out.*; die "rank $r never got ready"; }
done
sleep 1
if [ "$mode" = walljump ]; then
  wall_set "+1d" "+1d"; sleep 2; wall_set "-1h" "-1h"
else
  wall_set "+1d" "-1h"
fi
status=0
for r in 0 1; do
  rc=0
  timeout 60 tail --pid="${pids[$r]}" -f /dev/null || { echo "rank $r: still running 60 s after the fault (a hang)"; status=1; }
  wait "${pids[$r]}" || rc=$?
  if ! grep -q '^done' "$tmp/out.$r" || [ $rc != 0 ]; then
    echo "rank $r: exit $rc, not done:"; tail -n 5 "$tmp/out.$r"; status=1; continue
  fi
  off=-3600
  [ "$mode" = wallskew ] && [ $r = 0 ] && off=0 # rank 0 ends at +1 day: the real hour
  wall_check_rank $r "$tmp/out.$r" $off || status=1
done
[ $status = 0 ] || die "$mode over $transport"
echo "PASS: $mode over $transport: went on ($(grep -h '^done' "$tmp/out.0")" \
  "steps), timelines whole, logs stamped with the faked clock"
