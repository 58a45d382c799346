# horovod: plait.torch against Horovod 0.28.1, measured by the same script at 2 ranks.
#
# plait.torch against Horovod 0.28.1 (Gloo controller and CPU operations) at 2 ranks on this
# machine, measured by the same script (bench/horovod_bench.py --impl plait|horovod) with the
# same torch (Debian's python3-torch 1.13: the torch Horovod 0.28.1 builds against here):
#   fused    200 x 64 KiB float32, allreduce_async_ all, then synchronize all
#   large    one 64 MiB float32 allreduce
#   unfused  200 x 64 KiB float32, synchronize after each (the baseline)
# plait runs under plaitrun with its defaults; Horovod under horovodrun --gloo with
# HOROVOD_FUSION_THRESHOLD=64 MiB (plait's default; Horovod's own is 128 MiB, which changes
# nothing here: 200 x 64 KiB is 12.5 MiB) and its default cycle time (1 ms, as plait). Runs
# alternate (plait first in odd rounds, Horovod first in even ones); the table gives the
# median over the rounds of each run's median per step, and the ratios.
#
# Horovod is built on first use into ~/.cache/plait/venvs/horovod (ci/lib/horovod.sh torch,
# about 8 minutes); when it cannot be built, or a Horovod run fails, plait is measured alone
# and that is said loudly: a "NOT MEASURED: horovod: <reason>" line now, and again above the
# table, whose Horovod column says NOT MEASURED. PLAIT_CI_NO_HOROVOD=<reason> forces that path.
# Results: OUT/horovod.jsonl (one line per run) and OUT/horovod.txt (the table).
#
#   ci/bench horovod [--rounds N] [-- horovod_bench.py options]     (default 3 rounds)
#   e.g. ci/bench horovod --rounds 5 -- --steps 30 --workloads fused,large
if [ $# -gt 0 ]; then [ "$1" = -- ] || bench_no_args "$@"; shift; fi
rounds="${rounds:-3}"
plait_ensure_packages python3-torch python3-numpy libopenblas0-pthread
bench_build build/bench
python=/usr/bin/python3
results="$out/horovod.jsonl"
rm -f "$results"
bench_horovod torch
if [ -z "$hvd_python" ]; then
  bench_missing "$results" horovod "$hvd_reason"
  echo "ci/bench horovod: measuring plait alone" >&2
fi
horovodrun="$(dirname "${hvd_python:-.}")/horovodrun"
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
  if [ "$rc" != 0 ]; then
    bench_missing "$results" horovod "horovodrun failed in round $1 (exit $rc, output above)"
    hvd_python=""
  fi
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
{
  echo
  echo "== plait vs Horovod, 2 ranks on $(hostname) ($(nproc) cores), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  "$python" bench/horovod_bench.py --report "$results"
} | tee "$out/horovod.txt"
echo "(per-run figures in $results)"
bench_docs "$results" "$out/horovod.txt"
