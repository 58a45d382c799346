#!/usr/bin/env bash
# The fault matrix for jobs across hosts: one fault, one transport, on the
# network-namespace hosts of lib.sh (2 hosts x 2 ranks: ranks 0, 1 on h1,
# ranks 2, 3 on h2; rank 3 is the victim of the faults of one rank).
#
#   tests/tools/hosts/matrix.sh FAULT TRANSPORT [ROUNDS]  (ctest: hosts_matrix_*, 1 round)
#   tests/tools/hosts/matrix.sh all [ROUNDS]              every cell; a markdown table
#                                                          (exit 1 when a cell failed)
#
# FAULT    oneway    host 2's egress dropped (tc: pfifo limit 0 on its eth0),
#                    its ingress untouched: every rank fails naming a rank of
#                    the other host
#          flap      host 2's link down for FLAP_S (2 s < PLAIT_TIMEOUT_S), then
#                    up: every rank goes on, or fails naming a rank of the
#                    other host (which of the two: in the result line)
#          slow      host 2's egress shaped to 10 Mbit/s (tbf) mid-job, 1 MiB
#                    allreduces: the job goes on, every result right
#          fds       rank 3 exhausts its descriptors mid-job (host_worker:
#                    RLIMIT_NOFILE lowered, /dev/null opened until EMFILE)
#          mem       rank 3 exhausts its address space mid-job (RLIMIT_AS)
#                    for both: the job goes on, or rank 3 fails with a named
#                    error and every other rank fails naming rank 3
#          timeline  PLAIT_TIMELINE (one file per rank) on a 64 KiB tmpfs that
#                    fills: the job goes on, the write error named once a rank
#          clock     every rank in a time namespace: host 1's CLOCK_MONOTONIC
#                    and CLOCK_BOOTTIME 1 h behind the machine's, host 2's
#                    10 days ahead: the job goes on (see docs/chaos.md on why
#                    a jump of a running process's clocks cannot be made)
#          walljump  every rank's CLOCK_REALTIME jumped mid-job by libfaketime
#                    (Debian's faketime, installed by ci/lib/deps.sh; its
#                    timestamp file rewritten, FAKETIME_NO_CACHE=1,
#                    DONT_FAKE_MONOTONIC=1: the monotonic clocks stay real):
#                    +1 day at the fault, then -1 hour (25 h back) 2 s later
#          wallskew  the same, but the hosts disagree: host 1 at -1 hour and
#                    host 2 at +1 day from the start, swapped at the fault
#                    for both: the job goes on, every result right, nothing
#                    named lost; each rank's timeline and log still written
#                    (the log's time stamps show the faked clock)
# TRANSPORT gloo | ofi (libfabric "tcp;ofi_rxm")
# Env: HOST_WORKER (path; ctest sets it); for longer runs MATRIX_RUN_S (7),
# MATRIX_HANG_S (the run + 30), MATRIX_SLOW_FLOATS (262144: 1 MiB).
#
# Every check: no hang (the runner kills what still runs HANG_S after the
# fault and fails), the right rank named, errors within PLAIT_TIMEOUT_S plus
# the margin of docs/design.md ("What plait promises under faults and
# attack"), every result checked by host_worker (a wrong one fails the run).
# Prints one "RESULT | fault | transport | outcome | time | detail" line a round.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FAULTS="oneway flap slow fds mem timeline clock walljump wallskew"

if [ "${1:-}" = all ]; then # every cell, ROUNDS rounds; a table of the RESULT lines
  rounds="${2:-1}"
  echo "| fault | transport | outcome | time | detail |"
  echo "|---|---|---|---|---|"
  failed=""
  for f in $FAULTS; do
    for t in gloo ofi; do
      out="$("$here/matrix.sh" "$f" "$t" "$rounds" 2>&1)" || failed+=" $f:$t"
      echo "$out" | grep '^RESULT |' | sed 's/^RESULT //' || echo "| $f | $t | no result: $(echo "$out" | tail -n 1) | | |"
    done
  done
  [ -z "$failed" ] || { echo "FAIL:$failed" >&2; exit 1; }
  exit 0
fi

fault="${1:?fault (or all)}"
transport="${2:?transport}"
rounds="${3:-1}"
: "${HOST_WORKER:?path of host_worker}"
case " $FAULTS " in *" $fault "*) ;; *) echo "FAIL: unknown fault '$fault' ($FAULTS)"; exit 1 ;; esac
case "$transport" in gloo | ofi) ;; *) echo "FAIL: unknown transport '$transport' (gloo, ofi)"; exit 1 ;; esac
if [ "$rounds" -gt 1 ]; then # each round on fresh hosts
  status=0
  for i in $(seq 1 "$rounds"); do "$here/matrix.sh" "$fault" "$transport" 1 || status=1; done
  exit $status
fi

TIMEOUT_S=5 # PLAIT_TIMEOUT_S
MARGIN_S=5  # docs/design.md's margin
RUN_S="${MATRIX_RUN_S:-7}" # how long (rank 0's clock) a job that goes on runs
FLAP_S=2
HANG_S="${MATRIX_HANG_S:-$((RUN_S + TIMEOUT_S + MARGIN_S + 20))}" # then a rank hangs
# shellcheck source=lib.sh
. "$here/lib.sh"
# shellcheck source=wall.sh
. "$here/wall.sh"
hosts_require
command -v tc >/dev/null || skip "no 'tc' (iproute2) for the link faults"
hosts_make 2
hosts_cleanup_hook() { [ -z "${tl_dir:-}" ] || umount "$tl_dir" 2>/dev/null; }

secret="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
common_env=(PLAIT_TRANSPORT="$transport" PLAIT_START_TIMEOUT_S=60 PLAIT_SECRET="$secret"
  PLAIT_RENDEZVOUS=10.77.0.1:29500 PLAIT_TIMEOUT_S=$TIMEOUT_S)
[ "$transport" = ofi ] && common_env+=(FI_PROVIDER="tcp;ofi_rxm" FI_TCP_IFACE=eth0)
rank_pid=()
rc=()

# Starts rank r on host n with the extra variables given.
start_rank() {
  local r="$1" n="$2"; shift 2
  on_host "$n" env "${common_env[@]}" PLAIT_RANK="$r" PLAIT_SIZE=4 PLAIT_LOCAL_RANK=$((r % 2)) \
    PLAIT_LOCAL_SIZE=2 "$@" "$HOST_WORKER" run "$RUN_S" >"$tmp/out.$r" 2>&1 &
  rank_pid[$r]=$!
  pids+=($!)
}

start_job() {
  local r n extra
  if [ "$fault" = timeline ]; then
    tl_dir="$tmp/tl"
    mkdir -p "$tl_dir"
    mount -t tmpfs -o size=64k plait-timeline "$tl_dir" || skip "cannot mount a tmpfs for the timeline"
  fi
  case "$fault" in wall*)
    wall_setup
    if [ "$fault" = walljump ]; then wall_set "+0" "+0"; else wall_set "-1h" "+1d"; fi ;;
  esac
  if [ "$fault" = clock ]; then
    unshare --time --monotonic 1 true 2>/dev/null || skip "no time namespaces (unshare --time)"
    awk '{ exit !($1 > 3700) }' /proc/uptime || skip "up for less than 1 h: no room for a -1 h offset"
  fi
  for r in 0 1 2 3; do
    n=$((r / 2 + 1))
    extra=()
    [ "$fault" = slow ] && extra+=(HOST_WORKER_FLOATS="${MATRIX_SLOW_FLOATS:-262144}")
    [ "$fault" = timeline ] && extra+=(PLAIT_TIMELINE="$tl_dir/timeline.%r.json")
    case "$fault" in wall*) wall_vars "$n"; extra+=("${WALL_VARS[@]}") ;; esac
    if [ $r = 3 ] && { [ "$fault" = fds ] || [ "$fault" = mem ]; }; then
      extra+=(HOST_WORKER_FAULT="$fault" HOST_WORKER_TRIGGER="$tmp/trigger")
    fi
    if [ "$fault" = clock ]; then
      local off=-3600
      [ $n = 2 ] && off=864000
      ON_HOST_UNSHARE="--time --monotonic $off --boottime $off" start_rank $r $n "${extra[@]}"
    else
      start_rank $r $n "${extra[@]}"
    fi
  done
  for r in 0 1 2 3; do
    for _ in $(seq 1 600); do grep -q '^ready' "$tmp/out.$r" 2>/dev/null && break; sleep 0.1; done
    grep -q '^ready' "$tmp/out.$r" || { tail -n 5 "$tmp"/out.*; die "rank $r never got ready"; }
  done
}

# The fault, at t0 (after every rank did one allreduce, plus a second).
inject() {
  sleep 1
  t0="$(date +%s.%N)"
  local h2="plait-$id-h2"
  case "$fault" in
  oneway)
    # pfifo with room for no packet: everything host 2 sends is dropped
    # (this kernel has no netem, prio or tc filters; iptables and nft are absent)
    tc -n "$h2" qdisc replace dev eth0 root pfifo limit 0
    how="tc pfifo limit 0 on host 2's eth0 (egress)" ;;
  flap)
    ip -n "$sw" link set "pl${id}s2" down
    sleep "$FLAP_S"
    ip -n "$sw" link set "pl${id}s2" up
    how="host 2's link down ${FLAP_S} s, then up" ;;
  slow)
    tc -n "$h2" qdisc replace dev eth0 root tbf rate 10mbit burst 32kb latency 400ms
    how="tbf 10 Mbit/s on host 2's eth0" ;;
  fds | mem) touch "$tmp/trigger"; how="rank 3 told to exhaust its $fault" ;;
  timeline) how="a 64 KiB tmpfs under PLAIT_TIMELINE" ;;
  clock) how="host 1 at CLOCK_MONOTONIC -1 h, host 2 at +10 days (time namespaces)" ;;
  walljump)
    wall_set "+1d" "+1d"
    sleep 2
    wall_set "-1h" "-1h"
    how="CLOCK_REALTIME of every rank +1 day, 2 s later -1 h (libfaketime; monotonic real)" ;;
  wallskew)
    wall_set "+1d" "-1h"
    how="CLOCK_REALTIME of host 1 -1 h and host 2 +1 day, swapped mid-job (libfaketime)" ;;
  esac
  echo "fault $fault at $t0: $how"
}

# Waits until every rank exited or HANG_S passed; hung ranks are killed.
wait_ranks() {
  local r
  hung=""
  for _ in $(seq 1 $((HANG_S * 10))); do
    local left=0
    for r in 0 1 2 3; do kill -0 "${rank_pid[$r]}" 2>/dev/null && left=1; done
    [ $left = 0 ] && break
    sleep 0.1
  done
  for r in 0 1 2 3; do
    if kill -0 "${rank_pid[$r]}" 2>/dev/null; then
      hung+=" $r"
      kill -9 "${rank_pid[$r]}" 2>/dev/null || true
    fi
    rc[$r]=0
    wait "${rank_pid[$r]}" 2>/dev/null || rc[$r]=$?
  done
}

# The ranks rank r must name when its job fails.
want_named() {
  local r="$1"
  case "$fault" in
  fds | mem) [ "$r" = 3 ] && echo "" || echo "3" ;;
  *) [ "$r" -le 1 ] && echo "2 3" || echo "0 1" ;;
  esac
}

# Each rank's end: went on ("done"), a named error in time, or a defect
# (hang, crash, wrong data, wrong blame, late). Sets status, outcome, detail.
judge() {
  local r f line t took named want w hit went_on=0 failed=0 bad="" names=""
  status=0 detail="" max_took=0
  for r in 0 1 2 3; do
    f="$tmp/out.$r"
    case " $hung " in *" $r "*)
      echo "rank $r: still running ${HANG_S} s after the fault (a hang)"; bad+=" hang"; continue ;;
    esac
    if grep -q '^WRONG' "$f"; then echo "rank $r: $(grep -m1 '^WRONG' "$f")"; bad+=" wrong-data"; continue; fi
    if grep -q '^done' "$f" && [ "${rc[$r]}" = 0 ]; then went_on=$((went_on + 1)); continue; fi
    line="$(grep -m1 '^FAILED' "$f" || true)"
    if [ -z "$line" ]; then
      echo "rank $r: exited ${rc[$r]} with neither 'done' nor an error (a crash):"; tail -n 5 "$f"
      bad+=" crash"; detail+="; rank $r crashed (exit ${rc[$r]})"; continue
    fi
    failed=$((failed + 1))
    t="$(echo "$line" | cut -d' ' -f2)"
    took="$(awk -v a="$t" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')"
    max_took="$(awk -v a="$took" -v b="$max_took" 'BEGIN { print (a > b ? a : b) }')"
    # the verdict: the first ranks the message names ("ranks 2, 3 were lost",
    # "failed in the transport on rank 3"), not every rank it quotes after it
    named="$( (echo "$line" | grep -o 'rank[s]* [0-9][0-9, and]*' | head -n 1 | grep -o '[0-9]\+' | sort -un |
      tr '\n' ' ') || true)"
    echo "rank $r: error after ${took} s, names ranks [${named% }]: ${line#FAILED * }"
    names+=" $r->[${named% }]"
    want="$(want_named "$r")"
    if [ -z "$want" ]; then # the victim of fds or mem: its own error
      detail+="; rank $r: $(echo "${line#FAILED * }" | cut -c1-220)..."
    else
      hit=0
      for w in $want; do case " $named" in *" $w "*) hit=1 ;; esac; done
      [ $hit = 1 ] || { echo "  -> names none of $want"; bad+=" blame"; }
    fi
    if awk -v t="$took" -v m=$((TIMEOUT_S + MARGIN_S)) 'BEGIN { exit !(t > m) }'; then
      echo "  -> later than PLAIT_TIMEOUT_S=$TIMEOUT_S + $MARGIN_S s"; bad+=" late"
    fi
  done
  case "$fault:$went_on:$failed" in
  oneway:0:4 | flap:4:0 | flap:0:4 | fds:4:0 | fds:0:4 | mem:4:0 | mem:0:4) ;;
  slow:4:0 | timeline:4:0 | clock:4:0 | walljump:4:0 | wallskew:4:0) ;;
  *) bad+=" outcome"; echo "-> $went_on rank(s) went on and $failed failed: not what $fault allows" ;;
  esac
  if [ "$fault" = clock ]; then # what a wall-clock jump could reach: the clocks plait reads
    local walls
    walls="$(cd "$here/../../.." && grep -rlE \
      'CLOCK_REALTIME|gettimeofday|system_clock|[^_a-z]time\(NULL\)' src plugins | sort | tr '\n' ' ' || true)"
    if [ "$walls" != "src/engine/observe/timeline.c src/util/log.c " ]; then
      echo "the wall clock is read by: ${walls:-nothing} (expected only the log's and the" \
        "timeline header's time stamps; docs/chaos.md says why)"
      bad+=" wall-clock"
    fi
  fi
  case "$fault" in wall*) wall_judge ;; esac
  if [ "$fault" = timeline ]; then
    for r in 0 1 2 3; do
      local n
      n="$(grep -c "writing '.*timeline.*' failed" "$tmp/out.$r" || true)"
      [ "$n" = 1 ] || { echo "rank $r: the timeline write error was named $n times, not once"; bad+=" timeline-error"; }
    done
    detail+="; the write error named once a rank: $(grep -m1 -o "writing '.*" "$tmp/out.0" |
      sed "s|'[^']*/|'|" | cut -c1-100 || true)..."
  fi
  if [ $went_on = 4 ]; then outcome="went on"; elif [ $failed = 4 ]; then outcome="failed, named"
  else outcome="went on $went_on, failed $failed"; fi
  if [ -n "$bad" ]; then status=1; outcome="DEFECT ($(echo $bad | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ $//')): $outcome"; fi
  [ $went_on = 0 ] || detail+="; $(grep -h '^done' "$tmp"/out.* | sort -u | tr '\n' ' ' | sed 's/ $//') steps"
  [ $failed = 0 ] || detail+="; ranks named (rank->[named]):$names; slowest error ${max_took} s after the fault"
}

# The wall faults (wall.sh): each rank's timeline whole, its log's line at
# shutdown stamped with the faked hour (-1 h for walljump and host 2 of
# wallskew, whose host 1 ends at +1 day: the real hour).
wall_judge() {
  local r off
  for r in 0 1 2 3; do
    off=-3600
    [ "$fault" = wallskew ] && [ "$r" -le 1 ] && off=0
    wall_check_rank "$r" "$tmp/out.$r" "$off" || bad+=" wall"
  done
  detail+="; every rank's timeline whole and its log stamped with the faked clock"
}

start_job
inject
wait_ranks
t_end="$(date +%s.%N)"
judge
for r in 0 1 2 3; do grep -q '^fault ' "$tmp/out.$r" && detail="; $(grep -m1 '^fault ' "$tmp/out.$r")$detail"; done
took="$(awk -v a="$t_end" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')"
echo "RESULT | $fault | $transport | $outcome | every rank ended ${took} s after the fault | $how${detail} |"
[ $status = 0 ] || die "$fault over $transport: $outcome"
echo "PASS: $fault over $transport: $outcome"
