#!/usr/bin/env bash
# The hierarchical allreduce against the flat one across hosts, side by side.
#
#   bench/hosts/hier.sh [ROUNDS] [OUT]        (root; plait-bench and the gloo plugin built in build/)
#
# HOSTS (default 2) network-namespace hosts (tests/tools/hosts/lib.sh), 2 ranks each; each
# host's link shaped by tbf to RATE (default 1gbit) in its outgoing direction,
# so every byte between the hosts crosses a 1 Gbit/s link, as between two
# machines with 1 Gbit/s NICs; ranks of one host talk over loopback.
# Each round runs one job with PLAIT_HIERARCHICAL_ALLREDUCE=off, one with on,
# then one with auto (the default: per response, hier_plan.h), interleaved,
# so load on the machine falls on all alike: plait-bench
# allreduce of SIZE (default 64M) float32 in place, ITERS timed iterations
# after 2 warm-up ones, every result checked. Prints each round's median and,
# at the end, the median over rounds of each mode and the ratios flat / on and
# flat / auto (the summary's auto_ms, auto_ratio; auto_path: whether auto ran
# it per response or, on a layout that gains too little, flat); appends one
# JSON object per job to OUT (default bench/results/hier-hosts.jsonl); the
# summary row's "local" says what the steps within a host ran on (rank 0's
# info line: "ofi shm", or the job's transport; EXTRA_ENV=
# PLAIT_HIERARCHICAL_LOCAL_TRANSPORT=job keeps them on the job's).
# Env: PLACEMENT (block: ranks 0, 1 on host 1 and 2, 3 on host 2, as
# plaitrun -H places them, the default; cyclic: 0, 2 on host 1 and 1, 3 on
# host 2, as srun --distribution=cyclic), RATE, SIZE, ITERS (default 5),
# TRANSPORT (default gloo), EXTRA_ENV (more NAME=value for every rank,
# e.g. PLAIT_LOG_LEVEL=debug), MIX (a
# bench/mixes file: then plait-bench fusion with that mix, 64M threshold,
# instead of allreduce), COLL=allgather (plait-bench allgather of SIZE bytes
# of output, PLAIT_HIERARCHICAL_ALLGATHER off then on, instead of the
# allreduce). PEERS (e.g. "openmpi openmpi_han horovod"): in each round,
# after plait's two jobs, the same allreduce by Open MPI (mpirun; _han: with
# its hierarchical coll/han) and by Horovod (horovodrun --gloo) on the same
# hosts (bench/hosts/peers.sh); the summary is then a
# "hier-hosts-peers-summary" row with <peer>_ms for each.
set -euo pipefail
rounds="${1:-3}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${2:-$root/bench/results/hier-hosts.jsonl}"
placement="${PLACEMENT:-block}" nh="${HOSTS:-2}"
rate="${RATE:-1gbit}" size="${SIZE:-64M}" coll="${COLL:-allreduce}" iters="${ITERS:-5}" transport="${TRANSPORT:-gloo}"
bench="$root/build/bin/plait-bench"
[ -x "$bench" ] || { echo "no $bench: cmake --build build --target plait-bench plait-transport-gloo"; exit 1; }
# shellcheck source=../../tests/tools/hosts/lib.sh
. "$root/tests/tools/hosts/lib.sh"
modes="off on auto ${PEERS:-}"
# ofi across hosts over tcp; shm left in, for the local set's own instance
# (PLAIT_HIERARCHICAL_LOCAL_TRANSPORT=auto): FI_PROVIDER=tcp alone would leave
# it out of the whole process. gloo: libfabric only for that instance.
fi_env=(FI_TCP_IFACE=eth0 PLAIT_LOG_LEVEL=info) # info: rank 0's line says what the local set ran on
[ "$transport" != ofi ] || fi_env+=("FI_PROVIDER=${FI_PROVIDER:-tcp,shm}")
[ -z "${PEERS:-}" ] || [ -z "${MIX:-}${COLL:-}" ] || { echo "PEERS runs an allreduce of SIZE, not a MIX or COLL"; exit 2; }
case "$coll" in allreduce | allgather) ;; *) echo "COLL: '$coll' is not allreduce or allgather"; exit 2 ;; esac
for mode in ${PEERS:-}; do
  case "$mode" in
    openmpi | openmpi_han | horovod) ;;
    *) echo "PEERS: '$mode' is not openmpi, openmpi_han or horovod"; exit 2 ;;
  esac
done
hosts_require
hosts_make "$nh"
# shellcheck source=peers.sh
[ -z "${PEERS:-}" ] || { . "$here/peers.sh" && peers_setup; }
for n in $(seq 1 "$nh"); do
  tc -n "plait-$id-h$n" qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
done
echo "$nh hosts x 2 ranks ($placement), each host's link: tbf $rate; $transport; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

run_job() { # mode round: one job, its plait-bench JSON in $tmp/<mode>.<round>.json
  local mode="$1" round="$2" r n l json="$tmp/$1.$2.json" secret port
  secret="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
  port=$((29500 + round * 3))
  case "$mode" in on) port=$((port + 1)) ;; auto) port=$((port + 2)) ;; esac
  local args=(allreduce --min "$size" --max "$size" --iters "$iters" --warmup 2 --in-place)
  local knob=PLAIT_HIERARCHICAL_ALLREDUCE
  if [ "$coll" = allgather ]; then
    args=(allgather --min "$size" --max "$size" --iters "$iters" --warmup 2)
    knob=PLAIT_HIERARCHICAL_ALLGATHER
  fi
  [ -n "${MIX:-}" ] && args=(fusion --mix "$MIX" --thresholds 64M --steps "$iters" --warmup 2)
  local job=()
  for n in $(seq 1 "$nh"); do
    for l in 0 1; do
      r=$(((n - 1) * 2 + l))
      [ "$placement" = block ] || r=$((l * nh + n - 1)) # cyclic: 0 and nh on host 1
      on_host "$n" env PLAIT_TRANSPORT="$transport" "${fi_env[@]}" \
        PLAIT_RANK=$r PLAIT_SIZE=$((nh * 2)) PLAIT_LOCAL_RANK=$l PLAIT_LOCAL_SIZE=2 PLAIT_SECRET="$secret" \
        PLAIT_RENDEZVOUS=10.77.0.1:$port PLAIT_TIMEOUT_S=60 "$knob=$mode" \
        OMP_NUM_THREADS=1 ${EXTRA_ENV:-} "$bench" "${args[@]}" --json "$json" >"$tmp/out.$mode.$round.$r" 2>&1 &
      job+=($!)
      pids+=($!)
    done
  done
  local status=0
  for p in "${job[@]}"; do wait "$p" || status=1; done
  [ $status = 0 ] || { cat "$tmp"/out."$mode.$round".*; echo "FAIL: the $mode job of round $round"; exit 1; }
  cat "$tmp/out.$mode.$round.0"
  # at debug level: every rank's time in each step of each hierarchical allreduce
  grep -h "hierarchical allreduce of" "$tmp"/out."$mode.$round".[1-9]* 2>/dev/null || true
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# A job's time per operation (allreduce) or per step (fusion), in ms, from its JSON.
job_ms() {
  python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = rows[-1]
keys = [k for k in r if k.endswith("_s_median")]
if not keys:
    sys.exit("no median time in " + json.dumps(r))
print(r[keys[0]] * 1000)
PY
}

for round in $(seq 1 "$rounds"); do
  for mode in $modes; do
    case "$mode" in off | on | auto) run_job "$mode" "$round" ;; *) peers_job "$mode" "$round" ;; esac
  done
done
declare -A med
for mode in $modes; do
  for round in $(seq 1 "$rounds"); do job_ms "$tmp/$mode.$round.json"; done >"$tmp/$mode.ms"
  med[$mode]="$(median <"$tmp/$mode.ms")"
done
ratio="$(awk -v a="${med[off]}" -v b="${med[on]}" 'BEGIN { printf "%.2f", a / b }')"
auto_ratio="$(awk -v a="${med[off]}" -v b="${med[auto]}" 'BEGIN { printf "%.2f", a / b }')"
# what the hierarchical job's steps within a host ran on (rank 0's info line)
local_over="$(sed -n 's/.*within the host over \([^,]*\), across hosts.*/\1/p' "$tmp/out.on.1.0" | head -1)"
local_over="${local_over:-$transport}"
# whether auto made the hierarchical allreduce's sets (then each response of
# PLAIT_HIERARCHICAL_THRESHOLD bytes or more ran hierarchically) or ran flat
auto_path=flat
! grep -q "hierarchical collectives (allreduce: auto" "$tmp/out.auto.1.0" || auto_path="hierarchical from the threshold"
what="${MIX:+fusion $(basename "$MIX")}"
what="${what:-$coll $size}"
echo "RESULT $what, $nh hosts x 2 ranks ($placement), tbf $rate, $transport (within a host: $local_over), $rounds interleaved rounds:" \
  "flat ${med[off]} ms, hierarchical ${med[on]} ms, auto ${med[auto]} ms (median of rounds): ${ratio}x, auto ${auto_ratio}x"
peers_json=""
for mode in ${PEERS:-}; do
  echo "RESULT $mode ${med[$mode]} ms: hierarchical plait" \
    "$(awk -v a="${med[$mode]}" -v b="${med[on]}" 'BEGIN { printf "%.2f", a / b }')x faster"
  peers_json="$peers_json, \"${mode}_ms\": ${med[$mode]}"
done
mkdir -p "$(dirname "$out")"
stamp="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
for mode in $modes; do
  for round in $(seq 1 "$rounds"); do
    python3 - "$tmp/$mode.$round.json" "$mode" "$round" "$rate" "$stamp" "$(cut -d' ' -f1 /proc/loadavg)" "$what" "$placement" "$nh" <<'PY' >>"$out"
import json, sys
path, mode, rnd, rate, stamp, load, what, placement, hosts = sys.argv[1:]
row = [json.loads(l) for l in open(path) if l.strip()][-1]
system = {"off": "plait", "on": "plait", "auto": "plait"}.get(mode, mode)
row.update({"bench": "hier-hosts", "what": what, "hierarchical": mode, "system": system, "round": int(rnd),
            "hosts": int(hosts), "ranks_per_host": 2, "placement": row.get("placement", placement), "link": "tbf " + rate, "when": stamp,
            "load1": float(load)})
print(json.dumps(row, sort_keys=True))
PY
  done
done
echo "{\"bench\": \"hier-hosts${PEERS:+-peers}-summary\", \"what\": \"$what\", \"placement\": \"$placement\", \"hosts\": $nh, \"ranks_per_host\": 2, \"transport\": \"$transport\", \"local\": \"$local_over\", \"link\": \"tbf $rate\", \"rounds\": $rounds, \"flat_ms\": ${med[off]}, \"hierarchical_ms\": ${med[on]}, \"ratio\": $ratio, \"auto_ms\": ${med[auto]}, \"auto_ratio\": $auto_ratio, \"auto_path\": \"$auto_path\"$peers_json, \"when\": \"$stamp\"}" >>"$out"
