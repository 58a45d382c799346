#!/usr/bin/env bash
# Where a lone cached 4 KiB allreduce's hand-offs go, in counts that the
# machine's load does not move much (issue 37, goal 1): system calls and
# context switches per operation, all threads of all ranks together, for
# one or more builds side by side (interleaved rounds).
#
#   bench/handoff_counts.sh [ROUNDS] LABEL=BUILD_DIR [LABEL=BUILD_DIR ...]
#
# Each cell runs `plait-bench latency` (ofi/shm) under `perf stat` twice,
# with N1 and N2 iterations (HANDOFF_N1/N2, default 1000/3000), and prints
# (count(N2) - count(N1)) / (N2 - N1): start-up and shutdown cancel out.
# Rows: 1 rank (no peer: the two thread hand-offs alone) and 2 ranks with the
# cached epoch on (PLAIT_CACHED_EPOCH=1), the configuration goal 1 measures.
# Per-rank figures: divide the 2-rank row by 2. Needs perf with the
# syscalls tracepoints (perf_event_paranoid <= 2 and tracefs readable).
set -euo pipefail
rounds=1
if [[ ${1:-} =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
[ $# -ge 1 ] || { sed -n 2,16p "$0"; exit 2; }
n1=${HANDOFF_N1:-1000}; n2=${HANDOFF_N2:-3000}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ev=context-switches,syscalls:sys_enter_futex,syscalls:sys_enter_poll,syscalls:sys_enter_epoll_wait
ev=$ev,syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_sched_yield
ev=$ev,syscalls:sys_enter_clock_nanosleep,raw_syscalls:sys_enter
export PLAIT_TRANSPORT=ofi FI_PROVIDER=shm
# cell BUILD NP: one line of per-operation counts
cell() {
  local b=$1 np=$2 n
  for n in $n1 $n2; do
    timeout 300 perf stat -x, -e "$ev" -o "$tmp/ps.$n" -- "$b/bin/plaitrun" -np "$np" \
      "$b/bin/plait-bench" latency --iters "$n" --warmup 0 >"$tmp/out.$n" 2>&1
  done
  local med; med=$(awk '/4 KiB/ {print $5}' "$tmp/out.$n2")
  paste -d, <(grep -v '^#' "$tmp/ps.$n1" | grep .) <(grep -v '^#' "$tmp/ps.$n2" | grep .) |
    awk -F, -v d=$((n2 - n1)) -v med="$med" '
      { n = split($3, p, ":"); name = p[n]; sub("sys_enter_", "", name); sub("sys_enter", "all syscalls", name)
        v[NR] = ($(NF / 2 + 1) - $1) / d; h[NR] = name }
      END { for (i = 1; i <= NR; i++) printf "%s %.2f, ", h[i], v[i]; printf "median %s us\n", med }'
}
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# per operation, all threads of all ranks: (count($n2 ops) - count($n1 ops)) / $((n2 - n1))"
for r in $(seq 1 "$rounds"); do
  for spec in "$@"; do
    label=${spec%%=*}; b=${spec#*=}
    echo "round $r $label 1 rank: $(PLAIT_CACHED_EPOCH=0 cell "$b" 1)"
    echo "round $r $label 2 ranks epoch: $(PLAIT_CACHED_EPOCH=1 cell "$b" 2)"
  done
done
echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
