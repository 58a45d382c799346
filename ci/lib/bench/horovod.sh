#!/usr/bin/env bash
# plait.torch against Horovod 0.28.1 (Gloo controller and CPU operations) at
# 2 ranks on this machine, measured by the same script
# (bench/horovod_bench.py --impl plait|horovod) with the same torch
# (Debian's python3-torch 1.13: the torch Horovod 0.28.1 builds against here):
#   fused    200 x 64 KiB float32, allreduce_async_ all, then synchronize all
#   large    one 64 MiB float32 allreduce
#   unfused  200 x 64 KiB float32, synchronize after each (the baseline)
# plait runs under plaitrun with its defaults; Horovod under horovodrun
# --gloo with HOROVOD_FUSION_THRESHOLD=64 MiB (plait's default; Horovod's own
# is 128 MiB, which changes nothing here: 200 x 64 KiB is 12.5 MiB) and its
# default cycle time (1 ms, as plait). Runs alternate (plait first in odd
# rounds, Horovod first in even ones); the table gives the median over the
# rounds of each run's median per step, and the ratios.
#
# Horovod is built on first use into ~/.cache/plait/venvs/horovod (ci/lib/horovod.sh, about
# 8 minutes); when it cannot be built, or a Horovod run fails, plait is
# measured alone and that is said loudly: a "Horovod: NOT MEASURED: <reason>"
# line now, and again above the table, whose Horovod column says NOT
# MEASURED. PLAIT_CI_NO_HOROVOD=<reason> forces that path (to check it).
#
#   ci/bench-horovod [ROUNDS] [-- horovod_bench.py options]     (default 3 rounds)
#   e.g. ci/bench-horovod 5 -- --steps 30 --workloads fused,large
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
if [ $# -gt 0 ] && [ "$1" != -- ]; then rounds="$1"; shift; fi
[ "${1:-}" = -- ] && shift
source ci/lib/deps.sh
source ci/lib/horovod.sh
plait_ensure_packages python3-torch python3-numpy libopenblas0-pthread
cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLAIT_BUILD_TESTS=OFF >/dev/null
cmake --build build/bench >/dev/null

python=/usr/bin/python3
results=build/bench/horovod-bench.jsonl
rm -f "$results"
# not_measured REASON: Horovod is left out; said now and in the report.
not_measured() {
  echo "ci/bench-horovod: Horovod: NOT MEASURED: $1; measuring plait alone" >&2
  "$python" -c 'import json, sys; print(json.dumps({"kind": "missing", "system": "horovod",
    "reason": sys.argv[1]}))' "$1" >>"$results"
  hvd_python=""
}
hvd_python=""
if [ -n "${PLAIT_CI_NO_HOROVOD:-}" ]; then
  not_measured "$PLAIT_CI_NO_HOROVOD (PLAIT_CI_NO_HOROVOD)"
else
  hvd_err="$(mktemp)"
  if plait_horovod_python >"$hvd_err.path" 2> >(tee "$hvd_err" >&2); then
    wait $! 2>/dev/null || true
    hvd_python="$(cat "$hvd_err.path")"
    horovodrun="$(dirname "$hvd_python")/horovodrun"
  else
    wait $! 2>/dev/null || true
    not_measured "$(tail -1 "$hvd_err" | sed 's/^ci: //')"
  fi
  rm -f "$hvd_err" "$hvd_err.path"
fi
run_plait() {
  echo "== round $1 of $rounds: plait"
  build/bench/bin/plaitrun -np 2 --no-prefix "$python" bench/horovod_bench.py \
    --impl plait --json "$results" --round "$1" "${@:2}"
}
run_horovod() {
  echo "== round $1 of $rounds: Horovod"
  local rc=0
  HOROVOD_FUSION_THRESHOLD=$((64 * 1024 * 1024)) \
    "$horovodrun" -np 2 -H localhost:2 --gloo "$hvd_python" bench/horovod_bench.py \
    --impl horovod --json "$results" --round "$1" "${@:2}" || rc=$?
  [ "$rc" = 0 ] || not_measured "horovodrun failed in round $1 (exit $rc, output above)"
}
for r in $(seq "$rounds"); do
  if [ -z "$hvd_python" ]; then
    run_plait "$r" "$@"
  elif [ $((r % 2)) = 1 ]; then
    run_plait "$r" "$@"
    run_horovod "$r" "$@"
  else
    run_horovod "$r" "$@"
    run_plait "$r" "$@"
  fi
done
echo
echo "== plait vs Horovod, 2 ranks on $(hostname) ($(nproc) cores), load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$python" bench/horovod_bench.py --report "$results"
echo "(per-run figures in $results)"
