#!/usr/bin/env bash
# Per-call cost in instructions (callgrind), old tree against new: a figure
# that does not move with the machine's load, unlike wall-clock timings.
#
#   bench/percall_instructions.sh OLD_BUILD OLD_REV NEW_BUILD [ROWS...]
#
# OLD_BUILD, NEW_BUILD: build folders with lib/libplait.so and the gloo and ofi
# plugins (RelWithDebInfo, built the same way). OLD_REV: the commit OLD_BUILD
# was built from (its include/ and bindings/python are taken by git archive).
# ROWS (default all): c-lone-ofi c-lone-gloo c-burst-ofi c-burst-gloo py-torch
#
# C rows: bench/percall/percall.c, 2 ranks on this host, each under
# callgrind; a row is (Ir(N2 steps) - Ir(N1 steps)) / (N2 - N1) per rank, so
# start-up and shutdown cancel out. lone: one cached 4 KiB allreduce per step;
# burst: 64 x 64 KiB allreduces (fused) per step.
# py-torch: /usr/bin/python3, 1 rank, plait.torch allreduce_async_ of a
# 64 KiB tensor and the synchronize of it once finished (polled, uncounted),
# per call, the two together; only the submit and the synchronize are counted,
# on the calling thread (the coordinator's work is in the C rows),
# with each tree's bindings/python against its own libplait
# (bench/percall/callgrind_toggle.c; torch's import is not instrumented).
# Environment: PERCALL_N1/N2 (C lone steps, default 500/1500), PERCALL_B1/B2
# (burst steps, 20/60), PERCALL_P1/P2 (py calls, 100/300), PERCALL_KEEP=1.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,24p "$0"; exit 2; }
OLD_BUILD=$(realpath "$1"); OLD_REV=$2; NEW_BUILD=$(realpath "$3"); shift 3
ROWS=${*:-c-lone-ofi c-lone-gloo c-burst-ofi c-burst-gloo py-torch}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N1=${PERCALL_N1:-500}; N2=${PERCALL_N2:-1500}
B1=${PERCALL_B1:-20}; B2=${PERCALL_B2:-60}
P1=${PERCALL_P1:-100}; P2=${PERCALL_P2:-300}
TMP=$(mktemp -d /tmp/percall.XXXXXX)
if [ "${PERCALL_KEEP:-0}" = 1 ]; then echo "keeping $TMP"; else trap 'rm -rf "$TMP"' EXIT; fi

mkdir -p "$TMP/old-src" "$TMP/new-src"
git -C "$ROOT" archive "$OLD_REV" include bindings/python | tar -x -C "$TMP/old-src"
cp -r "$ROOT/include" "$ROOT/bindings" "$TMP/new-src/"
for v in old new; do
  b=$OLD_BUILD; [ $v = new ] && b=$NEW_BUILD
  cc -O2 -I"$TMP/$v-src/include" "$ROOT/bench/percall/percall.c" -o "$TMP/percall-$v" \
     -L"$b/lib" -Wl,-rpath,"$b/lib" -lplait
done
cc -O2 -shared -fPIC "$ROOT/bench/percall/callgrind_toggle.c" -o "$TMP/libpercall_toggle.so"

# ir FILE: the total instructions of one callgrind output
ir() { awk '/^totals:/ {print $2; exit}' "$1"; }
# own FILE: those in plait's own objects (libplait.so, the plugins), without
# libc, libfabric, gloo and Python: gloo's event-loop thread and the futex
# wake-ups are timing-dependent, so the total varies run to run for gloo.
own() {
  callgrind_annotate --auto=no --inclusive=no --threshold=100 "$1" |
    awk '/\[[^]]*libplait[^]]*\]$/ {gsub(",", "", $1); s += $1} END {print s + 0}'
}

# run_c VERSION TRANSPORT MODE STEPS -> "IR0 IR1"
run_c() {
  local v=$1 tr=$2 mode=$3 steps=$4 b=$OLD_BUILD port pids=() r
  [ "$v" = new ] && b=$NEW_BUILD
  port=$((20000 + RANDOM % 20000))
  for r in 0 1; do
    PLAIT_SECRET=percall-instructions-secret-0123456789 PLAIT_RANK=$r PLAIT_SIZE=2 PLAIT_LOCAL_RANK=$r PLAIT_LOCAL_SIZE=2 \
    PLAIT_RENDEZVOUS=127.0.0.1:$port PLAIT_TRANSPORT=$tr PLAIT_PLUGIN_PATH="$b/lib" \
    FI_PROVIDER=${FI_PROVIDER:-shm} \
      timeout 900 valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$v.$tr.$mode.$steps.$r" \
        "$TMP/percall-$v" "$mode" "$steps" >"$TMP/log.$v.$tr.$mode.$steps.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p" || { echo "percall: $v $tr $mode $steps failed:" >&2
                   tail -20 "$TMP/log.$v.$tr.$mode.$steps".* >&2; exit 1; }
  done
  local c=$TMP/cg.$v.$tr.$mode.$steps
  echo "$(ir "$c.0") $(ir "$c.1") $(own "$c.0") $(own "$c.1")"
}

# run_py VERSION CALLS -> IR
run_py() {
  local v=$1 calls=$2 b=$OLD_BUILD
  [ "$v" = new ] && b=$NEW_BUILD
  PYTHONPATH="$TMP/$v-src/bindings/python" PLAIT_LIBRARY="$b/lib/libplait.so" \
  PLAIT_PLUGIN_PATH="$b/lib" PLAIT_TRANSPORT=${PLAIT_PY_TRANSPORT:-ofi} \
  FI_PROVIDER=${FI_PROVIDER:-shm} OMP_NUM_THREADS=1 \
    timeout 1800 valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes \
      --callgrind-out-file="$TMP/cg.$v.py.$calls" \
      /usr/bin/python3 - "$calls" "$TMP/libpercall_toggle.so" >"$TMP/log.$v.py.$calls" 2>&1 <<'PY' || {
import ctypes, sys
import torch
import plait.torch as hvd
toggle = ctypes.CDLL(sys.argv[2])
hvd.init()
t = torch.ones(16384)
hvd.synchronize(hvd.allreduce_async_(t, name="percall", op=hvd.Sum))
for _ in range(int(sys.argv[1])):
    toggle.percall_start()
    h = hvd.allreduce_async_(t, name="percall", op=hvd.Sum)
    toggle.percall_stop()
    while not hvd.poll(h):  # not counted: how often it polls depends on timing
        pass
    toggle.percall_start()
    hvd.synchronize(h)
    toggle.percall_stop()
hvd.shutdown()
PY
    echo "percall: python $v $calls failed:" >&2; tail -20 "$TMP/log.$v.py.$calls" >&2; exit 1; }
  # the calling thread's file (-01) only: the coordinator thread's work
  # overlaps the counted calls as timing allows
  echo "$(ir "$TMP/cg.$v.py.$calls-01") $(own "$TMP/cg.$v.py.$calls-01")"
}

row() { printf '%-40s %10d %10d %7.3f\n' "$1" "$2" "$3" "$(echo "$3 / $2" | bc -l)"; }
printf '%-40s %10s %10s %7s\n' "per call, instructions (Ir)" old new ratio
for row in $ROWS; do
  case $row in
    c-lone-*|c-burst-*)
      tr=${row##*-}; mode=${row#c-}; mode=${mode%-*}
      a=$N1 z=$N2; [ "$mode" = burst ] && a=$B1 z=$B2
      declare -A per=()
      for v in old new; do
        read -r a0 a1 ao0 ao1 <<<"$(run_c $v "$tr" "$mode" "$a")"
        read -r z0 z1 zo0 zo1 <<<"$(run_c $v "$tr" "$mode" "$z")"
        per[$v.0]=$(( (z0 - a0) / (z - a) )); per[$v.1]=$(( (z1 - a1) / (z - a) ))
        per[$v.o0]=$(( (zo0 - ao0) / (z - a) )); per[$v.o1]=$(( (zo1 - ao1) / (z - a) ))
      done
      for r in 0 1; do
        row "$mode $tr, rank $r: all" "${per[old.$r]}" "${per[new.$r]}"
        row "$mode $tr, rank $r: plait's objects" "${per[old.o$r]}" "${per[new.o$r]}"
      done
      unset per ;;
    py-torch)
      read -r oa ooa <<<"$(run_py old "$P1")"; read -r oz ooz <<<"$(run_py old "$P2")"
      read -r na noa <<<"$(run_py new "$P1")"; read -r nz noz <<<"$(run_py new "$P2")"
      row "torch submit+sync: all" $(( (oz - oa) / (P2 - P1) )) $(( (nz - na) / (P2 - P1) ))
      row "torch submit+sync: plait's objects" $(( (ooz - ooa) / (P2 - P1) )) \
        $(( (noz - noa) / (P2 - P1) )) ;;
    *) echo "percall: unknown row $row" >&2; exit 2 ;;
  esac
done
